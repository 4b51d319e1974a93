"""Derivatives of gather and the scatters. Gather and scatter-add are each other's
transposes; an overwriting or extremal scatter routes each output element's
tangent from whichever value ended up there (averaging ties, as max does)."""
from __future__ import annotations

from typing import Any

from ember import dtypes, lax
from ember.core.avals import ShapedArray
from ember.lax import indexing as ix
from ember.lax.base import aval
from ember.lax.indexing import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from ember.transforms.jvp import jvp_rules
from ember.transforms.rules.elementwise import const
from ember.transforms.tangents import Zero, add_tangents, instantiate, zeros
from ember.transforms.transpose import is_undefined, transpose_rules


# --- gather <-> scatter-add ----------------------------------------------------------------------
def _scatter_mode(mode: GatherScatterMode) -> GatherScatterMode:
    """The scatter that transposes a gather of this mode has the same mode, as in JAX: 'clip' adds
    the cotangent of a clamped window where it was read, 'fill' and 'promise_in_bounds' (x[idx]'s
    mode) drop the cotangents of windows that did not fit (the forward gather clamped those)."""
    return mode


def _gather_jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
    operand, indices = primals
    ans = ix.gather_p.bind(operand, indices, **params)
    if isinstance(tangents[0], Zero):
        return ans, Zero(aval(ans))
    if params["mode"] == GatherScatterMode.FILL_OR_DROP:
        params = dict(params, fill_value=0)  # windows out of bounds are constant: their tangent is 0
    return ans, ix.gather_p.bind(tangents[0], indices, **params)


def _gather_transpose(ct: Any, operand: Any, indices: Any, *, dimension_numbers: GatherDimensionNumbers,
                      slice_sizes: tuple, mode: GatherScatterMode, fill_value: Any, indices_are_sorted: bool,
                      unique_indices: bool) -> list:
    dn = dimension_numbers
    scatter_dnums = ScatterDimensionNumbers(
        update_window_dims=dn.offset_dims, inserted_window_dims=dn.collapsed_slice_dims,
        scatter_dims_to_operand_dims=dn.start_index_map, operand_batching_dims=dn.operand_batching_dims,
        scatter_indices_batching_dims=dn.start_indices_batching_dims)
    operand_ct = ix.scatter_add_p.bind(zeros(operand.aval), indices, ct, dimension_numbers=scatter_dnums,
                                       mode=_scatter_mode(mode), indices_are_sorted=indices_are_sorted,
                                       unique_indices=unique_indices)
    return [operand_ct, None]


def _gather_of_scatter(x: Any, indices: Any, updates_aval: Any, params: dict) -> Any:
    """Read, for every update element, the element of ``x`` it was scattered to (0 if dropped)."""
    dn: ScatterDimensionNumbers = params["dimension_numbers"]
    rank = aval(x).ndim
    window = iter(dn.update_window_dims)
    slice_sizes = tuple(1 if d in dn.inserted_window_dims or d in dn.operand_batching_dims
                        else updates_aval.shape[next(window)] for d in range(rank))
    gather_dnums = GatherDimensionNumbers(
        offset_dims=dn.update_window_dims, collapsed_slice_dims=dn.inserted_window_dims,
        start_index_map=dn.scatter_dims_to_operand_dims, operand_batching_dims=dn.operand_batching_dims,
        start_indices_batching_dims=dn.scatter_indices_batching_dims)
    mode = params["mode"]
    return ix.gather_p.bind(x, indices, dimension_numbers=gather_dnums, slice_sizes=slice_sizes,
                            mode=mode if mode == GatherScatterMode.CLIP else GatherScatterMode.FILL_OR_DROP,
                            fill_value=0 if mode != GatherScatterMode.CLIP else None,
                            indices_are_sorted=params["indices_are_sorted"],
                            unique_indices=params["unique_indices"])


def _linear_scatter_jvp(p: Any):
    def rule(primals: tuple, tangents: tuple, **params: Any) -> tuple:
        operand, indices, updates = primals
        ans = p.bind(operand, indices, updates, **params)
        if isinstance(tangents[0], Zero) and isinstance(tangents[2], Zero):
            return ans, Zero(aval(ans))
        return ans, p.bind(instantiate(tangents[0]), indices, instantiate(tangents[2]), **params)
    return rule


def _scatter_add_transpose(sign: float):
    def rule(ct: Any, operand: Any, indices: Any, updates: Any, **params: Any) -> list:
        updates_ct = None
        if is_undefined(updates):
            updates_ct = _gather_of_scatter(ct, indices, updates.aval, params)
            updates_ct = lax.neg(updates_ct) if sign < 0 else updates_ct
        return [ct if is_undefined(operand) else None, None, updates_ct]
    return rule


