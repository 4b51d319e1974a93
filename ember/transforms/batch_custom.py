"""Batching rules of ``custom_jvp`` / ``custom_vjp`` calls.

The batched call keeps the user's derivative rules, so ``grad(vmap(f))`` still
differentiates ``f`` by them: its function is batched like a nested ``jit``,
and its rules are wrapped to run under ``vmap`` on the examples when
differentiation calls them. Every output of a batched call is batched at the
front, so the wrapped rules know where the tangents and cotangents of the
outputs keep their batch dimension.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Sequence

from ember import errors, lax, tree_util
from ember.core.array import ensure_array
from ember.core.avals import ShapedArray
from ember.core.calls import custom_vjp_lin_p
from ember.core.ir import ClosedJaxpr
from ember.core.trace import set_current_trace
from ember.lax.base import aval
from ember.transforms.batching import (
    BatchDim,
    BatchTrace,
    batch_flat,
    batch_jaxpr,
    batched_aval,
    batching_rules,
    move_batch_axis,
)
from ember.transforms.custom import (
    SymbolicZero,
    _apply_jvp_rule,
    _Arguments,
    _forward_through_custom_vjp,
    _VJPRules,
    custom_call_handlers,
    custom_jvp,
    custom_jvp_call_p,
    custom_vjp,
    custom_vjp_call_p,
)
from ember.transforms.tangents import Zero, instantiate


def _example_aval(a: ShapedArray, dim: BatchDim) -> ShapedArray:
    return a if dim is None else a._replace(shape=a.shape[:dim] + a.shape[dim + 1:])


def _batch_call_program(call: ClosedJaxpr, axis_size: int, dims: Sequence[BatchDim]) -> tuple[ClosedJaxpr, list]:
    program, consts, _ = batch_jaxpr(call, axis_size, dims, force_batched=[True] * len(call.out_avals))
    return program, consts


def _at_front(axis_size: int, x: Any, dim: BatchDim) -> Any:
    """A batched output or (symbolic zero) tangent with its batch dimension first."""
    return Zero(batched_aval(x.aval, 0, axis_size)) if isinstance(x, Zero) else move_batch_axis(x, dim, axis_size)


# --- custom_jvp ---------------------------------------------------------------------------------------
def _batched_jvp(jvp: Callable, axis_size: int, arg_dims: Sequence[BatchDim]) -> Callable:
    """The user's jvp rule for batched primals and tangents (laid out like the arguments)."""
    def rule(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list, list]:
        tangent_dims = [None if isinstance(t, Zero) else d for t, d in zip(tangents, arg_dims)]
        tangents = [Zero(_example_aval(t.aval, d)) if isinstance(t, Zero) else t for t, d in zip(tangents, arg_dims)]
        num_outs: list[int] = []

        def flat(*xs: Any) -> list:
            outs, out_tangents = jvp(list(xs[:len(primals)]), list(xs[len(primals):]))
            num_outs.append(len(outs))
            return [*outs, *out_tangents]

        results, dims = batch_flat(flat, axis_size, [*primals, *tangents], [*arg_dims, *tangent_dims])
        fronted = [_at_front(axis_size, x, d) for x, d in zip(results, dims)]
        return fronted[:num_outs[0]], fronted[num_outs[0]:]

    rule.__name__ = getattr(jvp, "__name__", "rule")  # (the function's name, and its rule's, as printed)
    rule.rule_name, rule.symbolic_zeros = getattr(jvp, "rule_name", "jvp"), getattr(jvp, "symbolic_zeros", False)
    return rule


def _batch_custom_jvp_call(axis_size: int, values: tuple, dims: tuple, *, call: ClosedJaxpr, jvp: Callable,
                           num_consts: int) -> tuple[list, list]:
    program, consts = _batch_call_program(call, axis_size, dims)
    outs = custom_jvp_call_p.bind(*consts, *values, call=program, jvp=_batched_jvp(jvp, axis_size, dims[num_consts:]),
                                  num_consts=len(consts) + num_consts)
    return outs, [0] * len(outs)


# --- custom_vjp ---------------------------------------------------------------------------------------
class _BatchedVJPRules:
    """A call's fwd and bwd rules for batched arguments: each runs under vmap on the examples.

    A shared (unbatched) argument's cotangent is the sum of the examples' cotangents.
    """

    def __init__(self, rules: Any, axis_size: int, arg_dims: Sequence[BatchDim]) -> None:
        self.rules, self.fn = rules, rules.fn
        self.axis_size, self.arg_dims = axis_size, list(arg_dims)
        self.residual_dims: list[BatchDim] = []

    def fwd(self, primals: Sequence[Any], perturbed: Sequence[bool] | None = None) -> tuple[list, list]:
        num_outs: list[int] = []

        def flat(*xs: Any) -> list:
            outs, residuals = self.rules.fwd(list(xs), perturbed)
            num_outs.append(len(outs))
            return [*outs, *residuals]

        results, dims = batch_flat(flat, self.axis_size, primals, self.arg_dims)
        n = num_outs[0]
        self.residual_dims = dims[n:]
        return [_at_front(self.axis_size, o, d) for o, d in zip(results[:n], dims[:n])], results[n:]

    def snapshot(self) -> _BatchedVJPRules:
        """As ``_VJPRules.snapshot``, for both levels."""
        kept = copy.copy(self)
        kept.rules = self.rules.snapshot()
        return kept

    def bwd(self, residuals: Sequence[Any], cts: Sequence[Any], in_avals: Sequence[ShapedArray]) -> list:
        example_avals = [_example_aval(a, d) for a, d in zip(in_avals, self.arg_dims)]
        cts = [instantiate(Zero(ct.aval)) if isinstance(ct, SymbolicZero) else ct for ct in cts]  # (batched)

        def flat(*xs: Any) -> list:
            return self.rules.bwd(xs[:len(residuals)], xs[len(residuals):], example_avals)

        results, dims = batch_flat(flat, self.axis_size, [*residuals, *cts],
                                   [*self.residual_dims, *[0] * len(cts)])
        return [self._like_argument(ct, d, arg_dim, a)
                for ct, d, arg_dim, a in zip(results, dims, self.arg_dims, in_avals)]

    def _like_argument(self, ct: Any, dim: BatchDim, arg_dim: BatchDim, arg_aval: ShapedArray) -> Any:
        if isinstance(ct, Zero):
            return Zero(arg_aval)
        if arg_dim is None:
            return lax.reduce_sum(move_batch_axis(ct, dim, self.axis_size), (0,))
        return move_batch_axis(ct, dim, self.axis_size, arg_dim)


