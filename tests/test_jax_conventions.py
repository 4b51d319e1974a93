"""Behaviours where ember follows a JAX convention that libraries' own tests rely on, each
compared with JAX 0.10.2 itself: reduce_window's init values, what jvp returns for Python scalars,
the attributes of transformed functions, exceptions raised inside callbacks, how often a custom
rule is traced, the legacy cond signature, fori_loop's bounds and deep static recursion."""
from __future__ import annotations

import re

import jax
import jax.numpy as jax_jnp
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax


# --- reduce_window with any init value JAX takes ----------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.uint8])
@pytest.mark.parametrize("name,init", [("max", -np.inf), ("max", 3), ("min", np.inf), ("min", 2), ("add", 1),
                                       ("add", 0), ("max", -2.5)])
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_reduce_window_init_values_as_jax(dtype, name, init, padding) -> None:
    x = np.arange(12).reshape(3, 4).astype(dtype)
    try:
        theirs = jax.lax.reduce_window(jax_jnp.asarray(x), init, getattr(jax.lax, name), (2, 2), (1, 1), padding)
    except TypeError as refusal:  # an init value of another dtype that is not the identity
        with pytest.raises(TypeError, match=re.escape(str(refusal).split(".")[0])):
            lax.reduce_window(x, init, getattr(lax, name), (2, 2), (1, 1), padding)
        return
    ours = lax.reduce_window(x, init, getattr(lax, name), (2, 2), (1, 1), padding)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_reduce_window_takes_a_traced_init_value() -> None:
    x = np.arange(6.0, dtype=np.float32)
    f = lambda x, init: lax.reduce_window(x, init, lax.max, (2,), (1,), "SAME")  # noqa: E731
    np.testing.assert_array_equal(ember.jit(f)(x, 2.0), jax.jit(lambda x, i: jax.lax.reduce_window(
        x, i, jax.lax.max, (2,), (1,), "SAME"))(x, 2.0))


# --- transformed functions carry the wrapped function's identity, as functools.wraps gives it -------
def _documented(x, y=1):
    """The function's own docstring."""
    return x * y


_documented.marker = "kept"


@pytest.mark.parametrize("name", ["jit", "vmap", "grad", "value_and_grad", "jacfwd", "jacrev", "checkpoint",
                                  "custom_jvp", "custom_vjp"])
