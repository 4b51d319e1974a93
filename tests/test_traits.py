"""Primitive traits (``ember.core.traits``): one record per primitive, the sets derived from them,
the one cost model; and rule tables that refuse a second rule for a primitive."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.numpy as jnp
from ember import lax
from ember.compat.jax.extend.core import Primitive as UserPrimitive
from ember.compiler import fusion
from ember.compiler.cost import cost_analysis
from ember.core import traits
from ember.core.evaluation import impl_rules
from ember.core.primitive import DuplicateRule, Primitive, ReplacingView, RuleTable, abstract_eval_rules
from ember.core.traits import Cost, Family, equation_cost
from ember.lax import elementwise as ew
from ember.runtime import tiers


def _names(primitives):
    return {p.name for p in primitives}


# --- rule tables ---------------------------------------------------------------------------------
def test_a_second_rule_for_a_primitive_is_refused_naming_both_registrants():
    table = RuleTable("test_rules")
    p = Primitive("twice")
    table[p] = lambda: "first"
    with pytest.raises(DuplicateRule) as caught:
        table[p] = lambda: "second"
    message = str(caught.value)
    assert message.startswith("test_rules: a second rule for primitive twice (from test_traits:")
    assert "the first came from test_traits:" in message
    assert "use test_rules.override(twice, rule) where replacing it is meant" in message
    assert table[p]() == "first"
    with pytest.raises(DuplicateRule, match="a second rule for primitive twice"):
        table.update({p: lambda: "third"})
    assert table.setdefault(p, lambda: "fourth")() == "first"


def test_the_tables_of_ember_refuse_a_second_rule():
    with pytest.raises(DuplicateRule, match=r"impl_rules: a second rule for primitive sin .*the first came from "
                                            r"ember\.backends\.reference\.elementwise:\d+"):
        impl_rules[ew.sin_p] = np.sin


def test_an_explicit_override_replaces_the_rule():
    table = RuleTable("test_rules")
    p = Primitive("replaced")
    table[p] = "first"
    table.override(p, "second")
    assert table[p] == "second" and table.registrant(p).endswith("(override)")
    with table.overriding(p, "for a while"):
        assert table[p] == "for a while"
    assert table[p] == "second"
    q = Primitive("new")
    with table.overriding(q, "for a while"):
        assert table[q] == "for a while"
    assert q not in table


def test_jit_has_one_reference_rule():
    """(It had two: the reference backend's, replaced silently by the runtime's at import.)"""
    assert impl_rules.registrant(ember.api.jit_p).startswith("ember.backends.reference.executable:")


def test_jax_s_tables_replace_a_rule_given_again():
    from ember.compat.jax.interpreters import ad

    assert isinstance(ad.primitive_jvps, ReplacingView)
    p = UserPrimitive("user_double")
    p.def_impl(lambda x: x * 2)
    p.def_impl(lambda x: x * 3)  # (JAX lets a rule be given again)
    p.def_abstract_eval(lambda x: x)
    assert float(p.bind(jnp.float32(2.0))) == 6.0
    ad.primitive_jvps[p] = lambda primals, tangents: (p.bind(*primals), p.bind(*tangents))
    ad.primitive_jvps[p] = lambda primals, tangents: (p.bind(*primals), 3 * p.bind(*tangents))
    assert ad.primitive_jvps[p] is ad.primitive_jvps.table[p] and p in ad.primitive_jvps
    _, tangent = ember.jvp(p.bind, (jnp.float32(1.0),), (jnp.float32(1.0),))
    assert float(tangent) == 9.0
    for table in (impl_rules, abstract_eval_rules, ad.primitive_jvps.table):
        del table[p]


# --- the records ---------------------------------------------------------------------------------
def test_every_primitive_has_a_trait_record():
    missing = sorted(p.name for p in abstract_eval_rules
                     if p not in traits.traits and not isinstance(p, UserPrimitive))
    assert not missing, ("primitives without a trait record (declare one where the primitive is defined: "
                         f"lax.base.primitive(..., family=...) or core.traits.declare): {missing}")


def test_a_trait_record_is_declared_once():
    with pytest.raises(DuplicateRule, match="traits: a second rule for primitive add"):
        traits.declare(ew.add_p, Family.ELEMENTWISE)


def test_the_families():
    assert {"add", "exp", "select_n", "convert_element_type", "stop_gradient", "add_any"} <= _names(traits.ELEMENTWISE)
    assert {"reshape", "transpose", "pad", "concatenate", "iota", "sliding_windows"} <= _names(traits.INDEX_REMAPPING)
    assert _names(traits.REDUCTIONS) == {"reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_and",
                                         "reduce_or", "reduce_xor"}
    assert _names(traits.CUMULATIVE) == {"cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"}
    assert _names(traits.SCATTERS) == {"scatter", "scatter-add", "scatter-sub", "scatter-mul", "scatter-min",
                                       "scatter-max"}
    for other in ("dot_general", "argmax", "bitcast_convert_type", "gather", "dynamic_slice", "scan", "jit"):
        assert traits.traits_of(next(p for p in abstract_eval_rules if p.name == other)).family is Family.OTHER
    assert lax.ELEMENTWISE is traits.ELEMENTWISE and ew.add_p in lax.ELEMENTWISE


def test_fusion_s_sets_derive_from_the_records():
    assert {"add", "exp", "sharding_constraint", "reshape", "broadcast_in_dim", "iota", "sliding_windows",
            "reduce_sum", "reduce_max"} <= _names(fusion.FUSIBLE)
    assert not {"add_any", "bitcast_convert_type", "cumsum", "scatter-add", "dot_general", "argmax", "gather",
                "dynamic_slice", "sort"} & _names(fusion.FUSIBLE)
    assert _names(fusion.ROOTS_ONLY) == _names(traits.CUMULATIVE) | _names(traits.SCATTERS)
    # Cheap enough to recompute under a broadcast: the plain arithmetic, comparisons and every
    # index remapping; not a division or a transcendental function.
    assert {"add", "mul", "neg", "max", "select_n", "convert_element_type", "lt", "round", "iota", "reshape",
            "sliding_windows"} <= _names(traits.CHEAP)
    assert not {"div", "exp", "sqrt", "pow", "integer_pow", "reduce_sum"} & _names(traits.CHEAP)


def test_the_lowering_keeps_the_transcendental_values():
    pytest.importorskip("llvmlite")
    from ember.backends.cpu import lowering

    assert lowering.EXPENSIVE is traits.TRANSCENDENTAL
    assert {"exp", "log", "tanh", "logistic", "sin", "erf", "cbrt", "pow", "atan2"} <= _names(lowering.EXPENSIVE)
    assert not {"sqrt", "rsqrt", "add", "div", "nextafter"} & _names(lowering.EXPENSIVE)


def test_a_new_primitive_s_record_joins_the_derived_sets_and_leaves_with_it():
    p = Primitive("new_elementwise")
    assert p not in traits.ELEMENTWISE and p not in fusion.FUSIBLE
    traits.declare(p, Family.ELEMENTWISE, cheap=True)
    try:
        assert p in traits.ELEMENTWISE and p in fusion.FUSIBLE and p in traits.CHEAP
    finally:
        del traits.traits[p]
    assert p not in traits.ELEMENTWISE and p not in fusion.FUSIBLE


def test_the_views_follow_every_change_of_the_table():
    p = Primitive("popped")
    for remove in (lambda: traits.traits.pop(p), lambda: traits.traits.__delitem__(p)):
        traits.declare(p, Family.REDUCTION)
        assert p in traits.REDUCTIONS and p in fusion.FUSIBLE
        remove()
        assert p not in traits.REDUCTIONS and p not in fusion.FUSIBLE and traits.traits_of(p) is traits.OTHER
    table = RuleTable("test_rules", {p: "rule"})
    table.clear()
    table[p] = "again"  # (cleared: a first registration)
    assert table[p] == "again"


def test_having_refuses_a_trait_that_is_not_boolean():
    with pytest.raises(ValueError, match="not a boolean trait: 'family' \\(linear, cheap or transcendental\\)"):
        traits.having("family")


# --- the cost model ------------------------------------------------------------------------------
def _eqn(f, *args, primitive):
    closed = ember.make_jaxpr(f)(*args)
    return next(e for e in closed.jaxpr.eqns if e.primitive.name == primitive), closed


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9), st.integers(1, 3))
def test_a_product_costs_two_flops_per_multiply_add(m, n, k, batch):
    a, b = np.ones((batch, m, k), np.float32), np.ones((batch, k, n), np.float32)
    eqn, closed = _eqn(lambda a, b: lax.batch_matmul(a, b), a, b, primitive="dot_general")
    assert equation_cost(eqn) == Cost(2.0 * batch * m * n * k)
    assert cost_analysis(closed)["flops"] == 2.0 * batch * m * n * k


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.sampled_from([1, 2]), st.integers(1, 3), st.integers(1, 3),
       st.integers(3, 6), st.sampled_from([1, 2]))
def test_a_convolution_costs_two_flops_per_multiply_add(batch, in_per_group, groups, out_per_group, window, size,
                                                        stride):
    """N x O x H' x W' outputs, each the sum over its group's input features and the window."""
    in_features, out_features = in_per_group * groups, out_per_group * groups
    x = np.ones((batch, in_features, size, size + 1), np.float32)
    w = np.ones((out_features, in_per_group, window, window), np.float32)

    def conv(x, w):
        return lax.conv_general_dilated(x, w, (stride, stride), "VALID", feature_group_count=groups)

    eqn, closed = _eqn(conv, x, w, primitive="conv_general_dilated")
    out_h, out_w = (size - window) // stride + 1, (size + 1 - window) // stride + 1
    multiply_adds = batch * out_features * out_h * out_w * in_per_group * window * window
    assert eqn.outvars[0].aval.shape == (batch, out_features, out_h, out_w)
    assert equation_cost(eqn) == Cost(2.0 * multiply_adds)
    assert cost_analysis(closed)["flops"] == 2.0 * multiply_adds
    # The reference interpreter's estimate (tiered compilation) reads the same count.
    ns = tiers.REFERENCE_NS_PER_ELEMENT * math.prod(eqn.outvars[0].aval.shape) \
        + tiers.REFERENCE_NS_PER_FLOP[lax.conv_general_dilated_p] * 2.0 * multiply_adds
    assert tiers.reference_ms(closed.jaxpr) == pytest.approx(tiers.REFERENCE_MS_PER_EQN + ns * 1e-6)


def test_the_cost_of_the_other_kinds():
    x = np.ones((4, 8), np.float32)
    cost = cost_analysis(ember.make_jaxpr(lambda x: jnp.exp(x))(x))
    assert cost["flops"] == 32 and cost["transcendentals"] == 32
    cost = cost_analysis(ember.make_jaxpr(lambda x: lax.sqrt(x))(x))  # (counted as XLA counts it)
    assert cost["flops"] == 32 and cost["transcendentals"] == 32
    assert cost_analysis(ember.make_jaxpr(lambda x: x.T.reshape(8, 4))(x))["flops"] == 0
    assert cost_analysis(ember.make_jaxpr(lambda x: x.sum(axis=1))(x))["flops"] == 32
    assert cost_analysis(ember.make_jaxpr(lambda x: jnp.argmax(x, axis=1))(x))["flops"] == 32
    window = ember.make_jaxpr(lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 1), "VALID"))(x)
    assert cost_analysis(window)["flops"] == 3 * 6 * 2 * 3  # one addition per element of each window
