"""Running a compiled program: its steps, one after another, on the buffers of its plan.

Steps: a native kernel (one LLVM function per ``fusion`` equation), a native loop or conditional
(one LLVM function per control-flow equation whose body lowers), a matrix product (``dot``), a
decomposition or triangular solve on LAPACK (``lapack``), a batch of FFTs of rows (``fft``), a
free reshape (a view), or a fallback equation run by the reference interpreter inside the same
executable. ``codegen`` makes them and gives the native ones their functions.

``Program`` runs them (``run``), and, when every step is native, makes the plan of the native
dispatcher (``entry``: ``dispatch_plan``), which the jit hit path calls to run the whole program
in one call. Its buffers are the ``Plan``'s (``plan``).
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.backends.cpu import control_flow, dot, entry, fft, jit, threads
from ember.backends.cpu.entry import data_pointer
from ember.backends.cpu.plan import ALIGNMENT, Plan, aligned, contiguous
from ember.backends.reference import impl_rules
from ember.core.ir import Eqn

# Programs whose steps touch at least this many elements release the GIL while they run
# (for less, taking the GIL back costs more than other Python threads gain).
RELEASE_GIL_WORK = 1 << 16


# --- steps ---------------------------------------------------------------------------------
# ``ins`` hold slot numbers, or NumPy values for literals; ``outs`` slot numbers. Steps whose
# ``planned`` is true write into buffers that the program allocates for them.
def _pointers(env: list, ins: list, outs: list, extra: list | tuple = ()) -> ctypes.Array:
    """The buffers' addresses; ``extra`` holds arrays or addresses."""
    buffers = [env[a] if isinstance(a, int) else a for a in ins] + [env[o] for o in outs]
    addresses = [*map(data_pointer, buffers), *(e if isinstance(e, int) else data_pointer(e) for e in extra)]
    return (ctypes.c_void_p * len(addresses))(*addresses)


# A step's C signature: step(buffers, begin, end).
STEP_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64, ctypes.c_int64)
# The function of a native step until ``codegen`` links it: a null pointer (``Program`` refuses it).
UNLINKED = STEP_SIGNATURE()


@dataclass
class KernelStep:
    name: str
    fn: jit.NativeFunction  # (``UNLINKED`` until ``codegen`` links it)
    ins: list
    outs: list[int]
    extent: int
    work: int
    chunks: int  # parts of the outermost loop, run by as many threads
    team: bool  # an OpenMP team runs the parts (else the Python pool)
    planned = True

    def __post_init__(self) -> None:
        self.slots = self.ins + self.outs  # a kernel's operands are all variables
        self.pointer_array = ctypes.c_void_p * len(self.slots)

    def run(self, env: list) -> None:
        pointers = self.pointer_array(*[data_pointer(env[i]) for i in self.slots])
        if self.chunks == 1:
            self.fn(pointers, 0, self.extent)
        elif self.team:
            threads.run_team(self.fn, pointers, self.extent, self.chunks)
        else:
            threads.run_split(self.fn, pointers, self.extent, self.chunks)


@dataclass
class LoopStep:
    """A native loop, conditional or LAPACK call: one call; its temporaries live in a scratch
    area, and it calls functions through a table of their addresses (the products':
    ``control_flow.function_table``; LAPACK calls': ``lapack.routine_table``)."""
    name: str
    fn: jit.NativeFunction  # (``UNLINKED`` until ``codegen`` links it)
    ins: list
    outs: list[int]
    scratch_bytes: int
    table: int  # the table's address
    host: control_flow.HostCalls | None = None  # a loop's host calls (their table is ``table``)
    planned = True

    def run(self, env: list) -> None:
        scratch = np.empty(self.scratch_bytes + ALIGNMENT, np.uint8)
        area = scratch[-scratch.ctypes.data % ALIGNMENT:]
        self.fn(_pointers(env, self.ins, self.outs, [area, self.table]), 0, 1)
        if self.host is not None:
            self.host.check()


