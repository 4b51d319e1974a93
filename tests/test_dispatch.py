"""The jit hit path: plain calls on Arrays run a whole program through the native dispatcher.

Every test compares the hit path with the reference (or with the general path) and checks
that whatever the dispatcher declines (deleted, non-contiguous, traced or foreign arguments;
config changes) is handled as it was before the dispatcher existed.
"""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import registry
from ember.backends.cpu import entry
from ember.core.array import Array
from ember.core.background import background

cpu_only = pytest.mark.skipif(registry.get().name != "cpu", reason="the native dispatcher is the CPU backend's")


@pytest.fixture(autouse=True, scope="module")
def built_dispatcher():
    """The dispatcher, built before these tests count fast-path entries (in a running program it
    is built in the background: until then, calls take the general path)."""
    if registry.get().name == "cpu":
        entry.dispatcher()


def _fast_entries(f) -> int:
    return len(f._fast)


def _hits(f, *args, n=3):
    """Call ``f`` ``n`` times; the results and the hits counted meanwhile."""
    before = f.cache_info().hits
    outs = [f(*args) for _ in range(n)]
    return outs, f.cache_info().hits - before


@cpu_only
def test_the_layout_the_dispatcher_relies_on_holds_here():
    assert entry.available()


PROGRAMS = {
    "elementwise": (lambda x: jnp.tanh(x) * 2.0 + 1.0, [(7,)]),
    "two inputs, broadcast": (lambda x, y: x * y[None, :] - 3.0, [(5, 4), (4,)]),
    "temporaries": (lambda x: jax_softmax(x) @ jnp.ones((x.shape[1], 3)), [(6, 5)]),
    "reduction": (lambda x: jnp.sum(x ** 2, axis=0), [(9, 3)]),
    "rank 0": (lambda x: x.sum() * 2.0, [()]),
    "loop": (lambda x: lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i, x), [(4,)]),
    "scan": (lambda x: lax.scan(lambda c, v: (c + v, c * v), 0.0, x)[1], [(6,)]),
    "constant": (lambda x: x * _CONSTANT + _CONSTANT[::-1], [(5,)]),
    "integers": (lambda x: (x > 0).astype(jnp.int32) * 3 - 1, [(2, 3)]),
}
_CONSTANT = jnp.asarray(np.linspace(-1, 1, 5, dtype=np.float32))


def jax_softmax(x):
    e = jnp.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_hit_path_matches_the_reference_interpreter(name, rng):
    fun, shapes = PROGRAMS[name]
    args = [jnp.asarray(rng.normal(size=s).astype(np.float32)) for s in shapes]
    with ember.config.override(backend="reference"):
        want = np.asarray(ember.jit(fun)(*args))
    f = ember.jit(fun)
    f(*args)
    outs, hits = _hits(f, *args)
    assert hits == len(outs)
    if registry.get().name == "cpu":
        assert _fast_entries(f) == 1  # every step native: the calls went through the dispatcher
    for out in outs:
        assert isinstance(out, Array) and out.dtype == want.dtype and out.shape == want.shape
        np.testing.assert_allclose(np.asarray(out), want, rtol=2e-5, atol=1e-6)
        assert not np.asarray(out).flags.writeable  # Arrays are immutable


@cpu_only
def test_plain_calls_register_the_fast_path_and_keyword_calls_do_not():
    f = ember.jit(lambda x, y: x - y)
    x, y = jnp.ones(3), jnp.arange(3.0)
    f(x, y=y), f(x, y=y)
    assert _fast_entries(f) == 0
    assert f(x, y).tolist() == [1.0, 0.0, -1.0]
    assert _fast_entries(f) == 0  # a first call: not yet (the dispatcher is set up at the first hit)
    assert f(x, y).tolist() == [1.0, 0.0, -1.0]
    assert _fast_entries(f) == 1
    assert f(x, y=y).tolist() == [1.0, 0.0, -1.0]  # keywords: the general path
    assert _fast_entries(f) == 1


def test_pytree_outputs_and_repeated_outputs():
    f = ember.jit(lambda x: {"a": x + 1, "b": (x * 2, x + 1)})
    x = jnp.arange(4.0)
    for _ in range(3):
        out = f(x)
        assert out["a"].tolist() == [1, 2, 3, 4] and out["b"][0].tolist() == [0, 2, 4, 6]
        assert out["b"][1].tolist() == [1, 2, 3, 4]


