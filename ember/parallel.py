"""``pmap`` and ``shard_map``: one program per device, with collectives over named axes.

Two ways to run them, which give the same values:

- **One program per device.** Called on concrete arrays outside any transformation, ``pmap``
  and ``shard_map`` trace ``f`` once for one device's block (with the mapped axis names bound
  in the axis environment), compile it natively once, and run it on every device at the same
  time, each device on its own thread (``SpmdContext``: which device it is, and the rendezvous
  where the collectives meet). The outputs are assembled into one array and placed
  (``Array.sharding``). A thread per device, rather than a share of one thread pool per device,
  because the devices' programs then overlap wherever they release the GIL, and the
  collectives need every device's program to be running anyway.
- **As a batched program.** Under ``jit``, ``grad``, ``vmap`` (their arguments are tracers),
  ``pmap(f, 'i')`` is ``vmap(f, axis_name='i')`` and ``shard_map`` is one ``vmap`` per mesh
  axis over the blocks of the inputs: the collectives' batching rules compute across the
  mapped axes, and the program is one program over all devices' data.

``jit(in_shardings=, out_shardings=)`` with inputs split over a mesh partitions the program
into one per device (``ember.partition``) and runs it with ``shard_map``, inserting the
``psum`` of a data-parallel gradient itself; ``with_sharding_constraint`` places a concrete
value, and on a traced one records the split that this partitioning acts on.
"""
from __future__ import annotations

import concurrent.futures
import functools
import math
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ember import distributed, dtypes, errors, lax, tree_util
from ember.api import jit
from ember.backends import registry
from ember.core import sharding as shd
from ember.core.array import Array, ShapeDtypeStruct
from ember.core.avals import ShapedArray
from ember.core.evaluation import impl_rules
from ember.core.trace import EvalTrace, Tracer, current_trace
from ember.lax import parallel as par
from ember.lax.base import aval
from ember.transforms import batching
from ember.transforms.programs import eval_closed_by_binding, trace_program
from ember.utilities import device_put

__all__ = ["make_array_from_callback", "make_array_from_single_device_arrays", "pmap", "reshard", "shard_map",
           "with_sharding_constraint"]

with_sharding_constraint = par.with_sharding_constraint


# --- running one program per device -------------------------------------------------------------------
_pool_lock = threading.Lock()
_pool: list[concurrent.futures.ThreadPoolExecutor] = []


def _executor(count: int) -> concurrent.futures.ThreadPoolExecutor:
    with _pool_lock:
        if not _pool or _pool[0]._max_workers < count:
            if _pool:
                _pool.pop().shutdown(wait=False)
            _pool.append(concurrent.futures.ThreadPoolExecutor(count, thread_name_prefix="ember-device"))
        return _pool[0]


def run_per_device(program: Callable, names: tuple, sizes: tuple, per_device_args: Sequence[Sequence[Any]],
                   processes: Sequence[int] | None = None) -> list:
    """``program(*per_device_args[k])`` on device ``k`` of a mesh (``names``, ``sizes``), all at once.

    When the mesh spans processes, ``processes`` says which process holds each position of the
    mesh; ``per_device_args`` are then this process's devices' (in the mesh's order)."""
    count = len(per_device_args)
    if processes is None:
        positions = list(range(count))
        rendezvous = par.Rendezvous(count)
    else:
        link = distributed.transport()
        positions = [i for i, p in enumerate(processes) if p == link.rank]
        rendezvous = par.Rendezvous(count, positions, processes, link)

    def one(k: int) -> Any:
        try:
            with par.running_on(par.SpmdContext(names, sizes, positions[k], rendezvous)):
                return program(*per_device_args[k])
        except BaseException:
            rendezvous.barrier.abort()  # the other devices stop waiting for this one
            raise

    if count == 1:
        return [one(0)]
    futures = [_executor(count).submit(one, k) for k in range(count)]
    results, first_error = [], None
    for f in futures:
        try:
            results.append(f.result())
        except threading.BrokenBarrierError as e:
            first_error = first_error or e
        except BaseException as e:  # the device that failed first says why
            if first_error is None or isinstance(first_error, threading.BrokenBarrierError):
                first_error = e
    if first_error is not None:
        raise first_error
    return results


