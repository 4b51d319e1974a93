"""Derivatives of the collectives (``ember.lax.parallel``).

Every collective except ``pmax``, ``pmin`` and ``axis_index`` is linear, so its tangent is the
same collective of the tangent. Their transposes are JAX's:

- ``psum`` transposes to ``psum`` under ``pmap``, ``vmap`` and ``shard_map(check_vma=False)``
  (every device's output depends on every device's input), and to a copy (a broadcast of the
  cotangent, which is the same on every device) under ``shard_map(check_vma=True)``, where its
  output is invariant along the axis. The binding records which (the ``vma`` parameter).
- ``all_gather`` and ``psum_scatter`` transpose to each other, ``ppermute`` to the inverse
  permutation, ``all_to_all`` to the one with split and concat axes swapped.
- ``pmax`` and ``pmin``: the tangent follows the chosen elements (averaged over ties).
"""
from __future__ import annotations

from typing import Any, Sequence

from ember import lax
from ember.core.ir import ClosedJaxpr, Jaxpr, Var
from ember.core.trace import set_current_trace
from ember.lax import parallel as par
from ember.lax.base import aval
from ember.transforms.batching import batch_jaxpr, batching_rules, move_batch_axis
from ember.transforms.jvp import deflinear, defzero, jvp_jaxpr, jvp_rules
from ember.transforms.partial_eval import partial_eval_jaxpr, partial_eval_rules
from ember.transforms.programs import eval_closed_by_binding, merge_by, select_by, trace_program
from ember.transforms.tangents import Zero, instantiate, match_type
from ember.transforms.transpose import is_undefined, transpose_jaxpr, transpose_rules

for _p in (par.psum_p, par.ppermute_p, par.all_gather_p, par.psum_scatter_p, par.all_to_all_p):
    deflinear(_p)
defzero(par.axis_index_p)


def _extremum_jvp(p: Any) -> Any:
    def rule(primals: tuple, tangents: tuple, *, axes: tuple) -> tuple[Any, Any]:
        (x,), (t,) = primals, tangents
        out = p.bind(x, axes=axes)
        if isinstance(t, Zero):
            return out, Zero(aval(out))
        chosen = lax.eq(x, out)
        dtype = aval(x).dtype
        picked = lax.select(chosen, instantiate(t), lax.broadcast_in_dim(lax.convert_element_type(0, dtype),
                                                                         aval(x).shape, ()))
        count = par.psum_p.bind(lax.convert_element_type(chosen, dtype), axes=axes, vma=False)
        return out, lax.div(par.psum_p.bind(picked, axes=axes, vma=False), count)
    return rule


jvp_rules[par.pmax_p] = _extremum_jvp(par.pmax_p)
jvp_rules[par.pmin_p] = _extremum_jvp(par.pmin_p)


def _linear_transpose(transpose: Any) -> Any:
    def rule(ct: Any, x: Any, **params: Any) -> list:
        if isinstance(ct, Zero):
            return [Zero(x.aval)]
        return [transpose(ct, **params)]
    return rule


def _psum_transpose(ct: Any, *, axes: tuple, vma: bool) -> Any:
    return ct if vma else par.psum_p.bind(ct, axes=axes, vma=vma)


def _all_gather_transpose(ct: Any, *, axes: tuple, axis_size: int, axis: int) -> Any:
    return par.psum_scatter_p.bind(ct, axes=axes, axis_size=axis_size, scatter_dimension=axis)


def _psum_scatter_transpose(ct: Any, *, axes: tuple, axis_size: int, scatter_dimension: int) -> Any:
    return par.all_gather_p.bind(ct, axes=axes, axis_size=axis_size, axis=scatter_dimension)


def _ppermute_transpose(ct: Any, *, axes: tuple, perm: tuple) -> Any:
    return par.ppermute_p.bind(ct, axes=axes, perm=tuple((dst, src) for src, dst in perm))


def _all_to_all_transpose(ct: Any, *, axes: tuple, axis_size: int, split_axis: int, concat_axis: int) -> Any:
    return par.all_to_all_p.bind(ct, axes=axes, axis_size=axis_size, split_axis=concat_axis, concat_axis=split_axis)


transpose_rules[par.psum_p] = _linear_transpose(_psum_transpose)
transpose_rules[par.all_gather_p] = _linear_transpose(_all_gather_transpose)
transpose_rules[par.psum_scatter_p] = _linear_transpose(_psum_scatter_transpose)
transpose_rules[par.ppermute_p] = _linear_transpose(_ppermute_transpose)
transpose_rules[par.all_to_all_p] = _linear_transpose(_all_to_all_transpose)

deflinear(par.sharding_constraint_p)
transpose_rules[par.sharding_constraint_p] = _linear_transpose(lambda ct, *, spec: par.sharding_constraint_p.bind(
    ct, spec=spec))


