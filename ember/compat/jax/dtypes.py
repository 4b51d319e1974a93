"""``jax.dtypes``: JAX's public names of its dtype module, ember's functions, with JAX's
``bfloat16``: the scalar type (``jax.dtypes.bfloat16(1.0)`` is a bfloat16 scalar, and
``isinstance(x, jax.dtypes.bfloat16)`` works), where ``ember.dtypes.bfloat16`` is the dtype."""
import ml_dtypes as _ml_dtypes

from ember.dtypes import (  # noqa: F401
    TypePromotionError,
    canonicalize_dtype,
    extended,
    finfo,
    float0,
    iinfo,
    issubdtype,
    itemsize_bits,
    prng_key,
    result_type,
    scalar_type_of,
)

bfloat16 = _ml_dtypes.bfloat16

__all__ = ["TypePromotionError", "bfloat16", "canonicalize_dtype", "extended", "finfo", "float0", "iinfo",
           "issubdtype", "itemsize_bits", "prng_key", "result_type", "scalar_type_of"]
