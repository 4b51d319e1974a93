"""``jax.ops``: reductions within segments (``segment_sum``, ``segment_prod``, ``segment_max``,
``segment_min``), JAX's signatures and results.

Each is one scatter into an array of ``num_segments`` rows holding the reduction's identity
(``out.at[segment_ids].add(data)``), so it differentiates and batches as ember's scatters do.
``segment_ids`` are not wrapped: out-of-range ids, negative ones included, are dropped by the
default ``mode``. ``bucket_size`` scatters each run of ``bucket_size`` rows into a row of its own
and reduces those rows at the end (fewer terms per sum, for accuracy).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import ember.numpy as jnp
from ember.core.array import ensure_array
from ember.core.trace import Tracer
from ember.errors import ConcretizationTypeError
from ember.lax.indexing import GatherScatterMode

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _identity(op: str, dtype: np.dtype) -> Any:
    """The value every segment starts from: the reduction's identity in ``dtype``."""
    if op == "add":
        return 0
    if op == "multiply":
        return 1
    if dtype == np.bool_:
        return op == "min"
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return info.max if op == "min" else info.min
    return float("inf") if op == "min" else float("-inf")


def _static_count(name: str, num_segments: Any, segment_ids: Any) -> int:
    """``num_segments``, or ``max(segment_ids) + 1``, as the Python int the output shape needs."""
    if num_segments is None:
        if isinstance(segment_ids, Tracer):
            raise segment_ids._trace.concretization_error(
                segment_ids, f"{name}() without num_segments (the output's length must be known while tracing: "
                             "pass num_segments)", ConcretizationTypeError)
        return int(np.max(np.asarray(segment_ids))) + 1
    if isinstance(num_segments, Tracer):
        raise num_segments._trace.concretization_error(
            num_segments, f"{name}() `num_segments` argument (it must be static)", ConcretizationTypeError)
    count = int(num_segments)
    if count < 0:
        raise ValueError("num_segments must be non-negative.")
    return count


def _segment_update(name: str, op: str, reducer: Callable, data: Any, segment_ids: Any, num_segments: Any,
                    indices_are_sorted: bool, unique_indices: bool, bucket_size: int | None, mode: Any,
                    out_sharding: Any) -> Any:
    for x in (data, segment_ids):
        if not (isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float, complex)) or hasattr(x, "_value")):
            raise TypeError(f"{name} requires ndarray or scalar arguments, got {type(x)} at position "
                            f"{0 if x is data else 1}.")
    if out_sharding is not None:
        raise NotImplementedError(f"{name}: out_sharding is not supported by ember")
    mode = GatherScatterMode.FILL_OR_DROP if mode is None else mode
    data, segment_ids = ensure_array(data), ensure_array(segment_ids)
    dtype = data.dtype
    count = _static_count(name, num_segments, segment_ids)
    hints = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode,
                 wrap_negative_indices=False)
    identity = _identity(op, np.dtype(dtype))
    if bucket_size is None:
        out = jnp.full((count,) + data.shape[1:], identity, dtype=dtype)
        return getattr(out.at[segment_ids], op)(data, **hints)
    num_buckets = -(-segment_ids.size // bucket_size)
    out = jnp.full((num_buckets, count) + data.shape[1:], identity, dtype=dtype)
    index = (jnp.arange(segment_ids.shape[0]) // bucket_size, segment_ids[None, :])
    return reducer(getattr(out.at[index], op)(data, **hints), axis=0).astype(dtype)


def segment_sum(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None,
                out_sharding: Any = None) -> Any:
    """The sum of the rows of ``data`` in each segment: ``out[s] = sum(data[segment_ids == s])``,
    shape ``(num_segments,) + data.shape[1:]``. ``num_segments`` defaults to ``max(segment_ids) + 1``
    (it must be static under ``jit``)."""
    return _segment_update("segment_sum", "add", jnp.sum, data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_prod(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                 unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None,
                 out_sharding: Any = None) -> Any:
    """The product of the rows of ``data`` in each segment (1 for an empty one)."""
    return _segment_update("segment_prod", "multiply", jnp.prod, data, segment_ids, num_segments,
                           indices_are_sorted, unique_indices, bucket_size, mode, out_sharding)


def segment_max(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None,
                out_sharding: Any = None) -> Any:
    """The maximum of the rows of ``data`` in each segment (the dtype's lowest value, -inf for
    floats, for an empty one)."""
    return _segment_update("segment_max", "max", jnp.max, data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)


def segment_min(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
                unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None,
                out_sharding: Any = None) -> Any:
    """The minimum of the rows of ``data`` in each segment (the dtype's highest value, inf for
    floats, for an empty one)."""
    return _segment_update("segment_min", "min", jnp.min, data, segment_ids, num_segments, indices_are_sorted,
                           unique_indices, bucket_size, mode, out_sharding)

