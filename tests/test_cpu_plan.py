"""The CPU backend's plan (``ember.backends.cpu.plan``): slots, the arena of temporaries, fresh
outputs, donations and where outputs come from, built by hand without LLVM."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import given, strategies as st

import ember
from ember.backends.cpu.plan import ALIGNMENT, Plan, aligned
from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal, Var

PLAN_SOURCE = Path(__file__).resolve().parent.parent / "ember" / "backends" / "cpu" / "plan.py"
F32 = np.dtype(np.float32)


@dataclass
class Step:
    """A step as the plan sees one: operands, results, and whether its results get buffers."""
    ins: list
    outs: list
    planned: bool = True


def aval(*shape: int, dtype=F32) -> ShapedArray:
    return ShapedArray(shape, np.dtype(dtype))


def program(inputs: list[ShapedArray], consts: list[np.ndarray] = ()) -> tuple[Plan, list[Var]]:
    """A plan with slots for ``consts`` and ``inputs`` (and their variables), no steps."""
    constvars = [Var(aval(*c.shape, dtype=c.dtype)) for c in consts]
    invars = [Var(a) for a in inputs]
    return Plan.of(ClosedJaxpr(Jaxpr(constvars, invars, [], []), list(consts))), constvars + invars


def test_the_plan_is_built_and_run_without_llvm():
    """plan.py loaded alone, with llvmlite unimportable: it plans a program, and no module of the
    native backend (nor LLVM) is imported on the way."""
    script = textwrap.dedent(f"""
        import importlib.util, sys
        sys.modules["llvmlite"] = None  # (any import of it fails)
        import numpy as np
        import ember
        spec = importlib.util.spec_from_file_location("cpu_plan", {str(PLAN_SOURCE)!r})
        plan_module = sys.modules["cpu_plan"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(plan_module)
        closed = ember.make_jaxpr(lambda x: x * 2.0)(np.ones(3, np.float32))
        plan = plan_module.Plan.of(closed)

        class Step:
            planned = True
            def __init__(self, ins, outs):
                self.ins, self.outs = ins, outs
        eqn, = closed.jaxpr.eqns
        plan.steps.append(Step([plan.atom(a) for a in eqn.invars], [plan.slot(v) for v in eqn.outvars]))
        plan.pointwise_reads[0] = {{0}}  # (x read at the element written only)
        plan.finish(closed.jaxpr.outvars, frozenset([0]))
        assert plan.output_sources() == [("fresh", 0)], plan.output_sources()
        native = sorted(m for m in sys.modules if m.split(".")[:3] == ["ember", "backends", "cpu"]
                        or m.startswith("llvmlite"))
        assert sys.modules["llvmlite"] is None and native == ["llvmlite"], native
        print("planned", plan.reuses)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=PLAN_SOURCE.parents[3])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "planned [(1, 0)]"  # the doubled input's buffer takes the result


def test_constants_come_first_then_inputs_then_values_and_a_variable_keeps_its_slot():
    c = np.arange(4, dtype=np.float32).reshape(2, 2).T  # (not C-contiguous: the plan makes it so)
    plan, (cv, x, y) = program([aval(3), aval(2)], [c])
    assert plan.constants == 1 and plan.in_slots == [1, 2]
    np.testing.assert_array_equal(plan.template[0], c)
    assert plan.template[0].flags.c_contiguous and plan.template[1:] == [None, None]
    t = Var(aval(3))
    assert plan.slot(t) == 3 == plan.slot(t) and plan.slot_avals[3] == aval(3)
    assert plan.slot(x) == 1 and plan.atom(y) == 2
    literal = plan.atom(Literal(2.5, aval()))
    assert isinstance(literal, np.ndarray) and literal.dtype == F32 and literal == 2.5


