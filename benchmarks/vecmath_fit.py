"""Minimax polynomial fits behind the coefficients in ``ember/backends/cpu/vecmath.py``.

Run ``python benchmarks/vecmath_fit.py [name ...]`` to print the coefficient tuples (and the
approximation error of the rounded coefficients). Needs mpmath (a dependency of sympy); the
library itself does not. The fits are discrete Remez exchanges on a dense grid in extended
precision: they minimize the maximum relative (or absolute) error of ``p(z) - f(z)`` with ``p``
a sum of the given powers of ``z``; coefficients are then rounded to the target type.
"""
from __future__ import annotations

import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 50


def remez(f, lo, hi, powers, relative=True, grid_size=3000, iterations=30):
    """Coefficients (mpf) of the weighted minimax fit of ``f`` on ``[lo, hi]`` and its error."""
    n = len(powers)
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    grid = [(lo + hi) / 2 - (hi - lo) / 2 * mp.cos(mp.pi * (i + 0.5) / grid_size) for i in range(grid_size)]
    values = [f(z) for z in grid]
    weights = [1 / abs(v) if relative else mp.mpf(1) for v in values]
    reference = [round((grid_size - 1) * (1 - np.cos(np.pi * j / n)) / 2) for j in range(n + 1)]
    for _ in range(iterations):
        matrix = [[grid[i] ** p for p in powers] + [(-1) ** j / weights[i]] for j, i in enumerate(reference)]
        solution = mp.lu_solve(mp.matrix(matrix), mp.matrix([values[i] for i in reference]))
        coefficients = [solution[k] for k in range(n)]
        errors = [weights[i] * (sum(c * grid[i] ** p for c, p in zip(coefficients, powers)) - values[i])
                  for i in range(grid_size)]
        reference = _alternating_extrema(errors, n + 1) or reference
        level = abs(solution[n])
        worst = max(abs(e) for e in errors)
        if worst <= level * (1 + mp.mpf("1e-6")):
            break
    return coefficients, worst


def _alternating_extrema(errors, count):
    """Indices of ``count`` alternating local extrema of ``errors`` with the largest magnitudes."""
    extrema = []
    for i, e in enumerate(errors):
        left = errors[i - 1] if i > 0 else -e
        right = errors[i + 1] if i + 1 < len(errors) else -e
        if abs(e) >= abs(left) and abs(e) >= abs(right) and e != 0:
            if extrema and (errors[extrema[-1]] > 0) == (e > 0):
                if abs(e) > abs(errors[extrema[-1]]):
                    extrema[-1] = i
            else:
                extrema.append(i)
    while len(extrema) > count:  # drop the smaller end, keeping the alternation
        if abs(errors[extrema[0]]) < abs(errors[extrema[-1]]):
            extrema.pop(0)
        else:
            extrema.pop()
    return extrema if len(extrema) == count else None


def _series_ratio(f, lead):
    """``z -> (f(x) - lead(x)) / x**3`` in terms of ``z = x**2`` (odd functions)."""
    def g(z):
        x = mp.sqrt(z)
        return (f(x) - lead(x)) / (x * z)
    return g


def _exp_tail(r):  # (e**r - 1 - r) / r**2
    return (mp.exp(r) - 1 - r) / r ** 2


def _log_tail(z):  # log(1+f) = 2s + s*R with R = z*h(z), z = s**2
    s = mp.sqrt(z)
    return (2 * mp.atanh(s) - 2 * s) / (s * z)


def _log_fifth(z):  # log(1+f) = 2s + (2/3) s**3 + s**5 * h(z), for log in double-double (pow)
    s = mp.sqrt(z)
    return (2 * mp.atanh(s) - 2 * s - 2 * s ** 3 / 3) / s ** 5


