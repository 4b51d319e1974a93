"""Matrix decompositions and triangular solves (``jax.lax.linalg``): the primitives that
``jnp.linalg`` builds its solvers, inverses, determinants and spectral norms from.

Every primitive works on the last two dimensions and batches over the leading ones
(``(..., m, n)``). Operands are float32, float64, complex64 or complex128 (the precisions
of LAPACK, which the reference implementation calls). For complex matrices, transposes
become conjugate transposes where the decomposition has them, as in LAPACK and JAX:
``cholesky`` gives ``L @ L^H``, ``eigh`` reads a Hermitian matrix and gives real
eigenvalues, ``svd`` real singular values. Bad input is not an error, as in JAX: a
matrix that is not positive definite has a NaN Cholesky factor, and a singular one an
LU factor with a zero pivot, so solving with it gives inf / NaN.
"""
from __future__ import annotations

import enum
from typing import Any

from ember import dtypes
from ember.core.avals import ShapedArray
from ember.lax import elementwise, shapes
from ember.lax.base import aval, primitive
from ember.lax.dot import dot_general
from ember.lax.elementwise import convert_element_type
from ember.lax.indexing import GatherDimensionNumbers, gather
from ember.lax.stop_gradient import stop_gradient

__all__ = ["EigImplementation", "cholesky", "eig", "eigh", "hessenberg", "householder_product", "lu",
           "lu_pivots_to_permutation", "qr", "schur", "svd", "symmetric_product", "triangular_solve"]

_LAPACK_DTYPES = (dtypes.float32, dtypes.float64, dtypes.complex64, dtypes.complex128)


def _check_matrices(name: str, *operands: ShapedArray, square: bool = False) -> None:
    for x in operands:
        if x.dtype not in _LAPACK_DTYPES:
            raise TypeError(f"{name} does not accept dtype {x.dtype}: it needs float32 or float64 operands, or "
                            "complex64 or complex128 (convert with .astype(jnp.float32))")
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


def conj_if_complex(x: Any) -> Any:
    """The complex conjugate of a complex ``x``; a real ``x`` itself (``lax.conj`` would make it complex)."""
    return elementwise.conj(x) if dtypes.is_complex(aval(x).dtype) else x


def adjoint(x: Any) -> Any:
    """The conjugate transpose of the last two dimensions (the transpose of real matrices)."""
    return conj_if_complex(matrix_transpose(x))


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
    """``(x + x^H) / 2`` over the last two dimensions (``x^H``: the conjugate transpose)."""
    return elementwise.mul(elementwise.add(x, adjoint(x)), convert_element_type(0.5, aval(x).dtype))


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
    """The lower-triangular ``L`` with ``L @ L^H == x`` for a Hermitian (real: symmetric)
    positive-definite ``x``.

    The primitive reads only the lower triangle of ``x`` (and the real part of its diagonal);
    ``symmetrize_input`` (the default) first averages ``x`` with its conjugate transpose, so
    that derivatives are Hermitian. Where ``x`` is not positive definite, the lower triangle
    of the result is NaN.
    """
    return cholesky_p.bind(_operand("cholesky", x, symmetrize_input))


# --- triangular_solve ----------------------------------------------------------------------------
def _triangular_solve_rule(a: ShapedArray, b: ShapedArray, *, left_side: bool, lower: bool, transpose_a: bool,
                           conjugate_a: bool, unit_diagonal: bool) -> ShapedArray:
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


triangular_solve_p = primitive("triangular_solve", _triangular_solve_rule, linear=True)


def triangular_solve(a: Any, b: Any, *, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False) -> Any:
    """``x`` with ``op(a) @ x == b`` (``left_side``) or ``x @ op(a) == b``, where ``op(a)`` is ``a``,
    ``a.T`` (``transpose_a``), ``conj(a)`` (``conjugate_a``) or ``a^H`` (both), and ``a`` is lower or
    upper triangular.

    Only ``a``'s triangle is read, and not its diagonal if ``unit_diagonal`` (taken as ones).
    A ``b`` with one dimension fewer than ``a`` is a (batch of) vector(s). ``conjugate_a``
    changes nothing for real matrices (and is dropped for them, so programs do not differ).
    """
    b_rank = aval(b).ndim
    vector = b_rank == aval(a).ndim - 1
    if vector:
        b = shapes.expand_dims(b, (b_rank if left_side else b_rank - 1,))
    conjugate = bool(conjugate_a) and dtypes.is_complex(aval(a).dtype)
    out = triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower), transpose_a=bool(transpose_a),
                                  conjugate_a=conjugate, unit_diagonal=bool(unit_diagonal))
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