def _is_traced(leaves: Sequence[Any]) -> bool:
    return type(current_trace()) is not EvalTrace or any(isinstance(x, Tracer) for x in leaves)


def _compile_block_program(flat_fun: Callable, block_avals: Sequence[Any], frames: tuple) -> Callable:
    """``flat_fun`` compiled once for one device's block, with the mesh's axis names bound."""
    specs = [ShapeDtypeStruct(a.shape, a.dtype, a.weak_type) for a in block_avals]
    with par.extend_axis_env(frames):
        return jit(flat_fun).lower(*specs).compile()


# --- pmap -----------------------------------------------------------------------------------------
def _static_tuple(argnums: Any) -> tuple[int, ...]:
    return (int(argnums),) if isinstance(argnums, (int, np.integer)) else tuple(int(a) for a in argnums)


def pmap(fun: Callable | None = None, axis_name: Any = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: Any = (), devices: Sequence[Any] | None = None, backend: str | None = None,
         axis_size: int | None = None, donate_argnums: Any = (), global_arg_shapes: Any = None) -> Callable:
    """Map ``fun`` over the leading axis (``in_axes``) of its inputs, one slice per device.

    The mapped size must not exceed the number of devices (``devices``, default all). Inside
    ``fun`` the collectives over ``axis_name`` combine the devices' values. Outputs stack the
    devices' results along ``out_axes``."""
    if fun is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                                 static_broadcasted_argnums=static_broadcasted_argnums, devices=devices,
                                 backend=backend, axis_size=axis_size, donate_argnums=donate_argnums)
    if not callable(fun):
        raise TypeError(f"pmap expects a callable, got {type(fun).__name__}")
    static = _static_tuple(static_broadcasted_argnums)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    programs: dict[Any, tuple] = {}

    @functools.wraps(fun)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        if any(i >= len(args) for i in static):
            raise ValueError(f"pmapped function has static_broadcasted_argnums={static} but was called with only "
                             f"{len(args)} positional argument{'s' if len(args) != 1 else ''}. All static broadcasted "
                             "arguments must be passed positionally.")
        dynamic = [i for i in range(len(args)) if i not in static]
        statics = tuple(args[i] for i in static)
        dyn_args = tuple(args[i] for i in dynamic)
        dyn_in_axes = tuple(in_axes[i] for i in dynamic) if isinstance(in_axes, tuple) else in_axes

        def with_statics(*dyn: Any, **kw: Any) -> Any:
            full = list(args)
            for i, x in zip(dynamic, dyn):
                full[i] = x
            return fun(*full, **kw)

        leaves, in_tree = tree_util.flatten_for_trace((dyn_args, kwargs))
        in_dims = batching._canonical_in_dims(
            leaves, batching._flatten_axes("in_axes", in_tree, (dyn_in_axes, 0), leaves))
        size = batching._axis_size(fun, dyn_args, kwargs, leaves, in_dims, axis_size)
        devs = list(devices) if devices is not None else _default_devices()
        processes, global_size = None, size
        if len({d.process_index for d in devs}) > 1:  # (ember.distributed: each process maps its own devices)
            by_process = [[d for d in devs if d.process_index == p] for p in range(shd.process_count())]
            if size > min(len(g) for g in by_process):
                raise ValueError(f"pmap over the devices of {len(by_process)} processes: each process maps its own "
                                 f"devices, so the mapped axis ({size}) must not exceed a process's device count "
                                 f"({min(len(g) for g in by_process)})")
            used = [d for g in by_process for d in g[:size]]
            processes, global_size = [d.process_index for d in used], len(used)
            devs = by_process[shd.process_index()]
        elif size > len(devs):
            raise ValueError(f"compiling computation that requires {size} logical devices, but only {len(devs)} XLA "
                             f"devices are available (num_replicas={size})")
        if _is_traced(leaves):
            return batching.vmap(with_statics, in_axes=dyn_in_axes, out_axes=out_axes, axis_name=axis_name,
                                 _axis_kind=par.PMAP)(*dyn_args, **kwargs)
        if processes is None and _device_backend_of_devices(devs) is not None:
            key = ("spmd", in_tree, tuple(in_dims), size, _hashable(statics))
            spmd = programs.get(key)
            if spmd is None:
                spmd = programs[key] = _pmap_over_mesh(with_statics, in_tree, in_dims, out_axes, axis_name,
                                                       devs[:size])
            return spmd(*leaves)
        leaves = [x if isinstance(x, Array) else Array(np.asarray(x)) for x in leaves]
        block_avals = [aval(x) if d is None else aval(x)._replace(shape=aval(x).shape[:d] + aval(x).shape[d + 1:])
                       for x, d in zip(leaves, in_dims)]
        key = (in_tree, tuple(block_avals), tuple(in_dims), size, global_size, _hashable(statics))
        built = programs.get(key)
        if built is None:
            out_tree_box: list = []

            def flat_fun(*flat: Any) -> list:
                call_args, call_kwargs = tree_util.tree_unflatten(in_tree, list(flat))
                out_leaves, out_tree = tree_util.flatten_for_trace(with_statics(*call_args, **call_kwargs))
                out_tree_box.append(out_tree)
                return out_leaves

            program = _compile_block_program(flat_fun, block_avals, ((axis_name, global_size, par.PMAP),))
            built = programs[key] = (program, out_tree_box[0])
        program, out_tree = built
        values = [np.asarray(x) for x in leaves]
        per_device = [[v if d is None else np.take(v, k, axis=d) for v, d in zip(values, in_dims)]
                      for k in range(size)]
        per_device = [[Array(np.ascontiguousarray(v), a) for v, a in zip(row, block_avals)] for row in per_device]
        results = run_per_device(program, (axis_name,), (global_size,), per_device, processes)
        flat_results = [tree_util.leaves_for_trace(r) for r in results]
        targets = batching._flatten_axes("out_axes", out_tree, out_axes, flat_results[0])
        outs = []
        for i, target in enumerate(targets):
            parts = [np.asarray(r[i]) for r in flat_results]
            if target is None:
                outs.append(shd.place(Array(parts[0]), shd.SingleDeviceSharding(devs[0])))
                continue
            target %= parts[0].ndim + 1
            out = Array(np.stack(parts, axis=target))
            outs.append(shd.place(out, shd.pmap_sharding(devs[:size], out.ndim, target)))
        return tree_util.tree_unflatten(out_tree, outs)

    def lower(*args: Any, **kwargs: Any) -> Any:
        """The ahead-of-time stages of the mapped function (``pmap(f).lower(x).compile()``), as
        ``jit``'s: the program is the mapped one as ``jit(pmap(f))`` traces it, the devices'
        programs batched into one (JAX 0.10 also lowers pmap as a jitted program)."""
        def program(*call_args: Any, **call_kwargs: Any) -> Any:  # (not ``mapped``: jit would copy its ``lower``)
            return mapped(*call_args, **call_kwargs)

        program.__name__ = program.__qualname__ = errors.function_name(fun, "pmap")
        return jit(program, static_argnums=static).lower(*args, **kwargs)

    mapped.lower = lower  # type: ignore[attr-defined]
    return mapped


