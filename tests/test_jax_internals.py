"""The modules and internal names of JAX that libraries import, each against JAX 0.10.2 in this
process (ember's side through ``ember`` and ``ember.compat.jax`` directly), and once through
``install_as_jax()`` in a subprocess: ``ember.sharding``, ``jax.lib``, ``jax.core``'s ``Atom`` and
``find_top_trace``, lax's primitive objects (``lax.add_p``) and ``jax._src.util``'s helpers."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.numpy as ejnp
from ember.compat.jax import _src as compat_src  # noqa: F401
from ember.compat.jax._src import util as eutil

jax = pytest.importorskip("jax")
jnp = jax.numpy
import jax._src.util as jutil  # noqa: E402
import jax.core  # noqa: E402
import jax.extend.core  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def run_under_switch(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", "import ember\nember.install_as_jax()\n" + code],
                          capture_output=True, text=True, env=env, timeout=600)


# --- ember.sharding, beside ember.numpy --------------------------------------------------------------
def test_ember_has_a_sharding_module_as_jax_does():
    import ember.sharding
    assert ember.sharding is importlib.import_module("ember.sharding")
    for name in ("AbstractMesh", "AxisType", "Mesh", "NamedSharding", "PartitionSpec", "Sharding",
                 "SingleDeviceSharding", "get_mesh", "reshard", "set_mesh"):
        assert hasattr(jax.sharding, name) and hasattr(ember.sharding, name), name
    mesh = ember.sharding.Mesh(ember.devices(), ("d",))
    spec = ember.sharding.PartitionSpec("d")
    assert ember.sharding.NamedSharding(mesh, spec).spec == spec
    assert ember.sharding.reshard is ember.reshard


# --- the switch: the names resolve to ember's ------------------------------------------------------------
SWITCH = """
import jax, jax.lib, jax.sharding, jax.core, ember
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jax._src.util import safe_zip, safe_map, unzip2, split_list, partition_list, curry, wraps, cache, memoize
from jax.extend.core import find_top_trace
assert jax.sharding is ember.sharding and jax.lib.__version__ == jax.__version__ == "0.10.2"
assert jax.lib is jax.__dict__["lib"] and "lib" not in jax.MISSING
assert lax.add_p is ember.lax.add_p and lax.scatter_add_p.name == "scatter-add"
assert jax.core.find_top_trace is find_top_trace and jax.core.Atom
assert safe_zip([1, 2], "ab") == [(1, "a"), (2, "b")] and unzip2([(1, 2), (3, 4)]) == ((1, 3), (2, 4))
print("ok")
"""


def test_the_names_resolve_under_the_switch():
    done = run_under_switch(SWITCH)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


# --- jax.lib and jax.core -------------------------------------------------------------------------------
def test_jax_lib_has_jaxs_names():
    import jax.lib

    from ember.compat.jax import lib
    assert [n for n in dir(jax.lib) if not n.startswith("_")] == [n for n in dir(lib) if not n.startswith("_")]
    assert lib.__version__ == jax.lib.__version__


def test_jax_core_has_jaxs_public_names():
    from ember.compat.jax import core
    public = [n for n in dir(jax.core) if not n.startswith("_")]
    assert [n for n in public if not hasattr(core, n)] == ["eval_context", "max_dim", "min_dim"]
    for name in ("Atom", "find_top_trace", "get_opaque_trace_state", "mapped_aval"):
        assert hasattr(core, name)


def test_an_equations_operands_are_atoms():
    from typing import get_args

    from ember.compat.jax import core
    closed = ember.make_jaxpr(lambda x: x * 2.0 + x)(1.0)
    operands = [v for eqn in closed.jaxpr.eqns for v in eqn.invars]
    assert operands and all(isinstance(v, get_args(core.Atom)) for v in operands)
    assert any(isinstance(v, core.Var) for v in operands) and any(not isinstance(v, core.Var) for v in operands)


def test_find_top_trace_is_the_current_trace():
    from ember.compat.jax import core
    from ember.core.trace import EvalTrace, current_trace
    assert isinstance(core.find_top_trace(()), EvalTrace)
    seen = []
    ember.jit(lambda x: seen.append(core.find_top_trace((x,))) or x)(1.0)
    assert seen and not isinstance(seen[0], EvalTrace) and seen[0] is not current_trace()
    jax_seen = []
    jax.jit(lambda x: jax_seen.append(jax.extend.core.find_top_trace((x,))) or x)(1.0)
    assert type(jax_seen[0]).__name__ == "DynamicJaxprTrace"


# --- lax's primitive objects ----------------------------------------------------------------------------
def test_lax_names_its_primitives_as_jax_does():
    ours = {n for n in dir(ember.lax) if n.endswith("_p")}
    theirs = {n: getattr(jax.lax, n) for n in dir(jax.lax) if n.endswith("_p")}
    shared = ours & set(theirs)
    assert len(shared) >= 120, len(shared)
    for name in shared:  # (each is the ember primitive of JAX's name for it)
        assert getattr(ember.lax, name).name == theirs[name].name, name
    for name in ("add_p", "mul_p", "exp_p", "dot_general_p", "scan_p", "cond_p", "while_p", "scatter_add_p",
                 "reduce_sum_p", "convert_element_type_p", "psum_p", "fft_p", "optimization_barrier_p"):
        assert name in shared, name


def test_primitive_objects_are_what_programs_hold_and_can_be_bound():
    closed = ember.make_jaxpr(lambda x: ember.numpy.sin(x) * 2.0 + x)(1.0)
    prims = [e.primitive for e in closed.jaxpr.eqns]
    assert prims == [ember.lax.sin_p, ember.lax.mul_p, ember.lax.add_p]
    assert float(ember.lax.add_p.bind(ejnp.float32(1.0), ejnp.float32(2.0))) == 3.0
    assert float(ember.lax.exp_p.bind(ejnp.float32(0.0))) == 1.0


# --- jax._src.util ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", [
    ("safe_zip", ([1, 2], "ab")), ("safe_zip", ([1],)), ("safe_map", (str, [1, 2])),
    ("safe_map", (lambda a, b: a + b, [1, 2], [3, 4])), ("unzip2", ([(1, 2), (3, 4)],)), ("unzip2", ([],)),
    ("unzip3", ([(1, 2, 3)],)), ("split_list", ([1, 2, 3, 4], [1, 2])), ("split_list", ([1, 2], [0, 2])),
    ("partition_list", ([True, False, True], [1, 2, 3])), ("merge_lists", ([True, False, True], [5], [1, 2])),
    ("subvals", ((1, 2, 3), [(0, 9)])), ("concatenate", ([[1], [2, 3]],)), ("unflatten", ([1, 2, 3], [1, 2])),
    ("split_list_checked", ([1, 2, 3], [1, 2])), ("tuple_insert", ((1, 2), 1, 9)), ("tuple_delete", ((1, 2), 0)),
    ("tuple_update", ((1, 2), 1, 9)), ("canonicalize_axis", (-1, 3)), ("ceil_of_ratio", (7, 2)),
])
def test_util_helpers_match_jax(case):
    name, args = case
    assert getattr(eutil, name)(*args) == getattr(jutil, name)(*args)


@pytest.mark.parametrize("case", [
    ("safe_zip", ([1, 2], [1]), ValueError, "safe_zip() argument 1 has length 1 but argument 0 has length 2"),
    ("safe_zip", (), TypeError, "safe_zip requires at least 1 argument"),
    ("safe_map", (lambda a, b: a, [1, 2], [1]), ValueError, "safe_map() argument 2 is shorter than argument 1"),
    ("safe_map", (lambda a, b: a, [1], [1, 2]), ValueError, "safe_map() argument 2 is longer than argument 1"),
    ("canonicalize_axis", (3, 2), ValueError, "axis 3 is out of bounds for array of dimension 2"),
])
def test_util_helpers_refuse_as_jax_does(case):
    name, args, cls, fragment = case
    for module in (eutil, jutil):
        with pytest.raises(cls) as info:
            getattr(module, name)(*args)
        assert fragment in str(info.value), (module.__name__, str(info.value))


def test_curry_wraps_and_cache_behave_as_jaxs():
    for util in (eutil, jutil):
        assert util.curry(lambda a, b, c: (a, b, c))(1, 2)(3) == (1, 2, 3)

        def f(x):
            """Doubles."""
            return 2 * x

        @util.wraps(f, namestr="vmap({fun})", docstr="Vectorized. {doc}")
        def g(x):
            return f(x)
        assert (g.__name__, g.__doc__, g.__wrapped__) == ("vmap(f)", "Vectorized. Doubles.", f)
        calls = []

        @util.cache(max_size=8)
        def h(x):
            calls.append(x)
            return x + 1

        assert h(1) == h(1) == 2 and calls == [1]
        memo_calls = []
        square = util.memoize(lambda x: memo_calls.append(x) or x * x)
        assert square(3) == square(3) == 9 and memo_calls == [3]
    calls = []
    keyed = eutil.cache()(lambda x: calls.append(x) or ejnp.ones(1).dtype)
    with ember.config.override(enable_x64=True):  # (the flags that change programs are in the key, as in JAX)
        keyed(0)
    keyed(0)
    assert calls == [0, 0]


# --- AOT: compiler_ir, compile(compiler_options=...), pmap(...).lower ----------------------------------
def _body(hlo: str) -> str:
    """What optax's HLO-equivalence test compares: the text from ``ENTRY`` on, names masked."""
    import re
    found = re.search(r"ENTRY.*", hlo, re.DOTALL)
    assert found, hlo
    text = re.sub("ENTRY.*?{", "ENTRY XXXX", found.group())
    return re.sub("ROOT.*?=", "ROOT result.2 =", re.sub("HloModule.*?\n", "", text))


