"""The Dirichlet distribution with concentrations ``alpha``, over the simplex along the first
axis of ``x``."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, alpha: Any) -> Any:
    """``sum((alpha - 1) log x) - sum(gammaln(alpha)) + gammaln(sum(alpha))`` over the first axis;
    ``x`` may leave out its last entry (``1 - sum(x)``). -inf off the simplex (an entry not
    positive, or a sum further than 1e-6 from 1)."""
    x, alpha = promote(x, alpha)
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    if x.ndim == 0 or x.shape[0] not in (alpha.shape[0], alpha.shape[0] - 1):
        raise ValueError("`x` must have either the same number of entries as `alpha` "
                         f"or one entry fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
    if x.shape[0] != alpha.shape[0]:
        x = jnp.concatenate([x, jnp.subtract(1, jnp.sum(x, axis=0, keepdims=True))], axis=0)
    normalizer = jnp.subtract(jnp.sum(special.gammaln(alpha)), special.gammaln(jnp.sum(alpha)))
    alpha = jnp.reshape(alpha, alpha.shape + (1,) * (x.ndim - 1))
    log_probs = jnp.subtract(jnp.sum(special.xlogy(jnp.subtract(alpha, 1), x), axis=0), normalizer)
    on_simplex = jnp.logical_and(jnp.all(x > 0, axis=0), jnp.abs(jnp.subtract(jnp.sum(x, axis=0), 1)) < 1e-6)
    return jnp.where(on_simplex, log_probs, -np.inf)


def pdf(x: Any, alpha: Any) -> Any:
    return jnp.exp(logpdf(x, alpha))
