"""Elementwise primitives: math, comparisons, logic, conversions, selection.

All share one shape rule: operands have equal shapes, except that rank-0
operands broadcast (so ``mul x 2.0:f32[]`` needs no broadcast equation), and the binary
operations broadcast size-1 dimensions between operands of one rank, as JAX's do
(``add a:f32[2,3] b:f32[1,3]``; the backends see explicit broadcasts, ``compiler.broadcasts``).
Operand dtypes must be equal (``jnp`` promotes first); the result is weakly
typed only when every operand is (a comparison of weak operands too, as in JAX).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.core import traits
from ember.core.array import Array
from ember.core.avals import ShapedArray
from ember.core.primitive import Primitive
from ember.core.trace import Tracer
from ember.core.traits import Family, free, transcendental_per_output_element
from ember.lax.base import aval, check_dtype, is_python_scalar, primitive

ELEMENTWISE = traits.ELEMENTWISE  # every elementwise primitive (a view of the traits table)

# Operand kinds: b bool, i signed, u unsigned, f floating, c complex (as ``base.check_dtype``).
FLOAT, INT, NUM, INT_BOOL, ANY = "f", "iu", "iufc", "biu", "biufc"
INEXACT, REAL, ORDERED = "fc", "iuf", "biuf"


def broadcast_shapes_scalar(name: str, avals: tuple[ShapedArray, ...], size_one: bool = False) -> tuple[int, ...]:
    """The result shape of elementwise operands: their common shape, rank-0 ones broadcasting, and
    with ``size_one`` (the binary operations) size-1 dimensions too."""
    shapes = {a.shape for a in avals if a.shape != ()}
    if len(shapes) > 1:
        nonscalar = [a.shape for a in avals if a.shape != ()]
        ranks = {len(s) for s in nonscalar}
        if len(ranks) > 1:  # JAX's messages, and its TypeError
            raise TypeError(f"{name}: arrays must have the same number of dimensions, got {ranks}")
        if any(len({n for n in sizes if n != 1}) > 1 for sizes in zip(*nonscalar)):
            raise TypeError(f"{name} got incompatible shapes for broadcasting: {', '.join(map(str, nonscalar))}.")
        if size_one:
            return tuple(next(iter({n for n in sizes if n != 1}), 1) for sizes in zip(*nonscalar))
        listed = ", ".join(str(a.shape) for a in avals)
        raise TypeError(f"{name} got shapes {listed}, which differ in size-1 dimensions: ember's lax operands must "
                        "have equal shapes (or be scalars). Broadcast them first (lax.broadcast_in_dim; jnp "
                        "broadcasts for you).")
    return shapes.pop() if shapes else ()


def _elementwise_rule(*avals: ShapedArray, name: str, kinds: str, out_dtype: Any = None,
                      size_one: bool = False) -> ShapedArray:
    shape = broadcast_shapes_scalar(name, avals, size_one)
    dts = {a.dtype for a in avals}
    if len(dts) > 1:
        listed = ", ".join(str(a.dtype) for a in avals)
        raise TypeError(f"{name} requires operands of one dtype, got {listed}. "
                        "Convert them first (lax.convert_element_type), or use jnp, which promotes.")
    dt = dts.pop()
    check_dtype(name, dt, kinds)
    # Weak exactly when every operand is, comparisons included (as in JAX 0.10: ``jnp.array(1.) > 0`` is a
    # weak bool; the promotion lattice has no weak bool node, so it joins others as a plain bool).
    weak = all(a.weak_type for a in avals)
    return ShapedArray(shape, out_dtype or dt, weak)


def _define(name: str, kinds: str, out_dtype: Any = None, size_one: bool = False, **declared: Any) -> Primitive:
    def rule(*avals: ShapedArray, **params: Any) -> ShapedArray:
        return _elementwise_rule(*avals, name=name, kinds=kinds, out_dtype=out_dtype, size_one=size_one)

    return primitive(name, rule, family=Family.ELEMENTWISE, keep_results=True, **declared)


# --- unary --------------------------------------------------------------------------
neg_p = _define("neg", NUM, linear=True, cheap=True)
sign_p = _define("sign", NUM, cheap=True)
floor_p = _define("floor", FLOAT, cheap=True)
ceil_p = _define("ceil", FLOAT, cheap=True)


def _to_real_rule(name: str, kinds: str) -> Any:
    """``abs``, ``real`` and ``imag``: a complex operand gives its parts' type."""
    def rule(x: ShapedArray) -> ShapedArray:
        out = _elementwise_rule(x, name=name, kinds=kinds)
        return ShapedArray(out.shape, dtypes.real_dtype(out.dtype), out.weak_type)
    return rule


