"""Primitives are names; what they mean lives in rule tables keyed by primitive.

Each subsystem owns its table: abstract evaluation here (the core needs it to
stage), the reference implementation in ``core.evaluation.impl_rules`` (filled by
``backends.reference``), native lowerings in ``backends.cpu``, and jvp / transpose /
batching rules in ``transforms``. Adding a primitive means one entry per table.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

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

    def __repr__(self) -> str:
        return self.name


errors.register_boundary(Primitive.bind.__code__)

# Shape/dtype rule: (*avals, **params) -> aval, or a list of avals if multiple_results.
abstract_eval_rules: dict[Primitive, Callable] = {}

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
