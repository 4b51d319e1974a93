"""An MLP trained with optax: ``adam``, ``sgd`` with momentum, ``chain(clip_by_global_norm,
adamw)``, ``softmax_cross_entropy`` and ``l2_loss``. Prints a JSON line: losses, step time."""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _timing import steady_step_seconds


def loss(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    logits = h @ params["w2"] + params["b2"]
    decay = sum(optax.l2_loss(p).sum() for p in jax.tree.leaves(params))
    return jnp.mean(optax.softmax_cross_entropy(logits, y)) + 1e-4 * decay


rng = np.random.default_rng(0)
x = rng.standard_normal((128, 64)).astype(np.float32)
y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
initial = {"w1": rng.standard_normal((64, 128)).astype(np.float32) * 0.1, "b1": np.zeros(128, np.float32),
           "w2": rng.standard_normal((128, 10)).astype(np.float32) * 0.1, "b2": np.zeros(10, np.float32)}
results = {}
for name, optimizer in [("adam", optax.adam(1e-2)), ("sgd", optax.sgd(0.1, momentum=0.9)),
                        ("clip_adamw", optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-2, 1e-3)))]:
    params = jax.tree.map(jnp.asarray, initial)
    state = optimizer.init(params)

    @jax.jit
    def step(params, state):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, value

    losses = []
    for _ in range(30):
        params, state, value = step(params, state)
        losses.append(float(value))
    results[name] = {"losses": losses, "step_seconds": steady_step_seconds(lambda: float(step(params, state)[2]))}
json.dump(results, sys.stdout)