def test_a_temporary_reuses_the_block_of_one_no_longer_read():
    plan, (x,) = program([aval(100)])
    a, b, c, out = (Var(aval(100)) for _ in range(4))
    sa, sb, sc = plan.slot(a), plan.slot(b), plan.slot(c)
    plan.steps += [Step([0], [sa]), Step([sa], [sb]), Step([sb], [sc]), Step([sc], [plan.slot(out)])]
    plan.finish([out])
    block = aligned(100 * 4)
    assert block == 448 and block % ALIGNMENT == 0
    offsets = {slot: offset for slot, offset, _ in plan.arena_views}
    # a dies at step 1 (b is written then: not over a), so c takes a's block
    assert offsets == {sa: 0, sb: block, sc: 0} and plan.arena_bytes == 2 * block
    assert plan.allocations == [(plan.slot(out), aval(100))]  # the output: a fresh array of its own
    assert plan.output_sources() == [("fresh", 0)]


def test_blocks_of_other_sizes_are_not_shared_and_viewed_temporaries_live_to_the_end():
    plan, (x,) = program([aval(16)])
    a, small, view, b, out = Var(aval(16)), Var(aval(4)), Var(aval(4, 4)), Var(aval(16)), Var(aval(16))
    sa, ss, sv, sb = (plan.slot(v) for v in (a, small, view, b))
    plan.steps += [Step([0], [sa]), Step([sa], [sv], planned=False),  # a view of a: a stays alive
                   Step([0], [ss]), Step([ss], [sb]), Step([sb, sv], [plan.slot(out)])]
    plan.finish([out])
    offsets = {slot: offset for slot, offset, _ in plan.arena_views}
    assert sv not in offsets  # a view's result is its operand's buffer
    assert len(set(offsets.values())) == 3  # a (viewed), small (another size), b (a still viewed)
    assert plan.arena_bytes == 3 * ALIGNMENT
    assert plan.last_uses()[sa] == len(plan.steps)


def test_outputs_that_are_inputs_constants_or_literals_get_no_buffer():
    c = np.ones(3, np.float32)
    plan, (cv, x) = program([aval(3)], [c])
    out = Var(aval(3))
    plan.steps.append(Step([1, 0], [plan.slot(out)]))
    plan.finish([x, cv, Literal(7, aval(dtype=np.int32)), out])
    sources = plan.output_sources()
    assert [kind for kind, _ in sources] == ["input", "constant", "constant", "fresh"]
    assert sources[0][1] == 0 and sources[1][1] is plan.template[0] and sources[2][1] == 7 and sources[3][1] == 0
    assert plan.allocations == [(plan.slot(out), aval(3))]


def test_an_output_that_views_a_temporary_has_no_dispatchable_source():
    plan, (x,) = program([aval(4)])
    t, v = Var(aval(4)), Var(aval(2, 2))
    plan.steps += [Step([0], [plan.slot(t)]), Step([plan.slot(t)], [plan.slot(v)], planned=False)]
    plan.finish([v])
    assert plan.output_sources() is None and not plan.allocations


def donation_plan(pointwise: bool = True, later_read: bool = False, shape=(8,)) -> Plan:
    """out = step(x), the input x donated; x read only at the element written if ``pointwise``;
    a second step reads x after that one if ``later_read``."""
    plan, (x,) = program([aval(8)])
    out, other = Var(aval(*shape)), Var(aval(3))
    plan.steps.append(Step([0], [plan.slot(out)]))
    if pointwise:
        plan.pointwise_reads[0] = {0}
    if later_read:
        plan.steps.append(Step([0], [plan.slot(other)]))
    plan.finish([out, other] if later_read else [out], frozenset([0]))
    return plan


def test_a_donated_input_takes_an_output_where_that_is_safe():
    plan = donation_plan(pointwise=True)
    assert plan.reuses == [(1, 0)] and plan.reused_inputs == {0} and not plan.unusable_donations
    # an output computed after the last read of x takes it too, whatever reads x
    plan, (x,) = program([aval(8)])
    t, out = Var(aval(3)), Var(aval(8))
    plan.steps += [Step([0], [plan.slot(t)]), Step([plan.slot(t)], [plan.slot(out)])]
    plan.finish([out], frozenset([0]))
    assert plan.reuses == [(plan.slot(out), 0)] and not plan.unusable_donations


