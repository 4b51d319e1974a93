"""Dense linear algebra with SciPy's conventions (``jax.scipy.linalg``), built on
``ember.numpy.linalg`` and the ``ember.lax.linalg`` decompositions.

Where SciPy and NumPy differ, SciPy wins here: ``cholesky`` is upper triangular by default,
``lu`` returns a permutation *matrix* ``p`` with ``a == p @ l @ u``, ``eigh`` returns
``(w, v)``. The ``overwrite_*`` and ``check_finite`` flags are accepted and ignored, as in
JAX (arrays are immutable, and nothing is checked at run time).
"""
from __future__ import annotations

from math import comb
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import dtypes, lax
from ember.lax import linalg as lax_linalg
from ember.numpy import linalg as np_linalg
from ember.numpy.core import ensure_array, promote_dtypes_inexact

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "convolution_matrix", "det",
           "dft", "eigh", "eigh_tridiagonal", "expm", "expm_frechet", "fiedler", "fiedler_companion", "funm",
           "hadamard", "hankel", "helmert", "hessenberg", "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu",
           "lu_factor", "lu_solve", "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur", "solve",
           "solve_sylvester", "solve_triangular", "sqrtm", "svd", "toeplitz"]


def _inexact(*args: Any) -> Any:
    promoted = promote_dtypes_inexact(*(ensure_array(a) for a in args))
    return promoted[0] if len(args) == 1 else promoted


def _transpose_flag(trans: int | str) -> bool:
    """SciPy's ``trans`` (0/'N': a, 1/'T': a.T, 2/'C': a.conj().T) as ``transpose_a``."""
    if trans in (0, "N"):
        return False
    if trans in (1, "T", 2, "C"):
        return True
    raise ValueError(f"Invalid 'trans' value {trans}")


