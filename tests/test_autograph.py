"""autograph: programs written with Python control flow and again by hand with ``lax`` give
the same values, gradients and batched values, on the CPU backend, on XLA's CPU plugin and on the
reference interpreter; each
error that teaches names the variable and the user's line; with the switch off nothing changes.
"""
from __future__ import annotations

import functools
import inspect
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as jnp
from ember import errors, lax
from ember.autograph import conversion

HERE = os.path.abspath(__file__)

# --- the programs: each written with Python control flow, and its twin with lax --------------------
CASES: dict[str, dict] = {}


def case(*calls: tuple, grad: bool = True, vmap: bool = True, static: tuple = ()):
    """Register a program; ``calls`` are argument tuples; ``grad``: reverse mode through it (loops
    with a traced condition are not reverse-differentiable, as in JAX); ``vmap`` over the first
    argument of the calls stacked."""
    def register(py):
        CASES[py.__name__] = dict(py=py, calls=calls, grad=grad, vmap=vmap, static=static)
        return py
    return register


def twin(py):
    def register(lx):
        CASES[py.__name__]["lax"] = lx
        return lx
    return register


@case((2.0,), (-3.0,))
def if_else(x):
    if x > 0:
        y = x * 2
    else:
        y = -x
    return y


@twin(if_else)
def _(x):
    return lax.cond(x > 0, lambda: x * 2, lambda: -x)


@case((2.0,), (-3.0,), (-0.5,))
def if_elif_else(x):
    if x > 0:
        y = x * 2
    elif x < -1:
        y = x * 3
    else:
        y = jnp.sin(x)
    return y


@twin(if_elif_else)
def _(x):
    return lax.cond(x > 0, lambda: x * 2, lambda: lax.cond(x < -1, lambda: x * 3, lambda: jnp.sin(x)))


@case((2.0,), (-3.0,))
def if_without_else(x):
    y = x + 1
    if x > 0:
        y = y * x
    return y


@twin(if_without_else)
def _(x):
    y = x + 1
    return lax.cond(x > 0, lambda: y * x, lambda: y)


@case((2.0, 1.0), (-3.0, 2.0), (1.0, -1.0))
def nested_ifs(x, y):
    if x > 0:
        if y > 0:
            z = x * y
        else:
            z = x - y
    else:
        z = jnp.cos(x) + y
    return z


@twin(nested_ifs)
def _(x, y):
    return lax.cond(x > 0, lambda: lax.cond(y > 0, lambda: x * y, lambda: x - y), lambda: jnp.cos(x) + y)


@case((np.array([1.0, -2.0, 3.0], np.float32),), (np.array([-1.0, -2.0, 0.5], np.float32),))
def if_on_a_reduction(x):
    if jnp.sum(x) > 0:
        x = x * 2
    else:
        x = jnp.tanh(x)
    return x


@twin(if_on_a_reduction)
def _(x):
    return lax.cond(jnp.sum(x) > 0, lambda: x * 2, lambda: jnp.tanh(x))


@case((2.0, 3.0), (-3.0, 1.0))
def if_assigns_two_variables(x, y):
    if x > y:
        a, b = x, y
    else:
        a, b = y * 2, x * 3
    return a - b


@twin(if_assigns_two_variables)
def _(x, y):
    a, b = lax.cond(x > y, lambda: (x, y), lambda: (y * 2, x * 3))
    return a - b


@case((2.0,), (-3.0,))
def if_on_a_dict(x):
    state = {"a": x, "b": x * 2}
    if x > 0:
        state = {"a": state["a"] + 1, "b": state["b"] * state["a"]}
    return state["a"] + state["b"]


@twin(if_on_a_dict)
def _(x):
    state = {"a": x, "b": x * 2}
    state = lax.cond(x > 0, lambda: {"a": state["a"] + 1, "b": state["b"] * state["a"]}, lambda: state)
    return state["a"] + state["b"]


@case((2.0,), (-3.0,))
def conditional_expression(x):
    return x * 3 if x > 0 else x ** 2


@twin(conditional_expression)
def _(x):
    return lax.cond(x > 0, lambda: x * 3, lambda: x ** 2)


@case((2.0, 1.0), (-3.0, 1.0), (2.0, -1.0))
def and_of_traced(x, y):
    if x > 0 and y > 0:
        x = x * y
    return x


@twin(and_of_traced)
def _(x, y):
    return lax.cond(jnp.logical_and(x > 0, y > 0), lambda: x * y, lambda: x)


@case((2.0, 1.0), (-3.0, -1.0), (-2.0, 1.0))
def or_of_traced(x, y):
    if x > 0 or y > 0:
        x = x + y
    return x


@twin(or_of_traced)
def _(x, y):
    return lax.cond(jnp.logical_or(x > 0, y > 0), lambda: x + y, lambda: x)


@case((2.0,), (-3.0,))
def not_of_traced(x):
    if not x > 0:
        x = -x
    return x


@twin(not_of_traced)
def _(x):
    return lax.cond(jnp.logical_not(x > 0), lambda: -x, lambda: x)


@case((0.5,), (3.0,), (-1.0,))
def chained_comparison(x):
    if 0 < x < 1:
        x = x * 10
    return x


@twin(chained_comparison)
def _(x):
    return lax.cond(jnp.logical_and(0 < x, x < 1), lambda: x * 10, lambda: x)


