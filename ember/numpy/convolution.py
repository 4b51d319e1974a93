"""One-dimensional discrete convolution and cross-correlation: ``jnp.convolve``, ``jnp.correlate``.

Both are a sliding dot product of the longer input with the shorter one. ember has no
convolution primitive, so the windows of the zero-padded longer input are gathered into a
``(outputs, taps)`` matrix and multiplied with the taps by one ``dot``: differentiable in both
inputs, and fast where ``dot`` is.
"""
from __future__ import annotations

from typing import Any

from ember import dtypes, lax
from ember.numpy.core import ensure_array, promote_dtypes, promote_dtypes_inexact
from ember.numpy.linalg import dot

__all__ = ["convolve", "correlate"]

_MODES = ("full", "same", "valid")


def convolve(a: Any, v: Any, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Any:
    """``c[k] = sum_j a[k - j] * v[j]`` for 1-D ``a`` and ``v``. ``mode``: ``'full'`` (every
    overlap), ``'same'`` (centred, as long as the longer input) or ``'valid'`` (full overlaps)."""
    a, v = _operands("convolve", a, v, preferred_element_type)
    if a.shape[0] < v.shape[0]:  # convolution commutes; slide the shorter input
        a, v = v, a
    return _sliding_dot(a, lax.rev(v, (0,)), mode, precision, preferred_element_type)


def correlate(a: Any, v: Any, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    """``c[k] = sum_j a[k + j] * v[j]`` for 1-D ``a`` and ``v``; ``mode`` as for ``convolve``
    (default ``'valid'``)."""
    a, v = _operands("correlate", a, v, preferred_element_type)
    v = lax.conj(v) if dtypes.is_complex(v.dtype) else v  # (NumPy's and JAX's correlation conjugates v)
    if a.shape[0] < v.shape[0]:  # correlating the other way round reverses the result
        return lax.rev(_sliding_dot(v, a, mode, precision, preferred_element_type), (0,))
    return _sliding_dot(a, v, mode, precision, preferred_element_type)


def _operands(name: str, a: Any, v: Any, preferred_element_type: Any) -> tuple[Any, Any]:
    """Both inputs checked and promoted: to an inexact type, as NumPy computes, unless a result
    type is asked for."""
    a, v = ensure_array(a), ensure_array(v)
    if a.ndim != 1 or v.ndim != 1:
        raise ValueError(f"jnp.{name} only supports 1-dimensional inputs; got shapes {a.shape} and {v.shape}.")
    if a.shape[0] == 0 or v.shape[0] == 0:
        raise ValueError(f"jnp.{name}: inputs cannot be empty, got shapes {a.shape} and {v.shape}.")
    return tuple(promote_dtypes_inexact(a, v) if preferred_element_type is None else promote_dtypes(a, v))


def _sliding_dot(signal: Any, taps: Any, mode: str, precision: Any, preferred_element_type: Any) -> Any:
    """``out[k] = sum_j padded[k + j] * taps[j]``, ``signal`` zero-padded as ``mode`` says."""
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {list(_MODES)}, got {mode!r}")
    m = taps.shape[0]
    low, high = {"full": (m - 1, m - 1), "same": (m // 2, m - 1 - m // 2), "valid": (0, 0)}[mode]
    padded = lax.pad(signal, 0, [(low, high, 0)])
    shape = (padded.shape[0] - m + 1, m)
    window_index = lax.add(lax.broadcasted_iota(dtypes.int32, shape, 0), lax.broadcasted_iota(dtypes.int32, shape, 1))
    return dot(padded[window_index], taps, precision=precision, preferred_element_type=preferred_element_type)
