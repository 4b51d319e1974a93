"""A flax.linen CNN (two convolutions, average pooling, dense) trained with ``TrainState`` and
optax's adam on generated 16x16 images. Prints a JSON line: losses, step time."""
import json
import sys

import flax.linen as nn
import jax
import numpy as np
import optax
from _timing import steady_step_seconds
from flax.training import train_state


class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(8, (3, 3))(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(16, (3, 3))(x))
        x = x.reshape((x.shape[0], -1))
        return nn.Dense(10)(x)


rng = np.random.default_rng(0)
images = rng.standard_normal((32, 16, 16, 1)).astype(np.float32)
labels = rng.integers(0, 10, 32)
model = CNN()
params = model.init(jax.random.PRNGKey(0), images[:1])["params"]
state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))


@jax.jit
def step(state, images, labels):
    def loss(params):
        logits = state.apply_fn({"params": params}, images)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    value, grads = jax.value_and_grad(loss)(state.params)
    return state.apply_gradients(grads=grads), value


losses = []
for _ in range(20):
    state, value = step(state, images, labels)
    losses.append(float(value))
result = {"losses": losses, "step_seconds": steady_step_seconds(lambda: float(step(state, images, labels)[1]))}
json.dump(result, sys.stdout)