@case((2.0,), (-3.0,))
def early_return(x):
    if x > 0:
        return x * 2
    return -x


@twin(early_return)
def _(x):
    return lax.cond(x > 0, lambda: x * 2, lambda: -x)


@case((2.0,), (-3.0,), (0.5,), (-0.5,))
def several_returns(x):
    if x > 1:
        return x * 2
    if x < -1:
        return x * 3
    if x > 0:
        return x + 10
    return x - 10


@twin(several_returns)
def _(x):
    return lax.cond(x > 1, lambda: x * 2, lambda: lax.cond(
        x < -1, lambda: x * 3, lambda: lax.cond(x > 0, lambda: x + 10, lambda: x - 10)))


@case((2.0, 1.0), (2.0, -1.0), (-2.0, 1.0))
def return_in_nested_branches(x, y):
    if x > 0:
        if y > 0:
            return x + y
        else:
            return x - y
    else:
        return x * y


@twin(return_in_nested_branches)
def _(x, y):
    return lax.cond(x > 0, lambda: lax.cond(y > 0, lambda: x + y, lambda: x - y), lambda: x * y)


@case((1.5, 5), (2.0, 0), grad=False)
def while_with_a_traced_bound(x, n):
    i = 0
    while i < n:
        x = x * 1.5
        i += 1
    return x


@twin(while_with_a_traced_bound)
def _(x, n):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 1.5), (0, x))[1]


@case((1.5,), (200.0,), grad=False)
def while_on_a_value(x):
    while x < 100:
        x = x * 2
    return x


@twin(while_on_a_value)
def _(x):
    return lax.while_loop(lambda x: x < 100, lambda x: x * 2, x)


@case((1.5, 10), (3.0, 2), grad=False)
def while_with_break(x, n):
    i = 0
    while i < n:
        if x > 20:
            break
        x = x * 2
        i += 1
    return x


@twin(while_with_break)
def _(x, n):
    def body(c):
        i, x, stop = c
        stop = x > 20
        return lax.cond(stop, lambda: (i, x, stop), lambda: (i + 1, x * 2, stop))
    return lax.while_loop(lambda c: jnp.logical_and(jnp.logical_not(c[2]), c[0] < n), body, (0, x, False))[1]


@case((1.0, 6), (-1.0, 3), grad=False)
def while_with_continue(x, n):
    i = 0
    s = x
    while i < n:
        i += 1
        if i % 2 == 0:
            continue
        s = s + x * i
    return s


@twin(while_with_continue)
def _(x, n):
    def body(c):
        i, s = c
        i = i + 1
        return i, lax.cond(i % 2 == 0, lambda: s, lambda: s + x * i)
    return lax.while_loop(lambda c: c[0] < n, body, (0, x))[1]


@case((1.5,), (-0.5,))
def for_over_a_concrete_range(x):
    s = x
    for i in range(5):
        s = s * 0.9 + jnp.sin(s) * i
    return s


@twin(for_over_a_concrete_range)
def _(x):
    return lax.fori_loop(0, 5, lambda i, s: s * 0.9 + jnp.sin(s) * i, x)


@case((1.5, 4), (0.5, 0), grad=False)
def for_over_a_traced_range(x, n):
    for i in range(n):
        x = x + i * x
    return x


@twin(for_over_a_traced_range)
def _(x, n):
    return lax.fori_loop(0, n, lambda i, x: x + i * x, x)


@case((np.arange(12, dtype=np.float32).reshape(4, 3) / 10,), vmap=True)
def for_over_the_rows_of_an_array(xs):
    s = jnp.zeros(3)
    for row in xs:
        s = s * 0.5 + jnp.tanh(row)
    return s


@twin(for_over_the_rows_of_an_array)
def _(xs):
    return lax.scan(lambda s, row: (s * 0.5 + jnp.tanh(row), None), jnp.zeros(3), xs)[0]


@case((np.array([1.0, -2.0, 3.0, -0.5], np.float32),))
def for_over_an_array_with_an_if(xs):
    s = 0.0
    for x in xs:
        if x > 0:
            s = s + x * x
        else:
            s = s - x
    return s


@twin(for_over_an_array_with_an_if)
def _(xs):
    return lax.scan(lambda s, x: (lax.cond(x > 0, lambda: s + x * x, lambda: s - x), None), 0.0, xs)[0]


@case((1.5,), (30.0,))
def for_with_a_traced_break(x):
    for _ in range(6):
        if x > 20:
            break
        x = x * 2
    return x


@twin(for_with_a_traced_break)
def _(x):
    def body(i, c):
        x, stop = c
        stop = x > 20
        return lax.cond(stop, lambda: (x, stop), lambda: (x * 2, stop))
    return lax.fori_loop(0, 6, lambda i, c: lax.cond(c[1], lambda: c, lambda: body(i, c)), (x, False))[0]


@case((np.array([1.0, -2.0, 3.0, -0.5], np.float32),))
def for_with_a_traced_continue(xs):
    s = 0.0
    for i in range(4):
        if xs[i] < 0:
            continue
        s = s + xs[i] * i
    return s


@twin(for_with_a_traced_continue)
def _(xs):
    return lax.fori_loop(0, 4, lambda i, s: lax.cond(xs[i] < 0, lambda: s, lambda: s + xs[i] * i), 0.0)


