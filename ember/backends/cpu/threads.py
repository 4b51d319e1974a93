"""Threads that share a kernel's outermost loop.

Kernels (and the matrix product) split their outermost loop over an OpenMP
team: libgomp's persistent threads, started through ``GOMP_parallel`` by a small
runner compiled once, take pieces of the loop from a shared counter. Without
libgomp a pool of Python threads calls the native code on disjoint ranges
instead (ctypes releases the GIL while native code runs).

Measured on this project's machine (znver5, 2 cores shared with other work),
a fused elementwise float32 kernel (``x*2+1``, max, ``*3``), one thread vs two:

* team, idle threads spinning: 2^14 elements 1.2 vs 1.7 us, 2^16 2.6 vs 3.1,
  2^17 9.0 vs 5.1, 2^18 19 vs 10.5, 2^20 67 vs 42 us. But spinning threads
  took the cores from the threads with work when other processes were busy:
  the whole benchmark table ran at 1.39x JAX's time, against 0.84x with
  threads that sleep at once (and 0.81x on one thread, measured alongside);
* team, idle threads asleep: a split costs 35-50 us (waking a thread);
* Python pool: 2^16 4.2 vs 21.5 us, 2^18 20 vs 38, 2^20 71 vs 107, 2^22 1050
  vs 662 us.

So team threads sleep when idle (see ``openmp_available``), and a thread must
get ``PARALLEL_MIN_WORK`` = 2^18 elements of work for a split to pay.

Sleeping at once made every split of a program's back-to-back kernels and
products wake the thread again. Since then, idle team threads spin briefly
(``SPIN_COUNT`` iterations of libgomp's wait loop, against its default 300000)
before they sleep: a split right after another finds the thread awake, and an
idle thread gives its core back within that spin. Measured on an AMD Zen 4
(2 cores, shared), interleaved processes, ember alone, spin 0 against 3000: the
VAE epoch 9.9-12.2 -> 8.0-8.4 ms, attention 0.51-0.60 -> 0.37-0.44 ms, selu
0.23-0.30 -> 0.17-0.22 ms, softmax 1.45-1.47 -> 0.93-1.20 ms; the CNN steps,
conv, matmul 1024 and LSTM within the noise; with two busy processes on the
two cores, no row slower beyond the (2x) noise (the VAE epoch 13.6-23.7 ->
19.0-19.7 ms, the MLP step 10.1-15.0 -> 10.1-10.4); a third of the test suite
under pytest-xdist on both cores took as long (57 s).
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from llvmlite import ir

from ember.backends import thread_count  # noqa: F401  (threads.thread_count, as the backend calls it)
from ember.backends.cpu import jit
from ember.backends.cpu.jit import register_library_symbols

PARALLEL_MIN_WORK = 1 << 18


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            workers = max(thread_count() - 1, 1)
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ember-cpu")
            # Start every worker now (the executor starts them lazily), so that the first call
            # of a program does not pay for creating threads.
            ready = threading.Barrier(workers + 1)
            for _ in range(workers):
                _pool.submit(ready.wait)
            ready.wait()
        return _pool


def start() -> None:
    """Start the pool (when compiling a program that will split work)."""
    _executor()


def chunk_count(extent: int, work: int, min_work: int | None = None) -> int:
    """How many pieces to split a loop of ``extent`` outer iterations and ``work`` units into,
    so that each piece gets at least ``min_work`` (default ``PARALLEL_MIN_WORK``)."""
    return max(1, min(thread_count(), extent, work // (min_work or PARALLEL_MIN_WORK)))


def kernel_chunks(extent: int, work: int) -> tuple[int, bool]:
    """(parts, whether an OpenMP team runs them) for a kernel's outermost loop. The team's runner
    is compiled with the first program that splits a kernel (a program of small kernels, the
    first jit of a process often, does not wait for it)."""
    chunks = chunk_count(extent, work)
    return chunks, chunks > 1 and openmp_available()


def run_split(kernel: Callable, buffers: object, extent: int, chunks: int) -> None:
    """Run ``kernel(buffers, begin, end)`` over [0, extent) in ``chunks`` pieces, on the pool and here."""
    if chunks <= 1:
        kernel(buffers, 0, extent)
        return
    bounds = [extent * i // chunks for i in range(chunks + 1)]
    pool = _executor()
    futures = [pool.submit(kernel, buffers, bounds[i], bounds[i + 1]) for i in range(1, chunks)]
    kernel(buffers, bounds[0], bounds[1])
    for f in futures:
        f.result()


# --- OpenMP teams from generated code ---------------------------------------------------------------
_OPENMP_SYMBOLS = ("GOMP_parallel",)


# Iterations of libgomp's wait loop before an idle team thread sleeps (see the module's notes).
SPIN_COUNT = 3000


@functools.cache
def openmp_available() -> bool:
    """Whether libgomp is there; its entry points are then registered for the JIT. Unless the
    user chose otherwise (GOMP_SPINCOUNT, OMP_WAIT_POLICY), idle team threads spin for
    ``SPIN_COUNT`` iterations, not for milliseconds, before they sleep (see the measurements
    above)."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", str(SPIN_COUNT))
    if not register_library_symbols("libgomp.so.1", _OPENMP_SYMBOLS):
        return False
    _team_runner()  # compiled now, with the first program, rather than in its first run
    return True


