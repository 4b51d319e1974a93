"""The native dispatcher: one Python-callable C function that runs a whole program.

Calling each kernel through ``ctypes`` costs about a microsecond of argument
marshalling per call, more than a small kernel computes. ``dispatch`` is a
``METH_FASTCALL`` builtin (CPython's C calling convention, made by
``PyCFunction_NewEx`` from a function compiled here, once per process) called as::

    dispatch(plan, *arrays, *outputs) -> None, or False to decline

``plan`` describes one program (``Plan`` builds it): its native steps (kernel or
loop function addresses, their buffers, extents and thread counts), the size of the
work area its temporaries live in, whether to release the GIL. ``arrays`` are the
program's inputs as ``ember.Array`` objects; ``outputs`` fresh C-contiguous NumPy
arrays that the steps fill, marked read-only on return (Arrays are immutable). The
dispatcher checks every input (an ``Array``, not deleted, its buffer C-contiguous)
and declines without touching anything otherwise: the caller then takes the general
path, which converts the arguments or raises the right error.

Programs add nothing to their own modules for this (their code, and its compile
time, stay the same), and code shared by programs that differ only in sizes stays
shared: everything that depends on sizes is in the plan.

The dispatcher holds the GIL while the steps run, unless the plan says to release it
(steps that split across threads, or that run long enough for other Python threads
to matter).

The work area is kept between calls (``WorkCache``: a block per plan, taken by one call at a
time, a fresh one for a call that finds it taken). Allocating it per call cost a fresh mapping
of its pages each time where it is large (glibc maps blocks over 32 MB anew and unmaps them when
freed): a CNN training step with 60 MB of patches took 28 ms that way against 13 ms with the
block kept.

Layout facts it relies on (the object header of CPython's default build, the
``data``/``flags`` fields of NumPy's array struct, the slot of ``Array._value``) are
checked at import against live objects; where they do not hold, ``available()`` is
False and programs run by the general path only.
"""
from __future__ import annotations

import ctypes
import functools
import threading
import weakref
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ember.backends.cpu import jit, threads
from ember.backends.cpu.threads import PIECES_PER_THREAD
from ember.core.array import Array
from ember.core.background import Job, background

METH_FASTCALL = 0x0080
NPY_C_CONTIGUOUS = 0x0001
NPY_WRITEABLE = 0x0400
ALIGNMENT = 64

# The plan: a header, then per step [function, extent, chunks, pieces per thread, buffer count,
# (kind, value) per buffer]; a step of several chunks runs on an OpenMP team (``threads``).
ARGUMENTS, INPUTS, WORK_BYTES, RELEASE_GIL, TEAM_RUNNER, STEPS, MOST_BUFFERS, WORK_CACHE, HEADER = range(9)
# Buffer kinds: the data of argument ``value`` (inputs, then outputs), the work area at offset
# ``value``, or the address ``value``.
ARGUMENT, WORK, ADDRESS = range(3)

_I8P = ir.IntType(8).as_pointer()
_I32, _I64 = ir.IntType(32), ir.IntType(64)
_STEP_TYPE = ir.FunctionType(ir.VoidType(), [_I8P.as_pointer(), _I64, _I64])
_TEAM_TYPE = ir.FunctionType(ir.VoidType(), [_STEP_TYPE.as_pointer(), _I8P.as_pointer(), _I64, _I64, _I64, _I64])


# --- object layout, checked against live objects ----------------------------------------------
_WORD = ctypes.sizeof(ctypes.c_void_p)
_TYPE_OFFSET = _WORD  # ob_type follows ob_refcnt
_DATA_OFFSET = 2 * _WORD  # PyArrayObject.data follows the object header
_FLAGS_OFFSET = 8 * _WORD  # ... then nd, dimensions, strides, base, descr, flags


def _word_at(address: int) -> int | None:
    return ctypes.c_void_p.from_address(address).value


def _read_data_field(array: np.ndarray) -> int:
    """The buffer address of an array, read from its C struct: 0.2 us where ``array.ctypes.data``
    takes 0.9 us, per buffer of every call of the general path."""
    return _word_at(id(array) + _DATA_OFFSET) or 0


