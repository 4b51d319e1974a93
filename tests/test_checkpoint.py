"""``checkpoint`` / ``remat`` rematerialize as JAX's do, held against JAX 0.10.2 where installed.

For every policy the residuals that reverse mode saves (``saved_residuals``: count, types and
where each comes from) are JAX's, on the "Gradient checkpointing with jax.checkpoint" tutorial's
functions and a few more (an MLP, named values, nested checkpoints, checkpoints under ``jit`` and
``vmap``, ``static_argnums``). Gradients are the plain function's and JAX's; the backward pass
really recomputes (``sin`` counted in the program of ``grad``, as JAX users count it, and in the
compiled program, where ``prevent_cse`` keeps CSE from merging the recomputation back); and the
programs print as JAX prints them. JAX's residual descriptions end in a source location
(`` from file:line:column (function)``), which ember's IR does not carry: it is left out of the
comparison.
"""
from __future__ import annotations

import functools
import inspect
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import ember
import ember.numpy as ejnp
from ember.compiler import optimize
from ember.transforms import checkpoint as eck


def _load(which: str) -> SimpleNamespace:
    if which == "ember":
        return SimpleNamespace(name="ember", top=ember, jnp=ejnp, lax=ember.lax, P=ember.checkpoint_policies,
                               checkpoint_name=eck.checkpoint_name, saved_residuals=eck.saved_residuals)
    jax = pytest.importorskip("jax")
    import jax.numpy as jjnp
    from jax._src.ad_checkpoint import saved_residuals
    from jax.ad_checkpoint import checkpoint_name
    return SimpleNamespace(name="jax", top=jax, jnp=jjnp, lax=jax.lax, P=jax.checkpoint_policies,
                           checkpoint_name=checkpoint_name, saved_residuals=saved_residuals)


EMBER = _load("ember")


def _source(text: str) -> str:
    return re.sub(r" from (\S+:\d+(:\d+)? \(.*\)|unknown)$", "", text)


def _residuals(m: SimpleNamespace, f, *args) -> list[tuple]:
    return [(tuple(a.shape), np.dtype(a.dtype).name, bool(getattr(a, "weak_type", False)), _source(s))
            for a, s in m.saved_residuals(f, *args)]


# --- the functions: (m) -> (function, args) ----------------------------------------------------------
def _tutorial(m, policy):
    def g(W, x):
        return m.jnp.sin(m.jnp.dot(W, x))

    def f(W1, W2, W3, x):
        return g(W3, g(W2, g(W1, x)))

    args = (np.ones((5, 4), np.float32), np.ones((6, 5), np.float32), np.ones((7, 6), np.float32),
            np.ones(4, np.float32))
    return (f if policy == "plain" else m.top.checkpoint(f, policy=policy)), args


def _named(m, policy):
    def h(x):
        a = m.checkpoint_name(m.jnp.sin(x), "a")
        b = m.checkpoint_name(m.jnp.sin(a), "b")
        return m.jnp.sin(b)
    return (h if policy == "plain" else m.top.checkpoint(h, policy=policy)), (np.float32(0.5),)


def _mlp(m, policy):
    def mlp(params, x):
        for i, (w, b) in enumerate(params):
            x = m.checkpoint_name(m.jnp.dot(x, w) + b, f"layer{i}")
            x = m.jnp.tanh(x)
        return (x * x).sum()
    rng = np.random.default_rng(0)
    params = [(rng.normal(size=(3, 4)).astype(np.float32), np.zeros(4, np.float32)),
              (rng.normal(size=(4, 2)).astype(np.float32), np.ones(2, np.float32))]
    x = rng.normal(size=(5, 3)).astype(np.float32)
    return (mlp if policy == "plain" else m.top.checkpoint(mlp, policy=policy)), (params, x)


def _batched_dots(m, policy):
    def f(a, b, c):
        y = m.jnp.einsum("bij,bjk->bik", a, b)  # a product with a batch dimension
        return m.jnp.sin(m.jnp.sin(y) @ c).sum()
    rng = np.random.default_rng(1)
    args = (rng.normal(size=(2, 3, 4)).astype(np.float32), rng.normal(size=(2, 4, 5)).astype(np.float32),
            rng.normal(size=(5, 2)).astype(np.float32))
    return (f if policy == "plain" else m.top.checkpoint(f, policy=policy)), args


