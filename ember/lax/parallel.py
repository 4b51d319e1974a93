"""Collectives over named axes: ``psum``, ``pmean``, ``pmax``, ``pmin``, ``all_gather``,
``psum_scatter``, ``ppermute``, ``all_to_all``, ``axis_index``.

Each collective is a primitive with an ``axes`` parameter (axis names). A name means nothing
by itself: an enclosing ``vmap(..., axis_name=...)``, ``pmap`` or ``shard_map`` binds it. They
push a frame on the *axis environment* (a per-thread stack of ``(name, size, kind)``) while
they trace, so that a collective can check its names at bind time (an unbound name is JAX's
``NameError``) and put the sizes its shape rule needs into its parameters.

Two interpreters give the primitives their meaning:

- the batching rules (``ember.transforms.batch_rules``): under ``vmap`` with an axis name, a
  collective over that name computes across the batch dimension (``psum`` sums it away, an
  ``all_gather`` turns it into data, ...). ``pmap`` and ``shard_map`` under a transformation
  run this way.
- the reference rules (``ember.backends.reference.parallel``): when ``pmap`` or ``shard_map``
  runs one program per device, each device runs on its own thread, with an ``SpmdContext``
  saying which device it is; a collective meets the other devices' values at a rendezvous.

The gathering collectives are primitives in their *tiled* form only (``all_gather`` with
``tiled=True`` and so on); the untiled forms add or remove a dimension of size one around
them. Collectives communicate, so the compiler's passes keep them where they are
(``EFFECTFUL``: never folded at compile time, where no device is running).
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Sequence

import numpy as np

from ember import tree_util
from ember.core import sharding as shd
from ember.core.array import Array
from ember.core.avals import ShapedArray
from ember.core.ir import Var
from ember.core.primitive import EFFECTFUL, higher_order
from ember.core.staging import StagingTrace
from ember.core.trace import Tracer
from ember.core.traits import Family
from ember.lax.base import aval, primitive
from ember.lax.elementwise import add, mul, select
from ember.lax.reductions import reduce_max, reduce_min, reduce_sum
from ember.lax.shapes import (
    broadcast_in_dim,
    concatenate,
    dynamic_index_in_dim,
    dynamic_slice_in_dim,
    expand_dims,
    squeeze,
)

__all__ = ["all_gather", "all_to_all", "axis_index", "axis_size", "pmax", "pmean", "pmin", "ppermute", "pshuffle",
           "psum", "psum_scatter", "pvary", "pcast", "with_sharding_constraint"]


# --- the axis environment --------------------------------------------------------------------------
class _AxisEnv(threading.local):
    def __init__(self) -> None:
        self.frames: tuple = ()  # ((name, size, kind), ...), innermost last


_env = _AxisEnv()

# kinds of frame: how a collective's transpose reads (see ember.transforms.rules.parallel)
VMAP, PMAP, SHARD_MAP, SHARD_MAP_VMA = "vmap", "pmap", "shard_map", "shard_map_vma"


@contextlib.contextmanager
def extend_axis_env(frames: Sequence[tuple]) -> Iterator[None]:
    """Bind axis names (``(name, size, kind)`` each) while tracing inside the block."""
    saved = _env.frames
    _env.frames = saved + tuple(frames)
    try:
        yield
    finally:
        _env.frames = saved


def axis_env_key() -> tuple:
    """The bound names, for cache keys: a program traced under other sizes is another program."""
    return _env.frames


def _frame(name: Any, collective: str) -> tuple:
    for frame in reversed(_env.frames):
        if frame[0] == name:
            return frame
    raise NameError(f"Found an unbound axis name: {name}. To fix this, please call {collective} under "
                    "`jax.shard_map`.")


def _names(axis_name: Any) -> tuple:
    return tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)


def axis_size(axis_name: Any) -> int:
    """The size of a bound axis (the product of the sizes for a tuple of names)."""
    return int(np.prod([_frame(n, "axis_size")[1] for n in _names(axis_name)], dtype=np.int64))


def _sizes(names: tuple, collective: str) -> int:
    return int(np.prod([_frame(n, collective)[1] for n in names], dtype=np.int64))


def _vma(names: tuple) -> bool:
    """Whether every name is a ``shard_map(check_vma=True)`` axis (``psum`` then transposes to a copy)."""
    return all(_frame(n, "psum")[2] == SHARD_MAP_VMA for n in names)


# --- the primitives -------------------------------------------------------------------------------
def _same(x: ShapedArray, **params: Any) -> ShapedArray:
    return x


psum_p = primitive("psum", _same, linear=True)
pmax_p = primitive("pmax", _same)
pmin_p = primitive("pmin", _same)
ppermute_p = primitive("ppermute", _same, linear=True)


def _all_gather_rule(x: ShapedArray, *, axes: tuple, axis_size: int, axis: int) -> ShapedArray:
    shape = list(x.shape)
    shape[axis] *= axis_size
    return x._replace(shape=tuple(shape), weak_type=False)


def _psum_scatter_rule(x: ShapedArray, *, axes: tuple, axis_size: int, scatter_dimension: int) -> ShapedArray:
    shape = list(x.shape)
    if shape[scatter_dimension] % axis_size:
        raise ValueError(f"psum_scatter: the scatter dimension ({shape[scatter_dimension]}) must be a multiple of "
                         f"the axis size ({axis_size})")
    shape[scatter_dimension] //= axis_size
    return x._replace(shape=tuple(shape))


def _all_to_all_rule(x: ShapedArray, *, axes: tuple, axis_size: int, split_axis: int,
                     concat_axis: int) -> ShapedArray:
    shape = list(x.shape)
    if shape[split_axis] % axis_size:
        raise ValueError(f"all_to_all: the split axis ({shape[split_axis]}) must be a multiple of the axis size "
                         f"({axis_size})")
    shape[split_axis] //= axis_size
    shape[concat_axis] *= axis_size
    return x._replace(shape=tuple(shape))


def _axis_index_rule(*, axes: tuple) -> ShapedArray:
    return ShapedArray((), np.dtype(np.int32), False)


all_gather_p = primitive("all_gather", _all_gather_rule, linear=True)
psum_scatter_p = primitive("psum_scatter", _psum_scatter_rule, linear=True)
all_to_all_p = primitive("all_to_all", _all_to_all_rule, linear=True)
axis_index_p = primitive("axis_index", _axis_index_rule)

COLLECTIVES = frozenset({psum_p, pmax_p, pmin_p, ppermute_p, all_gather_p, psum_scatter_p, all_to_all_p,
                         axis_index_p})
EFFECTFUL.update(COLLECTIVES)


# ``shard_map`` over a device backend's mesh (an accelerator's, or XLA's CPU plugin's), staged: ``jaxpr``
# is one device's program (its inputs and outputs are blocks; the mesh's axis names are bound in it),
# ``in_specs`` / ``out_specs`` say, per value, which mesh axes split each dimension (a tuple of names
# per dimension). Lowered to Shardy's manual computation, its collectives to XLA's; the other
# backends evaluate it as a batched program (``ember.parallel``). Over ember's own CPU devices
# shard_map is never staged as one equation (it is a vmap per mesh axis there).
def global_shape(shape: Sequence[int], splits: Sequence[tuple], mesh: Any) -> tuple:
    """The whole value's shape of a block of ``shape`` split as ``splits`` say."""
    return tuple(int(d) * int(np.prod([mesh.shape[n] for n in names], dtype=np.int64))
                 for d, names in zip(shape, splits))


