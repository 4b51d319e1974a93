"""Shape primitives: broadcasting, reshaping, permuting, slicing, padding, joining."""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as np

from ember import dtypes
from ember.core import traits
from ember.core.avals import ShapedArray
from ember.core.traits import Family, free
from ember.lax import elementwise
from ember.lax.base import aval, canonical_axes, primitive, shape_tuple
from ember.lax.elementwise import add, convert_element_type, lt, select

# Primitives that only move data, or compute an element from its index (a view of the traits table).
INDEX_REMAPPING = traits.INDEX_REMAPPING


def _remapping(name: str, rule) -> Any:
    return primitive(name, rule, family=Family.INDEX_REMAPPING, linear=True)


# --- broadcast_in_dim ----------------------------------------------------------------
def _broadcast_in_dim_rule(x: ShapedArray, *, shape: tuple, broadcast_dimensions: tuple) -> ShapedArray:
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"broadcast_in_dim: operand of rank {x.ndim} needs {x.ndim} broadcast_dimensions, "
                        f"got {broadcast_dimensions}")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions) or list(broadcast_dimensions) != sorted(
            set(broadcast_dimensions)):
        raise TypeError(f"broadcast_in_dim: broadcast_dimensions {broadcast_dimensions} must be strictly "
                        f"increasing and within the result rank {len(shape)}")
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] not in (1, shape[d]):
            raise TypeError(f"broadcast_in_dim: cannot broadcast operand shape {x.shape} to {shape} "
                            f"(dimension {i} of size {x.shape[i]} maps to size {shape[d]})")
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


broadcast_in_dim_p = _remapping("broadcast_in_dim", _broadcast_in_dim_rule)


def broadcast_in_dim(x: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    """Broadcast ``x`` to ``shape``; operand dimension i becomes result dimension ``broadcast_dimensions[i]``."""
    shape = shape_tuple(shape)
    a = aval(x)
    if a.shape == shape and tuple(broadcast_dimensions) == tuple(range(len(shape))):
        return x
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=tuple(int(d) for d in broadcast_dimensions))


elementwise._broadcast_in_dim = broadcast_in_dim  # (the slot elementwise's size-1 broadcasting uses)


def broadcast(x: Any, sizes: Sequence[int]) -> Any:
    """Add leading dimensions of the given sizes."""
    a = aval(x)
    sizes = shape_tuple(sizes)
    return broadcast_in_dim(x, sizes + a.shape, tuple(range(len(sizes), len(sizes) + a.ndim)))


def broadcast_to_rank(x: Any, rank: int) -> Any:
    a = aval(x)
    return x if a.ndim >= rank else broadcast(x, (1,) * (rank - a.ndim))


# --- reshape -------------------------------------------------------------------------------
def _reshape_rule(x: ShapedArray, *, new_sizes: tuple, dimensions: Any) -> ShapedArray:
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise TypeError(f"reshape: cannot reshape an array of shape {x.shape} (size {x.size}) into shape "
                        f"{new_sizes} (size {int(np.prod(new_sizes, dtype=np.int64))})")
    return ShapedArray(tuple(new_sizes), x.dtype, x.weak_type)


reshape_p = _remapping("reshape", _reshape_rule)


def reshape(x: Any, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None) -> Any:
    """Row-major reshape (after transposing by ``dimensions`` if given)."""
    new_sizes = shape_tuple(new_sizes, "new_sizes")
    if dimensions is not None and tuple(dimensions) != tuple(range(aval(x).ndim)):
        x = transpose(x, dimensions)
    if aval(x).shape == new_sizes:
        return x
    return reshape_p.bind(x, new_sizes=new_sizes, dimensions=None)


# --- transpose ------------------------------------------------------------------------
def _transpose_rule(x: ShapedArray, *, permutation: tuple) -> ShapedArray:
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"transpose permutation isn't a permutation of operand dimensions, got permutation "
                        f"{permutation} for operand shape {x.shape}.")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


transpose_p = _remapping("transpose", _transpose_rule)


def transpose(x: Any, permutation: Sequence[int]) -> Any:
    permutation = tuple(int(p) for p in permutation)
    if permutation == tuple(range(aval(x).ndim)):
        return x
    return transpose_p.bind(x, permutation=permutation)


