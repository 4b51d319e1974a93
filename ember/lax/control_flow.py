"""Structured control flow: ``cond`` / ``switch``, ``while_loop`` / ``fori_loop``, ``scan`` / ``map``.

Each traces the user's functions into sub-programs and binds one primitive
that carries them as params, so a loop is a single equation whatever its trip
count. Values a function closes over (arrays, or tracers of an enclosing trace)
become explicit leading operands: the sub-programs themselves hold no consts.
That is what lets a loop body read a value computed by the jitted function
around it.

Types are exact, as in JAX: branches return identical types, and a loop body
returns the type of its carry. The one leniency is weak typing: an initial
carry that is a Python scalar takes the type the body gives it, and an output
that is only weaker than its counterpart is made strong.
"""
from __future__ import annotations

import builtins
import inspect
import os
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember import dtypes, errors, tree_util
from ember.config import config
from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var
from ember.core.primitive import higher_order
from ember.core.staging import DebugInfo, consts_as_inputs, trace_to_jaxpr
from ember.core.trace import Tracer, current_trace, is_tracing
from ember.core.verify import check_jaxpr
from ember.lax import refs as _refs
from ember.lax.base import aval, operator_index, primitive
from ember.lax.elementwise import add, clamp, convert_element_type, convert_element_type_p, lt, ne
from ember.lax.shapes import concatenate, expand_dims, index_in_dim, reshape, slice_in_dim

__all__ = ["cond", "switch", "while_loop", "fori_loop", "scan", "map"]

_NO_OPERAND = object()


# --- naming the user's functions and types in messages ------------------------------------
def _describe(fun: Callable) -> str:
    """The function's name and where it is defined, e.g. "`step` (model.py:12)"."""
    code = getattr(fun, "__code__", None)
    where = f" ({os.path.basename(code.co_filename)}:{code.co_firstlineno})" if code else ""
    return f"`{errors.function_name(fun)}`{where}"


class _Caller(NamedTuple):
    """Which API traces which user function, for messages (what is traced may wrap ``fun``)."""

    api: str                  # "lax.scan"
    role: str                 # "f", "body_fun", "true_fun", "branches[2]"
    fun: Callable
    carry: str = "the carry"  # how a loop's carry reads in messages

    def __str__(self) -> str:
        return f"{self.role} {_describe(self.fun)}"


class _TypeName(str):
    """Prints without quotes, so a pytree of these reads like ``(f32[3], {'n': i32[]})``."""

    __repr__ = str.__str__


def _types(tree: tree_util.PyTreeDef, avals: Sequence[ShapedArray]) -> str:
    return repr(tree_util.tree_unflatten(tree, [_TypeName(a.str_short()) for a in avals]))


def _same_type(a: ShapedArray, b: ShapedArray) -> bool:
    """Equal shape and dtype; weak types are reconciled, never an error."""
    return a.shape == b.shape and a.dtype == b.dtype


def _type_mismatch(head: str, a: tuple, b: tuple, fix: str) -> TypeError | None:
    """The error for two pytrees of types ``(label, tree, avals)`` that differ, else None."""
    (a_label, a_tree, a_avals), (b_label, b_tree, b_avals) = a, b
    if a_tree != b_tree:
        where = "their pytree structures differ"
    else:
        bad = [(p, x, y) for p, x, y in zip(a_tree.paths(), a_avals, b_avals) if not _same_type(x, y)]
        if not bad:
            return None
        path, x, y = bad[0]
        at = f" at {tree_util.keystr(path)}" if path else ""
        what = "shapes" if x.shape != y.shape else "dtypes"
        where = f"the {what} differ{at}: {x.str_short()} vs {y.str_short()}"
    return TypeError(f"{head}: {a_label} {_types(a_tree, a_avals)} and {b_label} {_types(b_tree, b_avals)} "
                     f"must have identical types (pytree structure, shapes and dtypes), but {where}.\n"
                     f"Fix: {fix}")


# --- tracing the user's functions -------------------------------------------------------------
def _leaf_aval(x: Any, where: str) -> ShapedArray:
    if isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float, complex)) or hasattr(x, "_value"):
        return aval(x)
    raise TypeError(f"{where}: a value of type {type(x).__name__} is not an array. Control flow carries "
                    "arrays, Python scalars and pytrees (tuples, lists, dicts, None) of them; keep other "
                    "values outside, e.g. close over them in the function.")


def _flatten(tree: Any, where: str) -> tuple[list, tree_util.PyTreeDef, list[ShapedArray]]:
    leaves, treedef = tree_util.flatten_for_trace(tree)  # (a key array: its data)
    return leaves, treedef, [_leaf_aval(x, where) for x in leaves]


