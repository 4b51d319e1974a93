"""ember.random's further samplers (ember/random/samplers.py): JAX's values for the same keys
(within documented ulps), eagerly, under jit and vmap; statistics that need no JAX; errors."""
from __future__ import annotations

import math
import pathlib
import re
import types
import warnings

import numpy as np
import pytest

import ember
from ember import random
from tests.test_random import assert_repeated_draws_keep_their_bits, assert_same

ALPHAS = np.float32([[0.3, 1.0, 2.5], [0.05, 7.0, 40.0]])  # both sides of the alpha < 1 boost
RATES = np.float32([0.0, 0.5, 3.0, 9.9, 10.0, 50.0, 1000.0])  # Knuth below 10, rejection above
COUNTS = np.float32([0, 5, 20, 100, 1000])
PROBS = np.float32([0.5, 0.1, 0.3, 0.7, 0.9])  # inversion and BTRS, p on both sides of 1/2
MEAN = np.float32([1.0, -2.0])
COV = np.float32([[2.0, 0.5], [0.5, 1.0]])

# name, draw (given the random module and a key), allowed ulps of max(|JAX's value|, 1) (0: bit for
# bit). Differences come from log / exp / tan / pow / lgamma rounding differently in ember and XLA
# (wald subtracts nearly equal terms, which multiplies a last-bit difference); integer and count
# samplers equal JAX's exactly because their rejection tests run the same rounds.
DRAWS = [
    ("cauchy", lambda r, k: r.cauchy(k, (300,)), 2),
    ("lognormal", lambda r, k: r.lognormal(k, 0.5, (300,)), 4),
    ("pareto", lambda r, k: r.pareto(k, np.float32([1.0, 3.0]), (150, 2)), 4),
    ("weibull_min", lambda r, k: r.weibull_min(k, 2.0, 1.5, (300,)), 2),
    ("rayleigh", lambda r, k: r.rayleigh(k, 2.0, (300,)), 2),
    ("maxwell", lambda r, k: r.maxwell(k, (300,)), 4),
    ("double_sided_maxwell", lambda r, k: r.double_sided_maxwell(k, 1.0, np.float32([1, 2]), (100,)), 8),
    ("geometric", lambda r, k: r.geometric(k, 0.3, (300,)), 0),
    ("triangular", lambda r, k: r.triangular(k, -1.0, 0.5, 2.0, (300,)), 1),
    ("wald", lambda r, k: r.wald(k, 1.5, (300,)), 64),
    ("gamma", lambda r, k: r.gamma(k, ALPHAS), 2),
    ("gamma_shape", lambda r, k: r.gamma(k, 2.0, (200,)), 8),
    ("loggamma", lambda r, k: r.loggamma(k, ALPHAS, (3, 2, 3)), 2),
    ("beta", lambda r, k: r.beta(k, 0.5, 2.0, (200,)), 2),
    ("dirichlet", lambda r, k: r.dirichlet(k, np.float32([0.5, 1.0, 3.0]), (40,)), 2),
    ("t", lambda r, k: r.t(k, 3.0, (200,)), 8),
    ("chisquare", lambda r, k: r.chisquare(k, 3.0, (200,)), 8),
    ("f", lambda r, k: r.f(k, 3.0, 5.0, (200,)), 8),
    ("generalized_normal", lambda r, k: r.generalized_normal(k, 1.5, (200,)), 8),
    ("ball", lambda r, k: r.ball(k, 3, 2, (50,)), 2),
    ("poisson", lambda r, k: r.poisson(k, RATES, (60, 7)), 0),
    ("binomial", lambda r, k: r.binomial(k, COUNTS, PROBS, (60, 5)), 0),
    ("multinomial", lambda r, k: r.multinomial(k, 50.0, np.float32([0.2, 0.3, 0.5]), shape=(10, 3)), 0),
    ("multivariate_normal", lambda r, k: r.multivariate_normal(k, MEAN, COV, (100,)), 4),
    ("multivariate_normal_eigh", lambda r, k: r.multivariate_normal(k, MEAN, COV, (100,), method="eigh"), 4),
    ("multivariate_normal_svd", lambda r, k: r.multivariate_normal(k, MEAN, COV, (100,), method="svd"), 4),
    ("orthogonal", lambda r, k: r.orthogonal(k, 4, (3,)), 4),
    ("orthogonal_wide", lambda r, k: r.orthogonal(k, 2, (), m=5), 4),
]
SEEDS = (0, 42)


