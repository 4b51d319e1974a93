"""Compiling independent modules at once (``jit.compile_many``) in compile worker processes: the
same machine code as compiling in this process, the cache contract of ``compile_or_reuse``,
workers that die, hang, err or differ from this process, the opt-out, and no worker outliving
its parent."""
import ctypes
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
from llvmlite import ir

import ember
import ember.numpy as jnp
from ember.backends.cpu import compile_workers, jit, object_code

pytestmark = pytest.mark.skipif(object_code.elf_machine(jit.new_module("m").triple) is None or os.name != "posix",
                                reason="compile workers run on POSIX hosts with ELF objects")

N = 4096


@pytest.fixture(autouse=True)
def pool(monkeypatch, tmp_path):
    """Fresh workers for each test (one, as on a 2-core machine), every module worth sending, and a
    private disk cache; afterwards no worker is left running."""
    compile_workers.shutdown()
    monkeypatch.setattr(compile_workers, "_failures", 0)
    monkeypatch.setattr(compile_workers, "_disabled", "")
    monkeypatch.setattr(compile_workers, "_warned", False)
    monkeypatch.setattr(compile_workers, "MIN_SOURCE_CHARS", 0)
    monkeypatch.setattr(compile_workers, "MIN_QUICK_SOURCE_CHARS", 0)
    monkeypatch.setattr(compile_workers, "START_SOURCE_CHARS", 0)
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "1")
    with ember.config.override(cache_dir=str(tmp_path), persistent_cache=True):
        yield tmp_path / "native"
    processes = [w.process for w in compile_workers.workers()]
    compile_workers.shutdown()
    assert all(p.returncode is not None for p in processes)


_ir_texts: dict[str, str] = {}


def program_ir(name: str) -> str:
    """The IR text of a real program's module: one elementwise kernel over N float32 (vector math,
    vectorized loops), compiled once by jit to get it."""
    if name not in _ir_texts:
        functions = {"sin": lambda x: jnp.sin(x) * 1.5 + 0.25, "tanh": lambda x: jnp.tanh(x * 0.7) - x,
                     "exp": lambda x: jnp.exp(-x * x) + jnp.log1p(jnp.abs(x)), "selu": ember.nn.selu}
        before = set(jit._compiled)
        with ember.config.override(persistent_cache=False):
            ember.block_until_ready(ember.jit(functions[name])(np.linspace(-3, 3, N, dtype=np.float32)))
        (_ir_texts[name],) = [key for key in jit._compiled if key not in before  # (not the dispatcher's)
                              and re.search(r'^define void @"f0_', key, re.M)]
    return _ir_texts[name]


def run_kernel(compiled: jit.CompiledModule, source: str, x: np.ndarray) -> np.ndarray:
    """Call the module's kernel (buffers: the input, then the output) over all of ``x``."""
    (name,) = re.findall(r'^define void @"([^"]+)"\(i8\*\* ', source, re.M)
    out = np.empty_like(x)
    buffers = (ctypes.c_void_p * 2)(x.ctypes.data, out.ctypes.data)
    compiled.kernel(name)(ctypes.cast(buffers, ctypes.c_void_p), 0, x.size)
    return out


def requests(monkeypatch) -> list[int]:
    """Count the modules that workers generate: the list grows by one IR length per request."""
    sent: list[int] = []
    generate = compile_workers.Worker.generate

    def counting(self, source, quick):
        sent.append(len(source))
        return generate(self, source, quick)

    monkeypatch.setattr(compile_workers.Worker, "generate", counting)
    return sent


def ready_workers(number: int = 1) -> list[compile_workers.Worker]:
    """Start the workers and wait until ``number`` have greeted (so that modules go to them)."""
    jit.start_workers()
    deadline = time.monotonic() + 60
    while len(compile_workers.workers()) < number or not all(w.ready for w in compile_workers.workers()):
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.01)
    return compile_workers.workers()


def worker_ready() -> compile_workers.Worker:
    (worker,) = ready_workers()
    return worker


