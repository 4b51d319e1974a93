"""Op records: one line per public function, driving differential tests against NumPy.

A record names the ember function, the NumPy function that defines the
expected values (evaluated in float64 for floating inputs), the input dtypes
and value domain, and how the result dtype follows from the inputs.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

import ml_dtypes
import numpy as np

import ember.numpy as jnp
from ember import lax, nn

BOOL = [np.bool_]
SIGNED = [np.int8, np.int16, np.int32]
UNSIGNED = [np.uint8, np.uint16, np.uint32]
INTS = SIGNED + UNSIGNED
FLOATS = [np.float32, np.float16, ml_dtypes.bfloat16]
NUMBERS = INTS + FLOATS
ALL = BOOL + NUMBERS


class OpRecord(NamedTuple):
    name: str
    fn: Callable
    reference: Callable
    nargs: int
    dtypes: list
    domain: tuple = (-10.0, 10.0)      # value range for floating inputs
    result: str = "same"               # "same" | "inexact" (ints -> float32) | "bool"
    tolerance: float | None = None      # extra relative tolerance (float32)
    nonzero_divisor: bool = False       # second operand must be non-zero (integer division)


def _inexact(name, fn, ref, domain=(-10.0, 10.0), tol=None, dtypes=NUMBERS):
    return OpRecord(name, fn, ref, 1, dtypes, domain, "inexact", tol)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _erfc(x):
    return np.vectorize(math.erfc, otypes=[np.float64])(x)


def _lgamma(x):
    return np.vectorize(math.lgamma, otypes=[np.float64])(x)


def _logistic(x):
    return 1 / (1 + np.exp(-x))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _round_half_away(x):
    return np.trunc(x + np.copysign(0.5, x)) * (np.abs(x - np.trunc(x)) >= 0.5) + np.trunc(x) * (
        np.abs(x - np.trunc(x)) < 0.5)


UNARY_RECORDS = [
    _inexact("exp", jnp.exp, np.exp, (-80, 80)),
    _inexact("exp2", jnp.exp2, np.exp2, (-100, 100)),
    _inexact("expm1", jnp.expm1, np.expm1, (-20, 20)),
    _inexact("log", jnp.log, np.log, (0.001, 1e6)),
    _inexact("log1p", jnp.log1p, np.log1p, (-0.99, 1e6)),
    _inexact("log2", jnp.log2, np.log2, (0.001, 1e6)),
    _inexact("log10", jnp.log10, np.log10, (0.001, 1e6)),
    _inexact("sin", jnp.sin, np.sin, (-100, 100)),
    _inexact("cos", jnp.cos, np.cos, (-100, 100)),
    _inexact("tan", jnp.tan, np.tan, (-1.5, 1.5)),
    _inexact("arcsin", jnp.arcsin, np.arcsin, (-1, 1)),
    _inexact("arccos", jnp.arccos, np.arccos, (-1, 1)),
    _inexact("arctan", jnp.arctan, np.arctan, (-100, 100)),
    _inexact("sinh", jnp.sinh, np.sinh, (-20, 20)),
    _inexact("cosh", jnp.cosh, np.cosh, (-20, 20)),
    _inexact("tanh", jnp.tanh, np.tanh, (-20, 20)),
    _inexact("arcsinh", jnp.arcsinh, np.arcsinh, (-100, 100)),
    _inexact("arccosh", jnp.arccosh, np.arccosh, (1, 100)),
    _inexact("arctanh", jnp.arctanh, np.arctanh, (-0.99, 0.99)),
    _inexact("sqrt", jnp.sqrt, np.sqrt, (0, 1e6)),
    _inexact("cbrt", jnp.cbrt, np.cbrt, (-1e6, 1e6)),
    _inexact("reciprocal", jnp.reciprocal, np.reciprocal, (0.1, 100)),
    _inexact("deg2rad", jnp.deg2rad, np.deg2rad),
    _inexact("sinc", jnp.sinc, np.sinc, tol=1e-5),
    _inexact("fabs", jnp.fabs, np.fabs),
    _inexact("lax.erf", lambda x: lax.erf(jnp.asarray(x, jnp.promote_types(x.dtype, jnp.float32)
                                                         if not jnp.issubdtype(x.dtype, jnp.floating) else x.dtype)),
             _erf, (-5, 5), dtypes=FLOATS),
    _inexact("lax.erfc", lambda x: lax.erfc(x), _erfc, (-5, 5), dtypes=FLOATS),
    _inexact("lax.lgamma", lambda x: lax.lgamma(x), _lgamma, (0.1, 50), tol=1e-5, dtypes=FLOATS),
    _inexact("lax.logistic", lambda x: lax.logistic(x), _logistic, (-50, 50), dtypes=FLOATS),
    _inexact("lax.rsqrt", lambda x: lax.rsqrt(x), lambda x: 1 / np.sqrt(x), (0.01, 1e4), dtypes=FLOATS),
    OpRecord("negative", jnp.negative, np.negative, 1, SIGNED + FLOATS),
    OpRecord("positive", jnp.positive, np.positive, 1, NUMBERS),
    OpRecord("abs", jnp.abs, np.abs, 1, NUMBERS),
    OpRecord("sign", jnp.sign, np.sign, 1, SIGNED + FLOATS),
    OpRecord("square", jnp.square, np.square, 1, FLOATS, (-100, 100)),
    OpRecord("floor", jnp.floor, np.floor, 1, FLOATS),
    OpRecord("ceil", jnp.ceil, np.ceil, 1, FLOATS),
    OpRecord("rint", jnp.rint, np.rint, 1, FLOATS),
    OpRecord("round", jnp.round, np.round, 1, FLOATS),
    OpRecord("trunc", jnp.trunc, np.trunc, 1, FLOATS),
    OpRecord("lax.round", lambda x: lax.round(x), _round_half_away, 1, FLOATS),
    OpRecord("invert", jnp.invert, np.invert, 1, BOOL + INTS),
    OpRecord("logical_not", jnp.logical_not, np.logical_not, 1, ALL, result="bool"),
    OpRecord("isnan", jnp.isnan, np.isnan, 1, NUMBERS, result="bool"),
    OpRecord("isinf", jnp.isinf, np.isinf, 1, NUMBERS, result="bool"),
    OpRecord("isfinite", jnp.isfinite, np.isfinite, 1, NUMBERS, result="bool"),
    OpRecord("signbit", jnp.signbit, np.signbit, 1, SIGNED + FLOATS, result="bool"),
    OpRecord("nan_to_num", jnp.nan_to_num, np.nan_to_num, 1, [np.float32]),
    OpRecord("nn.relu", lambda x: nn.relu(x), lambda x: np.maximum(x, 0), 1, [np.float32, np.float16, np.int32]),
    OpRecord("nn.sigmoid", lambda x: nn.sigmoid(x), _logistic, 1, [np.float32], (-50, 50)),
    OpRecord("nn.softplus", lambda x: nn.softplus(x), lambda x: np.logaddexp(x, 0), 1, [np.float32], (-50, 50)),
    OpRecord("nn.silu", lambda x: nn.silu(x), lambda x: x * _logistic(x), 1, [np.float32], (-50, 50)),
    OpRecord("nn.gelu", lambda x: nn.gelu(x), _gelu_tanh, 1, [np.float32], tolerance=1e-5),
]

BINARY_RECORDS = [
    OpRecord("add", jnp.add, np.add, 2, ALL),
    OpRecord("subtract", jnp.subtract, np.subtract, 2, NUMBERS),
    OpRecord("multiply", jnp.multiply, np.multiply, 2, ALL),
    OpRecord("divide", jnp.divide, np.divide, 2, FLOATS, (0.5, 10), result="inexact"),
    OpRecord("floor_divide", jnp.floor_divide, np.floor_divide, 2, SIGNED + FLOATS, nonzero_divisor=True),
    OpRecord("remainder", jnp.remainder, np.remainder, 2, SIGNED + FLOATS, nonzero_divisor=True),
    OpRecord("fmod", jnp.fmod, np.fmod, 2, SIGNED + FLOATS, nonzero_divisor=True),
    OpRecord("power", jnp.power, np.power, 2, [np.float32], (0.1, 5)),
    OpRecord("maximum", jnp.maximum, np.maximum, 2, ALL),
    OpRecord("minimum", jnp.minimum, np.minimum, 2, ALL),
    OpRecord("arctan2", jnp.arctan2, np.arctan2, 2, FLOATS, result="inexact"),
    OpRecord("hypot", jnp.hypot, np.hypot, 2, FLOATS, result="inexact"),
    OpRecord("copysign", jnp.copysign, np.copysign, 2, FLOATS, result="inexact"),
    OpRecord("logaddexp", jnp.logaddexp, np.logaddexp, 2, FLOATS, (-50, 50), result="inexact"),
    OpRecord("bitwise_and", jnp.bitwise_and, np.bitwise_and, 2, BOOL + INTS),
    OpRecord("bitwise_or", jnp.bitwise_or, np.bitwise_or, 2, BOOL + INTS),
    OpRecord("bitwise_xor", jnp.bitwise_xor, np.bitwise_xor, 2, BOOL + INTS),
    OpRecord("logical_and", jnp.logical_and, np.logical_and, 2, ALL, result="bool"),
    OpRecord("logical_or", jnp.logical_or, np.logical_or, 2, ALL, result="bool"),
    OpRecord("logical_xor", jnp.logical_xor, np.logical_xor, 2, ALL, result="bool"),
    OpRecord("equal", jnp.equal, np.equal, 2, ALL, result="bool"),
    OpRecord("not_equal", jnp.not_equal, np.not_equal, 2, ALL, result="bool"),
    OpRecord("less", jnp.less, np.less, 2, ALL, result="bool"),
    OpRecord("less_equal", jnp.less_equal, np.less_equal, 2, ALL, result="bool"),
    OpRecord("greater", jnp.greater, np.greater, 2, ALL, result="bool"),
    OpRecord("greater_equal", jnp.greater_equal, np.greater_equal, 2, ALL, result="bool"),
]


def expected_dtype(record: OpRecord, dtype: Any) -> np.dtype:
    dtype = np.dtype(dtype)
    if record.result == "bool":
        return np.dtype(np.bool_)
    if record.result == "inexact" and dtype.kind in "biu":
        return np.dtype(np.float32)
    return dtype
