"""Devices, collectives over named axes, pmap and shard_map: against NumPy, against the
single-device computation, and against JAX (in a subprocess with forced host devices)."""
import functools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember import lax
from ember.core.sharding import Mesh, NamedSharding, PartitionSpec as P, SingleDeviceSharding

jnp = ember.numpy


@pytest.fixture(params=[1, 2, 4])
def ndev(request):
    old = ember.config.num_cpu_devices
    ember.config.update("num_cpu_devices", request.param)
    yield request.param
    ember.config.update("num_cpu_devices", old)


def _x(n, *shape):
    return np.arange(n * int(np.prod(shape)), dtype=np.float32).reshape((n,) + shape) * 0.5 - 1.0


def _references(x):
    n = x.shape[0]
    return {
        "psum": lambda v: np.broadcast_to(x.sum(0), x.shape),
        "pmax": lambda v: np.broadcast_to(x.max(0), x.shape),
        "all_gather": lambda v: np.broadcast_to(x, (n,) + x.shape),
        "axis_index": lambda v: np.arange(n, dtype=np.int32),
        "ppermute": lambda v: np.roll(x, 1, axis=0),
        "psum_scatter": lambda v: x.sum(0).reshape((n, -1) + x.shape[2:]),
        "all_to_all": lambda v: np.swapaxes(x.reshape((n, n, -1) + x.shape[2:]), 0, 1).reshape(x.shape),
    }


def _collectives(n):
    return {
        "psum": lambda v: lax.psum(v, "i"),
        "pmax": lambda v: lax.pmax(v, "i"),
        "all_gather": lambda v: lax.all_gather(v, "i"),
        "axis_index": lambda v: lax.axis_index("i"),
        "ppermute": lambda v: lax.ppermute(v, "i", [(k, (k + 1) % n) for k in range(n)]),
        "psum_scatter": lambda v: lax.psum_scatter(v, "i", tiled=True),
        "all_to_all": lambda v: lax.all_to_all(v, "i", 0, 0, tiled=True),
    }


@pytest.mark.parametrize("name", ["psum", "pmax", "all_gather", "axis_index", "ppermute", "psum_scatter",
                                  "all_to_all"])
def test_collectives_against_numpy(ndev, name):
    n = ndev
    x = _x(n, 2 * n, 3)
    want = _references(x)[name](x)
    f = _collectives(n)[name]
    np.testing.assert_allclose(ember.vmap(f, axis_name="i")(x), want, rtol=1e-6)
    np.testing.assert_allclose(ember.jit(ember.vmap(f, axis_name="i"))(x), want, rtol=1e-6)
    np.testing.assert_allclose(ember.vmap(ember.jit(f), axis_name="i")(x), want, rtol=1e-6)
    out = ember.pmap(f, "i")(x)
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert len(out.sharding.device_set) == n
    np.testing.assert_allclose(ember.jit(ember.pmap(f, "i"))(x), want, rtol=1e-6)
    mesh = Mesh(np.array(ember.devices()[:n]), ("i",))
    sm = ember.shard_map(lambda v: f(v[0])[None] if name != "all_gather" else f(v[0])[None], mesh=mesh,
                         in_specs=P("i"), out_specs=P("i"))
    np.testing.assert_allclose(sm(x), want, rtol=1e-6)
    np.testing.assert_allclose(ember.jit(sm)(x), want, rtol=1e-6)


