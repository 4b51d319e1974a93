"""NumPy indexing: ``x[idx]``, the scatters of ``x.at[idx].<op>(v)`` (its classes are in ``array_methods``)
and ``nonzero`` (the other index functions are in ``index_functions``).

An index is parsed into one entry per operand dimension (static slices, static or
traced integers, integer arrays, new axes). Basic indices (no arrays) lower to cheap
primitives: static slice, rev, dynamic_slice, squeeze, expand_dims. Anything else
becomes one gather, laid out by a ``_GatherPlan`` exactly as NumPy lays out the
result; ``.at[idx]`` updates scatter through the same plan, so reads and writes agree.

Out-of-bounds semantics are JAX's: reads clamp, writes are dropped.
"""
from __future__ import annotations

import operator
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember import dtypes, errors, lax
from ember.core.array import Array
from ember.core.avals import ShapedArray
from ember.core.trace import Tracer
from ember.lax.base import aval
from ember.lax.indexing import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from ember.numpy.core import asarray, broadcast_shapes, broadcast_to, ensure_array, promote_dtypes

__all__: list[str] = []  # getitem and .at are reached through Array / Tracer, nonzero through index_functions

_INVALID_INDEX = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or "
                  "boolean arrays are valid indices")


# --- parsing ---------------------------------------------------------------------------------
class _NewAxis(NamedTuple):
    pass


class _Slice(NamedTuple):
    """``size`` elements starting at ``start`` with stride ``step`` (any sign, never 0)."""

    dim: int
    start: int
    size: int
    step: int


class _Int(NamedTuple):
    """A static integer (as given: may be negative or out of bounds)."""

    dim: int
    index: int


class _DynamicInt(NamedTuple):
    """A traced integer scalar."""

    dim: int
    index: Any


class _ArrayIndex(NamedTuple):
    """An integer array: a NumPy constant, or a tracer."""

    dim: int
    index: Any


_Entry = _NewAxis | _Slice | _Int | _DynamicInt | _ArrayIndex
_ADVANCED = (_Int, _DynamicInt, _ArrayIndex)


class _ParsedIndex(NamedTuple):
    entries: tuple
    # Dimensions inserted into the operand for scalar boolean indices (``x[True]``), which index them.
    scalar_bool_dims: tuple[int, ...]

    @property
    def has_arrays(self) -> bool:
        return any(isinstance(e, _ArrayIndex) for e in self.entries)


def _non_concrete_mask_error(mask: Tracer) -> errors.NonConcreteBooleanIndexError:
    return errors.NonConcreteBooleanIndexError(
        f"Array boolean indices must be concrete; got a traced mask {mask.aval.str_short()} at "
        f"{errors.user_location()}\nThe shape of x[mask] depends on the values in the mask, which are not "
        "known while tracing. Fixes: keep the shape with jnp.where(mask, x, fill_value); or get a fixed "
        "number of indices with jnp.nonzero(mask, size=N, fill_value=...) and index with those; or pass "
        "the mask as a static argument.")


def _classify(item: Any) -> tuple[str, Any]:
    """One raw index item as (kind, value); arrays come back as NumPy arrays or tracers."""
    if item is None:
        return "newaxis", None
    if item is Ellipsis:
        return "ellipsis", None
    if isinstance(item, slice):
        return "slice", item
    if isinstance(item, (bool, np.bool_)):
        return "scalar_bool", bool(item)
    if isinstance(item, (int, np.integer)):
        return "int", int(item)
    if isinstance(item, Tracer):
        if item.dtype == dtypes.bool_:
            raise _non_concrete_mask_error(item)
        if item.dtype not in dtypes.INTEGER:
            raise _indexer_type_error(item.dtype)
        return ("dynamic_int" if item.ndim == 0 else "array"), item
    if isinstance(item, (list, tuple)) and any(isinstance(v, Tracer) for v in _leaves(item)):
        return _classify(asarray(item))
    try:
        value = np.asarray(item)
    except Exception:
        raise IndexError(f"{_INVALID_INDEX}; got {type(item).__name__}") from None
    if isinstance(item, (list, tuple)) and value.size == 0:
        value = value.astype(np.intp)  # NumPy reads an empty list as an empty integer index
    if value.dtype == np.bool_:
        return ("scalar_bool", bool(value)) if value.ndim == 0 else ("mask", value)
    if value.dtype.kind in "US":
        raise TypeError(f"ember does not support string indexing (as JAX does not); got idx={item!r}")
    if value.dtype.kind == "O":
        raise IndexError(f"{_INVALID_INDEX}; got {item!r}")
    if value.dtype.kind not in "iu":
        raise _indexer_type_error(value.dtype)
    return ("int", int(value)) if value.ndim == 0 else ("array", value)


