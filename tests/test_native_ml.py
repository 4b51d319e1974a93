"""The native ML path of the CPU backend against the reference interpreter: convolutions (as
patches and one product), windowed reductions, their gradients and batched forms, and that
the programs of training steps compile with no reference fallback (from the compile report)."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, note, settings, strategies as st
from test_cpu_backend import check_backends_agree, compile_cpu
from util import check_gradient

import ember
import ember.numpy as jnp
from ember import lax, nn

BF16 = np.dtype(ml_dtypes.bfloat16)
# (float64 operands are float32 with x64 off, as here)
TOL = {np.dtype(np.float32): dict(rtol=2e-5, atol=2e-5), np.dtype(np.float64): dict(rtol=2e-5, atol=2e-5),
       np.dtype(np.float16): dict(rtol=2e-3, atol=2e-3), BF16: dict(rtol=1e-2, atol=1e-2)}


def _no_fallbacks(f, *args) -> None:
    report = compile_cpu(f, *args).report
    assert not report.fallbacks, report.fallbacks


@st.composite
def conv_cases(draw):
    k = draw(st.integers(1, 3))  # spatial dimensions
    groups = draw(st.integers(1, 3))
    kind = draw(st.sampled_from(["feature", "batch"])) if groups > 1 else "feature"
    fg, bg = (groups, 1) if kind == "feature" else (1, groups)
    batch = bg * draw(st.integers(1, 2))
    cin = fg * draw(st.integers(1, 3))
    cout = groups * draw(st.integers(1, 3))
    window = [draw(st.integers(1, 3)) for _ in range(k)]
    rhs_dilation = [draw(st.integers(1, 2)) for _ in range(k)]
    lhs_dilation = [draw(st.integers(1, 2)) for _ in range(k)]
    strides = [draw(st.integers(1, 3)) for _ in range(k)]
    spatial = [draw(st.integers(1, 6)) for _ in range(k)]
    padding = [(draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(k)]
    # every output dimension non-negative: the dilated, padded input must not be negative
    for d in range(k):
        size = (spatial[d] - 1) * lhs_dilation[d] + 1 + sum(padding[d])
        if size < 0:
            padding[d] = (0, 0)
    lhs_perm = draw(st.permutations(range(k + 2)))
    rhs_perm = draw(st.permutations(range(k + 2)))
    out_perm = draw(st.permutations(range(k + 2)))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.float16, BF16]))
    lhs_logical = (batch, cin, *spatial)
    rhs_logical = (cout, cin // fg, *window)
    lhs_shape = [0] * (k + 2)
    rhs_shape = [0] * (k + 2)
    for i, p in enumerate(lhs_perm):
        lhs_shape[p] = lhs_logical[i]
    for i, p in enumerate(rhs_perm):
        rhs_shape[p] = rhs_logical[i]
    numbers = lax.ConvDimensionNumbers(tuple(lhs_perm), tuple(rhs_perm), tuple(out_perm))
    return dict(lhs_shape=tuple(lhs_shape), rhs_shape=tuple(rhs_shape), dtype=dtype,
                params=dict(window_strides=tuple(strides), padding=tuple(padding), lhs_dilation=tuple(lhs_dilation),
                            rhs_dilation=tuple(rhs_dilation), dimension_numbers=numbers, feature_group_count=fg,
                            batch_group_count=bg))


@settings(max_examples=40, deadline=None)
@given(conv_cases(), st.integers(0, 2 ** 31 - 1))
def test_native_conv_matches_reference(case, seed):
    note(case)
    rng = np.random.default_rng(seed)
    lhs = rng.standard_normal(case["lhs_shape"]).astype(case["dtype"])
    rhs = rng.standard_normal(case["rhs_shape"]).astype(case["dtype"])

    def f(x, w):
        return lax.conv_general_dilated(x, w, **case["params"])
    check_backends_agree(f, lhs, rhs, **TOL[np.dtype(case["dtype"])])
    _no_fallbacks(f, lhs, rhs)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 3), st.sampled_from(["sum", "max", "min"]),
       st.sampled_from([np.float32, np.float64, np.int32, np.int8, BF16, np.float16]), st.data())
def test_native_reduce_window_matches_reference(rank, monoid, dtype, data):
    shape = tuple(data.draw(st.integers(1, 6)) for _ in range(rank))
    window = tuple(data.draw(st.integers(1, 3)) for _ in range(rank))
    strides = tuple(data.draw(st.integers(1, 3)) for _ in range(rank))
    base = tuple(data.draw(st.integers(1, 2)) for _ in range(rank))
    dilation = tuple(data.draw(st.integers(1, 2)) for _ in range(rank))
    padding = tuple((data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))) for _ in range(rank))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 31 - 1)))
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    op, init = {"sum": (lax.add, 0), "max": (lax.max, -np.inf), "min": (lax.min, np.inf)}[monoid]
    if np.dtype(dtype).kind == "i":
        init = {"sum": 0, "max": np.iinfo(dtype).min, "min": np.iinfo(dtype).max}[monoid]
    init = np.asarray(init, dtype)

    def f(x):
        return lax.reduce_window(x, init, op, window, strides, padding, base, dilation)
    check_backends_agree(f, x, exact=monoid != "sum", **TOL.get(np.dtype(dtype), {}))
    _no_fallbacks(f, x)


@pytest.mark.parametrize("dtype,preferred", [(np.int32, None), (np.int8, np.int32), (np.uint8, None),
                                             (np.bool_, None)])
def test_integer_and_boolean_convolutions_are_native_and_exact(rng, dtype, preferred):
    x = rng.integers(-3, 4, (2, 3, 6, 5)).astype(dtype)
    w = rng.integers(-3, 4, (4, 3, 3, 2)).astype(dtype)

    def f(x, w):
        return lax.conv_general_dilated(x, w, (1, 2), "SAME", rhs_dilation=(2, 1), preferred_element_type=preferred)
    check_backends_agree(f, x, w)
    _no_fallbacks(f, x, w)


def test_the_product_of_a_large_convolution_is_the_blocked_one(rng):
    x = rng.standard_normal((4, 16, 16, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 16)).astype(np.float32)

    def f(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    exe = compile_cpu(f, x, w)
    assert exe.report.contractions == 1 and not exe.report.fallbacks
    check_backends_agree(f, x, w, **TOL[np.dtype(np.float32)])


# --- gradients and vmap, natively ---------------------------------------------------------------------------
def _cnn(params, x):
    w1, w2, w3 = params
    h = nn.relu(lax.conv_general_dilated(x, w1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = nn.relu(lax.conv_general_dilated(h, w2, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                         feature_group_count=2))
    h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "SAME") / 4
    return jnp.sum(jnp.tanh(h.reshape(h.shape[0], -1) @ w3))


def _cnn_inputs(rng, dtype=np.float32):
    params = (rng.standard_normal((3, 3, 2, 4)) * 0.3, rng.standard_normal((3, 3, 2, 6)) * 0.3,
              rng.standard_normal((2 * 2 * 6, 3)) * 0.3)
    return tuple(p.astype(dtype) for p in params), rng.standard_normal((2, 8, 8, 2)).astype(dtype)


def test_cnn_gradient_is_native_and_matches_reference(rng):
    params, x = _cnn_inputs(rng)
    f = ember.grad(_cnn)
    check_backends_agree(f, params, x, rtol=1e-4, atol=1e-5)
    _no_fallbacks(f, params, x)


def test_cnn_gradient_matches_finite_differences(x64, rng):
    params, x = _cnn_inputs(rng, np.float64)
    check_gradient(lambda w1: _cnn((w1, *params[1:]), x), params[0])
    check_gradient(lambda x: _cnn(params, x), x)


def test_per_example_gradients_are_native_and_match_a_loop(rng):
    params, x = _cnn_inputs(rng)
    per_example = ember.jit(ember.vmap(ember.grad(lambda p, x: _cnn(p, x[None])), in_axes=(None, 0)))
    got = per_example(params, x)
    for i in range(x.shape[0]):
        want = ember.jit(ember.grad(_cnn))(params, x[i:i + 1])
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g)[i], np.asarray(w), rtol=1e-4, atol=1e-5)
    _no_fallbacks(ember.vmap(ember.grad(lambda p, x: _cnn(p, x[None])), in_axes=(None, 0)), params, x)


# --- loops that hold products ----------------------------------------------------------------------------
def _lstm_loss(params, xs, target):
    wx, wh, b = params

    def cell(carry, x):
        h, c = carry
        i, f, g, o = jnp.split(x @ wx + h @ wh + b, 4, axis=-1)
        c = nn.sigmoid(f) * c + nn.sigmoid(i) * jnp.tanh(g)
        h = nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h
    zeros = jnp.zeros((xs.shape[1], wh.shape[0]), xs.dtype)
    (h, _), hs = lax.scan(cell, (zeros, zeros), xs)
    return jnp.mean((h - target) ** 2) + jnp.mean(hs)


def _lstm_inputs(rng, hidden=64, batch=8, features=16, steps=5):
    return ((rng.standard_normal((features, 4 * hidden)).astype(np.float32) * 0.2,
             rng.standard_normal((hidden, 4 * hidden)).astype(np.float32) * 0.2, np.zeros(4 * hidden, np.float32)),
            rng.standard_normal((steps, batch, features)).astype(np.float32),
            rng.standard_normal((batch, hidden)).astype(np.float32))


def test_lstm_by_scan_and_its_gradient_call_the_product_natively(rng):
    params, xs, target = _lstm_inputs(rng)
    for f in (_lstm_loss, ember.value_and_grad(_lstm_loss)):
        check_backends_agree(f, params, xs, target, rtol=1e-4, atol=1e-5)
        report = compile_cpu(f, params, xs, target).report
        assert report.loops and not report.fallbacks, report.fallbacks


def test_lstm_gradient_matches_finite_differences(x64, rng):
    params, xs, target = _lstm_inputs(rng, hidden=8, batch=2, features=3, steps=3)
    params = tuple(p.astype(np.float64) for p in params)
    check_gradient(lambda wh: _lstm_loss((params[0], wh, params[2]), xs.astype(np.float64), target), params[1])


def test_products_in_loops_of_every_layout(rng):
    """Transposed operands, batch dimensions and float64 call the product on the buffers as
    they are; a layout it cannot take (a contracted pair out of order) is fused into a kernel."""
    a = rng.standard_normal((4, 48, 64)).astype(np.float32)
    w = rng.standard_normal((64, 64)).astype(np.float32) * 0.1

    def transposed(a, w):
        return lax.fori_loop(0, 3, lambda i, x: jnp.tanh(jnp.einsum("bij,kj->bik", x, w) + x.mean(0)), a)

    def batched(a, w):
        return lax.fori_loop(0, 3, lambda i, x: jnp.tanh(jnp.einsum("bij,bkj->bik", x, x) @ x * 0.01), a)

    def transposed_lhs(a, w):
        return lax.fori_loop(0, 2, lambda i, v: v + jnp.einsum("bij,bik->jk", a, a) * 1e-3, w)

    def out_of_order(a, w):  # contracts (i, j) of a [b, i, j] with (j, i) of a transposed copy
        y = jnp.transpose(a, (0, 2, 1)) * 1.0
        return lax.fori_loop(0, 2, lambda i, v: v + jnp.einsum("bij,cji->bc", a, y + v[0, 0]), jnp.zeros((4, 4)))

    for f in (transposed, batched, transposed_lhs, out_of_order):
        check_backends_agree(f, a, w, rtol=1e-4, atol=1e-4)
        report = compile_cpu(f, a, w).report
        assert report.loops and not report.fallbacks, (f.__name__, report.fallbacks)


def test_products_in_while_and_cond_and_nested_loops(rng):
    x = rng.standard_normal((64, 128)).astype(np.float32) * 0.1
    w = rng.standard_normal((128, 128)).astype(np.float32) * 0.1

    def f(x, w):
        def body(state):
            i, h = state
            h = lax.cond(i % 2 == 0, lambda h: jnp.tanh(h @ w), lambda h: h @ w.T, h)
            h = lax.fori_loop(0, 2, lambda j, h: h + 0.1 * (h @ w), h)
            return i + 1, h
        return lax.while_loop(lambda s: s[0] < 5, body, (0, x))[1]
    check_backends_agree(f, x, w, rtol=1e-4, atol=1e-5)
    report = compile_cpu(f, x, w).report
    assert report.loops == [report.loops[0]] and not report.fallbacks


def test_empty_and_float64_products_in_loops(x64, rng):
    empty = np.zeros((64, 0), np.float64)
    w = np.zeros((0, 600), np.float64)
    x = rng.standard_normal((96, 400))
    v = rng.standard_normal((400, 400)) * 0.05

    def f(empty, w, x, v):
        zeros = lax.fori_loop(0, 2, lambda i, acc: acc + empty @ w, jnp.ones((64, 600)))
        return zeros, lax.fori_loop(0, 2, lambda i, h: jnp.tanh(h @ v), x)
    check_backends_agree(f, empty, w, x, v, rtol=1e-10, atol=1e-12)
    assert not compile_cpu(f, empty, w, x, v).report.fallbacks


# --- program classes of the ML path: nothing falls back ------------------------------------------------
def _gru_loss(params, xs):
    wz, uz, wr, ur, wh, uh = params

    def cell(h, x):
        z = nn.sigmoid(x @ wz + h @ uz)
        r = nn.sigmoid(x @ wr + h @ ur)
        h = (1 - z) * h + z * jnp.tanh(x @ wh + (r * h) @ uh)
        return h, None
    h, _ = lax.scan(cell, jnp.zeros((xs.shape[1], uz.shape[0])), xs)
    return jnp.sum(h ** 2)


def _transformer_loss(params, x):
    wq, wk, wv, wo, w1, w2 = params
    h = nn.standardize(x, axis=-1)
    q, k, v = h @ wq, h @ wk, h @ wv
    attention = nn.softmax(jnp.einsum("bqd,bkd->bqk", q, k) / 8.0, axis=-1)
    x = x + jnp.einsum("bqk,bkd->bqd", attention, v) @ wo
    x = x + nn.gelu(nn.standardize(x, axis=-1) @ w1) @ w2
    return jnp.mean(x ** 2)


def _vae_epoch(params, images, noise):
    def elbo(params, x, eps):
        we, wm, wv, wd, wo = params
        h = nn.relu(x @ we)
        mean, logvar = h @ wm, h @ wv
        logits = nn.relu((mean + jnp.exp(0.5 * logvar) * eps) @ wd) @ wo
        kl = 0.5 * jnp.sum(jnp.exp(logvar) + mean ** 2 - 1.0 - logvar, axis=-1)
        return -jnp.mean(jnp.sum(images[:16] * logits - nn.softplus(logits), axis=-1) - kl)

    def body(i, params):
        grads = ember.grad(elbo)(params, lax.dynamic_slice_in_dim(images, i * 16, 16),
                                 lax.dynamic_slice_in_dim(noise, i * 16, 16))
        return tuple(p - 0.01 * g for p, g in zip(params, grads))
    return lax.fori_loop(0, 3, body, params)


def test_ml_program_classes_compile_with_no_fallback(rng):
    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32) * 0.2
    cnn_params, cnn_x = _cnn_inputs(rng)
    lstm = _lstm_inputs(rng)
    programs = {
        "cnn step": (ember.value_and_grad(_cnn), cnn_params, cnn_x),
        "per-example cnn gradients": (ember.vmap(ember.grad(lambda p, x: _cnn(p, x[None])), in_axes=(None, 0)),
                                      cnn_params, cnn_x),
        "lstm step": (ember.value_and_grad(_lstm_loss), *lstm),
        "gru step": (ember.value_and_grad(_gru_loss), tuple(normal(32, 32) for _ in range(6)), normal(6, 8, 32)),
        "transformer step": (ember.value_and_grad(_transformer_loss),
                             tuple(normal(*s) for s in [(64, 64)] * 4 + [(64, 128), (128, 64)]), normal(2, 32, 64)),
        "vae epoch": (_vae_epoch, tuple(normal(*s) for s in [(64, 48), (48, 8), (48, 8), (8, 48), (48, 64)]),
                      (rng.uniform(size=(48, 64)) < 0.3).astype(np.float32), normal(48, 8)),
        "per-example logistic gradients": (
            ember.vmap(ember.grad(lambda w, x, y: -(y * nn.log_sigmoid(x @ w) + (1 - y) * nn.log_sigmoid(-(x @ w)))),
                       in_axes=(None, 0, 0)), normal(64), normal(32, 64), (rng.uniform(size=32) < 0.5) * 1.0),
    }
    for name, (f, *args) in programs.items():
        report = compile_cpu(f, *args).report
        assert not report.fallbacks, (name, report.fallbacks)
        check_backends_agree(f, *args, rtol=2e-4, atol=2e-5)


# --- linear algebra on LAPACK ------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.sampled_from([(), (3,), (2, 2)]), st.booleans(), st.booleans(),
       st.booleans(), st.booleans(), st.integers(0, 2 ** 31 - 1))
def test_lapack_triangular_solve_matches_reference(m, n, batch, left_side, lower, transpose_a, unit_diagonal, seed):
    rng = np.random.default_rng(seed)
    a = (0.1 * rng.standard_normal(batch + (m, m)) + np.eye(m)).astype(np.float32)  # well conditioned
    b = rng.standard_normal(batch + ((m, n) if left_side else (n, m))).astype(np.float32)

    def f(a, b):
        return lax.linalg.triangular_solve(a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
                                           unit_diagonal=unit_diagonal)
    check_backends_agree(f, a, b, rtol=1e-4, atol=1e-4)
    assert compile_cpu(f, a, b).report.library_calls == ["triangular_solve"]


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.sampled_from([(), (3,)]), st.integers(0, 2 ** 31 - 1))
def test_lapack_lu_matches_reference(m, n, batch, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(batch + (m, n)).astype(np.float32)
    x[..., :, min(3, n - 1)] = 0  # a zero column: a zero pivot, left unscaled
    lu, pivots, permutation = check_backends_agree(lax.linalg.lu, x, rtol=1e-4, atol=1e-4)
    assert compile_cpu(lax.linalg.lu, x).report.library_calls == ["lu"]
    k = min(m, n)
    lower = np.tril(lu, -1)[..., :, :k] + np.eye(m, k)
    upper = np.triu(lu)[..., :k, :]
    np.testing.assert_allclose(lower @ upper, np.take_along_axis(x, permutation[..., None], -2), rtol=1e-4,
                               atol=1e-4)


def test_lapack_cholesky_solve_inv_det_and_their_edge_cases(x64, rng):
    a = rng.standard_normal((2, 32, 32))
    spd = a @ np.swapaxes(a, -1, -2) + 32 * np.eye(32)
    spd[1, 0, 0] = -1.0  # not positive definite: NaN in the lower triangle
    singular = rng.standard_normal((32, 32))
    singular[:, 5] = 0  # an exact zero pivot (with rounding, LAPACK and the reference may differ on near ones)
    b = rng.standard_normal((32, 4))
    cases = [(lambda x: lax.linalg.cholesky(x), spd), (jnp.linalg.solve, spd[0], b), (jnp.linalg.inv, spd[0]),
             (jnp.linalg.det, spd[0]), (jnp.linalg.slogdet, spd[0]), (jnp.linalg.solve, singular, b)]
    for f, *args in cases:
        check_backends_agree(f, *args, rtol=1e-9, atol=1e-9)
        assert compile_cpu(f, *args).report.library_calls, f
    factor = np.asarray(ember.jit(lax.linalg.cholesky)(spd))
    assert np.isnan(factor[1][np.tril_indices(32)]).all() and (factor[1][np.triu_indices(32, 1)] == 0).all()
    np.testing.assert_allclose(factor[0] @ factor[0].T, spd[0], rtol=1e-10)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 36), st.integers(1, 36), st.sampled_from([(), (2,)]), st.booleans(),
       st.integers(0, 2 ** 31 - 1))
def test_lapack_qr_and_svd_match_reference(m, n, batch, full_matrices, seed):
    x = np.random.default_rng(seed).standard_normal(batch + (m, n)).astype(np.float32)
    k = min(m, n)
    q, r = check_backends_agree(lambda x: lax.linalg.qr(x, full_matrices=full_matrices), x, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(q @ r, x, rtol=1e-4, atol=1e-4)
    s = check_backends_agree(lambda x: lax.linalg.svd(x, compute_uv=False), x, rtol=1e-4, atol=1e-4)[0]
    u, s2, vh = (np.asarray(o) for o in ember.jit(lambda x: lax.linalg.svd(x, full_matrices=full_matrices))(x))
    assert u.shape[-2:] == ((m, m) if full_matrices else (m, k))
    assert vh.shape[-2:] == ((n, n) if full_matrices else (k, n))
    np.testing.assert_allclose(s2, s, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose((u[..., :, :k] * s2[..., None, :]) @ vh[..., :k, :], x, rtol=1e-4, atol=1e-4)
    for f in (lambda x: lax.linalg.qr(x, full_matrices=full_matrices), lambda x: lax.linalg.svd(x),
              lambda x: lax.linalg.svd(x, compute_uv=False)):
        assert compile_cpu(f, x).report.library_calls


@pytest.mark.parametrize("lower", [True, False])
def test_lapack_eigh_matches_reference(rng, lower):
    a = rng.standard_normal((3, 24, 24)).astype(np.float32)
    symmetric = a + np.swapaxes(a, -1, -2)
    unread = np.triu(np.ones((24, 24), bool), 1) if lower else np.tril(np.ones((24, 24), bool), -1)
    x = np.where(unread, 100.0, symmetric).astype(np.float32)  # only the triangle asked for is read

    def f(x):
        return lax.linalg.eigh(x, lower=lower, symmetrize_input=False)
    v, w = (np.asarray(o) for o in ember.jit(f)(x))  # (eigenvector signs are LAPACK's choice)
    with ember.config.override(backend="reference"):
        w_reference = np.asarray(ember.jit(f)(x)[1])
    np.testing.assert_allclose(w, w_reference, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(symmetric @ v, v * w[..., None, :], rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(np.swapaxes(v, -1, -2) @ v, np.broadcast_to(np.eye(24), x.shape), atol=1e-5)
    assert compile_cpu(f, x).report.library_calls == ["eigh"]


def test_lapack_is_called_from_generated_code_through_a_table(rng):
    """Each call is a generated function that loops over the batch and calls the routine whose
    address it loads from its table: a program of kernels and LAPACK calls is one native call
    (the dispatcher's plan), its code holds no address, and tiny matrices take the same path."""
    a = rng.standard_normal((50, 3, 3))
    spd = a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)
    b = rng.standard_normal((50, 3, 2))

    def f(spd, b):
        return jnp.linalg.solve(spd, b), jnp.linalg.cholesky(spd) * 2.0, jnp.linalg.eigh(spd)[0]
    exe = compile_cpu(f, spd, b)
    report = exe.report
    assert sorted(set(report.library_calls)) == ["cholesky", "eigh", "lu", "triangular_solve"]
    assert not report.fallbacks and exe.program.plan is not None
    source = "\n".join(str(m.source) for m in exe.program.modules)
    assert "inttoptr" not in source and re.search(r"load i8\*, i8\*\* %", source)
    check_backends_agree(f, spd, b, rtol=1e-5, atol=1e-5)
    empty = np.zeros((0, 4, 4))
    assert ember.jit(jnp.linalg.cholesky)(empty).shape == (0, 4, 4)  # (an empty batch: no call)


