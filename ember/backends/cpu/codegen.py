"""Code generation: a fused program's steps and the native functions they call.

The plan stage (``lower``) lowers each equation of the fused program to a step (see ``runner``)
over the slots of a ``Plan``: a kernel per ``fusion`` equation, a loop per control-flow
equation whose body lowers, a product, an FFT, a LAPACK call, or a fallback on the reference
interpreter. The code generation stage (``Code.generate``) then emits the LLVM IR of the native
functions that are new, into modules ("parts") that ``Code.compile`` compiles at the same time;
``Code.link`` gives the steps their functions.

Kernel sharing: a kernel or loop that an earlier program of the process compiled at full
optimization is not generated again: the program calls that program's code (``lend`` /
``borrow``, keyed by the fingerprint of what the function computes), and keeps its module alive.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.backends.cpu import control_flow, dot, fft, jit, kernel, lapack, lowering, threads
from ember.backends.cpu.expansions import expansions
from ember.backends.cpu.index_rules import index_rules
from ember.backends.cpu.plan import Plan
from ember.backends.cpu.runner import UNLINKED, DotStep, FallbackStep, FftStep, KernelStep, LoopStep, Program, ViewStep
from ember.compiler.fusion import FUSIBLE, fusion_p
from ember.core.caches import register_cache
from ember.core.fingerprint import fingerprint
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var, count_eqns
from ember.lax import elementwise as ew, indexing as ix, reductions, shapes as sh
from ember.lax.dot import dot_general_p
from ember.lax.fft import fft_p

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


@dataclass
class Report:
    """What compiled natively and what fell back, and how long each stage took (seconds, by its
    name in ``STAGES``; a stage that had nothing to do is not there)."""
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
    # What the disk cache of whole programs did (``program_cache``): loaded, stored, or why neither.
    program_cache: str = ""


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
        if entry is None:
            return None
        module = entry.module()
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


# --- the plan stage: equations to steps --------------------------------------------------------
@dataclass(eq=False)
class Function:
    """A native function that steps call: compiled before (``build`` is None: borrowed, its
    ``fn`` known) or generated for this program (``build(module)`` emits it and returns its
    ``size``; ``Code.link`` sets ``fn``). ``callers``: (step, finish) pairs, ``finish(step, size)``
    completing the step once the size is known."""
    name: str
    key: str
    refs: list  # what the key's fingerprint refers to by identity
    build: Callable[[Any], Any] | None
    weight: int  # equations, for balancing the parts
    small: bool  # touches few elements: in part 0, compiled unoptimized (``QUICK_WORK``)
    size: Any = None
    fn: Callable | None = None
    part: int = 0
    callers: list[tuple[Any, Callable[[Any, Any], None]]] = field(default_factory=list)

    def call(self, step: Any, finish: Callable[[Any, Any], None]) -> None:
        """Let ``step`` call this function (completed by ``finish`` now, or once generated)."""
        if self.build is None:
            step.fn = self.fn
            finish(step, self.size)
        else:
            self.callers.append((step, finish))


class Code:
    """The native functions of one program: ``functions`` by key, borrowed or generated here;
    ``modules`` once compiled; ``borrowed``, the modules of earlier programs it calls."""

    def __init__(self, name: str, report: Report) -> None:
        self.name, self.report = name, report
        self.functions: dict[str, Function] = {}
        self.parts: list = []  # the LLVM modules the new functions go into
        self.modules: list = []
        self.borrowed: list = []

    def function(self, key: str, refs: list, name: str, build: Callable[[Any], Any], weight: int,
                 small: bool = False, prepare: Callable[[], bool] | None = None) -> Function | None:
        """The function that computes what ``key`` says: one of this program's (generated once),
        else one an earlier program compiled, else a new one that ``build`` will emit, if
        ``prepare()`` (what it needs first) says it can: else None."""
        known = self.functions.get(key)
        if known is None:
            lent = borrow(key)
            if lent is None:
                if prepare is not None and not prepare():
                    return None
                known = Function(name, key, refs, build, weight, small)
            else:
                entry, module = lent
                if not any(m is module for m in self.borrowed):
                    self.borrowed.append(module)
                known = Function(entry.name, key, refs, None, weight, small, entry.size, entry.fn)
                self.report.compiled_before.add(entry.name)
            self.functions[key] = known
        return known

    @property
    def new(self) -> list[Function]:
        return [f for f in self.functions.values() if f.build is not None]

    # --- the codegen stage
    def generate(self, parts: int) -> bool:
        """Emit the LLVM IR of the new functions (False if there are none) into ``parts`` modules
        compiled at the same time (``jit.compile_many``), each function into the part with the
        least weight so far; part 0 holds the kernels that touch few elements, compiled unoptimized."""
        new = self.new
        if not new:
            return False
        self.parts = [jit.new_module(self.name)] + [jit.new_module(self.name if i == 0 else f"{self.name}_{i}")
                                                     for i in range(parts)]
        weights = [0] * len(self.parts)
        for f in new:
            build = f.build
            assert build is not None  # (new: generated here)
            f.part = 0 if f.small else min(range(1, len(self.parts)), key=weights.__getitem__)
            f.size = build(self.parts[f.part])
            weights[f.part] += f.weight
            for step, finish in f.callers:
                finish(step, f.size)
        return True

    # --- the compile stage
    def compile(self) -> bool:
        """Compile the parts that have functions (at once: ``jit.compile_many``); False if there
        are none. The kernels of part 0 are at O0 (``quick``), unless the program generated no
        other function: then they are at O2, as code that others may borrow."""
        used = sorted({f.part for f in self.new})
        if not used:
            return False
        quick = [0] if used[0] == 0 and len(used) > 1 else []
        optimized = [i for i in used if i not in quick]
        # A program of few elements only: all of it unoptimized (about 2 ms of LLVM, not 7-15).
        all_small = used == [0]
        results = jit.compile_many([self.parts[i] for i in optimized], all_small)
        if quick:
            results.append(jit.compile_or_reuse(self.parts[0], True))
        codes = {code for _, code in results}
        self.report.code = next(code for code in ("compiled", "disk", "reused") if code in codes)
        self.compiled = dict(zip(optimized + quick, (module for module, _ in results)))
        self.modules = [self.compiled[i] for i in optimized + quick]
        return True

    # --- the link stage
    def link(self) -> None:
        """Give the steps the functions compiled for them, and lend those to later programs."""
        lent: dict[int, dict] = {}
        for f in self.new:
            module = self.compiled[f.part]
            f.fn = module.kernel(f.name)
            for step, _ in f.callers:
                step.fn = f.fn
            lent.setdefault(f.part, {})[f.key] = (f.name, f.size, f.fn, f.refs)
        for part, functions in lent.items():
            lend(self.compiled[part], functions)  # compiled: from now on others may call it

    def __str__(self) -> str:
        """The LLVM IR of the new functions (``EMBER_DUMP_IR``)."""
        borrowed = [f.name for f in self.functions.values() if f.build is None]
        note = f"; compiled before: {', '.join(borrowed)}" if borrowed else ""
        return "\n".join([f"{len(self.new)} new function(s) in {len(self.parts)} part(s){note}",
                          *(str(part) for part in self.parts
                            if any(not f.is_declaration for f in part.functions))])


def lower(closed: ClosedJaxpr, name: str, report: Report, donated: frozenset[int] = frozenset()) -> tuple[Plan, Code]:
    """The plan stage: the fused program ``closed`` as steps over slots, its buffers and donations
    planned; ``Code`` holds the functions the native steps call."""
    jaxpr = closed.jaxpr
    program = Plan.of(closed)
    code = Code(name, report)
    lowerer = _Lowerer(program, code, report)
    for eqn in jaxpr.eqns:
        lowerer.lower(eqn)
    program.finish(jaxpr.outvars, donated)
    return program, code


def parts_for(closed: ClosedJaxpr) -> int:
    """How many parts a program's new functions are compiled in at the same time (1: no split).
    A large one starts the compile workers now: ready, or nearly, by the time its IR is."""
    jaxpr = closed.jaxpr
    functions = sum(e.primitive is fusion_p or e.primitive in control_flow.CONTROL_FLOW for e in jaxpr.eqns)
    parts = jit.parallel_compiles() if functions >= SPLIT_FUNCTIONS else 1
    if parts > 1 and count_eqns(jaxpr) >= START_WORKERS_EQNS:
        jit.start_workers()
    return parts


def link(program: Plan, code: Code, report: Report, donated: frozenset[int] = frozenset()) -> Program:
    """The link stage: the steps get their functions; a ``Program`` ready to run."""
    if code.modules:
        code.link()
    elif any(isinstance(s, (KernelStep, LoopStep)) for s in program.steps):
        report.code = "reused"  # all of it compiled before: no compile
    return Program(program, report, code.modules, code.borrowed, dispatch=not donated)


class _Lowerer:
    def __init__(self, program: Plan, code: Code, report: Report) -> None:
        self.plan, self.code, self.report = program, code, report
        self.native = 0  # kernels and loops so far (their functions' names count them)
        self.products: dict[Any, dot.DotGeneral] = {}  # by signature: equal products share one

    def _product(self, eqn: Eqn) -> dot.DotGeneral:
        """The ``DotGeneral`` of ``eqn``, one per signature (operand and result types, params):
        each works out its layout once, and a program of n equal products holds one."""
        try:
            signature: Any = (*(a.aval for a in eqn.invars), eqn.outvars[0].aval, tuple(eqn.params.items()))
            product = self.products.get(signature)
        except TypeError:  # (a param that is not hashable: not shared)
            return dot.DotGeneral(eqn)
        if product is None:
            product = self.products[signature] = dot.DotGeneral(eqn)
        return product

    def lower(self, eqn: Eqn) -> None:
        """Append the step that runs ``eqn``."""
        p, program, report = eqn.primitive, self.plan, self.report
        ins = [program.atom(a) for a in eqn.invars]
        outs = [program.slot(v) for v in eqn.outvars]
        name = f"f{self.native}_{eqn.params.get('name', p.name)}"
        parts = _split_full_reduction(eqn) if p is fusion_p else fft.axis_by_axis(eqn) if p is fft_p else None
        if parts:  # (lowered one by one)
            for part in parts:
                self.lower(part)
            return
        if p is fusion_p and kernel.is_view(eqn):
            step: Any = ViewStep(ins, outs, eqn.outvars[0].aval.shape)
        elif p is fusion_p:
            step = self._kernel(eqn, name, ins, outs)
        elif p in control_flow.CONTROL_FLOW and (loop := self._loop(eqn, name, ins, outs)) is not None:
            step = loop
        elif p is dot_general_p and dot.lowers_natively(eqn):
            step = DotStep(self._product(eqn), ins, outs)
            report.contractions += 1
        elif fft.applies(eqn):
            step = FftStep(fft.RowTransform(eqn), ins, outs)
            report.transforms += 1
        elif lapack.lowers(eqn):
            step = self._lapack(eqn, name, ins, outs)
        else:
            step = FallbackStep(eqn, ins, outs)
            report.fallbacks.append(p.name)
        if isinstance(step, (KernelStep, LoopStep)):
            self.native += 1
        program.steps.append(step)

    def _kernel(self, eqn: Eqn, name: str, ins: list, outs: list[int]) -> KernelStep:
        sub = eqn.params["jaxpr"].jaxpr
        flat = _flattened(sub)
        # A kernel that computes what another one computes is that kernel: generated once.
        key, refs = _kernel_key(flat)

        def build(module: Any) -> int:
            builder = kernel.KernelBuilder(module, name, flat, versioned=True)
            builder.build()
            return builder.extent
        work = _work(sub)
        function = self.code.function(key, refs, name, build, len(flat.eqns), work <= QUICK_WORK)
        assert function is not None  # (nothing to prepare: always a function)
        step = KernelStep(function.name, UNLINKED, ins, outs, 0, work, 1, False)
        function.call(step, _finish_kernel)
        pointwise = _read_pointwise(sub)
        self.plan.pointwise_reads[len(self.plan.steps)] = {slot for slot, v in zip(ins, sub.invars)
                                                           if isinstance(slot, int) and id(v) in pointwise}
        self.report.kernels.append(function.name)
        return step

    def _loop(self, eqn: Eqn, name: str, ins: list, outs: list[int]) -> LoopStep | None:
        """The step of a control-flow equation's native function; None if it does not lower
        natively (an equation compiled before did: it is not prepared again)."""
        key, refs = _equation_key(eqn, "loop")
        subs: list = []

        def prepare() -> bool:
            subs.extend(control_flow.prepare(eqn, can_fuse_in_loop) or ())
            return bool(subs)

        def build(module: Any) -> tuple[int, tuple]:
            loop = control_flow.LoopFunction(module, name, eqn, can_fuse_in_loop, subs)
            return loop.scratch_bytes, tuple(loop.host_calls)
        function = self.code.function(key, refs, name, build, count_eqns(Jaxpr([], [], [eqn], [])), prepare=prepare)
        if function is None:
            return None
        step = LoopStep(function.name, UNLINKED, ins, outs, 0, 0)
        report = self.report

        def finish(step: LoopStep, size: tuple[int, tuple]) -> None:
            step.scratch_bytes, host_eqns = size
            step.host = control_flow.HostCalls(eqn, host_eqns) if host_eqns else None
            step.table = step.host.address if step.host else control_flow.function_table(eqn)
            report.host_calls.extend(e.primitive.name for e in host_eqns)
        function.call(step, finish)
        report.loops.append(function.name)
        return step

    def _lapack(self, eqn: Eqn, name: str, ins: list, outs: list[int]) -> LoopStep:
        key, refs = _equation_key(eqn, "lapack")

        def build(module: Any) -> int:
            return lapack.LapackFunction(module, name, eqn).scratch_bytes
        function = self.code.function(key, refs, name, build, 1)
        assert function is not None
        step = LoopStep(function.name, UNLINKED, ins, outs, 0, lapack.routine_table(eqn))
        function.call(step, _finish_lapack)
        self.report.library_calls.append(eqn.primitive.name)
        return step


def _finish_kernel(step: KernelStep, extent: int) -> None:
    step.extent = extent
    step.chunks, step.team = threads.kernel_chunks(extent, step.work)


def _finish_lapack(step: LoopStep, scratch_bytes: int) -> None:
    step.scratch_bytes = scratch_bytes

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