def _indexer_type_error(dtype: Any) -> TypeError:
    """JAX's class and words for an index of a non-integer type (a float, a complex number)."""
    return TypeError(f"Indexer must have integer or boolean type, got indexer with type {np.dtype(dtype).name}")


def _leaves(seq: Any) -> list:
    return [leaf for v in seq for leaf in _leaves(v)] if isinstance(seq, (list, tuple)) else [seq]


def _static_slice_bound(bound: Any, s: slice) -> int | None:
    if bound is None:
        return None
    if isinstance(bound, Tracer):
        raise IndexError(
            f"Array slice indices must have static start/stop/step to be used with NumPy indexing syntax. "
            f"Found {s}. To index a statically sized array at a dynamic position, use lax.dynamic_slice or "
            "lax.dynamic_update_slice (array shapes must be static inside jit).")
    try:
        return operator.index(bound)
    except TypeError:
        raise TypeError(f"slice indices must be integers or None or have an __index__ method, got {s}") from None


def _parse_slice(s: slice, dim: int, n: int) -> _Slice:
    start, stop, step = (_static_slice_bound(b, s) for b in (s.start, s.stop, s.step))
    if step == 0:
        raise ValueError("slice step cannot be zero")
    start, stop, step = slice(start, stop, step).indices(n)
    size = len(range(start, stop, step))
    return _Slice(dim, start if size else 0, size, step)


def _parse_index(shape: tuple[int, ...], index: Any) -> _ParsedIndex:
    """Expand Ellipsis and boolean masks; give every entry the operand dimension it indexes."""
    if isinstance(index, list):  # (NumPy's old ambiguity between x[[i, j]] and x[i, j]: JAX refuses it)
        nested = any(isinstance(i, (list, tuple, slice, np.ndarray)) or i is None or i is Ellipsis
                     or hasattr(i, "aval") for i in index)
        raise TypeError("Using a non-tuple sequence for multidimensional indexing is not allowed; use "
                        f"`arr[{'tuple' if nested else 'array'}(seq)]` instead of `arr[seq]`.")
    raw = [_classify(item) for item in (index if isinstance(index, tuple) else (index,))]
    kinds = [k for k, _ in raw]
    if kinds.count("ellipsis") > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(v.ndim if k == "mask" else k in ("slice", "int", "dynamic_int", "array") for k, v in raw)
    if consumed > len(shape):
        raise IndexError(f"Too many indices for array of shape {shape}: the array is {len(shape)}-dimensional, "
                         f"but {consumed} were indexed")
    if "ellipsis" not in kinds:
        raw.append(("ellipsis", None))
    entries: list[_Entry] = []
    scalar_bool_dims: list[int] = []
    dim = 0  # position in the operand after scalar-boolean dimensions are inserted
    source = 0  # position in the original operand
    for kind, value in raw:
        if kind == "newaxis":
            entries.append(_NewAxis())
        elif kind == "ellipsis":
            for _ in range(len(shape) - consumed):
                entries.append(_Slice(dim, 0, shape[source], 1))
                dim, source = dim + 1, source + 1
        elif kind == "scalar_bool":
            scalar_bool_dims.append(dim)
            entries.append(_ArrayIndex(dim, np.zeros(int(value), np.intp)))
            dim += 1
        elif kind == "mask":
            _check_mask_shape(value, shape, source)
            entries.extend(_ArrayIndex(dim + j, idx) for j, idx in enumerate(np.nonzero(value)))
            dim, source = dim + value.ndim, source + value.ndim
        else:
            entries.append(_one_dimension_entry(kind, value, dim, shape[source]))
            dim, source = dim + 1, source + 1
    return _ParsedIndex(tuple(entries), tuple(scalar_bool_dims))


