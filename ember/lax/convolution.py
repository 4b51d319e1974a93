"""Convolutions and windowed reductions (pooling), as ``jax.lax`` has them.

``conv_general_dilated`` slides a kernel over the spatial dimensions of an input.
Its layout is described by ``ConvDimensionNumbers``: for each operand and the
output, which dimension is the batch (or output-feature) one, which the feature
(input-feature) one, then the spatial ones in the kernel's order (as XLA's
ConvGeneralDilated). ``reduce_window`` folds ``lax.add`` / ``lax.max`` /
``lax.min`` over sliding windows; each monoid is its own primitive.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember import dtypes
from ember.core.avals import ShapedArray
from ember.core.traits import Cost, Family
from ember.errors import TracerArrayConversionError
from ember.lax import elementwise
from ember.lax.base import aval, check_dtype, primitive, shape_tuple
from ember.lax.dot import _precision_param
from ember.lax.shapes import rev, transpose

__all__ = ["ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated",
           "conv_general_dilated_p", "conv_general_permutations", "conv_general_shape_tuple", "conv_shape_tuple",
           "conv_transpose", "conv_transpose_shape_tuple", "conv_with_general_padding", "padtype_to_pads",
           "reduce_window", "reduce_window_max_p", "reduce_window_min_p", "reduce_window_shape_tuple",
           "reduce_window_sum_p", "sliding_windows_p"]


class ConvDimensionNumbers(NamedTuple):
    """Dimension positions: ``lhs_spec`` = (batch, feature, spatial...), ``rhs_spec`` =
    (output feature, input feature, spatial...), ``out_spec`` = (batch, feature, spatial...)."""
    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def _spec_permutation(spec: str, pair: tuple[str, str], rhs_spec: str) -> tuple[int, ...]:
    spatial = sorted((i for i, c in enumerate(spec) if c not in pair), key=lambda i: rhs_spec.index(spec[i]))
    return (spec.index(pair[0]), spec.index(pair[1]), *spatial)


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """Normalize ``dimension_numbers`` (None, a ConvDimensionNumbers, or strings such as
    ``('NHWC', 'HWIO', 'NHWC')``) for operands of the given shapes."""
    rank = len(lhs_shape)
    if len(rhs_shape) != rank:
        raise TypeError(f"convolution requires lhs and rhs of one rank, got shapes {tuple(lhs_shape)} and "
                        f"{tuple(rhs_shape)}")
    if dimension_numbers is None:
        default = tuple(range(rank))
        return ConvDimensionNumbers(default, default, default)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(tuple(int(d) for d in spec) for spec in dimension_numbers))
    if not isinstance(dimension_numbers, (tuple, list)) or len(dimension_numbers) != 3 or not all(
            isinstance(s, str) for s in dimension_numbers):
        raise TypeError("convolution dimension_numbers must be None, a ConvDimensionNumbers or a triple of strings "
                        f"like ('NCHW', 'OIHW', 'NCHW'), got {dimension_numbers!r}")
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (spec, (a, b)) in enumerate(zip(dimension_numbers, pairs)):
        if len(spec) != rank:
            raise TypeError(f"convolution dimension_numbers[{i}] = {spec!r} must have length equal to the operand "
                            f"rank {rank} (lhs shape {tuple(lhs_shape)}, rhs shape {tuple(rhs_shape)})")
        if spec.count(a) != 1 or spec.count(b) != 1 or len(set(spec)) != len(spec):
            raise TypeError(f"convolution dimension_numbers[{i}] = {spec!r} must contain '{a}' and '{b}' exactly "
                            "once and no repeated characters")
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if not set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"} == set(out_spec) - {"N", "C"}:
        raise TypeError("convolution dimension_numbers must name the same spatial dimensions in all three "
                        f"specs, got {tuple(dimension_numbers)}")
    return ConvDimensionNumbers(*(_spec_permutation(s, p, rhs_spec) for s, p in zip(dimension_numbers, pairs)))


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int],
                    padding: str) -> list[tuple[int, int]]:
    """Explicit ``(low, high)`` pads for 'VALID', 'SAME' (extra padding high) or 'SAME_LOWER'."""
    kind = padding.upper() if isinstance(padding, str) else padding
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"padding must be 'SAME', 'SAME_LOWER' or 'VALID' (or explicit (low, high) pairs), "
                         f"got {padding!r}")
    pads = []
    for size, window, stride in zip(in_shape, window_shape, window_strides):
        total = max(0, (-(-size // stride) - 1) * stride + window - size)
        small, large = total // 2, total - total // 2
        pads.append((small, large) if kind == "SAME" else (large, small))
    return pads


def dilate_dim(size: int, dilation: int) -> int:
    return 0 if size == 0 else 1 + dilation * (size - 1)


def _window_output_size(size: int, window: int, stride: int, pad: tuple[int, int], base_dilation: int,
                        window_dilation: int) -> int:
    padded = dilate_dim(size, base_dilation) + pad[0] + pad[1]
    window = dilate_dim(window, window_dilation)
    return 0 if padded < window else (padded - window) // stride + 1


def _check_window_params(name: str, n: int, **params: tuple) -> None:
    for key, value in params.items():
        if len(value) != n:
            raise TypeError(f"{name}: {key} {value} must have {n} entries (one per window dimension)")
        if key != "padding" and any(v < 1 for v in value):
            raise ValueError(f"{name}: {key} {value} must be positive")


# --- conv_general_dilated ------------------------------------------------------------------------------
def _conv_rule(lhs: ShapedArray, rhs: ShapedArray, *, window_strides: tuple, padding: tuple, lhs_dilation: tuple,
               rhs_dilation: tuple, dimension_numbers: ConvDimensionNumbers, feature_group_count: int,
               batch_group_count: int, precision: Any, preferred_element_type: np.dtype | None) -> ShapedArray:
    where = f"(lhs shape {lhs.shape}, rhs shape {rhs.shape})"
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"conv_general_dilated requires operands of one dtype, got {lhs.dtype} and {rhs.dtype}; "
                        "convert them first (lax.convert_element_type)")
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise TypeError(f"conv_general_dilated requires lhs and rhs of one rank, at least 2 {where}")
    for name, spec in zip(("lhs", "rhs", "out"), dimension_numbers):
        if sorted(spec) != list(range(lhs.ndim)):
            raise TypeError(f"conv_general_dilated: {name} dimension numbers {spec} are not a permutation of "
                            f"range({lhs.ndim}) {where}")
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    n_spatial = lhs.ndim - 2
    _check_window_params("conv_general_dilated", n_spatial, window_strides=window_strides, padding=padding,
                         lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation)
    if feature_group_count < 1 or batch_group_count < 1:
        raise ValueError("conv_general_dilated: feature_group_count and batch_group_count must be positive, got "
                         f"{feature_group_count} and {batch_group_count}")
    if feature_group_count > 1 and batch_group_count > 1:
        raise ValueError("conv_general_dilated: at most one of feature_group_count and batch_group_count may "
                         f"exceed 1, got {feature_group_count} and {batch_group_count}")
    batch, in_features = lhs.shape[lhs_spec[0]], lhs.shape[lhs_spec[1]]
    out_features, kernel_in = rhs.shape[rhs_spec[0]], rhs.shape[rhs_spec[1]]
    if in_features % feature_group_count or in_features // feature_group_count != kernel_in:
        raise ValueError(f"conv_general_dilated: the lhs feature dimension ({in_features}) must equal the rhs "
                         f"input feature dimension ({kernel_in}) times feature_group_count ({feature_group_count}) "
                         f"{where}")
    for name, count in (("feature_group_count", feature_group_count), ("batch_group_count", batch_group_count)):
        if out_features % count:
            raise ValueError(f"conv_general_dilated: the rhs output feature dimension ({out_features}) must be a "
                             f"multiple of {name} ({count}) {where}")
    if batch % batch_group_count:
        raise ValueError(f"conv_general_dilated: the lhs batch dimension ({batch}) must be a multiple of "
                         f"batch_group_count ({batch_group_count}) {where}")
    spatial = [_window_output_size(lhs.shape[lhs_dim], rhs.shape[rhs_dim], *window)
               for lhs_dim, rhs_dim, *window in zip(lhs_spec[2:], rhs_spec[2:], window_strides, padding,
                                                    lhs_dilation, rhs_dilation)]
    logical = (batch // batch_group_count, out_features, *spatial)
    shape = [0] * lhs.ndim
    for size, position in zip(logical, out_spec):
        shape[position] = size
    if preferred_element_type is None:
        return ShapedArray(tuple(shape), lhs.dtype, lhs.weak_type and rhs.weak_type)
    return ShapedArray(tuple(shape), preferred_element_type, False)


def _conv_cost(eqn: Any) -> Cost:
    """Two flops per multiply-add: each output element sums the kernel's input features (of its
    group) times its window."""
    _, rhs_spec, _ = eqn.params["dimension_numbers"]
    rhs = eqn.invars[1].aval.shape
    depth = rhs[rhs_spec[1]] * math.prod(rhs[d] for d in rhs_spec[2:])
    return Cost(2.0 * math.prod(eqn.outvars[0].aval.shape) * depth)


conv_general_dilated_p = primitive("conv_general_dilated", _conv_rule, linear=True, cost=_conv_cost)


def _int_tuple(values: Any, n: int, what: str) -> tuple[int, ...]:
    return (1,) * n if values is None else shape_tuple(values, what)


def _explicit_padding(padding: Any, what: str) -> tuple[tuple[int, int], ...]:
    try:
        return tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence of (low, high) "
                        f"pairs, got {padding!r}") from None


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision: Any = None, preferred_element_type: Any = None) -> Any:
    """General n-d convolution (XLA's ConvGeneralDilated); see ``ConvDimensionNumbers`` for layouts.
    ``lhs_dilation`` > 1 gives transposed ("fractionally strided") convolutions."""
    lhs_shape, rhs_shape = aval(lhs).shape, aval(rhs).shape
    numbers = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    n = len(lhs_shape) - 2
    lhs_dilation = _int_tuple(lhs_dilation, n, "lhs_dilation")
    rhs_dilation = _int_tuple(rhs_dilation, n, "rhs_dilation")
    window_strides = shape_tuple(window_strides, "window_strides")
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dilation):
            raise ValueError("conv_general_dilated: string padding is not supported with lhs_dilation (transposed "
                             "convolution); pass explicit (low, high) pairs")
        kernel = [dilate_dim(rhs_shape[d], r) for d, r in zip(numbers.rhs_spec[2:], rhs_dilation)]
        padding = padtype_to_pads([lhs_shape[d] for d in numbers.lhs_spec[2:]], kernel, window_strides, padding)
    preferred = None if preferred_element_type is None else dtypes.canonicalize_dtype(preferred_element_type)
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=_explicit_padding(padding, "conv_general_dilated"),
        lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation, dimension_numbers=numbers,
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        precision=_precision_param(precision), preferred_element_type=preferred)


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                             padding: Any, dimension_numbers: Any) -> tuple[int, ...]:
    """The shape of ``conv_general_dilated``'s result for operands of these shapes (no dilation)."""
    lhs_spec, rhs_spec, out_spec = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    kernel = [rhs_shape[d] for d in rhs_spec[2:]]
    if isinstance(padding, str):
        padding = padtype_to_pads([lhs_shape[d] for d in lhs_spec[2:]], kernel, window_strides, padding)
    out = [0] * len(lhs_shape)
    out[out_spec[0]], out[out_spec[1]] = lhs_shape[lhs_spec[0]], rhs_shape[rhs_spec[0]]
    for d, size, window, stride, pad in zip(out_spec[2:], [lhs_shape[d] for d in lhs_spec[2:]], kernel,
                                            window_strides, padding):
        out[d] = _window_output_size(size, window, stride, tuple(pad), 1, 1)
    return tuple(out)


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], strides: Sequence[int], pads: Any,
                     batch_group_count: int = 1) -> tuple[int, ...]:
    """The shape of a convolution's result in the NCHW / OIHW layout (``pads`` a padding string
    or one (low, high) pair per spatial dimension)."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"Wrong number of explicit pads for convolution: expected {len(lhs_shape) - 2}, got "
                        f"{len(pads)}.")
    padded = [size + lo + hi for size, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(p < 0 for p in padded):
        raise ValueError(f"Negative padding is larger than the size of the corresponding dimension: got "
                         f"padding={pads} for lhs_shape[2:]={tuple(lhs_shape[2:])}")
    space = tuple(0 if p < w else (p - w) // s + 1 for p, w, s in zip(padded, rhs_shape[2:], strides))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + space


def conv_general_permutations(dimension_numbers: Any) -> tuple[tuple[int, ...], ...]:
    """The (lhs, rhs, out) permutations that a triple of layout strings (``('NHWC', 'HWIO',
    'NHWC')``) stands for: batch / feature dimensions first, then the spatial ones in the kernel's
    order. (``conv_dimension_numbers`` checks the strings, with shapes of their rank.)"""
    rank = len(dimension_numbers[0])
    return tuple(conv_dimension_numbers((1,) * rank, (1,) * rank, tuple(dimension_numbers)))


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any, precision: Any = None,
         preferred_element_type: Any = None) -> Any:
    """Convolution in the NCHW / OIHW layout without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                              lhs_dilation: Sequence[int] | None, rhs_dilation: Sequence[int] | None,
                              precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Convolution in the NCHW / OIHW layout with dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