def _value_slot_offset() -> int | None:
    """Where an Array keeps ``_value``: the one word of the object that points to it."""
    probe = Array(np.zeros(2, np.float32))
    offsets = [off for off in range(_WORD, Array.__basicsize__, _WORD) if _word_at(id(probe) + off) == id(probe._value)]
    return offsets[0] if len(offsets) == 1 else None


def _layout_holds(value_offset: int | None) -> bool:
    if value_offset is None:
        return False
    probes = [np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3).T, np.zeros(3, np.float32)[::2]]
    probes[0].flags.writeable = False
    for a in probes:
        if _word_at(id(a) + _TYPE_OFFSET) != id(type(a)) or _word_at(id(a) + _DATA_OFFSET) != a.ctypes.data:
            return False
        if ctypes.c_int.from_address(id(a) + _FLAGS_OFFSET).value != a.flags.num:
            return False
    probe = Array(np.zeros(1))
    return _word_at(id(probe) + _TYPE_OFFSET) == id(Array) and _word_at(id(probe) + value_offset) == id(probe._value)


_VALUE_OFFSET = _value_slot_offset()
_AVAILABLE = _layout_holds(_VALUE_OFFSET)
data_pointer = _read_data_field if _AVAILABLE else (lambda array: array.ctypes.data)


def available() -> bool:
    return _AVAILABLE


# --- symbols the entry calls ---------------------------------------------------------------------------
_PYTHON_FUNCTIONS = ("Py_IncRef", "PyMem_RawMalloc", "PyMem_RawFree", "PyEval_SaveThread", "PyEval_RestoreThread")


@functools.cache
def _register_symbols() -> None:
    """Addresses of the CPython functions and objects the entry uses, for the JIT's linker
    (by name, so machine code loaded from the disk cache links in a new process too)."""
    for name in _PYTHON_FUNCTIONS:
        llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
    llvm.add_symbol("ember_none", id(None))
    llvm.add_symbol("ember_false", id(False))
    llvm.add_symbol("ember_array_type", id(Array))


# --- plans --------------------------------------------------------------------------------------------
class Plan:
    """Builds the plan of one program: ``step`` per native call, in order, then ``array``."""

    def __init__(self, inputs: int, outputs: int, work_bytes: int, work_cache: WorkCache | None = None) -> None:
        self.inputs, self.outputs, self.work_bytes, self.work_cache = inputs, outputs, work_bytes, work_cache
        self.steps: list[int] = []
        self.count = self.most_buffers = 0
        self.split = False

    @staticmethod
    def argument(k: int) -> tuple[int, int]:
        return ARGUMENT, k

    @staticmethod
    def work(offset: int) -> tuple[int, int]:
        return WORK, offset

    @staticmethod
    def address(address: int) -> tuple[int, int]:
        return ADDRESS, address

    def step(self, function: int, extent: int, chunks: int, buffers: list[tuple[int, int]],
             pieces_per_thread: int = PIECES_PER_THREAD) -> None:
        self.steps += [function, extent, chunks, pieces_per_thread, len(buffers)] + [v for b in buffers for v in b]
        self.count += 1
        self.most_buffers = max(self.most_buffers, len(buffers))
        self.split = self.split or chunks > 1

    def array(self, release_gil: bool) -> np.ndarray:
        header = [0] * HEADER
        header[ARGUMENTS] = 1 + self.inputs + self.outputs
        header[INPUTS] = self.inputs
        header[WORK_BYTES] = self.work_bytes
        header[WORK_CACHE] = self.work_cache.address if self.work_cache is not None and self.work_bytes else 0
        header[RELEASE_GIL] = int(release_gil or self.split)
        header[TEAM_RUNNER] = threads.team_runner_address() if self.split else 0
        header[STEPS] = self.count
        header[MOST_BUFFERS] = self.most_buffers
        plan = np.array(header + self.steps, np.int64)
        plan.flags.writeable = False
        return plan


class WorkCache:
    """A plan's kept work area: a cell of two words, the block (0 until a call allocates it) and
    whether a call holds it. The dispatcher takes it with an atomic exchange and gives it back at
    the end of the call; the block is freed with its owner (the program)."""

    def __init__(self) -> None:
        self.cell = (ctypes.c_uint64 * 2)()
        self.address = ctypes.addressof(self.cell)
        weakref.finalize(self, _free_block, self.cell)


def _free_block(cell: ctypes.Array) -> None:
    if cell[0]:
        _raw_free(cell[0])
        cell[0] = 0


