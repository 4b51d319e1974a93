"""ember.Array: metadata, repr, conversions, immutability, DLPack, device_put."""
import pickle

import numpy as np
import pytest

import ember
import ember.numpy as jnp


def test_metadata():
    x = jnp.zeros((2, 3), jnp.int8)
    assert (x.shape, x.dtype, x.ndim, x.size, x.itemsize, x.nbytes) == ((2, 3), jnp.int8, 2, 6, 1, 6)
    assert len(x) == 2
    assert x.T.shape == (3, 2)


def test_repr_matches_jax():
    assert repr(jnp.array([1.0, 2.0])) == "Array([1., 2.], dtype=float32)"
    assert repr(jnp.asarray(1.0)) == "Array(1., dtype=float32, weak_type=True)"
    assert repr(jnp.array([1, 2], jnp.int8)) == "Array([1, 2], dtype=int8)"
    assert repr(jnp.ones(2, jnp.bfloat16)) == "Array([1, 1], dtype=bfloat16)"
    assert repr(jnp.zeros((0, 2))) == "Array([], shape=(0, 2), dtype=float32)"


def test_python_conversions():
    assert float(jnp.asarray(2.5)) == 2.5
    assert int(jnp.asarray(7)) == 7
    assert bool(jnp.asarray(True)) is True
    assert [1, 2, 3][jnp.asarray(1)] == 2
    assert jnp.array([1, 2]).tolist() == [1, 2]
    assert jnp.asarray(3.0).item() == 3.0
    assert f"{jnp.asarray(1.5):.2f}" == "1.50"
    with pytest.raises(ValueError, match="ambiguous"):
        bool(jnp.ones(2))
    with pytest.raises(TypeError, match="Only scalar arrays can be converted to Python scalars; got arr.ndim=1"):
        float(jnp.ones(2))
    with pytest.raises(TypeError, match="integer"):
        [1, 2][jnp.asarray(1.0)]


def test_iteration_and_numpy_interop():
    x = jnp.array([[1, 2], [3, 4]])
    rows = list(x)
    assert len(rows) == 2 and isinstance(rows[0], ember.Array) and rows[1].tolist() == [3, 4]
    np.testing.assert_array_equal(np.asarray(x), [[1, 2], [3, 4]])
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    with pytest.raises(TypeError):
        iter(jnp.asarray(1.0))


def test_arrays_are_immutable_and_unhashable():
    x = jnp.ones(3)
    with pytest.raises(TypeError):
        x[0] = 2.0
    with pytest.raises(ValueError):
        np.asarray(x)[0] = 2.0
    with pytest.raises(TypeError):
        hash(x)


def test_operators_and_reflected_operators():
    x = jnp.array([1.0, 2.0])
    assert (2 - x).tolist() == [1.0, 0.0]
    assert (2 / x).tolist() == [2.0, 1.0]
    assert (x ** 2).tolist() == [1.0, 4.0]
    assert (2 ** x).tolist() == [2.0, 4.0]
    assert (-x).tolist() == [-1.0, -2.0]
    assert (x == 1.0).tolist() == [True, False]
    assert (np.float32(1) + x).dtype == jnp.float32
    i = jnp.array([5, -5])
    assert (i // 2).tolist() == [2, -3] and (i % 3).tolist() == [2, 1]
    assert (~jnp.array([True, False])).tolist() == [False, True]
    assert (i << 1).tolist() == [10, -10] and (i >> 1).tolist() == [2, -3]


def test_block_until_ready_and_device_put():
    tree = {"a": jnp.ones(2), "b": [jnp.zeros(1)]}
    assert ember.block_until_ready(tree) is tree
    x = jnp.ones(2)
    assert x.block_until_ready() is x
    put = ember.device_put({"a": np.arange(3), "b": 1.0})
    assert isinstance(put["a"], ember.Array) and put["a"].dtype == jnp.int32
    assert ember.devices()[0].platform == "cpu" and x.device.platform == "cpu"


def test_dlpack_round_trip():
    x = jnp.arange(6.0).reshape((2, 3))
    back = np.from_dlpack(x)
    np.testing.assert_array_equal(back, np.asarray(x))
    source = np.arange(4, dtype=np.float32)
    y = ember.from_dlpack(source)
    source[0] = 9.0  # ember copied the data
    assert isinstance(y, ember.Array) and y.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_pickle():
    x = jnp.array([1, 2, 3], jnp.int16)
    y = pickle.loads(pickle.dumps(x))
    assert y.dtype == jnp.int16 and y.tolist() == [1, 2, 3]


def test_float64_input_is_canonicalized_without_x64():
    x = jnp.asarray(np.array([1.5], np.float64))
    assert x.dtype == jnp.float32


def test_copy_of_a_traced_value_is_the_value() -> None:
    """``x.copy()`` and ``copy.copy(x)`` work on tracers as on Arrays (optax copies its states
    under ``jit``): the same values, derivatives and batching as without the copy."""
    import copy

    x = jnp.arange(3.0)
    np.testing.assert_array_equal(ember.jit(lambda x: x.copy() * 2)(x), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(ember.grad(lambda x: (copy.copy(x) ** 2).sum())(x), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(ember.vmap(lambda x: x.copy() + 1)(x), [1.0, 2.0, 3.0])
    eager = x.copy()
    assert eager is not x and eager.aval == x.aval
    np.testing.assert_array_equal(eager, x)
