"""The eager path of small operations (ember.runtime.eager ``apply``, core.evaluation ``runner``
and the jnp functions' checks for operands that need no promotion): a signature's second and
later calls skip the dispatch and give what the reference interpreter gives, bit for bit, with
JAX's dtypes and weak types; errors, config changes and traced calls are those of the general path."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as jnp
from ember import lax
from ember.core.evaluation import eval_jaxpr
from ember.core.trace import EvalTrace
from ember.runtime import eager

jax = pytest.importorskip("jax")
jjnp = jax.numpy

DTYPES = ["float32", "float16", "bfloat16", "int32", "uint8", "bool", "complex64", "int8"]
SHAPES = [(), (1,), (5,), (2, 3), (0,), (3, 0)]

UNARY = {
    "sin": (jnp.sin, jjnp.sin), "exp": (jnp.exp, jjnp.exp), "negative": (jnp.negative, jjnp.negative),
    "sqrt": (jnp.sqrt, jjnp.sqrt), "tanh": (jnp.tanh, jjnp.tanh), "abs": (jnp.abs, jjnp.abs),
    "floor": (jnp.floor, jjnp.floor), "sum": (jnp.sum, jjnp.sum), "max": (jnp.max, jjnp.max),
    "prod": (jnp.prod, jjnp.prod), "sum0": (lambda x: jnp.sum(x, axis=0), lambda x: jjnp.sum(x, axis=0)),
    "neg_op": (lambda x: -x, lambda x: -x),
}
BINARY = {
    "add": (lambda x, y: x + y, lambda x, y: x + y), "sub": (jnp.subtract, jjnp.subtract),
    "mul": (lambda x, y: x * y, lambda x, y: x * y), "div": (lambda x, y: x / y, lambda x, y: x / y),
    "maximum": (jnp.maximum, jjnp.maximum), "eq": (lambda x, y: x == y, lambda x, y: x == y),
    "lt": (jnp.less, jjnp.less), "arctan2": (jnp.arctan2, jjnp.arctan2),
    "and": (jnp.bitwise_and, jjnp.bitwise_and),
}


def _values(rng, shape, dtype):
    v = rng.standard_normal(shape) * 3
    if dtype == "bool":
        return v > 0
    if dtype.startswith(("int", "uint")):
        return np.abs(v).astype(dtype) if dtype.startswith("uint") else v.astype(dtype)
    if dtype == "complex64":
        return (v + 1j * rng.standard_normal(shape)).astype(dtype)
    out = v.astype(jnp.dtype(dtype))
    if out.size:
        out.flat[0] = np.nan if out.size > 1 else out.flat[0]
    return out


def _outcome(fn, *args):
    """The result as (bits, dtype, weak type), or the exception's type and message."""
    try:
        r = fn(*args)
    except Exception as e:  # noqa: BLE001  (compared between the paths)
        return type(e), str(e)
    r = np.asarray(r), r.dtype, r.weak_type
    return r[0].tobytes(), r[0].shape, r[1], r[2]


def _reference(fn, *args):
    """``fn`` evaluated by the reference interpreter's environment loop on its traced program (the
    impl rules called directly, not the eager path's runners)."""
    closed = ember.make_jaxpr(fn)(*args)
    (out,) = eval_jaxpr(closed.jaxpr, closed.consts, *[np.asarray(a) for a in args])
    return out


def _check(fn, jfn, args, jargs):
    first, second, third = (_outcome(fn, *args) for _ in range(3))
    assert first == second == third  # (the first call builds the signature's runner; the later ones use it)
    if isinstance(first[0], type):
        return
    expected = _reference(fn, *args)
    assert first[0] == expected.tobytes() and first[1] == expected.shape
    with jax.numpy_dtype_promotion("standard"):
        want = jax.eval_shape(jfn, *jargs)  # (JAX's types, traced: no compile per drawn shape)
    assert (first[2], first[3]) == (want.dtype, want.weak_type)


@given(st.sampled_from(sorted(UNARY)), st.sampled_from(DTYPES), st.sampled_from(SHAPES),
       st.booleans())
