"""NumPy's window functions (``bartlett``, ``blackman``, ``hamming``, ``hanning``, ``kaiser``):
symmetric tapers of static length ``M`` in the default float type."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import dtypes, lax
from ember.numpy.core import ensure_array, promote_dtypes_inexact
from ember.numpy.float_functions import i0
from ember.numpy.static_args import static_int
from ember.numpy.ufuncs import cos, sqrt

__all__ = ["bartlett", "blackman", "hamming", "hanning", "kaiser"]


def _window(M: Any, name: str, taper: Callable[[Any], Any], dtype: Any = None) -> Any:
    """``taper(t)`` at ``M`` points ``t`` evenly spaced over [0, 1]; a single point is 1."""
    M = static_int(M, "M", name)
    dtype = dtype or dtypes.default_float_dtype()
    if M <= 1:
        return lax.broadcast_in_dim(lax.convert_element_type(1, dtype), (max(M, 0),), ())
    t = lax.div(lax.iota(dtype, M), lax.convert_element_type(M - 1, dtype))
    return taper(t)


def _cosine_sum(*coefficients: float) -> Callable[[Any], Any]:
    """``sum_k (-1)^k a_k cos(2πkt)``: the generalized cosine windows."""
    def taper(t: Any) -> Any:
        total = lax.convert_element_type(coefficients[0], t.dtype)
        for k, a in enumerate(coefficients[1:], start=1):
            total = lax.add(total, lax.mul(lax.convert_element_type((-1) ** k * a, t.dtype),
                                           cos(lax.mul(t, lax.convert_element_type(2 * np.pi * k, t.dtype)))))
        return total
    return taper


def bartlett(M: int) -> Any:
    """The triangular window: 0 at both ends, 1 in the middle."""
    return _window(M, "bartlett", lambda t: lax.sub(lax.convert_element_type(1, t.dtype), lax.abs(
        lax.sub(lax.mul(t, lax.convert_element_type(2, t.dtype)), lax.convert_element_type(1, t.dtype)))))


def blackman(M: int) -> Any:
    """The Blackman window ``0.42 - 0.5 cos(2πt) + 0.08 cos(4πt)``."""
    return _window(M, "blackman", _cosine_sum(0.42, 0.5, 0.08))


def hamming(M: int) -> Any:
    """The Hamming window ``0.54 - 0.46 cos(2πt)``."""
    return _window(M, "hamming", _cosine_sum(0.54, 0.46))


def hanning(M: int) -> Any:
    """The Hann window ``0.5 - 0.5 cos(2πt)``."""
    return _window(M, "hanning", _cosine_sum(0.5, 0.5))


def kaiser(M: int, beta: Any) -> Any:
    """The Kaiser window ``i0(beta sqrt(1 - (2t - 1)²)) / i0(beta)``; ``beta`` may be traced."""
    (beta,) = promote_dtypes_inexact(ensure_array(beta))
    dtype = dtypes.result_type(beta.dtype, dtypes.default_float_dtype())

    def taper(t: Any) -> Any:
        b = lax.convert_element_type(beta, dtype)
        centered = lax.sub(lax.mul(t, lax.convert_element_type(2, dtype)), lax.convert_element_type(1, dtype))
        radius = sqrt(lax.max(lax.sub(lax.convert_element_type(1, dtype), lax.mul(centered, centered)),
                              lax.convert_element_type(0, dtype)))
        return lax.div(i0(lax.mul(b, radius)), i0(b))
    return _window(M, "kaiser", taper, dtype)
