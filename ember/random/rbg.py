"""The ``rbg`` and ``unsafe_rbg`` key implementations: four uint32 words a key, bits from XLA's
``RngBitGenerator``, written with lax ops so that they run eagerly, under ``jit`` and ``vmap``.

JAX draws the bits of these keys with ``lax.rng_bit_generator``, whose default algorithm on the
CPU is Philox-4x32-10 (Salmon et al., 2011). Its state is the key read as two 64-bit words: the
first is the Philox key (its low and high 32-bit halves), and the 128-bit counter of the first
block has the second word as its low half and the first word as its high half; block ``i`` hashes
the counter plus ``i``, and its four output words are the next four values (a draw of ``n``
values takes ``ceil(n / 4)`` blocks; 8- and 16-bit draws keep the low bits of 32-bit ones, 64-bit
draws join pairs of words, low word first). So the bits equal JAX's on the CPU (checked against
JAX 0.10.2 in ``tests/test_random_keys.py``); JAX warns that other backends may differ.

Keys, splits and folds are defined by JAX in terms of Threefry: an ``rbg`` key is the Threefry key
of the seed twice, and splits and folds each half as Threefry does. ``unsafe_rbg`` splits and folds
with the bit generator itself (every tenth block of a long draw).
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np

from ember import dtypes, lax
from ember.random import threefry
from ember.transforms.custom_batching import custom_vmap

# Philox-4x32's round multipliers and key increments (the golden ratio and sqrt(3) - 1, in 32 bits).
_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
_KEY_STEPS = (0x9E3779B9, 0xBB67AE85)
_ROUNDS = 10
_LOW_16 = np.uint32(0xFFFF)


def _mul_hi_lo(x: Any, multiplier: int) -> tuple[Any, Any]:
    """The high and low 32-bit words of ``x * multiplier`` (uint32 operands), in 32-bit arithmetic:
    the product of the 16-bit halves, with the carries of the middle terms."""
    m_lo, m_hi = np.uint32(multiplier & 0xFFFF), np.uint32(multiplier >> 16)
    x_lo, x_hi = lax.bitwise_and(x, _LOW_16), lax.shift_right_logical(x, np.uint32(16))
    lo_lo, lo_hi = lax.mul(x_lo, m_lo), lax.mul(x_lo, m_hi)
    hi_lo, hi_hi = lax.mul(x_hi, m_lo), lax.mul(x_hi, m_hi)
    middle = lax.add(lax.add(lax.shift_right_logical(lo_lo, np.uint32(16)), lax.bitwise_and(lo_hi, _LOW_16)),
                     lax.bitwise_and(hi_lo, _LOW_16))
    sixteen = np.uint32(16)
    high = lax.add(lax.add(hi_hi, lax.shift_right_logical(lo_hi, sixteen)),
                   lax.add(lax.shift_right_logical(hi_lo, sixteen), lax.shift_right_logical(middle, sixteen)))
    return high, lax.mul(x, np.uint32(multiplier))


def philox4x32(counter: list, k0: Any, k1: Any) -> list:
    """Philox-4x32-10 of the four counter words under the key ``(k0, k1)``."""
    x = list(counter)
    for round_ in range(_ROUNDS):
        if round_:
            k0, k1 = lax.add(k0, np.uint32(_KEY_STEPS[0])), lax.add(k1, np.uint32(_KEY_STEPS[1]))
        hi0, lo0 = _mul_hi_lo(x[0], _MULTIPLIERS[0])
        hi1, lo1 = _mul_hi_lo(x[2], _MULTIPLIERS[1])
        x = [lax.bitwise_xor(lax.bitwise_xor(hi1, x[1]), k0), lo1, lax.bitwise_xor(lax.bitwise_xor(hi0, x[3]), k1), lo0]
    return x


def _words(key: Any) -> list:
    return [lax.index_in_dim(key, i, keepdims=False) for i in range(4)]


def _blocks(key: Any, count: int) -> Any:
    """``count`` Philox blocks of the bit generator's state ``key``: uint32[count * 4], in order."""
    if count >= 2**32:
        raise NotImplementedError(f"ember.random draws at most 2**34 values of an rbg key at once; asked for {count} "
                                  "blocks of four")
    w0, w1, w2, w3 = _words(key)
    step = lax.iota(dtypes.uint32, count)
    c0 = lax.add(w2, step)  # the 128-bit counter (w2, w3, w0, w1) plus the block index, carried
    carry = lax.convert_element_type(lax.lt(c0, w2), dtypes.uint32)
    c1 = lax.add(w3, carry)
    carry = lax.bitwise_and(carry, lax.convert_element_type(lax.eq(c1, np.uint32(0)), dtypes.uint32))
    c2 = lax.add(w0, carry)
    carry = lax.bitwise_and(carry, lax.convert_element_type(lax.eq(c2, np.uint32(0)), dtypes.uint32))
    c3 = lax.add(w1, carry)
    out = philox4x32([c0, c1, c2, c3], w0, w1)
    stacked = lax.concatenate([lax.expand_dims(o, (1,)) for o in out], 1)
    return lax.reshape(stacked, (count * 4,))


