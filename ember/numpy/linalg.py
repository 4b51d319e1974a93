"""Products and contractions (dot, matmul, tensordot, einsum), diagonals, triangles and norms.

Every product lowers to ``lax.dot_general`` (einsum: one per pair of operands), so a
backend that makes ``dot_general`` fast makes all of them fast. Operands promote as
JAX does (``result_type``; Python scalars are weak).

This module is also the ``jnp.linalg`` namespace: ``jnp.linalg.norm``,
``vector_norm``, ``matrix_norm``, ``matmul``, ``outer``, the decompositions and the
solvers live here but only the names in ``__all__`` are re-exported as ``jnp.*``.

Decompositions and solvers follow JAX: they batch over leading dimensions
(``(..., m, n)``), compute in float32 (float64 under x64; integers promote, half
floats are refused by the ``lax.linalg`` primitives they are built on) and do not
raise on singular or indefinite matrices: the results hold inf / NaN instead
(``inv`` of a singular matrix, ``cholesky`` of an indefinite one), ``det`` is 0 and
``slogdet`` gives sign 0 and ``logabsdet`` -inf. Complex matrices (complex64,
complex128) are accepted wherever JAX accepts them: transposes become conjugate
transposes (``cholesky``'s ``L @ L^H``, Hermitian ``eigh``, ``pinv``'s and ``lstsq``'s
``V S^-1 U^H``), singular values, ``eigh``'s eigenvalues, norms and ``slogdet``'s
``logabsdet`` are real, and ``slogdet``'s sign is a unit complex number.
"""
from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple, Sequence

import numpy as np

from ember import dtypes, errors, lax
from ember.lax import linalg as lax_linalg
from ember.lax.base import canonical_axes
from ember.lax.linalg import adjoint
from ember.numpy.core import (
    asarray,
    broadcast_shapes,
    broadcast_to,
    ensure_array,
    promote_dtypes,
    promote_dtypes_inexact,
)
from ember.numpy.creation import arange, eye, zeros
from ember.numpy.index_functions import take_along_axis
from ember.numpy.reductions import any as _any, max as _max, sum as _sum
from ember.numpy.shape_ops import expand_dims, matrix_transpose, moveaxis, ravel, stack  # noqa: F401  (jnp.linalg.*)
from ember.numpy.staging import staged
from ember.numpy.ufuncs import multiply, subtract, where
from ember.transforms.custom import custom_jvp
from ember.transforms.stable import euclidean_norm

__all__ = ["cross", "diag", "diagonal", "dot", "einsum", "einsum_path", "inner", "kron", "matmul", "outer", "tensordot",
           "trace", "tril", "triu", "vdot", "vecdot"]


def _promote_pair(a: Any, b: Any) -> tuple[Any, Any]:
    a, b = promote_dtypes(a, b)
    return ensure_array(a), ensure_array(b)


def _check_aligned(name: str, a_shape: tuple, b_shape: tuple, a_axis: int, b_axis: int) -> None:
    if a_shape[a_axis] != b_shape[b_axis]:
        raise TypeError(f"{name}: shapes {a_shape} and {b_shape} are not aligned: dimension {a_axis} of the first "
                        f"(size {a_shape[a_axis]}) must equal dimension {b_axis} of the second "
                        f"(size {b_shape[b_axis]})")


def _dot_general(a: Any, b: Any, dimension_numbers: Any, precision: Any, preferred_element_type: Any) -> Any:
    """``lax.dot_general`` asking for the result type (the operands' unless one is given), as JAX's
    ``jnp`` products do; a product of two weakly typed operands is weak again."""
    preferred = a.dtype if preferred_element_type is None else dtypes.canonicalize_dtype(preferred_element_type)
    out = lax.dot_general(a, b, dimension_numbers, precision, preferred)
    if preferred_element_type is None and a.weak_type and b.weak_type:
        out = lax.convert_element_type(out, preferred, weak_type=True)
    return out


def _scaled(a: Any, b: Any, preferred_element_type: Any) -> Any:
    """The product with a 0-d operand: an elementwise multiply."""
    out = multiply(a, b)
    if preferred_element_type is None:
        return out
    return lax.convert_element_type(out, dtypes.canonicalize_dtype(preferred_element_type))


# --- products -------------------------------------------------------------------------------
def dot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """NumPy's ``dot``: contracts the last axis of ``a`` with the second-to-last of ``b`` (its only
    axis if ``b`` is 1-D); a 0-d operand multiplies elementwise."""
    a, b = _promote_pair(a, b)
    if a.ndim == 0 or b.ndim == 0:
        return _scaled(a, b, preferred_element_type)
    b_axis = max(b.ndim - 2, 0)
    _check_aligned("dot", a.shape, b.shape, a.ndim - 1, b_axis)
    return _dot_general(a, b, (((a.ndim - 1,), (b_axis,)), ((), ())), precision, preferred_element_type)


class _BatchPlan(NamedTuple):
    """How matmul maps broadcast batch positions onto one dot_general (see ``_plan_batch``)."""

    pairs: list[tuple[int, int, int]]  # (a dim, b dim, broadcast position) batched together
    a_free: list[int]                  # positions only ``a`` spans (b's size is 1 or missing)
    b_free: list[int]
    a_squeezed: list[int]              # a's size-1 dims that broadcast against b
    b_squeezed: list[int]


def _plan_batch(a_batch: tuple[int, ...], b_batch: tuple[int, ...], ndim: int) -> _BatchPlan:
    """A broadcast batch position is a dot_general batch dimension when both operands have it with
    one size; otherwise it is a free dimension of the operand whose size is not 1, and the other
    operand's size-1 dimension is squeezed away. So broadcasting never copies an operand."""
    plan = _BatchPlan([], [], [], [], [])
    for pos in range(ndim):
        i, j = pos - (ndim - len(a_batch)), pos - (ndim - len(b_batch))
        a_size, b_size = (a_batch[i] if i >= 0 else None), (b_batch[j] if j >= 0 else None)
        if a_size is not None and a_size == b_size:
            plan.pairs.append((i, j, pos))
            continue
        for size, dim, free, squeezed in ((a_size, i, plan.a_free, plan.a_squeezed),
                                          (b_size, j, plan.b_free, plan.b_squeezed)):
            if size == 1:
                squeezed.append(dim)
            elif size is not None:
                free.append(pos)
    return plan


