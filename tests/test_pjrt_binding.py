"""ember's PJRT binding on XLA's CPU plugin (the lammps-jax-pjrt-cpu wheel of the test extra):
loading and version checks, buffers of every dtype there and back, layouts, errors carrying
XLA's message, argument checks before executing, asynchronous execution, donation, destruction
of what the binding creates, and plugin discovery."""
from __future__ import annotations

import gc
import os
import weakref

import ml_dtypes
import numpy as np
import pytest

from ember.backends.pjrt import binding, discovery, program as pjrt
from ember.backends.pjrt.lowering import element_type

lammps_jax_pjrt_cpu = pytest.importorskip(
    "lammps_jax_pjrt_cpu", reason="XLA's CPU PJRT plugin is not installed (pip install ember[pjrt-cpu])")


@pytest.fixture(scope="module")
def client():
    return pjrt.client("xla_cpu")


def _identity(shape, dtype):
    t = "tensor<" + "".join(f"{n}x" for n in shape) + binding_type(dtype) + ">"
    return f"func.func public @main(%x: {t}) -> {t} {{\n  return %x : {t}\n}}\n"


def binding_type(dtype):
    return element_type(np.dtype(dtype))


def test_the_plugin_loads_with_its_version_and_attributes(client):
    plugin = client.plugin
    assert plugin.version >= binding.MIN_VERSION
    assert plugin.num_slots >= max(binding.SLOT[n] for n in binding._USED) + 1
    assert "stablehlo_current_version" in plugin.attributes
    assert client.platform == "cpu" and client.devices and client.devices[0].platform == "cpu"
    assert binding.load_plugin(plugin.path) is plugin  # one per process


def _bits(a):
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.itemsize in (1, 2, 4, 8) else a.view(np.uint8)


@pytest.mark.parametrize("dtype", list(binding.BUFFER_TYPES), ids=str)
def test_every_dtype_goes_to_the_device_and_back_bit_for_bit(client, dtype):
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=(3, 5, dtype.itemsize), dtype=np.uint8)
    if dtype == np.bool_:
        raw = raw % 2
    x = raw.view(dtype).reshape(3, 5)
    buffer = client.buffer_from_host(x)
    assert buffer.shape == (3, 5) and buffer.dtype == dtype
    np.testing.assert_array_equal(_bits(buffer.to_host()), _bits(x))
    exe = client.compile(_identity((3, 5), dtype), in_types=[((3, 5), dtype)])
    [out] = exe(x)
    assert out.dtype == dtype and out.shape == (3, 5)
    np.testing.assert_array_equal(_bits(out), _bits(x))


def test_a_read_only_host_array_is_used_in_place_and_held(client):
    x = np.arange(64, dtype=np.float32)
    x.flags.writeable = False
    buffer = client.buffer_from_host(x)
    assert buffer._host is x or buffer._host is None  # (in place when aligned: the buffer holds the array)
    exe = client.compile(_identity((64,), np.float32), in_types=[((64,), np.float32)])
    del x
    gc.collect()
    [out] = exe.execute([buffer])
    np.testing.assert_array_equal(out.to_host(), np.arange(64, dtype=np.float32))


def test_an_accelerators_copy_from_the_host_runs_behind_the_call_and_holds_the_array(client, monkeypatch):
    # an accelerator's client copies a read-only array behind the call (the array held until the
    # copy's event fires); the CPU plugin takes the same semantics when told, so the path runs here
    monkeypatch.setattr(client, "read_only_transfer", binding.IMMUTABLE_UNTIL_TRANSFER_COMPLETES)
    exe = client.compile(_identity((4096,), np.float32), in_types=[((4096,), np.float32)])
    for k in range(6):
        x = np.arange(4096, dtype=np.float32) + k
        x.flags.writeable = False
        buffer = client.buffer_from_host(x)
        assert buffer._host is None and (not buffer._transfer or buffer._transfer[1] is x)
        del x  # (freed here unless the buffer holds it: no cycle, so no gc.collect, slow in a full run)
        [out] = exe.execute([buffer])
        np.testing.assert_array_equal(out.to_host(), np.arange(4096, dtype=np.float32) + k)
        if k % 2:
            buffer.block_until_ready()
            assert buffer._transfer == [] and buffer.is_ready()
        del buffer  # (the other half: waited for when the buffer goes)
    writable = np.ones(8, np.float32)  # a writable array is copied during the call: nothing held
    assert client.buffer_from_host(writable)._transfer == []
    frozen = np.ones(8, np.float32)  # a borrowed one too, even when read-only
    frozen.flags.writeable = False
    borrowed = client.buffer_from_host(frozen, borrowed=True)
    assert borrowed._transfer == [] and borrowed._host is None