def _one_dimension_entry(kind: str, value: Any, dim: int, n: int) -> _Entry:
    if kind == "slice":
        return _parse_slice(value, dim, n)
    if kind == "int":
        return _Int(dim, value)
    return (_DynamicInt if kind == "dynamic_int" else _ArrayIndex)(dim, value)


def _check_mask_shape(mask: np.ndarray, shape: tuple, first: int) -> None:
    for j, size in enumerate(mask.shape):
        if size != shape[first + j]:
            raise IndexError(f"boolean index did not match indexed array along axis {first + j}; size of axis is "
                             f"{shape[first + j]} but size of corresponding boolean axis is {size}")


# --- index arithmetic ----------------------------------------------------------------------------
def _index_dtype() -> np.dtype:
    return dtypes.default_int_dtype()


def _normalize(index: Any, n: int, wrap_negative: bool) -> Any:
    """Negative indices count from the end (``i + n``); a NumPy index stays a NumPy constant."""
    if isinstance(index, Tracer):
        index = lax.convert_element_type(index, _index_dtype())
        return lax.select(lax.lt(index, 0), lax.add(index, n), index) if wrap_negative else index
    index = np.asarray(index).astype(_index_dtype())
    return np.where(index < 0, index + n, index).astype(_index_dtype()) if wrap_negative else index


def _check_nonempty_axis(n: int, d: int) -> None:
    if n == 0:
        raise IndexError(f"index is out of bounds for axis {d} with size 0")


# --- basic indexing: static slices, reversal, dynamic slices ---------------------------------
def _ascending_bounds(s: _Slice) -> tuple[int, int, int]:
    """(start, limit, stride) of the same elements in ascending order (reverse after if step < 0)."""
    if s.size == 0:
        return 0, 0, 1
    last = s.start + (s.size - 1) * s.step
    low = min(s.start, last)
    return low, low + (s.size - 1) * abs(s.step) + 1, abs(s.step)


def _basic_take(x: Any, entries: tuple, wrap_negative: bool) -> Any:
    shape = aval(x).shape
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    reversed_dims, squeezed_dims, newaxis_dims = [], [], []
    dynamic_starts: dict[int, Any] = {}
    out_pos = 0
    for e in entries:
        if isinstance(e, _NewAxis):
            newaxis_dims.append(out_pos)
        elif isinstance(e, _Slice):
            starts[e.dim], limits[e.dim], strides[e.dim] = _ascending_bounds(e)
            if e.step < 0 and e.size > 1:
                reversed_dims.append(e.dim)
        elif isinstance(e, _Int):
            _check_nonempty_axis(shape[e.dim], e.dim)
            i = min(max(int(_normalize(e.index, shape[e.dim], wrap_negative)), 0), shape[e.dim] - 1)
            starts[e.dim], limits[e.dim] = i, i + 1
            squeezed_dims.append(e.dim)
        else:  # _DynamicInt: dynamic_slice clamps the start into bounds
            _check_nonempty_axis(shape[e.dim], e.dim)
            dynamic_starts[e.dim] = _normalize(e.index, shape[e.dim], wrap_negative)
            squeezed_dims.append(e.dim)
        out_pos += not isinstance(e, (_Int, _DynamicInt))
    y = lax.slice(x, starts, limits, strides)
    if dynamic_starts:
        sizes = [1 if d in dynamic_starts else n for d, n in enumerate(aval(y).shape)]
        # (the starts are normalized already: lax must not add n to negative ones a second time)
        y = lax.dynamic_slice(y, [dynamic_starts.get(d, 0) for d in range(len(shape))], sizes,
                              allow_negative_indices=False)
    y = lax.rev(y, reversed_dims)
    y = lax.squeeze(y, squeezed_dims)
    return lax.expand_dims(y, newaxis_dims) if newaxis_dims else y


