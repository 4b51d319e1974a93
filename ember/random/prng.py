"""Typed PRNG key arrays: what ``ember.random.key`` returns (JAX's ``PRNGKeyArray``).

A ``PRNGKeyArray`` of shape ``s`` holds raw uint32 key data of shape ``s + (2,)`` and shows the
shape ``s`` and dtype ``key<fry>`` (``ember.dtypes.KeyTy``); ``repr`` is JAX's
``Array((), dtype=key<fry>) overlaying:\\n[0 0]``. It supports what JAX's key arrays support
that does not need ``jax.numpy``: indexing, iteration, ``len``, ``reshape``/``ravel``/
``flatten``/``squeeze``/``transpose``/``swapaxes``/``.T``, ``.at[i].set``, ``==``/``!=`` between
keys, ``copy``, pickling, and ``aval``/``jax.typeof`` (``ShapedArray(key<fry>[])``).
Arithmetic, ordering comparisons and conversion to NumPy raise JAX's errors.

It is a pytree leaf, as in JAX (``tree_leaves(k)`` is ``[k]``, ``tree_map`` hands its function
the key), and to the transformations an *array node* whose one child is the raw data
(``ember.tree_util.register_array_node``): ``jit``, ``vmap``, ``scan``, ``fori_loop``, ``cond``,
``grad`` and ``eval_shape`` flatten with ``flatten_for_trace``, trace a uint32 leaf, and rebuild
the key around what comes out. A float0 cotangent (``grad(..., allow_int=True)``, ``vjp``)
comes back as float0 of the key's shape, and an abstract result (``eval_shape``) as a
``ShapeDtypeStruct`` of key dtype, as in JAX; ``vmap``'s negative ``in_axes``/``out_axes`` count
the key's axes.

The class derives from ``ember.Array`` so that ``isinstance(k, jax.Array)`` holds, as in JAX;
it takes none of ``Array``'s storage, and overrides every method and operator, so that an
ember function handed a key fails (``jnp.sum(k)`` is a TypeError: "Cannot interpret
'key<fry>' as a data type") rather than computing on the words; the ``jnp`` functions that
join and select keys in JAX do so here too (``ember.numpy.keys``).
"""
from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ember import dtypes, numpy as jnp
from ember.api import extended_dtype_structs
from ember.core.array import Array, ShapeDtypeStruct
from ember.core.avals import ShapedArray
from ember.core.trace import Tracer
from ember.lax.base import aval
from ember.random import impls
from ember.tree_util import register_array_node

KEY_DTYPE = impls.THREEFRY.dtype  # (the default implementation's)


def _other_dtype_name(x: Any) -> str:
    """How JAX names an operand's dtype in its "does not accept dtypes" messages."""
    if isinstance(x, PRNGKeyArray):
        return x.dtype.name
    try:
        return dtypes.value_dtype_and_weak(x)[0].name
    except (TypeError, ValueError):
        return type(x).__name__


def _binary(name: str, reflected: bool = False) -> Any:
    def op(self: PRNGKeyArray, other: Any) -> Any:
        names = (_other_dtype_name(other), self.dtype.name) if reflected else (self.dtype.name,
                                                                                _other_dtype_name(other))
        if isinstance(other, PRNGKeyArray):
            raise TypeError(f"{name} does not accept dtype {self.dtype} at position 0. Accepted dtypes at "
                            "position 0 are subtypes of integer, floating, complexfloating.")
        raise TypeError(f"{name} does not accept dtypes {names[0]}, {names[1]}.")
    return op


def _ordering(lax_name: str, jnp_name: str) -> Any:
    def op(self: PRNGKeyArray, other: Any) -> Any:
        if isinstance(other, PRNGKeyArray):
            raise TypeError(f"{lax_name} does not accept dtype {self.dtype} at position 0. Accepted dtypes at "
                            "position 0 are subtypes of integer, floating, bool.")
        raise TypeError(f"{jnp_name} does not accept dtypes {self.dtype}, {_other_dtype_name(other)}.")
    return op


def _unary(name: str, accepted: str) -> Any:
    def op(self: PRNGKeyArray) -> Any:
        raise TypeError(f"{name} does not accept dtype {self.dtype}. Accepted dtypes are subtypes of {accepted}.")
    return op


def _abstract(name: str) -> Any:
    def method(self: PRNGKeyArray, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"Cannot call abstract method {name}")
    method.__name__ = name
    return method


def _absent(name: str) -> property:
    """An attribute that ``Array`` has and JAX's key arrays do not: AttributeError."""
    def get(self: PRNGKeyArray) -> Any:
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
    return property(get)


