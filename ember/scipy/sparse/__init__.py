"""``ember.scipy.sparse``: SciPy's iterative linear solvers (``jax.scipy.sparse``); ``linalg`` only."""
from ember.scipy.sparse import linalg  # noqa: F401