@case((1.5,), (-0.5,))
def nested_for_loops(x):
    for i in range(3):
        for j in range(2):
            x = jnp.sin(x) + i * j
    return x


@twin(nested_for_loops)
def _(x):
    return lax.fori_loop(0, 3, lambda i, x: lax.fori_loop(0, 2, lambda j, x: jnp.sin(x) + i * j, x), x)


@case((np.linspace(-1, 1, 5).astype(np.float32),))
def for_indexing_an_array(x):
    s = x[0]
    for i in range(1, 5):
        s = s * 0.5 + x[i]
    return s


@twin(for_indexing_an_array)
def _(x):
    return lax.fori_loop(1, 5, lambda i, s: s * 0.5 + x[i], x[0])


def _clip(v, lo):
    if v < lo:
        return lo
    return v


@case((2.0,), (-3.0,))
def calls_a_helper(x):
    return _clip(x, -1.0) * 2


@twin(calls_a_helper)
def _(x):
    return lax.cond(x < -1.0, lambda: -1.0, lambda: x) * 2


class _Layer:
    def __init__(self, scale):
        self.scale = scale

    def __call__(self, x):
        if x > 0:
            x = x * self.scale
        return x

    def shifted(self, x):
        while x > 10:
            x = x - self.scale
        return x


@case((2.0,), (-3.0,), grad=False)
def calls_an_object_and_a_method(x):
    layer = _Layer(3.0)
    return layer(x) + layer.shifted(x * 10)


@twin(calls_an_object_and_a_method)
def _(x):
    return lax.cond(x > 0, lambda: x * 3.0, lambda: x) + lax.while_loop(lambda v: v > 10, lambda v: v - 3.0, x * 10)


@case((2.0,), (-3.0,), vmap=True, grad=True)
def calls_a_closure_and_a_partial(x):
    def scaled(v, k):
        if v > 0:
            v = v * k
        return v
    double = functools.partial(scaled, k=2.0)
    return double(x) + scaled(x, 5.0)


@twin(calls_a_closure_and_a_partial)
def _(x):
    return lax.cond(x > 0, lambda: x * 2.0, lambda: x) + lax.cond(x > 0, lambda: x * 5.0, lambda: x)


@case((2.0,), (-3.0,))
def inner_function_given_to_lax(x):
    def body(i, c):
        if c > 5:
            c = c - 1
        else:
            c = c * 2
        return c
    return lax.fori_loop(0, 6, body, x)


@twin(inner_function_given_to_lax)
def _(x):
    return lax.fori_loop(0, 6, lambda i, c: lax.cond(c > 5, lambda: c - 1, lambda: c * 2), x)


@case((2.0, True), (2.0, False), static=(1,))
def if_on_a_static_argument(x, flag):
    if flag:
        x = x * 2
    else:
        x = x + 1
    return x


@twin(if_on_a_static_argument)
def _(x, flag):
    return x * 2 if flag else x + 1


@case((np.ones(3, np.float32),), (np.ones(1, np.float32),))
def if_on_a_shape(x):
    if x.shape[0] > 2:
        x = x[:2]
    return x * 2


@twin(if_on_a_shape)
def _(x):
    return x[:2] * 2 if x.shape[0] > 2 else x * 2


_WEIGHTS = [0.5, 2.0, -1.0]


@case((2.0,), (-3.0,))
def for_over_a_python_list(x):
    for w in _WEIGHTS:
        x = jnp.tanh(x * w)
    return x


@twin(for_over_a_python_list)
def _(x):
    return jnp.tanh(jnp.tanh(jnp.tanh(x * 0.5) * 2.0) * -1.0)


@case((2.0,), (-3.0,))
def for_needing_a_python_index(x):
    for i in range(3):
        x = x * _WEIGHTS[i] + 1
    return x


@twin(for_needing_a_python_index)
def _(x):
    return ((x * 0.5 + 1) * 2.0 + 1) * -1.0 + 1


@case((np.arange(6, dtype=np.float32),))
def for_needing_python_slices(x):
    s = 0.0
    for i in range(3):
        s = s + jnp.sum(x[i:i + 2])
    return s


@twin(for_needing_python_slices)
def _(x):
    return jnp.sum(x[0:2]) + jnp.sum(x[1:3]) + jnp.sum(x[2:4])


@case((2.0,), (-3.0,))
def while_on_a_python_counter(x):
    i = 0
    while i < 3:
        x = x * 2 + i
        i += 1
    return x


@twin(while_on_a_python_counter)
def _(x):
    return ((x * 2) * 2 + 1) * 2 + 2


@case((2.0,), (-3.0,))
def if_assigns_python_numbers(x):
    if x > 0:
        k = 1
    else:
        k = 2
    return x * k


@twin(if_assigns_python_numbers)
def _(x):
    return x * lax.cond(x > 0, lambda: 1, lambda: 2)


@case((np.array([3, -4], np.int32),), grad=False)
def if_on_integers(x):
    if x[0] > x[1]:
        y = x * 2
    else:
        y = x // 2
    return y


@twin(if_on_integers)
def _(x):
    return lax.cond(x[0] > x[1], lambda: x * 2, lambda: x // 2)


@case((2.0, 3), (-3.0, 2), grad=False)
def loop_inside_an_if(x, n):
    if x > 0:
        i = 0
        while i < n:
            x = x * 2
            i += 1
    else:
        x = -x
    return x


@twin(loop_inside_an_if)
def _(x, n):
    return lax.cond(x > 0, lambda: lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] * 2), (0, x))[1],
                    lambda: -x)


