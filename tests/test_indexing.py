"""Indexing: lax.gather / scatter, NumPy indexing (x[idx]), x.at[idx] updates, and the jnp index functions."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as jnp
from ember import errors, lax
from ember.lax import GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers
from tests.util import assert_allclose, check_eager_and_jit

X_NP = np.arange(120, dtype=np.float32).reshape(4, 5, 6) - 60
X = jnp.asarray(X_NP)


def primitive_names(f, *args):
    return [e.primitive.name for e in ember.make_jaxpr(f)(*args).eqns]


# --- x[idx] against NumPy ------------------------------------------------------------------------
INDEX_TABLE = [
    0, -1, 3, (1, 2), (1, 2, 3), (-1, -2, -3),
    slice(None), slice(1, 3), slice(None, None, -1), slice(3, 0, -2), slice(-100, 100), slice(5, 1),
    (slice(None), 1), (Ellipsis, 2), (1, Ellipsis), (Ellipsis,), (1, Ellipsis, 2),
    None, (None, 0), (0, None, slice(None), None), (Ellipsis, None), (None, Ellipsis, None),
    (slice(None, None, 2), slice(None, None, -3), slice(1, None, 4)),
    np.array([0, 2]), np.array([-1, 0, 0]), ([0, 1], [1, 2]), ([[0, 1], [2, 3]],), (slice(None), [4, 0, -5]),
    (slice(None), [0, 1], [1, 2]),                  # adjacent advanced: block stays in place
    ([0, 1], slice(None), [1, 2]),                  # separated: block goes first
    (0, slice(None), [1, 2]),                       # an int counts as advanced for placement
    (slice(None), 0, [1, 2]),
    (np.array([[0], [3]]), slice(1, 4), np.array([1, 2, 5])),
    (np.array([1, 0]), None, np.array([0, 4])),     # None between advanced indices separates them
    (slice(None, None, -1), [2, 0]), ([3, 1], slice(None, None, -2), None),
    (Ellipsis, [5, 0]), ([1], Ellipsis, [2]),
    np.array([True, False, True, False]), (slice(None), X_NP[0] > 0), X_NP > 0, (X_NP[..., 0] > 0, 3),
    (Ellipsis, np.array([True, False, False, True, True, False])),
    True, False, (0, True), (Ellipsis, False),
    np.array(2), (np.int64(1), np.int8(-1)), np.array([], int), (slice(None), []),
]


@pytest.mark.parametrize("index", INDEX_TABLE, ids=repr)
def test_getitem_matches_numpy(index):
    check_eager_and_jit(lambda x: x[index], X, expected=X_NP[index])


def test_traced_index_arrays():
    i, j = np.array([4, 0, -5]), np.array([[1], [2]])
    check_eager_and_jit(lambda x, j: x[j], X, j, expected=X_NP[j])
    check_eager_and_jit(lambda x, i: x[:, i], X, i, expected=X_NP[:, i])
    check_eager_and_jit(lambda x, i, j: x[j, :, i], X, i, j, expected=X_NP[j, :, i])
    check_eager_and_jit(lambda x, i, j: x[::-1, j, i], X, i, j, expected=X_NP[::-1, j, i])


def test_traced_scalar_indices_use_dynamic_slice():
    f = lambda x, i, j: x[i, 1:4, j]
    check_eager_and_jit(f, X, 2, -1, expected=X_NP[2, 1:4, -1])
    names = primitive_names(f, X, 2, -1)
    assert "dynamic_slice" in names and "gather" not in names


def test_traced_scalar_with_index_array_uses_gather():
    check_eager_and_jit(lambda x, i: x[i, [0, 4]], X, -3, expected=X_NP[-3, [0, 4]])
    assert "gather" in primitive_names(lambda x, i: x[i, [0, 4]], X, 1)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.float16, jnp.bfloat16])
def test_getitem_keeps_dtype(dtype):
    x_np = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    check_eager_and_jit(lambda x: (x[1], x[::-1, [0, 3]]), jnp.asarray(x_np), expected=(x_np[1], x_np[::-1, [0, 3]]))


def test_getitem_keeps_weak_type():
    weak = lax.convert_element_type(jnp.asarray([1.0, 2.0]), jnp.float32, weak_type=True)
    assert weak[0].weak_type and weak[np.array([1, 0])].weak_type and weak.at[0].set(5).weak_type


def test_index_array_dtypes():
    for dt in (np.uint8, np.int16, np.int64):
        idx = np.array([3, 0, 1], dtype=dt)
        check_eager_and_jit(lambda x, i: x[i], X, jnp.asarray(idx), expected=X_NP[idx])


def test_ember_array_and_list_of_tracers_as_indices():
    check_eager_and_jit(lambda x: x[jnp.asarray([2, 0])], X, expected=X_NP[[2, 0]])
    check_eager_and_jit(lambda x: x[jnp.asarray(X_NP[:, 0, 0] > -30)], X, expected=X_NP[X_NP[:, 0, 0] > -30])
    check_eager_and_jit(lambda x, i: x[jnp.asarray(1), i], X, jnp.asarray(3), expected=X_NP[1, 3])
    check_eager_and_jit(lambda x, i: x[jnp.stack([i, 0])], X, 3, expected=X_NP[[3, 0]])
    with pytest.raises(TypeError, match="non-tuple sequence"):  # (a list of them is JAX's TypeError)
        ember.jit(lambda x, i: x[[i, 0]])(X, 3)


# --- hypothesis: basic indices on random shapes ---------------------------------------------------
@st.composite
def basic_indices(draw):
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=4)))
    items = []
    for n in shape:
        bound = st.one_of(st.none(), st.integers(-n - 2, n + 2))
        if n and draw(st.booleans()):
            items.append(draw(st.integers(-n, n - 1)))
        else:
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))))
    start = draw(st.integers(0, len(shape)))
    if draw(st.booleans()):  # an Ellipsis stands for the dimensions start:stop
        items = items[:start] + [Ellipsis] + items[draw(st.integers(start, len(shape))):]
    else:
        items = items[:start]
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    return shape, tuple(items)


@given(basic_indices())
def test_basic_indexing_and_set_match_numpy(case):
    shape, index = case
    x_np = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    f = lambda x: x[index]
    check_eager_and_jit(f, jnp.asarray(x_np), expected=x_np[index])
    names = primitive_names(f, jnp.asarray(x_np))
    assert not {"gather", "dynamic_slice"} & set(names), names
    values = -np.arange(x_np[index].size, dtype=np.int32).reshape(x_np[index].shape)
    expected = x_np.copy()
    expected[index] = values
    check_eager_and_jit(lambda x, v: x.at[index].set(v), jnp.asarray(x_np), values, expected=expected)


@st.composite
def advanced_indices(draw):
    """Ints, slices, new axes and in-bounds integer arrays of broadcast-compatible shapes."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    block = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    items = []
    for n in shape[:draw(st.integers(1, len(shape)))]:
        kind = draw(st.sampled_from(["int", "slice", "array", "array"]))
        if kind == "int":
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            items.append(slice(draw(st.sampled_from([None, 0, 1, -1])), None, draw(st.sampled_from([None, 2, -1]))))
        else:
            sub = block[draw(st.integers(0, len(block))):]
            sub = tuple(1 if draw(st.booleans()) else s for s in sub)
            values = draw(st.lists(st.integers(-n, n - 1), min_size=int(np.prod(sub)), max_size=int(np.prod(sub))))
            items.append(np.array(values, dtype=np.int32).reshape(sub))
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), None)
    return shape, tuple(items)


