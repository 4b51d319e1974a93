"""A flax.nnx MLP (``nnx.Linear``, ``nnx.BatchNorm``, ``nnx.Dropout`` with ``nnx.Rngs``) trained
with ``nnx.Optimizer`` over optax's adam in an ``@nnx.jit`` step on generated data: the model's
parameters, batch statistics and dropout key are state that the step updates in place. Prints a
JSON line: losses, step time."""
import json
import sys

import jax.numpy as jnp
import numpy as np
import optax
from _timing import steady_step_seconds
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, features: int, hidden: int, classes: int, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(features, hidden, rngs=rngs)
        self.norm = nnx.BatchNorm(hidden, rngs=rngs)
        self.dropout = nnx.Dropout(0.1, rngs=rngs)
        self.linear2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.linear3 = nnx.Linear(hidden, classes, rngs=rngs)

    def __call__(self, x):
        x = nnx.relu(self.norm(self.linear1(x)))
        x = self.dropout(x)
        x = nnx.relu(self.linear2(x))
        return self.linear3(x)


rng = np.random.default_rng(0)
inputs = rng.standard_normal((64, 16)).astype(np.float32)
labels = rng.integers(0, 4, 64).astype(np.int32)
model = MLP(16, 32, 4, rngs=nnx.Rngs(0))
optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)


@nnx.jit
def train_step(model, optimizer, inputs, labels):
    def loss_fn(model):
        logits = model(inputs)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


losses = []
for _ in range(20):
    losses.append(float(train_step(model, optimizer, inputs, labels)))
model.eval()
losses.append(float(jnp.mean(optax.softmax_cross_entropy_with_integer_labels(model(inputs), labels))))
model.train()
result = {"losses": losses,
          "step_seconds": steady_step_seconds(lambda: float(train_step(model, optimizer, inputs, labels)))}
json.dump(result, sys.stdout)
