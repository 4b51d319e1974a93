"""The eager table of ``python -m benchmarks``: operations called outside ``jit``, ember and JAX
side by side in one run (``python -m benchmarks.eager [name ...]`` prints it alone).

Eager code is what notebooks, tests, initializers and libraries that loop outside ``jit`` run:
each row calls the operation directly, with arrays already on the device. "ember" and "JAX" are
medians of repeated calls in the steady state, the two frameworks taking turns in
``benchmarks.run.ROUNDS`` rounds (ember/JAX is the median of the rounds' ratios), after the
row's first ``FIRST_CALLS`` calls and ``WARMUP_SECONDS`` more of calls, once the background
compiles they started have finished (ember
compiles an eager operation or loop when its signature comes a second time, or at once when that
pays, and a replayed sampler's exact runs once its calls have paid for the compile: see
``ember.runtime.eager`` and ``ember.runtime.replay``). "first call" is the row's first call in the
process (for the loops it includes compiling the loop; for single operations JAX compiles a
kernel per new shape, ember runs a new signature on its reference interpreter); "first 100 calls"
is the ratio of the two frameworks' times for the row's first ``FIRST_CALLS`` calls, the first
included, as a loop that starts cold sees them. The Adam rows drive an optimizer as optax's own
tests do, ``lax.scan(step, init, length=n)`` outside ``jit`` with ``step`` calling a jitted
update; the update is optax's Adam rule (``scale_by_adam`` then the learning rate), written once
for both frameworks (optax itself binds to one JAX per process).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import ember
import ember.numpy as enp
from benchmarks.run import _fmt_time, median_time, side_by_side
from ember import lax as elax

try:
    import jax
    import jax.numpy as jnp_jax
    from jax import lax as jlax
except ImportError:  # JAX is an optional oracle, never a dependency
    jax = None


@dataclass
class EagerWorkload:
    name: str
    build: Callable[[Any, Any, Any], Callable]  # (numpy-like, lax-like, jit) -> function called eagerly
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    numpy_eager: Callable | None = None


def _add(xp, lax, jit):
    return lambda x, y: x + y


def _sin(xp, lax, jit):
    return lambda x: xp.sin(x)


def _sum(xp, lax, jit):
    return lambda x: xp.sum(x)


def _selu(xp, lax, jit):
    return lambda x: 1.0507009873554805 * xp.where(x > 0, x, 1.6732632423543772 * xp.exp(x) - 1.6732632423543772)


def _where_scalar(xp, lax, jit):
    return lambda c, x: xp.where(c, x, 0.0)


def _mean(xp, lax, jit):
    return lambda x: xp.mean(x)


def _var(xp, lax, jit):
    return lambda x: xp.var(x, axis=-1)


def _log_softmax(xp, lax, jit):
    nn = ember.nn if xp is enp else jax.nn
    return lambda x: nn.log_softmax(x)


def _softmax(xp, lax, jit):
    nn = ember.nn if xp is enp else jax.nn
    return lambda x: nn.softmax(x)


def _norm(xp, lax, jit):
    return lambda x: xp.linalg.norm(x)


def _take(xp, lax, jit):
    return lambda x, i: xp.take(x, i)


def _matvec(xp, lax, jit):
    return lambda a, v: a @ v


def _normal(xp, lax, jit):
    random = ember.random if xp is enp else jax.random
    return lambda key: random.normal(key, (10,))


def _split(xp, lax, jit):
    random = ember.random if xp is enp else jax.random
    return lambda key: random.split(key)


def _matmul(xp, lax, jit):
    return lambda a: a @ a


ADAM_STEPS = 3000


def _adam_step(xp, jit):
    """A jitted step: the gradient of ``sum((p - 1)^2)`` and optax's Adam update (b1 0.9, b2 0.999,
    eps 1e-8, learning rate 1e-3, the count in int32 as optax keeps it)."""
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 1e-3

    @jit
    def step(params, mu, nu, count):
        grads = {k: 2.0 * (p - 1.0) for k, p in params.items()}
        mu = {k: b1 * mu[k] + (1 - b1) * g for k, g in grads.items()}
        nu = {k: b2 * nu[k] + (1 - b2) * g * g for k, g in grads.items()}
        count = count + 1
        t = count.astype(xp.float32)
        updates = {k: -lr * (mu[k] / (1 - b1 ** t)) / (xp.sqrt(nu[k] / (1 - b2 ** t)) + eps) for k in mu}
        return {k: params[k] + updates[k] for k in params}, mu, nu, count
    return step


def _adam_init(xp, ws):
    params = {"w": xp.asarray(ws[0]), "b": xp.asarray(ws[1])}
    zeros = {k: xp.zeros_like(v) for k, v in params.items()}
    return params, zeros, dict(zeros), xp.zeros((), xp.int32)


def _adam_scan(xp, lax, jit):
    """The same body function each call (the second call on: the steady state)."""
    step = _adam_step(xp, jit)

    def body(carry, _):
        return step(*carry), None

    return lambda *ws: lax.scan(body, _adam_init(xp, ws), length=ADAM_STEPS)[0]


def _adam_scan_new_closure(xp, lax, jit):
    """A new body closure per call (as optax's tests write them): the loop is traced each call."""
    step = _adam_step(xp, jit)

    def run(*ws):
        init = _adam_init(xp, ws)

        def body(carry, _):
            return step(*carry), None
        return lax.scan(body, init, length=ADAM_STEPS)[0]
    return run


def _adam_inputs(rng):
    return [rng.standard_normal(10, dtype=np.float32), np.float32(0.5)]


def _small(rng, n=2):
    return [rng.standard_normal(10, dtype=np.float32) for _ in range(n)]


EAGER_WORKLOADS = [
    EagerWorkload("x + y, (10,) f32", _add, _small, np.add),
    EagerWorkload("jnp.sin(x), (10,) f32", _sin, lambda rng: _small(rng, 1), np.sin),
    EagerWorkload("jnp.sum(x), (10,) f32", _sum, lambda rng: _small(rng, 1), np.sum),
    EagerWorkload("jnp.where(c, x, 0.0), (10,) f32", _where_scalar,
                  lambda rng: [rng.standard_normal(10) > 0, rng.standard_normal(10, dtype=np.float32)],
                  lambda c, x: np.where(c, x, np.float32(0))),
    EagerWorkload("jnp.mean(x), (10,) f32", _mean, lambda rng: _small(rng, 1), np.mean),
    EagerWorkload("jnp.var(x, axis=-1), (8, 10) f32", _var,
                  lambda rng: [rng.standard_normal((8, 10), dtype=np.float32)], lambda x: np.var(x, axis=-1)),
    EagerWorkload("nn.log_softmax(x), (8, 10) f32", _log_softmax,
                  lambda rng: [rng.standard_normal((8, 10), dtype=np.float32)]),
    EagerWorkload("nn.softmax(x), (8, 10) f32", _softmax,
                  lambda rng: [rng.standard_normal((8, 10), dtype=np.float32)]),
    EagerWorkload("jnp.linalg.norm(x), (8, 10) f32", _norm,
                  lambda rng: [rng.standard_normal((8, 10), dtype=np.float32)], np.linalg.norm),
    EagerWorkload("jnp.take(x, i), (10,) f32, 8 indices", _take,
                  lambda rng: [rng.standard_normal(10, dtype=np.float32), rng.integers(0, 10, 8).astype(np.int32)],
                  np.take),
    EagerWorkload("a @ v, (8, 10) @ (10,) f32", _matvec,
                  lambda rng: [rng.standard_normal((8, 10), dtype=np.float32),
                               rng.standard_normal(10, dtype=np.float32)], np.matmul),
    EagerWorkload("random.normal(key, (10,)), a raw key", _normal, lambda rng: [np.array([0, 42], np.uint32)]),
    EagerWorkload("random.split(key), a raw key", _split, lambda rng: [np.array([0, 42], np.uint32)]),
    EagerWorkload("selu 1e6 f32 (unjitted)", _selu, lambda rng: [rng.standard_normal(10**6, dtype=np.float32)],
                  _selu(np, None, None)),
    EagerWorkload("a @ a, 256x256 f32", _matmul, lambda rng: [rng.standard_normal((256, 256), dtype=np.float32)],
                  _matmul(np, None, None)),
    EagerWorkload(f"lax.scan of a jitted Adam step, {ADAM_STEPS} steps (same body function)", _adam_scan,
                  _adam_inputs),
    EagerWorkload(f"lax.scan of a jitted Adam step, {ADAM_STEPS} steps (new body closure per call)",
                  _adam_scan_new_closure, _adam_inputs),
]


# Seconds to wait before timing a framework: the thread pools of the one timed before (XLA's, the
# BLAS's) keep spinning a while after their work, and on a machine of few cores they take them
# from the next one (a NumPy product of 256x256 measured 300 us alone, 32 ms right after JAX's).
SETTLE_SECONDS = 0.3


# The calls a row's "first 100 calls" column times (the first one included), and the seconds of
# calls after them before the steady state is timed.
FIRST_CALLS = 100
WARMUP_SECONDS = 0.5


def _first_calls(fn: Callable[[], Any]) -> tuple[float, float]:
    """The first call's time and the time of the first ``FIRST_CALLS`` calls, then calls for
    ``WARMUP_SECONDS``."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    for _ in range(FIRST_CALLS - 1):
        fn()
    total = time.perf_counter() - start
    deadline = time.perf_counter() + WARMUP_SECONDS
    while time.perf_counter() < deadline:
        fn()
    return first, total


def measure(w: EagerWorkload, budget: float) -> dict[str, float | None]:
    host = w.inputs(np.random.default_rng(0))
    row: dict[str, float | None] = {}
    time.sleep(SETTLE_SECONDS)
    row["numpy"] = median_time(lambda: w.numpy_eager(*host), budget) if w.numpy_eager else None
    time.sleep(SETTLE_SECONDS)
    ember_args = [ember.device_put(a) for a in host]
    ember_fn = w.build(enp, elax, ember.jit)
    row["ember first"], row["ember first calls"] = _first_calls(lambda: ember.block_until_ready(ember_fn(*ember_args)))
    ember.wait_for_compiles()  # (the steady state: the native code)
    timed = {"ember": lambda: ember.block_until_ready(ember_fn(*ember_args))}
    if jax is not None:
        time.sleep(SETTLE_SECONDS)
        jax_args = [jax.device_put(a) for a in host]
        jax_fn = w.build(jnp_jax, jlax, jax.jit)
        row["jax first"], row["jax first calls"] = _first_calls(lambda: jax.block_until_ready(jax_fn(*jax_args)))
        timed["jax"] = lambda: jax.block_until_ready(jax_fn(*jax_args))
    times, row["ratio"] = side_by_side(timed, budget, settle=SETTLE_SECONDS)
    row.update(times)
    return row


def _ratio_text(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}" if r >= 0.1 else f"{r:.3f}" if r >= 0.001 else f"{r:.1e}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "-"
    r = a / b
    return f"{r:.2f}" if r >= 0.1 else f"{r:.3f}" if r >= 0.001 else f"{r:.1e}"


def table(rows: list[tuple[str, dict]]) -> str:
    lines = [f"| eager call | NumPy | ember | JAX | ember/JAX | first call ember | first call JAX "
             f"| first {FIRST_CALLS} calls ember/JAX |", "|" + "---|" * 8]
    for name, r in rows:
        lines.append(f"| {name} | {_fmt_time(r['numpy'])} | {_fmt_time(r['ember'])} | {_fmt_time(r.get('jax'))} "
                     f"| {_ratio_text(r.get('ratio'))} | {_fmt_time(r['ember first'])} "
                     f"| {_fmt_time(r.get('jax first'))} "
                     f"| {_ratio(r['ember first calls'], r.get('jax first calls'))} |")
    return "\n".join(lines)


def run(names: list[str], budget: float) -> str | None:
    """The eager table of the workloads whose names contain one of ``names`` (all if none); None
    if none does."""
    chosen = [w for w in EAGER_WORKLOADS if not names or any(n in w.name for n in names)]
    if not chosen:
        return None
    rows = []
    for w in chosen:
        print(f"running eager {w.name} ...", file=sys.stderr, flush=True)
        rows.append((w.name, measure(w, budget)))
    return table(rows)


if __name__ == "__main__":
    print(run(sys.argv[1:], 0.5))
