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

import numpy as np

from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var, is_effectful, is_replayable
from ember.core.primitive import Primitive, RuleTable
from ember.core.staging import DebugInfo, StagingTrace
from ember.core.trace import Trace, Tracer, TraceTag, current_trace, set_current_trace
from ember.lax.base import aval
from ember.transforms.jvp import jvp_flat
from ember.transforms.programs import eval_closed_by_binding, merge_by, select_by, trace_program
from ember.transforms.tangents import Zero, is_differentiable

partial_eval_rules: RuleTable = RuleTable("partial_eval_rules")


class PartialEvalTrace(StagingTrace):
    """Forwards operations on known values to its parent; records the others."""

    linearizes = True  # (its unknowns are the tangents of grad, vjp and linearize: how tracers print)
    requires_low = False

    def __init__(self, parent: Trace, debug: DebugInfo) -> None:
        super().__init__(debug)
        self.parent = parent
        self.tag = TraceTag()

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


# --- partial evaluation with a policy (for checkpoint / remat) -------------------------------------
# JAX's ``partial_eval_jaxpr_custom``: a program split into a known part, which computes the known
# outputs and the *residuals*, and a staged part, which computes the rest from the residuals. Unlike
# ``partial_eval_jaxpr``, a known value that the staged part needs is a residual only when the
# ``policy`` lets its equation's result be saved (``policy(primitive, *in_avals, **params)``: a bool,
# or ``Saveable`` / ``Recompute`` / ``Offloadable(...)``); otherwise the staged part computes it again
# (rematerializes it) from what is saved. Inputs that the staged part gets as inputs (``in_inst``)
# need no saving.

class RecomputeType:
    """A policy's answer: recompute the value in the backward pass (``False``)."""

    def __repr__(self) -> str:
        return "Recompute"


class SaveableType:
    """A policy's answer: the value may be saved for the backward pass (``True``)."""

    def __repr__(self) -> str:
        return "Saveable"


Recompute, Saveable = RecomputeType(), SaveableType()


class Offloadable(NamedTuple):
    """A policy's answer: save the value in memory ``dst`` (JAX moves it there and back; ember has
    one memory per device, so it is saved as it is)."""

    src: str
    dst: str


def remat_case(answer: Any) -> Any:
    """A policy's answer as ``Saveable``, ``Recompute`` or an ``Offloadable``."""
    if isinstance(answer, (bool, np.bool_)):
        return Saveable if answer else Recompute
    if not isinstance(answer, (RecomputeType, SaveableType, Offloadable)):
        msg = ("Value returned by a remat policy should be a bool or `ad_checkpoint.Recompute`, "
               f"`ad_checkpoint.Saveable` or `ad_checkpoint.Offloadable(...)`. Got {answer} of type {type(answer)}.")
        if answer is Offloadable:
            msg += "Did you return `Offloadable` instead of an instantiated `Offloadable(...)`?"
        raise TypeError(msg)
    return answer


# Rules for equations holding sub-programs (calls):
# rule(policy, unknowns_in, inst_in, eqn) -> (known eqn | None, staged eqn | None, unknowns_out, inst_out,
#                                             new residual vars)
partial_eval_jaxpr_custom_rules: RuleTable = RuleTable("partial_eval_jaxpr_custom_rules")


class CustomSplit(NamedTuple):
    known: Jaxpr        # (known inputs) -> (known outputs, residuals)
    staged: Jaxpr       # (residuals, instantiated inputs) -> instantiated outputs
    out_unknowns: list[bool]
    out_inst: list[bool]
    num_res: int