_raw_free = ctypes.pythonapi.PyMem_RawFree
_raw_free.argtypes, _raw_free.restype = [ctypes.c_void_p], None


# --- the dispatcher ---------------------------------------------------------------------------------
class _Loop:
    """``for i in range(start, stop)`` in LLVM IR: emit the body at ``b`` between ``with``'s bounds."""

    def __init__(self, b: ir.IRBuilder, start: ir.Value, stop: ir.Value) -> None:
        self.b, self.start, self.stop = b, start, stop

    def __enter__(self) -> ir.Value:
        b = self.b
        self.before = b.block
        self.header = b.append_basic_block("loop")
        self.body = b.append_basic_block("body")
        self.exit = b.append_basic_block("done")
        b.branch(self.header)
        b.position_at_end(self.header)
        self.i = b.phi(_I64)
        self.i.add_incoming(self.start, self.before)
        b.cbranch(b.icmp_signed("<", self.i, self.stop), self.body, self.exit)
        b.position_at_end(self.body)
        return self.i

    def __exit__(self, *exc: Any) -> None:
        b = self.b
        self.i.add_incoming(b.add(self.i, ir.Constant(_I64, 1)), b.block)
        b.branch(self.header)
        b.position_at_end(self.exit)


def _build(module: ir.Module) -> None:
    assert _VALUE_OFFSET is not None, "the dispatcher is built only where the Array layout holds (available())"
    fn = ir.Function(module, ir.FunctionType(_I8P, [_I8P, _I8P.as_pointer(), _I64]), name="ember_dispatch")
    b = ir.IRBuilder(fn.append_basic_block("start"))
    decline = fn.append_basic_block("decline")
    _, args, nargs = fn.args

    def declare(name: str, ty: ir.Type) -> ir.Value:
        """An external function, or the address of an external object (as an i8*)."""
        value = module.globals.get(name)
        if value is None:
            value = ir.Function(module, ty, name=name) if isinstance(ty, ir.FunctionType) \
                else ir.GlobalVariable(module, ty, name=name)
        return value if isinstance(ty, ir.FunctionType) else b.bitcast(value, _I8P)

    def constant(n: int) -> ir.Constant:
        return ir.Constant(_I64, n)

    def field(pointer: ir.Value, offset: int, ty: ir.Type = _I8P) -> ir.Value:
        return b.bitcast(b.gep(pointer, [constant(offset)]), ty.as_pointer())

    def require(condition: ir.Value) -> None:
        ok = fn.append_basic_block("ok")
        b.cbranch(condition, ok, decline)
        b.position_at_end(ok)

    def at(array: ir.Value, k: ir.Value | int) -> ir.Value:
        return b.gep(array, [constant(k) if isinstance(k, int) else k])

    thread_state, block_slot, position = b.alloca(_I8P), b.alloca(_I8P), b.alloca(_I64)  # (in the entry block)
    kept_slot = b.alloca(ir.IntType(1))
    require(b.icmp_signed(">", nargs, constant(0)))
    plan = b.bitcast(b.load(field(b.load(args), _DATA_OFFSET)), _I64.as_pointer())

    def plan_at(k: ir.Value | int) -> ir.Value:
        return b.load(at(plan, k))

    require(b.icmp_signed("==", nargs, plan_at(ARGUMENTS)))
    inputs = plan_at(INPUTS)
    data = b.alloca(_I8P, b.sub(nargs, constant(1)))  # the data pointers of the arguments
    buffers = b.alloca(_I8P, plan_at(MOST_BUFFERS))  # one step's buffers
    array_type = declare("ember_array_type", ir.IntType(8))
    with _Loop(b, constant(0), inputs) as k:
        obj = b.load(at(args, b.add(k, constant(1))))
        require(b.icmp_unsigned("==", b.load(field(obj, _TYPE_OFFSET)), array_type))
        value = b.load(field(obj, _VALUE_OFFSET))
        require(b.icmp_unsigned("!=", value, ir.Constant(_I8P, None)))  # a deleted (donated) Array
        flags = b.load(field(value, _FLAGS_OFFSET, _I32))
        require(b.icmp_unsigned("!=", b.and_(flags, ir.Constant(_I32, NPY_C_CONTIGUOUS)), ir.Constant(_I32, 0)))
        b.store(b.load(field(value, _DATA_OFFSET)), at(data, k))
    with _Loop(b, inputs, b.sub(nargs, constant(1))) as k:
        b.store(b.load(field(b.load(at(args, b.add(k, constant(1)))), _DATA_OFFSET)), at(data, k))
    work_bytes = plan_at(WORK_BYTES)
    malloc = declare("PyMem_RawMalloc", ir.FunctionType(_I8P, [_I64]))
    has_work_area = b.icmp_signed(">", work_bytes, constant(0))
    b.store(ir.Constant(_I8P, None), block_slot)
    # the plan's kept block (``WorkCache``) if no other call holds it, else a block of this call's own
    cache_address = plan_at(WORK_CACHE)
    cache = b.inttoptr(cache_address, _I64.as_pointer())
    busy = b.gep(cache, [constant(1)])
    b.store(ir.Constant(ir.IntType(1), 0), kept_slot)
    with b.if_then(b.and_(has_work_area, b.icmp_signed("!=", cache_address, constant(0)))):
        taken = b.cmpxchg(busy, constant(0), constant(1), "acquire", "monotonic")
        with b.if_then(b.extract_value(taken, 1)):
            b.store(ir.Constant(ir.IntType(1), 1), kept_slot)
            kept = b.inttoptr(b.load(cache), _I8P)
            with b.if_then(b.icmp_unsigned("==", kept, ir.Constant(_I8P, None))):
                fresh = b.call(malloc, [b.add(work_bytes, constant(ALIGNMENT))])
                b.store(b.ptrtoint(fresh, _I64), cache)
            b.store(b.inttoptr(b.load(cache), _I8P), block_slot)
    kept = b.load(kept_slot)
    with b.if_then(b.and_(has_work_area, b.not_(kept))):
        b.store(b.call(malloc, [b.add(work_bytes, constant(ALIGNMENT))]), block_slot)
    block = b.load(block_slot)
    no_block = b.and_(has_work_area, b.icmp_unsigned("==", block, ir.Constant(_I8P, None)))
    with b.if_then(b.and_(no_block, kept)):  # (out of memory: give the cell back, then decline)
        b.store_atomic(constant(0), busy, "release", 8)
    require(b.not_(no_block))
    base = b.gep(block, [b.and_(b.sub(constant(0), b.ptrtoint(block, _I64)), constant(ALIGNMENT - 1))])
    # Every check passed: from here on the dispatcher runs to the end.
    release = b.icmp_signed("!=", plan_at(RELEASE_GIL), constant(0))
    b.store(ir.Constant(_I8P, None), thread_state)
    with b.if_then(release):
        b.store(b.call(declare("PyEval_SaveThread", ir.FunctionType(_I8P, [])), []), thread_state)
    team_runner = b.inttoptr(plan_at(TEAM_RUNNER), _TEAM_TYPE.as_pointer())
    b.store(constant(HEADER), position)
    with _Loop(b, constant(0), plan_at(STEPS)):
        at_step = b.load(position)
        step = b.inttoptr(plan_at(at_step), _STEP_TYPE.as_pointer())
        extent, chunks, pieces, count = (plan_at(b.add(at_step, constant(k))) for k in (1, 2, 3, 4))
        with _Loop(b, constant(0), count) as j:
            entry = b.add(at_step, b.add(constant(5), b.mul(j, constant(2))))
            kind, value = plan_at(entry), plan_at(b.add(entry, constant(1)))
            argument = b.icmp_signed("==", kind, constant(ARGUMENT))
            with b.if_else(argument) as (is_argument, otherwise):
                with is_argument:
                    from_argument = b.load(at(data, value))
                    argument_block = b.block
                with otherwise:
                    in_work_area = b.gep(base, [value])
                    other = b.select(b.icmp_signed("==", kind, constant(WORK)), in_work_area, b.inttoptr(value, _I8P))
                    other_block = b.block
            pointer = b.phi(_I8P)
            pointer.add_incoming(from_argument, argument_block)
            pointer.add_incoming(other, other_block)
            b.store(pointer, at(buffers, j))
        with b.if_else(b.icmp_signed(">", chunks, constant(1))) as (split, whole):
            with split:
                b.call(team_runner, [step, buffers, constant(0), extent, chunks, pieces])
            with whole:
                b.call(step, [buffers, constant(0), extent])
        b.store(b.add(at_step, b.add(constant(5), b.mul(count, constant(2)))), position)
    with b.if_then(release):
        b.call(declare("PyEval_RestoreThread", ir.FunctionType(ir.VoidType(), [_I8P])), [b.load(thread_state)])
    with b.if_else(kept) as (give_back, free):
        with give_back:
            b.store_atomic(constant(0), busy, "release", 8)
        with free:
            with b.if_then(has_work_area):
                b.call(declare("PyMem_RawFree", ir.FunctionType(ir.VoidType(), [_I8P])), [block])
    with _Loop(b, b.add(inputs, constant(1)), nargs) as k:  # Arrays are immutable: outputs become read-only
        flags = field(b.load(at(args, k)), _FLAGS_OFFSET, _I32)
        b.store(b.and_(b.load(flags), ir.Constant(_I32, ~NPY_WRITEABLE & 0xFFFFFFFF)), flags)
    incref = declare("Py_IncRef", ir.FunctionType(ir.VoidType(), [_I8P]))
    b.call(incref, [declare("ember_none", ir.IntType(8))])
    b.ret(declare("ember_none", ir.IntType(8)))
    b.position_at_end(decline)
    b.call(incref, [declare("ember_false", ir.IntType(8))])
    b.ret(declare("ember_false", ir.IntType(8)))


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p), ("ml_flags", ctypes.c_int),
                ("ml_doc", ctypes.c_char_p)]


