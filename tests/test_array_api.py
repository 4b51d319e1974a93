"""The Python Array API standard (2024.12) as ``jax.numpy`` implements it: the namespace's metadata
(``__array_api_version__``, ``__array_namespace_info__``), ``device=`` on the creation functions,
the array object's ``device`` / ``to_device`` / ``__array_namespace__`` / ``__dlpack__``, the
standard's signatures (``clip(x, /, min, max)``, ``jnp.linalg.diagonal(x, /, *, offset)``, ...) and
the shapes of zero-size batches.

Each case runs against ember and, where it is installed, against JAX with the same assertions
(the data-apis ``array-api-tests`` suite is what found the differences).
"""
from __future__ import annotations

import contextlib
import importlib
import inspect

import numpy as np
import pytest

import ember
import ember.numpy as ejnp

IMPLS = ["ember", "jax"]


def _jnp(which: str):
    if which == "ember":
        return ejnp
    pytest.importorskip("jax")
    return importlib.import_module("jax.numpy")


@pytest.fixture(params=IMPLS)
def jnp(request):
    return _jnp(request.param)


def _x64(jnp, on: bool):
    """A context with 64-bit types on or off, for ember or JAX."""
    if jnp is ejnp:
        return ember.config.override(enable_x64=on)
    import jax
    return jax.enable_x64(on) if hasattr(jax, "enable_x64") else contextlib.nullcontext()


def _dtype_of(jnp, f):
    """The dtype of ``f()``'s result: ember's computed, JAX's traced (``jax.eval_shape``: JAX compiles
    each operation of each shape and dtype it runs)."""
    if jnp is ejnp:
        return f().dtype
    import jax
    return jax.eval_shape(f).dtype


def _cpu0(jnp):
    """The namespace's first real device (index 0 of ``devices()`` is None: "uncommitted")."""
    return jnp.__array_namespace_info__().devices()[1]


# --- namespace metadata -------------------------------------------------------------------------
def test_array_api_version(jnp):
    assert jnp.__array_api_version__ == "2024.12"


def test_namespace_info_capabilities(jnp):
    caps = jnp.__array_namespace_info__().capabilities()
    assert isinstance(caps, dict)
    assert caps["boolean indexing"] is False and caps["data-dependent shapes"] is False
    assert caps["max dimensions"] == 64


def test_namespace_info_devices(jnp):
    info = jnp.__array_namespace_info__()
    devices = info.devices()
    assert isinstance(devices, list)
    assert info.default_device() is None and devices[0] is None
    assert len(devices) >= 2 and jnp.ones(3).device in devices[1:]
    assert all(d.platform == "cpu" for d in devices[1:])


@pytest.mark.parametrize("x64", [False, True])
def test_namespace_info_default_dtypes(jnp, x64):
    with _x64(jnp, x64):
        got = jnp.__array_namespace_info__().default_dtypes()
        got_on_device = jnp.__array_namespace_info__().default_dtypes(device=_cpu0(jnp))
    bits = 64 if x64 else 32
    want = {"real floating": np.dtype(f"float{bits}"), "complex floating": np.dtype(f"complex{2 * bits}"),
            "integral": np.dtype(f"int{bits}"), "indexing": np.dtype(f"int{bits}")}
    assert got == want and got_on_device == want


_NARROW = {
    "bool": ["bool"],
    "signed integer": ["int8", "int16", "int32"],
    "unsigned integer": ["uint8", "uint16", "uint32"],
    "real floating": ["float32"],
    "complex floating": ["complex64"],
}
_WIDE = {"signed integer": ["int64"], "unsigned integer": ["uint64"], "real floating": ["float64"],
         "complex floating": ["complex128"]}


