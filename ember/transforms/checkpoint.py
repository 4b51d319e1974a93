"""``checkpoint`` / ``remat`` and ``checkpoint_policies``, with JAX's signatures.

In JAX, ``checkpoint(f)`` makes reverse-mode differentiation recompute ``f``'s
intermediate values in the backward pass instead of storing them, trading compute
for memory; a *policy* names the values that may be saved anyway. ember does not
rematerialize yet: a checkpointed function is traced like JAX traces it (its
non-static arguments are abstract, so Python control flow on them needs
``static_argnums``) and becomes a call in the program (``jit`` of name
``checkpoint(f)``), whose values and derivatives are exactly ``f``'s, with all of
its residuals saved. Memory use is therefore that of ``f`` without checkpointing.
Policies are checked and kept for compatibility, not acted on.
"""
from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Callable, Iterable, Sequence

from ember import tree_util
from ember.core.avals import ShapedArray
from ember.core.calls import jit_p
from ember.core.primitive import Primitive
from ember.core.staging import DebugInfo, consts_as_inputs, trace_to_jaxpr
from ember.lax.base import aval
from ember.lax.dot import dot_general_p

__all__ = ["checkpoint", "remat", "checkpoint_policies"]


# --- policies: (primitive, *avals, **params) -> whether its result may be saved ------------------
def everything_saveable(prim: Primitive, *avals: Any, **params: Any) -> bool:
    return True


def nothing_saveable(prim: Primitive, *avals: Any, **params: Any) -> bool:
    return False


def dots_saveable(prim: Primitive, *avals: Any, **params: Any) -> bool:
    return prim is dot_general_p


def dots_with_no_batch_dims_saveable(prim: Primitive, *avals: Any, **params: Any) -> bool:
    if prim is not dot_general_p:
        return False
    _, (lhs_batch, rhs_batch) = params["dimension_numbers"]
    return not lhs_batch and not rhs_batch


def _value_name(prim: Primitive, params: dict) -> str | None:
    """The name JAX's ``checkpoint_name`` gives a value (its ``name`` primitive); ember has no
    such primitive yet, so no value is named."""
    return params.get("name") if prim.name == "name" else None


def save_only_these_names(*names: str) -> Callable[..., bool]:
    wanted = frozenset(names)
    return lambda prim, *avals, **params: _value_name(prim, params) in wanted


def save_anything_except_these_names(*names: str) -> Callable[..., bool]:
    unwanted = frozenset(names)
    return lambda prim, *avals, **params: _value_name(prim, params) not in unwanted


def save_any_names_but_these(*names: str) -> Callable[..., bool]:
    unwanted = frozenset(names)
    return lambda prim, *avals, **params: (name := _value_name(prim, params)) is not None and name not in unwanted


def save_from_both_policies(policy_1: Callable[..., bool], policy_2: Callable[..., bool]) -> Callable[..., bool]:
    return lambda prim, *avals, **params: policy_1(prim, *avals, **params) or policy_2(prim, *avals, **params)


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable,
    nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable,
    checkpoint_dots=dots_saveable,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=dots_with_no_batch_dims_saveable,
    save_only_these_names=save_only_these_names,
    save_anything_except_these_names=save_anything_except_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_from_both_policies=save_from_both_policies,
)


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

    ember does not rematerialize yet (see the module docstring): the result computes the
    same values and derivatives as ``fun`` and saves what ``fun`` would save. ``fun`` is
    traced at every call, with the arguments at ``static_argnums`` / ``static_argnames``
    passed as Python values. Usable as ``checkpoint(f)``, ``@checkpoint``, and
    ``@checkpoint(policy=...)``.
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
    fun_name = getattr(fun, "__name__", type(fun).__name__)
    positional = _positional_parameters(fun)
    named_positions = tuple(positional.index(n) for n in names if n in positional)  # static by name, passed by position

    @functools.wraps(fun)
    def checkpointed(*args: Any, **kwargs: Any) -> Any:
        static = _static_positions(nums, len(args)) | {i for i in named_positions if i < len(args)}
        dynamic_args = tuple(None if i in static else a for i, a in enumerate(args))
        dynamic_kwargs = {k: v for k, v in kwargs.items() if k not in names}
        static_kwargs = {k: v for k, v in kwargs.items() if k in names}
        leaves, in_tree = tree_util.tree_flatten((dynamic_args, dynamic_kwargs))
        arg_names = _leaf_names(positional, dynamic_args, dynamic_kwargs)
        out_trees = []

        def flat_fun(*flat: Any) -> list:
            traced_args, traced_kwargs = tree_util.tree_unflatten(in_tree, list(flat))
            call_args = [args[i] if i in static else a for i, a in enumerate(traced_args)]
            out_leaves, out_tree = tree_util.tree_flatten(fun(*call_args, **traced_kwargs, **static_kwargs))
            out_trees.append(out_tree)
            return out_leaves

        avals = [_leaf_aval(x, name, fun_name) for x, name in zip(leaves, arg_names)]
        closed = trace_to_jaxpr(flat_fun, avals, DebugInfo("checkpoint", fun_name, arg_names, static_hint=False))
        [program], consts = consts_as_inputs([closed])
        outs = jit_p.bind(*consts, *leaves, jaxpr=program, name=f"checkpoint({fun_name})")
        return tree_util.tree_unflatten(out_trees[0], outs)

    return checkpointed


remat = checkpoint