def solve_triangular(a: Any, b: Any, trans: int | str = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug: Any = None, check_finite: bool = True) -> Any:
    """``x`` with ``op(a) @ x == b`` for triangular ``a`` (..., n, n); ``b`` is (..., n) or (..., n, k).
    Only ``a``'s ``lower`` (or upper) triangle is read."""
    transpose_a = _transpose_flag(trans)
    a, b = _inexact(a, b)
    return lax_linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=transpose_a,
                                       conjugate_a=trans in (2, "C"), unit_diagonal=unit_diagonal)


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The Cholesky factor of a Hermitian (real: symmetric) positive-definite ``a``: upper ``U`` with
    ``a == U^H @ U`` (SciPy's default), or lower ``L`` with ``a == L @ L^H``."""
    return np_linalg.cholesky(a, upper=not lower)


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, bool]:
    """``(c, lower)`` for ``cho_solve``: ``c`` is the Cholesky factor (its other triangle zero)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """``x`` with ``a @ x == b`` from ``cho_factor(a)``: two triangular solves."""
    c, lower = c_and_lower
    c, b = _inexact(c, b)
    # With a == L L^H: solve L y = b, then L^H x = y (for an upper factor U = L^H, the transposes swap).
    y = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower, conjugate_a=not lower)
    return lax_linalg.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower, conjugate_a=lower)


def _pivots_to_permutation(pivots: Any, size: int) -> Any:
    """The row permutation that LAPACK's sequential swaps (row i with row ``pivots[i]``) make."""
    batch = pivots.shape[:-1]
    positions = lax.broadcasted_iota(pivots.dtype, batch + (size,), len(batch))

    def swap(i: Any, permutation: Any) -> Any:
        j = jnp.take_along_axis(pivots, jnp.full(batch + (1,), i, pivots.dtype), axis=-1)
        row_i = jnp.take_along_axis(permutation, jnp.full(batch + (1,), i, pivots.dtype), axis=-1)
        row_j = jnp.take_along_axis(permutation, j, axis=-1)
        return jnp.where(positions == i, row_j, jnp.where(positions == j, row_i, permutation))

    return lax.fori_loop(0, pivots.shape[-1], swap, positions)


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, Any]:
    """``(lu, piv)``: the packed LU factors and LAPACK's pivot indices (int32, from 0), for ``lu_solve``."""
    lu_, pivots, _ = lax_linalg.lu(_inexact(a))
    return lu_, pivots


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, trans: int = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """``x`` with ``a @ x == b`` (``trans=0``), ``a.T @ x == b`` (1) or ``a^H @ x == b`` (2) from
    ``lu_factor(a)``; ``b`` is (n,) or (n, k)."""
    transpose_a, conjugate_a = _transpose_flag(trans), trans in (2, "C")
    lu_, pivots = lu_and_piv
    lu_, b = _inexact(lu_, b)
    n = lu_.shape[-1]
    if b.ndim < 1 or b.shape[0] != n:
        raise ValueError(f"lu_solve: b of shape {b.shape} does not match the ({n}, {n}) factorization: "
                         f"its first dimension must be {n}")
    vector = b.ndim == 1
    rhs = jnp.reshape(b, (n, -1))
    permutation = _pivots_to_permutation(jnp.asarray(pivots), n)
    # a[permutation] == L @ U, with L unit lower and U upper, both packed in lu_.
    if transpose_a:  # a.T x = b:  U.T L.T (P x) = b (a^H: the conjugate transposes)
        y = lax_linalg.triangular_solve(lu_, rhs, left_side=True, lower=False, transpose_a=True,
                                        conjugate_a=conjugate_a)
        z = lax_linalg.triangular_solve(lu_, y, left_side=True, lower=True, transpose_a=True,
                                        conjugate_a=conjugate_a, unit_diagonal=True)
        x = jnp.zeros_like(z).at[permutation].set(z)
    else:  # L U x = P b
        y = lax_linalg.triangular_solve(lu_, rhs[permutation], left_side=True, lower=True, unit_diagonal=True)
        x = lax_linalg.triangular_solve(lu_, y, left_side=True, lower=False)
    return x[:, 0] if vector else jnp.reshape(x, b.shape)


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, ...]:
    """``(p, l, u)`` with ``a == p @ l @ u`` (``p`` a permutation matrix, ``l`` unit lower
    trapezoidal, ``u`` upper trapezoidal), or ``(p @ l, u)`` if ``permute_l``."""
    a = _inexact(a)
    lu_, _, permutation = lax_linalg.lu(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    l_factor = jnp.add(jnp.tril(lu_[..., :, :k], -1), jnp.eye(m, k, dtype=a.dtype))
    u_factor = jnp.triu(lu_[..., :k, :])
    # a[permutation] == l @ u, so a == p @ l @ u with p[permutation[i], i] == 1.
    p = (jnp.expand_dims(permutation, -2) == jnp.arange(m, dtype=permutation.dtype)[:, None]).astype(a.dtype)
    if permute_l:
        return jnp.matmul(p, l_factor), u_factor
    return p, l_factor, u_factor


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> tuple[Any, ...]:
    """``(q, r)`` with ``a == q @ r``: ``mode='full'`` (q m x m), ``'economic'`` (q m x k), or
    ``'r'`` (the full ``r`` alone, as a 1-tuple like SciPy's). ``pivoting``: the column order
    ``p`` (LAPACK's geqp3) comes last, with ``a[:, p] == q @ r``."""
    if mode not in ("full", "r", "economic"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    q, r, *p = lax_linalg.qr(_inexact(a), pivoting=bool(pivoting), full_matrices=mode != "economic")
    return ((r,) if mode == "r" else (q, r)) + tuple(p)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:
    """``(u, s, vh)`` with ``a == u @ diag(s) @ vh`` (``s`` descending), or ``s`` alone."""
    result = np_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(result) if compute_uv else result


def eigh(a: Any, b: Any = None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals: None = None, type: int = 1,
         check_finite: bool = True) -> Any:
    """``(w, v)``: ascending eigenvalues and eigenvectors (columns) of a symmetric (Hermitian) ``a``, read from
    its ``lower`` (or upper) triangle; ``w`` alone with ``eigvals_only``."""
    if b is not None:
        raise NotImplementedError("Only the b=None case of eigh is implemented")
    if type != 1:
        raise NotImplementedError("Only the type=1 case of eigh is implemented.")
    if eigvals is not None:
        raise NotImplementedError("Only the eigvals=None case of eigh is implemented.")
    w, v = np_linalg.eigh(a, UPLO="L" if lower else "U", symmetrize_input=False)
    return w if eigvals_only else (w, v)


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The determinant of square matrices."""
    return np_linalg.det(a)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The inverse of square matrices (inf / NaN if singular)."""
    return np_linalg.inv(a)


_ASSUME_A = ("gen", "sym", "her", "pos")


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen") -> Any:
    """``x`` with ``a @ x == b``: by LU (``assume_a`` 'gen', 'sym', 'her') or by Cholesky ('pos',
    reading ``a``'s ``lower`` or upper triangle). ``b`` is (n,) or (n, k)."""
    if assume_a not in _ASSUME_A:
        raise ValueError(f"Expected assume_a to be one of {list(_ASSUME_A)}; got {assume_a!r}")
    if assume_a != "pos":
        return np_linalg.solve(a, b)
    a, b = _inexact(a, b)
    if not lower:  # the primitive reads the lower triangle: hand it the upper one, conjugate-transposed
        a = lax_linalg.adjoint(a)
    return cho_solve((lax_linalg.cholesky(a, symmetrize_input=False), True), b)


# Pade approximant of degree (13, 13) to exp (Higham 2005, "The scaling and squaring method for
# the matrix exponential revisited"): numerator coefficients b_0..b_13; the denominator has the
# same ones with alternating signs. Accurate to double precision for ||A||_1 <= theta_13.
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152


def _pade13(a: Any) -> tuple[Any, Any]:
    """The odd and even parts ``(u, v)`` of the Pade numerator: ``exp(a) ~= (v - u)^-1 (v + u)``."""
    b = _PADE13
    identity = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    a2 = jnp.matmul(a, a)
    a4 = jnp.matmul(a2, a2)
    a6 = jnp.matmul(a4, a2)
    u_high = jnp.matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
    u = jnp.matmul(a, u_high + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * identity)
    v_high = jnp.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2)
    v = v_high + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * identity
    return u, v


def expm(A: Any, *, upper_triangular: bool = False, max_squarings: int = 16) -> Any:
    """The matrix exponential of square matrices (..., n, n), by scaling and squaring with a
    degree-13 Pade approximant: ``exp(A) = (exp(A / 2^s))^(2^s)``, with ``s`` the smallest
    power that brings ``||A / 2^s||_1`` under theta_13 (at most ``max_squarings``, a static
    int; matrices whose norm needs more give NaN, as in JAX). ``upper_triangular`` is a
    hint that changes nothing here."""
    a = _inexact(A)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"expm needs square matrices, of shape (..., n, n), got shape {a.shape}")
    # The 1-norm (the largest column sum) only picks s: no gradient flows through it.
    norm = jnp.max(jnp.sum(jnp.abs(lax.stop_gradient(a)), axis=-2), axis=-1)
    squarings = jnp.maximum(0, jnp.ceil(jnp.log2(norm / _THETA13)))
    too_large = squarings > max_squarings
    squarings = jnp.where(too_large, 0, squarings)
    scaled = a / jnp.exp2(squarings)[..., None, None]
    u, v = _pade13(scaled)
    approximation = np_linalg.solve(v - u, v + u)

    def square_while_needed(i: Any, x: Any) -> Any:
        return jnp.where((i < squarings)[..., None, None], jnp.matmul(x, x), x)

    result = lax.fori_loop(0, int(max_squarings), square_while_needed, approximation)
    return jnp.where(too_large[..., None, None], np.nan, result)


