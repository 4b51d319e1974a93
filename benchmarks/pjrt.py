"""ember on a PJRT device against JAX on its own, side by side: a conformance subset, then times.

``python benchmarks/pjrt.py [--backend NAME] [--quick] [--parts conformance,steady,first]`` runs on the
PJRT backend ``NAME`` (default: the first accelerator found, else XLA's CPU plugin, ``xla_cpu``); JAX
runs on its default platform (the TPU on a TPU machine, its CPU otherwise). It prints markdown tables:

1. conformance: a subset of programs (elementwise and special functions, reductions, products,
   sorts, loops, branches, FFT, gathers and scatters, convolutions and pooling with their
   gradients, random numbers, linear algebra) on the PJRT backend against ember's CPU backend, at
   ``highest`` matmul precision (the largest error of each, relative above 1, and whether it is
   within float32 tolerance; random bits and pooling gradients must be exact);
2. steady medians of each program, ember / JAX and their ratio: the tiny-op call (``x * 2 + 1`` on
   (10,) float32, the call overhead), selu on 10^6 float32, matrix products (bf16 1024/4096/8192 on an
   accelerator, f32 512/1024 on a CPU plugin), a small CNN train step (batch 128 of 32x32x3, two
   3x3 convolutions, max and average pooling, dense, SGD with momentum) and a 2-layer GPT train step
   (d 512, 8 heads, seq 256, batch 16, vocab 8192, float32, Adam), each given NumPy arrays, then
   with its state already on the device (as a training loop's is once results are fed back);
3. programs over 8 devices (``mesh``: XLA's CPU plugin made with 8 devices, against JAX on 8 CPU
   devices): a data-parallel MLP step, a 2-D sharded matmul, a shard_map ring all-reduce and a
   transformer block's step on a 2 x 4 (data, model) mesh, with the bytes each device holds;
4. first calls, each in a fresh process: ember and JAX with empty caches, and each with its disk cache
   warm from an earlier process (ember's holds the plugin's serialized executables; JAX's persistent
   cache is switched on for that row: it is opt-in).

Every measurement runs in a child process of one framework: a device (a TPU) can be held by one
program at a time, so ember and JAX never share a process, and this parent opens none. Timings are
medians over repeated calls (steady) or over ``--runs`` processes (first calls); ratios come from
one run, side by side. Nothing here asserts a time.
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
if ROOT not in sys.path:  # (run as a script from a checkout: this checkout's ember)
    sys.path.insert(0, ROOT)

# The programs, written once for both frameworks (``np`` below is ember.numpy or jax.numpy).
PROGRAMS = r'''
import math
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

def gpt_init(seed=0):
    rng = onp.random.default_rng(seed)
    d, vocab, seq = GPT["d"], GPT["vocab"], GPT["seq"]
    def w(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(onp.float32)
    p = {"wte": w(vocab, d), "wpe": w(seq, d), "lnf_g": onp.ones(d, onp.float32), "lnf_b": onp.zeros(d, onp.float32)}
    for l in range(GPT["layers"]):
        p.update({f"{l}.ln1_g": onp.ones(d, onp.float32), f"{l}.ln1_b": onp.zeros(d, onp.float32),
                  f"{l}.qkv": w(d, 3 * d), f"{l}.proj": w(d, d),
                  f"{l}.ln2_g": onp.ones(d, onp.float32), f"{l}.ln2_b": onp.zeros(d, onp.float32),
                  f"{l}.fc": w(d, 4 * d), f"{l}.out": w(4 * d, d)})
    m = {k: onp.zeros_like(a) for k, a in p.items()}
    v = {k: onp.zeros_like(a) for k, a in p.items()}
    tokens = rng.integers(0, vocab, (GPT["batch"], seq + 1)).astype(onp.int32)
    return p, m, v, onp.float32(0.0), tokens[:, :-1], tokens[:, 1:]

def layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) * lax.rsqrt(var + 1e-5) * g + b

def gpt_loss(p, tokens, targets):
    batch, seq = tokens.shape
    d, heads = p["wte"].shape[1], GPT["heads"]
    x = p["wte"][tokens] + p["wpe"][None, :seq]
    causal = np.tril(np.ones((seq, seq), dtype=bool))
    def split_heads(t):
        return t.reshape(batch, seq, heads, d // heads).transpose(0, 2, 1, 3)
    for l in range(GPT["layers"]):
        h = layer_norm(x, p[f"{l}.ln1_g"], p[f"{l}.ln1_b"])
        q, k, v = np.split(h @ p[f"{l}.qkv"], 3, axis=-1)
        q, k, v = split_heads(q), split_heads(k), split_heads(v)
        att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(d // heads))
        att = np.where(causal, att, -1e9)
        att = np.exp(att - att.max(-1, keepdims=True))
        att = att / att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d)
        x = x + y @ p[f"{l}.proj"]
        h = layer_norm(x, p[f"{l}.ln2_g"], p[f"{l}.ln2_b"]) @ p[f"{l}.fc"]
        h = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
        x = x + h @ p[f"{l}.out"]
    logits = layer_norm(x, p["lnf_g"], p["lnf_b"]) @ p["wte"].T
    logits = logits - logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, targets[..., None], axis=-1).mean()

def gpt_step(p, m, v, t, tokens, targets, lr=3e-4, b1=0.9, b2=0.999, eps=1e-8):
    loss, g = value_and_grad(gpt_loss)(p, tokens, targets)
    t = t + 1.0
    m = {k: b1 * m[k] + (1 - b1) * g[k] for k in p}
    v = {k: b2 * v[k] + (1 - b2) * g[k] * g[k] for k in p}
    step = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    p = {k: p[k] - step * m[k] / (np.sqrt(v[k]) + eps) for k in p}
    return p, m, v, t, loss
'''

GPT_FULL = {"d": 512, "heads": 8, "seq": 256, "batch": 16, "vocab": 8192, "layers": 2}
GPT_QUICK = {"d": 64, "heads": 4, "seq": 32, "batch": 2, "vocab": 256, "layers": 2}


def framework(name: str, backend: str | None) -> dict:
    """The names the programs use, from ember (on ``backend``) or from JAX."""
    if name == "jax":
        import jax
        import jax.numpy as jnp
        from jax import lax

        return {"np": jnp, "lax": lax, "jit": jax.jit, "value_and_grad": jax.value_and_grad,
                "ready": jax.block_until_ready, "devices": jax.devices, "put": jax.device_put}
    import ember
    import ember.numpy as enp
    from ember import lax as elax

    if backend:
        ember.config.update("backend", backend)
    return {"np": enp, "lax": elax, "jit": ember.jit, "value_and_grad": ember.value_and_grad,
            "ready": ember.block_until_ready, "devices": ember.devices, "put": ember.device_put}


def programs(names: dict, quick: bool) -> dict:
    space = dict(names, BATCH=32 if quick else 128, GPT=GPT_QUICK if quick else GPT_FULL)
    exec(PROGRAMS, space)  # noqa: S102  (the benchmark's own source, shared by both frameworks)
    return space


def inputs(kind: str, size: int, dtype: str, names: dict, space: dict) -> tuple:
    """A row's arguments: NumPy arrays, or (a kind ending ``@device``) already on the device, as a
    training loop's state is once its step's results are fed back."""
    if kind.endswith("@device"):
        return names["put"](inputs(kind.removesuffix("@device"), size, dtype, names, space))
    np_module = names["np"]
    rng = np.random.default_rng(0)
    if kind == "tiny":
        return (np.arange(10, dtype=np.float32),)
    if kind == "selu":
        return (rng.standard_normal(10**6).astype(np.float32),)
    if kind == "matmul":
        a = rng.standard_normal((size, size)).astype(np.float32)
        b = rng.standard_normal((size, size)).astype(np.float32)
        return tuple(np_module.asarray(m).astype(dtype) for m in (a, b))
    return space[f"{kind}_init"]()


def cases(accelerator: bool, quick: bool) -> list[tuple[str, str, int, str]]:
    """(label, program, size, dtype) rows."""
    rows = [("tiny-op call", "tiny", 10, "float32"), ("selu 1e6", "selu", 10**6, "float32")]
    if accelerator:
        rows += [(f"bf16 matmul {n}", "matmul", n, "bfloat16") for n in ((1024,) if quick else (1024, 4096, 8192))]
    else:
        rows += [(f"f32 matmul {n}", "matmul", n, "float32") for n in ((256,) if quick else (512, 1024))]
    rows += [("CNN train step", "cnn", 0, "float32"), ("GPT train step", "gpt", 0, "float32"),
             ("CNN train step, state on the device", "cnn@device", 0, "float32"),
             ("GPT train step, state on the device", "gpt@device", 0, "float32")]
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
    kind = kind.removesuffix("@device")
    return space["jit"](space[{"cnn": "cnn_step", "gpt": "gpt_step"}.get(kind, kind)])


CONFORMANCE = r'''
def elementwise(x):
    return np.tanh(x) * np.exp(-x * x) + np.log1p(np.abs(x)) + lax.erf(x) + np.expm1(x / 4)

def special(x):
    u = np.abs(x) + 0.5
    return lax.lgamma(u), lax.digamma(u), lax.erf_inv(np.tanh(x) * 0.99), np.arctan2(x, x[::-1] + 0.1)

def reductions(x):
    return x.sum(0), x.max(1), np.argmax(x, 0), np.cumsum(x, 1), lax.cummax(x, axis=0), np.var(x, axis=1)

def matmul(x):
    return np.dot(x, x.T, precision="highest") + np.matmul(x.T, x, precision="highest").sum()

def sort(x):
    return np.sort(x, axis=0), np.argsort(x[:, 0]), lax.top_k(x, 5)[0]

def scan(x):
    return lax.scan(lambda c, r: (c * 0.9 + r, np.sin(c)), x[0] * 0, x)

def while_loop(x):
    def body(s):
        i, y = s
        return i + 1, y - (y * y - np.abs(x) - 1.0) / (2 * y)
    return lax.while_loop(lambda s: s[0] < 20, body, (0, np.ones_like(x) * 2.0))[1]

def branches(x):
    return (lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: -v, x),
            lax.switch(2, [np.sin, np.cos, np.tanh], x))

def fft(x):
    return np.abs(np.fft.fft(x, axis=1)), np.fft.irfft(np.fft.rfft(x, axis=0), n=64, axis=0)

def gather_scatter(x):
    idx = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    return x[idx], x.at[idx].add(1.0), x.at[idx, 2].max(5.0), np.take_along_axis(x, np.argsort(x, 1), 1)

def conv_grad(x):
    img = x.reshape(2, 32, 32, 1)
    def loss(w):
        y = lax.conv_general_dilated(img, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                     precision="highest")
        return (y * y).sum()
    return value_and_grad(loss)(np.ones((3, 3, 1, 4)) * 0.1)

def pool_grad(x):
    relu = np.maximum(np.round(x * 2), 0.0).reshape(1, 64, 32, 1)  # many ties: each window's cotangent to one
    def loss(h):
        return (lax.reduce_window(h, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") ** 2).sum()
    return value_and_grad(loss)(relu)

def random(x):
    key = rnd.PRNGKey(7)
    k1, k2 = rnd.split(key)
    return rnd.bits(k1, (256,)), rnd.normal(k2, (64, 8)), rnd.uniform(key, (100,))

def linalg(x):
    a = np.dot(x.T, x, precision="highest") / 64 + np.eye(32)
    lower = np.linalg.cholesky(a)
    q, r = np.linalg.qr(x)
    return (lower, np.linalg.solve(a, x.T), np.linalg.inv(a), np.linalg.slogdet(a)[1],
            np.abs(np.diag(r)), np.linalg.eigvalsh(a), np.linalg.svd(x, compute_uv=False),
            lax.linalg.triangular_solve(lower, x.T[:32], left_side=True, lower=True))

def grad_tanh(x):
    return grad(lambda w: np.sum(np.tanh(np.matmul(w, w.T, precision="highest"))))(x)
'''
CONFORMANCE_NAMES = ("elementwise", "special", "reductions", "matmul", "sort", "scan", "while_loop", "branches",
                     "fft", "gather_scatter", "conv_grad", "pool_grad", "random", "linalg", "grad_tanh")


def _compare(label: str, got: list, want: list) -> tuple[float, bool]:
    """The largest error (relative above 1) and whether it is within tolerance (integers, random
    bits and pooling gradients exact)."""
    pairs = list(zip(got, want))
    err = max((float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)) /
                             np.maximum(np.abs(b.astype(np.float64)), 1.0))) if a.size else 0.0
               for a, b in pairs), default=0.0)
    exact = len(got) == len(want) and all(np.array_equal(a, b) for a, b in pairs
                                          if label == "pool_grad" or a.dtype.kind != "f")
    return err, exact and err <= 1e-4


def _failure(e: Exception) -> str:
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"


def conformance(name: str, backend: str, reference: str) -> list:
    """Each program under ember on ``backend`` (or under JAX on its device) against ember's CPU
    backend, products at ``highest`` precision (a TPU's default passes bfloat16). ember's run keeps
    the CPU backend's results in the file ``reference``; JAX's run reads them."""
    x = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    if name == "jax":
        import jax

        space = {"np": jax.numpy, "lax": jax.lax, "rnd": jax.random, "grad": jax.grad,
                 "value_and_grad": jax.value_and_grad}
        exec(CONFORMANCE, space)  # noqa: S102  (the benchmark's own source)
        want = np.load(reference)
        rows = []
        for label in CONFORMANCE_NAMES:
            try:
                with jax.default_matmul_precision("highest"):
                    got = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(space[label])(x))]
            except Exception as e:  # noqa: BLE001  (a row reports its failure; the others still run)
                rows.append((label, _failure(e), False))
                continue
            count = sum(1 for k in want.files if k.startswith(label + "/"))
            rows.append((label, *_compare(label, got, [want[f"{label}/{k}"] for k in range(count)])))
        return rows
    import ember
    import ember.numpy as enp
    from ember import lax as elax, random as erandom

    space = {"np": enp, "lax": elax, "rnd": erandom, "grad": ember.grad, "value_and_grad": ember.value_and_grad}
    exec(CONFORMANCE, space)  # noqa: S102  (the benchmark's own source)
    rows, kept = [], {}
    for label in CONFORMANCE_NAMES:
        results = {}
        for target in ("cpu", backend):
            ember.config.update("backend", target)
            try:
                with ember.default_matmul_precision("highest"):
                    out = ember.jit(space[label])(x)
                results[target] = [np.asarray(o) for o in ember.tree_util.tree_leaves(out)]
            except Exception as e:  # noqa: BLE001  (a row reports its failure; the others still run)
                results[target] = _failure(e)
        if isinstance(results["cpu"], list):
            kept.update({f"{label}/{k}": v for k, v in enumerate(results["cpu"])})
        if isinstance(results[backend], str) or isinstance(results["cpu"], str):
            rows.append((label, results[backend] if isinstance(results[backend], str) else results["cpu"], False))
        else:
            rows.append((label, *_compare(label, results[backend], results["cpu"])))
    np.savez(reference, **kept)
    ember.config.update("backend", "")
    return rows


def run_steady(name: str, backend: str | None, rows: list, quick: bool) -> dict:
    names = framework(name, backend)
    platform = str(names["devices"]()[0].platform)
    space = programs(names, quick)
    repeats = 20 if quick else 100
    times: dict = {}
    for label, kind, size, dtype in rows:
        try:
            args = inputs(kind, size, dtype, names, space)
            times[label] = steady(jitted(space, kind), args, names["ready"],
                                  repeats // 4 if kind.startswith(("cnn", "gpt")) else repeats)
        except Exception as e:  # noqa: BLE001  (a row reports its failure; the others still run)
            times[label] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return {"platform": platform, "times": times}


def run_first(name: str, backend: str | None, case: list, quick: bool) -> float:
    if name == "jax" and os.environ.get("BENCH_JAX_CACHE"):
        import jax
        jax.config.update("jax_compilation_cache_dir", os.environ["BENCH_JAX_CACHE"])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    names = framework(name, backend)
    space = programs(names, quick)
    _, kind, size, dtype = case
    args = inputs(kind, size, dtype, names, space)
    names["devices"]()  # the device opened and its client created before the clock starts
    fn = jitted(space, kind)
    start = time.perf_counter()
    names["ready"](fn(*args))
    return time.perf_counter() - start


# Programs over 8 devices (``--parts mesh``), written once: ``jax`` is JAX, or ember under install_as_jax.
MESH_PROGRAMS = r'''
import numpy as onp
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

AUTO = jax.sharding.AxisType.Auto

def mesh_rows(quick):
    rng = onp.random.default_rng(0)
    rows = {}
    dmesh = jax.make_mesh((8,), ("data",), axis_types=(AUTO,))
    d_in, d_hidden, batch = (64, 128, 256) if quick else (512, 1024, 2048)
    params = {"w1": rng.standard_normal((d_in, d_hidden)).astype(onp.float32) * 0.05,
              "w2": rng.standard_normal((d_hidden, 10)).astype(onp.float32) * 0.05}
    params = jax.device_put(params, NamedSharding(dmesh, P()))
    xs = jax.device_put(rng.standard_normal((batch, d_in)).astype(onp.float32), NamedSharding(dmesh, P("data")))
    ys = jax.device_put(onp.eye(10, dtype=onp.float32)[rng.integers(0, 10, batch)], NamedSharding(dmesh, P("data")))

    def mlp_loss(p, x, y):
        logits = jax.nn.relu(x @ p["w1"]) @ p["w2"]
        return -(jax.nn.log_softmax(logits) * y).sum(axis=1).mean()

    @jax.jit
    def mlp_step(p, x, y):
        g = jax.grad(mlp_loss)(p, x, y)
        return jax.tree.map(lambda a, b: a - 0.1 * b, p, g)
    rows["data-parallel MLP step (8-way batch)"] = (mlp_step, (params, xs, ys))

    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AUTO, AUTO))
    n = 1024 if quick else 4096
    a = jax.device_put(rng.standard_normal((n, n)).astype(onp.float32), NamedSharding(mesh, P("x", "y")))
    b = jax.device_put(rng.standard_normal((n, n)).astype(onp.float32), NamedSharding(mesh, P("y", None)))
    rows[f"2-D sharded matmul {n} (2 x 4)"] = (jax.jit(lambda a, b: a @ b), (a, b))

    ring_mesh = jax.make_mesh((8,), ("i",), axis_types=(AUTO,))
    v = jax.device_put(rng.standard_normal((8, 1 << (14 if quick else 18))).astype(onp.float32),
                       NamedSharding(ring_mesh, P("i")))

    def ring(block):
        total, piece = block, block
        for _ in range(7):
            piece = jax.lax.ppermute(piece, "i", [(k, (k + 1) % 8) for k in range(8)])
            total = total + piece
        return total
    rows["shard_map ring all-reduce (8 devices)"] = (
        jax.jit(jax.shard_map(ring, mesh=ring_mesh, in_specs=P("i"), out_specs=P("i"))), (v,))

    tmesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AUTO, AUTO))
    d, h, t, bsz = (64, 256, 32, 8) if quick else (256, 1024, 128, 16)
    shard = {"wq": P(None, "model"), "wk": P(None, "model"), "wv": P(None, "model"), "wo": P("model", None),
             "w1": P(None, "model"), "w2": P("model", None)}
    shapes = {"wq": (d, d), "wk": (d, d), "wv": (d, d), "wo": (d, d), "w1": (d, h), "w2": (h, d)}
    tp = {k: jax.device_put((rng.standard_normal(s) / onp.sqrt(s[0])).astype(onp.float32),
                            NamedSharding(tmesh, shard[k])) for k, s in shapes.items()}
    tx = jax.device_put(rng.standard_normal((bsz, t, d)).astype(onp.float32), NamedSharding(tmesh, P("data")))

    def block(p, x):
        q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
        att = jax.nn.softmax(jnp.einsum("btd,bsd->bts", q, k) / onp.sqrt(d), axis=-1)
        x = x + jnp.einsum("bts,bsd->btd", att, v) @ p["wo"]
        x = x + jax.nn.gelu(x @ p["w1"]) @ p["w2"]
        return jnp.mean(x ** 2)

    @jax.jit
    def block_step(p, x):
        g = jax.grad(block)(p, x)
        return jax.tree.map(lambda a, b: a - 0.05 * b, p, g)
    rows["transformer block step (2 x 4 data, model)"] = (block_step, (tp, tx))
    return rows
'''


def per_device_bytes(args: tuple) -> list[int]:
    """The bytes each device holds of ``args``' arrays, by device id."""
    held: dict = {}
    for leaf in __import__("jax").tree.leaves(args):
        for shard in leaf.addressable_shards:
            held[shard.device.id] = held.get(shard.device.id, 0) + shard.data.nbytes
    return [held[k] for k in sorted(held)]


def run_mesh(name: str, quick: bool) -> dict:
    if name == "ember":
        import ember

        ember.install_as_jax()
    space: dict = {}
    exec(MESH_PROGRAMS, space)  # noqa: S102  (the benchmark's own source, shared by both frameworks)
    import jax

    out = {}
    for label, (fn, args) in space["mesh_rows"](quick).items():
        try:
            t = steady(fn, args, jax.block_until_ready, 5 if "matmul" in label and not quick else 20)
            out[label] = {"time": t, "bytes": per_device_bytes(args),
                          "whole": sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in jax.tree.leaves(args))}
        except Exception as e:  # noqa: BLE001  (a row reports its failure; the others still run)
            out[label] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    return out