@given(advanced_indices())
def test_advanced_indexing_and_add_match_numpy(case):
    shape, index = case
    x_np = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    check_eager_and_jit(lambda x: x[index], jnp.asarray(x_np), expected=x_np[index])
    updates = np.arange(x_np[index].size, dtype=np.float32).reshape(x_np[index].shape) + 1
    expected = x_np.copy()
    np.add.at(expected, index, updates)  # duplicates accumulate
    check_eager_and_jit(lambda x, u: x.at[index].add(u), jnp.asarray(x_np), updates, expected=expected)


# --- cheap lowering ------------------------------------------------------------------------------------
@pytest.mark.parametrize("index", [0, (slice(None), 2), (Ellipsis, slice(None, None, -2), None), (1, 2, 3)],
                         ids=repr)
def test_basic_indexing_lowers_to_slices(index):
    names = primitive_names(lambda x: x[index], X)
    assert set(names) <= {"slice", "rev", "squeeze", "broadcast_in_dim", "reshape"}, names


def test_contiguous_update_uses_dynamic_update_slice():
    names = primitive_names(lambda x, v: x.at[1:3, 2].set(v), X, jnp.ones((2, 6)))
    assert "dynamic_update_slice" in names and "scatter" not in names
    names = primitive_names(lambda x, i: x.at[i].add(1.0, mode="clip"), X, 1)
    assert "dynamic_update_slice" in names and "scatter-add" not in names
    # A traced index that may be out of bounds must be dropped, which only scatter does.
    assert "scatter" in primitive_names(lambda x, i: x.at[i].set(0.0), X, 1)


