"""The jit cache: explanations, logging, retrace warnings, bounds, threads, AOT stages."""
import functools
import logging
import threading
import tracemalloc
import warnings

import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import given, settings

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import registry
from ember.backends.cpu.codegen import QUICK_WORK


def test_explain_cache_misses_names_the_argument_and_the_change(caplog):
    def f(x, y, n):
        return x * n + y

    jf = ember.jit(f, static_argnames="n")
    with ember.config.override(explain_cache_misses=True), caplog.at_level(logging.WARNING, logger="ember"):
        jf(jnp.ones(10), jnp.ones(10), n=2)
        jf(jnp.ones(20), jnp.ones(20), n=2)
        jf(jnp.ones(20, jnp.int32), jnp.ones(20), n=2)
        jf(jnp.ones(20), jnp.ones(20), n=3)
        jf(jnp.ones(20), 1.0, n=3)
    messages = [r.getMessage() for r in caplog.records]
    assert "first call" in messages[0]
    assert "argument `x` changed shape: f32[10] -> f32[20]" in messages[1]
    assert "argument `x` changed dtype: f32[20] -> i32[20]" in messages[2]
    assert "static argument `n` changed value: 2 -> 3" in messages[3]
    assert "argument `y` changed shape" in messages[4] or "weak type" in messages[4]


def test_log_compiles_reports_trace_and_compile(caplog):
    with ember.config.override(log_compiles=True), caplog.at_level(logging.WARNING, logger="ember"):
        ember.jit(lambda x: x * 3.0 + 1.71828)(jnp.ones(3))  # (constants of its own: no other test's code)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "traced <lambda> for (f32[3])" in text and "compiled <lambda>" in text


def test_many_retraces_are_logged_once_with_the_fix(caplog):
    """Logged, as JAX logs cache misses, not warned: tests that turn warnings into errors pass."""
    f = ember.jit(lambda x: x * 2)
    with ember.config.override(retrace_warning_threshold=3), warnings.catch_warnings(), \
            caplog.at_level(logging.WARNING, logger="ember"):
        warnings.simplefilter("error")
        for n in range(1, 7):
            f(jnp.ones(n))
    retrace = [r.getMessage() for r in caplog.records if "traced 3 times" in r.getMessage()]
    assert len(retrace) == 1 and "pad inputs" in retrace[0]
    assert "changed shape" in retrace[0]


def test_cache_info_counts_traces_and_compiles():
    f = ember.jit(lambda x: x - 1)
    f(jnp.ones(2))
    f(jnp.ones(2))
    info = f.cache_info()
    assert (info.hits, info.misses, info.traces, info.compiles, info.currsize) == (1, 1, 1, 1, 1)
    assert info.compile_seconds >= 0


@pytest.mark.skipif(registry.get().name != "cpu", reason="native code is the CPU backend's")
def test_a_new_shape_retraces_but_reuses_the_compiled_code(caplog):
    f = ember.jit(lambda x: jnp.tanh(x) * 3.171875 - 0.40625)  # constants no other test uses
    shapes = [(1000,), (1500,), (30, 50), (7, 11, 13)]
    with ember.config.override(log_compiles=True), caplog.at_level(logging.WARNING, logger="ember"):
        for s in shapes:
            x = np.linspace(-3, 3, int(np.prod(s)), dtype=np.float32).reshape(s)
            np.testing.assert_allclose(np.asarray(f(jnp.asarray(x))), np.tanh(x) * 3.171875 - 0.40625,
                                       rtol=2e-6, atol=2e-6)
    info = f.cache_info()
    assert (info.traces, info.compiles) == (len(shapes), 1)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert text.count("reused compiled code for <lambda>") == len(shapes) - 1


