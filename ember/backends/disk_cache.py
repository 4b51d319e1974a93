"""The persistent cache: compiled native code on disk, shared by every process of the user.

A new process running a program that an earlier one compiled loads its machine code
from here instead of optimizing and generating code again. Entries are of two kinds:

- a module's machine code, keyed by everything that determines the code (``ember.backends.cpu.jit``:
  its IR text, the optimization level, the host CPU and the toolchain);
- a whole program (``ember.backends.cpu.program_cache``): keyed by ``program_key``, the stable
  fingerprint of the traced program (``core/fingerprint.py``), its name and donated inputs, the
  flags that change compiled code, the backend and ember's own source (``source_stamp``); the
  entry holds the finished executable (the plan of its steps and the machine code of its
  modules) and the host identity it was compiled for, so that a hit skips the passes, fusion,
  planning, code generation and LLVM. A program that refers to Python objects by identity
  (a callback, a custom rule's function) has no key, and is compiled (its modules still hit).

Where: ``<cache root>/native/<sha256 key>.bin``; the root is ``config.cache_dir`` if
set, else ``$EMBER_CACHE_DIR``, else ``$XDG_CACHE_HOME/ember`` or ``~/.cache/ember``.
Off with ``config.update("persistent_cache", False)`` or ``EMBER_PERSISTENT_CACHE=0``; whole
programs alone off with ``persistent_program_cache`` (``EMBER_PERSISTENT_PROGRAM_CACHE=0``).

An entry is a header (magic, format version, the entry's own key, payload length, sha256 of
the payload) and the payload; what the payload holds is the caller's (for the CPU backend: a
sha256 of the object code taken when LLVM produced it, and the object code). Safety:

- writes are atomic: a temporary file in the same directory, then ``os.replace``; readers
  never see a partial entry, and two processes writing the same key each replace the file with
  a complete, identical one. Writes are not flushed to the device (no ``fsync``: 4-10 ms each,
  in the first call of every program): a file that a power failure left torn fails the checks
  below like any damaged entry, and the program is compiled again;
- a damaged or truncated entry fails the header or checksum test, an entry moved or copied
  under another key's name fails the key test, and one whose payload the caller's ``check``
  rejects fails that: it is removed, a ``RuntimeWarning`` names it and says what is wrong, and
  the caller compiles again (and writes it anew);
- the directory is bounded by ``config.persistent_cache_max_bytes``: hits refresh an
  entry's modification time, and after a write that may pass the bound (``_bound``) the least
  recently used entries are evicted until the total fits;
- a cache that cannot be written (read-only or full disk) only costs the speed-up:
  one ``RuntimeWarning`` per process, and programs are compiled as if it were off.

What is verified before any byte reaches LLVM, and what is trusted:

- here, for every entry: the magic, the format version (entries of another version live under
  other names, since the version is part of every key, and are never read: they are evicted in
  time), that the key in the header is the key asked for (so a file moved or copied under
  another entry's name is refused), the payload length, and the sha256 of the payload (so
  accidental damage, a truncated or torn file, is refused);
- by the CPU backend (``ember.backends.cpu.object_code.inspect``), for each payload: a
  second sha256, over the object code alone, taken in the process that generated the code when
  LLVM handed it over (so a payload rewritten with a fresh outer checksum but not this one is
  refused); then, in Python, the object's structure: an ELF64 relocatable object of this host's
  class, byte order and machine (from the target triple llvmlite reports); the section header
  table and every section's contents within the file, section types LLVM's runtime linker
  handles (no thread-local storage), alignments (powers of two, at most 64 KiB), at most 64 MiB
  of zero-filled sections; NUL-terminated string tables; at most one symbol table, its symbols with
  names in it, known types and bindings, real section indices (no common or extended ones) and
  values and sizes within their section; relocations of a type that LLVM's runtime linker
  implements for this machine, against a symbol of the table (not a file symbol), patching
  bytes within the patched section; ``.eh_frame`` records that the unwinder can walk and decode
  (lengths within the section, each FDE linked to a CIE, augmentation and pointer encodings it
  knows); a global definition of every function the IR defines (so no kernel's address is
  null); and, once an engine exists, that each symbol the object imports resolves in this
  process. Each is a case in which LLVM (``report_fatal_error``, a failed assertion) or the
  unwinder would abort the interpreter, or the runtime linker would write outside the memory it
  allocated. An object the checks refuse is handled like a damaged entry; one that the process
  generated itself and the checks refuse is not written (one warning per process), so no entry
  is refused on every run;
- trusted: the bytes of a well-formed object that these checks do not interpret: the
  instructions and data, relocation addends, the call frame instructions. Neither checksum is
  a signature: a process that can write the cache directory can place well-formed code with any
  behaviour there (re-checksummed, under the right key), just as it could replace ember's own
  files; the directory is the user's (made with the user's umask; entries are written ``0600``),
  like any local code cache. Hosts whose objects the checks cannot read (not ELF, or a machine
  other than x86-64 and AArch64) do not use the disk cache.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import struct
import tempfile
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ember.config import config
from ember.core.caches import register_cache
from ember.core.fingerprint import fingerprint
from ember.core.ir import ClosedJaxpr
from ember.version import __version__

FORMAT_VERSION = 2  # 2: the header holds the entry's key
_MAGIC = b"EMBERBIN"
_HEADER = struct.Struct("<8sI32sQ32s")  # magic, format version, key, payload length, sha256(payload)
_PREFIX = struct.Struct("<8sI")  # what every version's header begins with: magic, format version
_KEY = re.compile("[0-9a-f]{64}")  # what entry_key returns: the file name, and 32 bytes in the header
_SUFFIX = ".bin"
_TEMP_PREFIX = ".tmp-"
_SUBDIRECTORY = "native"


@dataclass
class Stats:
    """What this process did with the disk cache (for tests and diagnostics)."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    damaged: int = 0
    evictions: int = 0
    # entries of whole programs (``program_key``): loaded, absent, written
    program_hits: int = 0
    program_misses: int = 0
    program_writes: int = 0


