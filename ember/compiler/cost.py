"""A static cost model of a program: floating-point operations and bytes moved.

Each equation's operations come from its primitive's trait record (``core/traits.py``
``equation_cost``), the one model that ``runtime/tiers.py`` reads too. The counts follow the usual
conventions (as XLA's cost analysis): an elementwise operation costs one flop per output
element, a transcendental one also counts under ``transcendentals``, a reduction one flop per
input element, a contraction two flops per multiply-add (a product of M x K and K x N: 2 M N K;
a convolution: 2 times its outputs times the kernel's input features and window), and moving
data costs nothing. ``bytes accessed`` sums every equation's operands and results, i.e. the
traffic of the unfused program. Loops multiply their body's cost by the trip count when it is
static (``scan``); a ``while`` body is counted once, since its trip count is unknown.
"""
from __future__ import annotations

from typing import Any

from ember.core.ir import ClosedJaxpr, Jaxpr
from ember.core.traits import equation_cost


def _nbytes(aval: Any) -> int:
    return aval.size * aval.dtype.itemsize


def cost_analysis(program: ClosedJaxpr | Jaxpr) -> dict[str, float]:
    """``{'flops', 'transcendentals', 'bytes accessed'}`` of ``program``."""
    jaxpr = program.jaxpr if isinstance(program, ClosedJaxpr) else program
    totals = {"flops": 0.0, "transcendentals": 0.0, "bytes accessed": 0.0}
    for eqn in jaxpr.eqns:
        totals["bytes accessed"] += sum(_nbytes(a.aval) for a in eqn.invars) + sum(
            _nbytes(v.aval) for v in eqn.outvars)
        if "jaxpr" in eqn.params or "branches" in eqn.params or any(
                isinstance(v, (ClosedJaxpr, Jaxpr)) for v in eqn.params.values()):
            inner = _subprogram_cost(eqn)
            for k in totals:
                totals[k] += inner[k]
            continue
        cost = equation_cost(eqn)
        totals["flops"] += cost.flops
        totals["transcendentals"] += cost.transcendentals
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
