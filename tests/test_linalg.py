"""``jnp.linalg``'s decompositions and solvers and the ``lax.linalg`` primitives under them:
values, dtypes and shapes against NumPy (eagerly and under jit, batched), reconstruction
identities over hypothesis-drawn well-conditioned matrices, derivatives against central
finite differences (float64), vmap against a loop, JAX when it is installed, and errors."""
from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, strategies as st
from util import assert_allclose, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember import errors, lax

TOL = dict(rtol=2e-5, atol=2e-5)  # float32 decompositions of matrices with condition number <= 2
BATCHES = [(), (2,), (2, 1)]


def _orthogonal(rng: np.random.Generator, batch: tuple, n: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(*batch, n, n)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]


def well_conditioned(rng: np.random.Generator, shape: tuple, dtype: Any = np.float32, symmetric: bool = False,
                     positive: bool = False) -> np.ndarray:
    """``U diag(d) V^T`` with orthonormal U, V and |d| in [1, 2]: condition number at most 2.
    ``symmetric``: V = U (eigenvalues of either sign); ``positive``: also d > 0."""
    *batch, m, n = shape
    k = min(m, n)
    u = _orthogonal(rng, tuple(batch), m)[..., :k]
    v = u if symmetric else _orthogonal(rng, tuple(batch), n)[..., :k]
    d = rng.uniform(1, 2, size=(*batch, k))
    if symmetric and not positive:
        d *= rng.choice([-1, 1], size=d.shape)
    return ((u * d[..., None, :]) @ np.swapaxes(v, -1, -2)).astype(dtype)


def _mT(x: Any) -> np.ndarray:
    return np.swapaxes(np.asarray(x, np.float64), -1, -2)


def _assert_orthonormal_columns(q: Any, tol: float = 1e-5) -> None:
    q = np.asarray(q, np.float64)
    np.testing.assert_allclose(_mT(q) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2),
                               atol=tol)


# --- solvers, inverses, determinants ------------------------------------------------------------------
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("n", [1, 4])
def test_inv_det_slogdet_match_numpy(rng, batch, n):
    x = well_conditioned(rng, (*batch, n, n))
    check_eager_and_jit(jnp.linalg.inv, x, expected=np.linalg.inv(x), **TOL)
    check_eager_and_jit(jnp.linalg.det, x, expected=np.linalg.det(x), **TOL)
    result = check_eager_and_jit(jnp.linalg.slogdet, x, expected=tuple(np.linalg.slogdet(x)), **TOL)
    assert isinstance(result, jnp.linalg.SlogdetResult)
    assert_allclose(result.sign * np.exp(np.asarray(result.logabsdet)), np.linalg.det(x), **TOL)


@pytest.mark.parametrize("a_shape, b_shape", [
    ((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3, 4)), ((1, 3, 3), (5, 3, 2)),
    ((3, 3), (4, 3, 1)),
])
def test_solve_matches_numpy_with_vectors_and_broadcast_batches(rng, a_shape, b_shape):
    a = well_conditioned(rng, a_shape)
    b = rng.normal(size=b_shape).astype(np.float32)
    check_eager_and_jit(jnp.linalg.solve, a, b, expected=np.linalg.solve(a, b), **TOL)


def test_integer_input_promotes_and_x64_gives_float64(x64, rng):
    x = np.array([[2, 1], [1, 3]], np.int64)
    assert jnp.linalg.inv(x.astype(np.int32)).dtype == np.float32  # as in JAX: int32 becomes float32
    for fn in (jnp.linalg.inv, jnp.linalg.det, jnp.linalg.cholesky, jnp.linalg.pinv):
        assert fn(x).dtype == np.float64
    y = well_conditioned(rng, (3, 3), np.float64)
    assert_allclose(jnp.linalg.inv(y), np.linalg.inv(y), rtol=1e-12, atol=1e-12)
    assert jnp.linalg.inv(y.astype(np.float32)).dtype == np.float32
    assert jnp.linalg.svd(y, compute_uv=False).dtype == np.float64


def test_float32_is_the_default(rng):
    x = np.array([[2, 1], [1, 3]], np.int32)
    assert jnp.linalg.det(x).dtype == np.float32
    assert jnp.linalg.inv(x.astype(np.float64)).dtype == np.float32  # float64 canonicalizes with x64 off
    assert_allclose(jnp.linalg.det(x), np.float32(5), rtol=1e-6)


def test_singular_and_indefinite_matrices_give_inf_and_nan_as_jax():
    ones = np.ones((2, 2), np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.linalg.inv(ones)), [[np.inf, -np.inf], [-np.inf, np.inf]])
    assert np.isnan(np.asarray(jnp.linalg.solve(ones, np.ones(2, np.float32)))).all()
    assert float(jnp.linalg.det(ones)) == 0
    sign, logabsdet = jnp.linalg.slogdet(ones)
    assert float(sign) == 0 and float(logabsdet) == -np.inf
    factor = np.asarray(ember.jit(jnp.linalg.cholesky)(-np.eye(2, dtype=np.float32)))
    assert np.isnan(factor[np.tril_indices(2)]).all() and factor[0, 1] == 0
    # one bad matrix in a batch spoils only its own factor
    batch = np.stack([np.eye(2, dtype=np.float32), -np.eye(2, dtype=np.float32)])
    factors = np.asarray(jnp.linalg.cholesky(batch))
    np.testing.assert_array_equal(factors[0], np.eye(2))
    assert np.isnan(factors[1, 1, 1])
    assert float(jnp.linalg.det(np.zeros((0, 0), np.float32))) == 1


