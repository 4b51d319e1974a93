"""Inline, vectorizable math functions emitted as LLVM IR.

A fused elementwise loop only vectorizes if every operation in it does, so the
transcendental functions cannot be calls into libm: each function here is
straight-line IR (selects instead of branches) over ``float``/``double`` or
vectors of them, built from LLVM intrinsics that map to SIMD instructions
(``fma``, ``sqrt``, ``fabs``, ``copysign``, ``floor``, ``roundeven``, ...).

The algorithms are the classical ones: Cody-Waite argument reduction with
splits of ln 2 whose high parts multiply exactly, minimax polynomials
(fitted by ``benchmarks/vecmath_fit.py``; the coefficients below are its
output), double-double arithmetic where a result needs more than working
precision, and a table-driven Payne-Hanek reduction so that sin/cos/tan stay
accurate for every finite argument. Special values (signed zeros, infinities,
NaN, subnormal inputs and outputs, overflow thresholds) are patched with
selects and follow IEEE/C99 (and NumPy) exactly. Measured accuracy: see
``docs/vecmath.md`` (at most 2 ULP everywhere).

Some float32 functions are computed in float64 and rounded once
(``FLOAT32_VIA_FLOAT64``): they stay vectorized, at half the lanes.

    emit_unary(builder, "exp", x)        # x: float/double scalar or vector value
    emit_binary(builder, "pow", x, y)    # arguments in NumPy's order (np.power, np.arctan2, ...)
"""
from __future__ import annotations

import contextlib
import functools
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
from llvmlite import ir

from ember.backends.cpu.jit import host_features
from ember.backends.reference.elementwise import XLA_TANH_CLAMP, XLA_TANH_LINEAR, XLA_TANH_P, XLA_TANH_Q

F32, F64 = ir.FloatType(), ir.DoubleType()


@dataclass(frozen=True)
class _Format:
    """Everything an algorithm needs to know about its floating-point type."""

    scalar: ir.Type
    bits: int
    mantissa: int  # explicit significand bits
    constants: dict

    @property
    def bias(self) -> int:
        return (1 << (self.bits - self.mantissa - 2)) - 1

    def __getattr__(self, name: str):
        try:
            return self.constants[name]
        except KeyError:
            raise AttributeError(name) from None


# --- fitted coefficients (benchmarks/vecmath_fit.py) ------------------------------------------------
# exp(r) = 1 + r + r**2 * EXP(r),                |r| <= ln2/2
# log(1+f) = 2s + s * z * LOG(z),  s = f/(2+f), z = s**2, sqrt(2)/2 <= 1+f < sqrt(2)
#          = 2s + (2/3) s**3 + s**5 * LOG_FIFTH(z)  (for the double-double log of pow)
# sin(x) = x + x**3 * SIN(x**2), cos(x) = 1 - x**2/2 + x**4 * COS(x**2), tan(x) = x + x**3 * TAN(x**2), |x| <= pi/4
# atan(x) = x + x**3 * ATAN(x**2), |x| <= 7/16;  asin(x) = x + x**3 * ASIN(x**2), |x| <= 1/2
# tanh(x) = x + x**3 * TANH(x**2), |x| <= 0.5493;  sinh(x) = x + x**3 * SINH(x**2), |x| <= 1
# erf(x) = x * ERF(x**2), |x| <= 1;  erfc(x) = exp(-x**2) * erfcx(x), erfcx by pieces (_ERFC_PIECES)
_F64_CONSTANTS = {
    "EXP": (0.5, 0.1666666666666667, 0.041666666666666616, 0.008333333333326164, 0.0013888888888917974,
        0.00019841269874736089, 2.4801587245717235e-05, 2.755725549482771e-06, 2.755734962897506e-07,
        2.5105181706802474e-08, 2.0889375637448145e-09),
    "LOG": (0.666666666666667, 0.39999999999899116, 0.28571428626132206, 0.2222221111158231,
        0.18182890678294225, 0.1533167373862768, 0.14617002530186662),
    "LOG_FIFTH": (0.4, 0.2857142857142937, 0.2222222222165491, 0.1818181833559134, 0.15384594943279864,
        0.13334805650631637, 0.11706212748047623, 0.11723407118951258),
    "SIN": (-0.16666666666666666, 0.008333333333330925, -0.00019841269836727815, 2.755731608860921e-06,
        -2.5051129264304232e-08, 1.5917962080604424e-10),
    "COS": (0.041666666666666664, -0.0013888888888887387, 2.480158729875323e-05, -2.755731726608147e-07,
        2.0876145222723026e-09, -1.1382564659047665e-11),
    "TAN": (0.3333333333333333, 0.13333333333333, 0.05396825396865602, 0.021869488517051228,
        0.008863236003990266, 0.003592120973982864, 0.0014559027945908799, 0.0005895752881090481,
        0.00024122762185855152, 8.998164201069685e-05, 5.559485870835284e-05, -1.1023089850660985e-05,
        3.65245547364449e-05, -1.831969747084649e-05, 8.484358137962299e-06),
    "ATAN": (-0.33333333333333326, 0.19999999999988036, -0.1428571428319439, 0.1111111090359688,
        -0.09090900298006185, 0.0769208933566783, -0.066632627735587, 0.05847896459546152,
        -0.050347023732626686, 0.03784382574060271, -0.017566612550968322),
    "ASIN": (0.16666666666666646, 0.07500000000022013, 0.044642857101406856, 0.030381947493983957,
        0.022372043542467187, 0.017355336763599, 0.013928754249591044, 0.011882242151116213,
        0.007770420034434264, 0.01613284150268222, -0.010913544648173602, 0.028289230919852963),
    "TANH": (-0.3333333333333333, 0.13333333333333314, -0.05396825396822121, 0.021869488534120234,
        -0.008863235464455475, 0.0035921267914443707, -0.0014558193162067527, 0.0005899067269842436,
        -0.0002384787048918633, 9.456681914817582e-05, -3.3743419064980564e-05, 7.888507282086737e-06),
    "SINH": (0.16666666666666666, 0.0083333333333333, 0.00019841269841323517, 2.7557319191673275e-06,
        2.5052117639610436e-08, 1.605768463426449e-10, 7.746011406918237e-13),
    "ERF": (1.1283791670955126, -0.3761263890318352, 0.11283791670944185, -0.02686617064311147,
        0.005223977606118497, -0.0008548325929315675, 0.00012055293576936782, -1.4924712302715437e-05,
        1.6447131580103916e-06, -1.620631382690019e-07, 1.371098069709882e-08, -7.77946905241132e-10),
    # Cody-Waite splits: the high parts have trailing zeros so that k * HI is exact
    "LN2": (0.6931471803691238, 1.9082149292705877e-10),
    "IVLN2": (1.4426950407214463, 1.6751713164886512e-10),
    "LOG2_HIGH_MASK": -(1 << 32),  # hi * IVLN2[0] is exact when hi keeps 21 significant bits
    "LOG_SQRT_HALF_BITS": 0x3FE6A09E667F3BCD,  # just below sqrt(2)/2
    # double-doubles
    "LN2_DD": (0.6931471805599453, 2.3190468138462996e-17),
    "PIO2": (1.5707963267948966, 6.123233995736766e-17),
    "PI": (3.141592653589793, 1.2246467991473532e-16),
    "ATAN_BASES": ((0.4636476090008061, 2.2698777452961687e-17), (0.7853981633974483, 3.061616997868383e-17),
        (0.982793723247329, 1.3903311031230998e-17), (1.5707963267948966, 6.123233995736766e-17)),
    "TWO_OVER_SQRT_PI": (1.1283791670955126, 1.533545961316588e-17),
    "TWO_THIRDS": (0.6666666666666666, 3.700743415417188e-17),
    # ranges
    "EXP_RANGE": (-746.0, 711.0),  # clamp: beyond, exp is 0 or inf (711 leaves room for exp(x)/2)
    "EXP2_RANGE": (-1080.0, 1030.0),
    "EXPM1_LOW": -40.0,  # expm1(x) rounds to -1 below
    "TINY": 2.0 ** -54,  # f(x) rounds to x (expm1, log1p, ...) or to f(0) below
    "SUBNORMAL_SCALE": 54,
    "TANH_POLY_BELOW": 0.5493,  # where 2/(exp(2x)+1) <= 1/2
    "BIG": 2.0 ** 28,  # asinh/acosh switch to log(2x)
    "ERF_ONE_ABOVE": 6.0,  # erf(x) rounds to 1
    "ERFC_ZERO_ABOVE": 27.5,
}

