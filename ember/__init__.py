"""ember: a just-in-time compiler for numerical Python.

``ember.jit`` traces a function to a typed IR once per argument signature,
compiles it and caches the executable; ``ember.numpy`` is the JAX-style
NumPy API and ``ember.lax`` the primitive operations and control flow.
"""
from ember.config import config  # noqa: F401
from ember import dtypes  # noqa: F401
from ember import errors  # noqa: F401
from ember import tree, tree_util  # noqa: F401
from ember.api import disable_jit, eval_shape, jit, make_jaxpr  # noqa: F401
from ember.runtime.cache import clear_caches  # noqa: F401
from ember.runtime.array import Array  # noqa: F401
from ember import lax  # noqa: F401
from ember import numpy  # noqa: F401
from ember.transforms.api import (  # noqa: F401
    custom_jvp, custom_vjp, grad, hessian, jacfwd, jacrev, jvp, linearize, value_and_grad, vjp)
from ember.transforms.batching import vmap  # noqa: F401
from ember import nn  # noqa: F401
from ember import random  # noqa: F401  (jax.random's API: same keys, same values)
from ember import scipy  # noqa: F401  (jax.scipy: special, stats, linalg)
from ember import compiler  # noqa: F401  (ember.compiler.optimize: the IR pass pipeline)
from ember.runtime.api import block_until_ready, device_put, devices, from_dlpack, ShapeDtypeStruct  # noqa: F401
from ember import debug  # noqa: F401  (ember.debug.print / callback: run-time printing in jitted code)
from ember.callbacks import pure_callback  # noqa: F401
from ember.transforms.checkpoint import checkpoint, checkpoint_policies, remat  # noqa: F401
from ember.utilities import default_backend, device_get, ensure_compile_time_eval, named_call  # noqa: F401

__version__ = "0.1.0"
