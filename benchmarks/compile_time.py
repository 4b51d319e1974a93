"""Compile time: first calls with empty caches, ember vs JAX side by side in one run.

``python benchmarks/compile_time.py [--sizes 10 100 ...] [--no-grad] [--no-train-steps]`` prints
two markdown tables.

The first table covers programs of n layers on 64x64 float32, alternating
``tanh(x @ w) * 0.5 + x`` and ``sin(x) * 1.01 + 0.1 * x``, then ``.sum()``. It times the forward
program and ``jit(grad)`` of it, then the first calls of a CNN train step and a transformer-block
train step, each a ``value_and_grad`` with an SGD update.

The second table gives ember's time per compile stage for each program, as the compile log
reports it (the CPU backend's ``STAGES``: expand, optimize, products, fuse, plan, codegen (LLVM
IR), compile (LLVM optimization and machine code), link).

A "first call" here is the whole of ``f(*args)`` on a new function object with every in-memory
cache empty: tracing, compiling and running once. Both frameworks are loaded and warmed up
first, so the figure is what a new program costs in a running process. Each program is called
three ways: with the disk cache empty and tiering off (the whole compile before the call
returns; JAX's disk cache is off by default, so this is the like-for-like column), with the
machine code of that call on disk (a warm disk cache), and tiered (the call runs on the
reference interpreter while the native code compiles in the background; the time until the
native code runs is in parentheses). Each first call is measured once, because it is seconds
long; read the ratios, as the machine is shared.
"""
from __future__ import annotations

import argparse
import logging
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ember  # noqa: E402
import ember.numpy as enp  # noqa: E402
from ember import lax as elax, nn as enn  # noqa: E402

try:
    import jax
    import jax.numpy as jnp_jax
    from jax import lax as jlax, nn as jnn
except ImportError:  # JAX is an optional yardstick, never a dependency
    jax = None

SIZES = (10, 100, 300, 1000, 2000)


# --- programs, written once for both frameworks: (numpy-like, lax-like, nn-like) -> function ---------
def layers(n: int) -> Callable:
    def build(xp, lax, nn):
        def f(x, w):
            for i in range(n):
                x = xp.tanh(x @ w) * 0.5 + x if i % 2 == 0 else xp.sin(x) * 1.01 + 0.1 * x
            return x.sum()
        return f
    return build


def layer_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.standard_normal((64, 64), dtype=np.float32) * 0.1,
            rng.standard_normal((64, 64), dtype=np.float32) * 0.05]


def cnn_train_step(xp, lax, nn):
    """Two 3x3 convolutions (NHWC, SAME) with ReLU, 2x2 average pooling, a dense layer and a
    softmax cross-entropy, differentiated and updated by SGD."""
    value_and_grad = ember.value_and_grad if xp is enp else jax.value_and_grad
    dimension_numbers = ("NHWC", "HWIO", "NHWC")

    def loss(params, images, labels):
        k1, k2, w, b = params
        h = nn.relu(lax.conv_general_dilated(images, k1, (1, 1), "SAME", dimension_numbers=dimension_numbers))
        h = nn.relu(lax.conv_general_dilated(h, k2, (1, 1), "SAME", dimension_numbers=dimension_numbers))
        h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") * 0.25
        logits = h.reshape(h.shape[0], -1) @ w + b
        return -xp.mean(xp.sum(nn.log_softmax(logits) * labels, axis=-1))

    def step(images, labels, *params):
        value, grads = value_and_grad(loss)(params, images, labels)
        return value, tuple(p - 0.01 * g for p, g in zip(params, grads))
    return step


def cnn_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    images = rng.standard_normal((32, 28, 28, 1), dtype=np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)]
    shapes = [(3, 3, 1, 8), (3, 3, 8, 16), (14 * 14 * 16, 10), (10,)]
    return [images, labels, *(rng.standard_normal(s, dtype=np.float32) * 0.1 for s in shapes)]