def _arg_names(fun: Callable, args_tree: tree_util.PyTreeDef) -> list[str]:
    """``x``, ``carry['w']``, ...: a name per flat input, for concretization errors."""
    try:
        params = [p.name for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [(params[p[0]] if p[0] < len(params) else f"args[{p[0]}]") + tree_util.keystr(p[1:])
            for p in args_tree.paths()]


def _strengthen(x: Any, target: ShapedArray) -> Any:
    """``x`` with the target's weak flag when that is all they differ in."""
    a = aval(x)
    if a.weak_type != target.weak_type and _same_type(a, target):
        return convert_element_type(x, target.dtype, target.weak_type)
    return x


def _as_type(x: Any, target: ShapedArray) -> Any:
    """``x`` converted to exactly the target type (e.g. an initial carry to the type the loop carries)."""
    return x if aval(x) == target else convert_element_type(x, target.dtype, target.weak_type)


def _trace(fun: Callable, args_tree: tree_util.PyTreeDef, in_avals: Sequence[ShapedArray], caller: _Caller,
           *, out_types: Sequence[ShapedArray] = (), returns_pair: bool = False,
           ) -> tuple[ClosedJaxpr, list[tree_util.PyTreeDef]]:
    """Trace ``fun(*args)`` into a program over flat inputs and outputs.

    Returns the program and the output pytree structure (two of them, carry and
    y, when ``returns_pair``). The first ``len(out_types)`` outputs are given
    those types where they differ only by weak type.
    """
    out_trees: list[tree_util.PyTreeDef] = []

    def flat_fun(*leaves: Any) -> list:
        out = fun(*tree_util.tree_unflatten(args_tree, leaves))
        if returns_pair and not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"{caller.api}: {caller} must return a pair (carry, y), got {_kind(out)}.\n"
                            "Fix: return (new_carry, y); use None as y when there is nothing to stack.")
        flat = []
        for part in out if returns_pair else (out,):
            part_leaves, part_tree, _ = _flatten(part, f"{caller.api}: an output of {caller}")
            out_trees.append(part_tree)
            flat += part_leaves
        return [_strengthen(x, t) for x, t in zip(flat, out_types)] + flat[len(out_types):]

    debug = DebugInfo(caller.api, errors.function_name(caller.fun), _arg_names(fun, args_tree), static_hint=False)
    closed = trace_to_jaxpr(flat_fun, in_avals, debug)
    if config.check_ir:
        check_jaxpr(closed)
    return closed, out_trees


def _kind(x: Any) -> str:
    if isinstance(x, (tuple, list)):
        return f"a {type(x).__name__} of length {len(x)}"
    if isinstance(x, Tracer) or hasattr(x, "_value"):
        return f"an array of type {aval(x).str_short()}"
    return f"a value of type {type(x).__name__}"


def _args_tree(*args: Any) -> tree_util.PyTreeDef:
    return tree_util.structure_for_trace(args)


# --- shape rules shared by the primitives -----------------------------------------------------
def _check_operands(what: str, avals: Sequence[ShapedArray], expected: Sequence[ShapedArray]) -> None:
    if len(avals) != len(expected) or not all(builtins.map(_same_type, avals, expected)):
        raise TypeError(f"{what}: operands typed {[str(a) for a in avals]}, but the sub-program takes "
                        f"{[str(e) for e in expected]}")


# --- cond / switch ------------------------------------------------------------------------------
def _cond_rule(index: ShapedArray, *operands: ShapedArray, branches: tuple) -> list[ShapedArray]:
    if index.shape != () or index.dtype != dtypes.int32:
        raise TypeError(f"cond: the branch index must be an i32[] scalar, got {index.str_short()}")
    if not branches:
        raise TypeError("cond needs at least one branch")
    out = branches[0].out_avals
    for i, branch in enumerate(branches):
        _check_operands(f"cond branch {i}", operands, branch.in_avals)
        if branch.out_avals != out:
            raise TypeError(f"cond: branch {i} returns {branch.out_avals}, but branch 0 returns {out}")
    return out


cond_p = primitive("cond", _cond_rule, multiple_results=True, linear=True)
higher_order.add(cond_p)


def _legacy_operand(api: str, operands: tuple, operand: Any) -> tuple:
    if operand is _NO_OPERAND:
        return operands
    if operands:
        raise TypeError(f"{api}: pass operands either positionally or as the keyword `operand`, not both")
    return (operand,)


def _scalar_aval(api: str, what: str, x: Any, fix: str) -> ShapedArray:
    if x is None or isinstance(x, (list, tuple, dict)):
        raise TypeError(f"{api}: {what} must be a scalar, got {type(x).__name__} {x!r}.\nFix: {fix}")
    a = aval(x)
    if a.shape != ():
        raise TypeError(f"{api}: {what} must be a scalar, got an array of type {a.str_short()}.\nFix: {fix}")
    return a


