"""Whole programs in the disk cache (ember.backends.cpu.program_cache): a fresh process loads a
program that an earlier one compiled (its plan and machine code, no compile stage), with the
same results; damaged entries are refused with a warning and compiled again; entries of another
host, other flags or other sources are not used; programs that hold live objects are not kept,
and the cache says why. Every test uses its own directory."""
import json
import logging
import os
import struct
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import disk_cache, registry

pytestmark = pytest.mark.skipif(registry.get().name != "cpu", reason="the disk cache holds the CPU backend's code")


@pytest.fixture
def folder(tmp_path):
    """A fresh cache directory, whole programs kept; yields the folder its entries go to."""
    with ember.config.override(cache_dir=str(tmp_path), persistent_cache=True, persistent_program_cache=True):
        yield tmp_path / "native"
    ember.clear_caches(disk=False)


def program_files(folder):
    """The names of the entries of whole programs (the others are modules' machine code)."""
    found = []
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        payload = path.read_bytes()[disk_cache._HEADER.size:]
        if payload[8:18] == b'{"format":':
            found.append(path.name)
    return found


def stats():
    return disk_cache.Stats(**vars(disk_cache.stats))


def forget():
    """A new process, as far as the caches go: only the disk cache is kept."""
    ember.clear_caches(disk=False)


def selu(x):
    return 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67)


def dense(x, w, b):
    return jnp.tanh(x @ w + b).sum(axis=1)


def softmax(x):
    e = jnp.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


TABLE = np.linspace(-1, 1, 48, dtype=np.float32).reshape(3, 16)


def with_constant_and_literal(x):
    return (x.reshape(3, 16) * TABLE).reshape(48) + 1, 2.5


def integer_mix(i, x):
    return (i * 3 + 1) % 7, jnp.where(i > 2, x, -x).astype(jnp.int32)


rng = np.random.default_rng(0)
PROGRAMS = {
    "selu": (selu, [rng.standard_normal(1001).astype(np.float32)]),
    "dense": (dense, [rng.standard_normal((64, 96)).astype(np.float32),
                      rng.standard_normal((96, 80)).astype(np.float32), rng.standard_normal(80).astype(np.float32)]),
    "softmax": (softmax, [rng.standard_normal((33, 17)).astype(np.float32)]),
    "constant and literal": (with_constant_and_literal, [rng.standard_normal(48).astype(np.float32)]),
    "integers": (integer_mix, [np.arange(10, dtype=np.int32), rng.standard_normal(10).astype(np.float32) * 9]),
    "bfloat16": (lambda x: jnp.sin(x) * 2, [rng.standard_normal(40).astype(jnp.bfloat16)]),
}


def run(f, args, **jit_options):
    return [np.asarray(y) for y in ember.tree_util.tree_leaves(ember.jit(f, **jit_options)(*args))]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_program_loaded_whole_computes_what_it_computed(folder, name):
    f, args = PROGRAMS[name]
    before = stats()
    first = run(f, args)
    assert disk_cache.stats.program_writes == before.program_writes + 1
    assert len(program_files(folder)) == 1
    forget()
    loaded = stats()
    second = run(f, args)
    assert disk_cache.stats.program_hits == loaded.program_hits + 1
    assert disk_cache.stats.program_writes == loaded.program_writes  # nothing compiled, nothing written
    assert len(first) == len(second)
    for a, b in zip(first, second):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    with ember.config.override(backend="reference"):
        want = run(f, args)
    for a, b in zip(second, want):
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64),
                                   rtol=2e-2 if name == "bfloat16" else 1e-5, atol=1e-5)


def test_a_loaded_program_with_donation_takes_its_input(folder):
    x = np.arange(12, dtype=np.float32)
    first = np.asarray(ember.jit(lambda v: v * 2 + 1, donate_argnums=0)(jnp.asarray(x)))
    forget()
    hits = disk_cache.stats.program_hits
    donated = jnp.asarray(x)
    second = np.asarray(ember.jit(lambda v: v * 2 + 1, donate_argnums=0)(donated))
    assert disk_cache.stats.program_hits == hits + 1
    np.testing.assert_array_equal(first, second)
    assert donated.is_deleted()


