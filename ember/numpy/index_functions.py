"""The jnp index functions: take, take_along_axis, nonzero, where-style selection, index grids.

They share the index arithmetic of ``ember.numpy.indexing``; take and take_along_axis build their
own gathers, as JAX's do, so that each treats an index's type as JAX's does (take keeps it,
take_along_axis casts to int32 first).
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ember import dtypes, lax
from ember.core.avals import ShapedArray
from ember.core.trace import Tracer
from ember.lax.base import aval, canonical_axes
from ember.lax.indexing import GatherDimensionNumbers, GatherScatterMode
from ember.numpy.core import asarray, broadcast_shapes, broadcast_to, ensure_array, promote_dtypes

# The gather / scatter machinery shared with x[idx] and x.at[idx]; nonzero lives there too (see indexing).
from ember.numpy.indexing import (
    _concrete,
    _filled,
    _gather_index_dtype,
    _index_dtype,
    _normalize,
    _ravel,
    nonzero,
)
from ember.numpy.staging import staged
from ember.numpy.ufuncs import add, clip, divmod as _divmod, multiply, remainder, where

__all__ = [
    "argwhere", "choose", "compress", "diag_indices", "diag_indices_from", "extract", "flatnonzero", "ix_",
    "nonzero", "ravel_multi_index", "select", "take", "take_along_axis", "tril_indices", "tril_indices_from",
    "triu_indices", "triu_indices_from", "unravel_index",
]


# --- jnp index functions ------------------------------------------------------------------------------
def _integer_array(x: Any, what: str) -> Any:
    x = ensure_array(x)
    if x.dtype not in dtypes.INTEGER:
        raise TypeError(f"{what} must be an integer array, got dtype {x.dtype}")
    return x


def take(a: Any, indices: Any, axis: int | None = None, out: None = None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """Elements of ``a`` at ``indices`` along ``axis`` (``a`` flattened if None).

    By default (``mode='fill'``) out-of-bounds indices give ``fill_value`` (NaN for floats);
    ``'clip'`` clamps and ``'wrap'`` wraps around. As in JAX, the indices keep their own integer
    type (a uint32 index is never negative), and only 'fill' counts negative ones from the end.
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
    a, indices = ensure_array(a), ensure_array(indices)
    if indices.dtype == dtypes.bool_ and mode in (None, "fill", "wrap"):  # (JAX's arithmetic makes them int32)
        indices = lax.convert_element_type(indices, _index_dtype())
    if indices.dtype not in dtypes.INTEGER:
        raise ValueError("indices must have an integer type")  # (lax.gather's error in JAX)
    if axis is None:
        a, axis = _ravel(a), 0
    axis = canonical_axes(axis, a.ndim)[0]
    n = a.shape[axis]
    if mode is None or mode == "fill":
        gather_mode = GatherScatterMode.FILL_OR_DROP
        if dtypes.is_signed(indices.dtype) and not isinstance(indices, Tracer):  # (unsigned ones never wrap)
            values = np.asarray(indices).astype(_wide_index_dtype(indices.dtype))
            indices = asarray(np.where(values < 0, values + n, values).astype(values.dtype))
        elif dtypes.is_signed(indices.dtype):
            indices = lax.convert_element_type(indices, _wide_index_dtype(indices.dtype))
            indices = where(lax.lt(indices, 0), lax.add(indices, n), indices)
        if fill_value is None:  # (the default written out, as JAX's take writes it)
            fill_value = _default_fill(a.dtype)
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.take is not supported (it would need a runtime "
                                  "check); use mode='fill', 'clip' or 'wrap'.")
    elif mode == "wrap":
        gather_mode = GatherScatterMode.PROMISE_IN_BOUNDS
        indices = remainder(indices, lax.convert_element_type(max(n, 1), indices.dtype))
    elif mode == "clip":
        gather_mode = GatherScatterMode.CLIP
    else:
        raise ValueError(f"Invalid mode {mode!r} for np.take")
    out_shape = a.shape[:axis] + indices.shape + a.shape[axis + 1:]
    if n == 0 and indices.size:
        raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
    if 0 in out_shape:
        return _filled(aval(a)._replace(shape=out_shape), 0)
    slice_sizes = a.shape[:axis] + (1,) + a.shape[axis + 1:]
    dnums = GatherDimensionNumbers(
        offset_dims=tuple(range(axis)) + tuple(range(axis + indices.ndim, a.ndim + indices.ndim - 1)),
        collapsed_slice_dims=(axis,), start_index_map=(axis,))
    return lax.gather(a, lax.expand_dims(indices, (indices.ndim,)), dnums, slice_sizes, mode=gather_mode,
                      fill_value=fill_value, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)


