"""The Cauchy distribution centred on ``loc`` with half-width ``scale``."""
from __future__ import annotations

import math
from typing import Any

import ember.numpy as jnp
from ember.scipy.stats._common import promote, standardize

__all__ = ["cdf", "isf", "logcdf", "logpdf", "logsf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-log(pi scale) - log1p(z^2)``."""
    z, scale = standardize(x, loc, scale)
    return jnp.negative(jnp.add(jnp.log(jnp.multiply(math.pi, scale)), jnp.log1p(jnp.square(z))))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1/2 + arctan(z) / pi``, formed as ``arctan2(1, -z) / pi``: the same value without the
    cancellation in the left tail."""
    z, _ = standardize(x, loc, scale)
    return jnp.divide(jnp.arctan2(jnp.ones_like(z), jnp.negative(z)), math.pi)


def logcdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(cdf(x, loc, scale))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - cdf`` as ``arctan2(1, z) / pi`` (accurate in the right tail)."""
    z, _ = standardize(x, loc, scale)
    return jnp.divide(jnp.arctan2(jnp.ones_like(z), z), math.pi)


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(sf(x, loc, scale))


def _cot_pi(q: Any) -> Any:
    """``cot(pi q)`` for ``q`` in [0, 1], from whichever end is nearer (``1 - q`` is exact above
    1/2), so that quantiles far in either tail keep their precision."""
    lower = q <= 0.5
    return jnp.where(lower, jnp.reciprocal(jnp.tan(jnp.multiply(math.pi, q))),
                     jnp.negative(jnp.reciprocal(jnp.tan(jnp.multiply(math.pi, jnp.subtract(1, q))))))


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The quantile function ``loc + scale tan(pi (q - 1/2))``, as ``loc - scale cot(pi q)``:
    -inf at 0, +inf at 1."""
    q, loc, scale = promote(q, loc, scale)
    return jnp.subtract(loc, jnp.multiply(_cot_pi(q), scale))


def isf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The inverse of ``sf``: ``loc + scale tan(pi (1/2 - q))``, as ``loc + scale cot(pi q)``."""
    q, loc, scale = promote(q, loc, scale)
    return jnp.add(loc, jnp.multiply(_cot_pi(q), scale))