@pytest.fixture(scope="module")
def jax_draws():
    """JAX's values of every entry of DRAWS for each seed, from one jitted program."""
    pytest.importorskip("jax")
    import jax
    import jax.random

    every_draw = jax.jit(lambda k: [draw(jax.random, k) for _, draw, _ in DRAWS])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_seed = [[np.asarray(x) for x in every_draw(jax.random.PRNGKey(seed))] for seed in SEEDS]
    return {name: [values[i] for values in by_seed] for i, (name, _, _) in enumerate(DRAWS)}


@pytest.mark.parametrize("name,draw,ulps", DRAWS, ids=[d[0] for d in DRAWS])
def test_draws_match_jax(jax_draws, name, draw, ulps):
    for seed, expected in zip(SEEDS, jax_draws[name]):
        assert_same(draw(random, random.PRNGKey(seed)), expected, ulps)


def test_float16_and_float64_draws_match_jax(jax_draws, x64):
    import jax
    import jax.random

    key, jax_key = random.PRNGKey(5), jax.random.PRNGKey(5)
    jax.config.update("jax_enable_x64", True)
    try:
        assert_same(random.gamma(key, ALPHAS, dtype=np.float16), jax.random.gamma(jax_key, ALPHAS, dtype=np.float16), 2)
        assert_same(random.cauchy(key, (50,), np.float16), jax.random.cauchy(jax_key, (50,), np.float16), 2)
        assert_same(random.pareto(key, 2.0, (20,)), jax.random.pareto(jax_key, 2.0, (20,)), 64)  # float64
        assert_same(random.poisson(key, RATES), jax.random.poisson(jax_key, RATES))  # int64
    finally:
        jax.config.update("jax_enable_x64", False)


# Eager math is NumPy's and jitted math ember's own, so values may differ in the last bits.
JITTED = ["cauchy", "wald", "gamma", "beta", "dirichlet", "poisson", "binomial", "multinomial",
          "multivariate_normal", "orthogonal"]


@pytest.mark.parametrize("name", JITTED)
def test_draws_are_the_same_eagerly_and_under_jit(name):
    draw, ulps = next((d, u) for n, d, u in DRAWS if n == name)
    key = random.PRNGKey(7)
    assert_same(ember.jit(lambda k: draw(random, k))(key), draw(random, key), max(ulps, 8) if ulps else 0)


@pytest.mark.parametrize("name,draw,ulps", DRAWS, ids=[d[0] for d in DRAWS])
def test_repeated_eager_draws_keep_their_bits(name, draw, ulps, monkeypatch):
    assert_repeated_draws_keep_their_bits(draw, monkeypatch)


VMAPPED = [
    ("gamma", lambda k: random.gamma(k, 0.7, (3,))),
    ("poisson", lambda k: random.poisson(k, 4.0, (3,))),
    ("binomial", lambda k: random.binomial(k, 30.0, 0.4, (3,))),
    ("t", lambda k: random.t(k, 4.0, (2,))),
    ("orthogonal", lambda k: random.orthogonal(k, 3)),
]


@pytest.mark.parametrize("name,draw", VMAPPED, ids=[v[0] for v in VMAPPED])
def test_vmap_over_split_keys_equals_a_python_loop(name, draw):
    keys = random.split(random.PRNGKey(0), 4)
    looped = np.stack([np.asarray(draw(k)) for k in keys])
    assert_same(ember.vmap(draw)(keys), looped, 0 if looped.dtype.kind != "f" else 8)


# --- statistics (no JAX needed) -------------------------------------------------------------------
N = 4000
KEY = random.PRNGKey(2024)


def _sample(draw):
    return np.asarray(draw, np.float64)


def _assert_mean_and_variance(x, mean, variance, sigmas=6.0, variance_rtol=0.2):
    assert abs(x.mean() - mean) < sigmas * math.sqrt(variance / x.size), (x.mean(), mean)
    assert abs(x.var() - variance) < variance_rtol * variance, (x.var(), variance)


