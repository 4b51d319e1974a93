"""Tiered compilation (ember.runtime.tiers): a large program's first calls run on the reference
interpreter while its native code compiles in the background; every tier gives the reference's
answers, and the switch is visible in ``cache_info`` and the compile log."""
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import registry
from ember.backends.cpu_backend import CpuExecutable
from ember.runtime import tiers

pytestmark = pytest.mark.skipif(registry.get().name != "cpu", reason="tiers lead to the CPU backend's code")


@pytest.fixture(autouse=True)
def tiered():
    with ember.config.override(tiered_compilation=True):
        yield
    ember.wait_for_compiles()


def layers(n, scale):
    def f(x, w):
        for i in range(n):
            x = jnp.tanh(x @ w) * scale + x if i % 2 == 0 else jnp.sin(x) * 1.01 + 0.1 * x
        return x.sum()
    return f


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.standard_normal((16, 16), dtype=np.float32) * 0.1) for _ in range(2)]


def reference(f, *args):
    with ember.config.override(backend="reference"):
        return ember.jit(lambda *a: f(*a))(*args)  # (a function of its own: a cache of its own)


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "grad"])
def test_first_call_runs_on_the_reference_then_calls_switch_to_native_code(grad):
    f = layers(12, 0.4375 + 0.001 * grad)  # constants of this test alone: nothing shared
    g = ember.grad(f) if grad else f
    jf = ember.jit(g)
    args = inputs()
    expected = np.asarray(reference(g, *args))
    first = jf(*args)
    info = jf.cache_info()
    assert info.quick_tier_calls == 1 and info.traces == 1
    np.testing.assert_allclose(np.asarray(first), expected, rtol=1e-6, atol=1e-6)  # the reference itself
    assert ember.wait_for_compiles(timeout=120)
    info = jf.cache_info()
    assert info.compiling == 0 and info.compiles == 1
    for _ in range(3):  # native now, through the hit path and the dispatcher's fast path
        np.testing.assert_allclose(np.asarray(jf(*args)), expected, rtol=2e-5, atol=2e-5)
    assert jf.cache_info().quick_tier_calls == 1
    executable = next(iter(jf._cache.entries.values())).executable
    assert isinstance(executable, tiers.TieredExecutable) and executable.tier == "native"
    # The native tier is the code an untiered compile makes: the same answers, bit for bit.
    untiered = CpuExecutable(ember.make_jaxpr(g)(*args), "g")
    np.testing.assert_array_equal(np.asarray(untiered(*args)[0]), np.asarray(jf(*args)))


def test_the_compile_log_says_which_tier_ran(caplog):
    jf = ember.jit(layers(12, 0.40625))
    with ember.config.override(log_compiles=True), caplog.at_level(logging.WARNING, logger="ember"):
        jf(*inputs())
        assert ember.wait_for_compiles(timeout=120)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "tiered f for (f32[16,16], f32[16,16]): calls run on the reference interpreter" in text
    assert "native code for f ready after" in text and "1 calls ran on the reference tier" in text
    assert "ember cpu: compiled f:" in text


def test_small_programs_compile_natively_at_once():
    import ember.backends.cpu  # noqa: F401  (loaded: the first program of a process is tiered whatever its size)

    jf = ember.jit(lambda x: jnp.tanh(x) * 3.25 + 1.0)
    jf(jnp.ones(4))
    assert jf.cache_info().quick_tier_calls == 0
    assert isinstance(next(iter(jf._cache.entries.values())).executable, CpuExecutable)


def test_what_is_not_tiered():
    args = inputs()
    with ember.config.override(tiered_compilation=False):
        off = ember.jit(layers(12, 0.3))
        off(*args)
        assert off.cache_info().quick_tier_calls == 0
    compiled = ember.jit(layers(12, 0.31)).lower(*args).compile()  # ahead of time: compiled now
    np.testing.assert_allclose(np.asarray(compiled(*args)), np.asarray(reference(layers(12, 0.31), *args)),
                               rtol=2e-5)
    donating = ember.jit(lambda x, w: layers(12, 0.32)(x, w) + x, donate_argnums=0)
    donating(jnp.array(args[0]), args[1])
    assert donating.cache_info().quick_tier_calls == 0