def _resolve_shape(shape: tuple, size: int) -> tuple[int, ...] | None:
    """``shape`` with one -1 filled in to hold ``size`` elements, or None if it cannot."""
    shape = tuple(operator.index(d) for d in shape)
    known = math.prod(d for d in shape if d != -1)
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        return None
    if -1 in shape:
        if known == 0 or size % known:
            return None
        shape = tuple(size // known if d == -1 else d for d in shape)
    return shape if math.prod(shape) == size else None


class _KeyArrayType(type(Array)):
    """``isinstance(x, PRNGKeyArray)`` is true of key arrays only (``Array``'s own check also
    admits every tracer)."""

    def __instancecheck__(cls, x: Any) -> bool:
        return type.__instancecheck__(cls, x)


class PRNGKeyArray(Array, metaclass=_KeyArrayType):
    """An array of typed keys of one implementation (``impls``: dtype ``key<fry>`` for Threefry-2x32,
    ``key<rbg>``, ``key<urbg>``) over uint32 data of shape ``shape + (words,)`` (``key_data``); see the
    module docstring."""

    __slots__ = ("_key_data", "_impl")

    def __init__(self, key_data: Any, impl: impls.PRNGImpl = impls.THREEFRY) -> None:  # (Array's storage stays unset)
        self._key_data = key_data
        self._impl = impl

    def _new(self, key_data: Any) -> PRNGKeyArray:
        """Keys of this array's implementation over other data."""
        return PRNGKeyArray(key_data, self._impl)

    # --- metadata ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._key_data.shape[:-1])

    @property
    def dtype(self) -> dtypes.KeyTy:
        return self._impl.dtype

    @property
    def aval(self) -> Any:
        """``ShapedArray(key<fry>[...])``, as ``jax.typeof(k)`` shows it (flax.nnx asks)."""
        return ShapedArray(self.shape, self.dtype, False)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    sharding = property(lambda self: self._key_data.sharding)
    device = property(lambda self: self._key_data.device)
    addressable_shards = _absent("addressable_shards")
    weak_type = _absent("weak_type")
    tolist = _absent("tolist")
    at = property(lambda self: _KeyIndexUpdateHelper(self))

    def devices(self) -> Any:
        return self._key_data.devices()

    def is_deleted(self) -> bool:
        return isinstance(self._key_data, Array) and self._key_data.is_deleted()

    def delete(self) -> None:
        self._key_data.delete()

    def block_until_ready(self) -> PRNGKeyArray:
        return self

    def copy_to_host_async(self) -> None:
        return None

    # --- reprs ------------------------------------------------------------------------------
    def __repr__(self) -> str:
        data = self._key_data
        if isinstance(data, Tracer):
            # The tracer's own repr, its uint32[..., words] types shown as key<fry>[...].
            return re.sub(rf"~?uint32\[((?:\d+,)*){self._impl.words}\]",
                          lambda m: f"{self.dtype}[{m.group(1).rstrip(',')}]", repr(data))
        if isinstance(data, ShapeDtypeStruct):
            return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype})"
        if not isinstance(data, (Array, np.ndarray)):
            return f"PRNGKeyArray({data!r})"
        return f"Array({self.shape}, dtype={self.dtype}) overlaying:\n{np.asarray(data)}"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(repr(self), spec)

    # --- conversions JAX refuses -----------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array. Use "
                        "jax.random.key_data(arr) if you wish to extract the underlying integer array.")

    def __bool__(self) -> bool:
        raise TypeError("key array cannot be converted to boolean.")

    def _no_scalar(self, kind: str) -> Any:
        accepted = {"int": "a string, a bytes-like object or a real number", "float": "a string or a real number",
                    "complex": "a string or a number"}[kind]
        raise TypeError(f"{kind}() argument must be {accepted}, not {type(self).__name__!r}")

    __int__ = lambda self: self._no_scalar("int")  # noqa: E731
    __float__ = lambda self: self._no_scalar("float")  # noqa: E731
    __complex__ = lambda self: self._no_scalar("complex")  # noqa: E731

    def __index__(self) -> int:
        raise TypeError("key arrays cannot be used as an index")

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("key arrays cannot be exported with DLPack; export jax.random.key_data(arr)")

    __dlpack_device__ = __dlpack__

    def __reduce__(self) -> tuple:
        return (_rebuild, (self._key_data, self._impl.name))

    __hash__ = None  # type: ignore[assignment]  # unhashable, as in JAX

    # --- comparison: keys equal when both words do -------------------------------------------------
    def _compare(self, other: Any, name: str, equal: bool) -> Any:
        if not isinstance(other, PRNGKeyArray):
            raise TypeError(f"{name} does not accept dtypes {self.dtype}, {_other_dtype_name(other)}.")
        same = jnp.all(jnp.equal(self._key_data, other._key_data), axis=-1)
        return same if equal else jnp.logical_not(same)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "equal", True)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return self._compare(other, "not_equal", False)

    __lt__, __le__ = _ordering("lt", "less"), _ordering("le", "less_equal")
    __gt__, __ge__ = _ordering("gt", "greater"), _ordering("ge", "greater_equal")

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("subtract"), _binary("subtract", True)
    __mul__, __rmul__ = _binary("multiply"), _binary("multiply", True)
    __truediv__, __rtruediv__ = _binary("true_divide"), _binary("true_divide", True)
    __floordiv__, __rfloordiv__ = _binary("floor_divide"), _binary("floor_divide", True)
    __mod__, __rmod__ = _binary("remainder"), _binary("remainder", True)
    __divmod__, __rdivmod__ = _binary("divmod"), _binary("divmod", True)
    def __pow__(self, other: Any) -> Any:
        raise TypeError(f"Cannot interpret '{self.dtype}' as a data type")

    __rpow__ = __pow__
    __matmul__, __rmatmul__ = _binary("matmul"), _binary("matmul", True)
    __and__, __rand__ = _binary("bitwise_and"), _binary("bitwise_and", True)
    __or__, __ror__ = _binary("bitwise_or"), _binary("bitwise_or", True)
    __xor__, __rxor__ = _binary("bitwise_xor"), _binary("bitwise_xor", True)
    __lshift__, __rlshift__ = _binary("left_shift"), _binary("left_shift", True)
    __rshift__, __rrshift__ = _binary("right_shift"), _binary("right_shift", True)
    __neg__ = _unary("neg", "integer, floating, complexfloating")
    __invert__ = _unary("not", "integer, bool")
    __abs__ = _unary("abs", "floating, complexfloating, signedinteger")

    def __pos__(self) -> PRNGKeyArray:
        return self

    real = property(lambda self: _abstract("real")(self))
    imag = property(lambda self: _abstract("imag")(self))
    mT = property(lambda self: _abstract("mT")(self))

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TypeError("JAX arrays are immutable and do not support in-place item assignment; key arrays too.")

    # --- indexing and iteration -------------------------------------------------------------------
    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Iterator[PRNGKeyArray]:
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(self.shape[0]))

    def __getitem__(self, index: Any) -> PRNGKeyArray:
        return self._new(self._key_data[self._data_index(index)])

    def _data_index(self, index: Any) -> tuple:
        """The index of the key data that selects the keys ``index`` selects (every word)."""
        index = index if isinstance(index, tuple) else (index,)
        if any(isinstance(i, PRNGKeyArray) for i in index):
            raise TypeError("key arrays cannot be used as an index")
        counted = sum(aval(i).ndim if (isinstance(i, (Array, Tracer, np.ndarray)) and
                                       dtypes.dtype(i.dtype) == dtypes.bool_) else 1
                      for i in index if i is not None and i is not Ellipsis)
        if counted > self.ndim:
            raise IndexError(f"Too many indices: array is {self.ndim}-dimensional, but {counted} were indexed")
        if not any(i is Ellipsis for i in index):
            index = (*index, Ellipsis)
        return (*index, slice(None))

    # --- shape methods ------------------------------------------------------------------------------
    def reshape(self, *shape: Any, order: str = "C") -> PRNGKeyArray:
        if order != "C":
            raise NotImplementedError("key arrays reshape only in C order")
        requested = shape[0] if len(shape) == 1 and isinstance(shape[0], Sequence) else shape
        if len(shape) == 1 and not isinstance(shape[0], Sequence):
            requested = (shape[0],)
        new = _resolve_shape(tuple(requested), self.size)
        if new is None:
            shown = shape[0] if len(shape) == 1 else tuple(shape)
            raise TypeError(f"cannot reshape array of shape {self.shape} (size {self.size}) into shape {shown} "
                            f"(size {math.prod(requested)})")
        return self._new(jnp.reshape(self._key_data, (*new, self._impl.words)))

    def ravel(self, order: str = "C") -> PRNGKeyArray:
        return self.reshape(self.size, order=order)

    flatten = ravel

    def squeeze(self, axis: Any = None) -> PRNGKeyArray:
        if axis is None:
            axes = tuple(i for i, d in enumerate(self.shape) if d == 1)
        else:
            axes = tuple(operator.index(a) for a in (axis if isinstance(axis, Sequence) else (axis,)))
            axes = tuple(a + self.ndim if a < 0 else a for a in axes)
            if any(not 0 <= a < self.ndim for a in axes):
                raise ValueError(f"axis {axis} is out of bounds for a key array of dimension {self.ndim}")
            if any(self.shape[a] != 1 for a in axes):
                raise ValueError("cannot select an axis to squeeze out which has size not equal to one, "
                                 f"got shape={self.shape} and dimensions={axes}")
        return self.reshape(tuple(d for i, d in enumerate(self.shape) if i not in axes))

    def transpose(self, *axes: Any) -> PRNGKeyArray:
        if not axes or axes == (None,):
            order = tuple(reversed(range(self.ndim)))
        else:
            order = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], Sequence) else axes
            order = tuple(operator.index(a) % self.ndim if self.ndim else operator.index(a) for a in order)
            if sorted(order) != list(range(self.ndim)):
                raise ValueError(f"axes {tuple(axes)} don't match a key array of dimension {self.ndim}")
        return self._new(jnp.transpose(self._key_data, (*order, self.ndim)))

    T = property(lambda self: self.transpose())

    def swapaxes(self, axis1: int, axis2: int) -> PRNGKeyArray:
        order = list(range(self.ndim))
        a, b = operator.index(axis1) % max(self.ndim, 1), operator.index(axis2) % max(self.ndim, 1)
        order[a], order[b] = order[b], order[a]
        return self.transpose(order)

    def copy(self) -> PRNGKeyArray:
        return self


