"""ember.scipy.integrate.trapezoid: against scipy.integrate.trapezoid (sample points, spacing,
axes, integer input), eagerly and under jit; JAX's signature, gradients and vmap against JAX."""
import inspect

import numpy as np
import pytest

import ember
from ember import jax_import
from ember.scipy import integrate
from tests.util import assert_allclose, check_eager_and_jit

scipy_integrate = pytest.importorskip("scipy.integrate")

F32 = dict(rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sample_points_and_spacing_match_scipy(axis):
    rng = np.random.default_rng(0)
    y = rng.standard_normal((4, 6, 5)).astype(np.float32)
    n = y.shape[axis]
    x1 = np.sort(rng.uniform(0, 3, n)).astype(np.float32)
    xfull = np.sort(rng.uniform(0, 3, y.shape), axis=axis).astype(np.float32)
    for x, dx in [(None, 1.0), (None, 0.25), (x1, 1.0), (xfull, 1.0)]:
        expected = scipy_integrate.trapezoid(y.astype(np.float64), None if x is None else x.astype(np.float64),
                                             dx=dx, axis=axis).astype(np.float32)
        if x is None:
            check_eager_and_jit(lambda v: integrate.trapezoid(v, dx=dx, axis=axis), y, expected=expected, **F32)
        else:
            check_eager_and_jit(lambda v, s: integrate.trapezoid(v, s, axis=axis), y, x, expected=expected, **F32)


def test_types_and_edges():
    out = integrate.trapezoid(np.array([1, 2, 3, 2, 3, 2, 1]), np.array([0, 2, 5, 7, 10, 15, 20]))
    assert_allclose(out, np.float32(43.0))
    assert integrate.trapezoid(np.ones(3, np.int32)).dtype == np.float32
    assert_allclose(integrate.trapezoid(np.ones(1, np.float32)), np.float32(0.0))  # one sample: no area
    xs = np.linspace(0, 2 * np.pi, 1000, dtype=np.float32)
    assert_allclose(integrate.trapezoid(np.sin(xs) ** 2, xs), np.float32(np.pi), rtol=1e-5)


def test_float64_under_x64(x64):
    y = np.random.default_rng(1).standard_normal((3, 7))
    x = np.cumsum(np.random.default_rng(2).uniform(0.1, 1, 7))
    assert_allclose(integrate.trapezoid(y, x), scipy_integrate.trapezoid(y, x), rtol=1e-13, atol=1e-13)


def test_signature_grad_and_vmap_match_jax():
    jax = pytest.importorskip("jax")
    jintegrate = pytest.importorskip("jax.scipy.integrate")
    ours, theirs = inspect.signature(integrate.trapezoid), inspect.signature(jintegrate.trapezoid)
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
           [(p.name, p.kind, p.default) for p in theirs.parameters.values()]
    assert jax_import._target("jax.scipy.integrate") == "ember.scipy.integrate"
    rng = np.random.default_rng(3)
    y = rng.standard_normal((3, 5)).astype(np.float32)
    x = np.sort(rng.uniform(0, 2, 5)).astype(np.float32)
    for argnums in (0, 1):
        ours = ember.grad(lambda a, b: (integrate.trapezoid(a, b) ** 2).sum(), argnums=argnums)(y, x)
        theirs = jax.grad(lambda a, b: (jintegrate.trapezoid(a, b) ** 2).sum(), argnums=argnums)(y, x)
        assert_allclose(ours, np.asarray(theirs), rtol=1e-5, atol=1e-5)
    ours = ember.vmap(integrate.trapezoid, in_axes=(1, None))(y.T, x)
    assert_allclose(ours, np.asarray(jax.vmap(jintegrate.trapezoid, in_axes=(1, None))(y.T, x)), **F32)