def test_matrix_power_matches_numpy(rng):
    x = well_conditioned(rng, (2, 3, 3))
    for n in (-3, -1, 0, 1, 2, 3, 6):
        check_eager_and_jit(lambda a, n=n: jnp.linalg.matrix_power(a, n), x, expected=np.linalg.matrix_power(x, n),
                            rtol=1e-4, atol=1e-4)
    integers = np.array([[1, 1], [1, 0]], np.int32)
    out = jnp.linalg.matrix_power(integers, 10)
    assert out.dtype == np.int32 and int(out[0, 1]) == 55  # Fibonacci
    assert jnp.linalg.matrix_power(integers, -1).dtype == np.float32


# --- decompositions -------------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", BATCHES)
def test_cholesky_lower_and_upper(rng, batch):
    x = well_conditioned(rng, (*batch, 4, 4), symmetric=True, positive=True)
    lower = check_eager_and_jit(jnp.linalg.cholesky, x, expected=np.linalg.cholesky(x), **TOL)
    check_eager_and_jit(lambda a: jnp.linalg.cholesky(a, upper=True), x, expected=_mT(lower).astype(np.float32))
    # Without symmetrizing, only the lower triangle is read.
    scrambled = x + np.triu(np.ones((4, 4), np.float32), 1) * 7
    assert_allclose(jnp.linalg.cholesky(scrambled, symmetrize_input=False), lower, **TOL)
    assert_allclose(lax.linalg.cholesky(x), lower, **TOL)


@pytest.mark.parametrize("batch", BATCHES)
def test_eigh_eigenvalues_ascending_and_eigenvectors(rng, batch):
    x = well_conditioned(rng, (*batch, 4, 4), symmetric=True)
    w, v = check_eager_and_jit(jnp.linalg.eigh, x)
    assert isinstance(jnp.linalg.eigh(x), jnp.linalg.EighResult)
    assert_allclose(w, np.linalg.eigvalsh(x), **TOL)
    assert np.all(np.diff(np.asarray(w), axis=-1) >= 0)
    _assert_orthonormal_columns(v)
    assert_allclose((np.asarray(v) * np.asarray(w)[..., None, :]) @ _mT(v), x, check_dtype=False, **TOL)
    assert_allclose(np.abs(v), np.abs(np.linalg.eigh(x).eigenvectors), **TOL)  # up to sign
    check_eager_and_jit(jnp.linalg.eigvalsh, x, expected=np.linalg.eigvalsh(x), **TOL)
    # UPLO names the triangle that is read when the input is not symmetrized.
    upper_only = np.triu(x) + np.tril(np.full_like(x, 9), -1)
    assert_allclose(jnp.linalg.eigvalsh(upper_only, UPLO="U", symmetrize_input=False), np.linalg.eigvalsh(x), **TOL)
    lax_v, lax_w = lax.linalg.eigh(x)
    assert_allclose(lax_w, w)
    assert_allclose(lax_v, v)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 5, 3), (2, 1, 3, 5)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_matches_numpy_and_reconstructs(rng, shape, full_matrices):
    x = well_conditioned(rng, shape)
    u, s, vh = check_eager_and_jit(lambda a: jnp.linalg.svd(a, full_matrices=full_matrices), x, **TOL)
    expected = np.linalg.svd(x, full_matrices=full_matrices)
    assert (u.shape, s.shape, vh.shape) == (expected.U.shape, expected.S.shape, expected.Vh.shape)
    assert u.dtype == s.dtype == vh.dtype == np.float32
    assert_allclose(s, expected.S, **TOL)
    _assert_orthonormal_columns(u)
    _assert_orthonormal_columns(_mT(vh))
    k = s.shape[-1]
    assert_allclose((np.asarray(u)[..., :k] * np.asarray(s)[..., None, :]) @ np.asarray(vh)[..., :k, :], x, **TOL)
    check_eager_and_jit(lambda a: jnp.linalg.svd(a, compute_uv=False), x, expected=expected.S, **TOL)
    check_eager_and_jit(jnp.linalg.svdvals, x, expected=expected.S, **TOL)
    assert_allclose(lax.linalg.svd(x, compute_uv=False), expected.S, **TOL)


def test_hermitian_svd_uses_the_eigendecomposition(rng):
    x = well_conditioned(rng, (2, 4, 4), symmetric=True)
    u, s, vh = check_eager_and_jit(lambda a: jnp.linalg.svd(a, hermitian=True), x)
    assert_allclose(s, np.linalg.svd(x, compute_uv=False), **TOL)
    assert_allclose((np.asarray(u) * np.asarray(s)[..., None, :]) @ np.asarray(vh), x, **TOL)
    assert_allclose(jnp.linalg.svd(x, compute_uv=False, hermitian=True), np.linalg.svd(x, compute_uv=False), **TOL)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 5, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_modes_match_numpy(rng, shape, mode):
    x = well_conditioned(rng, shape)
    out = check_eager_and_jit(lambda a: jnp.linalg.qr(a, mode), x)
    expected = np.linalg.qr(x, mode)
    if mode == "r":
        assert_allclose(out, expected, **TOL)
        return
    assert isinstance(jnp.linalg.qr(x, mode), jnp.linalg.QRResult)
    q, r = out
    assert q.shape == expected.Q.shape and r.shape == expected.R.shape
    _assert_orthonormal_columns(q)
    np.testing.assert_array_equal(np.tril(np.asarray(r), -1), 0)
    assert_allclose(np.asarray(q) @ np.asarray(r), x, **TOL)
    assert_allclose(lax.linalg.qr(x, full_matrices=mode == "complete")[1], r)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 3, 4, 4)])
