"""``jax.interpreters.ad``: derivative rules of primitives, in JAX's conventions, which are
ember's: a jvp rule is ``rule(primals, tangents, **params) -> (primal_out, tangent_out)`` (a
tangent may be a symbolic ``Zero``), a transpose rule ``rule(ct, *operands, **params)`` gets its
linear operands as ``UndefinedPrimal`` and returns one cotangent per operand (None for the
others). ``primitive_jvps`` and ``primitive_transposes`` are ember's own tables."""
from __future__ import annotations

from typing import Any, Callable

from ember.core.primitive import Primitive, ReplacingView
from ember.transforms.jvp import JVPTrace, JVPTracer, defjvp, jvp_rules
from ember.transforms.tangents import Zero, instantiate
from ember.transforms.transpose import UndefinedPrimal, is_undefined as is_undefined_primal, transpose_rules

# JAX's tables, in which a rule given again replaces the one before.
primitive_jvps = ReplacingView(jvp_rules)
primitive_transposes = ReplacingView(transpose_rules)


def instantiate_zeros(tangent: Any) -> Any:
    """A symbolic zero as an array of zeros; any other tangent as it is."""
    return instantiate(tangent)


def zeros_like_aval(aval: Any) -> Any:
    return instantiate(Zero(aval))


def deflinear(primitive: Primitive, transpose_rule: Callable) -> None:
    """``primitive`` is linear in all its operands: its tangent is itself applied to the
    tangents, and ``transpose_rule(ct, **params)`` gives the operands' cotangents."""
    def jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple[Any, Any]:
        return primitive.bind(*primals, **params), primitive.bind(*map(instantiate, tangents), **params)
    primitive_jvps[primitive] = jvp
    primitive_transposes[primitive] = lambda ct, *operands, **params: transpose_rule(ct, **params)


def deflinear2(primitive: Primitive, transpose_rule: Callable) -> None:
    """As ``deflinear``, with ``transpose_rule(ct, *operands, **params)``."""
    deflinear(primitive, lambda ct, **params: None)
    primitive_transposes[primitive] = transpose_rule


__all__ = ["JVPTrace", "JVPTracer", "UndefinedPrimal", "Zero", "defjvp", "deflinear", "deflinear2", "instantiate_zeros",
           "is_undefined_primal", "primitive_jvps", "primitive_transposes", "zeros_like_aval"]
