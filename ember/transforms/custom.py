"""User-defined derivatives: ``custom_jvp`` and ``custom_vjp`` (as in JAX), and the
derivative of ``stop_gradient``.

A decorated function runs as itself when nothing is traced. Under a trace it is
one equation, ``custom_jvp_call`` / ``custom_vjp_call``, holding the traced
function (to evaluate or compile) and the user's rules (to differentiate), so
``grad(jit(f))`` still finds the rule inside the jitted program.

Reverse mode through ``custom_vjp``: the jvp of a call runs the user's ``fwd``
and records ``custom_vjp_lin(residuals, tangents)``, a linear equation whose
transpose is the user's ``bwd``. It cannot be evaluated forward, which is why
forward mode through a ``custom_vjp`` function is an error, as in JAX.
"""
from __future__ import annotations

import copy
import functools
import inspect
from typing import Any, Callable, Sequence

import numpy as np

from ember import errors, tree_util
from ember.core.array import Array, ensure_array
from ember.core.avals import ShapedArray
from ember.core.calls import custom_jvp_call_p, custom_vjp_call_p, custom_vjp_lin_p
from ember.core.ir import ClosedJaxpr, Eqn, print_rules
from ember.core.trace import EvalTrace, Trace, Tracer, current_trace, is_tracing, set_current_trace
from ember.dtypes import float0_zeros
from ember.lax.base import aval
from ember.lax.stop_gradient import stop_gradient_p
from ember.transforms.jvp import JVPTrace, JVPTracer, defzero, jvp_rules
from ember.transforms.partial_eval import PartialEvalTrace
from ember.transforms.programs import eval_closed_by_binding, merge_by, trace_program
from ember.transforms.tangents import Zero, instantiate, is_differentiable, match_type, zeros
from ember.transforms.transpose import transpose_rules

defzero(stop_gradient_p)


# --- shared argument handling -------------------------------------------------------------------
def _positional(fun: Callable, args: tuple, kwargs: dict) -> tuple:
    """All arguments as positional ones (keywords resolved against the signature, defaults applied)."""
    if not kwargs:
        return args
    bound = inspect.signature(fun).bind(*args, **kwargs)
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"keyword-only arguments are not supported by custom_jvp / custom_vjp functions "
                        f"({errors.function_name(fun)} got {sorted(bound.kwargs)}); pass them positionally")
    return bound.args


class _Arguments:
    """A call's arguments split into static ones (``nondiff_argnums``) and flat dynamic leaves."""

    def __init__(self, args: tuple, nondiff_argnums: tuple[int, ...]) -> None:
        self.args = args
        self.nondiff_argnums = nondiff_argnums
        self.static = [args[i] for i in nondiff_argnums]
        dynamic = tuple(a for i, a in enumerate(args) if i not in nondiff_argnums)
        self.given, self.tree = tree_util.flatten_for_trace(dynamic)
        self.leaves = [ensure_array(x) for x in self.given]

    def dynamic(self, leaves: Sequence[Any]) -> tuple:
        return tree_util.tree_unflatten(self.tree, list(leaves))

    def full(self, leaves: Sequence[Any]) -> tuple:
        """The arguments in their original positions, with the given dynamic leaves."""
        dynamic = iter(self.dynamic(leaves))
        static = iter(self.static)
        return tuple(next(static) if i in self.nondiff_argnums else next(dynamic) for i in range(len(self.args)))


def _trace_call(fun: Callable, args: tuple, nondiff_argnums: tuple[int, ...],
                what: str) -> tuple[_Arguments, ClosedJaxpr, list, list]:
    """Trace ``fun`` on the dynamic leaves of ``args``: (arguments, program, its consts, [output tree])."""
    arguments = _Arguments(args, nondiff_argnums)
    out_tree: list = []

    def flat_fun(*leaves: Any) -> list:
        out_leaves, tree = tree_util.flatten_for_trace(fun(*arguments.full(leaves)))
        out_tree.append(tree)
        return [ensure_array(x) for x in out_leaves]

    call, consts = trace_program(flat_fun, [aval(x) for x in arguments.leaves], what)
    return arguments, call, consts, out_tree