def _default_fill(dtype: np.dtype) -> Any:
    """What an out-of-bounds index of ``take`` gives: NaN for inexact types, the most negative
    value for signed integers, the largest for unsigned ones, True for booleans."""
    if dtypes.is_inexact(dtype):
        return float("nan") if not dtypes.is_complex(dtype) else complex(float("nan"), float("nan"))
    if dtype == dtypes.bool_:
        return True
    info = np.iinfo(dtype)
    return int(info.min if dtypes.is_signed(dtype) else info.max)


def _wide_index_dtype(dtype: np.dtype) -> np.dtype:
    """A type that holds ``dtype``'s values plus an axis length exactly (signed ones widen to int32,
    where JAX adds the length in the index's own type and can overflow)."""
    return dtype if dtypes.is_unsigned(dtype) or dtype.itemsize >= 4 else np.dtype(dtypes.int32)


@staged("take_along_axis", ("axis", "mode", "fill_value", "wrap_negative_indices"))
def take_along_axis(arr: Any, indices: Any, axis: int | None, mode: str | None = None,
                    fill_value: Any = None, *, wrap_negative_indices: bool | None = None) -> Any:
    """``arr`` indexed along ``axis`` by ``indices`` of the same rank (other dimensions broadcast),
    e.g. with the result of ``argsort``. Out-of-bounds indices give ``fill_value`` unless ``mode='clip'``.

    As JAX does, indices that wrap (by default, unless ``mode='promise_in_bounds'``) are first cast
    to the int32 index type, so a uint32 index of 2**31 or more counts from the end.
    """
    arr, indices = ensure_array(arr), ensure_array(indices)
    if indices.dtype not in dtypes.INTEGER:
        raise TypeError(f"take_along_axis indices must be of integer type, got {indices.dtype}")
    if axis is None:
        if indices.ndim != 1:
            raise ValueError(f"take_along_axis indices must be 1D if axis=None, got shape {indices.shape}")
        arr, axis = _ravel(arr), 0
    if arr.ndim != indices.ndim:
        raise ValueError(f"indices and arr must have the same number of dimensions; {indices.ndim} vs. {arr.ndim}")
    axis = canonical_axes(axis, arr.ndim)[0]
    gather_mode = GatherScatterMode.from_any("fill" if mode is None else mode)
    try:
        batch_shape = broadcast_shapes(*(tuple(s for d, s in enumerate(x.shape) if d != axis) for x in (arr, indices)))
    except ValueError:
        raise ValueError(f"take_along_axis: indices of shape {indices.shape} do not broadcast with arr of shape "
                         f"{arr.shape} outside axis {axis}") from None
    out_shape = batch_shape[:axis] + (indices.shape[axis],) + batch_shape[axis:]
    if 0 in out_shape or arr.shape[axis] == 0:  # (an empty axis gives zeros, as in JAX)
        return _filled(aval(arr)._replace(shape=out_shape), 0)
    arr = broadcast_to(arr, batch_shape[:axis] + (arr.shape[axis],) + batch_shape[axis:])
    if wrap_negative_indices is None:
        wrap_negative_indices = gather_mode != GatherScatterMode.PROMISE_IN_BOUNDS
    indices = broadcast_to(indices, out_shape)
    if wrap_negative_indices:
        index_dtype = _gather_index_dtype(arr.shape[axis:axis + 1])
        indices = _normalize(lax.convert_element_type(indices, index_dtype), arr.shape[axis], True, index_dtype)
    batch_dims = tuple(d for d in range(arr.ndim) if d != axis)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,), start_index_map=(axis,),
                                   operand_batching_dims=batch_dims, start_indices_batching_dims=batch_dims)
    if fill_value is None and gather_mode == GatherScatterMode.FILL_OR_DROP:
        fill_value = _default_fill(arr.dtype)
    indices = ensure_array(indices)
    return lax.gather(arr, lax.reshape(indices, indices.shape + (1,)), dnums, (1,) * arr.ndim,
                      mode=gather_mode, fill_value=fill_value)


