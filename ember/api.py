"""``jit`` and ``make_jaxpr``: signatures (static and donated arguments), pytrees, refs, and the
messages about them; the hit path is ``ember.runtime.dispatch``'s, the cache ``runtime.cache``'s.

One call, end to end::

    the hit path (plain calls whose argument types ran before): one fast runner call, or
    flatten args -> split static / dynamic -> abstract values
      -> cache lookup on (treedef, avals, static values, codegen config)
           hit : run the executable
           miss: trace -> Jaxpr -> check -> compile (backend) -> store -> run
      -> delete the donated Arrays (their buffers may now hold outputs)
"""
from __future__ import annotations

import functools
import inspect
import threading
import time
import weakref
from typing import Any, Callable, Iterable, Iterator, NoReturn, Sequence

import numpy as np

from ember import dtypes, errors, tree_util
from ember.autograph import (
    convert as convert_control_flow,
    converting as converting_scope,
    start_recording,
    stop_recording,
)
from ember.backends.protocols import Executable, InvalidOutputValues
from ember.config import config
from ember.core import sharding
from ember.core.array import Array, ShapeDtypeStruct
from ember.core.avals import ShapedArray, aval_of_value
from ember.core.calls import CallName, jit_p
from ember.core.ir import ClosedJaxpr
from ember.core.staging import DebugInfo, consts_as_inputs, trace_to_jaxpr
from ember.core.trace import EvalTrace, Tracer, current_trace, is_tracing
from ember.core.verify import check_jaxpr
from ember.lax import refs as _refs
from ember.lax.elementwise import convert_element_type
from ember.lax.parallel import axis_env_key
from ember.runtime.cache import (
    CacheInfo,
    CacheKey,
    Entry,
    FunctionCache,
    cache_for,
    explain_miss,
    logger,
)
from ember.runtime.dispatch import PYTHON_SCALARS, Dispatcher, positional_structure
from ember.runtime.stages import Lowered, Traced
from ember.transforms.partial_eval import dce_jaxpr
from ember.transforms.programs import eval_closed_by_binding


# --- static and donated arguments -----------------------------------------------------------
class _Signature:
    """Maps between positional and keyword arguments so static and donated args can be named
    either way."""

    def __init__(self, fun: Callable, static_argnums: Sequence[int], static_argnames: Sequence[str],
                 donate_argnums: Sequence[int] = (), donate_argnames: Sequence[str] = ()) -> None:
        self.fun_name = errors.function_name(fun)
        try:
            self.sig = inspect.signature(fun)
        except (TypeError, ValueError):
            self.sig = None
        params = list(self.sig.parameters.values()) if self.sig else []
        self.positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.static_nums, self.static_names = self._resolve(params, "static", static_argnums, static_argnames)
        self.donate_nums, self.donate_names = self._resolve(params, "donate", donate_argnums, donate_argnames)
        # No static and no donated argument: calls need no splitting (the dispatch fast path).
        self.plain = not (self.static_nums or self.static_names or self.donate_nums or self.donate_names)
        both = sorted(self.static_names & self.donate_names) or sorted(self.static_nums & self.donate_nums)
        if both:
            raise ValueError(f"jit({self.fun_name}): argument {both[0]!r} is both static and donated. Static "
                             "arguments are Python values, not buffers, so they cannot be donated: remove it "
                             "from donate_argnums/donate_argnames or from static_argnums/static_argnames.")

    def _resolve(self, params: list, option: str, argnums: Sequence[int],
                 argnames: Sequence[str]) -> tuple[set[int], set[str]]:
        """The positions and names of the parameters that ``{option}_argnums`` and
        ``{option}_argnames`` select: each positional parameter by both (as in JAX)."""
        positional = self.positional
        names = {p.name for p in params if p.kind != p.VAR_POSITIONAL}
        has_var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
        for name in argnames:
            if self.sig is not None and name not in names and not has_var_kw:
                raise ValueError(f"jit({self.fun_name}): {option}_argnames names {name!r}, which is not a "
                                 f"parameter of {self.fun_name}{self.sig}. Parameters: {sorted(names)}.")
        nums = set()
        for i in argnums:
            if not isinstance(i, int):
                raise TypeError(f"{option}_argnums must be ints, got {i!r}")
            if self.sig is not None and not any(p.kind == p.VAR_POSITIONAL for p in params):
                if not -len(positional) <= i < len(positional):
                    raise ValueError(f"jit({self.fun_name}): {option}_argnums contains {i}, but "
                                     f"{self.fun_name} takes {len(positional)} positional arguments.")
            nums.add(i % len(positional) if i < 0 and positional else i)
        return (nums | {positional.index(n) for n in argnames if n in positional},
                set(argnames) | {positional[i] for i in nums if i < len(positional)})

    def split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple]:
        """(dynamic args, dynamic kwargs, static key). Positional static args are replaced by None."""
        if not self.static_nums and not self.static_names:
            return args, kwargs, ()
        statics = []
        dyn_args = list(args)
        for i in sorted(self.static_nums):
            if i < len(args):
                statics.append(("#", i, args[i]))
                dyn_args[i] = None
        dyn_kwargs = {}
        for k in sorted(kwargs):
            if k in self.static_names:
                statics.append(("=", k, kwargs[k]))
            else:
                dyn_kwargs[k] = kwargs[k]
        for _, where, value in statics:
            try:
                hash(value)
            except TypeError:
                name = self.positional[where] if isinstance(where, int) and where < len(self.positional) else where
                raise ValueError(
                    f"Non-hashable static argument {name!r} of {self.fun_name}: a value of type "
                    f"{type(value).__name__} cannot be a cache key. Pass a hashable value (a tuple instead "
                    f"of a list, a Python number instead of an array), or make the argument dynamic by "
                    f"removing it from static_argnums/static_argnames.") from None
        return tuple(dyn_args), dyn_kwargs, tuple(statics)

    def _dynamic_arguments(self, args: tuple, kwargs: dict) -> Iterator[tuple[str, Any, bool]]:
        """(name, value, whether donated) of each dynamic argument, in flattening order."""
        for i, a in enumerate(args):
            if i not in self.static_nums:
                yield self.positional[i] if i < len(self.positional) else f"args[{i}]", a, i in self.donate_nums
        for k in sorted(kwargs):
            if k not in self.static_names:
                yield k, kwargs[k], k in self.donate_names

    def arg_names(self, args: tuple, kwargs: dict) -> list[str]:
        """A readable name for every flat dynamic leaf, for error messages."""
        return [name + tree_util.keystr(p) for name, a, _ in self._dynamic_arguments(args, kwargs)
                for p, _ in tree_util.tree_flatten_with_path(a)[0]]

    def donated_leaves(self, args: tuple, kwargs: dict) -> frozenset[int]:
        """The flat positions of the dynamic leaves of donated arguments (all leaves of a pytree)."""
        donated = [d for _, a, d in self._dynamic_arguments(args, kwargs) for _ in tree_util.tree_leaves(a)]
        return frozenset(i for i, d in enumerate(donated) if d)


