"""ember on a PJRT device against JAX on its own, side by side: a conformance subset, then times.

``python benchmarks/pjrt.py [--backend NAME] [--quick] [--skip-first-calls]`` runs on the PJRT backend
``NAME`` (default: the first accelerator found, else XLA's CPU plugin, ``xla_cpu``); JAX runs on its
default platform (the TPU on a TPU machine, its CPU otherwise). It prints markdown tables:

1. conformance: a subset of programs on the PJRT backend against ember's CPU backend, at ``highest``
   matmul precision (the largest relative error of each, and whether it is within float32 tolerance);
2. steady medians of each program, ember / JAX and their ratio: the tiny-op call (``x * 2 + 1`` on
   (10,) float32, the call overhead), selu on 10^6 float32, matrix products (bf16 1024/4096/8192 on an
   accelerator, f32 512/1024 on a CPU plugin), and a small CNN train step (batch 128 of 32x32x3, two
   3x3 convolutions, max and average pooling, dense, SGD with momentum);
3. first calls, each in a fresh process: ember and JAX with empty caches, and each with its disk cache
   warm from an earlier process (ember's holds the plugin's serialized executables; JAX's persistent
   cache is switched on for that row: it is opt-in).

Timings are medians over repeated calls (steady) or over ``--runs`` processes (first calls); ratios
come from one run, side by side. Nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The programs, written once for both frameworks (``np`` below is ember.numpy or jax.numpy).
PROGRAMS = r'''
import numpy as onp

def tiny(x):
    return x * 2.0 + 1.0

def selu(x, alpha=1.67, scale=1.05):
    return scale * np.where(x > 0, x, alpha * np.exp(x) - alpha)

def matmul(a, b):
    return a @ b

def cnn_init(seed=0):
    rng = onp.random.default_rng(seed)
    p = {"c1": rng.standard_normal((3, 3, 3, 16)).astype(onp.float32) * 0.2,
         "c2": rng.standard_normal((3, 3, 16, 32)).astype(onp.float32) * 0.1,
         "w": rng.standard_normal((8 * 8 * 32, 10)).astype(onp.float32) * 0.02,
         "b": onp.zeros(10, onp.float32)}
    v = {k: onp.zeros_like(a) for k, a in p.items()}
    x = rng.standard_normal((BATCH, 32, 32, 3)).astype(onp.float32)
    y = rng.integers(0, 10, BATCH)
    return p, v, x, onp.eye(10, dtype=onp.float32)[y]

def cnn_loss(p, x, labels):
    dn = ("NHWC", "HWIO", "NHWC")
    h = lax.conv_general_dilated(x, p["c1"], (1, 1), "SAME", dimension_numbers=dn)
    h = np.maximum(h, 0.0)
    h = lax.reduce_window(h, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = lax.conv_general_dilated(h, p["c2"], (1, 1), "SAME", dimension_numbers=dn)
    h = np.maximum(h, 0.0)
    h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
    logits = h.reshape(h.shape[0], -1) @ p["w"] + p["b"]
    logits = logits - logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -(logp * labels).sum(axis=1).mean()

def cnn_step(p, v, x, labels):
    loss, g = value_and_grad(cnn_loss)(p, x, labels)
    v = {k: 0.9 * v[k] + g[k] for k in p}
    p = {k: p[k] - 0.01 * v[k] for k in p}
    return p, v, loss
'''


def framework(name: str, backend: str | None) -> dict:
    """The names the programs use, from ember (on ``backend``) or from JAX."""
    if name == "jax":
        import jax
        import jax.numpy as jnp
        from jax import lax

        return {"np": jnp, "lax": lax, "jit": jax.jit, "value_and_grad": jax.value_and_grad,
                "ready": jax.block_until_ready}
    import ember
    import ember.numpy as enp
    from ember import lax as elax

    if backend:
        ember.config.update("backend", backend)
    return {"np": enp, "lax": elax, "jit": ember.jit, "value_and_grad": ember.value_and_grad,
            "ready": ember.block_until_ready}


def programs(names: dict, batch: int) -> dict:
    space = dict(names, BATCH=batch)
    exec(PROGRAMS, space)  # noqa: S102  (the benchmark's own source, shared by both frameworks)
    return space


def inputs(kind: str, size: int, dtype: str, np_module, batch: int, space: dict) -> tuple:
    rng = np.random.default_rng(0)
    if kind == "tiny":
        return (np.arange(10, dtype=np.float32),)
    if kind == "selu":
        return (rng.standard_normal(10**6).astype(np.float32),)
    if kind == "matmul":
        a = rng.standard_normal((size, size)).astype(np.float32)
        b = rng.standard_normal((size, size)).astype(np.float32)
        return tuple(np_module.asarray(m).astype(dtype) for m in (a, b))
    return space["cnn_init"]()


def cases(accelerator: bool, quick: bool) -> list[tuple[str, str, int, str]]:
    """(label, program, size, dtype) rows."""
    rows = [("tiny-op call", "tiny", 10, "float32"), ("selu 1e6", "selu", 10**6, "float32")]
    if accelerator:
        rows += [(f"bf16 matmul {n}", "matmul", n, "bfloat16") for n in ((1024,) if quick else (1024, 4096, 8192))]
    else:
        rows += [(f"f32 matmul {n}", "matmul", n, "float32") for n in ((256,) if quick else (512, 1024))]
    rows.append(("CNN train step", "cnn", 0, "float32"))
    return rows


def steady(fn, args: tuple, ready, repeats: int) -> float:
    ready(fn(*args))  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def jitted(space: dict, kind: str):
    jit = space["jit"]
    return jit({"tiny": space["tiny"], "selu": space["selu"], "matmul": space["matmul"],
                "cnn": space["cnn_step"]}[kind])


CHILD = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join({root!r}, "benchmarks"))
import pjrt as bench
name, backend, kind, size, dtype, batch = json.loads(sys.argv[1])
if name == "jax" and os.environ.get("BENCH_JAX_CACHE"):
    import jax
    jax.config.update("jax_compilation_cache_dir", os.environ["BENCH_JAX_CACHE"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
names = bench.framework(name, backend)
space = bench.programs(names, batch)
args = bench.inputs(kind, size, dtype, names["np"], batch, space)
if name == "jax":
    import jax; jax.devices()
else:
    import ember; ember.devices()  # the plugin opened and its client created before the clock starts
fn = bench.jitted(space, kind)
start = time.perf_counter()
names["ready"](fn(*args))
print(time.perf_counter() - start)
"""


