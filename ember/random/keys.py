"""Making, checking, splitting and folding PRNG keys (uint32[2] arrays)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ember import dtypes, lax, numpy as jnp
from ember.lax.base import aval, shape_tuple
from ember.numpy.core import is_array
from ember.random import threefry

_IMPLEMENTATION = "threefry2x32"


def _describe(a: Any) -> str:
    """``uint32[4, 2]``: how the errors of this package name an array's type."""
    return f"{a.dtype}[{', '.join(map(str, a.shape))}]"


def check_key(name: str, key: Any, *, allow_batched: bool = False) -> Any:
    """``key`` as an ember array once it is known to be a uint32[2] key (or, with
    ``allow_batched``, an array of them of shape (..., 2))."""
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
    if impl not in (None, _IMPLEMENTATION):
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


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> Any:
    """The same raw uint32[2] key as ``PRNGKey`` (ember has no typed key arrays; see the
    package docstring)."""
    _check_implementation("key", dtype if impl is None else impl)
    return threefry.seed_to_key(_seed_array("key", seed))


def key_data(keys: Any) -> Any:
    """The uint32 data of a key or array of keys: the keys themselves, once checked."""
    return check_key("key_data", keys, allow_batched=True)


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> Any:
    """Keys from uint32 data of shape (..., 2): the data itself, once checked."""
    _check_implementation("wrap_key_data", dtype if impl is None else impl)
    return check_key("wrap_key_data", key_bits_array, allow_batched=True)


def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """``num`` new keys (``num`` may be a shape), as an array of shape (*num, 2)."""
    key = check_key("split", key)
    shape = shape_tuple(tuple(num) if isinstance(num, Sequence) else (num,), "num")
    return threefry.split(key, shape)


def fold_in(key: Any, data: Any) -> Any:
    """A new key that is a function of ``key`` and the 32-bit integer ``data``."""
    key = check_key("fold_in", key)
    # A Python int is a uint32 (any in [0, 2**32), as in JAX), not the default int32.
    data = jnp.asarray(np.uint32(data) if isinstance(data, int) else data)
    if aval(data).ndim:
        raise TypeError(f"fold_in accepts a scalar, but was given an array of shape {aval(data).shape} != (). "
                        "Use ember.vmap to fold in many values.")
    return threefry.fold_in(key, jnp.asarray(data, dtypes.uint32))


def split_in_two(key: Any) -> tuple[Any, Any]:
    """The two keys of ``split(key)``, for samplers that need fresh ones."""
    keys = threefry.split(key, (2,))
    return lax.index_in_dim(keys, 0, keepdims=False), lax.index_in_dim(keys, 1, keepdims=False)
