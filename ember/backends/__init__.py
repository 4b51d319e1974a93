"""Backends turn a ClosedJaxpr into an executable. The reference backend runs
the IR on NumPy; the native CPU backend plugs in behind the same function."""
from __future__ import annotations

from ember.config import config
from ember.core.ir import ClosedJaxpr


def compile_jaxpr(closed: ClosedJaxpr, name: str = "fn"):
    """An executable for ``closed``: call it with flat arguments, get a list of Arrays."""
    backend = config.backend
    if backend == "reference":
        from ember.runtime.executable import ReferenceExecutable

        return ReferenceExecutable(closed, name)
    raise ValueError(f"unknown backend {backend!r}; available: 'reference'")
