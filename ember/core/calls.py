"""The call primitives: equations whose param holds a sub-program applied to the operands.

They live in the core because every layer above interprets them: the reference
interpreter and the CPU backend run them, the passes inline and prune them, and
the transformations differentiate and batch them. What each one means is in
those layers' rule tables; here are only the names and their shape rules.

* ``jit``: a nested jitted function (param ``jaxpr``).
* ``custom_jvp_call`` / ``custom_vjp_call``: a function with user-defined
  derivatives (param ``call``; the rules travel in the other params).
* ``custom_vmap_call``: a ``custom_vmap`` function (param ``call``; its batching rule in ``rule``).
  Forward it is its body; ``vmap`` runs the user's rule instead.
* ``custom_vjp_lin``: the linear part of a ``custom_vjp`` function under
  differentiation; its transpose is the user's ``bwd``. It has no forward meaning.
* ``remat2`` (``checkpoint_p``): a ``checkpoint`` / ``remat`` function (param ``jaxpr``,
  plus ``prevent_cse``, ``differentiated`` and ``policy``), JAX's ``remat_p`` of that name.
  Forward it is its body; partial evaluation saves only what ``policy`` allows and
  recomputes the rest (``ember.transforms.rules.calls``).
* ``name``: ``checkpoint_name``'s identity, naming a value for the policies.
* ``optimization_barrier``: the identity on its operands that no pass looks through; the
  compiler puts one before the body of a differentiated ``checkpoint`` with ``prevent_cse``
  when it inlines it, so that CSE does not merge the recomputation with the forward pass.
"""
from __future__ import annotations

from typing import Any

from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Eqn, name_first, print_rules
from ember.core.primitive import Primitive, abstract_eval_rules, call_params, higher_order
from ember.core.traits import declare


def _call_out_avals(what: str, avals: tuple, jaxpr: ClosedJaxpr) -> list[ShapedArray]:
    """A call's result types, once its arguments are checked against the callee's (weak types aside)."""
    expected = jaxpr.in_avals
    if len(avals) != len(expected) or any(a.strip_weak_type() != e.strip_weak_type()
                                           for a, e in zip(avals, expected)):
        raise TypeError(f"{what}: arguments typed {list(avals)}, expected {expected}")
    return jaxpr.out_avals


def _jit_rule(*avals: ShapedArray, jaxpr: ClosedJaxpr, name: str) -> list[ShapedArray]:
    return _call_out_avals(f"jit call of {name}", avals, jaxpr)


jit_p = Primitive("jit", multiple_results=True)
abstract_eval_rules[jit_p] = _jit_rule
declare(jit_p, linear=True)
higher_order.add(jit_p)
call_params[jit_p] = "jaxpr"


class CallName(str):
    """A ``jit`` call's ``name`` param, with the options of the ``jit`` that made the call, which
    JAX prints beside it (``donated_invars``, one per operand, ``keep_unused``). They change
    nothing inside a program (ember donates at top-level calls only), so they ride on the name,
    which every rule passes on as it is, rather than as params every rule would have to know."""

    donated_invars: tuple[bool, ...] = ()
    keep_unused: bool = False

    def __new__(cls, name: str, donated_invars: tuple[bool, ...] = (), keep_unused: bool = False) -> "CallName":
        self = super().__new__(cls, name)
        self.donated_invars, self.keep_unused = donated_invars, keep_unused
        return self


def _jit_params(eqn: Eqn) -> dict:
    params = dict(eqn.params)
    name = params["name"]
    donated = getattr(name, "donated_invars", ())
    if any(donated) and len(donated) == len(eqn.invars):  # (not once a transformation changed the operands)
        params["donated_invars"] = donated
    if getattr(name, "keep_unused", False):
        params["keep_unused"] = True
    return name_first(params)


print_rules[jit_p] = _jit_params


def _custom_call_rule(*avals: ShapedArray, call: ClosedJaxpr, **params: Any) -> list[ShapedArray]:
    return call.out_avals


def _custom_call_primitive(name: str) -> Primitive:
    p = Primitive(name, multiple_results=True)
    abstract_eval_rules[p] = _custom_call_rule
    higher_order.add(p)
    call_params[p] = "call"  # once differentiation is done, the call is just its body
    return declare(p)


custom_jvp_call_p = _custom_call_primitive("custom_jvp_call")
custom_vjp_call_p = _custom_call_primitive("custom_vjp_call")
custom_vmap_call_p = _custom_call_primitive("custom_vmap_call")

custom_vjp_lin_p = Primitive("custom_vjp_lin", multiple_results=True)
abstract_eval_rules[custom_vjp_lin_p] = lambda *avals, out_avals, **params: list(out_avals)
declare(custom_vjp_lin_p, linear=True)


def _checkpoint_rule(*avals: ShapedArray, jaxpr: ClosedJaxpr, prevent_cse: Any, differentiated: bool,
                     policy: Any) -> list[ShapedArray]:
    return _call_out_avals("checkpoint call", avals, jaxpr)


checkpoint_p = Primitive("remat2", multiple_results=True)
abstract_eval_rules[checkpoint_p] = _checkpoint_rule
higher_order.add(checkpoint_p)
call_params[checkpoint_p] = "jaxpr"
declare(checkpoint_p, linear=True)

name_p = Primitive("name")
abstract_eval_rules[name_p] = lambda aval, *, name: aval
declare(name_p, linear=True)

optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True)
abstract_eval_rules[optimization_barrier_p] = lambda *avals: list(avals)
declare(optimization_barrier_p)
