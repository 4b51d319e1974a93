"""Fast Fourier transforms: lax.fft and jnp.fft against NumPy (and JAX), eagerly and under jit,
with derivatives (against jax.grad and finite differences), batching and errors."""
import functools
import subprocess
import sys

import hypothesis.extra.numpy as hnp
import jax
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.numpy as jnp
from ember import lax
from ember.lax.fft import fft_p

RNG = np.random.default_rng(0)
SIZES = [8, 16, 7, 13, 31, 15, 45]  # powers of two, primes, odd composites
NORMS = [None, "backward", "ortho", "forward"]


def _real(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _complex(*shape, dtype=np.complex64):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _close(got, want, dtype, tol=2e-6):
    """Equal dtype and shape; close relative to the norm of the result (the FFT's error is spread
    over all bins, so elementwise relative error is meaningless for the small ones)."""
    got = np.asarray(got)
    assert got.dtype == dtype, (got.dtype, dtype)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    scale = max(np.linalg.norm(np.asarray(want, np.complex128)), 1e-30)
    err = np.linalg.norm(got.astype(np.complex128) - want) / scale
    assert err <= tol, f"relative error {err:.2e}"


def _numpy(name, x, *args, **kwargs):
    """NumPy's transform computed in double precision: the reference the float32 results approach.
    An ``s`` without ``axes`` names the last ``len(s)`` axes (as JAX; NumPy 2 deprecates the default)."""
    wide = x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)
    if name.endswith(("n", "2")) and len(args) == 1 and args[0] is not None and kwargs.get("axes") is None:
        kwargs["axes"] = tuple(range(-len(args[0]), 0))
    return getattr(np.fft, name)(wide, *args, **kwargs)


