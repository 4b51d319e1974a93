"""Reductions, arg-reductions, cumulative reductions and quantiles: lax primitives and jnp
functions against NumPy, eagerly and under jit, with JAX's result dtypes."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from util import assert_allclose, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember import errors, lax

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.float16, BF16, np.float32]
SMALL_INTS = [np.int8, np.int16, np.uint8, np.uint16]
INTS = SMALL_INTS + [np.int32, np.uint32]
ALL = [np.bool_] + INTS + FLOATS
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def _random(rng, shape, dtype, nan_fraction=0.0):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -5
        return rng.integers(lo, 6, shape).astype(dtype)
    x = rng.normal(size=shape) * 3
    if nan_fraction:
        x[rng.random(shape) < nan_fraction] = np.nan
    return x.astype(dtype)


def _wide(x):
    """Exact float64 / int64 copies for NumPy references."""
    x = np.asarray(x)
    return x.astype(np.float64) if x.dtype.kind == "f" or x.dtype == BF16 else x


@st.composite
def _array_and_axis(draw, dtype_choices=ALL):
    shape = draw(SHAPES)
    dtype = draw(st.sampled_from(dtype_choices))
    seed = draw(st.integers(0, 2 ** 16))
    x = _random(np.random.default_rng(seed), shape, dtype)
    ndim = len(shape)
    axis = draw(st.one_of(
        st.none(),
        st.integers(-ndim, ndim - 1) if ndim else st.none(),
        st.lists(st.integers(0, ndim - 1), unique=True).map(tuple) if ndim else st.just(()),
    ))
    return x, axis, draw(st.booleans())


def _sum_dtype(dt):
    """JAX's (x64 off) sum/prod dtype: bools and integers narrower than 32 bits widen."""
    dt = np.dtype(dt)
    if dt == np.bool_ or dt.kind == "i":
        return np.dtype(np.int32) if dt.itemsize < 4 else dt
    if dt.kind == "u":
        return np.dtype(np.uint32) if dt.itemsize < 4 else dt
    return dt


def _mean_dtype(dt):
    dt = np.dtype(dt)
    return dt if dt.kind == "f" or dt == BF16 else np.dtype(np.float32)


# --- lax primitives ---------------------------------------------------------------------------
@pytest.mark.parametrize("name,np_fn,dtype", [
    ("reduce_sum", np.sum, np.float32), ("reduce_sum", np.sum, np.int8), ("reduce_sum", np.sum, np.uint16),
    ("reduce_prod", np.prod, np.float32), ("reduce_prod", np.prod, np.int16),
    ("reduce_max", np.max, np.float32), ("reduce_max", np.max, np.bool_), ("reduce_max", np.max, np.uint8),
    ("reduce_min", np.min, BF16), ("reduce_min", np.min, np.int32),
    ("reduce_and", np.bitwise_and.reduce, np.bool_), ("reduce_and", np.bitwise_and.reduce, np.uint8),
    ("reduce_or", np.bitwise_or.reduce, np.int16), ("reduce_xor", np.bitwise_xor.reduce, np.int8),
])
def test_lax_reductions_keep_the_dtype(rng, name, np_fn, dtype):
    x = _random(rng, (3, 4, 2), dtype)
    fn = getattr(lax, name)
    for axes in [(0,), (1, 2), (0, 1, 2), (), (-1,)]:
        with np.errstate(over="ignore"):
            expected = np_fn(x if np.dtype(dtype) != BF16 else x.astype(np.float32), axis=axes).astype(dtype)
        check_eager_and_jit(lambda v: fn(v, axes), x, expected=expected, dtype=dtype)