def test_lu_pivots_permutation_and_reconstruction(rng, shape):
    x = rng.normal(size=shape).astype(np.float32)
    lu, pivots, permutation = check_eager_and_jit(lax.linalg.lu, x)
    *batch, m, n = shape
    k = min(m, n)
    assert pivots.dtype == permutation.dtype == np.int32
    assert pivots.shape == (*batch, k) and permutation.shape == (*batch, m)
    lu, pivots, permutation = map(np.asarray, (lu, pivots, permutation))
    lower = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
    upper = np.triu(lu[..., :k, :])
    assert_allclose(lower @ upper, np.take_along_axis(x, permutation[..., None], -2), check_dtype=False, **TOL)
    assert np.all(np.abs(lower) <= 1 + 1e-6)  # partial pivoting: multipliers are at most 1
    for index in np.ndindex(*batch):  # swapping rows as the pivots say gives the permutation
        rows = list(range(m))
        for i, p in enumerate(pivots[index]):
            rows[i], rows[p] = rows[p], rows[i]
        np.testing.assert_array_equal(permutation[index], rows)


@pytest.mark.parametrize("left_side, lower, transpose_a, unit_diagonal",
                         list(itertools.product([True, False], repeat=4)))
def test_triangular_solve_matches_a_dense_solve(rng, left_side, lower, transpose_a, unit_diagonal):
    a = rng.normal(size=(2, 4, 4)).astype(np.float32) + 4 * np.eye(4, dtype=np.float32)
    b = rng.normal(size=(2, 4, 3) if left_side else (2, 3, 4)).astype(np.float32)
    triangle = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        triangle = triangle - np.diagonal(triangle, axis1=-2, axis2=-1)[..., None] * np.eye(4) + np.eye(4)
    op = _mT(triangle) if transpose_a else triangle.astype(np.float64)
    expected = np.linalg.solve(op, b) if left_side else _mT(np.linalg.solve(_mT(op), _mT(b)))

    def solve(a, b):
        return lax.linalg.triangular_solve(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                                           unit_diagonal=unit_diagonal)

    check_eager_and_jit(solve, a, b, expected=expected.astype(np.float32), **TOL)


def test_triangular_solve_with_a_vector(rng):
    a = np.triu(rng.normal(size=(3, 3))).astype(np.float32) + 3 * np.eye(3, dtype=np.float32)
    b = rng.normal(size=3).astype(np.float32)
    out = lax.linalg.triangular_solve(a, b, left_side=True)
    assert out.shape == (3,)
    assert_allclose(out, np.linalg.solve(a, b).astype(np.float32), **TOL)
    assert_allclose(lax.linalg.triangular_solve(a, b), np.linalg.solve(a.T, b).astype(np.float32), **TOL)


# --- pseudo-inverse, least squares, rank, norms ------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 5, 3)])
def test_pinv_matches_numpy(rng, shape):
    x = well_conditioned(rng, shape)
    check_eager_and_jit(jnp.linalg.pinv, x, expected=np.linalg.pinv(x), **TOL)
    rank_one = np.outer(np.arange(1.0, 4.0), np.arange(1.0, 5.0)).astype(np.float32)
    assert_allclose(jnp.linalg.pinv(rank_one, rtol=1e-3), np.linalg.pinv(rank_one, rtol=1e-3), **TOL)
    assert_allclose(jnp.linalg.pinv(rank_one, rcond=1e-3), np.linalg.pinv(rank_one, rtol=1e-3), **TOL)
    assert jnp.linalg.pinv(np.zeros((0, 3), np.float32)).shape == (3, 0)


@pytest.mark.parametrize("a_shape, b_shape", [((5, 3), (5,)), ((5, 3), (5, 2)), ((3, 5), (3, 2)), ((4, 4), (4,))])
def test_lstsq_matches_numpy(rng, a_shape, b_shape):
    a = well_conditioned(rng, a_shape)
    b = rng.normal(size=b_shape).astype(np.float32)
    x, residuals, rank, s = check_eager_and_jit(jnp.linalg.lstsq, a, b)
    expected = np.linalg.lstsq(a, b)
    assert_allclose(x, expected[0], **TOL)
    assert_allclose(s, expected[3], **TOL)
    assert rank.dtype == np.int32 and int(rank) == expected[2]
    expected_residuals = np.sum((b.reshape(b.shape[0], -1) - a @ expected[0].reshape(a.shape[1], -1)) ** 2, axis=0)
    assert_allclose(residuals, expected_residuals.astype(np.float32), rtol=1e-4, atol=1e-4)
    numpy_style = jnp.linalg.lstsq(a, b, numpy_resid=True)[1]
    assert numpy_style.shape == expected[1].shape


