"""The set functions (``ember.numpy.sets``: union1d, intersect1d, setdiff1d, setxor1d, isin, the
unique_* family) against NumPy, eagerly and under jit, with size= under jit; dtypes and weak
types against JAX."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from util import assert_allclose, assert_same_leaves, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember.errors import ConcretizationTypeError

F32 = np.float32


def I32(values):
    return np.array(values, np.int32)


set_values = st.lists(st.integers(-4, 4), min_size=0, max_size=8).map(lambda v: np.array(v, np.int32))


@given(set_values, set_values)
def test_set_functions_match_numpy(a, b):
    for name in ("union1d", "setdiff1d", "setxor1d", "intersect1d"):
        expected = getattr(np, name)(a, b)
        assert_allclose(getattr(jnp, name)(a, b), expected, dtype=np.int32)
    assert_allclose(jnp.isin(a, b), np.isin(a, b))
    assert_allclose(jnp.isin(a, b, invert=True), np.isin(a, b, invert=True))
    got = jnp.intersect1d(a, b, return_indices=True)
    for g, e in zip(got, np.intersect1d(a, b, return_indices=True)):
        assert_allclose(g, e, check_dtype=False)


def test_set_functions_with_size_under_jit():
    a, b = np.array([3, 2, 7, 3], np.int32), np.array([2, 4], np.int32)
    check_eager_and_jit(lambda x, y: jnp.union1d(x, y, size=6), a, b, expected=I32([2, 3, 4, 7, 2, 2]))
    check_eager_and_jit(lambda x, y: jnp.setdiff1d(x, y, size=4), a, b, expected=I32([3, 7, 0, 0]))
    check_eager_and_jit(lambda x, y: jnp.setxor1d(x, y, size=5, fill_value=-1), a, b,
                        expected=I32([3, 4, 7, -1, -1]))
    check_eager_and_jit(lambda x, y: jnp.intersect1d(x, y, size=3, return_indices=True), a, b,
                        expected=(I32([2, 2, 2]), I32([1, 4, 4]), I32([0, 2, 2])))
    x = np.array([1.0, np.nan, 2.0], F32)
    check_eager_and_jit(lambda v: jnp.isin(v, np.array([np.nan, 2.0], F32)), x, expected=np.array([False, False, True]))
    with pytest.raises(ConcretizationTypeError, match="jnp.setdiff1d without size="):
        ember.jit(jnp.setdiff1d)(a, b)


def test_unique_variants():
    x = np.array([[3, 1], [3, 2]], np.int32)
    values, counts = jnp.unique_counts(x)
    assert_allclose(values, np.array([1, 2, 3], np.int32))
    assert_allclose(counts, np.array([1, 1, 2], np.int32))
    check_eager_and_jit(lambda v: jnp.unique_values(v, size=4), x, expected=I32([1, 2, 3, 1]))
    result = check_eager_and_jit(lambda v: tuple(jnp.unique_all(v, size=3)), x)
    assert_allclose(result[1], np.array([1, 3, 0], np.int32))
    assert_allclose(result[2], np.array([[2, 0], [2, 1]], np.int32))
    inverse = jnp.unique_inverse(x).inverse_indices
    assert inverse.shape == x.shape
    assert_allclose(jnp.unique_values(np.array([np.nan, np.nan, 1.0], F32)), np.array([1.0, np.nan, np.nan], F32))
    with pytest.raises(ConcretizationTypeError, match="size="):
        ember.jit(jnp.unique_values)(x)


JAX_DTYPE_CALLS = [
    ("isin", (np.array([1, 2]), 1)), ("union1d", (np.array([1.0]), np.array([2]))),
]


@pytest.mark.parametrize("name,args", JAX_DTYPE_CALLS)
def test_dtypes_and_weak_types_match_jax(name, args):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert_same_leaves(getattr(jnp, name)(*args), getattr(jax_numpy, name)(*args), name)
