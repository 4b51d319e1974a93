"""Op records: one line per public function, driving differential tests against NumPy.

An ``OpRecord`` (elementwise functions) names the ember function, the NumPy
function that defines the expected values (evaluated in float64 for floating
inputs, in complex128 for complex ones), the input dtypes and value domain,
and how the result dtype follows from the inputs. Functions that accept complex
values (as JAX's do) list ``COMPLEX`` among their dtypes; ``complex_domain``
bounds both parts, and ``specials`` lets either part be an infinity or NaN,
for the functions whose answers on them NumPy defines as JAX does. A
``ParamRecord`` (shape operations, reductions, selections) adds a ``draw_args``
that draws, for an operand ``x``, the other operands and the static parameters
(``COMPLEX_PARAM_RECORDS``: those with complex operands). ``ALIASES`` pairs
each alias with the function it names.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember.numpy as jnp
from ember import lax, nn

BOOL = [np.bool_]
SIGNED = [np.int8, np.int16, np.int32]
UNSIGNED = [np.uint8, np.uint16, np.uint32]
INTS = SIGNED + UNSIGNED
FLOATS = [np.float32, np.float16, ml_dtypes.bfloat16]
NUMBERS = INTS + FLOATS
ALL = BOOL + NUMBERS
COMPLEX = [np.complex64]  # (complex128 is complex64 with x64 off; the references compute in complex128)
EVERYWHERE = (-np.inf, np.inf)
SPECIALS = [np.inf, -np.inf, np.nan]
UNITS = [1.0, -1.0, 1j, -1j]  # complex factors whose products are exact in any order and never overflow
SMALL_FACTORS = [-2.0, -1.0, 1.0, 2.0]  # their products are exact in any order, until they overflow to inf


def arrays(dtype: Any, shape: tuple, domain: Any = (-10.0, 10.0), bit_patterns: bool = False,
           specials: bool = False) -> st.SearchStrategy:
    """Arrays of ``dtype``, never NaN: integers within +-100 (and the dtype's range), or over
    the whole range for ``bit_patterns``; floats within ``domain``, a (low, high) range or a
    list of the values to pick from; complex values with both parts so (a list holds whole
    values), or also infinite or NaN with ``specials``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return complex_arrays(dtype, shape, domain, specials)
    if dtype == np.bool_:
        return hnp.arrays(np.bool_, shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = (int(info.min), int(info.max)) if bit_patterns else (max(int(info.min), -100), min(int(info.max), 100))
        return hnp.arrays(dtype, shape, elements=st.integers(lo, hi))
    elements = st.sampled_from(domain) if isinstance(domain, list) else st.floats(*domain, allow_nan=False)
    return hnp.arrays(np.float64, shape, elements=elements).map(lambda values: _rounded(values, dtype))


def complex_arrays(dtype: Any, shape: tuple, domain: Any = (-10.0, 10.0), specials: bool = False) -> st.SearchStrategy:
    if isinstance(domain, list):
        elements = st.sampled_from([complex(v) for v in domain])
    else:
        part = st.floats(*domain, allow_nan=False)
        if specials:
            part = part | st.sampled_from(SPECIALS)
        elements = st.builds(complex, part, part)
    return hnp.arrays(np.complex128, shape, elements=elements).map(lambda values: _rounded(values, np.dtype(dtype)))


def _rounded(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    with np.errstate(over="ignore"):  # a domain wider than float16's range gives inf: fine
        return values.astype(dtype)


class OpRecord(NamedTuple):
    name: str
    fn: Callable
    reference: Callable
    nargs: int
    dtypes: list
    domain: Any = (-10.0, 10.0)        # value range (or values) for floating inputs
    result: str = "same"               # "same" | "inexact" (ints -> float32) | "bool"
    tolerance: float | None = None      # extra relative tolerance (float32)
    nonzero_divisor: bool = False       # second operand must be non-zero (integer division)
    broadcasts: bool = True             # False (lax): operands have one shape, or are scalars
    exact: bool = False                 # the reference computes in the operand dtype; compare exactly
    bit_patterns: bool = False          # an integer first operand spans its whole range (bit operations)
    complex_domain: Any = (-10.0, 10.0)  # range of both parts of complex inputs (or the values)
    specials: bool = False              # complex parts may also be +-inf or NaN


def _inexact(name, fn, ref, domain=(-10.0, 10.0), tol=None, dtypes=NUMBERS, complex_domain=(-10.0, 10.0)):
    return OpRecord(name, fn, ref, 1, dtypes, domain, "inexact", tol, complex_domain=complex_domain)


def _lax(fn, ref, nargs=1, dtypes=FLOATS, domain=(-10.0, 10.0), result="same", tol=None, exact=False,
         bit_patterns=False, complex_domain=(-10.0, 10.0), specials=False):
    """A lax elementwise function: no promotion, so the dtype is kept (or is bool)."""
    return OpRecord(f"lax.{fn.__name__}", fn, ref, nargs, dtypes, domain, result, tol, broadcasts=False,
                    exact=exact, bit_patterns=bit_patterns, complex_domain=complex_domain, specials=specials)


def _with_specials(record: OpRecord) -> OpRecord:
    return record._replace(specials=True)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _erfc(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x)


def _lgamma(x):
    return np.vectorize(math.lgamma, otypes=[np.float64])(x)


def _erf_inv(x):
    """Bisection on the increasing ``erf``: 60 halvings of [-6, 6] reach float64 precision.
    erf_inv(+-1) = +-inf."""
    lo, hi = np.full(np.shape(x), -6.0), np.full(np.shape(x), 6.0)
    for _ in range(60):
        mid = (lo + hi) / 2
        below = _erf(mid) < x
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return np.where(np.abs(x) == 1, np.copysign(np.inf, x), (lo + hi) / 2)


def _digamma(x):
    """For x > 0: psi(x) = psi(x + 1) - 1/x lifts x to >= 6, where the asymptotic series is exact
    to float64 precision."""
    x = np.asarray(x, np.float64)
    shift = np.zeros_like(x)
    for _ in range(6):
        low = x < 6
        shift -= np.where(low, 1 / x, 0)
        x = np.where(low, x + 1, x)
    inv2 = 1 / x ** 2
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132))))
    return shift + np.log(x) - 1 / (2 * x) - series


def _scaled(ufunc, factor):
    """``ufunc``, or for complex values (which it has no loop for) the product with ``factor``."""
    return lambda x: x * factor if np.iscomplexobj(x) else ufunc(x)