def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Indices of the nonzero elements of ``ravel(a)`` (see ``nonzero`` for ``size``)."""
    return nonzero(_ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """Indices of the nonzero elements as rows: shape ``(count, a.ndim)``."""
    a = ensure_array(a)
    columns = nonzero(a if a.ndim else _ravel(a), size=size, fill_value=fill_value)
    count = aval(columns[0]).shape[0]
    if a.ndim == 0:
        return _filled(ShapedArray((count, 0), aval(columns[0]).dtype), 0)
    return lax.concatenate([lax.reshape(c, (count, 1)) for c in columns], 1)


def diag_indices(n: int, ndim: int = 2) -> tuple[Any, ...]:
    """Indices of the main diagonal of an ``(n,) * ndim`` array."""
    n, ndim = operator.index(n), operator.index(ndim)
    if n < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    if ndim < 0:
        raise ValueError(f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    return (lax.iota(_index_dtype(), n),) * ndim


def diag_indices_from(arr: Any) -> tuple[Any, ...]:
    shape = aval(ensure_array(arr)).shape
    if len(shape) < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError(f"All dimensions of input must be of equal length, got shape {shape}")
    return diag_indices(shape[0], len(shape))


def _static_indices(values: tuple[np.ndarray, ...]) -> tuple[Any, ...]:
    return tuple(asarray(v.astype(_index_dtype())) for v in values)


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """Row and column indices of the lower triangle of an ``(n, m)`` array (static)."""
    return _static_indices(np.tril_indices(operator.index(n), operator.index(k), m and operator.index(m)))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """Row and column indices of the upper triangle of an ``(n, m)`` array (static)."""
    return _static_indices(np.triu_indices(operator.index(n), operator.index(k), m and operator.index(m)))


def _shape_2d(arr: Any, name: str) -> tuple[int, int]:
    shape = aval(ensure_array(arr)).shape
    if len(shape) != 2:
        raise ValueError(f"{name}: input array must be 2-d, got shape {shape}")
    return shape


def tril_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    n, m = _shape_2d(arr, "tril_indices_from")
    return tril_indices(n, k, m)


def triu_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    n, m = _shape_2d(arr, "triu_indices_from")
    return triu_indices(n, k, m)


def ix_(*args: Any) -> tuple[Any, ...]:
    """Open mesh from 1-D index arrays: ``x[ix_(rows, cols)]`` selects a sub-grid. As in JAX, any
    numeric type passes through (``x[...]`` refuses floats later) and booleans are not implemented."""
    out = []
    for i, a in enumerate(args):
        a = ensure_array(a)
        if a.ndim != 1:
            raise ValueError(f"Arguments to jax.numpy.ix_ must be 1-dimensional, got shape {a.shape}")
        if a.dtype == dtypes.bool_:
            raise NotImplementedError("Boolean arguments to jax.numpy.ix_ are not implemented")
        shape = [1] * len(args)
        shape[i] = a.shape[0]
        if a.size == 0:  # (an empty index has the integer index type, as NumPy's)
            a = lax.convert_element_type(a, _index_dtype())
        out.append(lax.reshape(a, shape))
    return tuple(out)


def unravel_index(indices: Any, shape: Sequence[int]) -> tuple[Any, ...]:
    """Flat indices into coordinate arrays for ``shape``. As in JAX, negative indices count from the
    end and out-of-bounds indices are clamped (NumPy raises)."""
    indices = _integer_array(indices, "unravel_index indices")
    shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
    coordinates: list[Any] = [0] * len(shape)
    rest = indices
    for i in reversed(range(len(shape))):
        rest, coordinates[i] = _divmod(rest, operator.index(shape[i]))
    too_high = lax.gt(rest, lax.convert_element_type(0, rest.dtype))
    too_low = lax.lt(rest, lax.convert_element_type(-1, rest.dtype)) if dtypes.is_signed(rest.dtype) else None
    out = []
    for n, c in zip(shape, coordinates):
        c = lax.select(too_high, lax.convert_element_type(n - 1, c.dtype), c)
        out.append(c if too_low is None else lax.select(too_low, lax.convert_element_type(0, c.dtype), c))
    return tuple(out)


def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise",
                      order: str = "C") -> Any:
    """Coordinate arrays into flat indices for an array of shape ``dims``. ``mode='raise'`` needs
    concrete indices (it checks bounds now); 'clip' and 'wrap' work under jit."""
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for {len(dims)} dimensions")
    dims = tuple(operator.index(d) for d in dims)
    arrays = [_integer_array(i, "ravel_multi_index indices") for i in multi_index]
    if mode == "raise":
        for i, n in zip(arrays, dims):
            value = _concrete(i, "ravel_multi_index with mode='raise' (use mode='clip' or 'wrap' under jit)")
            if np.any((value < 0) | (value >= n)):
                raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        arrays = [clip(i, 0, n - 1) for i, n in zip(arrays, dims)]
    elif mode == "wrap":
        arrays = [remainder(i, n) for i, n in zip(arrays, dims)]
    else:
        raise ValueError(f"invalid mode={mode!r}; expected 'raise', 'wrap' or 'clip'")
    if order not in ("C", "F"):
        raise ValueError(f"invalid order={order!r}; expected 'C' or 'F'")
    strides = np.cumprod((1,) + (dims[1:][::-1] if order == "C" else dims[:-1]))
    strides = strides[::-1] if order == "C" else strides
    out_dtype = dtypes.result_type(int, *arrays)
    result = lax.convert_element_type(0, out_dtype)
    for i, stride in zip(arrays, strides):
        result = add(result, multiply(lax.convert_element_type(i, out_dtype), int(stride)))
    return result


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """Elementwise: the choice of the first true condition, else ``default``."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"condlist must have length equal to choicelist ({len(condlist)} vs {len(choicelist)})")
    if len(condlist) == 0:  # (an array of conditions is a sequence too: not ``not condlist``)
        raise ValueError("condlist must be non-empty")
    conditions = [ensure_array(c) for c in condlist]
    conditions = [c if c.dtype == dtypes.bool_ else lax.ne(c, lax.convert_element_type(0, c.dtype))
                  for c in conditions]
    default, *choices = promote_dtypes(default, *choicelist)
    shape = broadcast_shapes(*(aval(v).shape for v in (*conditions, default, *choices)))
    result = broadcast_to(default, shape)
    for condition, choice in reversed(list(zip(conditions, choices))):
        result = lax.select(broadcast_to(condition, shape), broadcast_to(choice, shape), result)
    return result


