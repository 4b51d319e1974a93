"""ember's binding of the PJRT C API: load a device vendor's plugin, compile StableHLO, move
buffers, execute, wait on events. ctypes only: no jax or jaxlib at run time.

Written from the public description of the API (``xla/pjrt/c/pjrt_c_api.h``). What it relies on:

- ``GetPjrtApi()`` returns a ``PJRT_Api*``: ``{size_t struct_size; void* extension_start;
  PJRT_Api_Version {size_t; void*; int major; int minor}}`` then function pointers, slot ``i`` at
  byte ``40 + 8 i`` (slots are only ever appended). The slot count follows from ``struct_size``
  and is checked before a slot is used.
- Every argument struct starts ``{size_t struct_size; void* extension_start}``. A plugin accepts a
  ``struct_size`` at or above its own and refuses a smaller one, so one set of layouts, the newest
  (API 0.115), serves every plugin from 0.112 on: fields a plugin does not know stay zero.
- Every function returns a ``PJRT_Error*`` (NULL on success); an error is read (message, code),
  raised as ``PjrtError`` carrying XLA's message, and destroyed.
- Ownership: the caller destroys what a call hands it (client, executables, buffers, events,
  errors). Each Python object here owns one handle and destroys it in a ``weakref.finalize``
  that also keeps the client alive, so a client outlives everything made from it.

A round trip costs a few microseconds of ctypes per call on top of the plugin's own work
(``tests/test_pjrt_binding.py`` has the figures' program: ``call_overhead``).
"""
from __future__ import annotations

import ctypes as C
import os
import threading
import time
import weakref
from typing import Any, NamedTuple, Sequence

import ml_dtypes
import numpy as np

from ember.errors import JaxRuntimeError

MIN_VERSION = (0, 112)

# Function-table order of the header (0.115). Slot i of a plugin's table is SLOTS[i].
SLOTS = """
Error_Destroy Error_Message Error_GetCode Plugin_Initialize Plugin_Attributes
Event_Destroy Event_IsReady Event_Error Event_Await Event_OnReady
Client_Create Client_Destroy Client_PlatformName Client_ProcessIndex Client_PlatformVersion
Client_Devices Client_AddressableDevices Client_LookupDevice Client_LookupAddressableDevice
Client_AddressableMemories Client_Compile Client_DefaultDeviceAssignment Client_BufferFromHostBuffer
DeviceDescription_Id DeviceDescription_ProcessIndex DeviceDescription_Attributes DeviceDescription_Kind
DeviceDescription_DebugString DeviceDescription_ToString
Device_GetDescription Device_IsAddressable Device_LocalHardwareId Device_AddressableMemories
Device_DefaultMemory Device_MemoryStats
Memory_Id Memory_Kind Memory_DebugString Memory_ToString Memory_AddressableByDevices
Executable_Destroy Executable_Name Executable_NumReplicas Executable_NumPartitions Executable_NumOutputs
Executable_SizeOfGeneratedCodeInBytes Executable_GetCostAnalysis Executable_OutputMemoryKinds
Executable_OptimizedProgram Executable_Serialize
LoadedExecutable_Destroy LoadedExecutable_GetExecutable LoadedExecutable_AddressableDevices
LoadedExecutable_Delete LoadedExecutable_IsDeleted LoadedExecutable_Execute
Executable_DeserializeAndLoad LoadedExecutable_Fingerprint
Buffer_Destroy Buffer_ElementType Buffer_Dimensions Buffer_UnpaddedDimensions
Buffer_DynamicDimensionIndices Buffer_GetMemoryLayout Buffer_OnDeviceSizeInBytes Buffer_Device
Buffer_Memory Buffer_Delete Buffer_IsDeleted Buffer_CopyToDevice Buffer_ToHostBuffer Buffer_IsOnCpu
Buffer_ReadyEvent Buffer_UnsafePointer Buffer_IncreaseExternalReferenceCount
Buffer_DecreaseExternalReferenceCount Buffer_OpaqueDeviceMemoryDataPointer
CopyToDeviceStream_Destroy CopyToDeviceStream_AddChunk CopyToDeviceStream_TotalBytes
CopyToDeviceStream_GranuleSize CopyToDeviceStream_CurrentBytes
TopologyDescription_Create TopologyDescription_Destroy TopologyDescription_PlatformName
TopologyDescription_PlatformVersion TopologyDescription_GetDeviceDescriptions
TopologyDescription_Serialize TopologyDescription_Attributes Compile
Executable_OutputElementTypes Executable_OutputDimensions
""".split()
SLOT = {name: i for i, name in enumerate(SLOTS)}
_VOID = {"Error_Destroy", "Error_Message"}  # the two functions that return nothing

ERROR_CODES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
               "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
               "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
               "UNAUTHENTICATED")

# PJRT_Buffer_Type: the header's enum, for the dtypes ember has.
BUFFER_TYPES: dict[np.dtype, int] = {
    np.dtype(np.bool_): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
    np.dtype(np.int64): 5, np.dtype(np.uint8): 6, np.dtype(np.uint16): 7, np.dtype(np.uint32): 8,
    np.dtype(np.uint64): 9, np.dtype(np.float16): 10, np.dtype(np.float32): 11, np.dtype(np.float64): 12,
    np.dtype(ml_dtypes.bfloat16): 13, np.dtype(np.complex64): 14, np.dtype(np.complex128): 15,
    np.dtype(ml_dtypes.float8_e5m2): 16, np.dtype(ml_dtypes.float8_e4m3fn): 17,
    np.dtype(ml_dtypes.float8_e4m3b11fnuz): 18, np.dtype(ml_dtypes.float8_e5m2fnuz): 19,
    np.dtype(ml_dtypes.float8_e4m3fnuz): 20, np.dtype(ml_dtypes.float8_e4m3): 26,
    np.dtype(ml_dtypes.float8_e3m4): 27,
}
DTYPES = {v: k for k, v in BUFFER_TYPES.items()}

# PJRT_HostBufferSemantics: the host array may change once the call returns; or it must stay alive and
# unchanged until the copy to the device completes (the call returns at once, the copy runs behind it);
# or it is used in place, and the caller keeps it alive and unchanged while the buffer lives.
IMMUTABLE_ONLY_DURING_CALL, IMMUTABLE_UNTIL_TRANSFER_COMPLETES, IMMUTABLE_ZERO_COPY = 0, 1, 2