@errors.api_boundary  # (the user's frames only, in tracebacks)
def cond(pred: Any, true_fun: Callable | Any, false_fun: Callable | Any, *operands: Any,
         operand: Any = _NO_OPERAND) -> Any:  # (Any: the legacy form passes an operand in true_fun's place)
    """``true_fun(*operands) if pred else false_fun(*operands)``, deciding at run time.

    Both branches are traced (they must return identical types); only the
    chosen one runs. ``pred`` is a bool or integer scalar (nonzero is true). The legacy form
    ``cond(pred, true_operand, true_fun, false_operand, false_fun)``, which JAX still accepts,
    gives each branch its own operand.
    """
    if len(operands) == 2 and operand is _NO_OPERAND and not callable(true_fun) and callable(false_fun) \
            and callable(operands[1]):
        (true_operand, true_fun), (false_operand, false_fun) = (true_fun, false_fun), operands
        return cond(pred, lambda both: true_fun(both[0]), lambda both: false_fun(both[1]),
                    (true_operand, false_operand))
    if not (callable(true_fun) and callable(false_fun)):
        raise TypeError("lax.cond: true_fun and false_fun must be callable, got "
                        f"{type(true_fun).__name__} and {type(false_fun).__name__}")
    operands = _legacy_operand("lax.cond", operands, operand)
    a = _scalar_aval("lax.cond", "pred", pred, "reduce an array predicate with jnp.any / jnp.all, or choose "
                     "elementwise with jnp.where / lax.select")
    if a.dtype != dtypes.bool_:
        pred = ne(pred, convert_element_type(0, a.dtype))  # numbers: nonzero is true, as in JAX
    index = convert_element_type(pred, dtypes.int32)
    callers = [_Caller("lax.cond", "true_fun", true_fun), _Caller("lax.cond", "false_fun", false_fun)]
    return _switch(index, callers, (1, 0), operands)


@errors.api_boundary  # (the user's frames only, in tracebacks)
def switch(index: Any, branches: Sequence[Callable], *operands: Any, operand: Any = _NO_OPERAND) -> Any:
    """``branches[index](*operands)``, choosing at run time; ``index`` is clamped into range."""
    branches = tuple(branches)
    if not all(builtins.map(callable, branches)):
        raise TypeError("lax.switch: branches must be a sequence of callables, got "
                        f"{[type(b).__name__ for b in branches]}")
    if not branches:
        raise ValueError("lax.switch: branches is empty; pass at least one function")
    operands = _legacy_operand("lax.switch", operands, operand)
    a = _scalar_aval("lax.switch", "index", index, "pass one integer that selects the branch")
    if a.dtype not in dtypes.INTEGER:
        raise TypeError(f"lax.switch: index must be an integer scalar, got {a.str_short()}.\n"
                        "Fix: convert it, e.g. index.astype(jnp.int32)")
    if len(branches) == 1:
        return branches[0](*operands)
    index = clamp(np.int32(0), convert_element_type(index, dtypes.int32), np.int32(len(branches) - 1))
    callers = [_Caller("lax.switch", f"branches[{i}]", b) for i, b in enumerate(branches)]
    return _switch(index, callers, tuple(range(len(branches))), operands)


def _switch(index: Any, callers: list[_Caller], order: tuple[int, ...], operands: tuple) -> Any:
    """Trace the branches (listed as messages name them) and bind ``cond``; index value ``k``
    selects the branch ``callers[order[k]]``. Branches that write refs they close over are traced
    again with those refs' values as extra operands and outputs (as loop bodies carry them), and
    the refs are written with the outputs."""
    if config.disable_jit and not is_tracing():
        return callers[order[int(index)]].fun(*operands)
    api = callers[0].api
    probe = _refs.LoopProbe(api, errors.function_name(callers[0].fun))
    result = _switch_traced(index, callers, [probe.wrap(c.fun) for c in callers], order, operands, probe)
    if not isinstance(result, _WrittenRefs):
        return result
    written = result.refs
    # As in JAX, a ref keeps its weak type where branch 0 (``cond``'s false_fun) leaves it unwritten.
    first_writes = result.by_branch[order[0]]
    values = _refs.read_values(written)
    leaves = tree_util.leaves_for_trace((index, operands, values))
    trace = current_trace()
    if _refs.transformation_kind(trace) == "vmapped" and any(isinstance(x, Tracer) and x._trace is trace
                                                             for x in leaves):
        raise NotImplementedError("State effect not supported in vmap-of-cond.")

    def carrying(fun: Callable) -> Callable:
        @errors.wraps(fun)
        def branch(*args: Any) -> tuple:
            *ops, ref_values = args
            with _refs.bound(written, ref_values, api, errors.function_name(fun)):
                out = fun(*ops)
                ref_values = _refs.read_values(written)
            return out, ref_values
        return branch

    out, values = _switch_traced(index, callers, [carrying(c.fun) for c in callers], order, (*operands, values))
    for r, v in zip(written, values):
        _refs.write_value(r, v, keep_type=id(r) not in first_writes)
    return out


