"""The background service (``ember.core.background``) and the cache registry (``ember.core.caches``)."""
import sys
import threading

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.core import caches
from ember.core.background import SWITCH_INTERVAL, BackgroundService, JobDropped, background


@pytest.fixture
def service():
    s = BackgroundService()
    yield s
    s.shutdown("the test ended")


def test_a_job_runs_in_the_background_and_keeps_its_result(service):
    job = service.submit("add", lambda a, b: a + b, 2, 3)
    assert job.wait(10) and job.done and job.started and not job.dropped
    assert job.result == 5 and job.error is None
    assert job.name == "add" and service.job("add") is job  # (``once``: known after it finished)


def test_a_name_runs_once_while_known(service):
    runs = []
    release = threading.Event()
    first = service.submit("warm", lambda: (release.wait(10), runs.append(1)))
    second = service.submit("warm", lambda: runs.append(2))
    assert second is first
    release.set()
    first.wait(10)
    assert service.submit("warm", lambda: runs.append(3)) is first  # finished, submitted ``once``
    assert runs == [1]


def test_a_job_not_once_is_forgotten_when_done_and_can_run_again(service):
    runs = []
    first = service.submit("start", runs.append, 1, once=False)
    assert first.wait(10)
    assert service.drain(10)
    assert service.job("start") is None
    assert service.submit("start", runs.append, 2, once=False).wait(10)
    assert runs == [1, 2]


def test_a_queue_runs_its_jobs_one_at_a_time_in_order(service):
    order, running, overlap = [], [], []

    def work(i):
        running.append(i)
        overlap.append(len(running))
        order.append(i)
        running.remove(i)

    jobs = [service.submit(f"job {i}", work, i, queue="q") for i in range(20)]
    assert service.drain(30)
    assert all(job.done for job in jobs)
    assert order == list(range(20)) and max(overlap) == 1


def test_a_job_someone_waits_for_goes_to_the_front_of_its_queue(service):
    order, started, release = [], threading.Event(), threading.Event()
    running = service.submit("running", lambda: (started.set(), release.wait(10), order.append("running")),
                             queue="q")
    assert started.wait(10)
    queued = {name: service.submit(name, order.append, name, queue="q") for name in "abc"}
    assert not service.hurry(running)  # (started)
    assert not service.hurry(queued["a"])  # (the first of its queue)
    assert service.hurry(queued["c"]) and not service.hurry(queued["c"])  # (at the front now)
    assert not service.hurry(service.submit("alone", lambda: None))  # (a job of no queue)
    release.set()
    assert service.drain(30)
    assert order == ["running", "c", "a", "b"]
    assert not service.hurry(queued["a"])  # (done)


def test_an_exception_is_kept_in_the_job_not_raised_in_the_thread(service):
    def fail():
        raise ValueError("no LLVM today")

    job = service.submit("fail", fail)
    assert job.wait(10)
    assert isinstance(job.error, ValueError) and str(job.error) == "no LLVM today"
    assert not job.dropped and job.result is None


def test_callbacks_run_when_done_or_at_once(service):
    release = threading.Event()
    seen = []
    job = service.submit("slow", release.wait, 10)
    job.add_done_callback(lambda j: seen.append(("later", j.name)))
    assert seen == []
    release.set()
    job.wait(10)
    job.add_done_callback(lambda j: seen.append(("now", j.name)))
    assert seen == [("later", "slow"), ("now", "slow")]


def test_shutdown_finishes_what_runs_and_drops_what_waits(service):
    release, started = threading.Event(), threading.Event()
    running = service.submit("running", lambda: (started.set(), release.wait(10)) and "finished", queue="q")
    queued = service.submit("queued", lambda: "never", queue="q")
    assert started.wait(10)
    threading.Timer(0.05, release.set).start()
    service.shutdown("the test shuts it down")
    assert running.done and running.result == "finished" and running.error is None
    assert queued.done and queued.dropped and queued.result is None
    assert isinstance(queued.error, JobDropped)
    assert str(queued.error) == "background job 'queued' did not run: the test shuts it down"
    later = service.submit("later", lambda: "never")
    assert later.done and later.dropped and service.closing
    assert "the test shuts it down" in str(later.error)


def test_after_shutdown_hooks_run_once_the_running_jobs_have_finished(service):
    order, started, release = [], threading.Event(), threading.Event()

    def job():
        started.set()
        service.after_shutdown(lambda: order.append("hook"))  # (registered while it runs)
        release.wait(10)
        order.append("job")
    service.submit("running", job)
    assert started.wait(10)
    threading.Timer(0.1, release.set).start()
    service.shutdown("the test ended")
    assert order == ["job", "hook"]