def test_outputs_that_are_inputs_or_constants_take_the_fast_path_too():
    f = ember.jit(lambda x: (x, x + 1, jnp.int32(7), x))
    x = jnp.arange(3.0)
    for _ in range(3):
        a, b, c, d = f(x)
        assert a.tolist() == [0, 1, 2] and b.tolist() == [1, 2, 3] and c.tolist() == 7 and d.tolist() == [0, 1, 2]
        assert a is not x and c.dtype == jnp.int32 and not c.weak_type  # (a new Array, as JAX returns)
    assert _fast_entries(f) == 1


def test_weak_types_and_dtypes_of_outputs_are_kept():
    f = ember.jit(lambda x, i: (x * 2, i + 1, x > 1))
    x, i = jnp.arange(3.0), jnp.arange(3)
    for _ in range(3):
        a, b, c = f(x, i)
        assert (a.dtype, b.dtype, c.dtype) == (jnp.float32, jnp.int32, jnp.bool_)
    w = ember.jit(lambda x: x * 2)(jnp.asarray(1.0) * 1)  # weak-typed input
    assert w.dtype == jnp.float32


def test_a_non_contiguous_array_takes_the_general_path():
    f = ember.jit(lambda x: x * 10.0)
    x = jnp.arange(6.0).reshape(2, 3)
    f(x), f(x)
    view = Array(np.arange(6.0, dtype=np.float32).reshape(3, 2).T)  # an Array over a strided view
    assert not np.asarray(view).flags.c_contiguous
    np.testing.assert_array_equal(np.asarray(f(view)), np.arange(6.0).reshape(3, 2).T * 10)


def test_a_deleted_array_still_raises():
    f = ember.jit(lambda x: x + 1)
    x = jnp.ones(3)
    f(x), f(x)
    donated = jnp.ones(3)
    ember.jit(lambda x: x * 2, donate_argnums=0)(donated)
    assert donated.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        f(donated)


def test_numpy_and_python_arguments_take_the_general_path():
    f = ember.jit(lambda x: x + 1)
    f(jnp.ones(3)), f(jnp.ones(3))
    assert f(np.ones(3, np.float32)).tolist() == [2.0] * 3
    assert f(2.0).tolist() == 3.0


@cpu_only
def test_python_scalar_arguments_take_the_fast_path_with_their_weak_types():
    f = ember.jit(lambda a, b: a + b * 2)
    assert f(10, 20).tolist() == 50 and _fast_entries(f) == 0  # a first call
    outs, hits = _hits(f, 10, 20)
    assert [o.tolist() for o in outs] == [50] * 3 and hits == 3 and _fast_entries(f) == 1
    assert f(7, -1).tolist() == 5 and str(f(7, -1).aval) == "~int32[]"
    x = jnp.arange(3.0)
    for args, want, aval in [((2.5, 1), 4.5, "~float32[]"), ((True, 3), 7, "~int32[]"),
                             ((x, 2.0), [4.0, 5.0, 6.0], "float32[3]"), ((1.0, x), [1.0, 3.0, 5.0], "float32[3]")]:
        results = [f(*args) for _ in range(3)]  # each signature: a first call, then hits
        assert all(r.tolist() == want and str(r.aval) == aval for r in results)
    assert _fast_entries(f) == 5
    with pytest.raises(OverflowError, match=r"parsing an argument to a jitted computation, whose argument path is "
                                            r"a\. Got <class 'int'> with value 1099511627776"):
        f(2**40, 1)  # as the general path says it (JAX's words): the value does not fit int32
    assert f(np.int32(3), 1).tolist() == 5  # a NumPy scalar is not a Python scalar: strongly typed
    assert str(f(np.int32(3), 1).aval) == "int32[]"


def test_an_escaped_tracer_is_still_reported():
    f = ember.jit(lambda x: x + 1)
    f(jnp.ones(3)), f(jnp.ones(3))
    leaked = []
    ember.jit(lambda x: leaked.append(x) or x)(jnp.ones(3))
    with pytest.raises(ember.errors.UnexpectedTracerError):
        f(leaked[0])


def test_inside_a_trace_the_call_is_staged_not_run():
    f = ember.jit(lambda x: x + 1)
    c = jnp.ones(3)
    f(c), f(c)
    text = str(ember.make_jaxpr(lambda y: f(c) * y)(jnp.ones(3)))
    assert "jit[" in text  # the closed-over call is an equation, as without the fast path


