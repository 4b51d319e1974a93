"""Whole programs on disk: a fresh process's first call of a program that an earlier process
compiled loads the finished executable (the plan of its steps and the machine code of its
modules) instead of running the stages (expand, optimize, fuse, plan, codegen, compile).

The key (``disk_cache.program_key``) is the stable fingerprint of the traced program, its name,
its donated inputs, the flags that change compiled code and ember's source; the entry also
holds the identity of the host and toolchain it was compiled for (``jit.identity``), and an
entry of another host is a miss (compiled, and written anew). Tracing still runs: the key is
the traced program's.

The entry is checked as every disk-cache entry (``disk_cache``: magic, format, key, length,
sha256), then its structure here, then each module's object code as a module entry's
(``object_code.inspect``: the checksum taken when LLVM generated it, the ELF object's
structure); an entry that fails any of them is removed with a ``RuntimeWarning`` and the
program compiled again. The plan is JSON and raw array bytes (never pickled): nothing in an
entry is executed but the checked object code. Trusted, as the machine code is (see
``disk_cache``): that the plan's sizes (buffers, extents) are those its kernels were compiled
for; a checksummed entry is the one this user's ember wrote.

What is kept: programs whose steps are native kernels, views and matrix products (the steps
that are plain data once linked). A program with a loop, an FFT, a LAPACK call or a step on
the reference interpreter (whose step holds live objects: the equation, a table of addresses)
is not kept whole; its modules are, as before. ``Report.program_cache`` says which happened
and why (printed by ``log_compiles`` and ``explain_cache_misses``).
"""
from __future__ import annotations

import functools
import json
import os
import struct
import time
from typing import Any

import numpy as np

from ember import dtypes
from ember.backends import disk_cache
from ember.backends.cpu import dot, jit, threads
from ember.backends.cpu.codegen import Code, Report
from ember.backends.cpu.plan import Plan
from ember.backends.cpu.runner import DotStep, KernelStep, Program, ViewStep
from ember.core.avals import ShapedArray
from ember.core.ir import Eqn, Var
from ember.lax.dot import dot_general_p

FORMAT = 2  # 2: donated inputs are kept or deleted by their types alone (avals.consumed_donations)
_LENGTH = struct.Struct("<Q")  # the JSON part's length; then the JSON, then the arrays' bytes


class NotKept(Exception):
    """Why a compiled program cannot be kept whole on disk."""


def identity() -> str:
    """What the entry's machine code and plan depend on besides the key: the host, the toolchain,
    whether the float16 helpers are there (they decide which equations fuse), the threads (a
    large reduction is split for them) and the choice of products (``EMBER_GEMM``: which ones fuse)."""
    return (f"{jit.identity()} float16 {jit.float16_supported()} threads {threads.thread_count()} "
            f"gemm {os.environ.get('EMBER_GEMM', '')!r}")


# --- writing ---------------------------------------------------------------------------------
def store(key: str, plan: Plan, code: Code, report: Report) -> str:
    """Write the compiled program under ``key``; "" if written, else why it is not kept."""
    try:
        payload = encode(plan, code, report)
    except NotKept as why:
        return str(why)
    disk_cache.store(key, payload, program=True)
    return ""


