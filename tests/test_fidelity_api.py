"""JAX's API names, messages and exception classes, held for ember and (where installed) for JAX.

Each case runs against ember and against JAX 0.10.2 with the same assertions (exact exception
class, message content), so that ember cannot drift from what a JAX user meets: ``jax.jacobian``,
``ShapeDtypeStruct.like``, ``jax.typeof``, ``jax.test_util.check_grads``; item assignment;
broadcasting errors from operators, ``jnp`` and ``lax``; ``jnp.transpose`` with repeated axes;
non-numeric ``jnp.asarray``; dtype comparisons; mixed-dtype ``lax.dot_general``; ``.at[]`` arithmetic
on booleans; and ``jnp`` functions and operators refusing lists and tuples.
"""
from __future__ import annotations

import importlib
import re
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import ember
import ember.numpy as ejnp
from ember import lax as elax


def _load(which: str) -> SimpleNamespace:
    if which == "ember":
        return SimpleNamespace(name="ember", top=ember, jnp=ejnp, lax=elax,
                               test_util=importlib.import_module("ember.test_util"))
    jax = pytest.importorskip("jax")
    return SimpleNamespace(name="jax", top=jax, jnp=importlib.import_module("jax.numpy"),
                           lax=importlib.import_module("jax.lax"), test_util=importlib.import_module("jax.test_util"))


@pytest.fixture(params=["ember", "jax"])
def api(request: pytest.FixtureRequest) -> SimpleNamespace:
    return _load(request.param)


def _raises(cls: type, fn, *fragments: str) -> str:
    """``fn()`` raises exactly ``cls`` (not a subclass) with every fragment in its message."""
    with pytest.raises(Exception) as info:
        fn()
    assert type(info.value) is cls, f"{type(info.value).__name__}: {info.value}"
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


# --- 1. API names ------------------------------------------------------------------------------------
def test_jacobian_is_jacrev(api):
    def f(x, y):
        return api.jnp.sin(x) * y

    x, y = np.array([0.5, 1.0, 2.0], np.float32), np.float32(3.0)
    jac = api.top.jacobian(f)(x, y)
    np.testing.assert_allclose(np.asarray(jac), np.asarray(api.top.jacrev(f)(x, y)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jac), np.diag(np.cos(x) * 3.0), rtol=1e-6)
    both = api.top.jacobian(f, argnums=(0, 1), has_aux=False, holomorphic=False, allow_int=False)(x, y)
    assert np.asarray(both[1]).shape == (3,)


def test_shape_dtype_struct_like(api):
    like = api.top.ShapeDtypeStruct.like
    assert repr(like(api.jnp.ones((2, 3)))) == "ShapeDtypeStruct(shape=(2, 3), dtype=float32)"
    assert repr(like(np.ones(4, np.int32))) == "ShapeDtypeStruct(shape=(4,), dtype=int32)"
    assert repr(like(1.0)) == "ShapeDtypeStruct(shape=(), dtype=float32, weak_type=True)"
    assert like(1.0) != api.top.ShapeDtypeStruct((), np.float32)  # the weak type is part of it
    assert like(like(api.jnp.ones(3))) == api.top.ShapeDtypeStruct((3,), np.float32)
    _raises(TypeError, lambda: like([1, 2]), "Cannot interpret value of type <class 'list'> as an abstract array")


def test_typeof(api):
    typeof = api.top.typeof
    assert str(typeof(api.jnp.ones(3))) == "float32[3]"
    assert repr(typeof(api.jnp.ones((2, 3)))) == "ShapedArray(float32[2,3])"
    assert str(typeof(1.0)) == "~float32[]" and repr(typeof(2)) == "ShapedArray(int32[], weak_type=True)"
    assert str(typeof(np.ones(2))) == "float32[2]" and str(typeof(True)) == "bool[]"
    t = typeof(api.jnp.ones(3, np.int32))
    assert (t.shape, t.dtype, t.weak_type) == ((3,), np.int32, False)
    seen = []
    api.top.jit(lambda x: seen.append(str(typeof(x))) or x)(api.jnp.ones((2, 2)))
    api.top.grad(lambda x: seen.append(str(typeof(x))) or x.sum())(api.jnp.ones(3))
    assert seen == ["float32[2,2]", "float32[3]"]
    _raises(TypeError, lambda: typeof([1, 2]), "Argument '[1, 2]' of type '<class 'list'>' is not a valid JAX type")


def test_check_grads(api):
    jnp, check_grads = api.jnp, api.test_util.check_grads
    x = np.array([0.3, 0.7, 1.2], np.float32)
    check_grads(jnp.sin, (x,), 2)
    check_grads(lambda a, b: jnp.sum(a * b ** 2), (x, x + 1), 1, modes=("fwd", "rev"), atol=1e-2, rtol=1e-2)
    check_grads(lambda a: a ** 3, (1.5,), 2, modes=("rev",), eps=1e-3)

    @api.top.custom_jvp
    def wrong(a):
        return jnp.sin(a)

    wrong.defjvp(lambda primals, tangents: (jnp.sin(primals[0]), 2.0 * jnp.cos(primals[0]) * tangents[0]))
    for modes in (("fwd",), ("rev",)):
        with pytest.raises(AssertionError):
            check_grads(wrong, (x,), 1, modes=modes)


# --- 2. messages a new user meets ------------------------------------------------------------------------
def test_item_assignment_is_refused_with_the_at_form(api):
    x = api.jnp.zeros(3)

    def assign():
        x[0] = 1

    message = _raises(TypeError, assign, "arrays are immutable and do not support in-place item assignment",
                      ".at[")
    if api.name == "ember":
        assert "x = x.at[0].set(1)" in message

    def traced(y):
        y[1:2] = 0.5
        return y

    message = _raises(TypeError, lambda: api.top.jit(traced)(x), "immutable")
    if api.name == "ember":
        assert "x = x.at[1:2].set(0.5)" in message


def test_concretization_fix_does_not_make_arrays_static():
    def f(a):
        return a if a > 0 else -a

    for array in (ejnp.ones(3)[0], ejnp.asarray(2.0)):  # a strongly and a weakly typed array
        message = _raises(ember.errors.TracerBoolConversionError, lambda: ember.jit(f)(array), "Fix:")
        fix = message.split("Fix:", 1)[1]
        assert "static_argnames" not in fix and "mark it static" not in fix
        assert "lax.cond" in fix and "jnp.where" in fix and "lax.while_loop" in fix
    fix = _raises(ember.errors.TracerBoolConversionError, lambda: ember.jit(f)(2.0), "Fix:").split("Fix:", 1)[1]
    assert "static_argnames=('a',)" in fix  # a Python value can be static

    def g(x, n):
        return ejnp.zeros(n) + x

    # A traced shape is JAX's plain TypeError ("Shapes must be 1D sequences of concrete values ..."),
    # carrying the tracer's explanation and fix.
    fix = _raises(TypeError, lambda: ember.jit(g)(1.0, ejnp.asarray(3)), "Shapes must be 1D sequences", "Fix:")
    assert "static_argnames" not in fix.split("Fix:", 1)[1]


SAME_RANK = "add got incompatible shapes for broadcasting: (3,), (4,)."
BROADCAST_CASES = {
    "operator +": (lambda a: a.jnp.ones(3) + a.jnp.ones(4), TypeError, SAME_RANK),
    "operator + numpy": (lambda a: a.jnp.ones(3) + np.ones(4), TypeError, SAME_RANK),
    "operator -": (lambda a: a.jnp.ones(3) - a.jnp.ones(4), TypeError, "sub got incompatible shapes"),
    "operator <": (lambda a: a.jnp.ones(3) < a.jnp.ones(4), TypeError, "lt got incompatible shapes"),
    "jnp.add": (lambda a: a.jnp.add(a.jnp.ones(3), a.jnp.ones(4)), TypeError, SAME_RANK),
    "jnp.multiply": (lambda a: a.jnp.multiply(a.jnp.ones((2, 3)), a.jnp.ones((3, 2))), TypeError,
                     "mul got incompatible shapes for broadcasting: (2, 3), (3, 2)."),
    "jnp.maximum": (lambda a: a.jnp.maximum(a.jnp.ones(3), a.jnp.ones(4)), TypeError, "max got incompatible"),
    "jit operator +": (lambda a: a.top.jit(lambda x, y: x + y)(a.jnp.ones(3), a.jnp.ones(4)), TypeError, SAME_RANK),
    "lax.add": (lambda a: a.lax.add(a.jnp.ones(3), a.jnp.ones(4)), TypeError, SAME_RANK),
    "lax.add ranks": (lambda a: a.lax.add(a.jnp.ones(3), a.jnp.ones((1, 3))), TypeError,
                      "add: arrays must have the same number of dimensions, got {1, 2}"),
    "operator * ranks": (lambda a: a.jnp.ones(3) * a.jnp.ones((2, 4)), ValueError,
                         "Incompatible shapes for broadcasting: shapes=[(3,), (2, 4)]"),
    "jnp.broadcast_shapes": (lambda a: a.jnp.broadcast_shapes((3,), (4,)), ValueError,
                             "Incompatible shapes for broadcasting: shapes=[(3,), (4,)]"),
    "jnp.broadcast_arrays": (lambda a: a.jnp.broadcast_arrays(a.jnp.ones(3), a.jnp.ones(4)), ValueError,
                             "Incompatible shapes for broadcasting: shapes=[(3,), (4,)]"),
    "jnp.where": (lambda a: a.jnp.where(a.jnp.ones(3) > 0, a.jnp.ones(3), a.jnp.ones(4)), ValueError,
                  "Incompatible shapes for broadcasting: shapes=[(3,), (3,), (4,)]"),
    "jnp.broadcast_to": (lambda a: a.jnp.broadcast_to(a.jnp.ones(3), (4,)), ValueError,
                         "Incompatible types for broadcasting: input type=float32[3] and requested type=float32[4]"),
    "lax.select": (lambda a: a.lax.select(a.jnp.ones(3) > 0, a.jnp.ones(3), a.jnp.ones(4)), TypeError,
                   "select cases must have the same shapes, got [(4,), (3,)]."),
}


