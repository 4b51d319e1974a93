"""Dead-code elimination: drop equations and consts whose values no output needs.

The program's inputs stay (its signature does not change). Inside
sub-programs, dead equations are dropped too, and a sub-program's interface
is kept unless its primitive has a pruning rule here, because the primitive
binds the sub-program's inputs and outputs positionally. The rules:

- ``jit`` calls and ``cond`` lose unused results, and the operands only those
  needed (in every branch).
- ``scan`` loses unused stacked outputs (ys), unused consts and xs, and
  unused carries. ``while`` loses unused carries and consts. A carry is
  unused when no result needs it, the loop condition does not read it, and
  the body reads it only to compute unused carries (found by iterating to a
  fixed point). As in JAX, a loop whose results are all unused is dropped,
  even one that would never stop.
"""
from __future__ import annotations

from typing import Callable

from ember.compiler.rewrite import SubprogramRewriter, rebuild, used_vars
from ember.core.calls import jit_p
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, is_effectful
from ember.core.primitive import Primitive
from ember.lax.control_flow import cond_p, scan_p, while_p


def eliminate_dead_code(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` without dead equations and unused consts."""
    jaxpr = closed.jaxpr
    if jaxpr.facts.get("live") and used_vars(jaxpr.constvars) <= _reads(jaxpr):
        return closed
    eqns, live = _live_eqns(jaxpr.eqns, jaxpr.outvars, SubprogramRewriter(_dce_interface_kept))
    kept = [(v, c) for v, c in zip(jaxpr.constvars, closed.consts) if id(v) in live]
    new = _live(rebuild(jaxpr, eqns, jaxpr.outvars, [v for v, _ in kept]))
    return closed if new is jaxpr else ClosedJaxpr(new, [c for _, c in kept])


def _live(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr``, recorded as free of dead equations (its sub-programs too): what this pass returns,
    and what a later run of it (the reference interpreter prunes each call it runs) leaves as is."""
    jaxpr.facts["live"] = True
    return jaxpr


def _reads(jaxpr: Jaxpr) -> set[int]:
    """The ids of the variables that ``jaxpr``'s equations and outputs read (its own level only)."""
    reads = used_vars(jaxpr.outvars)
    for eqn in jaxpr.eqns:
        reads |= used_vars(eqn.invars)
    return reads


def _dce_interface_kept(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    if jaxpr.facts.get("live"):
        return jaxpr
    eqns, _ = _live_eqns(jaxpr.eqns, jaxpr.outvars, subprograms)
    return _live(rebuild(jaxpr, eqns, jaxpr.outvars))


def _live_eqns(eqns: list[Eqn], outvars: list, subprograms: SubprogramRewriter) -> tuple[list[Eqn], set[int]]:
    """The equations ``outvars`` need, and the ids of every variable they read."""
    live = used_vars(outvars)
    kept = []
    for eqn in reversed(eqns):
        needed = [id(v) in live for v in eqn.outvars]
        if not any(needed) and not is_effectful(eqn):
            continue
        prune = _PRUNERS.get(eqn.primitive)
        eqn = subprograms(eqn) if prune is None or is_effectful(eqn) else prune(eqn, needed, subprograms)
        live |= used_vars(eqn.invars)
        kept.append(eqn)
    kept.reverse()
    return kept, live


def _select(items: list, keep: list[bool]) -> list:
    return [x for x, k in zip(items, keep) if k]


def _closed_like(original: ClosedJaxpr, invars: list, eqns: list[Eqn], outvars: list) -> ClosedJaxpr:
    return ClosedJaxpr(Jaxpr(original.jaxpr.constvars, invars, eqns, outvars), original.consts)


def _prune_alternatives(programs: tuple[ClosedJaxpr, ...], needed: list[bool],
                        subprograms: SubprogramRewriter) -> tuple[list[ClosedJaxpr], list[bool]] | None:
    """Programs that share one interface (a call's body, cond's branches), cut down to the
    ``needed`` outputs and the inputs any of them still reads; None if nothing can go."""
    key = ("prune", tuple(id(p) for p in programs), tuple(needed))
    if key not in subprograms.memo:
        subprograms.memo[key] = (programs, _pruned_alternatives(programs, needed, subprograms))
    return subprograms.memo[key][1]


def _pruned_alternatives(programs: tuple[ClosedJaxpr, ...], needed: list[bool],
                         subprograms: SubprogramRewriter) -> tuple[list[ClosedJaxpr], list[bool]] | None:
    if all(needed) and all(p.jaxpr.facts.get("live") for p in programs):  # (only unread inputs can go)
        pruned = [(p.jaxpr.eqns, _reads(p.jaxpr)) for p in programs]
    else:
        pruned = [_live_eqns(p.jaxpr.eqns, _select(p.jaxpr.outvars, needed), subprograms) for p in programs]
    keep = [any(id(p.jaxpr.invars[i]) in live for p, (_, live) in zip(programs, pruned))
            for i in range(len(programs[0].jaxpr.invars))]
    if all(needed) and all(keep):
        for p, (eqns, _) in zip(programs, pruned):
            if len(eqns) == len(p.jaxpr.eqns) and all(a is b for a, b in zip(eqns, p.jaxpr.eqns)):
                _live(p.jaxpr)
        return None
    results = [_closed_like(p, _select(p.jaxpr.invars, keep), eqns, _select(p.jaxpr.outvars, needed))
               for p, (eqns, _) in zip(programs, pruned)]
    for r in results:
        _live(r.jaxpr)
    return results, keep


def _prune_call(eqn: Eqn, needed: list[bool], subprograms: SubprogramRewriter) -> Eqn:
    pruned = _prune_alternatives((eqn.params["jaxpr"],), needed, subprograms)
    if pruned is None:
        return subprograms(eqn)
    (body,), keep = pruned
    return Eqn(jit_p, _select(eqn.invars, keep), {**eqn.params, "jaxpr": body}, _select(eqn.outvars, needed))


def _prune_cond(eqn: Eqn, needed: list[bool], subprograms: SubprogramRewriter) -> Eqn:
    pruned = _prune_alternatives(eqn.params["branches"], needed, subprograms)
    if pruned is None:
        return subprograms(eqn)
    branches, keep = pruned
    index, *operands = eqn.invars
    return Eqn(cond_p, [index, *_select(operands, keep)], {**eqn.params, "branches": tuple(branches)},
               _select(eqn.outvars, needed))


def _needed_carries(body: Jaxpr, first_carry: int, carries: list[bool], others: list[bool],
                    subprograms: SubprogramRewriter) -> tuple[list[bool], list[Eqn], set[int]]:
    """Grow the needed carries until the body reads no other carry to compute them.

    ``body``'s outputs are the carries, then other outputs (``others`` says
    which are needed); its carry inputs start at ``first_carry``. Returns the
    needed carries, the body equations they need, and the variables those read.
    """
    while True:
        eqns, live = _live_eqns(body.eqns, _select(body.outvars, carries + others), subprograms)
        carry_in = body.invars[first_carry:first_carry + len(carries)]
        grown = [k or id(v) in live for k, v in zip(carries, carry_in)]
        if grown == carries:
            return carries, eqns, live
        carries = grown


def _prune_scan(eqn: Eqn, needed: list[bool], subprograms: SubprogramRewriter) -> Eqn:
    params = eqn.params
    n_consts, n_carry = params["num_consts"], params["num_carry"]
    body: Jaxpr = params["jaxpr"].jaxpr
    carries, eqns, live = _needed_carries(body, n_consts, needed[:n_carry], needed[n_carry:], subprograms)
    keep_in = [id(v) in live for v in body.invars[:n_consts]] + carries + [
        id(v) in live for v in body.invars[n_consts + n_carry:]]
    keep_out = carries + needed[n_carry:]
    if all(keep_in) and all(keep_out):
        return subprograms(eqn)
    pruned = _closed_like(params["jaxpr"], _select(body.invars, keep_in), eqns, _select(body.outvars, keep_out))
    return Eqn(scan_p, _select(eqn.invars, keep_in),
               {**params, "jaxpr": pruned, "num_consts": sum(keep_in[:n_consts]), "num_carry": sum(carries)},
               _select(eqn.outvars, keep_out))


def _prune_while(eqn: Eqn, needed: list[bool], subprograms: SubprogramRewriter) -> Eqn:
    params = eqn.params
    n_cond, n_body = params["cond_nconsts"], params["body_nconsts"]
    cond: Jaxpr = params["cond_jaxpr"].jaxpr
    body: Jaxpr = params["body_jaxpr"].jaxpr
    cond_eqns, cond_live = _live_eqns(cond.eqns, cond.outvars, subprograms)
    wanted = [n or id(v) in cond_live for n, v in zip(needed, cond.invars[n_cond:])]
    carries, eqns, live = _needed_carries(body, n_body, wanted, [], subprograms)
    keep_cond_consts = [id(v) in cond_live for v in cond.invars[:n_cond]]
    keep_body_consts = [id(v) in live for v in body.invars[:n_body]]
    if all(keep_cond_consts) and all(keep_body_consts) and all(carries):
        return subprograms(eqn)
    new_cond = _closed_like(params["cond_jaxpr"], _select(cond.invars, keep_cond_consts + carries), cond_eqns,
                            cond.outvars)
    new_body = _closed_like(params["body_jaxpr"], _select(body.invars, keep_body_consts + carries), eqns,
                            _select(body.outvars, carries))
    return Eqn(while_p, _select(eqn.invars, keep_cond_consts + keep_body_consts + carries),
               {**params, "cond_jaxpr": new_cond, "cond_nconsts": sum(keep_cond_consts),
                "body_jaxpr": new_body, "body_nconsts": sum(keep_body_consts)},
               _select(eqn.outvars, carries))


_PRUNERS: dict[Primitive, Callable[[Eqn, list[bool], SubprogramRewriter], Eqn]] = {
    jit_p: _prune_call, cond_p: _prune_cond, scan_p: _prune_scan, while_p: _prune_while}
