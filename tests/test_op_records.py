"""Every elementwise op record against NumPy, eagerly and under jit, over hypothesis-drawn
shapes, dtypes and values (complex ones too, for the functions that accept them); the complex
records with parameters (shapes, selections, reductions, sorts); every alias against the
function it names; plus coverage of the primitive rule tables."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp
from op_records import (
    ALIASES,
    BINARY_RECORDS,
    COMPLEX_PARAM_RECORDS,
    UNARY_RECORDS,
    arrays,
    complex_arrays,
    expected_dtype,
)
from util import tolerance

import ember
import ember.numpy as jnp
from ember import dtypes
from ember.backends import registry
from ember.backends.reference import impl_rules
from ember.core.primitive import abstract_eval_rules

SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5)


def _values(draw, dtype, shape, record, first=True):
    if np.dtype(dtype).kind == "c":
        return draw(complex_arrays(dtype, shape, record.complex_domain, record.specials))
    return draw(arrays(dtype, shape, record.domain, record.bit_patterns and first))


def _reference(record, args, out_dtype):
    if record.exact:
        with np.errstate(all="ignore"):
            return np.asarray(record.reference(*args))
    if any(a.dtype.kind == "c" for a in args):  # complex inputs: the reference computes in complex128
        with np.errstate(all="ignore"):
            return np.asarray(record.reference(*(a.astype(np.complex128) for a in args)))
    widen = record.result == "inexact" or out_dtype.kind == "f" or out_dtype == dtypes.bfloat16
    wide = [a.astype(np.float64) if widen or a.dtype == dtypes.bfloat16 else a for a in args]
    with np.errstate(all="ignore"):
        expected = np.asarray(record.reference(*wide))
    if expected.dtype.kind == "f" and out_dtype.kind in "biu":
        return expected.astype(out_dtype)
    return expected


def _compare(record, got, args, dtype):
    want_dtype = expected_dtype(record, dtype)
    assert got.dtype == want_dtype, f"{record.name}: dtype {got.dtype} != {want_dtype}"
    expected = _reference(record, args, want_dtype)
    assert got.shape == expected.shape
    if want_dtype.kind == "c":
        assert_complex_close(np.asarray(got), expected, record.tolerance or 2e-5, record.name)
        return
    got64 = np.asarray(got).astype(np.float64) if want_dtype.kind not in "biu" else np.asarray(got)
    if record.exact:
        np.testing.assert_array_equal(got64, expected.astype(np.float64), err_msg=record.name)
        return
    if want_dtype.kind in "biu":
        np.testing.assert_array_equal(got64, expected.astype(want_dtype), err_msg=record.name)
        return
    tol = tolerance(want_dtype)
    if record.tolerance and want_dtype == np.float32:
        tol = dict(rtol=record.tolerance, atol=record.tolerance)
    if want_dtype == np.float32:  # one rounding of the input and a few ulp in the function
        tol = dict(rtol=max(tol["rtol"], 4e-6), atol=max(tol["atol"], 1e-6))
    # Compare against the float64 reference rounded to the result type (as a correctly
    # rounded implementation would return).
    with np.errstate(over="ignore"):
        rounded = expected.astype(want_dtype).astype(np.float64)
    np.testing.assert_allclose(got64, rounded, equal_nan=True, err_msg=record.name, **tol)


def assert_complex_close(got, expected, rtol, name="", atol=2e-6):
    """``got`` (complex64) against the complex128 ``expected`` rounded to complex64: within
    ``rtol * |expected| + atol`` where that is finite (``atol``: float32's slack for results that
    cancel to about zero, as in the real comparisons), else part by part: an infinite or NaN part
    equal (NaN equal to NaN), a finite one within the same bound."""
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.asarray(expected).astype(got.dtype)
    finite = np.isfinite(want)
    with np.errstate(invalid="ignore"):
        error = np.abs(got[finite].astype(np.complex128) - want[finite])
    bad = ~(error <= rtol * np.abs(want[finite].astype(np.complex128)) + atol)
    assert not bad.any(), f"{name}: got {got[finite][bad]}, expected {want[finite][bad]}"
    for part in (np.real, np.imag):
        g, w = part(got[~finite]).astype(np.float64), part(want[~finite]).astype(np.float64)
        special = ~np.isfinite(w)
        np.testing.assert_array_equal(g[special], w[special], err_msg=name)
        np.testing.assert_allclose(g[~special], w[~special], rtol=rtol, atol=atol, err_msg=name)


def _check_jitted(record, jitted, eager, args, dtype):
    """The reference backend runs the same NumPy code as eager mode: equal bits. A native
    backend inlines its own math, which may differ in the last ulps: it must then meet the
    same tolerance against NumPy that eager mode meets."""
    assert jitted.dtype == eager.dtype and jitted.shape == eager.shape
    if registry.get().name == "reference":
        np.testing.assert_array_equal(np.asarray(jitted), np.asarray(eager))
    else:
        _compare(record, jitted, args, dtype)


def _jitted_on_both_paths(fn, *args):
    """``jit(fn)(*args)``, after checking that calling it again on Arrays (a cache hit, run by
    the native dispatcher where the program allows) gives the same bits, dtype and shape."""
    f = ember.jit(fn)
    first = f(*args)
    arrays = [ember.numpy.asarray(a) for a in args]
    f(*arrays)
    again = f(*arrays)
    assert again.dtype == first.dtype and again.shape == first.shape
    np.testing.assert_array_equal(np.asarray(again), np.asarray(first))
    return first


def _ids(records):
    return [r.name for r in records]


@pytest.mark.parametrize("record", UNARY_RECORDS, ids=_ids(UNARY_RECORDS))
@given(data=st.data())
def test_unary_records(record, data):
    dtype = data.draw(st.sampled_from(record.dtypes))
    shape = data.draw(SHAPES)
    x = _values(data.draw, dtype, shape, record)
    eager = record.fn(ember.numpy.asarray(x))
    _compare(record, eager, [x], dtype)
    _check_jitted(record, _jitted_on_both_paths(record.fn, x), eager, [x], dtype)


@pytest.mark.parametrize("record", BINARY_RECORDS, ids=_ids(BINARY_RECORDS))
@given(data=st.data())
def test_binary_records_with_broadcasting(record, data):
    dtype = data.draw(st.sampled_from(record.dtypes))
    if record.broadcasts:
        shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4))
        shape_x, shape_y = shapes.input_shapes
    else:  # lax: one shape, but either operand may be a scalar
        shape = data.draw(SHAPES)
        shape_x, shape_y = (data.draw(st.sampled_from([shape, ()])) for _ in range(2))
    x = _values(data.draw, dtype, shape_x, record)
    y = _values(data.draw, dtype, shape_y, record, first=False)  # a shift amount: in range, or just outside
    if record.nonzero_divisor:
        y = np.where(y == 0, np.ones((), y.dtype), y)
    eager = record.fn(ember.numpy.asarray(x), ember.numpy.asarray(y))
    _compare(record, eager, [x, y], dtype)
    _check_jitted(record, _jitted_on_both_paths(record.fn, x, y), eager, [x, y], dtype)


@pytest.mark.parametrize("record", [r for r in BINARY_RECORDS if r.dtypes != [np.bool_]],
                         ids=_ids([r for r in BINARY_RECORDS if r.dtypes != [np.bool_]]))
def test_binary_records_with_python_scalars(record):
    """A Python scalar operand is weakly typed: the array's dtype wins."""
    dtype = record.dtypes[-1]
    x = np.arange(1, 5).astype(dtype)
    scalar = True if np.dtype(dtype) == np.bool_ else 2
    out = record.fn(ember.numpy.asarray(x), scalar)
    assert out.dtype == expected_dtype(record, dtype)