def _check_closure_tangents(kind: str, name: str, const_tangents: Sequence[Any]) -> None:
    if any(not isinstance(t, Zero) for t in const_tangents):
        raise TypeError(f"The {kind} function {name} closes over a value that is being differentiated, so its "
                        "custom rule cannot account for it. Pass that value as an argument of the function instead.")


def _flatten_like(kind: str, tree: Any, reference_tree: Any, what: str) -> list:
    leaves, treedef = tree_util.flatten_for_trace(tree)
    if treedef != reference_tree:
        raise TypeError(f"{kind} rule must produce {what} with the same container (pytree) structure as the "
                        f"primal output, got {treedef} and {reference_tree}")
    return leaves


def forward_attr(self: Any, name: str) -> Any:
    """JAX's: an attribute a custom-rule wrapper lacks is the wrapped function's (so that, in
    ``custom_vjp(custom_vmap(f))``, the outer one has the inner one's ``def_vmap``)."""
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)  # (special names, looked up before __init__ sets __wrapped__)
    return getattr(self.__wrapped__, name)


# --- custom_jvp ----------------------------------------------------------------------------------
class SymbolicZero:
    """A tangent known to be zero, as a ``custom_jvp`` rule defined with ``symbolic_zeros=True``
    receives it (for an input that is not differentiated) and may return it (JAX's
    ``jax.custom_derivatives.SymbolicZero``)."""

    def __init__(self, aval: Any) -> None:
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)

    @staticmethod
    def from_primal_value(value: Any) -> "SymbolicZero":
        return SymbolicZero(aval(value))

    def __repr__(self) -> str:
        return f"SymbolicZero({self.aval.str_short()})"