_F32_CONSTANTS = {
    "EXP": (0.5, 0.16666577756404877, 0.04166685417294502, 0.008363144472241402, 0.0013901287456974387),
    "LOG": (0.6666668653488159, 0.3998876214027405, 0.29580608010292053),
    "ATAN": (-0.3333333134651184, 0.19999323785305023, -0.1425681710243225, 0.10670391470193863,
        -0.06221013143658638),
    "TANH": (-0.3333333134651184, 0.13333116471767426, -0.053909871727228165, 0.021312087774276733,
        -0.006615291349589825),
    "ASIN": (0.16666673123836517, 0.07498813420534134, 0.045009907335042953, 0.026499338448047638,
        0.03819635510444641),
    "SINH": (0.1666666716337204, 0.008333339355885983, 0.00019838122534565628, 2.806141765177017e-06),
    "LN2": (0.693145751953125, 1.428606765330187e-06),
    "IVLN2": (1.4423828125, 0.00031222839606925845),
    "LOG2_HIGH_MASK": -(1 << 12),
    "LOG_SQRT_HALF_BITS": 0x3F3504F3,
    "LN2_DD": (0.6931471824645996, -1.9046542121259336e-09),
    "PIO2": (1.5707963705062866, -4.371138828673793e-08),
    "PI": (3.1415927410125732, -8.742277657347586e-08),
    "ATAN_BASES": ((0.46364760398864746, 5.01215868808913e-09), (0.7853981852531433, -2.1855694143368964e-08),
        (0.9827937483787537, -2.5131424052915463e-08), (1.5707963705062866, -4.371138828673793e-08)),
    "EXP_RANGE": (-104.0, 90.0),
    "EXP2_RANGE": (-155.0, 130.0),
    "EXPM1_LOW": -18.0,
    "TINY": 2.0 ** -25,
    "SUBNORMAL_SCALE": 25,
    "TANH_POLY_BELOW": 0.5493,
    "BIG": 2.0 ** 12,
}

FLOAT64 = _Format(F64, 64, 52, _F64_CONSTANTS)
FLOAT32 = _Format(F32, 32, 23, _F32_CONSTANTS)
LOG2E = 1.4426950408889634


@functools.cache
def _scalef() -> bool:
    """Whether ``ldexp`` is one instruction: AVX-512's ``vscalef`` (for scalars and every vector width)."""
    return all(f in host_features().split(",") for f in ("+avx512f", "+avx512vl"))


