"""Shape primitives only move data, so they are linear: their tangent is the same
operation on the tangent, and their transpose moves cotangents back."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import lax
from ember.lax import shapes as sh
from ember.transforms.jvp import deflinear
from ember.transforms.tangents import zeros
from ember.transforms.transpose import is_undefined, transpose_rules

for _p in (sh.broadcast_in_dim_p, sh.reshape_p, sh.transpose_p, sh.squeeze_p, sh.rev_p, sh.slice_p,
           sh.concatenate_p, sh.pad_p):
    deflinear(_p)
deflinear(sh.dynamic_slice_p, linear_operands=(0,))
deflinear(sh.dynamic_update_slice_p, linear_operands=(0, 1))


def _broadcast_in_dim_transpose(ct: Any, x: Any, *, shape: tuple, broadcast_dimensions: tuple) -> list:
    """Sum over the dimensions the broadcast created or stretched from size 1."""
    in_shape = x.aval.shape
    stretched = [d for i, d in enumerate(broadcast_dimensions) if in_shape[i] == 1 and shape[d] != 1]
    created = [d for d in range(len(shape)) if d not in broadcast_dimensions]
    summed = lax.reduce_sum(ct, tuple(sorted(created + stretched))) if created or stretched else ct
    return [lax.reshape(summed, in_shape)]


def _slice_transpose(ct: Any, x: Any, *, start_indices: tuple, limit_indices: tuple, strides: Any) -> list:
    """Put the cotangent back where the slice came from: pad with zeros (interior padding for strides)."""
    shape = x.aval.shape
    if 0 in ct.aval.shape:
        return [zeros(x.aval)]
    # The widths as JAX's are: NumPy integers where it computes them with NumPy (they print so)
    if strides is None or all(st == 1 for st in strides):
        config = tuple(zip(start_indices, np.subtract(shape, limit_indices), (0,) * len(shape)))
    else:
        ends = np.add(start_indices, np.add(1, np.multiply(np.subtract(ct.aval.shape, 1), strides)))
        config = tuple(zip(start_indices, np.subtract(shape, ends), np.subtract(strides, 1)))
    return [sh.pad_p.bind(ct, lax.convert_element_type(0, x.aval.dtype), padding_config=config)]


def _concatenate_transpose(ct: Any, *operands: Any, dimension: int) -> list:
    out, start = [], 0
    for x in operands:
        size = x.aval.shape[dimension]
        out.append(lax.slice_in_dim(ct, start, start + size, axis=dimension) if is_undefined(x) else None)
        start += size
    return out


def _pad_transpose(ct: Any, x: Any, padding_value: Any, *, padding_config: tuple) -> list:
    """Undo the edge padding (negating it crops), then take every (interior + 1)-th element;
    the padding value's cotangent is what the operand did not take."""
    lo, hi, interior = zip(*padding_config)
    unpadded = lax.pad(ct, lax.convert_element_type(0, ct.aval.dtype),
                       [(-a, -b, 0) for a, b in zip(lo, hi)])
    ndim = len(lo)
    operand_ct = lax.slice(unpadded, (0,) * ndim, unpadded.aval.shape, [i + 1 for i in interior])
    everything = tuple(range(ndim))
    value_ct = lax.sub(lax.reduce_sum(ct, everything), lax.reduce_sum(operand_ct, everything)) \
        if is_undefined(padding_value) else None
    return [operand_ct if is_undefined(x) else None, value_ct]


def _dynamic_slice_transpose(ct: Any, x: Any, *starts: Any, slice_sizes: tuple) -> list:
    # (the primitive's starts are final, only clamped: lax must not wrap negative ones again)
    return [lax.dynamic_update_slice(zeros(x.aval), ct, starts, allow_negative_indices=False)] + [None] * len(starts)


def _dynamic_update_slice_transpose(ct: Any, x: Any, update: Any, *starts: Any) -> list:
    update_aval = update.aval
    operand_ct = lax.dynamic_update_slice(ct, zeros(update_aval), starts, allow_negative_indices=False) \
        if is_undefined(x) else None
    update_ct = lax.dynamic_slice(ct, starts, update_aval.shape, allow_negative_indices=False) \
        if is_undefined(update) else None
    return [operand_ct, update_ct] + [None] * len(starts)


transpose_rules.update({
    sh.broadcast_in_dim_p: _broadcast_in_dim_transpose,
    sh.reshape_p: lambda ct, x, *, new_sizes, dimensions: [lax.reshape(ct, x.aval.shape)],
    sh.transpose_p: lambda ct, x, *, permutation: [lax.transpose(ct, tuple(np.argsort(permutation)))],
    sh.squeeze_p: lambda ct, x, *, dimensions: [lax.expand_dims(ct, dimensions)],
    sh.rev_p: lambda ct, x, *, dimensions: [lax.rev(ct, dimensions)],
    sh.slice_p: _slice_transpose,
    sh.concatenate_p: _concatenate_transpose,
    sh.pad_p: _pad_transpose,
    sh.dynamic_slice_p: _dynamic_slice_transpose,
    sh.dynamic_update_slice_p: _dynamic_update_slice_transpose,
})
