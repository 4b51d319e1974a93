"""``jit(f, in_shardings=..., out_shardings=...)``: programs partitioned into one per device
(ember.partition) give the unpartitioned program's values, with the all-reduces where a
reduction crosses the split axis, and place their outputs as JAX does."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax, nn
from ember.core.sharding import Mesh, NamedSharding, PartitionSpec as P, SingleDeviceSharding


@pytest.fixture(params=[1, 2, 4])
def mesh(request):
    with ember.config.override(num_cpu_devices=request.param):
        yield Mesh(np.array(ember.devices()), ("data",))


def _mlp_loss(p, x, y):
    h = nn.relu(x @ p["w1"] + p["b1"])
    out = jnp.tanh(h) @ p["w2"] + p["b2"]
    return jnp.mean((out - y) ** 2)


def _train_step(p, x, y):
    loss, g = ember.value_and_grad(_mlp_loss)(p, x, y)
    return loss, ember.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g)


def _problem(seed=0, batch=16):
    rng = np.random.default_rng(seed)
    f32 = lambda *s: jnp.asarray(rng.standard_normal(s), jnp.float32)  # noqa: E731
    params = {"w1": f32(4, 8), "b1": f32(8), "w2": f32(8, 3), "b2": f32(3)}
    return params, f32(batch, 4), f32(batch, 3)


def _close(a, b, tol=1e-5):
    for x, y in zip(ember.tree_util.tree_leaves(a), ember.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


def test_a_data_parallel_training_step_gives_the_single_program_values(mesh):
    params, x, y = _problem()
    replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    step = ember.jit(_train_step, in_shardings=(replicated, batch, batch), out_shardings=replicated)
    want = ember.jit(_train_step)(params, x, y)
    for _ in range(2):  # (the second call runs the compiled per-device program again)
        got = step(params, x, y)
        _close(got, want)
    loss, new = got
    assert loss.sharding == replicated and new["w1"].sharding == replicated


def test_the_gradient_all_reduce_is_where_the_batch_is_contracted():
    with ember.config.override(num_cpu_devices=2):
        mesh = Mesh(np.array(ember.devices()), ("data",))
        params, x, y = _problem()
        replicated, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
        step = ember.jit(_train_step, in_shardings=(replicated, batch, batch))
        text = str(ember.partition.per_device_jaxpr(step, params, x, y))
    # each device sees half the batch; the loss's sum and the four gradients are all-reduced
    assert "f32[8,4]" in text and "f32[16,4]" not in text.split("let")[0]
    assert text.count("psum[axes=('data',)") == 5
    assert "all_gather" not in text


def test_unspecified_output_shardings_are_the_propagated_ones(mesh):
    x = jnp.arange(8 * 3, dtype=jnp.float32).reshape(8, 3)
    batch = NamedSharding(mesh, P("data"))
    f = ember.jit(lambda a: (jnp.sin(a) * 2.0, a.sum(axis=0), a.T), in_shardings=batch)
    rows, col_sums, transposed = f(x)
    np.testing.assert_allclose(rows, np.sin(np.asarray(x)) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(col_sums, np.asarray(x).sum(0), rtol=1e-6)
    np.testing.assert_allclose(transposed, np.asarray(x).T)
    if mesh.shape["data"] > 1:  # (one device splits nothing: the program runs whole)
        assert rows.sharding.spec == P("data")
        assert col_sums.sharding.spec == P()
        assert transposed.sharding.spec == P(None, "data")


def test_out_shardings_gather_or_split_the_outputs(mesh):
    x = jnp.arange(8 * 2, dtype=jnp.float32).reshape(8, 2)
    batch, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    gathered = ember.jit(lambda a: a * 3.0, in_shardings=batch, out_shardings=replicated)(x)
    assert gathered.sharding == replicated
    np.testing.assert_allclose(gathered, np.asarray(x) * 3.0)
    split = ember.jit(lambda a: a + 1.0, in_shardings=replicated, out_shardings=batch)(x)
    assert split.sharding == batch
    np.testing.assert_allclose(split, np.asarray(x) + 1.0)


def test_operations_that_cannot_stay_split_gather_their_operands_and_agree(mesh):
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.standard_normal((8, 4)), jnp.float32)
    batch = NamedSharding(mesh, P("data"))

    def f(a):
        s = jnp.sort(a, axis=0)  # across the split axis: needs the whole column
        c = jnp.cumsum(a, axis=0)
        m = jnp.max(a, axis=0) - jnp.min(a, axis=0)
        r = a.reshape(8, 2, 2).sum(-1)  # keeps the leading dimension
        w = lax.fori_loop(0, 3, lambda i, v: v * 0.5 + 1.0, a)  # control flow on a split value
        return s, c, m, r, w, jnp.argmax(a, axis=0)

    _close(ember.jit(f, in_shardings=batch)(x), ember.jit(f)(x))


def test_sharding_constraints_inside_the_function_take_effect(mesh):
    x = jnp.arange(8 * 4, dtype=jnp.float32).reshape(8, 4)
    batch = NamedSharding(mesh, P("data"))

    def f(a):
        b = lax.with_sharding_constraint(a * 2.0, NamedSharding(mesh, P()))
        return b @ b.T

    f_split = ember.jit(f, in_shardings=batch)
    np.testing.assert_allclose(f_split(x), ember.jit(f)(x), rtol=1e-5)
    if mesh.shape["data"] > 1:
        assert "all_gather" in str(ember.partition.per_device_jaxpr(f_split, x))
    # the identity on values, under every transformation
    np.testing.assert_allclose(ember.grad(lambda a: f(a).sum())(x), ember.grad(lambda a: (4 * a @ a.T).sum())(x),
                               rtol=1e-5)
    np.testing.assert_allclose(ember.vmap(lambda r: lax.with_sharding_constraint(r, P()))(x), x)


def test_shardings_that_split_nothing_only_place_the_outputs():
    x = jnp.ones((4, 2))
    device = ember.devices()[0]
    y = ember.jit(lambda a: a + 1, in_shardings=SingleDeviceSharding(device),
                  out_shardings=SingleDeviceSharding(device))(x)
    np.testing.assert_allclose(y, 2.0)
    assert y.sharding == SingleDeviceSharding(device)
    assert ember.jit(lambda a: a * 2, out_shardings=None)(x).shape == (4, 2)


def test_under_a_trace_shardings_do_not_change_values():
    with ember.config.override(num_cpu_devices=2):
        mesh = Mesh(np.array(ember.devices()), ("data",))
        f = ember.jit(lambda a: jnp.sum(a ** 2), in_shardings=NamedSharding(mesh, P("data")))
        x = jnp.arange(4.0)
        np.testing.assert_allclose(ember.grad(f)(x), 2 * np.arange(4.0))
        np.testing.assert_allclose(ember.jit(lambda a: f(a) + 1)(x), 15.0)
        np.testing.assert_allclose(f(x), 14.0)


def test_bad_shardings_are_refused_clearly():
    with ember.config.override(num_cpu_devices=2):
        mesh = Mesh(np.array(ember.devices()), ("data",))
        other = Mesh(np.array(ember.devices()[::-1]), ("data",))
        f = ember.jit(lambda a, b: a + b, in_shardings=(NamedSharding(mesh, P("data")),
                                                        NamedSharding(other, P("data"))))
        with pytest.raises(ValueError, match="different meshes"):
            f(jnp.ones(4), jnp.ones(4))
        g = ember.jit(lambda a, b: a + b, in_shardings=(NamedSharding(mesh, P("data")),))
        with pytest.raises(ValueError, match="one entry per positional argument"):
            g(jnp.ones(4), jnp.ones(4))
        h = ember.jit(lambda a: a, in_shardings=NamedSharding(mesh, P("data")))
        with pytest.raises(ValueError, match="divisible|partitioned"):
            h(jnp.ones(3))


# --- a library's sharding helpers over a pytree, on 8 CPU devices, against JAX ---------------------------
LIBRARY_SHARDINGS = r"""
import importlib.util, json, warnings
import json

