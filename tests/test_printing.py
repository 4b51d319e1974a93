"""Printing, character for character as JAX 0.10.2 prints: programs (``make_jaxpr``), tracers,
pytree structures (``PyTreeDef``) and the residuals ``print_saved_residuals`` lists.

Each expected text is JAX 0.10.2's, written here, so ember is held to it without JAX installed;
where JAX is installed, the same programs run under JAX too and must print the same text (so the
texts here cannot go stale against JAX).
"""
from __future__ import annotations

import collections
import importlib
import inspect
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

import ember
import ember.numpy as ejnp
from ember import lax as elax, tree_util
from ember.transforms.checkpoint import saved_residuals


def _load(which: str) -> SimpleNamespace:
    if which == "ember":
        return SimpleNamespace(top=ember, jnp=ejnp, lax=elax, io_callback=ember.io_callback)
    jax = pytest.importorskip("jax")
    return SimpleNamespace(top=jax, jnp=importlib.import_module("jax.numpy"), lax=importlib.import_module("jax.lax"),
                           io_callback=importlib.import_module("jax.experimental").io_callback)


# --- programs ------------------------------------------------------------------------------------------


def _log1pexp(m, jnp):
    @m.top.custom_jvp
    def log1pexp(x):
        return jnp.log(1. + jnp.exp(x))

    @log1pexp.defjvp
    def log1pexp_jvp(primals, tangents):
        x, = primals
        x_dot, = tangents
        ans = log1pexp(x)
        return ans, (1 - 1 / (1 + jnp.exp(x))) * x_dot
    return str(m.top.make_jaxpr(log1pexp)(3.))


def _clip_gradient(m, jnp):
    @m.top.custom_vjp
    def clip_gradient(lo, hi, x):
        return x

    def clip_gradient_fwd(lo, hi, x):
        return x, (lo, hi)

    def clip_gradient_bwd(res, g):
        lo, hi = res
        return (None, None, jnp.clip(g, lo, hi))

    clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)
    return str(m.top.make_jaxpr(clip_gradient)(-0.75, 0.75, 1.))


def cb(x):  # (a callback: printed as <function cb at 0xXXXXXXXXXXXX>)
    return np.sin(x)


def _pure_callback(m, jnp):
    return str(m.top.make_jaxpr(lambda x: m.top.pure_callback(cb, m.top.ShapeDtypeStruct(x.shape, x.dtype), x))(
        jnp.ones(3)))


def _io_callback(m, jnp):
    io_callback = m.io_callback
    return str(m.top.make_jaxpr(lambda x: io_callback(cb, m.top.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True))(
        jnp.ones(3)))


