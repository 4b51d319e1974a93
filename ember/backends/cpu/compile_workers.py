"""Compile workers: LLVM in other processes, so that independent modules compile on several cores.

llvmlite runs one LLVM call at a time per process (a global lock, and LLVM's global state is not
thread-safe), so threads cannot compile in parallel; processes can. ``jit.compile_many`` compiles
one module in its own thread and hands others to workers: persistent child processes, each
serving one request at a time on its pipes. A worker receives the IR text and the optimization
choice and returns the disk-cache payload of the module (``jit.generate_payload``: the same
pipeline, target machine and LLVM options as the parent, so the same bytes); the parent loads it
as it loads a disk-cache hit, after the same checks, and stores it on disk.

Workers are started with ``subprocess`` (never ``fork``: the parent has threads) running only
``jit`` and what it imports (no ``ember/__init__``: ready in 0.18 s instead of 2 s). They
exit on end of file of their stdin, so they end with the parent however it ends (killed too),
and are stopped and reaped at interpreter exit. A worker that reports another identity
(``jit.identity``: host CPU, LLVM, the pipeline's source) than the parent's is not used. A worker
that dies or exceeds its time limit is killed and reaped, and its module compiled in the parent,
as is a module a worker reports an error for or whose code the parent's checks refuse; after
``MAX_FAILURES`` failures the process does without workers. Failures are logged once under
``config.log_compiles``. Only POSIX hosts with ELF objects (where the disk cache's checks can
read the code) use them.

How many: ``EMBER_COMPILE_WORKERS`` (``0``: none); by default ``min(cores - 1, DEFAULT_MAX)`` of
the cores this process may run on: one worker on two cores (two there compile four modules no
faster). Each worker holds about 100 MB once it has compiled, and only a caller that splits its
kernels into ``jit.parallel_compiles()`` modules keeps them all busy; the cap stays at 2 until
measured on more cores.

What is worth sending (measured on the 2-core machine of the benchmarks, llvmlite 0.50 / LLVM
20): a worker's module costs the parent 0.4-0.5 ms to check and load (3 ms for 143 KB of IR), and
the round trip through the pipes adds under 1 ms; compiling a module here takes at least 7 ms
with optimization (even an empty one; 15-45 ms for one kernel, 0.2-0.8 s for a program's module)
and 2-5 ms without (one kernel; 30 ms for 143 KB). So every optimized module that holds a kernel
is worth sending (``MIN_SOURCE_CHARS``: smaller than any kernel's module), an unoptimized one only
from about 4 KB of IR (``MIN_QUICK_SOURCE_CHARS``: its compile is then 3-4 times the overhead).
Starting workers (0.18 s from start to ready, on another core) waits for ``START_SOURCE_CHARS``
of IR to send (unoptimized IR counted ``1 / QUICK_SPEED_UP``), 0.1-1 s of compiling; smaller
compiles use the workers already running. Two modules of half a program's kernels each, on two
cores, compile in 0.53-0.60 of the time of compiling them one after the other (CNN and
transformer train steps, jit(grad) of 300 layers; a warm worker).
"""
from __future__ import annotations

import atexit
import logging
import os
import select
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable

from ember.config import config
from ember.core.background import background

DEFAULT_MAX = 2
MIN_SOURCE_CHARS = 1_000
MIN_QUICK_SOURCE_CHARS = 4_000
START_SOURCE_CHARS = 30_000
QUICK_SPEED_UP = 8  # about how much faster a module compiles without optimization (large ones)
START_TIMEOUT_S = 60.0  # from start to ready (the interpreter, llvmlite and LLVM's initialization)
# A request's time limit: generous (the slowest compiles measured take 30 ms per KB of IR), only
# against a hung worker (one that dies is seen at once: its pipe closes).
TIMEOUT_S = 60.0
TIMEOUT_S_PER_KB = 0.5
MAX_FAILURES = 3

_REQUEST = struct.Struct("<QB")  # IR length, quick; then the IR text (UTF-8)
_RESPONSE = struct.Struct("<BQ")  # status, length; then the payload, the identity or an error message
_READY, _DONE, _FAILED = 1, 2, 3

# The worker's program (run without ``site``: the parent's import path replaces what it would
# add, for 60-90 ms less start-up; it runs after all if llvmlite needs an import hook of a .pth
# file): ``ember``'s packages as empty stand-ins (their ``__init__`` imports all of ember), then ``serve``.
_BOOTSTRAP = """\
import os, sys, types
root = sys.argv[1]
sys.path[:] = sys.argv[2:]
try:
    import llvmlite.binding
except ImportError:
    import site
    site.main()
for name in ("ember", "ember.core", "ember.backends", "ember.backends.cpu"):
    package = types.ModuleType(name)
    package.__path__ = [os.path.join(root, *name.split(".")[1:])]
    sys.modules[name] = package
from ember.backends.cpu import compile_workers, jit
compile_workers.serve(jit.generate_payload, jit.identity())
"""


