"""Fingerprints of programs: a digest of what a jaxpr computes, independent of variable names
and of the Python objects that hold it.

The digest covers the equations (primitive, params, operands by position), the types of every
value, literal values and the bytes of consts. Two programs with equal fingerprints compute the
same thing, so they may share compiled code: whole executables (``ember.runtime.compile_cache``)
or single kernels (``ember.backends.cpu.codegen``).

Params that are not plain data (e.g. the rule functions of ``custom_jvp``) enter the fingerprint
by identity; whoever keys a cache on a fingerprint must keep ``refs`` alive with the entry, so
that an id can never be reused for another object meanwhile.

A *stable* fingerprint (``stable=True``) is the same in every process: primitives enter by their
name, where their shape rule was registered and how many such came before them
(``stable_primitive_name``; a name is never reused, so it is as good as their identity), and
enumerated params by their class and member name. It keys the jit's shared executables and the
disk cache of whole programs; one with ``refs`` refers to live objects and cannot key anything
on disk.
"""
from __future__ import annotations

import enum
import hashlib
import sys
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from ember.core.avals import ShapedArray
from ember.core.caches import register_cache
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal, Var
from ember.core.primitive import Primitive, abstract_eval_rules

_PLAIN = (bool, int, float, complex, str, type(None), np.dtype, np.generic)


# Digests of recent programs, by identity and whether stable (programs are never changed once built).
_memo: OrderedDict[tuple[int, bool], tuple[ClosedJaxpr, str, list]] = OrderedDict()
_memo_lock = threading.Lock()
_MEMO_KEPT = 1024


def _clear_memo() -> None:
    with _memo_lock:
        _memo.clear()
        _binder_bytes.clear()
        _part_bytes.clear()


register_cache("fingerprints of sub-programs, by identity", _clear_memo, lambda: len(_memo))


# What a variable of each type adds to a digest (``Fingerprinter.jaxpr``): repr of a type is most of
# the time of a fingerprint otherwise. Types are few; the table is emptied with the memo.
_binder_bytes: dict[ShapedArray, bytes] = {}

# What ``Fingerprinter.add`` hashes for a part, by (type, value), for the types whose equal values
# have equal reprs (not floats: -0.0 == 0.0) and whose repr holds no address: parameter names,
# their small integers and strings, avals and dtypes. A program of n equations repeats a few
# dozen of them n times.
_CACHED_PARTS = frozenset({str, int, bool, type(None), ShapedArray, np.dtype})
_part_bytes: dict[tuple[type, Any], bytes] = {}
_PARTS_KEPT = 4096

# The stable names of primitives (``stable_primitive_name``): every primitive named so far, kept
# (a name is never given to another primitive, even once the first has left the table), and how
# many primitives of each name and registrant there were.
_stable_names: dict[Primitive, str] = {}
_name_counts: dict[str, int] = {}
_scanned_version = -1
_names_lock = threading.Lock()


def stable_primitive_name(p: Primitive) -> str | None:
    """A name of ``p`` that is the same in every process that defines the same primitives in the
    same order: its name, where its shape rule was registered, and how many primitives of that
    name and place came before it (a factory makes several). None if it has no shape rule."""
    global _scanned_version
    name = _stable_names.get(p)
    if name is None and _scanned_version != abstract_eval_rules.version:
        with _names_lock:
            for q in list(abstract_eval_rules):  # (in the order they were registered)
                if q not in _stable_names:
                    key = f"{q.name}@{abstract_eval_rules._registrants.get(q, '?')}"
                    count = _name_counts.get(key, 0)
                    _name_counts[key] = count + 1
                    _stable_names[q] = f"{key}#{count}"
            _scanned_version = abstract_eval_rules.version
        name = _stable_names.get(p)
    return name


def _importable(cls: type) -> bool:
    """Whether ``cls`` is what its module and qualified name find (not a class made at run time,
    whose name another class may share)."""
    found: Any = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is cls


