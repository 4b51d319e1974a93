"""``custom_vmap`` and ``sequential_vmap`` (JAX's ``jax.custom_batching``): a function whose
batched form is given by the user instead of derived by ``vmap``.

The function stages to one ``custom_vmap_call`` equation holding its traced body (what it
computes unbatched, and after every transformation but ``vmap``) and the rule. ``vmap``
runs the rule on the whole batch. Forward-mode differentiation gives a ``custom_vmap_call``
of the jvp of the body whose rule is the jvp of the user's rule, so ``vmap(jvp(f))`` still
batches through the rule. As in JAX, reverse mode is not supported (wrap the function in a
``custom_vjp`` for that): its partial evaluation raises JAX's error.

The ``rule`` param is a *flat* rule ``rule(axis_size, values, batched) -> (outs, out_batched)``
over the call's operands after its ``num_consts`` leading consts (what the body closes over,
which the rule closes over itself), batched ones with the batch axis in front.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from ember import errors, lax, tree_util
from ember.core.array import ensure_array
from ember.core.calls import custom_vmap_call_p
from ember.core.ir import ClosedJaxpr
from ember.core.trace import is_tracing
from ember.lax.base import aval
from ember.transforms.batching import BatchDim, batching_rules, move_batch_axis
from ember.transforms.custom import _positional, forward_attr
from ember.transforms.jvp import jvp_flat, jvp_jaxpr, jvp_rules
from ember.transforms.partial_eval import partial_eval_rules
from ember.transforms.programs import merge_by, select_by, trace_program
from ember.transforms.tangents import Zero, instantiate, match_type

__all__ = ["custom_vmap", "sequential_vmap"]


class custom_vmap:
    """A function with a user-given ``vmap`` rule (JAX's ``jax.custom_batching.custom_vmap``)::

        @custom_vmap
        def f(x, y):
            return x + y

        @f.def_vmap
        def f_vmap_rule(axis_size, in_batched, xs, ys):
            return xs * ys, True   # (outputs, which of them are batched: a pytree like them)
    """

    def __init__(self, fun: Callable) -> None:
        functools.update_wrapper(self, fun, updated=())
        self.fun = fun
        self.vmap_rule: Callable | None = None

    def def_vmap(self, vmap_rule: Callable) -> Callable:
        """Set ``vmap_rule(axis_size, in_batched, *args) -> (out, out_batched)``: ``in_batched`` is a
        list with a pytree of bools per argument, batched leaves have the batch axis in front."""
        self.vmap_rule = vmap_rule
        return vmap_rule

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    __getattr__ = forward_attr

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = errors.function_name(self.fun)
        try:
            args = _positional(self.fun, args, kwargs)
        except TypeError as e:
            raise TypeError(f"The input arguments to the custom_vmap-decorated function {name} could not be "
                            f"resolved to positional-only arguments. Binding failed with the error:\n{e}") from e
        if self.vmap_rule is None:
            raise AttributeError(f"No batching rule defined for custom_vmap function {name} using def_vmap.")
        if not is_tracing():  # (eager, nothing to batch: the function itself)
            return self.fun(*args)
        leaves, in_tree = tree_util.flatten_for_trace(args)
        leaves = [ensure_array(x) for x in leaves]
        out_trees: list = []

        def flat_fun(*xs: Any) -> list:
            out_leaves, out_tree = tree_util.flatten_for_trace(self.fun(*tree_util.tree_unflatten(in_tree, list(xs))))
            out_trees.append(out_tree)
            return [ensure_array(x) for x in out_leaves]

        call, consts = trace_program(flat_fun, [aval(x) for x in leaves], f"custom_vmap of `{name}`")
        rule = _rule_object(_UserRule, self.vmap_rule, in_tree, out_trees[0], name)
        outs = custom_vmap_call_p.bind(*consts, *leaves, call=call, rule=rule, num_consts=len(consts))
        return tree_util.tree_unflatten(out_trees[0], outs)


# The flat rule objects of recent calls, by their class and arguments: a program holding one refers to
# it by identity (``core.fingerprint``), so each call with the same rule and structure (and each jvp
# of it) must give the same object, or an eager program holding it compiles on every call.
_RULES: dict[tuple, Any] = {}
_RULES_KEPT = 1024


def _rule_object(cls: type, *args: Any) -> Any:
    """``cls(*args)``, the same object for equal arguments (a new one where they cannot be hashed)."""
    key = (cls, *args)
    try:
        found = _RULES.get(key)
    except TypeError:
        return cls(*args)
    if found is None:
        if len(_RULES) >= _RULES_KEPT:
            _RULES.clear()
        found = _RULES[key] = cls(*args)
    return found


class _UserRule:
    """The user's pytree rule as a flat rule, checked as JAX checks it."""

    def __init__(self, rule: Callable, in_tree: Any, out_tree: Any, name: str) -> None:
        self.rule, self.in_tree, self.out_tree = rule, in_tree, out_tree
        self.__name__ = getattr(rule, "__name__", "<unnamed rule>")

    def __call__(self, axis_size: int, values: Sequence[Any], batched: Sequence[bool]) -> tuple[list, list]:
        args = tree_util.tree_unflatten(self.in_tree, list(values))
        in_batched = tree_util.tree_unflatten(self.in_tree, list(batched))
        result = self.rule(axis_size, list(in_batched), *args)
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise TypeError(f"custom vmap rule ({self.__name__}) must return a pair (outputs, out_batched), got "
                            f"{type(result).__name__}")
        out, out_batched = result
        outs, tree = tree_util.flatten_for_trace(out)
        flags, flags_tree = tree_util.tree_flatten(out_batched)
        if tree != flags_tree:
            raise ValueError("structure of output value and output batching specification returned by custom "
                             f"vmap rule ({self.__name__}) do not match.\nOutput values: {tree}\n"
                             f"Batching spec: {flags_tree}")
        if tree != self.out_tree:
            raise ValueError(f"structure of output returned by custom vmap rule ({self.__name__}) does not match "
                             f"that of original custom-vmapped function.\nOriginal output: {self.out_tree}\n"
                             f"Rule output: {tree}")
        return [ensure_array(o) for o in outs], [bool(b) for b in flags]


# --- vmap: the rule --------------------------------------------------------------------------------
def _batch_custom_vmap_call(axis_size: int, values: tuple, dims: tuple, *, call: ClosedJaxpr, rule: Callable,
                            num_consts: int) -> tuple[list, list[BatchDim]]:
    if any(d is not None for d in dims[:num_consts]):
        raise ValueError("a custom_vmap function closes over a value batched by an enclosing vmap; pass it to "
                         "the function as an argument instead")
    args = [v if d is None else move_batch_axis(v, d, axis_size) for v, d in zip(values[num_consts:],
                                                                                  dims[num_consts:])]
    outs, out_batched = rule(axis_size, args, [d is not None for d in dims[num_consts:]])
    for o, b, expected in zip(outs, out_batched, call.out_avals):
        want = (axis_size, *expected.shape) if b else expected.shape
        if aval(o).shape != want:
            raise ValueError(f"custom vmap rule ({getattr(rule, '__name__', rule)}) returned an output of shape "
                             f"{aval(o).shape}, but the function's output is {expected.str_short()} and it is "
                             f"{'batched' if b else 'unbatched'}: expected shape {want}")
    return [match_type(o, expected._replace(shape=aval(o).shape)) for o, expected in zip(outs, call.out_avals)], \
        [0 if b else None for b in out_batched]


# --- jvp: a custom_vmap call of the jvp, whose rule is the jvp of the rule ------------------------------
class _JVPOfRule:
    """The flat rule of a jvp call, on (primals, nonzero tangents): every input whose primal or
    tangent is batched is batched in both, and the user's rule runs under jvp."""

    def __init__(self, rule: Callable, nonzeros: Sequence[bool], out_nonzeros: Sequence[bool]) -> None:
        self.rule, self.nonzeros, self.out_nonzeros = rule, list(nonzeros), list(out_nonzeros)
        self.__name__ = f"jvp({getattr(rule, '__name__', 'rule')})"

    def __call__(self, axis_size: int, values: Sequence[Any], batched: Sequence[bool]) -> tuple[list, list]:
        n = len(self.nonzeros)
        primals, tangents = list(values[:n]), list(values[n:])
        primal_batched = list(batched[:n])
        tangent_batched = merge_by(self.nonzeros, batched[n:], [False] * self.nonzeros.count(False))
        both = [p or t for p, t in zip(primal_batched, tangent_batched)]
        primals = [move_batch_axis(p, None, axis_size) if b and not pb else p
                   for p, b, pb in zip(primals, both, primal_batched)]
        tangent_values = iter(tangents)
        full_tangents = []
        for p, nz, b, tb in zip(primals, self.nonzeros, both, tangent_batched):
            if not nz:
                full_tangents.append(Zero(aval(p)))
            else:
                t = next(tangent_values)
                full_tangents.append(move_batch_axis(t, None, axis_size) if b and not tb else t)
        out_batched: list = []

        def to_jvp(*xs: Any) -> list:
            outs, flags = self.rule(axis_size, list(xs), both)
            out_batched.append(flags)
            return outs

        outs, out_tangents = jvp_flat(to_jvp, primals, full_tangents)
        out_tangents = [match_type(instantiate(t) if not isinstance(t, Zero) else instantiate(Zero(aval(o))),
                                   aval(o)) for t, o in zip(out_tangents, outs)]
        flags = out_batched[0]
        return list(outs) + select_by(self.out_nonzeros, out_tangents), list(flags) + select_by(self.out_nonzeros,
                                                                                               flags)


def _custom_vmap_call_jvp(primals: tuple, tangents: tuple, *, call: ClosedJaxpr, rule: Callable,
                          num_consts: int) -> tuple[list, list]:
    if any(not isinstance(t, Zero) for t in tangents[:num_consts]):
        raise TypeError("a custom_vmap function closes over a value being differentiated; pass it to the "
                        "function as an argument instead")
    nonzeros = [not isinstance(t, Zero) for t in tangents]
    program, consts, out_nonzeros = jvp_jaxpr(call, nonzeros, [True] * len(call.out_avals))
    jvp_rule = _rule_object(_JVPOfRule, rule, tuple(nonzeros[num_consts:]), tuple(out_nonzeros))
    outs = custom_vmap_call_p.bind(*consts, *primals, *select_by(nonzeros, tangents), call=program, rule=jvp_rule,
                                   num_consts=len(consts) + num_consts)
    n = len(call.out_avals)
    out_tangents = merge_by(out_nonzeros, outs[n:], [Zero(a) for a, nz in zip(call.out_avals, out_nonzeros)
                                                     if not nz])
    return list(outs[:n]), out_tangents


def _custom_vmap_call_partial_eval(trace: Any, args: Sequence[Any], params: dict) -> Any:
    raise ValueError("Linearization failed to produce known values for all output primals. This is typically "
                     "caused by attempting to differentiate a function uses an operation that does not support "
                     "reverse-mode autodiff. (custom_vmap functions do not support reverse-mode autodiff: wrap "
                     "the function in a custom_vjp to give it one.)")


batching_rules[custom_vmap_call_p] = _batch_custom_vmap_call
jvp_rules[custom_vmap_call_p] = _custom_vmap_call_jvp
partial_eval_rules[custom_vmap_call_p] = _custom_vmap_call_partial_eval


# --- sequential_vmap --------------------------------------------------------------------------------
def sequential_vmap(f: Callable) -> custom_vmap:
    """``f`` as a ``custom_vmap`` function that, batched, runs once per example in a loop
    (``lax.map``): for functions that cannot be batched, such as host callbacks."""
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size: int, in_batched: list, *args: Any) -> tuple[Any, Any]:
        mapped = [a if b else None for a, b in zip(tree_util.leaves_for_trace(list(args)),
                                                   tree_util.tree_leaves(in_batched))]
        leaves, tree = tree_util.flatten_for_trace(list(args))
        flags = tree_util.tree_leaves(in_batched)

        def to_map(mapped_leaves: list) -> Any:
            it = iter(mapped_leaves)
            merged = [next(it) if b else x for x, b in zip(leaves, flags)]
            return f(*tree_util.tree_unflatten(tree, merged))

        out = lax.map(to_map, [m for m in mapped if m is not None])
        return out, tree_util.tree_map(lambda _: True, out)

    return f