def _complex_param_compare(record, got, expected):
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    assert len(got) == len(expected), record.name
    for g, e in zip(got, expected):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, f"{record.name}: {g.dtype}{g.shape} != {e.dtype}{e.shape}"
        if record.compare == "close":
            assert_complex_close(g, e, 2e-5, record.name)
        else:  # exact, NaNs equal
            np.testing.assert_array_equal(g, e, err_msg=record.name)


@pytest.mark.parametrize("record", COMPLEX_PARAM_RECORDS, ids=[r.name for r in COMPLEX_PARAM_RECORDS])
@given(data=st.data())
def test_complex_param_records(record, data):
    """Complex operands of the shape, selection, reduction and sorting records, against NumPy,
    eagerly and under jit (operands traced, parameters static)."""
    shape = data.draw(hnp.array_shapes(min_dims=record.min_dims, max_dims=record.max_dims,
                                       min_side=record.min_side, max_side=4))
    x = data.draw(complex_arrays(np.complex64, shape, record.domain, record.specials))
    operands, params = record.draw_args(data.draw, x)
    with np.errstate(all="ignore"):
        expected = record.reference(x, *operands, **params)

    def run(*args):
        return record.fn(*args, **params)

    _complex_param_compare(record, run(jnp.asarray(x), *map(jnp.asarray, operands)), expected)
    _complex_param_compare(record, ember.jit(run)(x, *operands), expected)


