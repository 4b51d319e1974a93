"""``lax.full`` and ``lax.full_like``: arrays of one value, as a broadcast of a scalar.

Unlike ``jnp.full`` they take only a scalar fill value, and the result is weakly typed exactly
when no dtype is given and the fill value (``full``) or the model array (``full_like``) is.
``sharding`` is accepted for JAX's signatures: ember has one device, where every array lives.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.core.array import Array, ensure_array
from ember.core.avals import ShapedArray
from ember.core.trace import Tracer
from ember.lax.base import aval, shape_tuple
from ember.lax.elementwise import convert_element_type
from ember.lax.shapes import broadcast

__all__ = ["full", "full_like"]


def like_aval(x: Any) -> ShapedArray:
    """The shape, dtype and weak type that a ``*_like`` function copies: an array's (or a scalar's),
    or those of any object with ``shape`` and ``dtype``, such as a ``ShapeDtypeStruct`` or an
    abstract value, as JAX takes them (optax calls ``zeros_like`` on ``eval_shape``'s results)."""
    if not isinstance(x, (Array, Tracer, np.ndarray, np.generic)) and hasattr(x, "shape") and hasattr(x, "dtype"):
        weak = bool(getattr(x, "weak_type", False))
        return ShapedArray(shape_tuple(x.shape), dtypes.canonicalize_dtype(x.dtype), weak)
    return aval(x)


def _shape(shape: Any) -> tuple[int, ...]:
    """A static shape, with JAX's errors: a non-integer entry, and a negative one."""
    entries = shape if isinstance(shape, (tuple, list)) else (shape,)
    if any(isinstance(d, (float, np.floating)) for d in entries):
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got {tuple(entries)}.")
    try:
        return shape_tuple(shape)
    except ValueError:
        raise TypeError("broadcast_in_dim shape must have every element be nonnegative, got "
                        f"{tuple(int(d) for d in entries)}.") from None


def full(shape: Any, fill_value: Any, dtype: Any = None, *, sharding: Any = None) -> Any:
    """An array of ``shape`` whose every element is the scalar ``fill_value`` (of ``dtype``, or the
    fill value's own type: weak for a Python scalar)."""
    shape = _shape(shape)
    fill_shape = np.shape(fill_value)
    if fill_shape:
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape {fill_shape}.")
    if dtype is None:
        dtype, weak = dtypes.value_dtype_and_weak(fill_value)
    else:
        weak = False
    fill = convert_element_type(ensure_array(fill_value), dtypes.canonicalize_dtype(dtype), weak)
    return broadcast(fill, shape)


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Any = None, sharding: Any = None) -> Any:
    """An array like ``x`` (its shape, dtype and weak type, unless ``dtype`` / ``shape`` say
    otherwise) whose every element is the scalar ``fill_value``. A typed key array gives keys
    whose data words all hold ``fill_value``, as in JAX."""
    key_data = getattr(x, "_key_data", None)
    if key_data is not None and dtype is None:  # (keys: ``ember.random.prng``, a node over its data)
        data_shape = tuple(np.shape(x) if shape is None else _shape(shape)) + tuple(np.shape(key_data)[-1:])
        return x._new(full(data_shape, fill_value, aval(key_data).dtype))
    like = like_aval(x)
    fill_shape = like.shape if shape is None else _shape(shape)
    if dtype is None:
        dtype, weak = like.dtype, like.weak_type
    else:
        weak = False
    if np.shape(fill_value):
        raise TypeError(f"full must be called with scalar fill_value, got fill_value.shape {np.shape(fill_value)}.")
    fill = convert_element_type(ensure_array(fill_value), dtypes.canonicalize_dtype(dtype), weak)
    return broadcast(fill, fill_shape)