def test_small_unary_calls_equal_the_reference_and_jaxs_types(name, dtype, shape, weak):
    fn, jfn = UNARY[name]
    host = _values(np.random.default_rng(0), shape, dtype)
    x, jx = jnp.asarray(host), jax.device_put(host)
    if weak and dtype in ("float32", "int32"):  # (a weakly typed array: a Python scalar filled in)
        fill = 1.5 if dtype == "float32" else 3
        x, jx = jnp.full(shape, fill), jjnp.full(shape, fill)
    _check(fn, jfn, (x,), (jx,))


@given(st.sampled_from(sorted(BINARY)), st.sampled_from(DTYPES), st.sampled_from(DTYPES),
       st.sampled_from(SHAPES), st.sampled_from(SHAPES))
def test_small_binary_calls_equal_the_reference_and_jaxs_types(name, dtype1, dtype2, shape1, shape2):
    fn, jfn = BINARY[name]
    rng = np.random.default_rng(1)
    a, b = _values(rng, shape1, dtype1), _values(rng, shape2, dtype2)
    _check(fn, jfn, (jnp.asarray(a), jnp.asarray(b)), (jax.device_put(a), jax.device_put(b)))


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("dtype", DTYPES)
def test_same_typed_operands_equal_the_reference_bit_for_bit(name, dtype):
    fn, jfn = BINARY[name]
    rng = np.random.default_rng(2)
    a, b = _values(rng, (7,), dtype), _values(rng, (7,), dtype)
    _check(fn, jfn, (jnp.asarray(a), jnp.asarray(b)), (jax.device_put(a), jax.device_put(b)))


def test_weak_operands_of_one_type_give_a_weak_result_as_jax():
    x, jx = jnp.full(3, 1.5), jjnp.full(3, 1.5)
    assert x.weak_type and jx.weak_type
    for _ in range(2):
        r, jr = x + x, jx + jx
        assert (r.dtype, r.weak_type) == (jr.dtype, jr.weak_type) == (np.float32, True)
        s, js = jnp.sum(x), jjnp.sum(jx)  # (a sum's result is strongly typed)
        assert (s.dtype, s.weak_type) == (js.dtype, js.weak_type)
        assert (jnp.sin(x).weak_type, jnp.sin(x).dtype) == (jjnp.sin(jx).weak_type, jjnp.sin(jx).dtype)


@pytest.mark.parametrize("make", [lambda a: a.array(1.0) > 0, lambda a: a.full(3, 1.5), lambda a: a.full(3, 2),
                                  lambda a: a.full((), True)])
@pytest.mark.parametrize("op", [lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x + y, lambda x, y: x * y,
                                lambda x, y: x == y, lambda x, y: x / y])
def test_two_weak_operands_of_one_type_give_jaxs_type(make, op):
    """Equal weak types need not be kept: weak bools combine to a strong bool, as in JAX."""
    outcomes = [_outcome(op, make(jnp), make(jnp)) for _ in range(3)]
    assert outcomes[0] == outcomes[1] == outcomes[2]
    try:
        want = op(make(jjnp), make(jjnp))
    except TypeError:
        assert isinstance(outcomes[0][0], type)
        return
    assert (outcomes[0][2], outcomes[0][3]) == (want.dtype, want.weak_type)


def test_results_are_fresh_read_only_arrays():
    x = jnp.asarray(np.arange(4, dtype=np.float32))
    for _ in range(3):
        for r in (x + x, jnp.sin(x), jnp.sum(x), -x):
            buffer = np.asarray(r)
            assert not buffer.flags.writeable and buffer.flags.c_contiguous
            assert not np.shares_memory(buffer, np.asarray(x))
            with pytest.raises(ValueError, match="read-only"):
                buffer[...] = 0


def test_fortran_ordered_operands_give_c_ordered_results_after_c_ordered_ones():
    """NumPy lays a ufunc's result out as its operands are: an Array of a Fortran-ordered NumPy
    array, after the signature was learned from C-ordered ones, still gives a C-ordered buffer."""
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    c, f = jnp.asarray(host), jnp.asarray(np.asfortranarray(host))
    for _ in range(2):
        c + c, jnp.sin(c), -c
    for got, want in ((f + f, host + host), (jnp.sin(f), np.sin(host)), (-f, -host)):
        buffer = np.asarray(got)
        assert buffer.flags.c_contiguous and buffer.tobytes() == want.tobytes()


