"""``ember.Array``: an immutable array, in host memory or on a backend's device.

It wraps its data plus its abstract value (which carries the weak-type flag). The data of an
array of a host backend is a read-only NumPy buffer (``_value``); that of a device backend is
the backend's buffer (``device_buffer``, a ``DeviceBuffer``), copied to the host the first time
the host needs the value and kept there (``_value`` then). Operators and methods are attached
by ``ember.numpy``, the same functions that tracers use, so eager and traced code behave alike.
"""
from __future__ import annotations

import warnings
from typing import Any, Iterator, Protocol, Sequence

import numpy as np

from ember import dtypes, errors
from ember.core.avals import AvalProperties, ShapedArray, aval_of_value
from ember.core.sharding import (  # noqa: F401  (CPU: re-exported)
    CPU,
    Device,
    Format,
    Shard,
    Sharding,
    SingleDeviceSharding,
    format_of,
    is_placed,
    sharding_of,
    shards_of,
)
from ember.core.trace import Tracer


class DeviceBuffer(Protocol):
    """The data of an array that a device backend holds (``ember.backends.protocols.Backend``)."""

    backend: str  # the name of the backend that holds it (``ember.backends.registry``)
    device: Any  # the device it lives on (one of the backend's ``devices()``)

    @property
    def deleted(self) -> bool:
        """Whether it was freed (donated to a program, or deleted by hand)."""

    def to_host(self) -> np.ndarray:
        """A copy of the data in host memory (C-contiguous, of the array's dtype)."""

    def delete(self) -> None:
        """Free the device memory; the buffer is not used again."""

    def block_until_ready(self) -> None:
        """Wait until the computation that writes it has finished."""


class _ArrayType(type):
    """``isinstance(x, Array)`` holds for tracers too, as ``isinstance(x, jax.Array)`` does in
    JAX (libraries test it to tell arrays from other leaves, also while tracing). Python
    answers for an exact ``Array`` before asking this, so the common case costs nothing."""

    def __instancecheck__(cls, x: Any) -> bool:
        return type.__instancecheck__(cls, x) or isinstance(x, Tracer)