def test_lax_integer_sums_wrap_around():
    x = np.full(4, 100, np.int8)
    assert int(lax.reduce_sum(x, (0,))) == np.int8(np.sum(x, dtype=np.int8))  # 400 mod 256 = -112


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_half_precision_sums_accumulate_in_float32(dtype):
    # Rounding every partial sum to half precision stalls at 2048 (float16) / 256 (bfloat16).
    x = np.ones(4096, dtype)
    assert float(lax.reduce_sum(x, (0,))) == 4096
    assert float(lax.cumsum(x)[-1]) == 4096
    assert float(jnp.sum(x)) == 4096
    assert float(ember.jit(jnp.mean)(x)) == 1


def test_lax_max_min_propagate_nan_and_have_identities():
    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -6.0]], np.float32)
    assert_allclose(lax.reduce_max(x, (1,)), np.array([np.nan, 5.0], np.float32))
    assert_allclose(lax.reduce_min(x, (0,)), np.array([1.0, np.nan, -6.0], np.float32))
    assert float(lax.reduce_max(np.zeros(0, np.float32), (0,))) == -np.inf
    assert int(lax.reduce_max(np.zeros(0, np.int8), (0,))) == -128
    assert int(lax.reduce_min(np.zeros(0, np.uint8), (0,))) == 255
    assert int(lax.reduce_and(np.zeros(0, np.uint8), (0,))) == 255
    assert bool(lax.reduce_or(np.zeros(0, bool), (0,))) is False


def test_lax_reductions_in_the_ir():
    text = str(ember.make_jaxpr(lambda x: lax.reduce_max(x, (-1, 0)))(np.zeros((2, 3, 4), np.float32)))
    assert "reduce_max[axes=(0, 2)] a" in text and "f32[3]" in text


def test_lax_reduction_errors():
    with pytest.raises(TypeError, match="reduce_sum does not accept dtype bool"):
        lax.reduce_sum(np.ones(3, bool), (0,))
    with pytest.raises(TypeError, match="reduce_and does not accept dtype float32"):
        lax.reduce_and(np.ones(3, np.float32), (0,))
    with pytest.raises(ValueError, match="axis 2 is out of bounds for an array of dimension 2"):
        lax.reduce_sum(np.ones((2, 3), np.float32), (2,))
    with pytest.raises(ValueError, match="repeated axis"):
        lax.reduce_sum(np.ones((2, 3), np.float32), (1, -1))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.int8, np.uint32, np.bool_])
def test_lax_argmax_argmin(rng, dtype):
    x = _random(rng, (4, 5), dtype)
    for axis in (0, 1, -1):
        check_eager_and_jit(lambda v: lax.argmax(v, axis, np.int32), x,
                            expected=np.argmax(_wide(x), axis).astype(np.int32))
        check_eager_and_jit(lambda v: lax.argmin(v, axis, np.uint8), x,
                            expected=np.argmin(_wide(x), axis).astype(np.uint8))


def test_lax_argmax_nan_and_ties():
    x = np.array([1.0, np.nan, 3.0, np.nan, 3.0], np.float32)
    assert int(lax.argmax(x, 0, np.int32)) == 1 and int(lax.argmin(x, 0, np.int32)) == 1
    ties = np.array([2, 7, 7, 0, 0], np.int32)
    assert int(lax.argmax(ties, 0, np.int32)) == 1 and int(lax.argmin(ties, 0, np.int32)) == 3
    with pytest.raises(ValueError, match="non-empty reduced dimension"):
        lax.argmax(np.zeros((2, 0), np.float32), 1, np.int32)
    with pytest.raises(TypeError, match="index_dtype must be an integer"):
        lax.argmax(x, 0, np.float32)


