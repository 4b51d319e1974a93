"""A data-parallel MLP training run (tests/test_distributed.py, benchmarks/parallel.py).

    mpiexec -n 2 python tests/mpi_programs/mlp.py mpi [steps]   each process trains on its half of the batch
    python tests/mpi_programs/mlp.py single [steps]             one process, the whole batch

Prints ``LOSSES [...]`` (rank 0) and, with ``--time``, ``STEP_SECONDS t`` (the best step time).
"""
import json
import os
import sys
import time

import numpy as np

import ember
import ember.numpy as jnp
from ember import lax
from ember.core.sharding import Mesh, NamedSharding, PartitionSpec as P

BATCH, D_IN, HIDDEN = (int(v) for v in os.environ.get("MLP_SIZES", "64,8,16").split(","))
LR = 0.1


def data():
    rng = np.random.default_rng(0)
    params = [rng.normal(size=(D_IN, HIDDEN)).astype(np.float32) * 0.3, np.zeros(HIDDEN, np.float32),
              rng.normal(size=(HIDDEN, 1)).astype(np.float32) * 0.3]
    x = rng.normal(size=(BATCH, D_IN)).astype(np.float32)
    y = np.sin(x.sum(1, keepdims=True)).astype(np.float32)
    return params, x, y


def loss(params, x, y):
    w1, b1, w2 = params
    return jnp.mean((jnp.tanh(x @ w1 + b1) @ w2 - y) ** 2)


def sgd(params, g):
    return [p - LR * gi for p, gi in zip(params, g)]


def parallel_step(params, x, y):  # on each device's part of the batch
    value, g = ember.value_and_grad(loss)(params, x, y)
    return sgd(params, lax.pmean(g, "d")), lax.pmean(value, "d")


def single_step(params, x, y):
    value, g = ember.value_and_grad(loss)(params, x, y)
    return sgd(params, g), value


def main():
    mode, steps = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5
    params, x, y = data()
    if mode == "mpi":
        ember.distributed.initialize()
        mesh = Mesh(np.array(ember.devices()), ("d",))
        rank, procs = ember.distributed.process_index(), ember.distributed.process_count()
        part = BATCH // procs  # this process's half (third, ...) of the batch
        batch = NamedSharding(mesh, P("d"))
        xs = ember.distributed.make_array_from_process_local_data(batch, x[rank * part:(rank + 1) * part])
        ys = ember.distributed.make_array_from_process_local_data(batch, y[rank * part:(rank + 1) * part])
        # (check_vma=False: the gradient's pmean is stated; with JAX's default check_vma=True the
        # replicated parameters' gradients would already be summed over the devices)
        step = ember.shard_map(parallel_step, mesh=mesh, in_specs=(P(), P("d"), P("d")), out_specs=(P(), P()),
                               check_vma=False)
    else:
        rank, xs, ys = 0, x, y
        step = ember.jit(single_step)
    params = [jnp.asarray(p) for p in params]
    losses = []
    for _ in range(steps):
        params, value = step(params, xs, ys)
        losses.append(float(value))
    if "--time" in sys.argv:
        best = float("inf")
        for _ in range(int(os.environ.get("MLP_REPEAT", "20"))):
            t = time.perf_counter()
            out = step(params, xs, ys)
            ember.block_until_ready(out)
            best = min(best, time.perf_counter() - t)
        if rank == 0:
            print(f"STEP_SECONDS {best}", flush=True)
    if rank == 0:
        print("LOSSES " + json.dumps(losses), flush=True)


if __name__ == "__main__":
    main()
