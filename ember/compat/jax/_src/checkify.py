"""``jax._src.checkify``: the names of JAX's checkify that libraries take at import (flax.nnx
wraps it). ember does not implement checkify: calling ``checkify`` raises
``NotImplementedError`` (``jax.experimental.checkify`` is not provided)."""
from __future__ import annotations

from typing import Any, Callable, TypeVar

Out = TypeVar("Out")


class JaxException(Exception):
    """The base of the errors checkify checks for."""


class FailedCheckError(JaxException):
    """A failed ``check``."""


class NaNError(JaxException):
    """A NaN made by an operation."""


class OOBError(JaxException):
    """An out-of-bounds index."""


class DivisionByZeroError(JaxException):
    """An integer division by zero."""


class Error:
    """The error value a checkified function returns (ember makes none)."""


user_checks = frozenset({FailedCheckError})
nan_checks = frozenset({NaNError})
index_checks = frozenset({OOBError})
div_checks = frozenset({DivisionByZeroError})
float_checks = nan_checks | div_checks
automatic_checks = float_checks | index_checks
all_checks = automatic_checks | user_checks


def checkify(fun: Callable, errors: frozenset = user_checks) -> Callable:
    raise NotImplementedError("checkify is not implemented by ember")


def check(pred: Any, msg: str, *fmt_args: Any, **fmt_kwargs: Any) -> None:
    raise NotImplementedError("checkify.check is not implemented by ember")
