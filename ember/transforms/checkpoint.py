"""``checkpoint`` / ``remat``, ``checkpoint_name``, ``checkpoint_policies`` and
``saved_residuals``, with JAX's signatures and semantics (``jax.ad_checkpoint``).

``checkpoint(f)`` makes reverse-mode differentiation recompute ``f``'s intermediate
values in the backward pass instead of storing them, trading compute for memory. The
function is traced like JAX traces it (its non-static arguments are abstract, so Python
control flow on them needs ``static_argnums``) into one ``remat2`` equation (JAX's
``remat_p``: params ``jaxpr``, ``prevent_cse``, ``differentiated``, ``policy``), whose
rules are in ``ember.transforms.rules.calls``. Under ``linearize`` / ``vjp`` / ``grad``,
the forward pass computes the primal outputs and saves only the residuals that the
*policy* allows (the primal inputs are always available); the backward pass is a
``remat2`` equation with ``differentiated=True`` that recomputes the other residuals
from the saved ones. The compiler inlines checkpoints like calls; before the body of a
differentiated one it puts an ``optimization_barrier`` on the operands (``prevent_cse``,
the default), so that common-subexpression elimination cannot merge the recomputation
back into the forward pass (JAX uses XLA's optimization barrier the same way).

A policy is called as ``policy(primitive, *input_avals, **params)`` for each equation
whose inputs are all known in the forward pass, and answers whether its outputs may be
saved (a bool, or ``Saveable`` / ``Recompute`` / ``Offloadable(src, dst)``; ember has one
memory per device, so an offloaded value is simply saved). ``checkpoint_name(x, name)``
is the identity that names ``x`` (a ``name`` equation, which compiled code drops) for the
name-based policies. ``saved_residuals(f, *args)`` lists what ``vjp`` of ``f`` saves,
as JAX does, and ``print_saved_residuals`` prints it.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import types
from typing import Any, Callable, Iterable, Sequence

from ember import errors, tree_util
from ember.core.avals import ShapedArray
from ember.core.calls import checkpoint_p, jit_p, name_p
from ember.core.ir import Literal
from ember.core.primitive import Primitive
from ember.core.staging import DebugInfo, consts_as_inputs, recording_sources, trace_to_jaxpr
from ember.lax.base import aval
from ember.lax.convolution import conv_general_dilated_p
from ember.lax.dot import dot_general_p
from ember.transforms.partial_eval import Offloadable, Recompute, Saveable, linearize_flat

__all__ = ["checkpoint", "remat", "checkpoint_name", "checkpoint_policies", "saved_residuals",
           "print_saved_residuals", "Recompute", "Saveable", "Offloadable"]


# --- policies: (primitive, *avals, **params) -> whether its result may be saved ------------------
def everything_saveable(*_: Any, **__: Any) -> bool:
    """The default strategy, as if ``checkpoint`` were not being used at all."""
    return True


def nothing_saveable(*_: Any, **__: Any) -> bool:
    """Rematerialize everything (the policy of ``checkpoint`` without one)."""
    return False


@dataclasses.dataclass(frozen=True)
class DotsSaveable:
    """Save the results of matrix products (and convolutions), or only those without batch
    dimensions."""

    only_if_no_batch_dims: bool

    def __call__(self, prim: Primitive, *avals: Any, **params: Any) -> bool:
        if self.only_if_no_batch_dims:
            if prim is dot_general_p:
                _, (lhs_batch, rhs_batch) = params["dimension_numbers"]
                return not lhs_batch and not rhs_batch
            return False
        return prim is dot_general_p or prim is conv_general_dilated_p


checkpoint_dots = dots_saveable = DotsSaveable(False)
dots_with_no_batch_dims_saveable = DotsSaveable(True)


def offload_dot_with_no_batch_dims(offload_src: str, offload_dst: str) -> Callable[..., Any]:
    """``dots_with_no_batch_dims_saveable``, offloading the products to ``offload_dst`` memory."""
    def policy(prim: Primitive, *_: Any, **params: Any) -> Any:
        if prim is dot_general_p:
            _, (lhs_batch, rhs_batch) = params["dimension_numbers"]
            if not lhs_batch and not rhs_batch:
                return Offloadable(src=offload_src, dst=offload_dst)
        return Recompute
    return policy


def save_anything_except_these_names(*names_not_to_save: str) -> Callable[..., bool]:
    """Save any values (not just named ones) excluding the names given. (As in JAX 0.10, whose
    version saves everything, the names included: the residuals are JAX's.)"""
    return lambda *_, **__: True


@dataclasses.dataclass(frozen=True)
class SaveOnlyTheseNames:
    saveable_names: frozenset

    def __call__(self, prim: Primitive, *_: Any, **params: Any) -> bool:
        return prim is name_p and params["name"] in self.saveable_names


@dataclasses.dataclass(frozen=True)
class SaveAnyNamesButThese:
    names: frozenset

    def __call__(self, prim: Primitive, *_: Any, **params: Any) -> bool:
        return prim is name_p and params["name"] not in self.names


def save_only_these_names(*names_which_can_be_saved: str) -> SaveOnlyTheseNames:
    """Save only named values, and only among the names given."""
    return SaveOnlyTheseNames(frozenset(names_which_can_be_saved))


def save_any_names_but_these(*names_not_to_save: str) -> SaveAnyNamesButThese:
    """Save only named values (outputs of ``checkpoint_name``), excluding the names given."""
    return SaveAnyNamesButThese(frozenset(names_not_to_save))


def save_and_offload_only_these_names(*, names_which_can_be_saved: Iterable[str],
                                      names_which_can_be_offloaded: Iterable[str], offload_src: str,
                                      offload_dst: str) -> Callable[..., Any]:
    """``save_only_these_names``, offloading the second set of names to ``offload_dst`` memory."""
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    intersection = saved & offloaded
    if intersection:
        raise ValueError("The names should be exclusive and should not intersect in `names_which_can_be_saved` and "
                         f"`names_which_can_be_offloaded`. Got names_which_can_be_saved={saved}, "
                         f"names_which_can_be_offloaded={offloaded} and the intersection={intersection}")

    def policy(prim: Primitive, *_: Any, **params: Any) -> Any:
        if prim is name_p and params["name"] in saved:
            return Saveable
        if prim is name_p and params["name"] in offloaded:
            return Offloadable(src=offload_src, dst=offload_dst)
        return Recompute
    return policy


def save_from_both_policies(policy_1: Callable[..., Any], policy_2: Callable[..., Any]) -> Callable[..., bool]:
    """Logical OR of the given policies: a value is saveable iff either policy saves it."""
    def policy(prim: Primitive, *avals: Any, **params: Any) -> bool:
        out1, out2 = policy_1(prim, *avals, **params), policy_2(prim, *avals, **params)
        if not (isinstance(out1, bool) and isinstance(out2, bool)):
            raise ValueError(f"The return value of the policies should be a boolean. Got: {out1} and {out2}. Please "
                             "write a custom policy function directly, rather than using this helper function.")
        return out1 or out2
    return policy


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims,
    save_anything_except_these_names=save_anything_except_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_only_these_names=save_only_these_names,
    save_from_both_policies=save_from_both_policies,
    save_and_offload_only_these_names=save_and_offload_only_these_names,
)