# --- the emitter: typed arithmetic on scalars or vectors ------------------------------------------
class _Math:
    """IR building for one float type (scalar or vector): constants broadcast, intrinsics typed."""

    def __init__(self, builder: ir.IRBuilder, ty: ir.Type) -> None:
        self.b = builder
        self.ty = ty
        self.lanes = ty.count if isinstance(ty, ir.VectorType) else 0
        scalar = ty.element if self.lanes else ty
        if scalar not in (F32, F64):
            raise TypeError(f"vecmath: expected float or double (or vectors of them), got {ty}")
        self.fmt = FLOAT64 if scalar == F64 else FLOAT32
        self.ity = self._shaped(ir.IntType(self.fmt.bits))

    def _shaped(self, scalar: ir.Type) -> ir.Type:
        return ir.VectorType(scalar, self.lanes) if self.lanes else scalar

    def _splat(self, scalar_constant: ir.Constant) -> ir.Constant:
        return ir.Constant(self.ty if scalar_constant.type == self.fmt.scalar else self.ity,
                           [scalar_constant] * self.lanes) if self.lanes else scalar_constant

    def c(self, value: float) -> ir.Constant:
        """A float constant, rounded to the working type."""
        value = float(np.float32(value)) if self.fmt is FLOAT32 else float(value)
        return self._splat(ir.Constant(self.fmt.scalar, value))

    def ci(self, value: int) -> ir.Constant:
        return self._splat(ir.Constant(ir.IntType(self.fmt.bits), value))

    # arithmetic
    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    def intrinsic(self, name: str, *args):
        """Call the overloaded LLVM intrinsic ``name`` (e.g. ``llvm.fma``) on values of this type."""
        suffix = (f"v{self.lanes}" if self.lanes else "") + ("f64" if self.fmt is FLOAT64 else "f32")
        module = self.b.module
        fn = module.globals.get(f"{name}.{suffix}")
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(self.ty, [self.ty] * len(args)), f"{name}.{suffix}")
        return self.b.call(fn, args)

    def fma(self, a, b, c):
        return self.intrinsic("llvm.fma", a, b, c)

    def abs(self, a):
        return self.intrinsic("llvm.fabs", a)

    def sqrt(self, a):
        return self.intrinsic("llvm.sqrt", a)

    def floor(self, a):
        return self.intrinsic("llvm.floor", a)

    def rint(self, a):
        return self.intrinsic("llvm.roundeven", a)

    def copysign(self, magnitude, sign):
        return self.intrinsic("llvm.copysign", magnitude, sign)

    # comparisons and selection
    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def le(self, a, b):
        return self.b.fcmp_ordered("<=", a, b)

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", a, b)

    def ge(self, a, b):
        return self.b.fcmp_ordered(">=", a, b)

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def select(self, cond, a, b):
        return self.b.select(cond, a, b)

    def clamp(self, x, lo: float, hi: float):
        """x limited to [lo, hi]; NaN stays NaN."""
        return self.select(self.lt(x, self.c(lo)), self.c(lo), self.select(self.gt(x, self.c(hi)), self.c(hi), x))

    def signbit(self, x):
        return self.b.icmp_signed("<", self.bits(x), self.ci(0))

    # bits and integers
    def bits(self, x):
        return self.b.bitcast(x, self.ity)

    def from_bits(self, i):
        return self.b.bitcast(i, self.ty)

    def to_int(self, x):
        return self.b.fptosi(x, self.ity)

    def to_float(self, i):
        return self.b.sitofp(i, self.ty)

    def pow2(self, k):
        """2**k for an integer vector k in the normal exponent range."""
        return self.from_bits(self.b.shl(self.b.add(k, self.ci(self.fmt.bias)), self.ci(self.fmt.mantissa)))

    def ldexp(self, y, k):
        """y * 2**k for integral float k in [-2*bias, 2*bias], rounded once (subnormal or overflow):
        one ``vscalef`` where the host has AVX-512 (``llvm.ldexp``, which the loop vectorizer
        widens), else two multiplies by powers of two built from the exponent's bits (nine
        instructions: a third of a float32 exp's)."""
        if _scalef():
            i32 = ir.VectorType(ir.IntType(32), self.lanes) if self.lanes else ir.IntType(32)
            suffix = f"v{self.lanes}" if self.lanes else ""
            name = f"llvm.ldexp.{suffix}{'f64' if self.fmt is FLOAT64 else 'f32'}.{suffix}i32"
            fn = self.b.module.globals.get(name) or ir.Function(self.b.module, ir.FunctionType(self.ty, [self.ty, i32]),
                                                                name)
            return self.b.call(fn, [y, self.b.fptosi(k, i32)])
        k = self.to_int(k)
        half = self.b.ashr(k, self.ci(1))
        return self.mul(self.mul(y, self.pow2(half)), self.pow2(self.b.sub(k, half)))

    # polynomials and double-double arithmetic
    def poly(self, x, coefficients):
        """Horner: c0 + c1 x + c2 x**2 + ..."""
        result = self.c(coefficients[-1])
        for coefficient in reversed(coefficients[:-1]):
            result = self.fma(result, x, self.c(coefficient))
        return result

    def two_sum(self, a, b):
        """s + e == a + b exactly."""
        s = self.add(a, b)
        bb = self.sub(s, a)
        return s, self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))

    def fast_two_sum(self, a, b):
        """s + e == a + b exactly, for |a| >= |b|."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))

    def two_prod(self, a, b):
        """p + e == a * b exactly."""
        p = self.mul(a, b)
        return p, self.fma(a, b, self.neg(p))

    def table(self, name: str, values: tuple[float, ...], width: int, index) -> list:
        """``width`` consecutive doubles of a constant table at row ``index`` (one gather per column)."""
        module = self.b.module
        table = module.globals.get(name)
        if table is None:
            array_type = ir.ArrayType(F64, len(values))
            table = ir.GlobalVariable(module, array_type, name)
            table.initializer = _table_constant(values)
            table.global_constant = True
            table.linkage = "internal"
        start = self.b.mul(index, self.ci(width))
        zero = ir.Constant(ir.IntType(32), 0)

        def load(position):
            return self.b.load(self.b.gep(table, [zero, position], inbounds=True))

        columns = []
        for column in range(width):
            position = self.b.add(start, self.ci(column))
            if not self.lanes:
                columns.append(load(position))
                continue
            vector = ir.Constant(self.ty, ir.Undefined)
            for lane in range(self.lanes):
                lane_index = ir.Constant(ir.IntType(32), lane)
                element = load(self.b.extract_element(position, lane_index))
                vector = self.b.insert_element(vector, element, lane_index)
            columns.append(vector)
        return columns


# --- exp family --------------------------------------------------------------------------------------
def _exp_core(m: _Math, r_hi, r_lo):
    """exp(r) - 1 for r = r_hi + r_lo, |r| <= ln2/2 + tiny."""
    r = m.add(r_hi, r_lo)
    p = m.mul(m.mul(r, r), m.poly(r, m.fmt.EXP))
    return m.add(r_hi, m.add(p, r_lo))


def _exp_parts(m: _Math, x_hi, x_lo=None):
    """(exp(x) * 2**-k - 1, k) for x = x_hi + x_lo clamped to EXP_RANGE: Cody-Waite by ln 2."""
    ln2_hi, ln2_lo = m.fmt.LN2
    k = m.rint(m.mul(x_hi, m.c(LOG2E)))
    r_hi = m.fma(m.neg(k), m.c(ln2_hi), x_hi)  # exact: k * ln2_hi is exact and r_hi is small
    r_lo = m.mul(m.neg(k), m.c(ln2_lo))
    if x_lo is not None:
        r_lo = m.add(r_lo, x_lo)
    return _exp_core(m, r_hi, r_lo), k


def _exp(m: _Math, x):
    e, k = _exp_parts(m, m.clamp(x, *m.fmt.EXP_RANGE))
    return m.select(m.isnan(x), x, m.ldexp(m.add(m.c(1.0), e), k))


def _exp2(m: _Math, x):
    clamped = m.clamp(x, *m.fmt.EXP2_RANGE)
    k = m.rint(clamped)
    r = m.sub(clamped, k)  # exact
    ln2_hi, ln2_lo = m.fmt.LN2_DD
    t_hi, t_lo = m.two_prod(r, m.c(ln2_hi))
    e = _exp_core(m, t_hi, m.fma(r, m.c(ln2_lo), t_lo))
    return m.select(m.isnan(x), x, m.ldexp(m.add(m.c(1.0), e), k))


def _expm1(m: _Math, x):
    """2**k * (1 + p) - 1 with p = expm1(r) as a double-double; for large k just 2**k * (1 + p)."""
    clamped = m.clamp(x, m.fmt.EXPM1_LOW, m.fmt.EXP_RANGE[1])
    ln2_hi, ln2_lo = m.fmt.LN2
    k = m.rint(m.mul(clamped, m.c(LOG2E)))
    r_hi = m.fma(m.neg(k), m.c(ln2_hi), clamped)
    r_lo = m.mul(m.neg(k), m.c(ln2_lo))
    r = m.add(r_hi, r_lo)
    p = m.mul(m.mul(r, r), m.poly(r, m.fmt.EXP))
    p_hi, p_lo = m.two_sum(r_hi, m.add(p, r_lo))
    small_k_limit = m.fmt.mantissa + 3  # beyond, the -1 is below half an ulp
    two_k = m.pow2(m.to_int(m.select(m.gt(k, m.c(small_k_limit)), m.c(small_k_limit), k)))
    small = m.add(m.fma(two_k, p_hi, m.sub(two_k, m.c(1.0))), m.mul(two_k, p_lo))
    large = m.ldexp(m.add(m.add(m.c(1.0), p_hi), p_lo), k)
    result = m.select(m.gt(k, m.c(small_k_limit)), large, small)
    keep_x = m.b.or_(m.isnan(x), m.lt(m.abs(x), m.c(m.fmt.TINY)))  # +-0, subnormals, NaN
    return m.select(keep_x, x, result)


# --- log family --------------------------------------------------------------------------------------
def _log_reduce(m: _Math, x):
    """(k, f) with x = 2**k * (1 + f), sqrt(2)/2 <= 1 + f < sqrt(2), for positive finite x (f exact)."""
    fmt = m.fmt
    subnormal = m.lt(x, m.c(2.0 ** (1 - fmt.bias)))
    x = m.select(subnormal, m.mul(x, m.c(2.0 ** fmt.SUBNORMAL_SCALE)), x)
    offset = m.b.sub(m.bits(x), m.ci(fmt.LOG_SQRT_HALF_BITS))
    k = m.b.ashr(offset, m.ci(fmt.mantissa))
    exponent_bits = m.b.and_(offset, m.ci(-1 << fmt.mantissa))
    f = m.sub(m.from_bits(m.b.sub(m.bits(x), exponent_bits)), m.c(1.0))
    k = m.sub(m.to_float(k), m.select(subnormal, m.c(fmt.SUBNORMAL_SCALE), m.c(0.0)))
    return k, f


def _log1p_terms(m: _Math, f):
    """(hfsq, s, R) with log(1 + f) = f - hfsq + s * (hfsq + R) (the fdlibm decomposition)."""
    s = m.div(f, m.add(m.c(2.0), f))
    z = m.mul(s, s)
    return m.mul(m.mul(m.c(0.5), f), f), s, m.mul(z, m.poly(z, m.fmt.LOG))


def _log_special(m: _Math, x, result):
    """log-like results for x > 0 finite; -inf at +-0, inf at inf, NaN below 0 and at NaN."""
    special = m.select(m.eq(x, m.c(0.0)), m.c(-np.inf), m.select(m.eq(x, m.c(np.inf)), x, m.c(np.nan)))
    regular = m.b.and_(m.gt(x, m.c(0.0)), m.lt(x, m.c(np.inf)))
    return m.select(regular, result, special)


def _log(m: _Math, x, correction=None):
    """log(x) (+ correction, a tiny additive term, for log1p)."""
    k, f = _log_reduce(m, x)
    hfsq, s, big_r = _log1p_terms(m, f)
    ln2_hi, ln2_lo = m.fmt.LN2
    low = m.mul(k, m.c(ln2_lo))
    if correction is not None:
        low = m.add(low, correction)
    inner = m.sub(m.sub(hfsq, m.add(m.mul(s, m.add(hfsq, big_r)), low)), f)
    return m.sub(m.mul(k, m.c(ln2_hi)), inner)


def _log2(m: _Math, x):
    """fdlibm's e_log2: (f - hfsq) split so that its high part times 1/ln2's high part is exact."""
    k, f = _log_reduce(m, x)
    hfsq, s, big_r = _log1p_terms(m, f)
    ivln2_hi, ivln2_lo = m.fmt.IVLN2
    hi = m.from_bits(m.b.and_(m.bits(m.sub(f, hfsq)), m.ci(m.fmt.LOG2_HIGH_MASK)))
    lo = m.add(m.sub(m.sub(f, hi), hfsq), m.mul(s, m.add(hfsq, big_r)))
    val_hi = m.mul(hi, m.c(ivln2_hi))
    val_lo = m.add(m.mul(m.add(lo, hi), m.c(ivln2_lo)), m.mul(lo, m.c(ivln2_hi)))
    w = m.add(k, val_hi)
    val_lo = m.add(val_lo, m.add(m.sub(k, w), val_hi))
    return _log_special(m, x, m.add(val_lo, w))


def _log1p(m: _Math, x, x_lo=None):
    """log(u) + c/u with u + c = 1 + x (+ x_lo, the low part of a double-double x) exactly."""
    u, c = m.two_sum(m.c(1.0), x)
    if x_lo is not None:
        c = m.add(c, x_lo)
    result = _log(m, u, m.div(c, u))
    result = _log_special(m, u, result)  # u = 0: x = -1; u < 0: x < -1; inf
    keep_x = m.b.or_(m.isnan(x), m.lt(m.abs(x), m.c(m.fmt.TINY)))
    return m.select(keep_x, x, result)


def _log_natural(m: _Math, x):
    return _log_special(m, x, _log(m, x))


# --- hyperbolic functions ---------------------------------------------------------------------------
def _odd_series(m: _Math, x, coefficients):
    """x + x**3 * P(x**2)."""
    z = m.mul(x, x)
    return m.fma(m.mul(x, z), m.poly(z, coefficients), x)


def _tanh_xla_float32(m: _Math, x):
    """float32 tanh as XLA computes it (the reference's rule, ``XLA_TANH_*``): Horner in FMAs."""
    clamped = m.clamp(x, -XLA_TANH_CLAMP, XLA_TANH_CLAMP)
    z = m.mul(clamped, clamped)
    ratio = m.div(m.mul(clamped, m.poly(z, XLA_TANH_P)), m.poly(z, XLA_TANH_Q))
    return m.select(m.lt(m.abs(x), m.c(XLA_TANH_LINEAR)), x, ratio)


def _tanh(m: _Math, x):
    if m.fmt is FLOAT32:
        return _tanh_xla_float32(m, x)
    a = m.abs(x)
    small = _odd_series(m, a, m.fmt.TANH)
    # Above the polynomial's range exp(2|x|) >= 3: exp + 1 loses nothing that expm1 + 2 keeps.
    e = _exp(m, m.add(a, a))
    large = m.sub(m.c(1.0), m.div(m.c(2.0), m.add(e, m.c(1.0))))
    return m.copysign(m.select(m.lt(a, m.c(m.fmt.TANH_POLY_BELOW)), small, large), x)


def _exp_double_double(m: _Math, x):
    """(hi, lo, k): exp(x) = (hi + lo) * 2**k, hi + lo in [0.7, 1.42], for x in EXP_RANGE."""
    e, k = _exp_parts(m, x)
    hi, lo = m.fast_two_sum(m.c(1.0), e)
    return hi, lo, k


def _reciprocal(m: _Math, hi, lo):
    """1 / (hi + lo) as a double-double (one Newton correction)."""
    r = m.div(m.c(1.0), hi)
    error = m.sub(m.fma(m.neg(hi), r, m.c(1.0)), m.mul(lo, r))
    return m.fast_two_sum(r, m.mul(r, error))


def _logistic(m: _Math, x):
    """1 / (1 + e) for x >= 0, e / (1 + e) below, with e = exp(-|x|) and 1 + e as double-doubles;
    in float32 in plain float32 arithmetic: within 2 ulp and 1.6x as fast (sigmoid gates)."""
    if m.fmt is FLOAT32:
        e = _exp(m, m.neg(m.abs(x)))
        d = m.add(m.c(1.0), e)
        return m.select(m.isnan(x), x, m.select(m.ge(x, m.c(0.0)), m.div(m.c(1.0), d), m.div(e, d)))
    hi, lo, k = _exp_double_double(m, m.clamp(m.neg(m.abs(x)), *m.fmt.EXP_RANGE))
    e_hi = m.ldexp(hi, k)
    e_lo = m.mul(lo, e_hi)
    d_hi, d_lo = m.two_sum(m.c(1.0), e_hi)
    d_lo = m.add(d_lo, e_lo)
    r_hi, r_lo = _reciprocal(m, d_hi, d_lo)
    positive = m.add(r_hi, r_lo)
    q = m.mul(e_hi, r_hi)
    remainder = m.add(m.fma(m.neg(q), d_hi, e_hi), m.sub(e_lo, m.mul(q, d_lo)))
    negative = m.fma(remainder, r_hi, q)
    return m.select(m.isnan(x), x, m.select(m.ge(x, m.c(0.0)), positive, negative))


def _exp_plus_minus(m: _Math, a, sign: float):
    """(exp(a) + sign * exp(-a)) / 2 for a >= 0: with exp(a) = E * 2**k (E a double-double),
    it is 2**(k-1) * (E + sign * (1/E) * 2**(-2k)), rounded once."""
    hi, lo, k = _exp_double_double(m, m.clamp(a, 0.0, m.fmt.EXP_RANGE[1]))
    r_hi, r_lo = _reciprocal(m, hi, lo)
    lowest = -(m.fmt.mantissa + 10)  # below, exp(-a) no longer matters
    scale = m.pow2(m.to_int(m.select(m.lt(k, m.c(-lowest / 2)), m.mul(k, m.c(-2.0)), m.c(lowest))))
    inner = m.add(hi, m.add(lo, m.mul(m.c(sign), m.mul(m.add(r_hi, r_lo), scale))))
    return m.select(m.isnan(a), a, m.ldexp(inner, m.sub(k, m.c(1.0))))


def _sinh(m: _Math, x):
    a = m.abs(x)
    large = _exp_plus_minus(m, a, -1.0)
    return m.copysign(m.select(m.lt(a, m.c(1.0)), _odd_series(m, a, m.fmt.SINH), large), x)


def _cosh(m: _Math, x):
    return _exp_plus_minus(m, m.abs(x), 1.0)


def _asinh(m: _Math, x):
    """log1p(|x| + x**2 / (1 + sqrt(1 + x**2))); log(|x|) + ln 2 for huge |x|."""
    a = m.abs(x)
    big = m.ge(a, m.c(m.fmt.BIG))
    z = m.mul(a, a)
    moderate, moderate_lo = m.two_sum(a, m.div(z, m.add(m.c(1.0), m.sqrt(m.add(m.c(1.0), z)))))
    result = _log1p(m, m.select(big, m.sub(a, m.c(1.0)), moderate), m.select(big, m.c(0.0), moderate_lo))
    result = m.add(result, m.select(big, m.c(m.fmt.LN2_DD[0]), m.c(0.0)))
    return m.copysign(result, x)


def _acosh(m: _Math, x):
    """log1p(t + sqrt(2t + t**2)), t = x - 1, near 1; log(2x - 1/(x + sqrt(x**2 - 1))) above 2."""
    t = m.sub(x, m.c(1.0))
    square = m.fma(t, t, m.add(t, t))
    root = m.sqrt(square)
    root_lo = m.div(m.fma(m.neg(root), root, square), m.add(root, root))
    near_one, near_one_lo = m.two_sum(t, root)
    near_one_lo = m.add(near_one_lo, m.select(m.gt(root, m.c(0.0)), root_lo, m.c(0.0)))
    moderate = m.sub(m.sub(m.add(x, x), m.c(1.0)),
                     m.div(m.c(1.0), m.add(x, m.sqrt(m.fma(x, x, m.c(-1.0))))))
    big = m.ge(x, m.c(m.fmt.BIG))
    below_two = m.lt(x, m.c(2.0))
    argument = m.select(below_two, near_one, m.select(big, t, moderate))
    result = _log1p(m, argument, m.select(below_two, near_one_lo, m.c(0.0)))
    result = m.add(result, m.select(big, m.c(m.fmt.LN2_DD[0]), m.c(0.0)))
    return m.select(m.ge(x, m.c(1.0)), result, m.select(m.isnan(x), x, m.c(np.nan)))


def _atanh(m: _Math, x):
    """0.5 * log1p(2a / (1 - a))."""
    a = m.abs(x)
    two_a = m.add(a, a)
    one_minus = m.sub(m.c(1.0), a)
    small, small_lo = m.two_sum(two_a, m.div(m.mul(two_a, a), one_minus))
    below_half = m.lt(a, m.c(0.5))
    argument = m.select(below_half, small, m.div(two_a, one_minus))
    result = _log1p(m, argument, m.select(below_half, small_lo, m.c(0.0)))
    return m.copysign(m.mul(m.c(0.5), result), x)


# --- sin, cos, tan -----------------------------------------------------------------------------------
_TWO_OVER_PI_BITS = 1584
_TWO_OVER_PI = int(  # floor(2/pi * 2**1584): fdlibm's 66 24-bit words
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2e006492eea09d1921cfe1d"
    "eb1cb129a73ee88235f52ebb4484e99c7026b45f7e413991d639835339f49c845f8bbdf9283b1ff897ffde05980fef2f118b"
    "5a0a6d1f6d367ecf27cb09b74f463f669e5fea2d7527bac7ebe5f17b3d0739f78a5292ea6bfb5fb11f8d5d0856033046fc7b"
    "6babf0cfbc209af4361da9e391615ee61b086599855f14a068408dffd8804d73273106061556ca73a8c960e27bc08c6b", 16)
_PH_FIRST_EXPONENT = 990  # biased exponents below are not reduced (|x| < 2**-27 is handled directly)
_PH_SCALED_FROM = 1700  # from here x is scaled by 2**-600 (and the table by 2**600) to keep it normal


@functools.cache
def _payne_hanek_table() -> tuple[float, ...]:
    """Per biased exponent e of x = M * 2**E (M < 2**53, E = e - 1075): the bits of
    F = (2/pi) mod 2**(2-E) in four windows. x * F == x * 2/pi (mod 4) and the first three
    windows hold 50 bits each, aligned so that x times each of them is an exact double-double
    whose fractional part sums exactly (the last window only refines)."""
    rows = []
    for e in range(_PH_FIRST_EXPONENT, 2048):
        exponent = e - 1075
        scale = 600 if e >= _PH_SCALED_FROM else 0
        top = 2 - exponent
        for i in range(4):
            high, low = top - 50 * i, top - 50 * (i + 1) - (10 if i == 3 else 0)
            shift = _TWO_OVER_PI_BITS + low
            chunk = (_TWO_OVER_PI >> shift) & ((1 << (high - low)) - 1)
            rows.append(float(chunk) * 2.0 ** (low + scale))
    return tuple(rows)


# Below MEDIUM, Cody-Waite's reduction (three 33-bit parts of pi/2, whose products by
# n = round(a * 2/pi) < 2**19 are exact) gives y to about 2**-96, as Payne-Hanek's does, at a
# third of its cost. Code that can run again on the arguments it flags (``medium_reduction``)
# reduces with it alone; other code uses Payne-Hanek's for every argument.
MEDIUM = 2.0 ** 19
_PIO2_PARTS = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624871116645580e-21,
               8.47842766036889956997e-32)  # (fdlibm's pio2_1, pio2_2, pio2_3, pio2_3t)
