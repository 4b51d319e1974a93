"""Nested ``jit`` calls stay calls: the jvp of a call is a call of the jvp program, a
partially known call splits into a known and an unknown call, and the transpose
of a call is a call of the transposed program."""
from __future__ import annotations

from typing import Any

from ember.core.calls import jit_p
from ember.core.ir import ClosedJaxpr
from ember.core.trace import set_current_trace
from ember.transforms.jvp import jvp_jaxpr, jvp_rules
from ember.transforms.partial_eval import PartialEvalTrace, partial_eval_jaxpr, partial_eval_rules
from ember.transforms.programs import merge_by, select_by
from ember.transforms.tangents import Zero, instantiate, match_type
from ember.transforms.transpose import is_undefined, transpose_jaxpr, transpose_rules


def _jit_jvp(primals: tuple, tangents: tuple, *, jaxpr: ClosedJaxpr, name: str) -> tuple:
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    program, consts, out_nonzeros = jvp_jaxpr(jaxpr, nonzeros, [False] * len(jaxpr.out_avals))
    outs = jit_p.bind(*consts, *primals, *select_by(nonzeros, tangents), jaxpr=program, name=name)
    primal_outs, tangent_outs = outs[:len(jaxpr.out_avals)], outs[len(jaxpr.out_avals):]
    zero_outs = [Zero(a) for a, nz in zip(jaxpr.out_avals, out_nonzeros) if not nz]
    return primal_outs, merge_by(out_nonzeros, tangent_outs, zero_outs)


def _jit_partial_eval(trace: PartialEvalTrace, args: tuple, params: dict) -> list:
    jaxpr, name = params["jaxpr"], params["name"]
    unknowns = [trace.is_unknown(a) for a in args]
    split = partial_eval_jaxpr(jaxpr, unknowns, instantiate=False)
    known_args = select_by([not u for u in unknowns], args)
    with set_current_trace(trace.parent):
        results = jit_p.bind(*split.known_consts, *known_args, jaxpr=split.known, name=name)
    num_known_outs = len(results) - split.num_computed_residuals
    known_outs, computed = results[:num_known_outs], results[num_known_outs:]
    residuals = split.residuals(known_args, computed)
    unknown_outs = trace.stage(jit_p, [*residuals, *select_by(unknowns, args)], dict(jaxpr=split.unknown, name=name))
    return merge_by(split.out_unknowns, unknown_outs, known_outs)


def _jit_transpose(cts: list, *args: Any, jaxpr: ClosedJaxpr, name: str) -> list:
    linear = [is_undefined(a) for a in args]
    program, consts = transpose_jaxpr(jaxpr, linear)
    cts = [match_type(instantiate(ct), a) for ct, a in zip(cts, jaxpr.out_avals)]
    nonlinear = select_by([not lin for lin in linear], args)
    outs = jit_p.bind(*consts, *nonlinear, *cts, jaxpr=program, name=f"transpose({name})")
    return merge_by(linear, outs, [None] * (len(args) - len(outs)))


jvp_rules[jit_p] = _jit_jvp
partial_eval_rules[jit_p] = _jit_partial_eval
transpose_rules[jit_p] = _jit_transpose
