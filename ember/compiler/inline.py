"""Inlining: replace call equations by the equations of their bodies.

A nested ``jit`` leaves a call equation whose ``jaxpr`` param holds the
callee (its consts already turned into leading inputs); ``custom_jvp`` /
``custom_vjp`` functions leave calls too. ``ember.core.primitive.call_params``
names every call-like primitive and the param holding its callee. Inlining it lets every
later pass see across the call boundary. Calls inside calls and inside
control-flow bodies are inlined too; each inlined copy gets fresh variables,
so a body called twice stays in SSA form.
"""
from __future__ import annotations

from ember.compiler.rewrite import SubprogramRewriter, Substitution, on_closed, rebuild
from ember.core.avals import ShapedArray
from ember.core.ir import Atom, ClosedJaxpr, Eqn, Jaxpr, Var
from ember.core.primitive import call_params
from ember.lax.elementwise import convert_element_type_p


def inline_calls(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with every call equation replaced by its body, recursively."""
    return on_closed(closed, _inline_jaxpr)


def _inline_jaxpr(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    subst = Substitution()
    eqns: list[Eqn] = []
    for eqn in jaxpr.eqns:
        eqn = subprograms(subst.apply(eqn))  # the callee is inlined before it is copied
        param = call_params.get(eqn.primitive)
        callee = eqn.params.get(param) if param else None
        if callee is None or callee.consts:  # calls carry their consts as operands (consts_as_inputs)
            eqns.append(eqn)
            continue
        for var, atom in zip(eqn.outvars, splice(callee.jaxpr, eqn.invars, eqns)):
            subst.bind(var, atom)
    return rebuild(jaxpr, eqns, subst.all(jaxpr.outvars))


def splice(body: Jaxpr, operands: list[Atom], eqns: list[Eqn]) -> list[Atom]:
    """Append a fresh copy of ``body``'s equations reading ``operands``; return its outputs."""
    subst = Substitution()
    for var, operand in zip(body.invars, operands):
        # The call rule accepts operands that differ from the body's inputs in weak type only;
        # the copied equations were typed for the body's inputs, so convert to exactly those.
        subst.bind(var, operand if operand.aval == var.aval else _retyped(operand, var.aval, eqns))
    for eqn in body.eqns:
        fresh = [Var(v.aval) for v in eqn.outvars]
        eqns.append(Eqn(eqn.primitive, subst.all(eqn.invars), eqn.params, fresh))
        for old, new in zip(eqn.outvars, fresh):
            subst.bind(old, new)
    return subst.all(body.outvars)


def _retyped(operand: Atom, aval: ShapedArray, eqns: list[Eqn]) -> Var:
    out = Var(aval)
    params = {"new_dtype": aval.dtype, "weak_type": aval.weak_type}
    eqns.append(Eqn(convert_element_type_p, [operand], params, [out]))
    return out
