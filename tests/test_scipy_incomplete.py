"""The regularized incomplete gamma and beta functions (``lax.igamma``, ``lax.igammac``,
``lax.betainc``, ``special.gammainc`` / ``gammaincc`` / ``betainc``) and the distribution functions
built on them: against SciPy on grids of a from 1e-3 to 1e3 with x near 0, near a and far in the
tails; against JAX on the edge values; gradients against finite differences; vmap and jit.

Measured maximum relative errors against SciPy (values above 1e3 * tiny) on these grids:
float64: igamma 3.4e-13, igammac 4.5e-13, betainc 7.9e-11 (4.8e-12 for a, b <= 100);
float32: igamma 4.1e-6, igammac 8.5e-5 (where Q = 1 - P, x < a + 1 with small a), betainc 1.4e-2
for a or b = 1000 (4.9e-3 for a, b <= 100: the prefactor's lgamma terms cancel).
"""
import numpy as np
import pytest

import ember
from ember import lax
from ember.scipy import special, stats

scipy_special = pytest.importorskip("scipy.special")
scipy_stats = pytest.importorskip("scipy.stats")

_A = np.array([1e-3, 0.01, 0.1, 0.5, 1, 2.5, 10, 30, 100, 300, 1e3])
_F = np.array([1e-6, 1e-3, 0.1, 0.5, 0.9, 0.99, 1.0, 1.01, 1.1, 2, 5, 20])
GAMMA_A = np.concatenate([np.repeat(_A, len(_F)), [0.5, 1.0, 2.0, 30.0]])
GAMMA_X = np.concatenate([np.repeat(_A, len(_F)) * np.tile(_F, len(_A)), [1e-30, 50.0, 200.0, 700.0]])
_AB = np.array([1e-3, 0.1, 0.5, 1, 2.5, 10, 100, 1000])
_XS = np.array([1e-8, 1e-3, 0.05, 0.3, 0.5, 0.7, 0.95, 0.999, 1 - 1e-7])
BETA_A, BETA_B, BETA_X = (v.ravel() for v in np.meshgrid(_AB, _AB, _XS, indexing="ij"))


def _max_relative_error(got, expected, dtype):
    tiny = np.finfo(dtype).tiny * 1e3
    err = np.abs(np.asarray(got, np.float64) - expected) / np.maximum(expected, tiny)
    return float(np.where(expected < tiny, 0, err).max())


@pytest.mark.parametrize("dtype,bounds", [(np.float64, (1e-12, 1e-12, 1e-10)), (np.float32, (1e-5, 2e-4, 2e-2))])
def test_against_scipy_on_the_grid(dtype, bounds, x64):
    a, x = GAMMA_A.astype(dtype), GAMMA_X.astype(dtype)
    exact_a, exact_x = a.astype(np.float64), x.astype(np.float64)
    p, q = ember.jit(lax.igamma)(a, x), lax.igammac(a, x)
    assert p.dtype == dtype and q.dtype == dtype
    assert _max_relative_error(p, scipy_special.gammainc(exact_a, exact_x), dtype) < bounds[0]
    assert _max_relative_error(q, scipy_special.gammaincc(exact_a, exact_x), dtype) < bounds[1]
    a, b, x = (v.astype(dtype) for v in (BETA_A, BETA_B, BETA_X))
    expected = scipy_special.betainc(*(v.astype(np.float64) for v in (a, b, x)))
    assert _max_relative_error(lax.betainc(a, b, x), expected, dtype) < bounds[2]


def test_igammac_is_small_without_cancellation(x64):
    """Far in the right tail Q is below float64's eps relative to 1: computed directly."""
    q = special.gammaincc(2.0, 60.0)
    np.testing.assert_allclose(q, scipy_special.gammaincc(2.0, 60.0), rtol=1e-13)
    assert 0 < float(q) < 1e-20


def test_edge_values_match_jax(x64):
    jax = pytest.importorskip("jax")
    with jax.enable_x64(True):
        vals = [-1.0, 0.0, 0.5, 1.0, 3.0, np.inf, np.nan]
        a, x = (v.ravel() for v in np.meshgrid(vals, vals, indexing="ij"))
        for ours, theirs in ((lax.igamma, jax.lax.igamma), (lax.igammac, jax.lax.igammac)):
            np.testing.assert_allclose(np.asarray(ours(a, x)), np.asarray(theirs(a, x)), rtol=1e-14)
        shapes, xs = [-1.0, 0.0, 0.5, 2.0, np.inf, np.nan], [-0.5, 0.0, 0.3, 1.0, 1.5, np.nan]
        a, b, x = (v.ravel() for v in np.meshgrid(shapes, shapes, xs, indexing="ij"))
        np.testing.assert_allclose(np.asarray(lax.betainc(a, b, x)), np.asarray(jax.lax.betainc(a, b, x)),
                                   rtol=1e-12)  # (JAX's 0.21599999999999642 for I_0.3(2, 2) = 0.216)


def test_narrow_floats_are_computed_in_float32():
    for dt in (np.float16, ember.numpy.bfloat16):
        out = lax.igamma(np.array([2.0], dt), np.array([1.0], dt))
        assert out.dtype == dt
        np.testing.assert_allclose(np.float32(out[0]), scipy_special.gammainc(2.0, 1.0), rtol=1e-2)