# --- lax.fft --------------------------------------------------------------------------------------
def test_fft_type_is_an_int_enum_as_in_jax():
    assert [t.name for t in lax.FftType] == ["FFT", "IFFT", "RFFT", "IRFFT"]
    assert [int(t) for t in lax.FftType] == [0, 1, 2, 3]
    assert [int(t) for t in jax.lax.FftType] == [int(t) for t in lax.FftType]


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("fft_type", ["fft", "ifft", "rfft", "irfft", "FFT", "IRFFT", lax.FftType.RFFT])
def test_lax_fft_matches_numpy_over_trailing_dimensions(fft_type, rank):
    kind = fft_type if isinstance(fft_type, lax.FftType) else lax.FftType[fft_type.upper()]
    lengths = (5, 6, 7)[3 - rank:]
    axes = tuple(range(-rank, 0))
    if kind == lax.FftType.RFFT:
        x = _real(2, *lengths)
        want, dtype = _numpy("rfftn", x, axes=axes), np.complex64
    elif kind == lax.FftType.IRFFT:
        x = _complex(2, *lengths[:-1], lengths[-1] // 2 + 1)
        want, dtype = _numpy("irfftn", x, lengths, axes=axes), np.float32
    else:
        x = _complex(2, *lengths)
        want, dtype = _numpy("fftn" if kind == lax.FftType.FFT else "ifftn", x, axes=axes), np.complex64
    _close(lax.fft(x, fft_type, lengths), want, dtype)
    _close(ember.jit(lambda x: lax.fft(x, fft_type, lengths))(x), want, dtype)
    jax_type = jax.lax.FftType(int(fft_type)) if isinstance(fft_type, lax.FftType) else fft_type
    _close(jax.lax.fft(x, jax_type, lengths), want, dtype)  # (the same call, the same answer)


def test_lax_fft_converts_its_operand_as_jax():
    assert lax.fft(np.arange(4, dtype=np.int32), "fft", (4,)).dtype == np.complex64
    assert lax.fft(np.ones(4, np.float16), "ifft", [4]).dtype == np.complex64
    assert lax.fft(np.arange(4, dtype=np.int32), "rfft", (4,)).dtype == np.complex64
    assert lax.fft(np.ones(3, np.float32), "irfft", (4,)).dtype == np.float32
    x = jnp.ones(3, jnp.float32)
    assert lax.fft(x, "fft", ()).dtype == np.complex64  # no lengths: the converted operand
    assert not lax.fft(1j * jnp.ones(4), "fft", (4,)).weak_type
    np.testing.assert_allclose(lax.fft(np.arange(4.0, dtype=np.float32), "fft", (4,)), np.fft.fft(np.arange(4.0)),
                               atol=1e-6)


def test_lax_fft_keeps_double_precision_with_x64(x64):
    z = _complex(6, dtype=np.complex128)
    out = lax.fft(z, "fft", (6,))
    assert out.dtype == np.complex128
    np.testing.assert_allclose(out, np.fft.fft(z), rtol=1e-13, atol=1e-13)
    assert lax.fft(z.real, "rfft", (6,)).dtype == np.complex128
    assert lax.fft(z, "irfft", (10,)).dtype == np.float64
    assert jnp.fft.fft(np.arange(6, dtype=np.int64)).dtype == np.complex128


@pytest.mark.parametrize("call, error, message", [
    (lambda: lax.fft(np.ones(4, np.complex64), "fftx", (4,)), ValueError, "Unknown FFT type 'fftx'"),
    (lambda: lax.fft(np.ones(4, np.complex64), 0, (4,)), TypeError, "Unknown FFT type value '0'"),
    (lambda: lax.fft(np.ones(4, np.complex64), "rfft", (4,)), ValueError, "only real valued inputs supported"),
    (lambda: lax.fft(np.ones(4, np.float16), "rfft", (4,)), ValueError, "RFFT input must be float32 or float64"),
    (lambda: lax.fft(np.ones((2, 3), np.complex64), "fft", (2, 4)), ValueError,
     r"FFT input shape \(2, 3\) minor dimensions must be equal to fft_lengths \(2, 4\)"),
    (lambda: lax.fft(np.ones(4, np.complex64), "fft", (1, 4)), ValueError,
     "must have at least as many input dimensions as fft_lengths"),
    (lambda: lax.fft(np.ones((2, 2, 2, 2), np.complex64), "fft", (2, 2, 2, 2)), ValueError, "1 to 3 entries"),
    (lambda: lax.fft(np.ones(5, np.float32), "rfft", (4,)), ValueError, "RFFT input shape"),
    (lambda: lax.fft(np.ones(5, np.complex64), "irfft", (4,)), ValueError, r"fft_lengths\[-1\] // 2 \+ 1 = 3"),
    (lambda: lax.fft(np.ones((2, 3), np.complex64), "irfft", (3, 4)), ValueError, "IRFFT input shape"),
    (lambda: fft_p.bind(np.ones(4, np.float32), fft_type=lax.FftType.FFT, fft_lengths=(4,)), ValueError,
     "FFT input must be complex64 or complex128, got float32"),
    (lambda: fft_p.bind(np.ones(4, np.float32), fft_type=lax.FftType.IRFFT, fft_lengths=(6,)), ValueError,
     "IRFFT input must be complex64 or complex128"),
    (lambda: lax.fft(np.ones(4, np.complex64), "fft", (4.0,)), TypeError, "integer"),
])
def test_lax_fft_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_empty_arrays_transform_to_empty_or_zero_results():
    assert lax.fft(np.ones((0, 4), np.complex64), "fft", (4,)).shape == (0, 4)
    np.testing.assert_array_equal(lax.fft(np.ones((2, 0), np.float32), "rfft", (0,)), np.zeros((2, 1)))
    assert lax.fft(np.ones((0, 3), np.complex64), "irfft", (4,)).shape == (0, 4)


# --- jnp.fft: one axis ----------------------------------------------------------------------------
_ONE_AXIS_INPUT = {"fft": _complex, "ifft": _complex, "rfft": _real, "irfft": _complex, "hfft": _complex,
                   "ihfft": _real}
_ONE_AXIS_DTYPE = {"fft": np.complex64, "ifft": np.complex64, "rfft": np.complex64, "irfft": np.float32,
                   "hfft": np.float32, "ihfft": np.complex64}


@pytest.mark.parametrize("name", list(_ONE_AXIS_INPUT))
@pytest.mark.parametrize("size", SIZES)
def test_one_axis_transforms_match_numpy(name, size):
    ours, theirs = getattr(jnp.fft, name), functools.partial(_numpy, name)
    x = _ONE_AXIS_INPUT[name](3, size)
    for norm in NORMS:
        for n in (None, size, size - 2, size + 3):  # the default, exact, cropped and zero-padded
            for axis, operand in ((-1, x), (0, x.T)):
                _close(ours(operand, n, axis, norm), theirs(operand, n, axis, norm), _ONE_AXIS_DTYPE[name])


@pytest.mark.parametrize("name", list(_ONE_AXIS_INPUT))
@pytest.mark.parametrize("size", [8, 13, 45])
def test_one_axis_transforms_under_jit(name, size):
    ours, theirs = getattr(jnp.fft, name), functools.partial(_numpy, name)
    x = _ONE_AXIS_INPUT[name](4, size)
    cases = [(n, axis, norm) for norm in NORMS for n, axis in ((None, -1), (size + 2, 1), (5, 0))]
    outs = ember.jit(lambda x: [ours(x, n, axis, norm) for n, axis, norm in cases])(x)
    for out, (n, axis, norm) in zip(outs, cases):
        _close(out, theirs(x, n, axis, norm), _ONE_AXIS_DTYPE[name])


def test_one_axis_functions_by_name():
    x, z = _real(10), _complex(10)
    _close(jnp.fft.fft(z), np.fft.fft(z), np.complex64)
    _close(jnp.fft.ifft(z), np.fft.ifft(z), np.complex64)
    _close(jnp.fft.rfft(x), np.fft.rfft(x), np.complex64)
    _close(jnp.fft.irfft(z), np.fft.irfft(z), np.float32)
    _close(jnp.fft.hfft(z), np.fft.hfft(z), np.float32)
    _close(jnp.fft.ihfft(x), np.fft.ihfft(x), np.complex64)
    _close(jnp.fft.irfft(jnp.fft.rfft(x), 10), x, np.float32)
    half = z[:6].copy()
    half[[0, 5]] = half[[0, 5]].real  # the zero and Nyquist bins of a real signal's spectrum are real
    _close(jnp.fft.ihfft(jnp.fft.hfft(half, 10)), half, np.complex64)


# --- jnp.fft: several axes ------------------------------------------------------------------------
_ND_CASES = [  # (name, s, axes)
    ("fftn", None, None), ("fftn", (4, 9), None), ("fftn", None, (0,)), ("fftn", (6, 5), (2, 0)),
    ("fftn", (3, 7, 4), (-1, 0, 1)), ("ifftn", None, None), ("ifftn", (5,), (1,)), ("ifftn", (8, 8), (-3, -1)),
    ("rfftn", None, None), ("rfftn", (4, 9), None), ("rfftn", None, (-1, 0)), ("rfftn", (7, 6, 5), (1, 2, 0)),
    ("irfftn", None, None), ("irfftn", (4, 9), None), ("irfftn", (5,), (0,)), ("irfftn", (7, 6, 5), (1, 2, 0)),
    ("fft2", None, (-2, -1)), ("fft2", (5, 7), (0, 2)), ("ifft2", None, (-2, -1)), ("ifft2", (6, 6), (2, 1)),
    ("rfft2", None, (-2, -1)), ("rfft2", (4, 13), (0, -1)), ("irfft2", None, (-2, -1)), ("irfft2", (5, 8), (2, 0)),
]


def _nd_input(name):
    return _real(4, 5, 6) if name.startswith("rfft") else _complex(4, 5, 6)


def _nd_dtype(name):
    return np.float32 if name.startswith("irfft") else np.complex64


@pytest.mark.parametrize("name, s, axes", _ND_CASES)
def test_several_axes_match_numpy_eagerly_and_under_jit(name, s, axes):
    x = _nd_input(name)
    kwargs = {} if axes is None else {"axes": axes}
    for norm in NORMS:
        _close(getattr(jnp.fft, name)(x, s, norm=norm, **kwargs), _numpy(name, x, s, norm=norm, **kwargs),
               _nd_dtype(name))
    outs = ember.jit(lambda x: [getattr(jnp.fft, name)(x, s, norm=norm, **kwargs) for norm in NORMS])(x)
    for out, norm in zip(outs, NORMS):
        _close(out, _numpy(name, x, s, norm=norm, **kwargs), _nd_dtype(name))


def test_two_axis_functions_by_name():
    x, z = _real(6, 7), _complex(6, 7)
    _close(jnp.fft.fft2(z), np.fft.fft2(z), np.complex64)
    _close(jnp.fft.ifft2(z), np.fft.ifft2(z), np.complex64)
    _close(jnp.fft.rfft2(x), np.fft.rfft2(x), np.complex64)
    _close(jnp.fft.irfft2(z), np.fft.irfft2(z), np.float32)
    _close(jnp.fft.fftn(z), np.fft.fftn(z), np.complex64)
    _close(jnp.fft.ifftn(z), np.fft.ifftn(z), np.complex64)
    _close(jnp.fft.rfftn(x), np.fft.rfftn(x), np.complex64)
    _close(jnp.fft.irfftn(z), np.fft.irfftn(z), np.float32)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
@pytest.mark.parametrize("axes", [None, (4, 0, 2, 1), (1, 2, 3, 4, 0)])
def test_more_than_three_axes_take_several_transforms(name, axes):
    x = _real(3, 4, 5, 2, 6) if name == "rfftn" else _complex(3, 4, 5, 2, 6)
    s = None if axes is None else tuple(np.array([4, 6, 5, 3, 7])[list(axes)])
    for norm in (None, "ortho"):
        _close(getattr(jnp.fft, name)(x, s, axes, norm), _numpy(name, x, s, axes, norm), _nd_dtype(name))
    _close(ember.jit(lambda x: getattr(jnp.fft, name)(x, s, axes))(x), _numpy(name, x, s, axes), _nd_dtype(name))


def test_no_axes_and_scalars():
    _close(jnp.fft.fftn(np.float32(3.0)), np.complex128(3.0), np.complex64)
    x = _real(3, 4)
    _close(jnp.fft.fftn(x, axes=()), x.astype(np.complex64), np.complex64, tol=0)


# --- types ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_, np.float16, jnp.bfloat16, np.float32])
def test_real_and_integer_input_promotes_as_jax(dtype):
    x = (np.arange(12) % 5).astype(dtype).reshape(3, 4)
    wide = np.asarray(x, np.float64)
    _close(jnp.fft.fft(x), np.fft.fft(wide), np.complex64, tol=1e-6)
    _close(jnp.fft.ifft2(x), np.fft.ifft2(wide), np.complex64, tol=1e-6)
    _close(jnp.fft.irfft(x), np.fft.irfft(wide), np.float32, tol=1e-6)
    _close(jnp.fft.hfft(x), np.fft.hfft(wide), np.float32, tol=1e-6)
    assert jax.numpy.fft.fft(x).dtype == np.complex64
    if dtype in (np.float16, jnp.bfloat16):  # as JAX: the real transforms take float32 or float64
        with pytest.raises(ValueError, match="RFFT input must be float32 or float64"):
            jnp.fft.rfft(x)
    else:
        _close(jnp.fft.rfft(x), np.fft.rfft(wide), np.complex64, tol=1e-6)
        _close(jnp.fft.ihfft(x), np.fft.ihfft(wide), np.complex64, tol=1e-6)


def test_real_transforms_refuse_complex_input():
    for f in (jnp.fft.rfft, jnp.fft.ihfft, jnp.fft.rfft2, jnp.fft.rfftn):
        with pytest.raises(ValueError, match="only real valued inputs supported for rfft"):
            f(_complex(4, 4))


# --- frequencies and shifts -----------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 7, 8, 13])
@pytest.mark.parametrize("d", [1.0, 0.25, 3])
def test_frequencies_match_numpy(n, d):
    np.testing.assert_allclose(jnp.fft.fftfreq(n, d), np.fft.fftfreq(n, d), rtol=1e-6)
    np.testing.assert_allclose(jnp.fft.rfftfreq(n, d), np.fft.rfftfreq(n, d), rtol=1e-6)
    assert jnp.fft.fftfreq(n, d).dtype == jnp.fft.rfftfreq(n, d).dtype == np.float32
    traced = ember.jit(lambda d: (jnp.fft.fftfreq(n, d), jnp.fft.rfftfreq(n, d)))(np.float32(d))
    np.testing.assert_allclose(traced[0], np.fft.fftfreq(n, d), rtol=1e-6)
    np.testing.assert_allclose(traced[1], np.fft.rfftfreq(n, d), rtol=1e-6)


def test_frequency_dtypes_as_jax():
    for dtype in (np.int32, np.float16, np.complex64, np.float32):
        ours, theirs = jnp.fft.fftfreq(5, 0.1, dtype=dtype), jax.numpy.fft.fftfreq(5, 0.1, dtype=dtype)
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(np.asarray(ours, np.complex64), np.asarray(theirs, np.complex64), rtol=1e-3)
        ours, theirs = jnp.fft.rfftfreq(5, 0.1, dtype=dtype), jax.numpy.fft.rfftfreq(5, 0.1, dtype=dtype)
        assert ours.dtype == theirs.dtype
        # (JAX truncates d * n = 0.5 to the integer type and divides by zero: NumPy's values here)
        np.testing.assert_allclose(np.asarray(ours, np.complex64), np.fft.rfftfreq(5, 0.1), rtol=1e-3)
    assert jnp.fft.fftfreq(0).shape == (0,)
    with pytest.raises(ValueError, match="The n argument of jax.numpy.fft.fftfreq only takes an int"):
        jnp.fft.fftfreq([4])
    with pytest.raises(ValueError, match="The d argument of jax.numpy.fft.rfftfreq only takes a single value"):
        jnp.fft.rfftfreq(4, [1.0, 2.0])


@pytest.mark.parametrize("axes", [None, 0, -1, (0, 2), (2, 1, 0)])
def test_shifts_match_numpy(axes):
    x = np.arange(3 * 4 * 5).reshape(3, 4, 5)
    np.testing.assert_array_equal(jnp.fft.fftshift(x, axes), np.fft.fftshift(x, axes))
    np.testing.assert_array_equal(jnp.fft.ifftshift(x, axes), np.fft.ifftshift(x, axes))
    np.testing.assert_array_equal(jnp.fft.ifftshift(jnp.fft.fftshift(x, axes), axes), x)
    assert jnp.fft.fftshift(x, axes).dtype == np.int32
    np.testing.assert_array_equal(ember.jit(lambda x: jnp.fft.fftshift(x, axes))(x), np.fft.fftshift(x, axes))


# --- errors (NumPy's for n, axes and norm) --------------------------------------------------------
@pytest.mark.parametrize("call, error, message", [
    (lambda x: jnp.fft.fft(x, 0), ValueError, r"Invalid number of FFT data points \(0\) specified."),
    (lambda x: jnp.fft.irfft(x, -1), ValueError, r"Invalid number of FFT data points \(-1\) specified."),
    (lambda x: jnp.fft.fftn(x, (0, 2)), ValueError, r"Invalid number of FFT data points \(0\)"),
    (lambda x: jnp.fft.irfft(x[:, :1]), ValueError, r"Invalid number of FFT data points \(0\)"),
    (lambda x: jnp.fft.fft(x, 2.0), TypeError, "'float' object cannot be interpreted as an integer"),
    (lambda x: jnp.fft.fft(x, norm="bad"), ValueError, 'Invalid norm value bad; should be "backward","ortho" or'),
    (lambda x: jnp.fft.hfft(x, norm="Ortho"), ValueError, "Invalid norm value Ortho"),
    (lambda x: jnp.fft.fft(x, axis=2), np.exceptions.AxisError, "axis 2 is out of bounds for array of dimension 2"),
    (lambda x: jnp.fft.rfftn(x, axes=(0, -3)), np.exceptions.AxisError, "axis -3 is out of bounds"),
    (lambda x: jnp.fft.fftn(x, (2, 3, 4)), np.exceptions.AxisError, "axis -3 is out of bounds"),
    (lambda x: jnp.fft.fftn(x, (2,), (0, 1)), ValueError, "Shape and axes have different lengths."),
    (lambda x: jnp.fft.fftn(x, axes=(0, -2)), ValueError,
     r"jax.numpy.fft.fftn does not support repeated axes. Got axes \(0, 0\)."),
    (lambda x: jnp.fft.fft2(x, axes=(0,)), ValueError, r"jax.numpy.fft.fft2 only supports 2 axes. Got axes = \(0,\)."),
    (lambda x: jnp.fft.fft(x, axis=(0, 1)), ValueError,
     r"jax.numpy.fft.fft does not support multiple axes. Please use jax.numpy.fft.fftn."),
    (lambda x: jnp.fft.fft([1.0, 2.0]), TypeError, "jax.numpy.fft.fft requires ndarray or scalar arguments"),
    (lambda x: jnp.fft.hfft([1.0, 2.0]), TypeError, "jax.numpy.fft.hfft requires ndarray or scalar arguments"),
    (lambda x: jnp.fft.fftshift([1.0, 2.0]), TypeError, "fftshift requires ndarray or scalar arguments"),
    (lambda x: jnp.fft.fft(np.float32(1.0)), np.exceptions.AxisError, "axis -1 is out of bounds"),
])
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call(_complex(3, 4))


def test_axis_errors_are_value_and_index_errors():
    """NumPy's AxisError: JAX raises a ValueError there, NumPy's fft an IndexError."""
    with pytest.raises(ValueError):
        jnp.fft.fft(np.ones(3), axis=1)
    with pytest.raises(IndexError):
        jnp.fft.fft(np.ones(3), axis=1)


# --- special values (hypothesis) ------------------------------------------------------------------
_SPECIAL = st.sampled_from([np.inf, -np.inf, np.nan])


@settings(max_examples=20)
@given(st.data())
def test_finite_values_match_numpy_and_special_values_spread(data):
    """Finite input: NumPy's answer. A NaN in either part of one element reaches every bin (as NaN in
    one part or both); an infinity makes every bin non-finite."""
    n = data.draw(st.integers(1, 24))
    parts = hnp.arrays(np.float32, (2, n), elements=st.floats(-1e3, 1e3, width=32))
    re, im = data.draw(parts), data.draw(parts)
    z = (re + 1j * im).astype(np.complex64)
    for name in ("fft", "ifft"):
        _close(getattr(jnp.fft, name)(z), _numpy(name, z), np.complex64, tol=1e-5)
    _close(jnp.fft.rfft(re), _numpy("rfft", re), np.complex64, tol=1e-5)
    special = data.draw(_SPECIAL)
    row, col = data.draw(st.integers(0, 1)), data.draw(st.integers(0, n - 1))
    bad = z.copy()
    if data.draw(st.booleans()):
        bad.real[row, col] = special
    else:
        bad.imag[row, col] = special
    bad_re = re.copy()
    bad_re[row, col] = special
    with np.errstate(invalid="ignore"):
        outs = [np.asarray(jnp.fft.fft(bad)), np.asarray(jnp.fft.ifft(bad)), np.asarray(jnp.fft.rfft(bad_re))]
        outs_jit = ember.jit(lambda a, b: (jnp.fft.fft(a), jnp.fft.ifft(a), jnp.fft.rfft(b)))(bad, bad_re)
    for out, out_jit, source in zip(outs, outs_jit, (bad, bad, bad_re)):
        hit = ~np.isfinite(source).all(axis=1)
        assert not np.isfinite(out[hit]).any() and not np.isfinite(np.asarray(out_jit)[hit]).any()
        assert np.isfinite(out[~hit]).all()
        if np.isnan(special):
            assert np.isnan(out[hit]).all()


# --- derivatives ----------------------------------------------------------------------------------
def _losses(fft_module):
    """Real losses of FFT outputs, written once for ember and JAX (``fft_module`` is jnp or jax.numpy)."""
    f = fft_module.fft
    w7 = np.linspace(0.5, 2.0, 7).astype(np.float32)
    return {
        "fft_power": (lambda x: fft_module.sum(fft_module.abs(f.fft(x)) ** 2 * np.arange(1, 9)), "real", (3, 8)),
        "fft_parts": (lambda z: fft_module.sum(fft_module.real(f.fft(z, 7, 0, "ortho")) * 1.5
                                               - fft_module.imag(f.fft(z, 7, 0)) * w7[:, None]), "complex", (6, 3)),
        "ifft2": (lambda z: fft_module.sum(fft_module.abs(f.ifft2(z, norm="forward")) ** 2), "complex", (4, 5)),
        "rfft_even": (lambda x: fft_module.sum(fft_module.abs(f.rfft(x)) ** 2 * np.arange(1, 6)), "real", (2, 8)),
        "rfft_odd": (lambda x: fft_module.sum(fft_module.imag(f.rfft(x, 9)) * np.arange(5) + fft_module.real(
            f.rfft(x, 9)) ** 2), "real", (2, 7)),
        "rfftn": (lambda x: fft_module.sum(fft_module.abs(f.rfftn(x, axes=(0, 2))) ** 3), "real", (4, 2, 6)),
        "irfft_even": (lambda z: fft_module.sum(f.irfft(z, 8) * np.arange(8)), "complex", (3, 5)),
        "irfft_odd": (lambda z: fft_module.sum(f.irfft(z, 7, norm="ortho") ** 2), "complex", (3, 4)),
        "irfft2": (lambda z: fft_module.sum(fft_module.sin(f.irfft2(z, (4, 6)))), "complex", (4, 4)),
        "hfft": (lambda z: fft_module.sum(f.hfft(z, 6) ** 2 * np.arange(6)), "complex", (2, 4)),
        "ihfft": (lambda x: fft_module.sum(fft_module.abs(f.ihfft(x)) * np.arange(1, 5)), "real", (2, 7)),
    }


_EMBER_LOSSES, _JAX_LOSSES = _losses(jnp), _losses(jax.numpy)


def _loss_input(kind, shape, dtype=np.float32):
    return _real(*shape, dtype=dtype) if kind == "real" else _complex(*shape, dtype=np.result_type(dtype, 1j))


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("name", list(_EMBER_LOSSES))
def test_gradients_match_jax(name):
    loss, kind, shape = _EMBER_LOSSES[name]
    x = _loss_input(kind, shape)
    want = np.asarray(jax.jit(jax.grad(_JAX_LOSSES[name][0]))(x))
    for got in (ember.grad(loss)(x), ember.jit(ember.grad(loss))(x)):
        _close(got, want, x.dtype, tol=2e-5)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
@pytest.mark.parametrize("name", list(_EMBER_LOSSES))
def test_gradients_match_finite_differences(x64, name):
    """In double precision: <grad, v> against the central difference along v (for complex inputs
    re(sum(grad * v)): JAX's gradient is the conjugate of the steepest ascent direction)."""
    loss, kind, shape = _EMBER_LOSSES[name]
    x = _loss_input(kind, shape, np.float64)
    v = _loss_input(kind, shape, np.float64)
    grad = np.asarray(ember.grad(loss)(x))
    eps = 1e-6
    numeric = (float(loss(x + eps * v)) - float(loss(x - eps * v))) / (2 * eps)
    analytic = float(np.real(np.sum(grad * v)))
    assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric)), (analytic, numeric)


