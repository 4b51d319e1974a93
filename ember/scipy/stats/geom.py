"""The geometric distribution: the number of trials up to the first success, each a success with
probability ``p`` (shifted by ``loc``)."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["logpmf", "pmf"]


def logpmf(k: Any, p: Any, loc: Any = 0) -> Any:
    """``(x - 1) log1p(-p) + log p`` at ``x = k - loc``; -inf for ``x < 1``."""
    k, p, loc = promote(k, p, loc)
    x = jnp.subtract(k, loc)
    log_probs = jnp.add(special.xlog1py(jnp.subtract(x, 1), jnp.negative(p)), jnp.log(p))
    return jnp.where(x <= 0, -np.inf, log_probs)


def pmf(k: Any, p: Any, loc: Any = 0) -> Any:
    return jnp.exp(logpmf(k, p, loc))
