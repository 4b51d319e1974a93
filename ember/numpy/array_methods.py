"""Operators and methods of ``Array`` and ``Tracer``: the same ``jnp`` functions users call,
so eager and traced arrays behave identically."""
from __future__ import annotations

from typing import Any, Callable

from ember.core.trace import Tracer
from ember.runtime.array import Array


def _jnp(name: str) -> Callable:
    import ember.numpy as jnp

    return getattr(jnp, name)


def _binary(name: str, reflected: bool = False) -> Callable:
    def op(self: Any, other: Any) -> Any:
        if not _is_operand(other):
            return NotImplemented
        fn = _jnp(name)
        return fn(other, self) if reflected else fn(self, other)

    op.__name__ = name
    return op


def _is_operand(x: Any) -> bool:
    import numpy as np

    return isinstance(x, (Array, Tracer, int, float, bool, np.ndarray, np.generic, list, tuple)) or \
        hasattr(x, "__jax_array__")


def _method(name: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return _jnp(name)(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"Same as ``jnp.{name}(self, ...)``."
    return method


def _reshape(self: Any, *shape: Any, order: str = "C") -> Any:
    if len(shape) == 1 and not isinstance(shape[0], int):
        shape = tuple(shape[0])
    return _jnp("reshape")(self, shape, order=order)


def _transpose(self: Any, *axes: Any) -> Any:
    if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
        axes = axes[0]
    return _jnp("transpose")(self, axes or None)


def _astype(self: Any, dtype: Any, copy: bool = False) -> Any:
    from ember import dtypes, lax

    return lax.convert_element_type(self, dtypes.canonicalize_dtype(dtype))


def _getitem(self: Any, index: Any) -> Any:
    from ember.numpy.indexing import getitem

    return getitem(self, index)


def _at(self: Any) -> Any:
    from ember.numpy.indexing import IndexUpdateHelper

    return IndexUpdateHelper(self)


_BINARY = {
    "__add__": "add", "__sub__": "subtract", "__mul__": "multiply", "__truediv__": "true_divide",
    "__floordiv__": "floor_divide", "__mod__": "remainder", "__pow__": "power", "__matmul__": "matmul",
    "__and__": "bitwise_and", "__or__": "bitwise_or", "__xor__": "bitwise_xor",
    "__lshift__": "left_shift", "__rshift__": "right_shift", "__divmod__": "divmod",
}
_COMPARE = {"__eq__": "equal", "__ne__": "not_equal", "__lt__": "less", "__le__": "less_equal",
            "__gt__": "greater", "__ge__": "greater_equal"}
_UNARY = {"__neg__": "negative", "__pos__": "positive", "__abs__": "absolute", "__invert__": "invert"}
_METHODS = ("sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin", "any", "all", "cumsum",
            "cumprod", "ravel", "squeeze", "swapaxes", "repeat", "clip", "round", "sort",
            "argsort", "take", "dot", "trace", "diagonal", "nonzero", "conj", "conjugate", "ptp", "searchsorted")


def attach(cls: type) -> None:
    for dunder, name in {**_BINARY, **_COMPARE}.items():
        setattr(cls, dunder, _binary(name))
    for dunder, name in _BINARY.items():
        setattr(cls, "__r" + dunder[2:], _binary(name, reflected=True))
    for dunder, name in _UNARY.items():
        setattr(cls, dunder, _method(name))
    for name in _METHODS:
        setattr(cls, name, _method(name))
    cls.flatten = _method("ravel")
    cls.reshape = _reshape
    cls.transpose = _transpose
    cls.astype = _astype
    cls.__getitem__ = _getitem
    cls.at = property(_at)
    cls.T = property(lambda self: _jnp("transpose")(self))
    cls.mT = property(lambda self: _jnp("swapaxes")(self, -1, -2))
    cls.real = property(lambda self: self)
    cls.imag = property(lambda self: _jnp("zeros_like")(self))
    cls.view = lambda self, dtype=None: self if dtype is None else _jnp("view")(self, dtype)
    cls.__hash__ = None


attach(Array)
attach(Tracer)
