"""The PJRT backends in the registry, on XLA's CPU plugin (``xla_cpu``): chosen only by name,
results equal to the CPU backend's, Arrays whose data stays on the device until the host reads it,
asynchronous calls, donation, mixed placements, transformations and AOT text through the backend,
refused primitives explained; and an accelerator plugin found becomes the default."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import registry
from ember.callbacks import io_callback

lammps_jax_pjrt_cpu = pytest.importorskip(
    "lammps_jax_pjrt_cpu", reason="XLA's CPU PJRT plugin is not installed (pip install ember[pjrt-cpu])")

from ember.backends.pjrt.binding import Buffer  # noqa: E402


@pytest.fixture
def on_xla_cpu():
    before = ember.config.backend
    ember.config.update("backend", "xla_cpu")
    try:
        yield
    finally:
        ember.config.update("backend", before)


def test_installing_the_cpu_plugin_changes_no_default():
    assert "xla_cpu" in registry.registered()
    assert registry.get("").name == "cpu"
    assert registry.get("xla_cpu").platform == "cpu" and registry.get("xla_cpu").is_available()


def test_jit_on_the_plugin_equals_the_cpu_backend(on_xla_cpu):
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((8, 4), np.float32), rng.standard_normal((16, 8), np.float32)

    def loss(w, x):
        return jnp.mean(jnp.tanh(x @ w) ** 2)

    step = ember.jit(lambda w, x: (loss(w, x), ember.grad(loss)(w, x), ember.vmap(jnp.linalg.norm)(x)))
    got = step(w, x)
    ember.config.update("backend", "cpu")
    want = ember.jit(lambda w, x: (loss(w, x), ember.grad(loss)(w, x), ember.vmap(jnp.linalg.norm)(x)))(w, x)
    for g, e in zip(got, want):
        assert isinstance(g.device_buffer, Buffer)
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=2e-5, atol=1e-6)


def test_arrays_stay_on_the_device_between_calls(on_xla_cpu):
    f = ember.jit(lambda x: x * 2.0 + 1.0)
    y = f(np.arange(4, dtype=np.float32))
    assert isinstance(y.device_buffer, Buffer) and not _on_host(y)
    z = f(y)  # the device buffer is passed as it is
    assert not _on_host(y) and not _on_host(z)
    assert ember.block_until_ready(z) is z and z.device_buffer.is_ready()
    np.testing.assert_array_equal(np.asarray(z), (np.arange(4) * 2 + 1) * 2 + 1)
    assert y.platform() == "cpu" and y.device in registry.get("xla_cpu").devices()
    np.testing.assert_array_equal(np.asarray(y), np.arange(4) * 2 + 1)  # copied to the host when read
    assert _on_host(y)


def test_a_numpy_argument_is_copied_once_and_left_as_the_caller_gave_it(on_xla_cpu, monkeypatch):
    # the caller's array (above api.COPY_FOR_DISPATCH_BYTES: small ones are copied into Arrays
    # first) goes to the plugin as it is, copied during the call: it stays writable, and changing
    # it afterwards changes nothing already passed
    from ember.backends.pjrt.binding import Client

    given = []
    real = Client.buffer_from_host

    def spy(self, value, device=None, *, borrowed=False):
        given.append((value, borrowed))
        return real(self, value, device, borrowed=borrowed)

    monkeypatch.setattr(Client, "buffer_from_host", spy)
    f = ember.jit(lambda x, s: x * s)
    x = np.arange(1 << 17, dtype=np.float32)
    for _ in range(2):
        y = f(x, 2.0)
        assert any(v is x and b for v, b in given)
        assert x.flags.writeable
        x += 1
        np.testing.assert_array_equal(np.asarray(y), (x - 1) * 2)
        given.clear()
    z = f(np.arange(1 << 17, dtype=np.int32), 2.0)  # another dtype: converted first (ember's copy)
    np.testing.assert_array_equal(np.asarray(z), np.arange(1 << 17) * 2.0)
    # a small one (protocols.OWN_COPY_MAX_BYTES), on the hit path too: ember's frozen copy goes
    # behind the call (an accelerator's small copies during the call are waited for one by one)
    small = np.arange(100, dtype=np.float32)
    for _ in range(3):
        given.clear()
        y = f(small, 2.0)
        [(sent, borrowed)] = [(v, b) for v, b in given if v.shape == (100,)]
        assert sent is not small and not borrowed and not sent.flags.writeable and small.flags.writeable
        small += 1
        np.testing.assert_array_equal(np.asarray(y), (small - 1) * 2)
    fortran = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))  # (copied in C order, once)
    for _ in range(3):  # (the general path until the hit path is made, at the second call)
        given.clear()
        np.testing.assert_array_equal(np.asarray(f(fortran, 2.0)), fortran * 2)
    [(sent, borrowed)] = [(v, b) for v, b in given if v.shape == (3, 4)]
    assert sent.flags.c_contiguous and not sent.flags.writeable and not borrowed


def test_large_copies_of_one_call_run_side_by_side_once_each(on_xla_cpu, monkeypatch):
    import threading

    from ember.backends import protocols
    from ember.backends.pjrt.binding import Client

    threads = []
    real = Client.buffer_from_host

    def spy(self, value, device=None, *, borrowed=False):
        threads.append((threading.current_thread().name, value.nbytes))
        return real(self, value, device, borrowed=borrowed)

    monkeypatch.setattr(Client, "buffer_from_host", spy)
    n = protocols.PARALLEL_COPY_BYTES // 4
    a, b = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    host = jnp.asarray(np.full(n, 3.0, np.float32))  # a host Array: copied once, then its mirror
    f = ember.jit(lambda a, b, c, d, s: (a + b * c, d * s))
    for k in range(2):
        threads.clear()
        x, y = f(a, b, host, a, np.float32(2.0))  # ``a`` twice: one copy
        np.testing.assert_array_equal(np.asarray(x), a + 3.0)
        np.testing.assert_array_equal(np.asarray(y), a * 2.0)
        large = [t for t, nbytes in threads if nbytes >= protocols.PARALLEL_COPY_BYTES]
        assert len(large) == (3 if k == 0 else 2)
        assert all(t.startswith("ember-copy") for t in large)
    threads.clear()
    f(a, np.float32(1.0) + b[: n], host, b, np.float32(2.0))
    assert sum(nbytes >= protocols.PARALLEL_COPY_BYTES for _, nbytes in threads) == 3


def _with_devices(program: str, count: int) -> subprocess.CompletedProcess:
    """``program`` run by a fresh process whose XLA CPU plugin has ``count`` devices (a client's
    device count is fixed when it opens: ``XLA_FLAGS``, as for JAX)."""
    env = dict(os.environ, EMBER_PLATFORMS="xla_cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={count}")
    env.pop("EMBER_NUM_CPU_DEVICES", None)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300,
                          cwd=root)


def test_the_plugins_device_count_follows_xla_flags_as_jaxs_cpu():
    out = _with_devices("import ember; print(len(ember.devices()), repr(ember.devices()[-1]))", 3)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "CpuDevice(id=2)"]
    assert len(ember.devices("xla_cpu")) == ember.config.num_cpu_devices  # (1 here, as JAX's CPU by default)


def test_an_array_on_another_device_of_the_plugin_is_copied_to_where_programs_run():
    out = _with_devices("""