def transformer_train_step(xp, lax, nn):
    """One pre-norm transformer block (4-head self-attention, a GELU MLP) on 64 tokens of width
    128, a squared-error loss, differentiated and updated by SGD."""
    value_and_grad = ember.value_and_grad if xp is enp else jax.value_and_grad
    heads = 4

    def layer_norm(x):
        mean = xp.mean(x, axis=-1, keepdims=True)
        centered = x - mean
        return centered * lax.rsqrt(xp.mean(centered * centered, axis=-1, keepdims=True) + 1e-5)

    def loss(params, x, target):
        wq, wk, wv, wo, w1, w2 = params
        tokens, width = x.shape
        h = layer_norm(x)
        q, k, v = (xp.transpose((h @ m).reshape(tokens, heads, width // heads), (1, 0, 2)) for m in (wq, wk, wv))
        scores = q @ xp.transpose(k, (0, 2, 1)) / np.sqrt(width // heads).astype(np.float32)
        attended = xp.transpose(nn.softmax(scores, axis=-1) @ v, (1, 0, 2)).reshape(tokens, width)
        x = x + attended @ wo
        x = x + nn.gelu(layer_norm(x) @ w1) @ w2
        return xp.mean((x - target) ** 2)

    def step(x, target, *params):
        value, grads = value_and_grad(loss)(params, x, target)
        return value, tuple(p - 0.01 * g for p, g in zip(params, grads))
    return step


def transformer_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    x, target = (rng.standard_normal((64, 128), dtype=np.float32) for _ in range(2))
    shapes = [(128, 128)] * 4 + [(128, 512), (512, 128)]
    return [x, target, *(rng.standard_normal(s, dtype=np.float32) * 0.05 for s in shapes)]


# --- timing -------------------------------------------------------------------------------------
class StageLog(logging.Handler):
    """Collects the stage times of ember's compile log (``log_compiles``), summed per stage."""

    _STAGE = re.compile(r"([A-Za-z][A-Za-z +]*?) ([0-9.]+) ms")

    def __init__(self) -> None:
        super().__init__()
        self.stages: dict[str, float] = defaultdict(float)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("ember cpu: compiled"):
            timings = message.splitlines()[0].split(";", 1)[1]
            for stage, ms in self._STAGE.findall(timings):
                self.stages[stage.strip()] += float(ms) / 1e3


def ember_first_call(build: Callable, inputs: list[np.ndarray], grad: bool, tiered: bool = False,
                     disk: bool = False) -> tuple[float, float, dict[str, float]]:
    """(first call, until native code runs, stage times) with empty in-memory caches; the disk
    cache empty too unless ``disk`` (then it holds what the previous call of this left there)."""
    f = build(enp, elax, enn)
    fn = ember.jit(ember.grad(f) if grad else f)
    args = [enp.asarray(a) for a in inputs]
    ember.clear_caches(disk=not disk)
    log = StageLog()
    logger = logging.getLogger("ember")
    logger.addHandler(log)
    try:
        with ember.config.override(log_compiles=True, tiered_compilation=tiered, persistent_cache=True):
            start = time.perf_counter()
            ember.block_until_ready(fn(*args))
            seconds = time.perf_counter() - start
            ember.wait_for_compiles()
            native = time.perf_counter() - start
    finally:
        logger.removeHandler(log)
    return seconds, native, dict(log.stages)


def jax_first_call(build: Callable, inputs: list[np.ndarray], grad: bool) -> float | None:
    if jax is None:
        return None
    f = build(jnp_jax, jlax, jnn)
    fn = jax.jit(jax.grad(f) if grad else f)
    args = [jnp_jax.asarray(a) for a in inputs]
    jax.clear_caches()
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def warm_up() -> None:
    """Load and initialize both frameworks (LLVM, XLA, thread pools, the native dispatcher)."""
    x = np.ones((64, 64), np.float32)  # (a product and the math functions of the programs, at O2: their
    ember.jit(lambda a: enp.sum(enp.tanh(a @ a) + enp.sin(a) * 2.0))(x)  # one-time set-up is not theirs)
    from ember.backends.cpu import entry  # (loaded by that first native compile)

    entry.prepare_dispatcher()  # built in the background: not while the first program compiles
    deadline = time.monotonic() + 60
    while entry.dispatcher_pending() and time.monotonic() < deadline:
        time.sleep(0.01)
    if jax is not None:
        jax.jit(lambda a: jnp_jax.sum(jnp_jax.tanh(a @ a) + jnp_jax.sin(a) * 2.0))(x).block_until_ready()


def seconds_text(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.2f} s"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES), help="numbers of layers")
    parser.add_argument("--no-grad", action="store_true", help="skip jit(grad(...)) of the layered programs")
    parser.add_argument("--no-train-steps", action="store_true", help="skip the CNN and transformer steps")
    args = parser.parse_args(argv)
    ember.config.update("cache_dir", tempfile.mkdtemp(prefix="ember-compile-time-"))  # never the user's
    ember.config.update("jit_churn_warning_threshold", 0)
    warm_up()
    rng = np.random.default_rng(0)
    programs = [(f"layers n={n}", layers(n), layer_inputs(rng), False) for n in args.sizes]
    if not args.no_grad:
        programs += [(f"grad layers n={n}", layers(n), layer_inputs(rng), True) for n in args.sizes]
    if not args.no_train_steps:
        programs += [("CNN train step", cnn_train_step, cnn_inputs(rng), False),
                     ("transformer train step", transformer_train_step, transformer_inputs(rng), False)]
    rows, stage_rows, stage_names = [], [], []
    for name, build, inputs, grad in programs:
        print(f"compiling {name} ...", file=sys.stderr, flush=True)
        ours, _, stages = ember_first_call(build, inputs, grad)  # leaves its code on disk
        warm, _, _ = ember_first_call(build, inputs, grad, disk=True)
        quick, native, _ = ember_first_call(build, inputs, grad, tiered=True)
        theirs = jax_first_call(build, inputs, grad)
        rows.append(f"| {name} | {seconds_text(ours)} | {seconds_text(quick)} ({seconds_text(native)}) "
                    f"| {seconds_text(warm)} | {seconds_text(theirs)} | {ratio(ours, theirs)} | {ratio(quick, theirs)} "
                    f"| {ratio(warm, ours)} |")
        stage_names += [s for s in stages if s not in stage_names]
        stage_rows.append((name, ours, stages))
    print("First calls, caches empty. ember: compiled before the call returns; tiered: the call runs on the "
          "reference interpreter while native code compiles in the background (in parentheses: until native "
          "code runs); warm disk: in-memory caches empty, machine code on disk.")
    print()
    print("| program | ember | ember tiered (native after) | ember warm disk | JAX | ember/JAX | tiered/JAX "
          "| warm/ember |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print("| program | " + " | ".join(stage_names) + " | rest (tracing, transforms, running) |")
    print("|---|" + "---|" * (len(stage_names) + 1))
    for name, total, stages in stage_rows:
        cells = [seconds_text(stages.get(s, 0.0)) for s in stage_names]
        print(f"| {name} | " + " | ".join(cells) + f" | {seconds_text(total - sum(stages.values()))} |")


def ratio(ours: float | None, theirs: float | None) -> str:
    return f"{ours / theirs:.2f}" if ours and theirs else "-"


if __name__ == "__main__":
    main()
