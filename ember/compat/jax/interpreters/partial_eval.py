"""``jax.interpreters.partial_eval``: tracing a function with some inputs known (values) and
the others unknown (abstract values), to learn which outputs are known and their types."""
from __future__ import annotations

from typing import Any, Sequence

from ember.compat.jax.extend.linear_util import WrappedFun
from ember.core.array import ensure_array
from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Literal
from ember.core.staging import DebugInfo, trace_to_jaxpr
from ember.lax.base import aval


class PartialVal(tuple):
    """A known value, or the abstract value of an unknown one (JAX's ``(aval, const)`` pair)."""

    @classmethod
    def known(cls, value: Any) -> "PartialVal":
        return cls((None, value))

    @classmethod
    def unknown(cls, abstract: ShapedArray) -> "PartialVal":
        return cls((abstract, None))

    def is_known(self) -> bool:
        return self[0] is None

    def get_known(self) -> Any:
        return self[1] if self.is_known() else None

    def get_aval(self) -> ShapedArray:
        return aval(self[1]) if self.is_known() else self[0]


def trace_to_jaxpr_nounits(fun: WrappedFun, pvals: Sequence[PartialVal],
                           instantiate: bool | Sequence[bool] = False) -> tuple[Any, list[PartialVal], list]:
    """(the program of the unknown part, each output's PartialVal, the program's consts). An
    output is known when it does not depend on an unknown input (a constant of the trace);
    ``instantiate``: outputs to report unknown even so."""
    unknown = [i for i, p in enumerate(pvals) if not p.is_known()]

    def traced(*unknown_values: Any) -> list:
        values = [p.get_known() for p in pvals]
        for i, v in zip(unknown, unknown_values):
            values[i] = v
        return [ensure_array(o) for o in fun.call_wrapped(*values)]
    closed: ClosedJaxpr = trace_to_jaxpr(traced, [pvals[i].get_aval() for i in unknown],
                                         DebugInfo("partial evaluation", fun.__name__, [f"x{i}" for i in unknown]))
    consts = {id(v): c for v, c in zip(closed.jaxpr.constvars, closed.consts)}
    flags = [instantiate] * len(closed.jaxpr.outvars) if isinstance(instantiate, bool) else list(instantiate)
    outs = []
    for out, force in zip(closed.jaxpr.outvars, flags):
        if not force and isinstance(out, Literal):
            outs.append(PartialVal.known(out.val))
        elif not force and id(out) in consts:
            outs.append(PartialVal.known(consts[id(out)]))
        else:
            outs.append(PartialVal.unknown(out.aval))
    return closed.jaxpr, outs, list(closed.consts)


__all__ = ["PartialVal", "trace_to_jaxpr_nounits"]