def _default_devices() -> list:
    """pmap's devices: the default backend's (an accelerator's, or XLA's CPU plugin's when chosen),
    else ember's CPU devices."""
    backend = registry.get()
    return shd.devices() if backend.host_buffers else list(backend.local_devices())


def _device_backend_of_devices(devs: Sequence[Any]) -> Any:
    return None if not devs else _device_backend(shd.NamedSharding(
        shd.Mesh(np.array(devs[:1], dtype=object), ("_",)), shd.PartitionSpec()))


def _move(x: Any, source: int, target: int) -> Any:
    perm = list(range(aval(x).ndim))
    perm.insert(target, perm.pop(source))
    return lax.transpose(x, perm)


def _pmap_over_mesh(fun: Callable, in_tree: Any, in_dims: Sequence[Any], out_axes: Any, axis_name: Any,
                    devs: Sequence[Any]) -> Callable:
    """pmap over a device backend's devices, as JAX 0.8+ runs it: one program over a 1-D mesh of
    the devices (a shard_map whose blocks are the mapped slices), partitioned by XLA."""
    mesh = shd.Mesh(np.array(list(devs), dtype=object), (axis_name,))
    split, whole = shd.PartitionSpec(axis_name), shd.PartitionSpec()
    out_specs: list = []
    traced: dict[str, Any] = {}  # (what tracing the block found: each output's axis, the output tree)

    def block(*flat: Any) -> list:
        flat = [x if d is None else lax.squeeze(x, (0,)) for x, d in zip(flat, in_dims)]
        call_args, call_kwargs = tree_util.tree_unflatten(in_tree, list(flat))
        out_leaves, out_tree = tree_util.flatten_for_trace(fun(*call_args, **call_kwargs))
        targets = batching._flatten_axes("out_axes", out_tree, out_axes, out_leaves)
        out_specs[:] = [whole if t is None else split for t in targets]
        traced.update(targets=targets, out_tree=out_tree)
        return [o if t is None else lax.expand_dims(o, (0,)) for o, t in zip(out_leaves, targets)]

    def program(*flat: Any) -> list:
        moved = [x if d is None else _move(x, d, 0) for x, d in zip(flat, in_dims)]
        outs = shard_map(block, mesh=mesh, in_specs=tuple(whole if d is None else split for d in in_dims),
                         out_specs=out_specs, check_vma=False)(*moved)
        return [o if t is None else _move(o, 0, t % aval(o).ndim) for o, t in zip(outs, traced["targets"])]

    compiled = jit(program)

    def run(*flat: Any) -> Any:
        outs = compiled(*flat)  # (traced on the first call: the output structure is known after it)
        return tree_util.tree_unflatten(traced["out_tree"], outs)
    return run


