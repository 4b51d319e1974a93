"""Refs: mutable array references (``jax.new_ref``, ``jax.freeze``, ``jax.ref.get/set/swap/addupdate``).

A ``Ref`` holds a value (an Array, or a tracer while a function is traced). Reads index the value;
writes replace it with an updated one. ember *discharges* refs while tracing instead of staging
ref primitives: the value a ref holds is tracked in Python as the trace runs, so a traced program
only ever sees ordinary values.

Scopes say where a ref lives. ``jit`` opens one per trace (``Scope`` with a staging trace): a ref
it did not create, read or written inside, is *lifted* into it (its value becomes a hidden input of
the program, ``StagingTrace.new_arg``) and, when written, its final value a hidden output; the
caller passes the current value in and writes the output back after each call (``ember.api``).
Loop bodies (scan, while_loop, fori_loop) and cond / switch branches open a scope that first
discovers which outer refs they write, then carry them as extra operands and outputs
(``ember.lax.control_flow``). ``vmap`` gives a mapped Ref argument's function a ref of one example
and writes the batch back. A write from any other context that ember cannot see through
(custom_jvp, checkpoint) is refused with an error, and so is storing a value of an inner
transformation (vmap, grad) into a ref that lives outside it, as in JAX.
"""
from __future__ import annotations

import builtins
import contextlib
import threading
from typing import Any, Iterator, Sequence

import numpy as np

from ember import dtypes, errors
from ember.core.array import ensure_array
from ember.core.avals import ShapedArray
from ember.core.trace import EvalTrace, Tracer, current_trace
from ember.lax.base import aval
from ember.lax.elementwise import convert_element_type


class AbstractRef:
    """The type of a Ref: ``Ref{float32[3]}`` (``jax.typeof(ref)``, ``ref.aval``)."""

    __slots__ = ("inner_aval",)

    def __init__(self, inner_aval: ShapedArray) -> None:
        self.inner_aval = inner_aval

    shape = property(lambda self: self.inner_aval.shape)
    dtype = property(lambda self: self.inner_aval.dtype)
    ndim = property(lambda self: len(self.inner_aval.shape))
    size = property(lambda self: int(np.prod(self.inner_aval.shape, dtype=np.int64)))
    weak_type = property(lambda self: self.inner_aval.weak_type)

    def __eq__(self, other: Any) -> bool:
        return type(other) is AbstractRef and other.inner_aval == self.inner_aval

    def __hash__(self) -> int:
        return hash(("Ref", self.inner_aval))

    def str_short(self, short_dtypes: bool = False) -> str:
        if short_dtypes:
            return f"Ref{{{self.inner_aval.str_short()}}}"
        return str(self)

    def __str__(self) -> str:
        a = self.inner_aval
        return f"Ref{{{a.dtype.name}[{','.join(map(str, a.shape))}]}}"

    __repr__ = __str__


class _State(threading.local):
    def __init__(self) -> None:
        self.scopes: list[Scope] = []


_state = _State()


class Scope:
    """Where refs live while a function is traced (see the module docstring).

    ``trace``: the trace the scope's function runs in. ``lifts``: whether a ref from outside
    becomes a hidden input (jit, through ``trace.new_arg``) or is used as it is and only
    recorded (a loop body that discovers what it writes).
    """

    def __init__(self, kind: str, name: str, trace: Any, lifts: bool) -> None:
        self.kind, self.name, self.trace, self.lifts = kind, name, trace, lifts
        self.lifted: dict[int, list] = {}   # id(ref) -> [ref, outer value, outer home trace, input value]
        self.written: builtins.set[int] = builtins.set()
        self.created: list[Ref] = []

    def lift(self, ref: "Ref") -> None:
        value = ref._val
        inner = self.trace.new_arg(aval(value)) if self.lifts else value
        self.lifted[id(ref)] = [ref, value, ref._home_trace, inner]
        ref._val, ref._home_trace = inner, self.trace

    def lifted_refs(self) -> list["Ref"]:
        return [entry[0] for entry in self.lifted.values()]

    def restore(self) -> None:
        """Give the lifted refs back their outer values; refs made here die with the scope."""
        for ref, value, home_trace, _ in self.lifted.values():
            ref._val, ref._home_trace = value, home_trace
        for ref in self.created:
            if ref._dead is None:
                ref._dead = f"it was created inside the {self.kind} of `{self.name}`, which has finished"
                ref._val = None


@contextlib.contextmanager
def open_scope(scope: Scope) -> Iterator[Scope]:
    _state.scopes.append(scope)
    try:
        yield scope
    finally:
        _state.scopes.pop()