# --- special matrices ------------------------------------------------------------------------------------------
# Each is a gather from a short vector of entries: a static index array (n is static) says which
# entry every position holds, so the batch dimensions of the inputs carry through one ``take``.
def _pick(values: Any, index: np.ndarray) -> Any:
    """``values[..., index]``: the matrix whose positions hold the entries ``index`` names."""
    return jnp.take(values, jnp.asarray(np.asarray(index, np.int32)), axis=-1)


def _broadcast_leading(*vectors: Any) -> list[Any]:
    """Vectors (..., k_i) with their leading (batch) dimensions broadcast together."""
    batch = np.broadcast_shapes(*(v.shape[:-1] for v in vectors))
    return [jnp.broadcast_to(v, batch + v.shape[-1:]) for v in vectors]


def block_diag(*arrs: Any) -> Any:
    """The block-diagonal matrix of ``arrs`` (scalars and vectors count as 1 x k blocks)."""
    if not arrs:
        return jnp.zeros((1, 0))
    blocks = [jnp.atleast_2d(ensure_array(a)) for a in arrs]
    for i, block in enumerate(blocks):
        if block.ndim > 2:
            raise ValueError("Arguments to ember.scipy.linalg.block_diag must have at most 2 dimensions, "
                             f"got an array of shape {block.shape} at argument {i}.")
    dtype = jnp.result_type(*blocks)
    width = sum(b.shape[1] for b in blocks)
    rows, before = [], 0
    for block in blocks:
        after = width - before - block.shape[1]
        r = block.shape[0]
        rows.append(jnp.concatenate([jnp.zeros((r, before), dtype), block.astype(dtype),
                                     jnp.zeros((r, after), dtype)], axis=1))
        before += block.shape[1]
    return jnp.concatenate(rows, axis=0)


def toeplitz(c: Any, r: Any = None) -> Any:
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (``r[0]`` is ignored;
    by default ``conj(c)``, a Hermitian matrix). Leading dimensions batch."""
    c = jnp.atleast_1d(ensure_array(c))
    r = jnp.conj(c) if r is None else jnp.atleast_1d(ensure_array(r))
    dtype = jnp.result_type(c, r)
    c, r = _broadcast_leading(c.astype(dtype), r.astype(dtype))
    m, n = c.shape[-1], r.shape[-1]
    # entries: c reversed, then r without its first element; (i, j) holds entry m - 1 - i + j
    values = jnp.concatenate([jnp.flip(c, -1), r[..., 1:]], axis=-1)
    return _pick(values, m - 1 - np.arange(m)[:, None] + np.arange(n))


def circulant(c: Any) -> Any:
    """The circulant matrix with first column ``c``: ``C[i, j] = c[(i - j) % n]``. Leading dimensions batch."""
    c = jnp.atleast_1d(ensure_array(c))
    n = c.shape[-1]
    return _pick(c, (np.arange(n)[:, None] - np.arange(n)) % max(n, 1))


def hankel(c: Any, r: Any = None) -> Any:
    """The Hankel matrix with first column ``c`` and last row ``r`` (``r[0]`` is ignored; by
    default zeros, so the matrix is zero below the anti-diagonal). Leading dimensions batch."""
    c = jnp.atleast_1d(ensure_array(c))
    r = jnp.zeros_like(c) if r is None else jnp.atleast_1d(ensure_array(r))
    dtype = jnp.result_type(c, r)
    c, r = _broadcast_leading(c.astype(dtype), r.astype(dtype))
    m, n = c.shape[-1], r.shape[-1]
    values = jnp.concatenate([c, r[..., 1:]], axis=-1)  # (i, j) holds entry i + j
    return _pick(values, np.arange(m)[:, None] + np.arange(n))


def _zero_one_then(*vectors: Any) -> Any:
    """The entry vector ``[0, 1, *vectors]`` (the constant entries first), of the vectors' dtype."""
    first = vectors[0]
    constants = jnp.broadcast_to(jnp.asarray([0, 1], first.dtype), first.shape[:-1] + (2,))
    return jnp.concatenate([constants, *vectors], axis=-1)


def companion(a: Any) -> Any:
    """The companion matrix of the polynomial with coefficients ``a`` (highest degree first):
    first row ``-a[1:] / a[0]``, ones on the subdiagonal, so its eigenvalues are the roots."""
    a = _inexact(jnp.atleast_1d(ensure_array(a)))
    n = a.shape[-1]
    if n < 2:
        raise ValueError(f"The length of `a` along the last axis must be at least 2; got shape {a.shape}.")
    first_row = -a[..., 1:] / a[..., :1]
    index = np.zeros((n - 1, n - 1), np.int32)
    index[0] = 2 + np.arange(n - 1)
    index[np.arange(1, n - 1), np.arange(n - 2)] = 1
    return _pick(_zero_one_then(first_row), index)


