"""``jnp.pad``: every mode of NumPy's ``pad`` (and a callable), with JAX's types and errors.

Widths are static (they give the shape). Modes that copy the array's own values (``edge``,
``wrap``, even ``reflect`` / ``symmetric``) are one static gather per axis; the others build each
axis's two pads from slices of the array padded so far, axis after axis, as NumPy and JAX do
(so that a later axis's statistics and ramps see the earlier axes' padding).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import dtypes, lax
from ember.lax.base import aval
from ember.numpy.array_functions import apply_along_axis
from ember.numpy.core import broadcast_to, ensure_array
from ember.numpy.creation import linspace
from ember.numpy.reductions import max as _max, mean as _mean, median as _median, min as _min
from ember.numpy.shape_ops import _static_ints, take_static
from ember.numpy.ufuncs import round as _round


def _pairs(value: Any, ndim: int, what: str) -> np.ndarray:
    """``value`` (an int, a (before, after) pair, or a pair per axis) as an (ndim, 2) table."""
    try:
        return np.broadcast_to(value, (ndim, 2))
    except ValueError:
        raise ValueError(f"jnp.pad: {what} {value!r} does not fit an array of {ndim} dimensions: give "
                         "an int, a (before, after) pair, or one pair per dimension") from None


def _pad_widths(pad_width: Any, ndim: int) -> np.ndarray:
    widths = _pairs(_static_ints(pad_width, "jnp.pad: pad_width"), ndim, "pad_width")
    if (widths < 0).any():
        raise ValueError(f"jnp.pad: pad_width must be non-negative, got {pad_width!r}")
    return widths


def _pad_constant(array: Any, widths: np.ndarray, constant_values: Any) -> Any:
    values = ensure_array(constant_values)
    if values.ndim == 0:
        return lax.pad(array, values, [(int(lo), int(hi), 0) for lo, hi in widths])
    values = broadcast_to(values, (array.ndim, 2))
    for axis, (lo, hi) in enumerate(widths):
        for side, width in enumerate((lo, hi)):
            value = lax.reshape(lax.slice(values, (axis, side), (axis + 1, side + 1)), ())
            config = [(0, 0, 0)] * array.ndim
            config[axis] = (int(width), 0, 0) if side == 0 else (0, int(width), 0)
            array = lax.pad(array, value, config)
    return array


def _symmetric_index(p: np.ndarray, n: int) -> np.ndarray:
    t = p % (2 * n)
    return np.where(t < n, t, 2 * n - 1 - t)


def _reflect_index(p: np.ndarray, n: int) -> np.ndarray:
    if n == 1:
        return np.zeros_like(p)
    period = 2 * (n - 1)
    t = p % period
    return np.where(t < n, t, period - t)


# Source index along an axis of size n for each position p in [-before, n + after).
_PAD_SOURCE_INDEX = {
    "edge": lambda p, n: np.clip(p, 0, n - 1),
    "wrap": lambda p, n: p % n,
    "symmetric": _symmetric_index,
    "reflect": _reflect_index,
}


def _concat(parts: list, axis: int) -> Any:
    parts = [p for p in parts if aval(p).shape[axis] > 0]
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, axis)


def _repeat_along(x: Any, count: int, axis: int) -> Any:
    """``x`` (of size 1 along ``axis``) repeated ``count`` times along it."""
    shape = list(aval(x).shape)
    shape[axis] = count
    return lax.broadcast_in_dim(lax.squeeze(x, (axis,)), tuple(shape),
                                tuple(d for d in range(len(shape)) if d != axis))


def _odd_mirror(array: Any, axis: int, lo: int, hi: int, mode: str) -> Any:
    """``reflect_type='odd'``: NumPy mirrors block after block, each ``2 * edge - block`` about
    the outermost value so far. That is the odd extension g(-t) = 2 x[0] - g(t) (``reflect``;
    ``symmetric`` mirrors about -1/2), which repeats with period P = 2 (n - 1) (``symmetric``:
    2 n) shifted by D = 2 (x[n-1] - x[0]) each period. So each position is one gathered value
    with static coefficients: g(p) = sign x[i] + c0 x[0] + c1 x[n-1], whatever the pad's width
    (a pad built block by block would nest a block per period)."""
    n = aval(array).shape[axis]
    p = np.arange(-lo, n + hi)
    if n == 1:  # (every mirror of one value is that value)
        return take_static(array, np.zeros_like(p), axis)
    period = 2 * (n - 1) if mode == "reflect" else 2 * n
    q, t = np.divmod(p, period)
    inside = t < n  # g = x[t] + q D, else 2 x[n-1] - x[period - t (- 1)] + q D
    index = np.where(inside, t, period - t - (mode == "symmetric"))
    sign, c0, c1 = np.where(inside, 1, -1), -2 * q, 2 * q + np.where(inside, 0, 2)
    dt = aval(array).dtype
    shape = aval(array).shape[:axis] + (len(p),) + aval(array).shape[axis + 1:]

    def along(values: np.ndarray) -> Any:  # a static vector along ``axis``, broadcast
        return lax.broadcast_in_dim(ensure_array(values.astype(dt)), shape, (axis,))

    first = _repeat_along(lax.slice_in_dim(array, 0, 1, axis=axis), len(p), axis)
    last = _repeat_along(lax.slice_in_dim(array, n - 1, n, axis=axis), len(p), axis)
    out = lax.mul(along(sign), take_static(array, index, axis))
    return lax.add(out, lax.add(lax.mul(along(c0), first), lax.mul(along(c1), last)))


def _linear_ramp(array: Any, axis: int, lo: int, hi: int, end_values: np.ndarray) -> Any:
    """From ``end_values`` at the outer ends to the edge values (left out), in the array's type."""
    a = aval(array)
    size = a.shape[axis]
    ramps = []
    for k, (width, edge) in enumerate(((lo, 0), (hi, size - 1))):
        stop = lax.squeeze(lax.slice_in_dim(array, edge, edge + 1, axis=axis), (axis,))
        ramp = linspace(end_values[k], stop, int(width), endpoint=False, dtype=a.dtype, axis=axis)
        ramp = lax.convert_element_type(ramp, a.dtype, a.weak_type)
        ramps.append(ramp if k == 0 else lax.rev(ramp, (axis,)))
    return _concat([ramps[0], array, ramps[1]], axis)


