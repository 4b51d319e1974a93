"""Derivatives of every differentiable operation, in float64: forward mode against central
finite differences and reverse mode against forward mode (``<u, J v> == <J^T u, v>``), to
second order for the elementwise ops. Elementwise functions come from ``op_records``; the
other operations have records below. Plus the conventions where the derivative is a choice
(ties, out-of-bounds windows), matched to JAX.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from op_records import BINARY_RECORDS, UNARY_RECORDS, OpRecord
from test_autodiff import check_grads

import ember
import ember.numpy as jnp
from ember import lax, nn
from ember.lax.indexing import GatherDimensionNumbers, ScatterDimensionNumbers

ZERO_BY_DESIGN = {"lax.stop_gradient"}  # its derivative is 0 although the function is the identity
DIFFERENTIABLE = [r for r in UNARY_RECORDS + BINARY_RECORDS
                  if np.float32 in r.dtypes and r.result != "bool" and r.name not in ZERO_BY_DESIGN]


def _sample(record: OpRecord, rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Values inside the record's domain, away from its ends (where derivatives blow up) and
    from 0 (where |x|, relu, sign... have kinks); large domains are cut to [-3, 3]. A domain
    given as a list of values spans their range."""
    finite = [v for v in record.domain if np.isfinite(v)] if isinstance(record.domain, list) else record.domain
    lo, hi = max(min(finite), -3.0), min(max(finite), 3.0)
    margin = 0.05 * (hi - lo)
    x = rng.uniform(lo + margin, hi - margin, size=shape)
    return np.where(np.abs(x) < 0.05, 0.05 + np.abs(x), x)


@pytest.mark.parametrize("record", DIFFERENTIABLE, ids=lambda r: r.name)
def test_elementwise_derivatives(record: OpRecord, x64: None) -> None:
    rng = np.random.default_rng(0)
    args = [_sample(record, rng, (4,)) for _ in range(record.nargs)]
    check_grads(record.fn, args, order=2, rng=rng)
    summed = lambda *a: jnp.sum(record.fn(*a))  # noqa: E731
    eager = ember.grad(summed, argnums=tuple(range(record.nargs)))(*map(jnp.asarray, args))
    jitted = ember.jit(ember.grad(summed, argnums=tuple(range(record.nargs))))(*map(jnp.asarray, args))
    for e, j in zip(eager, jitted):
        assert e.dtype == j.dtype == np.float64
        np.testing.assert_allclose(j, e, rtol=1e-12, atol=1e-12)


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
       op=st.sampled_from([jnp.add, jnp.subtract, jnp.multiply, jnp.divide, jnp.maximum, jnp.arctan2]))
def test_binary_derivatives_undo_broadcasting(shapes: Any, op: Callable) -> None:
    with ember.config.override(enable_x64=True):
        rng = np.random.default_rng(1)
        x, y = (rng.uniform(0.5, 2.0, s) * rng.choice([-1, 1], s) for s in shapes.input_shapes)
        gx, gy = ember.grad(lambda a, b: jnp.sum(op(a, b)), argnums=(0, 1))(jnp.asarray(x), jnp.asarray(y))
        assert gx.shape == np.shape(x) and gy.shape == np.shape(y)
        check_grads(op, [x, y], rng=rng)


# --- the other operations ----------------------------------------------------------------------
class GradRecord(NamedTuple):
    name: str
    fn: Callable
    shapes: tuple  # one shape per differentiated argument (values drawn uniformly from [-2, 2])
    order: int = 1
    positive: bool = False  # draw from [0.5, 2] instead


IDX = np.array([0, 2, 2, 4])
UNIQUE_IDX = np.array([[3], [0], [1]])
SCATTER_DNUMS = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
ROW_GATHER = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))