# --- conv_transpose: the gradient of a strided convolution, as a layer ----------------------------------
def _default_transpose_numbers(rank: int) -> tuple[str, str, str]:
    """TensorFlow's layout, JAX's default for ``conv_transpose``: NHWC inputs, HWIO kernels."""
    if not 3 <= rank <= 8:
        raise TypeError(f"conv_transpose's default layout needs operands of rank 3 to 8, got rank {rank}; pass "
                        "dimension_numbers")
    spatial = "HWDXYZ"[:rank - 2]
    return "N" + spatial + "C", spatial + "IO", "N" + spatial + "C"


def _transpose_padding(kernel: int, stride: int, padding: str) -> tuple[int, int]:
    """The (low, high) padding of the stride-dilated input that makes ``conv_transpose`` with
    'SAME' give ``size * stride`` outputs and with 'VALID' ``(size - 1) * stride + kernel``
    (the shapes of the convolution it transposes, as JAX and TensorFlow define them)."""
    kind = padding.upper()
    if kind == "SAME":
        total = kernel + stride - 2
        low = kernel - 1 if stride > kernel - 1 else -(-total // 2)
    elif kind == "VALID":
        total = kernel + stride - 2 + max(kernel - stride, 0)
        low = kernel - 1
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME' or 'VALID' (or explicit (low, high) pairs), "
                         f"got {padding!r}")
    return low, total - low


