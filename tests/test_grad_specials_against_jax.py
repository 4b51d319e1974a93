"""Derivatives on the inputs where the derivative is a convention: ties (max, min, sort, argmax,
windowed max), NaN and infinities, compared with JAX's value for value (NaN positions equal).

Finite differences and the forward/reverse consistency of ``test_autodiff_ops`` cannot see these
conventions (which tied element gets the cotangent, whether a NaN input gives a NaN or a zero
derivative), so the oracle is JAX itself. Every differentiable function with an op record runs:
the elementwise records of ``op_records`` and the operation records of ``test_autodiff_ops``, the
latter written once against ember's modules and evaluated again with JAX's in their place.
"""
from __future__ import annotations

import types
from typing import Any, Callable

import jax
import jax.numpy as jax_jnp
import numpy as np
import pytest
from jax import lax as jax_lax, nn as jax_nn
from op_records import BINARY_RECORDS, UNARY_RECORDS, OpRecord
from test_autodiff_ops import RECORDS, ROW_GATHER, SCATTER_DNUMS, GradRecord

import ember
import ember.numpy as jnp
from ember import lax

# values where derivatives are conventions: signed zeros, ties, NaN, infinities
SPECIAL = np.array([0.0, -0.0, 1.0, 1.0, -1.0, 2.0, 0.5, -3.0, np.nan, np.inf, -np.inf], np.float32)
TIES = np.array([0.0, 1.0, 1.0, 2.0, 2.0, -1.0], np.float32)

# Where ember's derivative differs from JAX's on these inputs, with the reason.
KNOWN_DIFFERENCES: dict[str, str] = {
    "nextafter": "JAX defines no derivative for nextafter (NotImplementedError); ember's is 0, as for the "
                 "other piecewise-constant functions",
    "lax.nextafter": "as nextafter",
}


def _jax_counterpart(record: OpRecord) -> Callable:
    name = record.name
    if name.startswith("lax."):
        return getattr(jax_lax, name[4:])
    if name.startswith("nn."):
        return getattr(jax_nn, name[3:])
    return getattr(jax_jnp, name)


def _on_jax(fn: Callable) -> Callable:
    """``fn`` with JAX's modules (and dimension numbers) in place of ember's."""
    names = dict(fn.__globals__, jnp=jax_jnp, lax=jax_lax, nn=jax_nn,
                 SCATTER_DNUMS=jax_lax.ScatterDimensionNumbers(*SCATTER_DNUMS),
                 ROW_GATHER=jax_lax.GatherDimensionNumbers(*ROW_GATHER))
    return types.FunctionType(fn.__code__, names, fn.__name__, fn.__defaults__, fn.__closure__)


# Records whose JAX oracle runs op by op: in one jitted program XLA's simplifier gives a row holding
# a NaN the cotangent 0 (``(1 / ties) * is_max`` with no tie: inf * 0), op by op it is NaN, as IEEE
# arithmetic and ember (eagerly and jitted) give.
OP_BY_OP = {"max", "min_all"}


def _vjps(fn: Callable, args: list, api: Any, to_array: Callable, jitted: bool = False) -> list:
    """The cotangents of all arguments for an all-ones output cotangent (``jitted``: computed by
    one jitted program; JAX op by op compiles each operation for each record's shapes)."""
    def cotangents(*xs: Any) -> Any:
        out, pullback = api.vjp(fn, *xs)
        return pullback(api.numpy.ones_like(out))
    how = api.jit(cotangents) if jitted else cotangents
    return [np.asarray(g) for g in how(*map(to_array, args))]


def _assert_same(ours: list, theirs: list, name: str) -> None:
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and a.dtype == b.dtype, (name, a.shape, a.dtype, b.shape, b.dtype)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=f"{name}: NaN positions")
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6, err_msg=name)


def _elementwise_inputs(record: OpRecord) -> list:
    if record.nargs == 1:
        return [SPECIAL]
    x, y = np.meshgrid(SPECIAL, SPECIAL)
    return [x.ravel(), y.ravel()]


ELEMENTWISE = [r for r in UNARY_RECORDS + BINARY_RECORDS if np.float32 in r.dtypes and r.result != "bool"]


