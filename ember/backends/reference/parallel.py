"""The collectives on one device of a per-device run (``ember.lax.parallel``).

Each device runs its program on its own thread with an ``SpmdContext``; a collective leaves
the device's operand at the run's rendezvous, waits for the others and computes its result
from the values of its group (the devices that differ only along the collective's axes).
Outside a per-device run the names are unbound: ``vmap`` resolves collectives before they
reach an interpreter, so only a name that nothing binds gets here.

When the mesh spans processes (``ember.distributed``), the rendezvous holds this process's
devices and a transport to the others. One thread combines this process's values first and
then makes one MPI collective for all of them, on the NumPy buffers: the reductions
(``psum``, ``pmax``, ``pmin``, ``psum_scatter``) reduce within the process and then
``Allreduce`` one row per group that spans processes; ``ppermute`` and ``all_to_all`` send
each block to the process that needs it, one message per pair of processes; ``all_gather``
gathers every device's value (``Allgather``). A group whose devices are all in this process
needs no MPI at all.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.core.evaluation import impl_rules
from ember.lax import parallel as par


def _context(axes: tuple, collective: str) -> Any:
    context = par.spmd_context()
    if context is None:
        raise NameError(f"Found an unbound axis name: {axes[0]}. To fix this, please call {collective} under "
                        "`jax.shard_map`.")
    return context


def _group_values(x: np.ndarray, axes: tuple, collective: str) -> tuple[list[np.ndarray], int]:
    context = _context(axes, collective)
    members, position = context.group(axes, collective)
    rendezvous = context.rendezvous
    if rendezvous.transport is None:
        values = rendezvous.exchange(context.index, x)
    else:
        values = rendezvous.combine(context.index, np.asarray(x), lambda local: rendezvous.transport.gather_all(
            local, rendezvous, (collective, axes)))
    return [np.asarray(values[m]) for m in members], position


# --- across processes ------------------------------------------------------------------------------
def _groups(context: Any, axes: tuple) -> list[list[int]]:
    """Every group of the mesh for ``axes`` (members row-major over ``axes``), in a fixed order
    that every process computes alike."""
    at = [context.names.index(a) for a in axes]
    rest = [i for i in range(len(context.sizes)) if i not in at]
    groups = []
    for fixed in np.ndindex(*[context.sizes[i] for i in rest]):
        members = []
        for offsets in np.ndindex(*[context.sizes[i] for i in at]):
            coords = [0] * len(context.sizes)
            for i, c in zip(rest, fixed):
                coords[i] = c
            for i, o in zip(at, offsets):
                coords[i] = o
            members.append(int(np.ravel_multi_index(coords, context.sizes)))
        groups.append(members)
    return groups


_IDENTITY = {"sum": lambda dt: 0, "max": dtypes.lowest, "min": dtypes.highest}


def _reduce_across(context: Any, x: np.ndarray, axes: tuple, op: str, reduce: Any, collective: str) -> np.ndarray:
    """The reduction of this device's group: within the process, then across processes."""
    rendezvous = context.rendezvous
    processes = rendezvous.processes

    def compute(local: dict) -> dict:
        out: dict = {}
        spanning, rows = [], []
        for members in _groups(context, axes):
            mine = [m for m in members if m in local]
            if not mine and len({processes[m] for m in members}) == 1:
                continue
            partial = np.asarray(reduce(np.stack([local[m] for m in mine]), axis=0), x.dtype) if mine else None
            if len({processes[m] for m in members}) > 1:
                spanning.append(mine)
                rows.append(partial)
            else:
                out.update({m: partial for m in mine})
        if spanning:
            buf = np.full((len(spanning),) + x.shape, _IDENTITY[op](x.dtype), x.dtype)
            for k, partial in enumerate(rows):
                if partial is not None:
                    buf[k] = partial
            total = rendezvous.transport.allreduce(buf, op, (collective, axes))
            for k, mine in enumerate(spanning):
                out.update({m: total[k] for m in mine})
        return out

    return np.array(rendezvous.combine(context.index, np.asarray(x), compute)[context.index], copy=True)


def _send_blocks(context: Any, x: np.ndarray, transfers: Any, block_shape: tuple, collective: str,
                 axes: tuple) -> dict:
    """Move blocks between devices: ``transfers(local)`` lists ``(src, dst, key, block)`` for every
    transfer of the mesh (``block`` is None where ``src`` is not in this process); each process
    sends one message per peer, the blocks in the listed order. Returns {(dst, key): block} for
    this process's destinations."""
    rendezvous = context.rendezvous
    processes, me = rendezvous.processes, rendezvous.transport.rank

    def compute(local: dict) -> dict:
        out: dict = {}
        sends: dict[int, list] = {}
        recvs: dict[int, list] = {}
        for src, dst, key, block in transfers(local):
            ps, pd = processes[src], processes[dst]
            if ps == me and pd == me:
                out[(dst, key)] = block
            elif ps == me:
                sends.setdefault(pd, []).append(block)
            elif pd == me:
                recvs.setdefault(ps, []).append((dst, key))
        send_bufs = {p: np.ascontiguousarray(np.stack(blocks)) for p, blocks in sends.items()}
        recv_bufs = {p: np.empty((len(keys),) + tuple(block_shape), x.dtype) for p, keys in recvs.items()}
        rendezvous.transport.sendrecv(send_bufs, recv_bufs, (collective, axes))
        for p, keys in recvs.items():
            out.update({k: recv_bufs[p][i] for i, k in enumerate(keys)})
        return out

    return rendezvous.combine(context.index, np.asarray(x), compute)


