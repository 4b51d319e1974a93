"""Samplers: each turns a key into values of a distribution, with JAX's arithmetic, so that
the same key gives the same values as ``jax.random`` (see the package docstring for where
ember's math can differ in the last bits)."""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax, numpy as jnp
from ember.lax.base import aval, canonical_axes, shape_tuple
from ember.lax.stop_gradient import stop_gradient
from ember.numpy.core import broadcast_shapes, promote_dtypes_inexact
from ember.random import threefry
from ember.random.keys import check_key, random_bits, split_in_two

_SQRT2 = math.sqrt(2.0)


# --- arguments -------------------------------------------------------------------------------
def _float_dtype(name: str, dtype: Any) -> np.dtype:
    dt = dtypes.default_float_dtype() if dtype is None else dtypes.requested_dtype(dtype)
    if not dtypes.is_floating(dt):
        raise ValueError(f"dtype argument to `{name}` must be a float dtype, got {dt}")
    return dt


def _check_shape(name: str, shape: tuple[int, ...], *param_shapes: tuple[int, ...]) -> None:
    """Parameters must broadcast to the requested shape (they do not enlarge it)."""
    try:
        ok = broadcast_shapes(shape, *param_shapes) == shape
    except ValueError:
        ok = False
    if not ok:
        listed = ", ".join(str(tuple(s)) for s in param_shapes)
        raise ValueError(f"{name}: parameter shapes {listed} must broadcast to the shape argument {shape}")


