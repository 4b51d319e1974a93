"""Staging: run a Python function on tracers and record a Jaxpr.

Values the function closes over become constants: scalars are written inline
as literals, arrays become constvars. Tracers of an enclosing, still-running
trace (a nested jit closing over an outer traced value) are lifted the same
way; the caller then passes them in as explicit arguments.
"""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ember import errors
from ember.core.avals import ShapedArray, aval_of_value
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from ember.core.primitive import Primitive, abstract_eval_rules
from ember.core.trace import Trace, Tracer, current_trace, set_current_trace, type_text, unexpected_tracer_error


class _SourceRecording(threading.local):
    """Whether staged equations record where the user's code made them (``Eqn.source``): only while
    ``recording_sources`` is on, which costs a look at the stack per equation. An equation bound
    again from a program (``replaying``) keeps the place of the one it copies."""

    def __init__(self) -> None:
        self.on = False
        self.replayed: str | None = None

    def current(self) -> str | None:
        """``file:line:column (function)`` of the user's innermost frame (the column as JAX counts it,
        from 0: where the expression being evaluated starts)."""
        if self.replayed is not None:
            return self.replayed
        level = errors.user_stacklevel() - 1  # (counted from this function's caller)
        if level < 1:  # (no frame of the user's)
            return None
        frame = sys._getframe(level)
        code = frame.f_code
        try:
            line, _, column, _ = list(code.co_positions())[frame.f_lasti // 2]
        except (AttributeError, IndexError):  # (Python 3.10: no columns)
            line, column = frame.f_lineno, 0
        return f"{code.co_filename}:{line or frame.f_lineno}:{column or 0} ({code.co_name})"


_sources = _SourceRecording()


@contextlib.contextmanager
def recording_sources() -> Iterator[None]:
    """Staged equations record their place in the user's code while this is on (``Eqn.source``)."""
    before, _sources.on = _sources.on, True
    try:
        yield
    finally:
        _sources.on = before


def source_recording() -> bool:
    return _sources.on


@contextlib.contextmanager
def replaying(eqn: Eqn) -> Iterator[None]:
    """Equations staged meanwhile stand for ``eqn`` (bound again from its program): its place is theirs."""
    before, _sources.replayed = _sources.replayed, eqn.source or _sources.replayed
    try:
        yield
    finally:
        _sources.replayed = before


class DebugInfo:
    """What error messages need to know about the traced function."""

    def __init__(self, kind: str, fun_name: str, arg_names: Sequence[str], static_hint: bool = True,
                 python_values: Sequence[bool] | None = None) -> None:
        self.kind = kind                  # "jit", "make_jaxpr", "cond branch", ...
        self.fun_name = fun_name
        self.arg_names = list(arg_names)  # one per flat input, e.g. "x", "params['w']"
        self.static_hint = static_hint    # whether marking the argument static could help
        # One per flat input: whether the caller passed a Python value (hashable, so it could be static)
        # rather than an array. None: not known, so a weakly typed scalar input is taken for one.
        self.python_values = None if python_values is None else list(python_values)


class StagingTrace(Trace):
    """Records each primitive application as an equation."""

    def __init__(self, debug: DebugInfo) -> None:
        self.parent = current_trace()
        self.debug = debug
        self.description = f"{debug.kind} of `{debug.fun_name}`"
        self.invars: list[Var] = []
        self.eqns: list[Eqn] = []
        self.constvars: list[Var] = []
        self.consts: list[Any] = []
        self._const_ids: dict[int, Var] = {}
        self._keepalive: list[Any] = []  # ids stay unique while the consts live
        # Shardings that ``with_sharding_constraint`` gave values (by their variables' ids): the
        # program's ``facts["out_shardings"]`` for its outputs, which a jit call places so.
        self.shardings: dict[int, Any] = {}

    def new_arg(self, aval: ShapedArray) -> Tracer:
        var = Var(aval)
        self.invars.append(var)
        return _StagedTracer(self, aval, var)

    def to_atom(self, x: Any) -> Var | Literal:
        if isinstance(x, Tracer):
            if x._trace is self:
                return x.ir_var
            if not x._trace.alive:
                raise unexpected_tracer_error(x)
            return self._constvar(x, x.aval)  # an outer trace's value: lifted
        aval = aval_of_value(x)
        if not aval.shape:
            return Literal(_scalar_value(x, aval), aval)
        return self._constvar(x, aval)

    def _constvar(self, x: Any, aval: ShapedArray) -> Var:
        var = self._const_ids.get(id(x))
        if var is None:
            var = Var(aval)
            self._const_ids[id(x)] = var
            self._keepalive.append(x)
            self.constvars.append(var)
            self.consts.append(x)
        return var

    def process_primitive(self, primitive: Primitive, args: tuple, params: dict) -> Any:
        atoms = [self.to_atom(a) for a in args]
        out = abstract_eval_rules[primitive](*(a.aval for a in atoms), **params)
        out_avals = out if primitive.multiple_results else [out]
        outvars = [Var(a) for a in out_avals]
        self.eqns.append(Eqn(primitive, atoms, params, outvars, _sources.current() if _sources.on else None))
        tracers = [_StagedTracer(self, v.aval, v) for v in outvars]
        return tracers if primitive.multiple_results else tracers[0]

    # --- errors that teach -------------------------------------------------
    def concretization_error(self, tracer: Tracer, what: str, error_type: type) -> Exception:
        if not self.alive:
            return unexpected_tracer_error(tracer)
        d = self.debug
        behind = self._arguments_behind(tracer)
        names = [d.arg_names[i] for i in behind]
        if names:
            quoted = ", ".join(f"`{n}`" for n in names)
            why = (f"The value depends on argument{'s' if len(names) > 1 else ''} {quoted} of `{d.fun_name}`, "
                   f"which {d.kind} traces: while tracing, only shapes and dtypes are known, not values.")
        else:
            why = (f"The value ({tracer.aval.str_short()}) is computed inside the {d.kind} of `{d.fun_name}`, "
                   "so only its shape and dtype are known while tracing.")
        fixes = []
        # Only a Python value can be static: an array argument marked static is refused (not hashable).
        static = [d.arg_names[i] for i in behind if self._is_python_value(i)] if d.static_hint else []
        if static:
            params = ", ".join(dict.fromkeys(repr(n.split("[")[0]) for n in static))
            fixes.append(f"if it is a Python value that selects what to compute, mark it static: "
                         f"jit({d.fun_name}, static_argnames=({params},))")
        if error_type is errors.TracerBoolConversionError:
            fixes.append("for value-dependent control flow use lax.cond / lax.switch, lax.while_loop or "
                         "lax.fori_loop, or jnp.where to select elementwise")
        elif error_type is errors.TracerIntegerConversionError:
            fixes.append("index with a traced value through lax.dynamic_slice / jnp.take, loop a traced number of "
                         "times with lax.fori_loop / lax.while_loop, and keep shapes static")
        else:
            fixes.append("keep the computation in ember operations (jnp / lax) instead of converting to Python values")
        return error_type(
            f"Attempted {what} of a traced array with type {tracer.aval.str_short()} "
            f"while tracing `{d.fun_name}`.\n{why}\n"
            f"At {errors.user_location()}\n"
            "Fix: " + "; or ".join(fixes) + ".")

    def _arguments_behind(self, tracer: Tracer) -> list[int]:
        """The positions (among the flat inputs) of the function arguments the tracer's value depends on."""
        wanted = {id(tracer.ir_var)}
        for eqn in reversed(self.eqns):
            if any(id(v) in wanted for v in eqn.outvars):
                wanted.update(id(a) for a in eqn.invars if isinstance(a, Var))
        return [i for i, (var, _) in enumerate(zip(self.invars, self.debug.arg_names)) if id(var) in wanted]

    def _is_python_value(self, i: int) -> bool:
        known = self.debug.python_values
        if known is not None and i < len(known):
            return known[i]
        a = self.invars[i].aval
        return a.weak_type and not a.shape


class _StagedTracer(Tracer):
    # Not ``var``: that name is the array method ``x.var()``.
    __slots__ = ("ir_var",)

    def __init__(self, trace: StagingTrace, aval: ShapedArray, var: Var) -> None:
        super().__init__(trace, aval)
        self.ir_var = var

    def __repr__(self) -> str:
        return f"JitTracer({type_text(self.aval)})"  # (JAX's name for the tracers of jit and make_jaxpr)


def _scalar_value(x: Any, aval: ShapedArray) -> Any:
    """A NumPy scalar of the literal's dtype (validates range, e.g. int32 overflow)."""
    if hasattr(x, "_value"):
        x = x._value
    return np.asarray(x, dtype=aval.dtype)[()]


# Each nested trace (a jitted function calling a jitted function while it is traced) stacks about ten
# frames; a static recursion 100 deep (which JAX traces) needs more than Python's default limit of 1000.
# Traces raise the limit when fewer than _TRACE_HEADROOM frames are left, up to _MAX_RECURSION_LIMIT
# (checked on CPython 3.10 and 3.11: 20000 nested Python calls run in a thread of the default 8 MiB
# stack, and nested calls through instances' __call__ end in a RecursionError, not a crash).
_TRACE_HEADROOM = 250
_MAX_RECURSION_LIMIT = 20_000


def _ensure_stack_headroom() -> None:
    limit = sys.getrecursionlimit()
    if limit >= _MAX_RECURSION_LIMIT:
        return
    try:
        sys._getframe(limit - _TRACE_HEADROOM)  # a stack shallower than this raises: enough headroom
    except ValueError:
        return
    sys.setrecursionlimit(min(_MAX_RECURSION_LIMIT, 4 * limit))  # (passes over the nest recurse too)


def trace_to_jaxpr(fun: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray],
                   debug: DebugInfo) -> ClosedJaxpr:
    """Trace ``fun`` (flat inputs -> flat outputs) into a ClosedJaxpr.

    Consts of the result may be tracers of an enclosing trace; callers that
    nest (jit inside jit, control flow) pass them through as operands.
    """
    _ensure_stack_headroom()
    trace = StagingTrace(debug)
    args = [trace.new_arg(a) for a in in_avals]
    try:
        with set_current_trace(trace):
            outs = fun(*args)
            outvars = [trace.to_atom(o) for o in outs]
    finally:
        trace.alive = False
    jaxpr = Jaxpr(trace.constvars, trace.invars, trace.eqns, outvars)
    if trace.shardings:
        placed = [trace.shardings.get(id(v)) for v in outvars]
        if any(s is not None for s in placed):
            jaxpr.facts["out_shardings"] = placed
    return ClosedJaxpr(jaxpr, trace.consts)


def consts_as_inputs(programs: Sequence[ClosedJaxpr]) -> tuple[list[ClosedJaxpr], list]:
    """Every program takes the consts of all of them as leading inputs (ignoring others' ones).

    The consts are returned in that order; the caller passes them as operands,
    so a const that is a tracer of an enclosing trace becomes a use of it.
    """
    consts: list = []
    const_avals: dict[int, ShapedArray] = {}
    for p in programs:
        for x, v in zip(p.consts, p.jaxpr.constvars):
            if id(x) not in const_avals:
                const_avals[id(x)] = v.aval
                consts.append(x)
    if not consts:  # unchanged: calls of one cached body keep sharing it (CSE compares bodies by identity)
        return list(programs), consts
    opened = []
    for p in programs:
        own = {id(x): v for x, v in zip(p.consts, p.jaxpr.constvars)}
        leading = [own.get(id(x)) or Var(const_avals[id(x)]) for x in consts]
        j = p.jaxpr
        opened.append(ClosedJaxpr(Jaxpr([], leading + j.invars, j.eqns, j.outvars), []))
    return opened, consts
