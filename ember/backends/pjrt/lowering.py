"""ember's IR lowered to StableHLO text (MLIR, generic operation form), for PJRT plugins.

One rule per primitive in ``lower_rules``: ``rule(ctx, out_avals, *operands, **params)`` emits
operations through ``ctx`` (a ``Builder``) and returns the result values. The program is walked by
the environment loop every IR consumer has (``lower_jaxpr``); calls (``jit``, custom derivative and
batching calls, ``remat2``, ``add_any``'s body: ``core.primitive.call_params``) are inlined.
``REFUSED`` names each primitive that is not lowered and why; compiling a program holding one
raises ``LoweringError`` with that reason.

Semantics are JAX's (and the reference interpreter's): NaN-propagating max/min, sort in JAX's total
order (-0 equal to 0, NaN last), argmax/argmin taking the first of equal values (and the first NaN),
gathers clamped or filled, scatters dropped or clamped per ``mode``, ``cond``'s out-of-range index
taking the last branch.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import ml_dtypes
import numpy as np

from ember import dtypes
from ember.backends.reference.elementwise import special_program
from ember.backends.reference.indexing import default_fill_value
from ember.compiler.fusion import fusion_p
from ember.config import config
from ember.core import sharding as shd
from ember.core.avals import ShapedArray
from ember.core.calls import checkpoint_p, custom_vjp_lin_p, name_p, optimization_barrier_p
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal
from ember.core.primitive import Primitive, RuleTable, abstract_eval_rules, call_params
from ember.lax import (
    callbacks as cb,
    control_flow as cf,
    convolution as conv,
    elementwise as ew,
    indexing as ix,
    linalg,
    parallel,
    reductions as red,
    shapes as sh,
    special,
)
from ember.lax.dot import Precision, dot_general_p
from ember.lax.fft import FftType, fft_p
from ember.lax.stop_gradient import stop_gradient_p


class LoweringError(NotImplementedError):
    """A program holds a primitive this backend does not lower (the message says which and why)."""


# --- types and values ----------------------------------------------------------------------------------------
_ELEMENT = {
    np.dtype(np.bool_): "i1", np.dtype(np.int8): "i8", np.dtype(np.int16): "i16", np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64", np.dtype(np.uint8): "ui8", np.dtype(np.uint16): "ui16",
    np.dtype(np.uint32): "ui32", np.dtype(np.uint64): "ui64", np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", dtypes.bfloat16: "bf16",
    np.dtype(np.complex64): "complex<f32>", np.dtype(np.complex128): "complex<f64>",
    np.dtype(ml_dtypes.float8_e5m2): "f8E5M2", np.dtype(ml_dtypes.float8_e4m3fn): "f8E4M3FN",
    np.dtype(ml_dtypes.float8_e4m3b11fnuz): "f8E4M3B11FNUZ", np.dtype(ml_dtypes.float8_e5m2fnuz): "f8E5M2FNUZ",
    np.dtype(ml_dtypes.float8_e4m3fnuz): "f8E4M3FNUZ", np.dtype(ml_dtypes.float8_e4m3): "f8E4M3",
    np.dtype(ml_dtypes.float8_e3m4): "f8E3M4",
}


def element_type(dt: np.dtype) -> str:
    try:
        return _ELEMENT[np.dtype(dt)]
    except KeyError:
        raise LoweringError(f"StableHLO has no element type for dtype {dt} here") from None


def tensor_type(a: ShapedArray) -> str:
    return "tensor<" + "".join(f"{n}x" for n in a.shape) + element_type(a.dtype) + ">"


class Value:
    """An SSA value of the module being built, with its type."""

    __slots__ = ("name", "aval")

    def __init__(self, name: str, aval: ShapedArray) -> None:
        self.name, self.aval = name, aval

    def __repr__(self) -> str:
        return f"{self.name}: {tensor_type(self.aval)}"


def _aval(shape: Sequence[int], dtype: Any) -> ShapedArray:
    return ShapedArray(tuple(int(n) for n in shape), np.dtype(dtype))


def _array(values: Sequence[int], kind: str = "i64") -> str:
    values = list(values)
    return f"array<{kind}: {', '.join(map(str, values))}>" if values else f"array<{kind}>"


def _scalar_literal(value: Any, dt: np.dtype) -> str:
    """A scalar as MLIR writes it in ``dense<...>``: integers in decimal, booleans as words,
    floats as the hex of their bits (exact, NaN and infinities included), complex as a pair."""
    dt = np.dtype(dt)
    if dt == dtypes.bool_:
        return "true" if bool(value) else "false"
    if dt.kind in "iu":
        return str(int(np.asarray(value).astype(dt)))
    if dt.kind == "c":
        v = np.asarray(value).astype(dt)
        part = dtypes.real_dtype(dt)
        return f"({_scalar_literal(v.real, part)}, {_scalar_literal(v.imag, part)})"
    bits = np.asarray(value).astype(dt).reshape(1).view(f"u{dt.itemsize}")[0]
    return f"0x{int(bits):0{2 * dt.itemsize}X}"


# --- the builder ---------------------------------------------------------------------------------------------
class Builder:
    """Writes the operations of one region (a function body, a loop body, a comparator) in generic
    form; the value counter is the module's, so names never clash across regions."""

    def __init__(self, module: "Module", indent: int = 2) -> None:
        self.module, self.indent = module, indent
        self.lines: list[str] = []
        self._constants: dict[tuple, Value] = {}

    def fresh(self) -> str:
        return self.module.fresh()

    def ops(self, op: str, operands: Sequence[Value], out: Sequence[ShapedArray], props: str = "",
            regions: Sequence[str] = ()) -> list[Value]:
        name = self.fresh()
        results = [Value(name if len(out) == 1 else f"{name}#{i}", a) for i, a in enumerate(out)]
        lhs = f"{name} = " if len(out) == 1 else f"{name}:{len(out)} = " if out else ""
        args = ", ".join(v.name for v in operands)
        props = f" <{{{props}}}>" if props else ""
        regs = " (" + ", ".join(regions) + ")" if regions else ""
        in_types = ", ".join(tensor_type(v.aval) for v in operands)
        out_types = tensor_type(out[0]) if len(out) == 1 else "(" + ", ".join(map(tensor_type, out)) + ")"
        self.lines.append(" " * self.indent + f'{lhs}"{op}"({args}){props}{regs} : ({in_types}) -> {out_types}')
        return results

    def op(self, op: str, operands: Sequence[Value], out: ShapedArray, props: str = "",
           regions: Sequence[str] = ()) -> Value:
        return self.ops(op, operands, [out], props, regions)[0]

    def region(self, arg_avals: Sequence[ShapedArray], body: Callable[..., Sequence[Value]],
               terminator: str = "stablehlo.return") -> str:
        """A region whose block takes ``arg_avals`` and returns what ``body(builder, *args)`` gives."""
        inner = Builder(self.module, self.indent + 2)
        args = [Value(inner.fresh(), a) for a in arg_avals]
        results = list(body(inner, *args))
        inner.ret(results, terminator)
        pad = " " * self.indent
        head = f"{pad}^bb0({', '.join(f'{a.name}: {tensor_type(a.aval)}' for a in args)}):\n" if args else ""
        return "{\n" + head + "\n".join(inner.lines) + "\n" + pad + "}"

    def ret(self, values: Sequence[Value], op: str = "stablehlo.return") -> None:
        types = ", ".join(tensor_type(v.aval) for v in values)
        self.lines.append(" " * self.indent + f'"{op}"({", ".join(v.name for v in values)}) : ({types}) -> ()')

    # Helpers rules share --------------------------------------------------------------------------------
    def constant(self, value: Any, dtype: Any, shape: Sequence[int] = ()) -> Value:
        """A constant: a scalar broadcast to ``shape``, or an array of that shape."""
        dt = np.dtype(dtype)
        arr = np.asarray(value)
        if arr.ndim == 0:
            key = (_scalar_literal(arr, dt), dt.str, tuple(shape))
            hit = self._constants.get(key)
            if hit is not None:
                return hit
            scalar = self.op("stablehlo.constant", [], _aval((), dt),
                             f"value = dense<{key[0]}> : tensor<{element_type(dt)}>")
            result = scalar if not shape else self.broadcast(scalar, shape)
            self._constants[key] = result
            return result
        arr = arr.astype(dt)
        if arr.shape != tuple(shape) and shape:
            arr = np.broadcast_to(arr, shape)
        a = _aval(arr.shape, dt)
        flat = ", ".join(_scalar_literal(v, dt) for v in arr.reshape(-1))
        text = _nested(arr.shape, flat.split(", ") if dt.kind != "c" else
                       [_scalar_literal(v, dt) for v in arr.reshape(-1)])
        return self.op("stablehlo.constant", [], a, f"value = dense<{text}> : {tensor_type(a)}")

    def broadcast(self, v: Value, shape: Sequence[int], dims: Sequence[int] | None = None) -> Value:
        shape = tuple(shape)
        if v.aval.shape == shape and dims is None:
            return v
        if dims is None:  # a scalar, or trailing dimensions
            dims = range(len(shape) - v.aval.ndim, len(shape))
        return self.op("stablehlo.broadcast_in_dim", [v], _aval(shape, v.aval.dtype),
                       f"broadcast_dimensions = {_array(dims)}")

    def convert(self, v: Value, dtype: Any) -> Value:
        dt = np.dtype(dtype)
        if v.aval.dtype == dt:
            return v
        return self.op("stablehlo.convert", [v], _aval(v.aval.shape, dt))

    def reshape(self, v: Value, shape: Sequence[int]) -> Value:
        if v.aval.shape == tuple(shape):
            return v
        return self.op("stablehlo.reshape", [v], _aval(shape, v.aval.dtype))

    def binary(self, op: str, a: Value, b: Value, out_dtype: Any = None) -> Value:
        return self.op(op, [a, b], _aval(a.aval.shape, out_dtype or a.aval.dtype))

    def compare(self, direction: str, a: Value, b: Value, kind: str | None = None) -> Value:
        kind = kind or _compare_type(a.aval.dtype)
        return self.op("stablehlo.compare", [a, b], _aval(a.aval.shape, np.bool_),
                       f"compare_type = #stablehlo<comparison_type {kind}>, "
                       f"comparison_direction = #stablehlo<comparison_direction {direction}>")

    def select(self, pred: Value, on_true: Value, on_false: Value) -> Value:
        return self.op("stablehlo.select", [pred, on_true, on_false], on_true.aval)

    def slice(self, v: Value, start: Sequence[int], limit: Sequence[int],
              strides: Sequence[int] | None = None) -> Value:
        strides = tuple(strides) if strides is not None else (1,) * v.aval.ndim
        shape = [max(0, -(-(hi - lo) // s)) for lo, hi, s in zip(start, limit, strides)]
        return self.op("stablehlo.slice", [v], _aval(shape, v.aval.dtype),
                       f"limit_indices = {_array(limit)}, start_indices = {_array(start)}, strides = {_array(strides)}")

    def transpose(self, v: Value, permutation: Sequence[int]) -> Value:
        if list(permutation) == list(range(v.aval.ndim)):
            return v
        shape = [v.aval.shape[d] for d in permutation]
        return self.op("stablehlo.transpose", [v], _aval(shape, v.aval.dtype), f"permutation = {_array(permutation)}")

    def iota(self, shape: Sequence[int], dimension: int, dtype: Any = np.int32) -> Value:
        return self.op("stablehlo.iota", [], _aval(shape, dtype), f"iota_dimension = {int(dimension)} : i64")

    def reduce(self, operands: Sequence[Value], inits: Sequence[Value], axes: Sequence[int],
               body: Callable[..., Sequence[Value]]) -> list[Value]:
        """``stablehlo.reduce`` over ``axes``; ``body(builder, *accumulators, *elements)``."""
        axes = sorted(axes)
        shape = [n for d, n in enumerate(operands[0].aval.shape) if d not in axes]
        scalars = [_aval((), v.aval.dtype) for v in operands]
        region = self.region(scalars + scalars, body)
        return self.ops("stablehlo.reduce", [*operands, *inits], [_aval(shape, v.aval.dtype) for v in operands],
                        f"dimensions = {_array(axes)}", [region])


def _nested(shape: tuple, flat: list[str]) -> str:
    """Elements in MLIR's nested-bracket form for a dense array of ``shape``."""
    if not shape:
        return flat[0]
    if 0 in shape:
        return "[]" if len(shape) == 1 else "[" + ", ".join(["[]"] * shape[0]) + "]"
    step = len(flat) // shape[0]
    return "[" + ", ".join(_nested(shape[1:], flat[i * step:(i + 1) * step]) for i in range(shape[0])) + "]"


def _compare_type(dt: np.dtype) -> str:
    if dt == dtypes.bool_ or dt in dtypes.UNSIGNED:
        return "UNSIGNED"
    if dt in dtypes.SIGNED:
        return "SIGNED"
    return "FLOAT"


class Module:
    """One StableHLO module: ``@main``, its value counter, and the mesh of a program over many
    devices (``spmd.MeshAnnotation``; None for one device)."""

    def __init__(self, mesh: Any = None) -> None:
        self._counter = itertools.count()
        self.mesh = mesh
        self.channels = itertools.count(1)  # (each collective's channel handle, numbered from 1 as JAX does)
        self.manual: tuple[str, ...] = ()  # (the mesh axes of the manual computation being lowered)

    def fresh(self) -> str:
        return f"%{next(self._counter)}"


# --- the environment loop ------------------------------------------------------------------------------------
Rule = Callable[..., Any]
lower_rules: RuleTable = RuleTable("pjrt.lowering.lower_rules")

# Primitives not lowered, with the reason a user sees (by name: those defined in rooms above this one).
REFUSED: dict[Primitive, str] = {}
REFUSED_BY_NAME: dict[str, str] = {}


def lower_jaxpr(ctx: Builder, jaxpr: Jaxpr, consts: Sequence[Value], args: Sequence[Value]) -> list[Value]:
    """Emit ``jaxpr`` applied to ``consts`` and ``args``; return its outputs' values."""
    env: dict[int, Value] = {}

    def read(a: Any) -> Value:
        if isinstance(a, Literal):
            return ctx.constant(a.val, a.aval.dtype)
        return env[id(a)]

    for v, x in zip(jaxpr.constvars, consts):
        env[id(v)] = x
    for v, x in zip(jaxpr.invars, args):
        env[id(v)] = x
    for eqn in jaxpr.eqns:
        p = eqn.primitive
        operands = [read(a) for a in eqn.invars]
        out_avals = [v.aval for v in eqn.outvars]
        rule = lower_rules.get(p)
        if rule is not None:
            outs = rule(ctx, out_avals, *operands, **eqn.params)
        elif p in call_params:  # inlined (add_any's body included, a call with one result)
            outs = lower_closed(ctx, eqn.params[call_params[p]], operands)
        else:
            raise refusal(p)
        if not p.multiple_results and not isinstance(outs, list):
            outs = [outs]
        for v, o in zip(eqn.outvars, outs):
            env[id(v)] = o
    return [read(a) for a in jaxpr.outvars]


def lower_closed(ctx: Builder, closed: ClosedJaxpr | Jaxpr, args: Sequence[Value]) -> list[Value]:
    """A sub-program inlined: its constants become constants of the module."""
    if isinstance(closed, Jaxpr):
        return lower_jaxpr(ctx, closed, [], args)
    consts = [ctx.constant(np.asarray(getattr(c, "_value", c)), v.aval.dtype, v.aval.shape)
              for c, v in zip(closed.consts, closed.jaxpr.constvars)]
    return lower_jaxpr(ctx, closed.jaxpr, consts, args)


def refusal(p: Primitive) -> LoweringError:
    reason = REFUSED.get(p) or REFUSED_BY_NAME.get(p.name, "no lowering rule is written for it yet")
    return LoweringError(f"the PJRT backend cannot compile the primitive `{p.name}`: {reason}. "
                         f"Run this program on ember's CPU backend (EMBER_BACKEND=cpu, the default).")


def lower_module(closed: ClosedJaxpr, name: str = "main", donated: Sequence[int] = (),
                 consts_as_parameters: bool = True, mesh: Any = None) -> str:
    """The StableHLO module of ``closed``: ``@main`` takes the program's constants (when
    ``consts_as_parameters``) then its inputs. ``donated``: input positions (not counting the
    constants) whose buffers the outputs may reuse (``tf.aliasing_output``). ``mesh``: a program
    over many devices (``spmd.MeshAnnotation``): the Shardy mesh, the inputs' and results'
    shardings and the partition count, written as JAX 0.10 writes them."""
    jaxpr = closed.jaxpr
    module = Module(mesh)
    body = Builder(module, 4)
    params: list[Value] = []
    if consts_as_parameters:
        const_values = [Value(f"%arg{i}", v.aval) for i, v in enumerate(jaxpr.constvars)]
        params.extend(const_values)
    else:
        const_values = [body.constant(np.asarray(getattr(c, "_value", c)), v.aval.dtype, v.aval.shape)
                        for c, v in zip(closed.consts, jaxpr.constvars)]
    offset = len(params)
    args = [Value(f"%arg{offset + i}", v.aval) for i, v in enumerate(jaxpr.invars)]
    params.extend(args)
    outs = lower_jaxpr(body, jaxpr, const_values, args)
    aliases = donation_aliases([a.aval for a in args], [o.aval for o in outs], donated)
    signature = []
    for i, p in enumerate(params):
        alias = aliases.get(i - offset)
        attrs = [f"tf.aliasing_output = {alias} : i32"] if alias is not None else []
        if mesh is not None and i >= offset:
            attrs.append(f"sdy.sharding = {mesh.inputs[i - offset]}")
        signature.append(f"{p.name}: {tensor_type(p.aval)}" + (f" {{{', '.join(attrs)}}}" if attrs else ""))
    body.lines.append(f"    return {', '.join(o.name for o in outs)} : {', '.join(tensor_type(o.aval) for o in outs)}"
                      if outs else "    return")
    if mesh is None:
        results = ", ".join(tensor_type(o.aval) for o in outs)
    else:
        results = ", ".join(f"{tensor_type(o.aval)} {{sdy.sharding = {s}}}" for o, s in zip(outs, mesh.outputs))
    safe = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name) or "main"
    partitions = 1 if mesh is None else mesh.num_partitions
    mesh_line = "" if mesh is None else f"  {mesh.mesh_text}\n"
    return (f"module @{safe} attributes {{mhlo.num_partitions = {partitions} : i32, mhlo.num_replicas = 1 : i32}} {{\n"
            + mesh_line + f"  func.func public @main({', '.join(signature)}) -> ({results}) {{\n"
            + "\n".join(body.lines) + "\n  }\n}\n")


def donation_aliases(ins: Sequence[ShapedArray], outs: Sequence[ShapedArray],
                     donated: Sequence[int]) -> dict[int, int]:
    """Donated inputs paired with outputs of their type (input -> output), each output at most once:
    the inputs whose buffers PJRT may reuse."""
    taken: set[int] = set()
    out: dict[int, int] = {}
    for i in sorted(donated):
        for k, o in enumerate(outs):
            if k not in taken and o.shape == ins[i].shape and o.dtype == ins[i].dtype:
                out[i] = k
                taken.add(k)
                break
    return out


# --- elementwise -----------------------------------------------------------------------------------------------
def _shaped(ctx: Builder, out: ShapedArray, args: Sequence[Value]) -> list[Value]:
    """Operands broadcast to the result's shape (rank-0 operands of elementwise operations)."""
    return [a if a.aval.shape == out.shape else ctx.broadcast(a, out.shape) for a in args]


def _elementwise(op: str) -> Rule:
    def rule(ctx: Builder, out: list, *args: Value) -> Value:
        return ctx.op(op, _shaped(ctx, out[0], args), out[0])
    return rule


_DIRECT = {
    "neg": "stablehlo.negate", "sign": "stablehlo.sign", "floor": "stablehlo.floor", "ceil": "stablehlo.ceil",
    "abs": "stablehlo.abs", "not": "stablehlo.not", "population_count": "stablehlo.popcnt",
    "is_finite": "stablehlo.is_finite", "real": "stablehlo.real", "imag": "stablehlo.imag",
    "exp": "stablehlo.exponential", "log": "stablehlo.log", "log1p": "stablehlo.log_plus_one",
    "expm1": "stablehlo.exponential_minus_one", "tanh": "stablehlo.tanh", "logistic": "stablehlo.logistic",
    "sin": "stablehlo.sine", "cos": "stablehlo.cosine", "tan": "stablehlo.tan", "sqrt": "stablehlo.sqrt",
    "rsqrt": "stablehlo.rsqrt", "cbrt": "stablehlo.cbrt",
    "asin": "chlo.asin", "acos": "chlo.acos", "atan": "chlo.atan", "sinh": "chlo.sinh", "cosh": "chlo.cosh",
    "asinh": "chlo.asinh", "acosh": "chlo.acosh", "atanh": "chlo.atanh", "erf": "chlo.erf", "erfc": "chlo.erfc",
    "erf_inv": "chlo.erf_inv", "lgamma": "chlo.lgamma", "digamma": "chlo.digamma",
    "add": "stablehlo.add", "sub": "stablehlo.subtract", "mul": "stablehlo.multiply", "div": "stablehlo.divide",
    "rem": "stablehlo.remainder", "pow": "stablehlo.power", "atan2": "stablehlo.atan2",
    "nextafter": "chlo.next_after", "and": "stablehlo.and", "or": "stablehlo.or", "xor": "stablehlo.xor",
    "shift_left": "stablehlo.shift_left", "shift_right_arithmetic": "stablehlo.shift_right_arithmetic",
    "shift_right_logical": "stablehlo.shift_right_logical",
}
_PRIMITIVES = {p.name: p for p in abstract_eval_rules}
for _name, _op in _DIRECT.items():
    lower_rules[_PRIMITIVES[_name]] = _elementwise(_op)


def _compare_rule(direction: str) -> Rule:
    def rule(ctx: Builder, out: list, x: Value, y: Value) -> Value:
        x, y = _shaped(ctx, out[0], (x, y))
        return ctx.compare(direction, x, y)
    return rule


for _p, _dir in ((ew.eq_p, "EQ"), (ew.ne_p, "NE"), (ew.lt_p, "LT"), (ew.le_p, "LE"), (ew.gt_p, "GT"),
                 (ew.ge_p, "GE")):
    lower_rules[_p] = _compare_rule(_dir)


def _max_min(op: str, bool_op: str, greater: bool) -> Rule:
    def rule(ctx: Builder, out: list, x: Value, y: Value) -> Value:
        x, y = _shaped(ctx, out[0], (x, y))
        dt = out[0].dtype
        if dt == dtypes.bool_:
            return ctx.binary(bool_op, x, y)
        if dtypes.is_complex(dt):  # lexicographic on (real, imaginary), as JAX
            part = dtypes.real_dtype(dt)
            rx, ry = (ctx.op("stablehlo.real", [v], _aval(v.aval.shape, part)) for v in (x, y))
            ix_, iy = (ctx.op("stablehlo.imag", [v], _aval(v.aval.shape, part)) for v in (x, y))
            d = "GT" if greater else "LT"
            pick = ctx.binary("stablehlo.or", ctx.compare(d, rx, ry), ctx.binary(
                "stablehlo.and", ctx.compare("EQ", rx, ry), ctx.compare(d, ix_, iy)))
            return ctx.select(pick, x, y)
        return ctx.binary(op, x, y)
    return rule


lower_rules[ew.max_p] = _max_min("stablehlo.maximum", "stablehlo.or", True)
lower_rules[ew.min_p] = _max_min("stablehlo.minimum", "stablehlo.and", False)


def _exp2(ctx: Builder, out: list, x: Value) -> Value:
    """``2 ** x`` (exact at integers; narrow floats computed in float32); complex: exp(x log 2)."""
    dt = x.aval.dtype
    if dtypes.is_complex(dt):
        ln2 = ctx.constant(np.log(2.0), dt, x.aval.shape)
        return ctx.op("stablehlo.exponential", [ctx.binary("stablehlo.multiply", x, ln2)], out[0])
    wide = ctx.convert(x, np.float32) if dt.itemsize < 4 else x
    two = ctx.constant(2, wide.aval.dtype, wide.aval.shape)
    return ctx.convert(ctx.binary("stablehlo.power", two, wide), dt)


def _integer_pow(ctx: Builder, out: list, x: Value, *, y: int) -> Value:
    """Repeated squaring (as JAX): exact for integers, the same roundings for floats."""
    acc, base, n = None, x, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else ctx.binary("stablehlo.multiply", acc, base)
        n >>= 1
        if n:
            base = ctx.binary("stablehlo.multiply", base, base)
    if acc is None:
        acc = ctx.constant(1, x.aval.dtype, x.aval.shape)
    if y < 0:
        acc = ctx.binary("stablehlo.divide", ctx.constant(1, x.aval.dtype, x.aval.shape), acc)
    return acc


def _round(ctx: Builder, out: list, x: Value, *, rounding_method: int) -> Value:
    op = "stablehlo.round_nearest_even" if int(rounding_method) == 1 else "stablehlo.round_nearest_afz"
    return ctx.op(op, [x], out[0])


def _convert(ctx: Builder, out: list, x: Value, *, new_dtype: Any, weak_type: bool = False) -> Value:
    new, old = np.dtype(new_dtype), x.aval.dtype
    if new == old:
        return x
    if dtypes.is_complex(old) and not dtypes.is_complex(new):
        x = ctx.op("stablehlo.real", [x], _aval(x.aval.shape, dtypes.real_dtype(old)))
        old = x.aval.dtype
    if new == dtypes.bool_:
        return ctx.compare("NE", x, ctx.constant(0, old, x.aval.shape))
    return ctx.convert(x, new)


def _bitcast(ctx: Builder, out: list, x: Value, *, new_dtype: Any) -> Value:
    return ctx.op("stablehlo.bitcast_convert", [x], out[0])


def _select_n(ctx: Builder, out: list, which: Value, *operands: Value) -> Value:
    cases = _shaped(ctx, out[0], operands)
    which = _shaped(ctx, _aval(out[0].shape, which.aval.dtype), [which])[0]
    if which.aval.dtype == dtypes.bool_:
        return ctx.select(which, cases[1], cases[0]) if len(cases) == 2 else cases[0]
    result = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        result = ctx.select(ctx.compare("EQ", which, ctx.constant(i, which.aval.dtype, out[0].shape)), cases[i], result)
    return result


def _clamp(ctx: Builder, out: list, lo: Value, x: Value, hi: Value) -> Value:
    # A TPU has no clamp of booleans or complex numbers: min(max(x, lo), hi) for booleans; for
    # complex numbers XLA's clamp, which compares the real parts only (as JAX's gives on a CPU).
    if out[0].dtype == dtypes.bool_:
        return lower_rules[ew.min_p](ctx, out, lower_rules[ew.max_p](ctx, out, x, lo), hi)
    if dtypes.is_complex(out[0].dtype):
        lo, x, hi = _shaped(ctx, out[0], (lo, x, hi))
        part = _aval(out[0].shape, dtypes.real_dtype(out[0].dtype))

        def real(v: Value) -> Value:
            return ctx.op("stablehlo.real", [v], part)
        t = ctx.select(ctx.compare("GE", real(lo), real(x)), lo, x)
        return ctx.select(ctx.compare("GE", real(hi), real(t)), t, hi)
    return ctx.op("stablehlo.clamp", _shaped(ctx, out[0], (lo, x, hi)), out[0])


def _complex(ctx: Builder, out: list, x: Value, y: Value) -> Value:
    return ctx.op("stablehlo.complex", _shaped(ctx, _aval(out[0].shape, x.aval.dtype), (x, y)), out[0])


def _conj(ctx: Builder, out: list, x: Value, *, input_dtype: Any = None) -> Value:
    if not dtypes.is_complex(x.aval.dtype):
        return ctx.convert(x, out[0].dtype)
    part = _aval(x.aval.shape, dtypes.real_dtype(x.aval.dtype))
    re = ctx.op("stablehlo.real", [x], part)
    im = ctx.op("stablehlo.negate", [ctx.op("stablehlo.imag", [x], part)], part)
    return ctx.op("stablehlo.complex", [re, im], out[0])


lower_rules.update({
    ew.exp2_p: _exp2, ew.integer_pow_p: _integer_pow, ew.round_p: _round,
    ew.square_p: lambda ctx, out, x: ctx.binary("stablehlo.multiply", x, x),
    ew.convert_element_type_p: _convert, ew.bitcast_convert_type_p: _bitcast, ew.select_n_p: _select_n,
    ew.clamp_p: _clamp, ew.complex_p: _complex, ew.conj_p: _conj,
})


# --- shapes ----------------------------------------------------------------------------------------------------
def _broadcast_in_dim(ctx: Builder, out: list, x: Value, *, shape: tuple, broadcast_dimensions: tuple,
                      **_: Any) -> Value:
    return ctx.broadcast(x, shape, broadcast_dimensions)


def _reshape(ctx: Builder, out: list, x: Value, *, new_sizes: tuple, dimensions: Any, **_: Any) -> Value:
    if dimensions is not None:
        x = ctx.transpose(x, dimensions)
    return ctx.reshape(x, new_sizes)


def _pad(ctx: Builder, out: list, x: Value, value: Value, *, padding_config: tuple) -> Value:
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    return ctx.op("stablehlo.pad", [x, value], out[0], f"edge_padding_high = {_array(hi)}, edge_padding_low = "
                  f"{_array(lo)}, interior_padding = {_array(interior)}")


def _index_scalars(ctx: Builder, starts: Sequence[Value]) -> list[Value]:
    """Start indices of one integer type (StableHLO's dynamic slices want one)."""
    if not starts:
        return []
    kinds = {s.aval.dtype for s in starts}
    target = next(iter(kinds)) if len(kinds) == 1 else np.dtype(np.int64)
    return [ctx.convert(s, target) for s in starts]


def _dynamic_slice(ctx: Builder, out: list, x: Value, *starts: Value, slice_sizes: tuple) -> Value:
    return ctx.op("stablehlo.dynamic_slice", [x, *_index_scalars(ctx, starts)], out[0],
                  f"slice_sizes = {_array(slice_sizes)}")


def _dynamic_update_slice(ctx: Builder, out: list, x: Value, update: Value, *starts: Value) -> Value:
    return ctx.op("stablehlo.dynamic_update_slice", [x, update, *_index_scalars(ctx, starts)], out[0])


def _concatenate(ctx: Builder, out: list, *xs: Value, dimension: int) -> Value:
    return ctx.op("stablehlo.concatenate", list(xs), out[0], f"dimension = {int(dimension)} : i64")


def _iota(ctx: Builder, out: list, *, dtype: Any, shape: tuple, dimension: int, **_: Any) -> Value:
    if out[0].dtype == dtypes.bool_:
        return ctx.convert(ctx.iota(shape, dimension), np.bool_)
    return ctx.iota(shape, dimension, out[0].dtype)


lower_rules.update({
    sh.broadcast_in_dim_p: _broadcast_in_dim,
    sh.reshape_p: _reshape,
    sh.transpose_p: lambda ctx, out, x, *, permutation: ctx.transpose(x, permutation),
    sh.squeeze_p: lambda ctx, out, x, *, dimensions: ctx.reshape(x, out[0].shape),
    sh.rev_p: lambda ctx, out, x, *, dimensions: ctx.op("stablehlo.reverse", [x], out[0],
                                                       f"dimensions = {_array(dimensions)}"),
    sh.slice_p: lambda ctx, out, x, *, start_indices, limit_indices, strides: ctx.slice(
        x, start_indices, limit_indices, strides),
    sh.concatenate_p: _concatenate,
    sh.pad_p: _pad,
    sh.iota_p: _iota,
    sh.dynamic_slice_p: _dynamic_slice,
    sh.dynamic_update_slice_p: _dynamic_update_slice,
})

# Identities: values pass through.
for _p in (stop_gradient_p, ew.copy_p):
    lower_rules[_p] = lambda ctx, out, x, **_: x


def _sharding_constraint(ctx: Builder, out: list, x: Value, *, spec: Any) -> Value:
    """``with_sharding_constraint``: in a program over a mesh, Shardy's constraint (the value split
    as ``spec`` says over the program's mesh); on one device, the value itself."""
    mesh = ctx.module.mesh
    if mesh is None:
        return x
    sharding = mesh.sharding_text(shd.NamedSharding(mesh.mesh, spec), x.aval.ndim)
    return ctx.op("sdy.sharding_constraint", [x], out[0], f"sharding = {sharding}")


lower_rules[parallel.sharding_constraint_p] = _sharding_constraint
lower_rules[name_p] = lambda ctx, out, x, *, name: x
lower_rules[optimization_barrier_p] = lambda ctx, out, *xs: (
    ctx.ops("stablehlo.optimization_barrier", xs, out) if xs else [])


# --- reductions ------------------------------------------------------------------------------------------------
def _monoid(op: str, bool_op: str | None = None) -> Callable[[np.dtype], str]:
    return lambda dt: bool_op if dt == dtypes.bool_ and bool_op else op


_REDUCTIONS = {
    red.reduce_sum_p: (_monoid("stablehlo.add", "stablehlo.or"), lambda dt: 0),
    red.reduce_prod_p: (_monoid("stablehlo.multiply", "stablehlo.and"), lambda dt: 1),
    red.reduce_max_p: (_monoid("stablehlo.maximum", "stablehlo.or"), dtypes.lowest),
    red.reduce_min_p: (_monoid("stablehlo.minimum", "stablehlo.and"), dtypes.highest),
    red.reduce_and_p: (_monoid("stablehlo.and"), lambda dt: True if dt == dtypes.bool_ else -1),
    red.reduce_or_p: (_monoid("stablehlo.or"), lambda dt: 0),
    red.reduce_xor_p: (_monoid("stablehlo.xor"), lambda dt: 0),
}


def _reduction(p: Primitive) -> Rule:
    op_of, identity = _REDUCTIONS[p]

    def rule(ctx: Builder, out: list, x: Value, *, axes: tuple, **_: Any) -> Value:
        dt = x.aval.dtype
        if dtypes.is_complex(dt) and p in (red.reduce_max_p, red.reduce_min_p):
            return _complex_extremum_reduce(ctx, out, x, axes, p is red.reduce_max_p)
        init = ctx.constant(identity(dt), dt)
        op = op_of(dt)
        [r] = ctx.reduce([x], [init], axes, lambda b, acc, v: [b.binary(op, acc, v)])
        return r
    return rule


def _complex_extremum_reduce(ctx: Builder, out: list, x: Value, axes: tuple, greater: bool) -> Value:
    dt = x.aval.dtype
    init = ctx.constant(complex(dtypes.lowest(dt) if greater else dtypes.highest(dt), 0), dt)
    rule = lower_rules[ew.max_p if greater else ew.min_p]
    [r] = ctx.reduce([x], [init], axes, lambda b, acc, v: [rule(b, [acc.aval], acc, v)])
    return r


for _p in _REDUCTIONS:
    lower_rules[_p] = _reduction(_p)


def _argminmax(greater: bool) -> Rule:
    def rule(ctx: Builder, out: list, x: Value, *, axis: int, index_dtype: Any) -> Value:
        dt, idt = x.aval.dtype, np.dtype(index_dtype)
        index = ctx.iota(x.aval.shape, axis, idt)
        value_init = ctx.constant(dtypes.lowest(dt) if greater else dtypes.highest(dt), dt)
        if dtypes.is_complex(dt):
            value_init = ctx.constant(complex(dtypes.lowest(dt) if greater else dtypes.highest(dt), 0), dt)
        index_init = ctx.constant(0, idt)

        def body(b: Builder, av: Value, ai: Value, bv: Value, bi: Value) -> list[Value]:
            # a wins when it is strictly better, or a NaN against a number; equal values (NaN and
            # NaN included) go to the smaller index: the first occurrence, as JAX's.
            better = _better(b, av, bv, greater)
            a_nan, b_nan = _is_nan(b, av), _is_nan(b, bv)
            a_wins = b.binary("stablehlo.or", better, b.binary("stablehlo.and", a_nan, b.op(
                "stablehlo.not", [b_nan], b_nan.aval)))
            same = b.binary("stablehlo.or", _equal(b, av, bv), b.binary("stablehlo.and", a_nan, b_nan))
            take_a_index = b.binary("stablehlo.or", a_wins, b.binary("stablehlo.and", same, b.compare("LT", ai, bi)))
            return [b.select(a_wins, av, bv), b.select(take_a_index, ai, bi)]

        _, idx = ctx.reduce([x, index], [value_init, index_init], [axis], body)
        return idx
    return rule


def _is_nan(b: Builder, v: Value) -> Value:
    if v.aval.dtype.kind in "biu" or v.aval.dtype == dtypes.bool_:
        return b.constant(False, np.bool_, v.aval.shape)
    return b.compare("NE", v, v, "FLOAT")


def _equal(b: Builder, x: Value, y: Value) -> Value:
    return b.compare("EQ", x, y)


def _better(b: Builder, x: Value, y: Value, greater: bool) -> Value:
    d = "GT" if greater else "LT"
    if dtypes.is_complex(x.aval.dtype):
        part = dtypes.real_dtype(x.aval.dtype)
        rx, ry = (b.op("stablehlo.real", [v], _aval(v.aval.shape, part)) for v in (x, y))
        ix_, iy = (b.op("stablehlo.imag", [v], _aval(v.aval.shape, part)) for v in (x, y))
        return b.binary("stablehlo.or", b.compare(d, rx, ry),
                        b.binary("stablehlo.and", b.compare("EQ", rx, ry), b.compare(d, ix_, iy)))
    return b.compare(d, x, y)


lower_rules[red.argmax_p] = _argminmax(True)
lower_rules[red.argmin_p] = _argminmax(False)


def _reduce_window(ctx: Builder, x: Value, init: Value, out: ShapedArray, body: Callable[..., Sequence[Value]],
                   window_dimensions: Sequence[int], window_strides: Sequence[int], padding: Sequence,
                   base_dilation: Sequence[int], window_dilation: Sequence[int]) -> Value:
    scalar = _aval((), x.aval.dtype)
    region = ctx.region([scalar, scalar], body)
    pads = _padding_attr(padding)
    return ctx.op("stablehlo.reduce_window", [x, init], out,
                  f"base_dilations = {_array(base_dilation)}, padding = {pads}, window_dilations = "
                  f"{_array(window_dilation)}, window_dimensions = {_array(window_dimensions)}, "
                  f"window_strides = {_array(window_strides)}", [region])


def _padding_attr(padding: Sequence) -> str:
    pairs = [f"[{int(lo)}, {int(hi)}]" for lo, hi in padding]
    return f"dense<[{', '.join(pairs)}]> : tensor<{len(pairs)}x2xi64>" if pairs else "dense<> : tensor<0x2xi64>"


def _cumulative(p: Primitive) -> Rule:
    def rule(ctx: Builder, out: list, x: Value, *, axis: int, reverse: bool) -> Value:
        dt, n = x.aval.dtype, x.aval.shape[axis]
        body: Callable[[Builder, Value, Value], list[Value]]  # (the accumulator, the next value)
        if p is red.cumlogsumexp_p:
            init, body = dtypes.lowest(dt), _logaddexp
        else:
            reduction = {red.cumsum_p: red.reduce_sum_p, red.cumprod_p: red.reduce_prod_p,
                         red.cummax_p: red.reduce_max_p, red.cummin_p: red.reduce_min_p}[p]
            op_of, identity = _REDUCTIONS[reduction]
            init, op = identity(dt), op_of(dt)
            body = lambda b, acc, v: [b.binary(op, acc, v)]
            if dtypes.is_complex(dt) and p in (red.cummax_p, red.cummin_p):
                init = complex(dtypes.lowest(dt) if p is red.cummax_p else dtypes.highest(dt), 0)
                extremum = lower_rules[ew.max_p if p is red.cummax_p else ew.min_p]
                body = lambda b, acc, v: [extremum(b, [acc.aval], acc, v)]
        rank = x.aval.ndim
        window = [1] * rank
        window[axis] = max(n, 1)
        padding = [(0, 0)] * rank
        padding[axis] = (0, n - 1) if reverse else (n - 1, 0)
        return _reduce_window(ctx, x, ctx.constant(init, dt), out[0], body, window, [1] * rank, padding,
                              [1] * rank, [1] * rank)
    return rule


def _logaddexp(b: Builder, x: Value, y: Value) -> list[Value]:
    """log(exp(x) + exp(y)) without overflow; infinite maxima (and NaN) pass through."""
    hi = b.binary("stablehlo.maximum", x, y)
    lo = b.binary("stablehlo.minimum", x, y)
    term = b.op("stablehlo.log_plus_one", [b.op("stablehlo.exponential", [b.binary("stablehlo.subtract", lo, hi)],
                                                 hi.aval)], hi.aval)
    finite = b.op("stablehlo.is_finite", [hi], _aval((), np.bool_))
    return [b.select(finite, b.binary("stablehlo.add", hi, term), hi)]


for _p in (red.cumsum_p, red.cumprod_p, red.cummax_p, red.cummin_p, red.cumlogsumexp_p):
    lower_rules[_p] = _cumulative(_p)


def _reduce_window_rule(p: Primitive) -> Rule:
    def rule(ctx: Builder, out: list, x: Value, *, window_dimensions: tuple, window_strides: tuple, padding: tuple,
             base_dilation: tuple, window_dilation: tuple) -> Value:
        dt = x.aval.dtype
        identity = conv.window_identity(p, dt)
        op = {conv.reduce_window_sum_p: _monoid("stablehlo.add", "stablehlo.or"),
              conv.reduce_window_max_p: _monoid("stablehlo.maximum", "stablehlo.or"),
              conv.reduce_window_min_p: _monoid("stablehlo.minimum", "stablehlo.and")}[p](dt)
        return _reduce_window(ctx, x, ctx.constant(identity, dt), out[0], lambda b, acc, v: [b.binary(op, acc, v)],
                              window_dimensions, window_strides, padding, base_dilation, window_dilation)
    return rule


for _p in (conv.reduce_window_sum_p, conv.reduce_window_max_p, conv.reduce_window_min_p):
    lower_rules[_p] = _reduce_window_rule(_p)


def _sliding_windows(ctx: Builder, out: list, x: Value, *, window_dimensions: tuple, window_strides: tuple,
                     window_dilation: tuple) -> Value:
    """Every window as strided slices, one per window offset, stacked on a last dimension."""
    rank = x.aval.ndim
    positions = out[0].shape[:rank]
    pieces = []
    for offset in itertools.product(*(range(w) for w in window_dimensions)):
        start = [o * d for o, d in zip(offset, window_dilation)]
        limit = [s + (p - 1) * st + 1 if p else s for s, p, st in zip(start, positions, window_strides)]
        piece = ctx.slice(x, start, limit, window_strides)
        pieces.append(ctx.reshape(piece, tuple(positions) + (1,)))
    if not pieces:
        return ctx.constant(0, x.aval.dtype, out[0].shape)
    stacked = pieces[0] if len(pieces) == 1 else ctx.op(
        "stablehlo.concatenate", pieces, _aval(tuple(positions) + (len(pieces),), x.aval.dtype),
        f"dimension = {rank} : i64")
    return ctx.reshape(stacked, out[0].shape)


lower_rules[conv.sliding_windows_p] = _sliding_windows


# --- sort and top_k ----------------------------------------------------------------------------------------------
def _canonical_for_sort(b: Builder, v: Value) -> Value:
    """-0 as 0 and every NaN as one positive NaN, so the total order sorts as JAX's does."""
    dt = v.aval.dtype
    if not dtypes.is_floating(dt):
        return v
    zero = b.constant(0, dt)
    v = b.select(b.compare("EQ", v, zero, "FLOAT"), zero, v)
    return b.select(b.compare("NE", v, v, "FLOAT"), b.constant(np.nan, dt), v)


def _key_parts(b: Builder, v: Value) -> list[Value]:
    if dtypes.is_complex(v.aval.dtype):
        part = _aval((), dtypes.real_dtype(v.aval.dtype))
        return [_canonical_for_sort(b, b.op("stablehlo.real", [v], part)),
                _canonical_for_sort(b, b.op("stablehlo.imag", [v], part))]
    return [_canonical_for_sort(b, v)]


def _order(b: Builder, direction: str, x: Value, y: Value) -> Value:
    kind = "TOTALORDER" if dtypes.is_floating(x.aval.dtype) else _compare_type(x.aval.dtype)
    return b.compare(direction, x, y, kind)


def _lexicographic(b: Builder, pairs: list[tuple[Value, Value]], direction: str) -> Value:
    """``direction`` (LT or GT) on the keys in order, later keys breaking ties."""
    result = None
    for x, y in reversed(pairs):
        strict = _order(b, direction, x, y)
        result = strict if result is None else b.binary(
            "stablehlo.or", strict, b.binary("stablehlo.and", _order(b, "EQ", x, y), result))
    assert result is not None  # (there is at least one key)
    return result


def _sort_region(ctx: Builder, operands: Sequence[Value], num_keys: int, direction: str) -> str:
    scalars = [_aval((), v.aval.dtype) for v in operands]
    n = len(operands)

    def body(b: Builder, *args: Value) -> list[Value]:
        pairs = []
        for k in range(num_keys):
            for x, y in zip(_key_parts(b, args[2 * k]), _key_parts(b, args[2 * k + 1])):
                pairs.append((x, y))
        return [_lexicographic(b, pairs, direction)]

    interleaved = [a for k in range(n) for a in (scalars[k], scalars[k])]
    return ctx.region(interleaved, body)


def _sort(ctx: Builder, out: list, *operands: Value, dimension: int, is_stable: bool, num_keys: int) -> list[Value]:
    region = _sort_region(ctx, operands, num_keys, "LT")
    return ctx.ops("stablehlo.sort", operands, out, f"dimension = {int(dimension)} : i64, is_stable = "
                   f"{'true' if is_stable else 'false'}", [region])


def _top_k(ctx: Builder, out: list, x: Value, *, k: int, axis: int) -> list[Value]:
    """A stable sort in descending order with the positions, then the first k."""
    index = ctx.iota(x.aval.shape, axis, out[1].dtype)
    region = _sort_region(ctx, [x, index], 1, "GT")
    values, indices = ctx.ops("stablehlo.sort", [x, index], [x.aval, index.aval],
                              f"dimension = {int(axis)} : i64, is_stable = true", [region])
    limit = list(x.aval.shape)
    limit[axis] = k
    zeros = [0] * x.aval.ndim
    return [ctx.slice(values, zeros, limit), ctx.slice(indices, zeros, limit)]


lower_rules[red.sort_p] = _sort
lower_rules[red.top_k_p] = _top_k


# --- contractions ------------------------------------------------------------------------------------------------
def _precision_config(precision: Any) -> str:
    """``precision_config`` for a contraction: the operands' precisions as given, else
    ``default_matmul_precision`` if set, else DEFAULT (the plugin's choice: on a TPU, bfloat16
    passes; on CPUs and GPUs, full float32)."""
    if precision is None:
        precision = getattr(config, "default_matmul_precision", None)
        if precision is None:
            return ""
    pair = precision if isinstance(precision, (tuple, list)) else (precision, precision)
    names = [Precision(p).name if not isinstance(p, Precision) else p.name for p in pair]
    return "precision_config = [" + ", ".join(f"#stablehlo<precision {n}>" for n in names) + "]"


def _dot_general(ctx: Builder, out: list, lhs: Value, rhs: Value, *, dimension_numbers: Any, precision: Any,
                 preferred_element_type: Any, **_: Any) -> Value:
    (lc, rc), (lb, rb) = dimension_numbers
    dt = out[0].dtype
    compute = np.dtype(np.int32) if dt == dtypes.bool_ else dt
    lhs, rhs = ctx.convert(lhs, compute), ctx.convert(rhs, compute)
    numbers = (f"#stablehlo.dot<lhs_batching_dimensions = [{', '.join(map(str, lb))}], rhs_batching_dimensions = "
               f"[{', '.join(map(str, rb))}], lhs_contracting_dimensions = [{', '.join(map(str, lc))}], "
               f"rhs_contracting_dimensions = [{', '.join(map(str, rc))}]>")
    props = f"dot_dimension_numbers = {numbers}"
    config_text = _precision_config(precision)
    if config_text:
        props += ", " + config_text
    result = ctx.op("stablehlo.dot_general", [lhs, rhs], _aval(out[0].shape, compute), props)
    return _convert(ctx, out, result, new_dtype=dt)


lower_rules[dot_general_p] = _dot_general


def _conv(ctx: Builder, out: list, lhs: Value, rhs: Value, *, window_strides: tuple, padding: tuple,
          lhs_dilation: tuple, rhs_dilation: tuple, dimension_numbers: Any, feature_group_count: int,
          batch_group_count: int, precision: Any, preferred_element_type: Any) -> Value:
    dt = out[0].dtype
    lhs, rhs = ctx.convert(lhs, dt), ctx.convert(rhs, dt)
    lhs_spec, rhs_spec, out_spec = dimension_numbers

    def labels(spec: Sequence[int], first: str, second: str) -> str:
        names = [""] * len(spec)
        names[spec[0]], names[spec[1]] = first, second
        for i, d in enumerate(spec[2:]):
            names[d] = str(i)
        return "[" + ", ".join(names) + "]"

    numbers = (f"#stablehlo.conv<{labels(lhs_spec, 'b', 'f')}x{labels(rhs_spec, 'o', 'i')}->"
               f"{labels(out_spec, 'b', 'f')}>")
    props = (f"batch_group_count = {int(batch_group_count)} : i64, dimension_numbers = {numbers}, "
             f"feature_group_count = {int(feature_group_count)} : i64, lhs_dilation = {_array(lhs_dilation)}, "
             f"padding = {_padding_attr(padding)}, rhs_dilation = {_array(rhs_dilation)}, "
             f"window_strides = {_array(window_strides)}")
    config_text = _precision_config(precision)
    if config_text:
        props += ", " + config_text
    return ctx.op("stablehlo.convolution", [lhs, rhs], out[0], props)


lower_rules[conv.conv_general_dilated_p] = _conv


# --- gather and scatter ------------------------------------------------------------------------------------------
def _dims(values: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def _gather(ctx: Builder, out: list, operand: Value, indices: Value, *, dimension_numbers: Any, slice_sizes: tuple,
            mode: Any, fill_value: Any, indices_are_sorted: bool, unique_indices: bool) -> Value:
    dn = dimension_numbers
    index_vector_dim = indices.aval.ndim - 1
    numbers = (f"#stablehlo.gather<offset_dims = {_dims(dn.offset_dims)}, collapsed_slice_dims = "
               f"{_dims(dn.collapsed_slice_dims)}, operand_batching_dims = {_dims(dn.operand_batching_dims)}, "
               f"start_indices_batching_dims = {_dims(dn.start_indices_batching_dims)}, start_index_map = "
               f"{_dims(dn.start_index_map)}, index_vector_dim = {index_vector_dim}>")
    result = ctx.op("stablehlo.gather", [operand, indices], out[0],
                    f"dimension_numbers = {numbers}, indices_are_sorted = {'true' if indices_are_sorted else 'false'}, "
                    f"slice_sizes = {_array(slice_sizes)}")
    if mode != ix.GatherScatterMode.FILL_OR_DROP:
        return result  # StableHLO clamps start indices, as 'clip' and 'promise_in_bounds' ask
    in_bounds = _windows_in_bounds(ctx, operand, indices, dn.start_index_map, slice_sizes)
    batch_dims = [d for d in range(out[0].ndim) if d not in dn.offset_dims]
    mask = ctx.broadcast(in_bounds, out[0].shape, batch_dims)
    fill = default_fill_value(operand.aval.dtype) if fill_value is None else fill_value
    return ctx.select(mask, result, ctx.constant(fill, operand.aval.dtype, out[0].shape))


def _windows_in_bounds(ctx: Builder, operand: Value, indices: Value, index_map: Sequence[int],
                       window_sizes: Sequence[int]) -> Value:
    """Per index vector: whether its window lies inside the operand (shape: indices' batch shape)."""
    idt = indices.aval.dtype
    batch = indices.aval.shape[:-1]
    rank = indices.aval.ndim
    ok = ctx.constant(True, np.bool_, batch)
    for k, d in enumerate(index_map):
        start = [0] * rank
        limit = list(indices.aval.shape)
        start[-1], limit[-1] = k, k + 1
        component = ctx.reshape(ctx.slice(indices, start, limit), batch)
        upper = operand.aval.shape[d] - window_sizes[d]
        fits = ctx.binary("stablehlo.and", ctx.compare("GE", component, ctx.constant(0, idt, batch)),
                          ctx.compare("LE", component, ctx.constant(upper, idt, batch)))
        ok = ctx.binary("stablehlo.and", ok, fits)
    return ok


def _clamped_indices(ctx: Builder, operand: Value, indices: Value, index_map: Sequence[int],
                     window_sizes: Sequence[int]) -> Value:
    """Each index vector moved inside the operand ('clip')."""
    idt = indices.aval.dtype
    highs = [max(operand.aval.shape[d] - window_sizes[d], 0) for d in index_map]
    lo = ctx.constant(0, idt, indices.aval.shape)
    hi = ctx.constant(np.array(highs, dtype=idt), idt, indices.aval.shape)
    return ctx.op("stablehlo.clamp", [lo, indices, hi], indices.aval)


_SCATTER_COMBINE = {
    ix.scatter_p: lambda dt: None, ix.scatter_add_p: _monoid("stablehlo.add", "stablehlo.or"),
    ix.scatter_sub_p: lambda dt: "stablehlo.subtract", ix.scatter_mul_p: _monoid("stablehlo.multiply", "stablehlo.and"),
    ix.scatter_min_p: _monoid("stablehlo.minimum", "stablehlo.and"),
    ix.scatter_max_p: _monoid("stablehlo.maximum", "stablehlo.or"),
}


def _scatter(p: Primitive) -> Rule:
    def rule(ctx: Builder, out: list, operand: Value, indices: Value, updates: Value, *, dimension_numbers: Any,
             mode: Any, indices_are_sorted: bool, unique_indices: bool) -> Value:
        dn = dimension_numbers
        dt = operand.aval.dtype
        if mode == ix.GatherScatterMode.CLIP:
            window_dims = [d for d in range(operand.aval.ndim)
                           if d not in dn.inserted_window_dims and d not in dn.operand_batching_dims]
            sizes = [1] * operand.aval.ndim
            for ud, od in zip(dn.update_window_dims, window_dims):
                sizes[od] = updates.aval.shape[ud]
            indices = _clamped_indices(ctx, operand, indices, dn.scatter_dims_to_operand_dims, sizes)
        op = _SCATTER_COMBINE[p](dt)
        if dtypes.is_complex(dt) and p in (ix.scatter_min_p, ix.scatter_max_p):
            extremum = lower_rules[ew.max_p if p is ix.scatter_max_p else ew.min_p]
            combine = lambda b, old, new: [extremum(b, [old.aval], old, new)]
        elif op is None:
            combine = lambda b, old, new: [new]
        else:
            combine = lambda b, old, new: [b.binary(op, old, new)]
        scalar = _aval((), dt)
        region = ctx.region([scalar, scalar], combine)
        numbers = (f"#stablehlo.scatter<update_window_dims = {_dims(dn.update_window_dims)}, inserted_window_dims = "
                   f"{_dims(dn.inserted_window_dims)}, input_batching_dims = {_dims(dn.operand_batching_dims)}, "
                   f"scatter_indices_batching_dims = {_dims(dn.scatter_indices_batching_dims)}, "
                   f"scatter_dims_to_operand_dims = {_dims(dn.scatter_dims_to_operand_dims)}, "
                   f"index_vector_dim = {indices.aval.ndim - 1}>")
        return ctx.op("stablehlo.scatter", [operand, indices, updates], out[0],
                      f"indices_are_sorted = {'true' if indices_are_sorted else 'false'}, scatter_dimension_numbers = "
                      f"{numbers}, unique_indices = {'true' if unique_indices else 'false'}", [region])
    return rule


lower_rules[ix.gather_p] = _gather
for _p in _SCATTER_COMBINE:
    lower_rules[_p] = _scatter(_p)


# --- control flow ------------------------------------------------------------------------------------------------
def _while(ctx: Builder, out: list, *operands: Value, body_jaxpr: ClosedJaxpr, body_nconsts: int,
           cond_jaxpr: ClosedJaxpr, cond_nconsts: int) -> list[Value]:
    """The constants ride along as loop-carried values (the regions capture nothing)."""
    avals = [v.aval for v in operands]
    c, b = cond_nconsts, body_nconsts

    def cond(r: Builder, *args: Value) -> list[Value]:
        return lower_closed(r, cond_jaxpr, [*args[:c], *args[c + b:]])

    def body(r: Builder, *args: Value) -> list[Value]:
        carry = lower_closed(r, body_jaxpr, [*args[c:c + b], *args[c + b:]])
        return [*args[:c + b], *carry]

    results = ctx.ops("stablehlo.while", operands, avals, "", [ctx.region(avals, cond), ctx.region(avals, body)])
    return results[c + b:]


def _cond(ctx: Builder, out: list, index: Value, *operands: Value, branches: tuple) -> list[Value]:
    """``case``: an index outside the branches takes the last one (StableHLO's rule and the reference's)."""
    n = len(branches)
    if index.aval.dtype == dtypes.bool_:
        index = ctx.convert(index, np.int32)
    elif index.aval.dtype != np.int32:
        dt = index.aval.dtype
        outside = ctx.compare("GE", index, ctx.constant(n, dt))
        if not dtypes.is_unsigned(dt):
            outside = ctx.binary("stablehlo.or", outside, ctx.compare("LT", index, ctx.constant(0, dt)))
        index = ctx.convert(ctx.select(outside, ctx.constant(n - 1, dt), index), np.int32)
    regions = [ctx.region([], lambda r, branch=branch: lower_closed(r, branch, operands)) for branch in branches]
    if not out:
        return []
    return ctx.ops("stablehlo.case", [index], out, "", regions)


def _scan(ctx: Builder, out: list, *operands: Value, jaxpr: ClosedJaxpr, length: int, num_carry: int,
          num_consts: int, reverse: bool, unroll: Any = 1, **_: Any) -> list[Value]:
    """A ``while`` over a counter: step i reads xs[i] with dynamic slices and writes ys[i] with
    dynamic update slices (i counts down when ``reverse``)."""
    consts = list(operands[:num_consts])
    carry = list(operands[num_consts:num_consts + num_carry])
    xs = list(operands[num_consts + num_carry:])
    y_avals = out[num_carry:]
    ys = [ctx.constant(0, a.dtype, a.shape) for a in y_avals]
    counter = ctx.constant(0, np.int32)
    state = [counter, *consts, *carry, *xs, *ys]
    avals = [v.aval for v in state]
    nc, nk, nx = num_consts, num_carry, len(xs)

    def cond(r: Builder, i: Value, *rest: Value) -> list[Value]:
        return [r.compare("LT", i, r.constant(length, np.int32))]

    def body(r: Builder, i: Value, *rest: Value) -> list[Value]:
        c_in, k_in = rest[:nc], rest[nc:nc + nk]
        x_in, y_in = rest[nc + nk:nc + nk + nx], rest[nc + nk + nx:]
        step = r.binary("stablehlo.subtract", r.constant(length - 1, np.int32), i) if reverse else i
        zero = r.constant(0, np.int32)
        x_t = []
        for x in x_in:
            piece = r.op("stablehlo.dynamic_slice", [x, step, *[zero] * (x.aval.ndim - 1)],
                         _aval((1,) + x.aval.shape[1:], x.aval.dtype),
                         f"slice_sizes = {_array((1,) + x.aval.shape[1:])}")
            x_t.append(r.reshape(piece, x.aval.shape[1:]))
        results = lower_closed(r, jaxpr, [*c_in, *k_in, *x_t])
        new_carry, y_t = results[:nk], results[nk:]
        new_ys = [r.op("stablehlo.dynamic_update_slice", [y, r.reshape(v, (1,) + v.aval.shape), step,
                                                         *[zero] * (y.aval.ndim - 1)], y.aval)
                  for y, v in zip(y_in, y_t)]
        return [r.binary("stablehlo.add", i, r.constant(1, np.int32)), *c_in, *new_carry, *x_in, *new_ys]

    results = ctx.ops("stablehlo.while", state, avals, "", [ctx.region(avals, cond), ctx.region(avals, body)])
    return [*results[1 + nc:1 + nc + nk], *results[1 + nc + nk + nx:]]


lower_rules[cf.while_p] = _while
lower_rules[cf.cond_p] = _cond
lower_rules[cf.scan_p] = _scan
lower_rules[fusion_p] = lambda ctx, out, *args, jaxpr, name: lower_closed(ctx, jaxpr, args)
lower_rules[checkpoint_p] = lambda ctx, out, *args, jaxpr, **_: lower_closed(ctx, jaxpr, args)


# --- the incomplete gamma and beta functions -------------------------------------------------------------
def _special(p: Primitive) -> Rule:
    """The series and continued fractions in a ``while`` that ``ember.lax.special`` writes (the
    reference interpreter's program, so both compute the same thing), in float32 or float64."""
    def rule(ctx: Builder, out: list, *args: Value) -> Value:
        dt = out[0].dtype
        wide = np.dtype(np.float64 if dt == np.float64 else np.float32)
        wide_args = [ctx.convert(a, wide) for a in _shaped(ctx, out[0], args)]
        [value] = lower_closed(ctx, special_program(p, out[0].shape, wide, len(wide_args)), wide_args)
        return ctx.convert(value, dt)
    return rule


for _p in (special.igamma_p, special.igammac_p, special.betainc_p):
    lower_rules[_p] = _special(_p)


# --- FFT and linear algebra -----------------------------------------------------------------------------------
def _fft(ctx: Builder, out: list, x: Value, *, fft_type: Any, fft_lengths: tuple) -> Value:
    kind = FftType(int(fft_type)).name
    return ctx.op("stablehlo.fft", [x], out[0], f"fft_length = {_array(fft_lengths)}, fft_type = "
                  f"#stablehlo<fft_type {kind}>")


def _triangle_mask(ctx: Builder, shape: Sequence[int], lower: bool) -> Value:
    rows, cols = ctx.iota(shape, len(shape) - 2), ctx.iota(shape, len(shape) - 1)
    return ctx.compare("GE" if lower else "LE", rows, cols)


def _cholesky(ctx: Builder, out: list, x: Value, **_: Any) -> Value:
    """The lower factor, the other triangle zero (as the reference and JAX)."""
    factor = ctx.op("stablehlo.cholesky", [x], out[0], "lower = true")
    return ctx.select(_triangle_mask(ctx, out[0].shape, True), factor, ctx.constant(0, out[0].dtype, out[0].shape))


def _triangular_solve(ctx: Builder, out: list, a: Value, b: Value, *, left_side: bool, lower: bool,
                      transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> Value:
    complex_ = dtypes.is_complex(a.aval.dtype)
    if conjugate_a and not transpose_a and complex_:
        a = _conj(ctx, [a.aval], a)
    mode = "ADJOINT" if transpose_a and conjugate_a and complex_ else "TRANSPOSE" if transpose_a else "NO_TRANSPOSE"
    flag = lambda v: "true" if v else "false"
    return ctx.op("stablehlo.triangular_solve", [a, b], out[0],
                  f"left_side = {flag(left_side)}, lower = {flag(lower)}, transpose_a = #stablehlo<transpose {mode}>, "
                  f"unit_diagonal = {flag(unit_diagonal)}")


def _swap_rows(b: Builder, x: Value, rows: Value, k: Value, p: Value) -> Value:
    """``x`` ([B, m, ...]) with rows k (a scalar) and p (one per batch, [B]) exchanged, by selects:
    exact for every value."""
    shape, dt = x.aval.shape, x.aval.dtype
    trailing = shape[2:]
    row_k = b.op("stablehlo.dynamic_slice", [x, b.constant(0, np.int32), k, *[b.constant(0, np.int32)] * len(trailing)],
                 _aval((shape[0], 1, *trailing), dt), f"slice_sizes = {_array((shape[0], 1, *trailing))}")
    is_p = b.compare("EQ", rows, b.broadcast(p, shape, [0]))
    [row_p] = b.reduce([b.select(is_p, x, b.constant(0, dt, shape))], [b.constant(0, dt)], [1],
                       lambda r, acc, v: [r.binary("stablehlo.or" if dt == dtypes.bool_ else "stablehlo.add", acc, v)])
    is_k = b.compare("EQ", rows, b.broadcast(k, shape))
    keep = list(range(len(shape)))
    return b.select(is_k, b.broadcast(row_p, shape, [0] + keep[2:]),
                    b.select(is_p, b.broadcast(b.reshape(row_k, (shape[0], *trailing)), shape, [0] + keep[2:]), x))


def _lu(ctx: Builder, out: list, x: Value) -> list[Value]:
    """Gaussian elimination with partial pivoting, unblocked, as the reference (LAPACK's getrf):
    a ``while`` over the columns on all matrices at once (a batch dimension in front); the pivot
    is the first largest magnitude (|re| + |im| for complex values); a zero pivot is not divided by."""
    *batch, m, n = x.aval.shape
    count, k_max, dt = int(np.prod(batch, dtype=np.int64)), min(m, n), x.aval.dtype
    a0 = ctx.reshape(x, (count, m, n))
    pivots0 = ctx.constant(0, np.int32, (count, k_max))
    perm0 = ctx.iota((count, m), 1)
    state = [ctx.constant(0, np.int32), a0, pivots0, perm0]
    avals = [v.aval for v in state]

    def cond(r: Builder, k: Value, *rest: Value) -> list[Value]:
        return [r.compare("LT", k, r.constant(k_max, np.int32))]

    def body(r: Builder, k: Value, a: Value, pivots: Value, perm: Value) -> list[Value]:
        zero = r.constant(0, np.int32)
        shape = (count, m, n)
        rows, cols = r.iota(shape, 1), r.iota(shape, 2)
        column = r.reshape(r.op("stablehlo.dynamic_slice", [a, zero, zero, k], _aval((count, m, 1), dt),
                                f"slice_sizes = {_array((count, m, 1))}"), (count, m))
        if dtypes.is_complex(dt):
            part = _aval((count, m), dtypes.real_dtype(dt))
            magnitude = r.binary("stablehlo.add", r.op("stablehlo.abs", [r.op("stablehlo.real", [column], part)], part),
                                 r.op("stablehlo.abs", [r.op("stablehlo.imag", [column], part)], part))
        else:
            magnitude = r.op("stablehlo.abs", [column], column.aval)
        row_index = r.iota((count, m), 1)
        above = r.compare("LT", row_index, r.broadcast(k, (count, m)))
        magnitude = r.select(above, r.constant(-1, magnitude.aval.dtype, (count, m)), magnitude)
        p = lower_rules[red.argmax_p](r, [_aval((count,), np.int32)], magnitude, axis=1, index_dtype=np.int32)
        pivots = r.op("stablehlo.dynamic_update_slice", [pivots, r.reshape(p, (count, 1)), zero, k], pivots.aval)
        a = _swap_rows(r, a, rows, k, p)
        perm = _swap_rows(r, perm, row_index, k, p)
        pivot = r.broadcast(r.reshape(r.op("stablehlo.dynamic_slice", [a, zero, k, k], _aval((count, 1, 1), dt),
                                           f"slice_sizes = {_array((count, 1, 1))}"), (count,)), shape, [0])
        column = r.broadcast(r.reshape(r.op("stablehlo.dynamic_slice", [a, zero, zero, k], _aval((count, m, 1), dt),
                                            f"slice_sizes = {_array((count, m, 1))}"), (count, m)), shape, [0, 1])
        scaled = r.select(r.compare("EQ", pivot, r.constant(0, dt, shape)), column,
                          r.binary("stablehlo.divide", column, pivot))
        row = r.broadcast(r.reshape(r.op("stablehlo.dynamic_slice", [a, zero, k, zero], _aval((count, 1, n), dt),
                                         f"slice_sizes = {_array((count, 1, n))}"), (count, n)), shape, [0, 2])
        kk = r.broadcast(k, shape)
        below = r.compare("GT", rows, kk)
        updated = r.binary("stablehlo.subtract", a, r.binary("stablehlo.multiply", scaled, row))
        a = r.select(r.binary("stablehlo.and", below, r.compare("GT", cols, kk)), updated, a)
        a = r.select(r.binary("stablehlo.and", below, r.compare("EQ", cols, kk)), scaled, a)
        return [r.binary("stablehlo.add", k, r.constant(1, np.int32)), a, pivots, perm]

    _, a, pivots, perm = ctx.ops("stablehlo.while", state, avals, "", [ctx.region(avals, cond),
                                                                        ctx.region(avals, body)])
    return [ctx.reshape(a, out[0].shape), ctx.reshape(pivots, out[1].shape), ctx.reshape(perm, out[2].shape)]


def _lu_pivots_to_permutation(ctx: Builder, out: list, pivots: Value, *, permutation_size: int) -> Value:
    """LAPACK's row swaps applied in order to 0..size-1: a ``while`` over the pivots."""
    *batch, k_max = pivots.aval.shape
    count = int(np.prod(batch, dtype=np.int64))
    flat = ctx.reshape(pivots, (count, k_max))
    state = [ctx.constant(0, np.int32), ctx.iota((count, permutation_size), 1)]
    avals = [v.aval for v in state]

    def cond(r: Builder, k: Value, perm: Value) -> list[Value]:
        return [r.compare("LT", k, r.constant(k_max, np.int32))]

    def body(r: Builder, k: Value, perm: Value) -> list[Value]:
        zero = r.constant(0, np.int32)
        p = r.reshape(r.op("stablehlo.dynamic_slice", [flat, zero, k], _aval((count, 1), np.int32),
                           f"slice_sizes = {_array((count, 1))}"), (count,))
        perm = _swap_rows(r, perm, r.iota((count, permutation_size), 1), k, p)
        return [r.binary("stablehlo.add", k, r.constant(1, np.int32)), perm]

    _, perm = ctx.ops("stablehlo.while", state, avals, "", [ctx.region(avals, cond), ctx.region(avals, body)])
    return ctx.reshape(perm, out[0].shape)


def _column(b: Builder, a: Value, j: Value) -> Value:
    """Column j of every matrix of ``a`` ([B, m, n]) as [B, m]."""
    count, m, _ = a.aval.shape
    zero = b.constant(0, np.int32)
    return b.reshape(b.op("stablehlo.dynamic_slice", [a, zero, zero, j], _aval((count, m, 1), a.aval.dtype),
                          f"slice_sizes = {_array((count, m, 1))}"), (count, m))


def _parts_of(b: Builder, v: Value) -> tuple[Value, Value]:
    part = _aval(v.aval.shape, dtypes.real_dtype(v.aval.dtype))
    return b.op("stablehlo.real", [v], part), b.op("stablehlo.imag", [v], part)


def _conj_value(b: Builder, v: Value) -> Value:
    return _conj(b, [v.aval], v) if dtypes.is_complex(v.aval.dtype) else v


def _sum_rows(b: Builder, v: Value, axis: int) -> Value:
    dt = v.aval.dtype
    [out] = b.reduce([v], [b.constant(0, dt)], [axis], lambda r, acc, x: [r.binary("stablehlo.add", acc, x)])
    return out


def _reflect(b: Builder, target: Value, v: Value, tau: Value) -> Value:
    """``(I - tau v v^H) target`` for each matrix: v [B, m], tau [B], target [B, m, n]."""
    shape = target.aval.shape
    vv = b.broadcast(v, shape, [0, 1])
    w = _sum_rows(b, b.binary("stablehlo.multiply", _conj_value(b, vv), target), 1)  # v^H target: [B, n]
    step = b.binary("stablehlo.multiply", b.broadcast(tau, shape, [0]),
                    b.binary("stablehlo.multiply", vv, b.broadcast(w, shape, [0, 2])))
    return b.binary("stablehlo.subtract", target, step)


def _reflect_right(b: Builder, target: Value, v: Value, tau: Value) -> Value:
    """``target (I - tau v v^H)`` for each matrix: v [B, n], tau [B], target [B, m, n]."""
    shape = target.aval.shape
    w = _sum_rows(b, b.binary("stablehlo.multiply", target, b.broadcast(v, shape, [0, 2])), 2)  # target v: [B, m]
    step = b.binary("stablehlo.multiply", b.broadcast(tau, shape, [0]), b.binary(
        "stablehlo.multiply", b.broadcast(w, shape, [0, 1]), b.broadcast(_conj_value(b, v), shape, [0, 2])))
    return b.binary("stablehlo.subtract", target, step)


def _larfg(r: Builder, x: Value, pivot: Value) -> tuple[Value, Value, Value]:
    """LAPACK's larfg on each column ``x`` ([B, m]) from row ``pivot`` down: beta = -sign(Re alpha)
    |(alpha, tail)|, tau = (beta - alpha) / beta, v = tail / (alpha - beta) with a 1 at the pivot
    and 0 above it (the identity, tau 0, where the tail is zero and alpha real). Returns ``(v, tau,
    packed)``: ``packed`` is the column as LAPACK leaves it (beta at the pivot, v's tail below)."""
    count, m = x.aval.shape
    dt = x.aval.dtype
    real = dtypes.real_dtype(dt)
    rows = r.iota((count, m), 1)
    jj = r.broadcast(pivot, (count, m))
    below, at = r.compare("GT", rows, jj), r.compare("EQ", rows, jj)
    alpha = _sum_rows(r, r.select(at, x, r.constant(0, dt, (count, m))), 1)  # [B]
    tail = r.select(below, x, r.constant(0, dt, (count, m)))
    if dtypes.is_complex(dt):
        re, im = _parts_of(r, tail)
        squares = r.binary("stablehlo.add", r.binary("stablehlo.multiply", re, re),
                           r.binary("stablehlo.multiply", im, im))
        alpha_re, alpha_im = _parts_of(r, alpha)
    else:
        squares, alpha_re, alpha_im = r.binary("stablehlo.multiply", tail, tail), alpha, None
    xnorm2 = _sum_rows(r, squares, 1)
    norm2 = r.binary("stablehlo.add", xnorm2, r.binary("stablehlo.multiply", alpha_re, alpha_re))
    if alpha_im is not None:
        norm2 = r.binary("stablehlo.add", norm2, r.binary("stablehlo.multiply", alpha_im, alpha_im))
    norm = r.op("stablehlo.sqrt", [norm2], norm2.aval)
    beta = r.select(r.compare("GE", alpha_re, r.constant(0, real, (count,))),
                    r.op("stablehlo.negate", [norm], norm.aval), norm)
    identity = r.compare("EQ", xnorm2, r.constant(0, real, (count,)))
    if alpha_im is not None:
        identity = r.binary("stablehlo.and", identity, r.compare("EQ", alpha_im, r.constant(0, real, (count,))))
    beta_c = r.convert(beta, dt)
    tau = r.binary("stablehlo.divide", r.binary("stablehlo.subtract", beta_c, alpha), beta_c)
    tau = r.select(identity, r.constant(0, dt, (count,)), tau)
    scale = r.binary("stablehlo.divide", r.constant(1, dt, (count,)), r.binary("stablehlo.subtract", alpha, beta_c))
    scale = r.select(identity, r.constant(0, dt, (count,)), scale)
    v_tail = r.binary("stablehlo.multiply", tail, r.broadcast(scale, (count, m), [0]))
    v = r.select(at, r.constant(1, dt, (count, m)), v_tail)
    packed = r.select(at, r.broadcast(r.select(identity, alpha, beta_c), (count, m), [0]),
                      r.select(below, r.select(r.broadcast(identity, (count, m), [0]), x, v_tail), x))
    return v, tau, packed


def _geqrf_batched(ctx: Builder, a0: Value) -> tuple[Value, Value]:
    """LAPACK's unblocked geqr2 on [B, m, n]: for each column j, the reflector of ``_larfg`` applied
    from the left (with conj(tau)) to the columns after j."""
    count, m, n = a0.aval.shape
    dt, k_max = a0.aval.dtype, min(m, n)
    state = [ctx.constant(0, np.int32), a0, ctx.constant(0, dt, (count, k_max))]
    avals = [v.aval for v in state]

    def cond(r: Builder, j: Value, *rest: Value) -> list[Value]:
        return [r.compare("LT", j, r.constant(k_max, np.int32))]

    def body(r: Builder, j: Value, a: Value, taus: Value) -> list[Value]:
        v, tau, packed = _larfg(r, _column(r, a, j), j)
        shape = (count, m, n)
        cols, jj = r.iota(shape, 2), r.broadcast(j, shape)
        a = r.select(r.compare("GT", cols, jj), _reflect(r, a, v, _conj_value(r, tau)), a)
        a = r.select(r.compare("EQ", cols, jj), r.broadcast(packed, shape, [0, 1]), a)
        taus = r.op("stablehlo.dynamic_update_slice", [taus, r.reshape(tau, (count, 1)), r.constant(0, np.int32), j],
                    taus.aval)
        return [r.binary("stablehlo.add", j, r.constant(1, np.int32)), a, taus]

    _, a, taus = ctx.ops("stablehlo.while", state, avals, "", [ctx.region(avals, cond), ctx.region(avals, body)])
    return a, taus


def _hessenberg(ctx: Builder, out: list, x: Value) -> list[Value]:
    """LAPACK's unblocked gehd2: for each column j < n - 1, the reflector ``H`` of ``_larfg`` from
    row j + 1 down, applied as ``H^H A H`` to the columns after j; column j keeps the packed form."""
    count, n, _ = _batched(x)
    dt = x.aval.dtype
    a0 = ctx.reshape(x, (count, n, n))
    k_max = max(n - 1, 0)
    if k_max == 0:
        return [x, ctx.constant(0, dt, out[1].shape)]
    state = [ctx.constant(0, np.int32), a0, ctx.constant(0, dt, (count, k_max))]
    avals = [v.aval for v in state]

    def cond(r: Builder, j: Value, *rest: Value) -> list[Value]:
        return [r.compare("LT", j, r.constant(k_max, np.int32))]

    def body(r: Builder, j: Value, a: Value, taus: Value) -> list[Value]:
        one = r.constant(1, np.int32)
        v, tau, packed = _larfg(r, _column(r, a, j), r.binary("stablehlo.add", j, one))
        shape = (count, n, n)
        cols, jj = r.iota(shape, 2), r.broadcast(j, shape)
        both = _reflect(r, _reflect_right(r, a, v, tau), v, _conj_value(r, tau))
        a = r.select(r.compare("GT", cols, jj), both, a)
        a = r.select(r.compare("EQ", cols, jj), r.broadcast(packed, shape, [0, 1]), a)
        taus = r.op("stablehlo.dynamic_update_slice", [taus, r.reshape(tau, (count, 1)), r.constant(0, np.int32), j],
                    taus.aval)
        return [r.binary("stablehlo.add", j, one), a, taus]

    _, a, taus = ctx.ops("stablehlo.while", state, avals, "", [ctx.region(avals, cond), ctx.region(avals, body)])
    return [ctx.reshape(a, out[0].shape), ctx.reshape(taus, out[1].shape)]


def _swap_columns(b: Builder, x: Value, j: Value, p: Value) -> Value:
    """``x`` ([B, m, n] or [B, n]) with columns j (a scalar) and p (one per matrix, [B]) exchanged,
    by selects and sums of one nonzero term (exact)."""
    shape, dt = x.aval.shape, x.aval.dtype
    last = len(shape) - 1
    cols = b.iota(shape, last)
    zeros = b.constant(0, dt, shape)
    add = "stablehlo.or" if dt == dtypes.bool_ else "stablehlo.add"

    def column(mask: Value) -> Value:
        [picked] = b.reduce([b.select(mask, x, zeros)], [b.constant(0, dt)], [last],
                            lambda r, acc, v: [r.binary(add, acc, v)])
        return b.broadcast(picked, shape, list(range(last)))

    is_j, is_p = b.compare("EQ", cols, b.broadcast(j, shape)), b.compare("EQ", cols, b.broadcast(p, shape, [0]))
    return b.select(is_j, column(is_p), b.select(is_p, column(is_j), x))


def _geqp3(ctx: Builder, out: list, x: Value) -> list[Value]:
    """LAPACK's geqp3 (QR with column pivoting, unblocked as laqp2): at step j the remaining column
    of largest norm below row j (the first of equal ones) is swapped to j, then reduced as geqrf's
    (``_larfg``). The norms are recomputed each step rather than downdated, so only near-ties can
    pick another column than LAPACK's."""
    count, m, n = _batched(x)
    dt, k_max = x.aval.dtype, min(m, n)
    real = dtypes.real_dtype(dt)
    shape = (count, m, n)
    a0 = ctx.reshape(x, shape)

    def norms(b: Builder, a: Value, j: Value) -> Value:
        below = b.compare("GE", b.iota(shape, 1), b.broadcast(j, shape))
        kept = b.select(below, a, b.constant(0, dt, shape))
        squares = _real_part(b, b.binary("stablehlo.multiply", _conj_value(b, kept), kept))
        return _sum_rows(b, squares, 1)  # [B, n] (squared: the order is the same)

    state = [ctx.constant(0, np.int32), a0, ctx.constant(0, dt, (count, k_max)), ctx.iota((count, n), 1),
             norms(ctx, a0, ctx.constant(0, np.int32))]
    avals = [v.aval for v in state]

    def cond(r: Builder, j: Value, *rest: Value) -> list[Value]:
        return [r.compare("LT", j, r.constant(k_max, np.int32))]

    def body(r: Builder, j: Value, a: Value, taus: Value, perm: Value, size: Value) -> list[Value]:
        done = r.compare("LT", r.iota((count, n), 1), r.broadcast(j, (count, n)))
        candidates = r.select(done, r.constant(-1, real, (count, n)), size)
        p = lower_rules[red.argmax_p](r, [_aval((count,), np.int32)], candidates, axis=1, index_dtype=np.int32)
        a, perm = _swap_columns(r, a, j, p), _swap_columns(r, perm, j, p)
        v, tau, packed = _larfg(r, _column(r, a, j), j)
        cols, jj = r.iota(shape, 2), r.broadcast(j, shape)
        a = r.select(r.compare("GT", cols, jj), _reflect(r, a, v, _conj_value(r, tau)), a)
        a = r.select(r.compare("EQ", cols, jj), r.broadcast(packed, shape, [0, 1]), a)
        taus = r.op("stablehlo.dynamic_update_slice", [taus, r.reshape(tau, (count, 1)), r.constant(0, np.int32), j],
                    taus.aval)
        following = r.binary("stablehlo.add", j, r.constant(1, np.int32))
        return [following, a, taus, perm, norms(r, a, following)]

    _, a, taus, perm, _ = ctx.ops("stablehlo.while", state, avals, "",
                                  [ctx.region(avals, cond), ctx.region(avals, body)])
    return [ctx.reshape(a, out[0].shape), ctx.reshape(perm, out[1].shape), ctx.reshape(taus, out[2].shape)]


def _householder_product_batched(ctx: Builder, a: Value, taus: Value) -> Value:
    """The first n columns of H_0 H_1 ... H_{k-1} (LAPACK's orgqr / ungqr): the identity's columns
    with the reflectors applied from the last to the first."""
    count, m, n = a.aval.shape
    dt, k_max = a.aval.dtype, taus.aval.shape[1]
    q0 = ctx.convert(ctx.compare("EQ", ctx.iota((count, m, n), 1), ctx.iota((count, m, n), 2)), dt)
    state = [ctx.constant(k_max - 1, np.int32), q0]
    avals = [v.aval for v in state]

    def cond(r: Builder, j: Value, q: Value) -> list[Value]:
        return [r.compare("GE", j, r.constant(0, np.int32))]

    def body(r: Builder, j: Value, q: Value) -> list[Value]:
        zero = r.constant(0, np.int32)
        rows = r.iota((count, m), 1)
        jj = r.broadcast(j, (count, m))
        x = _column(r, a, j)
        v = r.select(r.compare("EQ", rows, jj), r.constant(1, dt, (count, m)),
                     r.select(r.compare("GT", rows, jj), x, r.constant(0, dt, (count, m))))
        tau = r.reshape(r.op("stablehlo.dynamic_slice", [taus, zero, j], _aval((count, 1), dt),
                             f"slice_sizes = {_array((count, 1))}"), (count,))
        return [r.binary("stablehlo.subtract", j, r.constant(1, np.int32)), _reflect(r, q, v, tau)]

    _, q = ctx.ops("stablehlo.while", state, avals, "", [ctx.region(avals, cond), ctx.region(avals, body)])
    return q


def _batched(x: Value) -> tuple[int, ...]:
    return (int(np.prod(x.aval.shape[:-2], dtype=np.int64)), *x.aval.shape[-2:])


def _geqrf(ctx: Builder, out: list, x: Value) -> list[Value]:
    a, taus = _geqrf_batched(ctx, ctx.reshape(x, _batched(x)))
    return [ctx.reshape(a, out[0].shape), ctx.reshape(taus, out[1].shape)]


def _householder_product(ctx: Builder, out: list, a: Value, taus: Value) -> Value:
    count, m, n = _batched(a)
    flat_taus = ctx.reshape(taus, (count, taus.aval.shape[-1]))
    return ctx.reshape(_householder_product_batched(ctx, ctx.reshape(a, (count, m, n)), flat_taus), out[0].shape)


def _qr(ctx: Builder, out: list, x: Value, *, full_matrices: bool) -> list[Value]:
    count, m, n = _batched(x)
    k = min(m, n)
    a, taus = _geqrf_batched(ctx, ctx.reshape(x, (count, m, n)))
    width = m if full_matrices else k
    if width <= n:
        reflectors = ctx.slice(a, (0, 0, 0), (count, m, width))
    else:  # (the full q of a tall matrix: the identity's columns past n, moved by the n reflectors)
        reflectors = ctx.op("stablehlo.pad", [a, ctx.constant(0, a.aval.dtype)], _aval((count, m, width), a.aval.dtype),
                            f"edge_padding_high = {_array((0, 0, width - n))}, edge_padding_low = {_array((0, 0, 0))}, "
                            f"interior_padding = {_array((0, 0, 0))}")
    q = _householder_product_batched(ctx, reflectors, taus)
    rows_r = m if full_matrices else k
    r = ctx.slice(a, (0, 0, 0), (count, rows_r, n))
    upper = ctx.compare("LE", ctx.iota(r.aval.shape, 1), ctx.iota(r.aval.shape, 2))
    r = ctx.select(upper, r, ctx.constant(0, r.aval.dtype, r.aval.shape))
    return [ctx.reshape(q, out[0].shape), ctx.reshape(r, out[1].shape)]


class _JacobiSchedule:
    """The cyclic order of Jacobi rotations that ``eigh`` and ``svd`` share: every pair p < q of
    ``n`` indices in turn, for a fixed number of sweeps (12 in float32, 16 in float64), as two
    constant tables from which the loop's step ``k`` reads its pair."""

    def __init__(self, ctx: Builder, n: int, dt: np.dtype) -> None:
        pairs = [(p, q) for p in range(n) for q in range(p + 1, n)]
        self.count, self.steps = len(pairs), (12 if dt.itemsize <= 4 else 16) * len(pairs)
        self.tables = [ctx.constant(np.array(column, np.int32), np.int32, (len(pairs),))
                       for column in zip(*pairs)]

    def running(self, r: Builder, k: Value, *rest: Value) -> list[Value]:
        """The loop's condition: step ``k`` is one of the schedule's."""
        return [r.compare("LT", k, r.constant(self.steps, np.int32))]

    def pair(self, r: Builder, k: Value) -> tuple[Value, Value]:
        index = r.binary("stablehlo.remainder", k, r.constant(self.count, np.int32))
        p, q = (r.reshape(r.op("stablehlo.dynamic_slice", [table, index], _aval((1,), np.int32),
                               f"slice_sizes = {_array((1,))}"), ()) for table in self.tables)
        return p, q


def _rotation(r: Builder, dp: Value, dq: Value, off: Value) -> tuple[Value, Value, Value | None]:
    """The Jacobi rotation that zeroes ``off`` in the 2 x 2 Hermitian ``[[dp, off], [conj(off), dq]]``
    (one per matrix: [B]): ``(c, s, phase)`` in ``off``'s dtype, ``phase = conj(off) / |off|``
    (None for real matrices) turning ``off`` real before the real rotation; the identity where
    ``off`` is zero."""
    dt = off.aval.dtype
    real = dtypes.real_dtype(dt)
    count = off.aval.shape
    vec = _aval(count, real)
    magnitude = r.op("stablehlo.abs", [off], vec) if dtypes.is_complex(dt) else off
    one, zero = r.constant(1, real, count), r.constant(0, real, count)
    is_zero = r.compare("EQ", magnitude, zero)
    safe = r.select(is_zero, one, magnitude)
    theta = r.binary("stablehlo.divide", r.binary("stablehlo.subtract", dq, dp),
                     r.binary("stablehlo.multiply", r.constant(2, real, count), safe))
    root = r.op("stablehlo.sqrt", [r.binary("stablehlo.add", r.binary("stablehlo.multiply", theta, theta), one)], vec)
    sign = r.select(r.compare("GE", theta, zero), one, r.constant(-1, real, count))
    t = r.binary("stablehlo.divide", sign, r.binary("stablehlo.add", r.op("stablehlo.abs", [theta], vec), root))
    t = r.select(is_zero, zero, t)
    c = r.binary("stablehlo.divide", one, r.op("stablehlo.sqrt", [r.binary(
        "stablehlo.add", r.binary("stablehlo.multiply", t, t), one)], vec))
    s_ = r.binary("stablehlo.multiply", t, c)
    if not dtypes.is_complex(dt):
        return c, s_, None
    phase = r.binary("stablehlo.divide", _conj_value(r, off), r.convert(safe, dt))
    phase = r.select(is_zero, r.constant(1, dt, count), phase)
    return r.convert(c, dt), r.convert(s_, dt), phase


def _rotate(r: Builder, m: Value, axis: int, p: Value, q: Value, c: Value, s_: Value, phase: Value | None) -> Value:
    """Columns (axis 2) of every matrix of ``m`` ([B, rows, cols]) times the rotation ``U``:
    p <- c p - s e q, q <- s p + c e q; or rows (axis 1) times ``U^H`` (e conjugated)."""
    count, rows, cols = m.aval.shape
    dt, zero = m.aval.dtype, r.constant(0, np.int32)
    size = (count, 1, cols) if axis == 1 else (count, rows, 1)
    starts = (lambda i: [zero, i, zero]) if axis == 1 else (lambda i: [zero, zero, i])
    mp = r.op("stablehlo.dynamic_slice", [m, *starts(p)], _aval(size, dt), f"slice_sizes = {_array(size)}")
    mq = r.op("stablehlo.dynamic_slice", [m, *starts(q)], _aval(size, dt), f"slice_sizes = {_array(size)}")
    mul = lambda u, w: r.binary("stablehlo.multiply", u, w)
    if phase is not None:
        mq = mul(r.broadcast(phase if axis == 2 else _conj_value(r, phase), size, [0]), mq)
    cc, ss = r.broadcast(c, size, [0]), r.broadcast(s_, size, [0])
    new_p = r.binary("stablehlo.subtract", mul(cc, mp), mul(ss, mq))
    new_q = r.binary("stablehlo.add", mul(ss, mp), mul(cc, mq))
    m = r.op("stablehlo.dynamic_update_slice", [m, new_p, *starts(p)], m.aval)
    return r.op("stablehlo.dynamic_update_slice", [m, new_q, *starts(q)], m.aval)


def _real_part(b: Builder, v: Value) -> Value:
    return b.op("stablehlo.real", [v], _aval(v.aval.shape, dtypes.real_dtype(v.aval.dtype))) \
        if dtypes.is_complex(v.aval.dtype) else v


def _divided_by_largest(ctx: Builder, a: Value) -> tuple[Value, Value]:
    """Each matrix of ``a`` ([B, m, n]) divided by its largest magnitude (1 where that is zero or not
    finite), and those scales ([B], real): the squares that rotations and norms form then neither
    overflow nor underflow (1e20 or 1e-25 in float32)."""
    count = a.aval.shape[0]
    real = dtypes.real_dtype(a.aval.dtype)
    [size] = ctx.reduce([ctx.op("stablehlo.abs", [a], _aval(a.aval.shape, real))], [ctx.constant(0, real)], [1, 2],
                        lambda r, acc, v: [r.binary("stablehlo.maximum", acc, v)])
    usable = ctx.binary("stablehlo.and", ctx.compare("GT", size, ctx.constant(0, real, (count,))),
                        ctx.op("stablehlo.is_finite", [size], _aval((count,), np.bool_)))
    scale = ctx.select(usable, size, ctx.constant(1, real, (count,)))
    return ctx.binary("stablehlo.divide", a, ctx.broadcast(ctx.convert(scale, a.aval.dtype), a.aval.shape, [0])), scale


def _eigh(ctx: Builder, out: list, x: Value, *, lower: bool) -> list[Value]:
    """Symmetric (Hermitian) matrices: cyclic Jacobi rotations (a fixed number of sweeps over every
    pair (p, q), one ``while`` over sweeps times pairs, all matrices of a batch at once; complex
    rotations carry the phase of the entry they zero), then the eigenvalues in ascending order
    with their vectors. Jacobi's eigenvalues carry high relative accuracy; the eigenvectors' signs
    (phases) are the iteration's (LAPACK's are arbitrary too)."""
    dt = x.aval.dtype
    count, n, _ = _batched(x)
    shape = (count, n, n)
    a = ctx.reshape(x, shape)
    rows, cols = ctx.iota(shape, 1), ctx.iota(shape, 2)
    kept = ctx.compare("GE" if lower else "LE", rows, cols)
    triangle = ctx.select(kept, a, ctx.constant(0, dt, shape))
    diagonal_only = ctx.compare("EQ", rows, cols)
    if dtypes.is_complex(dt):  # (the diagonal of a Hermitian matrix is real: its imaginary part is not read)
        triangle = ctx.select(diagonal_only, ctx.convert(_real_part(ctx, triangle), dt), triangle)
    strict = ctx.select(diagonal_only, ctx.constant(0, dt, shape), triangle)
    a = ctx.binary("stablehlo.add", triangle, _conj_value(ctx, ctx.transpose(strict, (0, 2, 1))))  # mirrored
    a, scale = _divided_by_largest(ctx, a)
    v = ctx.convert(diagonal_only, dt)
    schedule = _JacobiSchedule(ctx, n, dtypes.real_dtype(dt))
    if schedule.count:
        state = [ctx.constant(0, np.int32), a, v]
        avals = [s.aval for s in state]

        def body(r: Builder, k: Value, a: Value, v: Value) -> list[Value]:
            zero = r.constant(0, np.int32)
            p, q = schedule.pair(r, k)

            def entry(i: Value, j: Value) -> Value:
                return r.reshape(r.op("stablehlo.dynamic_slice", [a, zero, i, j], _aval((count, 1, 1), dt),
                                      f"slice_sizes = {_array((count, 1, 1))}"), (count,))

            c, s_, phase = _rotation(r, _real_part(r, entry(p, p)), _real_part(r, entry(q, q)), entry(p, q))
            a = _rotate(r, _rotate(r, a, 1, p, q, c, s_, phase), 2, p, q, c, s_, phase)
            return [r.binary("stablehlo.add", k, r.constant(1, np.int32)), a, _rotate(r, v, 2, p, q, c, s_, phase)]

        regions = [ctx.region(avals, schedule.running), ctx.region(avals, body)]
        _, a, v = ctx.ops("stablehlo.while", state, avals, "", regions)
    diagonal = ctx.select(diagonal_only, a, ctx.constant(0, dt, shape))
    w = _real_part(ctx, _sum_rows(ctx, diagonal, 1))  # [B, n]
    key = ctx.broadcast(w, shape, [0, 2])
    region = _sort_region(ctx, [key, v], 1, "LT")
    key, v = ctx.ops("stablehlo.sort", [key, v], [key.aval, v.aval], "dimension = 2 : i64, is_stable = true", [region])
    w = ctx.reshape(ctx.slice(key, (0, 0, 0), (count, 1, n)), (count, n))
    w = ctx.binary("stablehlo.multiply", w, ctx.broadcast(scale, (count, n), [0]))
    return [ctx.reshape(v, out[0].shape), ctx.reshape(w, out[1].shape)]


def _complete_basis(ctx: Builder, u: Value, width: int) -> Value:
    """``width`` orthonormal columns ([B, m, width], m >= width >= n) whose first n are those of
    ``u`` ([B, m, n]: orthonormal columns, zero ones allowed at the end): the ``q`` of ``u``'s
    QR decomposition, its first n columns times the phases of ``r``'s diagonal (``r`` is diagonal
    with entries of modulus 1 where ``u``'s columns are orthonormal; zero columns of ``u`` get
    new vectors orthogonal to the others)."""
    count, m, n = u.aval.shape
    dt = u.aval.dtype
    a, taus = _geqrf_batched(ctx, u)
    reflectors = a if width == n else ctx.op(
        "stablehlo.pad", [a, ctx.constant(0, dt)], _aval((count, m, width), dt),
        f"edge_padding_high = {_array((0, 0, width - n))}, edge_padding_low = {_array((0, 0, 0))}, "
        f"interior_padding = {_array((0, 0, 0))}")
    q = _householder_product_batched(ctx, reflectors, taus)
    square = ctx.slice(a, (0, 0, 0), (count, n, n))
    eye = ctx.compare("EQ", ctx.iota(square.aval.shape, 1), ctx.iota(square.aval.shape, 2))
    d = _sum_rows(ctx, ctx.select(eye, square, ctx.constant(0, dt, square.aval.shape)), 1)  # [B, n]
    real = dtypes.real_dtype(dt)
    magnitude = ctx.op("stablehlo.abs", [d], _aval(d.aval.shape, real))
    is_zero = ctx.compare("EQ", magnitude, ctx.constant(0, real, d.aval.shape))
    phase = ctx.select(is_zero, ctx.constant(1, dt, d.aval.shape),
                       ctx.binary("stablehlo.divide", d, ctx.convert(magnitude, dt)))
    if width > n:
        phase = ctx.op("stablehlo.pad", [phase, ctx.constant(1, dt)], _aval((count, width), dt),
                       f"edge_padding_high = {_array((0, width - n))}, edge_padding_low = {_array((0, 0))}, "
                       f"interior_padding = {_array((0, 0))}")
    return ctx.binary("stablehlo.multiply", q, ctx.broadcast(phase, q.aval.shape, [0, 2]))


def _svd(ctx: Builder, out: list, x: Value, *, full_matrices: bool, compute_uv: bool) -> list[Value]:
    """One-sided Jacobi (Hestenes) on the columns of x (of its conjugate transpose when it is
    wide): rotations (complex ones carrying a phase) that make every pair of columns orthogonal,
    a fixed number of sweeps; the columns' norms are the singular values, in descending order,
    and the normalized columns ``u``'s, completed to an orthonormal basis (``_complete_basis``:
    the columns of zero singular values, and all m with ``full_matrices``)."""
    dt = x.aval.dtype
    real = dtypes.real_dtype(dt)
    count, m, n = _batched(x)
    a, scale = _divided_by_largest(ctx, ctx.reshape(x, (count, m, n)))
    wide = m < n
    if wide:
        a, m, n = _conj_value(ctx, ctx.transpose(a, (0, 2, 1))), n, m
    v = ctx.convert(ctx.compare("EQ", ctx.iota((count, n, n), 1), ctx.iota((count, n, n), 2)), dt)
    schedule = _JacobiSchedule(ctx, n, real)

    def squares(b: Builder, w: Value) -> Value:
        return _real_part(b, b.binary("stablehlo.multiply", _conj_value(b, w), w))

    if schedule.count:
        state = [ctx.constant(0, np.int32), a, v]
        avals = [s.aval for s in state]

        def body(r: Builder, k: Value, w: Value, v: Value) -> list[Value]:
            p, q = schedule.pair(r, k)
            wp, wq = _column(r, w, p), _column(r, w, q)
            alpha, beta = _sum_rows(r, squares(r, wp), 1), _sum_rows(r, squares(r, wq), 1)
            gamma = _sum_rows(r, r.binary("stablehlo.multiply", _conj_value(r, wp), wq), 1)
            c, s_, phase = _rotation(r, alpha, beta, gamma)
            return [r.binary("stablehlo.add", k, r.constant(1, np.int32)), _rotate(r, w, 2, p, q, c, s_, phase),
                    _rotate(r, v, 2, p, q, c, s_, phase)]

        regions = [ctx.region(avals, schedule.running), ctx.region(avals, body)]
        _, a, v = ctx.ops("stablehlo.while", state, avals, "", regions)
    sigma = ctx.op("stablehlo.sqrt", [_sum_rows(ctx, squares(ctx, a), 1)], _aval((count, n), real))
    key_u = ctx.broadcast(sigma, (count, m, n), [0, 2])
    positive = ctx.compare("GT", key_u, ctx.constant(0, real, key_u.aval.shape))
    u = ctx.select(positive, ctx.binary("stablehlo.divide", a, ctx.convert(key_u, dt)),
                   ctx.constant(0, dt, key_u.aval.shape))
    key_u, u = ctx.ops("stablehlo.sort", [key_u, u], [key_u.aval, u.aval], "dimension = 2 : i64, is_stable = true",
                       [_sort_region(ctx, [key_u, u], 1, "GT")])
    key_v = ctx.broadcast(sigma, (count, n, n), [0, 2])
    _, v = ctx.ops("stablehlo.sort", [key_v, v], [key_v.aval, v.aval], "dimension = 2 : i64, is_stable = true",
                   [_sort_region(ctx, [key_v, v], 1, "GT")])
    s_sorted = ctx.reshape(ctx.slice(key_u, (0, 0, 0), (count, 1, n)), (count, n))
    s_sorted = ctx.binary("stablehlo.multiply", s_sorted, ctx.broadcast(scale, (count, n), [0]))
    if not compute_uv:
        return [ctx.reshape(s_sorted, out[0].shape)]
    u = _complete_basis(ctx, u, m if full_matrices else n)
    adjoint = lambda w: _conj_value(ctx, ctx.transpose(w, (0, 2, 1)))
    if wide:  # x^H = u s v^H, so x = v s u^H
        u, vh = v, adjoint(u)
    else:
        vh = adjoint(v)
    return [ctx.reshape(u, out[0].shape), ctx.reshape(s_sorted, out[1].shape), ctx.reshape(vh, out[2].shape)]


# --- schur and eig: the shifted QR iteration ---------------------------------------------------------------
def _entries(b: Builder, m: Value, i: Value, j: Value) -> Value:
    """``m[k, i[k], j[k]]`` for each matrix k of ``m`` ([B, n, n]; i, j: [B] int32), by a masked sum."""
    shape, dt = m.aval.shape, m.aval.dtype
    hit = b.binary("stablehlo.and", b.compare("EQ", b.iota(shape, 1), b.broadcast(i, shape, [0])),
                   b.compare("EQ", b.iota(shape, 2), b.broadcast(j, shape, [0])))
    [total] = b.reduce([b.select(hit, m, b.constant(0, dt, shape))], [b.constant(0, dt)], [1, 2],
                       lambda r, acc, v: [r.binary("stablehlo.add", acc, v)])
    return total


def _matmul(b: Builder, x: Value, y: Value) -> Value:
    """Batched ``x @ y`` ([B, m, k] @ [B, k, n]) at the highest precision."""
    count, m, _ = x.aval.shape
    return b.op("stablehlo.dot_general", [x, y], _aval((count, m, y.aval.shape[2]), x.aval.dtype),
                "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = "
                "[0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = "
                "[#stablehlo<precision HIGHEST>, #stablehlo<precision HIGHEST>]")


def _hessenberg_q(ctx: Builder, packed: Value, taus: Value) -> Value:
    """The unitary ``q`` of a packed Hessenberg form (LAPACK's orghr): 1 in the corner, and the
    reflectors, whose leading 1 sits one row below the diagonal, applied to the rest."""
    count, n, _ = packed.aval.shape
    dt = packed.aval.dtype
    inner = _householder_product_batched(ctx, ctx.slice(packed, (0, 1, 0), (count, n, n - 1)), taus)
    q = ctx.op("stablehlo.pad", [inner, ctx.constant(0, dt)], _aval((count, n, n), dt),
               f"edge_padding_high = {_array((0, 0, 0))}, edge_padding_low = {_array((0, 1, 1))}, "
               f"interior_padding = {_array((0, 0, 0))}")
    origin = ctx.constant(0, np.int32, q.aval.shape)
    corner = ctx.binary("stablehlo.and", ctx.compare("EQ", ctx.iota(q.aval.shape, 1), origin),
                        ctx.compare("EQ", ctx.iota(q.aval.shape, 2), origin))
    return ctx.select(corner, ctx.constant(1, dt, q.aval.shape), q)


def _givens_sweep(r: Builder, h: Value, z: Value, hi: Value) -> tuple[Value, Value]:
    """One explicit QR step on ``h`` (already shifted): Givens rotations ``G_k`` zero the
    subdiagonal (k < hi, per matrix; the identity past it) from the left, then ``R G_0^H ...``
    from the right; ``z`` gathers the right rotations."""
    count, n, _ = h.aval.shape
    dt = h.aval.dtype
    real = dtypes.real_dtype(dt)
    vec = (count,)

    def entry(b: Builder, m: Value, i: Value, j: Value) -> Value:
        return b.reshape(b.op("stablehlo.dynamic_slice", [m, b.constant(0, np.int32), i, j], _aval((count, 1, 1), dt),
                              f"slice_sizes = {_array((count, 1, 1))}"), vec)

    def rotate(b: Builder, m: Value, axis: int, k: Value, c: Value, s_: Value) -> Value:
        """Rows (axis 1) k, k+1 of m: k <- c k + s (k+1), k+1 <- c (k+1) - conj(s) k; columns (axis 2):
        k <- c k + conj(s) (k+1), k+1 <- c (k+1) - s k (``m G^H``)."""
        rows, cols = m.aval.shape[1:]
        size = (count, 1, cols) if axis == 1 else (count, rows, 1)
        zero = b.constant(0, np.int32)
        at = (lambda i: [zero, i, zero]) if axis == 1 else (lambda i: [zero, zero, i])
        k1 = b.binary("stablehlo.add", k, b.constant(1, np.int32))
        first = b.op("stablehlo.dynamic_slice", [m, *at(k)], _aval(size, dt), f"slice_sizes = {_array(size)}")
        second = b.op("stablehlo.dynamic_slice", [m, *at(k1)], _aval(size, dt), f"slice_sizes = {_array(size)}")
        cc, ss = b.broadcast(c, size, [0]), b.broadcast(s_, size, [0])
        s_first, s_second = (ss, _conj_value(b, ss)) if axis == 1 else (_conj_value(b, ss), ss)
        mul = lambda u, w: b.binary("stablehlo.multiply", u, w)
        new_first = b.binary("stablehlo.add", mul(cc, first), mul(s_first, second))
        new_second = b.binary("stablehlo.subtract", mul(cc, second), mul(s_second, first))
        m = b.op("stablehlo.dynamic_update_slice", [m, new_first, *at(k)], m.aval)
        return b.op("stablehlo.dynamic_update_slice", [m, new_second, *at(k1)], m.aval)

    def left(b: Builder, k: Value, m: Value, cs: Value, ss: Value) -> list[Value]:
        zero, zero_r, one_r = b.constant(0, np.int32), b.constant(0, real, vec), b.constant(1, real, vec)
        a = entry(b, m, k, k)
        below = entry(b, m, b.binary("stablehlo.add", k, b.constant(1, np.int32)), k)
        abs_a, abs_b = (b.op("stablehlo.abs", [v], _aval(vec, real)) for v in (a, below))
        norm = b.op("stablehlo.sqrt", [b.binary("stablehlo.add", b.binary("stablehlo.multiply", abs_a, abs_a),
                                                b.binary("stablehlo.multiply", abs_b, abs_b))], _aval(vec, real))
        a_zero, trivial = b.compare("EQ", abs_a, zero_r), b.compare("EQ", norm, zero_r)
        safe_norm = b.select(trivial, one_r, norm)
        unit_a = b.binary("stablehlo.divide", a, b.convert(b.select(a_zero, one_r, abs_a), dt))
        s_ = b.binary("stablehlo.divide", b.binary("stablehlo.multiply", unit_a, _conj_value(b, below)),
                      b.convert(safe_norm, dt))
        s_ = b.select(a_zero, b.constant(1, dt, vec), s_)  # (a = 0: the swap)
        active = b.binary("stablehlo.and", b.compare("LT", b.broadcast(k, vec), hi),
                          b.op("stablehlo.not", [trivial], trivial.aval))
        c = b.select(active, b.convert(b.binary("stablehlo.divide", abs_a, safe_norm), dt), b.constant(1, dt, vec))
        s_ = b.select(active, s_, b.constant(0, dt, vec))
        cs = b.op("stablehlo.dynamic_update_slice", [cs, b.reshape(c, (count, 1)), zero, k], cs.aval)
        ss = b.op("stablehlo.dynamic_update_slice", [ss, b.reshape(s_, (count, 1)), zero, k], ss.aval)
        return [b.binary("stablehlo.add", k, b.constant(1, np.int32)), rotate(b, m, 1, k, c, s_), cs, ss]

    def right(b: Builder, k: Value, m: Value, q: Value, cs: Value, ss: Value) -> list[Value]:
        zero = b.constant(0, np.int32)
        pick = lambda t: b.reshape(b.op("stablehlo.dynamic_slice", [t, zero, k], _aval((count, 1), dt),
                                        f"slice_sizes = {_array((count, 1))}"), vec)
        c, s_ = pick(cs), pick(ss)
        return [b.binary("stablehlo.add", k, b.constant(1, np.int32)), rotate(b, m, 2, k, c, s_),
                rotate(b, q, 2, k, c, s_), cs, ss]

    steps = r.constant(n - 1, np.int32)

    def counted(b: Builder, k: Value, *rest: Value) -> list[Value]:
        return [b.compare("LT", k, steps)]

    zero = r.constant(0, np.int32)
    state = [zero, h, r.constant(1, dt, (count, n - 1)), r.constant(0, dt, (count, n - 1))]
    avals = [v.aval for v in state]
    _, h, cs, ss = r.ops("stablehlo.while", state, avals, "", [r.region(avals, counted), r.region(avals, left)])
    state = [zero, h, z, cs, ss]
    avals = [v.aval for v in state]
    _, h, z, _, _ = r.ops("stablehlo.while", state, avals, "", [r.region(avals, counted), r.region(avals, right)])
    return h, z


def _scaled_hessenberg(ctx: Builder, a: Value) -> tuple[Value, Value, Value, Value, Value, Value]:
    """The start both Schur forms share, for ``a`` ([B, n, n]): a matrix holding inf or NaN zeroed
    (``finite`` [B] says which were not), the largest magnitude divided out (``scale`` [B]), then
    the Hessenberg form ``h`` (zero below the subdiagonal) and its orthogonal (unitary) ``z``;
    returned with the row and column iotas the iterations index by."""
    count, n, _ = a.aval.shape
    dt = a.aval.dtype
    shape = (count, n, n)
    values = ctx.binary("stablehlo.add", *_parts_of(ctx, a)) if dtypes.is_complex(dt) else a
    finite = ctx.op("stablehlo.is_finite", [values], _aval(shape, np.bool_))
    [finite] = ctx.reduce([finite], [ctx.constant(True, np.bool_)], [1, 2],
                          lambda r, acc, v: [r.binary("stablehlo.and", acc, v)])
    a = ctx.select(ctx.broadcast(finite, shape, [0]), a, ctx.constant(0, dt, shape))
    a, scale = _divided_by_largest(ctx, a)
    rows, cols = ctx.iota(shape, 1), ctx.iota(shape, 2)
    if n == 1:
        return a, ctx.constant(1, dt, shape), scale, finite, rows, cols
    packed, taus = _hessenberg(ctx, [a.aval, _aval((count, n - 1), dt)], a)
    z = _hessenberg_q(ctx, packed, taus)
    below = ctx.compare("LE", rows, ctx.binary("stablehlo.add", cols, ctx.constant(1, np.int32, shape)))
    return ctx.select(below, packed, ctx.constant(0, dt, shape)), z, scale, finite, rows, cols


def _complex_schur(ctx: Builder, a: Value) -> tuple[Value, Value, Value]:
    """The complex Schur form ``a = z (scale t) z^H`` of each matrix of ``a`` ([B, n, n], complex),
    returned as ``(t, z, scale)`` ([B]: the largest magnitude in the matrix, divided out first so
    that no square overflows): the Hessenberg form, then single-shift QR steps (Wilkinson's shift
    from the trailing 2 x 2 of the unreduced window, an exceptional one every 11th step without
    progress), the window's last row deflated once its subdiagonal is below ``eps`` times its
    neighbours on the diagonal. A matrix with inf or NaN, or not converged in 30 steps per
    eigenvalue, gives NaN (as LAPACK's failures under JAX)."""
    count, n, _ = a.aval.shape
    dt = a.aval.dtype
    real = dtypes.real_dtype(dt)
    vec = (count,)
    shape = (count, n, n)
    h, z, scale, finite, rows, cols = _scaled_hessenberg(ctx, a)
    eps, tiny = float(np.finfo(real).eps), float(np.finfo(real).tiny)
    limit = 30 * max(n, 10)
    one = ctx.constant(1, np.int32, vec)
    state = [ctx.constant(0, np.int32), h, z, ctx.constant(n - 1, np.int32, vec), ctx.constant(0, np.int32, vec)]
    avals = [v.aval for v in state]

    def cond(r: Builder, it: Value, h: Value, z: Value, hi: Value, stuck: Value) -> list[Value]:
        [busy] = r.reduce([r.compare("GT", hi, r.constant(0, np.int32, vec))], [r.constant(False, np.bool_)], [0],
                          lambda b, acc, v: [b.binary("stablehlo.or", acc, v)])
        return [r.binary("stablehlo.and", busy, r.compare("LT", it, r.constant(limit, np.int32)))]

    def body(r: Builder, it: Value, h: Value, z: Value, hi: Value, stuck: Value) -> list[Value]:
        lo = r.binary("stablehlo.maximum", r.binary("stablehlo.subtract", hi, one), r.constant(0, np.int32, vec))
        a11, a12, a21, a22 = (_entries(r, h, i, j) for i, j in ((lo, lo), (lo, hi), (hi, lo), (hi, hi)))
        half = r.constant(0.5, dt, vec)
        mean = r.binary("stablehlo.multiply", half, r.binary("stablehlo.add", a11, a22))
        gap = r.binary("stablehlo.multiply", half, r.binary("stablehlo.subtract", a11, a22))
        root = r.op("stablehlo.sqrt", [r.binary("stablehlo.add", r.binary("stablehlo.multiply", gap, gap),
                                                r.binary("stablehlo.multiply", a12, a21))], a11.aval)
        plus, minus = r.binary("stablehlo.add", mean, root), r.binary("stablehlo.subtract", mean, root)
        distance = lambda v: r.op("stablehlo.abs", [r.binary("stablehlo.subtract", v, a22)], _aval(vec, real))
        shift = r.select(r.compare("LE", distance(plus), distance(minus)), plus, minus)
        exceptional = r.compare("EQ", r.binary("stablehlo.remainder", stuck, r.constant(11, np.int32, vec)),
                                r.constant(10, np.int32, vec))
        kick = r.binary("stablehlo.add", a22, r.convert(r.binary(
            "stablehlo.multiply", r.constant(0.75, real, vec), r.op("stablehlo.abs", [a21], _aval(vec, real))), dt))
        shift = r.select(exceptional, kick, shift)
        rows, cols = r.iota(shape, 1), r.iota(shape, 2)
        window = r.binary("stablehlo.and", r.compare("EQ", rows, cols),
                          r.compare("LE", rows, r.broadcast(hi, shape, [0])))
        shifted = r.select(window, r.broadcast(shift, shape, [0]), r.constant(0, dt, shape))
        h = r.binary("stablehlo.subtract", h, shifted)
        h, z = _givens_sweep(r, h, z, hi)
        h = r.binary("stablehlo.add", h, shifted)
        sub = r.op("stablehlo.abs", [_entries(r, h, hi, lo)], _aval(vec, real))
        scale = r.binary("stablehlo.add", *(r.op("stablehlo.abs", [_entries(r, h, i, i)], _aval(vec, real))
                                            for i in (lo, hi)))
        small = r.binary("stablehlo.or", r.compare("LE", sub, r.binary("stablehlo.multiply", r.constant(eps, real, vec),
                                                                        scale)),
                         r.compare("LE", sub, r.constant(tiny, real, vec)))
        deflate = r.binary("stablehlo.and", small, r.compare("GT", hi, r.constant(0, np.int32, vec)))
        at = r.binary("stablehlo.and", r.compare("EQ", rows, r.broadcast(hi, shape, [0])),
                      r.compare("EQ", cols, r.broadcast(lo, shape, [0])))
        h = r.select(r.binary("stablehlo.and", at, r.broadcast(deflate, shape, [0])), r.constant(0, dt, shape), h)
        hi = r.select(deflate, r.binary("stablehlo.subtract", hi, one), hi)
        stuck = r.select(deflate, r.constant(0, np.int32, vec), r.binary("stablehlo.add", stuck, one))
        return [r.binary("stablehlo.add", it, r.constant(1, np.int32)), h, z, hi, stuck]

    if n > 1:
        regions = [ctx.region(avals, cond), ctx.region(avals, body)]
        _, h, z, hi, _ = ctx.ops("stablehlo.while", state, avals, "", regions)
        finite = ctx.binary("stablehlo.and", finite, ctx.compare("EQ", hi, ctx.constant(0, np.int32, vec)))
    t = ctx.select(ctx.compare("LE", rows, cols), h, ctx.constant(0, dt, shape))
    ok = ctx.broadcast(finite, shape, [0])
    nan = ctx.constant(complex(np.nan, np.nan), dt, shape)
    return ctx.select(ok, t, nan), ctx.select(ok, z, nan), scale


def _triangular_eigenvectors(ctx: Builder, t: Value) -> Value:
    """The right eigenvectors of upper triangular ``t`` ([B, n, n]): column j is 1 at j, 0 below,
    and above it back substitution in ``(t - t_jj) x = 0``, a near-zero ``t_ii - t_jj`` replaced
    by ``eps |t_jj|`` (at least the smallest normal number), as LAPACK's trevc; each column is
    divided by its largest magnitude (above 1) after each step, so that none overflows."""
    count, n, _ = t.aval.shape
    dt = t.aval.dtype
    real = dtypes.real_dtype(dt)
    shape = (count, n, n)
    rows, cols = ctx.iota(shape, 1), ctx.iota(shape, 2)
    diagonal = _sum_rows(ctx, ctx.select(ctx.compare("EQ", rows, cols), t, ctx.constant(0, dt, shape)), 1)  # [B, n]
    x0 = ctx.convert(ctx.compare("EQ", rows, cols), dt)
    eps, tiny = float(np.finfo(real).eps), float(np.finfo(real).tiny)
    state = [ctx.constant(n - 2, np.int32), x0]
    avals = [v.aval for v in state]

    def cond(r: Builder, i: Value, x: Value) -> list[Value]:
        return [r.compare("GE", i, r.constant(0, np.int32))]

    def body(r: Builder, i: Value, x: Value) -> list[Value]:
        zero = r.constant(0, np.int32)
        line = r.reshape(r.op("stablehlo.dynamic_slice", [t, zero, i, zero], _aval((count, 1, n), dt),
                              f"slice_sizes = {_array((count, 1, n))}"), (count, n))
        index = r.iota((count, n), 1)
        later = r.compare("GT", index, r.broadcast(i, (count, n)))
        line = r.select(later, line, r.constant(0, dt, (count, n)))
        total = _sum_rows(r, r.binary("stablehlo.multiply", r.broadcast(line, shape, [0, 1]), x), 1)  # [B, n]
        t_ii = r.broadcast(r.reshape(r.op("stablehlo.dynamic_slice", [diagonal, zero, i], _aval((count, 1), dt),
                                          f"slice_sizes = {_array((count, 1))}"), (count,)), (count, n), [0])
        gap = r.binary("stablehlo.subtract", t_ii, diagonal)
        floor = r.binary("stablehlo.maximum", r.binary("stablehlo.multiply", r.constant(eps, real, (count, n)),
                                                       r.op("stablehlo.abs", [diagonal], _aval((count, n), real))),
                         r.constant(tiny, real, (count, n)))
        near = r.compare("LT", r.op("stablehlo.abs", [gap], _aval((count, n), real)), floor)
        gap = r.select(near, r.convert(floor, dt), gap)
        value = r.op("stablehlo.negate", [r.binary("stablehlo.divide", total, gap)], total.aval)
        new_row = r.select(later, value, r.reshape(r.op("stablehlo.dynamic_slice", [x, zero, i, zero],
                                                        _aval((count, 1, n), dt),
                                                        f"slice_sizes = {_array((count, 1, n))}"), (count, n)))
        x = r.op("stablehlo.dynamic_update_slice", [x, r.reshape(new_row, (count, 1, n)), zero, i, zero], x.aval)
        [largest] = r.reduce([r.op("stablehlo.abs", [x], _aval(shape, real))], [r.constant(1, real)], [1],
                             lambda b, acc, v: [b.binary("stablehlo.maximum", acc, v)])
        x = r.binary("stablehlo.divide", x, r.broadcast(r.convert(largest, dt), shape, [0, 2]))
        return [r.binary("stablehlo.subtract", i, r.constant(1, np.int32)), x]

    if n < 2:
        return x0
    _, x = ctx.ops("stablehlo.while", state, avals, "", [ctx.region(avals, cond), ctx.region(avals, body)])
    return x


def _normalized(ctx: Builder, v: Value) -> Value:
    """Each column of ``v`` with unit 2-norm and its component of largest magnitude (the first of
    equal ones) real and positive, as LAPACK's geev leaves eigenvectors."""
    count, n, _ = v.aval.shape
    dt = v.aval.dtype
    real = dtypes.real_dtype(dt)
    magnitude2 = _real_part(ctx, ctx.binary("stablehlo.multiply", _conj_value(ctx, v), v))
    norm = ctx.op("stablehlo.sqrt", [_sum_rows(ctx, magnitude2, 1)], _aval((count, n), real))
    norm = ctx.select(ctx.compare("EQ", norm, ctx.constant(0, real, norm.aval.shape)),
                      ctx.constant(1, real, norm.aval.shape), norm)
    v = ctx.binary("stablehlo.divide", v, ctx.convert(ctx.broadcast(norm, v.aval.shape, [0, 2]), dt))
    magnitude2 = _real_part(ctx, ctx.binary("stablehlo.multiply", _conj_value(ctx, v), v))
    largest = lower_rules[red.argmax_p](ctx, [_aval((count, n), np.int32)], magnitude2, axis=1, index_dtype=np.int32)
    is_largest = ctx.compare("EQ", ctx.iota(v.aval.shape, 1), ctx.broadcast(largest, v.aval.shape, [0, 2]))
    component = _sum_rows(ctx, ctx.select(is_largest, v, ctx.constant(0, dt, v.aval.shape)), 1)  # [B, n]
    size = ctx.op("stablehlo.abs", [component], _aval((count, n), real))
    safe = ctx.select(ctx.compare("EQ", size, ctx.constant(0, real, size.aval.shape)),
                      ctx.constant(1, real, size.aval.shape), size)
    phase = ctx.binary("stablehlo.divide", _conj_value(ctx, component), ctx.convert(safe, dt))
    v = ctx.binary("stablehlo.multiply", v, ctx.broadcast(phase, v.aval.shape, [0, 2]))
    made_real = ctx.convert(_real_part(ctx, v), dt)
    return ctx.select(is_largest, made_real, v)


def _as_complex(ctx: Builder, x: Value) -> Value:
    if dtypes.is_complex(x.aval.dtype):
        return x
    return ctx.op("stablehlo.complex", [x, ctx.constant(0, x.aval.dtype, x.aval.shape)],
                  _aval(x.aval.shape, dtypes.complex_dtype(x.aval.dtype)))


class _Vector:
    """Elementwise arithmetic on values of one shape and dtype (scalars become constants): what
    the real Schur form's per-matrix 2 x 2 computations are written in."""

    def __init__(self, b: Builder, shape: tuple, dt: np.dtype) -> None:
        self.b, self.shape, self.dt = b, shape, dt

    def c(self, v: Any) -> Value:
        return v if isinstance(v, Value) else self.b.constant(v, self.dt, self.shape)

    def _op(self, op: str, x: Any, y: Any) -> Value:
        return self.b.binary(op, self.c(x), self.c(y))

    def add(self, x: Any, y: Any) -> Value:
        return self._op("stablehlo.add", x, y)

    def sub(self, x: Any, y: Any) -> Value:
        return self._op("stablehlo.subtract", x, y)

    def mul(self, x: Any, y: Any) -> Value:
        return self._op("stablehlo.multiply", x, y)

    def div(self, x: Any, y: Any) -> Value:
        return self._op("stablehlo.divide", x, y)

    def max(self, x: Any, y: Any) -> Value:
        return self._op("stablehlo.maximum", x, y)

    def min(self, x: Any, y: Any) -> Value:
        return self._op("stablehlo.minimum", x, y)

    def abs(self, x: Value) -> Value:
        return self.b.op("stablehlo.abs", [x], x.aval)

    def sqrt(self, x: Value) -> Value:
        return self.b.op("stablehlo.sqrt", [x], x.aval)

    def sign(self, x: Value) -> Value:
        """Fortran's SIGN(1, x): -1 for negative x (-0 included), else 1."""
        negative = self.b.op("stablehlo.bitcast_convert", [x], _aval(self.shape, {4: np.int32, 8: np.int64}[
            self.dt.itemsize]))
        return self.where(self.b.compare("LT", negative, self.b.constant(0, negative.aval.dtype, self.shape)),
                          -1.0, 1.0)

    def hypot(self, x: Value, y: Value) -> Value:
        big = self.max(self.abs(x), self.abs(y))
        safe = self.where(self.cmp("EQ", big, 0.0), 1.0, big)
        return self.mul(big, self.sqrt(self.add(self.mul(self.div(x, safe), self.div(x, safe)),
                                                self.mul(self.div(y, safe), self.div(y, safe)))))

    def cmp(self, direction: str, x: Any, y: Any) -> Value:
        return self.b.compare(direction, self.c(x), self.c(y))

    def where(self, pred: Value, x: Any, y: Any) -> Value:
        return self.b.select(pred, self.c(x), self.c(y))

    def both(self, *preds: Value) -> Value:
        out = preds[0]
        for p in preds[1:]:
            out = self.b.binary("stablehlo.and", out, p)
        return out

    def either(self, *preds: Value) -> Value:
        out = preds[0]
        for p in preds[1:]:
            out = self.b.binary("stablehlo.or", out, p)
        return out

    def no(self, pred: Value) -> Value:
        return self.b.op("stablehlo.not", [pred], pred.aval)


def _standard_block(v: _Vector, a: Value, b: Value, c: Value, d: Value) -> tuple[Value, Value, Value]:
    """LAPACK's dlanv2: the rotation ``(cs, sn)`` that puts the 2 x 2 block ``[[a, b], [c, d]]`` in
    standard form (upper triangular for real eigenvalues; equal diagonal and ``b c < 0`` for a
    complex pair), and whether its eigenvalues are real."""
    eps = float(np.finfo(v.dt).eps)
    c_zero, b_zero = v.cmp("EQ", c, 0.0), v.cmp("EQ", b, 0.0)
    standard = v.both(v.cmp("EQ", v.sub(a, d), 0.0), v.cmp("NE", v.sign(b), v.sign(c)))
    temp = v.sub(a, d)
    p = v.mul(0.5, temp)
    bcmax = v.max(v.abs(b), v.abs(c))
    bcmis = v.mul(v.mul(v.min(v.abs(b), v.abs(c)), v.sign(b)), v.sign(c))
    scale = v.max(v.abs(p), bcmax)
    safe_scale = v.where(v.cmp("EQ", scale, 0.0), 1.0, scale)
    z = v.add(v.mul(v.div(p, safe_scale), p), v.mul(v.div(bcmax, safe_scale), bcmis))
    real_pair = v.cmp("GE", z, 4 * eps)
    # real eigenvalues
    zz = v.add(p, v.mul(v.sign(p), v.mul(v.sqrt(safe_scale), v.sqrt(v.max(z, 0.0)))))
    tau = v.hypot(c, zz)
    safe_tau = v.where(v.cmp("EQ", tau, 0.0), 1.0, tau)
    cs_real, sn_real = v.div(zz, safe_tau), v.div(c, safe_tau)
    # a complex pair or nearly equal real eigenvalues
    sigma = v.add(b, c)
    tau = v.hypot(sigma, temp)
    safe_tau = v.where(v.cmp("EQ", tau, 0.0), 1.0, tau)
    cs = v.sqrt(v.mul(0.5, v.add(1.0, v.div(v.abs(sigma), safe_tau))))
    sn = v.mul(v.div(p, v.mul(safe_tau, cs)), v.mul(-1.0, v.sign(sigma)))
    aa, bb = v.add(v.mul(a, cs), v.mul(b, sn)), v.add(v.mul(v.mul(-1.0, a), sn), v.mul(b, cs))
    cc, dd = v.add(v.mul(c, cs), v.mul(d, sn)), v.add(v.mul(v.mul(-1.0, c), sn), v.mul(d, cs))
    b2 = v.add(v.mul(bb, cs), v.mul(dd, sn))
    c2 = v.sub(v.mul(cc, cs), v.mul(aa, sn))
    c2_zero, b2_zero = v.cmp("EQ", c2, 0.0), v.cmp("EQ", b2, 0.0)
    split = v.both(v.no(c2_zero), v.no(b2_zero), v.cmp("EQ", v.sign(b2), v.sign(c2)))
    sab, sac = v.sqrt(v.abs(b2)), v.sqrt(v.abs(c2))
    tau2 = v.div(1.0, v.sqrt(v.where(split, v.abs(v.add(b2, c2)), 1.0)))
    cs1, sn1 = v.mul(sab, tau2), v.mul(sac, tau2)
    cs_split, sn_split = v.sub(v.mul(cs, cs1), v.mul(sn, sn1)), v.add(v.mul(cs, sn1), v.mul(sn, cs1))
    swap = v.both(v.no(c2_zero), b2_zero)
    cs_c = v.where(split, cs_split, v.where(swap, v.mul(-1.0, sn), cs))
    sn_c = v.where(split, sn_split, v.where(swap, cs, sn))
    complex_real = v.either(split, c2_zero, swap)  # (the pair turned out real)
    cs_out = v.where(real_pair, cs_real, cs_c)
    sn_out = v.where(real_pair, sn_real, sn_c)
    is_real = v.either(real_pair, complex_real)
    cs_out = v.where(c_zero, 1.0, v.where(b_zero, 0.0, v.where(standard, 1.0, cs_out)))  # (dlanv2's order of cases)
    sn_out = v.where(c_zero, 0.0, v.where(b_zero, 1.0, v.where(standard, 0.0, sn_out)))
    is_real = v.either(c_zero, b_zero, v.both(v.no(standard), is_real))
    return cs_out, sn_out, is_real


def _francis_step(r: Builder, h: Value, z: Value, start: Value, hi: Value, trace: Value, det: Value,
                  step: Value) -> tuple[Value, Value]:
    """LAPACK's implicit double-shift QR step (dlahqr's) on the window [start, hi] of each matrix
    that takes one (``step``): the first column of ``h^2 - trace h + det`` at the window's start,
    then 3 x 3 Householder reflectors (2 x 2 at the window's end) chasing the bulge down, applied
    to whole rows and columns and gathered in ``z``. The loop over k is shared by the batch:
    a matrix's reflector is the identity outside its window."""
    count, n, _ = h.aval.shape
    dt = h.aval.dtype
    vec = (count,)
    v, iv = _Vector(r, vec, dt), _Vector(r, vec, np.dtype(np.int32))
    e = lambda i, j: _entries(r, h, i, j)
    s1, s2, s3 = start, iv.add(start, 1), iv.add(start, 2)
    h00, h01, h10, h11, h21 = e(s1, s1), e(s1, s2), e(s2, s1), e(s2, s2), e(s3, s2)
    parts = [v.add(v.sub(v.add(v.mul(h00, h00), v.mul(h01, h10)), v.mul(trace, h00)), det),
             v.mul(h10, v.sub(v.add(h00, h11), trace)), v.mul(h10, h21)]
    first = r.op("stablehlo.concatenate", [r.reshape(x, (count, 1)) for x in parts], _aval((count, 3), dt),
                 "dimension = 1 : i64")
    pad = lambda m, low: r.op("stablehlo.pad", [m, r.constant(0, dt)], _aval(
        (count, m.aval.shape[1] + low[1], m.aval.shape[2] + 1), dt), f"edge_padding_high = {_array(low)}, "
        f"edge_padding_low = {_array((0, 0, 0))}, interior_padding = {_array((0, 0, 0))}")
    hp, zp = pad(h, (0, 1, 1)), pad(z, (0, 0, 1))
    size = n + 1

    def body(b: Builder, k: Value, hp: Value, zp: Value) -> list[Value]:
        bv, biv = _Vector(b, vec, dt), _Vector(b, vec, np.dtype(np.int32))
        zero = b.constant(0, np.int32)
        kk = b.broadcast(k, vec)
        left = b.binary("stablehlo.maximum", b.binary("stablehlo.subtract", k, b.constant(1, np.int32)), zero)
        active = bv.both(step, biv.cmp("GE", kk, start), biv.cmp("LE", kk, biv.sub(hi, 1)))
        at_start = biv.cmp("EQ", kk, start)
        slice_ = lambda m, starts, sizes: b.op("stablehlo.dynamic_slice", [m, *starts], _aval(sizes, dt),
                                               f"slice_sizes = {_array(sizes)}")
        column = b.reshape(slice_(hp, [zero, k, left], (count, 3, 1)), (count, 3))
        x = b.select(b.broadcast(at_start, (count, 3), [0]), first, column)
        third = b.compare("EQ", b.iota((count, 3), 1), b.constant(2, np.int32, (count, 3)))
        beyond = b.broadcast(biv.cmp("GT", biv.add(kk, 2), hi), (count, 3), [0])
        x = b.select(b.binary("stablehlo.and", third, beyond), b.constant(0, dt, (count, 3)), x)
        reflector, tau, packed = _larfg(b, x, zero)
        tau = bv.where(active, tau, 0.0)
        rows3 = _reflect(b, slice_(hp, [zero, k, zero], (count, 3, size)), reflector, tau)
        hp = b.op("stablehlo.dynamic_update_slice", [hp, rows3, zero, k, zero], hp.aval)
        cols3 = _reflect_right(b, slice_(hp, [zero, zero, k], (count, size, 3)), reflector, tau)
        hp = b.op("stablehlo.dynamic_update_slice", [hp, cols3, zero, zero, k], hp.aval)
        z3 = _reflect_right(b, slice_(zp, [zero, zero, k], (count, n, 3)), reflector, tau)
        zp = b.op("stablehlo.dynamic_update_slice", [zp, z3, zero, zero, k], zp.aval)
        # (the bulge chased on: its column below the subdiagonal is zero, exactly)
        clean = bv.both(active, bv.no(at_start))
        beta = b.broadcast(b.reshape(b.slice(packed, (0, 0), (count, 1)), vec), (count, 3), [0])
        chased = b.select(b.compare("EQ", b.iota((count, 3), 1), b.constant(0, np.int32, (count, 3))), beta,
                          b.constant(0, dt, (count, 3)))
        current = b.reshape(slice_(hp, [zero, k, left], (count, 3, 1)), (count, 3))
        fixed = b.select(b.broadcast(clean, (count, 3), [0]), chased, current)
        hp = b.op("stablehlo.dynamic_update_slice", [hp, b.reshape(fixed, (count, 3, 1)), zero, k, left], hp.aval)
        return [b.binary("stablehlo.add", k, b.constant(1, np.int32)), hp, zp]

    steps = r.constant(n - 1, np.int32)
    state = [r.constant(0, np.int32), hp, zp]
    avals = [s.aval for s in state]
    regions = [r.region(avals, lambda b, k, *rest: [b.compare("LT", k, steps)]), r.region(avals, body)]
    _, hp, zp = r.ops("stablehlo.while", state, avals, "", regions)
    return r.slice(hp, (0, 0, 0), (count, n, n)), r.slice(zp, (0, 0, 0), (count, n, n))


def _real_schur(ctx: Builder, a: Value) -> tuple[Value, Value, Value]:
    """The real Schur form ``a = z (scale t) z^T`` of real matrices ([B, n, n]), as LAPACK's
    quasi-triangular one: ``(t, z, scale)``. The Hessenberg form, then implicit double-shift QR
    steps (``_francis_step``) on the unreduced window (from the last subdiagonal entry below ``eps``
    times its neighbours, set to zero), the shifts the eigenvalues of its trailing 2 x 2 (LAPACK's
    exceptional ones every 11th step without progress); a window of 1 x 1 or 2 x 2 deflated, a
    2 x 2 one put in standard form (``_standard_block``). inf, NaN or no convergence in 30 steps
    per eigenvalue give NaN."""
    count, n, _ = a.aval.shape
    dt = a.aval.dtype
    vec, shape = (count,), (count, n, n)
    h, z, scale, finite, rows, cols = _scaled_hessenberg(ctx, a)
    eps, tiny = float(np.finfo(dt).eps), float(np.finfo(dt).tiny)
    limit = 30 * max(n, 10)
    state = [ctx.constant(0, np.int32), h, z, ctx.constant(n - 1, np.int32, vec), ctx.constant(0, np.int32, vec)]
    avals = [s.aval for s in state]

    def cond(r: Builder, it: Value, h: Value, z: Value, hi: Value, stuck: Value) -> list[Value]:
        [busy] = r.reduce([r.compare("GT", hi, r.constant(0, np.int32, vec))], [r.constant(False, np.bool_)], [0],
                          lambda b, acc, v: [b.binary("stablehlo.or", acc, v)])
        return [r.binary("stablehlo.and", busy, r.compare("LT", it, r.constant(limit, np.int32)))]

    def body(r: Builder, it: Value, h: Value, z: Value, hi: Value, stuck: Value) -> list[Value]:
        v, iv = _Vector(r, vec, dt), _Vector(r, vec, np.dtype(np.int32))
        at = lambda k: iv.max(iv.sub(hi, k), 0)
        lo, lo2 = at(1), at(2)  # (the trailing 2 x 2 is [lo, hi])
        # the unreduced window [start, hi]: negligible subdiagonal entries (at or above hi) set to zero
        index = r.iota((count, n), 1)
        pick = lambda mask: _sum_rows(r, r.select(mask, h, r.constant(0, dt, shape)), 2)  # (by row)
        sub = pick(r.compare("EQ", rows, r.binary("stablehlo.add", cols, r.constant(1, np.int32, shape))))
        diagonal = pick(r.compare("EQ", rows, cols))
        before = r.op("stablehlo.pad", [r.slice(diagonal, (0, 0), (count, n - 1)), r.constant(0, dt)],
                      diagonal.aval, f"edge_padding_high = {_array((0, 0))}, edge_padding_low = {_array((0, 1))}, "
                      f"interior_padding = {_array((0, 0))}")
        nv = _Vector(r, (count, n), dt)
        negligible = nv.both(r.compare("GE", index, r.constant(1, np.int32, (count, n))),
                             r.compare("LE", index, r.broadcast(hi, (count, n), [0])),
                             nv.either(nv.cmp("LE", nv.abs(sub), nv.mul(eps, nv.add(nv.abs(before), nv.abs(diagonal)))),
                                       nv.cmp("LE", nv.abs(sub), tiny)))
        [start] = r.reduce([r.select(negligible, index, r.constant(0, np.int32, (count, n)))],
                           [r.constant(0, np.int32)], [1], lambda b, acc, x: [b.binary("stablehlo.maximum", acc, x)])
        below = r.compare("EQ", rows, r.binary("stablehlo.add", cols, r.constant(1, np.int32, shape)))
        h = r.select(r.binary("stablehlo.and", below, r.broadcast(negligible, shape, [0, 1])),
                     r.constant(0, dt, shape), h)
        entry = lambda i, j: _entries(r, h, i, j)
        alive = iv.cmp("GE", hi, 1)
        one = v.both(alive, iv.cmp("EQ", start, hi))
        two = v.both(alive, iv.cmp("EQ", start, lo))
        step = v.both(alive, iv.cmp("GE", iv.sub(hi, start), 2))
        # the double-shift step of the matrices that take one, with the trailing 2 x 2's eigenvalues as shifts
        h11, h12, h21, h22 = entry(lo, lo), entry(lo, hi), entry(hi, lo), entry(hi, hi)
        h_above = entry(lo, lo2)  # (the subdiagonal entry above the trailing 2 x 2)
        exceptional = iv.cmp("EQ", r.binary("stablehlo.remainder", stuck, iv.c(11)), iv.c(10))
        kick = v.add(v.abs(h21), v.abs(h_above))
        e11 = v.add(v.mul(0.75, kick), h22)
        trace = v.where(exceptional, v.mul(2.0, e11), v.add(h11, h22))
        det = v.where(exceptional, v.add(v.mul(e11, e11), v.mul(0.4375, v.mul(kick, kick))),
                      v.sub(v.mul(h11, h22), v.mul(h12, h21)))
        h, z = _francis_step(r, h, z, start, hi, trace, det, step)
        # deflation: one row, or a 2 x 2 block put in standard form
        cs, sn, is_real = _standard_block(v, entry(lo, lo), entry(lo, hi), entry(hi, lo), entry(hi, hi))
        cs, sn = v.where(two, cs, 1.0), v.where(two, sn, 0.0)

        def rotate(m: Value, axis: int) -> Value:
            """Rows (axis 1) or columns (axis 2) lo and hi of m: lo <- cs lo + sn hi, hi <- cs hi - sn lo."""
            index = rows if axis == 1 else cols
            is_lo = r.compare("EQ", index, r.broadcast(lo, shape, [0]))
            is_hi = r.compare("EQ", index, r.broadcast(hi, shape, [0]))
            line = lambda mask: _sum_rows(r, r.select(mask, m, r.constant(0, dt, shape)), axis)
            keep = [0, 2] if axis == 1 else [0, 1]
            m_lo, m_hi = (r.broadcast(line(mask), shape, keep) for mask in (is_lo, is_hi))
            c_, s_ = r.broadcast(cs, shape, [0]), r.broadcast(sn, shape, [0])
            new_lo = r.binary("stablehlo.add", r.binary("stablehlo.multiply", c_, m_lo),
                              r.binary("stablehlo.multiply", s_, m_hi))
            new_hi = r.binary("stablehlo.subtract", r.binary("stablehlo.multiply", c_, m_hi),
                              r.binary("stablehlo.multiply", s_, m_lo))
            return r.select(is_lo, new_lo, r.select(is_hi, new_hi, m))

        h = rotate(rotate(h, 1), 2)
        z = rotate(z, 2)
        pair = v.both(two, v.no(is_real))
        mean = v.mul(0.5, v.add(entry(lo, lo), entry(hi, hi)))
        diagonal = r.binary("stablehlo.and", r.compare("EQ", rows, cols), r.binary(
            "stablehlo.or", r.compare("EQ", rows, r.broadcast(lo, shape, [0])),
            r.compare("EQ", rows, r.broadcast(hi, shape, [0]))))
        h = r.select(r.binary("stablehlo.and", diagonal, r.broadcast(pair, shape, [0])),
                     r.broadcast(mean, shape, [0]), h)
        below = r.binary("stablehlo.and", r.compare("EQ", rows, r.broadcast(hi, shape, [0])),
                         r.compare("EQ", cols, r.broadcast(lo, shape, [0])))
        h = r.select(r.binary("stablehlo.and", below, r.broadcast(v.both(two, is_real), shape, [0])),
                     r.constant(0, dt, shape), h)
        hi = iv.where(one, iv.sub(hi, 1), iv.where(two, iv.max(iv.sub(hi, 2), 0), hi))
        stuck = iv.where(step, iv.add(stuck, 1), 0)
        return [r.binary("stablehlo.add", it, r.constant(1, np.int32)), h, z, hi, stuck]

    if n > 1:
        regions = [ctx.region(avals, cond), ctx.region(avals, body)]
        _, h, z, hi, _ = ctx.ops("stablehlo.while", state, avals, "", regions)
        finite = ctx.binary("stablehlo.and", finite, ctx.compare("EQ", hi, ctx.constant(0, np.int32, vec)))
    ok = ctx.broadcast(finite, shape, [0])
    nan = ctx.constant(np.nan, dt, shape)
    return ctx.select(ok, h, nan), ctx.select(ok, z, nan), scale


def _schur(ctx: Builder, out: list, x: Value, *, compute_schur_vectors: bool) -> list[Value]:
    """Complex matrices: ``_complex_schur``; real ones: ``_real_schur`` (LAPACK's quasi-triangular
    form)."""
    count, n, _ = _batched(x)
    if n == 0:
        return [x, x][:len(out)]
    a = ctx.reshape(x, (count, n, n))
    t, z, scale = (_complex_schur if dtypes.is_complex(x.aval.dtype) else _real_schur)(ctx, a)
    t = ctx.binary("stablehlo.multiply", t, ctx.broadcast(ctx.convert(scale, t.aval.dtype), t.aval.shape, [0]))
    return [ctx.reshape(t, out[0].shape), ctx.reshape(z, out[0].shape)][:len(out)]


def _complexified(ctx: Builder, t: Value, z: Value) -> tuple[Value, Value, Value, Value]:
    """A real Schur form ``(t, z)`` made complex triangular: each standard 2 x 2 block ``[[a, b],
    [c, a]]`` turned by the unitary ``[u1, u2]``, ``u1 = (b, i w) / |(b, i w)|`` its eigenvector of
    ``a + i w`` (``w = sqrt(-b c)``), ``u2 = (i w, b) / |...|``, so that its eigenvalues stand on
    the diagonal as LAPACK's real geev lists them (the positive imaginary part first). Returns
    ``(t, z, w, real)``: the eigenvalues exact (conjugate pairs exactly so, real ones real) and
    which are real."""
    count, n, _ = t.aval.shape
    real_dt = t.aval.dtype
    dt = dtypes.complex_dtype(real_dt)
    shape = (count, n, n)
    rows, cols = ctx.iota(shape, 1), ctx.iota(shape, 2)
    one = ctx.constant(1, np.int32, shape)
    pick = lambda mask, axis: _sum_rows(ctx, ctx.select(mask, t, ctx.constant(0, real_dt, shape)), axis)
    sub = pick(ctx.compare("EQ", rows, ctx.binary("stablehlo.add", cols, one)), 1)  # t[k + 1, k], by column k
    sup = pick(ctx.compare("EQ", cols, ctx.binary("stablehlo.add", rows, one)), 2)  # t[k, k + 1], by row k
    diagonal = pick(ctx.compare("EQ", rows, cols), 1)
    v = _Vector(ctx, (count, n), real_dt)
    start = v.cmp("NE", sub, 0.0)
    omega = v.sqrt(v.abs(v.mul(sup, sub)))
    length = v.hypot(sup, omega)
    length = v.where(start, length, 1.0)
    first, turn = v.div(sup, length), v.div(omega, length)  # (u's real diagonal and imaginary corners)

    def later(x: Value, fill: Any) -> Value:
        """x moved one place on (entry k is x's k - 1)."""
        return ctx.op("stablehlo.pad", [ctx.slice(x, (0, 0), (count, n - 1)), ctx.constant(fill, x.aval.dtype)],
                      x.aval, f"edge_padding_high = {_array((0, 0))}, edge_padding_low = {_array((0, 1))}, "
                      f"interior_padding = {_array((0, 0))}")

    second = later(start, False)
    u_diagonal = v.where(start, first, v.where(second, later(first, 1.0), 1.0))
    corner = ctx.op("stablehlo.complex", [v.c(0.0), v.where(start, turn, 0.0)], _aval((count, n), dt))
    u = ctx.select(ctx.compare("EQ", rows, cols), ctx.broadcast(ctx.convert(u_diagonal, dt), shape, [0, 1]),
                   ctx.constant(0, dt, shape))
    u = ctx.select(ctx.compare("EQ", rows, ctx.binary("stablehlo.add", cols, one)),
                   ctx.broadcast(corner, shape, [0, 2]), u)
    u = ctx.select(ctx.compare("EQ", cols, ctx.binary("stablehlo.add", rows, one)),
                   ctx.broadcast(corner, shape, [0, 1]), u)
    tc = _matmul(ctx, _conj_value(ctx, ctx.transpose(u, (0, 2, 1))), _matmul(ctx, _as_complex(ctx, t), u))
    zc = _matmul(ctx, _as_complex(ctx, z), u)
    imaginary = v.where(start, omega, v.where(second, v.mul(-1.0, later(omega, 0.0)), 0.0))
    w = ctx.op("stablehlo.complex", [diagonal, imaginary], _aval((count, n), dt))
    tc = ctx.select(ctx.compare("GT", rows, cols), ctx.constant(0, dt, shape), tc)
    tc = ctx.select(ctx.compare("EQ", rows, cols), ctx.broadcast(w, shape, [0, 1]), tc)
    return tc, zc, w, v.no(v.either(start, second))


def _eig(ctx: Builder, out: list, x: Value, *, compute_left_eigenvectors: bool, compute_right_eigenvectors: bool,
         enable_eigvec_derivs: bool) -> list[Value]:
    """The Schur form (``_complex_schur``; for real matrices ``_real_schur`` made complex by
    ``_complexified``, so that conjugate pairs come exactly so and real eigenvalues real, with
    real eigenvectors), the eigenvalues on its diagonal; the right eigenvectors ``z x`` and the
    left ones ``z y`` from those of the triangular factor (``y`` those of ``t^H``, through the
    reversal that makes it upper triangular), normalized as LAPACK's geev. The eigenvalues come
    in the iteration's order, which is often but not always LAPACK's."""
    count, n, _ = _batched(x)
    dt = dtypes.complex_dtype(x.aval.dtype)
    if n == 0:
        return [ctx.constant(0, dt, o.shape) for o in out]
    a = ctx.reshape(x, (count, n, n))
    shape = (count, n, n)
    if dtypes.is_complex(x.aval.dtype):
        t, z, scale = _complex_schur(ctx, a)
        rows, cols = ctx.iota(shape, 1), ctx.iota(shape, 2)
        w = _sum_rows(ctx, ctx.select(ctx.compare("EQ", rows, cols), t, ctx.constant(0, dt, shape)), 1)
        real = None
    else:
        t, z, scale = _real_schur(ctx, a)
        t, z, w, real = _complexified(ctx, t, z)
    results = [ctx.reshape(ctx.binary("stablehlo.multiply", w, ctx.broadcast(ctx.convert(scale, dt), w.aval.shape,
                                                                               [0])), out[0].shape)]

    def finish(v: Value) -> Value:
        v = _normalized(ctx, v)
        if real is None:
            return v
        keep = ctx.broadcast(real, shape, [0, 2])  # (a real eigenvalue's vector is real)
        return ctx.select(keep, ctx.convert(_real_part(ctx, v), dt), v)

    if compute_left_eigenvectors:
        flipped = ctx.op("stablehlo.reverse", [_conj_value(ctx, ctx.transpose(t, (0, 2, 1)))], t.aval,
                         f"dimensions = {_array((1, 2))}")
        y = ctx.op("stablehlo.reverse", [_triangular_eigenvectors(ctx, flipped)], t.aval,
                   f"dimensions = {_array((1, 2))}")
        results.append(ctx.reshape(finish(_matmul(ctx, z, y)), out[len(results)].shape))
    if compute_right_eigenvectors:
        results.append(ctx.reshape(finish(_matmul(ctx, z, _triangular_eigenvectors(ctx, t))),
                                   out[len(results)].shape))
    return results


lower_rules[linalg.schur_p] = _schur
lower_rules[linalg.eig_p] = _eig


lower_rules[linalg.svd_p] = _svd
lower_rules[linalg.eigh_p] = _eigh
lower_rules[linalg.geqrf_p] = _geqrf
lower_rules[linalg.hessenberg_p] = _hessenberg
lower_rules[linalg.geqp3_p] = _geqp3
lower_rules[linalg.householder_product_p] = _householder_product
lower_rules[linalg.qr_p] = _qr
lower_rules[linalg.lu_p] = _lu
lower_rules[linalg.lu_pivots_to_permutation_p] = _lu_pivots_to_permutation
lower_rules[fft_p] = _fft
lower_rules[linalg.cholesky_p] = _cholesky
lower_rules[linalg.triangular_solve_p] = _triangular_solve


# --- collectives over an axis of one device ---------------------------------------------------------------
def _one_device(names: Sequence[Any], collective: str) -> None:
    """Check that the named axes (bound while ``pmap`` or ``shard_map`` compiles its block) span one
    device: this backend compiles single-device programs, where a collective is then the identity."""
    try:
        size = parallel.axis_size(tuple(names))
    except NameError:
        size = None
    if size != 1:
        extent = "is not bound here" if size is None else f"has size {size}"
        raise LoweringError(f"the PJRT backend cannot compile the primitive `{collective}` over the axis "
                            f"{tuple(names)!r}, which {extent}: outside a shard_map over a mesh of this "
                            "backend's devices (which XLA partitions), a collective is lowered only over an axis of "
                            "one device; use shard_map over such a mesh, or run on ember's CPU backend")


def _collective(p: Primitive, identity: Callable[..., Value]) -> Rule:
    def rule(ctx: Builder, out: list, *xs: Value, axes: tuple, **params: Any) -> Value:
        if ctx.module.manual and all(a in ctx.module.manual for a in axes):
            return _ACROSS_DEVICES[p](ctx, out, *xs, axes=tuple(axes), **params)
        _one_device(axes, p.name)
        return identity(ctx, out, *xs, **params)
    return rule


# --- collectives across the devices of a manual computation (shard_map over a device mesh) -------------------
def _groups(ctx: Builder, axes: tuple) -> np.ndarray:
    """The partition ids that meet in a collective over ``axes``: one row per group, its members in
    row-major order over ``axes`` (partition id = position in the mesh, which is the device assignment)."""
    mesh = ctx.module.mesh.mesh
    names, sizes = list(mesh.axis_names), list(mesh.axis_sizes)
    ids = np.arange(int(np.prod(sizes))).reshape(sizes)
    others = [i for i, n in enumerate(names) if n not in axes]
    order = others + [names.index(a) for a in axes]
    return ids.transpose(order).reshape(-1, int(np.prod([sizes[names.index(a)] for a in axes], dtype=np.int64)))


def _dense_i64(array: np.ndarray) -> str:
    shape = "x".join(str(d) for d in array.shape)
    rows = "[" + ", ".join("[" + ", ".join(str(int(v)) for v in row) + "]" for row in array) + "]"
    return f"dense<{rows}> : tensor<{shape}xi64>"


def _channel(ctx: Builder) -> str:
    return f"channel_handle = #stablehlo.channel_handle<handle = {next(ctx.module.channels)}, type = 1>"


def _reducer(ctx: Builder, dtype: np.dtype, op: str) -> str:
    scalar = ShapedArray((), dtype)
    return ctx.region([scalar, scalar], lambda r, a, b: [r.binary(op, a, b)])


def _all_reduce(op: Callable[[np.dtype], str]) -> Rule:
    def rule(ctx: Builder, out: list, x: Value, *, axes: tuple, **_: Any) -> Value:
        props = f"{_channel(ctx)}, replica_groups = {_dense_i64(_groups(ctx, axes))}, use_global_device_ids"
        return ctx.op("stablehlo.all_reduce", [x], out[0], props, [_reducer(ctx, x.aval.dtype, op(x.aval.dtype))])
    return rule


def _all_gather_across(ctx: Builder, out: list, x: Value, *, axes: tuple, axis_size: int, axis: int) -> Value:
    props = (f"all_gather_dim = {axis} : i64, {_channel(ctx)}, replica_groups = {_dense_i64(_groups(ctx, axes))}, "
             "use_global_device_ids")
    return ctx.op("stablehlo.all_gather", [x], out[0], props)


def _psum_scatter_across(ctx: Builder, out: list, x: Value, *, axes: tuple, axis_size: int,
                         scatter_dimension: int) -> Value:
    props = (f"{_channel(ctx)}, replica_groups = {_dense_i64(_groups(ctx, axes))}, "
             f"scatter_dimension = {scatter_dimension} : i64, use_global_device_ids")
    add = _monoid("stablehlo.add", "stablehlo.or")(x.aval.dtype)
    return ctx.op("stablehlo.reduce_scatter", [x], out[0], props, [_reducer(ctx, x.aval.dtype, add)])


def _all_to_all_across(ctx: Builder, out: list, x: Value, *, axes: tuple, axis_size: int, split_axis: int,
                       concat_axis: int) -> Value:
    props = (f"{_channel(ctx)}, concat_dimension = {concat_axis} : i64, replica_groups = "
             f"{_dense_i64(_groups(ctx, axes))}, split_count = {axis_size} : i64, split_dimension = {split_axis} : i64")
    return ctx.op("stablehlo.all_to_all", [x], out[0], props)


def _ppermute_across(ctx: Builder, out: list, x: Value, *, axes: tuple, perm: tuple) -> Value:
    pairs = np.array([[group[s], group[d]] for group in _groups(ctx, axes) for s, d in perm],
                     dtype=np.int64).reshape(-1, 2)
    props = f"{_channel(ctx)}, source_target_pairs = {_dense_i64(pairs)}"
    return ctx.op("stablehlo.collective_permute", [x], out[0], props)


def _axis_index_across(ctx: Builder, out: list, *, axes: tuple) -> Value:
    (name,) = axes
    mesh = ctx.module.mesh.mesh
    names, sizes = list(mesh.axis_names), list(mesh.axis_sizes)
    k = names.index(name)
    stride = int(np.prod(sizes[k + 1:], dtype=np.int64))
    pid = ctx.op("stablehlo.partition_id", [], ShapedArray((), np.dtype(np.uint32)))
    index = ctx.convert(pid, np.int32)
    if stride != 1:
        index = ctx.binary("stablehlo.divide", index, ctx.constant(stride, np.int32))
    return ctx.binary("stablehlo.remainder", index, ctx.constant(sizes[k], np.int32))


_ACROSS_DEVICES: dict[Primitive, Rule] = {
    parallel.psum_p: _all_reduce(_monoid("stablehlo.add", "stablehlo.or")),
    parallel.pmax_p: _all_reduce(_monoid("stablehlo.maximum", "stablehlo.or")),
    parallel.pmin_p: _all_reduce(_monoid("stablehlo.minimum", "stablehlo.and")),
    parallel.all_gather_p: _all_gather_across,
    parallel.psum_scatter_p: _psum_scatter_across,
    parallel.all_to_all_p: _all_to_all_across,
    parallel.ppermute_p: _ppermute_across,
    parallel.axis_index_p: _axis_index_across,
}


def _manual_dims(splits: tuple) -> str:
    return "[" + ", ".join("{" + ", ".join(f'"{n}"' for n in names) + "}" for names in splits) + "]"


def _shard_map(ctx: Builder, out: list, *args: Value, jaxpr: ClosedJaxpr, mesh: Any, in_specs: tuple,
               out_specs: tuple, check_vma: bool) -> list[Value]:
    """Shardy's manual computation: each device runs ``jaxpr`` on its blocks, the collectives in it
    across the mesh's devices (as JAX 0.10 lowers shard_map)."""
    module = ctx.module
    if module.mesh is None or module.mesh.mesh != mesh:
        raise LoweringError(f"a shard_map over the mesh {mesh} can only be compiled in a program over that mesh")
    manual = tuple(mesh.axis_names)
    if all(mesh.shape[n] == 1 for n in manual):  # (JAX emits no manual computation over one device)
        previous, module.manual = module.manual, manual
        try:
            return lower_closed(ctx, jaxpr, list(args))
        finally:
            module.manual = previous
    ins = ", ".join(f"<@mesh, {_manual_dims(sp)}>" for sp in in_specs)
    outs = ", ".join(f"<@mesh, {_manual_dims(sp)}>" for sp in out_specs)
    axes = ", ".join(f'"{n}"' for n in manual)
    props = (f"in_shardings = #sdy.sharding_per_value<[{ins}]>, out_shardings = #sdy.sharding_per_value<[{outs}]>, "
             f"manual_axes = #sdy<manual_axes{{{axes}}}>")
    previous, module.manual = module.manual, manual
    try:
        body = ctx.region(jaxpr.in_avals, lambda r, *blocks: lower_closed(r, jaxpr, list(blocks)), "sdy.return")
    finally:
        module.manual = previous
    return ctx.ops("sdy.manual_computation", list(args), out, props, [body])


lower_rules[parallel.shard_map_p] = _shard_map


for _p in (parallel.psum_p, parallel.pmax_p, parallel.pmin_p, parallel.all_gather_p, parallel.psum_scatter_p,
           parallel.all_to_all_p):  # (the gathering ones in their tiled form: one block is the whole)
    lower_rules[_p] = _collective(_p, lambda ctx, out, x, **_: x)
lower_rules[parallel.ppermute_p] = _collective(parallel.ppermute_p, (  # (to itself, or nothing: zeros)
    lambda ctx, out, x, *, perm: x if (0, 0) in perm else ctx.constant(0, x.aval.dtype, x.aval.shape)))
lower_rules[parallel.axis_index_p] = _collective(parallel.axis_index_p, lambda ctx, out: ctx.constant(0, np.int32))


# --- refused, with the reason ----------------------------------------------------------------------------------
_CALLBACK = ("a host callback, which is never lowered into a device program: the PJRT backend runs it on the "
             "host between device programs (ember.backends.pjrt.program.SplitExecutable), at a program's top "
             "level and inside loops, branches and calls, which the host then runs step by step")
REFUSED_BY_NAME["debug_print"] = _CALLBACK  # (defined in ember.debug, above this room)
for _p in (cb.pure_callback_p, cb.io_callback_p, cb.debug_callback_p):
    REFUSED[_p] = _CALLBACK
REFUSED[custom_vjp_lin_p] = ("the linear part of a custom_vjp under differentiation, which has no forward meaning "
                             "(it never reaches a compiled program)")
