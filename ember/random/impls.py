"""PRNG implementations: what a key is made of and how it is seeded, split, folded and drawn from.

``threefry2x32`` (JAX's default: two uint32 words a key), ``rbg`` and ``unsafe_rbg`` (four words;
``ember.random.rbg``). A typed key array knows its implementation (its dtype says it: ``key<fry>``,
``key<rbg>``, ``key<urbg>``); a raw uint32 key is always the default one, as in JAX. JAX's other
names (``philox2x32``, ``philox4x32``, ``threefry4x32``) are not implemented: they raise.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ember import dtypes
from ember.random import rbg, threefry


class _WideKeyTy(dtypes.KeyTy):
    """The dtype of keys of four words (``key<rbg>``, ``key<urbg>``): 16 bytes an element."""

    __slots__ = ()
    itemsize = 16

    def __reduce__(self) -> tuple:
        return (_WideKeyTy, (self._impl_name, self._tag))


class PRNGImpl(NamedTuple):
    """A key implementation: its name (``key_impl``), its words per key, and its functions on raw
    uint32 key data: ``seed(seed) -> key``, ``split(key, shape) -> keys of shape (*shape, words)``,
    ``fold_in(key, uint32 scalar) -> key``, ``random_bits(key, bit_width, shape)``."""

    name: str
    dtype: dtypes.KeyTy
    words: int
    seed: Callable[[Any], Any]
    split: Callable[[Any, tuple], Any]
    fold_in: Callable[[Any, Any], Any]
    random_bits: Callable[[Any, int, tuple], Any]

    def __repr__(self) -> str:
        return f"PRNGImpl({self.name!r})"


THREEFRY = PRNGImpl("threefry2x32", dtypes.KeyTy("threefry2x32", "fry"), 2, threefry.seed_to_key, threefry.split,
                    threefry.fold_in, threefry.random_bits)
RBG = PRNGImpl("rbg", _WideKeyTy("rbg", "rbg"), 4, rbg.seed, rbg.split, rbg.fold_in, rbg.bit_generator)
UNSAFE_RBG = PRNGImpl("unsafe_rbg", _WideKeyTy("unsafe_rbg", "urbg"), 4, rbg.seed, rbg.unsafe_split,
                      rbg.unsafe_fold_in, rbg.bit_generator)

IMPLEMENTATIONS = {impl.name: impl for impl in (THREEFRY, RBG, UNSAFE_RBG)}
DEFAULT = THREEFRY
# JAX's names, in its order (for the error that names them).
JAX_IMPLEMENTATIONS = ("philox2x32", "philox4x32", "threefry2x32", "rbg", "unsafe_rbg", "threefry4x32")


def resolve(api: str, spec: Any) -> PRNGImpl:
    """The implementation ``spec`` names: None (the default), a name, a key dtype or an implementation."""
    if spec is None:
        return DEFAULT
    if isinstance(spec, PRNGImpl):
        return spec
    if isinstance(spec, dtypes.KeyTy):
        for impl in IMPLEMENTATIONS.values():
            if impl.dtype == spec:
                return impl
    if isinstance(spec, str):
        if spec in IMPLEMENTATIONS:
            return IMPLEMENTATIONS[spec]
        if spec not in JAX_IMPLEMENTATIONS:
            known = ", ".join(f'"{n}"' for n in JAX_IMPLEMENTATIONS)
            raise ValueError(f'unrecognized PRNG implementation "{spec}". Did you mean one of: {known}?')
    raise ValueError(f"{api}: the {spec!r} PRNG implementation is not available in ember.random, which "
                     f"implements {', '.join(map(repr, IMPLEMENTATIONS))}")
