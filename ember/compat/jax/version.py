"""``jax.version``: the JAX release whose API ember follows."""
_version = "0.10.2"
__version__ = _version
__version_info__ = (0, 10, 2)
