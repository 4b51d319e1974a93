"""``jax._src.util``: the small helpers that programs copied from JAX's examples and libraries
import (``from jax._src.util import safe_zip, safe_map, unzip2``). Each behaves as JAX's does:
``safe_zip`` and ``safe_map`` return lists and refuse arguments of different lengths."""
from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from ember.config import config

T = TypeVar("T")


def safe_zip(*args: Iterable) -> list[tuple]:
    """``list(zip(*args))``, refusing arguments of different lengths (a ``ValueError``)."""
    if not args:
        raise TypeError("safe_zip requires at least 1 argument.")
    lists = [list(a) for a in args]
    lengths = tuple(map(len, lists))
    for i, n in enumerate(lengths[1:], 1):
        if n != lengths[0]:
            raise ValueError(f"safe_zip() argument {i} has length {n} but argument 0 has length {lengths[0]}. "
                             f"All lengths: {lengths}")
    return list(zip(*lists))


def safe_map(f: Callable, *args: Iterable) -> list:
    """``list(map(f, *args))``, refusing arguments of different lengths (a ``ValueError``)."""
    if not args:
        raise TypeError("safe_map requires at least 2 arguments.")
    lists = [list(a) for a in args]
    for i, items in enumerate(lists[1:], 1):
        if len(items) != len(lists[0]):
            shorter = "shorter" if len(items) < len(lists[0]) else "longer"
            raise ValueError(f"safe_map() argument {i + 1} is {shorter} than argument 1")
    return list(map(f, *lists))


def foreach(f: Callable, *args: Iterable) -> None:
    """``safe_map`` for its effects."""
    safe_map(f, *args)


def unzip2(pairs: Iterable[tuple]) -> tuple[tuple, tuple]:
    """Pairs as two tuples: their first and their second items."""
    xs, ys = [], []
    for x, y in pairs:
        xs.append(x)
        ys.append(y)
    return tuple(xs), tuple(ys)


def unzip3(triples: Iterable[tuple]) -> tuple[tuple, tuple, tuple]:
    """Triples as three tuples."""
    xs, ys, zs = [], [], []
    for x, y, z in triples:
        xs.append(x)
        ys.append(y)
        zs.append(z)
    return tuple(xs), tuple(ys), tuple(zs)


def subvals(items: Sequence[T], replace: Iterable[tuple[int, T]]) -> tuple[T, ...]:
    """``items`` as a tuple with the ``(index, value)`` pairs of ``replace`` put in."""
    out = list(items)
    for i, v in replace:
        out[i] = v
    return tuple(out)


def split_list(args: Sequence[T], ns: Sequence[int]) -> list[list[T]]:
    """``args`` cut into pieces of the lengths ``ns``, and the rest as the last piece."""
    args, pieces = list(args), []
    for n in ns:
        pieces.append(args[:n])
        args = args[n:]
    return pieces + [args]


def split_list_checked(args: Sequence[T], ns: Sequence[int]) -> list[list[T]]:
    """``split_list`` whose lengths must add up to ``len(args)`` (no rest)."""
    if sum(ns) != len(args):
        raise ValueError(f"split_list_checked: the lengths {tuple(ns)} add up to {sum(ns)}, not to the "
                         f"{len(args)} items")
    return split_list(args, ns)[:-1]


def partition_list(bs: Sequence[bool], items: Sequence[T]) -> tuple[list[T], list[T]]:
    """The items whose flag is false, and those whose flag is true."""
    if len(bs) != len(items):
        raise ValueError(f"partition_list: {len(bs)} flags for {len(items)} items")
    false, true = [], []
    for b, x in zip(bs, items):
        (true if b else false).append(x)
    return false, true


def merge_lists(bs: Sequence[bool], l0: Sequence[T], l1: Sequence[T]) -> list[T]:
    """The inverse of ``partition_list``: items taken from ``l1`` where the flag is true, else from ``l0``."""
    if sum(map(bool, bs)) != len(l1) or len(bs) - len(l1) != len(l0):
        raise ValueError(f"merge_lists: {len(bs)} flags ({sum(map(bool, bs))} true) for lists of {len(l0)} and "
                         f"{len(l1)} items")
    i0, i1 = iter(l0), iter(l1)
    return [next(i1) if b else next(i0) for b in bs]


def concatenate(xs: Iterable[Sequence[T]]) -> list[T]:
    """The sequences joined into one list."""
    return [x for seq in xs for x in seq]


flatten = concatenate


