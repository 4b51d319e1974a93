"""Several processes as one run, over MPI (``jax.distributed``): ``initialize``, ``shutdown``,
``is_initialized``.

Start the processes with MPI's launcher (``mpiexec -n 2 python train.py``) and call
``ember.distributed.initialize()`` in each: the rank and size come from MPI
(``mpi4py``, the optional dependency group ``distributed``; nothing of it is imported until
``initialize`` is called). Then ``ember.devices()`` lists the devices of every process, by
process (ids ``process * local_device_count + k``), ``local_devices()`` this process's, and a
``Mesh`` of them is a global mesh: ``shard_map`` and ``pmap`` over it run this process's
devices' programs (a thread each, as in one process), and a collective over an axis that
spans processes combines this process's values first, then makes one MPI collective on the
NumPy buffers (``ember.backends.reference.parallel``), non-blocking and polled against a
deadline (``config.collective_timeout``, ``EMBER_COLLECTIVE_TIMEOUT``): a process that died or
never came makes the others raise ``CollectiveTimeoutError`` instead of hanging, and the run
is aborted when Python exits. See docs/distributed.md.
"""
from __future__ import annotations

import atexit
import math
import os
import stat
import sys
import time
from typing import Any, Sequence

import numpy as np

from ember.backends import registry
from ember.config import config
from ember.core import sharding as shd
from ember.core.array import Array

__all__ = ["CollectiveTimeoutError", "device_count", "initialize", "is_initialized", "local_device_count",
           "local_devices", "make_array_from_process_local_data", "process_allgather", "process_count",
           "process_index", "shutdown"]


class CollectiveTimeoutError(RuntimeError):
    """A collective across processes did not complete within ``config.collective_timeout``."""


class _State:
    transport: "MpiTransport | None" = None
    atexit_registered = False
    kv_server: Any = None  # (process 0's key-value store of a PJRT backend's run)


_state = _State()


def _import_mpi() -> Any:
    try:
        from mpi4py import MPI  # the optional dependency (ember[distributed]): imported only here
    except ImportError as e:
        raise ImportError("ember.distributed.initialize runs the processes over MPI and needs mpi4py and an MPI "
                          "library: pip install 'ember[distributed]' (mpi4py and the mpich wheel), then start the "
                          f"processes with mpiexec -n N python script.py ({e})") from e
    return MPI