class custom_jvp:
    """A function with a user-given forward-mode derivative (reverse mode is derived from it).

    ::

        @custom_jvp
        def f(x):
            return ...

        @f.defjvp
        def f_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return f(x), ...
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun, updated=())  # the function is ``self.__wrapped__``
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp: Callable | None = None
        self.symbolic_zeros = False

    def defjvp(self, jvp: Callable, symbolic_zeros: bool = False) -> Callable:
        """Set the rule ``jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)``.
        ``symbolic_zeros``: the tangents of inputs that are not differentiated arrive as
        ``SymbolicZero`` (else as zero arrays), and the rule may return ``SymbolicZero``."""
        self.jvp = jvp
        self.symbolic_zeros = symbolic_zeros
        return jvp

    def defjvps(self, *jvps: Callable | None) -> None:
        """Set one rule per argument: ``jvp_i(tangent_i, primal_out, *primals)``; their results add up."""
        def jvp(primals: tuple, tangents: tuple) -> tuple:
            out = self(*primals)
            total = None
            for rule, t in zip(jvps, tangents):
                if rule is not None:
                    term = rule(t, out, *primals)
                    total = term if total is None else tree_util.tree_map(lambda a, b: a + b, total, term)
            return out, total if total is not None else tree_util.map_for_trace(lambda o: zeros(aval(o)), out)

        self.defjvp(jvp)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    __getattr__ = forward_attr

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = errors.function_name(self.__wrapped__)
        if self.jvp is None:
            raise AttributeError(f"No JVP defined for custom_jvp function {name} using defjvp.")
        args = _positional(self.__wrapped__, args, kwargs)
        if not is_tracing():
            return self.__wrapped__(*args)
        arguments = _Arguments(args, self.nondiff_argnums)
        owner = _owning_trace(arguments.leaves)
        if isinstance(owner, EvalTrace):  # every value is known: f runs on them (JAX's linearize does)
            with set_current_trace(owner):
                return self.__wrapped__(*args)
        trace = _differentiating(owner, arguments.leaves)
        if trace is not None:  # only the rule runs, as in JAX: f is neither traced nor run
            # (on the values as the caller gave them: a Python float stays one, as in JAX)
            primals, tangents = zip(*map(trace.to_pair, arguments.given))
            with set_current_trace(trace.parent):
                outs, out_tangents, tree = _apply_jvp_rule(self, name, arguments, primals, tangents, None, None,
                                                           as_given=True)
            return tree_util.tree_unflatten(tree, [trace.new(o, t) for o, t in zip(outs, out_tangents)])
        handler = custom_call_handlers.get(type(owner))
        if handler is not None:
            result = handler(owner, self, args)
            if result is not NotImplemented:
                return result
        arguments, call, consts, out_tree = _trace_call(self.__wrapped__, args, self.nondiff_argnums,
                                                        f"custom_jvp of `{name}`")

        def flat_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list, list]:
            outs, out_tangents, _ = _apply_jvp_rule(self, name, arguments, primals, tangents, out_tree[0],
                                                    call.out_avals)
            return outs, out_tangents

        rule = _TracedOnce(flat_jvp, name, errors.function_name(self.jvp), self.symbolic_zeros)
        outs = custom_jvp_call_p.bind(*consts, *arguments.leaves, call=call, jvp=rule, num_consts=len(consts))
        return tree_util.tree_unflatten(out_tree[0], outs)


def _owning_trace(leaves: Sequence[Any]) -> Trace:
    """The current trace, below the partial-evaluation traces for which all of ``leaves`` are known
    (such a trace hands operations on known values to its parent)."""
    trace = current_trace()
    while isinstance(trace, PartialEvalTrace) and not any(map(trace.is_unknown, leaves)):
        trace = trace.parent
    return trace


def _differentiating(owner: Trace, leaves: Sequence[Any]) -> JVPTrace | None:
    """The owning trace (``_owning_trace``), when it differentiates one of ``leaves``: then JAX
    runs only the custom rule (on the primal values, so Python control flow on concrete ones
    works in it). Partial-evaluation traces above it, for which the leaves are known, hand the
    call down to it, as they do primitives: in ``grad(grad(f))`` the inner rule's call of ``f``
    is differentiated by the outer rule alone, never traced (as in JAX)."""
    if isinstance(owner, JVPTrace) and any(isinstance(x, JVPTracer) and x._trace is owner for x in leaves):
        return owner
    return None


# Traces that take a custom-rule function's call themselves (before it is traced into an
# equation): ``handler(trace, fn, args)`` returns the result, or NotImplemented to decline. Filled
# by ``ember.transforms.batch_custom``: under ``vmap`` the call moves one trace down, as a custom
# function of the batched function with batched rules (JAX's ``process_custom_jvp_call``), so that
# a differentiating trace below runs only the rule and ``f`` runs (or is traced) once.
custom_call_handlers: dict[type, Callable[[Trace, Any, tuple], Any]] = {}


def _apply_jvp_rule(fn: custom_jvp, name: str, arguments: _Arguments, primals: Sequence[Any],
                    tangents: Sequence[Any], out_tree: Any, out_avals: Sequence[ShapedArray] | None,
                    as_given: bool = False) -> tuple[list, list, Any]:
    """The user's rule on flat primals and tangents: (outputs, output tangents, output tree), checked
    against the function's output type where it was traced (``out_tree``, ``out_avals``), else
    against the rule's own primal outputs. ``as_given``: outputs that are Python or NumPy values
    are returned as the rule made them (JAX's jvp returns them so), else as arrays."""
    symbolic = fn.symbolic_zeros
    # (an integer input's tangent is float0 zeros, as in JAX; with symbolic_zeros, a SymbolicZero)
    given = [SymbolicZero(t.aval) if symbolic and isinstance(t, Zero) else
             float0_zeros(t.aval.shape) if isinstance(t, Zero) and not is_differentiable(t.aval.dtype) else
             instantiate(t) for t in tangents]
    out, out_tangent = fn.jvp(*arguments.static, arguments.dynamic(primals), arguments.dynamic(given))
    if out_tree is None:
        out_leaves, out_tree = tree_util.flatten_for_trace(out)
    else:
        out_leaves = _flatten_like("Custom JVP", out, out_tree, "primal outputs")
    outs = [ensure_array(o) for o in out_leaves]
    out_avals = [aval(o) for o in outs] if out_avals is None else out_avals
    out_tangents = _flatten_like("Custom JVP", out_tangent, out_tree, "tangent outputs")
    checked = []
    for o, given, expected in zip(outs, out_tangents, out_avals):
        if not is_differentiable(expected.dtype) or isinstance(given, SymbolicZero):  # (integer: ignored)
            checked.append(Zero(expected))
            continue
        t = ensure_array(given)
        if aval(o).shape != expected.shape or aval(t).shape != expected.shape:
            raise TypeError(f"Custom JVP rule of {name} must produce primal and tangent outputs with the "
                            f"shapes of the function's output: expected {expected.str_short()}, got primal "
                            f"{aval(o).str_short()} and tangent {aval(t).str_short()}")
        keep = as_given and _is_given_value(given) and aval(t).dtype == expected.dtype
        checked.append(given if keep else match_type(t, expected))
    if as_given:
        outs = [o if _is_given_value(o) else a for o, a in zip(out_leaves, outs)]
    return outs, checked, out_tree


def _is_given_value(x: Any) -> bool:
    """A Python or NumPy value (which JAX's jvp passes through its rules unchanged)."""
    return isinstance(x, (bool, int, float, complex, np.ndarray, np.generic))


class _TracedOnce:
    """The jvp rule of a staged ``custom_jvp_call``: traced into a program the first time it is
    applied to values of one type and pattern of zero tangents, and applied by binding that
    program afterwards, as JAX memoizes it. A transformation that differentiates a program twice
    (``cond``'s jvp: once for which tangents are nonzero, once to build them) runs the user's rule,
    and the calls it makes, once. (A rule that closes over values of a trace is traced anew.)"""

    def __init__(self, rule: Callable[[Sequence[Any], Sequence[Any]], tuple[list, list]], name: str,
                 rule_name: str = "jvp", symbolic_zeros: bool = False) -> None:
        self.rule, self.__name__ = rule, name  # (the function's name; ``rule_name``: the user's rule's, for printing)
        self.rule_name, self.symbolic_zeros = rule_name, symbolic_zeros
        self._programs: dict[tuple, tuple[ClosedJaxpr, list, list[bool]]] = {}

    def __call__(self, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list, list]:
        nonzero = [not isinstance(t, Zero) for t in tangents]
        primal_avals = [aval(p) for p in primals]
        tangent_avals = [aval(t) for t, nz in zip(tangents, nonzero) if nz]
        key = (tuple(primal_avals), tuple(tangent_avals), tuple(nonzero))
        found = self._programs.get(key)
        if found is None:
            out_nonzero: list = []

            def traced(*xs: Any) -> list:
                n = len(primal_avals)
                given = merge_by(nonzero, xs[n:], [t for t in tangents if isinstance(t, Zero)])
                outs, out_tangents = self.rule(xs[:n], given)
                out_nonzero.append([not isinstance(t, Zero) for t in out_tangents])
                return [*outs, *(t for t in out_tangents if not isinstance(t, Zero))]

            program, consts = trace_program(traced, primal_avals + tangent_avals, "custom_jvp rule")
            found = (program, consts, out_nonzero[0])
            if not any(isinstance(c, Tracer) for c in consts):
                self._programs[key] = found
        program, consts, out_nonzero = found
        results = eval_closed_by_binding(program, *consts, *primals, *(t for t in tangents if not isinstance(t, Zero)))
        n = len(results) - sum(out_nonzero)
        out_avals = program.out_avals[:n]
        zeros_out = [Zero(a) for a, nz in zip(out_avals, out_nonzero) if not nz]
        return list(results[:n]), merge_by(out_nonzero, results[n:], zeros_out)


def _custom_jvp_call_jvp(primals: tuple, tangents: tuple, *, call: ClosedJaxpr, jvp: Callable,
                         num_consts: int) -> tuple:
    _check_closure_tangents("custom_jvp", jvp.__name__, tangents[:num_consts])
    return jvp(primals[num_consts:], tangents[num_consts:])


jvp_rules[custom_jvp_call_p] = _custom_jvp_call_jvp


def _custom_jvp_call_params(eqn: Eqn) -> dict:
    """As JAX prints the call: the function's ``name``, ``call_jaxpr``, the rule's name as ``jvp``."""
    jvp, num_consts = eqn.params["jvp"], eqn.params["num_consts"]
    params = {"call_jaxpr": eqn.params["call"], "jvp": getattr(jvp, "rule_name", errors.function_name(jvp)),
              "symbolic_zeros": getattr(jvp, "symbolic_zeros", False),
              **({"num_consts": num_consts} if num_consts else {})}
    return {"name": errors.function_name(jvp), **dict(sorted(params.items()))}


print_rules[custom_jvp_call_p] = _custom_jvp_call_params


# --- custom_vjp ----------------------------------------------------------------------------------
class custom_vjp:
    """A function with a user-given reverse-mode derivative.

    ::

        @custom_vjp
        def f(x):
            return ...

        def f_fwd(x):
            return f(x), residuals

        def f_bwd(residuals, g):
            return (cotangent_of_x,)

        f.defvjp(f_fwd, f_bwd)
    """

    def __init__(self, fun: Callable, nondiff_argnums: Sequence[int] = ()) -> None:
        functools.update_wrapper(self, fun, updated=())  # the function is ``self.__wrapped__``
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None
        self.symbolic_zeros = False

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False) -> None:
        """``fwd(*args) -> (out, residuals)``; ``bwd(*nondiff_args, residuals, out_cotangent)`` returns a
        tuple with one cotangent per (differentiable) argument. ``symbolic_zeros``: ``fwd`` gets
        each argument leaf as a ``CustomVJPPrimal`` (its value, and whether it is perturbed: has a
        nonzero tangent), and ``bwd`` gets ``SymbolicZero`` for output cotangents known to be zero."""
        self.fwd, self.bwd = fwd, bwd
        self.symbolic_zeros = symbolic_zeros

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    __getattr__ = forward_attr

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = errors.function_name(self.__wrapped__)
        if self.fwd is None:
            raise AttributeError(f"No VJP defined for custom_vjp function {name} using defvjp.")
        args = _positional(self.__wrapped__, args, kwargs)
        if not is_tracing():
            return self.__wrapped__(*args)
        arguments = _Arguments(args, self.nondiff_argnums)
        owner = _owning_trace(arguments.leaves)
        if isinstance(owner, EvalTrace):  # every value is known: f runs on them
            with set_current_trace(owner):
                return self.__wrapped__(*args)
        trace = _differentiating(owner, arguments.leaves)
        if trace is None:
            handler = custom_call_handlers.get(type(owner))
            if handler is not None:
                result = handler(owner, self, args)
                if result is not NotImplemented:
                    return result
        if trace is not None:  # only fwd runs now, as in JAX (and bwd when transposed)
            rules = _VJPRules(self, name, arguments, None)
            primals, tangents = zip(*map(trace.to_pair, arguments.leaves))
            with set_current_trace(trace.parent):
                outs, out_tangents = _differentiate_custom_vjp(rules, primals, tangents, None)
            return tree_util.tree_unflatten(rules.out_tree, [trace.new(o, t) for o, t in zip(outs, out_tangents)])
        arguments, call, consts, out_tree = _trace_call(self.__wrapped__, args, self.nondiff_argnums,
                                                        f"custom_vjp of `{name}`")
        rules = _VJPRules(self, name, arguments, out_tree[0])
        outs = custom_vjp_call_p.bind(*consts, *arguments.leaves, call=call, rules=rules, num_consts=len(consts))
        return tree_util.tree_unflatten(out_tree[0], outs)


