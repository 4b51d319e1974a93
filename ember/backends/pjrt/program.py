"""What a PJRT backend runs: the plugin's client (one per backend name and process), a traced
program compiled on it (its StableHLO, the loaded executable, its constants copied to the device
once), and the registry's executable around it. Executables go to ember's disk cache
(``backends.disk_cache``: checksummed entries keyed by the StableHLO and the plugin), so a fresh
process loads them instead of compiling again."""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ember import tree_util
from ember.backends import disk_cache
from ember.backends.pjrt.binding import Buffer, Client, Executable, PjrtError, load_plugin
from ember.backends.pjrt.discovery import XLA_CPU, find_plugins
from ember.backends.pjrt.lowering import REFUSED, REFUSED_BY_NAME, donation_aliases, lower_module, lower_rules
from ember.backends.protocols import (
    DECLINED,
    CompileOptions,
    Executable as BackendExecutable,
    device_arguments,
    device_outputs,
)
from ember.compiler.broadcasts import explicit_broadcasts
from ember.compiler.dce import eliminate_dead_code
from ember.config import config
from ember.core.array import Array
from ember.core.evaluation import as_type, impl_rules, to_numpy
from ember.core.ir import ClosedJaxpr, Jaxpr, Literal, Var, subjaxprs
from ember.core.primitive import call_params
from ember.lax import control_flow as cf

_clients: dict[str, Client] = {}
_lock = threading.Lock()


def client(name: str = XLA_CPU) -> Client:
    """The client of the plugin found under backend name ``name`` (opened once per process)."""
    with _lock:
        found = _clients.get(name)
        if found is None:
            spec = find_plugins().get(name)
            if spec is None:
                raise PjrtError(f"no PJRT plugin for the backend {name!r} was found. Install one (xla_cpu: "
                                "pip install ember[pjrt-cpu]; tpu: pip install ember[tpu]) or name its library "
                                f"in EMBER_PJRT_PLUGIN ({name}:/path/to/plugin.so)", "NOT_FOUND")
            # (the plugin's default options: XLA's CPU plugin makes 4 devices here, where JAX's CPU
            # client makes 1 unless asked for more; ``xla_cpu`` is a backend chosen by name, and the
            # PJRT backend's multi-device tests run on those devices, so its default stands)
            found = _clients[name] = Client(load_plugin(spec.path), backend=name)
        return found


def compile_cached(client: Client, text: str, in_types: list) -> tuple[Executable, str]:
    """The executable of ``text``, loaded from ember's disk cache when a process compiled it before
    with this plugin (same library file, version and device kind), else compiled and stored (when
    the plugin can serialize). Returns it and how it came ("disk" or "compiled")."""
    plugin = client.plugin
    stat = os.stat(plugin.path)
    key = disk_cache.entry_key("pjrt", text, plugin.path, f"{stat.st_size}:{stat.st_mtime_ns}", repr(plugin.version),
                               repr(sorted(plugin.attributes.items())), client.platform, client.platform_version,
                               client.devices[0].kind)
    payload = disk_cache.load(key)
    if payload is not None:
        try:
            return client.deserialize(payload, in_types), "disk"
        except PjrtError as e:  # (another build of the plugin under the same name: compiled again)
            disk_cache.discard(key, f"the PJRT plugin refused the stored executable: {e}")
    executable = client.compile(text, in_types)
    if plugin.has("Executable_Serialize"):
        try:
            disk_cache.store(key, executable.serialize())
        except PjrtError:  # a plugin that cannot serialize its executables: no disk cache
            pass
    return executable, "compiled"


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
        self.code = self.program.code  # compiled now, or loaded from the disk cache
        aliased = self.program.aliased
        self.donated = frozenset(i for i in options.donated if i in aliased)
        self.unusable_donations = tuple(self.in_avals[i] for i in sorted(options.donated) if i not in aliased)

    def __call__(self, *args: Any) -> list[Array]:
        buffers = device_arguments(self.backend, args, self.in_avals)
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
            except RuntimeError:  # (a deleted argument: the general path reports it)
                return DECLINED
            outs = program.execute(buffers, checked=False)
            return unflatten(out_tree, [from_buffer(b, a) for b, a in zip(outs, out_avals)])
        return run

    def as_text(self, dialect: str) -> str:
        if dialect != "stablehlo":
            return super().as_text(dialect)
        return self.program.text


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
        device = backend.devices()[0]
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
