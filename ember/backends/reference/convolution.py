"""Reference rules for convolutions and windowed reductions: dilate and pad the input,
view its sliding windows (``sliding_window_view``, no copies), then contract or reduce them.
Accumulation types follow ``dot_general``'s."""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ember import dtypes
from ember.backends.reference import impl_rules
from ember.backends.reference.dot import accumulation_dtype
from ember.lax import convolution as conv


def _dilate_and_pad(x: np.ndarray, axes: tuple, padding: tuple, dilation: tuple, fill: Any) -> np.ndarray:
    """``x`` with ``dilation - 1`` fill values between elements and (possibly negative) ``padding``
    along ``axes``."""
    shape = list(x.shape)
    for a, d in zip(axes, dilation):
        shape[a] = conv.dilate_dim(x.shape[a], d)
    out = np.full(shape, fill, x.dtype)
    out[tuple(slice(None, None, dilation[axes.index(a)]) if a in axes else slice(None) for a in range(x.ndim))] = x
    widths = [(0, 0)] * x.ndim
    for a, (lo, hi) in zip(axes, padding):
        widths[a] = (max(lo, 0), max(hi, 0))
    out = np.pad(out, widths, constant_values=fill)
    crop = [slice(None)] * x.ndim
    for a, (lo, hi) in zip(axes, padding):
        crop[a] = slice(max(-lo, 0), out.shape[a] - max(-hi, 0))
    return out[tuple(crop)]


def _windows(x: np.ndarray, axes: tuple, window: tuple, strides: tuple, window_dilation: tuple) -> np.ndarray:
    """Sliding windows over ``axes``: the result has ``x``'s dimensions (``axes`` now counting
    window positions), then one per window dimension."""
    span = [conv.dilate_dim(w, d) for w, d in zip(window, window_dilation)]
    if any(x.shape[a] < s for a, s in zip(axes, span)):  # no window fits along some axis: no positions there
        shape = list(x.shape)
        for a, s, st in zip(axes, span, strides):
            shape[a] = 0 if x.shape[a] < s else (x.shape[a] - s) // st + 1
        return np.zeros(shape + list(window), x.dtype)
    views = sliding_window_view(x, span, axis=axes)
    positions = tuple(slice(None, None, strides[axes.index(a)]) if a in axes else slice(None) for a in range(x.ndim))
    return views[positions + tuple(slice(None, None, d) for d in window_dilation)]


def _conv_general_dilated(lhs: np.ndarray, rhs: np.ndarray, *, window_strides, padding, lhs_dilation, rhs_dilation,
                          dimension_numbers, feature_group_count, batch_group_count, precision,
                          preferred_element_type) -> np.ndarray:
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    result_dtype = preferred_element_type or lhs.dtype
    acc = accumulation_dtype(result_dtype)
    lhs = np.transpose(lhs, lhs_spec).astype(acc)  # N, C, spatial...
    rhs = np.transpose(rhs, rhs_spec).astype(acc)  # O, I, spatial...
    spatial = tuple(range(2, lhs.ndim))
    lhs = _dilate_and_pad(lhs, spatial, padding, lhs_dilation, 0)
    windows = _windows(lhs, spatial, rhs.shape[2:], window_strides, rhs_dilation)  # N, C, positions..., window...
    n, c, out_features, k = lhs.shape[0], lhs.shape[1], rhs.shape[0], len(spatial)
    positions = windows.shape[2:2 + k]
    letters = "abcdefghijklmnopqrstuvwxyz"
    pos, win = letters[:k], letters[k:2 * k]
    # Groups: features split group-major (feature groups), or batch and output features (batch groups).
    fg, bg = feature_group_count, batch_group_count
    windows = windows.reshape((bg, n // bg, fg, c // fg) + windows.shape[2:])
    rhs = rhs.reshape((bg * fg, out_features // (bg * fg)) + rhs.shape[1:])
    if bg > 1:
        out = np.einsum(f"GNC{pos}{win},GOC{win}->NGO{pos}", windows[:, :, 0], rhs)
    else:
        out = np.einsum(f"BNGC{pos}{win},GOC{win}->NGO{pos}", windows, rhs)
    out = out.reshape((n // bg, out_features) + positions)
    out = np.transpose(out, np.argsort(out_spec))
    return out != 0 if result_dtype == dtypes.bool_ else out.astype(result_dtype)


def _reduce_window(p: Any, reduce: Any) -> Any:
    def rule(x: np.ndarray, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation) -> np.ndarray:
        axes = tuple(range(x.ndim))
        padded = _dilate_and_pad(x, axes, padding, base_dilation, conv.window_identity(p, x.dtype))
        windows = _windows(padded, axes, window_dimensions, window_strides, window_dilation)
        if p is conv.reduce_window_sum_p and x.dtype in (dtypes.float16, dtypes.bfloat16, *dtypes.FLOAT8):
            # half-precision sums accumulate in float32 and round once, as reduce_sum's do
            return np.sum(windows.astype(np.float32), axis=tuple(range(x.ndim, 2 * x.ndim))).astype(x.dtype)
        return reduce(windows, axis=tuple(range(x.ndim, 2 * x.ndim)), initial=conv.window_identity(p, x.dtype))
    return rule


def _sliding_windows(x: np.ndarray, *, window_dimensions, window_strides, window_dilation) -> np.ndarray:
    return np.ascontiguousarray(_windows(x, tuple(range(x.ndim)), window_dimensions, window_strides,
                                         window_dilation))


impl_rules.update({
    conv.sliding_windows_p: _sliding_windows,
    conv.conv_general_dilated_p: _conv_general_dilated,
    conv.reduce_window_sum_p: _reduce_window(conv.reduce_window_sum_p, np.sum),
    conv.reduce_window_max_p: _reduce_window(conv.reduce_window_max_p, np.max),
    conv.reduce_window_min_p: _reduce_window(conv.reduce_window_min_p, np.min),
})
