"""The beta-binomial distribution: successes in ``n`` trials whose probability is drawn from
``beta(a, b)`` (shifted by ``loc``)."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, a: Any, b: Any, loc: Any = 0) -> Any:
    """``-log1p(n) - betaln(n - y + 1, y + 1) + betaln(y + a, n - y + b) - betaln(a, b)`` at
    ``y = floor(k) - loc``: -inf outside [0, n], NaN for negative ``n`` or non-positive
    ``a``, ``b``."""
    k, n, a, b, loc = promote(k, n, a, b, loc)
    y = jnp.subtract(jnp.floor(k), loc)
    n_minus_y = jnp.subtract(n, y)
    log_comb = jnp.negative(jnp.add(jnp.log1p(n), special.betaln(jnp.add(n_minus_y, 1), jnp.add(y, 1))))
    log_betas = jnp.subtract(special.betaln(jnp.add(y, a), jnp.add(n_minus_y, b)), special.betaln(a, b))
    log_probs = jnp.where(jnp.logical_and(y == 0, n == 0), 0.0, jnp.add(log_comb, log_betas))
    outside = jnp.logical_or(jnp.logical_or(y < jnp.negative(loc), y > n), jnp.add(y, a) <= 0)
    log_probs = jnp.where(outside, -np.inf, log_probs)
    return jnp.where(jnp.logical_or(jnp.logical_or(n < 0, a <= 0), b <= 0), np.nan, log_probs)


def pmf(k: Any, n: Any, a: Any, b: Any, loc: Any = 0) -> Any:
    return jnp.exp(logpmf(k, n, a, b, loc))
