"""Complex values through ``jnp``, ``random`` and ``nn``: what the op records do not cover, against
NumPy and against JAX (complex64 throughout, so that x64 stays as the suite sets it)."""
import warnings

import jax
import jax.numpy as jax_numpy
import numpy as np
import pytest
from hypothesis import given, strategies as st
from op_records import complex_arrays
from test_op_records import assert_complex_close

import ember
import ember.numpy as jnp
from ember import lax, nn

nan, inf = np.nan, np.inf
# Values with NaNs and infinities in either part, and equal real parts that defer to the imaginary ones.
SPECIAL = np.array([1 + 2j, 1 + 1j, complex(nan, 0), complex(0, nan), -1 + 0j, complex(1, nan), complex(inf, 0),
                    2 - 1j, complex(nan, nan), complex(-inf, 1), complex(nan, -1), complex(-0.0, 1), 0j], np.complex64)
Z = np.array([1 + 2j, -3.5j, 2, 0.5 - 0.25j, 4.25 + 0.5j, -1 - 1j], np.complex64)


def _both(fn, *args):
    """``fn`` of ember eagerly and under jit, and of JAX, on the same NumPy arguments."""
    eager = fn(jnp, *map(jnp.asarray, args))
    jitted = ember.jit(lambda *a: fn(jnp, *a))(*args)
    return eager, jitted, fn(jax_numpy, *map(jax_numpy.asarray, args))


def _same(got, want, exact=False):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, exact)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if exact or got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    elif got.dtype.kind == "c":
        assert_complex_close(got, want, 1e-5)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def _as_jax(fn, *args, exact=False):
    eager, jitted, expected = _both(fn, *args)
    _same(eager, expected, exact)
    _same(jitted, expected, exact)
    return eager


# --- sorting and searching: lexicographic, NaNs last in each part (JAX's order) ----------------------
def test_sort_argsort_lexsort_as_jax():
    _as_jax(lambda np_, x: np_.sort(x), SPECIAL, exact=True)
    _as_jax(lambda np_, x: np_.argsort(x), SPECIAL, exact=True)
    _as_jax(lambda np_, x: np_.sort(x, descending=True), SPECIAL, exact=True)
    _as_jax(lambda np_, x: np_.lexsort([x, np_.real(x) > 0]), SPECIAL, exact=True)
    _as_jax(lambda np_, x: lax.sort(x) if np_ is jnp else jax.lax.sort(x), SPECIAL, exact=True)


def test_searchsorted_and_unique_as_jax():
    table = np.sort(Z)
    _as_jax(lambda np_, a, v: np_.searchsorted(a, v), table, SPECIAL, exact=True)
    _as_jax(lambda np_, a, v: np_.searchsorted(a, v, side="right", method="compare_all"), table,
            np.concatenate([Z, SPECIAL]), exact=True)
    got, want = jnp.unique(jnp.asarray(SPECIAL)), jax_numpy.unique(SPECIAL)  # (NaNs collapse to one)
    _same(got, want, exact=True)
    _same(jnp.unique(jnp.asarray(SPECIAL), size=12), jax_numpy.unique(SPECIAL, size=12), exact=True)


@given(values=complex_arrays(np.complex64, (7,), specials=True))
def test_sort_is_lexicographic_by_parts(values):
    order = np.lexsort((values.imag, values.real))
    np.testing.assert_array_equal(jnp.sort(values), values[order])
    np.testing.assert_array_equal(jnp.argsort(values), order)


