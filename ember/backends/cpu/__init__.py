"""The native CPU backend: fused loop kernels, native loops and a blocked matrix product, all
compiled by LLVM for the host CPU; the reference interpreter runs whatever is not lowered
(visibly: see ``log_compiles``).

Modules: ``fusion`` (in ``ember.compiler``) groups equations into kernels; ``kernel``,
``index_rules``, ``loops`` and ``lowering`` generate a kernel's loop nest; ``vecmath`` is the
inline math library; ``control_flow`` compiles loops and conditionals; ``gemm`` and ``dot``
compute products; ``fft`` transforms batches of rows; ``program`` plans steps and memory and
runs them; ``entry`` is the native dispatcher that runs a whole program in one call from the jit
hit path; ``jit`` drives LLVM (and shares machine code between programs with the same IR);
``compile_workers`` are the processes that compile a large program's parts at the same time as
this one; ``threads`` splits work over cores. A kernel or loop that an earlier program compiled
is not generated again (``program.lend``).

Compile stages, each timed in the compile log::

    expansion (``expand``: convolutions, windowed reductions) + passes (ember.compiler.optimize)
    -> fusion -> LLVM IR generation -> LLVM optimize + codegen
"""
from __future__ import annotations

import logging
import time
from collections import Counter

from ember.backends.cpu import kernel
from ember.backends.cpu.expansions import expand, transposed_products
from ember.backends.cpu.program import Program, Report, can_fuse
from ember.compiler import optimize
from ember.compiler.fusion import fuse
from ember.config import config
from ember.core.ir import ClosedJaxpr
from ember.core.verify import check_jaxpr

logger = logging.getLogger("ember")  # the compile log (``config.log_compiles``)


def compile_program(closed: ClosedJaxpr, name: str, donated: frozenset[int] = frozenset()) -> tuple[Program, Report]:
    report = Report()
    start = time.perf_counter()
    closed = transposed_products(optimize(expand(closed)))
    passes = time.perf_counter()
    fused = fuse(closed, can_fuse, kernel.MAX_DEPTH, kernel.MAX_PRODUCTS)
    if config.check_ir:
        check_jaxpr(fused)
    report.times = {"passes": passes - start, "fusion": time.perf_counter() - passes}
    program = Program(fused, name, report, donated)
    if config.log_compiles:
        logger.warning("%s", format_report(name, report))
    return program, report


def format_report(name: str, report: Report) -> str:
    times = ", ".join(f"{stage} {seconds * 1e3:.1f} ms" for stage, seconds in report.times.items())
    kernels, loops = Counter(report.kernels), Counter(report.loops)
    before = report.compiled_before  # by earlier programs: not generated again

    def notes(counts: Counter, total: int) -> str:
        parts = [f"{len(counts)} distinct"] if len(counts) < total else []  # alike ones are generated once
        if before & counts.keys():
            parts.append(f"{len(before & counts.keys())} compiled before")
        return f" ({', '.join(parts)})" if parts else ""
    lines = [f"ember cpu: compiled {name}: {len(report.kernels)} fused kernels{notes(kernels, len(report.kernels))}, "
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
    return "\n".join(lines)
