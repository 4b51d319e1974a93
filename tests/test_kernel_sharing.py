"""Kernels and loops are compiled once per process: a program calls the code an earlier program
compiled for the same computation (``ember.backends.cpu.codegen``: ``lend`` / ``borrow``).

The constants in these programs are unusual on purpose, so that no other test compiles the
same code; each test starts with empty caches and an empty registry.
"""
import ctypes
import gc
import logging
import threading
import weakref

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import registry

pytestmark = pytest.mark.skipif(registry.get().name != "cpu", reason="sharing native code is the CPU backend's")

if registry.get().name == "cpu":
    from ember.backends.cpu import codegen as program, entry, jit as llvm_jit
    from ember.backends.cpu_backend import CpuExecutable


@pytest.fixture(autouse=True)
def empty_caches():
    ember.clear_caches()  # (jitted programs here compile: no executable of an earlier test is reused)
    program.clear()
    yield
    program.clear()


@pytest.fixture
def x():
    return np.random.default_rng(11).standard_normal((64, 64)).astype(np.float32)


def compile_cpu(f, *args):
    return CpuExecutable(ember.make_jaxpr(f)(*args), getattr(f, "__name__", "f"))


def shared(a):  # the kernel the programs below have in common
    return jnp.tanh(a) * 0.8125 + a


def lender(a):
    return shared(a)


def summed(y):
    return y.sum(axis=0) * 1.0625


def borrower(a):  # the shared kernel, then a reduction of its result: two kernels
    y = shared(a)
    return y, summed(y)


def want_shared(a):
    return np.tanh(a) * np.float32(0.8125) + a


def defines(exe, name: str) -> bool:
    compiled = exe.program.compiled
    return compiled is not None and f'define void @"{name}"(' in compiled.source


def address(fn) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value


def compile_log(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.getMessage().startswith("ember cpu: compiled"))


