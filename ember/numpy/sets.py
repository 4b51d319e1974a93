"""Set operations on 1-D arrays (``isin``, ``union1d``, ``intersect1d``, ``setdiff1d``,
``setxor1d``) and the array-API ``unique_*`` functions.

Every set result is built the same way: mark which elements of a sorted candidate array belong
to the result, then sort the marked ones to the front (one ``lax.sort`` keyed on
``(not marked, value)``). The result's length is the number marked, so under ``jit`` it needs
a static ``size=``; the entries past the number marked are ``fill_value``.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from ember import dtypes, errors, lax
from ember.core.trace import Tracer
from ember.numpy.core import asarray, ensure_array, promote_dtypes
from ember.numpy.reductions import sum as _sum
from ember.numpy.shape_ops import concatenate, ravel, reshape
from ember.numpy.sorting import _canonical_complex_nan, searchsorted, unique
from ember.numpy.static_args import static_bool, static_int
from ember.numpy.ufuncs import isnan, logical_not, where

__all__ = ["intersect1d", "isin", "setdiff1d", "setxor1d", "union1d", "unique_all", "unique_counts",
           "unique_inverse", "unique_values"]

UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])


def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto") -> Any:
    """Whether each element of ``element`` occurs in ``test_elements`` (NaN never does), found by
    binary search in the sorted ``test_elements``; the result has ``element``'s shape."""
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ValueError(f"method={method!r} is not supported: use 'auto', 'compare_all', 'binary_search' "
                         "or 'sort'")
    element, test_elements = promote_dtypes(ensure_array(element), ensure_array(test_elements))
    invert = static_bool(invert, "invert", "isin")
    if test_elements.size == 0:
        found = lax.broadcast_in_dim(lax.convert_element_type(False, dtypes.bool_), element.shape, ())
    else:
        table = lax.sort(ravel(test_elements))
        position = lax.min(searchsorted(table, element), lax.convert_element_type(table.size - 1, np.int32))
        found = lax.convert_element_type(lax.eq(table[position], element), dtypes.bool_)  # (strong, as JAX's)
    return logical_not(found) if invert else found


def _require_size(size: int | None, name: str, *arrays: Any) -> None:
    """A traced input makes the result's length unknown while tracing: then ``size`` is required."""
    traced = next((a for a in arrays if isinstance(a, Tracer)), None)
    if size is None and traced is not None:
        raise traced._trace.concretization_error(
            traced, f"jnp.{name} without size= (the result's length would depend on the values: pass size=N)",
            errors.ConcretizationTypeError)


def _sorted_with_first_marks(values: Any) -> tuple[Any, Any, Any]:
    """``values`` (1-D) sorted, the sorting permutation, and whether each sorted entry is the
    first of its run of equal values (NaNs count as equal, as in NumPy's set functions). A
    complex value with a NaN part becomes ``nan+0j`` first (as JAX's ``unique``), so that they
    all sort together and collapse to one."""
    values = _canonical_complex_nan(values)
    ordered, perm = lax.sort((values, lax.iota(np.int32, values.size)), 0, num_keys=1)
    if values.size == 0:
        return ordered, perm, lax.convert_element_type(ordered, dtypes.bool_)
    previous, current = ordered[:-1], ordered[1:]
    repeated = lax.eq(previous, current) | (isnan(previous) & isnan(current))
    first = concatenate([asarray([True]), logical_not(repeated)])
    return ordered, perm, first


def _compact(marked: Any, values: Any, *extras: Any, size: int | None, fill_value: Any,
             extra_fills: tuple = ()) -> list[Any]:
    """The marked ``values`` (and matching ``extras``) in sorted order, as ``size`` entries (all
    marked ones when ``size`` is None), padded with ``fill_value`` (default: the smallest)."""
    unmarked = lax.convert_element_type(logical_not(marked), np.int32)
    _, ordered, *ordered_extras = lax.sort((unmarked, values, *extras), 0, num_keys=2)
    count = _sum(marked, dtype=np.int32)
    if size is None:
        size = int(count)
    size = static_int(size, "size", "set functions")
    n = values.size
    if size > n:
        ordered, *ordered_extras = (lax.pad(x, lax.convert_element_type(0, x.dtype), [(0, size - n, 0)])
                                    for x in (ordered, *ordered_extras))
    outputs = [lax.slice_in_dim(x, 0, size) for x in (ordered, *ordered_extras)]
    if size == 0:
        return outputs
    padding = lax.ge(lax.iota(np.int32, size), count)
    # The default fill is the smallest value, or 0 where nothing is marked (as JAX pads).
    smallest = where(lax.gt(count, 0), outputs[0][0], lax.convert_element_type(0, outputs[0].dtype))
    fills = (smallest if fill_value is None else fill_value, *extra_fills)
    return [where(padding, lax.convert_element_type(fill, out.dtype), out) for out, fill in zip(outputs, fills)]