def _cos_tail(z):
    return (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z ** 2


def _erf_ratio(z):
    x = mp.sqrt(z)
    return mp.erf(x) / x


def _erfcx(x):  # erfc(x) = exp(-x**2) * erfcx(x)
    return mp.exp(x * x) * mp.erfc(x)


def _erfc_pieces(size):
    """erfcx in x - center on [0.5, 1], [1, 2]; x * erfcx (nearly constant) in 1/x - center on
    [2, 4], [4, 8], [8, 27.5]. The constant terms are printed as double-doubles."""
    pieces = {}
    for i, (a, b) in enumerate([(0.5, 1), (1, 2)]):
        center = (a + b) / 2
        pieces[f"erfc_f64_{i}"] = (lambda v, c=center: _erfcx(v + c), a - center, b - center, range(size), True)
    for i, (a, b) in enumerate([(2, 4), (4, 8), (8, 27.5)], start=2):
        center = (1 / a + 1 / b) / 2
        pieces[f"erfc_f64_{i}"] = (lambda v, c=center: _erfcx(1 / (v + c)) / (v + c), 1 / b - center,
                                   1 / a - center, range(size), True)
    return pieces


FITS = {
    # name: (function, lo, hi, powers, relative)
    "exp_f64": (_exp_tail, -0.3466, 0.3466, range(11), True),
    "exp_f32": (_exp_tail, -0.3466, 0.3466, range(5), True),
    "log_f64": (_log_tail, 1e-30, 0.02944, range(7), True),
    "log_f32": (_log_tail, 1e-30, 0.02944, range(3), True),
    "log_fifth_f64": (_log_fifth, 1e-30, 0.02944, range(8), True),
    "sin_f64": (_series_ratio(mp.sin, lambda x: x), 1e-30, 0.61685, range(6), True),
    "cos_f64": (_cos_tail, 1e-30, 0.61685, range(6), True),
    "tan_f64": (_series_ratio(mp.tan, lambda x: x), 1e-30, 0.61685, range(15), True),
    "atan_f64": (_series_ratio(mp.atan, lambda x: x), 1e-30, 0.19141, range(11), True),
    "atan_f32": (_series_ratio(mp.atan, lambda x: x), 1e-30, 0.19141, range(5), True),
    "asin_f64": (_series_ratio(mp.asin, lambda x: x), 1e-30, 0.25, range(12), True),
    "tanh_f64": (_series_ratio(mp.tanh, lambda x: x), 1e-30, 0.3017, range(12), True),
    "tanh_f32": (_series_ratio(mp.tanh, lambda x: x), 1e-30, 0.3017, range(5), True),
    "sinh_f64": (_series_ratio(mp.sinh, lambda x: x), 1e-30, 1.0, range(7), True),
    "erf_f64": (_erf_ratio, 1e-30, 1.0, range(12), True),
    "sinh_f32": (_series_ratio(mp.sinh, lambda x: x), 1e-30, 1.0, range(4), True),
    "asin_f32": (_series_ratio(mp.asin, lambda x: x), 1e-30, 0.25, range(5), True),
    **_erfc_pieces(16),
}


def fit(name: str) -> None:
    f, lo, hi, powers, relative = FITS[name]
    powers = list(powers)
    coefficients, error = remez(f, lo, hi, powers, relative)
    dtype = np.float32 if name.endswith("f32") else np.float64
    rounded = [float(dtype(float(c))) for c in coefficients]
    if name.startswith("erfc"):  # the constant term is kept as a double-double
        print(f"# constant term {float(coefficients[0])!r} + {float(coefficients[0] - mp.mpf(rounded[0]))!r}")
        rounded[0] = coefficients[0]
    grid = [mp.mpf(lo) + (mp.mpf(hi) - mp.mpf(lo)) * (i + 0.5) / 4000 for i in range(4000)]
    scale = (lambda z: f(z)) if relative else (lambda z: 1)
    rounded_error = max(abs((sum(mp.mpf(c) * z ** p for c, p in zip(rounded, powers)) - f(z)) / scale(z))
                        for z in grid)
    print(f"# {name}: minimax error {mp.nstr(error, 3)} (2^{float(mp.log(error, 2)):.1f}), "
          f"after rounding {mp.nstr(rounded_error, 3)} (2^{float(mp.log(rounded_error, 2)):.1f})")
    print(f"{name.upper()} = ({', '.join(repr(float(c)) for c in rounded)})")


if __name__ == "__main__":
    for fit_name in sys.argv[1:] or FITS:
        fit(fit_name)