@pytest.mark.parametrize("record", ELEMENTWISE, ids=lambda r: r.name)
def test_elementwise_derivatives_on_specials_match_jax(record: OpRecord) -> None:
    if record.name in KNOWN_DIFFERENCES:
        pytest.xfail(KNOWN_DIFFERENCES[record.name])
    args = _elementwise_inputs(record)
    ours = _vjps(record.fn, args, ember, jnp.asarray)
    theirs = _vjps(_jax_counterpart(record), args, jax, jax_jnp.asarray, jitted=True)
    _assert_same(ours, theirs, record.name)


def _operation_inputs(record: GradRecord, values: np.ndarray) -> list:
    rng = np.random.default_rng(7)
    return [rng.choice(values, size=s).astype(np.float32) for s in record.shapes]


POOLING = [  # (written with module attributes, which the JAX evaluation replaces)
    GradRecord("max_pool_2x2", lambda x: lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 2), "VALID"), ((4, 6),)),
    GradRecord("max_pool_overlapping_same", lambda x: lax.reduce_window(x, -np.inf, lax.max, (3, 3), (1, 1), "SAME"),
               ((4, 5),)),
    GradRecord("max_pool_base_dilated", lambda x: lax.reduce_window(x, -np.inf, lax.max, (3,), (1,), ((1, 2),), (2,)),
               ((5,),)),
    GradRecord("min_pool", lambda x: lax.reduce_window(x, np.inf, lax.min, (1, 3), (1, 2), "SAME"), ((3, 7),)),
    GradRecord("argmax_take", lambda x: jnp.take_along_axis(x, jnp.argmax(x, axis=1)[:, None], axis=1),
               ((3, 4),)),
]


@pytest.mark.parametrize("values", [TIES, SPECIAL], ids=["ties", "specials"])
@pytest.mark.parametrize("record", RECORDS + POOLING, ids=lambda r: r.name)
def test_operation_derivatives_on_ties_and_specials_match_jax(record: GradRecord, values: np.ndarray) -> None:
    key = f"{record.name}[{'ties' if values is TIES else 'specials'}]"
    if key in KNOWN_DIFFERENCES or record.name in KNOWN_DIFFERENCES:
        pytest.xfail(KNOWN_DIFFERENCES.get(key) or KNOWN_DIFFERENCES[record.name])
    args = _operation_inputs(record, values)
    ours = _vjps(record.fn, args, ember, jnp.asarray)
    theirs = _vjps(_on_jax(record.fn), args, jax, jax_jnp.asarray, jitted=record.name not in OP_BY_OP)
    _assert_same(ours, theirs, key)


# --- max pooling sends each window's cotangent to one element, as JAX's select-and-scatter ---------
def _max_pool_sum(x: Any) -> Any:
    return lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), "VALID").sum()


def test_max_pool_gradient_goes_to_the_first_maximum_of_each_window() -> None:
    relu_out = np.maximum(np.random.default_rng(0).normal(size=(6, 6)), 0).astype(np.float32)
    expected = np.asarray(jax.grad(_on_jax(_max_pool_sum))(relu_out))
    for how in (ember.grad(_max_pool_sum), ember.jit(ember.grad(_max_pool_sum))):
        np.testing.assert_array_equal(how(jnp.asarray(relu_out)), expected)
    np.testing.assert_array_equal(ember.grad(_max_pool_sum)(jnp.zeros((3, 3))),
                                  [[1, 1, 0], [1, 1, 0], [0, 0, 0]])  # each window's top-left zero


def test_max_pool_gradient_under_vmap_matches_jax() -> None:
    batch = np.round(np.random.default_rng(1).normal(size=(3, 4, 5))).astype(np.float32)  # many ties
    expected = np.asarray(jax.vmap(jax.grad(_on_jax(_max_pool_sum)))(batch))
    np.testing.assert_array_equal(ember.vmap(ember.grad(_max_pool_sum))(jnp.asarray(batch)), expected)
    np.testing.assert_array_equal(ember.jit(ember.vmap(ember.grad(_max_pool_sum)))(jnp.asarray(batch)), expected)


def test_max_pool_gradient_on_the_reference_backend_matches_jax() -> None:
    batch = np.round(np.random.default_rng(2).normal(size=(4, 5))).astype(np.float32)
    expected = np.asarray(jax.grad(_on_jax(_max_pool_sum))(batch))
    with ember.config.override(backend="reference"):
        np.testing.assert_array_equal(ember.jit(ember.grad(_max_pool_sum))(jnp.asarray(batch)), expected)
