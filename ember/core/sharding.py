"""Where arrays live: the CPU devices of this process, and JAX's sharding objects (``jax.sharding``).

A process has ``config.num_cpu_devices`` CPU devices (``EMBER_NUM_CPU_DEVICES``, 1 by default;
also settable with ``ember.config.update``; JAX's ``--xla_force_host_platform_device_count``).
They share the host's memory, so an array is
always one NumPy buffer; its *placement* (a ``Sharding``) says which devices hold which block
of it. ``pmap`` and ``shard_map`` run one program per device, each on its own thread, and
place their results; ``device_put(x, sharding)`` places an array. The placement of an array
is kept beside it (``place`` / ``sharding_of``): an array nobody placed is on device 0.

The objects answer JAX's questions the way JAX 0.10 does (``device_set``, ``shard_shape``,
``addressable_devices_indices_map``, ``Array.addressable_shards``), with JAX's reprs.
"""
from __future__ import annotations

import enum
import math
import threading
import weakref
from typing import Any

import numpy as np

from ember.config import config


class Device:
    """A CPU device: of this process, or (after ``ember.distributed.initialize``) of another
    process of the run (``process_index``); ``id`` is global over the run's processes."""

    platform = "cpu"
    device_kind = "cpu"
    client = None

    def __init__(self, id: int, process_index: int = 0) -> None:
        self.id = id
        self.process_index = self.host_id = process_index

    def __repr__(self) -> str:
        return f"CpuDevice(id={self.id})"

    def __str__(self) -> str:
        return f"cpu:{self.id}"

    def __reduce__(self) -> Any:
        return (device, (self.id,))


CPU = Device(0)
_devices: list[Device] = [CPU]


class _Processes:
    """The processes of a multi-process run (set by ``ember.distributed.initialize``): this
    one's index, their count and each one's number of devices (None: one process)."""

    index = 0
    count = 1
    local_count: int | None = None
    devices: list[Device] = []


_processes = _Processes()


def set_processes(index: int, count: int, local_count: int) -> None:
    """Make the devices of ``count`` processes of ``local_count`` devices each the global devices
    (ids ``p * local_count + k``); this process is ``index``. ``count == 1`` goes back to one process."""
    if count <= 1:
        _processes.index, _processes.count, _processes.local_count, _processes.devices = 0, 1, None, []
        return
    devs = [Device(p * local_count + k, p) for p in range(count) for k in range(local_count)]
    _processes.index, _processes.count, _processes.local_count, _processes.devices = index, count, local_count, devs


def process_index() -> int:
    return _processes.index


def process_count() -> int:
    return _processes.count


def devices() -> list[Device]:
    """The devices of the run: this process's ``config.num_cpu_devices`` of them, or after
    ``ember.distributed.initialize`` those of every process, by process."""
    if _processes.count > 1:
        return list(_processes.devices)
    n = int(config.num_cpu_devices)
    if n < 1:
        raise ValueError(f"num_cpu_devices must be at least 1, got {n}")
    while len(_devices) < n:
        _devices.append(Device(len(_devices)))
    return _devices[:n]


def local_devices() -> list[Device]:
    """This process's devices."""
    return [d for d in devices() if d.process_index == _processes.index]


def default_device() -> Device:
    """Where an array nobody placed lives: device 0, or this process's first device."""
    if _processes.count > 1:
        return _processes.devices[_processes.index * _processes.local_count]
    return CPU


def device(id: int) -> Device:
    if _processes.count > 1:
        return _processes.devices[id]
    devices()
    return _devices[id]


# --- shardings -------------------------------------------------------------------------------------
class Sharding:
    """Where the blocks of an array live. Subclasses say which device holds which index."""

    memory_kind: str | None = "device"

    @property
    def device_set(self) -> set[Device]:
        return set(self._device_list())

    @property
    def addressable_devices(self) -> set[Device]:
        return {d for d in self._device_list() if d.process_index == _processes.index}

    @property
    def num_devices(self) -> int:
        return len(self._device_list())

    @property
    def is_fully_addressable(self) -> bool:
        return all(d.process_index == _processes.index for d in self._device_list())

    @property
    def is_fully_replicated(self) -> bool:
        return True

    def _device_list(self) -> list[Device]:
        raise NotImplementedError

    def devices_indices_map(self, global_shape: tuple) -> dict[Device, tuple]:
        return {d: tuple(slice(None) for _ in global_shape) for d in self._device_list()}

    def addressable_devices_indices_map(self, global_shape: tuple) -> dict[Device, tuple]:
        return {d: i for d, i in self.devices_indices_map(global_shape).items()
                if d.process_index == _processes.index}

    def shard_shape(self, global_shape: tuple) -> tuple:
        return tuple(global_shape)

    def with_memory_kind(self, kind: str) -> "Sharding":
        return self


