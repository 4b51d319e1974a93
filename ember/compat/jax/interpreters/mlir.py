"""``jax.interpreters.mlir``: compiled code for user-defined primitives. ember compiles through
LLVM, not MLIR, so the one kind of lowering it takes is JAX's portable one,
``register_lowering(p, lower_fun(f, multiple_results))``: compiled programs replace the
primitive by the program that ``f`` traces to (natively compiled, fused with its neighbours).
A lowering written against MLIR's builders cannot run here: registering one is accepted and
does nothing, and the primitive's implementation (``def_impl``) runs in compiled programs."""
from __future__ import annotations

from typing import Any, Callable

from ember.backends.cpu.expansions import Expansion, expansions
from ember.core.primitive import Primitive


class LoweredFunction:
    """``lower_fun``'s result: the primitive computed by ``fn`` of its operands and params."""

    def __init__(self, fn: Callable, multiple_results: bool) -> None:
        self.fn, self.multiple_results = fn, multiple_results

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("an mlir.lower_fun lowering is used by register_lowering, not called")


def lower_fun(fun: Callable, multiple_results: bool = True) -> LoweredFunction:
    return LoweredFunction(fun, multiple_results)


def register_lowering(primitive: Primitive, rule: Any, platform: str | None = None) -> Any:
    if isinstance(rule, LoweredFunction) and platform in (None, "cpu"):
        fn, listed = rule.fn, rule.multiple_results and not primitive.multiple_results

        def expansion(*args: Any, **params: Any) -> Any:
            out = fn(*args, **params)
            return out[0] if listed else out  # (a one-result primitive's function may return a list of it)
        expansions.override(primitive, Expansion(expansion, lambda *avals, **params: True))  # (JAX: again replaces)
    return rule


__all__ = ["lower_fun", "register_lowering"]
