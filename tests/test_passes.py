"""Compiler passes: each shrinks the IR as intended, keeps it well typed, and keeps every value.

Every pass application here goes through ``run_pass``, which checks the IR
with the type checker, checks the signature and the input program are
unchanged, and compares the reference interpreter's results before and after
bit for bit (NaN equal to NaN, -0.0 distinct from 0.0).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.numpy as jnp
from ember import compiler, lax
from ember.api import jit_p
from ember.backends.reference import eval_jaxpr, impl_rules
from ember.compiler.simplify import is_exact_conversion
from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, subjaxprs
from ember.core.primitive import Primitive, abstract_eval_rules
from ember.core.verify import IRTypeError, check_jaxpr
from ember.lax import elementwise as ew, shapes as sh

f16, f32, f64, i32, u8 = (np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int32, np.uint8))
PASSES = [compiler.inline_calls, compiler.simplify, compiler.fold_constants,
          compiler.eliminate_common_subexpressions, compiler.eliminate_dead_code]


# --- helpers ------------------------------------------------------------------------------
def assert_identical(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same dtype, shape and values; NaN matches NaN and the sign of zero must match."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if actual.dtype.kind == "f" or actual.dtype == jnp.bfloat16:
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(e))
        np.testing.assert_array_equal(np.where(np.isnan(a), 0, a), np.where(np.isnan(e), 0, e))
        np.testing.assert_array_equal(np.signbit(a), np.signbit(e))
    else:
        np.testing.assert_array_equal(actual, expected)


def evaluate(closed: ClosedJaxpr, args: tuple) -> list[np.ndarray]:
    return eval_jaxpr(closed.jaxpr, closed.consts, *(np.asarray(a, dtype=v.aval.dtype)
                                                     for a, v in zip(args, closed.jaxpr.invars)))


def run_pass(transform: Callable[..., ClosedJaxpr], closed: ClosedJaxpr, *args: Any, **options: Any) -> ClosedJaxpr:
    """Apply a pass (or the pipeline, with ``options``) and check everything a pass promises."""
    text, eqns = str(closed), list(closed.eqns)
    expected = evaluate(closed, args)
    out = transform(closed, **options)
    assert str(closed) == text and all(a is b for a, b in zip(closed.eqns, eqns)), "the input was mutated"
    check_jaxpr(out)
    assert out.jaxpr.invars == closed.jaxpr.invars and out.out_avals == closed.out_avals
    for got, want in zip(evaluate(out, args), expected):
        assert_identical(got, want)
    return out


def names(closed: ClosedJaxpr) -> list[str]:
    return [e.primitive.name for e in closed.eqns]


def count(closed: ClosedJaxpr | Jaxpr) -> int:
    """Equations, sub-programs included."""
    jaxpr = closed.jaxpr if isinstance(closed, ClosedJaxpr) else closed
    return sum(1 + sum(map(count, subjaxprs(e.params))) for e in jaxpr.eqns)


class Builder:
    """Writes programs by hand, for IR that tracing does not produce."""

    def __init__(self) -> None:
        self.eqns: list[Eqn] = []

    def __call__(self, primitive: Primitive, *invars: Any, **params: Any) -> Any:
        out = abstract_eval_rules[primitive](*(a.aval for a in invars), **params)
        outvars = [Var(a) for a in (out if primitive.multiple_results else [out])]
        self.eqns.append(Eqn(primitive, list(invars), params, outvars))
        return outvars if primitive.multiple_results else outvars[0]

    def program(self, invars: list[Var], outvars: list, consts: dict | None = None) -> ClosedJaxpr:
        consts = consts or {}
        return ClosedJaxpr(Jaxpr(list(consts), invars, self.eqns, outvars), list(consts.values()))


def var(shape: tuple, dtype: Any = f32, weak: bool = False) -> Var:
    return Var(ShapedArray(shape, np.dtype(dtype), weak))


def lit(value: Any, dtype: Any = f32, weak: bool = False) -> Literal:
    return Literal(np.asarray(value, dtype=dtype)[()], ShapedArray((), np.dtype(dtype), weak))


X3 = np.array([1.5, -0.0, np.nan], np.float32)


# --- inlining -----------------------------------------------------------------------------------
def test_inline_body_called_twice_gets_fresh_variables():
    c = np.arange(3.0, dtype=np.float32)
    g = ember.jit(lambda x: (x + c, x * c))

    def f(x):
        return g(x)[0] * g(x)[1]

    closed = ember.make_jaxpr(f)(X3)
    assert names(closed) == ["jit", "jit", "mul"]
    out = run_pass(compiler.inline_calls, closed, X3)
    assert names(out) == ["add", "mul", "add", "mul", "mul"]
    assert out.jaxpr.constvars == closed.jaxpr.constvars  # the closure's array stays a const


def test_inline_is_recursive_and_forwards_literals():
    inner = ember.jit(lambda x, s: x * s)
    middle = ember.jit(lambda x: (inner(x, 3.0), 1.0))

    closed = ember.make_jaxpr(lambda x: middle(x))(X3)
    out = run_pass(compiler.inline_calls, closed, X3)
    assert "jit" not in str(out)
    assert names(out) == ["convert_element_type", "mul"]  # jnp makes the weak 3.0 strong
    assert str(out.eqns[0].invars[0]) == "Literal(3.0:f32[])" and isinstance(out.jaxpr.outvars[1], Literal)
    optimized = run_pass(compiler.optimize, closed, X3)
    assert str(optimized) == "{ lambda ; a:f32[3]. let b:f32[3] = mul a 3.0:f32[] in (b, 1.0:f32[]) }"


def test_inline_converts_operands_that_differ_in_weak_type():
    body_x = var((), f32)
    body = ClosedJaxpr(Jaxpr([], [body_x], [], [body_x]), [])
    b = Builder()
    (y,) = b(jit_p, lit(2.0, f32, weak=True), jaxpr=body, name="g")
    closed = b.program([], [y])
    out = run_pass(compiler.inline_calls, closed)
    assert names(out) == ["convert_element_type"] and out.out_avals == [ShapedArray((), f32, False)]


def test_inline_leaves_the_input_program_alone():
    g = ember.jit(lambda x: -x)
    closed = ember.make_jaxpr(lambda x: g(g(x)))(X3)
    out = run_pass(compiler.optimize, closed, X3)
    assert names(closed) == ["jit", "jit"] and names(out) == []


# --- dead-code elimination -----------------------------------------------------------------------
def test_dce_drops_unused_equations_and_consts_but_keeps_inputs():
    c = np.ones(3, np.float32)

    def f(x, unused):
        jnp.exp(x + c)
        return x * 2.0

    closed = ember.make_jaxpr(f)(X3, X3)
    out = run_pass(compiler.eliminate_dead_code, closed, X3, X3)
    assert names(out) == ["mul"] and out.jaxpr.constvars == [] and out.consts == []
    assert len(out.jaxpr.invars) == 2


def test_dce_prunes_unused_outputs_and_inputs_of_jit_calls():
    g = ember.jit(lambda x, y: (jnp.exp(x), jnp.sin(y)))
    closed = ember.make_jaxpr(lambda x, y: g(x, y)[0])(X3, X3)
    out = run_pass(compiler.eliminate_dead_code, closed, X3, X3)
    (call,) = out.eqns
    assert len(call.outvars) == 1 and len(call.invars) == 1 and call.invars[0] is closed.jaxpr.invars[0]
    assert names(call.params["jaxpr"]) == ["exp"]


def test_dce_drops_a_call_whose_results_are_unused():
    g = ember.jit(lambda x: jnp.exp(x))

    def f(x):
        g(x)
        return x

    out = run_pass(compiler.eliminate_dead_code, ember.make_jaxpr(f)(X3), X3)
    assert names(out) == []


@pytest.fixture
def exp_is_effectful():
    compiler.EFFECTFUL.add(ew.exp_p)
    yield
    compiler.EFFECTFUL.discard(ew.exp_p)


def effects_program() -> ClosedJaxpr:
    """A dead exp, a repeated one, and one of a literal."""
    b = Builder()
    x = var((3,))
    b(ew.exp_p, x)
    total = b(ew.add_p, b(ew.exp_p, x), b(ew.exp_p, x))
    return b.program([x], [b(ew.add_p, total, b(ew.exp_p, lit(2.0)))])


def test_pure_equations_are_dropped_merged_and_folded():
    assert names(run_pass(compiler.optimize, effects_program(), X3)) == ["exp", "add", "add"]


def test_effectful_equations_are_never_dropped_merged_or_folded(exp_is_effectful):
    out = run_pass(compiler.optimize, effects_program(), X3)
    assert names(out) == ["exp", "exp", "exp", "add", "exp", "add"]
    call = ember.make_jaxpr(lambda x: ember.jit(jnp.exp)(x) * 0)(X3)
    out = run_pass(compiler.optimize, call, X3, disabled=("inline",))
    assert names(out)[0] == "jit"  # the body has an effect, so the unused call has one too


# --- common-subexpression elimination ------------------------------------------------------------
def test_cse_merges_repeated_equations_transitively():
    closed = ember.make_jaxpr(lambda x: jnp.exp(-x) * jnp.exp(-x) + (x * 2.0 + x * 2.0))(X3)
    out = run_pass(compiler.eliminate_common_subexpressions, closed, X3)
    assert names(out) == ["neg", "exp", "mul", "mul", "add", "add"]
    assert out.eqns[2].invars[0] is out.eqns[2].invars[1]  # exp(-x) * exp(-x) reads one value


def test_cse_compares_literals_by_bits_dtype_and_weak_type():
    b = Builder()
    x = var((3,))
    outs = [b(ew.mul_p, x, lit(0.0)), b(ew.mul_p, x, lit(-0.0)), b(ew.mul_p, x, lit(0.0)),
            b(ew.mul_p, x, lit(0.0, weak=True)), b(ew.mul_p, x, lit(np.nan)), b(ew.mul_p, x, lit(np.nan))]
    out = run_pass(compiler.eliminate_common_subexpressions, b.program([x], outs), X3)
    assert len(out.eqns) == 4
    assert out.jaxpr.outvars[2] is out.jaxpr.outvars[0] and out.jaxpr.outvars[5] is out.jaxpr.outvars[4]


def test_cse_compares_params_by_value_and_unhashable_params_by_identity(monkeypatch):
    table = np.arange(3)
    tagged = Primitive("tagged_identity")
    monkeypatch.setitem(abstract_eval_rules, tagged, lambda x, *, table: x)
    b = Builder()
    x = var((2, 3))
    outs = [b(sh.reshape_p, x, new_sizes=(3, 2), dimensions=None),
            b(sh.reshape_p, x, new_sizes=(3, 2), dimensions=None),
            b(sh.reshape_p, x, new_sizes=(6,), dimensions=None),
            b(tagged, x, table=table), b(tagged, x, table=table), b(tagged, x, table=table.copy())]
    out = compiler.eliminate_common_subexpressions(b.program([x], outs))
    check_jaxpr(out)
    assert names(out) == ["reshape", "reshape", "tagged_identity", "tagged_identity"]


def test_cse_merges_calls_of_one_body_when_not_inlined():
    g = ember.jit(lambda x: (jnp.sin(x), x + 1.0))
    closed = ember.make_jaxpr(lambda x: g(x)[0] + g(x)[1])(X3)
    out = run_pass(compiler.optimize, closed, X3, disabled=("inline",))
    assert names(out) == ["jit", "add"]


# --- constant folding -----------------------------------------------------------------------------
def test_fold_evaluates_constants_exposed_by_inlining():
    scale = ember.jit(lambda x, s: x * (s * 2.0 + 1.0))
    closed = ember.make_jaxpr(lambda x: scale(x, 3.0))(X3)
    out = run_pass(compiler.optimize, closed, X3)
    assert str(out) == "{ lambda ; a:f32[3]. let b:f32[3] = mul a 7.0:f32[] in (b,) }"


def test_fold_then_simplify_removes_multiplication_by_a_folded_one():
    scale = ember.jit(lambda x, s: x * (s + 1.0))
    closed = ember.make_jaxpr(lambda x: scale(x, 0.0))(X3)
    out = run_pass(compiler.optimize, closed, X3)
    assert names(out) == [] and out.jaxpr.outvars == out.jaxpr.invars


def test_fold_turns_small_arrays_into_consts_and_leaves_large_ones():
    c = np.linspace(-1, 1, 4, dtype=np.float32)
    g = ember.jit(lambda x, c: x + jnp.exp(c))
    closed = ember.make_jaxpr(lambda x: g(x, c))(X3[:1])
    out = run_pass(compiler.optimize, closed, X3[:1])
    assert names(out) == ["add"] and len(out.consts) == 1  # exp(c) replaced c (x's size-1 dimension broadcasts)
    np.testing.assert_array_equal(out.consts[0], np.exp(c))

    b = Builder()
    small = b(sh.broadcast_in_dim_p, lit(2.0), shape=(compiler.MAX_FOLDED_ELEMENTS,), broadcast_dimensions=())
    large = b(sh.broadcast_in_dim_p, lit(2.0), shape=(compiler.MAX_FOLDED_ELEMENTS + 1,), broadcast_dimensions=())
    iota = b(sh.iota_p, dtype=i32, shape=(4,), dimension=0)
    out = run_pass(compiler.fold_constants, b.program([], [small, large, iota]))
    assert names(out) == ["broadcast_in_dim"] and out.eqns[0].outvars[0] is large
    assert [c.shape for c in out.consts] == [(compiler.MAX_FOLDED_ELEMENTS,), (4,)]


def test_fold_leaves_equations_whose_evaluation_fails(monkeypatch):
    failing = Primitive("fails_when_folded")

    def impl(x):
        raise ZeroDivisionError("only at run time")

    monkeypatch.setitem(abstract_eval_rules, failing, lambda x: x)
    monkeypatch.setitem(impl_rules, failing, impl)
    b = Builder()
    y = b(failing, lit(1.0))
    out = compiler.fold_constants(b.program([], [y]))
    assert names(out) == ["fails_when_folded"]


def test_fold_uses_consts_of_any_array_type():
    b = Builder()
    c = var((2,), f32)
    y = b(ew.neg_p, c)
    closed = b.program([], [y], {c: ember.numpy.asarray([1.0, -0.0])})
    out = run_pass(compiler.fold_constants, closed)
    assert names(out) == []
    assert_identical(out.consts[-1], np.array([-1.0, 0.0], np.float32))


# --- algebraic simplification -----------------------------------------------------------------------
def simplified(f: Callable, *args: Any) -> ClosedJaxpr:
    """``f``'s IR after inlining, simplify and DCE (which removes what simplify left dead)."""
    closed = ember.make_jaxpr(f)(*args)
    return run_pass(lambda c: compiler.eliminate_dead_code(compiler.simplify(compiler.inline_calls(c))), closed, *args)