@pytest.mark.parametrize("fft_type, shape, lengths", [
    ("fft", (2, 6), (6,)), ("ifft", (3, 4, 5), (4, 5)), ("rfft", (2, 7), (7,)), ("rfft", (2, 4, 6), (4, 6)),
    ("irfft", (3, 5), (8,)), ("irfft", (3, 4), (7,)), ("irfft", (2, 3, 4, 4), (3, 4, 6)),
])
def test_lax_fft_vjp_and_jvp_match_jax(fft_type, shape, lengths):
    x = _real(*shape) if fft_type == "rfft" else _complex(*shape)
    out, pullback = ember.vjp(lambda x: lax.fft(x, fft_type, lengths), x)
    out_jax, pullback_jax = jax.vjp(lambda x: jax.lax.fft(x, fft_type, lengths), x)
    ct = _complex(*out.shape) if np.iscomplexobj(out_jax) else _real(*out.shape)
    _close(out, np.asarray(out_jax), out_jax.dtype)
    _close(pullback(ct)[0], np.asarray(pullback_jax(ct)[0]), x.dtype)
    t = _real(*shape) if fft_type == "rfft" else _complex(*shape)
    _, tangent = ember.jvp(lambda x: lax.fft(x, fft_type, lengths), (x,), (t,))
    _close(tangent, np.asarray(jax.jvp(lambda x: jax.lax.fft(x, fft_type, lengths), (x,), (t,))[1]), out_jax.dtype)


