"""Loops whose bodies multiply a constant matrix read along its rows (``W @ h``, ``h @ W.T``):
the CPU backend transposes the matrix once before the loop (``backends/cpu/loop_layouts.py``).
The loops compute what the reference interpreter and NumPy do, for scans, fori and while loops,
nested ones, several shapes and dtypes; and the rewrite leaves alone what it must not touch."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from util import assert_allclose

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu.loop_layouts import ROW_MAX_BYTES, transposed_invariants
from ember.core.verify import check_jaxpr
from ember.lax import control_flow as cf, shapes as sh
from ember.lax.dot import dot_general_p


def run(backend: str, f, *args):
    with ember.config.override(backend=backend, enable_x64=True):  # (float64 operands stay float64)
        return ember.tree_util.tree_map(np.asarray, ember.jit(f)(*args))


def check(f, *args, expected=None, **tol):
    """``f`` under jit on the CPU backend equals the reference interpreter (and ``expected``)."""
    got = ember.tree_util.tree_leaves(run("cpu", f, *args))
    want = ember.tree_util.tree_leaves(run("reference", f, *args))
    for g, w in zip(got, want):
        assert_allclose(g, w, **tol)
    if expected is not None:
        for g, e in zip(got, ember.tree_util.tree_leaves(expected)):
            assert_allclose(g, np.asarray(e, g.dtype), **tol)
    return got


def rewritten(f, *args):
    """The traced program of ``f`` after the rewrite (checked), and its loops' constant counts."""
    with ember.config.override(enable_x64=True):
        closed = transposed_invariants(ember.make_jaxpr(f)(*args))
    check_jaxpr(closed)
    return closed


def loops(closed) -> list:
    return [e for e in closed.jaxpr.eqns if e.primitive in (cf.scan_p, cf.while_p)]


def sample(rng, shape, dtype, scale=0.3):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-3, 4, shape).astype(dtype)
    x = rng.standard_normal(shape) * scale
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape) * scale
    return x.astype(dtype)


def squash(x):
    """The body's nonlinearity: ``tanh`` for floats, a wrap-free remainder for integers."""
    return x % 5 if jnp.issubdtype(x.dtype, jnp.integer) else jnp.tanh(x) if not jnp.iscomplexobj(x) else x * 0.5


def squash_np(x):
    return x % 5 if x.dtype.kind in "iu" else np.tanh(x) if x.dtype.kind != "c" else x * 0.5


# --- the rewrite ------------------------------------------------------------------------------------
def rnn(w, u, b, h0, xs):
    return lax.scan(lambda h, x: (jnp.tanh(w @ h + u @ x + b),) * 2, h0, xs)


def rnn_inputs(rng, hidden=64, inputs=16, length=30, dtype=np.float32):
    return [sample(rng, (hidden, hidden), dtype, 0.1), sample(rng, (hidden, inputs), dtype, 0.1),
            sample(rng, hidden, dtype), np.zeros(hidden, dtype), sample(rng, (length, inputs), dtype, 1.0)]


def numpy_rnn(w, u, b, h, xs):
    hs = []
    for x in xs:
        h = np.tanh(w @ h + u @ x + b)
        hs.append(h)
    return h, np.stack(hs) if hs else np.zeros((0, *h.shape), h.dtype)


def test_a_scan_rnn_reads_its_matrices_transposed_once_before_the_loop():
    args = rnn_inputs(np.random.default_rng(0))
    closed = rewritten(rnn, *args)
    transposes = [e for e in closed.jaxpr.eqns if e.primitive is sh.transpose_p]
    assert len(transposes) == 2 and {e.invars[0].aval.shape for e in transposes} == {(64, 64), (64, 16)}
    (loop,) = loops(closed)
    assert loop.params["num_consts"] == 5
    products = [e for e in loop.params["jaxpr"].jaxpr.eqns if e.primitive is dot_general_p]
    # each product now contracts the transposed matrix's rows (its first axis)
    assert [e.params["dimension_numbers"][0][1] for e in products] == [(0,), (0,)]
    check(rnn, *args, expected=numpy_rnn(*args), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.complex64])
@pytest.mark.parametrize("hidden, inputs", [(2, 1), (3, 5), (17, 4), (64, 16), (100, 3)])
def test_scan_rnn_matches_the_reference_and_numpy(dtype, hidden, inputs):
    rng = np.random.default_rng(hidden * inputs)
    w, u, b, h0, xs = rnn_inputs(rng, hidden, inputs, 7, dtype)

    def f(w, u, b, h0, xs):
        return lax.scan(lambda h, x: (squash(w @ h + u @ x + b),) * 2, h0, xs)

    h, hs = h0, []
    for x in xs:
        h = squash_np(w @ h + u @ x + b).astype(dtype)
        hs.append(h)
    tol = {"rtol": 1e-5, "atol": 1e-5} if np.dtype(dtype) in (np.float32, np.complex64) else {}
    check(f, w, u, b, h0, xs, expected=(h, np.stack(hs)), **tol)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("length", [0, 1, 2, 5])