_mode = threading.local()


@contextlib.contextmanager
def medium_reduction(record: Callable[[ir.IRBuilder, ir.Value], None]) -> Iterator[None]:
    """Within: sin, cos and tan of scalars reduce their arguments by Cody-Waite's method only,
    and call ``record(builder, flag)`` with the (i1) flag of a finite argument of at least
    ``MEDIUM``, for which the result is wrong: the caller must then compute it again outside."""
    previous = getattr(_mode, "record", None)
    _mode.record = record
    try:
        yield
    finally:
        _mode.record = previous


def _reduce_pi_over_2(m: _Math, a):
    """(q, y_hi, y_lo): a = (q + 4n) * pi/2 + y, |y| <= pi/4, for finite double a >= 2**-27."""
    record = getattr(_mode, "record", None)
    if record is not None and not m.lanes:
        record(m.b, m.b.and_(m.ge(a, m.c(MEDIUM)), m.lt(a, m.c(np.inf))))
        return _reduce_medium(m, a)
    exponent = m.b.lshr(m.bits(a), m.ci(52))
    first = m.ci(_PH_FIRST_EXPONENT)
    index = m.b.sub(m.b.select(m.b.icmp_signed("<", exponent, first), first, exponent), first)
    a = m.select(m.b.icmp_signed(">=", exponent, m.ci(_PH_SCALED_FROM)), m.mul(a, m.c(2.0 ** -600)), a)
    windows = m.table("ember.vecmath.two_over_pi", _payne_hanek_table(), 4, index)

    def split_integer(v):  # (v - n, n mod 4), n = round(v): both exact
        n = m.rint(v)
        return m.sub(v, n), m.sub(n, m.mul(m.c(4.0), m.floor(m.mul(n, m.c(0.25)))))

    hi, lo = m.two_prod(a, windows[0])
    hi, q = split_integer(hi)
    lo, q_lo = split_integer(lo)
    hi, lo = m.two_sum(hi, lo)  # a multiple of 2**-48 below 1: lo is 0 now
    hi, q_hi = split_integer(hi)
    quadrant = m.add(m.add(q, q_lo), q_hi)
    for window in windows[1:3]:
        term_hi, term_lo = m.two_prod(a, window)
        if window is windows[2]:
            term_lo = m.fma(a, windows[3], term_lo)
        term_hi, q = split_integer(term_hi)
        s, error = m.two_sum(hi, term_hi)
        hi, lo = m.two_sum(s, m.add(m.add(lo, term_lo), error))
        hi, q_hi = split_integer(hi)
        quadrant = m.add(quadrant, m.add(q, q_hi))
    pio2_hi, pio2_lo = m.fmt.PIO2
    y_hi, y_lo = m.two_prod(hi, m.c(pio2_hi))
    y_lo = m.add(y_lo, m.fma(hi, m.c(pio2_lo), m.mul(lo, m.c(pio2_hi))))
    y_hi, y_lo = m.fast_two_sum(y_hi, y_lo)
    quadrant = m.b.and_(m.to_int(quadrant), m.ci(3))
    return quadrant, y_hi, y_lo


