"""Reductions of ``jnp``: sums, extrema, statistics, cumulative sums and quantiles.

Result dtypes follow JAX: sums and products of bools and small integers give
the default integer type, means and variances of integers the default float
type, and every result is strongly typed. Half-precision means and variances
are computed in float32. ``out=`` is accepted only as ``None``, since ember
arrays are immutable.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, NamedTuple

import numpy as np

from ember import dtypes, lax
from ember.config import config
from ember.core.array import Array
from ember.core.primitive import Primitive
from ember.lax import reductions as red
from ember.lax.reductions import static_axes, static_axis
from ember.numpy.core import broadcast_to, ensure_array, promote_dtypes_inexact
from ember.numpy.staging import staged
from ember.numpy.ufuncs import isnan, logical_not, sqrt, subtract, true_divide, where as _where
from ember.runtime import eager

__all__ = [
    "sum", "prod", "max", "min", "amax", "amin", "any", "all", "mean", "var", "std", "argmax", "argmin",
    "nanargmax", "nanargmin", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "nancumsum",
    "nancumprod", "nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "ptp", "average",
    "count_nonzero", "median", "quantile", "percentile",
]

_HALF = (dtypes.float16, dtypes.bfloat16)
_INEXACT = frozenset(dtypes.INEXACT)
_ALL_AXES = [tuple(range(n)) for n in range(8)]  # (every axis of an array of rank n)


# --- helpers ------------------------------------------------------------------------------
def reduction_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple of ints, negative allowed) as sorted non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return static_axes(tuple(operator.index(a) for a in axis), ndim)
    return static_axes(operator.index(axis), ndim)


def _no_out(out: Any, name: str) -> None:
    if out is not None:
        raise NotImplementedError(f"The 'out' argument to jnp.{name} is not supported: ember arrays are "
                                  "immutable; use the returned array.")


def _full_scalar(value: Any, dtype: np.dtype) -> Any:
    """A strongly typed rank-0 constant (NumPy makes the value exact in ``dtype``); the counts of
    means are kept (Arrays are immutable: one serves every call)."""
    key = (type(value), value, dtype)
    try:
        return _SCALAR_CONSTANTS[key]
    except (KeyError, TypeError):
        pass
    out = ensure_array(np.array(value, dtype=dtype))
    if type(value) is int:  # (ints only: 0.0 and -0.0 are one key)
        if len(_SCALAR_CONSTANTS) >= 256:
            _SCALAR_CONSTANTS.clear()
        _SCALAR_CONSTANTS[key] = out
    return out


_SCALAR_CONSTANTS: dict[tuple, Any] = {}
config.on_update(lambda _name: _SCALAR_CONSTANTS.clear())  # (x64 changes what a dtype canonicalizes to)


def _count(shape: tuple, axes: tuple) -> int:
    return math.prod(shape[d] for d in axes)


def _as_bool(x: Any) -> Any:
    x = ensure_array(x)
    return x if x.dtype == dtypes.bool_ else lax.ne(x, lax.convert_element_type(0, x.dtype))


def _upcast_half(dt: np.dtype) -> np.dtype:
    return dtypes.float32 if dt in _HALF else dt


def _promoted_integer(dt: np.dtype) -> np.dtype:
    """Bools and integers narrower than the default integer widen to it (JAX's sum/prod rule)."""
    if dt == dtypes.bool_:
        return dtypes.default_int_dtype()
    if dtypes.is_unsigned(dt):
        wide = dtypes.default_uint_dtype()
    elif dtypes.is_signed(dt):
        wide = dtypes.default_int_dtype()
    else:
        return dt
    return wide if dt.itemsize < wide.itemsize else dt


def _keep_dims(x: Any, axes: tuple, keepdims: bool) -> Any:
    return lax.expand_dims(x, axes) if keepdims and axes else x


def _ravel(x: Any) -> Any:
    return lax.reshape(x, (x.size,))


# --- sum, prod, max, min, any, all ------------------------------------------------------------
class _Monoid(NamedTuple):
    """An associative operation: its lax reduction, the binary op that folds in ``initial``,
    and its identity (what ``where=False`` elements are replaced by)."""

    name: str
    reduce: Callable
    primitive: Primitive  # (``reduce``'s, bound directly where the axes are known to be valid)
    combine: Callable
    identity: Callable[[np.dtype], Any]
    has_identity: bool = True  # max/min have none: their empty reduction is an error


_SUM = _Monoid("sum", lax.reduce_sum, red.reduce_sum_p, lax.add, lambda dt: 0)
_PROD = _Monoid("prod", lax.reduce_prod, red.reduce_prod_p, lax.mul, lambda dt: 1)
_MAX = _Monoid("max", lax.reduce_max, red.reduce_max_p, lax.max, dtypes.lowest, has_identity=False)
_MIN = _Monoid("min", lax.reduce_min, red.reduce_min_p, lax.min, dtypes.highest, has_identity=False)
_ANY = _Monoid("any", lax.reduce_or, red.reduce_or_p, lax.bitwise_or, lambda dt: False)
_ALL = _Monoid("all", lax.reduce_and, red.reduce_and_p, lax.bitwise_and, lambda dt: True)
# Sums and products computed in bool (dtype=bool) are ``or`` and ``and``.
_BOOL_VERSION = {_SUM: _ANY, _PROD: _ALL}


def _reduce(monoid: _Monoid, a: Any, axis: Any, dtype: Any, out: Any, keepdims: bool, initial: Any,
            where: Any, promote_integers: bool = False) -> Any:
    if type(a) is Array and out is None and not keepdims and initial is None and where is None:
        t = a.aval
        n = len(t.shape)
        if (dtype is None or dtype is t.dtype) and not t.weak_type and n < 8 and (monoid.has_identity or t.size) \
                and (t.dtype in _INEXACT or (t.dtype == dtypes.bool_ and monoid in (_ANY, _ALL))):
            # (a floating Array, or bools for any / all, nothing asked but the reduction of it whole or
            # over one axis: no type to change, no axes to check beyond the one's range)
            if axis is None or axis == _ALL_AXES[n]:
                axes = _ALL_AXES[n]
            elif type(axis) is int and -n <= axis < n:
                axes = (axis % n,)
            else:
                axes = None
            if axes is not None:
                params = {"axes": axes}
                out = eager.apply_seen_one(monoid.primitive, a, params)  # (a signature run before: its runner)
                return monoid.primitive.bind(a, **params) if out is None else out
    _no_out(out, monoid.name)
    a = ensure_array(a)
    axes = reduction_axes(axis, a.ndim)
    if initial is None and not monoid.has_identity:
        if where is not None:
            raise ValueError(f"reduction operation {monoid.name} does not have an identity, so to use a "
                             "where mask one has to specify 'initial'")
        if _count(a.shape, axes) == 0:
            raise ValueError(f"zero-size array to reduction operation {monoid.name} which has no identity")
    if dtype is not None:
        result_dtype = dtypes.requested_dtype(dtype)
    else:
        result_dtype = _promoted_integer(a.dtype) if promote_integers else a.dtype
    if result_dtype == dtypes.bool_:
        monoid = _BOOL_VERSION.get(monoid, monoid)
    x = lax.convert_element_type(a, result_dtype)
    if where is not None:
        mask = broadcast_to(_as_bool(where), a.shape)
        x = lax.select(mask, x, _full_scalar(monoid.identity(result_dtype), result_dtype))
    result = monoid.reduce(x, axes)
    if initial is not None:
        initial = lax.convert_element_type(ensure_array(initial), result_dtype)
        if initial.shape != ():
            raise ValueError(f"initial value must be a scalar. Got array of shape {initial.shape}")
        result = monoid.combine(initial, result)
    return _keep_dims(result, axes, keepdims)


def sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
        initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    """Sum over ``axis``; bools and small integers accumulate in the default integer type."""
    return _reduce(_SUM, a, axis, dtype, out, keepdims, initial, where, promote_integers)


def prod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    """Product over ``axis``; bools and small integers accumulate in the default integer type."""
    return _reduce(_PROD, a, axis, dtype, out, keepdims, initial, where, promote_integers)


def max(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Any:
    """Maximum over ``axis`` (NaN if a NaN is included). Empty slices need ``initial``."""
    return _reduce(_MAX, a, axis, None, out, keepdims, initial, where)


def min(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
        where: Any = None) -> Any:
    """Minimum over ``axis`` (NaN if a NaN is included). Empty slices need ``initial``."""
    return _reduce(_MIN, a, axis, None, out, keepdims, initial, where)


amax, amin = max, min


def any(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *, where: Any = None) -> Any:
    """Whether any element over ``axis`` is nonzero (True for NaN)."""
    return _reduce(_ANY, _as_bool(a), axis, None, out, keepdims, None, where)


def all(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *, where: Any = None) -> Any:
    """Whether every element over ``axis`` is nonzero (True for empty slices)."""
    return _reduce(_ALL, _as_bool(a), axis, None, out, keepdims, None, where)


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Peak to peak: ``max - min`` over ``axis``."""
    _no_out(out, "ptp")
    return lax.sub(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def count_nonzero(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """The number of nonzero elements over ``axis``, in the default integer type."""
    return sum(_as_bool(a), axis, dtype=dtypes.default_int_dtype(), keepdims=keepdims)


# --- mean, var, std ------------------------------------------------------------------------
def _where_count(a: Any, axes: tuple, keepdims: bool, where: Any, dtype: np.dtype) -> Any:
    """How many elements each output reduces over (a constant when there is no mask)."""
    if where is None:
        return _full_scalar(_count(a.shape, axes), dtype)
    return sum(broadcast_to(_as_bool(where), a.shape), axes, dtype=dtype, keepdims=keepdims)


def mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, *,
         where: Any = None) -> Any:
    """Arithmetic mean over ``axis`` (integers average in the default float type; NaN if empty)."""
    if type(a) is Array and axis is None and dtype is None and out is None and not keepdims and where is None:
        t = a.aval
        if t.dtype in _INEXACT and t.dtype not in _HALF and not t.weak_type and len(t.shape) < 8:
            # (a whole float Array, nothing else asked: the sum and the division the general path
            # binds; half types are computed in float32 there)
            total = red.reduce_sum_p.bind(a, axes=_ALL_AXES[len(t.shape)])
            return lax.div(total, _full_scalar(t.size, t.dtype))
    _no_out(out, "mean")
    a = ensure_array(a)
    axes = reduction_axes(axis, a.ndim)
    result_dtype = dtypes.requested_dtype(dtype) if dtype is not None else dtypes.to_inexact_dtype(a.dtype)
    compute_dtype = _upcast_half(result_dtype)
    total = sum(a, axes, dtype=compute_dtype, keepdims=keepdims, where=where)
    count = _where_count(a, axes, keepdims, where, compute_dtype)
    return lax.convert_element_type(lax.div(total, count), result_dtype)


def _correction(a: Any, dtype: Any, out: Any, ddof: int, correction: Any, name: str) -> Any:
    """What ``var`` and ``std`` subtract from the count (checked, with their dtypes, before staging)."""
    _no_out(out, name)
    if correction is None:
        correction = ddof
    elif ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    _var_dtypes(ensure_array(a).dtype, dtype, name)
    return correction


@staged("_var", ("axis", "dtype", "keepdims"))
def _var(a: Any, axis: Any, dtype: Any, correction: Any, keepdims: bool, where: Any, mean_: Any) -> Any:
    """The variance, staged as JAX stages it: ``correction`` is an operand (a number or a traced
    value), subtracted from the count before the squares are summed."""
    a = ensure_array(a)
    axes = reduction_axes(axis, a.ndim)
    result_dtype, compute_dtype = _var_dtypes(a.dtype, dtype, "var")
    a = lax.convert_element_type(a, compute_dtype)
    if mean_ is None:
        mean_ = mean(a, axes, dtype=compute_dtype, keepdims=True, where=where)
    centered = subtract(a, lax.convert_element_type(ensure_array(mean_), compute_dtype))
    square_dtype = dtypes.real_dtype(compute_dtype)
    squared = _squared_magnitude(centered)
    dof = lax.sub(_where_count(a, axes, keepdims, where, square_dtype),
                  lax.convert_element_type(correction, square_dtype))
    squares = sum(squared, axes, dtype=square_dtype, keepdims=keepdims, where=where)
    variance = lax.div(squares, dof)
    variance = _where(lax.gt(dof, _full_scalar(0, square_dtype)), variance, np.nan)
    return lax.convert_element_type(variance, result_dtype)


@staged("_std", ("axis", "dtype", "keepdims"))
def _std(a: Any, axis: Any, dtype: Any, correction: Any, keepdims: bool, where: Any, mean_: Any) -> Any:
    return sqrt(_var(a, axis, dtype, correction, keepdims, where, mean_))


def _var_dtypes(a_dtype: np.dtype, dtype: Any, name: str) -> tuple[np.dtype, np.dtype]:
    """The result and computation dtypes of a variance: the variance of complex values is real (of
    the parts' type) unless a complex ``dtype`` is asked for; a real ``dtype`` is refused for them,
    as in JAX."""
    if dtype is not None:
        result_dtype = dtypes.requested_dtype(dtype)
        if dtypes.is_complex(a_dtype) and not dtypes.is_complex(result_dtype):
            raise ValueError(f"jax.numpy.{name.removeprefix('nan')} does not yet support real dtype parameters "
                             "when computing the variance of an array of complex values. The semantics of "
                             "numpy.var seem unclear in this case.")
        return result_dtype, _upcast_half(result_dtype)
    if not dtypes.is_inexact(a_dtype):
        result_dtype = dtypes.default_float_dtype()
        return result_dtype, result_dtype
    return dtypes.real_dtype(a_dtype), _upcast_half(a_dtype)


def _squared_magnitude(x: Any) -> Any:
    """``|x|**2``: real for complex ``x``."""
    if dtypes.is_complex(x.dtype):
        return lax.add(lax.square(lax.real(x)), lax.square(lax.imag(x)))
    return lax.square(x)


def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False, *,
        where: Any = None, mean: Any = None, correction: Any = None) -> Any:
    """Variance over ``axis``, dividing by ``N - ddof`` (NaN where that is not positive)."""
    return _var(a, axis, dtype, _correction(a, dtype, out, ddof, correction, "var"), keepdims, where, mean)


def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False, *,
        where: Any = None, mean: Any = None, correction: Any = None) -> Any:
    """Standard deviation over ``axis``: the square root of ``var``."""
    return _std(a, axis, dtype, _correction(a, dtype, out, ddof, correction, "std"), keepdims, where, mean)


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False,
            keepdims: bool = False) -> Any:
    """Weighted mean over ``axis``. 1-D ``weights`` apply along a single ``axis``."""
    if weights is None:
        (a,) = promote_dtypes_inexact(ensure_array(a))
        avg = mean(a, axis, keepdims=keepdims)
        weight_sum = lax.broadcast_in_dim(_full_scalar(_count(a.shape, reduction_axes(axis, a.ndim)), avg.dtype),
                                          avg.shape, ())
    else:
        a, weights = promote_dtypes_inexact(ensure_array(a), ensure_array(weights))
        if weights.shape != a.shape:
            weights = _weights_along_axis(weights, a.shape, axis)
        weight_sum = sum(weights, axis, keepdims=keepdims)
        avg = lax.div(sum(lax.mul(a, weights), axis, keepdims=keepdims), weight_sum)
    return (avg, weight_sum) if returned else avg


def _weights_along_axis(weights: Any, shape: tuple, axis: Any) -> Any:
    if weights.ndim != 1:
        raise ValueError("1D weights expected when shapes of a and weights differ.")
    if axis is None:
        raise ValueError("Axis must be specified when shapes of a and weights differ.")
    if isinstance(axis, (tuple, list)):
        raise ValueError("Single axis expected when shapes of a and weights differ")
    axis = static_axis(axis, len(shape))
    if weights.shape[0] != shape[axis]:
        raise ValueError(f"Length of weights ({weights.shape[0]}) not compatible with the size "
                         f"{shape[axis]} of axis {axis}.")
    return lax.broadcast_in_dim(weights, shape, (axis,))


# --- argmax, argmin ---------------------------------------------------------------------------
def _arg_reduce(lax_fn: Callable, name: str, a: Any, axis: Any, out: Any, keepdims: Any) -> Any:
    _no_out(out, name)
    a = ensure_array(a)
    if axis is None:
        result = _arg_reduce(lax_fn, name, _ravel(a), 0, None, False)
        return lax.broadcast_in_dim(result, (1,) * a.ndim, ()) if keepdims else result
    axis = static_axis(operator.index(axis), a.ndim)
    if a.shape[axis] == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence")
    return _keep_dims(lax_fn(a, axis, dtypes.default_int_dtype()), (axis,), bool(keepdims))


def argmax(a: Any, axis: int | None = None, out: Any = None, keepdims: bool | None = None) -> Any:
    """Index of the maximum along ``axis`` (of the flattened array if None); the first NaN wins."""
    return _arg_reduce(lax.argmax, "argmax", a, axis, out, keepdims)


def argmin(a: Any, axis: int | None = None, out: Any = None, keepdims: bool | None = None) -> Any:
    """Index of the minimum along ``axis`` (of the flattened array if None); the first NaN wins."""
    return _arg_reduce(lax.argmin, "argmin", a, axis, out, keepdims)


def _nan_arg_reduce(arg_fn: Callable, replacement: float, a: Any, axis: Any, out: Any, keepdims: Any) -> Any:
    a = ensure_array(a)
    if not dtypes.is_floating(a.dtype):  # (complex: argmax refuses it, as JAX)
        return arg_fn(a, axis, out, keepdims)
    nan_mask = isnan(a)
    index = arg_fn(_where(nan_mask, replacement, a), axis, out, keepdims)
    # All-NaN slices give -1 (NumPy raises; JAX cannot, so it marks them).
    return _where(all(nan_mask, axis, keepdims=bool(keepdims)), -1, index)


def nanargmax(a: Any, axis: int | None = None, out: Any = None, keepdims: bool | None = None) -> Any:
    """``argmax`` ignoring NaNs; -1 for slices that are all NaN."""
    return _nan_arg_reduce(argmax, -np.inf, a, axis, out, keepdims)


def nanargmin(a: Any, axis: int | None = None, out: Any = None, keepdims: bool | None = None) -> Any:
    """``argmin`` ignoring NaNs; -1 for slices that are all NaN."""
    return _nan_arg_reduce(argmin, np.inf, a, axis, out, keepdims)


# --- NaN-ignoring reductions ----------------------------------------------------------------
def _nan_reduce(reduction: Callable, fill: float, nan_if_all_nan: bool, a: Any, axis: Any, keepdims: bool,
                **kwargs: Any) -> Any:
    """``reduction`` with NaNs replaced by ``fill`` (its identity); integers need no replacing."""
    a = ensure_array(a)
    if not dtypes.is_inexact(a.dtype):
        return reduction(a, axis, keepdims=keepdims, **kwargs)
    nan_mask = isnan(a)
    result = reduction(_where(nan_mask, fill, a), axis, keepdims=keepdims, **kwargs)
    if nan_if_all_nan:
        result = _where(all(nan_mask, axis, keepdims=keepdims), np.nan, result)
    return result


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    """``sum`` treating NaNs as zero."""
    return _nan_reduce(sum, 0, False, a, axis, keepdims, dtype=dtype, out=out, initial=initial, where=where)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            initial: Any = None, where: Any = None) -> Any:
    """``prod`` treating NaNs as one."""
    return _nan_reduce(prod, 1, False, a, axis, keepdims, dtype=dtype, out=out, initial=initial, where=where)


def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
    """``max`` ignoring NaNs; NaN for slices that are all NaN."""
    return _nan_reduce(max, -np.inf, True, a, axis, keepdims, out=out, initial=initial, where=where)


def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
    """``min`` ignoring NaNs; NaN for slices that are all NaN."""
    return _nan_reduce(min, np.inf, True, a, axis, keepdims, out=out, initial=initial, where=where)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            where: Any = None) -> Any:
    """``mean`` of the non-NaN elements (NaN for slices that are all NaN)."""
    _no_out(out, "nanmean")
    a = ensure_array(a)
    if not dtypes.is_inexact(a.dtype):
        return mean(a, axis, dtype, keepdims=keepdims, where=where)
    dtype = dtypes.requested_dtype(dtype) if dtype is not None else a.dtype
    count = sum(logical_not(isnan(a)), axis, dtype=dtypes.real_dtype(dtype), keepdims=keepdims, where=where)
    return true_divide(nansum(a, axis, dtype=dtype, keepdims=keepdims, where=where), count)


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
           where: Any = None) -> Any:
    """``var`` of the non-NaN elements (NaN where fewer than ``ddof + 1`` remain)."""
    _no_out(out, "nanvar")
    a = ensure_array(a)
    result_dtype, compute_dtype = _var_dtypes(a.dtype, dtype, "nanvar")
    a = lax.convert_element_type(a, compute_dtype)
    nan_mask = isnan(a)
    centered = _where(nan_mask, 0, subtract(a, nanmean(a, axis, keepdims=True, where=where)))
    square_dtype = dtypes.real_dtype(compute_dtype)
    squares = sum(_squared_magnitude(centered), axis, keepdims=keepdims, where=where)
    dof = lax.sub(sum(logical_not(nan_mask), axis, dtype=square_dtype, keepdims=keepdims, where=where),
                  _full_scalar(ddof, square_dtype))
    variance = _where(lax.gt(dof, _full_scalar(0, square_dtype)), lax.div(squares, dof), np.nan)
    return lax.convert_element_type(variance, result_dtype)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False,
           where: Any = None) -> Any:
    """``std`` of the non-NaN elements."""
    return sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where))


# --- cumulative reductions ---------------------------------------------------------------------
def _cumulative(scan: Callable, name: str, a: Any, axis: Any, dtype: Any, out: Any,
                nan_fill: float | None = None, promote_integers: bool = False) -> Any:
    _no_out(out, name)
    a = ensure_array(a)
    if axis is None or a.ndim == 0:
        a = _ravel(a)
    axis = static_axis(0 if axis is None else operator.index(axis), a.ndim)
    if nan_fill is not None and dtypes.is_inexact(a.dtype):
        a = _where(isnan(a), nan_fill, a)
    if dtype is None:
        result_dtype = _promoted_integer(a.dtype) if a.dtype == dtypes.bool_ or promote_integers else a.dtype
        compute_dtype = result_dtype
    else:
        result_dtype = dtypes.requested_dtype(dtype)
        if result_dtype == dtypes.bool_:  # accumulate truth values as integers, then test them
            a = _as_bool(a)
        compute_dtype = _promoted_integer(result_dtype)
    result = scan(lax.convert_element_type(a, compute_dtype), axis)
    return lax.convert_element_type(result, result_dtype)


def cumsum(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
    """Running sum along ``axis`` (of the flattened array if None); bools count as integers."""
    return _cumulative(lax.cumsum, "cumsum", a, axis, dtype, out)


def cumprod(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
    """Running product along ``axis`` (of the flattened array if None)."""
    return _cumulative(lax.cumprod, "cumprod", a, axis, dtype, out)


def nancumsum(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
    """``cumsum`` treating NaNs as zero."""
    return _cumulative(lax.cumsum, "nancumsum", a, axis, dtype, out, nan_fill=0)


def nancumprod(a: Any, axis: int | None = None, dtype: Any = None, out: Any = None) -> Any:
    """``cumprod`` treating NaNs as one."""
    return _cumulative(lax.cumprod, "nancumprod", a, axis, dtype, out, nan_fill=1)


def _cumulative_with_initial(scan: Callable, identity: int, name: str, x: Any, axis: Any, dtype: Any,
                             include_initial: bool, promote_integers: bool = False) -> Any:
    x = ensure_array(x)
    if x.ndim == 0:
        raise ValueError(f"jnp.{name} does not accept a scalar (0-d) input.")
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"The input array has rank {x.ndim}, however axis was not set to an explicit "
                             "value. The axis argument is only optional for one-dimensional arrays.")
        axis = 0
    axis = static_axis(operator.index(axis), x.ndim)
    result = _cumulative(scan, name, x, axis, dtype, None, promote_integers=promote_integers)
    if not include_initial:
        return result
    shape = list(result.shape)
    shape[axis] = 1
    initial = lax.broadcast_in_dim(_full_scalar(identity, result.dtype), tuple(shape), ())
    return lax.concatenate([initial, result], axis)


def cumulative_sum(x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    """Array-API running sum; ``include_initial`` prepends the zero the sum starts from. As ``jnp.sum``
    (and JAX's ``cumulative_sum``, unlike ``cumsum``), integers narrower than the default integer
    widen to it (unsigned ones to the default unsigned integer)."""
    return _cumulative_with_initial(lax.cumsum, 0, "cumulative_sum", x, axis, dtype, include_initial,
                                    promote_integers=True)


def cumulative_prod(x: Any, /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> Any:
    """Array-API running product; ``include_initial`` prepends the one it starts from."""
    return _cumulative_with_initial(lax.cumprod, 1, "cumulative_prod", x, axis, dtype, include_initial)


# --- quantiles ------------------------------------------------------------------------------
_QUANTILE_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False) -> Any:
    """The ``q``-th quantiles (``0 <= q <= 1``) over ``axis``, interpolating between the sorted
    values as ``method`` says. Slices containing a NaN give NaN. The result's leading dimension
    runs over ``q`` when ``q`` is 1-D."""
    def sort_rows(rows: Any) -> Any:  # a row with a NaN becomes all NaN
        return lax.sort(_where(any(isnan(rows), -1, keepdims=True), np.nan, rows), dimension=-1)

    return quantiles_over_rows("quantile", a, q, axis, out, method, keepdims, sort_rows,
                               lambda rows, q_i: _sorted_quantile(rows, q_i, method))


def quantiles_over_rows(name: str, a: Any, q: Any, axis: Any, out: Any, method: str, keepdims: bool,
                        prepare: Callable[[Any], Any], row_quantile: Callable[[Any, Any], Any]) -> Any:
    """What the quantile functions share: the checks, ``a``'s reduced axes merged last into rows,
    ``prepare(rows)`` once, then ``row_quantile(prepared, q_i)`` per entry of ``q`` (stacked first
    when ``q`` is 1-D). ``q`` takes ``a``'s (inexact) type, and so does the result, as in JAX."""
    _no_out(out, name)
    if method not in _QUANTILE_METHODS:
        raise ValueError(f"method can only be one of {list(_QUANTILE_METHODS)}, got {method!r}")
    (a,) = promote_dtypes_inexact(ensure_array(a))
    if dtypes.is_complex(a.dtype):
        raise ValueError("quantile does not support complex input, as the operation is poorly defined.")
    q = lax.convert_element_type(ensure_array(q), a.dtype)
    if q.ndim > 1:
        raise ValueError(f"q must have rank <= 1, got shape {q.shape}")
    axes = reduction_axes(axis, a.ndim)
    kept = tuple(d for d in range(a.ndim) if d not in axes)
    n = _count(a.shape, axes)
    if n == 0:
        raise ValueError("cannot take a quantile over an empty axis: it has no elements")
    kept_shape = tuple(a.shape[d] for d in kept)
    prepared = prepare(lax.reshape(lax.transpose(a, kept + axes), kept_shape + (n,)))
    out_shape = tuple(1 if d in axes else a.shape[d] for d in range(a.ndim)) if keepdims else kept_shape
    if q.ndim == 0:
        return lax.reshape(row_quantile(prepared, q), out_shape)
    if q.shape[0] == 0:
        return lax.broadcast_in_dim(_full_scalar(np.nan, a.dtype), (0,) + out_shape, ())
    results = [row_quantile(prepared, lax.index_in_dim(q, i, keepdims=False)) for i in range(q.shape[0])]
    return lax.concatenate([lax.reshape(r, (1,) + out_shape) for r in results], 0)


def _sorted_quantile(values: Any, q: Any, method: str) -> Any:
    """One quantile (a scalar ``q``) of each row of ``values``, sorted along its last axis."""
    n = values.shape[-1]
    position = lax.mul(q, _full_scalar(n - 1, q.dtype))
    low = lax.clamp(_full_scalar(0, q.dtype), lax.floor(position), _full_scalar(n - 1, q.dtype))
    high = lax.clamp(_full_scalar(0, q.dtype), lax.ceil(position), _full_scalar(n - 1, q.dtype))
    low_value, high_value = (
        lax.dynamic_index_in_dim(values, lax.convert_element_type(i, dtypes.int32), values.ndim - 1, False)
        for i in (low, high))
    return interpolate(low_value, high_value, lax.sub(position, lax.floor(position)), method)


def interpolate(low: Any, high: Any, high_weight: Any, method: str) -> Any:
    """A quantile between its neighbouring sorted values ``low`` and ``high``, ``high_weight``
    of the way from one to the other, as ``method`` says."""
    if method == "lower":
        return low
    if method == "higher":
        return high
    dt = high_weight.dtype
    if method == "nearest":  # ties go to the lower value, as in JAX
        return _where(lax.le(high_weight, _full_scalar(0.5, dt)), low, high)
    if method == "midpoint":
        return lax.mul(lax.add(low, high), _full_scalar(0.5, dt))
    low_weight = lax.sub(_full_scalar(1, dt), high_weight)
    return lax.add(lax.mul(low, low_weight), lax.mul(high, high_weight))


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False) -> Any:
    """``quantile`` with ``q`` in percent (``0 <= q <= 100``)."""
    # A weak 100: a Python ``q`` stays weakly typed, so float16 data keep their type (as in JAX).
    return quantile(a, true_divide(q, 100), axis, out, overwrite_input, method, keepdims)


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Any:
    """The middle value over ``axis`` (the mean of the two middle values for even counts)."""
    return quantile(a, 0.5, axis, out, overwrite_input, "midpoint", keepdims)
