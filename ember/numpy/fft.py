"""``jnp.fft``: NumPy's discrete Fourier transforms, as JAX defines them, on ``lax.fft``.

``lax.fft`` transforms 1 to 3 trailing dimensions of a fixed size, so each function here moves
the requested axes to the end (in the order given: the last one is the halved axis of the real
transforms), crops or zero-pads them to ``n`` / ``s`` with one ``lax.pad``, transforms (more than
three axes take several transforms, which commute) and moves the axes back. ``norm`` scales the
result: ``"backward"`` (the default) leaves the forward transform unscaled and the inverse
scaled by ``1 / N``, ``"forward"`` the other way round, ``"ortho"`` both by ``1 / sqrt(N)``.

Types follow JAX: real and integer input gives a complex result of the matching precision
(float32 -> complex64, float64 -> complex128 under x64), the real transforms refuse complex
input and ``irfft`` gives a real result. Bad ``n``, ``s``, ``axes`` and ``norm`` raise NumPy's
errors (an axis out of bounds: ``numpy.exceptions.AxisError``, a ValueError and an IndexError).
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from ember import dtypes, lax
from ember.lax.base import aval
from ember.lax.fft import MAX_RANK, FftType, fft as _lax_fft
from ember.numpy.array_utils import astype
from ember.numpy.arraylike import check_arraylike
from ember.numpy.core import asarray, ensure_array
from ember.numpy.creation import arange
from ember.numpy.shape_ops import roll
from ember.numpy.ufuncs import conj, true_divide

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")
_INVERSE = (FftType.IFFT, FftType.IRFFT)


def _full_name(name: str) -> str:
    return f"jax.numpy.fft.{name}"


def _check_norm(norm: Any) -> None:
    if not any(norm is n or (isinstance(norm, str) and norm == n) for n in _NORMS):
        raise ValueError(f'Invalid norm value {norm}; should be "backward","ortho" or "forward".')


def _swap_direction(norm: str | None) -> str:
    """The norm of the opposite transform that gives the same scaling (hfft is an irfft, unscaled)."""
    return {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}[norm]


def _points(n: Any) -> int:
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    return n


def _axis(axis: Any, ndim: int) -> int:
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


def _scale(x: Any, factor: float) -> Any:
    if factor == 1.0:
        return x
    return lax.mul(x, lax.convert_element_type(factor, aval(x).dtype, weak_type=True))


def _on_trailing(x: Any, kind: FftType, lengths: Sequence[int]) -> Any:
    """``lax.fft`` over the last ``len(lengths)`` axes, as transforms of at most three axes each:
    the group of the last axis takes ``kind``, the others the complex transform of its direction."""
    lengths = tuple(lengths)
    if len(lengths) <= MAX_RANK:
        return _lax_fft(x, kind, lengths)
    head, last = lengths[:-MAX_RANK], lengths[-MAX_RANK:]
    complex_kind = FftType.IFFT if kind in _INVERSE else FftType.FFT
    if kind in _INVERSE:  # the inverse real transform reads complex input: the others come first
        x = _on_leading(x, complex_kind, head, len(last))
        return _lax_fft(x, kind, last)
    x = _lax_fft(x, kind, last)
    return _on_leading(x, complex_kind, head, len(last))


def _on_leading(x: Any, kind: FftType, lengths: tuple[int, ...], after: int) -> Any:
    """``_on_trailing`` of the ``len(lengths)`` axes that precede the last ``after`` ones."""
    ndim = aval(x).ndim
    first = ndim - after - len(lengths)
    moved = list(range(first)) + list(range(first + len(lengths), ndim)) + list(range(first, first + len(lengths)))
    out = _on_trailing(lax.transpose(x, moved), kind, lengths)
    return lax.transpose(out, np.argsort(moved))


def _transform(name: str, kind: FftType, a: Any, s: Sequence[int] | None, axes: Sequence[int] | None,
               norm: str | None) -> Any:
    full_name = _full_name(name)
    check_arraylike(full_name, a)
    _check_norm(norm)
    a = ensure_array(a)
    ndim = aval(a).ndim
    if s is not None:
        s = tuple(_points(n) for n in s)
    if axes is not None:
        axes = tuple(axes)
        if s is not None and len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
    elif s is None:
        axes = tuple(range(ndim))
    else:
        axes = tuple(range(-len(s), 0))
    axes = tuple(_axis(ax, ndim) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{full_name} does not support repeated axes. Got axes {axes}.")
    shape = aval(a).shape
    if s is None:
        s = tuple(shape[ax] for ax in axes)
        if kind == FftType.IRFFT and axes:
            s = s[:-1] + (2 * (s[-1] - 1),)
        s = tuple(_points(n) for n in s)
    # The transformed axes go last, in the order given; the others keep theirs.
    order = [ax for ax in range(ndim) if ax not in axes] + list(axes)
    x = lax.transpose(a, order)
    sizes = list(s)
    if kind == FftType.IRFFT and sizes:
        sizes[-1] = sizes[-1] // 2 + 1
    have = aval(x).shape[ndim - len(axes):]
    if tuple(sizes) != have:  # crop (negative padding) or zero-pad the transformed axes
        config = [(0, 0, 0)] * (ndim - len(axes)) + [(0, want - got, 0) for want, got in zip(sizes, have)]
        x = lax.pad(x, np.zeros((), aval(x).dtype), config)
    out = _on_trailing(x, kind, s) if axes else _lax_fft(x, kind, ())
    count = math.prod(s)
    if norm == "ortho":
        out = _scale(out, math.sqrt(count) if kind in _INVERSE else 1.0 / math.sqrt(count))
    elif norm == "forward":
        out = _scale(out, float(count) if kind in _INVERSE else 1.0 / count)
    return lax.transpose(out, np.argsort(order))


def _one_axis(name: str, kind: FftType, a: Any, n: int | None, axis: int, norm: str | None) -> Any:
    if isinstance(axis, (list, tuple)):
        full_name = _full_name(name)
        raise ValueError(f"{full_name} does not support multiple axes. Please use {full_name}n. Got axis = {axis!r}.")
    return _transform(name, kind, a, None if n is None else (n,), (axis,), norm)


def _two_axes(name: str, kind: FftType, a: Any, s: Sequence[int] | None, axes: Sequence[int],
              norm: str | None) -> Any:
    if len(axes) != 2:
        raise ValueError(f"{_full_name(name)} only supports 2 axes. Got axes = {axes!r}.")
    return _transform(name, kind, a, s, axes, norm)


# --- one axis -------------------------------------------------------------------------------------
def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The discrete Fourier transform along ``axis``, of length ``n`` (``a`` cropped or zero-padded)."""
    return _one_axis("fft", FftType.FFT, a, n, axis, norm)


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of ``fft``."""
    return _one_axis("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The transform of real input: the ``n // 2 + 1`` non-negative frequencies."""
    return _one_axis("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of ``rfft``: a real result of length ``n`` (default ``2 * (a.shape[axis] - 1)``)."""
    return _one_axis("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The (real) transform of a Hermitian-symmetric signal given by its first half."""
    check_arraylike(_full_name("hfft"), a)
    _check_norm(norm)
    return _one_axis("hfft", FftType.IRFFT, conj(a), n, axis, _swap_direction(norm))


def ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of ``hfft``: the first half of the Hermitian spectrum's inverse transform."""
    check_arraylike(_full_name("ihfft"), a)
    _check_norm(norm)
    return conj(_one_axis("ihfft", FftType.RFFT, a, n, axis, _swap_direction(norm)))


# --- two axes -------------------------------------------------------------------------------------
def fft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """``fftn`` over two axes (the last two by default)."""
    return _two_axes("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """``ifftn`` over two axes (the last two by default)."""
    return _two_axes("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """``rfftn`` over two axes (the last two by default)."""
    return _two_axes("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    """``irfftn`` over two axes (the last two by default)."""
    return _two_axes("irfft2", FftType.IRFFT, a, s, axes, norm)


# --- any axes -------------------------------------------------------------------------------------
def fftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """The transform over ``axes`` (all by default; the last ``len(s)`` if only ``s`` is given)."""
    return _transform("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """The inverse of ``fftn``."""
    return _transform("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """The transform of real input over ``axes``; the last axis keeps ``s[-1] // 2 + 1`` frequencies."""
    return _transform("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """The inverse of ``rfftn``: a real result of shape ``s`` over ``axes``."""
    return _transform("irfftn", FftType.IRFFT, a, s, axes, norm)


# --- frequencies and shifts -----------------------------------------------------------------------
def _frequency_args(name: str, n: Any, d: Any, dtype: Any) -> tuple[int, np.dtype, np.dtype]:
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of {_full_name(name)} only takes an int. Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of {_full_name(name)} only takes a single value. Got d = {list(d)}.")
    out_dtype = dtypes.canonicalize_dtype(dtype) if dtype is not None else dtypes.default_float_dtype()
    return operator.index(n), out_dtype, dtypes.real_dtype(dtypes.to_inexact_dtype(out_dtype))


def fftfreq(n: int, d: Any = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """The frequencies of ``fft``'s bins for ``n`` samples ``d`` apart: ``[0, 1, ..., -1] / (d * n)``.
    ``dtype``: of the result (the default float; an integer type truncates)."""
    n, out_dtype, work = _frequency_args("fftfreq", n, d, dtype)
    bins = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)]).astype(work)
    return astype(true_divide(asarray(bins), asarray(d * n, work)), out_dtype)


def rfftfreq(n: int, d: Any = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """The frequencies of ``rfft``'s bins: ``[0, 1, ..., n // 2] / (d * n)``. ``dtype``: of the result
    when it is inexact (an integer type gives the default float, as JAX)."""
    n, out_dtype, work = _frequency_args("rfftfreq", n, d, dtype)
    result = true_divide(arange(n // 2 + 1, dtype=work), asarray(d * n, work))
    return astype(result, out_dtype) if dtypes.is_inexact(out_dtype) else result


def _shifts(name: str, x: Any, axes: int | Sequence[int] | None, sign: int) -> Any:
    check_arraylike(name, x)
    x = ensure_array(x)
    shape = aval(x).shape
    if axes is None:
        axes = tuple(range(len(shape)))
    elif isinstance(axes, (int, np.integer)):
        axes = (axes,)
    axes = tuple(_axis(ax, len(shape)) for ax in axes)
    if not axes:
        return x
    return roll(x, tuple(sign * (shape[ax] // 2) for ax in axes), axes)


def fftshift(x: Any, axes: int | Sequence[int] | None = None) -> Any:
    """Rolls the zero frequency to the middle of ``axes`` (all by default)."""
    return _shifts("fftshift", x, axes, 1)


def ifftshift(x: Any, axes: int | Sequence[int] | None = None) -> Any:
    """The inverse of ``fftshift`` (they differ for odd lengths)."""
    return _shifts("ifftshift", x, axes, -1)
