"""Gather and scatter: indexing with arrays of start indices, as XLA defines them.

``gather`` reads one window (a static-size slice) of the operand per index
vector; ``scatter*`` writes (or combines) one window of updates per index
vector. The index vector is the last dimension of the index array. JAX's
parameter names and dimension-number tuples are kept, so code and printed IR
read the same.

Out-of-bounds windows follow ``GatherScatterMode``: ``CLIP`` moves the window
back inside the operand, ``FILL_OR_DROP`` fills gathered windows with
``fill_value`` and drops scattered ones, ``PROMISE_IN_BOUNDS`` lets backends
do what is cheapest (the reference clamps gathers and drops scatters, as XLA).
A mode of None is ``PROMISE_IN_BOUNDS`` for ``gather`` and ``FILL_OR_DROP`` for
the scatters, as in JAX.
"""
from __future__ import annotations

import enum
from typing import Any, NamedTuple, Sequence

import numpy as np

from ember import dtypes
from ember.core import traits
from ember.core.array import Array
from ember.core.avals import ShapedArray
from ember.core.trace import Tracer
from ember.core.traits import Family, free
from ember.lax.base import primitive

__all__ = [
    "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "gather", "scatter",
    "scatter_add", "scatter_max", "scatter_min", "scatter_mul", "scatter_sub",
]


class GatherDimensionNumbers(NamedTuple):
    """How gather's index array and windows map onto operand and result dimensions.

    offset_dims: result dimensions that hold the window (the slice dimensions that are kept).
    collapsed_slice_dims: operand dimensions whose size-1 window dimension is dropped.
    start_index_map: the operand dimension each entry of an index vector starts.
    operand_batching_dims / start_indices_batching_dims: operand dimensions indexed in lockstep
      with the given index-array dimensions (a batch of gathers, one per position).
    """

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """The transpose of ``GatherDimensionNumbers`` for scatter's updates.

    update_window_dims: dimensions of ``updates`` that hold the window.
    inserted_window_dims: operand dimensions whose size-1 window dimension is absent from ``updates``.
    scatter_dims_to_operand_dims: the operand dimension each entry of an index vector starts.
    operand_batching_dims / scatter_indices_batching_dims: as in gather.
    """

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


class GatherScatterMode(enum.Enum):
    """What happens to windows that do not fit inside the operand."""

    CLIP = enum.auto()
    FILL_OR_DROP = enum.auto()
    PROMISE_IN_BOUNDS = enum.auto()

    @staticmethod
    def from_any(mode: "str | GatherScatterMode | None") -> "GatherScatterMode":
        """Parse a mode; ``None`` is ``FILL_OR_DROP``, as in JAX."""
        if isinstance(mode, GatherScatterMode):
            return mode
        if mode is None or mode in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if mode == "clip":
            return GatherScatterMode.CLIP
        if mode == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        raise ValueError(f"Unknown gather/scatter mode {mode!r}; expected 'clip', 'fill', 'drop', "
                         "'promise_in_bounds' or a GatherScatterMode")


# --- shared checks ------------------------------------------------------------------------------
def _check_dims(op: str, what: str, dims: tuple, bound: int, sorted_: bool = True) -> None:
    if any(not 0 <= d < bound for d in dims):
        raise TypeError(f"{op}: {what} {dims} must be in the range [0, {bound})")
    if len(set(dims)) != len(dims):
        raise TypeError(f"{op}: {what} {dims} has repeated entries")
    if sorted_ and list(dims) != sorted(dims):
        raise TypeError(f"{op}: {what} {dims} must be sorted")


def _check_indices(op: str, indices: ShapedArray) -> None:
    if indices.dtype not in dtypes.INTEGER:
        raise ValueError("indices must have an integer type")  # (JAX's class and words)
    if indices.ndim < 1:
        raise TypeError(f"{op}: indices must have rank >= 1 (the last dimension holds the index vectors), "
                        f"got shape {indices.shape}")


def _check_index_map(op: str, operand: ShapedArray, indices: ShapedArray, index_map: tuple, map_name: str,
                     operand_batching: tuple, indices_batching: tuple, names: tuple[str, str]) -> None:
    """Checks shared by gather and scatter: index map, batching dimensions, index vector length."""
    _check_dims(op, map_name, index_map, operand.ndim, sorted_=False)
    if len(index_map) != indices.shape[-1]:
        raise TypeError(f"{op}: {map_name} {index_map} has {len(index_map)} entries, but the index vectors "
                        f"(the last dimension of indices, shape {indices.shape}) have {indices.shape[-1]}")
    _check_dims(op, names[0], operand_batching, operand.ndim)
    _check_dims(op, names[1], indices_batching, indices.ndim - 1, sorted_=False)
    if len(operand_batching) != len(indices_batching):
        raise TypeError(f"{op}: {names[0]} {operand_batching} and {names[1]} {indices_batching} must have "
                        "the same length")
    if set(index_map) & set(operand_batching):
        raise TypeError(f"{op}: {map_name} {index_map} and {names[0]} {operand_batching} must be disjoint")
    for od, idim in zip(operand_batching, indices_batching):
        if operand.shape[od] != indices.shape[idim]:
            raise TypeError(f"{op}: operand batching dimension {od} (size {operand.shape[od]}) and indices "
                            f"batching dimension {idim} (size {indices.shape[idim]}) must have equal sizes")


