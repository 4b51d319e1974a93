"""Data-parallel training step on 1 and 2 in-process CPU devices: ember vs JAX (JAX in a
subprocess with forced host devices), and on 1 and 2 MPI processes of one device each
(ember.distributed, started here with mpiexec; JAX has no MPI here, so those rows compare with
JAX's in-process figure for as many devices). Prints per-step times and their ratios; the
projection to 8 and 64 processes is in docs/distributed.md.

    python -m benchmarks.parallel
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

STEP = """
def loss(params, x, y):
    w1, b1, w2 = params
    h = np.tanh(x @ w1 + b1)
    return np.mean((h @ w2 - y) ** 2)

def step(params, x, y):
    g = lax.pmean(grad(loss)(params, x, y), "d")
    return [p - 0.01 * gi for p, gi in zip(params, g)]
"""
SIZES = dict(batch=2048, d_in=256, hidden=512)


def _time(f, *args, repeat=20):
    for _ in range(3):
        f(*args)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        out = f(*args)
        [o.block_until_ready() for o in out]
        best = min(best, time.perf_counter() - t)
    return best


def _data(n):
    rng = np.random.default_rng(0)
    b, d, h = SIZES["batch"], SIZES["d_in"], SIZES["hidden"]
    params = [rng.normal(size=(d, h)).astype(np.float32) * 0.05, np.zeros(h, np.float32),
              rng.normal(size=(h, 1)).astype(np.float32) * 0.05]
    x = rng.normal(size=(n, b // n, d)).astype(np.float32)
    return params, x, rng.normal(size=(n, b // n, 1)).astype(np.float32)


def run_ember(n):
    import ember
    ember.config.update("num_cpu_devices", n)
    scope = {"np": ember.numpy, "lax": ember.lax, "grad": ember.grad}
    exec(STEP, scope)
    params, x, y = _data(n)
    params = [ember.numpy.asarray(p) for p in params]
    return _time(ember.pmap(scope["step"], "d", in_axes=(None, 0, 0)), params, x, y)


def run_ember_mpi():
    """One process of an MPI run (``mpiexec -n N``): the same pmap'd step over the devices of every
    process, each process feeding its own slice of the batch; rank 0 prints the step time."""
    import ember
    ember.distributed.initialize()
    n, rank = ember.distributed.process_count(), ember.distributed.process_index()
    scope = {"np": ember.numpy, "lax": ember.lax, "grad": ember.grad}
    exec(STEP, scope)
    params, x, y = _data(n)
    params = [ember.numpy.asarray(p) for p in params]
    t = _time(ember.pmap(scope["step"], "d", in_axes=(None, 0, 0)), params, x[rank:rank + 1], y[rank:rank + 1])
    if rank == 0:
        print(t, flush=True)


def _mpiexec():
    import shutil
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


def run_mpi(n):
    env = dict(os.environ, EMBER_NUM_CPU_DEVICES="1")
    out = subprocess.run([_mpiexec(), "-n", str(n), sys.executable, "-c",
                          "from benchmarks.parallel import run_ember_mpi; run_ember_mpi()"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, check=True,
                         timeout=600)
    return float(out.stdout.strip().splitlines()[-1])


def run_jax(n):
    code = f"""
import sys, json
sys.path.insert(0, {os.getcwd()!r})
from benchmarks.parallel import _time, _data, STEP
import jax, jax.numpy as jnp
scope = {{"np": jnp, "lax": jax.lax, "grad": jax.grad}}
exec(STEP, scope)
params, x, y = _data({n})
params = [jnp.asarray(p) for p in params]
print(json.dumps(_time(jax.pmap(scope["step"], "d", in_axes=(None, 0, 0)), params, x, y)))
"""
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={n}", JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    rows = []
    for n in (1, 2):
        e = subprocess.run([sys.executable, "-c", f"from benchmarks.parallel import run_ember; print(run_ember({n}))"],
                           capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        rows.append((n, float(e), run_jax(n)))
    have_mpi = _mpiexec() is not None
    mpi = [(n, run_mpi(n)) for n in (1, 2)] if have_mpi else []
    print(f"data-parallel MLP step, batch {SIZES['batch']}, {SIZES['d_in']}->{SIZES['hidden']}->1 (best of 20)")
    print(f"{'devices':>8} {'ember ms':>10} {'jax ms':>10} {'ember/jax':>10} {'ember 1/n':>10} {'jax 1/n':>10}")
    for n, e, j in rows:
        scale_e, scale_j = rows[0][1] / e, rows[0][2] / j
        print(f"{n:>8} {e * 1e3:>10.2f} {j * 1e3:>10.2f} {e / j:>10.2f} {scale_e:>10.2f} {scale_j:>10.2f}")
    if not have_mpi:
        print("MPI rows skipped: no mpiexec (pip install 'ember[distributed]')")
        return
    print("MPI processes of one device each (ember.distributed); jax: its in-process figure for as many devices")
    print(f"{'procs':>8} {'ember ms':>10} {'jax ms':>10} {'ember/jax':>10} {'mpi 1/n':>10} {'mpi/in-proc':>11}")
    for (n, m), (_, e, j) in zip(mpi, rows):
        print(f"{n:>8} {m * 1e3:>10.2f} {j * 1e3:>10.2f} {m / j:>10.2f} {mpi[0][1] / m:>10.2f} {m / e:>11.2f}")


if __name__ == "__main__":
    main()
