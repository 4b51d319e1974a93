"""Tangent values: symbolic zeros, zero instantiation and addition.

A tangent that is known to be zero is carried as ``Zero(aval)`` instead of an
array, so differentiating a function with respect to one of many inputs does no
work for the others. Integer and boolean values are not differentiable: their
tangents are always symbolic zeros inside ember, and the public API shows them
as arrays of ``float0``, the zero-size dtype JAX uses for that purpose.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes, lax
from ember.core.avals import ShapedArray
from ember.core.evaluation import impl_rules
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var, print_rules
from ember.core.primitive import Primitive, abstract_eval_rules, call_params
from ember.core.traits import Family, declare
from ember.lax.base import aval
from ember.lax.elementwise import add_p


class Zero:
    """A tangent (or cotangent) that is zero, known without computing anything."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return f"Zero({self.aval})"


def is_differentiable(dtype: np.dtype) -> bool:
    return not isinstance(dtype, dtypes.KeyTy) and dtypes.is_inexact(dtype)


def zeros(a: ShapedArray) -> Any:
    """An array of zeros of type ``a`` (a broadcast scalar, so the IR stays small)."""
    scalar = lax.convert_element_type(0, a.dtype, a.weak_type)
    return lax.broadcast_in_dim(scalar, a.shape, ()) if a.shape else scalar


def instantiate(t: Any) -> Any:
    """A concrete array for a tangent: zeros for a symbolic zero."""
    return zeros(t.aval) if isinstance(t, Zero) else t


def add_tangents(a: Any, b: Any) -> Any:
    """``a + b``, skipping symbolic zeros: ``add_any`` (JAX's name for the sum of two tangents or
    cotangents), or ``add`` where the two differ in type."""
    if isinstance(a, Zero):
        return b
    if isinstance(b, Zero):
        return a
    return add_any(a, b)


# --- add_any ----------------------------------------------------------------------------------------
# The sum of two (co)tangents of one type: ``add`` under another name, which is how JAX's programs
# show the sums that differentiation makes (a cotangent gathered from two uses, the tangents of a
# product's operands). To everything below the transformations it is a call of a one-equation
# program ``add a b`` (``body``): the compiler inlines it, so compiled code sees ``add`` and fuses it
# as one; the printer shows ``add_any a b``. Its rules: impl here, jvp and transpose in
# ``rules.elementwise``, batching in ``batch_rules``.
class _AddAny(Primitive):
    """``add_any``, whose ``bind`` gives the call its body for the operands' types: a rule that binds
    an equation again on values of other shapes (the blocks of a partitioned program) gets the
    body that fits them."""

    __slots__ = ()

    def bind(self, x: Any, y: Any, **params: Any) -> Any:
        return super().bind(x, y, body=_body(aval(x), aval(y)))


add_any_p = _AddAny("add_any")
call_params[add_any_p] = "body"
declare(add_any_p, Family.ELEMENTWISE, linear=True)  # (partitioned and batched as the elementwise operation it is)


def _add_any_rule(x: ShapedArray, y: ShapedArray, *, body: ClosedJaxpr) -> ShapedArray:
    return abstract_eval_rules[add_p](x, y)


abstract_eval_rules[add_any_p] = _add_any_rule
impl_rules[add_any_p] = lambda x, y, *, body: impl_rules[add_p](x, y)
print_rules[add_any_p] = lambda eqn: {}
_BODIES: dict[tuple[ShapedArray, ShapedArray], ClosedJaxpr] = {}


def _body(x: ShapedArray, y: ShapedArray) -> ClosedJaxpr:
    """``{ lambda ; a b. let c = add a b in (c,) }`` for these types (one program per pair)."""
    body = _BODIES.get((x, y))
    if body is None:
        inputs, out = [Var(x), Var(y)], Var(abstract_eval_rules[add_p](x, y))
        body = _BODIES[(x, y)] = ClosedJaxpr(Jaxpr([], inputs, [Eqn(add_p, inputs, {}, [out])], [out]), [])
    return body


def add_any(a: Any, b: Any) -> Any:
    """``a + b`` as an ``add_any`` equation (``add`` when their shapes or dtypes differ)."""
    x, y = aval(a), aval(b)
    if x.shape != y.shape or x.dtype != y.dtype:
        return lax.add(a, b)
    return add_any_p.bind(a, b)


def broadcast_to_shape(t: Any, shape: tuple) -> Any:
    """The tangent of an elementwise operand that broadcast (a rank-0 one, or one of size-1
    dimensions), broadcast to the result's shape: as JAX, the size-1 dimensions are reshaped
    away and ``broadcast_in_dim`` puts the others in place."""
    if isinstance(t, Zero):
        return Zero(t.aval._replace(shape=shape))
    own = aval(t).shape
    if own == shape:
        return t
    if not own:
        return lax.broadcast_in_dim(t, shape, ())
    kept = tuple(i for i, (n, m) in enumerate(zip(own, shape)) if n == m)
    return lax.broadcast_in_dim(lax.reshape(t, tuple(own[i] for i in kept)), shape, kept)


def convert(x: Any, dtype: Any, weak_type: bool = False) -> Any:
    """``lax.convert_element_type`` of a (co)tangent. Complex to real keeps the real part without
    the user-facing warning: that is the transpose of real to complex, dropping nothing by mistake."""
    if dtypes.is_complex(aval(x).dtype) and not dtypes.is_complex(dtype):
        x = lax.real(x)
    return lax.convert_element_type(x, dtype, weak_type)


def match_type(x: Any, target: ShapedArray) -> Any:
    """``x`` with exactly the type ``target`` (dtype and weak flag), e.g. a carry's tangent."""
    if isinstance(x, Zero):
        return Zero(target)
    a = aval(x)
    if a.dtype == target.dtype and a.weak_type == target.weak_type:
        return x
    return convert(x, target.dtype, target.weak_type)


def sum_to_shape(x: Any, shape: tuple) -> Any:
    """Undo an elementwise operand's broadcast (of rank 0, or of size-1 dimensions): sum a
    cotangent back to ``shape`` (as JAX: over the broadcast dimensions, then reshaped)."""
    if isinstance(x, Zero):
        return Zero(x.aval._replace(shape=shape))
    a = aval(x)
    if a.shape == shape:
        return x
    if not shape:
        return lax.reduce_sum(x, tuple(range(a.ndim)))
    assert len(shape) == a.ndim, f"cannot sum a cotangent of shape {a.shape} to {shape}"
    summed = tuple(i for i, (n, m) in enumerate(zip(a.shape, shape)) if n != m)
    return lax.reshape(lax.reduce_sum(x, summed), shape)