def _hashable(statics: tuple) -> Any:
    try:
        hash(statics)
        return statics
    except TypeError:
        raise ValueError("Non-hashable static arguments are not supported. An error occurred while trying to hash "
                         f"an object of type {type(statics)}, {statics}.") from None


# --- shard_map ------------------------------------------------------------------------------------
def _is_spec(x: Any) -> bool:
    return x is None or isinstance(x, shd.PartitionSpec)


def _flatten_specs(what: str, specs: Any, treedef: Any, count: int) -> list:
    """One PartitionSpec per leaf: ``specs`` is a tree prefix whose leaves are PartitionSpecs."""
    spec_leaves, spec_tree = tree_util.tree_flatten(specs, is_leaf=_is_spec)
    if spec_tree == treedef:
        return spec_leaves
    dummy = tree_util.tree_unflatten(treedef, list(range(count)))
    out: list = [None] * count
    try:
        tree_util.tree_map(lambda s, sub: [out.__setitem__(i, s) for i in tree_util.leaves_for_trace(sub)], specs,
                           dummy,
                           is_leaf=_is_spec)
    except (ValueError, TypeError):
        raise ValueError(f"shard_map {what} specification must be a tree prefix of the corresponding value, got "
                         f"specification {specs} for value tree {treedef}.") from None
    return out


