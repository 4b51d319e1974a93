"""``jax._src.core``: the names libraries take from JAX's core module (as ``jax.core``)."""
from ember.compat.jax.core import *  # noqa: F401,F403
from ember.compat.jax.core import ShapedArray


def physical_aval(aval: ShapedArray) -> ShapedArray:
    """The abstract value of an array's storage: its own, for ember's dtypes."""
    return aval
