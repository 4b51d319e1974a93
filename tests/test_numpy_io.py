"""Printing and I/O (``ember.numpy.io``: array repr and str, printoptions, fromstring, fromiter,
fromfile, save, load, savez) against NumPy and JAX; x64 off and on."""
from __future__ import annotations

import io as _io

import numpy as np
import pytest
from jax_oracle import check_against_jax, jjnp, same_as_jax
from util import assert_allclose

import ember
import ember.numpy as jnp

F32 = np.float32


def test_array_repr_and_str_are_numpys():
    a = jnp.arange(4.0)
    assert jnp.array_repr(a) == "Array([0., 1., 2., 3.], dtype=float32)"
    assert jnp.array_str(a) == np.array_str(np.arange(4.0, dtype=F32)) == jjnp.array_str(jjnp.arange(4.0))
    assert jnp.array_repr(a, precision=2) == np.array_repr(np.asarray(a), precision=2).replace("array", "Array")


def test_printoptions_are_numpys():
    before = jnp.get_printoptions()
    assert before == np.get_printoptions() == jjnp.get_printoptions()
    with jnp.printoptions(precision=2):
        assert jnp.get_printoptions()["precision"] == 2
        assert "3.14" in repr(jnp.asarray([np.pi])) and "3.142" not in repr(jnp.asarray([np.pi]))
    assert jnp.get_printoptions() == before
    try:
        jnp.set_printoptions(threshold=5)
        assert np.get_printoptions()["threshold"] == 5
    finally:
        jnp.set_printoptions(**before)
    assert jnp.get_printoptions() == before


def test_fromstring_matches_jax(x64_both):
    check_against_jax("fromstring", "1 2 3.5", jit=False, sep=" ")
    check_against_jax("fromstring", "1,2,3", np.int32, jit=False, sep=",")
    check_against_jax("fromstring", "1,2,3,4", float, 2, jit=False, sep=",")


def test_fromstring_parses_text():
    assert_allclose(jnp.fromstring("1 2 3.5", sep=" "), np.array([1.0, 2.0, 3.5], F32))
    assert_allclose(jnp.fromstring("4;5", dtype=np.int32, sep=";"), np.array([4, 5], np.int32))


def test_fromiter_and_fromfile_are_refused_like_jax(tmp_path):
    with pytest.raises(NotImplementedError, match="np.fromiter"):
        jnp.fromiter(iter([1, 2]), float)
    with pytest.raises(NotImplementedError, match="np.fromfile"):
        jnp.fromfile(tmp_path / "none.bin")
    for name in ("fromiter", "fromfile"):
        with pytest.raises(NotImplementedError, match=f"jnp.{name}") as ours:
            getattr(jnp, name)(iter([1, 2]), float)
        with pytest.raises(NotImplementedError) as theirs:
            getattr(jjnp, name)(iter([1, 2]), float)
        assert str(ours.value) == str(theirs.value)


def test_save_load_savez_round_trip(tmp_path, x64_both):
    a = jnp.arange(6.0).reshape(2, 3)
    jnp.save(tmp_path / "a.npy", a)
    back = jnp.load(tmp_path / "a.npy")
    same_as_jax(back, jjnp.load(tmp_path / "a.npy"))
    assert isinstance(back, ember.Array) and back.dtype == (np.float64 if x64_both else np.float32)
    b = jnp.asarray([1.5, -2.0], jnp.bfloat16)
    buffer = _io.BytesIO()
    jnp.save(buffer, b)
    buffer.seek(0)
    loaded = jnp.load(buffer)
    assert loaded.dtype == jnp.bfloat16 and np.asarray(loaded).astype(F32).tolist() == [1.5, -2.0]
    jnp.savez(tmp_path / "z.npz", a=a, b=np.arange(3))
    with jnp.load(tmp_path / "z.npz") as archive:  # (NumPy's NpzFile, as JAX returns it)
        np.testing.assert_array_equal(archive["a"], np.asarray(a))
        np.testing.assert_array_equal(archive["b"], np.arange(3))
    np.save(tmp_path / "big.npy", np.arange(3, dtype=np.float64))
    same_as_jax(jnp.load(tmp_path / "big.npy"), jjnp.load(tmp_path / "big.npy"))
