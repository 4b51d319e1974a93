"""``lax.associative_scan``: an inclusive prefix scan with an associative operator, as a
parallel-prefix network of strided slices, combines and interleaves (no primitive, no loop).

For n elements it makes O(log n) levels of batched ``fn`` calls (about 2n combines in all),
so it is the tool when ``fn`` is cheap and vectorized and ``lax.scan``'s n sequential steps
are the bottleneck. Built from ordinary lax ops, it works eagerly and under jit, vmap and grad.
Called eagerly, the network is traced into one program, bound as a ``jit`` call: eager
programs compile once per fingerprint (``ember.runtime.eager``) instead of running op by op.
"""
from __future__ import annotations

from typing import Any, Callable

from ember import errors, tree_util
from ember.config import config
from ember.core.calls import CallName, jit_p
from ember.core.staging import DebugInfo, consts_as_inputs, trace_to_jaxpr
from ember.core.trace import is_tracing
from ember.lax import shapes
from ember.lax.base import aval, canonical_axes

__all__ = ["associative_scan"]


def _interleave(evens: Any, odds: Any, axis: int) -> Any:
    """``[e0, o0, e1, o1, ...]`` along ``axis``; ``evens`` has as many elements as ``odds`` or one more."""
    n_evens, n_odds = aval(evens).shape[axis], aval(odds).shape[axis]
    if n_evens > n_odds:  # pad the odds with a placeholder that is sliced off at the end
        odds = shapes.concatenate([odds, shapes.slice_in_dim(evens, n_evens - 1, n_evens, axis=axis)], axis)
    pairs = shapes.concatenate([shapes.expand_dims(evens, (axis + 1,)), shapes.expand_dims(odds, (axis + 1,))],
                               axis + 1)
    shape = aval(evens).shape
    merged = shapes.reshape(pairs, shape[:axis] + (2 * n_evens,) + shape[axis + 1:])
    return shapes.slice_in_dim(merged, 0, n_evens + n_odds, axis=axis)


def associative_scan(fn: Callable, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """The inclusive scan ``[x0, fn(x0, x1), fn(fn(x0, x1), x2), ...]`` of ``elems`` along ``axis``.

    ``elems`` is a pytree of arrays that share the size of ``axis``. ``fn(a, b)`` takes two
    pytrees of that structure, each leaf a slice of many elements along ``axis``, and must be
    associative (not necessarily commutative) and vectorized over those slices. ``reverse``
    scans from the end, as JAX does: ``result[i] = fn(...fn(x[n-1], x[n-2])..., x[i])``.
    """
    leaves, treedef = tree_util.tree_flatten(elems)
    if not leaves:
        return elems
    axis = canonical_axes(axis, aval(leaves[0]).ndim)[0]
    sizes = [aval(leaf).shape[axis] if axis < aval(leaf).ndim else None for leaf in leaves]
    if len(set(sizes)) != 1:
        raise ValueError("Array inputs to associative_scan must have the same first dimension. "
                         f"(saw: {[aval(leaf).shape for leaf in leaves]})")

    def combine(a: list, b: list) -> list:
        out = fn(tree_util.tree_unflatten(treedef, a), tree_util.tree_unflatten(treedef, b))
        return tree_util.tree_leaves(out)

    def every_other(xs: list, start: int, stop: int | None = None) -> list:
        return [shapes.slice_in_dim(x, start, stop, stride=2, axis=axis) for x in xs]

    def scan(xs: list) -> list:
        n = aval(xs[0]).shape[axis]
        if n < 2:
            return xs
        # Scan the pairwise combinations: that gives the prefixes ending at odd positions.
        odd_prefixes = scan(combine(every_other(xs, 0, n - 1), every_other(xs, 1)))
        # Each even position i > 0 is the odd prefix before it combined with element i.
        before_evens = [shapes.slice_in_dim(p, 0, (n - 1) // 2, axis=axis) for p in odd_prefixes]
        even_prefixes = combine(before_evens, every_other(xs, 2))
        even_prefixes = [shapes.concatenate([shapes.slice_in_dim(x, 0, 1, axis=axis), p], axis)
                         for x, p in zip(xs, even_prefixes)]
        return [_interleave(e, o, axis) for e, o in zip(even_prefixes, odd_prefixes)]

    def whole(*leaves: Any) -> list:
        if reverse:
            leaves = tuple(shapes.rev(leaf, (axis,)) for leaf in leaves)
        scanned = scan(list(leaves))
        return [shapes.rev(leaf, (axis,)) for leaf in scanned] if reverse else scanned

    if is_tracing() or config.disable_jit:
        return tree_util.tree_unflatten(treedef, whole(*leaves))
    closed = trace_to_jaxpr(whole, [aval(leaf) for leaf in leaves],
                            DebugInfo("lax.associative_scan", errors.function_name(fn, "fn"),
                                      [f"elems[{i}]" for i in range(len(leaves))], static_hint=False))
    [program], consts = consts_as_inputs([closed])
    return tree_util.tree_unflatten(treedef, jit_p.bind(*consts, *leaves, jaxpr=program,
                                                        name=CallName("associative_scan")))
