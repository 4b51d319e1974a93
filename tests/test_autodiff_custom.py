"""User-defined derivatives (custom_jvp, custom_vjp) in every composition, their error messages,
and the library functions that carry custom rules for stability (norm at 0, logsumexp,
softplus, relu)."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from test_autodiff import check_grads

import ember
import ember.numpy as jnp
from ember import lax, nn


# --- custom_jvp --------------------------------------------------------------------------------------
@ember.custom_jvp
def scaled_sin(x):
    """sin(x), with the derivative deliberately declared as 2 cos(x) (so the rule is observable)."""
    return jnp.sin(x)


@scaled_sin.defjvp
def _scaled_sin_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return scaled_sin(x), 2.0 * jnp.cos(x) * t


@pytest.mark.parametrize("derivative, x", [
    (ember.grad(scaled_sin), 0.7), (ember.jit(ember.grad(scaled_sin)), 0.7), (ember.grad(ember.jit(scaled_sin)), 0.7),
    (lambda x: ember.jvp(scaled_sin, (x,), (1.0,))[1], 0.7), (lambda x: ember.linearize(scaled_sin, x)[1](1.0), 0.7),
    (ember.jacrev(scaled_sin), 0.7), (ember.vmap(ember.grad(scaled_sin)), np.array([0.3, 1.1])),
], ids=["grad", "jit(grad)", "grad(jit)", "jvp", "linearize", "jacrev", "vmap(grad)"])
def test_custom_jvp_rule_is_used(derivative, x) -> None:
    np.testing.assert_allclose(derivative(x), 2 * np.cos(x), rtol=1e-6)


def test_custom_jvp_values_and_higher_derivatives() -> None:
    np.testing.assert_allclose(scaled_sin(0.7), np.sin(0.7), rtol=1e-6)
    np.testing.assert_allclose(ember.jit(scaled_sin)(0.7), np.sin(0.7), rtol=1e-6)
    np.testing.assert_allclose(ember.grad(ember.grad(scaled_sin))(0.7), -2 * np.sin(0.7), rtol=1e-6)
    assert "custom_jvp_call" in str(ember.make_jaxpr(scaled_sin)(0.7))


def test_custom_jvp_with_nondiff_argnums_and_pytrees() -> None:
    @functools.partial(ember.custom_jvp, nondiff_argnums=(1,))
    def power_sum(params, n):
        return {"s": jnp.sum(params["x"] ** n), "n": n}

    @power_sum.defjvp
    def _power_sum_jvp(n, primals, tangents):
        (params,), (dparams,) = primals, tangents
        return power_sum(params, n), {"s": jnp.sum(n * params["x"] ** (n - 1) * dparams["x"]), "n": 0.0}

    g = ember.grad(lambda p: power_sum(p, 3)["s"])({"x": jnp.array([1.0, 2.0])})
    np.testing.assert_allclose(g["x"], [3.0, 12.0])
    g = ember.jit(ember.grad(lambda p, k: power_sum(p, 2)["s"] * k))({"x": jnp.array([1.0, 2.0])}, 2.0)
    np.testing.assert_allclose(g["x"], [4.0, 8.0])


def test_custom_jvp_defjvps_and_keyword_arguments() -> None:
    @ember.custom_jvp
    def f(x, y):
        return x * y

    f.defjvps(lambda t, ans, x, y: 10.0 * t, lambda t, ans, x, y: 100.0 * t)
    assert ember.grad(f, argnums=(0, 1))(2.0, 3.0) == (10.0, 100.0)
    assert float(ember.grad(lambda x: f(x, y=3.0))(2.0)) == 10.0


def test_custom_jvp_errors() -> None:
    @ember.custom_jvp
    def no_rule(x):
        return x

    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function no_rule using defjvp"):
        no_rule(1.0)

    @ember.custom_jvp
    def bad(x):
        return x, x

    bad.defjvp(lambda primals, tangents: ((primals[0], primals[0]), tangents[0]))
    with pytest.raises(TypeError, match="same container .pytree. structure"):
        ember.jvp(bad, (1.0,), (1.0,))

    def closes_over_what_is_differentiated(y):
        @ember.custom_jvp
        def g(x):
            return x * y

        g.defjvp(lambda primals, tangents: (g(*primals), tangents[0] * y))
        return g(2.0)

    with pytest.raises(TypeError, match="closes over a value that is being differentiated"):
        ember.grad(closes_over_what_is_differentiated)(3.0)


# --- custom_vjp ---------------------------------------------------------------------------------------
@ember.custom_vjp
def clipped_gradient(x, bound):
    """The identity, whose cotangent is clipped to [-bound, bound]."""
    return x


def _clip_fwd(x, bound):
    return x, bound


def _clip_bwd(bound, g):
    return jnp.clip(g, -bound, bound), None


clipped_gradient.defvjp(_clip_fwd, _clip_bwd)


def _amplified(x):
    return jnp.sum(clipped_gradient(x, 1.0) * 5.0)


@pytest.mark.parametrize("derivative, x", [
    (ember.grad(_amplified), jnp.ones(3)), (ember.jit(ember.grad(_amplified)), jnp.ones(3)),
    (ember.grad(ember.jit(_amplified)), jnp.ones(3)), (ember.vmap(ember.grad(_amplified)), jnp.ones((2, 3))),
], ids=["grad", "jit(grad)", "grad(jit)", "vmap(grad)"])
def test_custom_vjp_rule_is_used(derivative, x) -> None:
    np.testing.assert_allclose(derivative(x), np.ones(x.shape))


def test_custom_rules_inside_control_flow() -> None:
    def clipped_sum(xs):
        return lax.scan(lambda c, x: (c + clipped_gradient(x * 3.0, 0.5), None), 0.0, xs)[0]

    for derivative in (ember.grad(clipped_sum), ember.jit(ember.grad(clipped_sum))):
        np.testing.assert_allclose(derivative(jnp.ones(4)), np.full(4, 1.5))
    x = jnp.array([0.3, 0.5])
    product = ember.grad(lambda xs: lax.scan(lambda c, x: (c * scaled_sin(x), None), 1.0, xs)[0])(x)
    np.testing.assert_allclose(product, 2 * np.cos(x) * np.sin(x[::-1]), rtol=1e-6)
    branch = ember.grad(lambda x: lax.cond(x > 0, lambda v: clipped_gradient(v, 2.0) * 5.0, lambda v: v, x))
    assert float(branch(1.0)) == 2.0 and float(branch(-1.0)) == 1.0


def test_custom_vjp_values_pytrees_and_second_order() -> None:
    @ember.custom_vjp
    def f(p):
        return {"y": jnp.sin(p["a"]) * p["b"]}

    def f_fwd(p):
        return f(p), (jnp.cos(p["a"]), p["a"], p["b"])

    def f_bwd(res, ct):
        cos_a, a, b = res
        return ({"a": ct["y"] * cos_a * b, "b": ct["y"] * jnp.sin(a)},)

    f.defvjp(f_fwd, f_bwd)
    p = {"a": jnp.array(0.4), "b": jnp.array(1.5)}
    np.testing.assert_allclose(f(p)["y"], np.sin(0.4) * 1.5, rtol=1e-6)
    g = ember.grad(lambda p: f(p)["y"])(p)
    np.testing.assert_allclose([g["a"], g["b"]], [np.cos(0.4) * 1.5, np.sin(0.4)], rtol=1e-6)
    # the bwd rule is itself differentiated: d/da of (cos(a) b)
    second = ember.grad(lambda a: ember.grad(lambda p: f(p)["y"])({"a": a, "b": p["b"]})["a"])(p["a"])
    np.testing.assert_allclose(second, -np.sin(0.4) * 1.5, rtol=1e-6)


def test_custom_vjp_integer_argument_and_nondiff_argnums() -> None:
    @functools.partial(ember.custom_vjp, nondiff_argnums=(0,))
    def repeat_scale(times, x, i):
        return x * times * i

    repeat_scale.defvjp(lambda times, x, i: (repeat_scale(times, x, i), i),
                        lambda times, i, g: (g * times * i * 10.0, None))
    g, gi = ember.grad(lambda x, i: repeat_scale(2, x, i), argnums=(0, 1), allow_int=True)(1.0, 3)
    assert float(g) == 60.0 and gi.dtype == np.dtype([("float0", "V")])


def test_custom_vjp_forward_mode_is_an_error() -> None:
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff \\(jvp\\) to a custom_vjp function."):
        ember.jvp(lambda x: clipped_gradient(x, 1.0), (1.0,), (1.0,))
    _, f_jvp = ember.linearize(lambda x: clipped_gradient(x, 1.0), 1.0)
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff"):
        f_jvp(1.0)


def test_custom_vjp_errors() -> None:
    @ember.custom_vjp
    def no_rule(x):
        return x

    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function no_rule using defvjp"):
        no_rule(1.0)

    @ember.custom_vjp
    def wrong_arity(x, y):
        return x * y

    wrong_arity.defvjp(lambda x, y: (x * y, None), lambda res, g: (g,))
    with pytest.raises(TypeError, match="one cotangent per differentiable argument \\(2\\)"):
        ember.grad(wrong_arity)(1.0, 2.0)


# --- library functions with custom rules ---------------------------------------------------------------
def test_norm_has_a_finite_derivative_at_zero() -> None:
    for norm in (jnp.linalg.norm, lambda x: jnp.linalg.norm(x.reshape(2, 2), "fro"),
                 lambda x: jnp.linalg.norm(x, axis=0, keepdims=True)[0]):
        np.testing.assert_array_equal(ember.grad(norm)(jnp.zeros(4)), np.zeros(4))
        np.testing.assert_array_equal(ember.jit(ember.grad(norm))(jnp.zeros(4)), np.zeros(4))
    x = jnp.array([3.0, 4.0])
    np.testing.assert_allclose(ember.grad(jnp.linalg.norm)(x), [0.6, 0.8], rtol=1e-6)
    expected_hessian = (np.eye(2) - np.outer([0.6, 0.8], [0.6, 0.8])) / 5
    np.testing.assert_allclose(ember.hessian(jnp.linalg.norm)(x), expected_hessian, rtol=1e-5, atol=1e-7)


def test_norm_derivatives_away_from_zero(x64: None) -> None:
    check_grads(lambda x: jnp.linalg.norm(x, axis=1), [np.random.default_rng(0).normal(size=(2, 3))], order=2)


def test_logsumexp_and_softmax_gradients_are_stable() -> None:
    x = jnp.array([1000.0, 1000.0, -np.inf, 999.0])
    g = ember.grad(nn.logsumexp)(x)
    expected = np.exp(np.array([0.0, 0.0, -np.inf, -1.0]) - np.log(2 + np.exp(-1.0)))
    np.testing.assert_allclose(g, expected, rtol=1e-6)
    np.testing.assert_allclose(ember.grad(lambda x: nn.log_softmax(x)[0])(x), np.eye(4)[0] - expected, rtol=1e-5)


def test_softplus_and_relu_derivatives_at_the_extremes() -> None:
    x = jnp.array([-np.inf, -1000.0, 0.0, 1000.0, np.inf])
    np.testing.assert_allclose(ember.grad(lambda x: jnp.sum(nn.softplus(x)))(x), [0.0, 0.0, 0.5, 1.0, 1.0])
    np.testing.assert_array_equal(ember.grad(lambda x: jnp.sum(nn.relu(x)))(x), [0.0, 0.0, 0.0, 1.0, 1.0])
    assert nn.relu(jnp.arange(-2, 3)).dtype == np.int32
    np.testing.assert_array_equal(ember.jit(nn.relu)(jnp.array([-1.0, 2.0])), [0.0, 2.0])


def test_stop_gradient_inside_a_custom_rule() -> None:
    @ember.custom_jvp
    def f(x):
        return x ** 2

    f.defjvp(lambda primals, tangents: (f(primals[0]), lax.stop_gradient(primals[0]) * tangents[0]))
    assert float(ember.grad(f)(3.0)) == 3.0
    assert float(ember.grad(ember.grad(f))(3.0)) == 0.0


def test_custom_rules_run_as_often_as_in_jax_and_see_concrete_primals():
    """Under jvp and grad only the rules run (JAX's counts: the `f` below comes from the rule's own
    call); a rule that branches on a concrete primal in Python works under grad, as in JAX."""
    calls = []

    @ember.custom_jvp
    def f(x):
        calls.append("f")
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        calls.append("jvp")
        return f(primals[0]), tangents[0] * jnp.cos(primals[0])

    for run in (lambda: ember.jvp(f, (1.0,), (1.0,)), lambda: ember.grad(f)(1.0),
                lambda: ember.jit(ember.grad(f))(1.0)):
        calls.clear()
        run()
        assert calls == ["jvp", "f"]

    @ember.custom_vjp
    def g(x):
        calls.append("g")
        return jnp.sin(x)

    g.defvjp(lambda x: (calls.append("fwd"), (jnp.sin(x), x))[1],
             lambda x, ct: (calls.append("bwd"), (ct * jnp.cos(x),))[1])
    calls.clear()
    np.testing.assert_allclose(ember.grad(g)(1.0), np.cos(1.0), rtol=1e-6)
    assert calls == ["fwd", "bwd"]
    calls.clear()
    ember.vjp(g, 1.0)
    assert calls == ["fwd"]

    @ember.custom_jvp
    def absolute(x):
        return x if x > 0 else -x

    absolute.defjvp(lambda p, t: (absolute(p[0]), jnp.sign(p[0]) * t[0]))
    assert float(ember.grad(absolute)(-2.0)) == -1.0 and float(ember.grad(absolute)(3.0)) == 1.0
    with pytest.raises(ember.errors.TracerBoolConversionError):
        ember.jit(ember.grad(absolute))(3.0)  # (traced primal: JAX refuses too)


# --- how often the user's functions run, held against JAX 0.10.2 --------------------------------------
def _libraries():
    import importlib
    libs = [(ember, jnp, lax)]
    try:
        jax = importlib.import_module("jax")
    except ImportError:
        return libs
    return libs + [(jax, importlib.import_module("jax.numpy"), importlib.import_module("jax.lax"))]


def _counted_custom_jvp(top, np_):
    count = {"f": 0, "jvp": 0}

    @top.custom_jvp
    def f(x):
        count["f"] += 1
        return np_.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        count["jvp"] += 1
        return f(primals[0]), np_.cos(primals[0]) * tangents[0]

    return f, count


def _counted_custom_vjp(top, np_):
    count = {"f": 0, "fwd": 0, "bwd": 0}

    @top.custom_vjp
    def f(x):
        count["f"] += 1
        return np_.sin(x)

    def fwd(x):
        count["fwd"] += 1
        return f(x), np_.cos(x)

    def bwd(residual, g):
        count["bwd"] += 1
        return (residual * g,)

    f.defvjp(fwd, bwd)
    return f, count


COUNTED_CASES = {
    "grad": lambda t, n, l, f: t.grad(f)(1.0),
    "grad of grad": lambda t, n, l, f: t.grad(t.grad(f))(1.0),
    "grad of vmap": lambda t, n, l, f: t.grad(lambda x: t.vmap(f)(x).sum())(n.ones(3)),
    "vmap of grad": lambda t, n, l, f: t.vmap(t.grad(f))(n.ones(3)),
    "hessian": lambda t, n, l, f: t.hessian(f)(1.0),
    "grad through cond": lambda t, n, l, f: t.grad(lambda x: l.cond(x > 0, f, n.cos, x))(1.0),
    "grad through scan": lambda t, n, l, f: t.grad(lambda x: l.scan(lambda c, _: (f(c), None), x, None,
                                                                    length=2)[0])(1.0),
    "grad of jit of grad": lambda t, n, l, f: t.grad(t.jit(t.grad(f)))(1.0),
    "jit of vmap": lambda t, n, l, f: t.jit(t.vmap(f))(n.ones(3)),
    "jacrev": lambda t, n, l, f: t.jacrev(f)(n.ones(2)),
}


@pytest.mark.parametrize("kind", ["custom_jvp", "custom_vjp"])
@pytest.mark.parametrize("case", list(COUNTED_CASES), ids=str)
def test_user_functions_run_as_often_as_in_jax(kind, case):
    libraries = _libraries()
    if len(libraries) == 1:
        pytest.skip("jax is not installed")
    counts = []
    for top, np_, lax_ in libraries:
        f, count = (_counted_custom_jvp if kind == "custom_jvp" else _counted_custom_vjp)(top, np_)
        try:
            COUNTED_CASES[case](top, np_, lax_, f)
        except TypeError as e:  # (forward mode through a custom_vjp: JAX's error)
            count["error"] = str(e)
            # (where the error is raised differs: ember runs bwd before jacfwd's forward mode meets it)
            count.pop("bwd")
        counts.append(count)
    assert counts[0] == counts[1]


@pytest.mark.parametrize("derivative", ["jacfwd", "hessian"])
def test_forward_mode_of_a_custom_vjp_function_is_jaxs_type_error(derivative):
    f, _ = _counted_custom_vjp(ember, jnp)
    with pytest.raises(TypeError, match=r"^can't apply forward-mode autodiff \(jvp\) to a custom_vjp function\."):
        getattr(ember, derivative)(f)(jnp.ones(2) if derivative == "jacfwd" else 1.0)
