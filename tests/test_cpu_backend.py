"""The native CPU backend against the reference interpreter: semantics, kernels, loops, fallback.

``EMBER_BACKEND=cpu python -m pytest tests`` runs the whole suite on this backend; the tests
here check what that does not: edge-case semantics bit for bit, that code is native (and
vectorized), what falls back and the compile log, memory planning, and random fusible
programs (hypothesis) compared between the two backends.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, note, settings, strategies as st
from hypothesis.extra import numpy as hnp
from util import assert_allclose, tolerance

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import vecmath
from ember.backends.cpu.vecmath_kernels import compile_kernel
from ember.backends.cpu_backend import CpuExecutable

BF16 = np.dtype(ml_dtypes.bfloat16)


def run(backend: str, f, *args):
    with ember.config.override(backend=backend):
        return ember.tree_util.tree_map(np.asarray, ember.jit(f)(*args))


def check_backends_agree(f, *args, exact: bool = False, **tol):
    """Run ``f`` under jit on both backends: equal dtypes and shapes, values exact or close."""
    want = ember.tree_util.tree_leaves(run("reference", f, *args))
    got = ember.tree_util.tree_leaves(run("cpu", f, *args))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact or w.dtype.kind in "biu":
            np.testing.assert_array_equal(g.view(np.uint16) if g.dtype == BF16 else g,
                                          w.view(np.uint16) if w.dtype == BF16 else w)
        else:
            assert_allclose(g, w, **tol)
    return got


def compile_cpu(f, *args) -> CpuExecutable:
    return CpuExecutable(ember.make_jaxpr(f)(*args), getattr(f, "__name__", "f"))


# --- semantics, bit for bit ----------------------------------------------------------------------
INT_EDGES = {
    np.int8: [-128, -1, 0, 1, 7, 127], np.int32: [-(2 ** 31), -7, -1, 0, 1, 3, 2 ** 31 - 1],
    np.uint8: [0, 1, 3, 200, 255], np.uint32: [0, 1, 5, 2 ** 32 - 1], np.int16: [-32768, -3, 0, 2, 32767],
}


@pytest.mark.parametrize("dtype", list(INT_EDGES))
def test_integer_division_remainder_and_shifts_match(dtype):
    values = np.array(INT_EDGES[dtype], dtype)
    x, y = np.meshgrid(values, values)
    shifts = np.array([-1, 0, 1, 7, 8, 31, 32, 40]).astype(dtype)  # -1 wraps for unsigned types
    check_backends_agree(lambda a, b: (lax.div(a, b), lax.rem(a, b)), x, y)
    xs, ss = np.meshgrid(values, shifts)
    check_backends_agree(lambda a, s: (lax.shift_left(a, s), lax.shift_right_arithmetic(a, s),
                                       lax.shift_right_logical(a, s)), xs, ss)


SPECIAL = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 0.5, -0.5, 1.5, -2.5, 2.5, 0.49999997, 1e10, -1e10,
                    3e9, -3e9, 255.7, -1.5, 65504.0, 1e-40], np.float32)


@pytest.mark.parametrize("target", [np.int8, np.uint8, np.int32, np.uint32, np.int16, np.bool_, np.float16])
def test_float_to_int_conversion_saturates_and_maps_nan_to_zero(target):
    check_backends_agree(lambda x: lax.convert_element_type(x, target), SPECIAL)


def test_rounding_max_min_and_special_values_match():
    x = SPECIAL
    y = SPECIAL[::-1].copy()
    check_backends_agree(lambda a: (lax.round(a), lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN), jnp.floor(a),
                                    jnp.ceil(a), jnp.sign(a), jnp.abs(a), jnp.isfinite(a)), x, exact=True)
    check_backends_agree(lambda a, b: (jnp.maximum(a, b), jnp.minimum(a, b), a == b, a != b, a < b, a >= b,
                                       lax.clamp(-1.0, a, 1.0)), x, y, exact=True)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64])
def test_half_and_double_precision_arithmetic_rounds_like_the_reference(dtype):
    x = np.linspace(-3, 3, 37).astype(dtype)
    with ember.config.override(enable_x64=dtype == np.float64):
        check_backends_agree(lambda a: (a * a + a / 3 - 1, jnp.sqrt(jnp.abs(a)), a.astype(jnp.float32),
                                        jnp.sum(a), jnp.max(a)), x, exact=dtype != np.float64)


def test_bool_and_unsigned_logic_match():
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    check_backends_agree(lambda p, q: (p & q, p | q, p ^ q, ~p, jnp.where(p, 1, 2), jnp.maximum(p, q)), a, b)
    u = np.array([0, 1, 200, 255], np.uint8)
    check_backends_agree(lambda v: (v - 3, v * 2, -v, jnp.abs(v), jnp.sign(v), lax.population_count(v),
                                    ~v, v // 7, v > 100), u)


def test_select_n_with_an_integer_selector_clamps():
    which = np.array([-1, 0, 1, 2, 5], np.int32)
    cases = [np.arange(5, dtype=np.float32) + 10 * k for k in range(3)]
    check_backends_agree(lambda w, *c: lax.select_n(w, *c), which, *cases, exact=True)


# --- index remapping, reductions, products --------------------------------------------------------
def test_index_remapping_in_one_kernel_matches():
    x = np.arange(7 * 6, dtype=np.float32).reshape(7, 6)

    def f(a):
        y = jnp.concatenate([a[::2, ::-1], a[1::2, :3].repeat(2, axis=1)], axis=0).T
        z = lax.pad(y, -1.0, ((1, -2, 1), (0, 2, 0)))
        return z.reshape(-1)[3:40:3] + lax.broadcasted_iota(jnp.float32, (13,), 0)

    check_backends_agree(f, x, exact=True)


@given(st.data())
def test_pads_and_concatenations_along_the_last_axis_match(data):
    """A kernel whose last axis is walked in pieces (split where a pad or concatenation along it
    changes sides) computes what the reference does, bit for bit: pads of any edges (negative
    ones crop, interior ones are not split), empty pieces, a reduction over rows in between."""
    rows = data.draw(st.integers(1, 4), label="rows")
    widths = data.draw(st.lists(st.integers(0, 9), min_size=1, max_size=5), label="widths")
    total = sum(widths) + data.draw(st.integers(0, 3), label="extra")
    configs = []
    for w in widths:
        interior = data.draw(st.sampled_from([0, 0, 1]), label="interior")
        spread = w + max(w - 1, 0) * interior
        low = data.draw(st.integers(-(spread // 2), max(total - spread, -(spread // 2))), label="low")
        configs.append((low, total - spread - low, interior))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16), label="seed"))
    xs = [rng.standard_normal((rows, w)).astype(np.float32) for w in widths]

    def f(*parts):
        acc = jnp.pad(jnp.concatenate([p * 3.0 for p in parts], axis=1), ((0, 0), (0, total - sum(widths))))
        for p, config in zip(parts, configs):
            acc = acc + lax.pad(jnp.tanh(p) * 2.0, 0.5, ((0, 0, 0), config))
        return acc * jnp.sum(acc, axis=0), jnp.concatenate([acc[:, 1:], acc[:, :1]], axis=1) - acc

    check_backends_agree(f, *xs, exact=True)


def test_the_gradient_of_a_split_reads_each_piece_contiguously():
    """The backward pass of ``split`` (pads of the pieces' gradients, added) is one kernel whose
    last axis is walked in four loops, each reading one piece in place: no gathers."""
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((32, 512)).astype(np.float32), rng.standard_normal((32, 128)).astype(np.float32)

    def f(a, b):
        i, g, h, o = jnp.split(a, 4, axis=-1)
        return jnp.sum(i * i * b + g * h * 0.5 - o * b)

    grad = ember.grad(f)
    exe = compile_cpu(grad, x, w)
    assert not exe.report.fallbacks
    source = "".join(str(module.optimized_ir) for module in exe.program.modules)
    assert "gather" not in source
    check_backends_agree(grad, x, w, exact=True)


@pytest.mark.parametrize("starts", [(0, 0), (2, 3), (4, 5), (-1, 2), (10, -10)])
def test_dynamic_slices_clamp_their_starts(starts):
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    i, j = (np.int32(s) for s in starts)
    exe = compile_cpu(lambda a, p, q: lax.dynamic_slice(a, (p, q), (2, 3)), x, i, j)
    assert exe.report.kernels and not exe.report.fallbacks
    check_backends_agree(lambda a, p, q: lax.dynamic_slice(a, (p, q), (2, 3)) * 2, x, i, j, exact=True)
    check_backends_agree(lambda a, p, q: lax.dynamic_update_slice(a, -jnp.ones((2, 3)), (p, q)) + 1, x, i, j,
                         exact=True)
    check_backends_agree(lambda a, p: a[:, p], x, np.uint8(200 + starts[0]), exact=True)


def test_loops_that_index_dynamically_stay_native():
    x = np.arange(30, dtype=np.float32).reshape(5, 6)

    def f(a):
        total = lax.fori_loop(0, 5, lambda i, c: c + a[i] * 2.0, jnp.zeros(6))
        return lax.fori_loop(0, 4, lambda i, c: lax.dynamic_update_slice(c, (c[i] + total)[None], (i + 1, 0)), a)

    assert len(compile_cpu(f, x).report.loops) == 2
    check_backends_agree(f, x, exact=True)


@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (0, 1, 2), ()])
def test_reductions_over_any_axes(axes):
    x = np.random.default_rng(1).integers(-9, 9, (3, 5, 7)).astype(np.float32)
    check_backends_agree(lambda a: (jnp.sum(a, axes), jnp.max(a, axes), jnp.min(a, axes), jnp.prod(a * 0.5, axes),
                                    jnp.sum(a.astype(jnp.int32), axes), jnp.all(a > -5, axes), jnp.any(a > 5, axes)),
                         x, exact=True)


def _ieee_extremum(x: np.ndarray, axes: tuple, largest: bool) -> np.ndarray:
    """IEEE 754-2019 maximum (minimum) over ``axes``: NaN if any element is NaN, +0 above -0."""
    with np.errstate(invalid="ignore"):
        value = np.max(x, axes) if largest else np.min(x, axes)
        plus_zero = np.any((x == 0) & ~np.signbit(x), axes)
        minus_zero = np.any((x == 0) & np.signbit(x), axes)
    zero = np.where(plus_zero if largest else ~minus_zero, x.dtype.type(0.0), x.dtype.type(-0.0))
    value = np.where(value == 0, zero, value)
    return np.where(np.any(np.isnan(x), axes), x.dtype.type(np.nan), value)


SPECIAL_FLOATS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-45, -1e-45, 5e-324, 3e38, -3e38]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64]))
def test_float_max_and_min_reductions_are_ieee_maximum_and_minimum(data, dtype):
    """Float max / min reductions in kernels fold three one-instruction reductions (the plain max,
    the largest magnitude's bits, the smallest bits) into IEEE's maximum / minimum: any NaN gives
    NaN, +0 is above -0 whatever the order, infinities and subnormals as they are."""
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=40), label="shape")
    finite = st.floats(-10, 10, width=np.dtype(dtype).itemsize * 8)
    values = st.one_of(finite, st.sampled_from([float(dtype(v)) for v in SPECIAL_FLOATS]))
    x = data.draw(hnp.arrays(dtype, shape, elements=values), label="x")
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1), label="axes")))
    note(f"axes {axes}")
    with ember.config.override(enable_x64=True):
        got_max, got_min, rowwise = (np.asarray(v) for v in ember.jit(
            lambda a: (jnp.max(a, axes), jnp.min(a, axes), a - jnp.max(a, axis=-1, keepdims=True)))(x))
    for got, want in ((got_max, _ieee_extremum(x, axes, True)), (got_min, _ieee_extremum(x, axes, False))):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(got.view(f"u{x.itemsize}")[~np.isnan(want)],
                                      want.view(f"u{x.itemsize}")[~np.isnan(want)])
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(rowwise, x - _ieee_extremum(x, (x.ndim - 1,), True)[..., None])


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16, np.float64, np.int8, np.uint8, np.int32, np.bool_])
def test_argmax_and_argmin_are_native_and_keep_the_first_best(dtype, x64):
    values = [np.nan, -np.inf, np.inf, 3, -2, 0] if np.dtype(dtype).kind == "f" or dtype == BF16 else [0, 1, 3, 2]
    x = np.random.default_rng(2).choice(np.array(values).astype(dtype), (4, 6, 5))  # ties, NaNs, infinities

    def f(a):
        return tuple(g(a, axis=d) for g in (jnp.argmax, jnp.argmin) for d in (0, 1, 2)) + (jnp.argmax(a),)

    exe = compile_cpu(f, x)
    assert exe.report.kernels and not exe.report.fallbacks
    got = check_backends_agree(f, x, exact=True)
    for k, (g, d) in enumerate([(np.argmax, d) for d in (0, 1, 2)] + [(np.argmin, d) for d in (0, 1, 2)]):
        np.testing.assert_array_equal(got[k], g(x, axis=d))  # NumPy: the first NaN, else the first best


@given(st.data())
def test_gathers_are_native_and_match_the_reference(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6))
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = shape[axis]
    idx = data.draw(hnp.arrays(np.int32, data.draw(st.sampled_from([(3,), (2, 2), ()])),
                               elements=st.integers(-2 * n, 2 * n)))  # out of bounds too
    mode = data.draw(st.sampled_from(["fill", "clip", None]))
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)

    def f(a, i):
        taken = jnp.take(a, i, axis=axis, mode=mode)
        filled = a.at[i].get(mode="fill", fill_value=-7.0)
        return taken * 2, filled, a[i % n] + 1

    exe = compile_cpu(f, x, idx)
    assert not exe.report.fallbacks
    check_backends_agree(f, x, idx, exact=True)


def test_batched_and_multi_index_gathers_are_native():
    x = np.arange(60, dtype=np.float32).reshape(5, 4, 3)
    rows = np.array([[0, 3], [1, 1], [3, 0], [2, 9], [-1, 2]], np.int32)

    def f(a, r):
        batched = ember.vmap(lambda m, i: m[i])(a, r)  # a gather with batching dimensions
        return batched, a[r[:, 0], r[:, 1] % 3], jnp.take_along_axis(a, jnp.abs(r)[:, :, None] % 4, axis=1)

    exe = compile_cpu(f, x, rows)
    assert not exe.report.fallbacks
    check_backends_agree(f, x, rows, exact=True)


@pytest.mark.parametrize("source, target", [
    (np.float32, np.int32), (np.int32, np.float32), (np.uint32, np.float32), (np.float64, np.int64),
    (np.uint64, np.float64), (np.float16, np.int16), (np.int16, np.float16), (BF16, np.uint16), (np.uint16, BF16)])
@pytest.mark.parametrize("n", [64, 5000])  # compiled without and with optimization
def test_same_width_bitcasts_keep_every_bit(source, target, n, x64):
    source, target = np.dtype(source), np.dtype(target)
    bits = np.random.default_rng(n).integers(0, 256, n * source.itemsize, dtype=np.uint8)
    x = bits.view(source)  # every pattern: NaN payloads, signalling NaNs, subnormals, infinities

    def f(a):
        return lax.bitcast_convert_type(a, target)

    native = source.itemsize > 2  # half types fall back: stores of half values would quiet NaNs
    assert bool(compile_cpu(f, x).report.fallbacks) != native
    got = np.asarray(ember.jit(f)(x))
    assert got.dtype == target
    np.testing.assert_array_equal(got.view(np.uint8), x.view(target).view(np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16, np.int8, np.uint8, np.int32, np.bool_])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("reverse", [False, True])
def test_running_reductions_are_native_and_bit_exact(dtype, axis, reverse):
    x = np.random.default_rng(axis).integers(-3, 4, (4, 7, 5)).astype(dtype)  # int8 sums wrap around
    if np.dtype(dtype).kind == "f" or dtype == BF16:
        x[1, 2, 3], x[2, 0, 0] = np.nan, np.inf
        x = (x * np.array(0.37, dtype)).astype(dtype)  # sums that round

    def f(a):
        scans = [lax.cummax(a, axis, reverse=reverse), lax.cummin(a, axis, reverse=reverse)]
        if dtype != np.bool_:
            scans += [lax.cumsum(a, axis, reverse=reverse), lax.cumprod(a, axis, reverse=reverse)]
        return tuple(scans)

    exe = compile_cpu(f, x)
    assert exe.report.kernels and not exe.report.fallbacks
    check_backends_agree(f, x, exact=True)


def test_large_running_sums_split_rows_over_threads_and_feed_other_kernels(monkeypatch):
    from ember.backends.cpu import threads

    monkeypatch.setattr(threads, "PARALLEL_MIN_WORK", 1 << 10)
    x = np.random.default_rng(4).integers(-5, 6, (300, 257)).astype(np.float32)

    def f(a):
        return jnp.cumsum(jnp.abs(a) * 0.5 + 1.0, axis=1) * 2.0, jnp.cumsum(a.ravel())[-1]

    exe = compile_cpu(f, x)
    assert not exe.report.fallbacks
    check_backends_agree(f, x, exact=True)
    inside = lambda a: lax.fori_loop(0, 3, lambda i, c: jnp.cumsum(c, axis=0) * 0.5, a)
    assert compile_cpu(inside, x).report.loops
    check_backends_agree(inside, x, exact=True)


@given(st.data())
def test_scatters_are_native_and_match_the_reference(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6))
    n = shape[0]
    count = data.draw(st.integers(1, 8))
    idx = data.draw(hnp.arrays(np.int32, (count,), elements=st.integers(-n - 2, n + 2)))  # duplicates, outside
    kind = data.draw(st.sampled_from(["set", "add", "mul", "min", "max"]))
    mode = data.draw(st.sampled_from(["clip", "drop", None]))
    dtype = data.draw(st.sampled_from([np.float32, np.int32, BF16]))
    x = np.random.default_rng(5).integers(-4, 5, shape).astype(dtype)
    updates = np.random.default_rng(6).integers(-4, 5, (count,) + shape[1:]).astype(dtype)

    def f(a, i, u):
        return getattr(a.at[i], kind)(u * 2, mode=mode) - 1

    exe = compile_cpu(f, x, idx, updates)
    assert not exe.report.fallbacks
    check_backends_agree(f, x, idx, updates, exact=True)


def test_batched_scatters_and_gather_gradients_are_native():
    x = np.linspace(-2, 2, 60, dtype=np.float32).reshape(5, 4, 3)
    rows = np.array([[0, 3], [1, 1], [3, 0], [2, 2], [0, 0]], np.int32)

    def f(a, r):
        batched = ember.vmap(lambda m, i: m.at[i].add(1.5))(a, r)  # batching dimensions
        gradient = ember.grad(lambda m: jnp.sum(m[r[:, 0]] * m[r[:, 1]]))(a)  # scatter-adds
        return batched, gradient

    exe = compile_cpu(f, x, rows)
    assert not exe.report.fallbacks
    check_backends_agree(f, x, rows, exact=True)


def test_empty_reductions_give_the_identity():
    x = np.zeros((0, 3), np.float32)
    check_backends_agree(lambda a: (jnp.sum(a, 0), jnp.max(a, 0, initial=-np.inf)), x)


@pytest.mark.parametrize("shapes, dims", [
    (((5, 7), (7, 6)), (((1,), (0,)), ((), ()))),
    (((7, 5), (6, 7)), (((0,), (1,)), ((), ()))),
    (((3, 5, 7), (3, 7, 6)), (((2,), (1,)), ((0,), (0,)))),
    (((40, 300), (300, 64)), (((1,), (0,)), ((), ()))),  # big enough for BLAS
    (((5, 7), (7,)), (((1,), (0,)), ((), ()))),
])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, BF16])
def test_dot_general_fused_or_blas_matches(shapes, dims, dtype):
    rng = np.random.default_rng(2)
    lhs, rhs = (rng.integers(-3, 4, s).astype(dtype) for s in shapes)
    tol = tolerance(dtype)
    check_backends_agree(lambda a, b: jnp.tanh(lax.dot_general(a, b, dims).astype(jnp.float32)) + 1, lhs, rhs, **tol)


# --- native code ------------------------------------------------------------------------------------
def selu(x):
    return 1.0507 * jnp.where(x > 0, x, 1.67326 * (jnp.exp(x) - 1))


def test_selu_is_one_vectorized_kernel():
    x = np.random.default_rng(3).standard_normal(1001).astype(np.float32)
    exe = compile_cpu(selu, x)
    assert len(exe.report.kernels) == 1 and not exe.report.fallbacks
    ir = str(exe.program.compiled.optimized_ir)
    assert " x float>" in ir, "the loop was not vectorized"
    check_backends_agree(selu, x)


_PERF_MAP_SCRIPT = """
import os, numpy as np, ember, ember.numpy as jnp
from ember.backends.cpu import jit
from ember.backends.cpu_backend import CpuExecutable
x = np.arange(4096, dtype=np.float32)
exe = CpuExecutable(ember.make_jaxpr(lambda a: jnp.exp(a) * 2.0 + 1.0)(x), "f")
step = exe.program.steps[0]
print(os.getpid(), step.name, jit.address(step.fn), exe.report.code.replace(" ", "_"))
"""


def test_perf_map_names_generated_and_loaded_kernels(tmp_path):
    """``EMBER_PERF_MAP=1`` names each function of generated machine code in /tmp/perf-<pid>.map
    (start, size, name: what ``perf`` reads), whether compiled or loaded from the disk cache."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "EMBER_PERF_MAP": "1", "EMBER_CACHE_DIR": str(tmp_path), "EMBER_BACKEND": "cpu"}
    for origin in ("compiled", "loaded from disk"):
        out = subprocess.run([sys.executable, "-c", _PERF_MAP_SCRIPT], env=env, capture_output=True, text=True,
                             check=True).stdout.split()
        pid, name, address, code = out[0], out[1], int(out[2]), out[3]
        assert ("disk" in code) == (origin == "loaded from disk"), code
        path = f"/tmp/perf-{pid}.map"
        try:
            entries = [line.split() for line in open(path)]
        finally:
            os.unlink(path)
        found = [(int(start, 16), int(size, 16)) for start, size, symbol in entries if symbol == f"ember:{name}"]
        assert found, (origin, name, entries)
        assert any(start <= address < start + size for start, size in found), (origin, address, found)


def test_kernels_that_compute_the_same_thing_are_generated_once():
    rng = np.random.default_rng(5)
    x, w = (rng.standard_normal((64, 64)).astype(np.float32) * 0.1 for _ in range(2))

    def layers(a, m):
        for i in range(12):  # each product ends a kernel: 5 alike, then the last one with the sum
            a = jnp.tanh(a @ m) * 0.5 + a if i % 2 == 0 else jnp.sin(a) * 1.01 + 0.1 * a
        return a.sum()

    exe = compile_cpu(layers, x, w)
    kernels = exe.report.kernels
    assert len(kernels) == 6 and len(set(kernels)) == 2 and exe.report.contractions == 6
    source = "".join(module.source for module in exe.program.modules)  # (in parts compiled at once)
    assert all(source.count(f'define void @"{name}"(') == 1 for name in kernels)  # each generated once
    check_backends_agree(layers, x, w, rtol=1e-5)


def test_softmax_is_one_kernel_with_vectorized_row_loops():
    x = np.random.default_rng(4).standard_normal((33, 129)).astype(np.float32)

    def softmax(a):
        e = jnp.exp(a - jnp.max(a, axis=-1, keepdims=True))
        return e / jnp.sum(e, axis=-1, keepdims=True)

    exe = compile_cpu(softmax, x)
    assert len(exe.report.kernels) == 1
    assert "fadd reassoc <" in str(exe.program.compiled.optimized_ir)
    check_backends_agree(softmax, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_division_by_a_row_value_multiplies_by_its_reciprocal_as_xla(dtype, x64):
    """In a kernel, a float division by a value of an outer loop (a row's sum, or a (n, 1)
    operand broadcast along rows) is a multiply by its reciprocal, computed once per row: JAX's
    bits (XLA rewrites a division by a broadcast so), within an ulp of the quotient, special
    values as x * (1 / s) gives them. Divisions by literals, by scalars and of equal shapes, and
    half-precision ones, divide."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 70)).astype(dtype)
    x[0, :4] = [0.0, np.inf, -np.inf, np.nan]
    tiny = np.finfo(dtype).smallest_subnormal
    s = rng.uniform(0.5, 4.0, (40, 1)).astype(dtype)
    s[1:6, 0] = [0.0, -0.0, np.inf, np.nan, tiny]
    one = dtype(1)
    with np.errstate(all="ignore"):
        by_reciprocal, quotient = x * (one / s), x / s
    got = np.asarray(ember.jit(lambda a, b: a / b)(x, s))
    np.testing.assert_array_equal(got, by_reciprocal)
    finite = np.isfinite(quotient) & (s > tiny)
    assert np.all(np.abs(got[finite] - quotient[finite]) <= np.spacing(np.abs(quotient[finite])))
    normalized = np.asarray(ember.jit(lambda a: a / jnp.sum(a, axis=-1, keepdims=True))(x[6:]))  # one kernel
    np.testing.assert_allclose(normalized, x[6:] / x[6:].sum(axis=-1, keepdims=True, dtype=np.float64),
                               rtol=100 * np.finfo(dtype).eps)
    jax = pytest.importorskip("jax")
    with jax.enable_x64(dtype == np.float64):
        np.testing.assert_array_equal(got, np.asarray(jax.jit(lambda a, b: a / b)(x, s)))
    y = rng.uniform(0.5, 4.0, (40, 70)).astype(dtype)
    scalar = dtype(3.0)
    with np.errstate(all="ignore"):
        for f, args, want in ((lambda a: a / 3.0, (x,), x / scalar), (lambda a, c: a / c, (x, scalar), x / scalar),
                              (lambda a, b: a / b, (x, y), x / y),
                              (lambda a, b: a / b, (x.astype(np.float16), s.astype(np.float16)),
                               x.astype(np.float16) / s.astype(np.float16))):
            np.testing.assert_array_equal(np.asarray(ember.jit(f)(*args)), want)


def test_scalar_fori_loop_is_one_native_loop():
    f = lambda x: lax.fori_loop(0, 100_000, lambda i, acc: acc * 0.999 + 1.0, x)  # noqa: E731
    exe = compile_cpu(f, np.float32(0))
    assert len(exe.report.loops) == 1 and not exe.report.fallbacks and not exe.report.kernels
    check_backends_agree(f, np.float32(0), rtol=1e-4)


def test_while_scan_and_cond_run_natively_and_match():
    def newton(a):
        def body(state):
            y, _ = state
            y_next = 0.5 * (y + a / y)
            return y_next, jnp.max(jnp.abs(y_next - y))
        return lax.while_loop(lambda s: s[1] > 1e-6, body, (a, jnp.asarray(1.0, jnp.float32)))[0]

    def rnn(w, xs, h):
        return lax.scan(lambda h, x: (jnp.tanh(h @ w + x), h.sum()), h, xs, reverse=True)

    def branches(p, x):
        return lax.fori_loop(0, 7, lambda i, c: lax.cond(i % 3 == 0, lambda c: c + p, lambda c: c * 1.5, c), x)

    def swap(x, y):
        return lax.fori_loop(0, 5, lambda i, c: (c[1], c[0] + i.astype(jnp.float32)), (x, y))

    rng = np.random.default_rng(5)
    cases = [(newton, rng.uniform(1, 50, 300).astype(np.float32)),
             (rnn, rng.standard_normal((6, 6)).astype(np.float32) * 0.3,
              rng.standard_normal((9, 1, 6)).astype(np.float32), np.zeros((1, 6), np.float32)),
             (branches, np.float32(0.5), np.float32(1.0)),
             (swap, np.float32(1.0), np.float32(2.0))]
    for f, *args in cases:
        assert compile_cpu(f, *args).report.loops, f.__name__
        check_backends_agree(f, *args)


def test_large_carries_trade_buffers_and_match():
    """Carries larger than a stack slot live in two buffers that trade roles each iteration (the
    body writes the next value into the one it does not read), and a scan's stacked outputs are
    written in place: swapped carries, carries passed through, one value to two carries or to a
    carry and an output, views, literals, nested and empty loops give the reference's bits."""
    rng = np.random.default_rng(11)
    x, y = (rng.standard_normal((8, 40)).astype(np.float32) for _ in range(2))

    def swapped(a, b):
        return lax.fori_loop(0, 5, lambda i, c: (c[1] * 0.5, c[0] + i.astype(jnp.float32)), (a, b))

    def passed_through(a, b):
        return lax.fori_loop(0, 4, lambda i, c: (c[0], c[1] * 1.5 + c[0], c[1]), (a, b, b))

    def one_value_twice(a, b):
        def body(c, row):
            new = c[0] * 0.75 + row
            return (new, new, c[0].reshape(40, 8).reshape(8, 40)), (new, new, c[1], 2.0, row * 3.0)
        return lax.scan(body, (a, b, a), jnp.stack([a, b, a + b]))

    def in_a_while(a, b):
        def body(state):
            i, u, v = state
            inner = lax.scan(lambda c, r: (c * 0.5 + r, c.sum()), u, jnp.stack([v, u]))
            return i + 1, v - inner[0], inner[0]
        return lax.while_loop(lambda s: (s[0] < 6) & (jnp.max(jnp.abs(s[1])) < 1e6), body, (0, a, b))

    def reversed_and_empty(a, b):
        forward = lax.scan(lambda c, r: (c * 0.5 - r, c + r), a, jnp.stack([b, a, b]), reverse=True)
        return forward, lax.scan(lambda c, r: (c + r, c), a, jnp.zeros((0, 8, 40), jnp.float32))

    for f in (swapped, passed_through, one_value_twice, in_a_while, reversed_and_empty):
        exe = compile_cpu(f, x, y)
        assert exe.report.loops and not exe.report.fallbacks, f.__name__
        check_backends_agree(f, x, y, exact=True)


@pytest.mark.parametrize("length", [0, 1, 2, 3, 4])
def test_large_carries_read_their_initial_value_in_place_and_leave_it(length):
    """A large carry's first iteration reads the initial value where it is and writes only the
    loop's buffers (its output among them): for any count of iterations, odd or even, in a scan
    and in a while loop, the initial value is intact after the loop and the result is the
    reference's, also beside a carry that accumulates a product in place."""
    rng = np.random.default_rng(length)
    a, b = (rng.standard_normal((16, 24)).astype(np.float32) for _ in range(2))
    kept = a.copy()

    def scanned(a, b):
        r = lax.fori_loop(0, length, lambda i, c: c * 0.5 + b, a)
        return r, a * 2.0 + r * 0.0

    def counted(a, b, n):
        def body(state):
            i, c, total = state
            return i + 1, c * 0.5 - b, total + c.T @ b
        i, r, total = lax.while_loop(lambda s: s[0] < n, body, (0, a, jnp.zeros((24, 24), jnp.float32)))
        return r, total, a * 2.0 + r * 0.0

    for f, args in ((scanned, (a, b)), (counted, (a, b, np.int32(length)))):
        exe = compile_cpu(f, *args)
        assert exe.report.loops and not exe.report.fallbacks
        check_backends_agree(f, *args, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(a, kept)


def test_unlowered_work_falls_back_visibly(caplog):
    def f(x):
        return jnp.sort(jnp.exp(x))[::-1] * 2.0

    x = np.random.default_rng(6).standard_normal(50).astype(np.float32)
    with ember.config.override(log_compiles=True, backend="cpu"), caplog.at_level("WARNING", logger="ember"):
        ember.jit(f)(x)
    log = "\n".join(r.getMessage() for r in caplog.records)
    assert "fell back to the reference interpreter: sort" in log
    times = next(line for line in log.splitlines() if line.startswith("ember cpu: compiled f:")).split(";")[1]
    for stage in ("expand", "optimize", "products", "fuse", "plan", "codegen", "compile", "link"):
        assert f" {stage} " in times  # (each stage's time: "plan 0.2 ms")
    check_backends_agree(f, x)


def test_temporaries_share_memory_when_lifetimes_allow():
    w = np.eye(64, dtype=np.float32)

    def f(x):
        for _ in range(4):
            x = jnp.tanh(x @ w) * 2.0
        return x

    exe = compile_cpu(f, np.ones((64, 64), np.float32))
    temporaries = len(exe.program.arena_views)
    assert temporaries >= 4 and exe.program.arena_bytes <= 2 * 64 * 64 * 4
    check_backends_agree(f, np.random.default_rng(7).standard_normal((64, 64)).astype(np.float32))


@pytest.mark.parametrize("f, numpy_f", [
    (lambda a: jnp.exp(a) - jnp.sum(a, axis=1, keepdims=True), lambda a: np.exp(a) - a.sum(1, keepdims=True)),
    (lambda a: jnp.sum(a, axis=0) * 2.0, lambda a: a.sum(0) * 2),  # a row of column sums, split
    (lambda a: jnp.exp(a[0]) / jnp.sum(jnp.exp(a[0])), lambda a: np.exp(a[0]) / np.exp(a[0]).sum()),
])
@pytest.mark.parametrize("openmp", [True, False])
def test_large_kernels_split_over_threads_and_agree(monkeypatch, f, numpy_f, openmp):
    """Split by an OpenMP team started from the generated code, or (without libgomp) by the
    Python thread pool."""
    from ember.backends.cpu import threads

    if openmp and not threads.openmp_available():
        pytest.skip("libgomp is not installed")
    monkeypatch.setattr(threads, "openmp_available", lambda: openmp)
    monkeypatch.setattr(threads, "thread_count", lambda: 4)
    monkeypatch.setattr(threads, "PARALLEL_MIN_WORK", 64)  # split even these small kernels
    x = np.random.default_rng(8).standard_normal((300, 1000)).astype(np.float32)
    exe = compile_cpu(f, x)
    assert any(step.chunks > 1 and step.team == openmp for step in exe.program.steps if hasattr(step, "chunks"))
    assert_allclose(exe(x)[0], numpy_f(x), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("shape, f", [
    ((80, 80), lambda a: a.T * 2.0 + 1.0),
    ((100, 70), lambda a: jnp.maximum(a.T * a.T, 0.5) - a.T),  # edges of tiles on both axes
    ((3, 70, 130), lambda a: jnp.transpose(a, (0, 2, 1)) * 3.0),
    ((70, 130, 3), lambda a: jnp.abs(jnp.transpose(a, (2, 1, 0))) + 1.0),
])
def test_transposing_kernels_walk_tiles_and_split_over_threads(monkeypatch, shape, f):
    """A kernel that transposes its last axis walks tiles (the last axis' outside): every element
    is written once, also where the threads split the tiles of the dimension before it (exact
    operations: the same bits as the reference)."""
    from ember.backends.cpu import kernel, threads

    monkeypatch.setattr(threads, "thread_count", lambda: 3)
    monkeypatch.setattr(threads, "PARALLEL_MIN_WORK", 64)
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    exe = compile_cpu(f, x)
    assert len(exe.report.kernels) == 1 and kernel._tiled_dims(ember.make_jaxpr(f)(x).jaxpr)
    assert exe.program.steps[0].chunks > 1
    check_backends_agree(f, x, exact=True)


@pytest.mark.parametrize("shape, dtype, tiled", [
    ((64, 64), np.float32, False), ((2, 64, 64), np.float32, False), ((64, 64), np.float64, True),
    ((64, 65), np.float32, True),
])
def test_transposes_that_fit_in_the_l1_cache_walk_no_tiles(shape, dtype, tiled):
    """A transposing kernel whose last two axes hold at most ``UNTILED_BYTES`` walks plain loops
    (they compile in a fifth of the time); larger ones walk tiles. The values are the same."""
    from ember.backends.cpu import kernel

    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    f = lambda a: jnp.swapaxes(a, -1, -2) * 2.0  # noqa: E731
    with ember.config.override(enable_x64=True):
        assert bool(kernel._tiled_dims(ember.make_jaxpr(f)(x).jaxpr)) == tiled
        check_backends_agree(f, x, exact=True)


@pytest.mark.parametrize("given, wanted", [(None, "3000"), ("0", "0"), ("250000", "250000")])
def test_team_threads_spin_briefly_unless_the_user_chose(given, wanted):
    """libgomp reads GOMP_SPINCOUNT when it loads (at the first native compile): ember sets its
    short spin where the user set neither it nor OMP_WAIT_POLICY, and keeps the user's value."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    if given is not None:
        env["GOMP_SPINCOUNT"] = given
    script = ("import os, ember, ember.numpy as jnp\n"
              "from ember.backends.cpu import threads\n"
              "threads.openmp_available()\n"
              "print(os.environ.get('GOMP_SPINCOUNT'), threads.SPIN_COUNT)")
    spin, default = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                                   check=True).stdout.split()
    assert spin == wanted and (given is not None or spin == default)


def test_large_full_reductions_are_computed_in_parallel_parts(monkeypatch):
    from ember.backends.cpu import codegen as program, threads

    monkeypatch.setattr(threads, "thread_count", lambda: 2)
    monkeypatch.setattr(threads, "PARALLEL_MIN_WORK", 64)
    monkeypatch.setattr(program, "SPLIT_REDUCTION", 1000)
    x = np.random.default_rng(10).integers(-50, 50, (48, 100)).astype(np.float32)
    for f in (lambda a: jnp.sum(a * a), lambda a: jnp.max(jnp.abs(a[:, ::3])), lambda a: jnp.sum(a.astype(jnp.int32))):
        exe = compile_cpu(f, x)
        assert len(exe.report.kernels) == 2 and exe.program.steps[0].chunks == 2
        check_backends_agree(f, x, exact=True)  # integral values: every summation order is exact


def test_outputs_are_fresh_immutable_arrays():
    x = np.arange(6, dtype=np.float32)
    with ember.config.override(backend="cpu"):
        out_a = ember.jit(lambda a: (a + 1, a))(x)
    assert not np.asarray(out_a[0]).flags.writeable
    x[0] = 100.0  # the caller's buffer was copied, not aliased
    assert float(out_a[1][0]) == 0.0


# --- random fusible programs --------------------------------------------------------------------------
DTYPES = [np.float32, np.int32, np.uint8, BF16, np.float16]


@st.composite
def fusible_programs(draw):
    """A random chain of elementwise ops, broadcasts, reductions over random axes, transposes,
    slices and conversions, over odd-sized inputs of mixed dtypes."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9))
    other_shape = tuple(draw(st.sampled_from([1, n])) for n in shape)
    dtypes = [draw(st.sampled_from(DTYPES)), draw(st.sampled_from(DTYPES))]
    steps = draw(st.lists(st.sampled_from(["add", "mul", "max", "where", "exp", "abs", "neg", "reduce", "transpose",
                                           "slice", "convert", "square", "compare", "argmax", "cumsum"]),
                          min_size=1, max_size=6))
    axes_seed = draw(st.integers(0, 2 ** 16))
    # Small integral values: sums are exact in every float type, whatever the order.
    x = draw(hnp.arrays(np.int8, shape, elements=st.integers(-4, 4))).astype(dtypes[0])
    y = draw(hnp.arrays(np.int8, other_shape, elements=st.integers(0, 4))).astype(dtypes[1])

    def broadcasts(u, w) -> bool:
        try:
            return np.broadcast_shapes(u.shape, w.shape) == u.shape
        except ValueError:
            return False

    def program(a, b):
        rng = np.random.default_rng(axes_seed)
        v = a
        for step in steps:
            if step == "add":
                v = v + b if broadcasts(v, b) else v + 1
            elif step == "mul":
                v = v * (b if broadcasts(v, b) else 2)
            elif step == "max":
                v = jnp.maximum(v, 0.5)
            elif step == "where":
                v = jnp.where(v > 1, v, -v)
            elif step == "exp":
                v = jnp.exp(jnp.minimum(v.astype(jnp.float32), 8.0))
            elif step == "abs":
                v = jnp.abs(v)
            elif step == "neg":
                v = -v
            elif step == "square":
                v = v * v
            elif step == "compare":
                v = (v >= 1).astype(jnp.int32)
            elif step == "reduce" and v.ndim:
                axes = tuple(int(i) for i in rng.permutation(v.ndim)[:rng.integers(1, v.ndim + 1)])
                reducer = [jnp.sum, jnp.max, jnp.min][rng.integers(3)] if v.size else jnp.sum
                v = reducer(v, axis=axes, keepdims=bool(rng.integers(2)))
            elif step == "transpose" and v.ndim > 1:
                v = jnp.transpose(v, tuple(int(i) for i in rng.permutation(v.ndim)))
            elif step == "slice" and v.ndim:
                v = v[..., ::-2] if rng.integers(2) else v[1:]
            elif step == "cumsum" and v.ndim:
                scan = [lax.cumsum, lax.cummax][rng.integers(2)]
                v = scan(v, int(rng.integers(v.ndim)), reverse=bool(rng.integers(2)))
            elif step == "argmax" and v.ndim and v.size:
                v = [jnp.argmax, jnp.argmin][rng.integers(2)](v, axis=int(rng.integers(v.ndim)))
            elif step == "convert":
                v = v.astype([jnp.float32, jnp.int32, jnp.bfloat16][rng.integers(3)])
        return v

    program.__name__ = "_".join(steps)  # shown in hypothesis' falsifying example
    return program, x, y


@pytest.mark.parametrize("optimized", [True, False])
@given(fusible_programs())
def test_random_fusible_programs_agree_with_the_reference(optimized, case):
    """Both ways of compiling: optimized and vectorized, and quick (unoptimized, small programs)."""
    from ember.backends.cpu import codegen as cpu_program

    program, x, y = case
    note(f"steps: {program.__name__}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cpu_program, "QUICK_WORK", -1 if optimized else 1 << 30)
        got, = ember.tree_util.tree_leaves(run("cpu", program, x, y))
    want, = ember.tree_util.tree_leaves(run("reference", program, x, y))
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        tol = tolerance(want.dtype)
        scale = 1 + float(np.nanmax(np.abs(want.astype(np.float64)), initial=0))
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), equal_nan=True,
                                   rtol=max(tol["rtol"], 1e-5), atol=max(tol["atol"], 1e-5) * scale)


def _layouts(x: np.ndarray):
    """``x`` itself and the same values as a transposed view (strided rows)."""
    return [x, np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_matrix_product_on_odd_shapes_and_strides(dtype):
    from ember.backends.cpu import gemm

    rng = np.random.default_rng(9)
    cases = [((1, 5, 7), (1, 7, 3)), ((2, 13, 300), (2, 300, 47)), ((1, 70, 1), (1, 1, 33)), ((3, 6, 9), (3, 9, 64))]
    for a_shape, b_shape in cases:
        a, b = rng.standard_normal(a_shape).astype(dtype), rng.standard_normal(b_shape).astype(dtype)
        for lhs in _layouts(a):
            for rhs in _layouts(b):
                for parts in (1, 3):  # one thread, and rows split over three
                    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), dtype)
                    gemm.matmul(lhs, rhs, out, parts)
                    np.testing.assert_allclose(out, a @ b, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-4)


# --- trigonometric kernels: Cody-Waite first, the exact reduction again where it cannot -----------
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_trig_kernels_give_the_exact_reductions_bits_on_both_sides_of_medium(name, dtype, x64):
    """A kernel reduces by Cody-Waite's method and computes a range again, with Payne-Hanek's
    reduction, where an argument was beyond ``vecmath.MEDIUM``: the bits of the exact reduction
    (``compile_kernel``'s loop uses it for every argument) for small, large and mixed arrays."""
    rng = np.random.default_rng(5)
    small = rng.uniform(-vecmath.MEDIUM, vecmath.MEDIUM, 4000)
    edges = np.array([vecmath.MEDIUM, -vecmath.MEDIUM, np.nextafter(vecmath.MEDIUM, 0), 0.0, -0.0, 1e-30,
                      np.inf, -np.inf, np.nan])
    large = rng.choice([-1, 1], 300) * 10.0 ** rng.uniform(5.8, 37, 300)
    mixed = rng.permutation(np.concatenate([small, large]))
    exact = compile_kernel(name, dtype)
    f = ember.jit(getattr(jnp, name))
    for x in (small, large, mixed, edges, np.concatenate([small, edges])):
        x = x.astype(dtype)
        want = exact(x)
        got = np.asarray(f(x))
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)
        # (a donated argument is not written over: the kernel may read it again)
        donated = ember.jit(lambda v: getattr(jnp, name)(v) * 2, donate_argnums=0)
        np.testing.assert_array_equal(np.asarray(donated(ember.device_put(x))), want * 2)


def test_only_kernels_with_trigonometry_have_an_exact_version():
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    with_sin = ember.jit(lambda v: jnp.sin(v) * v + 1).lower(x).compile().as_text("llvm")
    without = ember.jit(lambda v: jnp.exp(v) * v + 1).lower(x).compile().as_text("llvm")
    assert "_exact_body" in with_sin and "_exact_body" not in without
