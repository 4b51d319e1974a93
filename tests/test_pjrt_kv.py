"""The key-value store of a PJRT backend's run over several processes (``ember.backends.pjrt.kv``):
the server and its clients, the C callbacks a plugin calls (through ctypes, as a plugin's thread
would), and a client created with them."""
from __future__ import annotations

import ctypes as C
import threading
import time

import pytest

from ember.backends.pjrt import kv


@pytest.fixture
def store():
    server = kv.KeyValueServer("127.0.0.1")
    yield server
    server.close()


def test_put_then_get_and_a_get_that_waits_for_another_process(store):
    a, b = kv.KeyValueClient(store.address), kv.KeyValueClient(store.address)
    a.put(b"local_topology/tpu/0", b"\x00\x01topology")
    assert b.get(b"local_topology/tpu/0", 1000) == b"\x00\x01topology"
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(b.get(b"global_topology/tpu", 20000)))
    waiter.start()
    time.sleep(0.05)
    a.put(b"global_topology/tpu", b"all of it")
    waiter.join(30)
    assert got == [b"all of it"]
    assert a.get(b"never/put", 50) is None


def _callback_error(seen: list):
    @C.CFUNCTYPE(C.c_void_p, C.c_int, C.c_char_p, C.c_size_t)
    def error(code, message, size):
        seen.append((code, C.string_at(message, size).decode()))
        return 4242  # (a plugin returns its PJRT_Error*)
    return error


def test_the_plugin_callbacks_put_get_and_report_a_missing_key(store):
    callbacks = kv.PluginCallbacks(kv.KeyValueClient(store.address))
    get_address, put_address = callbacks.addresses()
    put, get = kv.PutCallback(put_address), kv.GetCallback(get_address)
    seen: list = []
    error = _callback_error(seen)
    key, value = b"local_topology/tpu/1", b"bytes\x00with a zero"
    key_buffer, value_buffer = C.create_string_buffer(key), C.create_string_buffer(value, len(value))
    put_args = kv.PutArgs(struct_size=C.sizeof(kv.PutArgs), key=C.addressof(key_buffer), key_size=len(key),
                          value=C.addressof(value_buffer), value_size=len(value),
                          callback_error=C.cast(error, C.c_void_p).value)
    assert not put(C.pointer(put_args))
    get_args = kv.GetArgs(struct_size=C.sizeof(kv.GetArgs), key=C.addressof(key_buffer), key_size=len(key),
                          timeout_in_ms=1000, callback_error=C.cast(error, C.c_void_p).value)
    assert not get(C.pointer(get_args))
    assert C.string_at(get_args.value, get_args.value_size) == value
    assert callbacks.handed  # (held until the plugin deletes it)
    C.CFUNCTYPE(None, C.c_void_p)(get_args.value_deleter_callback)(get_args.value)
    assert not callbacks.handed
    missing = C.create_string_buffer(b"nobody/put/this")
    get_args = kv.GetArgs(struct_size=C.sizeof(kv.GetArgs), key=C.addressof(missing), key_size=15,
                          timeout_in_ms=30, callback_error=C.cast(error, C.c_void_p).value)
    assert get(C.pointer(get_args)) == 4242
    assert seen == [(5, "ember's key-value store has no key b'nobody/put/this' after 30 ms")]


def test_a_client_is_created_with_the_stores_callbacks(store):
    lammps_jax_pjrt_cpu = pytest.importorskip("lammps_jax_pjrt_cpu")
    from ember.backends.pjrt.binding import Client, load_plugin

    callbacks = kv.PluginCallbacks(kv.KeyValueClient(store.address))
    client = Client(load_plugin(lammps_jax_pjrt_cpu.PLUGIN_PATH), {"cpu_device_count": 2}, backend="test", kv=callbacks)
    assert client.kv is callbacks and [d.id for d in client.all_devices] == [0, 1]
    assert [d.process_index for d in client.all_devices] == [0, 0]


def test_joining_a_run_gives_the_plugin_its_node_and_refuses_an_open_client(store):
    from ember.backends.pjrt import clients

    before = (clients._run.node_id, clients._run.num_nodes, clients._run.kv)
    callbacks = kv.PluginCallbacks(kv.KeyValueClient(store.address))
    try:
        clients.join_run("accelerator-under-test", 1, 4, callbacks)
        assert clients.client_options("accelerator-under-test") == {"node_id": 1, "num_nodes": 4}
        clients._clients["already-open"] = object()  # type: ignore[assignment]
        with pytest.raises(RuntimeError, match="must be called before any computation on the backend 'already-open'"):
            clients.join_run("already-open", 1, 4, callbacks)
    finally:
        clients._clients.pop("already-open", None)
        clients._run.node_id, clients._run.num_nodes, clients._run.kv = before
