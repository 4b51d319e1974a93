"""The regularized incomplete gamma and beta functions: ``igamma``, ``igammac`` and ``betainc``.

Each is a primitive (as in JAX: ``igamma``, ``igammac``, ``regularized_incomplete_beta``) so that
differentiation sees it whole: its jvp rule gives the density in ``x`` exactly, which
differentiating through the loops that compute it would not. What each one computes is written
here, in other primitives (``igamma_value`` and friends): the reference interpreter runs that
program and the CPU backend expands the equation into it, so both compute the same thing.

* ``igamma``: the power series of ``P(a, x)`` where ``x < a + 1``, else ``1 - Q`` with ``Q``
  from its continued fraction (modified Lentz). ``igammac`` is the same split the other way,
  so the continued fraction gives a small ``Q`` directly, never as ``1 - P``.
* ``betainc``: the continued fraction of ``I_x(a, b)``, mirrored to ``1 - I_{1-x}(b, a)``
  where ``x > (a + 1) / (a + b + 2)``, where it converges fast.

The iterations run in a ``while_loop`` over the whole array until every element has converged
(at most ``MAX_ITERATIONS``); about ``sqrt(a)`` are needed near ``x = a``. The prefactor
``x^a e^-x / gamma(a)`` is formed for ``a >= 10`` as ``a (log1p(t) - t) + log(a / 2 pi) / 2 -
stirling(a)``, ``t = (x - a) / a``, since ``a log x - x - lgamma(a)`` cancels to a relative error
of ``a * eps`` (1e-4 in float32 at ``a = 1000``). float16 and bfloat16 are computed in float32.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.lax import elementwise as ew
from ember.lax.base import aval
from ember.lax.control_flow import while_loop
from ember.lax.creation import full
from ember.lax.reductions import reduce_and

__all__ = ["betainc", "igamma", "igammac"]

MAX_ITERATIONS = 2000
_TINY = {np.dtype(np.float32): 1e-30, np.dtype(np.float64): 1e-300}

igamma_p = ew._define("igamma", ew.FLOAT)
igammac_p = ew._define("igammac", ew.FLOAT)
betainc_p = ew._define("regularized_incomplete_beta", ew.FLOAT)


# --- the values, in other primitives ------------------------------------------------------------
def _const(like: Any, value: float) -> Any:
    return full(aval(like).shape, value, aval(like).dtype)


def _eps(x: Any) -> float:
    return float(np.finfo(aval(x).dtype).eps)


def _iterate(step: Callable[[Any], tuple], state: tuple, done: Any) -> tuple:
    """``state = step(state)`` elementwise until ``step`` reports every element converged (or
    ``MAX_ITERATIONS``); a converged element keeps its value."""
    def cond(carry: tuple) -> Any:
        n, finished = carry[0], carry[1]
        return ew.bitwise_and(ew.lt(n, MAX_ITERATIONS), ew.bitwise_not(reduce_and(finished, tuple(range(
            aval(finished).ndim)))))

    def body(carry: tuple) -> tuple:
        n, finished, old = carry[0], carry[1], carry[2:]
        new, converged = step((ew.add(n, 1), *old))
        kept = tuple(ew.select(finished, o, v) for o, v in zip(old, new))
        return (ew.add(n, 1), ew.bitwise_or(finished, converged), *kept)

    out = while_loop(cond, body, (np.int32(0), done, *state))
    return out[2:]


def _stirling(a: Any) -> Any:
    """``lgamma(a) - ((a - 1/2) log a - a + log(2 pi) / 2)`` for ``a >= 10`` (five terms of the
    asymptotic series: below 1e-17 there)."""
    inv = ew.div(1.0, a)
    inv2 = ew.mul(inv, inv)
    total = _const(a, 0.0)
    for c in (1 / 1188, -1 / 1680, 1 / 1260, -1 / 360, 1 / 12):
        total = ew.add(ew.mul(total, inv2), c)
    return ew.mul(total, inv)


def _log_prefactor(a: Any, x: Any) -> Any:
    """``a log x - x - lgamma(a)``, without the cancellation of its terms for large ``a``."""
    direct = ew.sub(ew.sub(ew.mul(a, ew.log(x)), x), ew.lgamma(a))
    large = ew.ge(a, 10.0)
    big_a = ew.select(large, a, _const(a, 10.0))
    t = ew.div(ew.sub(x, big_a), big_a)
    near = ew.lt(ew.abs(t), 0.5)  # (log1p(t) loses 1 + t's digits as t nears -1: log(x / a) there)
    log_ratio = ew.select(near, ew.log1p(ew.select(near, t, _const(t, 0.0))), ew.log(ew.div(x, big_a)))
    uniform = ew.add(ew.mul(big_a, ew.sub(log_ratio, t)),
                     ew.sub(ew.mul(0.5, ew.log(ew.div(big_a, 2 * math.pi))), _stirling(big_a)))
    return ew.select(large, uniform, direct)


def _lower_series(a: Any, x: Any, active: Any) -> Any:
    """``P(a, x)`` by ``x^a e^-x / gamma(a + 1) * sum_n x^n / ((a+1)...(a+n))``."""
    eps = _eps(x)

    def step(state: tuple) -> tuple:
        n, term, total = state[0], state[1], state[2]
        term = ew.mul(term, ew.div(x, ew.add(a, ew.convert_element_type(n, aval(x).dtype))))
        total = ew.add(total, term)
        return (term, total), ew.le(ew.abs(term), ew.mul(ew.abs(total), eps))

    one = _const(x, 1.0)
    _, total = _iterate(step, (one, one), ew.bitwise_not(active))
    return ew.mul(ew.exp(ew.sub(_log_prefactor(a, x), ew.log(a))), total)


def _upper_fraction(a: Any, x: Any, active: Any) -> Any:
    """``Q(a, x)`` by the continued fraction ``x^a e^-x / gamma(a) / (x + 1 - a - 1 (1 - a) /
    (x + 3 - a - 2 (2 - a) / ...))``, evaluated forward by modified Lentz."""
    eps, tiny = _eps(x), _TINY[aval(x).dtype]

    def floor_tiny(v: Any) -> Any:
        return ew.select(ew.lt(ew.abs(v), tiny), _const(v, tiny), v)

    def step(state: tuple) -> tuple:
        n, b, c, d, h = state
        nf = ew.convert_element_type(n, aval(x).dtype)
        an = ew.mul(ew.neg(nf), ew.sub(nf, a))
        b = ew.add(b, 2.0)
        d = ew.div(1.0, floor_tiny(ew.add(ew.mul(an, d), b)))
        c = floor_tiny(ew.add(b, ew.div(an, c)))
        delta = ew.mul(c, d)
        return (b, c, d, ew.mul(h, delta)), ew.le(ew.abs(ew.sub(delta, 1.0)), eps)

    b = ew.sub(ew.add(x, 1.0), a)
    d = ew.div(1.0, floor_tiny(b))
    _, _, _, h = _iterate(step, (b, _const(x, 1 / tiny), d, d), ew.bitwise_not(active))
    return ew.mul(ew.exp(_log_prefactor(a, x)), h)


def _gamma_edges(a: Any, x: Any, value: Any, lower: bool) -> Any:
    """JAX's values off the interior: NaN for NaN, negative ``a`` or ``x``, and ``a = x = 0``;
    ``P = 1`` at ``a = 0`` (for ``x >= 1``) and at ``x = inf``, 0 at ``x = 0``; at ``a = inf``, 0 for ``x < 1``
    and NaN for finite ``x >= 1`` (where ``a log x`` is ``0 * inf``)."""
    p = (lambda v: v) if lower else (lambda v: 1.0 - v)
    nan = ew.bitwise_or(ew.bitwise_or(ew.ne(a, a), ew.ne(x, x)), ew.bitwise_or(ew.lt(a, 0.0), ew.lt(x, 0.0)))
    # (a = 0: P is NaN for x < 1, where JAX takes the series, but Q is 0 for every x > 0)
    nan = ew.bitwise_or(nan, ew.bitwise_and(ew.eq(a, 0.0), ew.lt(x, 1.0) if lower else ew.eq(x, 0.0)))
    inf_a = ew.bitwise_and(ew.eq(a, np.inf), ew.ne(x, np.inf))
    out = ew.select(inf_a, ew.select(ew.lt(x, 1.0), _const(x, p(0.0)), _const(x, np.nan)), value)
    out = ew.select(ew.eq(x, 0.0), _const(x, p(0.0)), out)
    out = ew.select(ew.bitwise_or(ew.eq(a, 0.0), ew.eq(x, np.inf)), _const(x, p(1.0)), out)
    return ew.select(nan, _const(x, np.nan), out)


def _gamma_interior(a: Any, x: Any) -> tuple[Any, Any, Any, Any]:
    """Safe arguments where the algorithms apply, and which of them each element takes."""
    inside = ew.bitwise_and(ew.bitwise_and(ew.gt(a, 0.0), ew.lt(a, np.inf)),
                            ew.bitwise_and(ew.gt(x, 0.0), ew.lt(x, np.inf)))
    safe_a, safe_x = ew.select(inside, a, _const(a, 1.0)), ew.select(inside, x, _const(x, 1.0))
    series = ew.lt(safe_x, ew.add(safe_a, 1.0))
    return safe_a, safe_x, ew.bitwise_and(inside, series), ew.bitwise_and(inside, ew.bitwise_not(series))


def igamma_value(a: Any, x: Any) -> Any:
    """``P(a, x)`` in other primitives (operands of one float32 or float64 shape)."""
    safe_a, safe_x, series, fraction = _gamma_interior(a, x)
    lower = _lower_series(safe_a, safe_x, series)
    upper = _upper_fraction(safe_a, safe_x, fraction)
    return _gamma_edges(a, x, ew.select(series, lower, ew.sub(1.0, upper)), lower=True)


def igammac_value(a: Any, x: Any) -> Any:
    """``Q(a, x)`` in other primitives: the continued fraction itself where ``x >= a + 1``."""
    safe_a, safe_x, series, fraction = _gamma_interior(a, x)
    lower = _lower_series(safe_a, safe_x, series)
    upper = _upper_fraction(safe_a, safe_x, fraction)
    return _gamma_edges(a, x, ew.select(series, ew.sub(1.0, lower), upper), lower=False)


def _beta_fraction(a: Any, b: Any, x: Any, active: Any) -> Any:
    """``I_x(a, b)`` by ``x^a (1-x)^b / (a B(a, b)) / (1 + d1 / (1 + d2 / ...))`` (modified
    Lentz), with ``d_2m+1 = -(a+m)(a+b+m) x / ((a+2m)(a+2m+1))``, ``d_2m = m (b-m) x /
    ((a+2m-1)(a+2m))``."""
    eps, tiny = _eps(x), _TINY[aval(x).dtype]
    dt = aval(x).dtype

    def floor_tiny(v: Any) -> Any:
        return ew.select(ew.lt(ew.abs(v), tiny), _const(v, tiny), v)

    def lentz(coefficient: Any, c: Any, d: Any) -> tuple[Any, Any, Any]:
        d = ew.div(1.0, floor_tiny(ew.add(1.0, ew.mul(coefficient, d))))
        c = floor_tiny(ew.add(1.0, ew.div(coefficient, c)))
        return c, d, ew.mul(c, d)

    def step(state: tuple) -> tuple:
        n, c, d, h = state
        m = ew.convert_element_type(n, dt)
        two_m = ew.mul(m, 2.0)
        even = ew.div(ew.mul(ew.mul(m, ew.sub(b, m)), x),
                      ew.mul(ew.add(ew.sub(a, 1.0), two_m), ew.add(a, two_m)))
        c, d, delta = lentz(even, c, d)
        h = ew.mul(h, delta)
        odd = ew.div(ew.neg(ew.mul(ew.mul(ew.add(a, m), ew.add(ew.add(a, b), m)), x)),
                     ew.mul(ew.add(a, two_m), ew.add(ew.add(a, two_m), 1.0)))
        c, d, delta = lentz(odd, c, d)
        return (c, d, ew.mul(h, delta)), ew.le(ew.abs(ew.sub(delta, 1.0)), eps)

    first = ew.div(ew.neg(ew.mul(ew.add(a, b), x)), ew.add(a, 1.0))  # d_1
    c = _const(x, 1.0)
    d = ew.div(1.0, floor_tiny(ew.add(1.0, first)))
    _, _, h = _iterate(step, (c, d, d), ew.bitwise_not(active))
    log_beta = ew.sub(ew.add(ew.lgamma(a), ew.lgamma(b)), ew.lgamma(ew.add(a, b)))
    log_front = ew.sub(ew.add(ew.mul(a, ew.log(x)), ew.mul(b, ew.log1p(ew.neg(x)))), ew.add(ew.log(a), log_beta))
    return ew.mul(ew.exp(log_front), h)


def betainc_value(a: Any, b: Any, x: Any) -> Any:
    """``I_x(a, b)`` in other primitives. Off the interior, JAX's values: NaN for NaN, negative
    ``a`` or ``b``, ``x`` outside [0, 1], ``a = b = 0`` and ``a = b = inf``; 0 at ``x = 0``, 1 at
    ``x = 1``; otherwise 1 where ``a = 0`` or ``b = inf``, 0 where ``b = 0`` or ``a = inf``."""
    nan = ew.bitwise_or(ew.bitwise_or(ew.ne(a, a), ew.ne(b, b)), ew.ne(x, x))
    nan = ew.bitwise_or(nan, ew.bitwise_or(ew.bitwise_or(ew.lt(a, 0.0), ew.lt(b, 0.0)),
                                           ew.bitwise_or(ew.lt(x, 0.0), ew.gt(x, 1.0))))
    both = ew.bitwise_or(ew.bitwise_and(ew.eq(a, 0.0), ew.eq(b, 0.0)),
                         ew.bitwise_and(ew.eq(a, np.inf), ew.eq(b, np.inf)))
    nan = ew.bitwise_or(nan, both)
    inside = ew.bitwise_and(ew.bitwise_and(ew.gt(x, 0.0), ew.lt(x, 1.0)),
                            ew.bitwise_and(ew.bitwise_and(ew.gt(a, 0.0), ew.lt(a, np.inf)),
                                           ew.bitwise_and(ew.gt(b, 0.0), ew.lt(b, np.inf))))
    one = _const(x, 1.0)
    safe_a, safe_b = ew.select(inside, a, one), ew.select(inside, b, one)
    safe_x = ew.select(inside, x, _const(x, 0.5))
    mirror = ew.gt(safe_x, ew.div(ew.add(safe_a, 1.0), ew.add(ew.add(safe_a, safe_b), 2.0)))
    fa, fb = ew.select(mirror, safe_b, safe_a), ew.select(mirror, safe_a, safe_b)
    fx = ew.select(mirror, ew.sub(1.0, safe_x), safe_x)
    value = _beta_fraction(fa, fb, fx, inside)
    value = ew.select(mirror, ew.sub(1.0, value), value)
    out = ew.select(ew.bitwise_or(ew.eq(b, 0.0), ew.eq(a, np.inf)), _const(x, 0.0), value)
    out = ew.select(ew.bitwise_or(ew.eq(a, 0.0), ew.eq(b, np.inf)), one, out)
    out = ew.select(ew.eq(x, 0.0), _const(x, 0.0), out)
    out = ew.select(ew.eq(x, 1.0), one, out)
    return ew.select(nan, _const(x, np.nan), out)


# --- the public functions -----------------------------------------------------------------------
def _bind_wide(p: Any, *args: Any) -> Any:
    """Bind ``p`` on operands of one dtype (scalars broadcast, as lax's binary operations); a
    float16 or bfloat16 one is computed in float32 and rounded back."""
    args = ew._broadcast_size_one(p.name, ew._scalars_like(args))
    dt = aval(args[0]).dtype
    if dtypes.is_inexact(dt) and np.dtype(dt).itemsize < 4:
        wide = [ew.convert_element_type(x, np.float32, weak_type=aval(x).weak_type) for x in args]
        return ew.convert_element_type(p.bind(*wide), dt, weak_type=aval(args[0]).weak_type)
    return p.bind(*args)


def igamma(a: Any, x: Any) -> Any:
    """The regularized lower incomplete gamma function ``P(a, x) = gamma(a, x) / Gamma(a)``."""
    return _bind_wide(igamma_p, a, x)


def igammac(a: Any, x: Any) -> Any:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``, computed
    directly where it is small."""
    return _bind_wide(igammac_p, a, x)


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularized incomplete beta function ``I_x(a, b)``."""
    return _bind_wide(betainc_p, a, b, x)