_vp, _sz, _i64, _int = C.c_void_p, C.c_size_t, C.c_int64, C.c_int
_HEADER: list[tuple[str, Any]] = [("struct_size", _sz), ("extension_start", _vp)]


class PjrtError(JaxRuntimeError):
    """An error a PJRT plugin returned: ``code`` is its status name (``INVALID_ARGUMENT``, ...),
    the message is XLA's, prefixed with the code and the function that failed."""

    def __init__(self, message: str, code: str = "UNKNOWN", function: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.function = function


def _struct(name: str, fields: list) -> Any:  # (a class made at run time: checkers know none of its fields)
    """An argument struct whose ``struct_size`` is the header's: the end of its last field, with
    no tail padding (``PJRT_STRUCT_SIZE``). ``cls.new(**fields)`` fills the header."""
    cls: Any = type(name, (C.Structure,), {"_fields_": _HEADER + fields})
    last_name, last_type = cls._fields_[-1][:2]
    cls.SIZE = getattr(cls, last_name).offset + C.sizeof(last_type)
    return cls


_One = _vp * 1  # (a one-element list of pointers: an execution's per-device lists, and its event)


def _new(cls: Any, **fields: Any) -> Any:
    return cls(cls.SIZE, None, **fields)


class NamedValue(C.Structure):
    SIZE: int  # the header's struct_size (set below)
    # value: a union {const char*, int64_t, const int64_t*, float, bool}
    _fields_ = _HEADER + [("name", C.c_char_p), ("name_size", _sz), ("type", _int), ("value", _i64),
                          ("value_size", _sz)]


NamedValue.SIZE = NamedValue.value_size.offset + 8

ErrorArgs = _struct("ErrorArgs", [("error", _vp)])
ErrorMessage = _struct("ErrorMessage", [("error", _vp), ("message", _vp), ("message_size", _sz)])
ErrorGetCode = _struct("ErrorGetCode", [("error", _vp), ("code", _int)])
PluginInitialize = _struct("PluginInitialize", [])
PluginInitialize.SIZE = 16
PluginAttributes = _struct("PluginAttributes", [("attributes", C.POINTER(NamedValue)), ("num_attributes", _sz)])
EventArgs = _struct("EventArgs", [("event", _vp)])
EventIsReady = _struct("EventIsReady", [("event", _vp), ("is_ready", C.c_bool)])
ClientCreate = _struct("ClientCreate", [
    ("create_options", C.POINTER(NamedValue)), ("num_options", _sz),
    ("kv_get_callback", _vp), ("kv_get_user_arg", _vp), ("kv_put_callback", _vp), ("kv_put_user_arg", _vp),
    ("client", _vp), ("kv_try_get_callback", _vp), ("kv_try_get_user_arg", _vp)])
ClientArgs = _struct("ClientArgs", [("client", _vp)])
ClientString = _struct("ClientString", [("client", _vp), ("string", _vp), ("string_size", _sz)])
ClientDevices = _struct("ClientDevices", [("client", _vp), ("devices", C.POINTER(_vp)), ("num_devices", _sz)])
DeviceGetDescription = _struct("DeviceGetDescription", [("device", _vp), ("description", _vp)])
DescriptionId = _struct("DescriptionId", [("description", _vp), ("id", _int)])
DescriptionProcessIndex = _struct("DescriptionProcessIndex", [("description", _vp), ("process_index", _int)])
DescriptionString = _struct("DescriptionString", [("description", _vp), ("string", _vp), ("string_size", _sz)])
Program = _struct("Program", [("code", _vp), ("code_size", _sz), ("format", C.c_char_p), ("format_size", _sz)])
ClientCompile = _struct("ClientCompile", [
    ("client", _vp), ("program", C.POINTER(Program)), ("compile_options", C.c_char_p),
    ("compile_options_size", _sz), ("executable", _vp)])
BufferFromHost = _struct("BufferFromHost", [
    ("client", _vp), ("data", _vp), ("type", _int), ("dims", C.POINTER(_i64)), ("num_dims", _sz),
    ("byte_strides", C.POINTER(_i64)), ("num_byte_strides", _sz), ("host_buffer_semantics", _int),
    ("device", _vp), ("memory", _vp), ("device_layout", _vp), ("done_with_host_buffer", _vp), ("buffer", _vp)])
ExecuteOptions = _struct("ExecuteOptions", [
    ("send_callbacks", _vp), ("recv_callbacks", _vp), ("num_send_ops", _sz), ("num_recv_ops", _sz),
    ("launch_id", _int), ("non_donatable_input_indices", C.POINTER(_i64)),
    ("num_non_donatable_input_indices", _sz), ("context", _vp), ("call_location", C.c_char_p),
    ("num_tasks", _sz), ("task_ids", C.POINTER(_int)), ("incarnation_ids", C.POINTER(_i64)),
    ("multi_slice_config", _vp)])
# (options: ExecuteOptions*; argument_lists, output_lists: void*** with one list each; given as
# addresses, which ctypes takes far faster than pointer objects: a call's cost is mostly ctypes)
Execute = _struct("Execute", [
    ("executable", _vp), ("options", _vp), ("argument_lists", _vp),
    ("num_devices", _sz), ("num_args", _sz), ("output_lists", _vp),
    ("device_complete_events", C.POINTER(_vp)), ("execute_device", _vp)])
GetExecutable = _struct("GetExecutable", [("loaded_executable", _vp), ("executable", _vp)])
LoadedDevices = _struct("LoadedDevices", [
    ("executable", _vp), ("addressable_devices", C.POINTER(_vp)), ("num_addressable_devices", _sz)])
OptimizedProgram = _struct("OptimizedProgram", [("executable", _vp), ("program", C.POINTER(Program))])
ExecutableArgs = _struct("ExecutableArgs", [("executable", _vp)])
NumOutputs = _struct("NumOutputs", [("executable", _vp), ("num_outputs", _sz)])
OutputElementTypes = _struct("OutputElementTypes", [
    ("executable", _vp), ("output_types", C.POINTER(_int)), ("num_output_types", _sz)])
OutputDimensions = _struct("OutputDimensions", [
    ("executable", _vp), ("num_outputs", _sz), ("dims", C.POINTER(_i64)), ("dim_sizes", C.POINTER(_sz))])
ExecutableSerialize = _struct("ExecutableSerialize", [
    ("executable", _vp), ("serialized_bytes", _vp), ("serialized_bytes_size", _sz), ("serialized_executable", _vp),
    ("serialized_executable_deleter", _vp)])
DeserializeAndLoad = _struct("DeserializeAndLoad", [
    ("client", _vp), ("serialized_executable", _vp), ("serialized_executable_size", _sz), ("loaded_executable", _vp),
    ("overridden_serialized_compile_options", _vp), ("overridden_serialized_compile_options_size", _sz)])
BufferArgs = _struct("BufferArgs", [("buffer", _vp)])
BufferReadyEvent = _struct("BufferReadyEvent", [("buffer", _vp), ("event", _vp)])
BufferToHost = _struct("BufferToHost", [
    ("src", _vp), ("host_layout", _vp), ("dst", _vp), ("dst_size", _sz), ("event", _vp)])


class LayoutTiled(C.Structure):
    SIZE: int  # the header's struct_size (set below)
    _fields_ = _HEADER + [("minor_to_major", C.POINTER(_i64)), ("minor_to_major_size", _sz),
                          ("tile_dims", C.POINTER(_i64)), ("tile_dim_sizes", C.POINTER(_sz)), ("num_tiles", _sz)]


class LayoutStrides(C.Structure):
    _fields_ = _HEADER + [("byte_strides", C.POINTER(_i64)), ("num_byte_strides", _sz)]


class _LayoutUnion(C.Union):
    _fields_ = [("tiled", LayoutTiled), ("strides", LayoutStrides)]


class MemoryLayout(C.Structure):
    SIZE: int  # the header's struct_size (set below)
    _fields_ = _HEADER + [("u", _LayoutUnion), ("type", _int)]  # type 0: tiled, 1: strides


MemoryLayout.SIZE = MemoryLayout.type.offset + 4
LayoutTiled.SIZE = LayoutTiled.num_tiles.offset + 8


def _row_major(ndim: int) -> tuple[MemoryLayout, Any]:
    """A dense row-major layout. A copy to the host without one comes back in the device's layout,
    which a TPU may choose column-major."""
    minor_to_major = (_i64 * max(1, ndim))(*range(ndim - 1, -1, -1))
    layout = MemoryLayout()
    layout.struct_size, layout.type = MemoryLayout.SIZE, 0
    layout.u.tiled.struct_size = LayoutTiled.SIZE
    layout.u.tiled.minor_to_major, layout.u.tiled.minor_to_major_size = minor_to_major, ndim
    return layout, minor_to_major


class Spmd(NamedTuple):
    """How a program spans devices: XLA's SPMD partitioner splits one program over the devices of
    ``device_ids`` (one partition each, in the mesh's order), partitioning with Shardy (JAX's
    default) or GSPMD; ``open_inputs`` / ``open_outputs`` say, per parameter and result, whether
    XLA may choose its sharding (the user left it unspecified)."""

    device_ids: tuple[int, ...]
    open_inputs: tuple[bool, ...] = ()
    open_outputs: tuple[bool, ...] = ()
    shardy: bool = True


def _packed_bools(field: int, values: Sequence[bool]) -> bytes:
    if not values:
        return b""
    return _varint(field << 3 | 2) + _varint(len(values)) + bytes(int(v) for v in values)


def compile_options(num_replicas: int = 1, num_partitions: int = 1,
                    overrides: dict[str, bool | int | str] | None = None, spmd: Spmd | None = None) -> bytes:
    """A serialized ``xla.CompileOptionsProto``: field 3 (``executable_build_options``) holding
    fields 4 and 5 (``num_replicas``, ``num_partitions``), and field 7 (``env_option_overrides``,
    XLA's debug options by name: a map entry {1: name, 2: OptionOverrideProto {1: string, 2: bool,
    3: int}}). Empty options abort XLA's CPU plugin (a replica count of 0), so both counts are
    always given. ``spmd``: one partition per device, as JAX compiles a ``jit`` over a mesh (fields
    6 ``use_spmd_partitioning``, 9 ``device_assignment``: {1: replicas, 2: partitions, 3: one
    {1: [device id]} per partition}, 12 / 18 the propagation lists, 19 ``use_shardy_partitioner``)."""
    if spmd is not None:
        num_replicas, num_partitions = 1, len(spmd.device_ids)
    inner = bytes([0x20]) + _varint(num_replicas) + bytes([0x28]) + _varint(num_partitions)
    if spmd is not None:
        inner += bytes([0x30, 0x01])
        assignment = bytes([0x08]) + _varint(1) + bytes([0x10]) + _varint(num_partitions)
        for device_id in spmd.device_ids:
            ids = bytes([0x0A, len(_varint(device_id))]) + _varint(device_id)
            assignment += bytes([0x1A]) + _varint(len(ids)) + ids
        inner += bytes([0x4A]) + _varint(len(assignment)) + assignment
        inner += _packed_bools(12, spmd.open_outputs) + _packed_bools(18, spmd.open_inputs)
        inner += _varint(19 << 3) + bytes([int(spmd.shardy)])
    out = bytes([0x1A]) + _varint(len(inner)) + inner
    for name, value in (overrides or {}).items():
        if isinstance(value, bool):
            override = bytes([0x10, int(value)])
        elif isinstance(value, int):
            override = bytes([0x18]) + _varint(value)
        else:
            text = value.encode()
            override = bytes([0x0A]) + _varint(len(text)) + text
        key = name.encode()
        entry = bytes([0x0A]) + _varint(len(key)) + key + bytes([0x12]) + _varint(len(override)) + override
        out += bytes([0x3A]) + _varint(len(entry)) + entry
    return out

# XLA's options that give JAX's semantics, by platform: XLA's CPU compiler otherwise lets max and
# min drop NaNs in windowed reductions (JAX turns this off too).
PLATFORM_OVERRIDES: dict[str, dict[str, bool | int | str]] = {"cpu": {"xla_cpu_enable_fast_min_max": False}}


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


class Plugin:
    """A loaded PJRT plugin: its function table, version and attributes. One per library path
    (``load_plugin``): a plugin is initialized once per process."""

    def __init__(self, path: str) -> None:
        self.path = str(path)
        try:
            # RTLD_LOCAL: the plugin's many symbols stay out of the process's global namespace.
            self._lib = C.CDLL(self.path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as e:
            raise PjrtError(f"cannot load the PJRT plugin {self.path}: {e}", "NOT_FOUND") from None
        try:
            get_api = self._lib.GetPjrtApi
        except AttributeError:
            raise PjrtError(f"{self.path} is not a PJRT plugin: it has no GetPjrtApi symbol",
                            "INVALID_ARGUMENT") from None
        get_api.restype = _vp
        self._api = get_api()
        if not self._api:
            raise PjrtError(f"GetPjrtApi() of {self.path} returned NULL", "INTERNAL")
        self.api_struct_size = (_sz * 1).from_address(self._api)[0]
        major, minor = (_int * 2).from_address(self._api + 32)
        self.version = (major, minor)
        self.num_slots = (self.api_struct_size - 40) // 8
        if self.version < MIN_VERSION:
            raise PjrtError(f"the PJRT plugin {self.path} has C API {major}.{minor}; ember needs "
                            f"{MIN_VERSION[0]}.{MIN_VERSION[1]} or later (update the plugin)", "UNIMPLEMENTED")
        # Every slot ember calls exists from 0.112 on; a table shorter than that is a broken plugin.
        needed = max(SLOT[n] for n in _USED) + 1
        if self.num_slots < needed:
            raise PjrtError(f"the PJRT plugin {self.path} (C API {major}.{minor}) has {self.num_slots} "
                            f"function slots; its version promises at least {needed}", "INTERNAL")
        self._fns: dict[str, Any] = {}
        for name in _USED:
            self._fns[name] = self._function(name)
        self.call("Plugin_Initialize", _new(PluginInitialize))
        self.attributes = self._attributes()

    def _function(self, name: str) -> Any:
        slot = SLOT[name]
        address = _vp.from_address(self._api + 40 + 8 * slot).value
        if not address:
            return None
        return C.CFUNCTYPE(None if name in _VOID else _vp, _vp)(address)

    def has(self, name: str) -> bool:
        return SLOT[name] < self.num_slots and self._function(name) is not None

    def call(self, name: str, args: Any) -> Any:
        """Call ``PJRT_<name>`` with ``args``; a returned error is raised as ``PjrtError``."""
        fn = self._fns.get(name)
        if fn is None:
            if name in self._fns or not self.has(name):
                raise PjrtError(f"the PJRT plugin {self.path} does not implement PJRT_{name}", "UNIMPLEMENTED", name)
            fn = self._fns[name] = self._function(name)
        error = fn(C.byref(args))
        if error:
            raise self.error(error, name)
        return args

    def error(self, error: int, function: str) -> PjrtError:
        """The ``PjrtError`` for a plugin's error (which is destroyed here)."""
        message = _new(ErrorMessage, error=error)
        self._fns["Error_Message"](C.byref(message))
        text = C.string_at(message.message, message.message_size).decode(errors="replace")
        code_args = _new(ErrorGetCode, error=error)
        failed = self._fns["Error_GetCode"](C.byref(code_args))
        code = ERROR_CODES[code_args.code] if not failed and 0 <= code_args.code < len(ERROR_CODES) else "UNKNOWN"
        if failed:
            self._fns["Error_Destroy"](C.byref(_new(ErrorArgs, error=failed)))
        self._fns["Error_Destroy"](C.byref(_new(ErrorArgs, error=error)))
        return PjrtError(f"{code}: {text} (in PJRT_{function})", code, function)

    def _attributes(self) -> dict[str, Any]:
        args = self.call("Plugin_Attributes", _new(PluginAttributes))
        out: dict[str, Any] = {}
        for k in range(args.num_attributes):
            nv = args.attributes[k]
            name = C.string_at(nv.name, nv.name_size).decode()
            if nv.type == 0:
                out[name] = C.string_at(nv.value, nv.value_size).decode(errors="replace")
            elif nv.type == 1:
                out[name] = nv.value
            elif nv.type == 2:
                out[name] = tuple((_i64 * nv.value_size).from_address(nv.value))
            elif nv.type == 4:
                out[name] = bool(nv.value & 0xFF)
        return out

    # Events --------------------------------------------------------------------------------

    def await_event(self, event: int, function: str = "Event_Await") -> None:
        """Wait for ``event``, destroy it, and raise the error it carries (if any)."""
        try:
            self.call("Event_Await", _new(EventArgs, event=event))
        finally:
            self._fns["Event_Destroy"](C.byref(_new(EventArgs, event=event)))

    def destroy(self, name: str, struct: type, **fields: Any) -> None:
        """Call a destroying function, as finalizers do: an error there is reported, not raised
        (a finalizer has no caller to raise to)."""
        error = self._fns[name](C.byref(_new(struct, **fields)))
        if error:
            import warnings  # only on a failed destruction

            warnings.warn(str(self.error(error, name)), RuntimeWarning, stacklevel=2)

    def __repr__(self) -> str:
        return f"Plugin({self.path!r}, C API {self.version[0]}.{self.version[1]})"


_USED = ("Error_Destroy", "Error_Message", "Error_GetCode", "Plugin_Initialize", "Plugin_Attributes",
         "Event_Destroy", "Event_IsReady", "Event_Await", "Client_Create", "Client_Destroy",
         "Client_PlatformName", "Client_PlatformVersion", "Client_AddressableDevices", "Client_Compile",
         "Client_BufferFromHostBuffer", "DeviceDescription_Id", "DeviceDescription_Kind",
         "DeviceDescription_ToString", "DeviceDescription_ProcessIndex", "Device_GetDescription", "Client_Devices",
         "Executable_Destroy", "Executable_NumOutputs",
         "LoadedExecutable_Destroy", "LoadedExecutable_GetExecutable", "LoadedExecutable_Execute",
         "Buffer_Destroy", "Buffer_ToHostBuffer", "Buffer_ReadyEvent", "Buffer_Delete",
         "Executable_OutputElementTypes", "Executable_OutputDimensions")

_plugins: dict[str, Plugin] = {}
_plugins_lock = threading.Lock()


def load_plugin(path: str | os.PathLike) -> Plugin:
    """The plugin at ``path``, loaded and initialized once per process."""
    key = os.path.realpath(os.fspath(path))
    with _plugins_lock:
        plugin = _plugins.get(key)
        if plugin is None:
            plugin = _plugins[key] = Plugin(key)
        return plugin


class Device:
    """One addressable device of a client."""

    __slots__ = ("client", "handle", "id", "kind", "description", "process_index")

    @property
    def platform(self) -> str:
        return self.client.platform

    def __init__(self, client: "Client", handle: int) -> None:
        plugin = client.plugin
        self.client, self.handle = client, handle
        desc = plugin.call("Device_GetDescription", _new(DeviceGetDescription, device=handle)).description
        self.id = plugin.call("DeviceDescription_Id", _new(DescriptionId, description=desc)).id
        # (the process driving it: another process's, in a run over several; 0 alone)
        self.process_index = plugin.call("DeviceDescription_ProcessIndex", _new(
            DescriptionProcessIndex, description=desc)).process_index
        kind = plugin.call("DeviceDescription_Kind", _new(DescriptionString, description=desc))
        self.kind = C.string_at(kind.string, kind.string_size).decode()
        text = plugin.call("DeviceDescription_ToString", _new(DescriptionString, description=desc))
        self.description = C.string_at(text.string, text.string_size).decode()

    def __repr__(self) -> str:
        return f"{self.client.platform.capitalize()}Device(id={self.id})"  # (JAX's: CpuDevice(id=0))

    def __str__(self) -> str:
        return f"{self.client.platform}:{self.id}"  # (JAX's: cpu:0)


def _destroy_client(plugin: Plugin, handle: int) -> None:
    plugin.destroy("Client_Destroy", ClientArgs, client=handle)


class Client:
    """A PJRT client: the plugin's devices, compilation, and buffers from the host."""

    def __init__(self, plugin: Plugin, options: dict[str, Any] | None = None, backend: str = "pjrt",
                 kv: Any = None) -> None:
        """``kv``: the run's key-value store as the plugin's callbacks (``kv.PluginCallbacks``), for
        a client of several processes."""
        self.plugin = plugin
        self.kv = kv  # (kept alive: the plugin calls it from its threads)
        self.backend = backend  # the name ember's backend registry knows it by (what buffers report)
        options = dict(options or {})
        values = (NamedValue * max(1, len(options)))()
        keep: list[Any] = []
        for k, (name, value) in enumerate(options.items()):
            encoded = name.encode()
            keep.append(encoded)
            nv = values[k]
            nv.struct_size, nv.name, nv.name_size = NamedValue.SIZE, encoded, len(encoded)
            if isinstance(value, bool):
                nv.type, nv.value, nv.value_size = 4, int(value), 1
            elif isinstance(value, int):
                nv.type, nv.value, nv.value_size = 1, value, 1
            elif isinstance(value, str):
                text = C.create_string_buffer(value.encode())
                keep.append(text)
                nv.type, nv.value, nv.value_size = 0, C.addressof(text), len(value.encode())
            else:
                raise TypeError(f"PJRT client option {name!r}: a bool, int or str, not {type(value).__name__}")
        get, put = kv.addresses() if kv is not None else (None, None)
        args = plugin.call("Client_Create", _new(ClientCreate, create_options=values, num_options=len(options),
                                                 kv_get_callback=get, kv_put_callback=put))
        self.handle = args.client
        self._finalizer = weakref.finalize(self, _destroy_client, plugin, self.handle)
        self.platform = self._string("Client_PlatformName")
        self.platform_version = self._string("Client_PlatformVersion")
        # How a read-only host array reaches a device: a host plugin uses it in place; an accelerator's
        # copy runs behind the call (the array held until it completes), as JAX's transfers do, so a
        # program's inputs cross while earlier work runs. A writable array is copied during the call.
        self.read_only_transfer = IMMUTABLE_ZERO_COPY if self.platform == "cpu" else IMMUTABLE_UNTIL_TRANSFER_COMPLETES
        found = plugin.call("Client_AddressableDevices", _new(ClientDevices, client=self.handle))
        self.devices = [Device(self, found.devices[k]) for k in range(found.num_devices)]  # (this process's)
        every = plugin.call("Client_Devices", _new(ClientDevices, client=self.handle))
        mine = {d.handle: d for d in self.devices}
        handles = [every.devices[k] for k in range(every.num_devices)]
        self.all_devices = [mine.get(h) or Device(self, h) for h in handles]  # (the run's, by id)
        self.all_devices.sort(key=lambda d: d.id)
        self._layouts: dict[int, tuple] = {}

    def _string(self, name: str) -> str:
        args = self.plugin.call(name, _new(ClientString, client=self.handle))
        return C.string_at(args.string, args.string_size).decode()

    def row_major(self, ndim: int) -> MemoryLayout:
        layout = self._layouts.get(ndim)
        if layout is None:
            layout = self._layouts[ndim] = _row_major(ndim)
        return layout[0]

    def compile(self, text: str | bytes, in_types: Sequence[tuple[tuple[int, ...], Any]] | None = None,
                options: bytes | None = None, fmt: str = "mlir") -> "Executable":
        """Compile a StableHLO module (MLIR text, entry function ``@main``). ``in_types``, the
        parameters' (shape, dtype), lets ``execute`` check its arguments: a plugin may not (a TPU
        took an f32[4] buffer for an f32[8] parameter)."""
        code = text.encode() if isinstance(text, str) else bytes(text)
        code_buffer = C.create_string_buffer(code, len(code))
        fmt_bytes = fmt.encode()
        program = _new(Program, code=C.addressof(code_buffer), code_size=len(code), format=fmt_bytes,
                       format_size=len(fmt_bytes))
        opts = compile_options(overrides=PLATFORM_OVERRIDES.get(self.platform)) if options is None else options
        args = self.plugin.call("Client_Compile", _new(
            ClientCompile, client=self.handle, program=C.pointer(program), compile_options=opts,
            compile_options_size=len(opts)))
        return Executable(self, args.executable, in_types)

    def deserialize(self, data: bytes, in_types: Sequence[tuple[tuple[int, ...], Any]] | None = None) -> "Executable":
        """An executable from ``Executable.serialize``'s bytes (made by this plugin's version)."""
        blob = C.create_string_buffer(data, len(data))
        args = self.plugin.call("Executable_DeserializeAndLoad", _new(
            DeserializeAndLoad, client=self.handle, serialized_executable=C.addressof(blob),
            serialized_executable_size=len(data)))
        return Executable(self, args.loaded_executable, in_types)

    def buffer_from_host(self, value: Any, device: Device | None = None, *, borrowed: bool = False) -> "Buffer":
        """A device buffer holding a copy of ``value`` (any array-like of a dtype PJRT has). A host
        platform's plugin may use a read-only array in place (no copy; the buffer holds the array),
        and an accelerator copy it behind the call; a ``borrowed`` array (the caller's, which may
        change once this returns) is copied during the call, as is any writable one."""
        arr = np.asarray(value)
        type_code = BUFFER_TYPES.get(arr.dtype)
        if type_code is None:
            raise TypeError(f"PJRT has no buffer type for dtype {arr.dtype}; supported: "
                            f"{', '.join(sorted(str(d) for d in BUFFER_TYPES))}")
        own = not arr.flags.c_contiguous  # (a copy of our own: nobody else writes to it)
        if own:
            arr = np.ascontiguousarray(arr)
            arr.flags.writeable = False
        dims = (_i64 * max(1, arr.ndim))(*arr.shape)
        device = device or self.devices[0]
        semantics = IMMUTABLE_ONLY_DURING_CALL
        if own or (not arr.flags.writeable and not borrowed):
            semantics = self.read_only_transfer
            if semantics == IMMUTABLE_ZERO_COPY and arr.ctypes.data % 16:
                semantics = IMMUTABLE_ONLY_DURING_CALL
        args = self.plugin.call("Client_BufferFromHostBuffer", _new(
            BufferFromHost, client=self.handle, data=arr.ctypes.data, type=type_code, dims=dims, num_dims=arr.ndim,
            host_buffer_semantics=semantics, device=device.handle))
        buffer = Buffer(self, args.buffer, arr.shape, arr.dtype, device)
        done = args.done_with_host_buffer
        if done and semantics == IMMUTABLE_ZERO_COPY:  # (it fires when the buffer goes: the array is held until then)
            buffer._host = arr
            self.plugin._fns["Event_Destroy"](C.byref(_new(EventArgs, event=done)))
        elif done and semantics == IMMUTABLE_UNTIL_TRANSFER_COMPLETES:
            buffer._hold_during_transfer(arr, done)
        elif done:
            self.plugin.await_event(done)
        return buffer

    def close(self) -> None:
        """Destroy the client now (buffers and executables made from it keep it until they go)."""
        self._finalizer()

    def __repr__(self) -> str:
        return f"Client({self.platform!r}, {len(self.devices)} devices, {self.plugin!r})"


def _destroy_buffer(plugin: Plugin, handle: int, client: Client, transfer: list | None = None) -> None:
    if transfer:  # (a copy from the host still holding its array: waited for before both go)
        try:
            plugin.await_event(transfer[0])
        except Exception as e:  # noqa: BLE001  (a finalizer has no caller to raise to)
            import warnings  # only on a failed transfer

            warnings.warn(f"a copy to the device failed: {e}", RuntimeWarning, stacklevel=2)
        transfer[:] = []  # (the array only now: the plugin reads it until the event fires)
    plugin.destroy("Buffer_Destroy", BufferArgs, buffer=handle)


class Buffer:
    """A device buffer: shape, dtype, and the handle (destroyed with this object). ``ready``, set
    by an asynchronous execution, is the event that defines its contents."""

    __slots__ = ("client", "handle", "shape", "dtype", "device", "backend", "_finalizer", "_pending", "_host",
                 "_transfer", "__weakref__")

    def __init__(self, client: Client, handle: int, shape: tuple[int, ...], dtype: np.dtype,
                 device: Device, pending: "Completion | None" = None) -> None:
        self.client, self.handle, self.shape, self.dtype, self.device = client, handle, tuple(shape), dtype, device
        self.backend = client.backend  # the registry's name of its backend (ember.core.array.DeviceBuffer)
        self._pending = pending
        self._host: np.ndarray | None = None  # a host array the buffer uses in place
        self._transfer: list = []  # [event, host array] while a copy from the host may still run
        self._finalizer = weakref.finalize(self, _destroy_buffer, client.plugin, handle, client)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def _hold_during_transfer(self, array: np.ndarray, done: int) -> None:
        """Keep ``array`` (and its copy's ``done`` event) until the copy completes: waited for by
        ``block_until_ready`` or when the buffer goes."""
        self._transfer = [done, array]
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _destroy_buffer, self.client.plugin, self.handle, self.client,
                                           self._transfer)

    def block_until_ready(self) -> None:
        """Wait for the computation (or the copy from the host) that produces this buffer; raise its
        error if it failed."""
        if self._pending is not None:
            self._pending.wait()
            self._pending = None
        transfer = self._transfer
        if transfer:
            try:
                self.client.plugin.await_event(transfer[0])
            finally:
                transfer[:] = []  # (the array only now: the plugin reads it until the event fires)

    def is_ready(self) -> bool:
        transfer = self._transfer
        if transfer and not self.client.plugin.call("Event_IsReady", _new(EventIsReady, event=transfer[0])).is_ready:
            return False
        return self._pending is None or self._pending.is_ready()

    def to_host(self) -> np.ndarray:
        """A new row-major NumPy array with the buffer's contents (waits for them)."""
        self._check_alive()
        self.block_until_ready()
        out = np.empty(self.shape, self.dtype)
        plugin = self.client.plugin
        args = plugin.call("Buffer_ToHostBuffer", _new(
            BufferToHost, src=self.handle, host_layout=C.addressof(self.client.row_major(out.ndim)),
            dst=out.ctypes.data, dst_size=out.nbytes))
        if args.event:
            plugin.await_event(args.event)
        return out

    def delete(self) -> None:
        """Free the device memory now (the buffer cannot be read afterwards)."""
        self._finalizer()

    @property
    def deleted(self) -> bool:
        return not self._finalizer.alive

    def _check_alive(self) -> None:
        if not self._finalizer.alive:
            raise RuntimeError(f"the device buffer {self.dtype}{list(self.shape)} was deleted (donated to a "
                               f"computation, or deleted by hand): it has no value to read")

    def __repr__(self) -> str:
        return f"Buffer({self.dtype}{list(self.shape)} on {self.device!r})"


def _destroy_executable(plugin: Plugin, handle: int, client: Client) -> None:
    plugin.destroy("LoadedExecutable_Destroy", ExecutableArgs, executable=handle)


class Completion:
    """The device-complete event of one execution, shared by its outputs: waited on once, then
    destroyed; its arguments and its executable are held until then. One that goes unwaited (every
    output dropped before the execution ended) waits as it goes: the plugin frees an executable's
    code when it is destroyed, and a host plugin's thread still running it then jumped into freed
    memory (a crash of the interpreter)."""

    __slots__ = ("plugin", "event", "arguments", "executable", "error", "lock")

    def __init__(self, plugin: Plugin, event: int, arguments: Sequence[Buffer], executable: "Executable") -> None:
        self.plugin, self.arguments = plugin, arguments
        self.executable: Executable | None = executable  # None once waited on
        self.event: int | None = event  # None once waited on
        self.error: PjrtError | None = None
        self.lock = threading.Lock()

    def is_ready(self) -> bool:
        with self.lock:
            if not self.event:
                return True
            return bool(self.plugin.call("Event_IsReady", _new(EventIsReady, event=self.event)).is_ready)

    def wait(self) -> None:
        with self.lock:
            if self.event:
                event, self.event = self.event, None
                try:
                    self.plugin.await_event(event)
                except PjrtError as e:
                    self.error = e
                finally:
                    self.arguments, self.executable = (), None
        if self.error is not None:
            raise self.error

    def __del__(self) -> None:
        if self.event:
            event, self.event = self.event, None
            try:
                self.plugin.await_event(event)
            except (PjrtError, AttributeError, TypeError):  # (no caller to raise to; at exit, globals are gone)
                pass


class Executable:
    """A compiled, loaded program: its outputs' types and ``execute`` on device buffers."""

    def __init__(self, client: Client, handle: int,
                 in_types: Sequence[tuple[tuple[int, ...], Any]] | None = None) -> None:
        self.client, self.handle = client, handle
        plugin = self.plugin = client.plugin
        self._finalizer = weakref.finalize(self, _destroy_executable, plugin, handle, client)
        self.in_types = None if in_types is None else [(tuple(s), np.dtype(d)) for s, d in in_types]
        unloaded = plugin.call("LoadedExecutable_GetExecutable", _new(GetExecutable, loaded_executable=handle))
        ex = unloaded.executable
        try:
            self.num_outputs = plugin.call("Executable_NumOutputs", _new(NumOutputs, executable=ex)).num_outputs
            types = plugin.call("Executable_OutputElementTypes", _new(OutputElementTypes, executable=ex))
            codes = [types.output_types[k] for k in range(types.num_output_types)]
            dims = plugin.call("Executable_OutputDimensions", _new(OutputDimensions, executable=ex))
            shapes, at = [], 0
            for k in range(dims.num_outputs):  # (the arrays live with the executable: copied here)
                n = dims.dim_sizes[k]
                shapes.append(tuple(dims.dims[at + j] for j in range(n)))
                at += n
        finally:
            plugin.destroy("Executable_Destroy", ExecutableArgs, executable=ex)
        unknown = [c for c in codes if c not in DTYPES]
        if unknown:
            raise PjrtError(f"the program has outputs of PJRT buffer types {unknown}, which ember has no dtype for",
                            "UNIMPLEMENTED")
        self.out_types = [(s, DTYPES[c]) for s, c in zip(shapes, codes)]
        self._outputs_type = _vp * max(1, self.num_outputs)
        self._donation_options: dict[frozenset, Any] = {}

    def _options_keeping(self, n: int, donated: frozenset[int]) -> Any:
        """Execute options that keep every argument but those at ``donated``: a program's donation
        (``tf.aliasing_output`` on a parameter) applies only to the arguments the caller gives up.
        Read-only for the plugin, so one per set is shared by calls (and threads)."""
        options = self._donation_options.get(donated)
        if options is None:
            kept = [i for i in range(n) if i not in donated]
            indices = (_i64 * max(1, len(kept)))(*kept)
            options = _new(ExecuteOptions, non_donatable_input_indices=indices,
                           num_non_donatable_input_indices=len(kept))
            options._keep = indices
            self._donation_options[donated] = options
        return options

    def check_arguments(self, arguments: Sequence[Buffer]) -> None:
        """Shapes and dtypes against the parameters', before anything reaches the device."""
        if self.in_types is None:
            return
        if len(arguments) != len(self.in_types):
            raise TypeError(f"the program takes {len(self.in_types)} arguments, got {len(arguments)}")
        for i, (b, (shape, dtype)) in enumerate(zip(arguments, self.in_types)):
            if not isinstance(b, Buffer):
                raise TypeError(f"argument {i} is a {type(b).__name__}, not a device Buffer")
            if b.shape != shape or b.dtype != dtype:
                raise TypeError(f"argument {i} is {b.dtype}{list(b.shape)}; the program's parameter {i} is "
                                f"{dtype}{list(shape)}")
            if b.client is not self.client:
                raise ValueError(f"argument {i} lives on another client ({b.client!r}); copy it to {self.client!r}")
            if b.deleted:
                raise RuntimeError(f"argument {i} ({b.dtype}{list(b.shape)}) was deleted or donated earlier")

    @property
    def devices(self) -> list[Device]:
        """The devices it runs on, one per partition, in the device assignment's order: an
        execution's argument and output lists come in this order."""
        found = self.__dict__.get("_devices")
        if found is None:
            args = self.plugin.call("LoadedExecutable_AddressableDevices", _new(LoadedDevices, executable=self.handle))
            by_handle = {d.handle: d for d in self.client.devices}
            found = self._devices = [by_handle[args.addressable_devices[k]]
                                     for k in range(args.num_addressable_devices)]
        return found

    def optimized_program(self) -> bytes:
        """The program XLA made (a serialized ``HloModuleProto``): after the SPMD partitioner, it
        holds the shardings XLA chose for the parameters and results."""
        plugin = self.plugin
        unloaded = plugin.call("LoadedExecutable_GetExecutable", _new(GetExecutable, loaded_executable=self.handle))
        ex = unloaded.executable
        try:
            program = _new(Program)
            args = _new(OptimizedProgram, executable=ex, program=C.pointer(program))
            plugin.call("Executable_OptimizedProgram", args)  # (first the size, then the bytes)
            data = C.create_string_buffer(program.code_size)
            program.code = C.addressof(data)
            plugin.call("Executable_OptimizedProgram", args)
            return data.raw[:program.code_size]
        finally:
            plugin.destroy("Executable_Destroy", ExecutableArgs, executable=ex)

    def execute_partitioned(self, argument_lists: Sequence[Sequence[Buffer]],
                            donated: frozenset[int] = frozenset()) -> list[list[Buffer]]:
        """Run an SPMD program: ``argument_lists[k]`` are the local shards for ``devices[k]``;
        returns each device's output shards (asynchronously, as ``execute``)."""
        devices = self.devices
        if len(argument_lists) != len(devices):
            raise ValueError(f"the program runs on {len(devices)} devices; got argument lists for "
                             f"{len(argument_lists)}")
        for device, arguments in zip(devices, argument_lists):
            for i, b in enumerate(arguments):
                if b.device is not device:
                    raise ValueError(f"argument {i} for {device!r} lives on {b.device!r}")
        count = len(devices)
        n = len(argument_lists[0]) if argument_lists else 0
        plugin = self.plugin
        keep: list[Any] = []
        handles = (_vp * count)()
        outputs = (_vp * count)()
        for k, arguments in enumerate(argument_lists):
            row = (_vp * max(1, n))(*[b.handle for b in arguments])
            out_row = self._outputs_type()
            keep += [row, out_row]
            handles[k], outputs[k] = C.addressof(row), C.addressof(out_row)
        events = (_vp * count)()
        options = self._options_keeping(n, donated)
        plugin.call("LoadedExecutable_Execute", _new(
            Execute, executable=self.handle, options=C.addressof(options), argument_lists=C.addressof(handles),
            num_devices=count, num_args=n, output_lists=C.addressof(outputs), device_complete_events=events))
        results = []
        for k, (device, arguments) in enumerate(zip(devices, argument_lists)):
            event = events[k]
            completion = Completion(plugin, event, arguments, self) if event else None
            row = keep[2 * k + 1]
            results.append([Buffer(self.client, row[j], shape, dtype, device, completion)
                            for j, (shape, dtype) in enumerate(self.out_types)])
        for arguments in argument_lists:
            for i in donated:
                arguments[i]._finalizer()
        return results

    def execute(self, arguments: Sequence[Buffer], donated: frozenset[int] = frozenset(),
                wait: bool = False, checked: bool = True) -> list[Buffer]:
        """Run on the first argument's device (or the client's first). Returns at once with the
        output buffers; their ``block_until_ready`` (or a copy to the host) waits, and raises an
        error the execution met. ``donated``: positions whose buffers the program may reuse; they
        are deleted here. ``checked=False``: the caller has checked the arguments' types (a jit
        hit path whose table is keyed by them)."""
        if checked:
            self.check_arguments(arguments)
        n = len(arguments)
        plugin = self.plugin
        outputs = self._outputs_type()
        output_lists = _One(C.addressof(outputs))
        events = _One()
        handles = (_vp * max(1, n))(*[b.handle for b in arguments])
        argument_lists = _One(C.addressof(handles))
        options = self._options_keeping(n, donated)  # (a parameter marked for aliasing is donated otherwise)
        plugin.call("LoadedExecutable_Execute", _new(
            Execute, executable=self.handle, options=C.addressof(options), argument_lists=C.addressof(argument_lists),
            num_devices=1, num_args=n, output_lists=C.addressof(output_lists), device_complete_events=events))
        completion = Completion(plugin, events[0], arguments, self) if events[0] else None
        device = arguments[0].device if arguments else self.client.devices[0]
        results = [Buffer(self.client, outputs[k], shape, dtype, device, completion)
                   for k, (shape, dtype) in enumerate(self.out_types)]
        for i in donated:
            arguments[i]._finalizer()  # PJRT took its memory; the handle is still the caller's to destroy
        if wait and completion is not None:
            completion.wait()
        return results

    def serialize(self) -> bytes:
        """The plugin's serialization of the compiled program (for a disk cache: it loads only in a
        plugin of the same platform and version)."""
        plugin = self.plugin
        unloaded = plugin.call("LoadedExecutable_GetExecutable", _new(GetExecutable, loaded_executable=self.handle))
        ex = unloaded.executable
        try:
            args = plugin.call("Executable_Serialize", _new(ExecutableSerialize, executable=ex))
            try:
                return C.string_at(args.serialized_bytes, args.serialized_bytes_size)
            finally:
                if args.serialized_executable_deleter:
                    C.CFUNCTYPE(None, _vp)(args.serialized_executable_deleter)(args.serialized_executable)
        finally:
            plugin.destroy("Executable_Destroy", ExecutableArgs, executable=ex)

    def __call__(self, *values: Any) -> list[np.ndarray]:
        """Host values in, host values out (tests and tools; ember's runtime keeps buffers on the device)."""
        buffers = [v if isinstance(v, Buffer) else self.client.buffer_from_host(v) for v in values]
        return [b.to_host() for b in self.execute(buffers)]

    def delete(self) -> None:
        self._finalizer()

    def __repr__(self) -> str:
        outs = ", ".join(f"{d}{list(s)}" for s, d in self.out_types)
        return f"Executable(-> ({outs}))"


def call_overhead(client: Client, repeats: int = 2000) -> dict[str, float]:
    """Median microseconds of one host -> device copy, one execution of a one-element program and
    one copy back, on ``client``: the binding's cost per call where the device does nothing."""
    exe = client.compile("func.func public @main(%x: tensor<f32>) -> tensor<f32> {\n"
                         "  return %x : tensor<f32>\n}\n", in_types=[((), np.float32)])
    x = np.float32(1.0)
    samples: dict[str, list[float]] = {"to_device": [], "execute": [], "to_host": []}
    for k in range(repeats + 50):
        t0 = time.perf_counter()
        b = client.buffer_from_host(x)
        t1 = time.perf_counter()
        (out,) = exe.execute([b])
        out.block_until_ready()
        t2 = time.perf_counter()
        out.to_host()
        t3 = time.perf_counter()
        if k >= 50:
            samples["to_device"].append(t1 - t0)
            samples["execute"].append(t2 - t1)
            samples["to_host"].append(t3 - t2)
    return {k: float(np.median(v)) * 1e6 for k, v in samples.items()}
