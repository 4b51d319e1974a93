"""``ember.nn``: activation functions and normalizations for neural networks (as ``jax.nn``)."""
from ember.nn.functions import *  # noqa: F401,F403
from ember.nn.functions import __all__  # noqa: F401
