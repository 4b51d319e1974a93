"""The scalar type aliases and the sub-byte dtypes (``ember.numpy.scalar_types``) against JAX;
x64 off and on."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from jax_oracle import jjnp, same_as_jax

import ember
import ember.numpy as jnp

ALIASES = ["single", "double", "csingle", "cdouble", "float_", "int_", "uint"]
NARROW = ["int4", "uint4", "int2", "uint2", "int1", "uint1", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"]


@pytest.mark.parametrize("name", ALIASES)
def test_scalar_aliases_match_jax(x64_both, name):
    ours, theirs = getattr(jnp, name), getattr(jjnp, name)
    assert np.dtype(ours) == np.dtype(theirs)
    assert ours is getattr(jnp, np.dtype(theirs).name)  # (the same class, as in JAX)
    value = 1.5 if np.dtype(theirs).kind in "fc" else 3
    same_as_jax(ours(value), theirs(value))
    same_as_jax(jnp.zeros(2, ours), jjnp.zeros(2, theirs))


def test_object_is_numpys():
    assert jnp.object_ is np.object_ is jjnp.object_
    assert not jnp.issubdtype(jnp.float32, jnp.object_)


@pytest.mark.parametrize("name", NARROW)
def test_narrow_dtypes_exist_as_dtypes(name):
    ours, theirs = getattr(jnp, name), getattr(jjnp, name)
    dt = np.dtype(getattr(ml_dtypes, name))
    assert np.dtype(ours) == np.dtype(theirs) == dt and ours.dtype == dt
    assert ours == dt.type and ember.dtypes.dtype(name) == dt
    kind = jnp.integer if name.startswith(("int", "uint")) else jnp.floating
    assert jnp.issubdtype(ours, kind) == jjnp.issubdtype(theirs, kind) is True
    assert jnp.issubdtype(ours, jnp.number) and not jnp.issubdtype(ours, jnp.complexfloating)
    if kind is jnp.integer:
        assert (jnp.iinfo(ours).min, jnp.iinfo(ours).max) == (jjnp.iinfo(theirs).min, jjnp.iinfo(theirs).max)
        signed = jnp.signedinteger if name.startswith("int") else jnp.unsignedinteger
        assert jnp.issubdtype(ours, signed) == jjnp.issubdtype(theirs, signed) is True
    else:
        assert float(jnp.finfo(ours).max) == float(jjnp.finfo(theirs).max)
    # ember holds no arrays of them: making one says so, naming the dtype.
    for make in (lambda: jnp.zeros(3, ours), lambda: ours(1), lambda: jnp.asarray(np.zeros(2, dt)),
                 lambda: jnp.zeros(3, name)):
        with pytest.raises(TypeError, match=f"dtype {name}"):
            make()