import numpy as np, ember
devices = ember.devices()
x = ember.device_put(np.arange(3, dtype=np.float32), devices[-1])
assert x.device == devices[-1]
f = ember.jit(lambda a, b: a * 2 + b)
for _ in range(2):  # (the general path, then the hit path)
    y = f(x, np.ones(3, np.float32))
    np.testing.assert_array_equal(np.asarray(y), np.arange(3) * 2 + 1)
    assert y.device == devices[0]
assert x.device == devices[-1]  # (its placement unchanged)
print("ok")
""", 2)
    assert out.returncode == 0 and out.stdout.split() == ["ok"], out.stderr


def test_device_put_without_a_device_puts_on_the_default_backends_device(on_xla_cpu):
    x = {"a": np.arange(3, dtype=np.float32), "b": 2.0}
    put = ember.device_put(x)
    assert isinstance(put["a"].device_buffer, Buffer) and isinstance(put["b"].device_buffer, Buffer)
    assert not _on_host(put["a"]) and put["a"].device == ember.devices()[0]
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda t: t["a"] * t["b"])(put)), np.arange(3) * 2.0)


def _on_host(a):
    """Whether the Array holds a host copy of its data (without making one)."""
    try:
        object.__getattribute__(a, "_value")
        return True
    except AttributeError:
        return False


def test_a_device_array_feeds_the_cpu_backend_through_the_host(on_xla_cpu):
    y = ember.jit(lambda x: jnp.cumsum(x))(np.arange(5, dtype=np.float32))
    ember.config.update("backend", "cpu")
    out = ember.jit(lambda a: a * 3)(y)
    assert out.device_buffer is None
    np.testing.assert_array_equal(np.asarray(out), np.cumsum(np.arange(5)) * 3)


def test_donated_arguments_are_given_to_pjrt(on_xla_cpu):
    f = ember.jit(lambda x, y: (x + y, x * y), donate_argnums=(0,))
    x = ember.jit(lambda a: a + 0.0)(np.ones(3, np.float32))
    s, p = f(x, np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(np.asarray(s), 3.0)
    np.testing.assert_array_equal(np.asarray(p), 2.0)
    assert x.is_deleted()
    with pytest.raises(RuntimeError, match="deleted"):
        np.asarray(x)


def test_control_flow_and_random_numbers_through_the_backend(on_xla_cpu):
    def f(key, x):
        noise = ember.random.normal(key, x.shape)
        carry, ys = lax.scan(lambda c, r: (c + r, jnp.sin(c)), jnp.zeros(x.shape[1]), x + noise)
        return lax.fori_loop(0, 3, lambda i, c: c * 0.5, carry), ys

    key, x = ember.random.PRNGKey(3), np.linspace(0, 1, 12, dtype=np.float32).reshape(4, 3)
    got = ember.jit(f)(key, x)
    ember.config.update("backend", "reference")
    want = ember.jit(f)(key, x)
    for g, e in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=2e-5, atol=1e-6)


def test_aot_text_is_the_stablehlo(on_xla_cpu):
    compiled = ember.jit(lambda x: jnp.exp(x)).lower(np.ones(3, np.float32)).compile()
    text = compiled.as_text("stablehlo")
    assert "stablehlo.exponential" in text and "func.func public @main" in text
    # as JAX's on its devices: the default text is the StableHLO module, from the lowering and the compile
    lowered = ember.jit(lambda x: jnp.exp(x)).lower(np.ones(3, np.float32))
    assert lowered.as_text() == compiled.as_text() == text
    assert str(lowered.compiler_ir()) == text and "stablehlo.exponential" in str(lowered.compiler_ir("stablehlo"))
    assert "exp" in lowered.as_text("jaxpr") and "stablehlo" not in lowered.as_text("jaxpr")


def test_shard_map_and_pmap_over_the_plugins_devices_run_as_one_partitioned_program():
    """Collectives over several devices of the plugin: shard_map and pmap are one program that
    XLA partitions (``tests/test_pjrt_spmd.py`` has them against JAX)."""
    out = _with_devices("""
