"""Elementwise ``jnp`` functions: promote dtypes, broadcast, then call lax."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import dtypes, lax
from ember.core.array import Array
from ember.core.trace import Tracer
from ember.lax import elementwise as ew
from ember.lax.base import aval
from ember.lax.shapes import broadcast_in_dim_p
from ember.numpy.core import (
    broadcast_operands,
    broadcast_plan,
    broadcast_to,
    ensure_array,
    filled,
    full,
    promote_and_broadcast,
    promote_dtypes,
    promote_dtypes_inexact,
    promote_shapes,
    promoted_scalar,
)
from ember.numpy.indexing import nonzero
from ember.numpy.staging import staged
from ember.runtime import eager
from ember.transforms import stable

# Floating and complex types (a set: membership is asked on every eager call).
_INEXACT = frozenset(dtypes.INEXACT)


def _unary_inexact(op: Callable, name: str) -> Callable:
    p = getattr(op, "primitive", None)  # (``op`` binds just it: a signature seen before skips the bind)

    def f(x: Any, /) -> Any:
        if type(x) is not Array or x.aval.dtype not in _INEXACT:  # (an inexact Array: nothing to promote)
            (x,) = promote_dtypes_inexact(ensure_array(x))
        elif (out := eager.apply_seen_one(p, x)) is not None:
            return out
        return op(x)

    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (integers are promoted to the default float type)."
    return f


def _unary(op: Callable, name: str) -> Callable:
    p = getattr(op, "primitive", None)  # (as ``_unary_inexact``'s)

    def f(x: Any, /) -> Any:
        if type(x) is not Array:
            return op(ensure_array(x))
        out = eager.apply_seen_one(p, x)
        return op(x) if out is None else out

    f.__name__ = name
    f.__doc__ = f"Elementwise {name}."
    return f


# ``_binary``'s primitive for Arrays of a dtype, where ``op`` binds just it (else None).
_PrimitiveFor = Callable[[np.dtype], Any]


def _unpromoted(x1: Any, x2: Any, inexact: bool = False, primitive: _PrimitiveFor | None = None) -> Any:
    """The operands of an eager call as promotion and broadcasting would leave them, where that is
    known at once: Arrays of one strong type (nothing to do, or a broadcast: ``broadcast_plan``), or
    an Array and a Python scalar that promotion converts alone (``promoted_scalar``); None otherwise
    (the general path). (Two weak operands of one type need not keep it: weak bools combine to a strong bool.)
    Arrays that need a broadcast give the call's result instead (an Array, not a tuple) where the
    eager engine computes ``primitive(dtype)`` on them as they are (``eager.apply_broadcasting``),
    and so do Arrays of one shape whose signature it has run before (``eager.apply_seen``)."""
    if type(x1) is Array:
        if type(x2) is Array:
            a, b = x1.aval, x2.aval
            if a.dtype != b.dtype or a.weak_type or b.weak_type or (inexact and a.dtype not in _INEXACT):
                return None
            if a.shape == b.shape:
                return _seen_or_operands(primitive, a.dtype, x1, x2)
            plan = broadcast_plan(a.shape, b.shape)
            if plan is None:
                return None
            p1, p2 = plan
            p = primitive and primitive(a.dtype)
            if p is not None:
                out = eager.apply_broadcasting(p, (x1, x2), (p1 or p2)["shape"])
                if out is not None:
                    return out
            return (x1 if p1 is None else broadcast_in_dim_p.bind(x1, **p1),
                    x2 if p2 is None else broadcast_in_dim_p.bind(x2, **p2))
        s = promoted_scalar(x1, x2, False, inexact)  # (a 0-d ``s``: nothing to broadcast)
        return None if s is None else _seen_or_operands(primitive, x1.aval.dtype, x1, s)
    if type(x2) is Array:
        s = promoted_scalar(x2, x1, True, inexact)
        return None if s is None else _seen_or_operands(primitive, x2.aval.dtype, s, x2)
    return None


def _seen_or_operands(primitive: _PrimitiveFor | None, dtype: np.dtype, x1: Array, x2: Array) -> Any:
    """The result of ``primitive(dtype)`` on ``x1, x2`` where the eager engine has run that
    signature before (``eager.apply_seen``), else the operands as they are."""
    out = eager.apply_seen(primitive and primitive(dtype), x1, x2)
    return (x1, x2) if out is None else out


def _always(p: Any) -> _PrimitiveFor:
    return lambda dt: p


def _unless_bool(p: Any) -> _PrimitiveFor:  # (``+`` and ``*`` of bools are ``or`` and ``and``)
    return lambda dt: None if dt == dtypes.bool_ else p


def _unless_complex(p: Any) -> _PrimitiveFor:  # (complex order comparisons, ``_ordered``, and atan2 are composites)
    return lambda dt: None if dtypes.is_complex(dt) else p


def _binary(op: Callable, name: str, inexact: bool = False, primitive: _PrimitiveFor | None = None) -> Callable:
    def f(x1: Any, x2: Any, /) -> Any:
        fast = _unpromoted(x1, x2, inexact, primitive)
        if fast is not None:
            return op(*fast) if type(fast) is tuple else fast
        return op(*promote_shapes(*(promote_dtypes_inexact if inexact else promote_dtypes)(x1, x2), name=name))

    f.__name__ = name
    f.__doc__ = f"Elementwise {name} with NumPy broadcasting and JAX type promotion."
    return f


exp = _unary_inexact(lax.exp, "exp")
exp2 = _unary_inexact(lax.exp2, "exp2")


def expm1(x: Any, /) -> Any:
    """Elementwise ``exp(x) - 1`` (integers are promoted to the default float type). A complex value
    with a zero imaginary part gives ``expm1(re) + 0j`` as in JAX, also where the general formula's
    ``exp(re) * sin(im)`` is ``inf * 0`` (``expm1(inf + 0j)`` is ``inf + 0j``, not ``inf + nan j``)."""
    (x,) = promote_dtypes_inexact(ensure_array(x))
    out = lax.expm1(x)
    if not dtypes.is_complex(aval(x).dtype):
        return out
    re, im = lax.real(x), lax.imag(x)
    zero = full_like_value(re, 0)
    on_axis = lax.complex(lax.add(lax.expm1(re), zero), zero)  # (+ 0: -0 becomes +0, as JAX gives)
    return lax.select(lax.eq(im, zero), on_axis, out)


log = _unary_inexact(lax.log, "log")
log1p = _unary_inexact(lax.log1p, "log1p")
sin = _unary_inexact(lax.sin, "sin")
cos = _unary_inexact(lax.cos, "cos")
tan = _unary_inexact(lax.tan, "tan")
arcsin = _unary_inexact(lax.asin, "arcsin")
arccos = _unary_inexact(lax.acos, "arccos")
arctan = _unary_inexact(lax.atan, "arctan")
sinh = _unary_inexact(lax.sinh, "sinh")
cosh = _unary_inexact(lax.cosh, "cosh")
tanh = _unary_inexact(lax.tanh, "tanh")
arcsinh = _unary_inexact(lax.asinh, "arcsinh")
arccosh = _unary_inexact(lax.acosh, "arccosh")
arctanh = _unary_inexact(lax.atanh, "arctanh")
sqrt = _unary_inexact(lax.sqrt, "sqrt")
cbrt = _unary_inexact(lax.cbrt, "cbrt")
asin, acos, atan, asinh, acosh, atanh = arcsin, arccos, arctan, arcsinh, arccosh, arctanh

def _refuse_complex(x: Any, message: str, error: type = TypeError) -> None:
    """Raise JAX's error for functions that complex values have no meaning for."""
    if dtypes.is_complex(aval(x).dtype):
        raise error(message)


