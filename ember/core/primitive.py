"""Primitives are names; what they mean lives in rule tables keyed by primitive.

Each subsystem owns its table: abstract evaluation here (the core needs it to
stage), the reference implementation in ``core.evaluation.impl_rules`` (filled by
``backends.reference``), native lowerings in ``backends.cpu``, and jvp / transpose /
batching rules in ``transforms``. Adding a primitive means one entry per table.
"""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, MutableMapping
from types import FrameType
from typing import Any

from ember import errors
from ember.core.trace import current_trace


class Primitive:
    """A named operation. ``bind`` hands it to whichever trace is current."""

    __slots__ = ("name", "multiple_results")

    def __init__(self, name: str, multiple_results: bool = False) -> None:
        self.name = name
        self.multiple_results = multiple_results

    def bind(self, *args: Any, **params: Any) -> Any:
        try:
            return current_trace().process_primitive(self, args, params)
        except Exception as e:  # an entry point (eager operations): ember's frames below are filtered out
            errors.filter_at_boundary(e, sys._getframe())
            raise

    def get_bind_params(self, params: dict) -> dict:
        """The params to bind an equation's primitive with again (JAX's: libraries that re-bind
        equations call it; ember's params are the bind's as they are)."""
        return params

    def __repr__(self) -> str:
        return self.name


errors.register_boundary(Primitive.bind.__code__)


class DuplicateRule(ValueError):
    """A second rule for a primitive in one table, not marked as an override."""


_HERE = __file__


def _registrant() -> str:
    """Where the registering code is: the first frame outside this module and ``dict``."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename == _HERE:
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{frame.f_globals.get('__name__', frame.f_code.co_filename)}:{frame.f_lineno}"


class RuleTable(dict):
    """A table of rules keyed by primitive, in which a primitive has one rule.

    Registering a second rule for a primitive (``table[p] = rule`` again, or ``update``) raises
    ``DuplicateRule``, naming the primitive and both registrants: a silent replacement makes a
    rule's meaning depend on import order. Code that means to replace a rule says so:
    ``table.override(p, rule)``; ``table.overriding(p, rule)`` does it for a ``with`` block
    (tests). Reading is a plain ``dict``'s."""

    __slots__ = ("name", "version", "_registrants")

    def __init__(self, name: str, rules: dict | None = None) -> None:
        super().__init__()
        self.name = name
        self.version = 0  # changes with every change of the table (for views that cache what they read)
        self._registrants: dict[Any, str] = {}
        if rules:
            self.update(rules)

    def __setitem__(self, p: Any, rule: Any) -> None:
        if p in self:
            raise DuplicateRule(
                f"{self.name}: a second rule for primitive {p!r} (from {_registrant()}); the first came from "
                f"{self._registrants.get(p, '?')}. A primitive has one rule per table: use "
                f"{self.name}.override({p!r}, rule) where replacing it is meant.")
        self._registrants[p] = _registrant()
        super().__setitem__(p, rule)
        self.version += 1

    def __delitem__(self, p: Any) -> None:
        super().__delitem__(p)
        self._registrants.pop(p, None)
        self.version += 1

    def pop(self, p: Any, *default: Any) -> Any:
        rule = super().pop(p, *default)
        self._registrants.pop(p, None)
        self.version += 1
        return rule

    def clear(self) -> None:
        super().clear()
        self._registrants.clear()
        self.version += 1

    def update(self, *args: Any, **kwargs: Any) -> None:
        for p, rule in dict(*args, **kwargs).items():
            self[p] = rule

    def setdefault(self, p: Any, rule: Any = None) -> Any:
        if p not in self:
            self[p] = rule
        return self[p]

    def override(self, p: Any, rule: Any) -> None:
        """Set ``p``'s rule, replacing the one registered (if any): meant, and said so."""
        self._registrants[p] = _registrant() + " (override)"
        super().__setitem__(p, rule)
        self.version += 1

    @contextlib.contextmanager
    def overriding(self, p: Any, rule: Any) -> Iterator[None]:
        """``p``'s rule is ``rule`` for the duration of the block, then what it was."""
        had, old, registrant = p in self, self.get(p), self._registrants.get(p)
        self.override(p, rule)
        try:
            yield
        finally:
            if had:
                super().__setitem__(p, old)
                self._registrants[p] = registrant  # type: ignore[assignment]
                self.version += 1
            else:
                del self[p]

    def registrant(self, p: Any) -> str:
        """Where ``p``'s rule was registered (``module:line``)."""
        return self._registrants.get(p, "?")


class ReplacingView(MutableMapping):
    """A rule table as JAX's API shows it (``jax.interpreters.ad.primitive_jvps``, ...): a
    plain mapping in which setting a primitive's rule again replaces it (an override)."""

    def __init__(self, table: RuleTable) -> None:
        self.table = table

    def __getitem__(self, p: Any) -> Any:
        return self.table[p]

    def __setitem__(self, p: Any, rule: Any) -> None:
        self.table.override(p, rule)

    def __delitem__(self, p: Any) -> None:
        del self.table[p]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)

    def __contains__(self, p: object) -> bool:
        return p in self.table


# Shape/dtype rule: (*avals, **params) -> aval, or a list of avals if multiple_results.
abstract_eval_rules: RuleTable = RuleTable("abstract_eval_rules")

# Primitives whose params hold sub-programs (for printers, passes and the checker).
higher_order: set[Primitive] = set()

# Call-like primitives: the name of the param holding the callee (a ClosedJaxpr applied to
# the equation's operands). Calls add nothing to the computation, so passes may inline them.
call_params: dict[Primitive, str] = {}

# Primitives with effects, i.e. not a pure function of their operands (host callbacks that
# print): passes never merge, fold or drop them (``ember.core.ir.is_effectful``).
EFFECTFUL: set[Primitive] = set()

# Effectful primitives that may run again when a checkpoint recomputes what holds them (debug
# callbacks and prints: JAX reruns them with the recomputation); other effects run once.
REPLAYABLE: set[Primitive] = set()
