"""Executables: what a cache hit runs. Called with flat arguments, they return a list of Arrays.

``donated`` holds the positions of arguments the caller gives up (``jit(donate_argnums=...)``):
an executable may write outputs into their buffers. The caller deletes those Arrays afterwards.
"""
from __future__ import annotations

import collections
import sys
from typing import Any, Callable

import numpy as np

from ember import dtypes, tree_util
from ember.backends.reference import eval_jaxpr, impl_rules, to_numpy
from ember.compiler.dce import eliminate_dead_code
from ember.config import config
from ember.core.array import Array
from ember.core.calls import jit_p
from ember.core.ir import ClosedJaxpr

empty = np.empty
_LEAF = tree_util.tree_structure(0)

BACKENDS = ("reference", "cpu")
DECLINED = object()  # what a native runner returns when the dispatcher turns the arguments down


def compile_jaxpr(closed: ClosedJaxpr, name: str = "fn", donated: frozenset[int] = frozenset()) -> Any:
    """An executable for ``closed`` on ``config.backend``: call it with flat arguments, get a
    list of Arrays. It may write outputs into the buffers of the arguments at ``donated``."""
    backend = config.backend
    if backend == "reference":
        return ReferenceExecutable(closed, name)
    if backend == "cpu":
        return CpuExecutable(closed, name, donated)
    raise ValueError(f"unknown backend {backend!r}; available: {', '.join(map(repr, BACKENDS))}")


class ReferenceExecutable:
    """Runs a program on the NumPy reference interpreter (which ignores donation).

    The program runs without the optimizer, but with its dead code removed: a compiled program
    never runs what no output needs (an unused ``pure_callback``, as in JAX), and this one is
    what ``backend="reference"`` and the first calls of tiered programs run. Effects stay
    (``io_callback``, ``debug.callback``: ``core.ir.is_effectful``)."""

    unusable_donations: tuple = ()
    code = "none"  # no machine code (see ``Entry.get_executable``)

    def __init__(self, closed: ClosedJaxpr, name: str) -> None:
        self.closed = closed = _live_part(closed)
        self.name = name
        self.in_avals = closed.in_avals
        self.out_avals = closed.out_avals
        self.consts = [to_numpy(c, v.aval) for c, v in zip(closed.consts, closed.jaxpr.constvars)]

    def __call__(self, *args: Any) -> list[Array]:
        vals = [to_numpy(x, a) for x, a in zip(args, self.in_avals)]
        return _wrap(self.name, eval_jaxpr(self.closed.jaxpr, self.consts, *vals), self.out_avals)


class CpuExecutable:
    """Runs a program compiled by the native CPU backend (``ember.backends.cpu``)."""

    def __init__(self, closed: ClosedJaxpr, name: str, donated: frozenset[int] = frozenset()) -> None:
        from ember.backends import cpu  # at the first native compile: LLVM loads then, not with ember

        self.name = name
        self.in_avals = closed.in_avals
        self.out_avals = closed.out_avals
        self.program, self.report = cpu.compile_program(closed, name, donated)
        self._entry = cpu.entry
        if self.program.plan is not None or self.program.plan_pending:
            cpu.entry.prepare_dispatcher()
        self.code = self.report.code  # compiled now, loaded from disk, reused, or "none"
        self.unusable_donations = self.program.unusable_donations
        self._native: Callable[[tuple], Any] | None = None  # the dispatcher's runner, once set up
        self._called = False

    def __call__(self, *args: Any) -> list[Array]:
        native = self._native
        if native is not None:
            if not (config.debug_nans or config.debug_infs):
                outs = native(args)
                if outs is not DECLINED:
                    return outs
        elif self.program.plan is not None or self.program.plan_pending:  # the dispatcher from the
            if self._called:                   # second call on: a first call does not pay for setting it up
                self._native = self._native_runner()
            self._called = True
        reused = [p for p in self.program.reused_inputs if _may_reuse(args, p)] if self.program.reuses else ()
        vals = [_contiguous_numpy(x, a) for x, a in zip(args, self.in_avals)]
        if not reused:
            return _wrap(self.name, self.program.run(vals), self.out_avals)
        for p in reused:
            vals[p].flags.writeable = True  # the caller gave this buffer up; the output takes it over
        try:
            outs = self.program.run(vals, reused)
        finally:
            for p in reused:
                vals[p].flags.writeable = False
        return _wrap(self.name, outs, self.out_avals)

    def _native_runner(self) -> Callable[[tuple], Any] | None:
        runner = self._dispatched_runner()
        return runner if runner is None else _raising_host_errors(runner, self.program)

    def _dispatched_runner(self) -> Callable[[tuple], Any] | None:
        """``run(args)``: the output Arrays of the program on the Arrays ``args``, run by the
        native dispatcher (``ember.backends.cpu.entry``) in one call, or ``DECLINED`` if it turns
        the arguments down. None if the dispatcher cannot run the program (or is not built yet)."""
        program, call = self.program, self._entry.ready_dispatcher()
        plan = program.dispatch_plan()
        if plan is None or call is None:
            return None
        fresh = [(aval.shape, aval.dtype) for _, aval in program.allocations]
        sources = program.output_sources()
        new = Array.__new__
        if all(kind == "fresh" for kind, _ in sources):
            picks = [(j, aval) for (_, j), aval in zip(sources, self.out_avals)]

            def run(args: tuple, program: Any = program) -> Any:  # (the plan points into program's code)
                outs = [empty(shape, dtype) for shape, dtype in fresh]
                if call(plan, *args, *outs) is not None:
                    return DECLINED
                results = []
                for j, aval in picks:
                    result = new(Array)
                    result._value, result.aval = outs[j], aval
                    results.append(result)
                return results
            return run
        # Outputs that are arguments passed through, or constants (one Array each, made here: Arrays
        # are immutable), besides the fresh ones.
        constants = {i: Array(to_numpy(value, aval), aval) for i, ((kind, value), aval)
                     in enumerate(zip(sources, self.out_avals)) if kind == "constant"}
        mixed = [(kind, value, aval, constants.get(i)) for i, ((kind, value), aval)
                 in enumerate(zip(sources, self.out_avals))]

        def run_mixed(args: tuple, program: Any = program) -> Any:
            outs = [empty(shape, dtype) for shape, dtype in fresh]
            if call(plan, *args, *outs) is not None:
                return DECLINED
            results = []
            for kind, value, aval, constant in mixed:
                if kind == "fresh":
                    result = new(Array)
                    result._value, result.aval = outs[value], aval
                elif kind == "input":  # (a new Array over the same buffer, as JAX returns)
                    result = new(Array)
                    result._value, result.aval = args[value]._value, aval
                else:
                    result = constant
                results.append(result)
            return results
        return run_mixed

    @property
    def dispatcher_pending(self) -> bool:
        """Whether the dispatcher could run this program but is still being built."""
        program = self.program
        return program.plan_pending or (program.plan is not None and self._entry.dispatcher_pending())

    def fast_runner(self, out_tree: Any) -> Callable[[tuple], Any] | None:
        """For the jit hit path: ``run(args)``, the unflattened result (by ``out_tree``) of the
        program on the Arrays ``args`` through the native dispatcher, or ``DECLINED``. None if
        the dispatcher cannot run the program, or NaNs are to be checked (``debug_nans``)."""
        runner = self._native_runner()
        if runner is None or config.debug_nans or config.debug_infs:
            return None
        program = self.program
        if len(program.allocations) == 1 and len(program.out_atoms) == 1 and out_tree == _LEAF \
                and program.output_sources()[0][0] == "fresh":
            call, plan, new = self._entry.ready_dispatcher(), program.plan, Array.__new__
            (_, aval), = program.allocations
            shape, dtype, out_aval = aval.shape, aval.dtype, self.out_avals[0]

            def run_one(args: tuple, program: Any = program) -> Any:  # the commonest case, unrolled
                out = empty(shape, dtype)
                if call(plan, *args, out) is not None:
                    return DECLINED
                result = new(Array)
                result._value, result.aval = out, out_aval
                return result
            return _raising_host_errors(run_one, program)

        def run(args: tuple) -> Any:
            outs = runner(args)
            return outs if outs is DECLINED else tree_util.tree_unflatten(out_tree, outs)
        return run

    def llvm_ir(self) -> str:
        """The optimized LLVM IR of the program's native code ("" if nothing compiled natively)."""
        return "\n".join(str(module.optimized_ir) for module in getattr(self.program, "modules", ()))


