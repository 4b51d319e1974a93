"""JAX's private modules that libraries import, with just the names they use (JAX's own
``jax._src`` is its implementation; these are small stand-ins of ember's)."""