# --- shard_map over a device mesh (``par.shard_map_p``) ---------------------------------------------------------
# Each rule is the same rule of the body, run on every device: the jvp of a shard_map is a shard_map
# of the body's jvp (tangents split as their primals); its transpose is a shard_map of the body's
# transpose, where the cotangent of an input not split along a mesh axis is summed over that axis
# if it differs between the devices along it (each device used the value in its own way); a vmap
# of it batches the body, the batch dimension never split.
def _replicated(x: Any) -> tuple:
    return tuple(() for _ in range(aval(x).ndim))


def _global_avals(jaxpr: Any, specs: tuple, mesh: Any) -> list:
    return [a._replace(shape=par.global_shape(a.shape, sp, mesh)) for a, sp in zip(jaxpr.out_avals, specs)]


def _shard_map_jvp(primals: tuple, tangents: tuple, *, jaxpr: Any, mesh: Any, in_specs: tuple, out_specs: tuple,
                   check_vma: bool) -> tuple:
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    n_out = len(jaxpr.out_avals)
    frames = tuple((n, mesh.shape[n], par.SHARD_MAP_VMA if check_vma else par.SHARD_MAP) for n in mesh.axis_names)
    with par.extend_axis_env(frames):
        program, consts, out_nonzeros = jvp_jaxpr(jaxpr, nonzeros, [False] * n_out)
    specs_in = (tuple(_replicated(c) for c in consts) + tuple(in_specs)
                + tuple(sp for sp, nz in zip(in_specs, nonzeros) if nz))
    specs_out = tuple(out_specs) + tuple(sp for sp, nz in zip(out_specs, out_nonzeros) if nz)
    outs = par.shard_map_p.bind(*consts, *primals, *select_by(nonzeros, tangents), jaxpr=program, mesh=mesh,
                                in_specs=specs_in, out_specs=specs_out, check_vma=check_vma)
    out_avals = _global_avals(jaxpr, out_specs, mesh)
    zeros = [Zero(a) for a, nz in zip(out_avals, out_nonzeros) if not nz]
    return outs[:n_out], merge_by(out_nonzeros, outs[n_out:], zeros)


def _live_body(closed: ClosedJaxpr, used_outputs: Sequence[bool]) -> ClosedJaxpr:
    """The body computing only the used outputs, all inputs kept. Collectives count as effects
    nowhere here: one whose result is not used is dropped (every device drops it alike)."""
    jaxpr = closed.jaxpr
    outvars = [v for v, used in zip(jaxpr.outvars, used_outputs) if used]
    live = {id(v) for v in outvars if isinstance(v, Var)}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if any(id(v) in live for v in eqn.outvars):
            kept.append(eqn)
            live.update(id(a) for a in eqn.invars if isinstance(a, Var))
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, kept[::-1], outvars), closed.consts)


def _shard_map_partial_eval(trace: Any, args: tuple, params: dict) -> list:
    """The known outputs computed now by a shard_map of the body's known part; the unknown ones by
    a shard_map that takes the known inputs as they are, recomputes the known part's residuals from
    them (nothing device-local crosses between the two) and runs the body's unknown part. The body
    is split by partial evaluation, so an equation that mixes known and unknown values (a
    ``checkpoint``'s primal and tangent outputs) is split too."""
    jaxpr, out_specs, in_specs, mesh = params["jaxpr"], params["out_specs"], params["in_specs"], params["mesh"]
    unknowns = [trace.is_unknown(a) for a in args]
    frames = tuple((n, mesh.shape[n], par.SHARD_MAP_VMA if params["check_vma"] else par.SHARD_MAP)
                   for n in mesh.axis_names)
    with par.extend_axis_env(frames):
        split = partial_eval_jaxpr(jaxpr, unknowns, instantiate=False)
    out_unknowns = split.out_unknowns
    known_out = [not u for u in out_unknowns]
    n_known, consts = sum(known_out), list(split.known_consts)
    const_specs = tuple(_replicated(c) for c in consts)
    known_specs = tuple(sp for sp, u in zip(in_specs, unknowns) if not u)
    known: list = []
    if n_known:
        whole = split.known.jaxpr  # (without its residuals: the unknown side recomputes them)
        known_program = _live_body(ClosedJaxpr(Jaxpr(whole.constvars, whole.invars, whole.eqns,
                                                     whole.outvars[:n_known]), split.known.consts), [True] * n_known)
        with set_current_trace(trace.parent):
            known = par.shard_map_p.bind(*consts, *[a for a, u in zip(args, unknowns) if not u], **{
                **params, "jaxpr": known_program, "in_specs": const_specs + known_specs,
                "out_specs": tuple(sp for sp, k in zip(out_specs, known_out) if k)})
    unknown: list = []
    if any(out_unknowns):
        def unknown_body(*xs: Any) -> list:
            known_args, unknown_args = xs[:len(consts) + len(known_specs)], xs[len(consts) + len(known_specs):]
            computed = iter(eval_closed_by_binding(split.known, *known_args)[n_known:])
            residuals = [known_args[len(consts) + s] if s is not None else next(computed)
                         for s in split.residual_sources]
            return eval_closed_by_binding(split.unknown, *residuals, *unknown_args)

        known_args = [a for a, u in zip(args, unknowns) if not u]
        unknown_args = [a for a, u in zip(args, unknowns) if u]
        with par.extend_axis_env(frames):
            blocks = list(split.known.in_avals) + list(split.unknown.in_avals[len(split.residual_sources):])
            body, more = trace_program(unknown_body, blocks, "shard_map partial evaluation")
        unknown = trace.stage(par.shard_map_p, [*more, *consts, *known_args, *unknown_args], {
            **params, "jaxpr": body,
            "in_specs": tuple(_replicated(c) for c in more) + const_specs + known_specs + tuple(
                sp for sp, u in zip(in_specs, unknowns) if u),
            "out_specs": tuple(sp for sp, u in zip(out_specs, out_unknowns) if u)})
    return merge_by(out_unknowns, list(unknown), list(known))