_LEAF = tree_util.tree_structure(0)


def _merge_static(args: tuple, kwargs: dict, statics: tuple) -> tuple[tuple, dict]:
    args = list(args)
    kwargs = dict(kwargs)
    for kind, where, value in statics:
        if kind == "#":
            args[where] = value
        else:
            kwargs[where] = value
    return tuple(args), kwargs


def _read_inputs(closed: ClosedJaxpr) -> frozenset[int]:
    """The positions of the inputs the program's outputs and effects read: without ``keep_unused``,
    as in JAX, the others are not the program's arguments, so donating them deletes nothing."""
    _, used = dce_jaxpr(closed.jaxpr, [True] * len(closed.jaxpr.outvars))
    return frozenset(i for i, u in enumerate(used) if u)


def _refuse_aliased_donation(leaves: Sequence[Any], donated: frozenset[int]) -> None:
    """An Array donated (usably) and also passed again in the same call is refused before anything
    runs, with the error JAX's runtime gives: the program could overwrite its buffer while another
    input still reads it. Nothing is deleted. ``donated``: the donations the program uses."""
    if not donated:
        return
    first: dict[int, int] = {}
    for j, x in enumerate(leaves):
        if type(x) is not Array:
            continue
        i = first.setdefault(id(x), j)
        if i == j or not (i in donated or j in donated):
            continue
        if i in donated and j in donated:
            what, example = "Attempt to donate the same buffer twice in", "f(donate(a), donate(a))"
        elif i in donated:
            what, example = "Attempt to use a buffer that was previously donated in the same call to", "f(donate(a), a)"
        else:
            what, example = "Attempt to donate a buffer which is also used by the same call to", "f(a, donate(a))"
        raise errors.JaxRuntimeError(
            f"INVALID_ARGUMENT: {what} Execute() (flattened argument {j}, replica 0, "
            f"partition 0, first use: {i}). Toy example for this bug: `{example}`. The same Array is passed "
            "as both arguments and one of them is donated, so the program would overwrite a buffer that it "
            "also reads; nothing was run or deleted. Pass a copy (`x.copy()`) as one of them, or do not donate it.")


def _check_leaf(x: Any, where: str) -> Any:
    if isinstance(x, (Tracer, np.ndarray, np.generic, bool, int, float, complex)) or hasattr(x, "_value"):
        return x
    raise TypeError(f"{where}: a value of type {type(x).__name__} is not an array. ember traces arrays, "
                    "Python scalars and pytrees (tuples, lists, dicts, None, registered classes) of them; "
                    "pass other values as static arguments (static_argnums / static_argnames).")


