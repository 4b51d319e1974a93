"""Array predicates, conversions and pure "in-place" updates: ``array_equal``, ``array_equiv``,
``astype``, ``diagflat``, ``isscalar``, ``iterable``, ``matvec``, ``vecmat``, ``rollaxis``,
``fill_diagonal``, ``put`` and ``place``.

JAX arrays are immutable, so the NumPy functions that write in place exist only in their
``inplace=False`` form, which returns the updated copy.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.lax.base import aval
from ember.numpy import array_api
from ember.numpy.core import asarray, broadcast_shapes, ensure_array, is_array, promote_dtypes
from ember.numpy.linalg import diag, matmul
from ember.numpy.reductions import all as _all, cumsum
from ember.numpy.shape_ops import moveaxis, ravel, reshape, tile
from ember.numpy.ufuncs import conj, equal, isnan, where

__all__ = ["array_equal", "array_equiv", "astype", "diagflat", "fill_diagonal", "iscomplexobj", "isrealobj",
           "isscalar", "iterable", "matvec", "place", "put", "rollaxis", "vecmat"]


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    """Whether ``a1`` and ``a2`` have the same shape and elements (a bool array scalar)."""
    a1, a2 = ensure_array(a1), ensure_array(a2)
    if a1.shape != a2.shape:
        return asarray(False)
    a1, a2 = promote_dtypes(a1, a2)
    equal = lax.eq(a1, a2)
    if equal_nan:
        equal = equal | (isnan(a1) & isnan(a2))
    return _all(equal)


def array_equiv(a1: Any, a2: Any) -> Any:
    """Whether ``a1`` and ``a2`` are equal after broadcasting (False if they do not broadcast)."""
    a1, a2 = ensure_array(a1), ensure_array(a2)
    try:
        broadcast_shapes(a1.shape, a2.shape)
    except ValueError:
        return asarray(False)
    return _all(equal(a1, a2))


def astype(x: Any, dtype: Any, /, *, copy: bool = False, device: Any = None) -> Any:
    """``x`` converted to ``dtype`` (None: the default float type). Complex to real keeps the real
    part, with JAX's DeprecationWarning. A typed key array converts only to its own key type."""
    source = getattr(x, "dtype", None)
    if isinstance(source, dtypes.KeyTy) or isinstance(dtype, dtypes.KeyTy):
        if dtype != source:
            target = dtype if isinstance(dtype, dtypes.KeyTy) else dtypes.dtype(dtype)
            raise ValueError(f"Cannot convert_element_type from {source} to {target}")
        return array_api.place(x, device)
    dtype = dtypes.default_float_dtype() if dtype is None else dtypes.requested_dtype(dtype)
    x = ensure_array(x)
    if dtypes.is_complex(aval(x).dtype) and not dtypes.is_complex(dtype):
        warnings.warn("Casting from complex to real dtypes will soon raise a ValueError. Please first use "
                      "jnp.real or jnp.imag to take the real/imaginary component of your input.",
                      DeprecationWarning, stacklevel=2)
        x = lax.ne(x, 0) if dtype == dtypes.bool_ else lax.real(x)
    return array_api.place(lax.convert_element_type(x, dtype), device)


def diagflat(v: Any, k: int = 0) -> Any:
    """A 2-D array with the flattened ``v`` on its ``k``-th diagonal."""
    return diag(ravel(ensure_array(v)), k)


def isscalar(element: Any) -> bool:
    """True for Python and NumPy scalars and for rank-0 arrays (as JAX)."""
    if hasattr(element, "__jax_array__"):
        element = element.__jax_array__()
    if is_array(element):
        return element.ndim == 0
    return isinstance(element, (bool, int, float, complex)) or np.isscalar(element) and not isinstance(
        element, (str, bytes))


def iscomplexobj(x: Any) -> bool:
    """Whether ``x``'s dtype is complex (by type alone, as NumPy: no element is looked at)."""
    if x is None:
        return False
    dtype = getattr(x, "dtype", None)
    return np.issubdtype(dtype if dtype is not None else np.asarray(x).dtype, np.complexfloating)  # (lists too)


def isrealobj(x: Any) -> bool:
    """Whether ``x``'s dtype is not complex."""
    return not iscomplexobj(x)


def iterable(y: Any) -> bool:
    """Whether ``iter(y)`` works."""
    return np.iterable(y)


def matvec(x1: Any, x2: Any, /) -> Any:
    """Batched matrix-vector product: ``(..., m, n) @ (..., n) -> (..., m)``."""
    x2 = ensure_array(x2)
    return matmul(x1, lax.expand_dims(x2, (x2.ndim,)))[..., 0]


