"""JAX as the oracle of a jnp function: the same call in ember (eagerly and under jit) and in
JAX, their results compared in tree structure, dtypes, shapes and values. Importing this module
skips the importing test file where JAX is not installed (the ``test`` extra installs it)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from util import assert_allclose

import ember
import ember.numpy as jnp

jax = pytest.importorskip("jax")
jjnp = pytest.importorskip("jax.numpy")


def same_as_jax(ours: Any, theirs: Any, **tol: Any) -> None:
    """ember's result against JAX's: tree structure, dtypes, shapes and values."""
    ours_leaves = ember.tree_util.tree_leaves(ours)
    theirs_leaves = jax.tree_util.tree_leaves(theirs)
    assert len(ours_leaves) == len(theirs_leaves)
    for o, t in zip(ours_leaves, theirs_leaves):
        t = np.asarray(t)
        assert_allclose(o, t, dtype=t.dtype, **tol)


def check_against_jax(name: str, *args: Any, jit: bool = True, tol: dict | None = None, **kwargs: Any) -> Any:
    """``jnp.<name>(*args)`` in ember (eagerly, and under jit unless ``jit=False``) against JAX;
    returns ember's eager result."""
    tol = tol or {}
    theirs = getattr(jjnp, name)(*(jjnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args), **kwargs)
    fn = getattr(jnp, name)
    ours = fn(*args, **kwargs)
    same_as_jax(ours, theirs, **tol)
    if jit:
        arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

        def traced(*xs: Any) -> Any:
            full = list(args)
            for i, x in zip(arrays, xs):
                full[i] = x
            return fn(*full, **kwargs)
        same_as_jax(ember.jit(traced)(*[args[i] for i in arrays]), theirs, **tol)
    return ours