# --- the worker ----------------------------------------------------------------------------------
def serve(generate: Callable[[str, bool], bytes], identity: str, requests: int = 0, replies: int = 1) -> None:
    """A worker's loop: answer requests on ``requests`` with ``generate(source, quick)`` (the
    payload of ``jit.generate_payload``) until end of file; ``identity`` is ``jit.identity()``."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; EOF ends us
    replies = os.dup(replies)
    os.dup2(2, 1)  # anything printed goes to stderr, not into the replies
    _write_all(replies, _frame(_READY, identity.encode()))
    while True:
        header = _read_exactly(requests, _REQUEST.size)
        if header is None:
            return
        length, quick = _REQUEST.unpack(header)
        source = _read_exactly(requests, length)
        if source is None:
            return
        try:
            reply = _frame(_DONE, generate(source.decode(), bool(quick)))
        except Exception as error:  # the parent compiles the module itself
            reply = _frame(_FAILED, f"{type(error).__name__}: {error}".encode())
        _write_all(replies, reply)


def _frame(status: int, body: bytes) -> bytes:
    return _RESPONSE.pack(status, len(body)) + body


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = os.read(fd, size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# --- the parent's side -----------------------------------------------------------------------------
class WorkerFailed(Exception):
    """A worker died, timed out or is not like the parent; its module compiles in the parent."""


class RequestFailed(Exception):
    """A worker could not compile a module (it reported an error and is still usable)."""


class WorkerMismatch(WorkerFailed):
    """A worker that would generate other code than the parent (another LLVM, host or pipeline)."""


class Worker:
    """One worker process and its two pipes, used by one thread at a time (``_acquire``)."""

    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.started = time.perf_counter()
        self.process = subprocess.Popen([sys.executable, "-S", "-c", _BOOTSTRAP, root, *map(str, sys.path)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        close_fds=True)
        assert self.process.stdin is not None and self.process.stdout is not None  # (both are PIPEs)
        self._pipes = (self.process.stdin, self.process.stdout)
        self._requests, self._replies = (pipe.fileno() for pipe in self._pipes)
        os.set_blocking(self._requests, False)  # writes wait in ``poll``, under the time limit
        self.ready = False
        self.start_seconds = 0.0  # from start to ready
        # Held while talking to the worker, and to close the pipes: their descriptors are never
        # closed (and perhaps reused by another file) under a thread that reads or writes them.
        self._io = threading.Lock()
        self._closed = False

    def wait_ready(self, identity: str, timeout: float = START_TIMEOUT_S) -> None:
        """Wait for the worker's greeting; ``WorkerFailed`` if it does not come or is not ``identity``."""
        with self._io:
            if self.ready:
                return
            status, body = self._receive(time.monotonic() + timeout)
            theirs = body.decode(errors="replace")
            if status != _READY:
                raise WorkerFailed(f"it greeted with status {status}")
            if theirs != identity:
                raise WorkerMismatch(f"it would generate other code: {theirs} (this process: {identity})")
            self.start_seconds = time.perf_counter() - self.started
            self.ready = True

    def generate(self, source: str, quick: bool) -> bytes:
        """The payload of ``source`` (``jit.generate_payload`` in the worker)."""
        data = source.encode()
        deadline = time.monotonic() + TIMEOUT_S + TIMEOUT_S_PER_KB * len(data) / 1e3
        with self._io:
            self._send(_REQUEST.pack(len(data), quick) + data, deadline)
            status, body = self._receive(deadline)
        if status == _FAILED:
            raise RequestFailed(body.decode(errors="replace"))
        if status != _DONE:
            raise WorkerFailed(f"it replied with status {status}")
        return body

    def _send(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            self._wait(select.POLLOUT, deadline)
            try:
                view = view[os.write(self._requests, view):]
            except BlockingIOError:
                continue
            except OSError as error:  # EPIPE: it is gone
                raise WorkerFailed(self._gone(f"writing to it failed ({error})")) from None

    def _receive(self, deadline: float) -> tuple[int, bytes]:
        status, length = _RESPONSE.unpack(self._read(_RESPONSE.size, deadline))
        return status, self._read(length, deadline)

    def _read(self, size: int, deadline: float) -> bytes:
        data = bytearray()
        while len(data) < size:
            self._wait(select.POLLIN, deadline)
            try:
                chunk = os.read(self._replies, min(size - len(data), 1 << 22))
            except OSError as error:
                raise WorkerFailed(self._gone(f"reading from it failed ({error})")) from None
            if not chunk:
                raise WorkerFailed(self._gone("it closed its pipe"))
            data += chunk
        return bytes(data)

    def _wait(self, event: int, deadline: float) -> None:
        if self._closed:
            raise WorkerFailed("it was stopped")
        poller = select.poll()
        poller.register(self._requests if event == select.POLLOUT else self._replies, event)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerFailed("it did not answer in time")
            if poller.poll(min(left, 1.0) * 1e3):
                return  # ready, or hung up / in error: the read or write says which

    def _gone(self, what: str) -> str:
        try:
            code = self.process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return what
        return f"{what}: it exited with status {code}" if code >= 0 else f"{what}: killed by signal {-code}"

    def stop(self, kill: bool = False) -> None:
        """End the worker and reap it: end of file on its stdin, or a kill (at once if ``kill``, if it
        does not exit within 2 s, or if a thread is talking to it: that thread then sees it gone)."""
        if self._io.acquire(blocking=False):
            try:
                self._close()
            finally:
                self._io.release()
            if not kill:
                try:
                    self.process.wait(timeout=2.0)
                    return
                except subprocess.TimeoutExpired:
                    pass
        try:
            self.process.kill()
        except OSError:  # already reaped
            pass
        try:
            self.process.wait(timeout=10.0)
        except subprocess.TimeoutExpired:  # unkillable (stuck in the kernel): Popen reaps it later
            pass

    def _close(self) -> None:
        self._closed = True
        for pipe in self._pipes:
            try:
                pipe.close()
            except OSError:
                pass


_lock = threading.Lock()
_workers: list[Worker] = []  # started and not failed
_idle: list[Worker] = []  # those of ``_workers`` no thread is using
_failures = 0
_disabled = ""  # why this process does without workers ("" while it does not)
_warned = False
_hooks_installed = False


def count() -> int:
    """How many workers this process uses (``EMBER_COMPILE_WORKERS``, else one fewer than its cores,
    at most ``DEFAULT_MAX``); 0 where they cannot run."""
    if _disabled or os.name != "posix" or not hasattr(select, "poll") or not sys.executable:
        return 0
    wanted = os.environ.get("EMBER_COMPILE_WORKERS", "").strip()
    if wanted:
        try:
            return max(0, min(int(wanted), 64))
        except ValueError:
            pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, min(cores - 1, DEFAULT_MAX))


