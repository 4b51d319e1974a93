"""``jax.core``: the public names of JAX's core that libraries use (abstract values, tracers,
primitives and programs, and the current trace)."""
from __future__ import annotations

from typing import Any, Union

from ember.compat.jax.extend.core import (
    Primitive,
    eval_jaxpr,
    find_top_trace,
    get_aval,
    get_opaque_trace_state,
    jaxpr_as_fun,
    mapped_aval,
    unmapped_aval,
)
from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal, Var
from ember.core.trace import Trace, Tracer
from ember.utilities import ensure_compile_time_eval  # noqa: F401

# What an equation's operand is: a variable of the program or a literal constant.
Atom = Union[Var, Literal]
# An equation's parameters.
ParamDict = dict[str, Any]
# A value a primitive computes on (an array, a tracer, a Python scalar).
Value = Any
# The base of abstract values (ember has one kind: ``ShapedArray``).
AbstractValue = ShapedArray

__all__ = ["AbstractValue", "Atom", "ClosedJaxpr", "Jaxpr", "ParamDict", "Primitive", "ShapedArray", "Trace", "Tracer",
           "Value", "ensure_compile_time_eval", "eval_jaxpr", "find_top_trace", "get_aval", "get_opaque_trace_state",
           "jaxpr_as_fun", "mapped_aval", "unmapped_aval"]