class SingleDeviceSharding(Sharding):
    """The whole array on one device."""

    def __init__(self, device: Device = CPU, *, memory_kind: str | None = None) -> None:
        self._device = device
        self.memory_kind = memory_kind or "device"

    def _device_list(self) -> list[Device]:
        return [self._device]

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, SingleDeviceSharding) and other._device is self._device

    def __hash__(self) -> int:
        return hash((SingleDeviceSharding, self._device.id))

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r}, memory_kind={self.memory_kind})"


class PartitionSpec(tuple):
    """How each dimension of an array is split over mesh axes: a name, a tuple of names (split
    over their product) or None (not split)."""

    UNCONSTRAINED = "unconstrained"

    def __new__(cls, *partitions: Any) -> "PartitionSpec":
        return super().__new__(cls, tuple(tuple(p) if isinstance(p, list) else p for p in partitions))

    def __repr__(self) -> str:
        return f"P{tuple.__repr__(self)}"

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, tuple):
            return _trim(tuple(self)) == _trim(tuple(other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(_trim(tuple(self)))

    def __reduce__(self) -> Any:
        return (PartitionSpec, tuple(self))


def _trim(spec: tuple) -> tuple:
    while spec and spec[-1] is None:
        spec = spec[:-1]
    return spec


class AxisType(enum.Enum):
    Auto = enum.auto()
    Explicit = enum.auto()
    Manual = enum.auto()

    def __repr__(self) -> str:
        return self.name


def _axis_names(names: Any) -> tuple:
    return (names,) if isinstance(names, str) else tuple(names)


class _MeshBase:
    axis_names: tuple
    axis_types: tuple

    @property
    def shape(self) -> dict[str, int]:
        return dict(zip(self.axis_names, self.axis_sizes))

    @property
    def shape_tuple(self) -> tuple:
        return tuple(zip(self.axis_names, self.axis_sizes))

    @property
    def size(self) -> int:
        return math.prod(self.axis_sizes)

    @property
    def empty(self) -> bool:
        return not self.axis_names

    # (whether its axes are all of one kind, as flax asks; an empty mesh's are of none, as in JAX)
    are_all_axes_auto = property(lambda self: self._all_axes(AxisType.Auto))
    are_all_axes_explicit = property(lambda self: self._all_axes(AxisType.Explicit))
    are_all_axes_manual = property(lambda self: self._all_axes(AxisType.Manual))

    def _all_axes(self, kind: "AxisType") -> bool:
        return bool(self.axis_types) and all(t is kind for t in self.axis_types)

    def _types_text(self) -> str:
        return f"axis_types=({', '.join(t.name for t in self.axis_types)}{',' if len(self.axis_types) == 1 else ''})"


def _axis_types(axis_types: Any, n: int) -> tuple:
    if axis_types is None:
        return (AxisType.Auto,) * n
    types = (axis_types,) if isinstance(axis_types, AxisType) else tuple(axis_types)
    if len(types) != n:
        raise ValueError(f"Number of axis names should match the number of axis_types. Got axis_names={n} "
                         f"and axis_types={len(types)}")
    return types


class Mesh(_MeshBase):
    """Devices arranged in an array whose axes have names."""

    def __init__(self, devices: Any, axis_names: Any, axis_types: Any = None) -> None:
        devices = np.asarray(devices, dtype=object)
        axis_names = _axis_names(axis_names)
        if devices.ndim != len(axis_names):
            raise ValueError(f"Mesh requires the ndim of its first argument (`devices`) to equal the length of its "
                             f"second argument (`axis_names`), but got devices.ndim == {devices.ndim} and "
                             f"len(axis_names) == {len(axis_names)}.")
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"Mesh axis names must be unique, got {axis_names}")
        self.devices, self.axis_names = devices, axis_names
        self.axis_sizes = tuple(devices.shape)
        self.axis_types = _axis_types(axis_types, len(axis_names))
        self._contexts: list = []

    @property
    def device_ids(self) -> np.ndarray:
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def local_devices(self) -> list[Device]:
        return [d for d in self.devices.flat if d.process_index == _processes.index]

    @property
    def is_multi_process(self) -> bool:
        return len({d.process_index for d in self.devices.flat}) > 1

    @property
    def abstract_mesh(self) -> "AbstractMesh":
        return AbstractMesh(self.axis_sizes, self.axis_names, self.axis_types)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Mesh) and other.axis_names == self.axis_names and \
            other.axis_types == self.axis_types and other.devices.shape == self.devices.shape and \
            all(a is b for a, b in zip(other.devices.flat, self.devices.flat))

    def __hash__(self) -> int:
        return hash((self.axis_names, self.axis_sizes, tuple(d.id for d in self.devices.flat)))

    def __enter__(self) -> "Mesh":
        self._contexts.append(set_mesh(self))
        self._contexts[-1].__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._contexts.pop().__exit__(*exc)

    def __str__(self) -> str:
        return f"Mesh({', '.join(f'{k!r}: {v}' for k, v in self.shape.items())}, {self._types_text()})"

    def __repr__(self) -> str:
        return f"Mesh(axis_sizes={self.axis_sizes}, axis_names={self.axis_names}, {self._types_text()})"