def _reduce_medium(m: _Math, a):
    """``_reduce_pi_over_2`` for a < ``MEDIUM``: a - n (p1 + p2 + p3 + tail), the products by the
    33-bit parts exact, summed as a double-double (about 2**-96 relative, near multiples too)."""
    n = m.rint(m.mul(a, m.c(0.636619772367581382433)))
    p1, p2, p3, tail = _PIO2_PARTS
    r = m.fma(m.neg(n), m.c(p1), a)  # (n * p1 is exact, and so is the difference)
    s, e = m.two_sum(r, m.neg(m.mul(n, m.c(p2))))
    s, e3 = m.two_sum(s, m.neg(m.mul(n, m.c(p3))))
    e = m.fma(m.neg(n), m.c(tail), m.add(e, e3))
    y_hi, y_lo = m.fast_two_sum(s, e)
    return m.b.and_(m.to_int(n), m.ci(3)), y_hi, y_lo


def _sin_kernel(m: _Math, y, y_lo):
    """sin(y + y_lo) for |y| <= pi/4: y + (y**3 * SIN(y**2) + y_lo * cos(y))."""
    z = m.mul(y, y)
    tail = m.fma(m.mul(y, z), m.poly(z, m.fmt.SIN), m.mul(y_lo, m.fma(m.c(-0.5), z, m.c(1.0))))
    return m.add(y, tail)


def _cos_kernel(m: _Math, y, y_lo):
    """cos(y + y_lo) for |y| <= pi/4: (1 - z/2) rounded, plus its exact rounding error and the rest."""
    z = m.mul(y, y)
    half_z = m.mul(m.c(0.5), z)
    w = m.sub(m.c(1.0), half_z)
    rest = m.sub(m.mul(m.mul(z, z), m.poly(z, m.fmt.COS)), m.mul(y, y_lo))
    return m.add(w, m.add(m.sub(m.sub(m.c(1.0), w), half_z), rest))


def _trig(m: _Math, x, which: str):
    a = m.abs(x)
    quadrant, y, y_lo = _reduce_pi_over_2(m, a)
    odd = m.b.icmp_unsigned("!=", m.b.and_(quadrant, m.ci(1)), m.ci(0))
    if which == "tan":
        z = m.mul(y, y)
        t0 = m.fma(m.mul(y, z), m.poly(z, m.fmt.TAN), y)
        tail = m.fma(m.mul(y, z), m.poly(z, m.fmt.TAN), m.fma(y_lo, m.mul(t0, t0), y_lo))
        t_hi, t_lo = m.fast_two_sum(y, tail)
        inverse = m.div(m.c(1.0), t_hi)
        error = m.sub(m.fma(m.neg(t_hi), inverse, m.c(1.0)), m.mul(t_lo, inverse))
        cotangent = m.neg(m.fma(inverse, error, inverse))
        result = m.select(odd, cotangent, m.add(t_hi, t_lo))
        result = m.select(m.signbit(x), m.neg(result), result)
        small_result = x
    else:
        sine, cosine = _sin_kernel(m, y, y_lo), _cos_kernel(m, y, y_lo)
        if which == "sin":
            result = m.select(odd, cosine, sine)
            flip = m.b.xor(m.b.icmp_unsigned(">=", quadrant, m.ci(2)), m.signbit(x))
            small_result = x
        else:
            result = m.select(odd, sine, cosine)
            flip = m.b.icmp_unsigned("==", m.b.and_(m.b.add(quadrant, m.ci(1)), m.ci(2)), m.ci(2))
            small_result = m.c(1.0)
        result = m.select(flip, m.neg(result), result)
    result = m.select(m.lt(a, m.c(2.0 ** -27)), small_result, result)
    return m.select(m.lt(a, m.c(np.inf)), result, m.select(m.isnan(x), x, m.c(np.nan)))


