"""``jax.typing``: the annotations JAX publishes for array-like values and dtypes."""
from __future__ import annotations

from typing import Any, Union

import numpy as np

from ember.core.array import Array

# What JAX's functions accept as arrays: arrays (ember's, NumPy's), NumPy scalars and Python numbers.
ArrayLike = Union[Array, np.ndarray, np.bool_, np.number, bool, int, float, complex]
# What names a dtype: a NumPy dtype, a scalar type, a name, or an object with a ``dtype``.
DTypeLike = Union[str, type, np.dtype, Any]

__all__ = ["ArrayLike", "DTypeLike"]