def test_bad_operands_raise_the_general_paths_errors_every_call():
    x, i = jnp.ones(3, jnp.float32), jnp.ones(3, jnp.int32)
    for _ in range(3):
        with pytest.raises(TypeError, match="add requires operands of one dtype, got float32, int32") as error:
            lax.add(x, i)
        assert error.value.__context__ is None
        with pytest.raises(TypeError, match=r"add got incompatible shapes for broadcasting: \(3,\), \(4,\)\."):
            jnp.add(x, jnp.ones(4, jnp.float32))
        with pytest.raises(ValueError, match="zero-size array to reduction operation max which has no identity"):
            jnp.max(jnp.ones(0, jnp.float32))
        with pytest.raises(TypeError, match="add requires ndarray or scalar arguments"):
            jnp.add(x, [1.0, 2.0, 3.0])
        with pytest.raises(ValueError, match="axis -2 is out of bounds for an array of dimension 1"):
            jnp.min(x, axis=-2)
        with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: shapes=\[\(2, 3\), \(2,\)\]"):
            jnp.ones((2, 3), jnp.float32) * jnp.ones(2, jnp.float32)
    y = jnp.ones(3, jnp.float32) * 2
    x + y
    y.delete()
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        x + y


def test_a_config_change_reaches_signatures_seen_before():
    x = jnp.asarray(np.array([0.0, 1.0], np.float32))
    for _ in range(2):
        x / x
    with ember.config.override(debug_nans=True):
        with pytest.raises(FloatingPointError, match="invalid value"):
            x / x
    assert np.isnan(np.asarray(x / x)[0])
    with ember.config.override(numpy_dtype_promotion="strict"):
        with pytest.raises(Exception, match="strict"):
            x + jnp.ones(2, jnp.int32)
    assert (x + x).dtype == np.float32
    m = jnp.ones((3, 2), jnp.float32)
    for _ in range(2):
        assert (m + x).shape == (3, 2)  # (different ranks: the broadcast is kept for the shapes)
    with ember.config.override(numpy_rank_promotion="raise"):
        with pytest.raises(ValueError, match="jax_numpy_rank_promotion='raise'"):
            m + x
        assert (m + x[None]).shape == (3, 2)
    with ember.config.override(numpy_rank_promotion="warn"), pytest.warns(UserWarning, match="rank promotion"):
        m + x


def test_calls_under_jit_on_concrete_arrays_are_staged():
    x = jnp.asarray(np.arange(3, dtype=np.float32))
    x + x, jnp.sin(x), jnp.sum(x)  # (their eager signatures known)
    closed = ember.make_jaxpr(lambda: (x + x, jnp.sin(x), jnp.sum(x)))()
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["add", "sin", "reduce_sum"]


def test_a_repeated_small_signature_runs_no_native_code_and_compiles_nothing():
    x = jnp.asarray(np.arange(10, dtype=np.float32))
    before = eager.cache_info()
    for _ in range(5):
        x + x, jnp.sin(x), jnp.sum(x)
    after = eager.cache_info()
    assert (after.native_calls, after.compiles) == (before.native_calls, before.compiles)


@pytest.mark.parametrize("dtype", ["float32", "complex64", "bfloat16", "float16", "int32", "bool"])
@pytest.mark.parametrize("m, k, n", [(4, 4, 4), (1, 7, 3), (33, 65, 17), (0, 3, 2), (3, 0, 2), (64, 64, 96)])
def test_small_matrix_products_equal_the_reference_bit_for_bit(dtype, m, k, n):
    rng = np.random.default_rng(3)
    a, b = _values(rng, (m, k), dtype), _values(rng, (k, n), dtype)
    if dtype.startswith("float") or dtype in ("bfloat16", "complex64"):
        a, b = np.nan_to_num(a), np.nan_to_num(b)
    _check(lambda x, y: x @ y, lambda x, y: x @ y, (jnp.asarray(a), jnp.asarray(b)),
           (jax.device_put(a), jax.device_put(b)))
    _check(jnp.dot, jjnp.dot, (jnp.asarray(a), jnp.asarray(b)), (jax.device_put(a), jax.device_put(b)))