def test_collectives_under_outer_vmap_and_other_axes():
    x = _x(3, 4, 2)  # axis j (3) outside, axis i (4) inside
    f = ember.vmap(ember.vmap(lambda v: lax.psum(v, "j") + lax.all_gather(v, "i").sum(0), axis_name="i"),
                   axis_name="j")
    want = x.sum(0, keepdims=True) + x.sum(1, keepdims=True)
    np.testing.assert_allclose(f(x), want, rtol=1e-6)
    g = ember.vmap(ember.vmap(lambda v: lax.psum(v, ("i", "j")), axis_name="i"), axis_name="j")
    np.testing.assert_allclose(g(x), np.broadcast_to(x.sum((0, 1)), x.shape), rtol=1e-6)
    h = ember.vmap(ember.vmap(lambda v: lax.axis_index(("j", "i")), axis_name="i"), axis_name="j")
    np.testing.assert_array_equal(h(x), np.arange(12).reshape(3, 4))
    # an inner vmap without a name maps each example's collective elementwise
    k = ember.vmap(ember.vmap(lambda v: lax.pmean(v, "i")), axis_name="i")
    np.testing.assert_allclose(k(x), np.broadcast_to(x.mean(0), x.shape), rtol=1e-6)


def test_psum_of_unmapped_values():
    f = ember.vmap(lambda v: (lax.psum(1, "i"), lax.psum(jnp.float32(2.0), "i") + v), axis_name="i")
    size, total = f(np.zeros(5, np.float32))
    np.testing.assert_array_equal(size, np.full(5, 5))
    np.testing.assert_allclose(total, np.full(5, 10.0))


def test_grad_rules_match_jax_pmap_semantics():
    x = _x(4, 3)
    n = 4
    grads = {
        "psum": (lambda v: (lax.psum(v, "i") * v).sum(), None),
        "all_gather": (lambda v: (lax.all_gather(v, "i") ** 2).sum(), None),
        "ppermute": (lambda v: (lax.ppermute(v, "i", [(k, (k + 1) % n) for k in range(n)]) * v).sum(), None),
        "pmax": (lambda v: lax.pmax(v, "i").sum(), None),
    }
    got = {k: np.asarray(ember.vmap(ember.grad(f), axis_name="i")(x)).tolist() for k, (f, _) in grads.items()}
    with ember.config.override(num_cpu_devices=4):
        for k, (f, _) in grads.items():
            np.testing.assert_allclose(ember.pmap(ember.grad(f), "i")(x), got[k], rtol=1e-6)
    want = _run_jax("""
x = (np.arange(12, dtype=np.float32).reshape(4, 3) * 0.5 - 1.0)
n = 4
fs = {
    "psum": lambda v: (jax.lax.psum(v, "i") * v).sum(),
    "all_gather": lambda v: (jax.lax.all_gather(v, "i") ** 2).sum(),
    "ppermute": lambda v: (jax.lax.ppermute(v, "i", [(k, (k + 1) % n) for k in range(n)]) * v).sum(),
    "pmax": lambda v: jax.lax.pmax(v, "i").sum(),
}
out = {}
for k, f in fs.items():
    try:
        out[k] = np.asarray(jax.pmap(jax.grad(f), "i")(x)).tolist()
    except Exception as e:
        out[k] = None
""", 4)
    for k in grads:
        if want[k] is not None:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, err_msg=k)


def _run_jax(body, ndev):
    code = "import json, numpy as np, jax, jax.numpy as jnp\n" + body + "\nprint(json.dumps(out))\n"
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={ndev}", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_shard_map_grads_match_jax():
    want = _run_jax("""
from jax.sharding import Mesh, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()), ("i",))
x = jnp.arange(8.0)
out = {}
for cv in (True, False):
    g = jax.shard_map(lambda x: jax.grad(lambda y: jax.lax.psum((y * y).sum(), "i"))(x), mesh=mesh,
                      in_specs=P("i"), out_specs=P("i"), check_vma=cv)
    out[str(cv)] = np.asarray(g(x)).tolist()
out["outside"] = np.asarray(jax.grad(lambda x: jax.shard_map(lambda v: jax.lax.psum((v * v).sum(), "i"), mesh=mesh,
                                   in_specs=P("i"), out_specs=P())(x))(x)).tolist()
""", 4)
    with ember.config.override(num_cpu_devices=4):
        mesh = Mesh(np.array(ember.devices()), ("i",))
        x = jnp.arange(8.0)
        for cv in (True, False):
            g = ember.shard_map(lambda x: ember.grad(lambda y: lax.psum((y * y).sum(), "i"))(x), mesh=mesh,
                                in_specs=P("i"), out_specs=P("i"), check_vma=cv)
            np.testing.assert_allclose(g(x), want[str(cv)])
            np.testing.assert_allclose(ember.jit(g)(x), want[str(cv)])
        outside = ember.grad(lambda x: ember.shard_map(lambda v: lax.psum((v * v).sum(), "i"), mesh=mesh,
                                                       in_specs=P("i"), out_specs=P())(x))(x)
        np.testing.assert_allclose(outside, want["outside"])


