"""Silent wrong answers, pinned down against JAX's rules: where an index lands (negative and
out-of-range indices, in every indexing path, unsigned indices beyond int32 included), integer
division and remainder by zero, hypot of NaN and infinity, the key order of dict pytrees, the
gradient of an out-of-range gather, and the type and value of integer and boolean powers.

Each section writes JAX's rule down as a NumPy (or plain Python) reference function, then checks
ember against it with hypothesis: eagerly (the reference interpreter), under ``jit`` (native
code) and under ``jit`` on the reference backend. The ``*_jax`` tests check that JAX itself
follows the written rule and that ember gives JAX's answers; they run where JAX is installed.
"""
from __future__ import annotations

import collections
import functools
import math
from typing import Any, Callable

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.numpy as ejnp
from ember import lax as elax, tree_util

FAST = settings(max_examples=12, deadline=None)
BACKENDS = ("eager", "jit", "jit-reference")


def _run(fn: Callable, jitted: Callable, backend: str, *args: Any) -> Any:
    """``fn(*args)`` on one backend: eagerly, or the (reused) jitted function natively or on the
    reference interpreter."""
    if backend == "eager":
        return fn(*args)
    if backend == "jit-reference":
        with ember.config.override(backend="reference"):
            return jitted(*args)
    return jitted(*args)


def _assert_same(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert np.array_equal(got.astype(np.float64), want.astype(np.float64), equal_nan=True), \
        f"{what}: got {got.tolist()}, want {want.tolist()}"


# --- 1. where an index lands ----------------------------------------------------------------------
# JAX's rules, for an axis of size n (windows of size s: a start fits where 0 <= start <= n - s):
#   * NumPy-style indexing (x[i], x.at[i].get/set/add in every mode, jnp.take_along_axis in every
#     mode but 'promise_in_bounds', jnp.take with mode None / 'fill') first normalizes a negative
#     (signed) index ONCE: i + n. Nothing wraps it a second time (x[-7] of 5 rows is row 0, not 3).
#   * Then reads clamp into range (x[i], .at[i].get() with mode None / 'clip' / 'promise_in_bounds',
#     mode 'clip' everywhere), 'fill' reads give the fill value where the index does not fit
#     (NaN by default for floats), and writes with mode None / 'drop' are dropped where it does
#     not fit ('clip' writes clamp).
#   * jnp.take(mode='clip') does NOT normalize: a negative index clamps to 0 (x[0], not x[-1]);
#     jnp.take(mode='wrap') takes i mod n.
#   * lax.dynamic_slice / dynamic_update_slice (and the _in_dim forms) normalize once (unless
#     allow_negative_indices=False), then clamp the start so the window fits.
#   * lax.gather / lax.scatter never normalize. lax.gather's mode=None is 'promise_in_bounds',
#     which clamps as 'clip' does; lax.scatter's mode=None is 'fill_or_drop'.
# Indices that do not fit int32 (uint32 >= 2**31), which JAX casts to int32 in some of these paths
# and not in others, have their own rules in section 5.
N, M = 5, 3
X = np.arange(N * M, dtype=np.float32).reshape(N, M)
INDEX_DTYPES = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


def wrap_once(i: int, n: int) -> int:
    """JAX's normalization of an index: n added once to a negative one."""
    return i + n if i < 0 else i


def clamp(start: int, n: int, size: int = 1) -> int:
    """The start a window of ``size`` is moved to so that it fits in [0, n)."""
    return min(max(start, 0), n - size)


def fits(start: int, n: int, size: int = 1) -> bool:
    return 0 <= start <= n - size


def _rows_set(x: np.ndarray, start: int | None, size: int, value: float, add: bool = False) -> np.ndarray:
    """``x`` with rows [start, start + size) set to (or increased by) ``value``; None: unchanged."""
    out = x.copy()
    if start is not None:
        out[start:start + size] = out[start:start + size] + value if add else value
    return out


def _col_set(x: np.ndarray, col: int | None, value: float) -> np.ndarray:
    out = x.copy()
    if col is not None:
        out[:, col] = value
    return out


def _nan_row(x: np.ndarray, row: int, n: int, fill: float = np.nan) -> np.ndarray:
    return x[row] if 0 <= row < n else np.full(x.shape[1:], fill, x.dtype)


def index_rules(x: np.ndarray, i: int, j: int) -> dict[str, np.ndarray]:
    """Every case of ``index_ops`` by the rules above (i indexes the rows, j the columns)."""
    wi, wj = wrap_once(i, N), wrap_once(j, M)
    return {
        "x[i]": x[clamp(wi, N)],
        "x[:, j]": x[:, clamp(wj, M)],
        "x[i, j]": x[clamp(wi, N), clamp(wj, M)],
        "x[[i, i]]": x[[clamp(wi, N)] * 2],
        "at[i].get()": x[clamp(wi, N)],
        "at[i].get(clip)": x[clamp(wi, N)],
        "at[i].get(promise_in_bounds)": x[clamp(wi, N)],
        "at[i].get(fill)": _nan_row(x, wi, N, fill=-1.0),
        "at[[i]].get(fill)": _nan_row(x, wi, N)[None],
        "at[i].set()": _rows_set(x, wi if fits(wi, N) else None, 1, 100.0),
        "at[i].set(clip)": _rows_set(x, clamp(wi, N), 1, 100.0),
        "at[i].add(drop)": _rows_set(x, wi if fits(wi, N) else None, 1, 100.0, add=True),
        "at[[i, i]].add()": _rows_set(x, wi if fits(wi, N) else None, 1, 2.0, add=True),
        "at[[i, j]].set(clip)": _rows_set(_rows_set(x, clamp(wi, N), 1, 100.0), clamp(wrap_once(j, N), N), 1, 100.0),
        "at[:, j].set(clip)": _col_set(x, clamp(wj, M), 100.0),
        "at[:, j].set()": _col_set(x, wj if fits(wj, M) else None, 100.0),
        "take(i)": _nan_row(x, wi, N),
        "take(i, clip)": x[clamp(i, N)],
        "take(i, wrap)": x[i % N],
        "take(ravel, clip)": x.ravel()[clamp(i, N * M)],
        "take_along_axis(j)": np.stack([_nan_row(x.T, wj, M)] * 2, 1),
        "take_along_axis(j, clip)": np.stack([x[:, clamp(wj, M)]] * 2, 1),
        "dynamic_slice": x[clamp(wi, N, 2):][:2],
        "dynamic_slice(no wrap)": x[clamp(i, N, 2):][:2],
        "dynamic_index_in_dim": x[:, clamp(wj, M)],
        "dynamic_update_slice": _rows_set(x, clamp(wi, N, 2), 2, 100.0),
        "dynamic_update_slice(no wrap)": _rows_set(x, clamp(i, N, 2), 2, 100.0),
        "dynamic_update_index_in_dim": _rows_set(x, clamp(wi, N), 1, 100.0),
        "gather": x[clamp(i, N, 2):][:2][None],
        "gather(fill)": (x[i:i + 2] if fits(i, N, 2) else np.full((2, M), np.nan, x.dtype))[None],
        "gather(clip)": x[clamp(i, N, 2):][:2][None],
        "scatter": _rows_set(x, i if fits(i, N, 2) else None, 2, 100.0),
        "scatter_add(clip)": _rows_set(x, clamp(i, N, 2), 2, 100.0, add=True),
    }


def index_ops(jnp: Any, lax: Any) -> Callable:
    """The cases of ``index_rules``, written for ``jnp`` / ``lax`` (ember's or JAX's), as one
    function of (x, i, j) returning a dict (so one compilation covers all of them)."""
    rows = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0,))
    scatter_rows = lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(),
                                               scatter_dims_to_operand_dims=(0,))

    def ops(x: Any, i: Any, j: Any) -> dict:
        zero = i * 0  # (a start of i's type: JAX wants one type for all starts with allow_negative_indices=False)
        block = jnp.full((2, M), 100.0, x.dtype)
        ii = jnp.stack([i, i])
        return {
            "x[i]": x[i],
            "x[:, j]": x[:, j],
            "x[i, j]": x[i, j],
            "x[[i, i]]": x[ii],
            "at[i].get()": x.at[i].get(),
            "at[i].get(clip)": x.at[i].get(mode="clip"),
            "at[i].get(promise_in_bounds)": x.at[i].get(mode="promise_in_bounds"),
            "at[i].get(fill)": x.at[i].get(mode="fill", fill_value=-1.0),
            "at[[i]].get(fill)": x.at[ii[:1]].get(mode="fill"),
            "at[i].set()": x.at[i].set(100.0),
            "at[i].set(clip)": x.at[i].set(100.0, mode="clip"),
            "at[i].add(drop)": x.at[i].add(100.0, mode="drop"),
            "at[[i, i]].add()": x.at[ii].add(1.0),
            "at[[i, j]].set(clip)": x.at[jnp.stack([i, j])].set(100.0, mode="clip"),
            "at[:, j].set(clip)": x.at[:, j].set(100.0, mode="clip"),
            "at[:, j].set()": x.at[:, j].set(100.0),
            "take(i)": jnp.take(x, i, axis=0),
            "take(i, clip)": jnp.take(x, i, axis=0, mode="clip"),
            "take(i, wrap)": jnp.take(x, i, axis=0, mode="wrap"),
            "take(ravel, clip)": jnp.take(x, i, mode="clip"),
            "take_along_axis(j)": jnp.take_along_axis(x, jnp.full((N, 2), j), axis=1),
            "take_along_axis(j, clip)": jnp.take_along_axis(x, jnp.full((N, 2), j), axis=1, mode="clip"),
            "dynamic_slice": lax.dynamic_slice(x, (i, zero), (2, M)),
            "dynamic_slice(no wrap)": lax.dynamic_slice(x, (i, zero), (2, M), allow_negative_indices=False),
            "dynamic_index_in_dim": lax.dynamic_index_in_dim(x, j, 1, keepdims=False),
            "dynamic_update_slice": lax.dynamic_update_slice(x, block, (i, zero)),
            "dynamic_update_slice(no wrap)": lax.dynamic_update_slice(x, block, (i, zero),
                                                                      allow_negative_indices=False),
            "dynamic_update_index_in_dim": lax.dynamic_update_index_in_dim(x, block[0], i, 0),
            "gather": lax.gather(x, jnp.reshape(i, (1, 1)), rows, (2, M)),
            "gather(fill)": lax.gather(x, jnp.reshape(i, (1, 1)), rows, (2, M), mode="fill"),
            "gather(clip)": lax.gather(x, jnp.reshape(i, (1, 1)), rows, (2, M), mode="clip"),
            "scatter": lax.scatter(x, jnp.reshape(i, (1, 1)), block[None], scatter_rows),
            "scatter_add(clip)": lax.scatter_add(x, jnp.reshape(i, (1, 1)), block[None], scatter_rows, mode="clip"),
        }

    return ops


