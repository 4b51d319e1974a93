"""Equality within tolerances: ``jnp.isclose`` and ``jnp.allclose``."""
from __future__ import annotations

from typing import Any

from ember import dtypes, lax
from ember.numpy.core import promote_dtypes_inexact
from ember.numpy.reductions import all as _all
from ember.numpy.static_args import static_bool
from ember.numpy.ufuncs import abs, add, equal, isfinite, isnan, less_equal, logical_and, logical_or, multiply

__all__ = ["allclose", "isclose"]


def isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Any:
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (not symmetric: ``b`` is the reference).

    Operands promote to a common inexact type, and the tolerances to that type (to its parts'
    type for complex operands). Equal
    infinities are close, an infinity is close to nothing else, and NaN is close to NaN only
    with ``equal_nan``.
    """
    a, b = promote_dtypes_inexact(a, b)
    # The tolerances bound magnitudes: of the parts' type for complex operands.
    rtol, atol = (lax.convert_element_type(tol, dtypes.real_dtype(a.dtype)) for tol in (rtol, atol))
    within = less_equal(abs(a - b), add(atol, multiply(rtol, abs(b))))
    # |inf - inf| is NaN, so equal infinities are caught by the equality test alone.
    close = logical_or(equal(a, b), logical_and(isfinite(b), within))
    if static_bool(equal_nan, "equal_nan", "isclose"):
        return logical_or(close, logical_and(isnan(a), isnan(b)))
    return close


def allclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Any:
    """Whether every element pair is ``isclose``: a boolean scalar array (traceable, unlike a
    Python bool)."""
    return _all(isclose(a, b, rtol, atol, equal_nan))