# --- out-of-bounds semantics (JAX's: reads clamp, writes drop) --------------------------------------
def test_out_of_bounds_reads_clamp():
    x_np = np.arange(5.0, dtype=np.float32)
    x = jnp.asarray(x_np)
    check_eager_and_jit(lambda x: (x[7], x[-9], x[np.array([7, -9, -1])]), x,
                        expected=(x_np[4], x_np[0], x_np[[4, 0, 4]]))
    check_eager_and_jit(lambda x, i: x[i], x, 12, expected=x_np[4])
    check_eager_and_jit(lambda x, i: x[i], x, -12, expected=x_np[0])
    check_eager_and_jit(lambda x, i: x[i], x, jnp.asarray([12, -12, -2]), expected=x_np[[4, 0, 3]])


def test_fill_mode_reads():
    check_eager_and_jit(lambda x: x.at[np.array([1, 9, -9])].get(mode="fill"), jnp.arange(4.0),
                        expected=np.array([1, np.nan, np.nan], np.float32))
    check_eager_and_jit(lambda x: x.at[5].get(mode="fill", fill_value=-1), jnp.arange(4), expected=np.int32(-1))
    fills = [jnp.asarray(np.zeros(2, dt)).at[3].get(mode="fill") for dt in (np.int8, np.uint8, np.bool_)]
    assert [f.item() for f in fills] == [-128, 255, True]


def test_out_of_bounds_writes_are_dropped():
    x_np = np.arange(5.0, dtype=np.float32)
    x = jnp.asarray(x_np)
    expected = x_np.copy()
    expected[[0, 4]] += 10
    check_eager_and_jit(lambda x: x.at[np.array([0, 7, -1, -9])].add(10.0), x, expected=expected)
    check_eager_and_jit(lambda x: x.at[9].set(0.0), x, expected=x_np)
    check_eager_and_jit(lambda x, i: x.at[i].set(0.0), x, 9, expected=x_np)
    check_eager_and_jit(lambda x, i: x.at[i, None].set(0.0), x, -6, expected=x_np)


def test_clip_mode_writes_clamp():
    check_eager_and_jit(lambda x: x.at[np.array([7, -9])].set(np.array([1.0, 2.0]), mode="clip"),
                        jnp.zeros(4), expected=np.array([2, 0, 0, 1], np.float32))
    check_eager_and_jit(lambda x, i: x.at[i].set(5.0, mode="clip"), jnp.zeros(3), 8,
                        expected=np.array([0, 0, 5], np.float32))


def test_wrap_negative_indices_false():
    check_eager_and_jit(lambda x: x.at[np.array([-1, 1])].set(9.0, wrap_negative_indices=False), jnp.zeros(3),
                        expected=np.array([0, 9, 0], np.float32))


# --- x.at[idx] ---------------------------------------------------------------------------------------
DUPLICATES = np.array([1, 3, 1, 1, 0])