PROGRAMS = {  # name -> (api, jnp) -> the printed program
    "literals": lambda m, jnp: str(m.top.make_jaxpr(lambda x: (x + 0.1) * 1e-30 + jnp.inf)(1.)),
    "one-line params": lambda m, jnp: str(m.top.make_jaxpr(lambda x: x[1:3, ::2])(jnp.ones((5, 3)))),
    "long inputs": lambda m, jnp: str(m.top.make_jaxpr(lambda *xs: sum(xs))(*range(10))),
    "no operands": lambda m, jnp: str(m.top.make_jaxpr(lambda x: jnp.arange(3) * x)(2)),
    "tanh grad": lambda m, jnp: str(m.top.make_jaxpr(m.top.grad(lambda x: jnp.sum(jnp.tanh(x) ** 2)))(jnp.ones(3))),
    "cube grad": lambda m, jnp: str(m.top.make_jaxpr(m.top.grad(lambda x: (x * x * x).sum()))(jnp.ones(3))),
    "sin cos grad": lambda m, jnp: str(m.top.make_jaxpr(m.top.grad(lambda x: jnp.sin(x) * jnp.cos(x)))(1.)),
    "div grad": lambda m, jnp: str(m.top.make_jaxpr(m.top.grad(lambda x: jnp.exp(x) / x))(1.)),
    "max grad": lambda m, jnp: str(m.top.make_jaxpr(m.top.grad(lambda x: jnp.maximum(x, 0.)))(1.)),
    "jvp of a product": lambda m, jnp: str(m.top.make_jaxpr(
        lambda x, t: m.top.jvp(lambda a: a * a, (x,), (t,)))(1., 1.)),
    "custom_jvp": lambda m, jnp: _log1pexp(m, jnp),
    "custom_vjp": lambda m, jnp: _clip_gradient(m, jnp),
    "relu": lambda m, jnp: str(m.top.make_jaxpr(m.top.nn.relu)(jnp.ones(3))),
    "softplus": lambda m, jnp: str(m.top.make_jaxpr(m.top.nn.softplus)(1.)),
    "logaddexp": lambda m, jnp: str(m.top.make_jaxpr(jnp.logaddexp)(1., 2.)),
    "silu": lambda m, jnp: str(m.top.make_jaxpr(m.top.nn.silu)(jnp.ones(2))),
    "floor_divide": lambda m, jnp: str(m.top.make_jaxpr(lambda x: x // 2)(jnp.ones(3, jnp.int32))),
    "scatter-add": lambda m, jnp: str(m.top.make_jaxpr(lambda x, i: x.at[i].add(2.))(jnp.ones(5), jnp.array([1, 2]))),
    "scatter": lambda m, jnp: str(m.top.make_jaxpr(lambda x, i: x.at[i].set(2.))(jnp.ones(5), jnp.array([1, 2]))),
    "pure_callback": lambda m, jnp: _pure_callback(m, jnp),
    "io_callback": lambda m, jnp: _io_callback(m, jnp),
    "debug.print": lambda m, jnp: str(m.top.make_jaxpr(lambda x: m.top.debug.print("x = {}", x) or x)(1.)),
    "debug.callback": lambda m, jnp: str(m.top.make_jaxpr(
        lambda x: m.top.debug.callback(print, x, ordered=True) or x)(1.)),
    "donated": lambda m, jnp: str(m.top.make_jaxpr(m.top.jit(lambda x, y: x @ y, donate_argnums=0, keep_unused=True))(
        jnp.ones((2, 2)), jnp.ones((2, 2)))),
    "inline": lambda m, jnp: str(m.top.make_jaxpr(lambda x: m.top.jit(lambda a: a * 2.0, inline=True)(x) + 1.0)(1.)),
}


# What JAX 0.10.2 prints for each.
EXPECTED = {
    'literals': (
        '{ lambda ; a:f32[]. let\n'
        '    b:f32[] = add a 0.1:f32[]\n'
        '    c:f32[] = mul b 1e-30:f32[]\n'
        '    d:f32[] = add c inf:f32[]\n'
        '  in (d,) }'
    ),
    'one-line params': (
        '{ lambda ; a:f32[5,3]. let\n'
        '    b:f32[2,2] = slice[limit_indices=(3, 3) start_indices=(1, 0) strides=(1, 2)] a\n'
        '  in (b,) }'
    ),
    'long inputs': (
        '{ lambda ; a:i32[] b:i32[] c:i32[] d:i32[] e:i32[] f:i32[] g:i32[] h:i32[] i:i32[]\n'
        '    j:i32[]. let\n'
        '    k:i32[] = add 0:i32[] a\n'
        '    l:i32[] = add k b\n'
        '    m:i32[] = add l c\n'
        '    n:i32[] = add m d\n'
        '    o:i32[] = add n e\n'
        '    p:i32[] = add o f\n'
        '    q:i32[] = add p g\n'
        '    r:i32[] = add q h\n'
        '    s:i32[] = add r i\n'
        '    t:i32[] = add s j\n'
        '  in (t,) }'
    ),
    'no operands': (
        '{ lambda ; a:i32[]. let\n'
        '    b:i32[3] = iota[dimension=0 dtype=int32 shape=(3,) sharding=None] \n'
        '    c:i32[] = convert_element_type[new_dtype=int32 weak_type=False] a\n'
        '    d:i32[3] = mul b c\n'
        '  in (d,) }'
    ),
    'tanh grad': (
        '{ lambda ; a:f32[3]. let\n'
        '    b:f32[3] = tanh a\n'
        '    c:f32[3] = sub 1.0:f32[] b\n'
        '    d:f32[3] = integer_pow[y=2] b\n'
        '    e:f32[3] = mul 2.0:f32[] b\n'
        '    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] d\n'
        '    f:f32[3] = broadcast_in_dim 1.0:f32[]\n'
        '    g:f32[3] = mul f e\n'
        '    h:f32[3] = mul g c\n'
        '    i:f32[3] = mul h b\n'
        '    j:f32[3] = add_any h i\n'
        '  in (j,) }'
    ),
    'cube grad': (
        '{ lambda ; a:f32[3]. let\n'
        '    b:f32[3] = mul a a\n'
        '    c:f32[3] = mul b a\n'
        '    _:f32[] = reduce_sum[axes=(0,) out_sharding=None] c\n'
        '    d:f32[3] = broadcast_in_dim 1.0:f32[]\n'
        '    e:f32[3] = mul b d\n'
        '    f:f32[3] = mul d a\n'
        '    g:f32[3] = mul a f\n'
        '    h:f32[3] = add_any e g\n'
        '    i:f32[3] = mul f a\n'
        '    j:f32[3] = add_any h i\n'
        '  in (j,) }'
    ),
    'sin cos grad': (
        '{ lambda ; a:f32[]. let\n'
        '    b:f32[] = sin a\n'
        '    c:f32[] = cos a\n'
        '    d:f32[] = cos a\n'
        '    e:f32[] = sin a\n'
        '    _:f32[] = mul b d\n'
        '    f:f32[] = mul b 1.0:f32[]\n'
        '    g:f32[] = mul 1.0:f32[] d\n'
        '    h:f32[] = neg f\n'
        '    i:f32[] = mul h e\n'
        '    j:f32[] = mul g c\n'
        '    k:f32[] = add_any i j\n'
        '  in (k,) }'
    ),
    'div grad': (
        '{ lambda ; a:f32[]. let\n'
        '    b:f32[] = exp a\n'
        '    _:f32[] = div b a\n'
        '    c:f32[] = integer_pow[y=-2] a\n'
        '    d:f32[] = mul 1.0:f32[] c\n'
        '    e:f32[] = mul d b\n'
        '    f:f32[] = neg e\n'
        '    g:f32[] = div 1.0:f32[] a\n'
        '    h:f32[] = mul g b\n'
        '    i:f32[] = add_any f h\n'
        '  in (i,) }'
    ),
    'max grad': (
        '{ lambda ; a:f32[]. let\n'
        '    b:f32[] = max a 0.0:f32[]\n'
        '    c:bool[] = eq a b\n'
        '    d:f32[] = select_n c 0.0:f32[] 1.0:f32[]\n'
        '    e:bool[] = eq 0.0:f32[] b\n'
        '    f:f32[] = select_n e 1.0:f32[] 2.0:f32[]\n'
        '    g:f32[] = div d f\n'
        '    h:f32[] = mul 1.0:f32[] g\n'
        '  in (h,) }'
    ),
    'jvp of a product': (
        '{ lambda ; a:f32[] b:f32[]. let\n'
        '    c:f32[] = mul a a\n'
        '    d:f32[] = mul b a\n'
        '    e:f32[] = mul a b\n'
        '    f:f32[] = add_any d e\n'
        '  in (c, f) }'
    ),
    'custom_jvp': (
        '{ lambda ; a:f32[]. let\n'
        '    b:f32[] = custom_jvp_call[\n'
        '      name=log1pexp\n'
        '      call_jaxpr={ lambda ; c:f32[]. let\n'
        '          d:f32[] = exp c\n'
        '          e:f32[] = add 1.0:f32[] d\n'
        '          f:f32[] = log e\n'
        '        in (f,) }\n'
        '      jvp=log1pexp_jvp\n'
        '      symbolic_zeros=False\n'
        '    ] a\n'
        '  in (b,) }'
    ),
    'custom_vjp': (
        '{ lambda ; a:f32[] b:f32[] c:f32[]. let\n'
        '    d:f32[] = custom_vjp_call[\n'
        '      name=clip_gradient\n'
        '      bwd=clip_gradient_bwd\n'
        '      call_jaxpr={ lambda ; e:f32[] f:f32[] g:f32[]. let  in (g,) }\n'
        '      fwd=clip_gradient_fwd\n'
        '      symbolic_zeros=False\n'
        '    ] a b c\n'
        '  in (d,) }'
    ),
    'relu': (
        '{ lambda ; a:f32[3]. let\n'
        '    b:f32[3] = custom_jvp_call[\n'
        '      name=relu\n'
        '      call_jaxpr={ lambda ; c:f32[3]. let\n'
        '          d:f32[3] = jit[\n'
        '            name=relu\n'
        '            jaxpr={ lambda ; c:f32[3]. let d:f32[3] = max c 0.0:f32[] in (d,) }\n'
        '          ] c\n'
        '        in (d,) }\n'
        '      jvp=jvp\n'
        '      symbolic_zeros=False\n'
        '    ] a\n'
        '  in (b,) }'
    ),
    'softplus': (
        '{ lambda ; a:f32[]. let\n'
        '    b:f32[] = jit[\n'
        '      name=softplus\n'
        '      jaxpr={ lambda ; a:f32[]. let\n'
        '          b:f32[] = custom_jvp_call[\n'
        '            name=logaddexp\n'
        '            call_jaxpr={ lambda ; c:f32[] d:f32[]. let\n'
        '                e:f32[] = max c d\n'
        '                f:f32[] = sub c d\n'
        '                g:bool[] = ne f f\n'
        '                h:f32[] = add c d\n'
        '                i:f32[] = abs f\n'
        '                j:f32[] = neg i\n'
        '                k:f32[] = exp j\n'
        '                l:f32[] = log1p k\n'
        '                m:f32[] = add e l\n'
        '                n:f32[] = select_n g m h\n'
        '              in (n,) }\n'
        '            jvp=_logaddexp_jvp\n'
        '            symbolic_zeros=False\n'
        '          ] a 0.0:f32[]\n'
        '        in (b,) }\n'
        '    ] a\n'
        '  in (b,) }'
    ),
    'logaddexp': (
        '{ lambda ; a:f32[] b:f32[]. let\n'
        '    c:f32[] = custom_jvp_call[\n'
        '      name=logaddexp\n'
        '      call_jaxpr={ lambda ; d:f32[] e:f32[]. let\n'
        '          f:f32[] = max d e\n'
        '          g:f32[] = sub d e\n'
        '          h:bool[] = ne g g\n'
        '          i:f32[] = add d e\n'
        '          j:f32[] = abs g\n'
        '          k:f32[] = neg j\n'
        '          l:f32[] = exp k\n'
        '          m:f32[] = log1p l\n'
        '          n:f32[] = add f m\n'
        '          o:f32[] = select_n h n i\n'
        '        in (o,) }\n'
        '      jvp=_logaddexp_jvp\n'
        '      symbolic_zeros=False\n'
        '    ] a b\n'
        '  in (c,) }'
    ),
    'silu': (
        '{ lambda ; a:f32[2]. let\n'
        '    b:f32[2] = jit[\n'
        '      name=silu\n'
        '      jaxpr={ lambda ; a:f32[2]. let\n'
        '          c:f32[2] = logistic a\n'
        '          b:f32[2] = mul a c\n'
        '        in (b,) }\n'
        '    ] a\n'
        '  in (b,) }'
    ),
    'floor_divide': (
        '{ lambda ; a:i32[3]. let\n'
        '    b:i32[3] = jit[\n'
        '      name=floor_divide\n'
        '      jaxpr={ lambda ; a:i32[3] c:i32[]. let\n'
        '          d:i32[] = convert_element_type[new_dtype=int32 weak_type=False] c\n'
        '          e:i32[3] = div a d\n'
        '          f:i32[3] = sign a\n'
        '          g:i32[] = sign d\n'
        '          h:bool[3] = ne f g\n'
        '          i:i32[3] = rem a d\n'
        '          j:bool[3] = ne i 0:i32[]\n'
        '          k:bool[3] = and h j\n'
        '          l:i32[3] = sub e 1:i32[]\n'
        '          b:i32[3] = jit[\n'
        '            name=_where\n'
        '            jaxpr={ lambda ; k:bool[3] l:i32[3] e:i32[3]. let\n'
        '                b:i32[3] = select_n k e l\n'
        '              in (b,) }\n'
        '          ] k l e\n'
        '        in (b,) }\n'
        '    ] a 2:i32[]\n'
        '  in (b,) }'
    ),
    'scatter-add': (
        '{ lambda ; a:f32[5] b:i32[2]. let\n'
        '    c:bool[2] = lt b 0:i32[]\n'
        '    d:i32[2] = add b 5:i32[]\n'
        '    e:i32[2] = select_n c b d\n'
        '    f:i32[2,1] = broadcast_in_dim[broadcast_dimensions=(0,)] e\n'
        '    g:f32[2] = broadcast_in_dim 2.0:f32[]\n'
        '    h:f32[5] = scatter-add[\n'
        '      dimension_numbers=ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), '
        'scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=())\n'
        '      indices_are_sorted=False\n'
        '      mode=GatherScatterMode.FILL_OR_DROP\n'
        '      unique_indices=False\n'
        '      update_consts=()\n'
        '      update_jaxpr={ lambda ; i:f32[] j:f32[]. let k:f32[] = add i j in (k,) }\n'
        '    ] a f g\n'
        '  in (h,) }'
    ),
    'scatter': (
        '{ lambda ; a:f32[5] b:i32[2]. let\n'
        '    c:bool[2] = lt b 0:i32[]\n'
        '    d:i32[2] = add b 5:i32[]\n'
        '    e:i32[2] = select_n c b d\n'
        '    f:i32[2,1] = broadcast_in_dim[broadcast_dimensions=(0,)] e\n'
        '    g:f32[2] = broadcast_in_dim 2.0:f32[]\n'
        '    h:f32[5] = scatter[\n'
        '      dimension_numbers=ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), '
        'scatter_dims_to_operand_dims=(0,), operand_batching_dims=(), scatter_indices_batching_dims=())\n'
        '      indices_are_sorted=False\n'
        '      mode=GatherScatterMode.FILL_OR_DROP\n'
        '      unique_indices=False\n'
        '      update_consts=()\n'
        '      update_jaxpr=None\n'
        '    ] a f g\n'
        '  in (h,) }'
    ),
    'pure_callback': (
        '{ lambda ; a:f32[3]. let\n'
        '    b:f32[3] = pure_callback[\n'
        '      callback=_FlatCallback(callback_func=<function cb at 0xXXXXXXXXXXXX>, in_tree=PyTreeDef(((*,), {})))\n'
        '      result_avals=(ShapedArray(float32[3]),)\n'
        '      sharding=None\n'
        '      vmap_method=None\n'
        '    ] a\n'
        '  in (b,) }'
    ),
    'io_callback': (
        '{ lambda ; a:f32[3]. let\n'
        '    b:f32[3] = io_callback[\n'
        '      callback=_FlatCallback(callback_func=<function cb at 0xXXXXXXXXXXXX>, in_tree=PyTreeDef(((*,), {})))\n'
        '      ordered=True\n'
        '      result_avals=(ShapedArray(float32[3]),)\n'
        '      sharding=None\n'
        '    ] a\n'
        '  in (b,) }'
    ),
    'debug.print': (
        '{ lambda ; a:f32[]. let\n'
        '    debug_print[\n'
        '      fmt=x = {}\n'
        '      has_placeholders=True\n'
        '      in_tree=PyTreeDef(((*,), {}))\n'
        '      logging_record=None\n'
        "      np_printoptions=(('edgeitems', 3), ('threshold', 1000), ('floatmode', 'maxprec'), ('precision', 8), "
        "('suppress', False), ('linewidth', 75), ('nanstr', 'nan'), ('infstr', 'inf'), ('sign', '-'), "
        "('formatter', None), ('legacy', False), ('override_repr', None))\n"
        '      ordered=False\n'
        '      partitioned=False\n'
        '      static_args=()\n'
        '    ] a\n'
        '  in (a,) }'
    ),
    'debug.callback': (
        '{ lambda ; a:f32[]. let\n'
        '    debug_callback[\n'
        '      callback=<function debug_callback.<locals>._debug_callback.<locals>._flat_callback at 0xXXXXXXXXXXXX>\n'
        '      effect=OrderedDebug\n'
        '      partitioned=False\n'
        '    ] a\n'
        '  in (a,) }'
    ),
    'donated': (
        '{ lambda ; a:f32[2,2] b:f32[2,2]. let\n'
        '    c:f32[2,2] = jit[\n'
        '      name=<lambda>\n'
        '      donated_invars=(True, False)\n'
        '      jaxpr={ lambda ; a:f32[2,2] b:f32[2,2]. let\n'
        '          c:f32[2,2] = dot_general[\n'
        '            dimension_numbers=(([1], [0]), ([], []))\n'
        '            preferred_element_type=float32\n'
        '          ] a b\n'
        '        in (c,) }\n'
        '      keep_unused=True\n'
        '    ] a b\n'
        '  in (c,) }'
    ),
    'inline': (
        '{ lambda ; a:f32[]. let\n'
        '    b:f32[] = mul a 2.0:f32[]\n'
        '    c:f32[] = add b 1.0:f32[]\n'
        '  in (c,) }'
    ),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_print_as_jax_0_10_2(name):
    assert PROGRAMS[name](_load("ember"), ejnp) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_expected_texts_are_jaxs(name):
    jax = _load("jax")
    assert PROGRAMS[name](jax, jax.jnp) == EXPECTED[name]


def test_add_any_compiles_to_add():
    """``add_any`` (the sum differentiation makes) is a call of ``add``: compiled, it fuses as one."""
    f = ember.jit(ember.grad(lambda x: ejnp.sum(ejnp.tanh(x) ** 2)))
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    t = np.tanh(x)
    np.testing.assert_allclose(np.asarray(f(x)), 2 * t * (1 - t) * (1 + t), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.vmap(ember.grad(lambda a: a * a * a))(x)), 3 * x * x, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.grad(ember.grad(lambda a: a * a * a))(2.0)), 12.0)


# --- tracers -------------------------------------------------------------------------------------------
EXPECTED_TRACERS = [
    "JitTracer(~float32[])",
    "JitTracer(int32[2,3])",
    "GradTracer(primal=1.0, typeof(tangent)=f32[])",
    "GradTracer(primal=[1. 1. 1.], typeof(tangent)=f32[3])",
    "VmapTracer(aval=float32[], batched=float32[3])",
    "GradTracer(primal=JitTracer(~float32[]), typeof(tangent)=f32[])",
    "JVPTracer(primal=1.0, tangent=1.0)",
    "JVPTracer(primal=[1. 1.], tangent=[1. 1.])",
    "GradTracer(primal=1.0, typeof(tangent)=f32[])",
    "GradTracer(primal=[1. 1.], typeof(tangent)=f16[2])",
    "GradTracer(primal=2.0, typeof(tangent)=f32[])",
    "GradTracer(primal=GradTracer(primal=1.0, typeof(tangent)=f32[]), typeof(tangent)=f32[])",
    "GradTracer(primal=VmapTracer(aval=float32[], batched=float32[2]), typeof(tangent)=f32[])",
    "JitTracer(~float32[]) JitTracer(float32[])",
]


def _tracer_reprs(m) -> list[str]:
    top, jnp, lax = m.top, m.jnp, m.lax
    seen: list[str] = []

    def show(*xs):
        seen.append(" ".join(map(str, xs)))

    top.jit(lambda x: show(x))(1.)
    top.jit(lambda x: show(repr(x)))(jnp.ones((2, 3), jnp.int32))
    top.grad(lambda x: show(x) or x)(1.)
    top.grad(lambda x: show(x) or x.sum())(jnp.ones(3))
    top.vmap(lambda x: show(x) or x)(jnp.ones(3))
    top.jit(top.grad(lambda x: show(x) or x))(1.)
    top.jvp(lambda x: show(x) or x, (1.,), (1.,))
    top.jvp(lambda x: show(x) or x, (jnp.ones(2),), (jnp.ones(2),))
    top.linearize(lambda x: show(x) or x, 1.)
    top.vjp(lambda x: show(x) or x, jnp.ones(2, jnp.float16))
    top.grad(lambda x: show(x * 2) or x)(1.)
    top.grad(top.grad(lambda x: show(x) or x))(1.)
    top.vmap(top.grad(lambda x: show(x) or x))(jnp.ones(2))
    lax.scan(lambda c, x: (show(c, x), (c, None))[1], 0., jnp.ones(2))
    return seen


@pytest.mark.parametrize("which", ["ember", "jax"])
def test_tracers_print_as_jax_0_10_2(which):
    assert _tracer_reprs(_load(which)) == EXPECTED_TRACERS


# --- pytree structures ---------------------------------------------------------------------------------
Point = collections.namedtuple("Point", "x y")


class Box:
    def __init__(self, x):
        self.x = x


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


def _register(tu) -> None:
    tu.register_pytree_node(Box, lambda b: ((b.x,), "x"), lambda aux, children: Box(*children))
    tu.register_pytree_node(Pair, lambda p: ((p.a, p.b), {"k": (1, "a")}), lambda aux, children: Pair(*children))


EXPECTED_STRUCTURES = {
    "leaf": "PyTreeDef(*)",
    "none": "PyTreeDef(None)",
    "dict": "PyTreeDef({'a': *, 'b': (*, *)})",
    "list": "PyTreeDef([*, [*, None]])",
    "1-tuple": "PyTreeDef((*,))",
    "empty": "PyTreeDef(())",
    "namedtuple": "PyTreeDef(CustomNode(namedtuple[Point], [*, *]))",
    "custom": "PyTreeDef(CustomNode(Box[x], [*]))",
    "custom aux": "PyTreeDef(CustomNode(Pair[{'k': (1, 'a')}], [*, [*]]))",
    "OrderedDict": "PyTreeDef(CustomNode(OrderedDict[('b', 'a')], [*, *]))",
    "defaultdict": "PyTreeDef(CustomNode(defaultdict[(<class 'list'>, ('a',))], [*]))",
    "nested": "PyTreeDef({'p': [CustomNode(namedtuple[Point], [*, (*,)]), {'z': None}]})",
    "args": "PyTreeDef(((*,), {}))",
}


def _structures(tu) -> dict[str, str]:
    trees = {
        "leaf": 1.0, "none": None, "dict": {"b": (2, 3), "a": 1}, "list": [1, [2, None]], "1-tuple": (1,),
        "empty": (), "namedtuple": Point(1, 2), "custom": Box(1), "custom aux": Pair(1, [2]),
        "OrderedDict": collections.OrderedDict([("b", 1), ("a", 2)]),
        "defaultdict": collections.defaultdict(list, {"a": 1}),
        "nested": {"p": [Point(1, (2,)), {"z": None}]}, "args": ((1,), {}),
    }
    return {k: repr(tu.tree_structure(v)) for k, v in trees.items()}


def test_pytree_structures_print_as_jax_0_10_2():
    _register(tree_util)
    got = _structures(tree_util)
    assert got == EXPECTED_STRUCTURES
    assert str(tree_util.tree_structure({"a": 1})) == "PyTreeDef({'a': *})"
    # Still optree's type: equal to (and as fast as) the structures ember's dispatch flattens to.
    leaves, treedef = tree_util.flatten_for_key(((Box(1.0),), {}))
    assert type(treedef) is tree_util.PyTreeDef and treedef == tree_util.tree_structure(((Box(2.0),), {}))


def test_the_expected_structures_are_jaxs():
    jax = _load("jax")
    _register(jax.top.tree_util)
    assert _structures(jax.top.tree_util) == EXPECTED_STRUCTURES


def test_structures_of_other_optree_namespaces_keep_optrees_repr():
    import optree
    optree.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda aux, c: Pair(*c), namespace="elsewhere")
    assert repr(optree.tree_structure(Pair(1, 2), namespace="elsewhere")).startswith("PyTreeSpec(CustomTreeNode(")