def qr(x: Any, *, pivoting: bool = False, full_matrices: bool = True) -> tuple[Any, ...]:
    """``(q, r)`` with ``q @ r == x``, ``q`` orthonormal (unitary columns) and ``r`` upper triangular
    (diagonal of either sign, or any phase, as LAPACK gives).
    ``full_matrices``: ``q`` is m x m and ``r`` m x n; else m x k and k x n.
    ``pivoting``: ``(q, r, p)`` with ``q @ r == x[..., p]``, the columns ordered as LAPACK's geqp3
    chooses them (largest remaining norm first), so that ``|r|``'s diagonal does not increase;
    ``q`` and ``r`` are the QR decomposition of the permuted ``x`` (differentiable as it is; the
    permutation, an int32 array, is constant)."""
    if not pivoting:
        q, r = qr_p.bind(x, full_matrices=bool(full_matrices))
        return q, r
    _, p, _ = geqp3_p.bind(stop_gradient(x))  # (the order is constant: no derivative to take)
    q, r = qr_p.bind(_permute_columns(x, p), full_matrices=bool(full_matrices))
    return q, r, p


def _permute_columns(x: Any, p: Any) -> Any:
    """``x[..., p]`` with one permutation per matrix: a gather batched over the leading dimensions."""
    *batch, m, n = aval(x).shape
    b = len(batch)
    dims = GatherDimensionNumbers(offset_dims=(b,), collapsed_slice_dims=(b + 1,), start_index_map=(b + 1,),
                                  operand_batching_dims=tuple(range(b)), start_indices_batching_dims=tuple(range(b)))
    return gather(x, shapes.expand_dims(p, (b + 1,)), dims, (1,) * b + (m, 1), mode="promise_in_bounds")


# --- LAPACK's Householder form: geqrf (jnp.linalg.qr(mode='raw')) and geqp3 (column pivots) ------------
def _householder_rule(name: str, pivots: bool) -> Any:
    def rule(x: ShapedArray) -> list[ShapedArray]:
        _check_matrices(name, x)
        batch, m, n, k = _batch_shape_and_rank(x)
        taus = ShapedArray(batch + (k,), x.dtype)
        return [x.strip_weak_type(), ShapedArray(batch + (n,), dtypes.int32), taus] if pivots else \
            [x.strip_weak_type(), taus]
    return rule


geqrf_p = primitive("geqrf", _householder_rule("geqrf", False), multiple_results=True)
geqp3_p = primitive("geqp3", _householder_rule("geqp3", True), multiple_results=True)


def geqrf(x: Any) -> tuple[Any, Any]:
    """LAPACK's geqrf: ``(a, taus)``, ``r`` on and above ``a``'s diagonal and the Householder
    vectors (their leading 1 left out) below it, each reflector ``I - tau v v^H``."""
    a, taus = geqrf_p.bind(x)
    return a, taus


def geqp3(x: Any) -> tuple[Any, Any, Any]:
    """LAPACK's geqp3 (QR with column pivoting): ``(a, p, taus)`` as geqrf's of ``x[..., p]``;
    ``p`` (int32) is the column order, from 0."""
    a, p, taus = geqp3_p.bind(x)
    return a, p, taus


# --- eigh ----------------------------------------------------------------------------------------------
def _eigh_rule(x: ShapedArray, *, lower: bool) -> list[ShapedArray]:
    _check_matrices("eigh", x, square=True)
    return [x.strip_weak_type(), ShapedArray(x.shape[:-1], dtypes.real_dtype(x.dtype))]


eigh_p = primitive("eigh", _eigh_rule, multiple_results=True)


def eigh(x: Any, *, lower: bool = True, symmetrize_input: bool = True) -> tuple[Any, Any]:
    """``(v, w)``: the eigenvectors (the columns of ``v``) and the eigenvalues, in ascending order,
    of a symmetric (complex: Hermitian) ``x``, so that ``x @ v == v * w``. ``w`` is real.

    The primitive reads only the lower (or, if not ``lower``, the upper) triangle;
    ``symmetrize_input`` (the default) first averages ``x`` with its conjugate transpose.
    """
    v, w = eigh_p.bind(_operand("eigh", x, symmetrize_input), lower=bool(lower))
    return v, w


