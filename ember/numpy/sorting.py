"""Sorting and searching in ``jnp``: sort, argsort, lexsort, partition, searchsorted, unique.

Everything is built on ``lax.sort`` (stable, NaNs last). Moving data by a
computed permutation is itself a sort: sorting ``(perm, iota)`` inverts a
permutation, and sorting ``(inverse, x)`` gathers ``x[perm]``.
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ember import dtypes, errors, lax
from ember.core.trace import Tracer
from ember.lax.reductions import static_axis
from ember.numpy.core import ensure_array, promote_dtypes
from ember.numpy.creation import full
from ember.numpy.reductions import cumsum as _cumsum, sum as _sum
from ember.numpy.ufuncs import isnan

__all__ = ["sort", "argsort", "lexsort", "partition", "argpartition", "searchsorted", "sort_complex", "unique"]


def _axis_or_flat(a: Any, axis: int | None) -> tuple[Any, int]:
    """``a`` and a non-negative axis; ``axis=None`` means the flattened array."""
    a = ensure_array(a)
    if axis is None:
        return lax.reshape(a, (a.size,)), 0
    return a, static_axis(operator.index(axis), a.ndim)


def _check_sort_args(kind: Any, order: Any, name: str) -> None:
    if order is not None:
        raise NotImplementedError(f"The 'order' argument to jnp.{name} is not supported (ember has no "
                                  "structured dtypes).")
    del kind  # every sort is the same stable sort


def sort(a: Any, axis: int | None = -1, *, kind: Any = None, order: Any = None, stable: bool = True,
         descending: bool = False) -> Any:
    """A sorted copy of ``a`` along ``axis`` (flattened if None). NaNs sort to the end
    (to the front when ``descending``)."""
    _check_sort_args(kind, order, "sort")
    a, axis = _axis_or_flat(a, axis)
    if descending:
        return lax.rev(lax.sort(lax.rev(a, (axis,)), axis, is_stable=stable), (axis,))
    return lax.sort(a, axis, is_stable=stable)


def argsort(a: Any, axis: int | None = -1, *, kind: Any = None, order: Any = None, stable: bool = True,
            descending: bool = False, dtype: Any = None) -> Any:
    """Indices that sort ``a`` along ``axis``; equal elements keep their order (also when
    ``descending``)."""
    _check_sort_args(kind, order, "argsort")
    a, axis = _axis_or_flat(a, axis)
    index_dtype = dtypes.requested_dtype(dtype) if dtype is not None else dtypes.default_int_dtype()
    indices = lax.broadcasted_iota(index_dtype, a.shape, axis)
    if descending:
        # Sorting the reversed array and reversing the result keeps ties in index order.
        _, perm = lax.sort_key_val(lax.rev(a, (axis,)), lax.rev(indices, (axis,)), axis, is_stable=stable)
        return lax.rev(perm, (axis,))
    return lax.sort_key_val(a, indices, axis, is_stable=stable)[1]


def sort_complex(a: Any) -> Any:
    """``a`` sorted along its last axis (complex values by real part, then imaginary part) and
    converted to the complex type of its dtype, as JAX's (integers: complex64 / complex128)."""
    a = ensure_array(a)
    if a.ndim == 0:
        raise ValueError("axis -1 is out of bounds for array of dimension 0")
    a = lax.sort(a, dimension=-1)
    return lax.convert_element_type(a, dtypes.complex_dtype(a.dtype))


def lexsort(keys: Sequence[Any], axis: int = -1) -> Any:
    """Indices that sort by several keys; the *last* key is the primary one (as NumPy)."""
    keys = [ensure_array(k) for k in keys]
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    if len({k.shape for k in keys}) > 1:
        raise ValueError(f"all keys need to be the same shape, got {[k.shape for k in keys]}")
    if keys[0].ndim == 0:
        return ensure_array(np.array(0, dtype=dtypes.default_int_dtype()))
    axis = static_axis(operator.index(axis), keys[0].ndim)
    indices = lax.broadcasted_iota(dtypes.default_int_dtype(), keys[0].shape, axis)
    return lax.sort((*keys[::-1], indices), axis, num_keys=len(keys))[-1]


