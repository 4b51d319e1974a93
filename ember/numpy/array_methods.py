"""Operators and methods of ``Array`` and ``Tracer``: the same ``jnp`` functions users call,
so eager and traced arrays behave identically. The classes of ``x.at[index]`` are here, not in
``indexing``: their ``divide`` and ``power`` need ``ufuncs``, which needs ``indexing`` (for ``nonzero``)."""
from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from ember import dtypes, errors
from ember.core.array import Array
from ember.core.trace import Tracer
from ember.lax import elementwise
from ember.lax.base import aval
from ember.numpy import array_api, array_utils, index_functions, linalg, reductions, shape_ops, sorting, ufuncs
from ember.numpy.core import ensure_array, result_type_weak
from ember.numpy.indexing import _filled, _scatter_update, _take, getitem

# Operators whose Python fallback would do something else with a list or tuple operand: compare it
# (==, != give False / True), concatenate or repeat it (+, *). They refuse one instead, as JAX.
_REFUSED = {"__eq__": ("==", (dict, list, set, tuple)), "__ne__": ("!=", (dict, list, set, tuple)),
            "__add__": ("+", (list, tuple)), "__mul__": ("*", (list, tuple))}


def _binary(fn: Callable, reflected: bool = False, dunder: str = "") -> Callable:
    """The operator ``dunder`` of ``fn``: an entry point itself (``errors.api_boundary``'s filtering
    written into it: a wrapper's frame costs a third of a microsecond of a 5 us ``x + y``)."""
    symbol, refused = _REFUSED.get(dunder, (None, ()))

    def op(self: Any, other: Any) -> Any:
        try:
            if not _is_operand(other):
                if type(other) in refused:
                    names = (type(other).__name__, type(self).__name__) if reflected else \
                        (type(self).__name__, type(other).__name__)
                    raise TypeError(f"unsupported operand type(s) for {symbol}: {names[0]!r} and {names[1]!r}")
                return NotImplemented
            return fn(other, self) if reflected else fn(self, other)
        except Exception as e:
            errors.filter_at_boundary(e, sys._getframe())
            raise

    op.__name__ = fn.__name__
    errors.register_boundary(op.__code__)
    return op


def _is_operand(x: Any) -> bool:
    """What operators take, as JAX: arrays and scalars. A list or tuple is not one (use jnp.asarray)."""
    return isinstance(x, (Array, Tracer, int, float, complex, bool, np.ndarray, np.generic)) or hasattr(
        x, "__jax_array__")


def _method(name: str, fn: Callable) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = f"Same as ``jnp.{name}(self, ...)``."
    return method


def _reshape(self: Any, *shape: Any, order: str = "C") -> Any:
    if len(shape) == 1:  # x.reshape((2, 3)) as x.reshape(2, 3); a lone scalar (even traced) as jnp.reshape's
        shape = shape[0]
    return shape_ops.reshape(self, shape, order=order)


def _transpose(self: Any, *axes: Any) -> Any:
    if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
        axes = axes[0]
    return shape_ops.transpose(self, axes or None)


def _astype(self: Any, dtype: Any, copy: bool = False, device: Any = None) -> Any:
    return array_utils.astype(self, dtype, copy=copy, device=device)


def _index_source(index: Any) -> str:
    """``index`` as it was written between brackets when that is simple (``0``, ``1:3``, ``..., 0``), else ``idx``."""
    def one(i: Any) -> str | None:
        if i is Ellipsis:
            return "..."
        if i is None or type(i) in (int, bool) or isinstance(i, np.integer):
            return repr(i) if i is None else str(int(i))
        if isinstance(i, slice) and all(p is None or type(p) is int for p in (i.start, i.stop, i.step)):
            text = ("" if i.start is None else str(i.start)) + ":" + ("" if i.stop is None else str(i.stop))
            return text if i.step is None else f"{text}:{i.step}"
        return None
    if isinstance(index, tuple) and not index:
        return "()"
    parts = [one(i) for i in (index if isinstance(index, tuple) else (index,))]
    return "idx" if None in parts else ", ".join(parts)


def _setitem(self: Any, index: Any, value: Any) -> None:
    """``x[idx] = y`` is refused, as in JAX: arrays are immutable; the message shows the ``.at`` form."""
    idx = _index_source(index)
    y = repr(value) if type(value) in (int, float, complex, bool) else "y"
    raise TypeError(f"ember arrays are immutable and do not support in-place item assignment. Instead of "
                    f"x[{idx}] = {y}, use x = x.at[{idx}].set({y}) or another .at[] method (add, subtract, multiply, "
                    f"divide, power, min, max, apply), which return the updated copy.")


# --- x.at[idx].op(v) -------------------------------------------------------------------------------
_NO_BOOL_ARITHMETIC = {"add": "add", "subtract": "sub", "multiply": "mul"}  # .at method: the lax op JAX names


