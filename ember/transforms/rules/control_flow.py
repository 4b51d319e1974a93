"""Derivatives through ``cond``, ``scan`` and ``while``.

The jvp of each is the same construct over jvp'd sub-programs carrying
(primal, tangent) pairs. Under ``linearize`` a construct splits into a known
one, run at once, and an unknown (linear) one that takes the known one's
residuals: per branch for ``cond``, stacked per iteration for ``scan``.
The transpose of a linear ``cond`` is a ``cond`` of transposed branches; that of a
linear ``scan`` is a ``scan`` running backwards that accumulates the cotangents of
its loop-invariant operands in the carry. A ``while`` loop has no transpose: its
trip count is unknown, so there is nowhere to keep the residuals of each step.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.core.ir import ClosedJaxpr, Jaxpr, Var
from ember.core.trace import set_current_trace
from ember.lax import control_flow as cf
from ember.lax.base import aval
from ember.transforms.jvp import jvp_jaxpr, jvp_rules
from ember.transforms.partial_eval import PartialEvalTrace, SplitProgram, partial_eval_jaxpr, partial_eval_rules
from ember.transforms.programs import (
    eval_closed_by_binding,
    merge_by,
    prune,
    select_by,
    split_list,
    trace_program,
    trace_programs,
    with_io,
)
from ember.transforms.tangents import Zero, add_tangents, instantiate, match_type, zeros
from ember.transforms.transpose import (
    UndefinedPrimal,
    backward_pass,
    is_undefined,
    transpose_jaxpr_nonzero,
    transpose_rules,
)


def _zeros_for(mask: Sequence[bool], avals: Sequence[Any]) -> list[Zero]:
    """Symbolic zeros for the positions where ``mask`` is False."""
    return [Zero(a) for a, m in zip(avals, mask) if not m]


def _either(a: Sequence[bool], b: Sequence[bool]) -> list[bool]:
    return [x or y for x, y in zip(a, b)]


def _not(mask: Sequence[bool]) -> list[bool]:
    return [not m for m in mask]


# --- cond -----------------------------------------------------------------------------------------
def _cond_jvp(primals: tuple, tangents: tuple, *, branches: tuple) -> tuple:
    index, *operands = primals
    nonzeros = [not isinstance(t, Zero) for t in tangents[1:]]
    no_outputs = [False] * len(branches[0].out_avals)
    out_nonzeros = no_outputs
    for branch in branches:  # a tangent output is nonzero if it is in any branch
        out_nonzeros = _either(out_nonzeros, jvp_jaxpr(branch, nonzeros, no_outputs)[2])
    jvps = [jvp_jaxpr(branch, nonzeros, out_nonzeros) for branch in branches]
    funs = [_program_runner(program, consts) for program, consts, _ in jvps]
    in_avals = list(branches[0].in_avals) + select_by(nonzeros, branches[0].in_avals)
    programs, consts = trace_programs(funs, in_avals, "jvp of cond")
    outs = cf.cond_p.bind(index, *consts, *operands, *select_by(nonzeros, tangents[1:]), branches=tuple(programs))
    n = len(no_outputs)
    return outs[:n], merge_by(out_nonzeros, outs[n:], _zeros_for(out_nonzeros, branches[0].out_avals))


def _program_runner(program: ClosedJaxpr, consts: list):
    """A function running ``program`` with its consts closed over (retraced, they become consts again)."""
    return lambda *args: eval_closed_by_binding(program, *consts, *args)


def _cond_partial_eval(trace: PartialEvalTrace, args: tuple, params: dict) -> list:
    index, *operands = args
    branches = params["branches"]
    if trace.is_unknown(index):
        return trace.stage(cf.cond_p, args, params)
    unknowns = [trace.is_unknown(x) for x in operands]
    out_unknowns = [False] * len(branches[0].out_avals)
    for branch in branches:
        out_unknowns = _either(out_unknowns, partial_eval_jaxpr(branch, unknowns, False).out_unknowns)
    splits = [partial_eval_jaxpr(branch, unknowns, out_unknowns) for branch in branches]
    known_operands = select_by(_not(unknowns), operands)
    known_avals = select_by(_not(unknowns), branches[0].in_avals)
    num_known_outs = out_unknowns.count(False)
    computed_avals = [s.known.out_avals[num_known_outs:] for s in splits]

    def known_branch(i: int):
        def run(*known_args: Any) -> list:
            outs = eval_closed_by_binding(splits[i].known, *splits[i].known_consts, *known_args)
            residuals = [outs[num_known_outs:] if j == i else [zeros(a) for a in avals]
                         for j, avals in enumerate(computed_avals)]
            return outs[:num_known_outs] + [r for rs in residuals for r in rs]
        return run

    programs, consts = trace_programs([known_branch(i) for i in range(len(branches))], known_avals,
                                      "partial evaluation of cond")
    with set_current_trace(trace.parent):
        results = cf.cond_p.bind(index, *consts, *known_operands, branches=tuple(programs))
    known_outs, computed = results[:num_known_outs], results[num_known_outs:]
    residuals = []
    for split, sizes in zip(splits, computed_avals):
        residuals.append(split.residuals(known_operands, computed[:len(sizes)]))
        computed = computed[len(sizes):]

    # Each unknown branch takes every branch's residuals and reads its own.
    residual_avals = [s.unknown.in_avals[:len(r)] for s, r in zip(splits, residuals)]
    starts = np.cumsum([0] + [len(r) for r in residuals])

    def unknown_branch(i: int):
        def run(*args: Any) -> list:
            return eval_closed_by_binding(splits[i].unknown, *args[starts[i]:starts[i + 1]], *args[starts[-1]:])
        return run

    flat_residuals = [r for rs in residuals for r in rs]
    unknown_operands = select_by(unknowns, operands)
    programs, consts = trace_programs([unknown_branch(i) for i in range(len(branches))],
                                      [a for avals in residual_avals for a in avals]
                                      + select_by(unknowns, branches[0].in_avals), "partial evaluation of cond")
    unknown_outs = trace.stage(cf.cond_p, [index, *consts, *flat_residuals, *unknown_operands],
                               dict(branches=tuple(programs)))
    return merge_by(out_unknowns, unknown_outs, known_outs)


def _cond_transpose(cts: list, index: Any, *operands: Any, branches: tuple) -> list:
    if is_undefined(index):
        raise NotImplementedError("transpose of cond: the branch index cannot be differentiated")
    linear = [is_undefined(x) for x in operands]
    cts = [match_type(instantiate(ct), a) for ct, a in zip(cts, branches[0].out_avals)]
    # As JAX: each branch is transposed once to learn which cotangents no branch produces (they
    # stay symbolic zeros), then again producing the others.
    nonzero = [False] * linear.count(True)
    for branch in branches:
        nonzero = _either(nonzero, transpose_jaxpr_nonzero(branch, linear, False)[2])
    transposed = [transpose_jaxpr_nonzero(branch, linear, nonzero) for branch in branches]
    nonlinear = select_by(_not(linear), operands)
    in_avals = select_by(_not(linear), branches[0].in_avals) + list(branches[0].out_avals)
    programs, consts = trace_programs([_program_runner(p, c) for p, c, _ in transposed], in_avals,
                                      "transpose of cond")
    outs = cf.cond_p.bind(index, *consts, *nonlinear, *cts, branches=tuple(programs))
    linear_avals = select_by(linear, branches[0].in_avals)
    cts_in = merge_by(nonzero, outs, [Zero(a) for a, nz in zip(linear_avals, nonzero) if not nz])
    return [None] + merge_by(linear, cts_in, [None] * linear.count(False))


# --- scan -----------------------------------------------------------------------------------------
def _scan_jvp(primals: tuple, tangents: tuple, *, jaxpr: ClosedJaxpr, length: int, num_carry: int,
              num_consts: int, reverse: bool, unroll: int) -> tuple:
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    consts_nz, carry_nz, xs_nz = split_list(nonzeros, [num_consts, num_carry])
    num_ys = len(jaxpr.out_avals) - num_carry
    while True:  # a carry's tangent is nonzero if it is initially, or becomes so in the body
        program, jvp_consts, out_nz = jvp_jaxpr(jaxpr, consts_nz + carry_nz + xs_nz, carry_nz + [False] * num_ys)
        if _either(carry_nz, out_nz[:num_carry]) == carry_nz:
            break
        carry_nz = _either(carry_nz, out_nz[:num_carry])
    consts, carry, xs = split_list(primals, [num_consts, num_carry])
    consts_t, carry_t, xs_t = split_list(tangents, [num_consts, num_carry])
    carry_avals = jaxpr.in_avals[num_consts:num_consts + num_carry]
    carry_t = [match_type(instantiate(t), a) for t, a, nz in zip(carry_t, carry_avals, carry_nz) if nz]
    consts_t, xs_t = select_by(consts_nz, consts_t), select_by(xs_nz, xs_t)
    # program: (jvp consts, consts, carry, xs, consts_t, carry_t, xs_t) -> (carry, ys, carry_t, ys_t)
    jc, c, k, x, ct, kt, xt = split_list(program.jaxpr.invars, [len(jvp_consts), num_consts, num_carry, len(xs),
                                                                len(consts_t), len(carry_t)])
    ko, y, kto, yt = split_list(program.jaxpr.outvars, [num_carry, num_ys, len(carry_t)])
    body = with_io(program, jc + c + ct + k + kt + x + xt, ko + kto + y + yt)
    outs = cf.scan_p.bind(*jvp_consts, *consts, *consts_t, *carry, *carry_t, *xs, *xs_t, jaxpr=body, length=length,
                          num_carry=num_carry + len(carry_t), num_consts=len(jvp_consts) + num_consts + len(consts_t),
                          reverse=reverse, unroll=unroll)
    carry_out, carry_t_out, ys, ys_t = split_list(outs, [num_carry, len(carry_t), num_ys])
    out_avals = [aval(o) for o in carry_out + ys]
    ys_nz = out_nz[num_carry:]
    tangents_out = merge_by(carry_nz + ys_nz, carry_t_out + ys_t, _zeros_for(carry_nz + ys_nz, out_avals))
    return carry_out + ys, tangents_out


def _scan_partial_eval(trace: PartialEvalTrace, args: tuple, params: dict) -> list:
    jaxpr, num_consts, num_carry = params["jaxpr"], params["num_consts"], params["num_carry"]
    num_ys = len(jaxpr.out_avals) - num_carry
    consts_uk, carry_uk, xs_uk = split_list([trace.is_unknown(a) for a in args], [num_consts, num_carry])
    kinds = ["const"] * num_consts + ["carry"] * num_carry + ["xs"] * len(xs_uk)
    while True:  # a carry is unknown if it is initially, or becomes so in the body
        unknowns = consts_uk + carry_uk + xs_uk
        known_kinds = select_by(_not(unknowns), kinds)
        split = partial_eval_jaxpr(jaxpr, unknowns, carry_uk + [False] * num_ys,
                                   forwardable=[kind != "carry" for kind in known_kinds])
        if _either(carry_uk, split.out_unknowns[:num_carry]) == carry_uk:
            break
        carry_uk = _either(carry_uk, split.out_unknowns[:num_carry])
    known_args = select_by(_not(unknowns), args)
    known_consts = select_by(_not(consts_uk), args[:num_consts])
    known_carry = select_by(_not(carry_uk), args[num_consts:num_consts + num_carry])
    with set_current_trace(trace.parent):
        results = cf.scan_p.bind(*split.known_consts, *known_args, **dict(
            params, jaxpr=split.known, num_consts=len(split.known_consts) + len(known_consts),
            num_carry=len(known_carry)))
    num_known_outs = split.out_unknowns.count(False)
    known_outs, stacked = results[:num_known_outs], results[num_known_outs:]
    unknown_outs = _stage_unknown_scan(trace, args, params, split, unknowns, known_args, known_kinds, stacked)
    return merge_by(split.out_unknowns, unknown_outs, known_outs)


def _stage_unknown_scan(trace: PartialEvalTrace, args: tuple, params: dict, split: SplitProgram,
                        unknowns: list[bool], known_args: list, known_kinds: list[str], stacked: list) -> list:
    """Record the scan of the unknown program: residuals that are loop-invariant operands stay consts,
    those that change per iteration (computed, or forwarded xs) are scanned over."""
    num_consts, num_carry = params["num_consts"], params["num_carry"]
    residuals = split.residuals(known_args, stacked)
    per_step = [s is None or known_kinds[s] == "xs" for s in split.residual_sources]
    consts_u, carry_u, xs_u = split_list(select_by(unknowns, args),
                                         [sum(unknowns[:num_consts]), sum(unknowns[num_consts:num_consts + num_carry])])
    res_vars, in_vars = split_list(split.unknown.jaxpr.invars, [len(residuals)])
    c_vars, k_vars, x_vars = split_list(in_vars, [len(consts_u), len(carry_u)])
    body = with_io(split.unknown, select_by(_not(per_step), res_vars) + c_vars + k_vars + x_vars
                   + select_by(per_step, res_vars), split.unknown.jaxpr.outvars)
    operands = select_by(_not(per_step), residuals) + consts_u + carry_u + xs_u + select_by(per_step, residuals)
    return trace.stage(cf.scan_p, operands, dict(params, jaxpr=body, num_consts=len(operands) - len(carry_u)
                                                 - len(xs_u) - sum(per_step), num_carry=len(carry_u)))


def _scan_transpose(cts: list, *args: Any, jaxpr: ClosedJaxpr, length: int, num_carry: int, num_consts: int,
                    reverse: bool, unroll: int) -> list:
    consts, _, xs = split_list(args, [num_consts, num_carry])  # every carry is linear
    consts_lin = [is_undefined(c) for c in consts]
    xs_lin = [is_undefined(x) for x in xs]
    consts_avals, carry_avals, x_avals = split_list(jaxpr.in_avals, [num_consts, num_carry])
    num_ys = len(jaxpr.out_avals) - num_carry
    y_avals = jaxpr.out_avals[num_carry:]
    res_consts, res_xs = select_by(_not(consts_lin), consts), select_by(_not(xs_lin), xs)
    lin_const_avals = select_by(consts_lin, consts_avals)

    def step(*step_args: Any) -> list:
        rc, acc, ct_carry, ct_y, rx = split_list(step_args, [len(res_consts), len(lin_const_avals), num_carry, num_ys])
        ins = (merge_by(consts_lin, [UndefinedPrimal(a) for a in lin_const_avals], rc)
               + [UndefinedPrimal(a) for a in carry_avals]
               + merge_by(xs_lin, [UndefinedPrimal(a) for a in select_by(xs_lin, x_avals)], rx))
        cts_in = backward_pass(jaxpr.jaxpr, jaxpr.consts, ins, list(ct_carry) + list(ct_y))
        ct_consts, ct_carry_in, ct_xs = split_list(cts_in, [num_consts, num_carry])
        acc = [match_type(add_tangents(a, ct), av) for a, ct, av in
               zip(acc, select_by(consts_lin, ct_consts), lin_const_avals)]
        ct_carry_in = [match_type(instantiate(ct), a) for ct, a in zip(ct_carry_in, carry_avals)]
        ct_xs = [match_type(instantiate(ct), a) for ct, a in zip(select_by(xs_lin, ct_xs), select_by(xs_lin, x_avals))]
        return acc + ct_carry_in + ct_xs

    in_avals = ([aval(c) for c in res_consts] + lin_const_avals + list(carry_avals) + list(y_avals)
                + select_by(_not(xs_lin), x_avals))
    body, body_consts = trace_program(step, in_avals, "transpose of scan")
    ct_carry, ct_ys = split_list([match_type(instantiate(ct), a) for ct, a in zip(cts, jaxpr.out_avals)], [num_carry])
    outs = cf.scan_p.bind(*body_consts, *res_consts, *[zeros(a) for a in lin_const_avals], *ct_carry, *ct_ys,
                          *res_xs, jaxpr=body, length=length, num_carry=len(lin_const_avals) + num_carry,
                          num_consts=len(body_consts) + len(res_consts), reverse=not reverse, unroll=unroll)
    ct_lin_consts, ct_init, ct_lin_xs = split_list(outs, [len(lin_const_avals), num_carry])
    return (merge_by(consts_lin, ct_lin_consts, [None] * consts_lin.count(False)) + ct_init
            + merge_by(xs_lin, ct_lin_xs, [None] * xs_lin.count(False)))


# --- while: forward mode only ---------------------------------------------------------------------------
def _while_jvp(primals: tuple, tangents: tuple, *, cond_jaxpr: ClosedJaxpr, cond_nconsts: int,
               body_jaxpr: ClosedJaxpr, body_nconsts: int) -> tuple:
    cond_consts, body_consts, carry = split_list(primals, [cond_nconsts, body_nconsts])
    _, body_consts_t, carry_t = split_list(tangents, [cond_nconsts, body_nconsts])
    consts_nz = [not isinstance(t, Zero) for t in body_consts_t]
    carry_nz = [not isinstance(t, Zero) for t in carry_t]
    while True:
        program, jvp_consts, out_nz = jvp_jaxpr(body_jaxpr, consts_nz + carry_nz, carry_nz)
        if _either(carry_nz, out_nz) == carry_nz:
            break
        carry_nz = _either(carry_nz, out_nz)
    carry_avals = body_jaxpr.out_avals
    carry_t = [match_type(instantiate(t), a) for t, a, nz in zip(carry_t, carry_avals, carry_nz) if nz]
    body_consts_t = select_by(consts_nz, body_consts_t)
    jc, c, k, ct, kt = split_list(program.jaxpr.invars, [len(jvp_consts), body_nconsts, len(carry),
                                                        len(body_consts_t)])
    body = with_io(program, jc + c + ct + k + kt, program.jaxpr.outvars)
    cj = cond_jaxpr.jaxpr  # the condition reads the primal carry only
    cond = ClosedJaxpr(Jaxpr([], cj.invars + [Var(aval(t)) for t in carry_t], cj.eqns, cj.outvars), [])
    outs = cf.while_p.bind(*cond_consts, *jvp_consts, *body_consts, *body_consts_t, *carry, *carry_t,
                           cond_jaxpr=cond, cond_nconsts=cond_nconsts, body_jaxpr=body,
                           body_nconsts=len(jvp_consts) + body_nconsts + len(body_consts_t))
    carry_out, carry_t_out = outs[:len(carry)], outs[len(carry):]
    return carry_out, merge_by(carry_nz, carry_t_out, _zeros_for(carry_nz, carry_avals))


def _reads(jaxpr: Jaxpr, var: Var) -> bool:
    return any(a is var for eqn in jaxpr.eqns for a in eqn.invars) or any(a is var for a in jaxpr.outvars)


def _while_partial_eval(trace: PartialEvalTrace, args: tuple, params: dict) -> list:
    """The known carries (the primal values) come from a loop over them alone; the unknown ones
    (tangents) from the whole loop, recorded: enough for linearize, and transposing it fails clearly."""
    cond_jaxpr, cond_nconsts = params["cond_jaxpr"], params["cond_nconsts"]
    body_jaxpr, body_nconsts = params["body_jaxpr"], params["body_nconsts"]
    unknowns = [trace.is_unknown(a) for a in args]
    cond_uk, consts_uk, carry_uk = split_list(unknowns, [cond_nconsts, body_nconsts])
    while True:
        split = partial_eval_jaxpr(body_jaxpr, consts_uk + carry_uk, carry_uk)
        if _either(carry_uk, split.out_unknowns) == carry_uk:
            break
        carry_uk = _either(carry_uk, split.out_unknowns)
    cond_carry_vars = cond_jaxpr.jaxpr.invars[cond_nconsts:]
    if any(cond_uk) or any(u and _reads(cond_jaxpr.jaxpr, v) for u, v in zip(carry_uk, cond_carry_vars)):
        return trace.stage(cf.while_p, args, params)
    cond_consts, body_consts, carry = split_list(args, [cond_nconsts, body_nconsts])
    num_known = carry_uk.count(False)
    known_body = ClosedJaxpr(prune(split.known.jaxpr, [True] * num_known + [False] * split.num_computed_residuals),
                             [])
    cj = cond_jaxpr.jaxpr
    known_cond = ClosedJaxpr(Jaxpr([], cj.invars[:cond_nconsts] + select_by(_not(carry_uk), cond_carry_vars),
                                   cj.eqns, cj.outvars), [])
    known_body_consts = select_by(_not(consts_uk), body_consts)
    with set_current_trace(trace.parent):
        known_outs = cf.while_p.bind(*cond_consts, *split.known_consts, *known_body_consts,
                                     *select_by(_not(carry_uk), carry), cond_jaxpr=known_cond,
                                     cond_nconsts=cond_nconsts, body_jaxpr=known_body,
                                     body_nconsts=len(split.known_consts) + len(known_body_consts))
    everything = trace.stage(cf.while_p, args, params)
    return merge_by(carry_uk, select_by(carry_uk, everything), known_outs)


def _while_transpose(cts: list, *args: Any, **params: Any) -> list:
    raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic "
                     "start/stop values. Try using lax.scan, or using fori_loop with static start/stop.")


jvp_rules.update({cf.cond_p: _cond_jvp, cf.scan_p: _scan_jvp, cf.while_p: _while_jvp})
partial_eval_rules.update({cf.cond_p: _cond_partial_eval, cf.scan_p: _scan_partial_eval,
                           cf.while_p: _while_partial_eval})
transpose_rules.update({cf.cond_p: _cond_transpose, cf.scan_p: _scan_transpose, cf.while_p: _while_transpose})