import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
warnings.simplefilter("ignore")
def described(tree):
    def one(x):
        s = x.sharding
        if isinstance(s, NamedSharding):
            return [list(s.mesh.shape.items()), [list(e) if isinstance(e, tuple) else e for e in s.spec]]
        return [type(s).__name__, len(s.device_set)]
    return jax.tree.map(one, tree)
mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "model"))
tree = {"w": jnp.ones((8, 4)), "b": jnp.ones(4), "s": jnp.ones(())}
specs = {"w": P("data", "model"), "b": P("model"), "s": P()}
shardings = jax.tree.map(lambda s: NamedSharding(mesh, s), specs)
out = {
    "tree.map device_put": described(jax.tree.map(lambda x, s: jax.device_put(x, NamedSharding(mesh, s)), tree, specs)),
    "device_put, a tree of shardings": described(jax.device_put(tree, shardings)),
    "device_put, one sharding": described(jax.device_put(tree, NamedSharding(mesh, P()))),
    "with_sharding_constraint outside jit": described(jax.lax.with_sharding_constraint(tree, shardings)),
    "jit, in_shardings a tree": described(jax.jit(lambda t: jax.tree.map(lambda x: x + 1, t),
                                                  in_shardings=(shardings,))(tree)),
    "abstract mesh": [jax.sharding.get_abstract_mesh().empty, jax.sharding.get_abstract_mesh().are_all_axes_auto],
    "with_sharding_constraint in jit, a tree of shardings": described(
        jax.jit(lambda t: jax.lax.with_sharding_constraint(t, shardings))(tree)),
    "with_sharding_constraint in jit, one sharding": described(
        jax.jit(lambda t: jax.lax.with_sharding_constraint(t, NamedSharding(mesh, P())))(tree)),
}
with jax.set_mesh(mesh):
    out["with_sharding_constraint in jit, PartitionSpecs"] = described(
        jax.jit(lambda t: jax.lax.with_sharding_constraint(t, specs))(tree))
