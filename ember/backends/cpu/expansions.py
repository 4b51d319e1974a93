"""Rewrites into what this backend compiles well: convolutions and windowed reductions (before the
passes), products in the layout their users read (after them).

A convolution becomes a matrix product over patches ("im2col"): the input is moved to
``[batch, spatial..., features]``, padded (interior padding for input dilation), its
``sliding_windows`` taken and laid out as ``[groups, batch, positions..., window..., features]``
(one fused kernel writes them: the transposes, the padding and the windows are index arithmetic),
then one ``dot_general`` (the blocked product, batched over feature or batch groups) contracts
them with the kernel and a fused kernel puts the result in the output's layout. The input- and
kernel-gradient convolutions of ``grad`` and the grouped convolutions of ``vmap`` are
convolutions too, so they take the same path. Types accumulate as the reference's do (half
precision in float32, rounded once; integers wrap; booleans count true products): integer
products are fused loops rather than the blocked product.

A windowed reduction (``reduce_window`` sum, max, min) becomes a pad with the monoid's identity,
the sliding windows and one reduction over the window dimensions: a single fused kernel.

Complex max / min reductions and running max / min, whose results at NaNs and ties depend on the
order XLA evaluates them in (the reference's ``complex_reduce`` and ``complex_scan``), become that
order spelled out in slices, in-order reductions of at most ``TREE_WINDOW`` elements a dimension
and running ones of at most ``SCAN_BASE``, which kernels compute natively.

A product whose contracted dimensions all have size 1 (an outer product, batched: per-example
gradients) becomes a multiply of its operands broadcast to the result, and a sum over dimensions
of size 1 an add of the sum's zero: elementwise, so they fuse with what surrounds them.

Expanding before the passes lets them simplify what it leaves (identity transposes, conversions)
and lets fusion join the patches with their producers and the output layout with its consumers.
Sub-programs (loop bodies, branches, calls) are expanded too.

After the passes, ``transposed_products`` computes a product that only a transpose reads in the
transposed layout directly (the operands swapped), as the transpose rule of ``dot_general``
leaves them in gradients.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ember import dtypes, lax
from ember.backends.reference.dot import accumulation_dtype
from ember.backends.reference.reductions import SCAN_BASE, TREE_WINDOW
from ember.compiler.inline import splice
from ember.compiler.rewrite import SubprogramRewriter, Substitution, on_closed, rebuild
from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr
from ember.core.primitive import Primitive, RuleTable, abstract_eval_rules
from ember.core.staging import DebugInfo, trace_to_jaxpr
from ember.lax import convolution as conv, reductions as red, shapes as sh, special
from ember.lax.base import aval
from ember.lax.dot import dot_general_p


def expand(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with the equations that ``expansions`` has rules for replaced by what the rules
    trace, in its sub-programs too."""
    return on_closed(closed, _expand_jaxpr)