def _mlp_loss(params, x, y):
    w1, b1, w2 = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 - y) ** 2)


def _mlp_data():
    rng = np.random.default_rng(0)
    params = (rng.normal(size=(5, 8)).astype(np.float32), np.zeros(8, np.float32),
              rng.normal(size=(8, 1)).astype(np.float32))
    return params, rng.normal(size=(16, 5)).astype(np.float32), rng.normal(size=(16, 1)).astype(np.float32)


def test_data_parallel_mlp_step_equals_single_device(ndev):
    params, x, y = _mlp_data()
    grads = ember.grad(_mlp_loss)(params, x, y)
    want = [p - 0.1 * g for p, g in zip(params, grads)]

    def step(params, x, y):
        g = lax.pmean(ember.grad(_mlp_loss)(params, x, y), "d")
        return [p - 0.1 * gi for p, gi in zip(params, g)]

    n = ndev
    xs, ys = x.reshape(n, -1, 5), y.reshape(n, -1, 1)
    out = ember.pmap(step, "d", in_axes=(None, 0, 0))(params, xs, ys)
    for o, w in zip(out, want):
        np.testing.assert_allclose(o[0], w, rtol=1e-5, atol=1e-6)
    mesh = Mesh(np.array(ember.devices()[:n]), ("d",))
    sm = ember.shard_map(step, mesh=mesh, in_specs=(P(), P("d"), P("d")), out_specs=P(), check_vma=False)
    for o, w in zip(sm(params, x, y), want):
        np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-6)


def test_unbound_axis_name_errors():
    x = jnp.ones(3)
    with pytest.raises(NameError, match="unbound axis name: i"):
        lax.psum(x, "i")
    with pytest.raises(NameError, match="unbound axis name: i"):
        ember.jit(lambda v: lax.psum(v, "i"))(x)
    with pytest.raises(NameError, match="unbound axis name: j"):
        ember.vmap(lambda v: lax.all_gather(v, "j"), axis_name="i")(x)
    f = ember.jit(lambda v: lax.psum(v, "i"))
    ember.vmap(f, axis_name="i")(x)  # traced with "i" bound: cached apart from the unbound call
    with pytest.raises(NameError, match="unbound axis name: i"):
        f(x)


def test_pmap_errors_and_devices():
    with ember.config.override(num_cpu_devices=2):
        assert [d.id for d in ember.devices()] == [0, 1]
        assert repr(ember.devices()[1]) == "CpuDevice(id=1)" and str(ember.devices()[1]) == "cpu:1"
        with pytest.raises(ValueError, match="requires 3 logical devices, but only 2"):
            ember.pmap(lambda v: v)(jnp.ones((3, 2)))
        import ember.compat.jax as jax
        assert jax.device_count() == 2 and jax.local_device_count() == 2
        assert jax.process_index() == 0 and jax.process_count() == 1


def test_ppermute_bad_permutation():
    with pytest.raises(ValueError, match="sources and destinations must be unique"):
        ember.vmap(lambda v: lax.ppermute(v, "i", [(0, 1), (1, 1)]), axis_name="i")(jnp.ones(2))


