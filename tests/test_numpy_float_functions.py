"""The float functions (``ember.numpy.float_functions``: fmax, fmin, frexp, ldexp, modf, spacing,
i0) against NumPy, eagerly and under jit; dtypes and weak types against JAX."""
from __future__ import annotations

import numpy as np
import pytest
from util import assert_allclose, assert_same_leaves, check_eager_and_jit

import ember
import ember.numpy as jnp

F32 = np.float32

rng = np.random.default_rng(0)
x_f = rng.normal(size=(3, 4)).astype(F32) * 10


def test_fmax_fmin_ignore_nan():
    a = np.array([np.nan, 1.0, 3.0, np.nan], F32)
    b = np.array([2.0, np.nan, 1.0, np.nan], F32)
    check_eager_and_jit(jnp.fmax, a, b, expected=np.fmax(a, b))
    check_eager_and_jit(jnp.fmin, a, b, expected=np.fmin(a, b))
    check_eager_and_jit(jnp.fmax, np.array([1, 5], np.int8), np.int8(3), expected=np.array([3, 5], np.int8))


def test_frexp_ldexp_modf_spacing():
    x = np.array([0.0, -0.0, np.inf, -3.5, 5.0, 1e30, 1e-20, np.nan], F32)
    mantissa, exponent = check_eager_and_jit(jnp.frexp, x, expected=np.frexp(x))
    assert exponent.dtype == np.int32
    finite = np.array([-3.5, 5.0, 1e-20, 1e30], F32)
    check_eager_and_jit(jnp.ldexp, finite, np.array([3, -7, 20, -40], np.int32),
                        expected=np.ldexp(finite, np.array([3, -7, 20, -40])))
    check_eager_and_jit(lambda m, e: jnp.ldexp(m, e), mantissa, exponent, expected=x)
    check_eager_and_jit(jnp.modf, x_f, expected=np.modf(x_f))
    check_eager_and_jit(jnp.spacing, np.array([1.0, -1.0, 1e10], F32),
                        expected=np.spacing(np.array([1.0, -1.0, 1e10], F32)))
    with pytest.raises(ValueError, match="ldexp not supported"):
        jnp.ldexp(1.0, 2.0)


def test_i0_values_and_gradient():
    x = np.array([0.0, 0.5, -1.0, 5.0, 19.9, 20.1, -30.0, 60.0], F32)
    check_eager_and_jit(jnp.i0, x, expected=np.i0(x.astype(np.float64)).astype(F32), rtol=2e-6)
    # d/dx i0 = i1; i1(1) = 0.5651591
    assert_allclose(ember.grad(jnp.i0)(1.0), np.float32(0.5651591), rtol=1e-6)
    assert np.isfinite(float(ember.grad(jnp.i0)(0.0)))


JAX_DTYPE_CALLS = [
    ("fmax", (1, 2.0)), ("fmin", (np.int8(1), 3)), ("frexp", (3,)), ("ldexp", (2, 3)),
    ("modf", (3,)), ("spacing", (1,)), ("i0", (1,)),
    # rounding keeps integers and bools as they are, but rint makes bools floats (JAX's rules)
    *((name, (x,)) for name in ("floor", "ceil", "trunc", "rint")
      for x in (np.array([True, False]), True, np.array([-3, 7], np.int8), np.array([200], np.uint8), 3,
                np.array([-1.5, 2.5], np.float16))),
]


@pytest.mark.parametrize("name,args", JAX_DTYPE_CALLS)
def test_dtypes_and_weak_types_match_jax(name, args):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert_same_leaves(getattr(jnp, name)(*args), getattr(jax_numpy, name)(*args), name)