def leslie(f: Any, s: Any) -> Any:
    """The Leslie matrix of fecundities ``f`` (its first row, length n >= 2) and survival rates
    ``s`` (its subdiagonal, length n - 1). Leading dimensions batch."""
    f, s = jnp.atleast_1d(ensure_array(f)), jnp.atleast_1d(ensure_array(s))
    n = f.shape[-1]
    if n < 2:
        raise ValueError(f"The length of f along the last axis must be at least 2; got shape {f.shape}.")
    if s.shape[-1] != n - 1:
        raise ValueError(f"The length of s along the last axis must be one less than that of f ({n - 1}); "
                         f"got shape {s.shape}.")
    dtype = jnp.result_type(f, s)
    f, s = _broadcast_leading(f.astype(dtype), s.astype(dtype))
    index = np.zeros((n, n), np.int32)
    index[0] = 2 + np.arange(n)
    index[np.arange(1, n), np.arange(n - 1)] = 2 + n + np.arange(n - 1)
    return _pick(_zero_one_then(f, s), index)


def fiedler(a: Any) -> Any:
    """The symmetric Fiedler matrix ``F[i, j] = |a[i] - a[j]|``. Leading dimensions batch."""
    a = jnp.atleast_1d(ensure_array(a))
    return jnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a: Any) -> Any:
    """Fiedler's pentadiagonal companion matrix of the polynomial with coefficients ``a`` (highest
    degree first): the same eigenvalues as ``companion(a)``, with the coefficients spread over two
    bands. Leading dimensions batch."""
    a = _inexact(jnp.atleast_1d(ensure_array(a)))
    if a.shape[-1] == 0:
        raise ValueError(f"fiedler_companion requires the last axis of 'a' to have nonzero length, but got an "
                         f"array of shape {a.shape}.")
    n = a.shape[-1] - 1  # the degree
    if n < 1:
        return jnp.zeros(a.shape[:-1] + (0, 0), a.dtype)
    coefficient = 1 + np.arange(n + 1)  # entry 1 + k holds -a[k] / a[0] (k >= 1); entry 1 holds 1
    index = np.zeros((n, n), np.int32)
    index[0, 0] = coefficient[1]
    if n > 1:
        index[1, 0] = 1
    for i in range(0, n, 2):  # even rows: -a[i + 2] right of the diagonal, 1 two to the right
        if i + 1 < n:
            index[i, i + 1] = coefficient[i + 2]
        if i + 2 < n:
            index[i, i + 2] = 1
        if i >= 2:  # and -a[i + 1] left of it
            index[i, i - 1] = coefficient[i + 1]
    for i in range(3, n, 2):  # odd rows: 1 two to the left
        index[i, i - 2] = 1
    values = jnp.concatenate([jnp.zeros(a.shape[:-1] + (1,), a.dtype), -a / a[..., :1]], axis=-1)
    values = values.at[..., 1].set(1)  # (-a[0] / a[0] never appears: its slot holds the ones)
    return _pick(values, index)