class CustomVJPPrimal:
    """An argument leaf as a ``symbolic_zeros`` fwd rule gets it: ``value`` and ``perturbed``
    (JAX's ``jax.custom_derivatives.CustomVJPPrimal``)."""

    def __init__(self, value: Any, perturbed: bool) -> None:
        self.value, self.perturbed = value, perturbed

    def __repr__(self) -> str:
        return f"CustomVJPPrimal(value={self.value!r}, perturbed={self.perturbed})"


class _VJPRules:
    """The user's fwd and bwd of one call, on flat lists of arrays.

    The ``rules`` param of ``custom_vjp_call``; other transformations wrap it keeping this
    interface: ``fn`` (the custom_vjp), ``fwd(primals) -> (outputs, residuals)`` and
    ``bwd(residuals, output cotangents, input avals) -> input cotangents`` (Zero where none).
    """

    def __init__(self, fn: custom_vjp, name: str, arguments: _Arguments, out_tree: Any) -> None:
        self.fn, self.name, self.arguments, self.out_tree = fn, name, arguments, out_tree
        self.residual_tree: Any = None  # known once fwd has run
        # The residual leaves that are not arrays (Python bools, numbers, NumPy values), kept as
        # they are and handed to bwd unchanged, as JAX does; None where a leaf is an array.
        self.residual_constants: list = []

    def fwd(self, primals: Sequence[Any], perturbed: Sequence[bool] | None = None) -> tuple[list, list]:
        if self.fn.symbolic_zeros:
            perturbed = [True] * len(primals) if perturbed is None else perturbed
            primals = [CustomVJPPrimal(x, p) for x, p in zip(primals, perturbed)]
        result = self.fn.fwd(*self.arguments.full(primals))
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise TypeError(f"Custom VJP fwd rule of {self.name} must return a pair (output, residuals), "
                            f"got {type(result).__name__}")
        out, residuals = result
        if self.out_tree is None:  # (f was not traced: fwd's output defines the structure)
            out_leaves, self.out_tree = tree_util.flatten_for_trace(out)
        else:
            out_leaves = _flatten_like("Custom VJP fwd", out, self.out_tree, "primal outputs")
        outs = [ensure_array(o) for o in out_leaves]
        residual_leaves, self.residual_tree = tree_util.flatten_for_trace(residuals)
        dynamic = [isinstance(r, (Array, Tracer)) for r in residual_leaves]
        self.residual_constants = [None if d else r for r, d in zip(residual_leaves, dynamic)]
        return outs, [r for r, d in zip(residual_leaves, dynamic) if d]

    def snapshot(self) -> _VJPRules:
        """These rules with what the last ``fwd`` learned (structures, constant residuals) kept:
        what ``bwd`` of that call needs, whatever later calls of ``fwd`` learn."""
        return copy.copy(self)

    def bwd(self, residuals: Sequence[Any], cts: Sequence[Any], in_avals: Sequence[ShapedArray]) -> list:
        ct_tree = tree_util.tree_unflatten(self.out_tree, list(cts))
        arrays = iter(residuals)
        leaves = [next(arrays) if c is None else c for c in self.residual_constants]
        result = self.fn.bwd(*self.arguments.static, tree_util.tree_unflatten(self.residual_tree, leaves),
                             ct_tree)
        dynamic_count = len(self.arguments.args) - len(self.arguments.nondiff_argnums)
        if not isinstance(result, (tuple, list)) or len(result) != dynamic_count:
            raise TypeError(f"Custom VJP bwd rule of {self.name} must return a tuple with one cotangent per "
                            f"differentiable argument ({dynamic_count}), got {result!r:.200}")
        flat = []
        for arg, ct in zip(self.arguments.dynamic(self.arguments.leaves), result):
            arg_leaves = tree_util.tree_leaves(arg)
            ct_leaves = [None] * len(arg_leaves) if ct is None else tree_util.tree_leaves(ct)
            if len(ct_leaves) != len(arg_leaves):
                raise TypeError(f"Custom VJP bwd rule of {self.name} returned a cotangent whose structure differs "
                                "from its argument's")
            flat.extend(ct_leaves)
        return [Zero(a) if ct is None or isinstance(ct, SymbolicZero) or not is_differentiable(a.dtype)
                else match_type(ensure_array(ct), a) for ct, a in zip(flat, in_avals)]