@case((2.0, 5), (-3.0, 4), grad=False)
def if_inside_a_traced_loop(x, n):
    i = 0
    while i < n:
        if x > 0:
            x = x - 1.5
        else:
            x = x + 2
        i += 1
    return x


@twin(if_inside_a_traced_loop)
def _(x, n):
    return lax.while_loop(lambda c: c[0] < n,
                          lambda c: (c[0] + 1, lax.cond(c[1] > 0, lambda: c[1] - 1.5, lambda: c[1] + 2)), (0, x))[1]


@case((np.eye(3, dtype=np.float32) * 0.5 + 0.1, 4), grad=False, vmap=False)
def while_on_a_matrix(a, n):
    p = jnp.eye(3)
    i = 0
    while i < n:
        p = p @ a
        i += 1
    return p


@twin(while_on_a_matrix)
def _(a, n):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, c[1] @ a), (0, jnp.eye(3)))[1]


@case((2.0,), (-3.0,))
def relu_by_hand(x):
    return x if x > 0 else 0.0


@twin(relu_by_hand)
def _(x):
    return lax.cond(x > 0, lambda: x, lambda: 0.0)


@case((2.0,), (-3.0,))
def enumerate_over_a_list(x):
    for i, w in enumerate(_WEIGHTS):
        if x > i:
            x = x * w
    return x


@twin(enumerate_over_a_list)
def _(x):
    for i, w in enumerate(_WEIGHTS):
        x = lax.cond(x > i, lambda x=x, w=w: x * w, lambda x=x: x)
    return x


@case((0.3,), (5.0,), (-2.0,))
def elif_chain_with_returns(x):
    if x < 0:
        return jnp.zeros_like(x)
    elif x < 1:
        return x * x
    elif x < 3:
        return 2 * x - 1
    return jnp.log(x) + 5 - jnp.log(3.0)


@twin(elif_chain_with_returns)
def _(x):
    return lax.cond(x < 0, lambda: jnp.zeros_like(x), lambda: lax.cond(
        x < 1, lambda: x * x, lambda: lax.cond(x < 3, lambda: 2 * x - 1, lambda: jnp.log(x) + 5 - jnp.log(3.0))))


@case((2.0, 1.0), (-3.0, 4.0))
def if_defines_a_temporary(x, y):
    if x > y:
        t = x - y
        z = t * t
    else:
        z = y
    return z


@twin(if_defines_a_temporary)
def _(x, y):
    return lax.cond(x > y, lambda: (x - y) * (x - y), lambda: y)


@case((2.0,), (-3.0,))
def expression_with_and_values(x):
    return jnp.where(x > 0, 1.0, 2.0) * (x if x > 1 else x * 2)


@twin(expression_with_and_values)
def _(x):
    return jnp.where(x > 0, 1.0, 2.0) * lax.cond(x > 1, lambda: x, lambda: x * 2)


@case((np.array([1.0, 2.0, 3.0], np.float32), 1.0), (np.array([1.0, 2.0, 3.0], np.float32), -1.0))
def for_over_rows_reads_a_traced_closure(xs, b):
    total = jnp.zeros(())
    for x in xs:
        total = total + x * b
    return total


@twin(for_over_rows_reads_a_traced_closure)
def _(xs, b):
    return lax.scan(lambda t, x: (t + x * b, None), jnp.zeros(()), xs)[0]


assert len(CASES) >= 40, len(CASES)
assert all("lax" in c for c in CASES.values()), [k for k, c in CASES.items() if "lax" not in c]


# --- running them on each backend -----------------------------------------------------------------
def _plugin_available() -> bool:
    try:
        import lammps_jax_pjrt_cpu  # noqa: F401
    except ImportError:
        return False
    from ember.backends import registry
    return "xla_cpu" in registry.registered() and registry.get("xla_cpu").is_available()


@pytest.fixture(params=["cpu", "xla_cpu", "reference"])
def backend(request):
    if request.param == "xla_cpu" and not _plugin_available():
        pytest.skip("XLA's CPU PJRT plugin is not installed (pip install ember[pjrt-cpu])")
    with ember.config.override(backend=request.param):
        yield request.param


def _close(a, b):
    for x, y in zip(ember.tree_util.tree_leaves(a), ember.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=2e-6, atol=1e-6)
    assert ember.tree_util.tree_structure(a) == ember.tree_util.tree_structure(b)


def _pair(name):
    c = CASES[name]
    return (ember.jit(c["py"], autograph=True, static_argnums=c["static"]),
            ember.jit(c["lax"], static_argnums=c["static"]), c)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values(name, backend):
    converted, by_hand, c = _pair(name)
    for args in c["calls"]:
        _close(converted(*args), by_hand(*args))