def _abs_sq(x):
    return (x.conj() * x).real


@pytest.mark.parametrize("x", [3, 3.0, np.array([4, 5.2]), 1j, 3.0 + 1j, np.array([4 + 1j, 5.2 + 1j])])
def test_compiler_ir_texts_compare_as_jaxs_do(x):
    """x ** 2, x * x and jnp.square give one program for real x (as XLA's HLO is one), and
    |x|**2 another one for complex x: the comparison optax's suite makes of the HLO text."""
    for top, np_ in ((ember, ejnp), (jax, jnp)):
        def ir(f):
            return _body(top.jit(f).lower(x).compiler_ir(dialect="hlo").as_hlo_text())
        squares = {ir(f) for f in (lambda x: x ** 2, lambda x: x * x, np_.square)}
        if np.iscomplexobj(x):
            assert ir(_abs_sq) not in squares, (top.__name__, squares)
        else:
            assert squares == {ir(_abs_sq)}, (top.__name__, squares)


def test_compiler_ir_dialects():
    lowered = ember.jit(lambda v: v * 2.0).lower(1.0)
    assert str(lowered.compiler_ir()) == str(lowered.compiler_ir("stablehlo")) == lowered.as_text()
    assert "mul" in str(lowered.compiler_ir("hlo")) and "ENTRY" in lowered.compiler_ir("hlo").as_hlo_text()
    assert "define" in str(lowered.compiler_ir("llvm"))
    for side in (ember, jax):
        with pytest.raises(ValueError, match="unknown dialect: foo"):
            side.jit(lambda v: v).lower(1.0).compiler_ir("foo")