def _shard_map_rule(*avals: ShapedArray, jaxpr: Any, mesh: Any, in_specs: tuple, out_specs: tuple,
                    check_vma: bool) -> list[ShapedArray]:
    return [a._replace(shape=global_shape(a.shape, spec, mesh)) for a, spec in zip(jaxpr.out_avals, out_specs)]


shard_map_p = primitive("shard_map", _shard_map_rule, multiple_results=True, linear=True)
higher_order.add(shard_map_p)


# --- the functions --------------------------------------------------------------------------------
def _canonical_axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{what} {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _single(axis_name: Any, collective: str) -> tuple:
    names = _names(axis_name)
    if len(names) != 1:
        raise NotImplementedError(f"ember's {collective} takes one axis name, got {axis_name!r}")
    return names


# --- axis_index_groups: collectives within groups of an axis's devices -------------------------------------
class _Groups:
    """``axis_index_groups`` checked as JAX checks them (groups of one size covering every index of
    the axis once), with the tables a device reads its group from."""

    def __init__(self, groups: Any, n: int, collective: str) -> None:
        rows = [[int(i) for i in g] for g in groups]
        if not rows or len({len(r) for r in rows}) != 1:
            raise ValueError(f"{collective}: axis_index_groups must all have the same size, got {groups!r}")
        if sorted(i for r in rows for i in r) != list(range(n)):
            raise ValueError(f"{collective}: axis_index_groups must cover every index of the axis (size {n}) exactly "
                             f"once, got {groups!r}")
        self.size = len(rows[0])
        self.members = np.zeros((n, self.size), np.int32)  # each device's group, in the group's order
        self.position = np.zeros(n, np.int32)  # where each device is in its group
        for r in rows:
            for k, i in enumerate(r):
                self.members[i], self.position[i] = r, k
        self.same = np.zeros((n, n), bool)
        for r in rows:
            self.same[np.ix_(r, r)] = True


def _mine(table: np.ndarray, names: tuple) -> Any:
    """This device's row of ``table`` (indexed by the device's position along the axis)."""
    return dynamic_index_in_dim(table, axis_index(names), 0, keepdims=False)


def _in_group(leaf: Any, names: tuple, groups: _Groups) -> tuple[Any, Any]:
    """Every device's ``leaf`` stacked (n, ...), and whether each is in this device's group."""
    gathered = all_gather(leaf, names, axis=0, tiled=False)
    member = broadcast_in_dim(_mine(groups.same, names), aval(gathered).shape, (0,))
    return gathered, member


def _grouped_reduce(leaf: Any, names: tuple, groups: _Groups, kind: str) -> Any:
    gathered, member = _in_group(leaf, names, groups)
    if kind == "sum":
        g = aval(gathered)
        return reduce_sum(select(member, gathered, broadcast_in_dim(np.zeros((), g.dtype), g.shape, ())), (0,))
    own = broadcast_in_dim(leaf, aval(gathered).shape, tuple(range(1, aval(gathered).ndim)))
    kept = select(member, gathered, own)  # (others' values replaced by this device's: the extremum is the group's)
    return (reduce_max if kind == "max" else reduce_min)(kept, (0,))


def _member_values(leaf: Any, names: tuple, groups: _Groups) -> list:
    """The values of this device's group members, in the group's order."""
    gathered = all_gather(leaf, names, axis=0, tiled=False)
    members = _mine(groups.members, names)
    return [dynamic_index_in_dim(gathered, dynamic_index_in_dim(members, k, 0, keepdims=False), 0, keepdims=False)
            for k in range(groups.size)]


def psum(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The sum of ``x`` over the devices (examples) of ``axis_name``, on each of them.

    As in JAX, a value that is not traced (a Python number, a constant) is the same on every
    device, so its sum is known at once: ``psum(1, 'i')`` is the axis size."""
    names = _names(axis_name)
    n = _sizes(names, "psum")
    vma = _vma(names)
    if axis_index_groups is not None:
        groups = _Groups(axis_index_groups, n, "psum")
        return tree_util.tree_map(lambda leaf: _grouped_reduce(leaf, names, groups, "sum"), x)

    def one(leaf: Any) -> Any:
        if not isinstance(leaf, Tracer):
            return leaf * n if isinstance(leaf, (int, float, complex)) and not isinstance(leaf, bool) \
                else psum_p.bind(leaf, axes=names, vma=vma) if not isinstance(leaf, (bool, np.bool_)) else leaf
        return psum_p.bind(leaf, axes=names, vma=vma)
    return tree_util.tree_map(one, x)


def pmean(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The mean of ``x`` over ``axis_name``."""
    n = axis_size(axis_name) if axis_index_groups is None else len(axis_index_groups[0])
    total = psum(x, axis_name, axis_index_groups=axis_index_groups)
    return tree_util.tree_map(lambda t: t / n, total)


def _extremum(p: Any, name: str):
    def f(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
        names = _names(axis_name)
        n = _sizes(names, name)
        if axis_index_groups is not None:
            groups = _Groups(axis_index_groups, n, name)
            return tree_util.tree_map(lambda leaf: _grouped_reduce(leaf, names, groups, name[1:]), x)
        return tree_util.tree_map(lambda leaf: p.bind(leaf, axes=names), x)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"The {name[1:]}imum of ``x`` over ``axis_name``, on each device."
    return f


pmax = _extremum(pmax_p, "pmax")
pmin = _extremum(pmin_p, "pmin")


def all_gather(x: Any, axis_name: Any, *, axis_index_groups: Any = None, axis: int = 0, tiled: bool = False) -> Any:
    """Every device's ``x``, stacked along a new ``axis`` (``tiled``: concatenated along it)."""
    names = _single(axis_name, "all_gather")
    n = _sizes(names, "all_gather")
    groups = None if axis_index_groups is None else _Groups(axis_index_groups, n, "all_gather")

    def one(leaf: Any) -> Any:
        a = aval(leaf)
        if groups is not None:  # (the group's values, stacked or concatenated along axis)
            values = _member_values(leaf, names, groups)
            if tiled:
                return concatenate(values, _canonical_axis(axis, max(a.ndim, 1), "all_gather axis"))
            ax = _canonical_axis(axis, a.ndim + 1, "all_gather axis")
            return concatenate([expand_dims(v, (ax,)) for v in values], ax)
        if tiled:
            ax = _canonical_axis(axis, max(a.ndim, 1), "all_gather axis")
            return all_gather_p.bind(leaf, axes=names, axis_size=n, axis=ax)
        ax = _canonical_axis(axis, a.ndim + 1, "all_gather axis")
        return all_gather_p.bind(expand_dims(leaf, (ax,)), axes=names, axis_size=n, axis=ax)
    return tree_util.tree_map(one, x)


def psum_scatter(x: Any, axis_name: Any, *, scatter_dimension: int = 0, axis_index_groups: Any = None,
                 tiled: bool = False) -> Any:
    """The ``psum`` of ``x``, of which each device keeps its block along ``scatter_dimension``
    (untiled: the dimension must equal the axis size, and it is removed)."""
    names = _single(axis_name, "psum_scatter")
    n = _sizes(names, "psum_scatter")
    groups = None if axis_index_groups is None else _Groups(axis_index_groups, n, "psum_scatter")

    def one(leaf: Any) -> Any:
        a = aval(leaf)
        d = _canonical_axis(scatter_dimension, a.ndim, "psum_scatter scatter_dimension")
        if groups is not None:  # (the group's sum; this device keeps its block of it)
            k = groups.size
            if not tiled and a.shape[d] != k:
                raise ValueError(f"psum_scatter: the scattered dimension must equal the group size ({k}) unless "
                                 f"tiled=True, got shape {a.shape}")
            block = a.shape[d] // k
            total = _grouped_reduce(leaf, names, groups, "sum")
            out = dynamic_slice_in_dim(total, _mine(groups.position, names) * block, block, d)
            return out if tiled else squeeze(out, (d,))
        if not tiled and a.shape[d] != n:
            raise ValueError(f"psum_scatter: the scattered dimension must equal the axis size ({n}) unless "
                             f"tiled=True, got shape {a.shape}")
        out = psum_scatter_p.bind(leaf, axes=names, axis_size=n, scatter_dimension=d)
        return out if tiled else squeeze(out, (d,))
    return tree_util.tree_map(one, x)


def ppermute(x: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """Send each device's ``x`` to another: ``perm`` holds ``(source, destination)`` pairs;
    a device that receives nothing gets zeros."""
    names = _single(axis_name, "ppermute")
    n = _sizes(names, "ppermute")
    perm = tuple((int(s), int(d)) for s, d in perm)
    sources, dests = [s for s, _ in perm], [d for _, d in perm]
    if len(set(sources)) != len(sources) or len(set(dests)) != len(dests):
        raise ValueError(f"ppermute sources and destinations must be unique, got {perm}.")
    for s, d in perm:
        if not (0 <= s < n and 0 <= d < n):
            raise ValueError(f"ppermute permutation indices must be in range(axis_size) with axis_size={n}, "
                             f"got {perm}")
    return tree_util.tree_map(lambda leaf: ppermute_p.bind(leaf, axes=names, perm=perm), x)


def pshuffle(x: Any, axis_name: Any, perm: Sequence[int]) -> Any:
    """Device ``i`` receives the value of device ``perm[i]``."""
    return ppermute(x, axis_name, [(int(p), i) for i, p in enumerate(perm)])


def all_to_all(x: Any, axis_name: Any, split_axis: int, concat_axis: int, *, axis_index_groups: Any = None,
               tiled: bool = False) -> Any:
    """Split ``x`` into blocks along ``split_axis``, send block ``k`` to device ``k``, and
    concatenate the received blocks along ``concat_axis`` (untiled: the split axis must equal
    the axis size and is removed; the received blocks are stacked along a new ``concat_axis``)."""
    names = _single(axis_name, "all_to_all")
    n = _sizes(names, "all_to_all")
    groups = None if axis_index_groups is None else _Groups(axis_index_groups, n, "all_to_all")

    def one(leaf: Any) -> Any:
        a = aval(leaf)
        s = _canonical_axis(split_axis, a.ndim, "all_to_all split_axis")
        if groups is not None:  # (from each group member, the block this device's position names)
            k = groups.size
            if not tiled and a.shape[s] != k:
                raise ValueError(f"all_to_all: the split axis must equal the group size ({k}) unless tiled=True, got "
                                 f"shape {a.shape}")
            chunk = a.shape[s] // k
            start = _mine(groups.position, names) * chunk
            received = [dynamic_slice_in_dim(v, start, chunk, s) for v in _member_values(leaf, names, groups)]
            if tiled:
                return concatenate(received, _canonical_axis(concat_axis, a.ndim, "all_to_all concat_axis"))
            received = [squeeze(r, (s,)) for r in received]
            c = _canonical_axis(concat_axis, a.ndim, "all_to_all concat_axis")
            return concatenate([expand_dims(r, (c,)) for r in received], c)
        if tiled:
            c = _canonical_axis(concat_axis, a.ndim, "all_to_all concat_axis")
            return all_to_all_p.bind(leaf, axes=names, axis_size=n, split_axis=s, concat_axis=c)
        if a.shape[s] != n:
            raise ValueError(f"all_to_all: the split axis must equal the axis size ({n}) unless tiled=True, got "
                             f"shape {a.shape}")
        c = _canonical_axis(concat_axis, a.ndim, "all_to_all concat_axis")
        # A new axis of size 1 at the concat position receives the blocks; the split axis then has size 1.
        grown = expand_dims(leaf, (c,))
        s2 = s + (s >= c)
        out = all_to_all_p.bind(grown, axes=names, axis_size=n, split_axis=s2, concat_axis=c)
        return squeeze(out, (s2,))
    return tree_util.tree_map(one, x)


def axis_index(axis_name: Any) -> Any:
    """This device's (example's) index along ``axis_name`` (row-major over a tuple of names)."""
    names = _names(axis_name)
    sizes = [_sizes((n,), "axis_index") for n in names]
    index, stride = None, 1
    for name, size in zip(reversed(names), reversed(sizes)):
        term = axis_index_p.bind(axes=(name,))
        term = term if stride == 1 else mul(term, np.int32(stride))
        index = term if index is None else add(index, term)
        stride *= size
    return index


def pvary(x: Any, axis_name: Any) -> Any:
    """Mark ``x`` as varying over ``axis_name``; values carry no such mark in ember, so ``x``."""
    _sizes(_names(axis_name), "pvary")
    return x


def pcast(x: Any, axis_name: Any, *, to: str) -> Any:
    """``pvary``'s general form (``to='varying'``); the value itself is unchanged."""
    return pvary(x, axis_name)


# --- which mesh axes a value of a shard_map(check_vma=True) body varies over -----------------------------
# JAX's type system tracks it (``vma``); ember computes it from the program being traced: a body's
# inputs vary over the axes their in_specs split them over (``seed_varying``), an equation's outputs
# over the union of its operands', except that psum / pmean / pmax / pmin / all_gather make a value
# invariant along their axes and axis_index varies along its own. Differentiation uses it for
# JAX's rule that the gradient of an invariant value is summed over the axes along which the
# gradient (or the differentiated output) varies (ember.transforms.api).
def invariance_checked_axes() -> tuple:
    """The bound axis names of ``shard_map(check_vma=True)`` bodies (innermost last)."""
    return tuple(name for name, _, kind in _env.frames if kind == SHARD_MAP_VMA)


def seed_varying(args: Sequence[Any], axes: Sequence[frozenset]) -> None:
    """Record, on the staging trace of the tracers ``args`` (a body's inputs), the axes each varies over."""
    for x, names in zip(args, axes):
        trace = getattr(x, "_trace", None)
        if trace is None or not hasattr(x, "ir_var"):
            continue
        if getattr(trace, "varying_seeds", None) is None:
            trace.varying_seeds, trace.varying_memo, trace.varying_done = {}, {}, 0
        trace.varying_seeds[id(x.ir_var)] = frozenset(names)


def varying_axes(x: Any) -> frozenset | None:
    """The axes a traced value of a seeded body varies over; None where the value is not one."""
    trace = getattr(x, "_trace", None)
    seeds = getattr(trace, "varying_seeds", None)
    if seeds is None or trace is None or not hasattr(x, "ir_var"):
        return None
    memo = trace.varying_memo

    def of(v: Any) -> frozenset:
        return memo.get(id(v), seeds.get(id(v), frozenset())) if isinstance(v, Var) else frozenset()

    for eqn in trace.eqns[trace.varying_done:]:
        names = frozenset().union(*map(of, eqn.invars)) if eqn.invars else frozenset()
        if eqn.primitive in _INVARIANT_AFTER:
            names = names - set(eqn.params["axes"])
        elif eqn.primitive is axis_index_p:
            names = names | set(eqn.params["axes"])
        for o in eqn.outvars:
            memo[id(o)] = names
    trace.varying_done = len(trace.eqns)
    return of(x.ir_var)


# ``with_sharding_constraint`` on a traced value: the identity, recording how the value should be
# split (``spec``: a PartitionSpec over the enclosing jit's mesh), which the partitioning of a
# ``jit`` with ``in_shardings`` acts on (ember.partition). An elementwise identity otherwise.
sharding_constraint_p = primitive("sharding_constraint", lambda x, **_: x, family=Family.ELEMENTWISE, linear=True)


def place_tree(x: Any, sharding: Any) -> Any:
    """Each leaf of ``x`` placed as ``sharding`` (one Sharding / PartitionSpec, or a tree of them)
    says; a traced leaf gets a ``sharding_constraint``."""
    leaves, tree = tree_util.tree_flatten(x)
    is_placement = (shd.Sharding, shd.PartitionSpec)
    placements = [sharding] * len(leaves) if sharding is None or isinstance(sharding, is_placement) else \
        tree_util.tree_leaves(sharding, is_leaf=lambda s: s is None or isinstance(s, is_placement))
    if len(placements) != len(leaves):
        raise ValueError(f"with_sharding_constraint / reshard: {len(placements)} shardings for a value with "
                         f"{len(leaves)} arrays; give one sharding, or a tree of them matching the value")
    out = []
    for leaf, s in zip(leaves, placements):
        if s is None:
            out.append(leaf)
            continue
        if isinstance(leaf, Tracer):
            spec = s if isinstance(s, shd.PartitionSpec) else getattr(s, "spec", shd.PartitionSpec())
            constrained = sharding_constraint_p.bind(leaf, spec=spec)
            if isinstance(s, shd.PartitionSpec) and not shd.get_mesh().empty:
                s = shd.NamedSharding(shd.get_mesh(), s)
            trace = getattr(constrained, "_trace", None)
            if isinstance(trace, StagingTrace) and isinstance(s, shd.Sharding) and hasattr(constrained, "ir_var"):
                trace.shardings[id(constrained.ir_var)] = s  # (a jit's output is placed so)
            out.append(constrained)
            continue
        if isinstance(s, shd.PartitionSpec):
            mesh = shd.get_mesh()
            if mesh.empty:
                raise ValueError("with_sharding_constraint / reshard with a PartitionSpec needs a mesh: use "
                                 "`jax.set_mesh(mesh)` or pass a NamedSharding")
            s = shd.NamedSharding(mesh, s)
        leaf = leaf if isinstance(leaf, Array) else Array(np.asarray(leaf))
        out.append(shd.put(Array(np.asarray(leaf), leaf.aval), s))
    return tree_util.tree_unflatten(tree, out)


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """``x`` placed as ``shardings`` say: a concrete value is placed; inside a ``jit`` whose inputs
    are split (``in_shardings``), the value is split so at that point of the program."""
    return place_tree(x, shardings)



# --- running one program per device ------------------------------------------------------------------
class Rendezvous:
    """Where the devices' threads meet: each leaves its value, all wait, each reads all of them.

    In a run whose mesh spans processes (``ember.distributed``) the rendezvous holds this
    process's devices only: ``positions`` are their linear indices in the mesh (ascending),
    ``processes`` says which process holds each position of the mesh, and ``transport`` carries
    values between the processes (MPI collectives on the arrays' buffers). One thread, the
    first device's, talks to the other processes for all of this process's devices."""

    def __init__(self, count: int, positions: Sequence[int] | None = None, processes: Sequence[int] | None = None,
                 transport: Any = None) -> None:
        self.positions = list(range(count)) if positions is None else [int(p) for p in positions]
        self.local = {p: i for i, p in enumerate(self.positions)}
        self.processes = None if processes is None else [int(p) for p in processes]
        self.transport = transport
        self.slots: list = [None] * count
        self.barrier = threading.Barrier(count)
        self.result: Any = None

    def exchange(self, index: int, value: Any) -> list:
        """Every device's value, by mesh position (across processes through the transport)."""
        if self.transport is None:
            self.slots[self.local[index]] = value
            self.barrier.wait()
            values = list(self.slots)
            self.barrier.wait()  # nobody overwrites a slot before everyone has read it
            return values
        return self.combine(index, value, lambda local: self.transport.gather_all(local, self, ("exchange", ())))

    def combine(self, index: int, value: Any, compute: Any) -> Any:
        """Leave ``value``; the first device's thread computes ``compute({position: value})`` for all
        of this process's devices (talking to the other processes); every device reads the result."""
        i = self.local[index]
        self.slots[i] = value
        self.barrier.wait()
        if i == 0:
            self.result = compute(dict(zip(self.positions, self.slots)))
        self.barrier.wait()
        result = self.result
        self.barrier.wait()  # nobody starts the next collective before everyone has read this one
        return result


class SpmdContext:
    """One device's place in a run of one program per device: the mesh's axis names and sizes,
    this device's linear index (row-major over the axes) and the rendezvous of the run."""

    def __init__(self, names: tuple, sizes: tuple, index: int, rendezvous: Rendezvous) -> None:
        self.names, self.sizes, self.index, self.rendezvous = names, sizes, index, rendezvous
        self.coords = tuple(int(c) for c in np.unravel_index(index, sizes))

    def group(self, axes: tuple, collective: str) -> tuple[list[int], int]:
        """The devices that share this one's coordinates except along ``axes`` (ordered
        row-major over ``axes``), and this device's position among them."""
        for a in axes:
            if a not in self.names:
                raise NameError(f"Found an unbound axis name: {a}. To fix this, please call {collective} under "
                                "`jax.shard_map`.")
        at = [self.names.index(a) for a in axes]
        members = []
        for offsets in np.ndindex(*[self.sizes[i] for i in at]):
            coords = list(self.coords)
            for i, o in zip(at, offsets):
                coords[i] = o
            members.append(int(np.ravel_multi_index(coords, self.sizes)))
        return members, members.index(self.index)


class _Spmd(threading.local):
    context: SpmdContext | None = None


_spmd = _Spmd()


def spmd_context() -> SpmdContext | None:
    """The running device's context (None outside a per-device run)."""
    return _spmd.context


@contextlib.contextmanager
def running_on(context: SpmdContext) -> Iterator[None]:
    """Run the block as one device of a per-device run (on that device's thread)."""
    saved = _spmd.context
    _spmd.context = context
    try:
        yield
    finally:
        _spmd.context = saved


_INVARIANT_AFTER = frozenset({psum_p, pmax_p, pmin_p, all_gather_p})