def convolution_matrix(a: Any, n: int, mode: str = "full") -> Any:
    """The matrix ``A`` with ``A @ v == np.convolve(a, v, mode)`` for vectors ``v`` of length ``n``:
    'full' (m + n - 1 rows), 'same' (max(m, n): the centred part) or 'valid' (max(m, n) - min(m, n) + 1)."""
    a = jnp.atleast_1d(ensure_array(a))
    n = int(n)
    if n <= 0:
        raise ValueError(f"n must be a positive integer; got {n}.")
    if mode not in ("full", "valid", "same"):
        raise ValueError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    m = a.shape[-1]
    if m == 0:
        raise ValueError("convolution_matrix: a must not be empty")
    rows, start = {"full": (m + n - 1, 0), "same": (max(m, n), (min(m, n) - 1) // 2),
                   "valid": (max(m, n) - min(m, n) + 1, min(m, n) - 1)}[mode]
    lag = np.arange(start, start + rows)[:, None] - np.arange(n)  # (i, j) holds a[lag] where 0 <= lag < m
    index = np.where((lag >= 0) & (lag < m), lag + 1, 0)
    values = jnp.concatenate([jnp.zeros(a.shape[:-1] + (1,), a.dtype), a], axis=-1)
    return _pick(values, index)


def _float_constant(x: np.ndarray) -> Any:
    """A host-computed float64 matrix as an array of the default float dtype."""
    return jnp.asarray(np.asarray(x, np.float64))


def hilbert(n: int) -> Any:
    """The Hilbert matrix ``H[i, j] = 1 / (i + j + 1)``."""
    i = np.arange(int(n))
    return _float_constant(1.0 / (i[:, None] + i + 1))


def invhilbert(n: int) -> Any:
    """The inverse of the n x n Hilbert matrix, from its closed form in binomial coefficients
    (exact integers on the host, then rounded once): ``hilbert(n)`` is too ill-conditioned to invert."""
    n = int(n)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            value = (i + j + 1) * comb(n + i, n - j - 1) * comb(n + j, n - i - 1) * comb(i + j, i) ** 2
            out[i, j] = float(-value if (i + j) % 2 else value)
    return _float_constant(out)


def _pascal_lower(n: int, signed: bool) -> np.ndarray:
    """``C(i, j)`` (times ``(-1)^(i - j)`` if ``signed``: the inverse) as exact Python integers."""
    return np.array([[comb(i, j) * (-1 if signed and (i - j) % 2 else 1) for j in range(n)] for i in range(n)],
                    dtype=object).reshape(n, n)


_PASCAL_KINDS = ("symmetric", "lower", "upper")


def _pascal(n: int, kind: str | None, inverse: bool) -> Any:
    kind = "symmetric" if kind is None else kind
    if kind not in _PASCAL_KINDS:
        raise ValueError(f"Expected kind to be one of: {list(_PASCAL_KINDS)}; got {kind}")
    lower = _pascal_lower(int(n), signed=inverse)
    if kind == "lower":
        out = lower
    elif kind == "upper":
        out = lower.T
    else:  # symmetric: L @ L^T, and its inverse L^-T @ L^-1 (exact integer products)
        out = lower.T.dot(lower) if inverse else lower.dot(lower.T)
    return _float_constant(out.astype(np.float64))


def pascal(n: int, kind: str | None = None) -> Any:
    """The n x n Pascal matrix: 'symmetric' (``C(i + j, i)``), 'lower' (``C(i, j)``) or 'upper'."""
    return _pascal(n, kind, inverse=False)


def invpascal(n: int, kind: str | None = None) -> Any:
    """The inverse of ``pascal(n, kind)``, from the signed binomial coefficients (exact on the host)."""
    return _pascal(n, kind, inverse=True)


def helmert(n: int, full: bool = False) -> Any:
    """The Helmert matrix: orthonormal rows that are orthogonal to the ones vector (its first row,
    ``1 / sqrt(n)`` everywhere, only if ``full``)."""
    n = int(n)
    out = np.zeros((n, n))
    out[0] = 1 / np.sqrt(n)
    for i in range(1, n):
        out[i, :i] = 1 / np.sqrt(i * (i + 1))
        out[i, i] = -i / np.sqrt(i * (i + 1))
    return _float_constant(out if full else out[1:])


def hadamard(n: int, dtype: Any = int) -> Any:
    """Sylvester's Hadamard matrix of order ``n`` (a power of 2): ``H[i, j] = (-1)^popcount(i & j)``."""
    n = int(n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"n must be a positive power of 2; got {n}.")
    i = np.arange(n)
    bits = np.vectorize(lambda v: bin(v).count("1"))(i[:, None] & i) if n > 1 else np.zeros((1, 1), int)
    return jnp.asarray(1 - 2 * (bits % 2), dtype=dtype)


def dft(n: int, scale: str | None = None, *, dtype: Any = None) -> Any:
    """The discrete Fourier transform matrix ``W[j, k] = exp(-2 pi i j k / n)`` (``W @ x == fft(x)``),
    divided by ``sqrt(n)`` (``scale='sqrtn'``) or ``n`` ('n')."""
    dtype = dtypes.default_complex_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    if not np.issubdtype(dtype, np.complexfloating):
        raise ValueError(f"dtype must be a complex floating-point type; got {np.dtype(dtype)}.")
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
    n = int(n)
    j = np.arange(n)
    w = np.exp(-2j * np.pi * ((j[:, None] * j) % max(n, 1)) / max(n, 1))  # (j k mod n: exact angles)
    w = w / {None: 1, "sqrtn": np.sqrt(n), "n": n}[scale] if n else w
    return jnp.asarray(w, dtype=dtype)


# --- decompositions on the Schur and Hessenberg forms ---------------------------------------------------------
def schur(a: Any, output: str = "real") -> tuple[Any, Any]:
    """``(t, z)`` with ``a == z @ t @ z^H`` (LAPACK's gees, unsorted): ``output='real'`` keeps a real
    matrix real, with 2 x 2 diagonal blocks for complex eigenvalue pairs; 'complex' makes ``t`` triangular."""
    if output not in ("real", "complex"):
        raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got output={output}.")
    a = _inexact(a)
    if output == "complex":
        a = a.astype(jnp.result_type(a.dtype, jnp.complex64))
    t, z = lax_linalg.schur(a)
    return t, z


def hessenberg(a: Any, *, calc_q: bool = False, overwrite_a: bool = False,
               check_finite: bool = True) -> Any:
    """The upper Hessenberg ``h`` with ``a == q @ h @ q^H`` (LAPACK's gehrd), and ``q`` if ``calc_q``
    (the product of gehrd's reflectors, which act on rows 1..n-1)."""
    packed, taus = lax_linalg.hessenberg(_inexact(a))
    h = jnp.triu(packed, -1)
    if not calc_q:
        return h
    n = packed.shape[-1]
    q = jnp.broadcast_to(jnp.eye(n, dtype=packed.dtype), packed.shape)
    if n > 1:
        q = q.at[..., 1:, 1:].set(lax_linalg.householder_product(packed[..., 1:, :-1], taus))
    return h, q


def polar(a: Any, side: str = "right", *, method: str = "qdwh", eps: float | None = None,
          max_iterations: int | None = None) -> tuple[Any, Any]:
    """``(u, p)``: ``a == u @ p`` (``side='right'``) or ``p @ u`` ('left'), ``u`` with orthonormal columns
    and ``p`` Hermitian positive semi-definite. Both ``method``s read it off one SVD ``a == w s vh``:
    ``u = w vh``, ``p = v s vh`` (left: ``w s w^H``), so ``eps`` and ``max_iterations`` change nothing."""
    if side not in ("right", "left"):
        raise ValueError(f"side={side!r} unrecognized; must be 'right' or 'left'.")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"method={method!r} unsupported; must be 'qdwh' or 'svd'.")
    a = _inexact(a)
    w, s, vh = np_linalg.svd(a, full_matrices=False)
    unitary = jnp.matmul(w, vh)
    s = s.astype(a.dtype)[..., None, :]
    if side == "right":
        v = jnp.conj(jnp.swapaxes(vh, -1, -2))
        return unitary, jnp.matmul(v * s, vh)
    return unitary, jnp.matmul(w * s, jnp.conj(jnp.swapaxes(w, -1, -2)))