# --- squeeze / expand_dims -------------------------------------------------------------
def _squeeze_rule(x: ShapedArray, *, dimensions: tuple) -> ShapedArray:
    for d in dimensions:
        if not 0 <= d < x.ndim or x.shape[d] != 1:
            raise ValueError(f"squeeze: cannot remove dimension {d} of shape {x.shape}: only dimensions "
                             "of size 1 can be squeezed")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions), x.dtype, x.weak_type)


squeeze_p = _remapping("squeeze", _squeeze_rule)


def squeeze(x: Any, dimensions: Sequence[int]) -> Any:
    dims = canonical_axes(tuple(dimensions), aval(x).ndim, "dimension")
    if not dims:
        return x
    return squeeze_p.bind(x, dimensions=tuple(sorted(dims)))


def expand_dims(x: Any, dimensions: Sequence[int]) -> Any:
    """Insert size-1 dimensions at the given positions of the result."""
    a = aval(x)
    out_ndim = a.ndim + len(dimensions)
    dims = sorted(canonical_axes(tuple(dimensions), out_ndim, "dimension"))
    shape = list(a.shape)
    for d in dims:
        shape.insert(d, 1)
    kept = [i for i in range(out_ndim) if i not in dims]
    return broadcast_in_dim(x, tuple(shape), tuple(kept))


# --- rev ------------------------------------------------------------------------------
def _rev_rule(x: ShapedArray, *, dimensions: tuple) -> ShapedArray:
    canonical_axes(dimensions, x.ndim, "dimension")
    return x


rev_p = _remapping("rev", _rev_rule)


def rev(x: Any, dimensions: Sequence[int]) -> Any:
    dims = tuple(sorted(canonical_axes(tuple(dimensions), aval(x).ndim, "dimension")))
    return x if not dims else rev_p.bind(x, dimensions=dims)


# --- slice ------------------------------------------------------------------------------
def _slice_rule(x: ShapedArray, *, start_indices: tuple, limit_indices: tuple, strides: Any) -> ShapedArray:
    if not len(start_indices) == len(limit_indices) == x.ndim:
        raise TypeError(f"slice: need {x.ndim} start and limit indices for shape {x.shape}, got "
                        f"{start_indices} and {limit_indices}")
    strides = strides or (1,) * x.ndim
    shape = []
    for lo, hi, st, n in zip(start_indices, limit_indices, strides, x.shape):
        if not 0 <= lo <= hi <= n or st < 1:
            raise IndexError(f"slice: indices start={start_indices} limit={limit_indices} strides={strides} "
                             f"are invalid for shape {x.shape}")
        shape.append(-(-(hi - lo) // st))
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


slice_p = _remapping("slice", _slice_rule)


def slice(x: Any, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None) -> Any:
    """Static slice ``x[start:limit:stride]`` along every dimension."""
    a = aval(x)
    start, limit = tuple(int(i) for i in start_indices), tuple(int(i) for i in limit_indices)
    strides = tuple(int(s) for s in strides) if strides is not None and any(s != 1 for s in strides) else None
    if start == (0,) * a.ndim and limit == a.shape and strides is None:
        return x
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides)


def slice_in_dim(x: Any, start_index: int | None, limit_index: int | None, stride: int = 1, axis: int = 0) -> Any:
    a = aval(x)
    axis = canonical_axes(axis, a.ndim)[0]
    n = a.shape[axis]
    start, stop, _ = builtins.slice(start_index, limit_index).indices(n)
    starts = [0] * a.ndim
    limits = list(a.shape)
    strides = [1] * a.ndim
    starts[axis], limits[axis], strides[axis] = start, builtins.max(start, stop), stride
    return slice(x, starts, limits, strides)


def index_in_dim(x: Any, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    a = aval(x)
    axis = canonical_axes(axis, a.ndim)[0]
    index = index + a.shape[axis] if index < 0 else index
    out = slice_in_dim(x, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


# --- concatenate ------------------------------------------------------------------------
def _concatenate_rule(*xs: ShapedArray, dimension: int) -> ShapedArray:
    if not xs:
        raise TypeError("concatenate needs at least one operand")
    first = xs[0]
    if not 0 <= dimension < first.ndim:
        raise ValueError(f"concatenate: dimension {dimension} is out of range for rank {first.ndim}")
    for x in xs:
        if x.dtype != first.dtype:
            raise TypeError(f"concatenate: operands must have one dtype, got {[str(a.dtype) for a in xs]}")
        if x.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape))
                                       if i != dimension):
            raise TypeError(f"concatenate: operand shapes {[a.shape for a in xs]} differ outside "
                            f"dimension {dimension}")
    shape = list(first.shape)
    shape[dimension] = builtins.sum(x.shape[dimension] for x in xs)
    return ShapedArray(tuple(shape), first.dtype, builtins.all(x.weak_type for x in xs))


