"""``jax.experimental``: the experimental names that libraries use and ember has."""
from ember.callbacks import io_callback  # noqa: F401