def test_config_changes_are_honoured_after_the_fast_path_is_set_up():
    calls = []

    def fun(x):
        calls.append(1)
        return jnp.log(x)

    f = ember.jit(fun)
    x = jnp.asarray([-1.0, 1.0])
    f(x), f(x)
    with ember.config.override(debug_nans=True):
        with pytest.raises(FloatingPointError):
            f(x)
    with ember.disable_jit():
        before = len(calls)
        f(x)
        assert len(calls) == before + 1  # ran op by op
    assert np.isnan(np.asarray(f(x))[0])


def test_eviction_removes_the_fast_path_entry():
    f = ember.jit(lambda x: x - 2)
    with ember.config.override(jit_cache_max_entries=2):
        for n in (1, 2, 1, 2, 3, 4, 1):
            assert f(jnp.ones(n)).tolist() == [-1.0] * n
    assert len(f._fast) <= 2
    assert all(entry in f._cache.entries.values() for _, entry in f._fast.values())


def test_large_inputs_split_across_threads_in_the_dispatcher():
    f = ember.jit(lambda x: jnp.sqrt(x) + x)
    x = jnp.arange(1 << 20, dtype=jnp.float32)
    want = np.sqrt(np.arange(1 << 20, dtype=np.float32)) + np.arange(1 << 20, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-6)


_PROCESS = """
import numpy as np, ember, ember.numpy as jnp
from ember.backends.cpu import entry
f = ember.jit(lambda x, y: jnp.exp(x) * y - 1.0)
f(jnp.arange(5.0), jnp.full(5, 2.0))
entry.prepare_dispatcher().wait()  # (the first call started building the dispatcher)
x, y = jnp.arange(5.0), jnp.full(5, 2.0)
outs = [np.asarray(f(x, y)) for _ in range(3)]
print(len(f._fast), all((o == outs[0]).all() for o in outs), outs[0].tolist())
"""


def test_a_new_process_loads_the_dispatcher_from_the_disk_cache(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path), "EMBER_PERSISTENT_CACHE": "1"}
    runs = [subprocess.run([sys.executable, "-c", _PROCESS], env=env, text=True, capture_output=True, check=True)
            for _ in range(2)]  # the second process loads all its machine code from disk
    want = (np.exp(np.arange(5.0, dtype=np.float32)) * 2 - 1).tolist()
    for run in runs:
        fast, same, values = run.stdout.split(" ", 2)
        assert same == "True"
        np.testing.assert_allclose(eval(values), want, rtol=1e-6)
        assert fast == ("1" if registry.get().name == "cpu" else "0")


_PENDING = """
import threading
import numpy as np, ember, ember.numpy as jnp
from ember.backends.cpu import entry
release, build = threading.Event(), entry._Dispatcher.__init__
def slow_build(self):
    release.wait()
    build(self)
entry._Dispatcher.__init__ = slow_build  # the dispatcher is still being built while f runs
f = ember.jit(lambda x: x * 2.0 + 1.0)
x = jnp.arange(4.0)
before = [np.asarray(f(x)).tolist() for _ in range(4)]
pending = (entry.ready_dispatcher() is None, len(f._fast))
release.set()
entry.prepare_dispatcher().wait()
after = [np.asarray(f(x)).tolist() for _ in range(2)]
print(pending, len(f._fast), before == [[1.0, 3.0, 5.0, 7.0]] * 4, after == before[:2])
"""


@cpu_only
def test_calls_do_not_wait_for_the_dispatcher_and_use_it_once_it_is_built(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path), "EMBER_PERSISTENT_CACHE": "1"}
    run = subprocess.run([sys.executable, "-c", _PENDING], env=env, text=True, capture_output=True, check=True)
    assert run.stdout.split() == ["(True,", "0)", "1", "True", "True"]


_STARVED = """
import threading
import numpy as np, ember, ember.numpy as jnp
from ember.backends.cpu import entry
ember.config.update("tiered_compilation", False)
release, build = threading.Event(), entry._Dispatcher.__init__
def slow_build(self):
    release.wait()
    build(self)
entry._Dispatcher.__init__ = slow_build
entry.BUILD_SECONDS = 0.0  # (any call taken without the dispatcher has paid for its build)
threading.Timer(0.2, release.set).start()
f = ember.jit(lambda x: x * 2.0 + 1.0)
x = jnp.arange(4.0)
results = [np.asarray(f(x)).tolist() for _ in range(2)]
print(entry.ready_dispatcher() is not None, release.is_set(), results == [[1.0, 3.0, 5.0, 7.0]] * 2)
"""


