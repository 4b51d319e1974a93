"""Programs far longer than Python's recursion limit: every walk over a program is iterative.

Tracing, the passes, fusion, code generation and the transformations each walk programs
of tens of thousands of equations in constant Python stack depth (the kernel generator
used to recurse once per equation of a chain and stopped at about 240). Each test compiles
such a program on the CPU backend and checks its values against NumPy or the reference
interpreter. Some tests run under a recursion limit only a little above the test's own
stack depth, which any walk that recursed per equation would exceed.
"""
from __future__ import annotations

import contextlib
import inspect
import sys

import numpy as np
from util import assert_allclose

import ember
import ember.numpy as jnp
from ember import grad, jit, lax
from ember.backends.cpu import kernel
from ember.backends.cpu.codegen import can_fuse
from ember.backends.cpu_backend import CpuExecutable
from ember.backends.reference import eval_closed
from ember.compiler import optimize
from ember.compiler.fusion import fuse, fusion_p
from ember.core.verify import check_jaxpr

STEPS = 5_000  # steps of x * a + b: ten thousand equations

X = np.linspace(-1.0, 1.0, 8).astype(np.float32)


@contextlib.contextmanager
def shallow_stack(headroom: int = 400):
    """Python's recursion limit set ``headroom`` frames above the caller's depth."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + headroom)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def affine_chain(x, steps=STEPS):
    for _ in range(steps):
        x = x * 1.0001 + 0.5
    return x


def numpy_affine_chain(x, steps=STEPS):
    a, b = np.float32(1.0001), np.float32(0.5)
    for _ in range(steps):
        x = x * a + b
    return x


def run_reference(f, *args):
    with ember.config.override(backend="reference"):
        return np.asarray(jit(f)(*args))


def test_long_elementwise_chain_compiles_and_matches():
    """Ten thousand equations: traced, optimized, fused and generated without recursion,
    in kernels of bounded depth; the same float32 arithmetic as NumPy's, step by step."""
    f = jit(affine_chain)
    with shallow_stack():
        got = np.asarray(f(X))
    assert_allclose(got, numpy_affine_chain(X), rtol=1e-6)
    assert_allclose(got, run_reference(affine_chain, X), rtol=1e-6)


def test_long_transcendental_chain_compiles_and_matches():
    def f(x):
        for _ in range(600):
            x = jnp.sin(x) * 1.01 + 0.1 * x
        return x

    want = X.astype(np.float64)
    for _ in range(600):
        want = np.sin(want) * 1.01 + 0.1 * want
    with shallow_stack():
        got = np.asarray(jit(f)(X))
    assert_allclose(got, want.astype(np.float32), rtol=1e-4, atol=1e-5)


def decaying_sin_chain(x, steps):
    for _ in range(steps):
        x = x * 0.9999 + 1e-3 * jnp.sin(x)
    return x


def numpy_slope(x, steps):
    """The derivative of ``decaying_sin_chain`` at ``x``, in float64."""
    x, slope = x.astype(np.float64), np.ones(x.shape)
    for _ in range(steps):
        slope *= 0.9999 + 1e-3 * np.cos(x)
        x = x * 0.9999 + 1e-3 * np.sin(x)
    return slope.astype(np.float32)


def test_gradient_of_the_long_chain():
    """Linearize, partial evaluation, transpose and the passes on ten thousand equations (the
    gradient of an affine chain is a constant, which constant folding computes)."""
    g = jit(grad(lambda x: affine_chain(x).sum()))
    with shallow_stack():
        got = np.asarray(g(X))
    assert_allclose(got, np.full(X.shape, np.float64(np.float32(1.0001)) ** STEPS, np.float32), rtol=1e-3)


def test_gradient_of_a_long_transcendental_chain_compiles_and_matches():
    """The gradient of a 600-step chain, about 5400 equations: forward steps and the backward
    ladder in kernels of bounded depth."""
    steps = 600
    g = jit(grad(lambda x: decaying_sin_chain(x, steps).sum()))
    with shallow_stack():
        got = np.asarray(g(X))
    assert_allclose(got, numpy_slope(X, steps), rtol=1e-4)
    assert got.max() - got.min() > 0.3  # far from the identity's gradient


def test_gradient_of_many_small_matrix_layers_compiles_and_matches():
    """Products of small matrices fuse into kernels; nested products in one kernel are bounded
    (each would be recomputed per element of the next), so many layers compile quickly."""
    layers = 500
    w = (np.eye(4) * 0.5 + 0.05).astype(np.float32)

    def f(x):
        for _ in range(layers):
            x = jnp.tanh(x @ w) + 0.5 * x
        return x.sum()

    x0 = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    with shallow_stack():
        got = np.asarray(jit(grad(f))(x0))
    xs, x = [], x0.astype(np.float64)
    for _ in range(layers):
        xs.append(x)
        x = np.tanh(x @ w) + 0.5 * x
    ct = np.ones((4, 4))
    for x in reversed(xs):
        t = np.tanh(x @ w)
        ct = ((1 - t * t) * ct) @ w.T + 0.5 * ct
    assert_allclose(got, ct.astype(np.float32), rtol=1e-3, atol=1e-6)
    assert_allclose(got, run_reference(grad(f), x0), rtol=1e-3, atol=1e-6)


