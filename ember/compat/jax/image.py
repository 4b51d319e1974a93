"""``jax.image``: ``resize`` and ``scale_and_translate``, with JAX's kernels and results.

Resampling is separable: along each spatial dimension the output is the input times a weight
matrix (input pixels x output pixels), the kernel evaluated at each output pixel's sample
location, normalized to sum to one; one ``einsum`` applies all of them. With ``antialias``,
a downscaling kernel is widened by the scale (a low-pass filter as well as an interpolation).
Pixels are half-centred, as in JAX, TensorFlow and Pillow. ``nearest`` gathers instead.
"""
from __future__ import annotations

import enum
import math
from typing import Any, Sequence

import numpy as np

import ember.numpy as jnp
from ember import lax
from ember.numpy.core import promote_dtypes_inexact

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """Image resize method (JAX's names and values): NEAREST, LINEAR, LANCZOS3, LANCZOS5, CUBIC (Keys,
    a = -0.5), CUBIC_PYTORCH (OpenCV's a = -0.75 with edge padding when not antialiasing), AREA."""

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> "ResizeMethod":
        method = _NAMES.get(s)
        if method is None:
            raise ValueError(f'Unknown resize method "{s}"')
        return method


_NAMES = {
    "nearest": ResizeMethod.NEAREST,
    **dict.fromkeys(["linear", "bilinear", "trilinear", "triangle"], ResizeMethod.LINEAR),
    "lanczos3": ResizeMethod.LANCZOS3, "lanczos5": ResizeMethod.LANCZOS5,
    **dict.fromkeys(["cubic", "bicubic", "tricubic"], ResizeMethod.CUBIC),
    **dict.fromkeys(["cubic-pytorch", "bicubic-pytorch"], ResizeMethod.CUBIC_PYTORCH),
    "area": ResizeMethod.AREA,
}


# --- kernels: weight as a function of the distance |x| from the sample location, in input pixels ---------
def _lanczos(radius: float, x: Any) -> Any:
    y = radius * jnp.sin(np.pi * x) * jnp.sin(np.pi * x / radius)
    out = jnp.where(x > 1e-3, jnp.divide(y, jnp.where(x != 0, np.pi ** 2 * x ** 2, 1)), 1)
    return jnp.where(x > radius, 0., out)


def _keys_cubic(x: Any) -> Any:
    """Keys' cubic convolution kernel with a = -0.5 (Pillow's, TensorFlow's, PyTorch's antialiased one)."""
    out = ((1.5 * x - 2.5) * x) * x + 1.
    out = jnp.where(x >= 1., ((-0.5 * x + 2.5) * x - 4.) * x + 2., out)
    return jnp.where(x >= 2., 0., out)


def _opencv_cubic(x: Any) -> Any:
    """The cubic kernel with a = -0.75: OpenCV's, and PyTorch's without antialiasing."""
    a = -0.75
    out = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    out = jnp.where(x >= 1.0, ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a, out)
    return jnp.where(x >= 2.0, 0.0, out)


def _triangle(x: Any) -> Any:
    return jnp.maximum(0, 1 - jnp.abs(x))


_AREA = object()  # (not a kernel of the distance: the overlap of the output pixel with each input pixel)

_KERNELS: dict[ResizeMethod, tuple[int, Any]] = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, lambda x: _lanczos(3., x)),
    ResizeMethod.LANCZOS5: (5, lambda x: _lanczos(5., x)),
    ResizeMethod.CUBIC: (2, _keys_cubic),
    ResizeMethod.CUBIC_PYTORCH: (2, _opencv_cubic),
    ResizeMethod.AREA: (1, _AREA),
}


def _normalized(weights: Any) -> Any:
    """Columns scaled to sum to one; a column whose weights (nearly) cancel is all zero."""
    total = jnp.sum(weights, axis=0, keepdims=True)
    return jnp.where(jnp.abs(total) > 1000. * float(np.finfo(np.float32).eps),
                     jnp.divide(weights, jnp.where(total != 0, total, 1)), 0)


def _weight_matrix(input_size: int, output_size: int, scale: Any, translation: Any, kernel: Any, antialias: bool,
                   edge_padding: bool, radius: int) -> Any:
    """The (input_size, output_size) matrix taking one line of input pixels to the output's."""
    dtype = jnp.result_type(scale, translation)
    inv_scale = 1. / scale
    kernel_scale = jnp.maximum(inv_scale, 1.) if antialias else 1.  # (widen only when downscaling)
    # Each output pixel's centre, in input coordinates (half-centred pixels).
    sample_f = (jnp.arange(output_size, dtype=dtype) + 0.5) * inv_scale - translation * inv_scale - 0.5
    if edge_padding and antialias:  # (unreachable from resize / scale_and_translate, as in JAX)
        k = math.ceil(radius * max(1.0 / float(scale), 1.0))
    else:
        k = radius if edge_padding else 0
    expanded = jnp.arange(-k, input_size + k, dtype=dtype)
    if kernel is _AREA:
        left = jnp.arange(output_size, dtype=dtype) * inv_scale - translation * inv_scale
        right = left + inv_scale
        pixel_left = jnp.arange(input_size, dtype=dtype)
        weights = jnp.maximum(0.0, jnp.minimum(right[None, :], pixel_left[:, None] + 1.0)
                              - jnp.maximum(left[None, :], pixel_left[:, None]))
    else:
        weights = kernel(jnp.abs(sample_f[None, :] - expanded[:, None]) / kernel_scale)
    if edge_padding:  # the weights of pixels past the edge go to the edge pixel
        clamped = jnp.clip(expanded.astype(jnp.int32), 0, input_size - 1)
        columns = lax.broadcast_in_dim(jnp.arange(output_size), (expanded.shape[0], output_size), (1,))
        weights = jnp.zeros((input_size, output_size), dtype=dtype).at[clamped[:, None], columns].add(weights)
        return _normalized(weights)
    weights = _normalized(weights)
    # A sample location outside the input gets no value.
    inside = jnp.logical_and(sample_f >= -0.5, sample_f <= input_size - 0.5)
    return jnp.where(inside[None, :], weights, 0)


