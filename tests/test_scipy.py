"""ember.scipy (special, stats, linalg): differential against SciPy and jax.scipy (values, dtypes,
weak types), eagerly and under jit; gradients against finite differences. Needs SciPy."""
import pathlib
import re
import subprocess
import sys
import types

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as jnp
from ember.scipy import linalg as sla, special, stats
from tests.util import assert_allclose, check_eager_and_jit, check_gradient

scipy_special = pytest.importorskip("scipy.special")
scipy_stats = pytest.importorskip("scipy.stats")
scipy_linalg = pytest.importorskip("scipy.linalg")

F32 = dict(rtol=2e-5, atol=1e-6)
F64 = dict(rtol=1e-10, atol=1e-12)


# --- special ------------------------------------------------------------------------------------
UNARY_SPECIAL = [  # (ember, scipy, points)
    (special.erf, scipy_special.erf, [-3.0, -0.5, 0.0, 0.2, 1.5, 4.0]),
    (special.erfc, scipy_special.erfc, [-3.0, -0.5, 0.0, 0.2, 1.5, 8.0]),
    (special.erfinv, scipy_special.erfinv, [-0.999, -0.5, 0.0, 0.3, 0.9, 0.99999]),
    (special.gammaln, scipy_special.gammaln, [0.1, 0.5, 1.0, 2.5, 10.0, 150.0]),
    (special.digamma, scipy_special.digamma, [0.1, 0.5, 1.0, 2.5, 10.0, 150.0]),
    (special.expit, scipy_special.expit, [-50.0, -3.0, 0.0, 0.7, 20.0]),
    (special.logit, scipy_special.logit, [1e-6, 0.1, 0.5, 0.8, 0.999]),
    (special.entr, scipy_special.entr, [-1.0, 0.0, 1e-8, 0.3, 1.0, 5.0]),
    (special.ndtr, scipy_special.ndtr, [-30.0, -6.0, -1.0, 0.0, 0.5, 3.0, 9.0]),
    (special.log_ndtr, scipy_special.log_ndtr, [-60.0, -25.0, -12.0, -3.0, 0.0, 2.0, 6.0, 12.0]),
    (special.ndtri, scipy_special.ndtri, [1e-300, 1e-30, 1e-8, 0.02, 0.3, 0.5, 0.7, 0.999, 1 - 1e-12]),
]