def _live_part(closed: ClosedJaxpr) -> ClosedJaxpr:
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
        hit = _LIVE_CALLS[id(jaxpr)] = (jaxpr, _live_part(jaxpr))
        if len(_LIVE_CALLS) > _LIVE_CALLS_KEPT:
            _LIVE_CALLS.popitem(last=False)
    live = hit[1]
    return eval_jaxpr(live.jaxpr, live.consts, *args)


impl_rules[jit_p] = _call_live_part


def _raising_host_errors(runner: Callable[[tuple], Any], program: Any) -> Callable[[tuple], Any]:
    """``runner``, raising after each run what the program's host steps kept (if it has any)."""
    if not program.host_errors:
        return runner

    def run(args: tuple) -> Any:
        outs = runner(args)
        program.raise_host_errors()
        return outs
    return run


def _buffer_references(x: Array) -> int:
    return sys.getrefcount(x._value)


# What ``_buffer_references`` counts for a buffer that only its Array holds.
_SOLE_OWNER_REFERENCES = _buffer_references(Array(np.zeros(1)))


def _may_reuse(args: tuple, position: int) -> bool:
    """Whether the donated argument at ``position`` is an Array whose buffer nothing else can see:
    no other argument, Array, view, NumPy export or program constant refers to it."""
    x = args[position]
    if type(x) is not Array or _buffer_references(x) != _SOLE_OWNER_REFERENCES:
        return False
    value = x._value
    if value.base is not None or not value.flags.c_contiguous:
        return False
    return not any(i != position and type(y) is Array and np.may_share_memory(value, y._value)
                   for i, y in enumerate(args))


def _contiguous_numpy(x: Any, aval) -> np.ndarray:
    value = to_numpy(x, aval)
    return value if value.flags.c_contiguous else value.copy(order="C")


def _wrap(name: str, outs: list[np.ndarray], avals: list) -> list[Array]:
    if config.debug_nans or config.debug_infs:
        _check_nans(name, outs)
    return [Array(o, a) for o, a in zip(outs, avals)]


class InvalidOutputValues(FloatingPointError):
    """``debug_nans`` / ``debug_infs``: a compiled program's output holds a NaN (an infinity).
    ``jit`` then runs the function op by op, as JAX does, to name the operation."""


def _check_nans(name: str, outs: list[np.ndarray]) -> None:
    for i, o in enumerate(outs):
        if dtypes.is_inexact(o.dtype):  # (float8 and bfloat16 included)
            wide = o.astype(np.complex128 if dtypes.is_complex(o.dtype) else np.float64)
            if config.debug_nans and np.isnan(wide).any():
                raise InvalidOutputValues(f"debug_nans: output {i} of {name} contains NaN")
            if config.debug_infs and np.isinf(wide).any():
                raise InvalidOutputValues(f"debug_infs: output {i} of {name} contains inf")
