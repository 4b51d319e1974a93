"""The CPU backend's stages (``ember.backends.cpu.STAGES``): run in order, each timed, each
printed by ``EMBER_DUMP_IR``, the switchable ones switched off by ``config.disabled_passes``."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import compiler, lax
from ember.backends import cpu
from ember.backends.reference import eval_jaxpr
from ember.compiler import pipeline
from ember.core.verify import IRTypeError

NAMES = ["broadcasts", "expand", "optimize", "products", "fuse", "plan", "codegen", "compile", "link"]
X = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)


def f(x):
    return jnp.sum(jnp.tanh(x) * 2.0 + jnp.sin(x), axis=1)


def compiled(fun, *args, name="f"):
    closed = ember.make_jaxpr(fun)(*args)
    program, report = cpu.compile_program(closed, name)
    want = eval_jaxpr(closed.jaxpr, closed.consts, *args)
    got = program.run([np.ascontiguousarray(a) for a in args])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return program, report


@pytest.fixture(autouse=True)
def fresh_code():
    ember.clear_caches()  # (no kernel compiled before: every stage has work to do)
    yield


def test_the_stages_are_one_list_in_order_and_each_is_timed():
    assert [s.name for s in cpu.STAGES] == NAMES
    assert {s.name for s in cpu.STAGES if s.switchable} == set(pipeline.BACKEND_STAGES)
    _, report = compiled(f, X)
    ran = NAMES[1:]  # (f broadcasts no size-1 dimension: the broadcasts stage has nothing to do, and is not timed)
    assert list(report.times) == ran and all(t >= 0 for t in report.times.values())
    times = cpu.format_report("f", report).splitlines()[0].split("; ")[1]
    assert [part.split(" ")[0] for part in times.split(", ")] == ran  # "expand 0.1 ms, optimize ..."
    _, report = compiled(lambda x: jnp.tanh(x) + x[:1], X)  # (a [1, 6] operand of an add of [4, 6])
    assert list(report.times) == NAMES


def test_every_stage_is_printed_by_ember_dump_ir(monkeypatch, capsys):
    monkeypatch.setenv("EMBER_DUMP_IR", "1")
    program, _ = compiled(f, X)
    err = capsys.readouterr().err
    for title in ["f: traced (", *(f"f: after {n}" for n in NAMES if n not in ("optimize", "broadcasts")),
                  *(f"after {name} (" for name, _ in compiler.PIPELINE)]:  # (optimize: after each pass)
        assert f"--- ember IR {title}" in err, title
    fused = err.split("f: after fuse (1 equations) ---\n")[1].split("--- ember IR")[0]
    assert "fusion[" in fused and "tanh" in fused
    plan_text = err.split("f: after plan ---\n")[1].split("\n---")[0]
    assert plan_text == str(program.step_plan) and "kernel f0_" in plan_text and "fresh f32[4]" in plan_text
    assert "define " in err.split("f: after codegen")[1].split("--- ember IR")[0]  # the LLVM IR
    assert "runs by the native dispatcher" in err.split("f: after link")[1]


def test_ember_dump_ir_prints_the_stages_it_names_and_refuses_unknown_names(monkeypatch, capsys):
    monkeypatch.setenv("EMBER_DUMP_IR", "plan,link")
    compiled(f, X)
    titles = [line for line in capsys.readouterr().err.splitlines() if line.startswith("--- ember IR")]
    assert titles == ["--- ember IR f: after plan ---", "--- ember IR f: after link ---"]
    monkeypatch.setenv("EMBER_DUMP_IR", "plan,fusion")
    with pytest.raises(ValueError, match=r"EMBER_DUMP_IR names unknown stage 'fusion'.*'plan', 'codegen'"):
        compiled(f, X)


def test_switching_fusion_off_runs_the_equations_on_the_reference_interpreter():
    with ember.config.override(disabled_passes=("fuse",)):
        program, report = compiled(f, X)
    assert "fuse" not in report.times and not report.kernels
    assert sorted(report.fallbacks) == ["add", "mul", "reduce_sum", "sin", "tanh"]
    assert compiler.optimize(ember.make_jaxpr(f)(X), disabled=("fuse",)).eqns  # (a name optimize leaves alone)


def test_switching_expansion_off_leaves_a_convolution_to_the_reference_interpreter():
    x = np.linspace(-1, 1, 2 * 3 * 8 * 8, dtype=np.float32).reshape(2, 3, 8, 8)
    w = np.linspace(-1, 1, 4 * 3 * 3 * 3, dtype=np.float32).reshape(4, 3, 3, 3)

    def conv(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME")
    _, expanded = compiled(conv, x, w)
    assert "conv_general_dilated" not in expanded.fallbacks
    with ember.config.override(disabled_passes=("expand",)):
        _, kept = compiled(conv, x, w)
    assert kept.fallbacks == ["conv_general_dilated"] and "expand" not in kept.times


def test_a_stage_that_breaks_the_ir_is_named(monkeypatch):
    def broken(c):
        j = c.closed.jaxpr
        c.closed = type(c.closed)(type(j)(j.constvars, j.invars, j.eqns[1:], j.outvars), c.closed.consts)
    stages = [cpu.Stage(s.name, broken, s.shows) if s.name == "products" else s for s in cpu.STAGES]
    monkeypatch.setattr(cpu, "STAGES", stages)
    with ember.config.override(check_ir=True), \
            pytest.raises(IRTypeError, match="after the CPU backend's stage 'products'"):
        cpu.compile_program(ember.make_jaxpr(f)(X), "f")
