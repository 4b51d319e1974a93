"""The seam between the runtime and its backends: what a backend is, and what it compiles.

A ``Backend`` turns a traced program (a ``ClosedJaxpr``) into an ``Executable``; the runtime
(``ember.runtime``: the jit cache, the hit path, AOT stages) holds executables and calls them,
and knows nothing else of the backend. Backends register by name (``ember.backends.registry``),
and ``config.backend`` chooses among them.

Buffers: an ``Array``'s data is its backend's buffer. Host backends (``reference``, ``cpu``)
keep a NumPy array in host memory (``Array._value``, read directly by the hot paths); a backend
whose memory is elsewhere gives ``Array.from_buffer`` an object with the ``DeviceBuffer``
protocol (``ember.core.array``), which is copied to the host when the host needs the value.
An executable takes arguments wherever they live: its backend's own buffers as they are,
anything else moved through the host (``device_arguments``), never read in the wrong place.
"""
from __future__ import annotations

import abc
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember import dtypes
from ember.config import config
from ember.core.array import Array, DeviceBuffer
from ember.core.avals import ShapedArray
from ember.core.evaluation import to_numpy
from ember.core.ir import ClosedJaxpr

# What a fast runner returns when it turns the arguments down (the general path takes the call).
DECLINED = object()


class CompileOptions(NamedTuple):
    """What the runtime asks of a compile besides the program."""

    name: str = "fn"  # the function's name, for logs and generated symbols
    donated: frozenset[int] = frozenset()  # argument positions whose buffers outputs may take over
    # A program over a device backend's mesh: (mesh, each input's sharding or None, each output's
    # sharding or None); None for one device. Backends that partition programs read it; the others
    # never receive one.
    placement: Any = None


class Executable(abc.ABC):
    """A compiled program: call it with the flat arguments (Arrays, NumPy arrays or scalars of
    the types ``in_avals`` says), get the list of output Arrays (``out_avals``).

    The defaults describe an executable with no fast path, no text but the IR's, and no cost
    model of its own; a backend overrides what it has."""

    name: str
    in_avals: Sequence[ShapedArray]
    out_avals: Sequence[ShapedArray]
    # How its code came to be, for the compile log and ``cache_info().compiles``: "compiled"
    # (generated now), "disk" (loaded from the disk cache), "disk program" (the whole executable
    # loaded from the disk cache: no stage of the compile ran), "reused" (an earlier program's code),
    # "none" (interpreted: no machine code) or "tiered" (compiling in the background).
    code: str = "compiled"
    # The donated arguments (their avals) whose buffers no output could take.
    unusable_donations: tuple = ()
    # Their positions among the arguments: those Arrays are not deleted (JAX's, for unusable donations).
    kept_donations: frozenset = frozenset()
    # The text forms ``as_text`` gives besides the IR ("llvm" for native code).
    dialects: tuple[str, ...] = ()
    # Whether its fast runner takes NumPy arrays as they are (else the hit path makes them Arrays).
    takes_numpy: bool = False

    @abc.abstractmethod
    def __call__(self, *args: Any) -> list[Array]:
        """Run on flat arguments; the outputs as Arrays."""

    def fast_runner(self, out_tree: Any) -> Callable[[tuple], Any] | None:
        """For the jit hit path: ``run(args)`` -> the output pytree (by ``out_tree``) for a tuple of
        argument Arrays (and NumPy arrays if ``takes_numpy``), or ``DECLINED`` when it turns them
        down. None: no fast path."""
        return None

    @property
    def fast_runner_pending(self) -> bool:
        """Whether a later ``fast_runner`` may succeed where this one returned None (its code is
        still being compiled or its dispatcher built): the hit path asks again then."""
        return False

    @property
    def interpreted(self) -> bool:
        """Whether its calls run no machine code, and never will (``code`` "none": each step runs
        the reference's rule): an eager replay keeps its own steps rather than call it."""
        return self.code == "none"

    def as_text(self, dialect: str) -> str:
        """The program in ``dialect``, one of ``dialects``."""
        raise ValueError(f"this executable ({type(self).__name__}) has no {dialect!r} text; it has "
                         f"{', '.join(map(repr, self.dialects)) or 'only the IR'}")

    def cost_analysis(self) -> dict[str, float] | None:
        """The backend's own cost estimate; None: the runtime's static model of the IR stands."""
        return None


