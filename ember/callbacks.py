"""Host callbacks: Python functions that a program calls at run time with the values it computed.

Two primitives carry them through tracing, the compiler and every transformation:

- ``debug_callback`` (behind ``ember.debug.callback`` / ``ember.debug.print``) has no
  outputs and is *effectful*: the compiler never removes, merges or folds it, so it
  runs at every call of a jitted program, and at every iteration of a loop body.
- ``pure_callback`` (``ember.pure_callback``) returns arrays of declared types and is
  *pure*: like any other operation it may be dropped when its results are unused,
  merged with an identical call, or evaluated at compile time when its operands are
  constants (as JAX allows: "may be called multiple times, or not at all").
- ``io_callback`` (``ember.io_callback``, JAX's ``jax.experimental.io_callback``) returns
  arrays of declared types and is effectful, as ``debug_callback``: it runs exactly once
  per call of the program (per iteration in a loop), in program order.

The primitives are defined in ``ember.lax.callbacks``. Both run on the reference
interpreter (``ember.backends.reference.callbacks``); the
CPU backend runs them as fallback steps, and a loop whose body holds one runs on the
reference as a whole. Callbacks receive ``ember.Array`` values, as JAX's receive
``jax.Array`` ones; leaves of the arguments that are not arrays (strings, ``None``,
other Python objects) are passed through unchanged.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from ember import dtypes, errors, lax, tree_util
from ember.core.avals import ShapedArray
from ember.core.ir import Eqn, Verbatim, name_first, print_rules
from ember.core.trace import Tracer, is_tracing
from ember.lax.callbacks import FlatCallback, debug_callback_p, io_callback_p, pure_callback_p
from ember.transforms.batching import BatchDim, batching_rules, move_batch_axis
from ember.transforms.jvp import jvp_rules

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all", "legacy_vectorized")


# --- arguments: array leaves travel through the program, the others are closed over -------------
def is_array_leaf(x: Any) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float, complex)) or hasattr(x, "_value")


def flatten_callback(callback: Callable, args: tuple, kwargs: dict) -> tuple[FlatCallback, list]:
    """The callback as a function of the array leaves of its arguments, and those leaves."""
    leaves, tree = tree_util.flatten_for_trace((args, kwargs))  # (a key array travels as its data)
    is_array = [is_array_leaf(x) for x in leaves]
    static_leaves = [x for x, dynamic in zip(leaves, is_array) if not dynamic]
    return FlatCallback(callback, tree, is_array, static_leaves), [x for x, dynamic in zip(leaves, is_array) if dynamic]


def _check_callable(api: str, callback: Any) -> None:
    if not callable(callback):
        raise TypeError(f"first argument to {api} must be callable, but got an object of type "
                        f"{type(callback).__name__}")


# --- debug_callback: no outputs, an effect --------------------------------------------------------
def debug_callback(callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Call ``callback(*args, **kwargs)`` when the program runs (see ``ember.debug.callback``)."""
    stage_debug_callback(callback, args, kwargs)


def stage_debug_callback(callback: Callable[..., Any], args: tuple, kwargs: dict, ordered: bool = False,
                         partitioned: bool = False) -> None:
    """``debug_callback``, remembering how it was asked to run (``ordered``, ``partitioned``): ember
    runs every callback in program order on one device, but prints them as JAX does."""
    _check_callable("ember.debug.callback", callback)
    flat, arrays = flatten_callback(callback, args, kwargs)
    flat.ordered, flat.partitioned = bool(ordered), bool(partitioned)
    flat.runtime_errors = is_tracing()  # (eagerly, JAX's callback raises its exceptions unchanged)
    debug_callback_p.bind(*arrays, callback=flat)


def _debug_callback_jvp(primals: tuple, tangents: tuple, *, callback: FlatCallback) -> tuple[list, list]:
    """The callback sees the primal values; tangents pass nothing (and there are no outputs)."""
    debug_callback_p.bind(*primals, callback=callback)
    return [], []


def _debug_callback_batch(axis_size: int, values: Sequence[Any], dims: Sequence[BatchDim], *,
                          callback: FlatCallback) -> tuple[list, list]:
    """As in JAX: one call per example, in order, each seeing that example's values."""
    for i in range(axis_size):
        example = [x if d is None else lax.index_in_dim(x, i, d, keepdims=False) for x, d in zip(values, dims)]
        debug_callback_p.bind(*example, callback=callback)
    return [], []


