"""Size-1 broadcasts made explicit: what the backends compile.

The binary elementwise operations broadcast size-1 dimensions between operands of one rank, as
JAX's do (``add a:f32[2,3] b:f32[1,3]``), so traced programs hold what JAX's hold. The backends'
kernels, their fusion and their lowerings take operands of the result's shape (or of rank 0);
``explicit_broadcasts`` gives them that, a ``broadcast_in_dim`` before each operand that
broadcasts, in sub-programs too. Every backend runs it before its own stages.
"""
from __future__ import annotations

from ember.compiler.rewrite import SubprogramRewriter, Substitution, on_closed, rebuild
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var
from ember.core.traits import ELEMENTWISE
from ember.lax.shapes import broadcast_in_dim_p


def explicit_broadcasts(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with every size-1 broadcast of an elementwise operand a ``broadcast_in_dim``
    (the same object if it has none)."""
    return on_closed(closed, _explicit)


def _explicit(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    subst = Substitution()
    eqns: list[Eqn] = []
    for eqn in jaxpr.eqns:
        eqn = subprograms(subst.apply(eqn))
        if eqn.primitive in ELEMENTWISE and len(eqn.outvars) == 1:
            shape = eqn.outvars[0].aval.shape
            if any(a.aval.shape not in ((), shape) for a in eqn.invars):
                invars = []
                for a in eqn.invars:
                    if a.aval.shape not in ((), shape):
                        out = Var(a.aval._replace(shape=shape))
                        params = {"shape": shape, "broadcast_dimensions": tuple(range(len(shape)))}
                        eqns.append(Eqn(broadcast_in_dim_p, [a], params, [out]))
                        a = out
                    invars.append(a)
                eqn = eqn.replace(invars=invars)
        eqns.append(eqn)
    return rebuild(jaxpr, eqns, subst.all(jaxpr.outvars))
