"""Vector quantization (``jax.scipy.cluster.vq``): each observation's nearest code."""
from __future__ import annotations

from typing import Any

import ember.numpy as jnp
from ember.lax.base import aval
from ember.numpy.arraylike import check_arraylike
from ember.numpy.core import ensure_array, promote_dtypes_inexact

__all__ = ["vq"]


def vq(obs: Any, code_book: Any, check_finite: bool = True) -> tuple[Any, Any]:
    """``(code, dist)``: for each row of ``obs`` (M, N) the index of the nearest row of
    ``code_book`` (K, N) in Euclidean distance (the first on ties) and that distance. 1-D
    inputs are scalar observations and codes. ``check_finite`` is accepted and ignored."""
    check_arraylike("scipy.cluster.vq.vq", obs, code_book)
    obs, code_book = promote_dtypes_inexact(ensure_array(obs), ensure_array(code_book))
    if aval(obs).ndim != aval(code_book).ndim:
        raise ValueError("Observation and code_book should have the same rank")
    if aval(obs).ndim == 1:
        obs, code_book = obs[:, None], code_book[:, None]
    if aval(obs).ndim != 2:
        raise ValueError("ndim different than 1 or 2 are not supported")
    dist = jnp.linalg.norm(obs[:, None, :] - code_book[None, :, :], axis=-1)  # (M, K)
    code = jnp.argmin(dist, axis=-1)
    return code, jnp.take_along_axis(dist, code[:, None], axis=-1)[:, 0]
