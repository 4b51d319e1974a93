"""The in-memory jit cache: traced programs and executables per function and signature.

Keys are ``(input tree, abstract values, static values, codegen config)``.
Each function's cache is a bounded LRU, shared by every ``jit`` wrapper of
the same function object, safe for concurrent callers (a signature is traced
and compiled once even when many threads miss at the same time), and able to
explain a miss by comparing the new key with the nearest cached one.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
import warnings
import weakref
from typing import Any, Callable, NamedTuple, Sequence

from ember.backends.protocols import Executable
from ember.config import CODEGEN_FLAGS, config
from ember.core.array import type_string
from ember.core.caches import register_cache
from ember.core.ir import ClosedJaxpr
from ember.runtime import compile_cache
from ember.runtime.tiers import TieredExecutable, compile_jaxpr
from ember.tree_util import PyTreeDef as PyTreeSpec

logger = logging.getLogger("ember")


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    traces: int
    compiles: int
    compile_seconds: float
    currsize: int
    # Calls that ran on the quick tier (the reference interpreter) while native code compiled in
    # the background, and this function's programs still compiling (``ember.runtime.tiers``).
    quick_tier_calls: int = 0
    compiling: int = 0


class CacheKey(NamedTuple):
    """The parts of a cache key (keys are stored as plain tuples: cheaper to build per call)."""

    in_tree: Any
    avals: tuple
    statics: tuple
    codegen: tuple


class Entry:
    """A traced program; its executable is compiled the first time it runs at top level
    (a signature first seen inside an outer trace only needs the program). ``donated``: the
    flat positions of the arguments whose buffers a top-level call gives up."""

    __slots__ = ("closed", "out_tree", "donated", "executable", "fast_key", "used", "_lock")

    def __init__(self, closed: ClosedJaxpr, out_tree: Any, donated: frozenset[int] = frozenset()) -> None:
        self.closed = closed
        self.out_tree = out_tree
        self.donated = donated
        self.executable: Executable | None = None
        self.fast_key: tuple | None = None  # its key in the function's FastTable, once it has one
        self.used = next(clock)  # when it was last used (the LRU order)
        self._lock = threading.Lock()

    def get_executable(self, cache: "FunctionCache", name: str) -> Executable:
        executable = self.executable
        if executable is None:
            with self._lock:
                if self.executable is None:
                    start = time.perf_counter()
                    self.executable, built = compile_cache.compile_shared(
                        self.closed, name, compile_jaxpr, self.donated)
                    seconds = time.perf_counter() - start
                    # A compile: a new executable whose machine code LLVM generated (or, on the
                    # reference backend, that has none); not code loaded from disk or reused.
                    code = self.executable.code if built else "shared"
                    if code in ("compiled", "none"):
                        cache.record_compile(seconds)
                    elif code == "tiered":  # a compile once the background thread has done it
                        def count(done: Any, seconds: float = seconds) -> None:
                            if done.native is not None and done.native.code == "compiled":
                                cache.record_compile(seconds + done.native_seconds)
                        assert isinstance(self.executable, TieredExecutable)
                        self.executable.add_done_callback(count)
                    if config.log_compiles:
                        avals = ", ".join(a.str_short(weak=True) for a in self.closed.in_avals)
                        what = _BUILT[code].format(name=name, avals=avals)
                        logger.warning("ember: %s in %.1f ms", what, seconds * 1e3)
                    # stacklevel: here, get_executable, JitFunction.__call__, the caller.
                    warn_unusable_donations(self.executable, stacklevel=4)
                executable = self.executable
        return executable


_BUILT = {
    "compiled": "compiled {name} for ({avals})",
    "none": "compiled {name} for ({avals}) (no native code)",
    "reused": "reused compiled code for {name} ({avals}): the same code as an earlier program "
              "that differs only in sizes, no compile",
    "disk": "loaded {name} for ({avals}) from the disk cache, no compile",
    "disk program": "loaded {name} for ({avals}) whole from the disk cache (its plan and machine code): no "
                    "passes, fusion, code generation or compile",
    "shared": "reused the executable of an equivalent program for {name} ({avals}), no compile",
    "tiered": "tiered {name} for ({avals}): calls run on the reference interpreter until its native code, "
              "compiling in the background, is ready",
}


def warn_unusable_donations(executable: Executable, stacklevel: int) -> None:
    """One warning listing the donated arguments whose buffers no output can take."""
    unusable = executable.unusable_donations
    if unusable:
        warnings.warn(f"Some donated buffers were not usable: {', '.join(map(type_string, unusable))}. "
                      "A donated argument is taken (and deleted) by an output of its shape and dtype, or "
                      "else by an output with as many elements; the others stay usable.", UserWarning,
                      stacklevel=stacklevel)


# Ticks of the LRU order: a hit stamps its entry (cheaper than reordering a dict by a key
# that would have to be hashed again); evictions, on misses only, look for the oldest stamp.
clock = itertools.count()


class FastTable(dict):
    """The hit path's table: the abstract values of positional Array arguments -> (runner,
    entry) for entries that the native dispatcher runs (``CpuExecutable.fast_runner``); and for
    pytree arguments, (the arguments' structure, their leaves' abstract values) -> the same.
    Only plain calls use it (no keywords, static or donated arguments), under the codegen
    config it was filled in: every config change empties every table."""

    __slots__ = ("__weakref__",)


_fast_tables: "weakref.WeakValueDictionary[int, FastTable]" = weakref.WeakValueDictionary()


def _empty_fast_tables(_name: str) -> None:
    for table in list(_fast_tables.values()):
        table.clear()


config.on_update(_empty_fast_tables)


class FunctionCache:
    """Entries of one function under one set of jit options."""

    def __init__(self) -> None:
        self.entries: dict[tuple, Entry] = {}
        self.fast = FastTable()
        _fast_tables[id(self.fast)] = self.fast
        self.tree_keys = False  # whether ``fast`` holds keys of pytree arguments (jit looks them up then)
        self.numpy_keys = False  # whether it holds keys of NumPy arrays (``dispatch.numpy_key_of``)
        self.pending: dict[tuple, threading.Event] = {}
        self.lock = threading.Lock()
        self.hits = self.misses = self.traces = self.compiles = 0
        self.compile_seconds = 0.0
        self.warned_about_retraces = False

    def record_compile(self, seconds: float) -> None:
        with self.lock:
            self.compiles += 1
            self.compile_seconds += seconds

    def get(self, key: tuple) -> Entry | None:
        """The hit path: no lock (a dict read is atomic); the hit refreshes the entry's LRU stamp."""
        entry = self.entries.get(key)
        if entry is not None:
            self.hits += 1
            entry.used = next(clock)
        return entry

    def lookup_or_claim(self, key: tuple) -> tuple[Entry | None, threading.Event | None]:
        """(entry, None) on a hit; (None, event) if this caller must trace, and set ``event``
        when done; waits while another thread is tracing the same key."""
        while True:
            with self.lock:
                entry = self.entries.get(key)
                if entry is not None:
                    self.hits += 1
                    entry.used = next(clock)
                    return entry, None
                waiting = self.pending.get(key)
                if waiting is None:
                    self.misses += 1
                    event = self.pending[key] = threading.Event()
                    return None, event
            waiting.wait()

    def store(self, key: tuple, entry: Entry | None, event: threading.Event) -> None:
        """Publish a traced entry (None: tracing failed or must not be cached) and wake waiters."""
        with self.lock:
            if entry is not None:
                self.entries[key] = entry
                while len(self.entries) > max(int(config.jit_cache_max_entries), 1):
                    oldest = min(self.entries, key=lambda k: self.entries[k].used)
                    evicted = self.entries.pop(oldest)
                    fast = self.fast.get(evicted.fast_key)
                    if fast is not None and fast[1] is evicted:
                        del self.fast[evicted.fast_key]
            del self.pending[key]
        event.set()

    def info(self) -> CacheInfo:
        tiered = [e.executable for e in list(self.entries.values()) if isinstance(e.executable, TieredExecutable)]
        return CacheInfo(self.hits, self.misses, self.traces, self.compiles, self.compile_seconds,
                         len(self.entries), sum(x.quick_calls for x in tiered),
                         sum(x.compiling for x in tiered))

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.fast.clear()
            self.tree_keys = self.numpy_keys = False

    def add_fast(self, key: tuple, entry: Entry, avals: tuple, runner: Callable) -> None:
        """Let plain calls with argument values ``avals`` run ``runner`` (the native dispatcher)."""
        with self.lock:
            if self.entries.get(key) is entry:  # not evicted meanwhile
                entry.fast_key = avals
                self.fast[avals] = (runner, entry)
                tree = bool(avals) and isinstance(avals[0], PyTreeSpec)
                self.tree_keys |= tree
                self.numpy_keys |= any(type(k) is tuple for k in (avals[1] if tree else avals))


