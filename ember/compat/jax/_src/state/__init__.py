"""``jax._src.state``: JAX's mutable state (array references); see ``types``."""