@pytest.mark.parametrize("method, ufunc", [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply), ("min", np.minimum),
    ("max", np.maximum)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_at_combining_methods_with_duplicates(method, ufunc, dtype):
    x_np = np.array([5, 1, 7, 2], dtype=dtype)
    v_np = np.array([2, 3, 1, 4, 6], dtype=dtype)
    expected = x_np.copy()
    ufunc.at(expected, DUPLICATES, v_np)
    check_eager_and_jit(lambda x, v: getattr(x.at[DUPLICATES], method)(v), jnp.asarray(x_np), jnp.asarray(v_np),
                        expected=expected)


def test_at_set_broadcasts_and_casts_updates():
    expected = X_NP.copy()
    expected[1:3, :, [0, 5]] = np.array([7.5, 8.5], np.float32)
    check_eager_and_jit(lambda x: x.at[1:3, :, [0, 5]].set(np.array([7.5, 8.5])), X, expected=expected)
    ints = jnp.arange(4)
    out = ints.at[1].set(2.9)
    assert out.dtype == jnp.int32 and out.tolist() == [0, 2, 2, 3]
    out = ints.at[np.array([1, 1])].add(0.6)  # as JAX: combined in float32, then cast back
    assert out.tolist() == [0, 2, 2, 3]


@pytest.mark.parametrize("index", [(slice(None), 1), (Ellipsis, slice(None, None, -2)), (None, 2, None, 3),
                                   ([3, 0], slice(1, 4)), ([0, 1], slice(None), [1, 2]), True, X_NP > 0,
                                   (0, np.array([[0, 1], [2, 3]]))], ids=repr)
def test_at_set_matches_numpy(index):
    expected = X_NP.copy()
    values = -np.arange(X_NP[index].size, dtype=np.float32).reshape(X_NP[index].shape)
    expected[index] = values
    check_eager_and_jit(lambda x, v: x.at[index].set(v), X, values, expected=expected)


def test_at_divide_power_apply_and_get():
    x_np = np.array([8.0, 9.0, 2.0], np.float32)
    x = jnp.asarray(x_np)
    check_eager_and_jit(lambda x: x.at[np.array([0, 0, 2])].divide(2.0), x, expected=np.array([2, 9, 1], np.float32))
    check_eager_and_jit(lambda x: x.at[1:].power(2), x, expected=np.array([8, 81, 4], np.float32))
    check_eager_and_jit(lambda x: x.at[::2].apply(jnp.negative), x, expected=np.array([-8, 9, -2], np.float32))
    check_eager_and_jit(lambda x: x.at[np.array([2, 0])].get(), x, expected=x_np[[2, 0]])
    assert jnp.arange(3).at[0].divide(2).dtype == jnp.float32  # as JAX: true division
    assert x.at[1].mul(3.0).tolist() == [8.0, 27.0, 2.0]


def test_at_on_bool_arrays():
    x = jnp.asarray([True, False, False])
    with pytest.raises(TypeError, match="add does not accept dtype bool"):  # as JAX: no arithmetic on booleans
        x.at[np.array([1, 1])].add(True)
    with pytest.raises(TypeError, match="mul does not accept dtype bool"):
        x.at[0].multiply(False)
    assert x.at[np.array([1, 1])].add(1).tolist() == [True, True, False]  # promoted to int32, then back (JAX)
    assert x.at[2].max(True).tolist() == [True, False, True]


def test_at_with_traced_updates_and_indices():
    expected = X_NP.copy()
    expected[2, [1, 4]] = 0
    check_eager_and_jit(lambda x, i, j: x.at[i, j].set(0.0), X, 2, jnp.asarray([1, 4]), expected=expected)


def test_at_repr_and_helper():
    ref = X.at[1]
    assert "IndexUpdateRef" in repr(ref) and "IndexUpdateHelper" in repr(X.at)


# --- errors ----------------------------------------------------------------------------------------------
def test_traced_boolean_mask_error():
    mask = X_NP > 0
    with pytest.raises(errors.NonConcreteBooleanIndexError) as info:
        ember.jit(lambda x, m: x[m])(X, mask)
    assert isinstance(info.value, IndexError)
    message = str(info.value)
    assert "concrete" in message and "jnp.where" in message and "size=" in message and "nonzero" in message
    with pytest.raises(errors.NonConcreteBooleanIndexError):
        ember.jit(lambda x, m: x.at[m].set(0.0))(X, mask)
    # The documented fix works under jit.
    check_eager_and_jit(lambda x, m: jnp.where(m, x, 0.0), X, mask, expected=np.where(mask, X_NP, 0))


def test_index_errors():
    with pytest.raises(IndexError, match=r"Too many indices.*\(4, 5, 6\)"):
        X[0, 0, 0, 0]
    with pytest.raises(IndexError, match="Too many indices"):
        ember.jit(lambda x: x[0, 0, 0, 0])(X)
    with pytest.raises(TypeError, match="Indexer must have integer or boolean type, got indexer with type float64"):
        X[1.0]  # (JAX's class and words)
    with pytest.raises(TypeError, match="Indexer must have integer or boolean type"):
        X[np.array([1.0])]
    with pytest.raises(TypeError, match="string indexing"):
        X["a"]
    with pytest.raises(TypeError, match="got indexer with type float32"):
        ember.jit(lambda x, i: x[i])(X, jnp.asarray([1.0]))
    with pytest.raises(IndexError, match="single ellipsis"):
        X[..., 0, ...]
    with pytest.raises(IndexError, match="boolean index did not match"):
        X[np.array([True, False])]
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):  # JAX's class
        X[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="dynamic_slice"):
        ember.jit(lambda x, i: x[i:])(X, 1)
    with pytest.raises(ValueError, match="step cannot be zero"):
        X[::0]
    with pytest.raises(TypeError, match="slice indices must be integers"):
        X[1.5:]
    with pytest.raises(IndexError, match="size 0"):
        jnp.zeros((0, 3))[0]
    with pytest.raises(TypeError, match=r"Slice size at index 0 in gather op is out of range"):  # (JAX's)
        jnp.zeros((0, 3))[np.array([0])]


def test_empty_results():
    empty = jnp.zeros((0, 3))
    none = np.array([], int)
    assert empty[none].shape == (0, 3) and empty[:, [0, 2]].shape == (0, 2) and empty.at[none].set(1.0).shape == (0, 3)
    check_eager_and_jit(lambda x: (x[[], 1], x[2:2, [0, 1]], x.at[np.zeros(0, int)].add(1.0)), X,
                        expected=(X_NP[[], 1], X_NP[2:2, [0, 1]], X_NP))


