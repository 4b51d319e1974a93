"""Primitives that combine elements along axes: reductions, arg-reductions, cumulative
reductions (scans), sorting and top-k.

Reductions keep the operand's dtype (``jnp`` chooses the accumulation type before
calling them). Floating-point NaNs propagate through max/min, and sorts order
NaNs after every other value, as NumPy does.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ember import dtypes
from ember.core import traits
from ember.core.avals import ShapedArray
from ember.core.primitive import Primitive
from ember.core.traits import Cost, Family, per_operand_element
from ember.lax.base import aval, canonical_axes, check_dtype, primitive

__all__ = [
    "REDUCTIONS", "CUMULATIVE", "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
    "reduce_or", "reduce_xor", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp",
    "sort", "sort_key_val", "top_k",
]

# Every reduction / cumulative primitive, for passes that treat the family alike (views of the
# traits table). ``argmax`` and ``argmin`` are in neither: they reduce one axis to an index.
REDUCTIONS = traits.REDUCTIONS
CUMULATIVE = traits.CUMULATIVE

_NUMBER, _ANY, _INT_BOOL, _FLOAT = "iufc", "biufc", "biu", "f"


def static_axis(axis: Any, ndim: int, name: str = "axis") -> int:
    """One axis of an ``ndim``-dimensional operand, negative counting from the end."""
    if type(axis) is int and -ndim <= axis < ndim:  # (the common call, without ``static_axes``' 2 us)
        return axis + ndim if axis < 0 else axis
    return static_axes((axis,), ndim, name)[0]


def static_axes(axes: Any, ndim: int, name: str = "axis") -> tuple[int, ...]:
    """Sorted non-negative axes; raises ValueError naming the axis and the rank when out of range."""
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    if ndim == 0 and axes:  # canonical_axes lets 0-d arrays take axis 0; NumPy does not
        raise ValueError(f"{name} {int(axes[0])} is out of bounds for an array of dimension 0")
    return tuple(sorted(canonical_axes(axes, ndim, name)))


def _check_axes(name: str, axes: tuple, x: ShapedArray) -> None:
    if list(axes) != sorted(set(axes)) or any(not 0 <= a < x.ndim for a in axes):
        raise ValueError(f"{name}: axes {axes} must be distinct, sorted and within the rank {x.ndim} of "
                         f"the operand {x.str_short()}")


# --- reductions ------------------------------------------------------------------------
def _define_reduction(name: str, kinds: str) -> Primitive:
    def rule(x: ShapedArray, *, axes: tuple) -> ShapedArray:
        check_dtype(name, x.dtype, kinds)
        _check_axes(name, axes, x)
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype, x.weak_type)

    return primitive(name, rule, family=Family.REDUCTION, linear=name == "reduce_sum")


reduce_sum_p = _define_reduction("reduce_sum", _NUMBER)
reduce_prod_p = _define_reduction("reduce_prod", _NUMBER)
reduce_max_p = _define_reduction("reduce_max", _ANY)
reduce_min_p = _define_reduction("reduce_min", _ANY)
reduce_and_p = _define_reduction("reduce_and", _INT_BOOL)
reduce_or_p = _define_reduction("reduce_or", _INT_BOOL)
reduce_xor_p = _define_reduction("reduce_xor", _INT_BOOL)


def _reducer(p: Primitive, what: str):
    def reduce(operand: Any, axes: Sequence[int]) -> Any:
        return p.bind(operand, axes=static_axes(axes, aval(operand).ndim))

    reduce.__name__ = p.name
    reduce.__doc__ = (f"The {what} of ``operand`` over ``axes``, which are removed from the shape. "
                      "The dtype is kept (integers wrap around).")
    return reduce


reduce_sum = _reducer(reduce_sum_p, "sum")
reduce_prod = _reducer(reduce_prod_p, "product")
reduce_max = _reducer(reduce_max_p, "maximum (NaN if any element is NaN; -inf / the lowest value if empty)")
reduce_min = _reducer(reduce_min_p, "minimum (NaN if any element is NaN; +inf / the highest value if empty)")
reduce_and = _reducer(reduce_and_p, "bitwise and")
reduce_or = _reducer(reduce_or_p, "bitwise or")
reduce_xor = _reducer(reduce_xor_p, "bitwise xor")


# --- argmax / argmin ----------------------------------------------------------------------
def _define_arg_reduction(name: str) -> Primitive:
    def rule(x: ShapedArray, *, axis: int, index_dtype: np.dtype) -> ShapedArray:
        check_dtype(name, x.dtype, "biuf")  # complex values have no order to find a maximum by (as JAX)
        if not 0 <= axis < x.ndim:
            raise ValueError(f"{name}: axis {axis} is out of bounds for the operand {x.str_short()}")
        if index_dtype not in dtypes.INTEGER:
            raise TypeError(f"{name}: index_dtype must be an integer dtype, got {index_dtype}")
        if x.shape[axis] == 0:
            raise ValueError(f"{name} needs a non-empty reduced dimension, but axis {axis} of shape "
                             f"{x.shape} has size 0")
        return ShapedArray(x.shape[:axis] + x.shape[axis + 1:], index_dtype)

    return primitive(name, rule, cost=per_operand_element)


argmax_p = _define_arg_reduction("argmax")
argmin_p = _define_arg_reduction("argmin")


def argmax(operand: Any, axis: int, index_dtype: Any) -> Any:
    """Index of the largest element along ``axis`` (first one on ties; NaN counts as largest)."""
    return argmax_p.bind(operand, axis=static_axis(axis, aval(operand).ndim),
                         index_dtype=dtypes.canonicalize_dtype(index_dtype))


def argmin(operand: Any, axis: int, index_dtype: Any) -> Any:
    """Index of the smallest element along ``axis`` (first one on ties; NaN counts as smallest)."""
    return argmin_p.bind(operand, axis=static_axis(axis, aval(operand).ndim),
                         index_dtype=dtypes.canonicalize_dtype(index_dtype))


# --- cumulative reductions ------------------------------------------------------------------
def _define_cumulative(name: str, kinds: str) -> Primitive:
    def rule(x: ShapedArray, *, axis: int, reverse: bool) -> ShapedArray:
        check_dtype(name, x.dtype, kinds)
        if not 0 <= axis < x.ndim:
            raise ValueError(f"{name}: axis {axis} is out of bounds for the operand {x.str_short()}")
        return x

    return primitive(name, rule, family=Family.CUMULATIVE, linear=name == "cumsum")


cumsum_p = _define_cumulative("cumsum", _NUMBER)
cumprod_p = _define_cumulative("cumprod", _NUMBER)
cummax_p = _define_cumulative("cummax", _ANY)
cummin_p = _define_cumulative("cummin", _ANY)
cumlogsumexp_p = _define_cumulative("cumlogsumexp", _FLOAT)


def _scanner(p: Primitive, what: str):
    def scan(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
        return p.bind(operand, axis=static_axis(axis, aval(operand).ndim), reverse=bool(reverse))

    scan.__name__ = p.name
    scan.__doc__ = (f"Running {what} along ``axis`` (from the end when ``reverse``); the shape and "
                    "dtype are kept.")
    return scan


cumsum = _scanner(cumsum_p, "sum")
cumprod = _scanner(cumprod_p, "product")
cummax = _scanner(cummax_p, "maximum")
cummin = _scanner(cummin_p, "minimum")
cumlogsumexp = _scanner(cumlogsumexp_p, "log-sum-exp")


# --- sort ----------------------------------------------------------------------------------
def _sort_rule(*operands: ShapedArray, dimension: int, is_stable: bool, num_keys: int) -> list[ShapedArray]:
    if not operands:
        raise TypeError("sort needs at least one operand")
    shape = operands[0].shape
    if any(x.shape != shape for x in operands):
        raise TypeError(f"sort: all operands must have one shape, got {[x.shape for x in operands]}")
    if not 0 <= dimension < len(shape):
        raise ValueError(f"sort: dimension {dimension} is out of bounds for operands of shape {shape}")
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"sort: num_keys={num_keys} must be between 1 and the number of operands "
                         f"({len(operands)})")
    return list(operands)


def _sort_cost(eqn: Any) -> Cost:
    n = math.prod(eqn.invars[0].aval.shape)
    return Cost(n * max(math.log2(max(n, 2)), 1.0))


sort_p = primitive("sort", _sort_rule, multiple_results=True, cost=_sort_cost)


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """Sort along ``dimension``. Given a sequence of operands, they are sorted together,
    lexicographically by the first ``num_keys`` of them, and a tuple is returned.

    NaNs sort after +inf and -0.0 equals 0.0, so stable sorts keep their order.
    """
    operands = tuple(operand) if isinstance(operand, (list, tuple)) else (operand,)
    if not operands:
        raise TypeError("sort needs at least one operand")
    dimension = static_axis(dimension, aval(operands[0]).ndim, "dimension")
    out = sort_p.bind(*operands, dimension=dimension, is_stable=bool(is_stable), num_keys=int(num_keys))
    return tuple(out) if isinstance(operand, (list, tuple)) else out[0]


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> tuple[Any, Any]:
    """Sort ``keys`` along ``dimension`` and permute ``values`` the same way."""
    return sort((keys, values), dimension, is_stable, num_keys=1)


# --- top_k -----------------------------------------------------------------------------------
def _top_k_rule(x: ShapedArray, *, k: int, axis: int) -> list[ShapedArray]:
    if dtypes.is_complex(x.dtype):
        raise ValueError("top_k is not compatible with complex inputs.")
    if not 0 <= axis < x.ndim:
        raise ValueError(f"top_k: axis {axis} is out of bounds for the operand {x.str_short()}")
    if not 0 <= k <= x.shape[axis]:
        raise ValueError(f"top_k: k={k} must be between 0 and the size {x.shape[axis]} of axis {axis}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, dtypes.int32)]


top_k_p = primitive("top_k", _top_k_rule, multiple_results=True)


def top_k(operand: Any, k: int, *, axis: int = -1) -> tuple[Any, Any]:
    """The ``k`` largest values along ``axis`` in descending order, and their int32 indices.
    Ties go to the lower index; NaN counts as larger than every number."""
    values, indices = top_k_p.bind(operand, k=int(k), axis=static_axis(axis, aval(operand).ndim))
    return values, indices