# --- bits and uniform floats ---------------------------------------------------------------------
def bits(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Uniform random unsigned integers (uint32 by default; uint64 with x64 on)."""
    key = check_key("bits", key)
    dt = dtypes.default_uint_dtype() if dtype is None else dtypes.requested_dtype(dtype)
    if not dtypes.is_unsigned(dt):
        raise ValueError(f"dtype argument to `bits` must be an unsigned int dtype, got {dt}")
    return random_bits(key, dt.itemsize * 8, shape_tuple(shape))


def uniform(key: Any, shape: Sequence[int] = (), dtype: Any = None, minval: Any = 0.0, maxval: Any = 1.0) -> Any:
    """Uniform floats in ``[minval, maxval)``; the bounds broadcast to ``shape``."""
    key = check_key("uniform", key)
    return _uniform(key, shape_tuple(shape), _float_dtype("uniform", dtype), minval, maxval)


def _uniform(key: Any, shape: tuple[int, ...], dtype: np.dtype, minval: Any, maxval: Any) -> Any:
    minval, maxval = jnp.asarray(minval, dtype), jnp.asarray(maxval, dtype)
    _check_shape("uniform", shape, aval(minval).shape, aval(maxval).shape)
    info = dtypes.finfo(dtype)
    # Random mantissa bits under the exponent of 1.0 make a float in [1, 2); minus 1 gives [0, 1).
    # Types with under 8 mantissa bits (bfloat16) still draw 8 random bits.
    drawn_width = 8 if info.nmant < 8 else info.bits
    uint = threefry.UINT_OF_WIDTH[info.bits]
    drawn = lax.convert_element_type(random_bits(key, drawn_width, shape), uint)
    one = np.array(1.0, dtype).view(uint)
    mantissa = lax.shift_right_logical(drawn, drawn_width - info.nmant)
    unit = lax.sub(lax.bitcast_convert_type(lax.bitwise_or(mantissa, one), dtype), np.array(1.0, dtype))
    # Rounding can push the scaled value below minval; the maximum keeps the bound.
    return jnp.maximum(minval, jnp.add(jnp.multiply(unit, jnp.subtract(maxval, minval)), minval))


# --- normal family -----------------------------------------------------------------------------
# Giles' single-precision erf_inv ("Approximating the erfinv function", 2010): a polynomial in
# w - 2.5 (w < 5) or sqrt(w) - 3, w = -log(1 - x^2); highest degree first.
_ERF_INV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERF_INV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                 -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _erf_inv_as_xla(x: Any) -> Any:
    """erf_inv as XLA computes it for float32 and narrower (Giles' polynomial in float32).

    JAX's normal values go through this approximation, a few ulp (up to ~100 in the tails)
    from the exact erf_inv that ``lax.erf_inv`` computes; evaluating the same polynomial
    here keeps ember's samples equal to JAX's. float64 uses ``lax.erf_inv``."""
    dtype = aval(x).dtype
    if dtype == dtypes.float64:
        return lax.erf_inv(x)
    x = lax.convert_element_type(x, dtypes.float32)
    w = lax.neg(lax.log1p(lax.neg(lax.mul(x, x))))
    central = lax.lt(w, np.float32(5.0))
    t = lax.select(central, lax.sub(w, np.float32(2.5)), lax.sub(lax.sqrt(w), np.float32(3.0)))
    p = lax.select(central, np.float32(_ERF_INV_CENTRAL[0]), np.float32(_ERF_INV_TAIL[0]))
    for central_c, tail_c in zip(_ERF_INV_CENTRAL[1:], _ERF_INV_TAIL[1:]):
        p = lax.add(lax.select(central, np.float32(central_c), np.float32(tail_c)), lax.mul(p, t))
    # At |x| = 1 the polynomial is indeterminate; XLA returns x * the largest float there.
    at_one = lax.eq(lax.abs(x), np.float32(1.0))
    y = lax.select(at_one, lax.mul(x, np.finfo(np.float32).max), lax.mul(p, x))
    return lax.convert_element_type(y, dtype)


def normal(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Standard normal values: sqrt(2) * erf_inv(u), u uniform in (-1, 1). For a complex dtype,
    each part is drawn from its own half of ``split(key)`` and scaled by 1/sqrt(2), so that
    ``E|z|^2 = 1`` (as JAX draws them)."""
    key = check_key("normal", key)
    dt = dtypes.default_float_dtype() if dtype is None else dtypes.requested_dtype(dtype)
    if dtypes.is_complex(dt):
        part_dtype = dtypes.real_dtype(dt)
        real_key, imag_key = split_in_two(key)
        parts = (_real_normal(k, shape_tuple(shape), part_dtype) for k in (real_key, imag_key))
        return lax.div(lax.complex(*parts), lax.convert_element_type(_SQRT2, dt))
    if not dtypes.is_floating(dt):
        raise ValueError(f"dtype argument to `normal` must be a float or complex dtype, got {dt}")
    return _real_normal(key, shape_tuple(shape), dt)


def _real_normal(key: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    lowest = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(key, shape, dtype, lowest, 1.0)
    return lax.mul(np.array(_SQRT2, dtype), _erf_inv_as_xla(u))


def truncated_normal(key: Any, lower: Any, upper: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Normal values conditioned on ``lower < x < upper`` (by inverting the normal CDF on a
    uniform draw between the bounds' CDF values)."""
    key = check_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    lower, upper = jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)
    bound_shapes = (aval(lower).shape, aval(upper).shape)
    if shape is None:
        shape = broadcast_shapes(*bound_shapes)
    else:
        shape = shape_tuple(shape)
        _check_shape("truncated_normal", shape, *bound_shapes)
    sqrt2 = np.array(_SQRT2, dtype)
    cdf_low, cdf_high = lax.erf(lax.div(lower, sqrt2)), lax.erf(lax.div(upper, sqrt2))
    out = lax.mul(sqrt2, _erf_inv_as_xla(_uniform(key, shape, dtype, cdf_low, cdf_high)))
    # Rounding may land on a bound: keep the values strictly inside.
    inf = np.array(np.inf, dtype)
    return jnp.clip(out, lax.nextafter(stop_gradient(lower), inf), lax.nextafter(stop_gradient(upper), -inf))


# --- other continuous distributions -----------------------------------------------------------------
def _float_sampler_args(name: str, key: Any, shape: Any, dtype: Any) -> tuple[Any, tuple[int, ...], np.dtype]:
    return check_key(name, key), shape_tuple(shape), _float_dtype(name, dtype)


def exponential(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Exponential(1) values: -log(1 - u)."""
    key, shape, dtype = _float_sampler_args("exponential", key, shape, dtype)
    return lax.neg(lax.log1p(lax.neg(_uniform(key, shape, dtype, 0.0, 1.0))))


def laplace(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Laplace(0, 1) values: sign(u) * log(1 - |u|), u uniform in (-1, 1)."""
    key, shape, dtype = _float_sampler_args("laplace", key, shape, dtype)
    u = _uniform(key, shape, dtype, -1.0 + float(dtypes.finfo(dtype).epsneg), 1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Standard logistic values: log(u / (1 - u))."""
    key, shape, dtype = _float_sampler_args("logistic", key, shape, dtype)
    u = _uniform(key, shape, dtype, float(dtypes.finfo(dtype).tiny), 1.0)
    return lax.sub(lax.log(u), lax.log1p(lax.neg(u)))


def _check_mode(name: str, mode: Any) -> str:
    """How many bits a sampler draws per value: "low" (one uniform) or "high" (two)."""
    if mode not in ("low", "high"):
        raise ValueError(f"{name}: got mode={mode!r}, expected 'high' or 'low'")
    return mode


def gumbel(key: Any, shape: Sequence[int] = (), dtype: Any = None, mode: str | None = None) -> Any:
    """Standard Gumbel values: -log(-log(u)). ``mode="high"`` draws two uniforms per value to
    reach further into the tail (about 32 instead of 16 in float32)."""
    key, shape, dtype = _float_sampler_args("gumbel", key, shape, dtype)
    info = dtypes.finfo(dtype)
    if _check_mode("gumbel", "low" if mode is None else mode) == "low":
        u = _uniform(key, shape, dtype, float(info.tiny), 1.0)
        return lax.neg(lax.log(lax.neg(lax.log(u))))
    both = _uniform(key, (2, *shape), dtype, 0.0, 1.0)
    high, low = lax.index_in_dim(both, 0, keepdims=False), lax.index_in_dim(both, 1, keepdims=False)
    # Below 0.5, the second draw fills in the bits under the first one's last mantissa bit.
    refined = jnp.add(jnp.add(high, jnp.multiply(2.0 ** -info.nmant, low)), float(info.tiny))
    u = jnp.where(jnp.greater_equal(high, 0.5), high, refined)
    return lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(u)))))


# --- discrete distributions ------------------------------------------------------------------------
def bernoulli(key: Any, p: Any = 0.5, shape: Sequence[int] | None = None, mode: str = "low", *,
              out_sharding: Any = None) -> Any:
    """Booleans that are True with probability ``p`` (``shape`` defaults to ``p``'s shape).
    ``mode="high"`` uses two uniforms per value, for p below ~1e-7 in float32. ``out_sharding``:
    where the result is placed."""
    out = _bernoulli(key, p, shape, mode)
    return out if out_sharding is None else lax.with_sharding_constraint(out, out_sharding)


def _bernoulli(key: Any, p: Any, shape: Sequence[int] | None, mode: str) -> Any:
    if shape is not None:
        shape = shape_tuple(shape)
    _check_mode("bernoulli", mode)
    key = check_key("bernoulli", key)
    p = jnp.asarray(p)
    dtype = aval(p).dtype
    if not dtypes.is_floating(dtype):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got {dtype}.")
    if shape is None:
        shape = aval(p).shape
    else:
        _check_shape("bernoulli", shape, aval(p).shape)
    if mode == "low":
        return jnp.less(_uniform(key, shape, dtype, 0.0, 1.0), p)
    both = _uniform(key, (2, *shape), dtype, 0.0, 1.0)
    u1, u2 = lax.index_in_dim(both, 0, keepdims=False), lax.index_in_dim(both, 1, keepdims=False)
    return jnp.less(jnp.multiply(u2, 2.0 ** -dtypes.finfo(dtype).nmant), jnp.subtract(p, u1))


def rademacher(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """-1 or 1 with equal probability (int32 by default)."""
    key = check_key("rademacher", key)
    dtype = dtypes.default_int_dtype() if dtype is None else dtypes.requested_dtype(dtype)
    return lax.convert_element_type(jnp.where(bernoulli(key, 0.5, shape_tuple(shape)), 1, -1), dtype)


def _integer(bound: Any) -> Any:
    """A float bound of randint truncated to the default integer type (as JAX does)."""
    if dtypes.is_integer(aval(bound).dtype):
        return bound
    return lax.convert_element_type(bound, dtypes.default_int_dtype())


def _saturate(x: Any, dtype: np.dtype) -> Any:
    """Integer ``x`` converted to integer ``dtype``, clipped to its range instead of wrapping."""
    have, want = dtypes.iinfo(aval(x).dtype), dtypes.iinfo(dtype)
    clipped = jnp.clip(x, max(int(have.min), int(want.min)), min(int(have.max), int(want.max)))
    return lax.convert_element_type(clipped, dtype)


def randint(key: Any, shape: Sequence[int], minval: Any, maxval: Any, dtype: Any = None) -> Any:
    """Uniform integers in ``[minval, maxval)`` (int32 by default); ``minval`` is returned where
    ``maxval <= minval``. 8- and 16-bit results are drawn at 32 bits, as in JAX."""
    key = check_key("randint", key)
    dtype = dtypes.default_int_dtype() if dtype is None else dtypes.requested_dtype(dtype)
    if not dtypes.is_integer(dtype):
        raise TypeError(f"randint only accepts integer dtypes, got {dtype}")
    shape = shape_tuple(shape)
    info = dtypes.iinfo(dtype)
    if info.bits >= 32:
        return _randint(key, shape, minval, maxval, dtype)
    minval = jnp.clip(jnp.asarray(minval, dtypes.int32), int(info.min), int(info.max))
    maxval = jnp.clip(jnp.asarray(maxval, dtypes.int32), int(info.min), int(info.max) + 1)
    return lax.convert_element_type(_randint(key, shape, minval, maxval, dtypes.int32), dtype)


def _randint(key: Any, shape: tuple[int, ...], minval: Any, maxval: Any, dtype: np.dtype) -> Any:
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    _check_shape("randint", shape, aval(minval).shape, aval(maxval).shape)
    minval, maxval = _integer(minval), _integer(maxval)
    # A maxval past dtype's largest value (randint(k, s, 0, 256, uint8)) widens the span by one.
    bound_dtype = aval(maxval).dtype
    largest = min(int(dtypes.iinfo(dtype).max), int(dtypes.iinfo(bound_dtype).max))
    maxval_past_dtype = jnp.greater(maxval, np.array(largest, bound_dtype))
    minval, maxval = _saturate(minval, dtype), _saturate(maxval, dtype)
    minval, maxval, maxval_past_dtype = (jnp.broadcast_to(v, shape) for v in (minval, maxval, maxval_past_dtype))

    # Draw twice the bits of dtype and reduce modulo the span: (hi * 2**n + lo) mod span, with
    # 2**n mod span computed as ((2**(n/2) mod span)**2) mod span to stay in n bits.
    nbits = dtypes.iinfo(dtype).bits
    high_key, low_key = split_in_two(key)
    high, low = random_bits(high_key, nbits, shape), random_bits(low_key, nbits, shape)
    uint = threefry.UINT_OF_WIDTH[nbits]
    span = lax.convert_element_type(lax.sub(maxval, minval), uint)
    span = lax.select(lax.le(maxval, minval), 1, span)
    span = lax.select(lax.bitwise_and(maxval_past_dtype, lax.gt(maxval, minval)), lax.add(span, 1), span)
    multiplier = lax.rem(lax.convert_element_type(2 ** (nbits // 2), uint), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(high, span), multiplier), lax.rem(low, span))
    return lax.add(minval, lax.convert_element_type(lax.rem(offset, span), dtype))


# --- permutations and choices ------------------------------------------------------------------------
def _shuffle(key: Any, x: Any, axis: int) -> Any:
    """Shuffle along ``axis`` by sorting on random 32-bit keys; repeated rounds (with fresh
    keys) make ties, hence bias, negligible: 3 * log(size) / log(2**32 - 1) rounds."""
    size = math.prod(aval(x).shape)
    rounds = math.ceil(3 * math.log(max(1, size)) / math.log(2**32 - 1))
    for _ in range(rounds):
        key, subkey = split_in_two(key)
        _, x = lax.sort_key_val(random_bits(subkey, 32, aval(x).shape), x, axis)
    return x


def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A random permutation of ``arange(x)`` (integer ``x``) or of ``x`` along ``axis``
    (each slice on its own with ``independent=True``)."""
    key = check_key("permutation", key)
    x = jnp.asarray(x)
    a = aval(x)
    if a.ndim == 0:
        if not dtypes.is_integer(a.dtype):
            raise TypeError("permutation: x must be an integer or at least 1-dimensional")
        return _shuffle(key, jnp.arange(operator.index(x)), 0)
    axis = canonical_axes(axis, a.ndim)[0]
    if independent or a.ndim == 1:
        return _shuffle(key, x, axis)
    order = _shuffle(key, jnp.arange(a.shape[axis]), 0)
    return jnp.take(x, order, axis)


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None, axis: int = 0,
           mode: str | None = None) -> Any:
    """Random draws from ``a`` (or ``arange(a)``) along ``axis``, with probabilities ``p``
    (uniform if None), with or without replacement."""
    key = check_key("choice", key)
    if not isinstance(shape, Sequence):
        raise TypeError(f"shape argument of ember.random.choice must be a sequence, got {shape!r}")
    shape = shape_tuple(shape)
    arr = jnp.asarray(a)
    arr_shape = aval(arr).shape
    if arr_shape:
        axis = canonical_axes(axis, len(arr_shape))[0]
        n_inputs = arr_shape[axis]
    else:  # draws from arange(a)
        axis, n_inputs = 0, operator.index(arr)
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, aval(arr).dtype)
    if n_inputs <= 0:
        raise ValueError("choice: a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"Cannot take a larger sample (size {n_draws}) than population (size {n_inputs}) "
                         "when 'replace=False'")
    if p is None and not replace:
        shuffled = permutation(key, arr if arr_shape else n_inputs, axis)
        drawn = lax.slice_in_dim(shuffled, 0, n_draws, axis=axis)
    else:
        if p is None:
            indices = randint(key, shape, 0, n_inputs)
        else:
            indices = _weighted_indices(key, p, n_inputs, shape, replace, mode)
        drawn = jnp.take(arr, indices, axis) if arr_shape else indices
    return jnp.reshape(drawn, arr_shape[:axis] + shape + arr_shape[axis + 1:])


def _weighted_indices(key: Any, p: Any, n_inputs: int, shape: tuple[int, ...], replace: bool, mode: Any) -> Any:
    """Indices drawn with probabilities ``p``: by inverting the cumulative sum (with
    replacement) or as the top of Gumbel-perturbed log-probabilities (without)."""
    (p,) = promote_dtypes_inexact(p)
    if aval(p).shape != (n_inputs,):
        raise ValueError("p must be None or a 1D vector with the same size as a.shape[axis]. "
                         f"p has shape {aval(p).shape} and a.shape[axis] is {n_inputs}.")
    dtype = aval(p).dtype
    if replace:
        cumulative = jnp.cumsum(p)
        total = lax.index_in_dim(cumulative, n_inputs - 1, keepdims=False)
        target = jnp.multiply(total, jnp.subtract(1, _uniform(key, shape, dtype, 0.0, 1.0)))
        indices = jnp.searchsorted(cumulative, target)
    else:
        perturbed = jnp.add(gumbel(key, (n_inputs,), dtype, mode), jnp.log(p))
        indices = lax.top_k(perturbed, math.prod(shape))[1]
    return lax.convert_element_type(indices, dtypes.default_int_dtype())


def categorical(key: Any, logits: Any, axis: int = -1, shape: Sequence[int] | None = None, replace: bool = True,
                mode: str | None = None) -> Any:
    """Category indices drawn with probabilities softmax(logits) along ``axis``: the argmax of
    Gumbel-perturbed logits (the top of them without replacement). Leading dimensions of
    ``shape`` beyond the batch shape draw more samples."""
    key = check_key("categorical", key)
    logits = jnp.asarray(logits)
    logits_shape = aval(logits).shape
    axis = canonical_axes(axis, len(logits_shape))[0]
    batch_shape = logits_shape[:axis] + logits_shape[axis + 1:]
    if shape is None:
        shape = batch_shape
    else:
        shape = shape_tuple(shape)
        _check_shape("categorical", shape, batch_shape)
    sample_shape = shape[:len(shape) - len(batch_shape)]
    dtype = aval(logits).dtype
    if replace:
        draw_shape = shape[len(sample_shape):]
        draw_shape = (*sample_shape, *draw_shape[:axis], logits_shape[axis], *draw_shape[axis:])
        noise = gumbel(key, draw_shape, dtype, mode)
        perturbed = jnp.add(noise, lax.expand_dims(logits, tuple(range(len(sample_shape)))))
        return jnp.argmax(perturbed, axis=len(sample_shape) + axis)
    n_samples = math.prod(sample_shape)
    if n_samples > logits_shape[axis]:
        raise ValueError(f"Number of samples without replacement ({n_samples}) cannot exceed number of "
                         f"categories ({logits_shape[axis]}).")
    perturbed = jnp.add(logits, gumbel(key, logits_shape, dtype, mode))
    _, indices = lax.top_k(jnp.moveaxis(perturbed, axis, -1), n_samples)
    # indices: (*batch_shape, n_samples) -> (*sample_shape, *batch_shape)
    batch_ndim = len(batch_shape)
    return lax.reshape(indices, shape, (batch_ndim, *range(batch_ndim)))