abs_p = primitive("abs", _to_real_rule("abs", NUM), family=Family.ELEMENTWISE, cheap=True)
real_p = primitive("real", _to_real_rule("real", "c"), family=Family.ELEMENTWISE, linear=True)
imag_p = primitive("imag", _to_real_rule("imag", "c"), family=Family.ELEMENTWISE, linear=True)


def _conj_rule(x: ShapedArray, *, input_dtype: Any) -> ShapedArray:
    out = _elementwise_rule(x, name="conj", kinds=INEXACT)
    return ShapedArray(out.shape, dtypes.complex_dtype(out.dtype), out.weak_type)


def _complex_rule(x: ShapedArray, y: ShapedArray) -> ShapedArray:
    out = _elementwise_rule(x, y, name="complex", kinds="f")
    if out.dtype not in (dtypes.float32, dtypes.float64):
        raise TypeError(f"complex needs float32 or float64 parts, got {out.dtype}")
    return ShapedArray(out.shape, dtypes.complex_dtype(out.dtype), out.weak_type)


conj_p = primitive("conj", _conj_rule, family=Family.ELEMENTWISE, linear=True)
complex_p = primitive("complex", _complex_rule, family=Family.ELEMENTWISE, linear=True)
not_p = _define("not", INT_BOOL, cheap=True)
population_count_p = _define("population_count", INT)
is_finite_p = _define("is_finite", FLOAT, out_dtype=dtypes.bool_)