@pytest.mark.skipif(registry.get().name != "cpu", reason="native code is the CPU backend's")
def test_row_kernels_share_code_across_row_counts_not_row_lengths():
    def softmax(x):
        e = jnp.exp(x - x.max(-1, keepdims=True) + 0.015625)
        return e / e.sum(-1, keepdims=True)

    f = ember.jit(softmax)
    for rows, cols, compiles in [(8, 64, 1), (16, 64, 1), (24, 64, 1), (8, 32, 2)]:
        x = np.random.default_rng(rows).normal(size=(rows, cols)).astype(np.float32)
        e = np.exp(x - x.max(-1, keepdims=True))
        np.testing.assert_allclose(np.asarray(f(jnp.asarray(x))), e / e.sum(-1, keepdims=True), rtol=1e-5)
        assert f.cache_info().compiles == compiles


def test_a_signature_first_traced_inside_another_jit_compiles_at_top_level():
    inner = ember.jit(lambda x: x * 3)
    ember.jit(lambda x: inner(x) + 1)(jnp.ones(2))   # inner traced, not compiled
    assert inner(jnp.ones(2)).tolist() == [3.0, 3.0]  # now compiled on first top-level use
    assert inner.cache_info().traces == 1


def test_the_cache_is_bounded():
    f = ember.jit(lambda x: x + 1)
    with ember.config.override(jit_cache_max_entries=3):
        for n in range(1, 7):
            f(jnp.ones(n))
    assert f.cache_info().currsize == 3
    f(jnp.ones(6))                                     # most recent: still cached
    assert f.cache_info().traces == 6
    f(jnp.ones(1))                                     # evicted: traced again
    assert f.cache_info().traces == 7


def test_clear_caches():
    f = ember.jit(lambda x: x + 2)
    f(jnp.ones(2))
    ember.clear_caches()
    assert f.cache_info().currsize == 0
    f(jnp.ones(2))
    assert f.cache_info().traces == 2


def test_many_threads_compile_each_signature_once():  # (and, after the first hits, share the native hit path)
    calls = []

    def body(x):
        calls.append(x.shape)
        return jnp.sin(x) * 2

    f = ember.jit(body)
    shapes = [(3,), (4,), (5, 2), (7,)]
    inputs = {s: jnp.ones(s) for s in shapes}
    expected = {s: np.sin(np.ones(s, np.float32)) * 2 for s in shapes}
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(1000):
                s = shapes[rng.integers(len(shapes))]
                np.testing.assert_allclose(np.asarray(f(inputs[s])), expected[s], rtol=1e-6)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(calls) == sorted(shapes)  # each signature traced exactly once
    if registry.get().name == "cpu":  # one kernel for every shape (its size is an argument), compiled
        assert f.cache_info().compiles <= 1  # at most once (an earlier test may have compiled it)
    else:
        assert f.cache_info().compiles == len(shapes)


def test_repeated_calls_do_not_grow_memory():
    f = ember.jit(lambda x: x + 1.0)
    x = jnp.ones(10)
    for _ in range(1000):
        f(x)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(100_000):
        f(x)
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown < 1_000_000, f"memory grew by {grown} bytes over 10^5 calls"


def test_code_of_dropped_functions_is_freed_within_the_cache_bounds():
    import gc
    import weakref

    x = jnp.ones(4)
    executables = []
    with ember.config.override(jit_cache_max_entries=3):
        for k in range(12):
            f = ember.jit(lambda x, k=k: x * (k + 0.5) + 0.0078125)  # other code for each k
            f(x), f(x)  # the second call sets up the hit path, which refers to the program too
            entry, = f._cache.entries.values()
            executables.append(weakref.ref(entry.executable))
            del f, entry
        gc.collect()
        alive = [r for r in executables if r() is not None]
        assert len(alive) <= 3  # kept for sharing by the bounded LRU caches only
        ember.clear_caches()
        gc.collect()
        assert all(r() is None for r in executables)


