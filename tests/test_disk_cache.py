"""The persistent cache of native code: hits across processes, damaged entries, entries under
another key's name, object code garbled behind valid checksums, concurrent writers, the size
bound, switching it off and clearing it. Every test uses its own directory."""
import ctypes
import hashlib
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from llvmlite import ir

import ember
from ember.backends import disk_cache
from ember.backends.cpu import jit, object_code

TRIPLE = jit.new_module("triple").triple  # the host's, as the checks read it


@pytest.fixture
def entries(tmp_path):
    """A fresh cache directory for the test; yields the folder its entries go to."""
    with ember.config.override(cache_dir=str(tmp_path), persistent_cache=True):
        yield tmp_path / "native"


def scale_module(factor: int) -> str:
    """The IR text of ``scale(x) = factor * x`` (one module per factor)."""
    module = jit.new_module(f"scale_by_{factor}")
    i64 = ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(i64, [i64]), name="scale")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.mul(fn.args[0], ir.Constant(i64, factor)))
    return str(module)


def scale(compiled: jit.CompiledModule, x: int) -> int:
    return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(compiled.engine.get_function_address("scale"))(x)


def files(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_second_compile_loads_the_entry_and_computes_the_same(entries):
    source = scale_module(7)
    before = disk_cache.Stats(**vars(disk_cache.stats))
    first = jit.CompiledModule(source)
    assert len(files(entries)) == 1 and disk_cache.stats.writes == before.writes + 1
    second = jit.CompiledModule(source)
    assert disk_cache.stats.hits == before.hits + 1
    assert second._optimized_ir is None  # loaded, not optimized
    assert scale(first, 6) == scale(second, 6) == 42
    assert str(second.optimized_ir) == str(first.optimized_ir)  # regenerated on demand
    assert "scale:" in second.assembly()


def test_the_key_separates_optimization_levels(entries):
    source = scale_module(3)
    jit.CompiledModule(source)
    jit.CompiledModule(source, quick=True)
    assert len(files(entries)) == 2


@pytest.mark.parametrize("damage", ["flip payload", "flip header", "truncate", "shorter than header", "empty"])
def test_a_damaged_entry_warns_is_recompiled_and_replaced(entries, damage):
    source = scale_module(11)
    jit.CompiledModule(source)
    (name,) = files(entries)
    path = entries / name
    data = bytearray(path.read_bytes())
    if damage == "flip payload":
        data[-20] ^= 0xFF
    elif damage == "flip header":
        data[0] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "shorter than header":
        data = data[:10]
    else:
        data = b""
    path.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match=name):
        recompiled = jit.CompiledModule(source)
    assert scale(recompiled, 5) == 55
    assert path.read_bytes() != bytes(data)  # replaced by a sound entry
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert scale(jit.CompiledModule(source), 2) == 22
    assert recompiled._optimized_ir is not None


