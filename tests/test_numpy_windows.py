"""The window functions (``ember.numpy.windows``: bartlett, blackman, hamming, hanning, kaiser)
against NumPy; dtypes and weak types against JAX."""
from __future__ import annotations

import numpy as np
import pytest
from util import assert_allclose, assert_same_leaves, check_eager_and_jit

import ember
import ember.numpy as jnp
from ember.errors import ConcretizationTypeError

F32 = np.float32


@pytest.mark.parametrize("ours,theirs", [(jnp.bartlett, np.bartlett), (jnp.blackman, np.blackman),
                                         (jnp.hamming, np.hamming), (jnp.hanning, np.hanning)])
@pytest.mark.parametrize("M", [0, 1, 2, 7])
def test_windows(ours, theirs, M):
    assert_allclose(ours(M), theirs(M).astype(F32), atol=1e-6)


def test_kaiser():
    assert_allclose(jnp.kaiser(6, 3.0), np.kaiser(6, 3.0).astype(F32), rtol=1e-5)
    check_eager_and_jit(lambda beta: jnp.kaiser(5, beta), np.float32(2.0), expected=np.kaiser(5, 2.0).astype(F32),
                        rtol=1e-5)
    with pytest.raises(ConcretizationTypeError, match="'M' of jnp.bartlett"):
        ember.jit(jnp.bartlett)(5)


JAX_DTYPE_CALLS = [
    ("kaiser", (4, 3.0)),
]


@pytest.mark.parametrize("name,args", JAX_DTYPE_CALLS)
def test_dtypes_and_weak_types_match_jax(name, args):
    jax_numpy = pytest.importorskip("jax.numpy")
    assert_same_leaves(getattr(jnp, name)(*args), getattr(jax_numpy, name)(*args), name)