def test_a_long_loop_waits_for_native_code_rather_than_run_on_the_reference():
    def body(c, x):
        for _ in range(12):
            c = jnp.tanh(c * 1.125 + x)
        return c, c.sum()

    closed = ember.make_jaxpr(lambda c, xs: lax.scan(body, c, xs))(jnp.ones(8), jnp.ones((4000, 8)))
    assert tiers.reference_ms(closed.jaxpr) > 10 * tiers.reference_ms(
        ember.make_jaxpr(lambda c, xs: lax.scan(body, c, xs))(jnp.ones(8), jnp.ones((40, 8))).jaxpr)
    jf = ember.jit(lambda c, xs: lax.scan(body, c, xs))
    jf(jnp.ones(8), jnp.ones((4000, 8)))
    assert jf.cache_info().quick_tier_calls == 0


@pytest.fixture
def held_compile(monkeypatch):
    """Native compiles that wait for ``release`` (an Event) before they start, and ``compiled``
    (an Event) set when one has finished."""
    release, compiled, real = threading.Event(), threading.Event(), tiers.CpuExecutable

    def held(*args, **kwargs):
        assert release.wait(60)
        try:
            return real(*args, **kwargs)
        finally:
            compiled.set()

    monkeypatch.setattr(tiers, "CpuExecutable", held)
    yield release, compiled
    release.set()


def test_calls_that_took_their_share_of_the_compile_wait_for_native_code(held_compile, monkeypatch):
    """On a machine of few cores the reference tier's work is taken from the compile: a call that
    would take more than ``QUICK_TIER_SHARE`` of the time since the compile started waits for it."""
    release, _ = held_compile
    jf = ember.jit(layers(12, 0.296875))
    args = inputs(2)
    first = jf(*args)  # (the compile started with it, and waits)
    executable = next(iter(jf._cache.entries.values())).executable
    assert executable.tier == "reference" and executable.spent_seconds > 0
    monkeypatch.setattr(tiers, "QUICK_TIER_SHARE", 1e-9)  # (its turn comes in years)
    monkeypatch.setattr(tiers, "QUICK_TIER_ALLOWANCE", 0.0)
    threading.Timer(0.2, release.set).start()
    second = jf(*args)  # waits for the native code, then runs it
    assert executable.tier == "native" and jf.cache_info().quick_tier_calls == 1
    np.testing.assert_allclose(np.asarray(second), np.asarray(first), rtol=1e-5, atol=1e-6)


def test_calls_within_their_share_of_the_compile_go_on_on_the_reference(held_compile, monkeypatch):
    release, _ = held_compile
    monkeypatch.setattr(tiers, "QUICK_TIER_SHARE", 1.0)  # (a thread's CPU time never outruns the clock)
    args = inputs(3)
    closed = ember.make_jaxpr(layers(12, 0.28125))(*args)
    executable = tiers.TieredExecutable(closed, "layers")
    results = [executable(*args)[0] for _ in range(4)]
    assert executable.tier == "reference" and executable.quick_calls == 4 and executable.spent_seconds > 0
    release.set()
    assert executable.wait(60) and executable.tier == "native"
    np.testing.assert_allclose(np.asarray(executable(*args)[0]), np.asarray(results[0]), rtol=2e-5, atol=2e-5)
    assert all(np.array_equal(np.asarray(r), np.asarray(results[0])) for r in results)


def _program_with_a_callback(callback, effect):
    """x -> tanh-layers(x) around a host callback (``io_callback`` with an effect, else ``pure_callback``)."""
    from ember.callbacks import io_callback, pure_callback
    host = io_callback if effect else pure_callback

    def f(x, w):
        x = layers(12, 0.265625)(x, w) * jnp.ones(3)
        y = host(callback, jax_shape(x), x)
        return layers(12, 0.25)(jnp.ones((16, 16)) * y[0], w)
    return f


