"""ember.nn against straightforward NumPy formulas (float64), eagerly and under jit, plus the
extreme inputs where naive formulas overflow or produce NaN."""
from __future__ import annotations

import math

import numpy as np
import pytest
from util import assert_allclose, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember import nn

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# name, ember function, float64 reference (on moderate inputs, where the naive formulas are exact)
ACTIVATIONS = [
    ("relu", nn.relu, lambda x: np.maximum(x, 0)),
    ("relu6", nn.relu6, lambda x: np.minimum(np.maximum(x, 0), 6)),
    ("sigmoid", nn.sigmoid, _sigmoid),
    ("log_sigmoid", nn.log_sigmoid, lambda x: np.log(_sigmoid(x))),
    ("softplus", nn.softplus, lambda x: np.log1p(np.exp(x))),
    ("silu", nn.silu, lambda x: x * _sigmoid(x)),
    ("swish", nn.swish, lambda x: x * _sigmoid(x)),
    ("gelu", nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    ("gelu_exact", lambda x: nn.gelu(x, approximate=False), lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    ("elu", nn.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    ("elu_alpha", lambda x: nn.elu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    ("selu", nn.selu, lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))),
    ("celu", lambda x: nn.celu(x, 2.0), lambda x: np.maximum(x, 0) + 2.0 * np.expm1(np.minimum(x, 0) / 2.0)),
    ("leaky_relu", nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    ("hard_tanh", nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    ("hard_sigmoid", nn.hard_sigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    ("hard_swish", nn.hard_swish, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("softmax", nn.softmax, _softmax),
    ("log_softmax", nn.log_softmax, lambda x: np.log(_softmax(x))),
    ("logsumexp", nn.logsumexp, lambda x: np.log(np.sum(np.exp(x)))),
    ("standardize", nn.standardize,
     lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)),
]


@pytest.mark.parametrize("name,fn,reference", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_matches_numpy_float32(rng, name, fn, reference):
    x = (rng.normal(size=(3, 8)) * 4).astype(np.float32)
    x[0, :4] = [0.0, -1.0, 1.0, 3.0]  # kinks of the piecewise functions
    expected = reference(x.astype(np.float64)).astype(np.float32)
    check_eager_and_jit(fn, x, expected=expected, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name,fn,reference", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_matches_numpy_float64(x64, rng, name, fn, reference):
    x = rng.normal(size=(2, 5)) * 4
    check_eager_and_jit(fn, x, expected=reference(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,fn,reference", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_half_precision_stays_half(rng, name, fn, reference):
    x = rng.normal(size=(4,)).astype(np.float16)
    out = check_eager_and_jit(fn, x)
    assert out.dtype == np.float16
    assert_allclose(out, reference(x.astype(np.float64)).astype(np.float16), rtol=1e-2, atol=1e-2)


def test_integer_inputs():
    ints = np.array([-3, 0, 2, 8], np.int32)
    check_eager_and_jit(nn.relu, ints, expected=np.array([0, 0, 2, 8], np.int32))
    check_eager_and_jit(nn.hard_tanh, ints, expected=np.array([-1, 0, 1, 1], np.int32))
    check_eager_and_jit(nn.relu6, ints, expected=np.array([0, 0, 2, 6], np.float32))
    check_eager_and_jit(nn.sigmoid, ints, expected=_sigmoid(ints.astype(np.float64)).astype(np.float32))
    check_eager_and_jit(nn.softmax, ints, expected=_softmax(ints.astype(np.float64)).astype(np.float32))


def test_extreme_inputs_stay_finite():
    x = np.array([-1e4, -100.0, 0.0, 100.0, 1e4], np.float32)
    check_eager_and_jit(nn.softplus, x, expected=np.array([0.0, 3.7200760e-44, np.log(2), 100.0, 1e4], np.float32),
                        rtol=1e-6, atol=0)
    check_eager_and_jit(nn.log_sigmoid, x, expected=np.array([-1e4, -100.0, -np.log(2), 0.0, 0.0], np.float32),
                        rtol=1e-6, atol=1e-30)
    check_eager_and_jit(nn.sigmoid, x, expected=np.array([0.0, 3.7200760e-44, 0.5, 1.0, 1.0], np.float32),
                        rtol=1e-6, atol=0)
    check_eager_and_jit(nn.silu, x, expected=np.array([-0.0, -3.72e-42, 0.0, 100.0, 1e4], np.float32),
                        rtol=1e-6, atol=1e-43)  # sigmoid(-100) is subnormal in float32
    check_eager_and_jit(nn.elu, x, expected=np.array([-1.0, -1.0, 0.0, 100.0, 1e4], np.float32))
    check_eager_and_jit(nn.gelu, x, expected=np.array([-0.0, -0.0, 0.0, 100.0, 1e4], np.float32))
    check_eager_and_jit(lambda v: nn.gelu(v, approximate=False), x,
                        expected=np.array([-0.0, -0.0, 0.0, 100.0, 1e4], np.float32))
    check_eager_and_jit(nn.softmax, x, expected=np.array([0.0, 0.0, 0.0, 0.0, 1.0], np.float32))
    check_eager_and_jit(nn.log_softmax, x, expected=np.array([-2e4, -1.01e4, -1e4, -9.9e3, 0.0], np.float32))
    check_eager_and_jit(nn.logsumexp, x, expected=np.float32(1e4))
    check_eager_and_jit(nn.logsumexp, -x, expected=np.float32(1e4))


def test_infinities():
    rows = np.array([[-np.inf, -np.inf, -np.inf], [np.inf, 1.0, 0.0], [-np.inf, 0.0, 0.0]], np.float32)
    check_eager_and_jit(lambda v: nn.logsumexp(v, axis=1), rows,
                        expected=np.array([-np.inf, np.inf, np.log(2)], np.float32))
    check_eager_and_jit(lambda v: nn.softmax(v[2]), rows, expected=np.array([0.0, 0.5, 0.5], np.float32))
    check_eager_and_jit(lambda v: nn.log_softmax(v[2]), rows,
                        expected=np.array([-np.inf, -np.log(2), -np.log(2)], np.float32))
    check_eager_and_jit(nn.softplus, np.array([-np.inf, np.inf], np.float32),
                        expected=np.array([0.0, np.inf], np.float32))
    check_eager_and_jit(nn.log_sigmoid, np.array([-np.inf, np.inf], np.float32),
                        expected=np.array([-np.inf, 0.0], np.float32))
    check_eager_and_jit(nn.relu, np.array([-np.inf, np.nan], np.float32), expected=np.array([0.0, np.nan], np.float32))


def test_softmax_axes_and_where(rng):
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    for axis in (0, 1, (0, 2), None):
        check_eager_and_jit(lambda v: nn.softmax(v, axis=axis), x,
                            expected=_softmax(x.astype(np.float64), axis=axis).astype(np.float32), rtol=1e-6)
        check_eager_and_jit(lambda v: nn.log_softmax(v, axis=axis), x,
                            expected=np.log(_softmax(x.astype(np.float64), axis=axis)).astype(np.float32),
                            rtol=1e-5, atol=1e-6)
    mask = np.array([True, False, True])
    v = np.array([1.0, 2.0, 3.0], np.float32)
    masked = _softmax(np.array([1.0, 3.0]))
    check_eager_and_jit(lambda a: nn.softmax(a, where=mask), v,
                        expected=np.array([masked[0], 0.0, masked[1]], np.float32))
    check_eager_and_jit(lambda a: nn.log_softmax(a, where=mask), v,
                        expected=np.array([np.log(masked[0]), -np.inf, np.log(masked[1])], np.float32), rtol=1e-6)


def test_logsumexp_options(rng):
    a = rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=(3, 4)).astype(np.float32)
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    for axis in (None, 0, -1, (0, 1)):
        for keepdims in (False, True):
            total = np.sum(wide_b * np.exp(wide_a), axis=axis, keepdims=keepdims)
            out, sign = check_eager_and_jit(
                lambda x, y: nn.logsumexp(x, axis=axis, b=y, keepdims=keepdims, return_sign=True), a, b,
                expected=(np.log(np.abs(total)).astype(np.float32), np.sign(total).astype(np.float32)), rtol=1e-5)
            check_eager_and_jit(lambda x, y: nn.logsumexp(x, axis=axis, b=y, keepdims=keepdims), a, b,
                                expected=np.where(total < 0, np.nan, np.log(np.abs(total))).astype(np.float32),
                                rtol=1e-5)
    # b == 0 removes a term even where a is +inf; a where mask removes terms too.
    check_eager_and_jit(lambda x: nn.logsumexp(x, b=np.array([0.0, 1.0, 1.0], np.float32)),
                        np.array([np.inf, 0.0, 0.0], np.float32), expected=np.float32(np.log(2)))
    check_eager_and_jit(lambda x: nn.logsumexp(x, axis=1, where=np.array([True, True, False, False])), a,
                        expected=np.log(np.exp(wide_a[:, :2]).sum(1)).astype(np.float32), rtol=1e-6)
    assert nn.logsumexp(np.array([1, 2])).dtype == np.float32
    assert nn.logsumexp(np.ones(3, np.float16)).dtype == np.float16


def test_logsumexp_is_also_in_ember_nn_namespace():
    assert "logsumexp" in nn.__all__ and nn.logsumexp is ember.nn.functions.logsumexp


def test_standardize_options(rng):
    x = (rng.normal(size=(3, 5)) * 2 + 7).astype(np.float32)
    wide = x.astype(np.float64)
    for algorithm in ("fast", "stable"):
        check_eager_and_jit(lambda v: nn.standardize(v, axis=0, algorithm=algorithm), x,
                            expected=((wide - wide.mean(0)) / np.sqrt(wide.var(0) + 1e-5)).astype(np.float32),
                            rtol=1e-4, atol=1e-4)
    check_eager_and_jit(lambda v: nn.standardize(v, mean=1.0, variance=4.0, epsilon=0.0), x,
                        expected=((wide - 1.0) / 2.0).astype(np.float32))
    with pytest.raises(ValueError, match="Unknown algorithm 'exact'"):
        nn.standardize(x, algorithm="exact")


def test_one_hot():
    labels = np.array([[0, 2], [5, -1]], np.int32)
    expected = (labels[..., None] == np.arange(3)).astype(np.float32)
    check_eager_and_jit(lambda v: nn.one_hot(v, 3), labels, expected=expected)
    check_eager_and_jit(lambda v: nn.one_hot(v, 3, axis=0), labels, expected=np.moveaxis(expected, -1, 0))
    check_eager_and_jit(lambda v: nn.one_hot(v, 3, dtype=jnp.int8, axis=1), labels,
                        expected=np.moveaxis(expected, -1, 1).astype(np.int8))
    check_eager_and_jit(lambda v: nn.one_hot(v, 4), np.array([1.0, 1.5, 3.0], np.float32),
                        expected=np.array([[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]], np.float32))
    assert nn.one_hot(2, 3).shape == (3,)
    with pytest.raises(ValueError, match="axis 3 is out of bounds for an array of dimension 3"):
        nn.one_hot(labels, 3, axis=3)
    with pytest.raises(ember.errors.TracerIntegerConversionError):
        ember.jit(nn.one_hot)(labels, 3)
