"""Dtype conversions. Python scalars convert without an equation (constant folding)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.core.avals import ShapedArray
from ember.core.trace import Tracer
from ember.lax.elementwise import bitcast_convert_type_p, convert_element_type_p
from ember.lax.base import aval


def convert_values(x: np.ndarray, new_dtype: np.dtype) -> np.ndarray:
    """NumPy conversion with XLA's semantics: float -> int saturates and maps NaN to 0."""
    x = np.asarray(x)
    if x.dtype == new_dtype:
        return x
    if dtypes.is_floating(x.dtype) and dtypes.is_integer(new_dtype):
        info = np.iinfo(new_dtype)
        wide = np.nan_to_num(x.astype(np.float64), nan=0.0)
        clipped = np.clip(wide, float(info.min), float(info.max))
        # float64 cannot hold int64's max exactly; clip in the integer domain afterwards.
        out = np.where(clipped >= float(info.max), info.max, clipped.astype(new_dtype, casting="unsafe"))
        return np.asarray(out, dtype=new_dtype)
    if new_dtype == dtypes.bool_:
        return x != 0
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(new_dtype)


def convert_element_type(x: Any, new_dtype: Any, weak_type: bool = False) -> Any:
    """Convert ``x`` to ``new_dtype`` (canonicalized). A no-op if the type already matches."""
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    a = aval(x)
    if a.dtype == new_dtype and a.weak_type == weak_type:
        return x
    if isinstance(x, Tracer):
        return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))
    # A concrete value: fold now (also while tracing, so the IR sees a constant, not an equation).
    from ember.runtime.array import Array

    value = getattr(x, "_value", None)
    if value is None:
        value = np.asarray(x, dtype=a.dtype if type(x) in (int, float, bool) else None)
    value = np.array(convert_values(value, new_dtype), dtype=new_dtype)
    return Array(value, ShapedArray(value.shape, new_dtype, bool(weak_type)))


def bitcast_convert_type(x: Any, new_dtype: Any) -> Any:
    """Reinterpret the bits of ``x`` as ``new_dtype`` (shape changes when widths differ)."""
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype)
