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
        return "int", item  # (a NumPy scalar keeps its type: an unsigned index is never normalized)
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
    return ("int", value[()]) if value.ndim == 0 else ("array", value)


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
# JAX's rules, which ember follows to the bit (uint32 indices of 2**31 and more included):
#   * gathers and scatters (array indices, .at[...] updates, fill reads): a negative signed index
#     counts from the end, once; an unsigned one never does. The index then becomes the gather's
#     index type (int32 for any axis int32 can count), wrapping as a C cast does, so an unsigned
#     index of 2**31 or more lands below 0: out of bounds (clamped to 0, dropped or filled).
#   * x[i] with scalar indices only is a dynamic slice: in an operand of more than one dimension
#     every start is first converted to that index type (wrapping), then normalized and clamped;
#     in a one-dimensional operand the start keeps its type, so an unsigned start just clamps.
def _index_dtype() -> np.dtype:
    """The default integer type (what nonzero and the index functions return)."""
    return dtypes.default_int_dtype()


def _gather_index_dtype(shape: tuple[int, ...]) -> np.dtype:
    """The type of gather and scatter indices into ``shape``: int32 unless an axis is longer."""
    if any(n > np.iinfo(np.int32).max for n in shape):
        return dtypes.canonicalize_dtype(np.int64)
    return np.dtype(np.int32)


def _wrapped(value: int, dtype: np.dtype) -> int:
    """``value`` cast to ``dtype`` as C casts integers (two's complement, modulo 2**bits)."""
    info = np.iinfo(dtype)
    span = int(info.max) - int(info.min) + 1
    return (value - int(info.min)) % span + int(info.min)


def _static_index(index: Any) -> tuple[int, np.dtype]:
    """A static scalar start as the array JAX's dynamic slice makes of it, as (value, dtype): a
    NumPy scalar keeps its type (canonicalized, its value wrapped as the conversion does); a
    Python int takes the default integer type, and one that does not fit it is JAX's OverflowError."""
    if isinstance(index, (np.integer, np.ndarray)):
        dtype = dtypes.canonicalize_dtype(np.asarray(index).dtype)
        return _wrapped(int(index), dtype), dtype
    value, dtype = operator.index(index), _index_dtype()
    if not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
        raise OverflowError(f"Python int {value} too large to convert to {dtype.name}")
    return value, dtype


def _normalize(index: Any, n: int, wrap_negative: bool, index_dtype: np.dtype) -> Any:
    """A gather or scatter index in ``index_dtype``: a negative signed index plus ``n`` (exactly,
    in a type wide enough), an unsigned one unchanged, then cast (wrapping). A static index stays
    static (a Python int, or a NumPy array)."""
    if isinstance(index, Tracer):
        if wrap_negative and dtypes.is_signed(index.dtype):
            wide = dtypes.int64 if dtypes.int64 in (index.dtype, index_dtype) else dtypes.int32
            index = lax.convert_element_type(index, dtypes.canonicalize_dtype(wide))
            index = lax.select(lax.lt(index, 0), lax.add(index, n), index)
        return lax.convert_element_type(index, index_dtype)
    if np.ndim(index) == 0 and not isinstance(index, np.ndarray):
        value = operator.index(index)  # (exact: a NumPy scalar is normalized in its own type, then cast)
        if wrap_negative and value < 0:
            value += n
        return _wrapped(value, index_dtype)
    values = np.asarray(index)
    if wrap_negative and values.dtype.kind == "i":
        values = values.astype(np.int64)
        values = np.where(values < 0, values + n, values)
    return values.astype(index_dtype)  # (NumPy's cast wraps, as a C cast)


def _dynamic_start(index: Any, n: int, wrap_negative: bool, start_dtype: np.dtype | None) -> Any:
    """The start of ``x[i]``'s dynamic slice (clamped later by dynamic_slice): converted to
    ``start_dtype`` first when given (operands of more than one dimension), then a negative signed
    start plus ``n``. A static index gives the final, clamped Python int."""
    if not isinstance(index, Tracer):
        value, dtype = _static_index(index)
        if start_dtype is not None:
            value, dtype = _wrapped(value, start_dtype), start_dtype
        if wrap_negative and dtypes.is_signed(dtype) and value < 0:
            value += n
        return min(max(value, 0), n - 1)
    if start_dtype is not None:
        index = lax.convert_element_type(index, start_dtype)
    if wrap_negative and dtypes.is_signed(index.dtype):
        if index.dtype.itemsize < 4:  # (exact: JAX would add n in int8 / int16 and overflow)
            index = lax.convert_element_type(index, dtypes.int32)
        index = lax.select(lax.lt(index, 0), lax.add(index, n), index)
    return index