def test_compile_takes_xla_options_and_refuses_unknown_ones_as_jax_does():
    for side in (ember, jax):
        lowered = side.jit(lambda v: v * 2.0).lower(1.0)
        assert float(lowered.compile(compiler_options={"xla_cpu_enable_fast_math": True})(3.0)) == 6.0
        assert float(lowered.compile({})(3.0)) == 6.0
        with pytest.raises(Exception) as info:
            lowered.compile(compiler_options={"not_an_option": 1})
        assert type(info.value).__name__ == "JaxRuntimeError"
        assert "No such compile option: 'not_an_option'" in str(info.value)


def test_compiled_functions_take_the_dynamic_arguments_only():
    for side in (ember, jax):
        compiled = side.jit(lambda v, n, scale=1.0: v * n * scale, static_argnums=1,
                            static_argnames="scale").lower(np.ones(2), 3.0, scale=2.0).compile()
        np.testing.assert_array_equal(compiled(np.ones(2)), [6.0, 6.0])
        with pytest.raises(TypeError):
            compiled(np.ones(2), 3.0)


def test_pmap_lowers_and_compiles():
    x = np.arange(6.0, dtype=np.float32).reshape(1, 6)
    for side in (ember, jax):
        lowered = side.pmap(lambda v, n: v * n, static_broadcasted_argnums=1).lower(x, 3.0)
        np.testing.assert_array_equal(lowered.compile()(x), x * 3)
        assert "mul" in lowered.as_text()