class _KeyIndexUpdateHelper:
    """``keys.at[index].set(new_keys)`` and ``.get()``: functional updates of key arrays."""

    __slots__ = ("keys",)

    def __init__(self, keys: PRNGKeyArray) -> None:
        self.keys = keys

    def __getitem__(self, index: Any) -> _KeyIndexUpdateRef:
        return _KeyIndexUpdateRef(self.keys, index)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.keys!r})"


class _KeyIndexUpdateRef:
    __slots__ = ("keys", "index")

    def __init__(self, keys: PRNGKeyArray, index: Any) -> None:
        self.keys, self.index = keys, index

    def get(self, **kwargs: Any) -> PRNGKeyArray:
        return self.keys[self.index]

    def set(self, values: Any, **kwargs: Any) -> PRNGKeyArray:
        if not isinstance(values, PRNGKeyArray):
            raise TypeError(f"scatter does not accept dtypes {self.keys.dtype}, {_other_dtype_name(values)}: key "
                            "arrays are updated with keys")
        data = self.keys._key_data
        return self.keys._new(data.at[self.keys._data_index(self.index)].set(values._key_data, **kwargs))


# Array's numeric methods, which JAX's key arrays have only as abstract methods.
for _name in ("all", "any", "argmax", "argmin", "argsort", "astype", "clip", "conj", "conjugate", "cumprod", "cumsum",
              "diagonal", "dot", "item", "max", "mean", "min", "nonzero", "prod", "ptp", "repeat", "round",
              "searchsorted", "sort", "std", "sum", "take", "trace", "var", "view"):
    setattr(PRNGKeyArray, _name, _abstract(_name))
