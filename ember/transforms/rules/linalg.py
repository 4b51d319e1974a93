"""Derivatives and batching of the matrix decompositions and triangular solves.

The jvp rules are the standard matrix-calculus results (e.g. Giles, "An extended
collection of matrix derivative results for forward and reverse mode algorithmic
differentiation", 2008). Each tangent is built from triangular solves and products
with the primal factors, so reverse mode transposes it like any linear program;
``triangular_solve``, linear in its right-hand side, has the one transpose rule.

Decompositions that read one triangle of their operand (``cholesky``, ``eigh``) see
the symmetric (complex: Hermitian) matrix that triangle stands for, and so do their
tangents. For complex matrices the transposes of the real formulas become conjugate
transposes (``^H``); where a factor is fixed only up to a phase (QR's and the SVD's
diagonal, ``eig``'s eigenvectors), the rules differentiate the choice LAPACK makes,
as JAX's do. The transpose of ``triangular_solve`` does not conjugate (JAX's
convention for linear maps of complex values). Where the
derivative does not exist the rules give inf / NaN as JAX does (repeated eigenvalues
or singular values, singular matrices), or refuse (the extra columns of a complete QR
or SVD of a non-square matrix are not unique).

Every primitive batches over leading dimensions: vmap moves the batch axis to the front.
"""
from __future__ import annotations

from typing import Any

from ember import dtypes, lax
from ember.core.primitive import Primitive
from ember.lax import linalg
from ember.lax.base import aval
from ember.lax.linalg import adjoint, conj_if_complex, matrix_transpose
from ember.transforms.batching import batching_rules, move_batch_axis
from ember.transforms.jvp import defjvp, defzero, jvp_rules
from ember.transforms.rules.reductions import take_along_axis
from ember.transforms.tangents import Zero
from ember.transforms.transpose import is_undefined, transpose_rules


# --- array helpers on lax alone (this layer sits below ember.numpy) ------------------------------------
def _tril(x: Any, k: int = 0) -> Any:
    return linalg.triangle(x, k, lower=True)


def _triu(x: Any, k: int = 0) -> Any:
    return linalg.triangle(x, k, lower=False)


def _eye(n: int, dtype: Any, start: int = 0) -> Any:
    """The ``n x n`` identity of ``dtype`` (a strong type), with ones only from row / column ``start`` on."""
    rows = lax.broadcasted_iota(dtypes.int32, (n, n), 0)
    columns = lax.broadcasted_iota(dtypes.int32, (n, n), 1)
    ones = lax.eq(rows, columns)
    if start > 0:
        ones = lax.and_(ones, lax.ge(columns, int(start)))
    return lax.convert_element_type(ones, dtype)


def _matmul(a: Any, b: Any) -> Any:
    """``(..., m, k) @ (..., k, n)`` for operands with the same batch dimensions (as the factors and
    tangents here have), their dtypes promoted as ``jnp.matmul`` promotes them (weak types included)."""
    a_aval, b_aval = aval(a), aval(b)
    dt, weak = dtypes.promote_types_weak((a_aval.dtype, a_aval.weak_type), (b_aval.dtype, b_aval.weak_type))
    return lax.batch_matmul(lax.convert_element_type(a, dt, weak), lax.convert_element_type(b, dt, weak))


def _diagonal(x: Any) -> Any:
    """The diagonal of the last two dimensions of square matrices ``(..., n, n) -> (..., n)``: element
    (i, i) sits at i * (n + 1) of the flattened matrix, so it is one strided slice of a reshape."""
    x_aval = aval(x)
    n = x_aval.shape[-1]
    flat = lax.reshape(x, x_aval.shape[:-2] + (n * n,))
    last = x_aval.ndim - 2
    if n == 0:
        return lax.slice_in_dim(flat, 0, 0, axis=last)
    return lax.slice_in_dim(flat, 0, (n - 1) * (n + 1) + 1, n + 1, axis=last)


def _is_complex(x: Any) -> bool:
    return dtypes.is_complex(aval(x).dtype)