I3 = np.array([0, -7, 2**31 - 1], np.int32)


@pytest.mark.parametrize("f", [lambda x: x * 1.0, lambda x: 1.0 * x, lambda x: x / 1.0, lambda x: x - 0.0,
                               lambda x: x + -0.0, lambda x: -0.0 + x, lambda x: -(-x),
                               lambda x: lax.integer_pow(x, 1), lambda x: jnp.where(True, x, 2 * x)],
                         ids=["x*1", "1*x", "x/1", "x-0", "x+(-0)", "(-0)+x", "neg-neg", "x**1", "select"])
def test_float_identities_disappear(f):
    out = simplified(f, X3)
    assert names(out) == [] and out.jaxpr.outvars[0] is out.jaxpr.invars[0]


@pytest.mark.parametrize("f", [lambda x: x + 0, lambda x: 0 + x, lambda x: x - 0, lambda x: x * 1,
                               lambda x: lax.div(x, 1), lambda x: -(-x)])
def test_integer_identities_disappear(f):
    out = simplified(f, I3)
    assert names(out) == []


def test_x_plus_zero_is_kept_for_floats_because_of_negative_zero():
    out = simplified(lambda x: x + 0.0, X3)
    assert names(out) == ["add"]
    assert_identical(evaluate(out, (X3,))[0], np.array([1.5, 0.0, np.nan], np.float32))