del _name


def _rebuild(key_data: Any, impl_name: str) -> PRNGKeyArray:
    return PRNGKeyArray(key_data, impls.IMPLEMENTATIONS[impl_name])


def _flatten(keys: PRNGKeyArray) -> tuple[tuple[Any], impls.PRNGImpl]:
    return (keys._key_data,), keys._impl


def _unflatten(impl: impls.PRNGImpl, children: Sequence[Any]) -> Any:
    (data,) = children
    # A float0 cotangent (grad with allow_int, vjp) is float0 of the key's shape, as in JAX.
    if getattr(data, "dtype", None) is not None and isinstance(data.dtype, np.dtype) and data.dtype == dtypes.float0:
        return np.zeros(tuple(data.shape[:-1]), dtypes.float0)
    # An abstract result (eval_shape, jit(f).trace(...).out_info): a ShapeDtypeStruct of key dtype.
    if isinstance(data, ShapeDtypeStruct):
        return ShapeDtypeStruct(tuple(data.shape[:-1]), impl.dtype)
    return PRNGKeyArray(data, impl)


def _key_struct(struct: ShapeDtypeStruct) -> PRNGKeyArray:
    """The key array a ShapeDtypeStruct of key dtype stands for while tracing (``eval_shape``,
    ``jit(f).trace``): keys over abstract uint32 data."""
    impl = impls.resolve("ShapeDtypeStruct", struct.dtype)
    return PRNGKeyArray(ShapeDtypeStruct(struct.shape + (impl.words,), dtypes.uint32), impl)


# A leaf of the user's trees (as in JAX); a node over its uint32 data for the transformations.
register_array_node(PRNGKeyArray, _flatten, _unflatten)
for _impl in impls.IMPLEMENTATIONS.values():
    extended_dtype_structs[type(_impl.dtype)] = _key_struct
