"""Tiered compilation: a large program's first calls do not wait for LLVM.

When the native compile of a program would take long (by the cost model below) and one run of
it on the reference interpreter is cheaper than that compile, ``compile_jaxpr`` returns a
``TieredExecutable``: its calls run at once on the reference interpreter (the *quick tier*:
NumPy, nothing to compile) while one background thread builds the native executable (passes,
fusion, LLVM); calls switch to the native code when it is ready. Both tiers compute the
reference's results (the native code is tested against the reference, as always).

The first program of a process is tiered whatever its size (if its reference run is cheaper):
its native compile also loads LLVM and the backend (``BACKEND_LOAD_MS``), which the first call of
a small program would otherwise wait for; later small programs are compiled at once.

What is not tiered: programs that donate buffers (donation is about the native buffers), the
reference backend, ahead-of-time compiles (``jit(f).lower(x).compile()`` compiles now),
programs under ``config.tiered_compilation = False``, and programs that an earlier process kept
whole in the disk cache (``ember.backends.cpu.program_cache``: loading them takes milliseconds).

The cost model is deliberately coarse (measured on the 2-core machine of the benchmarks, the
``benchmarks/compile_time.py`` programs): native compile about ``COMPILE_MS_FIXED`` plus
``COMPILE_MS_PER_EQN`` per equation (sub-programs included); a reference run about
``REFERENCE_MS_PER_EQN`` per equation executed (loop bodies times their trip counts; a
``while_loop`` counts ``WHILE_TRIPS`` trips) plus the arithmetic at NumPy's speed: the flops of
products (by BLAS) and convolutions (by ``einsum`` over window views) as the cost model counts
them (``core/traits.py equation_cost``: two per multiply-add).

The compiles run on the ``tiers`` queue of the background service (``core/background.py``):
one at a time (LLVM is serialized anyway), first in, first out, except that a compile some call
waits for goes to the front (``background.hurry``): with an empty disk cache, optax's own tests
queue hundreds of compiles, and a call that waited for its own behind all of them stalled for
15-32 s. At interpreter exit the queue is dropped and the compile in flight finished.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from ember.backends import registry
from ember.backends.cpu_backend import CpuBackend, CpuExecutable
from ember.backends.protocols import CompileOptions, Executable
from ember.backends.reference.executable import ReferenceExecutable
from ember.config import config
from ember.core.background import Job, background
from ember.core.evaluation import between_equations
from ember.core.ir import ClosedJaxpr, Jaxpr, count_eqns, is_effectful, subjaxprs
from ember.core.traits import equation_cost, output_elements
from ember.lax.control_flow import cond_p, scan_p, while_p
from ember.lax.convolution import conv_general_dilated_p
from ember.lax.dot import dot_general_p
from ember.runtime.executable import compile_jaxpr as compile_now

logger = logging.getLogger("ember")

MIN_EQNS = 24  # smaller programs compile in milliseconds: not worth a second tier (but the first one)
# The first native compile of a process also loads LLVM and the backend's modules (llvmlite about
# 20 ms, the modules 25 ms of CPU time on the 2-core host): a first program runs on the reference
# tier, whatever its size, when one run there is cheaper than that and its compile.
BACKEND_LOAD_MS = 45.0
COMPILE_MS_FIXED = 40.0
COMPILE_MS_PER_EQN = 0.5
REFERENCE_MS_PER_EQN = 0.04
REFERENCE_NS_PER_ELEMENT = 2.0  # elementwise and data movement
# The arithmetic that outweighs the elements: products (NumPy's BLAS), and convolutions (0.8-1.7 ns
# measured: 16x64x64x32 and 32x28x28x16, 3x3).
REFERENCE_NS_PER_FLOP = {dot_general_p: 0.05, conv_general_dilated_p: 1.0}
WHILE_TRIPS = 1000
# The share of the wall-clock time since a compile started that the calls on the reference tier may
# take (their own wall-clock time); a call that would take more waits (``TieredExecutable``).
QUICK_TIER_SHARE = 0.1
# And this much time besides: a small program's calls (0.05-0.2 ms on the reference: a process's
# first program, tiered while LLVM loads) cost the compile nothing that counts, and its second call
# waiting for its turn took 1.5 ms.
QUICK_TIER_ALLOWANCE = 0.005


def compile_jaxpr(closed: ClosedJaxpr, name: str = "fn", donated: frozenset[int] = frozenset()) -> Executable:
    """``executable.compile_jaxpr``, tiered where the cost model says the first calls would
    otherwise wait (see the module docstring): on the native CPU backend, whose quick tier is
    the reference interpreter."""
    backend = registry.get()
    if config.tiered_compilation and not donated and isinstance(backend, CpuBackend):
        first = not backend.native_code_loaded()  # (this compile loads LLVM and the backend's modules too)
        if first or count_eqns(closed.jaxpr) >= MIN_EQNS:
            estimate = compile_ms(closed.jaxpr) + (BACKEND_LOAD_MS if first else 0.0)
            reference = reference_ms(closed.jaxpr)
            if reference < estimate:
                # (a program an earlier process kept whole on disk loads faster than one reference
                # run, unless the backend must load first)
                if not first or reference >= BACKEND_LOAD_MS:
                    loaded = backend.compile_if_on_disk(closed, CompileOptions(name, donated))
                    if loaded is not None:
                        return loaded
                return TieredExecutable(closed, name)
    return compile_now(closed, name, donated)


def compile_ms(jaxpr: Jaxpr) -> float:
    """The estimated time of the native compile of ``jaxpr``."""
    return COMPILE_MS_FIXED + COMPILE_MS_PER_EQN * count_eqns(jaxpr)


def reference_ms(jaxpr: Jaxpr, trips: float = 1.0) -> float:
    """The estimated time of one run of ``jaxpr`` on the reference interpreter."""
    ms = 0.0
    for eqn in jaxpr.eqns:
        p = eqn.primitive
        if p is scan_p:
            ms += reference_ms(eqn.params["jaxpr"].jaxpr, trips * eqn.params["length"])
            continue
        if p is while_p:
            ms += reference_ms(eqn.params["body_jaxpr"].jaxpr, trips * WHILE_TRIPS)
            ms += reference_ms(eqn.params["cond_jaxpr"].jaxpr, trips * WHILE_TRIPS)
            continue
        if p is cond_p:
            ms += max(reference_ms(b.jaxpr, trips) for b in eqn.params["branches"])
            continue
        subs = list(subjaxprs(eqn.params))
        if subs:  # calls (jit, custom rules) run their sub-program once
            ms += sum(reference_ms(s, trips) for s in subs)
            continue
        ns = REFERENCE_NS_PER_ELEMENT * output_elements(eqn)
        per_flop = REFERENCE_NS_PER_FLOP.get(p)
        if per_flop is not None:
            ns += per_flop * equation_cost(eqn).flops
        ms += trips * (REFERENCE_MS_PER_EQN + ns * 1e-6)
    return ms


class _Overtaken(BaseException):
    """Raised between two equations of a reference call once its native code is ready (a
    ``BaseException``: no rule's ``except Exception`` keeps it from reaching the call)."""


class TieredExecutable(Executable):
    """Runs on the reference interpreter until the native executable, compiled in the
    background, is ready; then runs that. ``tier``: which one a call runs now.

    The compile has the right of way (``docs/tiers.md``): on a machine of few cores, the reference
    tier's work is taken from the compile, whose Python (passes, LLVM IR) needs the interpreter
    and whose LLVM needs the cores. On the transformer step of ``benchmarks/progress.py``
    (reference 0.2-0.4 s a step, native 18 ms, compile 1.3 s alone), back-to-back reference calls
    delayed the native code to 3.5 s, where waiting for it from the second call on would have
    finished 100 steps. So:

    - the first call runs on the reference, and the compile starts when it returns;
    - the calls on the reference tier, the first included, may take ``QUICK_TIER_SHARE`` of the
      time since the compile started (and ``QUICK_TIER_ALLOWANCE`` besides): a call that would
      go over waits for the native code or, if that is not ready first, for its turn. Their time
      is wall-clock time: their CPU time in the calling thread missed what NumPy's BLAS threads
      took (a small MLP's calls within 10% of its CPU time delayed its compile by up to 0.8 s).
      So the compile is slowed by about that share, however long it takes: a heavy step (the
      transformer's, 0.2 s) waits for the native code from its second call, a light one (a small
      MLP's, 10-20 ms) runs every 0.1-0.2 s meanwhile;
    - a reference call stops where it is, between two equations, once the native code is ready,
      and runs that instead: no call takes much longer than waiting for the native code
      (programs with effects, ``io_callback`` or ``debug.callback``, finish their reference call:
      an effect must not run twice)."""

    def __init__(self, closed: ClosedJaxpr, name: str) -> None:
        self.name = name
        self.in_avals = closed.in_avals
        self.out_avals = closed.out_avals
        self.code = "tiered"
        self.unusable_donations: tuple = ()  # never tiered with donations
        self.quick_calls = 0  # calls that ran to the end on the reference tier
        self.quick_seconds = 0.0  # and their time
        self.spent_seconds = 0.0  # the time of the reference calls made before the native code was ready
        self.compile_started = 0.0  # (``time.perf_counter``)
        self.overtaken_calls = 0  # calls that the native code overtook: stopped on the reference, run natively
        self.native: CpuExecutable | None = None
        self.native_seconds = 0.0
        self.error: BaseException | None = None  # why the native compile failed, if it did
        self._reference: ReferenceExecutable | None = ReferenceExecutable(closed, name)
        self._abandonable = not any(is_effectful(eqn) for eqn in closed.jaxpr.eqns)
        self._job: Job | None = None  # the background compile, once submitted
        self._callbacks: list[Callable[[TieredExecutable], None]] = []  # added before it was
        self._lock = threading.Lock()
        self._closed: ClosedJaxpr | None = closed  # until the background compile is submitted

    @property
    def tier(self) -> str:
        return "native" if self.native is not None else "reference"

    def __call__(self, *args: Any) -> list:
        native = self.native
        if native is not None:
            return native(*args)
        job = self._job
        if job is not None and not job.done:
            turn = self.compile_started + (self.spent_seconds - QUICK_TIER_ALLOWANCE) / QUICK_TIER_SHARE
            if time.perf_counter() < turn:
                self.wait(turn - time.perf_counter())  # (the native code, if it comes first)
        reference = self._reference
        if reference is None:  # (the native executable is set)
            native = self.native
            assert native is not None
            return native(*args)
        start = time.perf_counter()
        outer = between_equations.hook
        between_equations.hook = self._between_equations
        try:
            outs = reference(*args)
        except _Overtaken:
            native = self.native
            assert native is not None
            self.overtaken_calls += 1
            return native(*args)
        finally:
            between_equations.hook = outer
            elapsed = time.perf_counter() - start
            if job is None or not job.done:
                self.spent_seconds += elapsed
            # The compile starts when the first call has returned: both are mostly Python, and
            # sharing the interpreter made the first call (the transformer step's: 0.19 s alone)
            # take 1 s, and the compile no sooner done.
            if self._closed is not None:
                self._start()
        self.quick_calls += 1
        self.quick_seconds += elapsed
        return outs

    def _between_equations(self) -> None:
        if self.native is not None and self._abandonable:
            raise _Overtaken

    def _start(self) -> Job:
        with self._lock:
            closed, self._closed = self._closed, None
            if closed is None:
                assert self._job is not None  # (submitted when ``_closed`` was cleared)
                return self._job
            self.compile_started = time.perf_counter()
            job = self._job = background.submit(background.unique_name(f"tiered compile of {self.name}"),
                                                self._compile, closed, queue="tiers", once=False)
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            self.add_done_callback(callback)
        return job

    @property
    def compiling(self) -> bool:
        job = self._job
        return job is None or not job.done

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background compile (starting it, if no call has; ahead of the compiles
        queued before it, which no one waits for yet); whether it has finished (successfully or not)."""
        job = self._start()
        background.hurry(job)
        return job.wait(timeout)

    def add_done_callback(self, callback: Callable[[TieredExecutable], None]) -> None:
        """Call ``callback(self)`` when the background compile finishes (now, if it has)."""
        with self._lock:
            if self._job is None:
                self._callbacks.append(callback)
                return
        self._job.add_done_callback(lambda _job: callback(self))

    # --- the native executable's interface, once there is one ---
    dialects = CpuExecutable.dialects

    @property
    def fast_runner_pending(self) -> bool:
        """Whether a later call may get the native dispatcher's fast path (so the jit hit path
        asks again): while compiling, or while the native executable's dispatcher is built."""
        native = self.native
        if native is None:
            job = self._job
            return self.error is None and not (job is not None and job.dropped)
        return native.fast_runner_pending

    def fast_runner(self, out_tree: Any) -> Callable[[tuple], Any] | None:
        native = self.native
        return None if native is None else native.fast_runner(out_tree)

    @property
    def interpreted(self) -> bool:
        """Once its native tier is ready, whether that runs no machine code (not yet known before)."""
        native = self.native
        return native is not None and native.interpreted

    def as_text(self, dialect: str) -> str:
        self.wait()
        if self.native is None:
            return super().as_text(dialect)
        return self.native.as_text(dialect)

    def _compile(self, closed: ClosedJaxpr) -> None:
        start = time.perf_counter()
        try:
            native = CpuExecutable(closed, self.name)
        except Exception as error:  # the reference tier goes on serving the calls
            self.error = error
            if background.closing:  # (at exit, threads and atexit hooks can no longer start)
                return
            logger.warning("ember: the native compile of %s failed (%s: %s); it runs on the reference "
                           "interpreter", self.name, type(error).__name__, error)
        else:
            self.native_seconds = time.perf_counter() - start
            self.native = native
            self._reference = None
            if config.log_compiles:
                logger.warning("ember: native code for %s ready after %.1f ms (%s, %d calls ran on the "
                               "reference tier meanwhile); calls switch to it", self.name,
                               self.native_seconds * 1e3, native.code, self.quick_calls)


def wait_for_compiles(timeout: float | None = None) -> bool:
    """Wait until the background compiles started so far have finished; whether they have."""
    return background.drain(timeout)
