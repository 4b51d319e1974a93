"""``jax.pmap`` and ``jax.shard_map`` on ember's one device.

``pmap(f)`` maps ``f`` over the leading axis of its inputs, one slice per device: with one
device that axis must have size 1 (JAX raises for more, and so does this), and the map is a
compiled ``vmap``. ``shard_map(f, mesh=..., in_specs=..., out_specs=...)`` over a mesh of one
device gives ``f`` each whole array, so it is ``f``. Collectives over their axis names
(``lax.psum`` and the others) are not available in ember.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from ember import tree_util
from ember.api import jit
from ember.transforms.batching import vmap


def pmap(fun: Callable | None = None, axis_name: Any = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: Any = (), devices: Any = None, backend: Any = None, axis_size: Any = None,
         donate_argnums: Any = (), global_arg_shapes: Any = None) -> Callable:
    if fun is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                                 static_broadcasted_argnums=static_broadcasted_argnums)
    mapped = jit(vmap(fun, in_axes=in_axes, out_axes=out_axes), static_argnums=static_broadcasted_argnums)

    @functools.wraps(fun)
    def run(*args: Any, **kwargs: Any) -> Any:
        sizes = {leaf.shape[0] for leaf in tree_util.tree_leaves(args) if getattr(leaf, "ndim", 0) > 0}
        if any(size > 1 for size in sizes):
            raise ValueError(f"compiling computation that requires {max(sizes)} logical devices, but only 1 XLA "
                             "devices are available (ember runs on one device: pmap maps an axis of size 1)")
        return mapped(*args, **kwargs)
    return run


def shard_map(f: Callable | None = None, /, *, out_specs: Any = None, mesh: Any = None, in_specs: Any = None,
              axis_names: Any = frozenset(), check_vma: bool = True, check_rep: Any = None) -> Callable:
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, mesh=mesh, in_specs=in_specs)
    if mesh is not None and getattr(mesh, "size", 1) != 1:
        raise ValueError("ember runs on one device: shard_map needs a mesh of one device")
    return f


__all__ = ["pmap", "shard_map"]