# --- saved residuals -----------------------------------------------------------------------------------
RESIDUALS_PROGRAM = textwrap.dedent("""\
    import sys
    if sys.argv[1] == "ember":
        import ember
        ember.install_as_jax()
    import jax, jax.numpy as jnp
    from jax.ad_checkpoint import print_saved_residuals, checkpoint_name

    def g(W, x):
      y = jnp.dot(W, x)
      return jnp.sin(y)

    def f(W1, W2, x):
      x = jax.checkpoint(g)(W1, x)
      return checkpoint_name(g(W2, x), "out")

    print_saved_residuals(f, jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones(4))
    print_saved_residuals(jax.checkpoint(f, policy=jax.checkpoint_policies.save_only_these_names("out")),
                          jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones(4))
    """)
EXPECTED_RESIDUALS = """\
f32[5,4] from the argument W1
f32[6,5] from the argument W2
f32[4] from the argument x
f32[5] output of sin from {file}:10:9 (g)
f32[6] output of cos from {file}:10:9 (g)
f32[5,4] from the argument W1
f32[6,5] from the argument W2
f32[4] from the argument x
"""


@pytest.mark.parametrize("which", ["ember", "jax"])
def test_saved_residuals_name_the_users_line(which, tmp_path):
    """Each residual's line ends with where the user's code computed it (file:line:column (function))."""
    if which == "jax":
        pytest.importorskip("jax")
    script = tmp_path / "residuals.py"
    script.write_text(RESIDUALS_PROGRAM)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # (this checkout's ember)
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get(
        "PYTHONPATH")])))
    out = subprocess.run([sys.executable, str(script), which], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == EXPECTED_RESIDUALS.format(file=script)


def test_saved_residuals_in_process():
    def g(w, x):
        return ejnp.sin(w @ x)

    line = inspect.getsourcelines(g)[1] + 1
    found = saved_residuals(lambda w, x: g(w, x).sum(), ejnp.ones((3, 2)), ejnp.ones(2))
    last = found[-1]
    assert (last[0].str_short(), last[1]) == ("f32[3]", f"output of cos from {__file__}:{line}:15 (g)")