negative = _unary(lax.neg, "negative")
sign = _unary(lambda x: lax.sign(x) if x.dtype != dtypes.bool_ else x, "sign")
invert = _unary(lax.bitwise_not, "invert")
bitwise_not = bitwise_invert = invert


def positive(x: Any, /) -> Any:
    return ensure_array(x)


def absolute(x: Any, /) -> Any:
    x = ensure_array(x)
    return x if x.dtype == dtypes.bool_ or dtypes.is_unsigned(x.dtype) else lax.abs(x)


abs = absolute


def _float_or_identity(op: Callable, name: str, exact_to_float: bool = False) -> Callable:
    """floor/ceil/trunc keep integers and bools as they are, as JAX does; rint
    (``exact_to_float``) gives them in the default float type, strongly typed, as JAX's does.
    Complex values go to ``op``, which refuses them or, for rint, rounds each part."""
    def f(x: Any, /) -> Any:
        x = ensure_array(x)
        if not dtypes.is_inexact(x.dtype):
            return lax.convert_element_type(x, dtypes.default_float_dtype()) if exact_to_float else x
        return op(x)

    f.__name__ = name
    return f


floor = _float_or_identity(lax.floor, "floor")
ceil = _float_or_identity(lax.ceil, "ceil")
def _by_parts(op: Callable, x: Any) -> Any:
    """``op`` on each part of a complex ``x`` (on ``x`` itself if real)."""
    if dtypes.is_complex(aval(x).dtype):
        return lax.complex(op(lax.real(x)), op(lax.imag(x)))
    return op(x)


