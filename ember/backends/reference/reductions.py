"""Reference rules for reductions, scans, sorting and top-k.

Half-precision floats are accumulated in float32 and rounded once at the end, so
a long float16 sum does not stall when the running total outgrows the spacing
of float16. Empty max/min reductions give the identity (-inf, the lowest
integer, False), as XLA does, where NumPy would raise.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.backends.reference import impl_rules
from ember.backends.reference.elementwise import _float_math as in_float32, complex_greater
from ember.core.avals import ShapedArray
from ember.lax import reductions as red


def _plain_extremum(ufunc: np.ufunc, bound: Callable) -> Callable:
    """The max / min's NumPy call for eager calls of real values (``in_float32``'s ``plain``): the
    ufunc's reduce with the identity as ``initial``, passed by position (half ``np.max``'s cost)."""
    def plain(avals: Any, params: dict) -> Callable | None:
        dt = avals[0].dtype
        if dtypes.is_complex(dt):
            return None
        reduce, axes, initial = ufunc.reduce, params["axes"], bound(dt)
        axis = axes[0] if len(axes) == 1 else axes
        return lambda x: reduce(x, axis, None, None, False, initial)  # type: ignore[call-arg]  # (NumPy takes them by position)
    return plain


def _reduce_max(x: np.ndarray, *, axes: tuple) -> np.ndarray:
    if dtypes.is_complex(x.dtype):
        return complex_reduce(x, axes, dtypes.lowest(x.dtype), keep=complex_greater)
    return np.max(x, axis=axes, initial=dtypes.lowest(x.dtype))  # np.maximum propagates NaN


def _reduce_min(x: np.ndarray, *, axes: tuple) -> np.ndarray:
    if dtypes.is_complex(x.dtype):
        return complex_reduce(x, axes, dtypes.highest(x.dtype), keep=lambda acc, v: complex_greater(v, acc))
    return np.min(x, axis=axes, initial=dtypes.highest(x.dtype))


# XLA's CPU pipeline, whose evaluation order decides complex max / min wherever a NaN or a tie
# (equal parts, +-0) is met: a reduction whose reduced dimensions all have at most TREE_WINDOW
# elements folds in order; a longer one is rewritten (to a fixed point) into a reduce-window of
# windows of TREE_WINDOW (SAME padding: the padding split evenly, the extra one high) and a
# reduction of the windows' results (XLA's TreeReductionRewriter). A running max / min longer
# than SCAN_BASE is tiled into rows of SCAN_BASE (XLA's ReduceWindowRewriter).
TREE_WINDOW = 32
SCAN_BASE = 16


def complex_reduce(x: np.ndarray, axes: tuple, initial: Any, keep: Callable) -> np.ndarray:
    """A complex max / min as XLA on CPU computes it (checked against jax 0.10): the running value
    starts at ``initial`` and is kept where ``keep(acc, v)`` (the lexicographic comparison, false at a
    NaN part), else it becomes ``v``: so a NaN is not propagated, and ``initial`` (-inf + 0j) can win a
    tie of real parts (max(-inf - 1j, -inf - 2j) is -inf + 0j). A reduction of one element is the
    element (XLA simplifies it away); longer ones are folded in the order of ``TREE_WINDOW``'s note."""
    axes = tuple(sorted(a % x.ndim for a in axes)) if x.ndim else ()
    rest = [d for d in range(x.ndim) if d not in axes]
    y = np.transpose(x, rest + list(axes))
    count = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    if count == 1:
        return y.reshape(y.shape[:len(rest)]).copy()
    return _tree_fold(y, len(axes), initial, keep)


