"""Lowering a fused program to a list of steps over numbered buffers, and running it.

Steps: a native kernel (one LLVM function per ``fusion`` equation), a native
loop or conditional (one LLVM function per control-flow equation whose body
lowers), a matrix product (``dot``), a decomposition or triangular solve on
LAPACK (``lapack``), a batch of FFTs of rows (``fft``; transforms over several
axes become one per axis, with transposing kernels), a free reshape (a view), or a
fallback equation run by the reference interpreter inside the same executable. The
LLVM functions that a program generates are one module, compiled once; a kernel
or loop that an earlier program of the process compiled at full optimization is
not generated again: the program calls that program's code (see ``lend``).

Buffers: the program's inputs and constants, outputs (fresh arrays each call,
handed to the caller), and temporaries, which share one arena allocated per
call, reusing the space of temporaries that are no longer needed. An output may
instead be written into a donated input's buffer (``jit(..., donate_argnums=...)``) when
that is safe: the input is read by no later step, and by the producing step at
most at the index of the element being written.

A program whose steps are all native also gets a plan for the native dispatcher
(``entry``), which the jit hit path calls to run the whole program in one call.
"""
from __future__ import annotations

import ctypes
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.backends.cpu import control_flow, dot, entry, fft, jit, kernel, lapack, lowering, threads
from ember.backends.cpu.entry import data_pointer
from ember.backends.cpu.expansions import expansions
from ember.backends.cpu.index_rules import index_rules
from ember.backends.reference import impl_rules, to_numpy
from ember.compiler.fusion import FUSIBLE, fusion_p
from ember.core.avals import ShapedArray
from ember.core.caches import register_cache
from ember.core.fingerprint import fingerprint
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var, count_eqns
from ember.lax import elementwise as ew, indexing as ix, reductions, shapes as sh
from ember.lax.dot import dot_general_p
from ember.lax.fft import fft_p

ALIGNMENT = 64  # bytes: a cache line, and the widest vector (AVX-512)
# Programs whose kernels each touch at most this many elements (and that have no loops) are
# compiled without optimization: compiling is then most of their cost (see ``jit``).
QUICK_WORK = 256
# Programs of at least this many kernels and loops have their new functions compiled in parts
# at the same time (``jit.compile_many``): an extra module costs LLVM about 7 ms, one kernel
# 15-45 ms, and two parts of a large program compile in 0.53-0.60x the time of one (2 cores).
SPLIT_FUNCTIONS = 4
# Programs of at least this many equations (sub-programs included) start the compile workers
# before generating their IR (0.18 s to start: about the IR time of such a program); smaller
# ones use the workers if they are running (``jit.compile_many`` starts them for large modules).
START_WORKERS_EQNS = 200
# Products up to this many multiply-adds are computed by a fused loop (no call of the blocked
# product, and their bias / activation epilogue in the same kernel); larger ones call ``gemm``.
SMALL_DOT = 1 << 15
# Programs whose steps touch at least this many elements release the GIL while they run
# (for less, taking the GIL back costs more than other Python threads gain).
RELEASE_GIL_WORK = 1 << 16


def can_fuse(eqn: Eqn, in_loop: bool = False) -> bool:
    """The fusion predicate of this backend: fusible, and lowerable for these dtypes. In loop
    bodies a larger product is fused too where the loop cannot call ``gemm`` on its operands as
    they are (``dot.gemm_layout``), so that the loop is still one native function."""
    p = eqn.primitive
    if not jit.float16_supported() and any(a.aval.dtype == dtypes.float16 for a in eqn.invars + eqn.outvars):
        return False
    if any(a.aval.dtype in dtypes.FLOAT8 for a in eqn.invars + eqn.outvars):
        return False  # (float8 equations run on the reference interpreter: see ``lowering``)
    if any(a.aval.dtype in dtypes.COMPLEX for a in eqn.invars + eqn.outvars):
        if not _fuses_complex(eqn):
            return False
        if p in ew.ELEMENTWISE:
            return True
    if p is dot_general_p:
        if _multiply_adds(eqn) <= SMALL_DOT or not dot.blocked_pays(eqn):
            return True
        return in_loop and dot.gemm_layout(eqn) is None
    if p in index_rules:  # what the kernel generator reads through: FUSIBLE's and dynamic slices
        return True
    if p in kernel.SCANS or p in kernel.SCATTERS:  # (as kernels' roots: see ``fuse``)
        return lowering.can_lower(ew.max_p, [eqn.invars[0].aval.dtype])
    if p is ew.bitcast_convert_type_p:
        return lowering.bitcasts_natively(eqn.invars[0].aval.dtype, eqn.outvars[0].aval.dtype)
    if p not in FUSIBLE:
        return False
    return lowering.can_lower(p, [a.aval.dtype for a in eqn.invars])


