"""Sorting, top-k and searching: lax.sort / top_k and jnp.sort, argsort, lexsort, partition,
searchsorted and unique against NumPy, eagerly and under jit; sort_complex against JAX."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from jax_oracle import check_against_jax, jjnp
from util import assert_allclose, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember import errors, lax

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.uint32, np.float16, BF16, np.float32]


def _random(rng, shape, dtype, nan_fraction=0.2):
    """Values with many ties (and NaNs, infinities and signed zeros for floats)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -4
        return rng.integers(lo, 5, shape).astype(dtype)
    x = rng.choice(np.array([-np.inf, -2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, np.inf]), shape)
    x[rng.random(shape) < nan_fraction] = np.nan
    return x.astype(dtype)


def _np_key(x):
    """NumPy sorts bfloat16 through float32 (same order)."""
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype == BF16 else x


@st.composite
def _array_and_axis(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=5))
    dtype = draw(st.sampled_from(DTYPES))
    x = _random(np.random.default_rng(draw(st.integers(0, 2 ** 16))), shape, dtype)
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return x, axis


# --- lax.sort and lax.top_k -------------------------------------------------------------------
@given(_array_and_axis())
def test_lax_sort_matches_numpy_stable_sort(case):
    x, axis = case
    order = np.argsort(_np_key(x), axis=axis, kind="stable")
    expected = np.take_along_axis(x, order, axis)
    check_eager_and_jit(lambda v: lax.sort(v, dimension=axis), x, expected=expected)
    index = np.broadcast_to(np.arange(x.shape[axis]).reshape([-1] + [1] * (x.ndim - 1 - axis % x.ndim)),
                            x.shape).astype(np.int32)
    check_eager_and_jit(lambda v, i: lax.sort_key_val(v, i, axis), x, index,
                        expected=(expected, order.astype(np.int32)))


def test_lax_sort_nan_last_and_signed_zeros_stable():
    x = np.array([1.0, np.nan, -0.0, 0.0, -np.nan, -np.inf, np.inf], np.float32)
    values, index = lax.sort_key_val(x, np.arange(7, dtype=np.int32))
    assert_allclose(values, np.array([-np.inf, -0.0, 0.0, 1.0, np.inf, np.nan, np.nan], np.float32))
    np.testing.assert_array_equal(np.asarray(index), [5, 2, 3, 0, 6, 1, 4])


def test_lax_sort_several_operands(rng):
    keys1 = rng.integers(0, 3, (4, 6)).astype(np.int8)
    keys2 = _random(rng, (4, 6), np.float32)
    payload = rng.normal(size=(4, 6)).astype(np.float32)
    order = np.lexsort((keys2, keys1), axis=1)
    expected = tuple(np.take_along_axis(a, order, 1) for a in (keys1, keys2, payload))
    out = check_eager_and_jit(lambda a, b, c: lax.sort((a, b, c), dimension=1, num_keys=2), keys1, keys2,
                              payload, expected=expected)
    assert isinstance(out, tuple) and len(out) == 3
    only_first = np.argsort(keys1, axis=0, kind="stable")
    check_eager_and_jit(lambda a, c: lax.sort([a, c], dimension=0), keys1, payload,
                        expected=(np.take_along_axis(keys1, only_first, 0),
                                  np.take_along_axis(payload, only_first, 0)))
    text = str(ember.make_jaxpr(lambda a, b: lax.sort((a, b), num_keys=2))(keys1, keys2))
    assert "sort[dimension=1 is_stable=True num_keys=2] a b" in text


def test_lax_sort_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match="all operands must have one shape"):
        lax.sort((x, np.zeros(3, np.float32)))
    with pytest.raises(ValueError, match="num_keys=3 must be between 1 and the number of operands"):
        lax.sort((x, x), num_keys=3)
    with pytest.raises(ValueError, match="dimension 2 is out of bounds for an array of dimension 2"):
        lax.sort(x, dimension=2)
    with pytest.raises(ValueError, match="out of bounds for an array of dimension 0"):
        lax.sort(np.float32(1.0))


def _np_top_k(x, k, axis):
    # Descending with ties by lower index: stable sort of the negated ranks (NaN largest).
    x = np.moveaxis(_np_key(x), axis, -1).astype(np.float64)
    key = np.where(np.isnan(x), -np.inf, -x)
    order = np.argsort(key, axis=-1, kind="stable")[..., :k]
    return np.moveaxis(np.take_along_axis(x, order, -1), -1, axis), np.moveaxis(order, -1, axis)


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.int8, np.uint16])
def test_lax_top_k(rng, dtype):
    x = _random(rng, (3, 7), dtype)
    for k, axis in [(0, -1), (3, -1), (7, 1), (2, 0)]:
        values, indices = _np_top_k(x, k, axis)
        check_eager_and_jit(lambda v: lax.top_k(v, k, axis=axis), x,
                            expected=(values.astype(dtype), indices.astype(np.int32)))