def _transpose_pads(kernel: Sequence[int], strides: Sequence[int], rhs_dilation: Sequence[int],
                    padding: Any) -> tuple[tuple[int, int], ...]:
    if isinstance(padding, str):
        return tuple(_transpose_padding(dilate_dim(k, r), s, padding)
                     for k, s, r in zip(kernel, strides, rhs_dilation))
    return _explicit_padding(padding, "conv_transpose")


def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """A transposed ("deconvolution") convolution, as ``jax.lax.conv_transpose``: the input is
    dilated by ``strides`` and convolved with stride 1. ``transpose_kernel`` flips the kernel's
    spatial dimensions and swaps its feature dimensions, which makes this the exact gradient of
    ``conv_general_dilated`` with these strides. Default layout: NHWC / HWIO."""
    lhs_shape, rhs_shape = aval(lhs).shape, aval(rhs).shape
    if dimension_numbers is None:
        dimension_numbers = _default_transpose_numbers(len(lhs_shape))
    numbers = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    n = len(lhs_shape) - 2
    strides = shape_tuple(strides, "strides")
    if len(strides) != n:
        raise TypeError(f"conv_transpose: strides {strides} must have {n} entries (one per spatial dimension)")
    rhs_dilation = _int_tuple(rhs_dilation, n, "rhs_dilation")
    kernel = [rhs_shape[d] for d in numbers.rhs_spec[2:]]
    pads = _transpose_pads(kernel, strides, rhs_dilation, padding)
    if transpose_kernel:
        rhs = rev(rhs, numbers.rhs_spec[2:])
        perm = list(range(len(rhs_shape)))
        perm[numbers.rhs_spec[0]], perm[numbers.rhs_spec[1]] = perm[numbers.rhs_spec[1]], perm[numbers.rhs_spec[0]]
        rhs = transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * n, pads, lhs_dilation=strides, rhs_dilation=rhs_dilation,
                                dimension_numbers=numbers, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                               padding: Any, dimension_numbers: Any) -> tuple[int, ...]:
    """The shape of ``conv_transpose``'s result for operands of these shapes (no kernel dilation)."""
    lhs_spec, rhs_spec, out_spec = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    kernel = [rhs_shape[d] for d in rhs_spec[2:]]
    pads = _transpose_pads(kernel, window_strides, (1,) * len(kernel), padding)
    out = [0] * len(lhs_shape)
    out[out_spec[0]], out[out_spec[1]] = lhs_shape[lhs_spec[0]], rhs_shape[rhs_spec[0]]
    for d, size, window, stride, (lo, hi) in zip(out_spec[2:], [lhs_shape[d] for d in lhs_spec[2:]], kernel,
                                                 window_strides, pads):
        out[d] = _window_output_size(size, window, 1, (lo, hi), stride, 1)
    return tuple(out)