def test_lstsq_rcond_drops_small_singular_values():
    a = np.diag([1.0, 1e-4, 0.0]).astype(np.float32)
    b = np.ones(3, np.float32)
    x, _, rank, _ = jnp.linalg.lstsq(a, b, rcond=1e-3)
    assert int(rank) == 1
    assert_allclose(x, np.array([1, 0, 0], np.float32))
    assert int(jnp.linalg.lstsq(a, b)[2]) == 2


def test_matrix_rank(rng):
    full = well_conditioned(rng, (4, 4))
    deficient = np.stack([full[:, :2] @ full[:2, :], np.outer(full[0], full[1]), full])
    out = check_eager_and_jit(jnp.linalg.matrix_rank, deficient, expected=np.array([2, 1, 4], np.int32))
    assert out.dtype == np.int32
    assert int(jnp.linalg.matrix_rank(full, tol=10.0)) == 0  # as in JAX, the tolerance is absolute
    assert int(jnp.linalg.matrix_rank(full, rtol=1.5)) == int(np.sum(np.linalg.svd(full, compute_uv=False) > 1.5))
    assert int(jnp.linalg.matrix_rank(deficient[0], hermitian=False)) == 2
    assert int(jnp.linalg.matrix_rank(np.zeros(3))) == 0 and int(jnp.linalg.matrix_rank(np.ones(3))) == 1


@pytest.mark.parametrize("ord", [2, -2, "nuc"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), ((0, 1), True), ((2, 0), False), ((-1, -2), True)])
def test_spectral_and_nuclear_norms(rng, ord, axis, keepdims):
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    if axis is None:
        x = x[0]
    expected = np.linalg.norm(x.astype(np.float64), ord, axis, keepdims).astype(np.float32)
    check_eager_and_jit(lambda v: jnp.linalg.norm(v, ord, axis, keepdims), x, expected=expected, rtol=1e-5)
    if axis is None:
        assert_allclose(jnp.linalg.matrix_norm(x, ord=ord), expected, rtol=1e-5)


