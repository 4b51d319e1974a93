"""ember.jit: static arguments, pytrees, the cache (by trace counts), errors."""
import functools
from collections import namedtuple

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import tree_util


def counting(fn):
    """Wrap ``fn`` so that each trace (each Python execution) is counted."""
    calls = []

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    wrapper.calls = calls
    return wrapper


def test_traced_once_per_signature():
    f = counting(lambda x, y: x * y + 1)
    jf = ember.jit(f)
    jf(jnp.ones(3), jnp.ones(3))
    jf(jnp.ones(3), jnp.zeros(3))           # same signature: cached
    assert len(f.calls) == 1
    jf(jnp.ones(4), jnp.ones(4))            # new shape: retrace
    jf(jnp.ones(3, jnp.int32), jnp.ones(3, jnp.int32))  # new dtype: retrace
    assert len(f.calls) == 3
    jf(1.0, jnp.ones(3))                    # weak-typed scalar
    jf(jnp.asarray(np.float32(1.0)), jnp.ones(3))  # strong scalar: new key
    assert len(f.calls) == 5
    info = jf.cache_info()
    assert info.traces == 5 and info.currsize == 5 and info.hits == 1 and info.misses == 5


def test_static_argnums_cache_by_value():
    f = counting(lambda x, n: x * n)
    jf = ember.jit(f, static_argnums=1)
    assert jf(jnp.ones(2), 3).tolist() == [3.0, 3.0]
    jf(jnp.ones(2), 3)
    jf(jnp.ones(2), 4)
    assert len(f.calls) == 2


def test_static_argnames_by_keyword_and_position():
    f = counting(lambda x, n=2: x * n)
    jf = ember.jit(f, static_argnames="n")
    assert jf(jnp.ones(2), n=5).tolist() == [5.0, 5.0]
    assert jf(jnp.ones(2), 5).tolist() == [5.0, 5.0]   # positional use of a static name
    assert jf(jnp.ones(2)).tolist() == [2.0, 2.0]       # the default stays a Python value
    assert len(f.calls) == 3


def test_partial_jit_with_static_argnames():
    @functools.partial(ember.jit, static_argnames=["n"])
    def power(x, n):
        out = x
        for _ in range(n - 1):
            out = out * x
        return out

    assert power(jnp.asarray(2.0), n=3) == 8.0
    assert power(jnp.asarray(2.0), 4) == 16.0


def test_unhashable_static_argument_is_a_clear_error():
    jf = ember.jit(lambda x, shape: ember.lax.reshape(x, shape), static_argnums=1)
    with pytest.raises(ValueError, match=r"Non-hashable static argument 'shape'.*list"):
        jf(jnp.ones(4), [2, 2])


def test_static_argnames_naming_no_parameter():
    with pytest.raises(ValueError, match=r"static_argnames names 'm', which is not a parameter of f"):
        def f(x, n):
            return x

        ember.jit(f, static_argnames=["m"])
    with pytest.raises(ValueError, match="static_argnums contains 5"):
        ember.jit(lambda x: x, static_argnums=5)


def test_keyword_and_default_arguments():
    @ember.jit
    def f(x, y=2.0, *, scale=3.0):
        return (x + y) * scale

    assert f(1.0) == 9.0
    assert f(1.0, y=1.0) == 6.0
    assert f(1.0, 1.0, scale=1.0) == 2.0


Point = namedtuple("Point", ["x", "y"])


@tree_util.register_pytree_node_class
class Box:
    def __init__(self, value, label):
        self.value, self.label = value, label

    def tree_flatten(self):
        return (self.value,), self.label

    @classmethod
    def tree_unflatten(cls, label, children):
        return cls(children[0], label)


def test_pytree_arguments_and_outputs():
    f = counting(lambda tree: {"sum": tree["a"] + tree["b"][0], "pt": Point(tree["b"][1], None),
                               "box": Box(tree["box"].value * 2, tree["box"].label)})
    jf = ember.jit(f)
    out = jf({"a": jnp.ones(2), "b": (jnp.ones(2), 3.0), "box": Box(jnp.ones(1), "tag")})
    assert out["sum"].tolist() == [2.0, 2.0]
    assert isinstance(out["pt"], Point) and out["pt"].x == 3.0 and out["pt"].y is None
    assert isinstance(out["box"], Box) and out["box"].label == "tag" and out["box"].value.tolist() == [2.0]
    jf({"a": jnp.zeros(2), "b": (jnp.zeros(2), 1.0), "box": Box(jnp.zeros(1), "tag")})
    assert len(f.calls) == 1
    jf({"a": jnp.zeros(2), "b": (jnp.zeros(2), 1.0), "box": Box(jnp.zeros(1), "other")})  # aux data differs
    assert len(f.calls) == 2