# --- matrix functions on the complex Schur form ----------------------------------------------------------------
# A function of a triangular ``t`` is triangular and commutes with ``t``; that fixes its entries one
# superdiagonal at a time from the diagonal ``f(t_ii)``. With the entries of diagonals below ``p``
# known (those on ``p`` and above still zero), ``(x @ y)[i, i + p]`` holds exactly the inner sum
# over ``i < k < i + p`` that the recurrences need, so each diagonal is a few whole-matrix products
# (n is static: a Python loop of n - 1 steps, O(n^4) work for matrices small enough to want it).
def _superdiagonal_mask(n: int, p: int) -> Any:
    return jnp.asarray(np.eye(n, k=p, dtype=bool))


def _diag(x: Any) -> Any:
    return jnp.diagonal(x, axis1=-2, axis2=-1)


def _conj_t(x: Any) -> Any:
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def _sqrtm_triangular(t: Any) -> Any:
    """The principal square root ``u`` of upper triangular ``t`` (Bjorck & Hammarling 1983):
    ``u_ij = (t_ij - sum_k u_ik u_kj) / (u_ii + u_jj)``; an entry whose numerator is exactly zero is
    zero (so a singular ``t`` with zeros there does not give 0 / 0)."""
    n = t.shape[-1]
    d = jnp.sqrt(_diag(t))
    u = d[..., :, None] * jnp.eye(n, dtype=t.dtype)
    denominator = d[..., :, None] + d[..., None, :]
    for p in range(1, n):
        numerator = t - jnp.matmul(u, u)
        entry = jnp.where(numerator == 0, 0, numerator / jnp.where(numerator == 0, 1, denominator))
        u = jnp.where(_superdiagonal_mask(n, p), entry, u)
    return u


def sqrtm(A: Any, blocksize: int = 1) -> Any:
    """The principal square root of square matrices, complex (the complex Schur method:
    ``A == z t z^H``, ``sqrtm(A) == z sqrt(t) z^H``). ``blocksize > 1`` is not implemented, as in JAX."""
    if blocksize > 1:
        raise NotImplementedError("Blocked version is not implemented yet.")
    t, z = schur(A, output="complex")
    return jnp.matmul(jnp.matmul(z, _sqrtm_triangular(t)), _conj_t(z))


def _givens_for_block(t: Any, m: int) -> tuple[Any, Any, Any]:
    """``(c, s, apply)`` of the rotation that makes rows / columns m - 1, m of real Schur form ``t``
    triangular, and whether that 2 x 2 block has a nonzero subdiagonal worth removing."""
    a, b = t[..., m - 1, m - 1], t[..., m - 1, m]
    c_, d = t[..., m, m - 1], t[..., m, m]
    half = (a - d) / 2
    root = jnp.sqrt(half * half + b * c_)
    # an eigenvalue of the block, less d: the one with imag >= 0, which LAPACK lists first (the sign of
    # a zero imaginary part in the discriminant would otherwise pick the other)
    mu = half + jnp.where(root.imag < 0, -root, root)
    r = jnp.sqrt(jnp.abs(mu) ** 2 + jnp.abs(c_) ** 2).astype(t.dtype)
    eps = jnp.finfo(t.dtype).eps
    apply = jnp.abs(c_) > eps * (jnp.abs(a) + jnp.abs(d))
    safe_r = jnp.where(apply, r, 1)
    return jnp.where(apply, mu / safe_r, 1), jnp.where(apply, c_ / safe_r, 0), apply


def rsf2csf(T: Any, Z: Any, check_finite: bool = True) -> tuple[Any, Any]:
    """The complex Schur form ``(t, z)`` of the real one (``schur(a)``'s ``(T, Z)``): each 2 x 2 diagonal
    block (a conjugate eigenvalue pair) is made triangular by a complex Givens rotation, applied to ``t``
    on both sides and to ``z`` on the right. Leading dimensions of ``T`` and ``Z`` broadcast."""
    t, z = _inexact(T), _inexact(Z)
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise ValueError("Input 'T' must be square.")
    if z.ndim < 2 or z.shape[-1] != z.shape[-2]:
        raise ValueError("Input 'Z' must be square.")
    if t.shape[-1] != z.shape[-1]:
        raise ValueError(f"Input array shapes must match: Z: {z.shape} vs. T: {t.shape}")
    complex_type = jnp.result_type(t.dtype, z.dtype, jnp.complex64)
    batch = jnp.broadcast_shapes(t.shape[:-2], z.shape[:-2])
    n = t.shape[-1]
    t = jnp.broadcast_to(t.astype(complex_type), batch + (n, n))
    z = jnp.broadcast_to(z.astype(complex_type), batch + (n, n))
    for m in range(n - 1, 0, -1):
        c, s, apply = _givens_for_block(t, m)
        # g acts on rows m - 1, m: [[conj(c), conj(s)], [-s, c]]
        g = jnp.broadcast_to(jnp.eye(n, dtype=complex_type), batch + (n, n))
        g = g.at[..., m - 1, m - 1].set(jnp.conj(c)).at[..., m - 1, m].set(jnp.conj(s))
        g = g.at[..., m, m - 1].set(-s).at[..., m, m].set(c)
        t = jnp.matmul(jnp.matmul(g, t), _conj_t(g))
        t = t.at[..., m, m - 1].set(jnp.where(apply, 0, t[..., m, m - 1]))
        z = jnp.matmul(z, _conj_t(g))
    return t, z