# --- reduce_window -----------------------------------------------------------------------------------------
def _reduce_window_rule(name: str, allowed: str) -> Callable:
    def rule(x: ShapedArray, *, window_dimensions: tuple, window_strides: tuple, padding: tuple,
             base_dilation: tuple, window_dilation: tuple) -> ShapedArray:
        check_dtype(name, x.dtype, allowed)
        _check_window_params(name, x.ndim, window_dimensions=window_dimensions, window_strides=window_strides,
                             padding=padding, base_dilation=base_dilation, window_dilation=window_dilation)
        shape = tuple(_window_output_size(*dims) for dims in zip(x.shape, window_dimensions, window_strides,
                                                                 padding, base_dilation, window_dilation))
        return x._replace(shape=shape)
    return rule


def _reduce_window_cost(eqn: Any) -> Cost:
    """One operation per element of each window."""
    return Cost(float(math.prod(eqn.outvars[0].aval.shape) * math.prod(eqn.params["window_dimensions"])))


reduce_window_sum_p = primitive("reduce_window_sum", _reduce_window_rule("reduce_window_sum", "iuf"), linear=True,
                                cost=_reduce_window_cost)
reduce_window_max_p = primitive("reduce_window_max", _reduce_window_rule("reduce_window_max", "biuf"),
                                cost=_reduce_window_cost)
