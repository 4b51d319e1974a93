"""The rest of jax.random's samplers: transforms of uniform and normal draws, the gamma
family (Marsaglia-Tsang rejection, one while loop per element, batched with ``vmap``),
Poisson and binomial counts (inversion for small means, transformed rejection for large
ones), multinomial counts, multivariate normals and random orthogonal matrices.

Each one splits its key exactly as JAX does, so that, key for key, values equal JAX's
up to the last-bit differences of transcendental functions (see the package docstring);
a rejection test that lands within those bits of its threshold can decide differently.
"""
from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax, numpy as jnp
from ember.lax.base import aval, shape_tuple
from ember.numpy.core import broadcast_shapes, promote_dtypes_inexact
from ember.random import impls
from ember.random.distributions import (
    _check_shape,
    _float_dtype,
    _float_sampler_args,
    _uniform,
    exponential,
    normal,
    rademacher,
    uniform,
)
from ember.random.keys import check_key, split_data, split_in_two
from ember.random.prng import PRNGKeyArray
from ember.transforms.batching import vmap


# --- arguments -------------------------------------------------------------------------------
def _result_shape(name: str, shape: Sequence[int] | None, *params: Any) -> tuple[int, ...]:
    """``shape``, checked against the parameters' shapes, or (if None) their broadcast shape."""
    param_shapes = [aval(p).shape for p in params]
    if shape is None:
        return broadcast_shapes(*param_shapes) if param_shapes else ()
    shape = shape_tuple(shape)
    _check_shape(name, shape, *param_shapes)
    return shape


def _float_params(name: str, key: Any, shape: Any, dtype: Any, *params: Any) -> tuple[Any, ...]:
    """The checked key, result shape and dtype, and the parameters converted to that dtype
    and broadcast to that shape."""
    key, dtype = check_key(name, key), _float_dtype(name, dtype)
    params = [jnp.asarray(p) for p in params]
    shape = _result_shape(name, shape, *params)
    return (key, shape, dtype, *(jnp.broadcast_to(jnp.asarray(p, dtype), shape) for p in params))


def _split3(key: Any) -> tuple[Any, Any, Any]:
    keys = split_data(key, (3,))
    return tuple(lax.index_in_dim(keys, i, keepdims=False) for i in range(3))


