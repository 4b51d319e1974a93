"""Special functions (``jax.scipy.special``), written with ``ember.numpy`` and ``ember.lax`` only.

Arguments promote as in JAX: integers and booleans to the default float (float32 unless
x64 is on), Python scalars stay weak. Formulations are chosen for accuracy in the tails:
``log_ndtr`` switches to an asymptotic series far left, ``ndtri`` refines a rational
first guess with Halley steps on ``log_ndtr``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import dtypes, lax
from ember.nn import functions as nn_functions
from ember.numpy.core import ensure_array, promote_dtypes_inexact

__all__ = [
    "betaln", "digamma", "entr", "erf", "erfc", "erfinv", "expit", "gammaln", "log_ndtr", "log_softmax",
    "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "softmax", "xlog1py", "xlogy",
]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _inexact(*args: Any) -> Any:
    """The arguments promoted together to one floating dtype (a single one unpacked)."""
    promoted = promote_dtypes_inexact(*(ensure_array(a) for a in args))
    return promoted[0] if len(args) == 1 else promoted


def _strong(x: Any) -> Any:
    """``x`` without a weak type: JAX's ndtr family, multigammaln and the softmax/logsumexp
    reductions return strongly typed results even for Python scalars."""
    return lax.convert_element_type(x, x.dtype)


def erf(x: Any) -> Any:
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t**2) dt``."""
    return lax.erf(_inexact(x))


def erfc(x: Any) -> Any:
    """``1 - erf(x)``, accurate where ``erf(x)`` is near 1."""
    return lax.erfc(_inexact(x))


def erfinv(x: Any) -> Any:
    """The inverse of ``erf`` on (-1, 1); +-inf at +-1, NaN outside."""
    return lax.erf_inv(_inexact(x))


def gammaln(x: Any) -> Any:
    """``log(abs(gamma(x)))``."""
    return lax.lgamma(_inexact(x))


def digamma(x: Any) -> Any:
    """The logarithmic derivative of the gamma function."""
    return lax.digamma(_inexact(x))


def betaln(a: Any, b: Any) -> Any:
    """``log(abs(beta(a, b)))`` as ``gammaln(a) + gammaln(b) - gammaln(a + b)``."""
    a, b = _inexact(a, b)
    return lax.sub(lax.add(lax.lgamma(a), lax.lgamma(b)), lax.lgamma(lax.add(a, b)))


def multigammaln(a: Any, d: int) -> Any:
    """The log of the multivariate gamma function of dimension ``d`` (a static int):
    ``d(d-1)/4 log(pi) + sum_{j<d} gammaln(a - j/2)``."""
    d = int(d)
    if d < 1:
        raise ValueError(f"multigammaln: the dimension d must be a positive integer, got {d}")
    a = _inexact(a)
    terms = jnp.stack([lax.lgamma(jnp.subtract(a, j / 2)) for j in range(d)])
    return _strong(jnp.add(jnp.sum(terms, axis=0), d * (d - 1) / 4 * math.log(math.pi)))


def expit(x: Any) -> Any:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return lax.logistic(_inexact(x))


def logit(x: Any) -> Any:
    """The inverse of ``expit``: ``log(x / (1 - x))``."""
    x = _inexact(x)
    return jnp.log(jnp.divide(x, jnp.subtract(1, x)))


def xlogy(x: Any, y: Any) -> Any:
    """``x * log(y)``, defined as 0 where ``x == 0`` (even where ``y`` is 0), unless ``y`` is NaN
    (in either part): NaN propagates, as JAX's ``where(x != 0 | y != y, x * log(y), 0)``."""
    x, y = _inexact(x, y)
    keep = (x != 0) | (y != y)
    safe_y = jnp.where(keep, y, 1)  # keeps log(0) out of the result and out of its gradient
    return jnp.where(keep, jnp.multiply(x, jnp.log(safe_y)), 0)


def xlog1py(x: Any, y: Any) -> Any:
    """``x * log1p(y)``, defined as 0 where ``x == 0`` (even where ``y`` is -1), unless ``y`` is NaN
    (as ``xlogy``, and JAX)."""
    x, y = _inexact(x, y)
    keep = (x != 0) | (y != y)
    safe_y = jnp.where(keep, y, 0)
    return jnp.where(keep, jnp.multiply(x, jnp.log1p(safe_y)), 0)


def entr(x: Any) -> Any:
    """The elementwise entropy ``-x * log(x)``: 0 at 0, -inf for negative ``x``."""
    x = _inexact(x)
    if dtypes.is_complex(x.dtype):  # as JAX's message and type
        raise ValueError("entr does not support complex-valued inputs.")
    positive = x > 0
    safe_x = jnp.where(positive, x, 1)
    return jnp.where(positive, jnp.negative(jnp.multiply(safe_x, jnp.log(safe_x))),
                     jnp.where(x == 0, 0, -np.inf))


def ndtr(x: Any) -> Any:
    """The standard normal CDF, as ``erfc(-x / sqrt(2)) / 2`` (accurate in the left tail)."""
    x = _inexact(x)
    return _strong(jnp.multiply(0.5, lax.erfc(jnp.multiply(x, -1 / math.sqrt(2)))))