def test_shard_map_bad_specs():
    with ember.config.override(num_cpu_devices=2):
        mesh = Mesh(np.array(ember.devices()), ("i",))
        f = ember.shard_map(lambda v: v, mesh=mesh, in_specs=P("k"), out_specs=P("i"))
        with pytest.raises(ValueError, match="Resource axis: k"):
            f(jnp.ones(4))
        g = ember.shard_map(lambda v: v, mesh=mesh, in_specs=P("i"), out_specs=P("i"))
        with pytest.raises(ValueError, match="not divisible"):
            g(jnp.ones(3))


def test_sharding_objects_as_jax():
    with ember.config.override(num_cpu_devices=4):
        devs = ember.devices()
        mesh = Mesh(np.array(devs).reshape(2, 2), ("a", "b"))
        assert str(mesh) == "Mesh('a': 2, 'b': 2, axis_types=(Auto, Auto))"
        assert repr(P("a", None)) == "P('a', None)" and repr(P("a")) == "P('a',)"
        s = NamedSharding(mesh, P("a"))
        assert repr(s) == "NamedSharding(mesh=Mesh('a': 2, 'b': 2, axis_types=(Auto, Auto)), spec=P('a',), " \
                          "memory_kind=device)"
        assert s.shard_shape((4, 6)) == (2, 6) and not s.is_fully_replicated and s.num_devices == 4
        assert repr(SingleDeviceSharding(devs[0])) == "SingleDeviceSharding(device=CpuDevice(id=0), memory_kind=device)"
        x = ember.device_put(jnp.arange(8.0).reshape(4, 2), s)
        assert x.sharding == s and x.devices() == set(devs)
        shards = x.addressable_shards
        assert [sh.index for sh in shards][:2] == [(slice(0, 2), slice(None)), (slice(0, 2), slice(None))]
        assert [sh.replica_id for sh in shards] == [0, 1, 0, 1]
        np.testing.assert_array_equal(shards[2].data, [[4.0, 5.0], [6.0, 7.0]])
        y = ember.make_array_from_callback((4, 2), s, lambda idx: np.arange(8.0).reshape(4, 2)[idx])
        np.testing.assert_array_equal(y, np.arange(8.0).reshape(4, 2))
        assert ember.device_put(jnp.ones(2), devs[3]).devices() == {devs[3]}
        assert jnp.ones(2).sharding == SingleDeviceSharding(devs[0])
        # Array.format: a dense row-major layout with the array's sharding (JAX's repr)
        assert repr(jnp.ones((2, 3)).format) == ("Format(layout=Layout(major_to_minor=(0, 1), tiling=(), "
                                                 "sub_byte_element_size_in_bits=0), sharding=SingleDeviceSharding("
                                                 "device=CpuDevice(id=0), memory_kind=device))")
        assert x.format.sharding == s and x.format.layout == jnp.zeros((1, 1)).format.layout
        with pytest.raises(ValueError, match="Resource axis: c"):
            NamedSharding(mesh, P("c"))


def test_shard_map_two_dimensional_mesh():
    with ember.config.override(num_cpu_devices=4):
        mesh = Mesh(np.array(ember.devices()).reshape(2, 2), ("a", "b"))
        x = np.arange(16.0, dtype=np.float32).reshape(4, 4)
        f = ember.shard_map(lambda v: lax.psum(v, "b"), mesh=mesh, in_specs=P("a", "b"), out_specs=P("a", None))
        want = x.reshape(4, 2, 2).sum(1)
        np.testing.assert_allclose(f(x), want)
        np.testing.assert_allclose(ember.jit(f)(x), want)


def test_small_collectives():
    x = _x(4, 3)
    f = ember.vmap(lambda v: (lax.pmin(v, "i"), lax.pshuffle(v, "i", [3, 2, 1, 0]), lax.pvary(v, "i"),
                              lax.pcast(v, "i", to="varying"), lax.axis_size("i") + 0 * v), axis_name="i")
    mn, sh, pv, pc, size = f(x)
    np.testing.assert_allclose(mn, np.broadcast_to(x.min(0), x.shape))
    np.testing.assert_allclose(sh, x[::-1])
    np.testing.assert_allclose(pv, x)
    np.testing.assert_allclose(pc, x)
    np.testing.assert_allclose(size, np.full(x.shape, 4.0))
    with ember.config.override(num_cpu_devices=4):
        np.testing.assert_allclose(ember.pmap(lambda v: lax.pmin(v, "i"), "i")(x), mn)