def _real_part(x: Any) -> Any:
    """The real part of a complex ``x``, in ``x``'s (complex) dtype; a real ``x`` itself."""
    return (x + lax.conj(x)) * 0.5 if _is_complex(x) else x


def _as_dtype_of(x: Any, like: Any) -> Any:
    return lax.convert_element_type(x, aval(like).dtype)


def _symmetric_from_triangle(t: Any, lower: bool) -> Any:
    """The symmetric (complex: Hermitian) matrix that the lower (or upper) triangle of ``t`` stands for,
    with the real part of its diagonal (LAPACK ignores the imaginary part)."""
    strict = _tril(t, -1) if lower else _triu(t, 1)
    return strict + adjoint(strict) + _real_part(t * _eye(aval(t).shape[-1], aval(t).dtype))


def _solve(a: Any, b: Any) -> Any:
    """``a^-1 b`` for square ``a`` and ``b`` of ``a``'s batch dimensions, by LU with partial pivoting."""
    lu, _, permutation = linalg.lu_p.bind(a)
    rank = aval(b).ndim
    rows = lax.broadcast_in_dim(permutation, aval(b).shape, tuple(range(rank - 1)))
    permuted = take_along_axis(b, rows, rank - 2)
    below = linalg.triangular_solve(lu, permuted, left_side=True, lower=True, unit_diagonal=True)
    return linalg.triangular_solve(lu, below, left_side=True, lower=False)


def _off_diagonal_reciprocal(differences: Any) -> Any:
    """``1 / differences`` off the diagonal and 0 on it (where the differences are zero)."""
    eye = _eye(aval(differences).shape[-1], aval(differences).dtype)
    return 1 / (differences + eye) - eye


def _fit(x: Any, size: int, axis: int) -> Any:
    """``x`` cut or zero-padded to ``size`` along ``axis``."""
    x_aval = aval(x)
    current = x_aval.shape[axis]
    if current >= size:
        return lax.slice_in_dim(x, 0, size, axis=axis)
    config = [(0, 0, 0)] * x_aval.ndim
    config[axis] = (0, size - current, 0)
    return lax.pad(x, 0.0, config)


# --- cholesky: dL = L Phi(L^-1 dA L^-H), Phi = the lower triangle with a halved diagonal ----------------
def _cholesky_jvp(primals: tuple, tangents: tuple) -> tuple:
    [x], [dx] = primals, tangents
    factor = linalg.cholesky_p.bind(x)
    da = _symmetric_from_triangle(dx, lower=True)
    right = linalg.triangular_solve(factor, da, left_side=False, lower=True, transpose_a=True,
                                    conjugate_a=True)  # dA L^-H
    inner = linalg.triangular_solve(factor, right, left_side=True, lower=True)  # L^-1 dA L^-T
    phi = _tril(inner) - 0.5 * inner * _eye(aval(x).shape[-1], aval(x).dtype)
    return factor, _matmul(factor, phi)


jvp_rules[linalg.cholesky_p] = _cholesky_jvp


# --- triangular_solve: op(a) x = b  ->  op(a) dx = db - op(da) x (on the right: dx op(a) = db - x op(da)) ---
def _solve_again(a: Any, b: Any, **params: Any) -> Any:
    return linalg.triangular_solve_p.bind(a, b, **params)


def _triangular_solve_a_tangent(da: Any, x: Any, a: Any, b: Any, *, left_side: bool, lower: bool, transpose_a: bool,
                                conjugate_a: bool, unit_diagonal: bool) -> Any:
    offset = 1 if unit_diagonal else 0  # the solve reads a's triangle, without its diagonal if unit_diagonal
    read = _tril(da, -offset) if lower else _triu(da, offset)
    read = conj_if_complex(read) if conjugate_a else read
    op_da = matrix_transpose(read) if transpose_a else read
    product = _matmul(op_da, x) if left_side else _matmul(x, op_da)
    return -_solve_again(a, product, left_side=left_side, lower=lower, transpose_a=transpose_a,
                         conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)


defjvp(linalg.triangular_solve_p, _triangular_solve_a_tangent,
       lambda db, x, a, b, **params: _solve_again(a, db, **params))