def test_gamma_family_statistics():
    a = np.float32([0.4, 3.0])
    g = _sample(random.gamma(KEY, a, (N, 2)))
    assert g.min() >= 0
    for column, shape_param in zip(g.T, a):
        _assert_mean_and_variance(column, shape_param, shape_param)
    np.testing.assert_allclose(np.exp(_sample(random.loggamma(KEY, a, (N, 2)))), g, rtol=1e-4)
    b = _sample(random.beta(KEY, 2.0, 5.0, (N,)))
    assert b.min() >= 0 and b.max() <= 1
    _assert_mean_and_variance(b, 2 / 7, 10 / (49 * 8))
    d = _sample(random.dirichlet(KEY, np.float32([1.0, 2.0, 3.0]), (N,)))
    np.testing.assert_allclose(d.sum(-1), 1, rtol=1e-5)
    np.testing.assert_allclose(d.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.02)
    _assert_mean_and_variance(_sample(random.chisquare(KEY, 4.0, (N,))), 4.0, 8.0)
    _assert_mean_and_variance(_sample(random.t(KEY, 10.0, (N,))), 0.0, 10 / 8)
    _assert_mean_and_variance(_sample(random.f(KEY, 5.0, 20.0, (N,))), 20 / 18, 2 * 400 * 23 / (5 * 18**2 * 16),
                              variance_rtol=0.4)
    _assert_mean_and_variance(_sample(random.generalized_normal(KEY, 2.0, (N,))), 0.0, 0.5)


def test_transformed_samplers_statistics():
    _assert_mean_and_variance(_sample(random.lognormal(KEY, 0.5, (N,))), math.exp(0.125),
                              (math.exp(0.25) - 1) * math.exp(0.25))
    p = _sample(random.pareto(KEY, 5.0, (N,)))
    assert p.min() >= 1
    _assert_mean_and_variance(p, 5 / 4, 5 / (16 * 3), variance_rtol=0.5)
    _assert_mean_and_variance(_sample(random.weibull_min(KEY, 2.0, 1.0, (N,))), 2.0, 4.0)
    _assert_mean_and_variance(_sample(random.rayleigh(KEY, 2.0, (N,))), 2 * math.sqrt(math.pi / 2),
                              (4 - math.pi) / 2 * 4)
    _assert_mean_and_variance(_sample(random.maxwell(KEY, (N,))), 2 * math.sqrt(2 / math.pi), 3 - 8 / math.pi)
    _assert_mean_and_variance(_sample(random.double_sided_maxwell(KEY, 1.0, 2.0, (N,))), 1.0, 12.0)
    tri = _sample(random.triangular(KEY, -1.0, 0.5, 2.0, (N,)))
    assert tri.min() >= -1 and tri.max() <= 2
    _assert_mean_and_variance(tri, 0.5, (1 + 0.25 + 4 + 0.5 + 2 - 1) / 18)
    _assert_mean_and_variance(_sample(random.wald(KEY, 1.5, (N,))), 1.5, 1.5**3, variance_rtol=0.4)
    median = np.median(_sample(random.cauchy(KEY, (N,))))
    quartiles = np.percentile(_sample(random.cauchy(KEY, (N,))), [25, 75])
    assert abs(median) < 0.1 and np.allclose(quartiles, [-1, 1], atol=0.15)
    unit_ball = _sample(random.ball(KEY, 3, 2, (N,)))
    radii = np.linalg.norm(unit_ball, axis=-1)
    assert radii.max() <= 1 and abs(np.mean(radii**3) - 0.5) < 0.05  # uniform: P(r < s) = s**3
    l1_ball = _sample(random.ball(KEY, 2, 1, (N,)))
    assert np.abs(l1_ball).sum(-1).max() <= 1