def _total(f, static):
    return lambda x, *rest: sum(jnp.sum(leaf) for leaf in ember.tree_util.tree_leaves(f(x, *rest)))


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c["grad"]))
def test_gradients(name, backend):
    converted, by_hand, c = _pair(name)
    for args in c["calls"]:
        if not np.issubdtype(np.asarray(args[0]).dtype, np.floating):
            continue
        got = ember.grad(_total(converted, c["static"]))(*args)
        want = ember.grad(_total(by_hand, c["static"]))(*args)
        _close(got, want)


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c["vmap"] and not c["static"]))
def test_batched(name, backend):
    converted, by_hand, c = _pair(name)
    firsts = [np.asarray(args[0]) for args in c["calls"]]
    if len({f.shape for f in firsts}) != 1:
        pytest.skip("the calls' first arguments differ in shape")
    rest = c["calls"][0][1:]
    xs = np.stack(firsts)
    axes = (0,) + (None,) * len(rest)
    _close(ember.vmap(converted, in_axes=axes)(xs, *rest), ember.vmap(by_hand, in_axes=axes)(xs, *rest))


def test_reverse_mode_through_a_traced_loop_gives_jaxs_error():
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"):
        ember.grad(ember.jit(while_on_a_value, autograph=True))(1.0)
    # forward mode works through it, as in JAX
    assert float(ember.jvp(ember.jit(while_on_a_value, autograph=True), (1.5,), (1.0,))[1]) == 128.0


# (while_on_a_value doubles x until it reaches 100: from x <= 0 it never does, in Python as compiled)
_SCALAR_CASES = sorted(n for n, c in CASES.items() if n != "while_on_a_value"
                       and not c["static"] and all(len(a) == 1 and isinstance(a[0], float) for a in c["calls"]))


@pytest.mark.parametrize("name", _SCALAR_CASES)
@given(x=st.floats(-40, 40, allow_nan=False, width=32))
def test_random_scalars_against_the_lax_twin(name, x):
    converted, by_hand, _ = _pair(name)
    x = np.float32(x)
    _close(converted(x), by_hand(x))


@given(st.floats(-50, 50, allow_nan=False, width=32), st.integers(0, 6))
def test_random_inputs_against_python(x, n):
    """On Python values the converted function is the Python function; traced, the same values."""
    def f(x, n):
        i = 0
        while i < n and x < 1000:
            if x > 0:
                x = x * 2.0
            elif x < -10:
                x = -x
            else:
                x = x + 3.0
            i += 1
        return x
    want = f(np.float32(x), n)
    np.testing.assert_allclose(float(ember.jit(f, autograph=True)(np.float32(x), n)), want, rtol=1e-6)
    np.testing.assert_allclose(float(ember.autograph.convert(f)(np.float32(x), n)), want, rtol=1e-6)


# --- what the programs become ---------------------------------------------------------------------
def test_make_jaxpr_shows_the_cond_while_and_scan():
    with ember.config.override(autograph=True):
        assert "cond[" in str(ember.make_jaxpr(if_else)(1.0))
        assert "while[" in str(ember.make_jaxpr(while_with_a_traced_bound)(1.0, 3))
        assert "scan[" in str(ember.make_jaxpr(for_over_the_rows_of_an_array)(np.ones((4, 3), np.float32)))
        assert "scan[" in str(ember.make_jaxpr(for_over_a_concrete_range)(1.0))
        unrolled = str(ember.make_jaxpr(for_over_a_python_list)(1.0))
        assert "scan[" not in unrolled and unrolled.count("tanh") == 3


def test_a_cond_under_vmap_becomes_a_select():
    text = str(ember.make_jaxpr(ember.vmap(ember.jit(relu_by_hand, autograph=True)))(np.ones(3, np.float32)))
    assert "select_n" in text and "cond[" not in text


def test_a_python_loop_with_python_values_only_runs_as_python():
    def f(x):
        total = 0
        for i in range(4):
            total += i
        return x * total
    with ember.config.override(autograph=True):
        text = str(ember.make_jaxpr(f)(1.0))
    assert "scan" not in text and "while" not in text and "6.0" in text


def test_converted_function_is_cached_like_any_other():
    def g(x):
        if x > 0:
            x = x * 2
        return x
    f = ember.jit(g, autograph=True)
    for x in (1.0, -1.0, 2.0, 3.0):
        f(np.float32(x))
    assert f.cache_info().traces == 1
    first = conversion._conversions[g.__code__]
    ember.jit(g, autograph=True)(np.float32(5.0))
    assert conversion._conversions[g.__code__] is first  # (converted once per code object)


def test_aot_lower_compile_and_text():
    lowered = ember.jit(while_on_a_value, autograph=True).lower(1.0)
    assert "while" in lowered.as_text()
    assert float(lowered.compile()(1.5)) == 192.0


def test_on_and_off_do_not_share_cache_entries():
    def f(x):
        if x > 0:
            x = x + 1
        return x
    jf = ember.jit(f)
    with pytest.raises(errors.TracerBoolConversionError):
        jf(1.0)
    with ember.config.override(autograph=True):
        assert float(jf(1.0)) == 2.0
    with pytest.raises(errors.TracerBoolConversionError):
        jf(1.0)


def test_log_compiles_says_which_statements_were_converted(caplog):
    with ember.config.override(log_compiles=True), caplog.at_level("WARNING", logger="ember"):
        ember.jit(for_with_a_traced_break, autograph=True)(1.0)
    text = caplog.text
    line = _line_of(for_with_a_traced_break, "for _ in range(6)")
    assert "autograph converted for_with_a_traced_break" in text
    assert f"for at {HERE}:{line} -> fori_loop" in text and "-> cond" in text


