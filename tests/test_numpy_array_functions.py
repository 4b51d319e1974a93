"""The array functions (``ember.numpy.array_functions``: block, can_cast, apply_along_axis,
apply_over_axes, put_along_axis, mask_indices) against NumPy, eagerly and under jit."""
from __future__ import annotations

import numpy as np
import pytest
from util import assert_allclose, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember import dtypes
from ember.errors import ConcretizationTypeError

F32 = np.float32
rng = np.random.default_rng(0)
x_f = rng.normal(size=(3, 4, 5)).astype(F32)


# --- block -------------------------------------------------------------------------------------------
def test_block_matches_numpy():
    a, b = np.ones((2, 2), F32), np.zeros((2, 3), F32)
    c, d = np.full((1, 2), 2, F32), np.full((1, 3), 3, F32)
    check_eager_and_jit(lambda a, b, c, d: jnp.block([[a, b], [c, d]]), a, b, c, d,
                        expected=np.block([[a, b], [c, d]]))
    v, s = np.arange(3, dtype=np.int32), np.int32(7)
    check_eager_and_jit(lambda v, s: jnp.block([v, s]), v, s, expected=np.block([v, s]))
    check_eager_and_jit(lambda v: jnp.block([[v], [v]]), v, expected=np.block([[v], [v]]))


def test_block_scalar_keeps_weak_type():
    out = jnp.block(1.0)
    assert out.dtype == F32 and out.weak_type
    assert_allclose(jnp.block([1, 2]), np.array([1, 2], np.int32))


@pytest.mark.parametrize("arg,message", [((), "does not allow tuples"), ([], "does not allow empty list"),
                                         ([[1], 2], "Mismatched list depths")])
def test_block_errors(arg, message):
    with pytest.raises(ValueError, match=message):
        jnp.block(arg)


# --- can_cast ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("from_,to,casting", [
    (np.int8, np.float32, "safe"), (np.float32, np.int32, "safe"), (np.float32, np.int32, "same_kind"),
    (np.float32, np.int32, "unsafe"), (np.int32, np.int16, "same_kind"), (np.float64, np.float32, "safe")])
def test_can_cast_matches_numpy(from_, to, casting):
    assert jnp.can_cast(from_, to, casting) is np.can_cast(from_, to, casting)


def test_can_cast_arrays_and_bfloat16():
    assert jnp.can_cast(jnp.ones(2), "int32") is False
    assert jnp.can_cast(jnp.float32, dtypes.bfloat16) is False
    assert jnp.can_cast(dtypes.bfloat16, jnp.float32) is True
    assert ember.jit(lambda x: jnp.ones(()) if jnp.can_cast(x, jnp.float32) else jnp.zeros(()))(np.int8(1)) == 1


def test_can_cast_refuses_python_scalars():
    with pytest.raises(TypeError, match="Python int"):
        jnp.can_cast(1, "int32")


# --- apply_along_axis, apply_over_axes ---------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_apply_along_axis_matches_numpy(axis):
    def first_and_sum(v):
        return jnp.stack([v[0], jnp.sum(v)])

    expected = np.apply_along_axis(lambda v: np.stack([v[0], v.sum()]), axis, x_f)
    check_eager_and_jit(lambda x: jnp.apply_along_axis(first_and_sum, axis, x), x_f, expected=expected, rtol=1e-5)


def test_apply_along_axis_scalar_result_and_extra_args():
    expected = np.apply_along_axis(np.dot, 1, x_f[0], np.arange(5, dtype=F32))
    check_eager_and_jit(lambda x, w: jnp.apply_along_axis(jnp.dot, 1, x, w), x_f[0], np.arange(5, dtype=F32),
                        expected=expected, rtol=1e-5)


def test_apply_along_axis_errors():
    with pytest.raises(ValueError, match="axis 3 is out of bounds"):
        jnp.apply_along_axis(jnp.sum, 3, x_f)
    with pytest.raises(ConcretizationTypeError, match="apply_along_axis"):
        ember.jit(lambda x, a: jnp.apply_along_axis(jnp.sum, a, x))(x_f, 1)


