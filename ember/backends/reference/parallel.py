"""The collectives on one device of a per-device run (``ember.lax.parallel``).

Each device runs its program on its own thread with an ``SpmdContext``; a collective leaves
the device's operand at the run's rendezvous, waits for the others and computes its result
from the values of its group (the devices that differ only along the collective's axes).
Outside a per-device run the names are unbound: ``vmap`` resolves collectives before they
reach an interpreter, so only a name that nothing binds gets here.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core.evaluation import impl_rules
from ember.lax import parallel as par


def _group_values(x: np.ndarray, axes: tuple, collective: str) -> tuple[list[np.ndarray], int]:
    context = par.spmd_context()
    if context is None:
        raise NameError(f"Found an unbound axis name: {axes[0]}. To fix this, please call {collective} under "
                        "`jax.shard_map`.")
    members, position = context.group(axes, collective)
    values = context.rendezvous.exchange(context.index, x)
    return [np.asarray(values[m]) for m in members], position


def _reduction(name: str, reduce: Any) -> Any:
    def impl(x: np.ndarray, *, axes: tuple, **params: Any) -> np.ndarray:
        values, _ = _group_values(x, axes, name)
        return np.asarray(reduce(np.stack(values), axis=0), dtype=x.dtype)
    return impl


def _all_gather(x: np.ndarray, *, axes: tuple, axis_size: int, axis: int) -> np.ndarray:
    values, _ = _group_values(x, axes, "all_gather")
    return np.concatenate(values, axis=axis)


def _psum_scatter(x: np.ndarray, *, axes: tuple, axis_size: int, scatter_dimension: int) -> np.ndarray:
    values, position = _group_values(x, axes, "psum_scatter")
    total = np.asarray(np.sum(np.stack(values), axis=0), dtype=x.dtype)
    return np.split(total, axis_size, axis=scatter_dimension)[position]


def _all_to_all(x: np.ndarray, *, axes: tuple, axis_size: int, split_axis: int, concat_axis: int) -> np.ndarray:
    values, position = _group_values(x, axes, "all_to_all")
    return np.concatenate([np.split(v, axis_size, axis=split_axis)[position] for v in values], axis=concat_axis)


def _ppermute(x: np.ndarray, *, axes: tuple, perm: tuple) -> np.ndarray:
    values, position = _group_values(x, axes, "ppermute")
    source = {dst: src for src, dst in perm}
    return values[source[position]].copy() if position in source else np.zeros_like(x)


def _axis_index(*, axes: tuple) -> np.ndarray:
    context = par.spmd_context()
    if context is None:
        raise NameError(f"Found an unbound axis name: {axes[0]}. To fix this, please call axis_index under "
                        "`jax.shard_map`.")
    _, position = context.group(axes, "axis_index")
    return np.asarray(position, dtype=np.int32)


impl_rules[par.psum_p] = _reduction("psum", np.sum)
impl_rules[par.pmax_p] = _reduction("pmax", np.max)
impl_rules[par.pmin_p] = _reduction("pmin", np.min)
impl_rules[par.all_gather_p] = _all_gather
impl_rules[par.psum_scatter_p] = _psum_scatter
impl_rules[par.all_to_all_p] = _all_to_all
impl_rules[par.ppermute_p] = _ppermute
impl_rules[par.axis_index_p] = _axis_index
