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

Compiled modules are cached in memory by IR text and on disk (``ember.backends.disk_cache``)
by a key of everything that determines the machine code: the IR text, the optimization
level, the host triple, CPU name and features, the llvmlite and LLVM versions, ember's
version and this file's source (the pass pipeline). An entry holds the object code that
MCJIT generated (caught by its object cache, so a miss generates code once), after a sha256 of
it taken there; a hit is checked in Python first (``object_code.inspect``: that checksum, then the
ELF object's structure, against what makes LLVM abort or write out of bounds; the disk cache's
docstring lists what is verified and what is trusted), then handed to the object cache of an
engine of an empty module, which loads it without compiling. An entry the checks or LLVM refuse
is removed with a warning and the program compiled again. The optimized IR of a module loaded
from disk is regenerated only when asked for (``optimized_ir``).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm
from llvmlite import ir

from ember.backends import disk_cache
from ember.backends.cpu import object_code
from ember.config import config
from ember.version import __version__

OPT_LEVEL = 2

KERNEL_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

_warned_unstorable = False
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


def register_library_symbols(library: str, names: tuple[str, ...]) -> bool:
    """Make the functions ``names`` of the shared ``library`` callable from JIT-compiled code;
    False (and nothing registered) if the library or one of the functions is missing."""
    try:
        lib = ctypes.CDLL(library)
        addresses = {name: ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in names}
    except (OSError, AttributeError):
        return False
    for name, address in addresses.items():
        llvm.add_symbol(name, address)
    return True


@functools.cache
def float16_supported() -> bool:
    """Whether the runtime helpers that float16 code may call are there (registered for the JIT)."""
    return register_library_symbols("libgcc_s.so.1", _HALF_LIBCALLS)


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
        self.source = module if isinstance(module, str) else str(module)
        self.quick = quick
        self._optimized_ir: llvm.ModuleRef | None = None
        self.from_disk = False
        key = _disk_key(self.source, quick)
        # Hosts whose objects the checks cannot read do without the disk cache.
        usable = object_code.elf_machine(_host()[0]) is not None
        imports: list[str] = []

        def check(payload: bytes) -> str:
            problem, names = object_code.inspect(payload, self.source, _host()[0])
            imports.extend(names)
            return problem

        cached = disk_cache.load(key, check) if usable else None
        with _lock:
            self.target_machine = target_machine(0 if quick else OPT_LEVEL)
            if cached is not None:
                problem = self._load(cached[object_code.DIGEST_SIZE:], imports)
                if not problem:
                    self.from_disk = True
                    return
                disk_cache.discard(key, problem)
            self._optimized_ir = _optimize(self.source, quick)
            self.engine = llvm.create_mcjit_compiler(self._optimized_ir, self.target_machine)
            objects: list[bytes] = []  # payloads: the code's sha256, taken as LLVM hands it over, + the code
            self.engine.set_object_cache(
                notify_func=lambda _module, obj: objects.append(hashlib.sha256(obj).digest() + obj))
            self.engine.finalize_object()
        if objects and usable:
            _store(key, objects[0], self.source)

    def _load(self, obj: bytes, imports: Iterable[str]) -> str:
        """Take the machine code of a disk-cache entry (checked by ``object_code.inspect``); "" when
        loaded, else what is wrong (LLVM refused it, or a symbol it imports is not there)."""
        try:
            empty = llvm.parse_assembly("")
            empty.triple = _host()[0]
            self.engine = llvm.create_mcjit_compiler(empty, self.target_machine)
            # Only now (an engine makes the process's own symbols searchable) can the imports be
            # looked up as MCJIT will; one it cannot resolve would abort the process.
            missing = [name for name in imports if not llvm.address_of_symbol(name)]
            if missing:
                problem = f"it imports {', '.join(missing[:3])}, not found in this process"
            else:
                # MCJIT asks its object cache for the empty module's code and loads this object
                # instead of generating any (half the time of ``add_object_file`` plus an empty compile).
                self.engine.set_object_cache(getbuffer_func=lambda _module: obj)
                self.engine.finalize_object()
                problem = ""
        except Exception as error:  # any failure to load only means compiling instead
            problem = f"LLVM could not load it: {error}"
        if problem:
            self.target_machine = target_machine(0 if self.quick else OPT_LEVEL)  # the engine may own it
            return problem
        if config.log_compiles:
            logging.getLogger("ember").warning("ember: %s: machine code loaded from the disk cache",
                                               _module_name(self.source))
        return ""

    @property
    def optimized_ir(self) -> llvm.ModuleRef:
        """The module after LLVM's optimizations (regenerated for code loaded from disk)."""
        if self._optimized_ir is None:
            with _lock:
                self._optimized_ir = _optimize(self.source, self.quick)
        return self._optimized_ir

    def kernel(self, name: str) -> ctypes._CFuncPtr:
        return KERNEL_SIGNATURE(self.engine.get_function_address(name))

    def assembly(self) -> str:
        return self.target_machine.emit_assembly(self.optimized_ir)


