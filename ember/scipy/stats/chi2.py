"""The chi-squared distribution with ``df`` degrees of freedom, shifted and scaled."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats import gamma
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


# The distribution functions are the gamma distribution's, with shape df / 2 and scale 2 * scale.
def cdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammainc(df / 2, (x - loc) / (2 scale))``."""
    return gamma.cdf(x, jnp.multiply(0.5, df), loc, jnp.multiply(2, scale))


def logcdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return gamma.logcdf(x, jnp.multiply(0.5, df), loc, jnp.multiply(2, scale))


def sf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaincc(df / 2, (x - loc) / (2 scale))``: accurate in the right tail, not ``1 - cdf``."""
    return gamma.sf(x, jnp.multiply(0.5, df), loc, jnp.multiply(2, scale))


def logsf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return gamma.logsf(x, jnp.multiply(0.5, df), loc, jnp.multiply(2, scale))