EMBER_INDEX_OPS = index_ops(ejnp, elax)
EMBER_INDEX_OPS_JIT = ember.jit(EMBER_INDEX_OPS)


@st.composite
def index_pairs(draw: Callable, dtypes: tuple[str, ...] = INDEX_DTYPES) -> tuple[str, int, int]:
    """An index dtype and two indices of it: below -n, in [-n, n), at or above n, or extreme."""
    dtype = draw(st.sampled_from(dtypes))
    info = np.iinfo(dtype)
    low, high = max(int(info.min), -3 * N), min(int(info.max), 3 * N)
    extremes = [int(info.min), min(int(info.max), 2**31 - 1)]
    value = st.integers(low, high) | st.sampled_from(extremes)
    return dtype, draw(value), draw(value)


@FAST
@given(index_pairs())
def test_indices_land_where_jax_rules_put_them(case: tuple[str, int, int]) -> None:
    dtype, i, j = case
    want = index_rules(X, i, j)
    for backend in BACKENDS:
        i_arg, j_arg = ejnp.asarray(np.array(i, dtype)), ejnp.asarray(np.array(j, dtype))
        got = _run(EMBER_INDEX_OPS, EMBER_INDEX_OPS_JIT, backend, ejnp.asarray(X), i_arg, j_arg)
        for name in want:
            _assert_same(got[name], want[name], f"{name} ({backend}, {dtype} i={i} j={j})")
    # NumPy integer scalars are static indices: the same rules.
    got = EMBER_INDEX_OPS(ejnp.asarray(X), np.array(i, dtype)[()], np.array(j, dtype)[()])
    for name in want:
        _assert_same(got[name], want[name], f"{name} (NumPy scalar index, {dtype} i={i} j={j})")


@functools.cache
def _index_grad_and_vmap() -> tuple[Callable, Callable, Callable]:
    row_sum = ember.jit(ember.grad(lambda x, i: (x[i] * np.arange(1, M + 1, dtype=np.float32)).sum()))
    slices = ember.jit(ember.vmap(lambda x, i: elax.dynamic_slice(x, (i, i * 0), (2, M), allow_negative_indices=False),
                                  (0, None)))
    updates = ember.jit(ember.vmap(lambda x, i: elax.dynamic_update_slice(x, x[:2] * 2, (i, i * 0)), (0, None)))
    return row_sum, slices, updates


