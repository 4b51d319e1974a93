"""``jax._src.ad_util``: the primitive behind ``lax.stop_gradient``."""
from ember.lax.stop_gradient import stop_gradient_p  # noqa: F401
