"""Side-by-side benchmarks: NumPy eager, ember jit, JAX jit (when importable), and a memcpy baseline.

``python -m benchmarks`` (or ``python benchmarks/run.py [name ...]``) prints a markdown table, then
the eager table (``benchmarks/eager.py``: operations and loops called outside ``jit``).
Times are medians of repeated calls measured in one run, one workload after the other, ember and
JAX taking turns in ``ROUNDS`` rounds (the ratio is the median of the rounds' ratios); the
memcpy baseline is ``np.copyto`` of the workload's input bytes into a preallocated array (the
least a memory-bound program must spend). "first call" includes tracing and compiling: each
framework gets a fresh function object, so nothing is cached from the timed runs (ember's disk
cache is off, as JAX's is by default). A large program's ember first call is tiered (it runs on
the reference interpreter while the native code compiles: ``ember.runtime.tiers``); its timed
calls start once the native code runs.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import ember
import ember.numpy as enp
from ember import lax as elax, nn as enn

try:
    import jax
    import jax.numpy as jnp_jax
    from jax import lax as jlax, nn as jnn
except ImportError:  # JAX is an optional oracle, never a dependency
    jax = None


@dataclass
class Workload:
    name: str
    build: Callable[[Any, Any, Any], Callable]  # (numpy-like, lax-like, nn-like) -> function
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    numpy_eager: Callable | None = None


def _rng_normal(*shape: int) -> Callable:
    return lambda rng: [rng.standard_normal(shape, dtype=np.float32)]


# --- workloads -------------------------------------------------------------------------------------
def _selu(xp, lax, nn):
    return lambda x: 1.0507009873554805 * xp.where(x > 0, x, 1.6732632423543772 * (xp.exp(x) - 1))


def _gelu(xp, lax, nn):
    return lambda x: nn.gelu(x, approximate=True)


def _chain(xp, lax, nn):
    def f(x):
        y = x * 1.5 + 0.5
        y = xp.maximum(y, 0.1) - 0.25
        y = y * y + x
        y = xp.abs(y) * 0.75
        return xp.minimum(y, 3.0) / 1.25
    return f


def _softmax(xp, lax, nn):
    def f(x):
        e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
        return e / xp.sum(e, axis=-1, keepdims=True)
    return f


def _layer_norm(xp, lax, nn):
    def f(x):
        mean = xp.mean(x, axis=-1, keepdims=True)
        centered = x - mean
        var = xp.mean(centered * centered, axis=-1, keepdims=True)
        return centered * lax.rsqrt(var + 1e-5)
    return f


def _logsumexp(xp, lax, nn):
    def f(x):
        m = xp.max(x, axis=-1)
        return m + xp.log(xp.sum(xp.exp(x - m[:, None]), axis=-1))
    return f


def _cross_entropy_gradient(xp, lax, nn):
    """The gradient of a softmax cross-entropy with respect to its logits (a classifier's last step
    backwards: softmax minus the labels, by rows)."""
    def loss(logits, labels):
        return -xp.mean(xp.sum(nn.log_softmax(logits) * labels, axis=-1))
    return _ad(xp).grad(loss)


def _cross_entropy_inputs(rng):
    logits = rng.standard_normal((4096, 1024), dtype=np.float32)
    return [logits, np.eye(1024, dtype=np.float32)[rng.integers(0, 1024, 4096)]]


def _sum_of_squares(xp, lax, nn):
    return lambda x: xp.sum(x * x)


def _matmul(xp, lax, nn):
    return lambda a, b: a @ b


def _mlp(xp, lax, nn):
    def f(x, w1, b1, w2, b2, w3, b3):
        h = xp.maximum(x @ w1 + b1, 0.0)
        h = xp.maximum(h @ w2 + b2, 0.0)
        return h @ w3 + b3
    return f


def _attention(xp, lax, nn):
    def f(q, k, v):
        s = q @ k.T * (1.0 / math.sqrt(q.shape[-1]))
        e = xp.exp(s - xp.max(s, axis=-1, keepdims=True))
        return (e / xp.sum(e, axis=-1, keepdims=True)) @ v
    return f


def _fori(xp, lax, nn):
    def f(x):
        return lax.fori_loop(0, 1_000_000, lambda i, acc: acc * 0.999999 + 1.0, x)
    return f


def _newton(xp, lax, nn):
    def f(a):
        def body(state):
            y, _ = state
            y_next = 0.5 * (y + a / y)
            return y_next, xp.max(xp.abs(y_next - y))
        y, _ = lax.while_loop(lambda s: s[1] > 1e-6, body, (a, xp.asarray(1.0, xp.float32)))
        return y
    return f


def _rnn(xp, lax, nn):
    def f(w, u, xs, h0):
        def step(h, x):
            h = xp.tanh(h @ w + x @ u)
            return h, h
        h, _ = lax.scan(step, h0, xs)
        return h
    return f


def _rnn_matvec(xp, lax, nn):
    """The RNN cell as written from its equation, ``h = tanh(W h + U x + b)``: products whose
    constant matrix is read along its rows (``backends/cpu/loop_layouts.py``)."""
    def f(w, u, b, xs, h0):
        def step(h, x):
            h = xp.tanh(w @ h + u @ x + b)
            return h, h
        return lax.scan(step, h0, xs)
    return f


def _rnn_matvec_batch(xp, lax, nn):
    """The cell above over 8 sequences at once by ``vmap``: the matrices times a batch of vectors."""
    return _ad(xp).vmap(_rnn_matvec(xp, lax, nn), in_axes=(None, None, None, 0, 0))


def _rnn_matvec_batch_inputs(rng):
    w, u, b, _, _ = _rnn_matvec_inputs(rng)
    return [w, u, b, rng.standard_normal((8, 1000, 16), dtype=np.float32), np.zeros((8, 64), np.float32)]


def _rnn_matvec_inputs(rng):
    return [rng.standard_normal((64, 64), dtype=np.float32) * 0.1,
            rng.standard_normal((64, 16), dtype=np.float32) * 0.1,
            rng.standard_normal(64, dtype=np.float32) * 0.1,
            rng.standard_normal((1000, 16), dtype=np.float32), np.zeros(64, np.float32)]


def _fori_matvec(xp, lax, nn):
    def f(w, b, h0):
        return lax.fori_loop(0, 1000, lambda i, h: xp.tanh(w @ h + b), h0)
    return f


def _while_matvec(xp, lax, nn):
    def f(w, b, h0):
        def body(state):
            i, h = state
            return i + 1, xp.tanh(w @ h + b)
        return lax.while_loop(lambda s: s[0] < 1000, body, (0, h0))[1]
    return f


def _matvec_inputs(rng):
    return [rng.standard_normal((64, 64), dtype=np.float32) * 0.1,
            rng.standard_normal(64, dtype=np.float32) * 0.1, np.zeros(64, np.float32)]


def _row_updates(xp, lax, nn):
    """Each row from the one before, written into the carry (``x.at[i].set``): a window update."""
    def f(a):
        return lax.fori_loop(1, 1000, lambda i, a: a.at[i].set(xp.tanh(a[i - 1] * 0.9 + 0.1)), a)
    return f


def _buffer_writes(xp, lax, nn):
    """A loop writing one element per step into a large carried buffer (``dynamic_update_slice``):
    in place, each step costs O(1), not a copy of the buffer."""
    def f(buf):
        def body(i, b):
            return lax.dynamic_update_slice(b, xp.reshape(b[i] * 0.5 + 1.0, (1,)), (i + 1,))
        return lax.fori_loop(0, 10_000, body, buf)
    return f


def _numpy_buffer_writes(buf):
    buf = buf.copy()
    for i in range(10_000):
        buf[i + 1] = buf[i] * np.float32(0.5) + np.float32(1.0)
    return buf


def _numpy_row_updates(a):
    a = a.copy()
    for i in range(1, 1000):
        a[i] = np.tanh(a[i - 1] * np.float32(0.9) + np.float32(0.1))
    return a


def _numpy_rnn_matvec(w, u, b, xs, h):
    hs = []
    for x in xs:
        h = np.tanh(w @ h + u @ x + b)
        hs.append(h)
    return h, np.stack(hs)


def _numpy_matvec_loop(w, b, h):
    for _ in range(1000):
        h = np.tanh(w @ h + b)
    return h


def _broadcast_add(xp, lax, nn):
    return lambda a, b: a + b


def _transpose_ew(xp, lax, nn):
    return lambda x: x.T * 2.0 + 1.0


def _dispatch(xp, lax, nn):
    return lambda x: x + 1.0


def _numpy_selu(x):
    return 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1))


def _numpy_gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _numpy_fori(x):
    acc = x
    for _ in range(1_000_000):
        acc = acc * np.float32(0.999999) + np.float32(1.0)
    return acc


def _numpy_newton(a):
    y, delta = a, 1.0
    while delta > 1e-6:
        y_next = 0.5 * (y + a / y)
        y, delta = y_next, np.max(np.abs(y_next - y))
    return y


def _numpy_rnn(w, u, xs, h):
    for x in xs:
        h = np.tanh(h @ w + x @ u)
    return h


def _mlp_train_step(xp, lax, nn):
    """Forward, backward and an SGD update of the MLP above, with a softmax cross-entropy loss."""
    value_and_grad = ember.value_and_grad if xp is enp else jax.value_and_grad

    def loss(params, x, labels):
        w1, b1, w2, b2, w3, b3 = params
        h = nn.relu(x @ w1 + b1)
        h = nn.relu(h @ w2 + b2)
        return -xp.mean(xp.sum(nn.log_softmax(h @ w3 + b3) * labels, axis=-1))

    def step(x, labels, *params):
        value, grads = value_and_grad(loss)(params, x, labels)
        return value, tuple(p - 0.01 * g for p, g in zip(params, grads))
    return step


def _mlp_train_inputs(rng):
    x, *params = _mlp_inputs(rng)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 256)]
    return [x, labels, *params]


def _mlp_inputs(rng):
    shapes = [(256, 784), (784, 512), (512,), (512, 512), (512,), (512, 10), (10,)]
    return [rng.standard_normal(s, dtype=np.float32) * 0.05 for s in shapes]


# --- training steps and what they are made of (convolutions, loops, linear algebra) -------------------
def _ad(xp) -> Any:
    """The framework's transformations (grad, value_and_grad, vmap) for a numpy-like module."""
    return ember if xp is enp else jax


