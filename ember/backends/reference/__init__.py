"""The NumPy reference interpreter: the executable specification of every primitive.

``impl_rules[p](*numpy_arrays, **params)`` returns NumPy arrays. Eager
operations call ``apply_primitive`` (shape/dtype rule, then the impl);
jitted programs run ``eval_jaxpr`` over their IR. Every other backend is
tested against this one.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.api import jit_p
from ember.core.avals import ShapedArray, aval_of_value
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal
from ember.core.primitive import Primitive, abstract_eval_rules
from ember.lax.conversions import convert_values

# The rules live in one module per primitive family (imported at the end).
impl_rules: dict[Primitive, Callable[..., Any]] = {}


# --- the interpreter ---------------------------------------------------------------------
def to_numpy(x: Any, a: ShapedArray) -> np.ndarray:
    """The NumPy value of an argument. Arrays share their (read-only) buffer; anything
    else is copied, so results never alias a buffer the caller can still write."""
    value = getattr(x, "_value", None)
    if value is not None:
        return value
    arr = np.array(x, dtype=a.dtype if type(x) in (bool, int, float) else None)
    return arr if arr.dtype == a.dtype else convert_values(arr, a.dtype)


def apply_primitive(p: Primitive, args: Sequence[Any], params: dict) -> Any:
    """Eager evaluation: check types with the shape rule, run the impl, wrap as Arrays."""
    from ember.runtime.array import Array

    avals = [aval_of_value(a) for a in args]
    out = abstract_eval_rules[p](*avals, **params)
    with np.errstate(all="ignore"):  # IEEE results (inf, NaN) are the defined semantics
        vals = impl_rules[p](*(to_numpy(x, a) for x, a in zip(args, avals)), **params)
    if p.multiple_results:
        return [Array(_as_type(v, o), o) for v, o in zip(vals, out)]
    return Array(_as_type(vals, out), out)


def _as_type(v: Any, a: ShapedArray) -> np.ndarray:
    v = np.asarray(v)
    if v.dtype != a.dtype:
        v = v.astype(a.dtype)
    if v.shape != a.shape:  # rank-0 results of broadcasting rules, e.g. select_n with scalar cases
        v = np.broadcast_to(v, a.shape)
    if not v.flags.owndata or not v.flags.c_contiguous:
        v = np.array(v, order="C")  # a private, contiguous copy (also of views of inputs)
    return v


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], *args: Any) -> list[np.ndarray]:
    """Run a program on NumPy values: the environment loop every IR consumer shares."""
    env: dict[int, Any] = {}

    def read(a: Any) -> Any:
        return np.asarray(a.val) if isinstance(a, Literal) else env[id(a)]

    for v, x in zip(jaxpr.constvars, consts):
        env[id(v)] = to_numpy(x, v.aval)
    for v, x in zip(jaxpr.invars, args):
        env[id(v)] = x
    with np.errstate(all="ignore"):  # IEEE results (inf, NaN) are the defined semantics
        for eqn in jaxpr.eqns:
            outs = impl_rules[eqn.primitive](*map(read, eqn.invars), **eqn.params)
            if not eqn.primitive.multiple_results:
                outs = (outs,)
            for v, o in zip(eqn.outvars, outs):
                o = np.asarray(o)
                env[id(v)] = o if o.dtype == v.aval.dtype else o.astype(v.aval.dtype)
    return [_as_type(read(a), a.aval) for a in jaxpr.outvars]


def _call(*args: Any, jaxpr: ClosedJaxpr, name: str) -> list[np.ndarray]:
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


impl_rules[jit_p] = _call


def eval_closed(closed: ClosedJaxpr, *args: Any) -> list[np.ndarray]:
    return eval_jaxpr(closed.jaxpr, closed.consts, *args)




from ember.backends.reference import (  # noqa: E402,F401  (register rules)
    control_flow, convolution, dot, elementwise, indexing, linalg, reductions, shapes,
)
from ember.compiler.fusion import fusion_p  # noqa: E402  (after impl_rules: the compiler reads it)

impl_rules[fusion_p] = _call  # a fused kernel runs as its sub-program