class _WrittenRefs(NamedTuple):
    """What ``_switch_traced`` returns instead of binding when branches write refs they close over:
    the refs, and the ids of those each branch writes (in ``callers``' order)."""

    refs: list
    by_branch: list


def _switch_traced(index: Any, callers: list[_Caller], funs: list[Callable], order: tuple[int, ...],
                   operands: tuple, probe: Any = None) -> Any:
    """``_switch``'s work: trace ``funs`` (the branches, as ``callers`` name them in messages) and
    bind ``cond``. With a ``probe`` (``refs.LoopProbe``) around the functions: the refs that any
    branch writes, as ``_WrittenRefs``, if there are such."""
    api = callers[0].api
    leaves, _, in_avals = _flatten(operands, f"{api}: an operand")
    args_tree = _args_tree(*operands)
    traced: list[Any] = []
    written: list[Any] = []  # the refs some branch writes
    by_branch: list[set[int]] = []  # the ids of the refs each branch writes
    for caller, fun in zip(callers, funs):
        try:
            traced.append(_trace(fun, args_tree, in_avals, caller))
            by_branch.append(set())
        except _refs.LoopRefs as e:
            if e.probe is not probe:
                raise
            written += [r for r in e.refs if not any(r is w for w in written)]
            by_branch.append({id(r) for r in e.refs})
    if written:
        return _WrittenRefs(written, by_branch)
    first, (first_branch, [out_tree]) = callers[0], traced[0]
    for caller, (branch, [tree]) in zip(callers[1:], traced[1:]):
        error = _type_mismatch(
            api, (f"{first} output", out_tree, first_branch.out_avals), (f"{caller} output", tree, branch.out_avals),
            "make every branch return the same pytree of arrays with equal shapes and dtypes "
            "(cast with .astype(...) or broadcast in the branch that differs).")
        if error:
            raise error
    # Only weak types may differ now: every branch returns the strong type where one does.
    out_types = [ShapedArray(avals[0].shape, avals[0].dtype, all(a.weak_type for a in avals))
                 for avals in zip(*(branch.out_avals for branch, _ in traced))]
    traced = [(branch, trees) if branch.out_avals == out_types else
              _trace(fun, args_tree, in_avals, caller, out_types=out_types)
              for caller, fun, (branch, trees) in zip(callers, funs, traced)]
    branches, consts = consts_as_inputs([traced[k][0] for k in order])
    outs = cond_p.bind(index, *consts, *leaves, branches=tuple(branches))
    return tree_util.tree_unflatten(out_tree, outs)


# --- loops: the carry keeps one type ------------------------------------------------------------
def _carry_target(init: ShapedArray, out: ShapedArray) -> ShapedArray:
    """The type a loop carries: a weak init (a Python scalar) takes the type the body returns.

    As in JAX, an init whose dtype must change is converted to a strong type.
    """
    if init.shape != out.shape or not init.weak_type:
        return init
    if init.dtype == out.dtype:
        return out
    dtype, _ = dtypes.promote_types_weak((init.dtype, True), (out.dtype, out.weak_type))
    return ShapedArray(init.shape, dtype, False)


def _trace_loop_body(trace: Callable[[list[ShapedArray], list[ShapedArray]], tuple[ClosedJaxpr, list]],
                     carry_tree: tree_util.PyTreeDef, carry_avals: list[ShapedArray], caller: _Caller,
                     ) -> tuple[ClosedJaxpr, list, list[ShapedArray]]:
    """Trace a body whose first outputs are the next carry, settling the carry's one type.

    ``trace(in_avals, out_types)`` traces the body. A weakly typed init takes
    the type the body returns, and outputs weaker than the carry are made strong.
    As in JAX, the body is traced again only where an init's dtype must change
    (a weak type alone is converted in the program). Returns the program, the
    output trees and the carry types (the caller converts the init to them).
    """

    def check(in_avals: list[ShapedArray], body: ClosedJaxpr, out_tree: tree_util.PyTreeDef) -> None:
        error = _type_mismatch(
            f"{caller.api}: {caller} changes the type of {caller.carry}", ("input type", carry_tree, in_avals),
            ("output type", out_tree, body.out_avals[:out_tree.num_leaves]),
            f"make `{errors.function_name(caller.fun)}` return a carry with the same structure, shapes and dtypes "
            "as its input: cast with .astype(...), or give the initial value the dtype the loop produces "
            "(e.g. jnp.zeros(3, jnp.float32)).")
        if error:
            raise error

    body, trees = trace(carry_avals, [])
    if trees[0] != carry_tree:
        check(carry_avals, body, trees[0])
    targets = [_carry_target(i, o) for i, o in zip(carry_avals, body.out_avals)]
    if all(builtins.map(_same_type, targets, carry_avals)):  # (weak types differ at most)
        check(targets, body, trees[0])
        return _retyped(body, targets), trees, targets
    body, trees = trace(targets, targets)
    check(targets, body, trees[0])
    return body, trees, targets


