"""``jax.interpreters``: the rule tables of user-defined primitives (``ad``, ``batching``, ``mlir``)."""
from ember.compat.jax.interpreters import ad, batching, mlir, partial_eval  # noqa: F401
