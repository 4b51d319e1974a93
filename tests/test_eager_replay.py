"""Eager composite functions replayed (``ember.runtime.replay``): a signature's first call runs the
function, the second traces it, later calls replay the program, with runs of exact operations on
native code (``exact=True``: every call computes what the function does directly, bit for bit) or the
whole program once it pays (``exact=False``: the reference's bits until then, then native math's
values, which equal them to rounding)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.numpy as jnp
from ember import lax, random
from ember.backends.cpu import entry
from ember.runtime import replay, tiers


@pytest.fixture(autouse=True)
def _payback_at_once(monkeypatch):
    """Replays compile their exact runs at once, not when their calls have paid for it."""
    monkeypatch.setattr(replay, "PAYBACK", 0.0)


def _calls(fun, *args, n=5, **kwargs):
    """``fun`` called ``n`` times, then once more after the background compiles: every result."""
    results = [fun(*args, **kwargs) for _ in range(n)]
    tiers.wait_for_compiles()
    return [*results, fun(*args, **kwargs)]


def _program_of(f, which=lambda e: True):
    """The replayed program of ``f`` (a ``replayed`` function) that ``which`` picks."""
    return next(e for k, e in replay._programs.items()
                if k[0] is f.__wrapped__ and isinstance(e, replay._Replay) and which(e))


def _same_bits(results):
    first = np.asarray(results[0])
    for r in results[1:]:
        r = np.asarray(r)
        assert r.dtype == first.dtype and r.shape == first.shape
        assert r.tobytes() == first.tobytes()


def test_a_replay_compiles_once_its_calls_have_paid_for_it(monkeypatch):
    monkeypatch.setattr(replay, "PAYBACK", 1.0)

    @replay.replayed
    def f(x):
        return lax.shift_left(lax.add(lax.xor(x, x), x), jnp.uint32(3)) + jnp.uint32(1)

    x = jnp.arange(7, dtype=np.uint32)
    for _ in range(3):
        f(x)
    program = _program_of(f)
    assert program.compile_s is not None and program.steps is program.eqn_steps  # (not yet)
    program.spent = program.compile_s  # (as if its calls had taken that long)
    np.testing.assert_array_equal(f(x), np.arange(7) * 8 + 1)
    assert program.compile_s is None and [params for _, params, _, _ in program.steps] == [None]


def test_a_signature_traces_once_and_replays_after():
    @replay.replayed
    def f(x, scale):
        return jnp.add(x, x) * scale

    x = jnp.arange(5.0)
    before = replay.replay_info()
    results = [f(x, 2.0) for _ in range(4)]
    after = replay.replay_info()
    assert after["traces"] - before["traces"] == 1  # (the second call)
    assert after["replays"] - before["replays"] == 3
    for r in results:
        np.testing.assert_array_equal(np.asarray(r), np.arange(5.0) * 4)
    # Another static value or another argument type is another signature.
    np.testing.assert_array_equal(np.asarray(f(x, 3.0)), np.arange(5.0) * 6)
    np.testing.assert_array_equal(np.asarray(f(jnp.arange(3), 1)), [0, 2, 4])


def test_static_values_of_another_type_or_sign_are_other_signatures():
    @replay.replayed
    def f(x, scale):
        return jnp.multiply(x, scale)

    x = jnp.ones(2)
    for _ in range(3):
        f(x, 0.0)
    assert np.signbit(np.asarray(f(x, -0.0))).all()  # (-0.0 == 0.0, but not the same argument)
    for _ in range(3):
        assert f(jnp.arange(2), 1).dtype == np.int32
    assert f(jnp.arange(2), 1.0).dtype == np.float32  # (1 == 1.0)
    assert f(jnp.arange(2), True).dtype == np.int32



def test_calls_alternating_between_signatures_each_replay_their_own_program():
    @replay.replayed
    def f(x, axis):
        return jnp.sum(x, axis)

    x = jnp.arange(6.0).reshape(2, 3)
    for _ in range(4):  # (each call's signature differs from the last one's)
        np.testing.assert_array_equal(np.asarray(f(x, 0)), [3.0, 5.0, 7.0])
        np.testing.assert_array_equal(np.asarray(f(x, 1)), [3.0, 12.0])
        got = f(x.astype(np.int32), 1)
        assert got.dtype == np.int32 and got.tolist() == [3, 12]
        assert f(x, axis=0).tolist() == [3.0, 5.0, 7.0]  # (a keyword: not the last call's signature)


def test_clearing_the_caches_forgets_the_last_calls_replay():
    @replay.replayed
    def f(x):
        return jnp.add(x, x)

    x = jnp.arange(3.0)
    for _ in range(3):
        f(x)
    ember.clear_caches()
    results = [f(x) for _ in range(3)]  # (run directly, then traced, then replayed)
    assert replay.replay_info()["traces"] == 1 and replay.replay_info()["replays"] == 2
    for r in results:
        np.testing.assert_array_equal(np.asarray(r), [0.0, 2.0, 4.0])

@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(0, 6), max_size=3).map(tuple),
       dtype=st.sampled_from([np.float32, np.float16, np.int32, np.uint8]),
       seed=st.integers(0, 2**31 - 1))
def test_replayed_samplers_give_the_direct_calls_bits(shape, dtype, seed):
    key = random.PRNGKey(seed)
    if np.dtype(dtype).kind == "f":
        _same_bits(_calls(random.normal, key, shape, dtype))
        _same_bits(_calls(random.uniform, key, shape, dtype, -2.0, 3.0))
    else:
        _same_bits(_calls(random.randint, key, shape, 0, 100, dtype))


def test_segments_become_native_code():
    """normal's Threefry rounds and its polynomial are exact operations: after a few calls they run
    as two executables, around the log1p that stays on the reference."""
    key = random.PRNGKey(11)
    _same_bits(_calls(random.normal, key, (13,)))
    program = _program_of(random.normal, lambda e: e.closed.out_avals[0].shape == (13,))
    kinds = ["native" if params is None else p.name for p, params, _, _ in program.steps]
    assert kinds == ["native", "log1p", "native"]
    assert all(getattr(p, "tier", "native") == "native" for p, params, _, _ in program.steps if params is None)
    # Their env holds only what the three steps read and write (a call copies it), not every value
    # of the 170-equation program.
    steps, env, outs = program.plan
    used = {0, *(i for _, _, ins, _ in steps for i in ins),
            *(o for _, _, _, out in steps for o in ([out] if type(out) is int else out)), *outs}
    assert used == set(range(len(env))) and len(env) < len(program.eqn_plan[1]) // 10


def test_typed_keys_and_key_results_replay():
    key = random.key(5)
    _same_bits(_calls(random.normal, key, (4,)))
    rbg = random.key(5, impl="rbg")
    _same_bits(_calls(random.uniform, rbg, (4,)))

    @replay.replayed
    def split_and_draw(k):
        a, b = random.split(k)
        return b, random.normal(a, (3,))

    results = _calls(split_and_draw, key)
    for b, x in results:
        assert b.dtype == key.dtype
        np.testing.assert_array_equal(random.key_data(b), random.key_data(results[0][0]))
        np.testing.assert_array_equal(x, results[0][1])


def test_under_a_trace_the_function_runs_directly():
    key = random.PRNGKey(0)
    for _ in range(4):
        random.normal(key, (3,))
    eager = np.asarray(random.normal(key, (3,)))
    jitted = ember.jit(lambda k: random.normal(k, (3,)))(key)
    np.testing.assert_allclose(jitted, eager, rtol=1e-6)
    keys = random.split(key, 3)
    batched = ember.vmap(lambda k: random.normal(k, (3,)))(keys)
    np.testing.assert_array_equal(batched[1], random.normal(keys[1], (3,)))
    grads = ember.grad(lambda m: jnp.sum(random.normal(key, (3,)) * m))(1.0)
    np.testing.assert_allclose(grads, eager.sum(), rtol=1e-6)


def test_a_function_that_does_not_trace_runs_directly():
    @replay.replayed
    def branchy(x):
        return lax.neg(x) if float(x[0]) > 0 else x  # (a Python branch on a value)

    before = replay.replay_info()
    assert [float(branchy(jnp.array([v, 0.0]))[0]) for v in (1.0, -1.0, 2.0, -2.0)] == [-1.0, -1.0, -2.0, -2.0]
    assert replay.replay_info()["traces"] == before["traces"]


def test_disable_jit_runs_the_function_itself():
    ran = []

    @replay.replayed
    def f(x):
        ran.append(1)
        return jnp.add(x, 1.0)

    x = jnp.zeros(2)
    with ember.disable_jit():
        for _ in range(4):
            np.testing.assert_array_equal(f(x), [1.0, 1.0])
    assert len(ran) == 4


def test_unhashable_arguments_run_directly():
    key = random.PRNGKey(1)
    bounds = np.float32([0.0, 1.0])  # (a NumPy array: not part of a signature)
    first = random.uniform(key, (2,), minval=bounds, maxval=2.0)
    _same_bits([first, *(random.uniform(key, (2,), minval=bounds, maxval=2.0) for _ in range(4))])


def test_bad_arguments_raise_on_every_call():
    key = random.PRNGKey(0)
    for _ in range(4):
        with pytest.raises(ValueError, match="dtype argument to `normal` must be a float or complex dtype"):
            random.normal(key, (2,), np.int32)


def test_a_config_change_traces_again():
    key = random.PRNGKey(2)
    for _ in range(3):
        assert random.uniform(key, (2,)).dtype == np.float32
    with ember.config.override(enable_x64=True):
        assert random.uniform(key, (2,)).dtype == np.float64
        assert random.uniform(key, (2,)).dtype == np.float64
    assert random.uniform(key, (2,)).dtype == np.float32


def test_debug_checks_name_the_operation_even_in_a_native_segment():
    @replay.replayed
    def f(x):
        d = jnp.subtract(x, x)
        return jnp.add(jnp.multiply(jnp.divide(d, d), 2.0), 1.0)  # (0 / 0: a NaN from an exact run)

    x = jnp.ones(3)
    results = _calls(f, x)
    assert all(np.isnan(np.asarray(r)).all() for r in results)
    program = _program_of(f)
    assert any(params is None for _, params, _, _ in program.steps)  # (compiled)
    with ember.config.override(debug_nans=True):
        for _ in range(3):
            with pytest.raises(FloatingPointError, match="invalid value \\(nan\\) encountered in div"):
                f(x)


# Staged jnp and nn functions (``numpy.staging``: jitted in JAX) replay eagerly too.
STAGED_CALLS = [
    ("var", lambda a: jnp.var(a, axis=-1)),
    ("std", lambda a: jnp.std(a, ddof=1)),
    ("clip", lambda a: jnp.clip(a, -1.0, 0.5)),
    ("linspace", lambda a: jnp.linspace(0.0, 3.0, 7)),
    ("log_softmax", lambda a: ember.nn.log_softmax(a)),
    ("relu", lambda a: ember.nn.relu(a)),
    ("cumsum", lambda a: jnp.cumsum(a, axis=0)),
    ("sort", lambda a: jnp.sort(a, axis=-1)),
    ("round", lambda a: jnp.round(a, 2)),
    ("nan_to_num", lambda a: jnp.nan_to_num(a)),
    ("diff", lambda a: jnp.diff(a, axis=1)),
    ("median", lambda a: jnp.median(a, axis=0)),
    ("isclose", lambda a: jnp.isclose(a, 0.5)),
    ("tril", lambda a: jnp.tril(a)),
    ("hypot", lambda a: jnp.hypot(a, 2.0)),
]


@pytest.mark.parametrize("name,call", STAGED_CALLS, ids=[c[0] for c in STAGED_CALLS])
@settings(max_examples=8, deadline=None)
@given(values=st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.25, 1e-3, 7.0, np.inf, -np.inf, np.nan]), min_size=12,
                       max_size=12))
def test_staged_functions_replay_the_direct_calls_bits_then_run_native(name, call, values):
    a = jnp.asarray(np.float32(values).reshape(3, 4))
    with ember.disable_jit():  # (the function run directly: what every replay must equal)
        direct = call(a)
    replay.clear_replays()  # (each example starts from a first call; the fixture restores PAYBACK)
    replay.PAYBACK = np.inf
    _same_bits([direct, *(call(a) for _ in range(4))])  # (replayed on the eager engine: the reference's bits)
    replay.PAYBACK = 0.0
    direct = np.asarray(direct)
    for r in _calls(call, a):  # (the whole program: its quick tier, then its native code)
        r = np.asarray(r)
        assert r.dtype == direct.dtype and r.shape == direct.shape
        np.testing.assert_allclose(r, direct, rtol=1e-5, atol=1e-6)  # (a sum's zero may differ in sign:
        # the native cumsum starts from +0 as XLA's does, NumPy's from the first element)


@pytest.mark.parametrize("fun,kwargs", [(ember.nn.log_softmax, {}), (ember.nn.softmax, {"axis": 0}),
                                        (jnp.linalg.norm, {}), (jnp.var, {"axis": 1})])
def test_a_function_jax_jits_runs_as_one_native_program_once_it_pays(fun, kwargs):
    x = jnp.asarray(np.random.default_rng(0).standard_normal((5, 7)).astype(np.float32))
    replay.clear_replays()
    results = _calls(fun, x, **kwargs)
    (program,) = replay._programs.values()
    assert not program.exact and program.whole is not None
    assert getattr(program.whole, "tier", "native") == "native"  # (tiered, or shared with a jit of the same program)
    np.testing.assert_allclose(results[-1], results[0], rtol=1e-6, atol=1e-7)
    entry.dispatcher()  # (built now, where the background has not yet: then the calls take jit's hit path)
    fast = [np.asarray(fun(x, **kwargs)) for _ in range(3)]
    assert program.fast is not None  # (the whole executable's fast runner: one native dispatcher call)
    _same_bits([np.asarray(results[-1]), *fast])
    with ember.config.override(debug_nans=True):  # (softmax: op by op; the staged ones: their jit)
        np.testing.assert_allclose(fun(x, **kwargs), results[0], rtol=1e-6, atol=1e-7)


def test_a_whole_program_with_no_machine_code_leaves_the_replay_on_its_own_steps():
    """``sort``'s native program is one step that runs the reference's sort from Python (no machine
    code): once it is compiled, the replay drops it and keeps its own steps, the direct call's bits."""
    v = jnp.asarray(np.random.default_rng(2).standard_normal(10).astype(np.float32))
    with ember.disable_jit():
        direct = jnp.sort(v)
    replay.clear_replays()
    results = _calls(jnp.sort, v)
    (program,) = replay._programs.values()
    assert program.whole is None and program.fast is None and not program.asks_fast
    _same_bits([direct, *results, jnp.sort(v)])