def _retyped(body: ClosedJaxpr, carry: list[ShapedArray]) -> ClosedJaxpr:
    """``body`` (traced once) carrying these types, which differ from its carry inputs and outputs
    by weak types at most: each converted on the way in to the type it was traced with, and on
    the way out to the carried one."""
    jaxpr, n = body.jaxpr, len(carry)
    if jaxpr.in_avals[:n] == carry and jaxpr.out_avals[:n] == carry:
        return body

    def convert(x: Any, to: Any) -> Eqn:
        return Eqn(convert_element_type_p, [x], {"new_dtype": to.aval.dtype, "weak_type": to.aval.weak_type}, [to])

    invars = [v if v.aval == t else Var(t) for v, t in zip(jaxpr.invars, carry)] + jaxpr.invars[n:]
    eqns = [convert(new, old) for new, old in zip(invars, jaxpr.invars[:n]) if new is not old] + jaxpr.eqns
    outvars = list(jaxpr.outvars)
    for k, t in enumerate(carry):
        if outvars[k].aval != t:
            eqns.append(convert(outvars[k], Var(t)))
            outvars[k] = eqns[-1].outvars[0]
    return ClosedJaxpr(Jaxpr(jaxpr.constvars, invars, eqns, outvars), body.consts)


def _while_rule(*operands: ShapedArray, body_jaxpr: ClosedJaxpr, body_nconsts: int, cond_jaxpr: ClosedJaxpr,
                cond_nconsts: int) -> list[ShapedArray]:
    carry = list(operands[cond_nconsts + body_nconsts:])
    _check_operands("while cond_jaxpr", list(operands[:cond_nconsts]) + carry, cond_jaxpr.in_avals)
    _check_operands("while body_jaxpr", operands[cond_nconsts:], body_jaxpr.in_avals)
    if not _is_bool_scalar(cond_jaxpr.out_avals):
        raise TypeError(f"while: cond_jaxpr must return one bool[] scalar, got {cond_jaxpr.out_avals}")
    if body_jaxpr.out_avals != body_jaxpr.in_avals[body_nconsts:]:
        raise TypeError(f"while: body_jaxpr returns {body_jaxpr.out_avals}, but its carry is "
                        f"{body_jaxpr.in_avals[body_nconsts:]}")
    return body_jaxpr.out_avals


def _is_bool_scalar(avals: Sequence[ShapedArray]) -> bool:
    return len(avals) == 1 and avals[0].shape == () and avals[0].dtype == dtypes.bool_


while_p = primitive("while", _while_rule, multiple_results=True, linear=True)
higher_order.add(while_p)


@errors.api_boundary  # (the user's frames only, in tracebacks)
def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """``while cond_fun(val): val = body_fun(val)``, with the loop running in the program.

    ``cond_fun`` returns a boolean scalar; ``body_fun`` returns a value of the
    same type as ``init_val`` (pytree structure, shapes and dtypes).
    """
    return _while_loop(cond_fun, body_fun, init_val, _Caller("lax.while_loop", "body_fun", body_fun))


def _while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any, caller: _Caller) -> Any:
    """``_while_loop_plain``; a body that writes refs it closes over is traced again with them carried."""
    if not (callable(cond_fun) and callable(body_fun)) or (config.disable_jit and not is_tracing()):
        return _while_loop_plain(cond_fun, body_fun, init_val, caller)
    probe = _refs.LoopProbe(caller.api, errors.function_name(caller.fun))
    try:
        return _while_loop_plain(probe.wrap(cond_fun), probe.wrap(body_fun), init_val, caller)
    except _refs.LoopRefs as e:
        if e.probe is not probe:
            raise
        written = e.refs
    name = errors.function_name(caller.fun)

    def cond_with_refs(carry: tuple) -> Any:
        val, values = carry
        with _refs.bound(written, values, caller.api, name):
            return cond_fun(val)

    def body_with_refs(carry: tuple) -> tuple:
        val, values = carry
        with _refs.bound(written, values, caller.api, name):
            new = body_fun(val)
            values = _refs.read_values(written)
        return new, values

    result, values = _while_loop_plain(cond_with_refs, body_with_refs, (init_val, _refs.read_values(written)),
                                       caller)
    for r, v in zip(written, values):
        _refs.write_value(r, v)
    return result