def _custom_vjp_call_jvp(primals: tuple, tangents: tuple, *, call: ClosedJaxpr, rules: _VJPRules,
                         num_consts: int) -> tuple:
    _check_closure_tangents("custom_vjp", errors.function_name(rules.fn.__wrapped__), tangents[:num_consts])
    return _differentiate_custom_vjp(rules, primals[num_consts:], tangents[num_consts:], call.out_avals,
                                     _fwd_traced_once)


def _fwd_traced_once(rules: Any, args: Sequence[Any], perturbed: list[bool]) -> tuple[list, list, Any]:
    """``rules.fwd`` of a staged ``custom_vjp_call``, traced once per argument types and pattern
    of perturbed arguments, then applied by binding (``_TracedOnce``'s reason, for fwd); and the
    rules as that trace of fwd left them (``snapshot``)."""
    programs = rules.__dict__.setdefault("_traced_fwd", {})
    in_avals = tuple(aval(x) for x in args)
    key = (in_avals, tuple(perturbed))
    found = programs.get(key)
    if found is None:
        num_outs: list[int] = []

        def traced(*xs: Any) -> list:
            outs, residuals = rules.fwd(list(xs), perturbed)
            num_outs.append(len(outs))
            return [*outs, *residuals]

        program, consts = trace_program(traced, list(in_avals), "custom_vjp fwd")
        found = (program, consts, num_outs[0], rules.snapshot())
        if not any(isinstance(c, Tracer) for c in consts):
            programs[key] = found
    program, consts, n, learned = found
    results = eval_closed_by_binding(program, *consts, *args)
    return list(results[:n]), list(results[n:]), learned


