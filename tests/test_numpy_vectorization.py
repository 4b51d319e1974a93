"""jnp.piecewise and jnp.vectorize (``ember.numpy.vectorization``) against NumPy, eagerly and under
jit; dtypes and weak types against JAX."""
from __future__ import annotations

import numpy as np
import pytest
from util import (
    array_types,
    assert_allclose,
    check_eager_and_jit,
    check_float32_gradient,
    normal_float32,
)

import ember
import ember.numpy as jnp

TOL = dict(dtype=np.float32, rtol=2e-5, atol=2e-5)  # float32 results against float64 NumPy


def test_piecewise_matches_numpy():
    x = np.linspace(-3, 3, 13).astype(np.float32)

    def conditions(a):
        return [a < -1, a > 1, (a > 0.5) & (a < 2)]  # overlapping: the last one that holds wins

    functions = [lambda a: -a, lambda a: a * 3.0, 7.0, lambda a: a ** 2]  # the last: where none holds
    check_eager_and_jit(lambda a: jnp.piecewise(a, conditions(a), functions), x,
                        expected=np.piecewise(x, conditions(x), functions))
    check_eager_and_jit(lambda a: jnp.piecewise(a, [a < 0], [lambda v, k: v * k], k=2.0), x,
                        expected=np.piecewise(x, [x < 0], [lambda v: v * 2.0]))
    i = np.arange(-2, 3, dtype=np.int32)
    check_eager_and_jit(lambda a: jnp.piecewise(a, a > 0, [lambda v: v * 2.5, 1.7]), i,
                        expected=np.piecewise(i, i > 0, [lambda v: (v * 2.5).astype(np.int32), 1]))
    check_float32_gradient(lambda v: jnp.piecewise(v, [v < 0], [jnp.sin, jnp.cos]).sum(), np.array([-1.0, 0.5, 2.0]))
    with pytest.raises(ValueError, match="with 1 condition\\(s\\), either 1 or 2 functions are expected; got 3"):
        jnp.piecewise(x, [x < 0], [1, 2, 3])


def test_vectorize_elementwise_broadcasting():
    def clipped_ratio(a, b):
        return jnp.where(b == 0, 0.0, a / b)

    f = jnp.vectorize(clipped_ratio)
    a, b = np.arange(6, dtype=np.float32).reshape(2, 1, 3), np.array([[0.0], [2.0]], np.float32)
    expected = np.where(b == 0, 0.0, a / np.where(b == 0, 1, b)).astype(np.float32)
    check_eager_and_jit(f, a, b, expected=expected)
    assert f.__name__ == "clipped_ratio"
    out = f(1.0, 4)  # scalars: one call, weak types kept
    assert out.shape == () and out.aval.weak_type
    check_eager_and_jit(lambda a: f(a, b=2.0), a, expected=a / 2)  # keyword arguments map too


def test_vectorize_signature_core_dims(rng):
    dot = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
    a, b = normal_float32(rng, 4, 1, 3), normal_float32(rng, 5, 3)
    check_eager_and_jit(dot, a, b, expected=np.einsum("...n,...n->...", a, b), **TOL)
    outer = jnp.vectorize(lambda u, v: (jnp.outer(u, v), u.sum()), signature="(m),(n)->(m,n),()")
    product, total = check_eager_and_jit(outer, a, normal_float32(rng, 2))
    assert product.shape == (4, 1, 3, 2) and total.shape == (4, 1)
    matvec = jnp.vectorize(jnp.matmul, signature="(m,n),(n)->(m)")
    matrices, vector = normal_float32(rng, 2, 3, 4), normal_float32(rng, 4)
    check_eager_and_jit(matvec, matrices, vector, expected=matrices @ vector, **TOL)
    grad = ember.grad(lambda x: dot(x, b).sum())(jnp.asarray(a))
    assert_allclose(grad, np.broadcast_to(b.sum(0), a.shape), **TOL)


