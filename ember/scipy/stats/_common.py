"""What the distribution modules share: argument promotion and the location-scale transform."""
from __future__ import annotations

from typing import Any

import ember.numpy as jnp
from ember.numpy.core import ensure_array, promote_dtypes_inexact


def promote(*args: Any) -> list[Any]:
    """The arguments promoted together to one floating dtype, as JAX's ``promote_args_inexact``."""
    return list(promote_dtypes_inexact(*(ensure_array(a) for a in args)))


def standardize(x: Any, loc: Any, scale: Any) -> tuple[Any, Any]:
    """``((x - loc) / scale, scale)``, promoted together."""
    x, loc, scale = promote(x, loc, scale)
    return jnp.divide(jnp.subtract(x, loc), scale), scale
