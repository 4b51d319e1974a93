"""A pytest plugin that appends each test's outcome to a file as the test ends, one line per
test (``outcome<TAB>node id<TAB>peak resident memory in MiB``), so that what a run found
survives a run that is stopped or killed part way (``benchmarks/library_suite.py``).
The file is ``$SUITE_OUTCOMES`` (set by the script); without it the plugin does nothing."""
from __future__ import annotations

import os
import resource

_PATH = os.environ.get("SUITE_OUTCOMES")


def pytest_runtest_logreport(report) -> None:  # noqa: ANN001  (pytest's TestReport)
    if not _PATH:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed") \
            or (report.when == "teardown" and report.outcome == "failed"):
        outcome = "error" if report.when != "call" and report.outcome == "failed" else report.outcome
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        with open(_PATH, "a") as f:
            f.write(f"{outcome}\t{report.nodeid}\t{peak:.0f}\n")
