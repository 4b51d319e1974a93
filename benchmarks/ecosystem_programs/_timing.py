"""The per-step time of a program's training step once it is warm (shared by the programs here)."""
import os
import time

import numpy as np


def steady_step_seconds(step) -> float:
    """Median seconds of ``step()`` (which must wait for its results) over ``$PROGRAM_TIMED_STEPS``
    calls (default 20), once warm: after calling it for ``$PROGRAM_WARMUP_SECONDS`` (default 2),
    and then until the median of half a second of calls stops falling (at most 10 s more), so
    that compiles, and under ember the native code that a large program's first calls wait for
    in the background, are behind it. (The tests set both low: they check results, not speed.)"""
    start = time.perf_counter()
    end = start + float(os.environ.get("PROGRAM_WARMUP_SECONDS", "2"))
    step()
    while time.perf_counter() < end:
        step()
    previous = None
    while end > start + 0.5 and time.perf_counter() < end + 10:
        window, window_end = [], time.perf_counter() + 0.5
        while time.perf_counter() < window_end:
            t = time.perf_counter()
            step()
            window.append(time.perf_counter() - t)
        current = float(np.median(window))
        if previous is not None and current > 0.9 * previous:
            break
        previous = current
    times = []
    for _ in range(int(os.environ.get("PROGRAM_TIMED_STEPS", "20"))):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return float(np.median(times))