@FAST
@given(st.integers(-3 * N, 3 * N))
def test_index_gradients_and_batches_follow_the_same_rules(i: int) -> None:
    """The transpose of a dynamic slice and the batched dynamic slices start where the primitive
    did: no second normalization of a start that is already final."""
    row_sum, slices, updates = _index_grad_and_vmap()
    index = np.int32(i)
    want = np.zeros_like(X)
    want[clamp(wrap_once(i, N), N)] = np.arange(1, M + 1)
    _assert_same(row_sum(ejnp.asarray(X), index), want, f"grad of x[{i}]")
    xs = np.stack([X, X + 1])
    _assert_same(slices(ejnp.asarray(xs), index), np.stack([x[clamp(i, N, 2):][:2] for x in xs]),
                 f"vmap of dynamic_slice at {i} (no wrap)")
    start = clamp(wrap_once(i, N), N, 2)
    want_updates = np.stack([_rows_set(x, start, 2, 0.0, add=True) for x in xs])
    want_updates[:, start:start + 2] = xs[:, :2] * 2
    _assert_same(updates(ejnp.asarray(xs), index), want_updates, f"vmap of dynamic_update_slice at {i}")


@settings(max_examples=8, deadline=None)
@given(index_pairs(("int8", "int32", "uint8")))  # (JAX compiles the cases for each: a second each)
def test_indices_land_where_jax_puts_them_jax(case: tuple[str, int, int]) -> None:
    pytest.importorskip("jax")
    import jax.numpy as jjnp

    dtype, i, j = case
    jax_ops = _jax_index_ops()
    args = (np.array(i, dtype), np.array(j, dtype))
    theirs = jax_ops(jjnp.asarray(X), *args)
    want = index_rules(X, i, j)
    ours = EMBER_INDEX_OPS_JIT(ejnp.asarray(X), *map(ejnp.asarray, args))
    for name in want:
        _assert_same(theirs[name], want[name], f"JAX {name} ({dtype} i={i} j={j})")
        _assert_same(ours[name], theirs[name], f"ember vs JAX {name} ({dtype} i={i} j={j})")


@functools.cache
def _jax_index_ops() -> Callable:
    import jax
    import jax.numpy as jjnp
    from jax import lax as jlax

    return jax.jit(index_ops(jjnp, jlax))


# --- 2. integer division and remainder ------------------------------------------------------------
# JAX's rules (XLA's division, then jnp's corrections), for every integer dtype:
#   * lax.div(a, b) truncates toward zero; lax.div(a, 0) is -1 (all bits set: the maximum if
#     unsigned); lax.div(MIN, -1) is MIN. lax.rem(a, b) = a - b * lax.div(a, b); lax.rem(a, 0) = a.
#   * a // b (floor_divide, divmod[0]): unsigned: lax.div. Signed: q = lax.div(a, b), one less
#     where sign(a) != sign(b) and lax.rem(a, b) != 0. So a // 0 is -2 for a != 0, -1 for a == 0.
#   * a % b (remainder, mod, divmod[1]): the divisor 0 is replaced by 1 first (a % 0 == 0), then
#     r = lax.rem(a, b) plus b where r != 0 and r, b have different signs.
#   * fmod(a, b): lax.rem with the divisor 0 replaced by 1 (fmod(a, 0) == 0).
#   * Booleans: //, %, divmod compute in int32 (also with x64); fmod checks for an integer dtype
#     before promoting, so booleans keep the divisor 0: fmod(True, False) = lax.rem(1, 0) = 1.
#   * lax.div and lax.rem reject booleans.
INT_DTYPES = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
X64_INT_DTYPES = ("int64", "uint64")


def _in_dtype(v: int, dtype: str) -> int:
    """``v`` wrapped into ``dtype``'s range (two's complement)."""
    info = np.iinfo(dtype)
    span = int(info.max) - int(info.min) + 1
    return (v - int(info.min)) % span + int(info.min)


def _sign(v: int) -> int:
    return (v > 0) - (v < 0)


def lax_div_rule(a: int, b: int, dtype: str) -> int:
    if b == 0:
        return _in_dtype(-1, dtype)
    q = abs(a) // abs(b)
    return _in_dtype(q if _sign(a) == _sign(b) else -q, dtype)


def lax_rem_rule(a: int, b: int, dtype: str) -> int:
    return a if b == 0 else _in_dtype(a - b * lax_div_rule(a, b, dtype), dtype)


def floor_divide_rule(a: int, b: int, dtype: str) -> int:
    q = lax_div_rule(a, b, dtype)
    if np.iinfo(dtype).min < 0 and _sign(a) != _sign(b) and lax_rem_rule(a, b, dtype) != 0:
        q = _in_dtype(q - 1, dtype)
    return q


def remainder_rule(a: int, b: int, dtype: str) -> int:
    b = b or 1
    r = lax_rem_rule(a, b, dtype)
    return _in_dtype(r + b, dtype) if r != 0 and (r < 0) != (b < 0) else r


def fmod_rule(a: int, b: int, dtype: str) -> int:
    return lax_rem_rule(a, b or 1, dtype)


