"""``jax.stages``: the ahead-of-time stages of a jitted function (``jit(f).trace(...)``,
``.lower()``, ``.compile()``), which are ember's (``ember.runtime.stages``)."""
from __future__ import annotations

from typing import Any

from ember.runtime.stages import ArgInfo, Compiled, Lowered, Traced


class Wrapped:
    """What ``jit`` returns: a function with ``lower`` (for annotations and ``isinstance``)."""


CompilerOptions = dict[str, Any]

__all__ = ["ArgInfo", "Compiled", "CompilerOptions", "Lowered", "Traced", "Wrapped"]