stats = Stats()
_stats_lock = threading.Lock()
_warned_unwritable = False


def count(field: str) -> None:
    """Add one to ``stats.<field>``."""
    with _stats_lock:
        setattr(stats, field, getattr(stats, field) + 1)


def directory() -> Path | None:
    """Where entries live, or None when the persistent cache is off."""
    if not config.persistent_cache:
        return None
    root = config.cache_dir or os.environ.get("EMBER_CACHE_DIR", "")
    if not root:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "ember")
    return Path(root) / _SUBDIRECTORY


def entry_key(*parts: str) -> str:
    """The hex sha256 of ``parts`` (length-prefixed, so no two part lists collide) and the format."""
    digest = hashlib.sha256(f"ember-disk-cache-{FORMAT_VERSION}".encode())
    for part in parts:
        data = part.encode()
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def program_key(closed: ClosedJaxpr, name: str, donated: frozenset[int], backend: str) -> tuple[str | None, str]:
    """(the key of the whole program ``closed`` compiled as ``name`` with inputs ``donated`` on
    ``backend``, "") or (None, why it has none). The host it runs on is checked against the
    entry's (``ember.backends.cpu.program_cache``), not keyed: asking whether there is an entry
    needs no LLVM."""
    if directory() is None:
        return None, "the persistent cache is off"
    if not config.persistent_program_cache:
        return None, "whole programs are not kept (persistent_program_cache is off)"
    digest, refs = fingerprint(closed, "config", config.codegen_key(), "donated", sorted(donated), stable=True)
    if refs:
        kinds = ", ".join(sorted({type(r).__name__ for r in refs}))
        return None, f"the program refers to Python objects by identity ({kinds}), which no other process has"
    return entry_key("program", backend, name, digest, source_stamp()), ""