def test_count_statistics():
    g = np.asarray(random.geometric(KEY, 0.25, (N,)))
    assert g.dtype == np.int32 and g.min() >= 1
    _assert_mean_and_variance(g.astype(np.float64), 4.0, 12.0)
    rates = np.float32([0.0, 2.0, 9.0, 30.0, 400.0])
    k = np.asarray(random.poisson(KEY, rates, (N, 5)))
    assert k.dtype == np.int32 and k.min() >= 0 and np.all(k[:, 0] == 0)
    for column, rate in zip(k.T[1:].astype(np.float64), rates[1:]):
        _assert_mean_and_variance(column, rate, rate)
    n, p = np.float32([8, 60, 500]), np.float32([0.3, 0.8, 0.5])
    b = _sample(random.binomial(KEY, n, p, (N, 3)))
    assert b.min() >= 0 and np.all(b <= n) and np.all(b == np.round(b))
    for column, count, prob in zip(b.T, n, p):
        _assert_mean_and_variance(column, count * prob, count * prob * (1 - prob))
    invalid = np.asarray(random.binomial(KEY, np.float32([-1, 5, np.inf]), np.float32([0.5, np.nan, 0.5])))
    assert np.isnan(invalid[:2]).all() and invalid[2] == np.inf
    weights = np.float32([0.1, 0.6, 0.3])
    m = _sample(random.multinomial(KEY, 20.0, weights, shape=(N, 3)))
    assert np.all(m.sum(-1) == 20) and m.min() >= 0
    np.testing.assert_allclose(m.mean(0), 20 * weights, rtol=0.05)


def test_multivariate_normal_has_the_requested_mean_and_covariance():
    for method in ("cholesky", "eigh", "svd"):
        x = _sample(random.multivariate_normal(KEY, MEAN, COV, (N,), method=method))
        assert x.shape == (N, 2)
        np.testing.assert_allclose(x.mean(0), MEAN, atol=0.1)
        np.testing.assert_allclose(np.cov(x.T), COV, atol=0.15)
    singular = np.float32([[1.0, 1.0], [1.0, 1.0]])
    x = _sample(random.multivariate_normal(KEY, MEAN, singular, (100,), method="eigh"))
    np.testing.assert_allclose(x[:, 0] - MEAN[0], x[:, 1] - MEAN[1], atol=1e-3)
    batched = random.multivariate_normal(KEY, np.zeros((4, 1, 2), np.float32), COV)
    assert batched.shape == (4, 1, 2) and batched.dtype == np.float32


def test_orthogonal_matrices_are_orthogonal():
    q = _sample(random.orthogonal(KEY, 5, (4,)))
    assert q.shape == (4, 5, 5)
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(5), q.shape), atol=1e-5)
    wide = _sample(random.orthogonal(KEY, 2, m=6))
    assert wide.shape == (2, 6)
    np.testing.assert_allclose(wide @ wide.T, np.eye(2), atol=1e-5)
    tall = _sample(random.orthogonal(KEY, 6, m=2))
    np.testing.assert_allclose(tall.T @ tall, np.eye(2), atol=1e-5)
    # Haar: the first entry is symmetric about zero, with variance 1 / n.
    first = _sample(random.orthogonal(KEY, 4, (N,)))[:, 0, 0]
    _assert_mean_and_variance(first, 0.0, 0.25)


# --- results: dtypes, shapes, keys --------------------------------------------------------------------
def test_result_dtypes_and_shapes_follow_jax():
    key = random.PRNGKey(0)
    assert random.gamma(key, np.ones((2, 3))).shape == (2, 3)
    assert random.gamma(key, 1.0, (2,), np.float64).dtype == np.float32  # x64 off canonicalizes
    assert random.gamma(key, 1.0, (0, 3)).shape == (0, 3)
    assert random.poisson(key, 3.0, (2,), np.int8).dtype == np.int8
    assert random.binomial(key, 5, 0.5).dtype == np.float32
    assert random.dirichlet(key, np.ones(4)).shape == (4,)
    assert random.dirichlet(key, np.ones((2, 4)), (3, 2)).shape == (3, 2, 4)
    assert random.double_sided_maxwell(key, np.zeros(2), 1.0, (3,)).shape == (3, 2)
    assert random.lognormal(key).shape == () and random.geometric(key, 0.5).dtype == np.int32
    assert random.multinomial(key, 5.0, np.ones(3) / 3).shape == (3,)
    # As in JAX, float16 normal draws promote with the float32 mean.
    assert random.multivariate_normal(key, MEAN, COV, dtype=np.float16).dtype == np.float32
    keys = random.split(key, 3)
    assert random.clone(keys) is keys and random.clone(key) is key
    assert random.key_impl(key) == "threefry2x32" and random.key_impl(keys) == "threefry2x32"


