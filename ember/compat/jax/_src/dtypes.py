"""``jax._src.dtypes``: what libraries take from JAX's dtype module. ember has no extended
(user-defined) dtypes: ``extended`` and ``ExtendedDType`` exist for libraries that declare one
at import (flax's fp8 metadata); none of ember's dtypes is one."""
from __future__ import annotations

import numpy as np

from ember.dtypes import TypePromotionError, extended, finfo, iinfo, issubdtype, prng_key  # noqa: F401

DType = np.dtype


class ExtendedDType:
    """The base of extended dtypes (``type`` is their scalar type)."""
    type: type = extended


def supports_inf(dtype: object) -> bool:
    """Whether ``dtype`` has infinities (float8_e4m3fn and the ``fnuz`` types do not)."""
    dtype = np.dtype(dtype)
    return np.issubdtype(dtype, np.inexact) and bool(np.isinf(np.array(np.inf).astype(dtype)))