# --- transforms of uniform and normal draws ----------------------------------------------------
def cauchy(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Standard Cauchy values: tan(pi * (u - 1/2)), u uniform in [eps, 1)."""
    key, shape, dtype = _float_sampler_args("cauchy", key, shape, dtype)
    u = _uniform(key, shape, dtype, float(dtypes.finfo(dtype).eps), 1.0)
    return jnp.tan(jnp.multiply(np.pi, jnp.subtract(u, 0.5)))


def lognormal(key: Any, sigma: Any = 1.0, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """exp(sigma * z), z standard normal."""
    key, shape, dtype, sigma = _float_params("lognormal", key, shape, dtype, sigma)
    return jnp.exp(jnp.multiply(normal(key, shape, dtype), sigma))


def pareto(key: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Pareto values of shape ``b`` (scale 1): exp(e / b), e exponential."""
    key, shape, dtype, b = _float_params("pareto", key, shape, dtype, b)
    return jnp.exp(jnp.divide(exponential(key, shape, dtype), b))


def weibull_min(key: Any, scale: Any, concentration: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Weibull values: scale * (-log(1 - u)) ** (1 / concentration)."""
    key, shape, dtype = _float_sampler_args("weibull_min", key, shape, dtype)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    return jnp.multiply(jnp.power(jnp.negative(jnp.log1p(jnp.negative(u))), jnp.divide(1.0, concentration)), scale)


def rayleigh(key: Any, scale: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Rayleigh values: scale * sqrt(-2 log u)."""
    key, shape, dtype, scale = _float_params("rayleigh", key, shape, dtype, scale)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    return jnp.multiply(scale, jnp.sqrt(jnp.multiply(jnp.log(u), -2)))


def maxwell(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Maxwell values: the length of a standard normal 3-vector."""
    key, shape, dtype = _float_sampler_args("maxwell", key, shape, dtype)
    return jnp.linalg.norm(normal(key, (*shape, 3), dtype), axis=-1)


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Maxwell values with a random sign, scaled and shifted. As in JAX, the result has shape
    ``shape + broadcast(loc, scale).shape`` (``shape`` defaults to the parameters' shape)."""
    key, shape, dtype = _float_sampler_args("double_sided_maxwell", key, shape, dtype)
    param_shape = broadcast_shapes(jnp.shape(loc), jnp.shape(scale))
    shape = (*(shape or param_shape), *param_shape)
    maxwell_key, sign_key = split_in_two(key)
    signed = jnp.multiply(rademacher(sign_key, shape, dtype), maxwell(maxwell_key, shape, dtype))
    return jnp.add(jnp.multiply(signed, scale), loc)


def geometric(key: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Number of Bernoulli(p) trials up to the first success: 1 + floor(log u / log(1 - p))."""
    key = check_key("geometric", key)
    dtype = dtypes.default_int_dtype() if dtype is None else dtypes.requested_dtype(dtype)
    if not dtypes.is_integer(dtype):
        raise ValueError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    (p,) = promote_dtypes_inexact(p)
    shape = _result_shape("geometric", shape, p)
    u = _uniform(key, shape, aval(p).dtype, 0.0, 1.0)
    log_u = jnp.log(jnp.where(jnp.equal(u, 0), 1, u))
    trials = jnp.add(jnp.floor(jnp.divide(log_u, jnp.broadcast_to(jnp.log1p(jnp.negative(p)), shape))), 1)
    return lax.convert_element_type(trials, dtype)


def triangular(key: Any, left: Any, mode: Any, right: Any, shape: Sequence[int] | None = None,
               dtype: Any = None) -> Any:
    """Triangular values on [left, right] peaking at ``mode``, by inverting the CDF."""
    key, shape, dtype, left, mode, right = _float_params("triangular", key, shape, dtype, left, mode, right)
    width = jnp.subtract(right, left)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    rising = jnp.add(left, jnp.sqrt(jnp.multiply(jnp.multiply(u, width), jnp.subtract(mode, left))))
    falling = jnp.subtract(right, jnp.sqrt(jnp.multiply(jnp.multiply(jnp.subtract(1, u), width),
                                                        jnp.subtract(right, mode))))
    return jnp.where(jnp.less(u, jnp.divide(jnp.subtract(mode, left), width)), rising, falling)


def wald(key: Any, mean: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Inverse Gaussian values of the given mean (shape 1), by Michael, Schucany and Haas'
    transformation of a squared normal, choosing a root with a uniform draw."""
    key, shape, dtype, mean = _float_params("wald", key, shape, dtype, mean)
    normal_key, uniform_key = split_in_two(key)
    y = lax.integer_pow(normal(normal_key, shape, dtype), 2)
    z = _uniform(uniform_key, shape, dtype, 0.0, 1.0)
    mean_sq = lax.integer_pow(mean, 2)
    root = jnp.sqrt(jnp.add(jnp.multiply(jnp.multiply(4, mean), y), jnp.multiply(mean_sq, lax.integer_pow(y, 2))))
    x = jnp.subtract(jnp.add(mean, jnp.divide(jnp.multiply(mean_sq, y), 2)), jnp.multiply(jnp.divide(mean, 2), root))
    return jnp.where(jnp.less_equal(z, jnp.divide(mean, jnp.add(mean, x))), x, jnp.divide(mean_sq, x))


# --- the gamma family ----------------------------------------------------------------------------
def _gamma_one(key: Any, alpha: Any, log_space: bool) -> Any:
    """One Gamma(alpha) value (its log with ``log_space``) by Marsaglia and Tsang's method:
    d * v**3 for a normal x with v = 1 + x / sqrt(9d) > 0, d = alpha - 1/3, accepted with a
    cheap squeeze test or the exact log test. alpha < 1 samples Gamma(alpha + 1) and scales it
    by u ** (1 / alpha)."""
    dtype = aval(alpha).dtype
    const = functools.partial(np.array, dtype=dtype)
    boost = jnp.less(alpha, 1)
    d = jnp.subtract(jnp.where(boost, jnp.add(alpha, 1), alpha), 1 / 3)
    c = jnp.divide(1 / 3, jnp.sqrt(d))

    def rejected(state: tuple) -> Any:
        _, x_sq, v_cubed, u = state
        outside_squeeze = jnp.greater_equal(u, jnp.subtract(1, jnp.multiply(0.0331, jnp.multiply(x_sq, x_sq))))
        log_bound = jnp.add(jnp.multiply(x_sq, 0.5),
                            jnp.multiply(d, jnp.add(jnp.subtract(1, v_cubed), jnp.log(v_cubed))))
        return jnp.logical_and(outside_squeeze, jnp.greater_equal(jnp.log(u), log_bound))

    def next_normal(state: tuple) -> tuple:
        key, subkey = split_in_two(state[0])
        x = normal(subkey, (), dtype)
        return key, x, jnp.add(1, jnp.multiply(x, c))

    def propose(state: tuple) -> tuple:
        key, x_key, u_key = _split3(state[0])
        _, x, v = lax.while_loop(lambda s: jnp.less_equal(s[2], 0), next_normal, (x_key, const(0), const(-1)))
        return key, jnp.multiply(x, x), jnp.multiply(jnp.multiply(v, v), v), uniform(u_key, (), dtype)

    key, boost_key = split_in_two(key)
    # The initial state (u = 2) is rejected, so the loop draws at least once.
    v_cubed = lax.while_loop(rejected, propose, (key, const(0), const(1), const(2)))[2]
    if log_space:
        log_u = jnp.negative(exponential(boost_key, (), dtype))
        log_boost = jnp.where(jnp.logical_or(jnp.logical_not(boost), jnp.equal(log_u, 0)), const(0),
                              jnp.multiply(log_u, jnp.divide(1, alpha)))
        return jnp.add(jnp.add(jnp.log(d), jnp.log(v_cubed)), log_boost)
    u = jnp.subtract(1, uniform(boost_key, (), dtype))
    scale = jnp.where(boost, jnp.power(u, jnp.divide(1, alpha)), const(1))
    return jnp.multiply(jnp.multiply(d, v_cubed), scale)


def _gamma(name: str, key: Any, a: Any, shape: Any, dtype: Any, log_space: bool) -> Any:
    """Gamma values, one rejection loop per element, each with its own key ``split(key, size)[i]``."""
    key, shape, dtype, a = _float_params(name, key, shape, dtype, a)
    size = math.prod(shape)
    if size == 0:
        return jnp.zeros(shape, dtype)
    keys = split_data(key, (size,))
    draw = vmap(functools.partial(_gamma_one, log_space=log_space))
    return jnp.reshape(draw(keys, jnp.reshape(a, (size,))), shape)


def gamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Gamma(a) values (unit scale)."""
    return _gamma("gamma", key, a, shape, dtype, log_space=False)


def loggamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """The logs of Gamma(a) values, computed in log space: accurate where a << 1 makes the
    values underflow."""
    return _gamma("loggamma", key, a, shape, dtype, log_space=True)


def beta(key: Any, a: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Beta(a, b) values: Ga / (Ga + Gb) for Gamma draws, computed from their logs."""
    key, shape, dtype, a, b = _float_params("beta", key, shape, dtype, a, b)
    key_a, key_b = split_in_two(key)
    log_a, log_b = loggamma(key_a, a, shape, dtype), loggamma(key_b, b, shape, dtype)
    log_max = jnp.maximum(log_a, log_b)
    scaled_a, scaled_b = jnp.exp(jnp.subtract(log_a, log_max)), jnp.exp(jnp.subtract(log_b, log_max))
    return jnp.divide(scaled_a, jnp.add(scaled_a, scaled_b))


def dirichlet(key: Any, alpha: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Dirichlet(alpha) vectors along the last axis: normalized Gamma draws (a softmax of
    their logs). The result has shape ``shape + alpha.shape[-1:]``."""
    key, dtype = check_key("dirichlet", key), _float_dtype("dirichlet", dtype)
    alpha = jnp.asarray(alpha)
    alpha_shape = aval(alpha).shape
    if not alpha_shape:
        raise ValueError("dirichlet requires alpha.ndim >= 1, got alpha.ndim == 0")
    if shape is None:
        shape = alpha_shape[:-1]
    else:
        shape = shape_tuple(shape)
        _check_shape("dirichlet", shape, alpha_shape[:-1])
    log_gamma = loggamma(key, jnp.asarray(alpha, dtype), (*shape, alpha_shape[-1]), dtype)
    # softmax over the last axis (as jax.nn.softmax computes it: ember.nn sits above ember.random)
    unnormalized = jnp.exp(log_gamma - lax.stop_gradient(jnp.max(log_gamma, -1, keepdims=True)))
    return unnormalized / jnp.sum(unnormalized, -1, keepdims=True)


def chisquare(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Chi-square values with ``df`` degrees of freedom: 2 * Gamma(df / 2)."""
    key, shape, dtype, df = _float_params("chisquare", key, shape, dtype, df)
    return jnp.multiply(jnp.exp(loggamma(key, jnp.divide(df, 2), shape, dtype)), 2)


def f(key: Any, dfnum: Any, dfden: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """F values: the ratio of two chi-square draws, each divided by its degrees of freedom."""
    key, shape, dtype, dfnum, dfden = _float_params("f", key, shape, dtype, dfnum, dfden)
    key_den, key_num = split_in_two(key)
    numerator = jnp.divide(chisquare(key_num, dfnum, shape, dtype), dfnum)
    return jnp.divide(numerator, jnp.divide(chisquare(key_den, dfden, shape, dtype), dfden))


def t(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Student's t values: z * sqrt((df / 2) / Gamma(df / 2)), z standard normal."""
    key, shape, dtype, df = _float_params("t", key, shape, dtype, df)
    normal_key, gamma_key = split_in_two(key)
    half_df = jnp.divide(df, 2)
    g = gamma(gamma_key, half_df, shape, dtype)
    return jnp.multiply(normal(normal_key, shape, dtype), jnp.sqrt(jnp.divide(half_df, g)))


def generalized_normal(key: Any, p: float, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Values of density proportional to exp(-|x|**p): a random sign times Gamma(1/p) ** (1/p)."""
    key, shape, dtype = _float_sampler_args("generalized_normal", key, shape, dtype)
    gamma_key, sign_key = split_in_two(key)
    g = gamma(gamma_key, jnp.divide(1, p), shape, dtype)
    return jnp.multiply(rademacher(sign_key, shape, dtype), jnp.power(g, jnp.divide(1, p)))


def ball(key: Any, d: int, p: float = 2, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Points uniform in the d-dimensional unit p-norm ball (Barthe et al.'s construction):
    generalized normal coordinates over (their p-norm**p + an exponential draw) ** (1/p)."""
    key, shape, dtype = _float_sampler_args("ball", key, shape, dtype)
    d = operator.index(d)
    normal_key, exponential_key = split_in_two(key)
    g = generalized_normal(normal_key, p, (*shape, d), dtype)
    e = exponential(exponential_key, shape, dtype)
    radius = jnp.power(jnp.add(jnp.sum(jnp.power(jnp.abs(g), p), axis=-1), e), jnp.divide(1, p))
    return jnp.divide(g, jnp.expand_dims(radius, -1))


# --- counts ------------------------------------------------------------------------------------------
def _rejecting(max_iters: Any, state: tuple) -> Any:
    """The condition of a lock-step rejection loop whose state is (round, draws, accepted, key):
    some element still rejected, and rounds left."""
    i, _, accepted, _ = state
    return jnp.logical_and(jnp.any(jnp.logical_not(accepted)), jnp.less(i, max_iters))


def _poisson_knuth(key: Any, lam: Any, shape: tuple[int, ...], max_iters: Any) -> Any:
    """Knuth's method: one less than the number of uniforms whose product first drops below
    exp(-lam); one fresh key (and uniform array) per round for the whole array."""
    def more(state: tuple) -> Any:
        i, _, _, log_product = state
        return jnp.logical_and(jnp.any(jnp.greater(log_product, jnp.negative(lam))), jnp.less(i, max_iters))

    def draw(state: tuple) -> tuple:
        i, k, key, log_product = state
        key, subkey = split_in_two(key)
        k = jnp.where(jnp.greater(log_product, jnp.negative(lam)), jnp.add(k, 1), k)
        return jnp.add(i, 1), k, key, jnp.add(log_product, jnp.log(_uniform(subkey, shape, dtypes.float32, 0.0, 1.0)))

    start = (np.int32(0), jnp.zeros(shape, max_iters.dtype), key, jnp.zeros(shape, dtypes.float32))
    return jnp.subtract(lax.while_loop(more, draw, start)[1], 1)


def _poisson_rejection(key: Any, lam: Any, shape: tuple[int, ...], max_iters: Any) -> Any:
    """Hörmann's transformed rejection (PTRS) for large rates, all elements in lock step."""
    log_lam = jnp.log(lam)
    b = jnp.add(0.931, jnp.multiply(2.53, jnp.sqrt(lam)))
    a = jnp.add(-0.059, jnp.multiply(0.02483, b))
    inv_alpha = jnp.add(1.1239, jnp.divide(1.1328, jnp.subtract(b, 3.4)))
    v_r = jnp.subtract(0.9277, jnp.divide(3.6224, jnp.subtract(b, 2)))

    def draw(state: tuple) -> tuple:
        i, k_out, accepted, key = state
        key, u_key, v_key = _split3(key)
        u = jnp.subtract(_uniform(u_key, shape, dtypes.float32, 0.0, 1.0), 0.5)
        v = _uniform(v_key, shape, dtypes.float32, 0.0, 1.0)
        u_shifted = jnp.subtract(0.5, jnp.abs(u))
        k = jnp.floor(jnp.add(jnp.add(jnp.multiply(jnp.add(jnp.divide(jnp.multiply(2, a), u_shifted), b), u), lam),
                              0.43))
        s = jnp.log(jnp.divide(jnp.multiply(v, inv_alpha),
                               jnp.add(jnp.divide(a, jnp.multiply(u_shifted, u_shifted)), b)))
        log_pmf = jnp.subtract(jnp.add(jnp.negative(lam), jnp.multiply(k, log_lam)), lax.lgamma(jnp.add(k, 1)))
        quick_accept = jnp.logical_and(jnp.greater_equal(u_shifted, 0.07), jnp.less_equal(v, v_r))
        reject = jnp.logical_or(jnp.less(k, 0), jnp.logical_and(jnp.less(u_shifted, 0.013), jnp.greater(v, u_shifted)))
        accept = jnp.logical_or(quick_accept, jnp.logical_and(jnp.logical_not(reject), jnp.less_equal(s, log_pmf)))
        return jnp.add(i, 1), jnp.where(accept, k, k_out), jnp.logical_or(accepted, accept), key

    start = (np.int32(0), jnp.full(shape, -1, dtypes.float32), jnp.zeros(shape, dtypes.bool_), key)
    final = lax.while_loop(functools.partial(_rejecting, max_iters), draw, start)
    return lax.convert_element_type(final[1], max_iters.dtype)


def poisson(key: Any, lam: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Poisson(lam) counts (int32 by default): Knuth's method where lam < 10, transformed
    rejection elsewhere; both run over the whole array with the same key, as in JAX."""
    key = check_key("poisson", key)
    dtype = dtypes.default_int_dtype() if dtype is None else dtypes.requested_dtype(dtype)
    if not dtypes.is_integer(dtype):
        raise ValueError(f"dtype argument to `poisson` must be an int dtype, got {dtype}")
    lam = jnp.asarray(lam)
    shape = aval(lam).shape if shape is None else shape_tuple(shape)
    lam = lax.convert_element_type(jnp.broadcast_to(lam, shape), dtypes.float32)
    use_knuth = jnp.logical_or(jnp.isnan(lam), jnp.less(lam, 10))
    max_iters = np.array(dtypes.iinfo(dtype).max, dtype)  # never reached in practice
    small = _poisson_knuth(key, jnp.where(use_knuth, lam, 0.0), shape, max_iters)
    large = _poisson_rejection(key, jnp.where(use_knuth, 1e5, lam), shape, max_iters)
    return jnp.where(jnp.equal(lam, 0), 0, jnp.where(use_knuth, small, large)).astype(dtype)


# Stirling-series remainders log k! - (k + 1/2) log(k + 1) + (k + 1) - log(2 pi)/2 for k < 10.
_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.010411265261972,
                  0.00925546218271273, 0.00833056343336287)


def _stirling_tail(k: Any) -> Any:
    """The remainder of Stirling's series for log k!: tabulated below 10, else its expansion."""
    table = jnp.asarray(np.array(_STIRLING_TAIL), aval(k).dtype)
    clamped = jnp.clip(k, 0.0, 9.0)
    kp1_sq = jnp.multiply(jnp.add(clamped, 1), jnp.add(clamped, 1))
    series = jnp.divide(jnp.subtract(1 / 12, jnp.divide(jnp.subtract(1 / 360, jnp.divide(1 / 1260, kp1_sq)), kp1_sq)),
                        jnp.add(clamped, 1))
    tabulated = jnp.take(table, lax.convert_element_type(jnp.floor(clamped), dtypes.int32))
    return jnp.where(jnp.less_equal(k, 9), tabulated, series)


def _binomial_inversion(key: Any, count: Any, prob: Any, shape: tuple[int, ...], max_iters: Any) -> Any:
    """Counts by summing geometric waiting times until they pass ``count`` (small n * p)."""
    log_q = jnp.log1p(jnp.negative(prob))

    def more(state: tuple) -> Any:
        i, _, total, _ = state
        return jnp.logical_and(jnp.any(jnp.less_equal(total, count)), jnp.less(i, max_iters))

    def draw(state: tuple) -> tuple:
        i, n_waits, total, key = state
        subkey, key = split_in_two(key)
        n_waits = jnp.where(jnp.less_equal(total, count), jnp.add(n_waits, 1), n_waits)
        wait = jnp.ceil(jnp.divide(jnp.log(_uniform(subkey, shape, aval(prob).dtype, 0.0, 1.0)), log_q))
        return jnp.add(i, 1), n_waits, jnp.add(total, wait), key

    zeros = jnp.zeros(shape, aval(prob).dtype)
    return jnp.subtract(lax.while_loop(more, draw, (np.int32(0), zeros, zeros, key))[1], 1)


def _binomial_btrs(key: Any, count: Any, prob: Any, shape: tuple[int, ...], max_iters: Any) -> Any:
    """Hörmann's BTRS transformed rejection (large n * p), all elements in lock step."""
    stddev = jnp.sqrt(jnp.multiply(jnp.multiply(count, prob), jnp.subtract(1, prob)))
    b = jnp.add(1.15, jnp.multiply(2.53, stddev))
    a = jnp.add(jnp.add(-0.0873, jnp.multiply(0.0248, b)), jnp.multiply(0.01, prob))
    c = jnp.add(jnp.multiply(count, prob), 0.5)
    v_r = jnp.subtract(0.92, jnp.divide(4.2, b))
    r = jnp.divide(prob, jnp.subtract(1, prob))
    alpha = jnp.multiply(jnp.add(2.83, jnp.divide(5.1, b)), stddev)
    m = jnp.floor(jnp.multiply(jnp.add(count, 1), prob))

    def draw(state: tuple) -> tuple:
        i, k_out, accepted, key = state
        key, u_key, v_key = _split3(key)
        u = jnp.subtract(_uniform(u_key, shape, aval(prob).dtype, 0.0, 1.0), 0.5)
        v = _uniform(v_key, shape, aval(prob).dtype, 0.0, 1.0)
        us = jnp.subtract(0.5, jnp.abs(u))
        quick_accept = jnp.logical_and(jnp.greater_equal(us, 0.07), jnp.less_equal(v, v_r))
        k = jnp.floor(jnp.add(jnp.multiply(jnp.add(jnp.divide(jnp.multiply(2, a), us), b), u), c))
        reject = jnp.logical_or(jnp.less(k, 0), jnp.greater(k, count))
        log_v = jnp.log(jnp.divide(jnp.multiply(v, alpha), jnp.add(jnp.divide(a, jnp.multiply(us, us)), b)))
        bound = jnp.add(jnp.add(
            jnp.multiply(jnp.add(m, 0.5),
                         jnp.log(jnp.divide(jnp.add(m, 1), jnp.multiply(r, jnp.add(jnp.subtract(count, m), 1))))),
            jnp.multiply(jnp.add(count, 1), jnp.log(jnp.divide(jnp.add(jnp.subtract(count, m), 1),
                                                             jnp.add(jnp.subtract(count, k), 1))))),
            jnp.multiply(jnp.add(k, 0.5), jnp.log(jnp.divide(jnp.multiply(r, jnp.add(jnp.subtract(count, k), 1)),
                                                             jnp.add(k, 1)))))
        bound = jnp.add(jnp.add(bound, _stirling_tail(m)), _stirling_tail(jnp.subtract(count, m)))
        bound = jnp.subtract(jnp.subtract(bound, _stirling_tail(k)), _stirling_tail(jnp.subtract(count, k)))
        accept = jnp.logical_or(quick_accept, jnp.logical_and(jnp.logical_not(reject), jnp.less_equal(log_v, bound)))
        return jnp.add(i, 1), jnp.where(accept, k, k_out), jnp.logical_or(accepted, accept), key

    start = (np.int32(0), jnp.full(shape, -1, aval(prob).dtype), jnp.zeros(shape, dtypes.bool_), key)
    return lax.while_loop(functools.partial(_rejecting, max_iters), draw, start)[1]


def binomial(key: Any, n: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Binomial(n, p) counts, as floats (as in JAX): inversion where n * min(p, 1-p) <= 10,
    BTRS elsewhere, drawing for min(p, 1 - p) and reflecting. NaN for invalid n or p."""
    key, dtype = check_key("binomial", key), _float_dtype("binomial", dtype)
    (p,) = promote_dtypes_inexact(p)
    n = jnp.asarray(n)
    shape = _result_shape("binomial", shape, n, p)
    count = jnp.broadcast_to(lax.convert_element_type(n, aval(p).dtype), shape)
    p = jnp.broadcast_to(p, shape)
    p_below_half = jnp.less(p, 0.5)
    q = jnp.where(p_below_half, p, jnp.subtract(1.0, p))
    count_nan_or_negative = jnp.logical_or(jnp.isnan(count), jnp.less(count, 0.0))
    count_infinite, q_nan, q_negative = jnp.isinf(count), jnp.isnan(q), jnp.less(q, 0.0)
    q = jnp.where(jnp.logical_or(q_nan, q_negative), 0.01, q)
    use_inversion = jnp.logical_or(count_nan_or_negative, jnp.less_equal(jnp.multiply(count, q), 10.0))
    count = jnp.floor(count)
    max_iters = np.array(dtypes.finfo(dtype).max, dtype)
    small = _binomial_inversion(key, jnp.where(use_inversion, count, 0.0), q, shape, max_iters)
    large = _binomial_btrs(key, jnp.where(use_inversion, 10000.0, count), jnp.where(use_inversion, 0.5, q), shape,
                           max_iters)
    samples = jnp.where(use_inversion, small, large).astype(dtype)
    invalid = jnp.logical_or(jnp.logical_or(q_negative, q_nan), count_nan_or_negative)
    samples = jnp.where(invalid, np.nan, samples)
    samples = jnp.where(jnp.logical_and(count_infinite, jnp.logical_not(invalid)), np.inf, samples)
    drew_for_p = jnp.logical_or(jnp.logical_or(p_below_half, count_nan_or_negative),
                                jnp.logical_or(q_nan, count_infinite))
    return jnp.where(drew_for_p, samples, jnp.subtract(count.astype(dtype), samples)).astype(dtype)


def multinomial(key: Any, n: Any, p: Any, *, shape: Sequence[int] | None = None, dtype: Any = None,
                unroll: int | bool = 1) -> Any:
    """Counts of ``n`` draws among the categories of the last axis of ``p``: category i gets a
    Binomial(remaining draws, p_i / (p_i + ... + p_last)) count, with its own key."""
    key, dtype = check_key("multinomial", key), _float_dtype("multinomial", dtype)
    n, p = promote_dtypes_inexact(n, p)
    shape = aval(p).shape if shape is None else shape_tuple(shape)
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.moveaxis(jnp.broadcast_to(p, shape), -1, 0)
    remaining = jnp.flip(jnp.cumsum(jnp.flip(p, 0), 0), 0)
    ratios = jnp.divide(p, jnp.where(jnp.equal(remaining, 0), 1, remaining))

    def one_category(left: Any, ratio_and_key: tuple) -> tuple:
        ratio, category_key = ratio_and_key
        drawn = binomial(category_key, left, jnp.clip(ratio, 0, 1), dtype=aval(left).dtype)
        return jnp.subtract(left, drawn), drawn

    keys = split_data(key, (aval(ratios).shape[0],))
    _, counts = lax.scan(one_category, n, (ratios, keys), unroll=unroll)
    return jnp.moveaxis(counts, 0, -1).astype(dtype)


# --- matrices ------------------------------------------------------------------------------------------
def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Sequence[int] | None = None, dtype: Any = None,
                        method: str = "cholesky") -> Any:
    """Normal vectors with the given mean (..., n) and covariance (..., n, n): mean + F z for a
    factor F F^T = cov (Cholesky, or from eigh / svd, which accept singular covariances)."""
    key = check_key("multivariate_normal", key)
    mean, cov = promote_dtypes_inexact(mean, cov)
    if method not in ("svd", "eigh", "cholesky"):
        raise ValueError("method must be one of {'svd', 'eigh', 'cholesky'}")
    # (complex means refuse too: JAX checks the dtype they give)
    dtype = _float_dtype("multivariate_normal", aval(mean).dtype if dtype is None else dtype)
    mean_shape, cov_shape = aval(mean).shape, aval(cov).shape
    if not mean_shape:
        raise ValueError("multivariate_normal requires mean.ndim >= 1, got mean.ndim == 0")
    if len(cov_shape) < 2:
        raise ValueError(f"multivariate_normal requires cov.ndim >= 2, got cov.ndim == {len(cov_shape)}")
    n = mean_shape[-1]
    if cov_shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                         f"but got cov.shape == {cov_shape}.")
    batch_shapes = (mean_shape[:-1], cov_shape[:-2])
    if shape is None:
        shape = broadcast_shapes(*batch_shapes)
    else:
        shape = shape_tuple(shape)
        _check_shape("multivariate_normal", shape, *batch_shapes)
    if method == "svd":
        u, s, _ = jnp.linalg.svd(cov)
        factor = jnp.multiply(u, jnp.expand_dims(jnp.sqrt(s), -2))
    elif method == "eigh":
        w, v = jnp.linalg.eigh(cov)
        factor = jnp.multiply(v, jnp.expand_dims(jnp.sqrt(w), -2))
    else:
        factor = jnp.linalg.cholesky(cov)
    z = normal(key, (*shape, n), dtype)
    return jnp.add(mean, jnp.einsum("...ij,...j->...i", factor, z))


def orthogonal(key: Any, n: int, shape: Sequence[int] = (), dtype: Any = None, m: int | None = None) -> Any:
    """Haar-random n x m matrices with orthonormal columns (or rows, if n < m): the Q of the QR
    decomposition of a normal matrix, with column signs fixed by diag(R) > 0."""
    key, shape, dtype = _float_sampler_args("orthogonal", key, shape, dtype)
    n = operator.index(n)
    m = n if m is None else operator.index(m)
    q, r = jnp.linalg.qr(normal(key, (*shape, max(n, m), min(n, m)), dtype))
    signs = jnp.sign(jnp.diagonal(r, axis1=-2, axis2=-1))
    x = jnp.multiply(q, jnp.expand_dims(signs, -2))
    return jnp.swapaxes(x, -1, -2) if n < m else x


# --- keys ---------------------------------------------------------------------------------------------
def clone(key: Any) -> Any:
    """A copy of ``key``: keys are immutable values in ember, so the key itself."""
    data = check_key("clone", key, allow_batched=True)
    return key if isinstance(key, PRNGKeyArray) else data


def key_impl(keys: Any) -> str:
    """The name of the PRNG implementation of ``keys``: a typed key's, or the default for raw keys."""
    check_key("key_impl", keys, allow_batched=True)
    return keys._impl.name if isinstance(keys, PRNGKeyArray) else impls.DEFAULT.name