class Fingerprinter:
    def __init__(self, stable: bool = False) -> None:
        self.digest = hashlib.sha256()
        self.refs: list[Any] = []  # objects hashed by identity, kept alive with the entry
        self.stable = stable

    def add(self, *parts: Any) -> None:
        for p in parts:
            cls = p.__class__
            if cls in _CACHED_PARTS or issubclass(cls, np.dtype):
                data = _part_bytes.get((cls, p))
                if data is None:
                    data = repr(p).encode() + b"\x00"
                    if len(_part_bytes) >= _PARTS_KEPT:
                        _part_bytes.clear()
                    _part_bytes[(cls, p)] = data
                self.digest.update(data)
                continue
            text = repr(p)
            if self.stable and " at 0x" in text:  # (a default repr: an address, this process's)
                self.refs.append(p)
            self.digest.update(text.encode() + b"\x00")

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
        elif self.stable and isinstance(value, enum.Enum) and _importable(type(value)):
            self.add("enum", type(value).__module__, type(value).__qualname__, value.name)
        else:
            self.refs.append(value)
            self.add("object", id(value))

    def closed(self, closed: ClosedJaxpr) -> None:
        """A sub-program enters by its own digest, computed once per program object: a program
        that holds the same callee again and again (each trace of a loop body calling one jitted
        function) is fingerprinted in the time of its new equations."""
        memo_key = (id(closed), self.stable)
        with _memo_lock:
            hit = _memo.get(memo_key)
            if hit is not None and hit[0] is closed:
                _memo.move_to_end(memo_key)
        if hit is None or hit[0] is not closed:
            inner = Fingerprinter(self.stable)
            inner.jaxpr(closed.jaxpr, closed.consts)
            hit = (closed, inner.digest.hexdigest(), inner.refs)
            with _memo_lock:
                _memo[memo_key] = hit  # (the program is kept with its digest: its id is not reused)
                if len(_memo) > _MEMO_KEPT:
                    _memo.popitem(last=False)
        self.add("closed", hit[1])
        self.refs += hit[2]

    def jaxpr(self, jaxpr: Jaxpr, consts: list) -> None:
        names: dict[int, int] = {}

        update = self.digest.update

        def binder(v: Var) -> None:
            names[id(v)] = len(names)
            aval = v.aval
            if type(aval) is ShapedArray:  # (the bytes ``add("var", aval)`` hashes, made once per type)
                text = _binder_bytes.get(aval)
                if text is None:
                    text = _binder_bytes[aval] = f"'var'\x00{aval!r}\x00".encode()
                update(text)
            else:
                self.add("var", aval)

        def atom(a: Any) -> None:
            if isinstance(a, Literal):
                self.add("lit", a.aval)
                update(repr(np.asarray(a.val).tobytes()).encode() + b"\x00")  # (``add``'s bytes of them)
            else:
                update(f"'ref'\x00{names[id(a)]}\x00".encode())  # (``add("ref", n)``, written out)

        self.add("jaxpr", len(jaxpr.constvars), len(jaxpr.invars), len(jaxpr.eqns))
        for v, c in zip(jaxpr.constvars, consts):
            binder(v)
            value = np.asarray(getattr(c, "_value", c))
            self.add("const", value.dtype.str, value.shape)
            self.digest.update(np.ascontiguousarray(value).tobytes())
        for v in jaxpr.invars:
            binder(v)
        for eqn in jaxpr.eqns:
            stable_name = stable_primitive_name(eqn.primitive) if self.stable else None
            if stable_name is not None:
                self.add("eqn", stable_name)
            else:
                if self.stable:  # (a primitive without a stable name: it refers to itself)
                    self.refs.append(eqn.primitive)
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


def fingerprint(program: ClosedJaxpr | Jaxpr, *context: Any, stable: bool = False) -> tuple[str, list[Any]]:
    """The hex digest of ``program`` (and of the plain values ``context``), and the objects it
    refers to by identity; ``stable``: the same digest in every process (see the module's doc)."""
    f = Fingerprinter(stable)
    f.add(*context)
    f.param(program)
    return f.digest.hexdigest(), f.refs
