"""``jit(f, in_shardings=..., out_shardings=...)``: one program per device, partitioned from ``f``'s.

When an input's sharding splits it over a mesh axis (a batch split over ``'data'``), ``jit`` traces
``f`` on the global shapes as always, then rewrites its program into a per-device one, which
``shard_map`` compiles natively once and runs on every device of the mesh:

- Each value carries a *spec*: for each dimension, the mesh axes it is split over (a
  ``PartitionSpec`` entry). The inputs' come from ``in_shardings`` (or, where that says ``None``,
  from where the argument already is); equations propagate them:
  elementwise operations keep them, transposes permute them, ``broadcast_in_dim`` maps them to the
  output's dimensions (its ``shape`` becomes the block's), a ``reshape`` that keeps its leading
  dimensions keeps theirs, and a ``dot_general`` keeps its batch and free dimensions' specs.
- A reduction across a split dimension (``reduce_sum`` / ``max`` / ``min`` over it, or a
  ``dot_general`` contracting it, as the gradient of a weight contracts the batch) computes each
  device's part and then combines the parts with a ``psum`` / ``pmax`` / ``pmin`` over that axis:
  this is where data parallelism's all-reduce of gradients appears.
- An operand that is replicated where its partner is split is sliced to this device's block
  (``axis_index``); a split operand that an equation cannot take split (anything else: control
  flow, gathers, sorts...) is gathered whole first (``all_gather``), so every program runs, and
  values equal the unpartitioned program's.
- Calls (``jit``, ``custom_jvp_call``, ``custom_vjp_call``, ``checkpoint``) are partitioned through.
- ``out_shardings`` say how outputs are placed (gathering or slicing their blocks); unspecified
  outputs keep their propagated spec. ``with_sharding_constraint`` inside ``f`` does the same to a
  value mid-program.

Shardings that split nothing (``SingleDeviceSharding``, replicated ``NamedSharding``) only place
the outputs. Under a trace (``jit`` inside ``jit``, ``grad`` of a sharded function) shardings do not
change values, so they are not acted on, as placement is a property of concrete arrays.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember import api, lax, tree_util
from ember.core import sharding as shd
from ember.core.array import Array
from ember.core.avals import aval_of_value
from ember.core.calls import checkpoint_p, custom_jvp_call_p, custom_vjp_call_p, custom_vmap_call_p, jit_p
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal
from ember.lax import parallel as par
from ember.lax.base import aval
from ember.lax.dot import dot_general_p
from ember.lax.elementwise import ELEMENTWISE
from ember.lax.parallel import sharding_constraint_p
from ember.lax.reductions import reduce_max_p, reduce_min_p, reduce_sum_p
from ember.lax.shapes import broadcast_in_dim_p, reshape_p, squeeze_p, transpose_p
from ember.parallel import shard_map
from ember.runtime.executable import compile_jaxpr

__all__ = ["per_device_jaxpr"]

Spec = tuple  # per dimension, the tuple of mesh axes it is split over


def _replicated(ndim: int) -> Spec:
    return ((),) * ndim


def _is_split(spec: Spec) -> bool:
    return any(spec)


class _Mesh(NamedTuple):
    mesh: Any
    sizes: dict

    def parts(self, names: tuple) -> int:
        return math.prod(self.sizes[n] for n in names)


# --- moving a block between specs -------------------------------------------------------------------
def _convert(x: Any, have: Spec, want: Spec, mesh: _Mesh, broadcast: Any = None) -> Any:
    """This device's block of the value ``x`` (split as ``have``), split as ``want`` instead.
    ``broadcast``: how ``x`` was made, when it is a ``broadcast_in_dim`` of a smaller value
    (operand, its spec, params); then its block is broadcast here rather than sliced out."""
    if broadcast is not None and not _is_split(have) and have != want:
        operand, operand_spec, params = broadcast
        shape, dims = params["shape"], params["broadcast_dimensions"]
        small = aval(operand).shape
        inner = tuple(want[d] if small[i] == shape[d] else () for i, d in enumerate(dims))
        block = _convert(operand, operand_spec, inner, mesh)
        return broadcast_in_dim_p.bind(block, **{**params, "shape": _local_shape(shape, want, mesh)})
    for d, (h, w) in enumerate(zip(have, want)):
        if h and h != w:
            x = par.all_gather(x, h if len(h) > 1 else h[0], axis=d, tiled=True)
    for d, (h, w) in enumerate(zip(have, want)):
        if w and h != w:
            block = aval(x).shape[d] // mesh.parts(w)
            start = par.axis_index(w if len(w) > 1 else w[0]) * block
            x = lax.dynamic_slice_in_dim(x, start, block, axis=d)
    return x


def _spec_of_sharding(sharding: Any, ndim: int, mesh: _Mesh) -> Spec:
    """A NamedSharding's (or a PartitionSpec's) split, leaving out the mesh's axes of size one."""
    spec = sharding if isinstance(sharding, shd.PartitionSpec) else sharding.spec
    entries = tuple(spec) + (None,) * (ndim - len(spec))
    return tuple(tuple(n for n in shd.spec_names(e) if mesh.sizes[n] > 1) for e in entries)