# --- batching -------------------------------------------------------------------------------------
@pytest.mark.parametrize("f, kind", [
    (lambda x: jnp.fft.fft(x), "complex"),
    (lambda x: jnp.fft.ifft(x, 7, axis=0, norm="ortho"), "complex"),
    (lambda x: jnp.fft.rfft(x, axis=0), "real"),
    (lambda x: jnp.fft.irfft(x, 9), "complex"),
    (lambda x: jnp.fft.fft2(x, (3, 8)), "complex"),
    (lambda x: jnp.fft.irfftn(x, axes=(1, 0)), "complex"),
    (lambda x: lax.fft(x, "rfft", (6, 5)), "real"),
])
@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap_matches_a_loop(f, kind, in_axis):
    x = _real(4, 6, 5) if kind == "real" else _complex(4, 6, 5)
    x = np.moveaxis(x, 0, in_axis)
    want = np.stack([np.asarray(f(np.take(x, i, in_axis))) for i in range(4)])
    _close(ember.vmap(f, in_axes=in_axis)(x), want, want.dtype, tol=1e-6)
    _close(ember.jit(ember.vmap(f, in_axes=in_axis))(x), want, want.dtype, tol=1e-6)


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
def test_per_example_gradients_under_vmap():
    loss = _EMBER_LOSSES["rfft_odd"][0]
    x = _real(3, 2, 7)
    want = np.stack([np.asarray(ember.grad(loss)(x[i])) for i in range(3)])
    _close(ember.vmap(ember.grad(loss))(x), want, np.float32, tol=1e-6)


