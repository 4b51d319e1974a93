"""Polynomials as coefficient arrays (highest power first, NumPy's convention): ``polyval``
evaluates one, ``vander`` builds the matrix of powers that fits one, ``polyfit`` fits one,
``roots`` / ``poly`` go between coefficients and zeros, and the arithmetic (``polyadd``,
``polymul``, ``polydiv``, ``polyder``, ``polyint``, ...) follows JAX's (inexact results where
JAX's are, zeros untrimmed unless asked)."""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.numpy.convolution import convolve
from ember.numpy.core import asarray, broadcast_shapes, ensure_array, promote_dtypes, promote_dtypes_inexact
from ember.numpy.creation import arange, full, ones, zeros
from ember.numpy.linalg import diag, dot, eigvals, inv, lstsq, outer
from ember.numpy.reductions import all as _all, argmin, prod
from ember.numpy.shape_ops import atleast_1d, concatenate, roll, trim_zeros
from ember.numpy.static_args import static_bool, static_int, static_value
from ember.numpy.ufuncs import maximum, power, sqrt, true_divide, where

__all__ = ["poly", "polyadd", "polyder", "polydiv", "polyfit", "polyint", "polymul", "polysub", "polyval", "roots",
           "vander"]


def polyval(p: Any, x: Any, *, unroll: int = 16) -> Any:
    """``p[0] * x**(n-1) + ... + p[n-1]`` by Horner's rule, as a ``scan`` over the coefficients
    (``unroll`` steps per iteration). Integer polynomials stay integer (no promotion to float).
    Extra trailing dimensions of ``p`` broadcast with ``x``: many polynomials at once."""
    p, x = (ensure_array(v) for v in promote_dtypes(p, x))
    if p.ndim == 0:
        raise ValueError("polyval: p must be a 1-D (or higher) array of coefficients, got a scalar")
    initial = zeros(broadcast_shapes(p.shape[1:], x.shape), x.dtype)
    result, _ = lax.scan(lambda total, coefficient: (total * x + coefficient, None), initial, p, unroll=unroll)
    return result


def vander(x: Any, N: int | None = None, increasing: bool = False) -> Any:
    """The Vandermonde matrix of 1-D ``x``: column ``j`` is ``x**(N - 1 - j)`` (``x**j`` if
    ``increasing``); ``N`` defaults to ``len(x)``."""
    x = ensure_array(x)
    if x.ndim != 1:
        raise ValueError(f"x must be a one-dimensional array; got shape {x.shape}")
    if x.dtype == dtypes.bool_:
        raise TypeError("vander needs numeric x, got a boolean array; convert it, e.g. x.astype(int)")
    N = x.shape[0] if N is None else static_int(N, "N", "vander")
    if N < 0:
        raise ValueError(f"N must be nonnegative; got {N}")
    exponents = lax.iota(x.dtype, N)
    if not static_bool(increasing, "increasing", "vander"):
        exponents = lax.rev(exponents, (0,))
    return power(lax.expand_dims(x, (1,)), lax.expand_dims(exponents, (0,)))


def _vector(name: str, *arrays: Any) -> list[Any]:
    """The operands, 1-D (JAX's coefficient functions index ``p[0]`` and take ``len(p)``)."""
    out = []
    for a in arrays:
        if a.ndim != 1:
            raise ValueError(f"jnp.{name} needs 1-D coefficient arrays, got shape {a.shape}")
        out.append(a)
    return out


def polyadd(a1: Any, a2: Any) -> Any:
    """The sum of two polynomials: the shorter is added to the trailing (low-order) end of the longer."""
    a1, a2 = promote_dtypes(a1, a2)
    if a2.shape[0] <= a1.shape[0]:
        return a1.at[a1.shape[0] - a2.shape[0]:].add(a2)
    return a2.at[a2.shape[0] - a1.shape[0]:].add(a1)


def polysub(a1: Any, a2: Any) -> Any:
    """``a1 - a2`` as polynomials (promoted, not made inexact, as JAX)."""
    a1, a2 = promote_dtypes(a1, a2)
    return polyadd(a1, lax.neg(a2))


