"""Complex numbers in native code: every lowered complex operation, jitted on the CPU backend with
no reference fallback, against the reference interpreter (NumPy) and against NumPy in complex128;
the overflow cases of products, quotients and moduli; reductions, index operations, loops with
complex carries and complex products."""
from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
from test_cpu_backend import compile_cpu, run

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu_backend import CpuExecutable

C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)


def native(f, *args):
    """``f`` compiled by the CPU backend, after checking that its program has no fallback, and run
    (the executable itself: compiled once, as ``jit`` would compile it)."""
    closed, shapes = ember.make_jaxpr(f, return_shape=True)(*args)
    exe = CpuExecutable(closed, getattr(f, "__name__", "f"))
    assert not exe.report.fallbacks, exe.report.fallbacks
    outs = exe(*ember.tree_util.tree_leaves(args))
    return ember.tree_util.tree_unflatten(ember.tree_util.tree_structure(shapes), [np.asarray(o) for o in outs])


def same(got, want) -> None:
    """Equal dtypes and shapes, and equal parts (NaN equal to NaN, whatever its sign)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "c":
        got, want = np.stack([got.real, got.imag]), np.stack([want.real, want.imag])
    np.testing.assert_array_equal(got, want)


def parts(dtype, finite: bool = False):
    """One part of a complex value: anything of the part type, huge, tiny and special values often."""
    part = np.float32 if dtype == C64 else np.float64
    width = 32 if part is np.float32 else 64
    edges = [0.0, -0.0, 1.0, -2.5, 1e-30, -1e30, float(np.finfo(part).max), float(np.finfo(part).tiny),
             float(np.finfo(part).smallest_subnormal)]
    if not finite:
        edges += [np.inf, -np.inf, np.nan]
    return st.one_of(st.sampled_from(edges),
                     st.floats(width=width, allow_nan=not finite, allow_infinity=not finite))


def complex_arrays(dtype, n: int = 8, finite: bool = False):
    def build(re, im):
        z = np.empty(n, dtype)
        z.real, z.imag = re, im
        return z
    return st.builds(build, *(hnp.arrays(np.float32 if dtype == C64 else np.float64, n, elements=parts(dtype, finite))
                              for _ in range(2)))


def both(f, *args):
    """``f`` on both backends, the native one with no fallback."""
    return native(f, *args), run("reference", f, *args)


# --- arithmetic, bit for bit against NumPy's formulas ------------------------------------------
BINARY = {"add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "eq": lax.eq, "ne": lax.ne}


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_binary_arithmetic_matches_the_reference_bit_for_bit(name, data):
    x, y = data.draw(complex_arrays(C64)), data.draw(complex_arrays(C64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same(*both(BINARY[name], x, y))


UNARY = {"neg": lax.neg, "conj": lax.conj, "real": lax.real, "imag": lax.imag, "sign": lax.sign,
         "to_c128": lambda z: lax.convert_element_type(z, np.complex128),
         "to_f32": lambda z: lax.convert_element_type(z, np.float32),
         "to_bool": lambda z: lax.convert_element_type(z, np.bool_),
         "cube": lambda z: lax.integer_pow(z, 3), "square": lambda z: lax.integer_pow(z, 2),
         "pow7": lambda z: lax.integer_pow(z, 7), "pow_minus2": lambda z: lax.integer_pow(z, -2),
         "select": lambda z: lax.select(lax.real(z) > 0, z, lax.conj(z))}


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_unary_operations_match_the_reference_bit_for_bit(name, data):
    # sign (computed on doubles: NumPy's complex64 |z| overflows for huge parts) and powers (NumPy's
    # power rounds its products differently) within an ulp or two, on finite values of moderate size
    close = name in ("sign", "cube", "square", "pow7", "pow_minus2")
    z = data.draw(complex_arrays(C64, finite=close))
    if close:
        size = np.abs(z.view(np.float32)).reshape(-1, 2).max(1)
        z = np.where((size < 1e4) & ((size > 1e-30) | (size == 0)), z, 1 + 3j).astype(C64)
    with warnings.catch_warnings(), ember.config.override(enable_x64=True):
        warnings.simplefilter("ignore")
        got, want = both(UNARY[name], z)
        if close:
            np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-30)
        else:
            same(got, want)


def test_conversions_between_real_and_complex_types(x64):
    x = np.array([1.5, -0.0, np.inf, np.nan], np.float32)
    same(native(lambda v: lax.convert_element_type(v, np.complex64), x), x.astype(C64))
    pairs = np.empty(4, C64)
    pairs.real, pairs.imag = x, x * 2
    same(native(lambda v: lax.complex(v, v * 2), x), pairs)
    z = np.empty(4, C128)
    z.real, z.imag = x, x[::-1]
    same(native(lambda v: lax.convert_element_type(v, np.complex64), z), z.astype(C64))
    same(native(lambda v: lax.conj(v), x), np.conj(x.astype(C64)))
    same(native(lambda v: v * 1j + 2, x), run("reference", lambda v: v * 1j + 2, x))


def test_products_quotients_and_moduli_do_not_overflow_where_numpy_does_not():
    big = np.array([1e30 + 1e30j, 1e30 - 3e38j, 1e-30 + 1e-30j, 1e-38 - 3e-39j], C64)
    quotients = native(lambda a, b: a / b, big, big)
    same(quotients, big / big)  # Smith's algorithm, NumPy's bits
    np.testing.assert_allclose(quotients, np.ones(4), rtol=1.2e-7)
    assert native(lambda a, b: a / b, big[:1], np.array([2e30 + 0j], C64))[0] == np.complex64(0.5 + 0.5j)
    moduli = native(jnp.abs, np.array([3e38 + 3e38j, 2e38 + 2e38j, 1e-45 + 1e-45j, 3 + 4j], C64))
    assert moduli[0] == np.inf  # the true modulus, 4.2e38, is past float32's largest
    assert moduli[1] == np.float32(np.abs(np.complex128(2e38 + 2e38j)))
    assert moduli[2] == np.float32(np.abs(np.complex128(np.complex64(1e-45 + 1e-45j))))
    assert moduli[3] == 5
    with ember.config.override(enable_x64=True):
        z = np.array([1e308 + 1e308j, 1e-310 + 1e-310j, complex(np.inf, np.nan), complex(np.nan, 0)], C128)
        got = native(jnp.abs, z)
        np.testing.assert_allclose(got[:2], [np.sqrt(2) * 1e308, np.sqrt(2) * 1e-310], rtol=1e-15)
        assert got[2] == np.inf and np.isnan(got[3])
        with np.errstate(all="ignore"):
            same(native(lambda a: a / a, z), z / z)  # (NumPy's Smith overflows here too: NaN, inf)


# --- math functions: ulps against NumPy in complex128 ----------------------------------------
FUNCTIONS = ["exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "expm1", "log1p", "exp2",
             "rsqrt", "logistic", "abs"]
def _in_40_digits(f):
    """``f`` in 40 digits (NumPy's complex log1p is the log of a rounded 1 + z, its exp2 rounds z ln 2)."""
    def exact(z: np.ndarray) -> np.ndarray:
        with mpmath.workdps(40):
            return np.array([complex(f(mpmath.mpc(complex(v)))) for v in z.ravel()]).reshape(z.shape)
    return exact


NUMPY = {"rsqrt": lambda z: 1 / np.sqrt(z), "logistic": lambda z: 1 / (1 + np.exp(-z)),
         "log1p": _in_40_digits(mpmath.log1p), "exp2": _in_40_digits(lambda v: mpmath.power(2, v))}
# The bound on each part's error, in ulps of the larger part (docs/vecmath.md has the measured ones).
ULPS = {C64: 2, C128: 8}


def _ulp_error(got: np.ndarray, exact: np.ndarray, dtype: np.dtype) -> float:
    part = np.float32 if dtype == C64 else np.float64
    exact = exact.astype(np.complex128)
    scale = np.maximum(np.abs(exact.real), np.abs(exact.imag)) if exact.dtype.kind == "c" else np.abs(exact)
    ulp = np.spacing(np.maximum(scale, np.finfo(part).tiny).astype(part)).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.complex128) - exact) / ulp))


