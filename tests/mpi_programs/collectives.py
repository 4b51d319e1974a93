"""Every collective over a mesh that spans the MPI processes, against NumPy (tests/test_distributed.py).

    mpiexec -n 2 python tests/mpi_programs/collectives.py    (EMBER_NUM_CPU_DEVICES: devices per process)
"""
import json

import numpy as np

import ember
from ember import lax
from ember.core.sharding import Mesh, NamedSharding, PartitionSpec as P

ember.distributed.initialize()
rank, procs = ember.distributed.process_index(), ember.distributed.process_count()
local, devices = ember.distributed.local_device_count(), ember.devices()
n = len(devices)
assert n == procs * local == ember.distributed.device_count(), (n, procs, local)
assert [d.process_index for d in devices] == [p for p in range(procs) for _ in range(local)]
assert [d.id for d in devices] == list(range(n))
assert [d.id for d in ember.distributed.local_devices()] == list(range(rank * local, (rank + 1) * local))
report = {"rank": rank, "processes": procs, "devices": [str(d) for d in devices]}


def check(name, got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, err_msg=name)
    report.setdefault("checked", []).append(name)


def global_array(mesh, spec, value):
    """``value`` (known to every process) as a global array: each process gives its blocks only."""
    sharding = NamedSharding(mesh, spec)
    index = sharding.addressable_devices_indices_map(value.shape)
    rows = sorted({(s[0].start or 0, s[0].stop) for s in index.values()})
    mine = value[rows[0][0]:rows[-1][1]]
    return ember.distributed.make_array_from_process_local_data(sharding, mine, value.shape)


rng = np.random.default_rng(0)
mesh = Mesh(np.array(devices), ("i",))
x = rng.normal(size=(n, 3)).astype(np.float32)
xs = rng.normal(size=(n * n, 3)).astype(np.float32)


def body(a, b):
    perm = [(j, (j + 1) % n) for j in range(n)]
    return (lax.psum(a, "i"), lax.pmean(a, "i"), lax.pmax(a, "i"), lax.pmin(a, "i"),
            lax.all_gather(a, "i", tiled=True), lax.psum_scatter(b, "i", scatter_dimension=0, tiled=True),
            lax.ppermute(a, "i", perm), lax.all_to_all(b, "i", 0, 0, tiled=True),
            lax.axis_index("i").reshape(1, 1) + np.zeros((1, 3), np.int32), lax.psum(a > 0, "i"))


f = ember.shard_map(body, mesh=mesh, in_specs=(P("i"), P("i")), out_specs=P("i"))
outs = [ember.distributed.process_allgather(o) for o in f(global_array(mesh, P("i"), x),
                                                          global_array(mesh, P("i"), xs))]
blocks = xs.reshape(n, n, 3)
check("psum", outs[0], np.tile(x.sum(0), (n, 1)))
check("pmean", outs[1], np.tile(x.mean(0), (n, 1)))
check("pmax", outs[2], np.tile(x.max(0), (n, 1)))
check("pmin", outs[3], np.tile(x.min(0), (n, 1)))
check("all_gather", outs[4], np.tile(x, (n, 1)))
check("psum_scatter", outs[5], blocks.sum(0))
check("ppermute", outs[6], np.roll(x, 1, axis=0))
check("all_to_all", outs[7], blocks.transpose(1, 0, 2).reshape(n * n, 3))
check("axis_index", outs[8], np.repeat(np.arange(n), 3).reshape(n, 3))
check("psum(bool)", outs[9], np.tile((x > 0).any(0), (n, 1)))

# A replicated output is whole on every process.
total = ember.shard_map(lambda a: lax.psum(a, "i"), mesh=mesh, in_specs=P("i"), out_specs=P())(
    global_array(mesh, P("i"), x))
check("psum to P()", total, x.sum(0, keepdims=True))

# pmap over the global devices: each process maps its own devices' slices.
mine = x[rank * local:(rank + 1) * local]
out = ember.pmap(lambda a: (lax.psum(a, "j"), lax.axis_index("j")), "j")(mine)
check("pmap psum", out[0], np.tile(x.sum(0), (local, 1)))
check("pmap axis_index", out[1], np.arange(rank * local, (rank + 1) * local))

if local > 1:  # a (processes, local devices) mesh: collectives over one axis, the other or both
    mesh2 = Mesh(np.array(devices).reshape(procs, local), ("p", "d"))
    x2 = rng.normal(size=(procs, local * 2)).astype(np.float32)

    def body2(a):
        return (lax.psum(a, "p"), lax.psum(a, "d"), lax.psum(a, ("p", "d")), lax.pmax(a, "p"),
                lax.all_gather(a, "p", tiled=True), lax.ppermute(a, "p", [(j, (j + 1) % procs) for j in range(procs)]),
                lax.axis_index(("p", "d")).reshape(1, 1) + np.zeros((1, 2), np.int32))

    g = ember.shard_map(body2, mesh=mesh2, in_specs=P("p", "d"), out_specs=P("p", "d"))
    o = [ember.distributed.process_allgather(v) for v in g(global_array(mesh2, P("p", "d"), x2))]
    b = x2.reshape(procs, local, 2)  # block (p, d)
    check("2d psum p", o[0], np.broadcast_to(b.sum(0, keepdims=True), b.shape).reshape(procs, -1))
    check("2d psum d", o[1], np.broadcast_to(b.sum(1, keepdims=True), b.shape).reshape(procs, -1))
    check("2d psum pd", o[2], np.broadcast_to(b.sum((0, 1), keepdims=True), b.shape).reshape(procs, -1))
    check("2d pmax p", o[3], np.broadcast_to(b.max(0, keepdims=True), b.shape).reshape(procs, -1))
    check("2d all_gather p", o[4].reshape(procs, procs, local, 2).transpose(0, 2, 1, 3).reshape(procs, local,
                                                                                                    procs * 2),
          np.broadcast_to(b.transpose(1, 0, 2).reshape(1, local, procs * 2), (procs, local, procs * 2)))
    check("2d ppermute p", o[5], np.roll(b, 1, axis=0).reshape(procs, -1))
    check("2d axis_index pd", o[6], np.repeat(np.arange(n), 2).reshape(procs, -1))

ember.distributed.shutdown()
assert ember.distributed.process_count() == 1 and not ember.distributed.is_initialized()
print("RESULT " + json.dumps(report), flush=True)
