"""jnp.ufunc and jnp.frompyfunc (``ember.numpy.ufunc_api``): attributes, calls and the reduce,
accumulate, at, reduceat and outer methods against JAX (and NumPy), eagerly and under jit; x64
off and on."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from jax_oracle import jjnp, same_as_jax
from util import assert_allclose

import ember
import ember.numpy as jnp

F32 = np.float32
rng = np.random.default_rng(0)


def _muladd(a, b):
    return a * b + 1


def _pair(make):
    """The same ufunc, from ember and from JAX."""
    return make(jnp), make(jjnp)


def test_ufunc_attributes_match_jax():
    ours, theirs = _pair(lambda m: m.frompyfunc(_muladd, 2, 1, identity=0))
    for attribute in ("nin", "nout", "nargs", "identity", "__name__"):
        assert getattr(ours, attribute) == getattr(theirs, attribute)
    assert repr(ours) == repr(theirs) == "<jnp.ufunc '_muladd'>"
    assert isinstance(ours, jnp.ufunc)
    again = jnp.frompyfunc(_muladd, 2, 1, identity=0)
    assert ours == again and hash(ours) == hash(again)
    assert ours != jnp.frompyfunc(_muladd, 2, 1)
    with pytest.raises(AttributeError):
        ours.nin = 3
    named = jnp.ufunc(_muladd, 2, 1, name="muladd", nargs=3)
    assert named.__name__ == "muladd" and named.nargs == 3


A = np.arange(12, dtype=F32).reshape(3, 4) / 4
AI = np.arange(12, dtype=np.int32).reshape(3, 4) % 5


def _method_both(method, *args, ours_ufunc=None, theirs_ufunc=None, jit=True, **kwargs):
    ours_ufunc = ours_ufunc or jnp.frompyfunc(_muladd, 2, 1)
    theirs_ufunc = theirs_ufunc or jjnp.frompyfunc(_muladd, 2, 1)
    theirs = getattr(theirs_ufunc, method)(*args, **kwargs)
    ours = getattr(ours_ufunc, method)(*args, **kwargs)
    same_as_jax(ours, theirs, rtol=1e-5, atol=1e-5)
    if jit:
        same_as_jax(ember.jit(lambda *a: getattr(ours_ufunc, method)(*a, **kwargs))(*args), theirs,
                    rtol=1e-5, atol=1e-5)


def test_ufunc_call_matches_jax(x64_both):
    _method_both("__call__", A, A[0])
    _method_both("__call__", AI, 2)
    unary_ours, unary_theirs = _pair(lambda m: m.frompyfunc(lambda x: m.sin(x) * 2, 1, 1))
    _method_both("__call__", A, ours_ufunc=unary_ours, theirs_ufunc=unary_theirs)
    two_ours, two_theirs = _pair(lambda m: m.frompyfunc(lambda x, y: (x + y, x - y), 2, 2))
    _method_both("__call__", A, A.T[:1].T, ours_ufunc=two_ours, theirs_ufunc=two_theirs)
    with pytest.raises(NotImplementedError, match="out argument"):
        jnp.frompyfunc(_muladd, 2, 1)(A, A, out=A)
    with pytest.raises(TypeError, match="_muladd requires ndarray or scalar"):
        jnp.frompyfunc(_muladd, 2, 1)([1.0], A)


@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"axis": None}, {"axis": -1, "keepdims": True},
                                    {"axis": None, "keepdims": True}, {"initial": 2.0}, {"dtype": np.float32},
                                    {"axis": 1, "initial": 1.0, "where": A > 0.5}])
def test_ufunc_reduce_matches_jax(x64_both, kwargs):
    _method_both("reduce", A, **kwargs)
    if "where" not in kwargs and "initial" not in kwargs:
        _method_both("reduce", AI, **kwargs)


def test_ufunc_reduce_identity_and_errors_match_jax():
    add_ours, add_theirs = _pair(lambda m: m.frompyfunc(m.add, 2, 1, identity=0))
    _method_both("reduce", np.zeros((0, 3), F32), ours_ufunc=add_ours, theirs_ufunc=add_theirs)
    _method_both("reduce", A, ours_ufunc=add_ours, theirs_ufunc=add_theirs, where=A > 1)
    assert_allclose(add_ours.reduce(A, axis=0), A.sum(0), rtol=1e-6)
    f = jnp.frompyfunc(_muladd, 2, 1)
    with pytest.raises(ValueError, match="no identity"):
        f.reduce(np.zeros((0, 3), F32))
    with pytest.raises(ValueError, match="specify 'initial'"):
        f.reduce(A, where=A > 1)
    with pytest.raises(ValueError, match="dtype=bool"):
        add_ours.reduce(A, where=A)
    with pytest.raises(ValueError, match="binary ufuncs"):
        jnp.frompyfunc(jnp.sin, 1, 1).reduce(A)
    with pytest.raises(ValueError, match="single value"):
        jnp.frompyfunc(lambda a, b: (a, b), 2, 2).reduce(A)


@pytest.mark.parametrize("kwargs", [{}, {"axis": 1}, {"axis": -1, "dtype": np.float32}])
def test_ufunc_accumulate_matches_jax(x64_both, kwargs):
    _method_both("accumulate", A, **kwargs)
    _method_both("accumulate", AI, **kwargs)
    _method_both("accumulate", np.zeros((0, 2), F32), **kwargs)


def test_ufunc_at_matches_jax(x64_both):
    a = np.arange(6, dtype=F32)
    _method_both("at", a, np.array([0, 0, 3]), 2.0, inplace=False)
    _method_both("at", a, np.array([[1, 1], [5, 0]]), np.array([[2.0, 3.0], [1.0, 0.5]], F32), inplace=False)
    _method_both("at", A, (np.array([0, 2, 0]), np.array([1, 1, 1])), 3.0, inplace=False)
    # (JAX's jitted ``at`` refuses slices in the index; ember's applies the function per index)
    b = np.array([[1.0, 2.0, 3.0], [0.5, 1.0, 2.0]], F32)
    sliced = jnp.frompyfunc(_muladd, 2, 1).at(A, (slice(None), np.array([0, 0])), b, inplace=False)
    expected = A.copy()
    for row in b:
        expected[:, 0] = expected[:, 0] * row + 1
    assert_allclose(sliced, expected)
    _method_both("at", A, (1, 2), 4.0, inplace=False)
    neg_ours, neg_theirs = _pair(lambda m: m.frompyfunc(lambda x: -x, 1, 1))
    _method_both("at", a, np.array([1, 1, 2]), inplace=False, ours_ufunc=neg_ours, theirs_ufunc=neg_theirs)
    with pytest.raises(NotImplementedError, match="inplace=False"):
        jnp.frompyfunc(_muladd, 2, 1).at(a, np.array([0]), 1.0)
    with pytest.raises(TypeError, match="non-tuple sequence"):
        jnp.frompyfunc(_muladd, 2, 1).at(A, [np.array([0]), np.array([1])], 1.0, inplace=False)


@pytest.mark.parametrize("indices", [np.array([0, 3, 4]), np.array([0, 2, 1, 5]), np.array([5])])
def test_ufunc_reduceat_matches_jax_and_numpy(x64_both, indices):
    a = np.arange(1, 7, dtype=F32)
    _method_both("reduceat", a, indices)
    _method_both("reduceat", np.tile(a, (2, 1)), indices, axis=1)
    add = jnp.frompyfunc(jnp.add, 2, 1, identity=0)
    assert_allclose(add.reduceat(a, indices), np.add.reduceat(a, indices), rtol=1e-6)


def test_ufunc_outer_matches_jax_and_numpy(x64_both):
    _method_both("outer", A, np.arange(3, dtype=F32))
    _method_both("outer", AI[0], AI[:, 0])
    mul = jnp.frompyfunc(jnp.multiply, 2, 1)
    assert_allclose(mul.outer(A, A[0]), np.multiply.outer(A, A[0]), rtol=1e-6)
    with pytest.raises(ValueError, match="binary ufuncs"):
        jnp.frompyfunc(jnp.sin, 1, 1).outer(A, A)


@given(st.integers(1, 5), st.integers(1, 5), st.integers(0, 1))
def test_ufunc_reduce_accumulate_hypothesis(n, m, axis):
    a = rng.normal(size=(n, m)).astype(F32)
    ours, theirs = jnp.frompyfunc(jnp.maximum, 2, 1), jjnp.frompyfunc(jjnp.maximum, 2, 1)
    same_as_jax(ours.reduce(a, axis=axis), theirs.reduce(a, axis=axis))
    assert_allclose(ours.reduce(a, axis=axis), a.max(axis))
    same_as_jax(ours.accumulate(a, axis=axis), theirs.accumulate(a, axis=axis))
    assert_allclose(ours.accumulate(a, axis=axis), np.maximum.accumulate(a, axis=axis))