@pytest.mark.parametrize("name,np_fn,dtypes_", [
    ("cumsum", np.cumsum, [np.float32, np.float16, np.int8, np.uint16]),
    ("cumprod", np.cumprod, [np.float32, np.int32]),
    ("cummax", np.maximum.accumulate, [np.float32, BF16, np.int16, np.bool_]),
    ("cummin", np.minimum.accumulate, [np.float32, np.uint8]),
    ("cumlogsumexp", np.logaddexp.accumulate, [np.float32, np.float16]),
])
def test_lax_cumulative(rng, name, np_fn, dtypes_):
    fn = getattr(lax, name)
    for dtype in dtypes_:
        x = _random(rng, (3, 5), dtype)
        for axis in (0, 1, -1):
            for reverse in (False, True):
                wide = np.flip(_wide(x), axis) if reverse else _wide(x)
                expected = np_fn(wide, axis=axis)
                expected = (np.flip(expected, axis) if reverse else expected).astype(dtype)
                check_eager_and_jit(lambda v: fn(v, axis=axis, reverse=reverse), x, expected=expected, dtype=dtype)


def test_lax_cumulative_nan_and_errors():
    x = np.array([1.0, np.nan, 3.0], np.float32)
    assert_allclose(lax.cummax(x), np.array([1.0, np.nan, np.nan], np.float32))
    with pytest.raises(TypeError, match="cumsum does not accept dtype bool"):
        lax.cumsum(np.ones(3, bool))
    with pytest.raises(TypeError, match="cumlogsumexp does not accept dtype int32"):
        lax.cumlogsumexp(np.ones(3, np.int32))
    with pytest.raises(ValueError, match="axis 1 is out of bounds for an array of dimension 1"):
        lax.cumsum(x, axis=1)


# --- jnp: sum, prod, max, min, any, all ---------------------------------------------------------
@given(_array_and_axis())
def test_sum_prod_max_min_any_all(case):
    x, axis, keepdims = case
    wide = _wide(x)
    checks = [
        (jnp.sum, lambda v: np.sum(v, axis=axis, keepdims=keepdims), _sum_dtype(x.dtype)),
        (jnp.prod, lambda v: np.prod(v, axis=axis, keepdims=keepdims), _sum_dtype(x.dtype)),
        (jnp.any, lambda v: np.any(v, axis=axis, keepdims=keepdims), np.dtype(bool)),
        (jnp.all, lambda v: np.all(v, axis=axis, keepdims=keepdims), np.dtype(bool)),
    ]
    reduced = range(x.ndim) if axis is None else np.atleast_1d(axis)
    if all(x.shape[d] for d in reduced):
        checks += [(jnp.max, lambda v: np.max(v, axis=axis, keepdims=keepdims), x.dtype),
                   (jnp.min, lambda v: np.min(v, axis=axis, keepdims=keepdims), x.dtype)]
    for fn, ref, dtype in checks:
        expected = ref(wide)
        # Round to the result type: a float16 product may overflow to inf there.
        with np.errstate(over="ignore"):
            expected = np.asarray(expected).astype(dtype)
        check_eager_and_jit(lambda v: fn(v, axis=axis, keepdims=keepdims), x, expected=expected, dtype=dtype)


def test_reduction_result_types():
    assert jnp.sum(np.ones(3, np.int8)).dtype == np.int32
    assert jnp.sum(np.ones(3, np.uint8)).dtype == np.uint32
    assert jnp.sum(np.ones(3, bool)).dtype == np.int32
    assert jnp.sum(np.ones(3, np.int8), promote_integers=False).dtype == np.int8
    assert jnp.sum(np.ones(3, np.int8), dtype=np.int16).dtype == np.int16
    assert jnp.sum(np.ones(3, np.float32), dtype=np.float64).dtype == np.float32  # canonicalized
    assert jnp.prod(np.ones(3, np.float16)).dtype == np.float16
    assert jnp.max(np.ones(3, np.int8)).dtype == np.int8
    assert jnp.max(np.array([True, False])).dtype == np.bool_
    # Reductions of weakly typed inputs are strongly typed, as in JAX.
    assert not jnp.sum(3.0).weak_type and not jnp.max(2).weak_type and not jnp.mean(1.0).weak_type
    assert jnp.mean(np.ones(3, np.int8)).dtype == np.float32
    assert jnp.var(np.ones(3, np.uint16)).dtype == np.float32
    assert jnp.mean(np.ones(3, BF16)).dtype == BF16