# --- bad input --------------------------------------------------------------------------------------
@pytest.mark.parametrize("call,error,message", [
    (lambda: random.gamma(KEY, 1.0, (2,), np.int32), ValueError,
     "dtype argument to `gamma` must be a float dtype, got int32"),
    (lambda: random.t(KEY, np.ones(3), (2,)), ValueError,
     "t: parameter shapes (3,) must broadcast to the shape argument (2,)"),
    (lambda: random.beta(KEY, np.ones(2), np.ones(3)), ValueError, "Incompatible shapes for broadcasting"),  # JAX's
    (lambda: random.dirichlet(KEY, 1.0), ValueError, "dirichlet requires alpha.ndim >= 1, got alpha.ndim == 0"),
    (lambda: random.dirichlet(KEY, np.ones((2, 3)), (3,)), ValueError, "must broadcast to the shape argument (3,)"),
    (lambda: random.poisson(KEY, 1.0, (2,), np.float32), ValueError, "`poisson` must be an int dtype, got float32"),
    (lambda: random.geometric(KEY, 0.5, (2,), np.float32), ValueError, "`geometric` must be an int dtype, got float32"),
    (lambda: random.binomial(KEY, 3, 0.5, (2,), np.int32), ValueError, "`binomial` must be a float dtype, got int32"),
    (lambda: random.multivariate_normal(KEY, MEAN, COV, method="qr"), ValueError,
     "method must be one of {'svd', 'eigh', 'cholesky'}"),
    (lambda: random.multivariate_normal(KEY, 1.0, COV), ValueError, "requires mean.ndim >= 1, got mean.ndim == 0"),
    (lambda: random.multivariate_normal(KEY, MEAN, np.ones(2)), ValueError,
     "requires cov.ndim >= 2, got cov.ndim == 1"),
    (lambda: random.multivariate_normal(KEY, MEAN, np.eye(3)), ValueError,
     "requires cov.shape == (..., n, n) for n=2, but got cov.shape == (3, 3)."),
    (lambda: random.multivariate_normal(KEY, MEAN, COV, dtype=np.int32), ValueError,
     "`multivariate_normal` must be a float dtype, got int32"),
    (lambda: random.multivariate_normal(KEY, np.zeros((3, 2)), COV, (2,)), ValueError,
     "must broadcast to the shape argument (2,)"),
    (lambda: random.orthogonal(KEY, 2.5), TypeError, "'float' object cannot be interpreted as an integer"),
    (lambda: random.ball(KEY, 2.5), TypeError, "'float' object cannot be interpreted as an integer"),
    (lambda: random.cauchy(KEY, (2,), np.int32), ValueError, "`cauchy` must be a float dtype, got int32"),
    (lambda: random.gamma(np.zeros(2, np.int32), 1.0), TypeError, "gamma expects a PRNG key"),
    (lambda: random.key_impl(np.zeros(3, np.uint32)), TypeError, "key_impl expects a PRNG key"),
    (lambda: random.clone([0, 0]), TypeError, "clone expects a PRNG key"),
])
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_traced_static_arguments_refuse_clearly():
    with pytest.raises(ember.errors.TracerIntegerConversionError, match="traced array"):
        ember.jit(lambda n: random.orthogonal(KEY, n))(3)


def test_every_public_random_function_is_tested():
    """Every public ``random.X`` is called in this file or in test_random.py."""
    here = pathlib.Path(__file__)
    source = here.read_text() + (here.parent / "test_random.py").read_text()
    public = [n for n in dir(random) if not n.startswith("_") and callable(getattr(random, n))
              and not isinstance(getattr(random, n), (type, types.ModuleType))]
    untested = [n for n in public if not re.search(rf"\b(random|r)\.{n}\(", source)]
    assert not untested, f"public ember.random functions no test calls: {untested}"
