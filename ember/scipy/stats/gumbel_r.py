"""The right-skewed Gumbel distribution (of the maximum) with mode ``loc``. A non-positive
``scale`` gives NaN."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.nn import functions as nn_functions
from ember.scipy.stats._common import promote, standardize

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-z - exp(-z) - log(scale)``."""
    z, scale = standardize(x, loc, scale)
    log_probs = jnp.subtract(jnp.negative(jnp.add(z, jnp.exp(jnp.negative(z)))), jnp.log(scale))
    return jnp.where(scale > 0, log_probs, np.nan)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-exp(-z)``."""
    z, scale = standardize(x, loc, scale)
    return jnp.where(scale > 0, jnp.negative(jnp.exp(jnp.negative(z))), np.nan)


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logcdf(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - exp(-exp(-z))``, as ``-expm1(-exp(-z))`` (accurate in the right tail)."""
    z, scale = standardize(x, loc, scale)
    return jnp.where(scale > 0, jnp.negative(jnp.expm1(jnp.negative(jnp.exp(jnp.negative(z))))), np.nan)


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(1 - exp(-exp(-z)))`` by ``log1mexp``."""
    z, scale = standardize(x, loc, scale)
    return jnp.where(scale > 0, nn_functions.log1mexp(jnp.exp(jnp.negative(z))), np.nan)


def ppf(p: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The quantile function ``loc - scale log(-log p)``; NaN outside (0, 1)."""
    p, loc, scale = promote(p, loc, scale)
    inside = jnp.logical_and(p > 0, p < 1)
    safe_p = jnp.where(inside, p, 0.5)
    quantile = jnp.subtract(loc, jnp.multiply(scale, jnp.log(jnp.negative(jnp.log(safe_p)))))
    return jnp.where(inside, quantile, np.nan)