def _parlett(t: Any, f_diagonal: Any) -> tuple[Any, Any]:
    """``f(t)`` for upper triangular ``t`` from ``f`` of its diagonal (Parlett's recurrence, Golub & Van
    Loan 11.1.1): ``f_ij (t_jj - t_ii) == (t @ f - f @ t)_ij``, left undivided where ``t_jj == t_ii``;
    and the smallest ``|t_jj - t_ii|`` (with ``|t_00|``), which bounds the error."""
    n = t.shape[-1]
    f = f_diagonal[..., :, None] * jnp.eye(n, dtype=t.dtype)
    d = _diag(t)
    gap = d[..., None, :] - d[..., :, None]
    upper = jnp.asarray(np.triu(np.ones((n, n), bool), 1))
    smallest = jnp.min(jnp.where(upper, jnp.abs(gap), jnp.inf), axis=(-2, -1)) if n > 1 else jnp.inf
    smallest = jnp.minimum(jnp.abs(t[..., 0, 0]), smallest)
    for p in range(1, n):
        s = jnp.matmul(t, f) - jnp.matmul(f, t)
        f = jnp.where(_superdiagonal_mask(n, p), jnp.where(gap != 0, s / jnp.where(gap != 0, gap, 1), s), f)
    return f, smallest


def funm(A: Any, func: Any, disp: bool = True) -> Any:
    """``func`` of a square matrix, complex: on the complex Schur form ``A == z t z^H`` (``rsf2csf`` of the
    real one), ``func`` (elementwise, traceable) of ``t``'s diagonal extended by Parlett's recurrence.
    ``disp=False`` also returns an estimate of the relative error (large where ``A`` has close eigenvalues)."""
    a = ensure_array(A)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError("expected square array_like input")
    t, z = rsf2csf(*schur(a))
    f, smallest = _parlett(t, jnp.asarray(func(_diag(t))).astype(t.dtype))
    f = jnp.matmul(jnp.matmul(z, f), _conj_t(z))
    if disp:
        return f
    tol = float(np.finfo(np.float32 if t.dtype == jnp.complex64 else np.float64).eps)
    smallest = jnp.where(smallest == 0, tol, smallest)
    strict = jnp.triu(t, 1)
    one_norm = jnp.max(jnp.sum(jnp.abs(strict), axis=0))
    err = jnp.minimum(1, jnp.maximum(tol, (tol / smallest) * one_norm))
    return f, jnp.where(jnp.any(jnp.isinf(f)), np.inf, err)


def _solve_triangular_sylvester(r: Any, s: Any, f: Any) -> Any:
    """``y`` with ``r @ y + y @ s == f`` for upper triangular ``r`` (m x m) and ``s`` (n x n): column j
    solves ``(r + s_jj I) y_j == f_j - y[:, :j] @ s[:j, j]``, a triangular system, columns in order."""
    m, n = f.shape[-2:]
    identity = jnp.eye(m, dtype=r.dtype)
    columns: list[Any] = []
    for j in range(n):
        rhs = f[..., :, j:j + 1]
        if j:
            rhs = rhs - jnp.matmul(jnp.stack(columns, axis=-1), s[..., :j, j:j + 1])
        shifted = r + s[..., j, j, None, None] * identity
        columns.append(solve_triangular(shifted, rhs)[..., 0])
    return jnp.stack(columns, axis=-1) if columns else f


def solve_sylvester(A: Any, B: Any, C: Any, *, method: str = "schur", tol: float = 1e-8) -> Any:
    """``X`` with ``A @ X + X @ B == C`` (A m x m, B n x n, C m x n; leading dimensions batch).

    'schur' (Bartels-Stewart): with complex Schur forms ``A == u r u^H``, ``B == v s v^H`` the equation
    becomes the triangular ``r y + y s == u^H C v``, solved column by column; 'eigen' diagonalizes both
    (faster in principle, inaccurate for non-normal matrices). The equation is singular where an
    eigenvalue of A and one of B sum to zero: where some sum is under ``tol`` in magnitude, the result
    is NaN. Real ``C`` (after promotion) gives a real ``X``."""
    a, b, c = _inexact(A, B, C)
    m, n = c.shape[-2:]
    if a.shape[-2:] != (m, m) or b.shape[-2:] != (n, n):
        raise ValueError(f"Incompatible shapes for Sylvester equation:\nA: {a.shape}\nB: {b.shape}\nC: {c.shape}")
    if method not in ("schur", "eigen"):
        raise ValueError(f"Unrecognized method {method}. The two valid methods are either \"schur\" or \"eigen\".")
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    a, b, c = (jnp.broadcast_to(x, batch + x.shape[-2:]) for x in (a, b, c))
    if method == "schur":
        r, u = schur(a, output="complex")
        s, v = schur(b, output="complex")
        y = _solve_triangular_sylvester(r, s, jnp.matmul(jnp.matmul(_conj_t(u), c.astype(r.dtype)), v))
        x = jnp.matmul(jnp.matmul(u, y), _conj_t(v))
        eig_a, eig_b = _diag(r), _diag(s)
    else:
        eig_a, vectors_a = np_linalg.eig(a)
        eig_b, vectors_b = np_linalg.eig(b)
        f = np_linalg.solve(vectors_a, jnp.matmul(c.astype(eig_a.dtype), vectors_b))
        y = f / (eig_a[..., :, None] + eig_b[..., None, :])
        x = jnp.matmul(jnp.matmul(vectors_a, y), np_linalg.inv(vectors_b))
    if not jnp.iscomplexobj(c):
        x = x.real
    singular = jnp.any(jnp.abs(eig_a[..., :, None] + eig_b[..., None, :]) < tol, axis=(-2, -1))
    return jnp.where(singular[..., None, None], np.nan, x)


