"""Elementwise float functions beyond the basic ufuncs: NaN-ignoring ``fmax``/``fmin``, the
float decomposition ``frexp``/``ldexp``/``modf``, ``spacing`` and the Bessel function ``i0``.

``frexp`` and ``ldexp`` work on the bit pattern (``bitcast_convert_type``), so they are exact
for every finite value, as NumPy's are.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.numpy.core import broadcast_operands, ensure_array, promote_and_broadcast, promote_dtypes_inexact
from ember.numpy.ufuncs import copysign, greater, isinf, isnan, less, nextafter, where

__all__ = ["fmax", "fmin", "frexp", "i0", "ldexp", "modf", "spacing"]

_BITS_OF_WIDTH = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def fmax(x1: Any, x2: Any) -> Any:
    """Elementwise maximum that ignores a NaN when the other operand is a number."""
    x1, x2 = promote_and_broadcast(x1, x2, name="fmax")
    return where(greater(x1, x2) | isnan(x2), x1, x2)  # (complex values: lexicographic)


def fmin(x1: Any, x2: Any) -> Any:
    """Elementwise minimum that ignores a NaN when the other operand is a number."""
    x1, x2 = promote_and_broadcast(x1, x2, name="fmin")
    return where(less(x1, x2) | isnan(x2), x1, x2)


def _float_layout(dtype: np.dtype) -> tuple[np.dtype, int, int]:
    """The unsigned type of ``dtype``'s width, its mantissa bits and its exponent bias."""
    info = dtypes.finfo(dtype)
    return np.dtype(_BITS_OF_WIDTH[np.dtype(dtype).itemsize]), int(info.nmant), int(info.maxexp) - 1


def _uint(value: int, dtype: np.dtype) -> Any:
    return lax.convert_element_type(np.array(value, dtype), dtype)


def frexp(x: Any, /) -> tuple[Any, Any]:
    """``x == mantissa * 2**exponent`` with ``0.5 <= |mantissa| < 1`` (zero, inf and NaN give
    ``(x, 0)``); the exponent is int32."""
    (x,) = promote_dtypes_inexact(ensure_array(x))
    if dtypes.is_complex(x.dtype):
        raise TypeError("frexp does not support complex-valued inputs")
    x = lax.convert_element_type(x, x.dtype)  # a weak input gives a strong result, as in JAX
    uint, nmant, bias = _float_layout(x.dtype)
    subnormal = lax.lt(lax.abs(x), lax.convert_element_type(dtypes.finfo(x.dtype).tiny, x.dtype))
    scaled = where(subnormal, lax.mul(x, lax.convert_element_type(2.0 ** nmant, x.dtype)), x)
    bits = lax.bitcast_convert_type(scaled, uint)
    exponent_mask = _uint((2 * bias + 1) << nmant, uint)
    biased = lax.convert_element_type(lax.shift_right_logical(lax.bitwise_and(bits, exponent_mask),
                                                              _uint(nmant, uint)), np.int32)
    exponent = lax.sub(biased, _int32(bias - 1))
    exponent = where(subnormal, lax.sub(exponent, _int32(nmant)), exponent)
    half_exponent = _uint((bias - 1) << nmant, uint)
    mantissa_bits = lax.bitwise_or(lax.bitwise_and(bits, lax.bitwise_not(exponent_mask)), half_exponent)
    mantissa = lax.bitcast_convert_type(mantissa_bits, x.dtype)
    special = lax.eq(x, lax.convert_element_type(0, x.dtype)) | isinf(x) | isnan(x)
    return where(special, x, mantissa), where(special, lax.convert_element_type(0, np.int32), exponent)


def _power_of_two(k: Any, dtype: np.dtype) -> Any:
    """``2.0**k`` exactly, for integer ``k`` in the normal exponent range of ``dtype``."""
    uint, nmant, bias = _float_layout(dtype)
    biased = lax.convert_element_type(lax.add(k, lax.convert_element_type(bias, k.dtype)), uint)
    return lax.bitcast_convert_type(lax.shift_left(biased, _uint(nmant, uint)), dtype)