def test_vectorize_excluded():
    def scale(x, factors, mode="sum"):
        return (x * factors).sum() if mode == "sum" else (x * factors).max()

    f = jnp.vectorize(scale, excluded={1, "mode"})
    x = np.arange(3, dtype=np.float32)
    factors = [1.0, 2.0]  # a list: it must reach scale unmapped
    check_eager_and_jit(lambda a: f(a, jnp.array(factors), mode="max"), x, expected=x * 2)
    check_eager_and_jit(lambda a: f(a, jnp.array(factors)), x, expected=x * 3)
    with_none = jnp.vectorize(lambda a, b: a if b is None else a + b)
    check_eager_and_jit(lambda a: with_none(a, None), x, expected=x)
    # The signature describes the arguments that are not excluded.
    weighted_sum = jnp.vectorize(lambda w, name, v: jnp.dot(w, v), excluded={1}, signature="(n),(n)->()")
    check_eager_and_jit(lambda a: weighted_sum(a, "label", jnp.ones((2, 3))), x, expected=np.full(2, 3.0, np.float32))


def test_vectorize_errors():
    dot = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
    with pytest.raises(ValueError, match="inconsistent size for core dimension 'n': 2 vs 3"):
        dot(jnp.ones(3), jnp.ones(2))
    with pytest.raises(TypeError, match="wrong number of positional arguments: expected 2, got 1"):
        dot(jnp.ones(3))
    with pytest.raises(ValueError, match="does not have enough dimensions for all core dimensions"):
        dot(jnp.ones(3), 1.0)
    with pytest.raises(ValueError, match=r"output shape \(3,\) does not match core dimensions \('n', 'n'\)"):
        jnp.vectorize(lambda a, b: a * b, signature="(n),(n)->(n,n)")(jnp.ones(3), jnp.ones(3))
    with pytest.raises(TypeError, match="output must be a tuple when multiple outputs are expected"):
        jnp.vectorize(lambda a: a, signature="()->(),()")(jnp.ones(3))
    with pytest.raises(ValueError, match="not a valid gufunc signature"):
        jnp.vectorize(jnp.dot, signature="(n),(n)")
    with pytest.raises(ValueError, match="do not broadcast"):
        jnp.vectorize(jnp.add)(jnp.ones(3), jnp.ones(2))
    with pytest.raises(TypeError, match="can only exclude integer or string arguments"):
        jnp.vectorize(jnp.add, excluded={1.5})
    with pytest.raises(ValueError, match="contains negative numbers"):
        jnp.vectorize(jnp.add, excluded={-1})


# --- dtypes, weak types, vmap ------------------------------------------------------------------------
def _calls():
    i32 = np.arange(4, dtype=np.int32)
    return {
        "piecewise(i32, [i32 > 1], [lambda x: x * 2.5, 1.7])": lambda m: m.piecewise(
            i32, [i32 > 1], [lambda x: x * 2.5, 1.7]),
        "vectorize(add)(i32, 1)": lambda m: m.vectorize(lambda a, b: a + b)(i32, 1),
        "vectorize(add)(1, 2.0)": lambda m: m.vectorize(lambda a, b: a + b)(1, 2.0),
    }


@pytest.mark.parametrize("call", list(_calls()))
def test_dtypes_and_weak_types_match_jax(call):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert array_types(_calls()[call](jnp)) == array_types(_calls()[call](jax_numpy))


@pytest.mark.parametrize("name,fn", [
    ("piecewise", lambda x: jnp.piecewise(x, [x < 0], [jnp.exp, jnp.sin])),
])
def test_vmap_equals_a_loop(rng, name, fn):
    batch = normal_float32(rng, 3, 5)
    expected = np.stack([np.asarray(fn(jnp.asarray(row))) for row in batch])
    check_eager_and_jit(ember.vmap(fn), batch, expected=expected, rtol=1e-5, atol=1e-6)
