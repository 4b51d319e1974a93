"""Differentiation and batching of complex functions, with JAX's conventions.

For a real ``f`` of ``z = x + iy``, ``grad(f)(z) = df/dx - i df/dy`` (the transpose of the
derivative, never conjugated); with ``holomorphic=True``, ``grad(f)(z) = f'(z)``. Each case runs
the same code on ember and on JAX, and the derivatives are also checked against central
differences in the real and imaginary parts, and vmap against Python loops.
"""
import warnings
from types import SimpleNamespace

import jax
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.test_util import check_grads

E = SimpleNamespace(m=ember, jnp=ember.numpy, lax=ember.lax)
J = SimpleNamespace(m=jax, jnp=jax.numpy, lax=jax.lax)

Z = np.array([1 + 2j, -0.5 + 0.3j, 2 - 1j], np.complex64)
W = np.array([0.3 - 1j, 1.5 + 0.5j, -1 + 0.2j], np.complex64)
X = np.array([0.5, 1.5, -2.0], np.float32)


def assert_like_jax(make, rtol=2e-5, atol=2e-5, jit=True):
    """``make(ns)`` on ember and on JAX: the same pytree structure, dtypes and values. JAX's side
    is compiled as one program (eagerly it compiles each operation); ``jit=False`` where JAX
    cannot trace it (a custom rule's residuals holding NumPy constants)."""
    got, want = make(E), (jax.jit(lambda: make(J))() if jit else make(J))
    got_leaves, want_leaves = ember.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def numerical_grad(f, z, eps=1e-3):
    """``df/dx - i df/dy`` of a real scalar ``f`` by central differences, elementwise (in float64)."""
    z = np.asarray(z, np.complex128)
    out = np.zeros(z.shape, np.complex128)
    for i in np.ndindex(z.shape):
        step = np.zeros(z.shape, np.complex128)
        step[i] = eps
        dx = (float(f((z + step).astype(np.complex64))) - float(f((z - step).astype(np.complex64)))) / (2 * eps)
        dy = (float(f((z + 1j * step).astype(np.complex64))) - float(f((z - 1j * step).astype(np.complex64)))) / (
            2 * eps)
        out[i] = dx - 1j * dy
    return out


def numerical_jvp(f, z, t, eps=1e-3):
    z, t = np.asarray(z, np.complex128), np.asarray(t, np.complex128)
    plus = np.asarray(f((z + eps * t).astype(np.complex64)), np.complex128)
    minus = np.asarray(f((z - eps * t).astype(np.complex64)), np.complex128)
    return (plus - minus) / (2 * eps)


# --- the autodiff cookbook's complex section ------------------------------------------------------------
def test_cookbook_grad_of_real_function_of_complex_input():
    def make(ns):
        def f(z):
            x, y = ns.jnp.real(z), ns.jnp.imag(z)
            return x ** 2 + y ** 2
        return ns.m.grad(f)(3. + 4j)

    assert_like_jax(make)
    assert complex(make(E)) == pytest.approx(6 - 8j)
    assert_like_jax(lambda ns: ns.m.grad(lambda z: ns.jnp.abs(z))(3. + 4j))
    assert complex(ember.grad(jnp.abs)(3. + 4j)) == pytest.approx(0.6 - 0.8j)


def test_cookbook_holomorphic_grads():
    assert_like_jax(lambda ns: ns.m.grad(ns.jnp.sin, holomorphic=True)(2. + 3j))
    np.testing.assert_allclose(complex(ember.grad(jnp.sin, holomorphic=True)(2. + 3j)), np.cos(2 + 3j), rtol=1e-5)
    # conj is not holomorphic: the result is the transpose of its derivative at the direction 1, as JAX.
    assert_like_jax(lambda ns: ns.m.grad(ns.jnp.conjugate, holomorphic=True)(3. + 4j))
    assert complex(ember.grad(jnp.conjugate, holomorphic=True)(3. + 4j)) == 1


def test_cookbook_holomorphic_grad_through_complex_cholesky():
    A = np.array([[5., 2. + 3j, 5j], [2. - 3j, 7., 1. + 7j], [-5j, 1. - 7j, 12.]], np.complex64)

    def make(ns):
        def f(X):
            L = ns.jnp.linalg.cholesky(X)
            return ns.jnp.sum((L - ns.jnp.sin(L)) ** 2)
        return ns.m.grad(f, holomorphic=True)(A)

    assert_like_jax(make, rtol=1e-4, atol=1e-4)


