"""Executables: what a cache hit runs. Called with flat arguments, they return a list of Arrays."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends.reference import eval_jaxpr, to_numpy
from ember.config import config
from ember.core.ir import ClosedJaxpr
from ember.runtime.array import Array


class ReferenceExecutable:
    """Runs a program on the NumPy reference interpreter."""

    def __init__(self, closed: ClosedJaxpr, name: str) -> None:
        self.closed = closed
        self.name = name
        self.in_avals = closed.in_avals
        self.out_avals = closed.out_avals
        self.consts = [to_numpy(c, v.aval) for c, v in zip(closed.consts, closed.jaxpr.constvars)]

    def __call__(self, *args: Any) -> list[Array]:
        vals = [to_numpy(x, a) for x, a in zip(args, self.in_avals)]
        return _wrap(self.name, eval_jaxpr(self.closed.jaxpr, self.consts, *vals), self.out_avals)


class CpuExecutable:
    """Runs a program compiled by the native CPU backend (``ember.backends.cpu``)."""

    def __init__(self, closed: ClosedJaxpr, name: str) -> None:
        from ember.backends.cpu import compile_program

        self.name = name
        self.in_avals = closed.in_avals
        self.out_avals = closed.out_avals
        self.program, self.report = compile_program(closed, name)

    def __call__(self, *args: Any) -> list[Array]:
        vals = [_contiguous_numpy(x, a) for x, a in zip(args, self.in_avals)]
        return _wrap(self.name, self.program.run(vals), self.out_avals)

    def llvm_ir(self) -> str:
        """The optimized LLVM IR of the program's native code ("" if nothing compiled natively)."""
        compiled = getattr(self.program, "compiled", None)
        return "" if compiled is None else str(compiled.optimized_ir)


def _contiguous_numpy(x: Any, aval) -> np.ndarray:
    value = to_numpy(x, aval)
    return value if value.flags.c_contiguous else value.copy(order="C")


def _wrap(name: str, outs: list[np.ndarray], avals: list) -> list[Array]:
    if config.debug_nans:
        _check_nans(name, outs)
    return [Array(o, a) for o, a in zip(outs, avals)]


def _check_nans(name: str, outs: list[np.ndarray]) -> None:
    for i, o in enumerate(outs):
        if o.dtype.kind == "f" or o.dtype.name == "bfloat16":
            if np.isnan(o.astype(np.float32)).any():
                raise FloatingPointError(f"debug_nans: output {i} of {name} contains NaN")
