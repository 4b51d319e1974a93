"""ember.scipy.optimize.minimize (BFGS): the minimizer against SciPy's BFGS, and against
jax.scipy.optimize where JAX's line search succeeds (there the iterates agree: nit and nfev too);
eagerly, under jit and under vmap."""
import inspect

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.scipy import optimize

scipy_optimize = pytest.importorskip("scipy.optimize")


def rosenbrock(x, np=jnp):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


A = np.array([[3.0, 1.0, 0.0], [1.0, 4.0, 1.0], [0.0, 1.0, 2.0]])
B = np.array([1.0, -2.0, 3.0])


def quadratic(x, a=A, b=B, np=jnp):
    return 0.5 * x @ (a @ x) - b @ x


CASES = [(rosenbrock, [2.0, 2.0]), (rosenbrock, [-1.2, 1.0]), (rosenbrock, [0.0, 0.0]),
         (rosenbrock, [-1.2, 1.0, 0.5, -0.3]), (quadratic, [0.0, 0.0, 0.0]), (quadratic, [5.0, -3.0, 1.0])]


@pytest.mark.parametrize("fun, x0", CASES)
def test_bfgs_matches_scipy(fun, x0, x64):
    x0 = np.array(x0)
    expected = scipy_optimize.minimize(lambda x: fun(x, np=np), x0, method="BFGS")
    for result in (optimize.minimize(fun, x0, method="BFGS"),
                   ember.jit(lambda x: optimize.minimize(fun, x, method="BFGS"))(x0)):
        assert isinstance(result, optimize.OptimizeResults)
        assert bool(result.success) and int(result.status) == 0
        np.testing.assert_allclose(np.asarray(result.x), expected.x, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(float(result.fun), expected.fun, atol=1e-9)
        assert np.abs(np.asarray(result.jac)).max() < 1e-5  # gtol, in the inf-norm
        assert result.x.dtype == np.float64 and result.hess_inv.shape == (x0.size, x0.size)
        assert 0 < int(result.nit) <= 2 * expected.nit and int(result.nfev) == int(result.njev) >= int(result.nit)


def test_bfgs_float32_and_inverse_hessian():
    result = optimize.minimize(quadratic, np.zeros(3, np.float32), method="BFGS", options={"gtol": 1e-3})
    assert result.x.dtype == np.float32 and result.fun.dtype == np.float32 and bool(result.success)
    np.testing.assert_allclose(np.asarray(result.x), np.linalg.solve(A, B), rtol=1e-3)
    # symmetric, positive definite, and near the inverse Hessian (exactly it only after exact line searches)
    h = np.asarray(result.hess_inv)
    np.testing.assert_allclose(h, h.T, rtol=1e-5)
    assert np.linalg.eigvalsh(h).min() > 0
    np.testing.assert_allclose(h, np.linalg.inv(A), rtol=0.1, atol=0.01)


def test_bfgs_args_options_and_errors(x64):
    a, b = np.diag([1.0, 10.0]), np.array([2.0, -1.0])
    result = optimize.minimize(quadratic, np.zeros(2), (a, b), method="bfgs", options={"gtol": 1e-10})
    np.testing.assert_allclose(np.asarray(result.x), [2.0, -0.1], rtol=1e-9)
    capped = optimize.minimize(rosenbrock, np.array([-1.2, 1.0]), method="BFGS", options={"maxiter": 3})
    assert int(capped.nit) == 3 and int(capped.status) == 1 and not bool(capped.success)
    with pytest.raises(TypeError, match="must be a tuple"):
        optimize.minimize(quadratic, np.zeros(3), [A, B], method="BFGS")
    with pytest.raises(ValueError, match="Method Nelder-Mead not recognized"):
        optimize.minimize(quadratic, np.zeros(3), method="Nelder-Mead")


def test_bfgs_under_vmap(x64):
    starts = np.array([[0.0, 0.0, 0.0], [5.0, -3.0, 1.0], [-2.0, 7.0, 0.5]])
    found = ember.vmap(lambda x: optimize.minimize(quadratic, x, method="BFGS").x)(starts)
    np.testing.assert_allclose(np.asarray(found), np.tile(np.linalg.solve(A, B), (3, 1)), rtol=1e-6)
    shifts = np.array([[1.0, 1.0], [2.0, -1.0]])
    found = ember.jit(ember.vmap(lambda s: optimize.minimize(
        lambda x: rosenbrock(x - s), np.zeros(2), method="BFGS").x))(shifts)
    np.testing.assert_allclose(np.asarray(found), shifts + 1, rtol=1e-5, atol=1e-5)


def test_against_jax(x64):
    jax = pytest.importorskip("jax")
    import jax.numpy as jax_numpy
    import jax.scipy.optimize as jax_optimize

    assert [n for n in dir(jax_optimize) if not n.startswith("_")] == optimize.__all__
    assert inspect.signature(jax_optimize.minimize).parameters.keys() == \
        inspect.signature(optimize.minimize).parameters.keys()
    assert jax_optimize.OptimizeResults._fields == optimize.OptimizeResults._fields
    with jax.enable_x64(True):
        # where JAX's line search succeeds, the two take the same steps
        for fun, x0 in [(rosenbrock, [2.0, 2.0]), (quadratic, [0.0, 0.0, 0.0])]:
            x0 = np.array(x0)
            theirs = jax_optimize.minimize(lambda x: fun(x, np=jax_numpy), jax_numpy.asarray(x0), method="BFGS")
            ours = optimize.minimize(fun, x0, method="BFGS")
            np.testing.assert_allclose(np.asarray(ours.x), np.asarray(theirs.x), rtol=1e-7)
            np.testing.assert_allclose(float(ours.fun), float(theirs.fun), rtol=1e-6, atol=1e-14)
            np.testing.assert_allclose(np.asarray(ours.hess_inv), np.asarray(theirs.hess_inv), rtol=1e-5, atol=1e-8)
            for field in ("status", "success", "nit", "nfev", "njev"):
                assert int(getattr(ours, field)) == int(getattr(theirs, field)), field
