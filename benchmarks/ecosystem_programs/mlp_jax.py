"""A JAX program with no library: an MLP trained by hand-written SGD (``jax.random`` init,
``value_and_grad``, ``tree_util``, ``flatten_util``). Prints a JSON line: losses, step time."""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _timing import steady_step_seconds
from jax import random
from jax.flatten_util import ravel_pytree


def init(key, sizes):
    keys = random.split(key, len(sizes))
    return [(random.normal(k, (m, n)) * 0.1, jnp.zeros(n)) for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def loss(params, x, y):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(x @ w + b) * y, axis=-1))


@jax.jit
def step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return value, jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


rng = np.random.default_rng(0)
x = rng.standard_normal((128, 64)).astype(np.float32)
y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
params = init(random.PRNGKey(0), [64, 128, 10])
losses = []
for _ in range(40):
    value, params = step(params, x, y)
    losses.append(float(value))
flat, unravel = ravel_pytree(params)
result = {"losses": losses, "flat_sum": float(jnp.sum(flat)), "flat_shape": list(flat.shape)}
result["step_seconds"] = steady_step_seconds(lambda: float(step(params, x, y)[0]))
json.dump(result, sys.stdout)