FUNCTIONS = {"tutorial": _tutorial, "named": _named, "mlp": _mlp, "batched_dots": _batched_dots}


def _policies(m) -> dict:
    P = m.P
    return {
        "plain": "plain",
        "default": None,
        "everything_saveable": P.everything_saveable,
        "nothing_saveable": P.nothing_saveable,
        "dots_saveable": P.dots_saveable,
        "checkpoint_dots": P.checkpoint_dots,
        "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
        "save_only_these_names": P.save_only_these_names("a", "layer0"),
        "save_anything_except_these_names": P.save_anything_except_these_names("a"),
        "save_any_names_but_these": P.save_any_names_but_these("a", "layer1"),
        "save_from_both_policies": P.save_from_both_policies(P.dots_with_no_batch_dims_saveable,
                                                             P.save_only_these_names("b")),
    }


POLICIES = list(_policies(EMBER))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("fn", sorted(FUNCTIONS))
def test_saved_residuals_match_jax(fn, policy):
    jax = _load("jax")
    f, args = FUNCTIONS[fn](EMBER, _policies(EMBER)[policy])
    jf, _ = FUNCTIONS[fn](jax, _policies(jax)[policy])
    assert _residuals(EMBER, f, *args) == _residuals(jax, jf, *args)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("fn", sorted(FUNCTIONS))