class JitFunction(Dispatcher):
    """The result of ``jit(f)``: call it like ``f``; it traces once per signature. A call that
    ran before takes the hit path (``Dispatcher.__call__``); the others come to ``_call``."""

    def __init__(self, fun: Callable, static_argnums: Sequence[int], static_argnames: Sequence[str],
                 donate_argnums: Sequence[int], donate_argnames: Sequence[str], keep_unused: bool,
                 inline: bool, in_shardings: Any = None, out_shardings: Any = None,
                 autograph: bool | None = None) -> None:
        self.fun = fun
        self.autograph = autograph  # (None: as config.autograph says)
        self.in_shardings, self.out_shardings = in_shardings, out_shardings
        self._sig = _Signature(fun, static_argnums, static_argnames, donate_argnums, donate_argnames)
        self.donate_argnums = tuple(sorted(self._sig.donate_nums))
        self.donate_argnames = tuple(sorted(self._sig.donate_names))
        self.inline, self.keep_unused = inline, keep_unused
        options = (tuple(sorted(self._sig.static_nums)), tuple(sorted(self._sig.static_names)),
                   self.donate_argnums, self.donate_argnames)
        if autograph is not None:  # (its own cache: converted and unconverted programs differ)
            options += (("autograph", bool(autograph)),)
        self._cache = cache_for(fun, options)
        self._traced = False
        # (shardings: every call takes the general path, which partitions and places: ember.partition;
        # trees of None, as flax.nnx passes, give none: JAX's "unspecified")
        self._sharded = _names_a_sharding(in_shardings) or _names_a_sharding(out_shardings)
        self._fast = self._cache.fast if not self._sharded else {}  # (the hit path's table: Dispatcher)
        self._sharded_programs: dict = {}
        errors.wraps(fun)(self)

    # Methods: ``jit`` on a method accesses the bound instance like a function would.
    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        """A call that the native dispatcher did not take: flatten, look up or trace, run."""
        if self._sharded and not is_tracing() and not config.disable_jit:
            return _sharded_call[0](self, args, kwargs)
        try:
            return self.call_whole(args, kwargs)
        except InvalidOutputValues as e:
            _rerun_deoptimized(e, self.fun, args, kwargs)

    def call_whole(self, args: tuple, kwargs: dict) -> Any:
        """The call as one program on whole arrays (no partitioning)."""
        if config.disable_jit and not is_tracing():
            return self.fun(*args, **kwargs)
        if not kwargs and self._sig.plain and all(type(x) is Array for x in args):
            # The commonest call, f(array, ...): no pytree to flatten.
            leaves, in_tree, statics, all_arrays = args, positional_structure(len(args)), (), True
        else:
            dyn_args, dyn_kwargs, statics = self._sig.split(args, kwargs)
            # A cache key (equal to the sorted structure; a trace sorts it before unflattening).
            leaves, in_tree = tree_util.flatten_for_key((dyn_args, dyn_kwargs))
            all_arrays = all(type(x) is Array for x in leaves)
            if not all_arrays and tree_util.has_float0_leaf(leaves):  # (no data: structure, as for outputs)
                leaves, in_tree = tree_util.flatten_for_key(tree_util.float0_as_structure((dyn_args, dyn_kwargs)))
        # The hit path: every leaf an Array (no tracer: nothing is being traced).
        if all_arrays and type(current_trace()) is EvalTrace:
            key = (in_tree, tuple([x.aval for x in leaves]), statics, config._codegen_key)
            entry = self._cache.get(key)
            if entry is None:
                entry = self._lookup(leaves, in_tree, statics, args, kwargs)
            elif entry.fast_key is None and entry.executable is not None and not kwargs and self._sig.plain \
                    and type(entry) is not _RefEntry:
                self._enable_fast_path(entry, key, leaves, in_tree)  # (at the first hit, not the first call)
            if type(entry) is _RefEntry:  # (a program that reads or writes refs: never the fast path)
                return self._call_with_refs(entry, leaves, args, kwargs)
            executable = entry.executable or entry.get_executable(self._cache, self._sig.fun_name)
            outs = self._call_donating(executable, leaves, entry.donated) if entry.donated else executable(*leaves)
            if type(entry) is _PlacingEntry:
                outs = entry.place(outs)
            return outs[0] if entry.out_tree == _LEAF else tree_util.tree_unflatten(entry.out_tree, outs)
        entry = self._lookup(leaves, in_tree, statics, args, kwargs)
        if type(entry) is _RefEntry:
            return self._call_with_refs(entry, leaves, args, kwargs)
        # An executable already: a hit (the first call compiles it), where plain calls with Python
        # scalars get a fast path, as calls on Arrays do.
        if entry.executable is not None and entry.fast_key is None and not kwargs and self._sig.plain \
                and not is_tracing() and all(type(x) in _FAST_LEAVES or isinstance(x, np.generic) for x in leaves):
            key = (in_tree, tuple(entry.closed.in_avals), statics, config.codegen_key())
            self._enable_fast_path(entry, key, leaves, in_tree)
        if is_tracing() or any(isinstance(x, Tracer) for x in leaves):
            outs = self._stage_call(entry.closed, leaves, entry.donated)
        else:  # donation applies to top-level calls only (inside a trace there are no buffers)
            executable = entry.get_executable(self._cache, self._sig.fun_name)
            try:
                values = _scalars_as_arrays(leaves, executable)
            except OverflowError:  # a Python int that its traced type cannot hold: JAX's words
                i = next(i for i, x in enumerate(leaves) if type(x) is int and _overflows(x, executable.in_avals[i]))
                raise OverflowError(
                    "An overflow was encountered while parsing an argument to a jitted computation, whose argument "
                    f"path is {self._sig.arg_names(args, kwargs)[i]}. Got {type(leaves[i])} with value {leaves[i]}"
                ) from None
            outs = self._call_donating(executable, values, entry.donated)
            if type(entry) is _PlacingEntry:
                outs = entry.place(outs)
        return tree_util.tree_unflatten(entry.out_tree, outs)

    def _call_with_refs(self, entry: "_RefEntry", leaves: Sequence[Any], args: tuple, kwargs: dict) -> Any:
        """Run a program that uses refs: their current values go in as hidden inputs after the
        arguments, and the refs it writes get its hidden outputs (at the top level, or in the
        enclosing trace, where these reads and writes are tracked in turn)."""
        info = entry.refs
        passed: dict[int, int] = {}
        for i in info.arg_positions:
            r = leaves[i]
            if not _refs.is_ref(r):
                raise TypeError(f"jit({self._sig.fun_name}): argument {self._sig.arg_names(args, kwargs)[i]} "
                                f"was traced as a Ref, but is now a {type(r).__name__}")
            if id(r) in passed:
                names = self._sig.arg_names(args, kwargs)
                raise ValueError(
                    f"only one reference to a mutable array may be passed as an argument to a function, but when "
                    f"tracing {_fun_location(self.fun)} for jit the mutable array reference of type {r.aval} "
                    f"appeared at both {names[passed[id(r)]]} and {names[i]}.")
            passed[id(r)] = i
        for r in info.lifted:
            if id(r) in passed:
                name = self._sig.arg_names(args, kwargs)[passed[id(r)]]
                raise ValueError(
                    f"when tracing {_fun_location(self.fun)} for jit, a mutable array reference of type {r.aval} "
                    f"was both closed over and passed as the argument {name}")
        values = list(leaves)
        for i in info.arg_positions:
            values[i] = _refs.held_value(leaves[i])
        values += _refs.read_values(info.lifted)
        closed = entry.closed
        in_avals = closed.in_avals
        for i in (*info.arg_positions, *range(len(leaves), len(values))):
            if aval_of_value(values[i]) != in_avals[i]:  # (a ref's value is weakly typed at one call, not another)
                values[i] = convert_element_type(values[i], in_avals[i].dtype, in_avals[i].weak_type)
        if is_tracing() or any(isinstance(x, Tracer) for x in values):
            outs = self._stage_call(closed, values, entry.donated)
        else:
            executable = entry.get_executable(self._cache, self._sig.fun_name)
            values = _scalars_as_arrays(values, executable)
            outs = self._call_donating(executable, values, entry.donated) if entry.donated else executable(*values)
        n = len(outs) - len(info.writes)
        for (is_arg, k), value in zip(info.writes, outs[n:]):  # (weakly typed as the program left it)
            _refs.write_value(leaves[k] if is_arg else info.lifted[k], value, keep_type=aval_of_value(value).weak_type)
        return tree_util.tree_unflatten(entry.out_tree, list(outs[:n]))

    def _stage_call(self, closed: ClosedJaxpr, values: Sequence[Any], donated: frozenset[int]) -> list:
        """The call inside a trace: one ``jit`` equation, named after the function, with the
        donation asked for (printed as JAX prints it); with ``inline=True``, the program's own
        equations, as JAX inlines it."""
        if self.inline:
            return eval_closed_by_binding(closed, *values)
        donated_invars = (False,) * len(closed.consts) + tuple(i in donated for i in range(len(values)))
        name = CallName(self._sig.fun_name, donated_invars, self.keep_unused)
        return jit_p.bind(*closed.consts, *values, jaxpr=consts_as_inputs([closed])[0][0], name=name)

    def _call_donating(self, executable: Executable, leaves: Sequence[Any], donated: frozenset[int]) -> list:
        """Run, then delete the donated Arrays: the outputs may have taken over their buffers."""
        _refuse_aliased_donation(leaves, donated - executable.kept_donations)
        try:
            outs = executable(*leaves)
        except BaseException:
            # Unless the call was refused for an already deleted argument, it may have written.
            if not any(type(x) is Array and x.is_deleted() for x in leaves):
                self._delete_donated(leaves, donated)
            raise
        self._delete_donated(leaves, donated - executable.kept_donations)  # (unusable ones stay, as in JAX)
        return outs

    def _delete_donated(self, leaves: list, donated: frozenset[int]) -> None:
        reason = (f" It was donated to `{self._sig.fun_name}` (jit donate_argnums/donate_argnames): "
                  "use the function's outputs instead.")
        for i in donated:
            if type(leaves[i]) is Array:
                leaves[i]._mark_deleted(reason)

    def _lookup(self, leaves: list, in_tree: Any, statics: tuple, args: tuple, kwargs: dict,
                avals: tuple | None = None) -> Entry:
        try:
            avals = tuple(map(aval_of_value, leaves)) if avals is None else avals
        except TypeError:
            names = self._sig.arg_names(args, kwargs)
            for name, x in zip(names, leaves):
                _check_leaf(x, f"argument `{name}` of {self._sig.fun_name}")
            raise
        # (+ the bound axis names: collectives read their sizes when traced)
        key = (in_tree, avals, statics, config.codegen_key()) + axis_env_key()
        cache = self._cache
        entry, claim = cache.lookup_or_claim(key)
        if entry is not None:
            return entry
        try:
            arg_names = self._sig.arg_names(args, kwargs)
            if config.explain_cache_misses:
                logger.warning("ember: cache miss for %s: %s", self._sig.fun_name,
                               explain_miss(CacheKey(*key), [CacheKey(*k) for k in list(cache.entries)],
                                            arg_names, self._sig.positional))
            entry = self._trace(avals, in_tree, statics, arg_names, self._sig.donated_leaves(args, kwargs),
                                _python_values(leaves))
        except BaseException:
            cache.store(key, None, claim)
            raise
        # A program closing over another trace's values is only valid inside that trace.
        cacheable = not any(isinstance(c, Tracer) for c in entry.closed.consts)
        cache.store(key, entry if cacheable else None, claim)
        self._warn_if_retracing_often(key, arg_names)
        return entry

    def _trace(self, avals: tuple, in_tree: Any, statics: tuple, arg_names: list[str],
               donated: frozenset[int], python_values: Sequence[bool] | None = None) -> Entry:
        if not self._traced:  # (a wrapper's first trace: the churn warning counts wrappers that trace)
            self._traced = True
            _note_new_wrapper(self.fun)
        start = time.perf_counter()
        closed, out_tree, ref_info = self._trace_program(avals, in_tree, statics, arg_names, python_values)
        if config.log_compiles:
            logger.warning("ember: traced %s for %s in %.1f ms", self._sig.fun_name, _format_avals(avals),
                           (time.perf_counter() - start) * 1e3)
        if donated and not self.keep_unused:
            donated = donated & _read_inputs(closed)
        if ref_info is not None:
            return _RefEntry(closed, out_tree, donated, ref_info)
        placed = closed.jaxpr.facts.get("out_shardings")
        return Entry(closed, out_tree, donated) if placed is None else _PlacingEntry(closed, out_tree, donated, placed)

    def _warn_if_retracing_often(self, key: tuple, arg_names: list[str]) -> None:
        cache = self._cache
        threshold = int(config.retrace_warning_threshold)
        if not threshold or cache.traces < threshold or cache.warned_about_retraces:
            return
        cache.warned_about_retraces = True
        others = [CacheKey(*k) for k in cache.entries if k != key]
        # (logged, as JAX reports cache misses: a Python warning would fail the tests of libraries that turn
        # warnings into errors)
        logger.warning(
            f"ember.jit: `{self._sig.fun_name}` has been traced {cache.traces} times. The latest retrace: "
            f"{explain_miss(CacheKey(*key), others, arg_names, self._sig.positional)}. Each new shape, dtype or "
            "static value traces and compiles again. Fix: keep shapes fixed (pad inputs to a few sizes), pass values "
            "that vary as array arguments instead of static ones, and create the jit wrapper once, outside loops. "
            "Set ember.config.update('explain_cache_misses', True) to see every miss.")

    def trace_program(self, avals: Sequence[ShapedArray], in_tree: Any, statics: tuple,
                      arg_names: Sequence[str], python_values: Sequence[bool] | None = None
                      ) -> tuple[ClosedJaxpr, Any]:
        """The program of ``fun`` for these flat abstract arguments, and its output tree.
        (A program that uses refs has them as hidden inputs and outputs: ``_trace_program``.)"""
        closed, out_tree, ref_info = self._trace_program(avals, in_tree, statics, arg_names, python_values)
        if ref_info is not None:
            raise NotImplementedError(
                f"{self._sig.fun_name} reads or writes a Ref (jax.new_ref); ember runs such functions through "
                "jit's call and make_jaxpr, but not through this API (AOT trace/lower, in_shardings).")
        return closed, out_tree

    def _trace_program(self, avals: Sequence[Any], in_tree: Any, statics: tuple, arg_names: Sequence[str],
                       python_values: Sequence[bool] | None = None) -> tuple[ClosedJaxpr, Any, Any]:
        """``trace_program``, and the refs' part (None when the function uses none): refs passed as
        arguments (``AbstractRef`` avals) and refs it closes over are discharged (``ember.lax.refs``)."""
        self._cache.traces += 1
        out_tree_box = []
        in_tree = tree_util.sorted_treedef(in_tree)  # (the function sees dicts in sorted key order, as in JAX)
        ref_positions = [i for i, a in enumerate(avals) if type(a) is _refs.AbstractRef]
        if ref_positions:
            avals = [a.inner_aval if type(a) is _refs.AbstractRef else a for a in avals]
        ref_box = []

        def flat_fun(*flat_args: Any) -> list:
            scope = _refs.Scope("jit", self._sig.fun_name, current_trace(), lifts=True)
            try:
                with _refs.open_scope(scope):
                    if ref_positions:
                        flat_args = list(flat_args)
                        for i in ref_positions:
                            flat_args[i] = _refs.param_ref(flat_args[i], scope, arg_names[i])
                    params = [flat_args[i] for i in ref_positions]
                    dyn_args, dyn_kwargs = tree_util.tree_unflatten(in_tree, flat_args)
                    call_args, call_kwargs = _merge_static(dyn_args, dyn_kwargs, statics)
                    out = fun(*call_args, **call_kwargs)
                    # (float0 results hold no data: the structure rebuilds them, as JAX returns them)
                    out_leaves, out_tree = tree_util.flatten_for_trace(tree_util.float0_as_structure(out))
                    for leaf in out_leaves:
                        if _refs.is_ref(leaf):
                            raise _returned_ref_error(self.fun, leaf, scope)
                        _check_leaf(leaf, f"the output of {self._sig.fun_name}")
                    out_tree_box.append(out_tree)
                    if not ref_positions and not scope.lifted:
                        return out_leaves
                    lifted = scope.lifted_refs()
                    writes, finals = [], []
                    for i, r in zip(ref_positions, params):
                        if id(r) in scope.written:
                            writes.append((True, i))
                            finals.append(_refs.held_value(r))
                    for k, r in enumerate(lifted):
                        if id(r) in scope.written:
                            writes.append((False, k))
                            finals.append(_refs.held_value(r))
                    ref_box.append(_RefInfo(tuple(ref_positions), tuple(lifted), tuple(writes)))
                    return out_leaves + finals
            finally:
                scope.restore()

        debug = DebugInfo("jit", self._sig.fun_name, arg_names, python_values=python_values)
        converting = self.autograph if self.autograph is not None else config.autograph
        fun = convert_control_flow(self.fun) if converting else self.fun
        with converting_scope(converting):  # (and what grad, vmap, ... trace inside: ``jit(grad(f))``'s f)
            if converting and config.log_compiles:
                events = start_recording()
                try:
                    closed = trace_to_jaxpr(flat_fun, avals, debug)
                finally:
                    stop_recording()
                logger.warning("ember: autograph converted %s: %s", self._sig.fun_name,
                               "; ".join(dict.fromkeys(events)) or "no statement had a traced condition")
            else:
                closed = trace_to_jaxpr(flat_fun, avals, debug)
        if config.check_ir:
            check_jaxpr(closed)
        return closed, out_tree_box[0], (ref_box[0] if ref_box else None)

    def trace(self, *args: Any, **kwargs: Any) -> Traced:
        """Trace for these arguments (arrays, or ShapeDtypeStructs) without compiling or running,
        as ``jax.jit(f).trace``: the result has ``.jaxpr``, ``.out_info`` and ``.lower()``."""
        dyn_args, dyn_kwargs, statics = self._sig.split(args, kwargs)
        structured = _with_extended_structs((dyn_args, dyn_kwargs))
        leaves, key_tree = tree_util.flatten_for_key(structured)
        # (the function's cache: a later call, or lower, with these types reuses this trace, as in JAX)
        entry = self._lookup(leaves, key_tree, statics, args, kwargs, tuple(_abstractify(x, self.fun) for x in leaves))
        in_tree = tree_util.flatten_for_trace(structured)[1]
        if type(entry) is _RefEntry:
            raise NotImplementedError(
                f"{self._sig.fun_name} reads or writes a Ref (jax.new_ref); ember runs such functions through "
                "jit's call and make_jaxpr, but not through this API (AOT trace/lower, in_shardings).")
        return Traced(self, entry.closed, in_tree, entry.out_tree, statics, self._sig.donated_leaves(args, kwargs),
                      _device_placement[0](self, args, kwargs, entry.out_tree))

    @errors.api_boundary
    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        """The output's shapes and dtypes (ShapeDtypeStructs) for these arguments (arrays, or
        ShapeDtypeStructs; static ones as the function takes them), by tracing alone, as
        ``jax.jit(f).eval_shape``. The trace is this function's: a later call with these types
        reuses it."""
        dyn_args, dyn_kwargs, statics = self._sig.split(args, kwargs)
        leaves, in_tree = tree_util.flatten_for_key(_with_extended_structs((dyn_args, dyn_kwargs)))
        avals = tuple(_abstractify(x, self.fun) for x in leaves)
        entry = self._lookup(leaves, in_tree, statics, args, kwargs, avals)
        out_avals = entry.closed.out_avals
        if type(entry) is _RefEntry:  # (the refs' hidden outputs are not the function's)
            out_avals = out_avals[:len(out_avals) - len(entry.refs.writes)]
        return tree_util.tree_unflatten(entry.out_tree, [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type)
                                                         for a in out_avals])

    def lower(self, *args: Any, **kwargs: Any) -> Lowered:
        """Trace for these arguments without running: ``f.lower(x).compile()(x)`` (ahead of time)."""
        return self.trace(*args, **kwargs).lower()

    # --- introspection --------------------------------------------------------------
    def cache_info(self) -> CacheInfo:
        """Hits, misses, traces, compiles, compile seconds and current size of this function's cache."""
        return self._cache.info()

    def clear_cache(self) -> None:
        self._cache.clear()

    def __repr__(self) -> str:
        return f"<ember.jit of {self.fun!r}>"


