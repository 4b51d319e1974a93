"""Common-subexpression elimination: compute each distinct equation once.

Two equations are the same when they apply the same primitive to the same
inputs with equal params. Variables compare by identity; literals by dtype,
weak type and bit pattern (so ``-0.0`` and ``0.0`` differ, and a NaN equals
itself); params by value where hashable, and by identity otherwise (a
sub-program is the same only if it is the same object). Effectful
primitives are never merged. Sub-programs are processed on their own: an
equation inside a body is never replaced by one outside it.
"""
from __future__ import annotations

from typing import Any, Hashable

import numpy as np

from ember.compiler.rewrite import SubprogramRewriter, Substitution, on_closed, rebuild
from ember.core.ir import Atom, ClosedJaxpr, Jaxpr, Literal, Var, is_effectful


def eliminate_common_subexpressions(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with every repeated equation replaced by the first one's results."""
    return on_closed(closed, _cse_jaxpr)


def _cse_jaxpr(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    subst = Substitution()
    first: dict[Hashable, list[Var]] = {}
    eqns = []
    for eqn in jaxpr.eqns:
        eqn = subprograms(subst.apply(eqn))
        if is_effectful(eqn):
            eqns.append(eqn)
            continue
        key = (eqn.primitive, tuple(map(_atom_key, eqn.invars)), _params_key(eqn.params))
        earlier = first.setdefault(key, eqn.outvars)
        if earlier is eqn.outvars:
            eqns.append(eqn)
        else:
            for var, same in zip(eqn.outvars, earlier):
                subst.bind(var, same)
    return rebuild(jaxpr, eqns, subst.all(jaxpr.outvars))


def _atom_key(atom: Atom) -> Hashable:
    if isinstance(atom, Literal):
        a = atom.aval
        return ("literal", a.dtype, a.weak_type, np.asarray(atom.val, dtype=a.dtype).tobytes())
    return ("var", id(atom))


def _params_key(params: dict) -> Hashable:
    return tuple((name, _param_key(value)) for name, value in sorted(params.items()))


def _param_key(value: Any) -> Hashable:
    # The type is part of the key so that, e.g., 1, 1.0 and True stay distinct.
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(map(_param_key, value)))
    try:
        hash(value)
    except TypeError:  # e.g. a NumPy array: the same only if it is the same object
        return ("object", id(value))
    return (type(value), value)
