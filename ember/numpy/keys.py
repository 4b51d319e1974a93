"""``jnp`` functions on typed PRNG key arrays (``random.key``), as JAX takes them.

A key array (``ember.random.prng.PRNGKeyArray``) holds uint32 data of shape ``k.shape + (2,)``.
The functions that only move, join, select or broadcast elements work on keys in JAX
(``jnp.stack([k1, k2])``, ``jnp.concatenate`` (not the Array API's ``concat``, as in JAX),
``jnp.where(c, k1, k2)``, ``jnp.broadcast_to``, ``jnp.expand_dims``); here each applies the same
function to the data, with axes counted over the key's own dimensions, and wraps the result as a
key array of the same class. Arithmetic and the rest still refuse keys (the key class overrides
them). The key class lives above ``jnp`` (``ember.random``), so keys are recognized by their
dtype and rebuilt through their own type.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from ember import dtypes
from ember.core.array import Array

__all__ = ["KEY_FUNCTIONS", "take_keys"]


_NEVER_KEYS = frozenset({Array, bool, int, float, complex})  # (the common operands, told at once)


def _is_key(x: Any) -> bool:
    if type(x) in _NEVER_KEYS:
        return False
    return isinstance(getattr(x, "dtype", None), dtypes.KeyTy) and hasattr(x, "_key_data")


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of bounds for a key array of dimension {ndim}")
    return axis % ndim


def _all_keys(what: str, arrays: Sequence[Any]) -> list[Any]:
    if not all(_is_key(a) for a in arrays):  # (JAX's class and words: keys have no promotion)
        raise ValueError(f"dtype=key<fry> is not a valid dtype for JAX type promotion: {what} cannot combine "
                         "key arrays with arrays of other types")
    return list(arrays)


def _stack(fn: Callable, arrays: Sequence[Any], axis: int = 0, *args: Any, **kwargs: Any) -> Any:
    keys = _all_keys("stack", arrays)
    return keys[0]._new(fn([k._key_data for k in keys], _axis(axis, keys[0].ndim + 1)))


def _concatenate(fn: Callable, arrays: Sequence[Any], axis: int | None = 0, *args: Any, **kwargs: Any) -> Any:
    keys = _all_keys("concatenate", arrays)
    datas = [k._key_data for k in keys]
    if axis is None:
        datas, axis = [d.reshape(-1, d.shape[-1]) for d in datas], 0
    else:
        axis = _axis(axis, keys[0].ndim)
    return keys[0]._new(fn(datas, axis))


def _where(fn: Callable, condition: Any, x: Any = None, y: Any = None, /, **kwargs: Any) -> Any:
    keys = _all_keys("where", [x, y])
    condition = condition[..., None] if getattr(condition, "ndim", 0) else condition
    return keys[0]._new(fn(condition, keys[0]._key_data, keys[1]._key_data))


def _broadcast_to(fn: Callable, array: Any, shape: Any) -> Any:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return array._new(fn(array._key_data, shape + array._key_data.shape[-1:]))


def _expand_dims(fn: Callable, a: Any, axis: int | Sequence[int]) -> Any:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    ndim = a.ndim + len(axes)
    return a._new(fn(a._key_data, tuple(_axis(ax, ndim) for ax in axes)))


# name -> (the rule on keys, which of the call's arguments may be keys)
KEY_FUNCTIONS: dict[str, tuple[Callable, Callable[[tuple, dict], list]]] = {
    "stack": (_stack, lambda a, k: list(a[0] if a else k.get("arrays", ()))),
    "concatenate": (_concatenate, lambda a, k: list(a[0] if a else k.get("arrays", ()))),
    "where": (_where, lambda a, k: list(a[1:3])),
    "broadcast_to": (_broadcast_to, lambda a, k: [a[0] if a else k.get("x")]),
    "expand_dims": (_expand_dims, lambda a, k: [a[0] if a else k.get("a")]),
}


def take_keys(namespace: dict[str, Any]) -> None:
    """Let the functions of ``KEY_FUNCTIONS`` in ``namespace`` take key arrays."""
    for name, (rule, operands) in KEY_FUNCTIONS.items():
        namespace[name] = _with_keys(namespace[name], rule, operands)


def _with_keys(fn: Callable, rule: Callable, operands: Callable) -> Callable:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            values = operands(args, kwargs)
        except (TypeError, IndexError):  # (not a sequence: fn's own error)
            return fn(*args, **kwargs)
        for x in values:  # (a loop, not any() over a generator: the commonest call has no key)
            if _is_key(x):
                return rule(fn, *args, **kwargs)
        return fn(*args, **kwargs)

    call.without_keys = fn  # type: ignore[attr-defined]  (``arraylike``'s guard: its common call holds no key)
    return call