errors.register_boundary(JitFunction.__call__.__code__)


class _RefInfo:
    """What a traced program does with refs: the flat argument positions of Ref arguments, the refs
    it closes over (their values are the hidden inputs after the arguments, in this order), and the
    refs it writes ((is an argument, position or index in ``lifted``): the hidden outputs, in order)."""

    __slots__ = ("arg_positions", "lifted", "writes")

    def __init__(self, arg_positions: tuple, lifted: tuple, writes: tuple) -> None:
        self.arg_positions, self.lifted, self.writes = arg_positions, lifted, writes


class _RefEntry(Entry):
    """An Entry whose program uses refs: every call reads and writes them (no dispatcher fast path)."""

    __slots__ = ("refs",)

    def __init__(self, closed: ClosedJaxpr, out_tree: Any, donated: frozenset[int], refs: _RefInfo) -> None:
        super().__init__(closed, out_tree, donated)
        self.refs = refs
        self.fast_key = ()  # never a fast path: it would skip the refs' reads and write-backs


class _PlacingEntry(Entry):
    """An Entry whose outputs ``with_sharding_constraint`` placed: each call places them so, as
    JAX's outputs carry the sharding (no dispatcher fast path, which would not place them)."""

    __slots__ = ("placements",)

    def __init__(self, closed: ClosedJaxpr, out_tree: Any, donated: frozenset[int], placements: list) -> None:
        super().__init__(closed, out_tree, donated)
        self.placements = placements
        self.fast_key = ()

    def place(self, outs: list) -> list:
        return [x if s is None or type(x) is not Array else sharding.put(x, s)
                for x, s in zip(outs, self.placements)] + list(outs[len(self.placements):])


