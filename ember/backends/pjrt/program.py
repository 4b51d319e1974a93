"""What a PJRT backend runs: the plugin's client (one per backend name and process), a traced
program compiled on it (its StableHLO, the loaded executable, its constants copied to the device
once), and the registry's executable around it. Executables go to ember's disk cache
(``backends.disk_cache``: checksummed entries keyed by the StableHLO and the plugin), so a fresh
process loads them instead of compiling again."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember import tree_util
from ember.backends.pjrt.binding import Buffer, Client, Device
from ember.backends.pjrt.clients import client, compile_cached  # noqa: F401  (client: the backend's)
from ember.backends.pjrt.lowering import REFUSED, REFUSED_BY_NAME, donation_aliases, lower_module, lower_rules
from ember.backends.pjrt.spmd import (  # noqa: F401  (the backend reaches them through this module)
    PartitionedExecutable,
    ShardedBuffer,
    put_sharded,
    reshard,
)
from ember.backends.protocols import (
    DECLINED,
    CompileOptions,
    Executable as BackendExecutable,
    SplitArgument,
    device_arguments,
    device_outputs,
)
from ember.compiler.broadcasts import explicit_broadcasts
from ember.compiler.dce import eliminate_dead_code
from ember.config import config
from ember.core import sharding as shd
from ember.core.array import Array
from ember.core.evaluation import as_type, impl_rules, to_numpy
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal, Var, subjaxprs
from ember.core.primitive import call_params
from ember.lax import control_flow as cf
from ember.lax.parallel import shard_map_p


class Program:
    """``closed`` lowered and compiled on ``client``. ``@main`` takes the constants, then the
    arguments; ``execute`` passes the constants' device buffers itself."""

    def __init__(self, client: Client, closed: ClosedJaxpr, name: str = "main",
                 donated: frozenset[int] = frozenset()) -> None:
        jaxpr = closed.jaxpr
        self.client, self.name = client, name
        self.in_avals, self.out_avals = closed.in_avals, closed.out_avals
        self.text = lower_module(closed, name, sorted(donated))
        self.aliased = donation_aliases(closed.in_avals, closed.out_avals, sorted(donated))  # input -> output
        params = list(jaxpr.constvars) + list(jaxpr.invars)
        self.executable, self.code = compile_cached(client, self.text, [(v.aval.shape, v.aval.dtype) for v in params])
        self.consts = [client.buffer_from_host(to_numpy(c, v.aval)) for c, v in zip(closed.consts, jaxpr.constvars)]
        self._shift = len(self.consts)

    def execute(self, arguments: Sequence[Buffer], donated: frozenset[int] = frozenset(),
                checked: bool = True) -> list[Buffer]:
        """Run on device buffers (asynchronously: the outputs' ``block_until_ready`` waits)."""
        shifted = frozenset(i + self._shift for i in donated)
        return self.executable.execute([*self.consts, *arguments], shifted, checked=checked)

    def __call__(self, *values: Any) -> list[np.ndarray]:
        """Host values in (of the types ``in_avals`` says), host values out."""
        buffers = [self.client.buffer_from_host(to_numpy(v, a)) for v, a in zip(values, self.in_avals)]
        return [b.to_host() for b in self.execute(buffers)]