# --- extrema and comparisons --------------------------------------------------------------------
def test_extrema_are_lexicographic():
    _as_jax(lambda np_, x: (np_.max(x), np_.min(x), np_.ptp(x), np_.amax(x), np_.amin(x)), Z, exact=True)
    _as_jax(lambda np_, x, y: (np_.maximum(x, y), np_.minimum(x, y), np_.fmax(x, y), np_.fmin(x, y)),
            Z, Z[::-1], exact=True)
    _as_jax(lambda np_, x: (np_.nanmax(x), np_.nanmin(x)), SPECIAL[:8], exact=True)
    _as_jax(lambda np_, x: np_.max(x, initial=3 + 0j), Z[:0], exact=True)
    # fmax/fmin ignore a NaN operand (NaN in either part)
    _as_jax(lambda np_, x, y: (np_.fmax(x, y), np_.fmin(x, y)), SPECIAL, SPECIAL[::-1], exact=True)


def test_order_comparisons_are_lexicographic_as_jax():
    x, y = SPECIAL, SPECIAL[::-1]
    for name in ("less", "less_equal", "greater", "greater_equal"):
        _as_jax(lambda np_, a, b: getattr(np_, name)(a, b), x, y, exact=True)
    _as_jax(lambda np_, a, b: (a < b, a >= b, a == b, a != b), x, y, exact=True)


def test_argmax_and_ordering_functions_refuse_complex_as_jax():
    z = jnp.asarray(Z)
    for fn in (jnp.argmax, jnp.argmin, jnp.nanargmax, jnp.nanargmin):
        with pytest.raises(TypeError, match="does not accept dtype complex64"):
            fn(z)
    with pytest.raises(TypeError, match="argmax does not accept dtype complex64"):
        lax.argmax(z, 0, jnp.int32)
    with pytest.raises(ValueError, match="top_k is not compatible with complex inputs"):
        lax.top_k(z, 2)
    for fn in (jnp.partition, jnp.argpartition):
        with pytest.raises(NotImplementedError, match="for complex dtype is not implemented"):
            fn(z, 2)
    for fn in (jnp.median, lambda x: jnp.quantile(x, 0.5), lambda x: jnp.percentile(x, 50),
               lambda x: jnp.nanquantile(x, 0.5), jnp.nanmedian):
        with pytest.raises(ValueError, match="quantile does not support complex input"):
            fn(z)
    with pytest.raises(ValueError, match="Clip received a complex value"):
        jnp.clip(z, 0, 1)
    with pytest.raises(ValueError, match="Clip received a complex value"):
        jnp.clip(jnp.ones(2), 0j, 1)


def test_real_only_functions_refuse_complex_with_jaxs_error_types():
    z = jnp.asarray(Z)
    type_errors = [jnp.floor, jnp.ceil, jnp.trunc, jnp.fix, jnp.cbrt, jnp.fabs, jnp.modf, jnp.frexp,
                   lambda x: jnp.copysign(x, 1.0), lambda x: jnp.floor_divide(x, 1.0),
                   lambda x: jnp.remainder(x, 1.0), lambda x: jnp.fmod(x, 1.0), lambda x: jnp.divmod(x, 1.0),
                   lambda x: jnp.nextafter(x, x), lambda x: jnp.heaviside(x, 1.0),
                   lambda x: jnp.bitwise_and(x, x), lax.floor, lax.round, lax.is_finite]
    for fn in type_errors:
        with pytest.raises(TypeError):
            fn(z)
    value_errors = {jnp.isposinf: "isposinf/isneginf are not well defined", jnp.isneginf: "not well defined",
                    jnp.signbit: "signbit is not well defined for complex64",
                    lambda x: jnp.hypot(x, x): "hypot is not well defined for complex",
                    jnp.spacing: "spacing is not defined for complex", jnp.i0: "Unsupported input type",
                    lambda x: jnp.ldexp(x, 2): "ldexp not supported",
                    lambda x: jnp.gcd(x, x): "must be integers"}
    for fn, message in value_errors.items():
        with pytest.raises(ValueError, match=message):
            fn(z)


