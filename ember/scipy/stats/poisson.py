"""The Poisson distribution with mean ``mu`` (shifted by ``loc``)."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["cdf", "logpmf", "pmf"]


def logpmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``x log(mu) - gammaln(x + 1) - mu`` at ``x = k - loc``; -inf unless ``x`` is a natural number."""
    k, mu, loc = promote(k, mu, loc)
    x = jnp.subtract(k, loc)
    log_probs = jnp.subtract(jnp.subtract(special.xlogy(x, mu), special.gammaln(jnp.add(x, 1))), mu)
    return jnp.where(jnp.logical_or(x < 0, x != jnp.round(x)), -np.inf, log_probs)


def pmf(k: Any, mu: Any, loc: Any = 0) -> Any:
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k: Any, mu: Any, loc: Any = 0) -> Any:
    """``P(X <= k)`` as ``gammaincc(floor(k - loc) + 1, mu)``; 0 below ``loc``."""
    k, mu, loc = promote(k, mu, loc)
    x = jnp.subtract(k, loc)
    return jnp.where(x < 0, 0, special.gammaincc(jnp.add(jnp.floor(jnp.maximum(x, 0)), 1), mu))
