"""Matrix decompositions and triangular solves (``jax.lax.linalg``): the primitives that
``jnp.linalg`` builds its solvers, inverses, determinants and spectral norms from.

Every primitive works on the last two dimensions and batches over the leading ones
(``(..., m, n)``). Operands must be float32 or float64 (the precisions of LAPACK, which
the reference implementation calls); complex matrices are not supported. Bad input is
not an error, as in JAX: a matrix that is not positive definite has a NaN Cholesky
factor, and a singular one an LU factor with a zero pivot, so solving with it gives
inf / NaN.
"""
from __future__ import annotations

from typing import Any

from ember import dtypes
from ember.core.avals import ShapedArray
from ember.lax import elementwise, shapes
from ember.lax.base import aval, primitive
from ember.lax.elementwise import convert_element_type

__all__ = ["cholesky", "eigh", "lu", "qr", "svd", "triangular_solve"]


def _check_matrices(name: str, *operands: ShapedArray, square: bool = False) -> None:
    for x in operands:
        if x.dtype not in (dtypes.float32, dtypes.float64):
            raise TypeError(f"{name} does not accept dtype {x.dtype}: it needs float32 or float64 operands "
                            "(convert with .astype(jnp.float32))")
        if x.ndim < 2:
            raise ValueError(f"{name} needs an array of shape (..., m, n), got shape {x.shape}")
        if square and x.shape[-1] != x.shape[-2]:
            raise ValueError(f"{name} needs square matrices, of shape (..., n, n), got shape {x.shape}")


def _batch_shape_and_rank(x: ShapedArray) -> tuple[tuple[int, ...], int, int, int]:
    *batch, m, n = x.shape
    return tuple(batch), m, n, min(m, n)


def matrix_transpose(x: Any) -> Any:
    """Swap the last two dimensions."""
    rank = aval(x).ndim
    return shapes.transpose(x, (*range(rank - 2), rank - 1, rank - 2))


def triangle(x: Any, k: int, lower: bool) -> Any:
    """``x`` with the entries above (``lower``) or below the ``k``-th diagonal of its last two
    dimensions zeroed: ``jnp.tril`` / ``jnp.triu``, and the derivative rules that need them."""
    x_aval = aval(x)
    rank, (rows, cols) = x_aval.ndim, x_aval.shape[-2:]
    shifted_rows = elementwise.add(shapes.broadcasted_iota(dtypes.int32, (rows, cols), 0), int(k))
    columns = shapes.broadcasted_iota(dtypes.int32, (rows, cols), 1)
    keep = elementwise.ge(shifted_rows, columns) if lower else elementwise.le(shifted_rows, columns)
    keep = shapes.broadcast_in_dim(keep, x_aval.shape, (rank - 2, rank - 1))
    return elementwise.select(keep, x, 0)


def symmetrize(x: Any) -> Any:
    """``(x + x.T) / 2`` over the last two dimensions."""
    return elementwise.mul(elementwise.add(x, matrix_transpose(x)), convert_element_type(0.5, aval(x).dtype))


def _operand(name: str, x: Any, symmetrize_input: bool) -> Any:
    """The matrix a symmetric decomposition reads, checked first (so errors name the decomposition)."""
    _check_matrices(name, aval(x), square=True)
    return symmetrize(x) if symmetrize_input else x


# --- cholesky ----------------------------------------------------------------------------------
def _cholesky_rule(x: ShapedArray) -> ShapedArray:
    _check_matrices("cholesky", x, square=True)
    return x.strip_weak_type()


cholesky_p = primitive("cholesky", _cholesky_rule)


def cholesky(x: Any, *, symmetrize_input: bool = True) -> Any:
    """The lower-triangular ``L`` with ``L @ L.T == x`` for a symmetric positive-definite ``x``.

    The primitive reads only the lower triangle of ``x``; ``symmetrize_input`` (the default)
    first averages ``x`` with its transpose, so that derivatives are symmetric. Where ``x``
    is not positive definite, the lower triangle of the result is NaN.
    """
    return cholesky_p.bind(_operand("cholesky", x, symmetrize_input))


# --- triangular_solve ----------------------------------------------------------------------------
def _triangular_solve_rule(a: ShapedArray, b: ShapedArray, *, left_side: bool, lower: bool, transpose_a: bool,
                           unit_diagonal: bool) -> ShapedArray:
    _check_matrices("triangular_solve", a, b)
    _check_matrices("triangular_solve", a, square=True)
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve: a and b must have one dtype, got {a.dtype} and {b.dtype}")
    if a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"triangular_solve: a of shape {a.shape} and b of shape {b.shape} must have the same "
                         "batch dimensions (all but the last two)")
    side, size = ("left", b.shape[-2]) if left_side else ("right", b.shape[-1])
    if size != a.shape[-1]:
        raise ValueError(f"triangular_solve: a of shape {a.shape} cannot solve b of shape {b.shape} on the {side} "
                         f"side: b's {'rows' if left_side else 'columns'} must number {a.shape[-1]}, not {size}")
    return b.strip_weak_type()


triangular_solve_p = primitive("triangular_solve", _triangular_solve_rule)