def test_the_array_of_a_copy_behind_the_call_outlives_the_wait_for_it(client, monkeypatch):
    # the plugin reads the array until the copy's event fires: it is let go only after the wait
    # (a TPU's copy crashed reading a freed array when it was let go first)
    import weakref

    monkeypatch.setattr(client, "read_only_transfer", binding.IMMUTABLE_UNTIL_TRANSFER_COMPLETES)
    alive_while_waiting = []
    real_wait = client.plugin.await_event
    monkeypatch.setattr(client.plugin, "await_event", lambda event: (
        alive_while_waiting.append(held() is not None), real_wait(event))[1])
    for wait in (True, False):  # block_until_ready, or the buffer's finalizer
        x = np.arange(4096, dtype=np.float32)
        x.flags.writeable = False
        held = weakref.ref(x)
        buffer = client.buffer_from_host(x)
        del x
        if not buffer._transfer:  # (the plugin gave no event to wait for)
            continue
        alive_while_waiting.clear()
        if wait:
            buffer.block_until_ready()
        else:
            del buffer
        gc.collect()
        assert alive_while_waiting == [True] and held() is None


def test_a_borrowed_read_only_array_is_copied_even_where_the_plugin_could_use_it_in_place(client):
    x = np.arange(64, dtype=np.float32)  # (aligned: the CPU plugin would use it in place)
    x.flags.writeable = False
    assert client.buffer_from_host(x)._host is x
    borrowed = client.buffer_from_host(x, borrowed=True)
    assert borrowed._host is None
    x.flags.writeable = True
    x[:] = -1  # the caller changes its array: the buffer keeps what it was given
    np.testing.assert_array_equal(borrowed.to_host(), np.arange(64, dtype=np.float32))


def test_a_strided_array_is_copied_once_and_the_copy_used_as_a_read_only_one(client):
    # (the C-ordered copy is the binding's own: a host plugin uses it in place, an accelerator
    # copies it behind the call; a borrowed strided array too, since the copy is not the caller's)
    for borrowed in (False, True):
        x = np.arange(12, dtype=np.float32).reshape(3, 4).T  # (writable, not C-ordered)
        buffer = client.buffer_from_host(x, borrowed=borrowed)
        assert buffer._host is not None and buffer._host is not x and not buffer._host.flags.writeable
        x[:] = -1
        np.testing.assert_array_equal(buffer.to_host(), np.arange(12, dtype=np.float32).reshape(3, 4).T)


def test_an_execution_holds_its_executable_until_it_completes(client):
    # (the plugin frees an executable's code when it is destroyed: a host plugin's thread still
    # running it then crashed the interpreter, when every output had been dropped first)
    import weakref

    for wait in (True, False):
        exe = client.compile(_identity((256,), np.float32), in_types=[((256,), np.float32)])
        [out] = exe.execute([client.buffer_from_host(np.ones(256, np.float32))])
        held = weakref.ref(exe)
        del exe
        if out._pending is None:  # (the plugin gave no completion event: it ran during the call)
            pytest.skip("this plugin's execution completed within the call")
        assert held() is not None  # (held by the outputs' completion)
        if wait:
            out.block_until_ready()  # (let go once it completed)
        else:
            del out  # (an unwaited completion waits as it goes, then lets go)
        assert held() is None


def test_scalars_strided_input_and_row_major_results(client):
    exe = client.compile("func.func public @main(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {\n"
                         '  %0 = "stablehlo.transpose"(%x) <{permutation = array<i64: 1, 0>}> : '
                         "(tensor<2x3xf32>) -> tensor<3x2xf32>\n  return %0 : tensor<3x2xf32>\n}\n",
                         in_types=[((2, 3), np.float32)])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[::2, :3].T.T  # a strided view
    [out] = exe(x[:, :3] if x.shape == (2, 3) else x)
    np.testing.assert_array_equal(out, np.ascontiguousarray(x).T)
    assert out.flags.c_contiguous
    [s] = client.compile(_identity((), np.float64), in_types=[((), np.float64)])(np.float64(2.5))
    assert s.shape == () and s == 2.5


def test_errors_carry_xlas_message(client):
    with pytest.raises(binding.PjrtError, match="custom op 'nonsense'") as info:
        client.compile("nonsense")
    assert info.value.function == "Client_Compile" and info.value.code in binding.ERROR_CODES
    with pytest.raises(binding.PjrtError, match=r"@main|main"):
        client.compile("func.func public @other(%x: tensor<f32>) -> tensor<f32> {\n  return %x : tensor<f32>\n}\n")
    assert isinstance(info.value, RuntimeError)  # (JaxRuntimeError, as JAX's XlaRuntimeError)


def test_arguments_are_checked_before_executing(client):
    exe = client.compile(_identity((8,), np.float32), in_types=[((8,), np.float32)])
    with pytest.raises(TypeError, match=r"argument 0 is float32\[4\]; the program's parameter 0 is float32\[8\]"):
        exe.execute([client.buffer_from_host(np.zeros(4, np.float32))])
    with pytest.raises(TypeError, match=r"argument 0 is int32\[8\]"):
        exe.execute([client.buffer_from_host(np.zeros(8, np.int32))])
    with pytest.raises(TypeError, match="takes 1 arguments, got 2"):
        exe.execute([client.buffer_from_host(np.zeros(8, np.float32))] * 2)
    with pytest.raises(TypeError, match="PJRT has no buffer type for dtype"):
        client.buffer_from_host(np.zeros(2, ml_dtypes.int4))