def test_decompositions_inside_loops_are_native(rng):
    """A loop whose body solves, factors or decomposes is still one native function: its LAPACK
    calls are functions of its module, their routines at the end of its function table."""
    a = rng.standard_normal((3, 12, 12)).astype(np.float32)
    spd = a @ np.swapaxes(a, -1, -2) + 12 * np.eye(12, dtype=np.float32)
    v = rng.standard_normal((3, 12)).astype(np.float32)

    def newton(spd, v):  # a solve per iteration, with a product next to it
        def step(i, x):
            return x - 0.5 * jnp.linalg.solve(spd, spd @ x[..., None] - v[..., None])[..., 0]
        return lax.fori_loop(0, 4, step, v)

    def filtered(spd, v):  # a scan of Cholesky factors and triangular solves, and a cond of eigh
        def step(carry, m):
            factor = jnp.linalg.cholesky(m + jnp.eye(12) * jnp.sum(carry ** 2) * 1e-3)
            x = lax.linalg.triangular_solve(factor, carry[:, None], left_side=True, lower=True)[:, 0]
            top = lax.cond(x[0] > 0, lambda m: jnp.linalg.eigh(m)[0], lambda m: jnp.zeros(12), m)
            return x + 0.1 * top, jnp.linalg.slogdet(m)[1]
        return lax.scan(step, v[0], spd)

    def nested(spd, v):
        def inner(j, y):
            return jnp.linalg.qr(spd[j] + y[:, None])[1][0]
        return lax.fori_loop(0, 2, lambda i, x: lax.fori_loop(0, 2, inner, x), v[0])
    for f in (newton, filtered, nested):
        exe = compile_cpu(f, spd, v)
        assert not exe.report.fallbacks and exe.report.loops, (f.__name__, exe.report.fallbacks)
        check_backends_agree(f, spd, v, rtol=2e-4, atol=2e-4)