# --- the rules: (operand specs) -> (specs the operands must have, output specs, combine, params) ----
class _Plan(NamedTuple):
    operands: list  # the spec each operand is converted to first
    outputs: list  # each output's spec (after ``combine``)
    combine: list  # per output: None, or (collective, axes) combining the devices' parts
    params: dict  # the equation's parameters for blocks


def _gather_all(eqn: Any, specs: list) -> _Plan:
    return _Plan([_replicated(len(s)) for s in specs], [_replicated(v.aval.ndim) for v in eqn.outvars],
                 [None] * len(eqn.outvars), eqn.params)


def _local_shape(shape: Sequence[int], spec: Spec, mesh: _Mesh) -> tuple:
    return tuple(int(s) // mesh.parts(names) for s, names in zip(shape, spec))


def _elementwise(eqn: Any, specs: list, mesh: _Mesh) -> _Plan:
    ndim = eqn.outvars[0].aval.ndim
    shape = eqn.outvars[0].aval.shape
    full = [len(s) == ndim and a.aval.shape == shape for s, a in zip(specs, eqn.invars)]
    target = next((s for s, f in zip(specs, full) if f and _is_split(s)), _replicated(ndim))

    def wanted(s: Spec, a: Any) -> Spec:
        if len(s) != ndim:  # (a scalar: as it is)
            return s
        # (a dimension of size 1 broadcast against the others, as JAX's binary operations do: whole)
        return tuple(t if a.aval.shape[d] == shape[d] else () for d, t in enumerate(target))
    return _Plan([wanted(s, a) for s, a in zip(specs, eqn.invars)], [target] * len(eqn.outvars),
                 [None] * len(eqn.outvars), eqn.params)


_COMBINE = {reduce_sum_p: "psum", reduce_max_p: "pmax", reduce_min_p: "pmin"}


def _reduction(eqn: Any, specs: list, mesh: _Mesh) -> _Plan:
    (spec,) = specs
    axes = set(eqn.params["axes"])
    across = tuple(n for d in sorted(axes) for n in spec[d])
    out = tuple(s for d, s in enumerate(spec) if d not in axes)
    return _Plan([spec], [out], [(_COMBINE[eqn.primitive], across) if across else None], eqn.params)


def _dot_general(eqn: Any, specs: list, mesh: _Mesh) -> _Plan:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    ls, rs = list(specs[0]), list(specs[1])
    across: list = []
    for a, b in zip(lc, rc):  # a contracted pair: each device sums its part, a psum sums the parts
        names = ls[a] or rs[b]
        if ls[a] and rs[b] and ls[a] != rs[b]:
            names = ()
        ls[a] = rs[b] = names
        across.extend(names)
    for a, b in zip(lb, rb):
        names = ls[a] or rs[b]
        if ls[a] and rs[b] and ls[a] != rs[b]:
            names = ()
        ls[a] = rs[b] = names
    lfree = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rfree = [d for d in range(len(rs)) if d not in rc and d not in rb]
    used = set(across) | {n for d in lb for n in ls[d]}
    for free, side in ((lfree, ls), (rfree, rs)):  # an axis may split one output dimension only
        for d in free:
            if set(side[d]) & used:
                side[d] = ()
            used |= set(side[d])
    out = tuple([ls[d] for d in lb] + [ls[d] for d in lfree] + [rs[d] for d in rfree])
    return _Plan([tuple(ls), tuple(rs)], [out], [("psum", tuple(across)) if across else None], eqn.params)


def _transpose(eqn: Any, specs: list, mesh: _Mesh) -> _Plan:
    (spec,) = specs
    return _Plan([spec], [tuple(spec[d] for d in eqn.params["permutation"])], [None], eqn.params)


def _broadcast_in_dim(eqn: Any, specs: list, mesh: _Mesh) -> _Plan:
    (spec,) = specs
    shape, dims = eqn.params["shape"], eqn.params["broadcast_dimensions"]
    operand = eqn.invars[0].aval.shape
    kept = tuple(s if operand[i] == shape[dims[i]] else () for i, s in enumerate(spec))
    out = [()] * len(shape)
    for i, d in enumerate(dims):
        out[d] = kept[i]
    out = tuple(out)
    return _Plan([kept], [out], [None], {**eqn.params, "shape": _local_shape(shape, out, mesh)})


def _reshape(eqn: Any, specs: list, mesh: _Mesh) -> _Plan:
    (spec,) = specs
    old, new = eqn.invars[0].aval.shape, tuple(eqn.params["new_sizes"])
    if eqn.params.get("dimensions") is not None:
        return _gather_all(eqn, specs)
    lead = 0  # the leading dimensions that the reshape keeps as they are
    while lead < min(len(old), len(new)) and old[lead] == new[lead] and \
            math.prod(old[lead + 1:]) == math.prod(new[lead + 1:]):
        lead += 1
    kept = tuple(s if d < lead else () for d, s in enumerate(spec))
    out = kept[:lead] + ((),) * (len(new) - lead)
    return _Plan([kept], [out], [None], {**eqn.params, "new_sizes": _local_shape(new, out, mesh)})


def _squeeze(eqn: Any, specs: list, mesh: _Mesh) -> _Plan:
    (spec,) = specs
    dims = set(eqn.params["dimensions"])
    return _Plan([spec], [tuple(s for d, s in enumerate(spec) if d not in dims)], [None], eqn.params)


def _constraint(eqn: Any, specs: list, mesh: _Mesh) -> _Plan:
    want = _spec_of_sharding(eqn.params["spec"], eqn.invars[0].aval.ndim, mesh)
    return _Plan([want], [want], [None], eqn.params)


_RULES: dict[Any, Callable] = {
    dot_general_p: _dot_general, transpose_p: _transpose, broadcast_in_dim_p: _broadcast_in_dim,
    reshape_p: _reshape, squeeze_p: _squeeze, sharding_constraint_p: _constraint,
    **{p: _reduction for p in _COMBINE},
}
_CALLS = {jit_p: "jaxpr", custom_jvp_call_p: "call", custom_vjp_call_p: "call", custom_vmap_call_p: "call",
          checkpoint_p: "jaxpr"}


def _plan(eqn: Any, specs: list, mesh: _Mesh) -> _Plan:
    if not any(map(_is_split, specs)):
        return _gather_all(eqn, specs)
    rule = _RULES.get(eqn.primitive)
    if rule is None and eqn.primitive in ELEMENTWISE and not eqn.primitive.multiple_results:
        rule = _elementwise
    return rule(eqn, specs, mesh) if rule is not None else _gather_all(eqn, specs)


# --- running a program on this device's blocks ------------------------------------------------------
def _run(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any], specs: Sequence[Spec],
         mesh: _Mesh) -> tuple[list, list]:
    """``jaxpr`` on blocks ``args`` (split as ``specs``): (output blocks, their specs)."""
    env: dict[int, tuple[Any, Spec]] = {}
    made_by_broadcast: dict[int, tuple] = {}  # replicated broadcasts: (operand, its spec, params)
    for v, c in zip(jaxpr.constvars, consts):
        env[id(v)] = (c, _replicated(v.aval.ndim))
    for v, x, s in zip(jaxpr.invars, args, specs):
        env[id(v)] = (x, s)

    def read(a: Any) -> tuple[Any, Spec]:
        return (a.val, _replicated(a.aval.ndim)) if isinstance(a, Literal) else env[id(a)]

    for eqn in jaxpr.eqns:
        values, in_specs = zip(*map(read, eqn.invars)) if eqn.invars else ((), ())
        field = _CALLS.get(eqn.primitive)
        if field is not None and any(map(_is_split, in_specs)):
            inner = eqn.params[field]
            closed = inner if isinstance(inner, ClosedJaxpr) else ClosedJaxpr(inner, [])
            outs, out_specs = _run(closed.jaxpr, closed.consts, values, in_specs, mesh)
        else:
            plan = _plan(eqn, list(in_specs), mesh)
            values = [_convert(x, have, want, mesh, made_by_broadcast.get(id(v)))
                      for v, x, have, want in zip(eqn.invars, values, in_specs, plan.operands)]
            outs = eqn.primitive.bind(*values, **plan.params)
            outs = list(outs) if eqn.primitive.multiple_results else [outs]
            for i, combine in enumerate(plan.combine):
                if combine is not None:
                    collective, axes = combine
                    outs[i] = getattr(par, collective)(outs[i], axes)
            out_specs = plan.outputs
            if eqn.primitive is broadcast_in_dim_p and not _is_split(out_specs[0]):
                made_by_broadcast[id(eqn.outvars[0])] = (values[0], plan.operands[0], eqn.params)
        for v, x, s in zip(eqn.outvars, outs, out_specs):
            env[id(v)] = (x, s)
    outs, out_specs = zip(*map(read, jaxpr.outvars)) if jaxpr.outvars else ((), ())
    return list(outs), list(out_specs)


