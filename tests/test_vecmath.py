"""The inline vector math library: accuracy against extended-precision references, IEEE special
values, the explicit-vector path, and that loops over it vectorize without calls.

The 10**7-sample sweep behind docs/vecmath.md is benchmarks/vecmath_accuracy.py."""
import re

import numpy as np
import pytest
from llvmlite import ir

from ember.backends.cpu import vecmath, vecmath_kernels
from ember.backends.cpu.vecmath_kernels import compile_kernel, reference, sample_inputs, ulp_distance

UNARY = sorted(vecmath.SUPPORTED_UNARY)
BINARY = sorted(vecmath.SUPPORTED_BINARY)
DTYPES = [np.float32, np.float64]
MAX_ULP = 2
XLA_TANH_ULP = 5  # float32 tanh is XLA's rational approximation (JAX's bits), within 5 ulp of tanh


def test_supported_names():
    assert vecmath.SUPPORTED_UNARY == {
        "exp", "exp2", "expm1", "log", "log2", "log1p", "tanh", "logistic", "sin", "cos", "tan", "erf", "erfc",
        "atan", "sqrt", "rsqrt", "cbrt", "floor", "ceil", "round", "round_even", "abs", "sinh", "cosh", "asinh",
        "acosh", "atanh", "asin", "acos"}
    assert vecmath.SUPPORTED_BINARY == {"atan2", "pow", "max", "min"}


def _samples(name, dtype):
    # references through mpmath (float64 erf/erfc) are slow: fewer samples there
    count = 3000 if name in ("erf", "erfc") and dtype == np.float64 else 60000
    return sample_inputs(name, dtype, count, seed=1)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", UNARY + BINARY)
def test_accuracy(name, dtype):
    if name in ("erf", "erfc") and dtype == np.float64:
        pytest.importorskip("mpmath")
    inputs = _samples(name, dtype)
    got = compile_kernel(name, dtype)(*inputs)
    assert got.dtype == dtype and got.shape == inputs[0].shape
    expected = reference(name, *inputs)
    distance = ulp_distance(got, expected)
    worst = int(np.argmax(distance))
    bound = XLA_TANH_ULP if (name, dtype) == ("tanh", np.float32) else MAX_ULP
    assert distance[worst] <= bound, (
        f"{name}{tuple(a[worst] for a in inputs)} = {got[worst]!r}, expected {expected[worst]!r}")


