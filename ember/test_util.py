"""``ember.test_util``: JAX's ``jax.test_util``, derivatives checked against finite differences.

``check_grads(f, args, order)`` compares ``jvp`` (``modes`` "fwd"), ``vjp`` ("rev") and
``linearize`` ("lin") of ``f`` at ``args`` with central differences, in one random direction
(seeded, so a failure repeats), up to ``order``; it raises AssertionError when they disagree.
The tolerances, the step and the direction are JAX's, so a test that passes under
``jax.test_util.check_grads`` passes here.
"""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Sequence

import ml_dtypes
import numpy as np

from ember import dtypes, tree_util
from ember.config import config
from ember.transforms.api import jvp, linearize, vjp

__all__ = ["check_grads", "check_jvp", "check_vjp"]

EPS = 1e-4

_default_tolerance = {
    np.dtype(dtypes.float0): 0, np.dtype(np.bool_): 0,
    **{np.dtype(t): 0 for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)},
    np.dtype(ml_dtypes.bfloat16): 1e-2, np.dtype(np.float16): 1e-3, np.dtype(np.float32): 1e-6,
    np.dtype(np.float64): 1e-15, np.dtype(np.complex64): 1e-6, np.dtype(np.complex128): 1e-15,
}

default_gradient_tolerance = {
    np.dtype(ml_dtypes.bfloat16): 1e-1, np.dtype(np.float16): 1e-2, np.dtype(np.float32): 2e-3,
    np.dtype(np.float64): 1e-5, np.dtype(np.complex64): 1e-3, np.dtype(np.complex128): 1e-5,
}

_PYTHON_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64),
                         complex: np.dtype(np.complex128)}


def _dtype(x: Any) -> np.dtype:
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    dt = _PYTHON_SCALAR_DTYPES.get(type(x))
    return dt if dt is not None else np.asarray(x).dtype


def _is_python_scalar(x: Any) -> bool:
    return not isinstance(x, np.generic) and isinstance(x, (bool, int, float, complex))


def tolerance(dtype: Any, tol: Any = None) -> float:
    """The tolerance for ``dtype``: ``tol`` itself unless it is a dict (by dtype), else the default."""
    tol = {} if tol is None else tol
    if not isinstance(tol, dict):
        return tol
    tol = {np.dtype(k): v for k, v in tol.items()}
    dt = dtypes.canonicalize_dtype(np.dtype(dtype))
    return tol.get(dt, _default_tolerance[dt])


def _assert_numpy_allclose(a: np.ndarray, b: np.ndarray, atol: float, rtol: float, err_msg: str) -> None:
    if a.dtype == b.dtype == dtypes.float0:
        np.testing.assert_array_equal(a, b, err_msg=err_msg)
        return
    a, b = (x.astype(np.float32) if x.dtype == ml_dtypes.bfloat16 else x for x in (a, b))
    kw = {}
    if atol:
        kw["atol"] = atol
    if rtol:
        kw["rtol"] = rtol
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(a, b, **kw, err_msg=err_msg)


