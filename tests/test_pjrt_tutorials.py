"""JAX's tutorials "Distributed arrays and automatic parallelization" and "Manual parallelism with
shard_map" on XLA's CPU plugin with 8 devices, cell by cell as under JAX on 8 CPU devices
(``pjrt_programs/tutorials.py``, run under both in fresh processes): each case's values (float32
tolerance), shapes, dtypes, partition specs, each device's block, and the type names of the errors
the tutorials show. What ember does not do as JAX does is listed in ``KNOWN``, with the reason."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

pytest.importorskip("lammps_jax_pjrt_cpu",
                    reason="XLA's CPU PJRT plugin is not installed (pip install ember[pjrt-cpu])")

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "pjrt_programs", "tutorials.py")

# Cases where ember differs from JAX, and why: each a JAX feature ember does not have.
KNOWN = {
    "shmap.matmul_basic.allclose": "jnp.dot's out_sharding is sharding in types, for Explicit mesh axes, which "
                                   "ember's meshes do not have: JAX refuses it under Auto axes (ValueError), "
                                   "ember's jnp.dot takes no out_sharding (TypeError)",
    "shmap.matmul_reference": "as shmap.matmul_basic.allclose (out_sharding under jit)",
    "shmap.vma.typeof": "jax.typeof shows the manual axes a value varies over (f32[3]{V:i}); ember's types carry "
                        "no varying axes (it works them out of the traced program, for check_vma's transposes)",
    "shmap.vma.pcast": "as shmap.vma.typeof (the type pcast gives)",
    "shmap.vma.typeof_varying": "jax.typeof(y).manual_axis_type: as shmap.vma.typeof",
    "shmap.vma.out_specs_error": "check_vma's static check that an output does not vary over a mesh axis its "
                                 "out_specs leave out needs varying types (shmap.vma.typeof): ember does not raise",
    "shmap.vma.scan_error": "a scan whose carry changes its varying axes is a type error with varying types "
                            "(shmap.vma.typeof): ember runs it",
}
RTOL, ATOL = 1e-5, 2e-5  # (float32; values are rounded to 5 decimals)


def _env(framework: str) -> dict:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    env.pop("EMBER_NUM_CPU_DEVICES", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(HERE), env.get("PYTHONPATH")]))  # (this ember)
    env["EMBER_PLATFORMS" if framework == "ember" else "JAX_PLATFORMS"] = "xla_cpu" if framework == "ember" else "cpu"
    return env


def _result(process: subprocess.Popen) -> dict:
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-3000:]
    line = next(x for x in stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def both() -> tuple[dict, dict]:
    pytest.importorskip("jax")
    started = [subprocess.Popen([sys.executable, PROGRAM, fw], env=_env(fw), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=os.path.dirname(HERE))
               for fw in ("ember", "jax")]  # (side by side: the two take a minute one after the other)
    return _result(started[0]), _result(started[1])


def _differences(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Where ``ours`` is not ``theirs``: floats within float32's tolerance, errors by type name
    (the messages are each framework's own), everything else exactly."""
    if isinstance(theirs, dict) and "error" in theirs:
        got = ours.get("error") if isinstance(ours, dict) else ours
        return [] if got == theirs["error"] else [f"{path}: {got!r} where JAX raises {theirs['error']}"]
    if isinstance(theirs, dict) and isinstance(ours, dict):
        if ours.keys() != theirs.keys():
            return [f"{path}: keys {sorted(ours)} where JAX has {sorted(theirs)}"]
        return [d for k in theirs for d in _differences(ours[k], theirs[k], f"{path}.{k}")]
    if isinstance(theirs, list) and isinstance(ours, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items where JAX has {len(theirs)}"]
        return [d for i, (a, b) in enumerate(zip(ours, theirs)) for d in _differences(a, b, f"{path}[{i}]")]
    if isinstance(theirs, float) and isinstance(ours, (int, float)) and not isinstance(ours, bool):
        close = np.isclose(ours, theirs, rtol=RTOL, atol=ATOL, equal_nan=True)
        return [] if close else [f"{path}: {ours} where JAX has {theirs}"]
    return [] if ours == theirs and type(ours) is type(theirs) else [f"{path}: {ours!r} where JAX has {theirs!r}"]


def test_every_cell_ran_under_jax(both):
    """The programs are the tutorials' as JAX runs them: no section stopped early, every case
    ember records JAX records too, and JAX's errors are only the ones the tutorials show (and the
    Explicit-axes ones listed)."""
    ours, theirs = both
    assert not [k for k in theirs if k.endswith(".stopped")], theirs
    assert set(ours) == set(theirs), set(ours) ^ set(theirs)
    errors = sorted(k for k, v in theirs.items() if isinstance(v, dict) and "error" in v)
    assert errors == ["shmap.matmul_basic.allclose", "shmap.matmul_reference", "shmap.nn.dp", "shmap.nn.fsdp"]
    assert len(theirs) >= 70


def test_the_cells_as_under_jax(both):
    """Every case not in ``KNOWN`` gives JAX's values, shapes, specs, blocks and errors. (The
    tutorials' ``jax.shard_map(out_specs=P())`` with no in_specs infers them from Explicit mesh
    axes; under Auto ones both frameworks refuse it (shmap.nn.dp, shmap.nn.fsdp), so those cells
    also run with the in_specs written out, ``*.in_specs``.)"""
    ours, theirs = both
    failing = {k: d for k in theirs if k not in KNOWN and (d := _differences(ours.get(k), theirs[k], k))}
    assert not failing, json.dumps(failing, indent=1)[:4000]


@pytest.mark.parametrize("case", sorted(KNOWN))
def test_known_differences_still_differ(both, case):
    """A listed difference that ember has closed is taken off the list."""
    ours, theirs = both
    assert _differences(ours[case], theirs[case], case), f"{case} now runs as under JAX: remove it from KNOWN"


def test_computation_follows_sharding(both):
    """The distributed-arrays tutorial's point: eager operations on sharded arrays give sharded
    results (here as JAX's: spec and blocks), and committed arrays on other devices, or the same
    devices in another order, are an error."""
    ours, _ = both
    assert ours["dist.intro.sin"]["spec"] == ["x", "y"] and len(ours["dist.intro.sin"]["blocks"]) == 8
    assert ours["dist.follows.dot"]["spec"] == ["a", "b"]
    assert ours["dist.disagree.device_sets"] == ours["dist.disagree.device_order"] == "ValueError"
    assert ours["dist.tp.trained_W2_W3"][0]["spec"] == [None, "model"]