class PjrtExecutable(BackendExecutable):
    """A program compiled by a PJRT plugin for the registry: Arrays in (device buffers passed as they
    are, anything else copied to the device), Arrays over device buffers out."""

    dialects = ("stablehlo",)
    takes_numpy = True  # (``device_arguments`` copies a NumPy array once, as it is)

    def __init__(self, backend: Any, closed: ClosedJaxpr, options: CompileOptions) -> None:
        self.backend, self.name = backend, options.name
        self.in_avals, self.out_avals = closed.in_avals, closed.out_avals
        self.program = Program(client(backend.name), closed, options.name, options.donated)
        self.closed = closed  # (run over a mesh when its arguments come split: ``_over_mesh``)
        self._meshed: MeshPrograms | None = None
        self.code = self.program.code  # compiled now, or loaded from the disk cache
        aliased = self.program.aliased
        self.donated = frozenset(i for i in options.donated if i in aliased)
        self.unusable_donations = tuple(self.in_avals[i] for i in sorted(options.donated) if i not in aliased)

    def __call__(self, *args: Any) -> list[Array]:
        try:
            buffers = device_arguments(self.backend, args, self.in_avals)
        except SplitArgument:
            return self._over_mesh(args)
        donated = self.donated
        if donated:  # (a buffer passed at two positions is not given up)
            donated = frozenset(i for i in donated if sum(b is buffers[i] for b in buffers) == 1)
        return device_outputs(self.name, self.program.execute(buffers, donated), self.out_avals)

    def fast_runner(self, out_tree: Any) -> Callable[[tuple], Any] | None:
        """For the jit hit path (whose table has checked the arguments' types): each Array's buffer
        on this backend as it is, any other Array's host data put here (used in place on a host
        plugin); a deleted argument declines (the general path reports it)."""
        if config.debug_nans or config.debug_infs:
            return None
        backend, program, in_avals, out_avals = self.backend, self.program, self.in_avals, self.out_avals
        from_buffer, unflatten = Array.from_buffer, tree_util.tree_unflatten

        def run(args: tuple) -> Any:
            try:
                buffers = device_arguments(backend, args, in_avals)
            except SplitArgument:  # (arguments split over a mesh: the program over it)
                return unflatten(out_tree, self._over_mesh(args))
            except RuntimeError:  # (a deleted argument: the general path reports it)
                return DECLINED
            outs = program.execute(buffers, checked=False)
            return unflatten(out_tree, [from_buffer(b, a) for b, a in zip(outs, out_avals)])
        return run

    def _over_mesh(self, args: Sequence[Any]) -> list[Array]:
        """The program run over the mesh of its arguments that are split over devices (JAX's
        committed arrays): ``MeshPrograms``."""
        if self._meshed is None:
            self._meshed = MeshPrograms(self.program.client, self.closed, self.name, self.donated)
        return self._meshed(args)

    def as_text(self, dialect: str) -> str:
        if dialect != "stablehlo":
            return super().as_text(dialect)
        return self.program.text


class MeshPrograms:
    """One program run over a mesh, compiled once per set of input shardings. An input's sharding
    is the one ``in_shardings`` gives, else its argument's when that is split over the mesh's
    devices (JAX's committed arrays), else replicated; an output's is the one ``out_shardings``
    gives, else the one XLA chooses. The mesh is ``mesh``, or that of the first split argument
    (arguments split over other meshes of the same devices in the same order are resharded; over
    other devices, or the same in another order, JAX's error)."""

    def __init__(self, client: Client, closed: ClosedJaxpr, name: str, donated: frozenset[int], mesh: Any = None,
                 in_shardings: Sequence[Any] | None = None, out_shardings: Sequence[Any] | None = None) -> None:
        self.client, self.closed, self.name, self.donated, self.mesh = client, closed, name, donated, mesh
        self.in_shardings = list(in_shardings or [None] * len(closed.in_avals))
        self.out_shardings = list(out_shardings or [None] * len(closed.out_avals))
        self.programs: dict[tuple, PartitionedCall] = {}

    def program(self, in_sh: tuple, mesh: Any) -> "PartitionedCall":
        found = self.programs.get(in_sh)
        if found is None:
            found = self.programs[in_sh] = PartitionedCall(PartitionedExecutable(
                self.client, self.closed, mesh, in_sh, self.out_shardings, self.name, self.donated))
        return found

    def first(self) -> "PartitionedCall":
        """The program for arguments that bring no sharding of their own (compiled now)."""
        return self.program(tuple(self.in_shardings), self.mesh)

    def shardings(self, args: Sequence[Any]) -> tuple[tuple, Any]:
        shardings = [given if given is not None else getattr(getattr(x, "_device", None), "sharding", None)
                     for given, x in zip(self.in_shardings, args)]
        split = [(i, s) for i, s in enumerate(shardings) if isinstance(s, shd.NamedSharding)]
        mesh: Any = self.mesh if self.mesh is not None else split[0][1].mesh
        ids = _device_ids(mesh)
        for i, s in split:  # (the same devices in another order are other devices to JAX too)
            if s.mesh is not mesh and _device_ids(s.mesh) != ids:
                other = _device_ids(s.mesh)
                raise ValueError(f"Received incompatible devices for jitted computation. The program {self.name} "
                                 f"runs on device ids {ids}, but its argument {i} is on device ids {other}: put "
                                 "the arguments on the same devices (jax.device_put)")
        return tuple(s if isinstance(s, shd.NamedSharding) and s.mesh == mesh else None for s in shardings), mesh

    def __call__(self, args: Sequence[Any]) -> list[Array]:
        in_sh, mesh = self.shardings(args)
        found = self.program(in_sh, mesh)
        outs = found(args)
        for i in found.donated:
            if type(args[i]) is Array:
                args[i].delete()
        return outs


