"""Buffer donation: ``jit(f, donate_argnums=..., donate_argnames=...)`` reuses donated inputs'
buffers for outputs where that is safe, and deletes the donated Arrays."""
import functools
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.util import assert_allclose

_ENV = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent) + os.pathsep
            + os.environ.get("PYTHONPATH", ""))


@pytest.fixture(autouse=True)
def native_backend():
    """Buffer reuse is the native backend's (the reference interpreter ignores donation)."""
    with ember.config.override(backend="cpu"):
        yield


def address(a) -> int:
    return np.asarray(a).__array_interface__["data"][0]


def fresh(values) -> ember.Array:
    """An Array that owns its buffer alone (as the results of computations do)."""
    return jnp.asarray(np.asarray(values, np.float32))


def quietly(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return f(*args, **kwargs)


def test_output_reuses_the_donated_buffer_and_values_match_eager():
    f = ember.jit(lambda x, y: jnp.sin(x) * 2 + y, donate_argnums=0)
    x_np = np.linspace(-3, 3, 50).astype(np.float32)
    x, y = fresh(x_np), fresh(np.ones(50))
    before = address(x)
    out = f(x, y)
    assert address(out) == before
    assert_allclose(out, np.sin(x_np) * 2 + 1, rtol=1e-6)
    assert out.dtype == jnp.float32 and out.shape == (50,)
    assert x.is_deleted() and not y.is_deleted() and not out.is_deleted()
    assert not np.asarray(out).flags.writeable


@pytest.mark.parametrize("use", [
    lambda x: x + 1, lambda x: np.asarray(x), repr, str, lambda x: x.sum(), lambda x: ember.jit(jnp.cos)(x),
    lambda x: float(x[0]), lambda x: ember.jit(lambda a: a * 2, donate_argnums=0)(x)])
def test_a_donated_array_is_deleted(use):
    f = ember.jit(lambda x: x * 3, donate_argnums=0)
    x = fresh([1.0, 2.0, 3.0])
    f(x)
    assert x.is_deleted() and x.shape == (3,) and x.dtype == jnp.float32
    with pytest.raises(RuntimeError, match=r"Array has been deleted with shape=float32\[3\]\..*donated to `<lambda>`"):
        use(x)


def test_a_donation_that_cannot_be_used_warns_and_keeps_the_array_as_jax():
    jax = pytest.importorskip("jax")
    f = ember.jit(lambda x: jnp.sum(x), donate_argnums=0)
    x = fresh([1.0, 2.0, 3.0])
    with pytest.warns(UserWarning, match=r"Some donated buffers were not usable: float32\[3\]"):
        assert float(f(x)) == 6.0
    theirs = jax.numpy.array([1.0, 2.0, 3.0])
    with pytest.warns(UserWarning, match=r"Some donated buffers were not usable: float32\[3\]"):
        jax.jit(lambda x: x.sum(), donate_argnums=0)(theirs)
    assert x.is_deleted() == theirs.is_deleted() is False
    assert x.tolist() == [1.0, 2.0, 3.0]  # (still usable)
    y = fresh([1.0, 2.0, 3.0])
    ember.jit(lambda x: x + 1, donate_argnums=0)(y)  # a usable donation deletes, as in JAX
    assert y.is_deleted()


def test_shapes_or_dtypes_that_differ_are_not_aliased():
    x = fresh(np.arange(6))
    before = address(x)
    with pytest.warns(UserWarning, match="not usable"):
        out = ember.jit(lambda x: x.reshape(2, 3)[:, :2] * 2, donate_argnums=0)(x)
    assert out.shape == (2, 2) and address(out) != before and not x.is_deleted()
    y = fresh(np.arange(4))  # (an output of as many elements and bytes takes it: deleted, as in JAX)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = ember.jit(lambda y: y.astype(jnp.int32), donate_argnums=0)(y)
    assert out.tolist() == [0, 1, 2, 3] and out.dtype == jnp.int32 and y.is_deleted()


class _Model:
    def __init__(self) -> None:
        self.k = 2.0

    def step(self, x, y):
        return x * self.k + y


# (function of (numpy module, *args), jit's keywords, argument shapes and dtypes, positional arguments)
_DELETIONS = {
    "an output of its type": (lambda m, x, y: x + y, {"donate_argnums": 0}, [(3,), (3,)]),
    "no output of its type (a sum)": (lambda m, x, y: m.sum(x + y), {"donate_argnums": 0}, [(3,), (3,)]),
    "an output of another shape": (lambda m, x, y: y * 2, {"donate_argnums": 0}, [(3,), (4,)]),
    "as many elements and bytes": (lambda m, x: x.astype(m.float32), {"donate_argnums": 0}, [((3,), "int32")]),
    "as many elements, fewer bytes": (lambda m, x: x.astype(m.float16), {"donate_argnums": 0}, [(4,)]),
    "another shape of as many elements": (lambda m, x: x.reshape(3, 2) * 2, {"donate_argnums": 0}, [(2, 3)]),
    "unused": (lambda m, x: m.zeros(3), {"donate_argnums": 0}, [(3,)]),
    "read only by dead code": (lambda m, x: (x * 2, m.zeros(3))[1], {"donate_argnums": 0}, [(3,)]),
    "returned as it is": (lambda m, x: x, {"donate_argnums": 0}, [(3,)]),
    "read after the output is written": (lambda m, x: m.flip(x), {"donate_argnums": 0}, [(3,)]),
    "two donated, one output": (lambda m, x, y: x + y, {"donate_argnums": (0, 1)}, [(3,), (3,)]),
    "two donated, the second's output": (lambda m, x, y: y * 2, {"donate_argnums": (0, 1)}, [(3,), (3,)]),
    "donate_argnames": (lambda m, x, y: x + y, {"donate_argnames": "y"}, [(3,), (3,)]),
    "a pytree, every leaf taken": (lambda m, t: {"p": t["p"] * 2, "q": t["q"] + 1}, {"donate_argnums": 0},
                                   [{"p": (3,), "q": (2,)}]),
    "a pytree, one leaf taken": (lambda m, t: t["p"] * 2, {"donate_argnums": 0}, [{"p": (3,), "q": (2,)}]),
    "a bound method, donate_argnums": (lambda m, x, y: _Model().step, {"donate_argnums": 1}, [(3,), (3,)]),
    "a bound method, donate_argnames": (lambda m, x, y: _Model().step, {"donate_argnames": "y"}, [(3,), (3,)]),
}


def _donated_arguments(m, specs):
    def leaf(spec):
        shape, dtype = spec if isinstance(spec[0], tuple) else (spec, "float32")
        return m.ones(shape, dtype)
    return [{k: leaf(v) for k, v in s.items()} if isinstance(s, dict) else leaf(s) for s in specs]


@pytest.mark.parametrize("case", list(_DELETIONS))
def test_donated_arguments_are_deleted_exactly_where_jax_deletes_them_on_the_cpu(case):
    """JAX's CPU backend deletes a donated argument that an output of its type takes (then one of
    as many elements and bytes), whether or not the buffer is reused; an unused argument is not the
    program's (keep_unused=False), so nothing takes it."""
    jax = pytest.importorskip("jax")
    fun, options, specs = _DELETIONS[case]

    def deleted(lib, m):
        args = _donated_arguments(m, specs)
        f = fun(m, *args) if "bound method" in case else functools.partial(fun, m)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            lib.jit(f, **options)(*args)
        return [leaf.is_deleted() for leaf in lib.tree_util.tree_leaves(args)]

    assert deleted(ember, jnp) == deleted(jax, jax.numpy)


# equinox's filter_jit: (function, donate, arguments), as source of m (the numpy module)
_FILTERED = {
    "all": "lambda x, y: x + y, 'all', (m.ones(3), m.ones(3))",
    "all-except-first": "lambda x, y: x + y, 'all-except-first', (m.ones(3), m.ones(3))",
    "all, a tuple": "lambda t: (t[0] + t[1], t[1] * 2), 'all', ((m.ones(3), m.ones(3)),)",
    "all, a Python scalar beside": "lambda x, k: x * k, 'all', (m.ones(3), 3)",
}
_FILTERED_RUN = """
import warnings, equinox as eqx, jax, jax.numpy as m
fun, donate, args = {case}
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    eqx.filter_jit(fun, donate=donate)(*args)
print([x.is_deleted() for x in jax.tree_util.tree_leaves(args) if hasattr(x, "is_deleted")])
"""


@pytest.mark.parametrize("case", list(_FILTERED))
def test_equinox_filter_jit_donation_deletes_where_jax_does(case):
    """equinox, a client library, donates through its own filtered jit (under install_as_jax,
    in a process of its own, beside JAX's in another)."""
    pytest.importorskip("jax")
    pytest.importorskip("equinox")
    code = _FILTERED_RUN.format(case=_FILTERED[case])
    runs = [subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, env=_ENV,
                           timeout=600) for prelude in ("", "import ember\nember.install_as_jax()\n")]
    for run in runs:
        assert run.returncode == 0, run.stderr[-2000:]
    theirs, ours = (run.stdout.strip().splitlines()[-1] for run in runs)
    assert ours == theirs


