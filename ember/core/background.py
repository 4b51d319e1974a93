"""Background work: one service that runs named jobs off the caller's thread.

ember compiles some code where no call waits for it: a tiered program's native executable
(``runtime/tiers.py``), the CPU backend's dispatcher (``backends/cpu/entry.py``), the native
matrix products and transforms (``gemm.py``, ``fft.py``) and the start of the compile worker
processes (``compile_workers.py``). All of it goes through ``background``, so that there is one
place that knows what runs, one way to wait for it, and one shutdown at interpreter exit.

- ``submit(name, fn, *args)`` runs ``fn(*args)`` on a thread of its own or, with ``queue=``,
  after the jobs submitted to that queue before it, one at a time on the queue's thread (the
  tiered compiles: first in, first out; LLVM runs one call at a time per process anyway).
- A name is a job's identity: while a job of that name is known, submitting the name again
  returns that job and runs nothing. A job submitted with ``once=True`` (a warm-up, done once per
  process) stays known when it has finished; otherwise (a job per program) it is forgotten then.
- ``hurry(job)`` moves a queued job that has not started to the front of its queue: a caller
  that waits for that job's work (a tiered program's call that waits for its native code) does
  not also wait for every compile queued before it.
- ``job(name)`` is the job of that name, if known; a ``Job`` says whether it is ``done``, its
  ``error`` (an exception it raised, or why it was dropped), and can be waited for (``wait``)
  or called back when done (``add_done_callback``).
- ``drain`` waits for every job submitted so far (tests, benchmarks: ``ember.wait_for_compiles``).
- ``shutdown`` runs at interpreter exit: queued jobs that have not started are dropped, jobs
  that run are finished (an LLVM call cannot be interrupted, and the interpreter must not tear
  LLVM down under it), and jobs submitted later are dropped at once; then the ``after_shutdown``
  hooks run (a job may import a module whose own ``atexit`` hook is then never called). A forked
  child drops the parent's unfinished jobs (their threads are not in the child).

A job's exception is kept in its ``error``, never raised in the thread: whoever needs the work
(a call that waits for the native code, a warm-up's foreground fallback) meets it there.

While jobs run, the interpreter switches threads every ``SWITCH_INTERVAL`` instead of Python's
5 ms (unless the process set a shorter one): the jobs are mostly Python (passes, LLVM IR), and a
caller's thread that lets the interpreter go for NumPy or native code (an eager call on the
reference tier while its native code compiles) would wait up to the interval to get it back,
after each such call. On the 2-core host, the first 100 eager ``a @ a`` (256x256) calls of a
process, none waiting for the compile: 110-160 ms with it against 100-590 ms without (three
processes each).
"""
from __future__ import annotations

import atexit
import itertools
import os
import sys
import threading
import time
from collections import deque
from typing import Any, Callable


class JobDropped(RuntimeError):
    """A job that never ran: the interpreter was exiting, the process forked, or no thread could start."""


class Job:
    """One piece of background work: its name, whether it has started and finished, its result
    or error."""

    __slots__ = ("name", "queue", "once", "started", "dropped", "result", "error", "_call", "_done", "_callbacks",
                 "_lock")

    def __init__(self, name: str, call: Callable[[], Any], queue: str | None, once: bool) -> None:
        self.name = name
        self.queue = queue
        self.once = once
        self.started = False
        self.dropped = False  # finished without running
        self.result: Any = None
        self.error: BaseException | None = None
        self._call: Callable[[], Any] | None = call
        self._done = threading.Event()
        self._callbacks: list[Callable[[Job], None]] = []
        self._lock = threading.Lock()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the job has finished (run or dropped); whether it has."""
        return self._done.wait(timeout)

    def add_done_callback(self, callback: Callable[[Job], None]) -> None:
        """Call ``callback(job)`` when the job finishes (now, in this thread, if it has)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def _run(self) -> None:
        call, self._call = self._call, None
        self.started = True
        try:
            self.result = call() if call is not None else None
        except BaseException as error:  # kept for whoever needs the work (see the module docstring)
            self.error = error

    def _drop(self, why: str) -> None:
        self._call = None
        self.dropped = True
        self.error = JobDropped(f"background job {self.name!r} did not run: {why}")
        self._finish()

    def _finish(self) -> None:
        with self._lock:
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)


# The interpreter's switch interval while jobs run (seconds; see the module docstring).
SWITCH_INTERVAL = 0.0005