def _conv_nhwc(lax, x, w, stride=1):
    return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _conv_forward(xp, lax, nn):
    return lambda x, w: _conv_nhwc(lax, x, w)


def _cnn_logits(xp, lax, nn, params, x):
    w1, w2, w3, b3 = params
    h = nn.relu(_conv_nhwc(lax, x, w1))
    h = nn.relu(_conv_nhwc(lax, h, w2))
    h = lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") * 0.25
    return h.reshape(h.shape[0], -1) @ w3 + b3


def _cnn_train_step(xp, lax, nn):
    """Two 3x3 convolutions + ReLU, 2x2 average pooling, a dense layer, softmax cross-entropy; SGD."""
    def loss(params, x, labels):
        return -xp.mean(xp.sum(nn.log_softmax(_cnn_logits(xp, lax, nn, params, x)) * labels, axis=-1))

    def step(x, labels, *params):
        value, grads = _ad(xp).value_and_grad(loss)(params, x, labels)
        return value, tuple(p - 0.01 * g for p, g in zip(params, grads))
    return step


def _cnn_params(rng):
    shapes = [(3, 3, 1, 16), (3, 3, 16, 32), (14 * 14 * 32, 10), (10,)]
    return [rng.standard_normal(s, dtype=np.float32) * 0.1 for s in shapes]