def has(key: str) -> bool:
    """Whether an entry is stored under ``key`` (not whether it is sound: ``load`` says that)."""
    folder = directory()
    return folder is not None and _path(folder, key).is_file()


@functools.cache
def source_stamp() -> str:
    """ember's version and the size and modification time of each of its source files: what a
    whole program's entry depends on besides the program (any change of the compiler, the
    backend or the primitives' rules invalidates every program entry; module entries key their
    IR text, which says what they depend on)."""
    lines = [__version__]
    folders = [str(Path(__file__).resolve().parent.parent)]
    while folders:
        folder = folders.pop()
        with os.scandir(folder) as found:
            for entry in sorted(found, key=lambda e: e.name):
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append(entry.path)
                elif entry.name.endswith(".py"):
                    info = entry.stat()
                    lines.append(f"{entry.path} {info.st_size} {info.st_mtime_ns}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def load(key: str, check: Callable[[bytes], str] | None = None, *, program: bool = False) -> bytes | None:
    """The payload stored under ``key``; None on a miss, when off, or when the entry is damaged.

    ``check(payload)`` says what is wrong with a payload that passed the entry's own tests ("" if
    nothing): a payload it rejects is handled like a damaged entry. ``program``: the entry of a
    whole program (its miss counted as such in ``stats``; its hit by the caller, once it has
    read the program: ``count("program_hits")``)."""
    folder = directory()
    if folder is None:
        return None
    path = _path(folder, key)
    try:
        data = path.read_bytes()
    except OSError:  # absent (or unreadable): a miss
        count("program_misses" if program else "misses")
        return None
    payload, problem = _unpack(data, key)
    if not problem and check is not None:
        problem = check(payload)
    if problem:
        _discard(path, problem)
        return None
    try:
        os.utime(path)  # the least recently used entries are evicted first
    except OSError:  # evicted by another process meanwhile: the payload is still good
        pass
    if not program:
        count("hits")
    return payload


def discard(key: str, problem: str) -> None:
    """Remove the entry under ``key``, found unusable after ``load`` returned it (``problem``
    says why), with the same warning as a damaged entry."""
    folder = directory()
    if folder is not None:
        _discard(_path(folder, key), problem)


def store(key: str, payload: bytes, *, program: bool = False) -> None:
    """Write ``payload`` under ``key`` atomically, then evict down to the size bound
    (``program``: the entry of a whole program)."""
    folder = directory()
    if folder is None:
        return
    path = _path(folder, key)
    header = _HEADER.pack(_MAGIC, FORMAT_VERSION, bytes.fromhex(key), len(payload),
                          hashlib.sha256(payload).digest())
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=_TEMP_PREFIX, suffix=_SUFFIX)
        try:
            with os.fdopen(descriptor, "wb") as file:
                file.write(header + payload)
            os.replace(temporary, path)
        except BaseException:
            _remove(Path(temporary))
            raise
    except OSError as error:
        _warn_unwritable(folder, error)
        return
    count("program_writes" if program else "writes")
    _bound(folder, path, len(header) + len(payload))


def clear() -> None:
    """Remove every entry (and leftover temporary file) of the disk cache."""
    folder = directory()
    if folder is None or not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.name.endswith(_SUFFIX):
            _remove(path)
    with _known_lock:
        _known.pop(folder, None)


def entries() -> int:
    """How many entries the disk cache holds."""
    folder = directory()
    if folder is None or not folder.is_dir():
        return 0
    return sum(1 for path in folder.iterdir() if path.name.endswith(_SUFFIX))


register_cache("disk: machine code of compiled modules", clear, entries, on_disk=True)


def _path(folder: Path, key: str) -> Path:
    if not _KEY.fullmatch(key):  # a file name, never a path: only what entry_key returns
        raise ValueError(f"not a disk cache key: {key!r}")
    return folder / (key + _SUFFIX)


