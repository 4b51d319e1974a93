"""Programs over many devices of a PJRT plugin, partitioned by XLA (``ember.backends.pjrt.spmd``):
the compile options' bytes, XLA's shardings read back, and, on XLA's CPU plugin with 8 devices,
the same programs under JAX on 8 CPU devices and under ember (``pjrt_programs/sharded.py``):
placements, each device's block, output shardings, values, a data-parallel optax step, a
transformer block on a 2 x 4 (data, model) mesh, and the errors of bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

lammps_jax_pjrt_cpu = pytest.importorskip(
    "lammps_jax_pjrt_cpu", reason="XLA's CPU PJRT plugin is not installed (pip install ember[pjrt-cpu])")

from ember.backends.pjrt import spmd  # noqa: E402
from ember.backends.pjrt.binding import Spmd, compile_options  # noqa: E402
from ember.core import sharding as shd  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def test_spmd_compile_options_are_the_verified_bytes():
    """Four partitions over devices 0-3 with Shardy, as checked against XLA's CPU plugin and libtpu."""
    assert compile_options(spmd=Spmd((0, 1, 2, 3))).hex() == (
        "1a2320012804300" "14a18080110041a030a01001a030a01011a030a01021a030a0103980101")
    assert compile_options(num_replicas=4).hex() == "1a0420042801"
    opened = compile_options(spmd=Spmd((0, 1), (False, True), (True,)))
    assert bytes([0x62, 1, 1]) in opened and bytes([0x92, 0x01, 2, 0, 1]) in opened


class _Mesh:
    """A mesh's names and sizes, as ``named_sharding`` reads them (no devices needed)."""

    def __init__(self, sizes: tuple, names: tuple) -> None:
        self.axis_sizes, self.axis_names = sizes, names
        self.devices = np.arange(int(np.prod(sizes)), dtype=object).reshape(sizes)
        self.shape = dict(zip(names, sizes))

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


def _op_sharding(tile_dims: list, *, replicate_last: bool = False, devices: list | None = None,
                 reshape: list | None = None, perm: list | None = None) -> bytes:
    def packed(field: int, values: list) -> bytes:
        body = b"".join(bytes([v]) for v in values)
        return bytes([field << 3 | 2, len(body)]) + body
    out = bytes([0x08, 3]) + packed(3, tile_dims)
    if devices is not None:
        out += packed(4, devices)
    if replicate_last:
        out += bytes([0x30, 1])
    if reshape is not None:
        out += packed(9, reshape) + packed(10, perm)
    return out


@pytest.mark.parametrize("op, ndim, expected", [
    (dict(tile_dims=[2, 4], reshape=[8], perm=[0]), 2, ("x", "y")),
    (dict(tile_dims=[2, 1, 4], replicate_last=True, reshape=[8], perm=[0]), 2, ("x",)),
    (dict(tile_dims=[4, 1, 2], replicate_last=True, reshape=[2, 4], perm=[1, 0]), 2, ("y",)),
    (dict(tile_dims=[1, 8], reshape=[8], perm=[0]), 2, (None, ("x", "y"))),
    (dict(tile_dims=[4, 2], reshape=[2, 4], perm=[1, 0]), 2, ("y", "x")),
    (dict(tile_dims=[2, 4], devices=[0, 1, 2, 3, 4, 5, 6, 7]), 2, ("x", "y")),
])
def test_xla_shardings_read_back_as_partition_specs(op, ndim, expected):
    mesh = _Mesh((2, 4), ("x", "y"))
    found = spmd.named_sharding(spmd.OpSharding(_op_sharding(**op)), mesh, ndim)
    assert isinstance(found, shd.NamedSharding) and tuple(found.spec) == expected


def test_a_replicated_result_reads_back_as_an_empty_spec():
    mesh = _Mesh((2, 4), ("x", "y"))
    assert tuple(spmd.named_sharding(spmd.OpSharding(bytes([0x08, 0])), mesh, 2).spec) == ()