def test_products_are_computed_in_the_layout_their_users_read(rng):
    """The transpose rule's ``transpose(dot_general(g, x))`` becomes ``dot_general(x, g)``; a
    product read elsewhere too keeps its transpose."""
    from ember.backends.cpu.expansions import transposed_products
    x, w = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 48)).astype(np.float32)

    def step(w, x):
        return w - 0.1 * ember.grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)

    def shared(a, b):
        p = a @ b.T
        return p.T * 2.0, p + 1.0

    def transposes_of_products(f, *args):
        program = transposed_products(ember.make_jaxpr(f)(*args)).jaxpr
        made = {id(e.outvars[0]) for e in program.eqns if e.primitive.name == "dot_general"}
        return sum(e.primitive.name == "transpose" and id(e.invars[0]) in made for e in program.eqns)
    assert transposes_of_products(lambda a, b: (a @ b).T, x, w) == 0
    assert transposes_of_products(shared, x, x) == 1
    for f, args in ((step, (w, x)), (shared, (x, x)), (lambda a, b: jnp.einsum("bij,bjk->bki", a, b),
                                                         (x.reshape(2, 32, 32), w[:, :32].reshape(1, 32, 32)))):
        check_backends_agree(f, *args, rtol=1e-5, atol=1e-5)


