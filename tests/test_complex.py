"""Complex numbers: dtypes, promotion, the complex primitives, and their derivatives."""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import dtypes, lax

Z = np.array([1 + 2j, -3.5j, 2, -0.0 - 1j, 4.25 + 0.5j], np.complex64)


def test_complex_dtypes_and_canonicalization(x64):
    assert jnp.asarray(1 + 2j).dtype == np.complex128
    assert jnp.array([1 + 2j]).dtype == np.complex128
    with ember.config.override(enable_x64=False):
        assert jnp.asarray(1 + 2j).dtype == np.complex64
        assert jnp.zeros(3, jnp.complex128).dtype == np.complex64
        assert jnp.asarray(np.complex128(1j)).dtype == np.complex64


@pytest.mark.parametrize("a, b, expected", [
    (np.float32, np.complex64, np.complex64), (np.float16, np.complex64, np.complex64),
    (np.int32, np.complex64, np.complex64), (np.float64, np.complex64, np.complex128),
    (np.complex64, np.complex128, np.complex128), (np.bool_, np.complex64, np.complex64),
])
def test_promotion_with_complex(x64, a, b, expected):
    assert jnp.promote_types(a, b) == expected
    assert jnp.promote_types(b, a) == expected


def test_complex_scalars_are_weak():
    x = jnp.ones(2, jnp.float16)
    assert (x * 1j).dtype == np.complex64  # the weak complex node sits above f* and below complex64
    assert (jnp.ones(2, jnp.complex64) * 2.0).dtype == np.complex64
    assert ember.jit(lambda z: z * 1j)(jnp.ones(2, jnp.float32)).dtype == np.complex64
    assert dtypes.result_type(1j, 1.0) == np.complex64
    assert jnp.finfo(np.complex64).eps == np.finfo(np.float32).eps


def test_parts_conjugate_abs_angle():
    z = jnp.asarray(Z)
    np.testing.assert_array_equal(jnp.real(z), Z.real)
    np.testing.assert_array_equal(jnp.imag(z), Z.imag)
    np.testing.assert_array_equal(z.real, Z.real)
    np.testing.assert_array_equal(z.imag, Z.imag)
    np.testing.assert_array_equal(jnp.conj(z), np.conj(Z))
    np.testing.assert_allclose(jnp.abs(z), np.abs(Z), rtol=1e-6)
    np.testing.assert_allclose(jnp.angle(z), np.angle(Z), rtol=1e-6)
    np.testing.assert_allclose(jnp.angle(z, deg=True), np.angle(Z, deg=True), rtol=1e-6)
    np.testing.assert_array_equal(jnp.iscomplex(z), np.iscomplex(Z))
    np.testing.assert_array_equal(jnp.isreal(z), np.isreal(Z))
    np.testing.assert_array_equal(jnp.imag(jnp.array([np.nan, 1.0])), [0.0, 0.0])
    np.testing.assert_array_equal(lax.complex(jnp.float32(1), jnp.float32(2)), np.complex64(1 + 2j))
    assert lax.conj(jnp.float32(2)).dtype == np.complex64  # lax.conj of a real value is complex, as in JAX
    assert jnp.conj(jnp.float32(2)).dtype == np.float32


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "arcsin",
                                  "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "log1p", "expm1", "square",
                                  "reciprocal", "negative", "sign"])
@pytest.mark.parametrize("jit", [False, True])
def test_complex_functions_against_numpy(name, jit):
    fn = getattr(jnp, name)
    out = (ember.jit(fn) if jit else fn)(jnp.asarray(Z))
    assert out.dtype == np.complex64
    with np.errstate(all="ignore"):  # (arctan has a pole at -1j)
        want = getattr(np, name)(Z)
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("jit", [False, True])
def test_complex_arithmetic_and_reductions(jit):
    def f(a, b):
        return a * b + a / b - a ** 2, jnp.sum(a * b), jnp.prod(a), jnp.mean(a), jnp.cumsum(a), a == b, a != b

    g = ember.jit(f) if jit else f
    W = Z[::-1] + 1
    for got, want in zip(g(jnp.asarray(Z), jnp.asarray(W)), f(Z, W)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)


def test_lax_refuses_complex_where_jax_does():
    z = jnp.asarray(Z)
    with pytest.raises(TypeError, match="lt does not accept dtype complex64"):
        lax.lt(z, z)
    with pytest.raises(TypeError, match="floor does not accept dtype complex64"):
        lax.floor(z)
    with pytest.raises(TypeError, match="complex needs float32 or float64 parts"):
        lax.complex(jnp.ones(2, jnp.float16), jnp.ones(2, jnp.float16))


def test_grad_of_real_functions_of_complex_inputs():
    # JAX's convention (the autodiff cookbook): grad f(z) = df/dx - i df/dy for real f of z = x + iy.
    assert complex(ember.grad(lambda z: jnp.abs(z) ** 2)(3 + 4j)) == pytest.approx(6 - 8j)
    assert complex(ember.grad(lambda z: jnp.real(z * z))(3 + 4j)) == pytest.approx(6 + 8j)
    assert complex(ember.grad(lambda z: jnp.imag(z))(1 + 1j)) == pytest.approx(-1j)
    assert complex(ember.jit(ember.grad(lambda z: jnp.abs(z)))(3 + 4j)) == pytest.approx(0.6 - 0.8j)


def test_jvp_and_vmap_of_complex_functions():
    primal, tangent = ember.jvp(jnp.exp, (1 + 1j,), (1.0 + 0j,))
    np.testing.assert_allclose(primal, np.exp(1 + 1j), rtol=1e-6)
    np.testing.assert_allclose(tangent, np.exp(1 + 1j), rtol=1e-6)
    out = ember.vmap(lambda z: jnp.real(z) * jnp.imag(z))(jnp.asarray(Z))
    np.testing.assert_allclose(out, Z.real * Z.imag)


def test_make_jaxpr_prints_complex_types():
    text = str(ember.make_jaxpr(lambda z: jnp.real(z * z))(jnp.asarray(Z)))
    assert "c64[5]" in text and "real" in text


def test_lax_parts_and_their_transposes():
    z = jnp.asarray(Z)
    np.testing.assert_array_equal(lax.real(z), Z.real)
    np.testing.assert_array_equal(lax.imag(z), Z.imag)
    # vjp of the parts: the cotangent of re(z) is ct + 0j, of im(z) is -i ct (transposes, as JAX).
    _, pullback = ember.vjp(lax.real, z)
    np.testing.assert_array_equal(pullback(jnp.ones(5))[0], np.ones(5, np.complex64))
    _, pullback = ember.vjp(lax.imag, z)
    np.testing.assert_array_equal(pullback(jnp.ones(5))[0], -1j * np.ones(5, np.complex64))
    _, pullback = ember.vjp(lax.complex, jnp.ones(2), jnp.ones(2))
    assert [complex(g[0]) for g in pullback(jnp.asarray(np.array([1 + 2j, 3j], np.complex64)))] == [1, -2]


def test_products_of_real_and_complex_operands_are_complex():
    a, b = np.array([1.0, 2.0], np.float32), np.array([1 - 1j, 2], np.complex64)
    assert complex(lax.dot(a, b)) == 5 - 1j  # (the real operand is converted, as in JAX)
    assert complex(lax.dot(b, a.astype(np.int32))) == 5 - 1j
    assert lax.dot(a, b).dtype == np.complex64