# --- elementwise functions beyond the records -----------------------------------------------------
def test_parts_by_parts_functions_as_jax():
    values = np.array([1.5 + 2.5j, 0.25 - 1.75j, -2.5 + 0.5j, complex(nan, 1.5), complex(inf, -inf)], np.complex64)
    _as_jax(lambda np_, x: (np_.isnan(x), np_.isinf(x), np_.isfinite(x)), SPECIAL, exact=True)
    _as_jax(lambda np_, x: (np_.round(x), np_.round(x, 1), np_.round(x, -1), np_.rint(x), np_.around(x)), values)
    _as_jax(lambda np_, x: (np_.nan_to_num(x), np_.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-2.0)), SPECIAL)
    _as_jax(lambda np_, x: (np_.real(x), np_.imag(x), np_.conj(x), np_.conjugate(x), np_.abs(x),
                            np_.absolute(x), np_.angle(x), np_.angle(x, deg=True)), Z)
    _as_jax(lambda np_, x: (np_.iscomplex(x), np_.isreal(x), np_.sign(x)), Z)


def test_sinc_near_zero_is_one_where_division_would_overflow():
    """A subnormal complex argument: sin(y) / y would be inf + nan j (the reciprocal of |y|^2
    overflows); the series gives 1, which is also JAX's answer (it flushes the argument to 0)."""
    x = np.array([6.11223e-40j, 1e-45 + 0j, -3e-39 - 2e-39j, 1e-4 + 1e-4j], np.complex64)
    want = np.sinc(x.astype(np.complex128))
    for got in (jnp.sinc(x), ember.jit(jnp.sinc)(x)):
        assert_complex_close(np.asarray(got), want, 1e-6, "sinc")


def test_logs_powers_and_logaddexp_as_jax():
    _as_jax(lambda np_, x: (np_.log2(x), np_.log10(x), np_.exp2(x), np_.sinc(x), np_.deg2rad(x),
                            np_.rad2deg(x), np_.radians(x), np_.degrees(x)), np.append(Z, 0j))
    _as_jax(lambda np_, x: (np_.power(x, 3), np_.power(x, -2), np_.pow(x, 0.5), x ** 2,
                            np_.power(x, np_.arange(6)), np_.float_power(x, 2)), Z)
    _as_jax(lambda np_, x, y: (np_.logaddexp(x, y), np_.logaddexp2(x, y)), Z, Z[::-1] * 2)
    _as_jax(lambda np_, x: (lax.integer_pow(x, -2) if np_ is jnp else jax.lax.integer_pow(x, -2)), Z)


def test_isclose_and_allclose_as_jax():
    with np.errstate(invalid="ignore"):
        w = SPECIAL * np.complex64(1 + 1e-7) + np.where(np.arange(len(SPECIAL)) % 3 == 0, 1e-3, 0).astype(np.complex64)
    for equal_nan in (False, True):
        _as_jax(lambda np_, a, b: np_.isclose(a, b, equal_nan=equal_nan), SPECIAL, w, exact=True)
        _as_jax(lambda np_, a, b: np_.isclose(a, b, rtol=1e-3, atol=1e-3, equal_nan=equal_nan), SPECIAL, w, exact=True)
    _as_jax(lambda np_, a, b: (np_.allclose(a, b), np_.allclose(a, a, equal_nan=True)), SPECIAL, w, exact=True)
    np.testing.assert_array_equal(jnp.isclose(SPECIAL, w), np.isclose(SPECIAL, w))


def test_where_indexing_and_at_updates():
    z = jnp.asarray(Z)
    np.testing.assert_array_equal(jnp.where(z.real > 0, z, 1j), np.where(Z.real > 0, Z, 1j))
    np.testing.assert_array_equal(z[z == 2], Z[Z == 2])
    np.testing.assert_array_equal(z[::-2], Z[::-2])
    np.testing.assert_array_equal(z[np.array([0, 3])], Z[[0, 3]])
    _as_jax(lambda np_, x: (x.at[0].add(1j), x.at[1:3].set(2 - 1j), x.at[0].mul(1j), x.at[-1].divide(2j),
                            x.at[np_.array([0, 0])].add(1j), x.at[0].get()), Z)
    _as_jax(lambda np_, x: (np_.take(x, np_.array([1, 4])), np_.take_along_axis(x, np_.argsort(x), 0),
                            np_.roll(x, 2), np_.flip(x), np_.concatenate([x, x]), np_.tril(np_.outer(x, x))), Z)