def _scale_and_translate(x: Any, output_shape: tuple, spatial_dims: Sequence[int], scale: Any, translation: Any,
                         kernel: Any, antialias: bool, precision: Any, edge_padding: bool, radius: int) -> Any:
    if len(spatial_dims) == 0:
        return x
    rank = len(output_shape)
    operands: list = []
    out_indices = list(range(rank))
    for i, d in enumerate(spatial_dims):
        d = d + x.ndim if d < 0 else d
        w = _weight_matrix(x.shape[d], output_shape[d], scale[i], translation[i], kernel, antialias,
                           edge_padding, radius).astype(x.dtype)
        operands += [w, [d, rank + i]]
        out_indices[d] = rank + i
    return jnp.einsum(x, list(range(rank)), *operands, out_indices, precision=precision)


def _canonical_shape(shape: Any, image: Any) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if len(shape) != image.ndim:
        raise ValueError("shape must have length equal to the number of dimensions of x; "
                         f" {shape} vs {image.shape}")
    return shape


def _method(method: str | ResizeMethod) -> ResizeMethod:
    return ResizeMethod.from_string(method) if isinstance(method, str) else method


def scale_and_translate(image: Any, shape: Sequence[int], spatial_dims: Sequence[int], scale: Any,
                        translation: Any, method: str | ResizeMethod, antialias: bool = True,
                        precision: Any = lax.Precision.HIGHEST) -> Any:
    """Resample ``image`` to ``shape`` under the warp ``x -> x * scale + translation`` along
    ``spatial_dims`` (the inverse warp gives each output pixel's sample location; a location
    outside the input gives 0). Every method but ``nearest``."""
    image = jnp.asarray(image)
    shape = _canonical_shape(shape, image)
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for scale_and_translate.")
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    edge_padding = method == ResizeMethod.CUBIC_PYTORCH and not antialias
    image, = promote_dtypes_inexact(image)
    scale, translation = promote_dtypes_inexact(scale, translation)
    return _scale_and_translate(image, shape, spatial_dims, scale, translation, kernel, antialias, precision,
                                edge_padding, radius)


def _resize_nearest(x: Any, output_shape: tuple) -> Any:
    for d, (m, n) in enumerate(zip(x.shape, output_shape)):
        if m == n:
            continue
        # (float32 arithmetic, as JAX's, so that the chosen pixels are the same)
        offsets = jnp.floor((jnp.arange(n, dtype=np.float32) + 0.5) * np.float32(m) / np.float32(n))
        index: list = [slice(None)] * x.ndim
        index[d] = offsets.astype(np.int32)
        x = x[tuple(index)]
    return x


def _resize(image: Any, shape: tuple, method: str | ResizeMethod, antialias: bool, precision: Any) -> Any:
    method = _method(method)
    if method == ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    image, = promote_dtypes_inexact(image)
    # Dimensions that keep their size are left alone: every kernel interpolates.
    spatial_dims = tuple(i for i in range(len(shape)) if image.shape[i] != shape[i])
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius, kernel = _KERNELS[method]
    scale = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in spatial_dims]
    edge_padding = method == ResizeMethod.CUBIC_PYTORCH and not antialias
    return _scale_and_translate(image, shape, spatial_dims, scale, [0.] * len(spatial_dims), kernel, antialias,
                                precision, edge_padding, radius)


def resize(image: Any, shape: Sequence[int], method: str | ResizeMethod, antialias: bool = True,
           precision: Any = lax.Precision.HIGHEST) -> Any:
    """``image`` resampled to ``shape`` (every dimension: one that keeps its size is unchanged).
    ``method``: "nearest" (keeps the dtype), "linear" / "bilinear" / "trilinear", "cubic" /
    "bicubic" / "tricubic", "lanczos3", "lanczos5", "cubic-pytorch", "area", or a ResizeMethod.
    ``antialias`` filters when downscaling (no effect when upscaling)."""
    image = jnp.asarray(image)
    # (Not jitted here, unlike JAX: every image size would be a retrace of one wrapper. Under jit it is
    # staged with the rest of the program.)
    return _resize(image, _canonical_shape(shape, image), method, antialias, precision)