def test_a_tiling_no_spec_describes_keeps_its_blocks():
    mesh = _Mesh((2, 2), ("x", "y"))
    odd = spmd.named_sharding(spmd.OpSharding(_op_sharding([4], devices=[0, 3, 1, 2])), mesh, 1)
    assert isinstance(odd, spmd.TiledSharding)
    blocks = odd.devices_indices_map((8,))
    assert [blocks[d] for d in mesh.devices.flat] == [(slice(0, 2),), (slice(4, 6),), (slice(6, 8),), (slice(2, 4),)]


def _eight_devices(**extra: str) -> dict:
    """A fresh process's environment: 8 CPU devices for XLA's plugin and JAX alike, this checkout's ember."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", **extra)
    env.pop("EMBER_NUM_CPU_DEVICES", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(HERE), env.get("PYTHONPATH")]))
    return env


def _run(framework: str) -> dict:
    env = _eight_devices(**({"EMBER_PLATFORMS": "xla_cpu"} if framework == "ember" else {"JAX_PLATFORMS": "cpu"}))
    out = subprocess.run([sys.executable, os.path.join(HERE, "pjrt_programs", "sharded.py"), framework], env=env,
                         capture_output=True, text=True, timeout=600, cwd=os.path.dirname(HERE))
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def both() -> tuple[dict, dict]:
    pytest.importorskip("jax")
    pytest.importorskip("optax")
    pytest.importorskip("flax")
    return _run("ember"), _run("jax")


@pytest.mark.parametrize("case", ["placed", "committed", "in_out_shardings", "constraint", "from_callback",
                                  "two_meshes", "collectives", "pmapped", "flax_partitioning",
                                  "errors"])
def test_sharded_programs_on_8_devices_as_under_jax(both, case):
    """Each device's block (device, shape, index), the output shardings, the values, and the
    errors' types are JAX's."""
    ours, theirs = both
    assert "error" not in theirs[case], theirs[case]
    assert ours[case] == theirs[case]


@pytest.mark.parametrize("case", ["data_parallel", "transformer_block"])
def test_training_steps_over_a_mesh_give_jaxs_losses(both, case):
    """An optax Adam step with the batch split 8 ways, and a transformer block's SGD step on a
    2 x 4 (data, model) mesh: JAX's losses step for step, the parameters' shardings JAX's."""
    ours, theirs = both
    assert "error" not in theirs[case] and "error" not in ours[case], (ours[case], theirs[case])
    np.testing.assert_allclose(ours[case]["losses"], theirs[case]["losses"], rtol=2e-6)
    spec_key = "w1_spec" if case == "data_parallel" else "specs"
    assert ours[case][spec_key] == theirs[case][spec_key]