class Array(AvalProperties, metaclass=_ArrayType):
    """A concrete array: a NumPy buffer and its abstract value (``aval``). ``isinstance(x,
    Array)`` is also true of tracers (``_ArrayType``); ``type(x) is Array`` is not."""
    # ``_value``: the host buffer; unset while the data lives only on a device (``_device``, set for
    # device arrays only) and once the array is deleted (``_deleted``, set only then). ``_mirror``: a
    # host array's copy on a device backend, made by the first program there that reads it and
    # reused by later ones (an array is immutable), so a weight or a batch crosses to a TPU once, not
    # per call; it changes no placement (the array stays on the host), and dies with the array.
    __slots__ = ("_value", "aval", "_device", "_mirror", "_deleted", "__weakref__")
    _mirror: DeviceBuffer | None
    __array_priority__ = 100

    def __init__(self, value: np.ndarray, aval: ShapedArray | None = None) -> None:
        if aval is None:
            value = np.asarray(value)
            aval = ShapedArray(value.shape, dtypes.canonicalize_dtype(value.dtype), False)
        if value.dtype != aval.dtype or not isinstance(value, np.ndarray):
            value = np.asarray(value, dtype=aval.dtype)
        # Arrays are immutable. The constructor takes ownership of ``value``;
        # code that wraps a user's buffer copies it first (see ``jnp.asarray``).
        value.setflags(False)  # (write=False; positional: a third of ``flags.writeable``'s cost)
        self._value = value
        self.aval = aval

    @classmethod
    def from_buffer(cls, buffer: DeviceBuffer, aval: ShapedArray) -> "Array":
        """An array whose data is a device backend's ``buffer`` (copied to the host when needed)."""
        array = cls.__new__(cls)
        array._device, array.aval = buffer, aval
        return array

    @property
    def device_buffer(self) -> DeviceBuffer | None:
        """The device backend's buffer holding the data; None for an array in host memory."""
        return self._device

    # --- metadata (shape, dtype, ndim, size, ... come from AvalProperties) ------------
    @property
    def device(self) -> Device:
        buffer = self.device_buffer
        if buffer is not None and buffer.device is not None:
            return buffer.device
        placement = self.sharding
        if len(placement.device_set) != 1:
            raise ValueError("Length of devices is greater than 1. Please use `.devices()`.")
        return next(iter(placement.device_set))

    def devices(self) -> set[Device]:
        return self.sharding.device_set

    @property
    def sharding(self) -> Sharding:
        buffer = self.device_buffer
        if buffer is None:
            return sharding_of(self)
        split = getattr(buffer, "sharding", None)  # (a buffer split over devices says how)
        return split if split is not None else SingleDeviceSharding(buffer.device)

    @property
    def format(self) -> Format:
        """Layout and sharding (``jax.experimental.layout.Format``): dense, row-major."""
        return format_of(self)

    @property
    def addressable_shards(self) -> list:
        buffer = self.device_buffer
        if buffer is None:
            return shards_of(self, Array)
        blocks = getattr(buffer, "shards", None)  # (a buffer split over devices: each device's own)
        if blocks is None:
            return [Shard(buffer.device, tuple(slice(None) for _ in self.shape), 0, self)]
        out, seen = [], {}
        for block, index in zip(blocks, buffer.indices()):
            key = tuple((s.start, s.stop) for s in index)
            replica = seen[key] = seen.get(key, -1) + 1
            out.append(Shard(block.device, index, replica, Array.from_buffer(block, self.aval.update(
                shape=tuple(block.shape)))))
        return out

    @property
    def global_shards(self) -> list:
        """Every device's block (one process holds them all, unless run over MPI)."""
        return self.addressable_shards

    @property
    def committed(self) -> bool:
        """Whether the array was placed on a device or sharding explicitly (``device_put(x, d)``)."""
        return is_placed(self)

    is_fully_addressable = property(lambda self: True, doc="Every block lives in this process.")
    is_fully_replicated = property(lambda self: len(self.sharding.device_set) == 1 or
                                   self.sharding.is_fully_replicated)

    def addressable_data(self, index: int) -> "Array":
        """The block of the ``index``-th addressable shard, as an Array."""
        shards = self.addressable_shards
        if not -len(shards) <= index < len(shards):
            raise IndexError(f"addressable_data: index {index} is out of range for {len(shards)} shards")
        return shards[index].data

    def on_device_size_in_bytes(self) -> int:
        return self.nbytes

    def platform(self) -> str:
        buffer = self.device_buffer
        return "cpu" if buffer is None else buffer.device.platform

    def is_ready(self) -> bool:
        return True  # (ember computes synchronously)

    def unsafe_buffer_pointer(self) -> int:
        """The address of the (read-only) host buffer."""
        return self._value.ctypes.data

    def copy(self) -> "Array":
        """A new Array with a copy of the buffer (in host memory)."""
        return Array(self._value.copy(), self.aval)

    clone = copy

    def __copy__(self) -> "Array":
        return self.copy()

    def __deepcopy__(self, memo: Any) -> "Array":
        return self.copy()

    def tobytes(self, order: str = "C") -> bytes:
        return self._value.tobytes(order)

    @property
    def __numpy_dtype__(self) -> np.dtype:
        return self.dtype

    @property
    def flat(self) -> Any:
        raise NotImplementedError("JAX Arrays do not implement the arr.flat property: consider arr.flatten() instead.")

    def __hex__(self) -> str:
        return hex(self.__index__())

    def __oct__(self) -> str:
        return oct(self.__index__())

    # --- conversion to Python / NumPy -------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if copy:
            return np.array(self._value, dtype=dtype)
        return self._value if dtype is None else self._value.astype(dtype, copy=False)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self) -> Iterator["Array"]:
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def _scalar(self, what: str) -> Any:
        if self.ndim:  # (even of one element, as JAX)
            raise TypeError(f"Only scalar arrays can be converted to Python scalars; got arr.ndim={self.ndim}")
        return self._value[()]

    def __bool__(self) -> bool:
        if self.size == 0:  # NumPy's messages, as JAX's
            raise ValueError("The truth value of an empty array is ambiguous. Use `array.size > 0` to check "
                             "that an array is not empty.")
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous. "
                             "Use a.any() or a.all()")
        return bool(self._value.reshape(())[()])

    def __int__(self) -> int:
        return int(self._python_scalar("int"))

    def __float__(self) -> float:
        return float(self._python_scalar("float"))

    def _python_scalar(self, what: str) -> Any:
        """The value as Python's type, so that ``float()`` and ``int()`` of a complex value are
        Python's TypeError (as in JAX), not NumPy's warning and a dropped imaginary part."""
        value = self._scalar(what)
        return value.item() if isinstance(value, np.complexfloating) else value

    def __complex__(self) -> complex:
        return complex(self._scalar("complex"))

    def __index__(self) -> int:
        if not dtypes.is_integer(self.dtype) or self.ndim:
            raise TypeError("Only integer scalar arrays can be converted to a scalar index.")
        return int(self._value[()])

    def item(self, *args: Any) -> Any:
        return self._value.item(*args)

    def tolist(self) -> Any:
        return self._value.tolist()

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return format(self._value[()], spec)
        return format(str(self), spec)

    __hash__ = None  # type: ignore[assignment]  # unhashable, as in JAX

    def __repr__(self) -> str:
        if self.size == 0 and self.ndim > 0:
            body = f"[], shape={self.shape}"
        else:
            body = np.array2string(self._value, separator=", ", prefix="Array(",
                                   max_line_width=80, threshold=1000)
        extra = ", weak_type=True" if self.weak_type else ""
        name = self.dtype.name
        return f"Array({body}, dtype={name}{extra})"

    def __str__(self) -> str:
        return str(self._value)

    # --- lifecycle ------------------------------------------------------------------
    def block_until_ready(self) -> "Array":
        buffer = self.device_buffer
        if buffer is not None:
            buffer.block_until_ready()
        return self

    def copy_to_host_async(self) -> None:
        return None

    def is_deleted(self) -> bool:
        return getattr(self, "_deleted", None) is not None

    def delete(self) -> None:
        """Release the buffer; any later use raises RuntimeError."""
        self._mark_deleted("")

    def _mark_deleted(self, reason: str) -> None:
        if not self.is_deleted():
            buffer = self.device_buffer
            try:
                del self._value
            except AttributeError:  # (on a device, never copied to the host)
                pass
            if buffer is not None:
                del self._device
                buffer.delete()
            mirror = self._mirror
            if mirror is not None:
                del self._mirror
                mirror.delete()
            self._deleted = reason

    def __getattr__(self, name: str) -> Any:
        # Only reached for unset slots: ``_device`` is set for arrays on a device only (None here
        # without raising: the donation path asks per argument); ``_value`` is unset once the
        # array is deleted, and until the host first needs the data of an array on a device
        # (copied then, once).
        if name == "_device" or name == "_mirror":
            return None
        if name == "_value":
            if self.is_deleted():
                raise errors.DeletedArrayError(
                    f"Array has been deleted with shape={type_string(self.aval)}.{self._deleted}")
            buffer = self.device_buffer
            if buffer is not None:
                value = np.asarray(buffer.to_host(), dtype=self.aval.dtype).reshape(self.aval.shape)
                value.flags.writeable = False
                self._value = value
                return value
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __reduce__(self):
        return (_rebuild, (self._value, self.aval))

    # --- DLPack ---------------------------------------------------------------------
    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[Any, int] | None = None, copy: bool | None = None) -> Any:
        """The array as a DLPack capsule (the Array API's signature). ember arrays live in host
        memory: ``stream`` must be None, ``dl_device`` the CPU. A consumer of a DLPack version
        older than 1.0 (no ``max_version``) cannot be told the buffer is read-only, so it gets a
        copy, unless ``copy=False`` forbids one (a BufferError, as the standard says)."""
        if stream is not None:
            raise BufferError(f"__dlpack__: ember arrays live on the CPU, which has no streams; stream must be "
                              f"None, got {stream!r}")
        kwargs = {k: v for k, v in (("max_version", max_version), ("dl_device", dl_device), ("copy", copy))
                  if v is not None}
        try:
            return self._value.__dlpack__(**kwargs)
        except BufferError:
            if copy is False or (dl_device is not None and tuple(dl_device)[:1] != (1,)):
                raise
            # Old DLPack consumers cannot be told a buffer is read-only; give them a copy.
            return self._value.copy().__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self._value.__dlpack_device__()


