"""The reference rule of ``fft``: DUCC (``ducc0``, the FFT library that JAX's CPU backend calls),
chosen by measurement.

Against SciPy's pocketfft it was 1.5-2x faster on a long complex transform and 1.2-1.5x on a batch
of real rows, and against ``jax.jit`` 0.5x and 0.5-1.0x (docs/fft.md). It keeps the input's
precision (float32 -> complex64), and with ``nthreads`` it splits batches of transforms over
threads; one transform of one vector is not split, and small arrays are not worth waking threads
for. Inside compiled programs the CPU backend's own FFT (``ember.backends.cpu.fft``) computes
batches of rows of power-of-two lengths; this rule is the fallback step for everything else (and
a host call from a native loop), run on the program's buffers.
"""
from __future__ import annotations

import math

import numpy as np

from ember.backends import thread_count
from ember.backends.reference import impl_rules
from ember.lax.fft import FftType, fft_p

_PARALLEL_MIN_ELEMENTS = 1 << 16


def _workers(x: np.ndarray, rank: int) -> int:
    if x.size < _PARALLEL_MIN_ELEMENTS or (rank == 1 and x.size == x.shape[-1]):
        return 1
    return thread_count()


def _fft(x: np.ndarray, *, fft_type: FftType, fft_lengths: tuple[int, ...]) -> np.ndarray:
    rank = len(fft_lengths)
    axes = tuple(range(x.ndim - rank, x.ndim))
    batch = x.shape[:x.ndim - rank]
    if fft_type == FftType.RFFT:
        shape, dtype = batch + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,), np.result_type(x.dtype, np.complex64)
    elif fft_type == FftType.IRFFT:
        shape, dtype = batch + fft_lengths, np.finfo(x.dtype).dtype
    else:
        shape, dtype = x.shape, x.dtype
    if x.size == 0 or math.prod(shape) == 0:  # pocketfft refuses zero lengths; an empty sum is 0
        return np.zeros(shape, dtype)
    import ducc0  # (at the first transform: ``import ember`` does not load the library)

    workers = _workers(x, rank)
    if fft_type == FftType.RFFT:
        out = ducc0.fft.r2c(x, axes=axes, forward=True, nthreads=workers)
    elif fft_type == FftType.IRFFT:
        out = ducc0.fft.c2r(x, axes=axes, lastsize=fft_lengths[-1], forward=False, inorm=2, nthreads=workers)
    else:
        forward = fft_type == FftType.FFT
        out = ducc0.fft.c2c(x, axes=axes, forward=forward, inorm=0 if forward else 2, nthreads=workers)
    return np.asarray(out, dtype)


impl_rules[fft_p] = _fft
