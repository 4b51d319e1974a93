"""Programs over 8 devices, run by ``tests/test_pjrt_spmd.py`` under JAX and under ember (on XLA's
CPU plugin) in fresh processes: ``python sharded.py ember|jax`` prints one JSON object of what
each case gives (values, output shardings, each device's block shape)."""
import json
import sys

import numpy as np

if sys.argv[1] == "ember":
    import ember

    ember.install_as_jax()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

out: dict = {}


def spec(x):
    return [list(e) if isinstance(e, tuple) else e for e in tuple(x.sharding.spec)]


def blocks(x):
    return sorted([s.device.id, list(s.data.shape), [[i.start, i.stop] for i in s.index]]
                  for s in x.addressable_shards)


def record(name, fn):
    try:
        out[name] = fn()
    except Exception as e:  # noqa: BLE001  (the error's type and the start of its message)
        out[name] = {"error": type(e).__name__, "message": str(e)[:300]}


AUTO = jax.sharding.AxisType.Auto
mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AUTO, AUTO))
x = np.arange(64, dtype=np.float32).reshape(8, 8)


def placed():
    a = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
    b = jax.device_put(a, NamedSharding(mesh, P(None, "x")))
    r = jax.device_put(x, NamedSharding(mesh, P()))
    return {"spec": spec(a), "blocks": blocks(a), "value": np.asarray(a).tolist(), "resharded": spec(b),
            "resharded_blocks": blocks(b), "resharded_value": np.asarray(b).tolist(),
            "replicated": [a.is_fully_replicated, r.is_fully_replicated], "devices": sorted(d.id for d in a.devices())}


def committed():
    a = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
    o1, o2 = jax.jit(lambda a: (jnp.sin(a) * 2, a.sum(axis=1)))(a)
    return {"specs": [spec(o1), spec(o2)], "blocks": [blocks(o1), blocks(o2)],
            "values": [np.asarray(o1).round(4).tolist(), np.asarray(o2).tolist()]}


def in_out_shardings():
    w = np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16)
    f = jax.jit(lambda a, w: jnp.tanh(a @ w), in_shardings=(NamedSharding(mesh, P("x", None)),
                                                          NamedSharding(mesh, P(None, "y"))),
                out_shardings=NamedSharding(mesh, P("x", "y")))
    o = f(x / 64, w)
    return {"spec": spec(o), "blocks": blocks(o), "value": np.asarray(o).round(5).tolist()}


def constraint():
    a = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
    o = jax.jit(lambda a: jax.lax.with_sharding_constraint(a * 2, NamedSharding(mesh, P(None, "x"))) + 1)(a)
    return {"spec": spec(o), "blocks": blocks(o), "value": np.asarray(o).tolist()}


def from_callback():
    s = NamedSharding(mesh, P("y", "x"))
    a = jax.make_array_from_callback((8, 8), s, lambda index: x[index])
    parts = [jax.device_put(x[i], d) for d, i in s.addressable_devices_indices_map((8, 8)).items()]
    b = jax.make_array_from_single_device_arrays((8, 8), s, parts)
    return {"spec": spec(a), "blocks": blocks(a), "value": np.asarray(a).tolist(), "spec_b": spec(b),
            "blocks_b": blocks(b), "value_b": np.asarray(b).tolist()}