def _primitives(f, *args) -> list[str]:
    from ember.backends.cpu.expansions import expand
    return [e.primitive.name for e in expand(ember.make_jaxpr(f)(*args)).eqns]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.int32, np.uint8, np.bool_])
def test_products_of_one_term_are_multiplies_of_the_same_bits(rng, dtype):
    """Contractions over dimensions of size 1 (outer products, batched: what ``vmap`` of ``grad``
    leaves for per-example gradients) become a multiply in the accumulation type, which fuses;
    bit for bit what the product computes, in every layout."""
    def draw(*shape):
        x = rng.standard_normal(shape) * 4
        return (x > 0) if dtype == np.bool_ else x.astype(dtype)
    a, b = draw(5, 1, 3), draw(5, 4, 1)
    cases = [
        (lambda a, b: lax.dot_general(a, b, (((1,), (2,)), ((0,), (0,)))), (a, b)),        # batched outer
        (lambda a, b: lax.dot_general(b, a, (((2,), (1,)), ((0,), (0,)))), (a, b)),        # operands swapped
        (lambda a, b: lax.dot_general(a, b, (((1,), (2,)), ((), ()))), (a, b)),            # no batch
        (lambda x, y: lax.dot_general(x, y, (((0,), (0,)), ((), ()))), (draw(1, 6), draw(1, 7))),
        (lambda x, y: lax.dot_general(x, y, (((1, 2), (0, 1)), ((), ()))), (draw(3, 1, 1), draw(1, 1, 2))),
        (lambda x, y: lax.dot_general(x, y, (((), ()), ((0,), (0,)))), (draw(3, 4), draw(3, 5))),  # no sum at all
    ]
    for f, args in cases:
        assert "dot_general" not in _primitives(f, *args)
        check_backends_agree(f, *args, exact=True)
    if dtype == np.float16:  # accumulated in float32, rounded once (as the product)
        f = lambda a, b: lax.dot_general(a, b, (((1,), (2,)), ((0,), (0,))), preferred_element_type=np.float32)
        check_backends_agree(f, a, b, exact=True)
    big = draw(4, 8)
    assert "dot_general" in _primitives(lambda x: x @ x.T, big)  # (two terms: the product)


