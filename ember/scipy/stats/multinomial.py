"""The multinomial distribution: counts ``x`` (last axis) of ``n`` draws among categories of
probabilities ``p``."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import dtypes
from ember.numpy.core import ensure_array
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(x: Any, n: Any, p: Any) -> Any:
    """``gammaln(n + 1) + sum(x log p - gammaln(x + 1))`` over the last axis; -inf where the
    counts do not add up to ``n``. ``x`` and ``n`` must be integers."""
    (p,) = promote(p)
    x, n = ensure_array(x), ensure_array(n)
    if not (dtypes.issubdtype(jnp.result_type(x, n), np.integer)):
        raise ValueError(f"x and n must be of integer type; got x.dtype={x.dtype}, n.dtype={n.dtype}")
    x, n = x.astype(p.dtype), n.astype(p.dtype)
    log_probs = jnp.add(special.gammaln(jnp.add(n, 1)),
                        jnp.sum(jnp.subtract(special.xlogy(x, p), special.gammaln(jnp.add(x, 1))), axis=-1))
    return jnp.where(jnp.sum(x, axis=-1) == n, log_probs, -np.inf)


def pmf(x: Any, n: Any, p: Any) -> Any:
    return jnp.exp(logpmf(x, n, p))