def _names(kinds: list[str], x64: bool) -> set[str]:
    return {n for k in kinds for n in _NARROW[k] + (_WIDE.get(k, []) if x64 else [])}


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("kind, kinds", [
    (None, ["bool", "signed integer", "unsigned integer", "real floating", "complex floating"]),
    ("bool", ["bool"]),
    ("signed integer", ["signed integer"]),
    ("unsigned integer", ["unsigned integer"]),
    ("integral", ["signed integer", "unsigned integer"]),
    ("real floating", ["real floating"]),
    ("complex floating", ["complex floating"]),
    ("numeric", ["signed integer", "unsigned integer", "real floating", "complex floating"]),
    (("bool", "real floating"), ["bool", "real floating"]),
    (("unsigned integer", "complex floating"), ["unsigned integer", "complex floating"]),
])
def test_namespace_info_dtypes(jnp, x64, kind, kinds):
    with _x64(jnp, x64):
        got = jnp.__array_namespace_info__().dtypes(kind=kind)
        on_device = jnp.__array_namespace_info__().dtypes(kind=kind, device=_cpu0(jnp))
    assert set(got) == _names(kinds, x64)
    assert on_device == got
    for name, dt in got.items():
        assert np.dtype(dt) == np.dtype(name)
        with _x64(jnp, x64):
            assert jnp.empty(1, dtype=dt).dtype == np.dtype(name)  # (each one is usable)


# --- device= and the array's device -------------------------------------------------------------
def _creations(jnp):
    x = jnp.arange(6.0).reshape(2, 3)
    return {
        "arange": lambda **kw: jnp.arange(5, **kw),
        "asarray": lambda **kw: jnp.asarray([1, 2], **kw),
        "asarray(array)": lambda **kw: jnp.asarray(x, **kw),
        "array": lambda **kw: jnp.array([1.0, 2.0], **kw),
        "empty": lambda **kw: jnp.empty((2, 2), **kw),
        "empty_like": lambda **kw: jnp.empty_like(x, **kw),
        "eye": lambda **kw: jnp.eye(3, **kw),
        "from_dlpack": lambda **kw: jnp.from_dlpack(np.arange(3.0, dtype=np.float32), **kw),
        "full": lambda **kw: jnp.full((2,), 7, **kw),
        "full_like": lambda **kw: jnp.full_like(x, 7, **kw),
        "linspace": lambda **kw: jnp.linspace(0, 1, 5, **kw),
        "ones": lambda **kw: jnp.ones(3, **kw),
        "ones_like": lambda **kw: jnp.ones_like(x, **kw),
        "zeros": lambda **kw: jnp.zeros(3, **kw),
        "zeros_like": lambda **kw: jnp.zeros_like(x, **kw),
        "astype": lambda **kw: jnp.astype(x, jnp.int32, **kw),
        "Array.astype": lambda **kw: x.astype(jnp.int32, **kw),
    }


@pytest.mark.parametrize("name", sorted(_creations(ejnp)))
def test_creation_device_keyword(jnp, name):
    make = _creations(jnp)[name]
    device = _cpu0(jnp)
    default = make()
    placed = make(device=device)
    also_default = make(device=None)
    assert placed.device == device and also_default.device == default.device
    np.testing.assert_array_equal(np.asarray(placed), np.asarray(default))
    assert placed.dtype == default.dtype and placed.shape == default.shape


_DEVICE_FUNCTIONS = ["arange", "asarray", "array", "empty", "empty_like", "eye", "from_dlpack", "full",
                     "full_like", "linspace", "ones", "ones_like", "zeros", "zeros_like", "astype"]


@pytest.mark.parametrize("name", _DEVICE_FUNCTIONS)
def test_creation_signature_has_keyword_only_device(jnp, name):
    param = inspect.signature(getattr(jnp, name)).parameters["device"]
    assert param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is None


def test_device_put_by_device_keyword_does_not_move_the_input():
    """``asarray(x, device=d)`` places a new array; ``x`` keeps its own placement."""
    x = ejnp.arange(3)
    y = ejnp.asarray(x, device=_cpu0(ejnp))
    assert y.device == _cpu0(ejnp) and x.device == _cpu0(ejnp)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


def test_device_keyword_under_jit():
    """Traced creation with ``device=`` computes the same values (placement is of concrete arrays)."""
    f = ember.jit(lambda v: ejnp.zeros(3, device=_cpu0(ejnp)) + ejnp.asarray(v, device=_cpu0(ejnp)))
    np.testing.assert_array_equal(np.asarray(f(ejnp.ones(3))), np.ones(3, np.float32))


