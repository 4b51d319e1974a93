"""``jax.ad_checkpoint``: ``checkpoint_name``, ``checkpoint_policies``, ``print_saved_residuals``
and the policy answers ``Recompute`` / ``Saveable`` / ``Offloadable`` (ember's, from
``ember.transforms.checkpoint``). ``saved_residuals`` (JAX's ``jax._src.ad_checkpoint``) is here
too. As in JAX 0.10, ``checkpoint`` and ``remat`` are not: they are ``jax.checkpoint`` /
``jax.remat``.
"""
from __future__ import annotations

from typing import Any

from ember.transforms.checkpoint import (  # noqa: F401
    Offloadable,
    Recompute,
    Saveable,
    checkpoint_name,
    checkpoint_policies,
    print_saved_residuals,
    saved_residuals,
)

_REMOVED = {
    "checkpoint": "jax.ad_checkpoint.checkpoint was deprecated in JAX v0.8.2 and removed in JAX v0.10.0; use "
                  "jax.checkpoint instead.",
    "remat": "jax.ad_checkpoint.remat was deprecated in JAX v0.8.2 and removed in JAX v0.10.0; use jax.remat "
             "instead.",
}


def __getattr__(name: str) -> Any:
    if name in _REMOVED:
        raise AttributeError(_REMOVED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