def vecmat(x1: Any, x2: Any, /) -> Any:
    """Batched vector-matrix product: ``(..., n) @ (..., n, m) -> (..., m)``; a complex vector is
    conjugated (as JAX and NumPy)."""
    x1 = conj(ensure_array(x1))
    return matmul(lax.expand_dims(x1, (x1.ndim - 1,)), x2)[..., 0, :]


def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """Move ``axis`` so that it comes before the axis now at ``start`` (NumPy's ``rollaxis``)."""
    a = ensure_array(a)
    axis = axis + a.ndim if axis < 0 else axis
    start = start + a.ndim if start < 0 else start
    if not 0 <= axis < a.ndim or not 0 <= start <= a.ndim:
        raise ValueError(f"rollaxis: axis={axis} or start={start} out of range for an array of rank {a.ndim}")
    return moveaxis(a, axis, start - 1 if start > axis else start)


def _refuse_inplace(inplace: bool, name: str) -> None:
    if inplace:
        raise ValueError(f"jax.numpy.{name} cannot modify arrays in-place, because JAX arrays are immutable. "
                         "Pass inplace=False to instead return an updated array.")


def _cycled(values: Any, n: int, dtype: Any) -> Any:
    """The flattened ``values`` repeated cyclically to length ``n`` (NumPy's rule for ``put``)."""
    flat = ravel(lax.convert_element_type(ensure_array(values), dtype))
    if flat.size == 0 or n == 0:
        return lax.slice_in_dim(tile(flat, 1), 0, 0) if n == 0 else flat
    return lax.slice_in_dim(tile(flat, -(-n // flat.size)), 0, n)


def fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True) -> Any:
    """``a`` with its main diagonal set to ``val`` (cycled); ``a`` is 2-D or has equal dims.
    ``wrap`` restarts the diagonal below a tall matrix's square part, as in NumPy."""
    _refuse_inplace(inplace, "fill_diagonal")
    a = ensure_array(a)
    if a.ndim < 2 or (a.ndim > 2 and len(set(a.shape)) != 1):
        raise ValueError(f"fill_diagonal: array must be at least 2-d and, above 2-d, have all dimensions equal; "
                         f"got shape {a.shape}")
    step = a.shape[1] + 1 if a.ndim == 2 else 1 + int(np.cumprod(a.shape[:-1]).sum())
    end = a.size if (wrap or a.ndim > 2) else min(a.size, a.shape[1] * a.shape[1])
    positions = np.arange(0, end, step, dtype=np.int32)
    flat = ravel(a).at[positions].set(_cycled(val, len(positions), a.dtype))
    return reshape(flat, a.shape)


def put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True) -> Any:
    """``a`` with the flat positions ``ind`` set to ``v`` (cycled); ``mode`` is ``"fill"``
    (default: out-of-range indices are dropped), ``"clip"`` or ``"wrap"``."""
    _refuse_inplace(inplace, "put")
    a, ind = ensure_array(a), ravel(ensure_array(ind))
    if mode not in (None, "fill", "clip", "wrap"):
        raise ValueError(f"jnp.put: mode must be 'fill', 'clip' or 'wrap', got {mode!r}")
    values = _cycled(v, ind.size, a.dtype)
    if mode == "wrap":
        ind = lax.rem(lax.add(lax.rem(ind, lax.convert_element_type(a.size, ind.dtype)),
                              lax.convert_element_type(a.size, ind.dtype)), lax.convert_element_type(a.size, ind.dtype))
    scatter_mode = "clip" if mode == "clip" else "drop"
    return reshape(ravel(a).at[ind].set(values, mode=scatter_mode), a.shape)


def place(arr: Any, mask: Any, vals: Any, *, inplace: bool = True) -> Any:
    """``arr`` with the positions where ``mask`` is true set to successive ``vals`` (cycled)."""
    _refuse_inplace(inplace, "place")
    arr = ensure_array(arr)
    flat_mask = ravel(lax.ne(ensure_array(mask), lax.convert_element_type(0, ensure_array(mask).dtype)))
    vals = ravel(lax.convert_element_type(ensure_array(vals), arr.dtype))
    if vals.size == 0:
        return arr
    slot = lax.rem(lax.sub(cumsum(flat_mask, dtype=np.int32), lax.convert_element_type(1, np.int32)),
                   lax.convert_element_type(vals.size, np.int32))
    slot = lax.max(slot, lax.convert_element_type(0, np.int32))
    return reshape(where(flat_mask, vals[slot], ravel(arr)), arr.shape)