# Functions of floating or complex operands (as in JAX), then those of real ones only.
# All transcendental but the square roots, which are one instruction (the cost model counts them as
# transcendentals all the same, as XLA's does).
_INEXACT_UNARY = ("exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "sin", "cos", "tan",
                  "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
_FLOAT_UNARY = ("cbrt", "erf", "erfc", "erf_inv", "lgamma", "digamma")
(exp_p, exp2_p, log_p, log1p_p, expm1_p, tanh_p, logistic_p, sin_p, cos_p, tan_p, asin_p, acos_p,
 atan_p, sinh_p, cosh_p, asinh_p, acosh_p, atanh_p) = (_define(n, INEXACT, transcendental=True) for n in _INEXACT_UNARY)
sqrt_p, rsqrt_p = (_define(n, INEXACT, cost=transcendental_per_output_element) for n in ("sqrt", "rsqrt"))
cbrt_p, erf_p, erfc_p, erf_inv_p, lgamma_p, digamma_p = (_define(n, FLOAT, transcendental=True) for n in _FLOAT_UNARY)


def _round_rule(x: ShapedArray, *, rounding_method: int) -> ShapedArray:
    return _elementwise_rule(x, name="round", kinds=FLOAT)


round_p = primitive("round", _round_rule, family=Family.ELEMENTWISE, cheap=True)


def _integer_pow_rule(x: ShapedArray, *, y: int) -> ShapedArray:
    if not isinstance(y, int):
        raise TypeError(f"integer_pow needs a Python int exponent, got {y!r}")
    if y < 0 and not dtypes.is_inexact(x.dtype):  # (JAX's words; ~ marks a weak type)
        raise TypeError(f"Integers cannot be raised to negative powers, got integer_pow("
                        f"{'~' if x.weak_type else ''}{x.dtype.name}[{','.join(map(str, x.shape))}], {y})")
    return _elementwise_rule(x, name="integer_pow", kinds=NUM)


integer_pow_p = primitive("integer_pow", _integer_pow_rule, family=Family.ELEMENTWISE)
square_p = _define("square", NUM, cheap=True)  # (JAX's primitive of ``lax.square`` and ``jnp.square``: x * x)

# --- binary -------------------------------------------------------------------------
SIZE_ONE: set[Primitive] = set()  # the binary operations: operands broadcast their size-1 dimensions


def _binary(name: str, kinds: str, **declared: Any) -> Primitive:
    """A binary operation: operands of one rank broadcast their size-1 dimensions (JAX's rule)."""
    p = _define(name, kinds, size_one=True, **declared)
    SIZE_ONE.add(p)
    return p


add_p = _binary("add", NUM, linear=True, cheap=True)
sub_p = _binary("sub", NUM, linear=True, cheap=True)
mul_p = _binary("mul", NUM, linear=True, cheap=True)
div_p = _binary("div", NUM, linear=True)
rem_p = _binary("rem", REAL)
pow_p = _binary("pow", INEXACT, transcendental=True)
max_p = _binary("max", ANY, cheap=True)
min_p = _binary("min", ANY, cheap=True)
atan2_p = _binary("atan2", FLOAT, transcendental=True)
nextafter_p = _binary("nextafter", FLOAT)
and_p = _binary("and", INT_BOOL, cheap=True)
or_p = _binary("or", INT_BOOL, cheap=True)
xor_p = _binary("xor", INT_BOOL, cheap=True)
shift_left_p = _binary("shift_left", INT)
shift_right_arithmetic_p = _binary("shift_right_arithmetic", INT)
shift_right_logical_p = _binary("shift_right_logical", INT)
eq_p = _binary("eq", ANY, out_dtype=dtypes.bool_, cheap=True)
ne_p = _binary("ne", ANY, out_dtype=dtypes.bool_, cheap=True)
lt_p = _binary("lt", ORDERED, out_dtype=dtypes.bool_, cheap=True)
le_p = _binary("le", ORDERED, out_dtype=dtypes.bool_, cheap=True)
gt_p = _binary("gt", ORDERED, out_dtype=dtypes.bool_, cheap=True)
ge_p = _binary("ge", ORDERED, out_dtype=dtypes.bool_, cheap=True)


# --- conversions, selection, clamp -----------------------------------------------------
def _convert_rule(x: ShapedArray, *, new_dtype: np.dtype, weak_type: bool) -> ShapedArray:
    return ShapedArray(x.shape, new_dtype, weak_type)


convert_element_type_p = primitive("convert_element_type", _convert_rule, family=Family.ELEMENTWISE, linear=True,
                                   cheap=True, cost=free)


def _bitcast_rule(x: ShapedArray, *, new_dtype: np.dtype) -> ShapedArray:
    old, new = x.dtype.itemsize, new_dtype.itemsize
    if old == new:
        return ShapedArray(x.shape, new_dtype)
    if old > new:
        if old % new:
            raise TypeError(f"cannot bitcast {x.dtype} to {new_dtype}")
        return ShapedArray(x.shape + (old // new,), new_dtype)
    if not x.shape or x.shape[-1] != new // old:
        raise TypeError(f"bitcast from {x.dtype} to the wider {new_dtype} needs a last dimension of "
                        f"size {new // old}, got shape {x.shape}")
    return ShapedArray(x.shape[:-1], new_dtype)


bitcast_convert_type_p = primitive("bitcast_convert_type", _bitcast_rule, cost=free)  # (widths may differ)
# ``jnp.array(x)`` and ``x.copy()`` of a traced value, as in JAX: the value itself (the compiler drops it)
copy_p = primitive("copy", lambda x: x, family=Family.ELEMENTWISE, linear=True, cheap=True, cost=free)


def convert_element_type(x: Any, new_dtype: Any, weak_type: bool = False) -> Any:
    """Convert ``x`` to ``new_dtype`` (canonicalized). A no-op if the type already matches.
    Complex to real keeps the real part (to bool: ``x != 0``) and warns, as JAX does."""
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    a = aval(x)
    if dtypes.is_complex(a.dtype) and not dtypes.is_complex(new_dtype):
        warnings.warn("Casting complex values to real discards the imaginary part", np.exceptions.ComplexWarning,
                      stacklevel=2)
    if a.dtype == new_dtype and a.weak_type == weak_type:
        return x
    if isinstance(x, Tracer):
        return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))
    # A concrete value: fold now (also while tracing, so the IR sees a constant, not an equation).
    value = getattr(x, "_value", None)
    if value is None:
        value = np.asarray(x, dtype=a.dtype if type(x) in (int, float, complex, bool) else None)
    converted = dtypes.convert_values(value, new_dtype)
    # (a copy only where the conversion gave its input back: that buffer may be a caller's NumPy array)
    value = np.array(converted, dtype=new_dtype) if converted is value else np.asarray(converted, dtype=new_dtype)
    return Array(value, ShapedArray(value.shape, new_dtype, bool(weak_type)))


def bitcast_convert_type(x: Any, new_dtype: Any) -> Any:
    """Reinterpret the bits of ``x`` as ``new_dtype`` (shape changes when widths differ)."""
    new_dtype = dtypes.canonicalize_dtype(new_dtype)
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype)