def _samples(dtype: np.dtype, n: int = 2000) -> np.ndarray:
    rng = np.random.default_rng(1)
    r = np.exp(rng.uniform(-20, 4, n)) * rng.choice([-1, 1], n)
    z = r * np.exp(1j * rng.uniform(-np.pi, np.pi, n))
    z[: n // 10] = rng.uniform(-1, 1, n // 10) * 1e-3 + 1j * rng.uniform(-1, 1, n // 10)  # near the axes
    return z.astype(dtype)


@pytest.mark.parametrize("dtype", [C64, C128])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_math_functions_are_within_their_ulp_bound(name, dtype, x64):
    z = _samples(dtype)
    if name in ("sinh", "cosh", "tanh", "exp", "expm1", "exp2", "logistic"):
        z = (z.real.clip(-30, 30) + 1j * z.imag).astype(dtype)
    if name in ("sin", "cos", "tan"):
        z = (z.real + 1j * z.imag.clip(-30, 30)).astype(dtype)
    f = getattr(jnp, name) if hasattr(jnp, name) else getattr(lax, name)
    got = native(lambda v: f(v), z)
    with np.errstate(all="ignore"):
        exact = NUMPY.get(name, getattr(np, name, None))(z.astype(C128))
    assert _ulp_error(got, exact, dtype) <= ULPS[dtype] * (4 if name in ("logistic", "rsqrt", "tan", "tanh") else 1)


SPECIAL = [0.0, -0.0, 1.0, -2.5, 1e-30, 1e30, 800.0, -800.0, np.inf, -np.inf, np.nan]
GRID = np.array([complex(a, b) for a in SPECIAL for b in SPECIAL])


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "abs", "sign"])
def test_special_values_are_numpys(name, x64):
    """Infinities, NaN, signed zeros and huge or tiny parts in either part, as NumPy (C99) gives them
    (in complex128; NaN's sign does not matter, finite parts within a few ulps)."""
    z = GRID.astype(C128)
    with np.errstate(all="ignore"):
        got, want = native(getattr(jnp, name), z), getattr(np, name)(z)
    # where both parts are infinite or NaN, or a part is NaN, C99 leaves the signs unspecified
    unspecified = (~np.isfinite(z.real) & ~np.isfinite(z.imag)) | np.isnan(z.real) | np.isnan(z.imag)
    got, want = (np.stack([v.real, v.imag]) if v.dtype.kind == "c" else v[None] for v in (got, want))
    got, want = (np.where(unspecified, np.abs(v), v) for v in (got, want))
    exact = ~np.isfinite(want) | (want == 0)
    np.testing.assert_array_equal(np.where(exact, got, 0), np.where(exact, want, 0))
    np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))
    np.testing.assert_allclose(got[~exact], want[~exact], rtol=1e-14)