# function -> {jit options -> FunctionCache}; entries go away with the function.
_function_caches: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()
_registry_lock = threading.Lock()


def cache_for(fun: Callable, options: tuple) -> FunctionCache:
    with _registry_lock:
        try:
            per_options = _function_caches.setdefault(fun, {})
        except TypeError:  # not weak-referenceable (e.g. some builtins): a private cache
            return FunctionCache()
        return per_options.setdefault(options, FunctionCache())


def _clear_function_caches() -> None:
    with _registry_lock:
        caches = [c for per in _function_caches.values() for c in per.values()]
    for c in caches:
        c.clear()


def _function_cache_entries() -> int:
    with _registry_lock:
        return sum(len(c.entries) for per in _function_caches.values() for c in per.values())


register_cache("jit: traced programs and executables, per function", _clear_function_caches,
               _function_cache_entries)


# --- explanations ------------------------------------------------------------------------
def explain_miss(key: CacheKey, cached: Sequence[CacheKey], arg_names: Sequence[str],
                 static_names: Sequence[str]) -> str:
    """Why ``key`` missed: what differs from the nearest cached signature."""
    if not cached:
        return "first call: nothing cached yet for this function"
    nearest = min(cached, key=lambda old: len(_differences(old, key, arg_names, static_names)))
    changes = _differences(nearest, key, arg_names, static_names)
    return "; ".join(changes) if changes else "the cached entry was evicted (the cache is bounded)"