concatenate_p = _remapping("concatenate", _concatenate_rule)


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    operands = list(operands)
    if len(operands) == 1:
        return operands[0]
    return concatenate_p.bind(*operands, dimension=int(dimension))


# --- pad ----------------------------------------------------------------------------------
def _pad_rule(x: ShapedArray, padding_value: ShapedArray, *, padding_config: tuple) -> ShapedArray:
    if padding_value.shape != ():
        raise TypeError("pad: padding_value must be a scalar")
    if padding_value.dtype != x.dtype:
        raise TypeError(f"pad: padding_value dtype {padding_value.dtype} differs from the operand's {x.dtype}")
    if len(padding_config) != x.ndim:
        raise TypeError(f"pad: need {x.ndim} (low, high, interior) triples, got {padding_config}")
    shape = []
    for (lo, hi, interior), n in zip(padding_config, x.shape):
        if interior < 0:
            raise ValueError("pad: interior padding must be non-negative")
        size = lo + hi + n + builtins.max(n - 1, 0) * interior
        if size < 0:
            raise ValueError(f"pad: padding {padding_config} gives a negative size for shape {x.shape}")
        shape.append(size)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


pad_p = _remapping("pad", _pad_rule)


def pad(x: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]) -> Any:
    """Pad with (low, high, interior) per dimension; negative low/high crop."""
    cfg = tuple((int(lo), int(hi), int(i)) for lo, hi, i in padding_config)
    return pad_p.bind(x, convert_element_type(padding_value, aval(x).dtype), padding_config=cfg)


# --- iota --------------------------------------------------------------------------------
def _iota_rule(*, dtype: np.dtype, shape: tuple, dimension: int) -> ShapedArray:
    if not 0 <= dimension < len(shape):
        raise ValueError(f"iota: dimension {dimension} is out of range for shape {shape}")
    return ShapedArray(tuple(shape), dtype, False)


iota_p = primitive("iota", _iota_rule, family=Family.INDEX_REMAPPING)  # (an element from its index)


def iota(dtype: Any, size: int) -> Any:
    """``[0, 1, ..., size-1]``."""
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Any:
    return iota_p.bind(dtype=dtypes.canonicalize_dtype(dtype), shape=shape_tuple(shape), dimension=int(dimension))


# --- dynamic_slice / dynamic_update_slice ------------------------------------------------------
def _check_start_indices(name: str, x: ShapedArray, starts: Sequence[ShapedArray]) -> None:
    if len(starts) != x.ndim:
        raise TypeError(f"{name}: needs {x.ndim} start indices for shape {x.shape}, got {len(starts)}")
    if any(s.dtype != starts[0].dtype or s.dtype not in dtypes.INTEGER for s in starts):
        # (JAX's words; a Python int start has the default integer type, so it cannot join an int8 one)
        listed = ", ".join(s.dtype.name for s in starts)
        raise TypeError(f"index arguments to {name} must be integers of the same type, "
                        f"got{':' if name == 'dynamic_slice' else ''} {listed}")
    for s in starts:
        if s.shape != ():
            raise TypeError(f"{name}: start indices must be integer scalars, got {s.str_short()}")


def _dynamic_slice_rule(x: ShapedArray, *starts: ShapedArray, slice_sizes: tuple) -> ShapedArray:
    _check_start_indices("dynamic_slice", x, starts)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= n for s, n in zip(slice_sizes, x.shape)):
        raise TypeError(f"dynamic_slice: slice_sizes {slice_sizes} do not fit in shape {x.shape}")
    return ShapedArray(tuple(slice_sizes), x.dtype, x.weak_type)


