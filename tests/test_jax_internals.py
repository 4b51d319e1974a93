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