def triangular_solve(a: Any, b: Any, *, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False) -> Any:
    """``x`` with ``op(a) @ x == b`` (``left_side``) or ``x @ op(a) == b``, where ``op(a)`` is ``a``
    or ``a.T`` (``transpose_a``) and ``a`` is lower or upper triangular.

    Only ``a``'s triangle is read, and not its diagonal if ``unit_diagonal`` (taken as ones).
    A ``b`` with one dimension fewer than ``a`` is a (batch of) vector(s). ``conjugate_a``
    changes nothing for real matrices; it is accepted for JAX compatibility.
    """
    b_rank = aval(b).ndim
    vector = b_rank == aval(a).ndim - 1
    if vector:
        b = shapes.expand_dims(b, (b_rank if left_side else b_rank - 1,))
    out = triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower), transpose_a=bool(transpose_a),
                                  unit_diagonal=bool(unit_diagonal))
    return shapes.squeeze(out, (b_rank if left_side else b_rank - 1,)) if vector else out


# --- lu --------------------------------------------------------------------------------------------
def _lu_rule(x: ShapedArray) -> list[ShapedArray]:
    _check_matrices("lu", x)
    batch, m, _, k = _batch_shape_and_rank(x)
    return [x.strip_weak_type(), ShapedArray(batch + (k,), dtypes.int32), ShapedArray(batch + (m,), dtypes.int32)]


lu_p = primitive("lu", _lu_rule, multiple_results=True)


def lu(x: Any) -> tuple[Any, Any, Any]:
    """LU decomposition with partial pivoting of ``(..., m, n)`` matrices: ``(lu, pivots, permutation)``.

    With ``k = min(m, n)``, ``L`` (m x k: ``lu``'s strict lower triangle plus ones on the
    diagonal) and ``U`` (k x n: ``lu``'s upper triangle) satisfy
    ``x[..., permutation, :] == L @ U``. ``pivots`` (int32, ``(..., k)``) lists the row that
    step i swapped with row i (LAPACK's ``ipiv``, counted from 0).
    """
    lu_, pivots, permutation = lu_p.bind(x)
    return lu_, pivots, permutation


# --- qr ----------------------------------------------------------------------------------------------
def _qr_rule(x: ShapedArray, *, full_matrices: bool) -> list[ShapedArray]:
    _check_matrices("qr", x)
    batch, m, n, k = _batch_shape_and_rank(x)
    rows = m if full_matrices else k
    return [ShapedArray(batch + (m, rows), x.dtype), ShapedArray(batch + (rows, n), x.dtype)]


qr_p = primitive("qr", _qr_rule, multiple_results=True)


def qr(x: Any, *, pivoting: bool = False, full_matrices: bool = True) -> tuple[Any, Any]:
    """``(q, r)`` with ``q @ r == x``, ``q`` orthonormal and ``r`` upper triangular (diagonal of either
    sign, as LAPACK gives). ``full_matrices``: ``q`` is m x m and ``r`` m x n; else m x k and k x n."""
    if pivoting:
        raise NotImplementedError("lax.linalg.qr with pivoting=True (column pivoting) is not implemented")
    q, r = qr_p.bind(x, full_matrices=bool(full_matrices))
    return q, r


# --- eigh ----------------------------------------------------------------------------------------------
def _eigh_rule(x: ShapedArray, *, lower: bool) -> list[ShapedArray]:
    _check_matrices("eigh", x, square=True)
    return [x.strip_weak_type(), ShapedArray(x.shape[:-1], x.dtype)]


eigh_p = primitive("eigh", _eigh_rule, multiple_results=True)


def eigh(x: Any, *, lower: bool = True, symmetrize_input: bool = True) -> tuple[Any, Any]:
    """``(v, w)``: the eigenvectors (the columns of ``v``) and the eigenvalues, in ascending order,
    of a symmetric ``x``, so that ``x @ v == v * w``.

    The primitive reads only the lower (or, if not ``lower``, the upper) triangle;
    ``symmetrize_input`` (the default) first averages ``x`` with its transpose.
    """
    v, w = eigh_p.bind(_operand("eigh", x, symmetrize_input), lower=bool(lower))
    return v, w


# --- svd ---------------------------------------------------------------------------------------------------
def _svd_rule(x: ShapedArray, *, full_matrices: bool, compute_uv: bool) -> list[ShapedArray]:
    _check_matrices("svd", x)
    batch, m, n, k = _batch_shape_and_rank(x)
    s = ShapedArray(batch + (k,), x.dtype)
    if not compute_uv:
        return [s]
    u_cols, vh_rows = (m, n) if full_matrices else (k, k)
    return [ShapedArray(batch + (m, u_cols), x.dtype), s, ShapedArray(batch + (vh_rows, n), x.dtype)]


svd_p = primitive("svd", _svd_rule, multiple_results=True)


def svd(x: Any, *, full_matrices: bool = True, compute_uv: bool = True) -> Any:
    """The singular value decomposition ``x == u @ diag(s) @ vh``: ``(u, s, vh)``, or ``s`` alone
    without ``compute_uv``. Singular values are non-negative and descending. ``full_matrices``:
    ``u`` is m x m and ``vh`` n x n; else m x k and k x n (k = min(m, n))."""
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    return tuple(outs) if compute_uv else outs[0]
