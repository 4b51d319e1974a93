"""Automatic differentiation: the public API (jvp, linearize, vjp, grad, value_and_grad, jacfwd,
jacrev, hessian) against finite differences and closed forms, compositions with jit and with
itself, error messages, rule coverage, and a classifier trained end to end.

``check_grads`` (central differences in float64, and ``<u, J v> == <J^T u, v>``) is shared by
the other ``test_autodiff_*`` files.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import errors, lax, nn, tree_util
from ember.api import jit_p
from ember.core import traits
from ember.core.primitive import Primitive, abstract_eval_rules, higher_order
from ember.dtypes import float0
from ember.transforms.jvp import jvp_rules
from ember.transforms.partial_eval import partial_eval_rules
from ember.transforms.transpose import transpose_rules


# --- derivative checks (float64) --------------------------------------------------------------
def _random_like(tree: Any, rng: np.random.Generator) -> Any:
    return tree_util.tree_map(lambda x: rng.normal(size=np.shape(x)).astype(np.float64), tree)


def _vdot(a: Any, b: Any) -> float:
    return sum(float(np.sum(np.asarray(x, np.float64) * np.asarray(y, np.float64)))
               for x, y in zip(tree_util.tree_leaves(a), tree_util.tree_leaves(b)))


def _as_f64(tree: Any) -> Any:
    return tree_util.tree_map(lambda x: jnp.asarray(np.asarray(x, np.float64)), tree)


def numerical_jvp(f: Callable, args: Sequence[Any], tangents: Sequence[Any], eps: float) -> Any:
    """Central differences ``(f(x + eps t) - f(x - eps t)) / 2 eps``."""
    def shifted(sign: float) -> Any:
        return f(*_as_f64(tree_util.tree_map(lambda x, t: np.asarray(x, np.float64) + sign * eps * t,
                                             list(args), list(tangents))))
    return tree_util.tree_map(lambda p, m: (np.asarray(p) - np.asarray(m)) / (2 * eps), shifted(1.0), shifted(-1.0))


def assert_tree_close(actual: Any, expected: Any, rtol: float, atol: float) -> None:
    a_leaves, a_tree = tree_util.tree_flatten(actual)
    e_leaves, e_tree = tree_util.tree_flatten(expected)
    assert a_tree == e_tree, f"structure {a_tree} != {e_tree}"
    for a, e in zip(a_leaves, e_leaves):
        assert np.shape(a) == np.shape(e), f"shape {np.shape(a)} != {np.shape(e)}"
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(e, np.float64), rtol=rtol, atol=atol)


def check_jvp(f: Callable, args: Sequence[Any], rng: np.random.Generator, rtol: float = 1e-5,
              atol: float = 1e-6, eps: float = 1e-6) -> None:
    tangents = _random_like(list(args), rng)
    out, out_tangent = ember.jvp(f, _as_f64(list(args)), _as_f64(tangents))
    assert_tree_close(out, f(*_as_f64(list(args))), rtol=1e-12, atol=0)
    assert_tree_close(out_tangent, numerical_jvp(f, args, tangents, eps), rtol=rtol, atol=atol)


def check_vjp(f: Callable, args: Sequence[Any], rng: np.random.Generator, rtol: float = 1e-9) -> None:
    """The transpose identity ``<u, J v> == <J^T u, v>`` for random u, v."""
    tangents = _random_like(list(args), rng)
    _, out_tangent = ember.jvp(f, _as_f64(list(args)), _as_f64(tangents))
    out, vjp_fn = ember.vjp(f, *_as_f64(list(args)))
    cotangent = _random_like(out, rng)
    cts = vjp_fn(_as_f64(cotangent))
    for ct, x in zip(tree_util.tree_leaves(cts), tree_util.tree_leaves(list(args))):
        assert np.shape(ct) == np.shape(x)
    lhs, rhs = _vdot(cotangent, out_tangent), _vdot(cts, tangents)
    np.testing.assert_allclose(lhs, rhs, rtol=rtol, atol=rtol * (abs(lhs) + abs(rhs) + 1e-3))


def check_grads(f: Callable, args: Sequence[Any], order: int = 1, modes: Sequence[str] = ("fwd", "rev"),
                rng: np.random.Generator | None = None, **tol: Any) -> None:
    """Forward mode against finite differences, reverse mode against forward mode; with
    ``order`` > 1, the same for the derivative functions (fixed random directions)."""
    rng = rng or np.random.default_rng(0)
    if "fwd" in modes:
        check_jvp(f, args, rng, **tol)
    if "rev" in modes:
        check_vjp(f, args, rng)
    if order > 1:
        if "fwd" in modes:
            tangents = _as_f64(_random_like(list(args), rng))
            check_grads(lambda *a: ember.jvp(f, list(a), tangents)[1], args, order - 1, modes, rng, **tol)
        if "rev" in modes:
            cotangent = _as_f64(_random_like(f(*_as_f64(list(args))), rng))
            check_grads(lambda *a: ember.vjp(f, *a)[1](cotangent), args, order - 1, modes, rng, **tol)


# --- the API -------------------------------------------------------------------------------------
def test_grad_matches_closed_form() -> None:
    x = np.linspace(-2, 2, 7).astype(np.float32)
    g = ember.grad(lambda x: jnp.sum(jnp.sin(x) * x ** 2))(x)
    assert g.dtype == np.float32 and g.shape == (7,)
    np.testing.assert_allclose(g, np.cos(x) * x ** 2 + 2 * x * np.sin(x), rtol=1e-5, atol=1e-6)


def test_grad_of_python_scalar_is_weakly_typed_like_jax() -> None:
    g = ember.grad(jnp.sin)(1.0)
    assert g.dtype == np.float32 and g.weak_type
    np.testing.assert_allclose(g, np.cos(1.0), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16, np.float32])
def test_gradient_keeps_the_input_dtype(dtype: Any) -> None:
    x = jnp.asarray(np.array([0.5, 1.0, 2.0]), dtype)
    g = ember.grad(lambda x: jnp.sum(jnp.exp(x) * x))(x)
    assert g.dtype == np.dtype(dtype)
    expected = np.exp(np.asarray(x, np.float64)) * (1 + np.asarray(x, np.float64))
    np.testing.assert_allclose(np.asarray(g, np.float64), expected, rtol=2e-2)


def test_check_grads_second_order(x64: None) -> None:
    def f(x, y):
        return jnp.tanh(x) * jnp.exp(y[0]) + jnp.sum(x ** 3 / (1 + y[1] ** 2))

    rng = np.random.default_rng(1)
    check_grads(f, [rng.normal(size=3), rng.normal(size=2)], order=2)


def test_jvp_and_vjp_on_pytrees(x64: None) -> None:
    def f(params, x):
        return {"out": jnp.tanh(params["w"] @ x + params["b"]), "norm": jnp.sum(x ** 2)}

    rng = np.random.default_rng(2)
    params = {"w": rng.normal(size=(2, 3)), "b": rng.normal(size=2)}
    check_grads(f, [params, rng.normal(size=3)])
    _, vjp_fn = ember.vjp(f, _as_f64(params), _as_f64(rng.normal(size=3)))
    cts = vjp_fn({"out": jnp.ones(2, jnp.float64), "norm": jnp.asarray(0.0, jnp.float64)})
    assert set(cts[0]) == {"w", "b"} and cts[0]["w"].shape == (2, 3) and cts[1].shape == (3,)


def test_jvp_returns_primal_and_tangent_like_jax() -> None:
    y, t = ember.jvp(lambda x: x * jnp.array([1.0, 2.0]), (3.0,), (0.5,))
    np.testing.assert_allclose(y, [3.0, 6.0])
    np.testing.assert_allclose(t, [0.5, 1.0])
    (y, t, aux) = ember.jvp(lambda x: (x ** 2, "aux"), (3.0,), (1.0,), has_aux=True)
    assert float(t) == 6.0 and aux == "aux"


def test_an_output_that_does_not_depend_on_the_input_has_zero_derivatives() -> None:
    """A float output computed through a comparison (optax's ``safe_norm(x, 0., ord=0)``, a count of
    nonzeros) has a known-zero tangent: linearize's function, jacfwd and jacrev give zeros of its
    type, as JAX does (jacfwd once failed on the missing column)."""
    x = jnp.array([0.0, 1.0, 2.0])
    count = lambda x: jnp.linalg.norm(x, ord=0)
    out, f_jvp = ember.linearize(count, x)
    assert float(out) == 2.0
    tangent = f_jvp(x)
    assert tangent.dtype == np.float32 and tangent.shape == () and float(tangent) == 0.0
    for jacobian in (ember.jacfwd, ember.jacrev):
        np.testing.assert_array_equal(jacobian(count)(x), np.zeros(3, np.float32))
        both = jacobian(lambda x: (count(x), 2 * x))(x)
        np.testing.assert_array_equal(both[0], np.zeros(3, np.float32))
        np.testing.assert_array_equal(both[1], 2 * np.eye(3, dtype=np.float32))


def test_linearize_runs_the_function_once_and_matches_jvp() -> None:
    calls = []

    def f(x):
        calls.append(1)
        return jnp.sin(x) * x

    x = jnp.array([0.5, 1.5])
    y, f_jvp = ember.linearize(f, x)
    assert len(calls) == 1
    t1, t2 = f_jvp(jnp.array([1.0, 0.0])), f_jvp(jnp.array([0.0, 2.0]))
    assert len(calls) == 1
    expected = np.cos(x) * x + np.sin(x)
    np.testing.assert_allclose(t1, [expected[0], 0.0], rtol=1e-6)
    np.testing.assert_allclose(t2, [0.0, 2 * expected[1]], rtol=1e-6)
    np.testing.assert_allclose(y, np.sin(x) * x, rtol=1e-6)


def test_value_and_grad_argnums_aux_and_keywords() -> None:
    def loss(w, b, x, *, scale):
        value = jnp.sum((w * x + b) ** 2) * scale
        return value, {"value": value}

    w, b, x = jnp.array([1.0, 2.0]), 0.5, jnp.array([3.0, -1.0])
    (value, aux), (gw, gb) = ember.value_and_grad(loss, argnums=(0, 1), has_aux=True)(w, b, x, scale=2.0)
    residual = np.array([1.0 * 3 + 0.5, 2.0 * -1 + 0.5])
    np.testing.assert_allclose(value, 2 * np.sum(residual ** 2))
    np.testing.assert_allclose(aux["value"], value)
    np.testing.assert_allclose(gw, 4 * residual * np.array([3.0, -1.0]))
    np.testing.assert_allclose(gb, 4 * np.sum(residual))
    g_last = ember.grad(lambda a, b: a * b ** 2, argnums=-1)(3.0, 2.0)
    assert float(g_last) == 12.0
    g, aux = ember.grad(loss, has_aux=True)(w, b, x, scale=1.0)
    np.testing.assert_allclose(g, 2 * residual * np.array([3.0, -1.0]))


def test_jacobians_and_hessian_closed_forms() -> None:
    a = np.array([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]], np.float32)
    x = np.array([0.1, -0.4, 0.7], np.float32)

    def f(x):
        return jnp.asarray(a) @ jnp.tanh(x)

    expected = a * (1 - np.tanh(x) ** 2)
    for jac in (ember.jacfwd(f)(x), ember.jacrev(f)(x), ember.jit(ember.jacrev(f))(x)):
        assert jac.shape == (2, 3)
        np.testing.assert_allclose(jac, expected, rtol=1e-5, atol=1e-6)
    hess = ember.hessian(lambda x: jnp.sum(x ** 3))(x)
    np.testing.assert_allclose(hess, np.diag(6 * x), rtol=1e-5, atol=1e-6)


def test_jacobian_pytree_layout_is_output_outside_input_inside() -> None:
    def f(p):
        return {"y": p["a"] * 2.0, "z": jnp.sum(p["b"])}

    p = {"a": jnp.ones(2), "b": jnp.ones((2, 3))}
    for jac_fn in (ember.jacfwd, ember.jacrev):
        jac = jac_fn(f)(p)
        assert jac["y"]["a"].shape == (2, 2) and jac["y"]["b"].shape == (2, 2, 3)
        assert jac["z"]["a"].shape == (2,) and jac["z"]["b"].shape == (2, 3)
        np.testing.assert_allclose(jac["y"]["a"], 2 * np.eye(2))
        np.testing.assert_allclose(jac["z"]["b"], np.ones((2, 3)))


# --- compositions ----------------------------------------------------------------------------------
def _f(x):
    return jnp.sum(jnp.sin(x) * jnp.exp(-x) + x ** 3)


def _f_grad(x):
    return np.cos(x) * np.exp(-x) - np.sin(x) * np.exp(-x) + 3 * x ** 2


def _f_hessian_diag(x):
    return -2 * np.cos(x) * np.exp(-x) + 6 * x


X = np.array([0.3, -0.8, 1.2], np.float32)


@pytest.mark.parametrize("grad_fn", [
    ember.grad(_f), ember.jit(ember.grad(_f)), ember.grad(ember.jit(_f)),
    ember.jit(ember.grad(ember.jit(_f))), lambda x: ember.vjp(ember.jit(_f), x)[1](jnp.asarray(1.0, jnp.float32))[0],
    lambda x: ember.jacrev(_f)(x), lambda x: ember.jacfwd(_f)(x),
], ids=["grad", "jit(grad)", "grad(jit)", "jit(grad(jit))", "vjp(jit)", "jacrev", "jacfwd"])
def test_first_derivative_compositions(grad_fn: Callable) -> None:
    np.testing.assert_allclose(grad_fn(X), _f_grad(X.astype(np.float64)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hessian_fn", [
    ember.jacfwd(ember.jacrev(_f)), ember.jacrev(ember.jacrev(_f)), ember.jacfwd(ember.jacfwd(_f)),
    ember.jacrev(ember.jacfwd(_f)), ember.jit(ember.hessian(_f)), ember.hessian(ember.jit(_f)),
    ember.jacfwd(ember.jit(ember.grad(_f))),
], ids=["jacfwd(jacrev)", "jacrev(jacrev)", "jacfwd(jacfwd)", "jacrev(jacfwd)", "jit(hessian)", "hessian(jit)",
        "jacfwd(jit(grad))"])
def test_second_derivative_compositions(hessian_fn: Callable) -> None:
    np.testing.assert_allclose(hessian_fn(X), np.diag(_f_hessian_diag(X.astype(np.float64))), rtol=1e-4, atol=1e-4)


def test_grad_of_grad_of_grad() -> None:
    third = ember.grad(ember.grad(ember.grad(lambda x: jnp.sin(x) * x)))
    x = 0.7
    np.testing.assert_allclose(third(x), -3 * np.sin(x) - x * np.cos(x), rtol=1e-5)
    np.testing.assert_allclose(ember.jit(third)(x), -3 * np.sin(x) - x * np.cos(x), rtol=1e-5)


def test_grad_with_respect_to_a_closed_over_outer_value() -> None:
    def outer(y):
        return ember.grad(lambda x: jnp.sin(x * y))(1.0)  # d/dx = y cos(x y); d/dy of that

    y = 0.3
    np.testing.assert_allclose(ember.grad(outer)(y), np.cos(y) - y * np.sin(y), rtol=1e-5)


def test_jit_of_grad_is_cached() -> None:
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w))

    step = ember.jit(ember.grad(loss))
    w, x = jnp.ones((3, 2)), jnp.ones((4, 3))
    step(w, x)
    step(w * 2, x)
    assert step.cache_info().traces == 1


def test_grad_with_respect_to_one_argument_does_no_work_for_the_others() -> None:
    """Symbolic zeros: the derivative of sin(y) is never computed when only x is differentiated."""
    def f(x, y):
        return jnp.sum(x * jnp.sin(y))

    jaxpr = ember.make_jaxpr(ember.grad(f, argnums=0))(jnp.ones(3), jnp.ones(3))
    assert "cos" not in str(jaxpr)
    assert "cos" in str(ember.make_jaxpr(ember.grad(f, argnums=1))(jnp.ones(3), jnp.ones(3)))


def test_python_control_flow_on_concrete_primals() -> None:
    def f(x):
        return x * 2.0 if x > 0 else -x * 3.0

    assert float(ember.grad(f)(1.0)) == 2.0 and float(ember.grad(f)(-1.0)) == -3.0
    with pytest.raises(errors.TracerBoolConversionError):
        ember.jit(ember.grad(f))(1.0)


def test_stop_gradient() -> None:
    assert float(ember.grad(lambda x: x * lax.stop_gradient(x))(3.0)) == 3.0
    assert float(ember.jit(ember.grad(lambda x: x * lax.stop_gradient(x)))(3.0)) == 3.0
    tree = lax.stop_gradient({"a": jnp.ones(2), "i": jnp.arange(3)})
    assert tree["i"].dtype == np.int32 and tree["a"].shape == (2,)
    assert "stop_gradient" in str(ember.make_jaxpr(lax.stop_gradient)(1.0))
    np.testing.assert_allclose(lax.stop_gradient(jnp.array([1.0, 2.0])), [1.0, 2.0])


# --- integer inputs and outputs ------------------------------------------------------------------------
def test_vjp_gives_float0_cotangents_for_integer_inputs() -> None:
    y, vjp_fn = ember.vjp(lambda x, i: x * i, 2.0, 3)
    assert float(y) == 6.0
    ct_x, ct_i = vjp_fn(jnp.asarray(1.0))
    assert float(ct_x) == 3.0
    assert ct_i.dtype == float0 and ct_i.shape == ()
    _, vjp_fn = ember.vjp(lambda x, i: x[i], jnp.ones(3), jnp.array([0, 2]))
    assert vjp_fn(jnp.ones(2))[1].shape == (2,) and vjp_fn(jnp.ones(2))[1].dtype == float0


def test_grad_allow_int_and_jvp_with_float0_tangents() -> None:
    g = ember.grad(lambda x, i: x * i, argnums=(0, 1), allow_int=True)(2.0, 3)
    assert float(g[0]) == 3.0 and g[1].dtype == float0
    y, t = ember.jvp(lambda x, i: (x * i, i + 1), (2.0, 3), (1.0, np.zeros((), float0)))
    assert int(y[1]) == 4 and float(t[0]) == 3.0 and t[1].dtype == float0


# --- errors ------------------------------------------------------------------------------------------------
def test_grad_of_integer_input_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"grad requires real- or complex-valued inputs \(input dtype that is a "
                                        r"sub-dtype of np.inexact\), but got int32. If you want to use Boolean- or "
                                        r"integer-valued inputs, use vjp or set allow_int to True."):
        ember.grad(lambda x: x * 1.0)(1)


@pytest.mark.parametrize("fun, message", [
    (lambda x: x * jnp.ones(3), r"Gradient only defined for scalar-output functions. Output had shape: \(3,\)."),
    (lambda x: (x, x), r"Gradient only defined for scalar-output functions. Output was"),
    (lambda x: (x > 0).astype(jnp.int32), r"grad requires real-valued outputs .* but got int32"),
])
def test_grad_needs_a_real_scalar_output(fun: Callable, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        ember.grad(fun)(1.0)


def test_argnums_out_of_range() -> None:
    with pytest.raises(TypeError, match=r"argnums=\(2,\) requires at least 3 positional arguments"):
        ember.grad(lambda x, y: x * y, argnums=2)(1.0, 2.0)


def test_jvp_argument_checks() -> None:
    with pytest.raises(TypeError, match="must be tuples or lists"):
        ember.jvp(jnp.sin, 1.0, 1.0)
    with pytest.raises(TypeError, match="same tree structure"):
        ember.jvp(lambda x, y: x, (1.0, 2.0), (1.0,))
    with pytest.raises(TypeError, match="dtypes must be equal.*expected tangent dtype float32, but got tangent "
                                        "dtype int32"):
        ember.jvp(jnp.sin, (1.0,), (jnp.array(1),))
    with pytest.raises(TypeError, match="tangent dtype must be float0"):
        ember.jvp(lambda i: i * 2, (3,), (3,))
    with pytest.raises(ValueError, match="different primal and tangent shapes"):
        ember.jvp(jnp.sin, (jnp.ones(3),), (jnp.ones(2),))


def test_vjp_cotangent_checks() -> None:
    _, vjp_fn = ember.vjp(jnp.sin, jnp.ones(3))
    with pytest.raises(ValueError, match="Shape of cotangent input"):
        vjp_fn(jnp.ones(2))
    with pytest.raises(TypeError, match="Tree structure of cotangent input"):
        vjp_fn((jnp.ones(3),))


def test_missing_rules_are_reported_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    no_rules = Primitive("no_rules")
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'no_rules' not implemented"):
        ember.jvp(no_rules.bind, (1.0,), (1.0,))
    # A jvp rule that applies a non-linear operation to the tangent cannot be transposed.
    monkeypatch.setitem(jvp_rules, no_rules, lambda primals, tangents: (primals[0], lax.integer_pow(tangents[0], 3)))
    with pytest.raises(NotImplementedError, match="Transpose rule .* for 'integer_pow' not implemented"):
        ember.grad(no_rules.bind)(1.0)


def test_escaped_tracer_is_reported() -> None:
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2

    ember.grad(f)(1.0)
    with pytest.raises(errors.UnexpectedTracerError):
        leaked[0] + 1
    with pytest.raises(errors.UnexpectedTracerError):
        bool(leaked[0])


# --- rule coverage --------------------------------------------------------------------------------------------
# Primitives that jvp rules apply to tangents: the linear programs that reverse mode transposes
# consist of these (plus the calls and control flow holding them). Their trait records say so.
LINEAR = {p.name for p in traits.LINEAR}
# Primitives that never see a tangent: no operands, or only ever created by differentiation itself
# or by a backend after it (the CPU backend's convolutions and windowed reductions: sliding_windows).
NO_JVP = {"iota", "custom_vjp_lin", "fusion", "sliding_windows"}
# LAPACK's intermediate forms, which JAX does not differentiate either (its error is ember's):
# Householder reflectors (geqrf, geqp3, householder_product), the Schur and Hessenberg forms.
NO_JVP |= {"geqrf", "geqp3", "householder_product", "schur", "hessenberg"}


def test_every_primitive_has_a_jvp_rule() -> None:
    missing = sorted(p.name for p in abstract_eval_rules if p not in jvp_rules and p.name not in NO_JVP)
    assert not missing, f"primitives without a jvp rule (add one in ember/transforms/rules): {missing}"


def test_every_linear_primitive_has_a_transpose_rule() -> None:
    names = {p.name: p for p in abstract_eval_rules}
    assert LINEAR <= set(names), f"unknown primitives listed: {sorted(LINEAR - set(names))}"
    assert {"add", "mul", "dot_general", "conv_general_dilated", "scan", "cumsum", "scatter-add"} <= LINEAR
    assert not {"exp", "max", "cummax", "scatter-max", "argmax"} & LINEAR
    missing = sorted(n for n in LINEAR if names[n] not in transpose_rules)
    assert not missing, f"linear primitives without a transpose rule: {missing}"
    undeclared = sorted(p.name for p in transpose_rules if p in traits.traits and not traits.traits[p].linear)
    assert not undeclared, f"primitives with a transpose rule whose trait record is not linear: {undeclared}"


def test_every_higher_order_primitive_splits_under_partial_evaluation() -> None:
    replaced_by_their_jvp = {"custom_jvp_call", "custom_vjp_call", "fusion"}
    missing = sorted(p.name for p in higher_order
                     if p not in partial_eval_rules and p.name not in replaced_by_their_jvp)
    assert not missing, f"higher-order primitives without a partial evaluation rule: {missing}"
    assert jit_p in partial_eval_rules


# --- end to end: train a classifier -------------------------------------------------------------------------------
def _blobs(rng: np.random.Generator, n_per_class: int) -> tuple[np.ndarray, np.ndarray]:
    centers = np.array([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]])
    points = np.concatenate([c + 0.6 * rng.normal(size=(n_per_class, 2)) for c in centers])
    labels = np.repeat(np.arange(3), n_per_class).astype(np.int32)
    return points.astype(np.float32), labels


def test_mlp_classifier_trains_to_high_accuracy() -> None:
    rng = np.random.default_rng(0)
    x, labels = _blobs(rng, 100)
    params = [{"w": jnp.asarray(rng.normal(size=(2, 16)).astype(np.float32)), "b": jnp.zeros(16)},
              {"w": jnp.asarray(0.3 * rng.normal(size=(16, 3)).astype(np.float32)), "b": jnp.zeros(3)}]

    def predict(params, x):
        hidden = jnp.tanh(x @ params[0]["w"] + params[0]["b"])
        return hidden @ params[1]["w"] + params[1]["b"]

    def loss(params, x, labels):
        return -jnp.mean(jnp.sum(nn.log_softmax(predict(params, x)) * nn.one_hot(labels, 3), axis=-1))

    step = ember.jit(ember.value_and_grad(loss))
    losses = []
    for _ in range(150):
        value, grads = step(params, x, labels)
        params = tree_util.tree_map(lambda p, g: p - 0.5 * g, params, grads)
        losses.append(float(value))
    accuracy = np.mean(np.argmax(np.asarray(predict(params, x)), axis=-1) == labels)
    assert losses[-1] < 0.25 * losses[0]
    assert accuracy >= 0.95, accuracy
    assert step.cache_info().traces == 1
