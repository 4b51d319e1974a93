"""The reference backend: programs run on the NumPy interpreter (``eval_jaxpr``), buffers are
host NumPy arrays. It is what ``config.backend = "reference"`` runs, the quick tier of tiered
programs (``ember.runtime.tiers``), and the specification every other backend is tested against."""
from __future__ import annotations

import collections
from typing import Any

import numpy as np

from ember.backends import registry
from ember.backends.protocols import Backend, CompileOptions, Executable, host_outputs
from ember.compiler.dce import eliminate_dead_code
from ember.config import config
from ember.core import sharding
from ember.core.array import Array
from ember.core.calls import jit_p
from ember.core.evaluation import eval_jaxpr, impl_rules, to_numpy
from ember.core.ir import ClosedJaxpr


class ReferenceExecutable(Executable):
    """Runs a program on the NumPy reference interpreter (which ignores donation).

    The program runs without the optimizer, but with its dead code removed: a compiled program
    never runs what no output needs (an unused ``pure_callback``, as in JAX), and this one is
    what ``backend="reference"`` and the first calls of tiered programs run. Effects stay
    (``io_callback``, ``debug.callback``: ``core.ir.is_effectful``)."""

    code = "none"  # no machine code (see ``Entry.get_executable``)

    def __init__(self, closed: ClosedJaxpr, name: str) -> None:
        self.closed = closed = live_part(closed)
        self.name = name
        self.in_avals = closed.in_avals
        self.out_avals = closed.out_avals
        self.consts = [to_numpy(c, v.aval) for c, v in zip(closed.consts, closed.jaxpr.constvars)]

    def __call__(self, *args: Any) -> list[Array]:
        vals = [to_numpy(x, a) for x, a in zip(args, self.in_avals)]
        return host_outputs(self.name, eval_jaxpr(self.closed.jaxpr, self.consts, *vals), self.out_avals)


class ReferenceBackend(Backend):
    name = "reference"
    platform = "cpu"
    priority = -100  # never the default unless named: the native backend runs the same programs faster

    def devices(self) -> list[Any]:
        return sharding.devices()

    def compile(self, closed: ClosedJaxpr, options: CompileOptions) -> ReferenceExecutable:
        return ReferenceExecutable(closed, options.name)


def live_part(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` without dead code (unless ``config.disabled_passes`` names "dce")."""
    off = config.disabled_passes
    return closed if "dce" in ({off} if isinstance(off, str) else set(off)) else eliminate_dead_code(closed)


# A jit call bound outside any trace after a transformation (``vmap(jit(f))(x)``, eagerly) runs
# on the reference interpreter's rule for ``jit``: its live part only, as a compiled call would.
# (The programs of recent calls are kept, with their live parts: a call in a loop body of a
# reference run is pruned once.)
_LIVE_CALLS: collections.OrderedDict[int, tuple[ClosedJaxpr, ClosedJaxpr]] = collections.OrderedDict()
_LIVE_CALLS_KEPT = 256


def _call_live_part(*args: Any, jaxpr: ClosedJaxpr, name: str) -> list[np.ndarray]:
    hit = _LIVE_CALLS.get(id(jaxpr))
    if hit is None or hit[0] is not jaxpr:
        hit = _LIVE_CALLS[id(jaxpr)] = (jaxpr, live_part(jaxpr))
        if len(_LIVE_CALLS) > _LIVE_CALLS_KEPT:
            _LIVE_CALLS.popitem(last=False)
    live = hit[1]
    return eval_jaxpr(live.jaxpr, live.consts, *args)


impl_rules[jit_p] = _call_live_part
BACKEND = registry.register(ReferenceBackend())