def test_transformations_wrap_the_function_as_jax(name) -> None:
    ours, theirs = getattr(ember, name)(_documented), getattr(jax, name)(_documented)
    for attribute in ("__name__", "__qualname__", "__module__", "marker"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    assert ours.__wrapped__ is theirs.__wrapped__ is _documented
    if name not in ("vmap", "grad", "value_and_grad", "jacfwd", "jacrev"):  # (JAX writes its own docstring there)
        assert ours.__doc__ == theirs.__doc__


def test_jit_of_jit_keeps_its_own_state() -> None:
    inner = ember.jit(_documented)
    outer = ember.jit(inner, static_argnums=1)
    assert outer.__wrapped__ is inner and outer._cache is not inner._cache
    assert int(outer(3, 2)) == 6 and outer.marker == "kept"


# --- an exception inside a callback ------------------------------------------------------------------
def _failing(x):
    raise ValueError("boom in the callback")


def _callback_calls(api):
    struct = api.ShapeDtypeStruct((), np.float32)
    io_callback = api.experimental.io_callback if api is jax else api.io_callback
    return {
        "pure_callback": lambda: api.pure_callback(_failing, struct, np.float32(1.0)),
        "pure_callback under jit": lambda: api.jit(lambda x: api.pure_callback(_failing, struct, x))(1.0),
        "io_callback": lambda: io_callback(_failing, struct, np.float32(1.0)),
        "io_callback under jit": lambda: api.jit(lambda x: io_callback(_failing, struct, x))(1.0),
        "debug.callback": lambda: api.debug.callback(_failing, np.float32(1.0)),
        "debug.callback under jit": lambda: api.block_until_ready(
            api.jit(lambda x: (api.debug.callback(_failing, x), x)[1])(1.0)),
    }


@pytest.mark.parametrize("how", list(_callback_calls(jax)))
def test_an_exception_in_a_callback_surfaces_as_in_jax(how, capsys) -> None:
    with pytest.raises(Exception) as theirs:
        _callback_calls(jax)[how]()
    with pytest.raises(Exception, match="boom in the callback") as ours:
        _callback_calls(ember)[how]()
    expected = ember.errors.JaxRuntimeError if isinstance(theirs.value, jax.errors.JaxRuntimeError) else ValueError
    assert type(ours.value) is expected and isinstance(ours.value, RuntimeError) == (expected is not ValueError)
    if expected is not ValueError:
        assert str(ours.value).startswith("INTERNAL: CpuCallback error calling callback: Traceback")
        assert isinstance(ours.value.__cause__, ValueError)


# --- custom_vjp: the rules are traced as often as JAX traces them -----------------------------------
def _counted_custom_vjp(api, np_module):
    counts = {"f": 0, "fwd": 0, "bwd": 0}

    @api.custom_vjp
    def f(x):
        counts["f"] += 1
        return np_module.sin(x)

    def fwd(x):
        counts["fwd"] += 1
        return np_module.sin(x), x

    def bwd(x, g):
        counts["bwd"] += 1
        return (g * np_module.cos(x),)

    f.defvjp(fwd, bwd)
    return f, counts


@pytest.mark.parametrize("how", ["grad", "jit(grad)", "grad(jit)", "vmap(grad)", "grad(vmap)", "vjp",
                                 "value_and_grad twice", "jit(grad) twice"])
def test_custom_vjp_rules_are_traced_as_often_as_in_jax(how) -> None:
    def run(api, np_module):
        f, counts = _counted_custom_vjp(api, np_module)
        ones = np.ones(3, np.float32)
        calls = {
            "grad": lambda: api.grad(f)(1.0),
            "jit(grad)": lambda: api.jit(api.grad(f))(1.0),
            "grad(jit)": lambda: api.grad(api.jit(f))(1.0),
            "vmap(grad)": lambda: api.vmap(api.grad(f))(ones),
            "grad(vmap)": lambda: api.grad(lambda x: api.vmap(f)(x).sum())(ones),
            "vjp": lambda: api.vjp(f, 1.0)[1](1.0),
            "value_and_grad twice": lambda: [api.value_and_grad(f)(v) for v in (1.0, 2.0)],
        }
        jitted = api.jit(api.grad(f))
        calls["jit(grad) twice"] = lambda: [jitted(v) for v in (1.0, 2.0)]
        calls[how]()
        return counts

    assert run(ember, jnp) == run(jax, jax_jnp)


# --- the legacy five-argument cond; fori_loop's bounds ------------------------------------------------
@pytest.mark.parametrize("pred", [True, False])
def test_legacy_cond_gives_each_branch_its_operand(pred) -> None:
    def legacy(api, p):
        return api.lax.cond(p, 1.0, lambda x: x + 1, np.float32(2.0), lambda y: y * 10)
    assert float(legacy(ember, pred)) == float(legacy(jax, pred))
    assert float(ember.jit(lambda p: legacy(ember, p))(pred)) == float(legacy(jax, pred))


@pytest.mark.parametrize("lower,upper", [(0.0, 5.0), (0.5, 3.7), (-1.5, 1.2), (np.float32(0), np.float32(4)),
                                         (0, 5.0), (0.0, 5), (np.int8(1), 4), (0, np.int16(3)),
                                         (np.int16(0), np.int32(3))])
def test_fori_loop_bounds_as_jax(lower, upper) -> None:
    def run(api, lo, hi):
        return api.lax.fori_loop(lo, hi, lambda i, c: c + i, 0.0)
    try:
        expected = run(jax, lower, upper)
    except TypeError as refusal:
        with pytest.raises(TypeError, match=re.escape(str(refusal))):
            run(ember, lower, upper)
        return
    for ours in (run(ember, lower, upper), ember.jit(lambda: run(ember, lower, upper))()):
        assert float(ours) == float(expected) and ours.dtype == expected.dtype


def test_fori_loop_with_traced_float_bounds_counts_by_one_as_jax() -> None:
    def run(api):
        return api.jit(lambda lo, hi: api.lax.fori_loop(lo, hi, lambda i, c: c + i, 0.0))(0.5, 3.7)
    assert float(run(ember)) == float(run(jax)) == 8.0


# --- a static recursion 100 deep ------------------------------------------------------------------
def test_a_jitted_static_recursion_100_deep_traces(recwarn) -> None:
    def nested(x, n):
        return x if n == 0 else step(jnp.sin(x), n - 1)

    step = ember.jit(nested, static_argnums=1)

    def reference(x, n):
        return x if n == 0 else reference(jax_jnp.sin(x), n - 1)

    x = np.float32(1.0)
    np.testing.assert_allclose(step(x, 100), jax.jit(reference, static_argnums=1)(x, 100), rtol=1e-6)
    np.testing.assert_allclose(ember.grad(lambda x: step(x, 100))(x), jax.grad(lambda x: reference(x, 100))(x),
                               rtol=1e-5)
    np.testing.assert_allclose(ember.jit(ember.grad(lambda x: step(x, 100)))(x),
                               jax.grad(lambda x: reference(x, 100))(x), rtol=1e-5)


def test_a_static_recursion_300_deep_prunes_each_nested_call_once(monkeypatch) -> None:
    """300 nested jit calls took 74 s to run once: the reference interpreter pruned dead code from
    each call it ran, the whole nest below it each time, and every pruned equation searched its
    nest for effects again (n^3 equation visits). A program records that it is pruned and whether it
    has effects, so the work grows with the depth (a count, not a time, is asserted)."""
    from ember.compiler import dce
    from ember.core import ir

    visits = {"prune": 0, "effects": 0}

    def counted(name, fun):
        def wrapper(*args):
            visits[name] += 1
            return fun(*args)
        return wrapper

    monkeypatch.setattr(dce, "_live_eqns", counted("prune", dce._live_eqns))
    effectful = counted("effects", ir.is_effectful)
    monkeypatch.setattr(ir, "is_effectful", effectful)
    monkeypatch.setattr(dce, "is_effectful", effectful)

    def nested(x, n):
        return x if n == 0 else step(jnp.sin(x), n - 1)

    step = ember.jit(nested, static_argnums=1)
    x = np.float32(0.5)
    chain = [0.5]  # (sin applied 0, 1, ..., 300 times; a derivative is the product of their cosines)
    for _ in range(300):
        chain.append(np.sin(chain[-1]))
    with ember.config.override(backend="reference"):  # (what runs a first call while it compiles)
        np.testing.assert_allclose(step(x, 300), chain[-1], rtol=1e-5)
    assert visits["prune"] <= 4 * 300 and visits["effects"] <= 10 * 300, visits
    visits.update(prune=0, effects=0)
    np.testing.assert_allclose(ember.grad(lambda x: step(x, 150))(x), np.prod(np.cos(chain[:150])), rtol=1e-4)
    assert visits["prune"] <= 10 * 150 and visits["effects"] <= 20 * 150, visits


# --- jvp of Python scalars --------------------------------------------------------------------------
@pytest.mark.parametrize("name,fun", [("identity", lambda x: x), ("constant", lambda x: 3.0),
                                      ("computed", lambda x: x * 2), ("pair", lambda x: (x, 2.5, x + 1))])
def test_jvp_returns_python_scalars_where_jax_does(name, fun) -> None:
    ours, theirs = ember.jvp(fun, (1.0,), (1.0,)), jax.jvp(fun, (1.0,), (1.0,))
    for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)):
        assert isinstance(a, float) == isinstance(b, float), (a, b)
        assert float(a) == float(b)
        if not isinstance(b, float):
            assert a.dtype == b.dtype and a.weak_type == b.weak_type