def type_string(aval: ShapedArray) -> str:
    """``float32[3,4]``: how JAX names an array type in messages."""
    return f"{aval.dtype.name}[{','.join(map(str, aval.shape))}]"


def _rebuild(value: np.ndarray, aval: ShapedArray) -> Array:
    return Array(value, aval)


class ShapeDtypeStruct:
    """A shape and dtype without data: describes arguments to ``make_jaxpr`` / ``eval_shape``."""

    __slots__ = ("shape", "dtype", "weak_type", "sharding")

    def __init__(self, shape: tuple, dtype: Any, weak_type: bool = False, *, sharding: Sharding | None = None) -> None:
        self.shape = tuple(int(d) for d in shape)
        # (an extended dtype, a typed key's ``key<fry>``, is kept as it is: it is no NumPy dtype)
        self.dtype = dtype if isinstance(dtype, dtypes.KeyTy) else dtypes.canonicalize_dtype(dtype)
        self.weak_type = weak_type
        if sharding is not None and not isinstance(sharding, Sharding):
            raise TypeError(f"ShapeDtypeStruct: sharding must be a jax.sharding.Sharding, got {sharding!r}")
        self.sharding = sharding

    @property
    def aval(self) -> ShapedArray:
        return ShapedArray(self.shape, self.dtype, self.weak_type)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    @classmethod
    def like(cls, x: Any) -> "ShapeDtypeStruct":
        """The shape, dtype and weak type of ``x``: an array, a tracer, a NumPy array or scalar, a
        Python scalar, or anything with ``shape`` and ``dtype`` (a ShapeDtypeStruct, an aval)."""
        a = getattr(x, "aval", None)
        if not isinstance(a, ShapedArray):
            if isinstance(x, ShapedArray) or (hasattr(x, "shape") and hasattr(x, "dtype")
                                              and not isinstance(x, (np.ndarray, np.generic))):
                weak = bool(getattr(x, "weak_type", False))
                a = ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(x.dtype), weak)
            elif type(x) in (bool, int, float, complex) or isinstance(x, (np.ndarray, np.generic)):
                a = aval_of_value(x)
            else:
                raise TypeError(f"Cannot interpret value of type {type(x)} as an abstract array; it does not have a "
                                "dtype attribute")
        sharding = x.sharding if isinstance(x, ShapeDtypeStruct) else None  # (kept, as JAX keeps it)
        return cls(a.shape, a.dtype, weak_type=a.weak_type, sharding=sharding)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ShapeDtypeStruct) and \
            (self.shape, self.dtype, self.weak_type) == (other.shape, other.dtype, other.weak_type)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"


