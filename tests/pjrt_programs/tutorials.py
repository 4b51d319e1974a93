"""The programs of JAX's tutorials "Distributed arrays and automatic parallelization" and "Manual
parallelism with shard_map", cell by cell, run by ``tests/test_pjrt_tutorials.py`` under JAX and
under ember (on XLA's CPU plugin, 8 devices) in fresh processes: ``python tutorials.py ember|jax``
prints one JSON object of what each case gives (rounded values, shapes, partition specs, each
device's block, the type names of the errors the tutorials show).

Changed from the tutorials: the imports; arrays the tutorials make 8192 wide are 64 wide (the
shardings and the programs are the same) and the training loops take 4 steps, not 30; three
eager shard_maps run under jit (JAX runs an eager body op by op); every mesh has Auto axes (JAX's ``make_mesh`` now
defaults to Explicit ones, which the distributed-arrays tutorial predates and ember does not have);
``print``s become recorded cases; the cells that only draw a sharding
(``jax.debug.visualize_array_sharding``, which ember lacks) or time a computation (``%timeit``)
are left out, their arrays' specs and blocks recorded instead."""
import json
import sys
from functools import partial
from typing import Any, Callable, Optional

import numpy as np

if sys.argv[1] == "ember":
    import ember

    ember.install_as_jax()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402
from jax.tree_util import tree_all, tree_map  # noqa: E402

P = PartitionSpec
Auto = jax.sharding.AxisType.Auto
out: dict = {}


def make_mesh(shape: tuple, names: tuple) -> Any:
    """``jax.make_mesh`` with Auto axes (see the module's docstring)."""
    return jax.make_mesh(shape, names, axis_types=(Auto,) * len(shape))


def spec(x: Any) -> list:
    return [list(e) if isinstance(e, tuple) else e for e in tuple(x.sharding.spec)]


def blocks(x: Any) -> list:
    return sorted([s.device.id, list(s.data.shape), [[i.start, i.stop] for i in s.index]]
                  for s in x.addressable_shards)


def arr(x: Any, *, value: bool = True) -> dict:
    """An array as the cases record it: shape, dtype, value, spec (if named) and blocks."""
    found: dict = {"shape": list(x.shape), "dtype": str(x.dtype)}
    if value:
        found["value"] = np.asarray(x).round(5).tolist()
    if hasattr(x.sharding, "spec"):
        found["spec"] = spec(x)
    found["blocks"] = blocks(x)
    return found


def case(name: str, fn: Callable[[], Any]) -> Any:
    try:
        out[name] = fn()
    except Exception as e:  # noqa: BLE001  (the error's type and the start of its message)
        out[name] = {"error": type(e).__name__, "message": str(e)[:300]}
    return out[name]


