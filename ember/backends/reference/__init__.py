"""The NumPy reference interpreter: the executable specification of every primitive.

Each module here fills ``impl_rules`` (in ``ember.core.evaluation``) for one family of
primitives: ``impl_rules[p](*numpy_arrays, **params)`` returns NumPy arrays. Eager
operations call ``apply_primitive`` (shape/dtype rule, then the impl); jitted programs
run ``eval_jaxpr`` over their IR (``executable``: the backend registered as "reference", whose
rule for ``jit`` runs a call's live part). Every other backend is tested against this one.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.compiler.fusion import fusion_p
from ember.core.calls import custom_jvp_call_p, custom_vjp_call_p, custom_vjp_lin_p, custom_vmap_call_p
from ember.core.evaluation import (  # noqa: F401  (the interpreter's public names)
    apply_primitive,
    eval_closed,
    eval_jaxpr,
    impl_rules,
    to_numpy,
)
from ember.core.ir import ClosedJaxpr


def _call(*args: Any, jaxpr: ClosedJaxpr, name: str) -> list[np.ndarray]:
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


def _custom_call(*args: Any, call: ClosedJaxpr, **params: Any) -> list[np.ndarray]:
    return eval_closed(call, *args)


def _forward_through_custom_vjp(*args: Any, **params: Any) -> Any:
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


impl_rules[fusion_p] = _call  # a fused kernel runs as its sub-program
impl_rules[custom_jvp_call_p] = _custom_call
impl_rules[custom_vjp_call_p] = _custom_call
impl_rules[custom_vmap_call_p] = _custom_call
impl_rules[custom_vjp_lin_p] = _forward_through_custom_vjp

from ember.backends.reference import (  # noqa: E402,F401  (each module registers its family's rules)
    callbacks,
    control_flow,
    convolution,
    dot,
    elementwise,
    executable,
    fft,
    indexing,
    linalg,
    parallel,
    reductions,
    shapes,
)
