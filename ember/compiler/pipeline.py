"""The compiler's pass pipeline: one list of named stages, each switchable and printable.

    inline -> simplify -> fold -> cse -> simplify -> dce -> barriers

``optimize(closed)`` runs ``PIPELINE`` in order. Every pass is a pure function
``ClosedJaxpr -> ClosedJaxpr`` that keeps the program's inputs, output types
and values (tests/test_passes.py checks each against the reference interpreter).
A backend runs ``optimize`` as one stage of its own list (the CPU backend's:
``ember.backends.cpu.STAGES``, where fusion follows: it needs the backend's
``can_fuse`` predicate).

Switching passes off, by name (a name switches off each stage it names):
``optimize(closed, disabled=("cse",))`` for one call, or
``ember.config.update("disabled_passes", ("fold",))`` for every call; the same
setting switches off the backends' switchable stages (``BACKEND_STAGES``).

Reading the IR: ``optimize(closed, trace_passes=True)``, or the environment
variable ``EMBER_DUMP_IR=1``, prints the program on stderr before the first
stage and after each one (``EMBER_DUMP_IR=optimize,plan``: only the stages
named, the backend's included; see ``dump_requested``). With ``config.check_ir``
on (the test suite turns it on) the IR type checker runs after every stage and
names the stage that broke it.
"""
from __future__ import annotations

import os
import sys
from typing import Callable, Iterable

from ember.compiler.cse import eliminate_common_subexpressions
from ember.compiler.dce import eliminate_dead_code
from ember.compiler.fold import fold_constants
from ember.compiler.inline import inline_calls, remove_barriers
from ember.compiler.simplify import simplify
from ember.config import config
from ember.core.ir import ClosedJaxpr
from ember.core.verify import IRTypeError, check_jaxpr

Pass = Callable[[ClosedJaxpr], ClosedJaxpr]

PIPELINE: list[tuple[str, Pass]] = [
    ("inline", inline_calls),                       # first: later passes see across call boundaries
    ("simplify", simplify),                         # algebra exposes constants and duplicates
    ("fold", fold_constants),
    ("cse", eliminate_common_subexpressions),
    ("simplify", simplify),                         # again: folding and CSE expose new patterns
    ("dce", eliminate_dead_code),                   # the passes above leave dead producers
    ("barriers", remove_barriers),                  # after CSE: checkpoint's barriers have done their job
]
# Stages of the backends' own lists that ``config.disabled_passes`` switches off too (the CPU
# backend's ``expand`` and ``fuse``): ``optimize`` knows their names and leaves them to those lists.
BACKEND_STAGES = ("expand", "fuse")
_ALL = ("1", "true", "True", "all", "yes")


def dump_requested(*stages: str) -> bool:
    """Whether ``EMBER_DUMP_IR`` asks for the programs after any of ``stages``: its value is
    1 (or true, all, yes) for every stage, or a comma-separated list of stage names."""
    value = os.environ.get("EMBER_DUMP_IR", "")
    return value in _ALL or bool(dumped_names() & set(stages))


def dumped_names() -> set[str]:
    """The stage names that ``EMBER_DUMP_IR`` lists (none when it is unset or asks for all)."""
    value = os.environ.get("EMBER_DUMP_IR", "")
    if value in _ALL or value in ("", "0", "false", "False"):
        return set()
    return {name.strip() for name in value.split(",") if name.strip()}


def optimize(closed: ClosedJaxpr, *, disabled: Iterable[str] | str = (), trace_passes: bool = False,
             dump_input: bool = True) -> ClosedJaxpr:
    """Run the enabled stages of ``PIPELINE`` on ``closed`` (which is left unchanged). Dumping
    (``trace_passes``, ``EMBER_DUMP_IR``) prints the input first unless ``dump_input`` is false
    (a caller that printed it)."""
    off = _names(disabled) | _names(config.disabled_passes)
    known = list(dict.fromkeys(name for name, _ in PIPELINE))
    unknown = off - set(known) - set(BACKEND_STAGES)
    if unknown:
        raise ValueError(f"unknown compiler pass {', '.join(map(repr, sorted(unknown)))} in `disabled` or "
                         f"config.disabled_passes; the passes are {known}, and the backends' stages "
                         f"{list(BACKEND_STAGES)}")
    dump = trace_passes or dump_requested("optimize", *known)
    if dump and dump_input:
        _dump("input", closed)
    for name, run in PIPELINE:
        if name in off:
            continue
        closed = run(closed)
        if config.check_ir:
            try:
                check_jaxpr(closed)
            except IRTypeError as e:
                raise IRTypeError(f"the IR is malformed after compiler pass {name!r}: {e}") from e
        if dump:
            _dump(f"after {name}", closed)
    return closed


def _names(names: Iterable[str] | str) -> set[str]:
    return {names} if isinstance(names, str) else set(names)


def _dump(stage: str, closed: ClosedJaxpr) -> None:
    dump(f"{stage} ({len(closed.eqns)} equations)", closed)


def dump(title: str, what: object) -> None:
    """Print one stage's result on stderr (``EMBER_DUMP_IR``)."""
    print(f"--- ember IR {title} ---\n{what}", file=sys.stderr)
