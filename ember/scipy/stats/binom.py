"""The binomial distribution: successes in ``n`` trials of probability ``p`` (shifted by ``loc``)."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """``log C(n, y) + y log p + (n - y) log1p(-p)`` at ``y = k - loc``: 0 where the outcome is
    certain (``y == n == 0``, or ``p`` 0 or 1 at the matching end), -inf outside [0, n]."""
    k, n, p, loc = promote(k, n, p, loc)
    y = jnp.subtract(k, loc)
    log_comb = jnp.subtract(special.gammaln(jnp.add(n, 1)),
                            jnp.add(special.gammaln(jnp.add(y, 1)), special.gammaln(jnp.add(jnp.subtract(n, y), 1))))
    log_linear = jnp.add(special.xlogy(y, p), special.xlog1py(jnp.subtract(n, y), jnp.negative(p)))
    certain = jnp.logical_or(jnp.logical_and(y == 0, n == 0), log_linear == 0)
    log_probs = jnp.where(certain, 0.0, jnp.add(log_comb, log_linear))
    return jnp.where(jnp.logical_and(k >= loc, k < jnp.add(jnp.add(loc, n), 1)), log_probs, -np.inf)


def pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    return jnp.exp(logpmf(k, n, p, loc))