def test_execution_is_asynchronous_and_waits_on_its_event(client):
    exe = client.compile(_identity((4,), np.float32), in_types=[((4,), np.float32)])
    [out] = exe.execute([client.buffer_from_host(np.arange(4, dtype=np.float32))])
    out.block_until_ready()
    assert out.is_ready()
    np.testing.assert_array_equal(out.to_host(), np.arange(4, dtype=np.float32))


def test_donated_arguments_are_given_up(client):
    t = "tensor<4xf32>"
    exe = client.compile(f"func.func public @main(%x: {t} {{tf.aliasing_output = 0 : i32}}) -> {t} {{\n"
                         f'  %0 = "stablehlo.add"(%x, %x) : ({t}, {t}) -> {t}\n  return %0 : {t}\n}}\n',
                         in_types=[((4,), np.float32)])
    kept = client.buffer_from_host(np.ones(4, np.float32))
    [out] = exe.execute([kept])
    np.testing.assert_array_equal(out.to_host(), 2 * np.ones(4))
    np.testing.assert_array_equal(kept.to_host(), np.ones(4))  # not donated: still readable
    given = client.buffer_from_host(np.ones(4, np.float32))
    [out] = exe.execute([given], donated=frozenset({0}))
    np.testing.assert_array_equal(out.to_host(), 2 * np.ones(4))
    assert given.deleted
    with pytest.raises(RuntimeError, match="was deleted"):
        given.to_host()
    with pytest.raises(RuntimeError, match="deleted or donated"):
        exe.execute([given])


def test_what_the_binding_creates_is_destroyed_with_it(client):
    exe = client.compile(_identity((2,), np.float32), in_types=[((2,), np.float32)])
    b = client.buffer_from_host(np.ones(2, np.float32))
    [out] = exe.execute([b])
    finalizers = [b._finalizer, out._finalizer, exe._finalizer]
    assert all(f.alive for f in finalizers)
    ref = weakref.ref(exe)
    del b, out, exe
    gc.collect()
    assert ref() is None and not any(f.alive for f in finalizers)


def test_many_round_trips_leave_no_python_objects_behind(client):
    exe = client.compile(_identity((8,), np.float32), in_types=[((8,), np.float32)])
    x = np.arange(8, dtype=np.float32)

    def trips(n):
        for _ in range(n):
            [out] = exe.execute([client.buffer_from_host(x)])
            out.to_host()

    trips(200)
    gc.collect()
    before = len(gc.get_objects())
    trips(3000)
    gc.collect()
    assert len(gc.get_objects()) - before < 50


def test_call_overhead_is_measured(client):
    costs = binding.call_overhead(client, repeats=50)
    assert set(costs) == {"to_device", "execute", "to_host"} and all(v > 0 for v in costs.values())


def test_a_library_that_is_not_a_plugin_is_refused(tmp_path):
    with pytest.raises(binding.PjrtError, match="cannot load the PJRT plugin"):
        binding.Plugin(str(tmp_path / "missing.so"))
    import ctypes.util

    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm to load as a library without GetPjrtApi")
    path = next((os.path.join(d, libm) for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64")
                 if os.path.exists(os.path.join(d, libm))), libm)
    with pytest.raises(binding.PjrtError, match="has no GetPjrtApi symbol"):
        binding.Plugin(path)


def test_compile_options_encode_replicas_and_partitions():
    assert binding.compile_options() == bytes([0x1A, 0x04, 0x20, 0x01, 0x28, 0x01])
    assert binding.compile_options(300, 1) == bytes([0x1A, 0x05, 0x20, 0xAC, 0x02, 0x28, 0x01])
    flag = binding.compile_options(overrides={"f": False})[6:]
    assert flag == bytes([0x3A, 0x07, 0x0A, 0x01, ord("f"), 0x12, 0x02, 0x10, 0x00])


def test_discovery_reads_the_environment_and_the_packages(tmp_path):
    lib = tmp_path / "libtpu.so"
    lib.write_bytes(b"")
    other = tmp_path / "my_plugin.so"
    other.write_bytes(b"")
    found = discovery.find_plugins({"EMBER_PJRT_PLUGIN": f"{lib},gpu:{other}"})
    assert found["tpu"] == discovery.PluginSpec("tpu", str(lib), "EMBER_PJRT_PLUGIN")
    assert found["gpu"].path == str(other) and found["gpu"].accelerator
    found = discovery.find_plugins({"PJRT_NAMES_AND_LIBRARY_PATHS": f"tpu:{tmp_path / 'absent.so'}",
                                    "TPU_LIBRARY_PATH": str(lib)})
    assert found["tpu"].source == "TPU_LIBRARY_PATH"
    cpu = discovery.find_plugins({})["xla_cpu"]
    assert cpu.path == str(lammps_jax_pjrt_cpu.PLUGIN_PATH) and not cpu.accelerator


def test_an_unknown_backend_name_says_how_to_install_a_plugin():
    with pytest.raises(binding.PjrtError, match=r"no PJRT plugin for the backend 'tpu'.*ember\[tpu\]"):
        pjrt.client("tpu")
