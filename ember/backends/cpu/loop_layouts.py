"""Loop-invariant matrices in the layout that a loop body's products read them in.

A fused kernel computes a product element by element. Where the contracted axis is a
matrix's last one (``W @ h``, ``h @ W.T``: the matrix read along its rows), each output element
is a horizontal sum (a dot of a row with the vector; a short one, LLVM unrolls into a chain of
dependent adds), and the kernel's loop over the output cannot be vectorized: the elementwise work
that follows the product in the body (an RNN's ``tanh``) then runs one scalar at a time too.
Read the other way, with the matrix's rows as the
contracted axis, the product is a sum of scaled rows (``kernel``'s rows: ``index_rules.dot_row``),
contiguous and vectorized along the output, and so is what follows it.

When the matrix is a constant of a ``scan`` or ``while`` body, the loop reads it unchanged on
every iteration, so it is transposed once before the loop (one more loop constant) and the
product reads the transpose by rows. The transpose costs one pass over the matrix; each
iteration saves the horizontal sums and gets a vectorized body. Scan RNN step, hidden 64,
input 16, float32: 0.86 us a step before, 0.18 after (JAX: 0.4-0.6). ``vmap`` of such a loop
multiplies the matrix by a batch of vectors (``W @ V``, read back through a transpose that puts
the matrix's axis last): the same, a row per vector (batch 8: 9.6 us a step before, 1.2 after).

Only products that a kernel computes (``codegen.can_fuse``), of rows of at most ``ROW_MAX_BYTES``,
are rewritten: a product that the loop hands to ``gemm``
reads any layout through its strides. Nested loops are rewritten from the inside out: the inner
loop's transpose is then an equation of the outer body, and a transpose of a constant of a body
(that one, or the user's) moves out of its loop too, so a matrix constant in both is transposed
once.
"""
from __future__ import annotations

import math

from ember.backends.cpu import gemm
from ember.backends.cpu.codegen import can_fuse_in_loop
from ember.compiler.rewrite import SubprogramRewriter, on_closed, rebuild
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var
from ember.core.primitive import abstract_eval_rules
from ember.core.traits import ELEMENTWISE
from ember.lax import control_flow as cf, shapes as sh
from ember.lax.dot import dot_general_p

# The longest output row read by rows: a row that stays in registers through the sum (8 vectors)
# beats the horizontal sums, with the work after the product vectorized too; a longer one is
# loaded and stored again for each term, and the horizontal sums of long rows win. fori_loop of
# tanh(W h + b), float32, AVX-512, us a step, as it was -> by rows: hidden 128: 1.42-1.51 -> 0.71-0.89;
# 192: even; 256: 3.4-3.8 -> 3.9-4.9; 512: 20 -> 26; 1024: 58 -> 169.
ROW_MAX_BYTES = 8 * gemm.VECTOR_BYTES