def checkpoint_name(x: Any, name: str) -> Any:
    """``x`` (a pytree of arrays), each leaf named ``name`` for the checkpoint policies
    (``save_only_these_names`` and the others); the identity at run time."""
    return tree_util.tree_map(functools.partial(name_p.bind, name=name), x)


# --- checkpoint -----------------------------------------------------------------------------------
def _int_tuple(option: str, value: int | Sequence[int]) -> tuple[int, ...]:
    nums = (value,) if isinstance(value, int) else tuple(value)
    if not all(type(i) is int for i in nums):
        raise TypeError(f"the `{option}` argument to `ember.checkpoint` / `ember.remat` must be an int or a tuple "
                        f"of ints, but got value {value!r}")
    return nums


def _static_positions(static_argnums: tuple[int, ...], nargs: int) -> frozenset[int]:
    if not all(-nargs <= i < nargs for i in static_argnums):
        raise ValueError("the `static_argnums` argument to `ember.checkpoint` / `ember.remat` can only take integer "
                         "values greater than or equal to `-len(args)` and less than `len(args)`, but got "
                         f"{static_argnums}, while `len(args)` = {nargs}")
    return frozenset(i % nargs for i in static_argnums)


def _positional_parameters(fun: Callable) -> list[str]:
    try:
        return [p.name for p in inspect.signature(fun).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # no signature (some builtins)
        return []


def _leaf_names(positional: list[str], args: tuple, kwargs: dict) -> list[str]:
    """A readable name for every array leaf of the arguments, for error messages."""
    names = [(positional[i] if i < len(positional) else f"args[{i}]") + tree_util.keystr(path)
             for i, a in enumerate(args) for path, _ in tree_util.tree_flatten_with_path(a)[0]]
    return names + [k + tree_util.keystr(path) for k, v in sorted(kwargs.items())
                    for path, _ in tree_util.tree_flatten_with_path(v)[0]]


def _leaf_aval(x: Any, name: str, fun_name: str) -> ShapedArray:
    try:
        return aval(x)
    except TypeError:
        raise TypeError(f"argument `{name}` of the checkpointed function `{fun_name}` is a "
                        f"{type(x).__name__}, not an array. Pass Python values that select what to compute "
                        "as static arguments: ember.checkpoint(f, static_argnums=...) or static_argnames=...") from None


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool | Sequence[bool] = True,
               policy: Callable[..., bool] | None = None, static_argnums: int | Sequence[int] = (),
               static_argnames: str | Iterable[str] = ()) -> Callable:
    """``fun`` marked for rematerialization in reverse-mode differentiation (JAX's ``jax.checkpoint``).

    The result computes the same values and derivatives as ``fun``; differentiated in
    reverse mode, it saves only its inputs and what ``policy`` allows, and recomputes the
    rest in the backward pass (see the module docstring). ``prevent_cse`` (a bool, or one per
    positional argument) keeps the compiler from merging that recomputation with the forward
    pass. ``fun`` is traced at every call, with the arguments at ``static_argnums`` /
    ``static_argnames`` passed as Python values. Usable as ``checkpoint(f)``,
    ``@checkpoint``, and ``@checkpoint(policy=...)``.
    """
    nums = _int_tuple("static_argnums", static_argnums)
    names = frozenset((static_argnames,) if isinstance(static_argnames, str) else static_argnames)
    if isinstance(prevent_cse, Sequence):
        prevent_cse = tuple(prevent_cse)
    if not isinstance(prevent_cse, (bool, tuple)):
        raise TypeError(f"prevent_cse must be a bool or tuple of bools, got {type(prevent_cse)=}")
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint policy must be callable (e.g. one of ember.checkpoint_policies) or None, "
                        f"got {policy!r}")
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy, static_argnums=nums,
                                 static_argnames=tuple(names))
    if not callable(fun):
        raise TypeError(f"ember.checkpoint expects a callable, got {type(fun).__name__}")
    fun_name = errors.function_name(fun)
    positional = _positional_parameters(fun)
    named_positions = tuple(positional.index(n) for n in names if n in positional)  # static by name, passed by position

    @errors.wraps(fun)
    def checkpointed(*args: Any, **kwargs: Any) -> Any:
        static = _static_positions(nums, len(args)) | {i for i in named_positions if i < len(args)}
        dynamic_args = tuple(None if i in static else a for i, a in enumerate(args))
        dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in names}
        static_kwargs = {k: v for k, v in kwargs.items() if k in names}
        leaves, in_tree = tree_util.flatten_for_trace((dynamic_args, dynamic_kwargs))
        arg_names = _leaf_names(positional, dynamic_args, dynamic_kwargs)
        out_trees = []

        def flat_fun(*flat: Any) -> list:
            traced_args, traced_kwargs = tree_util.tree_unflatten(in_tree, list(flat))
            call_args = [args[i] if i in static else a for i, a in enumerate(traced_args)]
            out_leaves, out_tree = tree_util.flatten_for_trace(fun(*call_args, **traced_kwargs, **static_kwargs))
            out_trees.append(out_tree)
            return out_leaves

        avals = [_leaf_aval(x, name, fun_name) for x, name in zip(leaves, arg_names)]
        closed = trace_to_jaxpr(flat_fun, avals, DebugInfo("checkpoint", fun_name, arg_names, static_hint=False))
        [program], consts = consts_as_inputs([closed])
        cse = prevent_cse
        if isinstance(cse, tuple):
            cse = (False,) * len(consts) + _leaf_flags(cse, [a for i, a in enumerate(args) if i not in static],
                                                       dynamic_kwargs)
        outs = checkpoint_p.bind(*consts, *leaves, jaxpr=program, prevent_cse=cse, differentiated=False,
                                 policy=policy)
        return tree_util.tree_unflatten(out_trees[0], outs)

    return checkpointed


