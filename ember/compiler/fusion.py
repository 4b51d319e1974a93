"""The fusion pass: group elementwise, index-remapping and reduction equations into kernels.

A kernel is one equation of the higher-order primitive ``fusion`` whose
``jaxpr`` param holds the grouped equations. Its type is the sub-program's
output type, so the printer, the type checker and the reference interpreter
need nothing special; a native backend compiles each kernel into one loop
nest that computes every element of the kernel's single output by index
arithmetic (no temporaries for the equations inside).

Grouping is producer-into-consumer, walking the program backwards: an
equation joins the kernel of its users when *all* of its users are in that
one kernel (so nothing is computed twice at the same index and no cycle can
form). Three cases keep a producer out although its users agree:

* it is a program output (kernels have one output: the root's), or a running reduction
  (``cumsum``, ...) or a scatter, which only a kernel's root computes (``ROOTS_ONLY``);
* it would be evaluated under a broadcast that re-reads each element many
  times from an inner loop (``(1024,) -> (4096, 1024)``): there a reduction
  or an expensive operation would be recomputed per reuse, so it is
  materialized instead. Broadcasts that only add trailing dimensions (row-wise
  patterns such as softmax) are free, because the backend hoists a value out
  of the loops it does not depend on;
* it would lie deeper in the kernel than ``max_depth`` (if given): more
  equations on the longest path from it to the root, or more than
  ``max_products`` products (``dot_general``) on a path. A backend whose code
  generation takes time that grows faster than a chain (LLVM's does) bounds the
  depth, so that a chain of ten thousand equations becomes a chain of kernels.
  A product reads each element of its operands once per element of the other
  operand's free dimensions, so a product computed inside another one's operand
  is recomputed that many times: nested products multiply their costs.

What may join a kernel at all is the backend's decision (``can_fuse``): the
default is every elementwise, index-remapping and reduction primitive; the CPU
backend leaves out what it cannot lower and adds small products.
"""
from __future__ import annotations

from typing import Callable

from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var
from ember.core.primitive import Primitive, abstract_eval_rules, call_params, higher_order
from ember.core.traits import CHEAP, Family, PrimitiveSet, declare
from ember.lax.convolution import sliding_windows_p
from ember.lax.dot import dot_general_p
from ember.lax.shapes import broadcast_in_dim_p

fusion_p = Primitive("fusion", multiple_results=True)
higher_order.add(fusion_p)


def _fusion_rule(*avals: ShapedArray, jaxpr: ClosedJaxpr, name: str) -> list[ShapedArray]:
    expected = jaxpr.in_avals
    if [a.strip_weak_type() for a in avals] != [e.strip_weak_type() for e in expected]:
        raise TypeError(f"fusion {name}: operands typed {list(avals)}, but its program takes {expected}")
    return jaxpr.out_avals


abstract_eval_rules[fusion_p] = _fusion_rule
declare(fusion_p)

# What joins kernels by default: the elementwise, index-remapping and reduction families (calls,
# such as ``add_any``, are inlined before fusion). Read from the traits table (core/traits.py).
FUSIBLE = PrimitiveSet("fusible primitives", lambda p, t: t.family in (
    Family.ELEMENTWISE, Family.INDEX_REMAPPING, Family.REDUCTION) and p not in call_params)

# Kernel roots only, never read by a consumer at an index: a running reduction would rescan up
# to that index, a scatter would apply all of its updates again.
ROOTS_ONLY = PrimitiveSet("kernel roots only", lambda p, t: t.family in (Family.CUMULATIVE, Family.SCATTER))


def default_can_fuse(eqn: Eqn) -> bool:
    return eqn.primitive in FUSIBLE


def _reuses_elements(eqn: Eqn) -> bool:
    """A broadcast that re-reads operand elements from an inner loop: one that expands a
    dimension lying before a dimension it keeps. Expanding only trailing dimensions (a row
    value spread over its row) reads each element within one iteration of the outer loops.
    Overlapping sliding windows read elements again too."""
    if eqn.primitive is sliding_windows_p:
        p = eqn.params
        return any(w > s for w, s in zip(p["window_dimensions"], p["window_strides"]))
    if eqn.primitive is not broadcast_in_dim_p:
        return False
    operand, out_shape = eqn.invars[0].aval, eqn.params["shape"]
    kept = {d for i, d in enumerate(eqn.params["broadcast_dimensions"])
            if operand.shape[i] == out_shape[d]}
    expanded = [d for d in range(len(out_shape)) if d not in kept and out_shape[d] != 1]
    return bool(expanded) and any(d > expanded[0] and out_shape[d] != 1 for d in kept)