def _by_kind(real_ref, complex_ref):
    """``real_ref``, or for complex operands (which it has no loop for) ``complex_ref``."""
    return lambda *args: complex_ref(*args) if any(np.iscomplexobj(a) for a in args) else real_ref(*args)


def _complex_atan2(x, y):
    return -1j * np.log((y + 1j * x) / np.sqrt(y * y + x * x))  # (XLA's expansion, as JAX computes it)


_arctan2 = _by_kind(np.arctan2, _complex_atan2)
_logaddexp = _by_kind(np.logaddexp, lambda x, y: np.log(np.exp(x) + np.exp(y)))
_logaddexp2 = _by_kind(np.logaddexp2, lambda x, y: np.log2(2 ** x + 2 ** y))
# Complex domains that keep imaginary differences under pi: no cancelling sums, no poles of logistic
_NO_POLES = (-1.5, 1.5)


def _logistic(x):
    return 1 / (1 + np.exp(-x))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _round_half_away(x):
    return np.trunc(x + np.copysign(0.5, x)) * (np.abs(x - np.trunc(x)) >= 0.5) + np.trunc(x) * (
        np.abs(x - np.trunc(x)) < 0.5)


def _population_count(x):
    return np.bitwise_count(x.view(f"u{x.itemsize}"))  # NumPy counts the bits of |x|


# XLA's shifts, which NumPy leaves undefined outside [0, bits): every bit is shifted out.
def _shift_amount(x, y, out_of_range):
    in_range = (y >= 0) & (y < x.itemsize * 8)
    return in_range, np.where(in_range, y, out_of_range).astype(x.dtype)


def _shift_left(x, y):
    in_range, amount = _shift_amount(x, y, 0)
    return np.where(in_range, np.left_shift(x, amount), 0).astype(x.dtype)


def _shift_right_arithmetic(x, y):
    """On the bits as signed (also for unsigned types): a set top bit fills."""
    signed = x.view(f"i{x.itemsize}")
    _, amount = _shift_amount(x, y, x.itemsize * 8 - 1)
    return np.right_shift(signed, amount.astype(signed.dtype)).view(x.dtype)


def _shift_right_logical(x, y):
    unsigned = x.view(f"u{x.itemsize}")
    in_range, amount = _shift_amount(x, y, 0)
    return np.where(in_range, np.right_shift(unsigned, amount.astype(unsigned.dtype)), 0).astype(
        unsigned.dtype).view(x.dtype)


def _right_shift(x, y):
    return (_shift_right_arithmetic if x.dtype.kind == "i" else _shift_right_logical)(x, y)


