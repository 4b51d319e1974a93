"""ember.scipy.fft (dct, idct, dctn, idctn): against scipy.fft for every type, norm, length and
axis, eagerly and under jit; types, complex input, errors, gradients and vmap against JAX."""
import inspect

import numpy as np
import pytest

import ember
from ember import jax_import
from ember.scipy import fft
from tests.util import assert_allclose, check_eager_and_jit

scipy_fft = pytest.importorskip("scipy.fft")

F32 = dict(rtol=2e-5, atol=2e-5)


@pytest.fixture
def x():
    return np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)


@pytest.mark.parametrize("name", ["dct", "idct"])
@pytest.mark.parametrize("type", [2, 3])
@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [None, 1, 5, 11])
@pytest.mark.parametrize("axis", [0, -1])
def test_one_axis_matches_scipy(x, name, type, norm, n, axis):
    expected = getattr(scipy_fft, name)(x.astype(np.float64), type=type, n=n, axis=axis, norm=norm)
    ours = getattr(fft, name)
    check_eager_and_jit(lambda v: ours(v, type=type, n=n, axis=axis, norm=norm), x,
                        expected=expected.astype(np.float32), **F32)


@pytest.mark.parametrize("name", ["dctn", "idctn"])
@pytest.mark.parametrize("type", [2, 3])
@pytest.mark.parametrize("norm", [None, "ortho"])
@pytest.mark.parametrize("s,axes", [(None, None), ((3, 9), None), (None, (0, 2)), ((2, 7), (2, 0)), (5, None),
                                    (None, (1,)), ((4, 5, 3), None)])
def test_many_axes_match_scipy(name, type, norm, s, axes):
    y = np.random.default_rng(1).standard_normal((4, 5, 6)).astype(np.float32)
    expected = getattr(scipy_fft, name)(y.astype(np.float64), type=type, s=s, axes=axes, norm=norm)
    ours = getattr(fft, name)
    check_eager_and_jit(lambda v: ours(v, type=type, s=s, axes=axes, norm=norm), y,
                        expected=expected.astype(np.float32), **F32)


@pytest.mark.parametrize("type", [2, 3])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_inverse_round_trips(x, type, norm):
    assert_allclose(fft.idct(fft.dct(x, type=type, norm=norm), type=type, norm=norm), x, **F32)
    assert_allclose(fft.idctn(fft.dctn(x, type=type, norm=norm), type=type, norm=norm), x, **F32)


def test_types_follow_jax(x):
    assert fft.dct(np.arange(6)).dtype == np.float32
    assert fft.idctn(np.ones((3, 4), np.float16)).dtype == np.float32  # (the FFT widens half types)
    assert fft.dct(np.ones(4, bool)).dtype == np.float32
    z = (x + 1j * x[::-1]).astype(np.complex64)
    expected = scipy_fft.dct(z.astype(np.complex128), norm="ortho").astype(np.complex64)
    check_eager_and_jit(lambda v: fft.dct(v, norm="ortho"), z, expected=expected, **F32)
    assert_allclose(fft.idctn(z), scipy_fft.idctn(z.astype(np.complex128)).astype(np.complex64), **F32)


def test_float64_under_x64(x64):
    y = np.random.default_rng(2).standard_normal((3, 7))
    assert_allclose(fft.dct(y, norm="ortho"), scipy_fft.dct(y, norm="ortho"), rtol=1e-12, atol=1e-12)
    assert_allclose(fft.idctn(y, type=3), scipy_fft.idctn(y, type=3), rtol=1e-12, atol=1e-12)


def test_errors(x):
    with pytest.raises(NotImplementedError, match="types 2 and 3"):
        fft.dct(x, type=1)
    with pytest.raises(ValueError, match="not implemented"):
        fft.idctn(x, norm="sideways")
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        fft.dct([1.0, 2.0])
    with pytest.raises(ValueError, match="out of bounds"):
        fft.dct(x, axis=2)
    with pytest.raises(ValueError, match="at most x.ndim"):
        fft.dctn(x, s=(2, 2, 2))
    with pytest.raises(ValueError, match="different lengths"):
        fft.dctn(x, s=(2,), axes=(0, 1))
    with pytest.raises(ValueError, match="invalid number of data points"):
        fft.dct(x, n=0)


def test_signatures_match_jax():
    jfft = pytest.importorskip("jax.scipy.fft")
    for name in fft.__all__:
        ours, theirs = inspect.signature(getattr(fft, name)), inspect.signature(getattr(jfft, name))
        assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
               [(p.name, p.kind, p.default) for p in theirs.parameters.values()]
    assert jax_import._target("jax.scipy.fft") == "ember.scipy.fft"


def test_grad_and_vmap_match_jax(x):
    jax = pytest.importorskip("jax")
    jfft = pytest.importorskip("jax.scipy.fft")

    def loss(f, g):
        return lambda v: (f(v, norm="ortho")[1:3] ** 2).sum() + g(v, n=10)[4]

    ours = ember.grad(loss(fft.dct, fft.idct))(x[0])
    # (JAX's side jitted: op by op it compiles every operation of the transforms for its shapes)
    theirs = jax.jit(jax.grad(loss(jfft.dct, jfft.idct)))(x[0])
    assert_allclose(ours, np.asarray(theirs), **F32)
    ours = ember.jit(ember.grad(lambda v: (fft.dctn(v) * x).sum()))(x)
    assert_allclose(ours, np.asarray(jax.jit(jax.grad(lambda v: (jfft.dctn(v) * x).sum()))(x)), **F32)
    assert_allclose(ember.vmap(lambda v: fft.idct(v, n=6))(x),
                    np.asarray(jax.jit(jax.vmap(lambda v: jfft.idct(v, n=6)))(x)), **F32)
    assert_allclose(ember.vmap(fft.dctn, in_axes=1)(x), np.asarray(jax.jit(jax.vmap(jfft.dctn, in_axes=1))(x)), **F32)
