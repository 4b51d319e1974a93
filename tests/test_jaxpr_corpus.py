"""A corpus of common user programs whose traced programs print as JAX 0.10.2's, equation for
equation: ``str(make_jaxpr(f)(*args))`` under ember equals JAX's text, variable names included.

Libraries count and match the primitives of traced programs, so ember must stage what JAX stages:
the same primitives with the same parameters, the same nested ``jit`` / ``custom_jvp_call`` /
``custom_vjp_call`` calls, literals and weak types. Each program runs under JAX (the oracle, a test
dependency only) and under ember. ``KNOWN_DIFFERENCES`` names the programs that do not yet print
as JAX's, with the reason; they are outside the corpus, and a test checks that each still differs
(one that prints as JAX's belongs in the corpus).
"""
from __future__ import annotations

import difflib
import importlib
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest

import ember
import ember.numpy as ejnp
from ember import lax as elax


def _load(which: str) -> SimpleNamespace:
    if which == "ember":
        return SimpleNamespace(top=ember, jnp=ejnp, lax=elax)
    jax = pytest.importorskip("jax")
    return SimpleNamespace(top=jax, jnp=importlib.import_module("jax.numpy"), lax=importlib.import_module("jax.lax"))


def _jaxpr(m: SimpleNamespace, f: Callable, *args: Any, **kwargs: Any) -> str:
    return str(m.top.make_jaxpr(f, **kwargs)(*args))


f32 = np.float32
A3 = np.arange(3, dtype=f32)
A23 = np.arange(6, dtype=f32).reshape(2, 3)
A234 = np.arange(24, dtype=f32).reshape(2, 3, 4)
A34 = np.arange(12, dtype=f32).reshape(3, 4)
I3 = np.array([2, 0, 1], np.int32)
X54, Y52 = np.ones((5, 4), f32), np.ones((5, 2), f32)


def _mlp_params() -> list:
    r = np.random.RandomState(0)
    return [(r.randn(4, 8).astype(f32), r.randn(8).astype(f32)), (r.randn(8, 2).astype(f32), r.randn(2).astype(f32))]


def _mlp(m, params, x):
    for w, b in params[:-1]:
        x = m.top.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def _mlp_loss(m, params, x, y):
    return m.jnp.mean((_mlp(m, params, x) - y) ** 2)


def _xent_loss(m, params, x, y):
    logits = _mlp(m, params, x)
    return -m.jnp.mean(m.jnp.sum(m.top.nn.log_softmax(logits) * y, axis=-1))


def _sgd_step(m, params, x, y):
    grads = m.top.grad(lambda p: _mlp_loss(m, p, x, y))(params)
    return m.top.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads)


def _layernorm(m, x, scale, bias):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / m.jnp.sqrt(x.var(-1, keepdims=True) + 1e-5) * scale + bias


def _dense(m, x, kernel, bias):
    """A flax-like Dense layer's call: ``lax.dot_general`` over the last axis, then the bias."""
    y = m.lax.dot_general(x, kernel, (((x.ndim - 1,), (0,)), ((), ())))
    return y + m.jnp.reshape(bias, (1,) * (y.ndim - 1) + (-1,))


def _custom_jvp_f(m):
    @m.top.custom_jvp
    def f(x, y):
        return m.jnp.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        xd, yd = tangents
        return f(x, y), m.jnp.cos(x) * xd * y + m.jnp.sin(x) * yd
    return f


def _custom_vjp_f(m):
    @m.top.custom_vjp
    def f(x):
        return m.jnp.sin(x)

    def fwd(x):
        return m.jnp.sin(x), m.jnp.cos(x)

    def bwd(c, g):
        return (c * g,)
    f.defvjp(fwd, bwd)
    return f