def polymul(a1: Any, a2: Any, *, trim_leading_zeros: bool = False) -> Any:
    """The product of two polynomials: the full convolution of their coefficients (inexact).
    ``trim_leading_zeros`` (concrete inputs only) drops their leading zeros first, as NumPy."""
    a1, a2 = promote_dtypes_inexact(a1, a2)
    if static_bool(trim_leading_zeros, "trim_leading_zeros", "polymul") and (a1.shape[0] > 1 or a2.shape[0] > 1):
        a1, a2 = trim_zeros(a1, trim="f"), trim_zeros(a2, trim="f")
    if a1.shape[0] == 0:
        a1 = zeros(1, a2.dtype)
    if a2.shape[0] == 0:
        a2 = zeros(1, a1.dtype)
    return convolve(a1, a2, mode="full")


def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> tuple[Any, Any]:
    """``(quotient, remainder)`` of ``u / v`` by long division (unrolled: the degrees are static).
    The remainder keeps ``u``'s length unless ``trim_leading_zeros`` (concrete inputs only) drops
    leading entries below ``sqrt(eps)``, as JAX approximates NumPy's tolerance."""
    u, v = _vector("polydiv", *promote_dtypes_inexact(u, v))
    m, n = u.shape[0] - 1, v.shape[0] - 1
    scale = 1.0 / v[0]
    q = zeros(max(m - n + 1, 1), u.dtype)
    for k in range(m - n + 1):
        d = scale * u[k]
        q = q.at[k].set(d)
        u = u.at[k:k + n + 1].add(-d * v)
    if static_bool(trim_leading_zeros, "trim_leading_zeros", "polydiv"):
        values = np.abs(np.asarray(u))
        big = np.flatnonzero(values > np.sqrt(float(dtypes.finfo(u.dtype).eps)))
        u = u[int(big[0]) if big.size else u.shape[0]:]
    return q, u


def polyder(p: Any, m: int = 1) -> Any:
    """The ``m``-th derivative: coefficient ``i`` times the falling factorial of its power (inexact)."""
    m = static_value(m, operator.index, "m", "polyder", "which must be a static Python int")
    p, = promote_dtypes_inexact(p)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    if m == 0:
        return p
    n = p.shape[0]
    coeff = prod(lax.expand_dims(arange(m, n, dtype=p.dtype), (0,))
                 - lax.expand_dims(arange(m, dtype=p.dtype), (1,)), axis=0)
    return p[:max(n - m, 0)] * lax.rev(coeff, (0,))


def polyint(p: Any, m: int = 1, k: Any = None) -> Any:
    """The ``m``-th antiderivative; ``k`` gives the integration constants (a scalar for all, or
    ``m`` of them, the first for the outermost integral, as NumPy)."""
    m = static_value(m, operator.index, "m", "polyint", "which must be a static Python int")
    p, k = promote_dtypes_inexact(p, 0 if k is None else k)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = atleast_1d(k)
    if k.shape[0] == 1:
        k = full((m,), k[0])
    if k.shape != (m,):
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    if m == 0:
        return p
    grid = (lax.expand_dims(arange(p.shape[0] + m, dtype=p.dtype), (0,))
            - lax.expand_dims(arange(m, dtype=p.dtype), (1,)))
    coeff = lax.rev(prod(maximum(1, grid), axis=0), (0,))
    return true_divide(concatenate((p, k)), coeff)


def poly(seq_of_zeros: Any) -> Any:
    """The monic polynomial with the given zeros (of a non-empty square matrix: its eigenvalues,
    so complex, as in JAX): a product of ``(x - z)`` factors, built by convolution."""
    z, = promote_dtypes_inexact(seq_of_zeros)
    z = atleast_1d(z)
    if z.ndim == 2 and z.shape[0] == z.shape[1] and z.shape[0] != 0:
        z = eigvals(z)
    if z.ndim != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if z.shape[0] == 0:
        return ones((), z.dtype)
    a = ones((1,), z.dtype)
    for i in range(z.shape[0]):
        a = convolve(a, concatenate((ones((1,), z.dtype), -z[i:i + 1])), mode="full")
    return a


