"""Making, checking, splitting and folding PRNG keys: raw uint32 arrays (``PRNGKey``) and typed
key arrays (``key``, ``wrap_key_data``; see ``ember.random.prng``) of an implementation
(``ember.random.impls``: Threefry-2x32 by default, ``rbg``, ``unsafe_rbg``). Every function takes
both kinds; ``split``, ``fold_in`` and ``clone`` give back the kind given. A raw key is of the
default implementation (``PRNGKey(seed, impl=...)`` gives another's raw data, as in JAX).

The samplers work on raw key data (``check_key``); the implementation of the typed key a sampler
was given is what ``random_bits``, ``split_data`` and ``split_in_two`` use for data of its width
(the one sampler call in progress on this thread says which: ``_sampling``)."""
from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any, Callable

import numpy as np

from ember import dtypes, lax, numpy as jnp
from ember.lax.base import aval, shape_tuple
from ember.numpy.core import is_array
from ember.random import impls
from ember.random.prng import KEY_DTYPE, PRNGKeyArray  # noqa: F401  (KEY_DTYPE: re-exported)
from ember.runtime.replay import replayed


class _Sampling(threading.local):
    impl: impls.PRNGImpl = impls.DEFAULT  # (of the typed key the current sampler unwrapped)


_sampling = _Sampling()


def _describe(a: Any) -> str:
    """``uint32[4, 2]``: how the errors of this package name an array's type."""
    return f"{a.dtype}[{', '.join(map(str, a.shape))}]"


def check_key(name: str, key: Any, *, allow_batched: bool = False) -> Any:
    """The raw uint32 data of ``key`` once it is known to be a key: a uint32[2] array or a scalar
    typed key (or, with ``allow_batched``, an array of either kind, of shape (..., 2) raw). The
    key's implementation becomes the one its data is drawn with (``_sampling``)."""
    if isinstance(key, PRNGKeyArray):
        if key.ndim and not allow_batched:
            raise ValueError(f"{name} accepts a single key, but was given a key array of shape {key.shape} != (). "
                             "Use jax.vmap for batching.")
        _sampling.impl = key._impl
        return key._key_data
    if isinstance(key, (np.ndarray, np.generic)):
        key = jnp.asarray(key)
    expected = f"{name} expects a PRNG key, a uint32[2] array made by ember.random.PRNGKey, key or split"
    if not is_array(key):
        raise TypeError(f"{expected}; got a value of type {type(key).__name__}")
    a = aval(key)
    # Raw data of the typed key the sampler in progress was given (one sampler calling another) is
    # of that key's implementation; other raw keys are the default's.
    if a.shape[-1:] != (_sampling.impl.words,) or _sampling.impl is impls.DEFAULT:
        _sampling.impl = impls.DEFAULT
    if a.dtype != dtypes.uint32 or a.shape[-1:] != (_sampling.impl.words,):
        raise TypeError(f"{expected}; got {_describe(a)}")
    if a.ndim > 1 and not allow_batched:
        raise ValueError(f"{name} accepts a single key, but was given an array of keys of shape {a.shape}. "
                         "Use ember.vmap to map over keys.")
    return key


def sampler(fun: Callable) -> Callable:
    """``fun`` (a public sampler) as an entry point of ``ember.random``: a raw key given to it is of
    the default implementation, whatever a previous call drew with (``_sampling``). Eager calls of a
    signature seen before replay its traced program (``runtime.replay``): a sampler is some 170
    operations whose Python around each costs ten times the operation."""
    @replayed
    @functools.wraps(fun)
    def entry(*args: Any, **kwargs: Any) -> Any:
        saved, _sampling.impl = _sampling.impl, impls.DEFAULT
        try:
            return fun(*args, **kwargs)
        finally:
            _sampling.impl = saved
    return entry


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


def _impl_of_data(key: Any) -> impls.PRNGImpl:
    """The implementation raw key data is drawn with: the default for two words; for four, the
    typed key's that the current sampler unwrapped (``rbg`` if none)."""
    words = aval(key).shape[-1]
    if words == impls.DEFAULT.words:
        return impls.DEFAULT
    return _sampling.impl if _sampling.impl.words == words else impls.RBG


def PRNGKey(seed: Any, *, impl: Any = None) -> Any:
    """The raw uint32 key data of an integer seed (two words, its high and low 32 bits, for the
    default Threefry-2x32; ``impl`` another implementation's)."""
    return impls.resolve("PRNGKey", impl).seed(_seed_array("PRNGKey", seed))