def test_holomorphic_jacobians_of_a_vector_function():
    def make(ns, jac):
        return jac(lambda z: ns.jnp.sin(z) * z[::-1] + ns.jnp.exp(z) ** 2, holomorphic=True)(Z)

    for which in ("jacfwd", "jacrev", "jacobian"):
        assert_like_jax(lambda ns: make(ns, getattr(ns.m, which)))
    # A holomorphic Jacobian is f'(z): diagonal for an elementwise function.
    np.testing.assert_allclose(ember.jacrev(jnp.sin, holomorphic=True)(Z), np.diag(np.cos(Z)), rtol=1e-5)
    np.testing.assert_allclose(ember.jacfwd(jnp.sin, holomorphic=True)(Z), np.diag(np.cos(Z)), rtol=1e-5)
    assert_like_jax(lambda ns: ns.m.hessian(lambda z: ns.jnp.sum(z ** 3 * ns.jnp.exp(z)), holomorphic=True)(Z),
                    rtol=1e-4)
    assert_like_jax(lambda ns: ns.m.value_and_grad(lambda z: z ** 2 * ns.jnp.log(z), holomorphic=True)(Z[0]))
    assert_like_jax(lambda ns: ns.m.grad(ns.m.grad(lambda z: z ** 3 * ns.jnp.log(z), holomorphic=True),
                                         holomorphic=True)(Z[0]), rtol=1e-4)


def test_holomorphic_grad_against_the_complex_derivative():
    # f'(z) = lim (f(z + h) - f(z)) / h for any direction of h: the real step and the imaginary one agree.
    def f(z):
        return jnp.tan(z) / (z + 2) + jnp.sqrt(z) * jnp.log(z)

    z, h = np.complex64(0.7 + 0.4j), 1e-3
    got = complex(ember.grad(f, holomorphic=True)(z))
    for step in (h, 1j * h):
        want = (complex(f(np.complex64(z + step))) - complex(f(np.complex64(z - step)))) / (2 * step)
        assert got == pytest.approx(want, rel=2e-3)


def test_jacobians_of_non_holomorphic_functions():
    # jacrev takes complex inputs of a real function; jacfwd takes real inputs of a complex one.
    assert_like_jax(lambda ns: ns.m.jacrev(lambda z: ns.jnp.abs(z * z[::-1]) + ns.jnp.angle(z))(Z))
    assert_like_jax(lambda ns: ns.m.jacfwd(lambda x: ns.jnp.exp(1j * x) * x)(X))
    assert_like_jax(lambda ns: ns.m.jacrev(lambda x: ns.jnp.abs(ns.jnp.cumsum(ns.jnp.exp(1j * x))))(X))
    assert_like_jax(lambda ns: ns.m.hessian(lambda x: ns.jnp.abs(ns.jnp.sum(ns.jnp.exp(1j * x) * x)))(X), rtol=1e-4)


# --- the API's checks, with JAX's errors ---------------------------------------------------------------------
def _jax_error(call):
    with pytest.raises(Exception) as info:
        call(J)
    # (ember puts a space after "float0." where JAX's jvp message runs the sentences together)
    return info.type, str(info.value).replace("jax.", "ember.").replace("float0.Got", "float0. Got")