def test_expm1_and_log1p_are_accurate_where_numpys_formulas_are_not(x64):
    z = np.array([1e-30 + 0j, 1e-30j, 800 + 0j], C128)
    got = native(jnp.log1p, z[:2])
    np.testing.assert_allclose(got.real, [1e-30, 5e-61], rtol=1e-15)
    np.testing.assert_allclose(got.imag, [0, 1e-30], rtol=1e-15)
    same(native(jnp.expm1, z[2:]), np.array([np.inf + 0j]))  # NumPy: inf + nan j


def test_branch_cuts_follow_the_sign_of_zero():
    z = np.array([-4 + 0j, complex(-4, -0.0), -1 + 0j, complex(-1, -0.0)], C64)
    same(native(jnp.sqrt, z), np.sqrt(z))
    np.testing.assert_allclose(native(jnp.log, z), np.log(z.astype(C128)), rtol=1e-7)


# --- chains, reductions, index operations --------------------------------------------------------
def test_elementwise_chains_fuse_into_one_kernel():
    z = _samples(C64, 64)
    for f in (lambda v: jnp.exp(1j * v) * v + jnp.conj(v) / (v + 2), lambda v: jnp.abs(v) ** 2 + jnp.real(v * v)):
        report = compile_cpu(f, z).report
        assert not report.fallbacks and len(report.kernels) == 1
        got, want = both(f, z)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("f", [
    lambda v: jnp.sum(v, axis=0), lambda v: jnp.sum(v, axis=1), lambda v: jnp.sum(v * v),
    lambda v: jnp.prod(v[:3], axis=0), lambda v: jnp.cumsum(v, axis=1), lambda v: jnp.cumprod(v[:, :4], axis=1),
    lambda v: lax.cumsum(v, axis=0, reverse=True),
], ids=["sum0", "sum1", "sum_all", "prod", "cumsum", "cumprod", "cumsum_reverse"])
def test_complex_reductions_and_running_reductions(f):
    z = _samples(C64, 6 * 10).reshape(6, 10) / 10
    got, want = both(f, z)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


INDEXED = [
    lambda v, i: v.T[::-1] * 2j, lambda v, i: jnp.concatenate([v, jnp.conj(v)], axis=1),
    lambda v, i: jnp.pad(v, ((1, 2), (0, 1))) + 1, lambda v, i: v[i], lambda v, i: v[:, i] * v[:, :4],
    lambda v, i: lax.dynamic_slice(v, (i[0], 1), (2, 3)), lambda v, i: v.at[i].add(1j),
    lambda v, i: v.at[i, 0].set(v[0, 0]), lambda v, i: v.at[i].multiply(v[0] / 2),
    lambda v, i: jnp.broadcast_to(v[0], (3, 6)) + v[:3],
    lambda v, i: jnp.where(jnp.real(v) > 0, v, jnp.zeros_like(v)),
]


@pytest.mark.parametrize("f", INDEXED, ids=["transpose_rev", "concatenate", "pad", "gather", "gather_columns",
                                             "dynamic_slice", "scatter_add", "scatter", "scatter_mul", "broadcast",
                                             "where"])