# --- hypothesis: reconstruction identities ----------------------------------------------------------
@given(data=st.data())
def test_decompositions_reconstruct_their_input(data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    batch = data.draw(st.sampled_from([(), (2,)]))
    m, n = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    x = well_conditioned(rng, (*batch, m, n))
    q, r = jnp.linalg.qr(x)
    assert_allclose(np.asarray(q) @ np.asarray(r), x, **TOL)
    u, s, vh = jnp.linalg.svd(x, full_matrices=False)
    assert_allclose((np.asarray(u) * np.asarray(s)[..., None, :]) @ np.asarray(vh), x, **TOL)
    lu, _, permutation = map(np.asarray, lax.linalg.lu(x))
    k = min(m, n)
    product = (np.tril(lu[..., :k], -1) + np.eye(m, k)) @ np.triu(lu[..., :k, :])
    assert_allclose(product, np.take_along_axis(x, permutation[..., None], -2), check_dtype=False, **TOL)
    spd = well_conditioned(rng, (*batch, n, n), symmetric=True, positive=True)
    factor = np.asarray(jnp.linalg.cholesky(spd))
    assert_allclose(factor @ _mT(factor), spd, check_dtype=False, **TOL)
    w, v = map(np.asarray, jnp.linalg.eigh(spd))
    assert_allclose(spd @ v, v * w[..., None, :], check_dtype=False, **TOL)
    assert_allclose(np.asarray(jnp.linalg.inv(spd)) @ spd, np.broadcast_to(np.eye(n), spd.shape), check_dtype=False,
                    **TOL)


# --- derivatives: central finite differences in float64 ------------------------------------------------
def _symmetric_positive(rng: np.random.Generator) -> np.ndarray:
    return well_conditioned(rng, (4, 4), np.float64, symmetric=True, positive=True)


def _weights(shape: tuple) -> np.ndarray:
    return np.random.default_rng(7).normal(size=shape)


W4, W53, W35 = _weights((4, 4)), _weights((5, 3)), _weights((3, 5))
GRADIENT_CASES: dict[str, tuple[Callable, Callable]] = {
    "inv": (lambda x: jnp.sum(jnp.linalg.inv(x) * W4), lambda rng: well_conditioned(rng, (4, 4), np.float64)),
    "solve": (lambda x: jnp.sum(jnp.linalg.solve(x, W4[:, :2])), lambda rng: well_conditioned(rng, (4, 4), np.float64)),
    "solve_rhs": (lambda b: jnp.sum(jnp.linalg.solve(W4 + 4 * np.eye(4), b) ** 2), lambda rng: rng.normal(size=(4, 2))),
    "det": (jnp.linalg.det, lambda rng: well_conditioned(rng, (4, 4), np.float64)),
    "slogdet": (lambda x: jnp.linalg.slogdet(x).logabsdet, lambda rng: well_conditioned(rng, (4, 4), np.float64)),
    "cholesky": (lambda x: jnp.sum(jnp.linalg.cholesky(x) * W4), _symmetric_positive),
    "eigh_values": (lambda x: jnp.sum(jnp.linalg.eigvalsh(x) * W4[0]), _symmetric_positive),
    # Eigenvectors and singular vectors are unique up to sign: square them.
    "eigh_vectors": (lambda x: jnp.sum((jnp.linalg.eigh(x).eigenvectors * W4) ** 2), _symmetric_positive),
    "svd_values_tall": (lambda x: jnp.sum(jnp.linalg.svdvals(x) * W4[0, :3]), lambda rng: rng.normal(size=(5, 3))),
    "svd_values_wide": (lambda x: jnp.sum(jnp.linalg.svdvals(x) * W4[0, :3]), lambda rng: rng.normal(size=(3, 5))),
    "svd_vectors_tall": (lambda x: jnp.sum((jnp.linalg.svd(x, full_matrices=False).U * W53) ** 2)
                         + jnp.sum((jnp.linalg.svd(x, full_matrices=False).Vh * W4[:3, :3]) ** 2),
                         lambda rng: well_conditioned(rng, (5, 3), np.float64)),
    "svd_vectors_wide": (lambda x: jnp.sum((jnp.linalg.svd(x, full_matrices=False).Vh * W35) ** 2),
                         lambda rng: well_conditioned(rng, (3, 5), np.float64)),
    "qr_tall": (lambda x: jnp.sum(jnp.linalg.qr(x).Q * W53) + jnp.sum(jnp.linalg.qr(x).R * W4[:3, :3]),
                lambda rng: rng.normal(size=(5, 3))),
    "qr_wide": (lambda x: jnp.sum(jnp.linalg.qr(x).Q * W4[:3, :3]) + jnp.sum(jnp.linalg.qr(x).R * W35),
                lambda rng: rng.normal(size=(3, 5))),
    "qr_complete_square": (lambda x: jnp.sum(jnp.linalg.qr(x, "complete").Q * W4), lambda rng: rng.normal(size=(4, 4))),
    "lu_tall": (lambda x: jnp.sum(lax.linalg.lu(x)[0] * W53), lambda rng: rng.normal(size=(5, 3))),
    "lu_wide": (lambda x: jnp.sum(lax.linalg.lu(x)[0] * W35), lambda rng: rng.normal(size=(3, 5))),
    "triangular_solve_a": (lambda a: jnp.sum(lax.linalg.triangular_solve(a, W4[:, :2], left_side=True, lower=True,
                                                                         transpose_a=True)),
                           lambda rng: rng.normal(size=(4, 4)) + 4 * np.eye(4)),
    "triangular_solve_b": (lambda b: jnp.sum(lax.linalg.triangular_solve(W4 + 4 * np.eye(4), b, unit_diagonal=True)
                                             ** 2), lambda rng: rng.normal(size=(3, 4))),
    "pinv": (lambda x: jnp.sum(jnp.linalg.pinv(x) * W35), lambda rng: rng.normal(size=(5, 3))),
    "lstsq": (lambda x: jnp.sum(jnp.linalg.lstsq(x, W53[:, 0])[0]), lambda rng: rng.normal(size=(5, 3))),
    "norm_2": (lambda x: jnp.linalg.norm(x, 2), lambda rng: rng.normal(size=(5, 3))),
    "norm_nuc": (lambda x: jnp.linalg.norm(x, "nuc"), lambda rng: rng.normal(size=(3, 5))),
    "matrix_power": (lambda x: jnp.sum(jnp.linalg.matrix_power(x, -2)), lambda rng: well_conditioned(rng, (4, 4),
                                                                                                   np.float64)),
}


@pytest.mark.parametrize("name", list(GRADIENT_CASES))
def test_gradient_matches_central_differences(x64, rng, name):
    fn, make_input = GRADIENT_CASES[name]
    x = make_input(rng)
    gradient = np.asarray(ember.grad(fn)(x))
    assert gradient.dtype == np.float64 and gradient.shape == x.shape
    step = 1e-6
    for direction in rng.normal(size=(2, *x.shape)):
        difference = (float(fn(x + step * direction)) - float(fn(x - step * direction))) / (2 * step)
        np.testing.assert_allclose(np.sum(gradient * direction), difference, rtol=1e-6, atol=1e-6)


def test_forward_mode_and_jit_of_grad_agree_with_reverse_mode(x64, rng):
    x = well_conditioned(rng, (4, 4), np.float64)
    fn = GRADIENT_CASES["inv"][0]
    direction = rng.normal(size=x.shape)
    _, tangent = ember.jvp(fn, (x,), (direction,))
    gradient = ember.jit(ember.grad(fn))(x)
    np.testing.assert_allclose(float(tangent), np.sum(np.asarray(gradient) * direction), rtol=1e-10)


def test_undefined_derivatives_are_refused(x64, rng):
    tall = rng.normal(size=(5, 3))
    with pytest.raises(NotImplementedError, match="full_matrices=True of a 5 x 3 matrix"):
        ember.grad(lambda x: jnp.sum(jnp.linalg.svd(x).U))(tall)
    with pytest.raises(NotImplementedError, match="complete QR decomposition .* of a 5 x 3 matrix"):
        ember.grad(lambda x: jnp.sum(jnp.linalg.qr(x, "complete").Q))(tall)
    square = well_conditioned(rng, (3, 3), np.float64)  # a square full SVD is the reduced one
    assert ember.grad(lambda x: jnp.sum(jnp.linalg.svd(x).S))(square).shape == (3, 3)


# --- vmap --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn, in_axes", [
    (jnp.linalg.inv, 0), (jnp.linalg.det, 2), (jnp.linalg.slogdet, 1), (jnp.linalg.cholesky, 0),
    (jnp.linalg.eigh, 0), (lambda a: jnp.linalg.svd(a, full_matrices=False), 1), (jnp.linalg.qr, 2),
    (lax.linalg.lu, 1), (jnp.linalg.pinv, 0), (lambda a: jnp.linalg.norm(a, 2), 2),
])
def test_vmap_matches_a_loop(rng, fn, in_axes):
    stacked = np.moveaxis(well_conditioned(rng, (3, 4, 4), symmetric=True, positive=True), 0, in_axes)
    batched = ember.vmap(fn, in_axes=in_axes)(stacked)
    looped = [fn(np.take(stacked, i, axis=in_axes)) for i in range(3)]
    for got, *expected in zip(ember.tree_util.tree_leaves(batched), *map(ember.tree_util.tree_leaves, looped)):
        assert_allclose(got, np.stack([np.asarray(e) for e in expected]), **TOL)


