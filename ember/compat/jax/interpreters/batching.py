"""``jax.interpreters.batching``: ``vmap`` rules of primitives. A JAX rule is
``rule(batched_args, batch_dims, **params) -> (out, out_dims)``, a dimension ``not_mapped``
(None) for an unbatched value; ``primitive_batchers[p] = rule`` installs it in ember's table
(whose rules also get the batch size first)."""
from __future__ import annotations

import functools
from typing import Callable

from ember.core.primitive import Primitive
from ember.transforms.batch_rules import batch_elementwise
from ember.transforms.batching import BatchTracer, batching_rules  # noqa: F401

not_mapped = None


class _Batchers(dict):
    """JAX's table of batching rules: setting an entry installs the rule in ember's."""

    def __setitem__(self, primitive: Primitive, rule: Callable) -> None:
        super().__setitem__(primitive, rule)
        batching_rules.override(primitive, lambda axis_size, values, dims, **params: rule(values, dims, **params))


class _AxisBatchers(dict):
    """JAX's table of rules that also get the axis: ``rule(axis_size, axis_name, trace_type,
    batched_args, batch_dims, **params)``."""

    def __setitem__(self, primitive: Primitive, rule: Callable) -> None:
        super().__setitem__(primitive, rule)
        batching_rules.override(primitive, lambda axis_size, values, dims, **params: rule(
            axis_size, None, None, values, dims, **params))


primitive_batchers = _Batchers()
axis_primitive_batchers = _AxisBatchers()


def defvectorized(primitive: Primitive) -> None:
    """``primitive`` acts elementwise on one operand: it batches by applying it to the batch."""
    batching_rules.override(primitive, lambda axis_size, values, dims, **params: (primitive.bind(*values, **params),
                                                                            dims[0]))


def defbroadcasting(primitive: Primitive) -> None:
    """``primitive`` broadcasts its operands elementwise."""
    batching_rules.override(primitive, functools.partial(batch_elementwise, primitive))




__all__ = ["BatchTracer", "axis_primitive_batchers", "defbroadcasting", "defvectorized", "not_mapped",
           "primitive_batchers"]
