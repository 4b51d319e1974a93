"""Complex QR, eigh and SVD on LAPACK called from generated code (``ember/backends/cpu/lapack.py``:
``geqrf`` / ``ungqr``, ``heevd``, ``gesdd`` of complex64 and complex128 matrices), against the
reference interpreter and NumPy: square, tall, wide and batched matrices under jit, their
reconstructions and unitarity, and gradients under jit against the reference and JAX."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest
from test_cpu_backend import compile_cpu, run

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import lapack

DTYPES = [np.complex64, np.complex128]
SHAPES = [(6, 6), (7, 4), (4, 7), (3, 5, 5), (2, 3, 6, 4), (2, 4, 6), (1, 1), (1, 5), (5, 1)]
TOL = {np.complex64: dict(rtol=2e-4, atol=2e-4), np.complex128: dict(rtol=1e-10, atol=1e-10)}


def _c(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _adjoint(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _eye(shape, n, dtype):
    return np.broadcast_to(np.eye(n, dtype=dtype), (*shape[:-2], n, n))


def _close_up_to_phase(got, want, axis, **tol):
    """``got`` and ``want`` equal up to one unit-modulus factor per vector along ``axis`` (-2: columns,
    -1: rows): the freedom of eigen- and singular vectors."""
    inner = np.sum(np.conj(want) * got, axis=axis, keepdims=True)
    phase = inner / np.where(np.abs(inner) == 0, 1, np.abs(inner))
    np.testing.assert_allclose(got, want * phase, **tol)


def _native(f, *args, calls):
    """Assert that ``f``'s compiled program calls LAPACK for ``calls`` and nothing falls back."""
    report = compile_cpu(f, *args).report
    assert sorted(set(report.library_calls)) == sorted(calls), report.library_calls
    assert not report.fallbacks, report.fallbacks


def _dtype_context(dtype):
    return ember.config.override(enable_x64=dtype == np.complex128)


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("full_matrices", [True, False], ids=["full", "reduced"])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_qr(shape, full_matrices, dtype):
    rng = np.random.default_rng(sum(shape) + full_matrices)
    x = _c(rng, shape, dtype)
    m, n = shape[-2:]
    rows = m if full_matrices else min(m, n)

    def f(x):
        return lax.linalg.qr(x, full_matrices=full_matrices)
    with _dtype_context(dtype):
        _native(f, x, calls=["qr"])
        q, r = run("cpu", f, x)
        q_ref, r_ref = run("reference", f, x)
    q_np, r_np = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    tol = TOL[dtype]
    assert q.dtype == r.dtype == dtype
    assert q.shape == (*shape[:-2], m, rows) and r.shape == (*shape[:-2], rows, n)
    for want_q, want_r in ((q_ref, r_ref), (q_np, r_np)):  # (the same Householder reflectors: the same phases)
        np.testing.assert_allclose(q, want_q, **tol)
        np.testing.assert_allclose(r, want_r, **tol)
    np.testing.assert_allclose(q @ r, x, **tol)
    np.testing.assert_allclose(_adjoint(q) @ q, _eye(shape, rows, dtype), **tol)
    np.testing.assert_array_equal(np.tril(r, -1), 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
@pytest.mark.parametrize("shape", [(6, 6), (3, 5, 5), (2, 2, 9, 9), (1, 1), (33, 33)],
                         ids=["6", "3x5", "2x2x9", "1", "33"])
def test_eigh(shape, lower, dtype):
    rng = np.random.default_rng(sum(shape) + lower)
    a = _c(rng, shape, dtype)
    hermitian = (a + _adjoint(a)) / 2
    n = shape[-1]
    unread = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
    x = np.where(unread, 100.0 + 50j, hermitian).astype(dtype)  # only the triangle asked for is read

    def f(x):
        return lax.linalg.eigh(x, lower=lower, symmetrize_input=False)
    with _dtype_context(dtype):
        _native(f, x, calls=["eigh"])
        v, w = run("cpu", f, x)
        v_ref, w_ref = run("reference", f, x)
    w_np, v_np = np.linalg.eigh(x, UPLO="L" if lower else "U")
    tol = TOL[dtype]
    real = np.finfo(dtype).dtype
    assert v.dtype == dtype and w.dtype == w_ref.dtype == real
    np.testing.assert_allclose(w, w_ref, **tol)
    np.testing.assert_allclose(w, w_np, **tol)
    assert (np.diff(w, axis=-1) >= 0).all()  # ascending, as syevd's
    np.testing.assert_allclose(hermitian @ v, v * w[..., None, :], **tol)
    np.testing.assert_allclose(_adjoint(v) @ v, _eye(shape, n, dtype), **tol)
    for want in (v_ref, v_np):
        _close_up_to_phase(v, want, -2, **tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
@pytest.mark.parametrize("full_matrices", [True, False], ids=["full", "reduced"])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_svd(shape, full_matrices, dtype):
    rng = np.random.default_rng(sum(shape) + full_matrices + 1)
    x = _c(rng, shape, dtype)
    m, n = shape[-2:]
    k = min(m, n)

    def f(x):
        return lax.linalg.svd(x, full_matrices=full_matrices)

    def values(x):
        return lax.linalg.svd(x, full_matrices=full_matrices, compute_uv=False)
    with _dtype_context(dtype):
        _native(f, x, calls=["svd"])
        _native(values, x, calls=["svd"])
        u, s, vh = run("cpu", f, x)
        u_ref, s_ref, vh_ref = run("reference", f, x)
        s_only = run("cpu", values, x)
    u_np, s_np, vh_np = np.linalg.svd(x, full_matrices=full_matrices)
    tol = TOL[dtype]
    real = np.finfo(dtype).dtype
    assert u.dtype == vh.dtype == dtype and s.dtype == s_only.dtype == s_ref.dtype == real
    assert u.shape[-2:] == ((m, m) if full_matrices else (m, k))
    assert vh.shape[-2:] == ((n, n) if full_matrices else (k, n))
    for want in (s_ref, s_np):
        np.testing.assert_allclose(s, want, **tol)
        np.testing.assert_allclose(s_only, want, **tol)
    assert (np.diff(s, axis=-1) <= 0).all() and (s >= 0).all()  # descending, non-negative
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], x, **tol)
    np.testing.assert_allclose(_adjoint(u) @ u, _eye(shape, u.shape[-1], dtype), **tol)
    np.testing.assert_allclose(vh @ _adjoint(vh), _eye(shape, vh.shape[-2], dtype), **tol)
    for want_u, want_vh in ((u_ref, vh_ref), (u_np, vh_np)):  # (the singular subspaces of s: up to a phase each)
        _close_up_to_phase(u[..., :, :k], want_u[..., :, :k], -2, **tol)
        _close_up_to_phase(vh[..., :k, :], want_vh[..., :k, :], -1, **tol)