@pytest.mark.parametrize("fn,reference,points", UNARY_SPECIAL, ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("x64", [False, True])
def test_unary_special_matches_scipy(fn, reference, points, x64):
    with ember.config.override(enable_x64=x64):
        dtype = np.float64 if x64 else np.float32
        x = np.array(points, dtype)
        expected = reference(x.astype(np.float64)).astype(dtype)
        tol = F64 if x64 else dict(rtol=1e-5, atol=1e-6)
        check_eager_and_jit(fn, x, expected=expected, **tol)


@pytest.mark.parametrize("fn", [special.erf, special.gammaln, special.ndtr, special.log_ndtr, special.ndtri,
                                special.expit, special.entr, special.digamma, special.erfc, special.erfinv,
                                special.logit])
def test_unary_special_promotes_ints_and_keeps_weak_types(fn):
    assert fn(np.array([0, 1], np.int32)).dtype == np.float32
    assert fn(jnp.array([0, 1], jnp.int32)).dtype == jnp.float32
    scalar = fn(0.25)
    # As in JAX, the ndtr family returns a strong type even for a Python scalar.
    assert scalar.dtype == np.float32 and scalar.weak_type == (fn not in (special.ndtr, special.log_ndtr,
                                                                        special.ndtri))
    assert not fn(np.float32(0.25)).weak_type


def test_special_edges():
    assert_allclose(special.ndtri(np.array([0.0, 1.0, -0.1, 1.5, np.nan], np.float32)),
                    np.array([-np.inf, np.inf, np.nan, np.nan, np.nan], np.float32))
    assert_allclose(special.entr(np.array([0.0, -1.0], np.float32)), np.array([0.0, -np.inf], np.float32))
    assert_allclose(special.xlogy(np.float32(0), np.float32(0)), np.float32(0))
    assert_allclose(special.xlog1py(np.float32(0), np.float32(-1)), np.float32(0))
    with pytest.raises(ValueError, match="series_order"):
        special.log_ndtr(1.0, series_order=31)
    with pytest.raises(ValueError, match="positive integer"):
        special.multigammaln(3.0, 0)


@given(st.lists(st.floats(-5, 5), min_size=1, max_size=6), st.lists(st.floats(0.01, 10), min_size=1, max_size=6))
def test_binary_special_matches_scipy(xs, ys):
    n = min(len(xs), len(ys))
    x, y = np.array(xs[:n], np.float32), np.array(ys[:n], np.float32)
    x[0] = 0.0  # the x == 0 convention
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    check_eager_and_jit(special.xlogy, x, y, expected=scipy_special.xlogy(x64, y64).astype(np.float32), **F32)
    check_eager_and_jit(special.xlog1py, x, y, expected=scipy_special.xlog1py(x64, y64).astype(np.float32), **F32)
    check_eager_and_jit(special.betaln, y, y + 1, expected=scipy_special.betaln(y64, y64 + 1).astype(np.float32),
                        rtol=1e-4, atol=1e-5)


def test_multigammaln_and_reductions(x64):
    a = np.array([3.0, 4.5, 10.0])
    check_eager_and_jit(lambda v: special.multigammaln(v, 3), a,
                        expected=np.array([scipy_special.multigammaln(v, 3) for v in a]), **F64)
    x = np.random.default_rng(0).normal(size=(3, 4))
    b = np.random.default_rng(1).normal(size=(3, 4))
    check_eager_and_jit(lambda v: special.logsumexp(v, axis=1, keepdims=True), x,
                        expected=scipy_special.logsumexp(x, axis=1, keepdims=True), **F64)
    value, sign = special.logsumexp(x, axis=0, b=b, return_sign=True)
    expected_value, expected_sign = scipy_special.logsumexp(x, axis=0, b=b, return_sign=True)
    assert_allclose(value, expected_value, **F64)
    assert_allclose(sign, expected_sign)
    check_eager_and_jit(special.softmax, x, expected=scipy_special.softmax(x), **F64)
    check_eager_and_jit(lambda v: special.log_softmax(v, axis=0), x,
                        expected=scipy_special.log_softmax(x, axis=0), **F64)


@pytest.mark.parametrize("fn,points", [
    (special.erf, [-1.0, 0.3, 2.0]), (special.erfinv, [-0.7, 0.1, 0.9]), (special.gammaln, [0.4, 3.0, 7.5]),
    (special.digamma, [0.4, 3.0, 7.5]), (special.expit, [-2.0, 0.5]), (special.logit, [0.2, 0.7]),
    (special.entr, [0.2, 2.0]), (special.ndtr, [-3.0, 0.0, 2.0]), (special.log_ndtr, [-30.0, -5.0, 0.5, 4.0]),
    (special.ndtri, [1e-3, 0.2, 0.6, 0.97]),
    (lambda v: special.xlogy(v, 2.5 * v), [0.3, 2.0]), (lambda v: special.xlog1py(v, v), [0.3, 2.0]),
    (lambda v: special.betaln(v, 2.0), [0.5, 3.0]), (lambda v: special.multigammaln(v, 2), [2.0, 5.0]),
    (lambda v: special.logsumexp(v), [0.3, -1.0, 2.0]), (lambda v: special.softmax(v) * v, [0.3, -1.0]),
    (lambda v: special.log_softmax(v) * v, [0.3, -1.0]),
])
def test_special_gradients(fn, points, x64):
    check_gradient(fn, np.array(points), rtol=1e-5, atol=1e-7)


def test_special_against_jax_scipy():
    pytest.importorskip("jax")
    import jax.scipy.special as jsp
    x = np.array([0.05, 0.4, 0.8], np.float32)
    for name in ["erf", "erfc", "erfinv", "gammaln", "digamma", "expit", "logit", "entr", "ndtr", "ndtri",
                 "log_ndtr"]:
        ours, theirs = getattr(special, name), getattr(jsp, name)
        for arg in (x, 0.3) if name.startswith(("ndtr", "log_ndtr")) else (x, 0.3, np.int32(1)):  # JAX refuses ints
            expected = theirs(arg)
            got = ember.jit(ours)(arg)
            assert got.dtype == expected.dtype and got.weak_type == expected.weak_type, name
            assert_allclose(got, np.asarray(expected), rtol=1e-5, atol=1e-6)


# Gamma-family, entropy and Box-Cox functions: (ember, scipy, argument columns), with poles, zeros,
# negative and out-of-range points. SciPy's conventions are JAX's here except where noted below.
GAMMA_FAMILY = [
    (special.gamma, scipy_special.gamma, ([-3.5, -1.5, -0.5, 0.25, 1.0, 4.5, 20.0, 30.0],)),
    (special.gammasgn, scipy_special.gammasgn, ([-3.5, -2.5, -1.5, -0.5, 0.0, 0.25, 7.0, np.nan],)),
    (special.loggamma, scipy_special.loggamma, ([0.01, 0.5, 1.0, 2.0, 4.5, 150.0],)),
    (special.beta, scipy_special.beta, ([-2.3, 0.5, 1.0, 3.0, 20.0], [1.5, -0.3, 2.0, 0.2, 30.0])),
    (special.factorial, scipy_special.factorial, ([-1.0, 0.0, 1.0, 4.0, 5.5, 20.0],)),
    (special.comb, scipy_special.comb, ([5.0, 5.0, 5.0, -1.0, 10.0, 4.5, 30.0], [2.0, 0.0, 6.0, 1.0, -1.0, 2.0, 15.0])),
    (lambda n, k: special.comb(n, k, repetition=True), lambda n, k: scipy_special.comb(n, k, repetition=True),
     ([5.0, 5.0, 0.0, 3.0, 10.0], [2.0, 0.0, 0.0, 4.0, 3.0])),
    (special.poch, scipy_special.poch, ([0.5, 2.0, -1.5, 3.0, 7.0], [0.0, 1.5, 2.0, -0.5, 4.0])),
    (special.rel_entr, scipy_special.rel_entr, ([0.0, 0.0, 1.0, -1.0, 2.0, 0.5, 0.0],
                                                [0.0, 1.0, 0.0, 1.0, -1.0, 2.0, -1.0])),
    (special.kl_div, scipy_special.kl_div, ([0.0, 0.0, 1.0, -1.0, 2.0, 0.5, 3.0],
                                            [0.0, 1.0, 0.0, 1.0, -1.0, 2.0, 3.0])),
    (special.boxcox, scipy_special.boxcox, ([0.0, 0.5, 2.0, 3.0, -1.0, 1.0], [0.0, 1.5, 0.0, -2.0, 1.0, 1e-3])),
    (special.boxcox1p, scipy_special.boxcox1p, ([-1.0, 0.5, 2.0, 1e-6, -2.0, 0.0], [0.0, 1.5, 0.0, -2.0, 1.0, 0.7])),
]


@pytest.mark.parametrize("fn,reference,columns", GAMMA_FAMILY, ids=lambda v: getattr(v, "__name__", ""))
@pytest.mark.parametrize("x64", [False, True])
def test_gamma_family_matches_scipy(fn, reference, columns, x64):
    with ember.config.override(enable_x64=x64):
        dtype = np.float64 if x64 else np.float32
        args = [np.array(c, dtype) for c in columns]
        expected = np.asarray(reference(*(a.astype(np.float64) for a in args)), np.float64).astype(dtype)
        # (exp of a sum of gammaln values: float32's relative error grows with their size)
        check_eager_and_jit(fn, *args, expected=expected, **(dict(rtol=1e-12, atol=1e-13) if x64
                                                             else dict(rtol=5e-5, atol=1e-6)))


def test_gamma_family_poles_and_errors():
    # At the poles SciPy's gamma is inf or NaN by version; JAX's (and ember's) is NaN, and +-inf at +-0.
    assert_allclose(special.gamma(np.array([-2.0, -1.0, 0.0, -0.0, np.nan], np.float32)),
                    np.array([np.nan, np.nan, np.inf, -np.inf, np.nan], np.float32))
    assert_allclose(special.loggamma(np.array([-0.5, 0.0, -3.0], np.float32)), np.full(3, np.nan, np.float32))
    assert_allclose(special.gammasgn(np.array([-0.0, -4.0], np.float32)), np.array([-1.0, np.nan], np.float32))
    assert_allclose(special.poch(np.float32(-2.0), np.float32(0.0)), np.float32(1.0))
    # A negative integer a + b is a pole of the denominator: NaN, as JAX (SciPy: 0).
    assert np.isnan(special.beta(np.float32(-2.5), np.float32(1.5)))
    with pytest.raises(NotImplementedError, match="factorial with exact=True"):
        special.factorial(3, exact=True)
    for fn, args in [(special.gamma, (1j,)), (special.beta, (1j, 1.0)), (special.rel_entr, (1j, 1.0)),
                     (special.i0e, (1j,)), (special.gammasgn, (1j,))]:
        with pytest.raises(ValueError, match="does not support complex-valued inputs"):
            fn(*args)


BESSEL_POINTS = [-700.0, -30.0, -8.01, -8.0, -3.0, -1e-3, -0.0, 0.0, 1e-20, 0.5, 2.0, 7.99, 8.0, 8.01, 20.0, 85.0,
                 700.0, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("name", ["i0e", "i0", "i1e", "i1"])
@pytest.mark.parametrize("x64", [False, True])
def test_bessel_matches_scipy(name, x64):
    fn, reference = getattr(special, name), getattr(scipy_special, name)
    with ember.config.override(enable_x64=x64):
        dtype = np.float64 if x64 else np.float32
        points = np.array(BESSEL_POINTS, dtype)
        # exp(|x|) overflows float32 past ~88: the reference is formed in float32 from the float64 value.
        with np.errstate(over="ignore"):
            expected = reference(points.astype(np.float64)).astype(dtype)
        check_eager_and_jit(fn, points, expected=expected, **(dict(rtol=2e-15, atol=0) if x64
                                                               else dict(rtol=2e-6, atol=0)))
        dense = np.linspace(-40, 40, 4001).astype(dtype)
        with np.errstate(over="ignore"):
            dense_expected = reference(dense.astype(np.float64))
        got = np.asarray(ember.jit(fn)(dense), np.float64)
        relative = np.abs(got - dense_expected) / np.maximum(np.abs(dense_expected), np.finfo(dtype).tiny)
        assert relative.max() < (2e-15 if x64 else 2e-6), relative.max()


@pytest.mark.parametrize("name", ["i0e", "i1e"])
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_bessel_narrow_floats(name, dtype):
    x = jnp.array([-9.0, 0.5, 3.0, 20.0], dtype)
    got = getattr(special, name)(x)
    assert got.dtype == dtype
    expected = getattr(scipy_special, name)(np.asarray(x.astype(jnp.float32), np.float64))
    assert_allclose(got.astype(jnp.float32), expected.astype(np.float32), rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("fn,points", [
    (special.i0e, [-9.0, -0.7, 0.3, 3.0, 8.5, 20.0]), (special.i1e, [-9.0, -0.7, 0.3, 3.0, 8.5, 20.0]),
    (special.i0, [-9.0, -0.7, 0.3, 3.0, 8.5]), (special.i1, [-9.0, -0.7, 0.3, 3.0, 8.5]),
    (special.gamma, [-2.5, 0.3, 1.7, 6.0]), (special.loggamma, [0.3, 2.5]), (special.factorial, [0.5, 4.0]),
    (lambda v: special.beta(v, 2.5), [0.4, 3.0]), (lambda v: special.poch(v, 1.5), [0.4, 3.0]),
    (lambda v: special.comb(7.5, v), [1.0, 2.5]), (lambda v: special.rel_entr(v, 1.5), [0.4, 3.0]),
    (lambda v: special.kl_div(0.7, v), [0.4, 3.0]), (lambda v: special.boxcox(v, 0.7), [0.4, 3.0]),
    (lambda v: special.boxcox1p(2.0, v), [-0.5, 0.7]),
])
def test_gamma_family_and_bessel_gradients(fn, points, x64):
    check_gradient(fn, np.array(points), rtol=1e-5, atol=1e-7)


def test_bessel_derivatives_at_zero(x64):
    # i0 and i0e are flat at 0 and i1, i1e have slope 1/2 (as i0e' = i1e - sign(x) i0e).
    x = np.zeros(2)
    assert_allclose(ember.vmap(ember.grad(special.i0e))(x), np.zeros(2))
    assert_allclose(ember.vmap(ember.grad(special.i1e))(x), np.full(2, 0.5))
    assert_allclose(ember.vmap(ember.grad(special.i1))(x), np.full(2, 0.5))


def test_new_special_functions_under_vmap():
    x = np.array([[0.3, 1.5, 9.0], [2.0, 0.7, 4.0]], np.float32)
    for fn in (special.i0e, special.i1, special.gamma, special.gammasgn, special.loggamma, special.factorial):
        assert_allclose(ember.vmap(fn)(x), fn(x), rtol=1e-6, atol=0)
    for fn in (special.beta, special.poch, special.comb, special.rel_entr, special.kl_div, special.boxcox,
               special.boxcox1p):
        assert_allclose(ember.vmap(fn, (0, None))(x, x[0]), fn(x, x[0]), rtol=1e-6, atol=0)


def test_new_special_functions_against_jax_scipy():
    pytest.importorskip("jax")
    import jax.scipy.special as jsp
    x = np.array([-9.0, -1.5, -0.0, 0.4, 2.0, 8.5], np.float32)
    y = np.array([0.0, 1.5, 2.0, -0.5, 4.0, 0.3], np.float32)
    for name in ["gamma", "gammasgn", "loggamma", "factorial", "i0e", "i0", "i1e", "i1"]:
        for arg in (x, 0.3, np.int32(2)):
            expected = getattr(jsp, name)(arg)
            got = ember.jit(getattr(special, name))(arg)
            assert got.dtype == expected.dtype and got.weak_type == expected.weak_type, name
            assert_allclose(got, np.asarray(expected), rtol=2e-6, atol=1e-7)
    for name in ["beta", "comb", "poch", "rel_entr", "kl_div", "boxcox", "boxcox1p"]:
        for args in ((x, y), (0.3, 2.0), (np.int32(5), np.int32(2))):
            expected = getattr(jsp, name)(*args)
            got = ember.jit(getattr(special, name))(*args)
            assert got.dtype == expected.dtype and got.weak_type == expected.weak_type, name
            assert_allclose(got, np.asarray(expected), rtol=2e-6, atol=1e-7)


# --- stats ------------------------------------------------------------------------------------------
CONTINUOUS = [  # (ember function, scipy function, x points, extra args)
    (stats.norm.logpdf, scipy_stats.norm.logpdf, [-3.0, 0.0, 1.2], (0.5, 2.0)),
    (stats.norm.pdf, scipy_stats.norm.pdf, [-3.0, 0.0, 1.2], (0.5, 2.0)),
    (stats.norm.cdf, scipy_stats.norm.cdf, [-30.0, 0.0, 1.2], (0.5, 2.0)),
    (stats.norm.logcdf, scipy_stats.norm.logcdf, [-60.0, 0.0, 1.2], (0.5, 2.0)),
    (stats.norm.sf, scipy_stats.norm.sf, [-3.0, 0.0, 30.0], (0.5, 2.0)),
    (stats.norm.logsf, scipy_stats.norm.logsf, [-3.0, 0.0, 60.0], (0.5, 2.0)),
    (stats.norm.ppf, scipy_stats.norm.ppf, [1e-20, 0.3, 0.99], (0.5, 2.0)),
    (stats.uniform.logpdf, scipy_stats.uniform.logpdf, [-1.0, 0.5, 2.0, 3.5], (0.0, 3.0)),
    (stats.uniform.pdf, scipy_stats.uniform.pdf, [-1.0, 0.5, 2.0, 3.5], (0.0, 3.0)),
    (stats.uniform.cdf, scipy_stats.uniform.cdf, [-1.0, 0.5, 2.0, 3.5], (0.0, 3.0)),
    (stats.uniform.ppf, scipy_stats.uniform.ppf, [0.0, 0.25, 1.0, 1.5], (1.0, 3.0)),
    (stats.expon.logpdf, scipy_stats.expon.logpdf, [-1.0, 0.5, 2.0], (0.2, 1.5)),
    (stats.expon.pdf, scipy_stats.expon.pdf, [-1.0, 0.5, 2.0], (0.2, 1.5)),
    (stats.expon.cdf, scipy_stats.expon.cdf, [-1.0, 0.2000001, 2.0], (0.2, 1.5)),
    (stats.expon.sf, scipy_stats.expon.sf, [-1.0, 0.5, 2.0], (0.2, 1.5)),
    (stats.expon.logsf, scipy_stats.expon.logsf, [-1.0, 0.5, 2.0], (0.2, 1.5)),
    (stats.laplace.logpdf, scipy_stats.laplace.logpdf, [-4.0, 0.1, 2.0], (0.1, 0.7)),
    (stats.laplace.pdf, scipy_stats.laplace.pdf, [-4.0, 0.1, 2.0], (0.1, 0.7)),
    (stats.laplace.cdf, scipy_stats.laplace.cdf, [-4.0, 0.1, 2.0], (0.1, 0.7)),
    (stats.logistic.logpdf, scipy_stats.logistic.logpdf, [-800.0, -2.0, 0.0, 3.0], (0.3, 1.5)),
    (stats.logistic.pdf, scipy_stats.logistic.pdf, [-8.0, -2.0, 0.0, 3.0], (0.3, 1.5)),
    (stats.logistic.cdf, scipy_stats.logistic.cdf, [-8.0, -2.0, 0.0, 3.0], (0.3, 1.5)),
    (stats.logistic.sf, scipy_stats.logistic.sf, [-8.0, -2.0, 0.0, 3.0], (0.3, 1.5)),
    (stats.logistic.ppf, scipy_stats.logistic.ppf, [0.01, 0.5, 0.9], (0.3, 1.5)),
    (stats.t.logpdf, scipy_stats.t.logpdf, [-4.0, 0.0, 2.5], (3.5, 0.2, 1.3)),
    (stats.t.pdf, scipy_stats.t.pdf, [-4.0, 0.0, 2.5], (3.5, 0.2, 1.3)),
]


@pytest.mark.parametrize("fn,reference,points,args", CONTINUOUS,
                         ids=[f"{f.__module__.rsplit('.', 1)[-1]}.{f.__name__}" for f, *_ in CONTINUOUS])
@pytest.mark.parametrize("x64", [False, True])
def test_continuous_distributions_match_scipy(fn, reference, points, args, x64):
    with ember.config.override(enable_x64=x64):
        dtype = np.float64 if x64 else np.float32
        x = np.array(points, dtype)
        expected = reference(x.astype(np.float64), *args).astype(dtype)
        check_eager_and_jit(lambda v: fn(v, *args), x, expected=expected, **(F64 if x64 else F32))
        # Defaults (loc=0, scale=1) as SciPy's, where the function has them.
        if fn.__module__.endswith(("norm", "uniform", "expon", "laplace", "logistic")):
            assert_allclose(fn(x), reference(x.astype(np.float64)).astype(dtype), **(F64 if x64 else F32))


@pytest.mark.parametrize("fn,reference", [(stats.bernoulli.logpmf, scipy_stats.bernoulli.logpmf),
                                          (stats.bernoulli.pmf, scipy_stats.bernoulli.pmf)])
def test_bernoulli_matches_scipy(fn, reference):
    k = np.array([-1, 0, 1, 2, 0, 1], np.int32)
    p = np.array([0.3, 0.3, 0.3, 0.3, 0.0, 1.0], np.float32)
    check_eager_and_jit(fn, k, p, expected=reference(k, p.astype(np.float64)).astype(np.float32), **F32)
    assert_allclose(fn(3, 0.5, 2), reference(3, 0.5, 2).astype(np.float32), **F32)


@pytest.mark.parametrize("fn,reference", [(stats.poisson.logpmf, scipy_stats.poisson.logpmf),
                                          (stats.poisson.pmf, scipy_stats.poisson.pmf)])
def test_poisson_matches_scipy(fn, reference, x64):
    k = np.array([-1, 0, 1, 5, 30], np.int64)
    mu = np.array([2.0, 0.0, 2.5, 3.5, 20.0])
    check_eager_and_jit(fn, k, mu, expected=reference(k, mu), **F64)
    assert_allclose(fn(2.5, 1.0), np.float64(0.0 if fn is stats.poisson.pmf else -np.inf))  # not an integer
    assert_allclose(fn(7, 3.0, 2), reference(7, 3.0, 2), **F64)
    check_gradient(lambda m: fn(np.array([0.0, 2.0, 6.0]), m), np.array([0.5, 2.5, 4.0]))


def test_distributions_promote_and_keep_weak_types():
    assert stats.norm.logpdf(np.arange(3)).dtype == np.float32
    assert stats.norm.pdf(1.0).weak_type and stats.norm.pdf(1.0).dtype == np.float32
    assert not stats.norm.pdf(np.float32(1.0)).weak_type
    assert stats.poisson.logpmf(np.int32(3), 2).dtype == np.float32
    assert stats.t.logpdf(1, 3).dtype == np.float32


def test_distributions_against_jax_scipy():
    pytest.importorskip("jax")
    import jax.scipy.stats as jst
    x = np.array([-0.7, 0.2, 1.4], np.float32)
    for module in ["norm", "uniform", "expon", "laplace", "logistic"]:
        for name in getattr(stats, module).__all__:
            for args in ((x,), (x, 0.1, 2.0), (0.3, 1, 2)):
                expected = getattr(getattr(jst, module), name)(*args)
                got = ember.jit(getattr(getattr(stats, module), name))(*args)
                assert got.dtype == expected.dtype and got.weak_type == expected.weak_type, (module, name, args)
                assert_allclose(got, np.asarray(expected), rtol=1e-5, atol=1e-6)


def test_multivariate_normal_matches_scipy(rng, x64):
    n = 3
    root = rng.normal(size=(n, n))
    cov = root @ root.T + n * np.eye(n)
    mean = rng.normal(size=n)
    x = rng.normal(size=(4, n))
    expected = scipy_stats.multivariate_normal.logpdf(x, mean, cov)
    check_eager_and_jit(stats.multivariate_normal.logpdf, x, mean, cov, expected=expected, **F64)
    check_eager_and_jit(stats.multivariate_normal.pdf, x, mean, cov,
                        expected=scipy_stats.multivariate_normal.pdf(x, mean, cov), **F64)
    # A scalar covariance is cov * I; a scalar mean a 1-D normal.
    assert_allclose(stats.multivariate_normal.logpdf(x, mean, 2.0),
                    scipy_stats.multivariate_normal.logpdf(x, mean, 2.0 * np.eye(n)), **F64)
    assert_allclose(stats.multivariate_normal.logpdf(x[:, 0], 0.5, 2.0),
                    scipy_stats.norm.logpdf(x[:, 0], 0.5, np.sqrt(2.0)), **F64)
    # Batched covariances broadcast against x, and vmap agrees.
    covs = np.stack([cov, 2 * cov])
    batched = stats.multivariate_normal.logpdf(x[:2], mean, covs)
    assert_allclose(batched, [scipy_stats.multivariate_normal.logpdf(x[i], mean, covs[i]) for i in range(2)], **F64)
    assert_allclose(ember.vmap(stats.multivariate_normal.logpdf, (0, None, None))(x, mean, cov), expected, **F64)
    check_gradient(stats.multivariate_normal.logpdf, x, mean, cov, argnum=1)
    check_gradient(stats.multivariate_normal.logpdf, x, mean, cov, argnum=2, rtol=1e-5, atol=1e-7)


def test_multivariate_normal_errors():
    with pytest.raises(ValueError, match="multivariate_normal.logpdf got incompatible shapes"):
        stats.multivariate_normal.logpdf(np.ones(3), np.zeros(3), np.eye(2))
    with pytest.raises(NotImplementedError, match="allow_singular argument of multivariate_normal.logpdf"):
        stats.multivariate_normal.logpdf(np.ones(3), np.zeros(3), np.eye(3), allow_singular=True)


@pytest.mark.parametrize("fn,args", [
    (stats.norm.logpdf, (0.3, 1.7)), (stats.norm.logcdf, (0.3, 1.7)), (stats.norm.logsf, (0.3, 1.7)),
    (stats.norm.ppf, (0.3, 1.7)), (stats.t.logpdf, (3.0, 0.3, 1.7)), (stats.logistic.logpdf, (0.3, 1.7)),
    (stats.laplace.logpdf, (0.3, 1.7)), (stats.expon.logpdf, (0.0, 1.7)),
])
def test_distribution_gradients(fn, args, x64):
    points = np.array([0.2, 0.45, 0.8]) if fn is stats.norm.ppf else np.array([0.5, 1.5, 4.0])
    check_gradient(lambda v: fn(v, *args), points, rtol=1e-5, atol=1e-7)
    check_gradient(lambda s: fn(points, *args[:-1], s), np.array(args[-1]), rtol=1e-5, atol=1e-7)


# Distributions added with their JAX modules: (ember, scipy, x points, extra args). Points include
# the support's boundaries and points outside it; the cases where JAX's convention is not SciPy's
# are in test_new_distributions_follow_jax_at_the_edges.
def _with_scipy(fn):
    """``(fn, SciPy's function of the same distribution and name)``."""
    return fn, getattr(getattr(scipy_stats, fn.__module__.rsplit(".", 1)[-1]), fn.__name__)


NEW_CONTINUOUS = [
    *[(*_with_scipy(fn), [-1e4, -3.0, 0.25, 1.0, 50.0], (0.25, 1.5)) for fn in (
        stats.cauchy.logpdf, stats.cauchy.pdf, stats.cauchy.cdf, stats.cauchy.logcdf, stats.cauchy.sf,
        stats.cauchy.logsf)],
    (stats.cauchy.ppf, scipy_stats.cauchy.ppf, [0.0, 1e-6, 0.1, 0.5, 0.75, 0.999, 1.0], (0.25, 1.5)),
    (stats.cauchy.isf, scipy_stats.cauchy.isf, [0.0, 1e-6, 0.1, 0.5, 0.75, 0.999, 1.0], (0.25, 1.5)),
    (stats.norm.isf, scipy_stats.norm.isf, [1e-30, 1e-6, 0.1, 0.5, 0.9, 0.0, 1.0, -0.5, 2.0], (0.5, 2.0)),
    (stats.gamma.logpdf, scipy_stats.gamma.logpdf, [-1.0, 0.25, 0.2501, 1.0, 4.0, 30.0], (2.5, 0.25, 1.5)),
    (stats.gamma.pdf, scipy_stats.gamma.pdf, [-1.0, 0.25, 0.2501, 1.0, 4.0, 30.0], (2.5, 0.25, 1.5)),
    (stats.gamma.logpdf, scipy_stats.gamma.logpdf, [-1.0, 0.5, 3.0], (0.6,)),
    (stats.gamma.pdf, scipy_stats.gamma.pdf, [-1.0, 0.0, 0.5, 3.0], (1.0,)),
    (stats.beta.logpdf, scipy_stats.beta.logpdf, [-0.5, 0.25, 0.5, 1.0, 1.75, 1.8], (2.5, 1.7, 0.25, 1.5)),
    (stats.beta.pdf, scipy_stats.beta.pdf, [-0.5, 0.0, 0.01, 0.5, 0.99, 1.0, 1.2], (1.0, 3.0)),
    (stats.chi2.logpdf, scipy_stats.chi2.logpdf, [-1.0, 0.25, 0.3, 1.0, 4.0, 40.0], (3.0, 0.25, 1.5)),
    (stats.chi2.pdf, scipy_stats.chi2.pdf, [-1.0, 0.0, 0.5, 4.0], (2.0,)),
    *[(*_with_scipy(fn), [-1.0, 1.0, 1.2, 1.75, 3.0, 100.0], (2.5, 0.25, 1.5)) for fn in (
        stats.pareto.logpdf, stats.pareto.pdf, stats.pareto.cdf, stats.pareto.sf, stats.pareto.logsf,
        stats.pareto.logcdf)],
    (stats.pareto.ppf, scipy_stats.pareto.ppf, [-0.5, 0.0, 0.3, 0.9, 1.5], (2.5, 0.25, 1.5)),
    *[(*_with_scipy(fn), [-30.0, -3.0, 0.25, 1.0, 4.0, 30.0], (0.25, 1.5)) for fn in (
        stats.gumbel_l.logpdf, stats.gumbel_l.pdf, stats.gumbel_l.cdf, stats.gumbel_l.logcdf, stats.gumbel_l.sf,
        stats.gumbel_l.logsf, stats.gumbel_r.logpdf, stats.gumbel_r.pdf, stats.gumbel_r.cdf, stats.gumbel_r.logcdf,
        stats.gumbel_r.sf, stats.gumbel_r.logsf)],
    (stats.gumbel_l.ppf, scipy_stats.gumbel_l.ppf, [1e-6, 0.1, 0.5, 0.999], (0.25, 1.5)),
    (stats.gumbel_r.ppf, scipy_stats.gumbel_r.ppf, [1e-6, 0.1, 0.5, 0.999], (0.25, 1.5)),
]


@pytest.mark.parametrize("fn,reference,points,args", NEW_CONTINUOUS,
                         ids=[f"{f.__module__.rsplit('.', 1)[-1]}.{f.__name__}" for f, *_ in NEW_CONTINUOUS])
@pytest.mark.parametrize("x64", [False, True])
def test_new_continuous_distributions_match_scipy(fn, reference, points, args, x64):
    with ember.config.override(enable_x64=x64):
        dtype = np.float64 if x64 else np.float32
        x = np.array(points, dtype)
        with np.errstate(all="ignore"):
            expected = np.asarray(reference(x.astype(np.float64), *args)).astype(dtype)
        check_eager_and_jit(lambda v: fn(v, *args), x, expected=expected, **(dict(rtol=1e-11, atol=1e-13) if x64
                                                                                else dict(rtol=1e-5, atol=1e-6)))


DISCRETE_FUNCTIONS = {  # (logpmf, pmf) of each discrete distribution
    "geom": (stats.geom.logpmf, stats.geom.pmf), "binom": (stats.binom.logpmf, stats.binom.pmf),
    "nbinom": (stats.nbinom.logpmf, stats.nbinom.pmf), "betabinom": (stats.betabinom.logpmf, stats.betabinom.pmf),
}
DISCRETE = [  # (distribution, SciPy's arguments)
    ("geom", (0.3,)), ("geom", (1.0,)), ("binom", (7, 0.3)), ("binom", (5, 0.0)), ("binom", (5, 1.0)),
    ("binom", (0, 0.4)), ("nbinom", (3, 0.4)), ("nbinom", (2.5, 0.9)), ("betabinom", (6, 2.0, 3.0)),
    ("betabinom", (0, 0.5, 3.0)),
]


@pytest.mark.parametrize("name,args", DISCRETE)
@pytest.mark.parametrize("x64", [False, True])
def test_discrete_distributions_match_scipy(name, args, x64):
    reference = getattr(scipy_stats, name)
    with ember.config.override(enable_x64=x64):
        dtype = np.float64 if x64 else np.float32
        k = np.array([-3, -1, 0, 1, 2, 3, 5, 7, 8, 40], dtype)
        for loc in (0, 2):
            for fn in DISCRETE_FUNCTIONS[name]:
                expected = getattr(reference, fn.__name__)(k.astype(np.float64), *args, loc).astype(dtype)
                check_eager_and_jit(lambda v, fn=fn: fn(v, *args, loc), k, expected=expected,
                                    **(dict(rtol=1e-11, atol=1e-13) if x64 else dict(rtol=5e-5, atol=1e-6)))
        # integer counts promote to the default float
        assert DISCRETE_FUNCTIONS[name][0](np.arange(3, dtype=np.int32), *args).dtype == dtype


def test_multinomial_matches_scipy(x64):
    p = np.array([0.2, 0.3, 0.5])
    x = np.array([[1, 2, 3], [0, 0, 6], [6, 0, 0], [1, 1, 1]], np.int64)
    expected = scipy_stats.multinomial.logpmf(x, 6, p)  # the last row adds up to 3: -inf
    check_eager_and_jit(stats.multinomial.logpmf, x, 6, p, expected=expected, rtol=1e-12, atol=1e-13)
    check_eager_and_jit(stats.multinomial.pmf, x[0], 6, p, expected=scipy_stats.multinomial.pmf(x[0], 6, p),
                        rtol=1e-12)
    assert_allclose(ember.vmap(stats.multinomial.logpmf, (0, None, None))(x, 6, p), expected, rtol=1e-12)
    assert stats.multinomial.pmf(x[0], 6, p.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="x and n must be of integer type"):
        stats.multinomial.logpmf(x.astype(np.float64), 6, p)
    with pytest.raises(ValueError, match="x and n must be of integer type"):
        stats.multinomial.logpmf(x, 6.0, p)


def test_dirichlet_matches_scipy(x64):
    alpha = np.array([1.5, 2.0, 3.0])
    x = np.array([[0.2, 0.5, 0.25], [0.3, 0.1, 0.25], [0.5, 0.4, 0.5]])
    x = x / x.sum(0)
    expected = scipy_stats.dirichlet.logpdf(x, alpha)
    check_eager_and_jit(stats.dirichlet.logpdf, x, alpha, expected=expected, rtol=1e-12, atol=1e-13)
    check_eager_and_jit(stats.dirichlet.pdf, x, alpha, expected=scipy_stats.dirichlet.pdf(x, alpha), rtol=1e-12)
    # the last entry may be left out; points off the simplex have density 0
    assert_allclose(stats.dirichlet.logpdf(x[:2], alpha), expected, rtol=1e-12)
    off = np.array([[0.5, -0.1], [0.6, 0.6], [0.1, 0.5]])
    assert_allclose(stats.dirichlet.pdf(off, alpha), np.zeros(2))
    assert_allclose(ember.vmap(stats.dirichlet.logpdf, (1, None))(x, alpha), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="`alpha` must be one-dimensional"):
        stats.dirichlet.logpdf(x, alpha[None])
    with pytest.raises(ValueError, match="one entry fewer"):
        stats.dirichlet.logpdf(x[:1], alpha)


def test_new_distributions_follow_jax_at_the_edges():
    nan, inf = np.nan, np.inf
    f32 = lambda *v: np.array(v, np.float32)  # noqa: E731
    # Quantiles outside (0, 1): NaN for gumbel (SciPy: +-inf at 0 and 1); cauchy's are not checked (as JAX),
    # but are +-inf at 0 and 1 (as SciPy; JAX's are large finite numbers there).
    assert_allclose(stats.gumbel_l.ppf(f32(0.0, 1.0, -0.5, 1.5)), f32(nan, nan, nan, nan))
    assert_allclose(stats.gumbel_r.ppf(f32(0.0, 1.0)), f32(nan, nan))
    assert_allclose(stats.cauchy.ppf(f32(0.0, 1.0)), f32(-inf, inf))
    assert_allclose(stats.cauchy.isf(f32(-0.1, 1.1)), f32(-3.0776834, 3.0776834), rtol=1e-6)
    # A non-positive scale (gumbel) or shape (beta, betabinom) gives NaN.
    assert np.isnan(stats.gumbel_r.logpdf(1.0, 0.0, -1.0)) and np.isnan(stats.gumbel_l.cdf(1.0, 0.0, 0.0))
    assert np.isnan(stats.beta.logpdf(0.5, -1.0, 2.0)) and np.isnan(stats.betabinom.logpmf(1.0, 3.0, 0.0, 2.0))
    # The beta density's end point with a shape below 1 is +inf (SciPy: 0 at the upper end).
    assert_allclose(stats.beta.pdf(f32(0.0, 1.0), f32(0.5, 2.0), f32(2.0, 0.5)), f32(inf, inf))
    assert_allclose(stats.gamma.pdf(f32(0.0, -0.0), 0.5), f32(inf, inf))


def test_new_distributions_against_jax_scipy():
    pytest.importorskip("jax")
    import jax.scipy.stats as jst
    x = np.array([-2.0, 0.0, 0.3, 1.0, 1.7, 7.0], np.float32)
    q = np.array([-0.1, 1e-3, 0.3, 0.9, 0.99], np.float32)  # (JAX's cauchy quantiles are finite at 0 and 1)
    k = np.array([-1.0, 0.0, 1.0, 3.0, 5.0, 9.0], np.float32)
    table = {"cauchy": (), "gamma": (1.5,), "beta": (2.5, 0.7), "chi2": (3.0,), "pareto": (2.5,), "gumbel_l": (),
             "gumbel_r": (), "geom": (0.3,), "binom": (5.0, 0.3), "nbinom": (3.0, 0.4), "betabinom": (6.0, 2.0, 3.0)}
    for module, shape in table.items():
        for name in getattr(stats, module).__all__:
            points = q if name in ("ppf", "isf") else k if name.endswith("pmf") else x
            for args in ((points, *shape), (points, *shape, 0.2, 1.5)[:len(shape) + 1 + (2 if "pdf" in name or
                                                                                          "c" in name else 1)],
                         (0.5, *shape)):
                if name.endswith("pmf") and len(args) > len(shape) + 2:
                    continue
                expected = getattr(getattr(jst, module), name)(*args)
                got = ember.jit(getattr(getattr(stats, module), name))(*args)
                assert got.dtype == expected.dtype and got.weak_type == expected.weak_type, (module, name, args)
                assert_allclose(got, np.asarray(expected), rtol=2e-5, atol=1e-6)


def test_install_as_jax_imports_the_new_stats_modules():
    code = ("import ember\nember.install_as_jax()\n"
            "import jax.scipy.stats.gamma as g, jax.scipy.stats.multinomial\n"
            "from jax.scipy.stats import cauchy, dirichlet\nimport jax.scipy.special as sp\n"
            "assert g is ember.scipy.stats.gamma and cauchy is ember.scipy.stats.cauchy\n"
            "assert jax.scipy.stats.multinomial is ember.scipy.stats.multinomial\n"
            "assert dirichlet is ember.scipy.stats.dirichlet and sp.i0e is ember.scipy.special.i0e\n"
            "print(float(g.logpdf(2.0, 3.0)))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=pathlib.Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert abs(float(done.stdout) - scipy_stats.gamma.logpdf(2.0, 3.0)) < 1e-6


@pytest.mark.parametrize("fn,args", [
    (stats.gamma.logpdf, (2.5, 0.3, 1.7)), (stats.beta.logpdf, (2.5, 1.7, 0.3, 4.7)),
    (stats.chi2.logpdf, (3.0, 0.3, 1.7)), (stats.cauchy.logcdf, (0.3, 1.7)), (stats.cauchy.ppf, (0.3, 1.7)),
    (stats.pareto.logsf, (2.5, 0.3, 0.1)), (stats.gumbel_r.logsf, (0.3, 1.7)), (stats.gumbel_l.logcdf, (0.3, 1.7)),
    (stats.norm.isf, (0.3, 1.7)),
])
def test_new_distribution_gradients(fn, args, x64):
    points = np.array([0.2, 0.45, 0.8]) if fn.__name__ in ("ppf", "isf") else np.array([0.5, 1.5, 4.0])
    check_gradient(lambda v: fn(v, *args), points, rtol=1e-5, atol=1e-7)
    check_gradient(lambda s: fn(points, *args[:-1], s), np.array(args[-1]), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("module,args", [(stats.binom, (8.0,)), (stats.nbinom, (3.0,)), (stats.geom, ())])
def test_discrete_gradients_in_the_probability(module, args, x64):
    k = np.array([1.0, 2.0, 3.0, 5.0])
    check_gradient(lambda p: module.logpmf(k, *args, p), np.array(0.35), rtol=1e-5, atol=1e-7)


def test_new_distributions_under_vmap():
    x = np.array([[0.3, 1.5, 4.0], [2.0, 0.7, 9.0]], np.float32)
    shapes = np.array([1.5, 2.5], np.float32)
    for fn in (stats.gamma.logpdf, stats.chi2.pdf, stats.pareto.cdf, stats.geom.logpmf):
        assert_allclose(ember.vmap(fn)(x, shapes), fn(x, shapes[:, None]), rtol=1e-6, atol=0)
    for fn in (stats.cauchy.logpdf, stats.gumbel_l.logsf, stats.gumbel_r.pdf, stats.norm.isf):
        assert_allclose(ember.vmap(fn, (0, None, 0))(x / 10, 0.2, shapes), fn(x / 10, 0.2, shapes[:, None]),
                        rtol=1e-6, atol=0)
    for fn in (stats.binom.pmf, stats.nbinom.logpmf):
        assert_allclose(ember.vmap(fn, (0, 0, None))(np.round(x), shapes * 4, 0.3),
                        fn(np.round(x), shapes[:, None] * 4, 0.3), rtol=1e-6, atol=0)
    assert_allclose(ember.vmap(stats.betabinom.logpmf, (0, None, 0, None))(np.round(x), 9.0, shapes, 2.0),
                    stats.betabinom.logpmf(np.round(x), 9.0, shapes[:, None], 2.0), rtol=1e-6, atol=0)
    assert_allclose(ember.vmap(stats.beta.pdf, (0, 0, None))(x / 10, shapes, 2.0),
                    stats.beta.pdf(x / 10, shapes[:, None], 2.0), rtol=1e-6, atol=0)


# --- linalg --------------------------------------------------------------------------------------------
def _spd(rng, n, batch=()):
    root = rng.normal(size=batch + (n, n))
    return root @ np.swapaxes(root, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("trans", [0, 1, "T", "N"])
def test_solve_triangular_matches_scipy(rng, lower, trans):
    a = np.tril(rng.normal(size=(4, 4))) + 4 * np.eye(4)
    a = a if lower else a.T
    for b in (rng.normal(size=4), rng.normal(size=(4, 2))):
        expected = scipy_linalg.solve_triangular(a, b, trans=trans, lower=lower).astype(np.float32)
        check_eager_and_jit(lambda a_, b_: sla.solve_triangular(a_, b_, trans=trans, lower=lower),
                            a.astype(np.float32), b.astype(np.float32), expected=expected, rtol=1e-5, atol=1e-5)
    unit = sla.solve_triangular(a, np.ones(4), lower=lower, unit_diagonal=True)
    assert_allclose(unit, scipy_linalg.solve_triangular(a, np.ones(4), lower=lower, unit_diagonal=True)
                    .astype(np.float32), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="Invalid 'trans' value 5"):
        sla.solve_triangular(a, np.ones(4), trans=5)


@pytest.mark.parametrize("lower", [False, True])
def test_cholesky_factor_and_solve(rng, lower, x64):
    a = _spd(rng, 4)
    b = rng.normal(size=(4, 3))
    factor = check_eager_and_jit(lambda m: sla.cholesky(m, lower=lower), a,
                                 expected=scipy_linalg.cholesky(a, lower=lower), **F64)
    c, flag = sla.cho_factor(a, lower=lower)
    assert flag is lower
    assert_allclose(c, factor, **F64)
    check_eager_and_jit(lambda c_, b_: sla.cho_solve((c_, lower), b_), c, b,
                        expected=scipy_linalg.cho_solve(scipy_linalg.cho_factor(a, lower=lower), b), **F64)
    assert_allclose(sla.cho_solve((c, lower), b[:, 0]), np.linalg.solve(a, b[:, 0]), **F64)
    check_gradient(lambda m: sla.cho_solve(sla.cho_factor(m, lower=lower), b), a, rtol=1e-5, atol=1e-7)


def test_lu_matches_scipy(rng, x64):
    for shape in [(4, 4), (5, 3), (3, 5)]:
        a = rng.normal(size=shape)
        expected = scipy_linalg.lu(a)
        check_eager_and_jit(sla.lu, a, expected=expected, **F64)
        pl, u = sla.lu(a, permute_l=True)
        assert_allclose(pl, expected[0] @ expected[1], **F64)
        assert_allclose(u, expected[2], **F64)
    batch = rng.normal(size=(2, 3, 3))
    p, l_factor, u = sla.lu(batch)
    assert_allclose(np.asarray(p) @ np.asarray(l_factor) @ np.asarray(u), batch, **F64)


@pytest.mark.parametrize("trans", [0, 1, 2])
def test_lu_factor_and_solve(rng, trans, x64):
    a = rng.normal(size=(5, 5))
    lu_expected, piv_expected = scipy_linalg.lu_factor(a)
    lu_, piv = check_eager_and_jit(sla.lu_factor, a, expected=(lu_expected, piv_expected.astype(np.int32)), **F64)
    for b in (rng.normal(size=5), rng.normal(size=(5, 2))):
        expected = scipy_linalg.lu_solve((lu_expected, piv_expected), b, trans=trans)
        check_eager_and_jit(lambda l_, p_, b_: sla.lu_solve((l_, p_), b_, trans=trans), lu_, piv, b,
                            expected=expected, **F64)
    check_gradient(lambda b_: sla.lu_solve(sla.lu_factor(a), b_, trans=trans), rng.normal(size=5))
    with pytest.raises(ValueError, match="first dimension must be 5"):
        sla.lu_solve((lu_, piv), np.ones(4))


def test_qr_svd_eigh_det_inv(rng, x64):
    a = rng.normal(size=(5, 3))
    for mode in ["full", "economic"]:
        q, r = sla.qr(a, mode=mode)
        q_expected, r_expected = scipy_linalg.qr(a, mode=mode)
        assert q.shape == q_expected.shape and r.shape == r_expected.shape
        assert_allclose(np.asarray(q) @ np.asarray(r), a, **F64)
        assert_allclose(np.abs(r), np.abs(r_expected), **F64)
    (r,) = sla.qr(a, mode="r")
    assert_allclose(np.abs(r), np.abs(scipy_linalg.qr(a, mode="r")[0]), **F64)
    with pytest.raises(ValueError, match="Unsupported QR decomposition mode 'foo'"):
        sla.qr(a, mode="foo")

    u, s, vh = sla.svd(a, full_matrices=False)
    assert_allclose(s, scipy_linalg.svd(a, compute_uv=False), **F64)
    assert_allclose(np.asarray(u) * np.asarray(s) @ np.asarray(vh), a, **F64)
    assert_allclose(sla.svd(a, compute_uv=False), scipy_linalg.svd(a, compute_uv=False), **F64)

    sym = _spd(rng, 4)
    upper_only = np.triu(sym)
    for lower, matrix in ((True, np.tril(sym)), (False, upper_only)):
        w, v = sla.eigh(matrix, lower=lower)
        assert_allclose(w, scipy_linalg.eigh(sym, eigvals_only=True), **F64)
        assert_allclose(np.asarray(v) * np.asarray(w) @ np.asarray(v).T, sym, **F64)
    assert_allclose(sla.eigh(sym, eigvals_only=True), scipy_linalg.eigh(sym, eigvals_only=True), **F64)
    with pytest.raises(NotImplementedError, match="b=None"):
        sla.eigh(sym, sym)

    square = rng.normal(size=(4, 4))
    check_eager_and_jit(sla.det, square, expected=scipy_linalg.det(square), **F64)
    check_eager_and_jit(sla.inv, square, expected=scipy_linalg.inv(square), **F64)
    check_gradient(sla.det, square)


@pytest.mark.parametrize("assume_a", ["gen", "sym", "pos"])
@pytest.mark.parametrize("lower", [False, True])
def test_solve_matches_scipy(rng, assume_a, lower, x64):
    a = _spd(rng, 4)
    triangle_only = np.tril(a) if lower else np.triu(a)
    a_in = triangle_only if assume_a == "pos" else a
    b = rng.normal(size=(4, 2))
    expected = scipy_linalg.solve(a, b)
    check_eager_and_jit(lambda a_, b_: sla.solve(a_, b_, lower=lower, assume_a=assume_a), a_in, b,
                        expected=expected, **F64)
    assert_allclose(sla.solve(a_in, b[:, 0], lower=lower, assume_a=assume_a), expected[:, 0], **F64)
    with pytest.raises(ValueError, match="Expected assume_a to be one of"):
        sla.solve(a, b, assume_a="foo")


def test_expm_matches_scipy(rng, x64):
    cases = [np.zeros((3, 3)), rng.normal(size=(4, 4)) * 0.1, rng.normal(size=(4, 4)) * 3,
             np.triu(rng.normal(size=(3, 3))) * 20, np.array([[0.0, 6.0], [-6.0, 0.0]])]
    for a in cases:
        check_eager_and_jit(sla.expm, a, expected=scipy_linalg.expm(a), rtol=1e-9, atol=1e-9)
    batch = rng.normal(size=(2, 3, 3))
    assert_allclose(sla.expm(batch), np.stack([scipy_linalg.expm(m) for m in batch]), rtol=1e-9, atol=1e-9)
    assert_allclose(ember.vmap(sla.expm)(batch), np.stack([scipy_linalg.expm(m) for m in batch]),
                    rtol=1e-9, atol=1e-9)
    check_gradient(lambda m: sla.expm(m) * np.arange(9.0).reshape(3, 3), rng.normal(size=(3, 3)),
                rtol=1e-5, atol=1e-6)
    with ember.config.override(enable_x64=False):
        a32 = (rng.normal(size=(4, 4)) * 2).astype(np.float32)
        got = check_eager_and_jit(sla.expm, a32)
        assert got.dtype == np.float32
        assert_allclose(got, scipy_linalg.expm(a32.astype(np.float64)).astype(np.float32), rtol=2e-4, atol=2e-4)
    assert np.isnan(np.asarray(sla.expm(np.eye(2) * 1e7, max_squarings=4))).all()


def test_linalg_promotes_ints():
    a = np.array([[2, 1], [1, 3]], np.int32)
    for fn in (sla.inv, sla.det, sla.expm, sla.cholesky):
        assert fn(a).dtype == np.float32
    assert sla.solve(a, np.array([1, 2])).dtype == np.float32


# --- coverage ----------------------------------------------------------------------------------------------
def _public_functions(module):
    for name in getattr(module, "__all__", dir(module)):
        value = getattr(module, name)
        if not name.startswith("_") and callable(value) and not isinstance(value, (type, types.ModuleType)):
            yield name


def test_every_public_scipy_function_is_tested():
    source = "\n".join(p.read_text() for p in pathlib.Path(__file__).parent.glob("test_scipy*.py"))
    modules = {"special": special, "sla": sla}
    modules.update({f"stats.{name}": getattr(stats, name) for name in
                    ["norm", "uniform", "expon", "laplace", "logistic", "t", "bernoulli", "poisson",
                     "multivariate_normal", "cauchy", "gamma", "beta", "chi2", "dirichlet", "geom", "pareto",
                     "gumbel_l", "gumbel_r", "binom", "nbinom", "betabinom", "multinomial"]})
    untested = [f"{prefix}.{name}" for prefix, module in modules.items() for name in _public_functions(module)
                if not re.search(rf"\b{re.escape(prefix)}\.{name}\b", source)]
    assert not untested, f"public ember.scipy functions no test calls: {untested}"


def test_entr_refuses_complex_and_xlogy_propagates_nan_as_jax(x64):
    with pytest.raises(ValueError, match="entr does not support complex-valued inputs"):
        special.entr(np.array([1 + 1j]))
    nan = np.nan
    for f in (special.xlogy, special.xlog1py):
        assert np.isnan(f(0.0, nan)) and f(0.0, 0.0) == 0 and f(0.0, -1.0) == 0 and np.isnan(f(nan, 0.0))
        assert np.isnan(f(np.float32(0), np.float32(nan)))
        for y in (complex(nan, 0), complex(0, nan)):  # JAX: nan + nanj
            out = complex(f(0j, y))
            assert np.isnan(out.real) and np.isnan(out.imag)
        assert complex(f(0j, 2 + 0j)) == 0