def _roots_no_zeros(p: Any) -> Any:
    """The eigenvalues of the companion matrix of ``p`` (``p[0]`` nonzero)."""
    if p.shape[0] < 2:
        return zeros(0, dtypes.complex_dtype(p.dtype))
    a = diag(ones((p.shape[0] - 2,), p.dtype), -1)
    a = a.at[0, :].set(-p[1:] / p[0])
    return eigvals(a)


def roots(p: Any, *, strip_zeros: bool = True) -> Any:
    """The zeros of the polynomial ``p``, complex, as eigenvalues of its companion matrix.
    Leading zero coefficients are dropped (``strip_zeros``, which needs a concrete ``p``); with
    ``strip_zeros=False`` (traceable) the output keeps a fixed length, as JAX's: one NaN per
    leading zero, at the end."""
    p, = promote_dtypes_inexact(p)
    p = atleast_1d(p)
    if p.ndim != 1:
        raise ValueError("Input must be a rank-1 array.")
    if p.shape[0] < 2:
        return zeros(0, dtypes.complex_dtype(p.dtype))
    num_leading_zeros = where(_all(p == 0), p.shape[0], argmin(p == 0))
    if static_bool(strip_zeros, "strip_zeros", "roots"):
        count = static_value(num_leading_zeros, int, "p", "roots",
                             "whose leading zeros are stripped; pass strip_zeros=False under jit, but leading "
                             "zeros then give NaN roots")
        return _roots_no_zeros(p[count:])
    p = where(p.shape[0] == num_leading_zeros, asarray(1.0, p.dtype), p)  # (all zero: no LAPACK error)
    r = _roots_no_zeros(roll(p, -num_leading_zeros))
    r = lax.sort_key_val(r == 0, r)[1]  # (the zero roots, from the rolled-in zeros, last)
    nan = asarray(complex(np.nan, np.nan), r.dtype)
    return where(arange(r.shape[0]) < r.shape[0] - num_leading_zeros, r, nan)


def polyfit(x: Any, y: Any, deg: int, rcond: float | None = None, full: bool = False, w: Any = None,
            cov: bool = False) -> Any:
    """The least-squares polynomial of degree ``deg`` through ``(x, y)`` (``y`` 2-D: one fit per
    column), on a Vandermonde matrix with unit-norm columns for conditioning. ``full`` adds
    ``(residuals, rank, singular values, rcond)``; ``cov`` the coefficients' covariance."""
    x, y = ensure_array(x), ensure_array(y)
    deg = static_value(deg, int, "deg", "polyfit", "which must be a static Python int")
    order = deg + 1
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if x.ndim != 1:
        raise TypeError("expected 1D vector for x")
    if x.size == 0:
        raise TypeError("expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise TypeError("expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise TypeError("expected x and y to have same length")
    if rcond is None:
        rcond = x.shape[0] * float(dtypes.finfo(dtypes.to_inexact_dtype(x.dtype)).eps)
    rcond = static_value(rcond, float, "rcond", "polyfit", "which must be a static Python float")
    lhs, rhs = vander(x, order), y
    if w is not None:
        w, = promote_dtypes_inexact(w)
        if w.ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if w.shape[0] != y.shape[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * w[:, None]
        rhs = rhs * (w[:, None] if rhs.ndim == 2 else w)
    scale = sqrt((lhs * lhs).sum(axis=0))
    lhs = lhs / scale[None, :]
    c, resids, rank, s = lstsq(lhs, rhs, rcond)
    c = (c.T / scale[None, :]).T if c.ndim > 1 else c / scale
    if full:
        return c, resids, rank, s, asarray(rcond)
    if not cov:
        return c
    vbase = inv(dot(lhs.T, lhs)) / outer(scale, scale)
    if cov == "unscaled":
        fac = asarray(1.0)
    else:
        if x.shape[0] <= order:
            raise ValueError("the number of data points must exceed order to scale the covariance matrix")
        fac = resids / (x.shape[0] - order)
    if y.ndim == 1:
        return c, vbase * atleast_1d(fac)[None]
    return c, vbase[:, :, None] * atleast_1d(fac)[None, None, :]
