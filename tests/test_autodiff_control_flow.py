"""Derivatives through structured control flow: cond and switch, scan (and fori_loop with static
bounds, and map), forward and reverse; while_loop in forward mode, with a clear error in reverse
mode. Checked in float64 against finite differences and the transpose identity, eagerly and
under jit."""
from __future__ import annotations

import numpy as np
import pytest
from test_autodiff import check_grads

import ember
import ember.numpy as jnp
from ember import lax
from ember.dtypes import float0

RNG = np.random.default_rng(7)


# --- cond / switch ----------------------------------------------------------------------------------
def _piecewise(x, y):
    return lax.cond(jnp.sum(x) > 0, lambda a, b: (jnp.sin(a) * b, b), lambda a, b: (a ** 2, b * 3.0), x, y)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_both_branches(sign: float, x64: None) -> None:
    x = sign * RNG.uniform(0.5, 1.5, 3)
    check_grads(_piecewise, [x, RNG.normal(size=3)], order=2)


def test_cond_under_jit_and_with_a_branch_that_ignores_its_operand(x64: None) -> None:
    def f(x):
        return lax.cond(x[0] > 0, lambda a: jnp.sum(a ** 3), lambda a: jnp.asarray(2.0, a.dtype), x)

    x = jnp.asarray([0.5, 1.5])
    np.testing.assert_allclose(ember.jit(ember.grad(f))(x), 3 * np.asarray(x) ** 2)
    np.testing.assert_allclose(ember.grad(ember.jit(f))(-x), [0.0, 0.0])
    check_grads(f, [np.asarray(x)])


def test_cond_closing_over_an_outer_value(x64: None) -> None:
    def f(w, x):
        return lax.cond(x > 0, lambda v: jnp.tanh(w * v), lambda v: w ** 2 * v, x)

    for x in (0.7, -0.7):
        check_grads(f, [1.3, x], order=2)


def test_switch(x64: None) -> None:
    branches = [lambda a: jnp.sum(a), lambda a: jnp.sum(a ** 3), lambda a: jnp.sum(jnp.exp(a) * a)]
    x = RNG.normal(size=3)
    for index in (0, 1, 2, 7):
        check_grads(lambda x, i=index: lax.switch(i, branches, x), [x])
        g = ember.jit(ember.grad(lambda x, i: lax.switch(i, branches, x)))(jnp.asarray(x), index)
        np.testing.assert_allclose(g, ember.grad(branches[min(index, 2)])(jnp.asarray(x)), rtol=1e-12)


# --- scan -----------------------------------------------------------------------------------------------
def _rnn(w, h0, xs):
    def step(h, x):
        h = jnp.tanh(w @ h + x)
        return h, jnp.sum(h ** 2)

    h, ys = lax.scan(step, h0, xs)
    return jnp.sum(h) + jnp.sum(ys)


def test_scan_rnn_with_closed_over_weights(x64: None) -> None:
    check_grads(_rnn, [0.5 * RNG.normal(size=(3, 3)), RNG.normal(size=3), RNG.normal(size=(4, 3))], order=2)


def test_scan_residuals_of_loop_invariant_operands_are_not_stacked() -> None:
    """The weights are a residual of every step; the reverse scan reads them once, unstacked."""
    jaxpr = str(ember.make_jaxpr(ember.grad(_rnn))(jnp.ones((3, 3)), jnp.ones(3), jnp.ones((5, 3))))
    assert jaxpr.count("scan[") == 2 and "f32[5,3,3]" not in jaxpr


def test_scan_under_jit_matches_eager(x64: None) -> None:
    args = [jnp.asarray(0.5 * RNG.normal(size=(3, 3))), jnp.asarray(RNG.normal(size=3)),
            jnp.asarray(RNG.normal(size=(5, 3)))]
    eager = ember.grad(_rnn, argnums=(0, 1, 2))(*args)
    for jitted in (ember.jit(ember.grad(_rnn, argnums=(0, 1, 2)))(*args),
                   ember.grad(ember.jit(_rnn), argnums=(0, 1, 2))(*args)):
        for e, j in zip(eager, jitted):
            np.testing.assert_allclose(j, e, rtol=1e-12, atol=1e-12)


