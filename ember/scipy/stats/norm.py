"""The normal distribution with mean ``loc`` and standard deviation ``scale``."""
from __future__ import annotations

import math
from typing import Any

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote, standardize

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, scale = standardize(x, loc, scale)
    return jnp.subtract(jnp.multiply(-0.5, jnp.square(z)), jnp.add(jnp.log(scale), 0.5 * math.log(2 * math.pi)))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return special.ndtr(standardize(x, loc, scale)[0])


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return special.log_ndtr(standardize(x, loc, scale)[0])


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - cdf``, computed as ``cdf`` of the mirrored point (accurate in the right tail)."""
    return special.ndtr(jnp.negative(standardize(x, loc, scale)[0]))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return special.log_ndtr(jnp.negative(standardize(x, loc, scale)[0]))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The quantile function (inverse of ``cdf``)."""
    q, loc, scale = promote(q, loc, scale)
    return jnp.add(jnp.multiply(special.ndtri(q), scale), loc)


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The inverse of ``sf``: ``loc - scale ndtri(q)`` (``ppf(1 - q)`` without rounding ``1 - q``)."""
    q, loc, scale = promote(q, loc, scale)
    return jnp.subtract(loc, jnp.multiply(special.ndtri(q), scale))
