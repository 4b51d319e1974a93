"""Small top-level helpers of JAX's API: moving data in and out (``devices``, ``device_put``,
``device_get``, ``block_until_ready``, ``from_dlpack``), ``default_backend``,
``ensure_compile_time_eval`` and ``named_call``."""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

import numpy as np

from ember import tree_util
from ember.backends import registry
from ember.backends.protocols import Backend
from ember.core import sharding
from ember.core.array import Array, Device
from ember.core.primitive import Primitive
from ember.core.trace import EvalTrace, Trace, Tracer, current_trace, set_current_trace
from ember.lax import parallel as lax_parallel
from ember.numpy import asarray
from ember.runtime.tiers import wait_for_compiles  # noqa: F401  (re-exported by ember)

__all__ = ["block_until_ready", "default_backend", "device_get", "device_put", "devices", "ensure_compile_time_eval",
           "from_dlpack", "named_call"]


def devices(backend: str | None = None) -> list[Device]:
    """The devices of ``backend`` (a registered name or platform), or of the default backend."""
    if backend is None and registry.get().host_buffers:
        return sharding.devices()
    return registry.get(backend).devices()


def device_put(x: Any, device: Any = None) -> Any:
    """Copy a pytree of arrays / scalars onto a device (the default backend's first by default), or
    place them as a sharding says (as Arrays). A device of a backend whose memory is not the host's
    gets a copy in that memory (an array of such a device put on a host device is copied to the
    host). ``device`` may be a tree prefix of ``x`` (a device or sharding per subtree)."""
    if device is not None and not isinstance(device, _PLACEMENTS) and \
            tree_util.tree_structure(device, is_leaf=_is_placement).num_nodes > 1:
        try:
            return tree_util.tree_map(lambda d, sub: device_put(sub, d), device, x, is_leaf=_is_placement)
        except (ValueError, TypeError):
            raise ValueError("device_put device specification must be a tree prefix of the corresponding value, "
                             f"got {device!r:.200} for a value of structure {tree_util.tree_structure(x)}") from None
    if isinstance(device, sharding.PartitionSpec) and not registry.get().host_buffers:
        device = sharding.NamedSharding(_context_mesh(), device)
    if isinstance(device, sharding.Sharding) and not isinstance(device, sharding.SingleDeviceSharding):
        devices_of = getattr(getattr(device, "mesh", None), "devices", None)
        first = None if devices_of is None else next(iter(np.asarray(devices_of).flat))
        if first is not None and not isinstance(first, Device) and not registry.of_device(first).host_buffers:
            split = registry.of_device(first)
            return tree_util.map_for_trace(lambda leaf: _put_sharded(leaf, split, device), x)
    target = device
    if device is None and not registry.get().host_buffers:  # (the default device, as in JAX: a TPU's)
        target = registry.get().local_devices()[0]
    if isinstance(device, sharding.SingleDeviceSharding):  # (one device: its backend decides, as for the device)
        (target,) = device.device_set
    if target is not None and not isinstance(target, (Device, sharding.Sharding, sharding.PartitionSpec)):
        backend = registry.of_device(target)
        if not backend.host_buffers:
            return tree_util.map_for_trace(lambda leaf: _put_on_device(leaf, backend, target), x)
    return tree_util.map_for_trace(lambda leaf: leaf if isinstance(leaf, Array) and device is None else
                              sharding.put(Array(np.asarray(leaf), leaf.aval) if type(leaf) is Array else
                                           asarray(leaf), device), x)


def _context_mesh() -> Any:
    mesh = sharding.get_mesh()
    if mesh.empty:
        raise ValueError("Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed to device_put (or "
                         "pass a NamedSharding)")
    return mesh


