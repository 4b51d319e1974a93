"""The jnp index functions: take, take_along_axis, nonzero, where-style selection, index grids.

They share the gather machinery of ``ember.numpy.indexing`` (reads clamp, as in JAX).
"""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from ember import dtypes, lax
from ember.core.avals import ShapedArray
from ember.lax.base import aval, canonical_axes
from ember.lax.indexing import GatherDimensionNumbers, GatherScatterMode
from ember.numpy.core import asarray, broadcast_shapes, broadcast_to, ensure_array, promote_dtypes

# The gather / scatter machinery shared with x[idx] and x.at[idx]; nonzero lives there too (see indexing).
from ember.numpy.indexing import (
    _check_nonempty_axis,
    _concrete,
    _filled,
    _index_dtype,
    _normalize,
    _ravel,
    _take,
    nonzero,
)
from ember.numpy.ufuncs import add, clip, divmod as _divmod, multiply, remainder

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


def _take_mode(mode: str | None) -> tuple[GatherScatterMode, bool]:
    """jnp.take's mode: (gather mode, whether negative indices wrap)."""
    if mode is None or mode == "fill":
        return GatherScatterMode.FILL_OR_DROP, True
    if mode == "clip":
        return GatherScatterMode.CLIP, False
    if mode == "wrap":
        return GatherScatterMode.PROMISE_IN_BOUNDS, False
    if mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.take is not supported (it would need a runtime "
                                  "check); use mode='fill', 'clip' or 'wrap'.")
    raise ValueError(f"Invalid mode {mode!r} for jnp.take; expected 'fill', 'clip', 'wrap' or None")


def take(a: Any, indices: Any, axis: int | None = None, out: None = None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """Elements of ``a`` at ``indices`` along ``axis`` (``a`` flattened if None).

    By default (``mode='fill'``) out-of-bounds indices give ``fill_value`` (NaN for floats);
    ``'clip'`` clamps and ``'wrap'`` wraps around.
    """
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
    a = ensure_array(a)
    indices = _integer_array(indices, "jnp.take indices")
    if axis is None:
        a, axis = _ravel(a), 0
    axis = canonical_axes(axis, a.ndim)[0]
    n = a.shape[axis]
    out_shape = a.shape[:axis] + indices.shape + a.shape[axis + 1:]
    gather_mode, wrap_negative = _take_mode(mode)
    if n == 0 and indices.size:
        raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")
    if 0 in out_shape:
        return _filled(aval(a)._replace(shape=out_shape), 0)
    if mode == "wrap":
        indices = remainder(indices, n)
    index = tuple(slice(None) for _ in range(axis)) + (indices,)
    return _take(a, index, mode=gather_mode, fill_value=fill_value, wrap_negative=wrap_negative,
                 indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)


def take_along_axis(arr: Any, indices: Any, axis: int | None, mode: str | None = None,
                    fill_value: Any = None) -> Any:
    """``arr`` indexed along ``axis`` by ``indices`` of the same rank (other dimensions broadcast),
    e.g. with the result of ``argsort``. Out-of-bounds indices give ``fill_value`` unless ``mode='clip'``."""
    arr = ensure_array(arr)
    indices = _integer_array(indices, "take_along_axis indices")
    if axis is None:
        if indices.ndim != 1:
            raise ValueError(f"when axis=None, indices must have a single dimension, got shape {indices.shape}")
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
    if 0 in out_shape:
        return _filled(aval(arr)._replace(shape=out_shape), 0)
    _check_nonempty_axis(arr.shape[axis], axis)
    arr = broadcast_to(arr, batch_shape[:axis] + (arr.shape[axis],) + batch_shape[axis:])
    indices = _normalize(broadcast_to(indices, out_shape), arr.shape[axis],
                         gather_mode != GatherScatterMode.PROMISE_IN_BOUNDS)
    batch_dims = tuple(d for d in range(arr.ndim) if d != axis)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,), start_index_map=(axis,),
                                   operand_batching_dims=batch_dims, start_indices_batching_dims=batch_dims)
    return lax.gather(arr, lax.expand_dims(ensure_array(indices), (arr.ndim,)), dnums, (1,) * arr.ndim,
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
    """Open mesh from 1-D index sequences: ``x[ix_(rows, cols)]`` selects a sub-grid."""
    out = []
    for i, a in enumerate(args):
        a = asarray(a, _index_dtype()) if isinstance(a, (list, tuple)) and not a else ensure_array(a)
        if a.ndim != 1:
            raise ValueError(f"Arguments to jnp.ix_ must be 1-dimensional, got shape {a.shape}")
        if a.dtype == dtypes.bool_:
            a = nonzero(a)[0]
        elif a.dtype not in dtypes.INTEGER:
            raise TypeError(f"Arguments to jnp.ix_ must be integer or boolean, got dtype {a.dtype}")
        shape = [1] * len(args)
        shape[i] = a.shape[0]
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
    if not condlist:
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