@pytest.mark.parametrize("jitted", [False, True])
def test_gradients_of_invariant_inputs_are_summed_under_check_vma(jitted):
    """JAX's rule in shard_map(check_vma=True): a replicated parameter meets the batch through an
    implicit pvary, so its gradient inside the body is the sum over the devices (the gradient of
    the devices' summed losses), without an explicit psum; invariant losses are left alone."""
    with ember.config.override(num_cpu_devices=4):
        mesh = Mesh(np.array(ember.devices()), ("d",))
        grid = Mesh(np.array(ember.devices()).reshape(2, 2), ("a", "b"))
        w = jnp.ones(3) * 0.5
        x = jnp.arange(24.0).reshape(8, 3) / 10

        def loss(w, x):
            return jnp.sum((x @ w) ** 2) + jnp.sum(w ** 2)

        def mapped(body, m, in_specs, out_specs):
            f = ember.shard_map(body, mesh=m, in_specs=in_specs, out_specs=out_specs)
            return ember.jit(f) if jitted else f

        def total(devices):  # the summed losses of `devices` devices, each with its rows of x
            return lambda w: jnp.sum((x @ w) ** 2) + devices * jnp.sum(w ** 2)

        got = mapped(lambda w, x: ember.grad(loss)(w, x), mesh, (P(), P("d")), P())(w, x)
        np.testing.assert_allclose(got, ember.grad(total(4))(w), rtol=1e-5)
        gw, gx = mapped(lambda w, x: ember.grad(loss, argnums=(0, 1))(w, x), mesh, (P(), P("d")), (P(), P("d")))(w, x)
        np.testing.assert_allclose(gw, ember.grad(total(4))(w), rtol=1e-5)
        np.testing.assert_allclose(gx, ember.grad(lambda x: loss(w, x), argnums=0)(x), rtol=1e-5)
        summed = mapped(lambda w, x: ember.grad(lambda w: lax.psum(jnp.sum(jnp.sin(x @ w)), "d"))(w), mesh,
                        (P(), P("d")), P())(w, x)
        np.testing.assert_allclose(summed, ember.grad(lambda w: jnp.sum(jnp.sin(x @ w)))(w), rtol=1e-5)
        invariant = mapped(lambda w, x: ember.grad(lambda w: jnp.sum(w ** 3))(w), mesh, (P(), P("d")), P())(w, x)
        np.testing.assert_allclose(invariant, 3 * np.asarray(w) ** 2, rtol=1e-6)
        rows = mapped(lambda w, x: ember.grad(loss)(w, x), grid, (P(), P("a")), P())(w, x)  # (varies along a only)
        np.testing.assert_allclose(rows, ember.grad(total(2))(w), rtol=1e-5)
        unchecked = ember.shard_map(lambda w, x: ember.grad(loss)(w, x), mesh=mesh, in_specs=(P(), P("d")),
                                    out_specs=P("d"), check_vma=False)(w, x)
        np.testing.assert_allclose(unchecked[:3], ember.grad(loss)(w, x[:2]), rtol=1e-5)  # (per device: no sum)


