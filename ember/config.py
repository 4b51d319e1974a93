"""Global flags. ``ember.config.update(name, value)`` changes one; flags that
change what a compiled program computes are part of the jit cache key."""
from __future__ import annotations

import contextlib
import os
import re
from typing import Any, Callable, Iterator


def xla_device_count() -> int | None:
    """The CPU device count JAX's ``XLA_FLAGS`` asks for (``--xla_force_host_platform_device_count=N``),
    so one environment gives JAX and ember the same devices."""
    found = re.search(r"--xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return int(found.group(1)) if found else None


_DEFAULTS: dict[str, Any] = {
    # 64-bit types; off as in JAX: float64/int64 requests become float32/int32.
    "enable_x64": os.environ.get("EMBER_ENABLE_X64", "0") not in ("0", "", "false", "False"),
    # Report each trace and compile (and its time) on stderr.
    "log_compiles": False,
    # Explain why a jitted call missed the cache.
    "explain_cache_misses": False,
    # Raise FloatingPointError when an operation (eager, or a jitted program's outputs) produces NaN.
    "debug_nans": False,
    # The same for infinities (JAX's jax_debug_infs).
    "debug_infs": False,
    # Run jitted functions op by op (for debugging with print / pdb).
    "disable_jit": False,
    # Type-check every traced program (the test suite turns this on).
    "check_ir": False,
    # Most signatures kept per jitted function (least recently used ones are dropped).
    "jit_cache_max_entries": 1024,
    # Log once (ember's logger) when jit wraps this many fresh function objects of one piece of code (0: never).
    "jit_churn_warning_threshold": 8,
    # Log once (ember's logger) when a function has been traced this many times (0: never).
    "retrace_warning_threshold": 32,
    # Keep compiled native code on disk, so a new process running the same program loads it
    # instead of compiling (see ember.backends.disk_cache).
    "persistent_cache": os.environ.get("EMBER_PERSISTENT_CACHE", "1") not in ("0", "", "false", "False"),
    # Keep whole programs there too (their plan and machine code), so that a new process's first call
    # of a program an earlier one compiled skips every compile stage (ember.backends.cpu.program_cache).
    "persistent_program_cache": os.environ.get("EMBER_PERSISTENT_PROGRAM_CACHE", "1") not in ("0", "", "false",
                                                                                            "False"),
    # Where the persistent cache lives; empty: $EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember or ~/.cache/ember.
    "cache_dir": "",
    # Size bound of the persistent cache (least recently used entries are evicted).
    "persistent_cache_max_bytes": 512 * 2**20,
    # Compiler passes to skip, by name (see ember.compiler.pipeline.PIPELINE).
    "disabled_passes": (),
    # JAX's type promotion mode: "standard" (the lattice: implicit promotions between types) or
    # "strict" (only a Python scalar joins a typed value of its kind or a wider kind; any other mix
    # of types is a TypePromotionError).
    "numpy_dtype_promotion": "standard",
    # What jnp does when operands of different ranks broadcast (``x[None] + y``): "allow" it, "warn"
    # (a UserWarning each time) or "raise" a ValueError, as JAX's jax_numpy_rank_promotion.
    "numpy_rank_promotion": "allow",
    # The precision of contractions (dot_general, convolutions) that give none (``precision=None``), as
    # JAX's jax_default_matmul_precision: None (the backend's default: on a TPU, bfloat16 passes; the CPU
    # backends always compute float32 at full precision), or "default"/"bfloat16", "high"/"tensorfloat32"/
    # "bfloat16_3x", "highest"/"float32".
    "default_matmul_precision": os.environ.get("JAX_DEFAULT_MATMUL_PRECISION") or None,
    # Which backend runs jitted programs (ember.backends.registry), by JAX's rules for JAX_PLATFORMS: a
    # comma-separated list of backend names (or platforms) in priority order, whose first available one runs
    # them: "cpu" (native, LLVM), "reference" (the NumPy interpreter), or one registered by a plugin. Empty:
    # every registered backend by its priority (an accelerator whose plugin is found, else "cpu").
    # JAX's name for it is jax_platforms.
    "backend": os.environ.get("EMBER_PLATFORMS") or os.environ.get("EMBER_BACKEND", ""),
    # Run a large program's first calls on the reference interpreter while its native code
    # compiles in the background (see ember.runtime.tiers).
    "tiered_compilation": os.environ.get("EMBER_TIERED_COMPILATION", "1") not in ("0", "", "false", "False"),
    # How many CPU devices the process has (as JAX's --xla_force_host_platform_device_count): pmap and
    # shard_map run one program per device, each on its own thread.
    "num_cpu_devices": int(os.environ.get("EMBER_NUM_CPU_DEVICES", "") or xla_device_count() or 1),
    # Convert Python control flow on traced values (if / while / for / break / continue / return, and /
    # or / not) in every function jit traces, as jit(f, autograph=True) does (ember.autograph).
    "autograph": os.environ.get("EMBER_AUTOGRAPH", "0") not in ("0", "", "false", "False"),
    # Seconds a collective across processes (ember.distributed) waits for the other processes before
    # it raises a clear error instead of hanging (a process died, or one skipped the collective).
    "collective_timeout": float(os.environ.get("EMBER_COLLECTIVE_TIMEOUT", "60") or 60),
}

# JAX's names of flags that ember names otherwise (after the jax_ prefix).
_JAX_NAMES = {"platforms": "backend"}

# Flags whose value changes the traced or the compiled program, hence part of the cache key.
CODEGEN_FLAGS = ("enable_x64", "debug_nans", "debug_infs", "backend", "disabled_passes", "numpy_dtype_promotion",
                 "numpy_rank_promotion", "default_matmul_precision")
# Flags in the cache key only when set: on, they change the traced program (the keys of programs
# traced with them off, the disk cache's included, stay as they were).
KEYED_WHEN_ON = ("autograph",)
# The values an enumerated flag takes (others are a ValueError, as in JAX).
CHOICES = {"numpy_dtype_promotion": ("standard", "strict"), "numpy_rank_promotion": ("allow", "warn", "raise"),
           "default_matmul_precision": (None, "default", "high", "highest", "bfloat16", "tensorfloat32",
                                        "bfloat16_3x", "float32", "fastest")}


class _Config:
    """Flags live in the instance ``__dict__`` (plain attribute reads: the dispatch path reads
    some on every call); ``update`` is the only writer."""

    def __init__(self) -> None:
        object.__setattr__(self, "_values", dict(_DEFAULTS))
        object.__setattr__(self, "_listeners", [])
        self.__dict__.update(_DEFAULTS)
        object.__setattr__(self, "_codegen_key", self._key())

    def __getattr__(self, name: str) -> Any:  # only reached for names that are not flags
        if name.startswith("jax_"):  # (JAX's names: config.jax_enable_x64)
            flag = _JAX_NAMES.get(name[4:], name[4:])
            if flag in self._values:
                return self._values[flag]
        raise AttributeError(f"ember.config has no flag {name!r}; flags: {sorted(self._values)}")

    def __setattr__(self, name: str, value: Any) -> None:
        self.update(name, value)

    def update(self, name: str, value: Any) -> None:
        """Set flag ``name`` (``jax_`` prefixes are accepted for drop-in compatibility)."""
        if name.startswith("jax_"):
            name = _JAX_NAMES.get(name[4:], name[4:])
        if name not in self._values:
            raise AttributeError(f"ember.config has no flag {name!r}; flags: {sorted(self._values)}")
        if name in CHOICES and value not in CHOICES[name]:
            raise ValueError(f"jax_{name} must be one of {list(CHOICES[name])}, got {value!r} of type {type(value)}")
        self._values[name] = value
        self.__dict__[name] = value
        if name in CODEGEN_FLAGS or name in KEYED_WHEN_ON:
            object.__setattr__(self, "_codegen_key", self._key())
        for listener in self._listeners:
            listener(name)

    def _key(self) -> tuple:
        values = self._values
        return tuple(values[k] for k in CODEGEN_FLAGS) + tuple((k, True) for k in KEYED_WHEN_ON if values[k])

    def on_update(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(name)`` after every ``update`` (the jit hit path drops what it keeps)."""
        self._listeners.append(listener)

    def read(self, name: str) -> Any:
        return getattr(self, name)

    def codegen_key(self) -> tuple:
        """The flags that change compiled code, for cache keys (kept up to date by ``update``)."""
        return self._codegen_key

    @contextlib.contextmanager
    def override(self, **flags: Any) -> Iterator[None]:
        """Temporarily set flags: ``with ember.config.override(enable_x64=True): ...``."""
        old = {k: getattr(self, k) for k in flags}
        try:
            for k, v in flags.items():
                self.update(k, v)
            yield
        finally:
            for k, v in old.items():
                self.update(k, v)


config = _Config()
