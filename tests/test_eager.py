"""Eager operations on native code (ember.runtime.eager): control flow called outside ``jit``
compiles its whole loop once, cached on the program's fingerprint, and gives the results of the
same loop under ``jit`` (bit for bit) and of the reference interpreter."""
import logging
import traceback

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import registry
from ember.runtime import eager, replay

pytestmark = pytest.mark.skipif(registry.get().name != "cpu", reason="eager native code is the CPU backend's")


def compiles() -> int:
    return eager.cache_info().compiles


def native_calls() -> int:
    return eager.cache_info().native_calls


# --- each control-flow API, eagerly: equal to jit's result and to the reference's --------------
def _scan(c):
    def f(carry, x):
        carry = carry * 0.9 + jnp.sin(x) * c
        return carry, carry * 2.0
    return lambda xs: lax.scan(f, jnp.zeros(xs.shape[1:], xs.dtype), xs)


def _scan_reverse(c):
    return lambda xs: lax.scan(lambda s, x: (s + x * c, s * x), xs[0], xs, reverse=True)


def _fori(c):
    return lambda xs: lax.fori_loop(0, 7, lambda i, v: v * c + jnp.cos(v) * i, xs[0])


def _fori_traced_bounds(c):
    return lambda xs: lax.fori_loop(jnp.int32(1), jnp.int32(6), lambda i, v: v * c + i, xs[0])


def _while(c):
    def body(s):
        i, v = s
        return i + 1, v * c + 1.0
    return lambda xs: lax.while_loop(lambda s: s[0] < 9, body, (0, xs[0]))[1]


def _cond(c):
    return lambda xs: lax.cond(xs[0, 0] > 0, lambda x: jnp.exp(x) * c, lambda x: x - c, xs)


def _switch(c):
    branches = [lambda x: x + c, lambda x: x * c, lambda x: jnp.tanh(x) - c]
    return lambda xs: lax.switch(2, branches, xs)


def _map(c):
    return lambda xs: lax.map(lambda x: jnp.sum(x * c) + x, xs)


def _associative_scan(c):
    return lambda xs: lax.associative_scan(lambda a, b: a * c + b, xs)


LOOPS = [_scan, _scan_reverse, _fori, _fori_traced_bounds, _while, _cond, _switch, _map, _associative_scan]


def _leaves(tree):
    return [np.asarray(x) for x in ember.tree_util.tree_leaves(tree)]


@pytest.mark.parametrize("make", LOOPS, ids=lambda f: f.__name__[1:])
def test_eager_loops_equal_jit_and_the_reference(make, rng):
    xs = jnp.asarray(rng.standard_normal((6, 3)).astype(np.float32))
    c = jnp.float32(0.75)
    with ember.config.override(backend="reference"):
        reference = _leaves(make(c)(xs))
    jitted = _leaves(ember.jit(make(c))(xs))
    before = native_calls()
    # A new closure each call (as a training loop writes it): the first call of a loop that runs
    # faster than it compiles may run on the reference; the second runs the compiled program.
    results = [_leaves(make(c)(xs)) for _ in range(2)]
    assert native_calls() > before
    for got in results:
        for g, j, r in zip(got, jitted, reference):
            assert g.dtype == j.dtype and g.shape == j.shape
            np.testing.assert_allclose(g, r, rtol=2e-6, atol=1e-6)
    for g, j in zip(results[1], jitted):  # the compiled eager loop is jit's program: bit for bit
        np.testing.assert_array_equal(g, j)