class Backend(abc.ABC):
    """A platform that runs programs: its name in the registry, its devices, how it compiles,
    and how it holds buffers and moves them to and from the host."""

    name: str  # the registry's key, what ``config.backend`` names: "cpu", "reference", ...
    platform: str  # the platform it serves (``default_backend()``, ``Array.platform()``): "cpu", "tpu", ...
    # Among the available backends of an unset ``config.backend``, the highest priority is the default.
    priority: int = 0
    # Whether its buffers are NumPy arrays in host memory (``Array._value``); if not, ``put`` makes them.
    host_buffers: bool = True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} (platform {self.platform!r}, priority {self.priority})>"

    def is_available(self) -> bool:
        """Whether it can run here (a plugin found, a device present). Asked when it is chosen."""
        return True

    @abc.abstractmethod
    def devices(self) -> list[Any]:
        """Its devices (objects with ``platform`` and ``id``)."""

    @abc.abstractmethod
    def compile(self, closed: ClosedJaxpr, options: CompileOptions) -> Executable:
        """An executable for ``closed``."""

    def local_devices(self) -> list[Any]:
        """The devices this process drives (all of ``devices()`` unless the run spans processes):
        where its programs run by default."""
        return self.devices()

    def owns(self, device: Any) -> bool:
        """Whether ``device`` is one of its devices (``device_put`` asks each backend; override
        it where listing the devices costs something, such as opening a plugin's client)."""
        return device in self.devices()

    def cannot_run(self, closed: ClosedJaxpr) -> str | None:
        """Why it cannot run ``closed`` (a sentence for the error), or None if it can."""
        return None

    def put(self, value: np.ndarray, device: Any, *, borrowed: bool = False) -> DeviceBuffer:
        """A buffer on ``device`` holding a copy of the host ``value`` (device backends only). The
        backend may keep a read-only ``value`` until its copy completes; a ``borrowed`` one (the
        caller's, which may change once this returns) is copied before ``put`` returns."""
        raise NotImplementedError(f"backend {self.name!r} keeps its buffers in host memory")


# Copies to a device of at least this many bytes each run on threads when a call makes several:
# a plugin's copy from the host runs without the GIL, and one thread does not fill the link (a
# GPT step's 63 NumPy arrays, 127 MB, reached a TPU v5e in 20 ms on one thread, 13 ms on four).
PARALLEL_COPY_BYTES = 1 << 20
COPY_THREADS = 4
# A NumPy argument of at most this many bytes is copied by ember first (microseconds), and the
# frozen copy goes to the device behind the call; a larger one is the plugin's to copy during the
# call (ember's own copy of a GPT step's arrays cost 38 ms). A TPU v5e's small copies during the
# call are each waited for in turn: the CNN step's ten NumPy arguments (the largest 1.5 MB) took
# 2.86 ms a step with its eight small ones copied first, 3.63 ms with all ten during the call.
OWN_COPY_MAX_BYTES = 1 << 18
_copiers: list[ThreadPoolExecutor] = []
os.register_at_fork(after_in_child=_copiers.clear)  # (a forked child has none of the threads)


def device_arguments(backend: Backend, args: Sequence[Any], avals: Sequence[ShapedArray]) -> list[Any]:
    """The buffer of each argument on ``backend`` (a device backend): an Array on it passes its
    own; any other value (on the host or on another backend) is copied there through the host,
    large copies side by side on ``COPY_THREADS`` threads."""
    device = backend.local_devices()[0]
    large = [i for i, x in enumerate(args) if _copied(backend, device, x) and x.nbytes >= PARALLEL_COPY_BYTES]
    if len(large) < 2:
        return [device_argument(backend, device, x, a) for x, a in zip(args, avals)]
    if not _copiers:
        _copiers.append(ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="ember-copy"))
    pending: dict[int, Future] = {}
    for i in large:  # (one copy of a value passed twice)
        if id(args[i]) not in pending:
            pending[id(args[i])] = _copiers[0].submit(device_argument, backend, device, args[i], avals[i])
    return [pending[id(x)].result() if id(x) in pending else device_argument(backend, device, x, a)
            for x, a in zip(args, avals)]