class AbstractMesh(_MeshBase):
    """A mesh's axis names and sizes, without devices."""

    def __init__(self, axis_sizes: tuple, axis_names: tuple, axis_types: Any = None) -> None:
        self.axis_sizes, self.axis_names = tuple(axis_sizes), _axis_names(axis_names)
        self.axis_types = _axis_types(axis_types, len(self.axis_names))

    @property
    def abstract_mesh(self) -> "AbstractMesh":
        return self

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, AbstractMesh) and (other.axis_sizes, other.axis_names, other.axis_types) == \
            (self.axis_sizes, self.axis_names, self.axis_types)

    def __hash__(self) -> int:
        return hash((self.axis_sizes, self.axis_names))

    def __repr__(self) -> str:
        return f"AbstractMesh({', '.join(f'{k!r}: {v}' for k, v in self.shape.items())}, {self._types_text()})"


def spec_names(entry: Any) -> tuple:
    """The mesh axes one PartitionSpec entry splits a dimension over."""
    if entry is None or entry == PartitionSpec.UNCONSTRAINED:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


class IndivisibleError(ValueError):
    """A sharding splits a dimension into a number of blocks that does not divide it (JAX's name)."""


class NamedSharding(Sharding):
    """An array split over a mesh's named axes as ``spec`` says; replicated along the others."""

    def __init__(self, mesh: Mesh | AbstractMesh, spec: PartitionSpec | None = None, *,
                 memory_kind: str | None = None) -> None:
        spec = PartitionSpec() if spec is None else spec
        if not isinstance(spec, PartitionSpec):
            spec = PartitionSpec(*spec)
        used = [n for entry in spec for n in spec_names(entry)]
        for n in used:
            if n not in mesh.axis_names:
                raise ValueError(f"Resource axis: {n} of {spec} is not found in mesh: {tuple(mesh.axis_names)}.")
        if len(set(used)) != len(used):
            raise ValueError(f"A single NamedSharding spec specification can map every mesh axis to at most one "
                             f"positional dimension, but {spec} has duplicate entries for "
                             f"`{next(n for n in used if used.count(n) > 1)}`")
        self.mesh, self.spec, self.memory_kind = mesh, spec, memory_kind or "device"

    def _device_list(self) -> list[Device]:
        return list(self.mesh.devices.flat)

    @property
    def is_fully_replicated(self) -> bool:
        return all(self.mesh.shape[n] == 1 for entry in self.spec for n in spec_names(entry))

    def _splits(self, ndim: int) -> list[tuple]:
        spec = tuple(self.spec) + (None,) * (ndim - len(self.spec))
        if len(spec) > ndim:
            raise ValueError(f"One of device_put args was given the sharding of {self!r}, which implies that the "
                             f"global size of its dimension 0 should be divisible by ... but it has rank {ndim} "
                             f"and the spec {self.spec} has {len(self.spec)} entries")
        return [spec_names(e) for e in spec]

    def shard_shape(self, global_shape: tuple) -> tuple:
        shape = []
        for size, names in zip(global_shape, self._splits(len(global_shape))):
            parts = math.prod(self.mesh.shape[n] for n in names)
            if size % parts:
                raise IndivisibleError(f"Sharding {self!r} implies that array axis {len(shape)} is partitioned {parts} "
                                 f"times, but the dimension size is {size} (full shape: {tuple(global_shape)}, "
                                 f"per-dimension tiling factors: {[math.prod(self.mesh.shape[n] for n in ns) for ns in self._splits(len(global_shape))]} should evenly divide the shape)")  # noqa: E501
            shape.append(size // parts)
        return tuple(shape)

    def devices_indices_map(self, global_shape: tuple) -> dict[Device, tuple]:
        block = self.shard_shape(global_shape)
        splits = self._splits(len(global_shape))
        names = self.mesh.axis_names
        out = {}
        for coords in np.ndindex(*self.mesh.axis_sizes):
            at = dict(zip(names, coords))
            index = []
            for part, ns in zip(block, splits):
                k = 0
                for n in ns:  # row-major over the entry's axes
                    k = k * self.mesh.shape[n] + at[n]
                index.append(slice(k * part, (k + 1) * part) if ns else slice(None))
            out[self.mesh.devices[coords]] = tuple(index)
        return out

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, NamedSharding) and other.mesh == self.mesh and other.spec == self.spec

    def __hash__(self) -> int:
        return hash((self.mesh, self.spec))

    def __repr__(self) -> str:
        return f"NamedSharding(mesh={self.mesh}, spec={self.spec!r}, memory_kind={self.memory_kind})"