def _fwd_now(rules: Any, args: Sequence[Any], perturbed: list[bool]) -> tuple[list, list, Any]:
    outs, residuals = rules.fwd(args, perturbed)
    return outs, residuals, rules.snapshot()


def _differentiate_custom_vjp(rules: _VJPRules, args: Sequence[Any], tangents: Sequence[Any],
                              out_avals: Sequence[ShapedArray] | None,
                              fwd: Callable[[Any, Sequence[Any], list[bool]], tuple[list, list, Any]] = _fwd_now
                              ) -> tuple[list, list]:
    """fwd now, and ``custom_vjp_lin`` (whose transpose is bwd) for the output tangents. The
    linear equation holds the rules as this call of fwd left them: a call site differentiated
    again (with other perturbed arguments) cannot change what its bwd sees."""
    perturbed = [not isinstance(t, Zero) for t in tangents]
    outs, residuals, rules = fwd(rules, args, perturbed)
    out_avals = tuple(aval(o) for o in outs) if out_avals is None else tuple(out_avals)
    differentiable = [is_differentiable(aval(x).dtype) for x in args]
    in_tangents = [instantiate(t) for t, d in zip(tangents, differentiable) if d]
    out_tangents = custom_vjp_lin_p.bind(
        *residuals, *in_tangents, num_residuals=len(residuals), rules=rules,
        in_avals=tuple(aval(x) for x in args), out_avals=out_avals)
    return outs, [t if is_differentiable(a.dtype) else Zero(a) for t, a in zip(out_tangents, out_avals)]


