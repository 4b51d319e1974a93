"""Executables: what a cache hit runs. Called with flat arguments, they return a list of Arrays.

``compile_jaxpr`` asks the backend that ``config.backend`` chooses (``ember.backends.registry``)
for one; what an executable offers is ``ember.backends.protocols.Executable``. ``donated`` holds
the positions of arguments the caller gives up (``jit(donate_argnums=...)``): an executable may
write outputs into their buffers. The caller deletes those Arrays afterwards.
"""
from __future__ import annotations

from typing import Any

from ember.backends import cpu_backend, reference, registry  # noqa: F401  (each registers its backend)
from ember.backends.pjrt import backend as pjrt_backend  # noqa: F401  (registers the PJRT plugins' backends)
from ember.backends.protocols import CompileOptions, Executable
from ember.core.ir import ClosedJaxpr


def compile_jaxpr(closed: ClosedJaxpr, name: str = "fn", donated: frozenset[int] = frozenset(),
                  placement: Any = None) -> Executable:
    """An executable for ``closed`` on the backend ``config.backend`` chooses: call it with flat
    arguments, get a list of Arrays. It may write outputs into the buffers of the arguments at
    ``donated``."""
    backend = registry.get()
    why = backend.cannot_run(closed)
    if why is not None:
        raise NotImplementedError(f"the backend {backend.name!r} cannot run {name}: {why}. Choose another with "
                                  f"ember.config.update('backend', ...); registered: {list(registry.registered())}")
    return backend.compile(closed, CompileOptions(name, donated, placement))
