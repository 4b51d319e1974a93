"""JAX's example libraries, the same API in ember's code: ``stax`` (neural-network layers as
``(init_fun, apply_fun)`` pairs) and ``optimizers`` (``(init_fun, update_fun, get_params)``
triples). JAX's own ``examples/`` train with them (``jax.example_libraries``)."""
from ember.example_libraries import optimizers, stax  # noqa: F401