def test_library_code_is_never_converted():
    ember.jit(calls_an_object_and_a_method, autograph=True)(2.0)
    ember.jit(if_on_a_reduction, autograph=True)(np.ones(3, np.float32))
    assert conversion.is_library(jnp.sum.__code__.co_filename if hasattr(jnp.sum, "__code__") else ember.__file__)
    assert conversion.is_library(np.__file__) and conversion.is_library(functools.__file__)
    converted = {c.co_filename for c in conversion._converted_codes}
    assert not any(conversion.is_library(f) for f in converted)


def test_a_function_without_source_runs_unconverted_with_one_warning():
    namespace: dict = {}
    exec("def made_by_exec(x):\n    return x * 3\n", namespace)
    made = namespace["made_by_exec"]

    def f(x):
        return made(x) + 1
    with pytest.warns(UserWarning, match=r"made_by_exec \(<string>:1\) runs unconverted: its source is not"):
        assert float(ember.jit(f, autograph=True)(1.0)) == 4.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(ember.jit(f, autograph=True)(np.float32(2.0))) == 7.0  # (warned once)


def test_the_switch_from_the_environment_and_through_install_as_jax(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent("""
        import ember
        ember.install_as_jax()
        import jax

        @jax.jit
        def f(x):
            if x > 0:
                x = x * 2
            return x

        print(float(f(3.0)), float(f(-3.0)))
    """))
    env = dict(os.environ, EMBER_AUTOGRAPH="1", PYTHONPATH=os.path.dirname(os.path.dirname(HERE)))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["6.0", "-3.0"]


# --- with the switch off, nothing changes -----------------------------------------------------------
def _lax_programs():
    return [(CASES[n]["lax"], CASES[n]["calls"][0]) for n in sorted(CASES) if not CASES[n]["static"]]


def test_off_never_converts(monkeypatch):
    def refuse(fun):
        raise AssertionError("converted with autograph off")
    monkeypatch.setattr(ember.api, "convert_control_flow", refuse)
    for f, args in _lax_programs():
        ember.make_jaxpr(f)(*args)
        ember.jit(f)(*args)


def test_programs_without_python_control_flow_on_tracers_trace_the_same_on_and_off():
    for f, args in _lax_programs():
        off = str(ember.make_jaxpr(f)(*args))
        with ember.config.override(autograph=True):
            on = str(ember.make_jaxpr(f)(*args))
        assert on == off, f.__name__


def test_off_a_python_if_on_a_tracer_raises_as_before():
    with pytest.raises(errors.TracerBoolConversionError):
        ember.jit(if_else)(1.0)
    with pytest.raises(errors.TracerBoolConversionError):
        ember.make_jaxpr(while_on_a_value)(1.0)


def test_off_the_cache_key_is_unchanged():
    key = ember.config.codegen_key()
    with ember.config.override(autograph=True):
        assert ember.config.codegen_key() == key + (("autograph", True),)
    assert ember.config.codegen_key() == key


# --- errors that teach --------------------------------------------------------------------------------
def _line_of(fun, text):
    lines, start = inspect.getsourcelines(fun)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _raises(fun, args, error, *contents, line_of=()):
    with pytest.raises(error) as info:
        ember.jit(fun, autograph=True)(*args)
    assert type(info.value) is error
    message = str(info.value)
    for c in contents:
        assert c in message, message
    for text in line_of:
        assert f"{HERE}:{_line_of(fun, text)}" in message, message
    frames = [(f.filename, f.lineno) for f in __import__("traceback").extract_tb(info.value.__traceback__)]
    assert any(f == HERE for f, _ in frames)
    assert not any("ag__" in f for f, _ in frames)
    return info.value


def one_branch_only(x):
    if x > 0:
        y = x * 2
    return y + 1


def test_a_variable_assigned_in_one_branch_only_and_read_after():
    _raises(one_branch_only, (1.0,), errors.UndefinedVariableError, "variable 'y'", "true branch only",
            line_of=("return y + 1", "if x > 0"))


def temporary_of_one_branch(x):
    if x > 0:
        y = x * 2
        x = y
    return x


def test_a_temporary_of_one_branch_that_nothing_reads_is_fine():
    assert float(ember.jit(temporary_of_one_branch, autograph=True)(1.0)) == 2.0


def grows(x, n):
    i = 0
    while i < n:
        x = jnp.concatenate([x, x])
        i += 1
    return x


def test_a_loop_variable_that_changes_shape():
    _raises(grows, (np.ones(2, np.float32), 3), errors.LoopVariableTypeError, "'x'", "f32[2]", "f32[4]",
            "different shapes", line_of=("while i < n",))


def changes_dtype(x, n):
    i = 0
    while i < n:
        x = x > 0
        i += 1
    return x


def test_a_loop_variable_that_changes_dtype():
    _raises(changes_dtype, (np.ones(2, np.float32), 3), errors.LoopVariableTypeError, "'x'", "different dtypes",
            line_of=("while i < n",))


def returns_in_a_loop(x, n):
    i = 0
    while i < n:
        if x > 5:
            return x
        x = x + 1
        i += 1
    return x


def test_a_return_inside_a_loop_with_a_traced_condition():
    _raises(returns_in_a_loop, (1.0, 3), errors.ReturnInTracedLoopError, "`return`", "break",
            line_of=("while i < n", "return x\n"))


def returns_in_a_python_loop(x):
    for i in range(3):
        if i == 2:
            return x * i
        x = x + 1
    return x