remat = checkpoint


def _leaf_flags(prevent_cse: tuple, args: list, kwargs: dict) -> tuple:
    """A tuple ``prevent_cse`` (a prefix of the dynamic arguments, as in JAX: of ``(args, kwargs)``
    when there are keyword arguments) spread over their leaves."""
    tree = (tuple(args), kwargs) if kwargs else tuple(args)
    if len(prevent_cse) != len(tree):
        raise ValueError(f"prevent_cse tuple {prevent_cse} must have one entry per argument of the checkpointed "
                         f"function ({len(tree)})")
    flags: list[bool] = []
    for flag, sub in zip(prevent_cse, tree):
        n = len(tree_util.tree_leaves(sub))
        flags.extend(_leaf_flags(flag, list(sub), {}) if isinstance(flag, tuple) else [bool(flag)] * n)
    return tuple(flags)


# --- saved_residuals ---------------------------------------------------------------------------------
def saved_residuals(f: Callable, *args: Any, **kwargs: Any) -> list[tuple[ShapedArray, str]]:
    """What reverse-mode differentiation of ``f`` at ``args`` saves for the backward pass: for each
    residual, its type and where it comes from, as JAX describes it (``from the argument x``,
    ``output of sin``, ``named 'h'`` for a ``checkpoint_name``, ``output of jitted function 'g'``,
    ``from a constant``, ``from a literal``), and the user's line that computed it, as JAX
    (`` from file:line:column (function)``: its equations record their places while it traces)."""
    leaves, in_tree = tree_util.flatten_for_trace((args, kwargs))
    fun_name = errors.function_name(f)
    arg_names = _leaf_names(_positional_parameters(f), args, kwargs)

    def flat_f(*flat: Any) -> list:
        a, k = tree_util.tree_unflatten(in_tree, list(flat))
        return tree_util.leaves_for_trace(f(*a, **k))

    def residuals_of(*flat: Any) -> list:
        _, linear, _ = linearize_flat(flat_f, flat, fun_name)
        return list(linear.consts)

    avals = [_leaf_aval(x, name, fun_name) for x, name in zip(leaves, arg_names)]
    with recording_sources():
        closed = trace_to_jaxpr(residuals_of, avals, DebugInfo("saved_residuals", fun_name, arg_names,
                                                                static_hint=False))
    jaxpr = closed.jaxpr
    outs = {id(v) for v in jaxpr.outvars if not isinstance(v, Literal)}
    results = [(v.aval, "from a literal") for v in jaxpr.outvars if isinstance(v, Literal)]
    results += [(v.aval, "from a constant") for v in jaxpr.constvars if id(v) in outs]
    results += [(v.aval, f"from the argument {name}") for v, name in zip(jaxpr.invars, arg_names) if id(v) in outs]
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            if id(v) in outs:
                results.append((v.aval, _produced_by(eqn)))
    return results


def _produced_by(eqn: Any) -> str:
    if eqn.primitive is name_p:
        what = f"named '{eqn.params['name']}'"
    elif eqn.primitive is jit_p:
        what = f"output of jitted function '{eqn.params['name']}'"
    else:
        what = f"output of {eqn.primitive.name}"
    return what if eqn.source is None else f"{what} from {eqn.source}"


def print_saved_residuals(f: Callable, *args: Any, **kwargs: Any) -> None:
    """Print ``saved_residuals(f, *args, **kwargs)``, one residual a line (``f32[3] output of sin``)."""
    for a, source in saved_residuals(f, *args, **kwargs):
        print(f"{a.str_short()} {source}")
