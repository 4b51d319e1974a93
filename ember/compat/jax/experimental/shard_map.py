"""``jax.experimental.shard_map``: ``shard_map`` at its older path (``ember.parallel``)."""
from ember.parallel import shard_map  # noqa: F401

__all__ = ["shard_map"]