def _check_spec(what: str, spec: Any, x_aval: Any, mesh: Any, position: str) -> tuple:
    if spec is None:
        # (JAX's error: None is a spec only where it infers one, from Explicit mesh axes, which ember has not)
        raise TypeError(f"shard_map {what} argument must be a pytree of `jax.sharding.PartitionSpec` instances, "
                        f"but it was `None` for {position}")
    if len(spec) > x_aval.ndim:
        raise ValueError(f"shard_map applied to the function was given {what} {spec!r} for {position} of type "
                         f"{x_aval.str_short()}, but the spec has length {len(spec)} while the value has rank "
                         f"{x_aval.ndim}")
    splits = [shd.spec_names(e) for e in tuple(spec) + (None,) * (x_aval.ndim - len(spec))]
    for names in splits:
        for n in names:
            if n not in mesh.axis_names:
                raise ValueError(f"Resource axis: {n} of {spec} is not found in mesh: {tuple(mesh.axis_names)}.")
    for d, names in enumerate(splits):
        parts = math.prod(mesh.shape[n] for n in names)
        if x_aval.shape[d] % parts:
            raise ValueError(f"shard_map applied to the function was given {what} {spec!r} for {position} of shape "
                             f"{x_aval.shape}, but dimension {d} of size {x_aval.shape[d]} is not divisible by "
                             f"the mesh axes' size {parts}")
    return tuple(splits)