def test_sum_with_bool_dtype_is_a_logical_or():
    x = np.array([[0, 2], [0, 0]], np.int32)
    check_eager_and_jit(lambda v: jnp.sum(v, axis=1, dtype=bool), x, expected=np.array([True, False]))
    check_eager_and_jit(lambda v: jnp.prod(v, axis=1, dtype=bool), x, expected=np.array([False, False]))


def test_where_and_initial(rng):
    x = _random(rng, (3, 4), np.float32)
    mask = rng.random((3, 4)) < 0.5
    for fn, np_fn, initial in [(jnp.sum, np.sum, 2.0), (jnp.prod, np.prod, 0.5), (jnp.max, np.max, -1.0),
                               (jnp.min, np.min, 1.0)]:
        for axis in (None, 0, 1):
            expected = np_fn(_wide(x), axis=axis, where=mask, initial=initial).astype(np.float32)
            check_eager_and_jit(lambda v, m: fn(v, axis=axis, where=m, initial=initial), x, mask,
                                expected=expected)
    row_mask = np.array([True, False, True, True])  # broadcasts against (3, 4)
    check_eager_and_jit(lambda v: jnp.any(v > 0, axis=1, where=row_mask), x,
                        expected=np.any(x > 0, axis=1, where=row_mask))
    check_eager_and_jit(lambda v: jnp.mean(v, axis=0, where=mask), x,
                        expected=np.mean(_wide(x), axis=0, where=mask).astype(np.float32))


def test_empty_reductions():
    empty = np.zeros((2, 0), np.float32)
    assert_allclose(jnp.sum(empty, axis=1), np.zeros(2, np.float32))
    assert_allclose(jnp.prod(empty, axis=1), np.ones(2, np.float32))
    assert_allclose(jnp.max(empty, axis=0), np.zeros(0, np.float32))  # nothing reduced is empty
    assert_allclose(jnp.max(empty, axis=1, initial=3.0), np.full(2, 3.0, np.float32))
    assert_allclose(jnp.all(empty, axis=1), np.ones(2, bool))
    assert np.isnan(float(jnp.mean(empty)))
    with pytest.raises(ValueError, match="zero-size array to reduction operation max which has no identity"):
        jnp.max(empty, axis=1)
    with pytest.raises(ValueError, match="zero-size array to reduction operation min"):
        ember.jit(jnp.min)(empty)
    with pytest.raises(ValueError, match="does not have an identity, so to use a where mask"):
        jnp.max(np.ones(3), where=np.ones(3, bool))


def test_nan_propagation():
    x = np.array([[1.0, np.nan], [2.0, 3.0]], np.float32)
    check_eager_and_jit(lambda v: jnp.max(v, axis=1), x, expected=np.max(x, axis=1))
    check_eager_and_jit(lambda v: jnp.min(v, axis=0), x, expected=np.min(x, axis=0))
    check_eager_and_jit(lambda v: jnp.max(v, initial=5.0), x, expected=np.float32(np.nan))
    check_eager_and_jit(lambda v: jnp.any(v, axis=1), np.array([[np.nan, 0.0]], np.float32),
                        expected=np.array([True]))


def test_reduction_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="axis 2 is out of bounds for an array of dimension 2"):
        jnp.sum(x, axis=2)
    with pytest.raises(ValueError, match="axis -3 is out of bounds for an array of dimension 2"):
        jnp.mean(x, axis=(0, -3))
    with pytest.raises(ValueError, match="axis 0 is out of bounds for an array of dimension 0"):
        jnp.sum(np.float32(1.0), axis=0)
    with pytest.raises(ValueError, match="repeated axis"):
        jnp.max(x, axis=(1, -1))
    with pytest.raises(NotImplementedError, match="The 'out' argument to jnp.sum is not supported"):
        jnp.sum(x, out=np.zeros(()))
    with pytest.raises(ValueError, match="initial value must be a scalar"):
        jnp.sum(x, initial=np.ones(2))
    with pytest.raises(errors.TracerIntegerConversionError):
        ember.jit(lambda v, a: jnp.sum(v, axis=a))(x, 1)