@pytest.mark.parametrize("scalar", [0.0, -0.0, 0, 1.5, -2, float("nan"), float("inf"), True, 2**40, 1e300, 0j, -0j])
def test_python_scalars_with_an_array_equal_the_general_path(scalar):
    """Scalars promotion converts alone are reused by type and value; 0.0 and -0.0 (equal, and
    hashed alike) stay apart; values that do not fit raise the general path's error every call."""
    x, jx = jnp.asarray(np.array([-1.0, 0.0, 2.5], np.float32)), jax.device_put(np.array([-1.0, 0.0, 2.5], np.float32))
    i, ji = jnp.asarray(np.array([3, -4, 5], np.int32)), jax.device_put(np.array([3, -4, 5], np.int32))
    for fn, jfn in ((lambda a, s: a * s, None), (lambda a, s: s - a, None), (lambda a, s: a / s, None),
                    (jnp.maximum, jjnp.maximum)):
        for a, ja in ((x, jx), (i, ji)):
            outcomes = [_outcome(fn, a, scalar) for _ in range(3)]
            assert outcomes[0] == outcomes[1] == outcomes[2]
            if isinstance(outcomes[0][0], type):
                continue
            expected = _reference(lambda v: fn(v, scalar), a)
            assert outcomes[0][0] == expected.tobytes()
            want = (jfn or fn)(ja, scalar)
            assert (outcomes[0][2], outcomes[0][3]) == (want.dtype, want.weak_type)


@given(st.sampled_from(["float32", "bfloat16", "float8_e4m3fn", "int32", "bool", "complex64"]),
       st.sampled_from(SHAPES), st.sampled_from([None, 0, -1, 1, (0,), "all"]), st.booleans())
def test_means_and_sums_over_axes_equal_the_reference_and_jaxs_types(dtype, shape, axis, keepdims):
    if axis == "all":
        axis = tuple(range(len(shape)))
    if axis is not None and not shape:
        axis = None
    host = _values(np.random.default_rng(4), shape, dtype)
    for fn, jfn in ((jnp.mean, jjnp.mean), (jnp.sum, jjnp.sum), (jnp.max, jjnp.max), (jnp.min, jjnp.min),
                    (jnp.any, jjnp.any), (jnp.all, jjnp.all)):
        _check(lambda a: fn(a, axis=axis, keepdims=keepdims), lambda a: jfn(a, axis=axis, keepdims=keepdims),
               (jnp.asarray(host),), (jax.device_put(host),))


def test_a_means_count_follows_x64():
    x = jnp.asarray(np.arange(4, dtype=np.float32))
    jnp.mean(x), jnp.mean(x)
    with ember.config.override(enable_x64=True):
        y = jnp.asarray(np.arange(4, dtype=np.float64))
        assert jnp.mean(y).dtype == np.float64 and jnp.mean(y) == 1.5
    assert jnp.mean(x).dtype == np.float32


@given(st.sampled_from(["float32", "int32", "bfloat16", "bool", "complex64"]),
       st.sampled_from([(), (5,), (2, 3)]), st.sampled_from(["array", "0-d", "scalar", "other"]),
       st.sampled_from([0.0, -0.0, 2, 1.5, True]), st.booleans())
def test_where_equals_the_reference_and_jaxs_types(dtype, shape, form, scalar, condition_0d):
    rng = np.random.default_rng(5)
    condition = rng.standard_normal(() if condition_0d else shape) > 0
    x = _values(rng, shape, dtype)
    y = {"array": _values(rng, shape, dtype), "0-d": _values(rng, (), dtype), "scalar": scalar,
         "other": _values(rng, shape, "float32")}[form]
    on = (lambda v: v) if form == "scalar" else jnp.asarray
    jon = (lambda v: v) if form == "scalar" else jax.device_put
    _check(lambda c, a: jnp.where(c, a, on(y)), lambda c, a: jjnp.where(c, a, jon(y)),
           (jnp.asarray(condition), jnp.asarray(x)), (jax.device_put(condition), jax.device_put(x)))
    _check(lambda c, a: jnp.where(c, on(y), a), lambda c, a: jjnp.where(c, jon(y), a),
           (jnp.asarray(condition), jnp.asarray(x)), (jax.device_put(condition), jax.device_put(x)))


