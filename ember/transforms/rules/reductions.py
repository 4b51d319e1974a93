"""Derivatives of reductions, cumulative reductions, sorting and top-k.

Where the derivative of a primitive is awkward to write directly (products with
zeros, running maxima, log-sum-exp) the rule differentiates an implementation
of the primitive in simpler primitives instead (``jvp_of``): a pairwise product
tree for ``reduce_prod`` and a log-depth prefix scan for the cumulative ones.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import dtypes, lax
from ember.lax import reductions as red
from ember.lax.base import aval
from ember.lax.indexing import GatherDimensionNumbers, GatherScatterMode
from ember.transforms.jvp import deflinear, defzero, jvp_of, jvp_rules
from ember.transforms.rules.elementwise import const
from ember.transforms.tangents import Zero
from ember.transforms.transpose import transpose_rules

defzero(red.reduce_and_p, red.reduce_or_p, red.reduce_xor_p, red.argmax_p, red.argmin_p)
deflinear(red.reduce_sum_p)
deflinear(red.cumsum_p)


def _reduce_sum_transpose(ct: Any, x: Any, *, axes: tuple) -> list:
    kept = tuple(d for d in range(x.aval.ndim) if d not in axes)
    return [lax.broadcast_in_dim(ct, x.aval.shape, kept)]


transpose_rules[red.reduce_sum_p] = _reduce_sum_transpose
transpose_rules[red.cumsum_p] = lambda ct, x, *, axis, reverse: [red.cumsum(ct, axis, not reverse)]


# --- max / min: the tangent at the chosen elements, averaged over ties ------------------------------
def _chooser_jvp(p: Any) -> Callable:
    def rule(primals: tuple, tangents: tuple, *, axes: tuple) -> tuple:
        [x], [t] = primals, tangents
        ans = p.bind(x, axes=axes)
        # ans with size-1 dimensions at the reduced axes, which the comparison broadcasts (as JAX)
        with_axes = lax.reshape(ans, tuple(1 if d in axes else n for d, n in enumerate(aval(x).shape)))
        chosen = lax.convert_element_type(lax.eq(x, with_axes), aval(x).dtype)
        count = lax.reduce_sum(chosen, axes)
        return ans, lax.div(lax.reduce_sum(lax.mul(t, chosen), axes), count)
    return rule


jvp_rules[red.reduce_max_p] = _chooser_jvp(red.reduce_max_p)
jvp_rules[red.reduce_min_p] = _chooser_jvp(red.reduce_min_p)


# --- prod: a pairwise product tree (exact with zeros, and differentiable again) ---------------------
def _product_tree(x: Any, *, axes: tuple) -> Any:
    a = aval(x)
    kept = [d for d in range(a.ndim) if d not in axes]
    kept_shape = tuple(a.shape[d] for d in kept)
    n = int(np.prod([a.shape[d] for d in axes], dtype=np.int64))
    x = lax.reshape(lax.transpose(x, tuple(kept) + tuple(axes)), kept_shape + (n,))
    rank = len(kept_shape) + 1
    while n > 1:
        if n % 2:
            x = lax.pad(x, const(x, 1.0), [(0, 0, 0)] * (rank - 1) + [(0, 1, 0)])
            n += 1
        evens = lax.slice(x, (0,) * rank, kept_shape + (n,), (1,) * (rank - 1) + (2,))
        odds = lax.slice(x, (0,) * (rank - 1) + (1,), kept_shape + (n,), (1,) * (rank - 1) + (2,))
        x, n = lax.mul(evens, odds), n // 2
    return lax.reshape(x, kept_shape)


def _reduce_prod_jvp(primals: tuple, tangents: tuple, *, axes: tuple) -> tuple:
    [x] = primals
    if any(aval(x).shape[d] == 0 for d in axes):  # an empty product is the constant 1
        ans = red.reduce_prod_p.bind(x, axes=axes)
        return ans, Zero(aval(ans))
    return jvp_of(_product_tree)(primals, tangents, axes=axes)


jvp_rules[red.reduce_prod_p] = _reduce_prod_jvp


# --- cumulative reductions: JAX's rule, the jvp of an associative scan --------------------------------
# (its combine tree decides how tied elements share a derivative, so it is the same tree as JAX's)
def _logaddexp(a: Any, b: Any) -> Any:
    delta = lax.sub(a, b)
    stable = lax.add(lax.max(a, b), lax.log1p(lax.exp(lax.neg(lax.abs(delta)))))
    return lax.select(lax.ne(delta, delta), lax.add(a, b), stable)  # delta is NaN for equal infinities


def _logaddexp_with_tangents(a: tuple, b: tuple) -> tuple:
    """log(e^a + e^b) and its tangent ``ta e^(a - out) + tb e^(b - out)``, +inf read as 0 in the
    exponents (JAX's rule for logaddexp): tied operands share the tangent equally, which
    differentiating the max inside the stable formula would not give."""
    (a, ta), (b, tb) = a, b
    out = _logaddexp(a, b)

    def finite(v: Any) -> Any:
        return lax.select(lax.eq(v, const(v, np.inf)), const(v, 0.0), v)

    def weight(v: Any) -> Any:
        return lax.exp(lax.sub(finite(v), finite(out)))

    return out, lax.add(lax.mul(ta, weight(a)), lax.mul(tb, weight(b)))


def _cumlogsumexp_jvp(primals: tuple, tangents: tuple, *, axis: int, reverse: bool) -> tuple:
    [x], [t] = primals, tangents
    _, out_t = lax.associative_scan(_logaddexp_with_tangents, (x, t), reverse=reverse, axis=axis)
    return red.cumlogsumexp_p.bind(x, axis=axis, reverse=reverse), out_t


def _scan_of(combine: Callable) -> Callable:
    return lambda x, *, axis, reverse: lax.associative_scan(combine, x, reverse=reverse, axis=axis)


jvp_rules[red.cumprod_p] = jvp_of(_scan_of(lax.mul))
jvp_rules[red.cummax_p] = jvp_of(_scan_of(lax.max))
jvp_rules[red.cummin_p] = jvp_of(_scan_of(lax.min))
jvp_rules[red.cumlogsumexp_p] = _cumlogsumexp_jvp


# --- sort and top_k: tangents follow their elements ---------------------------------------------------
def take_along_axis(x: Any, indices: Any, axis: int) -> Any:
    """``x[..., indices, ...]`` along ``axis`` with ``indices`` shaped like the result (a batched gather)."""
    rank = aval(x).ndim
    others = tuple(d for d in range(rank) if d != axis)
    dnums = GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(axis,), start_index_map=(axis,),
                                   operand_batching_dims=others, start_indices_batching_dims=others)
    return lax.gather(x, lax.expand_dims(indices, (rank,)), dnums, (1,) * rank, mode=GatherScatterMode.CLIP)


def _sort_jvp(primals: tuple, tangents: tuple, *, dimension: int, is_stable: bool, num_keys: int) -> tuple:
    shape = aval(primals[0]).shape
    positions = lax.broadcasted_iota(dtypes.int32, shape, dimension)
    *outs, permutation = red.sort_p.bind(*primals, positions, dimension=dimension, is_stable=is_stable,
                                         num_keys=num_keys)
    out_tangents = [Zero(aval(o)) if isinstance(t, Zero) else take_along_axis(t, permutation, dimension)
                    for o, t in zip(outs, tangents)]
    return outs, out_tangents


def _top_k_jvp(primals: tuple, tangents: tuple, *, k: int, axis: int) -> tuple:
    [x], [t] = primals, tangents
    values, indices = red.top_k_p.bind(x, k=k, axis=axis)
    return [values, indices], [take_along_axis(t, indices, axis), Zero(aval(indices))]


jvp_rules[red.sort_p] = _sort_jvp
jvp_rules[red.top_k_p] = _top_k_jvp
