"""Array creation: zeros, ones, full, arange, linspace, eye, and the ``*_like`` family."""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ember import dtypes, errors, lax
from ember.core.array import Array
from ember.core.trace import Tracer
from ember.lax.base import aval, shape_tuple
from ember.lax.creation import like_aval
from ember.numpy.array_api import place
from ember.numpy.core import asarray, broadcast_to, ensure_array, full
from ember.numpy.shape_ops import moveaxis
from ember.numpy.ufuncs import power


def _shape(shape: Any) -> tuple[int, ...]:
    return shape_tuple(shape)


def zeros(shape: Any, dtype: Any = None, *, device: Any = None) -> Any:
    return full(shape, 0, dtype or dtypes.default_float_dtype(), device=device)


def ones(shape: Any, dtype: Any = None, *, device: Any = None) -> Any:
    return full(shape, 1, dtype or dtypes.default_float_dtype(), device=device)


def empty(shape: Any, dtype: Any = None, *, device: Any = None) -> Any:
    """Zeros: ember arrays are immutable, so an uninitialized array has no use."""
    return zeros(shape, dtype, device=device)


def _like(a: Any) -> Any:
    """The abstract value a ``*_like`` function copies: an array's, or any object's with ``shape``
    and ``dtype`` (a ``ShapeDtypeStruct``: ``lax.creation.like_aval``)."""
    return like_aval(a if hasattr(a, "shape") and hasattr(a, "dtype") else ensure_array(a))


def full_like(a: Any, fill_value: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    """``full`` with ``a``'s shape and dtype; a weakly typed ``a`` gives a weak result (as in JAX), and
    a typed key array gives keys whose data words all hold ``fill_value`` (``lax.full_like``)."""
    if dtype is None and hasattr(a, "_key_data"):
        return place(lax.full_like(a, fill_value, shape=shape), device)
    like = _like(a)
    out = full(like.shape if shape is None else _shape(shape), fill_value, like.dtype if dtype is None else dtype)
    if dtype is None and like.weak_type:
        out = lax.convert_element_type(out, aval(out).dtype, weak_type=True)
    return place(out, device)


def zeros_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    return full_like(a, 0, dtype, shape, device=device)


def ones_like(a: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    return full_like(a, 1, dtype, shape, device=device)


def empty_like(prototype: Any, dtype: Any = None, shape: Any = None, *, device: Any = None) -> Any:
    return zeros_like(prototype, dtype, shape, device=device)


def _concrete_scalar(x: Any, what: str) -> Any:
    if isinstance(x, Tracer):
        raise x._trace.concretization_error(x, f"use as the {what} of jnp.arange (the length of the result "
                                               "must be known while tracing)", errors.ConcretizationTypeError)
    return x.item() if hasattr(x, "item") and np.ndim(x) == 0 else x


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None, *, device: Any = None) -> Any:
    """Evenly spaced values in ``[start, stop)``. The bounds must be concrete."""
    return place(_arange(start, stop, step, dtype), device)


def _arange(start: Any, stop: Any, step: Any, dtype: Any) -> Any:
    start = _concrete_scalar(start, "start")
    stop = _concrete_scalar(stop, "stop") if stop is not None else None
    step = _concrete_scalar(step, "step") if step is not None else None
    # JAX's rule: arange(n), and arange(0, n) without a step, are an iota of the dtype (ceil(n) long)
    counting = (stop is None or (step is None and start == 0)) and step is None
    if stop is None and step is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if any(np.iscomplexobj(v) for v in (start, stop, step)):
        raise ValueError("jnp.arange does not accept complex start/stop/step (as JAX since v0.10.0); pass real "
                         "bounds and a complex dtype")
    if dtype is None:
        dtype = dtypes.result_type(*(v for v in (start, stop, step) if v is not None))
    dtype = dtypes.requested_dtype(dtype)
    if counting and not dtypes.is_complex(dtype) and dtype != dtypes.bool_:
        return lax.iota(dtype, max(math.ceil(stop), 0))
    return asarray(np.arange(start, stop, step, dtype=np.float64 if dtypes.is_floating(dtype) else None)
                   .astype(dtype), dtype)


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, *, device: Any = None) -> Any:
    """``num`` evenly spaced samples over ``[start, stop]`` (works with traced endpoints)."""
    out = _linspace(start, stop, num, endpoint, retstep, dtype, axis)
    return (place(out[0], device), out[1]) if retstep else place(out, device)


