"""An equinox MLP (``eqx.nn.MLP``) trained with optax's adam through ``eqx.filter_jit`` and
``eqx.filter_value_and_grad``. Prints a JSON line: losses, step time."""
import json
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from _timing import steady_step_seconds

rng = np.random.default_rng(0)
x = rng.standard_normal((128, 16)).astype(np.float32)
y = np.sin(x[:, :1] * 2.0) + 0.1 * x[:, 1:2]
model = eqx.nn.MLP(16, 1, width_size=64, depth=2, activation=jax.nn.tanh, key=jax.random.PRNGKey(0))
optimizer = optax.adam(1e-2)
state = optimizer.init(eqx.filter(model, eqx.is_inexact_array))


@eqx.filter_value_and_grad
def loss(model, x, y):
    return jnp.mean((jax.vmap(model)(x) - y) ** 2)


@eqx.filter_jit
def step(model, state, x, y):
    value, grads = loss(model, x, y)
    updates, state = optimizer.update(grads, state, model)
    return eqx.apply_updates(model, updates), state, value


losses = []
for _ in range(30):
    model, state, value = step(model, state, x, y)
    losses.append(float(value))
result = {"losses": losses, "step_seconds": steady_step_seconds(lambda: float(step(model, state, x, y)[2]))}
json.dump(result, sys.stdout)
