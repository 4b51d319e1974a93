"""lax.cond / switch / while_loop / fori_loop / scan / map: values against Python loops, eagerly and
under jit; pytrees, closures, nesting; the IR they leave; errors that name the user's function."""
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as jnp
from ember import errors, lax
from ember.backends.reference import impl_rules
from ember.lax.control_flow import cond_p
from ember.lax.elementwise import sin_p
from tests.util import assert_allclose, check_eager_and_jit


def ir(fun, *args):
    return str(ember.make_jaxpr(fun)(*args))


def at(xs, i):
    """``xs[i]`` with a traced index (lax only: jnp indexing lives elsewhere)."""
    return lax.dynamic_index_in_dim(xs, i, keepdims=False)


X = np.arange(1.0, 4.0, dtype=np.float32)


# --- cond ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pred", [True, False, 0, 3, -1, np.bool_(True), np.int32(0)])
def test_cond_picks_the_branch_eager_and_jit(pred):
    def f(p, x):
        return lax.cond(p, lambda a: a * 2.0, lambda a: a - 1.0, x)

    check_eager_and_jit(f, pred, X, expected=X * 2 if pred else X - 1)


def test_cond_pytree_operands_and_outputs():
    def f(p, tree, scale):
        def yes(t, s):
            return {"sum": t["a"] + t["b"], "pair": (t["a"] * s, s)}

        def no(t, s):
            return {"sum": t["a"] - t["b"], "pair": (t["b"], s + 1.0)}

        return lax.cond(p, yes, no, tree, scale)

    tree = {"a": X, "b": 2 * X}
    for p in (True, False):
        out = check_eager_and_jit(f, p, tree, np.float32(3))
        if p:
            expected = {"sum": 3 * X, "pair": (3 * X, np.float32(3))}
        else:
            expected = {"sum": -X, "pair": (2 * X, np.float32(4))}
        assert ember.tree_util.tree_structure(out) == ember.tree_util.tree_structure(expected)
        for got, want in zip(ember.tree_util.tree_leaves(out), ember.tree_util.tree_leaves(expected)):
            assert_allclose(got, want)


def test_cond_legacy_operand_keyword():
    assert_allclose(lax.cond(True, lambda a: a + 1.0, lambda a: a, operand=X), X + 1)
    with pytest.raises(TypeError, match="either positionally or as the keyword `operand`"):
        lax.cond(True, lambda a: a, lambda a: a, X, operand=X)


def test_cond_without_operands_and_traced_predicate():
    f = ember.jit(lambda x: lax.cond(at(x, 0) > 0, lambda: x * 10.0, lambda: -x))
    assert_allclose(f(X), X * 10)
    assert_allclose(f(-X), X)


def test_cond_closes_over_values_of_the_enclosing_jit():
    def f(x, y):
        shifted = y + 1.0  # computed by the outer trace, used inside both branches
        return lax.cond(at(x, 0) > 0, lambda: x * shifted, lambda: shifted - x)

    check_eager_and_jit(f, X, np.float32(2), expected=X * 3)
    check_eager_and_jit(f, -X, np.float32(2), expected=3 + X)
    text = ir(f, X, np.float32(2))
    assert text.count("cond[") == 1 and "branches=(" in text


def test_cond_eagerly_runs_only_the_chosen_branch():
    calls = []
    sin_impl = impl_rules[sin_p]
    with impl_rules.overriding(sin_p, lambda *a, **k: calls.append(1) or sin_impl(*a, **k)), \
            ember.config.override(backend="reference"):  # (on the CPU backend the second call runs compiled code)
        out = lax.cond(True, lambda a: a * 2.0, lambda a: jnp.sin(a), X)
        assert_allclose(out, X * 2)
        assert calls == []  # traced for type checking, never evaluated
        lax.cond(False, lambda a: a * 2.0, lambda a: jnp.sin(a), X)
        assert calls == [1]
    assert impl_rules[sin_p] is sin_impl


def test_cond_ir_binds_one_equation_with_both_branches():
    text = ir(lambda p, x: lax.cond(p, lambda a: a * 2.0, lambda a: a - 1.0, x), True, X)
    assert "convert_element_type[new_dtype=int32" in text
    assert re.search(r"cond\[\s*branches=\(\s*\{ lambda .*sub.*\}\s*\{ lambda .*mul", text, re.S)


