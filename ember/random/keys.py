"""Making, checking, splitting and folding PRNG keys: raw uint32[2] arrays (``PRNGKey``) and
typed key arrays of dtype ``key<fry>`` (``key``, ``wrap_key_data``; see ``ember.random.prng``).
Every function takes both kinds; ``split``, ``fold_in`` and ``clone`` give back the kind given."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax, numpy as jnp
from ember.lax.base import aval, shape_tuple
from ember.numpy.core import is_array
from ember.random import threefry
from ember.random.prng import KEY_DTYPE, PRNGKeyArray

# JAX's PRNG implementations; ember has only Threefry-2x32.
_JAX_IMPLEMENTATIONS = ("philox2x32", "philox4x32", "threefry2x32", "rbg", "unsafe_rbg", "threefry4x32")

_IMPLEMENTATION = "threefry2x32"


def _describe(a: Any) -> str:
    """``uint32[4, 2]``: how the errors of this package name an array's type."""
    return f"{a.dtype}[{', '.join(map(str, a.shape))}]"


def check_key(name: str, key: Any, *, allow_batched: bool = False) -> Any:
    """The raw uint32 data of ``key`` once it is known to be a key: a uint32[2] array or a scalar
    typed key (or, with ``allow_batched``, an array of either kind, of shape (..., 2) raw)."""
    if isinstance(key, PRNGKeyArray):
        if key.ndim and not allow_batched:
            raise ValueError(f"{name} accepts a single key, but was given a key array of shape {key.shape} != (). "
                             "Use jax.vmap for batching.")
        return key._key_data
    if isinstance(key, (np.ndarray, np.generic)):
        key = jnp.asarray(key)
    expected = f"{name} expects a PRNG key, a uint32[2] array made by ember.random.PRNGKey, key or split"
    if not is_array(key):
        raise TypeError(f"{expected}; got a value of type {type(key).__name__}")
    a = aval(key)
    if a.dtype != dtypes.uint32 or a.shape[-1:] != (2,):
        raise TypeError(f"{expected}; got {_describe(a)}")
    if a.ndim > 1 and not allow_batched:
        raise ValueError(f"{name} accepts a single key, but was given an array of keys of shape {a.shape}. "
                         "Use ember.vmap to map over keys.")
    return key


def _check_implementation(name: str, impl: Any) -> None:
    if impl is None or impl == _IMPLEMENTATION or impl == KEY_DTYPE:
        return
    if isinstance(impl, str) and impl not in _JAX_IMPLEMENTATIONS:
        known = ", ".join(f'"{n}"' for n in _JAX_IMPLEMENTATIONS)
        raise ValueError(f'unrecognized PRNG implementation "{impl}". Did you mean one of: {known}?')
    raise ValueError(f"{name}: ember.random implements only the {_IMPLEMENTATION!r} PRNG, got {impl!r}")


def _seed_array(name: str, seed: Any) -> Any:
    # A Python int is read as an int64, then canonicalized as JAX does: with x64 off only its
    # low 32 bits count (so hashes of any size make keys); out of int64's range it overflows.
    seed = jnp.asarray(np.int64(seed) if isinstance(seed, int) else seed)
    a = aval(seed)
    if a.ndim:
        raise TypeError(f"{name} accepts a scalar seed, but was given an array of shape {a.shape} != (). "
                        "Use ember.vmap to make a key per seed.")
    if not (dtypes.is_integer(a.dtype) or a.dtype == dtypes.bool_):
        raise TypeError(f"{name} needs an integer seed; got {_describe(a)}")
    return seed


def PRNGKey(seed: Any, *, impl: Any = None) -> Any:
    """The uint32[2] key of an integer seed: its high and low 32-bit words."""
    _check_implementation("PRNGKey", impl)
    return threefry.seed_to_key(_seed_array("PRNGKey", seed))


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """A typed scalar key (dtype ``key<fry>``) over the same words as ``PRNGKey(seed)``."""
    _check_implementation("key", dtype if impl is None else impl)
    return PRNGKeyArray(threefry.seed_to_key(_seed_array("key", seed)))


def key_data(keys: Any) -> Any:
    """The uint32 data of a key or array of keys, of shape ``keys.shape + (2,)`` for typed keys;
    a raw key array is its own data."""
    return check_key("key_data", keys, allow_batched=True)


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """Typed keys over uint32 data of shape (..., 2): an array of keys of shape ``data.shape[:-1]``."""
    _check_implementation("wrap_key_data", dtype if impl is None else impl)
    if isinstance(key_bits_array, PRNGKeyArray):
        raise TypeError(f"wrap_key_data expects raw uint32 key data of shape (..., 2), not a typed key array "
                        f"({key_bits_array.dtype}{list(key_bits_array.shape)}); its data is key_data(keys)")
    return PRNGKeyArray(check_key("wrap_key_data", key_bits_array, allow_batched=True))


def _like(key: Any, data: Any) -> Any:
    """``data`` as the same kind of key as ``key``: typed if it is, raw if it is raw."""
    return PRNGKeyArray(data) if isinstance(key, PRNGKeyArray) else data


def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """``num`` new keys (``num`` may be a shape): typed keys of shape ``num`` from a typed key,
    raw ones (shape (*num, 2)) from a raw key."""
    data = check_key("split", key)
    shape = shape_tuple(tuple(num) if isinstance(num, Sequence) else (num,), "num")
    return _like(key, threefry.split(data, shape))


def fold_in(key: Any, data: Any) -> Any:
    """A new key that is a function of ``key`` and the 32-bit integer ``data``."""
    typed, key = key, check_key("fold_in", key)
    # A Python int is a uint32 (any in [0, 2**32), as in JAX), not the default int32.
    data = jnp.asarray(np.uint32(data) if isinstance(data, int) else data)
    if aval(data).ndim:
        raise TypeError(f"fold_in accepts a scalar, but was given an array of shape {aval(data).shape} != (). "
                        "Use ember.vmap to fold in many values.")
    return _like(typed, threefry.fold_in(key, jnp.asarray(data, dtypes.uint32)))


def split_in_two(key: Any) -> tuple[Any, Any]:
    """The two keys of ``split(key)``, for samplers that need fresh ones."""
    keys = threefry.split(key, (2,))
    return lax.index_in_dim(keys, 0, keepdims=False), lax.index_in_dim(keys, 1, keepdims=False)
