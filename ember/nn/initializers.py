"""``ember.nn.initializers``: parameter initializers, as ``jax.nn.initializers``.

Each builder returns ``init(key, shape, dtype=float32)`` drawing from ``ember.random`` with a
raw uint32[2] key, so for the same key the values equal JAX's wherever the ember.random
sampler does (bit for bit for uniform draws, within a few ulp for normal and truncated
normal). ``orthogonal`` goes through a QR decomposition, which agrees with JAX's to rounding.
Complex dtypes are accepted where JAX accepts them: ``normal``, ``variance_scaling`` and its
presets (complex samples of the same variance: a uniform disk for 'uniform', a normal of
truncated modulus for 'truncated_normal'), ``orthogonal``; ``uniform`` and ``truncated_normal``
refuse them, with ``ember.random``'s error.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

import ember.numpy as jnp
from ember import dtypes, random

__all__ = [
    "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
    "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones", "orthogonal",
    "truncated_normal", "uniform", "variance_scaling", "xavier_normal", "xavier_uniform", "zeros",
]

Initializer = Callable[..., Any]  # (key, shape, dtype=None) -> Array
Axes = int | Sequence[int]

# The standard deviation of a standard normal truncated to (-2, 2).
_TRUNCATED_NORMAL_STDDEV = .87962566103423978
# The standard deviation of a complex standard normal (E|z|^2 = 1) whose modulus is truncated to 2.
_COMPLEX_TRUNCATED_NORMAL_STDDEV = .95311164380491208


def _float_dtype(dtype: Any, who: str, complex_ok: bool = False) -> np.dtype:
    dtype = dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)
    if not (jnp.issubdtype(dtype, jnp.floating) or complex_ok and dtypes.is_complex(dtype)):
        kind = "floating or complex" if complex_ok else "real floating"
        raise TypeError(f"nn.initializers.{who}: dtype must be a {kind} type, got {np.dtype(dtype)}.")
    return dtype


def _sample_dtype(dtype: Any) -> np.dtype:
    """The dtype a sampler is asked for: checked there, so that a complex one gets its error."""
    return dtypes.default_float_dtype() if dtype is None else dtypes.canonicalize_dtype(dtype)


def _polar(key_modulus: Any, key_angle: Any, modulus: Callable[[Any], Any], shape: tuple[int, ...],
           dtype: np.dtype) -> Any:
    """Complex samples ``r e^{i theta}``: ``theta`` uniform in ``[0, 2 pi)``, ``r = modulus(u)`` for
    ``u`` uniform in ``[0, 1)`` (arithmetic in the complex type, as JAX, for equal values)."""
    part = dtypes.real_dtype(dtype)
    r = modulus(random.uniform(key_modulus, shape, part).astype(dtype))
    theta = jnp.multiply(2 * np.pi, random.uniform(key_angle, shape, part).astype(dtype))
    return jnp.multiply(r, jnp.exp(jnp.multiply(1j, theta)))


def _complex_uniform(key: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Uniform on the disk of radius sqrt(2): zero mean, ``E|z|^2 = 1``."""
    key_modulus, key_angle = random.split(key)
    return _polar(key_modulus, key_angle, lambda u: jnp.sqrt(jnp.multiply(2, u)), shape, dtype)


