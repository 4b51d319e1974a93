"""``jax.core``: the public names of JAX's core that libraries use (abstract values, tracers,
primitives and programs)."""
from __future__ import annotations

from ember.compat.jax.extend.core import (
    Primitive,
    eval_jaxpr,
    get_aval,
    get_opaque_trace_state,
    jaxpr_as_fun,
    mapped_aval,
    unmapped_aval,
)
from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Jaxpr
from ember.core.trace import Tracer

__all__ = ["ClosedJaxpr", "Jaxpr", "Primitive", "ShapedArray", "Tracer", "eval_jaxpr", "get_aval",
           "get_opaque_trace_state", "jaxpr_as_fun", "mapped_aval", "unmapped_aval"]