def test_rewrites_that_would_change_the_weak_type_are_skipped():
    b = Builder()
    x = var((), f32, weak=True)
    y = b(ew.mul_p, x, lit(1.0, f32, weak=False))  # a strong result
    z = b(ew.mul_p, x, lit(1.0, f32, weak=True))   # a weak result
    out = run_pass(compiler.simplify, b.program([x], [y, z]), 2.0)
    assert names(out) == ["mul"] and out.jaxpr.outvars[1] is x


def test_literal_select_and_equal_cases():
    b = Builder()
    x, y = var((3,)), var((3,))
    p = b(ew.gt_p, x, y)
    outs = [b(ew.select_n_p, lit(1, i32), x, y), b(ew.select_n_p, lit(5, i32), x, y),
            b(ew.select_n_p, p, y, y), b(ew.select_n_p, lit(False, np.bool_), lit(2.0), x)]
    out = run_pass(compiler.simplify, b.program([x, y], outs), X3, X3[::-1])
    assert out.jaxpr.outvars[0] is y and out.jaxpr.outvars[2] is y
    assert names(out) == ["gt", "select_n", "select_n"]  # out of range; a scalar case of an array result


def test_convert_chains_collapse_only_when_the_middle_type_is_exact(x64):
    out = simplified(lambda x: x.astype(jnp.float64).astype(jnp.float32), X3)
    assert names(out) == []
    out = simplified(lambda x: x.astype(jnp.float32).astype(jnp.int32), I3)
    assert names(out) == ["convert_element_type", "convert_element_type"]
    i8 = np.array([-128, 0, 127], np.int8)
    out = simplified(lambda x: x.astype(jnp.int16).astype(jnp.float32).astype(jnp.float16), i8)
    assert [e.params["new_dtype"] for e in out.eqns] == [f16]
    out = simplified(lambda x: x.astype(jnp.float32).astype(jnp.int32), i8)
    assert [e.params["new_dtype"] for e in out.eqns] == [i32]
    # float -> int saturates where int -> int wraps: -128 -> 0.0 -> 0, but -128 -> 128
    out = simplified(lambda x: x.astype(jnp.float32).astype(jnp.uint8), i8)
    assert names(out) == ["convert_element_type", "convert_element_type"]


