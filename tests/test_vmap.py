"""vmap: every op record and a table of non-elementwise functions against a Python loop
over the examples (stacked), with random in_axes / out_axes and dtypes; pytrees, errors,
control flow, compositions with jit and grad, the IR it produces, rule coverage."""
from __future__ import annotations

import re
import zlib
from typing import Any, Callable, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
from op_records import BINARY_RECORDS, UNARY_RECORDS
from util import assert_allclose

import ember
import ember.numpy as jnp
from ember import errors, lax, nn, tree_util
from ember.core.primitive import abstract_eval_rules

SIZE = 3  # examples per batch


# --- the oracle: a loop over the examples --------------------------------------------------------
def _example(x: Any, axis: int | None, i: int) -> Any:
    return x if axis is None else lax.index_in_dim(jnp.asarray(x), i, axis, keepdims=False)


def _loop(fn: Callable, args: tuple, in_axes: tuple, size: int) -> list:
    return [fn(*(_example(a, ax, i) for a, ax in zip(args, in_axes))) for i in range(size)]


def _stacked(results: list, out_axes: int) -> Any:
    return tree_util.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs], axis=out_axes), *results)


def _stacked_loop(fn: Callable, args: tuple, in_axes: tuple, out_axes: int, size: int) -> Any:
    """``stack([fn(*example_i) for i])`` along ``out_axes``: what vmap promises."""
    return _stacked(_loop(fn, args, in_axes, size), out_axes)


def _assert_same(got: Any, expected: Any) -> None:
    got_leaves, expected_leaves = tree_util.tree_leaves(got), tree_util.tree_leaves(expected)
    assert len(got_leaves) == len(expected_leaves)
    for g, e in zip(got_leaves, expected_leaves):
        assert_allclose(g, e)


def check_vmap(fn: Callable, args: tuple, in_axes: tuple, out_axes: int = 0, size: int = SIZE,
               jit: bool = False) -> None:
    """vmap (or jit of vmap) agrees with the loop in values, dtypes, shapes and weak types."""
    results = _loop(fn, args, in_axes, size)
    vmapped = ember.vmap(fn, in_axes=in_axes, out_axes=out_axes)
    got = (ember.jit(vmapped) if jit else vmapped)(*args)
    _assert_same(got, _stacked(results, out_axes))
    weak_types = [jnp.asarray(x).weak_type for x in tree_util.tree_leaves(results[0])]
    assert [x.weak_type for x in tree_util.tree_leaves(got)] == weak_types


