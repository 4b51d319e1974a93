"""``python -m ember.demo``: a walk through ember's jit, following JAX's JIT tutorial.

1. selu eagerly vs jitted (medians of repeats)
2. the IR ember traced for selu
3. the cache at work: first call traces and compiles, the second reuses, a new shape retraces
   (and reuses the compiled code)
4. static arguments for Python control flow (``static_argnames``)
5. a value-dependent ``if``: the error, and the ``lax.cond`` fix
"""
from __future__ import annotations

import functools
import statistics
import time
from typing import Any, Callable

import numpy as np

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import registry


def median_seconds(fn: Callable[[], Any], repeats: int = 7) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def selu(x, alpha=1.67, lambda_=1.05):
    return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)))


def main() -> None:
    print(f"ember {ember.__version__}: jit backend = {registry.get().name!r}")

    section("1. selu on 10^6 float32 values: eager vs jit")
    x = jnp.asarray(np.random.default_rng(0).standard_normal(1_000_000, dtype=np.float32))
    selu_jit = ember.jit(selu)
    selu_jit(x).block_until_ready()  # compile once
    eager = median_seconds(lambda: selu(x).block_until_ready())
    jitted = median_seconds(lambda: selu_jit(x).block_until_ready())
    print(f"eager: {eager * 1e3:8.2f} ms (median of 7)")
    print(f"jit:   {jitted * 1e3:8.2f} ms (median of 7)   eager/jit = {eager / jitted:.1f}x")
    # exp differs by at most an ulp between backends; alpha*exp(x) - alpha magnifies that near 0.
    np.testing.assert_allclose(np.asarray(selu_jit(x)), np.asarray(selu(x)), rtol=1e-5, atol=1e-6)
    print("results agree")

    section("2. the IR of selu (ember.make_jaxpr)")
    print(ember.make_jaxpr(selu)(x))

    section("3. the cache: trace once per signature")
    traces = []

    def scaled_selu(x):
        traces.append(x.shape)  # runs only while tracing
        return selu(x) * 2.0

    f = ember.jit(scaled_selu)
    for label, arg in [("first call, f32[1000]", jnp.ones(1000)), ("second call, f32[1000]", jnp.zeros(1000)),
                       ("new shape, f32[2000]", jnp.ones(2000))]:
        start = time.perf_counter()
        f(arg).block_until_ready()
        print(f"{label:24s} {(time.perf_counter() - start) * 1e3:7.2f} ms   traces so far: {len(traces)}, "
              f"LLVM compiles: {f.cache_info().compiles}")
    print(f"f.cache_info() = {f.cache_info()}")
    print("(the new shape is traced again, but reuses the machine code: the kernel takes its size at run\n"
          " time; no compile at all when an earlier process left the code in the disk cache)")

    section("4. static arguments for Python control flow")

    @functools.partial(ember.jit, static_argnames=["n"])
    def g(x, n):
        i = 0
        while i < n:  # n is static: a Python int while tracing
            i += 1
        return x + i

    print(f"g(10, n=20) = {g(10, n=20)}")

    section("5. value-dependent Python control flow, and the lax.cond fix")

    def f_if(x):
        if x > 0:
            return x
        else:
            return 2 * x

    try:
        ember.jit(f_if)(10)
    except ember.errors.ConcretizationTypeError as e:
        print(f"{type(e).__name__}:\n{e}")

    @ember.jit
    def f_cond(x):
        return lax.cond(x > 0, lambda x: x, lambda x: 2 * x, x)

    print(f"\nwith lax.cond: f(10) = {f_cond(10)}, f(-3) = {f_cond(-3)}")
    print(ember.make_jaxpr(f_cond.fun)(10))


if __name__ == "__main__":
    main()
