"""The key-value store a PJRT plugin's processes meet through (``PJRT_Client_Create``'s
``kv_get_callback`` / ``kv_put_callback``): a multi-host client puts its process's topology under
a key and reads the others' (``local_topology/<platform>/<node>``, ``global_topology/<platform>``),
at any time, from the plugin's own threads. So the store is a small TCP server that process 0 of
the run serves from a thread (``KeyValueServer``); every process, process 0 included, reaches it
with a ``KeyValueClient``; ``ember.distributed.initialize`` sends its address over MPI.

The protocol: a request is ``op (1 byte) | key length (4) | key | payload length (4) | payload``,
``op`` ``P`` (put: the payload is the value) or ``G`` (get: the payload is the timeout in
milliseconds, 8 bytes); a reply is ``status (1 byte: 0 found / stored, 1 not found in time) |
value length (4) | value``. A get waits for the key until its timeout.
"""
from __future__ import annotations

import ctypes as C
import socket
import struct
import threading
from typing import Any

_OK, _MISSING = 0, 1


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the key-value store's connection closed")
        data += chunk
    return bytes(data)


def _message(sock: socket.socket) -> bytes:
    (size,) = struct.unpack("!I", _read(sock, 4))
    return _read(sock, size)


def _framed(data: bytes) -> bytes:
    return struct.pack("!I", len(data)) + data


class KeyValueServer:
    """The store, served on ``host`` (an ephemeral port) by a daemon thread per connection."""

    def __init__(self, host: str = "") -> None:
        self.values: dict[bytes, bytes] = {}
        self.changed = threading.Condition()
        self.sock = socket.create_server((host, 0))
        self.address = (host or socket.gethostname(), self.sock.getsockname()[1])
        self.closed = False
        threading.Thread(target=self._accept, name="ember-kv-server", daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # (closed)
                return
            threading.Thread(target=self._serve, args=(conn,), name="ember-kv-connection", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                while True:
                    op = _read(conn, 1)
                    key = _message(conn)
                    payload = _message(conn)
                    if op == b"P":
                        with self.changed:
                            self.values[key] = payload
                            self.changed.notify_all()
                        conn.sendall(bytes([_OK]) + _framed(b""))
                        continue
                    (timeout_ms,) = struct.unpack("!q", payload)
                    with self.changed:
                        found = self.changed.wait_for(lambda: key in self.values, max(0.0, timeout_ms / 1000))
                        value = self.values.get(key, b"")
                    conn.sendall(bytes([_OK if found else _MISSING]) + _framed(value))
            except (ConnectionError, OSError):  # (the client went away)
                return

    def close(self) -> None:
        self.closed = True
        self.sock.close()


class KeyValueClient:
    """One process's connection to the store; thread-safe (one request at a time)."""

    def __init__(self, address: tuple[str, int], timeout: float = 60.0) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.settimeout(None)
        self.lock = threading.Lock()

    def put(self, key: bytes, value: bytes) -> None:
        with self.lock:
            self.sock.sendall(b"P" + _framed(key) + _framed(value))
            _read(self.sock, 1)
            _message(self.sock)

    def get(self, key: bytes, timeout_ms: int) -> bytes | None:
        """The value of ``key``, waiting up to ``timeout_ms`` for it; None if it never came."""
        with self.lock:
            self.sock.sendall(b"G" + _framed(key) + _framed(struct.pack("!q", int(timeout_ms))))
            status = _read(self.sock, 1)[0]
            value = _message(self.sock)
        return value if status == _OK else None

    def close(self) -> None:
        self.sock.close()


# --- the C callbacks a plugin calls -------------------------------------------------------------------------
_vp, _sz = C.c_void_p, C.c_size_t
_CallbackError = C.CFUNCTYPE(_vp, C.c_int, C.c_char_p, _sz)  # (code, message, size) -> PJRT_Error*
_Deleter = C.CFUNCTYPE(None, _vp)


class GetArgs(C.Structure):
    _fields_ = [("struct_size", _sz), ("extension_start", _vp), ("key", _vp), ("key_size", _sz),
                ("timeout_in_ms", C.c_int), ("callback_error", _vp), ("user_arg", _vp), ("value", _vp),
                ("value_size", _sz), ("value_deleter_callback", _vp)]


class PutArgs(C.Structure):
    _fields_ = [("struct_size", _sz), ("extension_start", _vp), ("key", _vp), ("key_size", _sz),
                ("value", _vp), ("value_size", _sz), ("callback_error", _vp), ("user_arg", _vp)]


GetCallback = C.CFUNCTYPE(_vp, C.POINTER(GetArgs))
PutCallback = C.CFUNCTYPE(_vp, C.POINTER(PutArgs))
_NOT_FOUND, _INTERNAL = 5, 13  # (PJRT_Error_Code)


class PluginCallbacks:
    """``kv_get_callback`` and ``kv_put_callback`` over ``store`` (a ``KeyValueClient``), as C
    function pointers for ``PJRT_Client_Create``. A value handed to the plugin stays alive until
    the plugin calls its deleter; errors come back through the plugin's ``callback_error``."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.handed: dict[int, Any] = {}  # address -> buffer, until the plugin deletes it
        self.lock = threading.Lock()
        self.deleter = _Deleter(self._delete)
        self.get = GetCallback(self._get)
        self.put = PutCallback(self._put)

    def _delete(self, address: int) -> None:
        with self.lock:
            self.handed.pop(address, None)

    @staticmethod
    def _error(callback_error: int, code: int, text: str) -> int:
        message = text.encode()
        return _CallbackError(callback_error)(code, message, len(message)) or 0

    def _get(self, args: Any) -> int:
        a = args.contents
        key = C.string_at(a.key, a.key_size)
        try:
            value = self.store.get(key, a.timeout_in_ms)
        except Exception as e:  # noqa: BLE001  (the plugin's thread gets the error, not an exception)
            return self._error(a.callback_error, _INTERNAL, f"ember's key-value store failed on get {key!r}: {e}")
        if value is None:
            return self._error(a.callback_error, _NOT_FOUND,
                               f"ember's key-value store has no key {key!r} after {a.timeout_in_ms} ms")
        buffer = C.create_string_buffer(value, len(value))
        address = C.addressof(buffer)
        with self.lock:
            self.handed[address] = buffer
        a.value, a.value_size = address, len(value)
        a.value_deleter_callback = C.cast(self.deleter, _vp).value
        return 0

    def _put(self, args: Any) -> int:
        a = args.contents
        key = C.string_at(a.key, a.key_size)
        try:
            self.store.put(key, C.string_at(a.value, a.value_size))
        except Exception as e:  # noqa: BLE001
            return self._error(a.callback_error, _INTERNAL, f"ember's key-value store failed on put {key!r}: {e}")
        return 0

    def addresses(self) -> tuple[int, int]:
        """(get, put) as addresses for ``PJRT_Client_Create_Args``."""
        return C.cast(self.get, _vp).value or 0, C.cast(self.put, _vp).value or 0