import numpy as np, ember
from ember import lax
from ember.sharding import Mesh, PartitionSpec as P
mesh = Mesh(np.array(ember.devices()[:2]), ("d",))
summed = ember.shard_map(lambda x: lax.psum(x, "d"), mesh=mesh, in_specs=P("d"), out_specs=P())
print(np.asarray(summed(np.arange(4, dtype=np.float32))).tolist())
y = ember.pmap(lambda x: lax.psum(x, "d"), axis_name="d")(np.arange(4, dtype=np.float32).reshape(2, 2))
print(np.asarray(y).tolist(), sorted(d.id for d in y.devices()), type(y.sharding).__name__)
""", 2)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[2.0, 4.0]", "[[2.0, 4.0], [2.0, 4.0]] [0, 1] NamedSharding"]


def test_an_accelerator_plugin_found_is_the_default_backend():
    """XLA's CPU plugin named as a TPU's stands in for one: found, it outranks ``cpu``;
    ``EMBER_PLATFORMS=cpu`` keeps the CPU backend."""
    env = dict(os.environ, EMBER_PJRT_PLUGIN=f"tpu:{lammps_jax_pjrt_cpu.PLUGIN_PATH}")
    env.pop("EMBER_PLATFORMS", None)
    env.pop("EMBER_BACKEND", None)
    program = ("import ember, numpy as np; from ember.backends import registry; "
               "y = ember.jit(lambda x: x + 1)(np.ones(2, np.float32)); "
               "print(registry.get().name, y.device_buffer is not None, float(y[0]))")
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["tpu", "True", "2.0"]
    env["EMBER_PLATFORMS"] = "cpu"
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.stdout.split() == ["cpu", "False", "2.0"], out.stderr


def test_executables_are_stored_on_disk_and_loaded_by_the_next_compile(tmp_path):
    from ember.backends.pjrt import program

    offset = float(np.random.default_rng().integers(1, 1 << 30))  # a program no earlier run compiled
    closed = ember.make_jaxpr(lambda x: jnp.sin(x) + offset)(np.ones(3, np.float32))
    with ember.config.override(cache_dir=str(tmp_path), persistent_cache=True):
        first = program.Program(program.client("xla_cpu"), closed)
        second = program.Program(program.client("xla_cpu"), closed)
        for entry in (tmp_path / "native").iterdir():
            entry.write_bytes(b"damaged")
        with pytest.warns(RuntimeWarning):
            third = program.Program(program.client("xla_cpu"), closed)
    assert (first.code, second.code, third.code) == ("compiled", "disk", "compiled")
    x = np.arange(3, dtype=np.float32)
    for p in (first, second, third):
        np.testing.assert_allclose(p(x)[0], np.sin(x) + np.float32(offset), rtol=1e-6)


OPTAX_STEPS = """
import json, numpy as np, ember
ember.install_as_jax()
import jax, jax.numpy as jnp, optax