# --- advanced indexing: one gather / scatter, laid out as NumPy's result --------------------------
class _GatherPlan(NamedTuple):
    indices: Any                              # integer array: batch shape + (index vector,)
    dimension_numbers: GatherDimensionNumbers
    slice_sizes: tuple[int, ...]
    gather_shape: tuple[int, ...]             # the gather's result: NumPy's result without new axes
    newaxis_dims: tuple[int, ...]             # where new axes go in NumPy's result

    @property
    def result_shape(self) -> tuple[int, ...]:
        shape = list(self.gather_shape)
        for d in self.newaxis_dims:
            shape.insert(d, 1)
        return tuple(shape)

    @property
    def scatter_dimension_numbers(self) -> ScatterDimensionNumbers:
        dn = self.dimension_numbers
        return ScatterDimensionNumbers(dn.offset_dims, dn.collapsed_slice_dims, dn.start_index_map)


def _advanced_shape(entries: Sequence[_Entry]) -> tuple[int, ...]:
    shapes = [np.shape(e.index) if not isinstance(e.index, Tracer) else e.index.shape for e in entries]
    try:
        return broadcast_shapes(*shapes)
    except TypeError:
        listed = " ".join(str(tuple(s)) for s in shapes)
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together with shapes "
                         f"{listed}") from None


def _result_layout(entries: tuple) -> list:
    """NumPy's result dimensions in order: slices and new axes as they come, and the broadcast
    block of all integer indices ("advanced") where the first of them is if they are adjacent,
    else in front."""
    advanced = [i for i, e in enumerate(entries) if isinstance(e, _ADVANCED)]
    adjacent = advanced == list(range(advanced[0], advanced[-1] + 1)) if advanced else True
    layout: list = [] if adjacent else ["advanced"]
    for i, e in enumerate(entries):
        if not isinstance(e, _ADVANCED):
            layout.append(e)
        elif adjacent and i == advanced[0]:
            layout.append("advanced")
    return layout


def _gather_plan(shape: tuple[int, ...], entries: tuple, wrap_negative: bool, scatter: bool = False) -> _GatherPlan:
    """Gather parameters whose output is NumPy's result for ``entries`` (less its new axes).

    Step-1 slices become window (offset) dimensions; other slices and all integer indices
    become columns of the index array, whose batch dimensions are ordered as they appear in
    the result, so the gather needs no transpose after it.
    """
    advanced_shape = _advanced_shape([e for e in entries if isinstance(e, _ADVANCED)])
    gather_shape: list[int] = []
    offset_dims: list[int] = []
    newaxis_dims: list[int] = []
    batch_dims_of: dict[Any, tuple] = {}  # layout item -> its dimensions in the index batch shape
    batch_rank = 0
    for item in _result_layout(entries):
        if isinstance(item, _NewAxis):
            newaxis_dims.append(len(gather_shape) + len(newaxis_dims))
            continue
        if isinstance(item, _Slice) and item.step == 1:
            offset_dims.append(len(gather_shape))
            gather_shape.append(item.size)
            continue
        key, sizes = ("advanced", advanced_shape) if item == "advanced" else (item.dim, (item.size,))
        batch_dims_of[key] = tuple(range(batch_rank, batch_rank + len(sizes)))
        batch_rank += len(sizes)
        gather_shape.extend(sizes)
    batch_shape = tuple(s for d, s in enumerate(gather_shape) if d not in offset_dims)

    slice_sizes = list(shape)
    collapsed: list[int] = []
    columns: list[tuple[int, Any, tuple]] = []  # (operand dim, values, their batch dims)
    for e in entries:
        if isinstance(e, _Slice) and e.step == 1:
            slice_sizes[e.dim] = e.size
            if e.size != shape[e.dim]:
                columns.append((e.dim, np.asarray(e.start, _index_dtype()), ()))
        elif isinstance(e, _Slice):
            slice_sizes[e.dim] = 1
            collapsed.append(e.dim)
            positions = np.arange(e.size, dtype=_index_dtype()) * e.step + e.start
            columns.append((e.dim, positions, batch_dims_of[e.dim]))
        elif isinstance(e, _ADVANCED):
            # (an empty result needs no gather; a scatter by an array index into an empty axis drops
            # its updates, as JAX's does, while a static int index there is an error in JAX too)
            if 0 not in gather_shape and (not scatter or isinstance(e, _Int)):
                _check_nonempty_axis(shape[e.dim], e.dim)
            slice_sizes[e.dim] = 1
            collapsed.append(e.dim)
            block = batch_dims_of["advanced"]
            values = _normalize(e.index, shape[e.dim], wrap_negative)
            columns.append((e.dim, values, block[len(block) - np.ndim(values):]))
    indices = _stack_columns([(v, dims) for _, v, dims in columns], batch_shape)
    dnums = GatherDimensionNumbers(offset_dims=tuple(offset_dims), collapsed_slice_dims=tuple(collapsed),
                                   start_index_map=tuple(d for d, _, _ in columns))
    return _GatherPlan(indices, dnums, tuple(slice_sizes), tuple(gather_shape), tuple(newaxis_dims))


