"""The seam between the runtime and its backends (``ember.backends.protocols``, ``registry``).

A toy backend, written here against the protocols alone, runs the reference interpreter on
buffers of its own class: its memory is "elsewhere", so the host sees a value only through a
transfer (``ToyBuffer.to_host``, counted). jit, grad, ``device_put`` both ways and calls with
arguments on different backends run through it, and every answer is checked against NumPy.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends import registry
from ember.backends.protocols import Backend, CompileOptions, Executable, device_arguments, device_outputs
from ember.core.array import Array
from ember.core.evaluation import eval_jaxpr, to_numpy
from ember.core.ir import ClosedJaxpr
from ember.lax.control_flow import while_p

TO_HOST: list[tuple] = []  # one entry per copy of a toy buffer to the host
DELETED: list[int] = []


class ToyDevice:
    platform = "toy"
    device_kind = "toy"
    id = 0

    def __repr__(self) -> str:
        return "ToyDevice(id=0)"


class ToyBuffer:
    backend = "toy"

    def __init__(self, data: np.ndarray, device: ToyDevice) -> None:
        self.data = np.array(data)  # (its own copy: "device memory")
        self.device = device

    def to_host(self) -> np.ndarray:
        TO_HOST.append(self.data.shape)
        return self.data.copy()

    def delete(self) -> None:
        DELETED.append(id(self))
        self.data = None

    @property
    def deleted(self) -> bool:
        return self.data is None

    def block_until_ready(self) -> None:
        pass


class ToyExecutable(Executable):
    code = "none"

    def __init__(self, closed: ClosedJaxpr, backend: "ToyBackend", name: str) -> None:
        self.closed, self.backend, self.name = closed, backend, name
        self.in_avals, self.out_avals = closed.in_avals, closed.out_avals
        self.consts = [to_numpy(c, v.aval) for c, v in zip(closed.consts, closed.jaxpr.constvars)]
        self.calls = 0

    def __call__(self, *args):
        self.calls += 1
        buffers = device_arguments(self.backend, args, self.in_avals)
        assert all(type(b) is ToyBuffer for b in buffers)
        outs = eval_jaxpr(self.closed.jaxpr, self.consts, *[b.data for b in buffers])
        device = self.backend.devices()[0]
        return device_outputs(self.name, [ToyBuffer(o, device) for o in outs], self.out_avals)


class ToyBackend(Backend):
    name = "toy"
    platform = "toy"
    host_buffers = False

    def __init__(self, priority: int = -10, available: bool = True) -> None:
        self.priority, self.available = priority, available
        self.device = ToyDevice()
        self.compiled: list[ToyExecutable] = []
        self.puts: list[tuple] = []  # one entry per copy of host data to the toy

    def is_available(self) -> bool:
        return self.available

    def devices(self) -> list:
        return [self.device]

    def compile(self, closed: ClosedJaxpr, options: CompileOptions) -> ToyExecutable:
        executable = ToyExecutable(closed, self, options.name)
        self.compiled.append(executable)
        return executable

    def cannot_run(self, closed: ClosedJaxpr) -> str | None:
        if any(e.primitive is while_p for e in closed.jaxpr.eqns):
            return "the toy has no loops"
        return None

    def put(self, value: np.ndarray, device: ToyDevice, *, borrowed: bool = False) -> ToyBuffer:
        assert device is self.device
        self.puts.append(value.shape)
        return ToyBuffer(value.copy() if borrowed else value, device)


@pytest.fixture
def toy():
    backend = registry.register(ToyBackend())
    TO_HOST.clear()
    try:
        yield backend
    finally:
        registry.unregister("toy")


def f(x, y):
    return jnp.sin(x) * y + 2.0


def test_jit_runs_on_the_toy_and_the_host_sees_values_only_through_a_transfer(toy):
    x, y = np.linspace(-1, 1, 6, dtype=np.float32), np.arange(6, dtype=np.float32)
    with ember.config.override(backend="toy"):
        jf = ember.jit(f)
        out = jf(x, y)
        again = jf(jnp.asarray(x), y)  # a hit: the same executable
    assert len(toy.compiled) == 1 and toy.compiled[0].calls == 2
    assert type(out) is Array and type(out.device_buffer) is ToyBuffer
    assert out.platform() == "toy" and out.device is toy.device and out.devices() == {toy.device}
    assert TO_HOST == []  # nothing read on the host yet
    np.testing.assert_allclose(np.asarray(out), np.sin(x) * y + 2.0, rtol=1e-6)
    assert TO_HOST == [(6,)]
    np.testing.assert_allclose(np.asarray(out), np.asarray(again))  # copied once, then kept
    assert TO_HOST == [(6,), (6,)]
    assert float(out[1]) == pytest.approx(np.sin(x[1]) * y[1] + 2.0, rel=1e-6)  # eager ops read the host copy
    assert "Array([" in repr(again) and len(TO_HOST) == 2


def test_grad_runs_on_the_toy(toy):
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    with ember.config.override(backend="toy"):
        g = ember.jit(ember.grad(lambda v: jnp.sum(jnp.tanh(v) * v)))(x)
        value, vg = ember.jit(ember.value_and_grad(lambda v: jnp.sum(v ** 3)))(x)
    assert {type(a.device_buffer) for a in (g, value, vg)} == {ToyBuffer}
    t = np.tanh(x)
    np.testing.assert_allclose(np.asarray(g), (1 - t ** 2) * x + t, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(vg), 3 * x ** 2, rtol=1e-6)
    np.testing.assert_allclose(float(value), np.sum(x ** 3), rtol=1e-5)


def test_device_put_to_the_toy_and_back(toy):
    x = jnp.arange(4.0)
    assert ember.devices("toy") == [toy.device]
    on_toy = ember.device_put(x, toy.device)
    assert type(on_toy.device_buffer) is ToyBuffer and TO_HOST == []
    assert ember.device_put(on_toy, toy.device) is on_toy  # already there: no copy
    back = ember.device_put(on_toy, ember.devices("cpu")[0])
    assert back.device_buffer is None and back.platform() == "cpu" and TO_HOST == [(4,)]
    np.testing.assert_array_equal(np.asarray(back), [0.0, 1.0, 2.0, 3.0])
    single = ember.device_put(x, ember.sharding.SingleDeviceSharding(toy.device))  # (a sharding of its one device)
    assert type(single.device_buffer) is ToyBuffer and single.sharding.device_set == {toy.device}
    # pytrees and scalars go too
    tree = ember.device_put({"a": np.ones(2, np.float32), "b": 3.0}, toy.device)
    assert all(type(v.device_buffer) is ToyBuffer for v in tree.values())
    np.testing.assert_array_equal(ember.device_get(tree)["a"], [1.0, 1.0])


def test_arguments_on_another_backend_are_transferred(toy):
    x, y = np.linspace(0, 1, 3, dtype=np.float32), np.float32([1.0, 2.0, 4.0])
    expected = np.sin(x) * y + 2.0
    on_toy = ember.device_put(y, toy.device)
    # the native CPU backend runs the program: the toy argument comes to the host
    mixed = ember.jit(f)(jnp.asarray(x), on_toy)
    assert mixed.device_buffer is None and TO_HOST == [(3,)]
    np.testing.assert_allclose(np.asarray(mixed), expected, rtol=1e-6)
    again = ember.jit(f)(jnp.asarray(x), ember.device_put(y, toy.device))  # the fast path declines it, then the same
    np.testing.assert_allclose(np.asarray(again), expected, rtol=1e-6)
    # the toy runs it: the host argument goes to the toy, the toy one stays
    with ember.config.override(backend="toy"):
        TO_HOST.clear()
        out = ember.jit(f)(jnp.asarray(x), on_toy)
    assert type(out.device_buffer) is ToyBuffer and TO_HOST == []
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


def test_a_host_array_crosses_to_the_device_once(toy):
    # a weight or a batch on the host is copied to the device by its first program there, and the
    # copy (the Array's mirror) serves later calls, of any program, without changing its placement
    x, y = jnp.asarray(np.linspace(0, 1, 4, dtype=np.float32)), np.ones(4, np.float32)
    with ember.config.override(backend="toy"):
        first = ember.jit(f)(x, y)
        second = ember.jit(lambda v: v * 3.0)(x)
        third = ember.jit(f)(x, y)  # the hit path
    assert toy.puts == [(4,), (4,), (4,)]  # x once; the NumPy y each call (it cannot keep a copy)
    assert x.device_buffer is None and x.platform() == "cpu" and x.device == ember.devices("cpu")[0]
    np.testing.assert_allclose(np.asarray(third), np.asarray(first))
    np.testing.assert_allclose(np.asarray(second), np.asarray(x) * 3.0, rtol=1e-6)
    # donating it deletes the array and its mirror; the CPU backend never made one
    mirror = x._mirror
    with ember.config.override(backend="toy"):
        ember.jit(lambda v: v + 1.0, donate_argnums=0)(x)
    assert x.is_deleted() and mirror.deleted
    z = jnp.arange(3.0)
    ember.jit(lambda v: v * 2.0)(z)
    assert z._mirror is None


def test_donating_a_toy_array_deletes_its_buffer(toy):
    on_toy = ember.device_put(np.ones(3, np.float32), toy.device)
    buffer = on_toy.device_buffer
    with ember.config.override(backend="toy"):
        out = ember.jit(lambda v: v * 2.0, donate_argnums=0)(on_toy)
    assert on_toy.is_deleted() and id(buffer) in DELETED and buffer.data is None
    with pytest.raises(RuntimeError, match="Array has been deleted"):
        np.asarray(on_toy)
    np.testing.assert_array_equal(np.asarray(out), [2.0, 2.0, 2.0])


def test_a_program_the_backend_cannot_run_is_refused_by_name(toy):
    with ember.config.override(backend="toy"), pytest.raises(NotImplementedError) as e:
        ember.jit(lambda v: lax.while_loop(lambda c: c < 10.0, lambda c: c * 2.0, v))(1.0)
    assert "the backend 'toy' cannot run <lambda>: the toy has no loops" in str(e.value)


def _registered() -> str:
    """The registered backends as the registry's errors list them (PJRT plugins found here included)."""
    return re.escape(", ".join(repr(name) for name in registry.registered() if name != "toy"))


