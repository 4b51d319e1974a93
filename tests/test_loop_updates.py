"""Loops that update a window of a carry (``lax.dynamic_update_slice``, ``x.at[i].set(v)``,
``x.at[i].add(v)``) write the window into the carry's buffer rather than copying the whole carry
each iteration (``backends/cpu/control_flow.py _in_place_updates``). They compute what the
reference interpreter and NumPy do, also where the update must not be in place."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from util import assert_allclose

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import codegen, control_flow
from ember.lax import control_flow as cf


def run(backend: str, f, *args):
    with ember.config.override(backend=backend, enable_x64=True):
        return ember.tree_util.tree_map(np.asarray, ember.jit(f)(*args))


def check(f, *args, expected=None):
    """``f`` under jit on the CPU backend equals the reference interpreter (and ``expected``)."""
    got = ember.tree_util.tree_leaves(run("cpu", f, *args))
    want = ember.tree_util.tree_leaves(run("reference", f, *args))
    for g, w in zip(got, want):
        assert_allclose(g, w)
    if expected is not None:
        for g, e in zip(got, ember.tree_util.tree_leaves(expected)):
            assert_allclose(g, np.asarray(e, g.dtype))
    return got


def in_place(f, *args) -> int:
    """How many of the top loop's carries ``f`` updates in place."""
    with ember.config.override(enable_x64=True):
        closed = ember.make_jaxpr(f)(*args)
    (loop,) = [e for e in closed.jaxpr.eqns if e.primitive in (cf.scan_p, cf.while_p)]
    subs = control_flow.prepare(loop, codegen.can_fuse_in_loop)
    assert subs is not None
    return len(control_flow._in_place_updates(subs[-1].jaxpr, control_flow._carried(loop), codegen.can_fuse_in_loop))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.complex64])
def test_rows_filled_by_dynamic_update_slice_and_at_set(dtype):
    a = (np.arange(40 * 7) % 11).astype(dtype).reshape(40, 7)
    by_slice = lambda a: lax.fori_loop(  # noqa: E731
        1, 40, lambda i, a: lax.dynamic_update_slice(a, lax.dynamic_slice(a, (i - 1, 0), (1, 7)) * 2 + 1, (i, 0)), a)
    by_set = lambda a: lax.fori_loop(1, 40, lambda i, a: a.at[i].set(a[i - 1] * 2 + 1), a)  # noqa: E731
    by_add = lambda a: lax.fori_loop(1, 40, lambda i, a: a.at[i].add(a[i - 1]), a)  # noqa: E731

    doubled, summed = a.copy(), a.copy()
    with np.errstate(over="ignore"):
        for i in range(1, 40):
            doubled[i] = doubled[i - 1] * 2 + 1
            summed[i] += summed[i - 1]
    for f, expected in ((by_slice, doubled), (by_set, doubled), (by_add, summed)):
        assert in_place(f, a) == 1
        check(f, a, expected=expected)
    assert (a == (np.arange(40 * 7) % 11).astype(dtype).reshape(40, 7)).all()  # (the argument is untouched)


def test_windows_of_any_rank_clamped_or_dropped_at_the_edges():
    """dynamic_update_slice clamps its start into the array (a negative one counts from the end
    first); a scatter drops what does not fit."""
    a = np.zeros((6, 5, 4), np.float32)
    window = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) + 1

    def clamped(a, w):
        step = lambda i, a: lax.dynamic_update_slice(a, w * i.astype(jnp.float32), (i, i - 1, 0))  # noqa: E731
        return lax.fori_loop(-2, 8, step, a)

    def dropped(a, w):
        return lax.fori_loop(-2, 8, lambda i, a: a.at[i].set(w[0, 0] * i.astype(jnp.float32), mode="drop"), a)

    expected = a.copy()
    for i in range(-2, 8):
        s0, s1 = (min(max(j + n if j < 0 else j, 0), n - k) for j, n, k in ((i, 6, 2), (i - 1, 5, 3)))
        expected[s0:s0 + 2, s1:s1 + 3] = window * i
    for f in (clamped, dropped):
        assert in_place(f, a, window) == 1
    check(clamped, a, window, expected=expected)
    check(dropped, a, window)


def test_scalars_and_single_elements():
    def element(a):
        return lax.fori_loop(0, 30, lambda i, a: a.at[i % 5, i % 3].add(i.astype(jnp.float32)), a)

    def scalar(x):
        return lax.fori_loop(0, 10, lambda i, x: lax.dynamic_update_slice(x, x * 2 + 1, ()), x)

    expected = np.zeros((5, 3), np.float32)
    for i in range(30):
        expected[i % 5, i % 3] += i
    check(element, np.zeros((5, 3), np.float32), expected=expected)
    check(scalar, np.float32(1), expected=np.float32(2 ** 11 - 1))


