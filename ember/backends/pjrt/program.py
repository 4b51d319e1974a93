"""A traced program compiled for a PJRT client: its StableHLO, the loaded executable, and its
constants, copied to the device once."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.backends.pjrt.binding import Buffer, Client, Executable
from ember.backends.pjrt.lowering import lower_module
from ember.core.evaluation import to_numpy
from ember.core.ir import ClosedJaxpr


class Program:
    """``closed`` lowered and compiled on ``client``. ``@main`` takes the constants, then the
    arguments; ``execute`` passes the constants' device buffers itself."""

    def __init__(self, client: Client, closed: ClosedJaxpr, name: str = "main",
                 donated: frozenset[int] = frozenset()) -> None:
        jaxpr = closed.jaxpr
        self.client, self.name = client, name
        self.in_avals, self.out_avals = closed.in_avals, closed.out_avals
        self.text = lower_module(closed, name, sorted(donated))
        self.donated = frozenset(donated)
        params = list(jaxpr.constvars) + list(jaxpr.invars)
        self.executable: Executable = client.compile(self.text, [(v.aval.shape, v.aval.dtype) for v in params])
        self.consts = [client.buffer_from_host(to_numpy(c, v.aval)) for c, v in zip(closed.consts, jaxpr.constvars)]
        self._shift = len(self.consts)

    def execute(self, arguments: Sequence[Buffer], donated: frozenset[int] = frozenset()) -> list[Buffer]:
        """Run on device buffers (asynchronously: the outputs' ``block_until_ready`` waits)."""
        shifted = frozenset(i + self._shift for i in donated)
        return self.executable.execute([*self.consts, *arguments], shifted)

    def __call__(self, *values: Any) -> list[np.ndarray]:
        """Host values in (of the types ``in_avals`` says), host values out."""
        buffers = [self.client.buffer_from_host(to_numpy(v, a)) for v, a in zip(values, self.in_avals)]
        return [b.to_host() for b in self.execute(buffers)]
