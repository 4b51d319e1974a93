"""``jax.extend``: what libraries use to define primitives of their own (``jax.extend.core``)."""
from ember.compat.jax.extend import core, linear_util, source_info_util  # noqa: F401
