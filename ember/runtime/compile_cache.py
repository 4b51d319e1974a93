"""Executables shared by computation, not by function object.

``jit`` caches per function, so a fresh lambda, a fresh ``functools.partial``
or a ``jit`` written inside a loop traces again (tracing is cheap). Its program
is then looked up here by a fingerprint of the IR (equations, params, literal
values, consts' bytes, codegen config, donated inputs): an equivalent program
reuses the executable already compiled instead of compiling again.

Params that are not plain data (e.g. the rule functions of ``custom_jvp``)
enter the fingerprint by identity; the cache keeps them alive, so an id can
never be reused for another object while its entry exists.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable

from ember.backends.protocols import Executable
from ember.config import config
from ember.core import fingerprint as fingerprints
from ember.core.caches import register_cache
from ember.core.ir import ClosedJaxpr


def fingerprint(closed: ClosedJaxpr, donated: frozenset[int] = frozenset()) -> tuple[str, list[Any]]:
    """A digest of the program, the codegen config and the donated inputs' positions, and the
    objects it refers to by identity. Stable (the disk cache's: ``disk_cache.program_key``), so
    that the disk cache's key of the same program is the memo's, not a second walk over it."""
    return fingerprints.fingerprint(closed, "config", config.codegen_key(), "donated", sorted(donated), stable=True)


_entries: OrderedDict[str, tuple[Executable, list[Any]]] = OrderedDict()
_lock = threading.Lock()


def compile_shared(closed: ClosedJaxpr, name: str,
                   compile_fn: Callable[[ClosedJaxpr, str, frozenset[int]], Executable],
                   donated: frozenset[int] = frozenset()) -> tuple[Executable, bool]:
    """(executable, whether it was compiled now). Equivalent programs (with the same ``donated``
    input positions) share one executable."""
    key, refs = fingerprint(closed, donated)
    with _lock:
        hit = _entries.get(key)
        if hit is not None:
            _entries.move_to_end(key)
            return hit[0], False
    executable = compile_fn(closed, name, donated)
    with _lock:
        _entries[key] = (executable, refs)
        while len(_entries) > max(int(config.jit_cache_max_entries), 1):
            _entries.popitem(last=False)
    return executable, True


def clear() -> None:
    with _lock:
        _entries.clear()


def size() -> int:
    return len(_entries)


register_cache("jit: executables shared by equal programs", clear, size)