def _sincos(m: _Math, x):
    """(sin x, cos x) from one argument reduction: the bits of ``_trig``'s sin and cos."""
    a = m.abs(x)
    quadrant, y, y_lo = _reduce_pi_over_2(m, a)
    odd = m.b.icmp_unsigned("!=", m.b.and_(quadrant, m.ci(1)), m.ci(0))
    sine, cosine = _sin_kernel(m, y, y_lo), _cos_kernel(m, y, y_lo)
    s = m.select(odd, cosine, sine)
    s = m.select(m.b.xor(m.b.icmp_unsigned(">=", quadrant, m.ci(2)), m.signbit(x)), m.neg(s), s)
    c = m.select(odd, sine, cosine)
    c = m.select(m.b.icmp_unsigned("==", m.b.and_(m.b.add(quadrant, m.ci(1)), m.ci(2)), m.ci(2)), m.neg(c), c)
    tiny, finite = m.lt(a, m.c(2.0 ** -27)), m.lt(a, m.c(np.inf))
    nan = m.select(m.isnan(x), x, m.c(np.nan))
    s = m.select(finite, m.select(tiny, x, s), nan)
    c = m.select(finite, m.select(tiny, m.c(1.0), c), nan)
    return s, c


# --- inverse trigonometric functions ------------------------------------------------------------------
def _atan_nonnegative(m: _Math, a):
    """atan(a) for a >= 0 (NaN for NaN): fdlibm's reduction to |t| <= 7/16 around 0, 1/2, 1, 3/2, inf."""
    bases = m.fmt.ATAN_BASES
    one, two, half = m.c(1.0), m.c(2.0), m.c(1.5)
    cases = [  # (upper bound, numerator, denominator, base): t = numerator / denominator
        (7 / 16, a, one, (0.0, 0.0)),
        (11 / 16, m.fma(two, a, m.c(-1.0)), m.add(two, a), bases[0]),
        (19 / 16, m.sub(a, one), m.add(a, one), bases[1]),
        (39 / 16, m.sub(a, half), m.fma(half, a, one), bases[2]),
    ]
    numerator, denominator, base_hi, base_lo = m.c(-1.0), a, m.c(bases[3][0]), m.c(bases[3][1])
    for bound, case_numerator, case_denominator, (hi, lo) in reversed(cases):
        below = m.lt(a, m.c(bound))
        numerator = m.select(below, case_numerator, numerator)
        denominator = m.select(below, case_denominator, denominator)
        base_hi = m.select(below, m.c(hi), base_hi)
        base_lo = m.select(below, m.c(lo), base_lo)
    t = m.div(numerator, denominator)
    z = m.mul(t, t)
    w = m.mul(m.mul(t, z), m.poly(z, m.fmt.ATAN))  # atan(t) - t
    return m.add(base_hi, m.add(t, m.add(w, base_lo)))


def _atan(m: _Math, x):
    return m.copysign(_atan_nonnegative(m, m.abs(x)), x)


def _atan2(m: _Math, y, x):
    ax, ay = m.abs(x), m.abs(y)
    inf, zero = m.c(np.inf), m.c(0.0)
    both_inf = m.b.and_(m.eq(ax, inf), m.eq(ay, inf))
    both_zero = m.b.and_(m.eq(ax, zero), m.eq(ay, zero))
    t = m.select(both_inf, m.c(1.0), m.select(both_zero, zero, m.div(ay, ax)))
    angle = _atan_nonnegative(m, t)
    pi_hi, pi_lo = m.fmt.PI
    angle = m.select(m.signbit(x), m.sub(m.c(pi_hi), m.sub(angle, m.c(pi_lo))), angle)
    return m.select(m.b.or_(m.isnan(x), m.isnan(y)), m.add(x, y), m.copysign(angle, y))


def _asin_acos(m: _Math, x, which: str):
    """asin(x) = x + x**3 P(x**2) for |x| < 1/2; beyond, through s = sqrt((1 - |x|)/2):
    asin(|x|) = pi/2 - 2 asin(s), acos(x) = 2 asin(s) or pi - 2 asin(s), s as a double-double."""
    a = m.abs(x)
    small = m.lt(a, m.c(0.5))
    z = m.select(small, m.mul(a, a), m.mul(m.sub(m.c(1.0), a), m.c(0.5)))
    s = m.sqrt(z)
    s_lo = m.select(m.gt(z, m.c(0.0)), m.div(m.fma(m.neg(s), s, z), m.add(s, s)), m.c(0.0))
    r = m.mul(z, m.poly(z, m.fmt.ASIN))
    pio2_hi, pio2_lo = m.fmt.PIO2
    pio4_hi = pio2_hi / 2
    w = m.fma(s, r, s_lo)  # asin(s) - s_hi
    if which == "asin":
        small_result = m.fma(a, r, a)
        two_w = m.add(w, w)
        large = m.add(m.c(pio4_hi), m.sub(m.sub(m.c(pio4_hi), m.add(s, s)), m.sub(two_w, m.c(pio2_lo))))
        return m.copysign(m.select(small, small_result, large), x)
    small_result = m.sub(m.c(pio2_hi), m.sub(x, m.sub(m.c(pio2_lo), m.mul(x, r))))
    positive = m.mul(m.c(2.0), m.add(s, w))
    negative = m.mul(m.c(2.0), m.sub(m.c(pio2_hi), m.add(s, m.sub(w, m.c(pio2_lo)))))
    return m.select(small, small_result, m.select(m.signbit(x), negative, positive))


# --- erf, erfc -----------------------------------------------------------------------------------------
def _erf_small(m: _Math, x):
    """erf(x) for |x| <= 1 as (x * C_hi, x * (C_lo + z * ERF'(z))) with C = 2/sqrt(pi)."""
    c_hi, c_lo = m.fmt.TWO_OVER_SQRT_PI
    z = m.mul(x, x)
    tail = m.mul(x, m.fma(z, m.poly(z, m.fmt.ERF[1:]), m.c(c_lo)))
    return c_hi, tail


def _erfc_large(m: _Math, a):
    """erfc(a) for 0.5 <= a <= 27.5: exp(-a**2) * erfcx(a), rounded once. By pieces, erfcx is
    h or h/a, h = c + v * P(v) a double-double; the piece's coefficients are chosen by select, so
    there is one polynomial evaluation. a**2 and 1/a are double-doubles."""
    sq_hi, sq_lo = m.two_prod(a, a)
    e, k = _exp_parts(m, m.neg(sq_hi), m.neg(sq_lo))
    inverse = m.div(m.c(1.0), a)
    inverse_lo = m.mul(m.fma(m.neg(a), inverse, m.c(1.0)), inverse)  # 1/a - inverse
    chosen = None
    for upper, center, in_x, (hi, lo), piece in reversed(_ERFC_PIECES):
        if in_x:  # a - center is exact (Sterbenz)
            variable, variable_lo = m.sub(a, m.c(center)), m.c(0.0)
        else:
            variable, variable_lo = m.two_sum(inverse, m.c(-center))
            variable_lo = m.add(variable_lo, inverse_lo)
        own = [variable, variable_lo, m.c(hi), m.c(lo)] + [m.c(c) for c in piece]
        if chosen is None:
            chosen = own
            continue
        below = m.lt(a, m.c(upper))
        chosen = [m.select(below, mine, other) for mine, other in zip(own, chosen)]
    assert chosen is not None  # (_ERFC_PIECES is not empty)
    variable, variable_lo, c_hi, c_lo, *coefficients = chosen
    polynomial = coefficients[-1]
    for coefficient in reversed(coefficients[:-1]):
        polynomial = m.fma(polynomial, variable, coefficient)
    h_hi, h_lo = m.fast_two_sum(c_hi, m.fma(variable, polynomial, m.fma(variable_lo, coefficients[0], c_lo)))
    in_x = m.lt(a, m.c(max(piece[0] for piece in _ERFC_PIECES if piece[2])))
    g_hi, g_lo = m.two_prod(h_hi, m.select(in_x, m.c(1.0), inverse))  # erfcx = h or h / x
    g_lo = m.add(g_lo, m.select(in_x, h_lo, m.fma(h_lo, inverse, m.mul(h_hi, inverse_lo))))
    return m.ldexp(m.add(g_hi, m.fma(e, g_hi, g_lo)), k)  # (1 + e) * (g_hi + g_lo)