_new_builtin = ctypes.pythonapi.PyCFunction_NewEx
_new_builtin.restype = ctypes.py_object
_new_builtin.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]


class _Dispatcher:
    """Owns the compiled dispatcher and its method table; ``function`` keeps both alive."""

    def __init__(self) -> None:
        _register_symbols()
        module = jit.new_module("ember_dispatch")
        _build(module)
        self._compiled = jit.compile_module(module)
        address = self._compiled.engine.get_function_address("ember_dispatch")
        self._method = _MethodDef(b"ember_dispatch", address, METH_FASTCALL, None)
        # The builtin's ``self`` keeps the method table and the code alive. Not this object: that
        # would be a cycle, which the collector may clear (at exit) table first, and the builtin
        # reads its table as it is freed.
        self.function = _new_builtin(ctypes.addressof(self._method), (self._method, self._compiled), None)


# The dispatcher is built once per process, in the background: the end of the first call of a
# native program starts it (``prepare_dispatcher``; not during that call, whose cores it would
# take), and until it is ready calls take the general path, so that no call of a jitted function
# waits for it (about 40 ms to compile, a few to load from the disk cache).
_built: Any = None
_build_lock = threading.Lock()  # held while building
BUILD_JOB = "cpu: build the dispatcher"


def dispatcher() -> Any:
    """The dispatcher builtin: compiled (or loaded from the disk cache) now, unless it is built."""
    global _built
    with _build_lock:
        if _built is None:
            _built = _Dispatcher().function
    return _built


