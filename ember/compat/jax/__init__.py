"""The ``jax`` module while ember stands in for it (``ember.install_as_jax()``).

It holds JAX's top-level names that ember provides, each the ember object of the same API
(``jax.jit`` is ``ember.jit``). A JAX name that ember does not provide is an ``AttributeError``
that says so, as any missing attribute is; ``MISSING`` lists them. ``__version__`` is the JAX
release whose API ember follows: libraries compare it to decide which API to use.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

import ember
from ember import (  # noqa: F401  (submodules: ``jax.numpy`` and the others are ember's, see ember.jax_import)
    debug,
    errors,
    lax,
    nn,
    numpy,
    random,
    scipy,
    sharding,
    tree,
    tree_util,
)
from ember.compat.jax import (  # noqa: F401
    ad_checkpoint,
    api_util,
    core,
    custom_batching,
    custom_derivatives,
    distributed,
    dlpack,
    dtypes,
    experimental,
    extend,
    flatten_util,
    image,
    interpreters,
    lib,
    ops,
    ref,
    stages,
    typing,
    version,
)
from ember.compat.jax.parallel import pmap, shard_map  # noqa: F401
from ember.core import sharding as sharding_core
from ember.core.array import Device  # noqa: F401
from ember.core.sharding import Shard  # noqa: F401
from ember.sharding import NamedSharding, PartitionSpec as P, get_mesh, set_mesh  # noqa: F401

__version__ = version.__version__
__version_info__ = version.__version_info__

# JAX's top-level names that are ember's objects of the same name.
FROM_EMBER = (
    "Array", "ShapeDtypeStruct", "block_until_ready", "checkpoint", "checkpoint_policies", "clear_caches",
    "closure_convert", "config", "custom_gradient", "custom_jvp", "custom_vjp", "default_backend", "device_get",
    "device_put", "devices", "disable_jit", "ensure_compile_time_eval", "eval_shape", "grad", "hessian", "jacfwd",
    "jacobian", "jacrev", "jit", "jvp", "linear_transpose", "linearize", "make_array_from_callback", "make_jaxpr",
    "named_call", "pure_callback", "remat", "reshard", "typeof", "Ref", "freeze", "new_ref",
    "make_array_from_process_local_data", "value_and_grad", "vjp", "vmap",
)
# JAX's top-level names that ember does not provide (JAX 0.10.2's ``dir(jax)``, less the above).
MISSING = (
    "ad", "allow_f16_reductions", "array_garbage_collection_guard",
    "auto_pcast", "check_tracer_leaks", "checking_leaks", "copy_to_host_async",
    "debug_key_reuse",
    "default_device", "default_prng_impl", "ds",
    "empty_ref", "enable_custom_prng", "export",
    "ffi", "free_ref", "fwd_and_bwd", "jax2tf_associative_scan_reductions",
    "legacy_prng_key", "live_arrays",
    "make_array_from_single_device_arrays",
    "make_user_context", "memory", "monitoring", "no_execution", "no_tracing",
    "print_environment_info", "profiler",
    "remove_size_one_mesh_axis_from_type", "smap",
    "softmax_custom_jvp", "thread_guard", "threefry_partitionable", "transfer_guard",
    "transfer_guard_device_to_device", "transfer_guard_device_to_host", "transfer_guard_host_to_device",
)



# JAX 0.10.2's modules that ember does not have: importing one under the switch is a
# ModuleNotFoundError that says so.
MISSING_MODULES = (
    "jax.experimental.ode", "jax.experimental.sparse", "jax.profiler", "jax.scipy.interpolate", "jax.scipy.spatial",
)
# The public names of JAX 0.10.2's modules that ember's stand-ins lack (primitive objects, ``*_p``,
# aside: ember's primitives are its own). ``tests/test_jax_modules.py`` holds this equal to what
# JAX has and ember does not, module by module.
MISSING_IN_MODULES: dict[str, tuple[str, ...]] = {
    "jax.custom_derivatives": ("custom_vjp_primal_tree_values", "linear_call"),
    "jax.debug": ("DebugEffect", "OrderedDebugEffect", "inspect_array_sharding", "log", "visualize_array_sharding",
                  "visualize_sharding"),
    "jax.experimental": ("EArray", "cur_qdd", "primal_tangent_dtype"),
    "jax.lax": ("AccuracyMode", "ConvGeneralDilatedDimensionNumbers", "DotAlgorithm", "DotAlgorithmPreset",
                "PrecisionLike", "RaggedDotDimensionNumbers", "RandomAlgorithm", "Tolerance", "after_all",
                "approx_max_k", "approx_min_k", "bessel_i0e", "bessel_i1e", "composite",
                "conv_general_dilated_local", "conv_general_dilated_patches", "create_token",
                "custom_linear_solve", "custom_root", "dce_sink", "igamma_grad_a", "index_take", "mulhi",
                "pbroadcast", "platform_dependent", "polygamma", "precv", "psend", "pswapaxes",
                "ragged_all_to_all", "ragged_dot", "ragged_dot_general", "random_gamma_grad", "reduce_precision",
                "rng_bit_generator", "rng_uniform", "scaled_dot", "scatter_apply", "shape_as_value", "stage",
                "zeta"),
    "jax.lax.linalg": ("EighImplementation", "SvdAlgorithm", "cholesky_update", "ormqr", "qdwh", "tridiagonal",
                       "tridiagonal_solve"),
    "jax.nn": ("get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul"),
    "jax.scipy.signal": ("csd", "istft", "stft", "welch"),
    "jax.scipy.special": ("bernoulli", "bessel_jn", "dawsn", "erfcx", "exp1", "expi", "expn", "fresnel", "hyp1f1",
                          "hyp2f1", "owens_t", "polygamma", "sici", "spence", "sph_harm_y", "wofz", "zeta"),
    "jax.scipy.stats": ("gaussian_kde", "mode", "rankdata", "sem"),
    "jax.sharding": ("AbstractDevice", "ManualAxisType", "auto_axes", "explicit_axes",
                     "make_single_device_sharding", "use_abstract_mesh"),
    "jax.tree_util": ("default_registry",),
}


def missing_names_markdown(width: int = 96, names: Any = None, indent: str = "  ") -> str:
    """Names as the README lists them (``MISSING`` by default): backquoted, wrapped, indented."""
    lines, line = [], indent[:-1]
    for name in sorted(MISSING if names is None else names):
        word = f" `{name}`"
        if len(line) + len(word) > width:
            lines.append(line)
            line = indent[:-1]
        line += word
    return "\n".join(lines + [line])


def missing_in_modules_markdown(width: int = 96) -> str:
    """``MISSING_MODULES`` and ``MISSING_IN_MODULES`` as the README lists them: a line per module."""
    items = [f"  - `{m}` (the whole module)" for m in MISSING_MODULES]
    for module, names in sorted(MISSING_IN_MODULES.items()):
        items.append(f"  - `{module}`:\n" + missing_names_markdown(width, names, indent="      "))
    return "\n".join(items)

def make_mesh(axis_shapes: Any, axis_names: Any, axis_types: Any = None, *, devices: Any = None) -> Any:
    """A mesh of the first ``prod(axis_shapes)`` devices, in order."""
    count = int(np.prod(axis_shapes))
    devs = list(devices) if devices is not None else ember.devices()
    if count > len(devs):
        raise ValueError(f"Number of devices {len(devs)} must be >= the product of mesh_shape {tuple(axis_shapes)}")
    return sharding.Mesh(np.array(devs[:count], dtype=object).reshape(tuple(axis_shapes)), axis_names, axis_types)


def effects_barrier() -> None:
    """Wait until the side effects of the computations started so far (callbacks) are done. ember
    runs callbacks synchronously, within the call that triggers them, so there is nothing to wait for."""
    return None


# One process with ``config.num_cpu_devices`` CPU devices, or after ``jax.distributed.initialize()``
# the processes of an MPI run (ember.distributed): JAX's answers for a CPU run.
def device_count(backend: str | None = None) -> int:
    return len(ember.devices(backend))


def local_device_count(backend: str | None = None) -> int:
    return len(sharding_core.local_devices())


def local_devices(process_index: int | None = None, backend: str | None = None) -> list:
    here = sharding_core.process_index() if process_index is None else process_index
    return [d for d in ember.devices(backend) if d.process_index == here]


def process_count(backend: str | None = None) -> int:
    return sharding_core.process_count()


def process_index(backend: str | None = None) -> int:
    return sharding_core.process_index()


host_count, host_id = process_count, process_index


def process_indices() -> list[int]:
    """The indices of the processes of the run (one, unless run over MPI: ember.distributed)."""
    return list(range(process_count()))


host_ids = process_indices


class _ConfigState:
    """One of JAX's configuration states as a top-level name (``jax.debug_nans``): ``.value``
    reads ember's flag, and a call with a value is a context manager that sets it inside its
    block, as JAX's are."""

    def __init__(self, name: str, key: str) -> None:
        self._name, self._key = name, key

    @property
    def value(self) -> Any:
        return getattr(ember.config, self._key)

    def __call__(self, new_val: Any = True) -> Any:
        return ember.config.override(**{self._key: new_val})

    def __repr__(self) -> str:
        return f"<jax config state {self._name}={self.value!r}>"


