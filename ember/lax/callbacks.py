"""The host-callback primitives: ``debug_callback`` (no outputs, an effect),
``pure_callback`` (declared results, pure) and ``io_callback`` (declared results, an
effect). Their user APIs, derivative and batching rules are in ``ember.callbacks``; their
implementation in ``ember.backends.reference``.
"""
from __future__ import annotations

import traceback
from typing import Any, Callable

from ember import errors, tree_util
from ember.core.avals import ShapedArray
from ember.core.primitive import EFFECTFUL, REPLAYABLE
from ember.errors import JaxRuntimeError
from ember.lax.base import primitive


class FlatCallback:
    """``callback(*args, **kwargs)`` as a function of the array leaves of its arguments only.

    A primitive's param: hashed by identity; printed in the IR by the callback's name. It
    keeps the non-array leaves only (a staged program keeps its params alive).
    """

    def __init__(self, callback: Callable, tree: tree_util.PyTreeDef, is_array: list[bool],
                 static_leaves: list) -> None:
        self.callback, self._tree, self._is_array, self._static_leaves = callback, tree, is_array, static_leaves
        self.__name__ = errors.function_name(callback)
        self.runtime_errors = True  # its exceptions become JaxRuntimeErrors (False: they leave unchanged)

    def __call__(self, *arrays: Any) -> Any:
        """The callback's result. An exception it raises leaves the running program as JAX's
        runtime reports it: a ``JaxRuntimeError`` (a ``RuntimeError``) whose message holds the
        callback's traceback, the original exception as its cause."""
        arrays_it, statics_it = iter(arrays), iter(self._static_leaves)
        leaves = [next(arrays_it) if dynamic else next(statics_it) for dynamic in self._is_array]
        args, kwargs = tree_util.tree_unflatten(self._tree, leaves)
        try:
            return self.callback(*args, **kwargs)
        except Exception as e:
            if not self.runtime_errors:
                raise
            raise JaxRuntimeError("INTERNAL: CpuCallback error calling callback: "
                                  + "".join(traceback.format_exception(e)).rstrip()) from e


def _debug_callback_rule(*avals: ShapedArray, callback: FlatCallback) -> list[ShapedArray]:
    return []


debug_callback_p = primitive("debug_callback", _debug_callback_rule, multiple_results=True)
EFFECTFUL.add(debug_callback_p)  # it runs at every call: never dropped, merged or folded
REPLAYABLE.add(debug_callback_p)  # ... and again where a checkpoint recomputes what holds it


def _pure_callback_rule(*avals: ShapedArray, callback: FlatCallback, result_avals: tuple[ShapedArray, ...],
                        vmap_method: str | None) -> list[ShapedArray]:
    return list(result_avals)


pure_callback_p = primitive("pure_callback", _pure_callback_rule, multiple_results=True)


def _io_callback_rule(*avals: ShapedArray, callback: FlatCallback, result_avals: tuple[ShapedArray, ...],
                      ordered: bool) -> list[ShapedArray]:
    return list(result_avals)


io_callback_p = primitive("io_callback", _io_callback_rule, multiple_results=True)
EFFECTFUL.add(io_callback_p)  # it may read or write host state: never dropped, merged or folded