def test_vmap_of_solvers_with_one_operand_batched(rng):
    a = well_conditioned(rng, (4, 4))
    bs = rng.normal(size=(4, 3, 2)).astype(np.float32)
    out = ember.vmap(jnp.linalg.solve, in_axes=(None, 1))(a, bs)
    assert_allclose(out, np.stack([np.linalg.solve(a, bs[:, i]) for i in range(3)]), **TOL)
    triangle = np.triu(a) + 3 * np.eye(4, dtype=np.float32)
    out = ember.jit(ember.vmap(lambda b: lax.linalg.triangular_solve(triangle, b, left_side=True), in_axes=1))(bs)
    assert_allclose(out, np.stack([np.linalg.solve(triangle, bs[:, i]) for i in range(3)]), **TOL)


# --- against JAX ------------------------------------------------------------------------------------------
def test_against_jax_when_available(rng):
    jax = pytest.importorskip("jax")
    jax_numpy = jax.numpy
    square = well_conditioned(rng, (2, 4, 4))
    spd = well_conditioned(rng, (2, 4, 4), symmetric=True, positive=True)
    tall = well_conditioned(rng, (5, 3))
    cases = [("inv", square), ("det", square), ("slogdet", square), ("cholesky", spd), ("eigvalsh", spd),
             ("svdvals", tall), ("pinv", tall), ("matrix_rank", tall)]
    for name, x in cases:
        ours, theirs = getattr(jnp.linalg, name)(x), getattr(jax_numpy.linalg, name)(x)
        for o, t in zip(ember.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
            assert o.dtype == t.dtype and o.shape == t.shape, name
            assert_allclose(o, np.asarray(t), **TOL)
    b = rng.normal(size=5).astype(np.float32)
    for o, t in zip(jnp.linalg.lstsq(tall, b), jax_numpy.linalg.lstsq(tall, b)):
        assert o.dtype == t.dtype and o.shape == t.shape
        assert_allclose(o, np.asarray(t), **TOL)
    for name, x in [("det", square[0]), ("eigvalsh", spd[0]), ("svdvals", tall), ("inv", square[0])]:
        ours = ember.grad(lambda a, name=name: jnp.sum(getattr(jnp.linalg, name)(a)))(x)
        theirs = jax.grad(lambda a, name=name: jax_numpy.sum(getattr(jax_numpy.linalg, name)(a)))(x)
        assert_allclose(ours, np.asarray(theirs), rtol=1e-4, atol=1e-4)


# --- errors -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn, name", [(jnp.linalg.inv, "inv"), (jnp.linalg.det, "det"),
                                      (jnp.linalg.cholesky, "cholesky"), (jnp.linalg.slogdet, "slogdet")])
def test_non_square_input_is_refused_naming_the_shape(fn, name):
    with pytest.raises(ValueError) as info:
        fn(np.ones((2, 3), np.float32))
    assert str(info.value) == f"Argument to {name} must have shape [..., n, n], got (2, 3)."
    with pytest.raises(ValueError, match=r"got \(3,\)"):
        ember.jit(fn)(np.ones(3, np.float32))


