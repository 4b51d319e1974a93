"""JAX's ``lax`` functions that are compositions of ember's primitives: shape helpers (``split``,
``stack``, ``unstack``, ``tile``, ``collapse``, ``broadcast_like``, ``broadcast_shapes``), the
general ``reduce`` (any computation, any number of operands), ``clz``, ``empty``, ``dtype`` and
``optimization_barrier``.

They add no primitive: what they build is what a user could write with ``lax``; the passes and
the backends see the primitives they are made of.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ember import dtypes, tree_util
from ember.core.array import ensure_array
from ember.lax import elementwise, reductions
from ember.lax.base import aval, canonical_axes, shape_tuple
from ember.lax.control_flow import fori_loop
from ember.lax.creation import full
from ember.lax.shapes import (
    broadcast_in_dim,
    concatenate,
    dynamic_index_in_dim,
    expand_dims,
    index_in_dim,
    reshape,
    slice_in_dim,
    transpose,
)

__all__ = ["broadcast_like", "broadcast_shapes", "clz", "collapse", "dtype", "empty", "optimization_barrier",
           "reduce", "split", "stack", "tile", "unstack"]


def dtype(x: Any) -> np.dtype:
    """The canonical dtype of ``x`` (an array, a scalar, or a dtype-like): float32 for 1.0."""
    return dtypes.canonicalize_dtype(dtypes.dtype(x))


def empty(shape: Any, dtype: Any, *, out_sharding: Any = None) -> Any:
    """An array of ``shape`` and ``dtype`` whose values are unspecified (ember's are zeros)."""
    return full(shape, 0, dtype)


def optimization_barrier(operand: Any) -> Any:
    """``operand`` (a pytree) unchanged. In JAX it stops XLA moving computation across it (a
    rematerialization device); it never changes values, and ember's passes need no barrier."""
    return operand


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape the ``shapes`` broadcast to, NumPy's rule (a ValueError naming them if none)."""
    tuples = [shape_tuple(s) for s in shapes]
    ndim = max((len(s) for s in tuples), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in tuples if i - ndim + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes={tuples}")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_like(arr: Any, like_arr: Any) -> Any:
    """``arr`` broadcast to ``like_arr``'s shape (trailing dimensions aligned)."""
    arr, shape = ensure_array(arr), aval(like_arr).shape
    lead = len(shape) - aval(arr).ndim
    return broadcast_in_dim(arr, shape, tuple(range(lead, len(shape))))


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """``operand`` with dimensions ``start_dimension:stop_dimension`` merged into one."""
    shape = aval(operand).shape
    lo, hi, _ = slice(start_dimension, stop_dimension).indices(len(shape))
    return reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """``operand`` cut along ``axis`` into pieces of ``sizes`` (which add up to its length)."""
    operand = ensure_array(operand)
    (axis,) = canonical_axes((axis,), aval(operand).ndim)
    sizes = shape_tuple(sizes, "sizes")
    if sum(sizes) != aval(operand).shape[axis]:
        raise ValueError(f"Sum of sizes {sum(sizes)} must be equal to dimension {axis} of the operand shape "
                         f"{aval(operand).shape}")
    starts = np.cumsum((0,) + sizes)
    return [slice_in_dim(operand, int(a), int(b), axis=axis) for a, b in zip(starts[:-1], starts[1:])]


def stack(operands: Sequence[Any], axis: int = 0) -> Any:
    """The ``operands`` (of one shape and dtype) along a new dimension ``axis``."""
    operands = [ensure_array(x) for x in operands]
    if not operands:
        raise ValueError("stack requires at least one operand")
    (axis,) = canonical_axes((axis,), aval(operands[0]).ndim + 1)
    return concatenate([expand_dims(x, (axis,)) for x in operands], axis)


def unstack(x: Any, axis: int = 0) -> tuple[Any, ...]:
    """The slices of ``x`` along ``axis``, that dimension removed."""
    x = ensure_array(x)
    (axis,) = canonical_axes((axis,), aval(x).ndim)
    return tuple(index_in_dim(x, i, axis, keepdims=False) for i in range(aval(x).shape[axis]))


def tile(operand: Any, reps: Sequence[int]) -> Any:
    """``operand`` repeated ``reps[i]`` times along each dimension (as ``jnp.tile``, ranks equal)."""
    operand = ensure_array(operand)
    shape, reps = aval(operand).shape, shape_tuple(reps, "reps")
    if len(reps) != len(shape):
        raise ValueError(f"tile: reps {reps} must have one entry per dimension of the operand shape {shape}")
    # (each dimension d of size n becomes (reps[d], n), then the pairs are merged)
    wide = tuple(x for r, n in zip(reps, shape) for x in (r, n))
    out = broadcast_in_dim(operand, wide, tuple(range(1, 2 * len(shape), 2)))
    return reshape(out, tuple(r * n for r, n in zip(reps, shape)))


def clz(x: Any) -> Any:
    """The number of leading zero bits of each element of the integer ``x``."""
    x = ensure_array(x)
    dt = aval(x).dtype
    if not dtypes.is_integer(dt):
        raise TypeError(f"clz does not accept dtype {dt.name}")
    bits = dt.itemsize * 8
    shift = 1
    while shift < bits:  # smear the highest set bit into every lower one
        x = elementwise.bitwise_or(x, elementwise.shift_right_logical(x, elementwise.convert_element_type(shift, dt)))
        shift *= 2
    return elementwise.sub(elementwise.convert_element_type(bits, dt), elementwise.population_count(x))


_MONOIDS = {  # computation -> (reduction, the init value it needs: the identity)
    elementwise.add: (reductions.reduce_sum, lambda dt: 0),
    elementwise.mul: (reductions.reduce_prod, lambda dt: 1),
    elementwise.max: (reductions.reduce_max, dtypes.lowest),
    elementwise.min: (reductions.reduce_min, dtypes.highest),
    elementwise.bitwise_and: (reductions.reduce_and, lambda dt: True if dt == dtypes.bool_ else -1),
    elementwise.bitwise_or: (reductions.reduce_or, lambda dt: 0),
    elementwise.bitwise_xor: (reductions.reduce_xor, lambda dt: 0),
}


def _is_identity(init: Any, value: Any, dt: np.dtype) -> bool:
    try:
        concrete = np.asarray(init)
    except Exception:  # a traced init value
        return False
    return concrete.shape == () and bool(np.asarray(value, dt) == concrete.astype(dt))


def reduce(operands: Any, init_values: Any, computation: Callable[[Any, Any], Any], dimensions: Sequence[int],
           out_sharding: Any = None) -> Any:
    """Fold ``computation`` over ``dimensions`` of ``operands`` (an array, or a pytree of arrays
    of one shape, with ``init_values`` of the same structure), starting from ``init_values``,
    as XLA's reduce. ``lax.add``, ``mul``, ``max``, ``min`` and the
    bitwise ``and`` / ``or`` / ``xor`` with their identity as the init value are the reductions
    of those names; any other computation is a loop over the reduced elements, in order."""
    flat, tree = tree_util.tree_flatten(operands)
    inits, init_tree = tree_util.tree_flatten(init_values)
    if tree != init_tree:
        raise ValueError(f"reduce: operands {tree} and init_values {init_tree} must have the same structure")
    flat = [ensure_array(x) for x in flat]
    shapes = {aval(x).shape for x in flat}
    if len(shapes) != 1:
        raise ValueError(f"reduce: the operands must have one shape, got {sorted(shapes)}")
    (shape,) = shapes
    dims = canonical_axes(tuple(dimensions), len(shape))
    if len(flat) == 1 and computation in _MONOIDS:
        reducer, identity = _MONOIDS[computation]
        dt = aval(flat[0]).dtype
        if _is_identity(inits[0], identity(dt), dt):
            return tree_util.tree_unflatten(tree, [reducer(flat[0], dims)])
    return tree_util.tree_unflatten(tree, _fold(flat, inits, computation, tree, dims, shape))


def _fold(flat: list, inits: list, computation: Callable, tree: Any, dims: tuple, shape: tuple) -> list:
    """The general reduction, in XLA's CPU order: the reduced dimensions moved last and merged,
    then ``acc = computation(acc, x[..., i])`` for i in order from the init values (a loop, so a
    computation that is not associative gives JAX's result)."""
    kept = [d for d in range(len(shape)) if d not in dims]
    rest = tuple(shape[d] for d in kept)
    n = math.prod(shape[d] for d in dims)
    inits = [broadcast_in_dim(elementwise.convert_element_type(v, aval(x).dtype), rest, ())
             for v, x in zip(inits, flat)]
    if n == 0:
        return inits
    xs = [reshape(transpose(x, tuple(kept) + dims), rest + (n,)) for x in flat]

    def step(i: Any, acc: list) -> list:
        items = [dynamic_index_in_dim(x, i, len(rest), keepdims=False) for x in xs]
        out = computation(tree_util.tree_unflatten(tree, acc), tree_util.tree_unflatten(tree, items))
        return [elementwise.convert_element_type(o, aval(a).dtype) for o, a in zip(tree_util.tree_leaves(out), acc)]
    return fori_loop(0, n, step, inits)
