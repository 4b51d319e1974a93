"""``jax.extend.core``: user-defined primitives, and the IR's types.

A ``Primitive`` made here is an ember primitive whose rules the user gives, the way JAX's
"How JAX primitives work" tutorial does: ``def_impl`` (eager evaluation and the reference
interpreter; the implementation gets ember Arrays and may use ``jnp`` or NumPy),
``def_abstract_eval`` (the shape rule), then ``jax.interpreters.ad`` / ``batching`` / ``mlir``
for derivatives, ``vmap`` and compiled code. Without a lowering, compiled programs run the
primitive's implementation in place (it is listed as a fallback by ``log_compiles``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.core import primitive as _primitive
from ember.core.array import Array
from ember.core.avals import ShapedArray
from ember.core.evaluation import impl_rules
from ember.core.ir import ClosedJaxpr, Eqn as JaxprEqn, Jaxpr, Literal, Var  # noqa: F401
from ember.core.trace import current_trace
from ember.lax.base import aval
from ember.transforms.programs import eval_closed_by_binding, eval_jaxpr_by_binding


def _shaped(aval: Any) -> ShapedArray:
    """A shape rule's result as ember's abstract value (rules may build any object with a
    shape and a dtype, e.g. ``jax.core.ShapedArray(shape, dtype)``)."""
    if isinstance(aval, ShapedArray):
        return aval
    return ShapedArray(tuple(aval.shape), np.dtype(aval.dtype), bool(getattr(aval, "weak_type", False)))


class Primitive(_primitive.Primitive):
    """A primitive whose rules are the user's (JAX's ``jax.extend.core.Primitive``)."""

    __slots__ = ()

    def def_impl(self, impl: Callable) -> Callable:
        def run(*values: np.ndarray, **params: Any) -> Any:
            out = impl(*(Array(v, ShapedArray(v.shape, v.dtype)) for v in map(np.asarray, values)), **params)
            return [np.asarray(o) for o in out] if self.multiple_results else np.asarray(out)
        impl_rules.override(self, run)  # (JAX lets a rule be given again)
        return impl

    def def_abstract_eval(self, rule: Callable) -> Callable:
        """``rule`` gets the operands' types as ``ShapedArray`` (``jax.core.ShapedArray`` itself)
        and returns the result's (or a list of them)."""
        def shape_rule(*avals: ShapedArray, **params: Any) -> Any:
            out = rule(*avals, **params)
            return [_shaped(a) for a in out] if self.multiple_results else _shaped(out)
        _primitive.abstract_eval_rules.override(self, shape_rule)
        return rule

    def def_effectful_abstract_eval(self, rule: Callable) -> Callable:
        """(``rule`` returns the avals and the effects; ember's user primitives have none.)"""
        self.def_abstract_eval(lambda *avals, **params: rule(*avals, **params)[0])
        return rule


def mapped_aval(size: int, axis: int | None, aval: ShapedArray) -> ShapedArray:
    """The type of one slice of ``aval`` along ``axis`` (None: not mapped)."""
    if axis is None:
        return aval
    return aval._replace(shape=aval.shape[:axis] + aval.shape[axis + 1:])


def unmapped_aval(size: int, axis: int | None, aval: ShapedArray, explicit_mesh_axis: Any = None) -> ShapedArray:
    """The type of ``size`` slices of type ``aval`` stacked along ``axis`` (None: not mapped)."""
    if axis is None:
        return aval
    return aval._replace(shape=aval.shape[:axis] + (size,) + aval.shape[axis:])


class Effect:
    """A side effect of an equation (a library subclasses it; ember's user primitives have none)."""


class OpaqueTraceState:
    """Which trace is current, to compare with another moment's (libraries check that state is
    changed under the transformation that made it): equal when the trace is the same."""

    def __init__(self, trace: Any) -> None:
        self._trace = trace

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, OpaqueTraceState) and other._trace is self._trace

    def __hash__(self) -> int:
        return id(self._trace)


def get_opaque_trace_state(convention: Any = None) -> OpaqueTraceState:
    return OpaqueTraceState(current_trace())


def find_top_trace(xs: Any) -> Any:
    """The trace that is current (the one a primitive bound now goes to), as in JAX 0.10, where
    the argument is no longer read."""
    return current_trace()


def get_aval(x: Any) -> ShapedArray:
    """The abstract value of an array, a tracer or a Python / NumPy value."""
    return aval(x)


def eval_jaxpr(jaxpr: Jaxpr, consts: Any, *args: Any, propagate_source_info: bool = True) -> list:
    """The outputs of ``jaxpr`` on ``args`` (each equation bound: under a trace, it is traced)."""
    return eval_jaxpr_by_binding(jaxpr, list(consts), *args)


def jaxpr_as_fun(closed: ClosedJaxpr) -> Callable:
    """The function a closed program computes (each call evaluates it on its arguments)."""
    return lambda *args: eval_closed_by_binding(closed, *args)


__all__ = ["ClosedJaxpr", "Effect", "Jaxpr", "JaxprEqn", "Literal", "Primitive", "ShapedArray", "Var", "eval_jaxpr",
           "find_top_trace", "get_aval", "get_opaque_trace_state", "jaxpr_as_fun", "mapped_aval", "unmapped_aval"]