def _partition_spec(spec: Spec) -> shd.PartitionSpec:
    entries = [None if not s else s[0] if len(s) == 1 else s for s in spec]
    while entries and entries[-1] is None:  # (JAX's form: P('data'), P())
        entries.pop()
    return shd.PartitionSpec(*entries)


# --- jit's entry -----------------------------------------------------------------------------------
_PLACEMENTS = (shd.Sharding, shd.PartitionSpec)


def _is_placement(x: Any) -> bool:
    return x is None or isinstance(x, _PLACEMENTS)


def _prefix_leaves(what: str, shardings: Any, tree: Any) -> list:
    """One sharding (or None) per leaf of the structure ``tree``: ``shardings`` is one for all of
    them, or a tree prefix of it (a sharding stands for every leaf below it), as in JAX."""
    if _is_placement(shardings):
        return [shardings] * tree.num_leaves
    positions = tree_util.tree_unflatten(tree, list(range(tree.num_leaves)))
    out: list = [None] * tree.num_leaves
    try:
        tree_util.tree_map(lambda s, sub: [out.__setitem__(i, s) for i in tree_util.leaves_for_trace(sub)], shardings,
                           positions, is_leaf=_is_placement)
    except (ValueError, TypeError):
        raise ValueError(f"jit {what} must be a tree prefix of its value, got {shardings!r:.200} for a value of "
                         f"structure {tree}") from None
    return out