def _unpack(data: bytes, key: str) -> tuple[bytes, str]:
    """(payload, "") for a sound entry of ``key``, else (b"", what is wrong with it)."""
    if len(data) < _PREFIX.size:
        return b"", f"truncated: {len(data)} bytes, shorter than the header"
    magic, version = _PREFIX.unpack_from(data)
    if magic != _MAGIC:
        return b"", "not an ember cache entry (bad magic)"
    if version != FORMAT_VERSION:
        return b"", f"format version {version}, expected {FORMAT_VERSION}"
    if len(data) < _HEADER.size:
        return b"", f"truncated: {len(data)} bytes, shorter than the header"
    _, _, stored_key, length, checksum = _HEADER.unpack_from(data)
    if stored_key != bytes.fromhex(key):
        return b"", (f"it is the entry of key {stored_key.hex()}, not of this file's key: moved or "
                     "copied under another name")
    payload = data[_HEADER.size:]
    if len(payload) != length:
        return b"", f"truncated: {len(payload)} of {length} payload bytes"
    if hashlib.sha256(payload).digest() != checksum:
        return b"", "checksum mismatch"
    return payload, ""


def _discard(path: Path, problem: str) -> None:
    count("damaged")
    _remove(path)
    warnings.warn(f"ember: the disk cache entry {path} is unusable ({problem}); it was removed and the "
                  "program is compiled again", RuntimeWarning, stacklevel=3)


# What this process knows of each folder's size: [bytes when it last counted them plus the bytes it
# wrote since, writes since]. Counting is a ``stat`` of every entry, so a write counts again only
# when the known size could pass the bound, or after RECOUNT_WRITES writes (other processes write
# to the folder too); the known size never undercounts this process's own writes. Counting after
# every write made N compiles cost O(N^2) stats: 16 s of a 132 s test file, whose cache held some
# thousands of entries.
RECOUNT_WRITES = 256
_known: dict[Path, list[int]] = {}
_known_lock = threading.Lock()


def _bound(folder: Path, written: Path, nbytes: int) -> None:
    """After writing ``nbytes`` to ``written``: evict, if the folder may be over the size bound."""
    bound = int(config.persistent_cache_max_bytes)
    with _known_lock:
        known = _known.get(folder)
        if known is not None and known[1] < RECOUNT_WRITES and known[0] + nbytes <= bound:
            known[0] += nbytes
            known[1] += 1
            return
    total = _evict(folder, keep=written, bound=bound)
    with _known_lock:
        _known[folder] = [total, 0]


def _evict(folder: Path, keep: Path, bound: int) -> int:
    """Remove the least recently used entries until the directory fits ``bound`` bytes; the
    bytes left."""
    entries = []
    with os.scandir(folder) as listing:
        for entry in listing:
            name = entry.name
            if not name.endswith(_SUFFIX) or name.startswith(_TEMP_PREFIX):
                continue
            try:
                info = entry.stat()
            except OSError:  # removed by another process meanwhile
                continue
            entries.append((info.st_mtime_ns, info.st_size, entry.path))
    total = sum(size for _, size, _ in entries)
    kept = str(keep)
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= bound:
            break
        if path == kept:
            continue
        _remove(Path(path))
        total -= size
        count("evictions")
    return total


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:  # already gone (another process) or not ours to remove
        pass


def _warn_unwritable(folder: Path, error: OSError) -> None:
    global _warned_unwritable
    if not _warned_unwritable:
        _warned_unwritable = True
        warnings.warn(f"ember: cannot write the disk cache in {folder} ({error}); compiled code is not "
                      "kept across processes. Set ember.config cache_dir (or EMBER_CACHE_DIR) to a writable "
                      "directory, or turn persistent_cache off.", RuntimeWarning, stacklevel=3)
