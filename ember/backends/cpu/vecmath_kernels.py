"""Small compiled loops over one vecmath function, callable on NumPy arrays, and what
measures them: extended-precision references, ULP distances and input samplers (used by
tests/test_vecmath.py and benchmarks/vecmath_accuracy.py). Eager calls of small arrays run some
of these loops too (``Kernel.apply``: ``ember.runtime.eager``'s ``LOOPS``).

The loops use ``vecmath`` the way the code generator does: the function is emitted on
scalars inside a loop that LLVM vectorizes (``lanes=0``), or on explicit vectors of
``lanes`` elements.

    exp = compile_kernel("exp", np.float32)
    out = exp(np.linspace(-1, 1, 1000, dtype=np.float32))
"""
from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Callable

import numpy as np
from llvmlite import ir

from ember.backends.cpu import jit, vecmath
from ember.backends.cpu.entry import data_pointer

_TYPES = {np.dtype(np.float32): ir.FloatType(), np.dtype(np.float64): ir.DoubleType()}


class Kernel:
    """``out[i] = name(*(a[i] for a in arrays))`` compiled for one dtype; keeps its machine code alive."""

    def __init__(self, name: str, dtype: np.dtype, lanes: int) -> None:
        self.name, self.dtype, self.lanes = name, np.dtype(dtype), lanes
        self.arity = 1 if name in vecmath.SUPPORTED_UNARY else 2
        self.module = _loop_module(name, _TYPES[self.dtype], self.arity, lanes)
        self.compiled = jit.CompiledModule(self.module)
        pointer = ctypes.c_void_p
        signature = ctypes.CFUNCTYPE(None, *([pointer] * (self.arity + 1)), ctypes.c_int64)
        self._function = signature(self.compiled.engine.get_function_address("kernel"))

    def apply(self, x: np.ndarray) -> np.ndarray:
        """``name(x)`` of one array of the kernel's dtype into a new read-only C-contiguous array,
        in one native call on the buffers (a loop of scalars, ``lanes=0``, of a unary function):
        about a microsecond of call on top of the loop."""
        out = np.empty(x.shape, self.dtype)  # (before ``ascontiguousarray``, which makes a 0-d array 1-d)
        x = np.ascontiguousarray(x)
        self._function(data_pointer(x), data_pointer(out), x.size)
        out.setflags(write=False)
        return out

    @property
    def optimized_ir(self) -> str:
        return str(self.compiled.optimized_ir)

    def __call__(self, *arrays: np.ndarray) -> np.ndarray:
        if len(arrays) != self.arity:
            raise TypeError(f"{self.name} takes {self.arity} arrays, got {len(arrays)}")
        arrays = np.broadcast_arrays(*(np.asarray(a, dtype=self.dtype) for a in arrays))
        shape = arrays[0].shape
        size = arrays[0].size
        padded = -(-size // self.lanes) * self.lanes if self.lanes else size
        inputs = [np.zeros(padded, self.dtype) for _ in arrays]
        for buffer, array in zip(inputs, arrays):
            buffer[:size] = array.ravel()
        out = np.empty(padded, self.dtype)
        count = padded // self.lanes if self.lanes else padded
        self._function(*(b.ctypes.data for b in inputs), out.ctypes.data, count)
        return out[:size].reshape(shape)


@functools.cache
def compile_kernel(name: str, dtype, lanes: int = 0) -> Kernel:
    """A compiled loop applying vecmath function ``name`` elementwise (cached per arguments)."""
    return Kernel(name, np.dtype(dtype), lanes)


def _loop_module(name: str, element: ir.Type, arity: int, lanes: int) -> ir.Module:
    """``void kernel(T* in..., T* out, i64 n)``: for i < n: out[i] = f(in[i]...), T maybe a vector."""
    module = jit.new_module(f"vecmath_{name}")
    value_type = ir.VectorType(element, lanes) if lanes else element
    pointer = value_type.as_pointer()
    i64 = ir.IntType(64)
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [pointer] * (arity + 1) + [i64]), "kernel")
    for argument in function.args[:-1]:
        argument.add_attribute("noalias")
    *inputs, out, count = function.args
    entry, loop, done = (function.append_basic_block(n) for n in ("entry", "loop", "done"))
    builder = ir.IRBuilder(entry)
    builder.cbranch(builder.icmp_signed(">", count, ir.Constant(i64, 0)), loop, done)
    builder.position_at_end(loop)
    index = builder.phi(i64)
    index.add_incoming(ir.Constant(i64, 0), entry)
    align = element.get_abi_size(jit.target_machine().target_data)  # NumPy aligns to elements only
    values = [builder.load(builder.gep(p, [index], inbounds=True), align=align) for p in inputs]
    emit: Callable = vecmath.emit_unary if arity == 1 else vecmath.emit_binary
    result = emit(builder, name, *values)
    builder.store(result, builder.gep(out, [index], inbounds=True), align=align)
    following = builder.add(index, ir.Constant(i64, 1))
    index.add_incoming(following, builder.block)
    builder.cbranch(builder.icmp_signed("<", following, count), loop, done)
    builder.position_at_end(done)
    builder.ret_void()
    return module