# --- svd ---------------------------------------------------------------------------------------------------
def _svd_rule(x: ShapedArray, *, full_matrices: bool, compute_uv: bool) -> list[ShapedArray]:
    _check_matrices("svd", x)
    batch, m, n, k = _batch_shape_and_rank(x)
    s = ShapedArray(batch + (k,), dtypes.real_dtype(x.dtype))
    if not compute_uv:
        return [s]
    u_cols, vh_rows = (m, n) if full_matrices else (k, k)
    return [ShapedArray(batch + (m, u_cols), x.dtype), s, ShapedArray(batch + (vh_rows, n), x.dtype)]


svd_p = primitive("svd", _svd_rule, multiple_results=True)


def svd(x: Any, *, full_matrices: bool = True, compute_uv: bool = True) -> Any:
    """The singular value decomposition ``x == u @ diag(s) @ vh``: ``(u, s, vh)``, or ``s`` alone
    without ``compute_uv``. Singular values are real, non-negative and descending. ``full_matrices``:
    ``u`` is m x m and ``vh`` n x n; else m x k and k x n (k = min(m, n))."""
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    return tuple(outs) if compute_uv else outs[0]


# --- eig ---------------------------------------------------------------------------------------------------------
class EigImplementation(enum.Enum):
    """Which library computes ``eig``: on the CPU, LAPACK (the only one here, as in JAX on CPU)."""

    LAPACK = "lapack"
    MAGMA = "magma"
    CUSOLVER = "cusolver"


def _eig_rule(x: ShapedArray, *, compute_left_eigenvectors: bool, compute_right_eigenvectors: bool,
              enable_eigvec_derivs: bool) -> list[ShapedArray]:
    _check_matrices("eig", x, square=True)
    complex_type = dtypes.complex_dtype(x.dtype)
    vectors = [ShapedArray(x.shape, complex_type)] * (compute_left_eigenvectors + compute_right_eigenvectors)
    return [ShapedArray(x.shape[:-1], complex_type), *vectors]


eig_p = primitive("eig", _eig_rule, multiple_results=True)


def eig(x: Any, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation: EigImplementation | None = None,
        use_magma: bool | None = None) -> list[Any]:
    """The eigendecomposition of general square matrices: ``[w, vl, vr]`` (the eigenvector sets
    that are asked for), all complex (float32 gives complex64, float64 complex128).

    ``x @ vr[..., :, j] == w[j] * vr[..., :, j]`` and ``vl[..., :, j]^H @ x == w[j] * vl[..., :, j]^H``.
    The eigenvalues come in LAPACK's (``geev``'s) order, unsorted, and each eigenvector has unit
    2-norm and a real component of largest magnitude, as ``geev`` (and so JAX on the CPU) gives.
    A matrix whose decomposition fails gives NaNs. Derivatives of the eigenvectors hold only for
    distinct eigenvalues and depend on that normalization, so they need ``enable_eigvec_derivs``.
    """
    if use_magma is not None:
        implementation = EigImplementation.MAGMA if use_magma else EigImplementation.LAPACK
    if implementation is not None and implementation != EigImplementation.LAPACK:
        raise ValueError("Only the lapack implementation is supported on CPU.")
    return list(eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                           compute_right_eigenvectors=bool(compute_right_eigenvectors),
                           enable_eigvec_derivs=bool(enable_eigvec_derivs)))


# --- schur, hessenberg (LAPACK's gees, gehrd) ------------------------------------------------------------------
def _schur_rule(x: ShapedArray, *, compute_schur_vectors: bool) -> list[ShapedArray]:
    _check_matrices("schur", x, square=True)
    return [x.strip_weak_type()] * (2 if compute_schur_vectors else 1)


schur_p = primitive("schur", _schur_rule, multiple_results=True)


def schur(x: Any, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable: Any = None) -> list[Any]:
    """The Schur decomposition ``x == vs @ t @ vs^H`` (LAPACK's gees): ``[t, vs]``, or ``[t]`` without
    ``compute_schur_vectors``. ``vs`` is orthogonal (unitary); ``t`` is upper triangular for complex
    matrices and, for real ones, quasi-triangular: a 2 x 2 block on the diagonal for each pair of
    complex conjugate eigenvalues. The eigenvalues come unsorted (sorting is not implemented, as in JAX)."""
    if sort_eig_vals or select_callable is not None:
        raise NotImplementedError("The sort feature of LAPACK's gees routine is not implemented.")
    return list(schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors)))