# A team's threads take the pieces of the loop one at a time, PIECES_PER_THREAD pieces per thread
# on average: a thread that starts late (its core is busy) leaves its share to the others.
PIECES_PER_THREAD = 4

# run(kernel, buffers, begin, end, threads, pieces per thread)
_RUNNER_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                     ctypes.c_int64, ctypes.c_int64)


@functools.cache
def _team_runner():
    """``run(kernel, buffers, begin, end, threads, pieces_per_thread)``, compiled once: calls
    ``kernel(buffers, lo, hi)`` on pieces of [begin, end) from a team of OpenMP threads
    (``GOMP_parallel``), each thread taking the next piece from a shared counter."""
    module = jit.new_module("ember_team")
    i8p = ir.IntType(8).as_pointer()
    i32, i64 = ir.IntType(32), ir.IntType(64)
    kernel_type = ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64]).as_pointer()
    # kernel, buffers, begin, end, pieces, next piece
    context = ir.LiteralStructType([kernel_type, i8p.as_pointer(), i64, i64, i64, i64])
    task = ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p]), name="ember_team_task")
    entry_block, loop, work, done = (task.append_basic_block(n) for n in ("entry", "loop", "work", "done"))
    b = ir.IRBuilder(entry_block)
    ctx = b.bitcast(task.args[0], context.as_pointer())

    def field(builder, pointer, k):
        return builder.gep(pointer, [ir.Constant(i32, 0), ir.Constant(i32, k)])

    kernel, buffers, begin, end, pieces = (b.load(field(b, ctx, k)) for k in range(5))
    span = b.sub(end, begin)
    b.branch(loop)
    b.position_at_end(loop)
    piece = b.atomic_rmw("add", field(b, ctx, 5), ir.Constant(i64, 1), "monotonic")
    b.cbranch(b.icmp_signed("<", piece, pieces), work, done)
    b.position_at_end(work)

    def bound(p):
        return b.add(begin, b.sdiv(b.mul(span, p), pieces))

    b.call(kernel, [buffers, bound(piece), bound(b.add(piece, ir.Constant(i64, 1)))])
    b.branch(loop)
    b.position_at_end(done)
    b.ret_void()

    run = ir.Function(module, ir.FunctionType(ir.VoidType(), [kernel_type, i8p.as_pointer(), i64, i64, i64, i64]),
                      name="ember_team_run")
    b = ir.IRBuilder(run.append_basic_block("entry"))
    kernel, buffers, begin, end, team, per_thread = run.args
    ctx = b.alloca(context)
    wanted = b.mul(team, per_thread)
    span = b.sub(end, begin)
    for k, value in enumerate([kernel, buffers, begin, end, b.select(b.icmp_signed("<", span, wanted), span, wanted),
                               ir.Constant(i64, 0)]):
        b.store(value, field(b, ctx, k))
    gomp = ir.Function(module, ir.FunctionType(ir.VoidType(), [task.type, i8p, i32, i32]), name="GOMP_parallel")
    b.call(gomp, [task, b.bitcast(ctx, i8p), b.trunc(team, i32), ir.Constant(i32, 0)])
    b.ret_void()
    compiled = jit.compile_module(module)
    return compiled, _RUNNER_SIGNATURE(compiled.engine.get_function_address("ember_team_run"))


def team_runner_address() -> int:
    """The address of ``run`` (for native code that starts teams: ``entry``)."""
    return _team_runner()[0].engine.get_function_address("ember_team_run")


def run_team(kernel: jit.NativeFunction, buffers: object, extent: int, threads: int,
             pieces_per_thread: int = PIECES_PER_THREAD) -> None:
    """``kernel(buffers, lo, hi)`` over [0, extent), split over an OpenMP team of ``threads``."""
    _team_runner()[1](ctypes.cast(kernel, ctypes.c_void_p), buffers, 0, extent, threads, pieces_per_thread)
