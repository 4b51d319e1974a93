"""The user's functions that a transformation traces, as a layer above may rewrite them.

``grad``, ``value_and_grad``, ``vjp``, ``jvp``, ``linearize`` and ``vmap`` call ``traced(fun)`` on the
function they are about to trace, at the time they trace it. ``ember.autograph`` registers the
rewrite: inside a ``jit`` trace that converts Python control flow, the user's function is converted
too, so ``jit(grad(f), autograph=True)`` converts ``f`` (``jit`` itself only sees ``grad``'s wrapper,
which is ember's code). Without a registered rewrite, or outside such a trace, ``fun`` comes back
as it is.
"""
from __future__ import annotations

from typing import Any, Callable

_rewrites: list[Callable[[Any], Any]] = []


def register(rewrite: Callable[[Any], Any]) -> None:
    """Have ``traced`` pass every function through ``rewrite`` (which returns it or its rewrite)."""
    _rewrites.append(rewrite)


def traced(fun: Any) -> Any:
    """``fun`` as the registered rewrites make it (itself where none applies)."""
    for rewrite in _rewrites:
        fun = rewrite(fun)
    return fun
