"""Backends turn a ClosedJaxpr into an executable: the NumPy reference interpreter, or the
native CPU backend (LLVM kernels, BLAS, and the reference for whatever it does not lower)."""
from __future__ import annotations

from ember.config import config
from ember.core.ir import ClosedJaxpr

BACKENDS = ("reference", "cpu")


def compile_jaxpr(closed: ClosedJaxpr, name: str = "fn", donated: frozenset[int] = frozenset()):
    """An executable for ``closed``: call it with flat arguments, get a list of Arrays. It may
    write outputs into the buffers of the arguments at the positions ``donated``."""
    backend = config.backend
    if backend == "reference":
        from ember.runtime.executable import ReferenceExecutable

        return ReferenceExecutable(closed, name)
    if backend == "cpu":
        from ember.runtime.executable import CpuExecutable

        return CpuExecutable(closed, name, donated)
    raise ValueError(f"unknown backend {backend!r}; available: {', '.join(map(repr, BACKENDS))}")