def _triangular_solve_transpose(ct: Any, a: Any, b: Any, *, left_side: bool, lower: bool, transpose_a: bool,
                                conjugate_a: bool, unit_diagonal: bool) -> list:
    """x = op(a)^-1 b has the transpose ct -> op(a)^-T ct (on the right: ct op(a)^-T); op(a)^T keeps
    op's conjugation."""
    if is_undefined(a):
        raise NotImplementedError("transpose of triangular_solve: it is linear in b only, but a is being "
                                  "differentiated too")
    return [None, _solve_again(a, ct, left_side=left_side, lower=lower, transpose_a=not transpose_a,
                               conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)]


transpose_rules[linalg.triangular_solve_p] = _triangular_solve_transpose


# --- lu: with P A = L U, L^-1 P dA U^-1 = L^-1 dL + dU U^-1 (strictly lower + upper) --------------------
def _lu_jvp(primals: tuple, tangents: tuple) -> tuple:
    """L and U are completed to square unit-lower m x m and upper n x n matrices (identity in the
    added rows / columns), which makes the formula hold for rectangular matrices too."""
    [x], [dx] = primals, tangents
    lu, pivots, permutation = linalg.lu_p.bind(x)
    x_aval = aval(x)
    rank, (m, n) = x_aval.ndim, x_aval.shape[-2:]
    lower = _tril(_fit(lu, m, rank - 1), -1) + _eye(m, x_aval.dtype)
    upper = _triu(_fit(lu, n, rank - 2)) + _eye(n, x_aval.dtype, start=min(m, n))
    rows = lax.broadcast_in_dim(permutation, x_aval.shape, tuple(range(rank - 1)))
    permuted = take_along_axis(dx, rows, rank - 2)  # P dA
    solved = linalg.triangular_solve(lower, permuted, left_side=True, lower=True, unit_diagonal=True)
    solved = linalg.triangular_solve(upper, solved, left_side=False, lower=False)
    d_lu = _matmul(lower, _tril(solved, -1)) + _matmul(_triu(solved), upper)
    return [lu, pivots, permutation], [d_lu, Zero(aval(pivots)), Zero(aval(permutation))]


jvp_rules[linalg.lu_p] = _lu_jvp


# --- qr ------------------------------------------------------------------------------------------------
def _qr_jvp(primals: tuple, tangents: tuple, *, full_matrices: bool) -> tuple:
    """For A1 = Q R1 (the first k = min(m, n) columns): with C = Q^H dA1 R1^-1 and Omega the
    anti-Hermitian matrix with C's strict lower triangle (and, for complex matrices, the imaginary
    part of C's diagonal: LAPACK's R has a real diagonal), dQ = Q (Omega - C) + dA1 R1^-1 and
    dR1 = (C - Omega) R1. The remaining columns A2 = Q R2 (wide matrices) give dR2 = Q^H (dA2 - dQ R2)."""
    [x], [dx] = primals, tangents
    m, n = aval(x).shape[-2:]
    if full_matrices and m > n:
        raise NotImplementedError(
            f"the derivative of a complete QR decomposition (full_matrices=True, mode='complete') of a {m} x {n} "
            "matrix is not defined: the extra columns of q are not unique. Use the reduced decomposition.")
    q, r = linalg.qr_p.bind(x, full_matrices=full_matrices)
    k, last = min(m, n), aval(x).ndim - 1
    r1 = lax.slice_in_dim(r, 0, k, axis=last)
    dx_rinv = linalg.triangular_solve(r1, lax.slice_in_dim(dx, 0, k, axis=last), left_side=False, lower=False)
    c = _matmul(adjoint(q), dx_rinv)
    omega = _tril(c, -1) - adjoint(_tril(c, -1))
    if _is_complex(c):
        diagonal = c * _eye(k, aval(c).dtype)
        omega = omega + (diagonal - _real_part(diagonal))
    dq = _matmul(q, omega - c) + dx_rinv
    dr = _matmul(c - omega, r1)
    if n > k:
        r2, dx2 = lax.slice_in_dim(r, k, n, axis=last), lax.slice_in_dim(dx, k, n, axis=last)
        dr = lax.concatenate([dr, _matmul(adjoint(q), dx2 - _matmul(dq, r2))], last)
    return [q, r], [dq, dr]


