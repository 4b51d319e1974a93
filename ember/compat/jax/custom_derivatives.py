"""``jax.custom_derivatives``: functions with user-given derivative rules (ember's)."""
from ember.transforms.custom import (  # noqa: F401
    CustomVJPPrimal,
    SymbolicZero,
    custom_jvp,
    custom_jvp_call_p,
    custom_vjp,
    custom_vjp_call_p,
)

__all__ = ["CustomVJPPrimal", "SymbolicZero", "custom_jvp", "custom_jvp_call_p", "custom_vjp", "custom_vjp_call_p"]