def jax_shape(x):
    return ember.ShapeDtypeStruct(x.shape, x.dtype)


@pytest.mark.parametrize("effect", [False, True], ids=["pure", "effect"])
def test_a_reference_call_that_the_native_code_overtakes_stops_and_runs_natively(held_compile, monkeypatch, effect):
    """A call on the reference tier stops between two equations once the native code is ready, and
    runs that: no call takes longer than waiting would have. A program with effects finishes its
    reference call instead (an effect must not run twice)."""
    release, compiled = held_compile
    calls = []

    def callback(x):
        calls.append(threading.current_thread())
        if len(calls) == 2:  # (in the second call, on the reference: the native code gets ready meanwhile)
            release.set()
            assert compiled.wait(60)
            executable.wait(60)
        return np.asarray(x)

    monkeypatch.setattr(tiers, "QUICK_TIER_SHARE", 1.0)  # (the second call's turn is now)
    args = inputs(5)
    f = _program_with_a_callback(callback, effect)
    closed = ember.make_jaxpr(f)(*args)
    executable = tiers.TieredExecutable(closed, "with_callback")
    first = executable(*args)[0]  # (the compile starts when it returns, and waits for ``release``)
    out = executable(*args)[0]
    want = reference(_program_with_a_callback(np.asarray, effect), *args)
    for got in (first, out):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)
    assert executable.tier == "native"
    if effect:
        assert (executable.quick_calls, executable.overtaken_calls, len(calls)) == (2, 0, 2)
    else:  # (stopped after the callback, then run natively: the pure callback ran again)
        assert (executable.quick_calls, executable.overtaken_calls, len(calls)) == (1, 1, 3)


def test_a_call_that_waits_for_its_compile_does_not_wait_for_the_compiles_queued_before_it(monkeypatch):
    """With an empty disk cache, a test suite queues many compiles: the one a call waits for runs
    next, not after all of them."""
    from ember.core.background import background
    order, release, real = [], threading.Event(), tiers.CpuExecutable

    def recorded(closed, name, *args, **kwargs):
        order.append(name)
        return real(closed, name, *args, **kwargs)

    monkeypatch.setattr(tiers, "CpuExecutable", recorded)
    blocker = background.submit(background.unique_name("a compile in flight"), release.wait, 60, queue="tiers",
                                once=False)
    args = inputs(4)
    earlier, waited = (tiers.TieredExecutable(ember.make_jaxpr(layers(12, s))(*args), name)
                       for name, s in (("earlier", 0.25), ("waited", 0.375)))
    try:
        earlier(*args)  # (queued after the blocker)
        waited(*args)  # (queued after that)
        assert not waited.wait(timeout=0)  # (it moves to the front of the queue)
    finally:
        release.set()
    assert blocker.wait(60) and waited.wait(60) and earlier.wait(60)
    assert order == ["waited", "earlier"]
    assert waited.tier == earlier.tier == "native"