dynamic_slice_p = primitive("dynamic_slice", _dynamic_slice_rule, linear=True, cost=free)


def _index_operand(i: Any) -> Any:
    """A start index as an operand: a Python number takes its default type (as in JAX)."""
    if type(i) in (int, float):
        return convert_element_type(i, dtypes.default_int_dtype() if type(i) is int else dtypes.default_float_dtype())
    return i


def _wrap_negative(starts: Sequence[Any], shape: tuple[int, ...]) -> list[Any]:
    """``start + size`` for negative starts (Python style), as JAX's ``allow_negative_indices``."""
    out = []
    for start, size in zip(starts, shape):
        if isinstance(start, (int, float, np.integer)):
            out.append(start + size if start < 0 else start)
        else:
            out.append(select(lt(start, 0), add(start, size), start))
    return out


def dynamic_slice(x: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool = True) -> Any:
    """``x[start:start+size]`` with traced starts, clamped so the slice stays in bounds.
    Negative starts count from the end (as in JAX) unless ``allow_negative_indices=False``."""
    starts = list(start_indices)
    if allow_negative_indices:
        starts = _wrap_negative(starts, aval(x).shape)
    starts = list(map(_index_operand, starts))
    return dynamic_slice_p.bind(x, *starts, slice_sizes=shape_tuple(slice_sizes))


def _dynamic_update_slice_rule(x: ShapedArray, update: ShapedArray, *starts: ShapedArray) -> ShapedArray:
    _check_start_indices("dynamic_update_slice", x, starts)
    if update.dtype != x.dtype:
        raise TypeError(f"dynamic_update_slice: update dtype {update.dtype} differs from operand dtype {x.dtype}")
    if update.ndim != x.ndim or any(u > n for u, n in zip(update.shape, x.shape)):
        raise TypeError(f"dynamic_update_slice: update of shape {update.shape} does not fit in {x.shape}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


dynamic_update_slice_p = primitive("dynamic_update_slice", _dynamic_update_slice_rule, linear=True, cost=free)


def dynamic_update_slice(x: Any, update: Any, start_indices: Sequence[Any], *,
                         allow_negative_indices: bool = True) -> Any:
    """``x`` with ``update`` written at ``start_indices`` (clamped to stay in bounds).
    Negative starts count from the end (as in JAX) unless ``allow_negative_indices=False``."""
    starts = list(start_indices)
    if allow_negative_indices:
        starts = _wrap_negative(starts, aval(x).shape)
    starts = list(map(_index_operand, starts))
    return dynamic_update_slice_p.bind(x, update, *starts)


def _zero_start_like(start: Any) -> Any:
    """A start of 0 of ``start``'s type, for the dimensions a ``*_in_dim`` slice keeps whole."""
    return 0 if type(start) is int else convert_element_type(0, aval(start).dtype)


def dynamic_slice_in_dim(x: Any, start_index: Any, slice_size: int, axis: int = 0) -> Any:
    a = aval(x)
    axis = canonical_axes(axis, a.ndim)[0]
    starts = [_zero_start_like(start_index)] * a.ndim
    starts[axis] = start_index
    sizes = list(a.shape)
    sizes[axis] = slice_size
    return dynamic_slice(x, starts, sizes)


def dynamic_index_in_dim(x: Any, index: Any, axis: int = 0, keepdims: bool = True) -> Any:
    out = dynamic_slice_in_dim(x, index, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def dynamic_update_slice_in_dim(x: Any, update: Any, start_index: Any, axis: int) -> Any:
    a = aval(x)
    axis = canonical_axes(axis, a.ndim)[0]
    starts = [_zero_start_like(start_index)] * a.ndim
    starts[axis] = start_index
    return dynamic_update_slice(x, update, starts)


def dynamic_update_index_in_dim(x: Any, update: Any, index: Any, axis: int) -> Any:
    a = aval(x)
    axis = canonical_axes(axis, a.ndim)[0]
    if aval(update).ndim == a.ndim - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(x, update, index, axis)