def test_array_device_to_device_and_namespace(jnp):
    x = jnp.arange(4.0)
    device = _cpu0(jnp)
    assert x.device == device
    y = x.to_device(device)
    assert y.device == device and y.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    assert x.__array_namespace__() is jnp
    assert x.__array_namespace__(api_version="2024.12") is jnp
    with pytest.raises(ValueError):
        x.__array_namespace__(api_version="2021.12")


def test_to_device_signature(jnp):
    params = inspect.signature(jnp.ones(1).to_device).parameters
    assert list(params) == ["device", "stream"]
    assert params["stream"].kind is inspect.Parameter.KEYWORD_ONLY


# --- DLPack -------------------------------------------------------------------------------------
def test_dunder_dlpack_signature(jnp):
    params = inspect.signature(jnp.ones(1).__dlpack__).parameters
    assert list(params) == ["stream", "max_version", "dl_device", "copy"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None for p in params.values())


@pytest.mark.parametrize("kwargs", [{}, {"stream": None}, {"max_version": (1, 0)}, {"dl_device": (1, 0)},
                                    {"copy": True}, {"max_version": (1, 0), "copy": False}])
def test_dunder_dlpack(jnp, kwargs):
    x = jnp.arange(6, dtype=jnp.int32).reshape(2, 3)
    capsule = x.__dlpack__(**kwargs)
    assert type(capsule).__name__ == "PyCapsule"
    device_type, device_id = x.__dlpack_device__()
    assert int(device_type) == 1 and device_id == 0  # (kDLCPU, 0)
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(6, dtype=np.int32).reshape(2, 3))


def test_dunder_dlpack_refuses_a_stream_on_the_cpu():
    with pytest.raises(BufferError, match="stream"):
        ejnp.ones(2).__dlpack__(stream=1)


@pytest.mark.parametrize("copy", [None, True])
def test_from_dlpack(jnp, copy):
    src = np.arange(5, dtype=np.float32)
    y = jnp.from_dlpack(src, copy=copy)
    assert y.dtype == np.float32 and y.shape == (5,)
    np.testing.assert_array_equal(np.asarray(y), src)
    z = jnp.from_dlpack(jnp.asarray(src), device=_cpu0(jnp), copy=copy)
    assert z.device == _cpu0(jnp)
    np.testing.assert_array_equal(np.asarray(z), src)


def test_from_dlpack_copies_unless_told_not_to():
    src = np.arange(3, dtype=np.float32)
    copied = ejnp.from_dlpack(src)
    shared = ejnp.from_dlpack(src, copy=False, device=_cpu0(ejnp))
    src[0] = 42.0
    assert float(copied[0]) == 0.0 and float(shared[0]) == 42.0
    assert shared.device == _cpu0(ejnp)
    with pytest.raises(BufferError, match="copy=False"):  # (float64 becomes float32 with x64 off: a copy)
        ejnp.from_dlpack(np.arange(3.0), copy=False)


def test_from_dlpack_of_a_complex_buffer(jnp):
    src = np.array([1 + 2j, 3 - 4j], dtype=np.complex64)
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(src)), src)


def test_imag_of_real_and_complex(jnp):
    np.testing.assert_array_equal(np.asarray(jnp.imag(jnp.asarray([1 + 2j, 3 - 4j], dtype=jnp.complex64))),
                                  np.array([2, -4], np.float32))
    out = jnp.imag(jnp.arange(3.0))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(out), np.zeros(3, np.float32))


