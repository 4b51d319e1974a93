"""The per-step time of a program's training step once it is warm (shared by the programs here)."""
import os
import time

import numpy as np


def steady_step_seconds(step) -> float:
    """Median seconds of ``step()`` (which must wait for its results) over ``$PROGRAM_TIMED_STEPS``
    calls (default 20), after calling it for ``$PROGRAM_WARMUP_SECONDS`` (default 2): compiles,
    and under ember the native code that a large program's first calls wait for in the
    background, are then behind it. (The tests set both low: they check results, not speed.)"""
    end = time.perf_counter() + float(os.environ.get("PROGRAM_WARMUP_SECONDS", "2"))
    step()
    while time.perf_counter() < end:
        step()
    times = []
    for _ in range(int(os.environ.get("PROGRAM_TIMED_STEPS", "20"))):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return float(np.median(times))
