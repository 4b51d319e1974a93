"""jnp.isclose and jnp.allclose (``ember.numpy.comparison``) against NumPy, eagerly and under
jit; dtypes and weak types against JAX."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from util import array_types, check_eager_and_jit, normal_float32

import ember
import ember.numpy as jnp

TOL = dict(dtype=np.float32, rtol=2e-5, atol=2e-5)  # float32 results against float64 NumPy


finite_floats = st.floats(-100, 100, allow_nan=False, width=32)


# --- isclose, allclose -------------------------------------------------------------------------------
SPECIAL = np.array([0.0, 1.0, -1.0, 1e-9, np.inf, -np.inf, np.nan, 1.00001, 100.0], np.float32)


@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_special_values(equal_nan):
    a, b = np.meshgrid(SPECIAL, SPECIAL)
    check_eager_and_jit(lambda x, y: jnp.isclose(x, y, equal_nan=equal_nan), a, b,
                        expected=np.isclose(a, b, equal_nan=equal_nan))


@given(hnp.arrays(np.float32, st.integers(1, 6), elements=finite_floats),
       st.sampled_from([1e-5, 1e-2, 0.5]), st.sampled_from([1e-8, 1e-3, 1.0]))
def test_isclose_tolerances(a, rtol, atol):
    b = (a * np.float32(1.0 + rtol / 2)).astype(np.float32)
    check_eager_and_jit(lambda x, y, r, t: jnp.isclose(x, y, r, t), a, b, rtol, atol,
                        expected=np.isclose(a, b, rtol=np.float32(rtol), atol=np.float32(atol)))


def test_isclose_integers_and_allclose():
    i = np.array([1, 2, 3], np.int32)
    check_eager_and_jit(lambda x: jnp.isclose(x, x + 1, atol=1), i, expected=np.array([True] * 3))
    check_eager_and_jit(lambda x: jnp.allclose(x, 1.0 * x), i, expected=np.array(True))
    check_eager_and_jit(lambda x: jnp.allclose(x, x + 1e-3, rtol=0, atol=1e-4), i.astype(np.float32),
                        expected=np.array(False))
    assert jnp.allclose(np.nan, np.nan, equal_nan=True) and not jnp.allclose(np.nan, np.nan)


# --- dtypes, weak types, vmap ------------------------------------------------------------------------
def _calls():
    i32 = np.arange(4, dtype=np.int32)
    f16 = np.arange(4, dtype=np.float16)
    return {
        "isclose(1, 2)": lambda m: m.isclose(1, 2),
        "isclose(f16, 1.0)": lambda m: m.isclose(f16, 1.0),
        "allclose(i32, 1)": lambda m: m.allclose(i32, 1),
    }


@pytest.mark.parametrize("call", list(_calls()))
def test_dtypes_and_weak_types_match_jax(call):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert array_types(_calls()[call](jnp)) == array_types(_calls()[call](jax_numpy))


@pytest.mark.parametrize("name,fn", [
    ("isclose", lambda x: jnp.isclose(x, 0.1, atol=0.5)),
])
def test_vmap_equals_a_loop(rng, name, fn):
    batch = normal_float32(rng, 3, 5)
    expected = np.stack([np.asarray(fn(jnp.asarray(row))) for row in batch])
    check_eager_and_jit(ember.vmap(fn), batch, expected=expected, rtol=1e-5, atol=1e-6)