def _batch_custom_vjp_call(axis_size: int, values: tuple, dims: tuple, *, call: ClosedJaxpr, rules: Any,
                           num_consts: int) -> tuple[list, list]:
    program, consts = _batch_call_program(call, axis_size, dims)
    outs = custom_vjp_call_p.bind(*consts, *values, call=program,
                                  rules=_BatchedVJPRules(rules, axis_size, dims[num_consts:]),
                                  num_consts=len(consts) + num_consts)
    return outs, [0] * len(outs)


batching_rules[custom_jvp_call_p] = _batch_custom_jvp_call
batching_rules[custom_vjp_call_p] = _batch_custom_vjp_call


batching_rules[custom_vjp_lin_p] = _forward_through_custom_vjp  # (jacfwd of a custom_vjp function: JAX's error)


# --- a custom function called under vmap (before it is traced into an equation) ---------------------
def _custom_call_under_vmap(trace: BatchTrace, fn: Any, args: tuple) -> Any:
    """JAX's ``BatchTrace.process_custom_jvp_call`` / ``process_custom_vjp_call``: the call moves one
    trace down as a new custom function, ``f`` batched, with the rules batched (each runs under
    vmap on the examples; outputs batched at the front). Below, a differentiating trace runs only
    the batched rule (``f`` is not traced for nothing), staging traces ``f`` once, and evaluation
    runs it once. (A named axis keeps the equation's batching rule: its collectives need the name.)"""
    if trace.axis_name is not None:
        return NotImplemented
    arguments = _Arguments(args, fn.nondiff_argnums)
    values, dims = zip(*map(trace.to_pair, arguments.leaves)) if arguments.leaves else ((), ())
    values, dims, size = list(values), list(dims), trace.axis_size
    if all(d is None for d in dims):  # (nothing batched: the call is the same for every example)
        return NotImplemented
    name = errors.function_name(fn.__wrapped__)
    out_tree: list = []

    def batched_f(*xs: Any) -> list:
        def example(*leaves: Any) -> list:
            out_leaves, tree = tree_util.flatten_for_trace(fn.__wrapped__(*arguments.full(leaves)))
            out_tree.append(tree)
            return [ensure_array(o) for o in out_leaves]
        return _fronted(example, size, xs, dims)

    batched_f.__name__ = name
    if isinstance(fn, custom_jvp):
        batched = custom_jvp(batched_f)

        def example_rule(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list, list]:
            outs, out_tangents, tree = _apply_jvp_rule(fn, name, arguments, primals, tangents, None, None)
            out_tree.append(tree)
            return outs, out_tangents

        rule = _batched_jvp(example_rule, size, dims)

        def batched_rule(primals: tuple, tangents: tuple) -> tuple[list, list]:
            given = [Zero(t.aval) if isinstance(t, SymbolicZero) else t for t in tangents]
            outs, out_tangents = rule(list(primals), given)
            return outs, [SymbolicZero(t.aval) if isinstance(t, Zero) else t for t in out_tangents]

        batched.defjvp(batched_rule, symbolic_zeros=True)
    else:
        rules = _BatchedVJPRules(_VJPRules(fn, name, arguments, None), size, dims)
        batched = custom_vjp(batched_f)

        def batched_fwd(*xs: Any) -> tuple[list, tuple]:
            outs, residuals = rules.fwd(list(xs))
            out_tree.append(rules.rules.out_tree)
            # (what this fwd learned travels to its bwd as a residual that is no array: kept as it is)
            return outs, (residuals, _Learned(rules.snapshot()))

        def batched_bwd(saved: tuple, cts: list) -> tuple:
            residuals, learned = saved
            in_avals = [batched_aval(aval(x), d, size) for x, d in zip(arguments.leaves, dims)]
            cts_in = learned.rules.bwd(residuals, cts, in_avals)
            return tuple(None if isinstance(ct, Zero) else ct for ct in cts_in)

        batched.defvjp(batched_fwd, batched_bwd)
    with set_current_trace(trace.parent):
        outs = batched(*values)
    return tree_util.tree_unflatten(out_tree[0], [trace.new(o, 0) for o in outs])


class _Learned:
    """Rules as one call of fwd left them, carried to its bwd (a leaf, never an array)."""

    def __init__(self, rules: Any) -> None:
        self.rules = rules


def _fronted(fun: Callable, axis_size: int, values: Sequence[Any], dims: Sequence[BatchDim]) -> list:
    """``fun`` (flat examples -> flat outputs) on the batched ``values``: every output batched at the front."""
    results, out_dims = batch_flat(fun, axis_size, values, dims)
    return [_at_front(axis_size, r, d) for r, d in zip(results, out_dims)]


custom_call_handlers[BatchTrace] = _custom_call_under_vmap