def _assert_numpy_close(a: Any, b: Any, atol: Any, rtol: Any, err_msg: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{err_msg}: shapes {a.shape} and {b.shape} differ"
    atol = max(tolerance(a.dtype, atol), tolerance(b.dtype, atol))
    rtol = max(tolerance(a.dtype, rtol), tolerance(b.dtype, rtol))
    _assert_numpy_allclose(a, b, atol=atol * a.size, rtol=rtol * b.size, err_msg=err_msg)


def check_close(xs: Any, ys: Any, atol: Any = None, rtol: Any = None, err_msg: str = "") -> None:
    """Every leaf of ``xs`` close to the one of ``ys`` (tolerances scaled by the leaf's size, as JAX)."""
    tree_util.tree_map(functools.partial(_assert_numpy_close, atol=atol, rtol=rtol, err_msg=err_msg), xs, ys)


def _check_dtypes_match(xs: Any, ys: Any) -> None:
    def match(x: Any, y: Any) -> None:
        if config.enable_x64:
            assert _dtype(x) == _dtype(y), f"dtypes {_dtype(x)} and {_dtype(y)} differ"
        else:
            dx, dy = dtypes.canonicalize_dtype(_dtype(x)), dtypes.canonicalize_dtype(_dtype(y))
            assert dx == dy, f"dtypes {dx} and {dy} differ"
    tree_util.tree_map(match, xs, ys)


def inner_prod(xs: Any, ys: Any) -> Any:
    def contract(x: Any, y: Any) -> Any:
        return np.real(np.dot(np.conj(np.asarray(x)).reshape(-1), np.asarray(y).reshape(-1)))
    return tree_util.tree_reduce(np.add, tree_util.tree_map(contract, xs, ys))


def _safe_subtract(x: Any, y: Any, *, dtype: np.dtype) -> np.ndarray:
    """``x - y`` with ``inf - inf == 0``."""
    x, y = np.asarray(x), np.asarray(y)
    with np.errstate(invalid="ignore"):
        return np.where(np.equal(x, y), np.array(0, dtype), np.subtract(x, y, dtype=dtype))


def _preserve_input_types(f: Callable) -> Callable:
    def wrapped(*args: Any) -> Any:
        dtype = _dtype(args[0])
        result = np.array(f(*(np.asarray(a) if hasattr(a, "__array__") else a for a in args)), dtype=dtype)
        return result.item() if all(_is_python_scalar(a) for a in args) else result
    return wrapped


def _add(xs: Any, ys: Any) -> Any:
    return tree_util.tree_map(_preserve_input_types(operator.add), xs, ys)


def _sub(xs: Any, ys: Any) -> Any:
    return tree_util.tree_map(_preserve_input_types(operator.sub), xs, ys)


def _safe_sub(xs: Any, ys: Any) -> Any:
    return tree_util.tree_map(lambda x, y: _safe_subtract(x, y, dtype=_dtype(x)), xs, ys)


def _conj(xs: Any) -> Any:
    return tree_util.tree_map(_preserve_input_types(np.conj), xs)


def _scalar_mul(xs: Any, a: float) -> Any:
    def mul(x: Any) -> Any:
        dtype = _dtype(x)
        result = np.multiply(np.asarray(x), np.array(a, dtype=dtype), dtype=dtype)
        return result.item() if _is_python_scalar(x) else result
    return tree_util.tree_map(mul, xs)


def _rand_like(rng: np.random.RandomState, x: Any) -> Any:
    dtype = _dtype(x)
    result = np.asarray(rng.randn(*np.shape(x)), dtype=dtype)
    if np.issubdtype(dtype, np.complexfloating):
        result = result + dtype.type(1.0j) * np.asarray(rng.randn(*np.shape(x)), dtype=dtype)
    return result.item() if _is_python_scalar(x) else result


def numerical_jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any], eps: float = EPS) -> Any:
    """The central difference ``(f(x + eps t) - f(x - eps t)) / 2 eps``."""
    delta = _scalar_mul(tangents, eps)
    f_pos = f(*_add(primals, delta))
    f_neg = f(*_sub(primals, delta))
    return _scalar_mul(_safe_sub(f_pos, f_neg), 0.5 / eps)


def _merge_tolerance(tol: Any, default: dict) -> Any:
    if tol is None:
        return default
    if not isinstance(tol, dict):
        return tol
    out = default.copy()
    for k, v in tol.items():
        out[np.dtype(k)] = v
    return out


def check_jvp(f: Callable, f_jvp: Callable, args: Sequence[Any], atol: Any = None, rtol: Any = None,
              eps: float = EPS, err_msg: str = "") -> None:
    """``f_jvp(args, tangents)`` (``functools.partial(ember.jvp, f)``) against finite differences of
    ``f`` in one random direction; AssertionError if they differ."""
    atol = _merge_tolerance(atol, default_gradient_tolerance)
    rtol = _merge_tolerance(rtol, default_gradient_tolerance)
    rng = np.random.RandomState(0)
    tangent = tree_util.tree_map(functools.partial(_rand_like, rng), args)
    v_out, t_out = f_jvp(args, tangent)
    _check_dtypes_match(v_out, t_out)
    v_out_expected = f(*args)
    _check_dtypes_match(v_out, v_out_expected)
    t_out_expected = numerical_jvp(f, args, tangent, eps=eps)
    check_close(v_out, v_out_expected, atol=atol, rtol=rtol, err_msg=f"{err_msg} primal" if err_msg else "primal")
    check_close(t_out, t_out_expected, atol=atol, rtol=rtol, err_msg=f"{err_msg} tangent" if err_msg else "tangent")


