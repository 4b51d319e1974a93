"""A static cost model of a program: floating-point operations and bytes moved.

Counts follow the usual conventions (as XLA's cost analysis): an elementwise
operation costs one flop per output element, a transcendental one also counts
under ``transcendentals``, a reduction one flop per input element, and a
contraction two flops per multiply-add. ``bytes accessed`` sums every
equation's operands and results, i.e. the traffic of the unfused program.
Loops multiply their body's cost by the trip count when it is static
(``scan``); a ``while`` body is counted once, since its trip count is unknown.
"""
from __future__ import annotations

import math
from typing import Any

from ember.core.ir import ClosedJaxpr, Jaxpr

_TRANSCENDENTAL = {"exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan", "asin",
                   "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "cbrt", "erf",
                   "erfc", "erf_inv", "lgamma", "digamma", "pow", "atan2"}
_FREE = {"broadcast_in_dim", "reshape", "squeeze", "convert_element_type", "bitcast_convert_type", "iota",
         "transpose", "rev", "slice", "concatenate", "pad", "dynamic_slice", "dynamic_update_slice", "gather"}


def _nbytes(aval: Any) -> int:
    return aval.size * aval.dtype.itemsize


def cost_analysis(program: ClosedJaxpr | Jaxpr) -> dict[str, float]:
    """``{'flops', 'transcendentals', 'bytes accessed'}`` of ``program``."""
    jaxpr = program.jaxpr if isinstance(program, ClosedJaxpr) else program
    totals = {"flops": 0.0, "transcendentals": 0.0, "bytes accessed": 0.0}
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        totals["bytes accessed"] += sum(_nbytes(a.aval) for a in eqn.invars) + sum(
            _nbytes(v.aval) for v in eqn.outvars)
        out_size = sum(v.aval.size for v in eqn.outvars)
        if name == "dot_general":
            (lhs_contract, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval
            contracted = math.prod(lhs.shape[d] for d in lhs_contract)
            totals["flops"] += 2.0 * out_size * contracted
        elif name in ("scan", "while", "cond", "jit") or "jaxpr" in eqn.params or "branches" in eqn.params:
            inner = _subprogram_cost(eqn)
            for k in totals:
                totals[k] += inner[k]
        elif name.startswith(("reduce_", "argm", "cum")):
            totals["flops"] += sum(a.aval.size for a in eqn.invars)
        elif name == "sort":
            n = eqn.invars[0].aval.size
            totals["flops"] += n * max(math.log2(max(n, 2)), 1.0)
        elif name not in _FREE:
            totals["flops"] += out_size
            if name in _TRANSCENDENTAL:
                totals["transcendentals"] += out_size
    return totals


def _subprogram_cost(eqn: Any) -> dict[str, float]:
    params = eqn.params
    if "branches" in params:  # cond: the most expensive branch
        costs = [cost_analysis(b) for b in params["branches"]]
        return max(costs, key=lambda c: c["flops"])
    programs = [v for k, v in params.items() if isinstance(v, (ClosedJaxpr, Jaxpr))]
    totals = {"flops": 0.0, "transcendentals": 0.0, "bytes accessed": 0.0}
    trips = params.get("length", 1)
    for p in programs:
        c = cost_analysis(p)
        for k in totals:
            totals[k] += c[k] * trips
    return totals