PmapSharding = NamedSharding  # (JAX 0.10 describes pmap's outputs with a NamedSharding too)
PMAP_AXIS = "_internal_pmap_axis_name"


def pmap_sharding(devices_used: list[Device], ndim: int, axis: int) -> NamedSharding:
    """How ``pmap`` places an output stacked along ``axis`` over ``devices_used``, as JAX 0.10 says it."""
    spec = [None] * ndim
    spec[axis] = PMAP_AXIS
    return NamedSharding(Mesh(np.array(devices_used, dtype=object), (PMAP_AXIS,)), PartitionSpec(*_trim(tuple(spec))))


# --- the current mesh ------------------------------------------------------------------------------
class _MeshState(threading.local):
    mesh: Any = None


_mesh_state = _MeshState()


def get_mesh() -> Any:
    """The mesh that ``set_mesh`` made current (an empty AbstractMesh when none is)."""
    mesh = _mesh_state.mesh
    return AbstractMesh((), ()) if mesh is None else mesh


def get_abstract_mesh() -> "AbstractMesh":
    """The current mesh's axis names, sizes and types (``set_mesh``), without its devices: what
    libraries read to ask which axes exist (an empty AbstractMesh when no mesh is current)."""
    return get_mesh().abstract_mesh


class set_mesh:
    """Make ``mesh`` current; as a context manager, until the block ends."""

    def __init__(self, mesh: Any) -> None:
        self._previous = _mesh_state.mesh
        _mesh_state.mesh = mesh

    def __enter__(self) -> Any:
        return _mesh_state.mesh

    def __exit__(self, *exc: Any) -> None:
        _mesh_state.mesh = self._previous


# --- placements of arrays --------------------------------------------------------------------------
_placements: dict[int, tuple] = {}
_lock = threading.Lock()


def place(x: Any, sharding: Sharding) -> Any:
    """Record that the array ``x`` is placed as ``sharding`` says (kept as long as ``x`` lives)."""
    key = id(x)

    def forget(_: Any, key: int = key) -> None:
        with _lock:
            _placements.pop(key, None)

    with _lock:
        _placements[key] = (weakref.ref(x, forget), sharding)
    return x


def sharding_of(x: Any) -> Sharding:
    """The placement of array ``x`` (the default device unless it was placed)."""
    entry = _placements.get(id(x))
    if entry is not None and entry[0]() is x:
        return entry[1]
    return SingleDeviceSharding(unplaced_device[0]())


# Where an array nobody placed says it lives: ember's CPU device 0, or (``backends.registry`` sets
# this) the first device of the backend that runs programs, as JAX's default device.
unplaced_device: list = [lambda: default_device()]