# --- reductions -----------------------------------------------------------------------------------
def test_reductions_and_statistics_as_jax():
    m = Z.reshape(2, 3)
    _as_jax(lambda np_, x: (np_.sum(x), np_.prod(x, 0), np_.mean(x, 1), np_.cumsum(x), np_.cumprod(x, 1),
                            np_.average(x, 0, weights=np_.array([1.0, 2.0])), np_.trapezoid(x, axis=1),
                            np_.diff(x), np_.count_nonzero(x)), m)
    # var and std of complex values are real: the mean squared modulus of the deviations
    out = _as_jax(lambda np_, x: (np_.var(x), np_.std(x, 0), np_.var(x, 1, ddof=1), np_.nanvar(x),
                                  np_.nanstd(x, 1)), m)
    assert out[0].dtype == np.float32
    np.testing.assert_allclose(out[0], np.var(m.astype(np.complex128)), rtol=1e-6)
    _as_jax(lambda np_, x: np_.var(x, dtype=np_.complex64), m)
    with pytest.raises(ValueError, match="does not yet support real dtype"):
        jnp.var(m, dtype=jnp.float32)
    # NaN-ignoring reductions spot a NaN in either part
    _as_jax(lambda np_, x: (np_.nansum(x), np_.nanprod(x), np_.nanmean(x), np_.nancumsum(x),
                            np_.nancumprod(x)), SPECIAL[[0, 1, 2, 3, 4, 5, 7]])


def test_cov_and_corrcoef_as_numpy_and_jax():
    m = np.array([[1 + 1j, 2, 3j, -1], [0, 1j, 1, 2 - 2j], [0.5, -1j, 2, 1 + 1j]], np.complex64)
    for fn in (lambda np_, x: np_.cov(x), lambda np_, x: np_.cov(x, rowvar=False, bias=True),
               lambda np_, x: np_.corrcoef(x), lambda np_, x: np_.corrcoef(x[0], x[1])):
        got = _as_jax(fn, m)
        assert_complex_close(np.asarray(got), fn(np, m.astype(np.complex128)), 2e-5)


def test_polyval_vecmat_and_grids_as_jax():
    _as_jax(lambda np_, p, x: (np_.polyval(p, x), np_.polyval(p, 2.0)), Z[:3], Z)
    _as_jax(lambda np_, x, a: (np_.vecmat(x, a), np_.matvec(a, x)), Z[:3], np.outer(Z[:3], Z[3:]))
    _as_jax(lambda np_: (np_.linspace(0, 1 + 2j, 5), np_.linspace(1j, 1, 4, endpoint=False),
                         np_.linspace(0, 2 + 2j, 3, retstep=True), np_.logspace(0, 1j, 3),
                         np_.geomspace(1j, 100j, 3), np_.arange(3, dtype=np_.complex64),
                         np_.linspace(0, 3, 4, dtype=np_.complex64)))
    with pytest.raises(ValueError, match="complex"):
        jnp.arange(3j)
    with pytest.raises(ValueError, match="complex"):
        jnp.arange(0, 2 + 1j)


