"""``jax.extend.linear_util``: a function wrapped with its parameters, as JAX's tracing
helpers (``jax.api_util``, ``jax.interpreters.partial_eval``) take functions."""
from __future__ import annotations

from typing import Any, Callable


class WrappedFun:
    """``f`` with keyword parameters ``params``; ``call_wrapped(*args)`` calls it."""

    def __init__(self, f: Callable, params: dict | None = None, debug_info: Any = None) -> None:
        self.f, self.params, self.debug_info = f, dict(params or {}), debug_info

    def call_wrapped(self, *args: Any) -> Any:
        return self.f(*args, **self.params)

    @property
    def __name__(self) -> str:
        return getattr(self.f, "__name__", type(self.f).__name__)


def wrap_init(f: Callable, params: dict | None = None, *, debug_info: Any = None) -> WrappedFun:
    return WrappedFun(f, params, debug_info)


class Store:
    """A value set once, by the wrapped function when it runs (e.g. its output's tree)."""

    _EMPTY = object()

    def __init__(self) -> None:
        self._value: Any = Store._EMPTY

    def store(self, value: Any) -> None:
        self._value = value

    @property
    def val(self) -> Any:
        if self._value is Store._EMPTY:
            raise ValueError("the function has not been called yet: its result is not stored")
        return self._value

    def __call__(self) -> Any:
        return self.val


__all__ = ["Store", "WrappedFun", "wrap_init"]