def error_of(fn: Callable[[], Any]) -> Optional[str]:
    """The type name of the error ``fn`` raises (the tutorials' try/except cells), else None."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        return type(e).__name__
    return None


# ---- Distributed arrays and automatic parallelization ----------------------------------------------
assert len(jax.local_devices()) >= 8
N = 64  # (the tutorial's 8192)
STEPS = 4  # (the tutorial's 30 training steps)


def dist_intro() -> None:
    mesh = make_mesh((4, 2), ("x", "y"))
    x = jax.random.normal(jax.random.key(0), (N, N))
    y = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
    case("dist.intro.x", lambda: arr(x))
    case("dist.intro.y", lambda: arr(y))
    case("dist.intro.sin", lambda: arr(jnp.sin(y)))


def dist_named() -> None:
    x = jax.random.normal(jax.random.key(0), (N, N))
    mesh = make_mesh((4, 2), ("a", "b"))
    case("dist.named.a_b", lambda: arr(jax.device_put(x, NamedSharding(mesh, P("a", "b")))))
    default_mesh = make_mesh((4, 2), ("a", "b"))

    def mesh_sharding(pspec: PartitionSpec, mesh: Optional[Mesh] = None) -> NamedSharding:
        return NamedSharding(default_mesh if mesh is None else mesh, pspec)

    for name, pspec in [("a_b", P("a", "b")), ("b_a", P("b", "a")), ("a_none", P("a", None)),
                        ("none_b", P(None, "b")), ("none_a", P(None, "a")), ("ab_none", P(("a", "b"), None))]:
        case(f"dist.mesh_sharding.{name}", lambda pspec=pspec: arr(jax.device_put(x, mesh_sharding(pspec))))


def dist_follows() -> None:
    x = jax.random.normal(jax.random.key(0), (N, N))
    mesh = make_mesh((4, 2), ("a", "b"))
    x = jax.device_put(x, NamedSharding(mesh, P("a", "b")))
    case("dist.follows.sin", lambda: arr(jnp.sin(x)))
    y = jax.device_put(x, NamedSharding(mesh, P("a", None)))
    z = jax.device_put(x, NamedSharding(mesh, P(None, "b")))
    w = case("dist.follows.dot", lambda: arr(jnp.dot(y, z)))
    x_single = jax.device_put(x, jax.devices()[0])
    case("dist.follows.single", lambda: arr(x_single, value=False))
    case("dist.follows.allclose", lambda: bool(np.allclose(jnp.dot(x_single, x_single), jnp.dot(y, z),
                                                           rtol=1e-5, atol=1e-4)))
    if "error" not in w:
        case("dist.follows.copy", lambda: arr(jnp.copy(jnp.dot(y, z))))

    # When explicit shardings disagree, JAX errors; uncommitted arrays move.
    sharding1 = NamedSharding(Mesh(jax.devices()[:4], "x"), P("x"))
    sharding2 = NamedSharding(Mesh(jax.devices()[4:], "x"), P("x"))
    y = jax.device_put(x, sharding1)
    z = jax.device_put(x, sharding2)
    case("dist.disagree.device_sets", lambda: error_of(lambda: y + z))
    devices = jax.devices()
    permuted_devices = [devices[i] for i in [0, 1, 2, 3, 6, 7, 4, 5]]
    sharding1 = NamedSharding(Mesh(devices, "x"), P("x"))
    sharding2 = NamedSharding(Mesh(permuted_devices, "x"), P("x"))
    y = jax.device_put(x, sharding1)
    z = jax.device_put(x, sharding2)
    case("dist.disagree.device_order", lambda: error_of(lambda: y + z))
    y = jax.device_put(x, sharding1)
    case("dist.uncommitted.ones_like", lambda: arr(y + jnp.ones_like(y)))
    case("dist.uncommitted.arange", lambda: arr(y + jnp.arange(y.size).reshape(y.shape)))


def dist_constraint() -> None:
    mesh = make_mesh((4, 2), ("x", "y"))
    x = jax.random.normal(jax.random.key(0), (N, N))
    x = jax.device_put(x, NamedSharding(mesh, P("x", "y")))

    @jax.jit
    def f(x):
        x = x + 1
        y = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P("y", "x")))
        return y

    case("dist.constraint.y_x", lambda: arr(f(x)))

    @jax.jit
    def g(x):
        x = x + 1
        y = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P()))
        return y

    case("dist.constraint.replicated", lambda: arr(g(x)))


def dist_networks() -> None:
    def predict(params, inputs):
        for W, b in params:
            outputs = jnp.dot(inputs, W) + b
            inputs = jnp.maximum(outputs, 0)
        return outputs

    def loss(params, batch):
        inputs, targets = batch
        predictions = predict(params, inputs)
        return jnp.mean(jnp.sum((predictions - targets)**2, axis=-1))

    loss_jit = jax.jit(loss)
    gradfun = jax.jit(jax.grad(loss))

    def init_layer(key, n_in, n_out):
        k1, k2 = jax.random.split(key)
        W = jax.random.normal(k1, (n_in, n_out)) / jnp.sqrt(n_in)
        b = jax.random.normal(k2, (n_out,))
        return W, b

    def init_model(key, layer_sizes, batch_size):
        key, *keys = jax.random.split(key, len(layer_sizes))
        params = list(map(init_layer, keys, layer_sizes[:-1], layer_sizes[1:]))
        key, *keys = jax.random.split(key, 3)
        inputs = jax.random.normal(keys[0], (batch_size, layer_sizes[0]))
        targets = jax.random.normal(keys[1], (batch_size, layer_sizes[-1]))
        return params, (inputs, targets)

    layer_sizes = [784, N, N, N, 10]
    batch_size = N
    params, batch = init_model(jax.random.key(0), layer_sizes, batch_size)
    case("dist.nn.init", lambda: [float(jnp.sum(W)) for W, _ in params] + [float(jnp.sum(batch[0]))])

    # 8-way batch data parallelism
    mesh = make_mesh((8,), ("batch",))
    sharding = NamedSharding(mesh, P("batch"))
    replicated_sharding = NamedSharding(mesh, P())
    batch = jax.device_put(batch, sharding)
    params = jax.device_put(params, replicated_sharding)
    case("dist.dp.loss", lambda: float(loss_jit(params, batch)))
    step_size = 1e-5

    def train(params, steps=STEPS):
        for _ in range(steps):
            grads = gradfun(params, batch)
            params = [(W - step_size * dW, b - step_size * db) for (W, b), (dW, db) in zip(params, grads)]
        return params

    trained = train(params)
    case("dist.dp.trained_loss", lambda: float(loss_jit(trained, batch)))
    case("dist.dp.grads", lambda: [arr(g, value=False) for g in jax.tree.leaves(gradfun(trained, batch))])
    batch_single = jax.device_put(batch, jax.devices()[0])
    params_single = jax.device_put(trained, jax.devices()[0])
    case("dist.dp.single_device_grads", lambda: bool(tree_all(tree_map(
        partial(np.allclose, rtol=1e-4, atol=1e-5), gradfun(params_single, batch_single), gradfun(trained, batch)))))

    # 4-way batch data parallelism and 2-way model tensor parallelism
    mesh = make_mesh((4, 2), ("batch", "model"))
    batch = jax.device_put(batch, NamedSharding(mesh, P("batch", None)))
    case("dist.tp.batch", lambda: [arr(b, value=False) for b in batch])
    replicated_sharding = NamedSharding(mesh, P())
    (W1, b1), (W2, b2), (W3, b3), (W4, b4) = trained
    W1 = jax.device_put(W1, replicated_sharding)
    b1 = jax.device_put(b1, replicated_sharding)
    W2 = jax.device_put(W2, NamedSharding(mesh, P(None, "model")))
    b2 = jax.device_put(b2, NamedSharding(mesh, P("model")))
    W3 = jax.device_put(W3, NamedSharding(mesh, P("model", None)))
    b3 = jax.device_put(b3, replicated_sharding)
    W4 = jax.device_put(W4, replicated_sharding)
    b4 = jax.device_put(b4, replicated_sharding)
    params = (W1, b1), (W2, b2), (W3, b3), (W4, b4)
    case("dist.tp.W2_W3", lambda: [arr(W2, value=False), arr(W3, value=False)])
    case("dist.tp.loss", lambda: float(loss_jit(params, batch)))
    params = train(params)
    case("dist.tp.trained_loss", lambda: float(loss_jit(params, batch)))
    (W1, b1), (W2, b2), (W3, b3), (W4, b4) = params
    case("dist.tp.trained_W2_W3", lambda: [arr(W2, value=False), arr(W3, value=False)])


# ---- Manual parallelism with shard_map ------------------------------------------------------------------
def allclose(a, b):
    return tree_all(tree_map(partial(jnp.allclose, atol=1e-2, rtol=1e-2), a, b))


def shmap_intro() -> None:
    mesh = make_mesh((4, 2), ("x", "y"))
    jax.set_mesh(mesh)
    a = jax.device_put(jnp.arange(8 * 16.).reshape(8, 16), P("x", "y"))
    b = jax.device_put(jnp.arange(16 * 4.).reshape(16, 4), P("y", None))

    @jax.shard_map(in_specs=(P("x", "y"), P("y", None)), out_specs=P("x", None))
    def matmul_basic(a_block, b_block):
        c_partialsum = jnp.dot(a_block, b_block)
        c_block = jax.lax.psum(c_partialsum, "y")
        return c_block

    c = matmul_basic(a, b)
    case("shmap.matmul_basic", lambda: arr(c))
    case("shmap.matmul_basic.allclose", lambda: bool(allclose(c, jnp.dot(a, b, out_sharding=P("x", None)))))
    case("shmap.a_b_blocks", lambda: [arr(a, value=False), arr(b, value=False)])

    @jax.jit
    def matmul_reference(a, b):
        return jnp.dot(a, b, out_sharding=P("x", None))

    case("shmap.matmul_reference", lambda: arr(matmul_reference(a, b)))

    def check_vmap(f, xs):
        ans = jax.vmap(f, in_axes=(0,), out_axes=0)(xs)
        expected = jnp.stack([f(x) for x in xs])
        return [bool(allclose(ans, expected)), np.asarray(ans).tolist()]

    case("shmap.check_vmap", lambda: check_vmap(lambda x: x @ x, jnp.arange(12).reshape(4, 3)))
    devices = np.array(jax.devices()[:4])
    mesh = Mesh(devices, ("i",))
    jax.set_mesh(mesh)

    def check_shmap(f, y):
        ans = jax.shard_map(f, in_specs=P("i"), out_specs=P("i"))(y)
        expected = jnp.concatenate([f(y_blk) for y_blk in jnp.split(y, mesh.shape["i"])])
        return [bool(allclose(ans, expected)), arr(ans)]

    case("shmap.check_shmap", lambda: check_shmap(lambda x: x.T @ x, jnp.arange(32).reshape(8, 4)))


def shmap_specs() -> None:
    mesh = make_mesh((4, 2), ("i", "j"))
    jax.set_mesh(mesh)
    seen: list = []

    @jax.shard_map(in_specs=P("i", None), out_specs=P("i", "j"))
    def f1(x_block):
        seen.append(list(x_block.shape))  # (the tutorial prints it)
        return x_block

    x1 = jax.device_put(jnp.arange(12 * 12).reshape(12, 12), P("i", None))
    case("shmap.in_specs.f1", lambda: [arr(f1(x1)), seen[-1]])

    @jax.shard_map(in_specs=P("i", "j"), out_specs=P("i", "j"))
    def f2(x_block):
        seen.append(list(x_block.shape))
        return x_block

    x = jnp.arange(12 * 12).reshape(12, 12)
    x_ = jnp.tile(x, (1, mesh.shape["j"]))
    x_ = jax.device_put(x, P("i", "j"))
    case("shmap.in_specs.f2", lambda: [arr(f2(x_)), seen[-1]])

    auto_mesh = make_mesh((4, 2), ("i", "j"))
    with jax.set_mesh(auto_mesh):
        x = jnp.array([[3.]])
        for name, pspec in [("i_j", P("i", "j")), ("i_none", P("i", None)), ("none_none", P(None, None))]:
            case(f"shmap.out_specs.{name}", lambda pspec=pspec: arr(jax.shard_map(lambda: x, in_specs=(),
                                                                                  out_specs=pspec)()))

    @jax.shard_map(in_specs=P("i", "j"), out_specs=P("i", None))
    def f3(x_block):
        return jax.lax.psum(x_block, "j")

    x = jax.device_put(jnp.arange(12 * 12).reshape(12, 12), P("i", "j"))
    case("shmap.out_specs.f3", lambda: arr(f3(x)))

    @jax.shard_map(in_specs=P("i", "j"), out_specs=P(None, "j"))
    def f4(x_block):
        return jax.lax.psum(x_block, "i")

    case("shmap.out_specs.f4", lambda: arr(f4(x)))

    @jax.shard_map(in_specs=P("i", "j"), out_specs=P(None, None))
    def f5(x_block):
        return jax.lax.psum(x_block, ("i", "j"))

    case("shmap.out_specs.f5", lambda: arr(f5(x)))


def shmap_vma() -> None:
    mesh = make_mesh((2,), ("i",))
    jax.set_mesh(mesh)

    @jax.shard_map(in_specs=P("i"), out_specs=P("i"))
    def f(x):
        return 2 * x

    x = jax.device_put(jnp.arange(6.), P("i"))
    case("shmap.vma.split", lambda: arr(f(x)))

    @jax.shard_map(in_specs=P(), out_specs=P())
    def g(x):
        return 2 * x

    case("shmap.vma.unsplit", lambda: arr(g(jnp.arange(6.))))

    @jax.shard_map(in_specs=P("i"), out_specs=P())
    def h(x):
        return jax.lax.psum(x, "i")

    case("shmap.vma.psum", lambda: arr(h(x)))
    types: list = []

    @jax.shard_map(in_specs=P("i"), out_specs=P())
    def k(x):
        types.append(str(jax.typeof(x)))
        y = jax.lax.psum(x, "i")
        types.append(str(jax.typeof(y)))
        return y

    case("shmap.vma.typeof", lambda: [arr(k(x)), types])
    mesh = make_mesh((4, 2), ("i", "j"))
    jax.set_mesh(mesh)

    @jax.shard_map(in_specs=P("i", "j"), out_specs=P("i"))
    def m(x):
        types.append(str(jax.typeof(x)))
        y = jax.lax.psum(x, "j")
        assert jax.typeof(y).manual_axis_type.varying == {"i"}
        return y

    case("shmap.vma.typeof_varying", lambda: arr(m(jax.device_put(jnp.arange(8 * 4.).reshape(8, 4), P("i", "j")))))
    mesh = make_mesh((2,), ("i",))
    jax.set_mesh(mesh)
    x = jax.device_put(jnp.arange(6.), P("i"))
    case("shmap.vma.out_specs_error",
         lambda: error_of(lambda: jax.shard_map(lambda x: x, in_specs=P("i"), out_specs=P())(x)))
    pcast_types: list = []

    @jax.shard_map(in_specs=P(), out_specs=None)
    def n(x):
        pcast_types.append(str(jax.typeof(x)))
        y = jax.lax.pcast(x, "i", to="varying")
        pcast_types.append(str(jax.typeof(y)))

    case("shmap.vma.pcast", lambda: [n(jnp.arange(6.)), pcast_types])

    @jax.shard_map(in_specs=(P("i"), P()), out_specs=P("i"))
    def p(x, y):
        return x * y

    # (the jaxpr's text differs: JAX's shows its pvary equations and varying types; its output types compared)
    case("shmap.vma.make_jaxpr", lambda: [list(a.shape) for a in jax.make_jaxpr(p)(x, jnp.arange(3.)).out_avals])

    @jax.shard_map(in_specs=(P("i"), P()), out_specs=P("i"))
    def q(x, y):
        def body(carry, _):
            c1, c2 = carry
            return (c2, c1), ()
        (x_, y_), _ = jax.lax.scan(body, (x, y), (), length=2)
        return x_, y_

    case("shmap.vma.scan_error", lambda: error_of(lambda: q(jnp.arange(6.), jnp.arange(3.))))

    @jax.shard_map(in_specs=(P("i"), P()), out_specs=P("i"))
    def r(x, y):
        def body(carry, _):
            c1, c2 = carry
            return (c2, c1), ()
        y = jax.lax.pcast(y, "i", to="varying")
        (x_, y_), _ = jax.lax.scan(body, (x, y), (), length=2)
        return x_, y_

    case("shmap.vma.scan_pcast", lambda: [arr(v) for v in r(x, jnp.arange(3.))])


def shmap_collectives() -> None:
    mesh1d = Mesh(jax.devices()[:4], ("i",))
    jax.set_mesh(mesh1d)

    @jax.shard_map(mesh=mesh1d, in_specs=P("i"), out_specs=P(None))
    def f1(x_block):
        return jax.lax.psum(x_block, "i")

    x = jnp.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2])
    case("shmap.psum.1d", lambda: arr(f1(x)))
    mesh2d = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("i", "j"))
    jax.set_mesh(mesh2d)

    @jax.shard_map(mesh=mesh2d, in_specs=P("i", "j"), out_specs=P(None, "j"))
    def f2(x_block):
        return jax.lax.psum(x_block, "i")

    case("shmap.psum.2d_i", lambda: arr(f2(jnp.arange(16).reshape(4, 4))))

    @jax.shard_map(mesh=mesh2d, in_specs=P("i", "j"), out_specs=P(None, None))
    def f3(x_block):
        return jax.lax.psum(x_block, ("i", "j"))

    case("shmap.psum.2d_ij", lambda: arr(f3(jnp.arange(16).reshape(4, 4))))
    jax.set_mesh(mesh1d)

    @jax.shard_map(mesh=mesh1d, in_specs=P("i"), out_specs=P("i"))
    def f4(x_block):
        return jax.lax.all_gather(x_block, "i", tiled=True)

    x = jnp.array([3, 9, 5, 2])
    case("shmap.all_gather.tiled", lambda: arr(f4(x)))

    @jax.shard_map(mesh=mesh1d, in_specs=P("i"), out_specs=P("i"))
    def f5(x_block):
        return jax.lax.all_gather(x_block, "i", tiled=False)

    case("shmap.all_gather.stacked", lambda: arr(f5(x)))

    @jax.shard_map(in_specs=P("i"), out_specs=P("i"))
    def f6(x_block):
        return jax.lax.psum_scatter(x_block, "i", tiled=True)

    x = jnp.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 1, 2])
    case("shmap.psum_scatter", lambda: arr(f6(x)))

    @jax.shard_map(in_specs=P("i"), out_specs=P("i"))
    def f7(x_block):
        sz = jax.lax.axis_size("i")
        return jax.lax.ppermute(x_block, "i", [(i, (i + 1) % sz) for i in range(sz)])

    case("shmap.ppermute", lambda: arr(f7(jnp.arange(8))))

    def psum_scatter(x, axis_name, *, tiled=False):
        size = jax.lax.axis_size(axis_name)
        idx = jax.lax.axis_index(axis_name)
        if tiled:
            x = x.reshape(size, -1, *x.shape[1:])
        shift = partial(jax.lax.ppermute, axis_name=axis_name, perm=[(i, (i - 1) % size) for i in range(size)])
        for i in range(1, size):
            update = shift(x[(idx + i) % size])
            x = x.at[(idx + i + 1) % size].add(update)
        return x[idx]

    @jax.jit  # (here only: JAX runs an eager shard_map's body op by op, some 10 s for this cell)
    @jax.shard_map(in_specs=P("i"), out_specs=P("i"))
    def f8(x_block):
        return psum_scatter(x_block, "i", tiled=True)

    case("shmap.psum_scatter_by_ppermute", lambda: arr(f8(x)))

    @jax.shard_map(mesh=mesh1d, in_specs=P("i"), out_specs=P("i"))
    def f9(x_block):
        return jax.lax.all_to_all(x_block, "i", split_axis=0, concat_axis=0, tiled=True)

    case("shmap.all_to_all", lambda: arr(f9(x)))


def shmap_matmuls() -> None:
    mesh = Mesh(jax.devices()[:4], ("i",))
    jax.set_mesh(mesh)

    def device_put(x, pspec):
        return jax.device_put(x, NamedSharding(mesh, pspec))

    lhs_spec = P("i", None)
    lhs = device_put(jax.random.normal(jax.random.key(0), (8, 8)), lhs_spec)
    rhs_spec = P("i", None)
    rhs = device_put(jax.random.normal(jax.random.key(1), (8, 4)), rhs_spec)

    @jax.jit
    @jax.shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_allgather(lhs_block, rhs_block):
        rhs = jax.lax.all_gather(rhs_block, "i", tiled=True)
        return lhs_block @ rhs

    @jax.jit
    @jax.shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_allgather_overlapped(lhs_block, rhs_block):
        size = jax.lax.axis_size("i")
        idx = jax.lax.axis_index("i")
        shift = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i + 1) % size) for i in range(size)])
        B = lhs_block.shape[1] // size
        lhs_blocks = lambda i: lax.dynamic_slice_in_dim(lhs_block, i * B, B, 1)  # noqa: E731
        out_block = lhs_blocks(idx) @ rhs_block
        for i in range(1, size):
            rhs_block = shift(rhs_block)
            out_block += lhs_blocks((idx - i) % size) @ rhs_block
        return out_block

    @jax.jit
    @jax.shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_allgather_overlapped_bidi(lhs_block, rhs_block):
        size = jax.lax.axis_size("i")
        idx = jax.lax.axis_index("i")
        shift_up = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i + 1) % size) for i in range(size)])
        shift_dn = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i - 1) % size) for i in range(size)])
        B = lhs_block.shape[1] // size // 2
        lhs_blocks = lambda i, hi: lax.dynamic_slice_in_dim(lhs_block, (2 * i + hi) * B, B, 1)  # noqa: E731

        def block_matmul(rhs_lo, rhs_hi, i_lo, i_hi):
            lhs_lo = jnp.pad(lhs_blocks(i_lo, 0), [(0, 0), (0, B)])
            lhs_hi = jnp.pad(lhs_blocks(i_hi, 1), [(0, 0), (B, 0)])
            rhs_lo = jnp.pad(rhs_lo, [(0, B), (0, 0)])
            rhs_hi = jnp.pad(rhs_hi, [(B, 0), (0, 0)])
            return (lhs_lo + lhs_hi) @ (rhs_lo + rhs_hi)

        rhs_block_lo, rhs_block_hi = jnp.split(rhs_block, 2, axis=0)
        out_block = block_matmul(rhs_block_lo, rhs_block_hi, idx, idx)
        for i in range(1, size):
            rhs_block_lo = shift_up(rhs_block_lo)
            rhs_block_hi = shift_dn(rhs_block_hi)
            out_block += block_matmul(rhs_block_lo, rhs_block_hi, (idx - i) % size, (idx + i) % size)
        return out_block

    for name, fn in [("allgather", matmul_allgather), ("allgather_overlapped", matmul_allgather_overlapped),
                     ("allgather_overlapped_bidi", matmul_allgather_overlapped_bidi)]:
        case(f"shmap.matmul.{name}", lambda fn=fn: [arr(o := fn(lhs, rhs)),
                                                    bool(jnp.allclose(o, lhs @ rhs, atol=1e-3, rtol=1e-3))])
    lhs_spec = P(None, "i")
    lhs = device_put(lhs, lhs_spec)
    rhs_spec = P("i", None)
    rhs = device_put(rhs, rhs_spec)

    @jax.shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_psumscatter(lhs_block, rhs_block):
        out_summand = lhs_block @ rhs_block
        return jax.lax.psum_scatter(out_summand, "i", tiled=True)

    @jax.jit  # (as f8)
    @jax.shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_psumscatter_overlapped(lhs_block, rhs_block):
        size = jax.lax.axis_size("i")
        idx = jax.lax.axis_index("i")
        shift = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i - 1) % size) for i in range(size)])
        lhs_block = lhs_block.reshape(size, -1, lhs_block.shape[1])
        out_summand = lhs_block[(idx + 1) % size] @ rhs_block
        for i in range(1, size):
            out_summand = shift(out_summand)
            out_summand += lhs_block[(idx + i + 1) % size] @ rhs_block
        return out_summand

    @jax.jit  # (as f8)
    @jax.shard_map(in_specs=(lhs_spec, rhs_spec), out_specs=rhs_spec)
    def matmul_psumscatter_overlapped_bidi(lhs_block, rhs_block):
        size = jax.lax.axis_size("i")
        idx = jax.lax.axis_index("i")
        shift_up = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i + 1) % size) for i in range(size)])
        shift_dn = partial(jax.lax.ppermute, axis_name="i", perm=[(i, (i - 1) % size) for i in range(size)])
        B = lhs_block.shape[0] // size // 2
        lhs_blocks = lambda i, hi: lax.dynamic_slice_in_dim(lhs_block, (2 * i + hi) * B, B, 0)  # noqa: E731
        out_summand_lo = lhs_blocks((idx - 1) % size, 0) @ rhs_block
        out_summand_hi = lhs_blocks((idx + 1) % size, 1) @ rhs_block
        for i in range(1, size):
            out_summand_lo = shift_up(out_summand_lo)
            out_summand_hi = shift_dn(out_summand_hi)
            out_summand_lo += lhs_blocks((idx - i - 1) % size, 0) @ rhs_block
            out_summand_hi += lhs_blocks((idx + i + 1) % size, 1) @ rhs_block
        return jnp.concatenate([out_summand_lo, out_summand_hi])

    for name, fn in [("psumscatter", matmul_psumscatter), ("psumscatter_overlapped", matmul_psumscatter_overlapped),
                     ("psumscatter_overlapped_bidi", matmul_psumscatter_overlapped_bidi)]:
        case(f"shmap.matmul.{name}", lambda fn=fn: [arr(o := fn(lhs, rhs)),
                                                    bool(jnp.allclose(o, lhs @ rhs, atol=1e-3, rtol=1e-3))])


def shmap_networks() -> None:
    def predict(params, inputs):
        for W, b in params:
            outputs = jnp.dot(inputs, W) + b
            inputs = jax.nn.relu(outputs)
        return outputs

    def loss(params, batch):
        inputs, targets = batch
        predictions = predict(params, inputs)
        return jnp.mean(jnp.sum((predictions - targets) ** 2, axis=-1))

    def init_layer(key, n_in, n_out):
        k1, k2 = jax.random.split(key)
        W = jax.random.normal(k1, (n_in, n_out)) / jnp.sqrt(n_in)
        b = jax.random.normal(k2, (n_out,))
        return W, b

    def init(key, layer_sizes, batch_size):
        key, *keys = jax.random.split(key, len(layer_sizes))
        params = list(map(init_layer, keys, layer_sizes[:-1], layer_sizes[1:]))
        key, *keys = jax.random.split(key, 3)
        inputs = jax.random.normal(keys[0], (batch_size, layer_sizes[0]))
        targets = jax.random.normal(keys[1], (batch_size, layer_sizes[-1]))
        return params, (inputs, targets)

    layer_sizes = [784, 128, 128, 128, 128, 128, 8]
    batch_size = 32
    params, batch = init(jax.random.key(0), layer_sizes, batch_size)

    def grads_close(f, args, g, g_args):
        return bool(allclose(jax.jit(jax.grad(f))(*args), jax.jit(jax.grad(g))(*g_args)))

    # data parallelism
    mesh = make_mesh((8,), ("batch",))
    jax.set_mesh(mesh)
    batch = jax.device_put(batch, NamedSharding(mesh, P("batch")))
    params = jax.device_put(params, NamedSharding(mesh, P()))

    def loss_dp_body(params, local_batch):
        inputs, targets = local_batch
        predictions = predict(params, inputs)
        local_loss = jnp.mean(jnp.sum((predictions - targets)**2, axis=-1))
        return jax.lax.pmean(local_loss, "batch")

    loss_dp = jax.shard_map(loss_dp_body, out_specs=P())

    case("shmap.nn.dp", lambda: [float(jax.jit(loss)(params, batch)), float(jax.jit(loss_dp)(params, batch)),
                                 grads_close(loss, (params, batch), loss_dp, (params, batch))])
    # (in_specs=None infers the specs from Explicit mesh axes, which JAX refuses under Auto ones:
    # the same function with them written out)
    loss_dp_specs = jax.shard_map(loss_dp_body, in_specs=(P(), P("batch")), out_specs=P())
    case("shmap.nn.dp.in_specs", lambda: [float(jax.jit(loss)(params, batch)),
                                          float(jax.jit(loss_dp_specs)(params, batch)),
                                          grads_close(loss, (params, batch), loss_dp_specs, (params, batch))])

    # FSDP
    mesh = make_mesh((4,), ("batch",))
    jax.set_mesh(mesh)
    batch = jax.device_put(batch, P("batch"))
    params = jax.device_put(params, P("batch"))

    @partial(jax.remat, policy=lambda op, *_, **__: str(op) != "all_gather")
    def predict_fsdp(params_frag, inputs):
        for W_frag, b_frag in params_frag:
            W = jax.lax.all_gather(W_frag, "batch", tiled=True)
            b = jax.lax.all_gather(b_frag, "batch", tiled=True)
            outputs = jnp.dot(inputs, W) + b
            inputs = jax.nn.relu(outputs)
        return outputs

    def loss_fsdp_body(local_params, local_batch):
        inputs, targets = local_batch
        predictions = predict_fsdp(local_params, inputs)
        local_loss = jnp.mean(jnp.sum((predictions - targets) ** 2, axis=-1))
        return jax.lax.pmean(local_loss, "batch")

    loss_fsdp = jax.shard_map(loss_fsdp_body, out_specs=P())

    repl_params = jax.device_put(params, P())
    repl_batch = jax.device_put(batch, P())
    case("shmap.nn.fsdp", lambda: [float(jax.jit(loss)(repl_params, repl_batch)),
                                   float(jax.jit(loss_fsdp)(params, batch)),
                                   grads_close(loss, (repl_params, repl_batch), loss_fsdp, (params, batch))])
    loss_fsdp_specs = jax.shard_map(loss_fsdp_body, in_specs=(P("batch"), P("batch")), out_specs=P())
    case("shmap.nn.fsdp.in_specs", lambda: [float(jax.jit(loss_fsdp_specs)(params, batch)),
                                            grads_close(loss, (repl_params, repl_batch), loss_fsdp_specs,
                                                        (params, batch))])

    # tensor parallelism
    mesh = make_mesh((8,), ("feats",))
    jax.set_mesh(mesh)
    batch = jax.device_put(batch, NamedSharding(mesh, P(None, "feats")))
    params = jax.device_put(params, NamedSharding(mesh, P("feats")))

    def predict_tp(params, inputs):
        for W, b in params:
            outputs = gemm_tp(inputs, W, b)
            inputs = jax.nn.relu(outputs)
        return outputs

    @jax.shard_map(in_specs=(P(None, "feats"), P("feats", None), P("feats")), out_specs=P(None, "feats"))
    def gemm_tp(inputs, W, b):
        block_result = jnp.dot(inputs, W)
        return jax.lax.psum_scatter(block_result, "feats", scatter_dimension=1, tiled=True) + b

    def loss_tp(params, batch):
        inputs, targets = batch
        predictions = predict_tp(params, inputs)
        return jnp.mean(jnp.sum((predictions - targets) ** 2, axis=-1))

    # (the tutorial defines loss_tp without calling it; here it is evaluated against loss)
    case("shmap.nn.tp", lambda: [float(jax.jit(loss)(params, batch)), float(jax.jit(loss_tp)(params, batch))])

    # FSDP + TP
    mesh = make_mesh((4, 2), ("batch", "feats"))
    jax.set_mesh(mesh)
    batch = jax.device_put(batch, NamedSharding(mesh, P("batch", "feats")))
    params = jax.device_put(params, NamedSharding(mesh, P(("feats", "batch"))))

    @partial(jax.remat, policy=lambda op, *_, **__: str(op) != "all_gather")
    def predict_fsdp_tp(params_frag, inputs):
        for W_frag, b_frag in params_frag:
            W = jax.lax.all_gather(W_frag, "batch", tiled=True)
            b = jax.lax.all_gather(b_frag, "batch", tiled=True)
            block_result = jnp.dot(inputs, W)
            outputs = jax.lax.psum_scatter(block_result, "feats", scatter_dimension=1, tiled=True) + b
            inputs = jax.nn.relu(outputs)
        return outputs

    @jax.shard_map(in_specs=(P(("feats", "batch")), P("batch", "feats")), out_specs=P())
    def loss_fsdp_tp(local_params, local_batch):
        inputs, targets = local_batch
        predictions = predict_fsdp_tp(local_params, inputs)
        sq_err = jax.lax.psum(jnp.sum((predictions - targets) ** 2, axis=-1), "feats")
        return jax.lax.pmean(jnp.mean(sq_err), "batch")

    repl_params = jax.device_put(params, P())
    repl_batch = jax.device_put(batch, P())
    case("shmap.nn.fsdp_tp", lambda: [float(jax.jit(loss)(repl_params, repl_batch)),
                                      float(jax.jit(loss_fsdp_tp)(params, batch)),
                                      grads_close(loss, (repl_params, repl_batch), loss_fsdp_tp, (params, batch))])

    # SPMD pipeline parallelism
    L = len(params) - 2
    N = batch_size
    F = params[0][0].shape[1]
    S = 2
    B = 8
    M, ragged = divmod(N, B)
    K, ragged = divmod(M, S)
    mesh = Mesh(jax.devices()[:S], ("stages",))

    def predict_pp(params, inputs):
        (W_first, b_first), inner_params, (W_last, b_last) = params
        inputs = jax.nn.relu(jnp.dot(inputs, W_first) + b_first)
        inputs = spmd_pipeline(lambda Wb, x: jax.nn.relu(x @ Wb[0] + Wb[1]), inner_params, inputs)
        outputs = jnp.dot(inputs, W_last) + b_last
        return outputs

    @jax.shard_map(in_specs=((P(), P("stages"), P()), P("stages")), out_specs=P())
    def loss_pp(params, batch):
        inputs, targets = batch
        predictions = predict_pp(params, inputs.reshape(K, B, -1)).reshape(K * B, -1)
        local_loss = jnp.mean(jnp.sum((predictions - targets)**2, axis=-1))
        return jax.lax.pmean(local_loss, "stages")

    def spmd_pipeline(fn, stage_params, inputs):
        stage = jax.lax.axis_index("stages")
        outputs = jnp.zeros_like(inputs) * jnp.nan
        state = jnp.zeros((L // S, B, F)) * jnp.nan
        for i in range(M + L - 1):
            state = state.at[0].set(jnp.where(stage == 0, inputs[i % K], state[0]))
            state = jax.vmap(fn)(stage_params, state)
            outputs = outputs.at[(i - L + 1) % K].set(jnp.where(stage == S - 1, state[-1], outputs[(i - L + 1) % K]))
            state, inputs, outputs = shift(i, state, inputs, outputs)
        outputs = jax.lax.ppermute(outputs, "stages", [(i, (i + 1) % S) for i in range(S)])
        return outputs

    def shift(i, state, inputs, outputs):
        sh = lambda x, d: jax.lax.ppermute(x, "stages", [(i, (i + d) % S) for i in range(S)])  # noqa: E731
        state = jnp.roll(state, +1, axis=0).at[0].set(sh(state[-1], +1))
        if (i % K) == (-1 % K):
            inputs = sh(inputs, +1)
        if ((i - L + 1) % K) == (-1 % K):
            outputs = sh(outputs, +1)
        return state, inputs, outputs

    first_params, *inner_params, last_params = params
    Ws, bs = zip(*inner_params)
    params_stacked = jnp.stack(Ws), jnp.stack(bs)
    first_params = jax.device_put(first_params, NamedSharding(mesh, P()))
    params_stacked = jax.device_put(params_stacked, NamedSharding(mesh, P("stages")))
    last_params = jax.device_put(last_params, NamedSharding(mesh, P()))
    params_ = first_params, params_stacked, last_params
    batch_ = jax.device_put(batch, NamedSharding(mesh, P("stages")))
    jax.set_mesh(mesh)
    case("shmap.nn.pp", lambda: float(jax.jit(loss_pp)(params_, batch_)))
    case("shmap.nn.pp_grad", lambda: [arr(g, value=False) for g in
                                      jax.tree.leaves(jax.jit(jax.grad(loss_pp))(params_, batch_))])


for section in [dist_intro, dist_named, dist_follows, dist_constraint, dist_networks, shmap_intro, shmap_specs,
                shmap_vma, shmap_collectives, shmap_matmuls, shmap_networks]:
    try:
        section()
    except Exception as e:  # noqa: BLE001  (a section that stops early: its later cases are missing)
        out[f"{section.__name__}.stopped"] = {"error": type(e).__name__, "message": str(e)[:300]}
print("RESULT " + json.dumps(out))
