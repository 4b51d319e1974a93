"""Array creation (eye, tri, linspace, logspace, meshgrid, the ``*_like`` family, frombuffer)
and the dtype/shape queries (isdtype, broadcast_shapes), against NumPy, eagerly and under jit."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from op_records import ALL, NUMBERS, arrays
from util import assert_allclose, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember import dtypes

DTYPES = st.sampled_from([None, np.int32, np.bool_, np.float16, ml_dtypes.bfloat16, np.int64, np.float64])
SIZES = st.integers(0, 5)


def _result_dtype(dtype, default=np.float32):
    """What a requested dtype becomes with 64-bit types off (None: the default)."""
    return dtypes.canonicalize_dtype(default if dtype is None else dtype)


@given(n=SIZES, m=st.none() | SIZES, k=st.integers(-6, 6), dtype=DTYPES)
def test_eye_and_tri(n, m, k, dtype):
    want = _result_dtype(dtype)
    check_eager_and_jit(lambda: jnp.eye(n, m, k, dtype), expected=np.eye(n, m, k, dtype=want))
    check_eager_and_jit(lambda: jnp.tri(n, m, k, dtype), expected=np.tri(n, m, k, dtype=want))


@given(n=SIZES, dtype=DTYPES)
def test_identity(n, dtype):
    check_eager_and_jit(lambda: jnp.identity(n, dtype), expected=np.identity(n, dtype=_result_dtype(dtype)))


@given(start=st.floats(-10, 10), stop=st.floats(-10, 10), num=st.integers(0, 8), endpoint=st.booleans(),
       dtype=st.sampled_from([None, np.float32, np.float16]))
def test_linspace_with_traced_endpoints(start, stop, num, endpoint, dtype):
    want = _result_dtype(dtype)
    samples, step = np.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    expected = (samples.astype(want), np.asarray(step, want))
    # Endpoints stay within 10: absolute tolerances in units of the type's resolution there.
    atol = 20 * float(jnp.finfo(want).eps)
    check_eager_and_jit(lambda a, b: jnp.linspace(a, b, num, endpoint, retstep=True, dtype=dtype),
                        np.float32(start), np.float32(stop), expected=expected, atol=atol, rtol=0)


@given(start=st.integers(-20, 20), step=st.integers(-5, 5), num=st.integers(1, 8),
       dtype=st.sampled_from([np.int32, np.int8, np.uint8]))
def test_linspace_to_integers(start, step, num, dtype):
    """Integer samples of an interval whose step is an integer are exact."""
    start = abs(start) if dtype == np.uint8 else start
    stop = start + step * (num - 1) if dtype != np.uint8 else start + abs(step) * (num - 1)
    check_eager_and_jit(lambda: jnp.linspace(start, stop, num, dtype=dtype),
                        expected=np.linspace(start, stop, num, dtype=dtype))


@given(axis=st.integers(-2, 1), num=st.integers(0, 4))
def test_linspace_of_arrays_along_an_axis(axis, num):
    start, stop = np.float32([0.0, 1.0, -2.0]), np.float32(5.0)
    check_eager_and_jit(lambda a: jnp.linspace(a, stop, num, axis=axis), start,
                        expected=np.linspace(start, stop, num, axis=axis).astype(np.float32))


@given(start=st.floats(-3, 3), stop=st.floats(-3, 3), num=st.integers(0, 6), endpoint=st.booleans(),
       base=st.sampled_from([10.0, 2.0, np.e]), dtype=st.sampled_from([None, np.float32, np.float16]))
def test_logspace(start, stop, num, endpoint, base, dtype):
    want = _result_dtype(dtype)
    expected = np.logspace(start, stop, num, endpoint=endpoint, base=base).astype(want)
    check_eager_and_jit(lambda: jnp.logspace(start, stop, num, endpoint, base, dtype), expected=expected,
                        rtol=1e-5 if want == np.float32 else 4e-3)


@given(lengths=st.lists(st.integers(0, 4), min_size=1, max_size=3), indexing=st.sampled_from(["xy", "ij"]),
       sparse=st.booleans(), dtype=st.sampled_from(ALL))
def test_meshgrid(lengths, indexing, sparse, dtype):
    vectors = [np.arange(n).astype(dtype) for n in lengths]
    expected = np.meshgrid(*vectors, indexing=indexing, sparse=sparse)
    out = check_eager_and_jit(lambda *xs: jnp.meshgrid(*xs, indexing=indexing, sparse=sparse), *vectors,
                              expected=expected)
    assert len(out) == len(expected)


@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3), dtype=DTYPES)
def test_empty_is_zeros(shape, dtype):
    """As in JAX: arrays are immutable, so an "uninitialized" array is zeros."""
    check_eager_and_jit(lambda: jnp.empty(shape, dtype), expected=np.zeros(shape, _result_dtype(dtype)))


@given(data=st.data(), dtype=DTYPES, fill=st.integers(0, 5),
       fill_is_array=st.booleans(), new_shape=st.none() | hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
def test_like_family(data, dtype, fill, fill_is_array, new_shape):
    """The dtype and shape follow the operand unless given; the operand may be traced."""
    x = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3).flatmap(
        lambda shape: st.sampled_from(NUMBERS + [np.bool_]).flatmap(lambda dt: arrays(dt, shape))))
    want = _result_dtype(dtype, default=x.dtype)
    shape = x.shape if new_shape is None else new_shape
    fill_value = np.int8(fill) if fill_is_array else fill
    for like, value in [(jnp.zeros_like, 0), (jnp.ones_like, 1), (jnp.empty_like, 0)]:
        check_eager_and_jit(lambda a: like(a, dtype, new_shape), x, expected=np.full(shape, value, want))
    check_eager_and_jit(lambda a, v: jnp.full_like(a, v, dtype, new_shape), x, fill_value,
                        expected=np.full(shape, fill, want))


def test_full_like_broadcasts_an_array_fill():
    x = np.zeros((2, 3), np.int8)
    check_eager_and_jit(lambda a, v: jnp.full_like(a, v), x, np.arange(3, dtype=np.int32),
                        expected=np.full_like(x, np.arange(3)))


class _ShapeAndDtype:
    """Any object with a shape and a dtype, as JAX's ``*_like`` functions take."""
    shape, dtype = (2, 1), np.dtype(np.int16)


