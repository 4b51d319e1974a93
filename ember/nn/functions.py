"""Activation functions, softmax and friends, as ``jax.nn`` defines them.

Written with ``ember.numpy`` and ``ember.lax`` only. Formulations are the
numerically stable ones: softmax and logsumexp subtract the maximum before
exponentiating, softplus is ``logaddexp(x, 0)``, and ELU-style functions never
evaluate ``exp`` of a large positive input.
"""
from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import dtypes, lax
from ember.lax.reductions import static_axis
from ember.numpy.core import ensure_array, promote_dtypes_inexact
from ember.numpy.reductions import reduction_axes
from ember.numpy.staging import staged
from ember.runtime.replay import replayed
from ember.transforms.custom import custom_jvp

__all__ = [
    "relu", "relu6", "gelu", "sigmoid", "log_sigmoid", "softplus", "silu", "swish", "elu", "selu",
    "leaky_relu", "celu", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish", "softmax", "log_softmax",
    "logsumexp", "standardize", "one_hot", "glu", "identity", "mish", "soft_sign", "squareplus", "sparse_plus",
    "sparse_sigmoid", "log1mexp", "logmeanexp", "tanh",
]


def _inexact(x: Any) -> Any:
    (x,) = promote_dtypes_inexact(ensure_array(x))
    return x


# --- elementwise activations -----------------------------------------------------------------
# As JAX defines them, so that traced programs show what JAX's do: most functions are staged as
# named sub-programs (``jit[name=softplus]``, ``ember.numpy.staging``), relu and relu6 as custom_jvp
# functions of one (their derivative is 0 at the kinks).
@custom_jvp
@staged("relu")
def relu(x: Any) -> Any:
    """``max(x, 0)``; its derivative at 0 is 0, as in JAX."""
    return jnp.maximum(x, 0)


relu.defjvps(lambda g, ans, x: lax.select(jnp.greater(x, 0), g, jnp.zeros_like(g)))


@custom_jvp
@staged("relu6")
def relu6(x: Any) -> Any:
    """``min(max(x, 0), 6)``; its derivative is 0 at 0 and 6, as in JAX."""
    return jnp.minimum(jnp.maximum(x, 0), 6.0)


relu6.defjvps(lambda g, ans, x: lax.select(jnp.logical_and(jnp.greater(x, 0), jnp.less(x, 6.0)), g,
                                           jnp.zeros_like(g)))


@replayed(exact=False)  # (JAX jits it inline)
def sigmoid(x: Any) -> Any:
    """``1 / (1 + exp(-x))``."""
    return lax.logistic(_inexact(x))


@staged("softplus")
def softplus(x: Any) -> Any:
    """``log(1 + exp(x))``, computed as ``logaddexp(x, 0)`` so large ``x`` does not overflow."""
    return jnp.logaddexp(x, 0)


@staged("log_sigmoid")
def log_sigmoid(x: Any) -> Any:
    """``log(sigmoid(x)) = -softplus(-x)``."""
    return jnp.negative(softplus(jnp.negative(x)))


@staged("silu")
def silu(x: Any) -> Any:
    """``x * sigmoid(x)`` (also known as swish)."""
    x = _inexact(x)
    return jnp.multiply(x, sigmoid(x))


swish = silu


def gelu(x: Any, approximate: bool = True) -> Any:
    """Gaussian error linear unit: ``x * Phi(x)``; ``approximate`` uses the tanh formula."""
    x = _inexact(x)
    if approximate:
        inner = jnp.multiply(math.sqrt(2 / math.pi), jnp.add(x, jnp.multiply(0.044715, lax.integer_pow(x, 3))))
        return jnp.multiply(x, jnp.multiply(0.5, jnp.add(1.0, jnp.tanh(inner))))
    return jnp.array(jnp.multiply(jnp.multiply(0.5, x), lax.erfc(jnp.multiply(jnp.negative(x), math.sqrt(0.5)))),
                     dtype=x.dtype)  # (a copy at the end, as JAX's)


@staged("elu")
def elu(x: Any, alpha: Any = 1.0) -> Any:
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    x = ensure_array(x)
    positive = jnp.greater(x, 0)
    # exp of a large positive x would overflow (and poison grads). (x > 0 again: JAX's equations.)
    safe_x = jnp.where(jnp.greater(x, 0), 0.0, x)
    return jnp.where(positive, x, jnp.multiply(alpha, jnp.expm1(safe_x)))


