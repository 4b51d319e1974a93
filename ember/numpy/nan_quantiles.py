"""Quantiles that ignore NaNs: ``nanquantile``, ``nanpercentile`` and ``nanmedian``.

Each slice is sorted (NaNs sort last) and interpolated over its first ``count`` values, where
``count`` (its number of non-NaN values) is a traced per-slice value; all-NaN slices give NaN.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.numpy.index_functions import take_along_axis
from ember.numpy.reductions import interpolate, quantiles_over_rows, sum as _sum
from ember.numpy.ufuncs import isnan, logical_not, true_divide, where

__all__ = ["nanmedian", "nanpercentile", "nanquantile"]


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False) -> Any:
    """``quantile`` of the non-NaN values of each slice (NaN for all-NaN slices). The result's
    leading dimension runs over ``q`` when ``q`` is 1-D."""
    def sort_and_count(rows: Any) -> tuple[Any, Any]:
        return lax.sort(rows, dimension=-1), _sum(logical_not(isnan(rows)), -1, dtype=rows.dtype, keepdims=True)

    return quantiles_over_rows("nanquantile", a, q, axis, out, method, keepdims, sort_and_count,
                               lambda prepared, q_i: _counted_quantile(*prepared, q_i, method))


def _counted_quantile(values: Any, counts: Any, q: Any, method: str) -> Any:
    """One quantile (scalar ``q``) of the first ``counts`` values of each sorted row of ``values``;
    rows with ``counts == 0`` give NaN. ``counts`` has a trailing dimension of 1."""
    dtype = values.dtype
    last = lax.max(lax.sub(counts, lax.convert_element_type(1, dtype)), lax.convert_element_type(0, dtype))
    position = lax.mul(q, last)
    low_position, high_position = lax.floor(position), lax.min(lax.ceil(position), last)
    low, high = (take_along_axis(values, lax.convert_element_type(p, dtypes.int32), -1)
                 for p in (low_position, high_position))
    result = interpolate(low, high, lax.sub(position, low_position), method)
    return where(lax.eq(counts, lax.convert_element_type(0, dtype)), np.nan, result)


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False) -> Any:
    """``nanquantile`` with ``q`` in percent (``0 <= q <= 100``)."""
    return nanquantile(a, true_divide(q, 100), axis, out, overwrite_input, method, keepdims)


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Any:
    """The middle non-NaN value over ``axis`` (the mean of the two middle ones for even counts)."""
    return nanquantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)