def _select_n_rule(which: ShapedArray, *cases: ShapedArray) -> ShapedArray:
    if not cases:
        raise TypeError("select_n needs at least one case")
    if which.dtype != dtypes.bool_ and which.dtype not in dtypes.INTEGER:
        raise TypeError(f"select_n's selector must be bool or integer, got {which.dtype}")
    if which.dtype == dtypes.bool_ and len(cases) > 2:
        raise TypeError("a boolean selector chooses between at most two cases")
    if len({c.shape for c in cases if c.shape != ()}) > 1:
        raise TypeError(f"select cases must have the same shapes, got [{', '.join(str(c.shape) for c in cases)}].")
    out = _elementwise_rule(*cases, name="select_n", kinds=ANY)
    if which.shape not in ((), out.shape) and out.shape != ():
        raise TypeError(f"select `which` must be scalar or have the same shape as cases, got `which` shape "
                        f"{which.shape} but case shape {out.shape}.")
    shape = out.shape if out.shape else which.shape
    return ShapedArray(shape, out.dtype, out.weak_type)


select_n_p = primitive("select_n", _select_n_rule, family=Family.ELEMENTWISE, linear=True, cheap=True)


def _clamp_rule(lo: ShapedArray, x: ShapedArray, hi: ShapedArray) -> ShapedArray:
    for bound, label in ((lo, "min"), (hi, "max")):
        if bound.shape not in ((), x.shape):
            raise TypeError(f"clamp requires {label}.shape == operand.shape or {label}.shape == (), got "
                            f"{label}.shape={bound.shape}, operand.shape={x.shape}.")
    out = _elementwise_rule(lo, x, hi, name="clamp", kinds=ANY)
    return ShapedArray(x.shape, out.dtype, x.weak_type and out.weak_type)


clamp_p = primitive("clamp", _clamp_rule, family=Family.ELEMENTWISE, cheap=True)


# --- the public lax functions ------------------------------------------------------------
def _scalars_like(args: tuple) -> tuple:
    """Give Python scalars the dtype of the array operands (weakly), as lax does."""
    if not any(is_python_scalar(a) for a in args):
        return args
    arrays = [a for a in args if not is_python_scalar(a)]
    if not arrays:
        return args
    dt = aval(arrays[0]).dtype
    return tuple(_scalar_of_dtype(a, dt) if is_python_scalar(a) else a for a in args)