def test_gradients_are_the_plain_functions_and_jaxs(fn, policy):
    jax = _load("jax")
    f, args = FUNCTIONS[fn](EMBER, _policies(EMBER)[policy])
    plain, _ = FUNCTIONS[fn](EMBER, "plain")
    jf, _ = FUNCTIONS[fn](jax, _policies(jax)[policy])
    scalar = (lambda g: lambda *a: g(*a).sum()) if fn == "tutorial" else (lambda g: g)
    argnums = tuple(range(len(args)))
    got = ember.grad(scalar(f), argnums)(*args)
    jitted = ember.jit(ember.grad(scalar(f), argnums))(*args)
    leaves = ember.tree_util.tree_leaves
    for a, b, c in zip(leaves(got), leaves(ember.grad(scalar(plain), argnums)(*args)),
                       jax.top.tree_util.tree_leaves(jax.top.grad(scalar(jf), argnums)(*args))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(a), np.asarray(c), rtol=1e-5, atol=1e-6)
    for a, b in zip(leaves(jitted), leaves(got)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


# --- more structure: nested checkpoints, jit, vmap, static_argnums ----------------------------------------
def _sin2(m):
    return lambda z: m.jnp.sin(m.jnp.sin(z))


STRUCTURES = {
    "nested": lambda m: (lambda x: m.jnp.sin(m.top.checkpoint(_sin2(m))(x)), (np.float32(1.0),)),
    "nested under checkpoint": lambda m: (m.top.checkpoint(lambda x: m.jnp.sin(m.top.checkpoint(_sin2(m))(x))),
                                          (np.float32(1.0),)),
    "nested under everything_saveable": lambda m: (
        m.top.checkpoint(lambda x: m.jnp.sin(m.top.checkpoint(_sin2(m))(x)), policy=m.P.everything_saveable),
        (np.float32(1.0),)),
    "jit inside": lambda m: (m.top.checkpoint(lambda x: m.top.jit(_sin2(m))(x) * 2.0,
                                              policy=m.P.everything_saveable), (np.float32(1.0),)),
    "jit inside, nothing saved": lambda m: (m.top.checkpoint(lambda x: m.top.jit(_sin2(m))(x) * 2.0),
                                            (np.float32(1.0),)),
    "under jit": lambda m: (m.top.jit(m.top.checkpoint(_sin2(m))), (np.float32(1.0),)),
    "under vmap": lambda m: (lambda x: m.top.vmap(m.top.checkpoint(_sin2(m)))(x).sum(),
                             (np.linspace(0, 1, 3, dtype=np.float32),)),
    "vmap inside": lambda m: (m.top.checkpoint(lambda x: m.top.vmap(_sin2(m))(x).sum(),
                                               policy=m.P.everything_saveable),
                              (np.linspace(0, 1, 3, dtype=np.float32),)),
    "static_argnums": lambda m: (lambda x: m.top.checkpoint(
        lambda x, n: functools.reduce(lambda a, _: m.jnp.sin(a), range(n), x), static_argnums=(1,))(x, 3),
        (np.float32(1.0),)),
    "closes over an array": lambda m: (m.top.checkpoint(lambda x: m.jnp.sin(x * np.arange(3.0, dtype=np.float32))
                                                        .sum()), (np.float32(1.0),)),
}


@pytest.mark.parametrize("name", sorted(STRUCTURES))
def test_saved_residuals_and_gradients_of_structured_programs_match_jax(name):
    jax = _load("jax")
    f, args = STRUCTURES[name](EMBER)
    jf, _ = STRUCTURES[name](jax)
    assert _residuals(EMBER, f, *args) == _residuals(jax, jf, *args)
    np.testing.assert_allclose(np.asarray(ember.grad(f)(*args)), np.asarray(jax.top.grad(jf)(*args)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ember.jit(ember.grad(f))(*args)), np.asarray(jax.top.grad(jf)(*args)),
                               rtol=1e-5)


def test_print_saved_residuals_prints_jaxs_lines(capsys):
    f, args = _tutorial(EMBER, ember.checkpoint_policies.dots_saveable)
    eck.print_saved_residuals(f, *args)
    dot = f"{__file__}:{inspect.getsourcelines(_tutorial)[1] + 2}:25 (g)"  # (g's line, where jnp.dot starts)
    assert capsys.readouterr().out.splitlines() == [
        "f32[5,4] from the argument W1", "f32[6,5] from the argument W2", "f32[7,6] from the argument W3",
        "f32[4] from the argument x", f"f32[5] output of dot_general from {dot}",
        f"f32[6] output of dot_general from {dot}", f"f32[7] output of dot_general from {dot}"]
    line = inspect.currentframe().f_lineno + 1
    eck.print_saved_residuals(lambda x: ejnp.sin(x), 1.0)
    assert capsys.readouterr().out == f"f32[] output of cos from {__file__}:{line}:40 (<lambda>)\n"


# --- the backward pass recomputes ------------------------------------------------------------------------
def _count(jaxpr, name: str) -> int:
    """Equations of primitive ``name`` in a program (ember's or JAX's), sub-programs included."""
    n = 0
    for eqn in jaxpr.eqns:
        n += eqn.primitive.name == name
        for v in eqn.params.values():
            for sub in v if isinstance(v, tuple) else (v,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    n += _count(inner, name)
    return n


@pytest.mark.parametrize("policy", ["plain", "default", "everything_saveable", "dots_saveable",
                                    "save_only_these_names"])
def test_the_backward_pass_recomputes_as_jaxs(policy):
    jax = _load("jax")
    f, args = _named(EMBER, _policies(EMBER)[policy])
    jf, _ = _named(jax, _policies(jax)[policy])
    got = ember.make_jaxpr(ember.value_and_grad(f))(*args).jaxpr
    want = jax.top.make_jaxpr(jax.top.value_and_grad(jf))(*args).jaxpr
    assert _count(got, "sin") == _count(want, "sin")
    assert _count(got, "cos") == _count(want, "cos")
    assert _count(got, "remat2") == _count(want, "remat2")


def test_grad_of_checkpoint_recomputes_sin_in_the_backward_pass():
    f = lambda x: ejnp.sin(ejnp.sin(x)).sum()  # noqa: E731
    assert _count(ember.make_jaxpr(ember.value_and_grad(f))(ejnp.ones(3)).jaxpr, "sin") == 2
    assert _count(ember.make_jaxpr(ember.value_and_grad(ember.checkpoint(f)))(ejnp.ones(3)).jaxpr, "sin") == 3


@pytest.mark.parametrize("prevent_cse, sins", [(True, 3), (False, 2)])
def test_prevent_cse_keeps_the_recomputation_in_compiled_code(prevent_cse, sins):
    f = ember.checkpoint(lambda x: ejnp.sin(ejnp.sin(x)).sum(), prevent_cse=prevent_cse)
    closed = ember.make_jaxpr(ember.value_and_grad(f))(ejnp.ones(3))
    compiled = optimize(closed)
    assert [e.primitive.name for e in compiled.jaxpr.eqns].count("sin") == sins
    assert "remat2" not in str(compiled) and "optimization_barrier" not in str(compiled)  # (gone after CSE)
    kept = optimize(closed, disabled=("barriers",))
    assert ("optimization_barrier" in str(kept)) is prevent_cse
    x = np.linspace(-1, 1, 3, dtype=np.float32)
    value, grad = ember.jit(ember.value_and_grad(f))(x)
    np.testing.assert_allclose(np.asarray(value), np.sin(np.sin(x)).sum(), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(grad), np.cos(np.sin(x)) * np.cos(x), rtol=1e-6)


def test_names_are_dropped_from_compiled_code():
    f = lambda x: eck.checkpoint_name(ejnp.sin(x), "h") * 2.0  # noqa: E731
    assert "name[name=h]" in str(ember.make_jaxpr(f)(1.0))
    assert "name" not in [e.primitive.name for e in optimize(ember.make_jaxpr(f)(1.0)).jaxpr.eqns]
    np.testing.assert_allclose(np.asarray(ember.jit(f)(0.5)), 2 * np.sin(np.float32(0.5)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.vmap(f)(ejnp.ones(2))), 2 * np.sin(np.ones(2, np.float32)),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.grad(f)(0.5)), 2 * np.cos(np.float32(0.5)), rtol=1e-6)


# --- more transformations -----------------------------------------------------------------------------
def test_higher_order_derivatives_linearize_and_jvp():
    f = ember.checkpoint(lambda x: ejnp.sin(ejnp.sin(x)))
    g = lambda x: ejnp.sin(ejnp.sin(x))  # noqa: E731
    for x in (0.3, 1.2):
        np.testing.assert_allclose(np.asarray(ember.grad(ember.grad(f))(x)), np.asarray(ember.grad(ember.grad(g))(x)),
                                   rtol=1e-5)
        y, lin = ember.linearize(f, x)
        np.testing.assert_allclose(np.asarray(lin(1.0)), np.asarray(ember.jvp(g, (x,), (1.0,))[1]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.jacfwd(ember.jacrev(f))(0.7)), np.asarray(ember.hessian(g)(0.7)),
                               rtol=1e-5)


def test_checkpoint_with_control_flow_inside_and_outside():
    def body(c, x):
        return ejnp.sin(c) * x, ejnp.cos(c)

    def inner(c, xs):
        return ember.lax.scan(body, c, xs)[0]

    xs = np.linspace(0.1, 1, 4).astype(np.float32)
    for policy in (None, ember.checkpoint_policies.everything_saveable):
        f = ember.checkpoint(inner, policy=policy)
        np.testing.assert_allclose(np.asarray(ember.grad(f, (0, 1))(0.5, xs)[1]),
                                   np.asarray(ember.grad(inner, (0, 1))(0.5, xs)[1]), rtol=1e-5)
    step = ember.checkpoint(lambda c, x: (ejnp.sin(c) * x, None))
    outer = lambda c: ember.lax.scan(step, c, xs)[0]  # noqa: E731
    plain = lambda c: ember.lax.scan(lambda c, x: (ejnp.sin(c) * x, None), c, xs)[0]  # noqa: E731
    np.testing.assert_allclose(np.asarray(ember.grad(outer)(0.5)), np.asarray(ember.grad(plain)(0.5)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ember.jit(ember.grad(outer))(0.5)), np.asarray(ember.grad(plain)(0.5)),
                               rtol=1e-5)


def test_prevent_cse_per_argument_and_offload_policies():
    f = lambda x, y: ejnp.sin(x * y).sum()  # noqa: E731
    x, y = np.ones(3, np.float32), np.arange(3.0, dtype=np.float32)
    want = ember.grad(f, (0, 1))(x, y)
    P = ember.checkpoint_policies
    for cp in (ember.checkpoint(f, prevent_cse=(True, False)),
               ember.checkpoint(f, policy=P.offload_dot_with_no_batch_dims("device", "pinned_host")),
               ember.checkpoint(f, policy=P.save_and_offload_only_these_names(
                   names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"], offload_src="device",
                   offload_dst="pinned_host"))):
        for a, b in zip(ember.jit(ember.grad(cp, (0, 1)))(x, y), want):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)
    with pytest.raises(ValueError, match="should not intersect"):
        P.save_and_offload_only_these_names(names_which_can_be_saved=["a"], names_which_can_be_offloaded=["a"],
                                            offload_src="device", offload_dst="pinned_host")
    with pytest.raises(ValueError, match="should be a boolean"):
        ember.grad(ember.checkpoint(f, policy=P.save_from_both_policies(
            P.offload_dot_with_no_batch_dims("device", "pinned_host"), P.nothing_saveable)))(x, y)


