"""Polynomials as coefficient arrays (highest power first, NumPy's convention): ``polyval``
evaluates one, ``vander`` builds the matrix of powers that fits one."""
from __future__ import annotations

from typing import Any

from ember import dtypes, lax
from ember.numpy.core import broadcast_shapes, ensure_array, promote_dtypes
from ember.numpy.creation import zeros
from ember.numpy.static_args import static_bool, static_int
from ember.numpy.ufuncs import power

__all__ = ["polyval", "vander"]


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