def data_parallel():
    import optax

    dmesh = jax.make_mesh((8,), ("data",), axis_types=(AUTO,))
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=(16, 32)).astype(np.float32) * 0.3, "b1": np.zeros(32, np.float32),
              "w2": rng.normal(size=(32, 4)).astype(np.float32) * 0.3, "b2": np.zeros(4, np.float32)}
    xs = rng.normal(size=(64, 16)).astype(np.float32)
    ys = rng.integers(0, 4, size=64)
    replicated = NamedSharding(dmesh, P())
    params = jax.device_put(params, replicated)
    xs = jax.device_put(xs, NamedSharding(dmesh, P("data")))
    ys = jax.device_put(ys, NamedSharding(dmesh, P("data")))
    opt = optax.adam(1e-2)
    state = opt.init(params)

    def loss(p, xb, yb):
        h = jax.nn.relu(xb @ p["w1"] + p["b1"])
        logits = h @ p["w2"] + p["b2"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()

    @jax.jit
    def step(p, s, xb, yb):
        value, g = jax.value_and_grad(loss)(p, xb, yb)
        updates, s = opt.update(g, s, p)
        return optax.apply_updates(p, updates), s, value

    losses = []
    for _ in range(6):
        params, state, value = step(params, state, xs, ys)
        losses.append(float(value))
    return {"losses": losses, "w1_spec": spec(params["w1"])}


def transformer_block():
    tmesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AUTO, AUTO))
    rng = np.random.default_rng(1)
    d, h, t, b = 32, 64, 8, 4
    p = {"wq": rng.normal(size=(d, d)), "wk": rng.normal(size=(d, d)), "wv": rng.normal(size=(d, d)),
         "wo": rng.normal(size=(d, d)), "w1": rng.normal(size=(d, h)), "w2": rng.normal(size=(h, d))}
    p = {k: (v / np.sqrt(v.shape[0])).astype(np.float32) for k, v in p.items()}
    shard = {"wq": P(None, "model"), "wk": P(None, "model"), "wv": P(None, "model"), "wo": P("model", None),
             "w1": P(None, "model"), "w2": P("model", None)}
    p = {k: jax.device_put(v, NamedSharding(tmesh, shard[k])) for k, v in p.items()}
    xb = jax.device_put(rng.normal(size=(b, t, d)).astype(np.float32), NamedSharding(tmesh, P("data")))

    def block(p, x):
        q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
        att = jax.nn.softmax(jnp.einsum("btd,bsd->bts", q, k) / np.sqrt(d), axis=-1)
        x = x + jnp.einsum("bts,bsd->btd", att, v) @ p["wo"]
        x = x + jax.nn.gelu(x @ p["w1"]) @ p["w2"]
        return jnp.mean(x ** 2)

    @jax.jit
    def step(p, x):
        value, g = jax.value_and_grad(block)(p, x)
        return jax.tree.map(lambda a, b: a - 0.05 * b, p, g), value

    losses = []
    for _ in range(4):
        p, value = step(p, xb)
        losses.append(float(value))
    return {"losses": losses, "specs": {k: spec(v) for k, v in sorted(p.items())}}


def two_meshes():
    other = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AUTO, AUTO))
    a = jax.device_put(x, NamedSharding(mesh, P("x")))
    b = jax.device_put(x, NamedSharding(other, P("x")))
    o = jax.jit(lambda a, b: a + b)(a, b)
    return {"spec": spec(o), "blocks": blocks(o), "value": np.asarray(o).tolist()}


def collectives():
    from jax import shard_map

    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    w = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)

    @jax.jit
    def matmul(a, w):  # (the shard_map tutorial's: contract over a split dimension, then psum)
        return shard_map(lambda x, y: jax.lax.psum(x @ y, "y"), mesh=mesh, in_specs=(P("x", "y"), P("y", None)),
                         out_specs=P("x", None))(a, w)

    def ring(b):  # a ring all-reduce by ppermute
        n = 4
        total, piece = b, b
        for _ in range(n - 1):
            piece = jax.lax.ppermute(piece, "y", [(i, (i + 1) % n) for i in range(n)])
            total = total + piece
        return total

    def sm(f, in_specs, out_specs, **kw):
        return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kw)

    cases = {
        "matmul": lambda: matmul(a, w),
        "all_gather": lambda: jax.jit(sm(lambda b: jax.lax.all_gather(b, "y", tiled=True), P("x", "y"),
                                         P("x", None), check_vma=False))(a),
        "all_gather_stacked": lambda: jax.jit(sm(lambda b: jax.lax.all_gather(b, "x"), P("x", "y"),
                                                 P(None, None, "y"), check_vma=False))(a),
        "psum_scatter": lambda: jax.jit(sm(lambda b: jax.lax.psum_scatter(b, "y", scatter_dimension=1, tiled=True),
                                           P("x", None), P("x", "y")))(a),
        "ring": lambda: jax.jit(sm(ring, P("x", "y"), P("x", "y")))(a),
        "all_to_all": lambda: jax.jit(sm(lambda b: jax.lax.all_to_all(b, "y", 0, 1, tiled=True), P("x", "y"),
                                         P("x", "y")))(a),
        "axis_index": lambda: jax.jit(sm(lambda b: b * 0 + jax.lax.axis_index("x") * 10 + jax.lax.axis_index("y"),
                                         P("x", "y"), P("x", "y")))(a),
        "pmean_pmax": lambda: jax.jit(sm(lambda b: jax.lax.pmean(b, ("x", "y")) + jax.lax.pmax(b, "x"),
                                         P("x", "y"), P(None, "y")))(a),
        "grad": lambda: jax.jit(jax.grad(lambda w: jnp.sum(matmul(a, w) ** 2) / 1000))(w),
        "grad_replicated": lambda: jax.jit(jax.grad(lambda w: jnp.sum(sm(lambda b, v: jnp.tanh(b @ v), (P("x"), P()),
                                                                         P("x"))(a / 64, w))))(w),
        "grad_over_both": lambda: jax.jit(jax.grad(lambda v: jnp.sum(sm(lambda b, u: jnp.sin(b) * u, (P("x", "y"), P()),
                                                                        P("x", "y"))(a, v) ** 2)))(w[:4, :2]),
        "vmap": lambda: jax.jit(jax.vmap(sm(lambda b: jax.lax.psum(b, "x"), P("x"), P())))(np.stack([a[:, 0],
                                                                                                   a[:, 1]])),
        "eager": lambda: sm(lambda b: jax.lax.psum(b, "y"), P(None, "y"), P())(a),
    }
    found = {}
    for k, f in cases.items():
        try:
            v = f()
            found[k] = {"value": np.asarray(v).round(4).tolist(), "spec": spec(v), "blocks": blocks(v)}
        except Exception as e:  # noqa: BLE001
            found[k] = {"error": type(e).__name__, "message": str(e)[:300]}
    return found


