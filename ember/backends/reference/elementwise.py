"""Reference rules for elementwise primitives (NumPy, with XLA's edge-case semantics)."""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import ml_dtypes
import numpy as np

from ember import dtypes
from ember.backends.reference import eval_closed, impl_rules
from ember.core.avals import ShapedArray
from ember.core.evaluation import plain_rule
from ember.core.staging import DebugInfo, trace_to_jaxpr
from ember.lax import elementwise as ew, special
from ember.lax.stop_gradient import stop_gradient_p

_HALF = (dtypes.float16, dtypes.bfloat16)
_LOW = _HALF + dtypes.FLOAT8  # (computed in float32)


def round_float8(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """A float32 result rounded to the float8 type ``dt`` as XLA's CPU backend rounds it: it
    computes float8 operations in float16 (in float32, rounded to float16), except those of
    float8_e8m0fnu, whose range float16 lacks, in float32. So a result is rounded twice."""
    return (x if dt == dtypes.float8_e8m0fnu else x.astype(np.float16)).astype(dt)


def _float_math(fn: Callable, plain: Callable | None = None) -> Callable:
    """Compute half-precision and float8 math in float32 and round once (float8: as XLA, see
    ``round_float8``). Other types run ``fn`` itself: ``plain(avals, params)`` (``core.evaluation.runner``)
    gives it with the params bound, or ``plain``'s own function of the values (a NumPy call that
    computes what ``fn`` does, for eager calls of small arrays)."""
    def impl(*xs: np.ndarray, **params: Any) -> np.ndarray:
        dt = xs[0].dtype
        with np.errstate(all="ignore"):
            if dt in _LOW:
                out = fn(*(x.astype(np.float32) for x in xs), **params)
                return round_float8(out, dt) if dt in dtypes.FLOAT8 else out.astype(dt)
            return fn(*xs, **params)

    def plain_of(avals: Any, params: dict) -> Callable | None:
        if avals[0].dtype in _LOW:
            return None
        if plain is not None:
            return plain(avals, params)
        return functools.partial(fn, **params) if params else fn
    impl.plain = plain_of  # type: ignore[attr-defined]
    return impl


# float32 tanh as XLA's CPU backend computes it (so as ``jax.jit`` does): Eigen's rational
# approximation x * P(x**2) / Q(x**2) on x clamped to +-XLA_TANH_CLAMP (where it reaches 1), x itself
# below XLA_TANH_LINEAR, Horner's rule in FMAs. It gives JAX's bits (checked on 2 * 10**6 points of
# [-10, 10] and the special values: tests/test_vecmath.py), at most 5 ulp from tanh; the CPU
# backend's version (``vecmath``) is about twice as fast as the exp-based one that float64 keeps.
XLA_TANH_CLAMP = 7.99881172180175781
XLA_TANH_LINEAR = 0.0004
XLA_TANH_P = (4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05, 5.12229709037114e-08,
              -8.60467152213735e-11, 2.00018790482477e-13, -2.76076847742355e-16)  # c0 + c1 z + ...
XLA_TANH_Q = (4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04, 1.19825839466702e-06)


def _tanh(x: np.ndarray) -> np.ndarray:
    """tanh; float32 (and the half types, computed in it) as XLA computes it, the rational
    approximation of ``vecmath.XLA_TANH_P`` / ``XLA_TANH_Q`` (its FMAs as float64 arithmetic
    rounded once to float32, which gave the same bits as XLA on 2 * 10**6 points)."""
    if x.dtype != np.float32:
        return np.tanh(x)

    def fma(a: np.ndarray, b: np.ndarray, c: float) -> np.ndarray:
        return (a.astype(np.float64) * b + np.float64(np.float32(c))).astype(np.float32)

    def poly(z: np.ndarray, coefficients: tuple) -> np.ndarray:
        result = np.full_like(z, np.float32(coefficients[-1]))
        for c in reversed(coefficients[:-1]):
            result = fma(result, z, c)
        return result

    clamp = np.float32(XLA_TANH_CLAMP)
    clamped = np.where(np.isnan(x), x, np.clip(x, -clamp, clamp))
    z = clamped * clamped
    ratio = (clamped * poly(z, XLA_TANH_P)) / poly(z, XLA_TANH_Q)
    return np.where(np.abs(x) < np.float32(XLA_TANH_LINEAR), x, ratio).astype(np.float32)


def _ufunc_unary(fn: Callable) -> Callable:
    def impl(x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(x)
    impl.plain = lambda avals, params: fn  # type: ignore[attr-defined]
    return impl


def _vectorized(scalar_fn: Callable) -> Callable:
    """A float64 scalar function (from ``math``) applied elementwise, for functions NumPy lacks."""
    vec = np.frompyfunc(scalar_fn, 1, 1)

    def fn(x: np.ndarray) -> np.ndarray:
        return np.asarray(vec(x.astype(np.float64)), dtype=np.float64).astype(x.dtype)
    return fn


def _safe(fn: Callable) -> Callable:
    def wrapped(x: float) -> float:
        try:
            return fn(x)
        except (ValueError, OverflowError):
            return math.inf if x == 0 or (x < 0 and float(x).is_integer()) else math.nan
    return wrapped


def _erf_inv(x: np.ndarray) -> np.ndarray:
    """Inverse error function: Giles' single-precision approximation, then Newton steps on erf."""
    x64 = x.astype(np.float64)
    w = -np.log1p(-x64 * x64)
    small = w < 5.0
    ws = w - 2.5
    wl = np.sqrt(np.maximum(w, 5.0)) - 3.0
    ps = [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
          -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
    pl = [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
          -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]
    p_s, p_l = np.zeros_like(x64), np.zeros_like(x64)
    for c in ps:
        p_s = p_s * ws + c
    for c in pl:
        p_l = p_l * wl + c
    y = np.where(small, p_s, p_l) * x64
    erf = np.frompyfunc(math.erf, 1, 1)
    for _ in range(2):  # Newton on erf(y) - x: y -= (erf(y) - x) / (2/sqrt(pi) exp(-y^2))
        finite = np.isfinite(y)
        err = np.asarray(erf(np.where(finite, y, 0.0)), dtype=np.float64) - x64  # a float for 0-d input
        y = np.where(finite, y - err / (2.0 / math.sqrt(math.pi) * np.exp(-y * y)), y)
    y = np.where(x64 == 1, np.inf, np.where(x64 == -1, -np.inf, y))
    y = np.where(np.abs(x64) > 1, np.nan, y)
    return y.astype(x.dtype)


def _digamma_scalar(x: float) -> float:
    if math.isnan(x) or x == -math.inf:
        return math.nan
    if x == math.inf:
        return math.inf
    if x <= 0 and float(x).is_integer():
        return math.nan
    result = 0.0
    if x < 0.5:  # reflection: psi(1-x) - psi(x) = pi cot(pi x)
        return _digamma_scalar(1.0 - x) - math.pi / math.tan(math.pi * x)
    while x < 6.0:
        result -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    series = f * (1/12 - f * (1/120 - f * (1/252 - f * (1/240 - f * (1/132)))))
    return result + math.log(x) - 0.5 / x - series


def _round_away(x: np.ndarray) -> np.ndarray:
    # trunc(x + copysign(0.5, x)) is wrong for 0.49999997 (the sum rounds up); fix by comparing.
    t = np.trunc(x)
    frac = np.abs(x - t)
    return np.where(frac >= 0.5, t + np.sign(x), t)


def _int_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C-style division (round toward zero); x / 0 gives -1 (all bits set) and MIN / -1 gives MIN,
    as XLA on CPU. (NumPy's floor division, corrected: no detour through abs, which overflows.)"""
    if dtypes.is_inexact(x.dtype):
        with np.errstate(all="ignore"):
            return _float_math(np.true_divide)(x, y)
    safe_y = np.where(y == 0, 1, y).astype(x.dtype)
    with np.errstate(all="ignore"):
        q = np.floor_divide(x, safe_y)
        if dtypes.is_signed(x.dtype):  # one more where the division is inexact and the signs differ
            q = np.where((np.mod(x, safe_y) != 0) & ((x < 0) != (safe_y < 0)), q + 1, q).astype(x.dtype)
    return np.where(y == 0, np.invert(np.zeros((), x.dtype)), q)


# (eager calls: a float division is NumPy's; ``core.evaluation.runner``)
_int_div.plain = lambda avals, params: (  # type: ignore[attr-defined]
    np.true_divide if avals[0].dtype in dtypes.INEXACT and avals[0].dtype not in _LOW else None)


def _int_rem(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C-style remainder (sign of the dividend); x % 0 gives x."""
    if dtypes.is_floating(x.dtype):
        return _float_math(np.fmod)(x, y)
    safe_y = np.where(y == 0, 1, y)
    with np.errstate(all="ignore"):
        r = np.fmod(x, safe_y)
    return np.where(y == 0, x, r)


def _shift(kind: str) -> Callable:
    @plain_rule
    def impl(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        bits = x.dtype.itemsize * 8
        y_in = np.asarray(y)
        if y_in.ndim == 0 and np.ndim(x) and 0 <= int(y_in) < bits:  # (one amount in range: NumPy's shift)
            is_signed = dtypes.is_signed(x.dtype)
            if kind == "left" or is_signed == (kind == "arith"):
                return np.left_shift(x, y_in) if kind == "left" else np.right_shift(x, y_in)
            other = np.dtype(f"{'u' if is_signed else ''}int{bits}")  # (logical on signed, arithmetic on unsigned)
            return np.right_shift(np.asarray(x).view(other), y_in.view(other)).view(x.dtype)
        out_of_range = (y_in < 0) | (y_in >= bits) if dtypes.is_signed(x.dtype) else (y_in >= bits)
        ys = np.where(out_of_range, 0, y_in).astype(x.dtype)
        if kind == "left":
            r = np.left_shift(x, ys)
            fill = np.zeros_like(r)
        elif kind == "arith":  # on the bits as signed, as XLA does, also for unsigned types
            signed = np.asarray(x).view(f"int{bits}")
            r = np.right_shift(signed, ys.astype(signed.dtype)).view(x.dtype)
            fill = np.right_shift(signed, bits - 1).view(x.dtype)
        else:
            unsigned = np.dtype(f"uint{bits}")
            r = np.right_shift(x.astype(unsigned), ys.astype(unsigned)).astype(x.dtype)
            fill = np.zeros_like(x)
        return np.where(out_of_range, fill, r)
    return impl


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Complex values: NumPy's power, with JAX's (XLA's) special cases, as the native rule
    (``complex_math.Cx.pow``): x ** 0 is 1 (even for a NaN x), 1 ** y is 1 (even for an infinite
    or NaN y); 0 ** y is 0 for a real y > 0, else NaN + NaN i (NumPy: 0 for any y with a positive
    real part)."""
    out = np.power(x, y)
    if not dtypes.is_complex(out.dtype):
        return out
    x, y = np.broadcast_to(x, out.shape), np.broadcast_to(y, out.shape)
    real_y = np.imag(y) == 0
    zero_to = np.where(real_y & (np.real(y) > 0), 0, complex(np.nan, np.nan)).astype(out.dtype)
    out = np.where(x == 0, zero_to, out)
    return np.where((real_y & (np.real(y) == 0)) | (x == 1), np.ones((), out.dtype), out)


def _integer_pow(x: np.ndarray, *, y: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        if dtypes.is_inexact(x.dtype):
            return _float_math(
                lambda v: np.power(v, v.dtype.type(y)) if y >= 0 else 1 / np.power(v, v.dtype.type(-y)))(x)
        return np.power(x, np.asarray(y, dtype=x.dtype)) if y != 0 else np.ones_like(x)


def _logistic(x: np.ndarray) -> np.ndarray:
    if dtypes.is_complex(x.dtype):
        return 1 / (1 + np.exp(-x))
    return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def complex_greater(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """XLA's lexicographic ``x > y`` of complex values: false wherever a compared part is NaN."""
    re_x, re_y = np.real(x), np.real(y)
    return (re_x > re_y) | ((re_x == re_y) & (np.imag(x) > np.imag(y)))


def _max(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """NaN-propagating (as NumPy and XLA); +0 is larger than -0 whatever the order (as XLA).
    Complex values: ``x`` where it is lexicographically greater, else ``y`` (XLA's select, so a
    NaN is not propagated: the second operand wins where the comparison fails)."""
    if dtypes.is_complex(np.result_type(x, y)):
        return np.where(complex_greater(x, y), x, y)
    out = np.maximum(x, y)
    if out.dtype.kind == "f" or out.dtype == dtypes.bfloat16 or out.dtype in dtypes.FLOAT8:
        zero = out == 0
        if zero.any():  # (only two zeros can be wrong; their sum has max's sign: -0 only if both are)
            out = np.where(zero & (x == y), x + y, out)
    return out


def _min(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """NaN-propagating; -0 is smaller than +0 whatever the order (as XLA). Complex values: as
    ``_max``, ``x`` where it is lexicographically smaller, else ``y``."""
    if dtypes.is_complex(np.result_type(x, y)):
        return np.where(complex_greater(y, x), x, y)
    out = np.minimum(x, y)
    if out.dtype.kind == "f" or out.dtype == dtypes.bfloat16 or out.dtype in dtypes.FLOAT8:
        zero = out == 0
        if zero.any():  # (only two zeros can be wrong; the negated sum of their negations has min's sign)
            out = np.where(zero & (x == y), -(-x - y), out)
    return out


def _clamp(lo: np.ndarray, x: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Real types: min(max(lo, x), hi). Complex ones as XLA on CPU clamps them (checked against
    jax 0.10): by the real parts alone, ``t = lo if re lo >= re x else x``, then ``t if re hi >= re t
    else hi`` (so a NaN real part in x gives x, then hi; imaginary parts are never compared)."""
    if not dtypes.is_complex(np.result_type(lo, x, hi)):
        return _min(_max(lo, x), hi)
    lo, x, hi = np.broadcast_arrays(lo, x, hi)
    with np.errstate(invalid="ignore"):
        t = np.where(np.real(lo) >= np.real(x), lo, x)
        return np.where(np.real(hi) >= np.real(t), t, hi)


def _sign(x: np.ndarray) -> np.ndarray:
    if dtypes.is_unsigned(x.dtype):
        return (x > 0).astype(x.dtype)
    return np.sign(x)


def _abs(x: np.ndarray) -> np.ndarray:
    return np.abs(x) if not dtypes.is_unsigned(x.dtype) else x


def _population_count(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(x.astype(np.dtype(f"uint{x.dtype.itemsize * 8}"))).astype(x.dtype)


def _nextafter(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype == dtypes.bfloat16:
        return _bf16_nextafter(x, y)
    return np.nextafter(x, y)


def _bf16_nextafter(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    bits = x.view(np.uint16).astype(np.int32)
    up = ((x < y) & (x >= 0)) | ((x > y) & (x < 0))
    stepped = np.where(up, bits + 1, bits - 1)
    zero_case = np.where(y > 0, 1, 0x8001)
    out = np.where(x == 0, zero_case, stepped)
    out = np.where(x == y, bits, out)
    res = out.astype(np.uint16).view(ml_dtypes.bfloat16)
    return np.where(np.isnan(x) | np.isnan(y), np.nan, res).astype(ml_dtypes.bfloat16)


_lgamma = _vectorized(_safe(math.lgamma))
_erf = _vectorized(math.erf)
_erfc = _vectorized(math.erfc)
_digamma = _vectorized(_digamma_scalar)


def _select_n_rule(which: np.ndarray, *cases: np.ndarray) -> np.ndarray:
    return _select_n(which, cases)


def _select_n_plain(avals: Any, params: dict) -> Callable:
    """An eager call's NumPy function (``core.evaluation.runner``): ``np.where`` itself for a bool
    choice between two cases whose result is too small for ``_select_n``'s bitwise form (the
    same bits either way), else the rule."""
    which, *cases = avals
    if which.dtype == np.bool_ and len(cases) == 2 and math.prod(np.broadcast_shapes(
            *(a.shape for a in avals))) < _BITWISE_SELECT_MIN:
        where = np.where
        return lambda which, on_false, on_true: where(which, on_true, on_false)
    return _select_n_rule


_select_n_rule.plain = _select_n_plain  # type: ignore[attr-defined]


impl_rules.update({
    ew.neg_p: _ufunc_unary(np.negative),
    ew.sign_p: _sign,
    ew.floor_p: np.floor,
    ew.ceil_p: np.ceil,
    ew.round_p: lambda x, *, rounding_method: np.round(x) if rounding_method == 1 else _float_math(_round_away)(x),
    ew.abs_p: _abs,
    ew.real_p: lambda x: np.real(x).copy(),
    ew.imag_p: lambda x: np.imag(x).copy(),
    ew.conj_p: lambda x, *, input_dtype: np.conj(x.astype(dtypes.complex_dtype(x.dtype))),
    ew.complex_p: lambda x, y: _complex(x, y),
    ew.not_p: lambda x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x),
    ew.population_count_p: _population_count,
    ew.is_finite_p: np.isfinite,
    ew.exp_p: _float_math(np.exp),
    ew.exp2_p: _float_math(np.exp2),
    ew.log_p: _float_math(np.log),
    ew.log1p_p: _float_math(np.log1p),
    ew.expm1_p: _float_math(np.expm1),
    ew.tanh_p: _float_math(_tanh),
    ew.logistic_p: _float_math(_logistic),
    ew.sin_p: _float_math(np.sin),
    ew.cos_p: _float_math(np.cos),
    ew.tan_p: _float_math(np.tan),
    ew.asin_p: _float_math(np.arcsin),
    ew.acos_p: _float_math(np.arccos),
    ew.atan_p: _float_math(np.arctan),
    ew.sinh_p: _float_math(np.sinh),
    ew.cosh_p: _float_math(np.cosh),
    ew.asinh_p: _float_math(np.arcsinh),
    ew.acosh_p: _float_math(np.arccosh),
    ew.atanh_p: _float_math(np.arctanh),
    ew.sqrt_p: _float_math(np.sqrt),
    ew.rsqrt_p: _float_math(lambda x: 1 / np.sqrt(x)),
    ew.cbrt_p: _float_math(np.cbrt),
    ew.erf_p: _float_math(_erf),
    ew.erfc_p: _float_math(_erfc),
    ew.erf_inv_p: _float_math(_erf_inv),
    ew.lgamma_p: _float_math(_lgamma),
    ew.digamma_p: _float_math(_digamma),
    ew.integer_pow_p: _integer_pow,
    ew.add_p: _float_math(np.add),
    ew.sub_p: _float_math(np.subtract),
    ew.mul_p: _float_math(np.multiply),
    ew.square_p: _float_math(np.square),
    ew.div_p: _int_div,
    ew.rem_p: _int_rem,
    ew.pow_p: _float_math(_pow),
    ew.max_p: plain_rule(_max),
    ew.min_p: plain_rule(_min),
    ew.atan2_p: _float_math(np.arctan2),
    ew.nextafter_p: _nextafter,
    ew.and_p: np.bitwise_and,
    ew.or_p: np.bitwise_or,
    ew.xor_p: np.bitwise_xor,
    ew.shift_left_p: _shift("left"),
    ew.shift_right_arithmetic_p: _shift("arith"),
    ew.shift_right_logical_p: _shift("logical"),
    ew.eq_p: np.equal,
    ew.ne_p: np.not_equal,
    ew.lt_p: np.less,
    ew.le_p: np.less_equal,
    ew.gt_p: np.greater,
    ew.ge_p: np.greater_equal,
    ew.convert_element_type_p: lambda x, *, new_dtype, weak_type: dtypes.convert_values(x, new_dtype),
    ew.bitcast_convert_type_p: lambda x, *, new_dtype: _bitcast(x, new_dtype),
    ew.select_n_p: _select_n_rule,
    ew.clamp_p: lambda lo, x, hi: _clamp(lo, x, hi),
    stop_gradient_p: lambda x: x,
    ew.copy_p: lambda x: x,  # (arrays are immutable)
})


def _complex(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    out = np.empty(np.broadcast_shapes(np.shape(x), np.shape(y)), dtypes.complex_dtype(x.dtype))
    out.real, out.imag = x, y
    return out


def _bitcast(x: np.ndarray, new_dtype: np.dtype) -> np.ndarray:
    x = np.asarray(x, order="C")
    if x.dtype.itemsize < new_dtype.itemsize:
        return x.view(new_dtype).reshape(x.shape[:-1])
    if x.dtype.itemsize > new_dtype.itemsize:  # view a trailing axis: a 0-d array cannot change its itemsize
        return x.reshape(x.shape + (1,)).view(new_dtype)
    return x.view(new_dtype)


# Unsigned integer types by width: a bool select of large arrays is done on the values' bits.
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_BITWISE_SELECT_MIN = 1024


def _select_n(which: np.ndarray, cases: tuple) -> np.ndarray:
    if which.dtype == np.bool_:
        on_false, on_true = cases[0], cases[-1]
        bits = _BITS.get(on_true.dtype.itemsize)
        if bits is None or on_true.dtype != on_false.dtype or max(which.size, on_true.size) < _BITWISE_SELECT_MIN:
            return np.where(which, on_true, on_false)
        # ``f ^ ((t ^ f) & mask)``, mask all ones where ``which``: the same bits as np.where, which
        # costs about 30x as much on a mask without pattern (a branch per element).
        mask = which.astype(bits)
        np.negative(mask, out=mask)
        false_bits = np.asarray(on_false).view(bits)
        out = np.bitwise_xor(np.asarray(on_true).view(bits), false_bits)
        out = np.bitwise_and(out, mask, out=out if out.shape == mask.shape else None)
        np.bitwise_xor(out, false_bits, out=out)
        return out.view(on_true.dtype)
    return np.choose(np.clip(which, 0, len(cases) - 1).astype(np.intp), np.broadcast_arrays(*cases, which)[:-1])


# The incomplete gamma and beta functions run the programs ``ember.lax.special`` writes for them
# (so the reference, the CPU backend's expansion and the PJRT lowering compute the same thing),
# traced once per type.
_SPECIAL_VALUES: dict[Any, Callable[..., Any]] = {
    special.igamma_p: special.igamma_value, special.igammac_p: special.igammac_value,
    special.betainc_p: special.betainc_value}


@functools.lru_cache(maxsize=64)
def special_program(p: Any, shape: tuple, dtype: np.dtype, arity: int) -> Any:
    """The program computing ``p`` (igamma, igammac or betainc) on ``arity`` operands of one type."""
    avals = [ShapedArray(shape, dtype)] * arity
    return trace_to_jaxpr(lambda *xs: [_SPECIAL_VALUES[p](*xs)], avals,
                          DebugInfo("reference", p.name, [f"x{i}" for i in range(arity)], False))


def _special(p: Any) -> Callable:
    def impl(*xs: np.ndarray) -> np.ndarray:
        dt = xs[0].dtype
        wide = np.dtype(np.float64 if dt == np.float64 else np.float32)
        shape = np.broadcast_shapes(*(x.shape for x in xs))
        args = [np.broadcast_to(x.astype(wide), shape) for x in xs]
        (out,) = eval_closed(special_program(p, shape, wide, len(xs)), *args)
        return np.asarray(out).astype(dt)
    return impl


impl_rules.update({p: _special(p) for p in _SPECIAL_VALUES})