@dataclass
class DotStep:
    dot: dot.DotGeneral
    ins: list
    outs: list[int]
    planned = True

    def run(self, env: list) -> None:
        self.dot(env[self.ins[0]], env[self.ins[1]], env[self.outs[0]])


@dataclass
class FftStep:
    """A batch of one-dimensional FFTs along rows on the native FFT (``fft``)."""
    transform: fft.RowTransform
    ins: list
    outs: list[int]
    planned = True

    @property
    def chunks(self) -> int:  # (threads, as a kernel's)
        return self.transform.chunks

    def run(self, env: list) -> None:
        source = self.ins[0]
        self.transform(env[source] if isinstance(source, int) else source, env[self.outs[0]])


@dataclass
class ViewStep:
    """A reshape that costs nothing: the result views its operand's buffer."""
    ins: list
    outs: list[int]
    shape: tuple
    planned = False

    def run(self, env: list) -> None:
        env[self.outs[0]] = env[self.ins[0]].reshape(self.shape)




@dataclass
class FallbackStep:
    """An equation without native code: its reference rule, its results copied into the step's
    planned buffers. In a dispatched run the dispatcher calls it back (``callback``, a C function
    of the step signature on its operands' and outputs' buffers); what the rule raised there is
    kept and raised by ``check`` once the dispatcher has returned."""
    eqn: Eqn
    ins: list
    outs: list[int]
    planned = True

    def __post_init__(self) -> None:
        self.errors: list[BaseException] = []
        run = control_flow.host_function(self.eqn, self.errors)
        self.callback = STEP_SIGNATURE(lambda buffers, begin, end: run(buffers))

    def run(self, env: list) -> None:
        # (copies: the rule may keep its operands, a callback's user function among them, and
        # their buffers are reused once read)
        args = [env[a].copy() if isinstance(a, int) else a for a in self.ins]
        results = impl_rules[self.eqn.primitive](*args, **self.eqn.params)
        if not self.eqn.primitive.multiple_results:
            results = (results,)
        for slot, value, var in zip(self.outs, results, self.eqn.outvars):
            np.copyto(env[slot], contiguous(value, var.aval))


NATIVE_STEPS = (KernelStep, LoopStep, DotStep, FftStep)  # what the native dispatcher can run (with views)