# What kernels compute on complex elements besides elementwise math (``lowering.complex_rules``):
# sums and products (reductions, running, scattered), products of matrices, and every index rule
# but the ordering ones (complex max / min reductions and running ones only in the shapes that XLA
# folds in order: ``expansions`` rewrites the others into these).
_COMPLEX_ACCUMULATIONS = {reductions.reduce_sum_p, reductions.reduce_prod_p, reductions.cumsum_p,
                          reductions.cumprod_p, ix.scatter_p, ix.scatter_add_p, ix.scatter_sub_p, ix.scatter_mul_p,
                          dot_general_p}
_COMPLEX_REFUSED = {reductions.argmax_p, reductions.argmin_p, ix.scatter_min_p, ix.scatter_max_p}


def _fuses_complex(eqn: Eqn) -> bool:
    p = eqn.primitive
    if p in _COMPLEX_ACCUMULATIONS:
        return True
    if p in (reductions.reduce_max_p, reductions.reduce_min_p, reductions.cummax_p, reductions.cummin_p):
        return not expansions[p].applies(*(a.aval for a in eqn.invars), **eqn.params)  # (what they leave)
    if p in index_rules:
        return p not in _COMPLEX_REFUSED
    return p in ew.ELEMENTWISE and lowering.lowers_complex(p)


def can_fuse_in_loop(eqn: Eqn) -> bool:
    return can_fuse(eqn, in_loop=True)


def _multiply_adds(eqn: Eqn) -> int:
    (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval
    return eqn.outvars[0].aval.size * int(np.prod([lhs.shape[d] for d in lhs_contract], dtype=np.int64))


# --- steps ---------------------------------------------------------------------------------
# ``ins`` hold slot numbers, or NumPy values for literals; ``outs`` slot numbers. Steps whose
# ``planned`` is true write into buffers that the program allocates for them.
def _pointers(env: list, ins: list, outs: list, extra: list = ()) -> ctypes.Array:
    """The buffers' addresses; ``extra`` holds arrays or addresses."""
    buffers = [env[a] if isinstance(a, int) else a for a in ins] + [env[o] for o in outs]
    addresses = [*map(data_pointer, buffers), *(e if isinstance(e, int) else data_pointer(e) for e in extra)]
    return (ctypes.c_void_p * len(addresses))(*addresses)


@dataclass
class KernelStep:
    name: str
    fn: Callable
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
    fn: Callable
    ins: list
    outs: list[int]
    scratch_bytes: int
    table: int  # the table's address
    host: control_flow.HostCalls | None = None  # a loop's host calls (their table is ``table``)
    planned = True

    def run(self, env: list) -> None:
        scratch = np.empty(self.scratch_bytes + ALIGNMENT, np.uint8)
        aligned = scratch[-scratch.ctypes.data % ALIGNMENT:]
        self.fn(_pointers(env, self.ins, self.outs, [aligned, self.table]), 0, 1)
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


# A step's C signature: step(buffers, begin, end).
STEP_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64, ctypes.c_int64)


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



def contiguous(value: Any, aval: ShapedArray) -> np.ndarray:
    """A C-contiguous array of exactly ``aval``'s shape and dtype (kernels index it linearly)."""
    value = np.asarray(value)
    if value.dtype != aval.dtype:
        value = value.astype(aval.dtype)
    if value.shape != aval.shape:
        value = np.broadcast_to(value, aval.shape)
    return value if value.flags.c_contiguous else value.copy(order="C")