@pytest.mark.parametrize("name, call", [
    ("grad complex output", lambda ns: ns.m.grad(lambda z: z * z)(Z[0])),
    ("grad holomorphic real input", lambda ns: ns.m.grad(lambda z: z * 1j, holomorphic=True)(X[0])),
    ("grad holomorphic int input", lambda ns: ns.m.grad(lambda z: z * 1j, holomorphic=True, allow_int=True)(1)),
    ("grad holomorphic real output", lambda ns: ns.m.grad(ns.jnp.abs, holomorphic=True)(Z[0])),
    ("grad holomorphic mixed inputs", lambda ns: ns.m.grad(lambda a, b: a * b, (0, 1), holomorphic=True)(Z[0], 2.)),
    ("value_and_grad complex output", lambda ns: ns.m.value_and_grad(ns.jnp.sin)(Z[0])),
    ("jacfwd complex input", lambda ns: ns.m.jacfwd(ns.jnp.abs)(Z)),
    ("jacfwd int input", lambda ns: ns.m.jacfwd(lambda x: x)(np.arange(3))),
    ("jacfwd holomorphic real input", lambda ns: ns.m.jacfwd(lambda x: x * 1j, holomorphic=True)(X)),
    ("jacfwd holomorphic real output", lambda ns: ns.m.jacfwd(ns.jnp.abs, holomorphic=True)(Z)),
    ("jacrev complex output", lambda ns: ns.m.jacrev(lambda x: x * 1j)(X)),
    ("jacrev holomorphic real input", lambda ns: ns.m.jacrev(lambda x: x * 1j, holomorphic=True)(X)),
    ("jacrev holomorphic real output", lambda ns: ns.m.jacrev(ns.jnp.abs, holomorphic=True)(Z)),
    ("hessian complex input", lambda ns: ns.m.hessian(lambda z: ns.jnp.sum(ns.jnp.abs(z) ** 2))(Z)),
    ("jvp real tangent", lambda ns: ns.m.jvp(ns.jnp.sin, (Z,), (X,))),
    ("jvp complex tangent", lambda ns: ns.m.jvp(ns.jnp.sin, (X,), (Z,))),
    ("vjp real cotangent", lambda ns: ns.m.vjp(ns.jnp.sin, Z)[1](X)),
    ("vjp complex cotangent", lambda ns: ns.m.vjp(ns.jnp.abs, Z)[1](Z)),
])
def test_errors_match_jax(name, call):
    error, message = _jax_error(call)
    with pytest.raises(error) as info:
        call(E)
    assert str(info.value) == message


def test_holomorphic_messages():
    with pytest.raises(TypeError, match=r"^grad requires real-valued outputs \(output dtype that is a sub-dtype of "
                                        r"np.floating\), but got complex64. For holomorphic differentiation, pass "
                                        r"holomorphic=True."):
        ember.grad(jnp.sin)(Z[0])
    with pytest.raises(TypeError, match="^grad with holomorphic=True requires inputs with complex dtype, but got "
                                        "float32."):  # (pytest matches notes too: no $)
        ember.grad(jnp.sin, holomorphic=True)(X[0])


# --- jvp and vjp of complex functions, against JAX and finite differences -------------------------------------
FUNCTIONS = {
    "exp": lambda ns, z: ns.jnp.exp(z),
    "log": lambda ns, z: ns.jnp.log(z),
    "sqrt": lambda ns, z: ns.jnp.sqrt(z),
    "rsqrt": lambda ns, z: ns.lax.rsqrt(z),
    "pow": lambda ns, z: ns.lax.pow(z, z[::-1]),
    "integer_pow": lambda ns, z: ns.lax.integer_pow(z, 3) + ns.lax.integer_pow(z, -2),
    "power": lambda ns, z: z ** (0.5 + 1j) + z ** ns.jnp.int32(3) + z ** -2,
    "max": lambda ns, z: ns.lax.max(z, z[::-1]) * ns.jnp.max(z * z),
    "div": lambda ns, z: (z + 1) / (z * z + 2j),
    "abs": lambda ns, z: ns.jnp.abs(z),
    "angle": lambda ns, z: ns.jnp.angle(z),
    "parts": lambda ns, z: ns.jnp.real(z) * ns.jnp.imag(z) + ns.jnp.conj(z) * z,
    "complex": lambda ns, z: ns.lax.complex(ns.jnp.real(z) ** 2, ns.jnp.imag(z) * ns.jnp.abs(z)),
    "trig": lambda ns, z: ns.jnp.sin(z) * ns.jnp.cos(z) + ns.jnp.tanh(z) + ns.jnp.arcsinh(z),
    "sum": lambda ns, z: ns.jnp.sum(z * z),
    "prod": lambda ns, z: ns.jnp.prod(z),
    "cumsum": lambda ns, z: ns.jnp.cumsum(z),
    "cumprod": lambda ns, z: ns.jnp.cumprod(z),
    "dot": lambda ns, z: ns.jnp.dot(z, z[::-1]),
    "matmul": lambda ns, z: ns.jnp.outer(z, z * 1j) @ z,
    "where": lambda ns, z: ns.jnp.where(ns.jnp.real(z) > 0, z * z, ns.jnp.conj(z)),
    "indexing": lambda ns, z: z[1] * z[ns.jnp.array([0, 2, 0])],
    "at_set": lambda ns, z: z.at[1].set(z[0] * z[2]),
    "at_add": lambda ns, z: z.at[ns.jnp.array([0, 0, 2])].add(z * 1j),
    "at_multiply": lambda ns, z: z.at[1].multiply(z[2]),
    "convert": lambda ns, z: ns.lax.convert_element_type(ns.jnp.real(z), np.complex64) * z
    + ns.lax.convert_element_type(z * (1 + 2j), np.float32),
    "shapes": lambda ns, z: ns.lax.pad(ns.jnp.concatenate([z, z[::-1] * 2]).reshape(2, 3).T, np.complex64(0),
                                       [(1, 0, 1), (0, 1, 0)]),
    "dynamic_slice": lambda ns, z: ns.lax.dynamic_slice(z, (1,), (2,))
    * ns.lax.dynamic_update_slice(z, z[:1] * 3, (2,))[1:],
    "scan": lambda ns, z: ns.lax.scan(lambda c, x: (c * x + 1j, c * ns.jnp.conj(x)), z[0], z),
    "fori_loop": lambda ns, z: ns.lax.fori_loop(0, 3, lambda i, c: c * z + 1j, z),
    "cond": lambda ns, z: ns.lax.cond(ns.jnp.real(z[0]) > 0, lambda a: a * a, lambda a: ns.jnp.conj(a) * 1j, z),
    "stop_gradient": lambda ns, z: z * ns.lax.stop_gradient(z),
}