def _fun_location(fun: Callable) -> str:
    code = getattr(fun, "__code__", None)
    name = errors.function_name(fun)
    return f"{name} at {code.co_filename}:{code.co_firstlineno}" if code is not None else name


def _returned_ref_error(fun: Callable, ref: Any, scope: Any) -> ValueError:
    if ref._arg_name:
        origin = f"was passed in as the argument {ref._arg_name}"
    elif ref._home is scope:
        origin = f"was created inside {getattr(fun, '__name__', fun)}"
    else:
        origin = "is closed over by the function"
    return ValueError(f"function {_fun_location(fun)} traced for jit returned a mutable array reference of type "
                      f"{ref.aval}, but mutable array references cannot be returned.\n\nThe returned mutable "
                      f"array {origin}.")


# NumPy arguments up to this size are copied into Arrays for the native dispatcher (a copy of
# 256 KB costs about what running a few kernels from Python instead does).
COPY_FOR_DISPATCH_BYTES = 1 << 18


# The hit path's arguments (ember.runtime.dispatch), besides NumPy scalars.
_FAST_LEAVES = frozenset({Array, np.ndarray, *PYTHON_SCALARS})


def _convertible(x: Any) -> bool:
    return type(x) in PYTHON_SCALARS or isinstance(x, np.generic) or \
        (isinstance(x, np.ndarray) and x.nbytes <= COPY_FOR_DISPATCH_BYTES)


