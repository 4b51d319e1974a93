"""Reference rules for shape primitives."""
from __future__ import annotations

import math

import numpy as np

from ember.backends.reference import impl_rules
from ember.core.evaluation import plain_rule
from ember.lax import shapes as sh

# Results of up to this many elements are written out (an assignment: a fifth of
# ``np.broadcast_to``'s cost, and an eager result that needs no copy); larger ones are views.
BROADCAST_COPY_MAX_ELEMENTS = 4096


def _broadcast_in_dim(x: np.ndarray, *, shape: tuple, broadcast_dimensions: tuple) -> np.ndarray:
    expanded = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[i]
    if math.prod(shape) > BROADCAST_COPY_MAX_ELEMENTS:
        return np.broadcast_to(x.reshape(expanded), shape)
    out = np.empty(shape, x.dtype)
    out[...] = x.reshape(expanded)
    return out


def _slice(x: np.ndarray, *, start_indices: tuple, limit_indices: tuple, strides) -> np.ndarray:
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(lo, hi, st) for lo, hi, st in zip(start_indices, limit_indices, strides))]


def _pad(x: np.ndarray, value: np.ndarray, *, padding_config: tuple) -> np.ndarray:
    # Interior padding first, then crop / extend at the edges.
    for axis, (lo, hi, interior) in enumerate(padding_config):
        n = x.shape[axis]
        if interior and n > 1:
            shape = list(x.shape)
            shape[axis] = n + (n - 1) * interior
            out = np.full(shape, value, dtype=x.dtype)
            idx = [slice(None)] * x.ndim
            idx[axis] = slice(None, None, interior + 1)
            out[tuple(idx)] = x
            x = out
        if lo < 0 or hi < 0:
            idx = [slice(None)] * x.ndim
            idx[axis] = slice(max(-lo, 0), x.shape[axis] - max(-hi, 0))
            x = x[tuple(idx)]
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        x = np.pad(x, widths, constant_values=np.asarray(value, dtype=x.dtype))
    return x


def _iota(*, dtype, shape: tuple, dimension: int) -> np.ndarray:
    r = np.arange(shape[dimension], dtype=dtype)
    expanded = [1] * len(shape)
    expanded[dimension] = shape[dimension]
    return np.broadcast_to(r.reshape(expanded), shape)


def clamp_starts(starts, operand_shape, sizes) -> list[int]:
    return [int(np.clip(int(s), 0, n - k)) for s, n, k in zip(starts, operand_shape, sizes)]


def _dynamic_slice(x: np.ndarray, *starts: np.ndarray, slice_sizes: tuple) -> np.ndarray:
    begin = clamp_starts(starts, x.shape, slice_sizes)
    return x[tuple(slice(b, b + k) for b, k in zip(begin, slice_sizes))]


def _dynamic_update_slice(x: np.ndarray, update: np.ndarray, *starts: np.ndarray) -> np.ndarray:
    begin = clamp_starts(starts, x.shape, update.shape)
    out = x.copy()
    out[tuple(slice(b, b + k) for b, k in zip(begin, update.shape))] = update
    return out


impl_rules.update({
    sh.broadcast_in_dim_p: _broadcast_in_dim,
    sh.reshape_p: lambda x, *, new_sizes, dimensions: np.reshape(x, new_sizes),
    sh.transpose_p: lambda x, *, permutation: np.transpose(x, permutation),
    sh.squeeze_p: lambda x, *, dimensions: np.squeeze(x, dimensions),
    sh.rev_p: lambda x, *, dimensions: np.flip(x, dimensions),
    sh.slice_p: _slice,
    sh.concatenate_p: lambda *xs, dimension: np.concatenate(xs, axis=dimension),
    sh.pad_p: _pad,
    sh.iota_p: _iota,
    sh.dynamic_slice_p: _dynamic_slice,
    sh.dynamic_update_slice_p: _dynamic_update_slice,
})
for _p in (sh.broadcast_in_dim_p, sh.reshape_p, sh.transpose_p, sh.squeeze_p, sh.rev_p, sh.slice_p,
           sh.concatenate_p, sh.dynamic_slice_p, sh.dynamic_update_slice_p):
    plain_rule(impl_rules[_p])
