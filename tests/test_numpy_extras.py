"""The jnp functions built from other jnp / lax functions: isclose, allclose, diff, ediff1d,
gradient, trapezoid, interp, bincount, digitize, histogram, histogram_bin_edges, convolve,
correlate, cov, corrcoef, polyval, vander, piecewise and vectorize.

Against NumPy (values, dtypes, shapes) eagerly and under jit, gradients against finite
differences, the errors for traced static arguments, and dtypes / weak types against JAX.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from util import assert_allclose, check_eager_and_jit, numeric_gradient

import ember
import ember.numpy as jnp
from ember import errors

F32 = dict(dtype=np.float32, rtol=2e-5, atol=2e-5)  # float32 results against float64 NumPy


def _normal(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _check_gradient(f, x, **tol):
    """ember.grad of ``f`` (an ember function to a scalar) against central differences."""
    expected = numeric_gradient(lambda v: float(f(jnp.asarray(v, np.float32))), x, eps=1e-3)
    assert_allclose(ember.grad(f)(jnp.asarray(x)), expected, check_dtype=False, **(tol or dict(rtol=2e-2, atol=2e-2)))


finite_floats = st.floats(-100, 100, allow_nan=False, width=32)


# --- isclose, allclose ---------------------------------------------------------------------------------
SPECIAL = np.array([0.0, 1.0, -1.0, 1e-9, np.inf, -np.inf, np.nan, 1.00001, 100.0], np.float32)


@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_special_values(equal_nan):
    a, b = np.meshgrid(SPECIAL, SPECIAL)
    check_eager_and_jit(lambda x, y: jnp.isclose(x, y, equal_nan=equal_nan), a, b,
                        expected=np.isclose(a, b, equal_nan=equal_nan))


@given(hnp.arrays(np.float32, st.integers(1, 6), elements=finite_floats),
       st.sampled_from([1e-5, 1e-2, 0.5]), st.sampled_from([1e-8, 1e-3, 1.0]))
def test_isclose_tolerances(a, rtol, atol):
    b = (a * np.float32(1.0 + rtol / 2)).astype(np.float32)
    check_eager_and_jit(lambda x, y, r, t: jnp.isclose(x, y, r, t), a, b, rtol, atol,
                        expected=np.isclose(a, b, rtol=np.float32(rtol), atol=np.float32(atol)))


def test_isclose_integers_and_allclose():
    i = np.array([1, 2, 3], np.int32)
    check_eager_and_jit(lambda x: jnp.isclose(x, x + 1, atol=1), i, expected=np.array([True] * 3))
    check_eager_and_jit(lambda x: jnp.allclose(x, 1.0 * x), i, expected=np.array(True))
    check_eager_and_jit(lambda x: jnp.allclose(x, x + 1e-3, rtol=0, atol=1e-4), i.astype(np.float32),
                        expected=np.array(False))
    assert jnp.allclose(np.nan, np.nan, equal_nan=True) and not jnp.allclose(np.nan, np.nan)


# --- diff, ediff1d -------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,n,axis,prepend,append", [
    ((6,), 1, -1, None, None), ((6,), 3, 0, None, None), ((3, 4), 1, 0, None, None), ((3, 4), 2, 1, 0.5, None),
    ((3, 4), 1, 0, None, np.ones((2, 4), np.float32)), ((2, 3, 4), 1, 1, -1.0, 2.0), ((2,), 5, -1, None, None),
])
def test_diff_matches_numpy(rng, shape, n, axis, prepend, append):
    x = _normal(rng, *shape)
    kwargs = {k: v for k, v in dict(prepend=prepend, append=append).items() if v is not None}
    check_eager_and_jit(lambda a: jnp.diff(a, n, axis, **kwargs), x, expected=np.diff(x, n, axis, **kwargs), **F32)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_, np.float16])
def test_diff_dtypes(dtype):
    x = (np.arange(6) % 3).astype(dtype)
    check_eager_and_jit(jnp.diff, x, expected=np.diff(x))
    assert jnp.diff(x, n=0).dtype == dtype


def test_diff_errors_and_static_n():
    with pytest.raises(ValueError, match="order must be non-negative but got -1"):
        jnp.diff(jnp.arange(3), -1)
    with pytest.raises(ValueError, match="at least one dimensional"):
        jnp.diff(jnp.asarray(1.0))
    with pytest.raises(errors.ConcretizationTypeError, match="argument 'n' of jnp.diff"):
        ember.jit(jnp.diff)(jnp.arange(3.0), 1)
    assert ember.jit(jnp.diff, static_argnums=1)(jnp.arange(4.0), 2).shape == (2,)


def test_ediff1d(rng):
    x = _normal(rng, 2, 3)
    check_eager_and_jit(jnp.ediff1d, x, expected=np.ediff1d(x))
    check_eager_and_jit(lambda a: jnp.ediff1d(a, to_end=np.array([7, 8]), to_begin=-1.5), x,
                        expected=np.ediff1d(x, to_end=[7, 8], to_begin=-1.5))
    i = np.array([1, 5, 2], np.int32)
    check_eager_and_jit(lambda a: jnp.ediff1d(a, to_end=2.7), i, expected=np.array([4, -3, 2], np.int32))


# --- gradient, trapezoid --------------------------------------------------------------------------------
def test_gradient_spacing_and_axes(rng):
    f = _normal(rng, 4, 5)
    check_eager_and_jit(lambda a: jnp.gradient(a[0]), f, expected=np.gradient(f[0]))
    check_eager_and_jit(lambda a: jnp.gradient(a, 0.5), f, expected=np.gradient(f, 0.5), **F32)
    check_eager_and_jit(lambda a: jnp.gradient(a, 2.0, 0.5), f, expected=np.gradient(f, 2.0, 0.5), **F32)
    check_eager_and_jit(lambda a: jnp.gradient(a, axis=1), f, expected=np.gradient(f, axis=1))
    check_eager_and_jit(lambda a: jnp.gradient(a, 3.0, axis=(-1, 0)), f,
                        expected=list(np.gradient(f, 3.0, axis=(-1, 0))), **F32)
    coordinates = np.cumsum(rng.random(5) + 0.1).astype(np.float32)
    check_eager_and_jit(lambda a, x: jnp.gradient(a, x, axis=1), f, coordinates,
                        expected=np.gradient(f.astype(np.float64), coordinates.astype(np.float64), axis=1),
                        dtype=np.float32, rtol=1e-4, atol=1e-4)
    assert jnp.gradient(np.arange(4, dtype=np.int32)).dtype == np.float32
    assert jnp.gradient(f, axis=()) == []


def test_gradient_errors():
    with pytest.raises(ValueError, match="at least 2 elements"):
        jnp.gradient(jnp.ones((3, 1)))
    with pytest.raises(TypeError, match="Invalid number of spacing arguments 2"):
        jnp.gradient(jnp.ones((3, 3)), 1.0, 2.0, axis=0)
    with pytest.raises(ValueError, match="same length as the dimension"):
        jnp.gradient(jnp.ones(3), jnp.arange(4.0))
    with pytest.raises(NotImplementedError, match="edge_order=1"):
        jnp.gradient(jnp.ones(3), edge_order=2)


def test_trapezoid(rng):
    y = _normal(rng, 3, 6)
    x = np.sort(_normal(rng, 6))
    check_eager_and_jit(jnp.trapezoid, y, expected=np.trapezoid(y), **F32)
    check_eager_and_jit(lambda a: jnp.trapezoid(a, dx=0.25, axis=0), y, expected=np.trapezoid(y, dx=0.25, axis=0),
                        **F32)
    check_eager_and_jit(jnp.trapezoid, y, x, expected=np.trapezoid(y, x), **F32)
    xs = np.sort(_normal(rng, 3, 6), axis=0)
    check_eager_and_jit(lambda a, b: jnp.trapezoid(a, b, axis=0), y, xs, expected=np.trapezoid(y, xs, axis=0),
                        **F32)
    assert jnp.trapezoid(np.arange(4, dtype=np.int32)).dtype == np.float32
    _check_gradient(lambda v: jnp.trapezoid(jnp.sin(v), v), x)


# --- interp -----------------------------------------------------------------------------------------
@given(st.lists(finite_floats, min_size=1, max_size=6, unique=True),
       hnp.arrays(np.float32, st.integers(0, 6), elements=st.floats(-150, 150, width=32)))
def test_interp_matches_numpy(points, x):
    xp = np.sort(np.array(points, np.float32))
    fp = np.cos(xp).astype(np.float32)
    check_eager_and_jit(jnp.interp, x, xp, fp, expected=np.interp(x, xp, fp), dtype=np.float32, rtol=1e-4, atol=1e-4)
    check_eager_and_jit(lambda a, b, c: jnp.interp(a, b, c, left=-7.0, right=9.0), x, xp, fp,
                        expected=np.interp(x, xp, fp, left=-7.0, right=9.0), dtype=np.float32, rtol=1e-4, atol=1e-4)


def test_interp_period_extrapolate_and_repeats():
    xp = np.array([190, -190, 350, -350], np.float32)
    fp = np.array([5, 10, 3, 4], np.float32)
    x = np.array([-180, -170, -185, 185, -10, -5, 0, 365], np.float32)
    check_eager_and_jit(lambda a, b, c: jnp.interp(a, b, c, period=360), x, xp, fp,
                        expected=np.interp(x, xp, fp, period=360), **F32)
    xp, fp = np.array([0.0, 1.0, 2.0], np.float32), np.array([0.0, 2.0, 3.0], np.float32)
    check_eager_and_jit(lambda a: jnp.interp(a, xp, fp, left="extrapolate", right="extrapolate"),
                        np.array([-1.0, 0.5, 4.0], np.float32), expected=np.array([-2.0, 1.0, 5.0], np.float32))
    repeated = np.array([0.0, 1.0, 1.0, 2.0], np.float32)
    check_eager_and_jit(lambda a: jnp.interp(a, repeated, np.array([0.0, 1.0, 5.0, 6.0], np.float32)),
                        np.array([0.5, 1.5], np.float32), expected=np.array([0.5, 5.5], np.float32))
    assert jnp.interp(3, np.arange(4, dtype=np.int32), np.arange(4, dtype=np.int32)).dtype == np.float32


def test_interp_gradients_are_finite_differences():
    xp = np.array([0.0, 1.0, 2.5, 4.0], np.float32)
    fp = np.array([1.0, -1.0, 2.0, 0.5], np.float32)
    x = np.array([0.3, 1.7, 3.2], np.float32)
    _check_gradient(lambda v: jnp.sum(jnp.interp(v, xp, fp) ** 2), x)
    _check_gradient(lambda v: jnp.sum(jnp.interp(x, xp, v) ** 2), fp)
    _check_gradient(lambda v: jnp.sum(jnp.interp(x, v, fp) ** 2), xp)
    # Repeated sample points: a flat segment, and a finite gradient rather than 0/0.
    grad = ember.grad(lambda v: jnp.interp(1.0, v, fp).sum())(jnp.array([0.0, 1.0, 1.0, 2.0]))
    assert np.all(np.isfinite(np.asarray(grad)))


def test_interp_errors():
    with pytest.raises(ValueError, match="xp and fp must be one-dimensional arrays of equal size"):
        jnp.interp(1.0, jnp.arange(3.0), jnp.arange(4.0))
    with pytest.raises(ValueError, match="only valid string value of `left` is 'extrapolate'"):
        jnp.interp(1.0, jnp.arange(3.0), jnp.arange(3.0), left="linear")
    with pytest.raises(ValueError, match="period must be a scalar"):
        jnp.interp(1.0, jnp.arange(3.0), jnp.arange(3.0), period=jnp.ones(2))


# --- bincount, digitize -----------------------------------------------------------------------------
@given(hnp.arrays(np.int32, st.integers(0, 10), elements=st.integers(0, 8)), st.integers(0, 12))
def test_bincount_matches_numpy(x, minlength):
    weights = (np.arange(x.size) * 0.5).astype(np.float32)
    assert_allclose(jnp.bincount(x, minlength=minlength), np.bincount(x, minlength=minlength).astype(np.int32))
    length = max(minlength, 9)
    check_eager_and_jit(lambda a, w: jnp.bincount(a, w, length=length), x, weights,
                        expected=np.bincount(x, weights, minlength=length).astype(np.float32))


def test_bincount_length_cuts_and_negatives_count_as_zero():
    x = np.array([-2, 0, 1, 1, 7], np.int32)
    check_eager_and_jit(lambda a: jnp.bincount(a, length=3), x, expected=np.array([2, 2, 0], np.int32))
    assert_allclose(jnp.bincount(np.array([True, False, True])), np.array([1, 2], np.int32))


def test_bincount_errors():
    with pytest.raises(errors.ConcretizationTypeError, match="argument 'x' of jnp.bincount.*length=N"):
        ember.jit(jnp.bincount)(jnp.arange(3))
    with pytest.raises(errors.ConcretizationTypeError, match="argument 'minlength' of jnp.bincount"):
        ember.jit(lambda x, m: jnp.bincount(x, minlength=m, length=4))(jnp.arange(3), 2)
    with pytest.raises(TypeError, match="must have an integer type; got float32"):
        jnp.bincount(jnp.arange(3.0))
    with pytest.raises(ValueError, match="only 1-dimensional input supported"):
        jnp.bincount(jnp.ones((2, 2), jnp.int32))
    with pytest.raises(ValueError, match="weights must have the same shape as x"):
        jnp.bincount(jnp.arange(3), jnp.ones(2))


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("bins", [[0.0, 1.0, 1.0, 2.5, 4.0], [4.0, 2.5, 1.0, 1.0, 0.0], [1.0]])
def test_digitize_matches_numpy(bins, right):
    bins = np.array(bins, np.float32)
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.5, 3.0, 4.0, 9.0, np.nan], np.float32)
    check_eager_and_jit(lambda a, b: jnp.digitize(a, b, right), x, bins,
                        expected=np.digitize(x, bins, right).astype(np.int32))


def test_digitize_errors_and_empty_bins():
    assert_allclose(jnp.digitize(jnp.arange(3.0), jnp.zeros(0)), np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="bins must be a 1-dimensional array"):
        jnp.digitize(1.0, jnp.ones((2, 2)))
    with pytest.raises(errors.ConcretizationTypeError, match="argument 'right' of jnp.digitize"):
        ember.jit(lambda r: jnp.digitize(1.0, jnp.arange(3.0), r))(True)


# --- histogram --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    dict(), dict(bins=4), dict(bins=3, range=(-1.0, 1.0)), dict(bins=np.array([-2.0, -0.5, 0.0, 0.25, 3.0])),
    dict(bins=5, density=True), dict(bins=np.array([-1.0, 0.0, 1.0]), density=True),
])
@pytest.mark.parametrize("weighted", [False, True])
def test_histogram_matches_numpy(rng, kwargs, weighted):
    a = _normal(rng, 40)
    a[:3] = [-1.0, 1.0, 3.0]  # values on the edges
    weights = rng.random(40).astype(np.float32) if weighted else None
    fn = (lambda x, w: jnp.histogram(x, weights=w, **kwargs)) if weighted else (lambda x: jnp.histogram(x, **kwargs))
    counts, edges = check_eager_and_jit(fn, *([a, weights] if weighted else [a]))
    # Counting against NumPy with ember's edges (float32 edges place boundary values exactly).
    expected_counts, _ = np.histogram(a, np.asarray(edges), weights=weights, density=kwargs.get("density"))
    assert_allclose(counts, expected_counts, **F32)
    assert_allclose(edges, np.histogram_bin_edges(a, **{k: v for k, v in kwargs.items() if k != "density"}), **F32)


def test_histogram_dtypes_and_constant_input():
    counts, edges = jnp.histogram(np.full(4, 2, np.int32), bins=2)
    assert counts.dtype == edges.dtype == np.float32
    assert_allclose(edges, np.histogram_bin_edges(np.full(4, 2), bins=2), dtype=np.float32)
    assert_allclose(counts, np.array([0, 4], np.float32))
    assert jnp.histogram(np.arange(4, dtype=np.float16), 3)[0].dtype == np.float16
    check_eager_and_jit(lambda a: jnp.histogram_bin_edges(a, 4, range=(0, 2)), np.arange(3.0, dtype=np.float32),
                        expected=np.linspace(0, 2, 5, dtype=np.float32))


def test_histogram_errors():
    with pytest.raises(errors.ConcretizationTypeError, match="argument 'bins' of jnp.histogram_bin_edges"):
        ember.jit(jnp.histogram)(jnp.arange(3.0), 4)
    with pytest.raises(ValueError, match="weights should have the same shape as a"):
        jnp.histogram(jnp.arange(3.0), weights=jnp.ones(2))
    with pytest.raises(ValueError, match="`bins` must be positive"):
        jnp.histogram(jnp.arange(3.0), 0)
    with pytest.raises(ValueError, match="`range` must be either None or a sequence of two scalars"):
        jnp.histogram(jnp.arange(3.0), 2, range=(0, 1, 2))
    with pytest.raises(NotImplementedError, match="string values for `bins`"):
        jnp.histogram_bin_edges(jnp.arange(3.0), "auto")


def test_histogram_weights_gradient(rng):
    a = _normal(rng, 10)
    grad = ember.grad(lambda w: jnp.histogram(a, 3, weights=w)[0][1])(jnp.ones(10))
    edges = np.asarray(jnp.histogram_bin_edges(a, 3))
    assert_allclose(grad, ((a >= edges[1]) & (a < edges[2])).astype(np.float32))


# --- convolve, correlate --------------------------------------------------------------------------------
@given(hnp.arrays(np.float32, st.integers(1, 7), elements=st.floats(-10, 10, width=32)),
       hnp.arrays(np.float32, st.integers(1, 7), elements=st.floats(-10, 10, width=32)),
       st.sampled_from(["full", "same", "valid"]))
def test_convolve_and_correlate_match_numpy(a, v, mode):
    tol = dict(dtype=np.float32, rtol=1e-5, atol=1e-4)
    check_eager_and_jit(lambda x, y: jnp.convolve(x, y, mode), a, v, expected=np.convolve(a, v, mode), **tol)
    check_eager_and_jit(lambda x, y: jnp.correlate(x, y, mode), a, v, expected=np.correlate(a, v, mode), **tol)


def test_convolve_dtypes_defaults_and_precision():
    i = np.array([1, 2, 3, 2, 1], np.int32)
    k = np.array([4, 1, 2], np.int32)
    check_eager_and_jit(jnp.convolve, i, k, expected=np.convolve(i, k).astype(np.float32))
    check_eager_and_jit(jnp.correlate, i, k, expected=np.correlate(i, k).astype(np.float32))
    exact = jnp.convolve(i, k, preferred_element_type=jnp.int32)
    assert_allclose(exact, np.convolve(i, k))
    assert_allclose(jnp.convolve(i, k.astype(np.float16), precision="highest"), np.convolve(i, k), dtype=np.float16)


def test_convolve_gradients(rng):
    a, v = _normal(rng, 6), _normal(rng, 3)
    weights = _normal(rng, 8)
    _check_gradient(lambda x: jnp.dot(jnp.convolve(x, v), weights), a)
    _check_gradient(lambda y: jnp.dot(jnp.convolve(a, y), weights), v)
    _check_gradient(lambda y: jnp.sum(jnp.correlate(a, y, "same") ** 2), v)


def test_convolve_errors():
    with pytest.raises(ValueError, match="jnp.convolve only supports 1-dimensional inputs; got shapes"):
        jnp.convolve(jnp.ones((2, 2)), jnp.ones(2))
    with pytest.raises(ValueError, match="jnp.correlate only supports 1-dimensional inputs"):
        jnp.correlate(jnp.ones(2), jnp.asarray(1.0))
    with pytest.raises(ValueError, match="inputs cannot be empty"):
        jnp.convolve(jnp.ones(0), jnp.ones(2))
    with pytest.raises(ValueError, match="mode must be one of"):
        jnp.convolve(jnp.ones(3), jnp.ones(2), mode="circular")


# --- cov, corrcoef ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    dict(), dict(rowvar=False), dict(bias=True), dict(ddof=3), dict(fweights=np.array([1, 2, 1, 3, 1, 1])),
    dict(aweights=np.array([0.5, 1.0, 2.0, 0.1, 1.0, 1.5])),
    dict(fweights=np.array([1, 2, 1, 3, 1, 1]), aweights=np.array([0.5, 1.0, 2.0, 0.1, 1.0, 1.5]), ddof=2),
])
def test_cov_matches_numpy(rng, kwargs):
    m = _normal(rng, 3, 6)
    y = m[:1] * 2  # one more variable
    if kwargs.get("rowvar") is False:
        m, y = m.T.copy(), y.T.copy()
    check_eager_and_jit(lambda a: jnp.cov(a, **kwargs), m, expected=np.cov(m, **kwargs), **F32)
    check_eager_and_jit(lambda a, b: jnp.cov(a, b, **kwargs), m, y, expected=np.cov(m, y, **kwargs), **F32)


def test_cov_shapes_and_dtypes(rng):
    v = np.array([1, 4, 2, 8], np.int32)
    check_eager_and_jit(jnp.cov, v, expected=np.cov(v), **F32)
    assert jnp.cov(v).shape == () and jnp.cov(v, dtype=jnp.float16).dtype == np.float16
    assert jnp.cov(np.zeros((0, 3), np.float32)).shape == (0, 0)
    assert np.isnan(np.asarray(jnp.cov(np.zeros((2, 0), np.float32)))).all()


def test_corrcoef_matches_numpy(rng):
    x = _normal(rng, 3, 7)
    check_eager_and_jit(jnp.corrcoef, x, expected=np.corrcoef(x), **F32)
    check_eager_and_jit(lambda a: jnp.corrcoef(a[0], a[1]), x, expected=np.corrcoef(x[0], x[1]), **F32)
    check_eager_and_jit(lambda a: jnp.corrcoef(a, rowvar=False), x.T, expected=np.corrcoef(x.T, rowvar=False), **F32)
    assert_allclose(jnp.corrcoef(np.arange(4)), np.array(1.0, np.float32))


def test_cov_gradient(rng):
    m = _normal(rng, 2, 5)
    _check_gradient(lambda x: jnp.cov(x)[0, 1], m)
    _check_gradient(lambda x: jnp.corrcoef(x)[0, 1], m)
    _check_gradient(lambda w: jnp.cov(m, aweights=w)[0, 1], np.array([0.5, 1.0, 2.0, 0.3, 1.0], np.float32))


def test_cov_errors():
    with pytest.raises(ValueError, match="m has more than 2 dimensions"):
        jnp.cov(jnp.ones((2, 2, 2)))
    with pytest.raises(RuntimeError, match="incompatible numbers of samples and fweights"):
        jnp.cov(jnp.ones((2, 3)), fweights=jnp.ones(2, jnp.int32))
    with pytest.raises(TypeError, match="fweights must be integer"):
        jnp.cov(jnp.ones((2, 3)), fweights=jnp.ones(3))
    with pytest.raises(RuntimeError, match="cannot handle multidimensional aweights"):
        jnp.cov(jnp.ones((2, 3)), aweights=jnp.ones((3, 1)))
    with pytest.raises(ValueError, match="dtype must be a subclass of float"):
        jnp.corrcoef(jnp.ones((2, 3)), dtype=jnp.int32)


# --- polyval, vander ----------------------------------------------------------------------------------
def test_polyval_matches_numpy(rng):
    p, x = _normal(rng, 5), _normal(rng, 3, 2)
    check_eager_and_jit(jnp.polyval, p, x, expected=np.polyval(p, x), **F32)
    ip, ix = np.array([2, -1, 3], np.int32), np.array([0, 1, 5], np.int32)
    check_eager_and_jit(jnp.polyval, ip, ix, expected=np.polyval(ip, ix).astype(np.int32))
    many = _normal(rng, 4, 3)  # three polynomials, one per column
    check_eager_and_jit(lambda c, v: jnp.polyval(c, v, unroll=2), many, x[:, :1],
                        expected=np.stack([np.polyval(many[:, j], x[:, 0]) for j in range(3)], 1), **F32)
    _check_gradient(lambda v: jnp.polyval(p, v).sum(), x)
    _check_gradient(lambda c: jnp.polyval(c, x).sum(), p)
    with pytest.raises(ValueError, match="p must be a 1-D"):
        jnp.polyval(2.0, x)


@pytest.mark.parametrize("N,increasing", [(None, False), (2, False), (5, True), (0, False)])
def test_vander_matches_numpy(N, increasing):
    x = np.array([1.5, -2.0, 0.0, 3.0], np.float32)
    check_eager_and_jit(lambda a: jnp.vander(a, N, increasing), x, expected=np.vander(x, N, increasing), **F32)
    i = np.array([2, 3, -1], np.int32)
    check_eager_and_jit(lambda a: jnp.vander(a, N, increasing), i,
                        expected=np.vander(i, N, increasing).astype(np.int32))


def test_vander_errors():
    with pytest.raises(ValueError, match="x must be a one-dimensional array"):
        jnp.vander(jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="N must be nonnegative"):
        jnp.vander(jnp.ones(2), -1)
    with pytest.raises(errors.ConcretizationTypeError, match="argument 'N' of jnp.vander"):
        ember.jit(jnp.vander)(jnp.ones(2), 3)
    with pytest.raises(errors.ConcretizationTypeError, match="argument 'increasing' of jnp.vander"):
        ember.jit(lambda x, up: jnp.vander(x, 2, up))(jnp.ones(2), True)


# --- piecewise ---------------------------------------------------------------------------------------
def test_piecewise_matches_numpy():
    x = np.linspace(-3, 3, 13).astype(np.float32)

    def conditions(a):
        return [a < -1, a > 1, (a > 0.5) & (a < 2)]  # overlapping: the last one that holds wins

    functions = [lambda a: -a, lambda a: a * 3.0, 7.0, lambda a: a ** 2]  # the last: where none holds
    check_eager_and_jit(lambda a: jnp.piecewise(a, conditions(a), functions), x,
                        expected=np.piecewise(x, conditions(x), functions))
    check_eager_and_jit(lambda a: jnp.piecewise(a, [a < 0], [lambda v, k: v * k], k=2.0), x,
                        expected=np.piecewise(x, [x < 0], [lambda v: v * 2.0]))
    i = np.arange(-2, 3, dtype=np.int32)
    check_eager_and_jit(lambda a: jnp.piecewise(a, a > 0, [lambda v: v * 2.5, 1.7]), i,
                        expected=np.piecewise(i, i > 0, [lambda v: (v * 2.5).astype(np.int32), 1]))
    _check_gradient(lambda v: jnp.piecewise(v, [v < 0], [jnp.sin, jnp.cos]).sum(), np.array([-1.0, 0.5, 2.0]))
    with pytest.raises(ValueError, match="with 1 condition\\(s\\), either 1 or 2 functions are expected; got 3"):
        jnp.piecewise(x, [x < 0], [1, 2, 3])


# --- vectorize ---------------------------------------------------------------------------------------
def test_vectorize_elementwise_broadcasting():
    def clipped_ratio(a, b):
        return jnp.where(b == 0, 0.0, a / b)

    f = jnp.vectorize(clipped_ratio)
    a, b = np.arange(6, dtype=np.float32).reshape(2, 1, 3), np.array([[0.0], [2.0]], np.float32)
    expected = np.where(b == 0, 0.0, a / np.where(b == 0, 1, b)).astype(np.float32)
    check_eager_and_jit(f, a, b, expected=expected)
    assert f.__name__ == "clipped_ratio"
    out = f(1.0, 4)  # scalars: one call, weak types kept
    assert out.shape == () and out.aval.weak_type
    check_eager_and_jit(lambda a: f(a, b=2.0), a, expected=a / 2)  # keyword arguments map too


def test_vectorize_signature_core_dims(rng):
    dot = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
    a, b = _normal(rng, 4, 1, 3), _normal(rng, 5, 3)
    check_eager_and_jit(dot, a, b, expected=np.einsum("...n,...n->...", a, b), **F32)
    outer = jnp.vectorize(lambda u, v: (jnp.outer(u, v), u.sum()), signature="(m),(n)->(m,n),()")
    product, total = check_eager_and_jit(outer, a, _normal(rng, 2))
    assert product.shape == (4, 1, 3, 2) and total.shape == (4, 1)
    matvec = jnp.vectorize(jnp.matmul, signature="(m,n),(n)->(m)")
    matrices, vector = _normal(rng, 2, 3, 4), _normal(rng, 4)
    check_eager_and_jit(matvec, matrices, vector, expected=matrices @ vector, **F32)
    grad = ember.grad(lambda x: dot(x, b).sum())(jnp.asarray(a))
    assert_allclose(grad, np.broadcast_to(b.sum(0), a.shape), **F32)


def test_vectorize_excluded():
    def scale(x, factors, mode="sum"):
        return (x * factors).sum() if mode == "sum" else (x * factors).max()

    f = jnp.vectorize(scale, excluded={1, "mode"})
    x = np.arange(3, dtype=np.float32)
    factors = [1.0, 2.0]  # a list: it must reach scale unmapped
    check_eager_and_jit(lambda a: f(a, jnp.array(factors), mode="max"), x, expected=x * 2)
    check_eager_and_jit(lambda a: f(a, jnp.array(factors)), x, expected=x * 3)
    with_none = jnp.vectorize(lambda a, b: a if b is None else a + b)
    check_eager_and_jit(lambda a: with_none(a, None), x, expected=x)
    # The signature describes the arguments that are not excluded.
    weighted_sum = jnp.vectorize(lambda w, name, v: jnp.dot(w, v), excluded={1}, signature="(n),(n)->()")
    check_eager_and_jit(lambda a: weighted_sum(a, "label", jnp.ones((2, 3))), x, expected=np.full(2, 3.0, np.float32))


def test_vectorize_errors():
    dot = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'n': 2 vs 3"):
        dot(jnp.ones(3), jnp.ones(2))
    with pytest.raises(TypeError, match="wrong number of positional arguments: expected 2, got 1"):
        dot(jnp.ones(3))
    with pytest.raises(ValueError, match="does not have enough dimensions for all core dimensions"):
        dot(jnp.ones(3), 1.0)
    with pytest.raises(ValueError, match=r"output shape \(3,\) does not match core dimensions \('n', 'n'\)"):
        jnp.vectorize(lambda a, b: a * b, signature="(n),(n)->(n,n)")(jnp.ones(3), jnp.ones(3))
    with pytest.raises(TypeError, match="output must be a tuple when multiple outputs are expected"):
        jnp.vectorize(lambda a: a, signature="()->(),()")(jnp.ones(3))
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        jnp.vectorize(jnp.dot, signature="(n),(n)")
    with pytest.raises(ValueError, match="do not broadcast"):
        jnp.vectorize(jnp.add)(jnp.ones(3), jnp.ones(2))
    with pytest.raises(TypeError, match="can only exclude integer or string arguments"):
        jnp.vectorize(jnp.add, excluded={1.5})
    with pytest.raises(ValueError, match="contains negative numbers"):
        jnp.vectorize(jnp.add, excluded={-1})


# --- dtypes and weak types against JAX ---------------------------------------------------------------
def _calls():
    i32 = np.arange(4, dtype=np.int32)
    f32 = np.arange(4, dtype=np.float32)
    f16 = f32.astype(np.float16)
    u8 = i32.astype(np.uint8)
    boolean = np.array([True, False, True, True])
    return {
        "isclose(1, 2)": lambda m: m.isclose(1, 2),
        "isclose(f16, 1.0)": lambda m: m.isclose(f16, 1.0),
        "allclose(i32, 1)": lambda m: m.allclose(i32, 1),
        "diff(u8)": lambda m: m.diff(u8),
        "diff(bool)": lambda m: m.diff(boolean),
        "diff(i32, prepend=1.5)": lambda m: m.diff(i32, prepend=1.5),
        "ediff1d(i32, to_end=1.5)": lambda m: m.ediff1d(i32, to_end=1.5),
        "gradient(f16, 2.0)": lambda m: m.gradient(f16, 2.0),
        "gradient(f16, f32)": lambda m: m.gradient(f16, f32),
        "trapezoid(i32)": lambda m: m.trapezoid(i32),
        "trapezoid(f16, dx=2)": lambda m: m.trapezoid(f16, dx=2),
        "trapezoid(i32, f16)": lambda m: m.trapezoid(i32, f16),
        "interp(i32, i32, i32)": lambda m: m.interp(i32, i32, i32),
        "interp(1.5, f32, f16)": lambda m: m.interp(1.5, f32, f16),
        "interp(f16, f16, f16, left=0)": lambda m: m.interp(f16, f16, f16, left=0),
        "bincount(u8)": lambda m: m.bincount(u8),
        "bincount(i32, f16)": lambda m: m.bincount(i32, f16),
        "digitize(i32, f32)": lambda m: m.digitize(i32, f32),
        "digitize(1.5, f16)": lambda m: m.digitize(1.5, f16),
        "histogram(i32)": lambda m: m.histogram(i32),
        "histogram(f16, 3)": lambda m: m.histogram(f16, 3),
        "histogram(i32, weights=i32)": lambda m: m.histogram(i32, weights=i32),
        "histogram_bin_edges(f32, f16)": lambda m: m.histogram_bin_edges(f32, f16),
        "convolve(i32, i32)": lambda m: m.convolve(i32, i32),
        "convolve(f16, i32)": lambda m: m.convolve(f16, i32),
        "correlate(i32, i32, int32)": lambda m: m.correlate(i32, i32, preferred_element_type=np.int32),
        "cov(i32)": lambda m: m.cov(i32),
        "cov(f16, f16)": lambda m: m.cov(f16, f16),
        "corrcoef(i32, f32)": lambda m: m.corrcoef(i32, f32),
        "polyval(i32, 2)": lambda m: m.polyval(i32, 2),
        "polyval(i32, 2.0)": lambda m: m.polyval(i32, 2.0),
        "polyval(f16, i32)": lambda m: m.polyval(f16, i32),
        "vander(i32)": lambda m: m.vander(i32),
        "vander(f16, 2)": lambda m: m.vander(f16, 2),
        "piecewise(i32, [i32 > 1], [lambda x: x * 2.5, 1.7])": lambda m: m.piecewise(
            i32, [i32 > 1], [lambda x: x * 2.5, 1.7]),
        "vectorize(add)(i32, 1)": lambda m: m.vectorize(lambda a, b: a + b)(i32, 1),
        "vectorize(add)(1, 2.0)": lambda m: m.vectorize(lambda a, b: a + b)(1, 2.0),
    }


def _types(result):
    """(dtype, shape, weak type) of each array of an ember or a JAX result."""
    leaves = result if isinstance(result, (tuple, list)) else [result]
    return [(np.dtype(x.dtype), x.shape, x.aval.weak_type if isinstance(x, ember.Array) else x.weak_type)
            for x in leaves]


@pytest.mark.parametrize("call", list(_calls()))
def test_dtypes_and_weak_types_match_jax(call):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert _types(_calls()[call](jnp)) == _types(_calls()[call](jax_numpy))


# --- under vmap and with 64-bit types -------------------------------------------------------------------
@pytest.mark.parametrize("name,fn", [
    ("diff", lambda x: jnp.diff(x, 2, prepend=0.0)),
    ("gradient", lambda x: jnp.gradient(x, 0.5)),
    ("trapezoid", lambda x: jnp.trapezoid(x, dx=0.1)),
    ("interp", lambda x: jnp.interp(x * 2, jnp.arange(5.0), x)),
    ("convolve", lambda x: jnp.convolve(x, x[:3], "same")),
    ("histogram", lambda x: jnp.histogram(x, jnp.array([-1.0, 0.0, 1.0]))[0]),
    ("bincount", lambda x: jnp.bincount((x > 0).astype(jnp.int32), x, length=3)),
    ("digitize", lambda x: jnp.digitize(x, jnp.array([-0.5, 0.5]))),
    ("cov", lambda x: jnp.cov(x, x ** 2)),
    ("polyval", lambda x: jnp.polyval(x, 0.5)),
    ("vander", lambda x: jnp.vander(x, 3)),
    ("isclose", lambda x: jnp.isclose(x, 0.1, atol=0.5)),
    ("piecewise", lambda x: jnp.piecewise(x, [x < 0], [jnp.exp, jnp.sin])),
])
def test_vmap_equals_a_loop(rng, name, fn):
    batch = _normal(rng, 3, 5)
    expected = np.stack([np.asarray(fn(jnp.asarray(row))) for row in batch])
    check_eager_and_jit(ember.vmap(fn), batch, expected=expected, rtol=1e-5, atol=1e-6)


def test_64_bit_defaults(x64):
    assert jnp.bincount(np.array([0, 2])).dtype == np.int64
    assert jnp.convolve(np.arange(3), np.arange(2)).dtype == np.float64
    assert_allclose(jnp.cov(np.arange(4.0)), np.cov(np.arange(4.0)))
    assert jnp.histogram(np.arange(4))[0].dtype == np.float64


def test_iscomplexobj_and_isrealobj_look_at_the_type_alone():
    for x in (jnp.ones(3), np.ones(2, np.complex64), 1.0, 1j, [1, 2], None, np.array([1 + 0j])):
        assert jnp.iscomplexobj(x) == np.iscomplexobj(x) and jnp.isrealobj(x) == np.isrealobj(x), x
    assert ember.jit(lambda x: jnp.isrealobj(x) * x)(2.0) == 2.0