def test_complex_index_operations(f):
    z = _samples(C64, 36).reshape(6, 6)
    i = np.array([3, 1, 4, 1], np.int32)
    got, want = both(f, z, i)
    if want.dtype.kind == "c" and f is INDEXED[8]:  # NumPy's multiply.at rounds without fused multiply-adds
        np.testing.assert_allclose(got, want, rtol=3e-7)
    else:
        same(got, want)


# --- loops and products ------------------------------------------------------------------------
def test_loops_with_complex_carries_are_native():
    z = _samples(C64, 16)

    def rotate(v):
        return lax.fori_loop(0, 5, lambda k, c: c * jnp.exp(0.1j * k) + v / 8, v)

    def scan(v):
        return lax.scan(lambda c, x: (c * 0.5 + x, jnp.abs(c)), v[:4], v.reshape(4, 4))

    def cond(v):
        return lax.cond(jnp.real(v[0]) > 0, lambda u: u * 1j, jnp.conj, v)

    for f in (rotate, scan, cond):
        report = compile_cpu(f, z).report
        assert report.loops and not report.fallbacks, (report.loops, report.fallbacks)
        got, want = both(f, z)
        for g, w in zip(ember.tree_util.tree_leaves(got), ember.tree_util.tree_leaves(want)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [((4, 5), (5, 3)), ((2, 8, 16), (2, 16, 8)), ((160, 160), (160, 160))],
                         ids=["small", "batched", "large"])
@pytest.mark.parametrize("dtype", [C64, C128])
def test_complex_products(shape, dtype, x64):
    rng = np.random.default_rng(0)
    a, b = ((rng.standard_normal(s) + 1j * rng.standard_normal(s)).astype(dtype) for s in shape)
    f = lambda x, y: jnp.matmul(x, y) + 1j  # noqa: E731
    report = compile_cpu(f, a, b).report
    assert not report.fallbacks
    got = native(f, a, b)
    exact = np.matmul(a.astype(C128), b.astype(C128)) + 1j
    tol = 1e-5 if dtype == C64 else 1e-12
    np.testing.assert_allclose(got, exact, rtol=tol, atol=tol * np.abs(exact).max())


def test_native_dispatch_of_complex_arrays():
    f = ember.jit(lambda v: v * v + 1j)
    z = jnp.asarray(_samples(C64, 8))
    first, second = np.asarray(f(z)), np.asarray(f(z))
    same(first, second)
    same(first, np.asarray(z) * np.asarray(z) + np.complex64(1j))


# --- inverse functions, pow, max and min ---------------------------------------------------------
INVERSE = ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"]
MPMATH_INVERSE = {"arcsin": mpmath.asin, "arccos": mpmath.acos, "arctan": mpmath.atan, "arcsinh": mpmath.asinh,
                  "arccosh": mpmath.acosh, "arctanh": mpmath.atanh}
# c ** c, and real exponents (complex ** real promotes the exponent), in one kernel each
NEW_OPERATIONS = {**{name: getattr(jnp, name) for name in INVERSE},
                  "pow": lambda v: v ** (v * 0.5 + 1j), "pow_real": lambda v: v ** 2.5,
                  "max": lambda v: lax.max(v, v * 1j), "min": lambda v: lax.min(v, jnp.conj(v))}


@pytest.mark.parametrize("dtype", [C64, C128])
@pytest.mark.parametrize("name", sorted(NEW_OPERATIONS))
def test_inverse_functions_pow_and_ordering_are_native_and_vectorized(name, dtype, x64):
    z = (np.arange(257) * (0.01 + 0.02j) - 1.5).astype(dtype)
    exe = compile_cpu(NEW_OPERATIONS[name], z)
    assert not exe.report.fallbacks and len(exe.report.kernels) == 1, (exe.report.fallbacks, exe.report.kernels)
    vector = " x float>" if dtype == C64 and name in ("max", "min") else " x double>"
    assert vector in str(exe.program.compiled.optimized_ir), "the loop was not vectorized"


def _mpc(v: complex):
    """``v`` for mpmath, at enough digits for its smaller part (mpmath's formulas cancel as much as the
    ratio of the parts); a zero part as +-1e-2000, which picks its side of a branch cut."""
    parts = [abs(p) for p in (v.real, v.imag) if p != 0]
    mpmath.mp.dps = 40 + int(2 * max((abs(np.log10(p)) for p in parts), default=0))
    tiny = mpmath.mpf(10) ** -2000
    return mpmath.mpc(*((-tiny if np.signbit(p) else tiny) if p == 0 else mpmath.mpf(p) for p in (v.real, v.imag)))


def _exact_inverse(name: str, z: np.ndarray) -> np.ndarray:
    try:
        return np.array([complex(MPMATH_INVERSE[name](_mpc(complex(v)))) for v in z])
    finally:
        mpmath.mp.dps = 15


