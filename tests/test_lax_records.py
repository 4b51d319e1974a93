"""Records with parameters (shape operations, selections, reductions, joining and splitting)
against NumPy, eagerly and under jit, over hypothesis-drawn shapes, dtypes, values and
parameters; plus the errors and the semantics a record cannot express."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from op_records import PARAM_RECORDS, arrays
from util import assert_allclose, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember import lax


def _leaves(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _compare(record, got, expected):
    got, expected = _leaves(got), _leaves(expected)
    assert len(got) == len(expected), record.name
    for g, e in zip(got, expected):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, f"{record.name}: {g.dtype}{g.shape} != {e.dtype}{e.shape}"
        if record.compare == "close":
            assert_allclose(g, e)
        elif record.compare == "bits":
            unsigned = f"u{e.dtype.itemsize}"
            np.testing.assert_array_equal(g.view(unsigned), e.view(unsigned), err_msg=record.name)
        else:
            exact = (lambda a: a) if e.dtype.kind in "biu" else (lambda a: a.astype(np.float64))
            np.testing.assert_array_equal(exact(g), exact(e), err_msg=record.name)


@pytest.mark.parametrize("record", PARAM_RECORDS, ids=[r.name for r in PARAM_RECORDS])
@given(data=st.data())
def test_param_records(record, data):
    dtype = data.draw(st.sampled_from(record.dtypes))
    shape = data.draw(hnp.array_shapes(min_dims=record.min_dims, max_dims=record.max_dims,
                                       min_side=record.min_side, max_side=4))
    x = data.draw(arrays(dtype, shape, record.domain, record.bit_patterns))
    operands, params = record.draw_args(data.draw, x)
    with np.errstate(all="ignore"):
        expected = record.reference(x, *operands, **params)

    def run(*args):
        return record.fn(*args, **params)

    _compare(record, run(jnp.asarray(x), *map(jnp.asarray, operands)), expected)
    _compare(record, ember.jit(run)(x, *operands), expected)  # operands traced, parameters static


# --- what the records do not cover ----------------------------------------------------------------
def test_dynamic_slice_wraps_a_negative_start_as_jax_does():
    x = np.arange(10, dtype=np.int32)
    check_eager_and_jit(lambda i: lax.dynamic_slice(x, (i,), (3,)), np.int32(-3), expected=x[7:])
    check_eager_and_jit(lambda i: lax.dynamic_slice(x, (i,), (3,)), np.int32(-2), expected=x[7:])  # clamped
    check_eager_and_jit(lambda i: lax.dynamic_slice(x, (i,), (3,), allow_negative_indices=False),
                        np.int32(-2), expected=x[:3])
    check_eager_and_jit(lambda i: lax.dynamic_update_slice(x, np.int32([-1, -2]), (i,)), np.int32(-4),
                        expected=np.r_[x[:6], -1, -2, x[8:]])


def test_dynamic_slice_clamps_the_window_into_the_operand():
    x = np.arange(10, dtype=np.int32)
    check_eager_and_jit(lambda i: lax.dynamic_slice_in_dim(x, i, 4), np.int32(8), expected=x[6:])
    check_eager_and_jit(lambda u, i: lax.dynamic_update_slice_in_dim(x, u, i, 0), np.int32([-1, -2]), np.int32(9),
                        expected=np.r_[x[:8], -1, -2])


def test_dot_general_takes_dot_dimension_numbers():
    """Contract the last axis of ``a`` with axis 1 of ``b``, batching over axis 0 of both."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4), np.float32), rng.standard_normal((2, 4, 5), np.float32)
    dimension_numbers: lax.DotDimensionNumbers = (((2,), (1,)), ((0,), (0,)))
    check_eager_and_jit(lambda a, b: lax.dot_general(a, b, dimension_numbers), a, b,
                        expected=np.einsum("bij,bjk->bik", a, b), rtol=1e-5, atol=1e-5)


def test_stop_gradient_passes_values_and_blocks_gradients():
    x = np.array([1.0, -2.0, 3.0], np.float32)

    def f(x):
        return jnp.sum(lax.stop_gradient(x) * x)  # d/dx = stop_gradient(x) = x, not 2x

    assert_allclose(ember.grad(f)(x), x)
    assert_allclose(ember.jit(ember.grad(f))(x), x)


def test_iota_and_broadcasted_iota():
    check_eager_and_jit(lambda: lax.iota(np.int8, 5), expected=np.arange(5, dtype=np.int8))
    check_eager_and_jit(lambda: lax.iota(np.float16, 0), expected=np.zeros(0, np.float16))
    for dimension in range(3):
        expected = np.indices((2, 3, 4), dtype=np.float32)[dimension]
        check_eager_and_jit(lambda: lax.broadcasted_iota(np.float32, (2, 3, 4), dimension), expected=expected)
    check_eager_and_jit(lambda: lax.broadcasted_iota(np.int64, (3,), 0), expected=np.arange(3, dtype=np.int32))


@pytest.mark.parametrize("call,error,message", [
    (lambda: lax.pad(np.zeros(3, np.float32), np.zeros(1, np.float32), [(0, 0, 0)]), TypeError,
     "padding_value must be a scalar"),
    (lambda: lax.pad(np.zeros(3, np.float32), 0.0, [(-2, -2, 0)]), ValueError, "negative size"),
    (lambda: lax.concatenate([np.zeros(2, np.float32), np.zeros(2, np.int32)], 0), TypeError, "one dtype"),
    (lambda: lax.concatenate([np.zeros((2, 3)), np.zeros((2, 4))], 0), TypeError, "differ outside dimension 0"),
    (lambda: lax.slice(np.zeros(3), (1,), (4,)), IndexError, r"limit=\(4,\)"),
    (lambda: lax.dynamic_slice(np.zeros((2, 3)), (0,), (1, 1)), TypeError, "needs 2 start indices"),
    (lambda: lax.dynamic_slice(np.zeros(3), (np.float32(0),), (1,)), TypeError,
     "index arguments to dynamic_slice must be integers of the same type, got: float32"),
    (lambda: lax.dynamic_update_slice(np.zeros(3, np.float32), np.zeros(4, np.float32), (0,)), TypeError,
     "does not fit"),
    (lambda: lax.bitcast_convert_type(np.zeros(3, np.uint8), np.uint16), TypeError,
     "needs a last dimension of size 2"),
    (lambda: lax.select_n(np.array([True]), *[np.zeros(1)] * 3), TypeError, "at most two cases"),
    (lambda: lax.select_n(np.float32(0), np.zeros(1)), TypeError, "bool or integer"),
    (lambda: lax.clamp(np.zeros(2, np.float32), np.zeros(3, np.float32), 1.0), TypeError,
     r"clamp requires min.shape == operand.shape or min.shape == \(\), got min.shape=\(2,\), operand.shape=\(3,\)"),
    (lambda: lax.shift_left(np.zeros(2, np.float32), np.zeros(2, np.float32)), TypeError, "shift_left"),
    (lambda: lax.reduce_prod(np.zeros((2, 3)), (2,)), ValueError, "out of bounds"),
    (lambda: lax.cummin(np.zeros(3), axis=1), ValueError, "out of bounds"),
    (lambda: lax.broadcasted_iota(np.int32, (2, 3), 2), ValueError, "out of range"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_bad_arguments_raise_naming_the_problem(call, error, message):
    with pytest.raises(error, match=message):
        call()