def _flat_operands(ar1: Any, ar2: Any) -> list[Any]:
    return [ravel(a) for a in promote_dtypes(ensure_array(ar1), ensure_array(ar2))]


def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values found in ``ar1`` or ``ar2``."""
    _require_size(size, "union1d", ar1, ar2)
    ordered, _, first = _sorted_with_first_marks(concatenate(_flat_operands(ar1, ar2)))
    return _compact(first, ordered, size=size, fill_value=fill_value)[0]


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
              fill_value: Any = None) -> Any:
    """The sorted unique values of ``ar1`` not in ``ar2`` (padding defaults to 0)."""
    _require_size(size, "setdiff1d", ar1, ar2)
    ar1, ar2 = _flat_operands(ar1, ar2)
    ordered, _, first = _sorted_with_first_marks(ar1)
    fill_value = 0 if fill_value is None else fill_value
    return _compact(first & isin(ordered, ar2, invert=True), ordered, size=size, fill_value=fill_value)[0]


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
             fill_value: Any = None) -> Any:
    """The sorted unique values in exactly one of ``ar1`` and ``ar2``."""
    _require_size(size, "setxor1d", ar1, ar2)
    ar1, ar2 = _flat_operands(ar1, ar2)
    ordered1, _, first1 = _sorted_with_first_marks(ar1)
    ordered2, _, first2 = _sorted_with_first_marks(ar2)
    marked = concatenate([first1 & isin(ordered1, ar2, invert=True), first2 & isin(ordered2, ar1, invert=True)])
    return _compact(marked, concatenate([ordered1, ordered2]), size=size, fill_value=fill_value)[0]


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values in both ``ar1`` and ``ar2``; with ``return_indices``, also the
    index of each one's first occurrence in the flattened ``ar1`` and ``ar2`` (index padding is
    the array's length)."""
    _require_size(size, "intersect1d", ar1, ar2)
    ar1, ar2 = _flat_operands(ar1, ar2)
    ordered1, perm1, first1 = _sorted_with_first_marks(ar1)
    ordered2, perm2, _ = _sorted_with_first_marks(ar2)
    marked = first1 & isin(ordered1, ar2)
    if not static_bool(return_indices, "return_indices", "intersect1d"):
        return _compact(marked, ordered1, size=size, fill_value=fill_value)[0]
    # The first occurrence in ar2 is the first of its run in the stably sorted ar2.
    run_start = lax.min(searchsorted(ordered2, ordered1), lax.convert_element_type(max(ar2.size - 1, 0), np.int32))
    index2 = perm2[run_start] if ar2.size else perm1
    return tuple(_compact(marked, ordered1, perm1, index2, size=size, fill_value=fill_value,
                          extra_fills=(ar1.size, ar2.size)))


def unique_values(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values of ``x`` (flattened; each NaN is its own value)."""
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


def unique_counts(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> UniqueCountsResult:
    """The sorted unique values of ``x`` and how often each occurs."""
    return UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size, fill_value=fill_value))


def unique_inverse(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> UniqueInverseResult:
    """The sorted unique values of ``x`` and, in ``x``'s shape, the index of each element's value."""
    x = ensure_array(x)
    values, inverse = unique(x, return_inverse=True, equal_nan=False, size=size, fill_value=fill_value)
    return UniqueInverseResult(values, reshape(inverse, x.shape))


def unique_all(x: Any, /, *, size: int | None = None, fill_value: Any = None) -> UniqueAllResult:
    """The sorted unique values of ``x``, each one's first index, the inverse indices (in ``x``'s
    shape) and the counts."""
    x = ensure_array(x)
    values, index, inverse, counts = unique(x, return_index=True, return_inverse=True, return_counts=True,
                                            equal_nan=False, size=size, fill_value=fill_value)
    return UniqueAllResult(values, index, reshape(inverse, x.shape), counts)
