"""The chi-squared distribution with ``df`` degrees of freedom, shifted and scaled."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``(df/2 - 1) log y - y/2 - gammaln(df/2) - df/2 log 2 - log(scale)`` at
    ``y = (x - loc) / scale``; -inf below ``loc``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    y = jnp.divide(jnp.subtract(x, loc), scale)
    half_df = jnp.multiply(0.5, df)
    kernel = jnp.subtract(special.xlogy(jnp.subtract(half_df, 1), y), jnp.multiply(0.5, y))
    normalizer = jnp.add(special.gammaln(half_df), jnp.multiply(half_df, math.log(2)))
    log_probs = jnp.subtract(jnp.subtract(kernel, normalizer), jnp.log(scale))
    return jnp.where(x < loc, -np.inf, log_probs)


def pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, df, loc, scale))


def _standard(x: Any, df: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    """``(df / 2, y / 2)``, the gamma distribution's arguments, ``y`` clipped below at 0."""
    x, df, loc, scale = promote(x, df, loc, scale)
    y = jnp.maximum(jnp.divide(jnp.subtract(x, loc), scale), 0)
    return jnp.multiply(0.5, df), jnp.multiply(0.5, y)


def cdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammainc(df / 2, y / 2)``."""
    return special.gammainc(*_standard(x, df, loc, scale))


def logcdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(cdf(x, df, loc, scale))


def sf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaincc(df / 2, y / 2)``: accurate in the right tail, not ``1 - cdf``."""
    return special.gammaincc(*_standard(x, df, loc, scale))


def logsf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(sf(x, df, loc, scale))
