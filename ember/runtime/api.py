"""Moving data in and out of ember: device_put, block_until_ready, DLPack."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import tree_util
from ember.runtime.array import CPU, Array, Device, ShapeDtypeStruct  # noqa: F401


def devices(backend: str | None = None) -> list[Device]:
    return [CPU]


def device_put(x: Any, device: Any = None) -> Any:
    """Copy a pytree of arrays / scalars onto ember's device (as Arrays)."""
    from ember.numpy import asarray

    return tree_util.tree_map(lambda leaf: leaf if isinstance(leaf, Array) else asarray(leaf), x)


def block_until_ready(x: Any) -> Any:
    """Wait for every array in a pytree (ember runs synchronously; kept for JAX compatibility)."""
    if type(x) is Array:  # the common case, in timing loops: no tree to walk
        return x
    for leaf in tree_util.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


def from_dlpack(x: Any, *, copy: bool | None = None) -> Array:
    """An Array from any object with ``__dlpack__`` (NumPy, PyTorch, JAX, ...).

    The data is copied: ember arrays are immutable and must not change when
    the producer writes to its buffer.
    """
    from ember.numpy import asarray

    return asarray(np.array(np.from_dlpack(x), copy=True))