def test_lower_compile_and_cost_analysis():
    def mlp(w, x):
        return jnp.tanh(x @ w).sum()

    w, x = jnp.ones((8, 4)), jnp.ones((16, 8))
    lowered = ember.jit(mlp).lower(w, x)
    text = lowered.as_text()
    assert "dot_general" in text and "tanh" in text
    compiled = lowered.compile()
    np.testing.assert_allclose(compiled(w, x), np.tanh(np.ones((16, 8)) @ np.ones((8, 4))).sum(), rtol=1e-6)
    cost = compiled.cost_analysis()
    assert cost["flops"] >= 2 * 16 * 8 * 4 and cost["transcendentals"] == 16 * 4
    assert cost["bytes accessed"] > 0
    with pytest.raises(TypeError, match="lowered for arguments"):
        compiled(jnp.ones((8, 5)), x)
    shapes = ember.jit(mlp).lower(ember.ShapeDtypeStruct((8, 4), jnp.float32), x).out_info
    assert shapes.shape == () and shapes.dtype == jnp.float32


def test_lower_handles_static_arguments_and_control_flow():
    def f(x, n):
        return lax.fori_loop(0, n, lambda i, c: c * 2.0, x)

    compiled = ember.jit(f, static_argnums=1).lower(jnp.ones(3), 4).compile()
    assert compiled(jnp.ones(3)).tolist() == [16.0, 16.0, 16.0]  # (the static argument is not passed again)
    assert compiled.cost_analysis()["flops"] >= 4 * 3


def test_equivalent_functions_share_compiled_code():
    x = jnp.ones(3)
    ember.clear_caches()
    compiles = []
    for _ in range(4):  # a fresh lambda each time: traced again, compiled once
        f = ember.jit(lambda v: v * 2 + 1)
        assert f(x).tolist() == [3.0, 3.0, 3.0]
        compiles.append(f.cache_info().compiles)
    assert compiles == [1, 0, 0, 0]

    def scale(v, s):
        return v * s

    partials = [ember.jit(functools.partial(scale, s=3.0)) for _ in range(3)]
    assert [p(x).tolist() for p in partials] == [[3.0] * 3] * 3
    assert [p.cache_info().compiles for p in partials] == [1, 0, 0]
    other = ember.jit(functools.partial(scale, s=4.0))   # a different constant: compiled anew
    assert other(x).tolist() == [4.0] * 3 and other.cache_info().compiles == 1


def test_jit_wrappers_created_in_a_loop_are_logged_once_naming_the_line(caplog):
    x = jnp.ones(2)
    with ember.config.override(jit_churn_warning_threshold=3), warnings.catch_warnings(), \
            caplog.at_level(logging.WARNING, logger="ember"):
        warnings.simplefilter("error")
        for _ in range(6):
            ember.jit(lambda v: v + 1)(x)  # the line the report names
    churn = [r.getMessage() for r in caplog.records if "different function objects" in r.getMessage()]
    assert len(churn) == 1
    assert "test_cache.py" in churn[0] and "ember.jit(lambda v: v + 1)(x)" in churn[0]
    assert "outside the loop" in churn[0]


@pytest.mark.skipif(registry.get().name != "cpu", reason="native code is the CPU backend's")
@settings(max_examples=15)
@given(shapes=st.lists(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=9), min_size=2, max_size=5),
       scalar=st.floats(-2, 2, width=32))
def test_elementwise_programs_of_any_shape_share_code_and_match_numpy(shapes, scalar):
    """One kernel per program whatever the shape (per optimization level: programs on a few
    elements are compiled without optimization), each result as NumPy computes it."""
    def fun(x, y):
        return jnp.where(x > y, jnp.sin(x) * scalar, y - x * 0.8125) + 0.0546875

    f = ember.jit(fun)
    quick = set()
    for s in shapes:
        rng = np.random.default_rng(len(s))
        x, y = (rng.normal(size=s).astype(np.float32) for _ in range(2))
        want = np.where(x > y, np.sin(x) * np.float32(scalar), y - x * np.float32(0.8125)) + np.float32(0.0546875)
        out = f(jnp.asarray(x), jnp.asarray(y))
        assert out.shape == s
        np.testing.assert_allclose(np.asarray(out), want, rtol=2e-6, atol=2e-6)
        quick.add(int(np.prod(s)) <= QUICK_WORK)
    assert f.cache_info().traces == len(set(shapes))
    assert f.cache_info().compiles <= len(quick)
