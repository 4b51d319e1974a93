"""Evaluation on NumPy values: the table of reference implementations and the environment
loop that runs a program with them.

``impl_rules[p](*numpy_arrays, **params)`` returns NumPy arrays; the reference
backend (``ember.backends.reference``) fills the table, one module per primitive
family. The loop lives here, in the core, because everything above needs it:
eager operations (``apply_primitive``, called by the eval trace), constant folding
in the compiler, and every backend for what it does not compile.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember import dtypes
from ember.config import config
from ember.core.array import Array
from ember.core.avals import ShapedArray, aval_of_value
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal
from ember.core.primitive import Primitive, RuleTable, abstract_eval_rules
from ember.core.trace import EvalTrace

# Filled by ``ember.backends.reference``: one module per primitive family.
impl_rules: RuleTable = RuleTable("impl_rules")


def to_numpy(x: Any, a: ShapedArray) -> np.ndarray:
    """The NumPy value of an argument. Arrays share their (read-only) buffer; anything
    else is copied, so results never alias a buffer the caller can still write."""
    value = getattr(x, "_value", None)
    if value is not None:
        return value
    arr = np.array(x, dtype=a.dtype if type(x) in (bool, int, float, complex) else None)
    return arr if arr.dtype == a.dtype else dtypes.convert_values(arr, a.dtype)


# The result types of recent eager operations by primitive, argument types and (hashable) params:
# the shape rule runs once per signature. Emptied when the config changes (a rule may read it,
# e.g. ``enable_x64``).
_out_avals: dict[tuple, Any] = {}
_OUT_AVALS_KEPT = 4096


def apply_primitive(p: Primitive, args: Sequence[Any], params: dict) -> Any:
    """Eager evaluation: check types with the shape rule, run the impl, wrap as Arrays."""
    avals = [aval_of_value(a) for a in args]
    key = (p, *avals, *params.items()) if params else (p, *avals)
    try:
        out = _out_avals.get(key)
    except TypeError:  # a param that is not hashable (an array): the rule each time
        out = key = None
    if out is None:
        out = abstract_eval_rules[p](*avals, **params)
        if key is not None:
            if len(_out_avals) >= _OUT_AVALS_KEPT:
                _out_avals.clear()
            _out_avals[key] = out
    with np.errstate(all="ignore"):  # IEEE results (inf, NaN) are the defined semantics
        vals = impl_rules[p](*(to_numpy(x, a) for x, a in zip(args, avals)), **params)
    if p.multiple_results:
        results = [Array(as_type(v, o), o) for v, o in zip(vals, out)]
    else:
        results = Array(as_type(vals, out), out)
    if config.debug_nans or config.debug_infs:
        check_invalid_values(p.name, [r._value for r in results] if p.multiple_results else [results._value])
    return results


def check_invalid_values(where: str, values: Sequence[np.ndarray]) -> None:
    """``debug_nans`` / ``debug_infs``: a FloatingPointError naming the operation (as JAX's eager
    check does) when an inexact result holds a NaN (or an infinity)."""
    for v in values:
        if not dtypes.is_inexact(v.dtype):
            continue
        wide = v.astype(np.complex128 if dtypes.is_complex(v.dtype) else np.float64)
        if config.debug_nans and np.isnan(wide).any():
            raise FloatingPointError(f"invalid value (nan) encountered in {where}")
        if config.debug_infs and np.isinf(wide).any():
            raise FloatingPointError(f"invalid value (inf) encountered in {where}")


EvalTrace.apply = staticmethod(apply_primitive)
config.on_update(lambda _name: _out_avals.clear())


def as_type(v: Any, a: ShapedArray) -> np.ndarray:
    """``v`` as a private, C-contiguous NumPy array of the type ``a``."""
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
    return [as_type(read(a), a.aval) for a in jaxpr.outvars]


def eval_closed(closed: ClosedJaxpr, *args: Any) -> list[np.ndarray]:
    return eval_jaxpr(closed.jaxpr, closed.consts, *args)