def _erf(m: _Math, x):
    a = m.abs(x)
    c_hi, tail = _erf_small(m, x)
    small = m.fma(x, m.c(c_hi), tail)
    large = m.copysign(m.sub(m.c(1.0), _erfc_large(m, m.clamp(a, 1.0, m.fmt.ERF_ONE_ABOVE))), x)
    return m.select(m.lt(a, m.c(1.0)), small, large)


def _erfc(m: _Math, x):
    a = m.abs(x)
    c_hi, tail = _erf_small(m, x)
    small = m.sub(m.fma(m.neg(x), m.c(c_hi), m.c(1.0)), tail)
    large = _erfc_large(m, m.clamp(a, 0.5, m.fmt.ERFC_ZERO_ABOVE))
    large = m.select(m.gt(a, m.c(m.fmt.ERFC_ZERO_ABOVE)), m.c(0.0), large)
    large = m.select(m.signbit(x), m.sub(m.c(2.0), large), large)
    return m.select(m.lt(a, m.c(0.5)), small, m.select(m.isnan(x), x, large))


# erfcx by pieces of [0.5, 27.5]: (upper bound, center, in_x, constant term as a double-double, the
# other coefficients). in_x: erfcx(x) in x - center; else x * erfcx(x) (nearly constant) in 1/x - center.
_ERFC_PIECES = (
    (1.0, 0.75, True, (0.5069376502931449, -5.3359919288220384e-17),
     (-0.3679726916557954, 0.2309581315512983, -0.1298360619948811, 0.06679054252756658,
      -0.03189726203968327, 0.01428919866621168, -0.006051532297131299, 0.0024376373433974475,
      -0.0009385120625513753, 0.00034675125565273755, -0.00012335442077602822, 4.2361281472850585e-05,
      -1.4086530685726424e-05, 4.653651507188787e-06, -1.4508044276424933e-06)),
    (2.0, 1.5, True, (0.3215854164543175, 1.1022271757432541e-17),
     (-0.16362291773256007, 0.07615103985548048, -0.03293090529956006, 0.013377340952806755,
     -0.005145957548063727, 0.0018861348853687202, -0.0006619300657923228, 0.00022330981319743846,
     -7.265891531764139e-05, 2.286543023407868e-05, -6.9751402836051805e-06, 2.0617075820199572e-06,
     -5.950889518905278e-07, 1.803607846926074e-07, -4.8912539433337905e-08)),
    (4.0, 0.375, False, (0.530860349316975, 3.1588219421202504e-17),
     (-0.1515855295741559, -0.09203998771158746, 0.17726803412603834, -0.11628192691936654,
      -0.03780807552344545, 0.1962423353075561, -0.25568449448203, 0.1361152848468608,
      0.17028442519429365, -0.555009092915405, 0.781089475966419, -0.5404058535551385,
      -0.4280628510581126, 2.2635490847227504, -3.6470201346355804)),
    (8.0, 0.1875, False, (0.5547541131463941, 1.3168880246676417e-17),
     (-0.09589699130081208, -0.2088425568026108, 0.21386570038898212, 0.08113329245197504,
      -0.4222633639444112, 0.34416958245561236, 0.4781770030679847, -1.5786626337445662,
      1.2388496509547906, 2.63017723107391, -9.03395846142076, 8.790282231559553,
      15.359714061290962, -67.46637699798521, 84.90113450900772)),
    (np.inf, 0.08068181818181819, False, (0.5623709167883728, 1.9729767699103947e-18),
     (-0.04465196332444168, -0.26621305761078523, 0.12611484639044293, 0.3299419233893029,
      -0.4160982216573716, -0.5107578480406751, 1.5487744107677346, 0.3373959440871845,
      -6.013921659705123, 4.9552720172486815, 21.45968075118234, -51.181718101965664,
      -45.76156817781846, 344.45149000386147, -227.07560385229223)),
)


# --- pow ------------------------------------------------------------------------------------------------
def _log_double_double(m: _Math, a):
    """log(a) as a double-double (relative error ~2**-64), positive finite a."""
    k, f = _log_reduce(m, a)
    d_hi, d_lo = m.fast_two_sum(m.c(2.0), f)
    s = m.div(f, d_hi)
    s_lo = m.div(m.sub(m.fma(m.neg(s), d_hi, f), m.mul(s, d_lo)), d_hi)
    z_hi, z_lo = m.two_prod(s, s)
    z_lo = m.fma(m.add(s, s), s_lo, z_lo)
    cube_hi, cube_lo = m.two_prod(s, z_hi)
    cube_lo = m.fma(s, z_lo, m.fma(s_lo, z_hi, cube_lo))
    third_hi, third_lo = m.fmt.TWO_THIRDS
    t3_hi, t3_lo = m.two_prod(m.c(third_hi), cube_hi)
    t3_lo = m.fma(m.c(third_hi), cube_lo, m.fma(m.c(third_lo), cube_hi, t3_lo))
    fifth = m.mul(m.mul(cube_hi, z_hi), m.poly(z_hi, m.fmt.LOG_FIFTH))
    a_hi, a_lo = m.fast_two_sum(m.add(s, s), t3_hi)
    a_lo = m.add(a_lo, m.add(m.add(s_lo, s_lo), m.add(t3_lo, fifth)))
    ln2_hi, ln2_lo = m.fmt.LN2
    l_hi, l_lo = m.two_sum(m.mul(k, m.c(ln2_hi)), a_hi)
    l_lo = m.add(l_lo, m.fma(k, m.c(ln2_lo), a_lo))
    return m.fast_two_sum(l_hi, l_lo)


def log_double_double(m: _Math, a):
    """``log(a)`` as a double-double ``(hi, lo)`` for positive finite double ``a`` (for complex pow)."""
    return _log_double_double(m, a)


def _is_integer(m: _Math, v):
    return m.eq(m.floor(v), v)


def _pow(m: _Math, x, y):
    """exp(y * log|x|) in double-double, then C99's special cases by select."""
    one, zero, inf = m.c(1.0), m.c(0.0), m.c(np.inf)
    ax = m.abs(x)
    regular_x = m.b.and_(m.gt(ax, zero), m.lt(ax, inf))
    l_hi, l_lo = _log_double_double(m, m.select(regular_x, ax, one))
    finite_y = m.select(m.lt(m.abs(y), inf), y, zero)
    p_hi, p_lo = m.two_prod(finite_y, l_hi)
    p_lo = m.fma(finite_y, l_lo, p_lo)
    low, high = m.fmt.EXP_RANGE
    overflowing = m.b.or_(m.lt(p_hi, m.c(low)), m.gt(p_hi, m.c(high)))
    p_lo = m.select(overflowing, zero, p_lo)
    e, k = _exp_parts(m, m.clamp(p_hi, low, high), p_lo)
    magnitude = m.ldexp(m.add(one, e), k)

    y_integer = _is_integer(m, y)  # false for inf and NaN
    y_odd = m.b.and_(y_integer, m.b.not_(_is_integer(m, m.mul(y, m.c(0.5)))))
    y_negative = m.lt(y, zero)
    # |x| == 0 or inf: 0 or inf depending on the sign of y
    magnitude = m.select(m.eq(ax, zero), m.select(y_negative, inf, zero), magnitude)
    magnitude = m.select(m.eq(ax, inf), m.select(y_negative, zero, inf), magnitude)
    negate = m.b.and_(m.signbit(x), y_odd)
    result = m.select(negate, m.neg(magnitude), magnitude)
    # finite x < 0 with a non-integer finite y
    negative_x = m.b.and_(m.lt(x, zero), m.gt(x, m.neg(inf)))
    invalid = m.b.and_(negative_x, m.b.and_(m.lt(m.abs(y), inf), m.b.not_(y_integer)))
    result = m.select(invalid, m.c(np.nan), result)
    # y = +-inf: 1 at |x| = 1, else 0 or inf
    infinite_power = m.select(m.eq(ax, one), one, m.select(m.b.xor(m.lt(ax, one), y_negative), zero, inf))
    result = m.select(m.eq(m.abs(y), inf), infinite_power, result)
    result = m.select(m.b.or_(m.isnan(x), m.isnan(y)), m.add(x, y), result)
    return m.select(m.b.or_(m.eq(y, zero), m.eq(x, one)), one, result)


