"""Contractions: ``dot_general`` and the products built on it.

``dot_general`` contracts some dimensions of two operands against each other and
batches over others. Its result lays out the batch dimensions first, then the
lhs's free dimensions, then the rhs's, each in operand order (as XLA's DotGeneral).
"""
from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from ember import dtypes
from ember.core.avals import ShapedArray
from ember.core.traits import Cost
from ember.lax import parallel
from ember.lax.base import aval, primitive
from ember.lax.elementwise import convert_element_type

__all__ = ["DotDimensionNumbers", "Precision", "batch_matmul", "dot", "dot_general", "dot_general_p"]


class Precision(enum.Enum):
    """JAX's precision hints for contractions (``precision=``): the CPU backend computes every
    product at its operands' full precision, so all of them give the same results here."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: Any) -> "Precision | None":
        names = {"default": cls.DEFAULT, "fastest": cls.DEFAULT, "bfloat16": cls.DEFAULT, "high": cls.HIGH,
                 "bfloat16_3x": cls.HIGH, "tensorfloat32": cls.HIGH, "highest": cls.HIGHEST, "float32": cls.HIGHEST}
        return names.get(value.lower()) if isinstance(value, str) else None

    def __str__(self) -> str:
        return self.name

# ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))
DotDimensionNumbers = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]]


def _check_dims(side: str, operand: ShapedArray, contracting: tuple, batch: tuple) -> None:
    for kind, dims in (("contracting", contracting), ("batch", batch)):
        if any(not 0 <= d < operand.ndim for d in dims):
            raise TypeError(f"dot_general: {side} {kind} dimensions {dims} are out of range for the {side} of "
                            f"shape {operand.shape} (dimension numbers must be in [0, {operand.ndim}))")
    if len(set(contracting + batch)) != len(contracting) + len(batch):
        raise TypeError(f"dot_general: {side} contracting dimensions {contracting} and batch dimensions {batch} "
                        "must be distinct")


def _check_element_types(lhs: ShapedArray, rhs: ShapedArray, preferred: np.dtype | None) -> None:
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"dot_general requires operands of one dtype, got {lhs.dtype} and {rhs.dtype}. "
                        "Convert them first (lax.convert_element_type), or use jnp.dot / jnp.matmul, which promote.")
    if preferred is None or lhs.dtype == dtypes.bool_:
        return
    if dtypes.is_floating(lhs.dtype) and not dtypes.is_floating(preferred):
        raise TypeError(f"dot_general: preferred_element_type {preferred} is not floating, but the operands are "
                        f"{lhs.dtype}. Allowed: integer -> integer or floating, floating -> floating.")
    if preferred == dtypes.bool_ or preferred.itemsize < lhs.dtype.itemsize:
        raise TypeError(f"dot_general: preferred_element_type {preferred} is narrower than the operand dtype "
                        f"{lhs.dtype}; it may only widen the result")


def _dot_general_rule(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers: DotDimensionNumbers,
                      precision: Any, preferred_element_type: np.dtype | None) -> ShapedArray:
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    _check_element_types(lhs, rhs, preferred_element_type)
    _check_dims("lhs", lhs, lhs_contract, lhs_batch)
    _check_dims("rhs", rhs, rhs_contract, rhs_batch)
    where = f"(lhs shape {lhs.shape}, rhs shape {rhs.shape}, dimension_numbers {dimension_numbers})"
    if len(lhs_batch) != len(rhs_batch) or len(lhs_contract) != len(rhs_contract):
        raise TypeError(f"dot_general needs as many lhs as rhs batch dimensions and as many lhs as rhs "
                        f"contracting dimensions {where}")
    lhs_batch_shape = tuple(lhs.shape[d] for d in lhs_batch)
    if lhs_batch_shape != tuple(rhs.shape[d] for d in rhs_batch):
        raise TypeError(f"dot_general requires batch dimensions of equal sizes, got "
                        f"{lhs_batch_shape} and {tuple(rhs.shape[d] for d in rhs_batch)} {where}")
    if tuple(lhs.shape[d] for d in lhs_contract) != tuple(rhs.shape[d] for d in rhs_contract):
        raise TypeError(f"dot_general requires contracting dimensions of equal sizes, got "
                        f"{tuple(lhs.shape[d] for d in lhs_contract)} and "
                        f"{tuple(rhs.shape[d] for d in rhs_contract)} {where}")
    lhs_free = tuple(n for i, n in enumerate(lhs.shape) if i not in lhs_contract + lhs_batch)
    rhs_free = tuple(n for i, n in enumerate(rhs.shape) if i not in rhs_contract + rhs_batch)
    if preferred_element_type is None:
        return ShapedArray(lhs_batch_shape + lhs_free + rhs_free, lhs.dtype, lhs.weak_type and rhs.weak_type)
    return ShapedArray(lhs_batch_shape + lhs_free + rhs_free, preferred_element_type, False)


def _dot_general_cost(eqn: Any) -> Cost:
    """Two flops per multiply-add: 2 M N K for a product of M x K and K x N (per batch)."""
    (lhs_contract, _), _ = eqn.params["dimension_numbers"]
    depth = math.prod(eqn.invars[0].aval.shape[d] for d in lhs_contract)
    return Cost(2.0 * math.prod(eqn.outvars[0].aval.shape) * depth)


dot_general_p = primitive("dot_general", _dot_general_rule, linear=True, cost=_dot_general_cost,
                          keep_results=True)


def _dims_tuple(dims: Any) -> tuple[int, ...]:
    return (int(dims),) if isinstance(dims, (int, np.integer)) else tuple(map(int, dims))


def _precision_param(precision: Any) -> Any:
    """Precision is a hint (the CPU backend always computes at full precision); keep it hashable."""
    if precision is None or isinstance(precision, str):
        return precision
    if isinstance(precision, (tuple, list)):
        return tuple(str(p) for p in precision)
    return str(precision)


def _precision_rank(dt: np.dtype) -> tuple:
    """How JAX (after XLA's HigherPrecisionType) orders operand types: exponent range, then mantissa,
    then width, then signedness; operands of different types are computed in the higher one."""
    if dtypes.is_floating(dt):
        info = dtypes.finfo(dt)
        return (info.maxexp, info.nmant, info.bits, dt.kind != "u")
    return (-1, -1, 1 if dt == dtypes.bool_ else dt.itemsize * 8, dt.kind != "u")


def _common_operand_type(lhs: Any, rhs: Any) -> tuple[Any, Any]:
    """Operands of two dtypes converted to the one JAX computes their product in (int32 and uint8:
    int32; int8 and uint8: int8; float16 and float32: float32)."""
    lhs_dt, rhs_dt = aval(lhs).dtype, aval(rhs).dtype
    if lhs_dt == rhs_dt:
        return lhs, rhs
    if dtypes.is_complex(lhs_dt) or dtypes.is_complex(rhs_dt):  # complex, with the finer of the parts' types
        parts = [dtypes.real_dtype(d) for d in (lhs_dt, rhs_dt)]
        finer = parts[0] if _precision_rank(parts[0]) >= _precision_rank(parts[1]) else parts[1]
        dt = dtypes.complex_dtype(finer)
        return convert_element_type(lhs, dt), convert_element_type(rhs, dt)
    lhs_rank, rhs_rank = _precision_rank(lhs_dt), _precision_rank(rhs_dt)
    if lhs_rank == rhs_rank:
        raise TypeError(f"lax.dot_general argument type error: {lhs_dt}, {rhs_dt}")
    dt = lhs_dt if lhs_rank > rhs_rank else rhs_dt
    return convert_element_type(lhs, dt), convert_element_type(rhs, dt)


def dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None, *, out_sharding: Any = None) -> Any:
    """Contract ``lhs`` with ``rhs``. ``dimension_numbers`` is
    ``((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``; the result's dimensions are
    the batch dimensions, then lhs's free dimensions, then rhs's free dimensions. Operands of
    different dtypes are computed in the more precise one, as in JAX. ``out_sharding``: where the
    result is placed (``with_sharding_constraint``'s meaning)."""
    try:
        (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    except (TypeError, ValueError):
        raise TypeError("dot_general: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                        f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from None
    numbers = ((_dims_tuple(lhs_contract), _dims_tuple(rhs_contract)),
               (_dims_tuple(lhs_batch), _dims_tuple(rhs_batch)))
    preferred = None if preferred_element_type is None else dtypes.canonicalize_dtype(preferred_element_type)
    lhs, rhs = _common_operand_type(lhs, rhs)
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=numbers, precision=_precision_param(precision),
                             preferred_element_type=preferred)
    return out if out_sharding is None else parallel.with_sharding_constraint(out, out_sharding)


def dot(lhs: Any, rhs: Any, *, dimension_numbers: Any = None, precision: Any = None,
        preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """Vector-vector, matrix-vector or matrix-matrix product (or ``dot_general`` when
    ``dimension_numbers`` is given)."""
    if dimension_numbers is None:
        lhs_shape, rhs_shape = aval(lhs).shape, aval(rhs).shape
        if not (1 <= len(lhs_shape) <= 2 and 1 <= len(rhs_shape) <= 2):
            raise ValueError("lax.dot multiplies only vectors and matrices (rank 1 or 2), got shapes "
                             f"{lhs_shape} and {rhs_shape}; pass dimension_numbers for other contractions, "
                             "or use jnp.matmul / jnp.einsum")
        dimension_numbers = (((len(lhs_shape) - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type, out_sharding=out_sharding)


def batch_matmul(lhs: Any, rhs: Any, precision: Any = None) -> Any:
    """Matrix products over leading batch dimensions: ``[..., m, k] x [..., k, n] -> [..., m, n]``."""
    lhs_shape, rhs_shape = aval(lhs).shape, aval(rhs).shape
    if len(lhs_shape) != len(rhs_shape) or len(lhs_shape) < 2:
        raise ValueError(f"batch_matmul needs operands of one rank, at least 2, got shapes {lhs_shape} and "
                         f"{rhs_shape}")
    batch = tuple(range(len(lhs_shape) - 2))
    return dot_general(lhs, rhs, (((len(lhs_shape) - 1,), (len(rhs_shape) - 2,)), (batch, batch)), precision)