def test_routines_and_what_lowers():
    """The complex decompositions call the c / z routines (``ungqr``, ``heevd``: the complex names);
    empty matrices stay on the reference."""
    x = np.ones((3, 2), np.complex64)
    eqns = {e.primitive.name: e for f in (lambda x: lax.linalg.qr(x), lambda x: lax.linalg.svd(x),
                                          lambda x: lax.linalg.eigh(x[:2]))
            for e in ember.make_jaxpr(f)(x).jaxpr.eqns}
    assert lapack.routines(eqns["qr"]) == ("cgeqrf", "cungqr")
    assert lapack.routines(eqns["eigh"]) == ("cheevd",)
    assert lapack.routines(eqns["svd"]) == ("cgesdd",)
    assert all(lapack.lowers(eqns[name]) for name in ("qr", "eigh", "svd"))
    with ember.config.override(enable_x64=True):
        eqn = ember.make_jaxpr(lambda x: lax.linalg.qr(x))(x.astype(np.complex128)).jaxpr.eqns[0]
        assert lapack.routines(eqn) == ("zgeqrf", "zungqr")
    empty = ember.make_jaxpr(lambda x: lax.linalg.svd(x))(np.ones((0, 3), np.complex64)).jaxpr.eqns[0]
    assert not lapack.lowers(empty)
    assert ember.jit(lambda x: lax.linalg.svd(x, compute_uv=False))(np.ones((0, 3), np.complex64)).shape == (0,)


def test_single_precision_workspace_sizes_round_up():
    """A float32 workspace query above 2^24 may have been rounded down: the next float up is taken."""
    assert lapack._size(np.array([16777217], np.float64)) == 16777217
    assert lapack._size(np.array([np.float32(16777217)], np.complex64)) >= 16777217
    assert lapack._size(np.array([7.0], np.complex64)) == 7
    assert lapack._size(np.array([0.0], np.float32)) == 1


LAYOUT_SHAPES = [(16, 16), (17, 33), (33, 17), (40, 40), (2, 19, 24), (8, 8), (9, 7), (3, 3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128], ids=["f32", "f64", "c64",
                                                                                            "c128"])
@pytest.mark.parametrize("shape", LAYOUT_SHAPES, ids=["x".join(map(str, s)) for s in LAYOUT_SHAPES])
def test_lu_layout_copies_are_exact(shape, dtype):
    """LU's copies to LAPACK's column-major layout and back (whole tiles transposed in registers,
    the edges element by element) lose nothing: the factors and pivots are SciPy's getrf's, bit for
    bit, for matrices of whole tiles, of edges on either side, and of fewer rows than a tile."""
    from scipy.linalg import lapack as scipy_lapack
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if dtype in DTYPES else 0)).astype(dtype)
    with ember.config.override(enable_x64=dtype in (np.float64, np.complex128)):
        lu, pivots, permutation = run("cpu", lambda a: lax.linalg.lu(a), x)
    getrf = getattr(scipy_lapack, {np.float32: "s", np.float64: "d", np.complex64: "c", np.complex128: "z"}[dtype]
                    + "getrf")
    for index in np.ndindex(shape[:-2]):
        want_lu, want_pivots, info = getrf(x[index])
        assert info >= 0
        np.testing.assert_array_equal(lu[index], want_lu)
        np.testing.assert_array_equal(pivots[index], want_pivots)
        rows = np.arange(shape[-2])
        for i, p in enumerate(want_pivots):
            rows[[i, p]] = rows[[p, i]]
        np.testing.assert_array_equal(permutation[index], rows)