def test_debug_nans_checks_an_eager_staged_functions_outputs_as_jax_checks_its_jit():
    """``var`` makes a NaN it does not keep (the variance of no elements): not an error, as in JAX;
    a NaN in the output is, named by the op-by-op rerun."""
    x = jnp.asarray(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    with ember.config.override(debug_nans=True):
        for _ in range(3):
            np.testing.assert_allclose(jnp.var(x, axis=1), np.var(np.arange(12.0).reshape(3, 4), axis=1))
        with pytest.raises(FloatingPointError, match="invalid value \\(nan\\) encountered in"):
            jnp.var(x, axis=1, ddof=4)  # (N - ddof = 0)


# JAX runs these compiled eagerly (jitted inline, or their body jitted under another name; ``take`` is
# staged as ``_take``): ember replays them, and traces them as JAX does.
REPLAYED_CALLS = [
    ("matmul", lambda a: a @ a.T), ("dot", lambda a: jnp.dot(a, a[0])), ("outer", lambda a: jnp.outer(a[0], a[1])),
    ("inner", lambda a: jnp.inner(a, a)), ("vdot", lambda a: jnp.vdot(a, a)), ("mean", lambda a: jnp.mean(a, axis=1)),
    ("average", lambda a: jnp.average(a, axis=0, weights=a[:, 0] ** 2)), ("argmax", lambda a: jnp.argmax(a, axis=1)),
    ("argmin", lambda a: jnp.argmin(a)), ("square", jnp.square), ("pad", lambda a: jnp.pad(a, ((1, 0), (0, 2)))),
    ("roll", lambda a: jnp.roll(a, 2, axis=1)), ("split", lambda a: jnp.split(a, 2, axis=1)),
    ("stack", lambda a: jnp.stack([a, a * 2])), ("tile", lambda a: jnp.tile(a, (2, 1))),
    ("sigmoid", ember.nn.sigmoid), ("_take", lambda a: jnp.take(a, jnp.asarray([3, 0, -1]), axis=1)),
]


@pytest.mark.parametrize("name,call", REPLAYED_CALLS, ids=[c[0] for c in REPLAYED_CALLS])
def test_functions_jax_runs_compiled_replay_eagerly_and_trace_as_jaxs(name, call):
    a = jnp.asarray(np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32))
    with ember.disable_jit():
        direct = call(a)
    before = replay.replay_info()
    results = _calls(call, a)  # (PAYBACK 0: the whole program native once the compiles are done)
    after = replay.replay_info()
    assert after["traces"] > before["traces"] and after["replays"] - before["replays"] >= 4
    for result in results:
        for r, d in zip(ember.tree_util.tree_leaves(result), ember.tree_util.tree_leaves(direct)):
            assert r.dtype == d.dtype and r.shape == d.shape
            np.testing.assert_allclose(np.asarray(r), np.asarray(d), rtol=1e-5, atol=1e-6)
    staged = f"name={name}" in str(ember.make_jaxpr(call)(a))  # (JAX's jit equation: only _take's)
    assert staged == (name == "_take")


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint32, np.int64, np.uint64])
def test_integer_division_and_remainder_are_exact_on_native_code(dtype):
    """``_exact`` counts integer ``div`` and ``rem`` (a randint's ``rem`` then stays in its native
    segment): native code gives the reference's bits on every pair of 8-bit integers, and on the
    edges (0, -1, MIN, MAX) and random pairs of wider ones."""
    info = np.iinfo(dtype)
    with ember.config.override(enable_x64=True):
        if info.bits == 8:
            x, y = (g.ravel().astype(dtype) for g in np.meshgrid(np.arange(info.min, info.max + 1),
                                                                np.arange(info.min, info.max + 1)))
        else:
            edge = np.array(sorted({info.min, info.min + 1, max(info.min, -1), 0, 1, 2, 7, info.max - 1, info.max}),
                            dtype=object).astype(dtype)
            rng = np.random.default_rng(0)
            x = np.concatenate([np.repeat(edge, len(edge)), rng.integers(info.min, info.max, 4000, dtype, True)])
            y = np.concatenate([np.tile(edge, len(edge)), rng.integers(info.min, info.max, 4000, dtype, True)])
            y[::9] = 0
        for f in (lax.div, lax.rem):
            eqn = ember.make_jaxpr(f)(x, y).jaxpr.eqns[0]
            assert replay._exact(eqn)
            native = np.asarray(ember.jit(f)(x, y))
            with ember.config.override(backend="reference"):
                reference = np.asarray(ember.jit(f)(x, y))
            assert native.dtype == reference.dtype == dtype and native.tobytes() == reference.tobytes()
