"""The uniform distribution on ``[loc, loc + scale]``."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.scipy.stats._common import promote

__all__ = ["cdf", "logpdf", "pdf", "ppf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote(x, loc, scale)
    outside = jnp.logical_or(x < loc, x > jnp.add(loc, scale))
    return jnp.where(outside, -np.inf, jnp.negative(jnp.log(scale)))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, loc, scale = promote(x, loc, scale)
    fraction = jnp.clip(jnp.divide(jnp.subtract(x, loc), scale), 0, 1)
    return lax.convert_element_type(fraction, fraction.dtype)  # strongly typed, as JAX's


def ppf(q: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``loc + q * scale`` for ``q`` in [0, 1], NaN outside."""
    q, loc, scale = promote(q, loc, scale)
    return jnp.where(jnp.logical_and(q >= 0, q <= 1), jnp.add(loc, jnp.multiply(q, scale)), np.nan)