def test_a_kernel_compiled_by_one_program_is_called_by_another(x):
    first = compile_cpu(lender, x)
    second = compile_cpu(borrower, x)
    (kernel,) = first.report.kernels
    borrowed, own = second.report.kernels
    assert second.report.compiled_before == {borrowed} and own not in second.report.compiled_before
    assert defines(first, kernel) and not defines(second, borrowed) and defines(second, own)
    assert second.program.borrowed == [first.program.compiled]
    assert address(second.program.steps[0].fn) == address(first.program.steps[0].fn)  # the very function
    y, total = second(x)
    np.testing.assert_allclose(np.asarray(y), want_shared(x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(total), want_shared(x).sum(axis=0) * np.float32(1.0625), rtol=1e-5)


def test_the_compile_log_counts_the_kernels_compiled_before(x, caplog):
    with ember.config.override(log_compiles=True), caplog.at_level(logging.WARNING, logger="ember"):
        ember.jit(lender)(x)
        caplog.clear()
        ember.jit(borrower)(x)
    log = compile_log(caplog)
    assert "2 fused kernels (1 compiled before)" in log
    assert "(compiled before)" in log.splitlines()[1]  # the native line marks it


def test_a_program_whose_code_was_all_compiled_before_compiles_no_module(x, caplog):
    compile_cpu(borrower, x)
    exe = compile_cpu(lender, x)
    assert exe.program.compiled is None and exe.report.code == "reused" and len(exe.program.borrowed) == 1
    assert "codegen" not in exe.report.times and "compile" not in exe.report.times  # (nothing to generate)
    assert exe.llvm_ir() == ""  # its code is in the lender's module
    np.testing.assert_allclose(np.asarray(exe(x)[0]), want_shared(x), rtol=1e-6)
    with ember.config.override(log_compiles=True), caplog.at_level(logging.WARNING, logger="ember"):
        np.testing.assert_allclose(np.asarray(ember.jit(lender)(x)), want_shared(x), rtol=1e-6)
    assert "1 fused kernels (1 compiled before)" in compile_log(caplog)


def test_what_the_code_depends_on_is_in_the_key(x):
    compile_cpu(lender, x)
    other_constant = compile_cpu(lambda a: jnp.tanh(a) * 0.8126 + a, x)
    other_type = compile_cpu(lender, x.astype(np.float16) if llvm_jit.float16_supported() else x[:, :32].copy())
    other_shape = compile_cpu(lambda a: jnp.tanh(a.T) * 0.8125 + a, x)  # (a transpose: not elementwise)
    for exe in (other_constant, other_type, other_shape):
        assert not exe.report.compiled_before and exe.program.compiled is not None


def test_code_compiled_without_optimization_is_not_lent():
    small = np.linspace(-1, 1, 8, dtype=np.float32)
    large = np.linspace(-1, 1, 64 * 64, dtype=np.float32).reshape(64, 64)
    quick = compile_cpu(lender, small)
    assert quick.program.compiled.quick
    # Optimization levels are per kernel: in a program with large kernels too, a kernel of few
    # elements is compiled unoptimized (in a module of its own), and is not lent either.
    mixed = compile_cpu(lambda a, b: (shared(a), jnp.sin(b) * 1.0625), small, large)
    assert not mixed.report.compiled_before
    assert sorted(m.quick for m in mixed.program.modules) == [False, True]
    again = compile_cpu(borrower, small)
    assert not again.report.compiled_before
    np.testing.assert_allclose(np.asarray(again(small)[0]), want_shared(small), rtol=1e-6)
    # The optimized one is lent.
    sine = compile_cpu(lambda b: jnp.sin(b) * 1.0625, large)
    assert sine.report.compiled_before == set(sine.report.kernels) and sine.program.compiled is None


def test_borrowed_code_outlives_the_lenders_cache_entry(x):
    old = ember.config.jit_cache_max_entries
    ember.config.update("jit_cache_max_entries", 1)
    try:
        f = ember.jit(lambda a: lender(a))  # (fresh functions: their caches go with them)
        f(x)
        g = ember.jit(lambda a: borrower(a))
        g(x)
        lent = weakref.ref(compile_cpu(lender, x).program.borrowed[0])  # the first program's module
        for k in range(3):  # other programs push it out of the caches of modules and executables
            ember.jit(lambda a, k=k: jnp.cos(a) * (k + 0.375))(x)
        del f
        gc.collect()
        assert all(m is not lent() for m in llvm_jit._compiled.values())
        assert lent() is not None  # kept by the program that calls its code
        a = jnp.asarray(x)
        for _ in range(3):  # the general path, then the native dispatcher
            y, total = g(a)
            np.testing.assert_allclose(np.asarray(y), want_shared(x), rtol=1e-6)
            np.testing.assert_allclose(np.asarray(total), want_shared(x).sum(axis=0) * np.float32(1.0625),
                                       rtol=1e-5)
        del g
        gc.collect()
        assert lent() is None  # nothing holds it any more: freed, and no longer lent
        assert not compile_cpu(borrower, x).report.compiled_before
    finally:
        ember.config.update("jit_cache_max_entries", old)


def test_clear_caches_forgets_the_code_lent(x):
    ember.jit(lender)(x)
    g = ember.jit(borrower)
    g(x)
    ember.clear_caches()
    gc.collect()
    exe = compile_cpu(borrower, x)
    assert not exe.report.compiled_before  # the lenders went with the caches: compiled anew
    y, total = g(x)
    np.testing.assert_allclose(np.asarray(y), want_shared(x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(total), want_shared(x).sum(axis=0) * np.float32(1.0625), rtol=1e-5)


def test_the_native_dispatcher_runs_borrowed_kernels(x):
    entry.dispatcher()  # built now (in a running program it is built in the background)
    ember.jit(lender)(x)
    f = ember.jit(borrower)
    a = jnp.asarray(x)
    for _ in range(4):  # the general path, then the dispatcher
        y, total = f(a)
        np.testing.assert_allclose(np.asarray(y), want_shared(x), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(total), want_shared(x).sum(axis=0) * np.float32(1.0625), rtol=1e-5)
    ((_, cached),) = f._fast.values()  # the calls went through the dispatcher
    assert cached.executable.report.compiled_before


def test_one_plan_calls_the_code_of_several_modules(x):
    entry.dispatcher()
    first = compile_cpu(lender, x)
    second = compile_cpu(lambda a: (y := jnp.sin(a) * 0.4375, summed(y)), x)
    f = ember.jit(borrower)
    a = jnp.asarray(x)
    for _ in range(4):
        y, total = f(a)
        np.testing.assert_allclose(np.asarray(y), want_shared(x), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(total), want_shared(x).sum(axis=0) * np.float32(1.0625), rtol=1e-5)
    ((_, cached),) = f._fast.values()
    program = cached.executable.program
    assert program.compiled is None and program.plan is not None
    assert {id(m) for m in program.borrowed} == {id(first.program.compiled), id(second.program.compiled)}


def test_native_loops_are_shared(x):
    def body(i, c):
        return jnp.sin(c) * 0.6875 + 0.125 * c

    first = compile_cpu(lambda c: lax.fori_loop(0, 7, body, c), x)
    second = compile_cpu(lambda c: lax.fori_loop(0, 7, body, c) * 2.0 + 1.0, x)
    assert len(first.report.loops) == 1 and second.report.compiled_before == set(second.report.loops)
    assert second.report.kernels and not second.report.compiled_before & set(second.report.kernels)
    want = x.copy()
    for _ in range(7):
        want = np.sin(want) * np.float32(0.6875) + np.float32(0.125) * want
    np.testing.assert_allclose(np.asarray(second(x)[0]), want * 2 + 1, rtol=1e-5, atol=1e-6)
    # another trip count is other code
    assert not compile_cpu(lambda c: lax.fori_loop(0, 8, body, c), x).report.compiled_before


def test_programs_compiled_from_two_threads_at_once(x):
    programs = [lender, borrower, lambda a: shared(a) * 0.5, lambda a: (shared(a) - 1.0).sum()] * 2
    results: list = [None] * len(programs)

    def compile_and_run(i: int) -> None:
        exe = compile_cpu(programs[i], x)
        results[i] = [np.asarray(v) for v in exe(x)]

    threads = [threading.Thread(target=compile_and_run, args=(i,)) for i in range(len(programs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = want_shared(x)
    np.testing.assert_allclose(results[0][0], want, rtol=1e-6)
    np.testing.assert_allclose(results[1][1], want.sum(axis=0) * np.float32(1.0625), rtol=1e-5)
    np.testing.assert_allclose(results[2][0], want * 0.5, rtol=1e-6)
    np.testing.assert_allclose(results[3][0], (want - 1).sum(), rtol=1e-4)
    for a, b in zip(results[:4], results[4:]):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)
