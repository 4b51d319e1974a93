"""Nested ``jit`` calls stay calls: the jvp of a call is a call of the jvp program, a
partially known call splits into a known and an unknown call, and the transpose
of a call is a call of the transposed program. ``checkpoint`` calls (``remat2``) and
``checkpoint_name``'s ``name`` have their rules here too (see below)."""
from __future__ import annotations

from typing import Any

from ember.core.calls import checkpoint_p, jit_p, name_p, optimization_barrier_p
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var, subjaxprs
from ember.core.staging import DebugInfo
from ember.core.trace import current_trace, set_current_trace
from ember.lax.callbacks import debug_callback_p, io_callback_p
from ember.transforms.batching import batch_jaxpr, batching_rules
from ember.transforms.jvp import jvp_jaxpr, jvp_rules
from ember.transforms.partial_eval import (
    PartialEvalTrace,
    RecomputeType,
    dce_jaxpr,
    dce_rules,
    partial_eval_jaxpr,
    partial_eval_jaxpr_custom,
    partial_eval_jaxpr_custom_rules,
    partial_eval_rules,
    remat_case,
)
from ember.transforms.programs import (
    eval_closed_by_binding,
    eval_jaxpr_by_binding,
    merge_by,
    select_by,
    trace_program,
)
from ember.transforms.tangents import Zero, instantiate, match_type
from ember.transforms.transpose import UndefinedPrimal, backward_pass, is_undefined, transpose_jaxpr, transpose_rules


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
    outs = jit_p.bind(*consts, *nonlinear, *cts, jaxpr=program, name=name)  # (JAX 0.10 keeps the name)
    return merge_by(linear, outs, [None] * (len(args) - len(outs)))


jvp_rules[jit_p] = _jit_jvp
partial_eval_rules[jit_p] = _jit_partial_eval
transpose_rules[jit_p] = _jit_transpose


# --- checkpoint / remat (``remat2``) ------------------------------------------------------------------
# Forward a checkpoint is its body. Its jvp is a checkpoint of the jvp program. Its partial
# evaluation (``linearize``, and so ``grad``) is where rematerialization happens: the known side
# computes the primal outputs and only the residuals that the policy lets it save (inputs are
# always available), hoisted out of the call as JAX does; the unknown side is a checkpoint,
# ``differentiated=True``, that recomputes the other residuals from the saved ones before using
# them. Its transpose is a checkpoint of the transposed program, which recomputes there.
def _prevent_cse_flags(prevent_cse: Any, n: int) -> tuple:
    return (prevent_cse,) * n if isinstance(prevent_cse, bool) else tuple(prevent_cse)


def _checkpoint_jvp(primals: tuple, tangents: tuple, *, jaxpr: ClosedJaxpr, prevent_cse: Any,
                    differentiated: bool, policy: Any) -> tuple:
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    program, consts, out_nonzeros = jvp_jaxpr(jaxpr, nonzeros, [False] * len(jaxpr.out_avals))
    if isinstance(prevent_cse, tuple):
        prevent_cse = (False,) * len(consts) + prevent_cse + (True,) * sum(nonzeros)
    outs = checkpoint_p.bind(*consts, *primals, *select_by(nonzeros, tangents), jaxpr=program,
                             prevent_cse=prevent_cse, differentiated=differentiated, policy=policy)
    primal_outs, tangent_outs = outs[:len(jaxpr.out_avals)], outs[len(jaxpr.out_avals):]
    zero_outs = [Zero(a) for a, nz in zip(jaxpr.out_avals, out_nonzeros) if not nz]
    return primal_outs, merge_by(out_nonzeros, tangent_outs, zero_outs)


def _nothing_saveable(*_: Any, **__: Any) -> bool:  # (checkpoint's policy when it has none)
    return False


def _unsupported_effects(jaxpr: Jaxpr) -> list[str]:
    """The effects of ``jaxpr`` (sub-programs included) that a checkpoint cannot recompute: host
    I/O (``io_callback``), which must run once. Debug callbacks may run again; collectives are no
    effects here (as in JAX)."""
    found, stack = [], [jaxpr]
    while stack:
        for eqn in stack.pop().eqns:
            if eqn.primitive is io_callback_p:
                found.append("OrderedIOEffect" if eqn.params["ordered"] else "IOEffect")
            stack.extend(subjaxprs(eqn.params))
    return list(dict.fromkeys(found))


