"""Index grids and index-building helpers: ``indices``, ``fromfunction``, ``mgrid``, ``ogrid``,
``r_``, ``c_``, ``s_``, ``index_exp``, and ``geomspace``.

Grid shapes come from Python slices and ints, so they are static; the values are built by lax.
A complex step ``a:b:nj`` means ``n`` points from ``a`` to ``b`` inclusive, as in NumPy.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from ember import dtypes, lax
from ember.numpy.core import ensure_array, promote_dtypes_inexact
from ember.numpy.creation import arange, linspace, logspace
from ember.numpy.shape_ops import atleast_1d, concatenate, expand_dims, moveaxis, stack
from ember.numpy.static_args import static_int
from ember.numpy.ufuncs import multiply, sign
from ember.transforms.batching import vmap

__all__ = ["c_", "fromfunction", "geomspace", "index_exp", "indices", "mgrid", "ogrid", "r_", "s_"]

s_ = np.s_
index_exp = np.index_exp


def indices(dimensions: Sequence[int], dtype: Any = None, sparse: bool = False) -> Any:
    """For each axis of a grid of shape ``dimensions``, the index along that axis; dense: one
    stacked array, sparse: a tuple of arrays broadcastable to the grid."""
    shape = tuple(static_int(d, "dimensions", "indices") for d in dimensions)
    dtype = dtypes.requested_dtype(dtype) if dtype is not None else dtypes.default_int_dtype()
    grids = []
    for axis, n in enumerate(shape):
        if sparse:
            along_axis = tuple(n if d == axis else 1 for d in range(len(shape)))
            grids.append(lax.broadcast_in_dim(lax.iota(dtype, n), along_axis, (axis,)))
        else:
            grids.append(lax.broadcasted_iota(dtype, shape, axis))
    if sparse:
        return tuple(grids)
    return stack(grids) if grids else lax.broadcast_in_dim(lax.convert_element_type(0, dtype), (0,), ())


def fromfunction(function: Callable[..., Any], shape: Any, *, dtype: Any = float, **kwargs: Any) -> Any:
    """``function`` called on the index of every point of a grid of ``shape``, vectorized with
    one ``vmap`` per axis (so ``function`` sees scalar indices of ``dtype``, as in JAX)."""
    shape = tuple(static_int(d, "shape", "fromfunction") for d in (shape if isinstance(shape, (tuple, list))
                                                                     else (shape,)))
    mapped = functools.partial(function, **kwargs)
    for axis in reversed(range(len(shape))):
        mapped = vmap(mapped, in_axes=tuple(0 if a == axis else None for a in range(len(shape))))
    return mapped(*(arange(n, dtype=dtype) for n in shape))


def geomspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, dtype: Any = None,
              axis: int = 0) -> Any:
    """``num`` numbers spaced evenly on a log scale from ``start`` to ``stop`` (both nonzero, of
    one sign)."""
    start, stop = promote_dtypes_inexact(ensure_array(start), ensure_array(stop))
    direction = sign(start)
    log_start = lax.log(lax.div(start, direction))
    log_stop = lax.log(lax.div(stop, direction))
    ln10 = lax.convert_element_type(np.log(10.0), start.dtype)
    values = logspace(lax.div(log_start, ln10), lax.div(log_stop, ln10), num, endpoint, dtype=start.dtype)
    values = multiply(expand_dims(direction, 0) if direction.ndim else direction, values)
    if axis != 0:
        values = moveaxis(values, 0, axis)
    return values if dtype is None else lax.convert_element_type(values, dtypes.requested_dtype(dtype))


def _slice_points(s: slice) -> Any:
    """The points of one ``mgrid`` / ``r_`` slice: ``arange``, or ``linspace`` for a complex step."""
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if isinstance(step, complex):
        return linspace(start, s.stop, int(abs(step)), endpoint=True)
    return arange(start, s.stop, step)


class _Grid:
    """``mgrid[...]`` / ``ogrid[...]``: the grid of the given slices, dense or open."""

    def __init__(self, sparse: bool, name: str) -> None:
        self.sparse = sparse
        self.name = name

    def __getitem__(self, key: slice | tuple[slice, ...]) -> Any:
        if isinstance(key, slice):
            return _slice_points(key)
        points = [_slice_points(s) for s in key]
        dtype = dtypes.result_type(*(p.dtype for p in points)) if points else dtypes.default_int_dtype()
        shape = tuple(p.shape[0] for p in points)
        grids = [lax.broadcast_in_dim(lax.convert_element_type(p, dtype),
                                      shape if not self.sparse else tuple(n if d == axis else 1
                                                                          for d, n in enumerate(shape)), (axis,))
                 for axis, p in enumerate(points)]
        if self.sparse:
            return grids
        return stack(grids) if grids else lax.broadcast_in_dim(lax.convert_element_type(0, dtype), (0,), ())

    def __repr__(self) -> str:
        return f"jnp.{self.name}"


mgrid = _Grid(sparse=False, name="mgrid")
ogrid = _Grid(sparse=True, name="ogrid")


class _Concatenator:
    """``r_[...]`` / ``c_[...]``: concatenate slices (as ranges), scalars and arrays along an axis.

    A leading string ``"axis[,ndmin[,trans1d]]"`` overrides the axis, the minimum rank every
    piece is raised to, and where a raised 1-D piece's values go (``-1``: last axis).
    """

    def __init__(self, axis: int, ndmin: int, trans1d: int, name: str) -> None:
        self.defaults = (axis, ndmin, trans1d)
        self.name = name

    def __getitem__(self, key: Any) -> Any:
        items = list(key) if isinstance(key, tuple) else [key]
        axis, ndmin, trans1d = self.defaults
        if items and isinstance(items[0], str):
            axis, ndmin, trans1d = self._directive(items.pop(0))
        pieces = []
        for item in items:
            if isinstance(item, str):
                raise ValueError(f"jnp.{self.name}: a string directive must come first, got {item!r} later")
            piece = _slice_points(item) if isinstance(item, slice) else atleast_1d(ensure_array(item))
            pieces.append(self._raise_rank(piece, ndmin, trans1d))
        if not pieces:
            return arange(0)
        return concatenate(pieces, axis=axis)

    def _directive(self, text: str) -> tuple[int, int, int]:
        if text in ("r", "c"):
            raise NotImplementedError(f"jnp.{self.name}: the matrix directive {text!r} is not supported "
                                      "(ember has no matrix type)")
        try:
            values = [int(v) for v in text.split(",")]
        except ValueError:
            raise ValueError(f"jnp.{self.name}: could not understand directive {text!r}: expected "
                             "'axis[,ndmin[,trans1d]]' of integers") from None
        if len(values) > 3:
            raise ValueError(f"jnp.{self.name}: directive {text!r} has more than 3 integers")
        return tuple(values + list(self.defaults[len(values):]))  # type: ignore[return-value]

    @staticmethod
    def _raise_rank(piece: Any, ndmin: int, trans1d: int) -> Any:
        """Raise ``piece`` to rank ``ndmin`` as NumPy does: prepend unit axes, then (unless
        ``trans1d`` is -1) rotate the piece's own axes to start at axis ``trans1d``."""
        added = ndmin - piece.ndim
        if added <= 0:
            return piece
        raised = lax.reshape(piece, (1,) * added + piece.shape)
        if trans1d == -1:
            return raised
        start = trans1d + added + 1 if trans1d < 0 else trans1d
        axes = list(range(ndmin))
        return lax.transpose(raised, tuple(axes[:start] + axes[added:] + axes[start:added]))

    def __repr__(self) -> str:
        return f"jnp.{self.name}"


r_ = _Concatenator(axis=0, ndmin=1, trans1d=-1, name="r_")
c_ = _Concatenator(axis=-1, ndmin=2, trans1d=0, name="c_")
