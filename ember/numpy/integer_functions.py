"""Integer and bit functions: ``gcd``, ``lcm``, ``bitwise_count``, ``packbits``, ``unpackbits``."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.numpy.core import broadcast_shapes, broadcast_to, ensure_array, promote_dtypes
from ember.numpy.padding import pad
from ember.numpy.reductions import any as _any, sum as _sum
from ember.numpy.shape_ops import moveaxis, ravel, reshape
from ember.numpy.static_args import static_int
from ember.numpy.ufuncs import absolute, left_shift, right_shift, where

__all__ = ["bitwise_count", "gcd", "lcm", "packbits", "unpackbits"]


def _integer_operands(x1: Any, x2: Any, name: str) -> list[Any]:
    x1, x2 = promote_dtypes(x1, x2)
    shape = broadcast_shapes(x1.shape, x2.shape)
    x1, x2 = broadcast_to(x1, shape), broadcast_to(x2, shape)
    if not dtypes.issubdtype(x1.dtype, np.integer):
        raise ValueError(f"Arguments to jax.numpy.{name} must be integers, got dtype {x1.dtype}.")
    return [x1, x2]


def gcd(x1: Any, x2: Any) -> Any:
    """Greatest common divisor of ``|x1|`` and ``|x2|`` (Euclid's algorithm, all elements at once)."""
    x1, x2 = (absolute(x) for x in _integer_operands(x1, x2, "gcd"))
    zero = lax.convert_element_type(0, x1.dtype)

    def step(pair: tuple[Any, Any]) -> tuple[Any, Any]:
        a, b = pair
        nonzero = lax.ne(b, zero)
        safe_b = where(nonzero, b, lax.convert_element_type(1, b.dtype))
        return where(nonzero, b, a), where(nonzero, lax.rem(a, safe_b), zero)

    result, _ = lax.while_loop(lambda pair: _any(lax.ne(pair[1], zero)), step, (x1, x2))
    return result


def lcm(x1: Any, x2: Any) -> Any:
    """Least common multiple of ``|x1|`` and ``|x2|`` (0 when either is 0)."""
    x1, x2 = _integer_operands(x1, x2, "lcm")
    divisor = gcd(x1, x2)
    zero = lax.convert_element_type(0, x1.dtype)
    is_zero = lax.eq(divisor, zero)
    safe_divisor = where(is_zero, lax.convert_element_type(1, x1.dtype), divisor)
    result = where(is_zero, zero, absolute(lax.mul(lax.div(x1, safe_divisor), x2)))
    return lax.convert_element_type(result, x1.dtype, x1.aval.weak_type)


def bitwise_count(x: Any, /) -> Any:
    """The number of 1 bits in ``|x|``, as uint8 (NumPy's ``bitwise_count``)."""
    x = ensure_array(x)
    if not (dtypes.issubdtype(x.dtype, np.integer) or x.dtype == dtypes.bool_):
        raise TypeError(f"bitwise_count requires an integer or boolean array, got dtype {x.dtype}")
    if x.dtype == dtypes.bool_:
        return lax.convert_element_type(x, np.uint8)
    return lax.convert_element_type(lax.population_count(absolute(x)), np.uint8)


def _check_bitorder(bitorder: str) -> None:
    if bitorder not in ("big", "little"):
        raise ValueError(f"'order' must be either 'little' or 'big', got {bitorder!r}")


def _bit_shifts(bitorder: str) -> Any:
    shifts = np.arange(8, dtype=np.uint8)
    return ensure_array(shifts[::-1].copy() if bitorder == "big" else shifts)


def packbits(a: Any, axis: int | None = None, bitorder: str = "big") -> Any:
    """Pack the truthiness of ``a``'s elements into uint8 bytes along ``axis`` (flattened when
    None), eight to a byte, padding the last byte with zeros."""
    a = ensure_array(a)
    if not (dtypes.issubdtype(a.dtype, np.integer) or a.dtype == dtypes.bool_):
        raise TypeError(f"Expected an input array of integer or boolean data type, got {a.dtype}")
    _check_bitorder(bitorder)
    if axis is None:
        a, axis = ravel(a), 0
    axis = static_int(axis, "axis", "packbits")
    bits = lax.convert_element_type(lax.ne(a, lax.convert_element_type(0, a.dtype)), np.uint8)
    bits = moveaxis(bits, axis, -1)
    remainder = bits.shape[-1] % 8
    if remainder:
        bits = pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, 8 - remainder)])
    bits = reshape(bits, bits.shape[:-1] + (bits.shape[-1] // 8, 8))
    packed = _sum(left_shift(bits, _bit_shifts(bitorder)), axis=-1, dtype=np.uint8)
    return moveaxis(packed, -1, axis)


def unpackbits(a: Any, axis: int | None = None, count: int | None = None, bitorder: str = "big") -> Any:
    """Unpack uint8 ``a`` into its bits along ``axis`` (flattened when None); ``count`` keeps
    that many bits (negative: drops that many from the end; larger: pads with zeros)."""
    a = ensure_array(a)
    if a.dtype != np.uint8:
        raise TypeError(f"Expected an input array of unsigned byte data type, got {a.dtype}")
    _check_bitorder(bitorder)
    if axis is None:
        a, axis = ravel(a), 0
    axis = static_int(axis, "axis", "unpackbits")
    moved = moveaxis(a, axis, -1)
    shifted = right_shift(lax.expand_dims(moved, (moved.ndim,)), _bit_shifts(bitorder))
    bits = lax.bitwise_and(shifted, lax.convert_element_type(1, np.uint8))
    bits = reshape(bits, moved.shape[:-1] + (moved.shape[-1] * 8,))
    if count is not None:
        count = static_int(count, "count", "unpackbits")
        total = bits.shape[-1]
        keep = count if count >= 0 else max(total + count, 0)
        if keep <= total:
            bits = lax.slice_in_dim(bits, 0, keep, axis=bits.ndim - 1)
        else:
            bits = pad(bits, [(0, 0)] * (bits.ndim - 1) + [(0, keep - total)])
    return moveaxis(bits, -1, axis)