def child(task: dict) -> None:
    """One measurement in this process (``--child``): prints its result as JSON on the last line."""
    if task["part"] == "conformance":
        result = conformance(task["name"], task["backend"], task["reference"])
    elif task["part"] == "mesh":
        result = run_mesh(task["name"], task["quick"])
    elif task["part"] == "steady":
        result = run_steady(task["name"], task["backend"], task["rows"], task["quick"])
    else:
        result = run_first(task["name"], task["backend"], task["case"], task["quick"])
    print(json.dumps(result))


def spawn(task: dict, env: dict | None = None, timeout: float = 1800) -> object:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(task)],
                         env={**os.environ, **(env or {})}, capture_output=True, text=True, cwd=ROOT,
                         timeout=timeout)
    if out.returncode:
        raise RuntimeError(f"{task} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None, help="the PJRT backend (default: an accelerator, else xla_cpu)")
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats (a smoke run)")
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per first-call row")
    parser.add_argument("--parts", default="conformance,steady,first,mesh",
                        help="which tables, comma-separated (mesh: programs over 8 devices of XLA's CPU plugin)")
    parser.add_argument("--rows", default="", help="programs of the steady and first-call tables, comma-separated: "
                        "tiny, selu, matmul, cnn, gpt, cnn@device, gpt@device (default: all rows)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        return child(json.loads(opts.child))

    from ember.backends.pjrt.discovery import find_plugins

    plugins = find_plugins()
    if not plugins:
        sys.exit("no PJRT plugin found: pip install ember[pjrt-cpu] (or ember[tpu] on a TPU machine)")
    backend = opts.backend or next((n for n, spec in plugins.items() if spec.accelerator), "xla_cpu")
    if backend not in plugins:
        sys.exit(f"no plugin for backend {backend!r}; found: {sorted(plugins)}")
    accelerator = plugins[backend].accelerator
    parts = set(opts.parts.split(","))
    rows = [r for r in cases(accelerator, opts.quick) if not opts.rows or r[1] in opts.rows.split(",")]
    print(f"# ember on PJRT backend {backend!r} ({plugins[backend].path}) vs JAX, {time.strftime('%Y-%m-%d')}\n",
          flush=True)

    if "conformance" in parts:
        with tempfile.TemporaryDirectory() as scratch:
            reference = os.path.join(scratch, "cpu.npz")
            rows_of = {name: spawn({"part": "conformance", "name": name, "backend": backend, "reference": reference})
                       for name in ("ember", "jax")}
        print(f"| conformance: max error against ember's CPU backend (relative above 1), highest precision; "
              f"ok: within 1e-4, integers, random bits and pooling gradients exact | ember ({backend}) | ok | "
              "JAX (its device) | ok |\n|---|---|---|---|---|", flush=True)
        for (label, err, ok), (_, jerr, jok) in zip(rows_of["ember"], rows_of["jax"]):
            def shown(e: object) -> str:
                return e if isinstance(e, str) else f"{e:.2e}"
            print(f"| {label} | {shown(err)} | {'yes' if ok else 'NO'} | {shown(jerr)} | {'yes' if jok else 'NO'} |",
                  flush=True)

    if "steady" in parts:
        results = {name: spawn({"part": "steady", "name": name, "backend": backend if name == "ember" else None,
                                "rows": rows, "quick": opts.quick}) for name in ("ember", "jax")}
        print(f"\n| steady (median) | ember ({backend}) | JAX ({results['jax']['platform']}) | ember/JAX |\n"
              "|---|---|---|---|")
        for label, *_ in rows:
            e, j = results["ember"]["times"][label], results["jax"]["times"][label]
            if isinstance(e, str) or isinstance(j, str):
                print(f"| {label} | {e if isinstance(e, str) else f'{e * 1e3:.3f} ms'} | "
                      f"{j if isinstance(j, str) else f'{j * 1e3:.3f} ms'} | - |", flush=True)
                continue
            print(f"| {label} | {e * 1e3:.3f} ms | {j * 1e3:.3f} ms | {e / j:.2f} |", flush=True)

    if "mesh" in parts:
        eight = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
        mesh_results = {"ember": spawn({"part": "mesh", "name": "ember", "quick": opts.quick},
                                       {**eight, "EMBER_PLATFORMS": "xla_cpu"}),
                        "jax": spawn({"part": "mesh", "name": "jax", "quick": opts.quick},
                                     {**eight, "JAX_PLATFORMS": "cpu"})}
        print("\n| over 8 devices (steady median) | ember (xla_cpu) | JAX (cpu) | ember/JAX | bytes per device, ember "
              "(of the whole) | JAX |\n|---|---|---|---|---|---|")
        for label, e in mesh_results["ember"].items():
            j = mesh_results["jax"][label]
            if isinstance(e, str) or isinstance(j, str):
                def shown(r: object) -> str:
                    return r if isinstance(r, str) else f"{r['time'] * 1e3:.2f} ms"  # type: ignore[index]
                print(f"| {label} | {shown(e)} | {shown(j)} | - | - | - |", flush=True)
                continue

            def held(r: dict) -> str:
                low, high = min(r["bytes"]), max(r["bytes"])
                return f"{low}-{high} ({r['whole']})" if low != high else f"{low} ({r['whole']})"
            print(f"| {label} | {e['time'] * 1e3:.2f} ms | {j['time'] * 1e3:.2f} ms | {e['time'] / j['time']:.2f} | "
                  f"{held(e)} | {held(j)} |", flush=True)

    if "first" not in parts:
        return
    wanted = [r for r in rows if "@" not in r[1]]
    print(f"\n| first call (median of {opts.runs} processes) | ember cold | ember warm disk | JAX cold | "
          f"JAX warm disk | ember cold/JAX cold | ember warm/JAX cold |\n|---|---|---|---|---|---|---|", flush=True)
    for case in wanted:
        with tempfile.TemporaryDirectory() as scratch:
            def first(name: str, env: dict) -> float:
                return spawn({"part": "first", "name": name, "backend": backend if name == "ember" else None,
                              "case": case, "quick": opts.quick}, env)

            def runs(name: str, env: dict) -> float:
                return statistics.median(first(name, env) for _ in range(opts.runs))
            ember_cold = runs("ember", {"EMBER_CACHE_DIR": os.path.join(scratch, "cold"),
                                        "EMBER_PERSISTENT_CACHE": "0"})
            warm = os.path.join(scratch, "warm")
            first("ember", {"EMBER_CACHE_DIR": warm})
            ember_warm = runs("ember", {"EMBER_CACHE_DIR": warm})
            jax_cold = runs("jax", {})
            jax_dir = os.path.join(scratch, "jax")
            first("jax", {"BENCH_JAX_CACHE": jax_dir})
            jax_warm = runs("jax", {"BENCH_JAX_CACHE": jax_dir})
        print(f"| {case[0]} | {ember_cold:.3f} s | {ember_warm:.3f} s | {jax_cold:.3f} s | {jax_warm:.3f} s | "
              f"{ember_cold / jax_cold:.2f} | {ember_warm / jax_cold:.2f} |", flush=True)


if __name__ == "__main__":
    main()