def pmapped():
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    c = np.linspace(0, 1, 4, dtype=np.float32)
    f = jax.pmap(lambda x, y: jax.lax.psum(x * y, "i") + jax.lax.axis_index("i"), axis_name="i", in_axes=(0, None))
    g = jax.pmap(lambda x: (jax.lax.pmean(x, "i"), x.sum()), axis_name="i", out_axes=(1, 0))
    h = jax.pmap(jax.grad(lambda x: jnp.sum(jnp.sin(x) * jax.lax.psum(x, "i"))), axis_name="i")
    found = {}
    for k, fn in {"psum": lambda: f(a, c), "out_axes": lambda: g(a), "grad": lambda: h(a / 8)}.items():
        try:
            v = fn()
            vs = v if isinstance(v, tuple) else (v,)
            found[k] = [[np.asarray(u).round(4).tolist(), list(u.shape)] for u in vs]
        except Exception as e:  # noqa: BLE001
            found[k] = {"error": type(e).__name__, "message": str(e)[:300]}
    return found


def flax_partitioning():
    import flax.linen as nn

    pmesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(AUTO, AUTO))

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(16, kernel_init=nn.with_partitioning(nn.initializers.lecun_normal(), (None, "model")))(x)
            return nn.Dense(4, kernel_init=nn.with_partitioning(nn.initializers.lecun_normal(), ("model", None)))(
                nn.relu(x))

    model = Block()
    xb = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    abstract = jax.eval_shape(model.init, jax.random.key(0), xb)
    specs = nn.get_partition_spec(abstract)
    shardings = jax.tree.map(lambda p: NamedSharding(pmesh, p), specs)
    params = jax.jit(model.init, out_shardings=shardings)(jax.random.key(0), xb)
    out = jax.jit(model.apply)(params, jax.device_put(xb, NamedSharding(pmesh, P("data"))))
    leaves = jax.tree_util.tree_leaves_with_path(params)
    return {"specs": {jax.tree_util.keystr(k): spec(v) for k, v in leaves},
            "blocks": {jax.tree_util.keystr(k): blocks(v) for k, v in leaves},
            "out": np.asarray(out).round(4).tolist(), "out_spec": spec(out)}


def errors():
    found = {}

    def catch(name, fn):
        try:
            fn()
            found[name] = None
        except Exception as e:  # noqa: BLE001
            found[name] = [c.__name__ for c in type(e).__mro__[:2]]

    catch("mesh_too_large", lambda: jax.make_mesh((4, 4), ("x", "y"), axis_types=(AUTO, AUTO)))
    catch("unknown_axis", lambda: NamedSharding(mesh, P("z")))
    catch("not_divisible", lambda: jax.device_put(np.zeros((7, 8), np.float32), NamedSharding(mesh, P("x"))))
    other = jax.make_mesh((2, 2), ("x", "y"), axis_types=(AUTO, AUTO), devices=jax.devices()[4:])
    a = jax.device_put(x, NamedSharding(mesh, P("x")))
    b = jax.device_put(x, NamedSharding(other, P("x")))
    catch("two_device_sets", lambda: jax.jit(lambda a, b: a + b)(a, b))
    return found


for name, fn in [("placed", placed), ("committed", committed), ("in_out_shardings", in_out_shardings),
                 ("constraint", constraint), ("from_callback", from_callback), ("data_parallel", data_parallel),
                 ("transformer_block", transformer_block), ("two_meshes", two_meshes), ("collectives", collectives),
                 ("pmapped", pmapped), ("flax_partitioning", flax_partitioning),
                 ("errors", errors)]:
    record(name, fn)
print("RESULT " + json.dumps(out))
