"""ember.scipy.sparse.linalg (cg, bicgstab, gmres): solutions against numpy.linalg.solve, SciPy
and jax.scipy.sparse.linalg; matrices and matvec functions, pytrees, preconditioners, complex
systems, eagerly, under jit and under vmap."""
import inspect

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.scipy.sparse import linalg as sparse_linalg

scipy_sparse_linalg = pytest.importorskip("scipy.sparse.linalg")

RNG = np.random.default_rng(0)
N = 10
_Q = RNG.normal(size=(N, N))
SPD = _Q @ _Q.T + N * np.eye(N)
GENERAL = RNG.normal(size=(N, N)) + 4 * np.eye(N)
B = RNG.normal(size=N)
SOLVERS = [(sparse_linalg.cg, "cg", SPD), (sparse_linalg.bicgstab, "bicgstab", GENERAL),
           (sparse_linalg.gmres, "gmres", GENERAL)]


@pytest.mark.parametrize("solver, name, a", SOLVERS)
def test_solvers_match_numpy_and_scipy(solver, name, a, x64):
    expected = np.linalg.solve(a, B)
    theirs, code = getattr(scipy_sparse_linalg, name)(a, B, rtol=1e-10, atol=0.0)
    assert code == 0
    for x, info in (solver(a, B, tol=1e-10), ember.jit(lambda a, b: solver(a, b, tol=1e-10))(a, B),
                    solver(lambda v: jnp.asarray(a) @ v, B, tol=1e-10)):
        assert (info is None if name != "gmres" else int(info) == 0) and x.dtype == np.float64 and x.shape == (N,)
        np.testing.assert_allclose(np.asarray(x), expected, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(np.asarray(x), theirs, rtol=1e-7, atol=1e-9)
    # the default tolerance, in float32: |b - A x| <= 1e-5 |b| (up to float32 rounding)
    x, _ = solver(a.astype(np.float32), B.astype(np.float32))
    assert x.dtype == np.float32
    assert np.linalg.norm(B - a @ np.asarray(x, np.float64)) <= 2e-5 * np.linalg.norm(B)


@pytest.mark.parametrize("solver, name, a", SOLVERS)
def test_solvers_on_pytrees_with_x0_and_preconditioner(solver, name, a, x64):
    # the system [[a, 0], [0, 2 I]] [u; w] = [b; c] with x = {"u": u, "w": w}
    c = np.arange(6.0).reshape(2, 3)

    def matvec(x):
        return {"u": jnp.asarray(a) @ x["u"], "w": 2 * x["w"]}

    b = {"u": B, "w": c}
    x0 = {"u": np.ones(N), "w": np.zeros((2, 3))}
    jacobi = lambda x: {"u": x["u"] / np.diag(a), "w": x["w"] / 2}  # noqa: E731
    for kwargs in ({}, {"x0": x0}, {"M": jacobi}):
        x, info = ember.jit(lambda b: solver(matvec, b, tol=1e-10, **kwargs))(b)
        assert set(x) == {"u", "w"} and x["w"].shape == (2, 3)
        np.testing.assert_allclose(np.asarray(x["u"]), np.linalg.solve(a, B), rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(np.asarray(x["w"]), c / 2, rtol=1e-7, atol=1e-9)
    with pytest.raises(ValueError, match="tree structure"):
        solver(matvec, b, x0={"u": np.ones(N)})


@pytest.mark.parametrize("solver, name, a", SOLVERS)
def test_solvers_under_vmap(solver, name, a, x64):
    bs = RNG.normal(size=(4, N))
    xs = ember.vmap(lambda b: solver(a, b, tol=1e-10)[0])(bs)
    np.testing.assert_allclose(np.asarray(xs), np.linalg.solve(a, bs.T).T, rtol=1e-7, atol=1e-9)


def test_solvers_on_complex_systems(x64):
    hermitian = SPD + 1j * (np.triu(np.ones((N, N)), 1) - np.tril(np.ones((N, N)), -1))
    general = GENERAL + 1j * RNG.normal(size=(N, N))
    b = B + 1j * RNG.normal(size=N)
    for solver, a in ((sparse_linalg.cg, hermitian), (sparse_linalg.bicgstab, general), (sparse_linalg.gmres, general)):
        x, _ = solver(a, b, tol=1e-10)
        assert x.dtype == np.complex128
        np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), rtol=1e-7, atol=1e-9)


def test_gmres_restart_and_solve_methods(x64):
    expected = np.linalg.solve(GENERAL, B)
    for method in ("batched", "incremental"):
        for restart in (1, 3, 20):
            x, _ = sparse_linalg.gmres(GENERAL, B, tol=1e-10, restart=restart, solve_method=method, maxiter=500)
            np.testing.assert_allclose(np.asarray(x), expected, rtol=1e-7, atol=1e-9)
    with pytest.raises(ValueError, match="solve_method"):
        sparse_linalg.gmres(GENERAL, B, solve_method="lstsq")
    # maxiter bounds the restart cycles: one cycle of one step is not a solution
    x, _ = sparse_linalg.gmres(GENERAL, B, restart=1, maxiter=1)
    assert np.linalg.norm(GENERAL @ np.asarray(x) - B) > 1e-3


def _parameters(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def test_against_jax(x64):
    jax = pytest.importorskip("jax")
    import jax.scipy.sparse.linalg as jax_sparse_linalg

    assert [n for n in dir(jax_sparse_linalg) if not n.startswith("_")] == sparse_linalg.__all__
    for solver, name, a in SOLVERS:
        theirs_fn = getattr(jax_sparse_linalg, name)
        assert _parameters(theirs_fn) == _parameters(solver)
        with jax.enable_x64(True):
            theirs, their_info = theirs_fn(a, B, tol=1e-10)
        ours, info = solver(a, B, tol=1e-10)
        if name == "gmres":
            assert info.dtype == their_info.dtype and info.weak_type == their_info.weak_type
            assert int(info) == int(their_info) == 0
        else:
            assert info is their_info is None
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-7, atol=1e-9)


def test_reverse_mode_is_refused():
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        ember.grad(lambda b: jnp.sum(sparse_linalg.cg(SPD, b)[0]))(B)