def _cotangent_like(out):
    out = np.asarray(out)
    value = (0.7 + 0.2j) if np.iscomplexobj(out) else 0.7
    return (np.ones(out.shape) * value + np.arange(out.size).reshape(out.shape) * 0.1).astype(out.dtype)


@pytest.mark.filterwarnings("ignore:Casting complex values to real")  # (the "convert" case's own cast)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_jvp_and_vjp_like_jax(name):
    fn = FUNCTIONS[name]
    assert_like_jax(lambda ns: ns.m.jvp(lambda z: fn(ns, z), (Z,), (W,)), rtol=1e-4, atol=1e-4)
    want_out = jax.vjp(lambda z: fn(J, z), Z)[0]
    cts = jax.tree_util.tree_map(_cotangent_like, want_out)
    assert_like_jax(lambda ns: ns.m.vjp(lambda z: fn(ns, z), Z)[1](cts), rtol=1e-4, atol=1e-4)


def _flat_output(fn):
    """``fn`` on ember with its output leaves raveled into one complex128 vector."""
    def flat(z):
        leaves = ember.tree_util.tree_leaves(fn(E, jnp.asarray(z)))
        return np.concatenate([np.ravel(np.asarray(x, np.complex128)) for x in leaves])
    return flat


@pytest.mark.parametrize("name", ["exp", "sqrt", "pow", "integer_pow", "power", "max", "div", "abs", "angle", "parts",
                                  "complex", "prod", "cumprod", "matmul", "at_multiply", "convert", "scan", "cond"])
@pytest.mark.filterwarnings("ignore:Casting complex values to real")
def test_jvp_against_central_differences(name):
    fn = FUNCTIONS[name]
    for t in (W, 1j * W, np.ones(3, np.complex64)):
        _, got = ember.jvp(lambda z: fn(E, z), (Z,), (t,))
        got = np.concatenate([np.ravel(np.asarray(x, np.complex128)) for x in ember.tree_util.tree_leaves(got)])
        np.testing.assert_allclose(got, numerical_jvp(_flat_output(fn), Z, t), rtol=3e-3, atol=3e-3)


@pytest.mark.parametrize("f", [
    lambda z: jnp.sum(jnp.abs(jnp.exp(z) * z)),
    lambda z: jnp.real(jnp.sum(jnp.sqrt(z) * jnp.conj(z[::-1]))),
    lambda z: jnp.abs(jnp.prod(z)) + jnp.angle(jnp.sum(z * 1j)),
    lambda z: jnp.imag(jnp.dot(z, jnp.cumprod(z))),
    lambda z: jnp.linalg.norm(z * (1 + 1j)),
    lambda z: jnp.abs(lax.scan(lambda c, x: (c * x + jnp.conj(c), None), z[0], z)[0]),
    lambda z: jnp.abs(lax.fori_loop(0, 3, lambda i, c: c * z[1] + 1j, z[0])),
], ids=["abs-exp", "sqrt-conj", "prod-angle", "cumprod-dot", "norm", "scan", "fori_loop"])
def test_grad_of_real_functions_against_central_differences(f):
    np.testing.assert_allclose(ember.grad(f)(Z), numerical_grad(f, Z), rtol=3e-3, atol=3e-3)