def test_methods_and_closures():
    class Model:
        def __init__(self, w):
            self.w = w

        @ember.jit
        def apply(self, x):
            return x * 2

        @functools.partial(ember.jit, static_argnums=0)
        def apply_static(self, x):
            return x * self.w

    m = Model(3.0)
    with pytest.raises(TypeError, match="argument `self` of apply: a value of type Model is not an array"):
        m.apply(jnp.ones(2))
    assert m.apply_static(jnp.ones(2)).tolist() == [3.0, 3.0]
    scale = jnp.asarray(5.0)
    assert ember.jit(lambda x: x * scale)(2.0) == 10.0


def test_outputs_are_arrays_even_for_python_values():
    out = ember.jit(lambda x: (x, 1.0, 2))(jnp.ones(2))
    assert isinstance(out[1], ember.Array) and out[1].weak_type and out[2].dtype == jnp.int32


def test_non_array_argument_is_a_clear_error():
    with pytest.raises(TypeError, match="static_argnums"):
        ember.jit(lambda x, s: x)(1.0, "hello")


def test_donate_argnums_is_accepted():
    f = ember.jit(lambda x: x + 1, donate_argnums=0)
    assert f(jnp.ones(2)).tolist() == [2.0, 2.0]


def test_disable_jit_runs_op_by_op():
    seen = []

    @ember.jit
    def f(x):
        seen.append(type(x))
        return x * 2

    with ember.disable_jit():
        assert f(jnp.ones(2)).tolist() == [2.0, 2.0]
    assert seen == [ember.Array]


def test_x64_flag_is_part_of_the_cache_key():
    f = counting(lambda x: x + 1)
    jf = ember.jit(f)
    assert jf(1.0).dtype == jnp.float32
    with ember.config.override(enable_x64=True):
        assert jf(1.0).dtype == jnp.float64
    assert len(f.calls) == 2


def test_numpy_inputs_are_not_aliased():
    x = np.ones(3, np.float32)
    out = ember.jit(lambda a: a)(x)
    x[0] = 5.0
    assert out.tolist() == [1.0, 1.0, 1.0]
    assert x.flags.writeable


def test_make_jaxpr_with_static_arguments():
    def f(x, n):
        for _ in range(n):
            x = x * 2.0
        return x

    text = str(ember.make_jaxpr(f, static_argnums=1)(jnp.ones(2), 3))
    assert text.count("mul") == 3
    text = str(ember.make_jaxpr(f, static_argnames="n")(jnp.ones(2), n=2))
    assert text.count("mul") == 2


def test_eval_shape_runs_nothing():
    calls = []

    def f(x, y):
        calls.append(1)
        return {"sum": x + y, "cast": x.astype(jnp.int8)}

    out = ember.eval_shape(f, ember.ShapeDtypeStruct((2, 3), jnp.float32), jnp.ones(3))
    assert out["sum"] == ember.ShapeDtypeStruct((2, 3), jnp.float32)
    assert out["cast"].dtype == jnp.int8 and len(calls) == 1


def test_tree_namespace():
    assert ember.tree.map(lambda v: v * 2, {"a": (1, 2), "b": None}) == {"a": (2, 4), "b": None}
    leaves, treedef = ember.tree.flatten([1, (2, 3)])
    assert leaves == [1, 2, 3] and ember.tree.unflatten(treedef, [4, 5, 6]) == [4, (5, 6)]
    assert ember.tree.reduce(lambda a, b: a + b, [1, 2, 3]) == 6


def test_jit_of_jit_keeps_each_wrapper_state():
    f = counting(lambda x: x * 2)
    inner = ember.jit(f)
    outer = ember.jit(inner, static_argnums=())
    assert outer(jnp.ones(2)).tolist() == [2.0, 2.0]
    assert outer.fun is inner and inner.fun is f
    assert outer.__name__ == inner.__name__ == "<lambda>"