def _scalars_as_arrays(leaves: Sequence[Any], executable: Executable) -> Sequence[Any]:
    """``leaves`` with Python and NumPy scalars, and small NumPy arrays (copied: the caller may
    write to them), made Arrays of the types the program takes, so that the native dispatcher
    runs the call (it declines other arguments; the program's steps run from Python then, which
    costs a few microseconds per kernel)."""
    avals = executable.in_avals
    if not any(_convertible(x) for x in leaves):
        return leaves
    return [Array(np.array(x, a.dtype), a) if _convertible(x) and np.shape(x) == a.shape else x
            for x, a in zip(leaves, avals)]


def _names_a_sharding(shardings: Any) -> bool:
    """Whether a jit's ``in_shardings`` / ``out_shardings`` hold anything but None."""
    return shardings is not None and bool(tree_util.tree_leaves(
        shardings, is_leaf=lambda x: isinstance(x, (sharding.Sharding, sharding.PartitionSpec))))


def _overflows(x: int, aval: ShapedArray) -> bool:
    if aval.dtype.kind not in "iu":
        return False
    info = np.iinfo(aval.dtype)
    return not info.min <= x <= info.max


def _python_values(leaves: Sequence[Any]) -> list[bool]:
    """Which leaves are Python (or NumPy) scalars: values that could be static, unlike arrays."""
    return [type(x) in (int, float, bool, complex) or isinstance(x, np.generic) for x in leaves]


