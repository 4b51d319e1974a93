"""``jax.dlpack``: arrays from other libraries' buffers (``from_dlpack``), and the dtypes that
DLPack exchange supports (``is_supported_dtype``). The other direction needs nothing here:
ember arrays have ``__dlpack__``, which ``np.from_dlpack`` and ``torch.from_dlpack`` take."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.numpy.creation import from_dlpack as _from_dlpack

__all__ = ["from_dlpack", "is_supported_dtype"]

SUPPORTED_DTYPES = frozenset(np.dtype(d) for d in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, dtypes.bfloat16, np.float32, np.float64, np.complex64, np.complex128, np.bool_))


def from_dlpack(external_array: Any, device: Any = None, copy: bool | None = None) -> Any:
    """An Array of the data of ``external_array`` (any object with ``__dlpack__``: NumPy, PyTorch,
    JAX, ...), placed on ``device``; copied unless ``copy=False`` asks to share the buffer."""
    return _from_dlpack(external_array, device=device, copy=copy)


def is_supported_dtype(dtype: Any) -> bool:
    """Whether arrays of ``dtype`` can cross DLPack (JAX's list)."""
    if dtype is None:  # (NumPy would silently take it for float64)
        raise TypeError(f"Expected a string or dtype-like object; got {dtype=}")
    return np.dtype(dtype) in SUPPORTED_DTYPES
