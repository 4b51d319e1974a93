"""Accuracy sweep of ember's inline vector math (the table in docs/vecmath.md).

For every function and dtype: compile a loop over it (vectorized by LLVM), run it on
``--f32`` float32 / ``--f64`` float64 inputs (a quarter random bit patterns over the whole
range, NaN and inf included, the rest dense in each function's interesting regions: see
``vecmath_kernels.sample_inputs``) and report the largest distance, in units in the last place,
to the reference computed in x87 extended precision and rounded (mpmath for float64 erf/erfc,
on fewer samples). Prints a Markdown table.

    python benchmarks/vecmath_accuracy.py [--f32 10000000] [--f64 1000000] [name ...]
"""
from __future__ import annotations

import argparse

import numpy as np

from ember.backends.cpu import vecmath
from ember.backends.cpu.vecmath_kernels import compile_kernel, reference, sample_inputs, ulp_distance

MPMATH_SAMPLES = 20000  # mpmath references take ~50 us each


def measure(name: str, dtype, count: int) -> dict:
    inputs = sample_inputs(name, dtype, count)
    got = compile_kernel(name, dtype)(*inputs)
    distance = ulp_distance(got, reference(name, *inputs))
    worst = int(np.argmax(distance))
    regions = [a[:len(a) - count // 4] for a in inputs]  # the rest are random bit patterns
    return {"max_ulp": int(distance[worst]), "samples": len(distance), "worst": tuple(a[worst] for a in inputs),
            "ranges": [(a.min(), a.max()) for a in regions]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--f32", type=int, default=10_000_000, help="float32 samples per function")
    parser.add_argument("--f64", type=int, default=1_000_000, help="float64 samples per function")
    parser.add_argument("names", nargs="*", default=sorted(vecmath.SUPPORTED_UNARY | vecmath.SUPPORTED_BINARY))
    args = parser.parse_args()
    print("| function | dtype | max ULP | samples | dense range (plus random bit patterns) | worst input |")
    print("| --- | --- | ---: | ---: | --- | --- |")
    for name in args.names:
        for dtype, count in ((np.float32, args.f32), (np.float64, args.f64)):
            if dtype == np.float64 and name in ("erf", "erfc"):
                count = min(count, MPMATH_SAMPLES)
            result = measure(name, dtype, count)
            ranges = ", ".join(f"[{lo:.3g}, {hi:.3g}]" for lo, hi in result["ranges"])
            worst = ", ".join(f"{float(v):.9g}" for v in result["worst"]) if result["max_ulp"] else "-"
            via = " (via f64)" if dtype == np.float32 and name in vecmath.FLOAT32_VIA_FLOAT64 else ""
            print(f"| {name} | {np.dtype(dtype).name}{via} | {result['max_ulp']} | {result['samples']:,} | "
                  f"{ranges} | {worst} |", flush=True)


if __name__ == "__main__":
    main()
