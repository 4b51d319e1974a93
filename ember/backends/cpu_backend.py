"""The native CPU backend's entry in the registry (``cpu``): its executable, and its backend
object. Buffers are host NumPy arrays; the code is ``ember.backends.cpu``'s, a package that
loads LLVM and is therefore imported at the first native compile, not with ember."""
from __future__ import annotations

import sys
import time
from typing import Any, Callable

import numpy as np

from ember import tree_util
from ember.backends import disk_cache, registry
from ember.backends.protocols import DECLINED, Backend, CompileOptions, Executable, host_outputs
from ember.config import config
from ember.core import sharding
from ember.core.array import Array
from ember.core.evaluation import to_numpy
from ember.core.ir import ClosedJaxpr

empty = np.empty
_LEAF = tree_util.tree_structure(0)


class CpuExecutable(Executable):
    """Runs a program compiled by the native CPU backend (``ember.backends.cpu``)."""

    dialects = ("llvm",)

    def __init__(self, closed: ClosedJaxpr, name: str, donated: frozenset[int] = frozenset()) -> None:
        from ember.backends import cpu  # at the first native compile: LLVM loads then, not with ember

        self.name = name
        self.in_avals = closed.in_avals
        self.out_avals = closed.out_avals
        self.program, self.report = cpu.compile_program(closed, name, donated)
        self._entry = cpu.entry
        self.code = self.report.code  # compiled now, loaded from disk, reused, or "none"
        self.unusable_donations = tuple(self.program.unusable_donations)
        self.kept_donations = frozenset(self.program.kept_donations)
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
                if self._native is None and self._entry.dispatcher_pending():
                    start = time.perf_counter()
                    try:
                        return self._run(args)
                    finally:
                        self._entry.note_undispatched_call(time.perf_counter() - start)
            else:
                self._called = True
                try:
                    return self._run(args)
                finally:  # (the dispatcher's build starts once the first call is done: it does not
                    self._entry.prepare_dispatcher()  # share the cores with it; once per process)
        return self._run(args)

    def _run(self, args: tuple) -> list[Array]:
        """The outputs of a run of the program's steps from Python (not by the dispatcher)."""
        reused = [p for p in self.program.reused_inputs if _may_reuse(args, p)] if self.program.reuses else ()
        vals = [_contiguous_numpy(x, a) for x, a in zip(args, self.in_avals)]
        if not reused:
            return host_outputs(self.name, self.program.run(vals), self.out_avals)
        for p in reused:
            vals[p].flags.writeable = True  # the caller gave this buffer up; the output takes it over
        try:
            outs = self.program.run(vals, reused)
        finally:
            for p in reused:
                vals[p].flags.writeable = False
        return host_outputs(self.name, outs, self.out_avals)

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
        assert sources is not None  # (known wherever there is a dispatch plan)
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
            result: Array | None
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
    def fast_runner_pending(self) -> bool:
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
        sources = program.output_sources()
        if len(program.allocations) == 1 and len(program.out_atoms) == 1 and out_tree == _LEAF \
                and sources is not None and sources[0][0] == "fresh":
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

    def as_text(self, dialect: str) -> str:
        if dialect != "llvm":
            return super().as_text(dialect)
        return self.llvm_ir()

    def llvm_ir(self) -> str:
        """The optimized LLVM IR of the program's native code ("" if nothing compiled natively)."""
        return "\n".join(str(module.optimized_ir) for module in self.program.modules)


class CpuBackend(Backend):
    name = "cpu"
    platform = "cpu"

    def devices(self) -> list[Any]:
        return sharding.devices()

    def compile(self, closed: ClosedJaxpr, options: CompileOptions) -> CpuExecutable:
        return CpuExecutable(closed, options.name, options.donated)

    @staticmethod
    def elementwise_loop(name: str, dtype: Any) -> Callable[[np.ndarray], np.ndarray]:
        """``f(x)``: the ``vecmath`` function ``name`` of one NumPy array of ``dtype``, any shape, in
        one native loop (``vecmath_kernels.Kernel.apply``: jit's code's bits), compiled now."""
        from ember.backends.cpu import vecmath_kernels  # (LLVM loads with it, as at a first compile)

        return vecmath_kernels.compile_kernel(name, dtype).apply

    @staticmethod
    def native_code_loaded() -> bool:
        """Whether the native backend's package (LLVM) is loaded, or loading: the first native
        compile of a process loads it."""
        return "ember.backends.cpu" in sys.modules

    def compile_if_on_disk(self, closed: ClosedJaxpr, options: CompileOptions) -> CpuExecutable | None:
        """The executable of ``closed`` if the disk cache holds it whole (an earlier process
        compiled it: loading takes milliseconds), else None. Asking reads no LLVM; an entry found
        unusable when loaded (another host's, damaged) is compiled now."""
        key, _ = disk_cache.program_key(closed, options.name, options.donated, self.name)
        if key is None or not disk_cache.has(key):
            return None
        return CpuExecutable(closed, options.name, options.donated)


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


BACKEND = registry.register(CpuBackend())