def test_bad_arguments_are_clear_errors(rng):
    x = np.eye(3, dtype=np.float32)
    with pytest.raises(TypeError, match="cholesky does not accept dtype float16: it needs float32 or float64"):
        lax.linalg.cholesky(x.astype(np.float16))
    with pytest.raises(TypeError, match="float16"):
        jnp.linalg.inv(x.astype(np.float16))
    with pytest.raises(ValueError, match="Unsupported QR decomposition mode 'full'"):
        jnp.linalg.qr(x, "full")
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'geqrf' not implemented"):
        ember.grad(lambda a: jnp.linalg.qr(a, "raw")[1].sum())(x)  # (as in JAX: raw is not differentiable)
    with pytest.raises(ValueError, match="UPLO must be one of None, 'L', or 'U', got X"):
        jnp.linalg.eigh(x, "X")
    with pytest.raises(ValueError, match=r"Invalid shapes for solve: \(2, 3, 3\), \(2, 3\)"):
        jnp.linalg.solve(np.stack([x, x]), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"a of shape \(3, 3\) and b of shape \(4,\) do not match"):
        jnp.linalg.solve(x, np.ones(4))
    with pytest.raises(ValueError, match="left hand array must be at least two dimensional"):
        jnp.linalg.solve(np.ones(3), np.ones(3))
    with pytest.raises(TypeError, match="3-dimensional array given. Array must be two-dimensional"):
        jnp.linalg.lstsq(np.ones((2, 3, 3)), np.ones(3))
    with pytest.raises(ValueError, match="Leading dimensions of input arrays must match"):
        jnp.linalg.lstsq(x, np.ones(4))
    with pytest.raises(TypeError, match="exponent must be an integer, got 1.5"):
        jnp.linalg.matrix_power(x, 1.5)
    with pytest.raises(TypeError, match="must be square"):
        jnp.linalg.matrix_power(np.ones((2, 3)), 2)
    with pytest.raises(errors.JAXTypeError):  # a traced exponent cannot pick the number of products
        ember.jit(jnp.linalg.matrix_power)(x, 2)
    with pytest.raises(ValueError, match="only one of rtol and rcond"):
        jnp.linalg.pinv(x, rtol=0.1, rcond=0.1)
    with pytest.raises(ValueError, match="Unknown slogdet method 'qr'"):
        jnp.linalg.slogdet(x, method="qr")
    with pytest.raises(ValueError, match=r"must have the same batch dimensions"):
        lax.linalg.triangular_solve(x, np.ones((2, 3, 3), np.float32), left_side=True)
    with pytest.raises(ValueError, match=r"cannot solve b of shape \(3, 2\) on the right side"):
        lax.linalg.triangular_solve(x, np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match=r"eigh needs square matrices, of shape \(\.\.\., n, n\), got shape \(2, 3\)"):
        lax.linalg.eigh(np.ones((2, 3), np.float32))


# --- QR with column pivoting, and the raw Householder form -------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 4), (4, 6), (3, 5, 4), (2, 3, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_pivoted_qr_is_lapacks_and_orders_the_columns(rng, shape, dtype):
    import scipy.linalg

    x = rng.standard_normal(shape).astype(dtype)
    if np.iscomplexobj(x):
        x = x + 1j * rng.standard_normal(shape).astype(dtype)
    for full in (True, False):
        q, r, p = ember.jit(lambda a, full=full: lax.linalg.qr(a, pivoting=True, full_matrices=full))(x)
        assert p.dtype == np.int32
        for index in np.ndindex(*shape[:-2]):
            mode = "full" if full else "economic"
            want_q, want_r, want_p = scipy.linalg.qr(x[index], mode=mode, pivoting=True)
            np.testing.assert_array_equal(p[index], want_p)
            tol = 1e-4
            assert_allclose(r[index], want_r, rtol=tol, atol=tol)
            assert_allclose(q[index] @ r[index], x[index][:, want_p], rtol=tol, atol=tol)
        diagonal = np.abs(np.diagonal(np.asarray(r), axis1=-2, axis2=-1))
        assert (np.diff(diagonal, axis=-1) <= 1e-5 * diagonal[..., :1]).all()  # geqp3: |r_ii| does not grow
    # vmap and scipy's form agree with the batch
    q, r, p = ember.vmap(lambda a: lax.linalg.qr(a, pivoting=True))(x.reshape(-1, *shape[-2:]))
    assert p.shape == (x.reshape(-1, *shape[-2:]).shape[0], shape[-1])
    r2, p2 = ember.scipy.linalg.qr(x.reshape(-1, *shape[-2:])[0], mode="r", pivoting=True)
    np.testing.assert_array_equal(p2, p[0])


def test_pivoted_qr_gradients_are_those_of_the_permuted_matrix(rng):
    # the column order is constant: the derivative is qr's of x[:, p]
    x = rng.standard_normal((5, 4))
    weights = np.arange(4.0)

    def loss(a):
        return jnp.sum(lax.linalg.qr(a, pivoting=True, full_matrices=False)[1] ** 2 * weights)

    _, _, p = lax.linalg.qr(x, pivoting=True)
    inverse = np.argsort(np.asarray(p))

    def permuted(b):  # the same loss on columns already in the pivoted order
        return jnp.sum(lax.linalg.qr(b, full_matrices=False)[1] ** 2 * weights)

    assert_allclose(ember.grad(loss)(x), np.asarray(ember.grad(permuted)(x[:, np.asarray(p)]))[:, inverse], rtol=1e-5)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