UNARY_RECORDS = [
    _inexact("exp", jnp.exp, np.exp, (-80, 80), dtypes=NUMBERS + COMPLEX),
    _inexact("exp2", jnp.exp2, np.exp2, (-100, 100), dtypes=NUMBERS + COMPLEX),
    _inexact("expm1", jnp.expm1, np.expm1, (-20, 20), dtypes=NUMBERS + COMPLEX),
    _inexact("log", jnp.log, np.log, (0.001, 1e6), dtypes=NUMBERS + COMPLEX),
    _inexact("log1p", jnp.log1p, np.log1p, (-0.99, 1e6), dtypes=NUMBERS + COMPLEX),
    _inexact("log2", jnp.log2, np.log2, (0.001, 1e6), dtypes=NUMBERS + COMPLEX),
    _inexact("log10", jnp.log10, np.log10, (0.001, 1e6), dtypes=NUMBERS + COMPLEX),
    _inexact("sin", jnp.sin, np.sin, (-100, 100), dtypes=NUMBERS + COMPLEX),
    _inexact("cos", jnp.cos, np.cos, (-100, 100), dtypes=NUMBERS + COMPLEX),
    _inexact("tan", jnp.tan, np.tan, (-1.5, 1.5), dtypes=NUMBERS + COMPLEX),
    _inexact("arcsin", jnp.arcsin, np.arcsin, (-1, 1), dtypes=NUMBERS + COMPLEX),
    _inexact("arccos", jnp.arccos, np.arccos, (-1, 1), dtypes=NUMBERS + COMPLEX),
    _inexact("arctan", jnp.arctan, np.arctan, (-100, 100), dtypes=NUMBERS + COMPLEX),
    _inexact("sinh", jnp.sinh, np.sinh, (-20, 20), dtypes=NUMBERS + COMPLEX),
    _inexact("cosh", jnp.cosh, np.cosh, (-20, 20), dtypes=NUMBERS + COMPLEX),
    _inexact("tanh", jnp.tanh, np.tanh, (-20, 20), dtypes=NUMBERS + COMPLEX),
    _inexact("arcsinh", jnp.arcsinh, np.arcsinh, (-100, 100), dtypes=NUMBERS + COMPLEX),
    _inexact("arccosh", jnp.arccosh, np.arccosh, (1, 100), dtypes=NUMBERS + COMPLEX),
    _inexact("arctanh", jnp.arctanh, np.arctanh, (-0.99, 0.99), dtypes=NUMBERS + COMPLEX),
    _inexact("sqrt", jnp.sqrt, np.sqrt, (0, 1e6), dtypes=NUMBERS + COMPLEX),
    _inexact("cbrt", jnp.cbrt, np.cbrt, (-1e6, 1e6)),
    _inexact("reciprocal", jnp.reciprocal, np.reciprocal, (0.1, 100), dtypes=NUMBERS + COMPLEX,
             complex_domain=(0.1, 10)),
    _inexact("deg2rad", jnp.deg2rad, _scaled(np.deg2rad, np.pi / 180), dtypes=NUMBERS + COMPLEX),
    _inexact("rad2deg", jnp.rad2deg, _scaled(np.rad2deg, 180 / np.pi), dtypes=NUMBERS + COMPLEX),
    _inexact("sinc", jnp.sinc, np.sinc, tol=1e-5, dtypes=NUMBERS + COMPLEX, complex_domain=(-3.0, 3.0)),
    _inexact("fabs", jnp.fabs, np.fabs),
    _inexact("lax.erf", lambda x: lax.erf(jnp.asarray(x, jnp.promote_types(x.dtype, jnp.float32)
                                                         if not jnp.issubdtype(x.dtype, jnp.floating) else x.dtype)),
             _erf, (-5, 5), dtypes=FLOATS),
    _inexact("lax.erfc", lambda x: lax.erfc(x), _erfc, (-5, 5), dtypes=FLOATS),
    _inexact("lax.lgamma", lambda x: lax.lgamma(x), _lgamma, (0.1, 50), tol=1e-5, dtypes=FLOATS),
    _inexact("lax.logistic", lambda x: lax.logistic(x), _logistic, (-50, 50), dtypes=FLOATS + COMPLEX,
             complex_domain=_NO_POLES),
    _inexact("lax.rsqrt", lambda x: lax.rsqrt(x), lambda x: 1 / np.sqrt(x), (0.01, 1e4), dtypes=FLOATS + COMPLEX,
             complex_domain=(0.1, 10.0)),
    OpRecord("negative", jnp.negative, np.negative, 1, SIGNED + FLOATS + COMPLEX, specials=True),
    OpRecord("positive", jnp.positive, np.positive, 1, NUMBERS + COMPLEX, specials=True),
    OpRecord("abs", jnp.abs, np.abs, 1, NUMBERS + COMPLEX, result="real", specials=True),
    # (no infinities: NumPy's sign(inf + 0j) is 1, XLA's z / |z| is NaN)
    OpRecord("sign", jnp.sign, np.sign, 1, SIGNED + FLOATS + COMPLEX),
    OpRecord("square", jnp.square, np.square, 1, FLOATS + COMPLEX, (-100, 100)),
    OpRecord("floor", jnp.floor, np.floor, 1, FLOATS),
    OpRecord("ceil", jnp.ceil, np.ceil, 1, FLOATS),
    OpRecord("rint", jnp.rint, np.rint, 1, FLOATS + COMPLEX, specials=True),
    OpRecord("round", jnp.round, np.round, 1, FLOATS + COMPLEX, specials=True),
    OpRecord("trunc", jnp.trunc, np.trunc, 1, FLOATS),
    OpRecord("lax.round", lambda x: lax.round(x), _round_half_away, 1, FLOATS),
    OpRecord("invert", jnp.invert, np.invert, 1, BOOL + INTS, bit_patterns=True),
    OpRecord("logical_not", jnp.logical_not, np.logical_not, 1, ALL + COMPLEX, result="bool", specials=True),
    OpRecord("isnan", jnp.isnan, np.isnan, 1, NUMBERS + COMPLEX, result="bool", specials=True),
    OpRecord("isinf", jnp.isinf, np.isinf, 1, NUMBERS + COMPLEX, result="bool", specials=True),
    OpRecord("isfinite", jnp.isfinite, np.isfinite, 1, NUMBERS + COMPLEX, result="bool", specials=True),
    OpRecord("isposinf", jnp.isposinf, np.isposinf, 1, NUMBERS, EVERYWHERE, result="bool"),
    OpRecord("isneginf", jnp.isneginf, np.isneginf, 1, NUMBERS, EVERYWHERE, result="bool"),
    OpRecord("signbit", jnp.signbit, np.signbit, 1, SIGNED + FLOATS, result="bool"),
    OpRecord("nan_to_num", jnp.nan_to_num, np.nan_to_num, 1, [np.float32] + COMPLEX, exact=True, specials=True),
    OpRecord("conj", jnp.conj, np.conj, 1, ALL + COMPLEX, specials=True),
    OpRecord("real", jnp.real, np.real, 1, ALL + COMPLEX, result="real", specials=True),
    OpRecord("imag", jnp.imag, np.imag, 1, NUMBERS + COMPLEX, result="real", specials=True),
    OpRecord("angle", jnp.angle, np.angle, 1, FLOATS + COMPLEX, result="real"),
    OpRecord("copy", jnp.copy, np.copy, 1, ALL + COMPLEX, specials=True),
    # (complex values as JAX's: relu and hard_silu by the lexicographic order, the others by formula)
    OpRecord("nn.relu", lambda x: nn.relu(x), lambda x: np.maximum(x, 0), 1,
             [np.float32, np.float16, np.int32] + COMPLEX),
    OpRecord("nn.sigmoid", lambda x: nn.sigmoid(x), _logistic, 1, [np.float32] + COMPLEX, (-50, 50),
             complex_domain=_NO_POLES),
    OpRecord("nn.softplus", lambda x: nn.softplus(x), lambda x: _logaddexp(x, np.zeros_like(x)), 1,
             [np.float32] + COMPLEX, (-50, 50), complex_domain=_NO_POLES),
    OpRecord("nn.silu", lambda x: nn.silu(x), lambda x: x * _logistic(x), 1, [np.float32] + COMPLEX, (-50, 50),
             complex_domain=_NO_POLES),
    OpRecord("nn.gelu", lambda x: nn.gelu(x), _gelu_tanh, 1, [np.float32] + COMPLEX, tolerance=1e-5,
             complex_domain=(-1.0, 1.0)),
    OpRecord("nn.hard_silu", nn.hard_silu, lambda x: x * np.clip(x + 3, 0, 6) / 6, 1,
             [np.float32, np.float16] + COMPLEX),
    # lax: no promotion, operands of one dtype
    _lax(lax.neg, np.negative, dtypes=SIGNED + FLOATS + COMPLEX, specials=True),
    _lax(lax.abs, np.abs, dtypes=SIGNED + FLOATS + COMPLEX, result="real", specials=True),
    _lax(lax.sign, np.sign, dtypes=SIGNED + FLOATS + COMPLEX),
    _lax(lax.floor, np.floor),
    _lax(lax.ceil, np.ceil),
    _lax(lax.exp, np.exp, domain=(-80, 80), dtypes=FLOATS + COMPLEX),
    _lax(lax.exp2, np.exp2, domain=(-100, 100), dtypes=FLOATS + COMPLEX),
    _lax(lax.expm1, np.expm1, domain=(-20, 20), dtypes=FLOATS + COMPLEX),
    _lax(lax.log, np.log, domain=(0.001, 1e6), dtypes=FLOATS + COMPLEX),
    _lax(lax.log1p, np.log1p, domain=(-0.99, 1e6), dtypes=FLOATS + COMPLEX),
    _lax(lax.sin, np.sin, domain=(-100, 100), dtypes=FLOATS + COMPLEX),
    _lax(lax.cos, np.cos, domain=(-100, 100), dtypes=FLOATS + COMPLEX),
    _lax(lax.tan, np.tan, domain=(-1.5, 1.5), dtypes=FLOATS + COMPLEX),
    _lax(lax.asin, np.arcsin, domain=(-1, 1), dtypes=FLOATS + COMPLEX),
    _lax(lax.acos, np.arccos, domain=(-1, 1), dtypes=FLOATS + COMPLEX),
    _lax(lax.atan, np.arctan, domain=(-100, 100), dtypes=FLOATS + COMPLEX),
    _lax(lax.sinh, np.sinh, domain=(-20, 20), dtypes=FLOATS + COMPLEX),
    _lax(lax.cosh, np.cosh, domain=(-20, 20), dtypes=FLOATS + COMPLEX),
    _lax(lax.tanh, np.tanh, domain=(-20, 20), dtypes=FLOATS + COMPLEX),
    _lax(lax.asinh, np.arcsinh, domain=(-100, 100), dtypes=FLOATS + COMPLEX),
    _lax(lax.acosh, np.arccosh, domain=(1, 100), dtypes=FLOATS + COMPLEX),
    _lax(lax.atanh, np.arctanh, domain=(-0.99, 0.99), dtypes=FLOATS + COMPLEX),
    _lax(lax.sqrt, np.sqrt, domain=(0, 1e6), dtypes=FLOATS + COMPLEX),
    _lax(lax.cbrt, np.cbrt, domain=(-1e6, 1e6)),
    _lax(lax.square, np.square, dtypes=NUMBERS + COMPLEX, domain=(-100, 100)),
    _lax(lax.reciprocal, np.reciprocal, domain=(0.1, 100), dtypes=FLOATS + COMPLEX, complex_domain=(0.1, 10)),
    _lax(lax.digamma, _digamma, domain=(0.1, 50)),
    _lax(lax.erf_inv, _erf_inv, domain=(-0.999, 0.999)),
    _lax(lax.is_finite, np.isfinite, domain=EVERYWHERE, result="bool"),
    _lax(lax.bitwise_not, np.invert, dtypes=BOOL + INTS, bit_patterns=True),
    _lax(lax.population_count, _population_count, dtypes=INTS, bit_patterns=True),
    _lax(lax.stop_gradient, np.asarray, dtypes=ALL + COMPLEX, specials=True),
]

