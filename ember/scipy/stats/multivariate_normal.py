"""The multivariate normal distribution with mean vector ``mean`` and covariance ``cov``."""
from __future__ import annotations

import math
from typing import Any

import ember.numpy as jnp
from ember.lax import linalg as lax_linalg
from ember.scipy.stats._common import promote

__all__ = ["logpdf", "pdf"]

_LOG_2PI = math.log(2 * math.pi)


def logpdf(x: Any, mean: Any, cov: Any, allow_singular: None = None) -> Any:
    """The log-density at ``x`` (..., n). As in JAX: a scalar ``mean`` makes a 1-D normal with
    variance ``cov``; a scalar ``cov`` is ``cov * I``; otherwise ``cov`` (..., n, n) is factored
    by Cholesky (a matrix that is not positive definite gives NaN), and batch dimensions
    broadcast."""
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = promote(x, mean, cov)
    diff = jnp.subtract(x, mean)
    if mean.ndim == 0:
        return jnp.multiply(-0.5, jnp.add(jnp.divide(jnp.square(diff), cov), jnp.add(jnp.log(cov), _LOG_2PI)))
    n = mean.shape[-1]
    if cov.ndim == 0:
        squared_norm = jnp.sum(jnp.square(diff), axis=-1)
        return jnp.multiply(-0.5, jnp.add(jnp.divide(squared_norm, cov),
                                          jnp.multiply(n, jnp.add(jnp.log(cov), _LOG_2PI))))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError("multivariate_normal.logpdf got incompatible shapes")
    factor = lax_linalg.cholesky(cov)
    # y = L^-1 (x - mean), so that |y|^2 is the Mahalanobis distance.
    whiten = jnp.vectorize(lambda f, d: lax_linalg.triangular_solve(f, d, lower=True, transpose_a=True),
                           signature="(n,n),(n)->(n)")
    y = whiten(factor, diff)
    log_det = jnp.sum(jnp.log(jnp.diagonal(factor, axis1=-2, axis2=-1)), axis=-1)
    return jnp.subtract(jnp.subtract(jnp.multiply(-0.5, jnp.sum(jnp.square(y), axis=-1)), n / 2 * _LOG_2PI), log_det)


def pdf(x: Any, mean: Any, cov: Any) -> Any:
    return jnp.exp(logpdf(x, mean, cov))
