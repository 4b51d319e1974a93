"""Reference implementations of the host callbacks: call the Python function, now.

Callbacks receive ``ember.Array`` copies of the operands (a callback may keep them,
and the buffers of a running program are reused). ``pure_callback``'s results are
checked against the declared types: the shape exactly, the dtype after ember's
canonicalization (a float64 result for a declared float32 is converted, as in JAX
with x64 off).
"""
from __future__ import annotations

import numpy as np

from ember import dtypes, tree_util
from ember.core.array import Array
from ember.core.avals import ShapedArray
from ember.core.evaluation import impl_rules
from ember.lax.callbacks import FlatCallback, debug_callback_p, io_callback_p, pure_callback_p


def _as_arrays(values: tuple) -> list[Array]:
    return [Array(np.array(v)) for v in values]


def _debug_callback(*values: np.ndarray, callback: FlatCallback) -> list:
    callback(*_as_arrays(values))
    return []


def _pure_callback(*values: np.ndarray, callback: FlatCallback, result_avals: tuple[ShapedArray, ...],
                   vmap_method: str | None, api: str = "pure_callback") -> list[np.ndarray]:
    results = tree_util.tree_leaves(callback(*_as_arrays(values)))
    if len(results) != len(result_avals):
        raise RuntimeError(f"{api}: the callback `{callback.__name__}` returned {len(results)} arrays, but "
                           f"result_shape_dtypes declares {len(result_avals)}.")
    checked = []
    for i, (result, expected) in enumerate(zip(results, result_avals)):
        value = np.asarray(result)
        if value.shape != expected.shape:
            raise RuntimeError(f"{api}: incorrect output shape for return value #{i} of the callback "
                               f"`{callback.__name__}`: expected {expected.shape}, got {value.shape}. It must "
                               "return arrays of the shapes and dtypes declared in result_shape_dtypes.")
        if dtypes.canonicalize_dtype(value.dtype) != expected.dtype:
            raise RuntimeError(f"{api}: incorrect output dtype for return value #{i} of the callback "
                               f"`{callback.__name__}`: expected {expected.dtype.name}, got {value.dtype.name}. It "
                               "must return arrays of the shapes and dtypes declared in result_shape_dtypes.")
        checked.append(value.astype(expected.dtype, copy=False))
    return checked


def _io_callback(*values: np.ndarray, callback: FlatCallback, result_avals: tuple[ShapedArray, ...],
                 ordered: bool) -> list[np.ndarray]:
    return _pure_callback(*values, callback=callback, result_avals=result_avals, vmap_method=None, api="io_callback")


impl_rules.update({debug_callback_p: _debug_callback, pure_callback_p: _pure_callback, io_callback_p: _io_callback})
