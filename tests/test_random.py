"""ember.random: the same keys and values as jax.random (bit for bit where the arithmetic is
exact), eagerly, under jit, vmap and grad; statistical sanity checks that need no JAX; errors."""
from __future__ import annotations

import math
import pathlib
import re
import types
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as jnp
from ember import errors, lax, random
from ember.runtime import replay, tiers


@pytest.fixture(scope="module")
def jax_random():
    pytest.importorskip("jax")
    import jax.random

    return jax.random


@pytest.fixture
def jax_and_ember_x64(jax_random, x64):
    """64-bit types on in both libraries."""
    import jax

    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", False)


def assert_same(actual, expected, ulps: int = 0) -> None:
    """Equal dtype, shape and values: exactly when ``ulps`` is 0, else within ``ulps`` units in the
    last place of max(|expected|, 1). The floor at 1 is because a last-bit difference inside a
    transcendental (log near 1, erf) becomes an absolute, not relative, error after cancellation."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
        f"{actual.dtype}{actual.shape} != {expected.dtype}{expected.shape}")
    if ulps == 0:
        np.testing.assert_array_equal(actual, expected)
        return
    wide = expected.astype(np.float64)
    unit = np.spacing(np.maximum(np.abs(expected), 1).astype(expected.dtype)).astype(np.float64)
    error = np.abs(actual.astype(np.float64) - wide) / unit
    assert error.max(initial=0) <= ulps, f"{error.max()} units apart (allowed {ulps})"


LOGITS = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))
GRID = (np.arange(12, dtype=np.float32).reshape(3, 4) / 3)
WEIGHTS = np.array([0.1, 0.2, 0.3, 0.15, 0.25], np.float32)

# name, draw (given the random module and a key), allowed ulps against JAX (0: bit for bit).
# Not bit for bit: samplers applying log / log1p / erf (XLA's and ember's round differently in
# the last bit), and uniform with bounds other than [0, 1): XLA's CPU backend fuses
# u * (maxval - minval) + minval into one fused multiply-add, ember rounds the product first.
DRAWS = [
    ("split", lambda r, k: r.split(k, 5), 0),
    ("split_shape", lambda r, k: r.split(k, (2, 3)), 0),
    ("fold_in", lambda r, k: r.fold_in(k, 12345), 0),
    ("bits", lambda r, k: r.bits(k, (7, 3)), 0),
    ("bits_uint8", lambda r, k: r.bits(k, (9,), np.uint8), 0),
    ("bits_uint16", lambda r, k: r.bits(k, (2, 5), np.uint16), 0),
    ("uniform", lambda r, k: r.uniform(k, (4, 50)), 0),
    ("uniform_scalar", lambda r, k: r.uniform(k), 0),
    ("uniform_float16", lambda r, k: r.uniform(k, (64,), np.float16), 0),
    ("uniform_bfloat16", lambda r, k: r.uniform(k, (64,), ml_dtypes.bfloat16), 0),
    ("uniform_bounds", lambda r, k: r.uniform(k, (50, 4), minval=-3.0, maxval=np.float32([1, 2, 3, 4])), 8),
    ("normal", lambda r, k: r.normal(k, (2000,)), 4),
    ("normal_float16", lambda r, k: r.normal(k, (64,), np.float16), 0),
    ("normal_bfloat16", lambda r, k: r.normal(k, (64,), ml_dtypes.bfloat16), 0),
    ("randint", lambda r, k: r.randint(k, (200,), 0, 10), 0),
    ("randint_wide", lambda r, k: r.randint(k, (50,), -2**31, 2**31 - 1), 0),
    ("randint_bounds_broadcast", lambda r, k: r.randint(k, (3, 4), np.int32([[0], [5], [10]]), 20), 0),
    ("randint_empty_range", lambda r, k: r.randint(k, (5,), 5, 5), 0),
    ("randint_uint8_full", lambda r, k: r.randint(k, (50,), 0, 256, np.uint8), 0),
    ("randint_int8", lambda r, k: r.randint(k, (50,), -200, 200, np.int8), 0),
    ("randint_uint32", lambda r, k: r.randint(k, (50,), 0, 2**31 - 1, np.uint32), 0),
    ("bernoulli", lambda r, k: r.bernoulli(k, 0.3, (200,)), 0),
    ("bernoulli_p_shape", lambda r, k: r.bernoulli(k, np.linspace(0, 1, 10, dtype=np.float32)), 0),
    ("bernoulli_high", lambda r, k: r.bernoulli(k, 1e-3, (200,), mode="high"), 0),
    ("permutation_int", lambda r, k: r.permutation(k, 20), 0),
    ("permutation_two_rounds", lambda r, k: r.permutation(k, 2000), 0),
    ("permutation_axis", lambda r, k: r.permutation(k, np.arange(12).reshape(3, 4), axis=1), 0),
    ("permutation_independent",
     lambda r, k: r.permutation(k, np.arange(12).reshape(3, 4), axis=1, independent=True), 0),
    ("categorical", lambda r, k: r.categorical(k, LOGITS, shape=(100, 2)), 0),
    ("categorical_axis0", lambda r, k: r.categorical(k, GRID, axis=0), 0),
    ("categorical_no_replace", lambda r, k: r.categorical(k, GRID, shape=(2, 3), replace=False), 0),
    ("choice", lambda r, k: r.choice(k, 10, (5,)), 0),
    ("choice_array_axis", lambda r, k: r.choice(k, GRID, (2,), axis=1), 0),
    ("choice_no_replace", lambda r, k: r.choice(k, 10, (5,), replace=False), 0),
    ("choice_p", lambda r, k: r.choice(k, 5, (20,), p=WEIGHTS), 0),
    ("choice_p_no_replace", lambda r, k: r.choice(k, 5, (3,), replace=False, p=WEIGHTS), 0),
    ("rademacher", lambda r, k: r.rademacher(k, (100,)), 0),
    ("gumbel", lambda r, k: r.gumbel(k, (2000,)), 8),
    ("gumbel_high", lambda r, k: r.gumbel(k, (500,), mode="high"), 8),
    ("exponential", lambda r, k: r.exponential(k, (2000,)), 2),
    ("laplace", lambda r, k: r.laplace(k, (2000,)), 2),
    ("logistic", lambda r, k: r.logistic(k, (2000,)), 8),
    ("truncated_normal", lambda r, k: r.truncated_normal(k, -1.0, 2.0, (2000,)), 16),
]
SEEDS = (0, 42)


@pytest.fixture(scope="module")
def jax_draws(jax_random):
    """JAX's values of every entry of DRAWS for each seed, from one jitted program (one XLA
    compile instead of one per sampler keeps this file fast)."""
    import jax

    every_draw = jax.jit(lambda k: [draw(jax_random, k) for _, draw, _ in DRAWS])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_seed = [[np.asarray(x) for x in every_draw(jax_random.PRNGKey(seed))] for seed in SEEDS]
    return {name: [values[i] for values in by_seed] for i, (name, _, _) in enumerate(DRAWS)}


@pytest.mark.parametrize("name,draw,ulps", DRAWS, ids=[d[0] for d in DRAWS])
def test_draws_match_jax(jax_draws, name, draw, ulps):
    for seed, expected in zip(SEEDS, jax_draws[name]):
        assert_same(draw(random, random.PRNGKey(seed)), expected, ulps)


def assert_repeated_draws_keep_their_bits(draw, monkeypatch) -> None:
    """A signature's eager calls run directly, then trace and replay, then replay with native
    segments once they pay (``runtime.replay``, here at once): every call gives the first call's
    bits."""
    key = random.PRNGKey(3)
    first = np.asarray(draw(random, key))
    for _ in range(2):
        assert_same(draw(random, key), first)
    monkeypatch.setattr(replay, "PAYBACK", 0.0)
    for _ in range(2):
        assert_same(draw(random, key), first)
    tiers.wait_for_compiles()
    assert_same(draw(random, key), first)


@pytest.mark.parametrize("name,draw,ulps", DRAWS, ids=[d[0] for d in DRAWS])
def test_repeated_eager_draws_keep_their_bits(name, draw, ulps, monkeypatch):
    assert_repeated_draws_keep_their_bits(draw, monkeypatch)


@pytest.mark.parametrize("name,draw,ulps", DRAWS, ids=[d[0] for d in DRAWS])
def test_draws_are_the_same_eagerly_and_under_jit(name, draw, ulps):
    """Bit for bit where the arithmetic is exact (eager math is NumPy's, jitted math ember's own)."""
    key = random.PRNGKey(7)
    assert_same(ember.jit(lambda k: draw(random, k))(key), draw(random, key), ulps)


SEED_VALUES = [0, 1, -1, 2**31 - 1, -2**31, 2**31, 2**32 + 7, 2**40 + 5, -2**40, 2**63 - 1, -2**63,
               np.int32(-5), np.uint32(4_000_000_000), np.int64(2**40 + 3), np.uint64(2**63 + 5), np.int8(-3), True]


@pytest.mark.parametrize("seed", SEED_VALUES, ids=repr)
def test_prng_key_of_any_integer_seed_matches_jax(jax_random, seed):
    assert_same(random.PRNGKey(seed), jax_random.PRNGKey(seed))
    assert_same(random.key_data(random.key(seed)), jax_random.key_data(jax_random.key(seed)))


@pytest.mark.parametrize("seed", [-1, 2**40 + 5, -2**40, 2**63 - 1, np.uint64(2**63 + 5)], ids=repr)
def test_prng_key_keeps_the_high_word_with_x64(jax_and_ember_x64, jax_random, seed):
    assert_same(random.PRNGKey(seed), jax_random.PRNGKey(seed))


def test_64_bit_draws_match_jax_with_x64(jax_and_ember_x64, jax_random):
    key, jax_key = random.PRNGKey(3), jax_random.PRNGKey(3)
    assert_same(random.bits(key, (5,)), jax_random.bits(jax_key, (5,)))  # uint64 by default
    assert_same(random.uniform(key, (5,)), jax_random.uniform(jax_key, (5,)))  # float64 by default
    assert_same(random.randint(key, (5,), 0, 2**40), jax_random.randint(jax_key, (5,), 0, 2**40))
    # float64 normal uses ember's accurate erf_inv, not XLA's double-precision polynomial.
    assert_same(random.normal(key, (100,)), jax_random.normal(jax_key, (100,)), ulps=64)


@pytest.fixture(scope="module")
def jax_jitted(jax_random):
    """JAX's samplers jitted with static shapes and dtypes, so that new seeds and bounds reuse
    their compiled code."""
    import jax

    return types.SimpleNamespace(
        bits=jax.jit(jax_random.bits, static_argnums=(1, 2)),
        split=jax.jit(jax_random.split, static_argnums=1),
        fold_in=jax.jit(jax_random.fold_in),
        uniform=jax.jit(jax_random.uniform, static_argnums=(1, 2)),
        randint=jax.jit(jax_random.randint, static_argnums=(1, 4)))


SHAPES = [(), (2, 3)]  # few, as each one compiles JAX's code anew (DRAWS covers more)


@given(seed=st.integers(-2**63, 2**63 - 1), shape=st.sampled_from(SHAPES), data=st.integers(0, 2**32 - 1))
def test_bits_split_and_fold_in_match_jax_for_any_seed(jax_random, jax_jitted, seed, shape, data):
    key, jax_key = random.PRNGKey(seed), jax_random.PRNGKey(seed)
    assert_same(random.bits(key, shape), jax_jitted.bits(jax_key, shape, None))
    assert_same(random.split(key, shape), jax_jitted.split(jax_key, shape))
    assert_same(random.fold_in(key, data), jax_jitted.fold_in(jax_key, np.uint32(data)))


@given(seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from([np.float32, np.float16, ml_dtypes.bfloat16]))
def test_uniform_matches_jax_for_any_seed_and_dtype(jax_random, jax_jitted, seed, dtype):
    assert_same(random.uniform(random.PRNGKey(seed), (16,), dtype),
                jax_jitted.uniform(jax_random.PRNGKey(seed), (16,), dtype))


@given(seed=st.integers(0, 2**32 - 1), bounds=st.tuples(st.integers(-300, 300), st.integers(-300, 300)),
       dtype=st.sampled_from([np.uint8, np.int32]))  # a narrow type (drawn at 32 bits) and the default
def test_randint_matches_jax_for_any_bounds_and_dtype(jax_random, jax_jitted, seed, bounds, dtype):
    info = np.iinfo(dtype)
    low, high = (int(np.clip(b, info.min, info.max)) for b in bounds)
    assert_same(random.randint(random.PRNGKey(seed), (16,), low, high, dtype),
                jax_jitted.randint(jax_random.PRNGKey(seed), (16,), low, high, dtype))


# --- keys under transformations -----------------------------------------------------------------
def test_prng_key_of_a_traced_seed_under_jit_and_vmap():
    make = ember.jit(random.PRNGKey)
    for seed in (-7, 123):
        assert_same(make(np.int32(seed)), random.PRNGKey(seed))
    assert_same(ember.vmap(random.PRNGKey)(jnp.arange(3)), np.array([[0, 0], [0, 1], [0, 2]], np.uint32))


VMAPPED = [
    ("normal", lambda k: random.normal(k, (3,))),
    ("uniform_scalar", lambda k: random.uniform(k, ())),
    ("randint", lambda k: random.randint(k, (4,), 0, 10)),
    ("permutation", lambda k: random.permutation(k, 6)),
    ("choice_no_replace", lambda k: random.choice(k, 5, (3,), replace=False)),
    ("categorical", lambda k: random.categorical(k, LOGITS)),
    ("split", lambda k: random.split(k)),
    ("fold_in", lambda k: random.fold_in(k, 7)),
    ("bernoulli", lambda k: random.bernoulli(k, 0.3, (4,))),
    ("gumbel_high", lambda k: random.gumbel(k, (2,), mode="high")),
]


@pytest.mark.parametrize("name,draw", VMAPPED, ids=[v[0] for v in VMAPPED])
def test_vmap_over_split_keys_equals_a_python_loop(name, draw):
    keys = random.split(random.PRNGKey(0), 5)
    looped = np.stack([np.asarray(draw(k)) for k in keys])
    assert_same(ember.vmap(draw)(keys), looped)
    assert_same(ember.jit(ember.vmap(draw))(keys), looped, ulps=0 if looped.dtype.kind != "f" else 4)


def test_vmap_over_fold_in_data_equals_a_python_loop():
    key = random.PRNGKey(1)
    looped = np.stack([np.asarray(random.fold_in(key, i)) for i in range(4)])
    assert_same(ember.vmap(lambda d: random.fold_in(key, d))(jnp.arange(4)), looped)


def test_grad_flows_to_the_bounds_of_uniform_not_the_key():
    key = random.PRNGKey(2)
    unit = np.asarray(random.uniform(key, (8,)), np.float64)

    def total(lo, hi):
        return jnp.sum(random.uniform(key, (8,), minval=lo, maxval=hi))

    for grad in (ember.grad(total, argnums=(0, 1)), ember.jit(ember.grad(total, argnums=(0, 1)))):
        d_lo, d_hi = grad(1.0, 3.0)
        np.testing.assert_allclose([float(d_lo), float(d_hi)], [np.sum(1 - unit), np.sum(unit)], rtol=1e-5)
    samples = random.normal(key, (4,))
    scale_grad = ember.grad(lambda s: jnp.sum(s * random.normal(key, (4,))))(2.0)
    np.testing.assert_allclose(float(scale_grad), np.sum(np.asarray(samples)), rtol=1e-5)


def test_jit_of_a_reshaped_iota():
    # The counters of every draw: reshape(iota) once crashed the simplifier.
    fn = ember.jit(lambda: lax.reshape(lax.iota(np.uint32, 6), (2, 3)))
    assert_same(fn(), np.arange(6, dtype=np.uint32).reshape(2, 3))


# --- statistics (no JAX needed) -------------------------------------------------------------------
N = 20_000
KEY = random.PRNGKey(2024)


def _sample(draw):
    return np.asarray(draw, np.float64)


def _assert_mean_and_variance(x, mean, variance, sigmas=6.0):
    assert abs(x.mean() - mean) < sigmas * math.sqrt(variance / x.size)
    assert abs(x.var() - variance) < 0.1 * variance


def test_uniform_statistics_and_range():
    x = _sample(random.uniform(KEY, (N,)))
    assert x.min() >= 0 and x.max() < 1
    _assert_mean_and_variance(x, 0.5, 1 / 12)
    y = _sample(random.uniform(KEY, (N,), minval=-2.0, maxval=6.0))
    assert y.min() >= -2 and y.max() < 6
    _assert_mean_and_variance(y, 2.0, 64 / 12)


def test_normal_family_statistics():
    _assert_mean_and_variance(_sample(random.normal(KEY, (N,))), 0.0, 1.0)
    _assert_mean_and_variance(_sample(random.exponential(KEY, (N,))), 1.0, 1.0)
    _assert_mean_and_variance(_sample(random.laplace(KEY, (N,))), 0.0, 2.0)
    _assert_mean_and_variance(_sample(random.logistic(KEY, (N,))), 0.0, math.pi**2 / 3)
    _assert_mean_and_variance(_sample(random.gumbel(KEY, (N,))), 0.5772156649, math.pi**2 / 6)
    t = _sample(random.truncated_normal(KEY, -1.0, 0.5, (N,)))
    assert t.min() > -1 and t.max() < 0.5


def test_discrete_statistics():
    b = np.asarray(random.bernoulli(KEY, 0.3, (N,)))
    assert b.dtype == np.bool_ and abs(b.mean() - 0.3) < 6 * math.sqrt(0.21 / N)
    r = np.asarray(random.randint(KEY, (N,), -3, 7))
    assert r.dtype == np.int32 and set(np.unique(r)) == set(range(-3, 7))
    _assert_mean_and_variance(r.astype(np.float64), 1.5, (10**2 - 1) / 12)
    signs = np.asarray(random.rademacher(KEY, (N,)))
    assert signs.dtype == np.int32 and set(np.unique(signs)) == {-1, 1} and abs(signs.mean()) < 0.05
    counts = np.bincount(np.asarray(random.categorical(KEY, np.log(WEIGHTS), shape=(N,))), minlength=5) / N
    np.testing.assert_allclose(counts, WEIGHTS, atol=0.02)
    counts = np.bincount(np.asarray(random.choice(KEY, 5, (N,), p=WEIGHTS)), minlength=5) / N
    np.testing.assert_allclose(counts, WEIGHTS, atol=0.02)


def test_permutations_are_permutations():
    p = np.asarray(random.permutation(KEY, 100))
    assert p.dtype == np.int32 and not np.array_equal(p, np.arange(100))
    np.testing.assert_array_equal(np.sort(p), np.arange(100))
    x = np.arange(24).reshape(4, 6)
    rows = np.asarray(random.permutation(KEY, x, axis=1))
    assert np.array_equal(np.sort(rows, axis=1), x) and len({tuple(r - r[0]) for r in rows}) == 1  # same shuffle
    each = np.asarray(random.permutation(KEY, x, axis=1, independent=True))
    np.testing.assert_array_equal(np.sort(each, axis=1), x)
    picked = np.asarray(random.choice(KEY, 50, (50,), replace=False))
    np.testing.assert_array_equal(np.sort(picked), np.arange(50))


def test_distinct_keys_give_distinct_streams():
    first, second = random.split(KEY)
    assert not np.array_equal(random.bits(first, (8,)), random.bits(second, (8,)))
    assert not np.array_equal(random.fold_in(KEY, 0), random.fold_in(KEY, 1))
    assert len({tuple(np.asarray(k)) for k in random.split(KEY, 100)}) == 100


@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3)])
def test_empty_draws(shape):
    key = random.PRNGKey(0)
    assert np.asarray(random.uniform(key, shape)).shape == shape
    assert np.asarray(ember.jit(lambda k: random.normal(k, shape))(key)).shape == shape
    assert np.asarray(random.split(key, 0)).shape == (0, 2)
    assert np.asarray(random.choice(key, np.arange(6).reshape(2, 3), (0,))).shape == (0,)


# --- results: dtypes and shapes -------------------------------------------------------------------
def test_result_dtypes_follow_jax_defaults():
    key = random.PRNGKey(0)
    assert random.PRNGKey(0).dtype == np.uint32 and random.PRNGKey(0).shape == (2,)
    assert random.key(0).shape == () and str(random.key(0).dtype) == "key<fry>"  # (typed, as JAX's)
    assert random.bits(key).dtype == np.uint32
    assert random.uniform(key, (2,), np.float64).dtype == np.float32  # x64 off canonicalizes
    assert random.randint(key, (2,), 0, 3, np.int64).dtype == np.int32
    assert random.normal(key).shape == () and random.normal(key).dtype == np.float32
    assert random.bernoulli(key).shape == () and random.bernoulli(key).dtype == np.bool_
    assert random.rademacher(key, (3,), np.float32).dtype == np.float32
    assert random.categorical(key, np.zeros((3, 4)), axis=0).shape == (4,)
    assert random.uniform(key, 3).shape == (3,)  # an int shape, as JAX accepts
    assert random.choice(key, np.arange(6.0).reshape(2, 3), (4,), axis=1).shape == (2, 4)
    data = random.split(key, 3)
    typed = random.wrap_key_data(data)
    assert typed.shape == (3,) and np.array_equal(random.key_data(typed), data)
    assert random.key_data(data) is data


# --- bad input --------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad_key,shown", [
    (np.zeros(2, np.int32), "got int32[2]"),
    (jnp.zeros(3, jnp.uint32), "got uint32[3]"),
    (jnp.zeros((), jnp.uint32), "got uint32[]"),
    (3, "got a value of type int"),
    ([0, 0], "got a value of type list"),
])
def test_a_key_of_the_wrong_type_or_shape_names_uint32_2(bad_key, shown):
    for fn in (random.normal, random.split, lambda k: random.fold_in(k, 1), random.key_data):
        with pytest.raises(TypeError, match=re.escape("a uint32[2] array") + ".*" + re.escape(shown)):
            fn(bad_key)


def test_a_wrong_key_is_caught_under_jit_too():
    with pytest.raises(TypeError, match=r"normal expects a PRNG key.*int32\[2\]"):
        ember.jit(lambda k: random.normal(k))(np.zeros(2, np.int32))


def test_an_array_of_keys_where_one_is_expected_points_to_vmap():
    keys = random.split(random.PRNGKey(0), 4)
    with pytest.raises(ValueError, match=r"normal accepts a single key.*shape \(4, 2\).*ember.vmap"):
        random.normal(keys)
    with pytest.raises(TypeError, match=r"wrap_key_data expects a PRNG key.*uint32\[4\]"):
        random.wrap_key_data(jnp.zeros(4, jnp.uint32))


def test_traced_shapes_refuse_clearly():
    key = random.PRNGKey(0)
    # A traced shape is JAX's TypeError; a traced permutation length its concretization error.
    for fn in (lambda n: random.normal(key, (n,)), lambda n: random.split(key, n)):
        with pytest.raises(TypeError, match="(?s)Shapes must be 1D sequences.*traced array"):
            ember.jit(fn)(3)
    with pytest.raises(errors.TracerIntegerConversionError, match="traced array"):
        ember.jit(lambda n: random.permutation(key, n))(3)


@pytest.mark.parametrize("call,error,message", [
    (lambda: random.PRNGKey(1.5), TypeError, "PRNGKey needs an integer seed; got float32[]"),
    (lambda: random.PRNGKey(np.array([1, 2])), TypeError, "PRNGKey accepts a scalar seed"),
    (lambda: random.PRNGKey(2**64), OverflowError, "int"),
    (lambda: random.key(0, impl="philox4x32"), ValueError, "the 'philox4x32' PRNG implementation is not available"),
    (lambda: random.fold_in(KEY, np.ones(2, np.int32)), TypeError, "fold_in accepts a scalar"),
    (lambda: random.fold_in(KEY, -1), OverflowError, "uint32"),
    (lambda: random.split(KEY, -1), ValueError, "negative dimension"),
    (lambda: random.bits(KEY, (2,), np.int32), ValueError, "`bits` must be an unsigned int dtype, got int32"),
    (lambda: random.uniform(KEY, (2,), np.int32), ValueError, "`uniform` must be a float dtype, got int32"),
    (lambda: random.normal(KEY, (2,), np.int32), ValueError, "`normal` must be a float or complex dtype, got int32"),
    (lambda: random.exponential(KEY, (2,), np.uint8), ValueError, "`exponential` must be a float dtype"),
    (lambda: random.truncated_normal(KEY, -1.0, 1.0, (2,), np.int32), ValueError, "`truncated_normal` must be a float"),
    (lambda: random.uniform(KEY, (2,), minval=np.zeros(3)), ValueError,
     "(3,), () must broadcast to the shape argument (2,)"),
    (lambda: random.randint(KEY, (2,), 0, 3, np.float32), TypeError,
     "randint only accepts integer dtypes, got float32"),
    (lambda: random.randint(KEY, (2,), np.zeros(3, np.int32), 5), ValueError,
     "must broadcast to the shape argument (2,)"),
    (lambda: random.bernoulli(KEY, 1), TypeError, "`p` must have a floating dtype, got int32"),
    (lambda: random.bernoulli(KEY, mode="mid"), ValueError, "expected 'high' or 'low'"),
    (lambda: random.gumbel(KEY, mode="highest"), ValueError, "expected 'high' or 'low'"),
    (lambda: random.permutation(KEY, 2.5), TypeError, "x must be an integer or at least 1-dimensional"),
    (lambda: random.permutation(KEY, np.zeros((2, 3)), axis=2), ValueError, "out of bounds"),
    (lambda: random.choice(KEY, 3, 2), TypeError, "shape argument of ember.random.choice must be a sequence"),
    (lambda: random.choice(KEY, 0, (2,)), ValueError, "a must be greater than 0"),
    (lambda: random.choice(KEY, 3, (5,), replace=False), ValueError, "larger sample (size 5) than population (size 3)"),
    (lambda: random.choice(KEY, 4, (2,), p=np.ones(3)), ValueError, "p has shape (3,) and a.shape[axis] is 4"),
    (lambda: random.categorical(KEY, np.zeros(3), shape=(5,), replace=False), ValueError,
     "without replacement (5) cannot exceed number of categories (3)"),
    (lambda: random.categorical(KEY, np.zeros((2, 3)), shape=(4,)), ValueError, "must broadcast to the shape"),
])
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_every_public_random_function_is_tested():
    here = pathlib.Path(__file__)  # the samplers of samplers.py are called in test_random_samplers.py
    source = here.read_text() + (here.parent / "test_random_samplers.py").read_text()
    public = [n for n in dir(random) if not n.startswith("_") and callable(getattr(random, n))
              and not isinstance(getattr(random, n), (type, types.ModuleType))]
    assert len(public) >= 20
    untested = [n for n in public if not re.search(rf"\brandom\.{n}\(", source)]
    assert not untested, f"public ember.random functions no test calls: {untested}"


def _program_written_for_jax(jax):
    """A JAX program, unchanged: run with ``import ember as jax`` it gives JAX's results."""
    key = jax.random.PRNGKey(0)
    key, init_key = jax.random.split(key)
    weights = jax.random.normal(init_key, (3, 4)) * 0.1

    @jax.jit
    def perturb(key, weights):
        key, noise_key = jax.random.split(key)
        return key, weights + jax.random.uniform(noise_key, weights.shape)

    key, weights = perturb(key, weights)
    rows = jax.random.permutation(key, 3)
    return weights[rows], jax.random.randint(jax.random.fold_in(key, 3), (5,), 0, 100)


def test_a_jax_program_runs_unchanged_on_ember(jax_random):
    import jax

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = jax.jit(lambda: _program_written_for_jax(jax))()  # one XLA compile, not one per op
    for actual, wanted, ulps in zip(_program_written_for_jax(ember), expected, (4, 0)):
        assert_same(actual, wanted, ulps)


def test_key_dtype_names_the_dtype_of_each_implementation():
    assert str(random.key_dtype()) == "key<fry>" and random.key_dtype("threefry2x32") == random.key(0).dtype
    assert str(random.key_dtype("rbg")) == "key<rbg>" and str(random.key_dtype("unsafe_rbg")) == "key<urbg>"
    assert random.key_dtype(random.key(0, impl="rbg").dtype) == random.key_dtype("rbg")
    with pytest.raises(ValueError, match="unrecognized PRNG implementation"):
        random.key_dtype("nope")
