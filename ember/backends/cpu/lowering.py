"""Scalar LLVM lowerings of elementwise primitives, with the reference backend's semantics.

Values live in registers as: bool -> i1, (u)intN -> iN, float16 / bfloat16 /
float32 -> float, float64 -> double, complex64 / complex128 -> ``{float, float}`` /
``{double, double}`` (the real then the imaginary part, as in memory: LLVM's
scalar passes split the pair into two registers, so loops over interleaved
complex buffers still vectorize). Half-precision results are rounded to
their type after every operation (``round_to``), as the reference computes
each operation in float32 and rounds once. Transcendental math comes inline
from ``vecmath`` (so loops stay vectorizable); a primitive whose math is not
available there is not lowered and the fusion pass leaves it to the
reference interpreter.

``lower_rules[p](emitter, in_dtypes, out_dtype, *values, **params)`` returns
the result value; ``emitter`` gives the builder and the module's intrinsics.

The IR helpers that several generators share live here too: ``memcpy``, ``Loops``
(run-time loops for the product, the FFT and the LAPACK calls) and ``transposed``
(a tile transposed in registers, for the FFT, the product's packing and LAPACK's copies).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np
from llvmlite import ir

from ember import dtypes
from ember.backends.cpu import complex_math, vecmath  # the inline vector math library (exp, log, tanh, ...)
from ember.core.primitive import Primitive, RuleTable
from ember.core.traits import TRANSCENDENTAL
from ember.lax import elementwise as ew
from ember.lax.parallel import sharding_constraint_p
from ember.lax.stop_gradient import stop_gradient_p

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
HALF = (dtypes.float16, dtypes.bfloat16)


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or dt == dtypes.bfloat16


def is_signed(dt: np.dtype) -> bool:
    return dt.kind == "i"


def is_complex(dt: np.dtype) -> bool:
    return dt.kind == "c"


def complex_type(part: ir.Type) -> ir.LiteralStructType:
    """The register (and memory) type of a complex value whose parts are ``part``."""
    return ir.LiteralStructType([part, part])


def memcpy(module: ir.Module) -> ir.Function:
    """LLVM's memcpy intrinsic (dst, src, bytes, volatile), declared in ``module`` once."""
    i8p = I8.as_pointer()
    return module.globals.get("llvm.memcpy.p0.p0.i64") or ir.Function(
        module, ir.FunctionType(ir.VoidType(), [i8p, i8p, I64, I1]), "llvm.memcpy.p0.p0.i64")


def counted_loop(fn: ir.Function, b: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: int | ir.Value,
                 body: Callable[[ir.Value], None]) -> None:
    """for (i = start; i < stop; i += step) body(i), emitted at ``b`` into ``fn`` (``Loops.loop``, and
    code that emits into a function it did not start: a native loop's window updates)."""
    before = b.block
    header, inner, done = (fn.append_basic_block(n) for n in ("loop", "body", "done"))
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64)
    i.add_incoming(start, before)
    b.cbranch(b.icmp_signed("<", i, stop), inner, done)
    b.position_at_end(inner)
    body(i)
    i.add_incoming(b.add(i, ir.Constant(I64, step) if isinstance(step, int) else step), b.block)
    b.branch(header)
    b.position_at_end(done)


class Loops:
    """Loops of run-time bounds and branches over i64, emitted through one movable builder (the
    native product, the FFT, the LAPACK calls' copies)."""

    def __init__(self, fn: ir.Function) -> None:
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))

    def loop(self, start: ir.Value, stop: ir.Value, step: int | ir.Value, body: Callable[[ir.Value], None]) -> None:
        """for (i = start; i < stop; i += step) body(i)."""
        counted_loop(self.fn, self.b, start, stop, step, body)

    def min(self, x: ir.Value, y: ir.Value) -> ir.Value:
        return self.b.select(self.b.icmp_signed("<", x, y), x, y)

    def if_then(self, condition: ir.Value, body: Callable[[], None]) -> None:
        then, done = self.fn.append_basic_block("then"), self.fn.append_basic_block("endif")
        self.b.cbranch(condition, then, done)
        self.b.position_at_end(then)
        body()
        self.b.branch(done)
        self.b.position_at_end(done)


def transposed(b: ir.IRBuilder, vectors: list[ir.Value], itemsize: int) -> list[ir.Value]:
    """The square tile whose rows are ``vectors`` (``len(vectors)`` lanes of ``itemsize`` bytes
    each), transposed in registers: vector r, lane c -> vector c, lane r, by the shuffles of
    ``transpose_network``."""
    lanes = len(vectors)
    stages, order = transpose_network(lanes, itemsize)
    i32v = ir.VectorType(I32, lanes)
    v = list(vectors)
    for distance, low, high in stages:
        low, high = ir.Constant(i32v, low), ir.Constant(i32v, high)
        for i in range(lanes):
            if not i & distance:
                j = i | distance
                v[i], v[j] = b.shuffle_vector(v[i], v[j], low), b.shuffle_vector(v[i], v[j], high)
    out: list[ir.Value] = [v[0]] * lanes
    for i, k in enumerate(order):
        out[k] = v[i]
    return out