def _scalar_of_dtype(x: Any, dt: np.dtype) -> Any:
    return convert_element_type(x, dt, weak_type=True)


def _broadcast_size_one(name: str, args: tuple) -> tuple:
    """Operands of the functions that broadcast as the binary operations do but bind primitives
    of equal shapes (``complex``, complex ``atan2``, ``lax.special``'s): their size-1 dimensions
    broadcast here, explicitly. Other shapes raise JAX's errors."""
    shapes = [aval(a).shape for a in args if not is_python_scalar(a)]
    nonscalar = [s for s in shapes if s != ()]
    if len(set(nonscalar)) <= 1:
        return args
    ranks = {len(s) for s in nonscalar}
    if len(ranks) > 1:
        raise TypeError(f"{name}: arrays must have the same number of dimensions, got {ranks}")
    out_shape = []
    for sizes in zip(*nonscalar):
        kept = {n for n in sizes if n != 1}
        if len(kept) > 1:
            raise TypeError(f"{name} got incompatible shapes for broadcasting: {', '.join(map(str, nonscalar))}.")
        out_shape.append(kept.pop() if kept else 1)
    shape = tuple(out_shape)
    return tuple(a if is_python_scalar(a) or aval(a).shape in ((), shape)
                 else _broadcast_in_dim(a, shape, tuple(range(len(shape)))) for a in args)


def _nothing_to_broadcast(args: tuple) -> bool:
    """Whether every operand is an array (no Python scalar) of one shape, or of rank 0: then there
    is nothing to convert or broadcast (the commonest call, checked first for the sake of eager
    calls)."""
    try:  # (Arrays and tracers: their types' shapes, read directly)
        shape: Any = ()
        for a in args:
            s = a.aval.shape
            if s != shape and s != ():
                if shape != ():
                    return False
                shape = s
        return True
    except AttributeError:  # (NumPy arrays, Python scalars)
        shape = getattr(args[0], "shape", None)
        return shape is not None and all(getattr(a, "shape", None) == shape for a in args[1:])


# ``lax.shapes`` (which builds on this module) fills this slot with its ``broadcast_in_dim`` when it
# loads; ``ember.lax`` loads both before any operation runs.
_broadcast_in_dim: Callable[..., Any] = None  # type: ignore[assignment]


def _bind(p: Primitive, broadcasting: bool = False):
    def op(*args: Any) -> Any:
        if len(args) > 1 and not _nothing_to_broadcast(args):
            args = _scalars_like(args)
        return p.bind(*args)

    op.__name__ = p.name
    op.primitive = p  # type: ignore[attr-defined]  # (what it binds: ``jnp``'s eager calls may skip it)
    op.__doc__ = (f"Elementwise ``{p.name}`` (operands of one dtype; scalars broadcast"
                  f"{', and size-1 dimensions between operands of one rank, as in JAX' if broadcasting else ''}).")
    return op


neg, sign, floor, ceil, abs, bitwise_not, population_count, is_finite = map(
    _bind, (neg_p, sign_p, floor_p, ceil_p, abs_p, not_p, population_count_p, is_finite_p))
real, imag = map(_bind, (real_p, imag_p))
(exp, exp2, log, log1p, expm1, tanh, logistic, sin, cos, tan, asin, acos, atan, sinh, cosh, asinh,
 acosh, atanh, sqrt, rsqrt, cbrt, erf, erfc, erf_inv, lgamma, digamma) = map(
    _bind, (exp_p, exp2_p, log_p, log1p_p, expm1_p, tanh_p, logistic_p, sin_p, cos_p, tan_p, asin_p,
            acos_p, atan_p, sinh_p, cosh_p, asinh_p, acosh_p, atanh_p, sqrt_p, rsqrt_p, cbrt_p, erf_p,
            erfc_p, erf_inv_p, lgamma_p, digamma_p))