def test_scan_reverse_pytrees_and_integer_carry(x64: None) -> None:
    def f(scale, xs):
        def step(carry, x):
            count, total = carry
            total = {"a": total["a"] * x["u"] + scale, "b": total["b"] + jnp.sin(x["v"] * count)}
            return (count + 1, total), total["a"] * total["b"]

        (_, total), ys = lax.scan(step, (0, {"a": 1.0, "b": 0.5}), xs, reverse=True)
        return total["a"] + total["b"] + jnp.sum(ys)

    xs = {"u": RNG.uniform(0.5, 1.0, 4), "v": RNG.normal(size=4)}
    check_grads(f, [0.3, xs], order=2)


def test_scan_carry_tangent_that_appears_after_some_steps(x64: None) -> None:
    """The tangent of ``a`` is zero at first and nonzero from step 2 on (a fixpoint over the body)."""
    def f(x):
        (a, b), _ = lax.scan(lambda c, _: ((c[1], c[0] * x), None), (1.0, 1.0), None, length=5)
        return a + b

    check_grads(f, [0.7], order=2)


def test_nested_scans_and_cond_inside_scan(x64: None) -> None:
    def f(x):
        def outer(c, xi):
            inner, _ = lax.scan(lambda d, _: (d * xi + jnp.sin(d), None), c, None, length=3)
            return lax.cond(inner > 0, lambda v: v * 0.5, lambda v: -v, inner), inner

        c, ys = lax.scan(outer, 0.3, x)
        return c + jnp.sum(ys ** 2)

    check_grads(f, [RNG.uniform(-0.8, 0.8, 4)])


def test_jit_inside_a_scan_body(x64: None) -> None:
    cell = ember.jit(lambda h, x: jnp.tanh(h * x + 1.0))

    def f(xs):
        h, _ = lax.scan(lambda h, x: (cell(h, x), None), 0.2, xs)
        return h

    check_grads(f, [RNG.normal(size=4)], order=2)


def test_empty_scan_has_zero_derivative() -> None:
    g = ember.grad(lambda x: lax.scan(lambda c, xi: (c * xi, None), 1.0, x)[0])(jnp.zeros(0))
    assert g.shape == (0,)


def test_fori_loop_with_static_bounds_is_reverse_differentiable(x64: None) -> None:
    def f(x):
        return lax.fori_loop(0, 4, lambda i, c: c * x + i, x)

    check_grads(f, [0.8], order=2)
    assert "scan" in str(ember.make_jaxpr(ember.grad(f))(0.8))


def test_map(x64: None) -> None:
    check_grads(lambda xs: lax.map(lambda x: jnp.sin(x) * jnp.sum(x), xs), [RNG.normal(size=(3, 2))])


# --- while_loop: forward mode only -----------------------------------------------------------------------
def _doubling(x):
    """Multiply by x until the value exceeds 10 (the trip count depends on x)."""
    return lax.while_loop(lambda c: c[1] < 10.0, lambda c: (c[0] + 1, c[1] * x), (0, x))[1]


def test_while_loop_forward_mode(x64: None) -> None:
    check_grads(_doubling, [1.7], modes=("fwd",), order=2)
    y, tangent = ember.jvp(_doubling, (1.7,), (1.0,))
    n = 5  # 1.7 ** 5 > 10
    np.testing.assert_allclose(y, 1.7 ** n)
    np.testing.assert_allclose(tangent, n * 1.7 ** (n - 1))
    np.testing.assert_allclose(ember.jacfwd(_doubling)(1.7), tangent)
    np.testing.assert_allclose(ember.jit(lambda x: ember.jvp(_doubling, (x,), (1.0,))[1])(1.7), tangent)
    y_again, f_jvp = ember.linearize(_doubling, 1.7)
    np.testing.assert_allclose(y_again, y)
    np.testing.assert_allclose(f_jvp(1.0), tangent)


def test_while_loop_reverse_mode_is_a_clear_error() -> None:
    message = ("Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with dynamic "
               "start/stop values. Try using lax.scan, or using fori_loop with static start/stop.")
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        ember.grad(_doubling)(1.7)
    traced_bounds = ember.jit(lambda x, n: lax.fori_loop(0, n, lambda i, c: c * x, x))  # a while loop
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        ember.grad(traced_bounds)(1.5, 3)
    np.testing.assert_allclose(ember.jvp(traced_bounds, (1.5, 3), (1.0, np.zeros((), float0)))[1],
                               4 * 1.5 ** 3)


def test_while_loop_not_depending_on_the_input_is_fine_in_reverse_mode() -> None:
    def f(x):
        n = lax.while_loop(lambda i: i < 3, lambda i: i + 1, 0)
        return x * n.astype(jnp.float32)

    assert float(ember.grad(f)(2.0)) == 3.0