def test_lru_eviction_keeps_the_total_under_the_bound(entries):
    first, second, third = (scale_module(f) for f in (101, 102, 103))
    jit.CompiledModule(first)
    (first_name,) = files(entries)
    jit.CompiledModule(second)
    (second_name,) = set(files(entries)) - {first_name}
    size = (entries / first_name).stat().st_size
    os.utime(entries / first_name, ns=(1, 10**9))  # the oldest two, first older than second
    os.utime(entries / second_name, ns=(1, 2 * 10**9))
    jit.CompiledModule(first)  # a hit makes `first` the most recently used
    with ember.config.override(persistent_cache_max_bytes=2 * size + size // 2):
        jit.CompiledModule(third)
    remaining = files(entries)
    assert len(remaining) == 2 and first_name in remaining and second_name not in remaining
    assert sum((entries / n).stat().st_size for n in remaining) <= 2 * size + size // 2


def test_a_write_counts_the_folder_only_when_it_may_pass_the_bound(entries, monkeypatch):
    # (counting is a stat of every entry: after every write, N compiles cost O(N^2) stats)
    counted = []
    real = disk_cache._evict
    monkeypatch.setattr(disk_cache, "_evict", lambda *a, **k: counted.append(1) or real(*a, **k))
    for factor in range(201, 211):
        jit.CompiledModule(scale_module(factor))
    assert len(counted) == 1 and len(files(entries)) == 10  # (the first write counts: the folder is new)
    size = max((entries / n).stat().st_size for n in files(entries))
    with ember.config.override(persistent_cache_max_bytes=10 * size + size // 2):  # each next write may pass it
        jit.CompiledModule(scale_module(211))
        jit.CompiledModule(scale_module(212))
    assert len(counted) == 3 and len(files(entries)) == 10  # (one evicted each time)
    monkeypatch.setattr(disk_cache, "RECOUNT_WRITES", 3)  # (and every RECOUNT_WRITES writes: other processes write too)
    for factor in range(213, 218):
        jit.CompiledModule(scale_module(factor))
    assert len(counted) == 4


def test_switched_off_by_config(entries):
    with ember.config.override(persistent_cache=False):
        jit.CompiledModule(scale_module(5))
        assert disk_cache.directory() is None
    assert files(entries) == []


def test_where_the_cache_lives(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "env"))
    with ember.config.override(cache_dir="", persistent_cache=True):
        assert disk_cache.directory() == tmp_path / "env" / "native"
        with ember.config.override(cache_dir=str(tmp_path / "flag")):
            assert disk_cache.directory() == tmp_path / "flag" / "native"
        monkeypatch.delenv("EMBER_CACHE_DIR")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert disk_cache.directory() == tmp_path / "xdg" / "ember" / "native"
        monkeypatch.delenv("XDG_CACHE_HOME")
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert disk_cache.directory() == tmp_path / "home" / ".cache" / "ember" / "native"


def test_clear_caches_empties_it(entries):
    jit.CompiledModule(scale_module(9))
    assert files(entries)
    ember.clear_caches()
    assert files(entries) == []


def test_an_unwritable_directory_warns_and_still_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setattr(disk_cache, "_warned_unwritable", False)
    with ember.config.override(cache_dir=str(blocker), persistent_cache=True):
        with pytest.warns(RuntimeWarning, match="cannot write the disk cache"):
            compiled = jit.CompiledModule(scale_module(13))
    assert scale(compiled, 3) == 39


# --- fresh processes -----------------------------------------------------------------------
PROGRAM = textwrap.dedent("""
    import numpy as np
    import ember, ember.numpy as jnp
    ember.config.update("log_compiles", True)

    def selu_like(x):
        return 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67)

    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    got = np.asarray(ember.jit(selu_like)(x))
    want = 1.05 * np.where(x > 0, x, 1.67 * np.exp(x) - 1.67)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    print("ok", got.dtype)
""")

LOADED = "selu_like: machine code loaded from the disk cache"


def run_program(cache: str, program: str = PROGRAM, **env: str) -> subprocess.Popen:
    """A fresh process running ``program``; the tests of module entries keep no whole programs
    (a whole program's entry would be loaded instead of its modules': see the program tests)."""
    environment = {**os.environ, "EMBER_CACHE_DIR": cache, "EMBER_PERSISTENT_CACHE": "1",
                   "EMBER_PERSISTENT_PROGRAM_CACHE": "0", "EMBER_BACKEND": "cpu",  # (it holds native code)
                   **env}
    return subprocess.Popen([sys.executable, "-c", program], env=environment, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(process: subprocess.Popen) -> str:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert out.strip() == "ok float32"
    return err


def test_a_fresh_process_loads_from_disk_and_computes_correctly(tmp_path):
    assert LOADED not in finish(run_program(str(tmp_path)))
    assert LOADED in finish(run_program(str(tmp_path)))


def test_concurrent_writers_all_succeed(tmp_path):
    processes = [run_program(str(tmp_path)) for _ in range(4)]
    for p in processes:
        finish(p)
    assert not [n for n in files(tmp_path / "native") if n.startswith(".tmp")]
    assert LOADED in finish(run_program(str(tmp_path)))


def test_switched_off_by_environment(tmp_path):
    finish(run_program(str(tmp_path), EMBER_PERSISTENT_CACHE="0"))
    assert not (tmp_path / "native").exists()


def test_results_of_a_loaded_program_match_numpy(entries):
    """In-process: the same program compiled, then loaded from disk, gives the same values."""
    x = np.linspace(-4, 4, 4099, dtype=np.float32)

    def program(x):
        return ember.numpy.tanh(x) * 3 + ember.numpy.exp(-x * x)

    with ember.config.override(backend="cpu", persistent_program_cache=False):  # (modules: native code)
        first = np.asarray(ember.jit(program)(x))
        with ember.config.override(persistent_cache=False):  # forget only the in-memory copies
            ember.clear_caches()
        hits = disk_cache.stats.hits
        second = np.asarray(ember.jit(program)(x))
    assert disk_cache.stats.hits > hits
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(second, np.tanh(x) * 3 + np.exp(-x * x), rtol=1e-5, atol=1e-6)
    # (the native dispatcher, built in the background after a first program, writes its module
    # into this test's directory, not the next test's)
    ember.wait_for_compiles()


# --- entries under another key's name, object code garbled behind valid checksums -----------
def test_an_entry_copied_under_another_key_warns_and_is_recompiled(entries):
    three, five = scale_module(3), scale_module(5)
    jit.CompiledModule(three)
    (three_name,) = files(entries)
    jit.CompiledModule(five)
    (five_name,) = set(files(entries)) - {three_name}
    sound = (entries / five_name).read_bytes()
    shutil.copyfile(entries / three_name, entries / five_name)  # sound, checksums and all, but 3 * x
    with pytest.warns(RuntimeWarning, match=rf"{five_name} is unusable \(it is the entry of key "
                                            rf"{three_name[:-4]}, not of this file's key: moved or copied"):
        recompiled = jit.CompiledModule(five)
    assert not recompiled.from_disk and scale(recompiled, 7) == 35
    assert (entries / five_name).read_bytes() == sound  # the right entry written again
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = jit.CompiledModule(five)
    assert again.from_disk and scale(again, 7) == 35


def test_keys_are_file_names_only(entries):
    with pytest.raises(ValueError, match="not a disk cache key"):
        disk_cache.load("../" + "0" * 61)
    with pytest.raises(ValueError, match="not a disk cache key"):
        disk_cache.store("A" * 64, b"payload")


def split_entry(data: bytes) -> tuple[bytes, bytes, bytes]:
    """(key, sha256 of the object code taken when it was generated, object code) of an entry."""
    _magic, _version, key, length, _checksum = disk_cache._HEADER.unpack_from(data)
    payload = data[disk_cache._HEADER.size:]
    assert len(payload) == length
    return key, payload[:32], payload[32:]


def join_entry(key: bytes, digest: bytes, obj: bytes) -> bytes:
    """An entry with a valid header and outer checksum around ``digest + obj``."""
    payload = digest + obj
    return disk_cache._HEADER.pack(disk_cache._MAGIC, disk_cache.FORMAT_VERSION, key, len(payload),
                                   hashlib.sha256(payload).digest()) + payload


ORDER = "<" if sys.byteorder == "little" else ">"


def sections(obj: bytes) -> list[tuple[bytes, int, int, int]]:
    """(name, type, offset, size) of each section of an ELF64 object."""
    (shoff,) = struct.unpack_from(ORDER + "Q", obj, 0x28)
    shnum, shstrndx = struct.unpack_from(ORDER + "HH", obj, 0x3C)
    headers = [struct.unpack_from(ORDER + "IIQQQQIIQQ", obj, shoff + 64 * i) for i in range(shnum)]
    names = headers[shstrndx][4]
    return [(obj[names + h[0]:obj.index(b"\0", names + h[0])], h[1], h[4], h[5]) for h in headers]


def patch(obj: bytes, offset: int, fmt: str, *values) -> bytes:
    out = bytearray(obj)
    struct.pack_into(ORDER + fmt, out, offset, *values)
    return bytes(out)


def first_of_type(obj: bytes, kind: int) -> tuple[int, int] | None:
    """(offset, size) of the first section of ``kind`` (4: relocations, 2: symbols)."""
    return next(((offset, size) for _, t, offset, size in sections(obj) if t == kind and size), None)


def named(obj: bytes, name: bytes) -> tuple[int, int] | None:
    return next(((offset, size) for n, _, offset, size in sections(obj) if n == name and size), None)


def code_byte_flipped(obj: bytes) -> bytes:
    offset, size = max((offset, size) for _, t, offset, size in sections(obj) if t == 1 and size)
    return patch(obj, offset + size // 2, "B", obj[offset + size // 2] ^ 0xFF)


def relocation(obj: bytes, offset: int | None = None, kind: int | None = None) -> bytes | None:
    table = first_of_type(obj, 4)
    if table is None:
        return None
    r_offset, r_info, addend = struct.unpack_from(ORDER + "QQq", obj, table[0])
    r_offset = r_offset if offset is None else offset
    r_info = r_info if kind is None else (r_info >> 32) << 32 | kind
    return patch(obj, table[0], "QQq", r_offset, r_info, addend)


def garbage(obj: bytes) -> bytes:
    return obj[:4] + random.Random(0).randbytes(len(obj) - 4)


def symbol_field(obj: bytes, field: str, value: int) -> bytes | None:
    """The section index or value of the last symbol defined in a section set to ``value``."""
    table = first_of_type(obj, 2)
    if table is None:
        return None
    starts = range(table[0] + 24, table[0] + table[1], 24)
    last = max(start for start in starts if 0 < struct.unpack_from(ORDER + "H", obj, start + 6)[0] < 0xFF00)
    return patch(obj, last + 6, "H", value) if field == "section" else patch(obj, last + 8, "Q", value)


def eh_frame(obj: bytes, where: str, value: int) -> bytes | None:
    frame = named(obj, b".eh_frame")
    if frame is None:
        return None
    if where == "length":
        return patch(obj, frame[0], "I", value)
    (cie_length,) = struct.unpack_from(ORDER + "I", obj, frame[0])
    return patch(obj, frame[0] + 4 + cie_length + 4, "I", value)  # the first FDE's link to its CIE


def renamed(obj: bytes, old: bytes, new: bytes) -> bytes | None:
    return obj.replace(b"\0" + old + b"\0", b"\0" + new + b"\0") if b"\0" + old + b"\0" in obj else None


# What garbles an object without breaking its checksums, and what the checks then say. Each of
# these, handed to LLVM, aborts the interpreter ("LLVM ERROR: ...", a failed assertion) or has
# its runtime linker write out of bounds.
STRUCTURAL = {
    "section table past the end": (lambda o: patch(o, 0x28, "Q", len(o) + 64), "section header table"),
    "another machine": (lambda o: patch(o, 18, "H", 3), "ELF machine 3"),
    "32-bit class": (lambda o: patch(o, 4, "B", 1), "ELF class 1"),
    "other byte order": (lambda o: patch(o, 5, "B", 2 if ORDER == "<" else 1), "byte order"),
    "not relocatable": (lambda o: patch(o, 16, "H", 2), "not a relocatable object"),
    "section past the end": (lambda o: patch(o, struct.unpack_from(ORDER + "Q", o, 0x28)[0] + 64 + 32, "Q",
                                             1 << 40), "runs past the end"),
    "alignment": (lambda o: patch(o, struct.unpack_from(ORDER + "Q", o, 0x28)[0] + 64 + 48, "Q", 3),
                  "alignment 3"),
    "relocation outside its section": (lambda o: relocation(o, offset=1 << 24), "patches bytes outside"),
    "unknown relocation type": (lambda o: relocation(o, kind=200), "relocation type 200"),
    "symbol in no section": (lambda o: symbol_field(o, "section", 0x4D), "section index 0x4d"),
    "symbol outside its section": (lambda o: symbol_field(o, "value", 1 << 30), "outside its section"),
    "eh_frame record length": (lambda o: eh_frame(o, "length", 1 << 20), ".eh_frame record at 0"),
    "eh_frame link to no CIE": (lambda o: eh_frame(o, "cie", 999), "points to no CIE"),
    "garbage after the magic": (garbage, "not a loadable object"),
}


@pytest.fixture(scope="module")
def program_entries(tmp_path_factory):
    """The entries that a fresh process running PROGRAM writes (the kernel's, the thread team's),
    by file name; a second process loads them all."""
    cache = tmp_path_factory.mktemp("program")
    assert "machine code loaded" not in finish(run_program(str(cache)))
    written = {p.name: p.read_bytes() for p in (cache / "native").iterdir()}
    err = finish(run_program(str(cache)))
    assert LOADED in err and err.count("machine code loaded from the disk cache") == len(written)
    return written


@pytest.mark.parametrize("damage", sorted(STRUCTURAL))
def test_the_object_checks_say_what_is_wrong(program_entries, damage):
    mutate, expected = STRUCTURAL[damage]
    checked = 0
    for data in program_entries.values():
        _key, digest, obj = split_entry(data)
        assert object_code.inspect(digest + obj, "", TRIPLE)[0] == ""
        bad = mutate(obj)
        if bad is None:
            continue
        problem, _ = object_code.inspect(hashlib.sha256(bad).digest() + bad, "", TRIPLE)
        assert expected in problem, problem
        checked += 1
    if not checked:
        pytest.skip(f"no entry has what {damage!r} garbles")


def test_a_sound_entry_passes_the_checks_and_must_define_the_functions(entries):
    source = scale_module(21)
    jit.CompiledModule(source)
    (name,) = files(entries)
    _key, digest, obj = split_entry((entries / name).read_bytes())
    assert object_code.inspect(digest + obj, source, TRIPLE) == ("", [])
    problem, _ = object_code.inspect(digest + obj, source.replace('@"scale"', '@"scale_by_twenty_one"'), TRIPLE)
    assert "does not define scale_by_twenty_one" in problem
    problem, _ = object_code.inspect(digest + code_byte_flipped(obj), source, TRIPLE)
    assert "checksum taken when it was generated" in problem


def test_code_that_fails_the_checks_is_not_written(entries, monkeypatch):
    def refuse(*_):
        raise object_code.BadObject("refused by the test")

    monkeypatch.setattr(jit, "_warned_unstorable", False)
    monkeypatch.setattr(object_code, "check_elf", refuse)
    with pytest.warns(RuntimeWarning, match=r"scale_by_17 fails the disk cache's checks \(.*refused by the test"):
        compiled = jit.CompiledModule(scale_module(17))
    assert scale(compiled, 2) == 34 and files(entries) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        assert scale(jit.CompiledModule(scale_module(19)), 2) == 38
    assert files(entries) == []


# In a fresh process: (garble, what the warning says, whether the inner checksum is rewritten too).
# Two of the structural garbles suffice here: the in-process test above covers every message.
GARBLED = {
    "code bytes, outer checksum only": (code_byte_flipped, "checksum taken when it was generated", False),
    "import of a missing symbol": (lambda o: renamed(o, b"GOMP_parallel", b"GOMP_parallez"),
                                   "it imports GOMP_parallez, not found in this process", True),
    **{damage: (*STRUCTURAL[damage], True) for damage in ("section table past the end", "garbage after the magic")},
}


@pytest.mark.parametrize("damage", sorted(GARBLED))
def test_a_fresh_process_refuses_garbled_object_code_and_recompiles(tmp_path, program_entries, damage):
    mutate, expected, inner = GARBLED[damage]
    folder = tmp_path / "native"
    folder.mkdir()
    garbled = []
    for name, data in program_entries.items():
        key, digest, obj = split_entry(data)
        bad = mutate(obj)
        if bad is not None:
            garbled.append(name)
            data = join_entry(key, hashlib.sha256(bad).digest() if inner else digest, bad)
        (folder / name).write_bytes(data)
    if not garbled:
        pytest.skip(f"no entry has what {damage!r} garbles")
    err = finish(run_program(str(tmp_path)))  # exits normally and prints correct results
    for name in garbled:
        assert re.search(rf"RuntimeWarning: ember: the disk cache entry \S*{name} is unusable \([^\n]*"
                         rf"{re.escape(expected)}", err), err
        assert (folder / name).read_bytes() == program_entries[name]  # compiled again, written again
    assert err.count("RuntimeWarning") == len(garbled)
    loaded = err.count("machine code loaded from the disk cache")
    assert loaded == len(program_entries) - len(garbled)


def test_a_fresh_process_refuses_an_entry_under_another_name(tmp_path, program_entries):
    if len(program_entries) < 2:
        pytest.skip("PROGRAM wrote a single entry")
    (name, data), (other, other_data) = sorted(program_entries.items())[:2]
    folder = tmp_path / "native"
    folder.mkdir()
    (folder / name).write_bytes(other_data)  # a copy of the other entry under this one's name
    (folder / other).write_bytes(other_data)
    err = finish(run_program(str(tmp_path)))
    assert re.search(rf"{name} is unusable \(it is the entry of key {other[:-4]}, not of this file's key", err), err
    assert err.count("RuntimeWarning") == 1
    assert (folder / name).read_bytes() == data and (folder / other).read_bytes() == other_data