def workers() -> list[Worker]:
    """The live workers (for diagnostics and tests)."""
    with _lock:
        return list(_workers)


def start(identity: Callable[[], str]) -> None:
    """Start the workers that are not running, in a background thread that also waits for their
    greetings (``run`` may take them meanwhile: it waits for the greeting itself)."""
    if count() > len(workers()):
        background.submit("cpu: start the compile workers", _warm, identity(), once=False)


def _warm(identity: str) -> None:
    with _lock:
        started = _spawn(count() - len(_workers))
        _idle.extend(started)
    for worker in started:
        try:
            worker.wait_ready(identity)
        except WorkerFailed as error:
            _discard(worker, error)


def run(jobs: list[tuple[str, bool]], here: Callable[[int], None], load: Callable[[int, bytes], None],
        identity: Callable[[], str]) -> None:
    """Do every job ``(IR text, quick)`` once, largest first: ``here(i)`` compiles job ``i`` in this
    thread; a worker's payload for job ``i`` goes to ``load(i, payload)``, also called in this
    thread. Workers take jobs as they become ready, so none is waited for to start; a job a worker
    fails is done ``here``."""
    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i][0]))
    sendable = {i for i in order
                if len(jobs[i][0]) >= (MIN_QUICK_SOURCE_CHARS if jobs[i][1] else MIN_SOURCE_CHARS)}
    work = sum(len(jobs[i][0]) // (QUICK_SPEED_UP if jobs[i][1] else 1) for i in sendable)
    wanted = min(len(sendable), len(jobs) - 1)
    helpers = _acquire(wanted, spawn=work >= START_SOURCE_CHARS) if wanted > 0 else []
    if not helpers:
        for i in order:
            here(i)
        return
    expected = identity()
    pending = deque(order)
    finished: deque[tuple[int, bytes | None]] = deque()  # (job, its payload), or (job, None): do it here
    changed = threading.Condition()
    state = {"in flight": 0, "stop": False}

    def serve_jobs(worker: Worker) -> None:
        try:
            worker.wait_ready(expected)
        except WorkerFailed as error:
            _discard(worker, error)
            return
        while True:
            with changed:
                job = next((i for i in pending if i in sendable), None)
                if job is None or state["stop"]:
                    break
                pending.remove(job)
                state["in flight"] += 1
            try:
                result = worker.generate(*jobs[job])
            except Exception as error:  # (whatever it is, the job must come back: ``run`` waits for it)
                if not isinstance(error, (WorkerFailed, RequestFailed)):
                    error = WorkerFailed(f"{type(error).__name__}: {error}")
                with changed:
                    finished.append((job, None))
                    state["in flight"] -= 1
                    changed.notify_all()
                if isinstance(error, WorkerFailed):
                    _discard(worker, error)
                    return
                _warn(f"a compile worker could not compile a module ({error}); compiled in this process")
                continue
            with changed:
                finished.append((job, result))
                state["in flight"] -= 1
                changed.notify_all()
        _release(worker)

    for worker in helpers:
        serving = background.submit(background.unique_name("cpu: compile requests"), serve_jobs, worker, once=False)
        if serving.dropped:  # no thread to spare (or the interpreter exits): this one compiles without the worker
            _release(worker)
    try:
        while True:
            with changed:
                while not finished and not pending and state["in flight"]:
                    changed.wait()
                if finished:
                    job, payload = finished.popleft()
                elif pending:
                    job, payload = pending.popleft(), None
                else:
                    return
            if payload is None:
                here(job)
            else:
                load(job, payload)
    finally:
        with changed:
            state["stop"] = True


def refused(module: str, problem: str) -> None:
    """A worker's code that the parent's checks or LLVM refused (the module is compiled here)."""
    global _failures, _disabled
    with _lock:
        _failures += 1
        if _failures >= MAX_FAILURES:
            _disabled = _disabled or f"compile workers failed {_failures} times"
    _warn(f"the machine code a compile worker generated for {module} was refused ({problem}); compiled "
          "in this process")


def _acquire(wanted: int, spawn: bool = True) -> list[Worker]:
    """Up to ``wanted`` workers that no thread is using, starting new ones (if ``spawn``) up to ``count()``."""
    limit = count()
    if wanted <= 0 or limit <= 0:
        return []
    with _lock:
        taken = _idle[:min(wanted, limit)]
        del _idle[:len(taken)]
        if spawn:
            taken += _spawn(min(wanted - len(taken), limit - len(_workers)))
    return taken


def _spawn(number: int) -> list[Worker]:
    """Start ``number`` workers (with ``_lock`` held); a failure to start one turns workers off."""
    global _disabled
    started: list[Worker] = []
    for _ in range(number):
        try:
            worker = Worker()
        except (OSError, subprocess.SubprocessError, ValueError) as error:
            _disabled = f"a compile worker could not be started ({error})"
            _warn(_disabled + "; compiling in this process")
            break
        _install_hooks()
        _workers.append(worker)
        started.append(worker)
    return started


def _release(worker: Worker) -> None:
    with _lock:
        if worker in _workers and worker not in _idle:
            _idle.append(worker)


def _discard(worker: Worker, error: WorkerFailed) -> None:
    """Stop a worker that failed; too many failures, or one that would generate other code, and
    this process does without workers."""
    global _failures, _disabled
    with _lock:
        if worker not in _workers:  # stopped by ``shutdown``, or another thread saw it fail too
            worker.stop(kill=True)
            return
        _workers.remove(worker)
        if worker in _idle:
            _idle.remove(worker)
        _failures += 1
        if isinstance(error, WorkerMismatch) or _failures >= MAX_FAILURES:
            _disabled = _disabled or f"compile workers failed {_failures} times ({error})"
    worker.stop(kill=True)
    _warn(f"a compile worker failed ({error}); its module is compiled in this process")


def _warn(message: str) -> None:
    global _warned
    if config.log_compiles and not _warned:
        _warned = True
        logging.getLogger("ember").warning("ember: %s", message)


def shutdown() -> None:
    """Stop every worker (end of file, then a kill if need be) and reap it. A later ``run`` or
    ``start`` starts new ones."""
    with _lock:
        stopping = list(_workers)
        _workers.clear()
        _idle.clear()
    for worker in stopping:
        worker.stop()


def _at_exit() -> None:
    global _disabled
    _disabled = "the interpreter is exiting"
    shutdown()


def _forget_after_fork() -> None:
    """In a forked child: the workers are the parent's. Drop them without stopping them, and close
    this process's ends of their pipes, so that they still see end of file when the parent ends."""
    global _lock, _failures
    _lock = threading.Lock()
    for worker in _workers:
        worker._close()
        worker.process.returncode = 0  # not this process's child: never to be waited for here
    _workers.clear()
    _idle.clear()
    _failures = 0


def _install_hooks() -> None:
    global _hooks_installed
    if not _hooks_installed:
        _hooks_installed = True
        atexit.register(_at_exit)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forget_after_fork)