def ldexp(x1: Any, x2: Any, /) -> Any:
    """``x1 * 2**x2`` for an integer ``x2``, exact unless the result under- or overflows."""
    x2 = ensure_array(x2)
    if not dtypes.issubdtype(x2.dtype, np.integer):
        raise ValueError(f"ldexp not supported for input types ({ensure_array(x1).dtype}, {x2.dtype}): "
                         "the exponent x2 must be an integer array")
    (x1,) = promote_dtypes_inexact(ensure_array(x1))
    if dtypes.is_complex(x1.dtype):
        raise ValueError(f"ldexp not supported for input types ({x1.dtype!r}, {x2.dtype!r})")
    x1, x2 = broadcast_operands(x1, lax.convert_element_type(x2, np.int32), name="ldexp")
    _, _, bias = _float_layout(x1.dtype)
    # Three factors, each a normal power of two, cover every exponent a finite result can need.
    limit = _int32(bias - 1)
    k = lax.clamp(_int32(-3 * (bias - 1)), x2, _int32(3 * (bias - 1)))
    parts = []
    for _ in range(2):
        part = lax.clamp(lax.neg(limit), k, limit)
        parts.append(part)
        k = lax.sub(k, part)
    parts.append(k)
    out = x1
    for part in parts:
        out = lax.mul(out, _power_of_two(part, x1.dtype))
    return out


def _int32(value: int) -> Any:
    return lax.convert_element_type(value, np.int32)


def modf(x: Any, /, out: None = None) -> tuple[Any, Any]:
    """The fractional and integral parts of ``x``, both with ``x``'s sign (as JAX: ``inf`` has
    fractional part NaN)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.modf is not supported.")
    (x,) = promote_dtypes_inexact(ensure_array(x))
    whole = where(lax.lt(x, lax.convert_element_type(0, x.dtype)), lax.ceil(x), lax.floor(x))
    return lax.sub(x, whole), whole


def spacing(x: Any, /) -> Any:
    """The distance from ``x`` to the next float away from zero (negative for negative ``x``)."""
    (x,) = promote_dtypes_inexact(ensure_array(x))
    if dtypes.is_complex(x.dtype):
        raise ValueError("jnp.spacing is not defined for complex inputs.")
    away = copysign(lax.convert_element_type(np.inf, x.dtype), x)
    return where(isinf(x), lax.convert_element_type(np.nan, x.dtype), lax.sub(nextafter(x, away), x))


_I0_SERIES_LIMIT = 20.0  # |x| below: power series; above: the asymptotic expansion
_I0_SERIES_TERMS = 45
_I0_ASYMPTOTIC_TERMS = 25


def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind, order 0.

    ``sum_k (x²/4)^k / (k!)²`` converges quickly for small ``|x|``; for large ``|x|`` the
    asymptotic series ``e^|x| / sqrt(2π|x|) · sum_k ((2k-1)!!)² / (k! (8|x|)^k)`` does. Each branch
    sees a safe argument where it is not chosen, so gradients stay finite.
    """
    (x,) = promote_dtypes_inexact(ensure_array(x))
    if dtypes.is_complex(x.dtype):
        raise ValueError(f"Unsupported input type to jax.numpy.i0: {x.dtype}")

    def const(value: float) -> Any:
        return lax.convert_element_type(value, x.dtype)

    small = lax.lt(lax.abs(x), const(_I0_SERIES_LIMIT))
    x_small = where(small, x, const(0.0))
    quarter_square = lax.mul(lax.mul(x_small, x_small), const(0.25))
    term, series = const(1.0), const(1.0)
    for k in range(1, _I0_SERIES_TERMS):
        term = lax.mul(term, lax.div(quarter_square, const(float(k * k))))
        series = lax.add(series, term)
    x_large = where(small, const(_I0_SERIES_LIMIT), lax.abs(x))
    inverse_8x = lax.div(const(0.125), x_large)
    term, asymptotic = const(1.0), const(1.0)
    for k in range(1, _I0_ASYMPTOTIC_TERMS):
        term = lax.mul(term, lax.mul(inverse_8x, const((2 * k - 1) ** 2 / k)))
        asymptotic = lax.add(asymptotic, term)
    # e^|x| / sqrt(|x|) computed as (e^(|x|/2))² / sqrt(|x|) stays finite as long as the result does.
    half_exp = lax.exp(lax.mul(x_large, const(0.5)))
    scale = lax.div(lax.mul(half_exp, lax.div(half_exp, lax.sqrt(x_large))), const(np.sqrt(2 * np.pi)))
    result = where(small, series, lax.mul(scale, asymptotic))
    return lax.convert_element_type(result, x.dtype, x.aval.weak_type)
