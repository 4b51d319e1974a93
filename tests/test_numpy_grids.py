"""Grids (``ember.numpy.grids``: mgrid, ogrid, indices, geomspace) against NumPy, eagerly and under
jit; dtypes and weak types against JAX."""
from __future__ import annotations

import numpy as np
import pytest
from util import assert_allclose, assert_same_leaves, check_eager_and_jit

import ember.numpy as jnp

F32 = np.float32


def test_grids():
    assert_allclose(jnp.indices((2, 3)), np.indices((2, 3)).astype(np.int32))
    assert [g.shape for g in jnp.indices((2, 3), sparse=True)] == [(2, 1), (1, 3)]
    assert_allclose(jnp.mgrid[0:3, 0:2], np.mgrid[0:3, 0:2].astype(np.int32))
    assert_allclose(jnp.mgrid[0:1:3j, 0:4:2], np.mgrid[0:1:3j, 0:4:2].astype(F32))
    for g, e in zip(jnp.ogrid[0:3, 1:5], np.ogrid[0:3, 1:5]):
        assert_allclose(g, e.astype(np.int32))
    assert_allclose(jnp.r_[1:3, 5, [7, 8], 0:1:3j], np.r_[1:3, 5, [7, 8], 0:1:3j].astype(F32))
    assert_allclose(jnp.r_["0,2", [1, 2], [3, 4]], np.r_["0,2", [1, 2], [3, 4]].astype(np.int32))
    ones = np.ones((2, 3), F32)
    assert_allclose(jnp.r_["0,4,-2", ones], np.r_["0,4,-2", ones])
    assert_allclose(jnp.c_[np.ones((2, 2), F32), [1.0, 2.0]], np.c_[np.ones((2, 2)), [1, 2]].astype(F32))
    with pytest.raises(NotImplementedError, match="matrix directive"):
        jnp.r_["r", [1, 2]]
    x = np.arange(24).reshape(2, 3, 4)
    assert_allclose(jnp.asarray(x)[jnp.s_[:, 1]], x[np.s_[:, 1]].astype(np.int32))
    assert jnp.index_exp[1:2] == (slice(1, 2),)
    assert_allclose(jnp.fromfunction(lambda i, j: i + 2 * j, (2, 3)),
                    np.fromfunction(lambda i, j: i + 2 * j, (2, 3)).astype(F32))
    assert_allclose(jnp.fromfunction(lambda i: 1.0, (3,)), np.ones(3, F32))  # vmapped: constants broadcast


def test_geomspace():
    check_eager_and_jit(lambda a, b: jnp.geomspace(a, b, 4), np.float32(1), np.float32(1000),
                        expected=np.geomspace(1, 1000, 4).astype(F32), rtol=1e-5)
    assert_allclose(jnp.geomspace(-2, -32, 5, endpoint=False), np.geomspace(-2, -32, 5, endpoint=False).astype(F32),
                    rtol=1e-5)
    start, stop = np.array([1.0, 2.0], F32), np.array([10.0, 200.0], F32)
    assert_allclose(jnp.geomspace(start, stop, 3, axis=1), np.geomspace(start, stop, 3, axis=1).astype(F32), rtol=1e-5)


JAX_DTYPE_CALLS = [
    ("geomspace", (1, 100, 3)), ("indices", ((2, 3),)),
]


@pytest.mark.parametrize("name,args", JAX_DTYPE_CALLS)
def test_dtypes_and_weak_types_match_jax(name, args):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert_same_leaves(getattr(jnp, name)(*args), getattr(jax_numpy, name)(*args), name)