def test_the_cache_explains_what_it_did(folder, caplog):
    x = np.linspace(-2, 2, 50, dtype=np.float32)
    with ember.config.override(explain_cache_misses=True), caplog.at_level(logging.WARNING, logger="ember"):
        ember.jit(selu)(x)
        forget()
        ember.jit(selu)(x)
    stored = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ember cpu: selu: ")]
    assert len(stored) == 2, stored
    assert "no entry in the disk cache" in stored[0] and "compiled, and stored whole" in stored[0]
    assert "loaded whole from the disk cache" in stored[1]
    key = stored[1].rpartition("(entry ")[2].rstrip(")")
    assert program_files(folder)[0].startswith(key)  # the entry it names
    with ember.config.override(log_compiles=True), caplog.at_level(logging.WARNING, logger="ember"):
        forget()
        caplog.clear()
        ember.jit(selu)(x)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "ember cpu: loaded selu" in text and "whole program: loaded whole from the disk cache" in text
    assert "whole from the disk cache (its plan and machine code)" in text


def read_entry(folder, name):
    """(the plan's JSON, the bytes of its arrays and modules) of a program entry."""
    payload = (folder / name).read_bytes()[disk_cache._HEADER.size:]
    (length,) = struct.unpack_from("<Q", payload)
    plan = json.loads(payload[8:8 + length])
    parts, offset = [], 8 + length
    for size in plan["blobs"]:
        parts.append(payload[offset:offset + size])
        offset += size
    return plan, parts


def rewrite(folder, name, header=None, blobs=None):
    """Rewrite a program entry with sound outer checksums: ``header(dict)`` and ``blobs(list)``
    change the plan's JSON and its arrays' and modules' bytes."""
    plan, parts = read_entry(folder, name)
    if header is not None:
        header(plan)
    if blobs is not None:
        blobs(plan, parts)
    plan["blobs"] = [len(p) for p in parts]
    text = json.dumps(plan).encode()
    disk_cache.store(name[:-4], struct.pack("<Q", len(text)) + text + b"".join(parts), program=True)