def _check_kth(kth: Any, size: int) -> None:
    for k in np.atleast_1d(np.asarray(kth)):
        k = operator.index(k)
        if not -size <= k < size:
            raise ValueError(f"kth(={k}) out of bounds ({size})")


def _refuse_complex(a: Any, name: str) -> None:
    if dtypes.is_complex(a.dtype):
        raise NotImplementedError(f"jnp.{name} for complex dtype is not implemented.")


def partition(a: Any, kth: int | Sequence[int], axis: int = -1) -> Any:
    """``a`` rearranged so the element at ``kth`` is the one a sort puts there, smaller ones
    before it and larger ones after. (Implemented as a full sort, a valid partition.)"""
    a, axis = _axis_or_flat(a, axis)
    _refuse_complex(a, "partition")
    _check_kth(kth, a.shape[axis])
    return lax.sort(a, axis)


def argpartition(a: Any, kth: int | Sequence[int], axis: int = -1) -> Any:
    """Indices that ``partition`` ``a`` (those of a stable sort)."""
    a, axis = _axis_or_flat(a, axis)
    _refuse_complex(a, "argpartition")
    _check_kth(kth, a.shape[axis])
    return argsort(a, axis)


# --- permutations via sorting -------------------------------------------------------------
def _iota_like(x: Any, dtype: np.dtype = dtypes.int32) -> Any:
    return lax.iota(dtype, x.shape[0])


def _inverse_permutation(perm: Any) -> Any:
    return lax.sort_key_val(perm, _iota_like(perm, perm.dtype))[1]


def _take_permuted(x: Any, perm: Any) -> Any:
    """``x[perm]`` for a permutation ``perm`` of ``range(len(x))``, along the first axis."""
    return lax.sort_key_val(_inverse_permutation(perm), x, 0)[1]


def _ranks(x: Any) -> Any:
    """The position of each element of 1-D ``x`` in its stable sort."""
    return _inverse_permutation(lax.sort_key_val(x, _iota_like(x))[1])


# --- searchsorted ----------------------------------------------------------------------------
_SEARCH_METHODS = ("scan", "scan_unrolled", "sort", "compare_all")


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None, *, method: str = "scan") -> Any:
    """Indices where the elements of ``v`` would be inserted into the sorted 1-D ``a`` to keep it
    sorted: before equal elements for ``side='left'``, after them for ``'right'``. NaNs order last.

    ``method`` picks the algorithm: ``'compare_all'`` compares every pair (fast for small ``a``);
    the others sort ``a`` and ``v`` together (``'scan'`` and ``'scan_unrolled'``, binary searches in
    JAX, use the sort too until ember has a gather primitive). All give the same results.
    """
    if side not in ("left", "right"):
        raise ValueError(f"{side!r} is an invalid value for keyword 'side'. Expected one of ['left', 'right'].")
    if method not in _SEARCH_METHODS:
        raise ValueError(f"{method!r} is an invalid value for keyword 'method'. "
                         f"Expected one of {list(_SEARCH_METHODS)}.")
    a, v = promote_dtypes(ensure_array(a), ensure_array(v))
    if a.ndim != 1:
        raise ValueError(f"a should be 1-dimensional, got shape {a.shape}")
    if sorter is not None:
        a = _take_permuted(a, lax.convert_element_type(ensure_array(sorter), dtypes.int32))
    if a.shape[0] == 0 or v.size == 0:
        return full(v.shape, 0, dtypes.int32)
    if method == "compare_all":
        return _searchsorted_compare_all(a, v, side)
    return _searchsorted_via_sort(a, v, side)


def _sort_less(x: Any, y: Any, or_equal: bool) -> Any:
    """``x < y`` (or ``<=``) in the order sorts use, where NaN is greater than everything; complex
    values by their real parts, then by their imaginary parts."""
    if dtypes.is_complex(x.dtype):
        re_x, re_y = lax.real(x), lax.real(y)
        same_real = lax.bitwise_or(lax.eq(re_x, re_y), lax.bitwise_and(isnan(re_x), isnan(re_y)))
        return lax.select(same_real, _sort_less(lax.imag(x), lax.imag(y), or_equal),
                          _sort_less(re_x, re_y, or_equal=False))
    if not dtypes.is_floating(x.dtype):
        return lax.le(x, y) if or_equal else lax.lt(x, y)
    if or_equal:
        return lax.bitwise_or(lax.le(x, y), isnan(y))
    return lax.bitwise_or(lax.lt(x, y), lax.bitwise_and(isnan(y), lax.bitwise_not(isnan(x))))