def unflatten(xs: Iterable[T], ns: Sequence[int]) -> list[list[T]]:
    """The inverse of ``concatenate``: ``xs`` cut into lists of the lengths ``ns`` (all used)."""
    items = list(xs)
    if sum(ns) != len(items):
        raise ValueError(f"unflatten: the lengths {tuple(ns)} add up to {sum(ns)}, not to the {len(items)} items")
    return split_list(items, ns)[:-1]


def curry(f: Callable) -> Callable:
    """``curry(f)(*a)(*b) == f(*a, *b)``."""
    return functools.partial(functools.partial, f)


def cache(max_size: int | None = 4096, trace_context_in_key: bool = True) -> Callable[[Callable], Callable]:
    """An LRU cache decorator (``max_size`` None: unbounded). The flags that change what a
    program computes (x64, the backend, ...) are part of the key, as JAX keys on its trace
    context, unless ``trace_context_in_key`` is false."""
    def decorator(f: Callable) -> Callable:
        @functools.lru_cache(max_size)
        def cached(context: tuple, *args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return cached(config.codegen_key() if trace_context_in_key else (), *args, **kwargs)

        wrapper.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        wrapper.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return wrapper
    return decorator


memoize = cache(max_size=None)


def fun_name(fun: Callable, default_name: str = "<unnamed function>") -> str:
    """A function's name (a ``functools.partial``'s is its function's)."""
    name = getattr(fun, "__name__", None)
    if name is not None:
        return name
    if isinstance(fun, functools.partial):
        return fun_name(fun.func, default_name)
    return default_name


def wrap_name(transform_name: str, name: str) -> str:
    """``transform(name)``, the name of a transformed function."""
    return f"{transform_name}({name})"


def wraps(wrapped: Callable, namestr: str | None = None, docstr: str | None = None,
          **kwargs: Any) -> Callable[[T], T]:
    """``functools.wraps`` whose name and docstring may be templates: ``{fun}`` is the wrapped
    function's name and ``{doc}`` its docstring (``kwargs`` fill other fields of ``docstr``)."""
    def decorate(fun: T) -> T:
        name = fun_name(wrapped)
        doc = getattr(wrapped, "__doc__", "") or ""
        try:
            fun.__dict__.update(getattr(wrapped, "__dict__", {}))
            fun.__annotations__ = getattr(wrapped, "__annotations__", {})  # type: ignore[attr-defined]
            fun.__name__ = name if namestr is None else namestr.format(fun=name)  # type: ignore[attr-defined]
            fun.__module__ = getattr(wrapped, "__module__", "<unknown module>")
            fun.__doc__ = doc if docstr is None else docstr.format(fun=name, doc=doc, **kwargs)
            fun.__qualname__ = getattr(wrapped, "__qualname__", fun.__name__)  # type: ignore[attr-defined]
            fun.__wrapped__ = wrapped  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # (a callable whose attributes cannot be set keeps its own)
            pass
        return fun
    return decorate


def tuple_insert(t: tuple, idx: int, val: Any) -> tuple:
    return t[:idx] + (val,) + t[idx:]


def tuple_delete(t: tuple, idx: int) -> tuple:
    return t[:idx] + t[idx + 1:]


def tuple_update(t: tuple, idx: int, val: Any) -> tuple:
    return t[:idx] + (val,) + t[idx + 1:]


def canonicalize_axis(axis: int, num_dims: int) -> int:
    """``axis`` as a non-negative index into ``num_dims`` dimensions (a ``ValueError`` when out of range)."""
    axis = operator.index(axis)
    if not -num_dims <= axis < num_dims:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {num_dims}")
    return axis + num_dims if axis < 0 else axis


def ceil_of_ratio(x: int, y: int) -> int:
    return -(-x // y)


def prod(xs: Iterable[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


class HashableFunction:
    """A function with a hashable stand-in for its closure: equal when the code and ``closure`` are."""

    def __init__(self, f: Callable, closure: Any) -> None:
        self.f, self.closure = f, closure

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, HashableFunction) and self.f.__code__ == other.f.__code__
                and self.closure == other.closure)

    def __hash__(self) -> int:
        return hash((self.f.__code__, self.closure))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.f(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<hashable {self.f.__name__} with closure={self.closure}>"


class HashablePartial(functools.partial):
    """A ``functools.partial`` equal to another of the same function and arguments."""

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, HashablePartial) and self.func.__code__ == other.func.__code__  # type: ignore[attr-defined]
                and self.args == other.args and self.keywords == other.keywords)

    def __hash__(self) -> int:
        return hash((self.func.__code__, self.args, tuple(sorted(self.keywords.items()))))  # type: ignore[attr-defined]