@cpu_only
def test_calls_that_have_paid_for_the_dispatchers_build_wait_for_it(tmp_path):
    """Calls back to back starve the background build of the interpreter: once the calls taken
    without it have spent ``BUILD_SECONDS``, the next one waits for the build (its second call,
    with the figure at 0: the first starts the build)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path), "EMBER_PERSISTENT_CACHE": "1"}
    run = subprocess.run([sys.executable, "-c", _STARVED], env=env, text=True, capture_output=True, check=True)
    assert run.stdout.split() == ["True", "True", "True"]


@cpu_only
def test_pytree_arguments_take_the_fast_path_keyed_by_their_structure(monkeypatch):
    """A training step's parameters come as a pytree: flattened, their leaves run the same native
    call; another structure, dict keys or a NumPy leaf is another key (or the general path)."""
    f = ember.jit(lambda p, g: ember.tree_util.tree_map(lambda a, b: a - 0.5 * b, p, g))
    params = {"w": jnp.ones((2, 3)), "b": (jnp.arange(3.0), jnp.zeros(()))}
    grads = {"w": jnp.full((2, 3), 2.0), "b": (jnp.ones(3), jnp.ones(()))}
    want = ember.tree_util.tree_map(lambda a, b: np.asarray(a) - 0.5 * np.asarray(b), params, grads)
    f(params, grads), f(params, grads)
    assert _fast_entries(f) == 1
    general = []
    original = type(f).call_whole
    monkeypatch.setattr(type(f), "call_whole", lambda self, *a: general.append(1) or original(self, *a))
    outs, hits = _hits(f, params, grads)
    assert hits == 3 and not general
    for out in outs:
        assert ember.tree_util.tree_structure(out) == ember.tree_util.tree_structure(want)
        for a, b in zip(ember.tree_util.tree_leaves(out), ember.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(np.asarray(a), b)
    other = {"w": params["w"], "c": params["b"]}  # another key: traced anew, right values
    np.testing.assert_array_equal(f(other, {"w": grads["w"], "c": grads["b"]})["w"], want["w"])
    f({"w": np.ones((2, 3), np.float32), "b": params["b"]}, grads)  # a NumPy leaf: the general path
    assert general
    with ember.config.override(debug_nans=True):  # config changes empty the table
        np.testing.assert_array_equal(f(params, grads)["w"], want["w"])


def test_numpy_arguments_take_the_hit_path_copied_and_converted(monkeypatch):
    """NumPy arrays (positional or pytree leaves) are keyed by dtype and shape: from the second
    call on they take the hit path, copied (the caller may write to them) and converted to the
    traced type (float64 -> float32 without x64), as the general path does."""
    f = ember.jit(lambda x, p: (x * 2.0 + p["b"], p["n"] + 1))
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    p = {"b": np.ones(3, np.float32), "n": np.int32(4)}
    first = f(x, p)
    general = []
    original = type(f).call_whole
    monkeypatch.setattr(type(f), "call_whole", lambda self, *a: general.append(1) or original(self, *a))
    f(x, p)  # (the first hit enables the fast path)
    general.clear()
    outs, hits = _hits(f, x, p)
    assert hits == 3 and not general
    for out, n in outs:
        assert out.dtype == np.float32 and first[0].dtype == np.float32 and n.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(out), x * 2 + 1)
        assert int(n) == 5
    y = f(x, p)[0]
    x[:] = -1  # the caller writes to its array: what was passed is kept
    np.testing.assert_array_equal(np.asarray(y), np.arange(6).reshape(2, 3) * 2 + 1)
    np.testing.assert_array_equal(np.asarray(f(x, p)[0]), np.full((2, 3), -1.0))
    # another shape or dtype is another key: traced anew, right values
    np.testing.assert_array_equal(np.asarray(f(np.ones(3, np.int32), p)[0]), np.full(3, 3.0))
    np.testing.assert_array_equal(np.asarray(f(np.ones((1, 3), np.float32), p)[0]), np.full((1, 3), 3.0))
    assert len(general) == 2


def _mlp_step(params, x, y):
    def loss(params):
        h = x
        for w, b in params[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = params[-1]
        return jnp.mean((h @ w + b - y) ** 2)
    value, grads = ember.value_and_grad(loss)(params)
    return value, ember.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


@cpu_only
@pytest.mark.parametrize("rows", [64, 1024])  # 1024 rows: the first layer's products split over threads
def test_programs_with_products_run_in_one_native_call(rows, monkeypatch):
    """A training step's products are gemm calls in the dispatcher's plan, between its kernels:
    the step is one native call, with the reference interpreter's values."""
    from ember.backends.cpu import gemm
    gemm.gemm_function(np.dtype(np.float32))  # (compiled: else the plan waits for it, tested below)
    rng = np.random.default_rng(0)
    sizes = [48, 256, 32, 4]
    params = [(jnp.asarray(rng.standard_normal((m, n)).astype(np.float32) * 0.2), jnp.zeros(n))
              for m, n in zip(sizes[:-1], sizes[1:])]
    x = jnp.asarray(rng.standard_normal((rows, sizes[0])).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((rows, sizes[-1])).astype(np.float32))
    f = ember.jit(_mlp_step)
    f(params, x, y), f(params, x, y)
    executable = next(iter(f._cache.entries.values())).executable
    program = getattr(executable, "native", executable).program
    assert program.report.contractions >= 5 and program.plan is not None
    assert _fast_entries(f) == 1
    general = []
    original = type(f).call_whole
    monkeypatch.setattr(type(f), "call_whole", lambda self, *a: general.append(1) or original(self, *a))
    outs, hits = _hits(f, params, x, y)
    assert hits == 3 and not general
    with ember.config.override(backend="reference"):
        want = ember.jit(_mlp_step)(params, x, y)
    for out in outs:
        for a, b in zip(ember.tree_util.tree_leaves(out), ember.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-6)


