"""Complex linear algebra and the general eigendecomposition: jnp.linalg, lax.linalg and
jax.scipy.linalg on complex64 / complex128 matrices, against NumPy and JAX (same inputs,
same outputs), eager and jitted, batched with vmap, and differentiated (real losses of
complex inputs, against jax.grad and jax.jvp)."""
import jax
import jax.numpy as jjnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from test_cpu_backend import check_backends_agree, compile_cpu

import ember
import ember.numpy as jnp
import ember.scipy.linalg as esl
from ember import lax

RNG = np.random.RandomState(7)


def _c(*shape, dtype=np.complex64):
    return (RNG.randn(*shape) + 1j * RNG.randn(*shape)).astype(dtype)


A = _c(4, 4)
B = _c(4, 2)
TALL = _c(5, 3)
HPD = (A @ A.conj().T + 4 * np.eye(4)).astype(np.complex64)  # Hermitian positive definite
WEIGHTS = _c(4, 4)


def _close(got, want, tol=2e-4):
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# (name, ember function, JAX function, arguments): the same program on both sides.
CASES = [
    ("cholesky", jnp.linalg.cholesky, jjnp.linalg.cholesky, (HPD,)),
    ("cholesky_upper", lambda x: jnp.linalg.cholesky(x, upper=True), lambda x: jjnp.linalg.cholesky(x, upper=True),
     (HPD,)),
    ("solve", jnp.linalg.solve, jjnp.linalg.solve, (A, B)),
    ("solve_vector", jnp.linalg.solve, jjnp.linalg.solve, (A, B[:, 0])),
    ("inv", jnp.linalg.inv, jjnp.linalg.inv, (A,)),
    ("det", jnp.linalg.det, jjnp.linalg.det, (A,)),
    ("slogdet", jnp.linalg.slogdet, jjnp.linalg.slogdet, (A,)),
    ("lu", lax.linalg.lu, jax.lax.linalg.lu, (A,)),
    ("lu_wide", lax.linalg.lu, jax.lax.linalg.lu, (TALL.T.copy(),)),
    ("qr", jnp.linalg.qr, jjnp.linalg.qr, (TALL,)),
    ("qr_complete", lambda x: jnp.linalg.qr(x, "complete"), lambda x: jjnp.linalg.qr(x, "complete"), (TALL,)),
    ("svdvals", jnp.linalg.svdvals, jjnp.linalg.svdvals, (TALL,)),
    ("eigvalsh", jnp.linalg.eigvalsh, jjnp.linalg.eigvalsh, (HPD,)),
    ("eigvalsh_upper", lambda x: jnp.linalg.eigvalsh(x, "U", symmetrize_input=False),
     lambda x: jjnp.linalg.eigvalsh(x, "U", symmetrize_input=False), (HPD,)),
    ("eig", jnp.linalg.eig, jjnp.linalg.eig, (A,)),
    ("eig_of_real", jnp.linalg.eig, jjnp.linalg.eig, (A.real.copy(),)),
    ("eigvals", jnp.linalg.eigvals, jjnp.linalg.eigvals, (A,)),
    ("lax_eig", lax.linalg.eig, jax.lax.linalg.eig, (A,)),
    ("lax_eig_left", lambda x: lax.linalg.eig(x, compute_right_eigenvectors=False),
     lambda x: jax.lax.linalg.eig(x, compute_right_eigenvectors=False), (A.real.copy(),)),
    ("pinv", jnp.linalg.pinv, jjnp.linalg.pinv, (TALL,)),
    ("pinv_hermitian", lambda x: jnp.linalg.pinv(x, hermitian=True), lambda x: jjnp.linalg.pinv(x, hermitian=True),
     (HPD,)),
    ("svd_hermitian", lambda x: jnp.linalg.svd(x, hermitian=True, compute_uv=False),
     lambda x: jjnp.linalg.svd(x, hermitian=True, compute_uv=False), (HPD,)),
    ("lstsq", lambda a, b: jnp.linalg.lstsq(a, b)[:2], lambda a, b: jjnp.linalg.lstsq(a, b)[:2], (TALL, _c(5, 2))),
    ("matrix_power", lambda x: jnp.linalg.matrix_power(x, 3), lambda x: jjnp.linalg.matrix_power(x, 3), (A,)),
    ("matrix_power_negative", lambda x: jnp.linalg.matrix_power(x, -2), lambda x: jjnp.linalg.matrix_power(x, -2),
     (A,)),
    ("matrix_rank", jnp.linalg.matrix_rank, jjnp.linalg.matrix_rank, (TALL @ _c(3, 4),)),
    ("tensorsolve", jnp.linalg.tensorsolve, jjnp.linalg.tensorsolve, (_c(2, 3, 6), _c(2, 3))),
    ("tensorinv", jnp.linalg.tensorinv, jjnp.linalg.tensorinv, (_c(2, 3, 6),)),
    ("cond", jnp.linalg.cond, jjnp.linalg.cond, (A,)),
    ("cond_1", lambda x: jnp.linalg.cond(x, 1), lambda x: jjnp.linalg.cond(x, 1), (A,)),
    ("multi_dot", lambda a, b: jnp.linalg.multi_dot([a, b, b.T]), lambda a, b: jjnp.linalg.multi_dot([a, b, b.T]),
     (A, B)),
    ("scipy_solve_triangular_C", lambda a, b: esl.solve_triangular(a, b, trans="C", lower=True),
     lambda a, b: jsl.solve_triangular(a, b, trans="C", lower=True), (HPD, B)),
    ("scipy_cho_solve", lambda a, b: esl.cho_solve(esl.cho_factor(a), b),
     lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b), (HPD, B)),
    ("scipy_lu_solve_2", lambda a, b: esl.lu_solve(esl.lu_factor(a), b, trans=2),
     lambda a, b: jsl.lu_solve(jsl.lu_factor(a), b, trans=2), (A, B)),
    ("scipy_solve_pos_upper", lambda a, b: esl.solve(a, b, assume_a="pos"),
     lambda a, b: jsl.solve(a, b, assume_a="pos"), (HPD, B)),
]
CASES += [(f"norm_{o}", lambda x, o=o: jnp.linalg.norm(x, o), lambda x, o=o: jjnp.linalg.norm(x, o), (A,))
          for o in [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]]
