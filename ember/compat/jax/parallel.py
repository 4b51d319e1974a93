"""``jax.pmap`` and ``jax.shard_map``: ember's (``ember.parallel``)."""
from ember.parallel import pmap, shard_map  # noqa: F401

__all__ = ["pmap", "shard_map"]