def _cnn_inputs(rng, batch=32):
    x = rng.standard_normal((batch, 28, 28, 1), dtype=np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    return [x, labels, *_cnn_params(rng)]


def _per_example_cnn_step(xp, lax, nn):
    """DP-SGD's core: per-example gradients (vmap of grad) through the CNN, clipped, averaged."""
    def loss(params, x, label):
        logits = _cnn_logits(xp, lax, nn, params, x[None])[0]
        return -xp.sum(nn.log_softmax(logits) * label)

    def step(x, labels, *params):
        grads = _ad(xp).vmap(_ad(xp).grad(loss), in_axes=(None, 0, 0))(params, x, labels)
        norms = xp.sqrt(sum(xp.sum(g.reshape(g.shape[0], -1) ** 2, axis=1) for g in grads))
        scale = xp.minimum(1.0, 1.0 / (norms + 1e-6))
        return tuple(p - 0.01 * xp.mean(g * scale.reshape((-1,) + (1,) * (g.ndim - 1)), axis=0)
                     for p, g in zip(params, grads))
    return step


def _lstm_train_step(xp, lax, nn):
    """An LSTM over 100 steps by scan (batch 32, hidden 128), a loss on the last state, SGD."""
    def loss(params, xs, target):
        wx, wh, b = params

        def cell(carry, x):
            h, c = carry
            gates = x @ wx + h @ wh + b
            i, f, g, o = xp.split(gates, 4, axis=-1)
            c = nn.sigmoid(f) * c + nn.sigmoid(i) * xp.tanh(g)
            h = nn.sigmoid(o) * xp.tanh(c)
            return (h, c), None
        zeros = xp.zeros((xs.shape[1], wh.shape[0]), xs.dtype)
        (h, _), _ = lax.scan(cell, (zeros, zeros), xs)
        return xp.mean((h - target) ** 2)

    def step(xs, target, *params):
        value, grads = _ad(xp).value_and_grad(loss)(params, xs, target)
        return value, tuple(p - 0.01 * g for p, g in zip(params, grads))
    return step


def _lstm_inputs(rng):
    hidden, features = 128, 32
    return [rng.standard_normal((100, 32, features), dtype=np.float32),
            rng.standard_normal((32, hidden), dtype=np.float32) * 0.1,
            rng.standard_normal((features, 4 * hidden), dtype=np.float32) * 0.1,
            rng.standard_normal((hidden, 4 * hidden), dtype=np.float32) * 0.1,
            np.zeros(4 * hidden, np.float32)]


def _solve(xp, lax, nn):
    return lambda a, b: xp.linalg.solve(a, b)


def _solve_inputs(rng):
    a = rng.standard_normal((512, 512), dtype=np.float32) + 512 ** 0.5 * np.eye(512, dtype=np.float32)
    return [a, rng.standard_normal((512, 16), dtype=np.float32)]


def _per_example_logistic(xp, lax, nn):
    """Per-example gradients of a logistic loss (vmap of grad), clipped to norm 1, averaged."""
    def loss(w, x, y):
        return -(y * nn.log_sigmoid(x @ w) + (1 - y) * nn.log_sigmoid(-(x @ w)))

    def f(w, x, y):
        grads = _ad(xp).vmap(_ad(xp).grad(loss), in_axes=(None, 0, 0))(w, x, y)
        norms = xp.sqrt(xp.sum(grads ** 2, axis=1, keepdims=True))
        return xp.mean(grads / xp.maximum(norms, 1.0), axis=0)
    return f


def _logistic_inputs(rng):
    return [rng.standard_normal(512, dtype=np.float32) * 0.1, rng.standard_normal((256, 512), dtype=np.float32),
            (rng.uniform(size=256) < 0.5).astype(np.float32)]


def _vae_epoch(xp, lax, nn):
    """A VAE (784-256-2x32 encoder, 32-256-784 decoder) trained for an epoch of 8 minibatches of
    64 by a ``fori_loop`` whose body takes the gradient and steps SGD (JAX's mnist_vae example)."""
    def elbo(params, x, eps):
        we, be, wm, wv, wd, bd, wo, bo = params
        h = nn.relu(x @ we + be)
        mean, logvar = h @ wm, h @ wv
        z = mean + xp.exp(0.5 * logvar) * eps
        logits = nn.relu(z @ wd + bd) @ wo + bo
        likelihood = xp.sum(x * logits - nn.softplus(logits), axis=-1)
        kl = 0.5 * xp.sum(xp.exp(logvar) + mean ** 2 - 1.0 - logvar, axis=-1)
        return -xp.mean(likelihood - kl)

    def epoch(images, noise, *params):
        def body(i, params):
            x = lax.dynamic_slice_in_dim(images, i * 64, 64)
            eps = lax.dynamic_slice_in_dim(noise, i * 64, 64)
            grads = _ad(xp).grad(elbo)(params, x, eps)
            return tuple(p - 0.001 * g for p, g in zip(params, grads))
        return lax.fori_loop(0, images.shape[0] // 64, body, tuple(params))
    return epoch


def _vae_inputs(rng):
    shapes = [(784, 256), (256,), (256, 32), (256, 32), (32, 256), (256,), (256, 784), (784,)]
    images = (rng.uniform(size=(512, 784)) < 0.3).astype(np.float32)
    return [images, rng.standard_normal((512, 32), dtype=np.float32),
            *(rng.standard_normal(s, dtype=np.float32) * 0.05 for s in shapes)]


def _complex_normal(*shape: int) -> Callable:
    def draw(rng: np.random.Generator) -> list[np.ndarray]:
        parts = rng.standard_normal((2,) + shape, dtype=np.float32)
        return [(parts[0] + 1j * parts[1]).astype(np.complex64)]
    return draw


def _complex_chain(xp, lax, nn):
    return lambda z: xp.exp(1j * z) * z + xp.conj(z) / (z + 2) + xp.abs(z) ** 2


def _fft(xp, lax, nn):
    return lambda z: xp.fft.fft(z)


def _rfft_rows(xp, lax, nn):
    return lambda x: xp.fft.rfft(x, axis=-1)


def _eig(xp, lax, nn):
    return lambda a: xp.linalg.eig(a)


def _complex_matmul(xp, lax, nn):
    return lambda a, b: a @ b


WORKLOADS = [
    Workload("selu 1e6", _selu, _rng_normal(1_000_000), _numpy_selu),
    Workload("gelu 1e6", _gelu, _rng_normal(1_000_000), _numpy_gelu),
    Workload("10 elementwise ops 1e6", _chain, _rng_normal(1_000_000), _chain(np, None, None)),
    Workload("softmax 4096x1024", _softmax, _rng_normal(4096, 1024), _softmax(np, None, None)),
    Workload("layer norm 4096x1024", _layer_norm, _rng_normal(4096, 1024),
             lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)),
    Workload("logsumexp 4096x1024", _logsumexp, _rng_normal(4096, 1024), _logsumexp(np, None, None)),
    Workload("cross-entropy gradient 4096x1024", _cross_entropy_gradient, _cross_entropy_inputs),
    Workload("sum of squares 1e7", _sum_of_squares, _rng_normal(10_000_000), lambda x: np.sum(x * x)),
    Workload("matmul 512", _matmul, lambda rng: [rng.standard_normal((512, 512), dtype=np.float32)] * 2,
             np.matmul),
    Workload("matmul 1024", _matmul, lambda rng: [rng.standard_normal((1024, 1024), dtype=np.float32)] * 2,
             np.matmul),
    Workload("MLP 256x784-512-512-10", _mlp, _mlp_inputs, _mlp(np, None, None)),
    Workload("MLP training step (fwd+bwd+SGD)", _mlp_train_step, _mlp_train_inputs),
    Workload("attention 512x64", _attention,
             lambda rng: [rng.standard_normal((512, 64), dtype=np.float32) for _ in range(3)],
             _attention(np, None, None)),
    Workload("fori_loop 1e6 scalar steps", _fori, lambda rng: [np.float32(0.0)], _numpy_fori),
    Workload("while_loop Newton 1e5", _newton, lambda rng: [rng.uniform(1, 100, 100_000).astype(np.float32)],
             _numpy_newton),
    Workload("scan RNN 1000 steps", _rnn, lambda rng: [rng.standard_normal((64, 64), dtype=np.float32) * 0.1,
                                                       rng.standard_normal((32, 64), dtype=np.float32) * 0.1,
                                                       rng.standard_normal((1000, 1, 32), dtype=np.float32),
                                                       np.zeros((1, 64), np.float32)], _numpy_rnn),
    Workload("scan RNN 1000x64 (W h + U x + b)", _rnn_matvec, _rnn_matvec_inputs, _numpy_rnn_matvec),
    Workload("scan RNN 1000x64, vmap over 8 sequences", _rnn_matvec_batch, _rnn_matvec_batch_inputs),
    Workload("fori_loop matvec 1000x64", _fori_matvec, _matvec_inputs, _numpy_matvec_loop),
    Workload("while_loop matvec 1000x64", _while_matvec, _matvec_inputs, _numpy_matvec_loop),
    Workload("fori_loop writes into a 1e6 buffer, 1e4 steps", _buffer_writes, _rng_normal(1_000_000),
             _numpy_buffer_writes),
    Workload("fori_loop row updates 1000x64 (x.at[i].set)", _row_updates, _rng_normal(1000, 64),
             _numpy_row_updates),
    Workload("conv 16x64x64x32 -> 64, 3x3 SAME", _conv_forward,
             lambda rng: [rng.standard_normal((16, 64, 64, 32), dtype=np.float32),
                          rng.standard_normal((3, 3, 32, 64), dtype=np.float32) * 0.1]),
    Workload("CNN training step (batch 32, 28x28)", _cnn_train_step, _cnn_inputs),
    Workload("per-example-gradient CNN step (vmap, batch 32)", _per_example_cnn_step, _cnn_inputs),
    Workload("LSTM training step (scan 100, batch 32, hidden 128)", _lstm_train_step, _lstm_inputs),
    Workload("VAE epoch (fori_loop of 8 SGD steps)", _vae_epoch, _vae_inputs),
    Workload("per-example logistic gradients 256x512", _per_example_logistic, _logistic_inputs),
    Workload("linalg.solve 512x512, 16 right-hand sides", _solve, _solve_inputs, np.linalg.solve),
    Workload("broadcast add (4096,1)+(1,1024)", _broadcast_add,
             lambda rng: [rng.standard_normal((4096, 1), dtype=np.float32),
                          rng.standard_normal((1, 1024), dtype=np.float32)], np.add),
    Workload("transpose+ew 2048x2048", _transpose_ew, _rng_normal(2048, 2048), _transpose_ew(np, None, None)),
    Workload("dispatch (10,)", _dispatch, _rng_normal(10), _dispatch(np, None, None)),
    Workload("complex chain 1e6 (complex64)", _complex_chain, _complex_normal(1_000_000),
             _complex_chain(np, None, None)),
    Workload("complex matmul 512 (complex64)", _complex_matmul,
             lambda rng: _complex_normal(512, 512)(rng) * 2, np.matmul),
    Workload("fft 2^20 (complex64)", _fft, _complex_normal(1 << 20), np.fft.fft),
    Workload("rfft rows 4096x1024", _rfft_rows, _rng_normal(4096, 1024), lambda x: np.fft.rfft(x, axis=-1)),
    Workload("eig 256x256", _eig, _rng_normal(256, 256), np.linalg.eig),
]


# --- timing ----------------------------------------------------------------------------------------
def median_time(fn: Callable[[], Any], budget: float, min_repeats: int = 3, max_repeats: int = 2000) -> float:
    """Median seconds of ``fn()`` over repeats that fit in about ``budget`` seconds (after a warm-up)."""
    fn()
    times: list[float] = []
    deadline = time.perf_counter() + budget
    while len(times) < min_repeats or (len(times) < max_repeats and time.perf_counter() < deadline):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# The rounds in which ember and JAX take turns at a row's steady-state timing (``side_by_side``).
ROUNDS = 5


def side_by_side(fns: dict[str, Callable[[], Any]], budget: float, settle: float = 0.0,
                 min_repeats: int = 3) -> tuple[dict[str, float], float | None]:
    """The frameworks' steady-state times, measured in turns: ``ROUNDS`` rounds in which each of
    ``fns`` is timed for ``budget / ROUNDS`` seconds (after ``settle`` seconds of rest), so that a
    change of the shared host's load during the row falls on all of them alike. Returns the median
    over the rounds of each one's median time, and the median of the rounds' ratios of the first
    to the second (None with one framework)."""
    per_round: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            if settle:
                time.sleep(settle)
            per_round[name].append(median_time(fn, budget / ROUNDS, min_repeats=min_repeats))
    times = {name: statistics.median(ts) for name, ts in per_round.items()}
    if len(fns) < 2:
        return times, None
    first, second = list(per_round.values())[:2]
    return times, statistics.median(a / b for a, b in zip(first, second))


def first_call(fn: Callable, args: list) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def _ember_block(out: Any) -> Any:
    return ember.block_until_ready(out)


def measure(w: Workload, budget: float) -> dict[str, float | None]:
    rng = np.random.default_rng(0)
    host = w.inputs(rng)
    row: dict[str, float | None] = {}
    nbytes = sum(np.asarray(a).nbytes for a in host)
    src = np.concatenate([np.ravel(np.asarray(a)).view(np.uint8) for a in host])
    dst = np.empty_like(src)
    row["memcpy"] = median_time(lambda: np.copyto(dst, src), budget)

    slow = w.name.startswith(("fori_loop", "scan", "while_loop"))
    row["numpy"] = median_time(lambda: w.numpy_eager(*host), budget, min_repeats=1 if slow else 3) \
        if w.numpy_eager else None

    ember_args = [ember.device_put(a) for a in host]
    fresh = w.build(enp, elax, enn)
    row["ember first"] = first_call(ember.jit(lambda *a: fresh(*a)), ember_args)
    compiled = ember.jit(w.build(enp, elax, enn))
    _ember_block(compiled(*ember_args))
    ember.wait_for_compiles()  # the steady state is the native tier's (a tiered program's first calls are not)
    timed = {"ember": lambda: _ember_block(compiled(*ember_args))}

    if jax is not None:
        jax_args = [jax.device_put(a) for a in host]
        fresh = w.build(jnp_jax, jlax, jnn)
        row["jax first"] = first_call(lambda *a: jax.block_until_ready(jax.jit(lambda *b: fresh(*b))(*a)), jax_args)
        jitted = jax.jit(w.build(jnp_jax, jlax, jnn))
        timed["jax"] = lambda: jax.block_until_ready(jitted(*jax_args))
    times, row["ratio"] = side_by_side(timed, budget)
    row.update(times)
    row["bytes"] = nbytes
    return row


# --- the table -------------------------------------------------------------------------------------
def _fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


def _fmt_ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}"


