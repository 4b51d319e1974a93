"""Signal processing with SciPy's conventions (``jax.scipy.signal``): convolution and
correlation (direct, on ``lax.conv_general_dilated``, or by FFT) and detrending.

Modes are SciPy's: ``"full"`` (every overlap), ``"same"`` (the size of ``in1``, centred on the
full result) and ``"valid"`` (where one input covers the other entirely; one must then be at
least as large as the other along every axis). Both inputs must have the same number of
dimensions; integer and boolean inputs are promoted to the default float (JAX's rule; SciPy
keeps integers). The direct method convolves with the smaller input as the kernel and
crops the full result through the padding, so no step computes more than is returned.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.lax.base import aval
from ember.numpy import fft as jnp_fft
from ember.numpy.arraylike import check_arraylike
from ember.numpy.core import ensure_array, promote_dtypes_inexact

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "detrend", "fftconvolve"]

_MODES = ("full", "same", "valid")


def _check_mode(mode: Any) -> None:
    if mode not in _MODES:
        raise ValueError("mode must be one of ['full', 'same', 'valid']")


def _output_window(shape1: Sequence[int], shape2: Sequence[int], mode: str,
                   round_up: bool = False) -> tuple[list[int], list[int]]:
    """Where ``mode``'s result lies in the full convolution: its start and size on each axis.
    ``"same"`` centres it, rounding its start down (or up, with ``round_up``)."""
    full = [a + b - 1 for a, b in zip(shape1, shape2)]
    if mode == "full":
        return [0] * len(full), full
    if mode == "same":
        return [(f - a + round_up) // 2 for f, a in zip(full, shape1)], list(shape1)
    if not (all(a >= b for a, b in zip(shape1, shape2)) or all(a <= b for a, b in zip(shape1, shape2))):
        raise ValueError("For 'valid' mode, one input must be at least as large as the other in every dimension.")
    return [min(a, b) - 1 for a, b in zip(shape1, shape2)], [abs(a - b) + 1 for a, b in zip(shape1, shape2)]


def _inputs(name: str, in1: Any, in2: Any) -> tuple[Any, Any]:
    check_arraylike(name, in1, in2)
    in1, in2 = promote_dtypes_inexact(ensure_array(in1), ensure_array(in2))
    if aval(in1).ndim != aval(in2).ndim:
        raise ValueError("in1 and in2 should have the same dimensionality")
    return in1, in2


def _direct(in1: Any, in2: Any, mode: str, precision: Any, round_up: bool = False) -> Any:
    """The convolution of ``in1`` and ``in2`` (same rank, any shapes), cropped to ``mode``."""
    _check_mode(mode)
    shape1, shape2 = aval(in1).shape, aval(in2).shape
    if math.prod(shape1) == 0 or math.prod(shape2) == 0:
        raise ValueError(f"zero-size arrays not supported in convolutions, got shapes {shape1} and {shape2}.")
    starts, sizes = _output_window(shape1, shape2, mode, round_up)
    # Convolution commutes: the smaller input is the kernel (the work is output size x kernel size).
    signal, kernel = (in2, in1) if math.prod(shape2) > math.prod(shape1) else (in1, in2)
    s_shape, k_shape = aval(signal).shape, aval(kernel).shape
    # conv_general_dilated correlates: with the kernel reversed, output j of padding ``lo`` is
    # entry j + k - 1 - lo of the full convolution; ``lo`` and ``hi`` (negative: a crop) select the window.
    padding = []
    for start, size, s, k in zip(starts, sizes, s_shape, k_shape):
        lo = k - 1 - start
        padding.append((lo, size + k - 1 - s - lo))
    ndim = len(s_shape)
    reversed_kernel = lax.rev(kernel, tuple(range(ndim)))
    out = lax.conv_general_dilated(lax.expand_dims(signal, (0, 1)), lax.expand_dims(reversed_kernel, (0, 1)),
                                   (1,) * ndim, padding, precision=precision)
    return lax.reshape(out, tuple(sizes))


def _reverse_conj(x: Any) -> Any:
    return lax.rev(jnp.conj(x), tuple(range(aval(x).ndim)))


def fftconvolve(in1: Any, in2: Any, mode: str = "full", axes: Sequence[int] | None = None) -> Any:
    """The convolution of ``in1`` and ``in2`` by FFT over ``axes`` (all by default); along the
    other axes the inputs must have equal sizes and are multiplied elementwise."""
    in1, in2 = _inputs("fftconvolve", in1, in2)
    _check_mode(mode)
    ndim = aval(in1).ndim
    shape1, shape2 = aval(in1).shape, aval(in2).shape
    if axes is None:
        axes = tuple(range(ndim))
    else:
        axes = tuple(axes) if isinstance(axes, (list, tuple)) else (axes,)
        axes = tuple(_axis(ax, ndim) for ax in axes)
    others = [ax for ax in range(ndim) if ax not in axes]
    if any(shape1[ax] != shape2[ax] for ax in others):
        raise ValueError(f"mapped axes must have same shape; got in1.shape={shape1} in2.shape={shape2} axes={axes}")
    starts, sizes = _output_window([shape1[ax] for ax in axes], [shape2[ax] for ax in axes], mode)
    if all(shape1[ax] == 1 or shape2[ax] == 1 for ax in axes):  # no sums: a broadcast product
        conv = jnp.multiply(in1, in2)
    else:
        full = tuple(shape1[ax] + shape2[ax] - 1 for ax in axes)
        if jnp.iscomplexobj(in1):
            conv = jnp_fft.ifftn(jnp_fft.fftn(in1, full, axes) * jnp_fft.fftn(in2, full, axes), full, axes)
        else:
            conv = jnp_fft.irfftn(jnp_fft.rfftn(in1, full, axes) * jnp_fft.rfftn(in2, full, axes), full, axes)
    begin, end = [0] * ndim, list(aval(conv).shape)
    for ax, start, size in zip(axes, starts, sizes):
        begin[ax], end[ax] = start, start + size
    return lax.slice(conv, begin, end)


def _axis(axis: Any, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def convolve(in1: Any, in2: Any, mode: str = "full", method: str = "auto", precision: Any = None) -> Any:
    """The N-dimensional convolution of ``in1`` and ``in2``. ``method``: ``"direct"`` or
    ``"auto"`` (a direct convolution), or ``"fft"`` (``fftconvolve``)."""
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method not in ("auto", "direct"):
        raise ValueError(f"Got {method=}; expected 'auto', 'fft', or 'direct'.")
    return _direct(*_inputs("convolve", in1, in2), mode, precision)


def correlate(in1: Any, in2: Any, mode: str = "full", method: str = "auto", precision: Any = None) -> Any:
    """The N-dimensional cross-correlation: the convolution of ``in1`` with ``in2`` reversed and
    conjugated."""
    in1, in2 = _inputs("correlate", in1, in2)
    return convolve(in1, _reverse_conj(in2), mode=mode, method=method, precision=precision)


def _check_2d(name: str, in1: Any, in2: Any, boundary: str, fillvalue: Any) -> tuple[Any, Any]:
    if boundary != "fill" or not (isinstance(fillvalue, (int, float)) and fillvalue == 0):
        raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0")
    in1, in2 = _inputs(name, in1, in2)
    if aval(in1).ndim != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs.")
    return in1, in2


def convolve2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill", fillvalue: float = 0,
               precision: Any = None) -> Any:
    """The convolution of two 2-D arrays (zero fill beyond the edges: JAX's only boundary)."""
    return _direct(*_check_2d("convolve2d", in1, in2, boundary, fillvalue), mode, precision)


def correlate2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill", fillvalue: float = 0,
                precision: Any = None) -> Any:
    """The cross-correlation of two 2-D arrays (zero fill beyond the edges: JAX's only boundary).
    SciPy's own conventions, which ``correlate`` does not share: ``"same"`` rounds the centre of
    the window up, and a ``"valid"`` result of an ``in1`` smaller than ``in2`` is conjugated."""
    in1, in2 = _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    shape1, shape2 = aval(in1).shape, aval(in2).shape
    out = _direct(in1, _reverse_conj(in2), mode, precision, round_up=True)
    if mode == "valid" and shape1 != shape2 and all(a <= b for a, b in zip(shape1, shape2)):
        out = jnp.conj(out)
    return out


