"""Algebraic simplification: local rewrites that shrink a program without changing a value.

Each rule reads like the algebra it implements (``# x * 1 -> x``) and yields
candidates: an existing atom to use instead of the equation's result (the
equation disappears), or a cheaper equation writing the same variable. A
candidate is taken only if its type is exactly the result's type (shape,
dtype and weak type): ``x * 1.0`` with a weakly typed ``x`` and a strongly
typed ``1.0`` has a strong result, so it stays. Rules apply again to the
equation they produce, so chains collapse in one pass. Producers that become
dead are left for DCE.

Floating point: every rule is exact in IEEE arithmetic, NaN, infinities and
the sign of zero included. JAX/XLA rewrite ``x + 0.0 -> x``, but
``-0.0 + 0.0 = +0.0``, so ember does not: it rewrites ``x + 0 -> x`` for
integers and ``x + (-0.0) -> x`` for floats (exact: ``+0.0 + -0.0 = +0.0``).
``x - 0.0 = x + (-0.0)``, so ``x - 0 -> x`` holds for every dtype, as do
``x * 1 -> x`` and ``x / 1 -> x``.
"""
from __future__ import annotations

from typing import Callable, Iterator

import numpy as np

from ember import dtypes
from ember.compiler.rewrite import SubprogramRewriter, Substitution, on_closed, rebuild
from ember.core.ir import Atom, ClosedJaxpr, Eqn, Jaxpr, Literal, Var
from ember.core.primitive import Primitive, abstract_eval_rules
from ember.lax import elementwise as ew, shapes as sh
from ember.lax.dot import dot_general_p

# Equations already in the simplified program, by the id of each variable they define.
Producers = dict[int, Eqn]
Rule = Callable[[Eqn, Producers], Iterator[Atom | Eqn]]
RULES: dict[Primitive, Rule] = {}