def test_convert_to_the_same_type_disappears():
    b = Builder()
    x = var((3,))
    same = b(ew.convert_element_type_p, x, new_dtype=f32, weak_type=False)
    weak = b(ew.convert_element_type_p, x, new_dtype=f32, weak_type=True)
    out = run_pass(compiler.simplify, b.program([x], [same, weak]), X3)
    assert out.jaxpr.outvars[0] is x and names(out) == ["convert_element_type"]


def test_exact_conversions():
    exact = is_exact_conversion  # source -> target
    assert exact(f32, f64) and exact(f16, f32) and exact(jnp.bfloat16, f32) and exact(np.dtype(bool), u8)
    assert exact(np.dtype(np.int16), f32) and exact(u8, f16) and exact(np.dtype(np.int8), jnp.bfloat16)
    assert not exact(i32, f32) and not exact(f16, jnp.bfloat16) and not exact(jnp.bfloat16, f16)
    assert not exact(np.dtype(np.int8), np.dtype(np.uint16)) and not exact(f32, i32) and not exact(u8, np.dtype(bool))


def test_reshape_chains_collapse():
    x23 = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = simplified(lambda x: lax.reshape(lax.reshape(x, (3, 2)), (6,)), x23)
    assert names(out) == ["reshape"] and out.eqns[0].invars[0] is out.jaxpr.invars[0]
    assert names(simplified(lambda x: lax.reshape(lax.reshape(x, (6,)), (2, 3)), x23)) == []
    assert names(simplified(lambda x: lax.squeeze(lax.expand_dims(x, (0, 2)), (0,)), x23)) == ["reshape"]
    assert names(simplified(lambda x: lax.squeeze(lax.expand_dims(x, (0,)), (0,)), x23)) == []