def test_reductions_under_x64(x64):
    assert jnp.sum(np.ones(3, np.int8)).dtype == np.int64
    assert jnp.sum(np.ones(3, np.uint32)).dtype == np.uint64
    assert jnp.argmax(np.ones(3)).dtype == np.int64
    assert jnp.count_nonzero(np.ones(3)).dtype == np.int64
    x = np.random.default_rng(1).normal(size=(4, 5))
    check_eager_and_jit(lambda v: jnp.var(v, axis=1, ddof=1), x, expected=np.var(x, axis=1, ddof=1))
    check_eager_and_jit(lambda v: jnp.mean(v), np.arange(7, dtype=np.int64), expected=np.float64(3.0))
    big = np.array([2 ** 40, 3], np.int64)
    check_eager_and_jit(lambda v: jnp.sum(v), big, expected=np.int64(2 ** 40 + 3))
    check_eager_and_jit(lambda v: jnp.cumprod(v), big, expected=np.cumprod(big))


# --- jnp: statistics ------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's warnings for empty slices
@given(_array_and_axis([np.float32, np.float16, np.int8, np.uint8, np.bool_]))
def test_mean_var_std(case):
    x, axis, keepdims = case
    reduced = range(x.ndim) if axis is None else np.atleast_1d(axis)
    count = int(np.prod([x.shape[d] for d in reduced]))
    dtype = _mean_dtype(x.dtype)
    wide = _wide(x).astype(np.float64)
    check_eager_and_jit(lambda v: jnp.mean(v, axis=axis, keepdims=keepdims), x,
                        expected=np.mean(wide, axis=axis, keepdims=keepdims).astype(dtype))
    for ddof in (0, 1):
        expected_var = np.var(wide, axis=axis, keepdims=keepdims, ddof=ddof)
        if count - ddof <= 0:
            expected_var = np.full_like(expected_var, np.nan)
        check_eager_and_jit(lambda v: jnp.var(v, axis=axis, keepdims=keepdims, ddof=ddof), x,
                            expected=expected_var.astype(dtype))
        check_eager_and_jit(lambda v: jnp.std(v, axis=axis, keepdims=keepdims, ddof=ddof), x,
                            expected=np.sqrt(expected_var).astype(dtype))


def test_var_options(rng):
    x = _random(rng, (3, 4), np.float32)
    check_eager_and_jit(lambda v: jnp.var(v, axis=1, correction=1), x,
                        expected=np.var(_wide(x), axis=1, ddof=1).astype(np.float32))
    given_mean = np.mean(x, axis=1, keepdims=True)
    check_eager_and_jit(lambda v: jnp.std(v, axis=1, mean=given_mean), x,
                        expected=np.std(_wide(x), axis=1).astype(np.float32), rtol=1e-5)
    check_eager_and_jit(lambda v: jnp.var(v, dtype=np.float16), x, expected=np.var(_wide(x)).astype(np.float16))
    with pytest.raises(ValueError, match="ddof and correction can't be provided simultaneously"):
        jnp.var(x, ddof=1, correction=1)