@pytest.mark.parametrize("case", list(BROADCAST_CASES))
def test_broadcasting_errors_name_the_operation(api, case):
    fn, cls, fragment = BROADCAST_CASES[case]
    _raises(cls, lambda: fn(api), fragment)


def test_python_scalar_conversions_of_arrays(api):
    """Control-flow tutorial: ``is_even and (x > 0)`` on an array of three elements is NumPy's
    ValueError. int() / float() / complex() take only 0-d arrays (even of one element), and
    __index__ only 0-d integer ones."""
    jnp = api.jnp
    x = jnp.array([-1, 2, 5])
    _raises(ValueError, lambda: (x % 2 == 0) and (x > 0), "The truth value of an array with more than one "
            "element is ambiguous. Use a.any() or a.all()")
    _raises(ValueError, lambda: bool(jnp.ones(0)), "The truth value of an empty array is ambiguous. Use "
            "`array.size > 0` to check that an array is not empty.")
    assert bool(jnp.ones((1, 1))) is True and int(jnp.array(3.7)) == 3 and complex(jnp.array(2.0)) == 2
    scalars = "Only scalar arrays can be converted to Python scalars; got arr.ndim="
    _raises(TypeError, lambda: int(jnp.ones(1)), scalars + "1")
    _raises(TypeError, lambda: float(jnp.ones((2, 2))), scalars + "2")
    _raises(TypeError, lambda: complex(jnp.ones(3)), scalars + "1")
    index = "Only integer scalar arrays can be converted to a scalar index."
    assert [1, 2, 3][jnp.array(1)] == 2 and list(range(jnp.array(3, jnp.uint8))) == [0, 1, 2]
    _raises(TypeError, lambda: [1, 2][jnp.array([1])], index)
    _raises(TypeError, lambda: [1, 2][jnp.array(1.0)], index)
    _raises(TypeError, lambda: [1, 2][jnp.array(True)], index)


# --- 3. exception classes --------------------------------------------------------------------------------
def test_float_of_a_differentiated_value_is_a_concretization_error(api):
    """Under grad / jacfwd, float(), complex() and .tolist() of the value being differentiated refuse
    (they would drop its derivative: grad of x * float(x) was 2 at 2.0, not 4); bool(), int(),
    indexing and .item() see the concrete primal, as in JAX."""
    top = api.top
    for transform in (top.grad, top.jacfwd):
        for fn in (lambda x: x * float(x), lambda x: x * complex(x).real, lambda x: x * x.tolist()):
            _raises(top.errors.ConcretizationTypeError, lambda: transform(fn)(2.0))
        assert float(transform(lambda x: x * int(x))(2.0)) == 2.0
        assert float(transform(lambda x: x * x.item())(2.0)) == 2.0
        assert float(transform(lambda x: x if x > 1 else -x)(2.0)) == 1.0
        assert float(transform(lambda x: x * [1.0, 2.0, 3.0][x.astype(int)])(2.0)) == 3.0
        assert float(transform(lambda x: x * float(top.lax.stop_gradient(x)))(2.0)) == 2.0


@pytest.mark.parametrize("index", [1.0, np.array([1.0]), (0, 1.5), np.float16(2), 1j], ids=repr)
def test_non_integer_indices_are_type_errors(api, index):
    x = api.jnp.ones((3, 3))
    dtype = np.asarray(index[1] if isinstance(index, tuple) else index).dtype.name
    _raises(TypeError, lambda: x[index], "Indexer must have integer or boolean type", dtype)
    _raises(TypeError, lambda: x.at[index].set(2.0), "Indexer must have integer or boolean type")
    _raises(TypeError, lambda: api.top.jit(lambda a, i: a[i])(x, 1.0), "got indexer with type float32")


def test_string_and_object_indices(api):
    x = api.jnp.ones(3)
    _raises(TypeError, lambda: x["a"], "string indexing", "idx='a'")
    _raises(IndexError, lambda: x[object()], "only integers, slices")


