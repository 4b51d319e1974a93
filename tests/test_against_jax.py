"""The same programs written against JAX and against ember (only the imports differ) give the
same answers, dtypes and shapes. Runs only where JAX is installed (the ``bench`` extra)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp_jax = pytest.importorskip("jax.numpy")

import ember  # noqa: E402
import ember.numpy as jnp_ember  # noqa: E402


def _programs(api, jnp, lax, nn):
    def mlp(params, x):
        for w, b in params[:-1]:
            x = nn.relu(x @ w + b)
        w, b = params[-1]
        return nn.log_softmax(x @ w + b)

    def attention(q, k, v):
        scores = q @ k.T / jnp.sqrt(q.shape[-1])
        return nn.softmax(scores, axis=-1) @ v

    def layer_norm(x):
        mean = x.mean(axis=-1, keepdims=True)
        var = x.var(axis=-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5)

    def indexing(x, idx):
        y = x.at[idx].add(1.0)
        return y[::2, 1:], y[idx], y[:, None, -1], jnp.take(y, idx, axis=1)

    def control(x, n):
        def body(i, c):
            return c + jnp.sin(c) * i

        y = lax.fori_loop(0, 5, body, x)
        z = lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5), (0, y))[1]
        return lax.cond(z.sum() > 0, lambda a: a * 2, lambda a: -a, z)

    def scan_rnn(h, xs, w):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()

        return lax.scan(step, h, xs)

    def mixed_types(i8, f16, u8):
        return i8 + 3, f16 * 2.0, u8 + i8, i8 / 2, (f16 > 0).sum(), jnp.cumsum(u8), jnp.argsort(f16)

    return dict(mlp=mlp, attention=attention, layer_norm=layer_norm, indexing=indexing, control=control,
                scan_rnn=scan_rnn, mixed_types=mixed_types)


def _inputs(name, rng):
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return {
        "mlp": ([(f(8, 16), f(16)), (f(16, 16), f(16)), (f(16, 4), f(4))], f(5, 8)),
        "attention": (f(6, 4), f(6, 4), f(6, 3)),
        "layer_norm": (f(4, 32),),
        "indexing": (f(4, 5), np.array([0, 2, -1], np.int32)),
        "control": (f(3), 4),
        "scan_rnn": (f(2, 3), f(7, 2, 3), f(3, 3)),
        "mixed_types": (np.arange(-3, 3, dtype=np.int8), rng.standard_normal(6).astype(np.float16),
                        np.arange(6, dtype=np.uint8)),
    }[name]


@pytest.mark.parametrize("name", ["mlp", "attention", "layer_norm", "indexing", "control", "scan_rnn",
                                  "mixed_types"])
@pytest.mark.parametrize("jitted", [False, True])
def test_same_answers_as_jax(name, jitted):
    args = _inputs(name, np.random.default_rng(0))
    theirs = _programs(jax, jnp_jax, jax.lax, jax.nn)[name]
    ours = _programs(ember, jnp_ember, ember.lax, ember.nn)[name]
    as_ours = lambda a: ember.tree_util.tree_map(  # noqa: E731
        lambda v: jnp_ember.asarray(v) if isinstance(v, np.ndarray) else v, a)
    as_theirs = lambda a: jax.tree_util.tree_map(  # noqa: E731
        lambda v: jnp_jax.asarray(v) if isinstance(v, np.ndarray) else v, a)
    if jitted:
        static = (1,) if name == "control" else ()
        theirs, ours = jax.jit(theirs, static_argnums=static), ember.jit(ours, static_argnums=static)
    expected = jax.tree_util.tree_leaves(theirs(*as_theirs(args)))
    got = ember.tree_util.tree_leaves(ours(*as_ours(args)))
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, e.dtype, g.shape, e.shape)
        assert g.weak_type == e.weak_type
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(e, np.float64), rtol=2e-3, atol=1e-5)


def _train_cnn(jax_like) -> list[float]:
    """A small CNN from random initialization, trained five jitted SGD steps: keys, initializers,
    convolution, value_and_grad and tree_map, written once against the ``jax`` API."""
    jnp = jax_like.numpy
    k1, k2, k3 = jax_like.random.split(jax_like.random.PRNGKey(42), 3)
    params = {"conv": jax_like.nn.initializers.he_normal()(k1, (3, 3, 1, 4)),
              "dense": jax_like.nn.initializers.glorot_uniform()(k2, (4 * 6 * 6, 10)), "b": jnp.zeros(10)}
    x = jax_like.random.normal(k3, (8, 8, 8, 1))
    y = jax_like.nn.one_hot(jnp.arange(8) % 10, 10)

    def loss(p, x, y):
        h = jax_like.lax.conv_general_dilated(x, p["conv"], (1, 1), "VALID",
                                              dimension_numbers=("NHWC", "HWIO", "NHWC"))
        logits = jax_like.nn.relu(h).reshape(h.shape[0], -1) @ p["dense"] + p["b"]
        return -jnp.mean(jnp.sum(jax_like.nn.log_softmax(logits) * y, axis=-1))

    @jax_like.jit
    def step(p, x, y):
        value, grads = jax_like.value_and_grad(loss)(p, x, y)
        return jax_like.tree_util.tree_map(lambda a, g: a - 0.1 * g, p, grads), value

    losses = []
    for _ in range(5):
        params, value = step(params, x, y)
        losses.append(float(value))
    return losses


def test_a_cnn_trained_from_random_initialization_follows_jax():
    np.testing.assert_allclose(_train_cnn(ember), _train_cnn(jax), rtol=1e-4)