def fuse(closed: ClosedJaxpr, can_fuse: Callable[[Eqn], bool] = default_can_fuse,
         max_depth: int | None = None, max_products: int | None = None) -> ClosedJaxpr:
    """``closed`` with its fusible equations grouped into ``fusion`` equations (with paths of at
    most ``max_depth`` equations and ``max_products`` products in a kernel, if given)."""
    jaxpr = closed.jaxpr
    eqns = jaxpr.eqns
    users: dict[int, list[int]] = {}
    for i, eqn in enumerate(eqns):
        for a in eqn.invars:
            if isinstance(a, Var):
                users.setdefault(id(a), []).append(i)
    outputs = {id(a) for a in jaxpr.outvars if isinstance(a, Var)}

    group_of: list[int | None] = [None] * len(eqns)  # group id = index of its root equation
    replicated = [False] * len(eqns)  # evaluated many times per element, under a reusing broadcast
    depth = [1] * len(eqns)  # equations on the longest path from each to its kernel's root, itself included
    products = [int(e.primitive is dot_general_p) for e in eqns]  # the same, counting products
    for i in reversed(range(len(eqns))):
        eqn = eqns[i]
        if not can_fuse(eqn):
            continue
        group_of[i] = i
        out = eqn.outvars[0]
        uses = users.get(id(out), [])
        if id(out) in outputs or not uses or eqn.primitive in ROOTS_ONLY:
            continue
        groups = {group_of[u] for u in uses}
        if len(groups) != 1 or None in groups:
            continue
        under_broadcast = any(replicated[u] or _reuses_elements(eqns[u]) for u in uses)
        if under_broadcast and eqn.primitive not in CHEAP:
            continue
        below = 1 + max(depth[u] for u in uses)
        nested = products[i] + max(products[u] for u in uses)
        if (max_depth is not None and below > max_depth) or (max_products is not None and nested > max_products):
            continue  # deep enough: this equation is the root of the next kernel
        group_of[i] = groups.pop()
        depth[i], products[i] = below, nested
        replicated[i] = under_broadcast

    members: dict[int, list[int]] = {}
    for i, g in enumerate(group_of):
        if g is not None:
            members.setdefault(g, []).append(i)
    new_eqns = []
    for i, eqn in enumerate(eqns):
        g = group_of[i]
        if g is None:
            new_eqns.append(eqn)
        elif g == i:
            new_eqns.append(_kernel_eqn([eqns[k] for k in members[g]], len(new_eqns)))
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, jaxpr.invars, new_eqns, jaxpr.outvars), closed.consts)


def _kernel_eqn(group: list[Eqn], position: int) -> Eqn:
    """One ``fusion`` equation computing the last equation's output from the group."""
    defined = {id(v) for e in group for v in e.outvars}
    inputs: list[Var] = []
    seen: set[int] = set()
    for e in group:
        for a in e.invars:
            if isinstance(a, Var) and id(a) not in defined and id(a) not in seen:
                seen.add(id(a))
                inputs.append(a)
    root = group[-1]
    # The sub-program gets its own input and output variables: each Var is bound once.
    fresh = {id(v): Var(v.aval) for v in inputs}
    body = [e.replace(invars=[fresh.get(id(a), a) if isinstance(a, Var) else a for a in e.invars])
            for e in group]
    body[-1] = body[-1].replace(outvars=[Var(v.aval) for v in root.outvars])
    sub = Jaxpr([], [fresh[id(v)] for v in inputs], body, list(body[-1].outvars))
    name = "_".join(dict.fromkeys(e.primitive.name for e in group))[:40]
    return Eqn(fusion_p, inputs, {"jaxpr": ClosedJaxpr(sub, []), "name": f"{name}_{position}"},
               list(root.outvars))