def _to_blocks(x: Any, splits: tuple, mesh: Any) -> tuple[Any, list[bool]]:
    """``x`` with one leading dimension per mesh axis it is split over (in the mesh's order),
    then the block's dimensions; and which mesh axes have a dimension."""
    from_names = {n: d for d, names in enumerate(splits) for n in names}
    shape = aval(x).shape
    grown, labels = [], []
    for d, names in enumerate(splits):
        for n in names:
            grown.append(mesh.shape[n])
            labels.append(n)
        grown.append(shape[d] // math.prod(mesh.shape[n] for n in names))
        labels.append(d)
    y = lax.reshape(x, tuple(grown))
    order = [n for n in mesh.axis_names if n in from_names] + list(range(len(shape)))
    y = lax.transpose(y, [labels.index(lab) for lab in order])
    return y, [n in from_names for n in mesh.axis_names]


def _from_blocks(y: Any, splits: tuple, mesh: Any) -> Any:
    """The inverse of ``_to_blocks`` for an output with a leading dimension for *every* mesh axis:
    axes the spec does not split over are replicated, and the first block is kept."""
    used = {n for names in splits for n in names}
    k = len(mesh.axis_names)
    for i in reversed(range(k)):
        if mesh.axis_names[i] not in used:
            y = lax.index_in_dim(y, 0, i, keepdims=False)
    kept = [n for n in mesh.axis_names if n in used]
    block = aval(y).shape[len(kept):]
    order, final = [], []
    for d, names in enumerate(splits):
        for n in names:
            order.append(kept.index(n))
        order.append(len(kept) + d)
        final.append(block[d] * math.prod(mesh.shape[n] for n in names))
    return lax.reshape(lax.transpose(y, order), tuple(final))


_NO_OUT_SPECS = object()  # (out_specs=None is a spec: that of a function returning None)


def shard_map(f: Callable | None = None, /, *, out_specs: Any = _NO_OUT_SPECS, mesh: Any = None,
              in_specs: Any = None, axis_names: Any = frozenset(), check_vma: bool = True,
              check_rep: Any = None) -> Callable:
    """Run ``f`` on each device's blocks of the inputs (split over the mesh's axes as ``in_specs``
    say) and assemble the outputs from the devices' blocks (``out_specs``); inside ``f`` the
    mesh's axis names are bound for the collectives."""
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, mesh=mesh, in_specs=in_specs, axis_names=axis_names,
                                 check_vma=check_vma, check_rep=check_rep)
    if out_specs is _NO_OUT_SPECS:
        raise TypeError("shard_map() missing 1 required keyword-only argument: 'out_specs'")
    if check_rep is not None:
        check_vma = bool(check_rep)
    kind = par.SHARD_MAP_VMA if check_vma else par.SHARD_MAP
    given_mesh = mesh
    programs: dict[Any, tuple] = {}
    staged: dict[Any, Callable] = {}  # (per mesh: jit's cache does not know the context mesh)

    @functools.wraps(f)
    def mapped(*args: Any) -> Any:
        mesh = given_mesh
        if mesh is None:  # (the context mesh when called, as in JAX: set_mesh may come after the decorator)
            mesh = shd.get_mesh()
            if mesh.empty:
                raise ValueError("The context mesh cannot be empty. Use `jax.set_mesh(mesh)` to enter into a mesh "
                                 "context or pass a mesh to shard_map.")
        return over(mesh, *args)

    def over(mesh: Any, *args: Any) -> Any:
        frames = tuple((n, mesh.shape[n], kind) for n in mesh.axis_names)
        leaves, in_tree = tree_util.flatten_for_trace(args)
        specs = _flatten_specs("in_specs", in_specs if isinstance(in_specs, tuple) and not isinstance(
            in_specs, shd.PartitionSpec) else (in_specs,) * len(args) if _is_spec(in_specs) else in_specs,
            in_tree, len(leaves))
        avals_in = [aval(x) for x in leaves]
        splits = [_check_spec("in_specs", s, a, mesh, f"argument {i}") for i, (s, a) in
                  enumerate(zip(specs, avals_in))]
        out_box: list = []

        def flat_body(*blocks: Any) -> list:
            if check_vma:  # (what each input varies over: differentiation sums invariant values' gradients)
                par.seed_varying(blocks, [frozenset(n for names in sp for n in names) for sp in splits])
            out_leaves, out_tree = tree_util.flatten_for_trace(f(*tree_util.tree_unflatten(in_tree, list(blocks))))
            out_box.append(out_tree)
            return out_leaves

        def out_splits(out_tree: Any, out_avals: Sequence[Any]) -> list:
            o_specs = _flatten_specs("out_specs", out_specs, out_tree, out_tree.num_leaves)
            return [_check_spec("out_specs", s, a._replace(shape=(0,) * a.ndim), mesh, f"output {i}")
                    for i, (s, a) in enumerate(zip(o_specs, out_avals))]

        on_devices = mesh.abstract_mesh is not mesh and _device_backend_of_mesh(mesh) is not None
        if on_devices and not _is_traced(leaves):  # (a device backend's mesh: staged, run as one program)
            run = staged.get(mesh)
            if run is None:
                run = staged[mesh] = jit(functools.wraps(f)(functools.partial(over, mesh)))
            outs = run(*args)
            out_leaves, out_tree = tree_util.flatten_for_trace(outs)
            o_specs = _flatten_specs("out_specs", out_specs, out_tree, len(out_leaves))
            return tree_util.tree_unflatten(out_tree, [_as_written(o, mesh, s) for o, s in zip(out_leaves, o_specs)])
        if on_devices:
            block_avals = [a._replace(shape=tuple(d // math.prod(mesh.shape[n] for n in names)
                                                  for d, names in zip(a.shape, sp)))
                           for a, sp in zip(avals_in, splits)]
            with par.extend_axis_env(frames):
                body, consts = trace_program(flat_body, block_avals, "shard_map")
            out_tree = out_box[0]
            block_outs = body.out_avals
            const_specs = tuple(tuple(() for _ in range(aval(c).ndim)) for c in consts)
            outs = par.shard_map_p.bind(*consts, *leaves, jaxpr=body, mesh=mesh,
                                        in_specs=const_specs + tuple(splits),
                                        out_specs=tuple(out_splits(out_tree, block_outs)), check_vma=check_vma)
            return tree_util.tree_unflatten(out_tree, list(outs))
        if _is_traced(leaves) or mesh.abstract_mesh is mesh:
            blocked = [_to_blocks(x, sp, mesh) for x, sp in zip(leaves, splits)]
            fun = flat_body
            for i in reversed(range(len(mesh.axis_names))):
                axes_here = [0 if used[i] else None for _, used in blocked]
                fun = batching.vmap(fun, in_axes=tuple(axes_here), out_axes=0, axis_name=mesh.axis_names[i],
                                    axis_size=mesh.axis_sizes[i], _axis_kind=kind)
            outs = fun(*[y for y, _ in blocked])
            out_tree = out_box[0]
            k = len(mesh.axis_names)
            block_avals = [aval(o)._replace(shape=aval(o).shape[k:]) for o in outs]
            return tree_util.tree_unflatten(out_tree, [_from_blocks(o, sp, mesh) for o, sp in
                                                      zip(outs, out_splits(out_tree, block_avals))])
        leaves = [x if isinstance(x, Array) else Array(np.asarray(x)) for x in leaves]
        maps = [shd.NamedSharding(mesh, s).devices_indices_map(a.shape) for s, a in zip(specs, avals_in)]
        block_avals = [a._replace(shape=shd.NamedSharding(mesh, s).shard_shape(a.shape))
                       for s, a in zip(specs, avals_in)]
        key = (in_tree, tuple(block_avals), tuple(specs), mesh)
        built = programs.get(key)
        if built is None:
            program = _compile_block_program(flat_body, block_avals, frames)
            built = programs[key] = (program, out_box[0])
        program, out_tree = built
        devs = list(mesh.devices.flat)
        processes = None
        if len({d.process_index for d in devs}) > 1:  # (a global mesh: this process runs its own devices)
            processes = [d.process_index for d in devs]
            devs = [d for d in devs if d.process_index == shd.process_index()]
            if not devs:
                raise ValueError(f"shard_map: the mesh {mesh} has no device of this process "
                                 f"({shd.process_index()}); every process of the run must hold some of its devices")
        values = [np.asarray(x) for x in leaves]
        per_device = [[Array(np.ascontiguousarray(v[m[d]]), a) for v, m, a in zip(values, maps, block_avals)]
                      for d in devs]
        results = [tree_util.leaves_for_trace(r) for r in
                   run_per_device(program, tuple(mesh.axis_names), tuple(mesh.axis_sizes), per_device, processes)]
        o_avals = [aval(o) for o in results[0]]
        o_specs = _flatten_specs("out_specs", out_specs, out_tree, out_tree.num_leaves)
        outs = []
        for i, (spec, a) in enumerate(zip(o_specs, o_avals)):
            sp = _check_spec("out_specs", spec, a._replace(shape=(0,) * a.ndim), mesh, f"output {i}")
            shape = tuple(dim * math.prod(mesh.shape[n] for n in names) for dim, names in zip(a.shape, sp))
            full = np.empty(shape, a.dtype) if processes is None else np.zeros(shape, a.dtype)
            sharding = shd.NamedSharding(mesh, spec)
            here = {id(d): k for k, d in enumerate(devs)}  # (another process's blocks stay zeros here)
            for dev, index in reversed(list(sharding.devices_indices_map(shape).items())):
                if id(dev) in here:  # (replicas: the first device's block wins)
                    full[index] = np.asarray(results[here[id(dev)]][i])
            outs.append(shd.place(Array(full), sharding))
        return tree_util.tree_unflatten(out_tree, outs)

    return mapped


