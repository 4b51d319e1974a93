"""JAX's tutorial "Just In Time Compilation with JAX", with only the imports changed."""
from functools import partial

import numpy as np
import pytest

import ember as jax
import ember.numpy as jnp
from ember import lax


def test_make_jaxpr_of_log2_and_side_effects():
    global_list = []

    def log2(x):
        global_list.append(x)
        ln_x = jnp.log(x)
        ln_2 = jnp.log(2.0)
        return ln_x / ln_2

    text = str(jax.make_jaxpr(log2)(3.0))
    assert text == ("{ lambda ; a:f32[]. let\n"
                    "    b:f32[] = log a\n"
                    "    c:f32[] = log 2.0:f32[]\n"
                    "    d:f32[] = div b c\n"
                    "  in (d,) }")
    assert len(global_list) == 1  # the side effect ran once, during tracing, on a tracer
    assert repr(global_list[0]) == "JitTracer(~float32[])"  # (JAX 0.10: a weakly typed float32 scalar)


def test_print_inside_trace_shows_a_tracer(capsys):
    def log2_with_print(x):
        print("printed x:", x)
        return jnp.log(x) / jnp.log(2.0)

    jax.make_jaxpr(log2_with_print)(3.0)
    assert "printed x: JitTracer(~float32[])" in capsys.readouterr().out


def test_python_control_flow_on_static_attributes():
    def log2_if_rank_2(x):
        if x.ndim == 2:
            ln_x = jnp.log(x)
            ln_2 = jnp.log(2.0)
            return ln_x / ln_2
        else:
            return x

    assert str(jax.make_jaxpr(log2_if_rank_2)(jax.numpy.array([1, 2, 3]))) == \
        "{ lambda ; a:i32[3]. let  in (a,) }"


def selu(x, alpha=1.67, lambda_=1.05):
    return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)


def test_selu_eager_and_jit_agree():
    x = jnp.arange(1000000)
    eager = selu(x).block_until_ready()
    selu_jit = jax.jit(selu)
    compiled = selu_jit(x).block_until_ready()
    assert eager.dtype == compiled.dtype == jnp.float32
    xs = np.arange(1000000)
    with np.errstate(over="ignore"):
        expected = 1.05 * np.where(xs > 0, xs, 1.67 * np.exp(xs.astype(np.float32)) - 1.67)
    np.testing.assert_allclose(np.asarray(compiled), expected, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(compiled))


def test_value_dependent_if_fails_with_a_clear_error():
    def f(x):
        if x > 0:
            return x
        else:
            return 2 * x

    with pytest.raises(jax.errors.TracerBoolConversionError) as info:
        jax.jit(f)(10)
    message = str(info.value)
    assert "`x`" in message and "static_argnames" in message and "lax.cond" in message
    assert "if x > 0:" in message  # the user's line
    assert isinstance(info.value, jax.errors.ConcretizationTypeError)
    assert isinstance(info.value, TypeError)


def test_value_dependent_while_fails():
    def g(x, n):
        i = 0
        while i < n:
            i += 1
        return x + i

    with pytest.raises(jax.errors.ConcretizationTypeError, match="`n`"):
        jax.jit(g)(10, 20)


def test_jitted_inner_body_in_a_python_loop():
    @jax.jit
    def loop_body(prev_i):
        return prev_i + 1

    def g_inner_jitted(x, n):
        i = 0
        while i < n:
            i = loop_body(i)
        return x + i

    out = g_inner_jitted(10, 20)
    assert out == 30
    assert out.dtype == jnp.int32 and out.weak_type


def test_static_argnums_and_argnames():
    def f(x):
        if x > 0:
            return x
        else:
            return 2 * x

    f_jit_correct = jax.jit(f, static_argnums=0)
    assert f_jit_correct(10) == 10

    def g(x, n):
        i = 0
        while i < n:
            i += 1
        return x + i

    g_jit_correct = jax.jit(g, static_argnames=["n"])
    assert g_jit_correct(10, 20) == 30


def test_partial_jit_decorator_with_static_argnames():
    @partial(jax.jit, static_argnames=["n"])
    def g_jit_decorated(x, n):
        i = 0
        while i < n:
            i += 1
        return x + i

    assert g_jit_decorated(10, 20) == 30


def test_lax_cond_fixes_the_value_dependent_if():
    @jax.jit
    def f(x):
        return lax.cond(x > 0, lambda x: x, lambda x: 2 * x, x)

    assert f(10) == 10
    assert f(-3) == -6


def test_jit_of_the_same_function_in_a_loop_reuses_the_cache():
    traces = []

    def unjitted_loop_body(prev_i):
        traces.append(1)
        return prev_i + 1

    def g_inner_jitted_normal(x, n):
        i = 0
        while i < n:
            i = jax.jit(unjitted_loop_body)(i)
        return x + i

    assert g_inner_jitted_normal(10, 20) == 30
    assert len(traces) == 1
