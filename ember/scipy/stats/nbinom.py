"""The negative binomial distribution: failures before the ``n``-th success, each trial a success
with probability ``p`` (shifted by ``loc``)."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    """``gammaln(y + n) - gammaln(n) - gammaln(y + 1) + n log p + y log1p(-p)`` at ``y = k - loc``;
    -inf for ``y < 0``."""
    k, n, p, loc = promote(k, n, p, loc)
    y = jnp.subtract(k, loc)
    log_comb = jnp.subtract(jnp.subtract(special.gammaln(jnp.add(y, n)), special.gammaln(n)),
                            special.gammaln(jnp.add(y, 1)))
    log_linear = jnp.add(special.xlogy(n, p), special.xlogy(y, jnp.subtract(1, p)))
    return jnp.where(k < loc, -np.inf, jnp.add(log_comb, log_linear))


def pmf(k: Any, n: Any, p: Any, loc: Any = 0) -> Any:
    return jnp.exp(logpmf(k, n, p, loc))