def _custom_jvp_cases(lib):
    """Functions with custom_jvp rules, built with ``lib`` (ember or jax), each recording the kinds of
    values its rule receives."""
    seen: list = []

    def kinds(tree):
        return [_kind(x) for x in lib.tree_util.tree_leaves(tree)]

    @lib.custom_jvp
    def double(x):
        return x * 2.0

    @double.defjvp
    def double_jvp(primals, tangents):
        seen.append((kinds(primals), kinds(tangents)))
        return double(primals[0]), 3.0 * tangents[0]

    @lib.custom_jvp
    def constants(x):
        return x

    @constants.defjvp
    def constants_jvp(primals, tangents):
        seen.append((kinds(primals), kinds(tangents)))
        return 7.0, 8.0

    @lib.custom_jvp
    def plus(x, y):
        return x + y

    @plus.defjvp
    def plus_jvp(primals, tangents):
        seen.append((kinds(primals), kinds(tangents)))
        return plus(*primals), tangents[0] + tangents[1]

    cases = {
        "float": (double, (1.0,), (1.0,)),
        "complex": (double, (1.0 + 2j,), (1.0 + 0j,)),
        "numpy scalar": (double, (np.float32(1.5),), (np.float32(1.0),)),
        "float primal, numpy tangent": (double, (1.0,), (np.float32(1.0),)),
        "numpy array": (double, (np.ones(2, np.float32),), (np.ones(2, np.float32),)),
        "rule of constants": (constants, (1.0,), (1.0,)),
        "one argument differentiated": (lambda x: plus(x, 2.0), (1.0,), (1.0,)),
        "then a primitive": (lambda x: double(x) + 1.0, (1.0,), (1.0,)),
        "jvp of jvp": (lambda x: lib.jvp(double, (x,), (1.0,)), (1.0,), (1.0,)),
        "array primal": (double, (lib.numpy.float32(1.0),), (lib.numpy.float32(1.0),)),
    }
    return cases, seen


