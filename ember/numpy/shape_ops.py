"""Shape manipulation: reshape, permute, join, split, tile, repeat, flip, roll, pad.

Everything is built from lax's data-movement primitives. Gathers whose indices
are known while tracing (``pad``'s reflect/wrap/edge modes, ``repeat`` with
per-element counts, ``delete``, ``insert``) become a few contiguous slices joined
by one ``concatenate``, or one gather when they would need many slices (see
``take_static``).
"""
from __future__ import annotations

import builtins
import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from ember import dtypes, errors, lax
from ember.core.trace import Tracer
from ember.lax.base import aval, canonical_axes, concrete_dims, is_python_scalar, shape_tuple
from ember.numpy.core import asarray, broadcast_shapes, broadcast_to, ensure_array, is_array, promote_dtypes
from ember.numpy.index_functions import take
from ember.numpy.indexing import getitem
from ember.numpy.staging import staged

__all__ = [
    "append", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays", "column_stack",
    "concat", "concatenate", "delete", "dsplit", "dstack", "expand_dims", "flip", "fliplr", "flipud", "hsplit",
    "hstack", "insert", "matrix_transpose", "moveaxis", "ndim", "permute_dims", "ravel", "repeat",
    "reshape", "resize", "roll", "rot90", "shape", "size", "split", "squeeze", "stack", "swapaxes", "tile",
    "transpose", "trim_zeros", "unstack", "view", "vsplit", "vstack",
]


def _axis(axis: Any, ndim: int) -> int:
    return canonical_axes(operator.index(axis), ndim)[0]