jvp_rules[debug_callback_p] = _debug_callback_jvp
batching_rules[debug_callback_p] = _debug_callback_batch


# --- pure_callback: declared results, no effect ---------------------------------------------------
def _result_aval(spec: Any) -> ShapedArray:
    shape, dtype = getattr(spec, "shape", None), getattr(spec, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"pure_callback: result_shape_dtypes must be a pytree of objects with .shape and .dtype "
                        f"(e.g. ember.ShapeDtypeStruct), got {spec!r}")
    dt = np.dtype(dtype)
    if dtypes.canonicalize_dtype(dt) != dt:
        raise ValueError("result_shape_dtypes cannot specify 64-bit types when `jax_enable_x64` is disabled "
                         f"(got {dt.name}); declare the 32-bit type, or turn on ember.config.enable_x64")
    return ShapedArray(tuple(int(d) for d in shape), dt, False)


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Call the pure host function ``callback(*args, **kwargs)`` when the program runs.

    It must return arrays of the shapes and dtypes of ``result_shape_dtypes`` (a pytree of
    ``ember.ShapeDtypeStruct`` or arrays); a mismatch is a RuntimeError naming both. Being
    pure, the call may be skipped when its results are unused, or made at compile time when
    its operands are constants. Under ``vmap`` ``vmap_method`` decides how it is called:
    ``"sequential"`` (one call per example, in a loop), ``"sequential_unrolled"`` (the same,
    unrolled), ``"expand_dims"`` (one call; unbatched operands get a leading axis of size 1,
    batched ones have the batch at axis 0, results must have it too) and ``"broadcast_all"``
    (as ``expand_dims``, with every operand broadcast to the batch size). Without a
    ``vmap_method``, vmap calls it sequentially and warns (JAX's deprecated default). It cannot
    be differentiated: give the function a derivative with ``ember.custom_jvp``.
    """
    _check_callable("ember.pure_callback", callback)
    if vmap_method not in VMAP_METHODS + (None,):
        raise ValueError(f"vmap_method must be one of the allowed methods {list(VMAP_METHODS) + [None]}, but got: "
                         f"{vmap_method!r}")
    specs, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    flat, arrays = flatten_callback(callback, args, kwargs)
    outs = pure_callback_p.bind(*arrays, callback=flat, result_avals=tuple(map(_result_aval, specs)),
                                vmap_method=vmap_method)
    return tree_util.tree_unflatten(out_tree, outs)


def _pure_callback_jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
    raise ValueError("Pure callbacks do not support JVP. Please use `ember.custom_jvp` to use callbacks while "
                     "taking gradients.")


def _pure_callback_batch(axis_size: int, values: Sequence[Any], dims: Sequence[BatchDim], *,
                         callback: FlatCallback, result_avals: tuple[ShapedArray, ...],
                         vmap_method: str | None) -> tuple[list, list]:
    """JAX's rules for each ``vmap_method``; every batched result is at axis 0."""
    if vmap_method is None:
        warnings.warn("The default behavior of pure_callback under vmap will soon change: pass "
                      "vmap_method='sequential' to keep calling the callback once per example (the current "
                      "default), or 'expand_dims' / 'broadcast_all' to call it once with the whole batch. "
                      f"The call is at {errors.user_location()}", DeprecationWarning, stacklevel=2)
        vmap_method = "sequential"
    moved = [x if d is None else move_batch_axis(x, d, axis_size) for x, d in zip(values, dims)]
    bind = functools.partial(pure_callback_p.bind, callback=callback, vmap_method=vmap_method)
    if vmap_method in ("expand_dims", "broadcast_all", "legacy_vectorized"):
        # (legacy_vectorized, JAX's old vectorized=True: unbatched operands are passed as they are)
        size = axis_size if vmap_method == "broadcast_all" else 1
        operands = [lax.broadcast(x, (size,)) if d is None and vmap_method != "legacy_vectorized" else x
                    for x, d in zip(moved, dims)]
        batched = tuple(a._replace(shape=(axis_size,) + a.shape) for a in result_avals)
        outs = bind(*operands, result_avals=batched)
    elif vmap_method == "sequential":
        def one_example(example: list) -> list:
            examples = iter(example)
            return bind(*[x if d is None else next(examples) for x, d in zip(moved, dims)], result_avals=result_avals)

        outs = lax.map(one_example, [x for x, d in zip(moved, dims) if d is not None])
    else:  # sequential_unrolled
        per_example = [bind(*[x if d is None else lax.index_in_dim(x, i, 0, keepdims=False)
                              for x, d in zip(moved, dims)], result_avals=result_avals) for i in range(axis_size)]
        outs = [lax.concatenate([lax.expand_dims(y, (0,)) for y in ys], 0) for ys in zip(*per_example)]
    return list(outs), [0] * len(result_avals)


jvp_rules[pure_callback_p] = _pure_callback_jvp
batching_rules[pure_callback_p] = _pure_callback_batch


# --- io_callback: declared results, an effect -------------------------------------------------------
def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any, sharding: Any = None,
                ordered: bool = False, **kwargs: Any) -> Any:
    """Call the host function ``callback(*args, **kwargs)`` when the program runs, for its
    effects and its results (arrays of the types of ``result_shape_dtypes``, checked as for
    ``pure_callback``). It is never skipped, repeated or merged with another call, and calls
    keep program order (``ordered`` is accepted: ember runs every program in order). Under
    ``vmap`` an unordered one is called once per example, in order; an ordered one cannot be
    batched, and none can be differentiated, as in JAX."""
    _check_callable("ember.io_callback", callback)
    specs, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    flat, arrays = flatten_callback(callback, args, kwargs)
    outs = io_callback_p.bind(*arrays, callback=flat, result_avals=tuple(map(_result_aval, specs)),
                              ordered=bool(ordered))
    return tree_util.tree_unflatten(out_tree, outs)