def detrend(data: Any, axis: int = -1, type: str = "linear", bp: int | Sequence[int] | np.ndarray = 0,
            overwrite_data: None = None) -> Any:
    """``data`` less its mean (``type="constant"``) or less its least-squares line along ``axis``
    (``"linear"``), fitted separately between the breakpoints ``bp`` (static indices)."""
    if overwrite_data is not None:
        raise NotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    check_arraylike("detrend", data)
    (data,) = promote_dtypes_inexact(ensure_array(data))
    if type == "constant":
        return data - jnp.mean(data, axis, keepdims=True)
    axis = _axis(axis, aval(data).ndim)
    n = aval(data).shape[axis]
    edges = np.unique(np.concatenate([[0], np.ravel(np.asarray(bp, dtype=np.int64)), [n]]))
    if edges[0] < 0 or edges[-1] > n:
        raise ValueError("Breakpoints must be non-negative and less than length of data along given axis.")
    pieces = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        segment = lax.slice_in_dim(data, int(lo), int(hi), 1, axis)
        # The line through the segment's centre: slope = cov(t, y) / var(t), with t centred on the host.
        positions = np.arange(hi - lo, dtype=np.float64)
        positions -= positions.mean()
        spread = float(np.sum(np.square(positions)))
        shape = [1] * aval(data).ndim
        shape[axis] = hi - lo
        t = positions.reshape(shape).astype(aval(data).dtype)
        centred = segment - jnp.mean(segment, axis, keepdims=True)
        if spread > 0:  # (one sample: no slope, and the mean leaves nothing)
            slope = jnp.sum(centred * t, axis, keepdims=True) / np.asarray(spread, t.dtype)
            centred = centred - slope * t
        pieces.append(centred)
    return pieces[0] if len(pieces) == 1 else lax.concatenate(pieces, axis)