@pytest.mark.parametrize("jitted", [False, True])
def test_collectives_within_axis_index_groups(jitted):
    """Groups of an axis's devices (JAX's axis_index_groups): each collective acts within the
    device's group, per device and under jit (as a batched program), and differentiates."""
    groups = [[0, 2], [1, 3]]
    x = np.arange(24, dtype=np.float32).reshape(4, 6) ** 1.5
    mine = {i: g for g in groups for i in g}
    with ember.config.override(num_cpu_devices=4):
        def run(f):
            mapped = ember.pmap(f, "i")
            return np.asarray(ember.jit(mapped)(x) if jitted else mapped(x))

        np.testing.assert_allclose(run(lambda a: lax.psum(a, "i", axis_index_groups=groups)),
                                   [x[mine[i]].sum(0) for i in range(4)], rtol=1e-6)
        np.testing.assert_allclose(run(lambda a: lax.pmean(a, "i", axis_index_groups=groups)),
                                   [x[mine[i]].mean(0) for i in range(4)], rtol=1e-6)
        np.testing.assert_allclose(run(lambda a: lax.pmax(a, "i", axis_index_groups=groups)),
                                   [x[mine[i]].max(0) for i in range(4)])
        np.testing.assert_allclose(run(lambda a: lax.pmin(a, "i", axis_index_groups=groups)),
                                   [x[mine[i]].min(0) for i in range(4)])
        np.testing.assert_allclose(run(lambda a: lax.all_gather(a, "i", axis_index_groups=groups)),
                                   [x[mine[i]] for i in range(4)])
        np.testing.assert_allclose(run(lambda a: lax.all_gather(a, "i", axis_index_groups=groups, tiled=True)),
                                   [x[mine[i]].reshape(-1) for i in range(4)])
        np.testing.assert_allclose(
            run(lambda a: lax.psum_scatter(a, "i", axis_index_groups=groups, tiled=True)),
            [x[mine[i]].sum(0)[3 * mine[i].index(i):3 * mine[i].index(i) + 3] for i in range(4)], rtol=1e-6)
        np.testing.assert_allclose(
            run(lambda a: lax.all_to_all(a, "i", 0, 0, axis_index_groups=groups, tiled=True)),
            [np.concatenate([x[m][3 * mine[i].index(i):3 * mine[i].index(i) + 3] for m in mine[i]]) for i in range(4)])
        weights = np.arange(24.0, dtype=np.float32).reshape(4, 6)
        grad = ember.grad(lambda a: jnp.sum(ember.pmap(lambda b: lax.psum(b * b, "i", axis_index_groups=groups),
                                                       "i")(a) * weights))(x)
        want = [2 * x[i] * weights[mine[i]].sum(0) for i in range(4)]
        np.testing.assert_allclose(grad, want, rtol=1e-5)
        with pytest.raises(ValueError, match="axis_index_groups must all have the same size"):
            run(lambda a: lax.psum(a, "i", axis_index_groups=[[0, 1], [2]]))
        with pytest.raises(ValueError, match="cover every index of the axis"):
            run(lambda a: lax.psum(a, "i", axis_index_groups=[[0, 1], [1, 2]]))


def test_device_put_lays_a_bare_partition_spec_over_the_current_mesh():
    """JAX's callbacks tutorial on 8 CPU devices: device_put(x, P('i')) under set_mesh (or `with
    mesh:`), then a shard_map over the placed array; with no mesh set, JAX's ValueError."""
    with ember.config.override(num_cpu_devices=8):
        mesh = Mesh(np.array(ember.devices()), ("i",))
        with pytest.raises(ValueError, match="Please set a mesh via `jax.set_mesh` if a PartitionSpec is passed "
                                             "to device_put"):
            ember.device_put(jnp.arange(8.0), P("i"))
        for context in (ember.sharding.set_mesh(mesh), mesh):
            with context:
                x = ember.device_put(jnp.arange(8.0), P("i"))
                assert x.sharding == NamedSharding(mesh, P("i")) and len(x.addressable_shards) == 8

                @functools.partial(ember.shard_map, in_specs=P("i"), out_specs=P("i"))
                def doubled_on_the_host(block):
                    return ember.pure_callback(lambda b: np.asarray(b) * 2, ember.ShapeDtypeStruct(block.shape,
                                                                                                    block.dtype), block)

                np.testing.assert_array_equal(doubled_on_the_host(x), np.arange(8.0) * 2)