def is_placed(x: Any) -> bool:
    """Whether array ``x`` was placed explicitly (``device_put`` to a device or sharding): JAX's
    "committed" arrays."""
    entry = _placements.get(id(x))
    return entry is not None and entry[0]() is x


def put(x: Any, where: Any) -> Any:
    """Place array ``x`` on a device or as a sharding (``device_put``); None keeps its placement. A
    bare PartitionSpec lays ``x`` out over the current mesh (``set_mesh``), as in JAX."""
    if where is None:
        return x
    if isinstance(where, Device):
        where = SingleDeviceSharding(where)
    if isinstance(where, PartitionSpec):
        mesh = _mesh_state.mesh
        if not isinstance(mesh, Mesh):
            raise ValueError(f"Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed to device_put "
                             f"(got {where!r} with no current mesh); or pass NamedSharding(mesh, spec)")
        where = NamedSharding(mesh, where)
    if not isinstance(where, Sharding):
        raise TypeError(f"device_put: expected a Device or a Sharding, got {where!r}")
    where.shard_shape(tuple(x.shape))  # (raises when the blocks do not divide the shape)
    return place(x, where)


class Shard:
    """One device's block of an array (``Array.addressable_shards``)."""

    def __init__(self, device: Device, index: tuple, replica_id: int, data: Any) -> None:
        self.device, self.index, self.replica_id, self.data = device, index, replica_id, data

    def __repr__(self) -> str:
        return f"Shard(device={self.device!r}, index={self.index}, replica_id={self.replica_id}, data={self.data})"


def shards_of(x: Any, wrap: Any) -> list[Shard]:
    """The blocks of array ``x`` by device; ``wrap`` makes an array of a NumPy block."""
    sharding = sharding_of(x)
    value = np.asarray(x)
    seen: dict[tuple, int] = {}
    out = []
    for dev, index in sharding.devices_indices_map(tuple(x.shape)).items():
        if dev.process_index != _processes.index:
            continue  # (another process's block: not addressable here)
        key = tuple((s.start, s.stop) for s in index)
        replica = seen.get(key, 0)
        seen[key] = replica + 1
        out.append(Shard(dev, index, replica, wrap(np.array(value[index]))))
    return out


class Layout:
    """An array's memory layout (``jax.experimental.layout``): ember's arrays are dense and
    row-major, ``major_to_minor == (0, 1, ..., ndim - 1)``, without tiling."""

    def __init__(self, major_to_minor: Any = None, tiling: Any = (), sub_byte_element_size_in_bits: int = 0) -> None:
        self.major_to_minor = None if major_to_minor is None else tuple(major_to_minor)
        self.tiling, self.sub_byte_element_size_in_bits = tuple(tiling), sub_byte_element_size_in_bits

    def _key(self) -> tuple:
        return self.major_to_minor, self.tiling, self.sub_byte_element_size_in_bits

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Layout) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Layout(major_to_minor={self.major_to_minor}, tiling={self.tiling}, "
                f"sub_byte_element_size_in_bits={self.sub_byte_element_size_in_bits})")


class Format:
    """A layout with a sharding (``Array.format``, ``jax.experimental.layout.Format``)."""

    def __init__(self, layout: Any = None, sharding: Any = None) -> None:
        self.layout, self.sharding = layout, sharding

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Format) and (self.layout, self.sharding) == (other.layout, other.sharding)

    def __hash__(self) -> int:
        return hash((self.layout, self.sharding))

    def __repr__(self) -> str:
        return f"Format(layout={self.layout!r}, sharding={self.sharding!r})"


def format_of(x: Any) -> Format:
    """An array's layout (dense, row-major) and its sharding (``x.sharding``: where its data is)."""
    return Format(Layout(tuple(range(len(x.shape)))), getattr(x, "sharding", None) or sharding_of(x))


__all__ = ["CPU", "AbstractMesh", "AxisType", "Device", "Format", "Layout", "Mesh", "NamedSharding", "PartitionSpec",
           "PmapSharding", "Shard", "Sharding", "SingleDeviceSharding", "devices", "get_mesh", "local_devices", "place",
           "format_of", "process_count", "process_index", "set_mesh", "set_processes", "sharding_of"]
