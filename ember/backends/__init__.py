"""Backends: the NumPy reference interpreter (``reference``: the rule tables that define every
primitive) and the native CPU backend (``cpu``: LLVM kernels, BLAS, native loops, and the
reference for whatever it does not lower), with the disk cache of compiled code.

What a backend and its executables are is ``protocols``; ``registry`` holds the backends by
name and says which one runs programs (``config.backend``). Each backend registers itself:
``reference.executable`` and ``cpu_backend`` (light: the ``cpu`` package, which loads LLVM,
is imported at the first native compile)."""
import os


def thread_count() -> int:
    """``EMBER_NUM_THREADS`` if set, else the cores this process may run on: the threads native
    kernels split work over, and the workers the reference FFT uses (one count for both)."""
    if os.environ.get("EMBER_NUM_THREADS"):
        return max(1, int(os.environ["EMBER_NUM_THREADS"]))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1
