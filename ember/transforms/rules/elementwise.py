"""Derivatives of elementwise primitives (jvp), and transposes of the linear ones.

Partials are written as ``g * f'(x)`` with the coefficient ``f'(x)`` computed from
primal values only, so under ``linearize`` it becomes a residual and the
tangent program is a chain of multiplications by constants. A few are written as
JAX writes them instead (tanh, cos, div, max/min, add/sub), so that differentiated
programs print as JAX's do and round as JAX's do; tangents of two operands add up
with ``add_any``.
"""
from __future__ import annotations

import math
from typing import Any

from ember import dtypes, lax
from ember.lax import elementwise as ew, special
from ember.lax.base import aval
from ember.transforms.jvp import defjvp, deflinear, defzero, jvp_rules
from ember.transforms.tangents import (
    Zero,
    add_any,
    add_any_p,
    add_tangents,
    broadcast_to_shape,
    convert,
    instantiate,
    is_differentiable,
    sum_to_shape,
    zeros,
)
from ember.transforms.transpose import is_undefined, transpose_rules


def const(like: Any, value: float) -> Any:
    """A scalar of ``like``'s dtype, weakly typed so it never changes a result's type."""
    return lax.convert_element_type(value, aval(like).dtype, weak_type=True)


def one_minus_square(x: Any) -> Any:
    return lax.sub(const(x, 1.0), lax.mul(x, x))


def _add_any_jvp(primals: tuple, tangents: tuple, *, body: Any) -> tuple[Any, Any]:
    return add_any(*primals), add_tangents(*tangents)


jvp_rules[add_any_p] = _add_any_jvp

defzero(ew.sign_p, ew.floor_p, ew.ceil_p, ew.round_p, ew.is_finite_p, ew.not_p, ew.population_count_p,
        ew.and_p, ew.or_p, ew.xor_p, ew.shift_left_p, ew.shift_right_arithmetic_p,
        ew.shift_right_logical_p, ew.eq_p, ew.ne_p, ew.lt_p, ew.le_p, ew.gt_p, ew.ge_p,
        ew.bitcast_convert_type_p)

# --- unary math: g * f'(x) ----------------------------------------------------------
def _abs_partial(g: Any, ans: Any, x: Any) -> Any:
    if dtypes.is_complex(aval(x).dtype):  # d|x| = re(conj(x) dx) / |x|, taken as 0 at x == 0 (as JAX)
        magnitude = lax.convert_element_type(ans, aval(x).dtype)
        return lax.real(lax.mul(g, lax.div(lax.conj(x), _replace_zero(magnitude))))
    return lax.select(lax.ge(x, const(x, 0.0)), g, lax.neg(g))  # 1 at 0, as JAX


defjvp(ew.abs_p, _abs_partial)
defjvp(ew.exp_p, lambda g, ans, x: lax.mul(g, ans))
defjvp(ew.exp2_p, lambda g, ans, x: lax.mul(g, lax.mul(ans, const(x, math.log(2.0)))))
defjvp(ew.log_p, lambda g, ans, x: lax.div(g, x))
defjvp(ew.log1p_p, lambda g, ans, x: lax.div(g, lax.add(x, const(x, 1.0))))
defjvp(ew.expm1_p, lambda g, ans, x: lax.mul(g, lax.add(ans, const(x, 1.0))))
# (g + g tanh) (1 - tanh): JAX's form, accurate where tanh is near +-1 (1 - tanh^2 cancels there)
defjvp(ew.tanh_p, lambda g, ans, x: lax.mul(lax.add(g, lax.mul(g, ans)), lax.sub(const(x, 1.0), ans)))
defjvp(ew.logistic_p, lambda g, ans, x: lax.mul(g, lax.mul(ans, lax.sub(const(x, 1.0), ans))))
defjvp(ew.sin_p, lambda g, ans, x: lax.mul(g, lax.cos(x)))
defjvp(ew.cos_p, lambda g, ans, x: lax.neg(lax.mul(g, lax.sin(x))))
defjvp(ew.tan_p, lambda g, ans, x: lax.mul(g, lax.add(const(x, 1.0), lax.mul(ans, ans))))
defjvp(ew.asin_p, lambda g, ans, x: lax.mul(g, lax.rsqrt(one_minus_square(x))))
defjvp(ew.acos_p, lambda g, ans, x: lax.mul(g, lax.neg(lax.rsqrt(one_minus_square(x)))))
defjvp(ew.atan_p, lambda g, ans, x: lax.div(g, lax.add(const(x, 1.0), lax.mul(x, x))))
defjvp(ew.sinh_p, lambda g, ans, x: lax.mul(g, lax.cosh(x)))
defjvp(ew.cosh_p, lambda g, ans, x: lax.mul(g, lax.sinh(x)))
defjvp(ew.asinh_p, lambda g, ans, x: lax.mul(g, lax.rsqrt(lax.add(lax.mul(x, x), const(x, 1.0)))))
defjvp(ew.acosh_p, lambda g, ans, x: lax.mul(  # x^2 - 1 (JAX's): +inf, not -inf, at x = -1
    g, lax.rsqrt(lax.sub(lax.mul(x, x), const(x, 1.0)))))
