"""A run's progress from a fresh process: training steps completed by t = 0.5, 1, 2, 4, 8 and 20 s.

What a user feels is not the steady state alone but how far a training loop has got at each
moment after it starts: the first call's tracing and compiling, the calls made while native code
compiles (ember's reference tier), then the steady steps. ``python -m benchmarks.progress``
starts one fresh process per framework and workload, ember and JAX in turns; each builds its
step, then calls it in a loop that feeds the updated parameters back (as training does), blocking
on every result, and reports when each step finished. The clock starts just before the first call
(imports and input creation are not counted: ``benchmarks/cold_start.py`` times the imports).
ember's disk cache is empty (a new cache folder per process), as JAX's persistent cache is off by
default; a third column starts ember from a cache that holds only its own runtime (the products,
the native dispatcher, the thread team's runner: compiled once per machine by any earlier
process, where JAX's comes compiled in its wheel), not the workload. The last line is the second
call of a small jitted function in a fresh process (what a hit costs before anything is warm).

``--seconds`` shortens the horizon (the marks past it print ``-``); ``--runs`` repeats each pair
of processes and prints the medians of the counts.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

MARKS = (0.5, 1.0, 2.0, 4.0, 8.0, 20.0)


@dataclass
class Progress:
    name: str
    build: str  # the step builder's name: in benchmarks.run, or in this module
    inputs: str  # its inputs' builder
    params_at: int  # where the parameters start in the step's arguments (they are fed back)
    returns_value: bool = True  # the step returns (loss, params); else params alone


WORKLOADS = [
    Progress("transformer LM step (2 layers, d 128, 4 heads, vocab 512, 8x64)", "_transformer_step",
             "_transformer_inputs", 1),
    Progress("CNN training step (batch 32, 28x28)", "_cnn_train_step", "_cnn_inputs", 2),
    Progress("ResNet step (3 residual blocks, 16 channels, batch 16, 32x32x3)", "_resnet_step",
             "_resnet_inputs", 2),
    Progress("LSTM training step (scan 100, batch 32, hidden 128)", "_lstm_train_step", "_lstm_inputs", 2),
    Progress("VAE epoch (fori_loop of 8 SGD steps)", "_vae_epoch", "_vae_inputs", 2, returns_value=False),
    Progress("small MLP step (batch 64, 784-256-10)", "_small_mlp_step", "_small_mlp_inputs", 2),
]


# --- the workloads that the jit table does not have ---------------------------------------------------
def _ad(xp) -> Any:
    """The framework whose numpy module ``xp`` is (grad, value_and_grad)."""
    return sys.modules["ember" if xp.__name__.startswith("ember") else "jax"]


def _layer_norm(xp, x, scale):
    mean = xp.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    return centered / xp.sqrt(xp.mean(centered * centered, axis=-1, keepdims=True) + 1e-5) * scale


def _transformer_step(xp, lax, nn):
    """A 2-layer decoder-only language model (pre-norm, causal attention, 4x MLP), its loss'
    gradient and an SGD update."""
    heads = 4

    def loss(params, tokens, targets):
        embed, *layers, final = params
        x = embed[tokens]  # (batch, seq, d)
        batch, seq, d = x.shape
        mask = xp.tril(xp.ones((seq, seq), bool))
        for i in range(0, len(layers), 6):
            ln1, wqkv, wo, ln2, w1, w2 = layers[i:i + 6]
            h = _layer_norm(xp, x, ln1)
            q, k, v = xp.split(h @ wqkv, 3, axis=-1)
            q, k, v = (t.reshape(batch, seq, heads, d // heads) for t in (q, k, v))
            scores = xp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // heads)
            scores = xp.where(mask, scores, -1e9)
            attended = xp.einsum("bhqk,bkhd->bqhd", nn.softmax(scores, axis=-1), v)
            x = x + attended.reshape(batch, seq, d) @ wo
            x = x + nn.gelu(_layer_norm(xp, x, ln2) @ w1) @ w2
        logits = _layer_norm(xp, x, final) @ embed.T
        return -xp.mean(xp.sum(nn.log_softmax(logits) * nn.one_hot(targets, embed.shape[0]), axis=-1))

    def step(tokens, targets, *params):
        value, grads = _ad(xp).value_and_grad(loss)(params, tokens, targets)
        return value, tuple(p - 0.01 * g for p, g in zip(params, grads))

    def step_on_tokens(batch, *params):
        return step(batch[:, :-1], batch[:, 1:], *params)
    return step_on_tokens


def _transformer_inputs(rng, vocab=512, d=128, layers=2, batch=8, seq=64):
    tokens = rng.integers(0, vocab, (batch, seq + 1)).astype(np.int32)
    params = [rng.standard_normal((vocab, d), dtype=np.float32) * 0.02]
    for _ in range(layers):
        params += [np.ones(d, np.float32), rng.standard_normal((d, 3 * d), dtype=np.float32) * 0.02,
                   rng.standard_normal((d, d), dtype=np.float32) * 0.02, np.ones(d, np.float32),
                   rng.standard_normal((d, 4 * d), dtype=np.float32) * 0.02,
                   rng.standard_normal((4 * d, d), dtype=np.float32) * 0.02]
    return [tokens, *params, np.ones(d, np.float32)]


def _conv(lax, x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _resnet_step(xp, lax, nn):
    """A small residual network: a stem convolution, three blocks of two 3x3 convolutions with a
    skip connection, global average pooling, a dense layer; softmax cross-entropy, SGD."""
    def loss(params, x, labels):
        stem, *blocks, dense, bias = params
        h = nn.relu(_conv(lax, x, stem))
        for a, b in zip(blocks[::2], blocks[1::2]):
            h = nn.relu(h + _conv(lax, nn.relu(_conv(lax, h, a)), b))
        logits = xp.mean(h, axis=(1, 2)) @ dense + bias
        return -xp.mean(xp.sum(nn.log_softmax(logits) * labels, axis=-1))

    def step(x, labels, *params):
        value, grads = _ad(xp).value_and_grad(loss)(params, x, labels)
        return value, tuple(p - 0.01 * g for p, g in zip(params, grads))
    return step


def _resnet_inputs(rng, batch=16, channels=16):
    x = rng.standard_normal((batch, 32, 32, 3), dtype=np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    params = [rng.standard_normal((3, 3, 3, channels), dtype=np.float32) * 0.2]
    params += [rng.standard_normal((3, 3, channels, channels), dtype=np.float32) * 0.1 for _ in range(6)]
    params += [rng.standard_normal((channels, 10), dtype=np.float32) * 0.1, np.zeros(10, np.float32)]
    return [x, labels, *params]


def _small_mlp_step(xp, lax, nn):
    def loss(params, x, labels):
        w1, b1, w2, b2 = params
        return -xp.mean(xp.sum(nn.log_softmax(nn.relu(x @ w1 + b1) @ w2 + b2) * labels, axis=-1))

    def step(x, labels, *params):
        value, grads = _ad(xp).value_and_grad(loss)(params, x, labels)
        return value, tuple(p - 0.01 * g for p, g in zip(params, grads))
    return step


def _small_mlp_inputs(rng):
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    shapes = [(784, 256), (256,), (256, 10), (10,)]
    return [rng.standard_normal((64, 784), dtype=np.float32), labels,
            *(rng.standard_normal(s, dtype=np.float32) * 0.05 for s in shapes)]


# --- one fresh process --------------------------------------------------------------------------------
def _framework(name: str) -> tuple[Any, Any, Any, Any, Callable]:
    """(framework, numpy, lax, nn, block) of ``name``; the other framework is never imported."""
    if name == "jax":
        import jax
        import jax.numpy as jnp
        return jax, jnp, jax.lax, jax.nn, jax.block_until_ready
    import ember
    import ember.numpy as enp
    return ember, enp, ember.lax, ember.nn, ember.block_until_ready


def _builder(name: str, framework: str) -> Callable:
    here = sys.modules[__name__]
    if hasattr(here, name):
        return getattr(here, name)
    if framework == "ember":
        sys.modules.setdefault("jax", None)  # type: ignore[arg-type]  # (benchmarks.run imports no JAX then)
    from benchmarks import run
    return getattr(run, name)


def child_steps(framework: str, index: int, seconds: float) -> list[float]:
    """In this (fresh) process: the times at which each step of workload ``index`` finished."""
    w = WORKLOADS[index]
    build, inputs = _builder(w.build, framework), _builder(w.inputs, framework)
    fw, xp, lax, nn, block = _framework(framework)
    args = list(inputs(np.random.default_rng(0)))
    step = fw.jit(build(xp, lax, nn))
    finished: list[float] = []
    start = time.perf_counter()
    while True:
        out = block(step(*args))
        now = time.perf_counter() - start
        finished.append(now)
        if now >= seconds:
            return finished
        params = out[1] if w.returns_value else out
        args = args[:w.params_at] + list(params)


SECOND_CALL = """
import sys, time
import numpy as np
if sys.argv[1] == "jax":
    import jax, jax.numpy as jnp