class Ref:
    """A mutable array reference (``jax.Ref``): made by ``new_ref``, read with ``ref[idx]``,
    written with ``ref[idx] = v`` / ``ref[idx] += v``; ``freeze`` gives its final value (and ends it,
    inside a traced function). Reads have the ref's type: a ref made from a Python scalar reads weakly typed."""

    __slots__ = ("_val", "aval", "_home", "_home_trace", "_dead", "_arg_name", "__weakref__")

    def __init__(self, value: Any, home: Scope | None, home_trace: Any, arg_name: str | None = None) -> None:
        self._val = value
        self.aval = AbstractRef(aval(value))
        self._home, self._home_trace = home, home_trace
        self._dead: str | None = None
        self._arg_name = arg_name  # a jit argument's name (for messages), or None

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __getitem__(self, idx: Any) -> Any:
        return get(self, idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        swap(self, idx, value, _function_name="set")

    def get(self, idx: Any = None) -> Any:
        return get(self, idx)

    def set(self, value: Any, idx: Any = None) -> None:
        swap(self, idx, value, _function_name="set")

    def swap(self, value: Any, idx: Any = None) -> Any:
        return swap(self, idx, value)

    def addupdate(self, x: Any, idx: Any = None) -> None:
        addupdate(self, idx, x)

    def __repr__(self) -> str:
        if self._dead is not None:
            return f"<invalid Ref{{{self.aval.inner_aval.str_short()}}}>"
        value = self._val
        if isinstance(value, Tracer):
            return f"Ref{{{self.aval.inner_aval.str_short()}}}(traced)"
        return "Ref" + repr(value)[len("Array"):]  # (as JAX: Array's repr, renamed, indentation kept)

    __str__ = __repr__

    __hash__ = object.__hash__


def _is_full(idx: Any) -> bool:
    return idx is None or idx is Ellipsis or (isinstance(idx, tuple) and (idx == () or idx == (Ellipsis,)))


def new_ref(init_val: Any, *, memory_space: Any = None, kind: Any = None) -> Ref:
    """A new Ref holding ``init_val`` (an array or a scalar)."""
    if isinstance(init_val, Ref):
        raise TypeError("jax.new_ref: the initial value is a Ref, but refs to refs (higher-order refs) are not "
                        "allowed. Fix: pass its value, new_ref(ref[...]).")
    if memory_space is not None:
        raise NotImplementedError("jax.new_ref: memory_space is not supported by ember")
    value = ensure_array(init_val)
    scopes = _state.scopes
    scope = scopes[-1] if scopes else None
    ref = Ref(value, scope, current_trace())
    if scope is not None:
        scope.created.append(ref)
    return ref


def _check_alive(ref: Any, what: str) -> None:
    if type(ref) is not Ref:
        raise TypeError(f"jax.ref.{what}: expected a Ref, got a value of type {type(ref).__name__}")
    if ref._dead is _FROZEN:  # (JAX's message for a frozen ref under jit names the operation's primitive)
        a = ref.aval.inner_aval
        raise ValueError(f"`{'swap' if what == 'set' else what}` must be called on `Ref` types: "
                         f"{a.dtype.name}[{','.join(map(str, a.shape))}]. The Ref is no longer valid: it was frozen "
                         "(jax.freeze) inside this traced function.")
    if ref._dead is not None:
        raise ValueError(f"Cannot {what} a Ref{{{ref.aval.inner_aval.str_short()}}} that is no longer valid: "
                         f"{ref._dead}.")


def _enter(ref: Ref, what: str) -> None:
    """Make ``ref`` usable in the innermost scope: lift it into every scope between its home and here."""
    _check_alive(ref, what)
    scopes = _state.scopes
    if not scopes:
        return
    top = scopes[-1]
    if ref._home is top or id(ref) in top.lifted:
        return
    start = 0
    for i, s in enumerate(scopes):
        if s is ref._home:
            start = i + 1
    for s in scopes[start:]:
        if id(ref) not in s.lifted:
            s.lift(ref)


def transformation_kind(trace: Any) -> str:
    name = type(trace).__name__
    if "Batch" in name:
        return "vmapped"
    if "JVP" in name or "PartialEval" in name or "Lin" in name:
        return "differentiated"
    return ""


def _check_write(ref: Ref, value: Any, what: str) -> None:
    """Refuse to store a value that belongs to a transformation (or a trace) inside the ref's home."""
    home = ref._home_trace
    trace = current_trace()
    seen_through = []
    while trace is not home and not (isinstance(trace, EvalTrace) and isinstance(home, EvalTrace)):
        parent = getattr(trace, "parent", None)
        if parent is None:  # a trace ember cannot see through (a cond branch, custom_jvp, checkpoint, ...)
            raise NotImplementedError(
                f"A Ref{{{ref.aval.inner_aval.str_short()}}} is written inside {trace.description}, which closes "
                "over it. ember discharges refs in jit, lax.scan, lax.fori_loop and lax.while_loop bodies, lax.cond "
                "and lax.switch branches, and in "
                "grad and vmap of functions that make their own refs, but not here. Fix: write the ref outside "
                "that function (return the new value from it), or pass the ref's value in and out explicitly.")
        seen_through.append(trace)
        trace = parent
    if isinstance(value, Tracer) and any(value._trace is t for t in seen_through):
        kind = transformation_kind(value._trace)
        if kind == "vmapped":
            raise Exception(f"performing a {what} operation with vmapped value on an unbatched array reference of "
                            f"type {ref.aval}. Move the array reference to be an argument to the vmapped function?")
        raise Exception(f"performing a {what} operation with a differentiated value on a non-differentiated array "
                        f"reference of type {ref.aval}. Move the array reference to be an argument of the "
                        "differentiated function?")


def _as_ref_type(ref: Ref, value: Any, what: str, expected_shape: tuple) -> Any:
    value = ensure_array(value)
    a, target = aval(value), ref.aval.inner_aval
    if a.dtype != target.dtype:
        if not a.weak_type or dtypes.promote_types_weak((target.dtype, False), (a.dtype, True))[0] != target.dtype:
            raise ValueError(f"Invalid dtype for `{what}`. Ref dtype: {target.dtype}. Value dtype: {a.dtype}. ")
        value = convert_element_type(value, target.dtype, a.weak_type)
        a = aval(value)
    if a.shape != tuple(expected_shape):
        raise ValueError(f"Invalid shape for `{what}`. Ref shape: {target.shape}. Expected shape: "
                         f"{tuple(expected_shape)}. Value shape: {a.shape}. ")
    return value


def _store(ref: Ref, new: Any, weak_type: bool = False) -> None:
    """Replace the value (of the ref's dtype and shape). As in JAX 0.10, a written value is held
    strongly typed (reads give the ref's own type: ``get``), except what a ``cond`` writes, which
    keeps the ref's type (``weak_type``)."""
    if aval(new).weak_type != weak_type:
        new = convert_element_type(new, ref.dtype, weak_type)
    scopes = _state.scopes
    if scopes:
        scopes[-1].written.add(id(ref))
    ref._val = new


def get(ref: Ref, idx: Any = None) -> Any:
    """``ref[idx]``: the indexed elements of the ref's value, as an Array (``...`` for all of it)."""
    _enter(ref, "get")
    value = ref._val
    if isinstance(value, Tracer) and not value._trace.alive:
        raise ValueError(f"A Ref{{{ref.aval.inner_aval.str_short()}}} holds a value of a trace that has finished: it "
                         "was written inside a function ember could not discharge the write from.")
    return _as_read(ref, value if _is_full(idx) else value[idx])


def held_value(ref: Ref) -> Any:
    """The value ``ref`` holds, as it was stored (``get`` gives it the ref's weak type)."""
    _enter(ref, "get")
    return ref._val


def _as_read(ref: Ref, value: Any) -> Any:
    """A value read from ``ref``: of the ref's type (a weakly typed ref's reads are weak, as in JAX)."""
    if ref.weak_type and not aval(value).weak_type:
        value = convert_element_type(value, ref.dtype, True)
    return value


def swap(ref: Ref, idx: Any, value: Any, _function_name: str = "swap") -> Any:
    """``old, ref[idx] = ref[idx], value``; returns ``old``."""
    _enter(ref, _function_name)
    old = ref._val
    _check_write(ref, value, "set/swap")
    if _is_full(idx):
        _store(ref, _as_ref_type(ref, value, "swap", ref.shape))
        return _as_read(ref, old)
    previous = old[idx]
    value = _as_ref_type(ref, value, "swap", aval(previous).shape)
    _store(ref, old.at[idx].set(value))
    return _as_read(ref, previous)


def set(ref: Ref, idx: Any, value: Any) -> None:  # noqa: A001  (jax.ref.set)
    """``ref[idx] = value``."""
    swap(ref, idx, value, _function_name="set")


def addupdate(ref: Ref, idx: Any, x: Any) -> None:
    """``ref[idx] += x``, in place."""
    _enter(ref, "addupdate")
    old = ref._val
    _check_write(ref, x, "addupdate")
    if _is_full(idx):
        _store(ref, old + _as_ref_type(ref, x, "addupdate", ref.shape))
        return
    x = _as_ref_type(ref, x, "addupdate", aval(old[idx]).shape)
    _store(ref, old.at[idx].add(x))


_FROZEN = "it was frozen (jax.freeze)"


def freeze(ref: Ref) -> Any:
    """``ref``'s final value. Only in the scope that created it. Inside a traced function (``jit``)
    the ref ends here; outside, it stays usable (JAX 0.10 evaluates ``freeze`` eagerly as a read)."""
    _enter(ref, "freeze")
    scopes = _state.scopes
    top = scopes[-1] if scopes else None
    if ref._home is not top or ref._arg_name is not None:
        where = f"the {top.kind} of `{top.name}`" if top is not None else "the top level"
        raise ValueError(f"jax.freeze: a Ref{{{ref.aval.inner_aval.str_short()}}} can only be frozen in the scope "
                         f"that created it, but it is frozen in {where}, which "
                         f"{'takes it as an argument' if ref._arg_name is not None else 'closes over it'}.")
    value = ref._val
    if top is not None:
        ref._dead, ref._val = _FROZEN, None
    return value


def invalidate(ref: Ref, why: str) -> None:
    """End ``ref`` (a ref a transformation made for its function, once the function has returned)."""
    ref._dead, ref._val = why, None


# --- helpers for jit and loops --------------------------------------------------------------------
def param_ref(value: Any, scope: Scope, name: str) -> Ref:
    """The ref a traced function sees for a Ref argument: its value is the program's input."""
    ref = Ref(value, scope, scope.trace, arg_name=name)
    scope.created.append(ref)
    return ref


def is_ref(x: Any) -> bool:
    return type(x) is Ref


def write_value(ref: Ref, value: Any, keep_type: bool = False) -> None:
    """Set the whole value (a program's output for the ref) in the current context; ``keep_type``:
    held with the ref's own weak type (what JAX's ``cond`` writes)."""
    _enter(ref, "set")
    _check_write(ref, value, "set/swap")
    _store(ref, value, keep_type and ref.weak_type)


def read_values(refs: Sequence[Ref]) -> list:
    """The values ``refs`` hold, as stored (what programs and loop carries take for them)."""
    return [held_value(r) for r in refs]


class LoopRefs(Exception):
    """Raised out of a loop body's first trace when it writes refs from outside: the loop is traced
    again with them carried. ``probe`` names the loop that asked (nested loops each catch their own)."""

    def __init__(self, probe: "LoopProbe", refs: list[Ref]) -> None:
        super().__init__("internal: a loop body writes refs; traced again with them carried")
        self.probe, self.refs = probe, refs


class LoopProbe:
    """Wraps a loop body for its first trace: finds the outer refs it writes."""

    def __init__(self, api: str, name: str) -> None:
        self.api, self.name = api, name

    def wrap(self, fun: Any) -> Any:
        @errors.wraps(fun)
        def probed(*args: Any) -> Any:
            scope = Scope(f"{self.api} body", self.name, current_trace(), lifts=False)
            try:
                with open_scope(scope):
                    out = fun(*args)
            finally:
                scope.restore()
            written = [r for r in scope.lifted_refs() if id(r) in scope.written]
            if written:
                raise LoopRefs(self, written)
            return out
        return probed


@contextlib.contextmanager
def bound(refs: Sequence[Ref], values: Sequence[Any], api: str, name: str) -> Iterator[Scope]:
    """Inside a loop body: ``refs`` hold ``values`` (the body's carried inputs). Read their final
    values (``read_values``) before leaving; leaving gives them back their outer values."""
    scope = Scope(f"{api} body", name, current_trace(), lifts=False)
    saved = [(r._val, r._home, r._home_trace, r._arg_name) for r in refs]
    for r, v in zip(refs, values):
        r._val, r._home, r._home_trace = v, scope, scope.trace
        r._arg_name = r._arg_name or ""  # (not frozen here: it lives outside the loop)
    try:
        with open_scope(scope):
            yield scope
        if any(id(r) in scope.written for r in scope.lifted_refs()):
            raise NotImplementedError(f"{api}: the body writes a Ref it did not write when first traced; ember "
                                      "needs a loop body to write the same refs each time it is traced.")
    finally:
        scope.restore()
        for r, (v, home, home_trace, arg_name) in zip(refs, saved):
            r._val, r._home, r._home_trace, r._arg_name = v, home, home_trace, arg_name