if importlib.util.find_spec("equinox"):
    import equinox as eqx
    out["eqx.filter_shard"] = described(eqx.filter_shard(tree, shardings))
    out["eqx.filter_shard, one sharding"] = described(eqx.filter_shard(tree, NamedSharding(mesh, P())))
    out["eqx.filter_shard in filter_jit"] = described(eqx.filter_jit(lambda t: eqx.filter_shard(t, shardings))(tree))
if importlib.util.find_spec("flax"):
    import flax.linen as nn
    class Model(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(4, kernel_init=nn.with_partitioning(nn.initializers.ones, ("data", "model")))(x)
    model, x = Model(), jnp.ones((2, 8))
    pspecs = nn.get_partition_spec(jax.eval_shape(model.init, jax.random.PRNGKey(0), x))
    placed = jax.tree.map(lambda s: NamedSharding(mesh, s), pspecs, is_leaf=lambda s: isinstance(s, P))
    params = jax.jit(model.init, out_shardings=placed)(jax.random.PRNGKey(0), x)
    out["flax with_partitioning"] = described(nn.meta.unbox(params))
    from flax import nnx

    class Linear(nnx.Module):
        def __init__(self, rngs):
            init = nnx.with_partitioning(nnx.initializers.ones, ("data", "model"))
            self.layer = nnx.Linear(8, 4, kernel_init=init, rngs=rngs)

    @jax.jit
    def create():
        state = nnx.state(Linear(nnx.Rngs(0)))
        return jax.lax.with_sharding_constraint(state, nnx.get_partition_spec(state))

    with jax.set_mesh(mesh):
        out["flax nnx state"] = described(nnx.to_pure_dict(create()))
print(json.dumps(out, sort_keys=True))
"""


def test_library_sharding_helpers_leave_leaves_sharded_as_jax_reports():
    """``jax.tree.map`` of ``device_put``, ``device_put`` of a tree of shardings, equinox's
    ``filter_shard`` and flax's ``with_partitioning`` / ``get_partition_spec``: each leaf's
    ``Array.sharding`` as JAX reports it, with 8 CPU devices on both sides."""
    pytest.importorskip("jax")
    theirs, ours = _under_jax_and_ember(LIBRARY_SHARDINGS, 8)
    assert ours == theirs


SHARDED_TRACES = r"""
import json
import numpy as np
import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()), ("d",))
split, whole = NamedSharding(mesh, P("d")), NamedSharding(mesh, P())
traces = [0]
def f(x):
    traces[0] += 1
    return x * 2
counts = {}
for name, make, arg in [("out_shardings, a split input", lambda: jax.jit(f, out_shardings=split),
                         lambda: jax.device_put(jnp.ones(8), split)),
                        ("in_ and out_shardings, called twice",
                         lambda: jax.jit(f, in_shardings=split, out_shardings=whole), lambda: jnp.ones(8))]:
    traces[0] = 0
    g = make()
    g(arg()), g(arg())
    counts[name] = traces[0]
print(json.dumps(counts))
"""


def test_partitioned_jit_traces_as_jax_does():
    """A jit with in_shardings / out_shardings traces the function once for a signature, as JAX
    (it traced twice with out_shardings: once for the output structure, once to partition)."""
    pytest.importorskip("jax")
    theirs, ours = _under_jax_and_ember(SHARDED_TRACES, 4)
    assert ours == theirs


def _under_jax_and_ember(program: str, devices: int) -> tuple:
    """The JSON that ``program`` prints last, run by JAX and by ember under the switch, each in a
    fresh process with ``devices`` CPU devices."""
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", EMBER_NUM_CPU_DEVICES=str(devices))
    runs = [subprocess.run([sys.executable, "-c", prelude + program], capture_output=True, text=True,
                           env=env, timeout=600) for prelude in ("", "import ember\nember.install_as_jax()\n")]
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    theirs, ours = (json.loads(run.stdout.strip().splitlines()[-1]) for run in runs)
    return theirs, ours