def test_average(rng):
    x = _random(rng, (3, 4), np.float32)
    w = rng.random(4).astype(np.float32)
    check_eager_and_jit(lambda v: jnp.average(v, axis=1, weights=w), x,
                        expected=np.average(_wide(x), axis=1, weights=w).astype(np.float32))
    full_w = rng.random((3, 4)).astype(np.float32)
    avg, total = jnp.average(x, weights=full_w, returned=True)
    assert_allclose(avg, np.float32(np.average(_wide(x), weights=full_w)), rtol=1e-5)
    assert_allclose(total, np.float32(full_w.sum()), rtol=1e-6)
    avg, total = jnp.average(np.arange(6).reshape(2, 3), axis=0, returned=True, keepdims=True)
    assert_allclose(avg, np.array([[1.5, 2.5, 3.5]], np.float32))
    assert_allclose(total, np.full((1, 3), 2.0, np.float32))
    with pytest.raises(ValueError, match="Axis must be specified"):
        jnp.average(x, weights=w)
    with pytest.raises(ValueError, match="Length of weights"):
        jnp.average(x, axis=0, weights=w)


def test_count_nonzero_and_ptp(rng):
    x = _random(rng, (3, 4), np.int8)
    check_eager_and_jit(lambda v: jnp.count_nonzero(v, axis=1), x,
                        expected=np.count_nonzero(x, axis=1).astype(np.int32))
    check_eager_and_jit(lambda v: jnp.count_nonzero(v, keepdims=True), x,
                        expected=np.full((1, 1), np.count_nonzero(x), np.int32))
    check_eager_and_jit(lambda v: jnp.ptp(v, axis=0), x, expected=np.ptp(x, axis=0))
    u = np.array([3, 9, 1], np.uint8)
    check_eager_and_jit(jnp.ptp, u, expected=np.uint8(8))


# --- jnp: argmax / argmin and NaN-ignoring reductions ---------------------------------------------
@given(_array_and_axis([np.float32, np.int16, np.uint8, np.bool_, BF16]))
def test_argmax_argmin(case):
    x, axis, keepdims = case
    if isinstance(axis, tuple) or x.size == 0:
        return
    wide = _wide(x)
    for fn, np_fn in ((jnp.argmax, np.argmax), (jnp.argmin, np.argmin)):
        expected = np_fn(wide, axis=axis, keepdims=keepdims).astype(np.int32)
        check_eager_and_jit(lambda v: fn(v, axis=axis, keepdims=keepdims), x, expected=expected)


def test_argmax_nan_and_errors():
    x = np.array([[1.0, np.nan, 5.0, np.nan], [0.0, 2.0, 2.0, -1.0]], np.float32)
    check_eager_and_jit(lambda v: jnp.argmax(v, axis=1), x, expected=np.array([1, 1], np.int32))
    check_eager_and_jit(lambda v: jnp.argmin(v, axis=1), x, expected=np.array([1, 3], np.int32))
    check_eager_and_jit(jnp.argmax, x, expected=np.int32(1))
    with pytest.raises(ValueError, match="attempt to get argmax of an empty sequence"):
        jnp.argmax(np.zeros((3, 0)), axis=1)
    with pytest.raises(ValueError, match="axis 2 is out of bounds for an array of dimension 2"):
        jnp.argmin(x, axis=2)


def test_nan_reductions(rng):
    x = _random(rng, (4, 5), np.float32, nan_fraction=0.3)
    x[2] = np.nan  # an all-NaN row
    wide = _wide(x)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        cases = [(jnp.nansum, np.nansum(wide, axis=1)), (jnp.nanprod, np.nanprod(wide, axis=1)),
                 (jnp.nanmax, np.nanmax(wide, axis=1)), (jnp.nanmin, np.nanmin(wide, axis=1)),
                 (jnp.nanmean, np.nanmean(wide, axis=1)), (jnp.nanvar, np.nanvar(wide, axis=1)),
                 (jnp.nanstd, np.nanstd(wide, axis=1))]
    for fn, expected in cases:
        check_eager_and_jit(lambda v: fn(v, axis=1), x, expected=expected.astype(np.float32), rtol=1e-5)
    valid = ~np.isnan(x).all(axis=1)
    expected_arg = np.where(valid, np.nanargmax(np.where(valid[:, None], wide, 0), axis=1), -1).astype(np.int32)
    check_eager_and_jit(lambda v: jnp.nanargmax(v, axis=1), x, expected=expected_arg)
    check_eager_and_jit(lambda v: jnp.nanargmin(v, axis=0), x[[0, 1, 3]],
                        expected=np.nanargmin(wide[[0, 1, 3]], axis=0).astype(np.int32))
    ints = _random(rng, (3, 2), np.int16)
    check_eager_and_jit(lambda v: jnp.nanmax(v, axis=0), ints, expected=np.max(ints, axis=0))
    check_eager_and_jit(lambda v: jnp.nansum(v), ints, expected=np.int32(ints.sum()))