_STATISTICS = {"maximum": _max, "minimum": _min, "mean": _mean, "median": _median}


def _statistic(array: Any, axis: int, lo: int, hi: int, stat: Callable, lengths: Any) -> Any:
    """Each side: the statistic of the ``lengths`` values next to it (the whole axis if None),
    rounded half to even for integer arrays, repeated over the side's width."""
    a = aval(array)
    size = a.shape[axis]
    sides = []
    for k, width in enumerate((lo, hi)):
        window = array
        if lengths is not None:
            length = min(int(lengths[k]), size)
            window = lax.slice_in_dim(array, 0, length, axis=axis) if k == 0 else \
                lax.slice_in_dim(array, size - length, size, axis=axis)
        value = stat(window, axis=axis, keepdims=True)
        if dtypes.is_integer(a.dtype):
            value = _round(value)
        sides.append(_repeat_along(lax.convert_element_type(value, a.dtype, a.weak_type), int(width), axis))
    return _concat([sides[0], array, sides[1]], axis)


_KEYWORDS = {"constant": {"constant_values"}, "empty": set(), "edge": set(), "wrap": set(),
             "linear_ramp": {"end_values"}, "maximum": {"stat_length"}, "mean": {"stat_length"},
             "median": {"stat_length"}, "minimum": {"stat_length"}, "reflect": {"reflect_type"},
             "symmetric": {"reflect_type"}}


def pad(array: Any, pad_width: Any, mode: str | Callable = "constant", **kwargs: Any) -> Any:
    """Pad ``array`` by ``pad_width`` (an int, a (before, after) pair, or a pair per axis), as
    NumPy's ``pad`` does in every mode: a constant; the edge value; wrapping around; mirroring
    (``reflect`` leaves the edge out, ``symmetric`` repeats it; ``reflect_type='odd'`` mirrors
    about the edge value); a linear ramp to ``end_values``; the maximum, minimum, mean or median
    of ``stat_length`` values next to each side; or ``mode(vector, (before, after), axis,
    kwargs)`` called for each 1-D slice of the zero-padded array, returning it filled."""
    array = ensure_array(array)
    ndim = aval(array).ndim
    widths = _pad_widths(pad_width, ndim)
    if callable(mode):
        padded = _pad_constant(array, widths, 0)
        for axis in range(ndim):
            padded = apply_along_axis(mode, axis, padded, tuple(int(w) for w in widths[axis]), axis, kwargs)
        return padded
    if mode not in _KEYWORDS:
        raise NotImplementedError(f"jnp.pad: unimplemented padding mode {mode!r}; use one of "
                                  f"{sorted(_KEYWORDS)} or a function")
    unexpected = set(kwargs) - _KEYWORDS[mode]
    if unexpected:
        raise ValueError(f"jnp.pad: unsupported keyword arguments for mode {mode!r}: {sorted(unexpected)}")
    if ndim == 0:
        return array
    if mode in ("constant", "empty"):
        return _pad_constant(array, widths, kwargs.get("constant_values", 0))
    reflect_type = kwargs.get("reflect_type", "even")
    if reflect_type not in ("even", "odd"):
        raise ValueError(f"jnp.pad: reflect_type must be 'even' or 'odd', got {reflect_type!r}")
    if mode == "linear_ramp":
        end_values = _pairs(np.asarray(kwargs.get("end_values", 0)), ndim, "end_values")
    lengths = kwargs.get("stat_length")
    if lengths is not None:
        lengths = _pairs(_static_ints(lengths, "jnp.pad: stat_length"), ndim, "stat_length")
        if (lengths <= 0).any():
            raise ValueError("jnp.pad: stat_length of 0 yields no value for padding")
    for axis, (lo, hi) in enumerate(widths):
        lo, hi = int(lo), int(hi)
        if lo == hi == 0:
            continue
        n = aval(array).shape[axis]
        if n == 0:
            raise ValueError(f"jnp.pad: cannot apply {mode!r} padding to the empty axis {axis} of shape "
                             f"{aval(array).shape}")
        if mode == "linear_ramp":
            array = _linear_ramp(array, axis, lo, hi, end_values[axis])
        elif mode in _STATISTICS:
            array = _statistic(array, axis, lo, hi, _STATISTICS[mode], None if lengths is None else lengths[axis])
        elif reflect_type == "odd" and mode in ("reflect", "symmetric"):
            array = _odd_mirror(array, axis, lo, hi, mode)
        else:
            array = take_static(array, _PAD_SOURCE_INDEX[mode](np.arange(-lo, n + hi), n), axis)
    return array


__all__ = ["pad"]