def _checkpoint_partial_eval(trace: PartialEvalTrace, args: tuple, params: dict) -> list:
    jaxpr = params["jaxpr"].jaxpr
    unsupported = _unsupported_effects(jaxpr)
    if unsupported:
        raise NotImplementedError(f"Effects not supported in partial-eval of `checkpoint`/`remat`: "
                                  f"[{', '.join(unsupported)}]")
    policy = params["policy"] or _nothing_saveable
    unknowns = [trace.is_unknown(a) for a in args]
    split = partial_eval_jaxpr_custom(jaxpr, unknowns, [True] * len(args), policy)
    # The staged side computes only the unknown outputs; the known side only the known outputs
    # and the residuals that the staged side reads.
    staged_unknown = [u for u, inst in zip(split.out_unknowns, split.out_inst) if inst]
    staged, used_staged = dce_jaxpr(split.staged, staged_unknown)
    used_res, used_args = used_staged[:split.num_res], used_staged[split.num_res:]
    num_known_outs = len(split.known.outvars) - split.num_res
    known, used_known = dce_jaxpr(split.known, [True] * num_known_outs + used_res)
    known_args = [a for a, u in zip(select_by([not u for u in unknowns], args), used_known) if u]
    with set_current_trace(trace.parent):  # the forward pass: hoisted out of the checkpoint
        results = eval_jaxpr_by_binding(known, [], *known_args)
    known_outs, residuals = results[:num_known_outs], results[num_known_outs:]
    if not any(split.out_unknowns):
        return known_outs
    staged_args = select_by(used_args, args)
    prevent_cse = params["prevent_cse"]
    if isinstance(prevent_cse, tuple):
        prevent_cse = (True,) * len(residuals) + tuple(select_by(used_args, prevent_cse))
    new_params = dict(params, jaxpr=ClosedJaxpr(staged, []), prevent_cse=prevent_cse, differentiated=True)
    unknown_outs = trace.stage(checkpoint_p, [*residuals, *staged_args], new_params)
    return merge_by(split.out_unknowns, unknown_outs, known_outs)


def _checkpoint_transpose(cts: list, *args: Any, jaxpr: ClosedJaxpr, prevent_cse: Any, differentiated: bool,
                          policy: Any) -> list:
    linear = [is_undefined(a) for a in args]
    in_avals, out_avals = jaxpr.in_avals, jaxpr.out_avals
    nonlinear = select_by([not lin for lin in linear], args)

    def transposed(*xs: Any) -> list:
        # The non-linear part runs again here (the recomputation), then the linear part is transposed.
        primals, cts_out = xs[:len(nonlinear)], xs[len(nonlinear):]
        pe = PartialEvalTrace(current_trace(), DebugInfo("transpose", "checkpoint", [], False))
        linear_args = [pe.new_arg(a) for a, lin in zip(in_avals, linear) if lin]
        try:
            with set_current_trace(pe):
                outs = eval_closed_by_binding(jaxpr, *merge_by(linear, linear_args, primals))
            outvars = [pe.to_atom(o) for o in outs]
        finally:
            pe.alive = False
        program = Jaxpr(pe.constvars, pe.invars, pe.eqns, outvars)
        cts_in = backward_pass(program, pe.consts, [UndefinedPrimal(a) for a, lin in zip(in_avals, linear) if lin],
                               cts_out)
        return [match_type(instantiate(ct), a) for ct, a in zip(cts_in, select_by(linear, in_avals))]

    program, consts = trace_program(transposed, [a for a, lin in zip(in_avals, linear) if not lin] + list(out_avals),
                                    "transpose")
    cts = [match_type(instantiate(ct), a) for ct, a in zip(cts, out_avals)]
    if isinstance(prevent_cse, tuple):
        prevent_cse = (False,) * len(consts) + tuple(select_by([not lin for lin in linear], prevent_cse)) \
            + (True,) * len(cts)
    outs = checkpoint_p.bind(*consts, *nonlinear, *cts, jaxpr=program, prevent_cse=prevent_cse,
                             differentiated=differentiated, policy=policy)
    return merge_by(linear, outs, [None] * (len(args) - len(outs)))


def _checkpoint_batch(axis_size: int, values: tuple, dims: tuple, *, jaxpr: ClosedJaxpr, prevent_cse: Any,
                      differentiated: bool, policy: Any) -> tuple[list, list]:
    program, consts, out_batched = batch_jaxpr(jaxpr, axis_size, dims)
    if isinstance(prevent_cse, tuple):
        prevent_cse = (False,) * len(consts) + prevent_cse
    outs = checkpoint_p.bind(*consts, *values, jaxpr=program, prevent_cse=prevent_cse,
                             differentiated=differentiated, policy=policy)
    return outs, [0 if b else None for b in out_batched]