# --- lax.gather / lax.scatter ------------------------------------------------------------------------------
def test_gather_windows_and_modes():
    operand = jnp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    dnums = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1))
    indices = np.array([[0, 1], [2, 3], [-1, 0]])
    clipped = lax.gather(operand, indices, dnums, (1, 2), mode="clip")
    assert_allclose(clipped, np.array([[1, 2], [10, 11], [0, 1]], np.float32))
    filled = lax.gather(operand, indices, dnums, (1, 2), mode="fill", fill_value=-1)
    assert_allclose(filled, np.array([[1, 2], [-1, -1], [-1, -1]], np.float32))
    # mode=None is JAX's 'promise_in_bounds' for lax.gather, which clamps as 'clip' does (lax.scatter's None drops).
    assert_allclose(lax.gather(operand, indices, dnums, (1, 2)), np.array([[1, 2], [10, 11], [0, 1]], np.float32))


def test_gather_and_scatter_with_batching_dims():
    operand_np = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    indices = np.array([[[1], [3]], [[0], [0]]])  # per batch (dim 0), two positions along dim 2
    dnums = GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(2,), start_index_map=(2,),
                                   operand_batching_dims=(0,), start_indices_batching_dims=(0,))
    out = check_eager_and_jit(lambda o: lax.gather(o, indices, dnums, (1, 3, 1), mode="clip"), jnp.asarray(operand_np))
    expected = np.stack([operand_np[b][:, indices[b, :, 0]].T for b in range(2)])
    assert_allclose(out, expected)
    sdnums = ScatterDimensionNumbers(update_window_dims=(2,), inserted_window_dims=(2,),
                                     scatter_dims_to_operand_dims=(2,), operand_batching_dims=(0,),
                                     scatter_indices_batching_dims=(0,))
    scattered = lax.scatter_add(jnp.zeros((2, 3, 4)), indices, jnp.ones((2, 2, 3)), sdnums)
    counts = np.zeros((2, 3, 4), np.float32)
    for b in range(2):
        np.add.at(counts[b].T, indices[b, :, 0], 1)
    assert_allclose(scattered, counts)


def test_scatter_flavors_drop_and_clip():
    dnums = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
    operand = jnp.asarray(np.array([1, 5, 3], np.int32))
    indices = np.array([[0], [0], [4], [2]])
    updates = jnp.asarray(np.array([4, 2, 9, 1], np.int32))
    assert lax.scatter_add(operand, indices, updates, dnums).tolist() == [7, 5, 4]
    assert lax.scatter_sub(operand, indices, updates, dnums).tolist() == [-5, 5, 2]
    assert lax.scatter_mul(operand, indices, updates, dnums).tolist() == [8, 5, 3]
    assert lax.scatter_min(operand, indices, updates, dnums).tolist() == [1, 5, 1]
    assert lax.scatter_max(operand, indices, updates, dnums).tolist() == [4, 5, 3]
    assert lax.scatter(operand, indices[2:], updates[2:], dnums).tolist() == [1, 5, 1]
    assert lax.scatter(operand, indices[2:], updates[2:], dnums, mode="clip").tolist() == [1, 5, 1]
    assert lax.scatter_add(operand, indices[2:3], updates[2:3], dnums, mode="clip").tolist() == [1, 5, 12]


def test_gather_scatter_shape_rule_errors():
    operand = jnp.zeros((3, 4))
    dnums = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    with pytest.raises(ValueError, match="indices must have an integer type"):  # (JAX's class and words)
        lax.gather(operand, jnp.zeros((2, 1)), dnums, (1, 4))
    with pytest.raises(TypeError, match=r"Slice size at index 1 in gather op is out of range, must be within \[0, 4"):
        lax.gather(operand, np.zeros((2, 1), np.int32), dnums, (1, 5))
    with pytest.raises(TypeError, match="slice size 1"):
        lax.gather(operand, np.zeros((2, 1), np.int32), dnums, (2, 4))
    with pytest.raises(TypeError, match="start_index_map"):
        lax.gather(operand, np.zeros((2, 2), np.int32), dnums, (1, 4))
    with pytest.raises(TypeError, match="offset_dims"):
        lax.gather(operand, np.zeros((2, 1), np.int32), dnums._replace(offset_dims=()), (1, 4))
    sdnums = ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
    with pytest.raises(TypeError, match="scatter-add: updates dtype"):
        lax.scatter_add(operand, np.zeros((2, 1), np.int32), jnp.zeros((2, 4), jnp.int32), sdnums)
    with pytest.raises(TypeError, match="index batch shape"):
        lax.scatter_add(operand, np.zeros((2, 1), np.int32), jnp.zeros((3, 4)), sdnums)
    with pytest.raises(TypeError, match="larger than operand dimension"):
        lax.scatter(operand, np.zeros((2, 1), np.int32), jnp.zeros((2, 5)), sdnums)
    with pytest.raises(ValueError, match="Unknown gather/scatter mode"):
        GatherScatterMode.from_any("wrap")
    assert hash(dnums) == hash(GatherDimensionNumbers((1,), (0,), (0,)))


