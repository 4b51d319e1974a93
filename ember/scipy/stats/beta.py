"""The beta distribution with shapes ``a`` and ``b`` on [``loc``, ``loc + scale``]."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["cdf", "logcdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``(a - 1) log y + (b - 1) log1p(-y) - betaln(a, b) - log(scale)`` at
    ``y = (x - loc) / scale``; -inf outside [0, 1], NaN unless ``a``, ``b`` and ``scale`` are
    positive."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    y = jnp.divide(jnp.subtract(x, loc), scale)
    log_linear = jnp.add(special.xlogy(jnp.subtract(a, 1), y), special.xlog1py(jnp.subtract(b, 1), jnp.negative(y)))
    log_probs = jnp.subtract(jnp.subtract(log_linear, special.betaln(a, b)), jnp.log(scale))
    outside = jnp.logical_or(x > jnp.add(loc, scale), x < loc)
    result = jnp.where(outside, -np.inf, log_probs)
    invalid = jnp.logical_or(jnp.logical_or(a <= 0, b <= 0), scale <= 0)
    return jnp.where(invalid, np.nan, result)


def pdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, a, b, loc, scale))


def _clipped(x: Any, a: Any, b: Any, loc: Any, scale: Any) -> tuple[Any, Any, Any]:
    """``(a, b, y)`` with ``y = (x - loc) / scale`` clipped to [0, 1]."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return a, b, jnp.clip(jnp.divide(jnp.subtract(x, loc), scale), 0, 1)


def cdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``betainc(a, b, y)``."""
    return special.betainc(*_clipped(x, a, b, loc, scale))


def logcdf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(cdf(x, a, b, loc, scale))


def sf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``betainc(b, a, 1 - y)``, the mirrored distribution's cdf: accurate in the right tail."""
    a, b, y = _clipped(x, a, b, loc, scale)
    return special.betainc(b, a, jnp.subtract(1, y))


def logsf(x: Any, a: Any, b: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.log(sf(x, a, b, loc, scale))
