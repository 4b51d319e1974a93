"""Reference rules for gather and scatter.

Both build, for every index vector, the full operand coordinates of its window
as broadcast index arrays (batch dims + window dims), then read them with one
NumPy fancy index, or write them with one ``np.<ufunc>.at`` call: no Python
loop over elements.
"""
from __future__ import annotations

import numpy as np

from ember import dtypes
from ember.backends.reference import impl_rules
from ember.lax import indexing as ix
from ember.lax.indexing import GatherScatterMode


def _window_coordinates(operand_shape: tuple, indices: np.ndarray, index_map: tuple, window_sizes: tuple,
                        operand_batching_dims: tuple, indices_batching_dims: tuple,
                        clip: bool) -> tuple[list[np.ndarray], np.ndarray]:
    """Operand coordinates of every window element, each of shape ``batch + window_sizes``, and
    whether each window (one per index vector) fits inside the operand."""
    batch_shape = indices.shape[:-1]
    full_shape = batch_shape + tuple(window_sizes)
    rank = len(operand_shape)
    starts: list = [np.int64(0)] * rank
    in_bounds = np.ones(batch_shape, dtype=bool)
    for k, d in enumerate(index_map):
        start = indices[..., k].astype(np.int64)
        upper = operand_shape[d] - window_sizes[d]
        in_bounds &= (start >= 0) & (start <= upper)
        starts[d] = np.clip(start, 0, upper) if clip else start
    for od, idim in zip(operand_batching_dims, indices_batching_dims):
        position = [1] * len(batch_shape)
        position[idim] = batch_shape[idim]
        starts[od] = np.arange(batch_shape[idim]).reshape(position)
    coordinates = []
    for d in range(rank):
        offset_shape = [1] * rank
        offset_shape[d] = window_sizes[d]
        offsets = np.arange(window_sizes[d]).reshape((1,) * len(batch_shape) + tuple(offset_shape))
        start = np.reshape(starts[d], np.shape(starts[d]) + (1,) * rank)
        coordinates.append(np.broadcast_to(start + offsets, full_shape))
    return coordinates, in_bounds


def default_fill_value(dt: np.dtype) -> object:
    """JAX's fill for out-of-bounds gathers: NaN, the signed minimum, the unsigned maximum, True."""
    if dt == dtypes.bool_:
        return True
    if dtypes.is_signed(dt):
        return np.iinfo(dt).min
    if dtypes.is_unsigned(dt):
        return np.iinfo(dt).max
    return np.nan


def _gather(operand: np.ndarray, indices: np.ndarray, *, dimension_numbers, slice_sizes: tuple,
            mode: GatherScatterMode, fill_value, indices_are_sorted: bool, unique_indices: bool) -> np.ndarray:
    dn = dimension_numbers
    coordinates, in_bounds = _window_coordinates(
        operand.shape, indices, dn.start_index_map, slice_sizes, dn.operand_batching_dims,
        dn.start_indices_batching_dims, clip=True)
    windows = operand[tuple(coordinates)]  # batch + slice_sizes
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    batch_shape = indices.shape[:-1]
    window_shape = tuple(s for d, s in enumerate(slice_sizes) if d not in dropped)
    windows = windows.reshape(batch_shape + window_shape)
    if mode == GatherScatterMode.FILL_OR_DROP:
        fill = default_fill_value(operand.dtype) if fill_value is None else fill_value
        mask = in_bounds.reshape(batch_shape + (1,) * len(window_shape))
        windows = np.where(mask, windows, np.asarray(fill).astype(operand.dtype))
    # Batch dims come first here; the result puts window dims at offset_dims.
    out_rank = windows.ndim
    batch_dims = iter(range(len(batch_shape)))
    permutation = [len(batch_shape) + dn.offset_dims.index(d) if d in dn.offset_dims else next(batch_dims)
                   for d in range(out_rank)]
    return np.transpose(windows, permutation)


def _scatter_impl(combine):
    """The impl of one scatter flavor; ``combine(out, coordinates, values)`` writes in place."""
    def impl(operand: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, dimension_numbers,
             mode: GatherScatterMode, indices_are_sorted: bool, unique_indices: bool) -> np.ndarray:
        dn = dimension_numbers
        window_operand_dims = [d for d in range(operand.ndim)
                               if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
        window_sizes = [1] * operand.ndim
        for ud, od in zip(dn.update_window_dims, window_operand_dims):
            window_sizes[od] = updates.shape[ud]
        coordinates, in_bounds = _window_coordinates(
            operand.shape, indices, dn.scatter_dims_to_operand_dims, tuple(window_sizes),
            dn.operand_batching_dims, dn.scatter_indices_batching_dims, clip=mode == GatherScatterMode.CLIP)
        # Updates as batch + full window (size-1 dims where windows are inserted or batched).
        batch_dims = [d for d in range(updates.ndim) if d not in dn.update_window_dims]
        values = np.transpose(updates, batch_dims + list(dn.update_window_dims))
        values = values.reshape(indices.shape[:-1] + tuple(window_sizes))
        if mode != GatherScatterMode.CLIP:  # drop windows that do not fit
            coordinates = [c[in_bounds] for c in coordinates]
            values = values[in_bounds]
        out = operand.copy()
        combine(out, tuple(coordinates), values)
        return out

    return impl


def _assign(out: np.ndarray, coordinates: tuple, values: np.ndarray) -> None:
    out[coordinates] = values


impl_rules.update({
    ix.gather_p: _gather,
    ix.scatter_p: _scatter_impl(_assign),
    ix.scatter_add_p: _scatter_impl(np.add.at),
    ix.scatter_sub_p: _scatter_impl(np.subtract.at),
    ix.scatter_mul_p: _scatter_impl(np.multiply.at),
    ix.scatter_min_p: _scatter_impl(np.minimum.at),
    ix.scatter_max_p: _scatter_impl(np.maximum.at),
})