def test_broadcast_and_transpose_chains_compose():
    x = np.arange(3, dtype=np.float32)
    out = simplified(lambda x: lax.broadcast_in_dim(lax.broadcast_in_dim(x, (2, 3), (1,)), (4, 2, 3), (1, 2)), x)
    assert names(out) == ["broadcast_in_dim"] and out.eqns[0].params["broadcast_dimensions"] == (2,)
    x234 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = simplified(lambda x: lax.transpose(lax.transpose(x, (1, 2, 0)), (2, 0, 1)), x234)
    assert names(out) == []
    out = simplified(lambda x: lax.transpose(lax.transpose(x, (1, 0, 2)), (0, 2, 1)), x234)
    assert names(out) == ["transpose"] and out.eqns[0].params["permutation"] == (1, 2, 0)
    b = Builder()
    v = var((2, 3))
    out = run_pass(compiler.simplify, b.program([v], [b(sh.transpose_p, v, permutation=(0, 1))]), x234[:, :, 0])
    assert names(out) == []


@pytest.mark.parametrize("side", [0, 1], ids=["lhs", "rhs"])
@pytest.mark.parametrize("permutation", [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)])
def test_a_transposed_operand_folds_into_the_product_where_its_layout_allows(permutation, side):
    """dot_general(transpose(x, p), y) reads x itself where the free dimensions keep their order and
    each group of x's dimensions (free, contracted (1, 2)) is consecutive; else the transpose stays.
    Integer values: the sums are exact in any order, so the results are identical."""
    shape = (3, 4, 5)  # the transposed operand: free dimension 0, contracted 1 and 2
    x = np.arange(60, dtype=np.float32).reshape([shape[permutation.index(d)] for d in range(3)]) % 7 - 3
    y = np.arange(40, dtype=np.float32).reshape(4, 5, 2) % 5 - 2
    numbers = (((1, 2), (0, 1)), ((), ())) if side == 0 else (((0, 1), (1, 2)), ((), ()))

    def product(x, y):
        t = lax.transpose(x, permutation)
        return lax.dot_general(t, y, numbers) if side == 0 else lax.dot_general(y, t, numbers)

    out = simplified(product, x, y)
    contracted = [permutation[1], permutation[2]]
    folds = contracted[1] - contracted[0] == 1
    assert names(out) == (["dot_general"] if folds else ["transpose", "dot_general"])
    if folds:
        assert out.eqns[0].params["dimension_numbers"][0][side] == tuple(contracted)
    assert_identical(evaluate(out, (x, y))[0], np.asarray(ember.jit(product)(x, y)))