_ids_of: dict[Any, list[int]] = {}


def _device_ids(mesh: Any) -> list[int]:
    """The ids of ``mesh``'s devices in its order (kept per mesh: checked on every call)."""
    found = _ids_of.get(mesh)
    if found is None:
        found = _ids_of[mesh] = [d.id for d in mesh.devices.flat]
    return found


class MeshExecutable(BackendExecutable):
    """A program over a device mesh from the start (its jit's shardings name the mesh, or it holds
    a ``shard_map`` over one): XLA partitions it over the mesh's devices (``MeshPrograms``)."""

    dialects = ("stablehlo",)
    takes_numpy = True

    def __init__(self, backend: Any, closed: ClosedJaxpr, options: CompileOptions, mesh: Any,
                 in_shardings: Sequence[Any] | None = None, out_shardings: Sequence[Any] | None = None) -> None:
        self.backend, self.name = backend, options.name
        self.in_avals, self.out_avals = closed.in_avals, closed.out_avals
        self.programs = MeshPrograms(client(backend.name), closed, options.name, options.donated, mesh,
                                     in_shardings, out_shardings)
        self.donated = options.donated
        self.unusable_donations = ()
        self.code = self.programs.first().executable.code  # (compiled now, as jit expects)

    def __call__(self, *args: Any) -> list[Array]:
        return self.programs(args)

    def as_text(self, dialect: str) -> str:
        if dialect != "stablehlo":
            return super().as_text(dialect)
        return self.programs.first().as_text()


def _on_devices(mesh: Any) -> bool:
    """Whether ``mesh`` holds a PJRT plugin's devices (not ember's CPU devices, nor abstract)."""
    devices = getattr(mesh, "devices", None)
    return devices is not None and isinstance(next(iter(np.asarray(devices).flat)), Device)


def mesh_of(jaxpr: Jaxpr) -> Any:
    """The mesh of the first ``shard_map`` over a device mesh in ``jaxpr`` (sub-programs included)."""
    for eqn in jaxpr.eqns:
        if eqn.primitive is shard_map_p:
            return eqn.params["mesh"]
        for sub in subjaxprs(eqn.params):
            found = mesh_of(sub)
            if found is not None:
                return found
    return None


class PartitionedCall:
    """A program over a mesh, called with Arrays (or host values) and giving Arrays."""

    def __init__(self, executable: PartitionedExecutable) -> None:
        self.executable = executable
        self.donated = executable.donated

    def __call__(self, values: Sequence[Any]) -> list[Array]:
        buffers = self.executable(values)
        return [Array.from_buffer(b, a) for b, a in zip(buffers, self.executable.out_avals)]

    def as_text(self) -> str:
        return self.executable.text


# Host callbacks run on the host between the device programs the program is split into
# (``SplitExecutable``): at the top level, and inside loops, branches and calls, which then run on
# the host themselves, their bodies split the same way.
HOST_STEPS = frozenset({"pure_callback", "io_callback", "debug_callback", "debug_print"})
_HOSTED = (cf.while_p, cf.cond_p, cf.scan_p)


