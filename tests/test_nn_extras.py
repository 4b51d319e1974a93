"""The newer ember.nn activations, dot_product_attention and nn.initializers: against NumPy
formulas (eagerly and under jit), gradients against finite differences, and against JAX (same
values for the same key) when JAX is installed."""
from __future__ import annotations

import numpy as np
import pytest
from util import assert_allclose, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember import nn


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.log1p(np.exp(x))


# name, ember function, float64 NumPy reference
ACTIVATIONS = [
    ("identity", nn.identity, lambda x: x),
    ("tanh", nn.tanh, np.tanh),
    ("mish", nn.mish, lambda x: x * np.tanh(_softplus(x))),
    ("soft_sign", nn.soft_sign, lambda x: x / (np.abs(x) + 1)),
    ("squareplus", nn.squareplus, lambda x: (x + np.sqrt(x * x + 4)) / 2),
    ("squareplus_b", lambda x: nn.squareplus(x, 1.5), lambda x: (x + np.sqrt(x * x + 1.5)) / 2),
    ("sparse_plus", nn.sparse_plus, lambda x: np.where(x <= -1, 0, np.where(x >= 1, x, (x + 1) ** 2 / 4))),
    ("sparse_sigmoid", nn.sparse_sigmoid, lambda x: np.clip(x + 1, 0, 2) / 2),
    ("log1mexp", lambda x: nn.log1mexp(jnp.abs(x) + 0.01), lambda x: np.log(-np.expm1(-(np.abs(x) + 0.01)))),
    ("glu", nn.glu, lambda x: x[:, :4] * _sigmoid(x[:, 4:])),
    ("glu_axis0", lambda x: nn.glu(x, axis=0), lambda x: x[:2] * _sigmoid(x[2:])),
    ("logmeanexp", nn.logmeanexp, lambda x: np.log(np.mean(np.exp(x)))),
    ("logmeanexp_axis", lambda x: nn.logmeanexp(x, axis=1, keepdims=True),
     lambda x: np.log(np.mean(np.exp(x), axis=1, keepdims=True))),
    ("logmeanexp_where", lambda x: nn.logmeanexp(x, axis=1, where=x > 0),
     lambda x: np.log(np.sum(np.exp(x) * (x > 0), axis=1) / np.sum(x > 0, axis=1))),
]
IDS = [a[0] for a in ACTIVATIONS]


def _inputs(rng, dtype):
    x = (rng.normal(size=(4, 8)) * 3).astype(dtype)
    x[0, :6] = [0.0, -1.0, 1.0, 0.5, -0.5, 3.0]  # kinks of sparse_plus / sparse_sigmoid
    x[1:, 0] = [2.0, 1.0, 0.5]  # every row has a positive entry (for where=x > 0)
    return x


@pytest.mark.parametrize("name,fn,reference", ACTIVATIONS, ids=IDS)
def test_matches_numpy_float32(rng, name, fn, reference):
    x = _inputs(rng, np.float32)
    expected = reference(x.astype(np.float64)).astype(np.float32)
    check_eager_and_jit(fn, x, expected=expected, rtol=3e-6, atol=3e-6)


