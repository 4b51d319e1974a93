"""Start-up: the import, the first jit of a process, and the first call of a jitted selu in a
fresh process, with ember's disk cache empty or warm, side by side with JAX.

``python benchmarks/cold_start.py [--runs N]`` prints a markdown table of medians over N fresh
processes per row (wall and CPU time), and the ratios the targets are stated in:

- import: ``import ember`` against ``import jax``;
- first jit ever: ``jit(f)(x)`` of a small function on 10 elements right after the import, the
  backend not initialized yet (ember loads its LLVM backend then; JAX initializes its client),
  with ember's disk cache empty (tiered, the default: the first program of a process runs on the
  reference interpreter while LLVM loads and compiles it; and untiered), and warm from an
  earlier process;
- selu on 10^6 float32, the backend initialized first (so that only the call is timed): ember with
  an empty disk cache, tiered (the default) and untiered (``EMBER_TIERED_COMPILATION=0``); with
  the disk cache warm from an earlier process, modules only (``EMBER_PERSISTENT_PROGRAM_CACHE=0``:
  trace, passes, fusion, code generation, machine code loaded) and whole programs (the default:
  trace, then the plan and machine code loaded); the first call on a new shape after a first call
  (retrace; the machine code is reused); JAX (its persistent cache is off by default).

Every process imports compiled bytecode: a first process of each framework writes it (the
environment's ``PYTHONDONTWRITEBYTECODE`` is dropped for the children), so neither framework's
import is timed compiling its sources.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

IMPORT = """
import sys, time
start, cpu = time.perf_counter(), time.process_time()
if sys.argv[1] == "jax":
    import jax
else:
    import ember
print(time.perf_counter() - start, time.process_time() - cpu)
"""

FIRST_JIT = """
import sys, time
import numpy as np
if sys.argv[1] == "jax":
    import jax, jax.numpy as jnp
else:
    import ember as jax, ember.numpy as jnp

def f(x):
    return jnp.sin(x) * 2.0 + 1.0

x = np.arange(10, dtype=np.float32)
start, cpu = time.perf_counter(), time.process_time()
jax.jit(f)(x).block_until_ready()
print(time.perf_counter() - start, time.process_time() - cpu)
"""

SELU = """
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
start, cpu = time.perf_counter(), time.process_time()
f(x).block_until_ready()
print(time.perf_counter() - start, time.process_time() - cpu)
"""


def timed(child: str, framework: str, cache_dir: str = "", *mode: str, **env: str) -> tuple[float, float]:
    """(wall, CPU) seconds that ``child`` prints, run in a fresh process (the disk cache in
    ``cache_dir``). CPU: the process's time on every core (its threads included), which a
    loaded machine inflates less than the wall time."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environment.update({"EMBER_CACHE_DIR": cache_dir, "EMBER_PERSISTENT_CACHE": "1" if cache_dir else "0", **env})
    out = subprocess.run([sys.executable, "-c", child, framework, *mode], env=environment, check=True, text=True,
                         capture_output=True).stdout
    wall, cpu = out.split()[-2:]
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    try:
        import jax  # noqa: F401  (only to know whether it is there)
        frameworks = ["ember", "jax"]
    except ImportError:
        frameworks = ["ember"]
    rows: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        def fresh(name: str) -> str:
            return os.path.join(scratch, f"{name}{len(os.listdir(scratch))}")

        for framework in frameworks:  # bytecode written, files in the page cache
            timed(FIRST_JIT, framework, fresh("warm-up"))
        for _ in range(runs):  # interleaved: a change of the machine's load hits every row alike
            rows.setdefault("import: ember", []).append(timed(IMPORT, "ember"))
            rows.setdefault("first jit ever: ember, empty disk cache", []).append(
                timed(FIRST_JIT, "ember", fresh("first")))
            rows.setdefault("first jit ever: ember, empty disk cache, untiered", []).append(
                timed(FIRST_JIT, "ember", fresh("first"), EMBER_TIERED_COMPILATION="0"))
            rows.setdefault("selu: ember, cold, tiered (the default)", []).append(timed(SELU, "ember", fresh("cold")))
            rows.setdefault("selu: ember, cold, untiered", []).append(
                timed(SELU, "ember", fresh("untiered"), EMBER_TIERED_COMPILATION="0"))
            rows.setdefault("selu: ember, new shape (500, 2000) after a first call: retrace, reuse the code",
                            []).append(timed(SELU, "ember", fresh("shape"), "new-shape"))
            if "jax" in frameworks:
                rows.setdefault("import: JAX", []).append(timed(IMPORT, "jax"))
                rows.setdefault("first jit ever: JAX", []).append(timed(FIRST_JIT, "jax"))
                rows.setdefault("selu: JAX, cold", []).append(timed(SELU, "jax"))
                rows.setdefault("selu: JAX, new shape (500, 2000) after a first call", []).append(
                    timed(SELU, "jax", "", "new-shape"))
        warm = fresh("warm")
        timed(FIRST_JIT, "ember", warm)  # fills the disk cache
        timed(SELU, "ember", warm)
        for _ in range(runs):
            rows.setdefault("first jit ever: ember, warm disk cache", []).append(timed(FIRST_JIT, "ember", warm))
            rows.setdefault("selu: ember, warm disk cache, modules only", []).append(
                timed(SELU, "ember", warm, EMBER_PERSISTENT_PROGRAM_CACHE="0"))
            rows.setdefault("selu: ember, warm disk cache, whole program", []).append(timed(SELU, "ember", warm))
    medians = {name: (statistics.median(t[0] for t in times), statistics.median(t[1] for t in times))
               for name, times in rows.items()}
    print(f"| start-up, fresh process (median of {runs}) | wall ms | CPU ms |")
    print("|---|---:|---:|")
    for name in sorted(medians, key=lambda n: (n.split(":")[0], n)):
        print(f"| {name} | {medians[name][0] * 1e3:.1f} | {medians[name][1] * 1e3:.1f} |")

    def ratio(a: str, b: str) -> str:
        if a not in medians or b not in medians:
            return "-"
        return f"{medians[a][0] / medians[b][0]:.2f} (CPU {medians[a][1] / medians[b][1]:.2f})"
    cold, untiered = "selu: ember, cold, tiered (the default)", "selu: ember, cold, untiered"
    whole = "selu: ember, warm disk cache, whole program"
    print(f"\nimport ember / import jax: {ratio('import: ember', 'import: JAX')}")
    print(f"first jit ever, ember / JAX: {ratio('first jit ever: ember, empty disk cache', 'first jit ever: JAX')}; "
          f"untiered: {ratio('first jit ever: ember, empty disk cache, untiered', 'first jit ever: JAX')}; "
          f"warm disk: {ratio('first jit ever: ember, warm disk cache', 'first jit ever: JAX')}")
    print(f"selu, warm disk (whole program) / cold untiered: {ratio(whole, untiered)}; / cold tiered: "
          f"{ratio(whole, cold)}; modules only / cold untiered: "
          f"{ratio('selu: ember, warm disk cache, modules only', untiered)}")
    print(f"selu, ember cold / JAX cold: {ratio(cold, 'selu: JAX, cold')}")

if __name__ == "__main__":
    main()