def _calls_host(jaxpr: Jaxpr) -> bool:
    """Whether ``jaxpr`` holds a host callback, in its sub-programs too."""
    return any(eqn.primitive.name in HOST_STEPS or any(_calls_host(s) for s in subjaxprs(eqn.params))
               for eqn in jaxpr.eqns)


def _runs_on_host(eqn: Any) -> bool:
    """A loop, branch or call that holds a host callback: the host runs it, step by step."""
    return (eqn.primitive in _HOSTED or eqn.primitive in call_params) and \
        any(_calls_host(s) for s in subjaxprs(eqn.params))


def compile_executable(backend: Any, closed: ClosedJaxpr, options: CompileOptions) -> BackendExecutable:
    """The executable of ``closed`` on ``backend``: one device program, or several around the
    program's host callbacks."""
    closed = eliminate_dead_code(explicit_broadcasts(closed))
    if options.placement is not None:
        mesh, in_shardings, out_shardings = options.placement
        inner = mesh_of(closed.jaxpr)
        if inner is not None and inner != mesh:
            raise ValueError(f"{options.name} holds a shard_map over the mesh {inner}, but its arguments and "
                             f"shardings place it on the mesh {mesh}: use one mesh")
        return MeshExecutable(backend, closed, options, mesh, in_shardings, out_shardings)
    mesh = mesh_of(closed.jaxpr)
    if mesh is not None:
        return MeshExecutable(backend, closed, options, mesh)
    placed = [s if isinstance(s, shd.NamedSharding) and _on_devices(s.mesh) else None
              for s in closed.jaxpr.facts.get("out_shardings", ())]
    if any(s is not None for s in placed):  # (outputs constrained over a mesh of these devices)
        mesh = next(s.mesh for s in placed if s is not None)
        outs = [s if s is not None and s.mesh == mesh else None for s in placed]
        return MeshExecutable(backend, closed, options, mesh, None, outs + [None] * (len(closed.out_avals) - len(outs)))
    if any(eqn.primitive.name in HOST_STEPS or _runs_on_host(eqn) for eqn in closed.jaxpr.eqns):
        return SplitExecutable(backend, closed, options)
    return PjrtExecutable(backend, closed, options)


def unlowered(jaxpr: Jaxpr, top: bool = True) -> str | None:
    """Why the first primitive of ``jaxpr`` (sub-programs included) that is not lowered cannot be
    (host callbacks are run where the host runs what holds them: see ``_runs_on_host``)."""
    for eqn in jaxpr.eqns:
        p = eqn.primitive
        if top and p.name in HOST_STEPS:
            continue
        hosted = top and _runs_on_host(eqn)
        if not hosted and p not in lower_rules and p not in call_params:
            reason = REFUSED.get(p) or REFUSED_BY_NAME.get(p.name) or "no lowering rule is written for it yet"
            return f"it holds the primitive `{p.name}`, which is not lowered: {reason}"
        for sub in subjaxprs(eqn.params):
            why = unlowered(sub, top=hosted)
            if why is not None:
                return why
    return None


# Element types a platform's compiler has no support for: XLA's TPU compiler has no complex128 (a
# program holding one aborts the process there), so it is refused before it reaches the plugin.
UNSUPPORTED_DTYPES = {"tpu": (np.dtype(np.complex128),)}


def unsupported_dtype(jaxpr: Jaxpr, platform: str) -> str | None:
    """Why ``jaxpr`` (sub-programs included) cannot run on ``platform``: a value of an element type
    its compiler lacks."""
    missing = UNSUPPORTED_DTYPES.get(platform, ())
    if not missing:
        return None
    def refusal(dtype: np.dtype, where: str) -> str:
        return (f"it holds {dtype} values{where}, which the {platform.upper()} does not support: compute in "
                "complex64 (or on the CPU: ember.device_put / EMBER_PLATFORMS=cpu)")
    for v in (*jaxpr.invars, *jaxpr.outvars):
        if getattr(getattr(v, "aval", None), "dtype", None) in missing:
            return refusal(v.aval.dtype, "")
    for eqn in jaxpr.eqns:
        for v in (*eqn.invars, *eqn.outvars):
            if getattr(getattr(v, "aval", None), "dtype", None) in missing:
                return refusal(v.aval.dtype, f" (`{eqn.primitive.name}`)")
        for sub in subjaxprs(eqn.params):
            why = unsupported_dtype(sub, platform)
            if why is not None:
                return why
    return None


