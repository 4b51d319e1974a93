"""Library functions whose naive derivative misbehaves, with custom rules.

``ember.numpy`` and ``ember.nn`` call these where the derivative of the formula
they compute is not the one users want:

- ``euclidean_norm``: ``sqrt(sum(|x|**2))`` has derivative ``x / |x|``, which the
  chain rule evaluates as ``0 * inf = NaN`` at ``x = 0``; the rule gives 0 there
  (a subgradient), so ``grad(jnp.linalg.norm)(zeros)`` is finite.
- ``logaddexp`` (and so ``softplus``): the chain rule through its stable formula
  ``max(a, b) + log1p(exp(-|a - b|))`` gives 0 instead of 1/2 at ``a == b`` (where
  ``|.|``'s derivative is 1, as in JAX); the rule is ``exp(a - out)``, ``exp(b - out)``.
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.lax.base import aval
from ember.transforms.custom import custom_jvp


def _sum(x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    total = lax.reduce_sum(x, axes)
    return lax.expand_dims(total, axes) if keepdims else total


def _real_inner(x: Any, t: Any) -> Any:
    """``re(conj(x) * t)`` elementwise: ``x * t`` for real values, no complex product for complex ones."""
    if dtypes.is_complex(aval(x).dtype):
        return lax.add(lax.mul(lax.real(x), lax.real(t)), lax.mul(lax.imag(x), lax.imag(t)))
    return lax.mul(x, t)


@functools.partial(custom_jvp, nondiff_argnums=(1, 2))
def euclidean_norm(x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    """``sqrt(sum(|x|**2))`` over ``axes`` (real for complex ``x``); its derivative is 0 where the norm is 0."""
    return lax.sqrt(_sum(_real_inner(x, x), axes, keepdims))


@euclidean_norm.defjvp
def _euclidean_norm_jvp(axes: tuple[int, ...], keepdims: bool, primals: tuple, tangents: tuple) -> tuple:
    (x,), (t,) = primals, tangents
    norm = euclidean_norm(x, axes, keepdims)
    zero = lax.convert_element_type(0, aval(norm).dtype)
    at_zero = lax.eq(norm, zero)
    safe_norm = lax.select(at_zero, lax.convert_element_type(1, aval(norm).dtype), norm)
    return norm, lax.select(at_zero, zero, lax.div(_sum(_real_inner(x, t), axes, keepdims), safe_norm))


@custom_jvp
def logaddexp(x1: Any, x2: Any) -> Any:
    """``log(exp(x1) + exp(x2))`` of floating arrays of one dtype and shape, without overflow."""
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    # delta is NaN when both are infinite with one sign, or when an input is NaN: then x1 + x2 is
    # the answer (that infinity, or NaN). In JAX's order, so programs print as JAX's do.
    delta_is_nan = lax.ne(delta, delta)
    total = lax.add(x1, x2)
    return lax.select(delta_is_nan, total, lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta))))))


def _finite_at_plus_inf(x: Any) -> Any:
    """``x`` with +inf replaced by 0, so ``exp(x - out)`` is 1, not NaN, where both are +inf (as JAX)."""
    dtype = aval(x).dtype
    return lax.select(lax.eq(x, lax.convert_element_type(np.inf, dtype)), lax.convert_element_type(0, dtype), x)


@logaddexp.defjvp
def _logaddexp_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x1, x2), (t1, t2) = primals, tangents
    out = logaddexp(x1, x2)
    share = [lax.exp(lax.sub(_finite_at_plus_inf(x), _finite_at_plus_inf(out))) for x in (x1, x2)]
    return out, lax.add(lax.mul(t1, share[0]), lax.mul(t2, share[1]))