def test_transpose_with_repeated_or_missing_axes(api):
    x = api.jnp.ones((2, 3))
    permutation = "transpose permutation isn't a permutation of operand dimensions, got permutation (0, 0)"
    _raises(TypeError, lambda: api.jnp.transpose(x, (0, 0)), permutation, "for operand shape (2, 3).")
    _raises(TypeError, lambda: x.transpose((0, 0)), permutation)
    _raises(TypeError, lambda: api.lax.transpose(x, (0, 0)), permutation)
    _raises(TypeError, lambda: api.jnp.transpose(x, (0,)), "got permutation (0,)")
    _raises(ValueError, lambda: api.jnp.transpose(x, (0, 2)), "axis 2 is out of bounds")
    assert api.jnp.transpose(x, (-1, 0)).shape == (3, 2)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (NumPy's, from inside JAX)
def test_asarray_of_non_numeric_values(api):
    for value in ([1, "a"], "a", ["a", "b"]):
        message = _raises(TypeError, lambda: api.jnp.asarray(value), "Value 'a' with dtype <U1 is not a valid",
                          "Only arrays of numeric types are supported")
        assert re.search(r"is not a valid \w+ array type", message)
    _raises(ValueError, lambda: api.jnp.asarray([1, None]), "None is not a valid value for jnp.array")


def test_dtypes_compare_unequal_to_other_objects(api):
    jnp = api.jnp
    for other in ({"a": 1}, {"a": "f4"}, {"a": (1,)}, [1, 2], "float32", None, object()):
        assert (jnp.float32 == other) is False and (jnp.float32 != other) is True
        assert (jnp.dtype("float32") == other) is (other == "float32")
    assert jnp.float32 == np.float32 and jnp.float32 == jnp.dtype("float32") and jnp.float32 == jnp.float32
    assert jnp.float32 != jnp.int32 and hash(jnp.float32) == hash(np.float32)


def test_dot_general_of_mixed_dtypes(api):
    lax, jnp = api.lax, api.jnp
    numbers = (((0,), (0,)), ((), ()))
    i32, u8 = jnp.array([1, -2, 3], np.int32), jnp.array([200, 2, 255], np.uint8)
    for out in (lax.dot_general(i32, u8, numbers), lax.dot_general(u8, i32, numbers),
                api.top.jit(lambda a, b: lax.dot_general(a, b, numbers))(i32, u8)):
        assert out.dtype == np.int32 and int(out) == 961
    narrow = lax.dot_general(i32.astype(np.int8), u8, numbers)  # the signed type of one width: int8 wraps
    assert narrow.dtype == np.int8 and int(narrow) == -63
    wide = lax.dot_general(i32.astype(np.float16), i32.astype(np.float32), numbers)
    assert wide.dtype == np.float32 and float(wide) == 14.0
    preferred = lax.dot_general(i32, u8, numbers, preferred_element_type=np.float32)
    assert preferred.dtype == np.float32 and float(preferred) == 961.0


def test_at_arithmetic_on_booleans(api):
    x = api.jnp.zeros(3, bool)
    accepted = "Accepted dtypes at position 0 are subtypes of integer, floating, complexfloating."
    _raises(TypeError, lambda: x.at[0].add(True), "add does not accept dtype bool at position 0.", accepted)
    _raises(TypeError, lambda: x.at[0].multiply(True), "mul does not accept dtype bool at position 0.")
    _raises(TypeError, lambda: x.at[0].subtract(True), "sub does not accept dtype bool at position 0.")
    _raises(TypeError, lambda: api.top.jit(lambda y: y.at[1].add(True))(x), "add does not accept dtype bool")
    assert x.at[0].set(True).tolist() == [True, False, False]
    assert x.at[2].max(True).tolist() == [False, False, True]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # (JAX warns of the int32 -> bool cast)
        assert x.at[1].add(1).tolist() == [False, True, False]  # computed in the promoted int32


# --- 4. jnp functions refuse lists and tuples -------------------------------------------------------------
def _message(name: str, kind: str, pos: int, none: bool = False) -> str:
    kinds = "ndarray, scalar, or None" if none else "ndarray or scalar"
    return f"{name} requires {kinds} arguments, got <class '{kind}'> at position {pos}."


REFUSED = {
    "sum": (lambda j: j.sum([1, 2, 3]), _message("sum", "list", 0)),
    "mean tuple": (lambda j: j.mean((1.0, 2.0)), _message("mean", "tuple", 0)),
    "sum where": (lambda j: j.sum(j.ones(2), where=[True, False]), _message("sum", "list", 0)),
    "add second": (lambda j: j.add(1, [3, 4]), _message("add", "list", 1)),
    "abs alias": (lambda j: j.abs([-1.0]), _message("absolute", "list", 0)),
    "divide alias": (lambda j: j.divide(j.ones(2), [1.0, 2.0]), _message("true_divide", "list", 1)),
    "where": (lambda j: j.where(j.ones(2) > 0, [1.0, 2.0], 0.0), _message("where", "list", 1)),
    "reshape": (lambda j: j.reshape([1.0, 2.0], (2,)), _message("reshape", "list", 0)),
    "take indices": (lambda j: j.take(j.ones(3), [0, 1]), _message("take", "list", 1)),
    "concatenate": (lambda j: j.concatenate([j.ones(2), [3.0]]), _message("concatenate", "list", 1)),
    "stack": (lambda j: j.stack([[1.0, 2.0], [3.0, 4.0]]), _message("stack", "list", 0)),
    "full_like": (lambda j: j.full_like(j.ones(2), [1.0, 2.0]), _message("full_like", "list", 1)),
    "zeros_like": (lambda j: j.zeros_like([1.0, 2.0]), _message("zeros_like", "list", 0)),
    "dot": (lambda j: j.dot(j.ones(2), [1.0, 2.0]), _message("dot", "list", 1)),
    "einsum": (lambda j: j.einsum("i,i->", j.ones(2), [1.0, 2.0]), _message("einsum", "list", 1)),
    "select": (lambda j: j.select([j.ones(2) > 0], [[1.0, 2.0]]), _message("select", "list", 1)),
    "sum of None": (lambda j: j.sum(None), _message("sum", "NoneType", 0)),
    "arange": (lambda j: j.arange([3]), _message("arange", "list", 0, none=True)),
    "linalg.norm": (lambda j: j.linalg.norm([1.0, 2.0]), _message("jnp.linalg.norm", "list", 0)),
    "linalg.solve": (lambda j: j.linalg.solve(j.eye(2), [1.0, 2.0]), _message("jnp.linalg.solve", "list", 1)),
}

ACCEPTED = {
    "array": lambda j: j.array([1, 2]),
    "asarray": lambda j: j.asarray(([1.0], [2.0])),
    "shape list": lambda j: j.reshape(j.ones(4), [2, 2]),
    "axis list": lambda j: j.sum(j.ones((2, 2)), axis=[0, 1]),
    "scalars in a list": lambda j: j.stack([1.0, 2.0]),
    "arrays in a list": lambda j: j.concatenate([j.ones(2), np.ones(1)]),
    "pad widths": lambda j: j.pad(j.ones(2), [(1, 1)]),
    "tile reps": lambda j: j.tile(j.ones(2), [2]),
    "delete slice": lambda j: j.delete(j.ones(4), slice(0, 2)),
    "numpy and scalars": lambda j: j.add(np.ones(2), np.float32(1)),
    "block": lambda j: j.block([[1.0, 2.0], [3.0, 4.0]]),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_jnp_functions_refuse_lists(api, case):
    fn, message = REFUSED[case]
    _raises(TypeError, lambda: fn(api.jnp), message)


def test_jnp_functions_take_lists_only_where_jax_does(api):
    _raises(TypeError, lambda: api.jnp.sum([1, 2, 3]), "sum requires ndarray or scalar arguments")
    for fn in ACCEPTED.values():  # the arguments that are not arrays, and jnp.array itself
        fn(api.jnp)


def test_operators_refuse_lists_and_tuples(api):
    x = api.jnp.ones(3)
    _raises(TypeError, lambda: x + [1.0, 2.0, 3.0], "unsupported operand type(s) for +:", "'list'")
    _raises(TypeError, lambda: [1.0, 2.0, 3.0] + x, "unsupported operand type(s) for +: 'list' and")
    _raises(TypeError, lambda: x * (1.0, 2.0, 3.0), "unsupported operand type(s) for *:", "'tuple'")
    _raises(TypeError, lambda: (1.0, 2.0, 3.0) * x, "unsupported operand type(s) for *: 'tuple' and")
    _raises(TypeError, lambda: x - [1.0, 2.0, 3.0], "unsupported operand type(s) for -:")
    _raises(TypeError, lambda: x == [1.0, 2.0, 3.0], "unsupported operand type(s) for ==:", "'list'")
    _raises(TypeError, lambda: x < [1.0, 2.0, 3.0], "'<' not supported between instances of")
    assert (x == None) is False  # noqa: E711  (Python's fallback, as in JAX)
    assert (x + np.ones(3)).tolist() == [2.0, 2.0, 2.0]


def test_jit_trace_gives_a_traced_stage(api):
    def f(x, scale=2.0):
        return {"y": api.jnp.sin(x) * scale}

    jitted = api.top.jit(f)
    traced = jitted.trace(np.ones(3, np.float32), scale=3.0)
    assert [str(v.aval) for v in traced.jaxpr.jaxpr.invars][0].startswith(("f32[3]", "float32[3]"))
    assert "sin" in str(traced.jaxpr)
    out = traced.out_info["y"]
    assert (out.shape, out.dtype) == ((3,), np.float32)
    compiled = traced.lower().compile()
    np.testing.assert_allclose(np.asarray(compiled(np.ones(3, np.float32), scale=3.0)["y"]), np.sin(1.0) * 3,
                               rtol=1e-6)
    shaped = jitted.trace(api.top.ShapeDtypeStruct((2,), np.float32))  # abstract arguments trace too
    assert shaped.out_info["y"].shape == (2,)


_PRINTED_PROGRAMS = {  # programs that ember and JAX stage alike: the printed text must be JAX 0.10's
    "reduce_sum": lambda m, jnp, x: jnp.sum(x, axis=1),
    "reduce_max": lambda m, jnp, x: jnp.max(x),
    "broadcast_in_dim": lambda m, jnp, x: jnp.broadcast_to(x[0], (4, 3)) + 1.0,
    "reshape": lambda m, jnp, x: x.reshape(3, 2),
    "slice": lambda m, jnp, x: x[:, 1:],
    "dot_general": lambda m, jnp, x: x @ x.T,
    "argmax": lambda m, jnp, x: jnp.argmax(x, 1),
    "chain": lambda m, jnp, x: jnp.sin(jnp.cos(x)),
    "jit": lambda m, jnp, x: m.jit(jnp.sin)(x) * 2.0,
    "while": lambda m, jnp, x: m.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2), (0, x)),
    "cond": lambda m, jnp, x: m.lax.cond(True, lambda a: a, lambda a: -a, x),
    "scan": lambda m, jnp, x: m.lax.scan(lambda c, a: (c + a, a * 2.0), x[0], x),
    "unused value": lambda m, jnp, x: (jnp.sin(x), x + 1.0)[1],  # printed `_`, taking no name
    "unused output": lambda m, jnp, x: m.lax.sort((x, x + 1.0), num_keys=1)[1],
    # jnp functions that JAX writes as jitted functions: named jit sub-programs
    "where, scalar": lambda m, jnp, x: jnp.where(x > 0, x, 0.0),
    "where, rows": lambda m, jnp, x: jnp.where(x > 0, x, x[0]),
    "where, ints": lambda m, jnp, x: jnp.where(x > 0, 1, 0),
    "grad of where": lambda m, jnp, x: m.grad(lambda a: jnp.where(a > 0, a, 0.0).sum())(x),
    "clip": lambda m, jnp, x: jnp.clip(x, 0.0, 1.0),
    "cumsum": lambda m, jnp, x: jnp.cumsum(x, axis=1),
    "sort": lambda m, jnp, x: jnp.sort(x, axis=0),
    "diff": lambda m, jnp, x: jnp.diff(x),
    "flip": lambda m, jnp, x: jnp.flip(x, 1),
    "isinf": lambda m, jnp, x: jnp.isinf(x),
    "round": lambda m, jnp, x: jnp.round(x, 2),
    # sub-programs reached twice, or longer than 10 equations: printed first, as `let name = ... in`
    "jit called twice": lambda m, jnp, x: (lambda g: g(x) + g(x))(m.jit(lambda a: a * 2.0)),
    "long scan body": lambda m, jnp, x: m.lax.scan(
        lambda c, a: (jnp.sin(jnp.sin(jnp.sin(jnp.sin(jnp.sin(jnp.sin(c * a))))) * 2.0 + 1.0) - 3.0, c), x[0], x),
}