BINARY_RECORDS = [
    OpRecord("add", jnp.add, np.add, 2, ALL + COMPLEX, specials=True),
    OpRecord("subtract", jnp.subtract, np.subtract, 2, NUMBERS + COMPLEX, specials=True),
    OpRecord("multiply", jnp.multiply, np.multiply, 2, ALL + COMPLEX),
    OpRecord("divide", jnp.divide, np.divide, 2, FLOATS + COMPLEX, (0.5, 10), result="inexact",
             complex_domain=(0.5, 10)),
    OpRecord("floor_divide", jnp.floor_divide, np.floor_divide, 2, SIGNED + FLOATS, nonzero_divisor=True),
    OpRecord("remainder", jnp.remainder, np.remainder, 2, SIGNED + FLOATS, nonzero_divisor=True),
    OpRecord("fmod", jnp.fmod, np.fmod, 2, SIGNED + FLOATS, nonzero_divisor=True),
    OpRecord("power", jnp.power, np.power, 2, [np.float32] + COMPLEX, (0.1, 5), complex_domain=(0.1, 3)),
    OpRecord("float_power", jnp.float_power, np.float_power, 2, [np.int8, np.int32] + FLOATS + COMPLEX, (0.1, 5),
             result="inexact", complex_domain=(0.1, 3)),
    # Complex maximum / minimum are lexicographic. (No NaNs: XLA's complex max and min then depend on
    # the operands' order, as ember's do; NumPy's return the NaN operand. tests/test_complex_numpy.py
    # checks them against JAX.)
    OpRecord("maximum", jnp.maximum, np.maximum, 2, ALL + COMPLEX),
    OpRecord("minimum", jnp.minimum, np.minimum, 2, ALL + COMPLEX),
    OpRecord("arctan2", jnp.arctan2, _arctan2, 2, FLOATS + COMPLEX, result="inexact", complex_domain=(0.1, 3.0)),
    OpRecord("hypot", jnp.hypot, np.hypot, 2, FLOATS, result="inexact"),
    OpRecord("copysign", jnp.copysign, np.copysign, 2, FLOATS, result="inexact"),
    OpRecord("nextafter", jnp.nextafter, np.nextafter, 2, FLOATS, exact=True),
    OpRecord("heaviside", jnp.heaviside, np.heaviside, 2, NUMBERS, result="inexact"),
    OpRecord("logaddexp", jnp.logaddexp, _logaddexp, 2, FLOATS + COMPLEX, (-50, 50), result="inexact",
             complex_domain=_NO_POLES),
    OpRecord("logaddexp2", jnp.logaddexp2, _logaddexp2, 2, FLOATS + COMPLEX, (-50, 50), result="inexact",
             complex_domain=_NO_POLES),
    OpRecord("bitwise_and", jnp.bitwise_and, np.bitwise_and, 2, BOOL + INTS, bit_patterns=True),
    OpRecord("bitwise_or", jnp.bitwise_or, np.bitwise_or, 2, BOOL + INTS, bit_patterns=True),
    OpRecord("bitwise_xor", jnp.bitwise_xor, np.bitwise_xor, 2, BOOL + INTS, bit_patterns=True),
    OpRecord("left_shift", jnp.left_shift, _shift_left, 2, INTS, bit_patterns=True),
    OpRecord("right_shift", jnp.right_shift, _right_shift, 2, INTS, bit_patterns=True),
    OpRecord("logical_and", jnp.logical_and, np.logical_and, 2, ALL + COMPLEX, result="bool", specials=True),
    OpRecord("logical_or", jnp.logical_or, np.logical_or, 2, ALL + COMPLEX, result="bool", specials=True),
    OpRecord("logical_xor", jnp.logical_xor, np.logical_xor, 2, ALL + COMPLEX, result="bool", specials=True),
    OpRecord("equal", jnp.equal, np.equal, 2, ALL + COMPLEX, result="bool", specials=True),
    OpRecord("not_equal", jnp.not_equal, np.not_equal, 2, ALL + COMPLEX, result="bool", specials=True),
    # Complex order comparisons are lexicographic, as NumPy's. (No NaNs: NumPy's say False for
    # 1+nanj < 2, JAX's, comparing the real parts first, say True.) Values from a small set, so
    # that equal real parts, which defer to the imaginary ones, are common.
    OpRecord("less", jnp.less, np.less, 2, ALL + COMPLEX, result="bool", complex_domain=[0.0, 1.0, 1j, 1 + 1j]),
    OpRecord("less_equal", jnp.less_equal, np.less_equal, 2, ALL + COMPLEX, result="bool",
             complex_domain=[0.0, 1.0, 1j, 1 + 1j]),
    OpRecord("greater", jnp.greater, np.greater, 2, ALL + COMPLEX, result="bool",
             complex_domain=[0.0, 1.0, 1j, 1 + 1j]),
    OpRecord("greater_equal", jnp.greater_equal, np.greater_equal, 2, ALL + COMPLEX, result="bool",
             complex_domain=[0.0, 1.0, 1j, 1 + 1j]),
    # lax: operands of one dtype and shape (or scalars)
    _lax(lax.sub, np.subtract, 2, NUMBERS + COMPLEX, specials=True),
    _lax(lax.mul, np.multiply, 2, NUMBERS + COMPLEX),
    _lax(lax.max, np.maximum, 2, ALL + COMPLEX),
    _lax(lax.min, np.minimum, 2, ALL + COMPLEX),
    _lax(lax.pow, np.power, 2, FLOATS + COMPLEX, domain=(0.1, 5), complex_domain=(0.1, 3)),
    _lax(lax.atan2, _arctan2, 2, dtypes=FLOATS + COMPLEX, complex_domain=(0.1, 3.0)),
    _lax(lax.nextafter, np.nextafter, 2, exact=True),
    _lax(lax.bitwise_and, np.bitwise_and, 2, BOOL + INTS, bit_patterns=True),
    _lax(lax.bitwise_or, np.bitwise_or, 2, BOOL + INTS, bit_patterns=True),
    _lax(lax.bitwise_xor, np.bitwise_xor, 2, BOOL + INTS, bit_patterns=True),
    _lax(lax.shift_left, _shift_left, 2, INTS, bit_patterns=True),
    _lax(lax.shift_right_arithmetic, _shift_right_arithmetic, 2, INTS, bit_patterns=True),
    _lax(lax.shift_right_logical, _shift_right_logical, 2, INTS, bit_patterns=True),
    _lax(lax.eq, np.equal, 2, ALL + COMPLEX, result="bool", specials=True),
    _lax(lax.ne, np.not_equal, 2, ALL + COMPLEX, result="bool", specials=True),
    _lax(lax.lt, np.less, 2, ALL, result="bool"),
    _lax(lax.le, np.less_equal, 2, ALL, result="bool"),
    _lax(lax.gt, np.greater, 2, ALL, result="bool"),
    _lax(lax.ge, np.greater_equal, 2, ALL, result="bool"),
]


