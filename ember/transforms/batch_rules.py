"""Batching rules of the array primitives: elementwise, shapes, reductions, sorting,
contractions, gather and scatter.

A rule receives ``(axis_size, values, dims, **params)`` (``dims[i]``: where operand
i's batch dimension is, or None) and runs in the parent trace. Where it can, a
rule leaves the batch dimension where it is and shifts the primitive's axes
around it (``_batched_axis``); otherwise it moves it to the front.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from ember import dtypes, lax
from ember.core.primitive import Primitive
from ember.lax import elementwise, indexing, parallel, reductions, shapes
from ember.lax.base import aval
from ember.lax.dot import dot_general_p
from ember.lax.indexing import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from ember.transforms.batching import BatchDim, batching_rules, collective_rules, move_batch_axis
from ember.transforms.tangents import add_any, add_any_p


def _batched_axis(axis: int, dim: int) -> int:
    """The axis of the batched value that is ``axis`` of one example."""
    return axis + (axis >= dim)


def _batched_axes(axes: Sequence[int], dim: int) -> tuple[int, ...]:
    return tuple(_batched_axis(a, dim) for a in axes)


def _after_front(axes: Sequence[int]) -> tuple[int, ...]:
    """Axes of one example, in a value whose batch dimension is at the front."""
    return tuple(a + 1 for a in axes)


def _example_shape(x: Any, dim: BatchDim) -> tuple[int, ...]:
    shape = aval(x).shape
    return shape if dim is None else shape[:dim] + shape[dim + 1:]


# --- elementwise ---------------------------------------------------------------------------------
def batch_elementwise(p: Primitive, axis_size: int, values: tuple, dims: tuple, **params: Any) -> tuple[Any, int]:
    """Operands of one shape, or rank-0 ones that broadcast implicitly (and, for the binary
    operations, operands of one rank whose size-1 dimensions broadcast).

    When every batched operand has its batch dimension at the same place and the
    unbatched ones are scalars, nothing moves. Otherwise batch dimensions go to the
    front, unbatched arrays get one of their own, and batched scalars (now vectors) are
    broadcast to the batched shape; size-1 dimensions stay for the operation to broadcast.
    """
    batch_dims = {d for d in dims if d is not None}
    batched_ranks = {aval(v).ndim for v, d in zip(values, dims) if d is not None}
    if len(batch_dims) == 1 and len(batched_ranks) == 1 and all(
            aval(v).ndim == 0 for v, d in zip(values, dims) if d is None):
        return p.bind(*values, **params), batch_dims.pop()
    examples = [s for s in (_example_shape(v, d) for v, d in zip(values, dims)) if s]
    example = tuple(next(iter(set(sizes) - {1}), 1) for sizes in zip(*examples)) if examples else ()
    shape = (axis_size,) + example
    operands = []
    for v, d in zip(values, dims):
        if d is None and aval(v).ndim and p in elementwise.SIZE_ONE:
            # an unbatched array gets a batch dimension of size 1, which the operation broadcasts
            # (its dimensions computed with NumPy, as JAX's: they print as np.int64)
            kept = tuple(np.arange(1, aval(v).ndim + 1))
            v = shapes.broadcast_in_dim_p.bind(v, shape=(1, *aval(v).shape), broadcast_dimensions=kept)
        elif d is not None or aval(v).ndim:
            v = move_batch_axis(v, d, axis_size)
            v = v if aval(v).ndim == len(shape) else lax.broadcast_in_dim(v, shape, (0,))
        operands.append(v)
    return p.bind(*operands, **params), 0


def _batch_clamp(axis_size: int, values: tuple, dims: tuple) -> tuple[Any, int]:
    lo, x, hi = values
    if dims[1] is None:  # batched bounds need an operand of their shape
        values, dims = (lo, move_batch_axis(x, None, axis_size), hi), (dims[0], 0, dims[2])
    return batch_elementwise(elementwise.clamp_p, axis_size, values, dims)


def _batch_bitcast(axis_size: int, values: tuple, dims: tuple, *, new_dtype: np.dtype) -> tuple[Any, int]:
    # A change of width adds or consumes a last dimension: keep the batch dimension out of its way.
    return lax.bitcast_convert_type(move_batch_axis(values[0], dims[0], axis_size), new_dtype), 0


batching_rules[elementwise.clamp_p] = _batch_clamp


def _batch_add_any(axis_size: int, values: tuple, dims: tuple, *, body: Any) -> tuple[Any, int]:
    """The sum of two batched (co)tangents, still ``add_any``: both with the batch in one place."""
    x, y = values
    if dims[0] == dims[1]:
        return add_any(x, y), dims[0]
    return add_any(move_batch_axis(x, dims[0], axis_size), move_batch_axis(y, dims[1], axis_size)), 0


batching_rules[add_any_p] = _batch_add_any
batching_rules[elementwise.bitcast_convert_type_p] = _batch_bitcast


# --- shapes ----------------------------------------------------------------------------------------
def _batch_broadcast_in_dim(axis_size: int, values: tuple, dims: tuple, *, shape: tuple,
                            broadcast_dimensions: tuple) -> tuple[Any, int]:
    x = move_batch_axis(values[0], dims[0], axis_size)
    return lax.broadcast_in_dim(x, (axis_size, *shape), (0, *_after_front(broadcast_dimensions))), 0


def _batch_reshape(axis_size: int, values: tuple, dims: tuple, *, new_sizes: tuple, dimensions: Any) -> tuple[Any, int]:
    return lax.reshape(move_batch_axis(values[0], dims[0], axis_size), (axis_size, *new_sizes)), 0


def _batch_transpose(axis_size: int, values: tuple, dims: tuple, *, permutation: tuple) -> tuple[Any, int]:
    [x], [d] = values, dims
    return lax.transpose(x, (d, *_batched_axes(permutation, d))), 0


def _batch_squeeze(axis_size: int, values: tuple, dims: tuple, *, dimensions: tuple) -> tuple[Any, int]:
    [x], [d] = values, dims
    return lax.squeeze(x, _batched_axes(dimensions, d)), d - sum(a < d for a in dimensions)


def _batch_rev(axis_size: int, values: tuple, dims: tuple, *, dimensions: tuple) -> tuple[Any, int]:
    [x], [d] = values, dims
    return lax.rev(x, _batched_axes(dimensions, d)), d


def _batch_slice(axis_size: int, values: tuple, dims: tuple, *, start_indices: tuple, limit_indices: tuple,
                 strides: Any) -> tuple[Any, int]:
    [x], [d] = values, dims

    def insert(xs: tuple, value: int) -> tuple:
        return xs[:d] + (value,) + xs[d:]

    return lax.slice(x, insert(start_indices, 0), insert(limit_indices, axis_size),
                     None if strides is None else insert(strides, 1)), d


def _batch_concatenate(axis_size: int, values: tuple, dims: tuple, *, dimension: int) -> tuple[Any, int]:
    return lax.concatenate([move_batch_axis(v, d, axis_size) for v, d in zip(values, dims)], dimension + 1), 0


def _batch_pad(axis_size: int, values: tuple, dims: tuple, *, padding_config: tuple) -> tuple[Any, int]:
    (x, padding_value), (xd, vd) = values, dims
    if vd is None:
        return lax.pad(x, padding_value, padding_config[:xd] + ((0, 0, 0),) + padding_config[xd:]), xd
    # One padding value per example: pad with zeros, then select it where the padding lies.
    x = move_batch_axis(x, xd, axis_size)
    config = ((0, 0, 0),) + padding_config
    padded = lax.pad(x, 0, config)
    inside = lax.pad(lax.broadcast_in_dim(np.bool_(True), aval(x).shape, ()), False, config)
    x_type = aval(x)
    fill = lax.convert_element_type(move_batch_axis(padding_value, vd, axis_size), x_type.dtype, x_type.weak_type)
    return lax.select(inside, padded, lax.broadcast_in_dim(fill, aval(padded).shape, (0,))), 0


def _index_vectors(axis_size: int, starts: Sequence[Any], dims: Sequence[BatchDim]) -> Any:
    """Scalar start indices (some batched) as one ``(axis_size, len(starts))`` index array."""
    kinds = {aval(s).dtype for s in starts}
    dtype = kinds.pop() if len(kinds) == 1 else dtypes.canonicalize_dtype(np.int64)
    columns = [lax.expand_dims(move_batch_axis(lax.convert_element_type(s, dtype), d, axis_size), (1,))
               for s, d in zip(starts, dims)]
    return lax.concatenate(columns, 1)


def _batch_dynamic_slice(axis_size: int, values: tuple, dims: tuple, *, slice_sizes: tuple) -> tuple[Any, int]:
    (x, *starts), (xd, *start_dims) = values, dims
    if all(d is None for d in start_dims):
        # (the primitive's starts are final, only clamped: lax must not wrap negative ones again)
        zero = lax.convert_element_type(0, aval(starts[0]).dtype) if starts else 0  # (starts share one type)
        return lax.dynamic_slice(x, starts[:xd] + [zero] + starts[xd:],
                                 slice_sizes[:xd] + (axis_size,) + slice_sizes[xd:], allow_negative_indices=False), xd
    # Per-example starts: a gather of one window per example (CLIP clamps starts as dynamic_slice does).
    window_dims = tuple(range(len(starts)))
    numbers = GatherDimensionNumbers(offset_dims=window_dims, collapsed_slice_dims=(), start_index_map=window_dims)
    return _batch_gather(axis_size, (x, _index_vectors(axis_size, starts, start_dims)), (xd, 0),
                         dimension_numbers=numbers, slice_sizes=slice_sizes, mode=GatherScatterMode.CLIP,
                         fill_value=None, indices_are_sorted=False, unique_indices=False)


def _batch_dynamic_update_slice(axis_size: int, values: tuple, dims: tuple) -> tuple[Any, int]:
    (x, update, *starts), (xd, ud, *start_dims) = values, dims
    if all(d is None for d in start_dims):
        zero = lax.convert_element_type(0, aval(starts[0]).dtype) if starts else 0  # (starts share one type)
        return lax.dynamic_update_slice(move_batch_axis(x, xd, axis_size), move_batch_axis(update, ud, axis_size),
                                        [zero, *starts], allow_negative_indices=False), 0
    # Per-example starts: a scatter of one window per example (CLIP clamps as dynamic_update_slice does).
    window_dims = tuple(range(len(starts)))
    numbers = ScatterDimensionNumbers(update_window_dims=window_dims, inserted_window_dims=(),
                                      scatter_dims_to_operand_dims=window_dims)
    return _batch_scatter(indexing.scatter_p, axis_size, (x, _index_vectors(axis_size, starts, start_dims), update),
                          (xd, 0, ud), dimension_numbers=numbers, mode=GatherScatterMode.CLIP,
                          indices_are_sorted=True, unique_indices=True)


batching_rules.update({
    shapes.broadcast_in_dim_p: _batch_broadcast_in_dim,
    shapes.reshape_p: _batch_reshape,
    shapes.transpose_p: _batch_transpose,
    shapes.squeeze_p: _batch_squeeze,
    shapes.rev_p: _batch_rev,
    shapes.slice_p: _batch_slice,
    shapes.concatenate_p: _batch_concatenate,
    shapes.pad_p: _batch_pad,
    shapes.dynamic_slice_p: _batch_dynamic_slice,
    shapes.dynamic_update_slice_p: _batch_dynamic_update_slice,
})


# --- reductions, cumulative reductions, sorting --------------------------------------------------
def _numpy_batched_axes(axes: Sequence[int], dim: int) -> tuple:
    """``_batched_axes`` as JAX's reductions compute them, with NumPy: NumPy integers (which
    print as ``np.int64(1)`` in a program's parameters, as JAX's do)."""
    return tuple(np.where(np.less(axes, dim), axes, np.add(axes, 1))) if len(axes) else ()


def _batch_reduction(p: Primitive):
    def rule(axis_size: int, values: tuple, dims: tuple, *, axes: tuple) -> tuple[Any, int]:
        [x], [d] = values, dims
        return p.bind(x, axes=_numpy_batched_axes(axes, d)), d - sum(a < d for a in axes)

    return rule


def _batch_arg_reduction(p: Primitive):
    def rule(axis_size: int, values: tuple, dims: tuple, *, axis: int, index_dtype: np.dtype) -> tuple[Any, int]:
        [x], [d] = values, dims
        return p.bind(x, axis=_numpy_batched_axes((axis,), d)[0], index_dtype=index_dtype), d - (axis < d)

    return rule


def _batch_cumulative(p: Primitive):
    def rule(axis_size: int, values: tuple, dims: tuple, *, axis: int, reverse: bool) -> tuple[Any, int]:
        [x], [d] = values, dims
        return p.bind(x, axis=_batched_axis(axis, d), reverse=reverse), d

    return rule


def _batch_sort(axis_size: int, values: tuple, dims: tuple, *, dimension: int, **params: Any) -> tuple[list, list]:
    batch_dims = set(dims)
    if len(batch_dims) == 1:  # every operand batched at the same place
        d = batch_dims.pop()
        return reductions.sort_p.bind(*values, dimension=_batched_axis(dimension, d), **params), [d] * len(values)
    operands = [move_batch_axis(v, d, axis_size) for v, d in zip(values, dims)]
    return reductions.sort_p.bind(*operands, dimension=dimension + 1, **params), [0] * len(values)


def _batch_top_k(axis_size: int, values: tuple, dims: tuple, *, k: int, axis: int) -> tuple[list, list]:
    [x], [d] = values, dims
    return reductions.top_k_p.bind(x, k=k, axis=_batched_axis(axis, d)), [d, d]


batching_rules.update({p: _batch_reduction(p) for p in reductions.REDUCTIONS})
batching_rules.update({p: _batch_cumulative(p) for p in reductions.CUMULATIVE})
batching_rules.update({
    reductions.argmax_p: _batch_arg_reduction(reductions.argmax_p),
    reductions.argmin_p: _batch_arg_reduction(reductions.argmin_p),
    reductions.sort_p: _batch_sort,
    reductions.top_k_p: _batch_top_k,
})


# --- dot_general -----------------------------------------------------------------------------------
def _batch_dot_general(axis_size: int, values: tuple, dims: tuple, *, dimension_numbers: tuple,
                       **params: Any) -> tuple[Any, int]:
    """Both operands batched: the batch axis becomes a dot batch dimension (the first one, so it
    leads the result). One operand batched: it is a free dimension of that operand."""
    (lhs, rhs), (ld, rd) = values, dims
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    if ld is not None and rd is not None:
        lhs, rhs = move_batch_axis(lhs, ld, axis_size), move_batch_axis(rhs, rd, axis_size)
        numbers = ((_after_front(lhs_contract), _after_front(rhs_contract)),
                   ((0, *_after_front(lhs_batch)), (0, *_after_front(rhs_batch))))
        return dot_general_p.bind(lhs, rhs, dimension_numbers=numbers, **params), 0
    if ld is not None:
        lhs_contract, lhs_batch = _batched_axes(lhs_contract, ld), _batched_axes(lhs_batch, ld)
        lhs_free = [a for a in range(aval(lhs).ndim) if a not in lhs_contract + lhs_batch]
        out_dim = len(lhs_batch) + lhs_free.index(ld)
    else:
        rhs_contract, rhs_batch = _batched_axes(rhs_contract, rd), _batched_axes(rhs_batch, rd)
        rhs_free = [a for a in range(aval(rhs).ndim) if a not in rhs_contract + rhs_batch]
        num_lhs_free = aval(lhs).ndim - len(lhs_contract) - len(lhs_batch)
        out_dim = len(rhs_batch) + num_lhs_free + rhs_free.index(rd)
    numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))
    return dot_general_p.bind(lhs, rhs, dimension_numbers=numbers, **params), out_dim


batching_rules[dot_general_p] = _batch_dot_general


# --- gather / scatter --------------------------------------------------------------------------------
def _batch_gather(axis_size: int, values: tuple, dims: tuple, *, dimension_numbers: GatherDimensionNumbers,
                  slice_sizes: tuple, **params: Any) -> tuple[Any, int]:
    """Batched indices gain a leading batch dimension (the result's first); a batched operand
    is one more window dimension when the indices are shared, else an operand batching
    dimension that pairs with the indices' (JAX's ``operand_batching_dims``)."""
    (operand, indices), (od, idim) = values, dims
    dn = dimension_numbers
    if idim is None:
        operand = move_batch_axis(operand, od, axis_size)
        dn = GatherDimensionNumbers(
            offset_dims=(0, *_after_front(dn.offset_dims)),
            collapsed_slice_dims=_after_front(dn.collapsed_slice_dims),
            start_index_map=_after_front(dn.start_index_map),
            operand_batching_dims=_after_front(dn.operand_batching_dims),
            start_indices_batching_dims=dn.start_indices_batching_dims)
        slice_sizes = (axis_size, *slice_sizes)
    elif od is None:
        indices = move_batch_axis(indices, idim, axis_size)
        dn = dn._replace(offset_dims=_after_front(dn.offset_dims),
                         start_indices_batching_dims=_after_front(dn.start_indices_batching_dims))
    else:
        operand, indices = move_batch_axis(operand, od, axis_size), move_batch_axis(indices, idim, axis_size)
        dn = GatherDimensionNumbers(
            offset_dims=_after_front(dn.offset_dims),
            collapsed_slice_dims=_after_front(dn.collapsed_slice_dims),
            start_index_map=_after_front(dn.start_index_map),
            operand_batching_dims=(0, *_after_front(dn.operand_batching_dims)),
            start_indices_batching_dims=(0, *_after_front(dn.start_indices_batching_dims)))
        slice_sizes = (1, *slice_sizes)
    return indexing.gather_p.bind(operand, indices, dimension_numbers=dn, slice_sizes=slice_sizes, **params), 0


def _batch_scatter(p: Primitive, axis_size: int, values: tuple, dims: tuple, *,
                   dimension_numbers: ScatterDimensionNumbers, **params: Any) -> tuple[Any, int]:
    """Every example updates its own copy of the operand (batched at the front). Shared indices:
    the batch axis is one more window dimension; batched ones: an operand batching dimension."""
    (operand, indices, updates), (od, idim, ud) = values, dims
    dn = dimension_numbers
    operand, updates = move_batch_axis(operand, od, axis_size), move_batch_axis(updates, ud, axis_size)
    if idim is None:
        dn = ScatterDimensionNumbers(
            update_window_dims=(0, *_after_front(dn.update_window_dims)),
            inserted_window_dims=_after_front(dn.inserted_window_dims),
            scatter_dims_to_operand_dims=_after_front(dn.scatter_dims_to_operand_dims),
            operand_batching_dims=_after_front(dn.operand_batching_dims),
            scatter_indices_batching_dims=dn.scatter_indices_batching_dims)
    else:
        indices = move_batch_axis(indices, idim, axis_size)
        dn = ScatterDimensionNumbers(
            update_window_dims=_after_front(dn.update_window_dims),
            inserted_window_dims=_after_front(dn.inserted_window_dims),
            scatter_dims_to_operand_dims=_after_front(dn.scatter_dims_to_operand_dims),
            operand_batching_dims=(0, *_after_front(dn.operand_batching_dims)),
            scatter_indices_batching_dims=(0, *_after_front(dn.scatter_indices_batching_dims)))
    return p.bind(operand, indices, updates, dimension_numbers=dn, **params), 0


batching_rules[indexing.gather_p] = _batch_gather
batching_rules.update({p: functools.partial(_batch_scatter, p) for p in (
    indexing.scatter_p, indexing.scatter_add_p, indexing.scatter_sub_p, indexing.scatter_mul_p, indexing.scatter_min_p,
    indexing.scatter_max_p)})


# --- collectives (ember.lax.parallel) --------------------------------------------------------------
# ``collective_rules``: the trace binds the collective's axis (``name``): compute across the batch.
# ``batching_rules``: another trace binds it: the collective applies to every example alike.
def _front(x: Any, dim: BatchDim, n: int) -> Any:
    return move_batch_axis(x, dim, n, 0)


def _times(x: Any, n: int) -> Any:
    return lax.mul(x, np.array(n, dtype=aval(x).dtype))


def _collective_reduction(p: Primitive, reduce: Any, unbatched: Any) -> Any:
    def rule(n: int, name: Any, values: Sequence[Any], dims: Sequence[BatchDim], *, axes: tuple, **params: Any):
        (x,), (d,) = values, dims
        out = unbatched(x, n) if d is None else reduce(x, (d,))
        rest = tuple(a for a in axes if a != name)
        return (p.bind(out, axes=rest, **params) if rest else out), None
    return rule


collective_rules[parallel.psum_p] = _collective_reduction(parallel.psum_p, lax.reduce_sum, _times)
collective_rules[parallel.pmax_p] = _collective_reduction(parallel.pmax_p, lax.reduce_max, lambda x, n: x)
collective_rules[parallel.pmin_p] = _collective_reduction(parallel.pmin_p, lax.reduce_min, lambda x, n: x)


def _all_gather_here(n: int, name: Any, values: Sequence[Any], dims: Sequence[BatchDim], *, axes: tuple,
                     axis_size: int, axis: int) -> tuple[Any, BatchDim]:
    """The examples become data: stacked at ``axis`` and merged with it (every example gets the same)."""
    v = move_batch_axis(values[0], dims[0], n, axis)
    shape = aval(v).shape
    return lax.reshape(v, shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:]), None


def _psum_scatter_here(n: int, name: Any, values: Sequence[Any], dims: Sequence[BatchDim], *, axes: tuple,
                       axis_size: int, scatter_dimension: int) -> tuple[Any, BatchDim]:
    """The sum over the examples, whose block ``k`` along the dimension goes to example ``k``."""
    (x,), (d,) = values, dims
    total = _times(x, n) if d is None else lax.reduce_sum(x, (d,))
    shape, sd = aval(total).shape, scatter_dimension
    split = lax.reshape(total, shape[:sd] + (n, shape[sd] // n) + shape[sd + 1:])
    return move_batch_axis(split, sd, n, 0), 0


def _all_to_all_here(n: int, name: Any, values: Sequence[Any], dims: Sequence[BatchDim], *, axes: tuple,
                     axis_size: int, split_axis: int, concat_axis: int) -> tuple[Any, BatchDim]:
    """Example ``k`` receives block ``k`` (along the split axis) of every example ``j``, in order of
    ``j`` along the concat axis: split, bring ``k`` to the front and ``j`` before the concat axis, merge."""
    v = _front(values[0], dims[0], n)
    shape = aval(v).shape
    ex = shape[1:]
    s, c = split_axis, concat_axis
    v = lax.reshape(v, (n,) + ex[:s] + (n, ex[s] // n) + ex[s + 1:])
    # labels of v's axes: "j", the example's axes before s, "k", s (now of size ex[s] // n), the rest
    labels = ["j"] + list(range(s)) + ["k"] + list(range(s, len(ex)))
    order: list = ["k"]
    for i in range(len(ex)):
        if i == c:
            order.append("j")
        order.append(i)
    v = lax.transpose(v, [labels.index(lab) for lab in order])
    moved = aval(v).shape
    at = 1 + c  # where "j" is now; it merges with the concat axis after it
    return lax.reshape(v, moved[:at] + (moved[at] * moved[at + 1],) + moved[at + 2:]), 0


def _ppermute_here(n: int, name: Any, values: Sequence[Any], dims: Sequence[BatchDim], *, axes: tuple,
                   perm: tuple) -> tuple[Any, BatchDim]:
    """Example ``dst`` gets example ``src``'s value; one that receives nothing gets zeros."""
    v = _front(values[0], dims[0], n)
    source = {dst: src for src, dst in perm}
    a = aval(v)
    zero = lax.broadcast_in_dim(np.array(0, a.dtype), (1,) + a.shape[1:], ()) if len(source) < n else None
    rows = [lax.index_in_dim(v, source[k]) if k in source else zero for k in range(n)]
    return lax.concatenate(rows, 0), 0