def _log_ndtr_left_tail(x: Any, series_order: int) -> Any:
    """``log(ndtr(x))`` for very negative ``x``: the asymptotic (Mills ratio) series
    ``-x^2/2 - log(-x) - log(sqrt(2 pi)) + log(1 + sum_n (-1)^n (2n-1)!! / x^(2n))``."""
    inverse_square = jnp.reciprocal(jnp.square(x))
    total, term = jnp.ones_like(x), jnp.ones_like(x)
    for n in range(1, series_order + 1):
        term = jnp.multiply(term, jnp.multiply(inverse_square, -(2 * n - 1)))
        total = jnp.add(total, term)
    leading = jnp.subtract(jnp.multiply(-0.5, jnp.square(x)), jnp.log(jnp.negative(x)))
    return jnp.add(jnp.subtract(leading, _LOG_SQRT_2PI), jnp.log(total))


def log_ndtr(x: Any, series_order: int = 3) -> Any:
    """``log(ndtr(x))`` without underflow or cancellation: ``log1p(-ndtr(-x))`` right of 0,
    ``log(ndtr(x))`` down to -20 (float64) or -10 (float32 and narrower), and left of that
    the asymptotic series with ``series_order`` terms (a static int in [0, 30])."""
    series_order = int(series_order)
    if not 0 <= series_order <= 30:
        raise ValueError(f"series_order must be in [0, 30], got {series_order}")
    x = _inexact(x)
    lower = -20.0 if x.dtype == np.float64 else -10.0
    # Every branch sees a safe input, so the unused ones add neither NaN nor inf gradients.
    right = jnp.log1p(jnp.negative(ndtr(jnp.negative(jnp.maximum(x, 0)))))
    middle = jnp.log(ndtr(jnp.clip(x, lower, 0)))
    left = _log_ndtr_left_tail(jnp.minimum(x, lower), series_order)
    return _strong(jnp.where(x > 0, right, jnp.where(x < lower, left, middle)))


def _ndtri_first_guess(p: Any) -> Any:
    """Abramowitz & Stegun 26.2.23 for ``p`` in (0, 0.5]: the quantile to within 4.5e-4."""
    t = jnp.sqrt(jnp.multiply(-2, jnp.log(p)))
    numerator = jnp.add(2.515517, jnp.multiply(t, jnp.add(0.802853, jnp.multiply(t, 0.010328))))
    denominator = jnp.add(1, jnp.multiply(t, jnp.add(1.432788, jnp.multiply(
        t, jnp.add(0.189269, jnp.multiply(t, 0.001308))))))
    return jnp.negative(jnp.subtract(t, jnp.divide(numerator, denominator)))


def ndtri(p: Any) -> Any:
    """The inverse of ``ndtr``: -inf at 0, +inf at 1, NaN outside [0, 1].

    Works on the lower half ``q = min(p, 1 - p)``, where the quantile ``x`` is negative: three
    Halley steps on ``f(x) = ndtr(x) - q`` from a rational first guess, with the ratio
    ``f / ndtr'`` formed in logs (``expm1(log_ndtr(x) - log q) * q / pdf(x)``) so that
    neither ``q`` nor ``pdf(x)`` underflows.
    """
    p = _inexact(p)
    lower_half = p <= 0.5
    q = jnp.where(lower_half, p, jnp.subtract(1, p))
    inside = jnp.logical_and(q > 0, q <= 0.5)
    safe_q = jnp.where(inside, q, 0.25)
    log_q = jnp.log(safe_q)
    x = _ndtri_first_guess(safe_q)
    for _ in range(3):
        log_q_over_pdf = jnp.add(jnp.add(log_q, jnp.multiply(0.5, jnp.square(x))), _LOG_SQRT_2PI)
        step = jnp.multiply(jnp.expm1(jnp.subtract(log_ndtr(x), log_q)), jnp.exp(log_q_over_pdf))
        x = jnp.subtract(x, jnp.divide(step, jnp.add(1, jnp.multiply(jnp.multiply(0.5, x), step))))
    x = jnp.where(inside, x, jnp.where(q == 0, -np.inf, np.nan))
    return _strong(jnp.where(lower_half, x, jnp.negative(x)))


def softmax(x: Any, /, *, axis: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` over ``axis`` (all axes by default, as in SciPy)."""
    return _strong(nn_functions.softmax(x, axis=axis))


def log_softmax(x: Any, /, *, axis: Any = None) -> Any:
    """``x - logsumexp(x)`` over ``axis`` (all axes by default, as in SciPy)."""
    return _strong(nn_functions.log_softmax(x, axis=axis))


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False,
              where: Any = None) -> Any:
    """``log(sum(b * exp(a)))`` over ``axis`` without overflow; with ``return_sign``,
    ``(log(abs(s)), sign(s))``, else NaN where the sum is negative."""
    out = nn_functions.logsumexp(a, axis, b, keepdims, return_sign, where)
    return tuple(_strong(v) for v in out) if return_sign else _strong(out)