def expected_dtype(record: OpRecord, dtype: Any) -> np.dtype:
    dtype = np.dtype(dtype)
    if record.result == "bool":
        return np.dtype(np.bool_)
    if record.result == "real":  # abs, real, imag, angle: the parts' type of complex values
        return np.dtype(np.float32) if dtype == np.complex64 else dtype
    if record.result == "inexact" and dtype.kind in "biu":
        return np.dtype(np.float32)
    return dtype


# --- records with parameters ---------------------------------------------------------------------
class ParamRecord(NamedTuple):
    name: str
    fn: Callable                # fn(x, *operands, **params) on ember arrays (and tracers)
    reference: Callable         # the same on NumPy arrays
    draw_args: Callable         # (draw, x) -> (operands: tuple of arrays, params: dict of static values)
    dtypes: list = ALL
    min_dims: int = 0
    max_dims: int = 3
    min_side: int = 0
    domain: Any = (-10.0, 10.0)
    compare: str = "equal"      # "equal" (NaNs equal) | "bits" (bit patterns) | "close" (dtype's tolerance)
    bit_patterns: bool = False  # integer ``x`` spans its whole range
    specials: bool = False      # complex ``x``: either part may be +-inf or NaN


def _no_args(draw, x):
    return (), {}


def _axis(draw, x):
    return draw(st.integers(0, x.ndim - 1))


def _axes(draw, x):
    """Distinct axes in any order (possibly none)."""
    return tuple(draw(st.permutations(range(x.ndim)))[:draw(st.integers(0, x.ndim))])


def _like(draw, x, shape=None):
    return draw(arrays(x.dtype, x.shape if shape is None else shape))


def _resized_to(shape, axis, size):
    return shape[:axis] + (size,) + shape[axis + 1:]


def _along(axis, index):
    return (slice(None),) * axis + (index,)


def _resized(draw, shape, axis):
    """``shape`` with a drawn size along ``axis``."""
    return _resized_to(shape, axis, draw(st.integers(0, 3)))


def _starts(draw, shape):
    """Start indices as traced integer scalars (of one drawn dtype), beyond the end at times."""
    dtype = draw(st.sampled_from([np.int32, np.int8, np.uint8]))
    return tuple(np.asarray(draw(st.integers(0, n + 2)), dtype) for n in shape)


def _window(starts, shape, sizes):
    """dynamic_slice's window: starts are clamped so that it fits in the operand."""
    begins = [min(int(s), n - k) for s, n, k in zip(starts, shape, sizes)]
    return tuple(slice(b, b + k) for b, k in zip(begins, sizes))


def _dynamic_update_slice(x, update, *starts):
    out = x.copy()
    out[_window(starts, x.shape, update.shape)] = update
    return out


def _starts_in_dim(start, ndim, axis):
    return [start if d == axis else 0 for d in range(ndim)]


def _concatenate_args(draw, x):
    axis = _axis(draw, x)
    return (_like(draw, x, _resized(draw, x.shape, axis)),), dict(dimension=axis)


def _dynamic_slice_args(draw, x):
    return _starts(draw, x.shape), dict(slice_sizes=tuple(draw(st.integers(0, n)) for n in x.shape))


def _dynamic_slice_in_dim_args(draw, x):
    axis = _axis(draw, x)
    return _starts(draw, x.shape[axis:axis + 1]), dict(size=draw(st.integers(0, x.shape[axis])), axis=axis)


def _dynamic_update_slice_args(draw, x):
    update = _like(draw, x, tuple(draw(st.integers(0, n)) for n in x.shape))
    return (update,) + _starts(draw, x.shape), {}


def _dynamic_update_slice_in_dim_args(draw, x):
    axis = _axis(draw, x)
    update = _like(draw, x, _resized_to(x.shape, axis, draw(st.integers(0, x.shape[axis]))))
    return (update,) + _starts(draw, x.shape[axis:axis + 1]), dict(axis=axis)


def _dynamic_update_index_in_dim_args(draw, x):
    """The update has the axis (of size 1) or lacks it."""
    axis = _axis(draw, x)
    shape = draw(st.sampled_from([_resized_to(x.shape, axis, 1), x.shape[:axis] + x.shape[axis + 1:]]))
    return (_like(draw, x, shape),) + _starts(draw, x.shape[axis:axis + 1]), dict(axis=axis)


def _clamp_args(draw, x):
    """Bounds that are scalars or shaped as ``x``."""
    return tuple(_like(draw, x, draw(st.sampled_from([(), x.shape]))) for _ in ("min", "max")), {}