def _format_avals(avals: Iterable[ShapedArray]) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


# --- public entry points --------------------------------------------------------------------
def _as_tuple(x: Any) -> tuple:
    if x is None:
        return ()
    if isinstance(x, (int, str)):
        return (x,)
    return tuple(x)


def jit(fun: Callable | None = None, *, in_shardings: Any = None, out_shardings: Any = None,
        static_argnums: int | Sequence[int] | None = None,
        static_argnames: str | Sequence[str] | None = None, donate_argnums: int | Sequence[int] | None = None,
        donate_argnames: Any = None, keep_unused: bool = False, device: Any = None, backend: Any = None,
        inline: bool = False, autograph: bool | None = None, **unsupported: Any) -> Any:
    """Compile ``fun`` just in time: trace once per argument signature, cache, and reuse.

    Works as ``jit(f, ...)``, as a decorator, and through ``functools.partial(jit, ...)``.
    ``in_shardings`` / ``out_shardings`` (a Sharding or PartitionSpec, or one per positional
    argument / a tree prefix of the output): inputs split over a mesh run as one program per
    device, partitioned from ``fun``'s (``ember.partition``); outputs are placed as they say.
    ``autograph=True`` converts Python control flow on traced values (``if``, ``while``, ``for``,
    ``break``, ``continue``, ``return``, ``and``/``or``/``not``) into ``lax`` control flow, in
    ``fun`` and the user functions it calls (docs/autograph.md); None follows
    ``config.autograph`` (``EMBER_AUTOGRAPH=1``).
    """
    if unsupported:
        raise TypeError(f"jit() got unexpected keyword arguments {sorted(unsupported)}")
    if fun is None:
        return functools.partial(jit, in_shardings=in_shardings, out_shardings=out_shardings,
                                 static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, donate_argnames=donate_argnames,
                                 keep_unused=keep_unused, inline=inline, autograph=autograph)
    if not callable(fun):
        raise TypeError(f"jit expects a callable, got {type(fun).__name__}")
    return JitFunction(fun, _as_tuple(static_argnums), _as_tuple(static_argnames), _as_tuple(donate_argnums),
                       _as_tuple(donate_argnames), keep_unused, inline, in_shardings, out_shardings, autograph)


# The partitioning of jit with in_shardings lives above this module (ember.partition registers it).
_sharded_call: list[Callable] = [lambda jitted, args, kwargs: jitted.call_whole(args, kwargs)]


def register_sharded_call(call: Callable, placement: Callable) -> None:
    """``call`` runs a jit with shardings; ``placement(jitted, args, kwargs, out_tree)`` gives the
    (mesh, input shardings, output shardings) of a program over a device backend's mesh, or None,
    for the ahead-of-time stages."""
    _sharded_call[0] = call
    _device_placement[0] = placement


_device_placement: list[Callable] = [lambda jitted, args, kwargs, out_tree: None]


class _WrapperChurn:
    """How many distinct function objects with the same code were given to ``jit``."""

    def __init__(self) -> None:
        self.seen: "weakref.WeakSet[Callable]" = weakref.WeakSet()
        self.count = 0
        self.warned = False


_churn: dict[Any, _WrapperChurn] = {}
_churn_lock = threading.Lock()


def _code_of(fun: Callable) -> Any:
    while isinstance(fun, functools.partial):
        fun = fun.func
    return getattr(fun, "__code__", None)


def _note_new_wrapper(fun: Callable) -> None:
    """Warn once when fresh function objects of one piece of code (a lambda, closure or
    ``functools.partial`` made anew in a loop) keep being jitted and traced: each traces again.
    Counted at a wrapper's first trace, not when it is made: libraries make many wrappers of
    one decorator's code (equinox's ``filter_jit``), and the ones never called cost nothing."""
    threshold = int(config.jit_churn_warning_threshold)
    code = _code_of(fun)
    if not threshold or code is None:
        return
    with _churn_lock:
        churn = _churn.setdefault(code, _WrapperChurn())
        try:
            if fun in churn.seen:
                return
            churn.seen.add(fun)
        except TypeError:  # not weak-referenceable
            return
        churn.count += 1
        if churn.count < threshold or churn.warned:
            return
        churn.warned = True
    logger.warning(  # (logged, not a Python warning: as the retrace report)
        f"ember.jit has wrapped {churn.count} different function objects made from the same code "
        f"({code.co_name} at {code.co_filename}:{code.co_firstlineno}); each new wrapper traces again. "
        f"The wrappers are created at {errors.user_location()}\n"
        "Fix: create the jitted function once, outside the loop (e.g. `step = ember.jit(f)` at module level), "
        "and pass what changes as arguments (static_argnames for Python values).")