def _inverse_samples(dtype: np.dtype, n: int = 600) -> np.ndarray:
    """Magnitudes log-uniform over the dtype's range, a fifth near the branch cuts (either axis beyond
    +-1, the other part tiny), a fifth near the branch points +-1, +-i, a tenth near the axes."""
    rng = np.random.default_rng(4)
    big = 30 if dtype == C64 else 300
    z = 10.0 ** rng.uniform(-big, big, n) * np.exp(1j * rng.uniform(-np.pi, np.pi, n))
    k = n // 5
    along = 10.0 ** rng.uniform(0, big, k) * rng.choice([-1, 1], k)
    off = 10.0 ** rng.uniform(-big, -1, k) * rng.choice([-1, 1], k)
    z[:k] = np.where(rng.uniform(size=k) < 0.5, along + 1j * off, off + 1j * along)
    z[k:2 * k] = rng.choice([1, -1, 1j, -1j], k) + 10.0 ** rng.uniform(-big / 2, 0, k) * \
        np.exp(1j * rng.uniform(-np.pi, np.pi, k))
    z[2 * k:2 * k + n // 10] = rng.uniform(-3, 3, n // 10) + 1j * rng.uniform(-1, 1, n // 10) * 1e-3
    return z.astype(dtype)


@pytest.mark.parametrize("dtype", [C64, C128])
@pytest.mark.parametrize("name", INVERSE)
def test_inverse_functions_are_within_their_ulp_bound_of_mpmath(name, dtype, x64):
    z = _inverse_samples(dtype)
    got = native(getattr(jnp, name), z)
    exact = _exact_inverse(name, z)
    part = np.float32 if dtype == C64 else np.float64
    keep = np.isfinite(exact) & (np.abs(exact) > np.finfo(part).tiny)
    assert keep.sum() > 0.9 * len(z)
    assert _ulp_error(got[keep], exact[keep], dtype) <= ULPS[dtype] / 2  # docs/vecmath.md: 0.5 and 2 measured


def _special_grid(dtype: np.dtype) -> np.ndarray:
    """Signed zeros, the branch points, points on and beside the cuts, huge and tiny, infinities, NaN."""
    huge = 1e30 if dtype == C64 else 1e300
    values = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.5, 1e-30, -1e-7, huge, -huge, np.inf, -np.inf, np.nan]
    return np.array([complex(a, b) for a in values for b in values], dtype)


@pytest.mark.parametrize("dtype", [C64, C128])
@pytest.mark.parametrize("name", INVERSE)
def test_inverse_functions_special_values_and_branch_cuts_are_numpys(name, dtype, x64):
    """C99 Annex G's values (NumPy's npymath) at infinities, NaN and signed zeros, the sign of a zero part
    choosing the side of a cut, finite results within a few ulps of NumPy's complex128 ones."""
    z = _special_grid(dtype)
    with np.errstate(all="ignore"):
        got = native(getattr(jnp, name), z)
        want = getattr(np, name)(z.astype(C128)).astype(dtype)
    unspecified = np.isnan(z.real) | np.isnan(z.imag)  # C99 leaves some signs unspecified there
    got, want = (np.stack([v.real, v.imag]) for v in (got, want))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    exact = np.isinf(want) | (want == 0)
    np.testing.assert_array_equal(np.where(exact, got, 0), np.where(exact, want, 0))
    signed = (want == 0) & ~unspecified
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))
    finite = np.isfinite(want) & ~exact
    np.testing.assert_allclose(got[finite], want[finite], rtol=4 * np.finfo(got.dtype).eps, atol=0)


def test_inverse_functions_agree_with_the_reference_on_the_cuts():
    z = np.array([2 + 0j, complex(2, -0.0), -2 + 0j, complex(-2, -0.0), 2j, complex(-0.0, 2), -2j,
                  complex(-0.0, -2), 0.5 + 0j, complex(-0.5, -0.0)], C64)
    for name in INVERSE:
        got, want = both(getattr(jnp, name), z)
        np.testing.assert_allclose(got, want, rtol=3e-7)
        np.testing.assert_array_equal(np.signbit(got.imag), np.signbit(want.imag))
        np.testing.assert_array_equal(np.signbit(got.real), np.signbit(want.real))