def test_a_transpose_that_moves_only_unit_dimensions_is_a_reshape():
    """(as the transpose rule of a product leaves them: [n, 1, k] -> [n, k, 1])"""
    x = np.arange(6, dtype=np.float32).reshape(2, 1, 3)
    out = simplified(lambda x: lax.transpose(x, (0, 2, 1)), x)
    assert names(out) == ["reshape"] and out.eqns[0].params["new_sizes"] == (2, 3, 1)
    assert_identical(evaluate(out, (x,))[0], np.transpose(x, (0, 2, 1)))
    out = simplified(lambda x: lax.reshape(lax.transpose(x, (1, 0, 2)), (6,)), x)  # then merges with the reshape
    assert names(out) == ["reshape"] and out.eqns[0].invars[0] is out.jaxpr.invars[0]
    assert names(simplified(lambda x: lax.transpose(x, (2, 1, 0)), x)) == ["transpose"]  # 2 and 3 swap


# --- control flow -----------------------------------------------------------------------------------
def test_passes_work_inside_control_flow_bodies():
    twice = ember.jit(lambda v: v * 2.0)

    def f(x, n):
        y = lax.cond(n > 2, lambda v: twice(v) * 1.0 + 0.0, lambda v: -(-v), x)
        z = lax.fori_loop(0, n, lambda i, v: jnp.exp(v) * jnp.exp(v) + lax.integer_pow(v, 1), x)
        w = lax.scan(lambda c, v: (c - 0.0, lax.reshape(lax.reshape(v, (1,)), ())), 0.0, x)[1]
        return y, z, w

    closed = ember.make_jaxpr(f)(X3, 3)
    args = (X3, 3)
    for transform in PASSES:
        run_pass(transform, closed, *args)
    out = run_pass(compiler.optimize, closed, *args)
    assert names(out) == ["gt", "convert_element_type", "cond", "while", "scan"]
    true_branch = out.eqns[2].params["branches"][1]
    assert names(true_branch) == ["mul", "add"] and names(out.eqns[2].params["branches"][0]) == []
    loop_body = out.eqns[3].params["body_jaxpr"]
    assert names(loop_body) == ["add", "exp", "mul", "add"]  # the index update, then exp computed once
    assert names(out.eqns[4].params["jaxpr"]) == []
    assert count(out) < count(closed)


def test_dce_prunes_unused_loop_carries_and_outputs():
    def f(x, n):
        def body(carry):
            i, a, b, unused = carry
            return i + 1, a + b, b * 2.0, unused - 1.0  # a needs b; nothing needs `unused`
        _, a, _, _ = lax.while_loop(lambda c: c[0] < n, body, (0, x, x, x))

        def step(carry, v):
            s, t = carry
            return (s + v, t * v), (s * v, jnp.exp(v))
        (s, _), (ys, _) = lax.scan(step, (x[0], x[1]), x)
        return a, s + ys

    closed = ember.make_jaxpr(f)(X3, 2)
    out = run_pass(compiler.eliminate_dead_code, closed, X3, 2)
    loop = next(e for e in out.eqns if e.primitive.name == "while")
    assert len(loop.outvars) == 4 - 1 and names(loop.params["body_jaxpr"]) == ["add", "add", "mul"]
    scan = next(e for e in out.eqns if e.primitive.name == "scan")
    assert scan.params["num_carry"] == 1 and len(scan.outvars) == 2
    assert names(scan.params["jaxpr"]) == ["add", "mul"]


