"""Helpers for differential tests: run a function eagerly and under jit, compare with NumPy."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import ember
import ember.numpy  # noqa: F401  (check_gradient sums with it)
from ember import dtypes


def tolerance(dtype: Any) -> dict:
    dt = np.dtype(dtype)
    if dt == dtypes.bfloat16:
        return dict(rtol=2e-2, atol=2e-2)
    if dt == np.float16:
        return dict(rtol=2e-3, atol=2e-3)
    if dt == np.float32:
        return dict(rtol=2e-6, atol=2e-6)
    return dict(rtol=1e-12, atol=1e-12)


def assert_allclose(actual: Any, expected: Any, dtype: Any = None, check_dtype: bool = True, **tol: Any) -> None:
    """Compare an ember result with an expected NumPy value: dtype (if asked), shape and values."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if check_dtype:
        want = np.dtype(dtype) if dtype is not None else e.dtype
        assert a.dtype == want, f"dtype {a.dtype} != {want}"
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    if a.dtype.kind in "biu" and e.dtype.kind in "biu":
        np.testing.assert_array_equal(a, e)
    else:
        part = np.finfo(a.dtype).dtype if a.dtype.kind == "c" else a.dtype  # (a complex type's parts)
        t = tolerance(part) if part.kind == "f" or part == dtypes.bfloat16 else {}
        t.update(tol)
        wide = np.complex128 if "c" in (a.dtype.kind, e.dtype.kind) else np.float64  # (both parts compared)
        np.testing.assert_allclose(a.astype(wide), e.astype(wide), equal_nan=True, **t)


def check_eager_and_jit(fn: Callable, *args: Any, expected: Any = None, **kwargs: Any) -> Any:
    """Run ``fn`` eagerly and under ``jit``; both must agree (exactly in dtype and shape) with
    ``expected`` if given, and with each other, within the tolerances ``kwargs`` give (compiled
    code may sum in another order). Returns the eager result."""
    eager = fn(*args)
    jitted = ember.jit(fn)(*args)
    for e_leaf, j_leaf in zip(ember.tree_util.tree_leaves(eager), ember.tree_util.tree_leaves(jitted)):
        assert e_leaf.dtype == j_leaf.dtype and e_leaf.shape == j_leaf.shape
        assert_allclose(j_leaf, e_leaf, **kwargs)
    if expected is not None:
        for leaf, exp in zip(ember.tree_util.tree_leaves(eager), ember.tree_util.tree_leaves(expected)):
            assert_allclose(leaf, exp, **kwargs)
    return eager


def array_types(result: Any) -> list[tuple]:
    """(dtype, shape, weak type) of each array of an ember or a JAX result (one array, or a tuple
    or list of them)."""
    leaves = result if isinstance(result, (tuple, list)) else [result]
    return [(np.dtype(x.dtype), x.shape, x.aval.weak_type if isinstance(x, ember.Array) else x.weak_type)
            for x in leaves]


def assert_same_leaves(ours: Any, theirs: Any, name: str) -> None:
    """ember's result ``ours`` of ``name`` against JAX's: each array's dtype, weak type and values."""
    for o, t in zip(ember.tree_util.tree_leaves(ours), ember.tree_util.tree_leaves(theirs)):
        assert np.asarray(o).dtype == np.asarray(t).dtype, name
        assert o.aval.weak_type == t.weak_type, name
        np.testing.assert_allclose(np.asarray(o, np.float64), np.asarray(t, np.float64), rtol=1e-5)


def numeric_gradient(f: Callable, x: Any, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar function ``f`` at ``x``, in float64."""
    x = np.asarray(x, np.float64)
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[index] = eps
        grad[index] = (float(f(x + step)) - float(f(x - step))) / (2 * eps)
    return grad


def normal_float32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Standard normal float32 values of ``shape``, drawn from ``rng``."""
    return rng.standard_normal(shape).astype(np.float32)


def check_float32_gradient(f: Callable, x: Any, **tol: Any) -> None:
    """ember.grad of ``f`` (an ember function to a scalar) at float32 ``x`` against central
    differences in float64 (a wide step: float32 rounding; wide default tolerances)."""
    expected = numeric_gradient(lambda v: float(f(ember.numpy.asarray(v, np.float32))), x, eps=1e-3)
    assert_allclose(ember.grad(f)(ember.numpy.asarray(x)), expected, check_dtype=False,
                    **(tol or dict(rtol=2e-2, atol=2e-2)))


def check_gradient(f: Callable, *args: Any, argnum: int = 0, **tol: Any) -> None:
    """ember.grad of ``sum(f(*args))`` w.r.t. ``args[argnum]`` against central differences
    (float64 arguments: use the ``x64`` fixture)."""
    def total(*a: Any) -> Any:
        return ember.numpy.sum(f(*a))

    def at(x: Any) -> Any:
        return total(*args[:argnum], x, *args[argnum + 1:])

    assert_allclose(ember.grad(total, argnums=argnum)(*args), numeric_gradient(at, args[argnum]),
                    **(tol or dict(rtol=1e-6, atol=1e-7)))
