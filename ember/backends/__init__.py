"""Backends: the NumPy reference interpreter (``reference``: the rule tables that define every
primitive) and the native CPU backend (``cpu``: LLVM kernels, BLAS, native loops, and the
reference for whatever it does not lower), with the disk cache of compiled code. The
executables that run them are ``ember.runtime.executable``'s."""
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