def _ppermute_across(context: Any, x: np.ndarray, axes: tuple, perm: tuple) -> np.ndarray:
    def transfers(local: dict) -> Any:
        for members in _groups(context, axes):
            for src, dst in perm:
                yield members[src], members[dst], 0, local.get(members[src])

    got = _send_blocks(context, x, transfers, x.shape, "ppermute", axes)
    block = got.get((context.index, 0))
    return np.zeros_like(x) if block is None else np.array(block, copy=True)


def _all_to_all_across(context: Any, x: np.ndarray, axes: tuple, axis_size: int, split_axis: int,
                       concat_axis: int) -> np.ndarray:
    members, position = context.group(axes, "all_to_all")

    def transfers(local: dict) -> Any:
        for group in _groups(context, axes):
            for j, src in enumerate(group):
                parts = np.split(local[src], axis_size, axis=split_axis) if src in local else [None] * axis_size
                for i, dst in enumerate(group):
                    yield src, dst, j, parts[i]

    shape = list(x.shape)
    shape[split_axis] //= axis_size
    got = _send_blocks(context, x, transfers, tuple(shape), "all_to_all", axes)
    return np.concatenate([got[(context.index, j)] for j in range(len(members))], axis=concat_axis)


# --- the rules -------------------------------------------------------------------------------------
def _reduction(name: str, reduce: Any, op: str) -> Any:
    def impl(x: np.ndarray, *, axes: tuple, **params: Any) -> np.ndarray:
        context = _context(axes, name)
        if context.rendezvous.transport is not None:
            context.group(axes, name)  # (an unbound name says so)
            return _reduce_across(context, np.asarray(x), axes, op, reduce, name)
        values, _ = _group_values(x, axes, name)
        return np.asarray(reduce(np.stack(values), axis=0), dtype=x.dtype)
    return impl


def _all_gather(x: np.ndarray, *, axes: tuple, axis_size: int, axis: int) -> np.ndarray:
    values, _ = _group_values(x, axes, "all_gather")
    return np.concatenate(values, axis=axis)


def _psum_scatter(x: np.ndarray, *, axes: tuple, axis_size: int, scatter_dimension: int) -> np.ndarray:
    context = _context(axes, "psum_scatter")
    _, position = context.group(axes, "psum_scatter")
    if context.rendezvous.transport is not None:
        total = _reduce_across(context, np.asarray(x), axes, "sum", np.sum, "psum_scatter")
    else:
        values, position = _group_values(x, axes, "psum_scatter")
        total = np.asarray(np.sum(np.stack(values), axis=0), dtype=x.dtype)
    return np.array(np.split(total, axis_size, axis=scatter_dimension)[position], copy=True)


def _all_to_all(x: np.ndarray, *, axes: tuple, axis_size: int, split_axis: int, concat_axis: int) -> np.ndarray:
    context = _context(axes, "all_to_all")
    if context.rendezvous.transport is not None:
        return _all_to_all_across(context, np.asarray(x), axes, axis_size, split_axis, concat_axis)
    values, position = _group_values(x, axes, "all_to_all")
    return np.concatenate([np.split(v, axis_size, axis=split_axis)[position] for v in values], axis=concat_axis)


def _ppermute(x: np.ndarray, *, axes: tuple, perm: tuple) -> np.ndarray:
    context = _context(axes, "ppermute")
    if context.rendezvous.transport is not None:
        context.group(axes, "ppermute")
        return _ppermute_across(context, np.asarray(x), axes, perm)
    values, position = _group_values(x, axes, "ppermute")
    source = {dst: src for src, dst in perm}
    return values[source[position]].copy() if position in source else np.zeros_like(x)


def _axis_index(*, axes: tuple) -> np.ndarray:
    context = _context(axes, "axis_index")
    _, position = context.group(axes, "axis_index")
    return np.asarray(position, dtype=np.int32)


impl_rules[par.psum_p] = _reduction("psum", np.sum, "sum")
impl_rules[par.pmax_p] = _reduction("pmax", np.max, "max")
impl_rules[par.pmin_p] = _reduction("pmin", np.min, "min")
impl_rules[par.all_gather_p] = _all_gather
impl_rules[par.psum_scatter_p] = _psum_scatter
impl_rules[par.all_to_all_p] = _all_to_all
impl_rules[par.ppermute_p] = _ppermute
impl_rules[par.axis_index_p] = _axis_index
impl_rules[par.sharding_constraint_p] = lambda x, *, spec: x
