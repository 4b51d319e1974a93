"""The Pareto distribution with shape ``b``, on [``loc + scale``, inf)."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy.stats._common import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def _scaled(x: Any, b: Any, loc: Any, scale: Any) -> tuple[Any, Any, Any, Any]:
    """``(z, b, scale, below)``: ``z = (x - loc) / scale``, ``below`` where ``x`` is under the support."""
    x, b, loc, scale = promote(x, b, loc, scale)
    return jnp.divide(jnp.subtract(x, loc), scale), b, scale, x < jnp.add(loc, scale)


def logpdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``log(b / scale) - (b + 1) log z``; -inf below ``loc + scale``."""
    z, b, scale, below = _scaled(x, b, loc, scale)
    log_probs = jnp.negative(jnp.add(jnp.log(jnp.divide(scale, b)), jnp.multiply(jnp.add(b, 1), jnp.log(z))))
    return jnp.where(below, -np.inf, log_probs)


def pdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, b, loc, scale))


def cdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - z**-b``, as ``-expm1(-b log z)`` (accurate near the lower end); 0 below it."""
    z, b, _, below = _scaled(x, b, loc, scale)
    return jnp.where(below, 0, jnp.negative(jnp.expm1(jnp.multiply(jnp.negative(b), jnp.log(z)))))


def logcdf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, b, _, below = _scaled(x, b, loc, scale)
    return jnp.where(below, -np.inf, jnp.log1p(jnp.negative(jnp.power(z, jnp.negative(b)))))


def logsf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-b log z``; 0 below the support."""
    z, b, _, below = _scaled(x, b, loc, scale)
    return jnp.where(below, 0, jnp.negative(jnp.multiply(b, jnp.log(z))))


def sf(x: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logsf(x, b, loc, scale))


def ppf(q: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The quantile function ``loc + scale (1 - q)**(-1/b)``; NaN outside [0, 1]."""
    q, b, loc, scale = promote(q, b, loc, scale)
    quantile = jnp.add(loc, jnp.multiply(scale, jnp.power(jnp.subtract(1, q), jnp.negative(jnp.reciprocal(b)))))
    return jnp.where(jnp.isnan(q) | (q < 0) | (q > 1), np.nan, quantile)