def test_updates_move_after_what_reads_the_old_value_but_views_keep_it_apart():
    """The old value read after the update in the program (a sum) is read before it in the loop
    (the update is in place); a view of the old value (a reshape) keeps the update apart."""
    a = np.arange(64 * 8, dtype=np.float32).reshape(64, 8) / 100

    def sum_after(a):
        def body(c, i):
            new = lax.dynamic_update_slice(c, c[i - 1][None] + 1.0, (i, 0))
            return new, c.sum() + c.reshape(-1)[i]
        return lax.scan(body, a, jnp.arange(1, 20))

    def passed_on(a):
        return lax.fori_loop(1, 10, lambda i, s: (s[0].at[i].set(s[0][i - 1] * 2), s[0]), (a, a))

    sums, totals, c = [], [], a.copy()
    for i in range(1, 20):
        sums.append(c.sum() + c.reshape(-1)[i])
        totals.append(c.sum())
        c = c.copy()
        c[i] = c[i - 1] + 1
    assert in_place(sum_after, a) == 0  # (the view)
    check(sum_after, a, expected=(c, np.array(sums, np.float32)))
    no_view = lambda a: lax.scan(  # noqa: E731
        lambda c, i: (lax.dynamic_update_slice(c, c[i - 1][None] + 1.0, (i, 0)), c.sum()), a, jnp.arange(1, 20))
    assert in_place(no_view, a) == 1
    check(no_view, a, expected=(c, np.array(totals, np.float32)))
    assert in_place(passed_on, a) == 0
    check(passed_on, a)


def test_while_loops_scans_and_nested_loops_update_in_place():
    a = np.zeros((50, 16), np.float32)

    def while_(a):
        def body(s):
            i, a = s
            return i + 1, a.at[i].set(jnp.full(16, 1.0) * i.astype(jnp.float32) + a[i - 1])
        return lax.while_loop(lambda s: s[0] < 50, body, (1, a))[1]

    def scanned(a):
        return lax.scan(lambda a, i: (a.at[i].set(a[i - 1] + 1.0), a[i - 1].sum()), a, jnp.arange(1, 50), reverse=True)

    def nested(a):
        def outer(j, a):
            return lax.fori_loop(0, 50, lambda i, a: a.at[i, j].set(i.astype(jnp.float32) * j), a)
        return lax.fori_loop(0, 16, outer, a)

    expected = a.copy()
    for i in range(1, 50):
        expected[i] = i + expected[i - 1]
    check(while_, a, expected=expected)
    check(scanned, a)
    check(nested, a, expected=np.arange(50, dtype=np.float32)[:, None] * np.arange(16, dtype=np.float32))
    assert in_place(while_, a) == 1 and in_place(scanned, a) == 1


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 12), cols=st.integers(1, 9), steps=st.integers(0, 15),
       dtype=st.sampled_from([np.float32, np.int32, np.float64]), how=st.sampled_from(["slice", "set", "add"]),
       loop=st.sampled_from(["fori", "while", "scan"]), offset=st.integers(-3, 3), seed=st.integers(0, 2 ** 16))
def test_row_updates_match_numpy(rows, cols, steps, dtype, how, loop, offset, seed):
    """Row ``i + offset`` (from the end if negative; then clamped for a slice, dropped out of
    range for a scatter) set to, or increased by, a function of the previous row, in each kind of loop."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, (rows, cols)).astype(dtype)

    def update(i, a):
        row = a[(i - 1) % rows] * 2 + 1
        if how == "slice":
            return lax.dynamic_update_slice(a, row[None], (i + offset, 0))
        at = a.at[i + offset]
        return at.set(row, mode="drop") if how == "set" else at.add(row, mode="drop")

    if loop == "fori":
        f = lambda a: lax.fori_loop(0, steps, update, a)  # noqa: E731
    elif loop == "while":
        f = lambda a: lax.while_loop(  # noqa: E731
            lambda s: s[0] < steps, lambda s: (s[0] + 1, update(s[0], s[1])), (0, a))[1]
    else:
        f = lambda a: lax.scan(lambda a, i: (update(i, a), None), a, jnp.arange(steps))[0]  # noqa: E731
    expected = a.copy()
    with np.errstate(over="ignore"):
        for i in range(steps):
            row = expected[(i - 1) % rows] * 2 + 1
            at = i + offset
            if how == "slice":  # (a negative start counts from the end, then is clamped, as in JAX)
                expected[min(max(at + rows if at < 0 else at, 0), rows - 1)] = row
            elif -rows <= at < rows:  # (a negative index counts from the end, as in NumPy)
                expected[at] = row if how == "set" else expected[at] + row
    check(f, a, expected=expected)


def test_a_donated_initial_value_is_updated_where_it_lies():
    """The loop's output may be the donated initial value's buffer: the carry starts there."""
    a = np.arange(30 * 9, dtype=np.float32).reshape(30, 9)
    f = lambda a: lax.fori_loop(1, 30, lambda i, a: a.at[i].set(a[i - 1] + a[i]), a)  # noqa: E731
    expected = a.copy()
    for i in range(1, 30):
        expected[i] = expected[i - 1] + expected[i]
    donated = ember.jit(f, donate_argnums=0)
    for _ in range(2):
        assert_allclose(np.asarray(donated(ember.device_put(a))), expected)
    assert_allclose(np.asarray(ember.jit(f)(a)), expected)