def _put_sharded(leaf: Any, backend: Any, where: sharding.Sharding) -> Any:
    """``leaf`` split over the devices of ``where`` (a device backend's): each device holds its
    block; an array already on the backend is resharded there."""
    if isinstance(leaf, Tracer):  # (inside a trace: the value is constrained, as JAX's device_put does)
        return lax_parallel.with_sharding_constraint(leaf, where)
    array = leaf if type(leaf) is Array else asarray(leaf)
    where.shard_shape(tuple(array.shape))  # (a dimension its axes do not divide: JAX's error, nothing placed)
    buffer = array.device_buffer
    if buffer is not None and buffer.backend == backend.name and not buffer.deleted:
        return Array.from_buffer(backend.put_sharded((buffer, array.aval), where), array.aval)
    return Array.from_buffer(backend.put_sharded(np.asarray(array), where), array.aval)


_PLACEMENTS = (Device, sharding.Sharding, sharding.PartitionSpec)


def _is_placement(d: Any) -> bool:
    return d is None or isinstance(d, _PLACEMENTS)


def _put_on_device(leaf: Any, backend: Backend, device: Any) -> Any:
    if isinstance(leaf, Tracer):  # (inside a trace there are no buffers to move)
        return leaf
    array = leaf if type(leaf) is Array else asarray(leaf)
    buffer = array.device_buffer
    if buffer is not None and buffer.backend == backend.name and buffer.device == device:
        return array
    return Array.from_buffer(backend.put(np.asarray(array), device), array.aval)


def block_until_ready(x: Any) -> Any:
    """Wait for every array in a pytree (host backends run synchronously; a device backend's calls
    return before the device finishes)."""
    if type(x) is Array:  # the common case, in timing loops: no tree to walk
        return x.block_until_ready()
    for leaf in tree_util.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


def from_dlpack(x: Any, *, copy: bool | None = None) -> Array:
    """An Array from any object with ``__dlpack__`` (NumPy, PyTorch, JAX, ...).

    The data is copied: ember arrays are immutable and must not change when
    the producer writes to its buffer.
    """
    return asarray(np.array(np.from_dlpack(x), copy=True))


def device_get(x: Any) -> Any:
    """The pytree ``x`` with every ``ember.Array`` replaced by a (read-only) NumPy array; other
    leaves, tracers included, are returned unchanged (as in JAX)."""
    return tree_util.tree_map(lambda leaf: np.asarray(leaf) if type(leaf) is Array else leaf, x)  # (tracers pass)


def default_backend() -> str:
    """The platform of the backend that runs programs now (``config.backend``): "cpu" unless an
    accelerator's backend is registered and available."""
    return registry.get().platform


class _CompileTimeEvalTrace(Trace):
    """Evaluates operations whose operands are all concrete at once; hands the others to ``parent``."""

    description = "ensure_compile_time_eval"

    def __init__(self, parent: Trace) -> None:
        self.parent = parent
        self.eager = EvalTrace()

    def process_primitive(self, primitive: Primitive, args: tuple, params: dict) -> Any:
        if any(isinstance(a, Tracer) for a in args):
            with set_current_trace(self.parent):
                return self.parent.process_primitive(primitive, args, params)
        return self.eager.process_primitive(primitive, args, params)


@contextlib.contextmanager
def ensure_compile_time_eval() -> Iterator[None]:
    """Inside the block, operations on concrete values run at once even while tracing.

    Under ``jit`` (or another transformation), ``jnp.arange(3).sum()`` in the block is an
    ``ember.Array`` rather than a traced value, so Python can use its value (``int(...)``).
    Operations on traced values are traced as usual. The block applies to operations bound
    directly in it, not inside functions that are traced on their own (the bodies of
    ``lax.cond``, ``lax.scan``, nested ``jit``), where JAX would also find traced values.
    Outside any trace it changes nothing.
    """
    parent = current_trace()
    if isinstance(parent, EvalTrace):
        yield
        return
    with set_current_trace(_CompileTimeEvalTrace(parent)):
        yield


def named_call(fun: Callable, *, name: str | None = None) -> Callable:
    """``fun`` under the name ``name`` (default: its own). As in JAX, where the name only labels
    profiles and the IR has no trace of it, the call behaves exactly like ``fun``."""
    @functools.wraps(fun)
    def named(*args: Any, **kwargs: Any) -> Any:
        return fun(*args, **kwargs)

    if name is not None:
        named.__name__ = named.__qualname__ = name
    return named