# --- conversions, creation, printing, DLPack ----------------------------------------------------------
def test_casts_to_real_warn_as_jax():
    z = jnp.asarray(Z)
    with pytest.warns(np.exceptions.ComplexWarning, match="Casting complex values to real discards the imaginary"):
        out = lax.convert_element_type(z, jnp.float32)
    np.testing.assert_array_equal(out, Z.real)
    with pytest.warns(jnp.ComplexWarning):
        out = ember.jit(lambda x: lax.convert_element_type(x, jnp.int32))(Z)
    np.testing.assert_array_equal(out, Z.real.astype(np.int32))
    with pytest.warns(jnp.ComplexWarning):
        np.testing.assert_array_equal(jnp.asarray(Z, jnp.float32), Z.real)
    with pytest.warns(DeprecationWarning, match="Casting from complex to real dtypes will soon raise"):
        np.testing.assert_array_equal(z.astype(jnp.float32), Z.real)
    with pytest.warns(DeprecationWarning):
        np.testing.assert_array_equal(jnp.astype(z, bool), Z != 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: real to complex, complex to complex, the parts
        jnp.real(z), jnp.abs(z), jnp.var(z), z.astype(jnp.complex64), jnp.asarray(Z.real, jnp.complex64)
        jnp.isclose(z, z), jnp.nan_to_num(z), jnp.round(z, 1), jnp.corrcoef(z)


def test_arrays_from_complex_lists_and_numpy_arrays():
    assert jnp.asarray([1, 2.5, 3j]).dtype == np.complex64
    np.testing.assert_array_equal(jnp.array([[1 + 2j, 3], [0, -1j]]), np.array([[1 + 2j, 3], [0, -1j]]))
    assert jnp.array(np.array([1 + 2j], np.complex128)).dtype == np.complex64  # (x64 off)
    np.testing.assert_array_equal(jnp.array(Z), Z)
    assert jnp.asarray(Z).dtype == np.complex64 and not jnp.asarray(Z).weak_type
    assert jnp.complex64(1 + 2j).dtype == np.complex64 and complex(jnp.complex64(1 + 2j)) == 1 + 2j
    assert jnp.iscomplexobj(Z) and jnp.iscomplexobj(1j) and jnp.iscomplexobj([1, 2j])
    assert not jnp.iscomplexobj(1.0) and jnp.isrealobj(np.ones(2)) and not jnp.isrealobj(jnp.asarray(Z))
    assert jnp.zeros(2, jnp.complex64).tolist() == [0j, 0j] and jnp.asarray(Z)[0].item() == 1 + 2j


def test_printing_and_python_scalars_as_jax():
    for value in (np.array([1 + 2j], np.complex64), np.array([[1 + 2j, 3.5 - 1j]], np.complex64),
                  np.complex64(1 + 2j)):
        assert repr(jnp.asarray(value)) == repr(jax_numpy.asarray(value))
        assert str(jnp.asarray(value)) == str(jax_numpy.asarray(value))
    assert repr(jnp.asarray(1 + 2j)) == "Array(1.+2.j, dtype=complex64, weak_type=True)"
    assert f"{jnp.complex64(1 + 2j)}" == "(1+2j)"
    with pytest.raises(TypeError, match="float"):
        float(jnp.complex64(1 + 0j))
    with pytest.raises(TypeError, match="int"):
        int(jnp.complex64(1 + 0j))
    assert bool(jnp.complex64(1j)) and not bool(jnp.complex64(0j))


def test_dlpack_round_trips():
    z = jnp.asarray(Z)
    np.testing.assert_array_equal(np.from_dlpack(z), Z)
    for source in (Z, jax_numpy.asarray(Z)):
        out = jnp.from_dlpack(source)
        assert out.dtype == np.complex64
        np.testing.assert_array_equal(out, Z)
        np.testing.assert_array_equal(ember.from_dlpack(source), Z)
    np.testing.assert_array_equal(jax_numpy.from_dlpack(z), Z)


# --- random numbers and initializers: JAX's values for the same key -------------------------------------
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_complex_normal_is_jaxs(shape):
    for seed in (0, 7):
        want = jax.random.normal(jax.random.key(seed), shape, jax_numpy.complex64)
        got = ember.random.normal(ember.random.key(seed), shape, jnp.complex64)
        jitted = ember.jit(lambda k: ember.random.normal(k, shape, jnp.complex64))(ember.random.PRNGKey(seed))
        assert got.dtype == np.complex64 and got.shape == shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(jitted, got)


def test_complex_normal_has_unit_variance_split_between_the_parts():
    z = np.asarray(ember.random.normal(ember.random.key(0), (20000,), jnp.complex64))
    assert abs(np.mean(np.abs(z) ** 2) - 1) < 0.05
    assert abs(np.var(z.real) - 0.5) < 0.03 and abs(np.var(z.imag) - 0.5) < 0.03


def test_samplers_of_real_values_refuse_complex_as_jax():
    key = ember.random.key(0)
    for name in ("uniform", "exponential", "laplace", "logistic"):
        with pytest.raises(ValueError, match=f"dtype argument to `{name}` must be a float dtype, got complex64"):
            getattr(ember.random, name)(key, (2,), jnp.complex64)
    with pytest.raises(ValueError, match="must be a float dtype"):
        ember.random.truncated_normal(key, -1, 1, (2,), jnp.complex64)


@pytest.mark.parametrize("builder, shape", [
    (lambda m: m.normal(), (3, 4)),
    (lambda m: m.variance_scaling(1.0, "fan_avg", "uniform"), (3, 4)),
    (lambda m: m.variance_scaling(2.0, "fan_in", "truncated_normal"), (5, 4)),
    (lambda m: m.variance_scaling(1.0, "fan_out", "normal"), (4, 2)),
    (lambda m: m.glorot_normal(), (3, 4)), (lambda m: m.glorot_uniform(), (3, 4)),
    (lambda m: m.lecun_normal(), (3, 4)), (lambda m: m.lecun_uniform(), (2, 3, 4)),
    (lambda m: m.he_normal(), (3, 4)), (lambda m: m.he_uniform(), (3, 4)),
    (lambda m: m.xavier_uniform(), (3, 4)), (lambda m: m.kaiming_normal(), (3, 4)),
    (lambda m: m.orthogonal(), (3, 4)), (lambda m: m.delta_orthogonal(), (3, 3, 4)),
    (lambda m: m.zeros, (2,)), (lambda m: m.ones, (2,)), (lambda m: m.constant(2 - 1j), (2,)),
])
def test_complex_initializers_are_jaxs(builder, shape):
    want = builder(jax.nn.initializers)(jax.random.key(3), shape, jax_numpy.complex64)
    got = builder(nn.initializers)(ember.random.key(3), shape, jnp.complex64)
    assert got.dtype == np.complex64 and got.shape == shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_initializers_of_real_values_refuse_complex_as_jax():
    for init in (nn.initializers.uniform(), nn.initializers.truncated_normal()):
        with pytest.raises(ValueError, match="must be a float dtype, got complex64"):
            init(ember.random.key(0), (2,), jnp.complex64)


@given(data=st.data())
def test_complex_functions_under_vmap_and_jit_agree_with_eager(data):
    x = data.draw(complex_arrays(np.complex64, (3, 2), specials=True))

    def f(z):
        return jnp.isnan(z), jnp.round(z), jnp.nan_to_num(z), jnp.sort(z), jnp.less(z, 1 + 0j), jnp.abs(z)

    eager = f(jnp.asarray(x))
    for other in (ember.jit(f)(x), ember.vmap(f)(x)):
        for a, b in zip(eager[:-1], other[:-1]):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(eager[-1], other[-1], rtol=1e-6)  # (|z|: native code may round differently)


# --- the end-to-end audit's findings, against JAX ------------------------------------------------
SPECIAL_B = SPECIAL[::-1].copy()


def test_conjugating_products_as_jax():
    a, b = Z, Z[::-1] * (0.5 - 1j)
    for fn in (lambda np_, x, y: np_.vdot(x, y), lambda np_, x, y: np_.vecdot(x, y),
               lambda np_, x, y: np_.linalg.vecdot(x, y), lambda np_, x, y: np_.correlate(x, y),
               lambda np_, x, y: np_.correlate(x, y[:3], mode="full"), lambda np_, x, y: np_.correlate(x[:2], y),
               lambda np_, x, y: np_.inner(x, y), lambda np_, x, y: np_.dot(x, y)):
        _as_jax(fn, a, b)
    _as_jax(lambda np_, x, y: np_.vecdot(x, y, axis=0), Z.reshape(2, 3), Z[::-1].reshape(2, 3))


def test_complex_atan2_as_jax():
    y, x = Z, Z[::-1] + 0.5j
    _as_jax(lambda np_, a, b: (np_.arctan2(a, b), np_.atan2(a, b)), y, x)
    _as_jax(lambda np_, a: np_.arctan2(a, 2.0), y)
    assert ember.lax.atan2(jnp.asarray(y), jnp.asarray(x)).dtype == np.complex64
    want = jax.grad(lambda a: jax_numpy.arctan2(a, 2 + 1j).real)(1 + 1j)
    np.testing.assert_allclose(ember.grad(lambda a: jnp.arctan2(a, 2 + 1j).real)(1 + 1j), want, rtol=1e-5)


def test_logsumexp_keeps_the_phase_as_jax():
    from jax.scipy import special as jax_special

    from ember.scipy import special
    for ours, theirs in ((nn.logsumexp, jax.nn.logsumexp), (special.logsumexp, jax_special.logsumexp)):
        _same(ours(jnp.asarray(Z)), theirs(Z))
        _same(ours(jnp.asarray(Z.reshape(2, 3)), axis=1), theirs(Z.reshape(2, 3), axis=1))
        _same(ours(jnp.asarray(Z), b=jnp.asarray(Z[::-1])), theirs(Z, b=Z[::-1]))
        _same(ours(jnp.asarray(Z), return_sign=True), theirs(Z, return_sign=True))
    _same(nn.logmeanexp(jnp.asarray(Z)), jax.nn.logmeanexp(Z))


def test_digitize_of_complex_values_as_jax():
    bins = np.sort(Z[::-1] * 0.75)
    for right in (False, True):
        _as_jax(lambda np_, x, b: np_.digitize(x, b, right=right), Z, bins, exact=True)
        _as_jax(lambda np_, x, b: np_.digitize(x, b[::-1], right=right), Z, bins, exact=True)


def test_maximum_minimum_and_clamp_with_nans_as_jax():
    # XLA selects by a comparison that fails at a NaN part: the second operand wins there.
    _as_jax(lambda np_, x, y: (np_.maximum(x, y), np_.minimum(x, y)), SPECIAL, SPECIAL_B, exact=True)
    got = jnp.asarray(ember.lax.clamp(jnp.asarray(SPECIAL), jnp.asarray(SPECIAL_B), jnp.asarray(np.roll(SPECIAL, 3))))
    want = jax.lax.clamp(SPECIAL, SPECIAL_B, np.roll(SPECIAL, 3))
    _same(got, want, exact=True)
    _same(nn.relu(jnp.asarray(SPECIAL)), jax.nn.relu(SPECIAL), exact=True)


def test_extrema_and_cumulative_extrema_with_nans_fold_as_jax():
    # (eagerly: XLA folds in order, a NaN replaced by whatever follows it)
    for fn in (jnp.max, jnp.min, jnp.ptp, lambda x: jnp.max(x.reshape(1, -1), axis=1)):
        jfn = {jnp.max: jax_numpy.max, jnp.min: jax_numpy.min, jnp.ptp: jax_numpy.ptp}.get(
            fn, lambda x: jax_numpy.max(x.reshape(1, -1), axis=1))
        for values in (SPECIAL, SPECIAL_B):
            _same(fn(jnp.asarray(values)), jfn(values), exact=True)
    for ours, theirs in ((lax.cummax, jax.lax.cummax), (lax.cummin, jax.lax.cummin)):
        for values in (SPECIAL, SPECIAL_B):
            _same(ours(jnp.asarray(values)), theirs(values), exact=True)
            _same(ours(jnp.asarray(values), reverse=True), theirs(values, reverse=True), exact=True)


def test_set_functions_collapse_complex_nans_as_jax():
    x = np.array([1 + 1j, complex(nan, 0), complex(nan, 0), complex(0, nan), 2], np.complex64)
    y = np.array([3, complex(nan, 1), 1 + 1j], np.complex64)
    for a, b in ((SPECIAL, SPECIAL_B), (x, y), (y, x)):
        for name in ("union1d", "setdiff1d", "setxor1d", "intersect1d"):
            _same(getattr(jnp, name)(a, b), getattr(jax_numpy, name)(a, b), exact=True)
        for name in ("union1d", "setdiff1d", "intersect1d"):  # (JAX's jitted: op by op it compiles every step)
            theirs = jax.jit(lambda u, v, name=name: getattr(jax_numpy, name)(u, v, size=12))(a, b)
            _same(getattr(jnp, name)(a, b, size=12), theirs, exact=True)
    # nothing in common: the padding defaults to 0, as JAX's
    _same(jnp.intersect1d(Z, Z + 100, size=3), jax_numpy.intersect1d(Z, Z + 100, size=3), exact=True)


def test_functions_refusing_complex_as_jax():
    with pytest.raises(ValueError, match="Clip received a complex value"):
        nn.standardize(jnp.asarray(Z))
    _same(nn.standardize(jnp.asarray(Z), algorithm="stable"), jax.nn.standardize(Z, algorithm="stable"))
    with pytest.raises(ValueError, match="must be a float dtype, got complex64"):
        ember.random.multivariate_normal(ember.random.key(0), np.zeros(2, np.complex64), np.eye(2))
    with pytest.raises(TypeError, match="erfc does not accept dtype complex64"):
        nn.gelu(jnp.asarray(Z), approximate=False)
    for fn in (jnp.imag, jnp.iscomplex, jnp.isreal):
        with pytest.raises(TypeError, match="imag requires ndarray or scalar arguments"):
            fn([1j, 2])


def test_imag_of_a_weak_real_is_weak_as_jax():
    for value in (1.0, 2, np.float32(1), np.ones(3, np.float32)):
        got, want = jnp.imag(value), jax_numpy.imag(value)
        assert got.dtype == want.dtype and got.weak_type == want.weak_type and got.shape == want.shape


def test_complex_activations_as_jax():
    z = Z * 0.3
    for name in ("relu", "relu6", "sigmoid", "softplus", "silu", "gelu", "hard_silu", "hard_sigmoid", "log_sigmoid",
                 "elu", "celu", "selu", "leaky_relu", "hard_tanh", "tanh", "soft_sign", "squareplus", "mish"):
        _as_jax(lambda np_, x: getattr(nn if np_ is jnp else jax.nn, name)(x), z)


@given(values=complex_arrays(np.complex64, (6,), specials=True), others=complex_arrays(np.complex64, (6,)))
def test_nan_to_num_isclose_and_products_over_specials_as_jax(values, others):
    _same(jnp.nan_to_num(values), jax_numpy.nan_to_num(values), exact=True)
    _same(jnp.nan_to_num(values, nan=1 + 1j, posinf=2.0), jax_numpy.nan_to_num(values, nan=1 + 1j, posinf=2.0),
          exact=True)
    _same(jnp.isclose(values, others), jax_numpy.isclose(values, others), exact=True)
    _same(jnp.isclose(values, values, equal_nan=True), jax_numpy.isclose(values, values, equal_nan=True), exact=True)
    # (a sum that cancels: both libraries round each term, so compare within the terms' size)
    scale = float(np.sum(np.abs(others.astype(np.complex128)) * np.abs(others[::-1].astype(np.complex128))))
    got, want = np.asarray(jnp.vdot(others, others[::-1])), np.asarray(jax_numpy.vdot(others, others[::-1]))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * (1 + scale))
