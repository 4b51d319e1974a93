"""Several processes over MPI (ember.distributed): each test starts ``mpiexec -n 2`` itself, on
localhost, with a bound on its time. The programs the processes run are in tests/mpi_programs/.
They skip, saying why, only where mpi4py or an MPI launcher cannot be found (``pip install
'ember[distributed]'`` installs both: mpi4py and the mpich wheel, whose ``mpiexec`` lands next
to the Python executable)."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "mpi_programs"


def _mpiexec() -> str | None:
    here = Path(sys.executable).parent / "mpiexec"  # (the mpich wheel's launcher, in this environment's bin)
    return str(here) if here.exists() else shutil.which("mpiexec")


MPIEXEC = _mpiexec()
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(
    not (HAVE_MPI4PY and MPIEXEC),
    reason=f"MPI is not installed here ({'no mpi4py' if not HAVE_MPI4PY else 'no mpiexec'}): "
           "pip install 'ember[distributed]' (mpi4py and the mpich wheel) to run the multi-process tests")


def _env(**extra: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               EMBER_COLLECTIVE_TIMEOUT="30", EMBER_NUM_CPU_DEVICES="1")
    # (EMBER_CACHE_DIR is the suite's private disk cache, tests/conftest.py: the processes share it,
    # and its entries are written atomically, so two processes compiling the same program do not clash)
    env.update(extra)
    return env


def _mpirun(program: str, *args: str, n: int = 2, launcher_flags: tuple = (), timeout: float = 600,
            **env: str) -> subprocess.CompletedProcess:
    command = [MPIEXEC, *launcher_flags, "-n", str(n), sys.executable, str(PROGRAMS / program), *args]
    # (stdin: nothing; mpiexec forwards its stdin to rank 0, and a pytest-xdist worker's stdin is its channel)
    return subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                          env=_env(**env), cwd=ROOT)


def _results(out: subprocess.CompletedProcess, tag: str) -> list:
    assert out.returncode == 0, f"rc={out.returncode}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
    # (each report is parsed where its tag starts: two processes' lines may interleave in mpiexec's output)
    decoder = json.JSONDecoder()
    return [decoder.raw_decode(chunk.lstrip())[0] for chunk in out.stdout.split(tag)[1:]]


ALL = ["psum", "pmean", "pmax", "pmin", "all_gather", "psum_scatter", "ppermute", "all_to_all", "axis_index",
       "psum(bool)", "psum to P()", "pmap psum", "pmap axis_index"]
TWO_D = ["2d psum p", "2d psum d", "2d psum pd", "2d pmax p", "2d all_gather p", "2d ppermute p", "2d axis_index pd"]


@needs_mpi
@pytest.mark.parametrize("local", [1, 2])
def test_devices_and_every_collective_across_two_processes(local):
    reports = _results(_mpirun("collectives.py", EMBER_NUM_CPU_DEVICES=str(local)), "RESULT ")
    assert sorted(r["rank"] for r in reports) == [0, 1]
    for r in reports:
        assert r["processes"] == 2
        assert r["devices"] == [f"cpu:{i}" for i in range(2 * local)]
        assert r["checked"] == ALL + (TWO_D if local > 1 else [])


@needs_mpi
def test_data_parallel_training_on_two_processes_matches_one_process_on_the_whole_batch():
    (parallel,) = _results(_mpirun("mlp.py", "mpi", "6"), "LOSSES ")
    single_run = subprocess.run([sys.executable, str(PROGRAMS / "mlp.py"), "single", "6"], capture_output=True,
                                text=True, timeout=600, env=_env(), cwd=ROOT, stdin=subprocess.DEVNULL)
    (single,) = _results(single_run, "LOSSES ")
    assert len(parallel) == len(single) == 6 and parallel[-1] < parallel[0]
    assert parallel == pytest.approx(single, rel=1e-5, abs=1e-6)


@needs_mpi
def test_a_process_that_dies_mid_run_makes_the_other_fail_clearly_in_bounded_time():
    # Launcher cleanup off: the survivor is left running, and its own deadline must end the run. The
    # bound is on the survivor's wait, which it measures itself (starting and compiling, which a loaded
    # machine slows, are outside it); the subprocess timeout only guards against a hang.
    out = _mpirun("dies.py", launcher_flags=("-disable-auto-cleanup",), timeout=600, EMBER_COLLECTIVE_TIMEOUT="2")
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert "rank 0: first psum" in text and "rank 1: first psum" in text
    assert "CollectiveTimeoutError" in text and "the collective psum over the mesh axis 'i'" in text, text
    assert "on process 0 of 2 processes" in text and "second psum returned" not in text
    waited = float(re.search(r"rank 0: the second psum failed after ([0-9.]+) s", text).group(1))
    assert 2.0 <= waited < 30.0, f"the survivor waited {waited:.1f} s for a 2 s collective timeout"


def test_an_aborting_process_waits_until_the_launcher_has_read_its_output():
    # (mpiexec reads a process's output through a pipe and stops when the run is aborted: the
    # traceback of a CollectiveTimeoutError lost its last lines when the Abort came first)
    code = """