def encode(plan: Plan, code: Code, report: Report) -> bytes:
    """The entry's payload; ``NotKept`` if the program is not plain data once linked."""
    blobs: list[bytes] = []
    modules = list(code.modules) + [m for m in code.borrowed if not any(m is n for n in code.modules)]
    for m in modules:
        if m.payload is None:
            raise NotKept(f"the machine code of {jit._module_name(m.source)} is not at hand")
    steps = [_encode_step(i, step, modules, blobs) for i, step in enumerate(plan.steps)]
    header = {
        "format": FORMAT,
        "identity": identity(),
        "modules": [{"source": _blob(blobs, m.source.encode()), "quick": m.quick, "code": _blob(blobs, m.payload)}
                    for m in modules],
        "template": [None if value is None else _array(blobs, value) for value in plan.template],
        "slot_avals": [[slot, _aval(aval)] for slot, aval in plan.slot_avals.items()],
        "constants": plan.constants,
        "in_slots": plan.in_slots,
        "in_avals": [_aval(a) for a in plan.in_avals],
        "steps": steps,
        "out_atoms": [_atom(blobs, a) for a in plan.out_atoms],
        "allocations": [[slot, _aval(aval)] for slot, aval in plan.allocations],
        "arena_views": [[slot, offset, _aval(aval)] for slot, offset, aval in plan.arena_views],
        "arena_bytes": plan.arena_bytes,
        "reuses": [list(r) for r in plan.reuses],
        "reused_inputs": sorted(plan.reused_inputs),
        "unusable_donations": [_aval(a) for a in plan.unusable_donations],
        "kept_donations": sorted(plan.kept_donations),
        "report": {"kernels": report.kernels, "contractions": report.contractions,
                   "compiled_before": sorted(report.compiled_before)},
        "blobs": [len(b) for b in blobs],
    }
    text = json.dumps(header, separators=(",", ":")).encode()
    return _LENGTH.pack(len(text)) + text + b"".join(blobs)


def _encode_step(i: int, step: Any, modules: list, blobs: list[bytes]) -> dict:
    if isinstance(step, KernelStep):
        address = jit.address(step.fn)
        where = next((k for k, m in enumerate(modules) if m.engine.get_function_address(step.name) == address), None)
        if where is None:
            raise NotKept(f"the function of step {i} ({step.name}) is in none of its modules")
        return {"kind": "kernel", "name": step.name, "module": where, "ins": _slots(step.ins), "outs": step.outs,
                "extent": step.extent, "work": step.work}
    if isinstance(step, ViewStep):
        return {"kind": "view", "ins": _slots(step.ins), "outs": step.outs, "shape": list(step.shape)}
    if isinstance(step, DotStep):
        eqn = step.dot.eqn
        return {"kind": "dot", "ins": _slots(step.ins), "outs": step.outs,
                "invars": [_aval(v.aval) for v in eqn.invars], "outvars": [_aval(v.aval) for v in eqn.outvars],
                "params": {k: _param(v) for k, v in eqn.params.items()}}
    what = getattr(step, "name", None) or getattr(getattr(step, "eqn", None), "primitive", None) or ""
    raise NotKept(f"step {i} is a {type(step).__name__.removesuffix('Step').lower()} step"
                  f"{f' ({what})' if what else ''}, which holds objects of this process")


def _slots(ins: list) -> list[int]:
    if not all(isinstance(a, int) for a in ins):
        raise NotKept("a step reads a literal operand")
    return list(ins)


def _blob(blobs: list[bytes], data: bytes) -> int:
    blobs.append(data)
    return len(blobs) - 1


def _dtype_name(dtype: np.dtype) -> str:
    name = dtype.name
    try:
        same = dtypes.dtype(name) == dtype
    except (TypeError, AttributeError):
        same = False
    if not same:
        raise NotKept(f"its dtype {dtype} has no name to write")
    return name


def _aval(aval: ShapedArray) -> list:
    if type(aval) is not ShapedArray:
        raise NotKept(f"a value of type {type(aval).__name__}")
    return [list(aval.shape), _dtype_name(aval.dtype), bool(aval.weak_type)]


def _array(blobs: list[bytes], value: np.ndarray) -> dict:
    value = np.asarray(value)
    value = value if value.flags.c_contiguous else value.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
    return {"dtype": _dtype_name(value.dtype), "shape": list(value.shape), "blob": _blob(blobs, value.tobytes())}


def _atom(blobs: list[bytes], a: Any) -> Any:
    return a if isinstance(a, int) else _array(blobs, a)