def test_grad_with_real_and_complex_arguments():
    def make(ns):
        def f(x, z):
            return ns.jnp.sum(ns.jnp.real(x * z) + ns.jnp.abs(ns.jnp.exp(1j * x) - z))
        return ns.m.grad(f, argnums=(0, 1))(X, Z)

    assert_like_jax(make)
    assert_like_jax(lambda ns: ns.m.grad(lambda r, t: ns.jnp.abs(r * ns.jnp.exp(1j * t) + 1), argnums=(0, 1))(
        np.float32(2.0), np.float32(0.3)))


def test_check_grads_with_complex_arguments():
    check_grads(jnp.sin, (Z,), 2, modes=("fwd", "rev", "lin"))
    check_grads(lambda x, z: jnp.real(x * z) + jnp.abs(z), (X, Z), 2, modes=("fwd", "rev"))
    check_grads(lambda z: z * jnp.conj(z) + z ** 2, (1.0 + 0.5j,), 1)
    check_grads(lambda x: jnp.exp(1j * x), (X,), 2, modes=("fwd", "rev"))

    @ember.custom_jvp
    def wrong(z):
        return jnp.sin(z)

    wrong.defjvp(lambda primals, tangents: (jnp.sin(primals[0]), jnp.cos(jnp.conj(primals[0])) * tangents[0]))
    for mode in ("fwd", "rev"):
        with pytest.raises(AssertionError):
            check_grads(wrong, (Z,), 1, modes=(mode,))


# --- custom rules and control flow with complex values -----------------------------------------------------
def _custom_jvp_fn(ns):
    @ns.m.custom_jvp
    def f(z):
        return ns.jnp.sin(z) * z

    @f.defjvp
    def f_jvp(primals, tangents):
        (z,), (dz,) = primals, tangents
        return f(z), (ns.jnp.cos(z) * z + ns.jnp.sin(z)) * dz

    return f


def _custom_vjp_fn(ns):
    @ns.m.custom_vjp
    def f(z, x):
        return ns.jnp.exp(z) * x

    def fwd(z, x):
        return f(z, x), (z, x)

    def bwd(residuals, ct):
        z, x = residuals
        return ct * ns.jnp.exp(z) * x, ns.jnp.real(ct * ns.jnp.exp(z))

    f.defvjp(fwd, bwd)
    return f


def test_custom_rules_with_complex_values():
    assert_like_jax(lambda ns: ns.m.grad(lambda z: ns.jnp.abs(ns.jnp.sum(_custom_jvp_fn(ns)(z))))(Z))
    assert_like_jax(lambda ns: ns.m.jacrev(_custom_jvp_fn(ns), holomorphic=True)(Z))
    assert_like_jax(lambda ns: ns.m.grad(lambda z, x: ns.jnp.abs(ns.jnp.sum(_custom_vjp_fn(ns)(z, x))),
                                         argnums=(0, 1))(Z, X), jit=False)
    assert_like_jax(lambda ns: ns.m.vjp(_custom_vjp_fn(ns), Z, X)[1](W), jit=False)
    assert_like_jax(lambda ns: ns.m.vmap(ns.m.grad(lambda z, x: ns.jnp.abs(_custom_vjp_fn(ns)(z, x)),
                                                   argnums=(0, 1)))(Z, X), jit=False)


def test_control_flow_with_complex_carries():
    def while_fn(ns, z):
        return ns.lax.while_loop(lambda c: ns.jnp.abs(c[0]) < 10., lambda c: (c[0] * c[1], c[1]), (z, z))

    assert_like_jax(lambda ns: ns.m.jvp(lambda z: while_fn(ns, z), (Z[0],), (np.complex64(1j),)))
    assert_like_jax(lambda ns: ns.m.grad(lambda z: ns.lax.scan(
        lambda c, x: (c * z + x, None), z, ns.jnp.arange(3.0).astype(np.complex64))[0], holomorphic=True)(Z[1]))
    assert_like_jax(lambda ns: ns.m.grad(lambda z: ns.jnp.abs(ns.lax.cond(
        ns.jnp.real(z) > 0, lambda a: a * a, lambda a: ns.jnp.conj(a) * 1j, z)))(Z[1]))
    assert_like_jax(lambda ns: ns.m.grad(ns.m.checkpoint(lambda z: ns.jnp.abs(ns.jnp.sin(z) * z)))(Z[1]))
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        ember.grad(lambda z: jnp.abs(while_fn(E, z)[0]))(Z[0])


