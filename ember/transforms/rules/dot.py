"""``dot_general`` is bilinear: its tangent is ``dot(dl, r) + dot(l, dr)``, and the
cotangent of one operand contracts the output cotangent with the other operand."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import lax
from ember.core.avals import ShapedArray
from ember.lax.base import aval
from ember.lax.dot import dot_general_p
from ember.transforms.jvp import defjvp
from ember.transforms.tangents import convert
from ember.transforms.transpose import is_undefined, transpose_rules


def _dot_tangent(lhs: Any, rhs: Any, params: dict) -> Any:
    return dot_general_p.bind(lhs, rhs, **params)


defjvp(dot_general_p, lambda g, ans, lhs, rhs, **params: _dot_tangent(g, rhs, params),
       lambda g, ans, lhs, rhs, **params: _dot_tangent(lhs, g, params))


def _operand_cotangent(ct: Any, other: Any, operand: ShapedArray, contract: tuple, other_contract: tuple,
                       batch: tuple, other_batch: tuple, operand_is_lhs: bool, precision: Any,
                       preferred: Any) -> Any:
    """Contract ``ct`` with ``other`` over other's free dimensions, then lay the result out like the operand.

    ``ct`` has the output's layout: batch dimensions, the lhs's free ones, the rhs's free ones.
    """
    other_aval = aval(other)
    operand_free = [d for d in range(operand.ndim) if d not in contract + batch]
    other_free = [d for d in range(other_aval.ndim) if d not in other_contract + other_batch]
    first_other_free = len(batch) + (len(operand_free) if operand_is_lhs else 0)
    other_free_in_ct = tuple(range(first_other_free, first_other_free + len(other_free)))
    if aval(ct).dtype != other_aval.dtype:  # a widened result (preferred_element_type)
        ct = convert(ct, other_aval.dtype)
    product = dot_general_p.bind(ct, other, dimension_numbers=((other_free_in_ct, tuple(other_free)),
                                                              (tuple(range(len(batch))), other_batch)),
                                 precision=precision, preferred_element_type=preferred)  # (the primal's, as JAX)
    # The product holds: batch, the operand's free dimensions, then its contracting ones in other's order.
    contract_in_other_order = [c for _, c in sorted(zip(other_contract, contract))]
    layout = list(batch) + operand_free + contract_in_other_order
    out = lax.transpose(product, tuple(int(i) for i in np.argsort(layout)))
    return convert(out, operand.dtype, operand.weak_type)


def _dot_general_transpose(ct: Any, lhs: Any, rhs: Any, *, dimension_numbers: Any, precision: Any,
                           preferred_element_type: Any) -> list:
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    if is_undefined(lhs) and is_undefined(rhs):
        raise NotImplementedError("transpose of dot_general: both operands are being differentiated, which "
                                  "is not linear")
    if is_undefined(lhs):
        return [_operand_cotangent(ct, rhs, lhs.aval, lhs_contract, rhs_contract, lhs_batch, rhs_batch, True,
                                   precision, preferred_element_type), None]
    return [None, _operand_cotangent(ct, lhs, rhs.aval, rhs_contract, lhs_contract, rhs_batch, lhs_batch, False,
                                     precision, preferred_element_type)]


transpose_rules[dot_general_p] = _dot_general_transpose
