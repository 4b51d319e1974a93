"""ember.scipy.ndimage.map_coordinates: against scipy.ndimage.map_coordinates (orders 0 and 1, every
mode; JAX's 'constant' and 'wrap' are SciPy's 'grid-constant' and 'grid-wrap'), eagerly and under jit;
integer images, errors, JAX's signature, gradients and vmap against JAX."""
import inspect

import numpy as np
import pytest

import ember
from ember import jax_import
from ember.scipy import ndimage
from tests.util import assert_allclose, check_eager_and_jit

scipy_ndimage = pytest.importorskip("scipy.ndimage")

MODES = ["constant", "nearest", "wrap", "mirror", "reflect"]
SCIPY_MODE = {"constant": "grid-constant", "wrap": "grid-wrap"}


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(5, 7), (9,), (3, 4, 2), (1, 6)])
def test_matches_scipy(order, mode, shape):
    rng = np.random.default_rng(0)
    image = rng.standard_normal(shape).astype(np.float32)
    coords = [rng.uniform(-1.5 * n - 1, 2.5 * n + 1, (4, 6)).astype(np.float32) for n in shape]
    expected = scipy_ndimage.map_coordinates(image.astype(np.float64), [c.astype(np.float64) for c in coords],
                                             order=order, mode=SCIPY_MODE.get(mode, mode), cval=1.5)
    check_eager_and_jit(lambda im, *cs: ndimage.map_coordinates(im, cs, order, mode, 1.5), image, *coords,
                        expected=expected.astype(np.float32), rtol=1e-5, atol=1e-6)


def test_integers_and_errors():
    image = np.arange(12, dtype=np.int32).reshape(3, 4) * 3
    out = ndimage.map_coordinates(image, [np.array([0.5, 1.25]), np.array([0.5, 2.0])], 1)
    assert out.dtype == np.int32
    assert_allclose(out, np.array([8, 21], np.int32))  # 7.5 rounds away from zero; 20.75 to 21
    out = ndimage.map_coordinates(image.astype(np.float32), [np.array([0, 2, 3]), np.array([3, 0, 0])], 1, cval=-1.0)
    assert_allclose(out, np.array([9.0, 24.0, -1.0], np.float32))  # integer coordinates: exact samples
    with pytest.raises(ValueError, match="sequence of length input.ndim"):
        ndimage.map_coordinates(image, [np.zeros(2)], 1)
    with pytest.raises(NotImplementedError, match="does not yet support mode"):
        ndimage.map_coordinates(image, [np.zeros(2)] * 2, 1, mode="grid-mirror")
    with pytest.raises(NotImplementedError, match="order<=1"):
        ndimage.map_coordinates(image, [np.zeros(2)] * 2, 3)


def test_signature_grad_and_vmap_match_jax():
    jax = pytest.importorskip("jax")
    jndimage = pytest.importorskip("jax.scipy.ndimage")
    ours, theirs = inspect.signature(ndimage.map_coordinates), inspect.signature(jndimage.map_coordinates)
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
           [(p.name, p.kind, p.default) for p in theirs.parameters.values()]
    assert jax_import._target("jax.scipy.ndimage") == "ember.scipy.ndimage"
    rng = np.random.default_rng(1)
    image = rng.standard_normal((5, 6)).astype(np.float32)
    coords = [rng.uniform(-2, 7, 8).astype(np.float32) for _ in range(2)]
    for mode in MODES:
        def loss(module, im, cs):
            return (module.map_coordinates(im, cs, 1, mode) ** 2).sum()

        ours = ember.grad(lambda im, cs: loss(ndimage, im, cs), argnums=(0, 1))(image, coords)
        theirs = jax.grad(lambda im, cs: loss(jndimage, im, cs), argnums=(0, 1))(image, coords)
        for a, b in zip(ember.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
            assert_allclose(a, np.asarray(b), rtol=1e-5, atol=1e-5)
    batch = rng.standard_normal((3, 5, 6)).astype(np.float32)
    ours = ember.vmap(lambda im: ndimage.map_coordinates(im, coords, 1, "reflect"))(batch)
    theirs = jax.vmap(lambda im: jndimage.map_coordinates(im, coords, 1, "reflect"))(batch)
    assert_allclose(ours, np.asarray(theirs), rtol=1e-5, atol=1e-6)
