"""``ember.scipy.optimize``: SciPy's ``minimize`` (``jax.scipy.optimize``) with BFGS, gradients
by automatic differentiation, the iteration a ``lax.while_loop`` so that it runs under jit."""
from ember.scipy.optimize._minimize import OptimizeResults, minimize

__all__ = ["OptimizeResults", "minimize"]