@pytest.mark.parametrize("name,fn,reference", ACTIVATIONS, ids=IDS)
def test_matches_numpy_float64(x64, rng, name, fn, reference):
    x = _inputs(rng, np.float64)
    check_eager_and_jit(fn, x, expected=reference(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,fn,reference", ACTIVATIONS, ids=IDS)
def test_grad_matches_finite_differences(x64, rng, name, fn, reference):
    x = _inputs(rng, np.float64)
    x[0, :6] += 0.25  # keep finite differences off the kinks
    grad = np.asarray(ember.grad(lambda v: jnp.sum(fn(v)))(x))
    eps = 1e-6
    numeric = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        numeric[index] = (reference(x + step).sum() - reference(x - step).sum()) / (2 * eps)
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,fn,reference", ACTIVATIONS, ids=IDS)
def test_matches_jax(rng, name, fn, reference):
    jax_nn = pytest.importorskip("jax").nn
    jax_fn = {"squareplus_b": lambda x: jax_nn.squareplus(x, 1.5), "glu_axis0": lambda x: jax_nn.glu(x, axis=0),
              "log1mexp": lambda x: jax_nn.log1mexp(abs(x) + np.float32(0.01)),
              "logmeanexp_axis": lambda x: jax_nn.logmeanexp(x, axis=1, keepdims=True),
              "logmeanexp_where": lambda x: jax_nn.logmeanexp(x, axis=1, where=x > 0)}.get(name)
    jax_fn = jax_fn or getattr(jax_nn, name)
    x = _inputs(rng, np.float32)
    expected = np.asarray(jax_fn(x))
    assert_allclose(fn(x), expected, rtol=4e-7, atol=4e-7)


def test_log1mexp_is_accurate_at_both_ends():
    x = np.array([1e-7, 1e-3, 0.69, 0.7, 5.0, 40.0], np.float32)
    expected = np.log(-np.expm1(-x.astype(np.float64)))
    check_eager_and_jit(nn.log1mexp, x, expected=expected.astype(np.float32), rtol=2e-6)


def test_integer_and_scalar_inputs():
    check_eager_and_jit(nn.identity, np.int32(3), expected=np.int32(3))
    check_eager_and_jit(nn.soft_sign, np.int32(3), expected=np.float32(0.75))
    check_eager_and_jit(nn.sparse_plus, np.int32(3), expected=np.float32(3))
    check_eager_and_jit(nn.squareplus, np.int32(0), expected=np.float32(1))


def test_glu_rejects_odd_axis():
    with pytest.raises(ValueError, match="odd size 5"):
        nn.glu(np.ones((2, 5), np.float32))


# --- dot_product_attention ----------------------------------------------------------------------
def _attention_reference(q, k, v, bias=None, mask=None, scale=None, is_causal=False):
    """float64 multi-head attention with key/value heads repeated for grouped queries."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    groups = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, groups, axis=2), np.repeat(v, groups, axis=2)
    logits = np.einsum("btnh,bsnh->bnts", q, k) * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    if bias is not None:
        logits = logits + bias
    allowed = np.ones(logits.shape, bool)
    if mask is not None:
        allowed &= mask
    if is_causal:
        allowed &= np.tril(np.ones(logits.shape[-2:], bool))
    logits = np.where(allowed, logits, -0.7 * np.finfo(np.float32).max)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", probs, v)


@pytest.fixture
def qkv(rng):
    q = rng.normal(size=(2, 5, 4, 8)).astype(np.float32)
    k = rng.normal(size=(2, 6, 2, 8)).astype(np.float32)  # 2 key/value heads for 4 query heads
    v = rng.normal(size=(2, 6, 2, 8)).astype(np.float32)
    return q, k, v


def _attention_options(rng):
    bias = rng.normal(size=(1, 4, 5, 6)).astype(np.float32)
    mask = rng.random((2, 1, 5, 6)) > 0.3
    mask[..., 0] = True
    return {"plain": {}, "bias": dict(bias=bias), "mask": dict(mask=mask), "causal": dict(is_causal=True),
            "all": dict(bias=bias, mask=mask, is_causal=True, scale=0.3)}


@pytest.mark.parametrize("option", ["plain", "bias", "mask", "causal", "all"])
def test_attention_matches_numpy(rng, qkv, option):
    options = _attention_options(rng)[option]
    expected = _attention_reference(*qkv, **options).astype(np.float32)
    check_eager_and_jit(lambda q, k, v: nn.dot_product_attention(q, k, v, **options), *qkv,
                        expected=expected, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("option", ["plain", "bias", "mask", "causal", "all"])
def test_attention_matches_jax(rng, qkv, option):
    jax_nn = pytest.importorskip("jax").nn
    options = _attention_options(rng)[option]
    assert_allclose(nn.dot_product_attention(*qkv, **options),
                    np.asarray(jax_nn.dot_product_attention(*qkv, **options)), rtol=2e-6, atol=2e-6)


def test_attention_sequence_lengths_window_and_3d_inputs(rng, qkv):
    q, k, v = qkv
    lengths = dict(query_seq_lengths=np.array([3, 5], np.int32), key_value_seq_lengths=np.array([4, 2], np.int32))
    out = np.asarray(nn.dot_product_attention(q, k, v, **lengths))
    assert np.all(out[0, 3:] == 0)  # padded queries give zeros
    kv_mask = (np.arange(6)[None, :] < lengths["key_value_seq_lengths"][:, None])[:, None, None, :]
    assert_allclose(out[1], _attention_reference(q, k, v, mask=kv_mask)[1].astype(np.float32), rtol=2e-5, atol=2e-5)
    windowed = nn.dot_product_attention(q, k, v, local_window_size=(1, 2))
    window = (np.arange(5)[:, None] <= np.arange(6)[None, :] + 1) & (np.arange(5)[:, None] >= np.arange(6)[None, :] - 2)
    assert_allclose(windowed, _attention_reference(q, k, v, mask=window).astype(np.float32), rtol=2e-5, atol=2e-5)
    unbatched = nn.dot_product_attention(q[0], k[0], v[0])
    assert unbatched.shape == (5, 4, 8)
    assert_allclose(unbatched, _attention_reference(q[:1], k[:1], v[:1])[0].astype(np.float32), rtol=2e-5, atol=2e-5)


def test_attention_errors(qkv):
    q, k, v = qkv
    with pytest.raises(ValueError, match="unsupported implementation 'cudnn'"):
        nn.dot_product_attention(q, k, v, implementation="cudnn")
    with pytest.raises(ValueError, match="multiple of the number of key/value heads"):
        nn.dot_product_attention(q[:, :, :3], k, v)
    with pytest.raises(ValueError, match="value must have shape"):
        nn.dot_product_attention(q, k, v[:, :4])
    with pytest.raises(ValueError, match="mask must have dtype bool"):
        nn.dot_product_attention(q, k, v, mask=np.ones((1, 1, 5, 6), np.float32))


def test_attention_grad_matches_finite_differences(x64, rng):
    q, k, v = (rng.normal(size=(1, 3, 2, 4)) for _ in range(3))
    grad = np.asarray(ember.grad(lambda q: jnp.sum(nn.dot_product_attention(q, k, v, is_causal=True)))(q))
    eps, numeric = 1e-6, np.zeros_like(q)
    for index in np.ndindex(q.shape):
        step = np.zeros_like(q)
        step[index] = eps
        numeric[index] = (_attention_reference(q + step, k, v, is_causal=True).sum()
                          - _attention_reference(q - step, k, v, is_causal=True).sum()) / (2 * eps)
    assert_allclose(grad, numeric, rtol=1e-5, atol=1e-7)


# --- initializers -------------------------------------------------------------------------------
init = nn.initializers
# name, ember initializer, the same built with jax.nn.initializers (a function of that module)
INITIALIZERS = [
    ("constant", init.constant(1.5), lambda j: j.constant(1.5)),
    ("uniform", init.uniform(), lambda j: j.uniform()),
    ("normal", init.normal(0.5), lambda j: j.normal(0.5)),
    ("truncated_normal", init.truncated_normal(2.0, lower=-1.0), lambda j: j.truncated_normal(2.0, lower=-1.0)),
    ("glorot_uniform", init.glorot_uniform(), lambda j: j.glorot_uniform()),
    ("xavier_normal", init.xavier_normal(), lambda j: j.xavier_normal()),
    ("lecun_uniform", init.lecun_uniform(), lambda j: j.lecun_uniform()),
    ("lecun_normal", init.lecun_normal(), lambda j: j.lecun_normal()),
    ("he_uniform", init.he_uniform(), lambda j: j.he_uniform()),
    ("kaiming_normal", init.kaiming_normal(), lambda j: j.kaiming_normal()),
    ("fan_out_normal", init.variance_scaling(0.5, "fan_out", "normal"),
     lambda j: j.variance_scaling(0.5, "fan_out", "normal")),
    ("fan_geo_avg_axes", init.variance_scaling(3.0, "fan_geo_avg", "uniform", in_axis=(0,), out_axis=(-1,)),
     lambda j: j.variance_scaling(3.0, "fan_geo_avg", "uniform", in_axis=(0,), out_axis=(-1,))),
    ("orthogonal", init.orthogonal(2.0), lambda j: j.orthogonal(2.0)),
    ("orthogonal_axis0", init.orthogonal(column_axis=0), lambda j: j.orthogonal(column_axis=0)),
]
INIT_IDS = [i[0] for i in INITIALIZERS]


@pytest.mark.parametrize("shape", [(5, 3), (3, 4, 6)])
@pytest.mark.parametrize("name,ours,_", INITIALIZERS, ids=INIT_IDS)
def test_initializer_matches_jax(name, ours, _, shape):
    jax = pytest.importorskip("jax")
    theirs = np.asarray(_(jax.nn.initializers)(jax.random.PRNGKey(3), shape))
    out = ours(ember.random.PRNGKey(3), shape)
    assert out.dtype == np.float32 and out.shape == shape
    np.testing.assert_allclose(np.asarray(out), theirs, rtol=2e-6, atol=2e-6 * np.abs(theirs).max())


@pytest.mark.parametrize("name,ours,_", INITIALIZERS, ids=INIT_IDS)
def test_initializer_same_eagerly_and_under_jit(name, ours, _):
    key = ember.random.PRNGKey(1)
    assert_allclose(ember.jit(lambda k: ours(k, (4, 6)))(key), ours(key, (4, 6)))


def test_zeros_ones_and_dtypes(x64):
    key = ember.random.PRNGKey(0)
    assert_allclose(init.zeros(key, (2, 3)), np.zeros((2, 3), np.float64))
    assert_allclose(init.ones(key, 4, np.float16), np.ones(4, np.float16))
    assert init.normal()(key, (3,), np.float32).dtype == np.float32
    assert init.glorot_normal(dtype=np.float64)(key, (3, 3)).dtype == np.float64


def test_variance_scaling_statistics():
    """Without JAX: the promised standard deviation sqrt(scale / fan) and bounds."""
    key = ember.random.PRNGKey(0)
    shape = (200, 300)  # fan_in 200, fan_out 300
    for distribution in ("truncated_normal", "normal", "uniform"):
        sample = np.asarray(init.variance_scaling(2.0, "fan_avg", distribution)(key, shape))
        assert abs(sample.std() / np.sqrt(2.0 / 250) - 1) < 0.02, distribution
        assert abs(sample.mean()) < 0.003
    uniform = np.asarray(init.he_uniform()(key, shape))
    assert np.abs(uniform).max() <= np.sqrt(3 * 2.0 / 200)
    truncated = np.asarray(init.lecun_normal()(key, shape))
    assert np.abs(truncated).max() <= 2 * np.sqrt(1 / 200) / .87962566103423978


@pytest.mark.parametrize("shape,column_axis", [((6, 4), -1), ((4, 6), -1), ((2, 3, 4), -1), ((5, 3), 0)])
def test_orthogonal_is_orthogonal(shape, column_axis):
    q = np.moveaxis(np.asarray(init.orthogonal(column_axis=column_axis)(ember.random.PRNGKey(2), shape)),
                    column_axis, -1)
    matrix = q.reshape(-1, q.shape[-1]).astype(np.float64)
    gram = matrix.T @ matrix if matrix.shape[0] >= matrix.shape[1] else matrix @ matrix.T
    np.testing.assert_allclose(gram, np.eye(len(gram)), atol=1e-5)


def test_delta_orthogonal():
    kernel = np.array(init.delta_orthogonal()(ember.random.PRNGKey(0), (3, 3, 4, 5)))
    center = kernel[1, 1]
    np.testing.assert_allclose(center @ center.T, np.eye(4), atol=1e-5)
    kernel[1, 1] = 0
    assert not kernel.any()
    jax = pytest.importorskip("jax")
    theirs = np.asarray(jax.nn.initializers.delta_orthogonal()(jax.random.PRNGKey(0), (3, 3, 4, 5)))
    np.testing.assert_allclose(np.asarray(init.delta_orthogonal()(ember.random.PRNGKey(0), (3, 3, 4, 5))), theirs,
                               atol=1e-6)


def test_initializer_errors():
    key = ember.random.PRNGKey(0)
    with pytest.raises(ValueError, match="at least 2 dimensions or pass in_axis"):
        init.glorot_uniform()(key, (5,))
    with pytest.raises(ValueError, match="invalid mode 'fan'"):
        init.variance_scaling(1.0, "fan", "normal")
    with pytest.raises(ValueError, match="invalid distribution 'cauchy'"):
        init.variance_scaling(1.0, "fan_in", "cauchy")
    with pytest.raises(TypeError, match="floating or complex type, got int32"):
        init.normal()(key, (2,), np.int32)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        init.orthogonal()(key, (3,))
    with pytest.raises(ValueError, match="3D, 4D or 5D"):
        init.delta_orthogonal()(key, (3, 3))
    with pytest.raises(ValueError, match="must be at most fan_out"):
        init.delta_orthogonal()(key, (3, 5, 4))