PROGRAMS: dict[str, Callable[[SimpleNamespace], str]] = {  # name -> (the api) -> the printed program

    # elementwise / broadcasting
    "add scalar": lambda m: _jaxpr(m, lambda x: x + 1.0, A3),
    "add int scalar": lambda m: _jaxpr(m, lambda x: x + 1, A3),
    "radd": lambda m: _jaxpr(m, lambda x: 2.0 - x, A3),
    "mul ranks": lambda m: _jaxpr(m, lambda x, y: x * y, A23, A3),
    "mul ranks 3": lambda m: _jaxpr(m, lambda x, y: x * y, A234, A34[0]),
    "add column": lambda m: _jaxpr(m, lambda x, y: x + y[:, None], A23, A23[:, 0]),
    "add 0d array": lambda m: _jaxpr(m, lambda x, y: x + y, A23, np.float32(2.0)),
    "int plus float": lambda m: _jaxpr(m, lambda x: x + 1.5, I3),
    "exp log": lambda m: _jaxpr(m, lambda x: m.jnp.log(m.jnp.exp(x) + 1.0), A3),
    "pow 2": lambda m: _jaxpr(m, lambda x: x ** 2, A3),
    "pow 3": lambda m: _jaxpr(m, lambda x: x ** 3.0, A3),
    "power arrays": lambda m: _jaxpr(m, lambda x, y: m.jnp.power(x, y), A3, A3),
    "sqrt rsqrt": lambda m: _jaxpr(m, lambda x: m.jnp.sqrt(x) + m.lax.rsqrt(x), A3),
    "abs sign": lambda m: _jaxpr(m, lambda x: m.jnp.abs(x) * m.jnp.sign(x), A3),
    "square": lambda m: _jaxpr(m, m.jnp.square, A3),
    "reciprocal": lambda m: _jaxpr(m, m.jnp.reciprocal, A3),
    "minimum": lambda m: _jaxpr(m, m.jnp.minimum, A3, A3),
    "maximum scalar": lambda m: _jaxpr(m, lambda x: m.jnp.maximum(x, 0.5), A23),
    "comparison": lambda m: _jaxpr(m, lambda x, y: (x > y) & (x < 2.0), A3, A3),
    "logical not": lambda m: _jaxpr(m, lambda x: m.jnp.logical_not(x > 0), A3),
    "astype": lambda m: _jaxpr(m, lambda x: x.astype(m.jnp.int32), A3),
    "astype bf16": lambda m: _jaxpr(m, lambda x: x.astype(m.jnp.bfloat16) * 2, A3),
    "tanh": lambda m: _jaxpr(m, m.jnp.tanh, A3),
    "sigmoid": lambda m: _jaxpr(m, m.top.nn.sigmoid, A3),
    "true divide int": lambda m: _jaxpr(m, lambda x: x / 2, I3),
    "mod": lambda m: _jaxpr(m, lambda x: x % 3.0, A3),
    "isnan": lambda m: _jaxpr(m, m.jnp.isnan, A3),
    "expm1 log1p": lambda m: _jaxpr(m, lambda x: m.jnp.expm1(x) + m.jnp.log1p(x), A3),
    "sin of int": lambda m: _jaxpr(m, m.jnp.sin, I3),
    "scalar arithmetic": lambda m: _jaxpr(m, lambda x, y: x * y + x / y - 1, 1.0, 2.0),
    # reductions
    "sum": lambda m: _jaxpr(m, m.jnp.sum, A23),
    "sum axis 0": lambda m: _jaxpr(m, lambda x: m.jnp.sum(x, axis=0), A23),
    "sum keepdims": lambda m: _jaxpr(m, lambda x: m.jnp.sum(x, axis=-1, keepdims=True), A23),
    "mean": lambda m: _jaxpr(m, m.jnp.mean, A23),
    "mean axis": lambda m: _jaxpr(m, lambda x: m.jnp.mean(x, axis=1), A23),
    "mean keepdims": lambda m: _jaxpr(m, lambda x: x.mean(axis=-1, keepdims=True), A23),
    "var": lambda m: _jaxpr(m, m.jnp.var, A23),
    "var axis": lambda m: _jaxpr(m, lambda x: m.jnp.var(x, axis=0), A23),
    "std": lambda m: _jaxpr(m, m.jnp.std, A3),
    "max": lambda m: _jaxpr(m, m.jnp.max, A23),
    "max axis keepdims": lambda m: _jaxpr(m, lambda x: m.jnp.max(x, axis=1, keepdims=True), A23),
    "min": lambda m: _jaxpr(m, lambda x: x.min(axis=0), A23),
    "prod": lambda m: _jaxpr(m, m.jnp.prod, A3),
    "argmin": lambda m: _jaxpr(m, m.jnp.argmin, A3),
    "any all": lambda m: _jaxpr(m, lambda x: m.jnp.any(x > 0) & m.jnp.all(x < 3), A3),
    "sum int": lambda m: _jaxpr(m, m.jnp.sum, I3),
    "norm": lambda m: _jaxpr(m, m.jnp.linalg.norm, A3),
    # indexing
    "index int": lambda m: _jaxpr(m, lambda x: x[1], A23),
    "index negative": lambda m: _jaxpr(m, lambda x: x[-1], A23),
    "index 2d": lambda m: _jaxpr(m, lambda x: x[1, 2], A23),
    "slice": lambda m: _jaxpr(m, lambda x: x[1:], A3),
    "slice step": lambda m: _jaxpr(m, lambda x: x[::2], A3),
    "slice reverse": lambda m: _jaxpr(m, lambda x: x[::-1], A3),
    "slice column": lambda m: _jaxpr(m, lambda x: x[:, 1], A23),
    "newaxis": lambda m: _jaxpr(m, lambda x: x[None, :, None], A3),
    "ellipsis": lambda m: _jaxpr(m, lambda x: x[..., 0], A234),
    "gather ints": lambda m: _jaxpr(m, lambda x, i: x[i], A3, I3),
    "gather rows": lambda m: _jaxpr(m, lambda x, i: x[i], A34, I3),
    "gather constant": lambda m: _jaxpr(m, lambda x: x[m.jnp.array([0, 2])], A3),
    "dynamic index": lambda m: _jaxpr(m, lambda x, i: x[i], A3, np.int32(1)),
    "boolean where index": lambda m: _jaxpr(m, lambda x: m.jnp.where(x > 1, x, -x), A3),
    "at set int": lambda m: _jaxpr(m, lambda x: x.at[0].set(5.0), A3),
    "at add slice": lambda m: _jaxpr(m, lambda x: x.at[1:].add(1.0), A3),
    "at mul": lambda m: _jaxpr(m, lambda x, i: x.at[i].mul(2.0), A3, I3),
    "at get": lambda m: _jaxpr(m, lambda x, i: x.at[i].get(), A3, I3),
    "take": lambda m: _jaxpr(m, lambda x, i: m.jnp.take(x, i, axis=0), A34, I3),
    "take constant": lambda m: _jaxpr(m, lambda x: m.jnp.take(x, np.array([0, 2], np.int32)), A3),
    "take ints": lambda m: _jaxpr(m, m.jnp.take, I3, np.array([0, 2], np.int32)),
    "take_along_axis": lambda m: _jaxpr(m, lambda x, i: m.jnp.take_along_axis(x, i, axis=1), A23,
        np.zeros((2, 1), np.int32)),
    # shapes
    "reshape": lambda m: _jaxpr(m, lambda x: m.jnp.reshape(x, (3, 2)), A23),
    "reshape -1": lambda m: _jaxpr(m, lambda x: x.reshape(-1), A23),
    "transpose": lambda m: _jaxpr(m, lambda x: x.T, A23),
    "transpose axes": lambda m: _jaxpr(m, lambda x: m.jnp.transpose(x, (2, 0, 1)), A234),
    "swapaxes": lambda m: _jaxpr(m, lambda x: m.jnp.swapaxes(x, 0, 2), A234),
    "moveaxis": lambda m: _jaxpr(m, lambda x: m.jnp.moveaxis(x, 0, -1), A234),
    "expand_dims": lambda m: _jaxpr(m, lambda x: m.jnp.expand_dims(x, 0), A3),
    "squeeze": lambda m: _jaxpr(m, m.jnp.squeeze, A3[None]),
    "concatenate": lambda m: _jaxpr(m, lambda x, y: m.jnp.concatenate([x, y]), A3, A3),
    "concatenate axis": lambda m: _jaxpr(m, lambda x: m.jnp.concatenate([x, x], axis=1), A23),
    "stack": lambda m: _jaxpr(m, lambda x, y: m.jnp.stack([x, y]), A3, A3),
    "stack axis 1": lambda m: _jaxpr(m, lambda x, y: m.jnp.stack([x, y], axis=1), A3, A3),
    "hstack": lambda m: _jaxpr(m, lambda x: m.jnp.hstack([x, x]), A3),
    "hstack scalars": lambda m: _jaxpr(m, lambda x, y: m.jnp.hstack([x, y]), 1.0, 2.0),
    "vstack": lambda m: _jaxpr(m, lambda x, y: m.jnp.vstack([x, y]), A3, A3),
    "dstack": lambda m: _jaxpr(m, lambda x, y: m.jnp.dstack([x, y]), A23, A23),
    "atleast_2d": lambda m: _jaxpr(m, m.jnp.atleast_2d, A3),
    "atleast_1d of two": lambda m: _jaxpr(m, lambda x, y: m.jnp.atleast_1d(x, y), 1.0, A3),
    "arange int": lambda m: _jaxpr(m, lambda x: x + m.jnp.arange(3), I3),
    "arange from 0": lambda m: _jaxpr(m, lambda x: x * m.jnp.arange(0, 2.5), A3),
    "where arrays": lambda m: _jaxpr(m, lambda c, x, y: m.jnp.where(c, x, y), A3 > 1, A3, A3),
    "where broadcast": lambda m: _jaxpr(m, lambda x: m.jnp.where(x > 0, x, m.jnp.zeros(3)), A23),
    "broadcast_to": lambda m: _jaxpr(m, lambda x: m.jnp.broadcast_to(x, (2, 3)), A3),
    "tile": lambda m: _jaxpr(m, lambda x: m.jnp.tile(x, 2), A3),
    "repeat": lambda m: _jaxpr(m, lambda x: m.jnp.repeat(x, 2), A3),
    "pad": lambda m: _jaxpr(m, lambda x: m.jnp.pad(x, 1), A3),
    "jnp split": lambda m: _jaxpr(m, lambda x: m.jnp.split(x, 3), A3),
    "ravel": lambda m: _jaxpr(m, m.jnp.ravel, A23),
    "array of traced": lambda m: _jaxpr(m, lambda x: m.jnp.array(x, dtype=m.jnp.int32), A3),
    "copy method": lambda m: _jaxpr(m, lambda x: x.copy() * 2.0, A3),
    "grad of array": lambda m: _jaxpr(m, m.top.grad(lambda x: m.jnp.array(x)), 1.0),
    "zeros_like": lambda m: _jaxpr(m, m.jnp.zeros_like, A3),
    "ones full": lambda m: _jaxpr(m, lambda x: x + m.jnp.ones(3) + m.jnp.full((3,), 2.0), A3),
    "arange": lambda m: _jaxpr(m, lambda x: x * m.jnp.arange(3.0), A3),
    "linspace": lambda m: _jaxpr(m, lambda x: x * m.jnp.linspace(0.0, 1.0, 3), A3),
    "eye": lambda m: _jaxpr(m, lambda x: x @ m.jnp.eye(3), A23),
    "flatten": lambda m: _jaxpr(m, lambda x: x.flatten(), A23),
    # linear algebra
    "matmul": lambda m: _jaxpr(m, m.jnp.matmul, A23, A34),
    "matmul vec": lambda m: _jaxpr(m, lambda a, v: a @ v, A23, A3),
    "vec matmul": lambda m: _jaxpr(m, lambda v, a: v @ a, A3, A34),
    "dot": lambda m: _jaxpr(m, m.jnp.dot, A3, A3),
    "batched matmul": lambda m: _jaxpr(m, m.jnp.matmul, A234, np.ones((2, 4, 5), f32)),
    "einsum ij,jk": lambda m: _jaxpr(m, lambda a, b: m.jnp.einsum("ij,jk->ik", a, b), A23, A34),
    "einsum bij,bjk": lambda m: _jaxpr(m, lambda a, b: m.jnp.einsum("bij,bjk->bik", a, b), A234,
        np.ones((2, 4, 5), f32)),
    "einsum trace": lambda m: _jaxpr(m, lambda a: m.jnp.einsum("ii", a), np.ones((3, 3), f32)),
    "einsum outer": lambda m: _jaxpr(m, lambda a, b: m.jnp.einsum("i,j->ij", a, b), A3, A3),
    "outer": lambda m: _jaxpr(m, m.jnp.outer, A3, A3),
    "vdot": lambda m: _jaxpr(m, m.jnp.vdot, A3, A3),
    "tensordot": lambda m: _jaxpr(m, lambda a, b: m.jnp.tensordot(a, b, axes=1), A23, A34),
    "lax dot_general": lambda m: _jaxpr(m, lambda a, b: m.lax.dot_general(a, b, (((1,), (0,)), ((), ()))), A23, A34),
    # nn
    "relu 2d": lambda m: _jaxpr(m, m.top.nn.relu, A23),
    "gelu": lambda m: _jaxpr(m, m.top.nn.gelu, A3),
    "gelu exact": lambda m: _jaxpr(m, lambda x: m.top.nn.gelu(x, approximate=False), A3),
    "softmax": lambda m: _jaxpr(m, m.top.nn.softmax, A23),
    "log_softmax": lambda m: _jaxpr(m, m.top.nn.log_softmax, A23),
    "logsumexp": lambda m: _jaxpr(m, m.top.nn.logsumexp, A23),
    "logsumexp axis": lambda m: _jaxpr(m, lambda x: m.top.nn.logsumexp(x, axis=-1), A23),
    "one_hot": lambda m: _jaxpr(m, lambda i: m.top.nn.one_hot(i, 4), I3),
    "elu": lambda m: _jaxpr(m, m.top.nn.elu, A3),
    "leaky_relu": lambda m: _jaxpr(m, m.top.nn.leaky_relu, A3),
    "relu6": lambda m: _jaxpr(m, m.top.nn.relu6, A3),
    "standardize": lambda m: _jaxpr(m, m.top.nn.standardize, A23),
    "softplus array": lambda m: _jaxpr(m, m.top.nn.softplus, A3),
    # transformations
    "grad square": lambda m: _jaxpr(m, m.top.grad(lambda x: x * x), 1.0),
    "grad sum sin": lambda m: _jaxpr(m, m.top.grad(lambda x: m.jnp.sin(x).sum()), A3),
    "grad mean sq": lambda m: _jaxpr(m, m.top.grad(lambda x: m.jnp.mean(x ** 2)), A3),
    "grad argnums": lambda m: _jaxpr(m, m.top.grad(lambda x, y: x * y, argnums=(0, 1)), 1.0, 2.0),
    "value_and_grad": lambda m: _jaxpr(m, m.top.value_and_grad(lambda x: m.jnp.sum(m.jnp.exp(x))), A3),
    "grad of grad": lambda m: _jaxpr(m, m.top.grad(m.top.grad(lambda x: x ** 3)), 1.0),
    "grad matmul": lambda m: _jaxpr(m, m.top.grad(lambda w, x: m.jnp.sum(x @ w)), A34, A23),
    "grad relu": lambda m: _jaxpr(m, m.top.grad(lambda x: m.top.nn.relu(x).sum()), A3),
    "grad softmax": lambda m: _jaxpr(m, m.top.grad(lambda x: m.top.nn.softmax(x)[0]), A3),
    "grad logsumexp": lambda m: _jaxpr(m, m.top.grad(lambda x: m.top.nn.logsumexp(x)), A3),
    "grad has_aux": lambda m: _jaxpr(m, m.top.grad(lambda x: (x * 2.0, x), has_aux=True), 1.0),
    "grad broadcast": lambda m: _jaxpr(m, m.top.grad(lambda x, y: m.jnp.sum(x * y), argnums=1), A23, A3),
    "grad index": lambda m: _jaxpr(m, m.top.grad(lambda x: x[1]), A3),
    "grad tanh mlp": lambda m: _jaxpr(m, m.top.grad(lambda w, x: m.jnp.sum(m.jnp.tanh(x @ w))), A34, A23),
    "vmap add": lambda m: _jaxpr(m, m.top.vmap(lambda x: x + 1.0), A23),
    "vmap dot": lambda m: _jaxpr(m, m.top.vmap(m.jnp.dot), A23, A23),
    "vmap in_axes": lambda m: _jaxpr(m, m.top.vmap(lambda x, y: x * y, in_axes=(0, None)), A23, A3),
    "vmap sum": lambda m: _jaxpr(m, m.top.vmap(m.jnp.sum), A23),
    "vmap matvec": lambda m: _jaxpr(m, m.top.vmap(lambda a, v: a @ v, in_axes=(None, 0)), A34, np.ones((5, 4), f32)),
    "vmap out_axes": lambda m: _jaxpr(m, m.top.vmap(lambda x: x * 2.0, out_axes=1), A23),
    "vmap max in_axes 1": lambda m: _jaxpr(m, m.top.vmap(lambda x: m.jnp.max(x, axis=0), in_axes=1), A23),
    "vmap argmax": lambda m: _jaxpr(m, m.top.vmap(m.jnp.argmax), A23),
    "vmap softmax": lambda m: _jaxpr(m, m.top.vmap(m.top.nn.softmax), A23),
    "vmap unbatched operand": lambda m: _jaxpr(m, m.top.vmap(lambda x, y: x * y, in_axes=(None, 0)), A23,
                                               np.ones((4, 2, 3), f32)),
    "vmap of grad": lambda m: _jaxpr(m, m.top.vmap(m.top.grad(lambda x: m.jnp.sin(x) * x)), A3),
    "jvp sin": lambda m: _jaxpr(m, lambda x, t: m.top.jvp(m.jnp.sin, (x,), (t,)), A3, A3),
    "jvp exp sum": lambda m: _jaxpr(m, lambda x, t: m.top.jvp(lambda a: m.jnp.exp(a).sum(), (x,), (t,)), A3, A3),
    "vjp": lambda m: _jaxpr(m, lambda x, g: m.top.vjp(m.jnp.sin, x)[1](g), A3, A3),
    "linearize": lambda m: _jaxpr(m, lambda x: m.top.linearize(m.jnp.sin, x)[1](x), A3),
    "jit nested": lambda m: _jaxpr(m, lambda x: m.top.jit(lambda a: m.jnp.sin(a) + 1.0)(x) * 2.0, A3),
    "jit static": lambda m: _jaxpr(m, lambda x: m.top.jit(lambda a, n: a * n, static_argnums=1)(x, 3), A3),
    "jit of jit": lambda m: _jaxpr(m, m.top.jit(lambda x: m.top.jit(m.jnp.cos)(x)), A3),
    "grad of jit": lambda m: _jaxpr(m, m.top.grad(m.top.jit(lambda x: m.jnp.sum(x * x))), A3),
    "stop_gradient": lambda m: _jaxpr(m, m.top.grad(lambda x: x * m.lax.stop_gradient(x)), 1.0),
    "checkpoint": lambda m: _jaxpr(m, m.top.checkpoint(lambda x: m.jnp.sin(m.jnp.sin(x))), A3),
    "hessian": lambda m: _jaxpr(m, m.top.hessian(lambda x: m.jnp.sum(x ** 3)), A3),
    "jacfwd": lambda m: _jaxpr(m, m.top.jacfwd(m.jnp.sin), A3),
    "jacrev": lambda m: _jaxpr(m, m.top.jacrev(m.jnp.sin), A3),
    # control flow
    "cond": lambda m: _jaxpr(m, lambda p, x: m.lax.cond(p, m.jnp.sin, m.jnp.cos, x), True, A3),
    "cond pred": lambda m: _jaxpr(m, lambda x: m.lax.cond(x.sum() > 0, lambda a: a * 2.0, lambda a: a, x), A3),
    "cond int pred": lambda m: _jaxpr(m, lambda i, x: m.lax.switch(i, [m.jnp.sin, m.jnp.cos, m.jnp.tanh], x), 1, A3),
    "while_loop": lambda m: _jaxpr(m, lambda x: m.lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, x), 1.0),
    "while counter": lambda m: _jaxpr(m, lambda x: m.lax.while_loop(
        lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] + c[1]), (0, x)), A3),
    "fori_loop": lambda m: _jaxpr(m, lambda x: m.lax.fori_loop(0, 5, lambda i, c: c + i, x), 1.0),
    "fori_loop array": lambda m: _jaxpr(m, lambda x: m.lax.fori_loop(0, 3, lambda i, c: c * 2.0, x), A3),
    "fori_loop dynamic": lambda m: _jaxpr(m, lambda n, x: m.lax.fori_loop(0, n, lambda i, c: c * 2.0, x), 3, A3),
    "scan cumsum": lambda m: _jaxpr(m, lambda xs: m.lax.scan(lambda c, x: (c + x, c), 0.0, xs), A3),
    "scan no ys": lambda m: _jaxpr(m, lambda xs: m.lax.scan(lambda c, x: (c * x, None), 1.0, xs)[0], A3),
    "scan length": lambda m: _jaxpr(m, lambda c: m.lax.scan(lambda c, _: (c + 1.0, c), c, None, length=3), 0.0),
    "scan reverse": lambda m: _jaxpr(m, lambda xs: m.lax.scan(lambda c, x: (c + x, c), 0.0, xs, reverse=True), A3),
    "scan rows": lambda m: _jaxpr(m, lambda w, xs: m.lax.scan(
        lambda h, x: (m.jnp.tanh(h @ w + x), h), m.jnp.zeros(4), xs), np.ones((4, 4), f32), np.ones((3, 4), f32)),
    "grad scan": lambda m: _jaxpr(m, m.top.grad(lambda xs: m.lax.scan(lambda c, x: (c * x, None), 1.0, xs)[0]), A3),
    "grad cond": lambda m: _jaxpr(m, m.top.grad(lambda x: m.lax.cond(x > 0, m.jnp.sin, m.jnp.cos, x)), 1.0),
    "grad fori": lambda m: _jaxpr(m, m.top.grad(lambda x: m.lax.fori_loop(0, 3, lambda i, c: c * x, 1.0)), 1.0),
    "map": lambda m: _jaxpr(m, lambda xs: m.lax.map(m.jnp.sin, xs), A23),
    # random
    "PRNGKey": lambda m: _jaxpr(m, m.top.random.PRNGKey, 0),
    "key": lambda m: _jaxpr(m, m.top.random.key, 0),
    "random split": lambda m: _jaxpr(m, lambda k: m.top.random.split(k), m.top.random.PRNGKey(0)),
    "split typed": lambda m: _jaxpr(m, lambda k: m.top.random.split(k, 3), m.top.random.key(0)),
    "normal": lambda m: _jaxpr(m, lambda k: m.top.random.normal(k, (3,)), m.top.random.PRNGKey(0)),
    "uniform": lambda m: _jaxpr(m, lambda k: m.top.random.uniform(k, (2,)), m.top.random.PRNGKey(0)),
    "uniform typed": lambda m: _jaxpr(m, lambda k: m.top.random.uniform(k, (2,)), m.top.random.key(0)),
    "fold_in": lambda m: _jaxpr(m, lambda k: m.top.random.fold_in(k, 1), m.top.random.PRNGKey(0)),
    "bernoulli": lambda m: _jaxpr(m, lambda k: m.top.random.bernoulli(k, 0.5, (3,)), m.top.random.PRNGKey(0)),
    "randint": lambda m: _jaxpr(m, lambda k: m.top.random.randint(k, (3,), 0, 10), m.top.random.PRNGKey(0)),
    "categorical": lambda m: _jaxpr(m, lambda k, l: m.top.random.categorical(k, l), m.top.random.PRNGKey(0), A3),
    "dropout": lambda m: _jaxpr(m, lambda k, x: m.jnp.where(
        m.top.random.bernoulli(k, 0.9, x.shape), x / 0.9, 0.0), m.top.random.PRNGKey(0), A3),
    # custom rules
    "custom_jvp 2 args": lambda m: _jaxpr(m, _custom_jvp_f(m), 1.0, 2.0),
    "custom_jvp grad": lambda m: _jaxpr(m, m.top.grad(_custom_jvp_f(m)), 1.0, 2.0),
    "custom_vjp sin": lambda m: _jaxpr(m, _custom_vjp_f(m), A3),
    "custom_vjp grad": lambda m: _jaxpr(m, m.top.grad(lambda x: _custom_vjp_f(m)(x).sum()), A3),
    # models
    "mlp": lambda m: _jaxpr(m, lambda p, x: _mlp(m, p, x), _mlp_params(), np.ones((5, 4), f32)),
    "mlp loss": lambda m: _jaxpr(m, lambda p, x, y: _mlp_loss(m, p, x, y), _mlp_params(), X54, Y52),
    "mlp grad": lambda m: _jaxpr(m, m.top.grad(lambda p, x, y: _mlp_loss(m, p, x, y)), _mlp_params(), X54, Y52),
    "mlp xent grad": lambda m: _jaxpr(m, m.top.grad(lambda p, x, y: _xent_loss(m, p, x, y)), _mlp_params(), X54, Y52),
    "dense": lambda m: _jaxpr(m, lambda x, k, b: _dense(m, x, k, b), A23, A34, np.ones(4, f32)),
    "dense 3d": lambda m: _jaxpr(m, lambda x, k, b: _dense(m, x, k, b), A234, np.ones((4, 5), f32), np.ones(5, f32)),
    "sgd step": lambda m: _jaxpr(m, lambda p, x, y: _sgd_step(m, p, x, y), _mlp_params(), X54, Y52),
    "layernorm": lambda m: _jaxpr(m, lambda x, g, b: _layernorm(m, x, g, b), A23, A3, A3),
    "attention": lambda m: _jaxpr(m, lambda q, k, v: m.top.nn.softmax(q @ k.T / m.jnp.sqrt(4.0)) @ v, A34, A34, A34),
}