# --- ShapedArray, as user-defined primitives' shape rules get it -----------------------------------------
def _shaped_array_facts(core, np_, tree_util, eval_shape):
    S = core.ShapedArray
    a = S((2, 3), np_.float32)
    facts = {
        "shape": a.shape + (1,), "ndim": a.ndim, "size": a.size, "dtype": str(a.dtype), "weak": a.weak_type,
        "repr": repr(a), "weak_repr": repr(a.update(weak_type=True)), "eq": a == S([2, 3], "float32"),
        "hash": hash(a) == hash(S((2, 3), np_.float32)), "ne": a != S((2, 3), np_.float32, True),
        "update": repr(a.update(shape=(4,), dtype=np_.int32)), "leaves": len(tree_util.tree_leaves([a, a])),
        "eval_shape": (eval_shape(lambda y: y ** 2, a).shape, str(eval_shape(lambda y: y ** 2, a).dtype)),
    }
    for name, fn in [("add", lambda: a + (1,)), ("radd", lambda: (1,) + a), ("mul", lambda: a * 2),
                     ("pow", lambda: a ** 2)]:
        try:
            fn()
            facts[name] = "no error"
        except TypeError as e:
            facts[name] = str(e)
    return facts


def test_shaped_array_behaves_as_jaxs():
    from ember.compat.jax import core
    ours = _shaped_array_facts(core, ejnp, ember.tree_util, ember.eval_shape)
    theirs = _shaped_array_facts(jax.core, jnp, jax.tree_util, jax.eval_shape)
    assert ours == theirs


def _user_primitive(side):
    """A primitive with JAX's tutorial's rules: an expand_dims-and-square whose shape rule
    computes with the types it gets (shape + (1,), eval_shape, update), and a batching rule."""
    from importlib import import_module
    package = "ember.compat.jax" if side == "ember" else "jax"
    ext = import_module(f"{package}.extend.core")
    batching = import_module(f"{package}.interpreters.batching")
    mlir = import_module(f"{package}.interpreters.mlir")
    np_, top = (ejnp, ember) if side == "ember" else (jnp, jax)
    p = ext.Primitive(f"expand_square_{side}")
    seen = []

    def impl(x):
        return np_.expand_dims(x, -1) ** 2

    def shape_rule(x):
        seen.append((str(x), repr(x), x.shape))
        squared = top.eval_shape(lambda y: y ** 2, x)
        return x.update(shape=x.shape + (1,), dtype=squared.dtype)

    def batch_rule(args, dims):
        (x,), (d,) = args, dims
        return p.bind(np_.moveaxis(x, d, 0)), 0

    p.def_impl(impl)
    p.def_abstract_eval(shape_rule)
    batching.primitive_batchers[p] = batch_rule
    mlir.register_lowering(p, mlir.lower_fun(impl, multiple_results=False))
    return top, p, seen


@pytest.fixture
def forget_user_primitives():
    """Takes the primitives a test defines out of ember's table again (tests that check every
    primitive of ember for a rule must not meet them)."""
    from ember.core.primitive import abstract_eval_rules
    before = set(abstract_eval_rules)
    yield
    for p in set(abstract_eval_rules) - before:
        del abstract_eval_rules[p]