def test_the_default_is_the_highest_priority_available_backend():
    with ember.config.override(backend=""):  # (the default, whatever the suite runs on)
        assert registry.get().name == "cpu" and ember.default_backend() == "cpu"
    accelerator = registry.register(ToyBackend(priority=100, available=False))
    try:
        with ember.config.override(backend=""):
            assert registry.get().name == "cpu"  # its plugin is not found: cpu stays the default
            accelerator.available = True  # (availability is asked when a backend is chosen)
            assert registry.get() is accelerator and ember.default_backend() == "toy"
            assert ember.devices() == [accelerator.device]
        with ember.config.override(backend="reference,toy"):  # JAX's list: the first available one
            assert registry.get().name == "reference"
        accelerator.available = False
        with ember.config.override(backend="toy,cpu"):
            assert registry.get().name == "cpu"
        with ember.config.override(backend="toy"):
            with pytest.raises(RuntimeError, match=r"none of the backends 'toy' \(config.backend = 'toy'\) "
                                                   r"is available here; registered backends: 'toy', "
                                                   + _registered()):
                registry.get()
    finally:
        registry.unregister("toy")


def test_unknown_names_and_second_registrations_are_errors():
    with ember.config.override(backend="tpu,cpu"):
        with pytest.raises(RuntimeError, match=r"unknown backend 'tpu' \(in 'tpu,cpu'\); registered backends: "
                                               + _registered()):
            ember.jit(lambda v: v + 1.0)(1.0)
    with pytest.raises(RuntimeError, match="unknown backend 'gpu'"):
        ember.devices("gpu")
    with pytest.raises(ValueError, match="a backend named 'cpu' is registered already"):
        registry.register(ToyBackend.__new__(type("Other", (ToyBackend,), {"name": "cpu"})))
    with pytest.raises(ValueError, match="no backend named 'toy' is registered"):
        registry.unregister("toy")