def _pad_args(draw, x):
    config = []
    for n in x.shape:
        interior = draw(st.integers(0, 2))
        dilated = n + max(n - 1, 0) * interior
        low = draw(st.integers(-dilated, 2))  # negative: crop
        config.append((low, draw(st.integers(-(dilated + min(low, 0)), 2)), interior))
    return (_like(draw, x, ()),), dict(padding_config=tuple(config))


def _pad(x, value, padding_config):
    """Per axis: spread the elements ``interior + 1`` apart, pad the positive ends, crop the negative."""
    for axis, (low, high, interior) in enumerate(padding_config):
        n = x.shape[axis]
        dilated = n + max(n - 1, 0) * interior
        padded = np.full(_resized_to(x.shape, axis, max(low, 0) + dilated + max(high, 0)), value, x.dtype)
        padded[_along(axis, slice(max(low, 0), max(low, 0) + dilated, interior + 1))] = x
        x = padded[_along(axis, slice(max(-low, 0), padded.shape[axis] - max(-high, 0)))]
    return x


def _slice_args(draw, x):
    starts = [draw(st.integers(0, n)) for n in x.shape]
    limits = [draw(st.integers(s, n)) for s, n in zip(starts, x.shape)]
    strides = draw(st.none() | st.tuples(*(st.integers(1, 3) for _ in x.shape)))
    return (), dict(start_indices=tuple(starts), limit_indices=tuple(limits), strides=strides)


def _slice(x, start_indices, limit_indices, strides):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(*bounds) for bounds in zip(start_indices, limit_indices, strides))]


def _slice_in_dim_args(draw, x):
    axis = draw(st.integers(-x.ndim, x.ndim - 1))
    bound = st.none() | st.integers(-x.shape[axis], x.shape[axis])
    return (), dict(start_index=draw(bound), limit_index=draw(bound), stride=draw(st.integers(1, 3)), axis=axis)


def _select_n_args(draw, x):
    n_cases = draw(st.integers(1, 3))
    which_shape = draw(st.sampled_from([(), x.shape]))
    if n_cases == 2 and draw(st.booleans()):
        which = draw(hnp.arrays(np.bool_, which_shape))
    else:
        which = draw(hnp.arrays(np.int32, which_shape, elements=st.integers(0, n_cases - 1)))
    return (which,) + tuple(_like(draw, x) for _ in range(n_cases - 1)), {}


def _bitcast_args(draw, x):
    """A dtype of the same width or narrower (the result gains a last dimension)."""
    return (), dict(new_dtype=np.dtype(draw(st.sampled_from(
        [d for d in NUMBERS if np.dtype(d).itemsize <= x.dtype.itemsize]))))


def _bitcast(x, new_dtype):
    out = x.reshape(x.shape + (1,)).view(new_dtype)
    return out if new_dtype.itemsize < x.dtype.itemsize else out.reshape(x.shape)


def _in_float64(x):
    """Floating values widened (exactly) to float64, for NumPy functions that lack bfloat16 loops."""
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    return x if x.dtype.kind in "biu" else x.astype(np.float64)


def _reduce_prod(x, axes):
    wide = _in_float64(x)
    return np.asarray(np.prod(wide, axis=axes, dtype=wide.dtype)).astype(x.dtype)


def _cumulative(ufunc):
    def reference(x, axis, reverse):
        flip = (lambda a: np.flip(a, axis)) if reverse else (lambda a: a)
        wide = _in_float64(x)
        return flip(ufunc.accumulate(flip(wide), axis=axis, dtype=wide.dtype)).astype(x.dtype)

    return reference


def _cumulative_args(draw, x):
    return (), dict(axis=_axis(draw, x), reverse=draw(st.booleans()))


def _stack_partner(axis, ndim):
    """Draws an operand to join with ``x`` along ``axis`` of their ``atleast_{ndim}d`` forms: sized
    differently along ``axis`` if ``x`` has ``ndim`` dimensions already, else shaped as ``x``."""
    def draw_args(draw, x):
        return (_like(draw, x, _resized(draw, x.shape, axis) if x.ndim >= ndim else x.shape),), {}

    return draw_args


def _clip(x, **bounds):
    lo, hi = bounds.get("min"), bounds.get("max")
    x = x if lo is None else np.maximum(x, np.asarray(lo, x.dtype))
    return x if hi is None else np.minimum(x, np.asarray(hi, x.dtype))


def _clip_args(draw, x):
    bound = st.none() | st.integers(0, 10)
    return (), dict(min=draw(bound), max=draw(bound))


def _dsplit_args(draw, x):
    n = x.shape[2]
    sections = st.sampled_from([k for k in range(1, 4) if n % k == 0])
    return (), dict(indices_or_sections=draw(sections | st.lists(st.integers(0, n), max_size=3).map(sorted)))


def _nonzero_divisor(draw, x):
    y = _like(draw, x)
    return (np.where(y == 0, np.ones((), y.dtype), y),), {}


def _divmod(x, y):
    q, r = np.divmod(_in_float64(x), _in_float64(y))
    return q.astype(x.dtype), r.astype(x.dtype)


