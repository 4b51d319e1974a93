"""The persistent cache of native code: hits across processes, damaged entries, concurrent
writers, the size bound, switching it off and clearing it. Every test uses its own directory."""
import ctypes
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from llvmlite import ir

import ember
from ember.backends import disk_cache
from ember.backends.cpu import jit


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


def run_program(cache: str, **env: str) -> subprocess.Popen:
    environment = {**os.environ, "EMBER_CACHE_DIR": cache, "EMBER_PERSISTENT_CACHE": "1",
                   "EMBER_BACKEND": "cpu", **env}  # the disk cache holds native code
    return subprocess.Popen([sys.executable, "-c", PROGRAM], env=environment, text=True,
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

    with ember.config.override(backend="cpu"):  # the disk cache holds native code
        first = np.asarray(ember.jit(program)(x))
        with ember.config.override(persistent_cache=False):  # forget only the in-memory copies
            ember.clear_caches()
        hits = disk_cache.stats.hits
        second = np.asarray(ember.jit(program)(x))
    assert disk_cache.stats.hits > hits
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(second, np.tanh(x) * 3 + np.exp(-x * x), rtol=1e-5, atol=1e-6)