def division_rules(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """Every case of ``division_ops`` by the rules above; booleans as int32."""
    dtype = "int32" if a.dtype == np.bool_ else a.dtype.name
    boolean = a.dtype == np.bool_

    def each(rule: Callable, bs: Any = None) -> np.ndarray:
        bs = b if bs is None else bs
        return np.array([rule(int(p), int(q), dtype) for p, q in zip(a, np.broadcast_to(bs, a.shape))], dtype)

    out = {"//": each(floor_divide_rule), "%": each(remainder_rule), "floor_divide": each(floor_divide_rule),
           "remainder": each(remainder_rule), "mod": each(remainder_rule),
           "fmod": each(lax_rem_rule if boolean else fmod_rule),
           "divmod[0]": each(floor_divide_rule), "divmod[1]": each(remainder_rule)}
    if not boolean:
        out.update({"lax.div": each(lax_div_rule), "lax.rem": each(lax_rem_rule), "// 0": each(floor_divide_rule, 0),
                    "% 0": each(remainder_rule, 0), "fmod(a, 0)": each(fmod_rule, 0)})
    return out


def division_ops(jnp: Any, lax: Any) -> Callable:
    def ops(a: Any, b: Any) -> dict:
        q, r = jnp.divmod(a, b)
        out = {"//": a // b, "%": a % b, "floor_divide": jnp.floor_divide(a, b), "remainder": jnp.remainder(a, b),
               "mod": jnp.mod(a, b), "fmod": jnp.fmod(a, b), "divmod[0]": q, "divmod[1]": r}
        if a.dtype != np.bool_:
            out.update({"lax.div": lax.div(a, b), "lax.rem": lax.rem(a, b), "// 0": a // 0, "% 0": a % 0,
                        "fmod(a, 0)": jnp.fmod(a, 0)})
        return out

    return ops


EMBER_DIVISION_OPS = division_ops(ejnp, elax)
EMBER_DIVISION_OPS_JIT = ember.jit(EMBER_DIVISION_OPS)


def _operands(dtype: str) -> st.SearchStrategy:
    """Dividends and divisors: zeros, ±1, the extremes and anything else in range."""
    info = np.iinfo(dtype)
    special = [0, 0, 1, 2, 7, int(info.max), int(info.min)] + ([-1, -1, -2, -7, int(info.min) + 1] if info.min else [])
    element = st.sampled_from(special) | st.integers(int(info.min), int(info.max))
    return st.lists(element, min_size=8, max_size=8).map(lambda v: np.array(v, dtype))


def _check_division(a: np.ndarray, b: np.ndarray) -> None:
    want = division_rules(a, b)
    for backend in BACKENDS:
        got = _run(EMBER_DIVISION_OPS, EMBER_DIVISION_OPS_JIT, backend, ejnp.asarray(a), ejnp.asarray(b))
        for name in want:
            assert np.asarray(got[name]).dtype == want[name].dtype, f"{name} ({backend}): dtype {got[name].dtype}"
            _assert_same(got[name], want[name], f"{name} ({backend}) of {a.tolist()} by {b.tolist()}")


@pytest.mark.parametrize("dtype", INT_DTYPES + X64_INT_DTYPES)
@FAST
@given(data=st.data())
def test_integer_division_follows_jax_rules(dtype: str, data: Any) -> None:
    with ember.config.override(enable_x64=dtype in X64_INT_DTYPES):
        _check_division(data.draw(_operands(dtype)), data.draw(_operands(dtype)))


BOOLS = np.array([False, False, True, True]), np.array([False, True, False, True])


@pytest.mark.parametrize("x64", [False, True])
def test_boolean_division_is_int32_division(x64: bool) -> None:
    with ember.config.override(enable_x64=x64):
        _check_division(*BOOLS)
        with pytest.raises(TypeError):
            elax.rem(ejnp.asarray(BOOLS[0]), ejnp.asarray(BOOLS[1]))


@functools.cache
def _jax_division_ops() -> Callable:
    import jax
    import jax.numpy as jjnp
    from jax import lax as jlax

    return jax.jit(division_ops(jjnp, jlax))


def _check_division_against_jax(a: np.ndarray, b: np.ndarray, x64: bool) -> None:
    import jax
    import jax.numpy as jjnp

    want = division_rules(a, b)
    with jax.enable_x64(x64), ember.config.override(enable_x64=x64):
        theirs = _jax_division_ops()(jjnp.asarray(a), jjnp.asarray(b))
        ours = EMBER_DIVISION_OPS_JIT(ejnp.asarray(a), ejnp.asarray(b))
    for name in want:
        assert theirs[name].dtype == want[name].dtype and ours[name].dtype == want[name].dtype, name
        _assert_same(theirs[name], want[name], f"JAX {name} of {a.tolist()} by {b.tolist()}")
        _assert_same(ours[name], theirs[name], f"ember vs JAX {name} of {a.tolist()} by {b.tolist()}")


@pytest.mark.parametrize("dtype", INT_DTYPES + X64_INT_DTYPES)
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_integer_division_matches_jax(dtype: str, data: Any) -> None:
    pytest.importorskip("jax")
    _check_division_against_jax(data.draw(_operands(dtype)), data.draw(_operands(dtype)), dtype in X64_INT_DTYPES)


@pytest.mark.parametrize("x64", [False, True])
def test_boolean_division_matches_jax(x64: bool) -> None:
    pytest.importorskip("jax")
    _check_division_against_jax(*BOOLS, x64)


# --- 3. hypot -------------------------------------------------------------------------------------
# IEEE 754 (and JAX): hypot(±inf, y) = inf for every y, NaN included; otherwise NaN if an operand
# is NaN; otherwise sqrt(x² + y²), without overflow or underflow in between.
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -3.0, 4.0, 6e4, 1e-3]


def _float_dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name, name))


def hypot_rule(x: float, y: float, dtype: np.dtype) -> float:
    """The rule, rounded to ``dtype`` (so a result beyond its range is inf)."""
    if math.isinf(x) or math.isinf(y):
        return math.inf
    if math.isnan(x) or math.isnan(y):
        return math.nan
    with np.errstate(over="ignore"):
        return float(np.array(math.hypot(x, y)).astype(dtype))


HYPOT_JIT = ember.jit(ejnp.hypot)


def _float_operands(dtype: str) -> st.SearchStrategy:
    value = st.sampled_from(SPECIALS) | st.floats(-1e4, 1e4, width=16, allow_subnormal=False)
    return st.lists(value, min_size=6, max_size=6).map(lambda v: np.array(v).astype(_float_dtype(dtype)))


def _hypot_want(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.array([hypot_rule(float(p), float(q), x.dtype) for p, q in zip(x, y)])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@FAST
@given(data=st.data())
def test_hypot_of_an_infinity_is_inf(dtype: str, data: Any) -> None:
    x, y = data.draw(_float_operands(dtype)), data.draw(_float_operands(dtype))
    x[0], y[0] = np.nan, np.inf  # (always a case that needs the rule)
    want = _hypot_want(x, y)
    special = ~np.isfinite(want)
    with ember.config.override(enable_x64=dtype == "float64"):
        for backend in BACKENDS:
            for a, b in ((x, y), (y, x)):
                got = np.asarray(_run(ejnp.hypot, HYPOT_JIT, backend, ejnp.asarray(a), ejnp.asarray(b)))
                assert got.dtype == x.dtype
                _assert_same(got[special], want[special], f"hypot ({backend}, {dtype}) of {a} and {b}")
                np.testing.assert_allclose(got[~special].astype(np.float64), want[~special], rtol=1e-2)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_hypot_of_an_infinity_is_inf_jax(dtype: str) -> None:
    pytest.importorskip("jax")
    import jax
    import jax.numpy as jjnp

    x, y = (g.ravel().astype(_float_dtype(dtype)) for g in np.meshgrid(SPECIALS, SPECIALS))
    with jax.enable_x64(dtype == "float64"), ember.config.override(enable_x64=dtype == "float64"):
        theirs = np.asarray(jax.jit(jjnp.hypot)(x, y)).astype(np.float64)
        ours = np.asarray(HYPOT_JIT(ejnp.asarray(x), ejnp.asarray(y))).astype(np.float64)
    want = _hypot_want(x, y)
    special = ~np.isfinite(want)
    _assert_same(theirs[special], want[special], f"JAX hypot ({dtype})")
    _assert_same(ours[special], theirs[special], f"ember vs JAX hypot ({dtype})")
    np.testing.assert_allclose(ours, theirs, rtol=1e-2)


# --- 4. dict pytrees ------------------------------------------------------------------------------
# JAX's rules: a dict (and a defaultdict) flattens in sorted key order, and every structure built
# from it rebuilds the dict with its keys inserted in sorted order (tree_map, tree_unflatten, the
# outputs of jit / grad / vmap, the arguments a jitted function sees). Structures of dicts with the
# same keys are equal whatever the insertion order. An OrderedDict keeps its order (and OrderedDicts
# in different orders have different structures). Keys that do not sort raise: for a dict
# ValueError('Comparator raised exception while sorting pytree dictionary keys.') from the
# comparison's TypeError; for a defaultdict the TypeError itself.
UNSORTABLE = "Comparator raised exception while sorting pytree dictionary keys."


def sorted_copy(tree: Any) -> Any:
    """The rule: ``tree`` with every dict rebuilt in sorted key order."""
    if isinstance(tree, collections.OrderedDict):
        return collections.OrderedDict((k, sorted_copy(v)) for k, v in tree.items())
    if isinstance(tree, collections.defaultdict):
        return collections.defaultdict(tree.default_factory, {k: sorted_copy(tree[k]) for k in sorted(tree)})
    if isinstance(tree, dict):
        return {k: sorted_copy(tree[k]) for k in sorted(tree)}
    if isinstance(tree, list):
        return [sorted_copy(v) for v in tree]
    return tree


def ordered(tree: Any) -> Any:
    """``tree`` with every dict as its list of (key, value) pairs in insertion order: equal only
    if the key orders are equal too."""
    if isinstance(tree, dict):
        return (type(tree).__name__, [(k, ordered(v)) for k, v in tree.items()])
    if isinstance(tree, (list, tuple)):
        return [ordered(v) for v in tree]
    return tree


def rule_leaves(tree: Any) -> list:
    if isinstance(tree, collections.OrderedDict):
        return [leaf for v in tree.values() for leaf in rule_leaves(v)]
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in rule_leaves(tree[k])]
    if isinstance(tree, list):
        return [leaf for v in tree for leaf in rule_leaves(v)]
    return [tree]