@pytest.mark.parametrize("like", [
    ember.ShapeDtypeStruct((3, 2), np.float32), ember.ShapeDtypeStruct((4,), np.int32, weak_type=True),
    ember.core.avals.ShapedArray((2,), np.dtype(np.uint8), False), _ShapeAndDtype()])
def test_like_family_takes_anything_with_a_shape_and_dtype(like):
    """``zeros_like(jax.eval_shape(...))``: optax builds its states so. The result has the
    described shape, dtype and weak type, eagerly and under jit, with or without a new shape."""
    jax = pytest.importorskip("jax")
    want = np.dtype(like.dtype)
    for fn, value in [(jnp.zeros_like, 0), (jnp.ones_like, 1), (jnp.empty_like, 0)]:
        for jitted in (False, True):
            out = (ember.jit(lambda: fn(like)) if jitted else (lambda: fn(like)))()
            np.testing.assert_array_equal(out, np.full(like.shape, value, want))
            assert out.dtype == want and out.aval.weak_type == getattr(like, "weak_type", False)
    full = jnp.full_like(like, 7, shape=(5,))
    np.testing.assert_array_equal(full, np.full((5,), 7, want))
    np.testing.assert_array_equal(ember.lax.full_like(like, 2), np.full(like.shape, 2, want))
    shaped = jax.ShapeDtypeStruct(like.shape, want)  # (JAX's own answer for the same description)
    np.testing.assert_array_equal(jnp.full_like(like, 3), np.asarray(jax.numpy.full_like(shaped, 3)))


def test_like_family_of_typed_keys_and_of_eval_shape():
    key = ember.random.key(3)
    zeros = jnp.zeros_like(key)
    assert zeros.dtype == key.dtype and zeros.shape == ()
    np.testing.assert_array_equal(ember.random.key_data(zeros), np.zeros(2, np.uint32))
    assert jnp.ones_like(key, shape=(2,)).shape == (2,)
    described = ember.eval_shape(lambda x: x * 2, jnp.ones((2, 3), jnp.bfloat16))
    assert repr(ember.eval_shape(lambda: jnp.zeros_like(described))) == \
        "ShapeDtypeStruct(shape=(2, 3), dtype=bfloat16)"


def test_like_family_still_refuses_lists_and_a_description_as_fill():
    with pytest.raises(TypeError, match=r"zeros_like requires ndarray or scalar arguments, got <class 'list'> at "
                                        r"position 0\."):
        jnp.zeros_like([1, 2])
    described = ember.ShapeDtypeStruct((2,), np.float32)
    with pytest.raises(TypeError, match="full_like requires ndarray or scalar arguments, got .*ShapeDtypeStruct.* "
                                        "at position 1"):
        jnp.full_like(described, described)