def _param(value: Any) -> Any:
    """A param of a product as JSON (tuples tagged); ``NotKept`` for anything else."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, (tuple, list)):
        return {"tuple" if isinstance(value, tuple) else "list": [_param(v) for v in value]}
    if isinstance(value, np.dtype):
        return {"dtype": _dtype_name(value)}
    raise NotKept(f"a product's param {value!r} is not plain data")


# --- reading ---------------------------------------------------------------------------------
class Damaged(Exception):
    """What is wrong with an entry that passed the disk cache's own checks."""


def load(key: str, name: str, donated: frozenset[int]) -> tuple[tuple[Program, Report] | None, str]:
    """(the program stored under ``key``, ready to run, and its report; "") or (None, why not:
    no entry, an entry of another host, or an unusable one, removed with a warning)."""
    start = time.perf_counter()
    payload = disk_cache.load(key, program=True)
    if payload is None:
        return None, "no entry"
    try:
        loaded = decode(payload, name, donated)
    except Damaged as why:
        disk_cache.discard(key, str(why))
        return None, f"an unusable entry ({why}), removed"
    if loaded is None:  # another host's, or another toolchain's: compiled here and written anew
        disk_cache.count("program_misses")
        return None, "an entry compiled for another host or toolchain"
    disk_cache.count("program_hits")
    program, report = loaded
    report.times["load"] = time.perf_counter() - start
    return (program, report), ""


def decode(payload: bytes, name: str, donated: frozenset[int]) -> tuple[Program, Report] | None:
    """The program of an entry's payload; None if it was compiled for another host; ``Damaged``
    if it is malformed or its code fails the checks."""
    try:
        (length,) = _LENGTH.unpack_from(payload)
        header = json.loads(payload[_LENGTH.size:_LENGTH.size + length])
        if header.get("format") != FORMAT:
            raise Damaged(f"program entry format {header.get('format')!r}, expected {FORMAT}")
        if header["identity"] != identity():
            return None
        blobs, offset = [], _LENGTH.size + length
        for size in header["blobs"]:
            if size < 0 or offset + size > len(payload):
                raise Damaged("an array or module runs past the end of the entry")
            blobs.append(payload[offset:offset + size])
            offset += size
        if offset != len(payload):
            raise Damaged(f"{len(payload) - offset} bytes after the last array or module")
        return _rebuild(header, blobs, name, donated)
    except Damaged:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, struct.error, UnicodeDecodeError) as error:
        raise Damaged(f"a malformed program entry ({type(error).__name__}: {error})") from error


