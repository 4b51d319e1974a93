"""The jit hit path: a call whose arguments' types a function's fast table knows runs its
executable's fast runner (on the CPU, the native dispatcher: one native call), with nothing
flattened, split or looked up besides.

One key serves every call (``key_of``): the abstract value of each Array leaf, the type of each
Python or NumPy scalar (under the config the table was filled in, a scalar's type is its aval; it
becomes an Array of the traced type on the way in). A function whose hits were given NumPy arrays
also looks a miss up again by each NumPy array's (dtype, shape) (``numpy_key_of``): its runner
takes them as its executable does (``Executable.takes_numpy``), or as Arrays copied from them.
Positional arguments are keyed by their own tuple; pytree arguments (a training step's
parameters) by their structure and their leaves' key. Only plain calls come here (no keywords,
static or donated arguments: ``ember.api`` decides), and a fast runner declines (``DECLINED``, the
general path takes the call) unless every argument is a live Array of the program's types in the
memory it reads.
"""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Sequence

import numpy as np

from ember import errors, tree_util
from ember.backends.protocols import DECLINED
from ember.core.array import Array
from ember.core.trace import EvalTrace, _state as _trace_state
from ember.runtime.cache import Entry, FunctionCache, clock

PYTHON_SCALARS = (int, float, complex, bool)  # exactly these types: weakly typed (bool strongly), as in JAX
_NO_KWARGS: dict = {}


def key_of(leaves: Sequence[Any]) -> tuple:
    """The fast table's key of flat arguments: each one's abstract value, or a scalar's type."""
    return tuple([getattr(x, "aval", type(x)) for x in leaves])


def numpy_key_of(leaves: Sequence[Any]) -> tuple:
    """``key_of``, with each NumPy array's (dtype, shape) for its type."""
    return tuple([(x.dtype, x.shape) if type(x) is np.ndarray else getattr(x, "aval", type(x)) for x in leaves])


@functools.lru_cache(maxsize=64)
def positional_structure(n: int) -> tree_util.PyTreeDef:
    """The tree structure of ``(args, {})`` for ``n`` positional array arguments."""
    return tree_util.tree_structure(((0,) * n, {}))


class Dispatcher:
    """The hit path of a jitted function, the base class of ``ember.api.JitFunction``: its
    ``__call__`` is the call itself (no frame in between: the hit path takes about a
    microsecond). A subclass sets ``_cache`` (its ``FunctionCache``) and ``_fast`` (the cache's
    ``FastTable``, or an empty dict for functions whose calls all take the general path), and
    gives the general path, ``_call(args, kwargs)``."""

    _cache: FunctionCache
    _fast: dict

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs:
            try:  # (no exception for other arguments: raising one would cost them a microsecond)
                # (``key_of(args)``, written out: a function call would add a tenth of this path's time)
                hit = self._fast.get(tuple([getattr(x, "aval", type(x)) for x in args]))
            except TypeError:  # an unhashable ``aval`` attribute of something else
                hit = None
            leaves = args
            if hit is None and self._cache.numpy_keys:
                hit = self._fast.get(numpy_key_of(args))
            if hit is None and self._cache.tree_keys and type(_trace_state.trace) is EvalTrace:
                hit, leaves = self._tree_hit(args)  # pytree arguments: flattened, then the same path
            if hit is not None and type(_trace_state.trace) is EvalTrace:
                run, entry = hit
                result = run(leaves)
                if result is not DECLINED:
                    self._cache.hits += 1
                    entry.used = next(clock)
                    return result
        try:
            return self._call(args, kwargs)
        except Exception as e:  # the user's frames only (ember's are filtered out: errors.api_boundary)
            errors.filter_at_boundary(e, sys._getframe())
            raise

    def _call(self, args: tuple, kwargs: dict) -> Any:
        """The general path: a call the hit path did not take."""
        raise NotImplementedError

    def _tree_hit(self, args: tuple) -> tuple[Any, tuple]:
        """The fast table's entry for pytree arguments (None if it has none), and their leaves."""
        leaves, in_tree = tree_util.flatten_for_key((args, _NO_KWARGS))
        try:
            hit = self._fast.get((in_tree, key_of(leaves)))
            if hit is None and self._cache.numpy_keys:
                hit = self._fast.get((in_tree, numpy_key_of(leaves)))
            return hit, tuple(leaves)
        except TypeError:  # an unhashable ``aval`` attribute of something else
            return None, args

    def _enable_fast_path(self, entry: Entry, key: tuple, leaves: Sequence[Any], in_tree: Any) -> None:
        """Give ``entry`` (stored under ``key`` in the function's cache, its executable built) the
        fast path for calls whose flat arguments are like ``leaves`` (Arrays, Python scalars and
        NumPy arrays) and structured as ``in_tree``; or, if its executable has no fast runner and will not get
        one, mark it so that no later hit asks again."""
        executable = entry.executable
        assert executable is not None
        runner = executable.fast_runner(entry.out_tree)
        if runner is None:
            if not executable.fast_runner_pending:  # (pending: a later hit asks again)
                entry.fast_key = ()
            return
        in_avals = entry.closed.in_avals
        converted = (PYTHON_SCALARS if executable.takes_numpy else (*PYTHON_SCALARS, np.ndarray))
        conversions = tuple((i, a.dtype.type, a) for i, (x, a) in enumerate(zip(leaves, in_avals))
                            if type(x) in converted or (isinstance(x, np.generic) and not executable.takes_numpy))
        if conversions:
            runner = _converting_runner(runner, conversions)
        fast_key = numpy_key_of(leaves)
        if in_tree != positional_structure(len(leaves)):
            fast_key = (in_tree, fast_key)
        self._cache.add_fast(key, entry, fast_key, runner)


def _converting_runner(runner: Callable, conversions: tuple) -> Callable:
    """``runner`` for arguments whose Python scalars and NumPy arrays (at the positions
    ``conversions`` names, with their traced type) are made Arrays first (copied: the caller may
    write to an array); a value that does not fit its type (an int out of range) declines, and the
    general path reports it as it would have."""
    new = Array.__new__

    def run(args: tuple) -> Any:
        arrays = list(args)
        for i, scalar_type, aval in conversions:
            x = arrays[i]
            try:
                value = np.array(x, aval.dtype) if type(x) is np.ndarray else np.array(scalar_type(x))
            except (OverflowError, ValueError):
                return DECLINED
            value.flags.writeable = False
            array = new(Array)
            array._value, array.aval = value, aval
            arrays[i] = array
        return runner(tuple(arrays))
    return run