def _shard_map_impl(*args: Any, jaxpr: Any, mesh: Any, in_specs: tuple, out_specs: tuple, check_vma: bool) -> list:
    """A staged ``shard_map`` evaluated where no device program runs it (the reference interpreter,
    or a transformation's evaluation): as the batched program, one vmap per mesh axis."""
    kind = par.SHARD_MAP_VMA if check_vma else par.SHARD_MAP
    blocked = [_to_blocks(x, sp, mesh) for x, sp in zip(args, in_specs)]

    def fun(*blocks: Any) -> list:
        return eval_closed_by_binding(jaxpr, *blocks)
    for i in reversed(range(len(mesh.axis_names))):
        fun = batching.vmap(fun, in_axes=tuple(0 if used[i] else None for _, used in blocked), out_axes=0,
                            axis_name=mesh.axis_names[i], axis_size=mesh.axis_sizes[i], _axis_kind=kind)
    outs = fun(*[y for y, _ in blocked])
    return [_from_blocks(o, sp, mesh) for o, sp in zip(outs, out_specs)]


impl_rules[par.shard_map_p] = _shard_map_impl


# --- placing arrays --------------------------------------------------------------------------------
def make_array_from_callback(shape: Sequence[int], sharding: shd.Sharding, data_callback: Callable,
                             dtype: Any = None) -> Array:
    """An array of ``shape`` whose blocks are ``data_callback(index)`` for each device's index."""
    shape = tuple(int(s) for s in shape)
    full = None
    for index in sharding.devices_indices_map(shape).values():
        block = np.asarray(data_callback(index))
        if full is None:
            full = np.empty(shape, dtype or block.dtype)
        full[index] = block
    if full is None:
        full = np.empty(shape, dtype or np.float32)
    if _device_backend(sharding) is not None:  # (a device backend's mesh: each device gets its block)
        return device_put(full, sharding)
    return shd.place(Array(full), sharding)