_GEMM_PENDING = """
import threading
import numpy as np, ember, ember.numpy as jnp
from ember.backends.cpu import entry, gemm
entry.dispatcher()
release, build = threading.Event(), gemm._build
def slow_build(*args):
    release.wait()
    build(*args)
gemm._build = slow_build  # the product is still compiling while f runs
f = ember.jit(lambda a, b: jnp.tanh(a @ b) @ b)
a, b = jnp.ones((64, 64)) * 0.01, jnp.eye(64)  # (products this large are not fused into kernels)
want = np.tanh(np.full((64, 64), 0.01, np.float32))
before = [np.asarray(f(a, b)) for _ in range(4)]
pending = len(f._fast)
release.set()
ember.wait_for_compiles()  # (the products compiling in the background)
after = [np.asarray(f(a, b)) for _ in range(3)]
same = all(np.allclose(o, want, rtol=1e-6) for o in before + after)
print(pending, len(f._fast), same)
"""


@cpu_only
def test_a_plan_with_products_waits_for_gemm_and_calls_never_do(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path), "EMBER_PERSISTENT_CACHE": "1", "EMBER_GEMM": "own"}
    run = subprocess.run([sys.executable, "-c", _GEMM_PENDING], env=env, text=True, capture_output=True, check=True)
    assert run.stdout.split() == ["0", "1", "True"]


@cpu_only
def test_programs_with_host_steps_run_in_one_native_call_and_raise_what_the_host_raised():
    """A sort (no native code) and a callback are steps that the dispatcher calls back; an
    exception raised there is raised by the call (as JAX's runtime error carrying it), and the
    next call runs cleanly."""
    from ember.backends.cpu import runner as programs

    def check(v):
        if (v < 0).any():
            raise ValueError("negative value in the callback")
        return v

    def f(x):
        y = jnp.sort(jnp.exp(x) - 1.0) * 2.0
        z = ember.pure_callback(check, ember.ShapeDtypeStruct(y.shape, y.dtype), y)
        return z + 1.0, jnp.argsort(x)

    g = ember.jit(f)
    x = jnp.asarray([0.5, 0.25, 1.0])
    g(x), g(x)
    executable = next(iter(g._cache.entries.values())).executable
    program = getattr(executable, "native", executable).program
    assert program.plan is not None and any(isinstance(s, programs.FallbackStep) for s in program.steps)
    assert _fast_entries(g) == 1
    for _ in range(3):
        z, order = g(x)
        np.testing.assert_allclose(np.asarray(z), np.sort(np.expm1([0.5, 0.25, 1.0])) * 2 + 1, rtol=1e-6)
        assert order.tolist() == [1, 0, 2]
        with pytest.raises(ember.errors.JaxRuntimeError, match="negative value in the callback") as raised:
            g(jnp.asarray([-0.5, 0.25, 1.0]))
        assert isinstance(raised.value.__cause__, ValueError)