def _complex_truncated_normal(key: Any, upper: float, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """A complex standard normal conditioned on ``|z| < upper``: ``|z|^2`` of the untruncated one is
    exponential, so its CDF inverts in closed form."""
    key_modulus, key_angle = random.split(key)
    mass = jnp.subtract(1, jnp.exp(jnp.asarray(-(upper ** 2), dtype)))
    return _polar(key_modulus, key_angle,
                  lambda u: jnp.sqrt(jnp.negative(jnp.log(jnp.subtract(1, jnp.multiply(mass, u))))), shape, dtype)


def _shape(shape: Sequence[int]) -> tuple[int, ...]:
    return (operator.index(shape),) if np.ndim(shape) == 0 else tuple(map(operator.index, shape))


def zeros(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """All zeros (``key`` is ignored)."""
    return jnp.zeros(_shape(shape), dtypes.default_float_dtype() if dtype is None else dtype)


def ones(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """All ones (``key`` is ignored)."""
    return jnp.ones(_shape(shape), dtypes.default_float_dtype() if dtype is None else dtype)


def constant(value: Any, dtype: Any = None) -> Initializer:
    """Arrays full of ``value``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        return jnp.full(_shape(shape), value, dtypes.default_float_dtype() if dtype is None else dtype)
    return init


def uniform(scale: Any = 1e-2, dtype: Any = None) -> Initializer:
    """Uniform in ``[0, scale)``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _sample_dtype(dtype)
        return jnp.multiply(random.uniform(key, _shape(shape), dtype), jnp.asarray(scale, dtype))
    return init


def normal(stddev: Any = 1e-2, dtype: Any = None) -> Initializer:
    """Normal with mean 0 and standard deviation ``stddev``."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _float_dtype(dtype, "normal", complex_ok=True)
        return jnp.multiply(random.normal(key, _shape(shape), dtype), jnp.asarray(stddev, dtype))
    return init


def truncated_normal(stddev: Any = 1e-2, dtype: Any = None, lower: Any = -2.0, upper: Any = 2.0) -> Initializer:
    """A standard normal truncated to ``(lower, upper)``, then times ``stddev`` (no correction
    for the variance the truncation removes; ``variance_scaling`` applies one)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _sample_dtype(dtype)
        sample = random.truncated_normal(key, lower, upper, _shape(shape), dtype)
        return jnp.multiply(sample, jnp.asarray(stddev, dtype))
    return init


def _size(shape: tuple[int, ...], axes: Axes) -> int:
    return shape[axes] if isinstance(axes, int) else math.prod(shape[a] for a in axes)


def _fans(shape: tuple[int, ...], in_axis: Axes, out_axis: Axes, batch_axis: Axes) -> tuple[float, float]:
    """(fan_in, fan_out): the in/out sizes times the receptive field (the axes that are none of
    in, out or batch, e.g. a convolution's spatial axes)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"nn.initializers.variance_scaling: cannot tell the input and output sizes of a "
                         f"{len(shape)}-dimensional shape {shape} with the default in_axis; use a shape of at "
                         "least 2 dimensions or pass in_axis.")
    in_size, out_size = _size(shape, in_axis), _size(shape, out_axis)
    receptive_field = math.prod(shape) / in_size / out_size / _size(shape, batch_axis)
    return in_size * receptive_field, out_size * receptive_field


_DENOMINATORS = {
    "fan_in": lambda fan_in, fan_out: fan_in,
    "fan_out": lambda fan_in, fan_out: fan_out,
    "fan_avg": lambda fan_in, fan_out: (fan_in + fan_out) / 2,
    "fan_geo_avg": lambda fan_in, fan_out: (fan_in * fan_out) ** 0.5,
}


def variance_scaling(scale: Any, mode: str, distribution: str, in_axis: Axes = -2, out_axis: Axes = -1,
                     batch_axis: Axes = (), dtype: Any = None) -> Initializer:
    """Zero-mean samples of variance ``scale / n``, ``n`` the fan given by ``mode`` ('fan_in',
    'fan_out', 'fan_avg', 'fan_geo_avg'); ``distribution`` is 'truncated_normal' (at two
    standard deviations, rescaled to keep the variance), 'normal' or 'uniform'."""
    if mode not in _DENOMINATORS:
        raise ValueError(f"nn.initializers.variance_scaling: invalid mode {mode!r}; expected one of "
                         f"{sorted(_DENOMINATORS)}.")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"nn.initializers.variance_scaling: invalid distribution {distribution!r}; expected "
                         "'truncated_normal', 'normal' or 'uniform'.")

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape = _shape(shape)
        dtype = _float_dtype(dtype, "variance_scaling", complex_ok=True)
        variance = jnp.asarray(scale / _DENOMINATORS[mode](*_fans(shape, in_axis, out_axis, batch_axis)), dtype)
        is_complex = dtypes.is_complex(dtype)
        if distribution == "truncated_normal":
            if is_complex:
                stddev = jnp.divide(jnp.sqrt(variance), jnp.asarray(_COMPLEX_TRUNCATED_NORMAL_STDDEV, dtype))
                return jnp.multiply(_complex_truncated_normal(key, 2.0, shape, dtype), stddev)
            stddev = jnp.divide(jnp.sqrt(variance), jnp.asarray(_TRUNCATED_NORMAL_STDDEV, dtype))
            return jnp.multiply(random.truncated_normal(key, -2, 2, shape, dtype), stddev)
        if distribution == "normal":
            return jnp.multiply(random.normal(key, shape, dtype), jnp.sqrt(variance))
        if is_complex:
            return jnp.multiply(_complex_uniform(key, shape, dtype), jnp.sqrt(variance))
        return jnp.multiply(random.uniform(key, shape, dtype, -1), jnp.sqrt(jnp.multiply(3, variance)))
    return init


def _variance_scaling_preset(scale: float, mode: str, distribution: str, name: str, reference: str) -> Callable:
    def builder(in_axis: Axes = -2, out_axis: Axes = -1, batch_axis: Axes = (), dtype: Any = None) -> Initializer:
        return variance_scaling(scale, mode, distribution, in_axis=in_axis, out_axis=out_axis,
                                batch_axis=batch_axis, dtype=dtype)
    builder.__name__ = builder.__qualname__ = name
    builder.__doc__ = (f"{reference}: ``variance_scaling({scale}, {mode!r}, {distribution!r})``.")
    return builder


glorot_uniform = xavier_uniform = _variance_scaling_preset(1.0, "fan_avg", "uniform", "glorot_uniform",
                                                           "Glorot (Xavier) uniform")
glorot_normal = xavier_normal = _variance_scaling_preset(1.0, "fan_avg", "truncated_normal", "glorot_normal",
                                                         "Glorot (Xavier) normal")
lecun_uniform = _variance_scaling_preset(1.0, "fan_in", "uniform", "lecun_uniform", "LeCun uniform")
lecun_normal = _variance_scaling_preset(1.0, "fan_in", "truncated_normal", "lecun_normal", "LeCun normal")
he_uniform = kaiming_uniform = _variance_scaling_preset(2.0, "fan_in", "uniform", "he_uniform",
                                                        "He (Kaiming) uniform")
he_normal = kaiming_normal = _variance_scaling_preset(2.0, "fan_in", "truncated_normal", "he_normal",
                                                      "He (Kaiming) normal")


def _random_orthogonal(key: Any, rows: int, columns: int, dtype: Any) -> Any:
    """A (rows, columns) matrix with orthonormal columns (or rows, if fewer), Haar-distributed:
    Q of the QR of a normal matrix, its columns' signs fixed by R's diagonal (Mezzadri 2007)."""
    q, r = jnp.linalg.qr(random.normal(key, (max(rows, columns), min(rows, columns)), dtype))
    q = jnp.multiply(q, jnp.expand_dims(jnp.sign(jnp.diagonal(r)), -2))
    return jnp.matrix_transpose(q) if rows < columns else q


def orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """``scale`` times a random orthogonal matrix: the array, read as a matrix whose columns lie
    along ``column_axis``, has orthonormal columns (or rows, whichever are fewer)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape = _shape(shape)
        dtype = _float_dtype(dtype, "orthogonal", complex_ok=True)
        if len(shape) < 2:
            raise ValueError(f"nn.initializers.orthogonal: needs a shape of at least 2 dimensions, got {shape}.")
        if 0 in shape:
            return jnp.zeros(shape, dtype)
        columns = shape[column_axis]
        q = _random_orthogonal(key, math.prod(shape) // columns, columns, dtype)
        q = jnp.reshape(q, tuple(np.delete(shape, column_axis)) + (columns,))
        return jnp.multiply(jnp.asarray(scale, dtype), jnp.moveaxis(q, -1, column_axis))
    return init


def delta_orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """A 1D/2D/3D convolution kernel (shape rank 3 to 5) that is zero except at the spatial
    center, where it is an orthogonal (in, out) matrix (Xiao et al. 2018)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape = _shape(shape)
        dtype = _float_dtype(dtype, "delta_orthogonal", complex_ok=True)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"nn.initializers.delta_orthogonal: needs a 3D, 4D or 5D shape, got {shape}.")
        if shape[-1] < shape[-2]:
            raise ValueError(f"nn.initializers.delta_orthogonal: fan_in (shape[-2] = {shape[-2]}) must be at "
                             f"most fan_out (shape[-1] = {shape[-1]}).")
        center = tuple((k - 1) // 2 for k in shape[:-2])
        matrix = orthogonal(scale, column_axis, dtype)(key, shape[-2:])
        return jnp.zeros(shape, dtype).at[center].set(matrix)
    return init