jvp_rules[linalg.qr_p] = _qr_jvp


# --- eigh: dw = diag(V^H dA V), dV = V (F * V^H dA V) with F[i, j] = 1 / (w[j] - w[i]) ---------------------
def _eigh_jvp(primals: tuple, tangents: tuple, *, lower: bool) -> tuple:
    [x], [dx] = primals, tangents
    v, w = linalg.eigh_p.bind(x, lower=lower)
    rotated = _matmul(_matmul(adjoint(v), _symmetric_from_triangle(dx, lower)), v)
    gaps = _as_dtype_of(_off_diagonal_reciprocal(w[..., None, :] - w[..., :, None]), v)
    dw = _diagonal(rotated)
    return [v, w], [_matmul(v, gaps * rotated), lax.real(dw) if _is_complex(dw) else dw]


jvp_rules[linalg.eigh_p] = _eigh_jvp


# --- svd: with dP = U^H dA V, ds = re diag(dP) and F[i, j] = 1 / (s[j]^2 - s[i]^2): --------------------------
#     dU = U (F * (dP S + S dP^H) + i Im diag(dP) S^-1) + (I - U U^H) dA V S^-1,
#     dV = V (F * (S dP + dP^H S)) + (I - V V^H) dA^H U S^-1
#     (the imaginary diagonal term, zero for real matrices, is the phase that LAPACK's choice gives U)
def _svd_jvp(primals: tuple, tangents: tuple, *, full_matrices: bool, compute_uv: bool) -> tuple:
    [x], [dx] = primals, tangents
    m, n = aval(x).shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(
            f"the derivative of svd with full_matrices=True of a {m} x {n} matrix is not defined: the extra "
            "singular vectors are not unique. Use full_matrices=False.")
    u, s, vh = linalg.svd_p.bind(x, full_matrices=False, compute_uv=True)
    v = adjoint(vh)
    projected = _matmul(_matmul(adjoint(u), dx), v)
    ds = _diagonal(projected)
    ds = lax.real(ds) if _is_complex(ds) else ds
    if not compute_uv:
        return [s], [ds]
    s_row, s_column = s[..., None, :], s[..., :, None]
    gaps = _as_dtype_of(_off_diagonal_reciprocal((s_row - s_column) * (s_row + s_column)), u)
    s_row, s_column = _as_dtype_of(s_row, u), _as_dtype_of(s_column, u)
    projected_s, s_projected = projected * s_row, s_column * projected
    inner = gaps * (projected_s + adjoint(projected_s))
    if _is_complex(projected):
        k = aval(s).shape[-1]
        zero_s = lax.eq(s, lax.convert_element_type(0, aval(s).dtype))
        ones = lax.convert_element_type(lax.broadcast_in_dim(1, aval(s).shape, ()), aval(s).dtype)
        s_inverse = _as_dtype_of(lax.select(zero_s, ones * 0, 1 / lax.select(zero_s, ones, s)), u)
        diagonal = projected * _eye(k, aval(u).dtype)
        inner = inner + (diagonal - _real_part(diagonal)) * s_inverse[..., None, :]
    du = _matmul(u, inner)
    dv = _matmul(v, gaps * (s_projected + adjoint(s_projected)))
    if m > n:  # the part of dA V outside the span of U
        dx_v = _matmul(dx, v)
        du = du + (dx_v - _matmul(u, _matmul(adjoint(u), dx_v))) / s_row
    if n > m:
        dxh_u = _matmul(adjoint(dx), u)
        dv = dv + (dxh_u - _matmul(v, _matmul(vh, dxh_u))) / s_row
    return [u, s, vh], [du, ds, adjoint(dv)]


jvp_rules[linalg.svd_p] = _svd_jvp