# Programs that do not print as JAX's yet, and why (outside the corpus).
_KEYS = (
    "JAX 0.10 stages typed keys (random_seed, random_wrap, random_bits, random_split, random_fold_in on key<fry> "
    "values) and its samplers as jit calls; ember's keys are uint32[2] arrays and it stages threefry's equations")
_NEW_SHAPE_PRIMITIVES = (
    "JAX 0.10 has stack, tile and split primitives; ember composes them of broadcast_in_dim, concatenate, reshape "
    "and slice")
_CONSTANTS = (
    "JAX stages creation and index normalization on constants (linspace's jit, a constant index's lt/add/select_n, "
    "einsum's diagonal mask, the identity basis of jacfwd, jacrev and hessian, split by a split); ember computes "
    "them while tracing")
_SCAN_WEAK = (
    "JAX's scan body converts a carry that started weakly typed (convert_element_type[weak_type=False]) and its "
    "transposed loop body orders its equations otherwise; ember's body uses the carry as it is")
KNOWN_DIFFERENCES: dict[str, str] = {
    **dict.fromkeys([
        "PRNGKey", "key", "random split", "split typed", "normal", "uniform", "uniform typed", "fold_in",
        "bernoulli", "randint", "categorical", "dropout"
    ], _KEYS),
    **dict.fromkeys(["stack", "stack axis 1", "tile", "jnp split"], _NEW_SHAPE_PRIMITIVES),
    **dict.fromkeys([
        "linspace", "gather constant", "einsum trace", "hessian", "jacfwd", "jacrev"
    ], _CONSTANTS),
    **dict.fromkeys(["scan cumsum", "scan no ys", "scan reverse", "grad scan", "grad fori"], _SCAN_WEAK),
    "at set int": "JAX writes .at[i].set with a static index as a scatter; ember as a dynamic_update_slice",
    "at add slice": "JAX writes .at[1:].add as a scatter-add; ember as a slice, an add and a dynamic_update_slice",
    "pad": "JAX stages pad as a jit (_pad) taking its constant as an argument",
    "norm": "ember's vector norm is a custom_jvp (euclidean_norm); JAX's is the plain sqrt of the sum of squares",
    "grad cond": "JAX's cond branches make their zero residuals with empty2; ember returns literal zeros",
    "mlp xent grad": "JAX's partial evaluation of log_softmax's jit drops the max's tangent (under stop_gradient) "
                     "and its residuals; ember's keeps them",
}
CORPUS = sorted(set(PROGRAMS) - set(KNOWN_DIFFERENCES))


def test_the_corpus_has_at_least_100_programs():
    assert len(CORPUS) >= 100 and set(KNOWN_DIFFERENCES) <= set(PROGRAMS)


@pytest.mark.parametrize("name", CORPUS)
def test_programs_print_as_jax_0_10_2(name):
    want = PROGRAMS[name](_load("jax"))
    got = PROGRAMS[name](_load("ember"))
    assert got == want, "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines(), "jax", "ember",
                                                        lineterm=""))


@pytest.mark.parametrize("name", sorted(KNOWN_DIFFERENCES))
def test_known_differences_still_differ(name):
    """A program listed here that prints as JAX's now belongs in the corpus."""
    assert PROGRAMS[name](_load("ember")) != PROGRAMS[name](_load("jax")), f"{name!r} prints as JAX's: take it off"
