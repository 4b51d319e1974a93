"""The gamma distribution with shape ``a``, shifted by ``loc`` and scaled by ``scale``."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``(a - 1) log y - y - gammaln(a) - log(scale)`` at ``y = (x - loc) / scale``; -inf below
    ``loc``."""
    x, a, loc, scale = promote(x, a, loc, scale)
    inside = x >= loc
    y = jnp.where(inside, jnp.divide(jnp.subtract(x, loc), scale), 1)
    log_linear = jnp.subtract(special.xlogy(jnp.subtract(a, 1), y), y)
    log_probs = jnp.subtract(log_linear, jnp.add(special.gammaln(a), jnp.log(scale)))
    return jnp.where(inside, log_probs, -np.inf)


def pdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, a, loc, scale))


def _standard(x: Any, a: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    """``(a, y)`` with ``y = (x - loc) / scale`` clipped below at 0 (where the cdf is 0)."""
    x, a, loc, scale = promote(x, a, loc, scale)
    return a, jnp.maximum(jnp.divide(jnp.subtract(x, loc), scale), 0)


def cdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammainc(a, y)``."""
    return special.gammainc(*_standard(x, a, loc, scale))


def logcdf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(cdf(x, a, loc, scale))


def sf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaincc(a, y)``: accurate in the right tail, not ``1 - cdf``."""
    return special.gammaincc(*_standard(x, a, loc, scale))


def logsf(x: Any, a: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(sf(x, a, loc, scale))