def _stack_columns(columns: list[tuple[Any, tuple]], batch_shape: tuple) -> Any:
    """The index array: each column broadcast to ``batch_shape``, stacked along a new last axis."""
    if all(not isinstance(v, Tracer) for v, _ in columns):
        stacked = np.zeros(batch_shape + (len(columns),), _index_dtype())
        for k, (values, dims) in enumerate(columns):
            stacked[..., k] = _numpy_broadcast_in_dim(values, batch_shape, dims)
        return asarray(stacked)
    out_shape = batch_shape + (1,)
    parts = [lax.broadcast_in_dim(ensure_array(v), out_shape, dims) for v, dims in columns]
    return lax.concatenate(parts, len(batch_shape))


def _numpy_broadcast_in_dim(values: np.ndarray, shape: tuple, dims: tuple) -> np.ndarray:
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = values.shape[i]
    return np.broadcast_to(values.reshape(expanded), shape)


# --- x[idx] --------------------------------------------------------------------------------------
def _expand_for_scalar_bools(x: Any, parsed: _ParsedIndex) -> Any:
    return lax.expand_dims(x, parsed.scalar_bool_dims) if parsed.scalar_bool_dims else x


def _filled(like: ShapedArray, value: int) -> Any:
    """An array of the type ``like`` filled with ``value``."""
    return lax.broadcast(lax.convert_element_type(value, like.dtype, like.weak_type), like.shape)