def _custom_vjp_lin_transpose(cts: list, *args: Any, num_residuals: int, rules: _VJPRules, in_avals: tuple,
                              out_avals: tuple) -> list:
    symbolic = rules.fn.symbolic_zeros
    cts = [SymbolicZero(a) if symbolic and isinstance(ct, Zero) else match_type(instantiate(ct), a)
           for ct, a in zip(cts, out_avals)]
    cts_in = rules.bwd(args[:num_residuals], cts, in_avals)
    return [None] * num_residuals + [ct for ct, a in zip(cts_in, in_avals) if is_differentiable(a.dtype)]


def _forward_through_custom_vjp(*args: Any, **params: Any) -> Any:
    raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


jvp_rules[custom_vjp_call_p] = _custom_vjp_call_jvp
jvp_rules[custom_vjp_lin_p] = _forward_through_custom_vjp  # (forward mode of a linearized custom_vjp)
transpose_rules[custom_vjp_lin_p] = _custom_vjp_lin_transpose


def _custom_vjp_call_params(eqn: Eqn) -> dict:
    """As JAX prints the call: the function's ``name``, ``call_jaxpr``, and its rules' names."""
    rules, num_consts = eqn.params["rules"], eqn.params["num_consts"]
    fn = rules.fn
    params = {"call_jaxpr": eqn.params["call"], "fwd": errors.function_name(fn.fwd),
              "bwd": errors.function_name(fn.bwd),
              "symbolic_zeros": fn.symbolic_zeros, **({"num_consts": num_consts} if num_consts else {})}
    return {"name": errors.function_name(fn.__wrapped__), **dict(sorted(params.items()))}


print_rules[custom_vjp_call_p] = _custom_vjp_call_params
