"""The Bernoulli distribution: 1 with probability ``p``, else 0 (shifted by ``loc``)."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """``x log p + (1 - x) log(1 - p)`` at ``x = k - loc`` in [0, 1] (as JAX, not only at 0
    and 1); -inf outside."""
    k, p, loc = promote(k, p, loc)
    x = jnp.subtract(k, loc)
    log_probs = jnp.add(special.xlogy(x, p), special.xlog1py(jnp.subtract(1, x), jnp.negative(p)))
    return jnp.where(jnp.logical_or(x < 0, x > 1), -np.inf, log_probs)


def pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    return jnp.exp(logpmf(k, p, loc))
