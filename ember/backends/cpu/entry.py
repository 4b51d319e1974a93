"""A program's native entry point: one Python-callable C function that runs all of its steps.

Calling each kernel through ``ctypes`` costs about a microsecond of argument
marshalling per call, more than a small kernel computes. When every step of a
program is native (kernels, loops, free reshapes), its module also gets
``ember_entry``, a ``METH_FASTCALL`` builtin (CPython's C calling convention,
wrapped by ``PyCFunction_NewEx``) called as::

    ember_entry(plan, *arrays, *outputs) -> None, or False to decline

``arrays`` are the program's inputs as ``ember.Array`` objects; ``outputs`` fresh
C-contiguous NumPy arrays that the steps fill, marked read-only on return (Arrays
are immutable). The entry checks every input (an ``Array``, not deleted, its buffer
C-contiguous) and declines without touching anything otherwise: the caller then
takes the general path, which converts the arguments or raises the right error.

Everything that depends on shapes is read from ``plan``, an int64 array per
program: the kernels' extents and thread counts, the arena's size and the offsets
of temporaries in it, the constants' addresses. The entry's code therefore depends
only on the program's structure, so programs that differ only in sizes generate
the same LLVM IR and share machine code (``jit.compile_module`` caches by IR text).

The entry holds the GIL while the steps run, unless ``plan`` says to release it
(steps that split across threads, or that run long enough for other Python threads
to matter).

Layout facts the entry relies on (the object header of CPython's default build, the
``data``/``flags`` fields of NumPy's array struct, the slot of ``Array._value``) are
checked at import against live objects; where they do not hold, ``available()`` is
False and programs are run by the general path only.
"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any, Sequence

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ember.backends.cpu.threads import PIECES_PER_THREAD
from ember.runtime.array import Array

ENTRY_NAME = "ember_entry"
METH_FASTCALL = 0x0080
NPY_C_CONTIGUOUS = 0x0001
NPY_WRITEABLE = 0x0400
ALIGNMENT = 64

# Plan slots with fixed places; the rest are allocated per program (``PlanBuilder``).
PLAN_WORK_BYTES, PLAN_RELEASE_GIL, PLAN_TEAM_RUNNER, PLAN_FIXED = 0, 1, 2, 3

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


# --- what the entry runs -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Buffer:
    """Where a step's operand lives: ``kind`` "in" (program input ``index``), "out" (output
    ``index``), "temp" (in the per-call work area, at the offset held by plan slot ``index``)
    or "const" (at the address held by plan slot ``index``)."""
    kind: str
    index: int


@dataclass(frozen=True)
class NativeCall:
    """``function(buffers, 0, extent)``, split over ``chunks`` threads when more than one
    (``extent`` and ``chunks``: plan slots)."""
    function: str
    buffers: tuple[Buffer, ...]
    extent: int
    chunks: int


class PlanBuilder:
    """Numbers the plan's slots while a program describes its entry, and holds their values."""

    def __init__(self) -> None:
        self.values: list[int] = [0] * PLAN_FIXED

    def slot(self, value: int = 0) -> int:
        self.values.append(int(value))
        return len(self.values) - 1

    def array(self) -> np.ndarray:
        plan = np.array(self.values, np.int64)
        plan.flags.writeable = False
        return plan