def test_dce_keeps_carries_the_loop_condition_reads():
    def f(x):
        return lax.while_loop(lambda c: c[1] < 10.0, lambda c: (c[0] + 1.0, c[1] * 2.0), (x, 1.0))[0]

    out = run_pass(compiler.eliminate_dead_code, ember.make_jaxpr(f)(2.0), 2.0)
    assert len(out.eqns[0].outvars) == 2


def test_dce_prunes_unused_cond_outputs_and_operands():
    def f(p, x, y):
        return lax.cond(p, lambda a, b: (a + 1.0, jnp.exp(b)), lambda a, b: (a * 2.0, b), x, y)[0]

    out = run_pass(compiler.eliminate_dead_code, ember.make_jaxpr(f)(True, X3, X3), True, X3, X3)
    (cond,) = [e for e in out.eqns if e.primitive.name == "cond"]
    assert len(cond.invars) == 2 and len(cond.outvars) == 1
    assert [names(b) for b in cond.params["branches"]] == [["mul"], ["add"]]


# --- the pipeline -----------------------------------------------------------------------------------
def test_optimize_on_a_traced_program():
    def f(x):
        y = jnp.exp(x) * 1.0
        return jnp.exp(x) + y, lax.reshape(lax.reshape(x, (3, 1)), (3,)) - 0.0

    out = run_pass(compiler.optimize, ember.make_jaxpr(f)(X3), X3)
    assert names(out) == ["exp", "add"] and out.jaxpr.outvars[1] is out.jaxpr.invars[0]


def test_disabled_passes_by_argument_and_config():
    closed = ember.make_jaxpr(lambda x: x * 1.0 + x * 1.0)(X3)
    assert names(compiler.optimize(closed, disabled=("simplify",))) == ["mul", "add"]
    with ember.config.override(disabled_passes=("cse", "simplify")):
        assert names(compiler.optimize(closed)) == ["mul", "mul", "add"]
    assert names(compiler.optimize(closed, disabled="simplify")) == ["mul", "add"]
    with pytest.raises(ValueError, match=r"unknown compiler pass 'fusion'.*'inline'"):
        compiler.optimize(closed, disabled=("fusion",))


def test_every_stage_can_be_printed(capsys, monkeypatch):
    closed = ember.make_jaxpr(lambda x: -(-x))(X3)
    compiler.optimize(closed, trace_passes=True)
    err = capsys.readouterr().err
    assert err.count("--- ember IR") == 1 + len(compiler.PIPELINE)
    assert "--- ember IR after dce (0 equations) ---" in err and "neg" in err
    monkeypatch.setenv("EMBER_DUMP_IR", "1")
    compiler.optimize(closed, disabled=("fold",))
    assert capsys.readouterr().err.count("--- ember IR") == len(compiler.PIPELINE)


def test_a_pass_that_breaks_the_ir_is_named(monkeypatch):
    def breaks(closed: ClosedJaxpr) -> ClosedJaxpr:
        j = closed.jaxpr
        return ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.eqns[1:], j.outvars), closed.consts)

    monkeypatch.setattr(compiler.pipeline, "PIPELINE", [("inline", compiler.inline_calls), ("broken", breaks)])
    with pytest.raises(IRTypeError, match="after compiler pass 'broken'"):
        compiler.optimize(ember.make_jaxpr(lambda x: jnp.exp(jnp.exp(x)))(X3))


# --- random programs ---------------------------------------------------------------------------------
DTYPES = [np.float32, np.float16, np.int32, np.int16, np.int8, np.uint8, np.bool_]
SCALARS = [0, 1, -0.0, 0.0, 1.0, 2.5, True]
_affine = ember.jit(lambda a, b: (a * b + b, a - b))


def _values(rng: np.random.Generator, shape: tuple, dtype: Any) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        pool = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, np.nan, 3.0, -2.5, 1e4])
        return rng.choice(pool, size=shape).astype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    info = np.iinfo(dtype)
    return rng.choice(np.array([0, 1, 2, info.max, info.min, 7]), size=shape).astype(dtype)