@dataclass
class Report:
    """What compiled natively and what fell back, and how long each stage took (seconds)."""
    kernels: list[str] = field(default_factory=list)
    loops: list[str] = field(default_factory=list)
    contractions: int = 0
    library_calls: list[str] = field(default_factory=list)  # LAPACK / BLAS (``lapack``)
    transforms: int = 0  # fft equations on the native FFT (``fft``)
    host_calls: list[str] = field(default_factory=list)  # equations that native loops run in Python
    fallbacks: list[str] = field(default_factory=list)
    times: dict[str, float] = field(default_factory=dict)
    code: str = "none"  # where the machine code came from (``jit.compile_or_reuse``); "none": no native code
    # Names (in ``kernels`` / ``loops``) of the functions that earlier programs compiled and this one calls.
    compiled_before: set[str] = field(default_factory=set)


# --- functions shared between programs ---------------------------------------------------------
@dataclass(frozen=True)
class LentFunction:
    """A kernel or loop function that a compiled module holds."""
    name: str  # in its module
    size: Any  # a kernel's extent; a loop's (scratch bytes, host-call equations); a LAPACK call's scratch bytes
    fn: Callable
    module: weakref.ref  # to its ``jit.CompiledModule``
    refs: list  # what its fingerprint refers to by identity (kept so that no id is reused meanwhile)


# The functions of modules compiled at full optimization, by the fingerprint of what they compute
# (see ``_kernel_key``, ``_equation_key``). Entries refer to their module weakly: a module lives as
# long as ``jit._compiled`` or a program keeps it, and its entries go with it, so this holds no
# code alive, its size is bounded by the modules alive, and ``ember.clear_caches`` (which drops
# those) empties it; ``clear`` empties it at once. Modules at O0 (``quick``) lend nothing.
_lent: dict[str, LentFunction] = {}
_freed: list[str] = []  # keys whose module was freed (appended by weakref callbacks: no lock there)
_lent_lock = threading.Lock()


def _prune() -> None:
    """Drop the entries of freed modules (``_lent_lock`` held)."""
    while _freed:
        key = _freed.pop()
        entry = _lent.get(key)
        if entry is not None and entry.module() is None:
            del _lent[key]


def borrow(key: str) -> tuple[LentFunction, Any] | None:
    """The function registered under ``key`` and its module (held by the caller from now on)."""
    with _lent_lock:
        _prune()
        entry = _lent.get(key)
        module = entry.module() if entry is not None else None
        return None if module is None else (entry, module)


def lend(compiled: Any, functions: dict[str, tuple[str, int, Callable, list]]) -> None:
    """Register the functions of a module that is compiled (so borrowers get finished code):
    key -> (name, size, function pointer, fingerprint refs). Keys registered meanwhile by
    another thread (which compiled the same function too) keep their entry."""
    if compiled.quick or not functions:
        return
    keys = tuple(functions)
    module = weakref.ref(compiled, lambda _ref: _freed.extend(keys))
    with _lent_lock:
        _prune()
        for key, (name, size, fn, refs) in functions.items():
            entry = _lent.get(key)
            if entry is None or entry.module() is None:
                _lent[key] = LentFunction(name, size, fn, module, refs)


def clear() -> None:
    """Forget the functions lent (programs that borrowed them keep their modules)."""
    with _lent_lock:
        _lent.clear()
        _freed.clear()


register_cache("cpu: functions lent to equal kernels", clear, lambda: len(_lent))


def _kernel_key(flat: Jaxpr) -> tuple[str, list]:
    """A kernel's code depends on its (flattened) sub-program alone: the generator reads no
    config flag (those that matter act before, on the jaxpr: dtypes, passes), and the host and
    the float16 helpers are the process's."""
    return fingerprint(flat, "kernel")


def _equation_key(eqn: Eqn, kind: str) -> tuple[str, list]:
    """A loop's or LAPACK call's code depends on its equation alone (sub-programs, params,
    operand types and literal values, and which operands are the same variable: each position
    gets a pointer)."""
    invars = list({id(v): v for v in eqn.invars if isinstance(v, Var)}.values())
    return fingerprint(Jaxpr([], invars, [eqn], list(eqn.outvars)), kind)