def test_sums_over_unit_dimensions_are_elementwise_and_turn_negative_zero_positive():
    x = np.array([[[-0.0, 1.5, -2.0]], [[np.nan, -np.inf, 3.0]]], np.float32)  # (2, 1, 3)
    f = lambda x: jnp.sum(x, axis=1)
    assert "reduce_sum" not in _primitives(f, x)
    got = check_backends_agree(f, x, exact=True)[0]
    assert not np.signbit(got[0, 0])  # 0 + (-0.0) = +0.0, as a reduction computes it
    check_backends_agree(lambda x: jnp.sum(x, axis=(1,)), np.full((2, 1, 1), -3, np.int8), exact=True)
    assert "reduce_sum" in _primitives(lambda x: jnp.sum(x, axis=2), x)


def test_per_example_logistic_gradients_are_one_kernel_with_the_reference_values(rng):
    """vmap of grad of a logistic loss: the product per row, expensive per-row values read
    through reshapes that add and drop unit dimensions, a row norm and a mean over rows, all in
    one fused kernel, against the reference and NumPy. (How fast it runs, which the group-by-group
    reshape index decides, is the benchmark's per-example logistic row: 50x slower when per-row
    values were recomputed per element.)"""
    w, x = rng.standard_normal(64).astype(np.float32) * 0.1, rng.standard_normal((32, 64)).astype(np.float32)
    y = (rng.uniform(size=32) < 0.5).astype(np.float32)

    def loss(w, x, y):
        return -(y * nn.log_sigmoid(x @ w) + (1 - y) * nn.log_sigmoid(-(x @ w)))

    def f(w, x, y):
        grads = ember.vmap(ember.grad(loss), in_axes=(None, 0, 0))(w, x, y)
        norms = jnp.sqrt(jnp.sum(grads ** 2, axis=1, keepdims=True))
        return jnp.mean(grads / jnp.maximum(norms, 1.0), axis=0)
    report = compile_cpu(f, w, x, y).report
    assert len(report.kernels) == 1 and not report.contractions and not report.fallbacks, report.kernels
    got = check_backends_agree(f, w, x, y, rtol=1e-5, atol=1e-6)[0]
    z = x @ w
    g = ((1 / (1 + np.exp(-z))) - y)[:, None] * x
    np.testing.assert_allclose(got, np.mean(g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1), 0),
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("shapes", [((6, 4), (2, 3, 4)), ((2, 3, 4), (6, 4)), ((2, 3, 4), (3, 8)),
                                    ((4, 1, 6), (4, 6, 1)), ((1, 24), (2, 1, 3, 4, 1)), ((3, 2, 4), (2, 12)),
                                    ((5, 1, 1), (1, 5)), ((2, 6, 1, 2), (4, 3, 2))])