def test_raw_qr_is_numpys_householder_form(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    h, tau = ember.jit(lambda a: jnp.linalg.qr(a, mode="raw"))(x)
    want = [np.linalg.qr(x[i], mode="raw") for i in np.ndindex(*shape[:-2])]
    assert h.shape == shape[:-2] + shape[-2:][::-1] and tau.shape == shape[:-2] + (min(shape[-2:]),)
    for (want_h, want_tau), i in zip(want, np.ndindex(*shape[:-2])):
        assert_allclose(h[i], want_h, rtol=1e-4, atol=1e-5)
        assert_allclose(tau[i], want_tau, rtol=1e-4, atol=1e-5)


# --- schur, hessenberg, householder_product, lu_pivots_to_permutation, symmetric_product ---------------------------
def _random_matrices(rng: Any, shape: tuple, dtype: Any) -> np.ndarray:
    x = rng.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.normal(size=shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_schur_and_hessenberg_reconstruct_and_match_lapack(dtype):
    scipy_linalg = pytest.importorskip("scipy.linalg")
    x = _random_matrices(np.random.default_rng(0), (3, 5, 5), dtype)
    wide = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    for schur in (lax.linalg.schur, ember.jit(lax.linalg.schur), ember.vmap(lax.linalg.schur)):
        t, vs = (np.asarray(v) for v in schur(x))
        assert t.dtype == vs.dtype == dtype
        assert_allclose(vs @ t @ np.conj(np.swapaxes(vs, -1, -2)), x, rtol=1e-4, atol=1e-4)
        assert_allclose(np.tril(t, -2), np.zeros_like(t), atol=0)
        for m, tm in zip(x, t):  # the same eigenvalues as SciPy's
            assert_allclose(np.sort_complex(np.linalg.eigvals(tm)).astype(np.complex64),
                            np.sort_complex(scipy_linalg.eigvals(m.astype(wide))).astype(np.complex64),
                            rtol=1e-4, atol=1e-4)
    [t_only] = lax.linalg.schur(x[0], compute_schur_vectors=False)
    assert_allclose(t_only, t[0])
    for hessenberg in (lax.linalg.hessenberg, ember.jit(lax.linalg.hessenberg), ember.vmap(lax.linalg.hessenberg)):
        packed, taus = hessenberg(x)
        assert packed.shape == x.shape and taus.shape == (3, 4)
        h, q = scipy_linalg.hessenberg(x[1].astype(wide), calc_q=True)
        assert_allclose(np.triu(np.asarray(packed)[1], -1), h.astype(dtype), rtol=1e-4, atol=1e-4)
    with pytest.raises(NotImplementedError, match="sort feature"):
        lax.linalg.schur(x[0], sort_eig_vals=True)
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'schur' not implemented"):
        ember.grad(lambda m: lax.linalg.schur(m)[0].real.sum())(x[0])


def test_schur_hessenberg_householder_against_jax():
    jax_linalg = pytest.importorskip("jax.lax.linalg")
    x = _random_matrices(np.random.default_rng(1), (5, 5), np.float32)
    for ours, theirs in zip(lax.linalg.schur(x), jax_linalg.schur(x)):
        assert_allclose(ours, np.asarray(theirs), rtol=1e-5, atol=1e-5)
    for ours, theirs in zip(lax.linalg.hessenberg(x), jax_linalg.hessenberg(x)):
        assert_allclose(ours, np.asarray(theirs), rtol=1e-5, atol=1e-5)
    a, taus = lax.linalg.geqrf(x[:, :3])
    assert_allclose(lax.linalg.householder_product(a, taus),
                    np.asarray(jax_linalg.householder_product(np.asarray(a), np.asarray(taus))), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_householder_product_is_qr_q(dtype):
    x = _random_matrices(np.random.default_rng(2), (2, 6, 4), dtype)
    a, taus = lax.linalg.geqrf(x)
    q_expected = np.stack([np.linalg.qr(m)[0] for m in x])
    for product in (lax.linalg.householder_product, ember.jit(lax.linalg.householder_product),
                    ember.vmap(lax.linalg.householder_product)):
        assert_allclose(product(a, taus), q_expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="tall matrix"):
        lax.linalg.householder_product(np.ones((2, 3), dtype), np.ones(2, dtype))


def test_lu_pivots_to_permutation_as_lapack_swaps():
    pivots = np.array([[2, 2, 3], [0, 1, 2], [1, 0, 4]], np.int32)
    expected = np.array([[2, 0, 3, 1, 4], [0, 1, 2, 3, 4], [0, 1, 4, 3, 2]], np.int32)
    check_eager_and_jit(lambda p: lax.linalg.lu_pivots_to_permutation(p, 5), pivots, expected=expected)
    assert_allclose(ember.vmap(lambda p: lax.linalg.lu_pivots_to_permutation(p, 5))(pivots), expected)
    lu_, piv, perm = lax.linalg.lu(np.random.default_rng(3).normal(size=(4, 4)).astype(np.float32))
    assert_allclose(lax.linalg.lu_pivots_to_permutation(piv, 4), np.asarray(perm))
    with pytest.raises(ValueError, match="has to exceed"):
        lax.linalg.lu_pivots_to_permutation(pivots, 2)


def test_symmetric_product_as_syrk():
    rng = np.random.default_rng(4)
    a, c = rng.normal(size=(2, 3, 4)).astype(np.float32), rng.normal(size=(2, 3, 3)).astype(np.float32)
    full = 2 * a @ np.swapaxes(a, -1, -2) + 3 * c
    check_eager_and_jit(lambda a_, c_: lax.linalg.symmetric_product(a_, c_, alpha=2.0, beta=3.0), a, c,
                        expected=full, rtol=1e-5, atol=1e-5)
    mirrored = np.tril(full) + np.swapaxes(np.tril(full, -1), -1, -2)
    assert_allclose(lax.linalg.symmetric_product(a, c, alpha=2.0, beta=3.0, symmetrize_output=True), mirrored,
                    rtol=1e-5, atol=1e-5)