def _mentioned(spec: tuple) -> frozenset:
    return frozenset(n for names in spec for n in names)


def _unmentioned(spec: tuple, mesh: Any) -> tuple:
    used = {n for names in spec for n in names}
    return tuple(n for n in mesh.axis_names if n not in used and mesh.shape[n] > 1)


def _shard_map_transpose(cts: list, *args: Any, jaxpr: Any, mesh: Any, in_specs: tuple, out_specs: tuple,
                         check_vma: bool) -> list:
    linear = [is_undefined(a) for a in args]
    frames = tuple((n, mesh.shape[n], par.SHARD_MAP_VMA if check_vma else par.SHARD_MAP) for n in mesh.axis_names)
    out_avals = _global_avals(jaxpr, out_specs, mesh)
    cts = [match_type(instantiate(ct), a) for ct, a in zip(cts, out_avals)]
    unmentioned = [_unmentioned(sp, mesh) for sp, lin in zip(in_specs, linear) if lin]
    with par.extend_axis_env(frames):
        program, consts = transpose_jaxpr(jaxpr, linear)
        # What each input of the transposed body varies over: the axes its spec splits it over.
        seeds = ([frozenset()] * len(consts) + [_mentioned(sp) for sp, lin in zip(in_specs, linear) if not lin]
                 + [_mentioned(sp) for sp in out_specs])

        def summed(*xs: Any) -> list:
            par.seed_varying(xs, seeds)
            outs = eval_closed_by_binding(program, *xs)
            result = []
            for o, axes in zip(outs, unmentioned):
                varies = par.varying_axes(o)  # (a cotangent the same on every device along an axis is one use)
                axes = tuple(n for n in axes if varies is None or n in varies)
                result.append(par.psum_p.bind(o, axes=axes, vma=False) if axes else o)
            return result
        wrapped, more = trace_program(summed, list(program.in_avals), "shard_map transpose")
    nonlinear = [a for a, lin in zip(args, linear) if not lin]
    specs_in = (tuple(_replicated(c) for c in more) + tuple(_replicated(c) for c in consts)
                + tuple(sp for sp, lin in zip(in_specs, linear) if not lin) + tuple(out_specs))
    specs_out = tuple(sp for sp, lin in zip(in_specs, linear) if lin)
    outs = par.shard_map_p.bind(*more, *consts, *nonlinear, *cts, jaxpr=wrapped, mesh=mesh, in_specs=specs_in,
                                out_specs=specs_out, check_vma=check_vma)
    return merge_by(linear, list(outs), [None] * (len(args) - len(outs)))


def _shard_map_batch(axis_size: int, values: tuple, dims: tuple, *, jaxpr: Any, mesh: Any, in_specs: tuple,
                     out_specs: tuple, check_vma: bool) -> tuple[list, list]:
    values = [v if d is None else move_batch_axis(v, d, axis_size) for v, d in zip(values, dims)]
    front = [None if d is None else 0 for d in dims]
    frames = tuple((n, mesh.shape[n], par.SHARD_MAP_VMA if check_vma else par.SHARD_MAP) for n in mesh.axis_names)
    with par.extend_axis_env(frames):
        program, consts, out_batched = batch_jaxpr(jaxpr, axis_size, front)
    specs_in = (tuple(_replicated(c) for c in consts)
                + tuple(sp if d is None else ((),) + tuple(sp) for sp, d in zip(in_specs, front)))
    specs_out = tuple(((),) + tuple(sp) if b else sp for sp, b in zip(out_specs, out_batched))
    outs = par.shard_map_p.bind(*consts, *values, jaxpr=program, mesh=mesh, in_specs=specs_in, out_specs=specs_out,
                                check_vma=check_vma)
    return list(outs), [0 if b else None for b in out_batched]


jvp_rules[par.shard_map_p] = _shard_map_jvp
partial_eval_rules[par.shard_map_p] = _shard_map_partial_eval
transpose_rules[par.shard_map_p] = _shard_map_transpose
batching_rules[par.shard_map_p] = _shard_map_batch