def _copied(backend: Backend, device: Any, x: Any) -> bool:
    """Whether ``device_argument`` copies the NumPy array or Array ``x`` to ``backend``."""
    return type(x) is np.ndarray or (type(x) is Array and _resident(backend, device, x) is None)


def _resident(backend: Backend, device: Any, x: Array) -> Any:
    """The buffer of the Array ``x`` already on ``device``: its own, or its live mirror (a host
    Array's copy made by an earlier call: ``Array._mirror``); None if it must be copied there (an
    Array on another device of the backend goes through the host)."""
    buffer = x._device
    if buffer is not None and buffer.backend == backend.name and buffer.device is device:
        return buffer
    mirror = x._mirror
    if mirror is not None and mirror.backend == backend.name and not mirror.deleted:
        return mirror
    return None


class SplitArgument(Exception):
    """An argument split over several devices reached a one-device program: the backend runs the
    program over those devices instead (``ember.backends.pjrt.spmd``)."""


class SplitBuffers:
    """Whether this process has made a buffer split over devices (``made``): until it has, eager
    operations skip asking each operand whether it is one (``ember.runtime.eager``)."""

    made = False


def device_argument(backend: Backend, device: Any, x: Any, aval: ShapedArray) -> Any:
    """The buffer of one argument on ``backend``'s ``device`` (where its programs run): an Array's
    own there or its mirror (``_resident``), else a new copy (kept as the mirror of a host Array)."""
    if type(x) is not Array:
        if type(x) is np.ndarray and x.dtype == aval.dtype:
            if x.nbytes > OWN_COPY_MAX_BYTES:  # (the caller's array, copied by the plugin during the call)
                return backend.put(x, device, borrowed=True)
            return backend.put(np.array(x, order="C"), device)  # (a small one: our own copy, sent behind the call)
        return backend.put(to_numpy(x, aval), device)
    buffer = _resident(backend, device, x)
    if buffer is not None:
        return buffer
    if getattr(x._device, "shards", None) is not None:
        raise SplitArgument(x)
    buffer = backend.put(to_numpy(x, aval), device)
    if x._device is None:
        x._mirror = buffer
    return buffer


def host_outputs(name: str, outs: Sequence[np.ndarray], avals: Sequence[ShapedArray]) -> list[Array]:
    """A host executable's NumPy outputs as Arrays (checked under ``debug_nans`` / ``debug_infs``)."""
    if config.debug_nans or config.debug_infs:
        _check_nans(name, outs)
    return [Array(o, a) for o, a in zip(outs, avals)]


def device_outputs(name: str, buffers: Sequence[DeviceBuffer], avals: Sequence[ShapedArray]) -> list[Array]:
    """A device executable's output buffers as Arrays (their values checked on the host under
    ``debug_nans`` / ``debug_infs``, the only time they are copied there)."""
    outs = [Array.from_buffer(b, a) for b, a in zip(buffers, avals)]
    if config.debug_nans or config.debug_infs:
        _check_nans(name, [o._value for o in outs])
    return outs


class InvalidOutputValues(FloatingPointError):
    """``debug_nans`` / ``debug_infs``: a compiled program's output holds a NaN (an infinity).
    ``jit`` then runs the function op by op, as JAX does, to name the operation."""


def _check_nans(name: str, outs: Sequence[np.ndarray]) -> None:
    for i, o in enumerate(outs):
        if dtypes.is_inexact(o.dtype):  # (float8 and bfloat16 included)
            wide = o.astype(np.complex128 if dtypes.is_complex(o.dtype) else np.float64)
            if config.debug_nans and np.isnan(wide).any():
                raise InvalidOutputValues(f"debug_nans: output {i} of {name} contains NaN")
            if config.debug_infs and np.isinf(wide).any():
                raise InvalidOutputValues(f"debug_infs: output {i} of {name} contains inf")
