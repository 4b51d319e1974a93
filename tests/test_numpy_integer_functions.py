"""The integer functions (``ember.numpy.integer_functions``: gcd, lcm, bitwise_count, packbits,
unpackbits) against NumPy, eagerly and under jit; dtypes and weak types against JAX."""
from __future__ import annotations

import numpy as np
import pytest
from util import assert_same_leaves, check_eager_and_jit

import ember.numpy as jnp


def I32(values):
    return np.array(values, np.int32)


rng = np.random.default_rng(0)


def test_gcd_lcm_bitwise_count():
    a = np.array([-12, 0, 7, 35, 9], np.int32)
    b = np.array([18, 0, 0, 10, -6], np.int32)
    check_eager_and_jit(jnp.gcd, a, b, expected=np.gcd(a, b))
    check_eager_and_jit(jnp.lcm, a, b, expected=np.lcm(a, b))
    with pytest.raises(ValueError, match="must be integers"):
        jnp.gcd(1.0, 2)
    i8 = np.array([-1, 7, 0, -128], np.int8)
    check_eager_and_jit(jnp.bitwise_count, i8, expected=np.bitwise_count(i8))


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits_unpackbits(axis, bitorder):
    bits = rng.integers(0, 2, size=(3, 11)).astype(np.int32)
    packed = check_eager_and_jit(lambda a: jnp.packbits(a, axis=axis, bitorder=bitorder), bits,
                                 expected=np.packbits(bits, axis=axis, bitorder=bitorder))
    packed = np.asarray(packed)
    for count in (None, 5, -3, 30):
        check_eager_and_jit(lambda p: jnp.unpackbits(p, axis=axis, count=count, bitorder=bitorder), packed,
                            expected=np.unpackbits(packed, axis=axis, count=count, bitorder=bitorder))
    with pytest.raises(TypeError, match="unsigned byte"):
        jnp.unpackbits(bits)


JAX_DTYPE_CALLS = [
    ("gcd", (np.int16(4), 6)), ("lcm", (4, 6)), ("bitwise_count", (np.array([3], np.int16),)),
]


@pytest.mark.parametrize("name,args", JAX_DTYPE_CALLS)
def test_dtypes_and_weak_types_match_jax(name, args):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert_same_leaves(getattr(jnp, name)(*args), getattr(jax_numpy, name)(*args), name)
