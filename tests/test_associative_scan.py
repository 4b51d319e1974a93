"""lax.associative_scan against a sequential Python loop: operators that commute and that do not,
pytrees, reverse and axis, eagerly and under jit, vmap and grad; its errors."""
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as jnp
from ember import lax
from tests.util import assert_allclose, check_eager_and_jit, check_gradient, numeric_gradient

F64 = dict(rtol=1e-10, atol=1e-12)


# --- associative_scan ---------------------------------------------------------------------------------
def _sequential_scan(fn, elems, reverse=False, axis=0):
    """The reference: a Python loop of ``fn`` over the slices along ``axis`` (reversed: from the
    end, still accumulating on the left, as JAX's rev / scan / rev)."""
    leaves, treedef = ember.tree_util.tree_flatten(elems)
    n = np.shape(leaves[0])[axis]
    order = range(n - 1, -1, -1) if reverse else range(n)
    take = lambda i: ember.tree_util.tree_unflatten(treedef, [np.take(x, [i], axis) for x in leaves])
    results, carry = {}, None
    for i in order:
        carry = take(i) if carry is None else fn(carry, take(i))
        results[i] = [np.asarray(x) for x in ember.tree_util.tree_leaves(carry)]
    stacked = [np.concatenate([results[i][k] for i in range(n)], axis) for k in range(len(leaves))]
    return ember.tree_util.tree_unflatten(treedef, stacked)


def _affine_compose(first, second):
    """Apply ``first`` then ``second`` (x -> a x + b): associative, not commutative."""
    a1, b1 = first
    a2, b2 = second
    return a2 * a1, a2 * b1 + b2


def _matrix_product(x, y):
    return jnp.matmul(x, y)


@pytest.mark.parametrize("length", [1, 2, 5, 8, 13])
@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_matches_loop(rng, length, reverse):
    x = rng.normal(size=(length, 3)).astype(np.float32)
    for fn in (jnp.add, jnp.multiply, jnp.maximum):
        check_eager_and_jit(lambda v: lax.associative_scan(fn, v, reverse=reverse), x,
                            expected=_sequential_scan(fn, x, reverse), rtol=1e-5, atol=1e-5)
    pair = (rng.uniform(0.5, 1.5, size=(length, 2)).astype(np.float32), rng.normal(size=(length, 2)).astype(np.float32))
    check_eager_and_jit(lambda p: lax.associative_scan(_affine_compose, p, reverse=reverse), pair,
                        expected=_sequential_scan(_affine_compose, pair, reverse), rtol=1e-5, atol=1e-5)
    matrices = rng.normal(size=(length, 2, 2)).astype(np.float32)
    check_eager_and_jit(lambda m: lax.associative_scan(_matrix_product, m, reverse=reverse), matrices,
                        expected=_sequential_scan(_matrix_product, matrices, reverse), rtol=1e-4, atol=1e-4)


@given(st.integers(1, 9), st.integers(0, 2), st.booleans())
def test_associative_scan_axis(length, axis, reverse):
    shape = [2, 3, 2]
    shape[axis] = length
    x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape) % 7
    tree = {"a": x, "b": (x * 2).astype(np.float32)}
    fn = lambda u, v: {"a": u["a"] + v["a"], "b": jnp.maximum(u["b"], v["b"])}
    expected = {"a": (np.flip(np.cumsum(np.flip(x, axis), axis), axis) if reverse else np.cumsum(x, axis))
                .astype(np.int32),
                "b": (np.flip(np.maximum.accumulate(np.flip(2 * x, axis), axis), axis) if reverse
                      else np.maximum.accumulate(2 * x, axis)).astype(np.float32)}
    check_eager_and_jit(lambda t: lax.associative_scan(fn, t, reverse=reverse, axis=axis - 3), tree,
                        expected=expected)


def test_associative_scan_vmap_and_grad(rng, x64):
    x = rng.normal(size=(3, 6))
    batched = ember.vmap(lambda row: lax.associative_scan(jnp.multiply, row))(x)
    assert_allclose(batched, np.cumprod(x, axis=1), **F64)
    weights = np.arange(6.0)
    check_gradient(lambda v: lax.associative_scan(jnp.multiply, v) * weights, x[0])
    pair = (rng.uniform(0.5, 1.5, size=7), rng.normal(size=7))
    check_gradient(lambda a: lax.associative_scan(_affine_compose, (a, pair[1]), reverse=True)[1], pair[0])
    assert_allclose(ember.jit(ember.grad(lambda v: jnp.sum(lax.associative_scan(jnp.add, v) ** 2)))(x[0]),
                    numeric_gradient(lambda v: np.sum(np.cumsum(v) ** 2), x[0]), rtol=1e-6, atol=1e-6)


def test_associative_scan_errors_and_empty():
    with pytest.raises(ValueError, match=re.escape("must have the same first dimension. (saw: [(3,), (4,)])")):
        lax.associative_scan(jnp.add, (jnp.ones(3), jnp.ones(4)))
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        lax.associative_scan(jnp.add, jnp.ones(3), axis=2)
    empty = lax.associative_scan(jnp.add, jnp.ones((0, 2)))
    assert empty.shape == (0, 2)
