"""The persistent cache: compiled native code on disk, shared by every process of the user.

A new process running a program that an earlier one compiled loads its machine code
from here instead of optimizing and generating code again (``ember.backends.cpu.jit``
keys entries by everything that determines the code: see ``entry_key`` there).

Where: ``<cache root>/native/<sha256 key>.bin``; the root is ``config.cache_dir`` if
set, else ``$EMBER_CACHE_DIR``, else ``$XDG_CACHE_HOME/ember`` or ``~/.cache/ember``.
Off with ``config.update("persistent_cache", False)`` or ``EMBER_PERSISTENT_CACHE=0``.

An entry is a header (magic, format version, payload length, sha256 of the payload)
and the payload. Safety:

- writes are atomic: a temporary file in the same directory, fsync, ``os.replace``;
  readers never see a partial entry, and two processes writing the same key each
  replace the file with a complete, identical one;
- a damaged or truncated entry fails the header or checksum test: it is removed, a
  ``RuntimeWarning`` names it, and the caller compiles again (and writes it anew);
- the directory is bounded by ``config.persistent_cache_max_bytes``: hits refresh an
  entry's modification time, and after a write the least recently used entries are
  evicted until the total fits;
- a cache that cannot be written (read-only or full disk) only costs the speed-up:
  one ``RuntimeWarning`` per process, and programs are compiled as if it were off.
"""
from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

from ember.config import config

FORMAT_VERSION = 1
_MAGIC = b"EMBERBIN"
_HEADER = struct.Struct("<8sIQ32s")  # magic, format version, payload length, sha256(payload)
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


stats = Stats()
_stats_lock = threading.Lock()
_warned_unwritable = False


def _count(field: str) -> None:
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


def load(key: str) -> bytes | None:
    """The payload stored under ``key``; None on a miss, when off, or when the entry is damaged."""
    folder = directory()
    if folder is None:
        return None
    path = folder / (key + _SUFFIX)
    try:
        data = path.read_bytes()
    except OSError:  # absent (or unreadable): a miss
        _count("misses")
        return None
    payload, problem = _unpack(data)
    if problem:
        _discard(path, problem)
        return None
    try:
        os.utime(path)  # the least recently used entries are evicted first
    except OSError:  # evicted by another process meanwhile: the payload is still good
        pass
    _count("hits")
    return payload


def store(key: str, payload: bytes) -> None:
    """Write ``payload`` under ``key`` atomically, then evict down to the size bound."""
    folder = directory()
    if folder is None:
        return
    header = _HEADER.pack(_MAGIC, FORMAT_VERSION, len(payload), hashlib.sha256(payload).digest())
    path = folder / (key + _SUFFIX)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=_TEMP_PREFIX, suffix=_SUFFIX)
        try:
            with os.fdopen(descriptor, "wb") as file:
                file.write(header + payload)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            _remove(Path(temporary))
            raise
    except OSError as error:
        _warn_unwritable(folder, error)
        return
    _count("writes")
    _evict(folder, keep=path)


def clear() -> None:
    """Remove every entry (and leftover temporary file) of the disk cache."""
    folder = directory()
    if folder is None or not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.name.endswith(_SUFFIX):
            _remove(path)


def _unpack(data: bytes) -> tuple[bytes, str]:
    """(payload, "") for a sound entry, else (b"", what is wrong with it)."""
    if len(data) < _HEADER.size:
        return b"", f"truncated: {len(data)} bytes, shorter than the header"
    magic, version, length, checksum = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        return b"", "not an ember cache entry (bad magic)"
    if version != FORMAT_VERSION:
        return b"", f"format version {version}, expected {FORMAT_VERSION}"
    payload = data[_HEADER.size:]
    if len(payload) != length:
        return b"", f"truncated: {len(payload)} of {length} payload bytes"
    if hashlib.sha256(payload).digest() != checksum:
        return b"", "checksum mismatch"
    return payload, ""


def _discard(path: Path, problem: str) -> None:
    _count("damaged")
    _remove(path)
    warnings.warn(f"ember: the disk cache entry {path} is damaged ({problem}); it was removed and the "
                  "program is compiled again", RuntimeWarning, stacklevel=3)


def _evict(folder: Path, keep: Path) -> None:
    """Remove the least recently used entries until the directory fits the size bound."""
    entries = []
    for path in folder.iterdir():
        if not path.name.endswith(_SUFFIX) or path.name.startswith(_TEMP_PREFIX):
            continue
        try:
            info = path.stat()
        except OSError:  # removed by another process meanwhile
            continue
        entries.append((info.st_mtime_ns, info.st_size, path))
    total = sum(size for _, size, _ in entries)
    bound = int(config.persistent_cache_max_bytes)
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= bound:
            break
        if path == keep:
            continue
        _remove(path)
        total -= size
        _count("evictions")


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