def check_vjp(f: Callable, f_vjp: Callable, args: Sequence[Any], atol: Any = None, rtol: Any = None,
              eps: float = EPS, err_msg: str = "") -> None:
    """``f_vjp(*args)`` (``functools.partial(ember.vjp, f)``) against finite differences of ``f``: the
    cotangent of a random output direction, projected on a random input direction."""
    atol = _merge_tolerance(atol, default_gradient_tolerance)
    rtol = _merge_tolerance(rtol, default_gradient_tolerance)
    rand_like = functools.partial(_rand_like, np.random.RandomState(0))
    v_out, vjpfun = f_vjp(*args)
    v_out_expected = f(*args)
    check_close(v_out, v_out_expected, atol=atol, rtol=rtol, err_msg=f"{err_msg} primal" if err_msg else "primal")
    tangent = tree_util.tree_map(rand_like, args)
    tangent_out = numerical_jvp(f, args, tangent, eps=eps)
    cotangent = tree_util.tree_map(rand_like, v_out)
    cotangent_out = _conj(vjpfun(_conj(cotangent)))
    ip = inner_prod(tangent, cotangent_out)
    ip_expected = inner_prod(tangent_out, cotangent)
    check_close(ip, ip_expected, atol=atol, rtol=rtol,
                err_msg=f"{err_msg} cotangent projection" if err_msg else "cotangent projection")


def _jvp_from_lin(f: Callable, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple:
    primal_out, f_lin = linearize(f, *primals)
    return primal_out, f_lin(*tangents)


def check_grads(f: Callable, args: Sequence[Any], order: int, modes: Sequence[str] = ("fwd", "rev"),
                atol: Any = None, rtol: Any = None, eps: float | None = None) -> None:
    """Derivatives of ``f`` at ``args`` up to ``order`` against finite differences, in one random
    direction. ``modes``: "fwd" (jvp), "rev" (vjp), "lin" (linearize). ``atol`` / ``rtol``: a number
    or a dict by dtype. Raises AssertionError if they disagree."""
    args = tuple(args)
    eps = eps or EPS
    _check_jvp = functools.partial(check_jvp, atol=atol, rtol=rtol, eps=eps)
    _check_vjp = functools.partial(check_vjp, atol=atol, rtol=rtol, eps=eps)

    def _check_grads(f: Callable, args: tuple, order: int, err_msg: str = "") -> None:
        if "fwd" in modes:
            fwd_msg = f"JVP of {err_msg}" if err_msg else "JVP"
            _check_jvp(f, functools.partial(jvp, f), args, err_msg=fwd_msg)
            if order > 1:
                _check_grads(functools.partial(jvp, f), (args, args), order - 1, fwd_msg)
        if "rev" in modes:
            rev_msg = f"VJP of {err_msg}" if err_msg else "VJP"
            _check_vjp(f, functools.partial(vjp, f), args, err_msg=rev_msg)
            if order > 1:
                def f_vjp(*args: Any) -> Any:
                    out_primal, vjp_fn = vjp(f, *args)
                    return vjp_fn(out_primal)
                _check_grads(f_vjp, args, order - 1, rev_msg)
        if "lin" in modes:
            lin_msg = f"LIN of {err_msg}" if err_msg else "LIN"
            _check_jvp(f, functools.partial(_jvp_from_lin, f), args, err_msg=lin_msg)
            if order > 1:
                _check_grads(functools.partial(_jvp_from_lin, f), (args, args), order - 1, lin_msg)

    _check_grads(f, args, order)