@pytest.mark.parametrize("dtype", DTYPES, ids=["c64", "c128"])
def test_batched_and_in_loops(dtype):
    """vmap of jnp.linalg's decompositions, and decompositions inside a loop body, are native."""
    rng = np.random.default_rng(3)
    x = _c(rng, (4, 5, 3), dtype)
    h = _c(rng, (4, 5, 5), dtype)
    h = h + _adjoint(h)

    def batched(x, h):
        return (ember.vmap(lambda y: jnp.linalg.svd(y, full_matrices=False))(x), ember.vmap(jnp.linalg.qr)(x),
                ember.vmap(jnp.linalg.eigh)(h))

    def looped(x, h):
        def step(i, carry):
            q, _ = jnp.linalg.qr(x[i] + carry[:, :1])
            s = jnp.linalg.svd(q, compute_uv=False)
            w = jnp.linalg.eigvalsh(h[i])
            return carry + (jnp.sum(s) + jnp.sum(w)).astype(carry.dtype) * 1e-2
        return lax.fori_loop(0, 4, step, jnp.zeros((5, 3), x.dtype))
    tol = TOL[dtype]
    with _dtype_context(dtype):
        _native(batched, x, h, calls=["eigh", "qr", "svd"])
        exe = compile_cpu(looped, x, h)
        assert not exe.report.fallbacks and exe.report.loops, exe.report.fallbacks
        (u, s, vh), (q, r), (w, v) = run("cpu", batched, x, h)
        (_, s_ref, _), (q_ref, r_ref), (w_ref, v_ref) = run("reference", batched, x, h)
        carry, carry_ref = run("cpu", looped, x, h), run("reference", looped, x, h)
    np.testing.assert_allclose((u * s[..., None, :]) @ vh, x, **tol)
    np.testing.assert_allclose(q @ r, x, **tol)
    np.testing.assert_allclose(h @ v, v * w[..., None, :], **tol)
    for got, want in ((s, s_ref), (s, np.linalg.svd(x, compute_uv=False)), (q, q_ref), (r, r_ref), (w, w_ref),
                      (w, np.linalg.eigvalsh(h)), (carry, carry_ref)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, **tol)
    _close_up_to_phase(v, v_ref, -2, **tol)


def _weighted(np_, x, weights):
    """A real loss that sees every part of a complex x."""
    return np_.real(np_.sum(x * np_.conj(weights)))


RNG = np.random.default_rng(11)
TALL, SQUARE = _c(RNG, (5, 3), np.complex64), _c(RNG, (4, 4), np.complex64)
HERMITIAN = (SQUARE + _adjoint(SQUARE)).astype(np.complex64)
# (name, loss(np_, lax_, x), x): gauge-invariant losses (a phase of a vector changes none of them)
GRAD_CASES = [
    ("eigvalsh", lambda n, lx, x: n.sum(lx.linalg.eigh(x)[1] * n.arange(4.0)), HERMITIAN),
    ("eigh_vectors", lambda n, lx, x: n.sum(n.abs(lx.linalg.eigh(x)[0]) ** 2 * n.arange(4.0)), HERMITIAN),
    ("svdvals", lambda n, lx, x: n.sum(lx.linalg.svd(x, compute_uv=False) * n.arange(3.0)), TALL),
    ("svd_vectors", lambda n, lx, x: (lambda u, s, vh: _weighted(n, u[:, :2] @ vh[:2], TALL))(
        *lx.linalg.svd(x, full_matrices=False)), TALL),
    ("svd_wide", lambda n, lx, x: (lambda u, s, vh: _weighted(n, (u[:, :1] * s[:1]) @ vh[:1], TALL.T))(
        *lx.linalg.svd(x, full_matrices=False)), TALL.T.copy()),
    ("qr_q", lambda n, lx, x: _weighted(n, lx.linalg.qr(x, full_matrices=False)[0], TALL), TALL),
    ("qr_r", lambda n, lx, x: _weighted(n, lx.linalg.qr(x, full_matrices=False)[1], SQUARE[:3, :3]), TALL),
    ("qr_square", lambda n, lx, x: _weighted(n, lx.linalg.qr(x)[0] @ lx.linalg.qr(x)[1], SQUARE), SQUARE),
]


@pytest.mark.parametrize("name, loss, x", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grad_under_jit(name, loss, x):
    """Gradients under jit (their forward decompositions native) agree with the reference and JAX."""
    grad = ember.grad(lambda y: loss(jnp, lax, y))
    primitive = next(p for p in ("eigh", "svd", "qr") if name.startswith(p[:2]))
    report = compile_cpu(grad, x).report
    assert primitive in report.library_calls and not report.fallbacks, report
    got, want = run("cpu", grad, x), run("reference", grad, x)
    assert got.dtype == want.dtype == np.complex64
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    theirs = jax.jit(jax.grad(lambda y: loss(jjnp, jax.lax, y)))(x)
    np.testing.assert_allclose(got, theirs, rtol=2e-3, atol=2e-3)
