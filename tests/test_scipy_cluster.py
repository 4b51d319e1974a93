"""ember.scipy.cluster.vq.vq: against scipy.cluster.vq.vq (2-D and 1-D, ties), eagerly and under
jit; errors, JAX's signature, gradients and vmap against JAX."""
import inspect

import numpy as np
import pytest

import ember
from ember import jax_import
from ember.scipy import cluster
from ember.scipy.cluster import vq
from tests.util import assert_allclose, check_eager_and_jit

scipy_vq = pytest.importorskip("scipy.cluster.vq")


@pytest.mark.parametrize("shape", [(20, 3), (15,)])
def test_matches_scipy(shape):
    rng = np.random.default_rng(0)
    obs = rng.standard_normal(shape).astype(np.float32)
    book = rng.standard_normal((5,) + shape[1:]).astype(np.float32)
    code, dist = scipy_vq.vq(obs.astype(np.float64), book.astype(np.float64))
    check_eager_and_jit(vq.vq, obs, book, expected=(code.astype(np.int32), dist.astype(np.float32)),
                        rtol=1e-5, atol=1e-6)
    assert cluster.vq is vq


def test_ties_types_and_errors():
    obs = np.array([[0.0, 0.0], [2.0, 2.0]], np.float32)
    book = np.array([[1.0, 1.0], [-1.0, -1.0], [2.0, 2.0]], np.float32)
    code, dist = vq.vq(obs, book)
    assert code.dtype == np.int32 and dist.dtype == np.float32
    assert_allclose(code, np.array([0, 2], np.int32))  # the first of equal distances
    assert_allclose(dist, np.array([np.sqrt(2), 0.0], np.float32))
    code, dist = vq.vq(np.array([1, 5, 9]), np.array([0, 6]))
    assert_allclose(code, np.array([0, 1, 1], np.int32))
    assert_allclose(dist, np.array([1.0, 1.0, 3.0], np.float32))
    with pytest.raises(ValueError, match="same rank"):
        vq.vq(obs, book[0])
    with pytest.raises(ValueError, match="ndim different than 1 or 2"):
        vq.vq(obs[None], book[None])
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        vq.vq([[0.0]], book)


def test_signature_grad_and_vmap_match_jax():
    jax = pytest.importorskip("jax")
    jvq = pytest.importorskip("jax.scipy.cluster.vq")
    ours, theirs = inspect.signature(vq.vq), inspect.signature(jvq.vq)
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
           [(p.name, p.kind, p.default) for p in theirs.parameters.values()]
    assert jax_import._target("jax.scipy.cluster.vq") == "ember.scipy.cluster.vq"
    rng = np.random.default_rng(1)
    obs, book = rng.standard_normal((8, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    for argnums in (0, 1):
        ours = ember.grad(lambda o, b: vq.vq(o, b)[1].sum(), argnums=argnums)(obs, book)
        theirs = jax.grad(lambda o, b: jvq.vq(o, b)[1].sum(), argnums=argnums)(obs, book)
        assert_allclose(ours, np.asarray(theirs), rtol=1e-5, atol=1e-6)
    batch = rng.standard_normal((2, 8, 3)).astype(np.float32)
    ours = ember.vmap(vq.vq, in_axes=(0, None))(batch, book)
    theirs = jax.vmap(jvq.vq, in_axes=(0, None))(batch, book)
    for a, b in zip(ours, theirs):
        assert_allclose(a, np.asarray(b), rtol=1e-5, atol=1e-6)