defjvp(ew.atanh_p, lambda g, ans, x: lax.div(g, one_minus_square(x)))
defjvp(ew.sqrt_p, lambda g, ans, x: lax.mul(g, lax.div(const(x, 0.5), ans)))
defjvp(ew.rsqrt_p, lambda g, ans, x: lax.mul(g, lax.mul(const(x, -0.5), lax.div(ans, x))))
defjvp(ew.cbrt_p, lambda g, ans, x: lax.mul(g, lax.mul(const(x, 1 / 3), lax.integer_pow(ans, -2))))
defjvp(ew.erf_p, lambda g, ans, x: lax.mul(
    g, lax.mul(const(x, 2 / math.sqrt(math.pi)), lax.exp(lax.neg(lax.mul(x, x))))))
defjvp(ew.erfc_p, lambda g, ans, x: lax.mul(
    g, lax.mul(const(x, -2 / math.sqrt(math.pi)), lax.exp(lax.neg(lax.mul(x, x))))))
defjvp(ew.erf_inv_p, lambda g, ans, x: lax.mul(
    g, lax.mul(const(x, math.sqrt(math.pi) / 2), lax.exp(lax.mul(ans, ans)))))
defjvp(ew.lgamma_p, lambda g, ans, x: lax.mul(g, lax.digamma(x)))


def trigamma(x: Any) -> Any:
    """psi'(x), the derivative of digamma, built from lax operations (so it is differentiable too).

    Recurrence psi'(x) = psi'(x + 6) + sum_k 1/(x + k)^2 moves the argument to >= 6, where
    the asymptotic series is accurate to ~1e-10; negative arguments use the reflection
    psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x).
    """
    negative = lax.lt(x, const(x, 0.0))
    z = lax.select(negative, lax.sub(const(x, 1.0), x), x)
    total = lax.mul(z, const(x, 0.0))
    for _ in range(6):
        total = lax.add(total, lax.integer_pow(z, -2))
        z = lax.add(z, const(x, 1.0))
    inv = lax.integer_pow(z, -1)
    inv2 = lax.mul(inv, inv)
    series = const(x, 0.0)
    for coefficient in (-1 / 30, 1 / 42, -1 / 30, 1 / 6):  # Bernoulli terms, innermost first
        series = lax.add(lax.mul(series, inv2), const(x, coefficient))
    asymptotic = lax.add(lax.add(inv, lax.mul(const(x, 0.5), inv2)), lax.mul(lax.mul(series, inv2), inv))
    positive_value = lax.add(total, asymptotic)
    sin_pi_x = lax.sin(lax.mul(const(x, math.pi), x))
    reflected = lax.sub(lax.div(const(x, math.pi ** 2), lax.mul(sin_pi_x, sin_pi_x)), positive_value)
    # a pole at each non-positive integer (and -inf), where sin(pi x) is only nearly 0 (or NaN)
    reflected = lax.select(lax.eq(x, lax.floor(x)), const(x, math.inf), reflected)
    return lax.select(negative, reflected, positive_value)