# --- roots -----------------------------------------------------------------------------------------------
_CBRT = (1.87595182427177009643, -1.88497979543377169875, 1.621429720105354466140,
         -0.758397934778766047437, 0.145996192886612446982)


def _cbrt(m: _Math, x):
    """fdlibm's s_cbrt: exponent / 3 by integer division, a polynomial to 23 bits, one Newton step."""
    a = m.abs(x)
    subnormal = m.lt(a, m.c(2.0 ** -1022))
    scaled = m.select(subnormal, m.mul(a, m.c(2.0 ** 54)), a)
    high = m.b.udiv(m.b.lshr(m.bits(scaled), m.ci(32)), m.ci(3))
    high = m.b.add(high, m.b.select(subnormal, m.ci(696219795), m.ci(715094163)))
    t = m.from_bits(m.b.shl(high, m.ci(32)))
    r = m.mul(m.mul(t, t), m.div(t, a))
    p0, p1, p2, p3, p4 = (m.c(c) for c in _CBRT)
    t = m.mul(t, m.add(m.fma(r, m.fma(r, p2, p1), p0), m.mul(m.mul(m.mul(r, r), r), m.fma(r, p4, p3))))
    t = m.from_bits(m.b.and_(m.b.add(m.bits(t), m.ci(0x80000000)), m.ci(-(1 << 30))))
    s = m.mul(t, t)
    r = m.div(a, s)
    r = m.div(m.sub(r, t), m.add(m.add(t, t), r))
    t = m.fma(t, r, t)
    special = m.b.or_(m.eq(a, m.c(0.0)), m.b.not_(m.lt(a, m.c(np.inf))))
    return m.select(special, x, m.copysign(t, x))


def _rsqrt(m: _Math, x):
    return m.div(m.c(1.0), m.sqrt(x))


# --- rounding, min/max -------------------------------------------------------------------------------
def _round_half_away(m: _Math, x):
    """trunc(x) + copysign(|x - trunc(x)| >= 1/2, x): exact, no libm call."""
    t = m.intrinsic("llvm.trunc", x)
    away = m.ge(m.abs(m.sub(x, t)), m.c(0.5))
    return m.add(t, m.copysign(m.select(away, m.c(1.0), m.c(0.0)), x))


def _maximum(m: _Math, x, y):
    """IEEE 754-2019 maximum, as in JAX/XLA: NaN if either is NaN, and +0 above -0."""
    return m.intrinsic("llvm.maximum", x, y)


def _minimum(m: _Math, x, y):
    return m.intrinsic("llvm.minimum", x, y)


# --- dispatch ------------------------------------------------------------------------------------------
_UNARY = {
    "exp": _exp, "exp2": _exp2, "expm1": _expm1,
    "log": _log_natural, "log2": _log2, "log1p": _log1p,
    "tanh": _tanh, "logistic": _logistic, "sinh": _sinh, "cosh": _cosh,
    "asinh": _asinh, "acosh": _acosh, "atanh": _atanh,
    "sin": lambda m, x: _trig(m, x, "sin"), "cos": lambda m, x: _trig(m, x, "cos"),
    "tan": lambda m, x: _trig(m, x, "tan"),
    "atan": _atan, "asin": lambda m, x: _asin_acos(m, x, "asin"), "acos": lambda m, x: _asin_acos(m, x, "acos"),
    "erf": _erf, "erfc": _erfc,
    "sqrt": lambda m, x: m.sqrt(x), "rsqrt": _rsqrt, "cbrt": _cbrt,
    "floor": lambda m, x: m.floor(x), "ceil": lambda m, x: m.intrinsic("llvm.ceil", x),
    "round": _round_half_away, "round_even": lambda m, x: m.rint(x), "abs": lambda m, x: m.abs(x),
}
_BINARY = {"atan2": _atan2, "pow": _pow, "max": _maximum, "min": _minimum}

SUPPORTED_UNARY = frozenset(_UNARY)
SUPPORTED_BINARY = frozenset(_BINARY)

# float32 functions computed in float64 (and rounded once): the others have float32 algorithms
FLOAT32_VIA_FLOAT64 = frozenset({"sin", "cos", "tan", "erf", "erfc", "pow", "cbrt"})


def _widened(builder: ir.IRBuilder, name: str, args: tuple) -> tuple[_Math, tuple, ir.Type | None]:
    """The emitter to compute ``name`` with; float32 arguments are widened if the function needs it."""
    ty = args[0].type
    m = _Math(builder, ty)
    if m.fmt is FLOAT32 and name in FLOAT32_VIA_FLOAT64:
        wide = ir.VectorType(F64, m.lanes) if m.lanes else F64
        return _Math(builder, wide), tuple(builder.fpext(a, wide) for a in args), ty
    return m, args, None


def emit_unary(builder: ir.IRBuilder, name: str, x: ir.Value) -> ir.Value:
    """Emit ``name(x)`` inline at the builder's position; x is float/double or a vector of them."""
    if name not in _UNARY:
        raise ValueError(f"vecmath: no unary function {name!r}; supported: {sorted(SUPPORTED_UNARY)}")
    m, (x,), narrow = _widened(builder, name, (x,))
    result = _UNARY[name](m, x)
    return builder.fptrunc(result, narrow) if narrow is not None else result


def emit_sincos(builder: ir.IRBuilder, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``(sin(x), cos(x))`` with one argument reduction (as ``emit_unary``'s sin and cos, bit for bit)."""
    m, (x,), narrow = _widened(builder, "sin", (x,))
    s, c = _sincos(m, x)
    return (builder.fptrunc(s, narrow), builder.fptrunc(c, narrow)) if narrow is not None else (s, c)


Math = _Math  # the typed IR emitter, for code that composes these functions (complex math)


def emit_binary(builder: ir.IRBuilder, name: str, x: ir.Value, y: ir.Value) -> ir.Value:
    """Emit ``name(x, y)`` inline, arguments in NumPy's order: ``atan2(x, y)`` is ``np.arctan2(x, y)``."""
    if name not in _BINARY:
        raise ValueError(f"vecmath: no binary function {name!r}; supported: {sorted(SUPPORTED_BINARY)}")
    if x.type != y.type:
        raise TypeError(f"vecmath: {name} operands differ in type: {x.type} and {y.type}")
    m, (x, y), narrow = _widened(builder, name, (x, y))
    result = _BINARY[name](m, x, y)
    return builder.fptrunc(result, narrow) if narrow is not None else result


@functools.lru_cache(maxsize=None)
def _table_constant(values: tuple[float, ...]) -> ir.FormattedConstant:
    """A table's initializer, formatted once: llvmlite formats each element anew every time a
    module is printed, which for the larger tables cost more than generating the kernel."""
    array_type = ir.ArrayType(F64, len(values))
    # LLVM's hexadecimal form of each double (its bits), as llvmlite writes it, written here at
    # once: llvmlite's element-by-element formatting of the sine's 4232-entry table took 20 ms of
    # the first program that calls a sine.
    digits = np.asarray(values, dtype=">f8").tobytes().hex().upper()  # (big-endian: the bits in order)
    elements = ", ".join(["double 0x" + digits[i:i + 16] for i in range(0, len(digits), 16)])
    return ir.FormattedConstant(array_type, f"[{elements}]")