def _update_method(op: str, doc: str) -> Callable:
    def method(self: "IndexUpdateRef", values: Any, *, indices_are_sorted: bool = False,
               unique_indices: bool = False, mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        if op in _NO_BOOL_ARITHMETIC and aval(self.array).dtype == dtypes.bool_ and \
                result_type_weak(self.array, ensure_array(values))[0] == dtypes.bool_:
            # As JAX: arithmetic updates of booleans (in the promoted type) are refused, not logical or / and.
            raise TypeError(f"{_NO_BOOL_ARITHMETIC[op]} does not accept dtype bool at position 0. Accepted dtypes at "
                            "position 0 are subtypes of integer, floating, complexfloating.")
        return _scatter_update(self.array, self.index, values, op, mode=mode, wrap_negative=wrap_negative_indices,
                               indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    method.__name__ = op
    method.__doc__ = doc
    return method


class IndexUpdateRef:
    """``x.at[index]``: methods return a copy of ``x`` updated at ``index`` (pure ``x[index] op= v``).

    Every method takes ``mode`` ('clip', 'drop'/'fill', 'promise_in_bounds'; updates default to
    dropping out-of-bounds indices, ``get`` to clamping), ``indices_are_sorted`` and
    ``unique_indices`` (hints) and ``wrap_negative_indices``.
    """

    __slots__ = ("array", "index")

    def __init__(self, array: Any, index: Any) -> None:
        self.array = array
        self.index = index

    def __repr__(self) -> str:
        return f"IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None,
            fill_value: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[index]``; with ``mode='fill'`` out-of-bounds reads give ``fill_value`` (default NaN / extreme)."""
        return _take(self.array, self.index, mode=mode, fill_value=fill_value, wrap_negative=wrap_negative_indices,
                     indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)

    set = _update_method("set", "``x[index] = values`` (with repeated indices, one of the values wins).")
    add = _update_method("add", "``x[index] += values``; repeated indices accumulate.")
    subtract = _update_method("subtract", "``x[index] -= values``; repeated indices accumulate.")
    multiply = mul = _update_method("multiply", "``x[index] *= values``; repeated indices accumulate.")
    min = _update_method("min", "``x[index] = minimum(x[index], values)``.")
    max = _update_method("max", "``x[index] = maximum(x[index], values)``.")

    def divide(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
               mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[index] /= values``, as JAX computes it: ``x / ones_like(x).at[index].multiply(values)``
        (so repeated indices divide repeatedly, and integer arrays become floating)."""
        divisors = IndexUpdateRef(_filled(aval(self.array), 1), self.index).multiply(
            values, mode=mode, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
            wrap_negative_indices=wrap_negative_indices)
        return ufuncs.true_divide(self.array, divisors)

    def power(self, values: Any, *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[index] **= values``, as JAX computes it: ``x ** ones_like(x).at[index].multiply(values)``."""
        exponents = IndexUpdateRef(_filled(aval(self.array), 1), self.index).multiply(
            values, mode=mode, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
            wrap_negative_indices=wrap_negative_indices)
        return ufuncs.power(self.array, exponents)

    def apply(self, func: Callable[[Any], Any], *, indices_are_sorted: bool = False, unique_indices: bool = False,
              mode: Any = None, wrap_negative_indices: bool = True) -> Any:
        """``x[index] = func(x[index])`` for an elementwise ``func``. Unlike JAX, a repeated index gets
        ``func`` applied once, not once per repetition."""
        current = self.get(mode="clip", wrap_negative_indices=wrap_negative_indices)
        return self.set(func(current), mode=mode, indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, wrap_negative_indices=wrap_negative_indices)


class IndexUpdateHelper:
    """``x.at``: index it (``x.at[index]``) to get the update methods."""

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array

    def __getitem__(self, index: Any) -> IndexUpdateRef:
        return IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"IndexUpdateHelper({self.array!r})"


_BINARY = {
    "__add__": ufuncs.add, "__sub__": ufuncs.subtract, "__mul__": ufuncs.multiply,
    "__truediv__": ufuncs.true_divide, "__floordiv__": ufuncs.floor_divide, "__mod__": ufuncs.remainder,
    "__pow__": ufuncs.power, "__matmul__": linalg.matmul, "__and__": ufuncs.bitwise_and,
    "__or__": ufuncs.bitwise_or, "__xor__": ufuncs.bitwise_xor, "__lshift__": ufuncs.left_shift,
    "__rshift__": ufuncs.right_shift, "__divmod__": ufuncs.divmod,
}
_COMPARE = {"__eq__": ufuncs.equal, "__ne__": ufuncs.not_equal, "__lt__": ufuncs.less, "__le__": ufuncs.less_equal,
            "__gt__": ufuncs.greater, "__ge__": ufuncs.greater_equal}
_UNARY = {"__neg__": ufuncs.negative, "__pos__": ufuncs.positive, "__abs__": ufuncs.absolute,
          "__invert__": ufuncs.invert}
_METHODS = {
    "sum": reductions.sum, "prod": reductions.prod, "mean": reductions.mean, "var": reductions.var,
    "std": reductions.std, "max": reductions.max, "min": reductions.min, "argmax": reductions.argmax,
    "argmin": reductions.argmin, "any": reductions.any, "all": reductions.all, "cumsum": reductions.cumsum,
    "cumprod": reductions.cumprod, "ravel": shape_ops.ravel, "squeeze": shape_ops.squeeze,
    "swapaxes": shape_ops.swapaxes, "repeat": shape_ops.repeat, "clip": ufuncs.clip, "round": ufuncs.round,
    "sort": sorting.sort, "argsort": sorting.argsort, "take": index_functions.take, "dot": linalg.dot,
    "trace": linalg.trace, "diagonal": linalg.diagonal, "nonzero": index_functions.nonzero, "conj": ufuncs.conj,
    "conjugate": ufuncs.conjugate, "ptp": reductions.ptp, "searchsorted": sorting.searchsorted,
}


# Methods JAX's Array has besides NumPy's usual ones (``dir(jax.Array)``).
def _contains(self: Any, other: Any) -> Any:
    if self.ndim != 1:
        raise ValueError(f"Array.__contains__: search array must be one-dimensional, got arr.shape={self.shape}.")
    return reductions.any(ufuncs.equal(self, other))


def _round(self: Any, ndigits: int | None = None) -> Any:
    """``round(x)`` is an integer array (as Python's round of a number is an int); ``round(x, n)`` a float one."""
    if ndigits is None:
        return ufuncs.round(self).astype(dtypes.default_int_dtype())
    return ufuncs.round(self, ndigits)


def _byteswap(self: Any) -> Any:
    """The elements with their bytes in reverse order (NumPy's ``byteswap``, as a new array)."""
    column = shape_ops.reshape(self, self.shape + (1,))  # (each element's bytes along a last axis)
    swapped = shape_ops.flip(shape_ops.view(column, np.uint8), -1)
    return shape_ops.reshape(shape_ops.view(swapped, self.dtype), self.shape)


def _array_module(self: Any, types: Any) -> Any:
    import sys  # (the package this module belongs to: NEP 37's ``__array_module__``)
    return sys.modules["ember.numpy"] if all(issubclass(t, (Array, np.ndarray)) for t in types) else NotImplemented


def _compress(self: Any, condition: Any, axis: int | None = None, **kwargs: Any) -> Any:
    return index_functions.compress(condition, self, axis, **kwargs)


_EXTRA_METHODS = {"__contains__": _contains, "__round__": _round, "byteswap": _byteswap,
                  "argpartition": sorting.argpartition, "choose": index_functions.choose,
                  "compress": _compress, "__array_module__": _array_module}


def attach(cls: type) -> None:
    entry = errors.api_boundary  # (operators and methods are entry points: tracebacks show the user's frames)
    for dunder, fn in {**_BINARY, **_COMPARE}.items():
        setattr(cls, dunder, _binary(fn, dunder=dunder))  # (entry points themselves)
    for dunder, fn in _BINARY.items():
        setattr(cls, "__r" + dunder[2:], _binary(fn, reflected=True, dunder=dunder))
    for dunder, fn in _UNARY.items():
        setattr(cls, dunder, entry(_method(fn.__name__, fn)))
    for name, fn in _METHODS.items():
        setattr(cls, name, entry(_method(name, fn)))
    for name, fn in _EXTRA_METHODS.items():
        setattr(cls, name, entry(_method(name, fn)))
    cls.flatten = entry(_method("ravel", shape_ops.ravel))
    cls.reshape = entry(_reshape)
    cls.transpose = entry(_transpose)
    cls.astype = entry(_astype)
    cls.__getitem__ = entry(getitem)
    cls.__setitem__ = entry(_setitem)
    cls.at = property(IndexUpdateHelper)
    cls.T = property(lambda self: shape_ops.transpose(self))
    cls.mT = property(lambda self: shape_ops.swapaxes(self, -1, -2))
    cls.real = property(ufuncs.real)
    cls.imag = property(ufuncs.imag)
    cls.view = lambda self, dtype=None: self if dtype is None else shape_ops.view(self, dtype)
    cls.__array_namespace__ = array_api.array_namespace
    cls.to_device = array_api.to_device
    cls.__hash__ = None


attach(Array)
attach(Tracer)


def _traced_copy(self: Any) -> Any:
    """``x.copy()`` of a traced value: a ``copy`` equation, as JAX's (the compiler drops it: arrays
    are immutable; ``Array.copy`` copies the buffer, which a caller may hand on)."""
    return elementwise.copy_p.bind(self)


Tracer.copy = Tracer.__copy__ = _traced_copy


def use_staged(namespace: dict) -> None:
    """Attach again the operators and methods whose functions ``namespace`` stages as named
    sub-programs or replays eagerly (``ember.numpy.staging``), so that ``x // 2`` and ``x.var()``
    are traced as ``jnp.floor_divide`` and ``jnp.var`` are, as in JAX, and ``x @ y`` runs eagerly
    as ``jnp.matmul`` does."""
    for table in (_BINARY, _METHODS):
        for key, fn in table.items():
            staged = namespace.get(fn.__name__)
            if getattr(staged, "__wrapped__", None) is fn and (hasattr(staged, "staged_program")
                                                               or hasattr(staged, "eager_replay")):
                table[key] = staged
    attach(Array)
    attach(Tracer)