@given(data=st.data(), dtype=st.sampled_from(NUMBERS + [np.int64, np.float64]))
def test_frombuffer(data, dtype):
    values = data.draw(arrays(dtype, (data.draw(st.integers(0, 6)),)))
    buffer = values.tobytes()
    offset_items = data.draw(st.integers(0, values.size))
    count = data.draw(st.sampled_from([-1, values.size - offset_items]))
    offset = offset_items * values.itemsize
    got = jnp.frombuffer(buffer, dtype, count, offset)
    expected = np.frombuffer(buffer, dtype, count, offset)
    assert_allclose(got, expected.astype(dtypes.canonicalize_dtype(dtype)), rtol=0, atol=0)
    assert_allclose(ember.jit(lambda: jnp.frombuffer(buffer, dtype, count, offset))(), got)


def test_frombuffer_defaults_to_float_canonicalized():
    got = jnp.frombuffer(np.arange(3.0).tobytes())
    assert_allclose(got, np.arange(3, dtype=np.float32))


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=4, max_side=4))
def test_broadcast_shapes(shapes):
    assert jnp.broadcast_shapes(*shapes.input_shapes) == np.broadcast_shapes(*shapes.input_shapes)
    assert jnp.broadcast_shapes(shapes.input_shapes[0]) == shapes.input_shapes[0]


def test_broadcast_shapes_rejects_incompatible_shapes_naming_them():
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: shapes=\[\(2, 3\), \(1, 4\)\]"):
        jnp.broadcast_shapes((2, 3), (1, 4))


KINDS = ["bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating", "numeric"]


@pytest.mark.parametrize("dtype", ALL + [np.int64, np.float64])
@pytest.mark.parametrize("kind", KINDS + [("bool", "integral"), ("signed integer", "real floating"), np.float32,
                                          np.int8], ids=str)
def test_isdtype_as_numpy(dtype, kind):
    """bfloat16, unknown to NumPy, is a real floating type as float32 is."""
    as_numpy = np.float32 if dtype == ml_dtypes.bfloat16 else dtype
    expected = np.isdtype(np.dtype(as_numpy), kind if isinstance(kind, (str, tuple)) else np.dtype(kind))
    if dtype == ml_dtypes.bfloat16 and not isinstance(kind, (str, tuple)):
        expected = False  # a dtype kind matches only itself
    assert jnp.isdtype(dtype, kind) is expected


def test_isdtype_of_bfloat16_itself_and_bad_kinds():
    assert jnp.isdtype(jnp.bfloat16, jnp.bfloat16)
    assert jnp.isdtype(jnp.bfloat16, ("integral", jnp.bfloat16))
    with pytest.raises(ValueError, match="kind"):
        jnp.isdtype(jnp.float32, "floating point")


@pytest.mark.parametrize("value, dtype", [(2**32 - 1, np.uint32), (2**40, np.float32), (True, np.int32),
                                          (-128, np.int8), (255, np.uint8)])
def test_python_ints_convert_straight_to_the_requested_dtype(value, dtype):
    x = jnp.asarray(value, dtype=dtype)
    assert x.dtype == dtype and not x.weak_type
    assert x.tolist() == np.array(value, dtype).tolist()


def test_python_ints_out_of_the_requested_range_raise():
    with pytest.raises(OverflowError, match="out of bounds for uint32"):
        jnp.asarray(2**33, dtype=np.uint32)


@pytest.mark.parametrize("values, dtype, bad, name", [
    ([2**31], None, 2**31, "int32"), ([1, 2**40], None, 2**40, "int32"),
    ([[1], [-2**31 - 1]], None, -2**31 - 1, "int32"),
    ([2**32], np.uint32, 2**32, "uint32"), ([-1], np.uint8, -1, "uint8"), ([2**70], None, 2**70, "int64")])
def test_python_ints_in_a_list_out_of_range_raise_as_in_jax(values, dtype, bad, name):
    # JAX's OverflowError, not NumPy's wrap: a Python int is a value the user wrote
    with pytest.raises(OverflowError, match=f"Python integer {bad} out of bounds for {name}"):
        jnp.array(values, dtype=dtype)
    # ... while NumPy's integers wrap when converted, and floats and bools take any Python int
    assert jnp.array([np.int64(2**31)]).tolist() == [-2**31]
    assert jnp.array([2**31, 1.5]).dtype == np.float32 and jnp.array([300], dtype=bool).tolist() == [True]
