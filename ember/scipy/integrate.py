"""Numerical integration with SciPy's conventions (``jax.scipy.integrate``): the trapezoidal
rule, the same computation as ``jnp.trapezoid`` under SciPy's name."""
from __future__ import annotations

from typing import Any

from ember.numpy import calculus

__all__ = ["trapezoid"]


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """The integral of ``y`` along ``axis`` by the trapezoidal rule: at sample points ``x`` (1-D
    along ``axis``, or shaped like ``y``), else at the spacing ``dx``."""
    return calculus.trapezoid(y, x, dx, axis)