def partial_eval_jaxpr_custom(jaxpr: Jaxpr, in_unknowns: Sequence[bool], in_inst: Sequence[bool],
                              policy: Callable[..., Any]) -> CustomSplit:
    """Split a const-free ``jaxpr`` by ``policy`` (see above). ``in_inst``: which inputs the staged
    part takes as inputs. An output is *instantiated* when the staged part computes it (unknown
    outputs always are; known ones when they are recomputed)."""
    if jaxpr.constvars:
        raise ValueError("partial_eval_jaxpr_custom takes a program without constvars")
    env: dict[int, tuple[bool, bool]] = {}
    residuals: dict[int, Var] = {}  # (ordered)

    def read(a: Any) -> tuple[bool, bool]:
        return env[id(a)] if isinstance(a, Var) else (False, True)

    def write(unknown: bool, inst: bool, v: Var) -> None:
        env[id(v)] = (unknown, inst)

    def ensure_instantiated(inst: bool, a: Any) -> Any:
        if isinstance(a, Var) and not inst:
            residuals.setdefault(id(a), a)
        return a

    for v, unknown, inst in zip(jaxpr.invars, in_unknowns, in_inst):
        write(unknown, inst, v)
    known_eqns: list[Eqn] = []
    staged_eqns: list[Eqn] = []
    subst: dict[int, Any] = {}  # outputs of equations split in two (below): the atoms that stand for them

    def sub(a: Any) -> Any:
        return subst.get(id(a), a) if isinstance(a, Var) else a

    work = list(reversed(jaxpr.eqns))
    pieces_of_splits: set[int] = set()  # (never split again)
    while work:
        eqn = work.pop()
        was_split = id(eqn) in pieces_of_splits
        if subst:
            eqn = eqn.replace(invars=[sub(a) for a in eqn.invars])
        unks_in, inst_in = zip(*map(read, eqn.invars)) if eqn.invars else ((), ())
        rule = partial_eval_jaxpr_custom_rules.get(eqn.primitive)
        if (rule is None and not was_split and any(unks_in) and not all(unks_in)
                and eqn.primitive in partial_eval_rules):
            # Partly known control flow: split it by its own rule into known and unknown
            # equations, which the policy then treats one by one.
            pieces = _split_equation(eqn, list(unks_in))
            if pieces is not None:
                new_eqns, outs = pieces
                subst.update((id(v), o) for v, o in zip(eqn.outvars, outs))
                pieces_of_splits.update(map(id, new_eqns))
                work.extend(reversed(new_eqns))
                continue
        if rule is not None:
            known_eqn, staged_eqn, unks_out, inst_out, res = rule(policy, list(unks_in), list(inst_in), eqn)
            if known_eqn is not None:
                known_eqns.append(known_eqn)
            if staged_eqn is not None:
                staged_eqns.append(staged_eqn)
            for r in res:
                residuals.setdefault(id(r), r)
            for v, u, i in zip(eqn.outvars, unks_out, inst_out):
                write(u, i, v)
        elif any(unks_in):
            for a, inst in zip(eqn.invars, inst_in):
                ensure_instantiated(inst, a)
            staged_eqns.append(eqn)
            for v in eqn.outvars:
                write(True, True, v)
        else:
            known_eqns.append(eqn)
            case = remat_case(policy(eqn.primitive, *(a.aval for a in eqn.invars), **eqn.params))
            # (Offloadable: saved as is. A loop or cond whose effects are debug callbacks is
            # recomputed with them whatever the policy, as JAX recomputes it; other effects run once.)
            effectful = is_effectful(eqn)
            replayed = effectful and is_replayable(eqn)
            if not replayed and (effectful or not isinstance(case, RecomputeType)):
                for v in eqn.outvars:
                    write(False, False, v)
            else:
                for a, inst in zip(eqn.invars, inst_in):
                    ensure_instantiated(inst, a)
                staged_eqns.append(eqn)
                for v in eqn.outvars:
                    write(False, True, v)
    outvars = [sub(a) for a in jaxpr.outvars]
    outs = [read(a) for a in outvars]
    out_unknowns, out_inst = [u for u, _ in outs], [i for _, i in outs]
    res = list(residuals.values())
    known = Jaxpr([], [v for v, u in zip(jaxpr.invars, in_unknowns) if not u], known_eqns,
                  [a for a, u in zip(outvars, out_unknowns) if not u] + res)
    staged = Jaxpr([], res + [v for v, i in zip(jaxpr.invars, in_inst) if i], staged_eqns,
                   [a for a, i in zip(outvars, out_inst) if i])
    return CustomSplit(known, staged, out_unknowns, out_inst, len(res))


def _split_equation(eqn: Eqn, unknowns: list[bool]) -> tuple[list[Eqn], list] | None:
    """A partly known equation as the equations of its known part, then of its unknown part
    (``partial_eval_jaxpr`` of it alone), and the atoms standing for its outputs; None if its
    known part closes over constants."""
    in_vars = [Var(a.aval) for a in eqn.invars]
    out_vars = [Var(v.aval) for v in eqn.outvars]
    closed = ClosedJaxpr(Jaxpr([], in_vars, [Eqn(eqn.primitive, in_vars, eqn.params, out_vars)], out_vars), [])
    split = partial_eval_jaxpr(closed, unknowns, instantiate=False)
    if split.known_consts or split.known.consts or split.unknown.consts:
        return None
    known_ins = select_by([not u for u in unknowns], eqn.invars)
    known_eqns, known_results = _copied(split.known.jaxpr, known_ins)
    num_outs = len(known_results) - split.num_computed_residuals
    residuals = split.residuals(known_ins, known_results[num_outs:])
    unknown_eqns, unknown_outs = _copied(split.unknown.jaxpr, residuals + select_by(unknowns, eqn.invars))
    return known_eqns + unknown_eqns, merge_by(split.out_unknowns, unknown_outs, known_results[:num_outs])


def _copied(jaxpr: Jaxpr, operands: Sequence[Any]) -> tuple[list[Eqn], list]:
    """``jaxpr``'s equations with fresh variables, reading ``operands``, and its outputs."""
    env: dict[int, Any] = {id(v): a for v, a in zip(jaxpr.invars, operands)}

    def read(a: Any) -> Any:
        return env.get(id(a), a) if isinstance(a, Var) else a

    eqns = []
    for eqn in jaxpr.eqns:
        fresh = [Var(v.aval) for v in eqn.outvars]
        eqns.append(Eqn(eqn.primitive, [read(a) for a in eqn.invars], eqn.params, fresh))
        env.update((id(v), f) for v, f in zip(eqn.outvars, fresh))
    return eqns, [read(a) for a in jaxpr.outvars]


# DCE rules for equations holding sub-programs: rule(used_outputs, eqn) -> (used inputs, eqn | None)
dce_rules: RuleTable = RuleTable("dce_rules")


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: Sequence[bool]) -> tuple[Jaxpr, list[bool]]:
    """The program computing only the used outputs (keeping every effect), and which of its
    inputs it still reads; unused inputs are dropped. Calls are pruned inside (``dce_rules``)."""
    outvars = [a for a, used in zip(jaxpr.outvars, used_outputs) if used]
    live = {id(a) for a in outvars if isinstance(a, Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        used = [id(v) in live for v in eqn.outvars]
        if not any(used) and not is_effectful(eqn):
            continue
        rule = dce_rules.get(eqn.primitive)
        if rule is not None and not is_effectful(eqn):
            _, eqn = rule(used, eqn)  # (the pruned equation reads only the inputs it uses)
            if eqn is None:
                continue
        kept.append(eqn)
        live.update(id(a) for a in eqn.invars if isinstance(a, Var))
    used_inputs = [id(v) in live for v in jaxpr.invars]
    return Jaxpr([], [v for v, u in zip(jaxpr.invars, used_inputs) if u], kept[::-1], outvars), used_inputs
