"""Derivatives and batching of convolutions and windowed reductions.

``conv_general_dilated`` is bilinear. Its transpose with respect to the input is a
convolution of the cotangent with the spatially flipped kernel, whose input and
output feature roles are swapped and whose strides become input dilation; with
respect to the kernel it is a convolution of the input with the cotangent, batch
and feature roles swapped and strides becoming kernel dilation (XLA's formulas).
``reduce_window_sum`` is linear (its transpose spreads each cotangent over its
window: a strided pad and a windowed sum); the tangent of max and min is that of one
selected element per window, as XLA's select-and-scatter selects it.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ember import lax
from ember.lax import convolution as conv
from ember.lax.base import aval
from ember.transforms.batching import batching_rules, move_batch_axis
from ember.transforms.jvp import defjvp, deflinear, jvp_rules
from ember.transforms.transpose import is_undefined, transpose_rules

ConvDimensionNumbers = conv.ConvDimensionNumbers


# --- conv_general_dilated ------------------------------------------------------------------------------
defjvp(conv.conv_general_dilated_p,
       lambda g, ans, lhs, rhs, **params: conv.conv_general_dilated_p.bind(g, rhs, **params),
       lambda g, ans, lhs, rhs, **params: conv.conv_general_dilated_p.bind(lhs, g, **params))


def _split_axis(x: Any, axis: int, groups: int) -> Any:
    """Dimension ``axis`` of size ``groups * n`` as two, ``(groups, n)``."""
    shape = aval(x).shape
    return lax.reshape(x, shape[:axis] + (groups, shape[axis] // groups) + shape[axis + 1:])


def _merge_axis_into(x: Any, source: int, target: int) -> Any:
    """Dimension ``source`` merged into ``target`` (numbered without ``source``) as its major part."""
    shape = aval(x).shape
    order = [d for d in range(len(shape)) if d != source]
    order.insert(target, source)
    merged = [shape[d] for d in order]
    merged[target:target + 2] = [merged[target] * merged[target + 1]]
    return lax.reshape(lax.transpose(x, tuple(order)), tuple(merged))


def _swap_first_two(spec: tuple) -> tuple:
    return (spec[1], spec[0], *spec[2:])


def _vjp_lhs_padding(in_shape: list, window: list, strides: tuple, out_shape: list, padding: tuple,
                     lhs_dilation: tuple, rhs_dilation: tuple) -> tuple:
    """Padding of the cotangent convolution that gives back the input's (dilated) extent."""
    pads = []
    for size, k, s, o, (lo, _), ld, rd in zip(in_shape, window, strides, out_shape, padding, lhs_dilation,
                                             rhs_dilation):
        before = conv.dilate_dim(k, rd) - lo - 1
        after = conv.dilate_dim(size, ld) + conv.dilate_dim(k, rd) - 1 - conv.dilate_dim(o, s) - before
        pads.append((before, after))
    return tuple(pads)


def _conv_transpose_lhs(ct: Any, rhs: Any, lhs_type: Any, params: dict) -> Any:
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    groups = max(params["feature_group_count"], params["batch_group_count"])
    if groups > 1:  # the groups move from the kernel's output features to its input features
        rhs = _merge_axis_into(_split_axis(rhs, rhs_spec[0], groups), rhs_spec[0], rhs_spec[1])
    rhs_shape, ct_shape = aval(rhs).shape, aval(ct).shape
    padding = _vjp_lhs_padding([lhs_type.shape[d] for d in lhs_spec[2:]], [rhs_shape[d] for d in rhs_spec[2:]],
                               params["window_strides"], [ct_shape[d] for d in out_spec[2:]], params["padding"],
                               params["lhs_dilation"], params["rhs_dilation"])
    rhs = lax.rev(rhs, rhs_spec[2:])
    if aval(ct).dtype != aval(rhs).dtype:  # a widened result (preferred_element_type)
        rhs = lax.convert_element_type(rhs, aval(ct).dtype)
    out = conv.conv_general_dilated_p.bind(
        ct, rhs, window_strides=params["lhs_dilation"], padding=padding, lhs_dilation=params["window_strides"],
        rhs_dilation=params["rhs_dilation"],
        dimension_numbers=ConvDimensionNumbers(out_spec, _swap_first_two(rhs_spec), lhs_spec),
        feature_group_count=groups, batch_group_count=1, precision=params["precision"], preferred_element_type=None)
    if params["batch_group_count"] > 1:  # the batch groups were folded into the features: unfold them
        out = _merge_axis_into(_split_axis(out, lhs_spec[1], groups), lhs_spec[1], lhs_spec[0])
    return lax.convert_element_type(out, lhs_type.dtype, lhs_type.weak_type)


