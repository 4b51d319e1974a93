"""The array utilities (``ember.numpy.array_utils``: array_equal, array_equiv, isscalar, iterable,
iscomplexobj, isrealobj, matvec, vecmat, fill_diagonal, put, place) against NumPy, eagerly and
under jit; dtypes and weak types against JAX."""
from __future__ import annotations

import numpy as np
import pytest
from util import assert_allclose, assert_same_leaves, check_eager_and_jit

import ember
import ember.numpy as jnp

F32 = np.float32

rng = np.random.default_rng(0)


def test_predicates_and_conversions():
    assert bool(jnp.array_equal([1, 2], [1, 2])) and not bool(jnp.array_equal([1, 2], [1, 2, 3]))
    nan = np.array([1.0, np.nan], F32)
    assert not bool(jnp.array_equal(nan, nan)) and bool(jnp.array_equal(nan, nan, equal_nan=True))
    assert bool(check_eager_and_jit(jnp.array_equiv, np.array([1, 1]), np.array([1])))
    assert not bool(jnp.array_equiv(np.ones(2), np.ones(3)))
    assert jnp.astype(np.array([1, 2]), None).dtype == np.float32
    assert jnp.astype(np.array([1.7]), jnp.int64).dtype == np.int32
    assert jnp.isscalar(1.0) and jnp.isscalar(jnp.array(1)) and not jnp.isscalar(jnp.ones(2)) and not jnp.isscalar("a")
    assert jnp.iterable([1]) and not jnp.iterable(3)
    v = np.array([[1, 2], [3, 4]], np.int32)
    check_eager_and_jit(lambda a: jnp.diagflat(a, 1), v, expected=np.diagflat(v, 1))
    check_eager_and_jit(lambda a: jnp.rollaxis(a, 2, 1), np.ones((2, 3, 4, 5), F32),
                        expected=np.ones((2, 4, 3, 5), F32))


def test_iscomplexobj_and_isrealobj_look_at_the_type_alone():
    for x in (jnp.ones(3), np.ones(2, np.complex64), 1.0, 1j, [1, 2], None, np.array([1 + 0j])):
        assert jnp.iscomplexobj(x) == np.iscomplexobj(x) and jnp.isrealobj(x) == np.isrealobj(x), x
    assert ember.jit(lambda x: jnp.isrealobj(x) * x)(2.0) == 2.0


def test_matvec_vecmat():
    m, v = rng.normal(size=(2, 3, 4)).astype(F32), rng.normal(size=(4,)).astype(F32)
    check_eager_and_jit(jnp.matvec, m, v, expected=np.einsum("bij,j->bi", m, v), rtol=1e-5)
    w = rng.normal(size=(3,)).astype(F32)
    check_eager_and_jit(jnp.vecmat, w, m, expected=np.einsum("i,bij->bj", w, m), rtol=1e-5)
    grad = ember.grad(lambda a: jnp.sum(jnp.matvec(a, v)))(m)
    assert_allclose(grad, np.broadcast_to(v, m.shape))


@pytest.mark.parametrize("shape,wrap", [((5, 3), True), ((5, 3), False), ((3, 5), False), ((3, 3, 3), False)])
def test_fill_diagonal(shape, wrap):
    expected = np.zeros(shape, F32)
    np.fill_diagonal(expected, [1, 2], wrap=wrap)
    check_eager_and_jit(lambda a: jnp.fill_diagonal(a, np.array([1.0, 2.0], F32), wrap=wrap, inplace=False),
                        np.zeros(shape, F32), expected=expected)


def test_put_place_and_inplace_errors():
    a = np.zeros(5, F32)
    expected = a.copy()
    np.put(expected, [0, 2], [7.0, 8.0, 9.0])
    check_eager_and_jit(lambda x: jnp.put(x, np.array([0, 2]), np.array([7.0, 8.0, 9.0], F32), inplace=False), a,
                        expected=expected)
    assert_allclose(jnp.put(a, np.array([0, 7]), 1.0, mode="clip", inplace=False), np.array([1, 0, 0, 0, 1], F32))
    assert_allclose(jnp.put(a, np.array([0, 7]), 1.0, mode="wrap", inplace=False), np.array([1, 0, 1, 0, 0], F32))
    mask = np.array([1, 0, 1, 1, 0], bool)
    expected = a.copy()
    np.place(expected, mask, [7.0, 8.0])
    check_eager_and_jit(lambda x, m: jnp.place(x, m, np.array([7.0, 8.0], F32), inplace=False), a, mask,
                        expected=expected)
    for call in (lambda: jnp.put(a, 0, 1.0), lambda: jnp.place(a, mask, 1.0), lambda: jnp.fill_diagonal(a, 1.0)):
        with pytest.raises(ValueError, match="Pass inplace=False"):
            call()


JAX_DTYPE_CALLS = [
    ("array_equal", (np.ones(2), np.ones(2))),
]


@pytest.mark.parametrize("name,args", JAX_DTYPE_CALLS)
def test_dtypes_and_weak_types_match_jax(name, args):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert_same_leaves(getattr(jnp, name)(*args), getattr(jax_numpy, name)(*args), name)
