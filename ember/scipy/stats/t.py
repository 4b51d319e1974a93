"""Student's t distribution with ``df`` degrees of freedom, shifted and scaled."""
from __future__ import annotations

import math
from typing import Any

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``gammaln((df+1)/2) - gammaln(df/2) - log(sqrt(pi df) scale) - (df+1)/2 log1p(z^2/df)``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    z = jnp.divide(jnp.subtract(x, loc), scale)
    half_df_plus_half = jnp.multiply(0.5, jnp.add(df, 1))
    normalizer = jnp.subtract(special.gammaln(half_df_plus_half), special.gammaln(jnp.multiply(0.5, df)))
    log_width = jnp.add(jnp.multiply(0.5, jnp.add(jnp.log(df), math.log(math.pi))), jnp.log(scale))
    decay = jnp.multiply(half_df_plus_half, jnp.log1p(jnp.divide(jnp.square(z), df)))
    return jnp.subtract(jnp.subtract(normalizer, log_width), decay)


def pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, df, loc, scale))