def test_reshapes_inside_kernels_map_indices_group_by_group(rng, shapes):
    """Each reshape between a broadcast (its index by components) and an elementwise consumer, with
    groups that split, merge, regroup and add or drop unit dimensions."""
    src, dst = shapes
    x = rng.standard_normal(src).astype(np.float32)
    row = rng.standard_normal(dst[-1:]).astype(np.float32)
    f = lambda x, r: jnp.exp(jnp.reshape(x * 2.0, dst)) + r + jnp.reshape(jnp.sin(x), dst).sum(axis=0)
    check_backends_agree(f, x, row, rtol=1e-6, atol=1e-6)
    g = lambda x: jnp.reshape(jnp.broadcast_to(jnp.reshape(x, dst)[None], (2, *dst)) * 3.0, (2, *src))
    check_backends_agree(g, x, exact=True)


@st.composite
def _factorizations(draw):
    """Two shapes of one size: the size's prime factors dealt into dimensions, with unit ones."""
    factors = draw(st.lists(st.sampled_from([2, 3, 5]), min_size=0, max_size=5))

    def shape():
        dims = [1] * draw(st.integers(1, 4))
        for f in factors:
            dims[draw(st.integers(0, len(dims) - 1))] *= f
        return tuple(dims)
    return shape(), shape()