def simplify(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with the algebraic rules of this module applied everywhere."""
    return on_closed(closed, _simplify_jaxpr)


def _simplify_jaxpr(jaxpr: Jaxpr, subprograms: SubprogramRewriter) -> Jaxpr:
    subst = Substitution()
    producers: Producers = {}
    eqns = []
    for eqn in jaxpr.eqns:
        result = _rewrite(subprograms(subst.apply(eqn)), producers)
        if isinstance(result, Eqn):
            eqns.append(result)
            producers.update((id(v), result) for v in result.outvars)
        else:
            subst.bind(eqn.outvars[0], result)
    return rebuild(jaxpr, eqns, subst.all(jaxpr.outvars))


def _rewrite(eqn: Eqn, producers: Producers) -> Eqn | Atom:
    """The first well-typed candidate of the rules, rewritten again until no rule applies."""
    while (rule := RULES.get(eqn.primitive)) is not None:
        candidate = next((c for c in rule(eqn, producers) if _has_type_of(c, eqn)), None)
        if not isinstance(candidate, Eqn):
            return eqn if candidate is None else candidate
        eqn = candidate
    return eqn


def _has_type_of(candidate: Atom | Eqn, eqn: Eqn) -> bool:
    if not isinstance(candidate, Eqn):
        return len(eqn.outvars) == 1 and candidate.aval == eqn.outvars[0].aval
    try:
        out = abstract_eval_rules[candidate.primitive](*(a.aval for a in candidate.invars), **candidate.params)
    except (TypeError, ValueError):
        return False
    return (list(out) if candidate.primitive.multiple_results else [out]) == [v.aval for v in eqn.outvars]


def _rule(primitive: Primitive) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        RULES[primitive] = rule
        return rule
    return register


def _producer(atom: Atom, producers: Producers, primitive: Primitive) -> Eqn | None:
    eqn = producers.get(id(atom)) if isinstance(atom, Var) else None
    return eqn if eqn is not None and eqn.primitive is primitive else None


def _is_one(atom: Atom) -> bool:
    return isinstance(atom, Literal) and bool(np.asarray(atom.val, dtype=atom.aval.dtype) == 1)


def _is_zero(atom: Atom, negative: bool) -> bool:
    """A literal zero; for floats, one whose sign bit is ``negative``."""
    if not isinstance(atom, Literal):
        return False
    value = np.asarray(atom.val, dtype=atom.aval.dtype)
    return bool(value == 0) and (not dtypes.is_floating(value.dtype) or bool(np.signbit(value)) == negative)


# --- arithmetic --------------------------------------------------------------------------
@_rule(ew.mul_p)
def _mul(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    x, y = eqn.invars
    if _is_one(y):
        yield x  # x * 1 -> x
    if _is_one(x):
        yield y  # 1 * x -> x


@_rule(ew.add_p)
def _add(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    x, y = eqn.invars
    if _is_zero(y, negative=True):
        yield x  # x + 0 -> x (integers); x + (-0.0) -> x (floats)
    if _is_zero(x, negative=True):
        yield y  # 0 + x -> x (integers); (-0.0) + x -> x (floats)


@_rule(ew.sub_p)
def _sub(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    x, y = eqn.invars
    if _is_zero(y, negative=False):
        yield x  # x - 0 -> x


@_rule(ew.div_p)
def _div(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    x, y = eqn.invars
    if _is_one(y):
        yield x  # x / 1 -> x


@_rule(ew.copy_p)
def _copy(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    yield eqn.invars[0]  # (values are immutable: a copy is its operand)


@_rule(ew.neg_p)
def _neg(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    inner = _producer(eqn.invars[0], producers, ew.neg_p)
    if inner is not None:
        yield inner.invars[0]  # -(-x) -> x (also for the most negative integer: both negations wrap)


def _is_all_ones_or_true(atom: Atom) -> bool:
    if not isinstance(atom, Literal):
        return False
    value = np.asarray(atom.val, dtype=atom.aval.dtype)
    return bool(value) if value.dtype == np.bool_ else bool(value == np.invert(np.zeros((), value.dtype)))


@_rule(ew.or_p)
def _or(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    x, y = eqn.invars
    if _is_zero(y, negative=False):
        yield x  # x | 0 -> x (x | False -> x)
    if _is_zero(x, negative=False):
        yield y  # 0 | x -> x


@_rule(ew.and_p)
def _and(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    x, y = eqn.invars
    if _is_all_ones_or_true(y):
        yield x  # x & ~0 -> x (x & True -> x)
    if _is_all_ones_or_true(x):
        yield y  # ~0 & x -> x


@_rule(ew.integer_pow_p)
def _integer_pow(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    if eqn.params["y"] == 1:
        yield eqn.invars[0]  # x ** 1 -> x
    if eqn.params["y"] == 2:  # x ** 2 -> x * x (the same product: one form for both, as XLA's)
        yield Eqn(ew.mul_p, [eqn.invars[0], eqn.invars[0]], {}, eqn.outvars)


@_rule(ew.square_p)
def _square(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    yield Eqn(ew.mul_p, [eqn.invars[0], eqn.invars[0]], {}, eqn.outvars)  # square(x) -> x * x (as XLA's)


@_rule(ew.select_n_p)
def _select_n(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    which, *cases = eqn.invars
    if isinstance(which, Literal) and 0 <= int(which.val) < len(cases):
        yield cases[int(which.val)]  # select_n(k, c0, c1, ...) -> ck
    if all(case is cases[0] for case in cases):
        yield cases[0]  # select_n(p, x, ..., x) -> x


# --- conversions -------------------------------------------------------------------------
@_rule(ew.convert_element_type_p)
def _convert(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    x = eqn.invars[0]
    if x.aval == eqn.outvars[0].aval:
        yield x  # convert(x, type of x) -> x
    inner = _producer(x, producers, ew.convert_element_type_p)
    if inner is not None and _chain_collapses(inner.invars[0].aval.dtype, x.aval.dtype, eqn.params["new_dtype"]):
        yield eqn.replace(invars=inner.invars)  # convert(convert(x: A, B), C) -> convert(x, C)


def _chain_collapses(source: np.dtype, middle: np.dtype, target: np.dtype) -> bool:
    """Whether converting through ``middle`` gives what converting directly gives, for every value.

    The middle type must hold every source value exactly; then both paths convert
    the same value to ``target``. They still differ where it does not fit
    ``target`` if the middle is a float and the source an integer: float -> int
    saturates, int -> int wraps (``i8 -128 -> f32 -> u8`` is 0, ``i8 -128 -> u8`` is 128).
    """
    if not is_exact_conversion(source, middle):
        return False
    saturates_instead = dtypes.is_integer(source) and dtypes.is_floating(middle) and dtypes.is_integer(target)
    return not saturates_instead or is_exact_conversion(source, target)


def is_exact_conversion(source: np.dtype, target: np.dtype) -> bool:
    """Whether converting any ``source`` value to ``target`` keeps it exactly (NaN, inf, -0.0 included)."""
    if source == target or source == dtypes.bool_:
        return True
    if dtypes.is_integer(source) and dtypes.is_integer(target):
        s, t = np.iinfo(source), np.iinfo(target)
        return t.min <= s.min and s.max <= t.max
    if dtypes.is_integer(source) and dtypes.is_floating(target):
        # Every integer of magnitude up to 2**(mantissa bits + 1) is a float of the target.
        s = np.iinfo(source)
        return max(-int(s.min), int(s.max)) <= 2 ** (dtypes.finfo(target).nmant + 1)
    if dtypes.is_floating(source) and dtypes.is_floating(target):
        fs, ft = dtypes.finfo(source), dtypes.finfo(target)
        return ft.nmant >= fs.nmant and ft.maxexp >= fs.maxexp and ft.minexp <= fs.minexp
    return False


# --- data movement -------------------------------------------------------------------------
def _reshape_operand(eqn: Eqn) -> Atom | None:
    """The operand of an equation that is a row-major reshape of it, else None."""
    if not eqn.invars:  # iota and other nullary producers
        return None
    operand = eqn.invars[0]
    if eqn.primitive is sh.squeeze_p or (eqn.primitive is sh.reshape_p and eqn.params["dimensions"] is None):
        return operand
    # A broadcast that keeps the size only inserts size-1 dimensions (expand_dims); with
    # strictly increasing broadcast_dimensions that is a reshape.
    if eqn.primitive is sh.broadcast_in_dim_p and operand.aval.size == eqn.outvars[0].aval.size:
        return operand
    return None


def _merged_reshapes(eqn: Eqn, producers: Producers) -> Iterator[Eqn]:
    if _reshape_operand(eqn) is None:
        return
    inner = producers.get(id(eqn.invars[0]))
    source = None if inner is None else _reshape_operand(inner)
    if source is not None:
        # reshape(reshape(x)) -> reshape(x), squeeze and expand_dims included
        yield Eqn(sh.reshape_p, [source], {"new_sizes": eqn.outvars[0].aval.shape, "dimensions": None},
                  eqn.outvars)


def _same_shape(eqn: Eqn) -> Iterator[Atom]:
    x = eqn.invars[0]
    if x.aval.shape == eqn.outvars[0].aval.shape:
        yield x  # reshape / squeeze / broadcast_in_dim of x to x's own shape -> x


@_rule(sh.reshape_p)
def _reshape(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    yield from _same_shape(eqn)
    yield from _merged_reshapes(eqn, producers)


@_rule(sh.squeeze_p)
def _squeeze(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    yield from _same_shape(eqn)
    yield from _merged_reshapes(eqn, producers)


@_rule(sh.broadcast_in_dim_p)
def _broadcast_in_dim(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    yield from _same_shape(eqn)
    inner = _producer(eqn.invars[0], producers, sh.broadcast_in_dim_p)
    if inner is not None:
        # broadcast_in_dim(broadcast_in_dim(x, s1, d1), s2, d2) -> broadcast_in_dim(x, s2, d2[d1])
        outer_dims = eqn.params["broadcast_dimensions"]
        dims = tuple(outer_dims[d] for d in inner.params["broadcast_dimensions"])
        yield eqn.replace(invars=inner.invars, params={**eqn.params, "broadcast_dimensions": dims})
    yield from _merged_reshapes(eqn, producers)


@_rule(dot_general_p)
def _dot_general(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    # dot_general(transpose(x, p), y) -> dot_general(x, y) with the dimension numbers read
    # through p (``a @ b.T``, ``q @ k.swapaxes(-1, -2)``): a product reads a strided operand where
    # it lies, where the transpose wrote a copy of it first (256x512 @ (512x512).T on the CPU:
    # 1.2x JAX's time with the copy, 1.0x without; XLA folds it the same way). Only where the
    # free dimensions keep their order (the result's order) and each group of the operand's
    # dimensions (batch, free, contracted) stays in consecutive increasing dimensions, so that the
    # product still reads it without a copy.
    (contract, batch) = eqn.params["dimension_numbers"]
    for side in (0, 1):
        inner = _producer(eqn.invars[side], producers, sh.transpose_p)
        if inner is None:
            continue
        permutation = inner.params["permutation"]
        free = [d for d in range(len(permutation)) if d not in contract[side] + batch[side]]
        groups = [[permutation[d] for d in group] for group in (batch[side], free, contract[side])]
        if all(b - a == 1 for group in groups for a, b in zip(group, group[1:])):
            numbers = [list(contract), list(batch)]
            numbers[0][side], numbers[1][side] = tuple(groups[2]), tuple(groups[0])
            invars = list(eqn.invars)
            invars[side] = inner.invars[0]
            yield eqn.replace(invars=invars, params={**eqn.params, "dimension_numbers": (
                tuple(numbers[0]), tuple(numbers[1]))})


@_rule(sh.transpose_p)
def _transpose(eqn: Eqn, producers: Producers) -> Iterator[Atom | Eqn]:
    permutation = eqn.params["permutation"]
    if permutation == tuple(range(len(permutation))):
        yield eqn.invars[0]  # transpose(x, identity) -> x
    inner = _producer(eqn.invars[0], producers, sh.transpose_p)
    if inner is not None:
        # transpose(transpose(x, p), q) -> transpose(x, p[q])
        first = inner.params["permutation"]
        yield eqn.replace(invars=inner.invars, params={"permutation": tuple(first[i] for i in permutation)})
    shape = eqn.invars[0].aval.shape
    moved = [d for d in permutation if shape[d] != 1]
    if moved == sorted(moved):
        # transpose(x, p) -> reshape(x) when p moves only dimensions of size 1 (the elements keep
        # their order: index arithmetic reads it as a reshape that adds and drops unit dimensions)
        yield Eqn(sh.reshape_p, eqn.invars, {"new_sizes": eqn.outvars[0].aval.shape, "dimensions": None},
                  eqn.outvars)