# --- concrete values to Arrays ------------------------------------------------------------------
def ensure_array(x: Any) -> Any:
    """An Array or Tracer for anything array-like: arrays and tracers pass through, a
    concrete value becomes an Array (Python scalars weakly typed), as ``as_array``."""
    return x if isinstance(x, (Array, Tracer)) else as_array(x)


def as_array(a: Any, dtype: Any = None) -> Array:
    """An Array holding a concrete value: a Python scalar (weakly typed), a NumPy array or
    scalar, an object with ``__array__`` or ``__jax_array__``, or nested lists of them (which
    are strongly typed, as in JAX). ``dtype``, if given, must be canonical. The data is
    copied, so the Array never shares a buffer that the caller can still write."""
    if isinstance(a, (list, tuple)):
        return _array_from_sequence(a, dtype)
    if hasattr(a, "__jax_array__"):
        return as_array(a.__jax_array__(), dtype)
    scalar = type(a) in (bool, int, float, complex)
    if scalar or isinstance(a, (np.ndarray, np.generic)) or hasattr(a, "__array__"):
        dt, weak = dtypes.value_dtype_and_weak(a) if not hasattr(a, "__array__") or isinstance(
            a, (np.ndarray, np.generic)) else (dtypes.canonicalize_dtype(np.asarray(a).dtype), False)
        target = dtype or dt
        if isinstance(a, int) and dtype is not None:
            dt = target  # straight into the requested type, as JAX: asarray(2**32 - 1, uint32) fits
        value = np.array(a, dtype=dt if scalar else None)
        if value.dtype != target:
            value = _converted(value, target)
        return Array(np.array(value, dtype=target), ShapedArray(value.shape, target, weak and dtype is None))
    if isinstance(a, complex):  # a subclass of complex
        return as_array(complex(a), dtype)
    if isinstance(a, (str, bytes)):
        raise _not_numeric(a)
    raise TypeError(f"cannot convert a value of type {type(a).__name__} to an ember array")


