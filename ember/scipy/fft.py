"""Discrete cosine transforms with SciPy's conventions (``jax.scipy.fft``), on ``jnp.fft``.

A DCT of length ``N`` is one complex FFT of the same length (Makhoul's reordering): the type-2
transform reads the even samples forwards and the odd ones backwards, transforms, and turns
each bin ``k`` by ``exp(-i pi k / 2N)``; its inverse (the type-3 transform) turns the bins back,
transforms and undoes the reordering. Multi-axis transforms are separable: one axis at a time.

``type`` 2 is JAX's only type; type 3 (the type-2 transform's inverse up to scale) is here too,
since it costs nothing more. ``norm`` is SciPy's: ``None``/``"backward"`` (the forward transform
unscaled, the inverse by ``1 / 2N``), ``"ortho"`` (both orthonormal) and ``"forward"``. Real and
integer input gives the default float (float32 unless x64; narrower floats widen, as JAX's FFT
does), complex input is transformed in its real and imaginary parts.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from ember import dtypes, lax
from ember.lax.base import aval
from ember.numpy import fft as jnp_fft
from ember.numpy.arraylike import check_arraylike
from ember.numpy.core import ensure_array, promote_dtypes_inexact

__all__ = ["dct", "idct", "dctn", "idctn"]

_NORMS = (None, "backward", "ortho", "forward")


def _check(name: str, x: Any, type: int, norm: Any) -> Any:
    check_arraylike(name, x)
    if type not in (2, 3):
        raise NotImplementedError(f"Only DCT types 2 and 3 are implemented; got type {type!r}.")
    if not any(norm is n or (isinstance(norm, str) and norm == n) for n in _NORMS):
        raise ValueError(f"jax.scipy.fft.{name}: {norm=!r} is not implemented")
    return ensure_array(x)


def _axis(axis: Any, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def _resize(x: Any, sizes: dict[int, int]) -> Any:
    """``x`` cropped or zero-padded at the end of each axis in ``sizes`` ({axis: length})."""
    shape = aval(x).shape
    if all(shape[ax] == n for ax, n in sizes.items()):
        return x
    for n in sizes.values():
        if operator.index(n) < 1:
            raise ValueError(f"invalid number of data points ({n}) specified")
    config = [(0, sizes[ax] - shape[ax] if ax in sizes else 0, 0) for ax in range(len(shape))]
    return lax.pad(x, np.zeros((), aval(x).dtype), config)


def _along(values: Sequence[float], axis: int, ndim: int, dtype: Any) -> Any:
    """A host vector shaped to broadcast along ``axis`` of an ``ndim``-dimensional array."""
    shape = [1] * ndim
    shape[axis] = len(values)
    return np.asarray(values, dtype).reshape(shape)


def _twiddle(n: int, axis: int, ndim: int, dtype: Any) -> Any:
    """``exp(-i pi k / 2n)`` for ``k < n``, along ``axis``, computed on the host in double precision."""
    return _along(np.exp(-0.5j * np.pi * np.arange(n) / n), axis, ndim, dtype)


def _reorder(x: Any, axis: int) -> Any:
    """The even-indexed samples, then the odd-indexed ones reversed."""
    n = aval(x).shape[axis]
    evens = lax.slice_in_dim(x, 0, n, 2, axis)
    odds = lax.rev(lax.slice_in_dim(x, 1, n, 2, axis), (axis,))
    return lax.concatenate([evens, odds], axis)


def _restore(v: Any, axis: int) -> Any:
    """The inverse of ``_reorder``: interleave the first half with the reversed second half."""
    n = aval(v).shape[axis]
    half = (n + 1) // 2
    evens = lax.slice_in_dim(v, 0, half, 1, axis)
    odds = lax.rev(lax.slice_in_dim(v, half, n, 1, axis), (axis,))
    if n % 2:  # pad the odd samples to the even ones' count; the padding falls off the end below
        odds = lax.pad(odds, np.zeros((), aval(odds).dtype), [(0, int(ax == axis), 0) for ax in range(aval(v).ndim)])
    shape = aval(evens).shape
    pairs = lax.concatenate([lax.expand_dims(evens, (axis + 1,)), lax.expand_dims(odds, (axis + 1,))], axis + 1)
    merged = lax.reshape(pairs, shape[:axis] + (2 * half,) + shape[axis + 1:])
    return lax.slice_in_dim(merged, 0, n, 1, axis)


def _dct2(x: Any, axis: int) -> Any:
    """The unnormalized type-2 DCT of real ``x``: ``2 sum_n x[n] cos(pi k (2n + 1) / 2N)``."""
    ndim, n = aval(x).ndim, aval(x).shape[axis]
    spectrum = jnp_fft.fft(_reorder(x, axis), axis=axis)
    turned = lax.mul(spectrum, _twiddle(n, axis, ndim, aval(spectrum).dtype))
    return lax.mul(lax.real(turned), np.asarray(2, dtypes.real_dtype(aval(spectrum).dtype)))


def _dct3(x: Any, axis: int, weights: tuple[float, float]) -> Any:
    """``sum_k w[k] x[k] cos(pi k (2n + 1) / 2N)`` of real ``x``, with ``w = (w0, w1, w1, ...)``.
    For real ``x`` this is the real part of one forward FFT of the turned, weighted bins."""
    ndim, n = aval(x).ndim, aval(x).shape[axis]
    complex_dtype = dtypes.complex_dtype(aval(x).dtype)
    weighted = _along([weights[0]] + [weights[1]] * (n - 1), axis, ndim, complex_dtype)
    factor = weighted * _twiddle(n, axis, ndim, complex_dtype)
    turned = lax.mul(lax.convert_element_type(x, complex_dtype), factor.astype(complex_dtype))
    return _restore(lax.real(jnp_fft.fft(turned, axis=axis)), axis)


def _forward_scale(n: int, norm: str | None) -> tuple[float, float]:
    """The factors of bin 0 and of the other bins of the type-2 transform under ``norm``."""
    if norm == "ortho":
        return math.sqrt(1.0 / (4 * n)), math.sqrt(1.0 / (2 * n))
    if norm == "forward":
        return 1.0 / (2 * n), 1.0 / (2 * n)
    return 1.0, 1.0


def _type2(x: Any, axis: int, norm: str | None) -> Any:
    out = _dct2(x, axis)
    first, rest = _forward_scale(aval(x).shape[axis], norm)
    if first == rest == 1.0:
        return out
    ndim, n = aval(out).ndim, aval(out).shape[axis]
    return lax.mul(out, _along([first] + [rest] * (n - 1), axis, ndim, aval(out).dtype))


def _type3(x: Any, axis: int, norm: str | None) -> Any:
    """The type-3 DCT: the inverse of the type-2 one under the opposite scaling of ``norm``."""
    n = aval(x).shape[axis]
    if norm == "ortho":
        return _dct3(x, axis, (math.sqrt(1.0 / n), math.sqrt(2.0 / n)))
    if norm == "forward":
        return _dct3(x, axis, (1.0 / (2 * n), 1.0 / n))
    return _dct3(x, axis, (1.0, 2.0))


def _inverse_norm(norm: str | None) -> str:
    """The norm under which a forward transform scales as the inverse one does under ``norm``."""
    return {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}[norm]


def _one(x: Any, axis: int, type: int, norm: str | None, inverse: bool) -> Any:
    """A 1-D transform of real ``x``; ``idct`` of one type is ``dct`` of the other, rescaled."""
    if inverse:
        type, norm = 5 - type, _inverse_norm(norm)
    return _type2(x, axis, norm) if type == 2 else _type3(x, axis, norm)


def _apply(x: Any, axes: Sequence[int], sizes: dict[int, int], type: int, norm: str | None, inverse: bool) -> Any:
    if dtypes.issubdtype(aval(x).dtype, np.complexfloating):
        return lax.complex(_apply(lax.real(x), axes, sizes, type, norm, inverse),
                           _apply(lax.imag(x), axes, sizes, type, norm, inverse))
    (x,) = promote_dtypes_inexact(x)
    x = _resize(x, sizes)
    for ax in axes:
        x = _one(x, ax, type, norm, inverse)
    return x


def _single(name: str, x: Any, type: int, n: int | None, axis: int, norm: str | None, inverse: bool) -> Any:
    x = _check(name, x, type, norm)
    axis = _axis(axis, aval(x).ndim)
    return _apply(x, (axis,), {} if n is None else {axis: n}, type, norm, inverse)


def _many(name: str, x: Any, type: int, s: Any, axes: Sequence[int] | None, norm: str | None,
          inverse: bool) -> Any:
    x = _check(name, x, type, norm)
    ndim = aval(x).ndim
    if s is not None:
        s = [operator.index(n) for n in s] if isinstance(s, (list, tuple, np.ndarray)) else [operator.index(s)]
        if len(s) > ndim:
            raise ValueError(f"s must have at most x.ndim ({ndim}) elements, got {len(s)}")
    if axes is None:
        axes = tuple(range(ndim - len(s), ndim)) if s is not None else tuple(range(ndim))
    else:
        axes = tuple(_axis(ax, ndim) for ax in axes)
        if len(set(axes)) != len(axes):
            raise ValueError(f"repeated axis in {name}: {axes}")
    if s is not None and len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    return _apply(x, axes, {} if s is None else dict(zip(axes, s)), type, norm, inverse)


def dct(x: Any, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The discrete cosine transform of ``x`` along ``axis``, of length ``n`` (``x`` cropped or
    zero-padded at the end)."""
    return _single("dct", x, type, n, axis, norm, inverse=False)


def idct(x: Any, type: int = 2, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of ``dct`` of the same ``type`` and ``norm``."""
    return _single("idct", x, type, n, axis, norm, inverse=True)


def dctn(x: Any, type: int = 2, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None) -> Any:
    """``dct`` over each of ``axes`` (all by default; the last ``len(s)`` if only ``s`` is given)."""
    return _many("dctn", x, type, s, axes, norm, inverse=False)


def idctn(x: Any, type: int = 2, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """The inverse of ``dctn`` of the same ``type`` and ``norm``."""
    return _many("idctn", x, type, s, axes, norm, inverse=True)