rint = _float_or_identity(lambda x: _by_parts(lambda v: lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN), x),
                          "rint", exact_to_float=True)
trunc = _float_or_identity(lambda x: lax.select(lax.lt(x, 0), lax.ceil(x), lax.floor(x)), "trunc")
fix = trunc


def round(a: Any, decimals: int = 0, out: Any = None) -> Any:
    """Round half to even, to ``decimals`` places (as NumPy); complex values round each part."""
    a = ensure_array(a)
    if dtypes.is_complex(a.dtype):
        return _by_parts(lambda part: round(part, decimals), a)
    if not dtypes.is_floating(a.dtype):
        if decimals >= 0:  # (bools too, as NumPy: JAX 0.10 raises finfo's "not inexact" ValueError)
            return a
        factor = 10 ** (-decimals)
        return multiply(floor_divide(add(a, factor // 2), factor), factor)
    if decimals == 0:
        return lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN)
    factor = np.asarray(10.0 ** decimals, dtype=np.float32 if a.dtype != dtypes.float64 else np.float64)
    scaled = lax.mul(a, lax.convert_element_type(factor, a.dtype))
    return lax.div(lax.round(scaled, lax.RoundingMethod.TO_NEAREST_EVEN), lax.convert_element_type(factor, a.dtype))


around = round

add = _binary(lambda x, y: lax.bitwise_or(x, y) if x.dtype == dtypes.bool_ else lax.add(x, y), "add",
              primitive=_unless_bool(ew.add_p))
subtract = _binary(lax.sub, "subtract", primitive=_always(ew.sub_p))
multiply = _binary(lambda x, y: lax.bitwise_and(x, y) if x.dtype == dtypes.bool_ else lax.mul(x, y), "multiply",
                   primitive=_unless_bool(ew.mul_p))
maximum = _binary(lax.max, "maximum", primitive=_always(ew.max_p))
minimum = _binary(lax.min, "minimum", primitive=_always(ew.min_p))
arctan2 = _binary(lax.atan2, "arctan2", inexact=True, primitive=_unless_complex(ew.atan2_p))
atan2 = arctan2
nextafter = _binary(lax.nextafter, "nextafter", inexact=True, primitive=_always(ew.nextafter_p))
bitwise_and = _binary(lax.bitwise_and, "bitwise_and", primitive=_always(ew.and_p))
bitwise_or = _binary(lax.bitwise_or, "bitwise_or", primitive=_always(ew.or_p))
bitwise_xor = _binary(lax.bitwise_xor, "bitwise_xor", primitive=_always(ew.xor_p))
equal = _binary(lax.eq, "equal", primitive=_always(ew.eq_p))
not_equal = _binary(lax.ne, "not_equal", primitive=_always(ew.ne_p))


def _ordered(op: Callable) -> Callable:
    """An order comparison; complex values compare lexicographically, by the real parts and, where
    those are equal, by the imaginary parts (as JAX)."""
    def compare(x: Any, y: Any) -> Any:
        if dtypes.is_complex(aval(x).dtype):
            return lax.select(lax.eq(lax.real(x), lax.real(y)), op(lax.imag(x), lax.imag(y)),
                              op(lax.real(x), lax.real(y)))
        return op(x, y)

    return compare


less = _binary(_ordered(lax.lt), "less", primitive=_unless_complex(ew.lt_p))
less_equal = _binary(_ordered(lax.le), "less_equal", primitive=_unless_complex(ew.le_p))
greater = _binary(_ordered(lax.gt), "greater", primitive=_unless_complex(ew.gt_p))
greater_equal = _binary(_ordered(lax.ge), "greater_equal",
                       primitive=_unless_complex(ew.ge_p))


def _to_bool(x: Any) -> Any:
    """``x != 0`` (weak as ``x`` is: the zero is a weak literal, as JAX's), or a bool ``x``."""
    return x if aval(x).dtype == dtypes.bool_ else lax.ne(x, 0)


def _typed(x: Any, value: Any) -> Any:
    """``value`` as a strongly typed scalar of ``x``'s dtype (a comparison with it is not weak)."""
    return lax.convert_element_type(value, aval(x).dtype)


def _logical(op: Callable, name: str) -> Callable:
    def f(x1: Any, x2: Any, /) -> Any:
        # (promoted first, as JAX: the lattice has no weak bool, so two bools give a strong one)
        return op(*promote_shapes(*map(_to_bool, promote_dtypes(x1, x2)), name=name))

    f.__name__ = name
    return f


logical_and = _logical(lax.bitwise_and, "logical_and")
logical_or = _logical(lax.bitwise_or, "logical_or")
logical_xor = _logical(lax.bitwise_xor, "logical_xor")


def logical_not(x: Any, /) -> Any:
    return lax.bitwise_not(_to_bool(ensure_array(x)))


def _shift_operands(x1: Any, x2: Any, name: str) -> list[Any]:
    """Promoted and broadcast; booleans shift as int32, as in JAX."""
    x1, x2 = promote_and_broadcast(x1, x2, name=name)
    if x1.dtype == dtypes.bool_:
        x1, x2 = (lax.convert_element_type(v, dtypes.int32) for v in (x1, x2))
    return [x1, x2]


def left_shift(x1: Any, x2: Any, /) -> Any:
    return lax.shift_left(*_shift_operands(x1, x2, "left_shift"))


def right_shift(x1: Any, x2: Any, /) -> Any:
    x1, x2 = _shift_operands(x1, x2, "right_shift")
    op = lax.shift_right_arithmetic if dtypes.is_signed(x1.dtype) else lax.shift_right_logical
    return op(x1, x2)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


_DIV = _always(ew.div_p)


def true_divide(x1: Any, x2: Any, /) -> Any:
    fast = _unpromoted(x1, x2, True, _DIV)
    if fast is not None:
        return lax.div(*fast) if type(fast) is tuple else fast
    return lax.div(*promote_shapes(*promote_dtypes_inexact(x1, x2), name="true_divide"))


divide = true_divide


def _promote_numeric(x1: Any, x2: Any, name: str) -> list[Any]:
    """Promoted and broadcast, booleans then as int32 (JAX's ``promote_args_numeric``, int32 also
    with x64): ``//`` and ``%`` of booleans are integer operations."""
    x1, x2 = promote_and_broadcast(x1, x2, name=name)
    if x1.dtype == dtypes.bool_:
        x1, x2 = (lax.convert_element_type(v, dtypes.int32, aval(v).weak_type) for v in (x1, x2))
    return [x1, x2]


def _zero_divisor_as_one(x2: Any) -> Any:
    """An integer divisor with 0 replaced by 1, as JAX's ``remainder`` and ``fmod`` replace it (so
    ``x % 0 == 0``, where ``lax.rem(x, 0)`` is ``x``)."""
    return lax.add(x2, lax.convert_element_type(lax.eq(x2, 0), aval(x2).dtype, aval(x2).weak_type))


def floor_divide(x1: Any, x2: Any, /) -> Any:
    """Python's ``//``: rounds toward negative infinity. Integer ``x // 0`` is JAX's: ``lax.div``
    gives -1 (all bits set: the maximum if unsigned), then the signed correction makes it -2
    unless ``x == 0``."""
    x1, x2 = _promote_numeric(x1, x2, "floor_divide")
    _refuse_complex(x1, "floor_divide does not support complex-valued inputs")
    if dtypes.is_floating(x1.dtype):
        mod = lax.rem(x1, x2)
        div = lax.div(lax.sub(x1, mod), x2)
        # NumPy's floor_divide: correct div by one where the remainder's sign differs from the divisor's.
        fix = lax.bitwise_and(lax.ne(mod, 0), lax.ne(lax.lt(mod, 0), lax.lt(x2, 0)))
        div = lax.select(fix, lax.sub(div, 1), div)
        floored = lax.floor(div)
        div = lax.select(lax.gt(lax.sub(div, floored), 0.5), lax.add(floored, 1), floored)
        # (x / 0 is NumPy's +-inf or NaN; the derivative stays 0 there, as everywhere, as in JAX)
        return lax.select(lax.eq(x2, 0), lax.stop_gradient(lax.div(x1, x2)), div)
    if dtypes.is_unsigned(x1.dtype):
        return lax.div(x1, x2)
    quotient = lax.div(x1, x2)
    # JAX's correction: one less where the signs differ and the division is inexact.
    needs_fix = lax.bitwise_and(lax.ne(lax.sign(x1), lax.sign(x2)), lax.ne(lax.rem(x1, x2), 0))
    return where(needs_fix, lax.sub(quotient, 1), quotient)  # (jnp.where: staged as in JAX)


def remainder(x1: Any, x2: Any, /) -> Any:
    """Python's ``%``: the result has the sign of the divisor; integer ``x % 0`` is 0, as in JAX."""
    x1, x2 = _promote_numeric(x1, x2, "remainder")
    if not dtypes.is_floating(x1.dtype):
        x2 = _zero_divisor_as_one(x2)
    r = lax.rem(x1, x2)
    if dtypes.is_unsigned(x1.dtype):
        return r
    nonzero = lax.ne(r, 0)
    needs_fix = lax.bitwise_and(lax.ne(lax.lt(r, 0), lax.lt(x2, 0)), nonzero)  # (JAX's order of equations)
    return lax.select(needs_fix, lax.add(r, x2), r)


mod = remainder


def fmod(x1: Any, x2: Any, /) -> Any:
    """C's remainder (the sign of the dividend). Integer ``fmod(x, 0)`` is 0, as in JAX; booleans
    are not replaced (JAX checks the dtype before promoting them), so ``fmod(True, False)`` is
    ``lax.rem(1, 0) == 1``."""
    x1, x2 = promote_and_broadcast(x1, x2, name="fmod")
    if dtypes.is_integer(x1.dtype):
        x2 = _zero_divisor_as_one(x2)
    return lax.rem(*_promote_numeric(x1, x2, "fmod"))


def divmod(x1: Any, x2: Any, /) -> tuple[Any, Any]:
    return floor_divide(x1, x2), remainder(x1, x2)


def power(x1: Any, x2: Any, /) -> Any:
    """``x1 ** x2`` with JAX's cases, which set both the value and the result type:

    * a concrete integer exponent (a Python int or bool, a NumPy integer, or a concrete 0-d
      integer array) is ``integer_pow`` of ``x1`` alone: the exponent's type plays no part, booleans
      count as int32, and a negative one for an integer base is JAX's TypeError;
    * integer (and boolean) operands promote, booleans to int32, then square-and-multiply over the
      exponent's low six bits, as JAX computes it: exact wherever the result fits, and JAX's
      wrapped values for negative exponents (``int8(7) ** int8(-3)`` is 103, not 0);
    * a floating or complex base with an integer exponent keeps the base's type (``lax.pow``);
    * anything else promotes and calls ``lax.pow``.
    """
    exponent = _concrete_integer(x2)
    if exponent is not None:
        return lax.integer_pow(_numeric(ensure_array(x1)), exponent)
    x1, x2 = ensure_array(x1), ensure_array(x2)
    p1, p2 = broadcast_operands(*map(_numeric, promote_dtypes(x1, x2)), name="power")
    if not dtypes.is_inexact(aval(p1).dtype):
        return _integer_power(p1, p2)
    if dtypes.is_inexact(x1.dtype) and dtypes.is_integer(x2.dtype):
        return lax.pow(*broadcast_operands(x1, x2, name="power"))  # (no promotion: differentiable in x1 at 0, as JAX)
    return lax.pow(p1, p2)


def _concrete_integer(x: Any) -> int | None:
    """The value of an exponent JAX treats as a static integer (``operator.index`` works on it and
    it is not being traced), else None."""
    if type(x) in (bool, int) or isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (np.ndarray, Array)) and not isinstance(x, Tracer) and x.ndim == 0 and dtypes.is_integer(x.dtype):
        return int(x)
    return None  # (NumPy booleans and boolean arrays are not integers to operator.index)


def _numeric(x: Any) -> Any:
    """Booleans as the default integer type (``jnp``'s numeric promotion); others unchanged."""
    return lax.convert_element_type(x, dtypes.default_int_dtype()) if aval(x).dtype == dtypes.bool_ else x


def _integer_power(x: Any, y: Any) -> Any:
    """Integer ``x ** y`` for a traced ``y``, as JAX computes it: square-and-multiply over the low
    six bits of ``y`` (more would overflow for any base above 1), starting from 0 where ``x`` is 0
    and ``y`` is not. The result is strongly typed."""
    dtype = aval(x).dtype
    zero, one = lax.convert_element_type(0, dtype), lax.convert_element_type(1, dtype)
    acc = lax.select(lax.bitwise_and(lax.eq(x, zero), lax.ne(y, zero)), zero, one)
    for _ in range(6):
        acc = lax.select(lax.ne(lax.bitwise_and(y, one), zero), lax.mul(acc, x), acc)
        x = lax.mul(x, x)
        y = lax.shift_right_logical(y, one)
    return acc


pow = power


def float_power(x1: Any, x2: Any, /) -> Any:
    """``x1 ** x2`` in the promoted inexact type (JAX's rule; NumPy always uses float64)."""
    return lax.pow(*broadcast_operands(*promote_dtypes_inexact(x1, x2), name="float_power"))


def square(x: Any, /) -> Any:
    return lax.square(_numeric(ensure_array(x)))


def reciprocal(x: Any, /) -> Any:
    (x,) = promote_dtypes_inexact(ensure_array(x))
    return lax.integer_pow(x, -1)


def _log_base(x: Any, base: float) -> Any:
    """``log(x) / log(base)``; a complex logarithm is divided part by part (by a real number, so
    that ``log2(0j)`` is ``-inf + 0j``, as JAX)."""
    (x,) = promote_dtypes_inexact(ensure_array(x))
    if dtypes.is_complex(aval(x).dtype):
        r = lax.log(x)
        ln_base = lax.log(lax.convert_element_type(base, dtypes.real_dtype(aval(x).dtype)))
        return lax.complex(lax.div(lax.real(r), ln_base), lax.div(lax.imag(r), ln_base))
    return lax.div(lax.log(x), lax.log(lax.convert_element_type(base, x.dtype)))


def log2(x: Any, /) -> Any:
    return _log_base(x, 2.0)


def log10(x: Any, /) -> Any:
    return _log_base(x, 10.0)


def logaddexp(x1: Any, x2: Any, /) -> Any:
    """``log(exp(x1) + exp(x2))`` without overflow. For complex values (JAX's formula): the larger
    (lexicographic) operand is factored out, and the imaginary part wrapped into ``[-pi, pi)``."""
    x1, x2 = broadcast_operands(*promote_dtypes_inexact(x1, x2), name="logaddexp")
    if dtypes.is_complex(aval(x1).dtype):
        larger = lax.max(x1, x2)
        out = lax.add(larger, lax.log1p(lax.exp(lax.sub(lax.add(x1, x2), lax.mul(larger, 2)))))
        return lax.complex(lax.real(out), _wrap(lax.imag(out), np.pi))
    return stable.logaddexp(x1, x2)  # the formula, with a derivative that is 1/2 each at x1 == x2


def _wrap(x: Any, half_period: float) -> Any:
    """``x`` moved by whole periods into ``[-half_period, half_period)``."""
    period = 2 * half_period
    r = lax.rem(lax.add(x, half_period), lax.convert_element_type(period, aval(x).dtype))
    return lax.sub(lax.select(lax.lt(r, 0), lax.add(r, period), r), half_period)


def logaddexp2(x1: Any, x2: Any, /) -> Any:
    x1, x2 = broadcast_operands(*promote_dtypes_inexact(x1, x2), name="logaddexp2")
    ln2 = float(np.log(2.0))  # a Python float: weakly typed, so float16 stays float16
    return lax.div(logaddexp(lax.mul(x1, ln2), lax.mul(x2, ln2)), ln2)


def _either_part(test: Callable, x: Any) -> Any:
    """``test`` of the real or the imaginary part of complex ``x``."""
    return lax.bitwise_or(test(lax.real(x)), test(lax.imag(x)))


def isfinite(x: Any, /) -> Any:
    """Finite values; a complex value is finite when both its parts are."""
    x = ensure_array(x)
    if dtypes.is_complex(x.dtype):
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    if not dtypes.is_floating(x.dtype):
        return full_bool(x, True)
    return lax.is_finite(x)


def full_bool(x: Any, value: bool) -> Any:
    return full(aval(x).shape, value, dtype=dtypes.bool_)


def isinf(x: Any, /) -> Any:
    """Infinities; a complex value is infinite when either part is."""
    x = ensure_array(x)
    if dtypes.is_complex(x.dtype):
        return _either_part(isinf, x)
    if not dtypes.is_floating(x.dtype):
        return full_bool(x, False)
    return lax.eq(lax.abs(x), _typed(x, np.inf))


def isposinf(x: Any, /) -> Any:
    x = ensure_array(x)
    _refuse_complex(x, "isposinf/isneginf are not well defined for complex types", ValueError)
    return lax.eq(x, _typed(x, np.inf)) if dtypes.is_floating(x.dtype) else full_bool(x, False)


def isneginf(x: Any, /) -> Any:
    x = ensure_array(x)
    _refuse_complex(x, "isposinf/isneginf are not well defined for complex types", ValueError)
    return lax.eq(x, _typed(x, -np.inf)) if dtypes.is_floating(x.dtype) else full_bool(x, False)


def isnan(x: Any, /) -> Any:
    """NaNs; a complex value is NaN when either part is."""
    x = ensure_array(x)
    return lax.ne(x, x)  # (a NaN in either part makes a complex value unequal to itself; weak as x, as JAX)


def signbit(x: Any, /) -> Any:
    x = ensure_array(x)
    _refuse_complex(x, f"jax.numpy.signbit is not well defined for {x.dtype}", ValueError)
    if dtypes.is_unsigned(x.dtype) or x.dtype == dtypes.bool_:
        return full_bool(x, False)
    if dtypes.is_integer(x.dtype):
        return lax.lt(x, _typed(x, 0))
    bits = x.dtype.itemsize * 8
    as_int = lax.bitcast_convert_type(x, np.dtype(f"int{bits}"))
    return lax.lt(as_int, 0)


def copysign(x1: Any, x2: Any, /) -> Any:
    """``|x1|`` with the sign of ``x2``: a ``where`` over the operands, as JAX's (so shapes that do not
    broadcast are its ValueError, naming the three shapes)."""
    x1, x2 = promote_dtypes_inexact(x1, x2)
    _refuse_complex(x1, "copysign does not support complex-valued inputs")
    broadcast_operands(x1, x2, name="copysign")  # (only to check the ranks, as JAX's does)
    return _where(signbit(x2), lax.neg(lax.abs(x1)), lax.abs(x1))


def deg2rad(x: Any, /) -> Any:
    (x,) = promote_dtypes_inexact(ensure_array(x))
    return lax.mul(x, np.pi / 180)


def rad2deg(x: Any, /) -> Any:
    (x,) = promote_dtypes_inexact(ensure_array(x))
    return lax.mul(x, 180 / np.pi)


radians, degrees = deg2rad, rad2deg


def hypot(x1: Any, x2: Any, /) -> Any:
    x1, x2 = broadcast_operands(*promote_dtypes_inexact(x1, x2), name="hypot")
    _refuse_complex(x1, "jnp.hypot is not well defined for complex-valued inputs. Please convert to real "
                        "values first, such as by using abs(x)", ValueError)
    a, b = lax.abs(x1), lax.abs(x2)
    hi, lo = lax.max(a, b), lax.min(a, b)
    safe_hi = lax.select(lax.eq(hi, 0), lax.add(hi, 1), hi)
    r = lax.div(lo, safe_hi)
    out = lax.mul(hi, lax.sqrt(lax.add(1, lax.mul(r, r))))
    # IEEE: an infinite operand gives inf even when the other is NaN (then ``hi`` is NaN: test each).
    inf = float("inf")
    return lax.select(lax.eq(a, inf), a, lax.select(lax.eq(b, inf), b, out))


def sinc(x: Any, /) -> Any:
    """sin(pi x) / (pi x), and 1 at 0 (as JAX). A complex argument below sqrt(eps) in modulus is
    1 - (pi x)^2 / 6 instead, the series' exact rounding there: complex division by a subnormal
    overflows in the reciprocal of its modulus (inf + nan j), which JAX's flush-to-zero hides."""
    (x,) = promote_dtypes_inexact(ensure_array(x))
    pix = lax.mul(x, np.pi)
    one = lax.add(lax.mul(x, 0), 1)
    dtype = aval(x).dtype
    if dtypes.is_complex(dtype):
        small = lax.lt(lax.abs(pix), float(np.sqrt(np.finfo(dtype).eps)))
        near_zero = lax.sub(one, lax.div(lax.mul(pix, pix), 6.0))
    else:
        small, near_zero = lax.eq(x, 0), one
    safe = lax.select(small, one, pix)
    return lax.select(small, near_zero, lax.div(lax.sin(safe), safe))


def heaviside(x1: Any, x2: Any, /) -> Any:
    """0 where ``x1 < 0``, 1 where ``x1 > 0``, ``x2`` where ``x1 == 0`` and NaN where ``x1`` is NaN
    (as NumPy and JAX), built of nested ``where`` as JAX's, so that its errors are JAX's too."""
    x1, x2 = promote_dtypes_inexact(x1, x2)
    return _where(lax.lt(x1, 0), 0, _where(lax.gt(x1, 0), 1, _where(lax.ne(x1, x1), x1, x2)))


def conjugate(x: Any, /) -> Any:
    """The complex conjugate; real values are returned as they are (as NumPy and JAX)."""
    x = ensure_array(x)
    return lax.conj(x) if dtypes.is_complex(aval(x).dtype) else x


conj = conjugate


def real(x: Any, /) -> Any:
    x = ensure_array(x)
    return lax.real(x) if dtypes.is_complex(aval(x).dtype) else x


def imag(x: Any, /) -> Any:
    """The imaginary part; zeros of the value's type for real values."""
    x = ensure_array(x)
    if dtypes.is_complex(aval(x).dtype):
        return lax.imag(x)
    zeros = full(aval(x).shape, 0, aval(x).dtype)
    return lax.convert_element_type(zeros, aval(x).dtype, weak_type=aval(x).weak_type)  # (weak stays weak, as JAX)


def angle(z: Any, deg: bool = False) -> Any:
    """The argument of complex values (radians, or degrees with ``deg``), as ``atan2(imag, real)``."""
    z = ensure_array(z)
    if dtypes.is_complex(aval(z).dtype):
        re, im = lax.real(z), lax.imag(z)
    else:
        (re,) = promote_dtypes_inexact(z)
        im = full(aval(re).shape, 0, aval(re).dtype)
    out = lax.atan2(im, re)
    return lax.mul(out, 180 / np.pi) if deg else out


def iscomplex(x: Any) -> Any:
    """Elementwise: a non-zero imaginary part."""
    return lax.ne(imag(x), 0)


def isreal(x: Any) -> Any:
    """Elementwise: a zero imaginary part (every element of a real array)."""
    return lax.eq(imag(x), 0)


def fabs(x: Any, /) -> Any:
    (x,) = promote_dtypes_inexact(ensure_array(x))
    _refuse_complex(x, "ufunc 'fabs' does not support complex dtypes")
    return lax.abs(x)


def where(condition: Any, x: Any = None, y: Any = None, /) -> Any:
    """``x`` where ``condition`` else ``y`` (the 3-argument form; the 1-argument form needs a
    concrete condition, as its shape depends on the values)."""
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise ValueError("jnp.where takes either 1 or 3 arguments")
    return _where(condition, x, y)


# (Not replayed eagerly: a signature called a few times would pay the replay's trace and its steps,
# the 0-d value's broadcast each call, which the fast path below keeps: 300 shapes, 2 calls of
# two wheres each, took 224 us a shape replayed against 63 direct, 20 calls 587 against 280;
# optax's suite, many shapes, is such code. Only the steady state is faster replayed: 4.6 us
# against 8.8 on (10,).)
@staged("_where", replay=False)
def _where(condition: Any, x: Any, y: Any) -> Any:
    if type(condition) is Array and condition.aval.dtype == dtypes.bool_:
        fast = _unpromoted(x, y)
        if fast is not None:  # (a bool condition, values of one type: at most a 0-d value to broadcast)
            x, y = fast
            shape, x_shape, y_shape = condition.aval.shape, x.aval.shape, y.aval.shape
            if x_shape == y_shape and shape in (x_shape, ()):
                return lax.select(condition, x, y)
            if shape and x_shape in (shape, ()) and y_shape in (shape, ()):
                out = eager.apply_broadcasting(ew.select_n_p, (condition, y, x), shape)
                if out is not None:  # (an eager call: the 0-d values broadcast by the rule)
                    return out
                return lax.select(condition, x if x_shape else filled(x, shape), y if y_shape else filled(y, shape))
    condition = ensure_array(condition)
    if condition.dtype != dtypes.bool_:
        condition = lax.ne(condition, 0)
    x, y = promote_dtypes(x, y)
    condition, x, y = broadcast_operands(condition, x, y)
    # (as JAX's body: the values broadcast to the result's shape, a 0-d condition left as it is)
    shape = max((aval(v).shape for v in (condition, x, y)), key=len)
    x, y = (v if aval(v).shape == shape else broadcast_to(v, shape) for v in (x, y))
    return lax.select(condition, x, y)


def clip(arr: Any = None, /, min: Any = None, max: Any = None) -> Any:
    """Limit values to ``[min, max]`` (either may be None; where ``min > max`` the result is
    ``max``). JAX's signature: ``a_min`` / ``a_max`` are gone, ``min`` / ``max`` may be positional."""
    lo, hi = min, max
    a = ensure_array(arr)
    if any(v is not None and dtypes.is_complex(aval(ensure_array(v)).dtype) for v in (a, lo, hi)):
        raise ValueError("Clip received a complex value either through the input or the min/max keywords. "
                         "Complex values have no ordering and cannot be clipped. Please convert to a real value "
                         "or array by taking the real or imaginary components via jax.numpy.real/imag "
                         "respectively.")
    if lo is not None:
        a = maximum(lo, a)  # (JAX's operand order: the jaxpr prints as JAX's)
    if hi is not None:
        a = minimum(hi, a)
    return a


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Any:
    x = ensure_array(x)
    if dtypes.is_complex(x.dtype):  # each part on its own, as NumPy and JAX
        return _by_parts(lambda part: nan_to_num(part, copy, nan, posinf, neginf), x)
    if not dtypes.is_floating(x.dtype):
        return x
    info = dtypes.finfo(x.dtype)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    x = lax.select(lax.ne(x, x), full_like_value(x, nan), x)
    x = lax.select(lax.eq(x, float("inf")), full_like_value(x, posinf), x)
    return lax.select(lax.eq(x, float("-inf")), full_like_value(x, neginf), x)


def full_like_value(x: Any, value: float) -> Any:
    return full(aval(x).shape, value, dtype=aval(x).dtype)
