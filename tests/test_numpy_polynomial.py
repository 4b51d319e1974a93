"""The polynomial functions (``ember.numpy.polynomial``: polyval, vander, polyadd, polysub, polymul,
polydiv, polyder, polyint, poly, roots, polyfit) against NumPy and JAX, eagerly and under jit;
x64 off and on."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from jax_oracle import check_against_jax, jjnp
from util import (
    array_types,
    assert_allclose,
    check_eager_and_jit,
    check_float32_gradient,
    normal_float32,
)

import ember
import ember.numpy as jnp
from ember import errors
from ember.errors import ConcretizationTypeError

F32 = np.float32


TOL = dict(dtype=np.float32, rtol=2e-5, atol=2e-5)  # float32 results against float64 NumPy

rng = np.random.default_rng(0)


# --- polyval, vander ---------------------------------------------------------------------------------
def test_polyval_matches_numpy(rng):
    p, x = normal_float32(rng, 5), normal_float32(rng, 3, 2)
    check_eager_and_jit(jnp.polyval, p, x, expected=np.polyval(p, x), **TOL)
    ip, ix = np.array([2, -1, 3], np.int32), np.array([0, 1, 5], np.int32)
    check_eager_and_jit(jnp.polyval, ip, ix, expected=np.polyval(ip, ix).astype(np.int32))
    many = normal_float32(rng, 4, 3)  # three polynomials, one per column
    check_eager_and_jit(lambda c, v: jnp.polyval(c, v, unroll=2), many, x[:, :1],
                        expected=np.stack([np.polyval(many[:, j], x[:, 0]) for j in range(3)], 1), **TOL)
    check_float32_gradient(lambda v: jnp.polyval(p, v).sum(), x)
    check_float32_gradient(lambda c: jnp.polyval(c, x).sum(), p)
    with pytest.raises(ValueError, match="p must be a 1-D"):
        jnp.polyval(2.0, x)


@pytest.mark.parametrize("N,increasing", [(None, False), (2, False), (5, True), (0, False)])
def test_vander_matches_numpy(N, increasing):
    x = np.array([1.5, -2.0, 0.0, 3.0], np.float32)
    check_eager_and_jit(lambda a: jnp.vander(a, N, increasing), x, expected=np.vander(x, N, increasing), **TOL)
    i = np.array([2, 3, -1], np.int32)
    check_eager_and_jit(lambda a: jnp.vander(a, N, increasing), i,
                        expected=np.vander(i, N, increasing).astype(np.int32))


def test_vander_errors():
    with pytest.raises(ValueError, match="x must be a one-dimensional array"):
        jnp.vander(jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="N must be nonnegative"):
        jnp.vander(jnp.ones(2), -1)
    with pytest.raises(errors.ConcretizationTypeError, match="argument 'N' of jnp.vander"):
        ember.jit(jnp.vander)(jnp.ones(2), 3)
    with pytest.raises(errors.ConcretizationTypeError, match="argument 'increasing' of jnp.vander"):
        ember.jit(lambda x, up: jnp.vander(x, 2, up))(jnp.ones(2), True)


# --- arithmetic, derivatives, integrals --------------------------------------------------------------
P3 = np.array([2.0, -3.0, 0.5, 1.0], F32)
P2 = np.array([1.0, 4.0, -2.0], F32)
PI = np.array([3, 0, -1, 2], np.int32)


@pytest.mark.parametrize("name", ["polyadd", "polysub", "polymul"])
@pytest.mark.parametrize("a,b", [(P3, P2), (P2, P3), (PI, P2), (PI, PI[:2])])
def test_poly_arithmetic_matches_jax(x64_both, name, a, b):
    check_against_jax(name, a, b, tol=dict(rtol=1e-5, atol=1e-5))


def test_polymul_trims_leading_zeros_like_jax():
    a, b = np.array([0.0, 0.0, 1.0, 2.0], F32), np.array([0.0, 3.0], F32)
    check_against_jax("polymul", a, b, jit=False, trim_leading_zeros=True)
    check_against_jax("polymul", np.zeros(0, F32), b)


@pytest.mark.parametrize("u,v", [(P3, P2), (np.array([1.0, -6, 11, -6], F32), np.array([1.0, -1], F32)),
                                 (P2, P3), (PI, np.array([2, 1], np.int32))])
def test_polydiv_matches_jax(x64_both, u, v):
    q, r = check_against_jax("polydiv", u, v, tol=dict(rtol=1e-5, atol=1e-5))
    if len(u) >= len(v):  # NumPy's quotient too (its remainder is trimmed)
        assert_allclose(q, np.polydiv(u, v)[0], check_dtype=False, rtol=1e-5, atol=1e-5)
    check_against_jax("polydiv", u, v, jit=False, trim_leading_zeros=True, tol=dict(rtol=1e-5, atol=1e-5))


def test_polydiv_inverts_polymul():
    q, r = jnp.polydiv(jnp.polymul(P3, P2), P2)
    assert_allclose(q, P3, rtol=1e-5, atol=1e-5)
    assert_allclose(r, np.zeros(6, F32), atol=1e-5)
    q, r = ember.jit(jnp.polydiv)(np.array([1.0, 0.0, -1.0], F32), np.array([1.0, 1.0], F32))
    assert_allclose(q, np.array([1.0, -1.0], F32))
    assert_allclose(r, np.zeros(3, F32))


@pytest.mark.parametrize("m", [0, 1, 2, 5])
def test_polyder_matches_jax_and_numpy(x64_both, m):
    for p in (P3, PI):
        out = check_against_jax("polyder", p, m=m)
        assert_allclose(out, np.polyder(p, m) if m else p, check_dtype=False, rtol=1e-5)


@pytest.mark.parametrize("m,k", [(0, None), (1, None), (2, 3.0), (2, np.array([1.0, -2.0], F32)), (1, 2)])
def test_polyint_matches_jax_and_numpy(x64_both, m, k):
    if k is None or not isinstance(k, np.ndarray):
        out = check_against_jax("polyint", P3, m=m, k=k)
    else:
        out = check_against_jax("polyint", P3, m, k)
    assert_allclose(out, np.polyint(P3, m, 0 if k is None else k), check_dtype=False, rtol=1e-5)


def test_polyder_polyint_refuse_bad_orders():
    for fn, jfn in ((jnp.polyder, jjnp.polyder), (jnp.polyint, jjnp.polyint)):
        for bad in (-1,):
            with pytest.raises(ValueError):
                jfn(jjnp.asarray(P3), bad)
            with pytest.raises(ValueError):
                fn(P3, bad)
    with pytest.raises(ValueError, match="k must be a scalar"):
        jnp.polyint(P3, 2, np.ones(3, F32))
    with pytest.raises(ConcretizationTypeError):
        ember.jit(lambda p, m: jnp.polyder(p, m))(P3, 1)


@given(st.lists(st.floats(-4, 4, width=32), min_size=1, max_size=6),
       st.lists(st.floats(-4, 4, width=32), min_size=1, max_size=6))
def test_poly_arithmetic_hypothesis(a, b):
    a, b = np.array(a, F32), np.array(b, F32)
    tol = dict(rtol=1e-4, atol=1e-4)
    assert_allclose(jnp.polyadd(a, b), np.polyadd(a, b), **tol) if len(a) != len(b) or True else None
    assert_allclose(jnp.polysub(a, b), jjnp.polysub(a, b), **tol)
    assert_allclose(jnp.polymul(a, b), np.asarray(jjnp.polymul(a, b)), **tol)
    assert_allclose(ember.jit(jnp.polymul)(a, b), np.convolve(a, b), **tol)
    assert_allclose(jnp.polyder(a), np.asarray(jjnp.polyder(a)), **tol)
    assert_allclose(jnp.polyint(a), np.asarray(jjnp.polyint(a)), **tol)


# --- poly, roots, polyfit ----------------------------------------------------------------------------
@pytest.mark.parametrize("zeros", [np.array([1.0, 2.0, -3.0], F32), np.array([0.5], F32),
                                   np.array([1, 2], np.int32), np.zeros(0, F32)])
def test_poly_matches_jax_and_numpy(x64_both, zeros):
    out = check_against_jax("poly", zeros)
    assert_allclose(out, np.poly(zeros), check_dtype=False, rtol=1e-5)


def test_poly_of_square_matrix_is_complex_like_jax():
    a = np.array([[1.0, 2.0], [3.0, 4.0]], F32)
    out = check_against_jax("poly", a, tol=dict(rtol=1e-4, atol=1e-4))
    assert_allclose(out.real, np.poly(a), check_dtype=False, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="1d or non-empty square"):
        jnp.poly(np.ones((2, 3), F32))


def _sorted_roots(r):
    r = np.asarray(r)
    return r[np.lexsort((r.imag, r.real))]


@pytest.mark.parametrize("p", [np.array([1.0, -6.0, 11.0, -6.0], F32), np.array([0.0, 0.0, 1.0, -3.0, 2.0], F32),
                               np.array([1.0, 0.0, 1.0], F32), np.array([2, -4], np.int32), np.array([3.0], F32)])
def test_roots_match_jax_and_numpy(x64_both, p):
    ours = jnp.roots(p)
    theirs = np.asarray(jjnp.roots(jjnp.asarray(p)))
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(_sorted_roots(ours), _sorted_roots(theirs), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(_sorted_roots(ours), _sorted_roots(np.roots(p)), rtol=1e-4, atol=1e-4)


def test_roots_without_stripping_is_traceable_and_pads_with_nan():
    p = np.array([0.0, 0.0, 1.0, -3.0, 2.0], F32)
    theirs = np.asarray(jjnp.roots(jjnp.asarray(p), strip_zeros=False))
    for ours in (jnp.roots(p, strip_zeros=False), ember.jit(lambda p: jnp.roots(p, strip_zeros=False))(p)):
        ours = np.asarray(ours)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape == (4,)
        assert np.isnan(ours[2:]).all() and np.isnan(theirs[2:]).all()
        np.testing.assert_allclose(_sorted_roots(ours[:2]), [1.0, 2.0], rtol=1e-5)
    with pytest.raises(ConcretizationTypeError):
        ember.jit(jnp.roots)(p)
    with pytest.raises(ValueError, match="rank-1"):
        jnp.roots(np.ones((2, 2), F32))


X = np.linspace(-1.0, 2.0, 12).astype(F32)
Y = (0.5 * X ** 3 - X + 2.0 + 0.01 * rng.normal(size=12)).astype(F32)


@pytest.mark.parametrize("deg", [0, 1, 3])
def test_polyfit_matches_jax_and_numpy(x64_both, deg):
    x = X.astype(np.float64) if x64_both else X
    y = Y.astype(np.float64) if x64_both else Y
    tol = dict(rtol=1e-3, atol=1e-3)
    out = check_against_jax("polyfit", x, y, deg, tol=tol)
    assert_allclose(out, np.polyfit(X.astype(np.float64), Y.astype(np.float64), deg), check_dtype=False, **tol)
    w = np.linspace(0.5, 1.5, 12).astype(x.dtype)
    check_against_jax("polyfit", x, y, deg, w=w, tol=tol)
    y2 = np.stack([y, 2 * y], axis=1)
    check_against_jax("polyfit", x, y2, deg, tol=tol)
    check_against_jax("polyfit", x, y, deg, cov=True, tol=dict(rtol=2e-2, atol=2e-3))
    check_against_jax("polyfit", x, y2, deg, cov="unscaled", tol=dict(rtol=2e-2, atol=2e-3))
    c, resid, rank, s, rcond = jnp.polyfit(x, y, deg, full=True)
    jc, jresid, jrank, js, jrcond = jjnp.polyfit(x, y, deg, full=True)
    assert int(rank) == int(jrank) and rcond.dtype == jrcond.dtype
    assert_allclose(s, np.asarray(js), rtol=1e-4, atol=1e-5)
    assert_allclose(resid, np.asarray(jresid), rtol=2e-2, atol=1e-4)


def test_polyfit_errors_match_jax():
    for fn, arr in ((jnp.polyfit, np.asarray), (jjnp.polyfit, jjnp.asarray)):
        with pytest.raises(ValueError, match="deg >= 0"):
            fn(arr(X), arr(Y), -1)
        with pytest.raises(TypeError, match="same length"):
            fn(arr(X), arr(Y[:5]), 1)
        with pytest.raises(TypeError, match="1D vector"):
            fn(arr(np.ones((2, 2), F32)), arr(np.ones(2, F32)), 1)


# --- dtypes, weak types, vmap ------------------------------------------------------------------------
def _calls():
    i32 = np.arange(4, dtype=np.int32)
    f16 = np.arange(4, dtype=np.float16)
    return {
        "polyval(i32, 2)": lambda m: m.polyval(i32, 2),
        "polyval(i32, 2.0)": lambda m: m.polyval(i32, 2.0),
        "polyval(f16, i32)": lambda m: m.polyval(f16, i32),
        "vander(i32)": lambda m: m.vander(i32),
        "vander(f16, 2)": lambda m: m.vander(f16, 2),
    }


@pytest.mark.parametrize("call", list(_calls()))
def test_dtypes_and_weak_types_match_jax(call):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert array_types(_calls()[call](jnp)) == array_types(_calls()[call](jax_numpy))


@pytest.mark.parametrize("name,fn", [
    ("polyval", lambda x: jnp.polyval(x, 0.5)),
    ("vander", lambda x: jnp.vander(x, 3)),
])
def test_vmap_equals_a_loop(rng, name, fn):
    batch = normal_float32(rng, 3, 5)
    expected = np.stack([np.asarray(fn(jnp.asarray(row))) for row in batch])
    check_eager_and_jit(ember.vmap(fn), batch, expected=expected, rtol=1e-5, atol=1e-6)