def _mapping(keys: st.SearchStrategy, children: st.SearchStrategy) -> st.SearchStrategy:
    plain = st.dictionaries(keys, children, max_size=4)
    return plain | plain.map(lambda d: collections.defaultdict(list, d)) | plain.map(collections.OrderedDict)


KEYS = st.text("abcxyz", min_size=1, max_size=2) | st.integers(-3, 3).map(lambda k: f"k{k}")
TREES = st.recursive(st.integers(0, 9), lambda children: _mapping(KEYS, children) | st.lists(children, max_size=3),
                     max_leaves=10)


@FAST
@given(TREES)
def test_dicts_flatten_and_rebuild_in_sorted_key_order(tree: Any) -> None:
    leaves, treedef = tree_util.tree_flatten(tree)
    assert leaves == rule_leaves(tree)
    assert tree_util.tree_leaves(tree) == rule_leaves(tree)
    want = ordered(sorted_copy(tree))
    assert ordered(tree_util.tree_unflatten(treedef, leaves)) == want
    assert ordered(tree_util.tree_map(lambda v: v, tree)) == want
    assert ordered(tree_util.tree_map(lambda v, w: v, tree, tree)) == want
    assert ordered(tree_util.tree_map_with_path(lambda p, v: v, tree)) == want
    assert ordered(tree_util.tree_structure(tree).unflatten(leaves)) == want
    assert ordered(tree_util.tree_broadcast(0, tree)) == ordered(tree_util.tree_map(lambda v: 0, sorted_copy(tree)))
    assert tree_util.tree_structure(tree) == tree_util.tree_structure(sorted_copy(tree))
    assert [v for _, v in tree_util.tree_flatten_with_path(tree)[0]] == rule_leaves(tree)


def test_dict_structures_equal_whatever_the_insertion_order() -> None:
    assert tree_util.tree_structure({"w": 1, "b": 2}) == tree_util.tree_structure({"b": 1, "w": 2})
    ordered_dicts = collections.OrderedDict(w=1, b=2), collections.OrderedDict(b=1, w=2)
    assert tree_util.tree_structure(ordered_dicts[0]) != tree_util.tree_structure(ordered_dicts[1])
    assert list(tree_util.tree_map(lambda v: v, {"weights": 1, "biases": 2})) == ["biases", "weights"]


UNSORTABLE_TREES = ({1: 1, "a": 2}, [{"x": {(1, "a"): 1, (1, 2): 2}}], collections.defaultdict(int, {1: 1, "a": 2}))
_PYTREE_FUNCTIONS = ("tree_flatten", "tree_leaves", "tree_structure", "tree_flatten_with_path")


@pytest.mark.parametrize("tree", UNSORTABLE_TREES, ids=["dict", "nested", "defaultdict"])
def test_dict_keys_that_do_not_sort_raise(tree: Any) -> None:
    error = TypeError if isinstance(tree, collections.defaultdict) else ValueError
    for name in _PYTREE_FUNCTIONS:
        with pytest.raises(error) as info:
            getattr(tree_util, name)(tree)
        if error is ValueError:
            assert str(info.value) == UNSORTABLE and isinstance(info.value.__cause__, TypeError)
    with pytest.raises(error):
        tree_util.tree_map(lambda v: v, tree)
    with pytest.raises(error):
        ember.jit(lambda t: tree_util.tree_leaves(t)[0])(tree)
    assert tree_util.tree_leaves(collections.OrderedDict({1: 1, "a": 2})) == [1, 2]  # (insertion order)


def test_jit_grad_and_vmap_see_and_return_sorted_dicts() -> None:
    seen: list = []

    def double(d: dict) -> dict:
        seen.append([list(d), list(d["inner"])])
        return {k: v if k == "inner" else v * 2 for k, v in d.items()}

    jitted = ember.jit(double)
    arg = {"w": ejnp.ones(2), "inner": {"z": 1.0, "y": 2.0}, "b": ejnp.zeros(2)}
    out = jitted(arg)
    assert seen == [[["b", "inner", "w"], ["y", "z"]]]  # (the traced function's view of its argument)
    assert ordered(out) == ordered(sorted_copy(out)) and list(out) == ["b", "inner", "w"]
    assert list(jitted({"b": ejnp.zeros(2), "inner": {"y": 2.0, "z": 1.0}, "w": ejnp.ones(2)})) == ["b", "inner", "w"]
    assert len(seen) == 1  # (the same structure: a cache hit)
    assert list(ember.jit(lambda x: {"w": x, "b": x})(1.0)) == ["b", "w"]
    assert list(ember.grad(lambda p: p["w"] * p["b"])({"w": 1.0, "b": 2.0})) == ["b", "w"]
    assert list(ember.vmap(lambda p: {"z": p["w"], "a": p["b"]})({"w": ejnp.ones(2), "b": ejnp.ones(2)})) == ["a", "z"]


