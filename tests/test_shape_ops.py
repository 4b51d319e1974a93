"""jnp shape manipulation against NumPy, eagerly and under jit: reshape, permutations, joining,
splitting, tiling, repeating, flipping, rolling, padding, and their errors."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.numpy as jnp
from ember import errors
from tests.util import assert_allclose, check_eager_and_jit

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)
nonempty_shapes = st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)


def arange(shape, dtype=np.float32):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


# --- reshape and friends --------------------------------------------------------------------
@pytest.mark.parametrize("shape, new_shape", [
    ((2, 3), (3, 2)), ((2, 3), (-1,)), ((2, 3), 6), ((2, 3, 4), (4, -1)), ((0, 3), (3, 0)), ((0, 3), (-1, 3)),
    ((), (1, 1)), ((1,), ()), ((2, 3), np.array([3, 2])),
])
@pytest.mark.parametrize("order", ["C", "F"])
def test_reshape(shape, new_shape, order):
    x = arange(shape)
    expected = np.reshape(x, new_shape, order=order)
    check_eager_and_jit(lambda a: jnp.reshape(a, new_shape, order=order), x, expected=expected)
    check_eager_and_jit(lambda a: jnp.ravel(a, order), x, expected=np.ravel(x, order))
    if order == "C":
        assert_allclose(jnp.asarray(x).reshape(new_shape), expected)


def test_reshape_method_forms_and_errors():
    x = jnp.asarray(arange((2, 3)))
    assert x.reshape(3, 2).shape == (3, 2) and x.reshape((3, -1)).shape == (3, 2)
    assert_allclose(x.flatten(), np.arange(6, dtype=np.float32))
    with pytest.raises(TypeError, match=r"\(2, 3\).*\(4,\)"):
        jnp.reshape(x, (4,))
    with pytest.raises(TypeError, match="only one dimension can be -1"):
        jnp.reshape(x, (-1, -1))
    with pytest.raises(TypeError, match="not a multiple"):
        jnp.reshape(x, (4, -1))
    with pytest.raises(TypeError, match="non-negative"):
        jnp.reshape(x, (-2, -3))
    with pytest.raises(NotImplementedError, match="order='A'"):
        jnp.reshape(x, (3, 2), order="A")
    traced = r"(?s)Shapes must be 1D sequences .* got \(JitTracer\(.*\), -1\).*static"
    with pytest.raises(TypeError, match=traced) as info:
        ember.jit(lambda a, n: jnp.reshape(a, (n, -1)))(x, 2)
    assert type(info.value) is TypeError  # (JAX's plain TypeError, with the tracer's advice)


@given(nonempty_shapes, st.data())
def test_permutations_match_numpy(shape, data):
    x = arange(shape)
    ndim = len(shape)
    axes = data.draw(st.permutations(range(ndim)))
    negative = [a - ndim if data.draw(st.booleans()) else a for a in axes]
    check_eager_and_jit(lambda a: jnp.transpose(a, negative), x, expected=np.transpose(x, axes))
    check_eager_and_jit(lambda a: jnp.permute_dims(a, axes), x, expected=np.transpose(x, axes))
    check_eager_and_jit(jnp.transpose, x, expected=x.T)
    count = data.draw(st.integers(0, ndim))
    source = data.draw(st.permutations(range(ndim)))[:count]
    destination = data.draw(st.permutations(range(ndim)))[:count]
    check_eager_and_jit(lambda a: jnp.moveaxis(a, source, destination), x,
                        expected=np.moveaxis(x, source, destination))
    i, j = data.draw(st.integers(-ndim, ndim - 1)), data.draw(st.integers(-ndim, ndim - 1))
    check_eager_and_jit(lambda a: jnp.swapaxes(a, i, j), x, expected=np.swapaxes(x, i, j))
    assert_allclose(jnp.asarray(x).transpose(), x.T)
    assert_allclose(jnp.asarray(x).transpose(*axes), x.transpose(*axes))


def test_matrix_transpose_and_T_mT():
    x = arange((2, 3, 4))
    check_eager_and_jit(jnp.matrix_transpose, x, expected=np.matrix_transpose(x))
    assert_allclose(jnp.asarray(x).mT, np.matrix_transpose(x))
    assert_allclose(jnp.asarray(x).T, x.T)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        jnp.matrix_transpose(jnp.ones(3))


@pytest.mark.parametrize("shape, axis", [((2, 3), 0), ((2, 3), -1), ((2, 3), (0, 3)), ((), 0), ((2,), (-1, 0))])
def test_expand_dims(shape, axis):
    x = arange(shape)
    check_eager_and_jit(lambda a: jnp.expand_dims(a, axis), x, expected=np.expand_dims(x, axis))


@pytest.mark.parametrize("shape, axis", [((1, 2, 1), None), ((1, 2, 1), 0), ((1, 2, 1), (-1, 0)), ((1,), None),
                                         ((2, 3), None)])
def test_squeeze(shape, axis):
    x = arange(shape)
    check_eager_and_jit(lambda a: jnp.squeeze(a, axis), x, expected=np.squeeze(x, axis))


def test_axis_errors():
    x = jnp.ones((2, 3))
    for call in (lambda: jnp.expand_dims(x, 3), lambda: jnp.squeeze(x, 2), lambda: jnp.flip(x, 3),
                 lambda: jnp.swapaxes(x, 0, 2), lambda: jnp.moveaxis(x, 0, -3), lambda: jnp.concatenate([x, x], 2),
                 lambda: jnp.stack([x, x], 3), lambda: jnp.roll(x, 1, 2), lambda: jnp.split(x, 2, axis=5),
                 lambda: jnp.repeat(x, 2, axis=2)):
        with pytest.raises(ValueError, match="out of bounds for an array of dimension"):
            call()
    with pytest.raises(ValueError, match="only dimensions of size 1"):
        jnp.squeeze(x, 0)
    with pytest.raises(ValueError, match="repeated"):
        jnp.expand_dims(x, (0, 0))
    with pytest.raises(TypeError, match="isn't a permutation of operand dimensions"):  # JAX's class and words
        jnp.transpose(x, (0,))
    with pytest.raises(TypeError, match="isn't a permutation of operand dimensions"):
        jnp.transpose(x, (0, 0))
    with pytest.raises(ValueError, match="Inconsistent number of elements: 2 vs 1"):  # (JAX's words)
        jnp.moveaxis(x, (0, 1), (1,))


# --- joining --------------------------------------------------------------------------------
@given(nonempty_shapes, st.integers(1, 3), st.data())
def test_concatenate_and_stack_match_numpy(shape, count, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=count, max_size=count))
    parts = []
    for k, n in enumerate(sizes):
        part_shape = list(shape)
        part_shape[axis] = n
        parts.append(arange(part_shape) + 100 * k)
    check_eager_and_jit(lambda *xs: jnp.concatenate(xs, axis), *parts, expected=np.concatenate(parts, axis))
    check_eager_and_jit(lambda *xs: jnp.concatenate(xs, None), *parts, expected=np.concatenate(parts, None))
    same = [arange(shape) + k for k in range(count)]
    stack_axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    check_eager_and_jit(lambda *xs: jnp.stack(xs, stack_axis), *same, expected=np.stack(same, stack_axis))


def test_concatenate_promotion_weak_types_and_dtype():
    ints, floats = np.arange(3, dtype=np.int32), np.ones(2, np.float16)
    assert_allclose(jnp.concatenate([ints, floats]), np.concatenate([ints, floats]).astype(np.float16),
                    dtype=np.float16, rtol=0)
    assert jnp.concatenate([np.ones(2, np.int8), np.ones(2, np.uint8)]).dtype == np.int16
    assert jnp.concatenate([ints, ints], dtype=np.float32).dtype == np.float32
    weak = jnp.stack([1.0, 2.0])
    assert weak.dtype == np.float32 and weak.weak_type
    assert jnp.hstack([1.0, 2.0]).weak_type
    assert not jnp.stack([1.0, np.float32(2.0)]).weak_type
    assert jnp.concatenate([jnp.asarray([1, 2]), np.array([3], np.int8)]).dtype == np.int32
    assert jnp.concat([ints, ints], axis=0).shape == (6,)
    assert_allclose(jnp.stack(jnp.asarray(arange((2, 3))), axis=1), arange((2, 3)).T)


def test_join_errors():
    with pytest.raises(ValueError, match="Zero-dimensional"):
        jnp.concatenate([jnp.ones(()), jnp.ones(())])
    with pytest.raises(ValueError, match="at least one array"):
        jnp.concatenate([])
    with pytest.raises(TypeError, match=r"\(2, 3\), \(3, 2\)"):
        jnp.concatenate([jnp.ones((2, 3)), jnp.ones((3, 2))])
    with pytest.raises(ValueError, match=r"same shape. Got \(2,\), \(3,\)"):
        jnp.stack([jnp.ones(2), jnp.ones(3)])
    with pytest.raises(ValueError, match="at least one array"):
        jnp.stack([])


@pytest.mark.parametrize("shapes", [[(3,), (3,)], [(2, 3), (1, 3)], [(), ()], [(2, 3, 4), (2, 3, 4)], [(2,), ()]])
def test_stacking_helpers(shapes):
    parts = [arange(s) + 10 * k for k, s in enumerate(shapes)]
    for name in ("vstack", "hstack", "dstack", "column_stack"):
        try:
            expected = getattr(np, name)(parts)
        except ValueError:
            with pytest.raises((ValueError, TypeError)):
                getattr(jnp, name)(parts)
            continue
        check_eager_and_jit(lambda *xs: getattr(jnp, name)(xs), *parts, expected=expected)
    check_eager_and_jit(lambda *xs: jnp.append(*xs), *parts, expected=np.append(*parts))


def test_atleast_nd():
    for value in (np.float32(2.0), np.arange(3.0, dtype=np.float32), arange((2, 3)), arange((1, 2, 3))):
        for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
            check_eager_and_jit(getattr(jnp, name), value, expected=getattr(np, name)(value))
    one, two = jnp.atleast_1d(1, 2.0)
    assert one.shape == (1,) and one.weak_type and two.dtype == np.float32


# --- splitting ------------------------------------------------------------------------------
@pytest.mark.parametrize("size, sections", [(6, 3), (6, 1), (6, [2, 4]), (5, [1, 10]), (5, [3, 1]), (5, [-2]),
                                            (6, np.array([2, 3])), (0, 2)])
def test_split(size, sections):
    x = np.stack([np.arange(size, dtype=np.float32)] * 2)
    check_eager_and_jit(lambda a: jnp.split(a, sections, axis=1), x, expected=np.split(x, sections, axis=1))
    check_eager_and_jit(lambda a: jnp.array_split(a, sections, axis=-1), x,
                        expected=np.array_split(x, sections, axis=-1))


def test_array_split_uneven_and_directional_splits():
    x = arange((4, 6, 2))
    assert [p.shape for p in jnp.array_split(jnp.ones(5), 3)] == [(2,), (2,), (1,)]
    for name, sections in (("hsplit", 3), ("vsplit", 2), ("dsplit", [1])):
        check_eager_and_jit(lambda a: getattr(jnp, name)(a, sections), x, expected=getattr(np, name)(x, sections))
    assert_allclose(jnp.hsplit(np.arange(4, dtype=np.int32), 2)[1], np.array([2, 3], np.int32))
    with pytest.raises(ValueError, match="equal division"):
        jnp.split(jnp.ones(5), 2)
    with pytest.raises(ValueError, match="larger than 0"):
        jnp.split(jnp.ones(5), 0)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        jnp.vsplit(jnp.ones(4), 2)
    with pytest.raises(errors.TracerArrayConversionError):
        ember.jit(lambda a, i: jnp.split(a, i))(jnp.ones(4), jnp.array([1]))


def test_unstack():
    x = arange((2, 3))
    parts = check_eager_and_jit(lambda a: jnp.unstack(a, axis=1), x)
    assert len(parts) == 3 and all(p.shape == (2,) for p in parts)
    assert_allclose(parts[1], x[:, 1])


# --- broadcasting, tiling, repeating -----------------------------------------------------------
def test_broadcast_arrays():
    a, b = arange((3, 1)), arange((4,))
    outs = check_eager_and_jit(lambda x, y: jnp.broadcast_arrays(x, y), a, b)
    for out, expected in zip(outs, np.broadcast_arrays(a, b)):
        assert_allclose(out, expected)
    with pytest.raises(ValueError, match=r"\(3,\), \(4,\)"):  # JAX's class
        jnp.broadcast_arrays(jnp.ones(3), jnp.ones(4))


@pytest.mark.parametrize("shape, reps", [((3,), 2), ((3,), (2, 2)), ((2, 3), (2,)), ((2, 3), (1, 0)), ((), (2, 3)),
                                         ((2, 1, 3), (2, 1, 1, 2))])
def test_tile(shape, reps):
    x = arange(shape)
    check_eager_and_jit(lambda a: jnp.tile(a, reps), x, expected=np.tile(x, reps))


@pytest.mark.parametrize("shape, repeats, axis", [
    ((3,), 2, None), ((2, 3), 2, None), ((2, 3), 3, 1), ((2, 3), np.array([1, 0, 2]), 1),
    ((2, 3), np.array([2, 1]), -2),
    ((2, 3), np.array([2]), 0), ((2, 3), 0, 0), ((3,), np.array([0, 0, 0]), 0),
])
def test_repeat(shape, repeats, axis):
    x = arange(shape, np.int32)
    check_eager_and_jit(lambda a: jnp.repeat(a, repeats, axis), x, expected=np.repeat(x, repeats, axis))
    if axis is not None:
        assert_allclose(jnp.asarray(x).repeat(repeats, axis), np.repeat(x, repeats, axis))


def test_static_gathers_are_slices_or_one_gather():
    x = np.arange(60, dtype=np.float32).reshape(30, 2)
    few = ember.make_jaxpr(lambda a: jnp.pad(a, ((2, 3), (0, 0)), mode="reflect"))(x)
    assert {e.primitive.name for e in few.eqns} <= {"slice", "rev", "concatenate"}
    counts = np.arange(30) % 3
    many = check_eager_and_jit(lambda a: jnp.repeat(a, counts, axis=0), x, expected=np.repeat(x, counts, axis=0))
    assert many.shape == (30, 2)
    names = [e.primitive.name for e in ember.make_jaxpr(lambda a: jnp.repeat(a, counts, axis=0))(x).eqns]
    assert "slice" not in names and len(names) <= 3


def test_repeat_total_repeat_length_and_errors():
    x = np.arange(3, dtype=np.int32)
    # Longer than sum(repeats): filled with the last element of x (as in JAX); shorter: cut.
    assert_allclose(jnp.repeat(x, np.array([1, 2, 0]), total_repeat_length=5), np.array([0, 1, 1, 2, 2], np.int32))
    assert_allclose(jnp.repeat(x, 2, total_repeat_length=4), np.array([0, 0, 1, 1], np.int32))
    assert_allclose(jnp.repeat(x, 2, total_repeat_length=6), np.repeat(x, 2))
    jitted = ember.jit(lambda a: jnp.repeat(a, 2, total_repeat_length=6))(x)
    assert_allclose(jitted, np.repeat(x, 2))
    with pytest.raises(errors.ConcretizationTypeError, match="repeats"):
        ember.jit(lambda a, r: jnp.repeat(a, r))(x, np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="negative"):
        jnp.repeat(x, -1)
    with pytest.raises(ValueError, match="do not match axis 0 of size 3"):
        jnp.repeat(x, np.array([1, 2]))
    with pytest.raises(TypeError, match="integers"):
        jnp.repeat(x, 1.5)


def test_resize():
    x = np.arange(3, dtype=np.int32)
    for new_shape in ((2, 4), 7, (2,), (0, 3)):
        check_eager_and_jit(lambda a: jnp.resize(a, new_shape), x, expected=np.resize(x, new_shape))
    assert_allclose(jnp.resize(np.zeros(0, np.float32), (2, 2)), np.zeros((2, 2), np.float32))


# --- flipping, rotating, rolling ----------------------------------------------------------------
@given(nonempty_shapes, st.data())
def test_flip_matches_numpy(shape, data):
    x = arange(shape)
    ndim = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1),
                               st.lists(st.integers(0, ndim - 1), unique=True).map(tuple)))
    check_eager_and_jit(lambda a: jnp.flip(a, axis), x, expected=np.flip(x, axis))


def test_fliplr_flipud_rot90():
    x = arange((2, 3, 4))
    check_eager_and_jit(jnp.fliplr, x, expected=np.fliplr(x))
    check_eager_and_jit(jnp.flipud, x, expected=np.flipud(x))
    for k in range(-3, 6):
        for axes in ((0, 1), (1, 2), (2, 0), (-1, -2)):
            check_eager_and_jit(lambda a: jnp.rot90(a, k, axes), x, expected=np.rot90(x, k, axes))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        jnp.fliplr(jnp.ones(3))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        jnp.rot90(jnp.ones(3))
    with pytest.raises(ValueError, match="repeated"):
        jnp.rot90(x, 1, (1, 1))
    with pytest.raises(ValueError, match="two axes"):
        jnp.rot90(x, 1, (0, 1, 2))


@pytest.mark.parametrize("shift, axis", [(2, None), (-7, None), (1, 0), (5, 1), (-1, -1), ((1, 2), (0, 1)),
                                         (1, (0, 1)), ((1, 2), 1), (0, 0), (13, None)])
def test_roll_static_and_traced(shift, axis):
    x = arange((3, 4))
    expected = np.roll(x, shift, axis)
    check_eager_and_jit(lambda a: jnp.roll(a, shift, axis), x, expected=expected)
    traced = ember.jit(lambda a, s: jnp.roll(a, s, axis))(x, np.asarray(shift, np.int32))
    assert_allclose(traced, expected)


def test_roll_traced_shift_uses_no_host_values():
    closed = ember.make_jaxpr(lambda a, s: jnp.roll(a, s, 0))(np.ones(5, np.float32), 3)
    assert "dynamic_slice" in [e.primitive.name for e in closed.eqns]
    assert jnp.roll(np.zeros((0, 2)), 3, 0).shape == (0, 2)
    # A float shift is converted to int32 (truncated), traced or not, as JAX converts it.
    assert ember.jit(lambda a, s: jnp.roll(a, s, 0))(np.arange(5, dtype=np.float32), 1.5).tolist() == [4, 0, 1, 2, 3]


# --- padding -------------------------------------------------------------------------------------
@st.composite
def pad_problems(draw):
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    widths = [tuple(draw(st.integers(0, 9)) for _ in range(2)) for _ in shape]
    form = draw(st.sampled_from(["pairs", "pair", "int"]))
    pad_width = widths if form == "pairs" else widths[0] if form == "pair" else widths[0][0]
    return shape, pad_width


@given(pad_problems(), st.sampled_from(["constant", "edge", "wrap", "reflect", "symmetric", "empty"]))
def test_pad_matches_numpy(problem, mode):
    shape, pad_width = problem
    x = arange(shape) + 1
    expected = np.pad(x, pad_width, mode if mode != "empty" else "constant")
    check_eager_and_jit(lambda a: jnp.pad(a, pad_width, mode), x, expected=expected)


@st.composite
def pad_mode_problems(draw):
    shape, pad_width = draw(pad_problems())
    mode = draw(st.sampled_from(["reflect", "symmetric", "linear_ramp", "maximum", "minimum", "mean", "median"]))
    per_axis = st.lists(st.tuples(st.integers(1, 5), st.integers(1, 5)), min_size=len(shape), max_size=len(shape))
    if mode in ("reflect", "symmetric"):
        keywords = {"reflect_type": draw(st.sampled_from(["even", "odd"]))}
    elif mode == "linear_ramp":
        keywords = {"end_values": draw(st.one_of(st.integers(-9, 9), st.tuples(st.integers(-9, 9), st.integers(-9, 9)),
                                                 per_axis.map(tuple)))}
    else:
        keywords = draw(st.one_of(st.just({}), st.integers(1, 5).map(lambda n: {"stat_length": n}),
                                  per_axis.map(lambda p: {"stat_length": tuple(p)})))
    return shape, pad_width, mode, keywords


@settings(max_examples=40, deadline=None)
@given(pad_mode_problems(), st.sampled_from([np.int32, np.float32]))
def test_every_pad_mode_matches_numpy(problem, dtype):
    # odd mirrors block after block (pads wider than the axis), ramps and statistics in the array's
    # type (integer statistics rounded half to even), each axis seeing the earlier axes' padding
    shape, pad_width, mode, keywords = problem
    x = ((arange(shape) * 7) % 11 - 5).astype(dtype)
    expected = np.pad(x, pad_width, mode, **keywords)
    check_eager_and_jit(lambda a: jnp.pad(a, pad_width, mode, **keywords), x, expected=expected)


def test_pad_with_a_function_fills_each_slice():
    def ends(vector, widths, axis, kwargs):
        return vector.at[:widths[0]].set(kwargs["low"]).at[vector.shape[0] - widths[1]:].set(axis)

    x = arange((2, 3), np.float32)
    want = np.pad(x, ((1, 2), (2, 1)), lambda v, w, ax, kw: _fill_ends(v, w, ax, kw), low=-5.0)
    check_eager_and_jit(lambda a: jnp.pad(a, ((1, 2), (2, 1)), ends, low=-5.0), x, expected=want)


def _fill_ends(vector, widths, axis, kwargs):  # NumPy's form: the vector is written in place
    vector[:widths[0]] = kwargs["low"]
    vector[vector.shape[0] - widths[1]:] = axis


def test_pad_constant_values():
    x = arange((2, 3), np.int32)
    for values in (7, ((1, 2), (3, 4)), (5, 6), [[8], [9]]):
        check_eager_and_jit(lambda a: jnp.pad(a, ((1, 2), (2, 1)), constant_values=values), x,
                            expected=np.pad(x, ((1, 2), (2, 1)), constant_values=values))
    traced = ember.jit(lambda a, v: jnp.pad(a, 1, constant_values=v))(x, 5)
    assert_allclose(traced, np.pad(x, 1, constant_values=5))
    assert jnp.pad(np.ones(2, np.float16), 1, constant_values=2.5).dtype == np.float16
    bf = jnp.pad(np.ones(2, ml_dtypes.bfloat16), 1, mode="reflect")
    assert bf.dtype == ml_dtypes.bfloat16 and bf.shape == (4,)
    assert_allclose(jnp.pad(np.float32(3), 2), np.float32(3))


def test_pad_errors():
    with pytest.raises(ValueError, match="non-negative"):
        jnp.pad(jnp.ones(3), -1)
    with pytest.raises(ValueError, match="does not fit"):
        jnp.pad(jnp.ones(3), ((1, 2), (3, 4)))
    with pytest.raises(NotImplementedError, match="unimplemented padding mode 'middle'"):
        jnp.pad(jnp.ones(3), 1, mode="middle")
    with pytest.raises(ValueError, match="unsupported keyword"):
        jnp.pad(jnp.ones(3), 1, mode="edge", constant_values=2)
    with pytest.raises(ValueError, match="reflect_type must be 'even' or 'odd'"):
        jnp.pad(jnp.ones(3), 1, mode="reflect", reflect_type="half")
    with pytest.raises(ValueError, match="stat_length of 0"):
        jnp.pad(jnp.ones(3), 1, mode="mean", stat_length=0)
    with pytest.raises(ValueError, match="empty axis"):
        jnp.pad(jnp.ones((0, 2)), 1, mode="maximum")
    with pytest.raises(ValueError, match="empty axis"):
        jnp.pad(jnp.ones(0), 2, mode="wrap")
    with pytest.raises(TypeError, match="integers"):
        jnp.pad(jnp.ones(3), 1.5)


# --- delete, insert, trim_zeros ---------------------------------------------------------------
@pytest.mark.parametrize("obj, axis", [(1, None), (-1, 0), (np.array([0, 2]), 1), (slice(1, None, 2), 1),
                                       (np.array([True, False]), 0), (np.array([], np.int32), 0)])
def test_delete(obj, axis):
    x = arange((2, 4), np.int32)
    check_eager_and_jit(lambda a: jnp.delete(a, obj, axis), x, expected=np.delete(x, obj, axis))


@pytest.mark.parametrize("obj, values, axis", [(2, np.array([10, 11]), None), (1, 7, 0), (1, np.array([7, 8]), 1),
                                               (np.array([0, 2]), np.array([5, 6]), 1), (4, 9, 1),
                                               (-1, np.array([1, 2, 3, 4]), 0), (slice(0, 2), 0, 1)])
def test_insert(obj, values, axis):
    x = arange((2, 4), np.int32)
    check_eager_and_jit(lambda a: jnp.insert(a, obj, values, axis), x, expected=np.insert(x, obj, values, axis))


def test_delete_insert_errors_and_trim_zeros():
    with pytest.raises(ValueError, match="axis 5 is out of bounds for array of dimension 3"):  # (JAX's words)
        jnp.delete(jnp.ones(3), 5)
    with pytest.raises(IndexError, match="out of bounds"):
        jnp.insert(jnp.ones(3), 5, 1.0)
    x = np.array([0, 0, 1, 2, 0, 3, 0], np.int32)
    for trim in ("fb", "f", "b", "FB"):
        assert_allclose(jnp.trim_zeros(x, trim), np.trim_zeros(x, trim))
    assert jnp.trim_zeros(np.zeros(3)).shape == (0,)


# --- metadata and views ---------------------------------------------------------------------------
def test_ndim_shape_size():
    x = jnp.ones((2, 3, 4))
    assert (jnp.ndim(x), jnp.shape(x), jnp.size(x), jnp.size(x, 1), jnp.size(x, (0, 2))) == (3, (2, 3, 4), 24, 3, 8)
    assert (jnp.ndim([[1, 2]]), jnp.shape([[1, 2]]), jnp.size(3.0)) == (2, (1, 2), 1)
    ember.jit(lambda a: jnp.zeros(jnp.shape(a)[0] * jnp.size(a)))(x)


@pytest.mark.parametrize("source, target", [
    (np.float32, np.int32), (np.float32, np.uint8), (np.uint8, np.float32), (np.int16, np.float16),
    (np.bool_, np.int8), (np.uint8, np.bool_), (np.float16, ml_dtypes.bfloat16), (np.int8, np.uint16),
])
def test_view(source, target):
    x = (np.arange(8) % 2).astype(source) if source == np.bool_ else np.arange(8).astype(source)
    expected = x.view(np.uint8).view(target) if target != np.bool_ else x.view(np.uint8) != 0
    check_eager_and_jit(lambda a: jnp.view(a, target), x, expected=expected)
    assert_allclose(jnp.asarray(x).view(target), expected)


def test_view_errors():
    with pytest.raises(ValueError, match="whole number"):
        jnp.view(jnp.ones(3, np.uint8), np.float32)
    with pytest.raises(ValueError, match="whole number"):
        jnp.view(jnp.ones((), np.float32), np.uint8)