def _random_values(rng: np.random.Generator, shape: tuple, dtype: Any, low: float, high: float) -> Any:
    """Values in [low, high] (infinite bounds: large values, and infinities now and then)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return jnp.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        bounds = int(np.floor(max(low, info.min, -100))), int(np.ceil(min(high, info.max, 100)))
        return jnp.asarray(rng.integers(bounds[0], bounds[1] + 1, shape).astype(dtype))
    values = rng.uniform(max(low, -1e4), min(high, 1e4), shape)
    specials = [v for v in (low, high) if np.isinf(v)]
    if specials:
        values = np.where(rng.random(shape) < 0.2, rng.choice(specials, shape), values)
    with np.errstate(over="ignore"):  # float16 overflows to inf, as the domain allows
        return jnp.asarray(values.astype(dtype))


def _batched_args(rng: np.random.Generator, example_shapes: list, dtypes: list, domains: list,
                  in_axes: tuple) -> tuple:
    """Random arguments with the mapped axis (of size SIZE) where ``in_axes`` says."""
    args = []
    for shape, dtype, (low, high), axis in zip(example_shapes, dtypes, domains, in_axes):
        full = shape if axis is None else shape[:axis] + (SIZE,) + shape[axis:]
        args.append(_random_values(rng, full, dtype, low, high))
    return tuple(args)


def _random_in_axes(rng: np.random.Generator, example_shapes: list) -> tuple:
    """A random mapped axis for most arguments (None for the others), at least one mapped."""
    axes = [int(rng.integers(0, len(s) + 1)) if rng.random() < 0.7 else None for s in example_shapes]
    if all(a is None for a in axes):
        i = int(rng.integers(len(axes)))
        axes[i] = int(rng.integers(0, len(example_shapes[i]) + 1))
    return tuple(axes)


def _in_axes_strategy(example_shapes: list) -> st.SearchStrategy:
    return st.tuples(*(st.none() | st.integers(0, len(s)) for s in example_shapes)).filter(
        lambda axes: any(a is not None for a in axes))


def _output_rank(fn: Callable, args: tuple, in_axes: tuple) -> int:
    """The rank of the lowest-rank batched output (out_axes must fit every output)."""
    example = fn(*(_example(a, ax, 0) for a, ax in zip(args, in_axes)))
    return min(np.ndim(leaf) for leaf in tree_util.tree_leaves(example)) + 1


# --- every elementwise op record ------------------------------------------------------------------
ELEMENTWISE_RECORDS = UNARY_RECORDS + BINARY_RECORDS


def _elementwise_args(record, rng: np.random.Generator, dtype: Any, shapes: list, in_axes: tuple) -> tuple:
    args = _batched_args(rng, shapes, [dtype] * record.nargs, [record.domain] * record.nargs, in_axes)
    if record.nonzero_divisor:
        args = args[:1] + (jnp.where(args[1] == 0, jnp.ones((), args[1].dtype), args[1]),)
    return args


@pytest.mark.parametrize("record", ELEMENTWISE_RECORDS, ids=lambda r: r.name)
def test_elementwise_records_match_loop(record):
    rng = np.random.default_rng(zlib.crc32(record.name.encode()))
    for dtype in record.dtypes[::2]:
        shape = tuple(int(n) for n in rng.integers(1, 4, int(rng.integers(0, 3))))
        shapes = [shape if rng.random() < 0.8 else () for _ in range(record.nargs)]  # rank 0 broadcasts
        in_axes = _random_in_axes(rng, shapes)
        out_rank = max(len(s) for s in shapes) + 1
        check_vmap(record.fn, _elementwise_args(record, rng, dtype, shapes, in_axes), in_axes,
                   int(rng.integers(-out_rank, out_rank)))


@settings(max_examples=40)
@given(data=st.data())
def test_elementwise_records_under_jit(data):
    record = data.draw(st.sampled_from(ELEMENTWISE_RECORDS))
    dtype = data.draw(st.sampled_from(record.dtypes))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    shapes = [() if scalar else shape for scalar in data.draw(st.lists(st.booleans(), min_size=record.nargs,
                                                                       max_size=record.nargs))]
    in_axes = data.draw(_in_axes_strategy(shapes))
    out_rank = max(len(s) for s in shapes) + 1
    out_axes = data.draw(st.integers(-out_rank, out_rank - 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    check_vmap(record.fn, _elementwise_args(record, rng, dtype, shapes, in_axes), in_axes, out_axes, jit=True)


# --- non-elementwise functions ---------------------------------------------------------------------
class Arg(NamedTuple):
    shape: tuple
    dtype: Any = np.float32
    low: float = -3.0
    high: float = 3.0


def _index(shape: tuple, size: int) -> Arg:
    """Indices into an axis of ``size``, some out of bounds (``size`` itself): vmap must keep the
    clamping or filling of the unbatched operation."""
    return Arg(shape, np.int32, 0, size)


class VmapRecord(NamedTuple):
    name: str
    fn: Callable
    args: list


def _collatz_steps(n):
    def body(state):
        k, steps = state
        return jnp.where(k % 2 == 0, k // 2, 3 * k + 1), steps + 1

    return lax.while_loop(lambda state: state[0] > 1, body, (n, 0))[1]


def _running_mean(xs, decay):
    def step(carry, x):
        carry = decay * carry + (1 - decay) * x
        return carry, carry * 2

    return lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), xs)


def F32(shape: tuple, low: float = -3.0, high: float = 3.0) -> Arg:
    return Arg(shape, np.float32, low, high)


RECORDS = [
    VmapRecord("sum", lambda x: jnp.sum(x, axis=1), [F32((3, 4))]),
    VmapRecord("mean_keepdims", lambda x: jnp.mean(x, axis=0, keepdims=True), [F32((3, 4))]),
    VmapRecord("max_all", jnp.max, [F32((3, 4))]),
    VmapRecord("prod", lambda x: jnp.prod(x, axis=(0, 2)), [F32((2, 3, 2), low=0.5, high=1.5)]),
    VmapRecord("any", lambda x: jnp.any(x > 1, axis=-1), [F32((3, 4))]),
    VmapRecord("var", lambda x: jnp.var(x, axis=0), [F32((4, 2))]),
    VmapRecord("argmax", lambda x: jnp.argmax(x, axis=0), [F32((4, 3))]),
    VmapRecord("argmin", lambda x: jnp.argmin(x, axis=1), [F32((4, 3))]),
    VmapRecord("cumsum", lambda x: jnp.cumsum(x, axis=1), [F32((3, 4))]),
    VmapRecord("cumprod_reverse", lambda x: lax.cumprod(x, axis=0, reverse=True), [F32((4, 2))]),
    VmapRecord("cummax", lambda x: lax.cummax(x, axis=1), [F32((2, 5))]),
    VmapRecord("sort", lambda x: jnp.sort(x, axis=0), [F32((5, 2))]),
    VmapRecord("argsort", lambda x: jnp.argsort(x, axis=-1), [F32((2, 5))]),
    VmapRecord("sort_key_val", lambda k, v: lax.sort_key_val(k, v, dimension=0), [F32((5,)), F32((5,))]),
    VmapRecord("top_k", lambda x: lax.top_k(x, 2), [F32((3, 5))]),
    VmapRecord("reshape", lambda x: x.reshape(6, 2), [F32((3, 4))]),
    VmapRecord("ravel", jnp.ravel, [F32((2, 3))]),
    VmapRecord("transpose", lambda x: jnp.transpose(x, (2, 0, 1)), [F32((2, 3, 4))]),
    VmapRecord("squeeze", lambda x: jnp.squeeze(x, 1), [F32((3, 1, 2))]),
    VmapRecord("expand_dims", lambda x: jnp.expand_dims(x, (0, 2)), [F32((3, 2))]),
    VmapRecord("broadcast_to", lambda x: jnp.broadcast_to(x, (2, 3, 4)), [F32((3, 1))]),
    VmapRecord("flip", lambda x: jnp.flip(x, 1), [F32((2, 3))]),
    VmapRecord("slice", lambda x: x[1:3, ::2], [F32((4, 5))]),
    VmapRecord("pad", lambda x: jnp.pad(x, ((1, 2), (0, 1))), [F32((2, 3))]),
    VmapRecord("lax.pad_value", lambda x, v: lax.pad(x, v, ((1, 1, 1), (0, -1, 0))), [F32((2, 3)), F32(())]),
    VmapRecord("concatenate", lambda x, y: jnp.concatenate([x, y], axis=1), [F32((2, 3)), F32((2, 1))]),
    VmapRecord("stack", lambda x, y: jnp.stack([x, y], axis=-1), [F32((2, 3)), F32((2, 3))]),
    VmapRecord("tile", lambda x: jnp.tile(x, (2, 1)), [F32((2, 3))]),
    VmapRecord("roll", lambda x: jnp.roll(x, 1, axis=0), [F32((4, 2))]),
    VmapRecord("iota", lambda x: x + jnp.arange(4, dtype=x.dtype), [F32((4,))]),
    VmapRecord("astype", lambda x: x.astype(jnp.int32), [F32((3,))]),
    VmapRecord("bitcast", lambda x: lax.bitcast_convert_type(x, jnp.int32), [F32((3,))]),
    VmapRecord("bitcast_narrow", lambda x: lax.bitcast_convert_type(x, jnp.uint8), [F32((2,))]),
    VmapRecord("bitcast_wide", lambda x: lax.bitcast_convert_type(x, jnp.float32), [Arg((2, 4), np.uint8, 0, 255)]),
    VmapRecord("dot", jnp.dot, [F32((3, 4)), F32((4,))]),
    VmapRecord("matmul", jnp.matmul, [F32((2, 3)), F32((3, 4))]),
    VmapRecord("batched_matmul", jnp.matmul, [F32((2, 2, 3)), F32((2, 3, 2))]),
    VmapRecord("einsum", lambda x, y: jnp.einsum("ij,kj->ki", x, y), [F32((2, 3)), F32((4, 3))]),
    VmapRecord("outer", jnp.outer, [F32((3,)), F32((2,))]),
    VmapRecord("tensordot", lambda x, y: jnp.tensordot(x, y, axes=([0, 2], [1, 0])), [F32((2, 3, 4)), F32((4, 2))]),
    VmapRecord("norm", jnp.linalg.norm, [F32((3, 2))]),
    VmapRecord("take", lambda x, i: jnp.take(x, i, axis=1), [F32((2, 4)), _index((3,), 4)]),
    VmapRecord("take_along_axis", lambda x, i: jnp.take_along_axis(x, i, axis=0), [F32((4, 2)), _index((3, 2), 4)]),
    VmapRecord("getitem_array", lambda x, i: x[i], [F32((4, 2)), _index((2, 2), 4)]),
    VmapRecord("getitem_scalar", lambda x, i: x[i, 1:], [F32((4, 3)), _index((), 4)]),
    VmapRecord("dynamic_slice", lambda x, i, j: lax.dynamic_slice(x, (i, j), (2, 2)),
               [F32((4, 5)), _index((), 5), _index((), 5)]),
    VmapRecord("dynamic_update_slice", lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 1)),
               [F32((4, 5)), F32((2, 3)), _index((), 5)]),
    VmapRecord("at_set", lambda x, i, u: x.at[i].set(u), [F32((5, 2)), _index((2,), 5), F32((2, 2))]),
    VmapRecord("at_add", lambda x, i, u: x.at[i, 0].add(u), [F32((5, 2)), _index((3,), 5), F32((3,))]),
    VmapRecord("at_max", lambda x, i, u: x.at[:, i].max(u), [F32((2, 5)), _index((), 5), F32((2,))]),
    VmapRecord("at_mul", lambda x, i, u: x.at[i].multiply(u), [F32((4,)), _index((2,), 4), F32(())]),
    VmapRecord("where", jnp.where, [Arg((3,), np.bool_), F32((3,)), F32(())]),
    VmapRecord("clip", jnp.clip, [F32((3, 2)), F32((), -1, 0), F32((), 0, 1)]),
    VmapRecord("lax.clamp", lax.clamp, [F32(()), F32((3,)), F32(())]),
    VmapRecord("lax.select_n", lax.select_n, [Arg((), np.bool_), F32((3,)), F32((3,))]),
    VmapRecord("softmax", lambda x: nn.softmax(x, axis=-1), [F32((2, 4))]),
    VmapRecord("logsumexp", lambda x: nn.logsumexp(x, axis=0), [F32((4, 2))]),
    VmapRecord("one_hot", lambda i: nn.one_hot(i, 5), [_index((3,), 5)]),
    VmapRecord("cond", lambda p, x: lax.cond(p > 0, lambda v: v * 2, lambda v: -v, x), [F32(()), F32((2,))]),
    VmapRecord("switch", lambda i, x, y: lax.switch(i, [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - 1.0],
                                                    x, y), [_index((), 3), F32((2,)), F32(())]),
    VmapRecord("while_loop", _collatz_steps, [_index((), 30)]),
    VmapRecord("fori_loop_traced_bound",
               lambda n, x: lax.fori_loop(0, n, lambda i, v: v * 0.5 + i, x), [_index((), 5), F32((2,))]),
    VmapRecord("fori_loop", lambda x: lax.fori_loop(0, 3, lambda i, v: jnp.sin(v) + i, x), [F32((2,))]),
    VmapRecord("scan", _running_mean, [F32((4, 2)), F32((), 0, 1)]),
    VmapRecord("lax.map", lambda x: lax.map(lambda r: r.sum() * r, x), [F32((3, 2))]),
    VmapRecord("jit", ember.jit(lambda x, y: jnp.tanh(x) @ y), [F32((2, 3)), F32((3,))]),
]


def _record_args(record: VmapRecord, rng: np.random.Generator, in_axes: tuple) -> tuple:
    return _batched_args(rng, [a.shape for a in record.args], [a.dtype for a in record.args],
                         [(a.low, a.high) for a in record.args], in_axes)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_records_match_loop(record):
    rng = np.random.default_rng(zlib.crc32(record.name.encode()))
    for _ in range(2):
        in_axes = _random_in_axes(rng, [a.shape for a in record.args])
        args = _record_args(record, rng, in_axes)
        out_rank = _output_rank(record.fn, args, in_axes)
        check_vmap(record.fn, args, in_axes, int(rng.integers(-out_rank, out_rank)))


@settings(max_examples=40)
@given(data=st.data())
def test_records_match_loop_under_jit(data):
    record = data.draw(st.sampled_from(RECORDS))
    in_axes = data.draw(_in_axes_strategy([a.shape for a in record.args]))
    args = _record_args(record, np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), in_axes)
    out_rank = _output_rank(record.fn, args, in_axes)
    check_vmap(record.fn, args, in_axes, data.draw(st.integers(-out_rank, out_rank - 1)), jit=True)


# --- the API: pytrees, None, kwargs, weak types ----------------------------------------------------
def test_pytrees_in_and_out():
    x = jnp.arange(6.0).reshape(2, 3)

    def f(tree, scale):
        return {"sum": tree["a"] + tree["b"][0], "pair": (tree["a"] * scale, scale)}

    out = ember.vmap(f, in_axes=({"a": 1, "b": (0,)}, None), out_axes={"sum": 0, "pair": (1, None)})(
        {"a": x, "b": (jnp.arange(3.0),)}, 2.0)
    np.testing.assert_allclose(out["sum"], np.asarray(x).T + np.arange(3.0)[:, None])
    np.testing.assert_allclose(out["pair"][0], np.asarray(x) * 2)
    assert out["pair"][1] == 2.0


def test_kwargs_are_mapped_over_axis_0_and_none_arguments_pass_through():
    def f(x, nothing, *, k):
        assert nothing is None
        return x * k

    x, k = jnp.arange(3.0), jnp.arange(3.0) + 1
    np.testing.assert_allclose(ember.vmap(f, in_axes=(0, None))(x, None, k=k), np.arange(3.0) * (np.arange(3.0) + 1))


def test_unmapped_outputs_are_broadcast_and_axis_size():
    out = ember.vmap(lambda x: 1.0, in_axes=None, axis_size=4)(jnp.ones(2))
    assert out.shape == (4,) and out.dtype == np.float32
    out = ember.vmap(lambda x: x, in_axes=None, out_axes=1, axis_size=2)(jnp.arange(3))
    np.testing.assert_array_equal(out, np.stack([np.arange(3)] * 2, axis=1))
    assert ember.vmap(lambda x: x.sum(), axis_size=3)(jnp.ones((3, 2))).shape == (3,)


def test_zero_size_batch():
    out = ember.vmap(lambda x: jnp.sin(x).sum())(jnp.ones((0, 3)))
    assert out.shape == (0,)


def test_weak_types_match_loop():
    weak = lax.convert_element_type(jnp.arange(3.0), jnp.float32, weak_type=True)
    for fn in (lambda a: a * 2, lambda a: jnp.sin(a) + 1, lambda a: lax.fori_loop(0, 3, lambda i, c: c + a, 0.0),
               lambda a: lax.cond(a > 1, lambda: a, lambda: -a), lambda a: lax.pad(jnp.ones(2), a, ((1, 1, 1),))):
        check_vmap(fn, (weak,), (0,))
    assert ember.vmap(lambda i: i + 1)(jnp.arange(3, dtype=jnp.int8)).dtype == np.int8


def test_numpy_arguments_are_accepted():
    out = ember.vmap(jnp.sum, in_axes=1)(np.arange(6.0).reshape(2, 3))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [3.0, 5.0, 7.0])


def test_list_in_axes_read_as_tuple():
    out = ember.vmap(lambda x, y: x + y, in_axes=[0, None])(jnp.arange(3), 1)
    np.testing.assert_array_equal(out, [1, 2, 3])


def test_axis_name_and_spmd_axis_name_are_accepted():
    out = ember.vmap(lambda x: x * 2, axis_name="batch", spmd_axis_name="devices")(jnp.arange(3))
    np.testing.assert_array_equal(out, [0, 2, 4])


def test_vmapped_function_keeps_name():
    def my_function(x):
        return x

    assert ember.vmap(my_function).__name__ == "my_function"


# --- errors ----------------------------------------------------------------------------------------
def test_inconsistent_sizes_name_the_arguments():
    with pytest.raises(ValueError, match=re.escape(
            "vmap got inconsistent sizes for array axes to be mapped:\n"
            "  * one axis had size 3: axis 0 of argument x of type float32[3];\n"
            "  * one axis had size 4: axis 1 of argument y['w'] of type int32[2,4]")):
        ember.vmap(lambda x, y: x, in_axes=(0, {"w": 1}))(jnp.ones(3), {"w": jnp.ones((2, 4), jnp.int32)})


def test_inconsistent_sizes_counts_and_axis_size():
    with pytest.raises(ValueError, match=re.escape("  * most axes (2 of them) had size 3, e.g. axis 0 of argument a")):
        ember.vmap(lambda a, b, c: a)(jnp.ones(3), jnp.ones(3), jnp.ones(2))
    with pytest.raises(ValueError, match=re.escape("  * the `axis_size` argument was 4;\n  * one axis had size 3")):
        ember.vmap(lambda x: x, axis_size=4)(jnp.ones(3))


@pytest.mark.parametrize("in_axes, message", [
    (2, "vmap was requested to map its argument along axis 2, which implies that its rank should be at least 3, but "
        "is only 1 (its shape is (3,))"),
    (-2, "vmap was requested to map its argument along axis -2, which implies that its rank should be at least 2, "
         "but is only 1 (its shape is (3,))"),
])
def test_in_axes_out_of_range(in_axes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ember.vmap(lambda x: x, in_axes=in_axes)(jnp.ones(3))


def test_out_axes_errors():
    with pytest.raises(ValueError, match=re.escape("axis 2 is out of bounds for array of dimension 1")):
        ember.vmap(lambda x: x, out_axes=2)(jnp.ones(3))
    with pytest.raises(ValueError, match=re.escape("axis -3 is out of bounds for array of dimension 2")):
        ember.vmap(lambda x: x, out_axes=-3)(jnp.ones((3, 2)))
    with pytest.raises(ValueError, match=re.escape("at vmap out_axes, got axis spec None but output was batched on "
                                                   "axis 0")):
        ember.vmap(lambda x: x, out_axes=None)(jnp.ones(3))
    # (the automatic-vectorization tutorial's out_axes=(1, None) with a batched second output: JAX names its path)
    with pytest.raises(ValueError, match=re.escape("at vmap out_axes[1], got axis spec None but output was batched")):
        ember.vmap(lambda x: (x, x.sum()), out_axes=(1, None))(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match=re.escape("at vmap out_axes['a'][0], got axis spec None but output was")):
        ember.vmap(lambda x: {"a": (x, x.sum())}, out_axes=None)(jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="vmap out_axes specification must be a tree prefix"):
        ember.vmap(lambda x: x, out_axes=(0, 1))(jnp.ones(3))


def test_missing_axis_size():
    with pytest.raises(ValueError, match="vmap must have at least one non-None value in in_axes or axis_size must "
                                         "be specified"):
        ember.vmap(lambda x: x, in_axes=None)(jnp.ones(3))
    with pytest.raises(ValueError, match=re.escape("vmap wrapped function must be passed at least one argument "
                                                   "containing an array or axis_size must be specified")):
        ember.vmap(lambda: 1.0)()


def test_bad_in_axes_specifications():
    with pytest.raises(ValueError, match=re.escape("but got len(in_axes)=1, len(args)=2")):
        ember.vmap(lambda x, y: x, in_axes=(0,))(jnp.ones(3), jnp.ones(3))
    with pytest.raises(TypeError, match=re.escape("vmap in_axes must be an int, None, or (nested) container with "
                                                  "those types as leaves, but got (0, 'a')")):
        ember.vmap(lambda x, y: x, in_axes=(0, "a"))
    with pytest.raises(TypeError, match="vmap in_axes must be an int, None, or a tuple of entries"):
        ember.vmap(lambda x: x, in_axes={"x": 0})
    with pytest.raises(TypeError, match="vmap out_axes must be an int, None, or"):
        ember.vmap(lambda x: x, out_axes=1.5)
    with pytest.raises(ValueError, match="vmap in_axes specification must be a tree prefix"):
        ember.vmap(lambda x: x, in_axes=({"a": 0},))({"b": jnp.ones(3)})
    with pytest.raises(TypeError, match="vmap expects a callable"):
        ember.vmap(3)


def test_python_control_flow_on_batched_value_is_refused():
    def f(x):
        return x if x > 0 else -x

    with pytest.raises(errors.TracerBoolConversionError, match=r"(?s)batched array of type bool\[\] inside vmap.*"
                                                               r"lax\.cond"):
        ember.vmap(f)(jnp.arange(3.0))


def test_leaked_batch_tracer_is_refused():
    leaked = []
    ember.vmap(lambda x: leaked.append(x) or x)(jnp.ones(3))
    with pytest.raises(errors.UnexpectedTracerError):
        jnp.sin(leaked[0])


# --- control flow ----------------------------------------------------------------------------------
def test_cond_with_shared_predicate_stays_a_cond():
    f = ember.vmap(lambda p, x: lax.cond(p, lambda v: v + 1.0, lambda v: v * 2.0, x), in_axes=(None, 0))
    x = jnp.arange(3.0)
    np.testing.assert_allclose(f(True, x), np.arange(3.0) + 1)
    np.testing.assert_allclose(f(False, x), np.arange(3.0) * 2)
    assert "cond[" in str(ember.make_jaxpr(f)(True, x))


def test_cond_with_batched_predicate_selects():
    def f(x):
        return lax.cond(x > 1, lambda v: (v * 10, v), lambda v: (-v, v + 1), x)

    jaxpr = str(ember.make_jaxpr(ember.vmap(f))(jnp.arange(4.0)))
    assert "cond" not in jaxpr and "select_n" in jaxpr
    check_vmap(f, (jnp.arange(4.0),), (0,), size=4)
    check_vmap(f, (jnp.arange(4.0),), (0,), size=4, jit=True)


def test_cond_branch_batching_a_closed_over_value():
    """Only one branch makes the output vary across examples: both must agree on its type."""
    def f(p, x, y):
        return lax.cond(p, lambda: x * 1.0, lambda: y)

    out = ember.vmap(f, in_axes=(None, 0, None))(False, jnp.arange(3.0), jnp.asarray(5.0))
    np.testing.assert_allclose(out, [5.0, 5.0, 5.0])


def test_while_with_batched_predicate_runs_until_every_example_is_done():
    n = jnp.asarray([1, 6, 27, 7], jnp.int32)
    steps = ember.vmap(_collatz_steps)(n)
    np.testing.assert_array_equal(steps, [_collatz_steps(int(k)) for k in n])
    np.testing.assert_array_equal(steps, [0, 8, 111, 16])
    jaxpr = ember.make_jaxpr(ember.vmap(_collatz_steps))(n)
    assert [e.primitive.name for e in jaxpr.eqns].count("while") == 1
    assert "reduce_or" in str(jaxpr)


def test_while_with_shared_predicate_and_batched_carry():
    def f(x):
        return lax.while_loop(lambda s: s[0] < 5, lambda s: (s[0] + 1, s[1] * 2.0), (0, x))[1]

    check_vmap(f, (jnp.arange(3.0),), (0,))
    jaxpr = str(ember.make_jaxpr(ember.vmap(f))(jnp.arange(3.0)))
    assert "reduce_or" not in jaxpr and "select_n" not in jaxpr


def test_loop_body_makes_an_unbatched_carry_batched():
    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: c + x, 0.0)

    check_vmap(f, (jnp.arange(3.0),), (0,))

    def g(x):
        return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + x), (0, jnp.zeros(2)))

    check_vmap(g, (jnp.arange(6.0).reshape(3, 2),), (0,))


def test_scan_batched_xs_and_consts():
    xs = jnp.asarray(np.random.default_rng(0).normal(size=(5, 3, 2)).astype(np.float32))
    check_vmap(lambda x: _running_mean(x, 0.5), (xs,), (1,), size=3)
    check_vmap(lambda d: _running_mean(xs[:, 0], d), (jnp.asarray([0.1, 0.5, 0.9]),), (0,))
    f = ember.vmap(lambda x: lax.scan(lambda c, v: (c + v, c), 0.0, x, reverse=True), in_axes=1, out_axes=(0, 1))
    carry, ys = f(xs[:, :, 0])
    for i in range(3):
        c, y = lax.scan(lambda c, v: (c + v, c), 0.0, xs[:, i, 0], reverse=True)
        assert_allclose(carry[i], c)
        assert_allclose(ys[:, i], y)
    assert [e.primitive.name for e in ember.make_jaxpr(f)(xs[:, :, 0]).eqns].count("scan") == 1


# --- compositions ----------------------------------------------------------------------------------
def test_jit_of_vmap_and_vmap_of_jit():
    def f(x, y):
        return jnp.tanh(x) @ y + x.sum()

    x, y = jnp.ones((4, 2, 3)), jnp.arange(3.0)
    expected = _stacked_loop(f, (x, y), (0, None), 0, 4)
    _assert_same(ember.jit(ember.vmap(f, in_axes=(0, None)))(x, y), expected)
    _assert_same(ember.vmap(ember.jit(f), in_axes=(0, None))(x, y), expected)
    jaxpr = ember.make_jaxpr(ember.vmap(ember.jit(f), in_axes=(0, None)))(x, y)
    [call] = [e for e in jaxpr.eqns if e.primitive.name == "jit"]
    assert call.params["jaxpr"].in_avals[0].shape == (4, 2, 3)


def test_vmap_of_vmap():
    x = jnp.asarray(np.random.default_rng(1).normal(size=(3, 4, 2)).astype(np.float32))
    y = jnp.asarray(np.random.default_rng(2).normal(size=(4, 3)).astype(np.float32))
    inner = ember.vmap(lambda a, b: jnp.dot(a, b), in_axes=(1, None))   # over x's axis 1
    outer = ember.vmap(inner, in_axes=(0, 1), out_axes=1)              # over x's axis 0 and y's axis 1
    expected = np.stack([np.stack([np.dot(np.asarray(x)[i, :, j], np.asarray(y)[:, i]) for j in range(2)])
                         for i in range(3)], axis=1)
    assert_allclose(outer(x, y), expected, atol=1e-5)
    assert_allclose(ember.jit(outer)(x, y), expected, atol=1e-5)
    assert [e.primitive.name for e in ember.make_jaxpr(outer)(x, y).eqns].count("dot_general") == 1


def test_vmap_of_grad():
    def loss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    w = jnp.asarray(np.random.default_rng(3).normal(size=(3, 2)).astype(np.float32))
    xs = jnp.asarray(np.random.default_rng(4).normal(size=(5, 4, 3)).astype(np.float32))
    per_example = ember.vmap(ember.grad(loss), in_axes=(None, 0))(w, xs)
    expected = np.stack([np.asarray(ember.grad(loss)(w, xs[i])) for i in range(5)])
    assert_allclose(per_example, expected, atol=1e-5)
    assert_allclose(ember.jit(ember.vmap(ember.grad(loss), in_axes=(None, 0)))(w, xs), expected, atol=1e-5)


def test_grad_of_vmap():
    def f(w, xs):
        return jnp.sum(ember.vmap(lambda x: jnp.sin(x * w).sum())(xs))

    w, xs = jnp.asarray(0.5), jnp.arange(6.0).reshape(3, 2)
    expected = np.sum(np.cos(np.asarray(xs) * 0.5) * np.asarray(xs))
    assert_allclose(ember.grad(f)(w, xs), np.float32(expected), atol=1e-5)


def test_nested_control_flow_and_calls():
    def f(x):
        def step(c, row):
            c = jnp.tanh(c + row)
            return c, lax.cond(c.sum() > 0, lambda: c * 2, lambda: ember.jit(lambda v: v - 1)(c))

        c, ys = lax.scan(step, jnp.zeros(2), x)
        return lax.while_loop(lambda s: s[0] < 10 * jnp.abs(c[0]) + 1, lambda s: (s[0] + 1, s[1] * 1.1), (0, ys))

    xs = jnp.asarray(np.random.default_rng(5).normal(size=(4, 3, 2)).astype(np.float32))
    check_vmap(f, (xs,), (0,), size=4)
    check_vmap(ember.jit(f), (jnp.moveaxis(xs, 0, 2),), (2,), out_axes=-1, size=4, jit=True)


@pytest.mark.parametrize("transform", [ember.jacfwd, ember.jacrev, ember.hessian], ids=lambda t: t.__name__)
def test_vmap_of_derivatives(transform):
    w = jnp.asarray(np.random.default_rng(6).normal(size=(4, 3)).astype(np.float32))
    check_vmap(transform(lambda v: jnp.sum(jnp.sin(v) ** 2)), (w,), (0,), size=4)


def test_grad_through_batched_cond():
    w = jnp.asarray(np.random.default_rng(7).normal(size=(4, 3)).astype(np.float32))

    def total(w):
        return ember.vmap(lambda r: lax.cond(r.sum() > 0, lambda: jnp.sin(r).sum(), lambda: (r ** 2).sum()))(w).sum()

    expected = [np.cos(r) if r.sum() > 0 else 2 * r for r in np.asarray(w)]
    assert_allclose(ember.grad(total)(w), np.stack(expected), atol=1e-6)


@ember.custom_jvp
def _sin_with_jvp_3(x):
    return jnp.sin(x)


@_sin_with_jvp_3.defjvp
def _sin_with_jvp_3_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    return _sin_with_jvp_3(x), 3.0 * t  # not cos: shows that the custom rule is used


@ember.custom_vjp
def _scaled_sin(w, x):
    return w * jnp.sin(x)


def _scaled_sin_fwd(w, x):
    return _scaled_sin(w, x), (w, x)


def _scaled_sin_bwd(residuals, ct):
    w, x = residuals
    return (ct * 2.0 * jnp.sin(x)).sum(), ct * w * 5.0  # made-up rules, as above


_scaled_sin.defvjp(_scaled_sin_fwd, _scaled_sin_bwd)


def test_custom_jvp_function_keeps_its_rule_under_vmap():
    xs = jnp.arange(6.0).reshape(3, 2)
    assert_allclose(ember.vmap(_sin_with_jvp_3)(xs), np.sin(np.arange(6.0).reshape(3, 2)).astype(np.float32))
    for g in (ember.grad(lambda x: ember.vmap(_sin_with_jvp_3, in_axes=1)(x).sum()),
              ember.vmap(ember.grad(lambda x: _sin_with_jvp_3(x).sum()))):
        assert_allclose(g(xs), np.full((3, 2), 3.0, np.float32))
        assert_allclose(ember.jit(g)(xs), np.full((3, 2), 3.0, np.float32))


def test_custom_vjp_function_keeps_its_rule_under_vmap():
    w, xs = jnp.asarray(1.5), jnp.arange(6.0).reshape(3, 2)
    assert_allclose(ember.vmap(_scaled_sin, in_axes=(None, 0))(w, xs), 1.5 * np.sin(np.asarray(xs)))

    def total(w, x):
        return ember.vmap(_scaled_sin, in_axes=(None, 0))(w, x).sum()

    grad_w, grad_x = ember.grad(total, argnums=(0, 1))(w, xs)
    assert_allclose(grad_w, np.float32(2 * np.sin(np.asarray(xs)).sum()))  # summed over the examples
    assert_allclose(grad_x, np.full((3, 2), 7.5, np.float32))
    per_example = ember.vmap(ember.grad(lambda w, x: _scaled_sin(w, x).sum()), in_axes=(None, 0))(w, xs)
    assert_allclose(per_example, 2 * np.sin(np.asarray(xs)).sum(1))


def test_fused_kernels_batch_their_program():
    from ember.compiler.fusion import fuse
    from ember.transforms.programs import eval_closed_by_binding

    fused = fuse(ember.make_jaxpr(lambda x: (jnp.sin(x) * 2 + 1).sum())(jnp.ones(3)))
    assert [e.primitive.name for e in fused.eqns] == ["fusion"]
    check_vmap(lambda x: eval_closed_by_binding(fused, x)[0], (jnp.arange(12.0).reshape(3, 4),), (1,), size=4)


# --- the IR ------------------------------------------------------------------------------------------
def test_make_jaxpr_shows_batched_primitives_not_a_loop():
    def f(x, w):
        return nn.softmax(x @ w)

    x, w = jnp.ones((7, 3)), jnp.ones((5, 3, 2))
    jaxpr = ember.make_jaxpr(ember.vmap(f, in_axes=(None, 0)))(x, w)
    names = [e.primitive.name for e in jaxpr.eqns]
    assert names.count("dot_general") == 1
    assert len(names) == len(ember.make_jaxpr(f)(x, w[0]).eqns) + names.count("transpose")
    assert jaxpr.out_avals[0].shape == (5, 7, 2)


def test_batch_dims_of_both_dot_operands_become_a_dot_batch_dimension():
    jaxpr = ember.make_jaxpr(ember.vmap(jnp.dot))(jnp.ones((4, 2, 3)), jnp.ones((4, 3)))
    [eqn] = jaxpr.eqns
    assert eqn.params["dimension_numbers"] == (((2,), (1,)), ((0,), (0,)))


def test_batched_index_becomes_gather():
    f = ember.vmap(lambda x, i: lax.dynamic_slice(x, (i,), (2,)))
    jaxpr = ember.make_jaxpr(f)(jnp.ones((3, 5)), jnp.arange(3))
    assert "gather" in [e.primitive.name for e in jaxpr.eqns]
    out = f(jnp.arange(15.0).reshape(3, 5), jnp.asarray([0, 4, 2]))
    np.testing.assert_array_equal(out, [[0, 1], [8, 9], [12, 13]])  # the start is clamped, as unbatched


# --- coverage --------------------------------------------------------------------------------------
# Primitives vmap never batches: ``iota`` takes no operands (so none is ever batched), and
# ``custom_vjp_lin`` is a placeholder of reverse-mode differentiation that is only transposed.
UNBATCHED = {"iota", "custom_vjp_lin"}


def test_every_primitive_has_a_batching_rule():
    from ember.transforms.batching import batching_rule

    missing = sorted(p.name for p in abstract_eval_rules if batching_rule(p) is None and p.name not in UNBATCHED)
    assert missing == []


def test_primitive_without_a_rule_is_a_clear_error():
    from ember.core.primitive import Primitive

    mystery = Primitive("mystery")  # registered in no table
    with pytest.raises(NotImplementedError, match="Batching rule for 'mystery' not implemented"):
        ember.vmap(lambda x: mystery.bind(x))(jnp.ones(3))


class _Converting:
    """A user pytree whose constructor converts its field (JAX's pytree tutorial's MyTree)."""

    def __init__(self, a):
        self.a = jnp.asarray(a)


ember.tree_util.register_pytree_node(_Converting, lambda t: ((t.a,), None), lambda _, args: _Converting(*args))


def test_vmap_over_a_pytree_whose_constructor_converts_its_fields():
    tree = _Converting(jnp.arange(5.0))
    out = ember.vmap(lambda t: _Converting(t.a * 2.0), in_axes=(0,), out_axes=0)(tree)
    np.testing.assert_array_equal(np.asarray(out.a), np.arange(5.0) * 2)
    assert ember.vmap(lambda t: t)(tree).a.shape == (5,)