def test_a_return_inside_a_loop_with_a_python_condition_is_python():
    assert float(ember.jit(returns_in_a_python_loop, autograph=True)(1.0)) == 6.0


def appends_in_a_loop(x, n):
    out = []
    i = 0
    while i < n:
        out.append(x)
        x = x + 1
        i += 1
    return x


def test_a_list_appended_to_inside_a_traced_loop():
    _raises(appends_in_a_loop, (1.0, 3), errors.ListAppendInTracedLoopError, "'out'", "out.append",
            "lax.scan", line_of=("out.append(x)",))


def appends_in_a_concrete_loop(x):
    out = []
    for _ in range(3):
        x = x * 2
        out.append(x)
    return jnp.stack(out)


def test_a_list_appended_to_inside_a_concrete_loop_runs_as_python():
    np.testing.assert_allclose(ember.jit(appends_in_a_concrete_loop, autograph=True)(1.0), [2.0, 4.0, 8.0])


def prints_in_a_branch(x):
    if x > 0:
        print(x)
        x = x + 1
    return x


def test_print_of_a_traced_value_inside_a_branch():
    _raises(prints_in_a_branch, (1.0,), errors.TracedPrintError, "ember.debug.print", line_of=("print(x)",))


def falls_off_the_end(x):
    if x > 0:
        return x


def test_a_function_that_returns_on_some_traced_paths_only():
    _raises(falls_off_the_end, (1.0,), errors.UndefinedVariableError, "falls off its end")


def test_an_error_raised_in_the_users_code_shows_the_users_lines():
    def bad(x):
        if x > 0:
            y = x + jnp.ones(3) @ jnp.ones(4)
        else:
            y = x
        return y
    with pytest.raises(TypeError) as info:
        ember.jit(bad, autograph=True)(1.0)
    import traceback
    frames = traceback.extract_tb(info.value.__traceback__)
    assert any(f.filename == HERE and "jnp.ones(3) @ jnp.ones(4)" in (f.line or "") for f in frames)


def assigned_in_a_traced_loop_only(x, n):
    i = 0
    while i < n:
        t = x * i
        i += 1
    return t


def test_a_variable_first_assigned_in_a_traced_loop_and_read_after():
    _raises(assigned_in_a_traced_loop_only, (1.0, 3), errors.UndefinedVariableError, "variable 't'",
            "may run zero times", line_of=("return t", "while i < n"))


def test_variables_first_assigned_in_a_loop_of_known_length_keep_their_last_value():
    def f(x):
        for i in range(3):
            y = x * i
        return y + i

    def g(xs):
        for row in xs:
            last = row * 2
        return last
    converted = ember.jit(f, autograph=True)
    assert float(converted(2.0)) == 6.0
    assert "scan[" in str(ember.make_jaxpr(converted)(2.0))
    assert float(ember.grad(converted)(2.0)) == 2.0
    np.testing.assert_array_equal(ember.jit(g, autograph=True)(np.arange(6.0, dtype=np.float32).reshape(3, 2)),
                                  [8.0, 10.0])


# --- the rest of the pipeline: tiers, the disk cache ---------------------------------------------------
def test_tiered_compilation_runs_converted_programs():
    with ember.config.override(tiered_compilation=True):
        f = ember.jit(if_inside_a_traced_loop, autograph=True)
        for _ in range(3):
            assert float(f(2.0, 5)) == float(ember.jit(CASES["if_inside_a_traced_loop"]["lax"])(2.0, 5))
        ember.wait_for_compiles()
        assert float(f(2.0, 5)) == float(ember.jit(CASES["if_inside_a_traced_loop"]["lax"])(2.0, 5))


