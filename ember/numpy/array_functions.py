"""Array-building and function-applying helpers: ``block``, ``can_cast``, ``apply_along_axis``,
``apply_over_axes``, ``put_along_axis`` and ``mask_indices``.

All are compositions of existing jnp functions (``apply_along_axis`` nests ``vmap`` as JAX does),
so they work eagerly and under ``jit`` alike; shapes, axes and ``n`` must be static.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember import dtypes, lax
from ember.core.array import Array
from ember.core.trace import Tracer
from ember.lax.reductions import static_axis
from ember.numpy.array_utils import _refuse_inplace
from ember.numpy.core import ensure_array
from ember.numpy.creation import ones
from ember.numpy.index_functions import nonzero
from ember.numpy.shape_ops import concatenate, expand_dims, ravel, reshape
from ember.numpy.static_args import static_int
from ember.transforms.batching import vmap

__all__ = ["apply_along_axis", "apply_over_axes", "block", "can_cast", "mask_indices", "put_along_axis"]


def block(arrays: Any) -> Any:
    """One array assembled from nested lists of blocks: the innermost lists are joined along the
    last axis, the next ones along the second to last, and so on (blocks are promoted to a
    common rank by prepending ones)."""
    joined, _ = _block(arrays)
    return ensure_array(joined)


def _block(blocks: Any) -> tuple[Any, int]:
    """The joined ``blocks`` and their list depth."""
    if isinstance(blocks, tuple):
        raise ValueError(f"jax.numpy.block does not allow tuples, got {blocks}")
    if not isinstance(blocks, list):
        return blocks, 1
    if not blocks:
        raise ValueError("jax.numpy.block does not allow empty list arguments")
    parts, depths = zip(*(_block(b) for b in blocks))
    if len(set(depths)) != 1:
        raise ValueError("Mismatched list depths in jax.numpy.block")
    parts = [ensure_array(p) for p in parts]
    rank = max(depths[0], *(p.ndim for p in parts))
    parts = [lax.reshape(p, (1,) * (rank - p.ndim) + p.shape) for p in parts]
    return concatenate(parts, axis=-depths[0]), depths[0] + 1


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """NumPy's ``can_cast`` on dtypes; an array stands for its dtype. Python scalars are refused
    (as NumPy 2 does), since the answer used to depend on their value."""
    if isinstance(from_, (Array, Tracer)):
        from_ = from_.dtype
    elif not isinstance(from_, (bool, int, float, complex)):  # NumPy raises the TypeError for those
        from_ = dtypes.dtype(from_)
    return bool(np.can_cast(from_, dtypes.dtype(to), casting=casting))


def apply_along_axis(func1d: Callable, axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    """``func1d(slice, *args, **kwargs)`` for every 1-D slice of ``arr`` along ``axis``; the
    dimensions of each result replace ``axis``. Computed by nested ``vmap``."""
    arr = ensure_array(arr)
    axis = static_axis(static_int(axis, "axis", "apply_along_axis"), arr.ndim)

    def func(slice_: Any) -> Any:
        return func1d(slice_, *args, **kwargs)

    # Map the trailing dimensions first (their results go last), then the leading ones.
    for trailing in range(1, arr.ndim - axis):
        func = vmap(func, in_axes=trailing, out_axes=-1)
    for _ in range(axis):
        func = vmap(func, in_axes=0, out_axes=0)
    return func(arr)


def apply_over_axes(func: Callable[[Any, int], Any], a: Any, axes: Sequence[int]) -> Any:
    """``func(a, axis)`` applied for each of ``axes`` in turn; ``func`` must keep the rank or
    drop ``axis`` (it is then reinserted), so the rank never changes."""
    a = ensure_array(a)
    for axis in np.atleast_1d(axes).tolist():
        reduced = ensure_array(func(a, axis))
        if reduced.ndim == a.ndim - 1:
            reduced = expand_dims(reduced, axis)
        elif reduced.ndim != a.ndim:
            raise ValueError("function is not returning an array of the correct shape")
        a = reduced
    return a


def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None, inplace: bool = True, *,
                   mode: str | None = None) -> Any:
    """``arr`` with ``values`` stored at ``indices`` along ``axis`` (the scatter counterpart of
    ``take_along_axis``). JAX arrays are immutable: pass ``inplace=False``, which returns the
    updated copy. ``axis=None`` indexes the flattened ``arr`` with 1-D ``indices``."""
    _refuse_inplace(inplace, "put_along_axis")
    arr, indices = ensure_array(arr), ensure_array(indices)
    target = arr
    if axis is None:
        target, axis = ravel(arr), 0
    if target.ndim != indices.ndim:
        raise ValueError("put_along_axis arguments 'arr' and 'indices' must have same ndim. "
                         f"Got arr.ndim={target.ndim} and indices.ndim={indices.ndim}.")
    axis = static_axis(static_int(axis, "axis", "put_along_axis"), target.ndim)
    updated = target.at[_along_axis_index(target.shape, indices, axis)].set(values, mode=mode)
    return reshape(updated, arr.shape)


def _along_axis_index(shape: tuple[int, ...], indices: Any, axis: int) -> tuple[Any, ...]:
    """A fancy index that pairs ``indices`` along ``axis`` with every position of the other
    dimensions (an ``arange`` shaped to broadcast against ``indices``)."""
    index = []
    for dim, size in enumerate(shape):
        if dim == axis:
            index.append(indices)
        else:
            column = tuple(-1 if d == dim else 1 for d in range(len(shape)))
            index.append(np.arange(size, dtype=dtypes.int32).reshape(column))
    return tuple(index)


def mask_indices(n: int, mask_func: Callable[[Any, int], Any], k: int = 0, *,
                 size: int | None = None) -> tuple[Any, Any]:
    """The (row, column) indices where ``mask_func(ones((n, n)), k)`` is nonzero, e.g.
    ``mask_indices(n, jnp.triu)``. Under ``jit`` pass a static ``size`` (see ``nonzero``)."""
    n = static_int(n, "n", "mask_indices")
    rows, cols = nonzero(mask_func(ones((n, n)), k), size=size)
    return rows, cols
