"""The logistic distribution centred on ``loc``."""
from __future__ import annotations

from typing import Any

import ember.numpy as jnp
from ember.scipy import special
from ember.scipy.stats._common import promote, standardize

__all__ = ["cdf", "logpdf", "pdf", "ppf", "sf"]


def logpdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """``-|z| - 2 log1p(exp(-|z|)) - log(scale)``: symmetric, so ``exp`` never overflows."""
    z, scale = standardize(x, loc, scale)
    minus_abs = jnp.negative(jnp.abs(z))
    return jnp.subtract(jnp.subtract(minus_abs, jnp.multiply(2, jnp.log1p(jnp.exp(minus_abs)))), jnp.log(scale))


def pdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return special.expit(standardize(x, loc, scale)[0])


def sf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return special.expit(jnp.negative(standardize(x, loc, scale)[0]))


def ppf(x: Any, loc: Any = 0, scale: Any = 1) -> Any:
    """The quantile function ``loc + scale * logit(x)``."""
    x, loc, scale = promote(x, loc, scale)
    return jnp.add(jnp.multiply(special.logit(x), scale), loc)
