"""Differential tests (NumPy, eagerly and under jit) for the jnp functions in float_functions,
integer_functions, sets, windows, grids and array_utils."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as jnp
from ember.errors import ConcretizationTypeError
from tests.util import assert_allclose, check_eager_and_jit

F32 = np.float32


def I32(values):
    return np.array(values, np.int32)


rng = np.random.default_rng(0)
x_f = rng.normal(size=(3, 4)).astype(F32) * 10
y_f = rng.normal(size=(4,)).astype(F32) * 10


def test_fmax_fmin_ignore_nan():
    a = np.array([np.nan, 1.0, 3.0, np.nan], F32)
    b = np.array([2.0, np.nan, 1.0, np.nan], F32)
    check_eager_and_jit(jnp.fmax, a, b, expected=np.fmax(a, b))
    check_eager_and_jit(jnp.fmin, a, b, expected=np.fmin(a, b))
    check_eager_and_jit(jnp.fmax, np.array([1, 5], np.int8), np.int8(3), expected=np.array([3, 5], np.int8))


def test_frexp_ldexp_modf_spacing():
    x = np.array([0.0, -0.0, np.inf, -3.5, 5.0, 1e30, 1e-20, np.nan], F32)
    mantissa, exponent = check_eager_and_jit(jnp.frexp, x, expected=np.frexp(x))
    assert exponent.dtype == np.int32
    finite = np.array([-3.5, 5.0, 1e-20, 1e30], F32)
    check_eager_and_jit(jnp.ldexp, finite, np.array([3, -7, 20, -40], np.int32),
                        expected=np.ldexp(finite, np.array([3, -7, 20, -40])))
    check_eager_and_jit(lambda m, e: jnp.ldexp(m, e), mantissa, exponent, expected=x)
    check_eager_and_jit(jnp.modf, x_f, expected=np.modf(x_f))
    check_eager_and_jit(jnp.spacing, np.array([1.0, -1.0, 1e10], F32),
                        expected=np.spacing(np.array([1.0, -1.0, 1e10], F32)))
    with pytest.raises(ValueError, match="ldexp not supported"):
        jnp.ldexp(1.0, 2.0)


def test_i0_values_and_gradient():
    x = np.array([0.0, 0.5, -1.0, 5.0, 19.9, 20.1, -30.0, 60.0], F32)
    check_eager_and_jit(jnp.i0, x, expected=np.i0(x.astype(np.float64)).astype(F32), rtol=2e-6)
    # d/dx i0 = i1; i1(1) = 0.5651591
    assert_allclose(ember.grad(jnp.i0)(1.0), np.float32(0.5651591), rtol=1e-6)
    assert np.isfinite(float(ember.grad(jnp.i0)(0.0)))


def test_gcd_lcm_bitwise_count():
    a = np.array([-12, 0, 7, 35, 9], np.int32)
    b = np.array([18, 0, 0, 10, -6], np.int32)
    check_eager_and_jit(jnp.gcd, a, b, expected=np.gcd(a, b))
    check_eager_and_jit(jnp.lcm, a, b, expected=np.lcm(a, b))
    with pytest.raises(ValueError, match="must be integers"):
        jnp.gcd(1.0, 2)
    i8 = np.array([-1, 7, 0, -128], np.int8)
    check_eager_and_jit(jnp.bitwise_count, i8, expected=np.bitwise_count(i8))


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits_unpackbits(axis, bitorder):
    bits = rng.integers(0, 2, size=(3, 11)).astype(np.int32)
    packed = check_eager_and_jit(lambda a: jnp.packbits(a, axis=axis, bitorder=bitorder), bits,
                                 expected=np.packbits(bits, axis=axis, bitorder=bitorder))
    packed = np.asarray(packed)
    for count in (None, 5, -3, 30):
        check_eager_and_jit(lambda p: jnp.unpackbits(p, axis=axis, count=count, bitorder=bitorder), packed,
                            expected=np.unpackbits(packed, axis=axis, count=count, bitorder=bitorder))
    with pytest.raises(TypeError, match="unsigned byte"):
        jnp.unpackbits(bits)


set_values = st.lists(st.integers(-4, 4), min_size=0, max_size=8).map(lambda v: np.array(v, np.int32))


@given(set_values, set_values)
def test_set_functions_match_numpy(a, b):
    for name in ("union1d", "setdiff1d", "setxor1d", "intersect1d"):
        expected = getattr(np, name)(a, b)
        assert_allclose(getattr(jnp, name)(a, b), expected, dtype=np.int32)
    assert_allclose(jnp.isin(a, b), np.isin(a, b))
    assert_allclose(jnp.isin(a, b, invert=True), np.isin(a, b, invert=True))
    got = jnp.intersect1d(a, b, return_indices=True)
    for g, e in zip(got, np.intersect1d(a, b, return_indices=True)):
        assert_allclose(g, e, check_dtype=False)


def test_set_functions_with_size_under_jit():
    a, b = np.array([3, 2, 7, 3], np.int32), np.array([2, 4], np.int32)
    check_eager_and_jit(lambda x, y: jnp.union1d(x, y, size=6), a, b, expected=I32([2, 3, 4, 7, 2, 2]))
    check_eager_and_jit(lambda x, y: jnp.setdiff1d(x, y, size=4), a, b, expected=I32([3, 7, 0, 0]))
    check_eager_and_jit(lambda x, y: jnp.setxor1d(x, y, size=5, fill_value=-1), a, b,
                        expected=I32([3, 4, 7, -1, -1]))
    check_eager_and_jit(lambda x, y: jnp.intersect1d(x, y, size=3, return_indices=True), a, b,
                        expected=(I32([2, 2, 2]), I32([1, 4, 4]), I32([0, 2, 2])))
    x = np.array([1.0, np.nan, 2.0], F32)
    check_eager_and_jit(lambda v: jnp.isin(v, np.array([np.nan, 2.0], F32)), x, expected=np.array([False, False, True]))
    with pytest.raises(ConcretizationTypeError, match="jnp.setdiff1d without size="):
        ember.jit(jnp.setdiff1d)(a, b)


def test_unique_variants():
    x = np.array([[3, 1], [3, 2]], np.int32)
    values, counts = jnp.unique_counts(x)
    assert_allclose(values, np.array([1, 2, 3], np.int32))
    assert_allclose(counts, np.array([1, 1, 2], np.int32))
    check_eager_and_jit(lambda v: jnp.unique_values(v, size=4), x, expected=I32([1, 2, 3, 1]))
    result = check_eager_and_jit(lambda v: tuple(jnp.unique_all(v, size=3)), x)
    assert_allclose(result[1], np.array([1, 3, 0], np.int32))
    assert_allclose(result[2], np.array([[2, 0], [2, 1]], np.int32))
    inverse = jnp.unique_inverse(x).inverse_indices
    assert inverse.shape == x.shape
    assert_allclose(jnp.unique_values(np.array([np.nan, np.nan, 1.0], F32)), np.array([1.0, np.nan, np.nan], F32))
    with pytest.raises(ConcretizationTypeError, match="size="):
        ember.jit(jnp.unique_values)(x)


@pytest.mark.parametrize("ours,theirs", [(jnp.bartlett, np.bartlett), (jnp.blackman, np.blackman),
                                         (jnp.hamming, np.hamming), (jnp.hanning, np.hanning)])
@pytest.mark.parametrize("M", [0, 1, 2, 7])
def test_windows(ours, theirs, M):
    assert_allclose(ours(M), theirs(M).astype(F32), atol=1e-6)


def test_kaiser():
    assert_allclose(jnp.kaiser(6, 3.0), np.kaiser(6, 3.0).astype(F32), rtol=1e-5)
    check_eager_and_jit(lambda beta: jnp.kaiser(5, beta), np.float32(2.0), expected=np.kaiser(5, 2.0).astype(F32),
                        rtol=1e-5)
    with pytest.raises(ConcretizationTypeError, match="'M' of jnp.bartlett"):
        ember.jit(jnp.bartlett)(5)


def test_grids():
    assert_allclose(jnp.indices((2, 3)), np.indices((2, 3)).astype(np.int32))
    assert [g.shape for g in jnp.indices((2, 3), sparse=True)] == [(2, 1), (1, 3)]
    assert_allclose(jnp.mgrid[0:3, 0:2], np.mgrid[0:3, 0:2].astype(np.int32))
    assert_allclose(jnp.mgrid[0:1:3j, 0:4:2], np.mgrid[0:1:3j, 0:4:2].astype(F32))
    for g, e in zip(jnp.ogrid[0:3, 1:5], np.ogrid[0:3, 1:5]):
        assert_allclose(g, e.astype(np.int32))
    assert_allclose(jnp.r_[1:3, 5, [7, 8], 0:1:3j], np.r_[1:3, 5, [7, 8], 0:1:3j].astype(F32))
    assert_allclose(jnp.r_["0,2", [1, 2], [3, 4]], np.r_["0,2", [1, 2], [3, 4]].astype(np.int32))
    ones = np.ones((2, 3), F32)
    assert_allclose(jnp.r_["0,4,-2", ones], np.r_["0,4,-2", ones])
    assert_allclose(jnp.c_[np.ones((2, 2), F32), [1.0, 2.0]], np.c_[np.ones((2, 2)), [1, 2]].astype(F32))
    with pytest.raises(NotImplementedError, match="matrix directive"):
        jnp.r_["r", [1, 2]]
    x = np.arange(24).reshape(2, 3, 4)
    assert_allclose(jnp.asarray(x)[jnp.s_[:, 1]], x[np.s_[:, 1]].astype(np.int32))
    assert jnp.index_exp[1:2] == (slice(1, 2),)
    assert_allclose(jnp.fromfunction(lambda i, j: i + 2 * j, (2, 3)),
                    np.fromfunction(lambda i, j: i + 2 * j, (2, 3)).astype(F32))
    assert_allclose(jnp.fromfunction(lambda i: 1.0, (3,)), np.ones(3, F32))  # vmapped: constants broadcast


def test_geomspace():
    check_eager_and_jit(lambda a, b: jnp.geomspace(a, b, 4), np.float32(1), np.float32(1000),
                        expected=np.geomspace(1, 1000, 4).astype(F32), rtol=1e-5)
    assert_allclose(jnp.geomspace(-2, -32, 5, endpoint=False), np.geomspace(-2, -32, 5, endpoint=False).astype(F32),
                    rtol=1e-5)
    start, stop = np.array([1.0, 2.0], F32), np.array([10.0, 200.0], F32)
    assert_allclose(jnp.geomspace(start, stop, 3, axis=1), np.geomspace(start, stop, 3, axis=1).astype(F32), rtol=1e-5)


def test_predicates_and_conversions():
    assert bool(jnp.array_equal([1, 2], [1, 2])) and not bool(jnp.array_equal([1, 2], [1, 2, 3]))
    nan = np.array([1.0, np.nan], F32)
    assert not bool(jnp.array_equal(nan, nan)) and bool(jnp.array_equal(nan, nan, equal_nan=True))
    assert bool(check_eager_and_jit(jnp.array_equiv, np.array([1, 1]), np.array([1])))
    assert not bool(jnp.array_equiv(np.ones(2), np.ones(3)))
    assert jnp.astype(np.array([1, 2]), None).dtype == np.float32
    assert jnp.astype(np.array([1.7]), jnp.int64).dtype == np.int32
    assert jnp.isscalar(1.0) and jnp.isscalar(jnp.array(1)) and not jnp.isscalar(jnp.ones(2)) and not jnp.isscalar("a")
    assert jnp.iterable([1]) and not jnp.iterable(3)
    v = np.array([[1, 2], [3, 4]], np.int32)
    check_eager_and_jit(lambda a: jnp.diagflat(a, 1), v, expected=np.diagflat(v, 1))
    check_eager_and_jit(lambda a: jnp.rollaxis(a, 2, 1), np.ones((2, 3, 4, 5), F32),
                        expected=np.ones((2, 4, 3, 5), F32))


def test_matvec_vecmat():
    m, v = rng.normal(size=(2, 3, 4)).astype(F32), rng.normal(size=(4,)).astype(F32)
    check_eager_and_jit(jnp.matvec, m, v, expected=np.einsum("bij,j->bi", m, v), rtol=1e-5)
    w = rng.normal(size=(3,)).astype(F32)
    check_eager_and_jit(jnp.vecmat, w, m, expected=np.einsum("i,bij->bj", w, m), rtol=1e-5)
    grad = ember.grad(lambda a: jnp.sum(jnp.matvec(a, v)))(m)
    assert_allclose(grad, np.broadcast_to(v, m.shape))


@pytest.mark.parametrize("shape,wrap", [((5, 3), True), ((5, 3), False), ((3, 5), False), ((3, 3, 3), False)])
def test_fill_diagonal(shape, wrap):
    expected = np.zeros(shape, F32)
    np.fill_diagonal(expected, [1, 2], wrap=wrap)
    check_eager_and_jit(lambda a: jnp.fill_diagonal(a, np.array([1.0, 2.0], F32), wrap=wrap, inplace=False),
                        np.zeros(shape, F32), expected=expected)


def test_put_place_and_inplace_errors():
    a = np.zeros(5, F32)
    expected = a.copy()
    np.put(expected, [0, 2], [7.0, 8.0, 9.0])
    check_eager_and_jit(lambda x: jnp.put(x, np.array([0, 2]), np.array([7.0, 8.0, 9.0], F32), inplace=False), a,
                        expected=expected)
    assert_allclose(jnp.put(a, np.array([0, 7]), 1.0, mode="clip", inplace=False), np.array([1, 0, 0, 0, 1], F32))
    assert_allclose(jnp.put(a, np.array([0, 7]), 1.0, mode="wrap", inplace=False), np.array([1, 0, 1, 0, 0], F32))
    mask = np.array([1, 0, 1, 1, 0], bool)
    expected = a.copy()
    np.place(expected, mask, [7.0, 8.0])
    check_eager_and_jit(lambda x, m: jnp.place(x, m, np.array([7.0, 8.0], F32), inplace=False), a, mask,
                        expected=expected)
    for call in (lambda: jnp.put(a, 0, 1.0), lambda: jnp.place(a, mask, 1.0), lambda: jnp.fill_diagonal(a, 1.0)):
        with pytest.raises(ValueError, match="Pass inplace=False"):
            call()


JAX_DTYPE_CALLS = [
    ("fmax", (1, 2.0)), ("fmin", (np.int8(1), 3)), ("frexp", (3,)), ("ldexp", (2, 3)), ("modf", (3,)),
    ("spacing", (1,)), ("i0", (1,)), ("gcd", (np.int16(4), 6)), ("lcm", (4, 6)), ("geomspace", (1, 100, 3)),
    ("isin", (np.array([1, 2]), 1)), ("union1d", (np.array([1.0]), np.array([2]))), ("kaiser", (4, 3.0)),
    ("array_equal", (np.ones(2), np.ones(2))), ("bitwise_count", (np.array([3], np.int16),)),
    ("indices", ((2, 3),)),
]


@pytest.mark.parametrize("name,args", JAX_DTYPE_CALLS)
def test_dtypes_and_weak_types_match_jax(name, args):
    jax_numpy = pytest.importorskip("jax.numpy")
    ours = getattr(jnp, name)(*args)
    theirs = getattr(jax_numpy, name)(*args)
    for o, t in zip(ember.tree_util.tree_leaves(ours), ember.tree_util.tree_leaves(theirs)):
        assert np.asarray(o).dtype == np.asarray(t).dtype, name
        assert o.aval.weak_type == t.weak_type, name
        np.testing.assert_allclose(np.asarray(o, np.float64), np.asarray(t, np.float64), rtol=1e-5)