def test_scans_of_any_length_and_direction(length, reverse):
    rng = np.random.default_rng(length)
    w, u, b, h0, xs = rnn_inputs(rng, 8, 3, length)

    def f(w, u, b, h0, xs):
        return lax.scan(lambda h, x: (jnp.tanh(w @ h + u @ x + b),) * 2, h0, xs, reverse=reverse)

    expected = numpy_rnn(w, u, b, h0, xs[::-1] if reverse else xs)
    if reverse:
        expected = (expected[0], expected[1][::-1])
    check(f, w, u, b, h0, xs, expected=expected, rtol=1e-5, atol=1e-5)


def test_fori_and_while_loops_with_a_matrix_vector_body():
    rng = np.random.default_rng(1)
    w, b, h0 = sample(rng, (24, 24), np.float32), sample(rng, 24, np.float32), sample(rng, 24, np.float32)
    expected = h0
    for _ in range(9):
        expected = np.tanh(w @ expected + b)

    def fori(w, b, h0):
        return lax.fori_loop(0, 9, lambda i, h: jnp.tanh(w @ h + b), h0)

    def counted(w, b, h0, n):
        return lax.fori_loop(0, n, lambda i, h: jnp.tanh(w @ h + b), h0)

    def while_(w, b, h0):
        return lax.while_loop(lambda s: s[0] < 9, lambda s: (s[0] + 1, jnp.tanh(w @ s[1] + b)), (0, h0))[1]

    for f, args in ((fori, (w, b, h0)), (counted, (w, b, h0, np.int32(9))), (while_, (w, b, h0))):
        assert any(e.primitive is sh.transpose_p for e in rewritten(f, *args).jaxpr.eqns), f.__name__
        check(f, *args, expected=expected, rtol=1e-5, atol=1e-5)


def test_rows_times_a_transposed_matrix_and_a_matrix_read_twice():
    """``X @ W.T`` (a batch of rows: any batch size), and ``W`` also read as it is in the body."""
    rng = np.random.default_rng(2)
    w, x0 = sample(rng, (12, 12), np.float32), sample(rng, (5, 12), np.float32)

    def f(w, x0):
        return lax.fori_loop(0, 4, lambda i, x: jnp.tanh(x @ w.T + 0.1 * w[0] + w @ x[0]), x0)

    expected = x0
    for _ in range(4):
        expected = np.tanh(expected @ w.T + 0.1 * w[0] + w @ expected[0])
    check(f, w, x0, expected=expected, rtol=1e-5, atol=1e-5)