# --- building the program ----------------------------------------------------------------------
class Program:
    """A fused ClosedJaxpr lowered to steps; ``run(args)`` returns the output NumPy arrays.

    ``compiled``: the module of the functions generated for this program, None if it generated
    none (all of its native functions, if any, were compiled before: its LLVM IR is then "");
    ``borrowed``: the modules of earlier programs whose functions it calls, kept alive with it."""

    def __init__(self, closed: ClosedJaxpr, name: str, report: Report, donated: frozenset[int] = frozenset()) -> None:
        jaxpr = closed.jaxpr
        self.report = report
        self.slots: dict[int, int] = {}
        self.slot_avals: dict[int, ShapedArray] = {}
        self.template: list[Any] = []
        for v, c in zip(jaxpr.constvars, closed.consts):
            self.template.append(contiguous(to_numpy(c, v.aval), v.aval))
            self.slots[id(v)] = len(self.template) - 1
        self.constant_slots = [True] * len(self.template)  # (the slots so far: the program's constants)
        self.in_slots = [self._slot(v) for v in jaxpr.invars]
        self.in_avals = [v.aval for v in jaxpr.invars]
        self.steps: list[Any] = []
        self.allocations: list[tuple[int, ShapedArray]] = []  # (slot, aval) of per-call outputs
        self.pointwise_reads: dict[int, set[int]] = {}  # kernel step -> slots it reads only in place
        start = time.perf_counter()
        native: list = []
        self._functions: dict[str, tuple] = {}  # fingerprint -> (name, size, function pointer or None)
        self._generated: dict[str, tuple[list, list, int]] = {}  # of those generated here: (steps, refs, part)
        self.compiled = None
        self.modules: list = []  # the compiled modules of the functions generated here
        self.borrowed: list = []
        # The functions generated here go into parts compiled at the same time (``jit.compile_many``)
        # when there is enough to compile; each new function into the part with the least so far.
        # Part 0 holds the kernels that touch few elements (``QUICK_WORK``), compiled unoptimized.
        functions = sum(e.primitive is fusion_p or e.primitive in control_flow.CONTROL_FLOW for e in jaxpr.eqns)
        parts = jit.parallel_compiles() if functions >= SPLIT_FUNCTIONS else 1
        if parts > 1 and count_eqns(jaxpr) >= START_WORKERS_EQNS:
            jit.start_workers()  # (ready, or nearly, by the time the IR is)
        self._parts = [jit.new_module(name)] + [jit.new_module(name if i == 0 else f"{name}_{i}")
                                                for i in range(parts)]
        self._part_weights = [0] * len(self._parts)
        for eqn in jaxpr.eqns:
            self._lower(eqn, native)
        self.out_atoms = [self._slot(a) if isinstance(a, Var) else np.asarray(a.val, a.aval.dtype)
                          for a in jaxpr.outvars]
        last_use = self._last_uses()
        self._plan_memory(last_use)
        self._plan_donation(donated, last_use)
        report.times["LLVM IR"] = time.perf_counter() - start
        if self._generated:
            start = time.perf_counter()
            self._compile()
            report.times["LLVM opt+codegen"] = time.perf_counter() - start
        elif native:
            report.code = "reused"  # all of it compiled before: no compile
        # The dispatcher runs programs of kernels, loops and products; a product's plan may wait for
        # ``gemm`` to compile (``plan_pending``: ``dispatch_plan`` makes it then).
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
        self.plan = self._dispatch_plan() if (native or any(isinstance(s, (DotStep, FftStep)) for s in self.steps)) \
            and not donated and entry.available() else None
        if not threads.openmp_available() and any(getattr(getattr(step, "dot", step), "chunks", 1) > 1
                                                  for step in self.steps):
            threads.start()

    def _slot(self, v: Var) -> int:
        slot = self.slots.get(id(v))
        if slot is None:
            slot = self.slots[id(v)] = len(self.template)
            self.template.append(None)
            self.slot_avals[slot] = v.aval
        return slot

    def _atom(self, a: Any) -> Any:
        return self._slot(a) if isinstance(a, Var) else np.asarray(a.val, dtype=a.aval.dtype)

    def _compile(self) -> None:
        """Compile the parts that have functions (at once: ``jit.compile_many``) and give the
        steps their functions. The kernels of part 0 are at O0 (``quick``), unless the program
        generated no other function: then they are at O2, as code that others may borrow."""
        used = sorted({part for _, _, part in self._generated.values()})
        quick = [0] if used[0] == 0 and len(used) > 1 else []
        optimized = [i for i in used if i not in quick]
        # A program of few elements only: all of it unoptimized (about 2 ms of LLVM, not 7-15).
        all_small = used == [0]
        results = jit.compile_many([self._parts[i] for i in optimized], all_small)
        if quick:
            results.append(jit.compile_or_reuse(self._parts[0], True))
        compiled = dict(zip(optimized + quick, (module for module, _ in results)))
        codes = {code for _, code in results}
        self.report.code = next(code for code in ("compiled", "disk", "reused") if code in codes)
        self.modules = [compiled[i] for i in optimized + quick]
        self.compiled = self.modules[0]
        lent: dict[int, dict] = {i: {} for i in compiled}
        for key, (steps, refs, part) in self._generated.items():
            fn = compiled[part].kernel(steps[0].name)
            for step in steps:
                step.fn = fn
            lent[part][key] = (steps[0].name, self._functions[key][1], fn, refs)
        for part, functions in lent.items():
            lend(compiled[part], functions)  # compiled: from now on others may call it

    def _function(self, key: str, refs: list, name: str, generate: Callable[[Any], int | None],
                  weight: int, small: bool = False) -> tuple | None:
        """(name, size, function pointer) of the function that computes what ``key`` says: one
        of this program's (generated once), else one an earlier program compiled, else the one
        that ``generate(module)`` emits into one of the parts (it returns its size, or None if it
        cannot: then so does this): part 0 if ``small``, else the part with the least ``weight``
        (equations) so far. The pointer is None for the parts': ``_compile`` fills it in."""
        known = self._functions.get(key)
        if known is None:
            lent = borrow(key)
            if lent is not None:
                entry, module = lent
                if not any(m is module for m in self.borrowed):
                    self.borrowed.append(module)
                known = (name, entry.size, entry.fn)
                self.report.compiled_before.add(name)
            else:
                part = 0 if small else min(range(1, len(self._parts)), key=self._part_weights.__getitem__)
                size = generate(self._parts[part])
                if size is None:
                    return None
                self._part_weights[part] += weight
                known = (name, size, None)
                self._generated[key] = ([], refs, part)
            self._functions[key] = known
        return known

    def _lower(self, eqn: Eqn, native: list) -> None:
        """Append the step that runs ``eqn``; native ones also to ``native``, and those whose
        function is generated here (filled in once the module is compiled) to ``_generated``."""
        p = eqn.primitive
        ins = [self._atom(a) for a in eqn.invars]
        outs = [self._slot(v) for v in eqn.outvars]
        name = f"f{len(native)}_{eqn.params.get('name', p.name)}"
        parts = _split_full_reduction(eqn) if p is fusion_p else fft.axis_by_axis(eqn) if p is fft_p else None
        if parts:  # (lowered one by one)
            for part in parts:
                self._lower(part, native)
            return
        key = None
        if p is fusion_p and kernel.is_view(eqn):
            step = ViewStep(ins, outs, eqn.outvars[0].aval.shape)
        elif p is fusion_p:
            sub = eqn.params["jaxpr"].jaxpr
            flat = _flattened(sub)
            # A kernel that computes what another one computes is that kernel: generated once.
            key, refs = _kernel_key(flat)

            def build(module: Any) -> int:
                builder = kernel.KernelBuilder(module, name, flat, versioned=True)
                builder.build()
                return builder.extent
            work = _work(sub)
            name, extent, fn = self._function(key, refs, name, build, len(flat.eqns), work <= QUICK_WORK)
            chunks, team = threads.kernel_chunks(extent, work)
            step = KernelStep(name, fn, ins, outs, extent, work, chunks, team)
            pointwise = _read_pointwise(sub)
            self.pointwise_reads[len(self.steps)] = {slot for slot, v in zip(ins, sub.invars)
                                                     if isinstance(slot, int) and id(v) in pointwise}
            self.report.kernels.append(name)
        elif p in control_flow.CONTROL_FLOW and (loop := self._loop(eqn, name)) is not None:
            key, (name, (scratch_bytes, host_eqns), fn) = loop
            host = control_flow.HostCalls(eqn, host_eqns) if host_eqns else None
            table = host.address if host else control_flow.function_table(eqn)
            step = LoopStep(name, fn, ins, outs, scratch_bytes, table, host)
            self.report.loops.append(name)
            self.report.host_calls.extend(e.primitive.name for e in host_eqns)
        elif p is dot_general_p and dot.lowers_natively(eqn):
            step = DotStep(dot.DotGeneral(eqn), ins, outs)
            self.report.contractions += 1
        elif fft.applies(eqn):
            step = FftStep(fft.RowTransform(eqn), ins, outs)
            self.report.transforms += 1
        elif lapack.lowers(eqn):
            key, refs = _equation_key(eqn, "lapack")

            def build(module: Any) -> int:
                return lapack.LapackFunction(module, name, eqn).scratch_bytes
            name, scratch_bytes, fn = self._function(key, refs, name, build, 1)
            step = LoopStep(name, fn, ins, outs, scratch_bytes, lapack.routine_table(eqn))
            self.report.library_calls.append(p.name)
        else:
            step = FallbackStep(eqn, ins, outs)
            self.report.fallbacks.append(p.name)
        self.steps.append(step)
        if isinstance(step, (KernelStep, LoopStep)):
            native.append(step)
            if key in self._generated:
                self._generated[key][0].append(step)

    def _loop(self, eqn: Eqn, name: str) -> tuple[str, tuple] | None:
        """(key, ``_function``'s triple) of a control-flow equation's function; None if it does
        not lower natively (an equation compiled before did: it is not prepared again)."""
        key, refs = _equation_key(eqn, "loop")

        def build(module: Any) -> tuple[int, tuple] | None:
            subs = control_flow.prepare(eqn, can_fuse_in_loop)
            if not subs:
                return None
            loop = control_flow.LoopFunction(module, name, eqn, can_fuse_in_loop, subs)
            return loop.scratch_bytes, tuple(loop.host_calls)
        function = self._function(key, refs, name, build, count_eqns(Jaxpr([], [], [eqn], [])))
        return None if function is None else (key, function)

    def _last_uses(self) -> dict[int, int]:
        """The last step reading each slot; ``len(steps)`` for slots read by steps that may keep
        a view of them (fallbacks, views) and for program outputs."""
        end = len(self.steps)
        last_use: dict[int, int] = {s: end for s in self.out_atoms if isinstance(s, int)}
        for i, step in enumerate(self.steps):
            for s in step.ins:
                if isinstance(s, int):
                    last_use[s] = max(last_use.get(s, i), i) if step.planned else end
        return last_use

    def _plan_memory(self, last_use: dict[int, int]) -> None:
        """Outputs of planned steps: fresh arrays for program outputs, arena space for
        temporaries, reused once their last reader has run. Temporaries read by steps that
        may keep a view of them live to the end."""
        outputs = {s for s in self.out_atoms if isinstance(s, int)}
        dying: dict[int, list[int]] = {}
        for s, i in last_use.items():
            dying.setdefault(i, []).append(s)
        free: dict[int, list[int]] = {}  # block size -> offsets of free blocks
        blocks: dict[int, tuple[int, int]] = {}  # slot -> (offset, size)
        self.arena_views: list[tuple[int, int, ShapedArray]] = []  # (slot, offset, aval)
        self.arena_bytes = 0
        for i, step in enumerate(self.steps):
            for out in step.outs if step.planned else ():
                aval = self.slot_avals[out]
                if out in outputs:
                    self.allocations.append((out, aval))
                    continue
                size = -(-max(aval.size * aval.dtype.itemsize, 1) // ALIGNMENT) * ALIGNMENT
                if free.get(size):
                    offset = free[size].pop()
                else:
                    offset, self.arena_bytes = self.arena_bytes, self.arena_bytes + size
                blocks[out] = (offset, size)
                self.arena_views.append((out, offset, aval))
            for s in dying.get(i, []):
                if s in blocks:
                    free.setdefault(blocks[s][1], []).append(blocks[s][0])

    def _plan_donation(self, donated: frozenset[int], last_use: dict[int, int]) -> None:
        """``reuses``: (output slot, input position) pairs whose output may be written into the
        donated input's buffer; ``unusable_donations``: avals of donated inputs that no output
        can take (inputs returned as they are count as used: the output is their buffer)."""
        producer = {out: i for i, step in enumerate(self.steps) if step.planned for out in step.outs}
        free_outputs = [slot for slot, _ in self.allocations]
        returned = {a for a in self.out_atoms if isinstance(a, int)}
        self.reuses: list[tuple[int, int]] = []
        self.unusable_donations: list[ShapedArray] = []
        for position in sorted(donated):
            slot, aval = self.in_slots[position], self.in_avals[position]
            if slot in returned:
                continue
            fits = (out for out in free_outputs if self._may_write_over(out, slot, producer[out], last_use))
            out = next(fits, None)
            if out is None:
                self.unusable_donations.append(aval)
                continue
            free_outputs.remove(out)
            self.reuses.append((out, position))
        self.reused_inputs = frozenset(position for _, position in self.reuses)

    def _may_write_over(self, out: int, slot: int, step: int, last_use: dict[int, int]) -> bool:
        """Whether step ``step`` may write output ``out`` into input ``slot``'s buffer."""
        a, b = self.slot_avals[out], self.slot_avals[slot]
        if (a.shape, a.dtype) != (b.shape, b.dtype):
            return False
        last = last_use.get(slot, -1)
        return last < step or (last == step and slot in self.pointwise_reads.get(step, ()))

    def raise_host_errors(self) -> None:
        """After a dispatched run: raise the first exception that a host step (a reference rule
        called back, a loop's host call) kept, if any (and forget the others)."""
        if any(self.host_errors):
            errors = [e for kept in self.host_errors for e in kept]
            for kept in self.host_errors:
                kept.clear()
            raise errors[0]

    def output_sources(self) -> list[tuple[str, Any]] | None:
        """Where each output of a dispatched run comes from: ``("fresh", j)`` the ``j``-th fresh
        output buffer, ``("input", k)`` the ``k``-th argument itself, ``("constant", value)`` a
        literal or a constant of the program; None if an output is anything else (a view)."""
        fresh = {slot: j for j, (slot, _) in enumerate(self.allocations)}
        inputs = {slot: k for k, slot in enumerate(self.in_slots)}
        sources: list[tuple[str, Any]] = []
        for a in self.out_atoms:
            if not isinstance(a, int):
                sources.append(("constant", a))
            elif a in fresh:
                sources.append(("fresh", fresh[a]))
            elif a in inputs:
                sources.append(("input", inputs[a]))
            elif a < len(self.constant_slots) and self.constant_slots[a]:
                sources.append(("constant", self.template[a]))
            else:
                return None
        return sources

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
        calls = {id(s): s.dot.gemm_call() if isinstance(s, DotStep) else s.transform.call()
                 for s in self.steps if isinstance(s, (DotStep, FftStep))}
        if None in calls.values():  # gemm or the FFT is compiling: plan again later
            self.plan_pending = True
            return None
        where = {slot: entry.Plan.argument(k) for k, slot in enumerate(self.in_slots)}
        where.update((slot, entry.Plan.argument(len(self.in_slots) + j)) for slot, j in fresh.items())
        where.update((slot, entry.Plan.work(offset)) for slot, offset, _ in self.arena_views)
        work_bytes, work, steps = self.arena_bytes, 0, []

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
                buffers.append(entry.Plan.address(step.dot.params.ctypes.data))
                steps.append((address, extent, chunks, buffers, pieces))
                work += step.dot.multiply_adds
                continue
            address = ctypes.cast(step.fn, ctypes.c_void_p).value
            if isinstance(step, LoopStep):  # its scratch space: in the work area too
                buffers.append(entry.Plan.work(work_bytes))
                buffers.append(entry.Plan.address(step.table))
                work_bytes += -(-max(step.scratch_bytes, 1) // ALIGNMENT) * ALIGNMENT
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


# A reduction of a whole array to one value is computed in ``PIECES`` parts, which threads share,
# then the parts are combined, when the array has at least ``SPLIT_REDUCTION`` elements.
PIECES = (64, 48, 32, 16, 8)
SPLIT_REDUCTION = 1 << 20


def _split_full_reduction(eqn: Eqn) -> list[Eqn] | None:
    """Two kernels for a kernel that reduces a large array to a scalar: partial results over
    ``p`` contiguous pieces (in parallel), then their reduction; None where that does not apply.
    Half-precision types are left alone: the reference rounds their sums only once."""
    sub = eqn.params["jaxpr"].jaxpr
    root = sub.eqns[-1]
    if root.primitive not in reductions.REDUCTIONS or root.outvars[0].aval.shape or threads.thread_count() < 2:
        return None
    operand = root.invars[0].aval
    pieces = next((p for p in PIECES if operand.size % p == 0), None)
    if operand.size < SPLIT_REDUCTION or operand.dtype in lowering.HALF or pieces is None:
        return None
    total = root.outvars[0].aval
    reshaped = Var(operand._replace(shape=(pieces, operand.size // pieces)))
    partial = Var(total._replace(shape=(pieces,)))
    parts = Jaxpr([], sub.invars, sub.eqns[:-1] + [
        Eqn(sh.reshape_p, [root.invars[0]], {"new_sizes": reshaped.aval.shape, "dimensions": None}, [reshaped]),
        Eqn(root.primitive, [reshaped], {"axes": (1,)}, [partial])], [partial])
    partials, result = Var(partial.aval), Var(total)
    combine = Jaxpr([], [partials], [Eqn(root.primitive, [partials], {"axes": (0,)}, [result])], [result])
    name, between = eqn.params["name"], Var(partial.aval)
    return [Eqn(fusion_p, eqn.invars, {"jaxpr": ClosedJaxpr(parts, []), "name": f"{name}_parts"}, [between]),
            Eqn(fusion_p, [between], {"jaxpr": ClosedJaxpr(combine, []), "name": f"{name}_total"}, eqn.outvars)]


def _flattened(jaxpr: Jaxpr) -> Jaxpr:
    """A purely elementwise kernel (every value of the output's shape, or a scalar) as the same
    kernel over the flat buffers: its code then depends on the number of elements only, and
    that is an argument (the loop's end), so kernels that differ only in their shapes (rank 0
    included) are the same code, compiled once. Other kernels are returned as they are."""
    shape = jaxpr.outvars[0].aval.shape
    if len(shape) == 1 or not all(e.primitive in ew.ELEMENTWISE for e in jaxpr.eqns):
        return jaxpr
    flat: dict[int, Var] = {}

    def remap(a: Any) -> Any:
        if not isinstance(a, Var):
            return a
        if a.aval.shape != shape:
            if a.aval.shape:
                raise _NotFlat
            return a  # a scalar operand
        if id(a) not in flat:
            flat[id(a)] = Var(a.aval._replace(shape=(a.aval.size,)))
        return flat[id(a)]

    try:
        invars = [remap(v) for v in jaxpr.invars]
        eqns = [Eqn(e.primitive, [remap(a) for a in e.invars], e.params, [remap(v) for v in e.outvars])
                for e in jaxpr.eqns]
        return Jaxpr([], invars, eqns, [remap(a) for a in jaxpr.outvars])
    except _NotFlat:
        return jaxpr


class _NotFlat(Exception):
    pass


def _read_pointwise(jaxpr: Jaxpr) -> set[int]:
    """The ids of the inputs that a kernel reads only at the index of the element it computes:
    everything computed from them is elementwise over the output's shape (no broadcast,
    remapping, reduction). One pass backwards: a variable is read elsewhere if an equation that
    reads it is not elementwise of that shape, or computes a variable that is read elsewhere."""
    shape = jaxpr.outvars[0].aval.shape
    elsewhere: set[int] = set()
    for eqn in reversed(jaxpr.eqns):
        if (eqn.primitive not in ew.ELEMENTWISE or any(o.aval.shape != shape for o in eqn.outvars)
                or any(id(o) in elsewhere for o in eqn.outvars)):
            elsewhere.update(id(a) for a in eqn.invars if isinstance(a, Var))
    return {id(v) for v in jaxpr.invars if v.aval.shape == shape and id(v) not in elsewhere}


def _work(jaxpr: Jaxpr) -> int:
    """Elements a kernel touches (for the decision to split it across threads)."""
    total = jaxpr.outvars[0].aval.size
    for e in jaxpr.eqns:
        if e.primitive in reductions.REDUCTIONS or e.primitive in (reductions.argmax_p, reductions.argmin_p) \
                or e.primitive in kernel.SCANS or e.primitive in kernel.SCATTERS:
            total += e.invars[-1].aval.size  # (a scatter's updates)
        elif e.primitive is dot_general_p:
            total += _multiply_adds(e)
    return total