def _differences(old: CacheKey, new: CacheKey, arg_names: Sequence[str], static_names: Sequence[str]) -> list[str]:
    out = []
    if old.in_tree != new.in_tree:
        return [f"the argument structure changed: {old.in_tree} -> {new.in_tree}"]
    for name, a, b in zip(arg_names, old.avals, new.avals):
        if a == b:
            continue
        if a.shape != b.shape:
            what = "shape"
        elif a.dtype != b.dtype:
            what = "dtype"
        else:
            what = "weak type"
        out.append(f"argument `{name}` changed {what}: {a.str_short(weak=True)} -> {b.str_short(weak=True)}")
    old_static, new_static = dict(_static_items(old.statics)), dict(_static_items(new.statics))
    for where in sorted(set(old_static) | set(new_static), key=str):
        if old_static.get(where, "<absent>") != new_static.get(where, "<absent>"):
            label = static_names[where] if isinstance(where, int) and where < len(static_names) else where
            out.append(f"static argument `{label}` changed value: {old_static.get(where, '<absent>')!r} -> "
                       f"{new_static.get(where, '<absent>')!r}")
    for flag, a, b in zip(CODEGEN_FLAGS, old.codegen, new.codegen):
        if a != b:
            out.append(f"config `{flag}` changed: {a!r} -> {b!r}")
    # (flags keyed only when on, as ("autograph", True), after those)
    old_on, new_on = set(old.codegen[len(CODEGEN_FLAGS):]), set(new.codegen[len(CODEGEN_FLAGS):])
    for flag, _ in sorted(old_on ^ new_on):
        out.append(f"config `{flag}` changed: {(flag, True) in old_on!r} -> {(flag, True) in new_on!r}")
    return out


def _static_items(statics: tuple) -> list[tuple[Any, Any]]:
    return [(where, value) for _, where, value in statics]