def _input_shardings(jitted: Any, args: tuple, kwargs: dict) -> tuple[list, Any, tuple, list]:
    """(flat dynamic arguments, their structure, the static ones, each leaf's sharding or None).
    ``in_shardings`` is one sharding for every argument or a tuple with one tree prefix per
    positional argument, as in JAX; keyword arguments take none."""
    dyn_args, dyn_kwargs, statics = jitted._sig.split(args, kwargs)
    shardings = jitted.in_shardings
    if not _is_placement(shardings) and (not isinstance(shardings, (tuple, list)) or len(shardings) != len(dyn_args)):
        raise ValueError(f"jit in_shardings must be a Sharding, a PartitionSpec, None, or a tuple with one entry per "
                         f"positional argument ({len(dyn_args)}), got {shardings!r:.200}")
    if not _is_placement(shardings):
        shardings = tuple(shardings)
    in_sh = [_named(s) for s in _prefix_leaves("in_shardings", shardings, tree_util.structure_for_trace(dyn_args))]
    leaves, in_tree = tree_util.flatten_for_trace((dyn_args, dyn_kwargs))
    in_sh += [None] * (len(leaves) - len(in_sh))
    return leaves, in_tree, statics, in_sh


def _named(s: Any) -> Any:
    if isinstance(s, shd.PartitionSpec):
        mesh = shd.get_mesh()
        if mesh.empty:
            raise ValueError("jit's in_shardings / out_shardings hold a PartitionSpec, which needs a mesh: use "
                             "`jax.set_mesh(mesh)` or pass a NamedSharding")
        return shd.NamedSharding(mesh, s)
    return s


def _splits(s: Any) -> bool:
    return isinstance(s, shd.NamedSharding) and not s.is_fully_replicated


