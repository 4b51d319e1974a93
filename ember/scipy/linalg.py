"""Dense linear algebra with SciPy's conventions (``jax.scipy.linalg``), built on
``ember.numpy.linalg`` and the ``ember.lax.linalg`` decompositions.

Where SciPy and NumPy differ, SciPy wins here: ``cholesky`` is upper triangular by default,
``lu`` returns a permutation *matrix* ``p`` with ``a == p @ l @ u``, ``eigh`` returns
``(w, v)``. The ``overwrite_*`` and ``check_finite`` flags are accepted and ignored, as in
JAX (arrays are immutable, and nothing is checked at run time).
"""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.lax import linalg as lax_linalg
from ember.numpy import linalg as np_linalg
from ember.numpy.core import ensure_array, promote_dtypes_inexact

__all__ = ["cho_factor", "cho_solve", "cholesky", "det", "eigh", "expm", "inv", "lu", "lu_factor", "lu_solve",
           "qr", "solve", "solve_triangular", "svd"]


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
