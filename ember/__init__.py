"""ember: a just-in-time compiler for numerical Python.

``ember.jit`` traces a function to a typed IR once per argument signature,
compiles it and caches the executable; ``ember.numpy`` is the JAX-style
NumPy API and ``ember.lax`` the primitive operations and control flow.
"""
from ember import (  # noqa: F401
    compiler,  # noqa: F401  (ember.compiler.optimize: the IR pass pipeline)
    debug,  # noqa: F401  (ember.debug.print / callback: run-time printing in jitted code)
    distributed,  # noqa: F401  (ember.distributed.initialize: several processes over MPI)
    dtypes,  # noqa: F401
    errors,  # noqa: F401
    lax,  # noqa: F401
    nn,  # noqa: F401
    numpy,  # noqa: F401
    partition,  # noqa: F401  (jit with in_shardings: one partitioned program per device)
    random,  # noqa: F401  (jax.random's API: same keys, same values)
    scipy,  # noqa: F401  (jax.scipy: special, stats, linalg)
    sharding,  # noqa: F401  (jax.sharding: meshes, partition specs, shardings)
    tree,
    tree_util,
)
from ember.api import default_matmul_precision, disable_jit, eval_shape, jit, make_jaxpr, typeof  # noqa: F401
from ember.callbacks import io_callback, pure_callback  # noqa: F401
from ember.config import config  # noqa: F401
from ember.core.array import (
    Array,  # noqa: F401
    ShapeDtypeStruct,  # noqa: F401
)
from ember.core.caches import clear_caches  # noqa: F401
from ember.distributed import make_array_from_process_local_data  # noqa: F401
from ember.jax_import import install_as_jax  # noqa: F401
from ember.lax.refs import Ref, freeze, new_ref  # noqa: F401  (mutable array references: docs/refs.md)
from ember.parallel import (  # noqa: F401
    make_array_from_callback,
    make_array_from_single_device_arrays,
    pmap,
    reshard,
    shard_map,
)
from ember.runtime import eager  # noqa: F401  (eager operations on native code: installs itself)
from ember.transforms.api import (  # noqa: F401
    closure_convert,
    custom_gradient,
    custom_jvp,
    custom_vjp,
    grad,
    hessian,
    jacfwd,
    jacobian,
    jacrev,
    jvp,
    linear_transpose,
    linearize,
    value_and_grad,
    vjp,
)
from ember.transforms.batching import vmap  # noqa: F401
from ember.transforms.checkpoint import checkpoint, checkpoint_policies, remat  # noqa: F401
from ember.utilities import (  # noqa: F401
    block_until_ready,
    default_backend,
    device_get,
    device_put,
    devices,
    ensure_compile_time_eval,
    from_dlpack,
    named_call,
    wait_for_compiles,
)
from ember.version import __version__  # noqa: F401

