"""The backends by name, and which one runs programs now.

A backend registers itself when its module loads (``register``). ``config.backend``
(``EMBER_PLATFORMS``, or the older ``EMBER_BACKEND``) chooses, by JAX's rules for
``JAX_PLATFORMS``: a comma-separated list of names in priority order, whose first available
backend is the default; unset (the empty string), every registered backend in the order of
its ``priority``, so that an accelerator whose plugin is found outranks ``cpu``, and ``cpu``
is the default otherwise. A name is a backend's name, or a platform that backends serve
(each of them, by priority). An unknown name is an error that lists the registered ones (a
RuntimeError, as JAX's). The jit caches key programs by ``config.backend`` as written: a
backend registered after the first compiles that changes the default takes effect for them
after ``ember.clear_caches()`` (a plugin registers when ember loads, before any compile).
"""
from __future__ import annotations

import threading
from typing import Any

from ember.backends.protocols import Backend
from ember.config import config
from ember.core import sharding as shd

_backends: dict[str, Backend] = {}
_lock = threading.Lock()


def register(backend: Backend, *, replace: bool = False) -> Backend:
    """Add ``backend`` under its name. A second backend of the same name is refused unless
    ``replace`` says it takes the place of the first."""
    with _lock:
        old = _backends.get(backend.name)
        if old is not None and old is not backend and not replace:
            raise ValueError(f"a backend named {backend.name!r} is registered already ({type(old).__name__}); "
                             "pass replace=True to take its place, or choose another name")
        _backends[backend.name] = backend
        _candidates.clear()
    return backend


def unregister(name: str) -> None:
    """Remove the backend ``name``."""
    with _lock:
        _candidates.clear()
        if _backends.pop(name, None) is None:
            raise ValueError(f"no backend named {name!r} is registered; registered: {_names()}")


def registered() -> dict[str, Backend]:
    """The registered backends by name, highest priority first."""
    return {b.name: b for b in sorted(_backends.values(), key=lambda b: -b.priority)}


def _names() -> str:
    return ", ".join(repr(name) for name in registered())


def candidates(request: str) -> list[Backend]:
    """The backends a ``config.backend`` value names, in its order (see the module docstring)."""
    ordered = list(registered().values())
    if not request.strip():
        return ordered
    out: list[Backend] = []
    for name in (part.strip() for part in request.split(",")):
        if not name:
            continue
        named = [_backends[name]] if name in _backends else [b for b in ordered if b.platform == name]
        if not named:
            raise RuntimeError(f"unknown backend {name!r} (in {request!r}); registered backends: {_names()}. "
                               "config.backend (EMBER_PLATFORMS) is a comma-separated list of these in priority "
                               "order, or '' for the default.")
        out += [b for b in named if b not in out]
    return out


# ``candidates`` of each request asked of ``get`` (the eager path asks on every operation that may
# run native code): emptied when a backend is registered or removed.
_candidates: dict[str, list[Backend]] = {}


def get(name: str | None = None) -> Backend:
    """The backend ``name`` (a name or a platform, as in ``config.backend``), or with no name the
    one that runs programs now: the first available of those ``config.backend`` names."""
    request = config.backend if name is None else name
    named = _candidates.get(request)
    if named is None:
        named = _candidates[request] = candidates(request)
    for backend in named:
        if backend.is_available():  # (asked each time: a backend keeps what is costly to find out)
            return backend
    raise RuntimeError(f"none of the backends {', '.join(repr(b.name) for b in named)} (config.backend = "
                       f"{request!r}) is available here; registered backends: {_names()}")


def _unplaced_device() -> Any:
    """The device an array nobody placed reports: the running backend's first (ember's CPU device
    0 on a host backend, or while an accelerator's client is not open yet)."""
    backend = get()
    if backend.host_buffers:
        return shd.default_device()
    return backend.local_devices()[0]


shd.unplaced_device[0] = _unplaced_device


def of_device(device: Any) -> Backend:
    """The backend whose devices include ``device`` (host backends first: they share devices)."""
    for backend in sorted(_backends.values(), key=lambda b: (not b.host_buffers, -b.priority)):
        if backend.is_available() and backend.owns(device):
            return backend
    raise ValueError(f"the device {device!r} belongs to no available backend; registered backends: {_names()}")
