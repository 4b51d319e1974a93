"""How many times the transformations trace the user's Python function, against JAX: libraries
count traces with a side effect and assert JAX's numbers (``grad(jit(f))`` traces ``f`` once, a
second call with the same types not at all). Each case runs under ember and under JAX in this
process, with a counter the traced functions bump."""
from __future__ import annotations

from typing import Any, Callable

import pytest

import ember

jax = pytest.importorskip("jax")


class Lib:
    """One library's modules (ember's or JAX's) and the trace counter."""

    def __init__(self, top: Any) -> None:
        self.top, self.m, self.lax = top, top.numpy, top.lax
        self.traces = 0

    def counted(self, weight: int = 1) -> Callable:
        """A fresh function ``sin(x) * x`` that counts its traces (by ``weight``)."""
        def f(x):
            self.traces += weight
            return self.m.sin(x) * x
        return f


def _scan(lib: Lib, init: Any = 1.0) -> Callable:
    def body(c, a):
        lib.traces += 1
        return c * a, c
    return lambda xs: lib.lax.scan(body, init, xs)


def _nested_scans(lib: Lib) -> Callable:
    def inner(c, a):
        lib.traces += 1
        return c * a, None

    def outer(c, row):
        lib.traces += 100
        return c + lib.lax.scan(inner, 1.0, row)[0], None
    return lambda rows: lib.lax.scan(outer, 0.0, rows)[0]


def _fori_promoted(lib: Lib) -> Callable:
    """A weakly typed int init the body makes float: its dtype changes, so JAX traces again."""
    def body(i, c):
        lib.traces += 1
        return c + 0.5
    return lambda x: lib.lax.fori_loop(0, 3, body, 0) * x


def _scan_checkpointed(lib: Lib) -> Callable:
    def body(c, a):
        lib.traces += 1
        return lib.m.sin(c) * a, c
    return lambda xs: lib.lax.scan(lib.top.checkpoint(body), lib.m.float32(1.0), xs)[0]


def _cond(lib: Lib) -> Callable:
    true, false = lib.counted(1), lib.counted(100)
    return lambda x: lib.lax.cond(x > 0, true, false, x)


def _custom_jvp(lib: Lib) -> Callable:
    @lib.top.custom_jvp
    def f(x):
        lib.traces += 1
        return lib.m.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        lib.traces += 100
        return lib.m.sin(primals[0]), lib.m.cos(primals[0]) * tangents[0]
    return f


def _custom_vjp(lib: Lib) -> Callable:
    @lib.top.custom_vjp
    def f(x):
        lib.traces += 1
        return lib.m.sin(x)

    def fwd(x):
        lib.traces += 100
        return lib.m.sin(x), x

    def bwd(x, g):
        lib.traces += 10000
        return (lib.m.cos(x) * g,)
    f.defvjp(fwd, bwd)
    return f


def _inner_twice(lib: Lib) -> Callable:
    inner = lib.top.jit(lib.counted())
    return lib.top.jit(lambda x: inner(x) + inner(x * 2))



def _lower_then_call(lib: Lib, x: Any) -> None:
    f = lib.top.jit(lib.counted())
    f.lower(x)
    f(x)


def _linearized(lib: Lib, x: Any) -> Any:
    return lib.top.linearize(lib.top.jit(lib.counted()), x)[1](x)