@staged("selu")
def selu(x: Any) -> Any:
    """Scaled ELU with the self-normalizing constants."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return jnp.multiply(scale, elu(x, alpha))


@staged("celu")
def celu(x: Any, alpha: Any = 1.0) -> Any:
    """``max(x, 0) + alpha * (exp(min(x, 0) / alpha) - 1)``."""
    return jnp.add(jnp.maximum(x, 0.0), jnp.multiply(alpha, jnp.expm1(jnp.divide(jnp.minimum(x, 0.0), alpha))))


@staged("leaky_relu")
def leaky_relu(x: Any, negative_slope: Any = 1e-2) -> Any:
    """``x`` for ``x >= 0``, else ``negative_slope * x``."""
    x = ensure_array(x)
    return jnp.where(jnp.greater_equal(x, 0), x, jnp.multiply(negative_slope, x))


@staged("hard_tanh")
def hard_tanh(x: Any) -> Any:
    """``x`` clipped to ``[-1, 1]``."""
    x = ensure_array(x)
    return jnp.where(jnp.greater(x, 1), 1, jnp.where(jnp.less(x, -1), -1, x))


@staged("hard_sigmoid")
def hard_sigmoid(x: Any) -> Any:
    """``relu6(x + 3) / 6``: a piecewise-linear sigmoid."""
    return jnp.divide(relu6(jnp.add(x, 3.0)), 6.0)


@staged("hard_silu")
def hard_silu(x: Any) -> Any:
    """``x * hard_sigmoid(x)``."""
    return jnp.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


@staged("identity")
def identity(x: Any) -> Any:
    """``x`` itself (as an array)."""
    return ensure_array(x)


tanh = jnp.tanh


@staged("mish")
def mish(x: Any) -> Any:
    """``x * tanh(softplus(x))``."""
    x = _inexact(x)
    return jnp.multiply(x, jnp.tanh(softplus(x)))


@staged("soft_sign")
def soft_sign(x: Any) -> Any:
    """``x / (|x| + 1)``."""
    x = ensure_array(x)
    return jnp.divide(x, jnp.add(jnp.abs(x), 1))


@staged("squareplus")
def squareplus(x: Any, b: Any = 4) -> Any:
    """``(x + sqrt(x**2 + b)) / 2``: a smooth relu without exp."""
    x = ensure_array(x)
    return jnp.divide(jnp.add(x, jnp.sqrt(jnp.add(jnp.square(x), b))), 2)


@staged("sparse_plus")
def sparse_plus(x: Any) -> Any:
    """0 for ``x <= -1``, ``x`` for ``x >= 1``, ``(x + 1)**2 / 4`` between."""
    x = ensure_array(x)
    below, above = jnp.less_equal(x, -1.0), jnp.greater_equal(x, 1.0)
    between = jnp.divide(jnp.square(jnp.add(x, 1.0)), 4)
    return jnp.where(below, 0.0, jnp.where(above, x, between))


@staged("sparse_sigmoid")
def sparse_sigmoid(x: Any) -> Any:
    """``clip(x + 1, 0, 2) / 2``: the derivative of ``sparse_plus``."""
    return jnp.multiply(0.5, jnp.clip(jnp.add(x, 1.0), 0.0, 2.0))


def log1mexp(x: Any) -> Any:
    """``log(1 - exp(-x))`` for ``x > 0``: ``log(-expm1(-x))`` below ``log 2``, ``log1p(-exp(-x))``
    above, each accurate where the other cancels."""
    x = _inexact(x)
    small = jnp.less(x, math.log(2.0))
    # Each branch sees only inputs in its own range, so the branch not taken has finite gradients.
    below = jnp.log(jnp.negative(jnp.expm1(jnp.negative(jnp.where(small, x, 1.0)))))
    above = jnp.log1p(jnp.negative(jnp.exp(jnp.negative(jnp.where(small, 1.0, x)))))
    return jnp.where(small, below, above)


@staged("glu", ("axis",))
def glu(x: Any, axis: int = -1) -> Any:
    """Gated linear unit: the first half of ``axis`` times the sigmoid of the second half."""
    x = ensure_array(x)
    axis = static_axis(axis, x.ndim)
    if x.shape[axis] % 2:
        raise ValueError(f"glu: axis {axis} of the input of shape {x.shape} has odd size {x.shape[axis]}; "
                         "it must split into two equal halves.")
    first, second = jnp.split(x, 2, axis)
    return jnp.multiply(first, sigmoid(second))


# --- normalizations over axes ------------------------------------------------------------------
def _shifted_by_max(x: Any, axis: Any, where: Any) -> Any:
    """``x - max(x)`` over ``axis`` (kept), with masked-out elements at -inf."""
    x_max = lax.stop_gradient(jnp.max(x, axis, keepdims=True, where=where, initial=-np.inf))  # results ignore it
    if where is not None:
        x = jnp.where(where, x, -np.inf)
    return jnp.subtract(x, x_max)


@replayed(exact=False)  # (JAX's is not jitted: its eager calls replay, its traces show the operations)
def softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` over ``axis``; masked-out elements get 0."""
    x = _inexact(x)
    unnormalized = jnp.exp(_shifted_by_max(x, axis, where))
    result = jnp.divide(unnormalized, jnp.sum(unnormalized, axis, keepdims=True, where=where))
    return result if where is None else jnp.where(where, result, 0)