def _parse_fill_value(fill_value: Any) -> Any:
    """A hashable Python scalar (primitive params must be hashable)."""
    if fill_value is None:
        return None
    if isinstance(fill_value, Tracer):
        raise TypeError("gather: fill_value must be a concrete scalar, not a traced value")
    if np.ndim(fill_value) != 0:
        raise ValueError(f"gather: fill_value must be a scalar, got shape {np.shape(fill_value)}")
    return np.asarray(fill_value).item()


def _index_operand(indices: Any) -> Any:
    """Lists and NumPy arrays of indices become (canonically typed) arrays; arrays pass through."""
    if isinstance(indices, Tracer) or hasattr(indices, "_value"):
        return indices
    value = np.asarray(indices)
    if value.dtype.kind not in "iu":
        raise ValueError("indices must have an integer type")
    return Array(value.astype(dtypes.canonicalize_dtype(value.dtype)))


# --- gather ----------------------------------------------------------------------------------
def _gather_rule(operand: ShapedArray, indices: ShapedArray, *, dimension_numbers: GatherDimensionNumbers,
                 slice_sizes: tuple, mode: GatherScatterMode, fill_value: Any, indices_are_sorted: bool,
                 unique_indices: bool) -> ShapedArray:
    dn = dimension_numbers
    _check_indices("gather", indices)
    if len(slice_sizes) != operand.ndim:
        raise TypeError(f"gather: slice_sizes {slice_sizes} must have one entry per operand dimension "
                        f"(operand shape {operand.shape})")
    for d, (size, n) in enumerate(zip(slice_sizes, operand.shape)):
        if not 0 <= size <= n and 0 not in indices.shape:  # (JAX's words, and its exemption of empty indices)
            raise TypeError(f"Slice size at index {d} in gather op is out of range, must be within [0, {n} + 1), "
                            f"got {size}.")
    _check_dims("gather", "collapsed_slice_dims", dn.collapsed_slice_dims, operand.ndim)
    _check_index_map("gather", operand, indices, dn.start_index_map, "start_index_map",
                     dn.operand_batching_dims, dn.start_indices_batching_dims,
                     ("operand_batching_dims", "start_indices_batching_dims"))
    dropped = dn.collapsed_slice_dims + dn.operand_batching_dims
    if set(dn.collapsed_slice_dims) & set(dn.operand_batching_dims):
        raise TypeError(f"gather: collapsed_slice_dims {dn.collapsed_slice_dims} and operand_batching_dims "
                        f"{dn.operand_batching_dims} must be disjoint")
    for d in dropped:
        if slice_sizes[d] != 1:
            raise TypeError(f"gather: collapsed and batching operand dimensions need slice size 1, but "
                            f"dimension {d} has slice size {slice_sizes[d]}")
    window = [size for d, size in enumerate(slice_sizes) if d not in dropped]
    batch = list(indices.shape[:-1])
    out_rank = len(batch) + len(window)
    _check_dims("gather", "offset_dims", dn.offset_dims, out_rank)
    if len(dn.offset_dims) != len(window):
        raise TypeError(f"gather: offset_dims {dn.offset_dims} must have one entry per kept window dimension "
                        f"({len(window)}: operand rank {operand.ndim} minus collapsed and batching dimensions)")
    shape = [window.pop(0) if d in dn.offset_dims else batch.pop(0) for d in range(out_rank)]
    return ShapedArray(tuple(shape), operand.dtype, operand.weak_type)


gather_p = primitive("gather", _gather_rule, linear=True, cost=free)


def gather(operand: Any, start_indices: Any, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], *, unique_indices: bool = False, indices_are_sorted: bool = False,
           mode: str | GatherScatterMode | None = None, fill_value: Any = None) -> Any:
    """One window of ``slice_sizes`` per index vector (the last dimension of ``start_indices``).

    ``mode=None`` is ``'promise_in_bounds'``, as in JAX's ``lax.gather`` (so windows that do
    not fit are clamped, as with ``'clip'``; ``scatter``'s None is ``'drop'``). With
    ``mode='fill'`` windows that do not fit are filled with ``fill_value``: NaN for floats,
    the minimum for signed and the maximum for unsigned integers, True for bools. Start
    indices are never wrapped: a negative start is out of bounds.
    """
    mode = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else GatherScatterMode.from_any(mode)
    return gather_p.bind(
        operand, _index_operand(start_indices), dimension_numbers=_gather_dnums(dimension_numbers),
        slice_sizes=tuple(int(s) for s in slice_sizes), mode=mode,
        fill_value=_parse_fill_value(fill_value) if mode == GatherScatterMode.FILL_OR_DROP else None,
        indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices))


def _gather_dnums(dn: GatherDimensionNumbers) -> GatherDimensionNumbers:
    if not isinstance(dn, GatherDimensionNumbers):
        raise TypeError(f"gather: dimension_numbers must be a GatherDimensionNumbers, got {type(dn).__name__}")
    return GatherDimensionNumbers(*(tuple(int(d) for d in dims) for dims in dn))