import sys
from ember.distributed import _wait_until_read
sys.stderr.write("written\\n"); sys.stderr.flush()
sys.stdout.write("x" * 1000); sys.stdout.flush()
_wait_until_read((sys.stdout,), 600)
import fcntl, termios, numpy as np
unread = np.zeros(1, np.int32)
fcntl.ioctl(sys.stdout.fileno(), termios.FIONREAD, unread)
sys.stderr.write(f"unread after the wait: {unread[0]}\\n")
"""
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, env=_env(), text=True)
    assert child.stderr.readline() == "written\n"
    time.sleep(0.5)  # (the child waits, its 1000 bytes unread: it returns only once they are read below)
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err
    assert len(out) == 1000 and err == "unread after the wait: 0\n"


@needs_mpi
def test_the_launcher_ends_the_run_when_a_process_dies():
    # With the launcher's default cleanup, mpiexec itself stops the others: never a hang either way.
    out = _mpirun("dies.py", timeout=600, EMBER_COLLECTIVE_TIMEOUT="30")
    assert out.returncode != 0 and "second psum returned" not in out.stdout


@needs_mpi
def test_initialize_checks_its_arguments_against_mpi():
    code = """
import ember
for kwargs in ({"num_processes": 3}, {"process_id": 1}):
    try:
        ember.distributed.initialize(**kwargs)
    except ValueError as e:
        print("REFUSED", e)
ember.distributed.initialize(coordinator_address="localhost:1234", num_processes=1, process_id=0)
assert ember.distributed.is_initialized() and ember.distributed.process_count() == 1
try:
    ember.distributed.initialize()
except RuntimeError as e:
    print("TWICE", e)
ember.distributed.shutdown()
assert not ember.distributed.is_initialized()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=_env(),
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert "REFUSED ember.distributed.initialize: num_processes=3, but MPI started 1 process(es)" in out.stdout
    assert "REFUSED ember.distributed.initialize: process_id=1, but this process is MPI rank 0 of 1" in out.stdout
    assert "TWICE distributed.initialize should only be called once." in out.stdout


def test_nothing_of_mpi_is_imported_unless_initialize_is_called():
    code = """
import sys
import ember
ember.install_as_jax()
import jax, jax.distributed
assert jax.distributed.initialize is ember.distributed.initialize and not jax.distributed.is_initialized()
assert jax.process_count() == 1 and jax.process_index() == 0 and jax.local_devices() == jax.devices()
assert "mpi4py" not in sys.modules, "mpi4py was imported"
print("OK")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=_env(),
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr


@needs_mpi
def test_xla_cpu_plugin_refuses_a_run_over_processes_clearly():
    """XLA's CPU plugin has no runtime across processes: initialize says so, in every process."""
    pytest.importorskip("lammps_jax_pjrt_cpu")
    reports = _results(_mpirun("pjrt_run.py", EMBER_PLATFORMS="xla_cpu"), "RESULT ")
    assert sorted(r["rank"] for r in reports) == [0, 1]
    for r in reports:
        assert not r["joined"]
        assert "XLA's CPU plugin" in r["error"] and "EMBER_PLATFORMS=cpu" in r["error"]
