"""Counting, binning and covariance (``ember.numpy.statistics``: bincount, digitize, histogram,
histogram_bin_edges, histogram2d, histogramdd, cov, corrcoef) against NumPy and JAX, eagerly and
under jit; gradients against finite differences."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from jax_oracle import jjnp, same_as_jax
from util import (
    array_types,
    assert_allclose,
    check_eager_and_jit,
    check_float32_gradient,
    normal_float32,
)

import ember
import ember.numpy as jnp
from ember import errors

F32 = np.float32


TOL = dict(dtype=np.float32, rtol=2e-5, atol=2e-5)  # float32 results against float64 NumPy

rng = np.random.default_rng(0)


# --- bincount, digitize ------------------------------------------------------------------------------
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


# --- histogram ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    dict(), dict(bins=4), dict(bins=3, range=(-1.0, 1.0)), dict(bins=np.array([-2.0, -0.5, 0.0, 0.25, 3.0])),
    dict(bins=5, density=True), dict(bins=np.array([-1.0, 0.0, 1.0]), density=True),
])
@pytest.mark.parametrize("weighted", [False, True])
def test_histogram_matches_numpy(rng, kwargs, weighted):
    a = normal_float32(rng, 40)
    a[:3] = [-1.0, 1.0, 3.0]  # values on the edges
    weights = rng.random(40).astype(np.float32) if weighted else None
    fn = (lambda x, w: jnp.histogram(x, weights=w, **kwargs)) if weighted else (lambda x: jnp.histogram(x, **kwargs))
    counts, edges = check_eager_and_jit(fn, *([a, weights] if weighted else [a]))
    # Counting against NumPy with ember's edges (float32 edges place boundary values exactly).
    expected_counts, _ = np.histogram(a, np.asarray(edges), weights=weights, density=kwargs.get("density"))
    assert_allclose(counts, expected_counts, **TOL)
    assert_allclose(edges, np.histogram_bin_edges(a, **{k: v for k, v in kwargs.items() if k != "density"}), **TOL)


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
    a = normal_float32(rng, 10)
    grad = ember.grad(lambda w: jnp.histogram(a, 3, weights=w)[0][1])(jnp.ones(10))
    edges = np.asarray(jnp.histogram_bin_edges(a, 3))
    assert_allclose(grad, ((a >= edges[1]) & (a < edges[2])).astype(np.float32))


# --- histogram2d, histogramdd ------------------------------------------------------------------------
HX = rng.normal(size=40).astype(F32)
HY = rng.uniform(-2, 2, size=40).astype(F32)
HW = rng.uniform(0, 1, size=40).astype(F32)


@pytest.mark.parametrize("kwargs", [{}, {"bins": 4}, {"bins": (3, 5)}, {"bins": np.linspace(-2, 2, 6)},
                                    {"bins": 3, "range": [(-1, 1), (-2, 2)]}, {"weights": HW},
                                    {"bins": 4, "density": True}, {"weights": HW, "density": True}])
def test_histogram2d_matches_jax_and_numpy(x64_both, kwargs):
    theirs = jjnp.histogram2d(HX, HY, **kwargs)
    ours = jnp.histogram2d(HX, HY, **kwargs)
    same_as_jax(ours, theirs, rtol=1e-5, atol=1e-5)
    same_as_jax(ember.jit(lambda x, y: jnp.histogram2d(x, y, **kwargs))(HX, HY), theirs, rtol=1e-5, atol=1e-5)
    expected = np.histogram2d(HX, HY, **kwargs)
    for o, e in zip(ours, expected):
        assert_allclose(o, e, check_dtype=False, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [{}, {"bins": [2, 3, 4]}, {"range": [None, (-1, 1), None], "bins": 3},
                                    {"weights": HW, "density": True}])
def test_histogramdd_matches_jax_and_numpy(x64_both, kwargs):
    sample = np.stack([HX, HY, HX * HY], axis=1)
    theirs = jjnp.histogramdd(sample, **kwargs)
    same_as_jax(jnp.histogramdd(sample, **kwargs), theirs, rtol=1e-5, atol=1e-5)
    same_as_jax(ember.jit(lambda s: jnp.histogramdd(s, **kwargs))(sample), theirs, rtol=1e-5, atol=1e-5)
    hist, edges = np.histogramdd(sample, **kwargs)
    assert_allclose(jnp.histogramdd(sample, **kwargs)[0], hist, check_dtype=False, rtol=1e-5, atol=1e-5)


def test_histogramdd_errors_match_jax():
    sample = np.ones((4, 2), F32)
    for fn, arr in ((jnp.histogramdd, np.asarray), (jjnp.histogramdd, jjnp.asarray)):
        with pytest.raises(ValueError, match="one weight for each sample"):
            fn(arr(sample), weights=arr(np.ones(3, F32)))
        with pytest.raises(ValueError, match="a bin for each dimension"):
            fn(arr(sample), bins=[2, 3, 4])
        with pytest.raises(ValueError, match="range must be a sequence"):
            fn(arr(sample), range=[(0, 1)])


@given(st.integers(0, 2 ** 31), st.integers(1, 30), st.integers(1, 6), st.integers(1, 6))
def test_histogram2d_hypothesis(seed, n, bx, by):
    # Values against NumPy's over random shapes; JAX's types are the parametrized tests' (JAX
    # compiles every eager operation per shape: 15 s of the suite here).
    r = np.random.default_rng(seed)
    x, y = r.normal(size=n).astype(F32), r.normal(size=n).astype(F32)
    bins = [np.linspace(-2, 2, bx + 1).astype(F32), np.linspace(-2.5, 1.5, by + 1).astype(F32)]
    counts, xedges, yedges = jnp.histogram2d(x, y, bins=bins)
    want, want_x, want_y = np.histogram2d(x, y, bins=bins)
    assert counts.dtype == np.int32 and xedges.dtype == yedges.dtype == np.float32
    assert_allclose(counts, want, check_dtype=False)
    assert_allclose(xedges, want_x, check_dtype=False)
    assert_allclose(yedges, want_y, check_dtype=False)


# --- cov, corrcoef -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [
    dict(), dict(rowvar=False), dict(bias=True), dict(ddof=3), dict(fweights=np.array([1, 2, 1, 3, 1, 1])),
    dict(aweights=np.array([0.5, 1.0, 2.0, 0.1, 1.0, 1.5])),
    dict(fweights=np.array([1, 2, 1, 3, 1, 1]), aweights=np.array([0.5, 1.0, 2.0, 0.1, 1.0, 1.5]), ddof=2),
])
def test_cov_matches_numpy(rng, kwargs):
    m = normal_float32(rng, 3, 6)
    y = m[:1] * 2  # one more variable
    if kwargs.get("rowvar") is False:
        m, y = m.T.copy(), y.T.copy()
    check_eager_and_jit(lambda a: jnp.cov(a, **kwargs), m, expected=np.cov(m, **kwargs), **TOL)
    check_eager_and_jit(lambda a, b: jnp.cov(a, b, **kwargs), m, y, expected=np.cov(m, y, **kwargs), **TOL)


def test_cov_shapes_and_dtypes(rng):
    v = np.array([1, 4, 2, 8], np.int32)
    check_eager_and_jit(jnp.cov, v, expected=np.cov(v), **TOL)
    assert jnp.cov(v).shape == () and jnp.cov(v, dtype=jnp.float16).dtype == np.float16
    assert jnp.cov(np.zeros((0, 3), np.float32)).shape == (0, 0)
    assert np.isnan(np.asarray(jnp.cov(np.zeros((2, 0), np.float32)))).all()


def test_corrcoef_matches_numpy(rng):
    x = normal_float32(rng, 3, 7)
    check_eager_and_jit(jnp.corrcoef, x, expected=np.corrcoef(x), **TOL)
    check_eager_and_jit(lambda a: jnp.corrcoef(a[0], a[1]), x, expected=np.corrcoef(x[0], x[1]), **TOL)
    check_eager_and_jit(lambda a: jnp.corrcoef(a, rowvar=False), x.T, expected=np.corrcoef(x.T, rowvar=False), **TOL)
    assert_allclose(jnp.corrcoef(np.arange(4)), np.array(1.0, np.float32))


def test_cov_gradient(rng):
    m = normal_float32(rng, 2, 5)
    check_float32_gradient(lambda x: jnp.cov(x)[0, 1], m)
    check_float32_gradient(lambda x: jnp.corrcoef(x)[0, 1], m)
    check_float32_gradient(lambda w: jnp.cov(m, aweights=w)[0, 1], np.array([0.5, 1.0, 2.0, 0.3, 1.0], np.float32))


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


# --- dtypes, weak types, vmap, 64-bit types ----------------------------------------------------------
def _calls():
    i32 = np.arange(4, dtype=np.int32)
    f32 = np.arange(4, dtype=np.float32)
    f16 = np.arange(4, dtype=np.float16)
    u8 = np.arange(4, dtype=np.uint8)
    return {
        "bincount(u8)": lambda m: m.bincount(u8),
        "bincount(i32, f16)": lambda m: m.bincount(i32, f16),
        "digitize(i32, f32)": lambda m: m.digitize(i32, f32),
        "digitize(1.5, f16)": lambda m: m.digitize(1.5, f16),
        "histogram(i32)": lambda m: m.histogram(i32),
        "histogram(f16, 3)": lambda m: m.histogram(f16, 3),
        "histogram(i32, weights=i32)": lambda m: m.histogram(i32, weights=i32),
        "histogram_bin_edges(f32, f16)": lambda m: m.histogram_bin_edges(f32, f16),
        "cov(i32)": lambda m: m.cov(i32),
        "cov(f16, f16)": lambda m: m.cov(f16, f16),
        "corrcoef(i32, f32)": lambda m: m.corrcoef(i32, f32),
    }


@pytest.mark.parametrize("call", list(_calls()))
def test_dtypes_and_weak_types_match_jax(call):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert array_types(_calls()[call](jnp)) == array_types(_calls()[call](jax_numpy))


@pytest.mark.parametrize("name,fn", [
    ("histogram", lambda x: jnp.histogram(x, jnp.array([-1.0, 0.0, 1.0]))[0]),
    ("bincount", lambda x: jnp.bincount((x > 0).astype(jnp.int32), x, length=3)),
    ("digitize", lambda x: jnp.digitize(x, jnp.array([-0.5, 0.5]))),
    ("cov", lambda x: jnp.cov(x, x ** 2)),
])
def test_vmap_equals_a_loop(rng, name, fn):
    batch = normal_float32(rng, 3, 5)
    expected = np.stack([np.asarray(fn(jnp.asarray(row))) for row in batch])
    check_eager_and_jit(ember.vmap(fn), batch, expected=expected, rtol=1e-5, atol=1e-6)


def test_64_bit_defaults(x64):
    assert jnp.bincount(np.array([0, 2])).dtype == np.int64
    assert jnp.convolve(np.arange(3), np.arange(2)).dtype == np.float64
    assert_allclose(jnp.cov(np.arange(4.0)), np.cov(np.arange(4.0)))
    assert jnp.histogram(np.arange(4))[0].dtype == np.float64