@pytest.mark.parametrize("name", sorted(_PRINTED_PROGRAMS))
def test_jaxprs_print_as_jax_prints_them(name):
    jax = _load("jax")
    x = np.ones((2, 3), np.float32)
    program = _PRINTED_PROGRAMS[name]
    want = str(jax.top.make_jaxpr(lambda x: program(jax.top, jax.jnp, x))(x))
    assert str(ember.make_jaxpr(lambda x: program(ember, ejnp, x))(x)) == want


def test_errors_from_user_code_under_jit_show_the_users_frames_only(monkeypatch):
    import os
    import traceback
    package = os.path.dirname(os.path.abspath(ember.__file__)) + os.sep

    def f(x):
        return ejnp.ones(3) + ejnp.ones(4)

    for entry in (ember.jit(f), ember.make_jaxpr(f), lambda x: ember.eval_shape(f, x)):
        with pytest.raises(TypeError, match="add got incompatible shapes") as info:
            entry(1.0)
        files = [frame.filename for frame in traceback.extract_tb(info.value.__traceback__)]
        assert not any(os.path.abspath(name).startswith(package) for name in files), files
        assert files[-1] == __file__  # the user's line (`ejnp.ones(3) + ejnp.ones(4)`) is the last frame
        notes = getattr(info.value, "__notes__", ["EMBER_TRACEBACK_FILTERING=off"])  # (Python 3.10: no notes)
        assert "EMBER_TRACEBACK_FILTERING=off" in "".join(notes)
    monkeypatch.setenv("EMBER_TRACEBACK_FILTERING", "off")
    with pytest.raises(TypeError) as info:
        ember.jit(f)(1.0)
    assert any(os.path.abspath(frame.filename).startswith(package)
               for frame in traceback.extract_tb(info.value.__traceback__))


def test_the_readme_lists_exactly_the_missing_jax_names():
    import pathlib

    from ember.compat import jax as compat
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    listed = readme.split("<!-- missing-jax-names -->\n")[1].split("\n  <!-- /missing-jax-names -->")[0]
    assert listed == compat.missing_names_markdown(), (
        "README.md's list of missing JAX names is out of date; replace it with:\n" + compat.missing_names_markdown())


def test_tracers_print_as_jax_0_10s(api):
    seen = []
    api.top.jit(lambda x: seen.append(repr(x)) or x)(1.0)
    api.top.jit(lambda x: seen.append(repr(x)) or x)(np.ones(2, np.int32))
    api.top.grad(lambda x: seen.append(repr(x)) or x)(1.0)
    assert seen[:2] == ["JitTracer(~float32[])", "JitTracer(int32[2])"]
    assert seen[2].startswith("GradTracer(primal=") and seen[2].endswith("typeof(tangent)=f32[])")


def test_vmap_tracers_show_their_batch_as_jax_0_10s(api):
    seen = []

    def look(x, y):
        seen.append((repr(x), repr(x * 1.0), x.val.shape, x.batch_dim))
        return x

    api.top.vmap(look, in_axes=(1, None))(np.ones((2, 3), np.int32), 1.0)
    assert seen == [("VmapTracer(aval=int32[2], batched=int32[2,3])",
                     "VmapTracer(aval=~float32[2], batched=~float32[2,3])", (2, 3), 1)]


def test_a_vjp_function_is_a_pytree_that_crosses_jit(api):
    jnp = api.jnp
    pull = api.top.jit(lambda x: api.top.vjp(jnp.sin, x)[1])(1.0)
    assert len(api.top.tree_util.tree_leaves(pull)) >= 1  # its residuals
    np.testing.assert_allclose(pull(1.0)[0], np.cos(1.0), rtol=1e-6)
    np.testing.assert_allclose(api.top.jit(lambda f, c: f(c))(pull, 2.0)[0], 2 * np.cos(1.0), rtol=1e-6)


def _top_level_calls(make_jaxpr, fn) -> list[str] | None:
    """The names of the ``jit`` equations at the top of ``fn``'s program, for the first argument
    list it accepts (None if it accepts none)."""
    a = np.linspace(0.1, 0.9, 12, dtype=np.float32).reshape(3, 4)
    for args in ((a,), (a, a), (a > 0.5, a, a), (a, np.array([2, 0], np.int32))):
        try:
            closed = make_jaxpr(fn)(*args)
        except Exception:
            continue
        return [str(e.params.get("name")) for e in closed.jaxpr.eqns]
    return None


def test_jnp_functions_are_staged_under_jaxs_names():
    from ember.numpy.staging import STAGED
    jax = _load("jax")
    checked = 0
    for public in sorted(STAGED):
        if not hasattr(ejnp, public):
            continue
        want = _top_level_calls(jax.top.make_jaxpr, getattr(jax.jnp, public))
        got = _top_level_calls(ember.make_jaxpr, getattr(ejnp, public))
        assert want is not None and got == want, (public, got, want)
        checked += 1
    assert checked >= 75


def test_staged_functions_run_eagerly_without_tracing():
    x = ejnp.arange(7.0)  # (a shape no other test traces clip with)
    program = ejnp.clip.staged_program
    before = program.cache_info().traces
    np.testing.assert_array_equal(np.asarray(ejnp.clip(x, 1, 4)), np.clip(np.arange(7.0), 1, 4))
    assert program.cache_info().traces == before  # eagerly: no trace, no compile
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda a: ejnp.clip(a, 1, 4))(x)), np.clip(np.arange(7.0), 1, 4))
    assert program.cache_info().traces == before + 1  # under jit: the body, traced once
    assert program.cache_info().compiles == 0  # (and inlined into the caller's program, not compiled)
    # a static argument that cannot be hashed runs inline, unstaged, with the same result
    text = str(ember.make_jaxpr(lambda a: ejnp.flip(a, axis=[0, 1]))(x.reshape(7, 1)))
    assert "jit" not in text and "rev" in text


_DTYPE_REQUESTS = {
    "zeros int64": (lambda a: a.jnp.zeros(2, a.jnp.int64), "int64"),
    "array float64": (lambda a: a.jnp.array([1, 2], dtype=np.float64), "float64"),
    "astype": (lambda a: a.jnp.ones(3).astype(a.jnp.float64), "float64"),
    "sum": (lambda a: a.jnp.sum(a.jnp.ones(3), dtype=a.jnp.float64), "float64"),
    "full": (lambda a: a.jnp.full(3, 1, dtype="float64"), "float64"),
    "eye": (lambda a: a.jnp.eye(2, dtype=a.jnp.float64), "float64"),
    "uint64": (lambda a: a.jnp.zeros(2, a.jnp.uint64), "uint64"),
    "complex128": (lambda a: a.jnp.zeros(2, a.jnp.complex128), "complex128"),
    "uniform": (lambda a: a.top.random.uniform(a.top.random.key(0), (3,), dtype=a.jnp.float64), "float64"),
    "randint": (lambda a: a.top.random.randint(a.top.random.key(0), (2,), 0, 5, dtype=a.jnp.int64), "int64"),
}


@pytest.mark.parametrize("case", sorted(_DTYPE_REQUESTS))
def test_explicit_64_bit_requests_warn_while_x64_is_off(api, case):
    fn, name = _DTYPE_REQUESTS[case]
    with pytest.warns(UserWarning, match=f"Explicitly requested dtype {name} .*is not available"):
        out = fn(api)
    assert out.dtype.itemsize <= (8 if name == "complex128" else 4)


@pytest.mark.parametrize("case", sorted(_DTYPE_REQUESTS))
def test_a_64_bit_request_names_the_function_called_as_jax_does(case):
    """JAX's warning says which function the request came from ("requested in astype"), where it
    tells one; ember's says the same, and points at the caller's line."""
    fn, _ = _DTYPE_REQUESTS[case]

    def request(a):
        a.top.clear_caches()  # (JAX warns while it traces: a function it traced before would not)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(a)
        found = [w for w in caught if "Explicitly requested" in str(w.message)]
        return str(found[0].message).split(" To enable")[0], found[0].filename

    (ours, where), (theirs, _) = request(_load("ember")), request(_load("jax"))
    assert ours == theirs
    assert where == __file__


def test_python_types_and_32_bit_requests_do_not_warn(api):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        api.jnp.arange(3, dtype=float)
        api.jnp.asarray(1, dtype=int)
        api.jnp.array([1, 2], dtype=api.jnp.float32)


