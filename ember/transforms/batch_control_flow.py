"""Batching rules of the primitives that hold sub-programs: calls (nested ``jit``, fused
kernels), ``cond``, ``while`` and ``scan``.

A sub-program is batched by tracing it under a batch trace into a new program
(``batch_jaxpr``), which the same primitive then runs: ``vmap`` of a loop is one
loop over batched values. A loop's carry keeps one type, so a carry is batched
when its initial value is or when the body makes it vary (a fixed point).
Control flow decided by a batched value becomes data flow, as in JAX: ``cond``
computes every branch and each example selects its own; ``while`` runs until
every example is done, and the examples that are done keep their carry.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

from ember import lax
from ember.compiler.fusion import fusion_p
from ember.core.calls import jit_p
from ember.core.ir import ClosedJaxpr
from ember.core.primitive import Primitive
from ember.lax.base import aval
from ember.lax.control_flow import cond_p, scan_p, while_p
from ember.transforms.batching import (
    BatchDim,
    batch_flat,
    batch_jaxpr,
    batch_jaxprs,
    batched_aval,
    batching_rules,
    move_batch_axis,
)
from ember.transforms.programs import eval_closed_by_binding, split_list, trace_program


def _front_dims(batched: Sequence[bool]) -> list[BatchDim]:
    return [0 if b else None for b in batched]


# --- calls -----------------------------------------------------------------------------------------
def _batch_call(p: Primitive):
    def rule(axis_size: int, values: tuple, dims: tuple, *, jaxpr: ClosedJaxpr, name: str) -> tuple[list, list]:
        program, consts, out_batched = batch_jaxpr(jaxpr, axis_size, dims)
        return p.bind(*consts, *values, jaxpr=program, name=name), _front_dims(out_batched)

    return rule


batching_rules[jit_p] = _batch_call(jit_p)
batching_rules[fusion_p] = _batch_call(fusion_p)


# --- cond ------------------------------------------------------------------------------------------
def _batch_cond(axis_size: int, values: tuple, dims: tuple, *, branches: tuple) -> tuple[list, list]:
    (index, *operands), (index_dim, *operand_dims) = values, dims
    if index_dim is not None:
        return _select_branch_results(axis_size, index, index_dim, operands, operand_dims, branches)
    programs, consts, out_batched = batch_jaxprs(branches, axis_size, operand_dims)
    batched = [any(b) for b in zip(*out_batched)]
    if any(b != batched for b in out_batched):  # branches must agree on their output types
        programs, consts, _ = batch_jaxprs(branches, axis_size, operand_dims, force_batched=batched)
    return cond_p.bind(index, *consts, *operands, branches=tuple(programs)), _front_dims(batched)


def _select_branch_results(axis_size: int, index: Any, index_dim: int, operands: list, operand_dims: list,
                           branches: tuple) -> tuple[list, list]:
    """A batched branch index: every branch computes every example, and each example takes
    the results of its own branch."""
    index = move_batch_axis(index, index_dim, axis_size)
    results = []
    for branch in branches:
        outs, out_dims = batch_flat(functools.partial(eval_closed_by_binding, branch), axis_size, operands,
                                    operand_dims)
        results.append([move_batch_axis(o, d, axis_size) for o, d in zip(outs, out_dims)])
    selected = [lax.select_n(lax.broadcast_in_dim(index, aval(cases[0]).shape, (0,)), *cases)
                for cases in zip(*results)]
    return selected, [0] * len(selected)


batching_rules[cond_p] = _batch_cond


# --- loops ------------------------------------------------------------------------------------------
def _batch_loop_body(body: ClosedJaxpr, axis_size: int, const_dims: Sequence[BatchDim], carry_batched: list[bool],
                     x_dims: Sequence[BatchDim] = ()) -> tuple[ClosedJaxpr, list, list[bool]]:
    """Batch a body ``(consts, carry, xs) -> (carry, ys)``: a carry is batched where its initial
    value is or where the body makes it so, which may change what the body makes (iterate)."""
    num_ys = len(body.out_avals) - len(carry_batched)
    while True:
        in_dims = [*const_dims, *_front_dims(carry_batched), *x_dims]
        program, consts, out_batched = batch_jaxpr(body, axis_size, in_dims, carry_batched + [False] * num_ys)
        if out_batched[:len(carry_batched)] == carry_batched:
            return program, consts, out_batched
        carry_batched = out_batched[:len(carry_batched)]


def _batch_while(axis_size: int, values: tuple, dims: tuple, *, cond_jaxpr: ClosedJaxpr, cond_nconsts: int,
                 body_jaxpr: ClosedJaxpr, body_nconsts: int) -> tuple[list, list]:
    cond_consts, body_consts, init = split_list(values, [cond_nconsts, body_nconsts])
    cond_dims, body_dims, init_dims = split_list(dims, [cond_nconsts, body_nconsts])
    body, body_program_consts, carry_batched = _batch_loop_body(
        body_jaxpr, axis_size, body_dims, [d is not None for d in init_dims])
    cond, cond_program_consts, [predicate_batched] = batch_jaxpr(
        cond_jaxpr, axis_size, cond_dims + _front_dims(carry_batched))
    if predicate_batched:
        return _while_until_all_done(axis_size, cond_jaxpr, body_jaxpr, cond_consts, cond_dims, body_consts,
                                     body_dims, init, init_dims)
    init = [move_batch_axis(x, d, axis_size) if b else x for x, d, b in zip(init, init_dims, carry_batched)]
    outs = while_p.bind(*cond_program_consts, *cond_consts, *body_program_consts, *body_consts, *init,
                        cond_jaxpr=cond, cond_nconsts=len(cond_program_consts) + cond_nconsts,
                        body_jaxpr=body, body_nconsts=len(body_program_consts) + body_nconsts)
    return outs, _front_dims(carry_batched)


def _while_until_all_done(axis_size: int, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr, cond_consts: list,
                          cond_dims: list, body_consts: list, body_dims: list, init: list,
                          init_dims: list) -> tuple[list, list]:
    """A batched loop condition: loop while any example's condition holds; a step updates
    only the carries of the examples whose condition holds (so every carry is batched)."""
    carry_dims = [0] * len(init)

    def running(consts: Sequence[Any], carry: Sequence[Any]) -> Any:
        [keep_going], [d] = batch_flat(functools.partial(eval_closed_by_binding, cond_jaxpr), axis_size,
                                       [*consts, *carry], [*cond_dims, *carry_dims])
        return move_batch_axis(keep_going, d, axis_size)

    def any_running(*args: Any) -> list:
        consts, carry = split_list(args, [len(cond_consts)])
        return [lax.reduce_or(running(consts, carry), (0,))]

    def step(*args: Any) -> list:
        consts, step_consts, carry = split_list(args, [len(cond_consts), len(body_consts)])
        mask = running(consts, carry)
        new, new_dims = batch_flat(functools.partial(eval_closed_by_binding, body_jaxpr), axis_size,
                                   [*step_consts, *carry], [*body_dims, *carry_dims])
        return [lax.select(lax.broadcast_in_dim(mask, aval(old).shape, (0,)), move_batch_axis(x, d, axis_size), old)
                for old, x, d in zip(carry, new, new_dims)]

    def batched_avals(avals: Sequence, dims: Sequence[BatchDim]) -> list:
        return [batched_aval(a, d, axis_size) for a, d in zip(avals, dims)]

    cond_avals = batched_avals(cond_jaxpr.in_avals[:len(cond_consts)], cond_dims)
    body_avals = batched_avals(body_jaxpr.in_avals[:len(body_consts)], body_dims)
    carry_avals = batched_avals(body_jaxpr.out_avals, carry_dims)
    cond, cond_program_consts = trace_program(any_running, cond_avals + carry_avals, "vmap")
    body, body_program_consts = trace_program(step, cond_avals + body_avals + carry_avals, "vmap")
    init = [move_batch_axis(x, d, axis_size) for x, d in zip(init, init_dims)]
    body_operands = [*body_program_consts, *cond_consts, *body_consts]
    outs = while_p.bind(*cond_program_consts, *cond_consts, *body_operands, *init,
                        cond_jaxpr=cond, cond_nconsts=len(cond_program_consts) + len(cond_consts),
                        body_jaxpr=body, body_nconsts=len(body_operands))
    return outs, carry_dims


def _batch_scan(axis_size: int, values: tuple, dims: tuple, *, jaxpr: ClosedJaxpr, length: int, num_carry: int,
                num_consts: int, reverse: bool, unroll: int) -> tuple[list, list]:
    """The xs get their batch dimension second (the first is scanned over), so each x has it
    first; the stacked ys have it second."""
    consts, init, xs = split_list(values, [num_consts, num_carry])
    const_dims, init_dims, xs_dims = split_list(dims, [num_consts, num_carry])
    body, program_consts, out_batched = _batch_loop_body(
        jaxpr, axis_size, const_dims, [d is not None for d in init_dims], [None if d is None else 0 for d in xs_dims])
    carry_batched, ys_batched = out_batched[:num_carry], out_batched[num_carry:]
    init = [move_batch_axis(x, d, axis_size) if b else x for x, d, b in zip(init, init_dims, carry_batched)]
    xs = [x if d is None else move_batch_axis(x, d, axis_size, 1) for x, d in zip(xs, xs_dims)]
    outs = scan_p.bind(*program_consts, *consts, *init, *xs, jaxpr=body, length=length, num_carry=num_carry,
                       num_consts=len(program_consts) + num_consts, reverse=reverse, unroll=unroll)
    return outs, _front_dims(carry_batched) + [1 if b else None for b in ys_batched]


batching_rules[while_p] = _batch_while
batching_rules[scan_p] = _batch_scan