def flip_code(plan, parts):
    code = bytearray(parts[plan["modules"][0]["code"]])
    code[len(code) // 2] ^= 0xFF
    parts[plan["modules"][0]["code"]] = bytes(code)


def flip_file(folder, name):
    data = bytearray((folder / name).read_bytes())
    data[-7] ^= 0x55
    (folder / name).write_bytes(bytes(data))


def wrong_slot(plan):
    plan["steps"][0]["outs"] = [10**6]


def unknown_step(plan):
    plan["steps"][0]["kind"] = "shell"


def object_buffer(plan):
    plan["allocations"][0][1][1] = "object"


def missing_function(plan):
    next(step for step in plan["steps"] if step["kind"] == "kernel")["name"] = "no_such_kernel"


DAMAGES = {
    "a byte of the file flipped": (lambda folder, name: flip_file(folder, name), "checksum mismatch"),
    "machine code garbled under a sound outer checksum": (
        lambda folder, name: rewrite(folder, name, blobs=flip_code), "machine code is unusable"),
    "a slot out of range": (lambda folder, name: rewrite(folder, name, header=wrong_slot), "is not one of the program"),
    "a step of an unknown kind": (lambda folder, name: rewrite(folder, name, header=unknown_step), "unknown kind"),
    "a buffer of Python objects": (lambda folder, name: rewrite(folder, name, header=object_buffer),
                                   "dtype object, which native code never computes"),
    "a kernel its module lacks": (lambda folder, name: rewrite(folder, name, header=missing_function),
                                  "does not define no_such_kernel"),
    "a truncated plan": (lambda folder, name: disk_cache.store(name[:-4], b"\x20\x00\x00\x00\x00\x00\x00\x00{\"for",
                                                               program=True), "malformed program entry"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_program_entry_warns_and_is_compiled_again(folder, damage):
    f, args = PROGRAMS["dense"]
    first = run(f, args)
    (name,) = program_files(folder)
    sound = (folder / name).read_bytes()
    # (a product on gemm, then the fused bias, tanh and sum)
    assert [step["kind"] for step in read_entry(folder, name)[0]["steps"]] == ["dot", "kernel"]
    garble, expected = DAMAGES[damage]
    garble(folder, name)
    forget()
    before = stats()
    with pytest.warns(RuntimeWarning, match=rf"{name} is unusable \([^\n]*{expected}"):
        second = run(f, args)
    assert disk_cache.stats.program_hits == before.program_hits
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert (folder / name).read_bytes() == sound  # compiled again, written again
    forget()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(f, args)
    assert disk_cache.stats.program_hits == before.program_hits + 1


def test_an_entry_of_another_host_is_not_used_and_is_replaced(folder, caplog):
    f, args = PROGRAMS["selu"]
    first = run(f, args)
    (name,) = program_files(folder)
    sound = (folder / name).read_bytes()
    rewrite(folder, name, header=lambda plan: plan.update(identity=plan["identity"].replace("ember", "other")))
    forget()
    with warnings.catch_warnings(), ember.config.override(explain_cache_misses=True), \
            caplog.at_level(logging.WARNING, logger="ember"):
        warnings.simplefilter("error")  # not damage: another machine's entry
        second = run(f, args)
    assert "an entry compiled for another host or toolchain in the disk cache" in caplog.text
    np.testing.assert_array_equal(first[0], second[0])
    assert (folder / name).read_bytes() == sound  # this host's, written over it


def test_flags_and_sources_key_the_entry(folder, monkeypatch):
    f, args = PROGRAMS["softmax"]
    run(f, args)
    forget()
    before = stats()
    with ember.config.override(disabled_passes=("cse",)):  # another compile: another entry
        run(f, args)
    assert disk_cache.stats.program_hits == before.program_hits
    assert disk_cache.stats.program_writes == before.program_writes + 1
    forget()
    monkeypatch.setattr(disk_cache, "source_stamp", lambda: "an edited ember")  # the compiler changed
    run(f, args)
    assert disk_cache.stats.program_hits == before.program_hits
    assert len(program_files(folder)) == 3
    monkeypatch.undo()
    forget()
    run(f, args)
    assert disk_cache.stats.program_hits == before.program_hits + 1


def test_the_key_does_not_depend_on_the_process(folder):
    """The key is the same in a fresh process (primitives by name, not identity)."""
    x = np.linspace(-1, 1, 20, dtype=np.float32)
    closed = ember.make_jaxpr(selu)(x)
    key, why = disk_cache.program_key(closed, "selu", frozenset(), "cpu")
    assert why == "" and key is not None
    code = textwrap.dedent(f"""
        import numpy as np, ember, ember.numpy as jnp
        from ember.backends import disk_cache
        def selu(x):
            return 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67)
        closed = ember.make_jaxpr(selu)(np.linspace(-1, 1, 20, dtype=np.float32))
        ember.config.update("persistent_program_cache", True)
        ember.config.update("cache_dir", {str(folder.parent)!r})
        print(disk_cache.program_key(closed, "selu", frozenset(), "cpu")[0])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "EMBER_PERSISTENT_CACHE": "1"}).stdout
    assert out.strip() == key


def test_programs_that_hold_live_objects_are_not_kept_and_say_why(folder, caplog):
    x = np.linspace(-1, 1, 8, dtype=np.float32)

    def with_callback(x):
        return ember.pure_callback(lambda v: np.cos(v), ember.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

    def with_loop(x):
        return lax.fori_loop(0, 3, lambda i, v: v * 0.5 + 1.0, x)

    before = stats()
    with ember.config.override(explain_cache_misses=True), caplog.at_level(logging.WARNING, logger="ember"):
        np.testing.assert_allclose(np.asarray(ember.jit(with_callback)(x)), np.cos(x) + 1, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(ember.jit(with_loop)(x)), ((x * 0.5 + 1) * 0.5 + 1) * 0.5 + 1, rtol=1e-6)
    messages = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ember cpu: ")]
    assert any("with_callback: not kept whole in the disk cache: the program refers to Python objects by identity"
               in m for m in messages), messages
    assert any("with_loop: no entry in the disk cache" in m and "not kept whole (step 0 is a loop step" in m
               for m in messages), messages
    assert disk_cache.stats.program_writes == before.program_writes
    assert program_files(folder) == []


def test_a_tiered_program_on_disk_is_loaded_instead_of_tiered(folder):
    def layers(x, w):
        for i in range(12):
            x = jnp.tanh(x @ w) * 0.4 + x if i % 2 == 0 else jnp.sin(x) * 1.01 + 0.1 * x
        return x.sum()
    args = [np.full((16, 16), 0.01, np.float32), np.eye(16, dtype=np.float32) * 0.5]
    with ember.config.override(tiered_compilation=True):
        jf = ember.jit(layers)
        first = np.asarray(jf(*args))
        assert jf.cache_info().quick_tier_calls == 1
        assert ember.wait_for_compiles(timeout=120)
        native = np.asarray(jf(*args))
        assert len(program_files(folder)) == 1  # written by the background compile
        forget()
        hits = disk_cache.stats.program_hits
        jg = ember.jit(layers)
        second = np.asarray(jg(*args))
        assert jg.cache_info().quick_tier_calls == 0  # native code at once
        assert disk_cache.stats.program_hits == hits + 1
    np.testing.assert_array_equal(native, second)
    np.testing.assert_allclose(first, second, rtol=1e-5)


FRESH = textwrap.dedent("""
    import json, sys
    import numpy as np
    import ember, ember.numpy as jnp
    from ember.backends import disk_cache

    def selu(x):
        return 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67)

    def dense(x, w):
        return jnp.tanh(x @ w) * 0.5

    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((64, 64), dtype=np.float32), rng.standard_normal((64, 64), dtype=np.float32)
    np.save(sys.argv[1], np.concatenate([np.asarray(ember.jit(selu)(x)).ravel(),
                                         np.asarray(ember.jit(dense)(x, w)).ravel()]))
    print(json.dumps(vars(disk_cache.stats)))
""")


def test_a_fresh_process_loads_the_whole_programs_and_computes_the_same(tmp_path):
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path), "EMBER_PERSISTENT_CACHE": "1",
           "EMBER_PERSISTENT_PROGRAM_CACHE": "1", "EMBER_BACKEND": "cpu", "EMBER_LOG_COMPILES": "0"}

    def fresh(out):
        done = subprocess.run([sys.executable, "-c", FRESH, str(out)], env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1]), np.load(out)

    first_stats, first = fresh(tmp_path / "first.npy")
    assert first_stats["program_hits"] == 0 and first_stats["program_writes"] == 2
    second_stats, second = fresh(tmp_path / "second.npy")
    assert second_stats["program_hits"] == 2 and second_stats["program_misses"] == 0
    assert second_stats["program_writes"] == 0 and second_stats["damaged"] == 0
    np.testing.assert_array_equal(first, second)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((64, 64), dtype=np.float32), rng.standard_normal((64, 64), dtype=np.float32)
    want = np.concatenate([(1.05 * np.where(x > 0, x, 1.67 * np.exp(x) - 1.67)).ravel(),
                           (np.tanh(x @ w) * 0.5).ravel()])
    np.testing.assert_allclose(second, want, rtol=1e-5, atol=1e-5)


def test_equal_products_share_one_product_compiled_and_loaded(folder):
    from ember.backends import cpu
    from ember.backends.cpu.runner import DotStep

    def chain(x, w, v):
        for _ in range(3):
            x = jnp.tanh(x @ w) * 0.5 + x
        return (x @ v).sum(axis=0)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s, dtype=np.float32) * 0.1 for s in ((64, 64), (64, 64), (64, 32))]
    closed = ember.make_jaxpr(chain)(*args)

    def products(program):
        steps = [s.dot for s in program.steps if isinstance(s, DotStep)]
        return len(steps), len({id(d) for d in steps})
    compiled, report = cpu.compile_program(closed, "chain")
    assert report.code != "disk program" and products(compiled) == (4, 2)
    forget()
    loaded, report = cpu.compile_program(closed, "chain")
    assert report.code == "disk program" and products(loaded) == (4, 2)
    first, second = compiled.run(list(args)), loaded.run(list(args))
    np.testing.assert_array_equal(first[0], second[0])
    with ember.config.override(backend="reference"):
        want = np.asarray(ember.jit(chain)(*args))
    np.testing.assert_allclose(second[0], want, rtol=1e-5, atol=1e-5)