def test_cond_weak_type_differences_take_the_strong_type():
    strong = lax.cond(True, lambda: 1.0, lambda: jnp.asarray(2.0, jnp.float32))
    assert strong.dtype == np.float32 and not strong.weak_type
    weak = lax.cond(False, lambda: 1.0, lambda: 2.0)
    assert weak.dtype == np.float32 and weak.weak_type and float(weak) == 2.0
    jitted = ember.jit(lambda p: lax.cond(p, lambda: 1.0, lambda: jnp.asarray(2.0, jnp.float32)))(False)
    assert not jitted.weak_type and float(jitted) == 2.0


def true_branch(a):
    return a


def int_branch(a):
    return a.astype(jnp.int32)


def test_cond_branch_dtype_mismatch_names_both_branches():
    with pytest.raises(TypeError) as e:
        lax.cond(True, true_branch, int_branch, X)
    msg = str(e.value)
    assert "true_fun `true_branch`" in msg and "false_fun `int_branch`" in msg
    assert "output f32[3] and false_fun `int_branch`" in msg and "output i32[3]" in msg
    assert "dtypes differ" in msg and "Fix:" in msg


def test_cond_branch_shape_and_structure_mismatches():
    with pytest.raises(TypeError, match=r"shapes differ at \['a'\]: f32\[3\] vs f32\[2,3\]"):
        lax.cond(True, lambda a: {"a": a}, lambda a: {"a": jnp.ones((2, 3))}, X)
    with pytest.raises(TypeError, match=r"output \(f32\[3\], f32\[3\]\) and .* output f32\[3\].*pytree structures"):
        lax.cond(True, lambda a: (a, a), lambda a: a, X)


@pytest.mark.parametrize("pred, message", [
    (np.array([True, False]), r"pred must be a scalar, got an array of type bool\[2\]"),
    (None, "pred must be a scalar, got NoneType"),
    ([True], "pred must be a scalar, got list"),
])
def test_cond_rejects_bad_predicates(pred, message):
    with pytest.raises(TypeError, match=message):
        lax.cond(pred, lambda: 1.0, lambda: 2.0)


def test_cond_accepts_a_number_as_predicate():
    """Nonzero is true, as in JAX."""
    assert lax.cond(1.5, lambda: 1.0, lambda: 2.0) == 1.0
    assert lax.cond(0.0, lambda: 1.0, lambda: 2.0) == 2.0
    assert ember.jit(lambda p: lax.cond(p, lambda: 1.0, lambda: 2.0))(-0.5) == 1.0


def test_cond_rejects_traced_array_predicate_under_jit():
    with pytest.raises(TypeError, match=r"(?s)pred must be a scalar.*bool\[3\].*jnp.any"):
        ember.jit(lambda x: lax.cond(x > 0, lambda: x, lambda: x))(X)


def test_cond_needs_callables():
    with pytest.raises(TypeError, match="must be callable"):
        lax.cond(True, lambda: 1.0, 2.0)


def test_python_control_flow_inside_a_branch_names_the_branch():
    def branch(a):
        return a if at(a, 0) > 0 else -a

    with pytest.raises(errors.TracerBoolConversionError, match="argument `a` of `branch`, which lax.cond traces"):
        lax.cond(True, branch, branch, X)


def test_non_array_values_are_clear_errors():
    with pytest.raises(TypeError, match="an output of true_fun `<lambda>`.*str is not an array"):
        lax.cond(True, lambda: "yes", lambda: "no")
    with pytest.raises(TypeError, match="lax.while_loop: init_val: a value of type str is not an array"):
        lax.while_loop(lambda c: True, lambda c: c, (X, "label"))


# --- switch ------------------------------------------------------------------------------------------
BRANCHES = [lambda a: a + 1.0, lambda a: a * 2.0, lambda a: -a]


@pytest.mark.parametrize("index, expected", [(0, X + 1), (1, X * 2), (2, -X), (-5, X + 1), (7, -X)])
def test_switch_clamps_the_index(index, expected):
    check_eager_and_jit(lambda i, x: lax.switch(i, BRANCHES, x), index, X, expected=expected)
    check_eager_and_jit(lambda i, x: lax.switch(i, BRANCHES, x), np.int32(index), X, expected=expected)