def test_a_failed_native_compile_leaves_the_reference_tier_serving(monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise RuntimeError("no LLVM today")

    monkeypatch.setattr(tiers, "CpuExecutable", broken)
    f = layers(12, 0.34375)
    jf = ember.jit(f)
    args = inputs(1)
    with caplog.at_level(logging.WARNING, logger="ember"):
        first = jf(*args)
        assert ember.wait_for_compiles(timeout=60)
    assert "the native compile of f failed (RuntimeError: no LLVM today)" in caplog.text
    np.testing.assert_allclose(np.asarray(jf(*args)), np.asarray(first))
    assert jf.cache_info().quick_tier_calls == 2 and jf.cache_info().compiling == 0


def test_a_process_that_exits_during_the_background_compile_exits_cleanly(tmp_path):
    script = textwrap.dedent("""
        import time, ember, ember.numpy as jnp
        from ember.core.background import background
        with ember.config.override(tiered_compilation=False):  # the CPU backend loaded (a first program would
            ember.jit(lambda x: x * 2.0)(jnp.ones(3))           # tier): the compile at exit needs no import
        def f(x, w):
            for i in range(200):
                x = jnp.tanh(x @ w) * 0.28125 + x if i % 2 == 0 else jnp.sin(x) * 1.01 + 0.1 * x
            return x.sum()
        print(float(ember.jit(f)(jnp.ones((8, 8)) * 0.01, jnp.ones((8, 8)) * 0.01)))
        deadline = time.monotonic() + 30
        while WAIT and not any(job.started for job in background.jobs()) and time.monotonic() < deadline:
            time.sleep(0.001)
    """)
    env = dict(os.environ, EMBER_TIERED_COMPILATION="1", EMBER_CACHE_DIR=str(tmp_path))
    runs = []
    for wait in (False, True):  # exit at once (the compile dropped), or while it runs (finished)
        runs.append(subprocess.run([sys.executable, "-c", script.replace("WAIT", str(wait))], env=env,
                                   capture_output=True, text=True, timeout=300))
        assert runs[-1].returncode == 0, runs[-1].stderr
        assert runs[-1].stderr == ""
    assert runs[0].stdout == runs[1].stdout
    # The compile that the exit waited for was kept on disk for the next process.
    assert any(p.is_file() for p in tmp_path.rglob("*"))


def test_a_process_that_exits_while_its_first_compile_loads_llvm_exits_quietly(tmp_path):
    """A process's first program loads LLVM in the background; a process that ends meanwhile has
    llvmlite imported while its exit hooks run, too late for llvmlite's own: ember's shutdown tells
    llvmlite then, so the finalizers of its engines print nothing at exit."""
    script = textwrap.dedent("""
        import ember, ember.numpy as jnp, numpy as np
        x = np.ones((64, 64), np.float32)
        f = ember.jit(lambda x: jnp.sin(x) @ x)
        for _ in range(3):
            f(x)
        ember.jit(lambda x: jnp.tanh(x).sum())(x)
    """)
    env = dict(os.environ, EMBER_TIERED_COMPILATION="1", EMBER_CACHE_DIR=str(tmp_path))
    for _ in range(3):  # (the exit falls at another point of the load each time)
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0 and run.stderr == "", run.stderr


FIRST_PROGRAM = textwrap.dedent("""
    import json, sys
    import numpy as np
    import ember, ember.numpy as jnp
    from ember.runtime import tiers

    x = np.linspace(-2, 2, 10, dtype=np.float32)
    f = ember.jit(lambda x: jnp.sin(x) * 2.0 + 1.0)
    first = np.asarray(f(x))
    state = {"first_quick": f.cache_info().quick_tier_calls}
    assert ember.wait_for_compiles(timeout=120)
    second = np.asarray(f(x))
    state["second_quick"] = f.cache_info().quick_tier_calls
    state["backend"] = "ember.backends.cpu" in sys.modules
    g = ember.jit(lambda x: jnp.cos(x) - 1.0)  # the backend is loaded now: compiled at once
    third = np.asarray(g(x))
    state["later_quick"] = g.cache_info().quick_tier_calls
    with ember.config.override(backend="reference"):
        want = [np.asarray(ember.jit(lambda x: jnp.sin(x) * 2.0 + 1.0)(x)),
                np.asarray(ember.jit(lambda x: jnp.cos(x) - 1.0)(x))]
    np.testing.assert_array_equal(first, want[0])  # the reference tier is the reference
    np.testing.assert_allclose(second, want[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(third, want[1], rtol=1e-6, atol=1e-6)
    print(json.dumps(state))
""")


def test_the_first_program_of_a_process_runs_on_the_reference_while_the_backend_loads(tmp_path):
    """Its compile also loads LLVM and the backend: a small first program is tiered, later ones not."""
    env = {**os.environ, "EMBER_TIERED_COMPILATION": "1", "EMBER_CACHE_DIR": str(tmp_path), "EMBER_BACKEND": "cpu"}
    done = subprocess.run([sys.executable, "-c", FIRST_PROGRAM], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert state == {"first_quick": 1, "second_quick": 1, "backend": True, "later_quick": 0}
