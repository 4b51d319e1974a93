"""Reference rules for the matrix decompositions and triangular solves.

QR, eigh and SVD call NumPy's LAPACK-backed ``np.linalg``; Cholesky too, after
reading the lower triangle. NumPy raises where JAX returns NaN (a matrix that is
not positive definite, an eigensolver or SVD that does not converge), so those
matrices get NaN results instead. LU and triangular solves are written out here:
NumPy has no LU, and its solver refuses singular matrices, where these rules let
IEEE arithmetic produce the inf / NaN that JAX gives.

``eig`` calls SciPy's ``geev`` (the LAPACK that JAX's CPU kernels call too): NumPy's
``eig`` has no left eigenvectors, and gives real arrays when all eigenvalues are real,
where JAX's are always complex. Complex matrices take the same routes (LAPACK's c / z
routines); LU pivots on ``|re| + |im|``, as LAPACK's ``getrf`` does.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ember.backends.reference import impl_rules
from ember.lax import linalg


def _lower_triangle_mask(n: int, diagonal: bool = True) -> np.ndarray:
    return np.tri(n, dtype=bool, k=0 if diagonal else -1)


def _nan_where_lapack_fails(decompose: Callable[[np.ndarray], Sequence[np.ndarray]], x: np.ndarray,
                            out_shapes: Sequence[tuple[int, ...]],
                            out_dtypes: Sequence[np.dtype] | None = None) -> list[np.ndarray]:
    """``decompose`` (batched) of ``x``; if NumPy raises for some matrix, each matrix is
    decomposed alone and the failing ones give NaN results of their (per-matrix) shapes
    (and dtypes: ``x``'s unless given)."""
    try:
        return list(decompose(x))
    except np.linalg.LinAlgError:
        pass
    batch = x.shape[:-2]
    out_dtypes = out_dtypes or [x.dtype] * len(out_shapes)
    outs = [np.empty(batch + shape, dt) for shape, dt in zip(out_shapes, out_dtypes)]
    for index in np.ndindex(*batch):
        try:
            results = decompose(x[index])
        except np.linalg.LinAlgError:
            results = [np.full(shape, np.nan, dt) for shape, dt in zip(out_shapes, out_dtypes)]
        for out, result in zip(outs, results):
            out[index] = result
    return outs


def _hermitian_from_lower(x: np.ndarray) -> np.ndarray:
    """The Hermitian (real: symmetric) matrix that ``x``'s lower triangle and the real part of its
    diagonal stand for: what LAPACK's ``potrf`` / ``heevd`` read."""
    n = x.shape[-1]
    strict = np.where(_lower_triangle_mask(n, diagonal=False), x, 0)
    diagonal = np.where(np.eye(n, dtype=bool), x.real, 0)
    return (strict + np.conj(np.swapaxes(strict, -1, -2)) + diagonal).astype(x.dtype)


def _cholesky(x: np.ndarray) -> np.ndarray:
    n = x.shape[-1]
    symmetric = _hermitian_from_lower(x)
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
                      conjugate_a: bool, unit_diagonal: bool) -> np.ndarray:
    n = a.shape[-1]
    keep = _lower_triangle_mask(n, not unit_diagonal)
    triangle = np.where(keep if lower else keep.T, a, 0)
    triangle = np.conj(triangle) if conjugate_a else triangle
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
    magnitude = (lambda v: np.abs(v.real) + np.abs(v.imag)) if np.iscomplexobj(a) else np.abs
    for j in range(k):
        p = j + np.argmax(magnitude(a[:, j:, j]), axis=1)
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


def _lapack():
    """SciPy's LAPACK wrappers, imported when a program first needs one (eig, schur, geqrf, ...):
    importing SciPy's linalg takes ~0.45 s, which ember's import does not pay."""
    from scipy.linalg import lapack
    return lapack


