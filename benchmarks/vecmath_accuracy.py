"""Accuracy sweep of ember's inline vector math (the table in docs/vecmath.md).

For every function and dtype: compile a loop over it (vectorized by LLVM), run it on
``--f32`` float32 / ``--f64`` float64 inputs (a quarter random bit patterns over the whole
range, NaN and inf included, the rest dense in each function's interesting regions: see
``vecmath_kernels.sample_inputs``) and report the largest distance, in units in the last place,
to the reference computed in x87 extended precision and rounded (mpmath for float64 erf/erfc,
on fewer samples). Prints a Markdown table.

    python benchmarks/vecmath_accuracy.py [--f32 10000000] [--f64 1000000] [name ...]
    python benchmarks/vecmath_accuracy.py --complex 20000   # the complex functions' table

``--complex N``: each complex function of the fused kernels (``complex_math``), jitted natively,
on N complex64 and N complex128 inputs (magnitudes log-uniform over the range where the result
is finite, angles uniform, a tenth near the axes and a tenth near the unit circle), against
mpmath in 40 digits: the largest error of either part in ulps of the larger part of the exact
result (errors relative to the result's modulus, per part).
"""
from __future__ import annotations

import argparse
import sys

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


COMPLEX = ("exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "expm1", "log1p", "exp2", "rsqrt",
           "logistic", "abs", "sign")
# where each complex function's result is finite: the largest |real part| (|imaginary part| for the
# trigonometric functions), for complex64 and complex128
_EXP_LIKE = {"exp": (88, 709), "exp2": (127, 1023), "expm1": (88, 709), "sinh": (89, 710), "cosh": (89, 710),
             "logistic": (88, 709), "tanh": (1e4, 1e4), "sin": (89, 710), "cos": (89, 710), "tan": (1e4, 1e4)}


def _complex_samples(name: str, dtype, count: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    big = 30 if dtype == np.complex64 else 300
    r = 10.0 ** rng.uniform(-big, big, count)
    z = r * np.exp(1j * rng.uniform(-np.pi, np.pi, count))
    tenth = count // 10
    z[:tenth] = 10.0 ** rng.uniform(-big, 3, tenth) * rng.choice([-1, 1], tenth) + \
        1j * 10.0 ** rng.uniform(-big, 3, tenth) * (rng.uniform(size=tenth) < 0.5)
    z[tenth:2 * tenth] = (1 + 10.0 ** rng.uniform(-12, -1, tenth) * rng.choice([-1, 1], tenth)) * \
        np.exp(1j * rng.uniform(-np.pi, np.pi, tenth))
    z[2 * tenth:3 * tenth] = z[2 * tenth:3 * tenth] * 1e-30 - 1 if name == "log1p" else z[2 * tenth:3 * tenth]
    if name in _EXP_LIKE:
        limit = _EXP_LIKE[name][dtype == np.complex128]
        re, im = z.real, z.imag
        if name in ("sin", "cos", "tan"):
            im = np.clip(im, -limit, limit)
        else:
            re = np.clip(re, -limit, limit)
        if name == "exp2":  # im ln 2 is rounded, so the error grows with |im| (docs/vecmath.md)
            im = np.clip(im, -1e3, 1e3)
        z = re + 1j * im
    return z.astype(dtype)


def _exact(name: str, z: np.ndarray) -> np.ndarray:
    import mpmath
    functions = {"rsqrt": lambda v: 1 / mpmath.sqrt(v), "logistic": lambda v: 1 / (1 + mpmath.exp(-v)),
                 "exp2": lambda v: mpmath.power(2, v), "abs": abs, "sign": lambda v: v / abs(v) if v else v,
                 "log1p": mpmath.log1p, "expm1": mpmath.expm1}
    f = functions.get(name) or getattr(mpmath, name)
    with mpmath.workdps(40):
        return np.array([complex(f(mpmath.mpc(complex(v)))) for v in z])


def measure_complex(name: str, dtype, count: int) -> dict:
    import ember
    import ember.numpy as jnp
    z = _complex_samples(name, dtype, count)
    with ember.config.override(enable_x64=True):
        f = getattr(jnp, name) if hasattr(jnp, name) else getattr(ember.lax, name)
        got = np.asarray(ember.jit(f)(z)).astype(np.complex128)
    exact = _exact(name, z)
    part = np.float32 if dtype == np.complex64 else np.float64
    keep = np.isfinite(exact) & (np.abs(exact) < np.finfo(part).max) & (np.abs(exact) > np.finfo(part).tiny)
    got, exact, z = got[keep], exact[keep], z[keep]
    scale = np.maximum(np.abs(exact.real), np.abs(exact.imag)).astype(part)
    error = np.maximum(np.abs(got.real - exact.real), np.abs(got.imag - exact.imag)) / np.spacing(scale)
    worst = int(np.argmax(error))
    return {"max_ulp": float(error[worst]), "samples": len(error), "worst": z[worst]}


def main_complex(count: int, names=COMPLEX) -> None:
    print("| function | dtype | max ULP (of the larger part) | samples | worst input |")
    print("| --- | --- | ---: | ---: | --- |")
    for name in names:
        for dtype in (np.complex64, np.complex128):
            result = measure_complex(name, dtype, count)
            print(f"| {name} | {np.dtype(dtype).name} | {result['max_ulp']:.2f} | {result['samples']:,} | "
                  f"{complex(result['worst']):.9g} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--f32", type=int, default=10_000_000, help="float32 samples per function")
    parser.add_argument("--f64", type=int, default=1_000_000, help="float64 samples per function")
    parser.add_argument("--complex", type=int, default=0, help="samples per complex function (its table only)")
    parser.add_argument("names", nargs="*", default=sorted(vecmath.SUPPORTED_UNARY | vecmath.SUPPORTED_BINARY))
    args = parser.parse_args()
    if args.complex:
        main_complex(args.complex, args.names if sys.argv[-1] in COMPLEX else COMPLEX)
        return
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