# --- printed as JAX prints them ---------------------------------------------------------------------------
PRINTED = {
    "checkpoint": lambda m: (m.top.checkpoint(_sin2(m)), (np.float32(1.0),)),
    "checkpoint with a dataclass policy": lambda m: (m.top.checkpoint(_sin2(m), policy=m.P.dots_saveable),
                                                     (np.float32(1.0),)),
    "checkpoint with a function policy": lambda m: (m.top.checkpoint(_sin2(m), policy=m.P.everything_saveable,
                                                                     prevent_cse=False), (np.float32(1.0),)),
    "grad of checkpoint": lambda m: (m.top.grad(m.top.checkpoint(_sin2(m))), (np.float32(1.0),)),
    "jvp of checkpoint": lambda m: (lambda x: m.top.jvp(m.top.checkpoint(_sin2(m)), (x,), (x,)), (np.float32(1.0),)),
    "vmap of checkpoint": lambda m: (m.top.vmap(m.top.checkpoint(_sin2(m))), (np.ones(3, np.float32),)),
    "checkpoint_name": lambda m: (lambda x: m.jnp.sin(m.checkpoint_name(m.jnp.sin(x), "a")), (np.float32(1.0),)),
}


@pytest.mark.parametrize("name", sorted(PRINTED))
def test_programs_print_as_jax_prints_them(name):
    jax = _load("jax")
    f, args = PRINTED[name](EMBER)
    jf, _ = PRINTED[name](jax)
    assert str(ember.make_jaxpr(f)(*args)) == str(jax.top.make_jaxpr(jf)(*args))


