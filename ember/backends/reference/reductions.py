"""Reference rules for reductions, scans, sorting and top-k.

Half-precision floats are accumulated in float32 and rounded once at the end, so
a long float16 sum does not stall when the running total outgrows the spacing
of float16. Empty max/min reductions give the identity (-inf, the lowest
integer, False), as XLA does, where NumPy would raise.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.backends.reference import impl_rules
from ember.backends.reference.elementwise import _float_math as in_float32, complex_greater
from ember.lax import reductions as red


def _lowest(dt: np.dtype) -> Any:
    if dt == np.bool_:
        return False
    return -np.inf if dtypes.is_inexact(dt) else np.iinfo(dt).min  # complex: -inf + 0j, XLA's identity


def _highest(dt: np.dtype) -> Any:
    if dt == np.bool_:
        return True
    return np.inf if dtypes.is_inexact(dt) else np.iinfo(dt).max


def _reduce_max(x: np.ndarray, *, axes: tuple) -> np.ndarray:
    if dtypes.is_complex(x.dtype) and np.isnan(x).any():
        return _complex_fold(x, axes, _lowest(x.dtype), keep=complex_greater)
    return np.max(x, axis=axes, initial=_lowest(x.dtype))  # np.maximum propagates NaN


def _reduce_min(x: np.ndarray, *, axes: tuple) -> np.ndarray:
    if dtypes.is_complex(x.dtype) and np.isnan(x).any():
        return _complex_fold(x, axes, _highest(x.dtype), keep=lambda acc, v: complex_greater(v, acc))
    return np.min(x, axis=axes, initial=_highest(x.dtype))


def _complex_fold(x: np.ndarray, axes: tuple, initial: Any, keep: Callable) -> np.ndarray:
    """A complex max/min with NaNs, as XLA's in-order reduction folds it: the running value is
    kept where ``keep(acc, v)`` (the lexicographic comparison, false at a NaN part), else it
    becomes ``v``. So a NaN is not propagated: whatever comes after it replaces it. (Without
    NaNs this is NumPy's lexicographic max/min.)"""
    rest = [d for d in range(x.ndim) if d not in axes]
    flat = np.transpose(x, rest + list(axes)).reshape(tuple(x.shape[d] for d in rest) + (-1,))
    acc = np.full(flat.shape[:-1], initial, x.dtype)
    for i in range(flat.shape[-1]):
        acc = np.where(keep(acc, flat[..., i]), acc, flat[..., i])
    return acc


def _complex_cumulative(np_fn: Callable, initial: Callable, keep: Callable) -> Callable:
    """cummax/cummin. With NaNs in complex values, each output is XLA's in-order fold (as
    ``_complex_fold``) of its window: ``x[:i + 1]``, or ``x[i:]`` reversed, still folded first to last."""
    def impl(x: np.ndarray, *, axis: int, reverse: bool) -> np.ndarray:
        if not (dtypes.is_complex(x.dtype) and np.isnan(x).any()):
            return _scan(np_fn)(x, axis=axis, reverse=reverse)
        last = np.moveaxis(x, axis, -1)
        n = last.shape[-1]
        acc = np.full(last.shape, initial(x.dtype), x.dtype)
        start = np.arange(n)
        for j in range(n):
            v = last[..., j:j + 1]
            takes = (start >= j) if not reverse else (start <= j)  # the outputs whose window holds x_j
            acc = np.where(takes & ~keep(acc, v), v, acc)
        return np.moveaxis(acc, -1, axis)
    return impl


def _bitwise_reduce(ufunc: np.ufunc) -> Callable:
    return lambda x, *, axes: ufunc.reduce(x, axis=axes)


def _arg_reduce(np_fn: Callable) -> Callable:
    """np.argmax / np.argmin already pick the first NaN, as the primitives promise."""
    def impl(x: np.ndarray, *, axis: int, index_dtype: np.dtype) -> np.ndarray:
        if x.dtype == dtypes.bfloat16:
            x = x.astype(np.float32)  # exact, and NumPy's arg-reductions know float32's NaNs
        return np_fn(x, axis=axis).astype(index_dtype)
    return impl


def _scan(accumulate: Callable) -> Callable:
    def impl(x: np.ndarray, *, axis: int, reverse: bool) -> np.ndarray:
        if reverse:
            return np.flip(accumulate(np.flip(x, axis), axis=axis), axis)
        return accumulate(x, axis=axis)
    return in_float32(impl)


def sort_key(x: np.ndarray) -> np.ndarray:
    """A key NumPy's sorts order as the primitives do: NaNs last, -0.0 == 0.0 (widened half floats)."""
    return x.astype(np.float32) if x.dtype in (dtypes.float16, dtypes.bfloat16) else x


def _keys(x: np.ndarray) -> list[np.ndarray]:
    """Complex values sort by (real, imaginary), each part with NaNs last (as XLA's comparator).
    NumPy's own complex order differs: it puts ``R + nanj`` after every ``R + Rj``."""
    if dtypes.is_complex(x.dtype):
        return [np.real(x), np.imag(x)]
    return [sort_key(x)]


def _sort(*operands: np.ndarray, dimension: int, is_stable: bool, num_keys: int) -> list[np.ndarray]:
    # A stable sort is also a valid unstable one. np.lexsort's primary key is its last.
    keys = [np.moveaxis(part, dimension, -1) for k in operands[:num_keys] for part in _keys(k)]
    order = np.lexsort(keys[::-1], axis=-1)
    return [np.moveaxis(np.take_along_axis(np.moveaxis(x, dimension, -1), order, -1), -1, dimension)
            for x in operands]


def _top_k(x: np.ndarray, *, k: int, axis: int) -> list[np.ndarray]:
    # Descending with ties by ascending index: a stable ascending sort of the reversed
    # array, read backwards. NaNs sort last ascending, so they come out first.
    last = np.moveaxis(x, axis, -1)
    n = last.shape[-1]
    ascending_of_reversed = np.argsort(sort_key(last[..., ::-1]), axis=-1, kind="stable")
    order = (n - 1 - ascending_of_reversed[..., ::-1])[..., :k]
    values = np.take_along_axis(last, order, -1)
    return [np.moveaxis(values, -1, axis), np.moveaxis(order, -1, axis).astype(np.int32)]


impl_rules.update({
    red.reduce_sum_p: in_float32(lambda x, *, axes: np.sum(x, axis=axes, dtype=x.dtype)),
    red.reduce_prod_p: in_float32(lambda x, *, axes: np.prod(x, axis=axes, dtype=x.dtype)),
    red.reduce_max_p: in_float32(_reduce_max),
    red.reduce_min_p: in_float32(_reduce_min),
    red.reduce_and_p: _bitwise_reduce(np.bitwise_and),
    red.reduce_or_p: _bitwise_reduce(np.bitwise_or),
    red.reduce_xor_p: _bitwise_reduce(np.bitwise_xor),
    red.argmax_p: _arg_reduce(np.argmax),
    red.argmin_p: _arg_reduce(np.argmin),
    red.cumsum_p: _scan(lambda x, axis: np.cumsum(x, axis=axis, dtype=x.dtype)),
    red.cumprod_p: _scan(lambda x, axis: np.cumprod(x, axis=axis, dtype=x.dtype)),
    red.cummax_p: _complex_cumulative(np.maximum.accumulate, _lowest, complex_greater),
    red.cummin_p: _complex_cumulative(np.minimum.accumulate, _highest, lambda acc, v: complex_greater(v, acc)),
    red.cumlogsumexp_p: _scan(np.logaddexp.accumulate),
    red.sort_p: _sort,
    red.top_k_p: _top_k,
})