def test_every_primitive_has_a_reference_rule():
    missing = sorted(p.name for p in abstract_eval_rules if p not in impl_rules)
    assert not missing, f"primitives without a reference implementation: {missing}"


def test_elementwise_result_types_remembered_by_operand_types_keep_weak_types_and_errors():
    """The elementwise rules keep the result type of each operand types they saw: asked again,
    the same answer, weak types apart from strong ones, and the same error for bad types."""
    from ember.core.avals import ShapedArray
    from ember.lax import elementwise as ew
    strong, weak = ShapedArray((3,), np.float32), ShapedArray((3,), np.float32, True)
    ints = ShapedArray((3,), np.int32)
    for _ in range(2):
        assert abstract_eval_rules[ew.add_p](strong, strong) == strong
        assert abstract_eval_rules[ew.add_p](weak, weak) == weak
        assert abstract_eval_rules[ew.add_p](strong, weak) == strong
        assert abstract_eval_rules[ew.lt_p](weak, weak) == ShapedArray((3,), np.bool_, True)
        with pytest.raises(TypeError, match="add requires operands of one dtype, got float32, int32"):
            abstract_eval_rules[ew.add_p](strong, ints)
        with pytest.raises(TypeError, match="sin does not accept dtype int32"):
            abstract_eval_rules[ew.sin_p](ints)


def test_product_result_types_remembered_by_operand_types_and_params_keep_errors():
    from ember.core.avals import ShapedArray
    from ember.lax.dot import dot_general_p
    rule = abstract_eval_rules[dot_general_p]
    a, b = ShapedArray((2, 3), np.float32), ShapedArray((3, 4), np.float32)
    plain = {"precision": None, "preferred_element_type": None}
    for _ in range(2):
        assert rule(a, b, dimension_numbers=(((1,), (0,)), ((), ())), **plain) == ShapedArray((2, 4), np.float32)
        assert rule(a, a, dimension_numbers=(((0,), (0,)), ((), ())), **plain) == ShapedArray((3, 3), np.float32)
        assert rule(a, b, dimension_numbers=(((1,), (0,)), ((), ())), precision=None,
                    preferred_element_type=np.dtype(np.float64)) == ShapedArray((2, 4), np.float64)
        with pytest.raises(TypeError, match="contracting dimensions of equal sizes"):
            rule(a, b, dimension_numbers=(((0,), (0,)), ((), ())), **plain)


@pytest.mark.parametrize("name,alias,canonical,args", ALIASES, ids=[a[0] for a in ALIASES])
def test_alias_gives_what_the_function_it_names_gives(name, alias, canonical, args):
    """Exactly, eagerly and under jit (each against the named function in the same mode: a
    native backend's math may differ from NumPy's in the last ulp, see _check_jitted)."""
    eager = alias(*map(jnp.asarray, args)), canonical(*map(jnp.asarray, args))
    jitted = ember.jit(alias)(*args), ember.jit(canonical)(*args)
    for got, expected in (eager, jitted):
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        np.testing.assert_array_equal(np.asarray(got), np.asarray(expected), err_msg=name)


def test_max_min_order_signed_zeros_as_xla():
    """+0 is the maximum and -0 the minimum of {-0, +0}, whatever the argument order."""
    for a, b in [(-0.0, 0.0), (0.0, -0.0)]:
        assert not np.signbit(np.asarray(ember.numpy.maximum(a, b)))
        assert np.signbit(np.asarray(ember.numpy.minimum(a, b)))
    assert np.isnan(np.asarray(ember.numpy.maximum(np.nan, 1.0)))
    assert np.isnan(np.asarray(ember.numpy.minimum(1.0, np.nan)))