# --- jax.ad_checkpoint under the compat switch ------------------------------------------------------------
def test_jax_ad_checkpoint_under_the_compat_switch():
    code = """
import ember
ember.install_as_jax()
import jax
from ember.transforms import checkpoint as eck
assert jax.ad_checkpoint.checkpoint_name is eck.checkpoint_name
import jax.ad_checkpoint
from jax.ad_checkpoint import checkpoint_name, checkpoint_policies, print_saved_residuals, Recompute, Saveable
assert checkpoint_policies is jax.checkpoint_policies
assert jax.ad_checkpoint.saved_residuals is eck.saved_residuals
try:
    jax.ad_checkpoint.checkpoint
except AttributeError as e:
    assert "use jax.checkpoint instead" in str(e)
else:
    raise AssertionError("jax.ad_checkpoint.checkpoint exists")
print_saved_residuals(jax.checkpoint(lambda x: jax.numpy.sin(checkpoint_name(x * 2, "y")),
                                     policy=checkpoint_policies.save_only_these_names("y")), 1.0)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["f32[] named 'y' from <string>:17:61 (<lambda>)"]


# --- effects in the recomputed part ------------------------------------------------------------------
EFFECT_CASES = {
    "grad": lambda m, f, p: m.top.grad(lambda x: m.top.checkpoint(f, policy=p)(x))(1.0),
    "vjp": lambda m, f, p: m.top.vjp(m.top.checkpoint(f, policy=p), 1.0)[1](1.0),
    "vjp forward only": lambda m, f, p: m.top.vjp(m.top.checkpoint(f, policy=p), 1.0),
    "jit of grad": lambda m, f, p: m.top.jit(m.top.grad(lambda x: m.top.checkpoint(f, policy=p)(x)))(1.0),
    "linearize": lambda m, f, p: m.top.linearize(m.top.checkpoint(f, policy=p), 1.0)[1](1.0),
    "jvp": lambda m, f, p: m.top.jvp(m.top.checkpoint(f, policy=p), (1.0,), (1.0,)),
    "nested": lambda m, f, p: m.top.grad(lambda x: m.top.checkpoint(lambda y: m.top.checkpoint(f)(y) * 2)(x))(1.0),
}


@pytest.mark.parametrize("policy", [None, "everything_saveable", "dots_saveable"])
@pytest.mark.parametrize("operand", [False, True], ids=["no operand", "an operand"])
@pytest.mark.parametrize("case", list(EFFECT_CASES), ids=str)
def test_debug_callbacks_run_again_with_the_recomputation_as_in_jax(case, operand, policy):
    # JAX stages a debug callback into the recomputed part too (unless the policy saves its operand).
    counts = []
    for m in (EMBER, _load("jax")):
        calls = []

        def g(x, m=m, calls=calls):
            if operand:
                m.top.debug.callback(lambda v: calls.append(1), m.jnp.cos(x))
            else:
                m.top.debug.callback(lambda: calls.append(1))
            return m.jnp.sin(m.jnp.sin(x))

        EFFECT_CASES[case](m, g, None if policy is None else getattr(m.P, policy))
        counts.append(len(calls))
    assert counts[0] == counts[1]


LOOP_CASES = {
    "scan": lambda m, f: lambda c: m.lax.scan(lambda c, x: (f(c) * x, None), c, m.jnp.arange(1.0, 4.0))[0],
    "fori_loop": lambda m, f: lambda c: m.lax.fori_loop(0, 3, lambda i, c: f(c), c),
    "cond": lambda m, f: lambda c: m.lax.cond(c > 0, f, m.jnp.cos, c),
}


@pytest.mark.parametrize("policy", [None, "everything_saveable"])
@pytest.mark.parametrize("case", list(LOOP_CASES))
def test_debug_callbacks_in_control_flow_run_again_with_the_recomputation_as_in_jax(case, policy):
    # A loop (or cond) that calls back is recomputed with its callbacks, as JAX recomputes it.
    counts = []
    for m in (EMBER, _load("jax")):
        calls = []

        def f(c, m=m, calls=calls):
            m.top.debug.callback(lambda v: calls.append(1), c)
            return m.jnp.sin(c) * 2

        fun = m.top.checkpoint(LOOP_CASES[case](m, f), policy=None if policy is None else getattr(m.P, policy))
        for transform in (m.top.grad, lambda g: m.top.jit(m.top.grad(g))):
            transform(fun)(1.0)
        if m is not EMBER:  # (ember runs callbacks as they come)
            m.top.effects_barrier()
        counts.append(len(calls))
    assert counts[0] == counts[1]


def test_the_recomputed_part_holds_the_debug_callback():
    def g(x):
        ember.debug.callback(lambda v: None, ejnp.cos(x))
        return ejnp.sin(ejnp.sin(x))

    text = str(ember.make_jaxpr(ember.grad(lambda x: ember.checkpoint(g)(x)))(1.0))
    body = text[text.index("remat2["):]
    assert text.count("debug_callback[") == 2 and "debug_callback[" in body


@pytest.mark.parametrize("ordered,effect", [(False, "IOEffect"), (True, "OrderedIOEffect")])
def test_io_callbacks_cannot_be_recomputed(ordered, effect):
    for m in (EMBER, _load("jax")):
        io_callback = ember.io_callback if m is EMBER else __import__("jax.experimental", fromlist=["x"]).io_callback

        def g(x, m=m, io_callback=io_callback):
            io_callback(lambda: None, None, ordered=ordered)
            return m.jnp.sin(x)

        with pytest.raises(NotImplementedError, match=r"Effects not supported in partial-eval of "
                                                      r"`checkpoint`/`remat`: \[.*" + effect):
            m.top.grad(m.top.checkpoint(g))(1.0)
        m.top.jvp(m.top.checkpoint(g), (1.0,), (1.0,))  # (forward mode recomputes nothing)