def _ratio_text(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"


def table(rows: list[tuple[str, dict]]) -> str:
    header = ("| workload | NumPy eager | ember jit | JAX jit | ember/JAX | ember/memcpy | first-call ember "
              "| first-call JAX |")
    lines = [header, "|" + "---|" * 8]
    for name, r in rows:
        lines.append(f"| {name} | {_fmt_time(r['numpy'])} | {_fmt_time(r['ember'])} | {_fmt_time(r.get('jax'))} "
                     f"| {_ratio_text(r.get('ratio'))} | {_fmt_ratio(r['ember'], r['memcpy'])} "
                     f"| {_fmt_time(r['ember first'])} | {_fmt_time(r.get('jax first'))} |")
    ratios = [r["ratio"] for _, r in rows if r.get("ratio")]
    if ratios:
        geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        lines.append(f"\ngeometric mean of ember/JAX over {len(ratios)} workloads: {geomean:.2f}")
    return "\n".join(lines)


def warm_up() -> None:
    """Load and initialize both frameworks (LLVM, XLA, their thread pools and runtime code)
    before any timing, so that "first call" measures what a new program costs in a running
    process."""
    x = np.ones(8, np.float32)
    ember.jit(lambda a: enp.sum(a * 2.0))(x)
    if jax is not None:
        jax.jit(lambda a: jnp_jax.sum(a * 2.0))(x).block_until_ready()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="substrings of workload names to run (default: all)")
    parser.add_argument("--budget", type=float, default=0.5, help="seconds of timed repeats per measurement")
    parser.add_argument("--backend", default="cpu", help="ember backend to time (default: cpu)")
    parser.add_argument("--tables", choices=("both", "jit", "eager", "autograph"), default="both",
                        help="the jit table, the eager table (benchmarks/eager.py), or both (default); or "
                        "autograph: converted control flow against its lax twins (benchmarks/autograph.py)")
    args = parser.parse_args(argv)
    if args.tables == "autograph":
        from benchmarks import autograph  # (its own table: fresh processes for the first calls)

        autograph.main(["--budget", str(args.budget * 2)])
        return
    ember.config.update("backend", args.backend)
    # First-call timings jit a fresh function per workload on purpose, and measure compiling:
    # ember's disk cache is off here, as JAX's is by default (benchmarks/cold_start.py times it).
    ember.config.update("jit_churn_warning_threshold", 0)
    ember.config.update("persistent_cache", False)
    chosen = [w for w in WORKLOADS if not args.names or any(n in w.name for n in args.names)]
    warm_up()
    if args.tables != "eager" and chosen:
        rows = []
        for w in chosen:
            print(f"running {w.name} ...", file=sys.stderr, flush=True)
            rows.append((w.name, measure(w, args.budget)))
        print(table(rows))
    if args.tables != "jit":
        from benchmarks import eager  # (it imports this module's timing helpers)

        eager_table = eager.run(args.names, args.budget)
        if eager_table is not None:
            print("\n" + eager_table)


if __name__ == "__main__":
    main()