def transposed_invariants(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with each loop whose body reads a constant matrix along its rows in a product
    given that matrix's transpose as a constant, computed before the loop (see the module)."""
    return on_closed(closed, _rewrite_jaxpr)


def _rewrite_jaxpr(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    eqns: list[Eqn] = []
    for eqn in jaxpr.eqns:
        eqn = subprograms(eqn)
        if eqn.primitive is cf.scan_p or eqn.primitive is cf.while_p:
            eqns.extend(_loop_with_transposes(eqn))
        else:
            eqns.append(eqn)
    return rebuild(jaxpr, eqns, jaxpr.outvars)


def _body_constants(eqn: Eqn) -> tuple[ClosedJaxpr, int, int]:
    """The loop's body, where its constants start among the loop's operands, and how many."""
    p = eqn.params
    if eqn.primitive is cf.scan_p:
        return p["jaxpr"], 0, p["num_consts"]
    return p["body_jaxpr"], p["cond_nconsts"], p["body_nconsts"]


def _row_read_matrix(product: Eqn, constants: set[int], readers: dict[int, list[Eqn | None]]) -> int | None:
    """Which operand (0 or 1) of ``product`` is a loop constant (by ``id`` in ``constants``)
    that the product reads along its rows, where reading its transpose by rows gives the same
    result, and the kernels that read it then walk the matrix's axis innermost; else None.
    ``readers``: the body's equations that read each variable (by ``id``; None: the body's output)."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = product.params["dimension_numbers"]
    if lhs_batch or rhs_batch or len(lhs_contract) != 1 or not can_fuse_in_loop(product):
        return None
    out = product.outvars[0].aval
    for side, contract in ((0, lhs_contract[0]), (1, rhs_contract[0])):
        matrix, other = product.invars[side], product.invars[1 - side]
        if not isinstance(matrix, Var) or id(matrix) not in constants or matrix.aval.ndim != 2 or contract != 1:
            continue
        if matrix.aval.shape[0] < 2 or matrix.aval.shape[0] * out.dtype.itemsize > ROW_MAX_BYTES:
            continue  # (one row: nothing to vectorize along; a longer one than ROW_MAX_BYTES: see there)
        if side == 0 and math.prod(out.shape[1:]) != 1 and not _read_matrix_axis_last(product, readers):
            continue  # (W @ V: V's columns are the output's rows, or it is read along them)
        transpose = abstract_eval_rules[sh.transpose_p](matrix.aval, permutation=(1, 0))
        by_rows = abstract_eval_rules[dot_general_p](other.aval, transpose, **_by_rows_params(product, side))
        if (by_rows.dtype, by_rows.weak_type, by_rows.size) != (out.dtype, out.weak_type, out.size):
            continue  # (operands of mixed types: the swapped product may type differently)
        return side
    return None


def _read_matrix_axis_last(product: Eqn, readers: dict[int, list[Eqn | None]]) -> bool:
    """Whether ``W @ V`` (the matrix's axis first) is read only through transposes that put that
    axis after every other one of size above 1, as ``vmap`` of ``W @ v`` does (directly, or
    through elementwise operations of its shape first: ``vmap`` of ``W @ h + U @ x``): the
    kernels then walk it innermost, and the product read by rows has it last."""
    out = product.outvars[0]
    return _transposed_to_last(out, out.aval.shape, readers, 0)


def _transposed_to_last(value: Var, shape: tuple, readers: dict[int, list[Eqn | None]], depth: int) -> bool:
    uses = readers.get(id(value), [])
    for e in uses:
        if e is not None and e.primitive in ELEMENTWISE and depth < 8 and len(e.outvars) == 1 and \
                e.outvars[0].aval.shape == shape:  # (an elementwise operation of the product's shape first)
            if not _transposed_to_last(e.outvars[0], shape, readers, depth + 1):
                return False
            continue
        if e is None or e.primitive is not sh.transpose_p:
            return False
        permutation = e.params["permutation"]
        after = permutation[permutation.index(0) + 1:]
        if any(shape[d] != 1 for d in after):
            return False
    return bool(uses)


def _by_rows_params(product: Eqn, side: int) -> dict:
    """The params of ``product`` read from operand ``side``'s transpose, as its right operand."""
    (lhs_contract, rhs_contract), _ = product.params["dimension_numbers"]
    other_contract = rhs_contract if side == 0 else lhs_contract
    return {**product.params, "dimension_numbers": ((tuple(other_contract), (0,)), ((), ()))}


def _loop_with_transposes(eqn: Eqn) -> list[Eqn]:
    """The transposes of the loop's row-read constants, then the loop reading them (or the
    loop unchanged, alone)."""
    body, start, count = _body_constants(eqn)
    if body.consts:
        return [eqn]
    invars = body.jaxpr.invars
    constants = {id(v): k for k, v in enumerate(invars[:count])}
    readers: dict[int, list[Eqn | None]] = {}
    for e in body.jaxpr.eqns:
        for a in e.invars:
            readers.setdefault(id(a), []).append(e)
    for a in body.jaxpr.outvars:
        readers.setdefault(id(a), []).append(None)  # (an output of the body: read as it is)
    reads: list[tuple[Eqn, int]] = []  # (a product, its row-read operand)
    for e in body.jaxpr.eqns:
        side = _row_read_matrix(e, set(constants), readers) if e.primitive is dot_general_p else None
        if side is not None:
            reads.append((e, side))
    # transposes of constants in the body (an inner loop's, above): computed before the loop
    moved = [e for e in body.jaxpr.eqns if e.primitive is sh.transpose_p and id(e.invars[0]) in constants]
    if not reads and not moved:
        return [eqn]
    transposed: dict[int, Var] = {}  # the body's constant (by id) -> its transpose's body variable
    outer: list[Eqn] = []
    for e in moved:  # (its output becomes a constant of the body: the same variable)
        operand = eqn.invars[start + constants[id(e.invars[0])]]
        outer.append(e.replace(invars=[operand], outvars=[Var(e.outvars[0].aval)]))
        transposed[id(e)] = e.outvars[0]
    for e, side in reads:
        matrix = e.invars[side]
        if id(matrix) in transposed:
            continue
        aval = abstract_eval_rules[sh.transpose_p](matrix.aval, permutation=(1, 0))
        operand = eqn.invars[start + constants[id(matrix)]]
        hoisted = Var(aval)
        outer.append(Eqn(sh.transpose_p, [operand], {"permutation": (1, 0)}, [hoisted]))
        transposed[id(matrix)] = Var(aval)
    replaced = {id(e): side for e, side in reads}
    body_eqns: list[Eqn] = []
    for e in body.jaxpr.eqns:
        side = replaced.get(id(e))
        if id(e) in transposed:
            continue
        if side is None:
            body_eqns.append(e)
        else:
            body_eqns.extend(_read_by_rows(e, side, transposed[id(e.invars[side])]))
    new_invars = invars[:count] + list(transposed.values()) + invars[count:]
    new_body = ClosedJaxpr(Jaxpr(body.jaxpr.constvars, new_invars, body_eqns, body.jaxpr.outvars), [])
    operands = list(eqn.invars[:start + count]) + [e.outvars[0] for e in outer] + list(eqn.invars[start + count:])
    added = len(transposed)
    if eqn.primitive is cf.scan_p:
        params = {**eqn.params, "jaxpr": new_body, "num_consts": count + added}
    else:
        params = {**eqn.params, "body_jaxpr": new_body, "body_nconsts": count + added}
    return outer + [eqn.replace(invars=operands, params=params)]


def _read_by_rows(product: Eqn, side: int, transpose: Var) -> list[Eqn]:
    """``product`` computed from ``transpose`` (its operand ``side``'s transpose), contracted
    along the transpose's rows: ``v @ W.T`` as is, ``W @ V`` followed by a transpose that moves
    the matrix's axis back in front of ``V``'s (of size 1, or transposed again by the readers)."""
    other = product.invars[1 - side]
    params = _by_rows_params(product, side)
    out = product.outvars[0]
    if side == 1:
        return [Eqn(dot_general_p, [other, transpose], params, [out])]
    aval = abstract_eval_rules[dot_general_p](other.aval, transpose.aval, **params)
    by_rows = Var(aval)
    permutation = (aval.ndim - 1, *range(aval.ndim - 1))
    return [Eqn(dot_general_p, [other, transpose], params, [by_rows]),
            Eqn(sh.transpose_p, [by_rows], {"permutation": permutation}, [out])]
