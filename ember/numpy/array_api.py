"""The Python Array API standard's metadata (``__array_api_version__``,
``__array_namespace_info__``) and the ``device=`` placement of the creation functions.

As in JAX, the namespace info reports ``None`` as the default device (an array nobody placed is
"uncommitted"; ember keeps it on device 0) and lists it first among the devices; the dtypes it
lists are the standard's, the 64-bit ones only with x64 on.
"""
from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from ember import dtypes
from ember.config import config
from ember.core import sharding
from ember.core.array import Array
from ember.core.trace import Tracer

__all__ = ["__array_api_version__", "__array_namespace_info__", "ArrayNamespaceInfo"]

__array_api_version__ = "2024.12"


def array_namespace(self: Any, *, api_version: str | None = None) -> ModuleType:
    """``Array.__array_namespace__``: ``ember.numpy``, for the standard's one version."""
    if api_version is not None and api_version != __array_api_version__:
        raise ValueError(f"api_version={api_version!r} is not available; available versions are: "
                         f"{[__array_api_version__]}")
    return sys.modules[__package__]  # (ember.numpy: the package this module belongs to)


def __array_namespace_info__() -> "ArrayNamespaceInfo":
    return ArrayNamespaceInfo()


_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_KINDS["integral"] = _KINDS["signed integer"] + _KINDS["unsigned integer"]
_KINDS["numeric"] = _KINDS["integral"] + _KINDS["real floating"] + _KINDS["complex floating"]
_WIDE = frozenset({"int64", "uint64", "float64", "complex128"})


class ArrayNamespaceInfo:
    """What ``__array_namespace_info__()`` returns (JAX's answers)."""

    _capabilities = {
        "boolean indexing": False,  # (not within transformations)
        "data-dependent shapes": False,  # (not within transformations)
        "max dimensions": 64,
    }

    def capabilities(self) -> dict[str, Any]:
        return dict(self._capabilities)

    def default_device(self) -> None:
        return None

    def devices(self) -> list[Any]:
        return [None, *sharding.devices()]

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        del device  # (the same on every device)
        return {
            "real floating": dtypes.default_float_dtype(),
            "complex floating": dtypes.default_complex_dtype(),
            "integral": dtypes.default_int_dtype(),
            "indexing": dtypes.default_int_dtype(),
        }

    def dtypes(self, *, device: Any = None, kind: str | tuple[str, ...] | None = None) -> dict[str, Any]:
        del device
        if kind is None:
            names = ("bool",) + _KINDS["numeric"]
        else:
            names = ()
            for k in (kind if isinstance(kind, tuple) else (kind,)):
                if k not in _KINDS:
                    raise ValueError(f"dtypes: unknown kind {k!r}; kinds: {sorted(_KINDS)}")
                names += _KINDS[k]
        wide = config.enable_x64
        return {n: dtypes.dtype(n) for n in names if wide or n not in _WIDE}


def place(x: Any, device: Any) -> Any:
    """``x`` placed on ``device`` (a Device or a Sharding; None: where it is). Traced values are
    returned as they are (placement is of concrete arrays); a given array is not re-placed, a
    copy sharing its buffer is."""
    if device is None or isinstance(x, Tracer):
        return x
    if isinstance(x, Array):
        x = Array(x._value, x.aval)
    return sharding.put(x, device)


def to_device(self: Any, device: Any, *, stream: Any = None) -> Any:
    """``Array.to_device``: a copy of the array placed on ``device``."""
    if stream is not None:
        raise NotImplementedError("to_device: stream is not supported (ember runs synchronously)")
    return place(self, device)
