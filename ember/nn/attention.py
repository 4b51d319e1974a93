"""``dot_product_attention``: softmax(q k^T * scale + bias, masked) v, as ``jax.nn`` defines it,
including grouped-query attention (fewer key/value heads than query heads)."""
from __future__ import annotations

from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import dtypes
from ember.nn.functions import softmax
from ember.numpy.core import ensure_array

__all__ = ["dot_product_attention"]


def _at_least_4d(x: Any) -> Any:
    x = ensure_array(x)
    return jnp.reshape(x, (1,) * (4 - x.ndim) + x.shape) if x.ndim < 4 else x


def _check(name: str, x: Any, shape: tuple, dtype: Any = None) -> None:
    """``shape`` entries of -1 match any size."""
    if x.ndim != len(shape):
        raise ValueError(f"dot_product_attention: {name} must have {len(shape)} dimensions "
                         f"(batch, sequence, heads, head_dim), got shape {x.shape}.")
    if dtype is not None and x.dtype != dtype:
        raise ValueError(f"dot_product_attention: {name} must have dtype {np.dtype(dtype)}, got {x.dtype}.")
    if any(want not in (-1, got) for want, got in zip(shape, x.shape)):
        raise ValueError(f"dot_product_attention: {name} must have shape {tuple(shape)} (-1: any), "
                         f"got {x.shape}.")


def _grouped(x: Any, num_kv_heads: int, group_size: int) -> Any:
    """A (B|1, N|1, T|1, S|1) bias or mask as (B|1, K|1, G|1, T|1, S|1), matching grouped logits."""
    b, heads, t, s = x.shape
    if heads == 1:
        return jnp.reshape(x, (b, 1, 1, t, s))
    if heads != num_kv_heads * group_size:
        raise ValueError(f"dot_product_attention: a bias or mask of shape {x.shape} must have 1 or "
                         f"{num_kv_heads * group_size} (the number of query heads) in axis 1.")
    return jnp.reshape(x, (b, num_kv_heads, group_size, t, s))


def _allowed_positions(num_queries: int, num_keys: int, is_causal: bool, local_window_size: Any,
                       query_seq_lengths: Any, key_value_seq_lengths: Any) -> Any:
    """The (B|1, 1, 1, T, S) boolean mask of causal / windowed / padded positions, or None."""
    query_pos = jnp.arange(num_queries)[:, None]
    key_pos = jnp.arange(num_keys)[None, :]
    allowed = None

    def both(a: Any, b: Any) -> Any:
        return b if a is None else jnp.logical_and(a, b)
    if is_causal:
        allowed = both(allowed, jnp.greater_equal(query_pos, key_pos))
    if local_window_size is not None:
        left, right = ((local_window_size, local_window_size) if isinstance(local_window_size, int)
                       else local_window_size)
        allowed = both(allowed, jnp.logical_and(jnp.less_equal(query_pos, jnp.add(key_pos, left)),
                                                jnp.greater_equal(query_pos, jnp.subtract(key_pos, right))))
    allowed = None if allowed is None else allowed[None, None, None]
    if query_seq_lengths is not None:
        allowed = both(allowed, jnp.less(query_pos, query_seq_lengths[:, None, None, None, None]))
    if key_value_seq_lengths is not None:
        allowed = both(allowed, jnp.less(key_pos, key_value_seq_lengths[:, None, None, None, None]))
    return allowed


def dot_product_attention(query: Any, key: Any, value: Any, bias: Any = None, mask: Any = None, *,
                          scale: float | None = None, is_causal: bool = False,
                          query_seq_lengths: Any = None, key_value_seq_lengths: Any = None,
                          local_window_size: int | tuple[int, int] | None = None,
                          implementation: str | None = None) -> Any:
    """Multi-head attention over inputs of shape (B, T, N, H) (query) and (B, S, K, H) (key,
    value; N a multiple of K), with an additive ``bias`` and a boolean ``mask`` broadcastable
    to (B, N, T, S). Logits are at least float32 and the softmax runs in float32, as in JAX;
    masked positions get a large negative logit (a fully masked row averages all values)."""
    if implementation not in (None, "xla"):
        raise ValueError(f"dot_product_attention: unsupported implementation {implementation!r}; ember "
                         "implements only implementation=None or 'xla'.")
    output_shape = ensure_array(query).shape
    query, key, value = _at_least_4d(query), _at_least_4d(key), _at_least_4d(value)
    batch, num_keys, num_kv_heads, head_dim = key.shape
    _check("value", value, (batch, num_keys, num_kv_heads, head_dim), key.dtype)
    _check("query", query, (batch, -1, -1, head_dim), key.dtype)
    _, num_queries, num_heads, _ = query.shape
    if num_heads % num_kv_heads:
        raise ValueError(f"dot_product_attention: the number of query heads ({num_heads}) must be a multiple "
                         f"of the number of key/value heads ({num_kv_heads}).")
    group_size = num_heads // num_kv_heads
    for name, lengths in (("query_seq_lengths", query_seq_lengths), ("key_value_seq_lengths", key_value_seq_lengths)):
        if lengths is not None:
            _check(name, ensure_array(lengths), (batch,), np.dtype(np.int32))
    scale = 1.0 / np.sqrt(head_dim) if scale is None else scale

    logits_dtype = jnp.promote_types(query.dtype, np.float32)
    grouped_query = jnp.reshape(query, (batch, num_queries, num_kv_heads, group_size, head_dim))
    logits = jnp.einsum("BTKGH,BSKH->BKGTS", grouped_query, key, preferred_element_type=logits_dtype)
    logits = jnp.multiply(logits, jnp.asarray(scale, logits_dtype))
    if bias is not None:
        bias = _at_least_4d(bias)
        _check("bias", bias, (-1,) * 4)
        logits = jnp.add(logits, _grouped(bias, num_kv_heads, group_size)).astype(logits_dtype)
    allowed = _allowed_positions(num_queries, num_keys, is_causal, local_window_size,
                                 None if query_seq_lengths is None else ensure_array(query_seq_lengths),
                                 None if key_value_seq_lengths is None else ensure_array(key_value_seq_lengths))
    if mask is not None:
        mask = _at_least_4d(mask)
        _check("mask", mask, (-1,) * 4, np.dtype(bool))
        mask = _grouped(mask, num_kv_heads, group_size)
        allowed = mask if allowed is None else jnp.logical_and(allowed, mask)
    if allowed is not None:
        # Finite in float32 (where the softmax runs), so fully masked rows give no NaN.
        large_negative = -0.7 * min(float(dtypes.finfo(logits_dtype).max), float(np.finfo(np.float32).max))
        logits = jnp.where(allowed, logits, jnp.asarray(large_negative, logits_dtype))
    probs = softmax(logits.astype(np.float32), axis=-1).astype(key.dtype)
    encoded = jnp.einsum("BKGTS,BSKH->BTKGH", probs, value)
    if query_seq_lengths is not None:
        valid = jnp.less(jnp.arange(num_queries)[None, :], ensure_array(query_seq_lengths)[:, None])
        encoded = jnp.multiply(encoded, valid[:, :, None, None, None].astype(encoded.dtype))
    return jnp.reshape(encoded, output_shape)