# --- eig: dw = diag(V^-1 dA V); dV = V (F * V^-1 dA V) + V diag(c), F[i, j] = 1 / (w[j] - w[i]) --------------
def _eig_vectors_jvp(w: Any, v: Any, da: Any) -> tuple[Any, Any]:
    """First-order perturbation of distinct eigenvalues and their eigenvectors. Each eigenvector is
    fixed up to a complex factor; ``c`` keeps LAPACK's normalization (unit 2-norm, a real component
    of largest magnitude), as JAX's rule does."""
    rotated = _matmul(_solve(v, da), v)
    dw = _diagonal(rotated)
    gaps = _off_diagonal_reciprocal(w[..., None, :] - w[..., :, None])
    change = _matmul(v, gaps * rotated)
    rows = aval(v).ndim - 2
    largest = lax.argmax(lax.abs(v), rows, dtypes.int32)
    where_largest = lax.broadcast_in_dim(largest, aval(v).shape, tuple(d for d in range(rows + 2) if d != rows))
    mask = lax.convert_element_type(lax.eq(lax.broadcasted_iota(dtypes.int32, aval(v).shape, rows), where_largest),
                                    aval(v).dtype)
    norm_part = lax.neg(lax.real(lax.reduce_sum(lax.conj(v) * change, (rows,))))
    phase_part = lax.neg(lax.imag(lax.reduce_sum(mask * change, (rows,)))) / lax.real(
        lax.reduce_sum(mask * v, (rows,)))
    c = lax.complex(norm_part, phase_part)
    return dw, change + v * lax.broadcast_in_dim(c, aval(v).shape, tuple(d for d in range(rows + 2) if d != rows))


def _eig_jvp(primals: tuple, tangents: tuple, *, compute_left_eigenvectors: bool, compute_right_eigenvectors: bool,
             enable_eigvec_derivs: bool) -> tuple:
    [x], [dx] = primals, tangents
    if (compute_left_eigenvectors or compute_right_eigenvectors) and not enable_eigvec_derivs:
        raise NotImplementedError(
            "Derivatives of non-symmetric eigenvectors are only valid under assumptions on the input that "
            "cannot be checked (distinct eigenvalues; no eigenvector with two components tied for the largest "
            "magnitude). Pass enable_eigvec_derivs=True to lax.linalg.eig to opt in.")
    outs = linalg.eig_p.bind(x, compute_left_eigenvectors=compute_left_eigenvectors,
                             compute_right_eigenvectors=True, enable_eigvec_derivs=enable_eigvec_derivs)
    w, vr = outs[0], outs[-1]
    da = _as_dtype_of(dx, vr)
    if not (compute_left_eigenvectors or compute_right_eigenvectors):
        return [w], [_diagonal(_matmul(_solve(vr, da), vr))]
    dw, dvr = _eig_vectors_jvp(w, vr, da)
    primal_out, tangent_out = [w], [dw]
    if compute_left_eigenvectors:  # the left eigenvectors are the right ones of x^H, of eigenvalues conj(w)
        _, dvl = _eig_vectors_jvp(lax.conj(w), outs[1], adjoint(da))
        primal_out.append(outs[1])
        tangent_out.append(dvl)
    if compute_right_eigenvectors:
        primal_out.append(vr)
        tangent_out.append(dvr)
    return primal_out, tangent_out


jvp_rules[linalg.eig_p] = _eig_jvp


# --- batching --------------------------------------------------------------------------------------------------
def _batch_at_front(p: Primitive):
    def rule(axis_size: int, values: tuple, dims: tuple, **params: Any) -> tuple[Any, Any]:
        out = p.bind(*(move_batch_axis(v, d, axis_size) for v, d in zip(values, dims)), **params)
        return out, ([0] * len(out) if p.multiple_results else 0)

    return rule


batching_rules.update({p: _batch_at_front(p) for p in (
    linalg.cholesky_p, linalg.triangular_solve_p, linalg.lu_p, linalg.qr_p, linalg.eigh_p, linalg.svd_p,
    linalg.eig_p, linalg.geqrf_p, linalg.geqp3_p, linalg.schur_p, linalg.hessenberg_p, linalg.householder_product_p,
    linalg.lu_pivots_to_permutation_p)})
defzero(linalg.lu_pivots_to_permutation_p)  # (integers in, integers out)
