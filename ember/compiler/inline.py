"""Inlining: replace call equations by the equations of their bodies.

A nested ``jit`` leaves a call equation whose ``jaxpr`` param holds the
callee (its consts already turned into leading inputs); ``custom_jvp`` /
``custom_vjp`` functions leave calls too. ``ember.core.primitive.call_params``
names every call-like primitive and the param holding its callee. Inlining it lets every
later pass see across the call boundary. Calls inside calls and inside
control-flow bodies are inlined too; each inlined copy gets fresh variables,
so a body called twice stays in SSA form.

``checkpoint`` calls (``remat2``) are inlined too. One that differentiation made
(``differentiated=True``: the backward pass, which recomputes values the forward
pass also computed) with ``prevent_cse`` first passes its operands through an
``optimization_barrier`` equation, which no pass looks through, so CSE cannot merge
the recomputation back into the forward pass (JAX puts XLA's optimization barrier
there too). ``checkpoint_name``'s ``name`` equations are dropped: the name is for
differentiation, and the value is its operand.
"""
from __future__ import annotations

from ember.compiler.rewrite import SubprogramRewriter, Substitution, on_closed, rebuild
from ember.core.avals import ShapedArray
from ember.core.calls import checkpoint_p, name_p, optimization_barrier_p
from ember.core.ir import Atom, ClosedJaxpr, Eqn, Jaxpr, Var
from ember.core.primitive import call_params
from ember.lax.elementwise import convert_element_type_p


def inline_calls(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with every call equation replaced by its body, recursively."""
    return on_closed(closed, _inline_jaxpr)


def remove_barriers(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` without its ``optimization_barrier`` equations (each output is its operand).

    The barriers' job is done once CSE has run: no later pass merges equations, and code
    generation then sees the recomputation as ordinary native work (a barrier left in would
    run as a host step between kernels)."""
    return on_closed(closed, _remove_barriers)


def _remove_barriers(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    subst = Substitution()
    eqns: list[Eqn] = []
    for eqn in jaxpr.eqns:
        eqn = subprograms(subst.apply(eqn))
        if eqn.primitive is optimization_barrier_p:
            for var, atom in zip(eqn.outvars, eqn.invars):
                subst.bind(var, atom)
            continue
        eqns.append(eqn)
    return rebuild(jaxpr, eqns, subst.all(jaxpr.outvars))


def _inline_jaxpr(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    subst = Substitution()
    eqns: list[Eqn] = []
    for eqn in jaxpr.eqns:
        eqn = subprograms(subst.apply(eqn))  # the callee is inlined before it is copied
        if eqn.primitive is name_p:
            subst.bind(eqn.outvars[0], eqn.invars[0])
            continue
        param = call_params.get(eqn.primitive)
        callee = eqn.params.get(param) if param else None
        if callee is None or callee.consts:  # calls carry their consts as operands (consts_as_inputs)
            eqns.append(eqn)
            continue
        operands = _barrier(eqn, eqns) if eqn.primitive is checkpoint_p else eqn.invars
        for var, atom in zip(eqn.outvars, splice(callee.jaxpr, operands, eqns)):
            subst.bind(var, atom)
    return rebuild(jaxpr, eqns, subst.all(jaxpr.outvars))


def _barrier(eqn: Eqn, eqns: list[Eqn]) -> list[Atom]:
    """The operands of a ``checkpoint`` call, those that ``prevent_cse`` names passed through an
    ``optimization_barrier`` when differentiation made the call (see the module docstring)."""
    prevent = eqn.params.get("prevent_cse", True)
    flags = [bool(prevent)] * len(eqn.invars) if isinstance(prevent, bool) else [bool(p) for p in prevent]
    if not eqn.params.get("differentiated", False) or len(flags) != len(eqn.invars):
        return list(eqn.invars)
    barred = list({id(a): a for a, f in zip(eqn.invars, flags) if f and isinstance(a, Var)}.values())
    if not barred:
        return list(eqn.invars)
    fresh = [Var(a.aval) for a in barred]
    eqns.append(Eqn(optimization_barrier_p, barred, {}, fresh))
    replaced = dict(zip(map(id, barred), fresh))
    return [replaced.get(id(a), a) if isinstance(a, Var) else a for a in eqn.invars]


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
