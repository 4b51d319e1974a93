"""float8 arrays (JAX's eight float8 types, ml_dtypes'), checked against JAX: creation, casts,
elementwise math (XLA's CPU rounding: computed in float32, rounded through float16, then to the
float8 type), comparisons, reductions, products, promotion errors, ``finfo``, printing, grad
through a cast; eagerly and under ``jit`` (where equations on float8 values run on the reference
interpreter)."""
import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import dtypes, lax

jax = pytest.importorskip("jax")
jax_numpy = jax.numpy

NAMES = dtypes.FLOAT8_NAMES
ARITHMETIC = [n for n in NAMES if n != "float8_e8m0fnu"]  # (e8m0fnu: powers of two only, no zero, no sign)
rng = np.random.default_rng(0)
A = (rng.standard_normal(48) * 3).astype(np.float32)
B = (rng.standard_normal(48) * 3).astype(np.float32)
SPECIAL = np.array([0.0, -0.0, 1e30, -1e30, np.nan, np.inf, -np.inf, 1e-30, 0.3, 447.0, 449.0, 60000.0], np.float32)


def same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def both(fn, *args):
    """``fn`` under JAX, then under ember eagerly and under jit: all three the same."""
    want = fn(jax_numpy, *(jax_numpy.asarray(a) for a in args))
    same(fn(jnp, *(jnp.asarray(a) for a in args)), want)
    same(ember.jit(lambda *xs: fn(jnp, *xs))(*(jnp.asarray(a) for a in args)), want)


def test_the_types_are_jaxs():
    assert [n for n in dir(jax_numpy) if n.startswith("float8")] == sorted(NAMES)
    for name in NAMES:
        dt = np.dtype(getattr(ml_dtypes, name))
        assert dtypes.canonicalize_dtype(name) == dt and dtypes.is_floating(dt) and dtypes.is_inexact(dt)
        assert jnp.issubdtype(dt, jnp.floating) and jnp.issubdtype(dt, jnp.inexact)
        assert not jnp.issubdtype(dt, jnp.integer)
        got, want = jnp.finfo(dt), jax_numpy.finfo(dt)
        assert (float(got.eps), float(got.max), float(got.tiny), got.bits) == (float(want.eps), float(want.max),
                                                                               float(want.tiny), want.bits)