def matmul(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Matrix product with NumPy broadcasting of the leading (batch) dimensions; a 1-D operand is
    a vector (a row on the left, a column on the right) whose dimension is dropped from the result."""
    a, b = _promote_pair(a, b)
    for i, x in enumerate((a, b)):
        if x.ndim == 0:
            raise ValueError(f"matmul input operand {i} must have ndim at least 1, but it has ndim 0")
    a_shape, b_shape = a.shape, b.shape
    _check_aligned("matmul", a_shape, b_shape, len(a_shape) - 1, max(len(b_shape) - 2, 0))
    if len(a_shape) <= 2 and len(b_shape) <= 2:  # (no batch: the product itself, vectors contracted as they are)
        numbers = (((len(a_shape) - 1,), (max(len(b_shape) - 2, 0),)), ((), ()))
        return _dot_general(a, b, numbers, precision, preferred_element_type)
    a = lax.expand_dims(a, (0,)) if len(a_shape) == 1 else a
    b = lax.expand_dims(b, (1,)) if len(b_shape) == 1 else b
    try:
        batch_shape = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise TypeError(f"matmul: the batch dimensions of shapes {a_shape} and {b_shape} do not broadcast") from None
    plan = _plan_batch(a.shape[:-2], b.shape[:-2], len(batch_shape))
    a, b = lax.squeeze(a, plan.a_squeezed), lax.squeeze(b, plan.b_squeezed)

    def after_squeeze(d: int, squeezed: list[int]) -> int:
        return d - sum(s < d for s in squeezed)

    numbers = (((a.ndim - 1,), (b.ndim - 2,)),
               (tuple(after_squeeze(i, plan.a_squeezed) for i, _, _ in plan.pairs),
                tuple(after_squeeze(j, plan.b_squeezed) for _, j, _ in plan.pairs)))
    out = _dot_general(a, b, numbers, precision, preferred_element_type)
    # dot_general gives [batch, a's free batch dims, rows, b's free batch dims, columns]; put the
    # batch positions back in broadcast order, then drop the rows / columns of vector operands.
    rows, columns = len(batch_shape), len(batch_shape) + 1
    positions = [pos for _, _, pos in plan.pairs] + plan.a_free + [rows] + plan.b_free + [columns]
    out = lax.transpose(out, tuple(np.argsort(positions)))
    out_shape = batch_shape + a.shape[-2:-1] * (len(a_shape) > 1) + b.shape[-1:] * (len(b_shape) > 1)
    return lax.reshape(out, out_shape)


def _conj(x: Any) -> Any:
    return lax.conj(x) if dtypes.is_complex(x.dtype) else x


def vdot(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """The dot product of the flattened operands, conjugating a complex ``a``."""
    a, b = _promote_pair(a, b)
    a = _conj(a)
    if a.size != b.size:
        raise TypeError(f"vdot: operands of shapes {a.shape} and {b.shape} have different sizes "
                        f"({a.size} and {b.size})")
    return _dot_general(ravel(a), ravel(b), (((0,), (0,)), ((), ())), precision, preferred_element_type)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Dot products of vectors along ``axis``, broadcasting the other dimensions (conjugating a
    complex ``x1``)."""
    x1, x2 = _promote_pair(x1, x2)
    x1 = _conj(x1)
    shapes = (x1.shape, x2.shape)
    x1, x2 = moveaxis(x1, axis, -1), moveaxis(x2, axis, -1)
    _check_aligned("vecdot", x1.shape, x2.shape, x1.ndim - 1, x2.ndim - 1)
    try:
        broadcast_shapes(x1.shape[:-1], x2.shape[:-1])
    except ValueError:
        raise TypeError(f"vecdot: shapes {shapes[0]} and {shapes[1]} do not broadcast") from None
    rows = lax.expand_dims(x1, (x1.ndim - 1,))  # [..., 1, k] @ [..., k, 1] -> [..., 1, 1]
    columns = lax.expand_dims(x2, (x2.ndim,))
    out = matmul(rows, columns, precision=precision, preferred_element_type=preferred_element_type)
    return lax.squeeze(out, (out.ndim - 2, out.ndim - 1))


def inner(a: Any, b: Any, *, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Contract the last axes of both operands."""
    a, b = _promote_pair(a, b)
    if a.ndim == 0 or b.ndim == 0:
        return _scaled(a, b, preferred_element_type)
    _check_aligned("inner", a.shape, b.shape, a.ndim - 1, b.ndim - 1)
    return _dot_general(a, b, (((a.ndim - 1,), (b.ndim - 1,)), ((), ())), precision, preferred_element_type)


def outer(a: Any, b: Any, out: None = None) -> Any:
    """``ravel(a)[:, None] * ravel(b)[None, :]``."""
    a, b = ravel(ensure_array(a)), ravel(ensure_array(b))
    return multiply(lax.expand_dims(a, (1,)), lax.expand_dims(b, (0,)))


def tensordot(a: Any, b: Any, axes: int | Sequence[Any] = 2, *, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    """Contract the last ``axes`` axes of ``a`` with the first ``axes`` of ``b``, or the axes
    listed in a pair ``(a_axes, b_axes)``."""
    a, b = _promote_pair(a, b)
    if not isinstance(axes, (list, tuple)):
        count = operator.index(axes)
        if not 0 <= count <= min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: axes={count} must be between 0 and the smaller rank of shapes "
                             f"{a.shape} and {b.shape}")
        a_axes, b_axes = tuple(range(a.ndim - count, a.ndim)), tuple(range(count))
    else:
        if len(axes) != 2:
            raise TypeError(f"tensordot: axes must be an int or a pair of axis sequences, got {axes!r}")
        a_axes, b_axes = canonical_axes(axes[0], a.ndim), canonical_axes(axes[1], b.ndim)
        if len(a_axes) != len(b_axes):
            raise TypeError(f"tensordot: the axis lists {tuple(axes[0])} and {tuple(axes[1])} must have equal "
                            "lengths")
    for i, j in zip(a_axes, b_axes):
        _check_aligned("tensordot", a.shape, b.shape, i, j)
    return _dot_general(a, b, ((a_axes, b_axes), ((), ())), precision, preferred_element_type)


def kron(a: Any, b: Any) -> Any:
    """The Kronecker product: blocks ``a[i, j] * b``."""
    a, b = _promote_pair(a, b)
    ndim = max(a.ndim, b.ndim)
    a_dims, b_dims = (1,) * (ndim - a.ndim) + a.shape, (1,) * (ndim - b.ndim) + b.shape
    # [a0, 1, a1, 1] * [1, b0, 1, b1] -> [a0 * b0, a1 * b1]
    spread_a = lax.reshape(a, tuple(d for n in a_dims for d in (n, 1)))
    spread_b = lax.reshape(b, tuple(d for n in b_dims for d in (1, n)))
    return lax.reshape(multiply(spread_a, spread_b), tuple(m * n for m, n in zip(a_dims, b_dims)))


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: int | None = None) -> Any:
    """Cross products of 3-vectors (2-vectors have a zero third component; two 2-vectors give the
    scalar z component)."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _promote_pair(a, b)
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    if a.shape[-1] not in (2, 3) or b.shape[-1] not in (2, 3):
        raise ValueError(f"cross: incompatible vector dimensions of shapes {a.shape} and {b.shape} "
                         "(the vectors must have 2 or 3 components)")
    a0, a1, *a_rest = (lax.index_in_dim(a, i, a.ndim - 1, keepdims=False) for i in range(a.shape[-1]))
    b0, b1, *b_rest = (lax.index_in_dim(b, i, b.ndim - 1, keepdims=False) for i in range(b.shape[-1]))
    z = subtract(multiply(a0, b1), multiply(a1, b0))
    if not a_rest and not b_rest:
        return z
    a2, b2 = (a_rest or [0])[0], (b_rest or [0])[0]
    x = subtract(multiply(a1, b2), multiply(a2, b1))
    y = subtract(multiply(a2, b0), multiply(a0, b2))
    return moveaxis(stack([x, y, z], axis=-1), -1, axisc)


# --- einsum ----------------------------------------------------------------------------------
def _parse_terms(subscripts: str, shapes: list[tuple[int, ...]]) -> tuple[list[tuple[str, ...]], tuple[str, ...]]:
    """Labels per operand and for the output. Letters label themselves; the dimensions an
    ellipsis covers get labels '...0', '...1', ..., aligned from the right across operands."""
    spec = subscripts.replace(" ", "")
    if spec.count("->") > 1:
        raise ValueError(f"einsum: subscripts {subscripts!r} contain more than one '->'")
    inputs_spec, _, output_spec = spec.partition("->")
    terms = inputs_spec.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: subscripts {subscripts!r} name {len(terms)} operands, but {len(shapes)} "
                         "were given")
    ellipsis_ranks = []
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        letters = term.replace("...", "", 1)
        bad = [c for c in letters if not c.isalpha()]
        if bad:
            raise ValueError(f"einsum: invalid subscript {bad[0]!r} in {subscripts!r} (labels are letters, "
                             "plus at most one '...' per operand)")
        if len(letters) > len(shape) or ("..." not in term and len(letters) != len(shape)):
            raise ValueError(f"einsum: subscript {term!r} does not match operand {k} of shape {shape}")
        ellipsis_ranks.append(len(shape) - len(letters))
    ellipsis = tuple(f"...{i}" for i in range(max(ellipsis_ranks, default=0)))

    def labels(term: str, rank: int) -> tuple[str, ...]:
        before, dots, after = term.partition("...")
        return tuple(before) + (ellipsis[len(ellipsis) - rank:] if dots else ()) + tuple(after)

    inputs = [labels(t, r) for t, r in zip(terms, ellipsis_ranks)]
    if "->" not in spec:
        counts = [label for term in inputs for label in term if label not in ellipsis]
        return inputs, ellipsis + tuple(sorted(c for c in set(counts) if counts.count(c) == 1))
    if any(not c.isalpha() for c in output_spec.replace("...", "", 1)):
        raise ValueError(f"einsum: invalid output subscripts {output_spec!r}")
    output = labels(output_spec, len(ellipsis))
    for label in output:
        if output.count(label) > 1:
            raise ValueError(f"einsum: output subscript {label!r} appears more than once in {subscripts!r}")
        if not any(label in term for term in inputs):
            raise ValueError(f"einsum: output subscript {label!r} does not appear in the inputs of {subscripts!r}")
    return inputs, output


def _label_sizes(inputs: list[tuple[str, ...]], shapes: list[tuple[int, ...]]) -> dict[str, int]:
    """Each label's size; size-1 dimensions broadcast against the others."""
    sizes: dict[str, int] = {}
    for k, (labels, shape) in enumerate(zip(inputs, shapes)):
        for label, n in zip(labels, shape):
            known = sizes.get(label, 1)
            if n != 1 and known not in (1, n):
                raise ValueError(f"einsum: label {label!r} has size {n} in operand {k} of shape {shape}, but "
                                 f"size {known} elsewhere")
            sizes[label] = n if known == 1 else known
    return sizes


def _sum_over(x: Any, axes: Sequence[int]) -> Any:
    if not axes:
        return x
    return lax.reduce_or(x, axes) if x.dtype == dtypes.bool_ else lax.reduce_sum(x, axes)


def _diagonals_and_broadcasts(x: Any, labels: tuple[str, ...], sizes: dict[str, int]) -> tuple[Any, tuple[str, ...]]:
    """Take the diagonal of each repeated label (moved last) and drop size-1 dimensions that
    broadcast against a larger size elsewhere."""
    while len(set(labels)) < len(labels):
        label = next(lb for lb in labels if labels.count(lb) > 1)
        first = labels.index(label)
        second = labels.index(label, first + 1)
        if x.shape[first] != x.shape[second]:
            raise ValueError(f"einsum: repeated label {label!r} needs equal sizes, got {x.shape[first]} and "
                             f"{x.shape[second]}")
        x = diagonal_last(x, first, second)
        labels = tuple(lb for i, lb in enumerate(labels) if i not in (first, second)) + (label,)
    broadcast = tuple(i for i, lb in enumerate(labels) if x.shape[i] == 1 and sizes[lb] != 1)
    return lax.squeeze(x, broadcast), tuple(lb for i, lb in enumerate(labels) if i not in broadcast)


def _sum_unused(x: Any, labels: tuple[str, ...], needed: set[str]) -> tuple[Any, tuple[str, ...]]:
    """Sum the labels that neither another operand nor the output uses."""
    summed = tuple(i for i, lb in enumerate(labels) if lb not in needed)
    return _sum_over(x, summed), tuple(lb for i, lb in enumerate(labels) if i not in summed)


def _contract_pair(x: Any, x_labels: tuple, y: Any, y_labels: tuple, needed_later: set[str], precision: Any,
                   preferred: np.dtype | None) -> tuple[Any, tuple[str, ...]]:
    shared = [lb for lb in x_labels if lb in y_labels]
    batch = [lb for lb in shared if lb in needed_later]
    contracted = [lb for lb in shared if lb not in needed_later]
    if x.dtype != y.dtype:  # an earlier result already has the preferred type
        x, y = lax.convert_element_type(x, preferred), lax.convert_element_type(y, preferred)
    numbers = ((tuple(x_labels.index(lb) for lb in contracted), tuple(y_labels.index(lb) for lb in contracted)),
               (tuple(x_labels.index(lb) for lb in batch), tuple(y_labels.index(lb) for lb in batch)))
    out = _dot_general(x, y, numbers, precision, preferred)
    return out, tuple(batch) + tuple(lb for lb in x_labels if lb not in shared) + tuple(
        lb for lb in y_labels if lb not in shared)


def _greedy_pair(operands: list[tuple[Any, tuple]], sizes: dict[str, int], output: tuple) -> tuple[int, int]:
    """The pair whose contraction shrinks the total size the most (opt_einsum's greedy rule)."""
    def cost(i: int, j: int) -> int:
        keep = set(output).union(*(lb for k, (_, lb) in enumerate(operands) if k not in (i, j)))
        (_, xl), (_, yl) = operands[i], operands[j]
        result = {lb for lb in xl + yl if lb in keep}
        return math.prod(sizes[lb] for lb in result) - math.prod(sizes[lb] for lb in xl) - math.prod(
            sizes[lb] for lb in yl)

    pairs = [(i, j) for i in range(len(operands)) for j in range(i + 1, len(operands))]
    return min(pairs, key=lambda p: cost(*p))


def einsum_path(subscripts: Any, /, *operands: Any, optimize: bool | str | list[tuple[int, ...]] = "auto"
                ) -> tuple[list[tuple[int, ...]], Any]:
    """``(path, description)``: the order in which ``einsum`` would contract ``operands``, as a
    list of operand-position tuples (opt_einsum's form, as JAX's), and NumPy's printable report.
    Only the operands' shapes matter (traced operands too). NumPy's ``einsum_path`` chooses the
    path: ``'auto'`` is its ``'optimal'`` search for up to four operands, else ``'greedy'``;
    ``False`` contracts left to right, a pair at a time."""
    def placeholder(x: Any) -> Any:  # (a zero-stride NumPy array of x's shape: no memory, no values)
        return np.broadcast_to(np.zeros((), np.float32), np.shape(x) if not hasattr(x, "shape") else x.shape)
    arrays = [placeholder(x) if isinstance(subscripts, str) or not isinstance(x, (list, tuple)) else x
              for x in operands]
    n = len(arrays) if isinstance(subscripts, str) else (len(arrays) + 1) // 2
    if optimize is False:
        strategy: Any = [(0,)] if n == 1 else [(0, 1)] * (n - 1)
    elif optimize is True:
        strategy = "optimal"
    elif optimize == "auto":
        strategy = "optimal" if n <= 4 else "greedy"
    elif isinstance(optimize, (list, tuple)):
        strategy = ["einsum_path", *(tuple(step) for step in optimize if step != "einsum_path")]
    else:
        strategy = optimize
    path, description = np.einsum_path(subscripts, *arrays,
                                       optimize=["einsum_path", *strategy] if optimize is False else strategy)
    return [tuple(step) for step in path[1:]], description


def _contraction_path(optimize: Any) -> list[tuple[int, int]]:
    """The pairs to contract, from an explicit path (``['einsum_path', (0, 1), ...]`` as
    ``np.einsum_path`` gives, or ``[(0, 1), ...]``). Other ``optimize`` values mean the greedy order.
    Each step removes its two operands and appends their result, as in opt_einsum."""
    if not isinstance(optimize, (list, tuple)):
        return []
    path = [tuple(step) for step in optimize if step != "einsum_path"]
    if any(len(step) != 2 for step in path):
        raise ValueError(f"einsum: each step of an explicit contraction path must name two operands, got {optimize}")
    return path


def einsum(subscripts: Any, /, *operands: Any, out: None = None, optimize: Any = "auto", precision: Any = None,
           preferred_element_type: Any = None) -> Any:
    """Einstein summation: ``'ij,jk->ik'``, ``'...ij,...jk'`` (implicit output: the labels used once,
    sorted), ``'ii->i'`` (diagonals), ``'ij->'`` (sums). Operands are contracted pairwise with
    ``dot_general`` in a greedy order (or the path given as ``optimize``)."""
    if out is not None:
        raise NotImplementedError("jnp.einsum does not support `out`; use the return value")
    if not isinstance(subscripts, str):
        subscripts, operands = _interleaved_to_subscripts(subscripts, operands)
    if not operands:
        raise ValueError("einsum needs at least one operand")
    operands = [ensure_array(x) for x in promote_dtypes(*operands)]
    preferred = None if preferred_element_type is None else dtypes.canonicalize_dtype(preferred_element_type)
    shapes = [x.shape for x in operands]
    inputs, output = _parse_terms(subscripts, shapes)
    sizes = _label_sizes(inputs, shapes)
    pending = [_diagonals_and_broadcasts(x, labels, sizes) for x, labels in zip(operands, inputs)]
    pending = [_sum_unused(x, labels, set(output).union(*(lb for j, (_, lb) in enumerate(pending) if j != k)))
               for k, (x, labels) in enumerate(pending)]
    # Now every label outside the output is shared by two operands, and stays so until contracted.
    path = _contraction_path(optimize)
    while len(pending) > 1:
        i, j = sorted(path.pop(0) if path else _greedy_pair(pending, sizes, output))
        y, y_labels = pending.pop(j)
        x, x_labels = pending.pop(i)
        needed_later = set(output).union(*(lb for _, lb in pending))
        pending.append(_contract_pair(x, x_labels, y, y_labels, needed_later, precision, preferred))
    result, labels = pending[0]
    result = lax.transpose(result, tuple(labels.index(lb) for lb in output))
    return result if preferred is None else lax.convert_element_type(result, preferred)


def _interleaved_to_subscripts(first: Any, rest: Sequence[Any]) -> tuple[str, list[Any]]:
    """``einsum(x, [0, 1], y, [1, 2], [0, 2])`` -> ``('ab,bc->ac', [x, y])`` (``Ellipsis`` allowed)."""
    args = [first, *rest]
    output = args.pop() if len(args) % 2 else None
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def term(sublist: Sequence[Any]) -> str:
        return "".join("..." if s is Ellipsis else letters[operator.index(s)] for s in sublist)

    spec = ",".join(term(s) for s in args[1::2])
    return (spec if output is None else f"{spec}->{term(output)}"), args[0::2]


# --- diagonals and triangles ---------------------------------------------------------------------
def diagonal_last(x: Any, axis1: int, axis2: int, offset: int = 0) -> Any:
    """The ``offset`` diagonal of dimensions ``axis1`` and ``axis2``, as the last dimension.

    Element (i, i + offset) of an r x c matrix sits at i * (c + 1) + offset of the flattened
    matrix, so the diagonal is one strided slice of a reshape.
    """
    rest = [d for d in range(x.ndim) if d not in (axis1, axis2)]
    x = lax.transpose(x, rest + [axis1, axis2])
    rows, cols = x.shape[-2:]
    count = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    start = offset if offset >= 0 else -offset * cols
    flat = lax.reshape(x, x.shape[:-2] + (rows * cols,))
    if count == 0:
        return lax.slice_in_dim(flat, 0, 0, axis=flat.ndim - 1)
    return lax.slice_in_dim(flat, start, start + (count - 1) * (cols + 1) + 1, cols + 1, axis=flat.ndim - 1)


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The ``offset`` diagonal over axes ``axis1`` and ``axis2``, appended as the last axis."""
    a = ensure_array(a)
    if a.ndim < 2:
        raise ValueError(f"diagonal needs an array of at least 2 dimensions, got shape {a.shape}")
    first, second = canonical_axes(axis1, a.ndim)[0], canonical_axes(axis2, a.ndim)[0]
    if first == second:
        raise ValueError(f"diagonal: axis1 and axis2 must differ, got {axis1} and {axis2}")
    return diagonal_last(a, first, second, operator.index(offset))


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: None = None) -> Any:
    """The sum along a diagonal (summed as ``jnp.sum`` does: small integers widen)."""
    return _sum(_diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


_diagonal, _trace = diagonal, trace  # (jnp's, for the module's own use: jnp.linalg's are ARRAY_API_LINALG's)


def diag(v: Any, k: int = 0) -> Any:
    """The ``k``-th diagonal of a 2-D array, or a 2-D array with the 1-D ``v`` on its ``k``-th diagonal."""
    v = ensure_array(v)
    k = operator.index(k)
    if v.ndim == 2:
        return diagonal_last(v, 0, 1, k)
    if v.ndim != 1:
        raise ValueError(f"diag needs a 1-D or 2-D array, got shape {v.shape}")
    # Spread v with m zeros between elements (interior padding) so that it lands on the diagonal
    # of the flattened m x m result.
    n = v.shape[0]
    m = n + abs(k)
    start = k if k >= 0 else -k * m
    spread = n + max(n - 1, 0) * m
    return lax.reshape(lax.pad(v, 0, [(start, m * m - start - spread, m)]), (m, m))


def _triangle(m: Any, k: int, name: str) -> Any:
    m = ensure_array(m)
    if m.ndim < 2:
        raise ValueError(f"jnp.{name} needs an array of at least 2 dimensions, got shape {m.shape}")
    return lax_linalg.triangle(m, operator.index(k), lower=name == "tril")


def tril(m: Any, k: int = 0) -> Any:
    """Zero the entries above the ``k``-th diagonal (of the last two dimensions)."""
    return _triangle(m, k, "tril")


def triu(m: Any, k: int = 0) -> Any:
    """Zero the entries below the ``k``-th diagonal (of the last two dimensions)."""
    return _triangle(m, k, "triu")


# --- norms (jnp.linalg) -------------------------------------------------------------------------
def _reduce(op: Any, x: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    out = op(x, axes)
    if keepdims:
        out = lax.reshape(out, tuple(1 if i in axes else n for i, n in enumerate(x.shape)))
    return out


def _vector_norm(x: Any, ord: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    if ord is None or ord == 2:
        return euclidean_norm(x, tuple(axes), keepdims)  # finite derivative at 0 (complex: of |x|)
    if isinstance(ord, str):
        raise ValueError(f"Invalid order '{ord}' for vector norm.")
    if ord == np.inf:
        return _reduce(lax.reduce_max, lax.abs(x), axes, keepdims)
    if ord == -np.inf:
        return _reduce(lax.reduce_min, lax.abs(x), axes, keepdims)
    real = dtypes.real_dtype(x.dtype)
    if ord == 0:
        return _reduce(lax.reduce_sum, lax.convert_element_type(lax.ne(x, 0), real), axes, keepdims)
    if ord == 1:
        return _reduce(lax.reduce_sum, lax.abs(x), axes, keepdims)
    power = lax.convert_element_type(float(ord), real)
    summed = _reduce(lax.reduce_sum, lax.pow(lax.abs(x), power), axes, keepdims)
    return lax.pow(summed, lax.div(lax.convert_element_type(1.0, real), power))


def _matrix_norm(x: Any, ord: Any, axes: tuple[int, int], keepdims: bool) -> Any:
    row_axis, col_axis = axes
    if ord is None or ord == "fro":
        return euclidean_norm(x, tuple(axes), keepdims)  # finite derivative at 0 (complex: of |x|)
    if ord in ("nuc", 2, -2):
        singular_values = svdvals(moveaxis(x, axes, (-2, -1)))
        last = singular_values.ndim - 1
        if ord == 2:
            out = _max(singular_values, axis=last, initial=0)
        else:
            out = (lax.reduce_min if ord == -2 else lax.reduce_sum)(singular_values, (last,))
        return expand_dims(out, tuple(sorted(axes))) if keepdims else out
    if ord not in (1, -1, np.inf, -np.inf):
        raise ValueError(f"Invalid order '{ord}' for matrix norm.")
    # ord=+-1: extreme column sum (sum over rows); ord=+-inf: extreme row sum (sum over columns).
    sum_axis, pick_axis = (row_axis, col_axis) if ord in (1, -1) else (col_axis, row_axis)
    pick = lax.reduce_max if ord > 0 else lax.reduce_min
    sums = _reduce(lax.reduce_sum, lax.abs(x), (sum_axis,), True)
    out = _reduce(pick, sums, (pick_axis,), True)
    return out if keepdims else lax.squeeze(out, axes)


@staged("norm", ("ord", "axis", "keepdims"))
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    """Vector norms (over one axis) and matrix norms (over two): ``ord`` None/2, 1, inf, -inf, 0,
    p for vectors; None/'fro', 1, -1, inf, -inf, 2, -2 (extreme singular values) and 'nuc'
    (their sum) for matrices. Integers promote to float."""
    (x,) = promote_dtypes_inexact(ensure_array(x))
    x = ensure_array(x)
    if axis is None:
        if ord is None:
            return _vector_norm(x, None, tuple(range(x.ndim)), keepdims)
        if x.ndim not in (1, 2):
            raise ValueError(f"norm with ord={ord!r} and axis=None needs a 1-D or 2-D array, got shape {x.shape}")
        axis = tuple(range(x.ndim))
    axes = canonical_axes(axis, x.ndim)
    if len(axes) == 1:
        return _vector_norm(x, ord, axes, keepdims)
    if len(axes) == 2:
        return _matrix_norm(x, ord, axes, keepdims)
    raise ValueError(f"Improper number of axes for norm: axis={axis}. Pass one axis for a vector norm or two "
                     "for a matrix norm.")


def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Any:
    """The vector norm over ``axis`` (all axes, flattened, when None)."""
    (x,) = promote_dtypes_inexact(ensure_array(x))
    x = ensure_array(x)
    axes = tuple(range(x.ndim)) if axis is None else canonical_axes(axis, x.ndim)
    return _vector_norm(x, ord, axes, keepdims)


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:
    """The matrix norm of the last two dimensions."""
    x = ensure_array(x)
    return norm(x, ord, (x.ndim - 2, x.ndim - 1), keepdims)


def svdvals(x: Any, /) -> Any:
    """The singular values of ``(..., m, n)`` matrices, in descending order."""
    return svd(x, compute_uv=False)


# --- decompositions (jnp.linalg) ------------------------------------------------------------------
class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class EigResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


def _matrices(name: str, a: Any, square: bool = False) -> Any:
    """``a`` promoted to a floating array of shape ``(..., m, n)`` (``(..., n, n)`` if ``square``)."""
    (a,) = promote_dtypes_inexact(a)
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        raise ValueError(f"Argument to {name} must have shape [..., {'n' if square else 'm'}, n], got {a.shape}.")
    return a


def cholesky(a: Any, *, upper: bool = False, symmetrize_input: bool = True) -> Any:
    """The Cholesky factor of Hermitian (real: symmetric) positive-definite matrices: lower ``L`` with
    ``a == L @ L^H`` (or, if ``upper``, ``U == L^H`` with ``a == U^H @ U``). NaN where ``a`` is not
    positive definite. ``symmetrize_input`` averages ``a`` with its conjugate transpose first (else only
    its lower triangle is read)."""
    factor = lax_linalg.cholesky(_matrices("cholesky", a, square=True), symmetrize_input=symmetrize_input)
    return adjoint(factor) if upper else factor


def qr(a: Any, mode: str = "reduced") -> Any:
    """The QR decomposition ``a == Q @ R``: ``QRResult(Q, R)`` with ``Q`` (..., m, k) and ``R`` (..., k, n),
    k = min(m, n), for ``mode='reduced'``; ``Q`` (..., m, m) and ``R`` (..., m, n) for ``'complete'``;
    the reduced ``R`` alone for ``'r'``; for ``'raw'``, NumPy's ``(h, tau)``: LAPACK geqrf's
    Householder form, ``h`` transposed (..., n, m), as NumPy returns it (not differentiable)."""
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"Unsupported QR decomposition mode '{mode}'")
    if mode == "raw":
        h, taus = lax_linalg.geqrf(_matrices("qr", a))
        return matrix_transpose(h), taus
    q, r = lax_linalg.qr(_matrices("qr", a), full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
    """The singular value decomposition ``a == U @ diag(S) @ Vh``: ``SVDResult(U, S, Vh)``, or ``S``
    alone without ``compute_uv``. ``S`` is real and descending; ``full_matrices``: ``U`` is (..., m, m)
    and ``Vh`` (..., n, n), else (..., m, k) and (..., k, n). ``hermitian``: ``a`` is symmetric
    (complex: Hermitian), and the decomposition comes from its eigendecomposition."""
    a = _matrices("svd", a)
    if hermitian:
        return _symmetric_svd(a, compute_uv)
    if compute_uv:
        return SVDResult(*lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=True))
    return lax_linalg.svd(a, compute_uv=False)


def _symmetric_svd(a: Any, compute_uv: bool) -> Any:
    """With a = V diag(w) V^H: S = |w| sorted descending, U = V in that order, Vh = (U * sign(w))^H."""
    v, w = lax_linalg.eigh(a)
    last = w.ndim - 1
    negated, order = lax.sort((lax.neg(lax.abs(w)), lax.broadcasted_iota(dtypes.int32, w.shape, last)), last,
                              num_keys=1)
    s = lax.neg(negated)
    if not compute_uv:
        return s
    u = take_along_axis(v, expand_dims(order, -2), axis=-1)
    signs = where(take_along_axis(w, order, axis=-1) < 0, -1, 1).astype(u.dtype)
    return SVDResult(u, s, adjoint(u * expand_dims(signs, -2)))


def eigh(a: Any, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (real, ascending) and eigenvectors (columns) of symmetric (complex: Hermitian)
    matrices: ``EighResult(eigenvalues, eigenvectors)``. ``UPLO`` ('L', the default, or 'U') names the
    triangle that is read when ``symmetrize_input`` is off; by default ``a`` is averaged with its
    conjugate transpose."""
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"UPLO must be one of None, 'L', or 'U', got {UPLO}")
    v, w = lax_linalg.eigh(_matrices("eigh", a, square=True), lower=UPLO != "U", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a: Any, UPLO: str | None = "L", *, symmetrize_input: bool = True) -> Any:
    """The eigenvalues of symmetric (complex: Hermitian) matrices, real and ascending."""
    return eigh(a, UPLO, symmetrize_input).eigenvalues