def _apply(op: str, a: Any, b: Any, choice: int) -> Any:
    """One random step, written with ember.numpy / ember.lax as a user would."""
    if op == "add":
        return a + b
    if op == "mul":
        return a * b
    if op == "sub":
        return jnp.subtract(a, b)
    if op == "neg":
        return -a if a.dtype != np.bool_ else a
    if op == "exp":
        return jnp.exp(a)
    if op == "max":
        return jnp.maximum(a, b)
    if op == "convert":  # a chain of two, for the chain rules
        n = len(DTYPES)
        return a.astype(DTYPES[choice % n]).astype(DTYPES[choice // n % n])
    if op == "select":
        return jnp.where(a > b if choice % 2 else bool(choice % 3), a, b)
    if op == "broadcast":
        return jnp.broadcast_to(a, (2,) + a.shape) if a.ndim < 3 else a
    if op == "reshape":
        return lax.reshape(a, (a.size,)) if choice % 2 else lax.expand_dims(a, (0,))
    if op == "squeeze":
        return lax.squeeze(a, tuple(i for i, n in enumerate(a.shape) if n == 1))
    if op == "transpose":
        return lax.transpose(a, tuple(reversed(range(a.ndim))))
    if op == "cond":  # branches close over a Python scalar, so they keep the operand's shape
        scalar = SCALARS[choice % len(SCALARS)]
        return lax.cond(jnp.sum(jnp.asarray(b).astype(np.float32)) > 0,
                        lambda t: _apply(ELEMENTWISE[choice % 5], t, scalar, choice).astype(t.dtype),
                        lambda t: _apply(ELEMENTWISE[(choice + 1) % 5], t, scalar, choice).astype(t.dtype), a)
    if op == "while":  # three carries; one is returned, so DCE can prune the others
        def body(carry):
            i, u, v = carry
            return i + 1, jnp.maximum(u, v), (v + v).astype(v.dtype)
        return lax.while_loop(lambda carry: carry[0] < choice % 3, body, (0, a, a))[1 + choice % 2]
    if op == "scan" and a.ndim:
        def step(carry, x):
            return (carry + x).astype(carry.dtype), (jnp.maximum(carry, x), carry)
        carry, ys = lax.scan(step, lax.index_in_dim(a, 0, keepdims=False), a)
        return (carry, *ys)[choice % 3]
    if op == "jit" and a.dtype != np.bool_ and np.broadcast_shapes(a.shape, np.shape(b)) == a.shape:
        return _affine(a, jnp.broadcast_to(b, a.shape).astype(a.dtype))[choice % 2]
    return a


ELEMENTWISE = ["add", "mul", "sub", "neg", "max"]
OPS = ELEMENTWISE + ["exp", "convert", "select", "broadcast", "reshape", "squeeze", "transpose", "jit", "cond",
                     "while", "scan"]
steps = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99)),
                 min_size=1, max_size=10)


@given(shape=st.sampled_from([(), (3,), (2, 1), (1, 2, 2)]), dtypes=st.lists(st.sampled_from(DTYPES), min_size=2,
       max_size=2), steps=steps, seed=st.integers(0, 2**16))
def test_random_programs_keep_their_values_under_every_pass(shape, dtypes, steps, seed):
    rng = np.random.default_rng(seed)
    args = tuple(_values(rng, shape, dt) for dt in dtypes)
    closure = _values(rng, shape, np.float32)

    def program(x, y):
        pool = [x, y, jnp.asarray(closure)]
        for op, i, j, choice in steps:
            a = pool[i % len(pool)]
            b = pool[j % len(pool)] if choice % 4 else SCALARS[j % len(SCALARS)]
            try:
                np.broadcast_shapes(np.shape(a), np.shape(b))
            except ValueError:
                b = SCALARS[j % len(SCALARS)]
            try:
                pool.append(_apply(op, a, b, choice))
            except TypeError:  # a step the drawn dtypes do not allow, such as bool - bool
                pass
        return pool[2:]

    closed = ember.make_jaxpr(program)(*args)
    for transform in PASSES:
        run_pass(transform, closed, *args)
    optimized = run_pass(compiler.optimize, closed, *args)
    assert count(optimized) <= count(closed)


def test_simplify_logical_identities_and_custom_calls_inline():
    def f(x):
        mask = jnp.isnan(x)
        return ember.lax.bitwise_or(mask, False), ember.lax.bitwise_and(mask, True), ember.nn.relu(x)

    closed = ember.compiler.optimize(ember.make_jaxpr(f)(jnp.ones(3)))
    names = [e.primitive.name for e in closed.eqns]
    assert "or" not in names and "and" not in names
    assert "custom_jvp_call" not in names and "max" in names