def _householder(name: str) -> Callable:
    """LAPACK's geqrf / geqp3 over a batch (SciPy's wrappers); the pivots from 0."""
    def rule(x: np.ndarray) -> list[np.ndarray]:
        lapack = _lapack()
        *batch, m, n = x.shape
        k = min(m, n)
        a = np.empty(x.shape, x.dtype)
        taus = np.empty((*batch, k), x.dtype)
        pivots = np.empty((*batch, n), np.int32)
        routine = lapack.get_lapack_funcs(name, (x,))
        for index in np.ndindex(*batch):
            if m == 0 or n == 0:
                pivots[index] = np.arange(n)
                a[index] = x[index]
                continue
            if name == "geqp3":
                h, jpvt, tau, _, _ = routine(np.array(x[index], order="F"))
                pivots[index] = jpvt - 1
            else:
                h, tau, _, _ = routine(np.array(x[index], order="F"))
            a[index], taus[index] = h, tau[:k]
        return [a, pivots, taus] if name == "geqp3" else [a, taus]
    return rule


def _eigh(x: np.ndarray, *, lower: bool) -> list[np.ndarray]:
    n = x.shape[-1]
    real = x.real.dtype
    w, v = _nan_where_lapack_fails(lambda m: np.linalg.eigh(m, UPLO="L" if lower else "U"), x, [(n,), (n, n)],
                                   [real, x.dtype])
    return [v, w]


def _svd(x: np.ndarray, *, full_matrices: bool, compute_uv: bool) -> list[np.ndarray]:
    m, n = x.shape[-2:]
    k = min(m, n)
    real = x.real.dtype
    if not compute_uv:
        return _nan_where_lapack_fails(lambda a: [np.linalg.svd(a, compute_uv=False)], x, [(k,)], [real])
    shapes = [(m, m), (k,), (n, n)] if full_matrices else [(m, k), (k,), (k, n)]
    return _nan_where_lapack_fails(lambda a: np.linalg.svd(a, full_matrices=full_matrices), x, shapes,
                                   [x.dtype, real, x.dtype])


def _unpack_real_eigenvectors(wi: np.ndarray, v: np.ndarray, complex_type: np.dtype) -> np.ndarray:
    """The complex eigenvectors of real ``geev``'s packed columns: a conjugate pair (``wi[j] > 0``,
    ``wi[j + 1] < 0``: LAPACK lists the one with the positive imaginary part first) shares columns
    j (real part) and j + 1 (imaginary part). All pairs at once (a loop over the columns took
    0.5 ms of the 16 of a 256 x 256 ``eig``)."""
    out = v.astype(complex_type)
    first = np.flatnonzero(wi[:-1] > 0)
    real, imag = v[:, first], v[:, first + 1]
    out[:, first] = real + 1j * imag
    out[:, first + 1] = real - 1j * imag
    return out


def _eig(x: np.ndarray, *, compute_left_eigenvectors: bool, compute_right_eigenvectors: bool,
         enable_eigvec_derivs: bool) -> list[np.ndarray]:
    lapack = _lapack()
    *batch, n, _ = x.shape
    complex_type = np.result_type(x.dtype, np.complex64)
    w = np.empty((*batch, n), complex_type)
    vl = np.empty(x.shape if compute_left_eigenvectors else x.shape[:-2] + (0, 0), complex_type)
    vr = np.empty(x.shape if compute_right_eigenvectors else x.shape[:-2] + (0, 0), complex_type)
    geev, geev_lwork = lapack.get_lapack_funcs(("geev", "geev_lwork"), (x,))
    # the blocked algorithm's workspace (the wrapper's default is the unblocked minimum: 5x slower at n = 256)
    work, _ = geev_lwork(max(n, 1), compute_vl=compute_left_eigenvectors, compute_vr=compute_right_eigenvectors)
    lwork = max(int(np.ceil(np.real(work))), 4 * max(n, 1))
    for index in np.ndindex(*batch):
        a = np.array(x[index], order="F")
        if n == 0:
            continue
        if not np.isfinite(a).all():  # LAPACK's behaviour on inf / NaN is undefined; JAX's result is NaN
            w[index], vl[index], vr[index] = np.nan, np.nan, np.nan
            continue
        if np.iscomplexobj(a):
            values, left, right, info = geev(a, compute_vl=compute_left_eigenvectors,
                                             compute_vr=compute_right_eigenvectors, lwork=lwork, overwrite_a=True)
        else:
            wr, wi, left, right, info = geev(a, compute_vl=compute_left_eigenvectors,
                                             compute_vr=compute_right_eigenvectors, lwork=lwork, overwrite_a=True)
            values = wr + 1j * wi
            left = _unpack_real_eigenvectors(wi, left, complex_type) if compute_left_eigenvectors else left
            right = _unpack_real_eigenvectors(wi, right, complex_type) if compute_right_eigenvectors else right
        if info != 0:
            w[index], vl[index], vr[index] = np.nan, np.nan, np.nan
            continue
        w[index] = values
        if compute_left_eigenvectors:
            vl[index] = left
        if compute_right_eigenvectors:
            vr[index] = right
    return [w] + [vl] * compute_left_eigenvectors + [vr] * compute_right_eigenvectors


