"""Helpers shared by the transformations: run a program by binding its primitives,
trace a function into a sub-program, drop dead equations, reorder inputs.

Sub-programs held in the params of ``jit``, ``cond``, ``scan`` and ``while`` hold
no consts (the invariant of ``ember.lax.control_flow``): whatever a traced
function closes over becomes explicit leading inputs, which ``trace_program``
returns for the caller to pass as operands.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.config import config
from ember.core.array import Array
from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal, Var, is_effectful
from ember.core.staging import DebugInfo, consts_as_inputs, replaying, source_recording, trace_to_jaxpr
from ember.core.verify import check_jaxpr


def literal_value(lit: Literal) -> Array:
    """A literal as an Array of exactly its type (a NumPy scalar would lose the weak flag)."""
    return Array(np.array(lit.val, lit.aval.dtype), lit.aval)


def eval_jaxpr_by_binding(jaxpr: Jaxpr, consts: Sequence[Any], *args: Any) -> list:
    """Run ``jaxpr`` by binding each primitive in whatever trace is current.

    Eagerly this evaluates; under a transformation it transforms; under staging it
    inlines. The same environment loop as the reference interpreter.
    """
    env: dict[int, Any] = {}

    def read(a: Any) -> Any:
        return literal_value(a) if isinstance(a, Literal) else env[id(a)]

    for v, x in zip(jaxpr.constvars, consts):
        env[id(v)] = x
    for v, x in zip(jaxpr.invars, args):
        env[id(v)] = x
    replay = source_recording()  # (then the equations made keep the places of those they copy)
    for eqn in jaxpr.eqns:
        if replay:
            with replaying(eqn):
                outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
        else:
            outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
        for v, o in zip(eqn.outvars, outs if eqn.primitive.multiple_results else (outs,)):
            env[id(v)] = o
    return [read(a) for a in jaxpr.outvars]


def eval_closed_by_binding(closed: ClosedJaxpr, *args: Any) -> list:
    return eval_jaxpr_by_binding(closed.jaxpr, closed.consts, *args)


def trace_program(fun: Callable[..., Sequence[Any]], in_avals: Sequence[ShapedArray],
                  kind: str) -> tuple[ClosedJaxpr, list]:
    """Trace ``fun`` (flat inputs -> flat outputs) into a const-free sub-program.

    Returns the program, whose leading inputs stand for the returned consts, and
    the consts (arrays, or tracers of an enclosing trace) to pass for them.
    """
    [program], consts = trace_programs([fun], in_avals, kind)
    return program, consts


def trace_programs(funs: Sequence[Callable[..., Sequence[Any]]], in_avals: Sequence[ShapedArray],
                   kind: str) -> tuple[list[ClosedJaxpr], list]:
    """Trace several functions of the same inputs (the branches of a ``cond``) so that every
    program takes the consts of all of them as leading inputs (each ignoring the others')."""
    names = [f"args[{i}]" for i in range(len(in_avals))]
    traced = [trace_to_jaxpr(fun, in_avals, DebugInfo(kind, kind, names, static_hint=False)) for fun in funs]
    programs, consts = consts_as_inputs(traced)
    if config.check_ir:
        for program in programs:
            check_jaxpr(program)
    return programs, consts


def prune(jaxpr: Jaxpr, used_outputs: Sequence[bool]) -> Jaxpr:
    """The program computing only the used outputs, and keeping every effect (a print)."""
    outvars = [v for v, used in zip(jaxpr.outvars, used_outputs) if used]
    live = {id(v) for v in outvars if isinstance(v, Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if any(id(v) in live for v in eqn.outvars) or is_effectful(eqn):
            kept.append(eqn)
            live.update(id(a) for a in eqn.invars if isinstance(a, Var))
    return Jaxpr(jaxpr.constvars, jaxpr.invars, kept[::-1], outvars)


def with_io(closed: ClosedJaxpr, invars: Sequence[Var], outvars: Sequence[Any]) -> ClosedJaxpr:
    """The same equations with the inputs and outputs listed differently (reordered or pruned)."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, list(invars), j.eqns, list(outvars)), closed.consts)


def split_list(xs: Sequence[Any], sizes: Sequence[int]) -> list[list]:
    """``xs`` cut into consecutive pieces of the given sizes (plus the rest)."""
    out, start = [], 0
    for n in sizes:
        out.append(list(xs[start:start + n]))
        start += n
    out.append(list(xs[start:]))
    return out


def select_by(mask: Sequence[bool], xs: Sequence[Any]) -> list:
    return [x for m, x in zip(mask, xs) if m]


def merge_by(mask: Sequence[bool], when_true: Sequence[Any], when_false: Sequence[Any]) -> list:
    """Interleave two lists back into one, taking from ``when_true`` where ``mask`` is set."""
    true_it, false_it = iter(when_true), iter(when_false)
    return [next(true_it) if m else next(false_it) for m in mask]