@settings(max_examples=40, deadline=None)
@given(shapes=_factorizations(), seed=st.integers(0, 2**16))
def test_reshapes_between_any_factorizations_inside_kernels(shapes, seed):
    src, dst = shapes
    note(f"{src} -> {dst}")
    x = np.random.default_rng(seed).standard_normal(src).astype(np.float32)
    check_backends_agree(lambda x: jnp.reshape(jnp.exp(x) * 2.0, dst) + jnp.reshape(x, dst)[..., :1], x,
                         rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("gemm", ["blas", "own"])
def test_large_products_on_blas_and_on_gemm_in_every_layout(rng, monkeypatch, gemm):
    """``EMBER_GEMM`` chooses BLAS (NumPy's) or ember's own product for large ones: the same answers for
    plain, transposed and batched operands, float32 and float64."""
    monkeypatch.setenv("EMBER_GEMM", gemm)
    a = rng.standard_normal((2, 160, 144)).astype(np.float32)
    b = rng.standard_normal((2, 144, 136)).astype(np.float32)
    cases = {
        "plain": (lambda a, b: a[0] @ b[0], lambda a, b: a[0] @ b[0]),
        "transposed lhs": (lambda a, b: a[0].T @ a[1], lambda a, b: a[0].T @ a[1]),
        "transposed rhs": (lambda a, b: a[0] @ a[1].T, lambda a, b: a[0] @ a[1].T),
        "both transposed": (lambda a, b: jnp.einsum("ki,jk->ij", b[0], a[0]), lambda a, b: (a[0] @ b[0]).T),
        "batched": (lambda a, b: jnp.einsum("bij,bjk->bik", a, b), lambda a, b: a @ b),
        "float64 inputs (x64 off: float32)": (lambda a, b: a[1].astype(jnp.float64) @ b[1], lambda a, b: a[1] @ b[1]),
    }
    for name, (f, want) in cases.items():
        exe = compile_cpu(f, a, b)
        assert exe.report.contractions == 1, name
        got = np.asarray(ember.tree_util.tree_leaves(exe(a, b))[0])
        products = [step.dot for step in exe.program.steps if hasattr(step, "dot")]
        assert products[0].blas == (gemm == "blas"), name
        np.testing.assert_allclose(got, want(a.astype(np.float64), b.astype(np.float64)), rtol=2e-4, atol=2e-4,
                                   err_msg=name)


def test_loops_holding_convolutions_gathers_and_scatters_are_native(rng):
    x = rng.standard_normal((2, 12, 12, 4)).astype(np.float32)
    w = rng.standard_normal((3, 3, 4, 4)).astype(np.float32) * 0.2
    index = rng.integers(0, 12, 5).astype(np.int32)

    def f(x, w, index):
        def body(carry, i):
            h = jnp.tanh(lax.conv_general_dilated(carry, w, (1, 1), "SAME",
                                                  dimension_numbers=("NHWC", "HWIO", "NHWC")))
            picked = h[:, index]  # a gather
            h = h.at[:, index[i % 5]].add(picked.mean(1))  # a scatter
            return h, lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum()
        return lax.scan(body, x, jnp.arange(4))
    check_backends_agree(f, x, w, index, rtol=1e-4, atol=1e-5)
    report = compile_cpu(f, x, w, index).report
    assert report.loops and not report.fallbacks, report.fallbacks


def test_a_callback_without_operands_still_falls_back_cleanly():
    calls = []

    def f(x):
        ember.debug.callback(lambda: calls.append(1))
        return x + 1
    assert compile_cpu(f, np.ones(3, np.float32)).report.fallbacks == ["debug_callback"]
    np.testing.assert_array_equal(ember.jit(f)(np.ones(3, np.float32)), 2.0)
    assert calls == [1]


def test_loop_accumulators_of_products_match_reference(rng):
    """``acc = acc + c * a_i.T @ b_i`` is done by the product in the carry's buffer; where the
    carry is read elsewhere too (or swapped with another), it must not be."""
    xs = rng.standard_normal((5, 48, 64)).astype(np.float32)
    ys = rng.standard_normal((5, 48, 80)).astype(np.float32)

    def accumulate(xs, ys):
        def body(acc, xy):
            x, y = xy
            return acc + x.T @ y, None
        return lax.scan(body, jnp.zeros((64, 80)), (xs, ys))[0]

    def read_too(xs, ys):
        def body(acc, xy):
            x, y = xy
            return acc + x.T @ y, jnp.sum(acc)  # the old carry is read as well
        return lax.scan(body, jnp.ones((64, 80)), (xs, ys))

    def swapped(xs, ys):
        def body(carry, xy):
            a, b = carry
            x, y = xy
            return (b + x.T @ y, a), None  # the sum goes to the other carry
        return lax.scan(body, (jnp.zeros((64, 80)), jnp.ones((64, 80))), (xs, ys))[0]

    def in_while(xs, ys):
        def body(state):
            i, acc = state
            return i + 1, x_t_y(i) + acc
        x_t_y = lambda i: lax.dynamic_index_in_dim(xs, i, keepdims=False).T @ lax.dynamic_index_in_dim(
            ys, i, keepdims=False)
        return lax.while_loop(lambda s: s[0] < 5, body, (0, jnp.zeros((64, 80))))[1]

    def sgd(xs, ys):  # carry - literal * product, and literal * product + carry
        def body(carry, xy):
            w, v = carry
            x, y = xy
            return (w - 0.01 * (x.T @ y), (y.T @ x) * 2.0 + v), None
        return lax.scan(body, (jnp.ones((64, 80)), jnp.zeros((80, 64))), (xs, ys))[0]

    def sgd_reads_first(xs, ys):  # the forward pass reads the weights before their update
        def body(w, xy):
            x, y = xy
            return w - 0.01 * (x.T @ (x @ w - y)), None
        return lax.scan(body, jnp.ones((64, 80)) * 0.1, (xs, ys))[0]

    def read_after(xs, ys):  # the carry is read after the product: no update in place
        def body(w, xy):
            x, y = xy
            g = x.T @ y
            total = jnp.sum(w)
            return w - 0.1 * g, total
        return lax.scan(body, jnp.ones((64, 80)), (xs, ys))

    def accumulated_in_place(f) -> int:
        """How many of the loop's products add into their carry (gemm's accumulate flag)."""
        exe = compile_cpu(f, xs, ys)
        assert not exe.report.fallbacks, f.__name__
        source = "\n".join(str(m.source) for m in exe.program.modules)
        products = re.findall(r"private constant \[15 x i64\] \[([^\]]*)\]", source)
        assert products, f.__name__
        return sum(p.split(", ")[13] == "i64 1" for p in products)

    for f in (accumulate, read_too, swapped, in_while, sgd, sgd_reads_first, read_after):
        check_backends_agree(f, xs, ys, rtol=1e-4, atol=1e-4)
    expected = {accumulate: 1, read_too: 0, swapped: 0, in_while: 1, sgd: 2, sgd_reads_first: 1, read_after: 0}
    ember.clear_caches(disk=False)  # (each program generates its own loop, not one compiled before)
    for f, count in expected.items():
        assert accumulated_in_place(f) == count, f.__name__


def test_loops_holding_operations_without_native_code_call_them_and_stay_native(rng):
    """A sort, an argsort and a cumlogsumexp in loop bodies are host calls: the loop is native,
    and its results are the reference's."""
    x = rng.standard_normal((4, 6)).astype(np.float32)

    def sorts(x):
        return lax.fori_loop(0, 3, lambda i, v: jnp.sort(v * -1.5, axis=-1) + jnp.argsort(v, axis=0) * 0.25, x)

    def scan_of_cumlogsumexp(x):
        return lax.scan(lambda c, row: (c + lax.cumlogsumexp(row + c), jnp.max(c)), x[0], x)

    for f in (sorts, scan_of_cumlogsumexp):
        report = compile_cpu(f, x).report
        assert not report.fallbacks and report.loops and report.host_calls, (f.__name__, report.fallbacks)
        check_backends_agree(f, x, rtol=1e-6, atol=1e-6)