defjvp(ew.digamma_p, lambda g, ans, x: lax.mul(g, trigamma(x)))


def _integer_pow_partial(g: Any, ans: Any, x: Any, *, y: int) -> Any:
    if y == 0:
        return Zero(aval(g))
    if y == 1:
        return g
    power = x if y == 2 else lax.integer_pow(x, y - 1)
    return lax.mul(g, lax.mul(const(x, float(y)), power))


defjvp(ew.integer_pow_p, _integer_pow_partial)
defjvp(ew.square_p, lambda g, ans, x: lax.mul(g, lax.mul(const(x, 2.0), x)))  # (JAX's form)

# --- binary ----------------------------------------------------------------------------
def _sum_jvp(p: Any, negate_second: bool):
    """add and sub: the tangents combine with the operation itself (JAX's rule), one alone passes."""
    def rule(primals: tuple, tangents: tuple) -> tuple[Any, Any]:
        ans = p.bind(*primals)
        tx, ty = tangents
        shape = aval(ans).shape
        if isinstance(ty, Zero):
            return ans, broadcast_to_shape(tx, shape)
        if isinstance(tx, Zero):
            return ans, broadcast_to_shape(lax.neg(ty) if negate_second else ty, shape)
        return ans, p.bind(tx, ty)  # (rank-0 tangents broadcast as the operands did)
    return rule


jvp_rules[ew.add_p] = _sum_jvp(ew.add_p, False)
jvp_rules[ew.sub_p] = _sum_jvp(ew.sub_p, True)
defjvp(ew.mul_p, lambda g, ans, x, y: lax.mul(g, y), lambda g, ans, x, y: lax.mul(x, g))
defjvp(ew.div_p, lambda g, ans, x, y: lax.div(g, y),  # -g x / y^2, as JAX writes it
       lambda g, ans, x, y: lax.mul(lax.mul(lax.neg(g), x), lax.integer_pow(y, -2)))


def _rem_partial_y(g: Any, ans: Any, x: Any, y: Any) -> Any:
    quotient = lax.div(x, y)  # d rem(x, y) / dy = -trunc(x / y)
    return lax.mul(g, lax.neg(lax.mul(lax.sign(quotient), lax.floor(lax.abs(quotient)))))


defjvp(ew.rem_p, lambda g, ans, x, y: g, _rem_partial_y)
defjvp(ew.nextafter_p, lambda g, ans, x, y: g, None)  # x moved by one ulp: slope 1 in x, flat in y


def _replace_zero(x: Any) -> Any:
    return lax.select(lax.eq(x, const(x, 0.0)), const(x, 1.0), x)


def _pow_partial_x(g: Any, ans: Any, x: Any, y: Any) -> Any:
    # y * x^(y-1), as JAX: 0 * inf = nan at x == 0, y == 0 (the exponent is a float here)
    return lax.mul(g, lax.mul(y, lax.pow(x, lax.sub(y, const(y, 1.0)))))


def _pow_partial_y(g: Any, ans: Any, x: Any, y: Any) -> Any:
    return lax.mul(g, lax.mul(lax.log(_replace_zero(x)), ans))  # log(x) * x^y, taken as 0 at x == 0


defjvp(ew.pow_p, _pow_partial_x, _pow_partial_y)


def _balanced_choice(x: Any, ans: Any, other: Any) -> Any:
    """1 where ``x`` was chosen by max/min, 0.5 on ties, else 0 (JAX's: (x == ans) / (1 + (other == ans)))."""
    chosen = lax.select(lax.eq(x, ans), const(ans, 1.0), const(ans, 0.0))
    return lax.div(chosen, lax.select(lax.eq(other, ans), const(ans, 2.0), const(ans, 1.0)))


for _p in (ew.max_p, ew.min_p):
    defjvp(_p, lambda g, ans, x, y: lax.mul(g, _balanced_choice(x, ans, y)),
           lambda g, ans, x, y: lax.mul(g, _balanced_choice(y, ans, x)))