def eig(a: Any) -> EigResult:
    """Eigenvalues and right eigenvectors (columns) of general square matrices, always complex:
    ``EigResult(eigenvalues, eigenvectors)`` with ``a @ v == v * w``. As LAPACK's ``geev`` (and JAX)
    gives them: unsorted, each eigenvector of unit 2-norm with a real component of largest magnitude."""
    w, v = lax_linalg.eig(_matrices("eig", a, square=True), compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a: Any) -> Any:
    """The eigenvalues of general square matrices, complex and in LAPACK's order."""
    return lax_linalg.eig(_matrices("eigvals", a, square=True), compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


# --- solvers, inverses and determinants ----------------------------------------------------------------
def _lu_solve(lu: Any, permutation: Any, b: Any) -> Any:
    """``x`` with ``A @ x == b`` for ``A[permutation] == L @ U`` (LU factors packed in ``lu``),
    ``b`` of shape (..., n, k); the batch dimensions broadcast."""
    batch = broadcast_shapes(lu.shape[:-2], b.shape[:-2])
    lu, b = broadcast_to(lu, batch + lu.shape[-2:]), broadcast_to(b, batch + b.shape[-2:])
    rows = broadcast_to(permutation, batch + permutation.shape[-1:])
    permuted = take_along_axis(b, expand_dims(rows, -1), axis=-2)
    below = lax_linalg.triangular_solve(lu, permuted, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu, below, left_side=True, lower=False)


def solve(a: Any, b: Any) -> Any:
    """``x`` with ``a @ x == b`` for square ``a`` (..., n, n), by LU decomposition with partial pivoting.

    As in NumPy 2 and JAX, ``b`` is a vector only when it is 1-D; otherwise it is a stack of
    (..., n, k) matrices, and the batch dimensions broadcast. A singular ``a`` gives inf / NaN.
    """
    a, b = promote_dtypes_inexact(a, b)
    if a.ndim < 2:
        raise ValueError(f"left hand array must be at least two dimensional; got a.shape={a.shape}")
    a = _matrices("solve", a, square=True)
    if b.ndim > 1 and a.ndim == b.ndim + 1 and a.shape[-1] == b.shape[-1] and a.shape[-1] != b.shape[-2]:
        raise ValueError(f"Invalid shapes for solve: {a.shape}, {b.shape}. A b of more than one dimension is a "
                         "stack of (n, k) matrices (as in NumPy 2), not of vectors; for a batch of vectors use "
                         "solve(a, b[..., None])[..., 0].")
    if b.ndim == 0 or b.shape[-2 if b.ndim > 1 else 0] != a.shape[-1]:
        raise ValueError(f"solve: a of shape {a.shape} and b of shape {b.shape} do not match: b needs "
                         f"{a.shape[-1]} rows (b is a vector (n,) or a stack of matrices (..., n, k))")
    lu, _, permutation = lax_linalg.lu(a)
    if b.ndim == 1:
        return _lu_solve(lu, permutation, expand_dims(b, -1))[..., 0]
    return _lu_solve(lu, permutation, b)


def inv(a: Any) -> Any:
    """The inverse of square matrices (..., n, n): ``solve(a, identity)``; inf / NaN if singular."""
    a = _matrices("inv", a, square=True)
    return solve(a, broadcast_to(eye(a.shape[-1], dtype=a.dtype), a.shape))


def _lu_diagonal_and_swap_sign(a: Any) -> tuple[Any, Any]:
    """The diagonal of U in ``A[permutation] == L @ U`` and the sign of the row permutation."""
    lu, pivots, _ = lax_linalg.lu(a)
    swapped = pivots != arange(pivots.shape[-1], dtype=pivots.dtype)
    swap_signs = where(swapped, -1, 1).astype(a.dtype)
    return _diagonal(lu, axis1=-2, axis2=-1), lax.reduce_prod(swap_signs, (swap_signs.ndim - 1,))


def det(a: Any) -> Any:
    """The determinant of square matrices: the signed product of the LU pivots (0 if singular)."""
    diag, swap_sign = _lu_diagonal_and_swap_sign(_matrices("det", a, square=True))
    return swap_sign * lax.reduce_prod(diag, (diag.ndim - 1,))


def slogdet(a: Any, *, method: str | None = None) -> SlogdetResult:
    """``SlogdetResult(sign, logabsdet)`` with ``det(a) == sign * exp(logabsdet)``, without overflow;
    a singular matrix has sign 0 and logabsdet -inf. ``method``: 'lu' (None, the only one)."""
    if method not in (None, "lu"):
        raise ValueError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' (`None`).")
    return SlogdetResult(*_slogdet_lu(_matrices("slogdet", a, square=True)))


@custom_jvp
def _slogdet_lu(a: Any) -> tuple[Any, Any]:
    """The sign (complex: the unit phase) and log |det| from the LU pivots."""
    diag, swap_sign = _lu_diagonal_and_swap_sign(a)
    last = (diag.ndim - 1,)
    return swap_sign * lax.reduce_prod(lax.sign(diag), last), lax.reduce_sum(lax.log(lax.abs(diag)), last)


@_slogdet_lu.defjvp
def _slogdet_jvp(primals: tuple, tangents: tuple) -> tuple:
    # d log det = tr(a^-1 da): its real part moves log |det|, its imaginary part the phase (JAX's rule).
    (a,), (da,) = primals, tangents
    sign, logabsdet = _slogdet_lu(a)
    change = _trace(solve(a, da), axis1=-2, axis2=-1)
    if dtypes.is_complex(a.dtype):
        real = lax.real(change)
        return (sign, logabsdet), ((change - real.astype(a.dtype)) * sign, real)
    return (sign, logabsdet), (zeros(sign.shape, sign.dtype), change)


def matrix_power(a: Any, n: int) -> Any:
    """``a @ a @ ... @ a`` (``n`` factors) by repeated squaring; ``n == 0`` gives the identity and
    ``n < 0`` powers of ``inv(a)``. Integer matrices stay integer (except for ``n < 0``)."""
    a = ensure_array(a)
    if a.ndim < 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be at least two-dimensional")
    if a.shape[-2] != a.shape[-1]:
        raise TypeError(f"Last 2 dimensions of the array must be square, got shape {a.shape}")
    try:
        n = operator.index(n)
    except errors.JAXTypeError:  # a traced exponent: its own error says what to do
        raise
    except TypeError as err:
        raise TypeError(f"exponent must be an integer, got {n}") from err
    if n == 0:
        return broadcast_to(eye(a.shape[-1], dtype=a.dtype), a.shape)
    if n < 0:
        a, n = inv(a), -n
    result, square = None, a
    while True:
        n, bit = divmod(n, 2)
        if bit:
            result = square if result is None else matmul(result, square)
        if not n:
            return result
        square = matmul(square, square)


def matrix_rank(M: Any, rtol: Any = None, *, hermitian: bool = False, tol: Any = None) -> Any:
    """The number of singular values above a threshold (default int dtype): by default the largest singular
    value times ``max(m, n) * eps``. As in JAX, a given ``rtol`` (or its alias ``tol``) is that
    threshold itself. 0-D and 1-D arrays have rank 1 unless all zero."""
    if tol is not None:
        if rtol is not None:
            raise ValueError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    (M,) = promote_dtypes_inexact(M)
    if M.ndim < 2:
        return _any(M != 0).astype(dtypes.int32)
    s = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        rtol = _max(s, axis=-1) * (max(M.shape[-2:]) * float(dtypes.finfo(s.dtype).eps))
    return _sum(s > expand_dims(ensure_array(rtol), -1), axis=-1)


def lstsq(a: Any, b: Any, rcond: float | None = None, *, numpy_resid: bool = False) -> tuple[Any, Any, Any, Any]:
    """The least-squares solution of ``a @ x ~= b`` for 2-D ``a`` (m, n): ``(x, residuals, rank, s)``.

    Singular values below ``rcond`` times the largest (default ``max(m, n) * eps``) are treated
    as zero. ``residuals`` are the squared residual norms per column of ``b``, always computed
    (NumPy leaves them empty when rank < n or m <= n; ``numpy_resid=True`` does that too, which
    needs a concrete rank, so not under jit).
    """
    a, b = promote_dtypes_inexact(a, b)
    if a.ndim != 2:
        raise TypeError(f"{a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim not in (1, 2):
        raise TypeError(f"{b.ndim}-dimensional array given. Array must be one or two-dimensional")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"Leading dimensions of input arrays must match, got shapes {a.shape} and {b.shape}")
    columns = b if b.ndim == 2 else expand_dims(b, -1)
    m, n = a.shape
    if a.size == 0:
        s, rank, x = zeros(0, a.dtype), asarray(0, dtypes.default_int_dtype()), zeros((n, columns.shape[1]), a.dtype)
    else:
        eps = float(dtypes.finfo(a.dtype).eps)
        ratio = eps * max(m, n) if rcond is None else where(asarray(rcond) < 0, eps, rcond)
        u, s, vh = lax_linalg.svd(a, full_matrices=False)
        kept = s >= ratio * s[0]
        rank = _sum(kept)
        s_inverse = where(kept, 1 / where(kept, s, 1), 0)
        x = matmul(adjoint(vh), expand_dims(s_inverse, -1) * matmul(adjoint(u), columns))
    if numpy_resid and (int(rank) < n or m <= n):
        residuals = zeros(0, a.dtype)
    else:
        residual = subtract(columns, matmul(a, x))
        residuals = _sum(lax.real(residual * lax.conj(residual)) if dtypes.is_complex(residual.dtype)
                         else residual ** 2, axis=0)
    return (x if b.ndim == 2 else x[:, 0]), residuals, rank, s


def pinv(a: Any, rtol: Any = None, hermitian: bool = False, *, rcond: Any = None) -> Any:
    """The Moore-Penrose pseudo-inverse (..., n, m) of (..., m, n) matrices, from the SVD: singular
    values up to ``rtol`` times the largest count as zero (default ``10 * max(m, n) * eps``, as in
    JAX; ``rcond`` is an alias). Its derivative is the Golub-Pereyra formula, exact where the rank
    is locally constant."""
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    a = _matrices("pinv", a)
    if rtol is None:
        rtol = 10.0 * max(a.shape[-2:]) * float(dtypes.finfo(a.dtype).eps)
    return _pinv(a, rtol, hermitian)


def _pinv_from_svd(a: Any, rtol: Any, hermitian: bool) -> Any:
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        return zeros(a.shape[:-2] + (n, m), a.dtype)
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    cutoff = expand_dims(asarray(rtol, s.dtype), -1) * s[..., :1]
    s_inverse = where(s > cutoff, 1 / where(s > cutoff, s, 1), 0)
    return matmul(adjoint(vh) * expand_dims(s_inverse, -2).astype(a.dtype), adjoint(u))


_pinv = custom_jvp(_pinv_from_svd, nondiff_argnums=(2,))


@_pinv.defjvp
def _pinv_jvp(hermitian: bool, primals: tuple, tangents: tuple) -> tuple:
    # dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P
    (a, rtol), (da, _) = primals, tangents
    p = _pinv(a, rtol, hermitian)
    if hermitian:  # the decomposition saw the symmetrized matrix
        a, da = lax_linalg.symmetrize(a), lax_linalg.symmetrize(da)
    pt, dat = adjoint(p), adjoint(da)
    left = matmul(matmul(p, pt), dat)
    right = matmul(matmul(dat, pt), p)
    dp = (-matmul(matmul(p, da), p) + left - matmul(matmul(left, a), p) + right - matmul(matmul(p, a), right))
    return p, dp


def tensorinv(a: Any, ind: int = 2) -> Any:
    """The inverse of ``a`` seen as a linear map from its last dimensions to its first ``ind``: the
    result ``b`` (shape ``a.shape[ind:] + a.shape[:ind]``) has ``tensordot(b, a, ind)`` the identity."""
    a = ensure_array(a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer; got ind={ind}")
    rows, columns = a.shape[:ind], a.shape[ind:]
    if math.prod(rows) != math.prod(columns):
        raise ValueError("tensorinv is only possible when the product of the first `ind` dimensions equals that "
                         f"of the remaining dimensions. got a.shape={a.shape} with ind={ind}.")
    return inv(lax.reshape(a, (math.prod(rows), math.prod(columns)))).reshape(*columns, *rows)


def tensorsolve(a: Any, b: Any, axes: Sequence[int] | None = None) -> Any:
    """``x`` with ``tensordot(a, x, x.ndim) == b``; ``axes`` (of ``a``) are moved to the end first."""
    a, b = promote_dtypes_inexact(a, b)
    if axes is not None:
        a = moveaxis(a, axes, [a.ndim - 1] * len(axes) if len(axes) == 1 else
                     list(range(a.ndim - len(axes), a.ndim)))
    out_shape = a.shape[b.ndim:]
    if a.shape[:b.ndim] != b.shape:
        raise ValueError(f"b.shape must match a.shape[:b.ndim]; got b.shape={b.shape}, a.shape={a.shape}")
    flat = lax.reshape(a, (b.size, math.prod(out_shape)))
    return solve(flat, ravel(b)).reshape(out_shape)


def multi_dot(arrays: Sequence[Any], *, precision: Any = None) -> Any:
    """The product of a chain of matrices; the first may be a row vector and the last a column one
    (their dimensions are dropped), as ``np.linalg.multi_dot``."""
    arrays = [ensure_array(x) for x in arrays]
    if len(arrays) < 2:
        raise ValueError(f"multi_dot requires at least two arrays, got {len(arrays)}")
    for i, x in enumerate(arrays):
        if x.ndim != 2 and not (x.ndim == 1 and i in (0, len(arrays) - 1)):
            raise ValueError(f"multi_dot: array {i} has shape {x.shape}: the first and last may be 1-D, the "
                             "others must be 2-D")
    out = arrays[0]
    for x in arrays[1:]:
        out = matmul(out, x, precision=precision)
    return out


def cond(x: Any, p: Any = None) -> Any:
    """The condition number of square (or, for ``p`` None / 2 / -2, any) matrices in the norm ``p``: the
    ratio of extreme singular values, or ``norm(x, p) * norm(inv(x), p)``; inf where ``x`` is singular."""
    (x,) = promote_dtypes_inexact(ensure_array(x))
    if x.ndim < 2:
        raise ValueError(f"jnp.linalg.cond: input array must be at least 2D; got x.shape={x.shape}")
    if p in (None, 2, -2):
        s = svd(x, compute_uv=False)
        ratio = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    else:
        if x.shape[-1] != x.shape[-2]:
            raise ValueError(f"jnp.linalg.cond: for p={p!r}, array must be square; got x.shape={x.shape}")
        ratio = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    nan_input = _any(x != x, axis=(-2, -1))
    return where((ratio != ratio) & ~nan_input, np.inf, ratio)


# --- jnp.linalg's own versions of names jnp also has (the Array API's signatures) ----------------
_outer, _cross, _tensordot = outer, cross, tensordot  # (jnp's)


def _linalg_diagonal(x: Any, /, *, offset: int = 0) -> Any:
    """The ``offset`` diagonal of the last two axes (batched over the leading ones)."""
    return _diagonal(x, offset, -2, -1)


def _linalg_trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """The sums along the ``offset`` diagonals of the last two axes (batched over the leading ones)."""
    return _trace(x, offset, -2, -1, dtype=dtype)


def _linalg_outer(x1: Any, x2: Any, /) -> Any:
    """The outer product of two 1-D arrays (others are refused, as in JAX)."""
    x1, x2 = ensure_array(x1), ensure_array(x2)
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim={x1.ndim} x2.ndim={x2.ndim}")
    return _outer(x1, x2)


def _linalg_cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """Cross products of 3-vectors along ``axis`` (JAX refuses 2-vectors here)."""
    x1, x2 = ensure_array(x1), ensure_array(x2)
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError("Both input arrays must be (arrays of) 3-dimensional vectors, but they have "
                         f"x1.shape[axis]={x1.shape[axis]} and x2.shape[axis]={x2.shape[axis]}")
    return _cross(x1, x2, axis=axis)


def _linalg_tensordot(x1: Any, x2: Any, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2,
                      precision: Any = None, preferred_element_type: Any = None) -> Any:
    return _tensordot(x1, x2, axes, precision=precision, preferred_element_type=preferred_element_type)


# ``ember.numpy`` puts these into this module (as ``jnp.linalg.diagonal``, ...) once ``jnp`` has
# taken the NumPy versions, which keep the names here until then.
ARRAY_API_LINALG = {"diagonal": _linalg_diagonal, "trace": _linalg_trace, "outer": _linalg_outer,
                    "cross": _linalg_cross, "tensordot": _linalg_tensordot}
for _name, _fn in ARRAY_API_LINALG.items():
    _fn.__name__ = _fn.__qualname__ = _name
del _name, _fn