# --- the JAX module paths -------------------------------------------------------------------------
def test_jax_numpy_fft_is_ember_numpy_fft_behind_the_switch():
    program = """
import ember
ember.install_as_jax()
import jax.numpy as jnp, jax.numpy.fft
from jax import lax
assert jax.numpy.fft is ember.numpy.fft and jnp.fft.rfft is ember.numpy.fft.rfft
assert lax.fft is ember.lax.fft and lax.FftType.IRFFT == 3
print(float(jnp.fft.irfft(jnp.fft.rfft(jnp.arange(6.0)))[5]))
"""
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert abs(float(out.stdout.strip()) - 5.0) < 1e-5


# --- the native FFT of rows (ember/backends/cpu/fft.py) --------------------------------------------
# Compiled programs transform batches of rows of power-of-two lengths natively (one vector lane a
# row); everything else stays on the reference rule (DUCC). Errors are relative RMS errors against
# NumPy in double precision, bounded by EPS * log2(n): the measured worst is 3.5e-8 (float32) and
# 5e-17 (float64) times log2(n), about DUCC's.
from ember.backends.cpu import fft as native_fft, lowering  # noqa: E402
from ember.backends.cpu.runner import FftStep  # noqa: E402
from ember.core.evaluation import impl_rules  # noqa: E402

