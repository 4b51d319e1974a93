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

import hashlib
import threading
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from ember.config import config
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal, Var

_PLAIN = (bool, int, float, str, type(None), np.dtype, np.generic)


class _Fingerprinter:
    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.refs: list[Any] = []  # objects hashed by identity, kept alive with the entry

    def add(self, *parts: Any) -> None:
        for p in parts:
            self.digest.update(repr(p).encode())
            self.digest.update(b"\x00")

    def param(self, value: Any) -> None:
        if isinstance(value, _PLAIN):
            self.add(type(value).__name__, value)
        elif isinstance(value, (tuple, list)):
            self.add("seq", type(value).__name__, len(value))
            for v in value:
                self.param(v)
        elif isinstance(value, ClosedJaxpr):
            self.closed(value)
        elif isinstance(value, Jaxpr):
            self.jaxpr(value, [])
        else:
            self.refs.append(value)
            self.add("object", id(value))

    def closed(self, closed: ClosedJaxpr) -> None:
        self.jaxpr(closed.jaxpr, closed.consts)

    def jaxpr(self, jaxpr: Jaxpr, consts: list) -> None:
        names: dict[int, int] = {}

        def binder(v: Var) -> None:
            names[id(v)] = len(names)
            self.add("var", v.aval)

        def atom(a: Any) -> None:
            if isinstance(a, Literal):
                self.add("lit", a.aval, np.asarray(a.val).tobytes())
            else:
                self.add("ref", names[id(a)])

        self.add("jaxpr", len(jaxpr.constvars), len(jaxpr.invars), len(jaxpr.eqns))
        for v, c in zip(jaxpr.constvars, consts):
            binder(v)
            value = np.asarray(getattr(c, "_value", c))
            self.add("const", value.dtype.str, value.shape)
            self.digest.update(np.ascontiguousarray(value).tobytes())
        for v in jaxpr.invars:
            binder(v)
        for eqn in jaxpr.eqns:
            self.add("eqn", eqn.primitive.name, id(eqn.primitive))
            for a in eqn.invars:
                atom(a)
            for k in eqn.params:
                self.add("param", k)
                self.param(eqn.params[k])
            for v in eqn.outvars:
                binder(v)
        self.add("out")
        for a in jaxpr.outvars:
            atom(a)


def fingerprint(closed: ClosedJaxpr, donated: frozenset[int] = frozenset()) -> tuple[str, list[Any]]:
    """A digest of the program, the codegen config and the donated inputs' positions, and the
    objects it refers to by identity."""
    f = _Fingerprinter()
    f.add("config", config.codegen_key(), "donated", sorted(donated))
    f.closed(closed)
    return f.digest.hexdigest(), f.refs


_entries: OrderedDict[str, tuple[Any, list[Any]]] = OrderedDict()
_lock = threading.Lock()


def compile_shared(closed: ClosedJaxpr, name: str, compile_fn: Callable[[ClosedJaxpr, str, frozenset[int]], Any],
                   donated: frozenset[int] = frozenset()) -> tuple[Any, bool]:
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