class _Compiled(NamedTuple):
    run: Callable
    out_tree: Any
    body: Callable


def _build(closed: ClosedJaxpr, out_tree: Any, avals: Sequence[Any], in_sh: list, out_sh: list | None,
           mesh: Any) -> _Compiled:
    m = _Mesh(mesh, dict(mesh.shape))
    in_specs = [_spec_of_sharding(s, a.ndim, m) if isinstance(s, shd.NamedSharding) else _replicated(a.ndim)
                for s, a in zip(in_sh, avals)]
    out_specs_box: list = []

    def body(*blocks: Any) -> list:
        outs, specs = _run(closed.jaxpr, closed.consts, blocks, in_specs, m)
        if out_sh is not None:
            wanted = [_spec_of_sharding(s, v.aval.ndim, m) if isinstance(s, shd.NamedSharding) else None
                      for s, v in zip(out_sh, closed.jaxpr.outvars)]
            outs = [o if w is None else _convert(o, have, w, m) for o, have, w in zip(outs, specs, wanted)]
            specs = [have if w is None else w for have, w in zip(specs, wanted)]
        out_specs_box[:] = [_partition_spec(s) for s in specs]
        return outs

    # (shard_map reads out_specs after tracing the body, which fills them in)
    mapped = shard_map(body, mesh=mesh, in_specs=tuple(_partition_spec(s) for s in in_specs),
                       out_specs=out_specs_box, check_vma=False)
    return _Compiled(mapped, out_tree, body)


def call_sharded(jitted: Any, args: tuple, kwargs: dict) -> Any:
    """``jitted(*args, **kwargs)`` as its ``in_shardings`` / ``out_shardings`` say (api.JitFunction)."""
    sig = jitted._sig
    leaves, in_tree, statics, in_sh = _input_shardings(jitted, args, kwargs)
    in_sh = [s if s is not None or type(x) is not Array else x.sharding for s, x in zip(in_sh, leaves)]
    named = [*in_sh, *(_named(s) for s in tree_util.tree_leaves(jitted.out_shardings, is_leaf=_is_placement)
                      if s is not None)]
    if any(isinstance(s, shd.NamedSharding) and _on_device_mesh(s.mesh) for s in named):
        return _call_on_devices(jitted, args, kwargs, leaves, in_tree, statics, in_sh)
    meshes = {s.mesh for s in in_sh if _splits(s)}
    if len(meshes) > 1:
        raise ValueError(f"jit of {sig.fun_name}: in_shardings use {len(meshes)} different meshes; every split "
                         "argument must be on one mesh")
    if not meshes:  # nothing is split: the program runs whole; the shardings place its outputs
        out = jitted.call_whole(args, kwargs)
        return _place_outputs(out, jitted.out_shardings)
    (mesh,) = meshes
    avals = tuple(map(aval_of_value, leaves))
    key = (in_tree, avals, statics, tuple(in_sh), id(mesh))
    compiled = jitted._sharded_programs.get(key)
    if compiled is None:
        closed, out_tree = jitted.trace_program(avals, in_tree, statics, sig.arg_names(args, kwargs))
        out_leaves_sh = None
        if jitted.out_shardings is not None:  # (one sharding for all outputs, or a tree prefix)
            out_leaves_sh = [_named(s) for s in _prefix_leaves("out_shardings", jitted.out_shardings, out_tree)]
        compiled = _build(closed, out_tree, avals, in_sh, out_leaves_sh, mesh)
        jitted._sharded_programs[key] = compiled
    outs = compiled.run(*leaves)
    return tree_util.tree_unflatten(compiled.out_tree, list(outs))


def _on_device_mesh(mesh: Any) -> bool:
    """Whether ``mesh`` holds a device backend's devices (an accelerator's, or XLA's CPU plugin's),
    whose programs XLA partitions, rather than ember's CPU devices, which ember partitions."""
    devices = getattr(mesh, "devices", None)  # (an abstract mesh has none)
    return devices is not None and not isinstance(next(iter(np.asarray(devices).flat)), shd.Device)