CASES += [(f"vector_norm_{o}", lambda x, o=o: jnp.linalg.norm(x, o), lambda x, o=o: jjnp.linalg.norm(x, o), (A[0],))
          for o in [None, 0, 1, 3, np.inf, -np.inf, 0.5]]
CASES += [(f"triangular_solve_{t}_{c}_{left}",
           lambda a, b, t=t, c=c, left=left: lax.linalg.triangular_solve(a, b, left_side=left, lower=True,
                                                                         transpose_a=t, conjugate_a=c),
           lambda a, b, t=t, c=c, left=left: jax.lax.linalg.triangular_solve(a, b, left_side=left, lower=True,
                                                                             transpose_a=t, conjugate_a=c),
           (A, B if left else B.T.copy()))
          for t in (False, True) for c in (False, True) for left in (False, True)]


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name, ours, theirs, args", CASES, ids=[c[0] for c in CASES])
def test_complex64_against_jax(name, ours, theirs, args, jit):
    fn = ember.jit(ours) if jit else ours
    _close(fn(*[jnp.asarray(x) for x in args]), jax.jit(theirs)(*args))


def test_against_numpy():
    np.testing.assert_allclose(jnp.linalg.inv(A), np.linalg.inv(A), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(jnp.linalg.det(A), np.linalg.det(A), rtol=1e-4)
    sign, logabsdet = jnp.linalg.slogdet(A)
    want_sign, want_log = np.linalg.slogdet(A)
    assert sign.dtype == np.complex64 and logabsdet.dtype == np.float32
    np.testing.assert_allclose(sign, want_sign, rtol=1e-5)
    np.testing.assert_allclose(abs(sign), 1, rtol=1e-6)
    np.testing.assert_allclose(logabsdet, want_log, rtol=1e-5)
    factor = jnp.linalg.cholesky(HPD)
    np.testing.assert_allclose(factor, np.linalg.cholesky(HPD), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(factor @ jnp.conj(factor.T), HPD, rtol=1e-4, atol=1e-4)
    w, v = jnp.linalg.eigh(HPD)
    assert w.dtype == np.float32 and v.dtype == np.complex64
    np.testing.assert_allclose(w, np.linalg.eigvalsh(HPD), rtol=1e-5)
    np.testing.assert_allclose(HPD @ v, v * w, rtol=1e-4, atol=1e-4)
    u, s, vh = jnp.linalg.svd(TALL, full_matrices=False)
    assert s.dtype == np.float32 and u.dtype == vh.dtype == np.complex64
    np.testing.assert_allclose(s, np.linalg.svd(TALL, compute_uv=False), rtol=1e-5)
    np.testing.assert_allclose((u * s) @ vh, TALL, rtol=1e-4, atol=1e-5)
    q, r = jnp.linalg.qr(TALL)
    np.testing.assert_allclose(q @ r, TALL, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(jnp.conj(q.T) @ q, np.eye(3), atol=1e-5)
    for o in [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]:
        np.testing.assert_allclose(jnp.linalg.norm(A, o), np.linalg.norm(A, o), rtol=1e-5)
    assert jnp.linalg.norm(A).dtype == np.float32
    np.testing.assert_allclose(jnp.linalg.pinv(TALL), np.linalg.pinv(TALL), rtol=1e-4, atol=1e-5)


def test_eig_conventions():
    """geev's: complex results for real input, A V = V diag(w), V^H... unit columns with a real
    largest component; left eigenvectors satisfy vl^H A = diag(w) vl^H."""
    real = np.array([[0, -2, 1], [2, 0, 0], [0, 1, 3]], np.float32)  # a conjugate pair and a real eigenvalue
    w, vl, vr = lax.linalg.eig(real)
    assert w.dtype == vl.dtype == vr.dtype == np.complex64
    np.testing.assert_allclose(real @ vr, vr * w, atol=1e-5)
    np.testing.assert_allclose(jnp.conj(vl.T) @ real, w[:, None] * jnp.conj(vl.T), atol=1e-5)
    for v in (vl, vr):
        np.testing.assert_allclose(jnp.linalg.norm(v, axis=0), 1, rtol=1e-6)
        largest = np.asarray(v)[np.argmax(np.abs(v), axis=0), np.arange(3)]
        np.testing.assert_array_equal(largest.imag, 0)
    np.testing.assert_allclose(np.sort_complex(np.asarray(w)), np.sort_complex(np.linalg.eigvals(real)), atol=1e-5)
    only_values = lax.linalg.eig(real, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    assert len(only_values) == 1
    np.testing.assert_array_equal(only_values[0], w)
    integer = jnp.linalg.eigvals(jnp.asarray([[2, 1], [1, 2]]))
    assert integer.dtype == np.complex64
    np.testing.assert_allclose(np.sort(integer.real), [1, 3], rtol=1e-6)
    w_nan = jnp.linalg.eigvals(jnp.asarray([[np.nan, 0], [0, 1]], jnp.float32))
    assert np.isnan(np.asarray(w_nan)).all()


def test_errors():
    with pytest.raises(ValueError, match="must have shape"):
        jnp.linalg.eig(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="square"):
        lax.linalg.eig(jnp.ones((2, 3)))
    with pytest.raises(TypeError, match="eig does not accept dtype float16"):
        lax.linalg.eig(jnp.ones((2, 2), jnp.float16))
    with pytest.raises(ValueError, match="Only the lapack implementation"):
        lax.linalg.eig(jnp.ones((2, 2)), implementation=lax.linalg.EigImplementation.MAGMA)
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs=True"):
        ember.grad(lambda x: jnp.real(jnp.sum(jnp.linalg.eig(x)[1])))(jnp.asarray(A))
    with pytest.raises(ValueError, match="ind must be a positive integer"):
        jnp.linalg.tensorinv(jnp.ones((2, 2)), 0)
    with pytest.raises(ValueError, match="multi_dot requires at least two arrays"):
        jnp.linalg.multi_dot([jnp.ones((2, 2))])


def test_complex128(x64):
    a, b = _c(4, 4, dtype=np.complex128), _c(4, 2, dtype=np.complex128)
    hpd = a @ a.conj().T + 4 * np.eye(4)
    tol = dict(rtol=1e-10, atol=1e-12)
    for jit in (False, True):
        wrap = ember.jit if jit else (lambda f: f)
        out = wrap(jnp.linalg.solve)(a, b)
        assert out.dtype == np.complex128
        np.testing.assert_allclose(out, np.linalg.solve(a, b), **tol)
        np.testing.assert_allclose(wrap(jnp.linalg.det)(a), np.linalg.det(a), **tol)
        np.testing.assert_allclose(wrap(jnp.linalg.cholesky)(hpd), np.linalg.cholesky(hpd), **tol)
        w = wrap(jnp.linalg.eigvalsh)(hpd)
        assert w.dtype == np.float64
        np.testing.assert_allclose(w, np.linalg.eigvalsh(hpd), **tol)
        np.testing.assert_allclose(wrap(jnp.linalg.svdvals)(a), np.linalg.svd(a, compute_uv=False), **tol)
        w, v = wrap(jnp.linalg.eig)(a)
        assert w.dtype == v.dtype == np.complex128
        np.testing.assert_allclose(a @ v, v * w, **tol)
        assert jnp.linalg.eigvals(a.real).dtype == np.complex128
        np.testing.assert_allclose(wrap(lambda x: jnp.linalg.norm(x, 2))(a), np.linalg.norm(a, 2), **tol)


BATCH = _c(3, 4, 4)
HPD_BATCH = np.einsum("bij,bkj->bik", BATCH, BATCH.conj()) + 4 * np.eye(4, dtype=np.complex64)
VMAP_CASES = [
    ("inv", jnp.linalg.inv, BATCH), ("det", jnp.linalg.det, BATCH), ("slogdet", jnp.linalg.slogdet, BATCH),
    ("cholesky", jnp.linalg.cholesky, HPD_BATCH), ("eigh", jnp.linalg.eigh, HPD_BATCH),
    ("svd", jnp.linalg.svd, BATCH), ("qr", jnp.linalg.qr, BATCH), ("eig", jnp.linalg.eig, BATCH),
    ("eigvals", jnp.linalg.eigvals, BATCH), ("lu", lax.linalg.lu, BATCH),
    ("left_eig", lambda x: lax.linalg.eig(x, compute_right_eigenvectors=False), BATCH),
]


@pytest.mark.parametrize("name, fn, batch", VMAP_CASES, ids=[c[0] for c in VMAP_CASES])
def test_vmap_matches_a_loop(name, fn, batch):
    batched = ember.vmap(fn)(jnp.asarray(batch))
    looped = [fn(jnp.asarray(x)) for x in batch]
    _close(batched, jax.tree.map(lambda *xs: np.stack(xs), *looped), tol=1e-5)


def test_vmap_of_triangular_solve_with_conjugate():
    def solve(lax_):
        return lambda a, b: lax_.linalg.triangular_solve(a, b, left_side=True, lower=True, transpose_a=True,
                                                         conjugate_a=True)

    bs = _c(3, 4, 2)
    _close(ember.vmap(solve(lax))(jnp.asarray(BATCH), jnp.asarray(bs)), jax.vmap(solve(jax.lax))(BATCH, bs),
           tol=1e-4)


def _weighted(np_, x, weights):
    """A real loss that sees every part of a complex x."""
    return np_.real(np_.sum(x * np_.conj(weights)))


# (name, loss(np_, lax_, *args), args): the same loss on ember and JAX, differentiated in the first argument.
GRAD_CASES = [
    ("inv", lambda n, _, x: _weighted(n, n.linalg.inv(x), WEIGHTS), (A,)),
    ("solve", lambda n, _, x, b: _weighted(n, n.linalg.solve(x, b), WEIGHTS[:, :2]), (A, B)),
    ("solve_rhs", lambda n, _, b, x: _weighted(n, n.linalg.solve(x, b), WEIGHTS[:, :2]), (B, A)),
    ("det_abs", lambda n, _, x: n.abs(n.linalg.det(x)), (A,)),
    ("det_rotated", lambda n, _, x: n.real(n.linalg.det(x) * (1 + 2j)), (A,)),
    ("slogdet_log", lambda n, _, x: n.linalg.slogdet(x)[1], (A,)),
    ("slogdet_sign", lambda n, _, x: n.real(n.linalg.slogdet(x)[0] * (1 - 1j)), (A,)),
    ("cholesky", lambda n, _, x: _weighted(n, n.linalg.cholesky(x), WEIGHTS), (HPD,)),
    ("eigvalsh", lambda n, _, x: n.sum(n.linalg.eigvalsh(x) * n.arange(4.0)), (HPD,)),
    ("eigh_vectors", lambda n, _, x: n.sum(n.abs(n.linalg.eigh(x)[1]) ** 2 * n.arange(4.0)), (HPD,)),
    ("svdvals", lambda n, _, x: n.sum(n.linalg.svd(x, compute_uv=False) * n.arange(3.0)), (TALL,)),
    ("svd_vectors", lambda n, _, x: (lambda u, s, vh: _weighted(n, u[:, :1] @ vh[:1], TALL))(
        *n.linalg.svd(x, full_matrices=False)), (TALL,)),
    ("svd_u_phase", lambda n, _, x: _weighted(n, n.linalg.svd(x, full_matrices=False)[0], TALL), (TALL,)),
    ("svd_wide", lambda n, _, x: (lambda u, s, vh: _weighted(n, u[:, :1] @ vh[:1], TALL.T))(
        *n.linalg.svd(x, full_matrices=False)), (TALL.T.copy(),)),
    ("qr_q", lambda n, _, x: _weighted(n, n.linalg.qr(x)[0], TALL), (TALL,)),
    ("qr_r", lambda n, _, x: _weighted(n, n.linalg.qr(x)[1], WEIGHTS[:3, :3]), (TALL,)),
    ("lu", lambda n, lx, x: _weighted(n, lx.linalg.lu(x)[0], WEIGHTS), (A,)),
    ("triangular_solve_a", lambda n, lx, a, b: _weighted(n, lx.linalg.triangular_solve(
        a, b, left_side=True, lower=True, transpose_a=True, conjugate_a=True), WEIGHTS), (HPD, WEIGHTS)),
    ("triangular_solve_b", lambda n, lx, b, a: _weighted(n, lx.linalg.triangular_solve(
        a, b, left_side=False, lower=False, conjugate_a=True), WEIGHTS), (WEIGHTS, HPD)),
    ("eigvals", lambda n, _, x: _weighted(n, n.linalg.eigvals(x), WEIGHTS[0]), (A,)),
    ("eigvals_of_real", lambda n, _, x: _weighted(n, n.linalg.eigvals(x), WEIGHTS[0]), (A.real.copy(),)),
    ("eig_vectors", lambda n, lx, x: _weighted(n, lx.linalg.eig(x, enable_eigvec_derivs=True)[2], WEIGHTS), (A,)),
    ("eig_left_vectors", lambda n, lx, x: _weighted(n, lx.linalg.eig(x, enable_eigvec_derivs=True)[1], WEIGHTS),
     (A,)),
    ("pinv", lambda n, _, x: _weighted(n, n.linalg.pinv(x), TALL.T), (TALL,)),
    ("pinv_hermitian", lambda n, _, x: _weighted(n, n.linalg.pinv(x, hermitian=True), WEIGHTS), (HPD,)),
    ("lstsq", lambda n, _, x, b: _weighted(n, n.linalg.lstsq(x, b)[0], WEIGHTS[:3, :2]), (TALL, _c(5, 2))),
    ("norm_2", lambda n, _, x: n.linalg.norm(x, 2), (A,)),
    ("norm_fro", lambda n, _, x: n.linalg.norm(x), (A,)),
    ("norm_nuc", lambda n, _, x: n.linalg.norm(x, "nuc"), (A,)),
    ("norm_1", lambda n, _, x: n.linalg.norm(x, 1), (A,)),
    ("vector_norm_3", lambda n, _, x: n.linalg.norm(x[0], 3), (A,)),
]


@pytest.mark.parametrize("name, loss, args", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grad_against_jax(name, loss, args):
    ours = ember.grad(lambda *xs: loss(jnp, lax, *xs))
    want = jax.jit(jax.grad(lambda *xs: loss(jjnp, jax.lax, *xs)))(*args)
    _close(ours(*[jnp.asarray(x) for x in args]), want, tol=2e-3)
    if name in ("inv", "cholesky", "eig_vectors", "svd_vectors"):
        _close(ember.jit(ours)(*[jnp.asarray(x) for x in args]), want, tol=2e-3)


def test_grad_of_norm_at_zero_is_finite():
    grad = ember.grad(lambda z: jnp.linalg.norm(z))(jnp.zeros(3, jnp.complex64))
    np.testing.assert_array_equal(grad, np.zeros(3, np.complex64))


JVP_CASES = [
    ("eigh", lambda n, lx, x: lx.linalg.eigh(x), HPD),
    ("svd", lambda n, lx, x: lx.linalg.svd(x, full_matrices=False), TALL),
    ("qr", lambda n, lx, x: lx.linalg.qr(x, full_matrices=False), TALL),
    ("cholesky", lambda n, lx, x: lx.linalg.cholesky(x), HPD),
    ("eig", lambda n, lx, x: lx.linalg.eig(x, enable_eigvec_derivs=True), A),
    ("eig_of_real", lambda n, lx, x: lx.linalg.eig(x, enable_eigvec_derivs=True), A.real.copy()),
    ("slogdet", lambda n, lx, x: n.linalg.slogdet(x), A),
]


@pytest.mark.parametrize("name, fn, x", JVP_CASES, ids=[c[0] for c in JVP_CASES])
def test_jvp_against_jax(name, fn, x):
    tangent = (_c(*x.shape) if np.iscomplexobj(x) else RNG.randn(*x.shape)).astype(x.dtype)
    if name in ("eigh", "cholesky"):
        tangent = (tangent + tangent.conj().T) / 2
    got = ember.jvp(lambda y: fn(jnp, lax, y), (jnp.asarray(x),), (jnp.asarray(tangent),))
    want = jax.jit(lambda y, t: jax.jvp(lambda z: fn(jjnp, jax.lax, z), (y,), (t,)))(x, tangent)
    _close(got, want, tol=2e-3)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_native_lapack_on_complex_matrices(dtype):
    """LU, Cholesky, triangular solves, QR, eigh and SVD of complex matrices call LAPACK's c / z
    routines from generated code, with the reference's results (tests/test_lapack_complex.py has
    more of QR, eigh and SVD)."""
    with ember.config.override(enable_x64=dtype == np.complex128):
        a, b = _c(5, 4, 4, dtype=dtype), _c(5, 4, 3, dtype=dtype)
        hpd = a @ np.conj(np.swapaxes(a, -1, -2)) + 4 * np.eye(4)

        def f(a, hpd, b):
            return (jnp.linalg.solve(a, b), jnp.linalg.inv(a), jnp.linalg.det(a), jnp.linalg.cholesky(hpd),
                    lax.linalg.triangular_solve(hpd, b, left_side=True, lower=True, transpose_a=True,
                                                conjugate_a=True),
                    lax.linalg.triangular_solve(hpd, np.swapaxes(b, -1, -2), lower=False, transpose_a=True),
                    lax.linalg.lu(a[:, :3]), jnp.linalg.qr(a[:, :, :3]), jnp.linalg.eigvalsh(hpd),
                    jnp.linalg.svd(b, compute_uv=False),
                    (lambda u, s, vh: u @ vh)(*jnp.linalg.svd(a, full_matrices=False)))  # (phase-free)

        report = compile_cpu(f, a, hpd, b).report
        assert sorted(set(report.library_calls)) == ["cholesky", "eigh", "lu", "qr", "svd", "triangular_solve"]
        assert not report.fallbacks, report.fallbacks
        check_backends_agree(f, a, hpd, b, rtol=1e-4, atol=1e-4)
        got = ember.jit(f)(a, hpd, b)
        np.testing.assert_allclose(got[0], np.linalg.solve(a, b), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got[3], np.linalg.cholesky(hpd), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got[7][0] @ got[7][1], a[:, :, :3], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got[8], np.linalg.eigvalsh(hpd), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got[9], np.linalg.svd(b, compute_uv=False), rtol=1e-4, atol=1e-4)
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        np.testing.assert_allclose(got[10], u @ vh, rtol=1e-4, atol=1e-4)