PARAM_RECORDS = [
    # shapes
    ParamRecord("lax.broadcast", lambda x, sizes: lax.broadcast(x, sizes),
                lambda x, sizes: np.broadcast_to(x, sizes + x.shape),
                lambda draw, x: ((), dict(sizes=tuple(draw(st.lists(st.integers(0, 3), max_size=2)))))),
    ParamRecord("lax.broadcast_to_rank", lambda x, rank: lax.broadcast_to_rank(x, rank),
                lambda x, rank: x.reshape((1,) * (rank - x.ndim) + x.shape),
                lambda draw, x: ((), dict(rank=draw(st.integers(0, 4))))),
    ParamRecord("lax.concatenate", lambda x, y, dimension: lax.concatenate([x, y, x], dimension),
                lambda x, y, dimension: np.concatenate([x, y, x], dimension), _concatenate_args, min_dims=1),
    ParamRecord("lax.pad", lambda x, value, padding_config: lax.pad(x, value, padding_config), _pad, _pad_args),
    ParamRecord("lax.rev", lambda x, dimensions: lax.rev(x, dimensions), lambda x, dimensions: np.flip(x, dimensions),
                lambda draw, x: ((), dict(dimensions=_axes(draw, x)))),
    ParamRecord("lax.slice", lambda x, **params: lax.slice(x, **params), _slice, _slice_args),
    ParamRecord("lax.slice_in_dim", lambda x, **params: lax.slice_in_dim(x, **params),
                lambda x, start_index, limit_index, stride, axis: x[_along(axis % x.ndim, slice(
                    start_index, limit_index, stride))], _slice_in_dim_args, min_dims=1),
    ParamRecord("lax.dynamic_slice", lambda x, *starts, slice_sizes: lax.dynamic_slice(x, starts, slice_sizes),
                lambda x, *starts, slice_sizes: x[_window(starts, x.shape, slice_sizes)], _dynamic_slice_args),
    ParamRecord("lax.dynamic_slice_in_dim",
                lambda x, start, size, axis: lax.dynamic_slice_in_dim(x, start, size, axis),
                lambda x, start, size, axis: x[_window(_starts_in_dim(start, x.ndim, axis), x.shape,
                                                       _resized_to(x.shape, axis, size))],
                _dynamic_slice_in_dim_args, min_dims=1),
    ParamRecord("lax.dynamic_update_slice", lambda x, update, *starts: lax.dynamic_update_slice(x, update, starts),
                _dynamic_update_slice, _dynamic_update_slice_args),
    ParamRecord("lax.dynamic_update_slice_in_dim",
                lambda x, update, start, axis: lax.dynamic_update_slice_in_dim(x, update, start, axis),
                lambda x, update, start, axis: _dynamic_update_slice(x, update, *_starts_in_dim(start, x.ndim, axis)),
                _dynamic_update_slice_in_dim_args, min_dims=1),
    ParamRecord("lax.dynamic_update_index_in_dim",
                lambda x, update, index, axis: lax.dynamic_update_index_in_dim(x, update, index, axis),
                lambda x, update, index, axis: _dynamic_update_slice(
                    x, update.reshape(_resized_to(x.shape, axis, 1)), *_starts_in_dim(index, x.ndim, axis)),
                _dynamic_update_index_in_dim_args, min_dims=1, min_side=1),
    ParamRecord("lax.bitcast_convert_type", lambda x, new_dtype: lax.bitcast_convert_type(x, new_dtype), _bitcast,
                _bitcast_args, NUMBERS, compare="bits", bit_patterns=True),
    ParamRecord("lax.bitcast_convert_type (narrow, then back)", lambda x, new_dtype: lax.bitcast_convert_type(
        lax.bitcast_convert_type(x, new_dtype), x.dtype), lambda x, new_dtype: x, _bitcast_args, NUMBERS,
        compare="bits", bit_patterns=True),
    # selection
    ParamRecord("lax.clamp", lambda x, lo, hi: lax.clamp(lo, x, hi),
                lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), _clamp_args),
    ParamRecord("lax.select_n", lambda x, which, *cases: lax.select_n(which, x, *cases),
                lambda x, which, *cases: np.choose(np.asarray(which, np.intp), (x,) + cases), _select_n_args),
    ParamRecord("jnp.clip", lambda x, **bounds: jnp.clip(x, **bounds), _clip, _clip_args, NUMBERS),
    ParamRecord("jnp.divmod", jnp.divmod, _divmod, _nonzero_divisor, SIGNED + [np.float32], compare="close"),
    # reductions
    ParamRecord("lax.reduce_prod", lambda x, axes: lax.reduce_prod(x, axes), _reduce_prod,
                lambda draw, x: ((), dict(axes=_axes(draw, x))), NUMBERS, domain=SMALL_FACTORS),
    ParamRecord("lax.reduce_xor", lambda x, axes: lax.reduce_xor(x, axes),
                lambda x, axes: np.bitwise_xor.reduce(x, axis=axes),
                lambda draw, x: ((), dict(axes=_axes(draw, x))), BOOL + INTS, bit_patterns=True),
    ParamRecord("lax.cumprod", lambda x, axis, reverse: lax.cumprod(x, axis, reverse), _cumulative(np.multiply),
                _cumulative_args, NUMBERS, min_dims=1, domain=SMALL_FACTORS),
    ParamRecord("lax.cummin", lambda x, axis, reverse: lax.cummin(x, axis, reverse), _cumulative(np.minimum),
                _cumulative_args, NUMBERS, min_dims=1),
    # jnp joining and splitting
    ParamRecord("jnp.atleast_2d", jnp.atleast_2d, np.atleast_2d, _no_args),
    ParamRecord("jnp.atleast_3d (two arrays)", jnp.atleast_3d, np.atleast_3d,
                lambda draw, x: ((_like(draw, x, draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0))),), {})),
    ParamRecord("jnp.vstack", lambda x, y: jnp.vstack([x, y]), lambda x, y: np.vstack([x, y]),
                _stack_partner(0, 2)),
    ParamRecord("jnp.dstack", lambda x, y: jnp.dstack((x, y)), lambda x, y: np.dstack((x, y)),
                _stack_partner(2, 3)),
    ParamRecord("jnp.column_stack", lambda x, y: jnp.column_stack([x, y]), lambda x, y: np.column_stack([x, y]),
                _stack_partner(1, 2), max_dims=2),
    ParamRecord("jnp.dsplit", lambda x, indices_or_sections: jnp.dsplit(x, indices_or_sections),
                lambda x, indices_or_sections: np.dsplit(x, indices_or_sections), _dsplit_args, min_dims=3),
]

# --- complex operands of records with parameters --------------------------------------------------
_BY_NAME = {r.name: r for r in PARAM_RECORDS}
# Shape operations and selections move values: any value, infinities and NaNs included.
_MOVING = ["lax.broadcast", "lax.broadcast_to_rank", "lax.concatenate", "lax.pad", "lax.rev", "lax.slice",
           "lax.slice_in_dim", "lax.dynamic_slice", "lax.dynamic_slice_in_dim", "lax.dynamic_update_slice",
           "lax.dynamic_update_slice_in_dim", "lax.dynamic_update_index_in_dim", "lax.select_n", "jnp.atleast_2d",
           "jnp.atleast_3d (two arrays)", "jnp.vstack", "jnp.dstack", "jnp.column_stack", "jnp.dsplit"]


def _in_complex128(reference):
    """A reference computed in complex128 and rounded to complex64 (the operand's type)."""
    def wide(x, *args, **params):
        return np.asarray(reference(x.astype(np.complex128), *args, **params)).astype(x.dtype)
    return wide


def _sort_keys(x, axis):
    """Indices of a stable sort along ``axis`` by (real, imaginary), each with NaNs last: JAX's
    order (NumPy's own complex order puts R + nanj after every R + Rj)."""
    return np.lexsort((np.imag(x), np.real(x)), axis=axis)


def _sort_args(draw, x):
    return (), dict(axis=_axis(draw, x))