def device_placement(jitted: Any, args: tuple, kwargs: dict, out_tree: Any) -> tuple | None:
    """(mesh, each input's sharding or None, each output's sharding or None) of ``jitted(*args)``
    over a device backend's mesh (its arguments split over one, or its in/out shardings name one);
    None for a program on one device."""
    if jitted.in_shardings is None and jitted.out_shardings is None and not any(
            _splits(getattr(x, "sharding", None)) for x in tree_util.leaves_for_trace((args, kwargs))):
        return None
    leaves, _, _, in_sh = _input_shardings(jitted, args, kwargs)
    in_sh = [s if s is not None or type(x) is not Array else x.sharding for s, x in zip(in_sh, leaves)]
    out_sh: list = [None] * out_tree.num_leaves
    if jitted.out_shardings is not None:
        out_sh = [None if s is None else _named(s) for s in _prefix_leaves("out_shardings", jitted.out_shardings,
                                                                           out_tree)]
    meshes = [s.mesh for s in [*in_sh, *out_sh] if isinstance(s, shd.NamedSharding) and _on_device_mesh(s.mesh)]
    if not meshes:
        return None
    mesh = meshes[0]
    given = {s.mesh for s in tree_util.tree_leaves((jitted.in_shardings, jitted.out_shardings), is_leaf=_is_placement)
             if isinstance(s, shd.NamedSharding)}
    if len(given) > 1:
        raise ValueError(f"jit of {jitted._sig.fun_name}: in_shardings and out_shardings use {len(given)} different "
                         "meshes; every sharding of one program must be on one mesh")
    return (mesh, tuple(s if isinstance(s, shd.NamedSharding) and s.mesh == mesh else None for s in in_sh),
            tuple(s if isinstance(s, shd.NamedSharding) else None for s in out_sh))


def _call_on_devices(jitted: Any, args: tuple, kwargs: dict, leaves: list, in_tree: Any, statics: tuple,
                     in_sh: list) -> Any:
    """``jitted`` over a device backend's mesh: the program is traced once, annotated with the
    inputs' shardings (an unspecified input keeps its own, or is replicated) and the outputs'
    (unspecified: XLA's propagation chooses), and XLA partitions it over the mesh's devices."""
    sig = jitted._sig
    avals = tuple(map(aval_of_value, leaves))
    key = ("devices", in_tree, avals, statics, tuple(in_sh))
    compiled = jitted._sharded_programs.get(key)
    if compiled is None:
        closed, out_tree = jitted.trace_program(avals, in_tree, statics, sig.arg_names(args, kwargs))
        placement = device_placement(jitted, args, kwargs, out_tree)
        donated = sig.donated_leaves(args, kwargs) if not sig.plain else frozenset()
        compiled = jitted._sharded_programs[key] = (compile_jaxpr(closed, sig.fun_name, donated, placement),
                                                    out_tree)
    executable, out_tree = compiled
    return tree_util.tree_unflatten(out_tree, executable(*leaves))


def _place_outputs(out: Any, shardings: Any) -> Any:
    if shardings is None:
        return out
    leaves, tree = tree_util.flatten_for_trace(out)
    placed = [x if s is None else shd.put(x, _named(s))
              for x, s in zip(leaves, _prefix_leaves("out_shardings", shardings, tree))]
    return tree_util.tree_unflatten(tree, placed)


def per_device_jaxpr(jitted: Any, *args: Any, **kwargs: Any) -> ClosedJaxpr:
    """The program each device runs for ``jitted(*args)`` (``jit`` with ``in_shardings``): where the
    ``psum``s of a data-parallel step are, as JAX users read them in the compiled HLO."""
    sig = jitted._sig
    leaves, in_tree, statics, in_sh = _input_shardings(jitted, args, kwargs)
    mesh = next(s.mesh for s in in_sh if _splits(s))
    avals = [aval_of_value(x) for x in leaves]
    closed, out_tree = jitted.trace_program(avals, in_tree, statics, sig.arg_names(args, kwargs))
    compiled = _build(closed, out_tree, avals, in_sh, None, mesh)
    m = _Mesh(mesh, dict(mesh.shape))
    blocks = [np.zeros(s.shard_shape(aval(x).shape) if isinstance(s, shd.NamedSharding)
                       else aval(x).shape, aval(x).dtype) for x, s in zip(leaves, in_sh)]
    frames = [(n, m.sizes[n], par.SHARD_MAP) for n in mesh.axis_names]
    with par.extend_axis_env(frames):
        return api.make_jaxpr(compiled.body)(*blocks)


api.register_sharded_call(call_sharded, device_placement)