(add, sub, mul, div, rem, _pow_same_dtype, max, min, _atan2, nextafter, bitwise_and, bitwise_or, bitwise_xor,
 shift_left, shift_right_arithmetic, shift_right_logical, eq, ne, lt, le, gt, ge) = (
    _bind(p, broadcasting=True)
    for p in (add_p, sub_p, mul_p, div_p, rem_p, pow_p, max_p, min_p, atan2_p, nextafter_p, and_p, or_p,
              xor_p, shift_left_p, shift_right_arithmetic_p, shift_right_logical_p, eq_p, ne_p, lt_p, le_p,
              gt_p, ge_p))
bitwise_not.__name__ = "bitwise_not"
not_ = bitwise_not
and_ = bitwise_and
or_ = bitwise_or
xor = bitwise_xor


class RoundingMethod:
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def pow(x: Any, y: Any) -> Any:
    """``x ** y`` elementwise for an inexact ``x``; ``y`` is of ``x``'s dtype or an integer (as in JAX)."""
    if not is_python_scalar(y) and dtypes.is_integer(aval(y).dtype) and dtypes.is_inexact(aval(x).dtype):
        y = convert_element_type(y, aval(x).dtype, weak_type=aval(y).weak_type)
    return _pow_same_dtype(x, y)


def atan2(x: Any, y: Any) -> Any:
    """``atan(x / y)`` elementwise, in the quadrant of ``(y, x)``. Complex operands (as XLA's
    expansion, which JAX uses) give ``-i * log((y + i x) / sqrt(y**2 + x**2))``."""
    x, y = _broadcast_size_one("atan2", _scalars_like((x, y)))
    if is_python_scalar(x) or not dtypes.is_complex(aval(x).dtype):
        return _atan2(x, y)
    _elementwise_rule(aval(x), aval(y), name="atan2", kinds=INEXACT)  # one complex dtype and shape
    i = convert_element_type(1j, aval(x).dtype, weak_type=True)
    return mul(neg(i), log(div(add(y, mul(i, x)), sqrt(add(mul(y, y), mul(x, x))))))


atan2.__name__ = "atan2"


def conj(x: Any) -> Any:
    """The complex conjugate; a real operand becomes complex (as ``lax.conj``)."""
    return conj_p.bind(x, input_dtype=aval(x).dtype)


def complex(x: Any, y: Any) -> Any:  # noqa: A001  (lax's name)
    """``x + 1j * y`` from floating parts of one dtype."""
    return complex_p.bind(*_broadcast_size_one("complex", _scalars_like((x, y))))


def round(x: Any, rounding_method: int = RoundingMethod.AWAY_FROM_ZERO) -> Any:
    """Round to integral values; ``rounding_method`` 0 rounds halves away from zero, 1 to even."""
    return round_p.bind(x, rounding_method=int(rounding_method))


def integer_pow(x: Any, y: int) -> Any:
    """``x ** y`` for a static Python int ``y``."""
    return integer_pow_p.bind(x, y=int(y))


def square(x: Any) -> Any:
    return square_p.bind(x)


def reciprocal(x: Any) -> Any:
    return integer_pow(x, -1)


def select_n(which: Any, *cases: Any) -> Any:
    """``cases[which]`` elementwise (a bool ``which`` picks ``cases[1]`` where True)."""
    return select_n_p.bind(which, *_scalars_like(cases))


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """``on_true`` where ``pred`` else ``on_false`` (elementwise)."""
    return select_n(pred, on_false, on_true)


def clamp(min: Any, x: Any, max: Any) -> Any:
    """``min(max(x, min), max)`` elementwise; bounds may be scalars."""
    return clamp_p.bind(*_scalars_like((min, x, max)))