def _kind(x):
    """A leaf's kind as far as a user can tell: a Python scalar, a NumPy value, or an array (with its
    dtype and weak type)."""
    for python in (bool, int, float, complex):  # (JAX passes subclasses of these for constants)
        if isinstance(x, python) and not isinstance(x, np.generic):
            return python.__name__
    if isinstance(x, (np.ndarray, np.generic)):
        return f"numpy {type(x).__name__} {x.dtype}"
    return f"array {x.dtype} weak={x.aval.weak_type}"


@pytest.mark.parametrize("case", list(_custom_jvp_cases(ember)[0]))
def test_custom_jvp_under_jvp_sees_and_returns_the_values_jax_does(case) -> None:
    """JAX calls a custom_jvp rule under jvp on the values as the caller gave them (a Python float
    stays one) and returns what the rule returns; ember made arrays of them."""
    ours_cases, ours_seen = _custom_jvp_cases(ember)
    theirs_cases, theirs_seen = _custom_jvp_cases(jax)
    ours, theirs = ember.jvp(*ours_cases[case]), jax.jvp(*theirs_cases[case])
    assert ours_seen == theirs_seen
    ours_leaves, theirs_leaves = jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
    assert [_leaf_type(x) for x in ours_leaves] == [_leaf_type(x) for x in theirs_leaves]
    for a, b in zip(ours_leaves, theirs_leaves):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def _leaf_type(x):
    """A result leaf's type: the Python or NumPy type, or an array's dtype and weak type."""
    if isinstance(x, (bool, int, float, complex, np.ndarray, np.generic)):
        return type(x).__name__, np.result_type(x).name if not isinstance(x, (bool, int, float, complex)) else None
    return "array", x.dtype.name, x.weak_type


def test_jvp_passes_a_python_int_to_the_function_as_jax() -> None:
    float0 = np.zeros((), jax.dtypes.float0)
    ours, theirs = ember.jvp(lambda n: n * 2, (1,), (float0,)), jax.jvp(lambda n: n * 2, (1,), (float0,))
    assert type(ours[0]) is type(theirs[0]) is int and ours[0] == theirs[0] == 2
    assert ours[1].dtype == theirs[1].dtype and ours[1].shape == theirs[1].shape == ()