RECORDS = [
    # shapes and data movement
    GradRecord("broadcast_to", lambda x: jnp.broadcast_to(x, (2, 3, 4)) * jnp.arange(24.0).reshape(2, 3, 4),
               ((3, 1),), order=2),
    GradRecord("reshape", lambda x: jnp.reshape(x, (3, 4)), ((2, 6),)),
    GradRecord("transpose", lambda x: jnp.transpose(x, (2, 0, 1)), ((2, 3, 4),)),
    GradRecord("squeeze_expand_dims", lambda x: jnp.expand_dims(jnp.squeeze(x, 1), 0), ((3, 1, 2),)),
    GradRecord("flip", lambda x: jnp.flip(x, 0) * jnp.arange(12.0).reshape(3, 4), ((3, 4),)),
    GradRecord("strided_slice", lambda x: x[1:6:2, ::3], ((7, 5),)),
    GradRecord("reversed_slice", lambda x: x[::-2], ((5,),)),
    GradRecord("concatenate", lambda x, y: jnp.concatenate([x, y, x], axis=0), ((2, 3), (4, 3))),
    GradRecord("lax_pad", lambda x, v: lax.pad(x, v, [(1, -1, 1), (0, 2, 0)]), ((3, 2), ())),
    GradRecord("jnp_pad", lambda x: jnp.pad(x, ((1, 2), (0, 1))), ((2, 3),)),
    GradRecord("dynamic_slice", lambda x: lax.dynamic_slice(x, (jnp.array(1), 2), (2, 2)), ((4, 5),)),
    GradRecord("dynamic_slice_clamped", lambda x: lax.dynamic_slice(x, (jnp.array(3),), (3,)), ((5,),)),
    GradRecord("dynamic_update_slice", lambda x, u: lax.dynamic_update_slice(x, u * u, (1, jnp.array(0))),
               ((4, 3), (2, 3)), order=2),
    # indexing
    GradRecord("gather_duplicates", lambda x: x[jnp.asarray(IDX)] ** 2, ((5,),), order=2),
    GradRecord("gather_columns", lambda x: x[:, jnp.array([1, 1, 0])], ((2, 3),)),
    GradRecord("take_along_axis", lambda x: jnp.take_along_axis(x, jnp.array([[2, 0], [1, 1]]), axis=1), ((2, 3),)),
    GradRecord("gather_fill_out_of_bounds", lambda x: jnp.take(x, jnp.array([1, 7, -9]), mode="fill",
                                                                fill_value=0.5), ((4,),)),
    GradRecord("gather_clip", lambda x: lax.gather(x, jnp.array([[2], [9]]), ROW_GATHER, (1, 3), mode="clip"),
               ((4, 3),)),
    GradRecord("scatter_add", lambda x, y: x.at[jnp.asarray(IDX)].add(y * y), ((5,), (4,)), order=2),
    GradRecord("scatter_add_dropped", lambda x, y: x.at[jnp.array([1, 9])].add(y, mode="drop"), ((5,), (2,))),
    GradRecord("scatter_sub", lambda x, y: lax.scatter_sub(x, jnp.asarray(UNIQUE_IDX), y, SCATTER_DNUMS),
               ((5,), (3,))),
    GradRecord("scatter_set_duplicates", lambda x, y: x.at[jnp.asarray(IDX)].set(y), ((5,), (4,))),
    GradRecord("scatter_set_unique", lambda x, y: x.at[jnp.array([3, 0, 1])].set(y * y, unique_indices=True),
               ((5,), (3,)), order=2),
    GradRecord("scatter_mul_operand", lambda x: x.at[jnp.asarray(IDX)].multiply(jnp.array([2.0, 3.0, -1.0, 0.5])),
               ((5,),)),
    GradRecord("scatter_mul_unique", lambda x, y: lax.scatter_mul(x, jnp.asarray(UNIQUE_IDX), y, SCATTER_DNUMS,
                                                                  unique_indices=True), ((5,), (3,))),
    GradRecord("scatter_max", lambda x, y: x.at[jnp.asarray(IDX)].max(y), ((5,), (4,))),
    GradRecord("scatter_min", lambda x, y: x.at[jnp.asarray(IDX)].min(y), ((5,), (4,))),
    # reductions
    GradRecord("sum_axis", lambda x: jnp.sum(x ** 2, axis=1), ((3, 4),), order=2),
    GradRecord("prod", lambda x: jnp.prod(x, axis=0), ((5, 2),), order=2),
    GradRecord("prod_with_a_zero", lambda x: jnp.prod(x * jnp.array([1.0, 0.0, 1.0])), ((3,),), order=2),
    GradRecord("max", lambda x: jnp.max(x, axis=1), ((3, 4),)),
    GradRecord("min_all", lambda x: jnp.min(x), ((3, 4),)),
    GradRecord("mean_var_std", lambda x: jnp.mean(x) + jnp.var(x, axis=0) + jnp.std(x), ((4, 3),), order=2),
    GradRecord("argmax_indexing", lambda x: x[jnp.argmax(x)] * 2.0, ((5,),)),
    GradRecord("cumsum", lambda x: jnp.cumsum(x, axis=1), ((2, 4),)),
    GradRecord("cumsum_reverse", lambda x: lax.cumsum(x, reverse=True), ((5,),)),
    GradRecord("cumprod", lambda x: jnp.cumprod(x), ((6,),), order=2),
    GradRecord("cumprod_reverse_with_zero", lambda x: lax.cumprod(x * jnp.array([1.0, 1.0, 0.0, 1.0, 1.0]),
                                                                  reverse=True), ((5,),), order=2),
    GradRecord("cummax", lambda x: lax.cummax(x, axis=0), ((5, 2),)),
    GradRecord("cummin_reverse", lambda x: lax.cummin(x, reverse=True), ((5,),)),
    GradRecord("cumlogsumexp", lambda x: lax.cumlogsumexp(x), ((6,),), order=2),
    # sorting
    GradRecord("sort", lambda x: jnp.sort(x, axis=0) * jnp.arange(1.0, 7.0).reshape(3, 2), ((3, 2),)),
    GradRecord("sort_key_value", lambda k, v: lax.sort_key_val(k, v)[1], ((5,), (5,))),
    GradRecord("top_k", lambda x: lax.top_k(x, 3)[0], ((2, 6),)),
    # contractions
    GradRecord("matmul", lambda a, b: a @ b, ((3, 4), (4, 2)), order=2),
    GradRecord("batch_matmul", lambda a, b: jnp.matmul(a, b), ((2, 3, 4), (2, 4, 5))),
    GradRecord("matvec", lambda a, v: a @ v, ((3, 4), (4,))),
    GradRecord("vector_dot", lambda u, v: jnp.dot(u, v), ((4,), (4,)), order=2),
    GradRecord("einsum_odd_layout", lambda a, b: jnp.einsum("ijk,kj->ik", a, b), ((2, 3, 4), (4, 3))),
    GradRecord("dot_general_batch_last", lambda a, b: lax.dot_general(a, b, (((0,), (1,)), ((2,), (0,)))),
               ((3, 2, 4), (4, 3, 5))),
    # selection and clipping
    GradRecord("where", lambda x, y: jnp.where(x > 0, x * y, y ** 2), ((6,), (6,)), order=2),
    GradRecord("clip", lambda x: jnp.clip(x, -0.5, 0.5), ((6,),)),
    GradRecord("clamp_array_bounds", lambda lo, x: lax.clamp(lo, x, 1.5), ((4,), (4,))),
    GradRecord("integer_powers", lambda x: x ** 3 + x ** -2 + lax.integer_pow(x, 0), ((4,),), order=2, positive=True),
    # neural-network functions
    GradRecord("logsumexp", lambda x: nn.logsumexp(x, axis=1), ((3, 4),), order=2),
    GradRecord("softmax", lambda x: nn.softmax(x), ((2, 4),), order=2),
    GradRecord("log_softmax", lambda x: nn.log_softmax(x, axis=0), ((3, 2),)),
    GradRecord("standardize", lambda x: nn.standardize(x), ((2, 5),)),
    GradRecord("norms", lambda x: jnp.stack([jnp.linalg.norm(x), jnp.linalg.norm(x, 1), jnp.linalg.norm(x, np.inf),
                                             jnp.linalg.norm(x, 3)]), ((5,),), order=2),
    GradRecord("matrix_norms", lambda x: jnp.stack([jnp.linalg.norm(x), jnp.linalg.norm(x, "fro"),
                                                    jnp.linalg.norm(x, 1)]), ((3, 3),)),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_operation_derivatives(record: GradRecord, x64: None) -> None:
    rng = np.random.default_rng(3)
    low = 0.5 if record.positive else -2.0
    args = [rng.uniform(low, 2.0, size=s) for s in record.shapes]
    check_grads(record.fn, args, order=record.order, rng=rng)


def test_all_records_run_under_jit(x64: None) -> None:
    """The reverse-mode programs of every record also compile and agree with eager ones."""
    rng = np.random.default_rng(4)
    for record in RECORDS:
        args = [jnp.asarray(rng.uniform(0.5 if record.positive else -2.0, 2.0, size=s)) for s in record.shapes]
        argnums = tuple(range(len(args)))
        loss = lambda *a, fn=record.fn: jnp.sum(jnp.sin(fn(*a)))  # noqa: E731
        eager = ember.grad(loss, argnums)(*args)
        jitted = ember.jit(ember.grad(loss, argnums))(*args)
        for e, j in zip(eager, jitted):
            np.testing.assert_allclose(j, e, rtol=1e-10, atol=1e-12, err_msg=record.name)


# --- conventions --------------------------------------------------------------------------------
def test_ties_share_the_derivative_like_jax() -> None:
    x = jnp.array([1.0, 3.0, 3.0])
    np.testing.assert_allclose(ember.grad(jnp.max)(x), [0.0, 0.5, 0.5])
    np.testing.assert_allclose(ember.grad(lambda x: jnp.maximum(x, 3.0).sum())(x), [0.0, 0.5, 0.5])
    np.testing.assert_allclose(ember.grad(lambda x: x.at[jnp.array([1, 1])].max(jnp.array([3.0, 3.0])).sum())(x),
                               [1.0, 1 / 3, 1.0])


def test_derivatives_at_kinks_follow_jax() -> None:
    assert float(ember.grad(jnp.abs)(0.0)) == 1.0
    assert float(ember.grad(nn.relu)(0.0)) == 0.0
    assert float(ember.grad(lambda x: x ** 0.5)(4.0)) == 0.25
    assert float(ember.grad(lambda y: jnp.power(0.0, y))(2.0)) == 0.0
    # d/dx x^y = y * x^(y-1) as written, as JAX 0.10: 0 * inf = nan at x = y = 0, -0 at x = -1
    np.testing.assert_array_equal(ember.grad(lambda x: jnp.sum(x ** jnp.array([0.0, 0.0, 1.0, -1.0])))(
        jnp.array([0.0, -1.0, 0.0, 0.0])), [np.nan, -0.0, 1.0, -np.inf])
    assert np.signbit(ember.grad(lambda x: x ** 0.0)(-1.0))


def test_rounding_and_comparisons_have_zero_derivative() -> None:
    f = lambda x: jnp.floor(x) + jnp.round(x) + jnp.sign(x) + (x > 1).astype(jnp.float32)  # noqa: E731
    np.testing.assert_array_equal(ember.grad(lambda x: jnp.sum(f(x)))(jnp.array([0.3, 1.7])), [0.0, 0.0])
    y, t = ember.jvp(jnp.argmax, (jnp.array([0.3, 1.7]),), (jnp.ones(2),))
    assert int(y) == 1 and t.dtype == np.dtype([("float0", "V")])


def test_convert_element_type_cotangent_has_the_input_dtype(x64: None) -> None:
    g = ember.grad(lambda x: jnp.sum(x.astype(jnp.float32) ** 2))(jnp.array([1.0, 2.0]))
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, [2.0, 4.0])
    g = ember.grad(lambda x: jnp.sum(x.astype(jnp.float64)))(jnp.array([1.0], jnp.float32))
    assert g.dtype == np.float32