def ready_dispatcher() -> Any:
    """The dispatcher builtin if it is built, else None (a call never waits for it)."""
    return _built


def dispatcher_pending() -> bool:
    """Whether the dispatcher is not built yet but will be (its build has not failed)."""
    if _built is not None:
        return False
    job = background.job(BUILD_JOB)
    return job is None or job.error is None  # (failed: calls keep the general path, slower, never wrong)


def prepare_dispatcher() -> Job:
    """The background job that builds the dispatcher, started now if it was not (once per process)."""
    return background.submit(BUILD_JOB, dispatcher)


# Calls run from Python while the build was pending, and their time. Calls back to back starve the
# build of the interpreter (it gets it back only at the switch interval, 5 ms, after each LLVM
# call): an eager loop of 18 us calls had no dispatcher after 0.2 s. So once those calls have taken
# BUILD_SECONDS, the next one waits for the build (the ski-rental rule).
BUILD_SECONDS = 0.04
_undispatched_seconds = 0.0


def note_undispatched_call(seconds: float) -> None:
    """Count a call's ``seconds`` run without the pending dispatcher; wait for the build once the
    count reaches ``BUILD_SECONDS``."""
    global _undispatched_seconds
    _undispatched_seconds += seconds
    if _undispatched_seconds >= BUILD_SECONDS and _built is None:
        job = background.job(BUILD_JOB)
        if job is not None:
            job.wait()
