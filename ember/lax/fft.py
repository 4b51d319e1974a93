"""Fast Fourier transforms (``jax.lax.fft``): one primitive, ``fft``, over 1 to 3 trailing dimensions.

``fft_type`` says which transform: complex to complex forward (``FFT``) or inverse (``IFFT``,
scaled by ``1 / prod(fft_lengths)``), real to complex (``RFFT``: the last dimension keeps
``n // 2 + 1`` bins, the others are their Hermitian mirror images) and complex to real
(``IRFFT``, its inverse). ``jnp.fft`` builds every NumPy transform from it: any axes, cropping,
padding and normalization are done around it.
"""
from __future__ import annotations

import enum
import operator
from typing import Any, Sequence

from ember import dtypes
from ember.core.avals import ShapedArray
from ember.lax.base import aval, primitive
from ember.lax.elementwise import convert_element_type

__all__ = ["FftType", "fft", "fft_p"]


class FftType(enum.IntEnum):
    """Which transform ``lax.fft`` computes."""

    FFT = 0
    "complex to complex, forward"
    IFFT = 1
    "complex to complex, inverse (scaled by 1 / N)"
    RFFT = 2
    "real to complex, forward (the last axis keeps n // 2 + 1 bins)"
    IRFFT = 3
    "complex to real, inverse (scaled by 1 / N)"


_BY_NAME = {name: t for t in FftType for name in (t.name, t.name.lower())}
MAX_RANK = 3  # what XLA's fft takes, and so what programs written for JAX stay within


def _fft_type(fft_type: Any) -> FftType:
    if isinstance(fft_type, str):
        if fft_type not in _BY_NAME:
            raise ValueError(f"Unknown FFT type '{fft_type}'")
        return _BY_NAME[fft_type]
    if isinstance(fft_type, FftType):
        return fft_type
    raise TypeError(f"Unknown FFT type value '{fft_type}'")


def _fft_rule(x: ShapedArray, *, fft_type: FftType, fft_lengths: tuple[int, ...]) -> ShapedArray:
    rank = len(fft_lengths)
    if not 1 <= rank <= MAX_RANK:
        raise ValueError(f"fft: fft_lengths must have 1 to {MAX_RANK} entries, got {fft_lengths}")
    if rank > x.ndim:
        raise ValueError(f"FFT input shape {x.shape} must have at least as many input dimensions as fft_lengths "
                         f"{fft_lengths}.")
    batch, minor = x.shape[:-rank], x.shape[-rank:]
    if fft_type == FftType.RFFT:
        if x.dtype not in (dtypes.float32, dtypes.float64):
            raise ValueError(f"RFFT input must be float32 or float64, got {x.dtype}")
        if minor != fft_lengths:
            raise ValueError(f"RFFT input shape {x.shape} minor dimensions must be equal to fft_lengths {fft_lengths}")
        return ShapedArray(batch + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,), dtypes.complex_dtype(x.dtype))
    name = fft_type.name
    if not dtypes.is_complex(x.dtype):
        raise ValueError(f"{name} input must be complex64 or complex128, got {x.dtype}")
    if fft_type == FftType.IRFFT:
        bins = fft_lengths[-1] // 2 + 1
        if minor != fft_lengths[:-1] + (bins,):
            raise ValueError(f"IRFFT input shape {x.shape} minor dimensions must be equal to all except the last "
                             f"fft_length, and the last must be fft_lengths[-1] // 2 + 1 = {bins}, got "
                             f"fft_lengths={fft_lengths}")
        return ShapedArray(batch + fft_lengths, dtypes.real_dtype(x.dtype))
    if minor != fft_lengths:
        raise ValueError(f"FFT input shape {x.shape} minor dimensions must be equal to fft_lengths {fft_lengths}")
    return x.strip_weak_type()


fft_p = primitive("fft", _fft_rule, linear=True)


def fft(x: Any, fft_type: FftType | str, fft_lengths: Sequence[int]) -> Any:
    """The ``fft_type`` transform of ``x`` over its last ``len(fft_lengths)`` dimensions (1 to 3).

    As in JAX, ``x`` is converted first: to a floating type for ``RFFT`` (which refuses complex
    input), to a complex type for the others (a real ``x`` is the complex value with zero
    imaginary part). With no ``fft_lengths`` the converted ``x`` is returned.
    """
    kind = _fft_type(fft_type)
    dt = aval(x).dtype
    if kind == FftType.RFFT:
        if dtypes.is_complex(dt):
            raise ValueError("only real valued inputs supported for rfft")
        x = convert_element_type(x, dtypes.to_inexact_dtype(dt))
    else:
        x = convert_element_type(x, dtypes.complex_dtype(dtypes.to_inexact_dtype(dt)))
    lengths = tuple(operator.index(n) for n in fft_lengths)
    if not lengths:
        return x
    return fft_p.bind(x, fft_type=kind, fft_lengths=lengths)
