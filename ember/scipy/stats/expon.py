"""The exponential distribution, shifted by ``loc``, with mean ``loc + scale``."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember.scipy.stats._common import standardize

__all__ = ["cdf", "logpdf", "logsf", "pdf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, scale = standardize(x, loc, scale)
    return jnp.where(z < 0, -np.inf, jnp.negative(jnp.add(z, jnp.log(scale))))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def logsf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, _ = standardize(x, loc, scale)
    return jnp.where(z < 0, 0, jnp.negative(z))


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logsf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``1 - exp(-z)`` as ``-expm1(-z)``, accurate for small ``z``."""
    z, _ = standardize(x, loc, scale)
    return jnp.where(z < 0, 0, jnp.negative(jnp.expm1(jnp.negative(z))))
