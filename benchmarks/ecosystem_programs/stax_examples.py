"""JAX's examples/mnist_classifier.py and a CNN of the same kind, on generated data: ``stax``
networks trained with ``optimizers.momentum`` and ``optimizers.adam`` (and a schedule), as JAX's
``examples/`` write them. Prints a JSON line: losses per network, step times."""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _timing import steady_step_seconds
from jax import random
from jax.example_libraries import optimizers, stax
from jax.example_libraries.stax import AvgPool, BatchNorm, Conv, Dense, Flatten, LogSoftmax, Relu

rng = np.random.default_rng(0)
images = rng.standard_normal((32, 12, 12, 1)).astype(np.float32)
labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)]

networks = {
    "mlp_momentum": (stax.serial(Flatten, Dense(64), Relu, Dense(64), Relu, Dense(10), LogSoftmax),
                     optimizers.momentum(0.01, mass=0.9)),
    "cnn_adam": (stax.serial(Conv(8, (3, 3), padding="SAME"), BatchNorm(), Relu, AvgPool((2, 2), (2, 2)),
                             Conv(8, (3, 3)), Relu, Flatten, Dense(10), LogSoftmax),
                 optimizers.adam(optimizers.exponential_decay(1e-3, 10, 0.9))),
}
results = {}
for name, ((init_fun, predict), (opt_init, opt_update, get_params)) in networks.items():
    _, params = init_fun(random.PRNGKey(0), (-1, 12, 12, 1))

    def loss(params, batch):
        inputs, targets = batch
        return -jnp.mean(jnp.sum(predict(params, inputs) * targets, axis=1))

    @jax.jit
    def update(i, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(get_params(opt_state), batch)
        return opt_update(i, optimizers.clip_grads(grads, 10.0), opt_state), value

    opt_state = opt_init(params)
    losses = []
    for i in range(15):
        opt_state, value = update(i, opt_state, (images, labels))
        losses.append(float(value))
    norm = float(optimizers.l2_norm(get_params(opt_state)))
    results[name] = {"losses": [*losses, norm],
                     "step_seconds": steady_step_seconds(lambda: float(update(0, opt_state, (images, labels))[1]))}
json.dump(results, sys.stdout)