# --- clip -------------------------------------------------------------------------------------------
def test_clip_signature(jnp):
    params = inspect.signature(jnp.clip).parameters
    assert list(params) == ["arr", "min", "max"]
    assert params["arr"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert params["min"].kind is params["max"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


def test_clip_keywords(jnp):
    x = jnp.arange(6)
    np.testing.assert_array_equal(np.asarray(jnp.clip(x, min=1, max=3)), [1, 1, 2, 3, 3, 3])
    np.testing.assert_array_equal(np.asarray(jnp.clip(x, 1, 3)), [1, 1, 2, 3, 3, 3])
    np.testing.assert_array_equal(np.asarray(jnp.clip(x, max=2)), [0, 1, 2, 2, 2, 2])
    np.testing.assert_array_equal(np.asarray(jnp.clip(x, min=4)), [4, 4, 4, 4, 4, 5])
    np.testing.assert_array_equal(np.asarray(x.clip(min=1, max=3)), [1, 1, 2, 3, 3, 3])
    assert jnp.clip(x, min=1, max=3).dtype == x.dtype
    with pytest.raises(TypeError):
        jnp.clip(x, a_min=1)
    with pytest.raises(TypeError, match="clip requires ndarray or scalar arguments"):
        jnp.clip([1, 2], 0, 1)


# --- dtype equality -------------------------------------------------------------------------------
@pytest.mark.parametrize("other", [None, "not a dtype", object(), {}, {"a": 1}, [], 3, 2.5])
def test_dtype_compares_unequal_to_arbitrary_objects(jnp, other):
    for dt in (jnp.float32, jnp.int8, jnp.bool_, jnp.complex64, jnp.dtype("float32")):
        assert (dt == other) is False
        assert (dt != other) is True


def test_dtype_equalities_that_hold(jnp):
    assert jnp.float32 == np.float32 and jnp.float32 == np.dtype("float32")
    assert np.dtype("int32") == jnp.int32
    assert jnp.float32 != jnp.float64 and jnp.int32 != np.int64


# --- zero-size batches and jnp.linalg's own signatures ------------------------------------------
@pytest.mark.parametrize("shape, diag_shape, trace_shape", [
    ((0, 1, 1), (0, 1), (0,)),
    ((0, 2, 3), (0, 2), (0,)),
    ((2, 0, 3), (2, 0), (2,)),
    ((3, 0, 0), (3, 0), (3,)),
    ((2, 4, 3, 2), (2, 4, 2), (2, 4)),
])
def test_linalg_diagonal_and_trace_shapes(jnp, shape, diag_shape, trace_shape):
    x = jnp.ones(shape)
    assert jnp.linalg.diagonal(x).shape == diag_shape
    assert jnp.linalg.trace(x).shape == trace_shape


def test_linalg_diagonal_and_trace_values(jnp):
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    x = jnp.asarray(a)
    for offset in (-2, -1, 0, 1, 3, 5):
        want = np.diagonal(a, offset, -2, -1)
        np.testing.assert_array_equal(np.asarray(jnp.linalg.diagonal(x, offset=offset)), want)
        np.testing.assert_allclose(np.asarray(jnp.linalg.trace(x, offset=offset)), want.sum(-1))
    # jnp.diagonal / jnp.trace keep NumPy's axes (0, 1)
    np.testing.assert_array_equal(np.asarray(jnp.diagonal(x)), np.diagonal(a))
    np.testing.assert_allclose(np.asarray(jnp.trace(x)), np.trace(a))
    assert jnp.linalg.trace(jnp.ones((2, 2), jnp.int8)).dtype == jnp.asarray(1).dtype
    assert jnp.linalg.trace(jnp.ones((2, 2), jnp.int8), dtype=jnp.float32).dtype == np.float32


def test_linalg_signatures(jnp):
    def kinds(f):
        return [(n, p.kind) for n, p in inspect.signature(f).parameters.items()]
    P, K = inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.KEYWORD_ONLY
    assert kinds(jnp.linalg.diagonal) == [("x", P), ("offset", K)]
    assert kinds(jnp.linalg.trace) == [("x", P), ("offset", K), ("dtype", K)]
    assert kinds(jnp.linalg.outer) == [("x1", P), ("x2", P)]
    assert kinds(jnp.linalg.cross) == [("x1", P), ("x2", P), ("axis", K)]
    assert kinds(jnp.linalg.tensordot)[:3] == [("x1", P), ("x2", P), ("axes", K)]


def test_linalg_outer_and_cross_refuse_what_jax_refuses(jnp):
    with pytest.raises(ValueError, match="one-dimensional"):
        jnp.linalg.outer(jnp.ones((2, 2)), jnp.ones(2))
    with pytest.raises(ValueError, match="3-dimensional vectors"):
        jnp.linalg.cross(jnp.ones(2), jnp.ones(2))
    np.testing.assert_array_equal(np.asarray(jnp.linalg.outer(jnp.arange(2.0), jnp.arange(3.0))),
                                  np.outer(np.arange(2.0), np.arange(3.0)))
    a, b = np.arange(6.0).reshape(3, 2), np.arange(6.0, 12.0).reshape(3, 2)
    np.testing.assert_allclose(np.asarray(jnp.linalg.cross(jnp.asarray(a), jnp.asarray(b), axis=0)),
                               np.cross(a, b, axis=0).astype(np.float32))
    np.testing.assert_allclose(np.asarray(jnp.linalg.tensordot(jnp.ones((2, 3)), jnp.ones((3, 4)), axes=1)),
                               np.full((2, 4), 3.0))


def test_linalg_functions_refuse_lists(jnp):
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        jnp.linalg.trace([[1.0]])
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        jnp.linalg.diagonal([[1.0]])


# --- special values the suite checks ------------------------------------------------------------
def test_complex_expm1_on_the_real_axis(jnp):
    """``expm1(a + 0j)`` is ``expm1(a) + 0j``: no ``inf * 0`` NaN in the imaginary part for an
    infinite or NaN ``a``, and ``expm1(-0 + 0j)`` is ``+0 + 0j`` (the standard's special cases)."""
    inf, nan = np.inf, np.nan
    x = np.array([complex(-0.0, 0.0), complex(inf, 0.0), complex(nan, 0.0), complex(-inf, 0.0),
                  complex(2.0, -0.0), complex(inf, 1.0), complex(0.5, 0.5)], np.complex64)
    out = np.asarray(jnp.expm1(jnp.asarray(x)))
    want = np.array([0, inf, nan, -1, np.expm1(np.float32(2)), complex(inf, inf),
                     np.expm1(np.complex128(0.5 + 0.5j))], np.complex64)
    np.testing.assert_allclose(out.real, want.real, rtol=1e-6)
    np.testing.assert_allclose(out.imag, want.imag, rtol=1e-6)
    assert not np.signbit(out[0].real) and not np.signbit(out[4].imag)
    real = jnp.expm1(jnp.asarray([0.0, 1.0, -inf]))
    assert real.dtype == np.float32
    np.testing.assert_allclose(np.asarray(real), np.expm1(np.array([0.0, 1.0, -inf], np.float32)), rtol=1e-6)


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "float32"])
def test_cumulative_sum_widens_small_integers_as_sum_does(jnp, x64, dtype):
    """``cumulative_sum`` (not ``cumsum``) widens bools and small integers to the default (unsigned)
    integer, as ``sum`` does; ``cumulative_prod`` keeps the dtype."""
    with _x64(jnp, x64):
        for shape in [(0,), (3,), (2, 3)]:
            x = np.ones(shape, dtype)
            want = _dtype_of(jnp, lambda: jnp.sum(x, axis=0))
            assert _dtype_of(jnp, lambda: jnp.cumulative_sum(x, axis=0)) == want, (shape, dtype)
            assert _dtype_of(jnp, lambda: jnp.cumulative_sum(x, axis=0, include_initial=True)) == want
            assert _dtype_of(jnp, lambda: jnp.cumulative_sum(x, axis=0, dtype=jnp.int16)) == np.int16
            assert _dtype_of(jnp, lambda: jnp.cumsum(x, axis=0)) == (want if dtype == "bool" else np.dtype(dtype))
            if jnp is ejnp:  # (the values: ember's, against NumPy)
                out = jnp.cumulative_sum(jnp.asarray(x), axis=0)
                np.testing.assert_array_equal(np.asarray(out), np.cumsum(x, axis=0))