# --- references and error measurement -----------------------------------------------------------------
# Computed in x87 extended precision (np.longdouble, 64-bit significand) and rounded to the dtype:
# correctly rounded for float32 and within a hair of it for float64. erf/erfc: see _erf_reference.
def _round_half_away(x):
    return np.copysign(np.floor(np.abs(x) + np.longdouble(0.5)), x)


def _erf_reference(name: str):
    """math's float64 erf/erfc (a few ulp off in float64); mpmath's where installed, for float64."""
    approximate = getattr(math, name)

    def reference(x, dtype):
        try:
            import mpmath
        except ImportError:
            mpmath = None
        function = approximate
        if dtype == np.float64 and mpmath is not None:
            exact = getattr(mpmath, name)

            def function(v):  # mpmath has no -0, and gives up on huge arguments
                return float(exact(mpmath.mpf(float(v)))) if 0 < abs(v) < 30 else approximate(v)
        return np.frompyfunc(function, 1, 1)(x.astype(np.float64)).astype(np.float64)
    return reference


def _ieee_extremum(pick, combine_bits):
    """maximum/minimum of IEEE 754-2019 (and JAX): NaN-propagating, -0 < +0."""
    def extremum(x, y):
        signed = np.int32 if x.dtype == np.float32 else np.int64
        tie = combine_bits(x.view(signed), y.view(signed)).view(x.dtype)  # equal values: +0 vs -0
        result = np.where(x == y, tie, pick(x, y))
        return np.where(np.isnan(x) | np.isnan(y), np.nan, result).astype(x.dtype)
    return extremum


REFERENCES: dict[str, Callable] = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log1p": np.log1p,
    "tanh": np.tanh, "logistic": lambda x: 1 / (1 + np.exp(-x)), "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "erf": _erf_reference("erf"), "erfc": _erf_reference("erfc"), "atan": np.arctan, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "cbrt": np.cbrt, "floor": np.floor, "ceil": np.ceil,
    "round": _round_half_away, "round_even": np.rint, "abs": np.abs, "sinh": np.sinh, "cosh": np.cosh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "asin": np.arcsin, "acos": np.arccos,
    "atan2": np.arctan2, "pow": np.power, "max": _ieee_extremum(np.maximum, np.bitwise_and),
    "min": _ieee_extremum(np.minimum, np.bitwise_or),
}


_EXACT_IN_DTYPE = {"sqrt", "floor", "ceil", "round_even", "abs", "max", "min"}
_TAKES_DTYPE = {"erf", "erfc"}  # (``_erf_reference``: computed by the dtype's own means)


