"""Fingerprints of programs: a digest of what a jaxpr computes, independent of variable names
and of the Python objects that hold it.

The digest covers the equations (primitive, params, operands by position), the types of every
value, literal values and the bytes of consts. Two programs with equal fingerprints compute the
same thing, so they may share compiled code: whole executables (``ember.runtime.compile_cache``)
or single kernels (``ember.backends.cpu.codegen``).

Params that are not plain data (e.g. the rule functions of ``custom_jvp``) enter the fingerprint
by identity; whoever keys a cache on a fingerprint must keep ``refs`` alive with the entry, so
that an id can never be reused for another object meanwhile.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from ember.core.caches import register_cache
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal, Var

_PLAIN = (bool, int, float, complex, str, type(None), np.dtype, np.generic)


# Digests of recent programs, by identity (programs are never changed once built).
_memo: OrderedDict[int, tuple[ClosedJaxpr, str, list]] = OrderedDict()
_memo_lock = threading.Lock()
_MEMO_KEPT = 1024


def _clear_memo() -> None:
    with _memo_lock:
        _memo.clear()


register_cache("fingerprints of sub-programs, by identity", _clear_memo, lambda: len(_memo))


class Fingerprinter:
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
        """A sub-program enters by its own digest, computed once per program object: a program
        that holds the same callee again and again (each trace of a loop body calling one jitted
        function) is fingerprinted in the time of its new equations."""
        with _memo_lock:
            hit = _memo.get(id(closed))
            if hit is not None and hit[0] is closed:
                _memo.move_to_end(id(closed))
        if hit is None or hit[0] is not closed:
            inner = Fingerprinter()
            inner.jaxpr(closed.jaxpr, closed.consts)
            hit = (closed, inner.digest.hexdigest(), inner.refs)
            with _memo_lock:
                _memo[id(closed)] = hit  # (the program is kept with its digest: its id is not reused)
                if len(_memo) > _MEMO_KEPT:
                    _memo.popitem(last=False)
        self.add("closed", hit[1])
        self.refs += hit[2]

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


def fingerprint(program: ClosedJaxpr | Jaxpr, *context: Any) -> tuple[str, list[Any]]:
    """The hex digest of ``program`` (and of the plain values ``context``), and the objects it
    refers to by identity."""
    f = Fingerprinter()
    f.add(*context)
    f.param(program)
    return f.digest.hexdigest(), f.refs