debug_nans = _ConfigState("debug_nans", "debug_nans")
debug_infs = _ConfigState("debug_infs", "debug_infs")
enable_x64 = _ConfigState("enable_x64", "enable_x64")
log_compiles = _ConfigState("log_compiles", "log_compiles")
explain_cache_misses = _ConfigState("explain_cache_misses", "explain_cache_misses")
enable_checks = _ConfigState("enable_checks", "check_ir")
# ``with jax.numpy_dtype_promotion("strict"):``, ``with jax.numpy_rank_promotion("raise"):``
numpy_dtype_promotion = _ConfigState("numpy_dtype_promotion", "numpy_dtype_promotion")
numpy_rank_promotion = _ConfigState("numpy_rank_promotion", "numpy_rank_promotion")
# ``with jax.default_matmul_precision("highest"):``
default_matmul_precision = _ConfigState("default_matmul_precision", "default_matmul_precision")


@contextlib.contextmanager
def named_scope(name: str) -> Iterator[None]:
    """A name for the operations staged inside (JAX shows it in profiles; ember's IR and
    profiles do not carry it, so it changes nothing)."""
    if not isinstance(name, str):
        raise TypeError("named_scope name must be a string.")
    yield


float0 = dtypes.float0


def __getattr__(name: str) -> Any:
    if name in FROM_EMBER and hasattr(ember, name):
        value = getattr(ember, name)
        globals()[name] = value
        return value
    if name in MISSING or name in FROM_EMBER:
        raise AttributeError(f"jax.{name} is not provided by ember (running as jax: ember.install_as_jax())")
    raise AttributeError(f"module 'jax' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {n for n in FROM_EMBER if hasattr(ember, n)})