@pytest.mark.parametrize("n", [3, 5000])  # (a broadcast scalar kept for the shape; one too large to keep)
def test_where_with_zero_scalars_keeps_each_zeros_sign(n):
    c = jnp.asarray(np.arange(n) == 0)
    x = jnp.asarray(np.ones(n, np.float32))
    for zero in (0.0, -0.0, 0.0, -0.0):
        got = np.asarray(jnp.where(c, x, zero))
        assert got[0] == 1 and np.all(np.signbit(got[1:]) == np.signbit(zero)) and got.dtype == np.float32


_FLOAT32_EDGES = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-45, 3e-4, 4e-4, 7.99881172, 8.0, -9.0,
                  3.4e38]


@pytest.fixture(scope="module")
def tanh_loop():
    """The native loop that small float32 tanh runs once it is compiled (``eager.LOOPS``)."""
    x = jnp.asarray(np.zeros(3, np.float32))
    jnp.tanh(x)  # (starts its compile)
    job = ember.core.background.background.job("eager: compile the float32 tanh loop")
    assert job is not None and job.wait(120) and job.error is None
    return job.result


@given(st.lists(st.integers(0, 5), max_size=3),
       st.lists(st.one_of(st.floats(width=32), st.sampled_from(_FLOAT32_EDGES)), min_size=1, max_size=64),
       st.booleans())
def test_small_float32_tanh_runs_its_native_loop_with_the_references_bits(tanh_loop, shape, values, transposed):
    shape = tuple(shape)
    size = int(np.prod(shape))
    host = np.resize(np.array(values, np.float32), size).reshape(shape)
    x = jnp.asarray(host.T if transposed else host)
    runner = eager._loop_runner(lax.tanh_p, [x.aval])
    assert runner is not None and runner is not eager._COMPILING
    with ember.config.override(backend="reference"):  # (the reference interpreter's rule, as before the loop)
        want = np.asarray(jnp.tanh(x))
    for got in (jnp.tanh(x), jnp.tanh(x), runner([x._value], {})):  # (the signature's runner, then kept)
        assert got.dtype == want.dtype and got.shape == want.shape and got.aval == x.aval
        assert np.asarray(got).shape == want.shape  # (the value's own shape: a 0-d one stays 0-d)
        assert np.asarray(got).tobytes() == want.tobytes()
        assert not np.asarray(got).flags.writeable
    assert np.asarray(ember.jit(jnp.tanh)(x)).tobytes() == want.tobytes()
    np.testing.assert_allclose(want, np.tanh(host.T if transposed else host), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float8_e4m3fn"])
def test_max_and_min_of_every_pair_of_special_values_equal_jaxs_bits(dtype):
    """Signed zeros as XLA orders them (max(-0, +0) is +0, min is -0, whatever the order), NaN
    propagated (a NaN's sign bit is not compared: XLA's min(-0, NaN) is a NaN with the sign set);
    also with a 0-d operand (``jnp.maximum(x, 0.0)``)."""
    values = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan], jnp.dtype(dtype))
    a, b = (v.ravel() for v in np.meshgrid(values, values))
    for fn, jfn in ((jnp.maximum, jjnp.maximum), (jnp.minimum, jjnp.minimum)):
        for x, y in ((a, b), (a, np.array(0.0, a.dtype)), (a, np.array(-0.0, a.dtype)), (np.array(-0.0, a.dtype), b)):
            want = np.asarray(jfn(jax.device_put(x), jax.device_put(y)))
            for _ in range(2):  # (the signature's runner, then its plain call)
                got = np.asarray(fn(jnp.asarray(x), jnp.asarray(y)))
                nan = np.isnan(want.astype(np.float32))
                assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
                assert got[~nan].tobytes() == want[~nan].tobytes(), (fn.__name__, x, y, got, want)


@pytest.mark.parametrize("first", [0.0, 2.0])
def test_a_0d_result_is_an_array_whichever_form_the_numpy_call_gave_first(first):
    """``_max`` gives a NumPy scalar for two 0-d operands, or a 0-d array from its zero fix: a
    signature's runner wraps either, in either order."""
    for value in (first, 2.0 - first, first, -0.0):
        x = jnp.asarray(np.float32(value))
        for fn in (jnp.maximum, jnp.minimum):
            got = fn(x, jnp.asarray(np.float32(0.0)))
            assert type(np.asarray(got)) is np.ndarray and got.shape == () and got.dtype == np.float32
            assert float(got) == (max if fn is jnp.maximum else min)(value, 0.0)