def _host(value: Any) -> np.ndarray:
    return value.to_host() if isinstance(value, Buffer) else value


class SplitExecutable(BackendExecutable):
    """A program whose host callbacks run on the host between device programs: each run of
    equations between two host steps is compiled on its own, taking the values it reads and giving
    those read later; a callback gets its operands copied to the host, and its results go to the
    device when a later program reads them. A loop, branch or call holding a callback is a host
    step too: the host runs its iterations (its branch), each body a ``SplitExecutable`` of its
    own, as the reference interpreter runs them. Donation is not used here."""

    dialects = ("stablehlo",)

    def __init__(self, backend: Any, closed: ClosedJaxpr, options: CompileOptions) -> None:
        self.backend, self.name = backend, options.name
        self.in_avals, self.out_avals = closed.in_avals, closed.out_avals
        self.unusable_donations = tuple(self.in_avals[i] for i in sorted(options.donated))
        jaxpr = closed.jaxpr
        self.constvars, self.invars, self.outvars = jaxpr.constvars, jaxpr.invars, jaxpr.outvars
        self.consts = [to_numpy(c, v.aval) for c, v in zip(closed.consts, jaxpr.constvars)]
        inner = CompileOptions(options.name)
        blocks: list[Any] = []
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in HOST_STEPS or _runs_on_host(eqn):
                blocks.append(eqn)
            elif blocks and isinstance(blocks[-1], list):
                blocks[-1].append(eqn)
            else:
                blocks.append([eqn])
        read_later: set[int] = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
        steps: list[Any] = []
        for block in reversed(blocks):
            eqns = block if isinstance(block, list) else [block]
            defined = {id(v) for e in eqns for v in e.outvars}
            inputs: list[Var] = []
            for e in eqns:
                for a in e.invars:
                    if isinstance(a, Var) and id(a) not in defined and all(a is not b for b in inputs):
                        inputs.append(a)
            if isinstance(block, list):
                outputs = [v for e in eqns for v in e.outvars if id(v) in read_later]
                sub = ClosedJaxpr(Jaxpr([], inputs, eqns, outputs), [])
                steps.append(("device", inputs, outputs, Program(client(backend.name), sub, options.name)))
            elif block.primitive.name in HOST_STEPS:
                steps.append(("host", block))
            else:
                steps.append(("control", block, self._bodies(block, inner)))
            read_later |= {id(v) for v in inputs}
        self.steps = steps[::-1]
        self.code = "compiled" if any(p.code == "compiled" for p in self._programs()) else "disk"

    def _bodies(self, eqn: Any, options: CompileOptions) -> list["SplitExecutable"]:
        """The sub-programs of a hosted loop, branch or call, each split in its turn: a while's
        condition and body, a cond's branches, a scan's or a call's body."""
        def split(sub: Any) -> SplitExecutable:
            closed = sub if isinstance(sub, ClosedJaxpr) else ClosedJaxpr(sub, [])
            return SplitExecutable(self.backend, closed, options)

        p, params = eqn.primitive, eqn.params
        if p is cf.while_p:
            return [split(params["cond_jaxpr"]), split(params["body_jaxpr"])]
        if p is cf.cond_p:
            return [split(b) for b in params["branches"]]
        if p is cf.scan_p:
            return [split(params["jaxpr"])]
        return [split(params[call_params[p]])]

    def _programs(self) -> list[Program]:
        found: list[Program] = []
        for step in self.steps:
            if step[0] == "device":
                found.append(step[3])
            elif step[0] == "control":
                found.extend(p for body in step[2] for p in body._programs())
        return found

    def run(self, values: Sequence[Any]) -> list[Any]:
        """The outputs (device buffers or host arrays) of the inputs ``values`` (either)."""
        backend = self.backend
        device = backend.local_devices()[0]
        env: dict[int, Any] = {}
        for v, c in zip(self.constvars, self.consts):
            env[id(v)] = c
        for v, x in zip(self.invars, values):
            env[id(v)] = x

        def on_device(value: Any) -> Any:
            return value if isinstance(value, Buffer) else backend.put(np.array(value), device)

        def read(a: Any) -> Any:
            return np.asarray(a.val, a.aval.dtype) if isinstance(a, Literal) else env[id(a)]

        for step in self.steps:
            if step[0] == "device":
                _, inputs, outputs, program = step
                outs = program.execute([on_device(env[id(v)]) for v in inputs])
                env.update((id(v), b) for v, b in zip(outputs, outs))
                continue
            eqn = step[1]
            if step[0] == "host":
                with np.errstate(all="ignore"):
                    outs = impl_rules[eqn.primitive](*(_host(read(a)) for a in eqn.invars), **eqn.params)
                outs = [as_type(o, v.aval) for v, o in zip(eqn.outvars, outs)]
            else:
                outs = _run_hosted(eqn, step[2], [read(a) for a in eqn.invars])
            env.update((id(v), o) for v, o in zip(eqn.outvars, outs))
        return [read(v) for v in self.outvars]

    def __call__(self, *args: Any) -> list[Array]:
        name = self.backend.name
        values = []
        for x, a in zip(args, self.in_avals):
            buffer = x.device_buffer if type(x) is Array else None
            values.append(buffer if buffer is not None and buffer.backend == name else to_numpy(x, a))
        results = []
        for value, a in zip(self.run(values), self.out_avals):
            results.append(Array.from_buffer(value, a) if isinstance(value, Buffer) else
                           Array(as_type(np.asarray(value), a), a))
        return results

    def as_text(self, dialect: str) -> str:
        if dialect != "stablehlo":
            return super().as_text(dialect)
        return "\n".join(p.text for p in self._programs())


