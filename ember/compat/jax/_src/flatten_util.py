"""``jax._src.flatten_util``: ``ravel_pytree`` (as ``jax.flatten_util``)."""
from ember.compat.jax.flatten_util import ravel_pytree  # noqa: F401
