"""``jax.experimental.hijax``: the names a library's module may define things with, so that it
imports (flax.nnx defines its optional "hijax" variables against them at import).

ember has no high-level types: the classes here can be subclassed and decorated with, but
binding a ``HiPrimitive`` raises ``NotImplementedError``. Libraries use them only in modes
that are off by default (flax: ``flax_hijax_variable``)."""
from __future__ import annotations

from typing import Any, Callable

from ember.compat.jax.interpreters.ad import Zero, instantiate_zeros, is_undefined_primal  # noqa: F401


class AbstractValue:
    """The base of abstract values a library defines."""


class HiType(AbstractValue):
    """A high-level type (a library's)."""


class MutableHiType(HiType):
    """A mutable high-level type (a library's)."""


class AvalQDD:
    """A type with its quasi-dynamic data."""

    def __init__(self, aval: Any, qdd: Any) -> None:
        self.aval, self.qdd = aval, qdd


class AvalMutableQDD(AvalQDD):
    """A type with its mutable quasi-dynamic data."""


class aval_method:  # noqa: N801  (JAX's name)
    """A method of a high-level value that its type also has."""

    def __init__(self, fun: Callable) -> None:
        self.fun = fun

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self.fun if instance is None else self.fun.__get__(instance, owner)


class aval_property(property):  # noqa: N801  (JAX's name)
    """A property of a high-level value that its type also has."""


class HiPrimitive:
    """A primitive over high-level types: definable, not bindable under ember."""

    multiple_results = False

    def __init__(self, name: str) -> None:
        self.name = name

    def bind(self, *args: Any, **params: Any) -> Any:
        raise NotImplementedError(f"{self.name}: ember does not implement jax.experimental.hijax primitives")

    def __repr__(self) -> str:
        return self.name


class _EffectTypeSet:
    def __init__(self) -> None:
        self._types: set[type] = set()

    def add_type(self, effect_type: type) -> None:
        self._types.add(effect_type)

    def contains(self, effect: Any) -> bool:
        return isinstance(effect, tuple(self._types))


control_flow_allowed_effects = _EffectTypeSet()
_hitypes: dict[type, Callable] = {}


def register_hitype(cls: type, to_aval: Callable) -> None:
    """Record ``to_aval`` as the type rule of values of ``cls`` (ember does not trace them)."""
    _hitypes[cls] = to_aval
