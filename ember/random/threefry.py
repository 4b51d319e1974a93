"""Threefry-2x32, the counter-based hash behind JAX's default PRNG, written with lax ops.

A key is two uint32 words. A draw of any shape hashes each element's counter (its flat
index, a 64-bit number held as two uint32 words) under the key, so every element is
computed independently: draws are plain elementwise programs that fuse, batch under
``vmap`` and run under ``jit`` like any other. Counters and output words are laid out as
in JAX's ``jax_threefry_partitionable`` mode (its default), so seeds, splits, folds and
bits equal JAX's bit for bit.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.lax.base import aval

# Rotation distances of the 2x32 variant, alternating every four rounds (Salmon et al., 2011).
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# Threefish's key-schedule parity constant: the third key word is k0 ^ k1 ^ _KEY_PARITY.
_KEY_PARITY = np.uint32(0x1BD11BDA)
# Counters are the flat index; their high word is zero below this many elements.
_MAX_DRAW_SIZE = 2**32

UINT_OF_WIDTH = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


def _rotate_left(x: Any, distance: int) -> Any:
    return lax.bitwise_or(lax.shift_left(x, distance), lax.shift_right_logical(x, 32 - distance))


def threefry2x32(k0: Any, k1: Any, x0: Any, x1: Any) -> tuple[Any, Any]:
    """Hash the uint32 word pairs ``(x0, x1)`` under the key ``(k0, k1)``: 20 rounds of
    add-rotate-xor, with the key (and the injection count) added after every four."""
    schedule = (k0, k1, lax.bitwise_xor(lax.bitwise_xor(k0, k1), _KEY_PARITY))
    x0, x1 = lax.add(x0, schedule[0]), lax.add(x1, schedule[1])
    for injection in range(1, 6):
        for distance in _ROTATIONS[(injection - 1) % 2]:
            x0 = lax.add(x0, x1)
            x1 = lax.bitwise_xor(x0, _rotate_left(x1, distance))
        x0 = lax.add(x0, schedule[injection % 3])
        x1 = lax.add(lax.add(x1, schedule[(injection + 1) % 3]), np.uint32(injection))
    return x0, x1


def key_words(key: Any) -> tuple[Any, Any]:
    """The two uint32 words of a (validated) uint32[2] key, as scalars."""
    return (lax.index_in_dim(key, 0, keepdims=False), lax.index_in_dim(key, 1, keepdims=False))


def _hash_counters(key: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """Both output words of hashing each element's flat index over ``shape``."""
    size = math.prod(shape)
    if size > _MAX_DRAW_SIZE:
        raise NotImplementedError(f"ember.random draws at most 2**32 values at once; shape {shape} has {size}")
    low_counter = lax.reshape(lax.iota(dtypes.uint32, size), shape)
    return threefry2x32(*key_words(key), np.uint32(0), low_counter)


def _stack_words(high: Any, low: Any) -> Any:
    """Keys of shape (*shape, 2) from their two words of shape ``shape``."""
    ndim = aval(high).ndim
    return lax.concatenate([lax.expand_dims(high, (ndim,)), lax.expand_dims(low, (ndim,))], ndim)


def seed_to_key(seed: Any) -> Any:
    """The uint32[2] key of an integer scalar seed: its high and low 32 bits (the high
    word is zero for seeds of 32 bits or less)."""
    low = lax.convert_element_type(seed, dtypes.uint32)  # wraps: keeps the low 32 bits
    if aval(seed).dtype.itemsize == 8:
        high = lax.convert_element_type(lax.shift_right_logical(seed, 32), dtypes.uint32)
    else:
        high = lax.convert_element_type(0, dtypes.uint32)
    return _stack_words(high, low)


def split(key: Any, shape: tuple[int, ...]) -> Any:
    """New keys of shape ``(*shape, 2)``: key ``i`` (flat) is the hash of counter ``i``."""
    return _stack_words(*_hash_counters(key, shape))


def fold_in(key: Any, data: Any) -> Any:
    """The key hashed at counter ``data`` (a uint32 scalar)."""
    return _stack_words(*threefry2x32(*key_words(key), np.uint32(0), data))


def random_bits(key: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """Uniform unsigned integers of ``bit_width`` bits: the two hash words joined for 64
    bits, xor-ed for 32, and the low bits of their xor for 8 and 16."""
    high, low = _hash_counters(key, shape)
    dtype = UINT_OF_WIDTH[bit_width]
    if bit_width == 64:
        high, low = (lax.convert_element_type(w, dtype) for w in (high, low))
        return lax.bitwise_or(lax.shift_left(high, 32), low)
    return lax.convert_element_type(lax.bitwise_xor(high, low), dtype)