def test_nested_loops_transpose_a_matrix_constant_in_both_once():
    rng = np.random.default_rng(3)
    w, h0 = sample(rng, (16, 16), np.float32), sample(rng, 16, np.float32)

    def f(w, h0):
        def outer(i, h):
            return lax.fori_loop(0, 3, lambda j, g: jnp.tanh(w @ g) + 0.01 * i.astype(jnp.float32), h)
        return lax.while_loop(lambda s: s[0] < 4, lambda s: (s[0] + 1, outer(s[0], s[1])), (0, h0))[1]

    closed = rewritten(f, w, h0)
    (top,) = loops(closed)
    assert [e.primitive for e in closed.jaxpr.eqns] == [sh.transpose_p, cf.while_p]
    (inner,) = loops(top.params["body_jaxpr"])
    assert not any(e.primitive is sh.transpose_p for e in top.params["body_jaxpr"].jaxpr.eqns)
    assert inner.params["num_consts"] + inner.params["num_carry"] >= 2
    h = h0
    for i in range(4):
        for _ in range(3):
            h = np.tanh(w @ h) + np.float32(0.01 * i)
    check(f, w, h0, expected=h, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch", [1, 2, 8])
def test_a_vmapped_scan_rnn_reads_its_matrices_by_rows(batch):
    """``vmap`` of ``W @ h`` multiplies ``W`` by a batch of vectors and transposes the result:
    rewritten too, for any batch size."""
    rng = np.random.default_rng(batch)
    w, u, b, _, _ = rnn_inputs(rng, 32, 8, 0)
    h0, xs = sample(rng, (batch, 32), np.float32), sample(rng, (batch, 6, 8), np.float32, 1.0)
    f = ember.vmap(rnn, in_axes=(None, None, None, 0, 0))
    closed = rewritten(f, w, u, b, h0, xs)
    assert sum(e.primitive is sh.transpose_p and e.invars[0].aval.ndim == 2 for e in closed.jaxpr.eqns) == 2
    expected = [numpy_rnn(w, u, b, h0[i], xs[i]) for i in range(batch)]
    check(f, w, u, b, h0, xs, expected=(np.stack([e[0] for e in expected]), np.stack([e[1] for e in expected])),
          rtol=1e-5, atol=1e-5)


def test_what_the_rewrite_leaves_alone():
    """Matrices read by columns already (``h @ W``), carried ones (not constant), products of
    matrices by matrices (already rows, or read with the matrix's axis first), one-row matrices,
    matrices of long rows and batched products."""
    rng = np.random.default_rng(4)
    w, h0, m = sample(rng, (8, 8), np.float32), sample(rng, 8, np.float32), sample(rng, (8, 8), np.float32)
    by_columns = lambda w, h0: lax.fori_loop(0, 3, lambda i, h: jnp.tanh(h @ w), h0)  # noqa: E731
    carried = lambda w, h0: lax.fori_loop(0, 3, lambda i, s: (s[0] * 0.5, jnp.tanh(s[0] @ s[1])), (w, h0))  # noqa: E731
    matrices = lambda w, m: lax.fori_loop(0, 3, lambda i, a: jnp.tanh(w @ a), m)  # noqa: E731
    one_row = lambda w, h0: lax.fori_loop(0, 3, lambda i, h: h + (w[:1] @ h), h0)  # noqa: E731
    batched = lambda w, m: lax.fori_loop(  # noqa: E731
        0, 3, lambda i, a: jnp.tanh(jnp.einsum("bij,bj->bi", jnp.stack([w, w]), a)), m[:2])
    # W @ V read with the matrix's axis first (the transpose keeps it ahead of V's columns)
    read_by_columns = lambda w, m: lax.fori_loop(  # noqa: E731
        0, 3, lambda i, a: jnp.tanh(lax.dot_general(w, a, (((1,), (1,)), ((), ()))) + a), m)
    # rows longer than a few registers hold: the horizontal sums of long rows are faster
    tall = sample(rng, (ROW_MAX_BYTES // 4 + 1, 8), np.float32)
    long_rows = lambda w, h0: lax.fori_loop(0, 3, lambda i, h: h * 0.5 + jnp.tanh(w @ h[:8])[:8], h0)  # noqa: E731
    for f, args in ((by_columns, (w, h0)), (carried, (w, h0)), (matrices, (w, m)), (one_row, (w, h0)),
                    (batched, (w, m)), (read_by_columns, (w, m)), (long_rows, (tall, h0))):
        closed = rewritten(f, *args)
        assert not any(e.primitive is sh.transpose_p and e.invars[0].aval.ndim == 2 for e in closed.jaxpr.eqns), f
        check(f, *args, rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(2, 40), cols=st.integers(1, 40), length=st.integers(0, 6),
       dtype=st.sampled_from([np.float32, np.float64, np.int32]), loop=st.sampled_from(["scan", "fori", "while"]),
       transposed=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_matrix_vector_loops_match_numpy(rows, cols, length, dtype, loop, transposed, seed):
    """``v = squash(W @ v[:cols] ...)`` with W (rows, cols) read along its rows, written as ``W @ v`` or
    ``v @ W.T``, in each kind of loop, for any shape, dtype and trip count."""
    rng = np.random.default_rng(seed)
    w = sample(rng, (rows, cols), dtype)
    v0 = sample(rng, max(rows, cols), dtype)
    pad = max(rows, cols) - rows

    def step(w, v):
        x = v[:cols]
        y = x @ w.T if transposed else w @ x
        return squash(jnp.pad(y, (0, pad)) + v)

    def step_np(w, v):
        return squash_np(np.pad(w @ v[:cols], (0, pad)) + v).astype(dtype)

    if loop == "scan":
        f = lambda w, v0: lax.scan(lambda v, _: (step(w, v), v.sum()), v0, None, length=length)  # noqa: E731
    elif loop == "fori":
        f = lambda w, v0: lax.fori_loop(0, length, lambda i, v: step(w, v), v0)  # noqa: E731
    else:
        f = lambda w, v0: lax.while_loop(  # noqa: E731
            lambda s: s[0] < length, lambda s: (s[0] + 1, step(w, s[1])), (0, v0))[1]
    v = v0
    for _ in range(length):
        v = step_np(w, v)
    got = check(f, w, v0, rtol=1e-5, atol=1e-5)
    assert_allclose(got[0], v, rtol=1e-5, atol=1e-5)
