"""nanquantile, nanpercentile and nanmedian (``ember.numpy.nan_quantiles``) against NumPy, eagerly
and under jit."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from util import check_eager_and_jit

import ember.numpy as jnp

F32 = np.float32
rng = np.random.default_rng(0)
x_f = rng.normal(size=(3, 4, 5)).astype(F32)
with_nans = x_f.copy()
with_nans[0, 1, :] = np.nan  # an all-NaN slice along axis 2
with_nans[1, :, 2] = np.nan
with_nans[2, 0, 0] = np.nan


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("method", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("axis", [None, 0, 2, (0, 2)])
def test_nanquantile_matches_numpy(method, axis):
    q = np.array([0.0, 0.2, 0.6, 1.0], F32)  # no position q * (count - 1) is a tie for "nearest"
    check_eager_and_jit(lambda a, q: jnp.nanquantile(a, q, axis=axis, method=method), with_nans, q,
                        expected=np.nanquantile(with_nans, q, axis=axis, method=method).astype(F32), rtol=1e-5)
    check_eager_and_jit(lambda a: jnp.nanquantile(a, 0.4, axis=axis, method=method, keepdims=True), with_nans,
                        expected=np.nanquantile(with_nans, 0.4, axis=axis, method=method,
                                                keepdims=True).astype(F32), rtol=1e-5)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("axis", [None, 1, -1])
def test_nanmedian_and_nanpercentile_match_numpy(axis):
    check_eager_and_jit(lambda a: jnp.nanmedian(a, axis), with_nans,
                        expected=np.nanmedian(with_nans, axis).astype(F32), rtol=1e-5)
    check_eager_and_jit(lambda a: jnp.nanpercentile(a, np.array([10, 90]), axis, keepdims=True), with_nans,
                        expected=np.nanpercentile(with_nans, [10, 90], axis, keepdims=True).astype(F32), rtol=1e-5)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@given(values=st.lists(st.one_of(st.just(np.nan), st.floats(-100, 100, width=32)), min_size=1, max_size=12),
       q=st.floats(0, 1, width=32))
def test_nanquantile_hypothesis(values, q):
    a = np.array(values, F32)
    check_eager_and_jit(lambda a: jnp.nanquantile(a, np.float32(q)), a,
                        expected=np.float32(np.nanquantile(a, q)), rtol=1e-5, atol=1e-4)


def test_nanquantile_nearest_ties_go_lower():
    """JAX's rule (NumPy rounds the position half to even instead)."""
    check_eager_and_jit(lambda a: jnp.nanquantile(a, 0.5, method="nearest"), np.array([1, 2, 3, 4, np.nan], F32),
                        expected=np.float32(2.0))


def test_nan_quantile_dtypes():
    ints = np.array([1, 2, 3, 4], np.int32)
    check_eager_and_jit(jnp.nanmedian, ints, expected=np.float32(2.5))
    half = np.array([1.0, np.nan, 3.0], np.float16)
    check_eager_and_jit(lambda a: jnp.nanquantile(a, 0.5), half, expected=np.float16(2.0))
    check_eager_and_jit(lambda a: jnp.nanpercentile(a, 50), half, expected=np.float16(2.0))
    assert jnp.nanquantile(np.ones(2, F32), np.array([0.1, 0.2], np.float16)).dtype == F32
    assert jnp.nanquantile(np.ones(2, F32), np.array([], F32)).shape == (0,)


def test_nan_quantile_errors():
    with pytest.raises(ValueError, match="method can only be one of"):
        jnp.nanquantile(x_f, 0.5, method="inverted_cdf")
    with pytest.raises(ValueError, match="q must have rank <= 1"):
        jnp.nanquantile(x_f, np.ones((2, 2)))
    with pytest.raises(ValueError, match="empty axis"):
        jnp.nanmedian(np.ones((0, 3), F32), axis=0)
    with pytest.raises(NotImplementedError, match="'out' argument to jnp.nanquantile"):
        jnp.nanpercentile(x_f, 50, out=np.zeros(()))
    with pytest.raises(ValueError, match="axis 3 is out of bounds"):
        jnp.nanmedian(x_f, axis=3)