def _searchsorted_compare_all(a: Any, v: Any, side: str) -> Any:
    shape = v.shape + a.shape
    before = _sort_less(lax.broadcast_in_dim(a, shape, (v.ndim,)),
                        lax.broadcast_in_dim(v, shape, tuple(range(v.ndim))), or_equal=side == "right")
    return lax.reduce_sum(lax.convert_element_type(before, dtypes.int32), (v.ndim,))


def _searchsorted_via_sort(a: Any, v: Any, side: str) -> Any:
    # Sorting ``v`` and ``a`` together (``v`` first for 'left', so it lands before equal elements
    # of ``a``) puts each query at (its rank among the queries) + (its insertion index).
    queries = lax.reshape(v, (v.size,))
    if side == "left":
        position = lax.slice_in_dim(_ranks(lax.concatenate([queries, a], 0)), 0, v.size)
    else:
        position = lax.slice_in_dim(_ranks(lax.concatenate([a, queries], 0)), a.shape[0], None)
    return lax.reshape(lax.sub(position, _ranks(queries)), v.shape)


# --- unique ------------------------------------------------------------------------------------
def unique(ar: Any, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None,
           fill_value: Any = None, sorted: bool = True) -> Any:
    """The sorted unique elements of ``ar`` (or unique slices along ``axis``), optionally with the
    index of each one's first occurrence, the inverse indices that rebuild ``ar``, and counts.

    The number of unique values decides the result's shape, so it needs a concrete ``ar`` unless
    ``size`` is given: then the results have exactly ``size`` entries, padded with ``fill_value``
    (default: the smallest unique value; index padding is its index, count padding 0).
    ``sorted=False`` is accepted: any order is allowed then, and sorted is one.
    """
    ar = ensure_array(ar)
    if size is None and isinstance(ar, Tracer):
        raise ar._trace.concretization_error(
            ar, "jnp.unique without size= (the result's length would depend on the values: pass size=N)",
            errors.ConcretizationTypeError)
    moved_axis = 0 if axis is None else static_axis(operator.index(axis), ar.ndim)
    rows = lax.reshape(ar, (ar.size,)) if axis is None else _rows(ar, moved_axis)
    n = rows.shape[0]
    columns = [rows] if rows.ndim == 1 else [lax.index_in_dim(rows, j, 1, keepdims=False)
                                             for j in range(rows.shape[1])]
    columns = [_canonical_complex_nan(c) for c in columns]
    values, first_index, inverse, counts, num_unique = _unique_sorted(columns, n, equal_nan)
    if size is None:
        size = int(num_unique)
    else:
        size = operator.index(size)
        values, first_index, counts = _fit_to_size(values, first_index, counts, num_unique, size, fill_value)
    values = [lax.slice_in_dim(c, 0, size) for c in values]
    first_index, counts = lax.slice_in_dim(first_index, 0, size), lax.slice_in_dim(counts, 0, size)
    if axis is None:
        inverse = lax.reshape(inverse, ar.shape)
        unique_values = values[0]
    else:
        unique_values = _unrows([lax.expand_dims(c, (1,)) for c in values], ar, moved_axis, size)
    extras = [x for flag, x in ((return_index, first_index), (return_inverse, inverse),
                                (return_counts, counts)) if flag]
    return (unique_values, *extras) if extras else unique_values


def _canonical_complex_nan(x: Any) -> Any:
    """Complex values with a NaN in either part as ``nan + 0j``, as JAX's ``unique`` makes them: they
    then sort together, after every number (NumPy's order too), and are one value."""
    if not dtypes.is_complex(x.dtype):
        return x
    return lax.select(isnan(x), full(x.shape, complex(np.nan, 0), x.dtype), x)