def _optimize(source: str, quick: bool) -> llvm.ModuleRef:
    """Parse, verify and run LLVM's pass pipeline (with ``_lock`` held)."""
    parsed = llvm.parse_assembly(source)
    parsed.verify()
    tuning = llvm.create_pipeline_tuning_options(speed_level=0 if quick else OPT_LEVEL)
    tuning.loop_vectorization = not quick
    tuning.slp_vectorization = not quick
    builder = llvm.create_pass_builder(target_machine(0 if quick else OPT_LEVEL), tuning)
    builder.getModulePassManager().run(parsed, builder)
    return parsed


def _disk_key(source: str, quick: bool) -> str:
    return disk_cache.entry_key(source, f"quick={quick} opt={0 if quick else OPT_LEVEL}", *_host(), _toolchain())


def _store(key: str, payload: bytes, source: str) -> None:
    """Write a payload that this process generated, unless the checks of a load would refuse it."""
    global _warned_unstorable
    problem, _ = object_code.inspect(payload, source, _host()[0])
    if not problem:
        disk_cache.store(key, payload)
    elif not _warned_unstorable:
        _warned_unstorable = True
        warnings.warn(f"ember: the object code LLVM generated for {_module_name(source)} fails the disk "
                      f"cache's checks ({problem}); such code is not kept on disk", RuntimeWarning, stacklevel=3)



@functools.cache
def _toolchain() -> str:
    """The versions and the compile recipe (this file's source) that the machine code depends on."""
    recipe = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    llvm_version = ".".join(map(str, llvm.llvm_version_info))
    return f"ember {__version__} llvmlite {llvmlite.__version__} llvm {llvm_version} recipe {recipe}"


def _module_name(source: str) -> str:
    first_line = source.partition("\n")[0]  # ; ModuleID = "name"
    return first_line.partition("=")[2].strip().strip('"') or "module"


# Compiled modules by their IR text: programs that generate the same code (the same function
# jitted again, another function with the same operations, or the same operations on other
# sizes where the code takes sizes at run time) share machine code. As many are kept as jit
# caches entries (``config.jit_cache_max_entries``, least recently used first out); modules
# still used by an executable live on with it.
_compiled: "OrderedDict[str, CompiledModule]" = OrderedDict()
_compiling: dict[str, threading.Event] = {}  # IR texts being compiled, by the thread compiling them


def compile_module(module: ir.Module, quick: bool = False) -> CompiledModule:
    return compile_or_reuse(module, quick)[0]


def compile_or_reuse(module: ir.Module, quick: bool = False) -> tuple[CompiledModule, str]:
    """The machine code of ``module`` and where it came from: "compiled" (by LLVM, now),
    "disk" (loaded from the persistent cache) or "reused" (this process compiled the same IR
    before: the same program, or one that differs only in sizes the code reads at run time)."""
    key = ("quick:" if quick else "") + str(module)
    while True:
        with _lock:
            hit = _compiled.get(key)
            if hit is not None:
                _compiled.move_to_end(key)
                return hit, "reused"
            compiling = _compiling.get(key)
            if compiling is None:  # this thread compiles it; others wait for it
                compiling = _compiling[key] = threading.Event()
                break
        compiling.wait()
    try:
        compiled = CompiledModule(key[6:] if quick else key, quick)
        with _lock:
            _compiled[key] = compiled
            while len(_compiled) > max(int(config.jit_cache_max_entries), 1):
                _compiled.popitem(last=False)
    finally:
        with _lock:
            del _compiling[key]
        compiling.set()
    return compiled, "disk" if compiled.from_disk else "compiled"


def clear() -> None:
    """Forget the compiled modules (``ember.clear_caches``); code still in use lives on."""
    with _lock:
        _compiled.clear()