@pytest.mark.parametrize("dtype", [C64, C128])
def test_pow_is_within_its_ulp_bound_of_mpmath(dtype, x64):
    """exp(y log x) in double-double for complex128: the error grows only with |y| (atan2's angle is
    within an ulp), ULPS (1 + |y|); complex64's is computed on doubles."""
    rng = np.random.default_rng(6)
    n = 400
    big = 30 if dtype == C64 else 300
    x = 10.0 ** rng.uniform(-big, big, n) * np.exp(1j * rng.uniform(-np.pi, np.pi, n))
    x[: n // 4] = (1 + 10.0 ** rng.uniform(-12, -1, n // 4)) * np.exp(1j * rng.uniform(-np.pi, np.pi, n // 4))
    y = 10.0 ** rng.uniform(-3, 1.5, n) * np.exp(1j * rng.uniform(-np.pi, np.pi, n))
    y[n // 2:] = y[n // 2:].real
    x, y = x.astype(dtype), y.astype(dtype)
    got = native(lax.pow, x, y)
    try:
        exact = np.array([complex(mpmath.power(_mpc(complex(a)), mpmath.mpc(complex(b)))) for a, b in zip(x, y)])
    finally:
        mpmath.mp.dps = 15
    part = np.float32 if dtype == C64 else np.float64
    keep = np.isfinite(exact) & (np.abs(exact) < np.finfo(part).max) & (np.abs(exact) > np.finfo(part).tiny)
    assert keep.sum() > n // 2
    for g, e, b in zip(got[keep], exact[keep], y[keep]):
        bound = ULPS[dtype] / 2 if dtype == C64 else ULPS[dtype] / 2 * (1 + abs(b))  # docs: 0.5 and 3.2 (1 + |y|)
        assert _ulp_error(np.array([g]), np.array([e]), dtype) <= bound, (g, e, b)


def test_pow_matches_numpy_on_finite_values(x64):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(64) + 1j * rng.standard_normal(64)) * 3
    y = rng.standard_normal(64) + 1j * rng.standard_normal(64)
    y[:16] = y[:16].real
    for dtype in (C64, C128):
        got = native(lax.pow, x.astype(dtype), y.astype(dtype))
        want = np.power(x.astype(dtype).astype(C128), y.astype(dtype).astype(C128))
        tol = 1e-6 if dtype == C64 else 1e-13
        np.testing.assert_allclose(got, want, rtol=tol, atol=0)
    got = native(lambda v: v ** 2.5, x.astype(C64))  # a real exponent, promoted
    np.testing.assert_allclose(got, x.astype(C64).astype(C128) ** 2.5, rtol=1e-6)


@pytest.mark.parametrize("dtype", [C64, C128])
def test_pow_special_cases_are_jaxs(dtype, x64):
    """As jax.lax.pow (XLA) gives them: 1 at y = 0 (even for a NaN x) and at x = 1 (even for an infinite or
    NaN y); at x = +-0, 0 for a real y > 0, else NaN (NumPy: 0 for any y with a positive real part);
    infinite operands as exp(y log x) (NumPy's values; a real y keeps (inf + 0j)^2 = inf + 0j)."""
    nan, inf = np.nan, np.inf
    cases = [  # x, y, JAX's x ** y (checked against jax 0.10)
        (0j, 0j, 1 + 0j), (complex(nan, 1), complex(0, -0.0), 1 + 0j), (complex(-0.0, 0), 2 + 0j, 0j),
        (0j, 0.5 + 0j, 0j), (complex(0, -0.0), complex(inf, 0), 0j), (0j, -1 + 0j, complex(nan, nan)),
        (0j, 2 + 1j, complex(nan, nan)), (0j, 1j, complex(nan, nan)), (0j, complex(nan, 0), complex(nan, nan)),
        (1 + 0j, complex(inf, 0), 1 + 0j), (1 + 0j, complex(nan, 0), 1 + 0j), (1 + 0j, -2 + 1j, 1 + 0j),
        (complex(inf, 0), 2 + 0j, complex(inf, 0)), (complex(inf, 0), 0.5 + 0j, complex(inf, 0)),
        (complex(nan, 0), 2 + 0j, complex(nan, nan)), (2 + 3j, complex(nan, 0), complex(nan, nan)),
    ]
    x, y, want = (np.array(c, dtype) for c in zip(*cases))
    got = native(lax.pow, x, y)
    same(got, want)


def _jax_max_min(x: np.ndarray, y: np.ndarray, larger: bool) -> np.ndarray:
    """jax.lax.max / min of complex values: x where its real part is larger (smaller), or where the real
    parts are equal and its imaginary part is; else y (so NaN parts lose every comparison)."""
    cmp = np.greater if larger else np.less
    with np.errstate(invalid="ignore"):
        pick = np.where(x.real == y.real, cmp(x.imag, y.imag), cmp(x.real, y.real))
    return np.where(pick, x, y)


@pytest.mark.parametrize("dtype", [C64, C128])
def test_max_and_min_order_lexicographically_as_jax(dtype, x64):
    values = [0.0, -0.0, 1.0, -2.5, 3.0, np.inf, -np.inf, np.nan]
    v = np.array([complex(a, b) for a in values for b in values], dtype)
    x, y = np.repeat(v, len(v)), np.tile(v, len(v))
    same(native(lax.max, x, y), _jax_max_min(x, y, True))
    same(native(lax.min, x, y), _jax_max_min(x, y, False))
    nan = np.nan
    checked = [  # x, y, jax's max, jax's min (jax 0.10)
        (complex(nan, 0), 1 + 2j, 1 + 2j, 1 + 2j), (1 + 2j, complex(0, nan), 1 + 2j, complex(0, nan)),
        (0j, complex(-0.0, 0), complex(-0.0, 0), complex(-0.0, 0)), (1 + 3j, 1 + 2j, 1 + 3j, 1 + 2j),
        (complex(1, nan), 0j, complex(1, nan), 0j), (complex(np.inf, 0), complex(1, nan), complex(np.inf, 0),
                                                     complex(1, nan)),
    ]
    x, y, want_max, want_min = (np.array(c, dtype) for c in zip(*checked))
    same(native(lax.max, x, y), want_max)
    same(native(lax.min, x, y), want_min)
    same(native(jnp.maximum, x, y), want_max)


# --- ordering reductions, clamp and pow's special points, against JAX (XLA on CPU) ------------------
ORDER_VALUES = [0.0, -0.0, 1.0, -1.0, 2.0, np.inf, -np.inf, np.nan]


def _nan_grid(rng, shape, dtype):
    z = np.empty(shape, dtype)
    z.real, z.imag = rng.choice(ORDER_VALUES, shape), rng.choice(ORDER_VALUES, shape)
    return z


def _jax():
    jax = pytest.importorskip("jax")
    return jax


@pytest.mark.parametrize("dtype", [C64, C128])
def test_complex_max_min_reductions_follow_xlas_order(dtype, x64):
    """NaN parts, ties and -inf + 0j's identity decide by XLA's evaluation order (``complex_reduce``):
    natively (longer dimensions spelled out as XLA's windows, one element as the element), as the
    reference and as JAX."""
    nan, inf = np.nan, np.inf
    checked = [  # (values, jax's max, jax's min) (jax 0.10)
        ([complex(-inf, -1), complex(-inf, -2)], complex(-inf, 0), complex(-inf, -2)),
        ([complex(inf, 1), complex(inf, 2)], complex(inf, 2), complex(inf, 0)),
        ([1 + 1j, complex(nan, 0), 0.5 + 0j], 0.5 + 0j, 0.5 + 0j), ([complex(-inf, -1)], complex(-inf, -1),
                                                                    complex(-inf, -1)),
        ([1 + 1j, 2 + 0j, complex(0, nan)], 2 + 0j, complex(0, nan)),
    ]
    for values, want_max, want_min in checked:
        z = np.array(values, dtype)
        same(run("reference", jnp.max, z), np.array(want_max, dtype))
        same(run("reference", jnp.min, z), np.array(want_min, dtype))
        same(native(jnp.max, z), np.array(want_max, dtype))
        same(native(jnp.min, z), np.array(want_min, dtype))
    empty = np.zeros((0, 3), dtype)
    same(native(lambda v: lax.reduce_max(v, (0,)), empty), np.full(3, complex(-inf, 0), dtype))
    same(native(lambda v: lax.reduce_min(v, (0, 1)), empty), np.array(complex(inf, 0), dtype))
    rng = np.random.default_rng(11)
    for shape, axes in [((7, 5), (0,)), ((7, 5), (1,)), ((3, 4, 5), (0, 2)), ((32, 3), (0, 1)), ((6, 1), (0,))]:
        z = _nan_grid(rng, shape, dtype)
        for f in (jnp.max, jnp.min):
            g = lambda v: f(v, axis=axes)  # noqa: E731
            same(native(g, z), run("reference", g, z))
    jax = _jax()
    with jax.enable_x64(dtype == C128):
        for shape, axes in [((7, 5), (0,)), ((40, 3), (0,)), ((3, 100), (1,)), ((1, 57), (0, 1)), ((5, 70, 2), (0, 1)),
                            ((1100,), (0,)), ((9, 1), (1,)), ((33, 34), (0, 1))]:
            z = _nan_grid(rng, shape, dtype)
            # (both reductions in one program of each kind: a compile each, not two)
            wants = jax.jit(lambda v: (jax.numpy.max(v, axis=axes), jax.numpy.min(v, axis=axes)))(z)
            both_ways = lambda v: (jnp.max(v, axis=axes), jnp.min(v, axis=axes))  # noqa: E731
            for got in (native(both_ways, z), run("reference", both_ways, z), both_ways(z)):  # (the last eagerly)
                for g, want in zip(got, wants):
                    same(g, np.asarray(want))


@pytest.mark.parametrize("dtype", [C64, C128])
def test_complex_running_max_min_follow_xlas_order(dtype, x64):
    """cummax / cummin: windows folded from the identity, tiled in rows of 16 past 16 (``complex_scan``),
    natively (the rows spelled out by ``expansions``), as the reference and as JAX."""
    nan = np.nan
    z = np.array([1 + 1j, complex(nan, 0), 2 + 0j, complex(0, nan), 0.5 + 3j], dtype)
    same(native(lax.cummax, z), np.array([1 + 1j, complex(nan, 0), 2, 2, 2], dtype))  # (jax 0.10)
    same(native(lambda v: lax.cummax(v, reverse=True), z), np.array([2, 2, 2, 0.5 + 3j, 0.5 + 3j], dtype))
    same(native(lax.cummin, np.array([complex(np.inf, 1), complex(np.inf, 2)], dtype)),
         np.array([complex(np.inf, 0), complex(np.inf, 0)], dtype))  # (the identity wins the tie)
    jax = _jax()
    rng = np.random.default_rng(12)
    with jax.enable_x64(dtype == C128):
        for shape, axis in [((3, 5), 1), ((3, 16), 1), ((3, 17), 1), ((3, 40), 1), ((3, 300), 1), ((1,), 0),
                            ((33, 2), 0), ((2, 100, 3), 1), ((1100,), 0), ((5000,), 0)]:
            v = _nan_grid(rng, shape, dtype)
            # (the four scans in one program of each kind: a compile each, not four)
            variants = [(name, reverse) for name in ("cummax", "cummin") for reverse in (False, True)]
            wants = jax.jit(lambda u: [getattr(jax.lax, n)(u, axis=axis, reverse=r) for n, r in variants])(v)
            all_four = lambda u: [getattr(lax, n)(u, axis=axis, reverse=r) for n, r in variants]  # noqa: E731
            for got in (native(all_four, v), run("reference", all_four, v), all_four(v)):  # (the last eagerly)
                for g, want in zip(got, wants):
                    same(g, np.asarray(want))


@pytest.mark.parametrize("dtype", [C64, C128])
def test_complex_clamp_compares_real_parts_as_xla(dtype, x64):
    """lax.clamp of complex values: XLA compares the real parts only (jnp.clip refuses complex, as JAX)."""
    nan = np.nan
    cases = [  # lo, x, hi, jax's clamp (jax 0.10)
        (2 + 1j, 2 + 2j, complex(2, np.inf), 2 + 1j), (1j, complex(-np.inf, -0.0), -0j, 1j),
        (-1 - 1j, complex(-0.0, 2), complex(0, -np.inf), complex(-0.0, 2)), (complex(nan, 0), -0j, -1j, -0j),
        (complex(-1, 2), complex(nan, 1), 3 + 0j, 3 + 0j), (0.5 + 1j, 3 + 0j, 2 + 5j, 2 + 5j),
    ]
    lo, x, hi, want = (np.array(c, dtype) for c in zip(*cases))
    same(native(lax.clamp, lo, x, hi), want)
    same(run("reference", lax.clamp, lo, x, hi), want)
    rng = np.random.default_rng(13)
    lo, x, hi = (_nan_grid(rng, 500, dtype) for _ in range(3))
    same(native(lax.clamp, lo, x, hi), run("reference", lax.clamp, lo, x, hi))
    bounded = lambda v: lax.clamp(dtype.type(0.5 + 1j), v, dtype.type(complex(2, nan)))  # noqa: E731
    same(native(bounded, x), run("reference", bounded, x))
    with pytest.raises(ValueError, match="Complex values have no ordering"):
        jnp.clip(x, 0, 1)
    jax = _jax()
    with jax.enable_x64(dtype == C128):
        same(native(lax.clamp, lo, x, hi), np.asarray(jax.jit(jax.lax.clamp)(lo, x, hi)))


@pytest.mark.parametrize("dtype", [C64, C128])
def test_pow_special_points_agree_on_both_backends_and_with_jax(dtype, x64):
    """x ** 0 == 1, 1 ** y == 1, 0 ** y (0 for a real y > 0, else NaN) on a grid of special values."""
    values = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1e30 if dtype == C64 else 1e300]
    grid = np.array([complex(a, b) for a in values for b in values], dtype)
    x, y = np.repeat(grid, len(grid)), np.tile(grid, len(grid))
    keep = (x == 0) | (y == 0) | (x == 1)
    x, y = x[keep], y[keep]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, want = both(lax.pow, x, y)
    same(got, want)
    jax = _jax()
    with jax.enable_x64(dtype == C128):
        same(got, np.asarray(jax.jit(jax.lax.pow)(x, y)))
