"""The stax CNN of JAX's examples' kind on MNIST-shaped data (a blank background, quantized
digit-like blobs): Conv, Relu, Conv, Relu, MaxPool, Dense, Relu, Dense, LogSoftmax, trained 15 steps
with ``optimizers.momentum``. Prints a JSON line: the gradient's norm at each step (``losses``, as
the other programs name what they compare) and the step time. ``STAX_CNN_X64=1`` runs it in float64
from the same float32 start: the reference that float32 runs are held to."""
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _timing import steady_step_seconds
from jax import random
from jax.example_libraries import optimizers, stax
from jax.example_libraries.stax import Conv, Dense, Flatten, LogSoftmax, MaxPool, Relu

rng = np.random.default_rng(0)
images = np.zeros((32, 28, 28, 1), np.float32)
for k in range(len(images)):
    row, col = rng.integers(4, 16, 2)
    images[k, row:row + 10, col:col + 8, 0] = rng.integers(0, 256, (10, 8)) / 255.0
labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, len(images))]
init_fun, predict = stax.serial(Conv(32, (3, 3)), Relu, Conv(64, (3, 3)), Relu, MaxPool((2, 2), (2, 2)),
                                Flatten, Dense(128), Relu, Dense(10), LogSoftmax)
opt_init, opt_update, get_params = optimizers.momentum(0.1, mass=0.9)
_, params = init_fun(random.PRNGKey(0), (-1, 28, 28, 1))
if os.environ.get("STAX_CNN_X64"):
    jax.config.update("jax_enable_x64", True)
    params = jax.tree.map(lambda p: jnp.asarray(np.asarray(p, np.float64)), params)
    images, labels = images.astype(np.float64), labels.astype(np.float64)


def loss(params, batch):
    inputs, targets = batch
    return -jnp.mean(jnp.sum(predict(params, inputs) * targets, axis=1))


@jax.jit
def update(i, opt_state, batch):
    grads = jax.grad(loss)(get_params(opt_state), batch)
    return opt_update(i, grads, opt_state), optimizers.l2_norm(grads)


opt_state = opt_init(params)
norms = []
for i in range(15):
    opt_state, norm = update(i, opt_state, (images, labels))
    norms.append(float(norm))
seconds = steady_step_seconds(lambda: float(update(0, opt_state, (images, labels))[1]))
json.dump({"losses": norms, "step_seconds": seconds}, sys.stdout)