@pytest.mark.parametrize("side", ["ember", "jax"])
def test_user_primitives_compute_their_types_and_batch(side, forget_user_primitives):
    top, p, seen = _user_primitive(side)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    want = np.expand_dims(x, -1) ** 2
    np.testing.assert_array_equal(top.jit(p.bind)(x), want)
    np.testing.assert_array_equal(top.vmap(p.bind)(x), want)
    np.testing.assert_array_equal(top.jit(top.vmap(p.bind, in_axes=1, out_axes=1))(x), want)
    assert seen[0] == ("float32[2,3]", "ShapedArray(float32[2,3])", (2, 3))


# --- dtypes' scalar types and float0 --------------------------------------------------------------------
SCALAR_FACTS = [
    "type(dt.bfloat16(1.5)).__name__", "float(dt.bfloat16(1.5))", "isinstance(dt.bfloat16(1), dt.bfloat16)",
    "isinstance(ml_dtypes.bfloat16(1), dt.bfloat16)", "isinstance(dt.bfloat16, type)", "np.dtype(dt.bfloat16).name",
    "np_.ones(2, dt.bfloat16).dtype.name", "dt.issubdtype(dt.bfloat16, np_.floating)",
    "isinstance(np_.ones(2, dt.bfloat16)[0].item(), float)", "dt.bfloat16 == np_.bfloat16",
    "np_.bfloat16(1.5).dtype.name", "isinstance(np_.bfloat16(1.5), np_.bfloat16)",
    "isinstance(ml_dtypes.bfloat16(1), np_.bfloat16)", "isinstance(np.float32(1), np_.float32)",
    "np_.float8_e4m3fn(2).dtype.name", "isinstance(ml_dtypes.float8_e4m3fn(1), np_.float8_e4m3fn)",
    "isinstance(ml_dtypes.int4(1), np_.int4)", "np_.float16(1).dtype.name",
    "sorted(n for n in dir(dt) if not n.startswith('_'))",
]  # (not here: arrays of int4 and of float0, which ember does not make)


@pytest.mark.parametrize("fact", SCALAR_FACTS)
def test_scalar_types_behave_as_jaxs(fact):
    import ml_dtypes

    from ember.compat.jax import dtypes as edt
    outcomes = []
    for dt, np_ in ((edt, ejnp), (jax.dtypes, jnp)):
        try:
            outcomes.append(repr(eval(fact, {"dt": dt, "np_": np_, "np": np, "ml_dtypes": ml_dtypes})))
        except TypeError:
            outcomes.append("TypeError")
    assert outcomes[0] == outcomes[1], outcomes


def _float0_outcomes(top, np_):
    f = lambda x, n: x * n  # noqa: E731
    f0 = top.dtypes.float0
    cases = {
        "grad": lambda: top.grad(f, argnums=(0, 1), allow_int=True)(2.0, 3),
        "grad_array": lambda: top.grad(lambda x, n: (x * n).sum(), argnums=1, allow_int=True)(np_.ones(2),
                                                                                            np_.arange(2)),
        "jvp": lambda: top.jvp(f, (2.0, 3), (1.0, np.zeros((), f0))),
        "jvp_array": lambda: top.jvp(f, (np_.ones(2), np_.arange(2)), (np_.ones(2), np.zeros(2, f0))),
        "jvp_int_tangent": lambda: top.jvp(f, (2.0, 3), (1.0, 0)),
        "jvp_float0_shape": lambda: top.jvp(f, (2.0, np_.arange(2)), (1.0, np.zeros(3, f0))),
        "jvp_float0_for_float": lambda: top.jvp(f, (2.0, 3.0), (1.0, np.zeros((), f0))),
        "vjp": lambda: top.vjp(f, 2.0, 3)[1](1.0),
        "jacrev": lambda: top.jacrev(f, argnums=1, allow_int=True)(2.0, 3),
    }
    out = {}
    for name, case in cases.items():
        try:
            result = case()
            out[name] = [(np.asarray(leaf).dtype, np.shape(leaf), np.asarray(leaf).tobytes())
                         for leaf in top.tree_util.tree_leaves(result)]
        except (TypeError, ValueError) as e:
            out[name] = type(e).__name__
    return out


def test_float0_tangents_and_cotangents_are_jaxs():
    from ember.compat import jax as compat
    assert _float0_outcomes(compat, ejnp) == _float0_outcomes(jax, jnp)


