"""The Laplace (double exponential) distribution centred on ``loc``."""
from __future__ import annotations

import math
from typing import Any

import ember.numpy as jnp
from ember.scipy.stats._common import standardize

__all__ = ["cdf", "logpdf", "pdf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    z, scale = standardize(x, loc, scale)
    return jnp.negative(jnp.add(jnp.add(jnp.abs(z), jnp.log(scale)), math.log(2)))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``exp(z) / 2`` left of ``loc``, ``1 - exp(-z) / 2`` right of it."""
    z, _ = standardize(x, loc, scale)
    half_tail = jnp.multiply(0.5, jnp.exp(jnp.negative(jnp.abs(z))))
    return jnp.where(z <= 0, half_tail, jnp.subtract(1, half_tail))