# name -> (lib, a float32 scalar, a float32 vector) -> anything; each builds fresh functions
CASES: dict[str, Callable] = {
    "jit": lambda lib, x, v: lib.top.jit(lib.counted())(x),
    "jit, called twice": lambda lib, x, v: [f(x) for f in [lib.top.jit(lib.counted())] for _ in range(2)],
    "grad(jit(f))": lambda lib, x, v: lib.top.grad(lib.top.jit(lib.counted()))(x),
    "grad(jit(f)), twice": lambda lib, x, v: [lib.top.grad(f)(x) for f in [lib.top.jit(lib.counted())]
                                              for _ in range(2)],
    "jit(grad(f))": lambda lib, x, v: lib.top.jit(lib.top.grad(lib.counted()))(x),
    "jit(grad(f)), twice": lambda lib, x, v: [f(x) for f in [lib.top.jit(lib.top.grad(lib.counted()))]
                                              for _ in range(2)],
    "jvp(jit(f))": lambda lib, x, v: lib.top.jvp(lib.top.jit(lib.counted()), (x,), (x,)),
    "jvp(jit(f)), twice": lambda lib, x, v: [lib.top.jvp(f, (x,), (x,)) for f in [lib.top.jit(lib.counted())]
                                             for _ in range(2)],
    "linearize(jit(f))": lambda lib, x, v: _linearized(lib, x),
    "jit(jit(f))": lambda lib, x, v: lib.top.jit(lib.top.jit(lib.counted()))(x),
    "grad(jit(jit(f)))": lambda lib, x, v: lib.top.grad(lib.top.jit(lib.top.jit(lib.counted())))(x),
    "vmap(jit(f))": lambda lib, x, v: lib.top.vmap(lib.top.jit(lib.counted()))(v),
    "jit(vmap(f))": lambda lib, x, v: lib.top.jit(lib.top.vmap(lib.counted()))(v),
    "value_and_grad(jit(f))": lambda lib, x, v: lib.top.value_and_grad(lib.top.jit(lib.counted()))(x),
    "jit(value_and_grad(f))": lambda lib, x, v: lib.top.jit(lib.top.value_and_grad(lib.counted()))(x),
    "grad(jit(checkpoint(f)))": lambda lib, x, v: lib.top.grad(lib.top.jit(lib.top.checkpoint(lib.counted())))(x),
    "jit(grad(checkpoint(f)))": lambda lib, x, v: lib.top.jit(lib.top.grad(lib.top.checkpoint(lib.counted())))(x),
    "grad(jit(custom_jvp))": lambda lib, x, v: lib.top.grad(lib.top.jit(_custom_jvp(lib)))(x),
    "jit(grad(custom_jvp))": lambda lib, x, v: lib.top.jit(lib.top.grad(_custom_jvp(lib)))(x),
    "grad(jit(custom_vjp))": lambda lib, x, v: lib.top.grad(lib.top.jit(_custom_vjp(lib)))(x),
    "jit(grad(custom_vjp))": lambda lib, x, v: lib.top.jit(lib.top.grad(_custom_vjp(lib)))(x),
    "scan": lambda lib, x, v: _scan(lib)(v),
    "jit(scan)": lambda lib, x, v: lib.top.jit(_scan(lib))(v),
    "jit(scan), a float32 init": lambda lib, x, v: lib.top.jit(_scan(lib, lib.m.float32(1)))(v),
    "grad(jit(scan))": lambda lib, x, v: lib.top.grad(lambda v: lib.top.jit(_scan(lib))(v)[0])(v),
    "jit(grad(scan))": lambda lib, x, v: lib.top.jit(lib.top.grad(lambda v: _scan(lib)(v)[0]))(v),
    "scan in scan": lambda lib, x, v: lib.top.jit(_nested_scans(lib))(lib.m.ones((2, 3))),
    "fori_loop, an init the body promotes": lambda lib, x, v: lib.top.jit(_fori_promoted(lib))(x),
    "vmap(jit(scan))": lambda lib, x, v: lib.top.vmap(lib.top.jit(_scan(lib)))(lib.m.ones((2, 3))),
    "grad(jit(scan(checkpoint)))": lambda lib, x, v: lib.top.grad(lib.top.jit(_scan_checkpointed(lib)))(v),
    "jit(cond)": lambda lib, x, v: lib.top.jit(_cond(lib))(x),
    "grad(jit(cond))": lambda lib, x, v: lib.top.grad(lib.top.jit(_cond(lib)))(x),
    "vmap(jit(cond))": lambda lib, x, v: lib.top.vmap(lib.top.jit(_cond(lib)))(v),
    "a jitted function called twice in a jitted one": lambda lib, x, v: _inner_twice(lib)(x),
    "grad of it": lambda lib, x, v: lib.top.grad(_inner_twice(lib))(x),
    "jit(grad of it)": lambda lib, x, v: lib.top.jit(lib.top.grad(_inner_twice(lib)))(x),
    "lower, then a call": lambda lib, x, v: _lower_then_call(lib, x),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_function_is_traced_as_many_times_as_jax_traces_it(case):
    counts = []
    for top in (ember, jax):
        lib = Lib(top)
        CASES[case](lib, lib.m.float32(1.5), lib.m.arange(3.0))
        counts.append(lib.traces)
    ours, theirs = counts
    assert ours == theirs, f"ember traced {ours} times, JAX {theirs}"
