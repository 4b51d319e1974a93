"""LLVM: the host target machine, optimization and machine-code generation of one module.

One module per jitted program holds all of its kernels, so LLVM is set up
once and pays its fixed costs once per program.

Optimization level, measured on selu (1e6), softmax and layer norm (4096x1024)
kernels (llvmlite 0.50, LLVM 20, znver5; optimize + codegen time / run time):
O0 5-14 ms / 18, 75, 29 ms (nothing vectorized: 30-70x slower); O1 (with the
vectorizers forced on) 23-29 ms / 0.26, 2.6, 1.15 ms; O2 18-30 ms / 0.26, 2.2,
0.97 ms; O3 18-32 ms / the same as O2. O2 it is. Programs that touch only a few
elements (``QUICK_WORK``) are compiled without optimization: about 2 ms instead of
7-15 ms for a small selu or softmax, and microseconds of run time either way.
"""
from __future__ import annotations

import ctypes
import functools
import threading
from collections import OrderedDict

import llvmlite.binding as llvm
from llvmlite import ir

OPT_LEVEL = 2

KERNEL_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

_lock = threading.RLock()  # LLVM's global state is not thread-safe


# Conversions to and from float16 that LLVM's x86 backend calls instead of inlining (for
# example double -> half). libgcc provides them; without them float16 is not compiled natively.
_HALF_LIBCALLS = ("__truncdfhf2", "__truncsfhf2", "__extendhfsf2")


@functools.cache
def _host() -> tuple[str, str, str]:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # No second, narrower vector loop for the remainder of a vectorized loop: a scalar loop
    # does the last few elements. The same run time (selu, softmax) for 20% less compile time.
    llvm.set_option("", "-enable-epilogue-vectorization=false")
    return llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


@functools.cache
def float16_supported() -> bool:
    """Whether the runtime helpers that float16 code may call are there (registered for the JIT)."""
    try:
        libgcc = ctypes.CDLL("libgcc_s.so.1")
        addresses = {name: ctypes.cast(getattr(libgcc, name), ctypes.c_void_p).value for name in _HALF_LIBCALLS}
    except (OSError, AttributeError):
        return False
    for name, address in addresses.items():
        llvm.add_symbol(name, address)
    return True


def target_machine(opt: int = OPT_LEVEL) -> llvm.TargetMachine:
    """The host CPU with all of its features (AVX-512 where present). A new one each time:
    the JIT engine of a module takes ownership of the machine it is given."""
    triple, cpu, features = _host()
    return llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=opt, jit=True)


@functools.cache
def _data_layout() -> str:
    return str(target_machine().target_data)


def new_module(name: str) -> ir.Module:
    module = ir.Module(name=name)
    module.triple = _host()[0]
    module.data_layout = _data_layout()
    return module


class CompiledModule:
    """Machine code of a module; holds the JIT engine that owns it alive."""

    def __init__(self, module: ir.Module | str, quick: bool = False) -> None:
        """``quick``: no optimization (for programs on a few elements, where compiling dominates)."""
        with _lock:
            self.target_machine = tm = target_machine(0 if quick else OPT_LEVEL)
            parsed = llvm.parse_assembly(module if isinstance(module, str) else str(module))
            parsed.verify()
            tuning = llvm.create_pipeline_tuning_options(speed_level=0 if quick else OPT_LEVEL)
            tuning.loop_vectorization = not quick
            tuning.slp_vectorization = not quick
            builder = llvm.create_pass_builder(tm, tuning)
            builder.getModulePassManager().run(parsed, builder)
            self.optimized_ir = parsed
            self.engine = llvm.create_mcjit_compiler(parsed, tm)
            self.engine.finalize_object()

    def kernel(self, name: str) -> ctypes._CFuncPtr:
        return KERNEL_SIGNATURE(self.engine.get_function_address(name))

    def assembly(self) -> str:
        return self.target_machine.emit_assembly(self.optimized_ir)


# Compiled modules by their IR text: programs that generate the same code (the same function
# jitted again, or another function with the same operations and shapes) share machine code.
_compiled: "OrderedDict[str, CompiledModule]" = OrderedDict()
COMPILED_CACHE_SIZE = 512


def compile_module(module: ir.Module, quick: bool = False) -> CompiledModule:
    key = ("quick:" if quick else "") + str(module)
    with _lock:
        hit = _compiled.get(key)
        if hit is not None:
            _compiled.move_to_end(key)
            return hit
    compiled = CompiledModule(key[6:] if quick else key, quick)
    with _lock:
        _compiled[key] = compiled
        while len(_compiled) > COMPILED_CACHE_SIZE:
            _compiled.popitem(last=False)
    return compiled