def _while_loop_plain(cond_fun: Callable, body_fun: Callable, init_val: Any, caller: _Caller) -> Any:
    if not (callable(cond_fun) and callable(body_fun)):
        raise TypeError(f"{caller.api}: cond_fun and body_fun must be callable, got "
                        f"{type(cond_fun).__name__} and {type(body_fun).__name__}")
    if config.disable_jit and not is_tracing():
        val = init_val
        while cond_fun(val):
            val = body_fun(val)
        return val
    init, carry_tree, carry_avals = _flatten(init_val, f"{caller.api}: init_val")
    args_tree = _args_tree(init_val)

    def trace_body(in_avals: list[ShapedArray], out_types: list[ShapedArray]) -> tuple[ClosedJaxpr, list]:
        return _trace(body_fun, args_tree, in_avals, caller, out_types=out_types)

    body, _, carry_avals = _trace_loop_body(trace_body, carry_tree, carry_avals, caller)
    cond_caller = caller._replace(role="cond_fun", fun=cond_fun)
    predicate, [predicate_tree] = _trace(cond_fun, args_tree, carry_avals, cond_caller)
    if predicate_tree.num_leaves != 1 or not _is_bool_scalar(predicate.out_avals):
        raise TypeError(f"{caller.api}: {cond_caller} must return a boolean scalar, got "
                        f"{_types(predicate_tree, predicate.out_avals)}.\n"
                        "Fix: return a comparison such as `i < n`; reduce an array condition with "
                        "jnp.any / jnp.all.")
    [cond_jaxpr], cond_consts = consts_as_inputs([predicate])
    [body_jaxpr], body_consts = consts_as_inputs([body])
    outs = while_p.bind(*cond_consts, *body_consts, *builtins.map(_as_type, init, carry_avals),
                        body_jaxpr=body_jaxpr, body_nconsts=len(body_consts),
                        cond_jaxpr=cond_jaxpr, cond_nconsts=len(cond_consts))
    return tree_util.tree_unflatten(carry_tree, outs)


@errors.api_boundary  # (the user's frames only, in tracebacks)
def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any, *, unroll: int | bool | None = None) -> Any:
    """``for i in range(lower, upper): val = body_fun(i, val)``.

    With bounds known while tracing (Python / NumPy ints, concrete arrays) this
    is a ``scan`` of fixed length, which reverse-mode differentiation can
    handle later; with traced bounds it is a ``while_loop``. ``i`` has the
    bounds' dtype.
    """
    if not callable(body_fun):
        raise TypeError(f"lax.fori_loop: body_fun must be callable, got {type(body_fun).__name__}")
    index_type = _fori_index_type(lower, upper)
    if not isinstance(lower, Tracer) and not isinstance(upper, Tracer):
        start = convert_element_type(int(lower), index_type.dtype, index_type.weak_type)

        def scan_body(carry: tuple, _: None) -> tuple:
            i, val = carry
            return (add(i, 1), body_fun(i, val)), None

        caller = _Caller("lax.fori_loop", "body_fun", body_fun, "the carry (loop index, val)")
        (_, result), _ = _scan(scan_body, (start, init_val), None, max(int(upper) - int(lower), 0), False,
                               1 if unroll is None else unroll, caller)
        return result
    if unroll not in (None, False, 1):
        raise ValueError("lax.fori_loop: unroll needs loop bounds known while tracing (Python ints), but "
                         "lower or upper is traced.\nFix: pass static bounds, or drop unroll.")

    def loop_cond(carry: tuple) -> Any:
        i, stop, _ = carry
        return lt(i, stop)

    def loop_body(carry: tuple) -> tuple:
        i, stop, val = carry
        return add(i, 1), stop, body_fun(i, val)

    start, stop = (b if aval(b).dtype == index_type.dtype else convert_element_type(b, index_type.dtype)
                   for b in (lower, upper))
    caller = _Caller("lax.fori_loop", "body_fun", body_fun, "the carry (loop index, upper bound, val)")
    _, _, result = _while_loop(loop_cond, loop_body, (start, stop, init_val), caller)
    return result


def _fori_index_type(lower: Any, upper: Any) -> ShapedArray:
    """The loop index type: the bounds' dtype (a weakly typed bound adopts the other's, of its kind).
    Float bounds are JAX's too: known while tracing, they are truncated to ints (a weak int32 index),
    traced, the index is a float counting up by one."""
    lo, hi = (_scalar_aval("lax.fori_loop", name, b, "pass integer scalars as bounds")
              for name, b in (("lower", lower), ("upper", upper)))
    for a in (lo, hi):
        if a.dtype not in dtypes.INTEGER and not dtypes.is_floating(a.dtype):
            raise TypeError(f"lax.fori_loop: lower and upper must be integers (or floats), got {lo.str_short()} "
                            f"and {hi.str_short()}.\nFix: pass integer bounds, e.g. int(n) or n.astype(jnp.int32)")
    if lo.dtype == hi.dtype:
        index = ShapedArray((), lo.dtype, lo.weak_type and hi.weak_type)
    elif lo.weak_type != hi.weak_type and dtypes.is_floating(lo.dtype) == dtypes.is_floating(hi.dtype):
        index = (hi if lo.weak_type else lo).strip_weak_type()
    else:
        raise TypeError(f"lax.fori_loop: lower and upper arguments to fori_loop must have equal types, got "
                        f"{lo.dtype} and {hi.dtype}.\nFix: convert one of them, e.g. upper.astype(lower.dtype)")
    static = not isinstance(lower, Tracer) and not isinstance(upper, Tracer)
    return ShapedArray((), dtypes.int32, True) if static and dtypes.is_floating(index.dtype) else index