def _hessenberg_rule(x: ShapedArray) -> list[ShapedArray]:
    _check_matrices("hessenberg", x, square=True)
    *batch, n, _ = x.shape
    return [x.strip_weak_type(), ShapedArray(tuple(batch) + (max(n - 1, 0),), x.dtype)]


hessenberg_p = primitive("hessenberg", _hessenberg_rule, multiple_results=True)


def hessenberg(a: Any) -> tuple[Any, Any]:
    """The Hessenberg form in LAPACK's (gehrd's) packing: ``(a, taus)``, the upper Hessenberg ``h``
    on and above the subdiagonal, and below it the Householder vectors (their leading 1 left out)
    whose reflectors ``I - tau v v^H`` make ``q`` with ``a == q @ h @ q^H``; ``taus`` is ``(..., n - 1)``."""
    packed, taus = hessenberg_p.bind(a)
    return packed, taus


# --- householder_product (orgqr / ungqr) ------------------------------------------------------------------------
def _householder_product_rule(a: ShapedArray, taus: ShapedArray) -> ShapedArray:
    _check_matrices("householder_product", a)
    *batch, m, n = a.shape
    if m < n:
        raise ValueError(f"householder_product needs a tall matrix (m >= n), got shape {a.shape}")
    if taus.dtype != a.dtype or taus.shape[:-1] != tuple(batch) or taus.ndim != a.ndim - 1 or taus.shape[-1] > n:
        raise ValueError(f"householder_product: taus of shape {taus.shape} and dtype {taus.dtype} do not fit a of "
                         f"shape {a.shape} and dtype {a.dtype}: they need a's dtype, its batch dimensions and at "
                         f"most {n} reflectors")
    return a.strip_weak_type()


householder_product_p = primitive("householder_product", _householder_product_rule)


def householder_product(a: Any, taus: Any) -> Any:
    """The first n columns of the product of the Householder reflectors ``I - taus[i] v_i v_i^H``
    that ``a`` (m x n, m >= n) holds below its diagonal (``v_i``'s leading 1 left out), as geqrf
    leaves them: ``householder_product(*geqrf(x))`` is the ``q`` of ``x``'s reduced QR decomposition."""
    return householder_product_p.bind(a, taus)


# --- lu_pivots_to_permutation ---------------------------------------------------------------------------------
def _lu_pivots_to_permutation_rule(pivots: ShapedArray, *, permutation_size: int) -> ShapedArray:
    if pivots.dtype != dtypes.int32 or pivots.ndim < 1:
        raise TypeError(f"lu_pivots_to_permutation needs int32 pivots of shape (..., k), got {pivots.dtype} "
                        f"of shape {pivots.shape}")
    if permutation_size < pivots.shape[-1]:
        raise ValueError(f"Output permutation size {permutation_size} has to exceed the trailing dimension of "
                         f"the pivots. Got pivots size {pivots.shape[-1]}")
    return ShapedArray(pivots.shape[:-1] + (permutation_size,), dtypes.int32)


lu_pivots_to_permutation_p = primitive("lu_pivots_to_permutation", _lu_pivots_to_permutation_rule)


def lu_pivots_to_permutation(pivots: Any, permutation_size: int) -> Any:
    """The permutation (int32, ``(..., permutation_size)``) that LAPACK's sequential row swaps make:
    step i swaps rows i and ``pivots[..., i]`` (counted from 0) of ``arange(permutation_size)``."""
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


# --- symmetric_product ------------------------------------------------------------------------------------------
def symmetric_product(a_matrix: Any, c_matrix: Any, *, alpha: float = 1.0, beta: float = 0.0,
                      symmetrize_output: bool = False) -> Any:
    """``alpha * a @ a^T + beta * c`` (BLAS's syrk; ``a^T`` is not conjugated), over the last two
    dimensions, computed whole; ``symmetrize_output`` mirrors its lower triangle into the upper one."""
    a_aval = aval(a_matrix)
    batch, last = tuple(range(a_aval.ndim - 2)), a_aval.ndim - 1
    product = dot_general(a_matrix, a_matrix, (((last,), (last,)), (batch, batch)))
    dt = a_aval.dtype
    out = elementwise.add(elementwise.mul(convert_element_type(alpha, dt), product),
                          elementwise.mul(convert_element_type(beta, dt), c_matrix))
    if symmetrize_output:  # the lower triangle mirrored (what syrk writes)
        out = elementwise.add(triangle(out, 0, lower=True), matrix_transpose(triangle(out, -1, lower=True)))
    return out