@FAST
@given(TREES)
def test_dict_pytrees_match_jax(tree: Any) -> None:
    pytest.importorskip("jax")
    import jax
    theirs_leaves, theirs_def = jax.tree_util.tree_flatten(tree)
    ours_leaves, ours_def = tree_util.tree_flatten(tree)
    assert ours_leaves == theirs_leaves == rule_leaves(tree)
    assert ordered(tree_util.tree_unflatten(ours_def, ours_leaves)) == ordered(jax.tree_util.tree_unflatten(
        theirs_def, theirs_leaves)) == ordered(sorted_copy(tree))
    assert ordered(tree_util.tree_map(lambda v: v, tree)) == ordered(jax.tree_util.tree_map(lambda v: v, tree))


@pytest.mark.parametrize("tree", UNSORTABLE_TREES, ids=["dict", "nested", "defaultdict"])
def test_dict_keys_that_do_not_sort_raise_as_in_jax(tree: Any) -> None:
    pytest.importorskip("jax")
    import jax
    for name in _PYTREE_FUNCTIONS:
        with pytest.raises(Exception) as theirs:
            getattr(jax.tree_util, name)(tree)
        with pytest.raises(Exception) as ours:
            getattr(tree_util, name)(tree)
        assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value), name
        assert type(ours.value.__cause__) is type(theirs.value.__cause__), name


# --- 5. unsigned indices and indices beyond int32 -----------------------------------------------------
# JAX's rules for a scalar index v of integer type d (x64 off), by path. "Cast to int32" is a C cast
# (two's complement): a uint32 v of 2**31 or more becomes negative there.
#   * gathers and scatters (x[i[None]], .at[i].get(mode='fill'), .at[i].set/add in every mode): v
#     plus n if d is signed and v < 0 (never for unsigned d), then cast to int32; then the mode:
#     reads clamp (or fill with 'fill'), writes drop (or clamp with 'clip'). No second
#     normalization: a uint32 2**32 - 1 reads row 0, and its write is dropped.
#   * x[i], .at[i].get() and .at[i].get(mode='clip') with a scalar i are a dynamic slice: in an
#     operand of one dimension v keeps its type (unsigned: clamped to n - 1); in more dimensions
#     v is first cast to int32, then normalized (v + n if negative), then clamped.
#   * jnp.take keeps d: 'fill' (the default) normalizes negative signed v only, and fills where
#     the result is outside [0, n); 'clip' clamps (a uint32 2**31 is row n - 1); 'wrap' is v mod n.
#   * jnp.take_along_axis casts v to int32 first, then normalizes, then fills or clips.
#   * lax.dynamic_slice / dynamic_update_slice keep d: normalize signed negatives, clamp.
BIG_INDEX_DTYPES = ("uint8", "uint16", "uint32", "int8", "int16", "int32")
X1 = np.arange(10, dtype=np.float32)
X2 = np.arange(15, dtype=np.float32).reshape(5, 3)


def as_int32(v: int) -> int:
    return _in_dtype(v, "int32")


def _signed(dtype: str) -> bool:
    return np.iinfo(dtype).min < 0


def _row(x: np.ndarray, r: int | None, fill: float = np.nan) -> np.ndarray:
    """``x[r]``, or a row of ``fill`` for None (out of bounds)."""
    return x[r] if r is not None else np.full(x.shape[1:], fill, x.dtype)


def _fitting(r: int, n: int) -> int | None:
    return r if 0 <= r < n else None


def big_index_rules(x: np.ndarray, v: int, dtype: str) -> dict[str, np.ndarray]:
    n = x.shape[0]
    gather = as_int32(wrap_once(v, n) if _signed(dtype) else v)
    sliced = as_int32(v) if x.ndim > 1 else v  # (the dynamic slice's start type)
    sliced = clamp(wrap_once(sliced, n) if (x.ndim > 1 or _signed(dtype)) else sliced, n)
    took = wrap_once(v, n) if _signed(dtype) else v
    along = wrap_once(as_int32(v), n)
    start = clamp(wrap_once(v, n) if _signed(dtype) else v, n)
    return {
        "x[i]": x[sliced],
        "x[i[None]]": x[clamp(gather, n)][None],
        "get()": x[sliced],
        "get(clip)": x[sliced],
        "get(fill)": _row(x, _fitting(gather, n), -5.0),
        "get(fill_value) (no mode: ignored)": x[sliced],
        "at[i[None]].get(fill)": _row(x, _fitting(gather, n))[None],
        "set()": _rows_set(x, _fitting(gather, n), 1, -1.0),
        "set(clip)": _rows_set(x, clamp(gather, n), 1, -1.0),
        "at[i[None]].add()": _rows_set(x, _fitting(gather, n), 1, 100.0, add=True),
        "take": _row(x, _fitting(took, n)),
        "take(clip)": x[clamp(v, n)],
        "take(wrap)": x[v % n],
        "take_along_axis": _row(x, _fitting(along, n))[None],
        "take_along_axis(clip)": x[clamp(along, n)][None],
        "dynamic_slice_in_dim": x[start][None],
        "dynamic_update_index_in_dim": _rows_set(x, start, 1, -1.0),
    }


def big_index_ops(jnp: Any, lax: Any) -> Callable:
    def ops(x: Any, i: Any) -> dict:
        row = (1,) * x.ndim
        return {
            "x[i]": x[i],
            "x[i[None]]": x[i[None]],
            "get()": x.at[i].get(),
            "get(clip)": x.at[i].get(mode="clip"),
            "get(fill)": x.at[i].get(mode="fill", fill_value=-5.0),
            "get(fill_value) (no mode: ignored)": x.at[i].get(fill_value=-5.0),
            "at[i[None]].get(fill)": x.at[i[None]].get(mode="fill"),
            "set()": x.at[i].set(-1.0),
            "set(clip)": x.at[i].set(-1.0, mode="clip"),
            "at[i[None]].add()": x.at[i[None]].add(100.0),
            "take": jnp.take(x, i, axis=0),
            "take(clip)": jnp.take(x, i, axis=0, mode="clip"),
            "take(wrap)": jnp.take(x, i, axis=0, mode="wrap"),
            "take_along_axis": jnp.take_along_axis(x, jnp.broadcast_to(i, row), 0),
            "take_along_axis(clip)": jnp.take_along_axis(x, jnp.broadcast_to(i, row), 0, mode="clip"),
            "dynamic_slice_in_dim": lax.dynamic_slice_in_dim(x, i, 1),
            "dynamic_update_index_in_dim": lax.dynamic_update_index_in_dim(x, x[0] * 0 - 1, i, 0),
        }

    return ops


EMBER_BIG_INDEX_OPS = big_index_ops(ejnp, elax)
EMBER_BIG_INDEX_OPS_JIT = ember.jit(EMBER_BIG_INDEX_OPS)