class MpiTransport:
    """The collectives between processes, on NumPy buffers (mpi4py's buffer methods: no pickling),
    each non-blocking and polled until it completes or the deadline passes."""

    def __init__(self, MPI: Any, comm: Any) -> None:
        self.MPI, self.comm = MPI, comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.broken = False
        self.ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}

    # -- waiting with a deadline ----------------------------------------------------------------
    def wait(self, requests: list, what: tuple) -> None:
        if not requests:
            return
        timeout = float(config.collective_timeout)
        deadline = time.monotonic() + timeout
        spins = 0
        test_all = self.MPI.Request.Testall
        while not test_all(requests):
            spins += 1
            if spins > 200:
                if time.monotonic() > deadline:
                    self.broken = True
                    collective, axes = what
                    raise CollectiveTimeoutError(
                        f"ember.distributed: the collective {collective} over the mesh axis "
                        f"{axes[0] if len(axes) == 1 else axes!r} did not complete within {timeout:g} s on process "
                        f"{self.rank} of {self.size} processes: another process died or did not reach the same "
                        "collective (config.collective_timeout / EMBER_COLLECTIVE_TIMEOUT); the MPI job is "
                        "aborted when this process exits")
                time.sleep(1e-4 if spins > 2000 else 0)

    # -- the collectives ------------------------------------------------------------------------
    def allreduce(self, buf: np.ndarray, op: str, what: tuple) -> np.ndarray:
        """``buf`` reduced elementwise over the processes (``op``: sum, max, min)."""
        dtype = buf.dtype
        if dtype == np.bool_:  # (a sum of booleans is their "any": max over bytes)
            out = self.allreduce(buf.view(np.uint8), "max" if op == "sum" else op, what)
            return out.view(np.bool_)
        if dtype.kind not in "iufc" or (dtype.kind == "f" and dtype.itemsize < 4):  # (half precision, ml_dtypes)
            return self.allreduce(buf.astype(np.float32), op, what).astype(dtype)
        send = np.ascontiguousarray(buf)
        recv = np.empty_like(send)
        self.wait([self.comm.Iallreduce(send, recv, self.ops[op])], what)
        return recv

    def allgather(self, buf: np.ndarray, what: tuple) -> np.ndarray:
        """Every process's ``buf``, stacked: shape ``(processes,) + buf.shape``."""
        send = np.ascontiguousarray(buf)
        recv = np.empty((self.size,) + send.shape, send.dtype)
        self.wait([self.comm.Iallgather(_bytes(send), _bytes(recv))], what)
        return recv

    def sendrecv(self, sends: dict, recvs: dict, what: tuple) -> None:
        """Send ``sends[p]`` to process ``p`` and receive ``recvs[q]`` (filled in place) from ``q``."""
        requests = [self.comm.Irecv(_bytes(buf), source=p, tag=17) for p, buf in sorted(recvs.items())]
        requests += [self.comm.Isend(_bytes(np.ascontiguousarray(buf)), dest=p, tag=17)
                     for p, buf in sorted(sends.items())]
        self.wait(requests, what)

    def gather_all(self, local: dict, rendezvous: Any, what: tuple) -> list:
        """Every mesh position's value: this process's ``local`` ({position: value}) and, through
        one ``Allgather``, every other process's (each holds as many positions, ascending)."""
        mine = [local[p] for p in rendezvous.positions]
        gathered = self.allgather(np.stack(mine), what)
        values: list = [None] * len(rendezvous.processes)
        taken = [0] * self.size
        for position, process in enumerate(rendezvous.processes):
            values[position] = gathered[process, taken[process]]
            taken[process] += 1
        return values

    def barrier(self) -> None:
        self.wait([self.comm.Ibarrier()], ("barrier", ("processes",)))


def _bytes(a: np.ndarray) -> Any:
    """The buffer of ``a`` as bytes (any dtype, ml_dtypes' too, travels as its bytes)."""
    return a.reshape(-1).view(np.uint8) if a.size else np.empty(0, np.uint8)


# --- the API ---------------------------------------------------------------------------------------
def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids: int | Sequence[int] | None = None,
               cluster_detection_method: str | None = None, initialization_timeout: int = 300,
               coordinator_bind_address: str | None = None, **options: Any) -> None:
    """Join the run's processes (JAX's signature). The processes are MPI's: the rank and size
    come from ``MPI.COMM_WORLD``; ``num_processes`` / ``process_id``, when given, must agree
    with them. ``coordinator_address`` is accepted and not needed (MPI's launcher connects the
    processes). ``local_device_ids`` picks this process's devices (default: its
    ``config.num_cpu_devices``); every process must have as many."""
    if _state.transport is not None:
        raise RuntimeError("distributed.initialize should only be called once.")
    if cluster_detection_method not in (None, "mpi4py", "mpi"):
        raise ValueError(f"ember.distributed.initialize runs over MPI; cluster_detection_method="
                         f"{cluster_detection_method!r} is not available (use None or 'mpi4py')")
    MPI = _import_mpi()
    comm = MPI.COMM_WORLD.Dup()  # (ember's own communicator: the user's MPI traffic never mixes with it)
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    rank, size = comm.Get_rank(), comm.Get_size()
    if num_processes is not None and int(num_processes) != size:
        comm.Free()
        raise ValueError(f"ember.distributed.initialize: num_processes={num_processes}, but MPI started {size} "
                         "process(es) (mpiexec -n); the processes come from MPI")
    if process_id is not None and int(process_id) != rank:
        comm.Free()
        raise ValueError(f"ember.distributed.initialize: process_id={process_id}, but this process is MPI rank "
                         f"{rank} of {size}; the ranks come from MPI")
    if local_device_ids is None:
        local = int(config.num_cpu_devices)
    else:
        ids = [local_device_ids] if isinstance(local_device_ids, int) else list(local_device_ids)
        local = len(ids)
    if local < 1:
        comm.Free()
        raise ValueError(f"ember.distributed.initialize: a process needs at least one device, got {local}")
    transport = MpiTransport(MPI, comm)
    counts = transport.allgather(np.array([local], np.int64), ("initialize", ("processes",))).reshape(-1)
    if len(set(counts.tolist())) != 1:
        comm.Free()
        raise ValueError(f"ember.distributed.initialize: every process must have as many devices; they have "
                         f"{counts.tolist()} (EMBER_NUM_CPU_DEVICES / local_device_ids)")
    backend = registry.get()
    if size > 1 and not backend.host_buffers:
        try:
            _join_device_run(backend.name, comm, rank, size, coordinator_bind_address)
        except Exception:
            comm.Free()
            raise
    _state.transport = transport
    shd.set_processes(rank, size, local)
    if not _state.atexit_registered:
        atexit.register(_at_exit)  # (runs before mpi4py finalizes MPI)
        _state.atexit_registered = True


