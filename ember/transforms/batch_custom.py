"""Batching rules of ``custom_jvp`` / ``custom_vjp`` calls.

The batched call keeps the user's derivative rules, so ``grad(vmap(f))`` still
differentiates ``f`` by them: its function is batched like a nested ``jit``,
and its rules are wrapped to run under ``vmap`` on the examples when
differentiation calls them. Every output of a batched call is batched at the
front, so the wrapped rules know where the tangents and cotangents of the
outputs keep their batch dimension.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember import lax
from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr
from ember.transforms.batching import BatchDim, batch_flat, batch_jaxpr, batched_aval, batching_rules, move_batch_axis
from ember.transforms.custom import SymbolicZero, custom_jvp_call_p, custom_vjp_call_p
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
