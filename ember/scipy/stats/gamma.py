"""The gamma distribution with shape ``a``, shifted by ``loc`` and scaled by ``scale``.

Only the density: the distribution function needs the regularized incomplete gamma function,
which ``ember.scipy.special`` does not have.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["logpdf", "pdf"]


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