@st.composite
def big_indices(draw: Callable, dtypes: tuple[str, ...] = BIG_INDEX_DTYPES) -> tuple[str, int]:
    """An index dtype and a value of it: near 0, near int32's limits, or anywhere in range."""
    dtype = draw(st.sampled_from(dtypes))
    info = np.iinfo(dtype)
    edges = [v for v in (2**31 - 1, 2**31, 2**31 + 3, 2**32 - 1, 2**32 - 7) if v <= info.max]
    value = st.integers(int(info.min), int(info.max)) | st.sampled_from([int(info.min), int(info.max), *edges]) \
        | st.integers(max(int(info.min), -12), min(int(info.max), 12))
    return dtype, draw(value)


@FAST
@given(big_indices())
def test_unsigned_and_wide_indices_land_where_jax_rules_put_them(case: tuple[str, int]) -> None:
    dtype, v = case
    for x in (X1, X2):
        want = big_index_rules(x, v, dtype)
        for backend in BACKENDS:
            got = _run(EMBER_BIG_INDEX_OPS, EMBER_BIG_INDEX_OPS_JIT, backend, ejnp.asarray(x),
                       ejnp.asarray(np.array(v, dtype)))
            for name in want:
                _assert_same(got[name], want[name], f"{name} ({backend}, {x.ndim}-d, {dtype} {v})")
        # A NumPy scalar is a static index: the same rules.
        got = EMBER_BIG_INDEX_OPS(ejnp.asarray(x), np.array(v, dtype)[()])
        for name in want:
            _assert_same(got[name], want[name], f"{name} (NumPy scalar, {x.ndim}-d, {dtype} {v})")


@FAST
@given(st.lists(big_indices(("uint32",)).map(lambda c: c[1]), min_size=3, max_size=3))
def test_unsigned_indices_under_vmap_follow_the_same_rules(values: list[int]) -> None:
    indices = ejnp.asarray(np.array(values, np.uint32))
    for x in (X1, X2):
        batched = ember.jit(ember.vmap(EMBER_BIG_INDEX_OPS, (None, 0)))(ejnp.asarray(x), indices)
        for k, v in enumerate(values):
            want = big_index_rules(x, v, "uint32")
            for name in want:
                _assert_same(batched[name][k], want[name], f"vmap {name} ({x.ndim}-d, uint32 {v})")


def test_python_ints_beyond_int32_are_jaxs_overflow_in_a_dynamic_slice() -> None:
    x = ejnp.asarray(X2)
    with pytest.raises(OverflowError, match="Python int 2147483648 too large to convert to int32"):
        x[2**31]
    # ... and cast (wrapping) in a gather or scatter, as JAX does: 2**40 is row 0.
    _assert_same(x.at[2**40].set(-1.0), _rows_set(X2, 0, 1, -1.0), "x.at[2**40].set")
    _assert_same(x[np.array([2**32 - 1])], X2[:1], "x[np.array([2**32 - 1])]")


@settings(max_examples=6, deadline=None)
@given(big_indices(("uint32", "int8")))
def test_unsigned_and_wide_indices_land_where_jax_puts_them_jax(case: tuple[str, int]) -> None:
    pytest.importorskip("jax")
    import jax.numpy as jjnp

    dtype, v = case
    for x in (X1, X2):
        theirs = _jax_big_index_ops()(jjnp.asarray(x), np.array(v, dtype))
        ours = EMBER_BIG_INDEX_OPS_JIT(ejnp.asarray(x), ejnp.asarray(np.array(v, dtype)))
        want = big_index_rules(x, v, dtype)
        for name in want:
            _assert_same(theirs[name], want[name], f"JAX {name} ({x.ndim}-d, {dtype} {v})")
            _assert_same(ours[name], theirs[name], f"ember vs JAX {name} ({x.ndim}-d, {dtype} {v})")


@functools.cache
def _jax_big_index_ops() -> Callable:
    import jax
    import jax.numpy as jjnp
    from jax import lax as jlax

    return jax.jit(big_index_ops(jjnp, jlax))


# --- 6. the gradient of a read that does not fit ------------------------------------------------------
# JAX's rules: x[idx] with an index array is a gather that promises its indices fit: the forward
# read clamps, and its transpose (the gradient) is a scatter-add in the same mode, which drops the
# cotangent of every (normalized) index outside [0, n). .at[idx].get() and
# .at[idx].get(mode='promise_in_bounds') are the same read; 'fill' reads drop too (their forward
# value is the fill); 'clip' reads (.at[].get(mode='clip'), jnp.take(mode='clip'), whose indices
# are not normalized) add the cotangent where the clamped read happened. lax.gather's mode None is
# 'promise_in_bounds' and never normalizes.
def gather_gradient_rule(idx: np.ndarray, weights: np.ndarray, n: int, *, normalize: bool, clip: bool) -> np.ndarray:
    grad = np.zeros(n)
    for i, w in zip(idx.tolist(), weights.tolist()):
        r = wrap_once(i, n) if normalize else i
        if clip:
            grad[clamp(r, n)] += w
        elif 0 <= r < n:
            grad[r] += w
    return grad


def _gradient_cases(jnp: Any, lax: Any) -> dict[str, tuple[Callable, bool, bool]]:
    """name -> (read of x at idx, indices normalized, clipped gradient)."""
    rows = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    return {
        "x[idx]": (lambda x, i: x[i], True, False),
        "x[idx, 1]": (lambda x, i: x[i, 1][:, None], True, False),
        "at[idx].get()": (lambda x, i: x.at[i].get(), True, False),
        "at[idx].get(promise_in_bounds)": (lambda x, i: x.at[i].get(mode="promise_in_bounds"), True, False),
        "at[idx].get(fill)": (lambda x, i: x.at[i].get(mode="fill", fill_value=0.0), True, False),
        "at[idx].get(clip)": (lambda x, i: x.at[i].get(mode="clip"), True, True),
        "take(clip)": (lambda x, i: jnp.take(x, i, axis=0, mode="clip"), False, True),
        "take": (lambda x, i: jnp.nan_to_num(jnp.take(x, i, axis=0)), True, False),
        "lax.gather": (lambda x, i: lax.gather(x, i[:, None], rows, (1, x.shape[1])), False, False),
    }


def _gradients(jnp: Any, lax: Any, jit: Callable, grad: Callable) -> Callable:
    cases = _gradient_cases(jnp, lax)

    def grads(x: Any, idx: Any, w: Any) -> dict:
        return {name: grad(lambda x: (read(x, idx) * w[:, None]).sum())(x) for name, (read, _, _) in cases.items()}

    return jit(grads)


EMBER_GRADIENTS = _gradients(ejnp, elax, ember.jit, ember.grad)
GRAD_X = np.arange(15, dtype=np.float32).reshape(5, 3)


@FAST
@given(st.lists(st.integers(-3 * N, 3 * N) | st.sampled_from([-N - 1, -N, -1, 0, N - 1, N]), min_size=1, max_size=8),
       st.sampled_from(("int8", "int32", "uint8")))