def _tree_fold(y: np.ndarray, k: int, initial: Any, keep: Callable) -> np.ndarray:
    """Fold the last ``k`` axes of ``y``, rewritten as XLA's tree reduction where one is long."""
    kept, sizes = y.shape[:y.ndim - k], y.shape[y.ndim - k:]
    if all(n <= TREE_WINDOW for n in sizes):
        return _fold(y.reshape(kept + (-1,)), np.ones(int(np.prod(sizes, dtype=np.int64)), bool), initial, keep)
    windows, counts, masks = [], [], []
    for n in sizes:
        w = min(n, TREE_WINDOW)
        m = -(-n // w)
        low = (m * w - n) // 2
        windows.append(w)
        counts.append(m)
        masks.append((np.arange(m)[:, None] * w - low + np.arange(w)[None, :]))
    # gather every window (positions outside the operand masked out), then fold the window axes
    positions = [np.clip(p, 0, n - 1) for p, n in zip(masks, sizes)]
    inside = [(p >= 0) & (p < n) for p, n in zip(masks, sizes)]
    grid = np.ix_(*[p.ravel() for p in positions])
    tiles = y[(Ellipsis,) + grid].reshape(kept + sum(((m, w) for m, w in zip(counts, windows)), ()))
    order = list(range(len(kept))) + [len(kept) + 2 * i for i in range(k)] + [len(kept) + 2 * i + 1 for i in range(k)]
    tiles = np.transpose(tiles, order)
    ok = np.ones(tuple(counts) + tuple(windows), bool)  # (windows..., positions...) inside the operand
    for i, flags in enumerate(inside):
        shape = [1] * (2 * k)
        shape[i], shape[k + i] = flags.shape
        ok = ok & flags.reshape(shape)
    per_window = int(np.prod(windows))
    ok = ok.reshape(tuple(counts) + (per_window,))
    partial = _fold(tiles.reshape(kept + tuple(counts) + (per_window,)), ok, initial, keep)
    return _tree_fold(partial, k, initial, keep)


def _fold(x: np.ndarray, inside: np.ndarray, initial: Any, keep: Callable) -> np.ndarray:
    """Fold the last axis of ``x`` in order from ``initial``, skipping the positions where ``inside``
    (broadcast against ``x``) is false."""
    acc = np.full(x.shape[:-1], initial, x.dtype)
    for i in range(x.shape[-1]):
        v = x[..., i]
        acc = np.where(inside[..., i] & ~keep(acc, v), v, acc)
    return acc


def _complex_cumulative(np_fn: Callable, initial: Callable, keep: Callable) -> Callable:
    """cummax/cummin; complex ones as XLA on CPU computes them (``complex_scan``)."""
    def impl(x: np.ndarray, *, axis: int, reverse: bool) -> np.ndarray:
        if not dtypes.is_complex(x.dtype):
            return _scan(np_fn)(x, axis=axis, reverse=reverse)
        out = complex_scan(np.moveaxis(x, axis, -1), initial(x.dtype), keep, reverse)
        return np.moveaxis(out, -1, axis)
    return impl


def complex_scan(x: np.ndarray, initial: Any, keep: Callable, reverse: bool) -> np.ndarray:
    """A running complex max / min along the last axis as XLA on CPU computes it (checked against
    jax 0.10): output i folds (as ``complex_reduce``, from ``initial``, in increasing index order)
    ``x[:i + 1]``, or ``x[i:]`` when reversed; past ``SCAN_BASE`` elements the axis is padded with
    ``initial`` to rows of ``SCAN_BASE``, each row scanned so, and each output combined as
    max(its row's scan, the scan of the rows before it: their last (reversed: first) columns,
    exclusive), the scan of the rows computed the same way."""
    n = x.shape[-1]
    if n <= SCAN_BASE:
        out = np.empty_like(x)
        for i in range(n):
            window = np.arange(n) <= i if not reverse else np.arange(n) >= i
            out[..., i] = _fold(x, window, initial, keep)
        return out
    rows = -(-n // SCAN_BASE)
    pad = np.full(x.shape[:-1] + (rows * SCAN_BASE - n,), initial, x.dtype)
    tiles = np.concatenate([x, pad], -1).reshape(x.shape[:-1] + (rows, SCAN_BASE))
    within = complex_scan(tiles, initial, keep, reverse)
    totals = complex_scan(within[..., -1] if not reverse else within[..., 0], initial, keep, reverse)
    first = np.full(x.shape[:-1] + (1,), initial, x.dtype)
    parts = [first, totals[..., :-1]] if not reverse else [totals[..., 1:], first]
    before = np.concatenate(parts, -1)[..., None]
    out = np.where(keep(within, before), within, before)
    return out.reshape(x.shape[:-1] + (rows * SCAN_BASE,))[..., :n]


def _plain_sum(avals: Any, params: dict) -> Callable:
    """The sum's NumPy call for eager calls (``in_float32``'s ``plain``), its arguments bound and
    passed by position (a third faster than a partial's keywords); one axis as an int, the same
    loop as the tuple of it."""
    reduce, axes, dtype = np.add.reduce, params["axes"], avals[0].dtype
    axis = axes[0] if len(axes) == 1 else axes
    return lambda x: reduce(x, axis, dtype)


def _bitwise_reduce(ufunc: np.ufunc) -> Callable:
    """The ufunc's reduce; an eager call is the reduce with the axes bound by position (no float math)."""
    def impl(x: np.ndarray, *, axes: tuple) -> np.ndarray:
        return ufunc.reduce(x, axis=axes)

    def plain(avals: Any, params: dict) -> Callable:
        reduce, axes = ufunc.reduce, params["axes"]
        return lambda x: reduce(x, axes)
    impl.plain = plain  # type: ignore[attr-defined]
    return impl


def _arg_reduce(np_fn: Callable) -> Callable:
    """np.argmax / np.argmin already pick the first NaN, as the primitives promise."""
    def impl(x: np.ndarray, *, axis: int, index_dtype: np.dtype) -> np.ndarray:
        if x.dtype == dtypes.bfloat16 or x.dtype in dtypes.FLOAT8:
            x = x.astype(np.float32)  # exact, and NumPy's arg-reductions know float32's NaNs
        return np_fn(x, axis=axis).astype(index_dtype)
    return impl


def _scan(accumulate: Callable) -> Callable:
    def impl(x: np.ndarray, *, axis: int, reverse: bool) -> np.ndarray:
        if reverse:
            return np.flip(accumulate(np.flip(x, axis), axis=axis), axis)
        return accumulate(x, axis=axis)
    return in_float32(impl)


_WIDENED_FOR_SORTING = (dtypes.float16, dtypes.bfloat16, *dtypes.FLOAT8)


def sort_key(x: np.ndarray) -> np.ndarray:
    """A key NumPy's sorts order as the primitives do: NaNs last, -0.0 == 0.0 (widened half floats)."""
    return x.astype(np.float32) if x.dtype in _WIDENED_FOR_SORTING else x


def _keys(x: np.ndarray) -> list[np.ndarray]:
    """Complex values sort by (real, imaginary), each part with NaNs last (as XLA's comparator).
    NumPy's own complex order differs: it puts ``R + nanj`` after every ``R + Rj``."""
    if dtypes.is_complex(x.dtype):
        return [np.real(x), np.imag(x)]
    return [sort_key(x)]


def _sort(*operands: np.ndarray, dimension: int, is_stable: bool, num_keys: int) -> list[np.ndarray]:
    # A stable sort is also a valid unstable one. np.lexsort's primary key is its last.
    if len(operands) == 1 and sort_key(operands[0]) is operands[0] and not dtypes.is_complex(operands[0].dtype):
        return [np.sort(operands[0], axis=dimension, kind="stable")]  # (its own key: the common sort)
    keys = [np.moveaxis(part, dimension, -1) for k in operands[:num_keys] for part in _keys(k)]
    order = np.lexsort(keys[::-1], axis=-1)
    return [np.moveaxis(np.take_along_axis(np.moveaxis(x, dimension, -1), order, -1), -1, dimension)
            for x in operands]


def _sorted_copy(x: np.ndarray, dimension: int) -> list[np.ndarray]:
    y = x.copy()  # (C order: what an Array holds)
    y.sort(axis=dimension, kind="stable")
    return [y]


def _sort_plain(avals: Sequence[ShapedArray], params: dict) -> Callable | None:
    """One real operand that is its own key (the common sort): a sorted copy, without ``_sort``'s
    checks of the operands on each call."""
    if len(avals) != 1 or dtypes.is_complex(avals[0].dtype) or avals[0].dtype in _WIDENED_FOR_SORTING:
        return None
    return functools.partial(_sorted_copy, dimension=params["dimension"])


_sort.plain = _sort_plain  # type: ignore[attr-defined]


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
    red.reduce_sum_p: in_float32(lambda x, *, axes: np.add.reduce(x, axis=axes, dtype=x.dtype), _plain_sum),
    red.reduce_prod_p: in_float32(lambda x, *, axes: np.prod(x, axis=axes, dtype=x.dtype)),
    red.reduce_max_p: in_float32(_reduce_max, _plain_extremum(np.maximum, dtypes.lowest)),
    red.reduce_min_p: in_float32(_reduce_min, _plain_extremum(np.minimum, dtypes.highest)),
    red.reduce_and_p: _bitwise_reduce(np.bitwise_and),
    red.reduce_or_p: _bitwise_reduce(np.bitwise_or),
    red.reduce_xor_p: _bitwise_reduce(np.bitwise_xor),
    red.argmax_p: _arg_reduce(np.argmax),
    red.argmin_p: _arg_reduce(np.argmin),
    red.cumsum_p: _scan(lambda x, axis: np.cumsum(x, axis=axis, dtype=x.dtype)),
    red.cumprod_p: _scan(lambda x, axis: np.cumprod(x, axis=axis, dtype=x.dtype)),
    red.cummax_p: _complex_cumulative(np.maximum.accumulate, dtypes.lowest, complex_greater),
    red.cummin_p: _complex_cumulative(np.minimum.accumulate, dtypes.highest, lambda acc, v: complex_greater(v, acc)),
    red.cumlogsumexp_p: _scan(np.logaddexp.accumulate),
})
impl_rules[red.sort_p] = _sort  # (apart: the entries above are untyped, and these two typed ones have no common type)
impl_rules[red.top_k_p] = _top_k