def make_jaxpr(fun: Callable, static_argnums: int | Sequence[int] = (),
               static_argnames: str | Sequence[str] = (), return_shape: bool = False) -> Callable[..., Any]:
    """``make_jaxpr(f)(*args)`` returns the IR that ``jit(f)`` would compile, for reading."""
    sig = _Signature(fun, _as_tuple(static_argnums), _as_tuple(static_argnames))
    probe = JitFunction(fun, tuple(sig.static_nums), tuple(sig.static_names), (), (), False, False)
    probe._cache = FunctionCache()  # reading the IR does not count as a trace of jit(fun)

    @errors.api_boundary
    @functools.wraps(fun)
    def make(*args: Any, **kwargs: Any) -> Any:
        dyn_args, dyn_kwargs, statics = probe._sig.split(args, kwargs)
        leaves, in_tree = tree_util.flatten_for_trace(_with_extended_structs((dyn_args, dyn_kwargs)))
        avals = [_abstractify(x, fun) for x in leaves]
        closed, out_tree, _ = probe._trace_program(avals, in_tree, statics, probe._sig.arg_names(args, kwargs),
                                                   _python_values(leaves))
        if return_shape:
            shapes = [ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in closed.out_avals]
            return closed, tree_util.tree_unflatten(out_tree, shapes)
        return closed

    return make


@errors.api_boundary
def eval_shape(fun: Callable, *args: Any, **kwargs: Any) -> Any:
    """The output shapes and dtypes of ``fun(*args)``, as ShapeDtypeStructs, computed by
    tracing alone (nothing runs). Arguments may be arrays or ShapeDtypeStructs."""
    _, shapes = make_jaxpr(fun, return_shape=True)(*args, **kwargs)
    return shapes


def typeof(x: Any) -> ShapedArray:
    """The abstract value (shape, dtype, weak type) of an array, a tracer, a NumPy array or scalar,
    or a Python scalar (as ``jax.typeof``); a TypeError for anything else."""
    if _refs.is_ref(x):
        return x.aval
    a = x.aval if isinstance(x, (Array, Tracer)) else None
    if a is None:
        if not (type(x) in (bool, int, float, complex) or isinstance(x, (np.ndarray, np.generic))):
            kind = type(x) if isinstance(x, str) else f"'{type(x)}'"  # (JAX's two spellings)
            raise TypeError(f"Argument '{x}' of type {kind} is not a valid JAX type")
        a = aval_of_value(x)
    return a


# ShapeDtypeStructs of extended dtypes (typed PRNG keys), by the dtype's class: what the value they
# stand for is while tracing, an array node over abstract data (filled by ``ember.random.prng``).
extended_dtype_structs: dict[type, Callable[[ShapeDtypeStruct], Any]] = {}


def _with_extended_structs(tree: Any) -> Any:
    """``tree`` with its ShapeDtypeStructs of extended dtype replaced by what they stand for."""
    if not extended_dtype_structs:
        return tree
    return tree_util.tree_map(lambda x: extended_dtype_structs[type(x.dtype)](x)
                              if isinstance(x, ShapeDtypeStruct) and type(x.dtype) in extended_dtype_structs else x,
                              tree)


def _abstractify(x: Any, fun: Callable) -> ShapedArray:
    if _refs.is_ref(x):
        return x.aval
    if hasattr(x, "shape") and hasattr(x, "dtype") and not hasattr(x, "__array__") and not isinstance(x, Tracer):
        return ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(x.dtype), bool(getattr(x, "weak_type", False)))
    return aval_of_value(_check_leaf(x, f"argument of {getattr(fun, '__name__', fun)}"))


def _rerun_deoptimized(e: InvalidOutputValues, fun: Callable, args: tuple, kwargs: dict) -> NoReturn:
    """``debug_nans`` / ``debug_infs`` found an invalid value in a compiled program's output: run
    the function op by op (as JAX does) so that the error names the operation that made it."""
    print(f"Invalid {'nan' if 'NaN' in str(e) else 'inf'} value encountered in the output of an ember.jit "
          "function. Calling the de-optimized version.")
    try:
        with disable_jit():
            fun(*args, **kwargs)
    except (FloatingPointError, ZeroDivisionError) as op_error:
        raise op_error from None
    raise FloatingPointError(
        f"{e}. Because debug_nans and/or debug_infs is set, the function was run again op by op (as if "
        "`jit` were removed) to find the operation that made the invalid value, but no operation made one: "
        "`jit`'s optimizations can make an invalid value that the operations do not, and a NaN or inf "
        "can come from an input or a literal (`ember.jit(lambda x: jnp.nan)`). Removing `jit` may avoid it."
    ) from None


def disable_jit(disable: bool = True):
    """Context manager: run jitted functions op by op (for print / pdb debugging)."""
    return config.override(disable_jit=disable)


def default_matmul_precision(precision: str | None):
    """Context manager: the precision of contractions that give none, as JAX's (``"highest"`` makes a
    TPU compute float32 products in full float32; the CPU backends always do)."""
    return config.override(default_matmul_precision=precision)