def _axis_index_here(n: int, name: Any, values: Sequence[Any], dims: Sequence[BatchDim], *,
                     axes: tuple) -> tuple[Any, BatchDim]:
    return lax.iota(np.int32, n), 0


collective_rules[parallel.all_gather_p] = _all_gather_here
collective_rules[parallel.psum_scatter_p] = _psum_scatter_here
collective_rules[parallel.all_to_all_p] = _all_to_all_here
collective_rules[parallel.ppermute_p] = _ppermute_here
collective_rules[parallel.axis_index_p] = _axis_index_here


def _collective_elsewhere(p: Primitive, shifted: tuple = ()) -> Any:
    """A collective over an outer trace's axis, on a batched operand: per example, so the batch
    dimension goes to the front and the collective's own axes move one place."""
    def rule(n: int, values: Sequence[Any], dims: Sequence[BatchDim], **params: Any) -> tuple[Any, BatchDim]:
        (x,), (d,) = values, dims
        if not shifted:
            return p.bind(x, **params), d
        params = {k: v + 1 if k in shifted else v for k, v in params.items()}
        return p.bind(_front(x, d, n), **params), 0
    return rule


for _p in (parallel.psum_p, parallel.pmax_p, parallel.pmin_p, parallel.ppermute_p):
    batching_rules[_p] = _collective_elsewhere(_p)
batching_rules[parallel.all_gather_p] = _collective_elsewhere(parallel.all_gather_p, ("axis",))
batching_rules[parallel.psum_scatter_p] = _collective_elsewhere(parallel.psum_scatter_p, ("scatter_dimension",))
batching_rules[parallel.all_to_all_p] = _collective_elsewhere(parallel.all_to_all_p, ("split_axis", "concat_axis"))
# (axis_index has no operands, so an outer trace's rule never sees it batched: it only passes through.)
batching_rules[parallel.axis_index_p] = lambda n, values, dims, *, axes: (parallel.axis_index_p.bind(axes=axes), None)