# Inside a checkpoint, calls split by the same policy (JAX's ``call_partial_eval_custom_rule``): the
# known call returns the residuals computed inside it, the staged call takes them.
def _call_partial_eval_custom(policy: Any, unks_in: list, inst_in: list, eqn: Eqn) -> tuple:
    body = eqn.params["jaxpr"]
    if body.consts:  # (calls carry their consts as operands)
        raise NotImplementedError("a call with consts inside a checkpoint")
    split = partial_eval_jaxpr_custom(body.jaxpr, unks_in, inst_in, policy)
    residuals = [Var(v.aval) for v in split.staged.invars[:split.num_res]]
    known_params, staged_params = dict(eqn.params, jaxpr=ClosedJaxpr(split.known, [])), \
        dict(eqn.params, jaxpr=ClosedJaxpr(split.staged, []))
    if eqn.primitive is checkpoint_p:
        prevent = eqn.params["prevent_cse"]
        if isinstance(prevent, tuple):
            known_params["prevent_cse"] = tuple(select_by([not u for u in unks_in], prevent))
            staged_params["prevent_cse"] = (True,) * len(residuals) + tuple(select_by(inst_in, prevent))
        staged_params["differentiated"] = True
    known_eqn = Eqn(eqn.primitive, select_by([not u for u in unks_in], eqn.invars), known_params,
                    select_by([not u for u in split.out_unknowns], eqn.outvars) + residuals)
    staged_eqn = Eqn(eqn.primitive, residuals + select_by(inst_in, eqn.invars), staged_params,
                     select_by(split.out_inst, eqn.outvars))
    new_inst = [a for a, inst in zip(eqn.invars, inst_in) if isinstance(a, Var) and not inst]
    return known_eqn, staged_eqn, split.out_unknowns, split.out_inst, new_inst + residuals


def _call_dce(used_outputs: list, eqn: Eqn) -> tuple[list, Eqn | None]:
    body = eqn.params["jaxpr"]
    if body.consts:
        return [True] * len(eqn.invars), eqn
    pruned, used_inputs = dce_jaxpr(body.jaxpr, used_outputs)
    if not any(used_outputs) and not pruned.eqns:
        return [False] * len(eqn.invars), None
    params = dict(eqn.params, jaxpr=ClosedJaxpr(pruned, []))
    if eqn.primitive is checkpoint_p and isinstance(params["prevent_cse"], tuple):
        params["prevent_cse"] = tuple(select_by(used_inputs, params["prevent_cse"]))
    return used_inputs, Eqn(eqn.primitive, select_by(used_inputs, eqn.invars), params,
                            select_by(used_outputs, eqn.outvars))


# A debug callback inside a checkpoint runs again with the recomputation (as in JAX), so that it
# reports what the backward pass computes: it is staged as well as run now, unless the policy
# saves it and one of its operands is a saved value (recomputing that only for the callback would
# change what the checkpoint saves). With an unknown operand it is staged only.
def debug_effect_partial_eval_custom(policy: Any, unks_in: list, inst_in: list, eqn: Eqn) -> tuple:
    needed = [a for a, inst in zip(eqn.invars, inst_in) if isinstance(a, Var) and not inst]
    if any(unks_in):
        return None, eqn, [], [], needed
    case = remat_case(policy(eqn.primitive, *(a.aval for a in eqn.invars), **eqn.params))
    if not isinstance(case, RecomputeType) and needed:
        return eqn, None, [], [], []
    return eqn, eqn, [], [], needed


partial_eval_jaxpr_custom_rules[debug_callback_p] = debug_effect_partial_eval_custom


# ``checkpoint_name``: the name stays on the primal only (as in JAX, the tangent is not named).
def _name_jvp(primals: tuple, tangents: tuple, *, name: str) -> tuple:
    (x,), (t,) = primals, tangents
    return name_p.bind(x, name=name), t


jvp_rules[checkpoint_p] = _checkpoint_jvp
partial_eval_rules[checkpoint_p] = _checkpoint_partial_eval
transpose_rules[checkpoint_p] = _checkpoint_transpose
batching_rules[checkpoint_p] = _checkpoint_batch
for _p in (jit_p, checkpoint_p):
    partial_eval_jaxpr_custom_rules[_p] = _call_partial_eval_custom
    dce_rules[_p] = _call_dce
jvp_rules[name_p] = _name_jvp
transpose_rules[name_p] = lambda ct, x, *, name: [ct]
batching_rules[name_p] = lambda axis_size, values, dims, *, name: (name_p.bind(values[0], name=name), dims[0])


# The compiler's optimization barrier (only compiled code has one): values pass through it.
def _barrier_jvp(primals: tuple, tangents: tuple) -> tuple:
    return optimization_barrier_p.bind(*primals), list(tangents)


jvp_rules[optimization_barrier_p] = _barrier_jvp
batching_rules[optimization_barrier_p] = lambda axis_size, values, dims: (optimization_barrier_p.bind(*values),
                                                                          list(dims))
