"""``jax._src.dtypes``: the error of a disallowed type promotion (``jax_numpy_dtype_promotion``
strict, which ember does not have: it is never raised)."""


class TypePromotionError(ValueError):
    pass
