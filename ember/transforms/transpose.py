"""Transposition of linear programs: reverse mode is linearize, then transpose.

``backward_pass`` walks a program whose inputs are partly *undefined* (the
linear ones, standing for tangents) from its outputs' cotangents back to those
inputs. Equations that do not touch a linear value (residual computations) are
evaluated forward first. Each linear equation is transposed by
``transpose_rules[p](ct, *operands, **params)``: linear operands arrive as
``UndefinedPrimal(aval)``, the others as values; the rule returns one
cotangent per operand (None for the non-linear ones, or a symbolic ``Zero``).
"""
from __future__ import annotations

from typing import Any, Sequence

from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal, Var
from ember.core.primitive import RuleTable
from ember.transforms.programs import literal_value, merge_by, trace_program
from ember.transforms.tangents import Zero, add_tangents, instantiate, match_type

transpose_rules: RuleTable = RuleTable("transpose_rules")


class UndefinedPrimal:
    """A linear operand of an equation being transposed: only its type is known."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return f"UndefinedPrimal({self.aval})"


def is_undefined(x: Any) -> bool:
    return isinstance(x, UndefinedPrimal)


def backward_pass(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any], cts_out: Sequence[Any]) -> list:
    """Cotangents of the inputs given as ``UndefinedPrimal`` (Zero where none flows), None for the others."""
    env: dict[int, Any] = {}
    linear: set[int] = set()

    def read(a: Any) -> Any:
        if isinstance(a, Literal):
            return literal_value(a)
        return UndefinedPrimal(a.aval) if id(a) in linear else env[id(a)]

    for v, x in zip(jaxpr.constvars, consts):
        env[id(v)] = x
    for v, x in zip(jaxpr.invars, args):
        if is_undefined(x):
            linear.add(id(v))
        else:
            env[id(v)] = x
    linear_eqns = []
    for eqn in jaxpr.eqns:
        if any(isinstance(a, Var) and id(a) in linear for a in eqn.invars):
            linear_eqns.append(eqn)
            linear.update(id(v) for v in eqn.outvars)
        else:
            outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
            for v, o in zip(eqn.outvars, outs if eqn.primitive.multiple_results else (outs,)):
                env[id(v)] = o

    cts: dict[int, Any] = {}

    def add_ct(v: Any, ct: Any) -> None:
        if isinstance(v, Var) and id(v) in linear and ct is not None and not isinstance(ct, Zero):
            ct = match_type(ct, v.aval)
            cts[id(v)] = add_tangents(cts[id(v)], ct) if id(v) in cts else ct

    for v, ct in zip(jaxpr.outvars, cts_out):
        add_ct(v, ct)
    for eqn in reversed(linear_eqns):
        eqn_cts = [cts.pop(id(v), Zero(v.aval)) for v in eqn.outvars]
        if all(isinstance(ct, Zero) for ct in eqn_cts):
            continue
        rule = transpose_rules.get(eqn.primitive)
        if rule is None:
            raise NotImplementedError(
                f"Transpose rule (for reverse-mode differentiation) for '{eqn.primitive.name}' not "
                f"implemented: it was applied to a value being differentiated. Use forward mode "
                "(ember.jvp, ember.jacfwd) or give the computation a custom_vjp.")
        cts_in = rule(eqn_cts if eqn.primitive.multiple_results else eqn_cts[0], *map(read, eqn.invars),
                      **eqn.params)
        for a, ct in zip(eqn.invars, cts_in):
            add_ct(a, ct)
    return [cts.get(id(v), Zero(v.aval)) if is_undefined(x) else None for v, x in zip(jaxpr.invars, args)]


def transpose_jaxpr(closed: ClosedJaxpr, linear: Sequence[bool]) -> tuple[ClosedJaxpr, list]:
    """The program ``(non-linear inputs, output cotangents) -> cotangents of the linear inputs``
    (const-free, with its consts), for primitives that hold sub-programs."""
    program, consts, _ = transpose_jaxpr_nonzero(closed, linear, True)
    return program, consts


def transpose_jaxpr_nonzero(closed: ClosedJaxpr, linear: Sequence[bool], instantiate_outputs: Sequence[bool] | bool
                            ) -> tuple[ClosedJaxpr, list, list[bool]]:
    """``transpose_jaxpr`` whose program outputs only the cotangents that are not symbolic zeros,
    or that ``instantiate_outputs`` (one flag per linear input) asks for; and which those are."""
    in_avals = closed.in_avals
    nonlinear_avals = [a for a, is_linear in zip(in_avals, linear) if not is_linear]
    undefined = [UndefinedPrimal(a) for a, is_linear in zip(in_avals, linear) if is_linear]
    if isinstance(instantiate_outputs, bool):
        instantiate_outputs = [instantiate_outputs] * len(undefined)
    nonzero: list[list[bool]] = []

    def fun(*args: Any) -> list:
        nonlinear, cts_out = args[:len(nonlinear_avals)], args[len(nonlinear_avals):]
        cts_in = backward_pass(closed.jaxpr, closed.consts, merge_by(linear, undefined, nonlinear), cts_out)
        cts_in = [ct for ct, is_linear in zip(cts_in, linear) if is_linear]
        kept = [inst or not isinstance(ct, Zero) for ct, inst in zip(cts_in, instantiate_outputs)]
        nonzero.append(kept)
        return [match_type(instantiate(ct), u.aval) for ct, u, k in zip(cts_in, undefined, kept) if k]

    program, consts = trace_program(fun, nonlinear_avals + list(closed.out_avals), "transpose")
    return program, consts, nonzero[0]
