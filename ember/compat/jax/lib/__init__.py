"""``jax.lib``: in JAX 0.10 it holds only ``__version__``, the version of the compiled half
(jaxlib) that the Python half runs on. ember has no such half; its ``jax.lib.__version__`` is the
JAX release whose API ember follows, the same as ``jax.__version__`` (libraries compare the two)."""
from ember.compat.jax.version import __version__  # noqa: F401