# --- scan / map -------------------------------------------------------------------------------------
def _scan_rule(*operands: ShapedArray, jaxpr: ClosedJaxpr, length: int, num_carry: int, num_consts: int,
               reverse: bool, unroll: int) -> list[ShapedArray]:
    split = num_consts + num_carry
    for x in operands[split:]:
        if x.shape[:1] != (length,):
            raise TypeError(f"scan: scanned operand {x.str_short()} needs leading dimension {length}")
    body_inputs = list(operands[:split]) + [ShapedArray(x.shape[1:], x.dtype, x.weak_type) for x in operands[split:]]
    _check_operands("scan jaxpr", body_inputs, jaxpr.in_avals)
    carry, ys = jaxpr.out_avals[:num_carry], jaxpr.out_avals[num_carry:]
    if carry != jaxpr.in_avals[num_consts:split]:
        raise TypeError(f"scan: jaxpr returns carry {carry}, but takes {jaxpr.in_avals[num_consts:split]}")
    return carry + [ShapedArray((length, *y.shape), y.dtype, y.weak_type) for y in ys]


scan_p = primitive("scan", _scan_rule, multiple_results=True, linear=True)
higher_order.add(scan_p)


@errors.api_boundary  # (the user's frames only, in tracebacks)
def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1) -> tuple[Any, Any]:
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns ``(carry, stacked ys)``.

    In Python::

        def scan(f, init, xs, length=None):
            carry, ys = init, []
            for x in xs:
                carry, y = f(carry, x)
                ys.append(y)
            return carry, np.stack(ys)

    ``xs`` and the ys are pytrees; ``length`` is needed when ``xs`` is None.
    ``reverse`` runs from the last element to the first (ys keep their positions).
    """
    return _scan(f, init, xs, length, reverse, unroll, _Caller("lax.scan", "f", f))


def _scan(f: Callable, init: Any, xs: Any, length: int | None, reverse: bool, unroll: int | bool,
          caller: _Caller) -> tuple[Any, Any]:
    """``_scan_plain``; a body that writes refs it closes over is traced again with them carried."""
    if not callable(f) or (config.disable_jit and not is_tracing()):
        return _scan_plain(f, init, xs, length, reverse, unroll, caller)
    probe = _refs.LoopProbe(caller.api, errors.function_name(caller.fun))
    try:
        return _scan_plain(probe.wrap(f), init, xs, length, reverse, unroll, caller)
    except _refs.LoopRefs as e:
        if e.probe is not probe:
            raise
        written = e.refs
    name = errors.function_name(caller.fun)

    def f_with_refs(carry: tuple, x: Any) -> Any:
        c, values = carry
        with _refs.bound(written, values, caller.api, name):
            out = f(c, x)
            values = _refs.read_values(written)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            return out  # (refused with the usual message)
        return (out[0], values), out[1]

    (carry, values), ys = _scan_plain(f_with_refs, (init, _refs.read_values(written)), xs, length, reverse,
                                      unroll, caller)
    for r, v in zip(written, values):
        _refs.write_value(r, v)
    return carry, ys


def _scan_plain(f: Callable, init: Any, xs: Any, length: int | None, reverse: bool, unroll: int | bool,
                caller: _Caller) -> tuple[Any, Any]:
    if not callable(f):
        raise TypeError(f"{caller.api}: {caller.role} must be callable, got {type(f).__name__}")
    xs_leaves, xs_tree, xs_avals = _flatten(xs, f"{caller.api}: xs")
    length = _scan_length(xs_leaves, xs_tree, length, caller.api)
    unroll = _unroll_factor(unroll, length, caller.api)
    if config.disable_jit and not is_tracing() and length:
        return _scan_in_python(f, init, xs_leaves, xs_tree, length, reverse)
    init_leaves, carry_tree, carry_avals = _flatten(init, f"{caller.api}: init")
    x_avals = [ShapedArray(a.shape[1:], a.dtype, a.weak_type) for a in xs_avals]
    args_tree = _args_tree(init, xs)

    def trace_body(in_avals: list[ShapedArray], out_types: list[ShapedArray]) -> tuple[ClosedJaxpr, list]:
        return _trace(f, args_tree, in_avals + x_avals, caller, out_types=out_types, returns_pair=True)

    body, (_, y_tree), carry_avals = _trace_loop_body(trace_body, carry_tree, carry_avals, caller)
    [jaxpr], consts = consts_as_inputs([body])
    outs = scan_p.bind(*consts, *builtins.map(_as_type, init_leaves, carry_avals), *xs_leaves,
                       jaxpr=jaxpr, length=length, num_carry=len(carry_avals), num_consts=len(consts),
                       reverse=bool(reverse), unroll=unroll)
    carry, ys = outs[:len(carry_avals)], outs[len(carry_avals):]
    return tree_util.tree_unflatten(carry_tree, carry), tree_util.tree_unflatten(y_tree, ys)


def _scan_length(xs_leaves: list, xs_tree: tree_util.PyTreeDef, length: Any, api: str) -> int:
    """The trip count: the common leading axis length of the xs (and ``length``, if given)."""
    sizes = []
    for path, x in zip(xs_tree.paths(), xs_leaves):
        shape = aval(x).shape
        if not shape:
            raise ValueError(f"{api}: xs{tree_util.keystr(path)} is a scalar, which has no leading axis to "
                             "scan over.\nFix: pass arrays with a leading axis, or close over scalars instead.")
        sizes.append((f"xs{tree_util.keystr(path)}", shape[0]))
    if length is not None:
        sizes.append(("length", operator_index(length)))
    if not sizes:
        raise ValueError(f"{api}: there are no xs to scan over and length is not given.\n"
                         "Fix: pass length=n when xs is None.")
    if len({n for _, n in sizes}) > 1:
        listed = ", ".join(f"{label}: {n}" for label, n in sizes)
        raise ValueError(f"{api}: the arrays scanned over have different leading axis lengths ({listed}).\n"
                         "Fix: give every leaf of xs the same length along axis 0 (and pass a matching length).")
    return sizes[0][1]


def _unroll_factor(unroll: int | bool, length: int, api: str) -> int:
    if isinstance(unroll, (bool, np.bool_)):
        return max(length, 1) if unroll else 1
    unroll = operator_index(unroll)
    if unroll < 0:
        raise ValueError(f"{api}: unroll must be a bool or a non-negative int, got {unroll}")
    return unroll


def _scan_in_python(f: Callable, carry: Any, xs_leaves: list, xs_tree: tree_util.PyTreeDef, length: int,
                    reverse: bool) -> tuple[Any, Any]:
    """``scan`` as a Python loop, for ``disable_jit`` debugging (print / pdb inside ``f``)."""
    ys = [None] * length
    for i in range(length - 1, -1, -1) if reverse else range(length):
        x = tree_util.tree_unflatten(xs_tree, [index_in_dim(leaf, i, keepdims=False) for leaf in xs_leaves])
        carry, ys[i] = f(carry, x)
    stacked = tree_util.map_for_trace(lambda *y: concatenate([expand_dims(v, (0,)) for v in y], 0), *ys)
    return carry, stacked


@errors.api_boundary  # (the user's frames only, in tracebacks)
def map(f: Callable, xs: Any, *, batch_size: int | None = None) -> Any:
    """``np.stack([f(x) for x in xs])`` over the leading axis of the pytree ``xs``, as one ``scan``.

    With ``batch_size``, each step applies ``vmap(f)`` to ``batch_size`` elements (the
    remainder runs as one more batch), trading memory for fewer, wider steps.
    """
    if batch_size is not None:
        return _batched_map(f, xs, operator_index(batch_size))

    def step(carry: tuple, x: Any) -> tuple:
        return carry, f(x)

    _, ys = _scan(step, (), xs, None, False, 1, _Caller("lax.map", "f", f))
    return ys


def vmap(f: Callable) -> Callable:
    """``vmap``, for ``map(..., batch_size=n)``: a transformation, one layer above lax, which
    replaces this function by itself as it loads (``ember.transforms.batching``)."""
    raise RuntimeError("lax.map(..., batch_size=...) needs ember.transforms, which `import ember` loads")


def _batched_map(f: Callable, xs: Any, batch_size: int) -> Any:
    leaves, tree = tree_util.flatten_for_trace(xs)
    if batch_size < 1:
        raise ValueError(f"lax.map: batch_size must be positive, got {batch_size}")
    if not leaves:
        raise ValueError("lax.map: xs has no arrays to map over")
    n = aval(leaves[0]).shape[0]
    full, rest = divmod(n, batch_size)
    batched_f = vmap(f)
    outs = []
    if full:
        blocks = [reshape(slice_in_dim(x, 0, full * batch_size), (full, batch_size) + aval(x).shape[1:])
                  for x in leaves]
        ys = map(batched_f, tree_util.tree_unflatten(tree, blocks))
        outs.append(tree_util.map_for_trace(lambda y: reshape(y, (full * batch_size,) + aval(y).shape[2:]), ys))
    if rest:
        tail = [slice_in_dim(x, full * batch_size, n) for x in leaves]
        outs.append(batched_f(tree_util.tree_unflatten(tree, tail)))
    if len(outs) == 1:
        return outs[0]
    return tree_util.map_for_trace(lambda a, b: concatenate([a, b], 0), outs[0], outs[1])