def _atan2_partial(numerator_is_x: bool):
    def partial(g: Any, ans: Any, x: Any, y: Any) -> Any:
        denominator = lax.add(lax.mul(x, x), lax.mul(y, y))
        coefficient = lax.div(y, denominator) if numerator_is_x else lax.neg(lax.div(x, denominator))
        return lax.mul(g, coefficient)
    return partial


defjvp(ew.atan2_p, _atan2_partial(True), _atan2_partial(False))


def _masked(g: Any, mask: Any) -> Any:
    return lax.select(mask, g, const(g, 0.0))


defjvp(ew.clamp_p,
       lambda g, ans, lo, x, hi: _masked(g, lax.bitwise_and(lax.gt(lo, x), lax.lt(lo, hi))),
       lambda g, ans, lo, x, hi: _masked(g, lax.bitwise_and(lax.gt(x, lo), lax.lt(x, hi))),
       lambda g, ans, lo, x, hi: _masked(g, lax.lt(hi, x)))


# --- conversion and selection -----------------------------------------------------------------
def _convert_jvp(primals: tuple, tangents: tuple, *, new_dtype: Any, weak_type: bool) -> tuple:
    [x], [t] = primals, tangents
    ans = ew.convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
    if not is_differentiable(new_dtype):
        return ans, Zero(aval(ans))
    return ans, ew.convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)


jvp_rules[ew.convert_element_type_p] = _convert_jvp


def _select_n_jvp(primals: tuple, tangents: tuple) -> tuple:
    which, *cases = primals
    ans = ew.select_n_p.bind(which, *cases)
    case_tangents = tangents[1:]
    if all(isinstance(t, Zero) for t in case_tangents):
        return ans, Zero(aval(ans))
    return ans, ew.select_n_p.bind(which, *map(instantiate, case_tangents))


jvp_rules[ew.select_n_p] = _select_n_jvp
deflinear(ew.neg_p)
deflinear(ew.copy_p)
deflinear(ew.real_p)
deflinear(ew.imag_p)
deflinear(ew.conj_p)
deflinear(ew.complex_p)


# --- transposes of the linear primitives -----------------------------------------------------
def _linear_operand_count_check(name: str, operands: tuple) -> None:
    if sum(map(is_undefined, operands)) != 1:
        raise NotImplementedError(f"transpose of {name}: expected exactly one linear operand (the product of "
                                  "two values being differentiated is not linear)")


def _add_transpose(ct: Any, x: Any, y: Any) -> list:
    return [sum_to_shape(ct, x.aval.shape) if is_undefined(x) else None,
            sum_to_shape(ct, y.aval.shape) if is_undefined(y) else None]


def _sub_transpose(ct: Any, x: Any, y: Any) -> list:
    return [sum_to_shape(ct, x.aval.shape) if is_undefined(x) else None,
            sum_to_shape(lax.neg(ct), y.aval.shape) if is_undefined(y) else None]


def _mul_transpose(ct: Any, x: Any, y: Any) -> list:
    _linear_operand_count_check("mul", (x, y))
    if is_undefined(x):
        return [sum_to_shape(lax.mul(ct, y), x.aval.shape), None]
    return [None, sum_to_shape(lax.mul(x, ct), y.aval.shape)]


def _div_transpose(ct: Any, x: Any, y: Any) -> list:
    if is_undefined(y):
        raise NotImplementedError("transpose of div: the divisor is being differentiated, which is not linear")
    return [sum_to_shape(lax.div(ct, y), x.aval.shape), None]


def _convert_transpose(ct: Any, x: Any, *, new_dtype: Any, weak_type: bool) -> list:
    # real -> complex transposes to the real part; complex -> real (the real part) to ``ct + 0j``, as JAX
    return [convert(ct, x.aval.dtype, x.aval.weak_type)]


def _select_n_transpose(ct: Any, which: Any, *cases: Any) -> list:
    if is_undefined(which):
        raise NotImplementedError("transpose of select_n: the selector cannot be differentiated")
    zero = zeros(aval(ct))
    out: list = [None]
    for i, case in enumerate(cases):
        if is_undefined(case):
            chosen = lax.select_n(which, *[ct if j == i else zero for j in range(len(cases))])
            out.append(sum_to_shape(chosen, case.aval.shape))
        else:
            out.append(None)
    return out