def choose(a: Any, choices: Sequence[Any], out: None = None, mode: str = "raise") -> Any:
    """``choices[a[i]][i]`` elementwise (all broadcast together)."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.choose is not supported.")
    a = ensure_array(a)
    if a.dtype not in dtypes.INTEGER:
        raise ValueError("`a` array must be integer typed")
    choices = list(choices)
    n = len(choices)
    if mode == "raise":
        value = _concrete(a, "jnp.choose with mode='raise' (use mode='wrap' or mode='clip' under jit)")
        if np.any((value < 0) | (value >= n)):
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        a = remainder(a, n)
    elif mode == "clip":
        a = lax.clamp(lax.convert_element_type(0, a.dtype), a, lax.convert_element_type(n - 1, a.dtype))
    else:
        raise ValueError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    choices = promote_dtypes(*choices) if n > 1 else [ensure_array(choices[0])]
    shape = broadcast_shapes(a.shape, *(aval(c).shape for c in choices))
    return lax.select_n(broadcast_to(a, shape), *(broadcast_to(c, shape) for c in choices))


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None, fill_value: Any = 0,
             out: None = None) -> Any:
    """The slices of ``a`` along ``axis`` where ``condition`` is true. Without ``size`` the condition
    must be concrete; with it the result has ``size`` slices, padded with ``fill_value``."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.compress is not supported.")
    condition = ensure_array(condition)
    if condition.ndim != 1:
        raise ValueError(f"condition must be a 1D array, got shape {condition.shape}")
    a = ensure_array(a)
    if axis is None:
        a, axis = _ravel(a), 0
    axis = canonical_axes(axis, a.ndim)[0]
    n = a.shape[axis]
    if size is None:
        value = _concrete(condition, "jnp.compress without size= (the result's length must be known while "
                                     "tracing)").astype(bool)
        if value[n:].any():
            raise ValueError("condition contains entries that are out of bounds")
        return take(a, np.nonzero(value[:n])[0], axis=axis)
    if not 0 <= size <= n:
        raise ValueError(f"size must be positive and not greater than the size of the array axis; got size={size} "
                         f"for a.shape[axis]={n}")
    selected = nonzero(condition[:n], size=size, fill_value=n)[0]
    return take(a, selected, axis=axis, mode="fill", fill_value=fill_value)


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Any:
    """The elements of ``arr`` where ``condition`` is true (both flattened); see ``compress``."""
    return compress(_ravel(condition), _ravel(arr), size=size, fill_value=fill_value)
