"""The PJRT clients of this process (one per backend name) and their compiled programs, through
ember's disk cache."""
from __future__ import annotations

import os
import threading
from typing import Any

from ember.backends import disk_cache
from ember.backends.pjrt.binding import PLATFORM_OVERRIDES, Client, Executable, PjrtError, compile_options, load_plugin
from ember.backends.pjrt.discovery import XLA_CPU, find_plugins
from ember.config import config, xla_device_count

_clients: dict[str, Client] = {}
_lock = threading.Lock()


class _Run:
    """A run over several processes (``join_run``): this process's index, their count, and the
    key-value store's callbacks that the plugin's clients reach the others through."""

    node_id = 0
    num_nodes = 1
    kv: Any = None


_run = _Run()


def join_run(name: str, node_id: int, num_nodes: int, kv: Any) -> None:
    """Make backend ``name``'s client one of ``num_nodes`` processes' (``ember.distributed``): it is
    created with the plugin's ``node_id`` / ``num_nodes`` options and the key-value store, so
    the plugin exchanges its topology with the other processes. Before the client opens only: a
    client's processes are fixed when it is created (JAX's ``initialize`` has the same rule)."""
    with _lock:
        if name in _clients:
            raise RuntimeError(f"ember.distributed.initialize must be called before any computation on the "
                               f"backend {name!r}: its client is already open for this process alone")
        _run.node_id, _run.num_nodes, _run.kv = int(node_id), int(num_nodes), kv


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
            found = _clients[name] = Client(load_plugin(spec.path), client_options(name), backend=name,
                                            kv=_run.kv if _run.num_nodes > 1 else None)
        return found


def client_options(name: str) -> dict[str, int]:
    """The create options of backend ``name``'s client: XLA's CPU plugin gets as many devices as
    ember's CPU backend has (``config.num_cpu_devices``: ``EMBER_NUM_CPU_DEVICES``, or JAX's
    ``--xla_force_host_platform_device_count`` in ``XLA_FLAGS``), so one environment gives ember's
    two CPU backends and JAX's CPU the same devices; one by default, as JAX's CPU. Executions are
    asynchronous, as on JAX's CPU client."""
    if name != XLA_CPU:
        return {"node_id": _run.node_id, "num_nodes": _run.num_nodes} if _run.num_nodes > 1 else {}
    # (asynchronous: an execution returns once dispatched, as JAX's CPU client runs; the plugin's
    # default runs it before returning)
    count = max(1, int(config.num_cpu_devices), xla_device_count() or 1)
    return {"cpu_device_count": count, "asynchronous": True}


def compile_cached(client: Client, text: str, in_types: list | None,
                   options: bytes | None = None) -> tuple[Executable, str]:
    """The executable of ``text`` (compiled with ``options``: by default one device, with the
    platform's overrides), loaded from ember's disk cache when a process compiled it before
    with this plugin (same library file, version and device kind), else compiled and stored (when
    the plugin can serialize). Returns it and how it came ("disk" or "compiled")."""
    if options is None:
        options = compile_options(overrides=PLATFORM_OVERRIDES.get(client.platform))
    plugin = client.plugin
    stat = os.stat(plugin.path)
    key = disk_cache.entry_key("pjrt", text, plugin.path, f"{stat.st_size}:{stat.st_mtime_ns}", repr(plugin.version),
                               repr(sorted(plugin.attributes.items())), client.platform, client.platform_version,
                               client.devices[0].kind, options.hex())
    payload = disk_cache.load(key)
    if payload is not None:
        try:
            return client.deserialize(payload, in_types), "disk"
        except PjrtError as e:  # (another build of the plugin under the same name: compiled again)
            disk_cache.discard(key, f"the PJRT plugin refused the stored executable: {e}")
    executable = client.compile(text, in_types, options)
    if plugin.has("Executable_Serialize"):
        try:
            disk_cache.store(key, executable.serialize())
        except PjrtError:  # a plugin that cannot serialize its executables: no disk cache
            pass
    return executable, "compiled"