def test_gradients_of_reads_that_do_not_fit_follow_jax_rules(values: list[int], dtype: str) -> None:
    if dtype == "uint8":
        values = [v % 256 for v in values]
    idx = np.array(values, dtype)
    weights = np.arange(1, len(values) + 1, dtype=np.float32)
    cases = _gradient_cases(ejnp, elax)
    for run in ("eager", "jit"):
        grads = (EMBER_GRADIENTS.__wrapped__ if run == "eager" else EMBER_GRADIENTS)(
            ejnp.asarray(GRAD_X), ejnp.asarray(idx), ejnp.asarray(weights))
        for name, (_, normalize, clip) in cases.items():
            want = gather_gradient_rule(idx.astype(np.int64), weights, N, normalize=normalize, clip=clip)
            columns = [1] if name == "x[idx, 1]" else [0, 1, 2]
            expected = np.zeros_like(GRAD_X)
            expected[:, columns] = want[:, None]
            _assert_same(grads[name], expected, f"grad of {name} ({run}) at {dtype} {values}")


def test_gradients_of_reads_that_do_not_fit_match_jax() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jjnp
    from jax import lax as jlax

    idx = np.array([-100, -7, -6, -5, -1, 0, 4, 5, 6, 100], np.int32)
    weights = np.arange(1, 11, dtype=np.float32)
    theirs = _gradients(jjnp, jlax, jax.jit, jax.grad)(jjnp.asarray(GRAD_X), idx, weights)
    ours = EMBER_GRADIENTS(ejnp.asarray(GRAD_X), ejnp.asarray(idx), ejnp.asarray(weights))
    for name in theirs:
        _assert_same(ours[name], theirs[name], f"ember vs JAX: grad of {name}")


# --- 7. integer and boolean powers --------------------------------------------------------------------
# JAX's rules for x1 ** x2 (jnp.power):
#   * x2 a Python int or bool, a NumPy integer or a concrete 0-d integer array (not a NumPy bool:
#     operator.index refuses those): lax.integer_pow(x1, x2), in x1's type alone (bool -> int32,
#     the weak type kept); a negative x2 with an integer x1 is a TypeError.
#   * otherwise both promote (bool -> int32). Integers: square-and-multiply over the low six bits
#     of x2, wrapping: 0 where x1 == 0 and x2 != 0, else x1 ** (x2 & 63) modulo 2**bits (so
#     int8(7) ** int8(-3) is 7 ** 61 wrapped: 103). The result is strongly typed.
#   * an inexact x1 with an integer x2 keeps x1's type; other cases promote.
POWER_DTYPES = ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32")


def _power_dtype(a: str, b: str) -> str:
    joined = np.dtype(dtypes_promote(a, b)).name
    return "int32" if joined == "bool" else joined


def dtypes_promote(a: str, b: str) -> np.dtype:
    return ember.dtypes.promote_types(np.dtype(a), np.dtype(b))


def integer_power_rule(x: int, y: int, dtype: str) -> int:
    if x == 0 and y != 0:
        return 0
    return _in_dtype(pow(x, y & 63, 2 ** np.iinfo(dtype).bits), dtype)


def _power_operands(dtype: str) -> st.SearchStrategy:
    if dtype == "bool":
        return st.lists(st.booleans(), min_size=6, max_size=6).map(lambda v: np.array(v, bool))
    info = np.iinfo(dtype)
    element = st.sampled_from([0, 1, 2, 3, 7, int(info.max)] + ([-1, -2, -3, -7, int(info.min)] if info.min else [])) \
        | st.integers(int(info.min), int(info.max))
    return st.lists(element, min_size=6, max_size=6).map(lambda v: np.array(v, dtype))


POWER_JIT = ember.jit(ejnp.power)


@pytest.mark.parametrize("dtype", POWER_DTYPES)
@FAST
@given(data=st.data())
def test_integer_and_boolean_powers_follow_jax_rules(dtype: str, data: Any) -> None:
    other = data.draw(st.sampled_from(POWER_DTYPES))
    a, b = data.draw(_power_operands(dtype)), data.draw(_power_operands(other))
    out = _power_dtype(dtype, other)
    want = np.array([integer_power_rule(int(p), int(q), out) for p, q in zip(a, b)], out)
    for backend in BACKENDS:
        got = _run(ejnp.power, POWER_JIT, backend, ejnp.asarray(a), ejnp.asarray(b))
        assert np.asarray(got).dtype == out and not got.weak_type, f"{dtype} ** {other} ({backend}): {got.dtype}"
        _assert_same(got, want, f"{a.tolist()} ** {b.tolist()} ({backend}, {dtype} ** {other})")


def test_static_integer_exponents_are_integer_pow_of_the_base_alone() -> None:
    bools = ejnp.asarray(np.array([True, False]))
    assert (bools ** True).dtype == np.int32 and (bools ** True).tolist() == [1, 0]
    assert (bools ** np.bool_(True)).dtype == np.int32  # (a NumPy bool is an array operand: promoted)
    assert (ejnp.asarray(np.array([2, 3], np.int8)) ** np.array(2, np.int32)).dtype == np.int8
    assert (ejnp.asarray(np.array([2, 3], np.int8)) ** ejnp.asarray(np.array(2, np.int16))).dtype == np.int8
    weak = ejnp.asarray(7) ** ejnp.asarray(3)
    assert weak.weak_type and int(weak) == 343
    for base, exponent in ((ejnp.asarray(7), ejnp.asarray(-3)), (ejnp.asarray(np.array([7], np.int8)), -3)):
        with pytest.raises(TypeError, match="Integers cannot be raised to negative powers, got integer_pow"):
            base ** exponent
    # A traced exponent (or an array) takes the square-and-multiply rule.
    assert ember.jit(lambda a, b: a ** b)(ejnp.asarray(np.array([7, -7], np.int8)), -3).tolist() == [103, -103]
    assert (ejnp.asarray(7) ** ejnp.asarray(np.array([-3]))).tolist() == [1336734823]


@pytest.mark.parametrize("dtype", ("bool", "int8", "uint8", "int32"))
def test_integer_and_boolean_powers_match_jax(dtype: str) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jjnp

    for other in POWER_DTYPES:
        a = np.array([True, False, True, False]) if dtype == "bool" else np.array([7, -7, 0, 3]).astype(dtype)
        b = np.array([False, True, True, False]) if other == "bool" else np.array([-3, 2, -1, 0]).astype(other)
        theirs, ours = jax.jit(jjnp.power)(a, b), POWER_JIT(ejnp.asarray(a), ejnp.asarray(b))
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype, f"{dtype} ** {other}"
        _assert_same(ours, theirs, f"ember vs JAX {dtype} ** {other}")