# The jnp function of each primitive the eager engine computes on operands NumPy broadcasts.
BROADCASTING = {
    "add": (jnp.add, jjnp.add), "subtract": (jnp.subtract, jjnp.subtract), "multiply": (jnp.multiply, jjnp.multiply),
    "divide": (jnp.divide, jjnp.divide), "maximum": (jnp.maximum, jjnp.maximum), "minimum": (jnp.minimum, jjnp.minimum),
    "arctan2": (jnp.arctan2, jjnp.arctan2), "nextafter": (jnp.nextafter, jjnp.nextafter),
    "bitwise_and": (jnp.bitwise_and, jjnp.bitwise_and), "bitwise_or": (jnp.bitwise_or, jjnp.bitwise_or),
    "bitwise_xor": (jnp.bitwise_xor, jjnp.bitwise_xor), "equal": (jnp.equal, jjnp.equal),
    "not_equal": (jnp.not_equal, jjnp.not_equal), "less": (jnp.less, jjnp.less),
    "less_equal": (jnp.less_equal, jjnp.less_equal), "greater": (jnp.greater, jjnp.greater),
    "greater_equal": (jnp.greater_equal, jjnp.greater_equal),
}
BROADCAST_SHAPES = [((8, 10), (10,)), ((10,), (8, 10)), ((4, 1), (1, 5)), ((3, 1, 2), (4, 2)), ((0, 3), (3,)),
                    ((2, 3), (1, 3)), ((1,), (4,)), ((2, 1, 3), (2, 4, 1))]


def test_every_primitive_the_eager_engine_broadcasts_has_a_jnp_function_here():
    assert {p.name for p in eager.BROADCASTING} == {
        "add", "sub", "mul", "div", "max", "min", "atan2", "nextafter", "and", "or", "xor", "eq", "ne", "lt", "le",
        "gt", "ge", "select_n"}
    taken = set()
    x, y = jnp.ones((2, 3), jnp.float32), jnp.ones(3, jnp.float32)
    i, j = jnp.ones((2, 3), jnp.int32), jnp.ones(3, jnp.int32)
    for name, (fn, _) in BROADCASTING.items():
        a, b = (i, j) if name.startswith("bitwise") else (x, y)
        (p,) = {e.primitive for e in ember.make_jaxpr(fn)(a, b).jaxpr.eqns} - {lax.broadcast_in_dim_p}
        fn(a, b)
        assert eager._broadcasting[(p, a.aval, b.aval)] is not None, name  # (the eager call took the one-call path)
        taken.add(p)
    c = jnp.asarray(np.array([[True, False, True]] * 2))
    jnp.where(c, x, 0.0)
    assert any(k[:2] == (lax.select_n_p, c.aval) and run is not None for k, run in eager._broadcasting.items())
    assert taken | {lax.select_n_p} == eager.BROADCASTING


@given(st.sampled_from(sorted(BROADCASTING)), st.sampled_from(DTYPES), st.sampled_from(BROADCAST_SHAPES))
def test_broadcasting_calls_equal_the_reference_bit_for_bit(name, dtype, shapes):
    """Arrays of one type and different shapes: one eager call of the primitive on the operands as
    they are (no broadcast of its own), with the bits of the call on the broadcast operands (the
    reference interpreter's run of the traced program) and JAX's types; errors as before."""
    fn, jfn = BROADCASTING[name]
    rng = np.random.default_rng(4)
    a, b = (_values(rng, s, dtype) for s in shapes)
    args = (jnp.asarray(a), jnp.asarray(b))
    refused = None
    try:
        _reference(fn, *args)
    except Exception as e:  # noqa: BLE001  (the types the traced program refuses)
        refused = e
    if refused is not None:  # (then the eager call raises the same error, nothing chained to it)
        assert _outcome(fn, *args) == (type(refused), str(refused))
        with pytest.raises(type(refused)) as raised:
            fn(*args)
        assert raised.value.__context__ is None
        return
    _check(fn, jfn, args, (jax.device_put(a), jax.device_put(b)))


