"""Reference rules for the matrix decompositions and triangular solves.

QR, eigh and SVD call NumPy's LAPACK-backed ``np.linalg``; Cholesky too, after
reading the lower triangle. NumPy raises where JAX returns NaN (a matrix that is
not positive definite, an eigensolver or SVD that does not converge), so those
matrices get NaN results instead. LU and triangular solves are written out here:
NumPy has no LU, and its solver refuses singular matrices, where these rules let
IEEE arithmetic produce the inf / NaN that JAX gives.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ember.backends.reference import impl_rules
from ember.lax import linalg


def _lower_triangle_mask(n: int, diagonal: bool = True) -> np.ndarray:
    return np.tri(n, dtype=bool, k=0 if diagonal else -1)


def _nan_where_lapack_fails(decompose: Callable[[np.ndarray], Sequence[np.ndarray]], x: np.ndarray,
                            out_shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    """``decompose`` (batched) of ``x``; if NumPy raises for some matrix, each matrix is
    decomposed alone and the failing ones give NaN results of their (per-matrix) shapes."""
    try:
        return list(decompose(x))
    except np.linalg.LinAlgError:
        pass
    batch = x.shape[:-2]
    outs = [np.empty(batch + shape, x.dtype) for shape in out_shapes]
    for index in np.ndindex(*batch):
        try:
            results = decompose(x[index])
        except np.linalg.LinAlgError:
            results = [np.full(shape, np.nan, x.dtype) for shape in out_shapes]
        for out, result in zip(outs, results):
            out[index] = result
    return outs


def _cholesky(x: np.ndarray) -> np.ndarray:
    n = x.shape[-1]
    lower = np.where(_lower_triangle_mask(n), x, 0)
    symmetric = lower + np.swapaxes(np.where(_lower_triangle_mask(n, diagonal=False), x, 0), -1, -2)
    [factor] = _nan_where_lapack_fails(lambda m: [np.linalg.cholesky(m)], symmetric, [(n, n)])
    return np.where(_lower_triangle_mask(n), factor, 0)  # NaN only in the lower triangle, as JAX


def _substitute(m: np.ndarray, c: np.ndarray, lower: bool, unit_diagonal: bool) -> np.ndarray:
    """Solve ``m @ x == c`` for triangular ``m`` (zero outside its triangle) one row at a time.

    Row i only combines rows of x already solved: the others are still zero, and ``m`` is
    zero where it would meet them, so no ``0 * inf`` arises from the unread triangle.
    """
    n = m.shape[-1]
    x = np.zeros(np.broadcast_shapes(m.shape[:-2], c.shape[:-2]) + c.shape[-2:], c.dtype)
    for i in (range(n) if lower else reversed(range(n))):
        row = c[..., i, :] - np.einsum("...j,...jk->...k", m[..., i, :], x)
        x[..., i, :] = row if unit_diagonal else row / m[..., i, i, None]
    return x


def _triangular_solve(a: np.ndarray, b: np.ndarray, *, left_side: bool, lower: bool, transpose_a: bool,
                      unit_diagonal: bool) -> np.ndarray:
    n = a.shape[-1]
    keep = _lower_triangle_mask(n, not unit_diagonal)
    triangle = np.where(keep if lower else keep.T, a, 0)
    op_a = np.swapaxes(triangle, -1, -2) if transpose_a else triangle
    op_is_lower = lower != transpose_a
    if left_side:
        return _substitute(op_a, b, op_is_lower, unit_diagonal)
    # x @ op(a) == b  <=>  op(a).T @ x.T == b.T
    solved = _substitute(np.swapaxes(op_a, -1, -2), np.swapaxes(b, -1, -2), not op_is_lower, unit_diagonal)
    return np.swapaxes(solved, -1, -2)


def _lu(x: np.ndarray) -> list[np.ndarray]:
    """Gaussian elimination with partial pivoting (LAPACK's getrf, unblocked), all matrices at once.
    A zero pivot (its column is zero below the diagonal) is left unscaled, as LAPACK does."""
    *batch, m, n = x.shape
    count = int(np.prod(batch, dtype=np.int64))
    a = x.reshape(count, m, n).copy()
    k = min(m, n)
    pivots = np.zeros((count, k), np.int32)
    permutation = np.tile(np.arange(m, dtype=np.int32), (count, 1))
    every = np.arange(count)
    for j in range(k):
        p = j + np.argmax(np.abs(a[:, j:, j]), axis=1)
        pivots[:, j] = p
        a[every, j], a[every, p] = a[every, p], a[every, j].copy()
        permutation[every, j], permutation[every, p] = permutation[every, p], permutation[every, j].copy()
        pivot = a[:, j, j, None]
        a[:, j + 1:, j] = np.where(pivot != 0, a[:, j + 1:, j] / np.where(pivot != 0, pivot, 1), a[:, j + 1:, j])
        a[:, j + 1:, j + 1:] -= a[:, j + 1:, j, None] * a[:, None, j, j + 1:]
    return [a.reshape(x.shape), pivots.reshape(*batch, k), permutation.reshape(*batch, m)]


def _qr(x: np.ndarray, *, full_matrices: bool) -> list[np.ndarray]:
    q, r = np.linalg.qr(x, mode="complete" if full_matrices else "reduced")
    return [q, r]


def _eigh(x: np.ndarray, *, lower: bool) -> list[np.ndarray]:
    n = x.shape[-1]
    w, v = _nan_where_lapack_fails(lambda m: np.linalg.eigh(m, UPLO="L" if lower else "U"), x, [(n,), (n, n)])
    return [v, w]


def _svd(x: np.ndarray, *, full_matrices: bool, compute_uv: bool) -> list[np.ndarray]:
    m, n = x.shape[-2:]
    k = min(m, n)
    if not compute_uv:
        return _nan_where_lapack_fails(lambda a: [np.linalg.svd(a, compute_uv=False)], x, [(k,)])
    shapes = [(m, m), (k,), (n, n)] if full_matrices else [(m, k), (k,), (k, n)]
    return _nan_where_lapack_fails(lambda a: np.linalg.svd(a, full_matrices=full_matrices), x, shapes)


impl_rules.update({
    linalg.cholesky_p: _cholesky,
    linalg.triangular_solve_p: _triangular_solve,
    linalg.lu_p: _lu,
    linalg.qr_p: _qr,
    linalg.eigh_p: _eigh,
    linalg.svd_p: _svd,
})