def _static_ints(values: Any, what: str) -> np.ndarray:
    """Integers needed while tracing (indices, counts, widths). A traced value refuses with
    ember's conversion error; floats are refused with a TypeError."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind == "f"):
        raise TypeError(f"{what} must be integers, got {values!r}")
    return arr.astype(np.int64)


# --- reshaping and permuting -------------------------------------------------------------------
def _resolve_shape(old_shape: tuple[int, ...], new_shape: Any) -> tuple[int, ...]:
    dims = concrete_dims(new_shape if isinstance(new_shape, (tuple, list)) or np.ndim(new_shape) > 0
                         else [new_shape])
    if dims.count(-1) > 1:
        raise TypeError(f"reshape: only one dimension can be -1 (unknown), got {dims}")
    if any(d < -1 for d in dims):
        raise TypeError(f"reshape: dimensions must be non-negative (or -1 for one unknown size), got {dims}")
    if -1 not in dims:
        return dims
    total = math.prod(old_shape)
    known = math.prod(d for d in dims if d != -1)
    if known == 0 or total % known:
        raise TypeError(f"cannot reshape array of shape {old_shape} (size {total}) into shape {dims}: the "
                        f"size is not a multiple of {known}")
    return tuple(total // known if d == -1 else d for d in dims)


def _reversed_axes(ndim: int) -> tuple[int, ...]:
    return tuple(range(ndim))[::-1]


def reshape(a: Any, shape: Any, order: str = "C", *, copy: bool | None = None) -> Any:
    """``a`` with a new shape (one dimension may be -1). ``order='F'`` reads and writes the
    elements in column-major order."""
    a = ensure_array(a)
    new_shape = _resolve_shape(a.shape, shape)
    if order == "C":
        return lax.reshape(a, new_shape)
    if order == "F":
        flipped = lax.reshape(lax.transpose(a, _reversed_axes(a.ndim)), new_shape[::-1])
        return lax.transpose(flipped, _reversed_axes(len(new_shape)))
    raise NotImplementedError(f"jnp.reshape: order={order!r} is not supported; use 'C' or 'F'")


def ravel(a: Any, order: str = "C") -> Any:
    a = ensure_array(a)
    if order not in ("C", "F"):
        raise NotImplementedError(f"jnp.ravel: order={order!r} is not supported; use 'C' or 'F'")
    return reshape(a, (a.size,), order)


def transpose(a: Any, axes: Sequence[int] | None = None) -> Any:
    """Permute the dimensions (reverse them when ``axes`` is None)."""
    a = ensure_array(a)
    if axes is None:
        return lax.transpose(a, _reversed_axes(a.ndim))
    # Each axis in bounds (else a ValueError); a repeated or missing one is lax.transpose's TypeError (as JAX).
    return lax.transpose(a, tuple(canonical_axes(axis, a.ndim)[0] for axis in axes))


def permute_dims(a: Any, /, axes: Sequence[int]) -> Any:
    return transpose(a, axes)


def matrix_transpose(x: Any, /) -> Any:
    """Swap the last two dimensions."""
    x = ensure_array(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose needs an array of at least 2 dimensions, got shape {x.shape}")
    return swapaxes(x, -1, -2)


def moveaxis(a: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Any:
    """Move axes ``source`` to positions ``destination``; the others keep their order."""
    a = ensure_array(a)
    # Each axis in bounds, one by one (as JAX): a repeated source is lax.transpose's TypeError, and a
    # repeated destination is accepted, as JAX's insertions make it.
    source, destination = ((_axis(i, a.ndim) for i in ((v,) if np.ndim(v) == 0 else v))
                           for v in (source, destination))
    source, destination = tuple(source), tuple(destination)
    if len(source) != len(destination):
        raise ValueError(f"Inconsistent number of elements: {len(source)} vs {len(destination)}")
    permutation = [i for i in range(a.ndim) if i not in source]
    for dest, src in sorted(zip(destination, source)):
        permutation.insert(dest, src)
    return lax.transpose(a, permutation)


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    a = ensure_array(a)
    permutation = list(range(a.ndim))
    i, j = _axis(axis1, a.ndim), _axis(axis2, a.ndim)
    permutation[i], permutation[j] = j, i
    return lax.transpose(a, permutation)


def expand_dims(a: Any, axis: int | Sequence[int]) -> Any:
    """Insert size-1 dimensions at positions ``axis`` of the result."""
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    return lax.expand_dims(ensure_array(a), axes)


def squeeze(a: Any, axis: int | Sequence[int] | None = None) -> Any:
    """Remove size-1 dimensions (all of them, or the given ones, which must have size 1)."""
    a = ensure_array(a)
    if axis is None:
        return lax.squeeze(a, tuple(i for i, n in enumerate(a.shape) if n == 1))
    return lax.squeeze(a, canonical_axes(axis, a.ndim))


def _at_least(a: Any, new_axes: Sequence[tuple[int, ...]]) -> Any:
    """``a`` with the size-1 axes ``new_axes[a.ndim]`` inserted (``expand_dims``, as JAX's);
    ``a`` itself where it has rank ``len(new_axes)`` or more."""
    a = ensure_array(a)
    return a if a.ndim >= len(new_axes) else lax.expand_dims(a, new_axes[a.ndim])


def _one_or_list(arrays: list[Any]) -> Any:
    return arrays[0] if len(arrays) == 1 else arrays


@staged("atleast_1d")
def atleast_1d(*arys: Any) -> Any:
    return _one_or_list([_at_least(a, [(0,)]) for a in arys])


@staged("atleast_2d")
def atleast_2d(*arys: Any) -> Any:
    return _one_or_list([_at_least(a, [(0, 1), (0,)]) for a in arys])


@staged("atleast_3d")
def atleast_3d(*arys: Any) -> Any:
    """0-d -> (1, 1, 1), (n,) -> (1, n, 1), (m, n) -> (m, n, 1), as NumPy."""
    return _one_or_list([_at_least(a, [(0, 1, 2), (0, 2), (2,)]) for a in arys])


# --- joining ----------------------------------------------------------------------------------
def _array_list(arrays: Any) -> list[Any]:
    """A list of operands; an array counts as the sequence of its slices along axis 0."""
    if is_array(arrays) or isinstance(arrays, np.ndarray):
        arrays = ensure_array(arrays)
        if arrays.ndim == 0:
            raise ValueError("expected a sequence of arrays, got a 0-d array")
        return unstack(arrays)
    return [a if is_array(a) or is_python_scalar(a) else asarray(a) for a in arrays]


def _promoted(arrays: list[Any], dtype: Any) -> list[Any]:
    if dtype is not None:
        return [lax.convert_element_type(ensure_array(a), dtypes.requested_dtype(dtype)) for a in arrays]
    return [ensure_array(a) for a in promote_dtypes(*arrays)]


def concatenate(arrays: Any, axis: int | None = 0, dtype: Any = None) -> Any:
    """Join arrays along an existing axis (flattened first when ``axis`` is None); dtypes promote."""
    arrays = _array_list(arrays)
    if not arrays:
        raise ValueError("Need at least one array to concatenate.")
    arrays = _promoted(arrays, dtype)
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    if any(a.ndim == 0 for a in arrays):
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    return lax.concatenate(arrays, _axis(axis, arrays[0].ndim))


def concat(arrays: Any, /, *, axis: int | None = 0) -> Any:
    return concatenate(arrays, axis)


def stack(arrays: Any, axis: int = 0, out: None = None, dtype: Any = None) -> Any:
    """Join arrays of one shape along a new axis."""
    arrays = _array_list(arrays)
    if not arrays:
        raise ValueError("Need at least one array to stack.")
    shapes = [aval(a).shape for a in arrays]
    if len(set(shapes)) > 1:
        raise ValueError(f"All input arrays must have the same shape. Got {', '.join(map(str, shapes))}.")
    axis = canonical_axes(operator.index(axis), len(shapes[0]) + 1)[0]
    return lax.concatenate([lax.expand_dims(a, (axis,)) for a in _promoted(arrays, dtype)], axis)


def vstack(tup: Any, dtype: Any = None) -> Any:
    return concatenate([atleast_2d(a) for a in _array_list(tup)], axis=0, dtype=dtype)


def hstack(tup: Any, dtype: Any = None) -> Any:
    arrays = [atleast_1d(a) for a in _array_list(tup)]
    return concatenate(arrays, axis=0 if arrays and arrays[0].ndim == 1 else 1, dtype=dtype)


def dstack(tup: Any, dtype: Any = None) -> Any:
    return concatenate([atleast_3d(a) for a in _array_list(tup)], axis=2, dtype=dtype)


def column_stack(tup: Any) -> Any:
    """Stack 1-D arrays as columns (2-D arrays are joined as they are)."""
    arrays = [ensure_array(a) for a in _array_list(tup)]
    return concatenate([lax.reshape(a, (a.size, 1)) if a.ndim < 2 else a for a in arrays], axis=1)


def append(arr: Any, values: Any, axis: int | None = None) -> Any:
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], axis=0)
    return concatenate([arr, values], axis=axis)


# --- splitting --------------------------------------------------------------------------------
def unstack(x: Any, /, *, axis: int = 0) -> tuple[Any, ...]:
    """The slices of ``x`` along ``axis``."""
    x = ensure_array(x)
    axis = _axis(axis, x.ndim)
    return tuple(lax.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis]))


def _split(ary: Any, indices_or_sections: Any, axis: int, equal: bool) -> list[Any]:
    ary = ensure_array(ary)
    axis = _axis(axis, ary.ndim)
    n = ary.shape[axis]
    if np.ndim(indices_or_sections) == 0:
        sections = int(_static_ints(indices_or_sections, "the number of sections"))
        if sections <= 0:
            raise ValueError(f"number of sections must be larger than 0, got {sections}")
        if equal and n % sections:
            raise ValueError(f"array split does not result in an equal division: {n} elements along axis {axis} "
                             f"into {sections} sections")
        base, extra = divmod(n, sections)
        starts = np.cumsum([0] + [base + 1] * extra + [base] * (sections - extra - 1)).tolist()
    else:
        starts = [0] + _static_ints(indices_or_sections, "split indices").ravel().tolist()
    stops = starts[1:] + [n]
    return [lax.slice_in_dim(ary, start, stop, axis=axis) for start, stop in zip(starts, stops)]


def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    """Split into equal sections, or at the given indices (Python slice semantics)."""
    return _split(ary, indices_or_sections, axis, equal=True)


def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    """Like ``split``, but sections may differ in size by one (the first ones are larger)."""
    return _split(ary, indices_or_sections, axis, equal=False)


def _split_needing(name: str, min_ndim: int, axis: int) -> Callable:
    def f(ary: Any, indices_or_sections: Any) -> list[Any]:
        ary = ensure_array(ary)
        if ary.ndim < min_ndim:
            raise ValueError(f"{name} needs an array of at least {min_ndim} dimensions, got shape {ary.shape}")
        split_axis = 0 if name == "hsplit" and ary.ndim == 1 else axis
        return _split(ary, indices_or_sections, split_axis, equal=True)

    f.__name__ = name
    return f


hsplit = _split_needing("hsplit", 1, 1)
vsplit = _split_needing("vsplit", 2, 0)
dsplit = _split_needing("dsplit", 3, 2)


# --- broadcasting, tiling, repeating -----------------------------------------------------------
def broadcast_arrays(*args: Any) -> list[Any]:
    arrays = [ensure_array(a) for a in args]
    common = broadcast_shapes(*(a.shape for a in arrays))
    return [broadcast_to(a, common) for a in arrays]


def tile(A: Any, reps: int | Sequence[int]) -> Any:
    """``A`` repeated ``reps[i]`` times along each dimension i."""
    A = ensure_array(A)
    reps = shape_tuple(reps, "tile reps")
    ndim = builtins.max(A.ndim, len(reps))
    reps = (1,) * (ndim - len(reps)) + reps
    dims = (1,) * (ndim - A.ndim) + A.shape
    # [d0, d1] -> [r0, d0, r1, d1] -> [r0*d0, r1*d1]
    interleaved = tuple(n for pair in zip(reps, dims) for n in pair)
    tiled = lax.broadcast_in_dim(lax.reshape(A, dims), interleaved, tuple(range(1, 2 * ndim, 2)))
    return lax.reshape(tiled, tuple(r * d for r, d in zip(reps, dims)))


# Beyond this many contiguous runs, a static gather is one gather rather than many slices.
_MAX_SLICED_RUNS = 16


def _index_runs(indices: list[int]) -> list[tuple[int, int, int]]:
    """``indices`` as maximal runs ``(first, step, length)`` with step +1, -1 or 0."""
    runs = []
    i = 0
    while i < len(indices):
        first = indices[i]
        step = indices[i + 1] - first if i + 1 < len(indices) and abs(indices[i + 1] - first) <= 1 else 1
        end = i + 1
        while end < len(indices) and indices[end] - indices[end - 1] == step:
            end += 1
        runs.append((first, step, end - i))
        i = end
    return runs


def take_static(x: Any, indices: Sequence[int], axis: int) -> Any:
    """``x`` gathered along ``axis`` at in-bounds indices known while tracing.

    Runs of indices that step by +1, -1 or 0 become a slice each (reversed, or
    broadcast, respectively), joined by one concatenate; many short runs become a gather.
    """
    runs = _index_runs([int(i) for i in indices])
    if len(runs) > _MAX_SLICED_RUNS:
        return take(x, asarray(np.asarray(indices), dtypes.int32), axis=axis)
    run_shape = list(aval(x).shape)
    pieces = []
    for first, step, length in runs:
        if step == 1:
            pieces.append(lax.slice_in_dim(x, first, first + length, axis=axis))
        elif step == -1:
            pieces.append(lax.rev(lax.slice_in_dim(x, first - length + 1, first + 1, axis=axis), (axis,)))
        else:
            run_shape[axis] = length
            one = lax.slice_in_dim(x, first, first + 1, axis=axis)
            pieces.append(lax.broadcast_in_dim(one, tuple(run_shape), tuple(range(len(run_shape)))))
    return lax.concatenate(pieces, axis) if pieces else lax.slice_in_dim(x, 0, 0, axis=axis)


def _static_repeats(repeats: Any) -> np.ndarray:
    if isinstance(repeats, Tracer):
        raise repeats._trace.concretization_error(
            repeats, "use as `repeats` of jnp.repeat (the length of the result must be known while tracing; "
                     "pass a Python int or a concrete array)", errors.ConcretizationTypeError)
    counts = _static_ints(repeats, "repeats")
    if (counts < 0).any():
        raise ValueError(f"repeats may not contain negative values, got {repeats!r}")
    return counts


def repeat(a: Any, repeats: Any, axis: int | None = None, *, total_repeat_length: int | None = None) -> Any:
    """Repeat each element ``repeats`` times (an int, or one count per element along ``axis``).

    With ``total_repeat_length`` the result is cut to that length, or filled up with the
    last element of ``a``, as in JAX.
    """
    a = ensure_array(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = _axis(axis, a.ndim)
    n = a.shape[axis]
    counts = _static_repeats(repeats)
    if counts.size == 1 and total_repeat_length in (None, n * int(counts.ravel()[0])):
        count = int(counts.ravel()[0])
        # [..., n, ...] -> [..., n, count, ...] -> [..., n * count, ...]
        expanded = a.shape[:axis + 1] + (count,) + a.shape[axis + 1:]
        kept = tuple(d for d in range(a.ndim + 1) if d != axis + 1)
        return lax.reshape(lax.broadcast_in_dim(a, expanded, kept), a.shape[:axis] + (n * count,) + a.shape[axis + 1:])
    try:
        counts = np.broadcast_to(counts, (n,))
    except ValueError:
        raise ValueError(f"jnp.repeat: repeats of shape {counts.shape} do not match axis {axis} of size {n} of an "
                         f"array of shape {a.shape}") from None
    indices = np.repeat(np.arange(n), counts)
    if total_repeat_length is not None:
        total = operator.index(total_repeat_length)
        if total > indices.size and n == 0:
            raise ValueError(f"jnp.repeat: cannot fill an empty axis up to total_repeat_length={total}")
        indices = np.concatenate([indices[:total], np.full(builtins.max(total - indices.size, 0), n - 1)])
    return take_static(a, indices, axis)


def resize(a: Any, new_shape: int | Sequence[int]) -> Any:
    """``a``'s elements, repeated cyclically (row-major) to fill ``new_shape``."""
    a = ravel(ensure_array(a))
    new_shape = shape_tuple(new_shape, "new_shape")
    total = math.prod(new_shape)
    if a.size == 0 or total == 0:
        return lax.broadcast_in_dim(lax.convert_element_type(0, a.dtype), new_shape, ())
    tiled = tile(a, -(-total // a.size))
    return lax.reshape(lax.slice_in_dim(tiled, 0, total), new_shape)


# --- reversing, rotating, rolling ---------------------------------------------------------------
def flip(m: Any, axis: int | Sequence[int] | None = None) -> Any:
    m = ensure_array(m)
    return lax.rev(m, canonical_axes(axis, m.ndim))


def fliplr(m: Any) -> Any:
    m = ensure_array(m)
    if m.ndim < 2:
        raise ValueError(f"fliplr needs an array of at least 2 dimensions, got shape {m.shape}")
    return lax.rev(m, (1,))


def flipud(m: Any) -> Any:
    m = ensure_array(m)
    if m.ndim < 1:
        raise ValueError("flipud needs an array of at least 1 dimension, got a 0-d array")
    return lax.rev(m, (0,))


def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Any:
    """Rotate by 90 degrees ``k`` times, from the first axis of ``axes`` towards the second."""
    m = ensure_array(m)
    if m.ndim < 2:
        raise ValueError(f"rot90 needs an array of at least 2 dimensions, got shape {m.shape}")
    if len(tuple(axes)) != 2:
        raise ValueError(f"rot90: axes must be two axes, got {axes}")
    first, second = canonical_axes(tuple(axes), m.ndim)
    k = operator.index(k) % 4
    permutation = list(range(m.ndim))
    permutation[first], permutation[second] = second, first
    if k == 0:
        return m
    if k == 2:
        return lax.rev(m, (first, second))
    if k == 1:
        return lax.transpose(lax.rev(m, (second,)), permutation)
    return lax.rev(lax.transpose(m, permutation), (second,))


def _roll_static(a: Any, shift: int, axis: int) -> Any:
    n = a.shape[axis]
    shift = shift % n if n else 0
    if shift == 0:
        return a
    return lax.concatenate([lax.slice_in_dim(a, n - shift, n, axis=axis), lax.slice_in_dim(a, 0, n - shift,
                                                                                           axis=axis)], axis)


def _roll_traced(a: Any, shift: Any, axis: int) -> Any:
    """Roll by a traced amount: a window of length n out of ``a`` joined with itself."""
    n = a.shape[axis]
    if n == 0:
        return a
    shift = lax.convert_element_type(shift, dtypes.int32)
    start = lax.sub(n, lax.rem(lax.add(lax.rem(shift, n), n), n))  # in [1, n]
    return lax.dynamic_slice_in_dim(lax.concatenate([a, a], axis), start, n, axis)


def roll(a: Any, shift: Any, axis: int | Sequence[int] | None = None) -> Any:
    """Shift elements cyclically along ``axis`` (of the flattened array when None). ``shift``
    may be traced."""
    a = ensure_array(a)
    if axis is None:
        return lax.reshape(roll(ravel(a), shift, 0), a.shape)
    traced = isinstance(shift, Tracer)
    # A shift that is not an integer is converted to int32 as JAX converts it (truncated toward
    # zero: a shift of 1.5 is 1), traced or not.
    if traced and not dtypes.is_integer(shift.dtype):
        shift = lax.convert_element_type(shift, dtypes.int32)
    elif not traced and np.asarray(shift).dtype.kind not in "iu":
        shift = dtypes.convert_values(np.asarray(asarray(shift)), dtypes.int32)
    shift_shape = shift.shape if traced else np.shape(shift)
    axes = np.asarray(axis)
    if len(np.broadcast_shapes(shift_shape, axes.shape)) > 1:
        raise ValueError(f"jnp.roll: shift and axis must be scalars or 1-D sequences, got {shift!r} and {axis!r}")
    count = math.prod(np.broadcast_shapes(shift_shape, axes.shape))
    axes = np.broadcast_to(axes, (count,))
    shifts = None if traced else np.broadcast_to(_static_ints(shift, "jnp.roll: shift"), (count,))
    for k in range(count):
        ax = _axis(int(axes[k]), a.ndim)
        if traced:
            a = _roll_traced(a, shift if shift.ndim == 0 else lax.index_in_dim(shift, k, keepdims=False), ax)
        else:
            a = _roll_static(a, int(shifts[k]), ax)
    return a


# --- deleting and inserting -------------------------------------------------------------------------
def _normalized_positions(obj: Any, n: int, limit: int, what: str) -> np.ndarray:
    positions = _static_ints(obj, what)
    if ((positions < -n) | (positions > limit)).any():
        raise IndexError(f"{what} {obj!r} is out of bounds for an axis of size {n}")
    return np.where(positions < 0, positions + n, positions)


def _flat_or_axis(arr: Any, axis: int | None) -> tuple[Any, int]:
    arr = ensure_array(arr)
    if axis is None:
        return ravel(arr), 0
    return arr, _axis(axis, arr.ndim)


def delete(arr: Any, obj: Any, axis: int | None = None, *, assume_unique_indices: bool = False) -> Any:
    """``arr`` without the entries ``obj`` along ``axis``, with JAX's cases and errors: an integer
    (a ValueError out of bounds), a slice, a concrete array of indices (NumPy's IndexError out of
    bounds) or a boolean mask; a traced array only with ``assume_unique_indices=True``, when the
    kept entries are gathered (each index counts once; negative ones count from the end, and
    out-of-bounds ones are clipped into range first, as JAX's)."""
    arr, axis = _flat_or_axis(arr, axis)
    n = arr.shape[axis]
    try:  # (a 0-d integer, as operator.index reads it; a one-element array is an array of indices)
        index = operator.index(obj) if np.ndim(obj) == 0 else None
    except TypeError:
        index = None
    if index is not None:
        if not -n <= index < n:
            raise ValueError(f"axis {index} is out of bounds for array of dimension {n}")
        index %= n
        return take_static(arr, [i for i in range(n) if i != index], axis)
    if isinstance(obj, builtins.slice):
        return take_static(arr, np.setdiff1d(np.arange(n), np.arange(n)[obj]), axis)
    if assume_unique_indices and ensure_array(obj).dtype in dtypes.INTEGER:
        return _delete_unique(arr, ensure_array(obj), axis)
    if isinstance(obj, Tracer):
        raise obj._trace.concretization_error(
            obj, "use as the 'obj' array argument of jnp.delete() (pass assume_unique_indices=True to delete "
                 "traced indices)", errors.ConcretizationTypeError)
    positions = np.asarray(obj)
    keep = np.ones(n, dtype=bool)
    if positions.dtype.kind in "iu":
        keep[positions] = False  # (NumPy's IndexError for an index out of bounds)
    elif positions.dtype == np.bool_:
        if positions.shape != (n,):
            raise ValueError("np.delete(arr, obj): for boolean indices, obj must be one-dimensional with length "
                             "matching specified axis.")
        keep = ~positions
    else:
        raise ValueError(f"np.delete(arr, obj): got obj.dtype={positions.dtype}; must be integer or bool.")
    return take_static(arr, np.flatnonzero(keep), axis)


def _delete_unique(arr: Any, obj: Any, axis: int) -> Any:
    """``delete`` of distinct (possibly traced) indices: the kept positions, gathered. The i-th kept
    position is i plus the number of deleted indices at or below it (counted after shifting the
    sorted indices down by their rank)."""
    n = arr.shape[axis]
    removed = lax.reshape(obj, (obj.size,))
    dtype = aval(removed).dtype
    removed = lax.select(lax.lt(removed, 0), lax.add(removed, n), removed)
    removed = lax.clamp(lax.convert_element_type(0, dtype), removed, lax.convert_element_type(n, dtype))
    removed = lax.sub(lax.sort(removed), lax.iota(dtype, obj.size))
    kept = lax.iota(dtype, builtins.max(n - obj.size, 0))
    count = (obj.size, aval(kept).shape[0])
    below = lax.ge(lax.broadcast_in_dim(kept, count, (1,)), lax.broadcast_in_dim(removed, count, (0,)))
    kept = lax.add(kept, lax.reduce_sum(lax.convert_element_type(below, dtype), (0,)))
    return getitem(arr, (builtins.slice(None),) * axis + (kept,))


def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Any:
    """``values`` inserted before the indices ``obj`` (static) along ``axis``, as ``np.insert``."""
    arr, axis = _flat_or_axis(arr, axis)
    n = arr.shape[axis]
    positions = np.arange(n)[obj] if isinstance(obj, builtins.slice) else _normalized_positions(
        obj, n, n, "jnp.insert: index")
    values = lax.convert_element_type(ensure_array(values), arr.dtype)
    if positions.ndim == 0:
        # A single index inserts a block: values' leading axis runs along ``axis``.
        values = lax.reshape(values, (1,) * (arr.ndim - values.ndim) + values.shape)
        values = moveaxis(values, 0, axis) if values.ndim == arr.ndim else values
        count = values.shape[axis] if values.ndim == arr.ndim else 1
    else:
        count = positions.size
    block_shape = arr.shape[:axis] + (count,) + arr.shape[axis + 1:]
    joined = lax.concatenate([arr, broadcast_to(values, block_shape)], axis)
    order = np.insert(np.arange(n), positions.ravel() if positions.ndim else int(positions),
                      np.arange(n, n + count))
    return take_static(joined, order, axis)


def trim_zeros(filt: Any, trim: str = "fb") -> Any:
    """``filt`` without leading ('f') and/or trailing ('b') zeros. Needs a concrete 1-D array,
    since the result's length depends on the values."""
    filt = ensure_array(filt)
    values = np.asarray(filt)
    if values.ndim != 1:
        raise ValueError(f"jnp.trim_zeros needs a 1-D array, got shape {values.shape}")
    nonzero = np.flatnonzero(values)
    if nonzero.size == 0:
        return lax.slice_in_dim(filt, 0, 0)
    start = int(nonzero[0]) if "f" in trim.lower() else 0
    stop = int(nonzero[-1]) + 1 if "b" in trim.lower() else values.size
    return lax.slice_in_dim(filt, start, stop)


# --- metadata and reinterpretation ---------------------------------------------------------------
def ndim(a: Any) -> int:
    return aval(a).ndim if is_array(a) else np.ndim(a)


def shape(a: Any) -> tuple[int, ...]:
    return aval(a).shape if is_array(a) else np.shape(a)


def size(a: Any, axis: int | Sequence[int] | None = None) -> int:
    dims = shape(a)
    if axis is None:
        return math.prod(dims)
    return math.prod(dims[i] for i in canonical_axes(axis, len(dims)))


def view(a: Any, dtype: Any) -> Any:
    """The same bytes read as ``dtype``. When the item size changes, so does the last dimension."""
    a = ensure_array(a)
    new = dtypes.requested_dtype(dtype)
    if new == a.dtype:
        return a
    if a.dtype == dtypes.bool_:
        a = lax.convert_element_type(a, dtypes.uint8)
    target = dtypes.uint8 if new == dtypes.bool_ else new
    old_size, new_size = a.dtype.itemsize, target.itemsize
    if old_size != new_size and (a.ndim == 0 or (a.shape[-1] * old_size) % new_size):
        raise ValueError(f"cannot view an array of shape {a.shape} and dtype {a.dtype} as {target}: the last "
                         f"dimension's {a.shape[-1:] or 'missing'} elements of {old_size} bytes are not a whole "
                         f"number of {new_size}-byte elements")
    if old_size > new_size:
        out = lax.bitcast_convert_type(a, target)
        out = lax.reshape(out, a.shape[:-1] + (a.shape[-1] * (old_size // new_size),))
    elif old_size < new_size:
        ratio = new_size // old_size
        grouped = lax.reshape(a, a.shape[:-1] + (a.shape[-1] // ratio, ratio))
        out = lax.bitcast_convert_type(grouped, target)
    else:
        out = lax.bitcast_convert_type(a, target)
    return lax.ne(out, 0) if new == dtypes.bool_ else out