def test_preferred_element_type_transposes_to_the_operand_dtype() -> None:
    a, b = jnp.ones((2, 3), jnp.float16), jnp.ones((3, 4), jnp.float16)
    ga, gb = ember.grad(lambda a, b: jnp.sum(lax.dot(a, b, preferred_element_type=jnp.float32)), (0, 1))(a, b)
    assert ga.dtype == gb.dtype == np.float16
    np.testing.assert_allclose(np.asarray(ga, np.float32), np.full((2, 3), 4.0))


def test_scatter_mul_updates_need_unique_indices() -> None:
    with pytest.raises(NotImplementedError, match="unique_indices=True"):
        ember.grad(lambda y: jnp.ones(3).at[jnp.array([0, 0])].multiply(y).sum())(jnp.ones(2))


def test_digamma_derivative_is_trigamma(x64: None) -> None:
    """Exact values: psi'(1/2) = pi^2/2, psi'(1) = pi^2/6, psi'(x) = psi'(x + 1) + 1/x^2."""
    half = np.pi ** 2 / 2
    x = np.array([0.5, 1.0, 2.0, 7.5, -0.5, -1.5])
    expected = [half, np.pi ** 2 / 6, np.pi ** 2 / 6 - 1, half - sum(1 / (0.5 + k) ** 2 for k in range(7)),
                half + 4, half + 4 + 1 / 1.5 ** 2]
    _, tangent = ember.jvp(lax.digamma, (jnp.asarray(x),), (jnp.ones(6, jnp.float64),))
    np.testing.assert_allclose(tangent, expected, rtol=1e-9)
