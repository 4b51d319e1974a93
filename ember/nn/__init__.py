"""``ember.nn``: activation functions, normalizations, attention and parameter initializers
for neural networks (as ``jax.nn``)."""
from ember.nn import initializers  # noqa: F401
from ember.nn.attention import dot_product_attention  # noqa: F401
from ember.nn.functions import *  # noqa: F401,F403
from ember.nn.functions import __all__ as _function_names

__all__ = [*_function_names, "dot_product_attention", "initializers"]
