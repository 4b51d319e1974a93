"""The left-skewed Gumbel distribution (of the minimum) with mode ``loc``. A non-positive
``scale`` gives NaN."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy.stats._common import promote, standardize

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``z - exp(z) - log(scale)``."""
    z, scale = standardize(x, loc, scale)
    return jnp.where(scale > 0, jnp.subtract(jnp.subtract(z, jnp.exp(z)), jnp.log(scale)), np.nan)


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(1 - exp(-exp(z)))``, as ``log(-expm1(-exp(z)))``."""
    z, scale = standardize(x, loc, scale)
    return jnp.where(scale > 0, jnp.log(jnp.negative(jnp.expm1(jnp.negative(jnp.exp(z))))), np.nan)


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logcdf(x, loc, scale))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-exp(z)``."""
    z, scale = standardize(x, loc, scale)
    return jnp.where(scale > 0, jnp.negative(jnp.exp(z)), np.nan)


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logsf(x, loc, scale))


def ppf(p: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The quantile function ``loc + scale log(-log1p(-p))``; NaN outside (0, 1)."""
    p, loc, scale = promote(p, loc, scale)
    inside = jnp.logical_and(p > 0, p < 1)
    safe_p = jnp.where(inside, p, 0.5)
    quantile = jnp.add(loc, jnp.multiply(scale, jnp.log(jnp.negative(jnp.log1p(jnp.negative(safe_p))))))
    return jnp.where(inside, quantile, np.nan)