def test_a_broadcasting_call_is_one_eager_operation(monkeypatch):
    x, v = jnp.ones((8, 10), jnp.float32), jnp.arange(10, dtype=jnp.float32)
    calls, out = _applied(monkeypatch, lambda: x - v)
    assert calls == [] and out.shape == (8, 10)  # (no broadcast bound: the one call is the rule's)
    np.testing.assert_array_equal(np.asarray(out), np.ones((8, 10), np.float32) - np.arange(10, dtype=np.float32))
    assert eager._broadcasting[(lax.sub_p, x.aval, v.aval)] is not None


def _applied(monkeypatch, call, *args):
    """The primitives ``call(*args)`` hands to ``EvalTrace.apply``, and its result."""
    calls = []
    apply = EvalTrace.apply
    monkeypatch.setattr(EvalTrace, "apply",
                        staticmethod(lambda p, args, params: calls.append(p) or apply(p, args, params)))
    try:
        return calls, call(*args)
    finally:
        monkeypatch.undo()


def test_a_call_seen_before_goes_straight_to_its_runner(monkeypatch):
    x, y = jnp.arange(6, dtype=jnp.float32).reshape(2, 3), jnp.full((2, 3), 2.0, jnp.float32)
    cases = [(lambda a: a * y, x), (jnp.sin, x), (jnp.negative, x), (jnp.sqrt, x),  # (two operands, one)
             (lambda a: a * 2.0, x), (lambda a: 2 - a, x), (lambda a: a > 0, x), (lambda a: -0.0 + a, x),  # (a scalar)
             (jnp.sum, x), (lambda a: jnp.max(a, axis=-1), x), (lambda a: jnp.any(a, 0), x > 1)]  # (and axes)
    for call, a in cases:
        first = call(a)  # (the signature's first call: the general path makes its runner)
        calls, again = _applied(monkeypatch, call, a)
        assert calls == [] and np.asarray(again).tobytes() == np.asarray(first).tobytes()
        assert not again._value.flags.writeable
    # Traces stage the operation; a debug check reaches the signature seen before.
    assert [e.primitive.name for e in ember.make_jaxpr(lambda: x * y)().jaxpr.eqns] == ["mul"]
    zero = jnp.zeros((2, 3), jnp.float32)
    for _ in range(2):
        x / zero
    with ember.config.override(debug_infs=True):
        with pytest.raises(FloatingPointError, match="div"):
            x / zero


def test_broadcasting_calls_under_traces_large_ones_and_the_debug_checks_take_the_general_path():
    x, v = jnp.ones((3, 4), jnp.float32), jnp.zeros(4, jnp.float32)
    closed = ember.make_jaxpr(lambda: x / v)()  # (staged, as JAX stages it: the broadcast and the division)
    assert [e.primitive.name for e in closed.jaxpr.eqns] == ["broadcast_in_dim", "div"]
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda a, b: a / b)(x, v)), np.full((3, 4), np.inf))
    with ember.config.override(debug_infs=True):
        with pytest.raises(FloatingPointError, match="div"):
            x / v
    big, row = jnp.ones((eager.KERNEL_MIN_ELEMENTS // 4, 4), jnp.float32), jnp.arange(4, dtype=jnp.float32)
    assert eager.apply_broadcasting(lax.add_p, (big, row), big.shape) is None
    np.testing.assert_array_equal(np.asarray(big + row)[-1], [1, 2, 3, 4])


@given(st.sampled_from(["float32", "float16", "bfloat16", "int32", "uint8", "bool", "complex64", "int8"]),
       st.sampled_from([(5,), (2, 3), (0,), (3, 0), (4, 1, 3)]), st.integers(-1, 2), st.booleans(),
       st.booleans())
def test_sorts_equal_the_reference_bit_for_bit(dtype, shape, axis, descending, fortran):
    # (signed zeros and NaNs among repeated values: a stable sort keeps each zero's place)
    host = _values(np.random.default_rng(6), shape, dtype)
    if dtype.startswith(("float", "bfloat")) and host.size > 2:
        host.flat[1], host.flat[-1] = -0.0, 0.0
    if fortran:
        host = np.asfortranarray(host)
    axis = min(axis, len(shape) - 1)
    _check(lambda a: jnp.sort(a, axis=axis, descending=descending),
           lambda a: jjnp.sort(a, axis=axis, descending=descending), (jnp.asarray(host),), (jax.device_put(host),))
    got = jnp.sort(jnp.asarray(host), axis=axis)
    assert got._value.flags.c_contiguous and not got._value.flags.writeable