@pytest.mark.parametrize("index", [2, 7, -1])
def test_cond_primitive_sends_out_of_range_indices_to_the_last_branch(index):
    branches = tuple(ember.make_jaxpr(b)(X) for b in BRANCHES)
    [out] = cond_p.bind(np.int32(index), X, branches=branches)
    assert_allclose(out, -X)


def test_switch_ir_and_single_branch():
    text = ir(lambda i, x: lax.switch(i, BRANCHES, x), 1, X)
    assert "clamp" in text and text.count("{ lambda") == 4  # the program and three branches
    assert "cond[" not in ir(lambda i, x: lax.switch(i, BRANCHES[:1], x), 1, X)


def test_switch_errors():
    with pytest.raises(ValueError, match="branches is empty"):
        lax.switch(0, [], X)
    with pytest.raises(TypeError, match=r"index must be an integer scalar, got f32\[\]"):
        lax.switch(1.0, BRANCHES, X)
    with pytest.raises(TypeError, match=r"index must be a scalar.*i32\[2\]"):
        lax.switch(np.array([0, 1], np.int32), BRANCHES, X)
    with pytest.raises(TypeError, match=r"branches\[0\] `<lambda>` .* output f32\[3\] and branches\[2\] "
                                        r"`int_branch` .* output i32\[3\]"):
        lax.switch(0, [BRANCHES[0], BRANCHES[1], int_branch], X)


# --- while_loop ----------------------------------------------------------------------------------
def python_while(cond_fun, body_fun, val):
    while cond_fun(val):
        val = body_fun(val)
    return val


def test_while_loop_matches_python_eager_and_jit():
    def f(x, limit):
        return lax.while_loop(lambda c: c[0] < limit, lambda c: (c[0] + 1, c[1] * x), (0, jnp.ones(3)))

    count, value = check_eager_and_jit(f, np.float32(1.5), 5)
    assert int(count) == 5 and count.dtype == np.int32
    assert_allclose(value, np.full(3, 1.5**5, np.float32))


def test_while_loop_dict_carry_and_zero_iterations():
    def f(x):
        init = {"i": jnp.asarray(10), "x": x}
        return lax.while_loop(lambda c: c["i"] < 3, lambda c: {"i": c["i"] + 1, "x": c["x"] * 2.0}, init)

    out = check_eager_and_jit(f, X)
    assert int(out["i"]) == 10
    assert_allclose(out["x"], X)