# --- 5. lax binary operations broadcast size-1 dimensions (JAX 0.10) ------------------------------------
# JAX's rule: the binary lax operations (arithmetic, min/max, pow, atan2, nextafter, complex, the
# comparisons, the bitwise and shift operations) take operands of one rank whose dimensions agree
# or are 1 (rank-0 operands broadcast to anything); operands of different ranks are a TypeError
# ("arrays must have the same number of dimensions"), other sizes "incompatible shapes". lax.select
# and lax.clamp keep their own rules.
_FLOAT_BINARY = ("add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter", "eq", "ne", "lt",
                 "le", "gt", "ge", "complex")
_INT_BINARY = ("bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right_logical",
               "shift_right_arithmetic", "div", "rem", "max", "min")


@pytest.mark.parametrize("shapes", [((3, 1), (1, 4)), ((1,), (3,)), ((2, 1, 5), (2, 3, 1)), ((0, 1), (1, 4))],
                         ids=str)
def test_lax_binary_operations_broadcast_size_one_dimensions(api, shapes):
    lax = api.lax
    a_shape, b_shape = shapes
    want_shape = np.broadcast_shapes(a_shape, b_shape)
    a = np.linspace(0.5, 2.0, int(np.prod(a_shape)), dtype=np.float32).reshape(a_shape)
    b = np.linspace(1.5, 0.25, int(np.prod(b_shape)), dtype=np.float32).reshape(b_shape)
    for name in _FLOAT_BINARY:
        out = getattr(lax, name)(a, b)
        assert out.shape == want_shape, (name, out.shape)
        expected = getattr(lax, name)(np.broadcast_to(a, want_shape), np.broadcast_to(b, want_shape))
        # (to a rounding: XLA may divide by a broadcast operand through its reciprocal)
        np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-6, err_msg=name)
    ia, ib = (np.arange(1, x.size + 1, dtype=np.int32).reshape(x.shape) % 5 for x in (a, b))
    for name in _INT_BINARY:
        out = getattr(lax, name)(ia, ib + 1)
        assert out.shape == want_shape and out.dtype == np.int32, name
    assert api.top.jit(lax.add)(a, b).shape == want_shape
    assert api.top.vmap(lax.mul, (None, 0))(a, np.stack([b, b])).shape == (2, *want_shape)
    grads = api.top.grad(lambda x, y: lax.mul(x, y).sum(), (0, 1))(a, b)
    assert [g.shape for g in grads] == [a_shape, b_shape]
    np.testing.assert_allclose(np.asarray(grads[0]), np.broadcast_to(b, want_shape).sum(
        axis=tuple(d for d, n in enumerate(a_shape) if n == 1 and want_shape[d] != 1), keepdims=True), rtol=1e-6)


def test_lax_binary_broadcasting_errors(api):
    lax, jnp = api.lax, api.jnp
    _raises(TypeError, lambda: lax.add(jnp.ones((3, 2)), jnp.ones((1, 4))),
            "add got incompatible shapes for broadcasting: (3, 2), (1, 4).")
    _raises(TypeError, lambda: lax.mul(jnp.ones(3), jnp.ones((1, 3))),
            "mul: arrays must have the same number of dimensions, got {1, 2}")
    _raises(TypeError, lambda: lax.select(jnp.ones((3, 1)) > 0, jnp.ones((3, 1)), jnp.ones((1, 4))),
            "select cases must have the same shapes")
    _raises(TypeError, lambda: lax.clamp(jnp.zeros((3, 1)), jnp.ones((3, 4)), 1.0), "clamp requires min.shape")


# --- 6. comparisons of weakly typed values are weak bools (JAX 0.10) ----------------------------------
# JAX's rule: an elementwise operation's result is weakly typed when all its operands are, the
# comparisons and is_finite included. The promotion lattice has no weak bool: a weak bool joins
# another bool as a strong one, and a Python int or a weak int as a weak int32.
_WEAK_CASES = {
    "array(1.) > 0": (lambda a: a.jnp.array(1.0) > 0, True),
    "asarray(1.) < 2.": (lambda a: a.jnp.asarray(1.0) < 2.0, True),
    "array(1) == 1": (lambda a: a.jnp.array(1) == 1, True),
    "weak > weak": (lambda a: a.jnp.array(1.0) > a.jnp.array(0.5), True),
    "jit(x > 0)(1.)": (lambda a: a.top.jit(lambda x: x > 0)(1.0), True),
    "jit(x > y)(1, 2.)": (lambda a: a.top.jit(lambda x, y: x > y)(1, 2.0), True),
    "ones(2) > 0": (lambda a: a.jnp.ones(2) > 0, False),
    "float32(1) == weak": (lambda a: a.lax.eq(a.jnp.float32(1), a.jnp.array(1.0)), False),
    "isnan": (lambda a: a.jnp.isnan(a.jnp.array(1.0)), True),
    "isfinite": (lambda a: a.jnp.isfinite(a.jnp.array(1.0)), True),
    "lax.is_finite": (lambda a: a.lax.is_finite(a.jnp.array(1.0)), True),
    "isinf": (lambda a: a.jnp.isinf(a.jnp.array(1.0)), False),
    "signbit": (lambda a: a.jnp.signbit(a.jnp.array(1.0)), False),
    "~(weak bool)": (lambda a: ~(a.jnp.array(1.0) > 0), True),
    "logical_not": (lambda a: a.jnp.logical_not(a.jnp.array(1.0)), True),
    "logical_and(weak bools)": (lambda a: a.jnp.logical_and(a.jnp.array(1.0) > 0, a.jnp.array(1.0) < 2), False),
    "logical_and(weak floats)": (lambda a: a.jnp.logical_and(a.jnp.array(1.0), a.jnp.array(2.0)), True),
    "weak bool & weak bool": (lambda a: (a.jnp.array(1.0) > 0) & (a.jnp.array(1.0) < 2), False),
    "weak bool + 1": (lambda a: (a.jnp.array(1.0) > 0) + 1, True),
    "weak bool + int8": (lambda a: (a.jnp.array(1.0) > 0) + a.jnp.int8(1), False),
    "weak bool * 2.": (lambda a: (a.jnp.array(1.0) > 0) * 2.0, True),
    "where(weak bool, 1, 2)": (lambda a: a.jnp.where(a.jnp.array(1.0) > 0, 1, 2), True),
    "isin": (lambda a: a.jnp.isin(a.jnp.array(1.0), a.jnp.array(1.0)), False),
}


@pytest.mark.parametrize("case", sorted(_WEAK_CASES))
def test_comparisons_of_weak_values_are_weak_bools(api, case):
    fn, weak = _WEAK_CASES[case]
    out = fn(api)
    assert out.weak_type is weak, (case, out.dtype, out.weak_type)
    if case.startswith("weak bool +"):
        assert out.dtype == (np.int8 if "int8" in case else np.int32)


# --- 7. input JAX accepts or refuses ------------------------------------------------------------------
def test_select_takes_an_array_of_conditions(api):
    jnp = api.jnp
    x = jnp.arange(6.0)
    want = [0.0, 1.0, 9.0, 9.0, 9.0, -5.0]

    def choose(x):
        return jnp.select(jnp.stack([x < 2, x > 4]), jnp.stack([x, -x]), 9.0)

    assert choose(x).tolist() == want and api.top.jit(choose)(x).tolist() == want
    assert jnp.select([x < 2, x > 4], [x, -x], 9.0).tolist() == want
    _raises(ValueError, lambda: jnp.select(jnp.zeros((0, 6), bool), jnp.zeros((0, 6)), 9.0),
            "condlist must be non-empty")
    _raises(ValueError, lambda: jnp.select([x < 2], [x, -x]), "condlist must have length equal to choicelist (1 vs 2)")


def test_ix_takes_any_numeric_type_and_refuses_booleans(api):
    jnp = api.jnp
    (floats,) = jnp.ix_(jnp.array([1.0, 2.0]))
    assert floats.dtype == np.float32 and floats.tolist() == [1.0, 2.0]
    rows, cols = jnp.ix_(jnp.array([1, 2], np.uint8), jnp.array([0]))
    assert rows.shape == (2, 1) and rows.dtype == np.uint8 and cols.shape == (1, 1)
    _raises(NotImplementedError, lambda: jnp.ix_(jnp.array([True, False])),
            "Boolean arguments to jax.numpy.ix_ are not implemented")
    _raises(ValueError, lambda: jnp.ix_(jnp.ones((2, 2), np.int32)),
            "Arguments to jax.numpy.ix_ must be 1-dimensional, got shape (2, 2)")


