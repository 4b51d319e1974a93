"""Host callbacks and JAX's top-level utilities: ``ember.debug.print`` / ``callback`` (run-time
effects that survive the compiler and every transformation), ``ember.pure_callback``,
``ember.checkpoint`` / ``remat``, ``device_get``, ``default_backend``,
``ensure_compile_time_eval`` and ``named_call``."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from util import assert_allclose

import ember
import ember.numpy as jnp
from ember import errors, lax
from ember.callbacks import pure_callback_p
from ember.compiler import optimize
from ember.debug import debug_print_p


def printed(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def count_eqns(closed, primitive) -> int:
    return sum(e.primitive is primitive for e in closed.eqns)


# --- debug.print / debug.callback: eagerly ----------------------------------------------------------
def test_print_eagerly_formats_at_once(capsys):
    x = jnp.arange(3.0)
    ember.debug.print("x = {}, n = {n}", x, n=jnp.int32(7))
    ember.debug.print("{v:.3f}|{w}", v=jnp.float32(1.23456), w="static text")
    ember.debug.print(ordered=True)("two-call {}", 1)
    ember.debug.print("no placeholders", x, 2, skip_format_check=True)
    assert printed(capsys) == ["x = [0. 1. 2.], n = 7", "1.235|static text", "two-call 1",
                               "no placeholders [0. 1. 2.] 2"]


def test_print_uses_numpy_print_options_of_the_call(capsys):
    with np.printoptions(precision=2):
        ember.debug.print("{}", jnp.asarray([1 / 3, 2 / 3]))
    assert printed(capsys) == ["[0.33 0.67]"]


def test_print_checks_the_format_against_the_arguments():
    with pytest.raises(ValueError, match=r"Unused positional arguments to `ember.debug.print`: \[2\]"):
        ember.debug.print("{}", 1, 2)
    with pytest.raises(ValueError, match="Unused keyword arguments to `ember.debug.print`: \\['y'\\]. You may be "
                                         "passing an f-string"):
        ember.debug.print("x", y=1)
    with pytest.raises(TypeError, match="unexpected arguments in the two-call form"):
        ember.debug.print(None, 1)


def test_callback_receives_arrays_and_static_leaves_unchanged():
    seen = []
    ember.debug.callback(lambda a, tag, *, b: seen.append((a, tag, b)), np.ones(2), "tag", b={"k": 3.0, "none": None})
    [(a, tag, b)] = seen
    assert isinstance(a, ember.Array) and a.dtype == np.float32 and a.shape == (2,)
    assert tag == "tag" and b["none"] is None and isinstance(b["k"], ember.Array) and float(b["k"]) == 3.0
    with pytest.raises(TypeError, match="first argument to ember.debug.callback must be callable, but got an "
                                        "object of type int"):
        ember.debug.callback(3)


# --- under jit: at run time, every call, through the compiler -----------------------------------------
def test_jit_prints_at_every_call_and_compiles_once(capsys):
    @ember.jit
    def f(x):
        y = jnp.abs(x) * 2.0  # a fused intermediate: the print needs it materialized
        ember.debug.print("y = {}", y)
        return y + 1.0

    x = jnp.asarray([0.0, -0.5])
    assert printed(capsys) == []
    out1, out2 = f(x), f(x + 1.0)
    expected = [np.float32([0.0, 1.0]), np.float32([2.0, 1.0])]
    assert printed(capsys) == ["y = [0. 1.]", "y = [2. 1.]"]
    assert_allclose(out1, expected[0] + 1)
    assert_allclose(out2, expected[1] + 1)
    info = f.cache_info()
    assert (info.traces, info.compiles) == (1, 1)


def test_make_jaxpr_stages_the_callback_without_running_it(capsys):
    closed = ember.make_jaxpr(lambda x: (ember.debug.print("{}", x), x)[1])(jnp.ones(2))
    assert printed(capsys) == []
    assert count_eqns(closed, debug_print_p) == 1
    assert "debug_print[\n      fmt={}\n      has_placeholders=True\n" in str(closed)  # (JAX's printing)


def test_compiler_never_drops_merges_or_folds_the_callback(capsys):
    def f(x):
        unused = x * 3.0
        ember.debug.print("v {}", unused)
        ember.debug.print("v {}", unused)
        ember.debug.print("c {}", 5)  # constant operands: still a run-time effect
        return x

    closed = optimize(ember.make_jaxpr(f)(jnp.ones(2)))
    assert count_eqns(closed, debug_print_p) == 3
    jitted = ember.jit(f)
    jitted(jnp.ones(2))
    jitted(jnp.ones(2))
    assert printed(capsys) == ["v [3. 3.]", "v [3. 3.]", "c 5"] * 2


def test_cpu_backend_runs_callbacks_as_steps_and_loops_holding_them_natively(capsys):
    """A callback in a loop body is a host call: the loop stays native and calls it back."""
    from ember.backends.cpu import compile_program

    def f(x):
        ember.debug.print("{}", x)
        return lax.fori_loop(0, 3, _counting_body, x * 2.0)

    _, report = compile_program(ember.make_jaxpr(f)(1.0), "f")
    assert report.fallbacks == ["debug_print"] and report.loops and report.host_calls == ["debug_print"]
    assert float(ember.jit(f)(jnp.float32(1.0))) == 5.0
    assert printed(capsys) == ["1.0", "i=0 carry=2.0", "i=1 carry=3.0", "i=2 carry=4.0"]


def test_an_exception_in_a_host_call_of_a_native_loop_is_raised_after_it():
    calls = []

    def fails_at_two(i):
        calls.append(int(i))
        if i == 2:
            raise ValueError("callback failed at 2")
        return np.int32(i)

    def f(x):
        return lax.fori_loop(0, 5, lambda i, c: c + ember.pure_callback(fails_at_two, jax_struct(), i), x)
    with pytest.raises(ember.errors.JaxRuntimeError, match="callback failed at 2") as raised:
        ember.jit(f)(jnp.int32(0))
    assert isinstance(raised.value.__cause__, ValueError)
    assert calls == [0, 1, 2]  # (after the error, the loop's other host calls do nothing)


def jax_struct():
    return ember.ShapeDtypeStruct((), np.int32)


def test_callback_without_outputs_in_a_function_returning_nothing(capsys):
    seen = []
    f = ember.jit(lambda x: ember.debug.callback(seen.append, x))
    assert f(jnp.arange(2)) is None and f(jnp.arange(2) + 5) is None
    assert [a.tolist() for a in seen] == [[0, 1], [5, 6]]


# --- inside control flow: once per iteration, with that iteration's values --------------------------
def _counting_body(i, carry):
    ember.debug.print("i={} carry={}", i, carry)
    return carry + 1.0


@pytest.mark.parametrize("jitted", [False, True])
def test_fori_loop_prints_once_per_iteration(capsys, jitted):
    run = lambda c: lax.fori_loop(0, 3, _counting_body, c)  # noqa: E731
    out = (ember.jit(run) if jitted else run)(jnp.float32(10.0))
    assert float(out) == 13.0
    assert printed(capsys) == ["i=0 carry=10.0", "i=1 carry=11.0", "i=2 carry=12.0"]


def test_fori_loop_with_traced_bounds_prints_once_per_iteration(capsys):
    f = ember.jit(lambda n, c: lax.fori_loop(0, n, _counting_body, c))
    f(2, jnp.float32(0.0))
    f(3, jnp.float32(5.0))
    assert printed(capsys) == ["i=0 carry=0.0", "i=1 carry=1.0", "i=0 carry=5.0", "i=1 carry=6.0", "i=2 carry=7.0"]


def test_while_loop_condition_and_body_print(capsys):
    def cond(c):
        ember.debug.print("cond {}", c)
        return c < 2

    def body(c):
        ember.debug.print("body {}", c)
        return c + 1

    assert int(ember.jit(lambda c: lax.while_loop(cond, body, c))(0)) == 2
    assert printed(capsys) == ["cond 0", "body 0", "cond 1", "body 1", "cond 2"]


@pytest.mark.parametrize("jitted", [False, True])
def test_scan_prints_once_per_step(capsys, jitted):
    def step(carry, x):
        ember.debug.print("carry={} x={}", carry, x)
        return carry + x, carry * x

    run = lambda xs: lax.scan(step, 1.0, xs, reverse=True)  # noqa: E731
    carry, ys = (ember.jit(run) if jitted else run)(jnp.asarray([1.0, 2.0, 3.0]))
    assert float(carry) == 7.0
    assert_allclose(ys, np.float32([6.0, 8.0, 3.0]))
    assert printed(capsys) == ["carry=1.0 x=3.0", "carry=4.0 x=2.0", "carry=6.0 x=1.0"]


@pytest.mark.parametrize("jitted", [False, True])
def test_cond_prints_in_the_branch_taken_only(capsys, jitted):
    def f(p, x):
        return lax.cond(p, lambda v: (ember.debug.print("true {}", v), v + 1)[1],
                        lambda v: (ember.debug.print("false {}", v), v - 1)[1], x)

    run = ember.jit(f) if jitted else f
    run(True, 1.0)
    run(False, 2.0)
    assert printed(capsys) == ["true 1.0", "false 2.0"]


# --- under vmap, grad, jvp --------------------------------------------------------------------------
def test_vmap_calls_once_per_example_in_order(capsys):
    def f(x, y):
        ember.debug.print("x={} y={}", x, y)
        return x * y

    out = ember.vmap(f, in_axes=(1, None))(jnp.asarray([[1.0, 2.0], [3.0, 4.0]]), 10.0)
    assert_allclose(out, np.float32([[10.0, 30.0], [20.0, 40.0]]))
    assert printed(capsys) == ["x=[1. 3.] y=10.0", "x=[2. 4.] y=10.0"]


def test_vmap_of_unbatched_values_calls_once(capsys):
    ember.vmap(lambda x, y: (ember.debug.print("{}", y), x)[1], in_axes=(0, None))(jnp.ones(3), 7)
    assert printed(capsys) == ["7"]


def test_vmap_of_a_jitted_scan_prints_each_example_per_step(capsys):
    def total(xs):
        def step(c, x):
            ember.debug.print("{} {}", c, x)
            return c + x, None

        return lax.scan(step, 0.0, xs)[0]

    out = ember.jit(ember.vmap(total))(jnp.asarray([[1.0, 2.0], [10.0, 20.0]]))
    assert_allclose(out, np.float32([3.0, 30.0]))
    assert printed(capsys) == ["0.0 1.0", "0.0 10.0", "1.0 2.0", "10.0 20.0"]


@pytest.mark.parametrize("jitted", [False, True])
def test_grad_prints_primal_values_once(capsys, jitted):
    def f(x):
        y = jnp.sin(x)
        ember.debug.print("x={} y={}", x, y)
        return y * x

    g = ember.grad(f)
    out = (ember.jit(g) if jitted else g)(2.0)
    assert_allclose(out, np.float32(np.cos(2.0) * 2.0 + np.sin(2.0)), rtol=1e-5)
    assert printed(capsys) == [f"x=2.0 y={np.sin(np.float32(2.0))}"]


def test_grad_through_scan_prints_once_per_step(capsys):
    def f(c0):
        def step(c, x):
            ember.debug.print("c={}", c)
            return c * x, None

        return lax.scan(step, c0, jnp.asarray([2.0, 3.0]))[0]

    assert float(ember.grad(f)(1.0)) == 6.0
    assert printed(capsys) == ["c=1.0", "c=2.0"]


def test_jvp_prints_primal_values(capsys):
    out, tangent = ember.jvp(lambda x: (ember.debug.print("{}", x), x * x)[1], (3.0,), (1.0,))
    assert (float(out), float(tangent)) == (9.0, 6.0)
    assert printed(capsys) == ["3.0"]


# --- pure_callback ---------------------------------------------------------------------------------
def _like(x):
    return ember.ShapeDtypeStruct(x.shape, x.dtype)


def _host_sin(x):
    return np.sin(np.asarray(x))


def test_pure_callback_matches_numpy_eagerly_and_under_jit():
    x = np.linspace(-2, 2, 7, dtype=np.float32)

    def f(x):
        return ember.pure_callback(_host_sin, _like(x), x) * 2.0

    eager, jitted = f(jnp.asarray(x)), ember.jit(f)(jnp.asarray(x))
    assert_allclose(eager, np.sin(x) * 2)
    assert_allclose(jitted, np.sin(x) * 2)


def test_pure_callback_pytrees_kwargs_and_float64_results():
    def host(a, *, b):
        a, b = np.asarray(a), np.asarray(b)
        return {"sum": (a + b).astype(np.float64), "count": np.int32(a.size)}  # float64 -> declared float32

    shapes = {"sum": ember.ShapeDtypeStruct((3,), np.float32), "count": ember.ShapeDtypeStruct((), np.int32)}
    out = ember.jit(lambda a, b: ember.pure_callback(host, shapes, a, b=b))(jnp.arange(3.0), 1.0)
    assert_allclose(out["sum"], np.float32([1, 2, 3]))
    assert_allclose(out["count"], np.int32(3))


def test_pure_callback_is_not_called_when_its_result_is_unused():
    calls = []

    def host(x):
        calls.append(1)
        return np.asarray(x)

    def f(x):
        return (ember.pure_callback(host, _like(x), x), x + 1)[1]

    assert count_eqns(optimize(ember.make_jaxpr(f)(jnp.ones(2))), pure_callback_p) == 0
    assert_allclose(ember.jit(f)(jnp.ones(2)), np.float32([2, 2]))
    assert calls == []  # (on every backend: the reference interpreter runs a program's live part too)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_an_unused_pure_callback_never_runs_on_any_backend_or_tier(backend):
    calls = []

    def host(x):
        calls.append(1)
        return np.asarray(x)

    def f(x):
        ember.pure_callback(host, _like(x), x, vmap_method="sequential")
        return x + 1

    def large(x):  # enough equations for a tiered compile: the first calls run on the reference tier
        ember.pure_callback(host, _like(x), x)
        for i in range(40):
            x = jnp.sin(x) * 1.1 + i
        return x

    def kept(x):  # effects stay where the reference interpreter runs, as in JAX
        ember.io_callback(lambda v: calls.append("io"), None, x)
        ember.debug.callback(lambda v: calls.append("debug"), x)
        return x + 1

    with ember.config.override(backend=backend, tiered_compilation=True):
        x = jnp.ones(3)
        ember.jit(f)(x)
        ember.jit(ember.vmap(f))(jnp.ones((2, 3)))
        ember.vmap(ember.jit(f))(jnp.ones((2, 3)))  # (a jit call bound eagerly after vmap)
        ember.jit(lambda x: lax.scan(lambda c, _: (f(c), None), x, None, length=3))(x)
        ember.jit(lambda x: lax.cond(True, f, lambda v: v, x))(x)
        ember.jit(lambda x: lax.fori_loop(0, 2, lambda i, c: f(c), x))(x)
        ember.jit(lambda x: ember.jit(f)(x))(x)
        big = ember.jit(large)
        for _ in range(3):
            big(jnp.ones(1000))
        assert calls == []
        ember.jit(kept)(x)
        assert calls == ["io", "debug"]
    ember.wait_for_compiles()


def test_pure_callback_result_type_errors():
    x = jnp.arange(3.0)
    with pytest.raises(RuntimeError, match=r"pure_callback: incorrect output shape for return value #0 of the "
                                           r"callback `_host_sin`: expected \(2,\), got \(3,\)"):
        ember.jit(lambda v: ember.pure_callback(_host_sin, ember.ShapeDtypeStruct((2,), np.float32), v))(x)
    with pytest.raises(RuntimeError, match="incorrect output dtype for return value #0 of the callback `_host_sin`: "
                                           "expected int32, got float32"):
        ember.pure_callback(_host_sin, ember.ShapeDtypeStruct((3,), np.int32), x)
    with pytest.raises(RuntimeError, match="the callback `_host_sin` returned 1 arrays, but result_shape_dtypes "
                                           "declares 2"):
        ember.pure_callback(_host_sin, (_like(x), _like(x)), x)
    with pytest.raises(ValueError, match="result_shape_dtypes cannot specify 64-bit types"):
        ember.pure_callback(_host_sin, np.zeros(3), x)
    with pytest.raises(TypeError, match="result_shape_dtypes must be a pytree of objects with .shape and .dtype"):
        ember.pure_callback(_host_sin, "f32[3]", x)


def test_pure_callback_cannot_be_differentiated():
    with pytest.raises(ValueError, match="^Pure callbacks do not support JVP. Please use `ember.custom_jvp` to use "
                                         "callbacks while taking gradients."):
        ember.grad(lambda v: ember.pure_callback(_host_sin, _like(v), v))(1.0)
    # A callback on values that are not differentiated is fine.
    g = ember.grad(lambda v, c: v * ember.pure_callback(_host_sin, _like(c), c))(2.0, jnp.float32(0.5))
    assert_allclose(g, np.sin(np.float32(0.5)))


def test_pure_callback_with_a_custom_jvp_is_differentiable():
    @ember.custom_jvp
    def host_sin(x):
        return ember.pure_callback(_host_sin, _like(x), x)

    host_sin.defjvp(lambda primals, tangents: (host_sin(primals[0]), jnp.cos(primals[0]) * tangents[0]))
    assert_allclose(ember.jit(ember.grad(host_sin))(0.5), np.cos(np.float32(0.5)))


def _recording(shapes: list):
    def host(x, y):
        shapes.append((np.shape(x), np.shape(y)))
        return np.asarray(x) + np.asarray(y)
    return host


@pytest.mark.parametrize("method,calls", [
    ("sequential", [((), ())] * 4), ("sequential_unrolled", [((), ())] * 4),
    ("expand_dims", [((4,), (1,))]), ("broadcast_all", [((4,), (4,))]), ("legacy_vectorized", [((4,), ())])])
def test_pure_callback_vmap_methods(method, calls):
    shapes: list = []

    def f(x, y):
        return ember.pure_callback(_recording(shapes), _like(x), x, y, vmap_method=method)

    x = jnp.arange(4.0)
    out = ember.vmap(f, in_axes=(0, None))(x, jnp.float32(1.0))
    assert_allclose(out, np.arange(4.0, dtype=np.float32) + 1)
    assert shapes == calls
    jitted = ember.jit(ember.vmap(f, in_axes=(0, None)))
    assert_allclose(jitted(x, jnp.float32(1.0)), np.arange(1.0, 5.0, dtype=np.float32))


def test_pure_callback_vmap_batch_axis_is_moved_to_the_front():
    f = lambda x: ember.pure_callback(_host_sin, _like(x), x, vmap_method="expand_dims")  # noqa: E731
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_allclose(ember.vmap(f, in_axes=1)(jnp.asarray(x)), np.sin(x.T))


def test_pure_callback_vmap_method_defaults_and_errors():
    f = lambda x, m: ember.pure_callback(_host_sin, _like(x), x, vmap_method=m)  # noqa: E731
    x = jnp.arange(3.0)
    with pytest.warns(DeprecationWarning, match="vmap_method='sequential'"):
        out = ember.vmap(f, in_axes=(0, None))(x, None)
    assert_allclose(out, np.sin(np.arange(3.0, dtype=np.float32)))
    with pytest.raises(ValueError, match="vmap_method must be one of the allowed methods .* but got: 'parallel'"):
        f(x, "parallel")
    with pytest.raises(TypeError, match="first argument to ember.pure_callback must be callable"):
        ember.pure_callback(None, _like(x), x)


# --- checkpoint / remat -------------------------------------------------------------------------------
def _layers(x, depth):
    for _ in range(depth):
        x = jnp.tanh(x * 1.5) + jnp.sin(x)
    return (x * x).sum()


def test_checkpoint_values_and_gradients_equal_the_plain_function():
    x = jnp.asarray(np.linspace(-1, 1, 5, dtype=np.float32))
    checkpointed = ember.checkpoint(_layers, static_argnums=(1,))
    assert_allclose(checkpointed(x, 3), _layers(x, 3))
    assert_allclose(ember.grad(checkpointed)(x, 3), ember.grad(_layers)(x, 3))
    jitted = ember.jit(ember.grad(checkpointed), static_argnums=1)
    assert_allclose(jitted(x, 3), ember.jit(ember.grad(_layers), static_argnums=1)(x, 3), rtol=1e-5, atol=1e-6)
    assert_allclose(ember.vmap(checkpointed, in_axes=(0, None))(jnp.stack([x, -x]), 2),
                    np.float32([_layers(x, 2), _layers(-x, 2)]))


def test_checkpoint_as_a_decorator_with_and_without_arguments():
    @ember.remat
    def plain(x):
        return jnp.sin(x) * x

    @ember.checkpoint(policy=ember.checkpoint_policies.dots_with_no_batch_dims_saveable, prevent_cse=False,
                      static_argnames=("activation",))
    def dense(w, x, *, activation):
        return activation(w @ x).sum()

    @functools.partial(ember.checkpoint, static_argnames="depth")
    def deep(x, depth):
        return _layers(x, depth)

    assert ember.remat is ember.checkpoint
    assert_allclose(ember.grad(plain)(1.0), np.cos(np.float32(1)) + np.sin(np.float32(1)))
    w, x = jnp.asarray(np.eye(2, 3, dtype=np.float32)), jnp.arange(3.0)
    assert_allclose(ember.grad(dense)(w, x, activation=jnp.tanh),
                    ember.grad(lambda w, x: jnp.tanh(w @ x).sum())(w, x))
    assert_allclose(ember.grad(deep)(x, depth=2), ember.grad(_layers)(x, 2))
    assert_allclose(ember.grad(deep)(x, 3), ember.grad(_layers)(x, 3))  # static by name, passed by position


def test_checkpoint_traces_its_function_and_shows_in_the_ir():
    closed = ember.make_jaxpr(ember.checkpoint(jnp.sin))(1.0)
    assert "remat2[" in str(closed) and "sin" in str(closed)  # (JAX's name for the checkpoint primitive)
    with pytest.raises(errors.TracerIntegerConversionError, match="depends on argument `depth` of `_layers`, which "
                                                                 "checkpoint traces"):
        ember.checkpoint(_layers)(jnp.ones(2), 2)


def test_checkpoint_argument_errors():
    with pytest.raises(TypeError, match="`static_argnums` argument to `ember.checkpoint` / `ember.remat` must be an "
                                        "int or a tuple of ints"):
        ember.checkpoint(_layers, static_argnums=("depth",))
    with pytest.raises(ValueError, match=r"can only take integer values greater than or equal to `-len\(args\)` and "
                                         r"less than `len\(args\)`, but got \(2,\), while `len\(args\)` = 2"):
        ember.checkpoint(_layers, static_argnums=2)(jnp.ones(2), 2)
    with pytest.raises(TypeError, match="checkpoint policy must be callable"):
        ember.checkpoint(_layers, policy="dots")
    with pytest.raises(TypeError, match="prevent_cse must be a bool or tuple of bools"):
        ember.checkpoint(_layers, prevent_cse=None)
    with pytest.raises(TypeError, match="argument `depth` of the checkpointed function `_layers` is a str, not an "
                                        "array"):
        ember.checkpoint(_layers)(jnp.ones(2), "deep")


def test_checkpoint_policies_classify_equations():
    from ember.lax.dot import dot_general_p
    from ember.lax.elementwise import add_p

    p = ember.checkpoint_policies
    batched = {"dimension_numbers": (((2,), (1,)), ((0,), (0,)))}
    unbatched = {"dimension_numbers": (((1,), (0,)), ((), ()))}
    assert p.everything_saveable(add_p) and not p.nothing_saveable(dot_general_p, **unbatched)
    assert p.dots_saveable(dot_general_p, **batched) and not p.dots_saveable(add_p)
    assert p.checkpoint_dots is p.dots_saveable
    assert p.dots_with_no_batch_dims_saveable(dot_general_p, **unbatched)
    assert not p.checkpoint_dots_with_no_batch_dims(dot_general_p, **batched)
    assert not p.save_only_these_names("h")(add_p) and p.save_anything_except_these_names("h")(add_p)
    assert not p.save_any_names_but_these("h")(add_p)
    assert p.save_from_both_policies(p.nothing_saveable, p.dots_saveable)(dot_general_p, **batched)


# --- device_get, default_backend, ensure_compile_time_eval, named_call ----------------------------------
def test_device_get_returns_numpy_arrays_and_leaves_the_rest():
    tree = {"a": jnp.arange(3), "b": (jnp.float32(2.0), 7, "text", None), "c": np.ones(2)}
    out = ember.device_get(tree)
    assert type(out["a"]) is np.ndarray and out["a"].dtype == np.int32 and out["a"].tolist() == [0, 1, 2]
    assert type(out["b"][0]) is np.ndarray and out["b"][0].shape == ()
    assert out["b"][1:] == (7, "text", None) and out["c"] is tree["c"]
    ember.jit(lambda x: ember.device_get(x) * 2)(jnp.ones(2))  # tracers pass through, as in JAX


def test_default_backend():
    assert ember.default_backend() == "cpu"


def test_ensure_compile_time_eval_evaluates_concrete_operations_while_tracing():
    @ember.jit
    def f(x):
        with ember.ensure_compile_time_eval():
            n = jnp.arange(4).sum()
            assert isinstance(n, ember.Array) and int(n) == 6  # a concrete value: Python can use it
            y = x + n
        return y * jnp.ones(int(n))

    assert_allclose(f(1.0), np.full(6, 7.0, np.float32))
    with ember.ensure_compile_time_eval():  # eagerly: nothing changes
        assert float(jnp.ones(()) + 1) == 2.0


def test_ensure_compile_time_eval_keeps_traced_values_traced():
    def f(x):
        with ember.ensure_compile_time_eval():
            return jnp.sin(x) + jnp.cos(0.5)

    closed = ember.make_jaxpr(f)(1.0)
    assert [e.primitive.name for e in closed.eqns] == ["sin", "add"]  # cos(0.5) was computed while tracing
    assert_allclose(ember.jit(f)(1.0), np.sin(np.float32(1)) + np.cos(np.float32(0.5)))
    assert_allclose(ember.grad(f)(1.0), np.cos(np.float32(1)))


def test_named_call_behaves_like_the_function():
    named = ember.named_call(_layers, name="block")
    assert named.__name__ == "block" and ember.named_call(_layers).__name__ == "_layers"
    x = jnp.arange(3.0)
    assert_allclose(named(x, 2), _layers(x, 2))
    assert_allclose(ember.jit(ember.grad(named), static_argnums=1)(x, 2), ember.grad(_layers)(x, 2), rtol=1e-5)


# --- debug.breakpoint ----------------------------------------------------------------------------------
_BREAKPOINT_PROGRAM = '''
import sys
if sys.argv[1] == "ember":
    import ember as jax, ember.numpy as jnp
else:
    import jax, jax.numpy as jnp

def f(x):
    y = jnp.sin(x)
    jax.debug.breakpoint()
    return y * 2

print(jax.jit(f)(1.0))
print(f(jnp.float32(2.0)))
'''


@pytest.mark.parametrize("api", ["ember", "jax"])
def test_debug_breakpoint_opens_jdb_on_the_values_the_program_computed(tmp_path, api):
    """ember's jdb session gives JAX's transcript for the same commands (run under both)."""
    import os
    import subprocess
    import sys
    if api == "jax":
        pytest.importorskip("jax")
    program = tmp_path / "program.py"
    program.write_text(_BREAKPOINT_PROGRAM)
    commands = "p y\np x + 1\nl\nu\nd\nd\np nosuch\npp {'a': y}\nw\nc\np y\nc\n"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, str(program), api], input=commands, capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert text.count("Entering jdb:") == 2  # under jit, and eagerly
    assert "(jdb) Array(0.84147096, dtype=float32)" in text and "Array(2., dtype=float32)" in text
    assert f"> {program}(10)" in text and "->      jax.debug.breakpoint()" in text
    assert "At bottommost frame." in text and "*** NameError: name 'nosuch' is not defined" in text
    assert "{'a': Array(0.84147096, dtype=float32)}" in text
    assert f'Traceback:\n  File "{program}", line 13\n    print(jax.jit(f)(1.0))' in text
    assert "Array(0.9092974, dtype=float32)" in text  # the eager call's y
    assert "1.6829419" in text


def test_debug_breakpoint_checks_its_backend_and_returns_its_token():
    with pytest.raises(ValueError, match="Debugger backend 'web' is not available"):
        ember.debug.breakpoint(backend="web")
    import io
    import sys
    saved = sys.stdin
    sys.stdin = io.StringIO("p t\nc\n")
    try:
        token = ember.jit(lambda t: ember.debug.breakpoint(token=t) * 2)(jnp.ones(2))
    finally:
        sys.stdin = saved
    np.testing.assert_allclose(token, [2.0, 2.0])