def test_lax_gather_scatter_match_jax():
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    operand = rng.normal(size=(5, 4, 3)).astype(np.float32)
    cases = [  # indices, offset_dims, collapsed, start_index_map, operand / indices batching dims, slice_sizes
        (rng.integers(-2, 7, size=(6, 2)), (1, 2), (0,), (0, 1), (), (), (1, 2, 3)),
        (rng.integers(-2, 7, size=(5, 2, 1)), (1,), (1,), (1,), (0,), (0,), (1, 1, 3)),
        (rng.integers(0, 3, size=(3, 5, 1)), (), (1,), (1,), (0, 2), (1, 0), (1, 1, 1)),
    ]
    for mode in ("clip", "fill"):
        for indices, offset, collapsed, index_map, obd, ibd, sizes in cases:
            indices = indices.astype(np.int32)
            expected = jax.lax.gather(operand, indices, jax.lax.GatherDimensionNumbers(
                offset, collapsed, index_map, obd, ibd), sizes, mode=mode)
            got = lax.gather(operand, indices, GatherDimensionNumbers(offset, collapsed, index_map, obd, ibd), sizes,
                             mode=mode)
            assert_allclose(got, np.asarray(expected))
            updates = rng.normal(size=expected.shape).astype(np.float32)
            for name in ("scatter_add", "scatter_max"):
                want = getattr(jax.lax, name)(operand, indices, updates, jax.lax.ScatterDimensionNumbers(
                    offset, collapsed, index_map, obd, ibd), mode=mode)
                got = getattr(lax, name)(operand, indices, updates, ScatterDimensionNumbers(
                    offset, collapsed, index_map, obd, ibd), mode=mode)
                assert_allclose(got, np.asarray(want), rtol=1e-5)


# --- jnp index functions --------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_matches_numpy(axis, mode):
    indices = np.array([[0, -1], [7, -8]])
    check_eager_and_jit(lambda x, i: jnp.take(x, i, axis=axis, mode=mode), X, indices,
                        expected=np.take(X_NP, indices, axis=axis, mode=mode))


def test_take_default_fill_mode():
    check_eager_and_jit(lambda x: jnp.take(x, np.array([1, -1, 4, -5])), jnp.arange(4.0),
                        expected=np.array([1, 3, np.nan, np.nan], np.float32))
    check_eager_and_jit(lambda x: jnp.take(x, 1, axis=1), X, expected=X_NP[:, 1])
    assert jnp.take(jnp.arange(3), np.array([5]), fill_value=-7).tolist() == [-7]
    assert jnp.take(X, np.zeros((0,), int), axis=1).shape == (4, 0, 6)
    with pytest.raises(NotImplementedError, match="raise"):
        jnp.take(X, 0, mode="raise")
    with pytest.raises(ValueError, match="indices must have an integer type"):  # (JAX's class)
        jnp.take(X, np.array([0.5]))


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_take_along_axis_matches_numpy(axis, rng):
    order = np.argsort(X_NP * rng.normal(size=X_NP.shape), axis=axis)
    check_eager_and_jit(lambda x, i: jnp.take_along_axis(x, i, axis), X, order,
                        expected=np.take_along_axis(X_NP, order, axis))
    picked = np.take(order, [0], axis=axis)  # broadcasts against the other dimensions
    check_eager_and_jit(lambda x, i: jnp.take_along_axis(x, i, axis), X, picked,
                        expected=np.take_along_axis(X_NP, picked, axis))


def test_take_along_axis_broadcasting_and_modes():
    indices = np.array([[1], [3], [0], [2]])[:, :, None]  # (4, 1, 1) against (4, 5, 6) along axis 1
    check_eager_and_jit(lambda x: jnp.take_along_axis(x, indices, 1), X, expected=np.take_along_axis(
        X_NP, np.broadcast_to(indices, (4, 1, 6)), 1))
    out = jnp.take_along_axis(jnp.arange(3.0), np.array([5, -1]), 0)
    assert np.isnan(out[0]) and out[1] == 2.0
    assert jnp.take_along_axis(jnp.arange(3.0), np.array([5, -1]), 0, mode="clip").tolist() == [2.0, 2.0]
    check_eager_and_jit(lambda x: jnp.take_along_axis(x, np.array([3, 0]), None), X, expected=X_NP.ravel()[[3, 0]])
    with pytest.raises(ValueError, match="same number of dimensions"):
        jnp.take_along_axis(X, np.array([0]), 0)