def _run_hosted(eqn: Any, bodies: list[SplitExecutable], operands: list[Any]) -> list[Any]:
    """A loop, branch or call holding a host callback, run by the host as the reference runs it:
    a while's condition read on the host each step, a cond's index read once, a scan's xs sliced
    and its ys stacked on the host."""
    p, params = eqn.primitive, eqn.params
    if p is cf.while_p:
        cond, body = bodies
        c, b = params["cond_nconsts"], params["body_nconsts"]
        cond_consts, body_consts, carry = operands[:c], operands[c:c + b], operands[c + b:]
        while bool(_host(cond.run([*cond_consts, *carry])[0])):
            carry = body.run([*body_consts, *carry])
        return carry
    if p is cf.cond_p:
        i = int(_host(operands[0]))
        return bodies[i if 0 <= i < len(bodies) else -1].run(operands[1:])
    if p is cf.scan_p:
        [body] = bodies
        length, nk, nc = params["length"], params["num_carry"], params["num_consts"]
        consts, carry = operands[:nc], operands[nc:nc + nk]
        xs = [_host(x) for x in operands[nc + nk:]]
        ys_per_step: list[list[np.ndarray]] = [[]] * length
        for i in range(length - 1, -1, -1) if params["reverse"] else range(length):
            outs = body.run([*consts, *carry, *(np.asarray(x[i]) for x in xs)])
            carry, ys_per_step[i] = outs[:nk], [_host(y) for y in outs[nk:]]
        y_avals = [v.aval for v in eqn.outvars[nk:]]
        if not length:
            return carry + [np.zeros(a.shape, a.dtype) for a in y_avals]
        return carry + [np.stack(ys).astype(a.dtype) for ys, a in zip(zip(*ys_per_step), y_avals)]
    [body] = bodies
    return body.run(operands)
