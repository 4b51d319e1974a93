"""Abstract values: what a tracer knows about an array (shape, dtype, weak type)."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ember import dtypes
from ember.core.sharding import CPU, AbstractMesh, NamedSharding, PartitionSpec, SingleDeviceSharding


class ShapedArray(NamedTuple):
    """An array's type. Hashable, so it can be part of cache keys."""

    shape: tuple[int, ...]
    dtype: np.dtype
    weak_type: bool = False

    @property
    def sharding(self) -> "NamedSharding":
        """The type's sharding, as JAX's types have one (``jax.typeof(x).sharding``, which
        flax.nnx passes on as ``out_sharding``): ember's types carry none, so it is JAX's of an
        unsharded value, every dimension replicated over the empty abstract mesh."""
        return NamedSharding(AbstractMesh((), ()), PartitionSpec(*([None] * len(self.shape))))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def str_short(self) -> str:
        """``f32[3,4]`` as in the IR printer."""
        return f"{dtypes.SHORT_NAME[self.dtype]}[{','.join(map(str, self.shape))}]"

    def strip_weak_type(self) -> "ShapedArray":
        return self._replace(weak_type=False) if self.weak_type else self

    def to_tangent_aval(self) -> "ShapedArray":
        """The type of this type's tangents: itself for real and complex floats, float0 for integers and booleans."""
        if dtypes.is_inexact(self.dtype):  # (the rule of ``transforms.tangents.is_differentiable``)
            return self.strip_weak_type()
        return ShapedArray(self.shape, dtypes.float0, False)

    def __str__(self) -> str:
        return self.str_short() + ("{weak}" if self.weak_type else "")

    def __repr__(self) -> str:  # (a method: an assignment in a NamedTuple's body reads as a field to type checkers)
        return str(self)


class AvalProperties:
    """Array metadata read from ``self.aval``: shared by ``Array`` and ``Tracer``."""

    __slots__ = ()
    aval: ShapedArray

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: self.aval.ndim)
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)
    itemsize = property(lambda self: self.aval.dtype.itemsize)
    nbytes = property(lambda self: self.aval.size * self.aval.dtype.itemsize)
    # (one device: every array and tracer lives whole on it)
    sharding = property(lambda self: SingleDeviceSharding(CPU))


def aval_of_value(x) -> ShapedArray:
    """The abstract value of a concrete value (Array, NumPy array or Python scalar)."""
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval
    dt, weak = dtypes.value_dtype_and_weak(x)
    return ShapedArray(tuple(np.shape(x)), dt, weak)