def test_derivatives_in_x_against_finite_differences(x64):
    h = 1e-6
    for a, x in [(0.5, 0.3), (2.0, 1.5), (30.0, 25.0), (3.0, 10.0)]:
        fd = (scipy_special.gammainc(a, x + h) - scipy_special.gammainc(a, x - h)) / (2 * h)
        np.testing.assert_allclose(ember.grad(lax.igamma, 1)(a, x), fd, rtol=1e-6)
        np.testing.assert_allclose(ember.grad(special.gammaincc, 1)(a, x), -fd, rtol=1e-6)
    for a, b, x in [(1.5, 2.0, 0.3), (0.5, 0.5, 0.7), (20.0, 5.0, 0.9)]:
        fd = (scipy_special.betainc(a, b, x + h) - scipy_special.betainc(a, b, x - h)) / (2 * h)
        np.testing.assert_allclose(ember.grad(special.betainc, 2)(a, b, x), fd, rtol=1e-6)
    # the second derivative: the density's own derivative
    second = ember.grad(ember.grad(lax.igamma, 1), 1)(2.0, 1.5)
    np.testing.assert_allclose(second, (1 - 1.5) * np.exp(-1.5), rtol=1e-12)


def test_derivatives_in_the_shapes_are_jax_errors():
    with pytest.raises(ValueError, match="igamma gradient with respect to a"):
        ember.grad(lax.igamma)(2.0, 1.0)
    with pytest.raises(ValueError, match="Betainc gradient with respect to a and b not supported"):
        ember.grad(lax.betainc, 1)(2.0, 1.0, 0.5)


def test_vmap_and_jit():
    a, x = np.array([0.5, 2.0, 10.0], np.float32), np.array([0.2, 3.0, 9.0], np.float32)
    expected = scipy_special.gammainc(a, x)
    np.testing.assert_allclose(ember.vmap(lax.igamma)(a, x), expected, rtol=1e-5)
    np.testing.assert_allclose(ember.jit(ember.vmap(lax.igammac, (None, 0)))(np.float32(2.0), x),
                               scipy_special.gammaincc(2.0, x), rtol=1e-5)
    b = np.array([1.0, 3.0, 0.5], np.float32)
    np.testing.assert_allclose(ember.jit(ember.vmap(lax.betainc, (0, 0, None)))(a, b, np.float32(0.4)),
                               scipy_special.betainc(a, b, 0.4), rtol=1e-5)
    grads = ember.vmap(ember.grad(special.gammainc, 1))(a, x)
    np.testing.assert_allclose(grads, scipy_stats.gamma.pdf(x, a), rtol=1e-5)


def test_special_broadcasts_and_promotes():
    out = special.gammainc(np.array([[1.0], [2.0]]), np.array([0.5, 1.0, 2.0]))
    assert out.shape == (2, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, scipy_special.gammainc([[1.0], [2.0]], [0.5, 1.0, 2.0]), rtol=1e-6)
    assert special.betainc(1, 2, 0.5).dtype == np.float32


def test_distribution_functions_against_scipy(x64):
    x = np.array([-1.0, 0.0, 0.3, 1.0, 2.5, 8.0, 40.0])
    for name, ours, theirs in [("cdf", stats.gamma.cdf, scipy_stats.gamma.cdf),
                               ("sf", stats.gamma.sf, scipy_stats.gamma.sf),
                               ("logcdf", stats.gamma.logcdf, scipy_stats.gamma.logcdf),
                               ("logsf", stats.gamma.logsf, scipy_stats.gamma.logsf)]:
        np.testing.assert_allclose(ours(x, 2.5, 0.1, 1.5), theirs(x, 2.5, 0.1, 1.5), rtol=1e-10, atol=1e-15,
                                   err_msg=name)
    for name, ours, theirs in [("cdf", stats.chi2.cdf, scipy_stats.chi2.cdf),
                               ("sf", stats.chi2.sf, scipy_stats.chi2.sf),
                               ("logcdf", stats.chi2.logcdf, scipy_stats.chi2.logcdf),
                               ("logsf", stats.chi2.logsf, scipy_stats.chi2.logsf)]:
        np.testing.assert_allclose(ours(x, 3.0), theirs(x, 3.0), rtol=1e-10, atol=1e-15, err_msg=name)
    y = np.array([-0.5, 0.0, 0.1, 0.5, 0.9, 1.0, 1.5])
    for name, ours, theirs in [("cdf", stats.beta.cdf, scipy_stats.beta.cdf),
                               ("sf", stats.beta.sf, scipy_stats.beta.sf),
                               ("logcdf", stats.beta.logcdf, scipy_stats.beta.logcdf),
                               ("logsf", stats.beta.logsf, scipy_stats.beta.logsf)]:
        np.testing.assert_allclose(ours(y, 2.0, 3.5), theirs(y, 2.0, 3.5), rtol=1e-10, atol=1e-15, err_msg=name)
    k = np.array([-1.0, 0.0, 1.0, 2.5, 7.0, 30.0])
    np.testing.assert_allclose(stats.poisson.cdf(k, 4.0), scipy_stats.poisson.cdf(k, 4.0), rtol=1e-10)