def test_eager_loops_match_jax(rng):
    jax = pytest.importorskip("jax")
    xs = rng.standard_normal((50, 4)).astype(np.float32)

    def run(lax_, np_):
        def f(carry, x):
            carry = carry * 0.5 + np_.tanh(x)
            return carry, carry.sum()
        carry, ys = lax_.scan(f, np_.zeros(4, np_.float32), np_.asarray(xs))
        return np.asarray(carry), np.asarray(ys)

    for got, want in zip(run(lax, jnp), run(jax.lax, jax.numpy)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --- caching ---------------------------------------------------------------------------------
def test_a_second_call_does_not_compile_again(caplog):
    xs = jnp.arange(2000, dtype=jnp.float32) / 1000.0  # long enough to compile at the first call

    def body(carry, x):
        return carry + jnp.sin(x) * 0.5, carry

    with ember.config.override(log_compiles=True), caplog.at_level(logging.WARNING, "ember"):
        first = lax.scan(body, jnp.float32(0.0), xs)
        logged = [r.getMessage() for r in caplog.records if "eager scan" in r.getMessage()]
        n = compiles()
        caplog.clear()
        second = lax.scan(body, jnp.float32(0.0), xs)
        assert compiles() == n
        assert not [r.getMessage() for r in caplog.records if "eager scan" in r.getMessage()]
    assert len(logged) == 1 and ("compiled" in logged[0] or "reused" in logged[0])
    for a, b in zip(_leaves(first), _leaves(second)):
        np.testing.assert_array_equal(a, b)


def test_new_closures_with_other_captured_values_compile_once():
    """A new closure of the same code per call (optax's tests write their loops so): the body is
    traced again, the program is compiled once, and each call uses its own captured values.
    (Captured arrays are operands of the loop; a captured scalar is a literal of the program, as
    a Python number is, so each value is a program of its own.)"""
    def run(scale, shift):
        def body(carry, _):
            return carry * scale + shift, None
        return lax.scan(body, jnp.ones(4, jnp.float32), None, length=1500)[0]

    run(jnp.full(4, 0.5, jnp.float32), jnp.ones(4, jnp.float32))  # compiled (or shared) here
    n = compiles()
    for scale, shift in [(0.25, 2.0), (0.9, -1.0), (1.0, 0.5)]:
        got = np.asarray(run(jnp.full(4, scale, jnp.float32), jnp.full(4, shift, jnp.float32)))
        want = np.ones(4, np.float32)
        for _ in range(1500):
            want = want * np.float32(scale) + np.float32(shift)
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert compiles() == n


def test_a_jitted_step_in_the_body_is_inlined_into_the_loop():
    """The motivating case: a loop that calls a jitted update, driven eagerly. The step's own
    executable is never built: its program is part of the loop's."""
    @ember.jit
    def step(w, m):
        m = 0.9 * m + 0.1 * (2.0 * w)
        return w - 0.01 * m, m

    def body(carry, _):
        return step(*carry), None

    init = (jnp.ones(8, jnp.float32), jnp.zeros(8, jnp.float32))
    (w, m), _ = lax.scan(body, init, None, length=3000)
    (w2, m2), _ = lax.scan(body, init, None, length=3000)
    assert step.cache_info().compiles == 0
    want_w, want_m = np.ones(8, np.float32), np.zeros(8, np.float32)
    for _ in range(3000):
        want_m = np.float32(0.9) * want_m + np.float32(0.1) * (np.float32(2.0) * want_w)
        want_w = want_w - np.float32(0.01) * want_m
    np.testing.assert_allclose(np.asarray(w), want_w, rtol=1e-4, atol=1e-30)
    np.testing.assert_array_equal(np.asarray(w), np.asarray(w2))
    np.testing.assert_array_equal(np.asarray(m), np.asarray(m2))


def test_a_cheap_one_off_loop_runs_on_the_reference_and_compiles_when_it_comes_again():
    def body(carry, x):
        return carry + x, carry

    xs = jnp.arange(3, dtype=jnp.int32)
    before = eager.cache_info()
    lax.scan(body, jnp.int32(0), xs)
    after = eager.cache_info()
    assert after.reference_calls == before.reference_calls + 1 and after.native_calls == before.native_calls
    carry, ys = lax.scan(body, jnp.int32(0), xs)
    assert eager.cache_info().native_calls == after.native_calls + 1
    assert int(carry) == 3 and np.asarray(ys).tolist() == [0, 0, 1]


def test_a_loop_that_comes_again_is_tiered_when_tiering_is_on():
    def body(carry, x):
        return carry * 1.5 + x, carry

    xs = jnp.linspace(0.0, 1.0, 5, dtype=jnp.float32)
    with ember.config.override(tiered_compilation=True):
        results = [_leaves(lax.scan(body, jnp.float32(1.0), xs)) for _ in range(2)]
        ember.wait_for_compiles()
        results.append(_leaves(lax.scan(body, jnp.float32(1.0), xs)))
    with ember.config.override(backend="reference"):
        reference = _leaves(lax.scan(body, jnp.float32(1.0), xs))
    for got in results:
        for g, r in zip(got, reference):
            np.testing.assert_allclose(g, r, rtol=1e-6)


def test_the_reference_backend_and_debug_nans_keep_eager_loops_on_the_reference():
    def body(carry, x):
        return carry + x, carry

    xs = jnp.ones(3000, jnp.float32)
    before = native_calls()
    with ember.config.override(backend="reference"):
        assert float(lax.scan(body, jnp.float32(0.0), xs)[0]) == 3000.0
    with ember.config.override(debug_nans=True):
        assert float(lax.scan(body, jnp.float32(0.0), xs)[0]) == 3000.0
        with pytest.raises(FloatingPointError, match="nan"):
            lax.scan(lambda c, x: (c * jnp.log(x - 2.0), c), jnp.float32(1.0), xs)
    assert native_calls() == before


# --- effects and errors ----------------------------------------------------------------------------
def test_effects_in_an_eager_loop_body_happen_in_order(capsys):
    seen = []

    def record(i, v):
        seen.append((int(i), float(v)))
        return np.float32(v)

    def body(carry, i):
        out = ember.io_callback(record, jax_struct(), i, carry, ordered=True)
        ember.debug.print("step {i}", i=i)
        return out + 1.0, None

    for _ in range(2):  # (the second call runs the compiled loop)
        seen.clear()
        lax.scan(body, jnp.float32(0.0), jnp.arange(4, dtype=jnp.int32))
        assert seen == [(0, 0.0), (1, 1.0), (2, 2.0), (3, 3.0)]
        assert capsys.readouterr().out.split("\n")[:4] == [f"step {i}" for i in range(4)]


def jax_struct():
    return ember.ShapeDtypeStruct((), jnp.float32)


def test_an_error_raised_in_the_body_points_at_the_users_line():
    def body(carry, x):
        if x.shape != ():
            pass
        raise ValueError("bad step")  # the line the traceback must end at

    with pytest.raises(ValueError, match="bad step") as info:
        lax.scan(body, jnp.float32(0.0), jnp.ones(3))
    last = traceback.extract_tb(info.value.__traceback__)[-1]
    assert last.filename == __file__ and "the line the traceback must end at" in last.line


def test_a_callback_error_in_a_compiled_eager_loop_reaches_the_caller():
    def check(v):
        if v > 2:
            raise ValueError(f"value {v} too large")
        return np.float32(v)

    def body(carry, x):
        return ember.io_callback(check, jax_struct(), carry + x), None

    for _ in range(2):  # (compiled code raises JAX's runtime error, which carries the callback's)
        with pytest.raises((ValueError, ember.errors.JaxRuntimeError), match="too large"):
            lax.scan(body, jnp.float32(0.0), jnp.ones(5, jnp.float32))


# --- the eager benchmark table compares like with like ---------------------------------------------
def test_the_eager_benchmark_workloads_compute_what_jax_computes():
    """``benchmarks/eager.py`` times each row in ember and JAX: both compute the same values."""
    jax = pytest.importorskip("jax")
    from benchmarks import eager as bench

    for w in bench.EAGER_WORKLOADS:
        host = w.inputs(np.random.default_rng(1))
        got = w.build(jnp, lax, ember.jit)(*[ember.device_put(a) for a in host])
        want = w.build(jax.numpy, jax.lax, jax.jit)(*[jax.device_put(a) for a in host])
        for g, x in zip(ember.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(x), rtol=2e-5, atol=2e-5, err_msg=w.name)


# --- single operations on large arrays ----------------------------------------------------------------
@pytest.mark.parametrize("op", [
    lambda x, y: jnp.exp(x), lambda x, y: jnp.tanh(x), lambda x, y: jnp.sum(x, axis=0),
    lambda x, y: jnp.max(x, axis=1), lambda x, y: x @ y.T, lambda x, y: jnp.arctan2(x, y)],
    ids=["exp", "tanh", "sum", "max", "matmul", "arctan2"])
def test_a_large_operation_that_comes_again_runs_jits_code(op, rng):
    """The first call of a signature runs on the reference (a one-off pays no compile); when it
    comes again it runs the native code of the one-operation program, jit's bits."""
    x = jnp.asarray(rng.standard_normal((300, 256)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((300, 256)).astype(np.float32))
    before = eager.cache_info()
    first = np.asarray(op(x, y))
    middle = eager.cache_info()
    assert middle.reference_calls == before.reference_calls + 1 and middle.native_calls == before.native_calls
    second = np.asarray(op(x, y))
    assert eager.cache_info().native_calls == middle.native_calls + 1
    np.testing.assert_array_equal(second, np.asarray(ember.jit(op)(x, y)))
    np.testing.assert_allclose(second, first, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("op", [lambda x, y: x @ y.T, lambda x, y: jnp.tanh(x)], ids=["matmul", "tanh"])
def test_a_compiled_large_operation_is_one_lookup_away_until_the_config_changes(op, rng, monkeypatch):
    """Once a large operation's signature has its executable, its calls find it by the signature
    (``eager._kernels``) and give jit's bits; a config change (here ``debug_nans``) and ``clear``
    send them back to the general path. (``@`` is replayed: its replay is kept on its eager steps,
    whose product is the operation here, however long the calls take.)"""
    monkeypatch.setattr(replay, "PAYBACK", np.inf)
    x = jnp.asarray(rng.standard_normal((300, 256)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((300, 256)).astype(np.float32))
    want = np.asarray(ember.jit(op)(x, y))
    op(x, y), op(x, y)  # (the reference, then compiled)
    assert len(eager._kernels) >= 1
    before = native_calls()
    results = [np.asarray(op(x, y)) for _ in range(3)]
    assert native_calls() == before + 3
    for got in results:
        np.testing.assert_array_equal(got, want)
    with ember.config.override(debug_nans=True):
        assert not eager._kernels
        np.testing.assert_allclose(np.asarray(op(x, y)), want, rtol=2e-5, atol=2e-5)
        assert native_calls() == before + 3
    np.testing.assert_array_equal(np.asarray(op(x, y)), want)
    eager.clear()
    assert not eager._kernels


@pytest.mark.parametrize("op", [
    lambda x, y: x + y, lambda x, y: x * 1.5 - y, lambda x, y: x / y, lambda x, y: jnp.maximum(x, y),
    lambda x, y: jnp.where(x > y, x, -y), lambda x, y: jnp.abs(x) <= y],
    ids=["add", "mul_sub", "div", "maximum", "where", "compare"])
def test_large_arithmetic_and_selects_give_the_references_bits_natively(op, rng):
    x = rng.standard_normal((300, 256)).astype(np.float32)
    x[0, :4] = [np.nan, np.inf, -0.0, 0.0]
    x, y = jnp.asarray(x), jnp.asarray(rng.standard_normal((300, 256)).astype(np.float32))
    with ember.config.override(backend="reference"):
        reference = np.asarray(op(x, y))
    before = native_calls()
    results = [np.asarray(op(x, y)) for _ in range(2)]
    assert native_calls() > before
    for got in results:
        np.testing.assert_array_equal(got.view(np.uint8), reference.view(np.uint8))


def test_small_operations_and_the_reference_backend_stay_on_the_reference(rng):
    x = jnp.asarray(rng.standard_normal(1000).astype(np.float32))
    big = jnp.asarray(rng.standard_normal(1 << 17).astype(np.float32))
    before = native_calls()
    for _ in range(3):
        jnp.exp(x)
        with ember.config.override(backend="reference"):
            jnp.exp(big)
    assert native_calls() == before