# --- float0 arrays: made as JAX makes them, and taken as tangents of integer values ---------------
def _float0_uses(lib):
    float0 = lib.dtypes.float0
    m = lib.numpy
    return {
        "zeros": lambda: m.zeros((), dtype=float0),
        "zeros of a shape": lambda: m.zeros((3,), dtype=float0),
        "zeros_like": lambda: m.zeros_like(m.arange(2), dtype=float0),
        "asarray of NumPy's": lambda: m.asarray(np.zeros((2,), float0)),
        "array of NumPy's": lambda: m.array(np.zeros((2,), float0)),
        "device_put": lambda: lib.device_put(np.zeros((2,), float0)),
        "jvp, jnp's float0 tangent": lambda: lib.jvp(lambda n: n * 2, (m.int32(3),), (m.zeros((), float0),)),
        "jvp, NumPy's float0 tangent": lambda: lib.jvp(lambda n: n * 2, (m.arange(3),), (np.zeros((3,), float0),)),
        "vjp, jnp's float0 cotangent": lambda: lib.vjp(lambda n: n * 2, m.arange(3))[1](m.zeros((3,), float0)),
        "jvp of jit, mixed": lambda: lib.jvp(lib.jit(lambda n, x: n * x), (m.int32(2), 1.0),
                                             (m.zeros((), float0), 1.0)),
        "linearized": lambda: lib.linearize(lambda n, x: n * x, m.int32(2), 1.0)[1](m.zeros((), float0), 1.0),
        "jit, a float0 argument returned": lambda: lib.jit(lambda t: (t, t))(np.zeros((2,), float0)),
        "jit of grad(allow_int)": lambda: lib.jit(lib.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True))(
            1.0, 3),
        "jit of vjp of an integer function": lambda: lib.jit(
            lambda n: lib.vjp(lambda n: n * 2, n)[1](np.zeros((3,), float0)))(m.arange(3)),
        "jit of jvp, the float0 tangent an argument": lambda: lib.jit(
            lambda n, t: lib.jvp(lambda n: n * 2, (n,), (t,)))(m.arange(3), np.zeros((3,), float0)),
        "vmap of jvp": lambda: lib.vmap(lambda n, t: lib.jvp(lambda n: n * 2, (n,), (t,)))(
            m.arange(3), np.zeros((3,), float0)),
        "vmap, out_axes=1": lambda: lib.vmap(lambda n, t: lib.jvp(lambda n: n * 2, (n,), (t,)), out_axes=1)(
            m.ones((3, 2), m.int32), np.zeros((3, 2), float0)),
        "vmap, in_axes=1, one example's shape": lambda: lib.vmap(lambda t: (t, m.zeros(t.shape)), in_axes=1)(
            np.zeros((2, 3), float0)),
        "vmap, float0 not mapped": lambda: lib.vmap(lambda x, t: (x, t), in_axes=(0, None))(
            m.ones(3), np.zeros((2,), float0)),
    }


@pytest.mark.parametrize("use", list(_float0_uses(jax)))
def test_float0_arrays_as_jax_makes_and_takes_them(use) -> None:
    """JAX makes float0 arrays (NumPy arrays on the host: they hold no data) with jnp's creation
    functions and takes them as tangents of integer values; ember refused the dtype."""
    ours, theirs = _float0_uses(ember)[use](), _float0_uses(jax)[use]()
    ours_leaves, theirs_leaves = ember.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs)
    assert len(ours_leaves) == len(theirs_leaves)
    for a, b in zip(ours_leaves, theirs_leaves):
        assert a.dtype == b.dtype and a.shape == b.shape
        if b.dtype == jax.dtypes.float0:
            assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)  # (JAX's is an ndarray subclass)
        else:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_custom_jvp_rule_gets_float0_tangents_for_integer_inputs_as_in_jax() -> None:
    def build(lib):
        seen = []

        @lib.custom_jvp
        def scale(x, n):
            return x * n

        @scale.defjvp
        def scale_jvp(primals, tangents):
            seen.append([(np.dtype(t.dtype), np.shape(t)) for t in tangents])
            x, n = primals
            return scale(x, n), tangents[0] * n

        return scale, seen

    (ours, ours_seen), (theirs, theirs_seen) = build(ember), build(jax)
    x, t = np.float32(2.0), np.float32(1.0)
    np.testing.assert_allclose(ember.jvp(lambda x: ours(x, 3), (x,), (t,))[1],
                               jax.jvp(lambda x: theirs(x, 3), (x,), (t,))[1])
    assert ours_seen == theirs_seen == [[(np.dtype(np.float32), ()), (jax.dtypes.float0, ())]]


@pytest.mark.parametrize("case", ["identity", "product", "custom_jvp"])
def test_linearize_returns_python_scalars_where_jax_does(case) -> None:
    """JAX's linearize, as its jvp, makes no array of a Python float it is given: a custom_jvp rule
    gets the float, and a primal output that is the input (or the rule's float) comes back as a float."""
    def build(lib):
        seen = []

        @lib.custom_jvp
        def double(x):
            return x * 2.0

        @double.defjvp
        def double_jvp(primals, tangents):
            seen.append(_kind(primals[0]))
            return double(primals[0]), 3.0 * tangents[0]

        return {"identity": lambda x: x, "product": lambda x: x * 2.0, "custom_jvp": double}[case], seen

    (ours_fun, ours_seen), (theirs_fun, theirs_seen) = build(ember), build(jax)
    (ours, ours_jvp), (theirs, theirs_jvp) = ember.linearize(ours_fun, 1.0), jax.linearize(theirs_fun, 1.0)
    assert ours_seen == theirs_seen
    assert _leaf_type(ours) == _leaf_type(theirs) and float(ours) == float(theirs)
    np.testing.assert_allclose(ours_jvp(1.0), theirs_jvp(1.0))
