"""Quantiles that ignore NaNs: ``nanquantile``, ``nanpercentile`` and ``nanmedian``.

Each slice is sorted (NaNs sort last) and interpolated over its first ``count`` values, where
``count`` (its number of non-NaN values) is a traced per-slice value; all-NaN slices give NaN.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.numpy.core import ensure_array, promote_dtypes_inexact
from ember.numpy.index_functions import take_along_axis
from ember.numpy.reductions import _QUANTILE_METHODS, _no_out, reduction_axes, sum as _sum
from ember.numpy.ufuncs import isnan, logical_not, true_divide, where

__all__ = ["nanmedian", "nanpercentile", "nanquantile"]


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False) -> Any:
    """``quantile`` of the non-NaN values of each slice (NaN for all-NaN slices). The result's
    leading dimension runs over ``q`` when ``q`` is 1-D."""
    _no_out(out, "nanquantile")
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"method can only be one of {list(_QUANTILE_METHODS)}, got {method!r}")
    (a,) = promote_dtypes_inexact(ensure_array(a))
    q = lax.convert_element_type(ensure_array(q), a.dtype)  # the result has a's type, as in JAX
    if q.ndim > 1:
        raise ValueError(f"q must have rank <= 1, got shape {q.shape}")
    axes = reduction_axes(axis, a.ndim)
    kept = tuple(d for d in range(a.ndim) if d not in axes)
    kept_shape = tuple(a.shape[d] for d in kept)
    n = int(np.prod([a.shape[d] for d in axes], dtype=np.int64))
    if n == 0:
        raise ValueError("cannot take a quantile over an empty axis: it has no elements")
    values = lax.sort(lax.reshape(lax.transpose(a, kept + axes), kept_shape + (n,)), dimension=-1)
    counts = _sum(logical_not(isnan(values)), -1, dtype=a.dtype, keepdims=True)
    out_shape = tuple(1 if d in axes else a.shape[d] for d in range(a.ndim)) if keepdims else kept_shape
    quantiles = [_counted_quantile(values, counts, q_i, method) for q_i in
                 ([q] if q.ndim == 0 else [lax.index_in_dim(q, i, keepdims=False) for i in range(q.shape[0])])]
    quantiles = [lax.reshape(r, out_shape) for r in quantiles]
    if q.ndim == 0:
        return quantiles[0]
    if not quantiles:
        return lax.broadcast_in_dim(lax.convert_element_type(np.nan, a.dtype), (0,) + out_shape, ())
    return lax.concatenate([lax.expand_dims(r, (0,)) for r in quantiles], 0)


def _counted_quantile(values: Any, counts: Any, q: Any, method: str) -> Any:
    """One quantile (scalar ``q``) of the first ``counts`` values of each sorted row of ``values``;
    rows with ``counts == 0`` give NaN. ``counts`` has a trailing dimension of 1."""
    dtype = values.dtype
    last = lax.max(lax.sub(counts, lax.convert_element_type(1, dtype)), lax.convert_element_type(0, dtype))
    position = lax.mul(q, last)
    low_position, high_position = lax.floor(position), lax.min(lax.ceil(position), last)
    high_weight = lax.sub(position, low_position)
    low, high = (take_along_axis(values, lax.convert_element_type(p, dtypes.int32), -1)
                 for p in (low_position, high_position))
    if method == "lower":
        result = low
    elif method == "higher":
        result = high
    elif method == "nearest":  # ties go to the lower value, as in JAX's quantile
        result = where(lax.le(high_weight, lax.convert_element_type(0.5, dtype)), low, high)
    elif method == "midpoint":
        result = lax.mul(lax.add(low, high), lax.convert_element_type(0.5, dtype))
    else:
        low_weight = lax.sub(lax.convert_element_type(1, dtype), high_weight)
        result = lax.add(lax.mul(low, low_weight), lax.mul(high, high_weight))
    return where(lax.eq(counts, lax.convert_element_type(0, dtype)), np.nan, result)


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False) -> Any:
    """``nanquantile`` with ``q`` in percent (``0 <= q <= 100``)."""
    return nanquantile(a, true_divide(q, 100), axis, out, overwrite_input, method, keepdims)


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Any:
    """The middle non-NaN value over ``axis`` (the mean of the two middle ones for even counts)."""
    return nanquantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)