def _take(x: Any, index: Any, *, mode: Any = None, fill_value: Any = None, wrap_negative: bool = True,
          indices_are_sorted: bool = False, unique_indices: bool = False) -> Any:
    x = ensure_array(x)
    parsed = _parse_index(aval(x).shape, index)
    if mode is None:
        mode = GatherScatterMode.CLIP if fill_value is None else GatherScatterMode.FILL_OR_DROP
    mode = GatherScatterMode.from_any(mode)
    if not parsed.has_arrays and mode != GatherScatterMode.FILL_OR_DROP:
        return _basic_take(x, parsed.entries, wrap_negative)
    y = _expand_for_scalar_bools(x, parsed)
    plan = _gather_plan(aval(y).shape, parsed.entries, wrap_negative)
    if 0 in plan.gather_shape:
        return _filled(aval(x)._replace(shape=plan.result_shape), 0)
    out = lax.gather(y, plan.indices, plan.dimension_numbers, plan.slice_sizes, mode=mode, fill_value=fill_value,
                     indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
    return lax.expand_dims(out, plan.newaxis_dims) if plan.newaxis_dims else out


def getitem(x: Any, index: Any) -> Any:
    """``x[index]`` with NumPy's indexing rules; out-of-bounds integer indices are clamped."""
    return _take(x, index)


# --- x.at[idx].op(v) -------------------------------------------------------------------------------
def _logical_or_add(a: Any, b: Any) -> Any:
    return lax.bitwise_or(a, b) if aval(a).dtype == dtypes.bool_ else lax.add(a, b)


def _logical_and_mul(a: Any, b: Any) -> Any:
    return lax.bitwise_and(a, b) if aval(a).dtype == dtypes.bool_ else lax.mul(a, b)


class _UpdateOp(NamedTuple):
    scatter: Callable
    combine: Callable | None  # how a window combines with the updates (None: replace)


_UPDATE_OPS = {
    "set": _UpdateOp(lax.scatter, None),
    "add": _UpdateOp(lax.scatter_add, _logical_or_add),
    "subtract": _UpdateOp(lax.scatter_sub, lax.sub),
    "multiply": _UpdateOp(lax.scatter_mul, _logical_and_mul),
    "min": _UpdateOp(lax.scatter_min, lax.min),
    "max": _UpdateOp(lax.scatter_max, lax.max),
}


def _update_slice_starts(shape: tuple, entries: tuple, mode: GatherScatterMode,
                         wrap_negative: bool) -> tuple[list, list[int]] | None:
    """(starts, window shape) if the index is one contiguous block that can be written with
    ``dynamic_update_slice`` with the same result as a scatter, else None."""
    starts: list = [0] * len(shape)
    window = list(shape)
    for e in entries:
        if isinstance(e, _Slice):
            if e.step != 1 and e.size > 1:
                return None
            starts[e.dim], window[e.dim] = e.start, e.size
        elif isinstance(e, _Int):
            i = int(_normalize(e.index, shape[e.dim], wrap_negative))
            if not 0 <= i < shape[e.dim]:
                return None  # a scatter drops it; dynamic_update_slice would clamp it
            starts[e.dim], window[e.dim] = i, 1
        elif isinstance(e, _DynamicInt):
            if mode == GatherScatterMode.FILL_OR_DROP:
                return None
            starts[e.dim], window[e.dim] = _normalize(e.index, shape[e.dim], wrap_negative), 1
        elif not isinstance(e, _NewAxis):
            return None
    return starts, window


def _scatter_update(x: Any, index: Any, values: Any, op: str, *, mode: Any = None, wrap_negative: bool = True,
                    indices_are_sorted: bool = False, unique_indices: bool = False) -> Any:
    """``x`` with ``x[index] op= values``; ``values`` broadcast to ``x[index]``'s shape.

    As in JAX, the update happens in the promoted dtype of ``x`` and ``values``, and the result is
    cast back to ``x``'s dtype (so ``int_x.at[i].add(0.6)`` twice adds 1, not 0).
    """
    x = ensure_array(x)
    x_aval = aval(x)
    parsed = _parse_index(x_aval.shape, index)
    mode = GatherScatterMode.from_any(mode)
    update = _UPDATE_OPS[op]
    promoted, values = promote_dtypes(x, values)
    block = _update_slice_starts(x_aval.shape, parsed.entries, mode, wrap_negative)
    if block is not None:
        starts, window = block
        values = lax.reshape(broadcast_to(values, _basic_result_shape(parsed.entries, window)), window)
        if update.combine is not None:
            values = update.combine(_read_block(promoted, starts, window), values)
        out = lax.dynamic_update_slice(promoted, values, starts, allow_negative_indices=False)
    else:
        expanded = _expand_for_scalar_bools(promoted, parsed)
        plan = _gather_plan(aval(expanded).shape, parsed.entries, wrap_negative, scatter=True)
        values = broadcast_to(values, plan.result_shape)
        if 0 in plan.gather_shape or 0 in aval(expanded).shape:  # (nothing to update: every index is out of bounds)
            return x
        out = update.scatter(expanded, plan.indices, lax.reshape(values, plan.gather_shape),
                             plan.scatter_dimension_numbers, mode=mode, indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices)
        out = lax.squeeze(out, parsed.scalar_bool_dims) if parsed.scalar_bool_dims else out
    return lax.convert_element_type(out, x_aval.dtype, x_aval.weak_type)


def _basic_result_shape(entries: tuple, window: list[int]) -> tuple[int, ...]:
    """The shape of ``x[index]`` for a basic index, given each operand dimension's window size."""
    return tuple(1 if isinstance(e, _NewAxis) else window[e.dim] for e in entries
                 if not isinstance(e, (_Int, _DynamicInt)))


def _read_block(x: Any, starts: list, window: list[int]) -> Any:
    if any(isinstance(s, Tracer) for s in starts):
        return lax.dynamic_slice(x, starts, window, allow_negative_indices=False)
    return lax.slice(x, starts, [s + w for s, w in zip(starts, window)])


# --- nonzero ---------------------------------------------------------------------------------------
# Here, not in index_functions: the one-argument ufuncs.where is nonzero, and index_functions uses ufuncs.
def _ravel(x: Any) -> Any:
    """Flatten. A concrete array stays concrete (under jit, lax would stage it), so functions
    whose result shape depends on values (nonzero, compress) still accept it."""
    x = ensure_array(x)
    if isinstance(x, Tracer):
        return lax.reshape(x, (x.size,))
    return Array(np.ravel(x), x.aval._replace(shape=(x.size,)))


def _concrete(x: Any, message: str) -> np.ndarray:
    if isinstance(x, Tracer):
        raise x._trace.concretization_error(x, message, errors.ConcretizationTypeError)
    return np.asarray(x)


def nonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> tuple[Any, ...]:
    """Indices of the nonzero elements, one array per dimension.

    The result's length depends on the values, so a traced ``a`` needs a static ``size``: the first
    ``size`` indices are returned, padded with ``fill_value`` (default 0).
    """
    a = ensure_array(a)
    if a.ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use jnp.atleast_1d(scalar).nonzero() "
                         "instead.")
    if size is None:
        value = _concrete(a, "jnp.nonzero without size= (the number of nonzero elements must be known while "
                             "tracing: pass size=N, and fill_value= for the padding)")
        return tuple(asarray(i, _index_dtype()) for i in np.nonzero(value))
    size = operator.index(size)
    int_dtype = _index_dtype()
    if a.size == 0 or size == 0:
        return tuple(_filled(ShapedArray((size,), int_dtype), 0) for _ in a.shape)
    mask = _ravel(a if a.dtype == dtypes.bool_ else lax.ne(a, lax.convert_element_type(0, a.dtype)))
    counts = lax.cumsum(lax.convert_element_type(mask, int_dtype))
    slots = lax.select(mask, lax.sub(counts, 1), lax.convert_element_type(size, int_dtype))  # size: dropped
    flat = _scatter_update(_filled(ShapedArray((size,), int_dtype), 0), slots, lax.iota(int_dtype, a.size), "set",
                           mode="drop", unique_indices=True)
    strides = np.cumprod((1,) + a.shape[:0:-1])[::-1]
    out = [lax.rem(lax.div(flat, int(stride)), n) for stride, n in zip(strides, a.shape)]
    if fill_value is not None:
        fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * a.ndim
        if len(fills) != a.ndim or any(np.ndim(f) != 0 for f in fills):
            raise ValueError(f"fill_value must be a scalar or a tuple of length {a.ndim}; got {fill_value}")
        total = lax.reshape(lax.slice(counts, (a.size - 1,), (a.size,)), ())
        padding = lax.ge(lax.iota(int_dtype, size), total)
        out = [lax.select(padding, lax.convert_element_type(ensure_array(f), int_dtype), o) for f, o in zip(fills, out)]
    return tuple(out)