reduce_window_min_p = primitive("reduce_window_min", _reduce_window_rule("reduce_window_min", "biuf"),
                                cost=_reduce_window_cost)


def window_identity(p: Any, dtype: np.dtype) -> Any:
    """The identity of the monoid of a reduce_window primitive (also its padding value)."""
    if p is reduce_window_sum_p:
        return np.zeros((), dtype)[()]
    return np.array(dtypes.lowest(dtype) if p is reduce_window_max_p else dtypes.highest(dtype), dtype)[()]


_MONOIDS = {elementwise.add: reduce_window_sum_p, elementwise.max: reduce_window_max_p,
            elementwise.min: reduce_window_min_p}


def _init_value(p: Any, init_value: Any, dtype: np.dtype) -> Any:
    """None where ``init_value`` is the identity of ``p`` in its own dtype (so -inf starts a max
    over integers, as in JAX); otherwise the init value, which must have the operand's dtype."""
    try:
        init = np.asarray(init_value)
    except TracerArrayConversionError:  # a traced init value
        init, init_dtype = init_value, aval(init_value).dtype
    else:
        init_dtype = dtypes.canonicalize_dtype(init.dtype)
        if init.shape == () and init == window_identity(p, init_dtype):
            return None
    if np.shape(init) != ():
        raise TypeError(f"reduce_window's init_value must be a scalar, got shape {np.shape(init)}")
    if init_dtype != dtype:
        raise TypeError(f"reduce_window got inconsistent dtypes for operands and init_values: got operand dtypes "
                        f"[{np.dtype(dtype)!r}] and init_value dtypes [{np.dtype(init_dtype)!r}]; give the init "
                        "value the operand's dtype")
    return init


