"""Convolutions and windowed reductions: lax.conv_general_dilated (and its wrappers) and
lax.reduce_window, against a direct NumPy loop and jax.lax, eagerly, under jit, under
grad and vmap."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from util import assert_allclose, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember import lax


# --- a direct loop implementation (NCHW / OIHW, explicit padding) ----------------------------------------
def _loop_conv(x, w, strides, padding, lhs_dilation, rhs_dilation, groups=1):
    n, c = x.shape[:2]
    o, i = w.shape[:2]
    spatial = x.shape[2:]
    dilated = [(s - 1) * d + 1 for s, d in zip(spatial, lhs_dilation)]
    base = np.zeros((n, c, *[d + lo + hi for d, (lo, hi) in zip(dilated, padding)]), np.float64)
    for idx in itertools.product(*(range(s) for s in spatial)):
        target = tuple(k * d + lo for k, d, (lo, _) in zip(idx, lhs_dilation, padding))
        base[(slice(None), slice(None)) + target] = x[(slice(None), slice(None)) + idx]
    span = [(k - 1) * d + 1 for k, d in zip(w.shape[2:], rhs_dilation)]
    out_sizes = [max(0, (b - s) // st + 1) for b, s, st in zip(base.shape[2:], span, strides)]
    out = np.zeros((n, o, *out_sizes))
    per_group = o // groups
    for pos in itertools.product(*(range(s) for s in out_sizes)):
        for kpos in itertools.product(*(range(k) for k in w.shape[2:])):
            at = tuple(p * st + k * d for p, st, k, d in zip(pos, strides, kpos, rhs_dilation))
            patch = base[(slice(None), slice(None)) + at]  # n, c
            for g in range(groups):
                kernel = w[(slice(g * per_group, (g + 1) * per_group), slice(None)) + kpos]  # og, i
                out[(slice(None), slice(g * per_group, (g + 1) * per_group)) + pos] += \
                    patch[:, g * i:(g + 1) * i] @ kernel.T
    return out


def _loop_max_pool(x, window, strides):
    out_sizes = [(s - k) // st + 1 for s, k, st in zip(x.shape, window, strides)]
    out = np.empty(out_sizes, x.dtype)
    for pos in itertools.product(*(range(s) for s in out_sizes)):
        out[pos] = x[tuple(slice(p * st, p * st + k) for p, st, k in zip(pos, strides, window))].max()
    return out


LOOP_CASES = [  # lhs shape, rhs shape, strides, padding, lhs_dilation, rhs_dilation, feature groups
    ((2, 3, 9), (4, 3, 3), (1,), ((0, 0),), (1,), (1,), 1),
    ((1, 2, 7, 6), (3, 2, 3, 2), (2, 1), ((1, 2), (0, 1)), (1, 1), (2, 1), 1),
    ((2, 4, 5, 5), (6, 2, 2, 3), (1, 2), ((1, 1), (2, 0)), (2, 1), (1, 2), 2),
    ((1, 2, 4, 3, 4), (2, 2, 2, 2, 2), (1, 2, 1), ((0, 0), (1, 0), (0, 1)), (1, 1, 1), (1, 1, 2), 1),
]


@pytest.mark.parametrize("case", LOOP_CASES, ids=str)
def test_conv_matches_loop(case, rng):
    lhs_shape, rhs_shape, strides, padding, lhs_dil, rhs_dil, groups = case
    x = rng.normal(size=lhs_shape).astype(np.float32)
    w = rng.normal(size=rhs_shape).astype(np.float32)
    expected = _loop_conv(x.astype(np.float64), w.astype(np.float64), strides, padding, lhs_dil, rhs_dil, groups)
    check_eager_and_jit(lambda x, w: lax.conv_general_dilated(x, w, strides, padding, lhs_dil, rhs_dil,
                                                              feature_group_count=groups),
                        x, w, expected=expected.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_conv_and_conv_with_general_padding_are_nchw(rng):
    x = rng.normal(size=(2, 3, 6, 5)).astype(np.float32)
    w = rng.normal(size=(4, 3, 2, 3)).astype(np.float32)
    out = lax.conv(x, w, (1, 2), "VALID")
    assert_allclose(out, _loop_conv(x, w, (1, 2), ((0, 0), (0, 0)), (1, 1), (1, 1)).astype(np.float32), rtol=1e-5,
                    atol=1e-5)
    out = lax.conv_with_general_padding(x, w, (2, 1), ((1, 0), (2, 2)), (1, 2), (2, 1))
    assert_allclose(out, _loop_conv(x, w, (2, 1), ((1, 0), (2, 2)), (1, 2), (2, 1)).astype(np.float32), rtol=1e-5,
                    atol=1e-5)


def test_dimension_numbers_and_padtype():
    dn = lax.conv_dimension_numbers((2, 8, 8, 3), (3, 3, 3, 16), ("NHWC", "HWIO", "NHWC"))
    assert dn == lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    assert lax.conv_dimension_numbers((1, 1, 1), (1, 1, 1), None) == ((0, 1, 2),) * 3
    assert lax.padtype_to_pads((5, 6), (3, 2), (2, 1), "SAME") == [(1, 1), (0, 1)]
    assert lax.padtype_to_pads((6,), (4,), (1,), "SAME_LOWER") == [(2, 1)]
    assert lax.padtype_to_pads((6,), (4,), (1,), "VALID") == [(0, 0)]


def test_max_pool_matches_loop_and_dtypes(rng):
    x = rng.normal(size=(2, 7, 6)).astype(np.float32)
    pool = lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 3, 2), (1, 2, 2), "VALID")
    check_eager_and_jit(pool, x, expected=_loop_max_pool(x, (1, 3, 2), (1, 2, 2)))
    ints = rng.integers(-50, 50, size=(5, 4)).astype(np.int32)
    out = lax.reduce_window(ints, np.iinfo(np.int32).max, lax.min, (2, 2), (1, 1), "SAME")
    assert out.dtype == np.int32 and out.shape == (5, 4)
    assert out[0, 0] == ints[:2, :2].min() and out[4, 3] == ints[4, 3]
    total = lax.reduce_window(ints, 0, lax.add, (2, 3), (1, 1), ((1, 0), (0, 2)))
    assert total.dtype == np.int32 and total.shape == (5, 4) and total[0, 0] == ints[0, :3].sum()


# --- against jax.lax ---------------------------------------------------------------------------------
JAX_CONV_CASES = [  # lhs shape, rhs shape, kwargs
    ((2, 3, 9), (4, 3, 3), dict(window_strides=(2,), padding="SAME")),
    ((2, 9, 3), (3, 3, 4), dict(window_strides=(1,), padding="SAME_LOWER", rhs_dilation=(2,),
                                dimension_numbers=("NWC", "WIO", "NWC"))),
    ((2, 3, 7, 6), (4, 3, 3, 2), dict(window_strides=(1, 2), padding="VALID", rhs_dilation=(1, 2))),
    ((2, 7, 6, 4), (3, 3, 1, 4), dict(window_strides=(2, 2), padding="SAME", feature_group_count=4,
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ((2, 4, 6, 5), (6, 2, 2, 3), dict(window_strides=(1, 1), padding=((1, 2), (0, -1)), lhs_dilation=(2, 1),
                                      feature_group_count=2)),
    ((4, 3, 6, 5), (6, 3, 2, 2), dict(window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    ((1, 2, 4, 5, 3), (2, 2, 2, 3, 2), dict(window_strides=(1, 2, 1), padding="SAME", rhs_dilation=(1, 1, 2))),
    ((2, 5, 4, 3), (4, 2, 3, 3), dict(window_strides=(2, 1), padding=((1, 1), (2, 0)),
                                      dimension_numbers=("NHWC", "OHWI", "NCHW"))),
]


def _jax():
    jax = pytest.importorskip("jax")
    return jax


@pytest.mark.parametrize("case", JAX_CONV_CASES, ids=str)
def test_conv_matches_jax(case, rng):
    jax = _jax()
    lhs_shape, rhs_shape, kwargs = case
    x = rng.normal(size=lhs_shape).astype(np.float32)
    w = rng.normal(size=rhs_shape).astype(np.float32)
    expected = np.asarray(jax.lax.conv_general_dilated(x, w, **kwargs))
    check_eager_and_jit(lambda x, w: lax.conv_general_dilated(x, w, **kwargs), x, w, expected=expected,
                        rtol=1e-5, atol=1e-5)
    # gradients with respect to both operands
    cot = rng.normal(size=expected.shape).astype(np.float32)
    loss = lambda conv_fn, sum_fn: lambda x, w: sum_fn(conv_fn(x, w, **kwargs) * cot)
    ours = ember.grad(loss(lax.conv_general_dilated, jnp.sum), argnums=(0, 1))(x, w)
    theirs = jax.grad(loss(jax.lax.conv_general_dilated, jax.numpy.sum), argnums=(0, 1))(x, w)
    for a, b in zip(ours, theirs):
        assert_allclose(a, np.asarray(b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", JAX_CONV_CASES, ids=str)
def test_convolutions_in_batch_chunks_give_the_same_results(case, rng, monkeypatch):
    """With chunks of one image (``PATCH_CHUNK_BYTES`` tiny), the CPU backend computes each
    convolution on its image batch a chunk at a time (a map over the chunks), the forward one and
    the input gradient's, and gets JAX's values; those with feature or batch groups, or of one
    image, at once."""
    jax = _jax()
    from ember.backends.cpu import expansions
    from ember.backends.cpu_backend import CpuExecutable

    monkeypatch.setattr(expansions, "PATCH_CHUNK_BYTES", 4)
    lhs_shape, rhs_shape, kwargs = case
    x = rng.normal(size=lhs_shape).astype(np.float32)
    w = rng.normal(size=rhs_shape).astype(np.float32)
    expected = np.asarray(jax.lax.conv_general_dilated(x, w, **kwargs))
    cot = rng.normal(size=expected.shape).astype(np.float32)
    loss = lambda conv_fn, sum_fn: lambda x, w: sum_fn(conv_fn(x, w, **kwargs) * cot)
    expected_grads = jax.grad(loss(jax.lax.conv_general_dilated, jax.numpy.sum), argnums=(0, 1))(x, w)
    forward = ember.make_jaxpr(lambda x, w: lax.conv_general_dilated(x, w, **kwargs))(x, w)
    grads = ember.make_jaxpr(ember.grad(loss(lax.conv_general_dilated, jnp.sum), argnums=(0, 1)))(x, w)
    lhs_spec = lax.conv_dimension_numbers(lhs_shape, rhs_shape, kwargs.get("dimension_numbers")).lhs_spec
    eligible = (lhs_shape[lhs_spec[0]] > 1 and kwargs.get("feature_group_count", 1) == 1
                and kwargs.get("batch_group_count", 1) == 1)
    chunked = any(e.primitive.name == "scan" for e in expansions.expand(forward).eqns)  # (a lax.map)
    assert chunked == eligible
    with ember.config.override(persistent_program_cache=False):
        assert_allclose(CpuExecutable(forward, "conv")(x, w)[0], expected, rtol=1e-5, atol=1e-5)
        for got, want in zip(CpuExecutable(grads, "conv_grad")(x, w), expected_grads):
            assert_allclose(got, np.asarray(want), rtol=1e-4, atol=1e-4)


JAX_WINDOW_CASES = [  # shape, computation name, window, strides, padding, base dilation, window dilation
    ((2, 7, 6), "max", (1, 3, 2), (1, 2, 2), "VALID", None, None),
    ((7, 6), "add", (3, 3), (2, 1), "SAME", None, (1, 2)),
    ((6, 5), "min", (2, 2), (1, 2), ((1, 0), (2, 1)), (2, 1), None),
    ((5, 6), "add", (2, 3), (1, 1), ((0, 1), (1, 1)), (1, 2), (2, 1)),
    ((8,), "max", (3,), (2,), "SAME_LOWER", None, None),  # JAX has no max-pool gradient with window dilation
]
_IDENTITY = {"add": 0.0, "max": -np.inf, "min": np.inf}


@pytest.mark.parametrize("case", JAX_WINDOW_CASES, ids=str)
def test_reduce_window_matches_jax(case, rng):
    jax = _jax()
    shape, name, window, strides, padding, base_dilation, window_dilation = case
    x = rng.normal(size=shape).astype(np.float32)

    def reduce(module, x):
        return module.reduce_window(x, _IDENTITY[name], getattr(module, name), window, strides, padding,
                                    base_dilation, window_dilation)

    expected = np.asarray(reduce(jax.lax, x))
    check_eager_and_jit(lambda x: reduce(lax, x), x, expected=expected, rtol=1e-6, atol=1e-6)
    cot = rng.normal(size=expected.shape).astype(np.float32)
    ours = ember.grad(lambda x: jnp.sum(reduce(lax, x) * cot))(x)
    theirs = jax.grad(lambda x: jax.numpy.sum(reduce(jax.lax, x) * cot))(x)
    assert_allclose(ours, np.asarray(theirs), rtol=1e-5, atol=1e-5)


def test_preferred_element_type_and_int_conv(rng):
    x = rng.integers(-3, 4, size=(1, 2, 5)).astype(np.int8)
    w = rng.integers(-3, 4, size=(2, 2, 2)).astype(np.int8)
    out = lax.conv_general_dilated(x, w, (1,), "VALID", preferred_element_type=np.float32)
    assert out.dtype == np.float32
    assert_allclose(out, _loop_conv(x.astype(np.float64), w.astype(np.float64), (1,), ((0, 0),), (1,), (1,))
                    .astype(np.float32))
    assert lax.conv_general_dilated(x, w, (1,), "VALID").dtype == np.int8


# --- derivatives in float64 against finite differences -----------------------------------------------------
def _finite_difference_check(f, args, argnum, eps=1e-6):
    grad = np.asarray(ember.grad(lambda *a: jnp.sum(f(*a) ** 2), argnums=argnum)(*args))
    base = [np.array(a) for a in args]
    numeric = np.zeros_like(base[argnum])
    for idx in np.ndindex(base[argnum].shape):
        values = []
        for sign in (1, -1):
            shifted = [b.copy() for b in base]
            shifted[argnum][idx] += sign * eps
            values.append(float(np.sum(np.asarray(f(*shifted)) ** 2)))
        numeric[idx] = (values[0] - values[1]) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("groups", [("feature", 2), ("batch", 2), ("feature", 1)], ids=str)
def test_conv_gradients_match_finite_differences(x64, rng, groups):
    kind, count = groups
    x = rng.normal(size=(2, 4, 5, 4))
    w = rng.normal(size=(2, 4 // count if kind == "feature" else 4, 2, 3))

    def f(x, w):
        return lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (1, 2)), (1, 2), (2, 1),
                                        feature_group_count=count if kind == "feature" else 1,
                                        batch_group_count=count if kind == "batch" else 1)

    _finite_difference_check(f, (x, w), 0)
    _finite_difference_check(f, (x, w), 1)


def test_reduce_window_gradients_match_finite_differences(x64, rng):
    x = rng.normal(size=(5, 6))
    for computation, init in ((lax.add, 0.0), (lax.max, -np.inf), (lax.min, np.inf)):
        f = lambda x: lax.reduce_window(x, init, computation, (2, 3), (2, 1), ((1, 0), (0, 1)), (1, 2), (2, 1))
        _finite_difference_check(f, (x,), 0)


# --- vmap ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("in_axes", [(0, None), (1, None), (None, 0), (None, 2), (0, 0), (1, 3)], ids=str)
@pytest.mark.parametrize("groups", [(1, 1), (1, 2), (2, 1)], ids=["ungrouped", "batch groups", "feature groups"])
def test_conv_vmap_matches_loop_and_is_one_convolution(rng, in_axes, groups):
    feature_group_count, batch_group_count = groups
    # (vmapped 3, batch 4, features 2 or 4, width 5); kernel (vmapped 3, out 4, in 2, width 2)
    x = rng.normal(size=(3, 4, 2 * feature_group_count, 5)).astype(np.float32)
    w = rng.normal(size=(3, 4, 2, 2)).astype(np.float32)

    def f(x, w):
        return lax.conv_general_dilated(x, w, (1,), "SAME", feature_group_count=feature_group_count,
                                        batch_group_count=batch_group_count)
    xs = x if in_axes[0] == 0 else np.moveaxis(x, 0, 1) if in_axes[0] == 1 else x[0]
    ws = w if in_axes[1] == 0 else np.moveaxis(w, 0, in_axes[1]) if in_axes[1] else w[0]
    batched = ember.vmap(f, in_axes=in_axes)
    expected = np.stack([f(x[i] if in_axes[0] is not None else x[0], w[i] if in_axes[1] is not None else w[0])
                         for i in range(3)])
    assert_allclose(batched(xs, ws), expected, rtol=1e-5, atol=1e-5)
    assert_allclose(ember.jit(batched)(xs, ws), expected, rtol=1e-5, atol=1e-5)
    program = ember.make_jaxpr(batched)(xs, ws).jaxpr
    assert [e.primitive.name for e in program.eqns].count("conv_general_dilated") == 1


def test_reduce_window_vmap_matches_loop(rng):
    x = rng.normal(size=(4, 3, 6)).astype(np.float32)
    for computation, init in ((lax.add, 0.0), (lax.max, -np.inf), (lax.min, np.inf)):
        f = lambda x: lax.reduce_window(x, init, computation, (2, 2), (1, 2), "SAME")
        out = ember.vmap(f, in_axes=1)(x)
        assert_allclose(out, np.stack([f(x[:, i]) for i in range(3)]))


# --- end to end: a tiny CNN ----------------------------------------------------------------------------------
def test_tiny_cnn_forward_and_backward(rng):
    images = rng.normal(size=(4, 8, 8, 1)).astype(np.float32)
    labels = np.array([0, 1, 0, 1])
    params = {"conv": jnp.asarray(0.3 * rng.normal(size=(3, 3, 1, 4)).astype(np.float32)),
              "dense": jnp.asarray(0.3 * rng.normal(size=(16 * 4, 2)).astype(np.float32))}

    def loss(params, images):
        h = lax.conv_general_dilated(images, params["conv"], (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = lax.reduce_window(jnp.tanh(h), -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        logits = h.reshape(4, -1) @ params["dense"]
        return -jnp.mean(jnp.take_along_axis(ember.nn.log_softmax(logits), labels[:, None], axis=1))

    step = ember.jit(ember.value_and_grad(loss))
    first, _ = step(params, images)
    for _ in range(20):
        value, grads = step(params, images)
        params = {k: params[k] - 0.5 * grads[k] for k in params}
    assert float(value) < float(first)
    assert grads["conv"].shape == (3, 3, 1, 4) and grads["dense"].shape == (64, 2)


# --- errors -------------------------------------------------------------------------------------------------
def test_conv_errors():
    x, w = np.ones((1, 2, 5), np.float32), np.ones((3, 2, 2), np.float32)
    with pytest.raises(TypeError, match="must contain 'N' and 'C' exactly once"):
        lax.conv_general_dilated(x, w, (1,), "VALID", dimension_numbers=("NNW", "OIW", "NCW"))
    with pytest.raises(TypeError, match=r"dimension_numbers\[1\] = 'OIHW' must have length equal"):
        lax.conv_general_dilated(x, w, (1,), "VALID", dimension_numbers=("NCW", "OIHW", "NCW"))
    with pytest.raises(TypeError, match="same spatial dimensions"):
        lax.conv_general_dilated(x, w, (1,), "VALID", dimension_numbers=("NCW", "OIH", "NCW"))
    with pytest.raises(TypeError, match="one rank"):
        lax.conv(np.ones((1, 2, 5, 5), np.float32), w, (1,), "VALID")
    with pytest.raises(TypeError, match="operands of one dtype"):
        lax.conv(x, w.astype(np.int32), (1,), "VALID")
    with pytest.raises(ValueError, match=r"lhs feature dimension \(2\) must equal the rhs input feature dimension"):
        lax.conv(x, np.ones((3, 3, 2), np.float32), (1,), "VALID")
    with pytest.raises(ValueError, match="multiple of feature_group_count"):
        lax.conv_general_dilated(x, np.ones((3, 1, 2), np.float32), (1,), "VALID", feature_group_count=2)
    with pytest.raises(ValueError, match="at most one of feature_group_count and batch_group_count"):
        lax.conv_general_dilated(x, np.ones((4, 1, 2), np.float32), (1,), "VALID", feature_group_count=2,
                                 batch_group_count=2)
    with pytest.raises(TypeError, match=r"window_strides \(1, 1\) must have 1 entries"):
        lax.conv(x, w, (1, 1), "VALID")
    with pytest.raises(ValueError, match="padding must be 'SAME', 'SAME_LOWER' or 'VALID'"):
        lax.conv(x, w, (1,), "FULL")
    with pytest.raises(ValueError, match="string padding is not supported with lhs_dilation"):
        lax.conv_with_general_padding(x, w, (1,), "SAME", (2,), None)


def test_reduce_window_errors():
    x = np.ones((4, 4), np.float32)
    with pytest.raises(NotImplementedError, match="supports computation lax.add, lax.max or lax.min"):
        lax.reduce_window(x, 1.0, lax.mul, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match=r"init_value must be a scalar, got shape \(2,\)"):
        lax.reduce_window(x, np.zeros(2, np.float32), lax.add, (2, 2), (1, 1), "VALID")
    with pytest.raises(TypeError, match=r"window_dimensions \(2,\) must have 2 entries"):
        lax.reduce_window(x, 0.0, lax.add, (2,), (1, 1), ((0, 0), (0, 0)))
    with pytest.raises(TypeError, match="reduce_window_sum does not accept dtype bool"):
        lax.reduce_window(x > 0, False, lax.add, (2, 2))


def test_shape_tuples_give_the_result_shapes():
    for lhs, rhs, strides, padding, numbers in [
            ((8, 16, 16, 3), (3, 3, 3, 5), (1, 1), "SAME", ("NHWC", "HWIO", "NHWC")),
            ((8, 3, 17, 16), (5, 3, 3, 4), (2, 3), "VALID", ("NCHW", "OIHW", "NCHW")),
            ((2, 9, 9, 1), (3, 3, 1, 2), (2, 2), [(1, 0), (2, 1)], ("NHWC", "HWIO", "NHWC"))]:
        out = lax.conv_general_dilated(np.zeros(lhs, np.float32), np.zeros(rhs, np.float32), strides, padding,
                                       dimension_numbers=numbers)
        assert lax.conv_general_shape_tuple(lhs, rhs, strides, padding, numbers) == out.shape
    pads = [(0, 0), (0, 1), (0, 1), (0, 0)]
    pooled = lax.reduce_window(np.zeros((4, 9, 9, 2), np.float32), 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), pads)
    assert lax.reduce_window_shape_tuple((4, 9, 9, 2), (1, 2, 2, 1), (1, 2, 2, 1), pads) == pooled.shape == (4, 5, 5, 2)


# --- conv_transpose ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("padding", ["SAME", "VALID", [(1, 2), (0, 1)]])
@pytest.mark.parametrize("strides", [(1, 1), (2, 2), (3, 2)])
@pytest.mark.parametrize("transpose_kernel", [False, True])
def test_conv_transpose_matches_jax(padding, strides, transpose_kernel):
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 6, 3), dtype=np.float32)
    w = rng.standard_normal((3, 2, 4, 3) if transpose_kernel else (3, 2, 3, 4), dtype=np.float32)

    def f(lax_, x, w):
        return lax_.conv_transpose(x, w, strides, padding, transpose_kernel=transpose_kernel)

    want = f(jax.lax, x, w)
    assert_allclose(ember.jit(lambda x, w: f(lax, x, w))(x, w), want, rtol=1e-4, atol=1e-4)
    assert_allclose(f(lax, x, w), want, rtol=1e-4, atol=1e-4)
    numbers = ("NHWC", "HWIO", "NHWC")
    assert lax.conv_transpose_shape_tuple(x.shape, w.shape, strides, padding, numbers) == \
        jax.lax.conv_transpose_shape_tuple(x.shape, w.shape, strides, padding, numbers)


def test_conv_transpose_with_transposed_kernel_is_the_gradient_of_a_strided_conv():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 8, 8), dtype=np.float32)
    w = rng.standard_normal((4, 3, 3, 3), dtype=np.float32)
    numbers = ("NCHW", "OIHW", "NCHW")
    y, pullback = ember.vjp(lambda x: lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=numbers), x)
    ct = jnp.asarray(rng.standard_normal(y.shape, dtype=np.float32))
    via_transpose = lax.conv_transpose(ct, w, (2, 2), "SAME", dimension_numbers=numbers, transpose_kernel=True)
    assert_allclose(via_transpose, pullback(ct)[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="padding must be 'SAME' or 'VALID'"):
        lax.conv_transpose(ct, w, (2, 2), "FULL", dimension_numbers=numbers)


def test_stax_conv_transpose_layers_give_jax_parameters_and_outputs():
    jax = pytest.importorskip("jax")
    from jax.example_libraries import stax as jax_stax

    from ember import random
    from ember.example_libraries import stax
    x = np.random.default_rng(2).standard_normal((2, 7, 7, 3), dtype=np.float32)
    for layer, jax_layer, shape in [(stax.ConvTranspose, jax_stax.ConvTranspose, (2, 7, 7, 3)),
                                    (stax.Conv1DTranspose, jax_stax.Conv1DTranspose, (2, 7, 3))]:
        init, apply = layer(5, (3,) * (len(shape) - 2), strides=(2,) * (len(shape) - 2), padding="SAME")
        jax_init, jax_apply = jax_layer(5, (3,) * (len(shape) - 2), strides=(2,) * (len(shape) - 2), padding="SAME")
        out_shape, params = init(random.PRNGKey(0), shape)
        jax_shape, jax_params = jax_init(jax.random.PRNGKey(0), shape)
        assert tuple(out_shape) == tuple(jax_shape)
        for p, q in zip(params, jax_params):
            assert_allclose(p, q, rtol=1e-6)
        inputs = x.reshape(shape) if len(shape) == 4 else x[:, :, 0, :]
        assert_allclose(apply(params, inputs), jax_apply(jax_params, inputs), rtol=1e-4, atol=1e-5)