EPS = {np.float32: 1.5e-7, np.float64: 3e-16}
LANES = native_fft.lanes(np.float32)
BATCHES = [(1,), (LANES - 1,), (LANES,), (LANES + 1,), (3 * LANES + 5,), (2, 3, 5)]


@pytest.fixture(scope="module", autouse=False)
def native_transforms():
    """The native transforms compiled (else programs call DUCC while they compile, at first)."""
    for dtype in (np.float32, np.float64):
        native_fft.transform_function(dtype)
        assert native_fft.ready(dtype)


def _row_input(kind, shape, n, dtype):
    complex_dtype = np.result_type(dtype, np.complex64)
    if kind == "rfft":
        return _real(*shape, n, dtype=dtype)
    return _complex(*shape, n // 2 + 1 if kind == "irfft" else n, dtype=complex_dtype)


def _numpy_rows(kind, x, n):
    wide = x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)
    return np.fft.irfft(wide, n) if kind == "irfft" else getattr(np.fft, kind)(wide)


def _rms_error(got, want):
    return np.linalg.norm(np.asarray(got, np.complex128) - want) / max(np.linalg.norm(want), 1e-300)


def _program(f, *args):
    """The CPU program that ``ember.jit(f)`` compiled for ``args`` (called once)."""
    jitted = ember.jit(f)
    out = jitted(*args)
    executable = next(iter(jitted._cache.entries.values())).executable
    return getattr(executable, "native", executable).program, out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", ["fft", "ifft", "rfft", "irfft"])
