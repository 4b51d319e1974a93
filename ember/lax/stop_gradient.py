"""``lax.stop_gradient``: the identity, with a zero derivative.

Its derivative rule (zero) is in ``ember.transforms.custom``, its implementation
(the identity) in ``ember.backends.reference.elementwise``.
"""
from __future__ import annotations

from typing import Any

from ember import dtypes, tree_util
from ember.core.avals import ShapedArray
from ember.core.traits import Family
from ember.lax.base import aval, primitive


def _identity_rule(x: ShapedArray) -> ShapedArray:
    return x


# An elementwise identity: fuses, batches and lowers like one.
stop_gradient_p = primitive("stop_gradient", _identity_rule, family=Family.ELEMENTWISE)


def stop_gradient(x: Any) -> Any:
    """``x`` (a pytree), treated as a constant by differentiation: its derivative is zero.

    Integer and boolean leaves are returned unchanged (they have no derivative anyway).
    """
    def stop(leaf: Any) -> Any:
        return stop_gradient_p.bind(leaf) if dtypes.is_inexact(aval(leaf).dtype) else leaf

    return tree_util.map_for_trace(stop, x)  # (a key array: its data, which has no derivative)