def _as_written(x: Any, mesh: Any, spec: Any) -> Any:
    """An eager shard_map's output on a device mesh, with JAX's sharding for it: ``out_specs`` as
    written (``P('i', None)`` keeps its None, which XLA's layout read back does not say)."""
    buffer = getattr(x, "_device", None)
    have = getattr(buffer, "sharding", None)
    if not isinstance(have, shd.NamedSharding) or not isinstance(spec, shd.PartitionSpec) or \
            tuple(have.spec) == tuple(spec):
        return x
    want = shd.NamedSharding(mesh, spec)
    if have.mesh != mesh or have._splits(x.ndim) != want._splits(x.ndim):
        return x
    backend = _device_backend_of_mesh(mesh)
    return Array.from_buffer(backend.split_buffer(buffer.shards, want, x.shape, x.dtype), x.aval)


def _device_backend_of_mesh(mesh: Any) -> Any:
    return _device_backend(shd.NamedSharding(mesh, shd.PartitionSpec()))


def _device_backend(sharding: shd.Sharding) -> Any:
    """The device backend (an accelerator's, or XLA's CPU plugin's) whose devices ``sharding``
    names; None for ember's CPU devices."""
    first = next(iter(sharding._device_list()), None)
    if first is None or isinstance(first, shd.Device):
        return None
    backend = registry.of_device(first)
    return None if backend.host_buffers else backend


def make_array_from_single_device_arrays(shape: Sequence[int], sharding: shd.Sharding, arrays: Sequence[Any], *,
                                         dtype: Any = None) -> Array:
    """The array of global ``shape`` whose blocks are ``arrays``, one per addressable device of
    ``sharding`` in the order of ``sharding.addressable_devices_indices_map(shape)``. On a device
    backend, blocks already on their devices become the array's buffers as they are."""
    shape = tuple(int(s) for s in shape)
    index_map = sharding.addressable_devices_indices_map(shape)
    if len(arrays) != len(index_map):
        raise ValueError(f"make_array_from_single_device_arrays: the sharding has {len(index_map)} addressable "
                         f"devices, got {len(arrays)} arrays")
    block_shape = sharding.shard_shape(shape)
    for k, (a, device) in enumerate(zip(arrays, index_map)):
        if tuple(a.shape) != tuple(block_shape):
            raise ValueError(f"Expected shard shape {block_shape} doesn't match the single device array shape "
                             f"{tuple(a.shape)} (array {k}, for {device!r})")
    dtype = np.dtype(dtype) if dtype is not None else np.asarray(arrays[0]).dtype if arrays else np.float32
    backend = _device_backend(sharding)
    if backend is not None:
        blocks = [a.device_buffer if type(a) is Array else None for a in arrays]
        if all(b is not None and b.backend == backend.name and b.device is d for b, d in zip(blocks, index_map)):
            order = {id(d): k for k, d in enumerate(index_map)}
            held = [blocks[order[id(d)]] for d in sharding._device_list()]
            return Array.from_buffer(backend.split_buffer(held, sharding, shape, dtype),
                                     ShapedArray(shape, dtypes.canonicalize_dtype(dtype)))
    full = np.empty(shape, dtype)
    for a, index in zip(arrays, index_map.values()):
        full[index] = np.asarray(a)
    if backend is not None:
        return device_put(full, sharding)
    return shd.place(Array(full), sharding)


def reshard(x: Any, out_shardings: Any) -> Any:
    """``x`` moved to the placement ``out_shardings`` (values unchanged)."""
    return par.place_tree(x, out_shardings)