def test_a_converted_program_is_loaded_from_the_disk_cache_by_a_later_process(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent("""
        import ember
        ember.config.update("log_compiles", True)

        @ember.jit(autograph=True)
        def f(x, n):
            i = 0
            while i < n:
                if x > 1:
                    x = x / 2
                i += 1
            return x

        print(float(f(20.0, 10)))
    """))
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"), EMBER_PERSISTENT_CACHE="1",
               PYTHONPATH=os.path.dirname(os.path.dirname(HERE)))
    runs = [subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
            for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr + runs[1].stderr
    assert runs[0].stdout.split() == runs[1].stdout.split() == ["0.625"]
    assert "while at" in runs[1].stderr and "from the disk cache" in runs[1].stderr


def test_a_compiled_function_outside_the_libraries_runs_unconverted_with_one_warning(monkeypatch):
    import math
    monkeypatch.setattr(conversion, "is_library", lambda path: not path.endswith(os.path.basename(math.__file__)))
    conversion._warned_compiled.discard(("math", "sqrt"))
    with pytest.warns(UserWarning, match=r"sqrt runs unconverted: it is a compiled \(C\) function"):
        assert conversion.convert(math.sqrt) is math.sqrt
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert conversion.convert(math.sqrt) is math.sqrt


def _signed_loss(w, x):
    if jnp.sum(w * x) > 0:
        return jnp.sum(w * x) ** 2
    return -jnp.sum(w * x)


def _signed_loss_lax(w, x):
    s = jnp.sum(w * x)
    return lax.cond(s > 0, lambda: s ** 2, lambda: -s)


def test_functions_given_to_transformations_inside_converted_code_are_converted(backend):
    def step(w, x):
        value, g = ember.value_and_grad(_signed_loss)(w, x)
        return w - 0.1 * g, value

    def step_lax(w, x):
        value, g = ember.value_and_grad(_signed_loss_lax)(w, x)
        return w - 0.1 * g, value

    def batched(ws, x):
        return ember.vmap(_signed_loss, in_axes=(0, None))(ws, x)

    w, x = np.array([1.0, -2.0], np.float32), np.array([3.0, 1.0], np.float32)
    _close(ember.jit(step, autograph=True)(w, x), ember.jit(step_lax)(w, x))
    _close(ember.jit(batched, autograph=True)(np.stack([w, -w]), x),
           ember.vmap(_signed_loss_lax, in_axes=(0, None))(np.stack([w, -w]), x))
    # a transformation's function given to jit directly: convert it first
    _close(ember.jit(ember.grad(ember.autograph.convert(_signed_loss)))(w, x), ember.grad(_signed_loss_lax)(w, x))


def test_a_function_given_to_jit_inside_converted_code_is_converted_once():
    def inner(v):
        if v > 0:
            v = v * 2
        return v

    def outer(x):
        return ember.jit(inner)(x) + 1
    f = ember.jit(outer, autograph=True)
    assert float(f(1.0)) == 3.0 and float(f(np.float32(-1.0))) == 0.0
    assert conversion.call(inner) is conversion.call(inner)  # (one converted object per function)


def test_debug_print_inside_a_converted_branch_prints_at_each_run(capsys):
    def f(x, n):
        i = 0
        while i < n:
            if x > 2:
                ember.debug.print("halving {}", x)
                x = x / 2
            i += 1
        return x
    assert float(ember.jit(f, autograph=True)(10.0, 3)) == 1.25
    ember.effects_barrier() if hasattr(ember, "effects_barrier") else None
    assert capsys.readouterr().out.split("\n")[:3] == ["halving 10.0", "halving 5.0", "halving 2.5"]


def test_explain_cache_misses_names_the_switch(caplog):
    def f(x):
        return x + 1
    jf = ember.jit(f)
    jf(1.0)
    with ember.config.override(explain_cache_misses=True, autograph=True), \
            caplog.at_level("WARNING", logger="ember"):
        jf(1.0)
    assert "config `autograph` changed: False -> True" in caplog.text


def _count_up(n):
    for i in range(n):
        yield i


async def _coroutine(x):
    return x


def test_generators_and_coroutines_run_unconverted_without_a_warning():
    def f(x):
        for i in _count_up(3):
            x = x + i
        c = _coroutine(1)
        c.close()
        return x
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(ember.jit(f, autograph=True)(1.0)) == 4.0


def test_a_lambda_is_converted():
    f = ember.jit(lambda x: x * 2 if x > 0 else -x, autograph=True)
    assert float(f(3.0)) == 6.0 and float(f(-3.0)) == 3.0
    g = ember.jit(lambda x, y: _clip(x, y) if x > y or y > 10 else y, autograph=True)
    assert float(g(3.0, 1.0)) == 3.0 and float(g(0.0, 1.0)) == 1.0


def _branchy_loss(x):
    if jnp.sum(x) > 0:
        y = jnp.sin(x) * 2.0
    else:
        y = jnp.cos(x)
    return jnp.sum(y * y)


def _branchy_loss_lax(x):
    y = lax.cond(jnp.sum(x) > 0, lambda x: jnp.sin(x) * 2.0, lambda x: jnp.cos(x), x)
    return jnp.sum(y * y)


_TRANSFORMS = {
    "grad": (ember.grad, False),
    "value_and_grad": (ember.value_and_grad, False),
    "vmap": (ember.vmap, True),
    "vmap(grad)": (lambda g: ember.vmap(ember.grad(g)), True),
    "jvp": (lambda g: (lambda v: ember.jvp(g, (v,), (v,))), False),
    "linearize": (lambda g: (lambda v: ember.linearize(g, v)[1](v)), False),
}


@pytest.mark.parametrize("name", list(_TRANSFORMS))
@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["true", "false"])
def test_a_transformation_that_a_converting_jit_traces_converts_the_users_function(name, sign):
    """``jit(grad(f), autograph=True)``: jit is given grad's wrapper (ember's code), and grad
    converts ``f`` when it traces it inside the converting trace."""
    make, batched = _TRANSFORMS[name]
    x = sign * np.linspace(-0.5, 2.0, 5).astype(np.float32)
    arg = np.stack([x, -x]) if batched else x
    got = ember.jit(make(_branchy_loss), autograph=True)(arg)
    want = ember.jit(make(_branchy_loss_lax))(arg)
    for g, w in zip(ember.tree_util.tree_leaves(got), ember.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)


def test_a_library_style_jit_of_value_and_grad_converts_under_the_config_switch():
    x = np.linspace(-2.0, 0.5, 4).astype(np.float32)
    with ember.config.override(autograph=True):
        got = ember.jit(ember.value_and_grad(_branchy_loss))(x)
    want = ember.jit(ember.value_and_grad(_branchy_loss_lax))(x)
    for g, w in zip(ember.tree_util.tree_leaves(got), ember.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6, atol=1e-6)
    with pytest.raises(errors.TracerBoolConversionError):  # (off: the Python `if` on a tracer, as before)
        ember.jit(ember.grad(_branchy_loss))(x)
    assert ember.grad(_branchy_loss)(x).shape == x.shape  # (no jit: concrete values, plain Python)
