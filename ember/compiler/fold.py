"""Constant folding: evaluate, at compile time, equations whose inputs are all known.

Known values are literals, consts, and the results of equations folded
before. An equation is folded with the reference interpreter (the semantics
every backend must match), and its results become literals (scalars) or new
consts (arrays of at most ``MAX_FOLDED_ELEMENTS`` elements, so that a
broadcast or iota of a constant does not turn into a large array baked into
the program). Never folded: effectful primitives, and higher-order ones (a
``while`` loop over constants could run for as long as the program would);
their sub-programs are folded inside. Sub-programs cannot gain consts, so
inside them only scalar results are folded.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.rewrite import SubprogramRewriter, Substitution, rebuild
from ember.core.evaluation import impl_rules, to_numpy
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, is_effectful
from ember.core.primitive import higher_order
from ember.core.trace import Tracer

MAX_FOLDED_ELEMENTS = 1024


def fold_constants(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with its constant subcomputations evaluated (see the module docstring)."""
    jaxpr = closed.jaxpr
    # Consts that are tracers of an enclosing trace have no value yet.
    known = {id(v): to_numpy(c, v.aval) for v, c in zip(jaxpr.constvars, closed.consts)
             if not isinstance(c, Tracer)}
    new_consts: dict[Var, np.ndarray] = {}
    folded = _fold_jaxpr(jaxpr, SubprogramRewriter(_fold_subprogram), known, new_consts)
    if not new_consts:
        return closed if folded is jaxpr else ClosedJaxpr(folded, closed.consts)
    constvars = jaxpr.constvars + list(new_consts)
    return ClosedJaxpr(Jaxpr(constvars, jaxpr.invars, folded.eqns, folded.outvars),
                       closed.consts + list(new_consts.values()))


def _fold_subprogram(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    return _fold_jaxpr(jaxpr, subprograms, {}, None)


def _fold_jaxpr(jaxpr: Jaxpr, subprograms: SubprogramRewriter, known: dict[int, np.ndarray],
                new_consts: dict[Var, np.ndarray] | None) -> Jaxpr:
    """Fold ``jaxpr``'s equations; array results become new constvars, recorded in
    ``new_consts`` (or stay unfolded if that is None)."""
    subst = Substitution()
    eqns = []
    for eqn in jaxpr.eqns:
        eqn = subprograms(subst.apply(eqn))
        values = _evaluate(eqn, known, arrays_allowed=new_consts is not None)
        if values is None:
            eqns.append(eqn)
            continue
        for var, value in zip(eqn.outvars, values):
            known[id(var)] = value
            if var.aval.shape:
                assert new_consts is not None  # (arrays are folded only where they can become constants)
                new_consts[var] = value  # the equation's result variable becomes a constvar
            else:
                subst.bind(var, Literal(value[()], var.aval))
    return rebuild(jaxpr, eqns, subst.all(jaxpr.outvars))


def _evaluate(eqn: Eqn, known: dict[int, np.ndarray], arrays_allowed: bool) -> list[np.ndarray] | None:
    """The equation's results if it can and may be folded, else None."""
    impl = impl_rules.get(eqn.primitive)
    if impl is None or eqn.primitive in higher_order or is_effectful(eqn):
        return None
    if any(v.aval.shape and (not arrays_allowed or v.aval.size > MAX_FOLDED_ELEMENTS) for v in eqn.outvars):
        return None
    inputs = []
    for atom in eqn.invars:
        if isinstance(atom, Literal):
            inputs.append(np.asarray(atom.val, dtype=atom.aval.dtype))
        elif id(atom) in known:
            inputs.append(known[id(atom)])
        else:
            return None
    try:
        with np.errstate(all="ignore"):
            outs = impl(*inputs, **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        return [_typed(out, var.aval) for out, var in zip(outs, eqn.outvars)]
    except Exception:  # noqa: BLE001
        # An operation that fails on these values is left for run time to report, as it
        # would be without folding (the equation may sit in a branch that never runs).
        return None


def _typed(value: Any, aval) -> np.ndarray:
    """An owned, read-only array of exactly the result type (as the interpreter stores it)."""
    out = np.array(np.broadcast_to(np.asarray(value).astype(aval.dtype, copy=False), aval.shape))
    out.flags.writeable = False
    return out
