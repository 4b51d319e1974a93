"""``jnp.float32`` and friends: usable as dtypes *and* callable to make scalar arrays.

JAX programs write both ``jnp.zeros(3, jnp.float32)`` and ``jnp.float32(1.5)``;
NumPy's scalar types would make the second a NumPy scalar (and float64 would
ignore x64 being off), so these classes build ember arrays of the canonical
dtype instead. ``np.dtype(jnp.float32)`` works through the ``dtype`` attribute.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.numpy.core import asarray


class _ScalarMeta(type):
    dtype: np.dtype

    def __call__(cls, x: Any = 0) -> Any:
        return asarray(x, dtype=cls.dtype)

    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, cls.dtype.type)

    def __eq__(cls, other: Any) -> bool:
        # JAX's rule: the class itself or its NumPy scalar type (so np.dtype('float32') too, by reflection).
        # Anything else is unequal, never an error (a dict is not read as a structured dtype).
        return other is cls or cls.dtype.type == other

    def __ne__(cls, other: Any) -> bool:
        return not cls == other

    def __hash__(cls) -> int:
        return hash(cls.dtype.type)

    def __repr__(cls) -> str:
        return f"<class 'ember.numpy.{cls.__name__}'>"


def _scalar_type(name: str, dt: np.dtype) -> type:
    return _ScalarMeta(name, (), {"dtype": dt, "__doc__": f"The {dt.name} dtype; ``{name}(x)`` makes an array."})


bool_ = _scalar_type("bool_", dtypes.bool_)
int8, int16, int32, int64 = (_scalar_type(n, d) for n, d in zip(
    ("int8", "int16", "int32", "int64"), dtypes.SIGNED))
uint8, uint16, uint32, uint64 = (_scalar_type(n, d) for n, d in zip(
    ("uint8", "uint16", "uint32", "uint64"), dtypes.UNSIGNED))
bfloat16, float16, float32, float64 = (_scalar_type(n, d) for n, d in zip(
    ("bfloat16", "float16", "float32", "float64"), dtypes.FLOATING))
complex64, complex128 = (_scalar_type(n, d) for n, d in zip(("complex64", "complex128"), dtypes.COMPLEX))
(float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz,
 float8_e8m0fnu) = (_scalar_type(n, d) for n, d in zip(dtypes.FLOAT8_NAMES, dtypes.FLOAT8))
(int1, int2, int4, uint1, uint2, uint4, float4_e2m1fn, float6_e2m3fn, float6_e3m2fn) = (
    _scalar_type(n, d) for n, d in zip(dtypes.NARROW_NAMES, dtypes.NARROW))  # (dtypes only: no arrays)

# NumPy's C-flavoured names, as JAX has them: the same classes (``jnp.double is jnp.float64``), so
# with x64 off ``jnp.float_(1)`` is float32, as every 64-bit type canonicalizes.
single, double, csingle, cdouble = float32, float64, complex64, complex128
float_, int_, uint = float64, int64, uint64