class BackgroundService:
    """Runs named jobs in background threads (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}  # unfinished jobs, and finished ``once`` jobs
        self._queues: dict[str, deque[Job]] = {}  # queued jobs not started, by queue
        self._threads: set[threading.Thread] = set()  # alive: a job's, or a queue's
        self._serving: set[str] = set()  # queues whose thread runs
        self._closing = ""  # why jobs are no longer run ("" while they are)
        self._serial = itertools.count()
        self._running = 0  # jobs running now
        self._switch_interval: float | None = None  # the process's own, while jobs run with ours
        self._after_shutdown: list[Callable[[], None]] = []

    @property
    def closing(self) -> bool:
        """Whether the service has shut down (the interpreter is exiting)."""
        return bool(self._closing)

    def unique_name(self, what: str) -> str:
        """``what`` made unique (for a job per program, which has no natural name)."""
        return f"{what} #{next(self._serial)}"

    def submit(self, name: str, fn: Callable[..., Any], *args: Any, queue: str | None = None,
               once: bool = True) -> Job:
        """Run ``fn(*args)`` in the background as job ``name``, unless a job of that name is known
        (then that job). ``queue``: run after the jobs queued there before, on the queue's thread.
        ``once``: keep the job known after it finishes, so that it runs once per process."""
        with self._lock:
            known = self._jobs.get(name)
            if known is not None:
                return known
            job = Job(name, (lambda: fn(*args)) if args else fn, queue, once)
            if self._closing:
                why = self._closing
            else:
                why = ""
                self._jobs[name] = job
                if queue is not None:
                    self._queues.setdefault(queue, deque()).append(job)
                    if queue not in self._serving:
                        why = self._start(self._serve, queue, f"ember-{queue}")
                        if not why:
                            self._serving.add(queue)
                        else:
                            self._queues[queue].remove(job)
                else:
                    why = self._start(self._run, job, f"ember-{name}")
                if why:
                    del self._jobs[name]
        if why:
            job._drop(why)
        return job

    def job(self, name: str) -> Job | None:
        """The job named ``name``: unfinished, or finished and submitted ``once``; else None."""
        with self._lock:
            return self._jobs.get(name)

    def hurry(self, job: Job) -> bool:
        """Move ``job`` to the front of its queue, if it is queued and has not started (someone
        waits for it: the jobs queued before it need not finish first); whether it was moved."""
        with self._lock:
            waiting = self._queues.get(job.queue) if job.queue is not None else None
            if not waiting or job.started or waiting[0] is job or job not in waiting:
                return False
            waiting.remove(job)
            waiting.appendleft(job)
            return True

    def jobs(self) -> list[Job]:
        """The jobs that have not finished, in the order they were submitted."""
        with self._lock:
            return [job for job in self._jobs.values() if not job.done]

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every job submitted so far (and every job those submit) has finished;
        whether they have within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pending = self.jobs()
            if not pending:
                return True
            for job in pending:
                left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                if not job.wait(left):
                    return False

    def shutdown(self, why: str = "the interpreter is exiting") -> None:
        """Drop the queued jobs that have not started, finish those that run, and drop every
        later job."""
        with self._lock:
            self._closing = why
            dropped = [job for queued in self._queues.values() for job in queued]
            for queued in self._queues.values():
                queued.clear()
            threads = list(self._threads)
        for job in dropped:
            self._forget(job)
            job._drop(why)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join()
        with self._lock:
            hooks, self._after_shutdown = self._after_shutdown, []
        for hook in hooks:
            hook()

    def after_shutdown(self, hook: Callable[[], None]) -> None:
        """Call ``hook()`` at shutdown, once the jobs that ran have finished (at interpreter exit,
        even when registered while the exit hooks run, unlike ``atexit``'s)."""
        with self._lock:
            self._after_shutdown.append(hook)

    # --- the threads ---
    def _start(self, target: Callable[[Any], None], arg: Any, thread_name: str) -> str:
        """Start a daemon thread running ``target(arg)`` (``_lock`` held); why it could not ("" if it did)."""
        thread = threading.Thread(target=self._thread_main, args=(target, arg), name=thread_name, daemon=True)
        self._threads.add(thread)
        try:
            thread.start()
        except RuntimeError as error:  # no thread to spare, or the interpreter is shutting down
            self._threads.discard(thread)
            return f"no thread could be started ({error})"
        return ""

    def _thread_main(self, target: Callable[[Any], None], arg: Any) -> None:
        try:
            target(arg)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _run(self, job: Job) -> None:
        self._enter()
        try:
            job._run()
        finally:
            self._leave()
            self._forget(job)  # (before it is seen done: a job seen done is forgotten)
            job._finish()

    def _enter(self) -> None:
        with self._lock:
            self._running += 1
            if self._running == 1 and sys.getswitchinterval() > SWITCH_INTERVAL:
                self._switch_interval = sys.getswitchinterval()
                sys.setswitchinterval(SWITCH_INTERVAL)

    def _leave(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0 and self._switch_interval is not None:
                if abs(sys.getswitchinterval() - SWITCH_INTERVAL) < 1e-7:  # (unless changed meanwhile)
                    sys.setswitchinterval(self._switch_interval)
                self._switch_interval = None

    def _serve(self, queue: str) -> None:
        while True:
            with self._lock:
                waiting = self._queues.get(queue)
                if not waiting:
                    self._serving.discard(queue)
                    return
                job = waiting.popleft()
            self._run(job)

    def _forget(self, job: Job) -> None:
        if not job.once:
            with self._lock:
                if self._jobs.get(job.name) is job:
                    del self._jobs[job.name]

    def _after_fork(self) -> None:
        """In a forked child: the parent's threads are not here; their jobs never finish here."""
        self._lock = threading.Lock()
        unfinished = [job for job in self._jobs.values() if not job.done]
        for job in unfinished:
            del self._jobs[job.name]
        self._queues.clear()
        self._threads.clear()
        self._serving.clear()
        self._running = 0  # (no job runs here: the process's own switch interval again)
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None
        for job in unfinished:
            job._lock = threading.Lock()
            job._drop("the process forked while it was pending")


background = BackgroundService()
atexit.register(background.shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=background._after_fork)