def _special_values(dtype):
    info = np.finfo(dtype)
    values = [0.0, 1.0, 0.5, 2.0, 3.0, 1e-30, 1e30, 10.0, 100.0, 1000.0, np.pi / 2, np.pi,
              info.smallest_subnormal, info.smallest_normal, info.smallest_normal - info.smallest_subnormal,
              info.max, info.eps, np.inf, 1 - info.epsneg, 1 + info.eps, 0.75, 30.0]
    values = np.array(values, dtype=dtype)
    return np.concatenate([values, -values, np.array([np.nan, -np.nan], dtype=dtype)])


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
@pytest.mark.parametrize("name", UNARY + BINARY)
def test_special_values(name, dtype):
    """Signed zeros, infinities, NaN, subnormals and extremes, as C99 / NumPy define them."""
    specials = _special_values(dtype)
    if name in BINARY:
        x, y = np.meshgrid(specials, specials)
        inputs = (x.ravel(), y.ravel())
    else:
        inputs = (specials,)
    got = compile_kernel(name, dtype)(*inputs)
    expected = reference(name, *inputs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    exact = (expected == 0) | np.isinf(expected)
    np.testing.assert_array_equal(got[exact], expected[exact])
    np.testing.assert_array_equal(np.signbit(got[exact]), np.signbit(expected[exact]))
    assert ulp_distance(got, expected).max() <= MAX_ULP


@pytest.mark.parametrize(("name", "x", "expected"), [
    ("expm1", -0.0, -0.0), ("tanh", -0.0, -0.0), ("log", 0.0, -np.inf), ("log", -0.0, -np.inf),
    ("log", -1.0, np.nan), ("exp", -np.inf, 0.0), ("exp", np.inf, np.inf), ("log1p", -1.0, -np.inf),
    ("log1p", -0.0, -0.0), ("sin", -0.0, -0.0), ("tan", -0.0, -0.0), ("atan", -np.inf, -np.pi / 2),
    ("erf", -0.0, -0.0), ("erfc", -np.inf, 2.0), ("asinh", -0.0, -0.0), ("atanh", 1.0, np.inf),
    ("atanh", -1.0, -np.inf), ("acosh", 0.5, np.nan), ("rsqrt", -0.0, -np.inf), ("cbrt", -np.inf, -np.inf),
    ("round", -0.5, -1.0), ("round", 2.5, 3.0), ("round_even", 2.5, 2.0), ("round", -0.25, -0.0),
    ("logistic", -np.inf, 0.0), ("logistic", np.inf, 1.0), ("cos", np.inf, np.nan), ("sin", np.nan, np.nan),
])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_named_special_cases(name, x, expected, dtype):
    got = compile_kernel(name, dtype)(np.array([x], dtype))[0]
    if np.isnan(expected):
        assert np.isnan(got)
    else:
        assert got == dtype(expected) and np.signbit(got) == np.signbit(expected)


@pytest.mark.parametrize(("dtype", "threshold"), [(np.float32, 88.72283905206835), (np.float64, 709.782712893384)])
def test_exp_overflows_exactly_where_the_rounded_result_does(dtype, threshold):
    bits = np.int32 if dtype == np.float32 else np.int64
    around = (np.array([threshold], dtype).view(bits) + np.arange(-3, 4, dtype=bits)).view(dtype)
    overflowing = np.isinf(reference("exp", around))
    assert overflowing.any() and not overflowing.all()
    np.testing.assert_array_equal(np.isinf(compile_kernel("exp", dtype)(around)), overflowing)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_subnormal_results_are_not_flushed(dtype):
    info = np.finfo(dtype)
    x = np.log(np.array([info.smallest_normal / 4, info.smallest_subnormal * 3], np.float64)).astype(dtype)
    got = compile_kernel("exp", dtype)(x)
    assert np.all((got > 0) & (got < info.smallest_normal))
    assert ulp_distance(got, reference("exp", x)).max() <= 1


def test_sin_at_the_hardest_double_reduction():
    """6381956970095103 * 2**797 is the double closest to a multiple of pi/2 (relative 2**-61)."""
    x = np.array([np.ldexp(6381956970095103.0, 797)], np.float64)
    for name in ("sin", "cos", "tan"):
        assert ulp_distance(compile_kernel(name, np.float64)(x), reference(name, x)).max() <= 1


@pytest.mark.parametrize("lanes", [4, 8])
@pytest.mark.parametrize("name", ["exp", "log1p", "tanh", "sin", "erfc", "acos", "cbrt", "pow", "atan2", "max"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_explicit_vectors_match_scalars(name, dtype, lanes):
    inputs = sample_inputs(name, dtype, 4000, seed=2)
    scalar = compile_kernel(name, dtype)(*inputs)
    vector = compile_kernel(name, dtype, lanes)(*inputs)
    np.testing.assert_array_equal(vector.view(f"u{vector.itemsize}"), scalar.view(f"u{scalar.itemsize}"))


@pytest.mark.parametrize("name", ["exp", "exp2", "expm1", "logistic", "sinh", "cosh", "pow", "erfc"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_ldexp_by_scalef_equals_ldexp_by_exponent_bits(name, dtype, monkeypatch):
    """``ldexp`` is one vscalef on AVX-512 hosts and two multiplies by powers of two elsewhere:
    both round once, so the functions built on it give the same bits, subnormal and infinite
    results included."""
    info = np.finfo(dtype)
    edges = np.log(np.array([info.smallest_subnormal * 3, info.smallest_normal / 4, info.smallest_normal,
                             float(info.max) / 2], np.float64)).astype(dtype)
    inputs = [np.concatenate([x, np.resize(edges, x.shape[0] // 8)]) for x in sample_inputs(name, dtype, 6000, seed=3)]
    results = [compile_kernel(name, dtype)(*inputs)]  # (vscalef where the host has it)
    for scalef in (False, True) if vecmath._scalef() else (False,):
        monkeypatch.setattr(vecmath, "_scalef", lambda scalef=scalef: scalef)
        kernel = vecmath_kernels.Kernel(name, np.dtype(dtype), 0)  # (not compile_kernel's cache)
        assert ("llvm.ldexp" in str(kernel.module)) == scalef
        results.append(kernel(*inputs))
    bits = f"u{np.dtype(dtype).itemsize}"
    for result in results[1:]:
        np.testing.assert_array_equal(result.view(bits), results[0].view(bits))


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "logistic", "sin", "erf", "pow"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f64"])
def test_loops_vectorize_without_calls(name, dtype):
    optimized = compile_kernel(name, dtype).optimized_ir
    element = "float" if dtype == np.float32 else "double"
    assert re.search(rf"<(4|8|16) x {element}>", optimized), "the loop was not vectorized"
    called = set(re.findall(r"call [^@]*@([\w.]+)", optimized))
    assert all(function.startswith("llvm.") for function in called), called


def _builder():
    module = ir.Module()
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), []), "f")
    return ir.IRBuilder(function.append_basic_block())


def test_errors_name_the_problem():
    builder = _builder()
    one = ir.Constant(ir.FloatType(), 1.0)
    with pytest.raises(ValueError, match="no unary function 'sinc'.*supported"):
        vecmath.emit_unary(builder, "sinc", one)
    with pytest.raises(ValueError, match="no binary function 'exp'"):
        vecmath.emit_binary(builder, "exp", one, one)
    with pytest.raises(TypeError, match="expected float or double.*i32"):
        vecmath.emit_unary(builder, "exp", ir.Constant(ir.IntType(32), 1))
    with pytest.raises(TypeError, match="pow operands differ in type: float and double"):
        vecmath.emit_binary(builder, "pow", one, ir.Constant(ir.DoubleType(), 1.0))


def test_float32_tanh_gives_xlas_bits_natively_and_on_the_reference():
    """float32 tanh is XLA's (so ``jax.jit``'s) to the bit: its rational approximation, clamped
    where it reaches 1 and linear near 0; half types compute it in float32 and round, as XLA."""
    import ember
    import ember.numpy as jnp

    x = np.concatenate([np.linspace(-10, 10, 200001, dtype=np.float32),
                        np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-30, 3.9e-4, 4e-4, 7.998811, 7.9988122],
                                 np.float32)])
    native = np.asarray(ember.jit(jnp.tanh)(x))
    with ember.config.override(backend="reference"):
        reference_bits = np.asarray(ember.jit(jnp.tanh)(x))
    np.testing.assert_array_equal(native.view(np.int32), reference_bits.view(np.int32))
    assert native[-10] == 1.0 and native[-9] == -1.0 and np.isnan(native[-8]) and native[-1] == 1.0
    assert native[-6] == 0.0 and np.signbit(native[-6]) and native[-4] == x[-4]  # (linear near 0)
    try:
        import jax
        import jax.numpy as jjnp
    except ImportError:
        return
    want = np.asarray(jax.jit(jjnp.tanh)(x))
    np.testing.assert_array_equal(native.view(np.int32), want.view(np.int32))
    for half in (jnp.bfloat16, jnp.float16):
        h = x[::7].astype(half)
        np.testing.assert_array_equal(np.asarray(ember.jit(jnp.tanh)(h)).astype(np.float32),
                                      np.asarray(jax.jit(jjnp.tanh)(h)).astype(np.float32))
