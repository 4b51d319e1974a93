"""Differences, gradients, integrals, interpolation and phase unwrapping (``ember.numpy.calculus``:
diff, ediff1d, gradient, trapezoid, interp, unwrap) against NumPy and JAX, eagerly and under jit;
gradients against finite differences."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
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

F32 = np.float32


TOL = dict(dtype=np.float32, rtol=2e-5, atol=2e-5)  # float32 results against float64 NumPy

rng = np.random.default_rng(0)


finite_floats = st.floats(-100, 100, allow_nan=False, width=32)


# --- diff, ediff1d -----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,n,axis,prepend,append", [
    ((6,), 1, -1, None, None), ((6,), 3, 0, None, None), ((3, 4), 1, 0, None, None), ((3, 4), 2, 1, 0.5, None),
    ((3, 4), 1, 0, None, np.ones((2, 4), np.float32)), ((2, 3, 4), 1, 1, -1.0, 2.0), ((2,), 5, -1, None, None),
])
def test_diff_matches_numpy(rng, shape, n, axis, prepend, append):
    x = normal_float32(rng, *shape)
    kwargs = {k: v for k, v in dict(prepend=prepend, append=append).items() if v is not None}
    check_eager_and_jit(lambda a: jnp.diff(a, n, axis, **kwargs), x, expected=np.diff(x, n, axis, **kwargs), **TOL)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_, np.float16])
def test_diff_dtypes(dtype):
    x = (np.arange(6) % 3).astype(dtype)
    check_eager_and_jit(jnp.diff, x, expected=np.diff(x))
    assert jnp.diff(x, n=0).dtype == dtype


def test_diff_errors_and_static_n():
    with pytest.raises(ValueError, match="order must be non-negative but got -1"):
        jnp.diff(jnp.arange(3), -1)
    with pytest.raises(ValueError, match="at least one dimensional"):
        jnp.diff(jnp.asarray(1.0))
    with pytest.raises(errors.ConcretizationTypeError, match="argument 'n' of jnp.diff"):
        ember.jit(jnp.diff)(jnp.arange(3.0), 1)
    assert ember.jit(jnp.diff, static_argnums=1)(jnp.arange(4.0), 2).shape == (2,)


def test_ediff1d(rng):
    x = normal_float32(rng, 2, 3)
    check_eager_and_jit(jnp.ediff1d, x, expected=np.ediff1d(x))
    check_eager_and_jit(lambda a: jnp.ediff1d(a, to_end=np.array([7, 8]), to_begin=-1.5), x,
                        expected=np.ediff1d(x, to_end=[7, 8], to_begin=-1.5))
    i = np.array([1, 5, 2], np.int32)
    check_eager_and_jit(lambda a: jnp.ediff1d(a, to_end=2.7), i, expected=np.array([4, -3, 2], np.int32))


# --- gradient, trapezoid -----------------------------------------------------------------------------
def test_gradient_spacing_and_axes(rng):
    f = normal_float32(rng, 4, 5)
    check_eager_and_jit(lambda a: jnp.gradient(a[0]), f, expected=np.gradient(f[0]))
    check_eager_and_jit(lambda a: jnp.gradient(a, 0.5), f, expected=np.gradient(f, 0.5), **TOL)
    check_eager_and_jit(lambda a: jnp.gradient(a, 2.0, 0.5), f, expected=np.gradient(f, 2.0, 0.5), **TOL)
    check_eager_and_jit(lambda a: jnp.gradient(a, axis=1), f, expected=np.gradient(f, axis=1))
    check_eager_and_jit(lambda a: jnp.gradient(a, 3.0, axis=(-1, 0)), f,
                        expected=list(np.gradient(f, 3.0, axis=(-1, 0))), **TOL)
    coordinates = np.cumsum(rng.random(5) + 0.1).astype(np.float32)
    check_eager_and_jit(lambda a, x: jnp.gradient(a, x, axis=1), f, coordinates,
                        expected=np.gradient(f.astype(np.float64), coordinates.astype(np.float64), axis=1),
                        dtype=np.float32, rtol=1e-4, atol=1e-4)
    assert jnp.gradient(np.arange(4, dtype=np.int32)).dtype == np.float32
    assert jnp.gradient(f, axis=()) == []


def test_gradient_errors():
    with pytest.raises(ValueError, match="at least 2 elements"):
        jnp.gradient(jnp.ones((3, 1)))
    with pytest.raises(TypeError, match="Invalid number of spacing arguments 2"):
        jnp.gradient(jnp.ones((3, 3)), 1.0, 2.0, axis=0)
    with pytest.raises(ValueError, match="same length as the dimension"):
        jnp.gradient(jnp.ones(3), jnp.arange(4.0))
    with pytest.raises(NotImplementedError, match="edge_order=1"):
        jnp.gradient(jnp.ones(3), edge_order=2)


def test_trapezoid(rng):
    y = normal_float32(rng, 3, 6)
    x = np.sort(normal_float32(rng, 6))
    check_eager_and_jit(jnp.trapezoid, y, expected=np.trapezoid(y), **TOL)
    check_eager_and_jit(lambda a: jnp.trapezoid(a, dx=0.25, axis=0), y, expected=np.trapezoid(y, dx=0.25, axis=0),
                        **TOL)
    check_eager_and_jit(jnp.trapezoid, y, x, expected=np.trapezoid(y, x), **TOL)
    xs = np.sort(normal_float32(rng, 3, 6), axis=0)
    check_eager_and_jit(lambda a, b: jnp.trapezoid(a, b, axis=0), y, xs, expected=np.trapezoid(y, xs, axis=0),
                        **TOL)
    assert jnp.trapezoid(np.arange(4, dtype=np.int32)).dtype == np.float32
    check_float32_gradient(lambda v: jnp.trapezoid(jnp.sin(v), v), x)


# --- interp ------------------------------------------------------------------------------------------
@given(st.lists(finite_floats, min_size=1, max_size=6, unique=True),
       hnp.arrays(np.float32, st.integers(0, 6), elements=st.floats(-150, 150, width=32)))
def test_interp_matches_numpy(points, x):
    xp = np.sort(np.array(points, np.float32))
    fp = np.cos(xp).astype(np.float32)
    check_eager_and_jit(jnp.interp, x, xp, fp, expected=np.interp(x, xp, fp), dtype=np.float32, rtol=1e-4, atol=1e-4)
    check_eager_and_jit(lambda a, b, c: jnp.interp(a, b, c, left=-7.0, right=9.0), x, xp, fp,
                        expected=np.interp(x, xp, fp, left=-7.0, right=9.0), dtype=np.float32, rtol=1e-4, atol=1e-4)


def test_interp_period_extrapolate_and_repeats():
    xp = np.array([190, -190, 350, -350], np.float32)
    fp = np.array([5, 10, 3, 4], np.float32)
    x = np.array([-180, -170, -185, 185, -10, -5, 0, 365], np.float32)
    check_eager_and_jit(lambda a, b, c: jnp.interp(a, b, c, period=360), x, xp, fp,
                        expected=np.interp(x, xp, fp, period=360), **TOL)
    xp, fp = np.array([0.0, 1.0, 2.0], np.float32), np.array([0.0, 2.0, 3.0], np.float32)
    check_eager_and_jit(lambda a: jnp.interp(a, xp, fp, left="extrapolate", right="extrapolate"),
                        np.array([-1.0, 0.5, 4.0], np.float32), expected=np.array([-2.0, 1.0, 5.0], np.float32))
    repeated = np.array([0.0, 1.0, 1.0, 2.0], np.float32)
    check_eager_and_jit(lambda a: jnp.interp(a, repeated, np.array([0.0, 1.0, 5.0, 6.0], np.float32)),
                        np.array([0.5, 1.5], np.float32), expected=np.array([0.5, 5.5], np.float32))
    assert jnp.interp(3, np.arange(4, dtype=np.int32), np.arange(4, dtype=np.int32)).dtype == np.float32


def test_interp_gradients_are_finite_differences():
    xp = np.array([0.0, 1.0, 2.5, 4.0], np.float32)
    fp = np.array([1.0, -1.0, 2.0, 0.5], np.float32)
    x = np.array([0.3, 1.7, 3.2], np.float32)
    check_float32_gradient(lambda v: jnp.sum(jnp.interp(v, xp, fp) ** 2), x)
    check_float32_gradient(lambda v: jnp.sum(jnp.interp(x, xp, v) ** 2), fp)
    check_float32_gradient(lambda v: jnp.sum(jnp.interp(x, v, fp) ** 2), xp)
    # Repeated sample points: a flat segment, and a finite gradient rather than 0/0.
    grad = ember.grad(lambda v: jnp.interp(1.0, v, fp).sum())(jnp.array([0.0, 1.0, 1.0, 2.0]))
    assert np.all(np.isfinite(np.asarray(grad)))


def test_interp_errors():
    with pytest.raises(ValueError, match="xp and fp must be one-dimensional arrays of equal size"):
        jnp.interp(1.0, jnp.arange(3.0), jnp.arange(4.0))
    with pytest.raises(ValueError, match="only valid string value of `left` is 'extrapolate'"):
        jnp.interp(1.0, jnp.arange(3.0), jnp.arange(3.0), left="linear")
    with pytest.raises(ValueError, match="period must be a scalar"):
        jnp.interp(1.0, jnp.arange(3.0), jnp.arange(3.0), period=jnp.ones(2))


# --- unwrap ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs", [{}, {"discont": 4.0}, {"period": 6.0}, {"axis": 0}, {"axis": 1, "period": 5}])
def test_unwrap_matches_jax_and_numpy(x64_both, kwargs):
    p = np.cumsum(rng.uniform(-4, 4, size=(4, 7)), axis=1).astype(F32)
    out = check_against_jax("unwrap", p, tol=dict(rtol=1e-5, atol=1e-4), **kwargs)
    assert_allclose(out, np.unwrap(p, **kwargs), check_dtype=False, rtol=1e-4, atol=1e-4)


def test_unwrap_integers_and_errors_match_jax():
    p = np.array([0, 5, 2, 9, 1, 14], np.int32)
    check_against_jax("unwrap", p, period=6)
    assert_allclose(jnp.unwrap(p, period=6), np.unwrap(p, period=6), check_dtype=False)
    check_against_jax("unwrap", np.zeros((2, 0), F32))
    with pytest.raises(ValueError, match="complex"):
        jnp.unwrap(np.ones(3, np.complex64))


@given(st.lists(st.floats(-10, 10, width=32), min_size=1, max_size=12))
def test_unwrap_hypothesis(values):
    p = np.array(values, F32)
    assert_allclose(jnp.unwrap(p), np.asarray(jjnp.unwrap(p)), rtol=1e-5, atol=1e-4)


# --- dtypes, weak types, vmap ------------------------------------------------------------------------
def _calls():
    i32 = np.arange(4, dtype=np.int32)
    f32 = np.arange(4, dtype=np.float32)
    f16 = np.arange(4, dtype=np.float16)
    u8 = np.arange(4, dtype=np.uint8)
    boolean = np.array([True, False, True, True])
    return {
        "diff(u8)": lambda m: m.diff(u8),
        "diff(bool)": lambda m: m.diff(boolean),
        "diff(i32, prepend=1.5)": lambda m: m.diff(i32, prepend=1.5),
        "ediff1d(i32, to_end=1.5)": lambda m: m.ediff1d(i32, to_end=1.5),
        "gradient(f16, 2.0)": lambda m: m.gradient(f16, 2.0),
        "gradient(f16, f32)": lambda m: m.gradient(f16, f32),
        "trapezoid(i32)": lambda m: m.trapezoid(i32),
        "trapezoid(f16, dx=2)": lambda m: m.trapezoid(f16, dx=2),
        "trapezoid(i32, f16)": lambda m: m.trapezoid(i32, f16),
        "interp(i32, i32, i32)": lambda m: m.interp(i32, i32, i32),
        "interp(1.5, f32, f16)": lambda m: m.interp(1.5, f32, f16),
        "interp(f16, f16, f16, left=0)": lambda m: m.interp(f16, f16, f16, left=0),
    }


@pytest.mark.parametrize("call", list(_calls()))
def test_dtypes_and_weak_types_match_jax(call):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert array_types(_calls()[call](jnp)) == array_types(_calls()[call](jax_numpy))


@pytest.mark.parametrize("name,fn", [
    ("diff", lambda x: jnp.diff(x, 2, prepend=0.0)),
    ("gradient", lambda x: jnp.gradient(x, 0.5)),
    ("trapezoid", lambda x: jnp.trapezoid(x, dx=0.1)),
    ("interp", lambda x: jnp.interp(x * 2, jnp.arange(5.0), x)),
])
def test_vmap_equals_a_loop(rng, name, fn):
    batch = normal_float32(rng, 3, 5)
    expected = np.stack([np.asarray(fn(jnp.asarray(row))) for row in batch])
    check_eager_and_jit(ember.vmap(fn), batch, expected=expected, rtol=1e-5, atol=1e-6)