@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4)])
def test_nonzero_family_matches_numpy(shape, rng):
    a_np = rng.integers(-1, 2, size=shape).astype(np.float32)
    for got, want in zip(jnp.nonzero(a_np), np.nonzero(a_np)):
        assert_allclose(got, want.astype(np.int32))
    assert_allclose(jnp.argwhere(a_np), np.argwhere(a_np).astype(np.int32))
    assert_allclose(jnp.flatnonzero(a_np), np.flatnonzero(a_np).astype(np.int32))
    assert_allclose(jnp.where(a_np)[0], np.where(a_np)[0].astype(np.int32))
    count = int(np.count_nonzero(a_np))
    for size in (count, count + 3, max(count - 2, 0)):
        padded = [np.concatenate([i, np.full(max(size - count, 0), -1)])[:size].astype(np.int32)
                  for i in np.nonzero(a_np)]
        check_eager_and_jit(lambda a: jnp.nonzero(a, size=size, fill_value=-1), jnp.asarray(a_np),
                            expected=tuple(padded))
        check_eager_and_jit(lambda a: jnp.argwhere(a, size=size, fill_value=-1), jnp.asarray(a_np),
                            expected=np.stack(padded, axis=-1))


def test_nonzero_errors_and_edges():
    with pytest.raises(errors.ConcretizationTypeError, match="size="):
        ember.jit(jnp.nonzero)(jnp.ones(3))
    with pytest.raises(ValueError, match="0d"):
        jnp.nonzero(jnp.asarray(1.0))
    assert jnp.argwhere(jnp.asarray(3.0)).shape == (1, 0)
    assert [i.tolist() for i in jnp.nonzero(jnp.zeros(4), size=2)] == [[0, 0]]
    assert [i.tolist() for i in jnp.nonzero(jnp.asarray([0, 0, 5, 6]), size=3, fill_value=(9,))] == [[2, 3, 9]]


def test_static_index_builders():
    for ours, theirs in [(jnp.tril_indices(4, 1, 5), np.tril_indices(4, 1, 5)),
                         (jnp.triu_indices(3), np.triu_indices(3)),
                         (jnp.diag_indices(3, 3), np.diag_indices(3, 3)),
                         (jnp.tril_indices_from(X[0]), np.tril_indices_from(X_NP[0])),
                         (jnp.triu_indices_from(X[0], -1), np.triu_indices_from(X_NP[0], -1)),
                         (jnp.diag_indices_from(X[:, :4, :4]), np.diag_indices_from(X_NP[:4, :4, :4]))]:
        for a, b in zip(ours, theirs):
            assert_allclose(a, b.astype(np.int32))
    with pytest.raises(ValueError, match="equal length"):
        jnp.diag_indices_from(X)
    with pytest.raises(ValueError, match="2-d"):
        jnp.tril_indices_from(X)


def test_ix_():
    rows, cols = np.array([0, 3]), np.array([0, 2])
    check_eager_and_jit(lambda x: x[:, 1][jnp.ix_(rows, cols)], X, expected=X_NP[:, 1][np.ix_(rows, cols)])
    with pytest.raises(NotImplementedError, match="Boolean arguments to jax.numpy.ix_"):  # (as JAX)
        jnp.ix_(np.array([True, False]))
    assert [a.shape for a in jnp.ix_(np.array([1, 2]), np.array([], int), np.array([0]))] == \
        [(2, 1, 1), (1, 0, 1), (1, 1, 1)]
    with pytest.raises(ValueError, match="1-dimensional"):
        jnp.ix_(np.zeros((2, 2), int))


def test_unravel_and_ravel_multi_index():
    flat = np.array([0, 5, 119, -1, -120])
    check_eager_and_jit(lambda i: jnp.unravel_index(i, (4, 5, 6)), flat,
                        expected=tuple(c.astype(np.int32) for c in np.unravel_index(flat % 120, (4, 5, 6))))
    clamped = jnp.unravel_index(np.array([500, -500]), (4, 5))  # JAX clamps out-of-bounds indices
    assert [c.tolist() for c in clamped] == [[3, 0], [4, 0]]
    coords = (np.array([0, 3, 2]), np.array([1, 5, 4]))
    for order in "CF":
        assert_allclose(jnp.ravel_multi_index(coords, (4, 6), order=order),
                        np.ravel_multi_index(coords, (4, 6), order=order).astype(np.int32))
    out_of_bounds = (np.array([0, 9]), np.array([-1, 2]))
    for mode in ("clip", "wrap"):
        check_eager_and_jit(lambda a, b: jnp.ravel_multi_index((a, b), (4, 6), mode=mode), *out_of_bounds,
                            expected=np.ravel_multi_index(out_of_bounds, (4, 6), mode=mode).astype(np.int32))
    with pytest.raises(ValueError, match="invalid entry"):
        jnp.ravel_multi_index(out_of_bounds, (4, 6))


