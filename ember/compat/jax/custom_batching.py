"""``jax.custom_batching``: functions with a user-given ``vmap`` rule (ember.transforms.custom_batching)."""
from ember.transforms.custom_batching import custom_vmap, sequential_vmap

__all__ = ["custom_vmap", "sequential_vmap"]