def _conv_transpose_rhs(ct: Any, lhs: Any, rhs_type: Any, params: dict) -> Any:
    numbers = params["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = numbers
    lhs_shape, ct_shape = aval(lhs).shape, aval(ct).shape
    pads = []
    for size, k, s, o, (lo, _), ld, rd in zip([lhs_shape[d] for d in lhs_spec[2:]],
                                             [rhs_type.shape[d] for d in rhs_spec[2:]], params["window_strides"],
                                             [ct_shape[d] for d in out_spec[2:]], params["padding"],
                                             params["lhs_dilation"], params["rhs_dilation"]):
        high = conv.dilate_dim(o, s) - conv.dilate_dim(size, ld) + conv.dilate_dim(k, rd) - lo - 1
        pads.append((lo, high))
    if aval(ct).dtype != aval(lhs).dtype:
        lhs = lax.convert_element_type(lhs, aval(ct).dtype)
    out = conv.conv_general_dilated_p.bind(
        lhs, ct, window_strides=params["rhs_dilation"], padding=tuple(pads), lhs_dilation=params["lhs_dilation"],
        rhs_dilation=params["window_strides"],
        dimension_numbers=ConvDimensionNumbers(*(_swap_first_two(s) for s in (lhs_spec, out_spec, rhs_spec))),
        feature_group_count=params["batch_group_count"], batch_group_count=params["feature_group_count"],
        precision=params["precision"], preferred_element_type=None)
    return lax.convert_element_type(out, rhs_type.dtype, rhs_type.weak_type)


def _conv_transpose(ct: Any, lhs: Any, rhs: Any, **params: Any) -> list:
    if is_undefined(lhs) and is_undefined(rhs):
        raise NotImplementedError("transpose of conv_general_dilated: both operands are being differentiated, "
                                  "which is not linear")
    if is_undefined(lhs):
        return [_conv_transpose_lhs(ct, rhs, lhs.aval, params), None]
    return [None, _conv_transpose_rhs(ct, lhs, rhs.aval, params)]


transpose_rules[conv.conv_general_dilated_p] = _conv_transpose


def _batch_conv(axis_size: int, values: tuple, dims: tuple, **params: Any) -> tuple[Any, int]:
    """One convolution for the whole batch (XLA's rule): a batched input folds into the batch; a
    batched kernel into the output features, and with the input batched too into the groups
    (each example's input features, or batch, convolved with its own kernel)."""
    (lhs, rhs), (lhs_dim, rhs_dim) = values, dims
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    groups = params["batch_group_count"]
    if rhs_dim is None:
        # Batch dimension (groups, n) becomes (groups, axis_size, n), so each batch group keeps its examples.
        x = _split_axis(move_batch_axis(lhs, lhs_dim, axis_size), lhs_spec[0] + 1, groups)
        x = _merge_axis_into(_merge_axis_into(x, 0, lhs_spec[0] + 1), lhs_spec[0], lhs_spec[0])
        out = conv.conv_general_dilated_p.bind(x, rhs, **params)
        return _split_axis(out, out_spec[0], axis_size), out_spec[0]
    rhs = move_batch_axis(rhs, rhs_dim, axis_size)
    fg, bg = params["feature_group_count"], params["batch_group_count"]
    if lhs_dim is not None:
        lhs = move_batch_axis(lhs, lhs_dim, axis_size)
        if bg > 1:
            lhs, params = _merge_axis_into(lhs, 0, lhs_spec[0]), {**params, "batch_group_count": bg * axis_size}
        else:
            lhs, params = _merge_axis_into(lhs, 0, lhs_spec[1]), {**params, "feature_group_count": fg * axis_size}
        out = conv.conv_general_dilated_p.bind(lhs, _merge_axis_into(rhs, 0, rhs_spec[0]), **params)
        return _split_axis(out, out_spec[1], axis_size), out_spec[1]
    if fg == bg == 1:
        out = conv.conv_general_dilated_p.bind(lhs, _merge_axis_into(rhs, 0, rhs_spec[0]), **params)
        return _split_axis(out, out_spec[1], axis_size), out_spec[1]
    # Grouped: the output features are (groups, per group); the examples go inside each group.
    count = max(fg, bg)
    kernel = _split_axis(rhs, rhs_spec[0] + 1, count)  # [batch, ..., (groups, per group), ...]
    kernel = _merge_axis_into(kernel, 0, rhs_spec[0] + 1)  # (groups, (batch, per group))
    kernel = _merge_axis_into(kernel, rhs_spec[0], rhs_spec[0])
    out = conv.conv_general_dilated_p.bind(lhs, kernel, **params)
    out = _split_axis(_split_axis(out, out_spec[1], count), out_spec[1] + 1, axis_size)  # (groups, batch, per)
    return _merge_axis_into(out, out_spec[1], out_spec[1] + 1), out_spec[1]


batching_rules[conv.conv_general_dilated_p] = _batch_conv


# --- reduce_window ----------------------------------------------------------------------------------------
deflinear(conv.reduce_window_sum_p)


def _reduce_window_sum_transpose(ct: Any, x: Any, *, window_dimensions: tuple, window_strides: tuple,
                                 padding: tuple, base_dilation: tuple, window_dilation: tuple) -> list:
    shape = x.aval.shape
    pads = _vjp_lhs_padding(list(shape), list(window_dimensions), window_strides, list(aval(ct).shape), padding,
                            base_dilation, window_dilation)
    spread = lax.pad(ct, np.zeros((), aval(ct).dtype),
                     tuple((lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides)))
    ones = (1,) * len(shape)
    return [conv.reduce_window_sum_p.bind(spread, window_dimensions=window_dimensions, window_strides=base_dilation,
                                          padding=((0, 0),) * len(shape), base_dilation=ones,
                                          window_dilation=window_dilation)]


transpose_rules[conv.reduce_window_sum_p] = _reduce_window_sum_transpose


def _select_in_windows(p: Any, prefer: Any) -> Any:
    """The jvp of windowed max/min: each window's tangent is that of ONE selected element, as XLA's
    select-and-scatter picks it (so the gradient sends each window's cotangent to one element).

    The window's elements, padding included (it holds the identity), are visited in row-major
    order; the selection starts at the first and moves to a later element ``e`` unless
    ``prefer(selected, e)`` (``>=`` for max, ``<=`` for min). Ties therefore keep the first
    extremum, and a NaN is replaced by the next element: the selected element is the first extremum
    after the last NaN (or that NaN, if it is last). The fold runs over the strided slices of the
    window offsets.
    """
    def rule(primals: tuple, tangents: tuple, *, window_dimensions: tuple, window_strides: tuple, padding: tuple,
             base_dilation: tuple, window_dilation: tuple) -> tuple[Any, Any]:
        [x], [t] = primals, tangents
        out = p.bind(x, window_dimensions=window_dimensions, window_strides=window_strides, padding=padding,
                     base_dilation=base_dilation, window_dilation=window_dilation)
        x_type = aval(x)
        pads = tuple((lo, hi, d - 1) for (lo, hi), d in zip(padding, base_dilation))
        padded = lax.pad(x, np.asarray(conv.window_identity(p, x_type.dtype), x_type.dtype), pads)
        padded_t = lax.pad(t, np.zeros((), aval(t).dtype), pads)
        selected = selected_t = None
        for offset in itertools.product(*(range(w) for w in window_dimensions)):
            start = tuple(o * d for o, d in zip(offset, window_dilation))
            limit = tuple(b + (n - 1) * s + 1 if n else b for b, n, s in zip(start, aval(out).shape, window_strides))
            piece = lax.slice(padded, start, limit, window_strides)
            piece_t = lax.slice(padded_t, start, limit, window_strides)
            if selected is None:
                selected, selected_t = piece, piece_t
                continue
            take = lax.bitwise_not(prefer(selected, piece))
            selected, selected_t = lax.select(take, piece, selected), lax.select(take, piece_t, selected_t)
        return out, selected_t
    return rule


jvp_rules[conv.reduce_window_max_p] = _select_in_windows(conv.reduce_window_max_p, lax.ge)
jvp_rules[conv.reduce_window_min_p] = _select_in_windows(conv.reduce_window_min_p, lax.le)


def _batch_reduce_window(p: Any) -> Any:
    def rule(axis_size: int, values: tuple, dims: tuple, *, window_dimensions: tuple, window_strides: tuple,
             padding: tuple, base_dilation: tuple, window_dilation: tuple) -> tuple[Any, int]:
        [x], [d] = values, dims

        def insert(params: tuple, value: Any) -> tuple:
            return params[:d] + (value,) + params[d:]

        return p.bind(x, window_dimensions=insert(window_dimensions, 1), window_strides=insert(window_strides, 1),
                      padding=insert(padding, (0, 0)), base_dilation=insert(base_dilation, 1),
                      window_dilation=insert(window_dilation, 1)), d
    return rule


for _p in (conv.reduce_window_sum_p, conv.reduce_window_max_p, conv.reduce_window_min_p):
    batching_rules[_p] = _batch_reduce_window(_p)


def _batch_sliding_windows(axis_size: int, values: tuple, dims: tuple, *, window_dimensions: tuple,
                           window_strides: tuple, window_dilation: tuple) -> tuple[Any, int]:
    """Windows of one element along the batch dimension, whose unit window dimension is dropped."""
    [x], [d] = values, dims
    out = conv.sliding_windows_p.bind(x, window_dimensions=window_dimensions[:d] + (1,) + window_dimensions[d:],
                                      window_strides=window_strides[:d] + (1,) + window_strides[d:],
                                      window_dilation=window_dilation[:d] + (1,) + window_dilation[d:])
    return lax.squeeze(out, (aval(x).ndim + d,)), d


batching_rules[conv.sliding_windows_p] = _batch_sliding_windows