def entry_bytes(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}


def test_a_worker_generates_the_bytes_this_process_generates():
    worker = compile_workers.Worker()
    try:
        worker.wait_ready(jit.identity())
        for name in ("sin", "selu"):
            for quick in (False, True):
                source = program_ir(name)
                assert worker.generate(source, quick) == jit.generate_payload(source, quick)
    finally:
        worker.stop()
    assert worker.process.returncode == 0


def test_compile_many_computes_what_serial_compiles_compute_bit_for_bit(monkeypatch, pool):
    names = ["sin", "tanh", "exp", "selu"]
    sources = [program_ir(name) for name in names]
    x = np.linspace(-4, 4, N, dtype=np.float32)
    jit.clear()
    serial = [run_kernel(jit.CompiledModule(source), source, x) for source in sources]
    serial_entries = entry_bytes(pool)
    for entry in pool.iterdir():
        entry.unlink()

    jit.clear()
    ready_workers()
    sent = requests(monkeypatch)
    results = jit.compile_many(sources)
    assert [origin for _, origin in results] == ["compiled"] * 4
    assert sent, "no module went to a worker"
    np.testing.assert_allclose(serial[0], np.sin(x) * 1.5 + 0.25, rtol=1e-5, atol=1e-6)
    for (compiled, _), source, expected in zip(results, sources, serial):
        assert compiled.source == source
        np.testing.assert_array_equal(run_kernel(compiled, source, x), expected)
    # The disk entries, written from the workers' payloads, hold the very bytes of the serial compiles.
    assert entry_bytes(pool) == serial_entries


def test_the_contract_of_compile_or_reuse(monkeypatch, pool):
    sin, tanh, exp = (program_ir(name) for name in ("sin", "tanh", "exp"))
    jit.clear()
    ready_workers()
    first = jit.compile_many([sin, tanh, sin])
    assert [origin for _, origin in first] == ["compiled", "compiled", "reused"]
    assert first[0][0] is first[2][0]
    again = jit.compile_many([tanh, exp, sin])
    assert [origin for _, origin in again] == ["reused", "compiled", "reused"]
    assert again[0][0] is first[1][0] and again[2][0] is first[0][0]
    assert jit.compile_or_reuse(exp)[1] == "reused"
    jit.clear()
    sent = requests(monkeypatch)
    loaded = jit.compile_many([sin, tanh, exp])
    assert [origin for _, origin in loaded] == ["disk"] * 3 and not sent  # no worker asked for cached code
    quick = jit.compile_many([sin, tanh], quick=True)
    assert [origin for _, origin in quick] == ["compiled"] * 2 and all(c.quick for c, _ in quick)
    x = np.linspace(-1, 1, N, dtype=np.float32)
    np.testing.assert_allclose(run_kernel(quick[0][0], sin, x), np.sin(x) * 1.5 + 0.25, rtol=1e-5, atol=1e-6)


def test_several_workers(monkeypatch):
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "2")
    assert jit.parallel_compiles() == 3
    sources = [program_ir(name) for name in ("sin", "tanh", "exp", "selu")]
    jit.clear()
    ready_workers(2)
    sent = requests(monkeypatch)
    results = jit.compile_many(sources)
    assert [origin for _, origin in results] == ["compiled"] * 4 and len(sent) >= 2
    assert len(compile_workers.workers()) == 2


def test_small_modules_stay_in_this_process(monkeypatch):
    monkeypatch.setattr(compile_workers, "MIN_SOURCE_CHARS", 10**9)
    sources = [program_ir(name) for name in ("sin", "tanh")]
    jit.clear()
    assert [origin for _, origin in jit.compile_many(sources)] == ["compiled"] * 2
    assert compile_workers.workers() == []  # none started for nothing