def test_linearize_and_jit_of_complex_derivatives():
    assert_like_jax(lambda ns: ns.m.linearize(lambda z: ns.jnp.sin(z) * ns.jnp.conj(z), Z)[1](W))
    assert_like_jax(lambda ns: ns.m.jit(ns.m.grad(lambda z: ns.jnp.tanh(z) / z, holomorphic=True))(Z[0]))
    assert_like_jax(lambda ns: ns.m.jit(ns.m.grad(lambda z: ns.jnp.sum(ns.jnp.abs(z * ns.jnp.exp(z)))))(Z))
    assert_like_jax(lambda ns: ns.m.grad(lambda z: ns.jnp.abs(ns.m.jvp(ns.jnp.sin, (z,), (z,))[1]))(Z[0]))


def test_derivatives_of_conversions_do_not_warn():
    # Only the user's own complex -> real cast warns (as JAX); its transpose and the transposes of
    # real -> complex casts drop imaginary parts on purpose.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, pullback = ember.vjp(lambda x: lax.convert_element_type(x, np.complex64) * (1 + 2j), X)
        np.testing.assert_allclose(pullback(W)[0], np.real(W * (1 + 2j)), rtol=1e-6)
        assert pullback(W)[0].dtype == np.float32
        np.testing.assert_allclose(ember.grad(lambda x: jnp.abs(jnp.dot(x.astype(np.complex64), Z)))(X),
                                   jax.grad(lambda x: jax.numpy.abs(jax.numpy.dot(x.astype(np.complex64), Z)))(X),
                                   rtol=1e-5)
        cast = ember.jit(lambda z: ember.vjp(lambda a: jnp.real(a), z)[1](X)[0])
        np.testing.assert_array_equal(cast(Z), X.astype(np.complex64))


def test_integer_arguments_get_float0_cotangents():
    _, pullback = ember.vjp(lambda z, n: z * n, Z, np.int32(3))
    dz, dn = pullback(W)
    np.testing.assert_allclose(dz, W * 3)
    assert dn.dtype == ember.dtypes.float0
    g = ember.grad(lambda z, n: jnp.abs(z) * n, allow_int=True)(Z[0], 3)
    np.testing.assert_allclose(g, 3 * np.conj(Z[0]) / np.abs(Z[0]), rtol=1e-6)


# --- vmap against Python loops ----------------------------------------------------------------------------------
ZS = np.stack([Z, W, Z * 1j, W[::-1]])


@pytest.mark.parametrize("name", ["exp", "pow", "abs", "parts", "cumprod", "matmul", "where", "at_add", "scan",
                                  "fori_loop", "cond"])
def test_vmap_of_jvp_and_vjp_against_loops(name):
    fn = FUNCTIONS[name]

    def jvp_fn(z, t):
        return ember.jvp(lambda a: fn(E, a), (z,), (t,))

    def vjp_fn(z, ct):
        return ember.vjp(lambda a: fn(E, a), z)[1](ct)[0]

    batched = ember.vmap(jvp_fn)(ZS, ZS[::-1])
    for i in range(len(ZS)):
        one = jvp_fn(ZS[i], ZS[::-1][i])
        for b, o in zip(ember.tree_util.tree_leaves(batched), ember.tree_util.tree_leaves(one)):
            np.testing.assert_allclose(b[i], o, rtol=1e-5, atol=1e-5)
    out = ember.jvp(lambda a: fn(E, a), (Z,), (W,))[0]
    cts = ember.tree_util.tree_map(lambda o: np.stack([_cotangent_like(o) * (k + 1) for k in range(len(ZS))]), out)
    batched = ember.vmap(vjp_fn)(ZS, cts)
    for i in range(len(ZS)):
        one = vjp_fn(ZS[i], ember.tree_util.tree_map(lambda c: c[i], cts))
        np.testing.assert_allclose(batched[i], one, rtol=1e-5, atol=1e-5)