def test_a_donated_input_read_elsewhere_later_or_of_another_shape_is_taken_but_not_reused():
    """Its type decides whether the call takes (deletes) it, as in JAX; whether its buffer is
    written over is the plan's choice."""
    for plan in (donation_plan(pointwise=False), donation_plan(later_read=True), donation_plan(shape=(2, 4))):
        assert not plan.reuses and plan.reused_inputs == frozenset()
        assert plan.unusable_donations == [] and plan.kept_donations == frozenset()
        assert [kind for kind, _ in plan.output_sources()] == ["fresh"] * len(plan.out_atoms)


def test_a_donated_input_no_output_can_take_is_unusable():
    plan = donation_plan(shape=(3,))
    assert not plan.reuses and plan.unusable_donations == [aval(8)] and plan.kept_donations == {0}


def test_a_donated_input_returned_as_it_is_counts_as_used():
    plan, (x, y) = program([aval(3), aval(3)])
    plan.finish([x, y], frozenset([0, 1]))
    assert not plan.reuses and not plan.unusable_donations
    assert plan.output_sources() == [("input", 0), ("input", 1)]


def test_the_plan_prints_its_steps_and_buffers():
    closed = ember.make_jaxpr(lambda x: (x * 2.0, x))(np.ones(3, np.float32))
    plan = Plan.of(closed)
    t = Var(aval(3))
    plan.steps.append(Step([0, np.float32(2.0)], [plan.slot(t)]))
    plan.finish([t, closed.jaxpr.invars[0]], frozenset([0]))
    text = str(plan)
    assert "inputs s0; constants -" in text and "0: step(s0, 2.0) -> s1" in text
    assert "outputs s1, s0" in text and "s1 fresh f32[3]" in text


@st.composite
def step_chains(draw):
    """Random programs: each step reads one to three earlier values and writes one of a few
    sizes; some steps are views (not planned); some values are outputs."""
    n = draw(st.integers(1, 14))
    sizes = [draw(st.sampled_from([1, 16, 17, 64, 300])) for _ in range(n)]
    reads = [draw(st.lists(st.integers(0, i), min_size=1, max_size=3)) for i in range(n)]  # 0: the input
    views = [draw(st.booleans()) and i > 0 and draw(st.booleans()) for i in range(n)]
    outputs = draw(st.sets(st.integers(1, n), max_size=3)) | {n}
    return sizes, reads, views, outputs


@given(step_chains())
def test_temporaries_alive_at_the_same_time_never_share_bytes(chain):
    sizes, reads, views, outputs = chain
    plan, (x,) = program([aval(8)])
    values = [0]  # slots: the input, then each step's result
    for size, read, view in zip(sizes, reads, views):
        result = plan.slot(Var(aval(size)))
        plan.steps.append(Step([values[r] for r in read], [result], planned=not view))
        values.append(result)
    out_slots = {values[i] for i in outputs}
    plan.finish([_var_of(plan, s) for s in sorted(out_slots)])
    last = plan.last_uses()
    written = {out: i for i, step in enumerate(plan.steps) for out in step.outs}
    views_ = {(slot, offset, a.size * a.dtype.itemsize) for slot, offset, a in plan.arena_views}
    for slot, offset, nbytes in views_:
        assert slot not in out_slots and offset % ALIGNMENT == 0 and offset + nbytes <= plan.arena_bytes
    for s, so, sn in views_:
        for t, to, tn in views_:
            if s < t and not (last.get(s, written[s]) < written[t] or last.get(t, written[t]) < written[s]):
                assert so + sn <= to or to + tn <= so, f"s{s} and s{t} overlap while both alive"
    planned = {out for step in plan.steps if step.planned for out in step.outs}
    assert {slot for slot, _ in plan.allocations} == planned & out_slots
    assert {slot for slot, _, _ in plan.arena_views} == planned - out_slots


def _var_of(plan: Plan, slot: int) -> Var:
    """A variable standing for ``slot`` (as ``finish`` takes the program's output variables)."""
    v = Var(plan.slot_avals[slot])
    plan.slots[id(v)] = slot
    _KEEP.append(v)  # (its id must not be reused while the plan maps it)
    return v


_KEEP: list[Var] = []