def test_lax_top_k_nan_first_and_errors():
    values, indices = lax.top_k(np.array([1.0, np.nan, 3.0, 3.0, np.inf], np.float32), 3)
    assert_allclose(values, np.array([np.nan, np.inf, 3.0], np.float32))
    np.testing.assert_array_equal(np.asarray(indices), [1, 4, 2])
    with pytest.raises(ValueError, match="k=4 must be between 0 and the size 3"):
        lax.top_k(np.zeros(3, np.float32), 4)


# --- jnp.sort / argsort / lexsort / partition ---------------------------------------------------
@given(_array_and_axis(), st.booleans())
def test_sort_and_argsort(case, descending):
    x, axis = case
    key = _np_key(x)
    if descending:  # JAX: reverse, stable sort, reverse (NaNs first, ties keep index order)
        order = np.flip(np.argsort(np.flip(key, axis), axis=axis, kind="stable"), axis)
        order = x.shape[axis] - 1 - order
    else:
        order = np.argsort(key, axis=axis, kind="stable")
    check_eager_and_jit(lambda v: jnp.sort(v, axis=axis, descending=descending), x,
                        expected=np.take_along_axis(x, order, axis))
    check_eager_and_jit(lambda v: jnp.argsort(v, axis=axis, descending=descending), x,
                        expected=order.astype(np.int32))


def test_sort_flattened_and_options(rng):
    x = _random(rng, (3, 4), np.float32)
    check_eager_and_jit(lambda v: jnp.sort(v, axis=None), x, expected=np.sort(x, axis=None))
    check_eager_and_jit(lambda v: jnp.argsort(v, axis=None, dtype=np.int16), x,
                        expected=np.argsort(x, axis=None, kind="stable").astype(np.int16))
    assert_allclose(jnp.sort(x, kind="quicksort", stable=False), np.sort(x))
    with pytest.raises(NotImplementedError, match="'order' argument to jnp.sort"):
        jnp.sort(x, order="f0")
    with pytest.raises(ValueError, match="axis 2 is out of bounds for an array of dimension 2"):
        jnp.argsort(x, axis=2)


def test_lexsort(rng):
    a = rng.integers(0, 3, (2, 8)).astype(np.int32)
    b = _random(rng, (2, 8), np.float16)
    c = rng.random((2, 8)) < 0.5
    for axis in (-1, 0):
        check_eager_and_jit(lambda x, y, z: jnp.lexsort((x, y, z), axis=axis), a, b, c,
                            expected=np.lexsort((a, b, c), axis=axis).astype(np.int32))
    assert int(jnp.lexsort([np.float32(1.0)])) == 0
    with pytest.raises(TypeError, match="need sequence of keys"):
        jnp.lexsort([])
    with pytest.raises(ValueError, match="all keys need to be the same shape"):
        jnp.lexsort([a, a[0]])


def test_partition_and_argpartition(rng):
    x = _random(rng, (4, 9), np.float32)
    for kth, axis in [(0, -1), (4, 1), (-1, 1), (2, 0), ([1, 3], 0)]:
        parted = np.asarray(check_eager_and_jit(lambda v: jnp.partition(v, kth, axis=axis), x))
        expected = np.partition(x, kth, axis=axis)
        for k in np.atleast_1d(kth):  # the k-th element is in place, smaller before, larger after
            pivot = np.take(expected, [k], axis=axis)
            np.testing.assert_array_equal(np.take(parted, [k], axis=axis), pivot)
            n = x.shape[axis]
            before, after = np.take(parted, range(k % n), axis=axis), np.take(parted, range(k % n + 1, n), axis=axis)
            assert np.all(~(before > pivot)) and np.all(~(after < pivot))
        indices = np.asarray(jnp.argpartition(x, kth, axis=axis))
        np.testing.assert_array_equal(np.take_along_axis(x, indices, axis), parted)
    with pytest.raises(ValueError, match=r"kth\(=9\) out of bounds \(9\)"):
        jnp.partition(x, 9)


# --- searchsorted -----------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "sort", "compare_all"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint8, BF16])
def test_searchsorted(rng, method, side, dtype):
    a = np.sort(_np_key(_random(rng, 12, dtype))).astype(dtype)
    v = _random(rng, (3, 4), dtype)
    expected = np.searchsorted(_np_key(a), _np_key(v), side=side).astype(np.int32)
    check_eager_and_jit(lambda s, q: jnp.searchsorted(s, q, side=side, method=method), a, v, expected=expected)