def test_drain_waits_for_jobs_submitted_by_jobs(service):
    done = []

    def outer():
        service.submit("inner", lambda: done.append("inner"), queue="q")
        done.append("outer")

    service.submit("outer", outer, queue="q")
    assert service.drain(30)
    assert done == ["outer", "inner"]


def test_drain_times_out_and_says_so(service):
    release = threading.Event()
    service.submit("stuck", release.wait, 10)
    assert service.drain(0.01) is False
    release.set()
    assert service.drain(10) is True


def test_the_cpu_warm_ups_are_jobs_of_the_one_service():
    pytest.importorskip("llvmlite")
    if ember.config.backend != "cpu":
        pytest.skip("the CPU backend's warm-ups")
    from ember.backends.cpu import entry, fft, gemm

    jobs = [entry.prepare_dispatcher(), gemm.warm_up(np.float32), fft.warm_up(np.float32)]
    assert [background.job(job.name) for job in jobs] == jobs
    assert ember.wait_for_compiles(timeout=300)
    assert all(job.done and job.error is None for job in jobs)
    assert gemm.ready(np.float32) and fft.ready(np.float32) and entry.ready_dispatcher() is not None


# --- the cache registry ----------------------------------------------------------------------
def test_clear_caches_empties_every_registered_cache(monkeypatch):
    cleared = []
    monkeypatch.setattr(caches, "_caches", dict(caches._caches))
    caches.register_cache("test: memory", lambda: cleared.append("memory"), lambda: 7)
    caches.register_cache("test: disk", lambda: cleared.append("disk"), on_disk=True)
    monkeypatch.setattr(caches, "_caches", {k: v for k, v in caches._caches.items() if k.startswith("test:")})
    assert caches.cache_sizes() == {"test: memory": 7, "test: disk": None}
    ember.clear_caches(disk=False)
    assert cleared == ["memory"]
    ember.clear_caches()
    assert cleared == ["memory", "memory", "disk"]


def test_a_cache_name_is_one_caches(monkeypatch):
    monkeypatch.setattr(caches, "_caches", dict(caches._caches))
    with pytest.raises(ValueError, match=r"a cache named 'jit: executables shared by equal programs' is "
                                         r"registered already \(by ember.runtime.compile_cache\)"):
        caches.register_cache("jit: executables shared by equal programs", lambda: None)


def test_the_caches_register_themselves_and_clear_caches_empties_them():
    f = ember.jit(lambda x: jnp.sin(x) * 2.0)
    np.testing.assert_allclose(np.asarray(f(jnp.arange(3.0))), np.sin(np.arange(3.0)) * 2.0, rtol=1e-6)
    names = {record.name for record in caches.registered_caches()}
    assert {"jit: traced programs and executables, per function", "jit: executables shared by equal programs",
            "disk: machine code of compiled modules"} <= names
    if ember.config.backend == "cpu":
        assert {"cpu: compiled modules, by IR text", "cpu: functions lent to equal kernels"} <= names
    sizes = caches.cache_sizes()
    assert sizes["jit: traced programs and executables, per function"] >= 1
    assert sizes["jit: executables shared by equal programs"] >= 1
    ember.clear_caches(disk=False)
    sizes = caches.cache_sizes()
    assert {name: size for name, size in sizes.items() if not name.startswith("disk")} == \
        {name: 0 for name in sizes if not name.startswith("disk")}


def test_jobs_run_with_a_short_switch_interval_and_give_the_processs_back(service):
    before = sys.getswitchinterval()
    seen, release = [], threading.Event()
    job = service.submit("compile", lambda: (seen.append(sys.getswitchinterval()), release.wait(10)))
    second = service.submit("another", lambda: seen.append(sys.getswitchinterval()))
    assert second.wait(10)
    release.set()
    assert job.wait(10)
    assert seen == [pytest.approx(SWITCH_INTERVAL)] * 2
    assert sys.getswitchinterval() == pytest.approx(before)  # (once the last running job is done)


def test_a_processs_shorter_switch_interval_is_left_alone(service):
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.0001)
        seen = []
        assert service.submit("compile", lambda: seen.append(sys.getswitchinterval())).wait(10)
        assert seen == [pytest.approx(0.0001)] and sys.getswitchinterval() == pytest.approx(0.0001)
    finally:
        sys.setswitchinterval(before)
