"""The PJRT backend: ember's programs lowered to StableHLO (``lowering``) and run by a device vendor's
PJRT plugin through ember's own binding of the PJRT C API (``binding``); plugins are found by
``discovery``. ``client(name)`` opens a plugin's client once per process."""
from __future__ import annotations

import threading

from ember.backends.pjrt.binding import Client, PjrtError, load_plugin
from ember.backends.pjrt.discovery import XLA_CPU, PluginSpec, find_plugins

_clients: dict[str, Client] = {}
_lock = threading.Lock()


def client(name: str = XLA_CPU) -> Client:
    """The client of the plugin found under backend name ``name`` (opened once per process)."""
    with _lock:
        found = _clients.get(name)
        if found is None:
            spec = find_plugins().get(name)
            if spec is None:
                raise PjrtError(f"no PJRT plugin for the backend {name!r} was found. Install one (xla_cpu: "
                                "pip install ember[pjrt-cpu]; tpu: pip install ember[tpu]) or name its library "
                                f"in EMBER_PJRT_PLUGIN ({name}:/path/to/plugin.so)", "NOT_FOUND")
            found = _clients[name] = Client(load_plugin(spec.path), backend=name)
        return found


__all__ = ["Client", "PjrtError", "PluginSpec", "XLA_CPU", "client", "find_plugins", "load_plugin"]
