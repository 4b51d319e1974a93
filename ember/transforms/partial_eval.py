"""Partial evaluation: compute what is known now, record the rest as a program.

``linearize`` runs a JVP trace on top of a ``PartialEvalTrace``. Primal values
belong to the parent trace and are *known*: operations on them run there at
once (eagerly, or staged into an enclosing ``jit``). Tangents are this trace's
tracers and *unknown*: operations on them are recorded into a linear program,
whose consts (the *residuals*, e.g. ``cos(x)`` for ``sin``) are known values.
Reverse mode then transposes that program.

Primitives holding sub-programs split them the same way
(``partial_eval_rules[p](trace, args, params)``): a known call runs now and
returns the residuals that the recorded unknown call takes.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

from ember.core.ir import ClosedJaxpr, Jaxpr
from ember.core.primitive import Primitive
from ember.core.staging import DebugInfo, StagingTrace
from ember.core.trace import Trace, Tracer, current_trace, set_current_trace
from ember.lax.base import aval
from ember.transforms.jvp import jvp_flat
from ember.transforms.programs import eval_closed_by_binding, merge_by, select_by, trace_program
from ember.transforms.tangents import Zero, is_differentiable

partial_eval_rules: dict[Primitive, Callable] = {}


class PartialEvalTrace(StagingTrace):
    """Forwards operations on known values to its parent; records the others."""

    def __init__(self, parent: Trace, debug: DebugInfo) -> None:
        super().__init__(debug)
        self.parent = parent

    def is_unknown(self, x: Any) -> bool:
        return isinstance(x, Tracer) and x._trace is self

    def process_primitive(self, primitive: Primitive, args: tuple, params: dict) -> Any:
        if not any(map(self.is_unknown, args)):
            with set_current_trace(self.parent):
                return primitive.bind(*args, **params)
        rule = partial_eval_rules.get(primitive)
        if rule is not None:
            return rule(self, args, params)
        return self.stage(primitive, args, params)

    def stage(self, primitive: Primitive, args: Sequence[Any], params: dict) -> Any:
        """Record the operation; its known operands become residuals."""
        return super().process_primitive(primitive, tuple(args), params)


class SplitProgram(NamedTuple):
    """A program split by which inputs are known (see ``partial_eval_jaxpr``)."""

    known: ClosedJaxpr                # (known_consts, known inputs) -> (known outputs, computed residuals)
    known_consts: list
    unknown: ClosedJaxpr              # (residuals, unknown inputs) -> unknown outputs
    out_unknowns: list[bool]
    residual_sources: list[int | None]  # per residual: the known input it is, or None if computed

    @property
    def num_computed_residuals(self) -> int:
        return sum(s is None for s in self.residual_sources)

    def residuals(self, known_inputs: Sequence[Any], computed: Sequence[Any]) -> list:
        """The residual values: forwarded known inputs and computed ones, in order."""
        computed = iter(computed)
        return [next(computed) if s is None else known_inputs[s] for s in self.residual_sources]


def partial_eval_jaxpr(closed: ClosedJaxpr, in_unknowns: Sequence[bool], instantiate: Sequence[bool] | bool,
                       forwardable: Sequence[bool] | None = None) -> SplitProgram:
    """Split a const-free program into a known and an unknown part.

    Outputs are unknown when they depend on unknown inputs, or when
    ``instantiate`` asks for them to be (their known value is then a residual).
    Residuals that are simply known inputs are not output by the known program
    (callers pass the input itself), so loop-invariant operands of a ``scan`` are
    not stacked per iteration; ``forwardable`` (one flag per known input) says which
    inputs may be forwarded that way (a loop's carry may not: it changes every step).
    """
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(closed.out_avals)
    found: dict[str, Any] = {}

    def known_fun(*known_args: Any) -> list:
        trace = PartialEvalTrace(current_trace(), DebugInfo("partial evaluation", "partial_eval", [], False))
        unknown_args = [trace.new_arg(a) for a, u in zip(closed.in_avals, in_unknowns) if u]
        try:
            with set_current_trace(trace):
                outs = eval_closed_by_binding(closed, *merge_by(in_unknowns, unknown_args, known_args))
            out_unknowns = [trace.is_unknown(o) or inst for o, inst in zip(outs, instantiate)]
            unknown_outvars = [trace.to_atom(o) for o, u in zip(outs, out_unknowns) if u]
        finally:
            trace.alive = False
        positions = {id(x): i for i, x in enumerate(known_args) if forwardable is None or forwardable[i]}
        sources = [positions.get(id(r)) for r in trace.consts]
        found.update(out_unknowns=out_unknowns, sources=sources,
                     unknown=Jaxpr([], trace.constvars + trace.invars, trace.eqns, unknown_outvars))
        computed = [r for r, s in zip(trace.consts, sources) if s is None]
        return select_by([not u for u in out_unknowns], outs) + computed

    known_avals = [a for a, u in zip(closed.in_avals, in_unknowns) if not u]
    known, known_consts = trace_program(known_fun, known_avals, "partial evaluation")
    return SplitProgram(known, known_consts, ClosedJaxpr(found["unknown"], []), found["out_unknowns"],
                        found["sources"])


def linearize_flat(fun: Callable[..., Sequence[Any]], primals: Sequence[Any],
                   name: str) -> tuple[list, ClosedJaxpr, list[bool]]:
    """Evaluate ``fun`` and record its derivative as a linear program.

    Returns the primal outputs, the program ``tangents of the differentiable inputs
    -> nonzero output tangents`` (its consts are the residuals) and which output
    tangents are nonzero.
    """
    trace = PartialEvalTrace(current_trace(), DebugInfo("linearize", name, [], False))
    tangents = [trace.new_arg(aval(p)) if is_differentiable(aval(p).dtype) else Zero(aval(p)) for p in primals]
    try:
        with set_current_trace(trace):
            outs, out_tangents = jvp_flat(fun, primals, tangents)
        if any(map(trace.is_unknown, outs)):
            raise AssertionError("linearize: a primal output depends on a tangent (a missing partial "
                                 "evaluation rule)")
        nonzero = [not isinstance(t, Zero) for t in out_tangents]
        outvars = [trace.to_atom(t) for t in select_by(nonzero, out_tangents)]
    finally:
        trace.alive = False
    linear = ClosedJaxpr(Jaxpr(trace.constvars, trace.invars, trace.eqns, outvars), trace.consts)
    return list(outs), linear, nonzero
