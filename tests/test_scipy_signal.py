"""ember.scipy.signal (convolve, correlate, convolve2d, correlate2d, fftconvolve, detrend): against
scipy.signal in every mode, for real and complex inputs of either size order, eagerly and under jit;
errors, JAX's signatures, gradients and vmap against JAX."""
import inspect

import numpy as np
import pytest

import ember
from ember import jax_import
from ember.scipy import signal
from tests.util import assert_allclose, check_eager_and_jit

scipy_signal = pytest.importorskip("scipy.signal")

TOL = dict(rtol=2e-5, atol=2e-5)
SHAPES = [((10,), (3,)), ((3,), (10,)), ((5,), (5,)), ((1,), (7,)), ((6, 7), (3, 2)), ((3, 2), (6, 7)),
          ((5, 6), (5, 6)), ((4, 7), (5, 7)), ((6, 2), (2, 6)), ((4, 5, 3), (2, 3, 2))]


def _pair(shape1, shape2, complex_, seed=0):
    rng = np.random.default_rng(seed)

    def draw(shape):
        x = rng.standard_normal(shape)
        return (x + 1j * rng.standard_normal(shape)).astype(np.complex64) if complex_ else x.astype(np.float32)

    return draw(shape1), draw(shape2)


def _expected(name, a, b, **kw):
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    return getattr(scipy_signal, name)(a.astype(wide), b.astype(wide), **kw).astype(a.dtype)


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("name", ["convolve", "correlate", "fftconvolve", "convolve2d", "correlate2d"])
def test_matches_scipy(shapes, complex_, mode, name):
    a, b = _pair(*shapes, complex_)
    if name.endswith("2d") and a.ndim != 2:
        pytest.skip("2-D only")
    ours = getattr(signal, name)
    if mode == "valid" and not (all(np.greater_equal(a.shape, b.shape)) or all(np.less_equal(a.shape, b.shape))):
        with pytest.raises(ValueError, match="at least as large"):
            ours(a, b, mode)
        return
    check_eager_and_jit(lambda x, y: ours(x, y, mode), a, b, expected=_expected(name, a, b, mode=mode), **TOL)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_fft_method_and_axes(mode):
    a, b = _pair((3, 8, 5), (3, 4, 5), False, seed=1)
    for axes in [1, (1, -1), (-2,)]:
        check_eager_and_jit(lambda x, y: signal.fftconvolve(x, y, mode, axes=axes), a, b,
                            expected=_expected("fftconvolve", a, b, mode=mode, axes=axes), **TOL)
    c, d = _pair((9, 4), (3, 2), True, seed=2)
    assert_allclose(signal.convolve(c, d, mode, method="fft"), _expected("convolve", c, d, mode=mode), **TOL)
    assert_allclose(signal.correlate(c, d, mode, method="direct"), _expected("correlate", c, d, mode=mode), **TOL)
    # No axis longer than one on both sides: a broadcast product.
    e, f = _pair((1, 4), (5, 1), False, seed=3)
    assert_allclose(signal.fftconvolve(e, f), _expected("fftconvolve", e, f), **TOL)


def test_types():
    out = signal.convolve(np.array([1, 2, 3], np.int32), np.array([0, 1], np.int32))
    assert out.dtype == np.float32
    assert_allclose(out, np.array([0, 1, 2, 3], np.float32))
    assert signal.fftconvolve(np.ones(4, bool), np.ones(2, np.int8)).dtype == np.float32
    assert signal.correlate2d(np.ones((3, 3), np.float16), np.ones((2, 2), np.float16)).dtype == np.float16


def test_float64_under_x64(x64):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((7, 6)), rng.standard_normal((3, 4))
    assert_allclose(signal.correlate2d(a, b, "same"), scipy_signal.correlate2d(a, b, "same"), rtol=1e-12, atol=1e-12)
    assert_allclose(signal.fftconvolve(a, b), scipy_signal.fftconvolve(a, b), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("bp", [0, [3], [2, 5], np.array([1, 6])])
def test_detrend_matches_scipy(axis, bp):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((7, 8, 9)) + 0.5 * np.arange(9)).astype(np.float32)
    for type in ("linear", "constant"):
        expected = scipy_signal.detrend(x.astype(np.float64), axis=axis, type=type, bp=bp).astype(np.float32)
        check_eager_and_jit(lambda v: signal.detrend(v, axis=axis, type=type, bp=bp), x, expected=expected,
                            rtol=2e-5, atol=2e-5)
    assert signal.detrend(np.arange(5)).dtype == np.float32
    z = (x[0] + 1j * x[1]).astype(np.complex64)
    assert_allclose(signal.detrend(z, axis=0, bp=[4]), scipy_signal.detrend(z.astype(np.complex128), axis=0, bp=[4])
                    .astype(np.complex64), rtol=2e-5, atol=2e-5)