def test_select_and_choose():
    conds = [X_NP > 20, X_NP < -20, X_NP > 0]
    choices = [X_NP, 2 * X_NP, np.float32(1)]
    check_eager_and_jit(lambda x: jnp.select([x > 20, x < -20, x > 0], [x, 2 * x, 1], -5), X,
                        expected=np.select(conds, choices, -5))
    assert jnp.select([np.array([False, True])], [2], 7).dtype == jnp.int32
    with pytest.raises(ValueError, match="equal to choicelist"):
        jnp.select([X > 0], [])
    which = np.array([0, 2, 1, 1])
    options = [np.arange(4), 10 * np.arange(4), np.int64(100)]
    assert_allclose(jnp.choose(which, options), np.choose(which, options).astype(np.int32))
    for mode in ("clip", "wrap"):
        bad = np.array([0, 5, -1, 2])
        check_eager_and_jit(lambda w: jnp.choose(w, options, mode=mode), bad,
                            expected=np.choose(bad, options, mode=mode).astype(np.int32))
    with pytest.raises(ValueError, match="invalid entry"):
        jnp.choose(np.array([3]), options)


def test_compress_and_extract():
    condition = np.array([True, False, True, True])
    check_eager_and_jit(lambda x: jnp.compress(condition, x, axis=0), X, expected=np.compress(condition, X_NP, axis=0))
    check_eager_and_jit(lambda x: jnp.compress(condition[:2], x, axis=2), X,
                        expected=np.compress(condition[:2], X_NP, axis=2))
    check_eager_and_jit(lambda c, x: jnp.compress(c, x, axis=0, size=4, fill_value=7), condition, X,
                        expected=np.concatenate([X_NP[condition], np.full((1, 5, 6), 7, np.float32)]))
    mask = X_NP > 50
    check_eager_and_jit(lambda x: jnp.extract(mask, x), X, expected=np.extract(mask, X_NP))
    check_eager_and_jit(lambda x: jnp.extract(jnp.asarray(mask), x), X, expected=np.extract(mask, X_NP))
    check_eager_and_jit(lambda m, x: jnp.extract(m, x, size=12, fill_value=-1), mask, X,
                        expected=np.concatenate([np.extract(mask, X_NP), -np.ones(3, np.float32)]))
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.compress(np.ones(5, bool), X, axis=0)
    with pytest.raises(errors.ConcretizationTypeError):
        ember.jit(lambda c, x: jnp.compress(c, x, axis=0))(condition, X)


def test_scatters_into_an_empty_axis_drop_their_updates_as_jax_does():
    """`.at[i]` with array indices into an empty axis: every index is out of bounds, so the
    updates are dropped (JAX's scatter) and the empty array comes back; a static int index is an
    IndexError, in JAX too."""
    import jax
    for m, np_ in ((ember, jnp), (jax, jax.numpy)):
        empty, rows = np_.zeros((0,)), np_.zeros((0, 3))
        for update in (lambda a: a.at[np_.array([0])].set(1.0), lambda a: a.at[np_.array([0, 2])].add(1.0),
                       m.jit(lambda a: a.at[np_.array([0])].multiply(2.0))):
            out = update(empty)
            assert out.shape == (0,) and out.dtype == np.float32
        assert rows.at[np_.array([1]), 2].set(5.0).shape == (0, 3)
        with pytest.raises(IndexError):
            empty.at[0].set(1.0)


def test_a_list_as_the_whole_index_is_refused_as_jax_refuses_it():
    import jax
    for np_ in (jnp, jax.numpy):
        x = np_.ones((3, 3))
        with pytest.raises(TypeError, match=r"non-tuple sequence for multidimensional indexing.*arr\[array\(seq\)\]"):
            x[[0, 1]]
        with pytest.raises(TypeError, match=r"arr\[tuple\(seq\)\]"):
            x[[[0, 1]]]
        with pytest.raises(TypeError, match="non-tuple sequence"):
            x.at[[0]].set(1.0)
        assert x[([0], 1)].shape == (1,) and x[(0, [1, 2])].shape == (2,)  # (lists inside a tuple are arrays)