@staged("log_softmax", ("axis",))
def log_softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """``x - logsumexp(x)`` over ``axis``; masked-out elements get -inf."""
    x = _inexact(x)
    shifted = _shifted_by_max(x, axis, where)
    result = jnp.subtract(shifted, jnp.log(jnp.sum(jnp.exp(shifted), axis, keepdims=True, where=where)))
    return result if where is None else jnp.where(where, result, -np.inf)


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False,
              where: Any = None) -> Any:
    """``log(sum(b * exp(a)))`` over ``axis`` without overflow. Rows of -inf give -inf, a +inf
    gives +inf. With ``return_sign``, returns ``(log(abs(s)), sign(s))``; otherwise a negative
    sum gives NaN."""
    if b is None:
        a = _inexact(a)
    else:
        a, b = promote_dtypes_inexact(ensure_array(a), ensure_array(b))
        a = jnp.where(jnp.not_equal(b, 0), a, -np.inf)  # b == 0 terms drop out even where a is inf
    axes = reduction_axes(axis, a.ndim)
    complex_input = dtypes.is_complex(a.dtype)
    # Complex terms shift by the largest real part (as JAX); their sum's log keeps its phase.
    a_max = jnp.max(jnp.real(a), axes, keepdims=keepdims, where=where, initial=-np.inf)
    # Shifting by a non-finite max would give inf - inf; shift by 0 there instead.
    a_max = lax.stop_gradient(lax.select(jnp.isfinite(a_max), a_max, lax.full_like(a_max, 0)))  # (not in the result)
    shift = a_max if keepdims else lax.expand_dims(a_max, axes)
    exp_a = jnp.exp(jnp.subtract(a, shift.astype(a.dtype)))
    if b is not None:
        exp_a = jnp.multiply(exp_a, b)
    total = jnp.sum(exp_a, axes, keepdims=keepdims, where=where)
    sign = lax.sign(total)
    magnitude = total if complex_input and not return_sign else jnp.abs(total)
    out = lax.add(jnp.log(magnitude), a_max.astype(magnitude.dtype))
    if return_sign:
        return out, sign
    if b is not None and not complex_input:
        out = jnp.where(jnp.less(sign, 0), np.nan, out)
    return out


@staged("logmeanexp", ("axis", "keepdims"))
def logmeanexp(x: Any, axis: Any = None, where: Any = None, keepdims: bool = False) -> Any:
    """``log(mean(exp(x)))`` over ``axis`` (of the elements ``where`` selects), without overflow."""
    x = _inexact(x)
    lse = logsumexp(x, axis, keepdims=keepdims, where=where)
    if where is None:
        count = math.prod(x.shape[a] for a in reduction_axes(axis, x.ndim))
    else:
        count = jnp.sum(jnp.broadcast_to(where, x.shape), axis, dtype=lse.dtype, keepdims=keepdims)
    return jnp.subtract(lse, jnp.log(jnp.asarray(count, lse.dtype)))


@staged("standardize", ("axis", "algorithm"))
def standardize(x: Any, axis: Any = -1, mean: Any = None, variance: Any = None, epsilon: Any = 1e-5,
                where: Any = None, *, algorithm: str = "fast") -> Any:
    """``(x - mean) / sqrt(variance + epsilon)`` over ``axis``. ``algorithm='fast'`` computes the
    variance as ``mean(x**2) - mean(x)**2`` (clipped at 0); ``'stable'`` as ``mean((x - mean)**2)``."""
    x = _inexact(x)
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True, where=where)
        elif algorithm == "fast":
            variance = jnp.clip(jnp.subtract(jnp.mean(jnp.square(x), axis, keepdims=True, where=where),
                                             jnp.square(mean)), 0)  # (a complex one refuses, as JAX's)
        else:
            raise ValueError(f"Unknown algorithm {algorithm!r}. Expected 'fast' or 'stable'.")
    return jnp.multiply(jnp.subtract(x, mean), lax.rsqrt(jnp.add(variance, epsilon)))


@staged("_one_hot", ("num_classes", "dtype", "axis"))
def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Any:
    """A new ``axis`` of length ``num_classes`` that is 1 where it equals ``x`` (all 0 for
    values outside ``[0, num_classes)``)."""
    x = ensure_array(x)
    num_classes = operator.index(num_classes)
    dtype = dtypes.canonicalize_dtype(dtype) if dtype is not None else dtypes.default_float_dtype()
    axis = static_axis(axis, x.ndim + 1)
    kept = tuple(d for d in range(x.ndim + 1) if d != axis)
    # x with a size-1 axis, compared with the classes along it (size 1 elsewhere): the comparison
    # broadcasts both, as JAX's does
    values = lax.broadcast_in_dim(x, x.shape[:axis] + (1,) + x.shape[axis:], kept)
    classes = lax.broadcasted_iota(x.dtype, (1,) * axis + (num_classes,) + (1,) * (x.ndim - axis), axis)
    return lax.convert_element_type(lax.eq(values, classes), dtype)