def build(module: ir.Module, inputs: int, outputs: int, calls: Sequence[NativeCall], work_area: bool) -> None:
    """Add ``ember_entry`` to ``module`` (which defines the functions that ``calls`` name).
    ``work_area``: whether some buffer is a "temp" (one block of ``plan[PLAN_WORK_BYTES]``
    bytes, for temporaries and loops' scratch space, is then allocated per call)."""
    _register_symbols()
    fn = ir.Function(module, ir.FunctionType(_I8P, [_I8P, _I8P.as_pointer(), _I64]), name=ENTRY_NAME)
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

    def field(pointer: ir.Value, offset: int, ty: ir.Type = _I8P) -> ir.Value:
        return b.bitcast(b.gep(pointer, [ir.Constant(_I64, offset)]), ty.as_pointer())

    def require(condition: ir.Value) -> None:
        ok = fn.append_basic_block("ok")
        b.cbranch(condition, ok, decline)
        b.position_at_end(ok)

    def arg(k: int) -> ir.Value:
        return b.load(b.gep(args, [ir.Constant(_I64, k)]))

    def constant(n: int) -> ir.Constant:
        return ir.Constant(_I64, n)

    require(b.icmp_signed("==", nargs, constant(1 + inputs + outputs)))
    plan = b.bitcast(b.load(field(arg(0), _DATA_OFFSET)), _I64.as_pointer())

    def plan_at(k: int) -> ir.Value:
        return b.load(b.gep(plan, [constant(k)]))

    array_type = declare("ember_array_type", ir.IntType(8))
    pointers: dict[Buffer, ir.Value] = {}
    for k in range(inputs):
        obj = arg(1 + k)
        require(b.icmp_unsigned("==", b.load(field(obj, _TYPE_OFFSET)), array_type))
        value = b.load(field(obj, _VALUE_OFFSET))
        require(b.icmp_unsigned("!=", value, ir.Constant(_I8P, None)))  # a deleted (donated) Array
        flags = b.load(field(value, _FLAGS_OFFSET, _I32))
        require(b.icmp_unsigned("!=", b.and_(flags, ir.Constant(_I32, NPY_C_CONTIGUOUS)), ir.Constant(_I32, 0)))
        pointers[Buffer("in", k)] = b.load(field(value, _DATA_OFFSET))
    out_objects = [arg(1 + inputs + k) for k in range(outputs)]
    for k, obj in enumerate(out_objects):
        pointers[Buffer("out", k)] = b.load(field(obj, _DATA_OFFSET))
    block = None
    if work_area:
        malloc = declare("PyMem_RawMalloc", ir.FunctionType(_I8P, [_I64]))
        block = b.call(malloc, [b.add(plan_at(PLAN_WORK_BYTES), constant(ALIGNMENT))])
        require(b.icmp_unsigned("!=", block, ir.Constant(_I8P, None)))
        base = b.gep(block, [b.and_(b.sub(constant(0), b.ptrtoint(block, _I64)), constant(ALIGNMENT - 1))])
    # Every check passed: from here on the entry runs to the end.
    release = b.icmp_signed("!=", plan_at(PLAN_RELEASE_GIL), constant(0))
    thread_state = b.alloca(_I8P)
    b.store(ir.Constant(_I8P, None), thread_state)
    with b.if_then(release):
        b.store(b.call(declare("PyEval_SaveThread", ir.FunctionType(_I8P, [])), []), thread_state)
    team_runner = b.inttoptr(plan_at(PLAN_TEAM_RUNNER), _TEAM_TYPE.as_pointer())
    for call in calls:
        refs = []
        for r in call.buffers:
            if r.kind in ("in", "out"):
                refs.append(pointers[r])
            elif r.kind == "temp":
                refs.append(b.gep(base, [plan_at(r.index)]))
            else:
                refs.append(b.inttoptr(plan_at(r.index), _I8P))
        buffers = b.alloca(_I8P, len(refs))
        for k, pointer in enumerate(refs):
            b.store(pointer, b.gep(buffers, [constant(k)]))
        step = module.get_global(call.function)
        extent, chunks = plan_at(call.extent), plan_at(call.chunks)
        with b.if_else(b.icmp_signed(">", chunks, constant(1))) as (split, whole):
            with split:
                b.call(team_runner, [step, buffers, constant(0), extent, chunks, constant(PIECES_PER_THREAD)])
            with whole:
                b.call(step, [buffers, constant(0), extent])
    with b.if_then(release):
        b.call(declare("PyEval_RestoreThread", ir.FunctionType(ir.VoidType(), [_I8P])), [b.load(thread_state)])
    if block is not None:
        b.call(declare("PyMem_RawFree", ir.FunctionType(ir.VoidType(), [_I8P])), [block])
    for obj in out_objects:  # Arrays are immutable: the outputs become read-only
        flags = field(obj, _FLAGS_OFFSET, _I32)
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


class EntryPoint:
    """The builtin of a compiled module's entry. It keeps the module (its machine code) and the
    method table it was made from alive; call ``function``."""

    def __init__(self, compiled: Any) -> None:
        self._method = _MethodDef(ENTRY_NAME.encode(), compiled.engine.get_function_address(ENTRY_NAME),
                                  METH_FASTCALL, None)
        self._compiled = compiled
        self.function = _new_builtin(ctypes.addressof(self._method), self, None)
