"""JAX's lax functions that ember builds from its primitives (``ember/lax/composites.py``):
``reduce`` with any computation and init value, ``split``, ``stack``, ``unstack``, ``tile``,
``collapse``, ``broadcast_like``, ``broadcast_shapes``, ``clz``, ``dtype``, ``empty``,
``optimization_barrier``; against NumPy-written rules, and against JAX where it is installed."""
from __future__ import annotations

import functools
import operator

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from util import assert_allclose

import ember
import ember.numpy as jnp
from ember import lax

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=0, max_size=3, unique=True), st.sampled_from(["add", "mul", "max", "min"]),
       st.sampled_from([0.0, 1.0, 2.5]))
def test_reduce_is_the_fold_from_the_init_value(dims, name, init):
    # XLA's reduce: init combined in exactly once, whatever the init value (identity or not)
    ops = {"add": (lax.add, np.add), "mul": (lax.mul, np.multiply), "max": (lax.max, np.maximum),
           "min": (lax.min, np.minimum)}
    ours, ufunc = ops[name]
    x = X / 4
    want = ufunc.reduce(np.moveaxis(x, dims, range(len(dims))).reshape((-1,) + tuple(
        s for d, s in enumerate(x.shape) if d not in dims)) if dims else x[None], axis=0)
    want = ufunc(want, np.float32(init))
    for fn in (lambda a: lax.reduce(a, init, ours, dims), ember.jit(lambda a: lax.reduce(a, init, ours, dims))):
        assert_allclose(fn(x), want, rtol=1e-5, atol=1e-5)


def test_reduce_with_a_general_computation_and_operand_trees():
    x = jnp.asarray(X)
    # a tuple of operands reduced together: sum, and the maximum with its position
    def both(a, b):
        larger = a[1] >= b[1]
        return a[0] + b[0], jnp.where(larger, a[1], b[1]), jnp.where(larger, a[2], b[2])

    idx = lax.broadcasted_iota(np.int32, X.shape, 2)
    total, best, where = lax.reduce((x, x, idx), (0.0, -np.inf, 0), both, (2,))
    assert_allclose(total, X.sum(2))
    assert_allclose(best, X.max(2))
    np.testing.assert_array_equal(where, X.argmax(2))
    # a computation that is no lax function: a loop in order; the empty reduction is the init value
    assert_allclose(lax.reduce(x, 0.0, lambda a, b: jnp.maximum(a, b) + 0 * b, (0, 2)), X.max((0, 2)).clip(0))
    assert_allclose(lax.reduce(jnp.ones((0, 3)), 5.0, lax.add, (0,)), np.full(3, 5.0, np.float32))
    assert_allclose(ember.grad(lambda a: lax.reduce(a, 0.0, lambda p, q: p + q, (0, 1, 2)))(x), np.ones_like(X))
    with pytest.raises(ValueError, match="same structure"):
        lax.reduce((x, x), 0.0, lax.add, (0,))


def test_shape_helpers():
    x = jnp.asarray(X)
    parts = lax.split(x, (1, 3), axis=-1)
    assert [p.shape for p in parts] == [(2, 3, 1), (2, 3, 3)]
    assert_allclose(parts[1], X[..., 1:])
    with pytest.raises(ValueError, match="Sum of sizes 3 must be equal to dimension 2"):
        lax.split(x, (1, 2), axis=2)
    assert_allclose(lax.stack([x, -x], axis=1), np.stack([X, -X], 1))
    assert [u.tolist() for u in lax.unstack(x, 1)] == [X[:, i].tolist() for i in range(3)]
    assert_allclose(lax.tile(x, (2, 1, 3)), np.tile(X, (2, 1, 3)))
    assert lax.collapse(x, 1).shape == (2, 12) and lax.collapse(x, 0, 2).shape == (6, 4)
    assert_allclose(lax.broadcast_like(jnp.arange(4.0), x), np.broadcast_to(np.arange(4.0, dtype=np.float32), X.shape))
    assert lax.broadcast_shapes((2, 1), (3,), ()) == (2, 3)
    with pytest.raises(ValueError, match="Incompatible shapes"):
        lax.broadcast_shapes((2,), (3,))
    assert lax.dtype(1.0) == np.float32 and lax.dtype(np.int64(1)) == np.int32
    assert lax.empty((2, 3), np.int32).shape == (2, 3)
    tree = {"a": x, "b": 1}
    assert lax.optimization_barrier(tree) is tree


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32])
def test_clz_counts_leading_zero_bits(dtype):
    bits = np.dtype(dtype).itemsize * 8
    info = np.iinfo(dtype)
    values = np.array([0, 1, 2, 3, info.max, info.min, info.max // 3], dtype)
    want = [bits if v == 0 else bits - int(v).bit_length() if v > 0 else 0 for v in values.tolist()]
    for fn in (lax.clz, ember.jit(lax.clz)):
        np.testing.assert_array_equal(fn(values), want)


def test_composites_give_jaxs_results():
    jax = pytest.importorskip("jax")
    for ours, theirs in [
        (lax.reduce(jnp.asarray(X), 1.0, lax.add, (0, 2)), jax.lax.reduce(X, 1.0, jax.lax.add, (0, 2))),
        (lax.reduce(jnp.asarray(X), 0.0, lambda a, b: a + 2 * b, (1,)),
         jax.lax.reduce(X, 0.0, lambda a, b: a + 2 * b, (1,))),
        (lax.clz(np.array([0, 1, 255, -1, 2**30], np.int32)), jax.lax.clz(np.array([0, 1, 255, -1, 2**30], np.int32))),
        (lax.tile(jnp.asarray(X), (1, 2, 2)), jax.lax.tile(X, (1, 2, 2))),
        (lax.collapse(jnp.asarray(X), 1, 3), jax.lax.collapse(X, 1, 3)),
    ]:
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
        if functools.reduce(operator.mul, ours.shape, 1):
            np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5)


def test_convolution_shape_helpers_are_jaxs():
    assert lax.conv_shape_tuple((8, 3, 32, 32), (16, 3, 5, 5), (2, 2), "SAME") == (8, 16, 16, 16)
    assert lax.conv_shape_tuple((8, 3, 32, 30), (16, 3, 5, 5), (1, 2), [(1, 1), (0, 2)], 2) == (4, 16, 30, 14)
    with pytest.raises(TypeError, match="Wrong number of explicit pads for convolution: expected 2, got 1"):
        lax.conv_shape_tuple((8, 3, 32, 32), (16, 3, 5, 5), (1, 1), [(0, 0)])
    assert lax.conv_general_permutations(("NHWC", "HWIO", "NHWC")) == ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    assert lax.conv_general_permutations(("NWC", "WIO", "NCW")) == ((0, 2, 1), (2, 1, 0), (0, 1, 2))
    with pytest.raises(TypeError):
        lax.conv_general_permutations(("NHWC", "HWIO", "NHWCC"))
