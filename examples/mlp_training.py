"""Train a small MLP classifier on two interleaved spirals with plain SGD.

The training step is ``jit(value_and_grad(loss))``: ember traces the loss,
differentiates it in reverse mode (linearize, then transpose) and compiles
the whole step once; every later step reuses the compiled program.

Run: ``python examples/mlp_training.py``
"""
from __future__ import annotations

import time

import numpy as np

import ember
import ember.numpy as jnp
from ember import nn


def two_spirals(n_per_class: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Points on two interleaved spirals (classes 0 and 1), standardized."""
    rng = np.random.default_rng(seed)
    turns = np.sqrt(rng.uniform(0.05, 1.0, n_per_class)) * 3 * np.pi
    arm = np.stack([turns * np.cos(turns), turns * np.sin(turns)], axis=1)
    points = np.concatenate([arm, -arm]) + rng.normal(scale=noise, size=(2 * n_per_class, 2))
    labels = np.concatenate([np.zeros(n_per_class), np.ones(n_per_class)]).astype(np.int32)
    points = (points - points.mean(0)) / points.std(0)
    return points.astype(np.float32), labels


def init_params(sizes: list[int], seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"w": jnp.asarray(rng.normal(size=(m, n)).astype(np.float32) * np.sqrt(2.0 / m)),
             "b": jnp.zeros(n)} for m, n in zip(sizes[:-1], sizes[1:])]


def predict(params: list[dict], x):
    for layer in params[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss(params: list[dict], x, labels):
    """Mean cross-entropy of the softmax classifier."""
    log_probs = nn.log_softmax(predict(params, x))
    return -jnp.mean(jnp.sum(log_probs * nn.one_hot(labels, 2), axis=-1))


def accuracy(params: list[dict], x, labels) -> float:
    return float(np.mean(np.argmax(np.asarray(predict(params, x)), axis=-1) == labels))


@ember.jit
def sgd_step(params: list[dict], x, labels, learning_rate):
    value, grads = ember.value_and_grad(loss)(params, x, labels)
    return value, ember.tree_util.tree_map(lambda p, g: p - learning_rate * g, params, grads)


def train(steps: int = 1000, learning_rate: float = 0.5, seed: int = 0, log_every: int = 0):
    """Full-batch SGD; returns the trained parameters, the data and the loss history."""
    x, labels = two_spirals(200, noise=0.1, seed=seed)
    params = init_params([2, 32, 32, 2], seed)
    history = []
    for step in range(steps):
        value, params = sgd_step(params, x, labels, learning_rate)
        history.append(float(value))
        if log_every and step % log_every == 0:
            print(f"step {step:5d}   loss {history[-1]:.4f}   accuracy {accuracy(params, x, labels):.3f}")
    return params, (x, labels), history


if __name__ == "__main__":
    start = time.perf_counter()
    params, (x, labels), history = train(log_every=100)
    print(f"final loss {history[-1]:.4f}, accuracy {accuracy(params, x, labels):.3f} "
          f"({time.perf_counter() - start:.1f} s)")
