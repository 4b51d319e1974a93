"""``jax.custom_derivatives``: functions with user-given derivative rules (ember's)."""
from typing import Any

from ember import dtypes, tree_util
from ember.core.avals import aval_of_value
from ember.transforms import tangents
from ember.transforms.api import closure_convert, custom_gradient  # noqa: F401
from ember.transforms.custom import (  # noqa: F401
    CustomVJPPrimal,
    SymbolicZero,
    custom_jvp,
    custom_jvp_call_p,
    custom_vjp,
    custom_vjp_call_p,
)


def zero_from_primal(val: Any, symbolic_zeros: bool = False) -> Any:
    """The zero tangent of ``val`` (a pytree): ``SymbolicZero``s of the tangent types if
    ``symbolic_zeros``, else zero arrays (float0 for integers), as JAX's."""
    def zero(x: Any) -> Any:
        tangent = aval_of_value(x).to_tangent_aval()
        if symbolic_zeros:
            return SymbolicZero(tangent)
        return dtypes.float0_zeros(tangent.shape) if tangent.dtype == dtypes.float0 else tangents.zeros(tangent)
    return tree_util.tree_map(zero, val)


__all__ = ["CustomVJPPrimal", "SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp", "custom_jvp_call_p",
           "custom_vjp", "custom_vjp_call_p", "zero_from_primal"]