def test_searchsorted_details(rng):
    a = np.array([1, 2, 2, 5], np.int32)
    check_eager_and_jit(lambda s: jnp.searchsorted(s, 2.5), a, expected=np.int32(3))  # promoted compare
    check_eager_and_jit(lambda s: jnp.searchsorted(s, np.zeros((2, 0), np.int32)), a,
                        expected=np.zeros((2, 0), np.int32))
    check_eager_and_jit(lambda q: jnp.searchsorted(np.zeros(0, np.float32), q), np.ones(3, np.float32),
                        expected=np.zeros(3, np.int32))
    unsorted = rng.permutation(10).astype(np.float32)
    sorter = np.argsort(unsorted).astype(np.int32)
    queries = np.array([-1.0, 3.0, 3.5, 12.0], np.float32)
    for method in ("sort", "compare_all"):
        check_eager_and_jit(lambda s, p, q: jnp.searchsorted(s, q, side="right", sorter=p, method=method),
                            unsorted, sorter, queries,
                            expected=np.searchsorted(unsorted, queries, side="right", sorter=sorter).astype(np.int32))
    with pytest.raises(ValueError, match="'middle' is an invalid value for keyword 'side'"):
        jnp.searchsorted(a, 1, side="middle")
    with pytest.raises(ValueError, match="'bisect' is an invalid value for keyword 'method'"):
        jnp.searchsorted(a, 1, method="bisect")
    with pytest.raises(ValueError, match="a should be 1-dimensional"):
        jnp.searchsorted(a.reshape(2, 2), 1)


# --- unique ---------------------------------------------------------------------------------------------
def _np_unique_results(x, **kwargs):
    out = np.unique(x, return_index=True, return_inverse=True, return_counts=True, **kwargs)
    return [np.asarray(o) for o in out]


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.float32, np.float16, np.bool_])
def test_unique_matches_numpy(rng, dtype):
    x = _random(rng, (3, 5), dtype)
    values, index, inverse, counts = _np_unique_results(x)
    got = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True)
    assert len(got) == 4
    assert_allclose(got[0], values)
    for ours, theirs in zip(got[1:], (index, inverse, counts)):
        assert_allclose(ours, theirs.astype(np.int32))
    assert_allclose(jnp.unique(x), values)
    only_counts = jnp.unique(x, return_counts=True)
    assert len(only_counts) == 2 and np.array_equal(np.asarray(only_counts[1]), counts)


def test_unique_nan_handling():
    x = np.array([1.0, np.nan, 0.0, np.nan, 1.0], np.float32)
    assert_allclose(jnp.unique(x), np.array([0.0, 1.0, np.nan], np.float32))
    assert_allclose(jnp.unique(x, equal_nan=False), np.array([0.0, 1.0, np.nan, np.nan], np.float32))


def test_unique_along_an_axis(rng):
    x = rng.integers(0, 2, (6, 2, 3)).astype(np.int32)
    x[3] = x[0]
    for axis in (0, 1, -1):
        expected = _np_unique_results(x, axis=axis)
        got = jnp.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
        for ours, theirs in zip(got, expected):
            assert_allclose(ours, theirs.reshape(-1) if theirs.ndim == 1 else theirs, check_dtype=False)
        assert_allclose(got[0], expected[0])


def test_unique_with_size_under_jit():
    x = np.array([3, 1, 2, 1, 3], np.int32)
    fn = ember.jit(lambda v: jnp.unique(v, size=6, return_index=True, return_inverse=True, return_counts=True))
    values, index, inverse, counts = fn(x)
    # Padding repeats the smallest value and its index (as JAX); counts pad with 0.
    assert_allclose(values, np.array([1, 2, 3, 1, 1, 1], np.int32))
    assert_allclose(index, np.array([1, 2, 0, 1, 1, 1], np.int32))
    assert_allclose(inverse, np.array([2, 0, 1, 0, 2], np.int32))
    assert_allclose(counts, np.array([2, 1, 2, 0, 0, 0], np.int32))
    values, counts = ember.jit(lambda v: jnp.unique(v, size=2, fill_value=-7, return_counts=True))(x)
    assert_allclose(values, np.array([1, 2], np.int32))
    assert_allclose(counts, np.array([2, 1], np.int32))
    assert_allclose(jnp.unique(x, size=4, fill_value=-7), np.array([1, 2, 3, -7], np.int32))
    assert_allclose(jnp.unique(np.zeros(0, np.float32), size=2), np.zeros(2, np.float32))
    assert_allclose(jnp.unique(np.zeros(0, np.float32)), np.zeros(0, np.float32))


def test_unique_needs_size_when_traced():
    with pytest.raises(errors.ConcretizationTypeError, match="jnp.unique without size="):
        ember.jit(jnp.unique)(np.array([1, 2, 2]))


# --- sort_complex, against JAX ----------------------------------------------------------------------
@pytest.mark.parametrize("a", [np.array([3.0, 1.0, 2.0], np.float32), np.array([[5, 3, 4], [6, 9, 2]], np.int32),
                               np.array([1 + 2j, 3 - 1j, 2 + 4j, 2 + 3j], np.complex64), np.array([True, False])])
def test_sort_complex_matches_jax(x64_both, a):
    out = check_against_jax("sort_complex", a)
    assert_allclose(out, np.sort_complex(a).astype(out.dtype), check_dtype=False)


def test_sort_complex_refuses_scalars_like_jax():
    with pytest.raises(ValueError, match="out of bounds"):
        jjnp.sort_complex(jjnp.asarray(2.0))
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.sort_complex(np.array(2.0, np.float32))
