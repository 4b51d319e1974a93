"""The native ML path of the CPU backend against the reference interpreter: convolutions (as
patches and one product), windowed reductions, their gradients and batched forms, and that
the programs of training steps compile with no reference fallback (from the compile report)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
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
       st.sampled_from([np.float32, np.float64, np.int32, np.int8, BF16]), st.data())
def test_native_reduce_window_matches_reference(rank, monoid, dtype, data):
    if monoid == "sum" and np.dtype(dtype) == BF16:
        dtype = np.float32  # (half-precision sums stay on the reference, which rounds once)
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


def test_integer_convolutions_stay_on_the_reference(rng):
    x = rng.integers(-3, 3, (1, 2, 5, 5)).astype(np.int32)
    w = rng.integers(-3, 3, (3, 2, 3, 3)).astype(np.int32)

    def f(x, w):
        return lax.conv(x, w, (1, 1), "SAME")
    check_backends_agree(f, x, w)
    assert compile_cpu(f, x, w).report.fallbacks == ["conv_general_dilated"]


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
