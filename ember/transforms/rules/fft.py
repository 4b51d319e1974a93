"""Derivatives, transposes and batching of ``fft``.

Every FFT is linear, so its tangent is the same transform of the tangent. Transposes pair
values as the rest of ember does (non-conjugating: ``<c, y> = re(sum(c * y))`` for complex
``y``, ``sum(c * y)`` for real ``y``), which gives, with ``N = prod(fft_lengths)``, ``w`` the
DFT kernel and ``m`` the weight of each kept bin (1 for the zero frequency and, for even
``n``, the Nyquist bin, whose mirror image is itself; 2 for the others, which stand for
themselves and their mirror image):

* ``FFT`` and ``IFFT``: the DFT matrix is symmetric, so each is its own transpose.
* ``RFFT``, ``y_k = sum_j x_j w^jk`` for the kept ``k``: ``xbar_j = re(sum_k c_k w^jk)``,
  and since an ``IRFFT`` reads ``z`` as ``re(sum_k m_k z_k w^-jk) / N`` (imaginary parts of
  self-mirrored bins dropped), ``xbar = IRFFT(conj(c) * N / m)``.
* ``IRFFT``: ``sum_j t_j re(sum_k m_k z_k w^-jk) / N = re(sum_k c_k z_k)`` with
  ``c = conj(RFFT(t)) * m / N``.

Both agree with ``jax.vjp`` of the same functions (tests/test_fft.py). vmap moves the batch
dimension to the front, where it is one more leading dimension.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import lax
from ember.lax.base import aval
from ember.lax.fft import FftType, fft_p
from ember.transforms.batching import batching_rules, move_batch_axis
from ember.transforms.jvp import deflinear
from ember.transforms.transpose import transpose_rules

deflinear(fft_p)


def _bin_weights(like: Any, n: int, scale: float, invert: bool) -> Any:
    """``scale * m`` (or ``scale / m``) for the ``n // 2 + 1`` kept bins, as a constant of ``like``'s
    (complex) type laid along its last dimension."""
    kept = n // 2 + 1
    weights = np.full(kept, 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    like_aval = aval(like)
    values = (scale / weights if invert else scale * weights).astype(like_aval.dtype)
    return lax.broadcast_in_dim(values, like_aval.shape, (like_aval.ndim - 1,))


def _fft_transpose(ct: Any, x: Any, *, fft_type: FftType, fft_lengths: tuple[int, ...]) -> list:
    size = math.prod(fft_lengths)
    if fft_type == FftType.RFFT:
        weighted = lax.mul(lax.conj(ct), _bin_weights(ct, fft_lengths[-1], float(size), invert=True))
        return [fft_p.bind(weighted, fft_type=FftType.IRFFT, fft_lengths=fft_lengths)]
    if fft_type == FftType.IRFFT:
        spectrum = fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths)
        return [lax.mul(lax.conj(spectrum), _bin_weights(spectrum, fft_lengths[-1], 1.0 / size, invert=False))]
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]


transpose_rules[fft_p] = _fft_transpose


def _batch_fft(axis_size: int, values: tuple, dims: tuple, **params: Any) -> tuple[Any, int]:
    [x], [d] = values, dims
    return fft_p.bind(move_batch_axis(x, d, axis_size), **params), 0


batching_rules[fft_p] = _batch_fft