def _conj_transpose(ct: Any, x: Any, *, input_dtype: Any) -> list:
    return [lax.conj(ct) if dtypes.is_complex(input_dtype) else lax.real(ct)]


# The transposes of the complex parts are not conjugating: cotangents of complex values are
# transposes, as JAX's (``grad`` of a real function of ``z`` is the conjugate of df/dz * 2).
transpose_rules.update({
    ew.real_p: lambda ct, x: [lax.complex(ct, zeros(aval(ct)))],
    ew.imag_p: lambda ct, x: [lax.complex(zeros(aval(ct)), lax.neg(ct))],
    ew.complex_p: lambda ct, x, y: [lax.real(ct), lax.imag(lax.neg(ct))],
    ew.conj_p: _conj_transpose,
    ew.neg_p: lambda ct, x: [lax.neg(ct)],
    ew.copy_p: lambda ct, x: [ew.copy_p.bind(ct)],
    ew.add_p: _add_transpose,
    add_any_p: lambda ct, x, y, *, body: [ct if is_undefined(x) else None, ct if is_undefined(y) else None],
    ew.sub_p: _sub_transpose,
    ew.mul_p: _mul_transpose,
    ew.div_p: _div_transpose,
    ew.convert_element_type_p: _convert_transpose,
    ew.select_n_p: _select_n_transpose,
})


# The incomplete gamma and beta functions: in x, the densities (formed from the log of the
# prefactor their values use, so they share its accuracy); in the shape parameters, JAX's errors.
def _gamma_density(a: Any, x: Any) -> Any:
    """``x^(a-1) e^-x / Gamma(a)``: 0 at ``x = 0`` for ``a > 1`` (inf for ``a < 1``), 0 outside ``x >= 0``."""
    positive = lax.gt(x, const(x, 0.0))
    safe_x = lax.select(positive, x, lax.full_like(x, 1.0))
    inside = lax.exp(lax.sub(special._log_prefactor(a, safe_x), lax.log(safe_x)))
    at_zero = lax.exp(lax.sub(lax.mul(lax.sub(a, const(a, 1.0)), lax.log(x)), lax.lgamma(a)))
    return lax.select(positive, inside, lax.select(lax.eq(x, const(x, 0.0)), at_zero, lax.full_like(x, 0.0)))


def _beta_density(a: Any, b: Any, x: Any) -> Any:
    """``x^(a-1) (1-x)^(b-1) / B(a, b)``, 0 outside [0, 1]."""
    log_beta = lax.sub(lax.add(lax.lgamma(a), lax.lgamma(b)), lax.lgamma(lax.add(a, b)))
    log_density = lax.add(lax.mul(lax.sub(a, const(a, 1.0)), lax.log(x)),
                          lax.mul(lax.sub(b, const(b, 1.0)), lax.log1p(lax.neg(x))))
    outside = lax.bitwise_or(lax.lt(x, const(x, 0.0)), lax.gt(x, const(x, 1.0)))
    return lax.select(outside, lax.full_like(x, 0.0), lax.exp(lax.sub(log_density, log_beta)))


def _not_in_a(name: str) -> Any:
    def rule(g: Any, ans: Any, *primals: Any) -> Any:
        raise ValueError(f"{name} gradient with respect to a not supported.")
    return rule


def _betainc_shape_rule(g: Any, ans: Any, a: Any, b: Any, x: Any) -> Any:
    raise ValueError("Betainc gradient with respect to a and b not supported.")


defjvp(special.igamma_p, _not_in_a("igamma"), lambda g, ans, a, x: lax.mul(g, _gamma_density(a, x)))
defjvp(special.igammac_p, _not_in_a("igammac"), lambda g, ans, a, x: lax.neg(lax.mul(g, _gamma_density(a, x))))
defjvp(special.betainc_p, _betainc_shape_rule, _betainc_shape_rule,
       lambda g, ans, a, b, x: lax.mul(g, _beta_density(a, b, x)))