def test_workers_start_for_enough_work_and_serve_less(monkeypatch):
    sources = [program_ir(name) for name in ("sin", "tanh")]
    monkeypatch.setattr(compile_workers, "START_SOURCE_CHARS", sum(map(len, sources)) + 1)
    with ember.config.override(persistent_cache=False):
        jit.clear()
        jit.compile_many(sources)
        assert compile_workers.workers() == []  # not worth starting one
        ready_workers()
        sent = requests(monkeypatch)
        jit.clear()
        assert [origin for _, origin in jit.compile_many(sources)] == ["compiled"] * 2
    assert sent  # a running one is worth using


def test_the_opt_out(monkeypatch):
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "0")
    assert jit.parallel_compiles() == 1
    jit.start_workers()
    sources = [program_ir(name) for name in ("sin", "tanh", "exp")]
    jit.clear()
    assert [origin for _, origin in jit.compile_many(sources)] == ["compiled"] * 3
    assert compile_workers.workers() == []


def test_start_workers_warms_them_in_the_background(monkeypatch):
    # No worker can become ready until the test releases it: start_workers returning at all shows
    # that the caller does not wait for them (the join's timeout only guards against a hang).
    release = threading.Event()
    wait_ready = compile_workers.Worker.wait_ready

    def held(self, *args, **kwargs):
        release.wait()
        return wait_ready(self, *args, **kwargs)

    monkeypatch.setattr(compile_workers.Worker, "wait_ready", held)
    caller = threading.Thread(target=jit.start_workers)
    caller.start()
    caller.join(timeout=600)
    returned = not caller.is_alive()
    release.set()
    assert returned
    ready_workers()
    jit.start_workers()  # (already running: nothing more)
    assert len(compile_workers.workers()) == 1