def _join_device_run(name: str, comm: Any, rank: int, size: int, bind_address: str | None) -> None:
    """A PJRT backend's processes as one run: process 0 serves the key-value store the plugin's
    clients exchange their topology through (a thread), MPI sends its address to the others, and
    each process's client is created with its ``node_id`` and the store (docs/distributed.md)."""
    from ember.backends.pjrt import clients, kv  # (for start-up time: the PJRT binding loads when used)
    from ember.backends.pjrt.discovery import XLA_CPU  # (for start-up time, as above)

    if name == XLA_CPU:
        raise RuntimeError("ember.distributed.initialize: XLA's CPU plugin (the backend 'xla_cpu') runs no "
                           "collectives across processes (it has no cross-process runtime), so a run over several "
                           "processes cannot use it. Run several CPU processes on ember's CPU backend "
                           "(EMBER_PLATFORMS=cpu), or one process with several XLA CPU devices "
                           "(XLA_FLAGS=--xla_force_host_platform_device_count=N)")
    server = kv.KeyValueServer(bind_address or "") if rank == 0 else None
    address = comm.bcast(server.address if server is not None else None, root=0)
    _state.kv_server = server
    clients.join_run(name, rank, size, kv.PluginCallbacks(kv.KeyValueClient(tuple(address))))


def is_initialized() -> bool:
    return _state.transport is not None


def process_index() -> int:
    """This process's index in the run (MPI's rank; 0 before ``initialize``)."""
    return shd.process_index()


def process_count() -> int:
    """The number of processes of the run (MPI's size; 1 before ``initialize``)."""
    return shd.process_count()


def local_devices() -> list[shd.Device]:
    """This process's devices."""
    return shd.local_devices()


def device_count() -> int:
    """The devices of every process."""
    return len(shd.devices())


def local_device_count() -> int:
    return len(shd.local_devices())


def shutdown() -> None:
    """Leave the run: this process is one process with its own devices again."""
    transport = _state.transport
    if transport is None:
        return
    if not transport.broken:
        transport.barrier()
        transport.comm.Free()
    _state.transport = None
    shd.set_processes(0, 1, 0)


def transport() -> MpiTransport:
    """The link to the other processes (``initialize`` first)."""
    if _state.transport is None:
        raise RuntimeError("a mesh spans several processes but ember.distributed is not initialized: call "
                           "ember.distributed.initialize() in every process first")
    return _state.transport


def _at_exit() -> None:
    transport = _state.transport
    if transport is not None and transport.broken:
        # A collective timed out: a peer is gone and MPI cannot finalize cleanly (it would wait for it).
        sys.stdout.flush()
        sys.stderr.flush()
        _wait_until_read((sys.stdout, sys.stderr), OUTPUT_READ_TIMEOUT_S)
        transport.MPI.COMM_WORLD.Abort(1)


# How long an aborting process waits for the launcher to read its output.
OUTPUT_READ_TIMEOUT_S = 5.0


