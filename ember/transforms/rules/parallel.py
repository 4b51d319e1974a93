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

from typing import Any

from ember import lax
from ember.lax import parallel as par
from ember.lax.base import aval
from ember.transforms.jvp import deflinear, defzero, jvp_rules
from ember.transforms.tangents import Zero, instantiate
from ember.transforms.transpose import transpose_rules

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
