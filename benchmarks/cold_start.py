"""Cold start: the first call of a jitted selu on 10^6 float32 in a fresh process.

``python benchmarks/cold_start.py [--runs N]`` prints a markdown table of medians over N fresh
processes: ember with an empty disk cache (trace, optimize, generate code, run), ember with
the disk cache warm from an earlier process (trace, load machine code, run), ember's first
call on a new shape after a first call (retrace; the machine code is reused), and JAX (its
persistent cache is off by default) when importable. Each process first imports its
framework and initializes its backend, so the time is that of the first call only.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import sys, time
import numpy as np
framework = sys.argv[1]
if framework == "jax":
    import jax, jax.numpy as jnp
    jax.devices()
    jit = jax.jit
else:
    import ember, ember.numpy as jnp
    import ember.backends.cpu  # the backend's modules, imported on the first call otherwise
    jit = ember.jit

def selu(x, alpha=1.67, lambda_=1.05):
    return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

x = np.random.default_rng(0).standard_normal(10**6).astype(np.float32)
f = jit(selu)
if sys.argv[2:] == ["new-shape"]:  # the first call on a new shape after a first compile
    f(x).block_until_ready()
    x = x.reshape(500, 2000)
start = time.perf_counter()
f(x).block_until_ready()
print(time.perf_counter() - start)
"""


def first_call(framework: str, cache_dir: str, *mode: str) -> float:
    env = {**os.environ, "EMBER_CACHE_DIR": cache_dir, "EMBER_PERSISTENT_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, framework, *mode], env=env, check=True, text=True,
                         capture_output=True).stdout
    return float(out.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    rows = {}
    with tempfile.TemporaryDirectory() as scratch:
        rows["ember, cold"] = [first_call("ember", os.path.join(scratch, f"cold{i}")) for i in range(runs)]
        warm = os.path.join(scratch, "warm")
        first_call("ember", warm)  # fills the disk cache
        rows["ember, warm disk cache"] = [first_call("ember", warm) for _ in range(runs)]
        rows["ember, new shape (500, 2000) after a first call: retrace, reuse the code"] = [
            first_call("ember", os.path.join(scratch, f"shape{i}"), "new-shape") for i in range(runs)]
    try:
        import jax  # noqa: F401  (only to know whether it is there)

        rows["JAX, cold"] = [first_call("jax", "") for _ in range(runs)]
        rows["JAX, new shape (500, 2000) after a first call"] = [first_call("jax", "", "new-shape")
                                                                 for _ in range(runs)]
    except ImportError:
        pass
    medians = {name: statistics.median(times) for name, times in rows.items()}
    print(f"| selu, 10^6 float32: first call in a fresh process | median of {runs} (ms) |")
    print("|---|---:|")
    for name, median in medians.items():
        print(f"| {name} | {median * 1e3:.1f} |")
    cold = medians["ember, cold"]
    print(f"\nwarm / cold: {medians['ember, warm disk cache'] / cold:.2f}; new shape / cold: "
          f"{medians['ember, new shape (500, 2000) after a first call: retrace, reuse the code'] / cold:.2f}")


if __name__ == "__main__":
    main()