def test_program_built_by_deep_python_recursion():
    depth = 400  # five equations a level: a chain of 2000

    def build(x, d):
        return x if d == 0 else build(x * 0.999 + jnp.maximum(x, 0.0) * 0.002 + 0.001, d - 1)

    want = X
    for _ in range(depth):  # the same float32 operations
        want = want * np.float32(0.999) + np.maximum(want, 0) * np.float32(0.002) + np.float32(0.001)
    got = np.asarray(jit(lambda x: build(x, depth))(X))
    assert_allclose(got, want, rtol=1e-6)
    assert_allclose(got, run_reference(lambda x: build(x, depth), X))


def test_one_kernel_deeper_than_the_recursion_limit(monkeypatch):
    """Without the bound on kernel depth, a 5000-equation chain is one kernel: its code is
    generated by evaluating Reads on an explicit stack, not by recursion."""
    monkeypatch.setattr(kernel, "MAX_DEPTH", None)
    steps = 2_500
    closed = ember.make_jaxpr(lambda x: affine_chain(x, steps))(X)
    with shallow_stack():
        exe = CpuExecutable(closed, "deep_kernel")
    assert len(exe.report.kernels) == 1 and not exe.report.fallbacks
    assert_allclose(np.asarray(exe(X)[0]), numpy_affine_chain(X, steps), rtol=1e-6)


def test_fusion_bounds_the_depth_and_the_products_of_a_kernel():
    closed = ember.make_jaxpr(lambda x: affine_chain(x, 1_000))(X)
    fused = fuse(closed, max_depth=100)
    check_jaxpr(fused)
    kernels = [e for e in fused.eqns if e.primitive is fusion_p]
    assert len(kernels) == 20 and all(len(k.params["jaxpr"].eqns) == 100 for k in kernels)
    assert_allclose(eval_closed(fused, X)[0], eval_closed(closed, X)[0])

    w = np.eye(4, dtype=np.float32) * 0.5

    def layers(x):
        for _ in range(10):
            x = jnp.tanh(x @ w)
        return x

    m = np.ones((4, 4), np.float32)
    closed = ember.make_jaxpr(layers)(m)
    fused = fuse(closed, can_fuse, max_products=4)  # the CPU backend's: small products fuse
    products = [sum(e.primitive.name == "dot_general" for e in k.params["jaxpr"].eqns)
                for k in fused.eqns if k.primitive is fusion_p]
    assert sum(products) == 10 and max(products) == 4
    assert_allclose(eval_closed(fused, m)[0], eval_closed(closed, m)[0])


def test_long_programs_print_check_and_transform():
    """The printer, the checker and every pass on a chain of 10000 equations; vmap and jvp."""
    closed = ember.make_jaxpr(affine_chain)(X)
    with shallow_stack():
        text = str(closed)
        check_jaxpr(closed)
        optimized = optimize(closed)
    assert text.count("\n") > 2 * STEPS and len(optimized.eqns) == 2 * STEPS
    batch = np.stack([X, 2 * X])
    with shallow_stack():
        got = np.asarray(jit(ember.vmap(lambda x: affine_chain(x, 2_000)))(batch))
    assert_allclose(got, numpy_affine_chain(batch, 2_000), rtol=1e-6)

    def quadratic_chain(x):
        for _ in range(1_000):
            x = x * 0.9999 + 1e-4 * x * x
        return x

    def tangent(x):
        return ember.jvp(quadratic_chain, (x,), (jnp.ones_like(x),))[1]

    with shallow_stack():
        got = np.asarray(jit(tangent)(X))
    x, slope = X.astype(np.float64), np.ones(X.shape)
    for _ in range(1_000):
        slope *= 0.9999 + 2e-4 * x
        x = x * 0.9999 + 1e-4 * x * x
    assert_allclose(got, slope.astype(np.float32), rtol=1e-4)


def test_long_loop_body_compiles_natively():
    """A scan whose body is a long chain: the body is fused and generated like a program."""
    def body(c, _):
        return affine_chain(c, 1_000), None

    closed = ember.make_jaxpr(lambda x: lax.scan(body, x, None, length=3)[0])(X)
    with shallow_stack():
        exe = CpuExecutable(closed, "long_loop")
    assert len(exe.report.loops) == 1 and not exe.report.fallbacks
    assert_allclose(np.asarray(exe(X)[0]), numpy_affine_chain(X, 3_000), rtol=1e-5)


def test_chains_the_old_generator_could_compile_are_one_kernel():
    """Chains within the bound on kernel depth stay one kernel (their code is unchanged)."""
    steps = 120  # 240 equations: about the longest chain that generation by recursion managed
    closed = ember.make_jaxpr(lambda x: affine_chain(x, steps))(X)
    exe = CpuExecutable(closed, "short")
    assert len(exe.report.kernels) == 1
    assert_allclose(np.asarray(exe(X)[0]), numpy_affine_chain(X, steps), rtol=1e-6)