def expm_frechet(A: Any, E: Any, *, method: str | None = None, compute_expm: bool = True) -> Any:
    """The Frechet derivative of ``expm`` at ``A`` in the direction ``E`` (the jvp of ``expm``), and
    ``expm(A)`` first if ``compute_expm``: both read off ``expm([[A, E], [0, A]])``, whose upper right
    block is the derivative (Najfeld & Havel 1995). ``method`` is ignored."""
    a, e = _inexact(A, E)
    if a.ndim < 2 or a.shape[-2] != a.shape[-1]:
        raise ValueError(f"expected A to be a (batched) square matrix, got A.shape={a.shape}")
    if e.ndim < 2 or e.shape[-2] != e.shape[-1]:
        raise ValueError(f"expected E to be a (batched) square matrix, got E.shape={e.shape}")
    if a.shape != e.shape:
        raise ValueError(f"expected A and E to be the same shape, got A.shape={a.shape} E.shape={e.shape}")
    n = a.shape[-1]
    block = jnp.concatenate([jnp.concatenate([a, e], axis=-1),
                             jnp.concatenate([jnp.zeros_like(a), a], axis=-1)], axis=-2)
    both = expm(block)
    derivative = both[..., :n, n:]
    return (both[..., :n, :n], derivative) if compute_expm else derivative


def qr_multiply(a: Any, c: Any, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False) -> tuple[Any, ...]:
    """``(q @ c, r)`` (``mode='left'``, ``c`` with k = min(m, n) rows) or ``(c @ q, r)`` ('right', ``c`` with
    m columns) from the QR decomposition ``a == q @ r`` (``a`` m x n; ``q`` m x k, ``r`` k x n), with
    ``conj(q)`` if ``conjugate``, and the column order ``p`` (``a[:, p] == q @ r``) third if ``pivoting``.
    A 1-D ``c`` is a column ('left') or a row ('right'), and the product comes back raveled."""
    a, c = _inexact(a, c)
    if mode not in ("right", "left"):
        raise ValueError(f"mode must be 'right' or 'left', got {mode!r}")
    one_dimensional = c.ndim == 1
    if one_dimensional:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = a.shape[-2:]
    k = min(m, n)
    if mode == "left" and c.shape[-2] != k:
        raise ValueError(f"Array shapes are not compatible for Q @ c operation: a has shape {tuple(a.shape)} so "
                         f"Q has {k} columns, but c has {c.shape[-2]} rows (expected {k}).")
    if mode == "right" and c.shape[-1] != m:
        raise ValueError(f"Array shapes are not compatible for c @ Q operation: a has shape {tuple(a.shape)} so "
                         f"Q has {m} rows, but c has {c.shape[-1]} columns (expected {m}).")
    batch = jnp.broadcast_shapes(a.shape[:-2], c.shape[:-2])
    a, c = jnp.broadcast_to(a, batch + a.shape[-2:]), jnp.broadcast_to(c, batch + c.shape[-2:])
    if pivoting:
        packed, p, taus = lax_linalg.geqp3(a)
    else:
        packed, taus = lax_linalg.geqrf(a)
    q = lax_linalg.householder_product(packed[..., :, :k], taus)
    q = jnp.conj(q) if conjugate else q
    product = jnp.matmul(q, c) if mode == "left" else jnp.matmul(c, q)
    if one_dimensional:
        product = product.ravel()
    r = jnp.triu(packed[..., :k, :])
    return (product, r, p) if pivoting else (product, r)


def eigh_tridiagonal(d: Any, e: Any, *, eigvals_only: bool = False, select: str = "a",
                     select_range: tuple[float, float] | None = None, tol: float | None = None,
                     key: Any = None) -> Any:
    """Ascending eigenvalues (and eigenvectors, columns ``(n, k)``) of the Hermitian tridiagonal matrix with
    diagonal ``d`` (n,) and superdiagonal ``e`` (n - 1,) (subdiagonal ``conj(e)``): the dense eigendecomposition
    of that matrix, accurate to working precision, so ``tol`` and ``key`` change nothing. ``select='a'``
    gives all; 'i' those with indices ``select_range[0] <= i <= select_range[1]``; 'v' is not implemented,
    as in JAX."""
    alpha, beta = ensure_array(d), ensure_array(e)
    supported = (jnp.float32, jnp.float64, jnp.complex64, jnp.complex128)
    if alpha.dtype != beta.dtype:
        raise TypeError(f"diagonal and off-diagonal values must have same dtype, got {alpha.dtype} and {beta.dtype}")
    if alpha.dtype not in supported:
        raise TypeError("Only float32 and float64 inputs are supported as inputs to "
                        f"jax.scipy.linalg.eigh_tridiagonal, got {alpha.dtype} and {beta.dtype}")
    n = alpha.shape[0]
    if n <= 1:
        return jnp.real(alpha) if eigvals_only else (jnp.real(alpha), jnp.eye(n, dtype=alpha.dtype))
    if select == "a":
        first, last = 0, n - 1
    elif select == "i":
        if select_range is None:
            raise ValueError("for select='i', select_range must be specified.")
        if select_range[0] > select_range[1]:
            raise ValueError("Got empty index range in select_range.")
        first, last = int(select_range[0]), int(select_range[1])
    elif select == "v":
        raise NotImplementedError("eigh_tridiagonal(..., select='v') is not implemented yet.")
    else:
        raise ValueError("'select must have a value in {'a', 'i', 'v'}.")
    matrix = jnp.diag(alpha) + jnp.diag(beta, 1) + jnp.diag(jnp.conj(beta), -1)
    v, w = lax_linalg.eigh(matrix, symmetrize_input=False)
    w, v = w[first:last + 1], v[:, first:last + 1]
    return w if eigvals_only else (w, v)
