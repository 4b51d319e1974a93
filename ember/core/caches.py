"""The registry of ember's caches: what ``ember.clear_caches`` empties.

Each cache registers itself where it is defined (``register_cache``: a name, the function that
empties it and, optionally, one that says how many entries it holds), so that emptying every
cache needs no list of modules: ``clear_caches`` asks the registry, and a cache whose module was
never imported was never filled. ``cache_sizes`` tells what each holds (diagnostics, tests).
The disk cache of machine code registers ``on_disk=True``: ``clear_caches(disk=False)`` keeps it.
"""
from __future__ import annotations

import threading
from typing import Callable, NamedTuple


class CacheRecord(NamedTuple):
    name: str
    clear: Callable[[], None]
    size: Callable[[], int] | None
    on_disk: bool


_caches: dict[str, CacheRecord] = {}
_lock = threading.Lock()


def register_cache(name: str, clear: Callable[[], None], size: Callable[[], int] | None = None, *,
                   on_disk: bool = False) -> None:
    """Register the cache ``name``: ``clear()`` empties it, ``size()`` counts its entries.
    A name is one cache's: registering it again from another module is an error (a module
    imported again replaces its own record)."""
    with _lock:
        old = _caches.get(name)
        if old is not None and getattr(old.clear, "__module__", None) != getattr(clear, "__module__", None):
            raise ValueError(f"a cache named {name!r} is registered already (by {old.clear.__module__}); "
                             f"{getattr(clear, '__module__', clear)!r} must register under another name")
        _caches[name] = CacheRecord(name, clear, size, on_disk)


def registered_caches() -> tuple[CacheRecord, ...]:
    """The registered caches, in the order they registered."""
    with _lock:
        return tuple(_caches.values())


def clear_caches(*, disk: bool = True) -> None:
    """Empty every jit cache (traced programs and executables), the compiled code kept in memory
    and, unless ``disk=False``, the disk cache of native code (with it kept, the next compiles
    load machine code from disk)."""
    for record in registered_caches():
        if disk or not record.on_disk:
            record.clear()


def cache_sizes() -> dict[str, int | None]:
    """Each registered cache's number of entries (None where it does not say)."""
    return {record.name: None if record.size is None else record.size() for record in registered_caches()}
