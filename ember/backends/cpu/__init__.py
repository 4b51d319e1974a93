"""The native CPU backend: fused loop kernels, native loops and a blocked matrix product, all
compiled by LLVM for the host CPU; the reference interpreter runs whatever is not lowered
(visibly: see ``log_compiles``).

A program compiles in the stages of ``STAGES``, in order, after ``trace`` (``ember.api``, which
logs its own time). Each is timed in the compile log (``config.log_compiles``: "expand 0.4 ms,
optimize 1.2 ms, ..."), prints what it made when ``EMBER_DUMP_IR`` asks for it (``=1``: every
stage; ``=plan,link``: those), and the switchable ones are switched off by name with the passes
(``config.disabled_passes``; what they would have made runs on the reference interpreter then).

Modules: ``plan`` holds a program's steps over numbered buffers, its memory and donations (no
LLVM); ``codegen`` lowers equations to steps and generates, compiles and shares their functions
(a kernel or loop that an earlier program compiled is not generated again); ``runner`` runs the
steps, or has the native dispatcher (``entry``) run them in one call from the jit hit path.
``fusion`` (in ``ember.compiler``) groups equations into kernels; ``kernel``, ``index_rules``,
``loops`` and ``lowering`` generate a kernel's loop nest; ``vecmath`` is the inline math library;
``control_flow`` compiles loops and conditionals (``loop_layouts`` transposes their constant
matrices once where a body's products read them along rows); ``gemm`` and ``dot`` compute products; ``fft``
transforms batches of rows; ``jit`` drives LLVM (and shares machine code between programs with
the same IR); ``program_cache`` keeps whole compiled programs in the disk cache (a fresh
process loads one instead of running the stages); ``compile_workers`` are the processes that
compile a large program's parts at the same time as this one; ``threads`` splits work over cores.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from ember.backends import disk_cache
from ember.backends.cpu import codegen, kernel, program_cache
from ember.backends.cpu.codegen import Code, Report, can_fuse
from ember.backends.cpu.expansions import expand, transposed_products
from ember.backends.cpu.loop_layouts import transposed_invariants
from ember.backends.cpu.plan import Plan
from ember.backends.cpu.runner import Program
from ember.compiler import optimize
from ember.compiler.broadcasts import explicit_broadcasts
from ember.compiler.fusion import fuse
from ember.compiler.pipeline import PIPELINE, dump, dump_requested, dumped_names
from ember.config import config
from ember.core.ir import ClosedJaxpr
from ember.core.verify import IRTypeError, check_jaxpr

logger = logging.getLogger("ember")  # the compile log (``config.log_compiles``)


@dataclass(eq=False)
class Compilation:
    """What the stages pass on: the program (a ClosedJaxpr up to ``fuse``), then its plan, code
    and the runnable ``Program``."""
    closed: ClosedJaxpr
    name: str
    donated: frozenset[int]
    report: Report = field(default_factory=Report)
    plan: Plan = field(init=False)  # (set by the stage of that name)
    code: Code = field(init=False)
    program: Program = field(init=False)


@dataclass(frozen=True)
class Stage:
    """One step of the compile: it changes the ``Compilation``; ``shows`` what it made."""
    name: str
    run: Callable[[Compilation], bool | None]  # False: nothing to do (then not timed)
    shows: Callable[[Compilation], Any]  # what it made, printed by EMBER_DUMP_IR
    switchable: bool = False  # by config.disabled_passes


def _program(c: Compilation) -> ClosedJaxpr:
    return c.closed


def _broadcasts(c: Compilation) -> bool:
    closed = explicit_broadcasts(c.closed)
    changed, c.closed = closed is not c.closed, closed
    return changed


def _expand(c: Compilation) -> None:
    c.closed = expand(c.closed)


def _optimize(c: Compilation) -> None:
    c.closed = optimize(c.closed, dump_input=False)  # (printed by the stage before)


def _products(c: Compilation) -> None:
    c.closed = transposed_invariants(transposed_products(c.closed))


def _fuse(c: Compilation) -> None:
    c.closed = fuse(c.closed, can_fuse, kernel.MAX_DEPTH, kernel.MAX_PRODUCTS)


def _plan(c: Compilation) -> None:
    c.plan, c.code = codegen.lower(c.closed, c.name, c.report, c.donated)


def _codegen(c: Compilation) -> bool:
    return c.code.generate(codegen.parts_for(c.closed))


def _compile(c: Compilation) -> bool:
    return c.code.compile()


def _link(c: Compilation) -> None:
    c.program = codegen.link(c.plan, c.code, c.report, c.donated)


def _optimized_ir(c: Compilation) -> str:
    return "\n".join(str(module.optimized_ir) for module in c.code.modules)


STAGES: list[Stage] = [  # after trace (ember.api):
    # size-1 broadcasts of elementwise operands as broadcast_in_dim equations (kernels take full shapes)
    Stage("broadcasts", _broadcasts, _program),
    # equations this backend computes as others (convolutions, windowed reductions, complex max)
    Stage("expand", _expand, _program, switchable=True),
    # the compiler's passes (ember.compiler.PIPELINE: each switchable, and printed, by its name)
    Stage("optimize", _optimize, _program),
    # a transposed product as the product of its operands swapped (what transpose rules leave);
    # a loop constant that a product reads along its rows, transposed once before the loop
    Stage("products", _products, _program),
    # kernels: fusion equations, each computed by one loop nest (ember.compiler.fusion)
    Stage("fuse", _fuse, _program, switchable=True),
    # steps over numbered buffers, the arena of temporaries, donations (``plan``: no LLVM)
    Stage("plan", _plan, lambda c: c.plan),
    # LLVM IR of the kernels, loops and LAPACK calls not compiled before, in parts (``codegen``)
    Stage("codegen", _codegen, lambda c: c.code),
    # LLVM optimization and machine code of the parts, at once (``jit.compile_many``; disk cache)
    Stage("compile", _compile, _optimized_ir),
    # the steps get their functions (lent to later programs); the native dispatcher's plan
    Stage("link", _link, lambda c: c.program),
]
CHECKED = ("expand", "products", "fuse")  # stages after which config.check_ir checks the IR (optimize checks its own)


def compile_program(closed: ClosedJaxpr, name: str, donated: frozenset[int] = frozenset()) -> tuple[Program, Report]:
    """``closed`` through every stage of ``STAGES``: the program, ready to run, and its report.
    A program that an earlier process compiled is loaded whole from the disk cache instead
    (``program_cache``: no stage runs), and a compiled one is written there."""
    dumping = dump_requested("trace", *(s.name for s in STAGES))
    key, why = (None, "EMBER_DUMP_IR asks for its stages") if dumping else \
        disk_cache.program_key(closed, name, donated, "cpu")
    if key is not None:
        loaded, why = program_cache.load(key, name, donated)
        if loaded is not None:
            program, report = loaded
            report.program_cache = f"loaded whole from the disk cache (entry {key[:16]})"
            _log(name, report)
            return program, report
    c = Compilation(closed, name, donated)
    off = _switched_off()
    if dumping:
        _check_dumped_names()
        if dump_requested("trace"):
            dump(f"{name}: traced ({len(closed.eqns)} equations)", closed)
    for stage in STAGES:
        if stage.name in off:
            continue
        start = time.perf_counter()
        if stage.run(c) is False:
            continue
        c.report.times[stage.name] = time.perf_counter() - start
        if config.check_ir and stage.name in CHECKED:
            try:
                check_jaxpr(c.closed)
            except IRTypeError as e:
                raise IRTypeError(f"the IR is malformed after the CPU backend's stage {stage.name!r}: {e}") from e
        if dumping and stage.name != "optimize" and dump_requested(stage.name):  # (optimize prints each pass)
            shown = stage.shows(c)
            size = f" ({len(shown.eqns)} equations)" if isinstance(shown, ClosedJaxpr) else ""
            dump(f"{name}: after {stage.name}{size}", shown)
    if key is not None:
        not_kept = program_cache.store(key, c.plan, c.code, c.report)
        c.report.program_cache = (f"{why} in the disk cache (entry {key[:16]}): compiled, "
                                  + (f"not kept whole ({not_kept})" if not_kept else "and stored whole"))
    else:
        c.report.program_cache = f"not kept whole in the disk cache: {why}"
    _log(name, c.report)
    return c.program, c.report


def _log(name: str, report: Report) -> None:
    if config.log_compiles:
        logger.warning("%s", format_report(name, report))
    elif config.explain_cache_misses and config.persistent_cache and config.persistent_program_cache:
        logger.warning("ember cpu: %s: %s", name, report.program_cache)


def _switched_off() -> set[str]:
    off = config.disabled_passes
    return ({off} if isinstance(off, str) else set(off)) & {s.name for s in STAGES if s.switchable}


def _check_dumped_names() -> None:
    known = ["trace"] + [s.name for s in STAGES] + [name for name, _ in PIPELINE]
    unknown = dumped_names() - set(known)
    if unknown:
        raise ValueError(f"EMBER_DUMP_IR names unknown stage {', '.join(map(repr, sorted(unknown)))}; it takes 1 "
                         f"(every stage) or stage names separated by commas: {list(dict.fromkeys(known))}")


def format_report(name: str, report: Report) -> str:
    times = ", ".join(f"{stage} {seconds * 1e3:.1f} ms" for stage, seconds in report.times.items())
    kernels, loops = Counter(report.kernels), Counter(report.loops)
    before = report.compiled_before  # by earlier programs: not generated again

    def notes(counts: Counter, total: int) -> str:
        parts = [f"{len(counts)} distinct"] if len(counts) < total else []  # alike ones are generated once
        if before & counts.keys():
            parts.append(f"{len(before & counts.keys())} compiled before")
        return f" ({', '.join(parts)})" if parts else ""
    verb = "loaded" if report.code == "disk program" else "compiled"
    lines = [f"ember cpu: {verb} {name}: {len(report.kernels)} fused kernels{notes(kernels, len(report.kernels))}, "
             f"{len(report.loops)} native loops/conditionals{notes(loops, len(report.loops))}, "
             f"{report.contractions} matrix products"
             f"{f', {len(report.library_calls)} LAPACK calls' if report.library_calls else ''}"
             f"{f', {report.transforms} FFTs' if report.transforms else ''}; {times}"]
    if report.kernels or report.loops:
        lines.append("  native: " + ", ".join(f"{k}{f' x{n}' if n > 1 else ''}{' (compiled before)' * (k in before)}"
                                               for k, n in (kernels + loops).items()))
    if report.host_calls:
        counts = Counter(report.host_calls)
        lines.append("  called in Python from native loops: "
                     + ", ".join(f"{p} x{n}" if n > 1 else p for p, n in counts.items()))
    if report.fallbacks:
        counts = Counter(report.fallbacks)
        lines.append("  fell back to the reference interpreter: "
                     + ", ".join(f"{p} x{n}" if n > 1 else p for p, n in counts.items()))
    if report.program_cache:
        lines.append(f"  whole program: {report.program_cache}")
    return "\n".join(lines)
