"""Abstract values: what a tracer knows about an array (shape, dtype, weak type)."""
from __future__ import annotations

import math
import operator
from typing import Any, Iterable, Sequence

import numpy as np

from ember import dtypes
from ember.core.sharding import CPU, AbstractMesh, NamedSharding, PartitionSpec, SingleDeviceSharding

try:  # (CPython's field getter of namedtuples: a C-level read, as fast as a tuple's)
    from collections import _tuplegetter  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover  (other Pythons)
    def _tuplegetter(index: int, doc: str) -> Any:
        return property(operator.itemgetter(index), doc=doc)


def _operand_error(op: str, a: Any, b: Any) -> TypeError:
    return TypeError(f"unsupported operand type(s) for {op}: '{type(a).__name__}' and '{type(b).__name__}'")


class ShapedArray(tuple):
    """An array's type: ``shape`` (a tuple of ints), ``dtype`` and ``weak_type``, as JAX's
    ``jax.core.ShapedArray``. Hashable and compared by value, so it can be part of cache keys.

    It is stored as a tuple (cheap to make, hash and compare) but is not a sequence to its users:
    a pytree leaf (``jax.eval_shape(f, aval)`` takes it as JAX's does), and ``aval + (1,)`` or
    ``aval * 2`` are TypeErrors as in JAX, not tuple concatenation."""

    __slots__ = ()

    shape: tuple[int, ...] = _tuplegetter(0, "The dimensions.")  # type: ignore[assignment]
    dtype: np.dtype = _tuplegetter(1, "The element type.")  # type: ignore[assignment]
    weak_type: bool = _tuplegetter(2, "Whether the type is weak (a Python scalar's).")  # type: ignore[assignment]

    def __new__(cls, shape: Any, dtype: Any, weak_type: bool = False) -> "ShapedArray":
        if type(shape) is not tuple:  # (a list, or a shape of NumPy integers)
            shape = tuple(operator.index(d) for d in shape)
        if isinstance(dtype, (type, str)):  # (a NumPy, jnp or ml_dtypes scalar type, or a name)
            dtype = dtypes.dtype(dtype)
        return tuple.__new__(cls, (shape, dtype, weak_type))

    def __reduce__(self) -> tuple:
        return type(self), (self.shape, self.dtype, self.weak_type)

    def update(self, shape: Any = None, dtype: Any = None, weak_type: bool | None = None,
               **kwargs: Any) -> "ShapedArray":
        """This type with the given fields changed (JAX's ``update``; ``sharding``,
        ``manual_axis_type`` and ``memory_space`` are accepted: ember's types carry none)."""
        unknown = set(kwargs) - {"sharding", "manual_axis_type", "memory_space", "vma"}
        if unknown:
            raise TypeError(f"ShapedArray.update() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        return type(self)(self.shape if shape is None else shape, self.dtype if dtype is None else dtype,
                          self.weak_type if weak_type is None else weak_type)

    def _replace(self, **fields: Any) -> "ShapedArray":
        return type(self)(fields.get("shape", self.shape), fields.get("dtype", self.dtype),
                          fields.get("weak_type", self.weak_type))

    def update_weak_type(self, weak_type: bool) -> "ShapedArray":
        return self if weak_type == self.weak_type else self._replace(weak_type=weak_type)

    def __add__(self, other: Any) -> Any:
        raise _operand_error("+", self, other)

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, tuple):  # (Python's words for a tuple that meets a non-tuple)
            raise TypeError(f'can only concatenate tuple (not "{type(self).__name__}") to tuple')
        raise _operand_error("+", other, self)

    def __mul__(self, other: Any) -> Any:
        raise _operand_error("*", self, other)

    def __rmul__(self, other: Any) -> Any:
        raise _operand_error("*", other, self)

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

    def str_short(self, weak: bool = False) -> str:
        """``f32[3,4]`` as in the IR printer; ``weak``: ``f32[]{weak}`` for a weak type (ember's logs)."""
        text = f"{dtypes.SHORT_NAME[self.dtype]}[{','.join(map(str, self.shape))}]"
        return text + "{weak}" if weak and self.weak_type else text

    def strip_weak_type(self) -> "ShapedArray":
        return self._replace(weak_type=False) if self.weak_type else self

    def to_tangent_aval(self) -> "ShapedArray":
        """The type of this type's tangents: itself for real and complex floats, float0 for integers and booleans."""
        if dtypes.is_inexact(self.dtype):  # (the rule of ``transforms.tangents.is_differentiable``)
            return self.strip_weak_type()
        return ShapedArray(self.shape, dtypes.float0, False)

    def __str__(self) -> str:  # (JAX's: ``float32[2,3]``, ``~float32[]`` weak)
        return f"{'~' if self.weak_type else ''}{self.dtype.name}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:  # (JAX's: ``ShapedArray(float32[2,3])``, ``..., weak_type=True)``)
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapedArray({self.dtype.name}[{','.join(map(str, self.shape))}]{weak})"


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


def consumed_donations(in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray],
                       donated: Iterable[int]) -> frozenset[int]:
    """The donated inputs a call deletes, decided by types alone as JAX's CPU backend decides it
    (whether a buffer is then reused is the backend's business): each output, in order, takes the
    first donated input left of its shape and dtype; then each donated input left, in order, takes
    an output left with as many elements of the same size (XLA reuses a buffer of as many bytes).
    A donated input that no output takes stays usable."""
    left: dict[tuple, list[int]] = {}
    for i in sorted(donated):
        left.setdefault((in_avals[i].shape, in_avals[i].dtype), []).append(i)
    consumed: set[int] = set()
    unmatched: dict[tuple, int] = {}  # (elements, item size) -> outputs left
    for out in out_avals:
        same = left.get((out.shape, out.dtype))
        if same:
            consumed.add(same.pop(0))
        else:
            key = (out.size, out.dtype.itemsize)
            unmatched[key] = unmatched.get(key, 0) + 1
    for i in sorted(set(donated) - consumed):
        key = (in_avals[i].size, in_avals[i].dtype.itemsize)
        if unmatched.get(key):
            unmatched[key] -= 1
            consumed.add(i)
    return frozenset(consumed)
