"""A library's own test suite under JAX and under ember, side by side:
``python -m benchmarks.library_suite [LIBRARY] [--jobs N] [--timeout S] [-k EXPR] [--keep DIR]``.

The suite is the one the library ships in its wheel (optax's ``*_test.py`` files are inside the
installed package), run with ``pytest --pyargs LIBRARY`` twice: once as installed, against JAX,
and once with ``ember.install_as_jax()`` loaded before anything else (``benchmarks/ember_first.py``,
an early pytest plugin, so that xdist's workers load it too). Each run writes a JUnit report; the
script prints the counts of both, the wall time of each and their ratio, and every test whose
outcome differs (a test JAX passes that ember does not is what the compatibility work is about).
It needs the ``suites`` extra (``pip install -e ".[suites]"``: the library's test dependencies).

The runs take minutes (optax 0.2.8: about 2,600 tests), so this is not part of the test command.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTCOMES = ("passed", "failed", "error", "skipped")


def run_suite(library: str, under_ember: bool, report: Path, jobs: int, timeout: float, select: str) -> float:
    """Runs the suite once; returns its wall time in seconds (the report says what passed)."""
    args = [sys.executable, "-m", "pytest", "--pyargs", library, "-q", "-p", "no:cacheprovider",
            f"--junitxml={report}", f"--timeout={timeout}", "-o", "junit_family=xunit1"]
    args += ["-n", str(jobs)] if jobs > 1 else ["-p", "no:xdist"]
    if select:
        args += ["-k", select]
    if under_ember:
        args[3:3] = ["-p", "benchmarks.ember_first"]  # (before the library's own imports)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.perf_counter()
    subprocess.run(args, cwd=report.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def outcomes(report: Path) -> dict[str, str]:
    """``{test id: outcome}`` from a JUnit report (a test that ran twice keeps its worst outcome)."""
    results: dict[str, str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcome = "failed" if "failure" in kinds else "error" if "error" in kinds else \
            "skipped" if "skipped" in kinds else "passed"
        if results.get(test, "passed") == "passed":
            results[test] = outcome
    return results


def compare(jax: dict[str, str], ember: dict[str, str]) -> tuple[list[str], list[str]]:
    """(tests JAX passes and ember does not, tests ember passes and JAX does not)."""
    lost = sorted(t for t, o in jax.items() if o == "passed" and ember.get(t, "missing") != "passed")
    gained = sorted(t for t, o in ember.items() if o == "passed" and jax.get(t, "missing") != "passed")
    return lost, gained


def counts(results: dict[str, str]) -> str:
    return " ".join(f"{sum(o == kind for o in results.values())} {kind}" for kind in OUTCOMES)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", nargs="?", default="optax")
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers per run (1: none)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a single test may take")
    parser.add_argument("-k", dest="select", default="", help="pytest's -k expression, to run part of the suite")
    parser.add_argument("--keep", type=Path, default=Path("library-suite-reports"),
                        help="the folder for the two JUnit reports")
    parser.add_argument("--reuse", action="store_true", help="compare the reports already in --keep, run nothing")
    options = parser.parse_args(argv)
    options.keep.mkdir(parents=True, exist_ok=True)
    reports = {name: (options.keep / f"{options.library}-{name}.xml").resolve() for name in ("jax", "ember")}
    seconds = {}
    for name, report in reports.items():
        if not options.reuse:
            seconds[name] = run_suite(options.library, name == "ember", report, options.jobs, options.timeout,
                                      options.select)
    results = {name: outcomes(report) for name, report in reports.items()}
    lost, gained = compare(results["jax"], results["ember"])
    print(f"| {options.library}'s own suite | tests | outcomes | wall time |")
    print("|---|---:|---|---:|")
    for name in ("jax", "ember"):
        wall = f"{seconds[name]:.0f} s" if name in seconds else "(reused)"
        print(f"| {name} | {len(results[name])} | {counts(results[name])} | {wall} |")
    if seconds:
        print(f"\nember/JAX wall time: {seconds['ember'] / seconds['jax']:.2f}")
    passed_by_jax = sum(o == "passed" for o in results["jax"].values())
    print(f"ember passes {passed_by_jax - len(lost)} of the {passed_by_jax} tests JAX passes")
    for title, tests in (("JAX passes, ember does not", lost), ("ember passes, JAX does not", gained)):
        if tests:
            print(f"\n{title} ({len(tests)}):")
            other = results["ember"] if title.startswith("JAX") else results["jax"]
            for test in tests:
                print(f"  {test}: {other.get(test, 'missing')}")
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