def _expand_jaxpr(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    subst = Substitution()
    eqns: list[Eqn] = []
    for eqn in jaxpr.eqns:
        eqn = subprograms(subst.apply(eqn))
        body = _expansion(eqn)
        if body is None:
            eqns.append(eqn)
            continue
        for var, atom in zip(eqn.outvars, splice(body.jaxpr, eqn.invars, eqns)):
            subst.bind(var, atom)
    return rebuild(jaxpr, eqns, subst.all(jaxpr.outvars))


def _expansion(eqn: Eqn) -> ClosedJaxpr | None:
    rule = expansions.get(eqn.primitive)
    avals = [a.aval for a in eqn.invars]
    if rule is None or not rule.applies(*avals, **eqn.params):
        return None
    multiple = eqn.primitive.multiple_results

    def body_fn(*xs: Any) -> list:
        outs = list(rule(*xs, **eqn.params)) if multiple else [rule(*xs, **eqn.params)]
        # (the equation's own output types, weak types included: what it feeds was traced with them)
        return [o if aval(o) == v.aval else lax.convert_element_type(o, v.aval.dtype, v.aval.weak_type)
                for o, v in zip(outs, eqn.outvars)]
    body = trace_to_jaxpr(body_fn, avals,
                          DebugInfo("expansion", eqn.primitive.name, [f"x{i}" for i in range(len(avals))], False))
    # (what a rule traces may hold equations with expansions too: a user primitive's lowering
    # that runs loops of other user primitives)
    return None if body.consts else expand(body)


class Expansion:
    """``fn(*operands, **params)`` in simpler primitives, where ``applies(*avals, **params)``."""

    def __init__(self, fn: Callable, applies: Callable[..., bool]) -> None:
        self.fn, self.applies = fn, applies

    def __call__(self, *args: Any, **params: Any) -> Any:
        return self.fn(*args, **params)


# --- convolution ---------------------------------------------------------------------------------
# A convolution whose patches would take more than twice this many bytes is computed a batch chunk
# at a time (patches of at most this size each), so that the product reads patches that are still
# in the cache rather than in memory: a ``lax.map`` over equal chunks of its images, one body
# (one patches kernel, one product) for them all. Measured on an AMD Zen 4 (32 MB L3, shared),
# 3x3 SAME float32, ember alone, interleaved rounds, chunks as separate convolutions (the same
# kernels but for their offsets): 32x28x28x32 -> 16 (patches 29 MB) 3.0-3.6 -> 1.8-2.0 ms in
# chunks of 8 images (7 MB), 2.1 in chunks of 16; 16x64x64x32 -> 64 (75 MB) 22.9 -> 15.0 ms in
# chunks of 1 (4.7 MB), 15.4 of 2; 32x28x28x16 -> 32 (15 MB, not chunked) 1.5-2.0 whole,
# 1.7-1.8 in chunks of 8 and 2.2-2.3 of 4; 32x14x14x32 -> 64 (7 MB) 1.3 whole, 1.65 in chunks of 8.
PATCH_CHUNK_BYTES = 8 << 20


def _conv(lhs: Any, rhs: Any, **params: Any) -> Any:
    """The convolution in batch chunks (see ``PATCH_CHUNK_BYTES``) where its patches are large, on
    its image batch (not a kernel gradient's, whose batch is contracted), without feature or batch
    groups; else at once."""
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    batch_inner = lhs_spec[0] > lhs_spec[1] and lhs_spec[0] == max(lhs_spec)
    n = lhs.aval.shape[lhs_spec[0]]
    out = abstract_eval_rules[conv.conv_general_dilated_p](lhs.aval, rhs.aval, **params)
    window = math.prod(rhs.aval.shape[d] for d in rhs_spec[2:])
    patch_bytes = (out.size // max(out.shape[out_spec[1]], 1) * window * rhs.aval.shape[rhs_spec[1]]
                   * np.dtype(accumulation_dtype(out.dtype)).itemsize)
    if (batch_inner or n < 2 or params["feature_group_count"] != 1 or params["batch_group_count"] != 1
            or patch_bytes <= 2 * PATCH_CHUNK_BYTES):
        return _conv_at_once(lhs, rhs, **params)
    most = max(1, n * PATCH_CHUNK_BYTES // patch_bytes)
    chunk = max(d for d in range(1, most + 1) if n % d == 0)  # (equal chunks: one body)
    # [batch, the rest in order] -> [chunks, chunk, the rest]; each chunk back in lhs's layout
    rest = [d for d in range(lhs.aval.ndim) if d != lhs_spec[0]]
    x = lax.transpose(lhs, (lhs_spec[0], *rest))
    x = lax.reshape(x, (n // chunk, chunk, *x.aval.shape[1:]))
    back = tuple(np.argsort((lhs_spec[0], *rest)))
    ys = lax.map(lambda xs: _conv_at_once(lax.transpose(xs, back), rhs, **params), x)
    # [chunks, out with chunk images at out_spec[0]] -> the chunks beside them, merged
    batch = out_spec[0] + 1
    order = (*range(1, batch), 0, *range(batch, ys.aval.ndim))
    return lax.reshape(lax.transpose(ys, order), out.shape)


def _conv_at_once(lhs: Any, rhs: Any, *, window_strides: tuple, padding: tuple, lhs_dilation: tuple,
                  rhs_dilation: tuple, dimension_numbers: conv.ConvDimensionNumbers, feature_group_count: int,
                  batch_group_count: int, precision: Any, preferred_element_type: Any) -> Any:
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    k = len(window_strides)
    out_dtype = np.dtype(preferred_element_type or lhs.aval.dtype)
    acc = accumulation_dtype(out_dtype)  # (as the reference: integers wrap, booleans count)
    x = lax.convert_element_type(lax.transpose(lhs, (lhs_spec[0], *lhs_spec[2:], lhs_spec[1])), acc)
    w = lax.convert_element_type(lax.transpose(rhs, (*rhs_spec[2:], rhs_spec[1], rhs_spec[0])), acc)
    *window, _, o = w.aval.shape
    groups = feature_group_count * batch_group_count  # (one of them is 1)
    # x: [batch groups, batch, spatial..., feature groups, features]. Unit group dimensions are
    # added and dropped by index maps (expand_dims / squeeze), not by reshapes, which would cost
    # the patches kernel a division per element.
    x = _split(_split(x, 0, batch_group_count), k + 2, feature_group_count)
    zero = np.zeros((), acc)
    x = lax.pad(x, zero, ((0, 0, 0), (0, 0, 0), *((lo, hi, d - 1) for (lo, hi), d in zip(padding, lhs_dilation)),
                          (0, 0, 0), (0, 0, 0)))
    ones = (1, 1)
    patches = conv.sliding_windows_p.bind(x, window_dimensions=ones + tuple(window) + ones,
                                          window_strides=ones + tuple(window_strides) + ones,
                                          window_dilation=ones + tuple(rhs_dilation) + ones)
    rank = k + 4  # [bg, nb, positions..., fg, cg, 1, 1, window..., 1, 1] -> [bg, nb, positions..., fg, cg, window...]
    patches = lax.squeeze(patches, (rank, rank + 1, rank + k + 2, rank + k + 3))
    window_dims, positions = tuple(range(k + 4, 2 * k + 4)), tuple(range(2, k + 2))
    # The patches' innermost dimension is the one of the input's two (batch, feature) that lies
    # innermost in memory, so that the kernel writing them reads the input along its rows: the
    # features in a forward convolution (NHWC), the batch in a kernel gradient's (where the
    # image batch is the contracted "feature" dimension).
    batch_inner = lhs_spec[0] > lhs_spec[1] and lhs_spec[0] == max(lhs_spec)
    if batch_inner:  # [bg, fg, window..., cg, positions..., nb]: the product reads it transposed
        patches = lax.transpose(patches, (0, k + 2, *window_dims, k + 3, *positions, 1))
        contract = tuple(range(2, k + 3))
    else:  # [bg, fg, nb, positions..., window..., cg]
        patches = lax.transpose(patches, (0, k + 2, 1, *positions, *window_dims, k + 3))
        contract = tuple(range(3 + k, 4 + 2 * k))
    w = _split(_split(w, k + 1, batch_group_count), k + 2, feature_group_count)  # [window..., cg, bg, fg, og]
    w = lax.transpose(w, (k + 1, k + 2, *range(k + 1), k + 3))  # [bg, fg, window..., cg, og]
    out = lax.dot_general(patches, w, ((contract, tuple(range(2, k + 3))), ((0, 1), (0, 1))))
    if batch_inner:  # [bg, fg, positions..., nb, og] -> [bg, fg, nb, positions..., og]
        out = lax.transpose(out, (0, 1, 2 + k, *range(2, 2 + k), 3 + k))
    if groups == 1:  # [bg, fg, nb, positions..., og] -> [nb, positions..., o]
        out = lax.squeeze(out, (0, 1))
    else:
        out = lax.transpose(out, (2, *range(3, 3 + k), 0, 1, 3 + k))
        out = lax.reshape(out, (*out.aval.shape[:1 + k], o))
    # [batch, positions..., features] -> the output's layout
    logical = (0, k + 1, *range(1, k + 1))  # where (batch, feature, spatial...) are now
    permutation = [0] * (k + 2)
    for j, position in enumerate(out_spec):
        permutation[position] = logical[j]
    out = lax.transpose(out, tuple(permutation))
    return lax.ne(out, np.zeros((), acc)) if out_dtype == dtypes.bool_ else lax.convert_element_type(out, out_dtype)


def _split(x: Any, axis: int, parts: int) -> Any:
    """Dimension ``axis`` of ``x`` as two, ``(parts, size // parts)``."""
    if parts == 1:
        return lax.expand_dims(x, (axis,))
    shape = x.aval.shape
    return lax.reshape(x, (*shape[:axis], parts, shape[axis] // parts, *shape[axis + 1:]))


# --- windowed reductions ------------------------------------------------------------------------
def _reduce_window(p: Primitive, reduce: Callable) -> Expansion:
    def applies(x: ShapedArray, **_: Any) -> bool:
        return x.dtype.kind in "iuf" or x.dtype == dtypes.bfloat16

    def fn(x: Any, *, window_dimensions: tuple, window_strides: tuple, padding: tuple, base_dilation: tuple,
           window_dilation: tuple) -> Any:
        dtype = x.aval.dtype
        if p is conv.reduce_window_sum_p and dtype in (dtypes.float16, dtypes.bfloat16):
            x = lax.convert_element_type(x, dtypes.float32)  # (summed in float32, rounded once)
        identity = np.asarray(conv.window_identity(p, x.aval.dtype), x.aval.dtype)
        padded = lax.pad(x, identity, tuple((lo, hi, d - 1) for (lo, hi), d in zip(padding, base_dilation)))
        windows = conv.sliding_windows_p.bind(padded, window_dimensions=window_dimensions,
                                              window_strides=window_strides, window_dilation=window_dilation)
        n = x.aval.ndim
        if math.prod(window_dimensions) == 1:
            out = lax.reshape(windows, windows.aval.shape[:n])
        else:
            out = reduce(windows, tuple(range(n, 2 * n)))
        return lax.convert_element_type(out, dtype)
    return Expansion(fn, applies)


# --- complex orderings ----------------------------------------------------------------------------
def _complex_identity(p: Primitive, dtype: np.dtype) -> np.ndarray:
    """XLA's starting value of a complex max (-inf + 0j) or min (inf + 0j)."""
    return np.asarray(-np.inf if p in (red.reduce_max_p, red.cummax_p) else np.inf, dtype)


def _in_order_complex_reduction(shape: tuple, axes: tuple) -> bool:
    """Whether XLA folds a complex max / min over ``axes`` of ``shape`` in order from the identity
    (what a kernel does): of at least two elements, every reduced dimension at most its tree window.
    One element is the element; longer dimensions are tree-reduced (``_complex_extreme``)."""
    sizes = [shape[d] for d in axes]
    return math.prod(sizes) >= 2 and all(n <= TREE_WINDOW for n in sizes)


def _tree_sum_applies(x: ShapedArray, *, axes: tuple, **params: Any) -> bool:
    """A floating sum that reduces a dimension other than the last, and keeps one, over a run of
    adjacent dimensions of more than ``TREE_WINDOW`` elements (a sum along the last dimension alone
    is split over vector lanes; a sum of everything, over parallel pieces:
    ``codegen._split_full_reduction``)."""
    if not dtypes.is_inexact(x.dtype) or tuple(axes) == (x.ndim - 1,) or len(set(axes)) == x.ndim:
        return False
    return any(n > TREE_WINDOW for n in _reduced_runs(x.shape, axes)[0])


def _reduced_runs(shape: tuple, axes: tuple) -> tuple[list[int], list[int]]:
    """``shape`` with each run of adjacent reduced dimensions as one, and those runs' positions."""
    reduced = set(axes)
    merged: list[int] = []
    runs: list[int] = []
    for d, n in enumerate(shape):
        if d in reduced and d - 1 in reduced:
            merged[-1] *= n
        else:
            if d in reduced:
                runs.append(len(merged))
            merged.append(n)
    return [merged[p] for p in runs], runs


def _tree_sum(x: Any, *, axes: tuple, **params: Any) -> Any:
    """A long floating sum in XLA's order of evaluation on the CPU, whose rounding is JAX's: each
    run of adjacent reduced dimensions as one, summed in windows of ``TREE_WINDOW`` (zeros padding
    it, split evenly, the extra one high), then the windows' sums the same way, in place (the kept
    dimensions stay where they are: a kernel still walks the last one contiguously). Folded in
    order, the sum of n elements rounds n times into one accumulator: the bias gradient of a
    convolution (n = batch x positions) strayed from JAX's by 1e-6 relative, which training
    amplified to 1e-3 in 15 steps."""
    shape = x.aval.shape
    sizes, runs = _reduced_runs(shape, axes)
    merged = [n for d, n in enumerate(shape) if d not in axes or d - 1 not in axes]
    for p, n in zip(runs, sizes):
        merged[p] = n
    y = lax.reshape(x, tuple(merged))
    zero = np.zeros((), x.aval.dtype)
    for p in runs:
        while merged[p] > TREE_WINDOW:
            n = merged[p]
            m = -(-n // TREE_WINDOW)
            low = (m * TREE_WINDOW - n) // 2
            if m * TREE_WINDOW != n:
                config = [(0, 0, 0)] * len(merged)
                config[p] = (low, m * TREE_WINDOW - n - low, 0)
                y = lax.pad(y, zero, config)
            y = lax.reshape(y, (*merged[:p], m, TREE_WINDOW, *merged[p + 1:]))
            y = red.reduce_sum_p.bind(y, axes=(p + 1,), **params)
            merged[p] = m
    return red.reduce_sum_p.bind(y, axes=tuple(runs), **params)


def _sum(x: Any, *, axes: tuple, **params: Any) -> Any:
    if axes and all(x.aval.shape[a] == 1 for a in axes):
        return _single_element_sum(x, axes=axes, **params)
    return _tree_sum(x, axes=axes, **params)


def _complex_extreme(p: Primitive) -> Expansion:
    """A complex max / min reduction in XLA's order: the reduced dimensions in windows of
    ``TREE_WINDOW`` (the padding split evenly, the extra one high), each window folded in order
    over its elements, then the windows' results reduced the same way. A window is a slice (the
    padding is never read: a fold from the identity skips it), so each is an in-order reduction."""
    def applies(x: ShapedArray, *, axes: tuple) -> bool:
        return dtypes.is_complex(x.dtype) and not _in_order_complex_reduction(x.shape, axes)

    def fn(x: Any, *, axes: tuple) -> Any:
        shape, dtype = x.aval.shape, x.aval.dtype
        kept = [d for d in range(len(shape)) if d not in axes]
        out_shape = tuple(shape[d] for d in kept)
        count = math.prod(shape[d] for d in axes)
        if count == 0:
            return lax.broadcast_in_dim(_complex_identity(p, dtype), out_shape, ())
        if count == 1:
            return lax.reshape(x, out_shape)
        y = lax.transpose(x, (*kept, *axes))
        # per reduced dimension, its windows in classes: (start, stop, windows) of a whole slice
        classes = []
        for n in (shape[d] for d in axes):
            w = min(n, TREE_WINDOW)
            m = -(-n // w)
            if m == 1:
                classes.append([(0, n, 1)])
                continue
            low = (m * w - n) // 2
            middle = [(w - low, (m - 1) * w - low, m - 2)] if m > 2 else []
            classes.append([(0, w - low, 1), *middle, ((m - 1) * w - low, n, 1)])
        k, r = len(axes), len(kept)

        def window_results(choice: tuple) -> Any:
            """The windows of one class per reduced dimension, each folded: [kept..., windows...]."""
            starts = [0] * r + [c[0] for c in choice]
            stops = list(out_shape) + [c[1] for c in choice]
            piece = lax.slice(y, starts, stops)
            split = sum(((c[2], (c[1] - c[0]) // c[2]) for c in choice), ())
            piece = lax.reshape(piece, (*out_shape, *split))
            windows, positions = tuple(r + 2 * i for i in range(k)), tuple(r + 2 * i + 1 for i in range(k))
            piece = lax.transpose(piece, (*range(r), *windows, *positions))
            return p.bind(piece, axes=tuple(range(r + k, r + 2 * k)))

        def grid(prefix: tuple) -> Any:
            if len(prefix) == k:
                return window_results(prefix)
            parts = [grid((*prefix, c)) for c in classes[len(prefix)]]
            return parts[0] if len(parts) == 1 else lax.concatenate(parts, r + len(prefix))
        return p.bind(grid(()), axes=tuple(range(r, r + k)))  # (expanded again while a dimension is long)
    return Expansion(fn, applies)


def _complex_running(p: Primitive) -> Expansion:
    """A complex running max / min in XLA's order where it is not a kernel's forward scan. Output
    ``i`` folds ``x[:i + 1]``, or reversed ``x[i:]``, in increasing index order from the identity:
    a reversed one of at most ``SCAN_BASE`` is an in-order reduction of each output's window
    (the identity in place of the elements before it, harmless at the front of a fold). A longer
    one is padded with the identity to rows of ``SCAN_BASE``, each row scanned, and each output
    combined (as ``lax.max`` / ``lax.min`` do: the row's value where it is lexicographically beyond,
    else the earlier rows') with the running value of the rows before it: their last, or reversed
    first, columns scanned the same way, shifted by one."""
    reduce = red.reduce_max_p if p is red.cummax_p else red.reduce_min_p
    combine = lax.max if p is red.cummax_p else lax.min

    def applies(x: ShapedArray, *, axis: int, reverse: bool) -> bool:
        return dtypes.is_complex(x.dtype) and (reverse or x.shape[axis] > SCAN_BASE)

    def fn(x: Any, *, axis: int, reverse: bool) -> Any:
        dtype, last = x.aval.dtype, x.aval.ndim - 1
        order = (*(d for d in range(last + 1) if d != axis), axis)  # the scanned axis last
        x = lax.transpose(x, order) if axis != last else x
        *lead, n = x.aval.shape
        k = len(lead)
        identity = _complex_identity(p, dtype)
        if n == 1:
            out = combine(lax.broadcast_in_dim(identity, x.aval.shape, ()), x)
        elif n <= SCAN_BASE:  # (reversed)
            square = (*lead, n, n)
            windows = lax.select(lax.ge(lax.broadcasted_iota(np.int32, square, k + 1),
                                        lax.broadcasted_iota(np.int32, square, k)),
                                 lax.broadcast_in_dim(x, square, (*range(k), k + 1)),
                                 lax.broadcast_in_dim(identity, square, ()))
            out = reduce.bind(windows, axes=(k + 1,))
        else:
            rows = -(-n // SCAN_BASE)
            zeros = ((0, 0, 0),) * k
            tiles = lax.reshape(lax.pad(x, identity, (*zeros, (0, rows * SCAN_BASE - n, 0))), (*lead, rows, SCAN_BASE))
            within = p.bind(tiles, axis=k + 1, reverse=reverse)
            edge = lax.index_in_dim(within, 0 if reverse else SCAN_BASE - 1, k + 1, keepdims=False)
            totals = p.bind(edge, axis=k, reverse=reverse)  # (expanded again while it is long)
            before = lax.pad(totals, identity, (*zeros, (-1, 1, 0) if reverse else (1, -1, 0)))
            out = combine(within, lax.broadcast_in_dim(before, within.aval.shape, tuple(range(k + 1))))
            out = lax.slice_in_dim(lax.reshape(out, (*lead, rows * SCAN_BASE)), 0, n, axis=k)
        return lax.transpose(out, tuple(np.argsort(order))) if axis != last else out
    return Expansion(fn, applies)


# --- products of one term ----------------------------------------------------------------------
def _single_term_applies(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers: Any, **params: Any) -> bool:
    """Every contracted dimension has size 1 (a product of one term: an outer product, batched),
    of real operands (a complex one is rounded as the blocked product rounds it)."""
    (lhs_contract, _), _ = dimension_numbers
    return (all(lhs.shape[d] == 1 for d in lhs_contract) and not dtypes.is_complex(lhs.dtype)
            and not dtypes.is_complex(rhs.dtype))


def _single_term(lhs: Any, rhs: Any, *, dimension_numbers: Any, preferred_element_type: Any, **params: Any) -> Any:
    """A product whose sum has one term is an elementwise multiply of the operands broadcast to the
    result (XLA's strength reduction of such dots, as ``vmap`` of ``grad`` leaves them for
    per-example gradients): one fused kernel with its producers and consumers instead of a
    product per batch element. Computed in the accumulation type, as the product is."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    acc = accumulation_dtype(np.dtype(preferred_element_type or lhs.aval.dtype))
    lhs_free = [d for d in range(lhs.aval.ndim) if d not in lhs_contract + lhs_batch]
    rhs_free = [d for d in range(rhs.aval.ndim) if d not in rhs_contract + rhs_batch]
    nb, nl = len(lhs_batch), len(lhs_free)
    out_shape = (*(lhs.aval.shape[d] for d in (*lhs_batch, *lhs_free)), *(rhs.aval.shape[d] for d in rhs_free))

    def spread(x: Any, batch: tuple, free: list, out_dims: range) -> Any:
        x = lax.transpose(lax.convert_element_type(x, acc), (*batch, *free, *(d for d in range(x.aval.ndim)
                                                                               if d not in (*batch, *free))))
        x = lax.reshape(x, x.aval.shape[:len(batch) + len(free)])  # (the contracted dimensions have size 1)
        return lax.broadcast_in_dim(x, out_shape, (*range(nb), *out_dims))
    return lax.mul(spread(lhs, lhs_batch, lhs_free, range(nb, nb + nl)),
                   spread(rhs, rhs_batch, rhs_free, range(nb + nl, len(out_shape))))


def _single_element_sum(x: Any, *, axes: tuple, **params: Any) -> Any:
    """A sum over dimensions of size 1 (as transposed products leave them) is its one element plus
    the sum's zero (-0.0 becomes +0.0, as in the reduction): elementwise, so it fuses; as a
    reduction its innermost loop would run once per element."""
    shape = tuple(d for i, d in enumerate(x.aval.shape) if i not in axes)
    return lax.add(lax.reshape(x, shape), np.zeros((), x.aval.dtype))


# --- products in the layout their users read --------------------------------------------------------
def transposed_products(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``transpose(dot_general(a, b))`` that swaps the free dimensions of the two operands, where
    nothing else reads the product, as ``dot_general(b, a)``: the transpose rule of a product
    leaves these (a weight's gradient computed as its transpose), and a kernel that reads a
    product transposed walks it a column at a time."""
    return on_closed(closed, _swap_jaxpr)


def _swap_jaxpr(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    uses: dict[int, int] = {}
    for eqn in jaxpr.eqns:
        for a in eqn.invars:
            uses[id(a)] = uses.get(id(a), 0) + 1
    for a in jaxpr.outvars:
        uses[id(a)] = uses.get(id(a), 0) + 1
    products = {id(e.outvars[0]): e for e in jaxpr.eqns if e.primitive is dot_general_p}
    swapped: set[int] = set()  # the ids of the products' equations that are dropped (swapped into a transpose's)
    eqns: list[Eqn] = []
    for eqn in jaxpr.eqns:
        eqn = subprograms(eqn)
        product = products.get(id(eqn.invars[0])) if eqn.primitive is sh.transpose_p else None
        if product is not None and uses[id(eqn.invars[0])] == 1 and _swaps_free_dimensions(product, eqn):
            (lc, rc), (lb, rb) = product.params["dimension_numbers"]
            params = {**product.params, "dimension_numbers": ((rc, lc), (rb, lb))}
            swapped.add(id(product))
            eqns.append(Eqn(dot_general_p, product.invars[::-1], params, eqn.outvars))
            continue
        eqns.append(eqn)
    if not swapped:
        return rebuild(jaxpr, eqns, jaxpr.outvars)
    return rebuild(jaxpr, [e for e in eqns if id(e) not in swapped], jaxpr.outvars)


def _swaps_free_dimensions(product: Eqn, transpose: Eqn) -> bool:
    (lc, rc), (lb, _) = product.params["dimension_numbers"]
    lhs, rhs = (a.aval.ndim for a in product.invars)
    nb, nl = len(lb), lhs - len(lb) - len(lc)
    nr = rhs - len(lb) - len(rc)
    swap = (*range(nb), *range(nb + nl, nb + nl + nr), *range(nb, nb + nl))
    return nl > 0 and nr > 0 and transpose.params["permutation"] == swap


expansions: RuleTable = RuleTable("expansions", {
    dot_general_p: Expansion(_single_term, _single_term_applies),
    red.reduce_sum_p: Expansion(_sum, lambda x, *, axes, **params: (bool(axes) and all(x.shape[a] == 1 for a in axes))
                                or _tree_sum_applies(x, axes=axes, **params)),
    conv.conv_general_dilated_p: Expansion(_conv, lambda *avals, **params: True),
    conv.reduce_window_sum_p: _reduce_window(conv.reduce_window_sum_p, lax.reduce_sum),
    conv.reduce_window_max_p: _reduce_window(conv.reduce_window_max_p, lax.reduce_max),
    conv.reduce_window_min_p: _reduce_window(conv.reduce_window_min_p, lax.reduce_min),
    red.reduce_max_p: _complex_extreme(red.reduce_max_p),
    red.reduce_min_p: _complex_extreme(red.reduce_min_p),
    red.cummax_p: _complex_running(red.cummax_p),
    red.cummin_p: _complex_running(red.cummin_p),
    # the incomplete gamma and beta functions: the loops the reference runs too (float32 and float64)
    **{p: Expansion(fn, lambda *avals: avals[0].dtype in (np.float32, np.float64))
       for p, fn in ((special.igamma_p, special.igamma_value), (special.igammac_p, special.igammac_value),
                     (special.betainc_p, special.betainc_value))},
})