def _not_numeric(x: Any) -> TypeError:
    return TypeError(f"Value {x!r} with dtype {np.asarray(x).dtype} is not a valid ember array type. Only arrays "
                     "of numeric types are supported (as in JAX).")


def _array_from_sequence(seq: Sequence, dtype: Any) -> Array:
    leaves = flatten_nested(seq)
    value = np.array(_to_host(seq))
    if value.dtype.kind in "OSU":  # strings, None or other objects among the leaves, or a ragged nesting
        for leaf in leaves:
            if leaf is None:
                raise ValueError("None is not a valid value for jnp.array")
            if not (type(leaf) in (bool, int, float, complex) or hasattr(leaf, "__array__")
                    or hasattr(leaf, "__jax_array__")) or isinstance(leaf, (str, bytes)):
                raise _not_numeric(leaf)
        if value.dtype.kind in "SU":
            raise _not_numeric(value)
        _check_python_ints(leaves, dtype or np.dtype(np.int64))  # (past int64: NumPy keeps objects)
        raise ValueError(f"cannot build an array from a ragged or mixed sequence {seq!r}")
    if dtype is None:  # a list of scalars is strongly typed, as in JAX
        dtype = dtypes.result_type(*leaves) if leaves else dtypes.default_float_dtype()
    _check_python_ints(leaves, dtype)
    return Array(np.array(_converted(value, dtype), dtype=dtype), ShapedArray(value.shape, dtype, False))


def _check_python_ints(leaves: list, dtype: np.dtype) -> None:
    """JAX's OverflowError for a Python int that the integer ``dtype`` cannot hold (NumPy's
    values, ints of other types, wrap when converted; a Python int is a value the user wrote)."""
    if np.dtype(dtype).kind not in "iu":
        return
    ints = [x for x in leaves if type(x) is int]
    if ints:
        info = np.iinfo(dtype)
        for bad in (min(ints), max(ints)):
            if not info.min <= bad <= info.max:
                raise OverflowError(f"Python integer {bad} out of bounds for {np.dtype(dtype).name}")


def _converted(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``value`` in ``dtype``; complex to real warns, as ``lax.convert_element_type`` and JAX do."""
    if dtypes.is_complex(value.dtype) and not dtypes.is_complex(dtype):
        warnings.warn("Casting complex values to real discards the imaginary part", np.exceptions.ComplexWarning,
                      stacklevel=4)
    return dtypes.convert_values(value, dtype)


def _to_host(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_to_host(v) for v in x]
    if type(x) is Array:
        return np.asarray(x)
    return x


def flatten_nested(x: Any) -> list:
    """The leaves of nested lists and tuples."""
    if isinstance(x, (list, tuple)):
        return [leaf for v in x for leaf in flatten_nested(v)]
    return [x]