def test_dtypes_module_under_the_switch_has_jaxs_scalar_type():
    done = run_under_switch("import jax, jax.numpy as jnp, ml_dtypes\n"
                            "assert jax.dtypes.bfloat16 is ml_dtypes.bfloat16\n"
                            "x = jax.dtypes.bfloat16(1.0)\n"
                            "assert isinstance(x, jax.dtypes.bfloat16) and jnp.asarray(x).dtype == jnp.bfloat16\n"
                            "print('ok')\n")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


# --- internals that libraries touch: bind params, traces' attributes, linearize's function --------------
INTERNALS = r"""
import functools
import jax, jax.numpy as jnp, jax.core, jax.extend.core
from jax import lax
from jax.interpreters import ad
p = jax.extend.core.Primitive("user_op")
seen = []
p.def_abstract_eval(lambda x, **params: seen.append(type(x)) or x)
p.def_impl(lambda x, **params: x)
jax.make_jaxpr(lambda x: p.bind(x, k=1))(jnp.ones(2))
print("aval", seen[0] is jax.core.ShapedArray)
print("bind params", p.get_bind_params({"k": 1}), lax.add_p.get_bind_params({}))
print("JVPTrace.main", isinstance(ad.JVPTrace.main, property))
traces = {}
def probe(x):
    trace = x._trace
    traces[kind] = (type(trace.tag).__name__, trace.main is trace.tag, type(trace.parent_trace).__name__,
                    trace.requires_low)
    return x * 2
kind = "jvp"; jax.jvp(probe, (1.0,), (1.0,))
kind = "vmap"; jax.vmap(probe)(jnp.ones(2))
print("traces", traces)
def staged(x):
    print("staged", x._trace.main, type(x._trace.parent_trace).__name__)
    return x
jax.make_jaxpr(staged)(1.0)
y, f_lin = jax.linearize(lambda x: jnp.sin(x) * 2, jnp.ones(3))
t = jnp.arange(3.0)
print("linearized", hasattr(f_lin, "__name__"), f_lin(t).tolist() == jax.jit(f_lin)(t).tolist(),
      jax.jit(lambda f, t: f(t))(f_lin, t).tolist() == f_lin(t).tolist(),
      jax.vmap(f_lin)(jnp.stack([t, t])).shape, jax.linear_transpose(f_lin, t)(t)[0].shape)
g_lin = jax.linearize(lambda d: {"a": d["x"] * 2}, {"x": jnp.ones(3)})[1]
print("pytree", jax.linear_transpose(g_lin, {"x": t})({"a": t})[0]["x"].tolist())
class Step:
    __name__ = None  # (a callable object whose name is not a string)
    def __call__(self, c, x):
        return c + x, c * x
def step(c, x, k):
    return c + k * x, c
xs = jnp.ones((2, 3))
print("scan", jax.vmap(lambda r: lax.scan(Step(), 0.0, r))(xs)[0].tolist(),
      jax.vmap(lambda r: lax.scan(functools.partial(step, k=2.0), 0.0, r))(xs)[0].tolist(),
      jax.jit(Step())(1.0, 2.0)[0].tolist(),
      jax.grad(lambda r: jax.vmap(lambda r: lax.scan(Step(), 0.0, r))(r)[0].sum())(xs).tolist())
"""


def test_the_internals_libraries_touch_are_jaxs():
    """``Primitive.get_bind_params``; a user rule's operand types are ``jax.core.ShapedArray``
    itself; traces' ``tag`` / ``main`` / ``parent_trace`` / ``requires_low`` (``ad.JVPTrace``);
    linearize's function as JAX's (a pytree ``Partial``: to jit, as jit's argument, to vmap, to
    linear_transpose); loops over callables whose ``__name__`` is not a string."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    theirs = subprocess.run([sys.executable, "-c", INTERNALS], capture_output=True, text=True, env=env, timeout=600)
    ours = run_under_switch(INTERNALS)
    assert theirs.returncode == 0, theirs.stderr[-3000:]
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert ours.stdout == theirs.stdout