def first_call(name: str, backend: str | None, case: tuple, batch: int, env: dict) -> float:
    _, kind, size, dtype = case
    out = subprocess.run([sys.executable, "-c", CHILD.format(root=ROOT), json.dumps([name, backend, kind, size, dtype,
                                                                                      batch])],
                         env={**os.environ, **env}, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    if out.returncode:
        raise RuntimeError(f"{name} first call of {kind} failed:\n{out.stderr[-3000:]}")
    return float(out.stdout.split()[-1])


CONFORMANCE = [
    ("elementwise", lambda np, lax: lambda x: np.tanh(x) * np.exp(-x * x) + np.log1p(np.abs(x))),
    ("reductions", lambda np, lax: lambda x: (x.sum(0), x.max(1), np.argmax(x, 0), np.cumsum(x, 1))),
    ("matmul", lambda np, lax: lambda x: np.dot(x, x.T, precision="highest") + np.matmul(
        x.T, x, precision="highest").sum()),
    ("sort", lambda np, lax: lambda x: (np.sort(x, axis=0), np.argsort(x[:, 0]))),
    ("scan", lambda np, lax: lambda x: lax.scan(lambda c, r: (c * 0.9 + r, np.sin(c)), x[0] * 0, x)),
    ("fft", lambda np, lax: lambda x: np.abs(np.fft.fft(x, axis=1))),
    ("grad", None),
]


def conformance(backend: str) -> list[tuple[str, float, bool]]:
    """Each program on ``backend`` and on ember's CPU backend (products at ``highest`` precision: a
    TPU's default passes bfloat16)."""
    import ember
    import ember.numpy as enp
    from ember import lax as elax

    x = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    rows = []
    for label, make in CONFORMANCE:
        fn = make(enp, elax) if make else ember.grad(lambda w: enp.sum(enp.tanh(enp.matmul(w, w.T,
                                                                                        precision="highest"))))
        results = {}
        for name in (backend, "cpu"):
            ember.config.update("backend", name)
            out = ember.jit(fn)(x)
            results[name] = [np.asarray(o, np.float64) for o in (out if isinstance(out, tuple) else (out,))]
        err = max(float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1.0))) if a.size else 0.0
                  for a, b in zip(results[backend], results["cpu"]))
        rows.append((label, err, err <= 1e-4))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None, help="the PJRT backend (default: an accelerator, else xla_cpu)")
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (a smoke run)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per first-call row")
    parser.add_argument("--skip-first-calls", action="store_true")
    opts = parser.parse_args()

    import ember
    from ember.backends import registry
    from ember.backends.pjrt.backend import BACKENDS

    if not BACKENDS:
        sys.exit("no PJRT plugin found: pip install ember[pjrt-cpu] (or ember[tpu] on a TPU machine)")
    backend = opts.backend or max(BACKENDS.values(), key=lambda b: b.priority).name
    accelerator = registry.get(backend).platform != "cpu"
    batch = 32 if opts.quick else 128
    repeats = 20 if opts.quick else 100
    device = registry.get(backend).devices()[0]
    print(f"# ember on PJRT backend {backend!r} ({device!r}) vs JAX, {time.strftime('%Y-%m-%d')}\n")

    print("| conformance (vs ember's CPU backend, highest precision) | max error (relative above 1) | within 1e-4 |\n"
          "|---|---|---|")
    for label, err, ok in conformance(backend):
        print(f"| {label} | {err:.2e} | {'yes' if ok else 'NO'} |")

    import jax

    rows = cases(accelerator, opts.quick)
    print(f"\n| steady (median of {repeats}) | ember | JAX ({jax.devices()[0].platform}) | ember/JAX |\n"
          "|---|---|---|---|")
    for case in rows:
        label, kind, size, dtype = case
        times = {}
        for name in ("ember", "jax"):
            names = framework(name, backend if name == "ember" else None)
            space = programs(names, batch)
            args = inputs(kind, size, dtype, names["np"], batch, space)
            times[name] = steady(jitted(space, kind), args, names["ready"], repeats if kind != "cnn" else repeats // 4)
        print(f"| {label} | {times['ember'] * 1e3:.3f} ms | {times['jax'] * 1e3:.3f} ms | "
              f"{times['ember'] / times['jax']:.2f} |", flush=True)
    ember.config.update("backend", "")

    if opts.skip_first_calls:
        return
    print(f"\n| first call (median of {opts.runs} processes) | ember cold | ember warm disk | JAX cold | "
          f"JAX warm disk | ember cold/JAX cold | ember warm/JAX cold |\n|---|---|---|---|---|---|---|")
    for case in rows:
        with tempfile.TemporaryDirectory() as scratch:
            def runs(name: str, env: dict) -> float:
                return statistics.median(first_call(name, backend if name == "ember" else None, case, batch, env)
                                         for _ in range(opts.runs))
            ember_cold = runs("ember", {"EMBER_CACHE_DIR": os.path.join(scratch, "cold"),
                                        "EMBER_PERSISTENT_CACHE": "0"})
            warm = os.path.join(scratch, "warm")
            first_call("ember", backend, case, batch, {"EMBER_CACHE_DIR": warm})
            ember_warm = runs("ember", {"EMBER_CACHE_DIR": warm})
            jax_cold = runs("jax", {})
            jax_dir = os.path.join(scratch, "jax")
            first_call("jax", None, case, batch, {"BENCH_JAX_CACHE": jax_dir})
            jax_warm = runs("jax", {"BENCH_JAX_CACHE": jax_dir})
        print(f"| {case[0]} | {ember_cold:.3f} s | {ember_warm:.3f} s | {jax_cold:.3f} s | {jax_warm:.3f} s | "
              f"{ember_cold / jax_cold:.2f} | {ember_warm / jax_cold:.2f} |", flush=True)


if __name__ == "__main__":
    main()
