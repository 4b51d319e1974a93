"""Array construction, dtype promotion and NumPy broadcasting, in terms of lax."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember import dtypes, lax
from ember.core.avals import ShapedArray
from ember.core.trace import Tracer
from ember.lax.base import aval, is_python_scalar
from ember.lax.conversions import convert_values
from ember.runtime.array import Array


def is_array(x: Any) -> bool:
    return isinstance(x, (Array, Tracer))


def asarray(a: Any, dtype: Any = None, order: str | None = None, *, copy: bool | None = None) -> Any:
    """An ember array from ``a`` (arrays, NumPy arrays, scalars, nested lists of them)."""
    if dtype is not None:
        dtype = dtypes.canonicalize_dtype(dtype)
    if is_array(a):
        return a if dtype is None else lax.convert_element_type(a, dtype)
    if isinstance(a, (list, tuple)):
        return _array_from_sequence(a, dtype)
    if hasattr(a, "__jax_array__"):
        return asarray(a.__jax_array__(), dtype)
    if is_python_scalar(a) or isinstance(a, (np.ndarray, np.generic)) or hasattr(a, "__array__"):
        dt, weak = dtypes.value_dtype_and_weak(a) if not hasattr(a, "__array__") or isinstance(
            a, (np.ndarray, np.generic)) else (dtypes.canonicalize_dtype(np.asarray(a).dtype), False)
        target = dtype or dt
        if isinstance(a, int) and dtype is not None:
            dt = target  # straight into the requested type, as JAX: asarray(2**32 - 1, uint32) fits
        value = np.array(a, dtype=dt if is_python_scalar(a) else None)
        if value.dtype != target:
            value = convert_values(value, target)
        return Array(np.array(value, dtype=target), ShapedArray(value.shape, target, weak and dtype is None))
    if isinstance(a, complex):
        raise TypeError("ember does not support complex numbers yet")
    raise TypeError(f"cannot convert a value of type {type(a).__name__} to an ember array")


def array(object: Any, dtype: Any = None, copy: bool = True, order: str | None = None, ndmin: int = 0) -> Any:
    out = asarray(object, dtype)
    if ndmin > aval(out).ndim:
        out = lax.broadcast(out, (1,) * (ndmin - aval(out).ndim))
    return out


def _array_from_sequence(seq: Sequence, dtype: Any) -> Any:
    leaves = _flatten_nested(seq)
    if any(isinstance(x, Tracer) for x in leaves):
        from ember.numpy.shape_ops import stack

        return stack([asarray(x, dtype) for x in seq])
    if dtype is None:  # a list of scalars is strongly typed, as in JAX
        dtype = dtypes.result_type(*leaves) if leaves else dtypes.default_float_dtype()
    value = np.array(_to_host(seq))
    if value.dtype == object:
        raise ValueError(f"cannot build an array from a ragged or mixed sequence {seq!r}")
    return Array(np.array(convert_values(value, dtype), dtype=dtype), ShapedArray(value.shape, dtype, False))


def _to_host(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_to_host(v) for v in x]
    if isinstance(x, Array):
        return np.asarray(x)
    return x


def _flatten_nested(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return [leaf for v in x for leaf in _flatten_nested(v)]
    return [x]


# --- promotion and broadcasting ---------------------------------------------------------------
def result_type_weak(*args: Any) -> tuple[np.dtype, bool]:
    return dtypes._result_type_weak(args)


def promote_dtypes(*args: Any) -> list[Any]:
    """Convert every operand to the promoted dtype (weak types follow JAX's lattice)."""
    args = [ensure_array(a) for a in args]
    if len(args) < 2:
        return args
    dt, weak = result_type_weak(*args)
    return [lax.convert_element_type(a, dt, weak) for a in args]


def promote_dtypes_inexact(*args: Any) -> list[Any]:
    """Like promote_dtypes, then integers and bools become the default float (as ``jnp.sin(1)``)."""
    args = [ensure_array(a) for a in args]
    dt, weak = result_type_weak(*args)
    dt = dtypes.to_inexact_dtype(dt)
    return [lax.convert_element_type(a, dt, weak) for a in args]


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy's broadcasting of shapes, with an error naming every shape."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            listed = ", ".join(str(tuple(s)) for s in shapes)
            raise TypeError(f"incompatible shapes for broadcasting: {listed}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to(x: Any, shape: Sequence[int]) -> Any:
    x = x if is_array(x) or is_python_scalar(x) else asarray(x)
    a = aval(x)
    shape = tuple(int(d) for d in shape)
    if a.shape == shape:
        return x if is_array(x) else asarray(x)
    if len(shape) < a.ndim or broadcast_shapes(a.shape, shape) != shape:
        raise ValueError(f"cannot broadcast an array of shape {a.shape} to shape {shape}")
    lead = len(shape) - a.ndim
    return lax.broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def broadcast_operands(*args: Any) -> list[Any]:
    """Broadcast non-scalar operands to a common shape; rank-0 operands stay scalars
    (elementwise primitives broadcast them for free)."""
    shapes = [aval(a).shape for a in args]
    nonscalar = [s for s in shapes if s != ()]
    if len(set(nonscalar)) <= 1:
        return list(args)
    shape = broadcast_shapes(*shapes)
    return [a if s == () or s == shape else broadcast_to(a, shape) for a, s in zip(args, shapes)]


def promote_and_broadcast(*args: Any) -> list[Any]:
    return broadcast_operands(*promote_dtypes(*args))


def ensure_array(x: Any) -> Any:
    """An Array or Tracer for anything array-like (Python scalars become weak arrays)."""
    return x if is_array(x) else asarray(x)