def test_roll_converts_a_non_integer_shift(api):
    jnp = api.jnp
    x = jnp.arange(6.0)
    one = [5.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    for shift in (1.5, jnp.array(1.7), True):
        assert jnp.roll(x, shift).tolist() == one, shift
    assert jnp.roll(x, -0.5).tolist() == x.tolist()
    assert api.top.jit(lambda x, s: jnp.roll(x, s))(x, 1.5).tolist() == one
    assert jnp.roll(x.reshape(2, 3), (1.5, 2.5), axis=(0, 1)).tolist() == [[4.0, 5.0, 3.0], [1.0, 2.0, 0.0]]


def test_delete_errors_and_traced_unique_indices(api):
    jnp, jit = api.jnp, api.top.jit
    x = jnp.arange(6.0)
    _raises(ValueError, lambda: jnp.delete(x, 1.5),
            "np.delete(arr, obj): got obj.dtype=float64; must be integer or bool.")
    _raises(ValueError, lambda: jnp.delete(x, jnp.array([1.0])), "got obj.dtype=float32; must be integer or bool")
    _raises(ValueError, lambda: jnp.delete(x, 10), "axis 10 is out of bounds for array of dimension 6")
    _raises(ValueError, lambda: jnp.delete(x, -7), "axis -7 is out of bounds for array of dimension 6")
    _raises(IndexError, lambda: jnp.delete(x, jnp.array([10])), "index 10 is out of bounds for axis 0 with size 6")
    for obj in (jnp.array([1]), 1):
        _raises(api.top.errors.ConcretizationTypeError, lambda: jit(lambda x, i: jnp.delete(x, i))(x, obj),
                "'obj' array argument of jnp.delete()")
    unique = jit(lambda x, i: jnp.delete(x, i, assume_unique_indices=True))
    assert unique(x, jnp.array([1])).tolist() == [0.0, 2.0, 3.0, 4.0, 5.0]
    assert unique(x, jnp.array([4, 1, -1])).tolist() == [0.0, 2.0, 3.0]
    assert unique(x, 1).tolist() == [0.0, 2.0, 3.0, 4.0, 5.0]
    assert unique(x, jnp.array([10, 0])).tolist() == [1.0, 2.0, 3.0, 4.0]  # (clipped into range first)
    assert jnp.delete(x.reshape(2, 3), jnp.array([1]), axis=1, assume_unique_indices=True).tolist() == \
        [[0.0, 2.0], [3.0, 5.0]]
    assert jnp.delete(x, jnp.array([1, 1, 2])).tolist() == [0.0, 3.0, 4.0, 5.0]
    assert jnp.delete(x, x > 3).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_dynamic_slice_starts_share_one_integer_type(api):
    lax, jnp = api.lax, api.jnp
    x = jnp.arange(6.0).reshape(2, 3)
    mixed = "index arguments to dynamic_slice must be integers of the same type, got: int8, int32"
    _raises(TypeError, lambda: lax.dynamic_slice(x, (jnp.int8(1), 0), (1, 2)), mixed)
    _raises(TypeError, lambda: lax.dynamic_slice(x, (np.int8(1), 0), (1, 2)), mixed)
    _raises(TypeError, lambda: api.top.jit(lambda i: lax.dynamic_slice(x, (i, 0), (1, 2)))(jnp.int8(1)), mixed)
    _raises(TypeError, lambda: lax.dynamic_slice(x, (jnp.uint32(1), 0), (1, 2)), "got: uint32, int32")
    _raises(TypeError, lambda: lax.dynamic_slice(x, (1.0, 0), (1, 2)), "got: float32, int32")
    _raises(TypeError, lambda: lax.dynamic_update_slice(x, jnp.zeros((1, 2)), (jnp.uint8(1), 0)),
            "index arguments to dynamic_update_slice must be integers of the same type, got uint8, int32")
    for starts in ((jnp.int8(1), jnp.int8(0)), (jnp.int32(1), 0), (1, 0), (jnp.asarray(1), 0)):
        assert lax.dynamic_slice(x, starts, (1, 2)).tolist() == [[3.0, 4.0]]
    assert lax.dynamic_slice_in_dim(x, jnp.int8(1), 1, 1).tolist() == [[1.0], [4.0]]
    assert lax.dynamic_update_index_in_dim(x, jnp.zeros(2), jnp.uint8(1), 1).tolist() == [[0.0, 0.0, 2.0],
                                                                                         [3.0, 0.0, 5.0]]
    batched = api.top.vmap(lambda y: lax.dynamic_slice(y, (jnp.uint8(1), jnp.uint8(0)), (1, 2)))(jnp.stack([x, x]))
    assert batched.shape == (2, 1, 2)


def test_full_casts_integers_that_do_not_fit(api):
    jnp = api.jnp
    for value, dtype, want in ((2**31, None, -(2**31)), (2**32 + 3, None, 3), (-(2**31) - 1, None, 2**31 - 1),
                               (2**63, None, 0), (300, np.int8, 44), (-1, np.uint8, 255), (300.7, np.int8, 127),
                               (2**31, np.float32, 2.0**31)):
        out = jnp.full(2, value, dtype)
        assert out.tolist() == [want, want], (value, dtype)
        assert out.weak_type is (dtype is None), (value, dtype)  # (weak for a Python scalar, as JAX's)
    assert jnp.full_like(jnp.zeros(2, np.int8), 2**31 + 5).tolist() == [5, 5]
    assert api.top.jit(lambda: jnp.full(2, 2**31))().tolist() == [-(2**31)] * 2
    _raises(OverflowError, lambda: jnp.full(2, 2**64), "Python int too large to convert to C long")


def test_shapes_given_as_scalars_and_traced_shapes(api):
    """"Thinking in JAX": ``x.reshape(jnp.array(x.shape).prod())`` under jit is a plain TypeError; a
    NumPy integer is a shape for the reshape method and an int for broadcast_to."""
    jnp, jit = api.jnp, api.top.jit
    x = jnp.ones((2, 3))
    assert x.reshape(np.int64(6)).shape == (6,) and x.reshape(jnp.array(6)).shape == (6,)
    assert x.reshape(3, 2).shape == (3, 2) and x.reshape([3, -1]).shape == (3, 2)
    assert jnp.broadcast_to(jnp.ones(3), 3).shape == (3,)
    assert jnp.broadcast_to(jnp.ones(3), np.int64(3)).shape == (3,)
    concrete = "Shapes must be 1D sequences of concrete values of integer type, got "
    _raises(TypeError, lambda: jit(lambda x: x.reshape(jnp.array(x.shape).prod()))(x), concrete + "[")
    _raises(TypeError, lambda: jit(lambda x: jnp.reshape(x, jnp.array(x.shape).prod()))(x), concrete + "[")
    _raises(TypeError, lambda: jit(lambda x: x.reshape(3, x.sum().astype(int)))(x), concrete + "(3, ")
    _raises(TypeError, lambda: jit(lambda x: jnp.broadcast_to(x, (x.sum().astype(int), 2)))(x), concrete + "(")
    _raises(TypeError, lambda: x.reshape(6.0), concrete + "[6.0].")
    _raises(TypeError, lambda: jnp.broadcast_to(jnp.ones(3), (3.0,)), concrete + "(3.0,).")
    _raises(TypeError, lambda: jnp.zeros(2.0), concrete + "(2.0,).")


def test_jacobian_blocks_of_integer_values_are_integer_zeros(api):
    """jacfwd's block for an integer output, and jacrev's (allow_int) for an integer input, are zeros
    of that value's dtype and weak type (the control-flow tutorial's jacfwd of a while_loop whose
    carry holds a Python int counter); grad keeps float0."""
    top, jnp, lax = api.top, api.jnp, api.lax
    counter, power = top.jacfwd(lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x),
                                                         (0, 1.)))(2.)
    assert (counter.dtype, counter.weak_type, counter.tolist()) == (np.int32, True, 0)
    assert (power.dtype, power.weak_type, power.tolist()) == (np.float32, True, 12.0)
    ints, small, same = top.jacfwd(lambda x: (x.astype(int), x.astype(jnp.uint8), x))(jnp.ones(2))
    assert (ints.dtype, ints.weak_type, ints.tolist()) == (np.int32, False, [[0, 0], [0, 0]])
    assert (small.dtype, small.shape) == (np.uint8, (2, 2)) and same.tolist() == [[1, 0], [0, 1]]
    assert top.jit(top.jacfwd(lambda x: {"n": 3, "x": x}))(2.)["n"].dtype == np.int32
    dx, dn = top.jacrev(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(jnp.ones(2), jnp.arange(2))
    assert dx.tolist() == [[0, 0], [0, 1]] and (dn.dtype, dn.tolist()) == (np.int32, [[0, 0], [0, 0]])
    dn = top.jacrev(lambda x, n: x * n, argnums=1, allow_int=True)(2., 3)
    assert (dn.dtype, dn.weak_type, dn.tolist()) == (np.int32, True, 0)
    assert top.grad(lambda x, n: x * n, argnums=1, allow_int=True)(2., 3).dtype == top.dtypes.float0


# --- 8. exception classes, continued ----------------------------------------------------------------------
def test_copysign_and_heaviside_of_shapes_that_do_not_broadcast(api):
    jnp = api.jnp
    _raises(ValueError, lambda: jnp.copysign(jnp.ones(4), jnp.ones(3)),
            "Incompatible shapes for broadcasting: shapes=[(3,), (4,), (4,)]")
    _raises(ValueError, lambda: api.top.jit(jnp.heaviside)(jnp.ones(4), jnp.ones(3)),
            "Incompatible shapes for broadcasting: shapes=[(4,), (4,), (3,)]")
    assert jnp.copysign(jnp.ones((3, 1)), -jnp.ones(4)).shape == (3, 4)
    steps = jnp.heaviside(jnp.array([np.nan, -1.0, 0.0, 2.0, -0.0]), jnp.array([0.5, 0.5, 0.5, 0.5, np.nan]))
    np.testing.assert_array_equal(np.asarray(steps), [np.nan, 0.0, 0.5, 1.0, np.nan])  # (NaN stays NaN)


def test_gathers_on_an_empty_axis(api):
    jnp = api.jnp
    slice_size = "Slice size at index 0 in gather op is out of range, must be within [0, 0 + 1), got 1."
    _raises(TypeError, lambda: jnp.zeros(0)[jnp.array([0])], slice_size)
    _raises(TypeError, lambda: jnp.zeros(0).at[jnp.array([0])].get(mode="clip"), slice_size)
    _raises(TypeError, lambda: api.top.jit(lambda x, i: x[i])(jnp.zeros(0), jnp.array([0])), slice_size)
    _raises(TypeError, lambda: jnp.zeros((3, 0))[:, jnp.array([0, 1])], "Slice size at index 1 in gather op")
    _raises(IndexError, lambda: jnp.zeros(0)[0], "index is out of bounds for axis 0 with size 0")
    _raises(IndexError, lambda: jnp.take(jnp.zeros(0), jnp.array([0])), "Cannot do a non-empty jnp.take()")
    assert jnp.zeros(0)[jnp.array([], np.int32)].shape == (0,)
    assert jnp.zeros(0).at[jnp.array([0])].set(1.0).shape == (0,)
    assert jnp.take_along_axis(jnp.zeros(0), jnp.array([0]), 0).tolist() == [0.0]


def test_take_indices_of_the_wrong_type(api):
    jnp = api.jnp
    x = jnp.arange(3.0)
    for indices in (jnp.array([1.0]), 1.0):
        _raises(ValueError, lambda: jnp.take(x, indices), "indices must have an integer type")
    _raises(ValueError, lambda: api.top.jit(jnp.take)(x, jnp.array([1.0])), "indices must have an integer type")
    assert jnp.take(x, jnp.array([True])).tolist() == [1.0]  # (booleans read as 0 and 1)
    _raises(TypeError, lambda: jnp.take_along_axis(x, jnp.array([1.0]), 0),
            "take_along_axis indices must be of integer type, got float32")


def test_moveaxis_with_repeated_axes(api):
    jnp = api.jnp
    x = jnp.ones((2, 3, 4))
    for source in ((0, 0), (0, -3)):
        _raises(TypeError, lambda: jnp.moveaxis(x, source, (1, 2)),
                "transpose permutation isn't a permutation of operand dimensions, got permutation (1, 0, 0, 2)")
    assert jnp.moveaxis(x, (0, 1), (2, 2)).shape == (4, 2, 3)  # (a repeated destination is accepted)
    _raises(ValueError, lambda: jnp.moveaxis(x, (0, 1), (2,)), "Inconsistent number of elements: 2 vs 1")


def test_asarray_of_none(api):
    jnp = api.jnp
    for make in (lambda: jnp.asarray(None), lambda: jnp.array(None), lambda: jnp.asarray([None]),
                 lambda: jnp.asarray(None, np.float32)):
        _raises(ValueError, make, "None is not a valid value for jnp.array")


@pytest.mark.parametrize("case", ["vmap", "eager operator", "eager scan", "eager cond", "eager indexing",
                                  "eager method", "fori_loop", "while_loop", "lax.map"])
def test_errors_from_user_code_show_the_users_frames_only_at_every_entry_point(case, monkeypatch):
    import os
    import traceback
    package = os.path.dirname(os.path.abspath(ember.__file__)) + os.sep

    def add(x, y):
        return x * 2 + y  # the user's line

    run = {
        "vmap": lambda: ember.vmap(add)(ejnp.ones((2, 3)), ejnp.ones((2, 4))),
        "eager operator": lambda: add(ejnp.ones(3), ejnp.ones(4)),
        "eager scan": lambda: elax.scan(lambda c, x: (add(c, x), None), ejnp.ones(2), ejnp.ones((3, 3))),
        "eager cond": lambda: elax.cond(True, lambda x: add(x, ejnp.ones(4)), lambda x: x, ejnp.ones(3)),
        "eager indexing": lambda: ejnp.ones(3)[1.5],
        "eager method": lambda: ejnp.ones(3).reshape(4),
        "fori_loop": lambda: elax.fori_loop(0, 2, lambda i, c: add(c, ejnp.ones(4)), ejnp.ones(3)),
        "while_loop": lambda: elax.while_loop(lambda c: c.sum() < 9, lambda c: add(c, ejnp.ones(4)), ejnp.ones(3)),
        "lax.map": lambda: elax.map(lambda x: add(x, ejnp.ones(4)), ejnp.ones((2, 3))),
    }[case]
    with pytest.raises((TypeError, ValueError)) as info:
        run()
    frames = traceback.extract_tb(info.value.__traceback__)
    assert not any(os.path.abspath(f.filename).startswith(package) for f in frames), [f.filename for f in frames]
    assert frames[-1].filename == __file__  # the user's line is the last frame
    notes = getattr(info.value, "__notes__", ["EMBER_TRACEBACK_FILTERING=off"])  # (Python 3.10: no notes)
    assert "EMBER_TRACEBACK_FILTERING=off" in "".join(notes)
    monkeypatch.setenv("EMBER_TRACEBACK_FILTERING", "off")
    with pytest.raises((TypeError, ValueError)) as info:
        run()
    assert any(os.path.abspath(f.filename).startswith(package) for f in traceback.extract_tb(info.value.__traceback__))


# --- debug_nans / debug_infs ------------------------------------------------------------------------------
@pytest.mark.parametrize("flag,call,message", [
    ("jax_debug_nans", lambda a: a.jnp.divide(0., 0.), "invalid value (nan) encountered in div"),
    ("jax_debug_nans", lambda a: a.jnp.log(-1.), "invalid value (nan) encountered in log"),
    ("jax_debug_nans", lambda a: a.jnp.sqrt(a.jnp.array([1., -1.])), "invalid value (nan) encountered in sqrt"),
    ("jax_debug_nans", lambda a: a.lax.div(0., 0.), "invalid value (nan) encountered in div"),
    ("jax_debug_nans", lambda a: a.jnp.log(a.jnp.array(-1., a.jnp.bfloat16)), "invalid value (nan) encountered in log"),
    ("jax_debug_nans", lambda a: a.top.vmap(a.jnp.log)(a.jnp.array([-1., 1.])), "encountered in log"),
    ("jax_debug_nans", lambda a: a.lax.scan(lambda c, x: (c * x, a.jnp.log(x)), 1., a.jnp.array([1., -1.])),
     "invalid value (nan) encountered in scan"),
    ("jax_debug_nans", lambda a: a.lax.cond(True, a.jnp.log, a.jnp.exp, -1.),
     "invalid value (nan) encountered in cond"),
    ("jax_debug_infs", lambda a: a.jnp.divide(a.jnp.array(1.), a.jnp.array(0.)),
     "invalid value (inf) encountered in div"),
    ("jax_debug_infs", lambda a: a.jnp.exp(a.jnp.float32(100.)), "invalid value (inf) encountered in exp"),
])
def test_debug_nans_and_infs_check_eager_operations(api, flag, call, message):
    api.top.config.update(flag, True)
    try:
        _raises(FloatingPointError, lambda: call(api), message)
        np.testing.assert_array_equal(np.asarray(api.jnp.array(1) // 0), -2)  # (integers have no NaN)
    finally:
        api.top.config.update(flag, False)
    assert np.isnan(np.asarray(api.jnp.divide(0., 0.)))  # off again: IEEE results


@pytest.mark.parametrize("call,message", [
    (lambda a: a.top.jit(lambda x: a.jnp.log(x) * 2)(a.jnp.array(-1.)), "invalid value (nan) encountered in log"),
    (lambda a: a.top.jit(lambda x: a.jnp.sqrt(x).sum())(a.jnp.array([1., -1.])),
     "invalid value (nan) encountered in sqrt"),
    (lambda a: a.top.jit(lambda x: x + 1.)(a.jnp.array(np.nan)), "invalid value (nan) encountered in add"),
])
def test_debug_nans_under_jit_reruns_op_by_op_to_name_the_operation(api, call, message, capsys):
    api.top.config.update("jax_debug_nans", True)
    try:
        _raises(FloatingPointError, lambda: call(api), message)
        assert "Calling the de-optimized version." in capsys.readouterr().out
        # a NaN made and discarded inside the program is no error (JAX checks the outputs first)
        np.testing.assert_array_equal(api.top.jit(lambda x: api.jnp.where(x > 0, api.jnp.log(x), 0.))(
            api.jnp.array([-1., 1.])), [0., 0.])
    finally:
        api.top.config.update("jax_debug_nans", False)


def test_debug_nans_under_jit_says_so_when_the_operations_make_no_nan():
    with ember.config.override(debug_nans=True):
        _raises(FloatingPointError, lambda: ember.jit(lambda x: ejnp.nan + x * 0)(ejnp.array(np.inf)),
                "invalid value (nan) encountered in mul")
        _raises(FloatingPointError, lambda: ember.jit(lambda: ejnp.nan)(), "output 0 of <lambda> contains NaN",
                "no operation made one")


def test_debug_infs_checks_jitted_outputs():
    with ember.config.override(debug_infs=True):
        _raises(FloatingPointError, lambda: ember.jit(lambda x: 1 / x)(ejnp.array(0.)), "inf")
        assert float(ember.jit(lambda x: 1 / x)(ejnp.array(2.))) == 0.5


# --- names JAX 0.10 has: lax.full / full_like, effects_barrier, jit(f).eval_shape, Array's attributes ------
FULL_CASES = {
    "full": lambda a: a.lax.full((2, 3), 1.),
    "full int": lambda a: a.lax.full(2, 1),
    "full dtype": lambda a: a.lax.full((2,), 1.5, a.jnp.int32),
    "full dtype keyword": lambda a: a.lax.full((2,), 1.5, dtype="float16"),
    "full array fill": lambda a: a.lax.full((2,), a.jnp.float32(3)),
    "full numpy fill": lambda a: a.lax.full((2,), np.float64(3)),
    "full bool": lambda a: a.lax.full((), True),
    "full sharding": lambda a: a.lax.full((2,), 1., sharding=None),
    "full jit": lambda a: a.top.jit(lambda x: a.lax.full((2,), x))(3.),
    "full_like": lambda a: a.lax.full_like(a.jnp.ones(3), 2),
    "full_like weak": lambda a: a.lax.full_like(a.jnp.array(1.), 2),
    "full_like python": lambda a: a.lax.full_like(1., 2),
    "full_like dtype": lambda a: a.lax.full_like(a.jnp.ones(3), 2, a.jnp.int32),
    "full_like shape": lambda a: a.lax.full_like(a.jnp.ones(3), 2, shape=(2, 2)),
    "full_like numpy": lambda a: a.lax.full_like(np.ones(3, np.float64), 2),
    "full_like grad": lambda a: a.top.grad(lambda x: a.lax.full_like(x, 2.).sum() * x)(1.),
}


@pytest.mark.parametrize("case", list(FULL_CASES), ids=str)
def test_lax_full_and_full_like(api, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = FULL_CASES[case](api)
    assert repr(out) == {"full": "Array([[1., 1., 1.],\n       [1., 1., 1.]], dtype=float32, weak_type=True)",
                         "full int": "Array([1, 1], dtype=int32, weak_type=True)",
                         "full dtype": "Array([1, 1], dtype=int32)",
                         "full dtype keyword": "Array([1.5, 1.5], dtype=float16)",
                         "full array fill": "Array([3., 3.], dtype=float32)",
                         "full numpy fill": "Array([3., 3.], dtype=float32)",
                         "full bool": "Array(True, dtype=bool)",
                         "full sharding": "Array([1., 1.], dtype=float32, weak_type=True)",
                         "full jit": "Array([3., 3.], dtype=float32, weak_type=True)",
                         "full_like": "Array([2., 2., 2.], dtype=float32)",
                         "full_like weak": "Array(2., dtype=float32, weak_type=True)",
                         "full_like python": "Array(2., dtype=float32, weak_type=True)",
                         "full_like dtype": "Array([2, 2, 2], dtype=int32)",
                         "full_like shape": "Array([[2., 2.],\n       [2., 2.]], dtype=float32)",
                         "full_like numpy": "Array([2., 2., 2.], dtype=float32)",
                         "full_like grad": "Array(2., dtype=float32, weak_type=True)"}[case]


def test_lax_full_errors(api):
    import inspect
    _raises(TypeError, lambda: api.lax.full((2,), api.jnp.ones(2)), "full must be called with scalar fill_value, "
            "got fill_value.shape (2,).")
    _raises(TypeError, lambda: api.lax.full_like(api.jnp.ones(3), api.jnp.ones(3)), "full must be called with scalar "
            "fill_value, got fill_value.shape (3,).")
    _raises(TypeError, lambda: api.lax.full((-1,), 1.), "broadcast_in_dim shape must have every element be "
            "nonnegative, got (-1,).")
    _raises(TypeError, lambda: api.lax.full((2.,), 1.), "Shapes must be 1D sequences of concrete values of integer "
            "type, got (2.0,).")
    assert list(inspect.signature(api.lax.full).parameters) == ["shape", "fill_value", "dtype", "sharding"]
    assert list(inspect.signature(api.lax.full_like).parameters) == ["x", "fill_value", "dtype", "shape", "sharding"]
    key = api.top.random.key(0)
    np.testing.assert_array_equal(np.asarray(api.top.random.key_data(api.lax.full_like(key, 2))), [2, 2])


def test_effects_barrier_and_jit_eval_shape(api):
    from ember.compat import jax as compat
    assert (compat if api.name == "ember" else api.top).effects_barrier() is None
    f = api.top.jit(lambda x, n: {"a": x * n, "b": api.jnp.ones(n)}, static_argnums=1)
    assert repr(f.eval_shape(1., 3)) == ("{'a': ShapeDtypeStruct(shape=(), dtype=float32, weak_type=True), "
                                         "'b': ShapeDtypeStruct(shape=(3,), dtype=float32)}")
    assert repr(f.eval_shape(api.top.ShapeDtypeStruct((2,), api.jnp.float32), 2)) == (
        "{'a': ShapeDtypeStruct(shape=(2,), dtype=float32), 'b': ShapeDtypeStruct(shape=(2,), dtype=float32)}")
    calls = []
    g = api.top.jit(lambda x: calls.append(1) or x)
    g.eval_shape(1.)
    g(1.)
    assert len(calls) == 1  # (the trace is the function's: the call reuses it)


def test_jax_arrays_attributes(api):
    import copy
    jnp = api.jnp
    a, b = jnp.arange(6.).reshape(2, 3), jnp.arange(3.)
    assert (3. in b, 1 in b, jnp.array(1.) in b) == (False, True, True)
    _raises(ValueError, lambda: 1 in a, "Array.__contains__: search array must be one-dimensional, got "
            "arr.shape=(2, 3).")
    assert repr(round(jnp.float32(2.6))) == "Array(3, dtype=int32)"
    assert (hex(jnp.array(255)), oct(jnp.array(8))) == ("0xff", "0o10")
    np.testing.assert_array_equal(np.asarray(a.argpartition(1)), [[0, 1, 2], [0, 1, 2]])
    assert repr(jnp.array([1, 256], jnp.int32).byteswap()) == "Array([16777216,    65536], dtype=int32)"
    np.testing.assert_array_equal(np.asarray(jnp.array([0, 1]).choose([jnp.array([1, 2]), jnp.array([3, 4])])), [1, 4])
    np.testing.assert_array_equal(np.asarray(a.compress(jnp.array([True, False]), axis=0)), [[0., 1., 2.]])
    for c in (a.copy(), copy.copy(a), copy.deepcopy(a), a.clone(), a.addressable_data(0)):
        assert type(c) is type(a) and repr(c) == repr(a)
    assert a.copy() is not a
    assert (a.on_device_size_in_bytes(), a.platform(), a.tobytes()[:8], a.is_ready()) == (
        24, "cpu", b"\x00\x00\x00\x00\x00\x00\x80?", True)
    assert (a.committed, a.is_fully_addressable, a.is_fully_replicated, len(a.global_shards)) == (False, True, True, 1)
    assert api.top.device_put(jnp.ones(2), api.top.devices()[0]).committed and not api.top.device_put(
        jnp.ones(2)).committed
    assert a.__numpy_dtype__ == np.float32 and isinstance(a.unsafe_buffer_pointer(), int)
    assert a.__array_module__((np.ndarray,)) is jnp
    _raises(NotImplementedError, lambda: a.flat, "JAX Arrays do not implement the arr.flat property")
