"""Reference rule for ``dot_general``: transpose to ``[batch, free, contract]`` and ``np.matmul``.

Accumulation types (what the compiled backend must match): half-precision floats
accumulate in float32, other floats in their own type, integers in the result type
(wrapping on overflow), and booleans compute "any(a and b)".
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes
from ember.backends.reference import impl_rules
from ember.backends.reference.elementwise import round_float8
from ember.lax.dot import dot_general_p


def accumulation_dtype(result: np.dtype) -> np.dtype:
    if result == dtypes.bool_:
        return dtypes.int32  # counts of true products; nonzero means true
    if result in (dtypes.float16, dtypes.bfloat16) or result in dtypes.FLOAT8:
        return dtypes.float32
    return result


def _as_matrices(x: np.ndarray, batch: tuple, first: tuple, second: tuple) -> np.ndarray:
    """``x`` transposed to ``batch + first + second`` and flattened to ``[B, prod(first), prod(second)]``."""
    sizes = [math.prod([x.shape[d] for d in dims]) for dims in (batch, first, second)]
    return np.transpose(x, batch + first + second).reshape(sizes)


def _dot_general(lhs: np.ndarray, rhs: np.ndarray, *, dimension_numbers, precision,
                 preferred_element_type) -> np.ndarray:
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    lhs_free = tuple(d for d in range(lhs.ndim) if d not in lhs_contract + lhs_batch)
    rhs_free = tuple(d for d in range(rhs.ndim) if d not in rhs_contract + rhs_batch)
    result_dtype = preferred_element_type or lhs.dtype
    acc = accumulation_dtype(result_dtype)
    lhs_m = _as_matrices(lhs, lhs_batch, lhs_free, lhs_contract).astype(acc, copy=False)  # (read only)
    rhs_m = _as_matrices(rhs, rhs_batch, rhs_contract, rhs_free).astype(acc, copy=False)
    out_shape = tuple(lhs.shape[d] for d in lhs_batch + lhs_free) + tuple(rhs.shape[d] for d in rhs_free)
    product = np.empty(out_shape, acc)  # (written through a view: the result owns its buffer, no copy)
    with np.errstate(over="ignore", invalid="ignore"):
        np.matmul(lhs_m, rhs_m, out=product.reshape(lhs_m.shape[0], lhs_m.shape[1], rhs_m.shape[2]))
    if result_dtype in dtypes.FLOAT8:
        return round_float8(product, result_dtype)
    return product != 0 if result_dtype == dtypes.bool_ else product.astype(result_dtype, copy=False)


def _plain_product(avals: tuple, params: dict) -> Any:
    """The product of two matrices contracting the left one's columns with the right one's rows,
    of a type that accumulates in itself, for eager calls (``core.evaluation.runner``): NumPy's
    ``matmul`` of the matrices, the call ``_dot_general`` makes (on them as one batch)."""
    lhs, rhs = avals
    result = params["preferred_element_type"] or lhs.dtype
    if params["dimension_numbers"] != (((1,), (0,)), ((), ())) or len(lhs.shape) != 2 or len(rhs.shape) != 2 \
            or not (lhs.dtype == rhs.dtype == result) or accumulation_dtype(result) != result \
            or result not in dtypes.INEXACT:
        return None
    return np.matmul


_dot_general.plain = _plain_product  # type: ignore[attr-defined]
impl_rules[dot_general_p] = _dot_general