else:
    import ember as jax, ember.numpy as jnp
f = jax.jit(lambda x: jnp.sin(x) * 2.0 + 1.0)
x = np.arange(10, dtype=np.float32)
jax.block_until_ready(f(x))
start = time.perf_counter()
jax.block_until_ready(f(x))
print(time.perf_counter() - start)
"""


def _environment(cache: str) -> dict[str, str]:
    env = dict(os.environ, EMBER_CACHE_DIR=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (neither framework's import compiles its sources)
    return env


# ember compiles its own runtime for the host when a process first needs it (the blocked and narrow
# products, the native dispatcher, the thread team's runner), and keeps it in the disk cache like a
# program: JAX's comes compiled in its wheel. This program, run once into a cache folder, leaves
# that runtime there and nothing of the workloads: "ember, runtime cached" starts from a copy of it.
SEED = """
import numpy as np, ember, ember.numpy as jnp
from ember import lax
a, b = np.ones((300, 300), np.float32), np.ones((300, 4), np.float32)
f = ember.jit(lambda a, b: (jnp.tanh(a @ a) * 2.0, a @ b,
                            lax.fori_loop(0, 3, lambda i, c: jnp.tanh(a[:64, :64] @ c), b[:64])))
ember.block_until_ready(f(a, b))
ember.wait_for_compiles()
"""


def _seeded_cache() -> str:
    folder = tempfile.mkdtemp(prefix="ember-progress-runtime-")
    subprocess.run([sys.executable, "-c", SEED], env=_environment(folder), check=True, capture_output=True)
    return folder


def run_child(framework: str, index: int, seconds: float, seed: str | None = None) -> list[float]:
    """A fresh process's step times; ``seed``: a cache folder to start ember's from (a copy)."""
    with tempfile.TemporaryDirectory(prefix="ember-progress-") as cache:
        if seed is not None:
            shutil.copytree(seed, cache, dirs_exist_ok=True)
        out = subprocess.run([sys.executable, "-m", "benchmarks.progress", "--child", framework, str(index),
                              str(seconds)], capture_output=True, text=True, env=_environment(cache), check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def second_call(framework: str, seed: str | None = None) -> float:
    with tempfile.TemporaryDirectory(prefix="ember-progress-") as cache:
        if seed is not None:
            shutil.copytree(seed, cache, dirs_exist_ok=True)
        out = subprocess.run([sys.executable, "-c", SECOND_CALL, framework], capture_output=True, text=True,
                             env=_environment(cache), check=True)
    return float(out.stdout.strip().splitlines()[-1])


def counts(finished: list[float], seconds: float) -> list[int | None]:
    return [sum(t <= mark for t in finished) if mark <= seconds else None for mark in MARKS]


COLUMNS = {"ember": "ember, empty cache", "ember-runtime": "ember, its runtime cached", "jax": "JAX"}


def table(rows: list[tuple[str, dict[str, list]]], calls: dict[str, float] | None) -> str:
    marks = " | ".join(f"{m:g} s" for m in MARKS)
    names = list(rows[0][1]) if rows else []
    head = " / ".join(COLUMNS[n] for n in names)
    lines = [f"| workload (steps done by: {head}) | {marks} |", "|---|" + "---|" * len(MARKS)]
    for name, per in rows:
        cells = " | ".join("-" if column[0] is None else " / ".join(f"{c:g}" for c in column)
                           for column in zip(*per.values()))
        lines.append(f"| {name} | {cells} |")
    if calls:
        lines.append("\nsecond call of a small jitted function in a fresh process: "
                     + ", ".join(f"{COLUMNS[n]} {t * 1e3:.3f} ms" for n, t in calls.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="substrings of workload names to run (default: all)")
    parser.add_argument("--seconds", type=float, default=MARKS[-1], help="the horizon of each run")
    parser.add_argument("--runs", type=int, default=1, help="fresh-process runs per row (medians)")
    parser.add_argument("--frameworks", default="ember,ember-runtime,jax",
                        help="of ember (empty cache), ember-runtime (its runtime cached), jax")
    parser.add_argument("--child", nargs=3, metavar=("FRAMEWORK", "INDEX", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        framework, index, seconds = args.child
        print(json.dumps(child_steps(framework, int(index), float(seconds))))
        return
    frameworks = args.frameworks.split(",")
    seed = _seeded_cache() if "ember-runtime" in frameworks else None
    try:
        rows = []
        for index, w in enumerate(WORKLOADS):
            if args.names and not any(n in w.name for n in args.names):
                continue
            print(f"running {w.name} ...", file=sys.stderr, flush=True)
            per: dict[str, list[list[int | None]]] = {f: [] for f in frameworks}
            for _ in range(args.runs):  # (the frameworks in turns)
                for f in frameworks:
                    finished = run_child("jax" if f == "jax" else "ember", index, args.seconds,
                                         seed if f == "ember-runtime" else None)
                    per[f].append(counts(finished, args.seconds))
            rows.append((w.name, {f: [None if c[0] is None else statistics.median(c) for c in zip(*per[f])]
                                  for f in frameworks}))
        calls = None
        if not args.names:
            calls = {f: statistics.median(second_call("jax" if f == "jax" else "ember",
                                                      seed if f == "ember-runtime" else None) for _ in range(5))
                     for f in frameworks}
        print(table(rows, calls))
    finally:
        if seed is not None:
            shutil.rmtree(seed, ignore_errors=True)


if __name__ == "__main__":
    main()