def _clamp_by_real_parts(x, lo, hi):
    x, lo, hi = np.broadcast_arrays(x, lo, hi)
    t = np.where(np.real(lo) >= np.real(x), lo, x)
    return np.where(np.real(hi) >= np.real(t), t, hi)


COMPLEX_PARAM_RECORDS = [_BY_NAME[name]._replace(dtypes=COMPLEX, specials=True) for name in _MOVING] + [
    # XLA's clamp of complex values compares the real parts only (checked against JAX 0.10)
    _BY_NAME["lax.clamp"]._replace(name="lax.clamp (complex)", dtypes=COMPLEX, reference=_clamp_by_real_parts),
    # Products of units are exact in any order; sums and extrema of values within +-10 are not
    # reordered-exact, so they compare within a tolerance (extrema exactly). Extrema are
    # lexicographic (no NaNs: XLA's complex max and min of a NaN depend on the operands' order).
    ParamRecord("lax.reduce_prod (complex)", lambda x, axes: lax.reduce_prod(x, axes),
                lambda x, axes: np.asarray(np.prod(x, axis=axes)), lambda draw, x: ((), dict(axes=_axes(draw, x))),
                COMPLEX, domain=UNITS),
    ParamRecord("lax.reduce_sum (complex)", lambda x, axes: lax.reduce_sum(x, axes),
                _in_complex128(lambda x, axes: np.sum(x, axis=axes)), lambda draw, x: ((), dict(axes=_axes(draw, x))),
                COMPLEX, compare="close"),
    ParamRecord("jnp.max (complex)", lambda x, axis: jnp.max(x, axis), lambda x, axis: np.asarray(np.max(x, axis)),
                lambda draw, x: ((), dict(axis=_axis(draw, x))), COMPLEX, min_dims=1, min_side=1),
    ParamRecord("jnp.min (complex)", lambda x, axis: jnp.min(x, axis), lambda x, axis: np.asarray(np.min(x, axis)),
                lambda draw, x: ((), dict(axis=_axis(draw, x))), COMPLEX, min_dims=1, min_side=1),
    ParamRecord("jnp.mean (complex)", lambda x, axis: jnp.mean(x, axis),
                _in_complex128(lambda x, axis: np.mean(x, axis)), lambda draw, x: ((), dict(axis=_axis(draw, x))),
                COMPLEX, min_dims=1, min_side=1, compare="close"),
    ParamRecord("lax.cumsum (complex)", lambda x, axis, reverse: lax.cumsum(x, axis, reverse),
                _cumulative(np.add), _cumulative_args, COMPLEX, min_dims=1, compare="close"),
    ParamRecord("lax.cumprod (complex)", lambda x, axis, reverse: lax.cumprod(x, axis, reverse),
                _cumulative(np.multiply), _cumulative_args, COMPLEX, min_dims=1, domain=UNITS),
    ParamRecord("lax.cummax (complex)", lambda x, axis, reverse: lax.cummax(x, axis, reverse),
                _cumulative(np.maximum), _cumulative_args, COMPLEX, min_dims=1),
    ParamRecord("lax.cummin (complex)", lambda x, axis, reverse: lax.cummin(x, axis, reverse),
                _cumulative(np.minimum), _cumulative_args, COMPLEX, min_dims=1),
    # Sorts: lexicographic by (real, imaginary), NaNs last in each, infinities and NaNs drawn.
    ParamRecord("jnp.sort (complex)", lambda x, axis: jnp.sort(x, axis),
                lambda x, axis: np.take_along_axis(x, _sort_keys(x, axis), axis), _sort_args, COMPLEX,
                min_dims=1, specials=True),
    ParamRecord("jnp.argsort (complex)", lambda x, axis: jnp.argsort(x, axis),
                lambda x, axis: _sort_keys(x, axis).astype(np.int32), _sort_args, COMPLEX, min_dims=1,
                specials=True),
]

# --- aliases: each must give exactly what the function it names gives ----------------------------
_X = np.array([[0.5, -0.25, 0.75], [0.125, -0.875, 0.375]], np.float32)  # in (-1, 1)
_I = np.array([[5, -3, 7], [-8, 2, 6]], np.int8)
_S = np.array([[1, 2, 0], [3, 7, 4]], np.int8)  # shift amounts, divisors once 1 is added

ALIASES = [
    ("jnp.absolute", jnp.absolute, jnp.abs, (_I,)),
    ("jnp.acos", jnp.acos, jnp.arccos, (_X,)),
    ("jnp.acosh", jnp.acosh, jnp.arccosh, (_X + 2,)),
    ("jnp.asin", jnp.asin, jnp.arcsin, (_X,)),
    ("jnp.asinh", jnp.asinh, jnp.arcsinh, (_X,)),
    ("jnp.atan", jnp.atan, jnp.arctan, (_X,)),
    ("jnp.atanh", jnp.atanh, jnp.arctanh, (_X,)),
    ("jnp.atan2", jnp.atan2, jnp.arctan2, (_X, _X[::-1])),
    ("jnp.amax", jnp.amax, jnp.max, (_X,)),
    ("jnp.amin", jnp.amin, jnp.min, (_X,)),
    ("jnp.around", jnp.around, jnp.round, (_X * 10,)),
    ("jnp.fix", jnp.fix, jnp.trunc, (_X * 10,)),
    ("jnp.degrees", jnp.degrees, jnp.rad2deg, (_X,)),
    ("jnp.radians", jnp.radians, jnp.deg2rad, (_X,)),
    ("jnp.conjugate", jnp.conjugate, jnp.conj, (_X,)),
    ("jnp.bitwise_invert", jnp.bitwise_invert, jnp.invert, (_I,)),
    ("jnp.bitwise_not", jnp.bitwise_not, jnp.invert, (_I,)),
    ("jnp.bitwise_left_shift", jnp.bitwise_left_shift, jnp.left_shift, (_I, _S)),
    ("jnp.bitwise_right_shift", jnp.bitwise_right_shift, jnp.right_shift, (_I, _S)),
    ("jnp.mod", jnp.mod, jnp.remainder, (_I, _S + 1)),
    ("jnp.pow", jnp.pow, jnp.power, (_X + 1, _X)),
    ("jnp.true_divide", jnp.true_divide, jnp.divide, (_I, _S + 1)),
    ("lax.not_", lax.not_, lax.bitwise_not, (_I,)),
    ("lax.and_", lax.and_, lax.bitwise_and, (_I, _S)),
    ("lax.or_", lax.or_, lax.bitwise_or, (_I, _S)),
    ("lax.xor", lax.xor, lax.bitwise_xor, (_I, _S)),
]