def bit_generator(key: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """``lax.rng_bit_generator(key, shape, uint{bit_width})``'s bits, as XLA's CPU backend draws them.

    Under ``vmap`` over keys it batches as JAX's ``rng_bit_generator`` does: the first key of the
    batch draws the bits of every example (shape ``(batch, *shape)``); JAX documents these keys as
    unsafe to batch, and this keeps their values equal to JAX's."""
    return _generator(bit_width, tuple(shape))(key)


@functools.lru_cache(maxsize=256)
def _generator(bit_width: int, shape: tuple[int, ...]) -> Callable[[Any], Any]:
    @custom_vmap
    def draw(key: Any) -> Any:
        return _draw(key, bit_width, shape)

    @draw.def_vmap
    def first_key_draws_the_batch(axis_size: int, in_batched: list, keys: Any) -> tuple[Any, bool]:
        return _generator(bit_width, (axis_size, *shape))(lax.index_in_dim(keys, 0, keepdims=False)), True

    return draw


def _draw(key: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    size = math.prod(shape)
    dtype = threefry.UINT_OF_WIDTH[bit_width]
    if bit_width == 64:
        words = _blocks(key, -(-2 * size // 4)) if size else lax.iota(dtypes.uint32, 0)
        low, high = (lax.convert_element_type(lax.slice_in_dim(words, start, 2 * size, 2), dtype) for start in (0, 1))
        return lax.reshape(lax.bitwise_or(lax.shift_left(high, np.uint64(32)), low), shape)
    words = _blocks(key, -(-size // 4)) if size else lax.iota(dtypes.uint32, 0)
    words = lax.slice_in_dim(words, 0, size)
    return lax.reshape(lax.convert_element_type(words, dtype), shape)


# --- rbg: Threefry keys, Philox bits ----------------------------------------------------------------
def seed(seed_value: Any) -> Any:
    half = threefry.seed_to_key(seed_value)
    return lax.concatenate([half, half], 0)


def _halves(key: Any) -> tuple[Any, Any]:
    return lax.slice_in_dim(key, 0, 2, axis=-1), lax.slice_in_dim(key, 2, 4, axis=-1)


def split(key: Any, shape: tuple[int, ...]) -> Any:
    """Each half split as Threefry splits a key: keys of shape ``(*shape, 4)``."""
    first, second = _halves(key)
    return lax.concatenate([threefry.split(first, shape), threefry.split(second, shape)], len(shape))


def fold_in(key: Any, data: Any) -> Any:
    first, second = _halves(key)
    return lax.concatenate([threefry.fold_in(first, data), threefry.fold_in(second, data)], 0)


# --- unsafe_rbg: everything from the bit generator -----------------------------------------------------
def unsafe_split(key: Any, shape: tuple[int, ...]) -> Any:
    """Every tenth row of a draw of ``10 * n`` four-word rows: ``n`` keys of shape ``(*shape, 4)``."""
    count = math.prod(shape)
    rows = bit_generator(key, 32, (10 * count, 4))
    return lax.reshape(lax.slice_in_dim(rows, 0, 10 * count, 10), (*shape, 4))


def unsafe_fold_in(key: Any, data: Any) -> Any:
    """The key xor the last row of ten drawn from the rbg key of ``data``."""
    rows = bit_generator(seed(data), 32, (10, 4))
    return lax.bitwise_xor(key, lax.index_in_dim(rows, 9, keepdims=False))
