"""jnp.convolve and jnp.correlate (``ember.numpy.convolution``) against NumPy, eagerly and under
jit; gradients against finite differences; dtypes and weak types against JAX."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
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


@given(hnp.arrays(np.float32, st.integers(1, 7), elements=st.floats(-10, 10, width=32)),
       hnp.arrays(np.float32, st.integers(1, 7), elements=st.floats(-10, 10, width=32)),
       st.sampled_from(["full", "same", "valid"]))
def test_convolve_and_correlate_match_numpy(a, v, mode):
    tol = dict(dtype=np.float32, rtol=1e-5, atol=1e-4)
    check_eager_and_jit(lambda x, y: jnp.convolve(x, y, mode), a, v, expected=np.convolve(a, v, mode), **tol)
    check_eager_and_jit(lambda x, y: jnp.correlate(x, y, mode), a, v, expected=np.correlate(a, v, mode), **tol)


def test_convolve_dtypes_defaults_and_precision():
    i = np.array([1, 2, 3, 2, 1], np.int32)
    k = np.array([4, 1, 2], np.int32)
    check_eager_and_jit(jnp.convolve, i, k, expected=np.convolve(i, k).astype(np.float32))
    check_eager_and_jit(jnp.correlate, i, k, expected=np.correlate(i, k).astype(np.float32))
    exact = jnp.convolve(i, k, preferred_element_type=jnp.int32)
    assert_allclose(exact, np.convolve(i, k))
    assert_allclose(jnp.convolve(i, k.astype(np.float16), precision="highest"), np.convolve(i, k), dtype=np.float16)


def test_convolve_gradients(rng):
    a, v = normal_float32(rng, 6), normal_float32(rng, 3)
    weights = normal_float32(rng, 8)
    check_float32_gradient(lambda x: jnp.dot(jnp.convolve(x, v), weights), a)
    check_float32_gradient(lambda y: jnp.dot(jnp.convolve(a, y), weights), v)
    check_float32_gradient(lambda y: jnp.sum(jnp.correlate(a, y, "same") ** 2), v)


def test_convolve_errors():
    with pytest.raises(ValueError, match="jnp.convolve only supports 1-dimensional inputs; got shapes"):
        jnp.convolve(jnp.ones((2, 2)), jnp.ones(2))
    with pytest.raises(ValueError, match="jnp.correlate only supports 1-dimensional inputs"):
        jnp.correlate(jnp.ones(2), jnp.asarray(1.0))
    with pytest.raises(ValueError, match="inputs cannot be empty"):
        jnp.convolve(jnp.ones(0), jnp.ones(2))
    with pytest.raises(ValueError, match="mode must be one of"):
        jnp.convolve(jnp.ones(3), jnp.ones(2), mode="circular")


# --- dtypes, weak types, vmap ------------------------------------------------------------------------
def _calls():
    i32 = np.arange(4, dtype=np.int32)
    f16 = np.arange(4, dtype=np.float16)
    return {
        "convolve(i32, i32)": lambda m: m.convolve(i32, i32),
        "convolve(f16, i32)": lambda m: m.convolve(f16, i32),
        "correlate(i32, i32, int32)": lambda m: m.correlate(i32, i32, preferred_element_type=np.int32),
    }


@pytest.mark.parametrize("call", list(_calls()))
def test_dtypes_and_weak_types_match_jax(call):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert array_types(_calls()[call](jnp)) == array_types(_calls()[call](jax_numpy))


@pytest.mark.parametrize("name,fn", [
    ("convolve", lambda x: jnp.convolve(x, x[:3], "same")),
])
def test_vmap_equals_a_loop(rng, name, fn):
    batch = normal_float32(rng, 3, 5)
    expected = np.stack([np.asarray(fn(jnp.asarray(row))) for row in batch])
    check_eager_and_jit(ember.vmap(fn), batch, expected=expected, rtol=1e-5, atol=1e-6)
