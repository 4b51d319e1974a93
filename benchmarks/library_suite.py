"""A library's own test suite under JAX and under ember, side by side:
``python -m benchmarks.library_suite [LIBRARY] [--jobs N] [--timeout S] [-k EXPR] [--recheck]``.

The suite is the one the library ships in its wheel (optax's ``*_test.py`` files are inside the
installed package), run with ``pytest --pyargs LIBRARY`` twice: once as installed, against JAX,
and once with ``ember.install_as_jax()`` loaded before anything else (``benchmarks/ember_first.py``,
an early pytest plugin, so that xdist's workers load it too). Each test's outcome is written as it
ends (``benchmarks/suite_outcomes.py``), so a run that is stopped still tells what it found. The
script prints the counts of both runs, the wall time of each and their ratio, and every test whose
outcome differs (a test JAX passes that ember does not is what the compatibility work is about).
``--recheck`` runs the whole suite under ember only, then under JAX just the tests ember did not
pass: the same list of differences in a fraction of the time, without the wall-time ratio.
It needs the ``suites`` extra (``pip install -e ".[suites]"``: the library's test dependencies).

The runs take minutes (optax 0.2.8: about 2,600 tests), so this is not part of the test command.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTCOMES = ("passed", "failed", "error", "skipped")
_RANK = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}  # (a test keeps its worst: subtests report apart)


def run_suite(library: str, under_ember: bool, record: Path, jobs: int, timeout: float, select: str,
              tests: list[str] | None = None) -> float:
    """Runs the suite (or ``tests``, node ids) once; returns its wall time in seconds. Each test's
    outcome goes to ``record`` as it ends."""
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "benchmarks.suite_outcomes",
            f"--timeout={timeout}"]
    args += ["-n", str(jobs)] if jobs > 1 else ["-p", "no:xdist"]
    if select:
        args += ["-k", select]
    if under_ember:
        args[3:3] = ["-p", "benchmarks.ember_first"]  # (before the library's own imports)
    args += tests if tests is not None else ["--pyargs", library]
    record.write_text("")
    # Node ids are relative to the package's folder (pytest's root for --pyargs): run from there.
    spec = importlib.util.find_spec(library)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{library} is not installed here (pip install -e '.[suites]')")
    env = dict(os.environ, SUITE_OUTCOMES=str(record),
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    start = time.perf_counter()
    subprocess.run(args, cwd=Path(spec.origin).parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def outcomes(record: Path) -> dict[str, str]:
    """``{node id: outcome}`` from a run's record."""
    results: dict[str, str] = {}
    for line in record.read_text().splitlines():
        outcome, test = line.split("\t")[:2]
        if _RANK[outcome] >= _RANK.get(results.get(test, "passed"), 0):
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
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("library", nargs="?", default="optax")
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers per run (1: none)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds a single test may take")
    parser.add_argument("-k", dest="select", default="", help="pytest's -k expression, to run part of the suite")
    parser.add_argument("--recheck", action="store_true",
                        help="run JAX only on the tests ember does not pass (no wall-time ratio)")
    parser.add_argument("--keep", type=Path, default=Path("library-suite-outcomes"),
                        help="the folder for the two runs' records")
    parser.add_argument("--reuse", action="store_true", help="compare the records already in --keep, run nothing")
    options = parser.parse_args(argv)
    options.keep.mkdir(parents=True, exist_ok=True)
    records = {name: (options.keep / f"{options.library}-{name}.tsv").resolve() for name in ("ember", "jax")}
    seconds = {}
    if not options.reuse:
        seconds["ember"] = run_suite(options.library, True, records["ember"], options.jobs, options.timeout,
                                     options.select)
        recheck = None
        if options.recheck:
            recheck = [t for t, o in outcomes(records["ember"]).items() if o != "passed"]
        if recheck == []:
            records["jax"].write_text("")  # (nothing to recheck)
        else:
            seconds["jax"] = run_suite(options.library, False, records["jax"], options.jobs, options.timeout,
                                       options.select, recheck)
    results = {name: outcomes(record) if record.exists() else {} for name, record in records.items()}
    if options.recheck:  # (JAX ran only where ember did not pass: the rest counts as passed by both)
        results["jax"] = {**{t: "passed" for t in results["ember"]}, **results["jax"]}
    lost, gained = compare(results["jax"], results["ember"])
    print(f"| {options.library}'s own suite | tests | outcomes | wall time |")
    print("|---|---:|---|---:|")
    for name in ("jax", "ember"):
        wall = f"{seconds[name]:.0f} s" if name in seconds else "-"
        if name == "jax" and options.recheck:
            wall += " (only where ember did not pass)"
        print(f"| {name} | {len(results[name])} | {counts(results[name])} | {wall} |")
    if len(seconds) == 2 and not options.recheck:
        print(f"\nember/JAX wall time: {seconds['ember'] / seconds['jax']:.2f}")
    passed_by_jax = sum(o == "passed" for o in results["jax"].values())
    print(f"ember passes {passed_by_jax - len(lost)} of the {passed_by_jax} tests JAX passes")
    for title, tests in (("JAX passes, ember does not", lost), ("ember passes, JAX does not", gained)):
        if tests:
            other = results["ember"] if title.startswith("JAX") else results["jax"]
            print(f"\n{title} ({len(tests)}):")
            for test in tests:
                print(f"  {test}: {other.get(test, 'missing')}")
    return 1 if lost else 0


if __name__ == "__main__":
    raise SystemExit(main())