def _linspace(start: Any, stop: Any, num: int, endpoint: bool, retstep: bool, dtype: Any, axis: int) -> Any:
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    start, stop = ensure_array(start), ensure_array(stop)
    dt = dtypes.result_type(start, stop, float) if dtype is None else dtypes.requested_dtype(dtype)
    compute = dt if dtypes.is_inexact(dt) else dtypes.default_float_dtype()
    start_c = lax.convert_element_type(start, compute)
    stop_c = lax.convert_element_type(stop, compute)
    bshape = np.broadcast_shapes(aval(start_c).shape, aval(stop_c).shape)
    start_c, stop_c = broadcast_to(start_c, bshape), broadcast_to(stop_c, bshape)
    div = (num - 1) if endpoint else num
    step = lax.div(lax.sub(stop_c, start_c), float(max(div, 1)))
    out_shape = (num,) + tuple(bshape)
    i = lax.convert_element_type(lax.broadcasted_iota(dtypes.int32, out_shape, 0), compute)
    s0 = lax.broadcast_in_dim(start_c, out_shape, tuple(range(1, len(out_shape))))
    st = lax.broadcast_in_dim(step, out_shape, tuple(range(1, len(out_shape))))
    out = lax.add(s0, lax.mul(i, st))
    if endpoint and num > 1:
        last = lax.broadcast_in_dim(stop_c, (1,) + tuple(bshape), tuple(range(1, len(out_shape))))
        out = lax.concatenate([lax.slice_in_dim(out, 0, num - 1), last], 0)
    if axis != 0:
        out = moveaxis(out, 0, axis)
    if not dtypes.is_inexact(dt):
        out = lax.floor(out)
    out = lax.convert_element_type(out, dt)
    if not retstep:
        return out
    if div <= 0:  # fewer than two samples span the interval: NumPy's step is NaN
        step = lax.mul(step, float("nan"))
    return out, lax.convert_element_type(step, dt)


def logspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, base: float = 10.0,
             dtype: Any = None, axis: int = 0) -> Any:
    lin = linspace(start, stop, num, endpoint=endpoint, axis=axis)
    out = power(base, lin)
    return out if dtype is None else lax.convert_element_type(out, dtypes.requested_dtype(dtype))


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, *, device: Any = None) -> Any:
    """A 2-D array with ones on the ``k``-th diagonal."""
    return place(_eye(N, M, k, dtype), device)


def _eye(N: int, M: int | None, k: int, dtype: Any) -> Any:
    M = N if M is None else M
    N, M, k = operator.index(N), operator.index(M), operator.index(k)
    dt = dtypes.default_float_dtype() if dtype is None else dtypes.requested_dtype(dtype)
    rows = lax.broadcasted_iota(dtypes.int32, (N, M), 0)
    cols = lax.broadcasted_iota(dtypes.int32, (N, M), 1)
    return lax.convert_element_type(lax.eq(lax.add(rows, k), cols), dt)


def identity(n: int, dtype: Any = None) -> Any:
    return eye(n, dtype=dtype)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Any:
    M = N if M is None else M
    dt = dtypes.canonicalize_dtype(dtype or dtypes.default_float_dtype())
    rows = lax.broadcasted_iota(dtypes.int32, (N, M), 0)
    cols = lax.broadcasted_iota(dtypes.int32, (N, M), 1)
    return lax.convert_element_type(lax.ge(lax.add(rows, k), cols), dt)


def meshgrid(*xi: Any, indexing: str = "xy", sparse: bool = False, copy: bool = True) -> list[Any]:
    arrays = [ensure_array(x).reshape(-1) if aval(ensure_array(x)).ndim != 1 else ensure_array(x) for x in xi]
    shape = [aval(a).shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        dim = i
        if indexing == "xy" and len(arrays) >= 2 and i < 2:
            dim = 1 - i
        if sparse:
            s = [1] * len(arrays)
            s[dim] = aval(a).shape[0]
            out.append(lax.reshape(a, s))
        else:
            out.append(lax.broadcast_in_dim(a, tuple(shape), (dim,)))
    return out


def copy(a: Any, order: Any = None) -> Any:
    return ensure_array(a)


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
    """An Array of the data of any object with ``__dlpack__`` (NumPy, PyTorch, JAX, ...), complex
    included; copied, as ember arrays are immutable, unless ``copy=False`` asks to share the buffer."""
    if copy is not False:
        return place(asarray(np.array(np.from_dlpack(x), copy=True)), device)
    # copy=False: share the producer's buffer (which it may still write, as the caller accepts).
    value = np.from_dlpack(x)
    if dtypes.canonicalize_dtype(value.dtype) != value.dtype:
        raise BufferError(f"from_dlpack: a {value.dtype} buffer needs a copy to become "
                          f"{dtypes.canonicalize_dtype(value.dtype)} (x64 is off), but copy=False")
    value = value.view()
    value.flags.writeable = False
    return place(Array(value), device)


def frombuffer(buffer: bytes, dtype: Any = float, count: int = -1, offset: int = 0) -> Any:
    return asarray(np.frombuffer(buffer, dtype=dtypes.dtype(dtype), count=count, offset=offset))
