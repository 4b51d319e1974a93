"""Where arrays live: the one device, and JAX's sharding objects for it (``jax.sharding``).

ember runs on one CPU device, so every sharding places a whole array on it: the objects exist
so that programs and libraries that build or inspect them run (``Array.sharding``,
``ShapeDtypeStruct(..., sharding=...)``; a mesh of more than one device cannot be made). Their
questions get the answers JAX gives for a single-device placement.
"""
from __future__ import annotations

import enum
from typing import Any

import numpy as np


class Device:
    """The one device ember runs on for now."""

    platform = "cpu"
    device_kind = "cpu"
    id = 0
    process_index = 0

    def __repr__(self) -> str:
        return "CpuDevice(id=0)"


CPU = Device()


class Sharding:
    """Where the parts of an array live: here, the whole array on the one device."""

    memory_kind: str | None = None

    @property
    def device_set(self) -> set[Device]:
        return {CPU}

    @property
    def addressable_devices(self) -> set[Device]:
        return {CPU}

    @property
    def num_devices(self) -> int:
        return 1

    @property
    def is_fully_replicated(self) -> bool:
        return True

    @property
    def is_fully_addressable(self) -> bool:
        return True

    def shard_shape(self, global_shape: tuple) -> tuple:
        return tuple(global_shape)

    def addressable_devices_indices_map(self, global_shape: tuple) -> dict:
        return {CPU: tuple(slice(None) for _ in global_shape)}

    def with_memory_kind(self, kind: str) -> "Sharding":
        return self


class SingleDeviceSharding(Sharding):
    def __init__(self, device: Device = CPU, *, memory_kind: str | None = None) -> None:
        self._device = device
        self.memory_kind = memory_kind

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SingleDeviceSharding)

    def __hash__(self) -> int:
        return hash(SingleDeviceSharding)

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"


class PartitionSpec(tuple):
    """How each dimension of an array is split over mesh axes (None: not split)."""

    UNCONSTRAINED = "unconstrained"

    def __new__(cls, *partitions: Any) -> "PartitionSpec":
        return super().__new__(cls, partitions)

    def __repr__(self) -> str:
        return f"PartitionSpec{tuple.__repr__(self)}"


class AxisType(enum.Enum):
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()


class Mesh:
    """Devices arranged in named axes; here of one device."""

    def __init__(self, devices: Any, axis_names: Any, axis_types: Any = None) -> None:
        devices = np.asarray(devices, dtype=object)
        axis_names = (axis_names,) if isinstance(axis_names, str) else tuple(axis_names)
        if devices.size != 1:
            raise ValueError(f"ember runs on one device: a mesh of {devices.size} devices cannot be made")
        if devices.ndim != len(axis_names):
            raise ValueError(f"Mesh requires the ndim of its first argument ({devices.ndim}) to equal the "
                             f"length of its second argument ({len(axis_names)})")
        self.devices, self.axis_names = devices, axis_names
        self.axis_types = axis_types

    @property
    def shape(self) -> dict[str, int]:
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def size(self) -> int:
        return 1

    @property
    def empty(self) -> bool:
        return False

    def __enter__(self) -> "Mesh":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def __repr__(self) -> str:
        return f"Mesh({', '.join(f'{k!r}: {v}' for k, v in self.shape.items())})"


class AbstractMesh:
    def __init__(self, axis_sizes: tuple, axis_names: tuple, axis_types: Any = None) -> None:
        self.axis_sizes, self.axis_names, self.axis_types = tuple(axis_sizes), tuple(axis_names), axis_types

    @property
    def shape(self) -> dict[str, int]:
        return dict(zip(self.axis_names, self.axis_sizes))


class NamedSharding(Sharding):
    """An array split over a mesh's named axes (``spec``); on one device, the whole array."""

    def __init__(self, mesh: Mesh | AbstractMesh, spec: PartitionSpec | None = None, *,
                 memory_kind: str | None = None) -> None:
        self.mesh, self.spec, self.memory_kind = mesh, PartitionSpec() if spec is None else spec, memory_kind

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, NamedSharding) and other.mesh is self.mesh and tuple(other.spec) == tuple(self.spec)

    def __hash__(self) -> int:
        return hash((id(self.mesh), tuple(self.spec)))

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


class PmapSharding(Sharding):
    """(Arrays of ``pmap``, which ember does not have: no instance is ever made.)"""


__all__ = ["CPU", "AbstractMesh", "AxisType", "Device", "Mesh", "NamedSharding", "PartitionSpec", "PmapSharding",
           "Sharding", "SingleDeviceSharding"]