def _wait_until_read(streams: Sequence[Any], timeout: float) -> None:
    """Wait (at most ``timeout`` seconds) until what this process wrote to the pipes behind
    ``streams`` has been read. The launcher (MPI's ``mpiexec``) reads a process's output through a
    pipe and stops reading when the run is aborted: an ``Abort`` right after the traceback of a
    ``CollectiveTimeoutError`` lost its last lines when the machine was busy."""
    import fcntl  # (POSIX only, as MPI's launchers are: imported where an aborting run needs them)
    import termios

    deadline = time.monotonic() + timeout
    unread = np.zeros(1, np.int32)
    for stream in streams:
        try:
            fd = stream.fileno()
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
            while time.monotonic() < deadline:
                fcntl.ioctl(fd, termios.FIONREAD, unread)  # (bytes in the pipe, on either end: Linux)
                if unread[0] == 0:
                    break
                time.sleep(0.005)
        except (OSError, ValueError, AttributeError):  # (no file behind the stream, or no such ioctl)
            continue


# --- arrays of several processes -------------------------------------------------------------------
def make_array_from_process_local_data(sharding: shd.Sharding, local_data: Any,
                                       global_shape: Sequence[int] | None = None) -> Array:
    """The global array whose blocks on this process's devices are ``local_data`` (the
    concatenation of this process's blocks, as in JAX). The array's buffer has the global shape;
    the blocks of other processes' devices hold zeros here (they are not addressable)."""
    data = np.asarray(local_data)
    index_map = sharding.devices_indices_map(tuple(global_shape) if global_shape is not None else
                                             _global_shape(sharding, data.shape))
    shape = tuple(global_shape) if global_shape is not None else _global_shape(sharding, data.shape)
    mine = [index for d, index in index_map.items() if d.process_index == shd.process_index()]
    box = []
    for dim, size in enumerate(shape):
        starts = [s[dim].indices(size)[0] for s in mine]
        stops = [s[dim].indices(size)[1] for s in mine]
        box.append(slice(min(starts), max(stops)))
    full = np.zeros(shape, data.dtype)
    if tuple(b.stop - b.start for b in box) != data.shape:
        raise ValueError(f"make_array_from_process_local_data: this process's blocks of the global shape {shape} "
                         f"span {tuple(b.stop - b.start for b in box)}, but local_data has shape {data.shape}")
    full[tuple(box)] = data
    return shd.place(Array(full), sharding)


def _global_shape(sharding: shd.Sharding, local_shape: tuple) -> tuple:
    """JAX's inference: each dimension is the local one times how many processes split it."""
    parts = _parts(sharding, len(local_shape))
    probe = sharding.devices_indices_map(tuple(parts))
    shape = []
    for dim, size in enumerate(local_shape):
        mine = {probe[d][dim].indices(parts[dim])[0] for d in probe if d.process_index == shd.process_index()}
        shape.append(size * parts[dim] // len(mine))
    return tuple(shape)


def _parts(sharding: shd.Sharding, ndim: int) -> list[int]:
    if isinstance(sharding, shd.NamedSharding):
        spec = tuple(sharding.spec) + (None,) * (ndim - len(sharding.spec))
        return [math.prod(sharding.mesh.shape[n] for n in shd.spec_names(e)) for e in spec]
    return [1] * ndim


def process_allgather(x: Any, tiled: bool = False) -> np.ndarray:
    """The whole value of a multi-process array on every process (each process contributes its
    devices' blocks); ``tiled=False`` stacks the processes' inputs instead when ``x`` is not a
    global array (JAX's ``multihost_utils.process_allgather``)."""
    sharding = shd.sharding_of(x) if isinstance(x, Array) else None
    value = np.asarray(x)
    link = transport()
    every = link.allgather(value, ("process_allgather", ("processes",)))
    if sharding is None or sharding.is_fully_addressable:
        return np.concatenate(list(every), axis=0) if tiled else every
    full = np.empty(value.shape, value.dtype)
    for d, index in sharding.devices_indices_map(value.shape).items():
        full[index] = every[d.process_index][index]
    return full
