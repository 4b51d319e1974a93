"""``jax._src.state.types``: the type of array references (libraries test for it), which is
``jax.ref.AbstractRef``."""
from ember.lax.refs import AbstractRef  # noqa: F401
