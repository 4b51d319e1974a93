"""Arguments of jnp functions that must be Python values while tracing.

Some arguments decide a result's shape or which computation runs (``n`` of
``jnp.diff``, ``bins`` of ``jnp.histogram``). A traced value there raises
ConcretizationTypeError naming the argument and the function, as JAX's does.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

from ember import errors
from ember.core.trace import Tracer

__all__: list[str] = []  # helpers for the jnp modules, not part of jnp


def static_value(value: Any, convert: Callable[[Any], Any], argument: str, function: str,
                 reason: str = "which must be a static Python value") -> Any:
    """``convert(value)``, refusing a traced ``value`` with an error that names ``argument``."""
    if isinstance(value, Tracer):
        raise value._trace.concretization_error(
            value, f"use as argument '{argument}' of jnp.{function} ({reason})", errors.ConcretizationTypeError)
    return convert(value)


def static_int(value: Any, argument: str, function: str) -> int:
    return static_value(value, operator.index, argument, function, "which must be a static Python int")


def static_bool(value: Any, argument: str, function: str) -> bool:
    return static_value(value, bool, argument, function, "which must be a static Python bool")
