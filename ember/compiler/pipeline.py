"""The compiler's pass pipeline: one list of named stages, each switchable and printable.

    inline -> simplify -> fold -> cse -> simplify -> dce -> barriers   [-> fuse: see the PIPELINE list]

``optimize(closed)`` runs ``PIPELINE`` in order. Every pass is a pure function
``ClosedJaxpr -> ClosedJaxpr`` that keeps the program's inputs, output types
and values (tests/test_passes.py checks each against the reference interpreter).

Switching passes off, by name (a name switches off each stage it names):
``optimize(closed, disabled=("cse",))`` for one call, or
``ember.config.update("disabled_passes", ("fold",))`` for every call.

Reading the IR: ``optimize(closed, trace_passes=True)``, or the environment
variable ``EMBER_DUMP_IR=1``, prints the program on stderr before the first
stage and after each one. With ``config.check_ir`` on (the test suite turns it
on) the IR type checker runs after every stage and names the stage that broke it.
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
    # ("fuse", ...): fusion goes here, last. It needs the backend's can_fuse predicate, so for
    # now the CPU backend runs ember.compiler.fusion.fuse on the result of optimize().
]


def optimize(closed: ClosedJaxpr, *, disabled: Iterable[str] | str = (), trace_passes: bool = False) -> ClosedJaxpr:
    """Run the enabled stages of ``PIPELINE`` on ``closed`` (which is left unchanged)."""
    off = _names(disabled) | _names(config.disabled_passes)
    known = [name for name, _ in PIPELINE]
    unknown = off - set(known)
    if unknown:
        raise ValueError(f"unknown compiler pass {', '.join(map(repr, sorted(unknown)))} in `disabled` or "
                         f"config.disabled_passes; the passes are {list(dict.fromkeys(known))}")
    dump = trace_passes or os.environ.get("EMBER_DUMP_IR", "") not in ("", "0", "false", "False")
    if dump:
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
    print(f"--- ember IR {stage} ({len(closed.eqns)} equations) ---\n{closed}", file=sys.stderr)