def losses(backend):
    ember.config.update("backend", backend)
    rng = np.random.default_rng(0)
    w = {"a": jnp.asarray(rng.standard_normal((5, 3)).astype(np.float32)), "b": jnp.zeros(3)}
    x, y = rng.standard_normal((16, 5)).astype(np.float32), rng.standard_normal((16, 3)).astype(np.float32)
    opt = optax.adam(1e-2)
    state = opt.init(w)

    @jax.jit
    def step(w, state):
        loss, g = jax.value_and_grad(lambda w: jnp.mean((jnp.tanh(x @ w["a"] + w["b"]) - y) ** 2))(w)
        updates, state = opt.update(g, state, w)
        return optax.apply_updates(w, updates), state, loss

    out = []
    for _ in range(5):
        w, state, loss = step(w, state)
        out.append(float(loss))
    return out

print(json.dumps([losses("xla_cpu"), losses("cpu")]))
"""


def test_an_optax_training_step_runs_on_the_plugin_with_the_cpu_backends_losses():
    out = subprocess.run([sys.executable, "-c", OPTAX_STEPS], capture_output=True, text=True, timeout=600,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-3000:]
    on_plugin, on_cpu = json.loads(out.stdout.splitlines()[-1])
    np.testing.assert_allclose(on_plugin, on_cpu, rtol=1e-5)
    assert on_plugin[-1] < on_plugin[0]


def test_repeated_calls_take_the_hit_path_with_device_buffers(on_xla_cpu):
    f = ember.jit(lambda x, y: (x * y, {"s": jnp.sum(x)}))
    x = ember.jit(lambda a: a + 0.0)(np.arange(6, dtype=np.float32))
    y = jnp.asarray(np.full(6, 2.0, np.float32))  # a host Array: put on the device for each call
    for _ in range(3):
        p, d = f(x, y)
    assert f._cache.hits >= 2
    assert isinstance(p.device_buffer, Buffer) and isinstance(d["s"].device_buffer, Buffer)
    np.testing.assert_array_equal(np.asarray(p), np.arange(6) * 2.0)
    assert float(d["s"]) == 15.0
    x.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        f(x, y)


def test_top_level_host_callbacks_run_between_device_programs(on_xla_cpu, capsys):
    seen = []

    def f(x):
        y = jnp.sin(x) * 2
        ember.debug.print("y = {}", y[0])
        z = ember.pure_callback(lambda a: np.cumsum(np.asarray(a)), ember.ShapeDtypeStruct(x.shape, x.dtype), y)
        io_callback(lambda a: seen.append(float(a)), None, jnp.sum(z))
        return z + 1, x

    x = np.linspace(0, 1, 4, dtype=np.float32)
    compiled = ember.jit(f)
    z, same = compiled(x)
    np.testing.assert_allclose(np.asarray(z), np.cumsum(np.sin(x) * 2) + 1, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(same), x)
    assert "y = 0.0" in capsys.readouterr().out
    assert seen == [pytest.approx(float(np.sum(np.cumsum(np.sin(x) * 2))), rel=1e-6)]
    text = compiled.lower(x).compile().as_text("stablehlo")
    assert text.count("func.func public @main") == 3  # (before the print, the sum, z + 1)


def test_callbacks_inside_loops_branches_and_calls_run_on_the_host(on_xla_cpu, capsys):
    def f(x):
        seen = []

        def body(c, row):
            ember.debug.print("row {}", row[0])
            y = ember.pure_callback(lambda a: np.cumsum(np.asarray(a)), ember.ShapeDtypeStruct(row.shape, row.dtype),
                                    row * c)
            return c + 1.0, y.sum()

        carry, ys = lax.scan(body, jnp.float32(1.0), x)
        count = lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, ember.pure_callback(
            lambda a: np.float32(a * 2), ember.ShapeDtypeStruct((), np.float32), c[1])), (0, carry))[1]
        branch = lax.cond(x[0, 0] > 0, lambda v: ember.pure_callback(np.negative, ember.ShapeDtypeStruct(
            v.shape, v.dtype), v), lambda v: v * 3, x[1])
        inner = ember.jit(lambda v: ember.pure_callback(np.exp, ember.ShapeDtypeStruct(v.shape, v.dtype), v) + 1)(x[0])
        return ys, count, branch, inner, seen

    x = np.arange(1, 7, dtype=np.float32).reshape(3, 2)
    got = ember.jit(lambda x: f(x)[:4])(x)
    assert all(isinstance(g, ember.Array) for g in got)
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("row")] == \
        ["row 1.0", "row 3.0", "row 5.0"]
    ember.config.update("backend", "cpu")
    want = ember.jit(lambda x: f(x)[:4])(x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(got[0]), [1 + 3, 6 + 14, 15 + 33])  # (cumsum of row * step, summed)


def test_pmap_and_shard_map_over_the_plugins_one_device(on_xla_cpu):
    from ember.sharding import Mesh, PartitionSpec as P

    def collectives(x):
        return (lax.psum(x, "i") * 2, lax.pmax(x, "i"), lax.all_gather(x, "i"), lax.axis_index("i") + x,
                lax.pmean(x, "i"), lax.psum_scatter(x, "i", tiled=True), lax.ppermute(x, "i", [(0, 0)]))

    x = np.arange(6, dtype=np.float32).reshape(1, 6)
    mesh = Mesh(np.array(ember.devices()[:1]), ("i",))
    sharded = ember.shard_map(collectives, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
    got = [*ember.pmap(collectives, "i")(x), *sharded(x[0])]
    assert registry.get().name == "xla_cpu"
    ember.config.update("backend", "cpu")
    cpu_mesh = Mesh(np.array(ember.devices()[:1]), ("i",))
    want = [*ember.pmap(collectives, "i", devices=ember.devices()[:1])(x),
            *ember.shard_map(collectives, mesh=cpu_mesh, in_specs=P("i"), out_specs=P("i"))(x[0])]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_a_plugin_that_does_not_load_is_passed_over_with_a_warning(tmp_path):
    broken = tmp_path / "libtpu.so"
    broken.write_bytes(b"not a library")
    env = dict(os.environ, EMBER_PJRT_PLUGIN=f"tpu:{broken}")
    env.pop("EMBER_PLATFORMS", None)
    env.pop("EMBER_BACKEND", None)
    program = ("import warnings, ember, numpy as np; from ember.backends import registry\n"
               "with warnings.catch_warnings(record=True) as w:\n"
               "    warnings.simplefilter('always')\n"
               "    y = ember.jit(lambda x: x + 1)(np.ones(2, np.float32))\n"
               "print(registry.get().name, float(y[0]), any('passed over' in str(m.message) for m in w))")
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cpu", "2.0", "True"]