def test_errors():
    a, b = np.ones((3, 4), np.float32), np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="mode must be one of"):
        signal.convolve(a, b, "middle")
    with pytest.raises(ValueError, match="mode must be one of"):
        signal.fftconvolve(a, b, "middle")
    with pytest.raises(ValueError, match="expected 'auto', 'fft', or 'direct'"):
        signal.correlate(a, b, method="slow")
    with pytest.raises(ValueError, match="same dimensionality"):
        signal.convolve(a, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="zero-size"):
        signal.convolve(a, np.ones((0, 2), np.float32))
    with pytest.raises(NotImplementedError, match="boundary='fill', fillvalue=0"):
        signal.convolve2d(a, b, boundary="wrap")
    with pytest.raises(NotImplementedError, match="boundary='fill', fillvalue=0"):
        signal.correlate2d(a, b, fillvalue=1.0)
    with pytest.raises(ValueError, match="2-dimensional"):
        signal.convolve2d(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="mapped axes must have same shape"):
        signal.fftconvolve(a, b, axes=0)
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        signal.convolve([1.0, 2.0], b)
    with pytest.raises(ValueError, match="Trend type"):
        signal.detrend(a, type="cubic")
    with pytest.raises(ValueError, match="Breakpoints"):
        signal.detrend(a, bp=[9])
    with pytest.raises(NotImplementedError, match="overwrite_data"):
        signal.detrend(a, overwrite_data=True)


def test_signatures_match_jax():
    jsignal = pytest.importorskip("jax.scipy.signal")
    for name in signal.__all__:
        ours, theirs = inspect.signature(getattr(signal, name)), inspect.signature(getattr(jsignal, name))
        assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
               [(p.name, p.kind, p.default) for p in theirs.parameters.values()], name
    assert jax_import._target("jax.scipy.signal") == "ember.scipy.signal"


@pytest.mark.parametrize("name", ["convolve", "correlate", "fftconvolve", "convolve2d", "correlate2d"])
def test_grad_and_vmap_match_jax(name):
    jax = pytest.importorskip("jax")
    jsignal = pytest.importorskip("jax.scipy.signal")
    a, b = _pair((6, 5), (3, 2), False, seed=6)
    weights = np.random.default_rng(7).standard_normal((6, 5)).astype(np.float32)

    def loss(module):
        return lambda x, y: (getattr(module, name)(x, y, "same") * weights).sum()

    for argnums in (0, 1):
        ours = ember.jit(ember.grad(loss(signal), argnums=argnums))(a, b)
        assert_allclose(ours, np.asarray(jax.grad(loss(jsignal), argnums=argnums)(a, b)), **TOL)
    if not name.endswith("2d"):
        ours = ember.vmap(lambda x: getattr(signal, name)(x, b[:, 0], "valid"))(a.T)
        theirs = jax.vmap(lambda x: getattr(jsignal, name)(x, b[:, 0], "valid"))(a.T)
        assert_allclose(ours, np.asarray(theirs), **TOL)


def test_detrend_grad_matches_jax():
    jax = pytest.importorskip("jax")
    jsignal = pytest.importorskip("jax.scipy.signal")
    x = np.random.default_rng(8).standard_normal((3, 9)).astype(np.float32)
    w = np.random.default_rng(9).standard_normal((3, 9)).astype(np.float32)
    ours = ember.grad(lambda v: (signal.detrend(v, bp=[4]) * w).sum())(x)
    assert_allclose(ours, np.asarray(jax.grad(lambda v: (jsignal.detrend(v, bp=[4]) * w).sum())(x)),
                    rtol=1e-4, atol=1e-5)
    ours = ember.vmap(signal.detrend)(x)
    assert_allclose(ours, np.asarray(jax.vmap(jsignal.detrend)(x)), rtol=1e-4, atol=1e-5)