def reference(name: str, *arrays: np.ndarray) -> np.ndarray:
    """``name`` of the arrays, computed in extended precision and rounded to their dtype."""
    dtype = arrays[0].dtype
    function = REFERENCES[name]
    with np.errstate(all="ignore"):
        if name in _TAKES_DTYPE:
            return function(*arrays, dtype).astype(dtype)
        if name in _EXACT_IN_DTYPE:  # correctly rounded in the dtype itself: avoid double rounding
            return function(*arrays)
        return function(*(a.astype(np.longdouble) for a in arrays)).astype(dtype)


def ulp_distance(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """How many representable numbers apart (0 for NaN vs NaN and for +0 vs -0; huge for NaN vs number)."""
    signed = np.int32 if got.dtype == np.float32 else np.int64
    limit = np.iinfo(signed).max

    def ordinal(a):
        bits = a.view(signed).astype(np.int64)
        return np.where(bits < 0, np.int64(np.iinfo(signed).min) - bits, bits)

    a, b = ordinal(got), ordinal(expected)
    with np.errstate(over="ignore"):
        distance = np.where((a < 0) == (b < 0), np.abs(a - b), limit)
    distance = np.where(np.isnan(got) & np.isnan(expected), 0, distance)
    return np.where(np.isnan(got) != np.isnan(expected), limit, distance)


# --- inputs: whole-range bit patterns plus each function's interesting region ---------------------------
def _uniform(rng, count, low, high):
    return rng.uniform(low, high, count)


def _log_uniform(rng, count, low_exponent, high_exponent, signed=True):
    magnitude = 2.0 ** rng.uniform(low_exponent, high_exponent, count)
    return magnitude * (rng.choice([-1.0, 1.0], count) if signed else 1.0)


def _near(rng, count, points, dtype, ulps=64):
    """Values within ``ulps`` representable numbers of the given points."""
    points = np.asarray(points, dtype=dtype)[rng.integers(0, len(points), count)]
    signed = np.int32 if dtype == np.float32 else np.int64
    return (points.view(signed) + rng.integers(-ulps, ulps + 1, count).astype(signed)).view(dtype)


def _regions(name: str, dtype, rng, count):
    """Arrays of samples (before conversion to dtype) that exercise ``name``."""
    f32 = dtype == np.float32
    max_exp = 127 if f32 else 1023
    min_exp = -149 if f32 else -1074
    whole = lambda signed=True: _log_uniform(rng, count, min_exp, max_exp + 0.99, signed)
    exp_low, exp_high = (-104.0, 89.0) if f32 else (-746.0, 710.0)
    overflow = 88.72283905206835 if f32 else 709.782712893384
    table = {
        "exp": [_uniform(rng, count, exp_low, exp_high), _log_uniform(rng, count, -30, 3),
                _near(rng, count, [overflow, -87.33654, -103.97208] if f32 else
                      [overflow, -708.39641853226408, -745.13321910194110], dtype)],
        "exp2": [_uniform(rng, count, exp_low * 1.45, exp_high * 1.45), _log_uniform(rng, count, -30, 3),
                 _near(rng, count, [128, -126, -149, -150, 0.5] if f32 else [1024, -1022, -1074, -1075], dtype)],
        "expm1": [_uniform(rng, count, -20 if f32 else -40, exp_high), _log_uniform(rng, count, -40, 1)],
        "log": [whole(False), _uniform(rng, count, 0.5, 2.0), _near(rng, count, [1.0], dtype, 1 << 16)],
        "tanh": [_uniform(rng, count, -12, 12), _log_uniform(rng, count, -30, 4)],
        "logistic": [_uniform(rng, count, -110 if f32 else -750, 40), _log_uniform(rng, count, -30, 4)],
        "sin": [_uniform(rng, count, -10, 10), _uniform(rng, count, -1e5, 1e5), whole(),
                _near(rng, count, np.pi / 2 * np.arange(1, 20000), dtype)],
        "erf": [_uniform(rng, count, -7 if f32 else -28, 7 if f32 else 28), _log_uniform(rng, count, -30, 2)],
        "atan": [whole(), _uniform(rng, count, -3, 3)],
        "sqrt": [whole(False), _uniform(rng, count, 0, 4)],
        "floor": [_uniform(rng, count, -1e7, 1e7), np.round(_uniform(rng, count, -1e6, 1e6)) + 0.5,
                  _uniform(rng, count, -3, 3)],
        "sinh": [_uniform(rng, count, -90 if f32 else -711, 90 if f32 else 711), _log_uniform(rng, count, -30, 2)],
        "asinh": [whole(), _uniform(rng, count, -3, 3)],
        "acosh": [1 + _log_uniform(rng, count, -30, 3, False), _log_uniform(rng, count, 0, max_exp, False)],
        "atanh": [_uniform(rng, count, -1, 1), 1 - _log_uniform(rng, count, -30, -1, False),
                  _log_uniform(rng, count, -30, -1)],
        "asin": [_uniform(rng, count, -1, 1), 1 - _log_uniform(rng, count, -30, -1, False),
                 _near(rng, count, [0.5, -0.5], dtype, 1 << 12)],
        "log1p": [whole(False), _uniform(rng, count, -1, 1), -1 + _log_uniform(rng, count, -30, -1, False),
                  _log_uniform(rng, count, -40, 0)],
    }
    aliases = {"log2": "log", "cos": "sin", "tan": "sin", "erfc": "erf", "rsqrt": "sqrt", "cbrt": "atan",
               "ceil": "floor", "round": "floor", "round_even": "floor", "abs": "atan", "cosh": "sinh",
               "acos": "asin"}
    return table[aliases.get(name, name)]


def _random_bits(rng, count, dtype):
    signed = np.int32 if dtype == np.float32 else np.int64
    info = np.iinfo(signed)
    return rng.integers(info.min, info.max, count, dtype=signed, endpoint=True).view(dtype)


def sample_inputs(name: str, dtype, count: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """About ``count`` inputs for ``name`` in ``dtype``: samples spread over the function's
    interesting regions, then (the last ``count // 4``) random bit patterns: all of the range,
    NaN and inf included."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if name in vecmath.SUPPORTED_BINARY:
        return _binary_inputs(name, dtype, rng, count)
    pieces = _regions(name, dtype, rng, count)
    share = (count - count // 4) // len(pieces)
    with np.errstate(over="ignore"):
        parts = [np.asarray(p[:share]).astype(dtype) for p in pieces]
    return (np.concatenate(parts + [_random_bits(rng, count // 4, dtype)]),)


def _binary_inputs(name, dtype, rng, count):
    quarter = count // 4
    x, y = _random_bits(rng, quarter, dtype), _random_bits(rng, quarter, dtype)
    if name == "pow":
        xs = [_log_uniform(rng, quarter, -20, 20, False), -np.round(_uniform(rng, quarter, 1, 30)),
              1 + _log_uniform(rng, quarter, -30, -5)]
        ys = [_uniform(rng, quarter, -30, 30), np.round(_uniform(rng, quarter, -40, 40)),
              _log_uniform(rng, quarter, 0, 40)]
    elif name == "atan2":
        xs = [_log_uniform(rng, quarter, -40, 40), _uniform(rng, quarter, -5, 5), _uniform(rng, quarter, -1, 1)]
        ys = [_log_uniform(rng, quarter, -40, 40), _uniform(rng, quarter, -5, 5), _uniform(rng, quarter, -1, 1)]
    else:
        xs = ys = [_uniform(rng, quarter, -2, 2)] * 3
    with np.errstate(over="ignore"):
        return (np.concatenate([a.astype(dtype) for a in xs] + [x]),
                np.concatenate([b.astype(dtype) for b in ys] + [y]))