def _schur(x: np.ndarray, *, compute_schur_vectors: bool) -> list[np.ndarray]:
    """LAPACK's gees over the batch, unsorted; a matrix with inf / NaN or whose QR iteration fails
    gives NaN (JAX's result)."""
    lapack = _lapack()
    *batch, n, _ = x.shape
    t = np.empty(x.shape, x.dtype)
    vs = np.empty(x.shape, x.dtype)
    gees = lapack.get_lapack_funcs("gees", (x,))
    for index in np.ndindex(*batch):
        if n == 0:
            continue
        a = np.array(x[index], order="F")
        if not np.isfinite(a).all():
            t[index], vs[index] = np.nan, np.nan
            continue
        outs = gees(lambda *_: False, a, compute_v=int(compute_schur_vectors), sort_t=0, overwrite_a=True)
        info = outs[-1]
        t[index], vs[index] = (outs[0], outs[-3]) if info == 0 else (np.nan, np.nan)
    return [t, vs] if compute_schur_vectors else [t]


def _hessenberg(x: np.ndarray) -> list[np.ndarray]:
    """LAPACK's gehrd over the batch: the packed form and the n - 1 reflector scales."""
    lapack = _lapack()
    *batch, n, _ = x.shape
    packed = np.empty(x.shape, x.dtype)
    taus = np.zeros((*batch, max(n - 1, 0)), x.dtype)
    gehrd = lapack.get_lapack_funcs("gehrd", (x,))
    for index in np.ndindex(*batch):
        if n <= 1:
            packed[index] = x[index]
            continue
        h, tau, _ = gehrd(np.array(x[index], order="F"), lo=0, hi=n - 1)
        packed[index], taus[index] = h, tau[:n - 1]
    return [packed, taus]


def _householder_product(a: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """LAPACK's orgqr (complex: ungqr) over the batch: the first n columns of the reflectors' product."""
    lapack = _lapack()
    *batch, m, n = a.shape
    out = np.empty(a.shape, a.dtype)
    routine = lapack.get_lapack_funcs("ungqr" if np.iscomplexobj(a) else "orgqr", (a,))
    for index in np.ndindex(*batch):
        if n == 0:
            continue
        k = taus.shape[-1]
        tau = np.zeros(n, a.dtype)
        tau[:k] = taus[index]  # (reflectors past k are the identity: tau 0)
        out[index] = routine(np.array(a[index], order="F"), tau)[0]
    return out


def _lu_pivots_to_permutation(pivots: np.ndarray, *, permutation_size: int) -> np.ndarray:
    *batch, k = pivots.shape
    permutation = np.broadcast_to(np.arange(permutation_size, dtype=np.int32), (*batch, permutation_size)).copy()
    for index in np.ndindex(*batch):
        row = permutation[index]
        for i, p in enumerate(pivots[index]):
            row[i], row[p] = row[p], row[i]
    return permutation


impl_rules.update({
    linalg.cholesky_p: _cholesky,
    linalg.triangular_solve_p: _triangular_solve,
    linalg.lu_p: _lu,
    linalg.qr_p: _qr,
    linalg.geqrf_p: _householder("geqrf"),
    linalg.geqp3_p: _householder("geqp3"),
    linalg.eigh_p: _eigh,
    linalg.svd_p: _svd,
    linalg.eig_p: _eig,
    linalg.schur_p: _schur,
    linalg.hessenberg_p: _hessenberg,
    linalg.householder_product_p: _householder_product,
    linalg.lu_pivots_to_permutation_p: _lu_pivots_to_permutation,
})