def _rows(ar: Any, axis: int) -> Any:
    """``ar`` as a matrix whose rows are the slices along ``axis``."""
    perm = (axis,) + tuple(d for d in range(ar.ndim) if d != axis)
    n = ar.shape[axis]
    return lax.reshape(lax.transpose(ar, perm), (n, ar.size // n if n else 0))


def _unrows(columns: list[Any], ar: Any, axis: int, size: int) -> Any:
    """Inverse of ``_rows`` for ``size`` rows."""
    matrix = lax.concatenate(columns, 1) if columns else full((size, 0), 0, ar.dtype)
    rest = tuple(s for d, s in enumerate(ar.shape) if d != axis)
    moved = lax.reshape(matrix, (size,) + rest)
    return lax.transpose(moved, tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, ar.ndim)))


def _unique_sorted(columns: list[Any], n: int, equal_nan: bool) -> tuple:
    """The unique rows of ``columns`` packed at the front (length ``n``, the tail is padding),
    each one's first index, the inverse indices, the counts and the number of unique rows."""
    index_dtype = dtypes.default_int_dtype()
    *sorted_columns, perm = lax.sort((*columns, lax.iota(index_dtype, n)), 0, num_keys=len(columns))
    is_first = _starts_of_runs(sorted_columns, n, equal_nan)
    group = lax.sub(_cumsum(is_first, dtype=index_dtype), lax.convert_element_type(1, index_dtype))
    inverse = lax.sort_key_val(perm, group)[1]  # inverse[perm[i]] = group[i]
    # Move the first element of each run to the front (keeping their order) with a stable sort
    # on "not first"; their positions give the first indices and, by differences, the counts.
    position = lax.iota(index_dtype, n)
    _, start, first_index, *values = lax.sort((lax.bitwise_not(is_first), position, perm, *sorted_columns),
                                              0, num_keys=1)
    num_unique = _sum(is_first, dtype=index_dtype)
    next_start = _next_start(start, position, num_unique, n)
    counts = lax.select(lax.lt(position, num_unique), lax.sub(next_start, start), full((n,), 0, index_dtype))
    return values, first_index, inverse, counts, num_unique


def _next_start(start: Any, position: Any, num_unique: Any, n: int) -> Any:
    """Where the next run begins, for each packed run start (``n`` after the last run)."""
    shifted = lax.pad(start, n, [(-1, 1, 0)])  # start[i + 1], and n past the end
    is_last_or_padding = lax.ge(lax.add(position, 1), num_unique)
    return lax.select(is_last_or_padding, full(start.shape, n, start.dtype), shifted)


def _starts_of_runs(sorted_columns: list[Any], n: int, equal_nan: bool) -> Any:
    """True where a sorted row differs from the one before it (always for the first row)."""
    differs = None
    for column in sorted_columns:
        current, previous = lax.slice_in_dim(column, 1, None), lax.slice_in_dim(column, 0, n - 1)
        changed = lax.ne(current, previous)
        if equal_nan and dtypes.is_inexact(column.dtype):
            changed = lax.bitwise_and(changed, lax.bitwise_not(lax.bitwise_and(isnan(current), isnan(previous))))
        differs = changed if differs is None else lax.bitwise_or(differs, changed)
    if differs is None:  # rows of length 0 are all equal
        differs = full((max(n - 1, 0),), False, dtypes.bool_)
    return lax.concatenate([full((min(n, 1),), True, dtypes.bool_), differs], 0)


def _fit_to_size(values: list[Any], first_index: Any, counts: Any, num_unique: Any, size: int,
                 fill_value: Any) -> tuple:
    """Pad or cut the packed results to ``size`` entries, filling those past ``num_unique``."""
    n = first_index.shape[0]
    if size > n:
        def grow(x: Any) -> Any:
            return lax.pad(x, lax.convert_element_type(0, x.dtype), [(0, size - n, 0)])

        values, first_index, counts = [grow(c) for c in values], grow(first_index), grow(counts)
    valid = lax.lt(lax.iota(num_unique.dtype, first_index.shape[0]), num_unique)

    def fill(x: Any, value: Any) -> Any:
        return lax.select(valid, x, full(x.shape, value, x.dtype))

    smallest = [lax.index_in_dim(c, 0, keepdims=False) for c in values] if n else [0] * len(values)
    fills = smallest if fill_value is None else [ensure_array(fill_value)] * len(values)
    values = [fill(c, f) for c, f in zip(values, fills)]
    first_index = fill(first_index, lax.index_in_dim(first_index, 0, keepdims=False) if n else 0)
    return values, first_index, fill(counts, 0)