# --- jnp: cumulative reductions ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int32, np.float16, np.float32])
def test_cumsum_cumprod(rng, dtype):
    x = _random(rng, (3, 4), dtype)
    result_dtype = np.dtype(np.int32) if dtype == np.bool_ else np.dtype(dtype)  # only bools widen
    for axis in (None, 0, -1):
        for fn, np_fn in ((jnp.cumsum, np.cumsum), (jnp.cumprod, np.cumprod)):
            expected = np_fn(_wide(x).astype(np.int64) if dtype == np.bool_ else _wide(x), axis=axis)
            with np.errstate(over="ignore"):
                expected = expected.astype(result_dtype)
            check_eager_and_jit(lambda v: fn(v, axis=axis), x, expected=expected, dtype=result_dtype)


def test_cumulative_variants(rng):
    x = _random(rng, (2, 3), np.float32, nan_fraction=0.3)
    check_eager_and_jit(lambda v: jnp.nancumsum(v, axis=1), x, expected=np.nancumsum(x, axis=1))
    check_eager_and_jit(lambda v: jnp.nancumprod(v), x, expected=np.nancumprod(x), rtol=1e-5)
    check_eager_and_jit(lambda v: jnp.cumsum(v, dtype=bool), np.array([0, 2, -2, 0]),
                        expected=np.array([False, True, True, True]))
    check_eager_and_jit(lambda v: jnp.cumsum(v, axis=0), np.float32(2.0), expected=np.array([2.0], np.float32))
    ints = np.arange(1, 5, dtype=np.int32)
    check_eager_and_jit(lambda v: jnp.cumulative_sum(v, include_initial=True), ints,
                        expected=np.array([0, 1, 3, 6, 10], np.int32))
    check_eager_and_jit(lambda v: jnp.cumulative_prod(v, axis=0, include_initial=True), ints.reshape(2, 2),
                        expected=np.array([[1, 1], [1, 2], [3, 8]], np.int32))
    with pytest.raises(ValueError, match="axis was not set to an explicit value"):
        jnp.cumulative_sum(np.ones((2, 2)))
    with pytest.raises(NotImplementedError, match="'out' argument to jnp.cumsum"):
        jnp.cumsum(ints, out=ints)


# --- jnp: quantiles ----------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_methods(rng, method):
    x = _random(rng, (3, 4, 5), np.float32)
    q = np.array([0.0, 0.13, 0.37, 0.9, 1.0], np.float32)  # no ties for 'nearest' (JAX rounds them down)
    for axis in (None, 1, (0, 2)):
        for keepdims in (False, True):
            expected = np.quantile(_wide(x), q, axis=axis, method=method, keepdims=keepdims).astype(np.float32)
            check_eager_and_jit(lambda v, qs: jnp.quantile(v, qs, axis=axis, method=method, keepdims=keepdims),
                                x, q, expected=expected, rtol=1e-5)


