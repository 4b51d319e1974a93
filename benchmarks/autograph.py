"""autograph: a function written with Python control flow, converted (``jit(f, autograph=True)``),
against its twin written by hand with ``lax``.

``python -m benchmarks.autograph [--runs N] [--budget S]`` prints a markdown table: the steady
state (median time per call of the compiled programs, the two taking turns in rounds; the ratio is
the median of the rounds' ratios; target <= 1.05) and the first call in a fresh process (import
and the backend's start-up done first, then one call timed: conversion, trace and compile included,
ember's disk cache off; median over N processes each, the two taking turns; target <= 1.2).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

import ember
import ember.numpy as jnp
from ember import lax


# --- the programs, each written both ways ----------------------------------------------------------
def step_converted(x):
    if jnp.sum(x) > 0:
        x = x * 0.5
    else:
        x = jnp.tanh(x)
    return x


def step_lax(x):
    return lax.cond(jnp.sum(x) > 0, lambda: x * 0.5, lambda: jnp.tanh(x))


def power_converted(a, v, n):
    i = 0
    while i < n:
        v = a @ v
        v = v / jnp.sqrt(jnp.sum(v * v))
        i += 1
    return v


def power_lax(a, v, n):
    def body(c):
        i, v = c
        v = a @ v
        return i + 1, v / jnp.sqrt(jnp.sum(v * v))
    return lax.while_loop(lambda c: c[0] < n, body, (0, v))[1]


def rows_converted(xs):
    s = jnp.zeros(xs.shape[1])
    for row in xs:
        s = s * 0.9 + jnp.tanh(row)
    return s


def rows_lax(xs):
    return lax.scan(lambda s, row: (s * 0.9 + jnp.tanh(row), None), jnp.zeros(xs.shape[1]), xs)[0]


def newton_converted(x):
    y = x
    for _ in range(20):
        if jnp.max(jnp.abs(y * y - x)) < 1e-6:
            break
        y = 0.5 * (y + x / y)
    return y


def newton_lax(x):
    def body(i, c):
        y, done = c
        done = jnp.max(jnp.abs(y * y - x)) < 1e-6
        return lax.cond(done, lambda: (y, done), lambda: (0.5 * (y + x / y), done))
    return lax.fori_loop(0, 20, lambda i, c: lax.cond(c[1], lambda: c, lambda: body(i, c)), (x, False))[0]


def _inputs(name: str) -> tuple:
    rng = np.random.default_rng(0)
    if name == "if on a reduction (10^5)":
        return (rng.standard_normal(100_000, dtype=np.float32),)
    if name == "while, traced bound (64x64, 50 steps)":
        return (rng.standard_normal((64, 64), dtype=np.float32), np.ones(64, np.float32), 50)
    if name == "for over rows (128x1024)":
        return (rng.standard_normal((128, 1024), dtype=np.float32),)
    return (rng.uniform(1, 100, 10_000).astype(np.float32),)


PROGRAMS: dict[str, tuple[Callable, Callable]] = {
    "if on a reduction (10^5)": (step_converted, step_lax),
    "while, traced bound (64x64, 50 steps)": (power_converted, power_lax),
    "for over rows (128x1024)": (rows_converted, rows_lax),
    "for with a traced break (10^4, 20 steps)": (newton_converted, newton_lax),
}


def _jitted(name: str, converted: bool) -> Callable:
    f = PROGRAMS[name][0 if converted else 1]
    return ember.jit(f, autograph=True) if converted else ember.jit(f)


# --- measuring -------------------------------------------------------------------------------------------
def _per_call(f: Callable, args: tuple, budget: float) -> float:
    calls, start = 0, time.perf_counter()
    while True:
        ember.block_until_ready(f(*args))
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed > budget and calls >= 5:
            return elapsed / calls


def steady(name: str, budget: float, rounds: int = 5) -> tuple[float, float, float]:
    args = _inputs(name)
    converted, by_hand = _jitted(name, True), _jitted(name, False)
    np.testing.assert_allclose(np.asarray(converted(*args)), np.asarray(by_hand(*args)), rtol=1e-5, atol=1e-6)
    ember.wait_for_compiles()  # (a tiered program's native code: the timed calls run it)
    times: dict[str, list[float]] = {"converted": [], "lax": []}
    for _ in range(rounds):
        times["converted"].append(_per_call(converted, args, budget / rounds))
        times["lax"].append(_per_call(by_hand, args, budget / rounds))
    ratios = [a / b for a, b in zip(times["converted"], times["lax"])]
    return statistics.median(times["converted"]), statistics.median(times["lax"]), statistics.median(ratios)


FIRST_CALL = """
import sys, time
import numpy as np
import ember
ember.jit(lambda a: a * 2.0)(np.ones(8, np.float32))  # (the backend started: only the call is timed)
ember.wait_for_compiles()
from benchmarks.autograph import _inputs, _jitted
name, converted = sys.argv[1], sys.argv[2] == "converted"
args = _inputs(name)
f = _jitted(name, converted)
start = time.perf_counter()
ember.block_until_ready(f(*args))
print(time.perf_counter() - start)
"""


def first_call(name: str, converted: bool) -> float:
    """One fresh process's first call."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, EMBER_PERSISTENT_CACHE="0", EMBER_PERSISTENT_PROGRAM_CACHE="0", PYTHONPATH=root)
    out = subprocess.run([sys.executable, "-c", FIRST_CALL, name, "converted" if converted else "lax"],
                         capture_output=True, text=True, env=env, cwd=root, check=True)
    return float(out.stdout.split()[-1])


def first_calls(name: str, runs: int) -> tuple[float, float]:
    """Medians over ``runs`` fresh processes each, the two taking turns (the machine's load drifts)."""
    converted, by_hand = [], []
    for _ in range(runs):
        converted.append(first_call(name, True))
        by_hand.append(first_call(name, False))
    return statistics.median(converted), statistics.median(by_hand)


def _ms(t: float) -> str:
    return f"{t * 1e3:.2f} ms" if t >= 1e-3 else f"{t * 1e6:.1f} us"


def table(rows: list[tuple[str, Any]]) -> str:
    lines = ["| program | converted | lax twin | ratio | first call converted | first call lax twin | ratio |",
             "|" + "---|" * 7]
    for name, (conv, twin, ratio, first_conv, first_twin) in rows:
        lines.append(f"| {name} | {_ms(conv)} | {_ms(twin)} | {ratio:.2f} | {_ms(first_conv)} | {_ms(first_twin)} "
                     f"| {first_conv / first_twin:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per first-call measurement")
    parser.add_argument("--budget", type=float, default=1.0, help="seconds of timed calls per steady-state row")
    args = parser.parse_args(argv)
    ember.config.update("persistent_cache", False)
    rows = []
    for name in PROGRAMS:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        conv, twin, ratio = steady(name, args.budget)
        rows.append((name, (conv, twin, ratio, *first_calls(name, args.runs))))
    print(table(rows))


if __name__ == "__main__":
    main()