class Program:
    """A program ready to run: ``run(args)`` returns the output NumPy arrays.

    ``plan``: the native dispatcher's plan (None if it cannot run the program, or ``plan_pending``
    while ``gemm`` or the FFT compiles: ``dispatch_plan`` makes it then). The steps and buffers
    are ``step_plan``'s, and the fields that the runtime reads are copied here. ``modules``: the
    compiled modules of the functions generated for this program (``compiled``, the first, None if
    it generated none); ``borrowed``: the modules of earlier programs whose functions it calls,
    kept alive with it."""

    def __init__(self, plan: Plan, report: Any, modules: list, borrowed: list, dispatch: bool) -> None:
        if any(getattr(step, "fn", None) is UNLINKED for step in plan.steps):
            raise RuntimeError(f"native steps of {[s.name for s in plan.steps if getattr(s, 'fn', None) is UNLINKED]} "
                               "have no function: the program was not linked (codegen.link)")
        self.step_plan = plan
        self.report = report
        self.modules, self.borrowed = modules, borrowed
        self.compiled = modules[0] if modules else None
        self.steps, self.template, self.in_slots = plan.steps, plan.template, plan.in_slots
        self.out_atoms = plan.out_atoms
        self.allocations, self.arena_views, self.arena_bytes = plan.allocations, plan.arena_views, plan.arena_bytes
        self.reuses, self.reused_inputs = plan.reuses, plan.reused_inputs
        self.unusable_donations, self.kept_donations = plan.unusable_donations, plan.kept_donations
        # What the host steps of a dispatched run raised (``raise_host_errors``).
        self.host_errors = [s.errors for s in self.steps if isinstance(s, FallbackStep)] + \
            [s.host.errors for s in self.steps if isinstance(s, LoopStep) and s.host is not None]
        self.plan_pending = False
        # The work area's block is kept between calls, by the dispatcher (``entry.WorkCache``) and
        # by ``run``, where every output is a buffer of its own (no output views the work area).
        self._work_cache = entry.WorkCache()
        self._arena: np.ndarray | None = None
        self._arena_lock = threading.Lock()
        self._keep_arena = self.output_sources() is not None
        self.plan = self._dispatch_plan() if dispatch and entry.available() \
            and any(isinstance(s, NATIVE_STEPS) for s in self.steps) else None
        if any(getattr(getattr(step, "dot", step), "chunks", 1) > 1 for step in self.steps) \
                and not threads.openmp_available():
            threads.start()

    def output_sources(self) -> list[tuple[str, Any]] | None:
        """Where each output of a dispatched run comes from (``Plan.output_sources``)."""
        return self.step_plan.output_sources()

    def raise_host_errors(self) -> None:
        """After a dispatched run: raise the first exception that a host step (a reference rule
        called back, a loop's host call) kept, if any (and forget the others)."""
        if any(self.host_errors):
            errors = [e for kept in self.host_errors for e in kept]
            for kept in self.host_errors:
                kept.clear()
            raise errors[0]

    def dispatch_plan(self) -> np.ndarray | None:
        """The plan for the native dispatcher; one that waited for ``gemm`` is made once it is ready."""
        if self.plan_pending:
            self.plan = self._dispatch_plan()
        return self.plan

    def _dispatch_plan(self) -> np.ndarray | None:
        """The program's plan for the native dispatcher (``entry``), if it can run all of it:
        native kernels and loops, products that are one ``gemm`` call each, FFTs, and views; outputs
        that are fresh arrays, inputs or constants (``output_sources``). Else None (and
        ``plan_pending`` while ``gemm`` compiles)."""
        self.plan_pending = False
        fresh = {slot: j for j, (slot, _) in enumerate(self.allocations)}
        if self.output_sources() is None:
            return None
        if any(isinstance(s, KernelStep) and s.chunks > 1 and not s.team for s in self.steps):
            return None  # split by the Python pool
        if any(isinstance(s, FftStep) and s.chunks > 1 for s in self.steps) and not threads.openmp_available():
            return None
        if not all(s.dot.one_gemm_call for s in self.steps if isinstance(s, DotStep)):
            return None
        # (function, extent, threads, pieces per thread) of each product's and FFT's call
        # (steps may share one product: ``codegen._Lowerer._product``)
        products = {id(s.dot): s.dot.gemm_call() for s in self.steps if isinstance(s, DotStep)}
        calls: dict[int, Any] = {id(s): products[id(s.dot)] if isinstance(s, DotStep) else s.transform.call()
                                 for s in self.steps if isinstance(s, (DotStep, FftStep))}
        if None in calls.values():  # gemm or the FFT is compiling: plan again later
            self.plan_pending = True
            return None
        where = {slot: entry.Plan.argument(k) for k, slot in enumerate(self.in_slots)}
        where.update((slot, entry.Plan.argument(len(self.in_slots) + j)) for slot, j in fresh.items())
        where.update((slot, entry.Plan.work(offset)) for slot, offset, _ in self.arena_views)
        work_bytes, work = self.arena_bytes, 0
        steps: list[tuple] = []  # (function, extent, threads, buffers[, pieces per thread])

        def buffer(a: Any) -> tuple[int, int]:
            if not isinstance(a, int):  # a literal operand (of a loop)
                return entry.Plan.address(data_pointer(a))
            if a not in where:  # a constant of the program
                where[a] = entry.Plan.address(data_pointer(self.template[a]))
            return where[a]

        for step in self.steps:
            if isinstance(step, ViewStep):
                where[step.outs[0]] = buffer(step.ins[0])
                continue
            buffers = [buffer(a) for a in step.ins + step.outs]
            if isinstance(step, FallbackStep):  # called back: the reference rule
                steps.append((ctypes.cast(step.callback, ctypes.c_void_p).value, 1, 1, buffers))
                continue
            if isinstance(step, FftStep):  # fft(x, y, its parameters, its twiddle factors)
                address, extent, chunks, pieces = calls[id(step)]
                buffers += [entry.Plan.address(step.transform.params.ctypes.data),
                            entry.Plan.address(step.transform.twiddles.ctypes.data)]
                steps.append((address, extent, chunks, buffers, pieces))
                work += step.transform.work
                continue
            if isinstance(step, DotStep):  # gemm(A, B, C, its parameters)
                address, extent, chunks, pieces = calls[id(step)]
                params = step.dot.params
                assert params is not None  # (one gemm call: checked above)
                buffers.append(entry.Plan.address(params.ctypes.data))
                steps.append((address, extent, chunks, buffers, pieces))
                work += step.dot.multiply_adds
                continue
            address = ctypes.cast(step.fn, ctypes.c_void_p).value
            if isinstance(step, LoopStep):  # its scratch space: in the work area too
                buffers.append(entry.Plan.work(work_bytes))
                buffers.append(entry.Plan.address(step.table))
                work_bytes += aligned(step.scratch_bytes)
                steps.append((address, 1, 1, buffers))
                work += RELEASE_GIL_WORK  # a loop's work has no bound known here
            else:
                steps.append((address, step.extent, step.chunks, buffers))
                work += step.work
        plan = entry.Plan(len(self.in_slots), len(self.allocations), work_bytes, self._work_cache)
        for s in steps:
            plan.step(*s)
        return plan.array(release_gil=work >= RELEASE_GIL_WORK)

    def run(self, args: list[np.ndarray], reused: Any = ()) -> list[np.ndarray]:
        """The outputs for ``args``; outputs planned over the donated inputs at positions
        ``reused`` (a subset of ``reused_inputs``) are written into those inputs' buffers."""
        env = list(self.template)
        for slot, value in zip(self.in_slots, args):
            env[slot] = value
        taken = {out: args[position] for out, position in self.reuses if position in reused} if reused else {}
        for slot, aval in self.allocations:
            env[slot] = taken[slot] if slot in taken else np.empty(aval.shape, aval.dtype)
        kept = bool(self.arena_bytes) and self._keep_arena and self._arena_lock.acquire(blocking=False)
        try:
            if self.arena_bytes:
                arena = self._arena if kept else None
                if arena is None:
                    arena = np.empty(self.arena_bytes + ALIGNMENT, np.uint8)
                    if kept:
                        self._arena = arena
                base = -arena.ctypes.data % ALIGNMENT
                for slot, offset, aval in self.arena_views:
                    env[slot] = np.ndarray(aval.shape, aval.dtype, arena, base + offset)
            for step in self.steps:
                step.run(env)
            return [env[a] if isinstance(a, int) else a for a in self.out_atoms]
        finally:
            if kept:
                self._arena_lock.release()

    def __str__(self) -> str:
        """Each native step's function, and whether the dispatcher runs the program (``EMBER_DUMP_IR``)."""
        native: list[Any] = [(i, step) for i, step in enumerate(self.steps) if isinstance(step, (KernelStep, LoopStep))]
        lines = [f"  {i}: {step.name} at {ctypes.cast(step.fn, ctypes.c_void_p).value:#x}" for i, step in native]
        dispatched = ("by the native dispatcher in one call" if self.plan is not None else
                      "by the native dispatcher once gemm / the FFT is compiled" if self.plan_pending else
                      "step by step from Python")
        modules = f"{len(self.modules)} module(s) compiled here, {len(self.borrowed)} borrowed"
        return "\n".join([f"{modules}; runs {dispatched}", *lines])