def test_native_rows_match_numpy_and_the_reference(native_transforms, kind, dtype):
    """Every power-of-two length of the native range and the lengths just outside it, batches of
    1, L - 1, L, L + 1 and 3L + 5 rows (L rows a group) and a three-dimensional batch, in one
    program: the lengths in range are native steps, the others DUCC, and all of them agree with
    NumPy (and with DUCC, the reference rule) within EPS * log2(n)."""
    low, high = native_fft.lengths(lax.FftType[kind.upper()])
    in_range = [1 << k for k in range(low.bit_length() - 1, high.bit_length())]
    cases = [(n, batch) for n in in_range + [low // 2, 2 * high] for batch in BATCHES]
    with ember.config.override(enable_x64=dtype == np.float64):
        xs = [_row_input(kind, batch, n, dtype) for n, batch in cases]
        program, outs = _program(lambda xs: [lax.fft(x, kind, (n,)) for x, (n, _) in zip(xs, cases)], xs)
        native = sum(1 for n, batch in cases if low <= n <= high
                     and np.prod(batch) >= native_fft.min_rows(n, lax.FftType[kind.upper()], xs[0].dtype))
        assert program.report.transforms == native == sum(isinstance(s, FftStep) for s in program.steps)
        assert len(program.report.fallbacks) == len(cases) - native
        for x, (n, _), out in zip(xs, cases, outs):
            want = _numpy_rows(kind, x, n)
            tol = EPS[dtype] * max(np.log2(n), 1)
            reference = impl_rules[fft_p](x, fft_type=lax.FftType[kind.upper()], fft_lengths=(n,))
            assert out.dtype == reference.dtype and out.shape == want.shape
            assert _rms_error(out, want) <= tol, (n, x.shape, _rms_error(out, want))
            assert _rms_error(out, reference) <= 2 * tol


_ND_NATIVE = [  # (name, shape of the input, s, axes)
    ("fft2", (3, 16, 32), None, (-2, -1)), ("ifft2", (64, 8), None, (-2, -1)),
    ("rfft2", (2, 32, 16), None, (-2, -1)), ("irfft2", (2, 32, 9), (32, 16), (-2, -1)),
    ("fftn", (4, 8, 16), None, None), ("ifftn", (2, 4, 8, 32), None, (1, 2, 3)), ("rfftn", (8, 4, 64), None, None),
    ("irfftn", (8, 4, 17), (8, 4, 32), None), ("fft2", (16, 32, 4), None, (0, 1)), ("rfftn", (16, 3, 8), None, (0, 2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, shape, s, axes", _ND_NATIVE)
def test_native_transforms_of_several_axes(native_transforms, name, shape, s, axes, dtype):
    """Two or three power-of-two axes: one native transform of rows an axis, each axis brought last
    by a transposing kernel (``fft.axis_by_axis``); NumPy's values within EPS * log2(N)."""
    with ember.config.override(enable_x64=dtype == np.float64):
        complex_dtype = np.result_type(dtype, np.complex64)
        x = _real(*shape, dtype=dtype) if name.startswith("rfft") else _complex(*shape, dtype=complex_dtype)
        program, out = _program(lambda x: getattr(jnp.fft, name)(x, s, axes), x)
        assert program.report.transforms == len(axes or s or shape) and not program.report.fallbacks
        want = _numpy(name, x, s, axes=axes)
        assert out.dtype == (dtype if name.startswith("irfft") else complex_dtype) and out.shape == want.shape
        assert _rms_error(out, want) <= EPS[dtype] * np.log2(np.prod(out.shape)), _rms_error(out, want)


def test_several_axes_stay_on_the_reference_unless_every_axis_is_native(native_transforms):
    x = _complex(4, 8, 6)  # (6: not a power of two)
    program, out = _program(lambda x: jnp.fft.fft2(x), x)
    assert program.report.transforms == 0 and program.report.fallbacks == ["fft"]
    _close(out, np.fft.fft2(x.astype(np.complex128)), np.complex64)


def test_native_irfft_ignores_the_imaginary_parts_of_the_zero_and_nyquist_bins(native_transforms):
    z = _complex(LANES + 3, 33)
    clean = z.copy()
    clean[:, [0, 32]] = clean[:, [0, 32]].real
    program, out = _program(lambda z: jnp.fft.irfft(z), z)
    assert program.report.transforms == 1
    np.testing.assert_array_equal(np.asarray(out), np.asarray(ember.jit(jnp.fft.irfft)(clean)))
    _close(out, np.fft.irfft(clean.astype(np.complex128)), np.float32, tol=1e-6)


def test_programs_call_the_reference_while_the_native_transform_compiles(native_transforms, monkeypatch):
    """Early in a process the function compiles in the background: the step runs DUCC meanwhile,
    and the dispatcher's plan is made once it is ready."""
    monkeypatch.setattr(native_fft, "ready", lambda dtype: False)
    x = _real(LANES + 1, 64)
    program, out = _program(lambda x: jnp.fft.rfft(x) * 2, x)
    assert program.report.transforms == 1 and program.plan is None and program.plan_pending
    _close(out, np.fft.rfft(x.astype(np.float64)) * 2, np.complex64)
    monkeypatch.undo()
    assert program.dispatch_plan() is not None


def test_native_rows_split_over_threads(native_transforms):
    """A batch large enough to be shared by threads (when there are several) gives the same rows."""
    x = _real(4 * 1024 + 3, 512)
    program, out = _program(lambda x: jnp.fft.rfft(x), x)
    (step,) = [s for s in program.steps if isinstance(s, FftStep)]
    assert step.chunks == min(native_fft.threads.thread_count(), step.transform.extent)
    assert program.plan is not None  # the dispatcher runs it: one native call
    _close(out, np.fft.rfft(x.astype(np.float64)), np.complex64, tol=EPS[np.float32] * 9)
    alone = np.asarray(ember.jit(jnp.fft.rfft)(x[-5:]))
    np.testing.assert_array_equal(np.asarray(out)[-5:], alone)  # (lanes are independent)


def test_native_rows_inside_a_program_with_other_kernels(native_transforms):
    """Kernels before, between and after the transforms: one native call (the dispatcher's plan)."""
    x = _real(2 * LANES + 1, 256)
    w = np.linspace(0.5, 1.5, 129).astype(np.float32)

    def f(x):
        spectrum = jnp.fft.rfft(jnp.tanh(x) * 2 + 1) * w
        back = jnp.fft.irfft(spectrum, 256)
        return back - x, jnp.abs(jnp.fft.fft(spectrum[:, :128], axis=-1)).sum(axis=0)
    program, (back, power) = _program(f, x)
    assert program.report.transforms == 3 and not program.report.fallbacks and program.report.kernels
    assert program.plan is not None
    wide = np.tanh(x.astype(np.float64)) * 2 + 1
    spectrum = np.fft.rfft(wide) * w
    _close(back, np.fft.irfft(spectrum, 256) - x, np.float32, tol=1e-6)
    _close(power, np.abs(np.fft.fft(spectrum[:, :128])).sum(axis=0), np.float32, tol=1e-6)
    f_jit = ember.jit(f)
    for _ in range(3):  # the dispatched calls (the hit path) give the same
        again = f_jit(x)
    np.testing.assert_array_equal(np.asarray(again[0]), np.asarray(back))


def test_native_rows_under_vmap_and_grad_match_jax(native_transforms):
    x = _real(3, LANES + 2, 64)

    def loss(x):
        spectrum = jnp.fft.rfft(x)
        return jnp.sum(jnp.abs(spectrum) ** 2 * np.arange(1, 34)) + jnp.sum(jnp.fft.irfft(spectrum * 1j, 64) * x)

    def loss_jax(x):
        spectrum = jax.numpy.fft.rfft(x)
        return jax.numpy.sum(jax.numpy.abs(spectrum) ** 2 * np.arange(1, 34)) + \
            jax.numpy.sum(jax.numpy.fft.irfft(spectrum * 1j, 64) * x)
    program, grads = _program(ember.vmap(ember.grad(loss)), x)
    assert program.report.transforms >= 3 and "fft" not in program.report.fallbacks
    want = np.asarray(jax.jit(jax.vmap(jax.grad(loss_jax)))(x))
    _close(grads, want, np.float32, tol=2e-5)
    z = _complex(LANES - 1, 5, 32)
    program, out = _program(ember.vmap(lambda z: jnp.fft.ifft(z, axis=-1)), z)
    assert program.report.transforms == 1
    _close(out, np.fft.ifft(z.astype(np.complex128)), np.complex64, tol=EPS[np.float32] * 5)


def test_native_rows_in_double_precision_under_grad(native_transforms, x64):
    z = _complex(LANES + 1, 128, dtype=np.complex128)

    def loss(z):
        return jnp.sum(jnp.abs(jnp.fft.fft(z)) ** 2 * np.linspace(0, 1, 128))
    program, grad = _program(ember.grad(loss), z)
    assert program.report.transforms >= 2
    with jax.enable_x64(True):
        want = np.asarray(jax.jit(jax.grad(lambda z: jax.numpy.sum(
            jax.numpy.abs(jax.numpy.fft.fft(z)) ** 2 * np.linspace(0, 1, 128))))(z))
    _close(grad, want, np.complex128, tol=1e-14)


def test_rows_in_loop_bodies(native_transforms):
    """In a scan or fori_loop body (a host call from the native loop, or the loop on the reference
    interpreter): the same values as NumPy's, step by step."""
    x = _real(LANES + 1, 64)

    def step(carry, _):
        out = jnp.fft.irfft(jnp.fft.rfft(carry) * 0.5j, 64)
        return out + carry, out
    carry, outs = ember.jit(lambda x: lax.scan(step, x, None, length=3))(x)
    want = x.astype(np.float64)
    for k in range(3):
        out = np.fft.irfft(np.fft.rfft(want) * 0.5j, 64)
        _close(outs[k], out, np.float32, tol=1e-6)
        want = out + want
    _close(carry, want, np.float32, tol=1e-6)
    looped = ember.jit(lambda z: lax.fori_loop(0, 2, lambda i, z: jnp.fft.ifft(jnp.fft.fft(z) * 2), z))
    z = _complex(3, 32)
    _close(looped(z), z * 4, np.complex64, tol=1e-6)


@pytest.mark.parametrize("vector_bytes", [32, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_rows_on_either_vector_width(monkeypatch, vector_bytes, dtype):
    """The function as other hosts compile it (AVX2: 32-byte vectors; AVX-512: 64, but 32 on Zen 4),
    called directly on partial groups, every type, lengths from 2 to the longest."""
    monkeypatch.setattr(native_fft, "VECTOR_BYTES", vector_bytes)
    monkeypatch.setattr(native_fft, "_compiled", {})
    native_fft.transform_function(dtype)  # (compiled now, for this width)
    lanes = native_fft.lanes(dtype)
    with ember.config.override(enable_x64=dtype == np.float64):
        for kind in ("fft", "ifft", "rfft", "irfft"):
            high = native_fft.lengths(lax.FftType[kind.upper()])[1]
            for n, rows in ((2, 1), (8, lanes + 1), (64, 2 * lanes - 1), (512, 3), (high, lanes + 2)):
                x = _row_input(kind, (rows,), n, dtype)
                eqn = ember.make_jaxpr(lambda x: lax.fft(x, kind, (n,)))(x).jaxpr.eqns[-1]
                transform = native_fft.RowTransform(eqn)
                out = np.empty(eqn.outvars[0].aval.shape, eqn.outvars[0].aval.dtype)
                transform(x, out)
                assert _rms_error(out, _numpy_rows(kind, x, n)) <= EPS[dtype] * max(np.log2(n), 1), (kind, n)


def test_twiddle_factors_are_accurate():
    """Within 2e-16 of exp(-2 pi i k / n) in long double (NumPy's exp is off by up to 2.5e-15)."""
    pi = np.longdouble("3.14159265358979323846264338327950288")
    for n in (8, 1000, 4096):
        k = np.arange(3 * n)
        angle = 2 * pi * k.astype(np.longdouble) / n
        got = native_fft._roots(k, n)
        assert np.max(np.abs(got.real - np.cos(angle))) < 2e-16
        assert np.max(np.abs(got.imag + np.sin(angle))) < 2e-16


@pytest.mark.parametrize("lanes, itemsize", [(16, 4), (8, 4), (8, 8), (4, 8)])
def test_transposing_network_transposes_with_one_shuffle_a_vector_a_stage(lanes, itemsize):
    stages, order = lowering.transpose_network(lanes, itemsize)
    assert len(stages) == lanes.bit_length() - 1
    matrix = np.arange(lanes * lanes).reshape(lanes, lanes)
    rows = list(matrix)
    for distance, low, high in stages:
        for i in range(lanes):
            if not i & distance:
                both = np.concatenate([rows[i], rows[i | distance]])
                rows[i], rows[i | distance] = both[low], both[high]
    for row, column in zip(rows, order):
        np.testing.assert_array_equal(row, matrix[:, column])