EMBER_SIDE = r"""
import numpy as np, ember
ember.install_as_jax()
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from ember.backends.pjrt import program, spmd

AUTO = jax.sharding.AxisType.Auto
mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AUTO, AUTO))
x = np.arange(64, dtype=np.float32).reshape(8, 8)

# Donation: every device gives its block up.
a = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
blocks = list(a.device_buffer.shards)
out = jax.jit(lambda a: a * 2, donate_argnums=0)(a)
assert a.is_deleted() and all(b.deleted for b in blocks) and len(blocks) == 8
np.testing.assert_array_equal(np.asarray(out), x * 2)
try:
    a + 1
    raise AssertionError("a donated array was read")
except RuntimeError as e:
    assert "deleted" in str(e)

# The lowered module is the annotated one that XLA partitions.
text = jax.jit(lambda a: a.sum(0), in_shardings=NamedSharding(mesh, P("x", "y"))).lower(x).as_text()
assert 'sdy.mesh @mesh = <["x"=2, "y"=4]>' in text and "mhlo.num_partitions = 8 : i32" in text
assert '#sdy.sharding<@mesh, [{"x"}, {"y"}]>' in text and "[{?}]" in text

# PartitionSpecs under a context mesh; the outputs' blocks live on their devices only.
with jax.set_mesh(mesh):
    y = jax.jit(lambda a: a + 1, in_shardings=P("x"), out_shardings=P(None, "y"))(x)
assert y.sharding == NamedSharding(mesh, P(None, "y"))
assert sorted((s.device.id, s.data.shape) for s in y.addressable_shards) == [(i, (8, 2)) for i in range(8)]
assert [s.data.device_buffer.nbytes for s in y.addressable_shards] == [8 * 2 * 4] * 8
jax.block_until_ready(y)
assert y.is_ready() and repr(y.addressable_shards[3].device) == "CpuDevice(id=3)"

# Compiled once per mesh and device assignment: the disk cache keys both.
import tempfile
closed = jax.make_jaxpr(lambda a: jnp.sin(a) + 7.25)(x)
with tempfile.TemporaryDirectory() as where, ember.config.override(cache_dir=where, persistent_cache=True):
    client = program.client("xla_cpu")
    first = spmd.PartitionedExecutable(client, closed, mesh, [NamedSharding(mesh, P("x"))], [None])
    second = spmd.PartitionedExecutable(client, closed, mesh, [NamedSharding(mesh, P("x"))], [None])
    other = jax.sharding.Mesh(np.array(jax.devices()[::-1]).reshape(2, 4), ("x", "y"))
    third = spmd.PartitionedExecutable(client, closed, other, [NamedSharding(other, P("x"))], [None])
assert (first.code, second.code, third.code) == ("compiled", "disk", "compiled")
for run in (first, third):
    np.testing.assert_allclose(spmd.ShardedBuffer.to_host(run([x])[0]), np.sin(x) + 7.25, rtol=1e-6)
print("ok")
"""


def test_donation_lowering_context_meshes_and_the_disk_cache_over_8_devices():
    env = _eight_devices(EMBER_PLATFORMS="xla_cpu")
    out = subprocess.run([sys.executable, "-c", EMBER_SIDE], env=env, capture_output=True, text=True, timeout=600,
                         cwd=os.path.dirname(HERE))
    assert out.returncode == 0 and out.stdout.split() == ["ok"], out.stderr[-3000:]


# The CPU backend's sharding, pmap, shard_map and collective tests, run again on XLA's CPU plugin with
# 8 devices (values, output shardings, each device's block). What they do that the plugin's programs
# do not, and why:
NOT_ON_XLA_CPU = {
    "tests/test_parallel.py::test_device_put_lays_a_bare_partition_spec_over_the_current_mesh":
        "a pure_callback inside a shard_map over the plugin's devices: host callbacks are run between device "
        "programs, never inside one partitioned over a mesh",
    "tests/test_partition.py::test_library_sharding_helpers_leave_leaves_sharded_as_jax_reports":
        "flax nnx's sharded state under a context mesh: a jit whose program constrains values inside it, with "
        "no split input, runs on one device of the plugin (the context mesh is not part of jit's cache key)",
}


@pytest.mark.parametrize("module", ["tests/test_parallel.py", "tests/test_partition.py"])
def test_the_cpu_backends_sharding_tests_pass_on_xla_cpu_with_8_devices(module):
    env = _eight_devices(EMBER_PLATFORMS="xla_cpu")
    deselect = [f"--deselect={t}" for t in NOT_ON_XLA_CPU if t.startswith(module)]
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", module,
                          *deselect], env=env, capture_output=True, text=True, timeout=900,
                         cwd=os.path.dirname(HERE))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    progress = "".join(line.split("[")[0] for line in out.stdout.splitlines() if line.rstrip().endswith("%]"))
    assert progress.count(".") >= 20 and not set(progress.strip()) - {"."}, out.stdout[-2000:]