def key(seed: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """A typed scalar key (dtype ``key<fry>``, or the dtype of ``impl``) over the words of
    ``PRNGKey(seed, impl=impl)``."""
    implementation = impls.resolve("key", dtype if impl is None else impl)
    return PRNGKeyArray(implementation.seed(_seed_array("key", seed)), implementation)


def key_data(keys: Any) -> Any:
    """The uint32 data of a key or array of keys, of shape ``keys.shape + (words,)`` for typed keys;
    a raw key array is its own data."""
    return check_key("key_data", keys, allow_batched=True)


def wrap_key_data(key_bits_array: Any, *, impl: Any = None, dtype: Any = None) -> PRNGKeyArray:
    """Typed keys over uint32 data of shape (..., words): an array of keys of shape ``data.shape[:-1]``."""
    implementation = impls.resolve("wrap_key_data", dtype if impl is None else impl)
    if isinstance(key_bits_array, PRNGKeyArray):
        raise TypeError(f"wrap_key_data expects raw uint32 key data of shape (..., {implementation.words}), not a "
                        f"typed key array ({key_bits_array.dtype}{list(key_bits_array.shape)}); its data is "
                        "key_data(keys)")
    if implementation is not impls.DEFAULT and (isinstance(key_bits_array, (np.ndarray, np.generic))
                                                or not is_array(key_bits_array)):
        key_bits_array = jnp.asarray(key_bits_array)
    if implementation is impls.DEFAULT:
        return PRNGKeyArray(check_key("wrap_key_data", key_bits_array, allow_batched=True), implementation)
    a = aval(key_bits_array)
    if a.dtype != dtypes.uint32 or a.shape[-1:] != (implementation.words,):
        raise TypeError(f"wrap_key_data expects a PRNG key, uint32 key data of shape (..., {implementation.words}) for "
                        f"the {implementation.name} implementation; got {_describe(a)}")
    return PRNGKeyArray(key_bits_array, implementation)


def key_dtype(impl_spec: Any = None) -> dtypes.KeyTy:
    """The dtype of typed keys of an implementation (default: Threefry-2x32's ``key<fry>``)."""
    return impls.resolve("key_dtype", impl_spec).dtype


def _like(key: Any, data: Any) -> Any:
    """``data`` as the same kind of key as ``key``: typed if it is, raw if it is raw."""
    return key._new(data) if isinstance(key, PRNGKeyArray) else data


def _impl_of(key: Any) -> impls.PRNGImpl:
    return key._impl if isinstance(key, PRNGKeyArray) else impls.DEFAULT


@replayed
def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """``num`` new keys (``num`` may be a shape): typed keys of shape ``num`` from a typed key,
    raw ones (shape (*num, words)) from a raw key. (Replayed eagerly, as the samplers are: a split
    is some 100 operations.)"""
    data = check_key("split", key)
    shape = shape_tuple(tuple(num) if isinstance(num, Sequence) else (num,), "num")
    return _like(key, _impl_of(key).split(data, shape))


def fold_in(key: Any, data: Any) -> Any:
    """A new key that is a function of ``key`` and the 32-bit integer ``data``."""
    # A Python int is a uint32 (any in [0, 2**32), as in JAX), not the default int32; an argument
    # of the replayed program, not a static value (a loop folds in a new one each step).
    return _fold_in(key, jnp.asarray(np.uint32(data)) if isinstance(data, int) else data)


@replayed
def _fold_in(key: Any, data: Any) -> Any:
    typed, key = key, check_key("fold_in", key)
    data = jnp.asarray(data)
    if aval(data).ndim:
        raise TypeError(f"fold_in accepts a scalar, but was given an array of shape {aval(data).shape} != (). "
                        "Use ember.vmap to fold in many values.")
    return _like(typed, _impl_of(typed).fold_in(key, jnp.asarray(data, dtypes.uint32)))


# --- what the samplers draw with, on raw key data (of the implementation ``_impl_of_data`` says) --------
def random_bits(key: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """Uniform unsigned integers of ``bit_width`` bits."""
    return _impl_of_data(key).random_bits(key, bit_width, shape)


def split_data(key: Any, shape: tuple[int, ...]) -> Any:
    """New raw keys of shape ``(*shape, words)``."""
    return _impl_of_data(key).split(key, shape)


def split_in_two(key: Any) -> tuple[Any, Any]:
    """The two keys of ``split(key)``, for samplers that need fresh ones (raw data)."""
    keys = split_data(key, (2,))
    return lax.index_in_dim(keys, 0, keepdims=False), lax.index_in_dim(keys, 1, keepdims=False)