def _io_callback_jvp(primals: tuple, tangents: tuple, **params: Any) -> tuple:
    raise ValueError("IO callbacks do not support JVP.")


def _io_callback_batch(axis_size: int, values: Sequence[Any], dims: Sequence[BatchDim], *,
                       callback: FlatCallback, result_avals: tuple[ShapedArray, ...], ordered: bool) -> tuple:
    if ordered:
        raise ValueError("Cannot `vmap` ordered IO callback.")
    moved = [x if d is None else move_batch_axis(x, d, axis_size) for x, d in zip(values, dims)]

    def one_example(example: list) -> list:
        examples = iter(example)
        return io_callback_p.bind(*[x if d is None else next(examples) for x, d in zip(moved, dims)],
                                  callback=callback, result_avals=result_avals, ordered=False)
    return list(lax.map(one_example, [x for x, d in zip(moved, dims) if d is not None])), [0] * len(result_avals)


jvp_rules[io_callback_p] = _io_callback_jvp
batching_rules[io_callback_p] = _io_callback_batch


# --- printing: the parameters as JAX 0.10 shows them ------------------------------------------------
def shaped_array_repr(a: ShapedArray) -> str:
    """JAX's ``repr`` of a type: ``ShapedArray(float32[3])``, ``ShapedArray(int32[], weak_type=True)``."""
    return f"ShapedArray({a.dtype.name}[{','.join(map(str, a.shape))}]{', weak_type=True' if a.weak_type else ''})"


def _callback_params(eqn: Eqn) -> dict:
    params = dict(eqn.params)
    flat = params["callback"]
    params["callback"] = Verbatim(f"_FlatCallback(callback_func={flat.callback!r}, "
                                  f"in_tree={tree_util.treedef_repr(flat._tree)})")
    avals = [shaped_array_repr(a) for a in params["result_avals"]]
    params["result_avals"] = Verbatim(f"({avals[0]},)" if len(avals) == 1 else f"({', '.join(avals)})")
    params["sharding"] = None
    return name_first(params)


def _debug_callback_params(eqn: Eqn) -> dict:
    flat = eqn.params["callback"]
    return {"callback": Verbatim("<function debug_callback.<locals>._debug_callback.<locals>._flat_callback "
                                 "at 0xXXXXXXXXXXXX>"),
            "effect": Verbatim("OrderedDebug" if getattr(flat, "ordered", False) else "Debug"),
            "partitioned": getattr(flat, "partitioned", False)}


print_rules[pure_callback_p] = print_rules[io_callback_p] = _callback_params
print_rules[debug_callback_p] = _debug_callback_params