def reduce_window(operand: Any, init_value: Any, computation: Callable, window_dimensions: Sequence[int],
                  window_strides: Sequence[int] | None = None, padding: Any = "VALID",
                  base_dilation: Sequence[int] | None = None, window_dilation: Sequence[int] | None = None) -> Any:
    """Fold ``computation`` (lax.add, lax.max or lax.min) over sliding windows, starting from
    ``init_value``. Padding takes the monoid's identity, so it never counts; an init value other
    than the identity (of the operand's dtype, as JAX requires) is combined once with each
    window's result."""
    p = _MONOIDS.get(computation)
    if p is None:
        raise NotImplementedError(f"reduce_window supports computation lax.add, lax.max or lax.min, got "
                                  f"{computation!r}")
    x = aval(operand)
    init = _init_value(p, init_value, x.dtype)
    window_dimensions = shape_tuple(window_dimensions, "window_dimensions")
    window_strides = _int_tuple(window_strides, x.ndim, "window_strides")
    window_dilation = _int_tuple(window_dilation, x.ndim, "window_dilation")
    if isinstance(padding, str):
        window = [dilate_dim(w, d) for w, d in zip(window_dimensions, window_dilation)]
        padding = padtype_to_pads(x.shape, window, window_strides, padding)
    out = p.bind(operand, window_dimensions=window_dimensions, window_strides=window_strides,
                 padding=_explicit_padding(padding, "reduce_window"),
                 base_dilation=_int_tuple(base_dilation, x.ndim, "base_dilation"), window_dilation=window_dilation)
    return out if init is None else computation(out, elementwise.convert_element_type(init, x.dtype))


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int], padding: Sequence[tuple[int, int]],
                              base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """The shape of ``reduce_window``'s result (``padding``: explicit ``(low, high)`` pairs)."""
    n = len(operand_shape)
    base, window = _int_tuple(base_dilation, n, "base_dilation"), _int_tuple(window_dilation, n, "window_dilation")
    return tuple(_window_output_size(*dims) for dims in zip(operand_shape, window_dimensions, window_strides,
                                                            map(tuple, padding), base, window))


# --- sliding windows (a backend's building block) ----------------------------------------------------------
def _sliding_windows_rule(x: ShapedArray, *, window_dimensions: tuple, window_strides: tuple,
                          window_dilation: tuple) -> ShapedArray:
    _check_window_params("sliding_windows", x.ndim, window_dimensions=window_dimensions,
                         window_strides=window_strides, window_dilation=window_dilation)
    positions = tuple(_window_output_size(n, w, s, (0, 0), 1, d) for n, w, s, d in
                      zip(x.shape, window_dimensions, window_strides, window_dilation))
    return x._replace(shape=positions + tuple(window_dimensions))


# Every window of ``x``: the result has one dimension per window position along each of ``x``'s
# dimensions, then one per window dimension (element ``[p..., w...]`` is ``x[p * stride + w *
# dilation]``). Backends build convolutions (patches for a matrix product) and windowed reductions
# from it after differentiation, so it never meets a tangent; it only moves data, and reads each
# element of ``x`` as many times as windows overlap it.
sliding_windows_p = primitive("sliding_windows", _sliding_windows_rule, family=Family.INDEX_REMAPPING)