@cpu_only
def test_the_work_area_is_kept_between_calls_and_calls_from_threads_get_their_own():
    """A plan's temporaries live in one kept block (taken by one call at a time); calls that find
    it taken, from other threads, run on a block of their own, with the same answers."""
    import threading

    f = ember.jit(lambda x: jnp.tanh(x @ x.T) @ jnp.exp(-x) + x.sum())  # (temporaries: in the work area)
    xs = [jnp.asarray(np.random.default_rng(i).standard_normal((96, 96)).astype(np.float32) * 0.1)
          for i in range(4)]
    want = [np.asarray(f(x)) for x in xs]
    # The dispatcher's plan waits for the product's background compile (slow on a busy machine).
    assert background.drain(timeout=300)
    f(xs[0])
    executable = next(iter(f._cache.entries.values())).executable
    program = getattr(executable, "native", executable).program
    assert program.dispatch_plan() is not None and program.arena_bytes > 0
    block = program._work_cache.cell[0]
    assert block != 0 and program._work_cache.cell[1] == 0  # kept, and given back
    for x, w in zip(xs, want):
        np.testing.assert_array_equal(np.asarray(f(x)), w)
    assert program._work_cache.cell[0] == block
    errors = []

    def calls(k):
        try:
            for _ in range(200):
                np.testing.assert_array_equal(np.asarray(f(xs[k])), want[k])
        except Exception as e:  # (reported below)
            errors.append(e)

    threads = [threading.Thread(target=calls, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and program._work_cache.cell[1] == 0


@cpu_only
def test_pytree_arguments_with_python_scalar_leaves_take_the_fast_path(monkeypatch):
    """``step(i, state)``, a step number and a pytree of Arrays (JAX's examples call their
    optimizers so): keyed by the structure and the scalar's type, the scalar made an Array of its
    traced type; another type of scalar is another key."""
    f = ember.jit(lambda i, state: (state[0] * i + state[1]["b"], i + 1))
    state = (jnp.arange(3.0), {"b": jnp.ones(3)})
    f(2, state), f(2, state)
    assert _fast_entries(f) == 1
    general = []
    original = type(f).call_whole
    monkeypatch.setattr(type(f), "call_whole", lambda self, *a: general.append(1) or original(self, *a))
    for i in (0, 3, -7):
        out, j = f(i, state)
        assert out.tolist() == [1.0, 1.0 + i, 1.0 + 2 * i] and j.tolist() == i + 1
        assert j.dtype == jnp.int32 and j.weak_type
    assert not general
    out, j = f(1.5, state)  # a float: another key, traced anew
    assert general and out.tolist() == [1.0, 2.5, 4.0] and j.dtype == jnp.float32
    with pytest.raises(OverflowError, match=r"argument path is i\. Got <class 'int'> with value 1099511627776"):
        f(2**40, state)  # (the general path's error for an int out of int32's range)
    with pytest.raises(OverflowError, match=r"argument path is state\[1\]\['b'\]\. Got <class 'int'>"):
        f(1, (state[0], {"b": 2**31}))


def test_shardings_that_are_trees_of_none_take_the_fast_path():
    # flax.nnx passes out_shardings=(None, None, None): JAX's "unspecified", no placement to do
    f = ember.jit(lambda x: (x + 1, {"y": x * 2}), in_shardings=(None,), out_shardings=(None, {"y": None}))
    x = jnp.arange(3.0)
    for _ in range(3):
        a, b = f(x)
        assert a.tolist() == [1.0, 2.0, 3.0] and b["y"].tolist() == [0.0, 2.0, 4.0]
    assert _fast_entries(f) == 1
    placed = ember.jit(lambda x: x + 1, out_shardings=ember.devices()[0])  # a placement: the general path
    placed(x), placed(x)
    assert _fast_entries(placed) == 0
