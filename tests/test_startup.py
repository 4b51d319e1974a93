"""Start-up: ``import ember`` loads what the first call needs and nothing else, and does no work
(no thread, no file, no environment change); the LLVM backend, SciPy, DUCC and MPI load when
first used. Checked in fresh processes, through ``sys.modules``, never by timing."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

# Loaded when first used, never by ``import ember``: the native backend (LLVM) at the first native
# compile, SciPy at the first LAPACK or SciPy call, DUCC at the first FFT, MPI at
# ``ember.distributed.initialize``.
DEFERRED = ("llvmlite", "scipy", "ducc0", "mpi4py", "ember.backends.cpu")


def fresh(code: str, cache: str) -> dict:
    """What ``code`` (run after ``import ember`` in a fresh process) prints as JSON."""
    env = {**os.environ, "EMBER_CACHE_DIR": cache, "EMBER_PERSISTENT_CACHE": "1"}
    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        env.pop(name, None)
    program = textwrap.dedent("""
        import json, os, sys, threading
        environment = dict(os.environ)
        import ember
        import ember.numpy as jnp
        def loaded(prefixes):
            return sorted({m for m in sys.modules for p in prefixes if m == p or m.startswith(p + ".")})
        state = {"threads": [t.name for t in threading.enumerate()],
                 "environment": sorted(set(os.environ.items()) ^ set(environment.items())),
                 "deferred": loaded(%r)}
    """ % (DEFERRED,)) + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_loads_no_backend_library_and_does_no_work(tmp_path):
    cache = tmp_path / "cache"
    state = fresh("print(json.dumps(state))", str(cache))
    assert state["deferred"] == []
    assert state["threads"] == ["MainThread"]
    assert state["environment"] == []
    assert not cache.exists()  # nothing written, not even the disk cache's directory


def test_jax_attribute_paths_still_resolve_without_loading_the_libraries(tmp_path):
    """The public names are there at import (JAX's attributes), the libraries behind them are not."""
    state = fresh("""
        names = [ember.jit, ember.grad, ember.vmap, jnp.fft.fft, ember.scipy.linalg.solve, ember.lax.linalg.eigh,
                 ember.distributed.initialize, ember.random.normal]
        state["after_names"] = loaded(%r)
        print(json.dumps(state))
    """ % (DEFERRED,), str(tmp_path / "cache"))
    assert state["after_names"] == []


@pytest.mark.parametrize("use, loads", [
    ("ember.jit(lambda x: x * 2)(jnp.arange(3.0))", ["ember.backends.cpu", "llvmlite"]),
    ("jnp.fft.fft(jnp.arange(4.0))", ["ducc0"]),
    ("jnp.linalg.eig(jnp.eye(3))", ["scipy"]),
], ids=["first jit", "first fft", "first eig"])
def test_each_library_loads_at_its_first_use(tmp_path, use, loads):
    state = fresh(f"""
        {use}
        state["after"] = loaded({DEFERRED!r})
        print(json.dumps(state))
    """, str(tmp_path / "cache"))
    for prefix in loads:
        assert any(m == prefix or m.startswith(prefix + ".") for m in state["after"]), (prefix, state["after"])