def test_vmap_of_grads_and_jacobians_against_loops():
    def real_f(z):
        return jnp.abs(jnp.sin(z) * jnp.conj(z)) + jnp.angle(z)

    def holo_f(z):
        return jnp.tanh(z) / (z + 2) + jnp.log(z) ** 2

    def vec_f(z):
        return jnp.sin(z) * z[::-1]

    for fn, f in [(ember.vmap(ember.grad(real_f)), ember.grad(real_f)),
                  (ember.vmap(ember.grad(holo_f, holomorphic=True)), ember.grad(holo_f, holomorphic=True))]:
        np.testing.assert_allclose(fn(Z), [f(z) for z in Z], rtol=1e-5, atol=1e-6)
    for jac in (ember.jacfwd, ember.jacrev):
        batched = ember.vmap(jac(vec_f, holomorphic=True))(ZS)
        np.testing.assert_allclose(batched, [jac(vec_f, holomorphic=True)(z) for z in ZS], rtol=1e-5, atol=1e-6)
    batched = ember.vmap(ember.jacrev(lambda z: jnp.abs(vec_f(z))))(ZS)
    np.testing.assert_allclose(batched, [ember.jacrev(lambda z: jnp.abs(vec_f(z)))(z) for z in ZS], rtol=1e-5,
                               atol=1e-6)


def test_vmap_of_complex_control_flow_against_loops():
    def scan_f(z):
        return lax.scan(lambda c, x: (c * x + 1j, jnp.conj(c)), z, Z)

    def while_f(z):
        return lax.while_loop(lambda c: jnp.abs(c) < 10., lambda c: c * (1 + 1j), z)

    def cond_f(z):
        return lax.cond(jnp.real(z) > 0, lambda a: a * a, jnp.conj, z)

    for f in (scan_f, while_f, cond_f):
        batched = ember.vmap(f)(W)
        for i, w in enumerate(W):
            for b, o in zip(ember.tree_util.tree_leaves(batched), ember.tree_util.tree_leaves(f(w))):
                np.testing.assert_allclose(b[i], o, rtol=1e-6)
        assert_like_jax(lambda ns: ns.m.vmap(lambda z: ns.m.jvp(
            {scan_f: lambda a: ns.lax.scan(lambda c, x: (c * x + 1j, ns.jnp.conj(c)), a, Z),
             while_f: lambda a: ns.lax.while_loop(lambda c: ns.jnp.abs(c) < 10., lambda c: c * (1 + 1j), a),
             cond_f: lambda a: ns.lax.cond(ns.jnp.real(a) > 0, lambda b: b * b, ns.jnp.conj, a)}[f],
            (z,), (z * 1j,)))(W))


def test_norm_of_complex_values_and_its_derivative():
    np.testing.assert_allclose(jnp.linalg.norm(Z), np.linalg.norm(Z), rtol=1e-6)
    assert jnp.linalg.norm(Z).dtype == np.float32
    np.testing.assert_allclose(jnp.linalg.norm(Z.reshape(3, 1) * W), np.linalg.norm(Z.reshape(3, 1) * W), rtol=1e-6)
    assert_like_jax(lambda ns: ns.m.grad(ns.jnp.linalg.norm)(Z))
    assert_like_jax(lambda ns: ns.m.jvp(ns.jnp.linalg.norm, (Z,), (W,)))
    np.testing.assert_array_equal(ember.grad(jnp.linalg.norm)(np.zeros(3, np.complex64)), np.zeros(3, np.complex64))


def test_weak_types_of_complex_gradients_follow_jax():
    """A real function's gradient at a weak complex value is strong in JAX (its cotangent comes
    out of `complex`); holomorphic gradients, vjp and jacrev keep the weak type."""
    cases = [
        lambda m: m.grad(lambda z: (z * z).real)(1 + 2j),
        lambda m: m.grad(lambda z: abs(z))(3 + 4j),
        lambda m: m.grad(lambda z: z * z, holomorphic=True)(1 + 2j),
        lambda m: m.vjp(lambda z: z * z, 1 + 2j)[1](1 + 0j)[0],
        lambda m: m.jacrev(lambda z: (z * z).real)(1 + 2j),
        lambda m: m.grad(lambda x: x * x)(1.0),
    ]
    for case in cases:
        got, want = case(ember), case(jax)
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
