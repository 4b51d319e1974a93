"""Image interpolation with SciPy's conventions (``jax.scipy.ndimage``): ``map_coordinates`` of
order 0 (nearest) or 1 (linear).

Each output point sums the input at the ``2 ** ndim`` (order 1) or one (order 0) surrounding
grid points, weighted; a grid point outside the input is mapped back in by ``mode``:
``"constant"`` (it reads ``cval``), ``"nearest"`` (the edge sample), ``"wrap"`` (periodic, period
``n``: SciPy's ``"grid-wrap"``), ``"mirror"`` (reflected about the edge samples, period ``2n - 2``)
or ``"reflect"`` (reflected about the edges, period ``2n``).
"""
from __future__ import annotations

import functools
import itertools
from typing import Any, Sequence

import numpy as np

import ember.numpy as jnp
from ember import dtypes, lax
from ember.lax.base import aval
from ember.numpy.arraylike import check_arraylike
from ember.numpy.core import asarray, ensure_array

__all__ = ["map_coordinates"]


def _mirror(index: Any, size: int) -> Any:
    if size == 1:
        return jnp.zeros_like(index)
    period = 2 * (size - 1)
    index = jnp.remainder(index, period)
    return jnp.where(index >= size, period - index, index)


def _reflect(index: Any, size: int) -> Any:
    period = 2 * size
    index = jnp.remainder(index, period)
    return jnp.where(index >= size, period - 1 - index, index)


_MODES = {
    "constant": lambda index, size: jnp.clip(index, 0, size - 1),  # (out of range reads cval instead)
    "nearest": lambda index, size: jnp.clip(index, 0, size - 1),
    "wrap": lambda index, size: jnp.remainder(index, size),
    "mirror": _mirror,
    "reflect": _reflect,
}


def _nodes(coordinate: Any, order: int) -> list[tuple[Any, Any]]:
    """The grid points (int32 indices) and weights that interpolate at ``coordinate`` on one axis."""
    if dtypes.issubdtype(aval(coordinate).dtype, np.integer):
        return [(coordinate.astype(np.int32), None)]
    if order == 0:  # round half away from zero, as SciPy
        return [(lax.round(coordinate).astype(np.int32), None)]
    lower = jnp.floor(coordinate)
    upper_weight = coordinate - lower
    index = lower.astype(np.int32)
    return [(index, 1 - upper_weight), (index + 1, upper_weight)]


def map_coordinates(input: Any, coordinates: Sequence[Any], order: int, mode: str = "constant",
                    cval: Any = 0.0) -> Any:
    """``input`` interpolated at the points whose coordinates along axis ``i`` are
    ``coordinates[i]`` (arrays of one shape, the result's); the result has ``input``'s dtype
    (integers round half away from zero)."""
    check_arraylike("map_coordinates", input, *coordinates)
    image = ensure_array(input)
    coords = [ensure_array(c) for c in coordinates]
    if len(coords) != aval(image).ndim:
        raise ValueError(f"coordinates must be a sequence of length input.ndim, but {len(coords)} != "
                         f"{aval(image).ndim}")
    if mode not in _MODES:
        raise NotImplementedError(f"jax.scipy.ndimage.map_coordinates does not yet support mode {mode}. "
                                  f"Currently supported modes are {set(_MODES)}.")
    if order not in (0, 1):
        raise NotImplementedError("jax.scipy.ndimage.map_coordinates currently requires order<=1")
    fill = asarray(cval, aval(image).dtype)
    per_axis = []
    for coordinate, size in zip(coords, aval(image).shape):
        per_axis.append([(_MODES[mode](index, size), (index >= 0) & (index < size), weight)
                         for index, weight in _nodes(coordinate, order)])
    total = None
    for corner in itertools.product(*per_axis):
        indices, inside, weights = zip(*corner)
        value = image[tuple(indices)]
        if mode == "constant":
            value = jnp.where(functools.reduce(jnp.logical_and, inside), value, fill)
        for weight in weights:
            if weight is not None:
                value = value * weight
        total = value if total is None else total + value
    if dtypes.issubdtype(aval(image).dtype, np.integer) and dtypes.issubdtype(aval(total).dtype, np.inexact):
        total = lax.round(total)
    return total.astype(aval(image).dtype)