def test_a_platform_name_chooses_its_backends():
    with ember.config.override(backend="cpu"):
        assert registry.get().name == "cpu"  # the name before the platform (reference serves "cpu" too)
    assert ember.config.jax_platforms == ember.config.backend


def test_both_builtin_backends_implement_the_protocols():
    closed = ember.make_jaxpr(f)(np.ones(2, np.float32), np.ones(2, np.float32))
    for name in ("cpu", "reference"):
        backend = registry.get(name)
        assert isinstance(backend, Backend) and backend.host_buffers and backend.platform == "cpu"
        executable = backend.compile(closed, CompileOptions("f"))
        assert isinstance(executable, Executable)
        assert list(executable.in_avals) == closed.in_avals and list(executable.out_avals) == closed.out_avals
        (out,) = executable(np.ones(2, np.float32), jnp.full(2, 3.0))
        np.testing.assert_allclose(np.asarray(out), np.sin(1.0) * 3.0 + 2.0, rtol=1e-6)
        assert executable.cost_analysis() is None
    assert "define" in registry.get("cpu").compile(closed, CompileOptions("f")).as_text("llvm")
    with pytest.raises(ValueError, match="has no 'llvm' text"):
        registry.get("reference").compile(closed, CompileOptions("f")).as_text("llvm")


def test_the_runtime_names_no_backend():
    """The runtime and the API find backends through the registry and use executables through the
    protocol: no comparison of ``config.backend`` with a name, no probing of executables."""
    root = Path(__file__).resolve().parent.parent / "ember"
    sources = {p: p.read_text() for p in [root / "api.py", *sorted((root / "runtime").glob("*.py"))]}
    compared = [f"{p.name}:{n}" for p, text in sources.items() for n, line in enumerate(text.splitlines(), 1)
                if re.search(r"config\.backend\s*(==|!=|in\b)|backend\w*\s*(==|!=)\s*[\"']", line)]
    probed = [f"{p.name}:{n}" for p, text in sources.items() for n, line in enumerate(text.splitlines(), 1)
              if re.search(r"(get|has)attr\([\w.]*executable\w*,", line)]
    assert compared == [] and probed == []
