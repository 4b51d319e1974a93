"""``jax.distributed`` while ember stands in for JAX: several processes over MPI
(``ember.distributed``; see docs/distributed.md)."""
from __future__ import annotations

from ember.distributed import initialize, is_initialized, shutdown

__all__ = ["initialize", "is_initialized", "shutdown"]
