"""``ember.scipy.cluster``: SciPy's clustering helpers (``jax.scipy.cluster``); ``vq`` only."""
from ember.scipy.cluster import vq  # noqa: F401