def _uniform_starts(starts: list, dtype: np.dtype) -> list:
    """Slice starts of one integer type, as lax.dynamic_slice wants them (static ones become constants)."""
    if not any(isinstance(s, Tracer) for s in starts):
        return starts
    return [lax.convert_element_type(s, dtype) for s in starts]


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
    # (JAX's dynamic slice converts the starts of a multi-dimensional operand to one index type first)
    start_dtype = _gather_index_dtype(shape) if len(shape) > 1 else None
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
            i = _dynamic_start(e.index, shape[e.dim], wrap_negative, start_dtype)
            starts[e.dim], limits[e.dim] = i, i + 1
            squeezed_dims.append(e.dim)
        else:  # _DynamicInt: dynamic_slice clamps the start into bounds
            _check_nonempty_axis(shape[e.dim], e.dim)
            dynamic_starts[e.dim] = _dynamic_start(e.index, shape[e.dim], wrap_negative, start_dtype)
            squeezed_dims.append(e.dim)
        out_pos += not isinstance(e, (_Int, _DynamicInt))
    y = lax.slice(x, starts, limits, strides)
    if dynamic_starts:
        sizes = [1 if d in dynamic_starts else n for d, n in enumerate(aval(y).shape)]
        dynamic = _uniform_starts([dynamic_starts.get(d, 0) for d in range(len(shape))],
                                  start_dtype or aval(next(iter(dynamic_starts.values()))).dtype)
        # (the starts are normalized already: lax must not add n to negative ones a second time)
        y = lax.dynamic_slice(y, dynamic, sizes, allow_negative_indices=False)
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
    index_dtype = _gather_index_dtype(shape)
    has_arrays = any(isinstance(e, _ArrayIndex) for e in entries)
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
                columns.append((e.dim, np.asarray(e.start, index_dtype), ()))
        elif isinstance(e, _Slice):
            slice_sizes[e.dim] = 1
            collapsed.append(e.dim)
            positions = np.arange(e.size, dtype=index_dtype) * e.step + e.start
            columns.append((e.dim, positions, batch_dims_of[e.dim]))
        elif isinstance(e, _ADVANCED):
            # (an empty result needs no gather. Scalar indices alone into an empty axis are an
            # IndexError, as in JAX; with array indices the gather's shape rule refuses the window, and
            # a scatter by an array index drops its updates, while a static int one is an error too)
            if 0 not in gather_shape and (isinstance(e, _Int) if scatter else not has_arrays):
                _check_nonempty_axis(shape[e.dim], e.dim)
            slice_sizes[e.dim] = 1
            collapsed.append(e.dim)
            block = batch_dims_of["advanced"]
            values = _normalize(e.index, shape[e.dim], wrap_negative, index_dtype)
            columns.append((e.dim, values, block[len(block) - np.ndim(values):]))
    indices = _stack_columns([(v, dims) for _, v, dims in columns], batch_shape, index_dtype)
    dnums = GatherDimensionNumbers(offset_dims=tuple(offset_dims), collapsed_slice_dims=tuple(collapsed),
                                   start_index_map=tuple(d for d, _, _ in columns))
    return _GatherPlan(indices, dnums, tuple(slice_sizes), tuple(gather_shape), tuple(newaxis_dims))


def _stack_columns(columns: list[tuple[Any, tuple]], batch_shape: tuple, index_dtype: np.dtype) -> Any:
    """The index array: each column broadcast to ``batch_shape``, stacked along a new last axis."""
    if all(not isinstance(v, Tracer) for v, _ in columns):
        stacked = np.zeros(batch_shape + (len(columns),), index_dtype)
        for k, (values, dims) in enumerate(columns):
            stacked[..., k] = _numpy_broadcast_in_dim(values, batch_shape, dims)
        return asarray(stacked)
    out_shape = batch_shape + (1,)
    parts = [lax.broadcast_in_dim(lax.convert_element_type(ensure_array(v), index_dtype), out_shape, dims)
             for v, dims in columns]
    return lax.concatenate(parts, len(batch_shape))


def _numpy_broadcast_in_dim(values: Any, shape: tuple, dims: tuple) -> np.ndarray:
    values = np.asarray(values)
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


def _fill_value_for_get(fill_value: Any) -> Any:
    """JAX's checks of ``.at[...].get(fill_value=...)``: a concrete scalar (used by mode='fill' only)."""
    if fill_value is None:
        return None
    if isinstance(fill_value, Tracer):
        raise fill_value._trace.concretization_error(fill_value, "use as the fill_value argument to indexed get()",
                                                     errors.ConcretizationTypeError)
    if np.ndim(fill_value) != 0:
        raise ValueError("fill_value argument to indexed get() must be a scalar")
    return np.asarray(fill_value).item()


def _take(x: Any, index: Any, *, mode: Any = None, fill_value: Any = None, wrap_negative: bool = True,
          indices_are_sorted: bool = False, unique_indices: bool = False) -> Any:
    """``x[index]``; reads clamp unless ``mode='fill'``, which alone uses ``fill_value`` (as in JAX,
    where a fill value without that mode is ignored). With no mode the gather promises its indices
    are in bounds: it clamps, and its transpose (the gradient) drops what did not fit, as JAX's."""
    x = ensure_array(x)
    parsed = _parse_index(aval(x).shape, index)
    mode = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else GatherScatterMode.from_any(mode)
    if not parsed.has_arrays and mode != GatherScatterMode.FILL_OR_DROP:
        return _basic_take(x, parsed.entries, wrap_negative)
    y = _expand_for_scalar_bools(x, parsed)
    plan = _gather_plan(aval(y).shape, parsed.entries, wrap_negative)
    fill_value = _fill_value_for_get(fill_value)
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
    index_dtype = _gather_index_dtype(shape)
    for e in entries:
        if isinstance(e, _Slice):
            if e.step != 1 and e.size > 1:
                return None
            starts[e.dim], window[e.dim] = e.start, e.size
        elif isinstance(e, _Int):
            i = _normalize(e.index, shape[e.dim], wrap_negative, index_dtype)
            if not 0 <= i < shape[e.dim]:
                return None  # a scatter drops it; dynamic_update_slice would clamp it
            starts[e.dim], window[e.dim] = i, 1
        elif isinstance(e, _DynamicInt):
            if mode == GatherScatterMode.FILL_OR_DROP:
                return None
            starts[e.dim], window[e.dim] = _normalize(e.index, shape[e.dim], wrap_negative, index_dtype), 1
        elif not isinstance(e, _NewAxis):
            return None
    return _uniform_starts(starts, index_dtype), window


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
    if any(not isinstance(s, int) for s in starts):
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