def _rebuild(header: dict, blobs: list[bytes], name: str, donated: frozenset[int]) -> tuple[Program, Report]:
    modules = []
    for m in header["modules"]:
        compiled, problem = jit.CompiledModule.loaded(blobs[m["source"]].decode(), bool(m["quick"]), blobs[m["code"]])
        if compiled is None:
            raise Damaged(f"its machine code is unusable: {problem}")
        modules.append(compiled)
    plan = Plan()
    plan.template = [None if t is None else _read_array(t, blobs) for t in header["template"]]
    plan.slot_avals = {int(slot): _read_aval(a) for slot, a in header["slot_avals"]}
    plan.constants = int(header["constants"])
    plan.in_slots = [int(s) for s in header["in_slots"]]
    plan.in_avals = [_read_aval(a) for a in header["in_avals"]]
    slots = len(plan.template)

    def slot(s: Any) -> int:
        if type(s) is not int or not 0 <= s < slots:
            raise Damaged(f"slot {s!r} is not one of the program's {slots}")
        return s
    report = Report(code="disk program")
    # One product per distinct shape and params: a program of n equal products holds one (a
    # ``DotGeneral`` is fixed once made), as it works out each one's layout once.
    products: dict[str, dot.DotGeneral] = {}
    for record in header["steps"]:
        ins, outs = [slot(s) for s in record["ins"]], [slot(s) for s in record["outs"]]
        kind = record["kind"]
        if kind == "kernel":
            module = modules[record["module"]]
            function = module.engine.get_function_address(record["name"])
            if not function:
                raise Damaged(f"its module does not define {record['name']}")
            extent, work = int(record["extent"]), int(record["work"])
            chunks, team = threads.kernel_chunks(extent, work)
            step: Any = KernelStep(record["name"], jit.KERNEL_SIGNATURE(function), ins, outs, extent, work, chunks,
                                   team)
        elif kind == "view":
            step = ViewStep(ins, outs, tuple(int(d) for d in record["shape"]))
        elif kind == "dot":
            signature = repr((record["invars"], record["params"], record["outvars"]))
            product = products.get(signature)
            if product is None:
                eqn = Eqn(dot_general_p, [Var(_read_aval(a)) for a in record["invars"]],
                          {k: _read_param(v) for k, v in record["params"].items()},
                          [Var(_read_aval(a)) for a in record["outvars"]])
                product = products[signature] = dot.DotGeneral(eqn)
            step = DotStep(product, ins, outs)
        else:
            raise Damaged(f"a step of unknown kind {kind!r}")
        plan.steps.append(step)
    plan.out_atoms = [slot(a) if isinstance(a, int) else _read_array(a, blobs) for a in header["out_atoms"]]
    plan.allocations = [(slot(s), _read_aval(a)) for s, a in header["allocations"]]
    plan.arena_views = [(slot(s), int(offset), _read_aval(a)) for s, offset, a in header["arena_views"]]
    plan.arena_bytes = int(header["arena_bytes"])
    plan.reuses = [(slot(out), int(position)) for out, position in header["reuses"]]
    plan.reused_inputs = frozenset(int(p) for p in header["reused_inputs"])
    plan.unusable_donations = [_read_aval(a) for a in header["unusable_donations"]]
    plan.kept_donations = frozenset(int(p) for p in header["kept_donations"])
    kept = header["report"]
    report.kernels = [str(k) for k in kept["kernels"]]
    report.contractions = int(kept["contractions"])
    report.compiled_before = {str(k) for k in kept["compiled_before"]}
    for module in modules:
        jit.keep_loaded(module)
    return Program(plan, report, modules, [], dispatch=not donated), report


def _read_dtype(name: Any) -> np.dtype:
    dtype = _dtype_named(str(name))
    if dtype.hasobject:
        raise Damaged(f"a value of dtype {dtype}, which native code never computes")
    return dtype


@functools.lru_cache(maxsize=256)
def _dtype_named(name: str) -> np.dtype:
    return dtypes.dtype(name)


def _read_aval(a: list) -> ShapedArray:
    shape, dtype, weak = a
    return _aval_of(tuple(int(d) for d in shape), str(dtype), bool(weak))


@functools.lru_cache(maxsize=4096)
def _aval_of(shape: tuple[int, ...], dtype: str, weak: bool) -> ShapedArray:  # (a program's types are few)
    return ShapedArray(shape, _read_dtype(dtype), weak)


def _read_array(record: dict, blobs: list[bytes]) -> np.ndarray:
    dtype, shape = _read_dtype(record["dtype"]), tuple(int(d) for d in record["shape"])
    data = blobs[record["blob"]]
    if len(data) != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize:
        raise Damaged(f"an array of {len(data)} bytes for {dtype}{list(shape)}")
    value = np.frombuffer(data, dtype).reshape(shape).copy()
    value.flags.writeable = False
    return value


def _read_param(value: Any) -> Any:
    if isinstance(value, dict):
        (kind, inner), = value.items()
        if kind == "tuple":
            return tuple(_read_param(v) for v in inner)
        if kind == "list":
            return [_read_param(v) for v in inner]
        if kind == "dtype":
            return _read_dtype(inner)
        raise Damaged(f"a param of unknown kind {kind!r}")
    return value