def test_while_loop_collatz_against_python():
    def steps(n):
        def body(c):
            k, count = c
            odd = lax.rem(k, 2) == 1
            return lax.select(odd, 3 * k + 1, lax.div(k, 2)), count + 1

        return lax.while_loop(lambda c: c[0] != 1, body, (n, 0))[1]

    def python_steps(n):
        return python_while(lambda c: c[0] != 1, lambda c: (3 * c[0] + 1 if c[0] % 2 else c[0] // 2, c[1] + 1),
                            (n, 0))[1]

    jitted = ember.jit(steps)
    for n in (1, 6, 27):
        assert int(steps(np.int32(n))) == python_steps(n) == int(jitted(np.int32(n)))


def test_while_loop_closures_become_operands():
    def f(x, limit):
        return lax.while_loop(lambda c: c < limit, lambda c: c + x, 0.0)

    out = check_eager_and_jit(f, np.float32(0.75), np.float32(2))
    assert float(out) == 2.25
    text = ir(f, np.float32(0.75), np.float32(2))
    assert "while[" in text and "body_nconsts=1" in text and "cond_nconsts=1" in text


def test_while_loop_promotes_a_weak_initial_carry():
    out = ember.jit(lambda x: lax.while_loop(lambda c: c < 10, lambda c: c + x, 0))(np.float32(4))
    assert out.dtype == np.float32 and not out.weak_type and float(out) == 12
    stays_weak = lax.while_loop(lambda c: c < 10, lambda c: c + 3, 0)
    assert stays_weak.weak_type and int(stays_weak) == 12


def test_while_loop_strengthens_a_weak_body_output():
    out = lax.while_loop(lambda c: c < 1, lambda c: 5.0, jnp.asarray(0.0, jnp.float32))
    assert not out.weak_type and float(out) == 5.0


def to_int(c):
    return c.astype(jnp.int32)


def test_while_loop_carry_type_change_names_both_types():
    with pytest.raises(TypeError) as e:
        lax.while_loop(lambda c: True, to_int, X)
    msg = str(e.value)
    assert msg.startswith("lax.while_loop: body_fun `to_int`")
    assert "input type f32[3] and output type i32[3]" in msg and "Fix:" in msg
    with pytest.raises(TypeError, match=r"shapes differ at \[1\]: f32\[3\] vs f32\[2,3\]"):
        lax.while_loop(lambda c: True, lambda c: (c[0], jnp.ones((2, 3))), (0, X))
    with pytest.raises(TypeError, match="pytree structures differ"):
        lax.while_loop(lambda c: True, lambda c: (c, c), X)


@pytest.mark.parametrize("cond_fun, shown", [
    (lambda c: c > 0, r"bool\[3\]"),
    (lambda c: c, r"f32\[3\]"),
    (lambda c: 1, r"i32\[\]"),
    (lambda c: (True, True), r"\(bool\[\], bool\[\]\)"),
])
def test_while_loop_condition_must_be_a_boolean_scalar(cond_fun, shown):
    with pytest.raises(TypeError, match=rf"cond_fun `<lambda>` .* must return a boolean scalar, got {shown}"):
        lax.while_loop(cond_fun, lambda c: c, X)


# --- fori_loop --------------------------------------------------------------------------------------
def fori_body(i, c):
    return c * 2.0 + i.astype(jnp.float32)


def python_fori(lower, upper, body, val):
    for i in range(lower, upper):
        val = body(i, val)
    return val


@pytest.mark.parametrize("lower, upper", [(0, 5), (2, 4), (3, 3), (5, 1)])
def test_fori_loop_static_bounds_use_scan(lower, upper):
    expected = python_fori(lower, upper, lambda i, c: c * 2 + i, X)
    check_eager_and_jit(lambda x: lax.fori_loop(lower, upper, fori_body, x), X, expected=expected)
    text = ir(lambda x: lax.fori_loop(lower, upper, fori_body, x), X)
    assert "scan[" in text and "while[" not in text
    assert f"length={max(upper - lower, 0)}" in text


@pytest.mark.parametrize("lower, upper", [(0, 5), (2, 4), (5, 1)])
def test_fori_loop_traced_bounds_use_while(lower, upper):
    expected = python_fori(lower, upper, lambda i, c: c * 2 + i, X)
    f = ember.jit(lambda lo, hi, x: lax.fori_loop(lo, hi, fori_body, x))
    assert_allclose(f(lower, upper, X), expected)
    g = ember.jit(lambda hi, x: lax.fori_loop(lower, hi, fori_body, x))
    assert_allclose(g(upper, X), expected)
    text = ir(lambda hi, x: lax.fori_loop(lower, hi, fori_body, x), upper, X)
    assert "while[" in text and "scan[" not in text


@given(lower=st.integers(-3, 6), upper=st.integers(-3, 6))
def test_fori_loop_matches_range_for_any_bounds(lower, upper):
    expected = python_fori(lower, upper, lambda i, c: c * 2 + i, X)
    assert_allclose(lax.fori_loop(lower, upper, fori_body, X), expected)
    traced = ember.jit(lambda lo, hi: lax.fori_loop(lo, hi, fori_body, X))
    assert_allclose(traced(lower, upper), expected)


def test_fori_loop_index_dtype_follows_the_bounds():
    seen = []

    def body(i, c):
        seen.append(i.aval)
        return c

    lax.fori_loop(0, 3, body, X)
    lax.fori_loop(np.int16(0), np.int16(3), body, X)
    lax.fori_loop(0, np.uint8(3), body, X)
    ember.jit(lambda n: lax.fori_loop(0, n, body, X))(np.int16(3))
    assert [(str(a.dtype), a.weak_type) for a in seen] == [
        ("int32", True), ("int16", False), ("uint8", False), ("int16", False)]


def test_fori_loop_index_is_int64_with_x64(x64):
    seen = []
    lax.fori_loop(0, 2, lambda i, c: seen.append(i.dtype) or c, 0.0)
    assert seen == [np.dtype(np.int64)]


def test_fori_loop_with_concrete_array_bounds_and_pytree_carry():
    def body(i, c):
        return {"total": c["total"] + i, "xs": c["xs"] + 1.0}

    out = lax.fori_loop(jnp.asarray(1), jnp.asarray(4), body, {"total": 0, "xs": X})
    assert int(out["total"]) == 6
    assert_allclose(out["xs"], X + 3)


def test_fori_loop_errors():
    with pytest.raises(TypeError, match="lower and upper arguments to fori_loop must have equal types, got float32 "
                                        "and int32"):
        lax.fori_loop(0.0, 3, fori_body, X)
    with pytest.raises(TypeError, match="must have equal types, got int16 and int32"):
        lax.fori_loop(np.int16(0), np.int32(3), fori_body, X)
    with pytest.raises(ValueError, match="unroll needs loop bounds known while tracing"):
        ember.jit(lambda n: lax.fori_loop(0, n, fori_body, X, unroll=2))(3)
    with pytest.raises(TypeError, match=r"body_fun `to_int_body` .* the carry \(loop index, val\): input type "
                                        r"\(i32\[\], f32\[3\]\) and output type \(i32\[\], i32\[3\]\)"):
        lax.fori_loop(0, 3, to_int_body, X)


def to_int_body(i, c):
    return c.astype(jnp.int32)


# --- scan ---------------------------------------------------------------------------------------------
def cumulative(c, x):
    c = c + x
    return c, c * 2.0


def test_scan_cumulative_sum():
    xs = np.arange(5, dtype=np.float32)
    carry, ys = check_eager_and_jit(lambda xs: lax.scan(cumulative, 0.0, xs), xs)
    assert float(carry) == 10 and carry.dtype == np.float32
    assert_allclose(ys, np.cumsum(xs) * 2)


def test_scan_reverse_keeps_positions():
    xs = np.arange(5, dtype=np.float32)
    carry, ys = check_eager_and_jit(lambda xs: lax.scan(cumulative, 0.0, xs, reverse=True), xs)
    assert float(carry) == 10
    assert_allclose(ys, np.cumsum(xs[::-1])[::-1] * 2)


def test_scan_pytrees_of_xs_and_ys():
    def step(c, x):
        total = c["total"] + x["a"] * x["b"]
        return {"total": total}, (total, x["b"] > 1.0)

    xs = {"a": np.ones((4, 2), np.float32), "b": np.arange(4, dtype=np.float32)}
    carry, (totals, flags) = check_eager_and_jit(lambda xs: lax.scan(step, {"total": jnp.zeros(2)}, xs), xs)
    expected = np.cumsum(np.ones((4, 2)) * np.arange(4)[:, None], axis=0)
    assert_allclose(totals, expected.astype(np.float32))
    assert_allclose(carry["total"], expected[-1].astype(np.float32))
    assert_allclose(flags, np.arange(4) > 1)


def test_scan_without_xs_needs_length():
    carry, ys = check_eager_and_jit(lambda c: lax.scan(lambda c, _: (c * 2.0, c), c, None, length=4), X)
    assert_allclose(carry, X * 16)
    assert_allclose(ys, np.stack([X, 2 * X, 4 * X, 8 * X]))
    with pytest.raises(ValueError, match="no xs to scan over and length is not given"):
        lax.scan(lambda c, _: (c, c), X)


def test_scan_with_no_ys_and_zero_length():
    carry, ys = lax.scan(lambda c, x: (c + x, None), 0.0, np.ones(3, np.float32))
    assert float(carry) == 3 and ys is None
    carry, ys = check_eager_and_jit(lambda xs: lax.scan(cumulative, 1.0, xs), np.zeros((0,), np.float32))
    assert carry.shape == () and float(carry) == 1
    assert ys.shape == (0,) and ys.dtype == np.float32


def test_scan_mismatched_lengths_are_named():
    with pytest.raises(ValueError, match=r"different leading axis lengths \(xs\[0\]: 3, xs\[1\]: 4\)"):
        lax.scan(lambda c, x: (c, x), 0.0, (jnp.ones(3), jnp.ones(4)))
    with pytest.raises(ValueError, match=r"\(xs: 3, length: 5\)"):
        lax.scan(lambda c, x: (c, x), 0.0, jnp.ones(3), length=5)
    with pytest.raises(ValueError, match="no leading axis"):
        lax.scan(lambda c, x: (c, x), 0.0, 1.0)


def carry_widens(c, x):
    return jnp.ones((2, 3)), x


def test_scan_body_errors():
    with pytest.raises(TypeError, match=r"f `carry_widens` .* input type f32\[3\] and output type f32\[2,3\]"):
        lax.scan(carry_widens, X, X)
    with pytest.raises(TypeError, match=r"must return a pair \(carry, y\), got an array of type f32\[3\]"):
        lax.scan(lambda c, x: c, X, X)
    with pytest.raises(TypeError, match="got a tuple of length 3"):
        lax.scan(lambda c, x: (c, x, x), X, X)


def test_scan_static_arguments():
    with pytest.raises(ValueError, match="unroll must be a bool or a non-negative int, got -1"):
        lax.scan(cumulative, 0.0, X, unroll=-1)
    with pytest.raises(errors.TracerIntegerConversionError):
        ember.jit(lambda n: lax.scan(lambda c, _: (c, c), 0.0, None, length=n))(3)


def test_scan_closes_over_concrete_arrays():
    table = np.arange(4, dtype=np.float32) * 10  # a NumPy constant the body reads by traced index

    def f(x):
        return lax.scan(lambda c, i: (c + at(table, i), c), x, np.arange(4, dtype=np.int32))

    carry, ys = check_eager_and_jit(f, np.float32(1))
    assert float(carry) == 61
    assert_allclose(ys, np.array([1, 1, 11, 31], np.float32))


def test_scan_ir_params():
    text = ir(lambda xs: lax.scan(cumulative, 0.0, xs, unroll=True), np.ones(3, np.float32))
    assert "scan[\n      jaxpr={ lambda" in text  # (JAX 0.10 prints a parameter a line when they do not fit)
    for param in ("length=3", "num_carry=1", "num_consts=0", "reverse=False", "unroll=3"):
        assert param in text


@given(length=st.integers(0, 5), inner=st.lists(st.integers(1, 3), max_size=2), reverse=st.booleans(),
       seed=st.integers(0, 2**16))
def test_scan_matches_a_python_loop(length, inner, reverse, seed):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((length, *inner)).astype(np.float32)
    init = rng.standard_normal(inner).astype(np.float32)

    def step(c, x):
        return c * 0.5 + x, c - x

    carry, ys = init, [None] * length
    for i in (reversed(range(length)) if reverse else range(length)):
        carry, ys[i] = carry * np.float32(0.5) + xs[i], carry - xs[i]
    expected_ys = np.stack(ys) if length else np.zeros((0, *inner), np.float32)
    got_carry, got_ys = check_eager_and_jit(lambda c, xs: lax.scan(step, c, xs, reverse=reverse), init, xs)
    assert_allclose(got_carry, carry)
    assert_allclose(got_ys, expected_ys)


# --- map -------------------------------------------------------------------------------------------------
def test_map_matches_stacking():
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    check_eager_and_jit(lambda xs: lax.map(lambda r: r * r + 1.0, xs), xs, expected=xs * xs + 1)
    out = lax.map(lambda t: {"s": t["a"] + t["b"]}, {"a": xs, "b": 2 * xs})
    assert_allclose(out["s"], 3 * xs)
    assert "scan[" in ir(lambda xs: lax.map(jnp.sin, xs), xs)



@pytest.mark.parametrize("n,batch_size", [(6, 2), (7, 3), (2, 5), (4, 4)])
def test_map_with_batch_size(n, batch_size):
    xs = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    fn = lambda xs: lax.map(lambda r: {"y": r.sum() * r}, xs, batch_size=batch_size)  # noqa: E731
    out = check_eager_and_jit(fn, xs)
    assert_allclose(out["y"], xs.sum(axis=1, keepdims=True) * xs)
    with pytest.raises(ValueError, match="batch_size must be positive"):
        lax.map(jnp.sin, xs, batch_size=0)


# --- nesting, closures, jit inside bodies ---------------------------------------------------------------
def test_scan_inside_cond_inside_while_with_closures():
    def f(x, scale):
        offset = scale * 2.0  # an outer traced value, used three levels down

        def body(c):
            i, acc = c

            def with_scan(a):
                total, _ = lax.scan(lambda t, v: (t + v * offset, None), 0.0, x)
                return a + total

            return i + 1, lax.cond(lax.rem(i, 2) == 0, with_scan, lambda a: a - 1.0, acc)

        return lax.while_loop(lambda c: c[0] < 4, body, (0, 0.0))[1]

    x = np.arange(3, dtype=np.float32)
    acc = 0.0
    for i in range(4):
        acc = acc + (x * 2 * 1.5).sum() if i % 2 == 0 else acc - 1
    out = check_eager_and_jit(f, x, np.float32(1.5), expected=np.float32(acc))
    assert out.dtype == np.float32
    text = ir(f, x, np.float32(1.5))
    assert text.index("while[") < text.index("cond[") < text.index("scan[")


def test_jitted_function_called_inside_loop_bodies():
    inner = ember.jit(lambda c: c * 2.0 + 1.0)

    def f(x):
        looped = lax.fori_loop(0, 3, lambda i, c: inner(c), x)
        scanned, _ = lax.scan(lambda c, v: (inner(c) + v, None), x, np.ones(2, np.float32))
        return looped, scanned

    looped, scanned = check_eager_and_jit(f, X)
    assert_allclose(looped, ((X * 2 + 1) * 2 + 1) * 2 + 1)
    assert_allclose(scanned, ((X * 2 + 1) + 1) * 2 + 1 + 1)
    assert "jit[" in ir(f, X)


def test_loops_nest_in_loops():
    def f(n):
        def outer(i, total):
            return lax.fori_loop(0, i, lambda j, t: t + j, total)

        return lax.fori_loop(0, n, outer, 0)

    assert int(f(5)) == sum(j for i in range(5) for j in range(i))
    assert int(ember.jit(f)(5)) == int(f(5))
    text = ir(f, 5)
    assert "while[" in text and "scan[" not in text  # the traced n makes both loops while loops


# --- disable_jit: the functions run as plain Python, for print debugging --------------------------------
def test_disable_jit_runs_python_loops():
    seen = []

    def body(c):
        seen.append(type(c))
        return c + 1

    with ember.disable_jit():
        assert int(lax.while_loop(lambda c: c < 3, body, jnp.asarray(0))) == 3
        carry, ys = lax.scan(lambda c, x: (c + x, c), jnp.asarray(0.0), jnp.arange(3.0), reverse=True)
        assert lax.cond(False, lambda: seen.append("true"), lambda: "picked") == "picked"
    assert seen == [ember.Array] * 3
    assert float(carry) == 3
    assert_allclose(ys, np.array([3.0, 2.0, 0.0], np.float32))


# --- JAX as an oracle for result types (weak types included) --------------------------------------------
ORACLE_CASES = {
    "cond weak and strong branches": lambda lax, jnp, x: lax.cond(True, lambda: 1.0, lambda: x),
    "cond weak branches": lambda lax, jnp, x: lax.cond(False, lambda: 1.0, lambda: 2.0),
    "cond integer pred": lambda lax, jnp, x: lax.cond(3, lambda a: a, lambda a: a + 1, x),
    "switch clamps": lambda lax, jnp, x: lax.switch(7, [lambda: x, lambda: x + 1]),
    "while promotes weak init": lambda lax, jnp, x: lax.while_loop(lambda c: c < 10, lambda c: c + x, 0),
    "while weak int to float": lambda lax, jnp, x: lax.while_loop(lambda c: c < 10, lambda c: c + 1.5, 0),
    "while stays weak": lambda lax, jnp, x: lax.while_loop(lambda c: c < 10, lambda c: c + 3, 0),
    "fori python bounds": lambda lax, jnp, x: lax.fori_loop(0, 3, lambda i, c: c + i, 0),
    "fori float carry": lambda lax, jnp, x: lax.fori_loop(1, 4, lambda i, c: c * i, 1.0),
    "scan weak carry": lambda lax, jnp, x: lax.scan(lambda c, a: (c + a, c), 0, jnp.arange(3.0)),
    "scan weak ys": lambda lax, jnp, x: lax.scan(lambda c, a: (c, 2.0), x, None, length=2),
    "map": lambda lax, jnp, x: lax.map(lambda a: a + 1, jnp.arange(3)),
}


@pytest.mark.parametrize("name", list(ORACLE_CASES))
def test_result_types_match_jax(name):
    jax = pytest.importorskip("jax")
    case = ORACLE_CASES[name]
    expected = jax.tree_util.tree_leaves(case(jax.lax, jax.numpy, jax.numpy.float32(2.0)))
    got = ember.tree_util.tree_leaves(case(lax, jnp, jnp.asarray(2.0, jnp.float32)))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert (g.dtype, g.weak_type, g.shape) == (e.dtype, e.weak_type, e.shape)
        assert_allclose(g, np.asarray(e))