# --- scatter -----------------------------------------------------------------------------------
def _scatter_rule(operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, *, name: str,
                  dimension_numbers: ScatterDimensionNumbers, mode: GatherScatterMode,
                  indices_are_sorted: bool, unique_indices: bool) -> ShapedArray:
    dn = dimension_numbers
    _check_indices(name, indices)
    if updates.dtype != operand.dtype:
        raise TypeError(f"{name}: updates dtype {updates.dtype} differs from operand dtype {operand.dtype}; "
                        "convert the updates first (lax.convert_element_type)")
    _check_dims(name, "update_window_dims", dn.update_window_dims, updates.ndim)
    _check_dims(name, "inserted_window_dims", dn.inserted_window_dims, operand.ndim)
    _check_index_map(name, operand, indices, dn.scatter_dims_to_operand_dims, "scatter_dims_to_operand_dims",
                     dn.operand_batching_dims, dn.scatter_indices_batching_dims,
                     ("operand_batching_dims", "scatter_indices_batching_dims"))
    if set(dn.inserted_window_dims) & set(dn.operand_batching_dims):
        raise TypeError(f"{name}: inserted_window_dims {dn.inserted_window_dims} and operand_batching_dims "
                        f"{dn.operand_batching_dims} must be disjoint")
    window_operand_dims = [d for d in range(operand.ndim)
                           if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
    if len(window_operand_dims) != len(dn.update_window_dims):
        raise TypeError(f"{name}: update_window_dims {dn.update_window_dims} must have one entry per operand "
                        f"dimension that is neither inserted nor batching ({len(window_operand_dims)})")
    batch = indices.shape[:-1]
    if updates.ndim != len(batch) + len(dn.update_window_dims):
        raise TypeError(f"{name}: updates of shape {updates.shape} must have rank {len(batch)} (index batch "
                        f"dimensions {batch}) + {len(dn.update_window_dims)} (window dimensions)")
    update_batch = tuple(s for d, s in enumerate(updates.shape) if d not in dn.update_window_dims)
    if update_batch != batch:
        raise TypeError(f"{name}: the non-window dimensions of updates {update_batch} must match the index "
                        f"batch shape {batch} (indices shape {indices.shape})")
    for ud, od in zip(dn.update_window_dims, window_operand_dims):
        if updates.shape[ud] > operand.shape[od]:
            raise TypeError(f"{name}: update window dimension {ud} (size {updates.shape[ud]}) is larger than "
                            f"operand dimension {od} (size {operand.shape[od]})")
    return operand


def _scatter_primitive(name: str):
    def rule(operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, **params: Any) -> ShapedArray:
        return _scatter_rule(operand, indices, updates, name=name, **params)

    return primitive(name, rule, family=Family.SCATTER, linear=name in ("scatter", "scatter-add", "scatter-sub",
                                                                         "scatter-mul"))


scatter_p = _scatter_primitive("scatter")
scatter_add_p = _scatter_primitive("scatter-add")
scatter_sub_p = _scatter_primitive("scatter-sub")
scatter_mul_p = _scatter_primitive("scatter-mul")
scatter_min_p = _scatter_primitive("scatter-min")
scatter_max_p = _scatter_primitive("scatter-max")


SCATTERS = traits.SCATTERS  # (a view of the traits table)


def _scatter_dnums(dn: ScatterDimensionNumbers) -> ScatterDimensionNumbers:
    if not isinstance(dn, ScatterDimensionNumbers):
        raise TypeError(f"scatter: dimension_numbers must be a ScatterDimensionNumbers, got {type(dn).__name__}")
    return ScatterDimensionNumbers(*(tuple(int(d) for d in dims) for dims in dn))


def _scatter_function(p, verb: str):
    def scatter_fn(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers,
                   *, indices_are_sorted: bool = False, unique_indices: bool = False,
                   mode: str | GatherScatterMode | None = None) -> Any:
        return p.bind(operand, _index_operand(scatter_indices), updates,
                      dimension_numbers=_scatter_dnums(dimension_numbers), mode=GatherScatterMode.from_any(mode),
                      indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices))

    scatter_fn.__name__ = p.name.replace("-", "_")
    scatter_fn.__doc__ = (f"``operand`` with one window of ``updates`` {verb} per index vector (the last "
                          "dimension of ``scatter_indices``). Windows that do not fit are dropped unless "
                          "``mode='clip'``.")
    return scatter_fn


scatter = _scatter_function(scatter_p, "written (duplicates: one of them wins)")
scatter_add = _scatter_function(scatter_add_p, "added (duplicates accumulate)")
scatter_sub = _scatter_function(scatter_sub_p, "subtracted (duplicates accumulate)")
scatter_mul = _scatter_function(scatter_mul_p, "multiplied in (duplicates accumulate)")
scatter_min = _scatter_function(scatter_min_p, "combined by minimum")
scatter_max = _scatter_function(scatter_max_p, "combined by maximum")