@functools.cache
def transpose_network(lanes: int, itemsize: int) -> tuple[list, list]:
    """The stages of a lanes x lanes transpose: (distance, low mask, high mask) each, applied to the
    pairs of vectors (i, i + distance), and the column that each resulting vector holds. As x86's
    transposes do it (Intel's optimization manual): interleaving elements, then pairs, within each
    128-bit lane (``unpcklps`` / ``unpckhps``, ``unpcklpd`` / ``unpckhpd``), then the 128-bit lanes
    (``vperm2f128``; ``vshuff32x4`` twice on 512-bit vectors): each stage one single-instruction
    shuffle a vector on any x86 core with AVX2, where swapping blocks of each size (the plain
    transpose) needs general shuffles: ``vpermt2ps`` with AVX-512, two instructions without (the
    function compiled for znver3 has 62 shuffles against 78). The same time on this AVX-512 host.
    Checked here by running it on indices; where it does not transpose (no such case is known) the
    block-swapping one is used."""
    per_lane = max(16 // itemsize, 1)  # elements per 128 bits

    def interleave(width: int) -> tuple[list, list]:
        low: list[int] = []
        high: list[int] = []
        for base in range(0, lanes, per_lane):
            for out, start in ((low, base), (high, base + per_lane // 2)):
                for block in range(0, per_lane // 2, width):
                    out += [start + block + t for t in range(width)] + [lanes + start + block + t for t in range(width)]
        return low, high

    def by_lanes() -> tuple[list, list]:
        count = lanes // per_lane
        picks = ([(0, 0), (1, 0)], [(0, 1), (1, 1)]) if count == 2 else \
            ([(0, 0), (0, 2), (1, 0), (1, 2)], [(0, 1), (0, 3), (1, 1), (1, 3)])
        low, high = ([source * lanes + lane * per_lane + t for source, lane in pick for t in range(per_lane)]
                     for pick in picks)
        return low, high

    shapes, width = [], 1
    while width < per_lane:
        shapes.append(interleave(width))
        width *= 2
    if lanes // per_lane == 2:
        shapes.append(by_lanes())
    elif lanes // per_lane == 4:
        shapes += [by_lanes(), by_lanes()]
    stages = [(1 << k, *shape) for k, shape in enumerate(shapes)]
    matrix = np.arange(lanes * lanes).reshape(lanes, lanes)
    rows = [row.copy() for row in matrix]
    for distance, low, high in stages:
        for i in range(lanes):
            if not i & distance:
                both = np.concatenate([rows[i], rows[i | distance]])
                rows[i], rows[i | distance] = both[low], both[high]
    columns = {tuple(column): c for c, column in enumerate(matrix.T)}
    if len(stages) == lanes.bit_length() - 1 and all(tuple(row) in columns for row in rows):
        return stages, [columns[tuple(row)] for row in rows]
    stages, block = [], lanes // 2  # swap the off-diagonal blocks of each size
    while block:
        stages.append((block, [x if not x & block else lanes + x - block for x in range(lanes)],
                       [x + block if not x & block else lanes + x for x in range(lanes)]))
        block //= 2
    return stages, list(range(lanes))


def register_type(dt: np.dtype) -> ir.Type:
    """The type a value of ``dt`` has in registers."""
    if dt == dtypes.bool_:
        return I1
    if is_complex(dt):
        return complex_type(F64 if dt == dtypes.complex128 else F32)
    if dt == dtypes.float64:
        return F64
    if is_float(dt):
        return F32
    return ir.IntType(dt.itemsize * 8)


def storage_type(dt: np.dtype) -> ir.Type:
    """The type of one element of ``dt`` in memory."""
    if dt == dtypes.bool_:
        return I8
    if dt == dtypes.float16:
        return F16
    if dt == dtypes.bfloat16:
        return I16
    return register_type(dt)


def const(dt: np.dtype, value: Any) -> ir.Constant:
    """A register constant of ``dt``."""
    ty = register_type(dt)
    if is_complex(dt):
        value = complex(value)
        return ir.Constant(ty, [ir.Constant(ty.elements[0], value.real), ir.Constant(ty.elements[0], value.imag)])
    if is_float(dt):
        return ir.Constant(ty, float(value))
    if dt == dtypes.bool_:
        return ir.Constant(ty, int(bool(value)))
    bits = dt.itemsize * 8
    return ir.Constant(ty, int(value) & ((1 << bits) - 1))


def load(b: ir.IRBuilder, ptr: ir.Value, dt: np.dtype) -> ir.Value:
    if is_complex(dt):  # part by part: two scalar loads the vectorizer sees as an interleaved group
        zero = ir.Constant(I32, 0)
        parts = [b.load(b.gep(ptr, [zero, ir.Constant(I32, k)])) for k in (0, 1)]
        return pack(b, *parts)
    raw = b.load(ptr)
    if dt == dtypes.bool_:
        return b.icmp_unsigned("!=", raw, ir.Constant(I8, 0))
    if dt == dtypes.float16:
        return b.fpext(raw, F32)
    if dt == dtypes.bfloat16:
        return b.bitcast(b.shl(b.zext(raw, I32), ir.Constant(I32, 16)), F32)
    return raw


def store(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, dt: np.dtype) -> None:
    if is_complex(dt):
        zero = ir.Constant(I32, 0)
        for k, part in enumerate(unpack(b, value)):
            b.store(part, b.gep(ptr, [zero, ir.Constant(I32, k)]))
        return
    if dt == dtypes.bool_:
        value = b.zext(value, I8)
    elif dt == dtypes.float16:
        value = b.fptrunc(value, F16)
    elif dt == dtypes.bfloat16:
        value = b.trunc(b.lshr(_bfloat16_bits(b, value), ir.Constant(I32, 16)), I16)
    b.store(value, ptr)


def pack(b: ir.IRBuilder, re: ir.Value, im: ir.Value) -> ir.Value:
    """The complex register value of two parts."""
    pair = ir.Constant(complex_type(re.type), ir.Undefined)
    return b.insert_value(b.insert_value(pair, re, 0), im, 1)


def unpack(b: ir.IRBuilder, z: ir.Value) -> tuple[ir.Value, ir.Value]:
    """The real and imaginary parts of a complex register value."""
    return b.extract_value(z, 0), b.extract_value(z, 1)


def _bfloat16_bits(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """The float32 bits of ``x`` rounded to bfloat16 (nearest even; NaNs stay quiet NaNs)."""
    bits = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.add(bits, b.add(ir.Constant(I32, 0x7FFF), lsb))
    quiet_nan = b.or_(bits, ir.Constant(I32, 0x00400000))
    nan = b.fcmp_unordered("uno", x, x)
    return b.and_(b.select(nan, quiet_nan, rounded), ir.Constant(I32, 0xFFFF0000 - (1 << 32)))


def round_to(b: ir.IRBuilder, value: ir.Value, dt: np.dtype) -> ir.Value:
    """Round a float32 register value to a half-precision ``dt`` (a no-op for other types)."""
    if dt == dtypes.float16:
        return b.fpext(b.fptrunc(value, F16), F32)
    if dt == dtypes.bfloat16:
        return b.bitcast(_bfloat16_bits(b, value), F32)
    return value


class Emitter:
    """What a lowering rule needs: the builder at the right place and the module's intrinsics."""

    def __init__(self, module: ir.Module) -> None:
        self.module = module
        self.b: ir.IRBuilder = None  # set by the caller before each rule

    def intrinsic(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return fn

    def call(self, base: str, args: list[ir.Value], ret: ir.Type | None = None) -> ir.Value:
        """Call an overloaded LLVM intrinsic (``llvm.floor`` -> ``llvm.floor.f32``)."""
        ty = args[0].type
        ret = ret or ty
        suffix = _type_suffix(ret) + ("." + _type_suffix(ty) if ret != ty else "")
        return self.b.call(self.intrinsic(f"{base}.{suffix}", ret, [a.type for a in args]), args)


def _type_suffix(ty: ir.Type) -> str:
    if ty == F32:
        return "f32"
    if ty == F64:
        return "f64"
    return f"i{ty.width}"


# --- which primitives lower ---------------------------------------------------------------
def vecmath_unary(name: str) -> bool:
    return name in vecmath.SUPPORTED_UNARY


def vecmath_binary(name: str) -> bool:
    return name in vecmath.SUPPORTED_BINARY


lower_rules: RuleTable = RuleTable("lower_rules")


def can_lower(p: Primitive, in_dtypes: list[np.dtype]) -> bool:
    """Whether ``p`` on operands of these dtypes has a native lowering here."""
    if p not in lower_rules:
        return False
    floating = bool(in_dtypes) and is_float(in_dtypes[-1])
    if p in _VECMATH_UNARY:
        return floating and vecmath_unary(p.name)
    if p in _VECMATH_BINARY:
        return floating and vecmath_binary(p.name)
    return True


# --- float math: vecmath for functions, LLVM intrinsics for single instructions --------------
def _math_unary(name: str) -> Callable:
    def rule(e: Emitter, in_dts, out_dt, x, **params):
        return round_to(e.b, vecmath.emit_unary(e.b, name, x), out_dt)
    return rule


def _math_binary(name: str) -> Callable:
    def rule(e: Emitter, in_dts, out_dt, x, y, **params):
        return round_to(e.b, vecmath.emit_binary(e.b, name, x, y), out_dt)
    return rule


# Transcendental functions (core/traits.py) are vecmath's routines, where it has one of the name.
_VECMATH_UNARY = frozenset(p for p in TRANSCENDENTAL if vecmath_unary(p.name))
_VECMATH_BINARY = frozenset(p for p in TRANSCENDENTAL if vecmath_binary(p.name))
# Worth computing once and keeping, rather than recomputing per use.
EXPENSIVE = TRANSCENDENTAL
for _p in _VECMATH_UNARY:
    lower_rules[_p] = _math_unary(_p.name)
for _p in _VECMATH_BINARY:
    lower_rules[_p] = _math_binary(_p.name)


def _float_unary(name: str, intrinsic: str) -> Callable:
    """vecmath's version if it has one (it may be tuned), else the LLVM intrinsic."""
    def rule(e: Emitter, in_dts, out_dt, x, **params):
        if vecmath_unary(name):
            return round_to(e.b, vecmath.emit_unary(e.b, name, x), out_dt)
        return round_to(e.b, e.call(intrinsic, [x]), out_dt)
    return rule


_sqrt = _float_unary("sqrt", "llvm.sqrt")
_floor = _float_unary("floor", "llvm.floor")
_ceil = _float_unary("ceil", "llvm.ceil")


def _rsqrt(e: Emitter, in_dts, out_dt, x):
    if vecmath_unary("rsqrt"):
        return round_to(e.b, vecmath.emit_unary(e.b, "rsqrt", x), out_dt)
    return round_to(e.b, e.b.fdiv(ir.Constant(x.type, 1.0), e.call("llvm.sqrt", [x])), out_dt)


def _round(e: Emitter, in_dts, out_dt, x, *, rounding_method):
    return e.call("llvm.round" if rounding_method == 0 else "llvm.roundeven", [x])


def nan_max(e: Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    if vecmath_binary("max"):
        return vecmath.emit_binary(e.b, "max", x, y)
    return e.call("llvm.maximum", [x, y])


def nan_min(e: Emitter, x: ir.Value, y: ir.Value) -> ir.Value:
    if vecmath_binary("min"):
        return vecmath.emit_binary(e.b, "min", x, y)
    return e.call("llvm.minimum", [x, y])


# --- generic arithmetic, by kind ---------------------------------------------------------------
def _neg(e, in_dts, out_dt, x):
    return e.b.fneg(x) if is_float(out_dt) else e.b.sub(ir.Constant(x.type, 0), x)


def _abs(e, in_dts, out_dt, x):
    if is_float(out_dt):
        return e.call("llvm.fabs", [x])
    if not is_signed(out_dt):
        return x
    return e.b.select(e.b.icmp_signed("<", x, ir.Constant(x.type, 0)), e.b.sub(ir.Constant(x.type, 0), x), x)


def _sign(e, in_dts, out_dt, x):
    b = e.b
    zero, one, minus_one = (ir.Constant(x.type, v) for v in ((0.0, 1.0, -1.0) if is_float(out_dt) else (0, 1, -1)))
    if is_float(out_dt):  # NaN and +-0 are returned as they are
        return b.select(b.fcmp_ordered(">", x, zero), one, b.select(b.fcmp_ordered("<", x, zero), minus_one, x))
    if not is_signed(out_dt):
        return b.zext(b.icmp_unsigned("!=", x, zero), x.type)
    return b.select(b.icmp_signed(">", x, zero), one, b.select(b.icmp_signed("<", x, zero), minus_one, zero))


def _not(e, in_dts, out_dt, x):
    return e.b.xor(x, ir.Constant(x.type, -1 if x.type != I1 else 1))


def _is_finite(e, in_dts, out_dt, x):
    return e.b.fcmp_ordered("<", e.call("llvm.fabs", [x]), ir.Constant(x.type, float("inf")))


def _population_count(e, in_dts, out_dt, x):
    return e.call("llvm.ctpop", [x])


def _arith(float_op: str, int_op: str) -> Callable:
    def rule(e, in_dts, out_dt, x, y):
        if is_float(out_dt):
            return round_to(e.b, getattr(e.b, float_op)(x, y), out_dt)
        return getattr(e.b, int_op)(x, y)
    return rule


def _int_divisor(e: Emitter, out_dt: np.dtype, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(y == 0, a divisor that cannot trap): 1 where y is 0 or where MIN / -1 would overflow."""
    b = e.b
    zero = b.icmp_unsigned("==", y, ir.Constant(y.type, 0))
    unsafe = zero
    if is_signed(out_dt):
        bits = out_dt.itemsize * 8
        overflow = b.and_(b.icmp_signed("==", x, ir.Constant(x.type, -(1 << (bits - 1)))),
                          b.icmp_signed("==", y, ir.Constant(y.type, -1)))
        unsafe = b.or_(zero, overflow)
    return zero, b.select(unsafe, ir.Constant(y.type, 1), y)


def _div(e, in_dts, out_dt, x, y):
    """C division (toward zero); x / 0 gives -1 (all bits set) and MIN / -1 gives MIN."""
    if is_float(out_dt):
        return round_to(e.b, e.b.fdiv(x, y), out_dt)
    zero, safe = _int_divisor(e, out_dt, x, y)
    q = e.b.sdiv(x, safe) if is_signed(out_dt) else e.b.udiv(x, safe)
    return e.b.select(zero, ir.Constant(x.type, -1), q)


def _rem(e, in_dts, out_dt, x, y):
    """C remainder (sign of the dividend); x % 0 gives x."""
    if is_float(out_dt):
        return round_to(e.b, e.b.frem(x, y), out_dt)
    zero, safe = _int_divisor(e, out_dt, x, y)
    r = e.b.srem(x, safe) if is_signed(out_dt) else e.b.urem(x, safe)
    return e.b.select(zero, x, r)


def _max(e, in_dts, out_dt, x, y):
    if is_float(out_dt):
        return nan_max(e, x, y)
    cmp = e.b.icmp_signed if is_signed(out_dt) else e.b.icmp_unsigned
    return e.b.select(cmp(">", x, y), x, y)


def _min(e, in_dts, out_dt, x, y):
    if is_float(out_dt):
        return nan_min(e, x, y)
    cmp = e.b.icmp_signed if is_signed(out_dt) else e.b.icmp_unsigned
    return e.b.select(cmp("<", x, y), x, y)


def _shift(kind: str) -> Callable:
    """Shifts by an amount outside [0, bits) give 0, or the sign fill for arithmetic right shifts."""
    def rule(e, in_dts, out_dt, x, y):
        b = e.b
        bits = ir.Constant(x.type, out_dt.itemsize * 8)
        out_of_range = b.icmp_unsigned(">=", y, bits)  # unsigned compare: negative amounts are huge
        safe = b.select(out_of_range, ir.Constant(y.type, 0), y)
        if kind == "left":
            return b.select(out_of_range, ir.Constant(x.type, 0), b.shl(x, safe))
        if kind == "logical":
            return b.select(out_of_range, ir.Constant(x.type, 0), b.lshr(x, safe))
        fill = b.ashr(x, b.sub(bits, ir.Constant(x.type, 1)))  # signed bits, as XLA, also for unsigned types
        return b.select(out_of_range, fill, b.ashr(x, safe))
    return rule


_FCMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _compare(name: str) -> Callable:
    op = _FCMP[name]

    def rule(e, in_dts, out_dt, x, y):
        dt = in_dts[0]
        if is_float(dt):
            # ne is true for NaN operands (unordered); every other comparison is false.
            return e.b.fcmp_unordered(op, x, y) if name == "ne" else e.b.fcmp_ordered(op, x, y)
        if is_signed(dt):
            return e.b.icmp_signed(op, x, y)
        return e.b.icmp_unsigned(op, x, y)
    return rule


def _bitwise(op: str) -> Callable:
    def rule(e, in_dts, out_dt, x, y):
        return getattr(e.b, op)(x, y)
    return rule


def _integer_pow(e, in_dts, out_dt, x, *, y):
    """Repeated squaring; a negative exponent takes the reciprocal of the power."""
    b = e.b
    floating = is_float(out_dt)
    mul = (lambda u, v: round_to(b, b.fmul(u, v), out_dt)) if floating else b.mul
    acc, base, n = None, x, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else mul(acc, base)
        n >>= 1
        if n:
            base = mul(base, base)
    if acc is None:
        acc = ir.Constant(x.type, 1.0 if floating else 1)
    if y < 0:
        acc = round_to(b, b.fdiv(ir.Constant(x.type, 1.0), acc), out_dt)
    return acc


def convert(e: Emitter, x: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
    """``convert_element_type``: float -> int saturates (NaN -> 0); x -> bool is x != 0."""
    b = e.b
    if src == dst:
        return x
    if is_complex(src) or is_complex(dst):
        return _convert_complex(e, x, src, dst)
    to = register_type(dst)
    if dst == dtypes.bool_:
        if is_float(src):
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if src == dtypes.bool_:
        return b.uitofp(x, to) if is_float(dst) else b.zext(x, to)
    if is_float(src) and is_float(dst):
        if dst == dtypes.float16 and src == dtypes.float64:  # one rounding, as NumPy
            return b.fpext(b.fptrunc(x, F16), F32)
        if x.type != to:
            x = b.fpext(x, to) if to == F64 else b.fptrunc(x, to)
        return round_to(b, x, dst)
    if is_float(dst):
        to_int = b.sitofp if is_signed(src) else b.uitofp
        if dst == dtypes.float16:  # one rounding, as NumPy
            return b.fpext(to_int(x, F16), F32)
        return round_to(b, to_int(x, to), dst)
    if is_float(src):
        return e.call("llvm.fptosi.sat" if is_signed(dst) else "llvm.fptoui.sat", [x], ret=to)
    if to.width < x.type.width:
        return b.trunc(x, to)
    if to.width > x.type.width:
        return b.sext(x, to) if is_signed(src) else b.zext(x, to)
    return x


def _convert(e, in_dts, out_dt, x, *, new_dtype, weak_type):
    return convert(e, x, in_dts[0], new_dtype)


def _bitcast(e, in_dts, out_dt, x, *, new_dtype):
    """Same-width bitcasts of full-width types only (``bitcasts_natively``): the same bits."""
    return e.b.bitcast(x, register_type(new_dtype))


def bitcasts_natively(in_dt: np.dtype, out_dt: np.dtype) -> bool:
    """Bitcasts between types of one width, neither bool nor a half type: registers widen half
    types, and a value stored as one is rounded, which would quiet a signalling NaN's bits."""
    return in_dt.itemsize == out_dt.itemsize and not {in_dt, out_dt} & {dtypes.bool_, *HALF}


def _select_n(e, in_dts, out_dt, which, *cases):
    b = e.b
    if in_dts[0] == dtypes.bool_:
        return b.select(which, cases[1], cases[0]) if len(cases) > 1 else cases[0]
    cmp = b.icmp_signed if is_signed(in_dts[0]) else b.icmp_unsigned
    out = cases[0]  # the selector is clamped to [0, n): the last case at or below it wins
    for k, case in enumerate(cases[1:], start=1):
        out = b.select(cmp(">=", which, ir.Constant(which.type, k)), case, out)
    return out


def _clamp(e, in_dts, out_dt, lo, x, hi):
    return _min(e, in_dts, out_dt, _max(e, in_dts, out_dt, x, lo), hi)


lower_rules.update({
    stop_gradient_p: lambda e, in_dts, out_dt, x: x,  # the identity, once derivatives are taken
    ew.copy_p: lambda e, in_dts, out_dt, x: x,
    sharding_constraint_p: lambda e, in_dts, out_dt, x, **_: x,  # (acted on by ember.partition, if at all)
    ew.neg_p: _neg, ew.sign_p: _sign, ew.floor_p: _floor, ew.ceil_p: _ceil, ew.round_p: _round,
    ew.abs_p: _abs, ew.not_p: _not, ew.population_count_p: _population_count, ew.is_finite_p: _is_finite,
    ew.sqrt_p: _sqrt, ew.rsqrt_p: _rsqrt, ew.integer_pow_p: _integer_pow,
    ew.add_p: _arith("fadd", "add"), ew.sub_p: _arith("fsub", "sub"), ew.mul_p: _arith("fmul", "mul"),
    ew.div_p: _div, ew.rem_p: _rem, ew.max_p: _max, ew.min_p: _min,
    ew.square_p: lambda e, in_dts, out_dt, x: _arith("fmul", "mul")(e, in_dts * 2, out_dt, x, x),
    ew.and_p: _bitwise("and_"), ew.or_p: _bitwise("or_"), ew.xor_p: _bitwise("xor"),
    ew.shift_left_p: _shift("left"), ew.shift_right_arithmetic_p: _shift("arith"),
    ew.shift_right_logical_p: _shift("logical"),
    ew.convert_element_type_p: _convert, ew.select_n_p: _select_n, ew.clamp_p: _clamp,
    ew.bitcast_convert_type_p: _bitcast,
    **{getattr(ew, f"{n}_p"): _compare(n) for n in _FCMP},
})


# --- complex values ------------------------------------------------------------------------------
def part_dtype(dt: np.dtype) -> np.dtype:
    return dtypes.float64 if dt == dtypes.complex128 else dtypes.float32


def _convert_complex(e: Emitter, x: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
    """Real -> complex: a zero imaginary part; complex -> real: the real part (NumPy's cast, also
    to integers); complex -> bool: either part nonzero; between complex types: part by part."""
    b = e.b
    if not is_complex(src):
        part = part_dtype(dst)
        re = convert(e, x, src, part)
        return pack(b, re, ir.Constant(re.type, 0.0))
    re, im = unpack(b, x)
    if dst == dtypes.bool_:
        zero = ir.Constant(re.type, 0.0)
        return b.or_(b.fcmp_unordered("!=", re, zero), b.fcmp_unordered("!=", im, zero))
    if is_complex(dst):
        part = part_dtype(dst)
        return pack(b, convert(e, re, part_dtype(src), part), convert(e, im, part_dtype(src), part))
    return convert(e, re, part_dtype(src), dst)


def _parts(e: Emitter, z: ir.Value, dt: np.dtype) -> tuple[ir.Value, ir.Value]:
    """A value as a complex pair (a real one with a zero imaginary part)."""
    if is_complex(dt):
        return unpack(e.b, z)
    return z, ir.Constant(z.type, 0.0)


def _complex_arith(name: str) -> Callable:
    def rule(e, in_dts, out_dt, x, y):
        c = complex_math.Cx(e.b, register_type(part_dtype(out_dt)))
        return pack(e.b, *getattr(c, name)(_parts(e, x, in_dts[0]), _parts(e, y, in_dts[1])))
    return rule


def _wide(e: Emitter, dt: np.dtype, fn: Callable, *values: ir.Value) -> Any:
    """``fn(cx, *pairs)`` on the complex values: complex64 widened to doubles (rounded back if
    the result is a pair or a float), complex128 as it is."""
    b = e.b
    pairs = [unpack(b, v) for v in values]
    if dt == dtypes.complex128:
        return fn(complex_math.Cx(b, F64), *pairs)
    pairs = [(b.fpext(re, F64), b.fpext(im, F64)) for re, im in pairs]
    out = fn(complex_math.Cx(b, F64, wide=True), *pairs)
    if isinstance(out, tuple):
        return tuple(b.fptrunc(v, F32) for v in out)
    return b.fptrunc(out, F32) if out.type == F64 else out


def _complex_function(name: str) -> Callable:
    method = complex_math.FUNCTIONS[name]

    def rule(e, in_dts, out_dt, x, **params):
        return pack(e.b, *_wide(e, out_dt, method, x))
    return rule


def _complex_composite(fn: Callable) -> Callable:
    def rule(e, in_dts, out_dt, x, **params):
        return pack(e.b, *_wide(e, out_dt, fn, x))
    return rule


LN2_HI, LN2_LO = 0.6931471805599453, 2.3190468138462996e-17  # ln 2 = hi + lo, as doubles


def _exp2(c: complex_math.Cx, z):
    """exp(z ln 2); for complex128 with z ln 2 as a double-double, the low parts applied to the
    exponential and the angle to first order (a rounded im ln 2 would be off by |im| ulps)."""
    m = c.m
    if c.wide:
        return c.exp(c.scale(z, m.c(LN2_HI)))
    hi_lo = [m.two_prod(v, m.c(LN2_HI)) for v in z]
    (re, re_lo), (im, im_lo) = [(hi, m.fma(v, m.c(LN2_LO), lo)) for (hi, lo), v in zip(hi_lo, z)]
    out_re, out_im = c.exp((re, im))
    # exp(re + re_lo) (cos, sin)(im + im_lo) ~ w (1 + re_lo) + i w im_lo (where w is finite)
    finite = m.b.and_(m.lt(m.abs(out_re), m.c(np.inf)), m.lt(m.abs(out_im), m.c(np.inf)))
    finite = m.b.and_(finite, m.b.and_(m.lt(m.abs(re_lo), m.c(np.inf)), m.lt(m.abs(im_lo), m.c(np.inf))))
    return (m.select(finite, m.fma(out_re, re_lo, m.fma(m.neg(out_im), im_lo, out_re)), out_re),
            m.select(finite, m.fma(out_im, re_lo, m.fma(out_re, im_lo, out_im)), out_im))


def _logistic(c: complex_math.Cx, z):
    one = (c.m.c(1.0), c.m.c(0.0))
    return c.div(one, c.add(one, c.exp(c.neg(z))))


def _rsqrt_complex(c: complex_math.Cx, z):
    return c.div((c.m.c(1.0), c.m.c(0.0)), c.sqrt(z))


def _complex_abs(e, in_dts, out_dt, x):
    return _wide(e, in_dts[0], complex_math.Cx.abs, x)


def _complex_sign(e, in_dts, out_dt, x):
    """z / |z|, as NumPy: 0 at 0; (+-1, 0) or (0, +-1) on one infinite part (the other may be NaN); else
    NaN if a part is NaN or both are infinite."""
    def sign(c: complex_math.Cx, z):
        m = c.m
        re, im = z
        h = c.hypot(re, im)
        out_re, out_im = m.div(re, h), m.div(im, h)
        zero = m.b.and_(m.eq(re, m.c(0.0)), m.eq(im, m.c(0.0)))
        out_re, out_im = m.select(zero, m.c(0.0), out_re), m.select(zero, m.c(0.0), out_im)
        inf_re, inf_im = c.is_inf(re), c.is_inf(im)
        one_inf = m.b.xor(inf_re, inf_im)
        unit = (m.select(inf_re, m.copysign(m.c(1.0), re), m.c(0.0)),
                m.select(inf_im, m.copysign(m.c(1.0), im), m.c(0.0)))
        nan = m.b.or_(m.b.and_(m.b.or_(m.isnan(re), m.isnan(im)), m.b.not_(one_inf)), m.b.and_(inf_re, inf_im))
        out_re = m.select(nan, m.c(np.nan), m.select(one_inf, unit[0], out_re))
        out_im = m.select(nan, m.c(np.nan), m.select(one_inf, unit[1], out_im))
        return out_re, out_im
    return pack(e.b, *_wide(e, out_dt, sign, x))


def _complex_integer_pow(e, in_dts, out_dt, x, *, y):
    part = register_type(part_dtype(out_dt))
    c = complex_math.Cx(e.b, part)
    one = (ir.Constant(part, 1.0), ir.Constant(part, 0.0))
    return pack(e.b, *c.integer_pow(unpack(e.b, x), y, one))


def _complex_compare(name: str) -> Callable:
    def rule(e, in_dts, out_dt, x, y):
        c = complex_math.Cx(e.b, register_type(part_dtype(in_dts[0])))
        equal = c.eq(_parts(e, x, in_dts[0]), _parts(e, y, in_dts[1]))
        return equal if name == "eq" else e.b.not_(equal)
    return rule


def _complex_neg(e, in_dts, out_dt, x):
    re, im = unpack(e.b, x)
    return pack(e.b, e.b.fneg(re), e.b.fneg(im))


def _complex_conj(e, in_dts, out_dt, x, *, input_dtype):
    re, im = _parts(e, x, in_dts[0])
    if not is_complex(in_dts[0]):
        re = convert(e, re, in_dts[0], part_dtype(out_dt))
        im = ir.Constant(re.type, 0.0)
    return pack(e.b, re, e.b.fneg(im))


def _complex_clamp(e, in_dts, out_dt, lo, x, hi):
    """XLA's clamp of complex values (the reference's ``_clamp``): by the real parts alone,
    t = lo if re lo >= re x else x, then t if re hi >= re t else hi (ordered compares)."""
    b = e.b
    re = [b.extract_value(v, 0) for v in (lo, x)]
    t = b.select(b.fcmp_ordered(">=", re[0], re[1]), lo, x)
    return b.select(b.fcmp_ordered(">=", b.extract_value(hi, 0), b.extract_value(t, 0)), t, hi)


def _complex_make(e, in_dts, out_dt, x, y):
    return pack(e.b, x, y)


def _complex_convert(e, in_dts, out_dt, x, *, new_dtype, weak_type):
    return convert(e, x, in_dts[0], new_dtype)


# Rules for primitives with a complex operand or result; ``lower_rules`` dispatches to them.
complex_rules: RuleTable = RuleTable("complex_rules", {
    ew.add_p: _complex_arith("add"), ew.sub_p: _complex_arith("sub"), ew.mul_p: _complex_arith("mul"),
    ew.div_p: _complex_arith("div"), ew.neg_p: _complex_neg, ew.conj_p: _complex_conj,
    ew.square_p: lambda e, in_dts, out_dt, x: _complex_arith("mul")(e, in_dts * 2, out_dt, x, x),
    ew.real_p: lambda e, in_dts, out_dt, x: e.b.extract_value(x, 0),
    ew.imag_p: lambda e, in_dts, out_dt, x: e.b.extract_value(x, 1),
    ew.complex_p: _complex_make, ew.abs_p: _complex_abs, ew.sign_p: _complex_sign,
    ew.eq_p: _complex_compare("eq"), ew.ne_p: _complex_compare("ne"), ew.select_n_p: _select_n,
    ew.convert_element_type_p: _complex_convert, ew.integer_pow_p: _complex_integer_pow,
    stop_gradient_p: lambda e, in_dts, out_dt, x: x, sharding_constraint_p: lambda e, in_dts, out_dt, x, **_: x,
    ew.copy_p: lambda e, in_dts, out_dt, x: x,
    ew.exp2_p: _complex_composite(_exp2), ew.logistic_p: _complex_composite(_logistic),
    ew.rsqrt_p: _complex_composite(_rsqrt_complex),
    ew.pow_p: lambda e, in_dts, out_dt, x, y: pack(e.b, *_wide(e, out_dt, complex_math.Cx.pow, x, y)),
    ew.max_p: _complex_arith("max"), ew.min_p: _complex_arith("min"), ew.clamp_p: _complex_clamp,
    **{getattr(ew, f"{n}_p"): _complex_function(n) for n in complex_math.FUNCTIONS},
})


def lowers_complex(p: Primitive) -> bool:
    """Whether ``p`` with complex operands or a complex result has a native lowering."""
    return p in complex_rules


def _dispatching(p: Primitive, real_rule: Callable | None) -> Callable:
    complex_rule = complex_rules[p]

    def rule(e, in_dts, out_dt, *values, **params):
        if is_complex(out_dt) or any(is_complex(dt) for dt in in_dts):
            return complex_rule(e, in_dts, out_dt, *values, **params)
        if real_rule is None:  # (a primitive of complex values only: the tracer's types keep real ones out)
            raise NotImplementedError(f"the CPU backend has no lowering of {p.name} on real values")
        return real_rule(e, in_dts, out_dt, *values, **params)
    return rule


for _p in complex_rules:
    lower_rules.override(_p, _dispatching(_p, lower_rules.get(_p)))  # (wraps the real rule, if any)