_SHARED_ARRAY_CALLS = {  # (function of (numpy module, *args), donate_argnums, the arguments that are one array)
    "donated, then passed": (lambda m, x, y: x * 2 + y, (0,), (0, 1)),
    "passed, then donated": (lambda m, x, y: x * 2 + y, (1,), (0, 1)),
    "donated twice, one output": (lambda m, x, y: x * 2 + y, (0, 1), (0, 1)),
    "donated twice, two outputs": (lambda m, x, y: (x * 2, y + 1), (0, 1), (0, 1)),
    "donated, a third use": (lambda m, x, z, y: x + y * z, (0,), (0, 2)),
    "donation not usable": (lambda m, x, y: m.sum(x + y), (0,), (0, 1)),
    "other array donated": (lambda m, x, z, y: (x + y, z * 2), (1,), (0, 2)),
}


@pytest.mark.parametrize("case", list(_SHARED_ARRAY_CALLS))
def test_an_array_both_donated_and_passed_again_is_refused_as_jax_does(case):
    """JAX's runtime refuses a call in which a buffer it may overwrite is also read (nothing runs
    and nothing is deleted); ember ran it. A donation the program cannot use is dropped, so the
    call runs (with the warning)."""
    import jax

    fun, donate, shared = _SHARED_ARRAY_CALLS[case]
    n = fun.__code__.co_argcount - 1

    def run(lib, m):
        one = m.asarray(np.arange(3, dtype=np.float32))
        args = [one if i in shared else m.asarray(np.full(3, i, np.float32)) for i in range(n)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            try:
                return lib.jit(functools.partial(fun, m), donate_argnums=donate)(*args), one
            except Exception as refusal:
                return refusal, one

    ours, our_array = run(ember, jnp)
    theirs, their_array = run(jax, jax.numpy)
    assert our_array.is_deleted() == their_array.is_deleted()
    if isinstance(theirs, Exception):
        assert isinstance(ours, ember.errors.JaxRuntimeError) and isinstance(ours, RuntimeError), ours
        jax_words = str(theirs).split(". Toy example")[0]  # (XLA's text, flat positions and the first use)
        assert str(ours).startswith(jax_words), (str(ours), str(theirs))
        assert our_array.tolist() == [0.0, 1.0, 2.0]
    else:
        assert not isinstance(ours, Exception), ours
        for a, b in zip(ember.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
            assert_allclose(a, np.asarray(b))


@pytest.mark.parametrize("other_holder", ["view", "numpy", "second_array"])
def test_a_buffer_that_something_else_sees_is_not_overwritten(other_holder):
    x = fresh([1.0, 2.0, 3.0])
    holder = {"view": lambda: ember.jit(lambda a: a.reshape(3, 1))(x), "numpy": lambda: np.asarray(x),
              "second_array": lambda: ember.jit(lambda a: a)(x)}[other_holder]()
    out = ember.jit(lambda a: a + 10, donate_argnums=0)(x)
    assert out.tolist() == [11.0, 12.0, 13.0]
    assert np.asarray(holder).ravel().tolist() == [1.0, 2.0, 3.0]


def test_outputs_computed_in_place_only_where_elements_are_read_at_their_own_index():
    x_np = np.arange(16, dtype=np.float32)
    rev = ember.jit(lambda x: x[::-1] + 1, donate_argnums=0)
    assert quietly(rev, fresh(x_np)).tolist() == (x_np[::-1] + 1).tolist()
    roll = ember.jit(lambda x: jnp.roll(x, 3) * x, donate_argnums=0)
    assert quietly(roll, fresh(x_np)).tolist() == (np.roll(x_np, 3) * x_np).tolist()
    m_np = np.arange(16, dtype=np.float32).reshape(4, 4)
    mat = ember.jit(lambda m: m @ m + 1, donate_argnums=0)
    assert_allclose(quietly(mat, fresh(m_np)), m_np @ m_np + 1)
    transpose = ember.jit(lambda m: m.T - m, donate_argnums=0)
    assert quietly(transpose, fresh(m_np)).tolist() == (m_np.T - m_np).tolist()


def test_static_arguments_cannot_be_donated():
    with pytest.raises(ValueError, match="argument 'n' is both static and donated"):
        ember.jit(lambda x, n: x * n, static_argnums=1, donate_argnums=1)
    with pytest.raises(ValueError, match="argument 'n' is both static and donated"):
        ember.jit(lambda x, n: x * n, static_argnames="n", donate_argnums=1)
    with pytest.raises(ValueError, match="donate_argnames names 'z'"):
        ember.jit(lambda x, n: x * n, donate_argnames="z")


def test_donate_argnames_positionally_or_by_keyword():
    f = ember.jit(lambda x, y: x - y, donate_argnames="y")
    for call in (lambda x, y: f(x, y), lambda x, y: f(x, y=y), lambda x, y: f(y=y, x=x)):
        x, y = fresh([5.0, 6.0]), fresh([1.0, 2.0])
        before = address(y)
        out = call(x, y)
        assert out.tolist() == [4.0, 4.0] and address(out) == before
        assert y.is_deleted() and not x.is_deleted()


def test_a_donated_pytree_donates_all_its_leaves():
    f = ember.jit(lambda state, g: {"w": state["w"] - g, "b": state["b"] + g}, donate_argnums=0)
    state = {"w": fresh([1.0, 2.0]), "b": fresh([0.0, 0.0])}
    before = {k: address(v) for k, v in state.items()}
    g = fresh([0.5, 0.5])
    out = f(state, g)
    assert out["w"].tolist() == [0.5, 1.5] and out["b"].tolist() == [0.5, 0.5]
    assert {k: address(v) for k, v in out.items()} == before
    assert all(v.is_deleted() for v in state.values()) and not g.is_deleted()


def test_training_loop_reuses_the_parameter_buffers():
    def step(params, x):
        w, b = params
        pred = jnp.tanh(x @ w + b)
        grad_w, grad_b = ember.grad(lambda wb: jnp.sum((jnp.tanh(x @ wb[0] + wb[1]) - 1.0) ** 2))((w, b))
        return w - 0.1 * grad_w, b - 0.1 * grad_b + 0 * pred.mean()

    rng = np.random.default_rng(0)
    w_np, x_np = rng.normal(size=(3, 3)).astype(np.float32) * 0.1, rng.normal(size=(5, 3)).astype(np.float32)
    donating = ember.jit(step, donate_argnums=0)
    params = (fresh(w_np), fresh(np.zeros(3)))
    reference = (jnp.asarray(w_np), jnp.zeros(3))
    before = [address(p) for p in params]
    x = jnp.asarray(x_np)
    for _ in range(50):
        params = quietly(donating, params, x)
        reference = ember.jit(step)(reference, x)
    for p, r in zip(params, reference):
        assert_allclose(p, r, rtol=1e-5, atol=1e-6)
    assert [address(p) for p in params] == before


def test_donation_is_ignored_inside_an_outer_trace():
    inner = ember.jit(lambda x: x + 1, donate_argnums=0)
    outer = ember.jit(lambda x: inner(x) * 2 + x)
    x = fresh([1.0, 2.0])
    assert outer(x).tolist() == [5.0, 8.0]
    assert not x.is_deleted() and x.tolist() == [1.0, 2.0]
    assert ember.grad(lambda x: inner(x).sum())(x).tolist() == [1.0, 1.0]
    assert not x.is_deleted()


def test_non_array_arguments_are_left_alone():
    f = ember.jit(lambda x: x * 2, donate_argnums=0)
    x_np = np.ones(3, np.float32)
    assert quietly(f, x_np).tolist() == [2.0, 2.0, 2.0]
    assert x_np.tolist() == [1.0, 1.0, 1.0]


def test_jit_without_donation_keeps_its_own_executable():
    def f(x):
        return x + 1

    x = fresh([1.0])
    assert ember.jit(f)(x).tolist() == [2.0] and not x.is_deleted()
    assert ember.jit(f, donate_argnums=0)(x).tolist() == [2.0] and x.is_deleted()
    y = fresh([1.0])
    assert ember.jit(f)(y).tolist() == [2.0] and not y.is_deleted()


def test_reference_backend_ignores_donation_but_deletes():
    with ember.config.override(backend="reference"):
        f = ember.jit(lambda x: x * 2, donate_argnums=0)
        x = fresh([1.0, 2.0])
        assert f(x).tolist() == [2.0, 4.0]
        assert x.is_deleted()


def test_array_delete():
    x = fresh([1.0])
    x.delete()
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match=r"deleted with shape=float32\[1\]"):
        np.asarray(x)


def test_ahead_of_time_compiled_functions_donate_as_jit_calls_do():
    f = ember.jit(lambda x, y: jnp.sin(x) * 2 + y, donate_argnums=0)
    x_np = np.linspace(-3, 3, 50).astype(np.float32)
    compiled = f.lower(fresh(x_np), fresh(np.ones(50))).compile()
    x, y = fresh(x_np), fresh(np.ones(50))
    before = address(x)
    out = compiled(x, y)
    assert address(out) == before
    assert_allclose(out, np.sin(x_np) * 2 + 1, rtol=1e-6)
    assert x.is_deleted() and not y.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        compiled(x, y)


def test_ahead_of_time_compile_warns_of_an_unusable_donation():
    f = ember.jit(lambda x: jnp.sum(x), donate_argnums=0)
    with pytest.warns(UserWarning, match=r"Some donated buffers were not usable: float32\[3\]") as caught:
        compiled = f.lower(fresh([1, 2, 3])).compile()
    assert caught[0].filename == __file__
    x = fresh([1, 2, 3])
    assert compiled(x).tolist() == 6.0 and not x.is_deleted()  # (an unusable donation keeps it, as in JAX)


_USES_OF_A_DELETED_ARRAY = {
    "a compiled jitted call": lambda lib, x: lib.jit(lambda a: a * 2)(x),
    "the donating function again": lambda lib, x: lib.jit(lambda a: a + 1, donate_argnums=0)(x),
    "an eager operation": lambda lib, x: x + 1,
    "np.asarray": lambda lib, x: np.asarray(x),
    "str": lambda lib, x: str(x),
}


@pytest.mark.parametrize("use", list(_USES_OF_A_DELETED_ARRAY))
def test_a_donated_array_used_again_raises_what_jax_raises(use):
    """JAX raises a RuntimeError ("Array has been deleted ...") for most uses of a donated array
    but a ValueError where a jitted call's compiled fast path meets it; ember raised RuntimeError
    everywhere. Its error is both, so an ``except`` written for either JAX error catches it."""
    import jax

    def deleted(lib, m):
        fun = lib.jit(lambda a: a + 1, donate_argnums=0)
        warm = lib.jit(lambda a: a * 2)
        for _ in range(2):  # (each compiled and called twice: JAX's fast path is in place)
            fun(m.ones(3)), warm(m.ones(3))
        x = m.ones(3)
        fun(x)
        assert x.is_deleted()
        return x

    with pytest.raises(Exception) as theirs:
        _USES_OF_A_DELETED_ARRAY[use](jax, deleted(jax, jax.numpy))
    with pytest.raises(type(theirs.value)) as ours:
        _USES_OF_A_DELETED_ARRAY[use](ember, deleted(ember, jnp))
    assert isinstance(ours.value, ValueError) and isinstance(ours.value, RuntimeError)
    assert re.search(r"deleted", str(theirs.value)) and re.search(
        r"Array has been deleted with shape=float32\[3\]\. It was donated to `<lambda>`", str(ours.value))