# --- scatter-mul: linear in the operand; in the updates only for unique indices ------------------------
def _scatter_mul_jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
    operand, indices, updates = primals
    t_operand, _, t_updates = tangents
    ans = ix.scatter_mul_p.bind(operand, indices, updates, **params)
    out: Any = Zero(aval(ans))
    if not isinstance(t_operand, Zero):
        out = ix.scatter_mul_p.bind(t_operand, indices, updates, **params)
    if not isinstance(t_updates, Zero):
        if not params["unique_indices"]:
            raise NotImplementedError("scatter_mul gradients with respect to the updates are only implemented "
                                      "with unique_indices=True")
        # d(x * u) = x * du at the scattered positions
        scattered = ix.scatter_add_p.bind(zeros(aval(operand)), indices, t_updates, **params)
        out = add_tangents(out, lax.mul(operand, scattered))
    return ans, out


def _scatter_transpose(ct: Any, operand: Any, indices: Any, updates: Any, **params: Any) -> list:
    """With unique indices (how the jvp uses it), each overwritten element came from one update."""
    if not params["unique_indices"]:
        raise NotImplementedError("transpose of scatter: only implemented with unique_indices=True")
    operand_ct = ix.scatter_p.bind(ct, indices, zeros(updates.aval), **params) if is_undefined(operand) else None
    updates_ct = _gather_of_scatter(ct, indices, updates.aval, params) if is_undefined(updates) else None
    return [operand_ct, None, updates_ct]


def _scatter_mul_transpose(ct: Any, operand: Any, indices: Any, updates: Any, **params: Any) -> list:
    if is_undefined(updates):
        raise NotImplementedError("transpose of scatter_mul: the updates are being differentiated, which is "
                                  "not linear")
    return [ix.scatter_mul_p.bind(ct, indices, updates, **params), None, None]


# --- overwriting scatter: each output element takes the tangent of the value that landed there ---------
def _scatter_jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
    operand, indices, updates = primals
    ans = ix.scatter_p.bind(operand, indices, updates, **params)
    t_operand, t_updates = instantiate(tangents[0]), instantiate(tangents[2])
    if params["unique_indices"]:
        return ans, ix.scatter_p.bind(t_operand, indices, t_updates, **params)
    # Scatter 1-based ids of the updates the same way: where an id survives, its update won.
    ids = lax.add(lax.reshape(lax.iota(dtypes.int32, aval(updates).size), aval(updates).shape), 1)
    winners = ix.scatter_p.bind(zeros(ShapedArray(aval(ans).shape, dtypes.int32)), indices, ids, **params)
    won = lax.eq(_gather_of_scatter(winners, indices, aval(updates), params), ids)
    kept = lax.eq(winners, 0)
    from_operand = lax.select(kept, t_operand, const(t_operand, 0.0))
    from_updates = ix.scatter_add_p.bind(zeros(aval(ans)), indices, lax.select(won, t_updates, const(t_updates, 0.0)),
                                         **params)
    return ans, lax.add(from_operand, from_updates)


# --- scatter-min / scatter-max: like max, ties share the tangent -------------------------------------------
def _extremal_scatter_jvp(p: Any):
    def rule(primals: tuple, tangents: tuple, **params: Any) -> tuple:
        operand, indices, updates = primals
        ans = p.bind(operand, indices, updates, **params)
        dtype = aval(operand).dtype
        t_operand, t_updates = instantiate(tangents[0]), instantiate(tangents[2])
        kept = lax.convert_element_type(lax.eq(operand, ans), dtype)
        won = lax.convert_element_type(lax.eq(updates, _gather_of_scatter(ans, indices, aval(updates), params)),
                                       dtype)
        contenders = ix.scatter_add_p.bind(kept, indices, won, **params)
        total = ix.scatter_add_p.bind(lax.mul(t_operand, kept), indices, lax.mul(t_updates, won), **params)
        # (no contender where the result is a NaN that no operand equals: the tangent is 0 there, as in JAX)
        return ans, lax.div(total, lax.max(contenders, lax.full_like(contenders, 1)))
    return rule


jvp_rules.update({
    ix.gather_p: _gather_jvp,
    ix.scatter_add_p: _linear_scatter_jvp(ix.scatter_add_p),
    ix.scatter_sub_p: _linear_scatter_jvp(ix.scatter_sub_p),
    ix.scatter_mul_p: _scatter_mul_jvp,
    ix.scatter_p: _scatter_jvp,
    ix.scatter_min_p: _extremal_scatter_jvp(ix.scatter_min_p),
    ix.scatter_max_p: _extremal_scatter_jvp(ix.scatter_max_p),
})
transpose_rules.update({
    ix.gather_p: _gather_transpose,
    ix.scatter_add_p: _scatter_add_transpose(1.0),
    ix.scatter_sub_p: _scatter_add_transpose(-1.0),
    ix.scatter_mul_p: _scatter_mul_transpose,
    ix.scatter_p: _scatter_transpose,
})