@pytest.mark.parametrize("axes", [[0], [0, 2], (1, -1), 1])
def test_apply_over_axes_matches_numpy(axes):
    check_eager_and_jit(lambda x: jnp.apply_over_axes(jnp.sum, x, axes), x_f,
                        expected=np.apply_over_axes(np.sum, x_f, axes), rtol=1e-5)
    check_eager_and_jit(lambda x: jnp.apply_over_axes(lambda a, ax: jnp.max(a, ax, keepdims=True), x, axes), x_f,
                        expected=np.apply_over_axes(np.max, x_f, axes))


def test_apply_over_axes_wrong_rank():
    with pytest.raises(ValueError, match="function is not returning an array of the correct shape"):
        jnp.apply_over_axes(lambda a, axis: a[0, 0], x_f, [0])


# --- put_along_axis ----------------------------------------------------------------------------------
def _numpy_put_along_axis(arr, indices, values, axis):
    out = arr.copy()
    np.put_along_axis(out, indices, values, axis)
    return out


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_put_along_axis_matches_numpy(axis):
    arr = rng.normal(size=(3, 4)).astype(F32)
    indices = np.argsort(arr, axis=axis)[(slice(0, 2),) * 1 if axis == 0 else (slice(None), slice(0, 2))]
    values = np.float32(-1.0)
    check_eager_and_jit(lambda a, i: jnp.put_along_axis(a, i, values, axis, inplace=False), arr, indices,
                        expected=_numpy_put_along_axis(arr, indices, values, axis))
    column = np.array([[1], [0], [3]], np.int32)
    row_values = np.arange(3, dtype=np.int32).reshape(3, 1)
    int_arr = np.arange(12, dtype=np.int32).reshape(3, 4)
    check_eager_and_jit(lambda a, i, v: jnp.put_along_axis(a, i, v, 1, inplace=False), int_arr, column, row_values,
                        expected=_numpy_put_along_axis(int_arr, column, row_values, 1))


def test_put_along_axis_flattened_and_broadcast_index():
    arr = np.arange(6, dtype=F32).reshape(2, 3)
    check_eager_and_jit(lambda a: jnp.put_along_axis(a, np.array([0, 5]), 9, None, inplace=False), arr,
                        expected=_numpy_put_along_axis(arr, np.array([0, 5]), 9, None))
    broadcast_index = np.array([[2]])
    check_eager_and_jit(lambda a: jnp.put_along_axis(a, broadcast_index, 7, 1, inplace=False), arr,
                        expected=_numpy_put_along_axis(arr, broadcast_index, 7, 1))


def test_put_along_axis_errors():
    arr = jnp.ones((2, 3))
    with pytest.raises(ValueError, match="cannot modify arrays in-place.*Pass inplace=False"):
        jnp.put_along_axis(arr, jnp.array([[0]]), 2.0, 0)
    with pytest.raises(ValueError, match=r"must have same ndim. Got arr.ndim=2 and indices.ndim=1."):
        jnp.put_along_axis(arr, jnp.array([0]), 2.0, 0, inplace=False)
    with pytest.raises(ValueError, match=r"Got arr.ndim=1 and indices.ndim=2."):
        jnp.put_along_axis(arr, jnp.array([[0]]), 2.0, None, inplace=False)


# --- mask_indices ------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [-1, 0, 2])
def test_mask_indices_matches_numpy(k):
    for mine, theirs in ((jnp.triu, np.triu), (jnp.tril, np.tril)):
        rows, cols = jnp.mask_indices(4, mine, k)
        want_rows, want_cols = np.mask_indices(4, theirs, k)
        assert_allclose(rows, want_rows.astype(np.int32))
        assert_allclose(cols, want_cols.astype(np.int32))


def test_mask_indices_under_jit_needs_size():
    want_rows, want_cols = np.mask_indices(3, np.triu, 1)
    rows, cols = ember.jit(lambda: jnp.mask_indices(3, jnp.triu, 1, size=3))()
    assert_allclose(rows, want_rows.astype(np.int32))
    assert_allclose(cols, want_cols.astype(np.int32))
    with pytest.raises(ConcretizationTypeError, match="size="):
        ember.jit(lambda: jnp.mask_indices(3, jnp.triu, 1))()
    with pytest.raises(ConcretizationTypeError, match="mask_indices"):
        ember.jit(lambda n: jnp.mask_indices(n, jnp.triu, size=3))(3)
