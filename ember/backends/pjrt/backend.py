"""The PJRT backends in ember's registry: one per plugin found when ember loads (``xla_cpu``, ``tpu``,
``cuda``, ``rocm``, and any named in ``EMBER_PJRT_PLUGIN``). An accelerator's backend outranks ``cpu``,
so it runs programs by default, as in JAX; XLA's CPU plugin (``xla_cpu``) runs them only when named
(``EMBER_PLATFORMS=xla_cpu``): installing it changes nothing for CPU users.

An Array computed here keeps its data in a device buffer (``binding.Buffer``), copied to the host the
first time the host needs the value; calls return before the device finishes (``block_until_ready``
waits), and donated arguments are handed to PJRT. Finding plugins imports nothing and loads no library;
the binding and the lowering load when a backend is first used (``_parts``)."""
from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

import numpy as np

from ember.backends import registry
from ember.backends.pjrt.discovery import XLA_CPU, find_plugins
from ember.backends.protocols import Backend, CompileOptions, Executable
from ember.config import config
from ember.core.ir import ClosedJaxpr

# The platform each backend name serves (what ``default_backend()`` and ``Array.platform()`` say).
PLATFORMS = {XLA_CPU: "cpu", "tpu": "tpu", "cuda": "gpu", "rocm": "gpu"}


def _parts() -> ModuleType:
    from ember.backends.pjrt import program  # for start-up time: ctypes structs and lowering rules load on first use

    return program


class PjrtBackend(Backend):
    """The backend of one PJRT plugin, found by ``discovery`` under ``name``."""

    host_buffers = False

    def __init__(self, name: str, platform: str, priority: int) -> None:
        self.name, self.platform, self.priority = name, platform, priority
        self._available: bool | None = None

    def is_available(self) -> bool:
        """Whether its plugin loads and opens a client (tried once, when the backend is first
        chosen). A plugin that fails is passed over with a warning, as JAX falls back to the CPU."""
        if self._available is None:
            try:
                _parts().client(self.name)
                self._available = True
            except Exception as e:  # (a library that does not load, a device that does not open)
                warnings.warn(f"the PJRT plugin of the backend {self.name!r} could not be used, so it is passed "
                              f"over: {e}", RuntimeWarning, stacklevel=2)
                self._available = False
        return self._available

    def devices(self) -> list[Any]:
        """Every device of the run (several processes' after ``ember.distributed.initialize``)."""
        return self._first(_parts().client(self.name).all_devices)

    def local_devices(self) -> list[Any]:
        return self._first(_parts().client(self.name).devices)

    def _first(self, devices: list[Any]) -> list[Any]:
        """XLA's CPU plugin's devices as many as ``config.num_cpu_devices`` says now (its client is
        made with as many as the process's configuration or ``XLA_FLAGS`` asks for, once), as
        ember's own CPU devices follow that setting."""
        if self.name != XLA_CPU:
            return devices
        return devices[:max(1, int(config.num_cpu_devices))]

    def compile(self, closed: ClosedJaxpr, options: CompileOptions) -> Executable:
        return _parts().compile_executable(self, closed, options)

    def cannot_run(self, closed: ClosedJaxpr) -> str | None:
        parts = _parts()
        return parts.unlowered(closed.jaxpr) or parts.unsupported_dtype(closed.jaxpr, self.platform)

    def put(self, value: np.ndarray, device: Any, *, borrowed: bool = False) -> Any:
        """A buffer holding ``value``: an Array's read-only host data, or a copy made for this call
        (``protocols.device_arguments``), so a host plugin may use it in place; a ``borrowed`` array
        (the caller's own NumPy array) is left as it is and copied during the call."""
        if not borrowed:
            value.flags.writeable = False
        return _parts().client(self.name).buffer_from_host(value, device, borrowed=borrowed)


    def put_sharded(self, value: Any, sharding: Any) -> Any:
        """The buffer of an array split over ``sharding``'s devices (each holding its block): from
        the host, or from another buffer of this backend (resharded on the devices)."""
        parts = _parts()
        if isinstance(value, np.ndarray):
            return parts.put_sharded(parts.client(self.name), value, sharding)
        buffer, aval = value
        return parts.reshard(parts.client(self.name), buffer, aval, sharding)


    def split_buffer(self, blocks: Any, sharding: Any, shape: tuple, dtype: Any) -> Any:
        """The buffer of an array made of ``blocks``, this backend's buffers already on the devices
        of ``sharding`` (in its device order): held as they are."""
        return _parts().ShardedBuffer(blocks, sharding, shape, dtype)


def _register() -> dict[str, Backend]:
    """A backend for each plugin found: accelerators above ``cpu`` (priority 0), XLA's CPU plugin
    below it. A platform with no plugin here has no backend, so naming it is the registry's
    unknown-backend error, as in JAX."""
    return {name: registry.register(PjrtBackend(name, PLATFORMS.get(name, name), -10 if name == XLA_CPU else 100))
            for name in sorted(find_plugins())}


BACKENDS = _register()