@pytest.mark.parametrize("name", NAMES)
def test_creation_and_printing(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    for make in (lambda np_: np_.zeros(3, dt), lambda np_: np_.ones((2, 2), dt), lambda np_: np_.full(2, 2.0, dt),
                 lambda np_: np_.array([0.5, 1.0, 4.0], dtype=dt), lambda np_: np_.asarray([1, 2, 8], dt),
                 lambda np_: np_.arange(1, 5, dtype=dt) if name != "float8_e8m0fnu" else np_.ones(1, dt),
                 lambda np_: np_.zeros_like(np_.ones(2, dt))):  # (arange's iota in e8m0fnu, without 0, starts at NaN)
        got, want = make(jnp), make(jax_numpy)
        same(got, want)
        assert repr(got) == repr(want) and str(got) == str(want)
    from ember.numpy import scalar_types
    scalar = getattr(scalar_types, name)(2.0)
    assert isinstance(scalar, ember.Array) and scalar.dtype == dt and float(scalar) == 2.0


@pytest.mark.parametrize("name", NAMES)
def test_casts_to_and_from_every_type(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    values = np.abs(SPECIAL) if name == "float8_e8m0fnu" else SPECIAL
    both(lambda np_, x: x.astype(dt), values)
    both(lambda np_, x: x.astype(np_.float16).astype(dt), A)
    both(lambda np_: np_.arange(-20, 300, 7).astype(dt))
    both(lambda np_, x: x.astype(bool).astype(dt), A)
    for other in ("bool", "int8", "uint8", "int32", "uint32", "bfloat16", "float16", "float32", *NAMES):
        both(lambda np_, x: x.astype(dt).astype(other), A[:8])  # (in range of every type but uint: saturates)


@pytest.mark.parametrize("name", ARITHMETIC)
def test_math_rounds_as_xla_and_compares(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    a, b = A.astype(dt), B.astype(dt)
    for fn in (lambda np_, x, y: x + y, lambda np_, x, y: x * y, lambda np_, x, y: x / y, lambda np_, x, y: x - y,
               lambda np_, x, y: -x, lambda np_, x, y: np_.abs(x), lambda np_, x, y: np_.exp(x),
               lambda np_, x, y: np_.tanh(x), lambda np_, x, y: np_.sqrt(np_.abs(x)),
               lambda np_, x, y: np_.log(np_.abs(x)),
               lambda np_, x, y: x ** 2, lambda np_, x, y: np_.maximum(x, y), lambda np_, x, y: np_.minimum(x, y),
               lambda np_, x, y: np_.floor(x), lambda np_, x, y: np_.round(x), lambda np_, x, y: np_.sign(x),
               lambda np_, x, y: x < y, lambda np_, x, y: x == y, lambda np_, x, y: np_.isnan(x / y),
               lambda np_, x, y: np_.where(x > y, x, y), lambda np_, x, y: x * 2.5 + 1,
               lambda np_, x, y: x + np_.arange(48, dtype=np_.int8), lambda np_, x, y: np_.sort(x),
               lambda np_, x, y: np_.max(x), lambda np_, x, y: np_.min(x, axis=0), lambda np_, x, y: np_.argmax(x),
               lambda np_, x, y: np_.argmin(x), lambda np_, x, y: x[::-1].reshape(6, 8).T[2:, 1],
               lambda np_, x, y: np_.concatenate([x, y])):
        both(fn, a, b)


@pytest.mark.parametrize("name", ARITHMETIC)
def test_exact_reductions_and_products(name):
    """Sums and products whose partial results are exact in the type. (Inexact ones differ: XLA's
    CPU reductions accumulate in the float8 type in their vectorized order; ember accumulates in
    float32 and rounds once.)"""
    dt = np.dtype(getattr(ml_dtypes, name))
    small = np.array([1, 2, 1, 0, 2, 1, 1, 0], np.float32).astype(dt)
    both(lambda np_, x: np_.sum(x), small)
    both(lambda np_, x: np_.cumsum(x[:4]), small)
    both(lambda np_, x: np_.prod(x[:3]), small)
    both(lambda np_, x: np_.sum(x.reshape(2, 4), axis=1), small)
    ones = np.ones((4, 4), np.float32).astype(dt)
    both(lambda np_, x: np_.dot(x, x), ones)
    both(lambda np_, x: x @ x.T, ones)
    both(lambda np_, x, y: np_.dot(x.reshape(6, 8), y.reshape(8, 6), preferred_element_type=np_.float32),
         A.astype(dt), B.astype(dt))
    both(lambda np_, x, y: jax.lax.dot_general(x.reshape(6, 8), y.reshape(6, 8), (((1,), (1,)), ((), ())),
                                                  preferred_element_type=np_.float32)
         if np_ is jax_numpy else lax.dot_general(x.reshape(6, 8), y.reshape(6, 8), (((1,), (1,)), ((), ())),
                                                  preferred_element_type=np_.float32), A.astype(dt), B.astype(dt))


def test_mixing_floating_types_is_a_promotion_error():
    x = jnp.ones(3, ml_dtypes.float8_e4m3fn)
    for other in (jnp.ones(3), jnp.ones(3, jnp.bfloat16), jnp.ones(3, ml_dtypes.float8_e5m2), 1j):
        with pytest.raises(dtypes.TypePromotionError, match="8-bit floats do not support implicit promotion"):
            x + other
    assert issubclass(dtypes.TypePromotionError, ValueError)
    from ember.compat.jax._src import dtypes as compat_dtypes
    assert compat_dtypes.TypePromotionError is dtypes.TypePromotionError
    assert (x + 1.5).dtype == x.dtype and (x * jnp.arange(3)).dtype == x.dtype


def test_grad_through_a_float8_cast():
    def loss(np_, v):
        return np_.sum(v.astype(np_.float8_e4m3fn).astype(np_.float32) ** 2)
    v = np.array([1.1, 2.3, -0.7], np.float32)
    want = jax.grad(lambda v: loss(jax_numpy, v))(v)
    same(ember.grad(lambda v: loss(jnp, v))(v), want)
    same(ember.jit(ember.grad(lambda v: loss(jnp, v)))(v), want)
    x8 = jnp.asarray(v).astype(ml_dtypes.float8_e5m2)
    g = ember.grad(lambda x: jnp.sum(x * x).astype(jnp.float32))(x8)
    same(g, jax.grad(lambda x: jax_numpy.sum(x * x).astype(jax_numpy.float32))(jax_numpy.asarray(x8)))


def test_a_loop_over_float8_values():
    def run(lax_, x):
        return lax_.fori_loop(0, 3, lambda i, c: (c[0] * 1.5 + 1, c[1] + c[0].astype(np.float32)),
                              (x, x.astype(np.float32)))
    x = np.array([1.0, -2.0, 0.25], np.float32).astype(ml_dtypes.float8_e4m3fn)
    want = run(jax.lax, jax_numpy.asarray(x))
    for got in (run(lax, jnp.asarray(x)), ember.jit(lambda x: run(lax, x))(x)):
        same(got[0], want[0])
        same(got[1], want[1])


def test_compiled_programs_leave_float8_equations_to_the_reference():
    from ember.backends.cpu_backend import CpuExecutable
    f8 = np.dtype(ml_dtypes.float8_e4m3fn)

    def f(x, y):
        return jnp.exp(x.astype(f8) * 2).astype(jnp.float32) + y * 3
    report = CpuExecutable(ember.make_jaxpr(f)(np.ones(8, np.float32), np.ones(8, np.float32)), "f").report
    assert set(report.fallbacks) == {"convert_element_type", "mul", "exp"} and report.kernels  # (y * 3 + ...: native)