def test_quantile_percentile_median(rng):
    x = _random(rng, (4, 6), np.int16)
    check_eager_and_jit(lambda v: jnp.median(v, axis=1), x, expected=np.median(x, axis=1).astype(np.float32))
    check_eager_and_jit(jnp.median, x, expected=np.float32(np.median(x)))
    check_eager_and_jit(lambda v: jnp.percentile(v, 30.0, axis=0), x,
                        expected=np.percentile(x, 30.0, axis=0).astype(np.float32))
    check_eager_and_jit(lambda v, q: jnp.quantile(v, q), x, np.float32(0.25),
                        expected=np.float32(np.quantile(x, 0.25)))
    assert jnp.quantile(np.ones(3, np.float16), 0.5).dtype == np.float16
    with_nan = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]], np.float32)
    check_eager_and_jit(lambda v: jnp.median(v, axis=1), with_nan, expected=np.array([np.nan, 2.0], np.float32))
    with pytest.raises(ValueError, match="method can only be one of"):
        jnp.quantile(x, 0.5, method="cubic")
    with pytest.raises(ValueError, match="q must have rank <= 1"):
        jnp.quantile(x, np.ones((2, 2)) / 2)
    with pytest.raises(ValueError, match="empty"):
        jnp.median(np.zeros(0))


def test_result_dtypes_match_jax():
    jax = pytest.importorskip("jax")
    jax_numpy = pytest.importorskip("jax.numpy")
    if jax.config.jax_enable_x64:
        pytest.skip("compares the default (x64 off) types")
    names = ["sum", "prod", "max", "min", "any", "all", "mean", "var", "std", "argmax", "argmin", "cumsum",
             "cumprod", "nansum", "nanmean", "nanvar", "nanmax", "count_nonzero", "median", "ptp", "average"]
    for dtype in [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.float16, BF16,
                  np.float32]:
        x = np.ones((2, 3), dtype)
        for name in names:
            if name == "ptp" and dtype == np.bool_:
                continue
            ours = getattr(jnp, name)(x)
            theirs = jax.eval_shape(getattr(jax_numpy, name), jax.ShapeDtypeStruct(x.shape, x.dtype))
            assert ours.dtype == theirs.dtype, f"jnp.{name}({np.dtype(dtype).name})"
            assert ours.shape == theirs.shape


@pytest.mark.parametrize("name", ["quantile", "percentile", "nanquantile", "nanpercentile"])
def test_quantiles_have_the_data_type_whatever_the_type_of_q(name):
    scale = 100 if "percent" in name else 1
    fn = getattr(jnp, name)
    half = np.array([1.0, 3.0, 7.0], np.float16)
    assert fn(half, np.float32(0.5) * scale).dtype == jnp.float16  # q takes the data's type, as in JAX
    assert fn(half, 0.5 * scale).dtype == jnp.float16
    assert fn(np.array([1, 3, 7], np.int32), np.float16(0.5) * scale).dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(fn(half, np.float32(0.25) * scale), np.float32), 2.0)


@pytest.mark.parametrize("shape, axes", [((32, 26, 26, 32), (0, 1, 2)), ((21632, 32), (0,)), ((8, 1000, 3), (0, 1)),
                                         ((3, 1001, 4), (1,)), ((40, 7, 900), (0, 2))])
def test_long_sums_round_as_xlas_tree_of_windows_does(shape, axes):
    """A float32 sum of many elements over other dimensions than the last one, as a convolution's
    bias gradient takes (batch x positions), keeps JAX's accuracy: XLA sums windows of 32, then the
    windows' sums. Folded in one accumulator, these strayed 2e-6 to 4e-6 from the exact sum."""
    x = (np.random.default_rng(0).standard_normal(shape) + 0.3).astype(np.float32)
    exact = x.astype(np.float64).sum(axis=axes)
    with ember.config.override(backend="cpu"):
        ours = np.asarray(ember.jit(lambda x: jnp.sum(x, axis=axes))(x), np.float64)
    assert np.abs(ours - exact).max() / np.abs(exact).max() < 4e-7
    jax = pytest.importorskip("jax")
    theirs = np.asarray(jax.jit(lambda x: jax.numpy.sum(x, axis=axes))(x), np.float64)
    assert np.abs(ours - exact).max() <= 3 * np.abs(theirs - exact).max() + 1e-7 * np.abs(exact).max()