@pytest.mark.parametrize("failure", ["killed before", "dies during", "hangs", "errs"])
def test_a_failing_worker_means_compiling_here(monkeypatch, caplog, failure):
    sources = [program_ir(name) for name in ("sin", "tanh", "exp")]
    x = np.linspace(-2, 2, N, dtype=np.float32)
    jit.clear()
    expected = [run_kernel(jit.CompiledModule(s, look_up=False), s, x) for s in sources]
    worker = worker_ready()
    generate = compile_workers.Worker.generate
    if failure == "killed before":
        worker.process.kill()
    elif failure == "dies during":
        def dying(self, source, quick):
            self.process.send_signal(signal.SIGKILL)
            return generate(self, source, quick)
        monkeypatch.setattr(compile_workers.Worker, "generate", dying)
    elif failure == "hangs":
        monkeypatch.setattr(compile_workers, "TIMEOUT_S", 0.5)
        monkeypatch.setattr(compile_workers, "TIMEOUT_S_PER_KB", 0.0)
        worker.process.send_signal(signal.SIGSTOP)
    else:
        def erring(self, source, quick):
            return generate(self, "this is not LLVM IR", quick)
        monkeypatch.setattr(compile_workers.Worker, "generate", erring)
    jit.clear()
    with ember.config.override(log_compiles=True, persistent_cache=False), caplog.at_level(logging.WARNING, "ember"):
        start = time.perf_counter()
        results = jit.compile_many(sources)
        assert time.perf_counter() - start < 30
    assert [origin for _, origin in results] == ["compiled"] * 3
    for (compiled, _), source, want in zip(results, sources, expected):
        np.testing.assert_array_equal(run_kernel(compiled, source, x), want)
    warnings = [r.getMessage() for r in caplog.records if "compile worker" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once per process
    if failure == "errs":
        assert compile_workers.workers() == [worker]  # an error is the module's, the worker stays
    else:
        assert worker not in compile_workers.workers()
        assert worker.process.returncode is not None  # killed and reaped
    with ember.config.override(log_compiles=True), caplog.at_level(logging.WARNING, "ember"):
        jit.clear()
        jit.compile_many(sources)
    assert len([r for r in caplog.records if "compile worker" in r.getMessage()]) == 1


def test_repeated_failures_turn_workers_off(monkeypatch):
    monkeypatch.setattr(compile_workers, "MAX_FAILURES", 2)
    sources = [program_ir(name) for name in ("sin", "tanh")]
    with ember.config.override(persistent_cache=False):
        for _ in range(2):
            worker_ready().process.kill()
            jit.clear()
            assert [origin for _, origin in jit.compile_many(sources)] == ["compiled"] * 2
        assert compile_workers.count() == 0 and jit.parallel_compiles() == 1
        jit.clear()
        jit.compile_many(sources)
    assert compile_workers.workers() == []


def test_a_worker_that_would_generate_other_code_is_not_used(monkeypatch):
    monkeypatch.setattr(jit, "identity", lambda: "another LLVM")
    jit.start_workers()
    deadline = time.monotonic() + 60
    while compile_workers.count():  # the background thread finds it out
        assert time.monotonic() < deadline
        time.sleep(0.01)
    sent = requests(monkeypatch)
    sources = [program_ir(name) for name in ("sin", "tanh")]
    jit.clear()
    assert [origin for _, origin in jit.compile_many(sources)] == ["compiled"] * 2
    assert not sent and compile_workers.count() == 0


def test_an_invalid_module_raises_as_it_does_serially():
    module = jit.new_module("broken")
    fn = ir.Function(module, ir.FunctionType(ir.IntType(64), [ir.IntType(64)]), name="f")
    ir.IRBuilder(fn.append_basic_block("entry")).ret(ir.Constant(ir.IntType(32), 0))  # i32 returned as i64
    sin = program_ir("sin")
    jit.clear()
    with pytest.raises(RuntimeError, match="parsing error"):
        jit.compile_many([sin, module])
    assert not jit._compiling  # nothing left claimed
    assert jit.compile_many([sin])[0][1] == "disk"  # (compiled before the error)


def test_the_default_number_of_workers(monkeypatch):
    monkeypatch.delenv("EMBER_COMPILE_WORKERS")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert compile_workers.count() == min(cores - 1, compile_workers.DEFAULT_MAX)
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "3")
    assert compile_workers.count() == 3 and jit.parallel_compiles() == 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_leaves_the_parents_workers_alone():
    (worker,) = ready_workers()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (3.12: forking with threads)
        warnings.simplefilter("ignore", RuntimeWarning)  # (JAX's at-fork hook, where JAX is loaded)
        pid = os.fork()
    if pid == 0:  # the child: no workers of its own, the parent's pipes closed on its side
        os._exit(0 if compile_workers.workers() == [] and worker.process.stdin.closed else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert compile_workers.workers() == [worker]
    source = program_ir("sin")
    assert worker.generate(source, False) == jit.generate_payload(source)


def exited(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie of a parent that no longer runs)."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def wait_exited(pids: list[int], seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while not all(exited(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_shutdown_stops_and_reaps_the_workers(monkeypatch):
    monkeypatch.setenv("EMBER_COMPILE_WORKERS", "2")
    workers = ready_workers(2)
    jit.stop_workers()
    assert compile_workers.workers() == []
    assert all(w.process.returncode == 0 for w in workers)  # exited on end of file, and reaped
    assert all(not os.path.exists(f"/proc/{w.process.pid}") for w in workers)  # no zombie


CHILD = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, {root!r})
    from ember.backends.cpu import compile_workers, jit
    jit.start_workers()
    while not (compile_workers.workers() and all(w.ready for w in compile_workers.workers())):
        time.sleep(0.01)
    print(*[w.process.pid for w in compile_workers.workers()], flush=True)
    if sys.argv[1] == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.parametrize("end", ["exits", "killed"])
def test_workers_end_with_their_parent(end):
    root = os.path.dirname(os.path.dirname(os.path.abspath(ember.__file__)))
    env = dict(os.environ, EMBER_COMPILE_WORKERS="2")
    child = subprocess.run([sys.executable, "-c", CHILD.format(root=root), end], env=env, capture_output=True,
                           text=True, timeout=120)
    assert child.returncode == (0 if end == "exits" else -signal.SIGKILL), child.stderr
    pids = [int(pid) for pid in child.stdout.split()]
    assert len(pids) == 2
    assert wait_exited(pids)
