"""``jnp.ufunc`` and ``jnp.frompyfunc``: a scalar function made a NumPy-style universal function.

As JAX's, the methods are generic: the call broadcasts by ``vectorize`` (``vmap``), ``outer``
by two nested ``vmap``s, and ``reduce``, ``accumulate``, ``at`` and ``reduceat`` apply the
binary function element by element in a ``fori_loop`` / ``scan``, so they work for any
traceable function (slowly: one step per element along the axis) and under ``jit``. ``nin``,
``nout``, ``nargs`` and ``identity`` are read-only, so that a ufunc can be a static argument.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from ember import dtypes, lax
from ember.api import eval_shape
from ember.lax.base import canonical_axes
from ember.numpy.arraylike import check_arraylike
from ember.numpy.core import asarray, broadcast_shapes, broadcast_to, ensure_array, full
from ember.numpy.index_functions import take
from ember.numpy.shape_ops import append, moveaxis, ravel, reshape
from ember.numpy.ufuncs import where
from ember.numpy.vectorization import vectorize
from ember.transforms.batching import vmap

__all__ = ["frompyfunc", "ufunc"]

_AT_INPLACE_WARNING = """\
Because JAX arrays are immutable, jnp.ufunc.at() cannot operate inplace like
np.ufunc.at(). Instead, you can pass inplace=False and capture the result; e.g.
>>> arr = jnp.add.at(arr, ind, val, inplace=False)
"""


def _one(x: Any) -> Any:
    """A scalar 1 of ``x``'s dtype and weak type (what ``eval_shape`` of the function is asked about)."""
    x = ensure_array(x)
    return lax.convert_element_type(full((), 1, x.dtype), x.dtype, dtypes.is_weakly_typed(x))


def _index_tuple(indices: Any) -> tuple:
    """``indices`` as a tuple; a list as the whole index is refused, as JAX refuses it."""
    if isinstance(indices, tuple):
        return indices
    if isinstance(indices, Sequence) and not isinstance(indices, str):
        raise TypeError("Using a non-tuple sequence for multidimensional indexing is not allowed; use "
                        "`arr[tuple(seq)]` instead of `arr[seq]`. "
                        "See https://github.com/jax-ml/jax/issues/4564 for more information.")
    return (indices,)


class ufunc:  # noqa: N801  (JAX's name)
    """A universal function from ``func`` of ``nin`` arrays to ``nout`` (JAX's ``jnp.ufunc``).
    ``call``, ``reduce``, ``accumulate``, ``at`` and ``reduceat`` may give faster methods than
    the generic loops; ``identity`` is the reductions' start for empty or masked input."""

    def __init__(self, func: Callable[..., Any], /, nin: int, nout: int, *, name: str | None = None,
                 nargs: int | None = None, identity: Any = None, call: Callable[..., Any] | None = None,
                 reduce: Callable[..., Any] | None = None, accumulate: Callable[..., Any] | None = None,
                 at: Callable[..., Any] | None = None, reduceat: Callable[..., Any] | None = None) -> None:
        self.__doc__ = func.__doc__
        self.__name__ = name or func.__name__
        self.__static_props = {
            "func": func, "nin": operator.index(nin), "nout": operator.index(nout),
            "nargs": operator.index(nargs or nin), "identity": identity, "call": call, "reduce": reduce,
            "accumulate": accumulate, "at": at, "reduceat": reduceat,
        }

    _func = property(lambda self: self.__static_props["func"])
    nin = property(lambda self: self.__static_props["nin"])
    nout = property(lambda self: self.__static_props["nout"])
    nargs = property(lambda self: self.__static_props["nargs"])
    identity = property(lambda self: self.__static_props["identity"])

    def _key(self) -> tuple:
        return (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ufunc) and self._key() == other._key()

    def __repr__(self) -> str:
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args: Any, out: None = None, where: None = None) -> Any:
        check_arraylike(self.__name__, *args)
        if out is not None:
            raise NotImplementedError(f"out argument of {self}")
        if where is not None:
            raise NotImplementedError(f"where argument of {self}")
        call = self.__static_props["call"] or vectorize(self._func)
        return call(*args)

    def _binary(self, method: str) -> None:
        if self.nin != 2:
            raise ValueError(f"{method} only supported for binary ufuncs")
        if self.nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value")

    def _result_dtype(self, *args: Any) -> np.dtype:
        return eval_shape(self._func, *(_one(a) for a in args)).dtype

    # --- reduce -----------------------------------------------------------------------------------
    def reduce(self, a: Any, axis: int | None = 0, dtype: Any = None, out: None = None, keepdims: bool = False,
               initial: Any = None, where: Any = None) -> Any:
        """Fold the binary function over ``axis`` (None: all elements), from ``initial`` (default:
        ``identity``, else the first element); a ``where`` mask skips elements."""
        check_arraylike(f"{self.__name__}.reduce", a)
        self._binary("reduce")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduce()")
        if initial is not None:
            check_arraylike(f"{self.__name__}.reduce", initial)
        if where is not None:
            check_arraylike(f"{self.__name__}.reduce", where)
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an identity, "
                                 "so to use a where mask one has to specify 'initial'.")
            if dtypes.dtype(where) != dtypes.bool_:
                raise ValueError(f"where argument must have dtype=bool; got dtype={dtypes.dtype(where)}")
        reduce = self.__static_props["reduce"] or self._reduce_via_loop
        return reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)

    def _reduce_via_loop(self, arr: Any, axis: Any = 0, dtype: Any = None, keepdims: bool = False,
                         initial: Any = None, where: Any = None) -> Any:
        arr = ensure_array(arr)
        initial = self.identity if initial is None else initial
        dtype = self._result_dtype(arr, arr) if dtype is None else dtypes.canonicalize_dtype(dtype)
        if where is not None:
            where = broadcast_to(where, arr.shape)
        if isinstance(axis, tuple):
            raise NotImplementedError("tuple of axes")
        if axis is None:
            final_shape = (1,) * arr.ndim if keepdims else ()
            arr, where, axis = ravel(arr), None if where is None else ravel(where), 0
        else:
            axis = canonical_axes(operator.index(axis), arr.ndim)[0]
            final_shape = arr.shape[:axis] + ((1,) if keepdims else ()) + arr.shape[axis + 1:]
        if axis != 0:
            arr = moveaxis(arr, axis, 0)
            where = None if where is None else moveaxis(where, axis, 0)
        if arr.shape[0] == 0:
            if initial is None:
                raise ValueError(f"zero-size array to reduction operation {self.__name__} which has no identity")
            return full(final_shape, initial, dtype)

        def step(i: Any, total: Any) -> Any:
            new = self(total, lax.convert_element_type(lax.dynamic_index_in_dim(arr, i, 0, False), dtype))
            return new if where is None else _where(lax.dynamic_index_in_dim(where, i, 0, False), new, total)

        start, first = (1, arr[0]) if initial is None else (0, initial)
        first = broadcast_to(lax.convert_element_type(asarray(first), dtype), arr.shape[1:])
        result = lax.fori_loop(start, arr.shape[0], step, first)
        return reshape(result, final_shape) if keepdims else result

    # --- accumulate -------------------------------------------------------------------------------
    def accumulate(self, a: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """The running fold along ``axis``: element ``i`` combines elements ``0..i``."""
        self._binary("accumulate")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.accumulate()")
        accumulate = self.__static_props["accumulate"] or self._accumulate_via_scan
        return accumulate(a, axis=axis, dtype=dtype)

    def _accumulate_via_scan(self, arr: Any, axis: int = 0, dtype: Any = None) -> Any:
        check_arraylike(f"{self.__name__}.accumulate", arr)
        arr = ensure_array(arr)
        dtype = self._result_dtype(arr, arr) if dtype is None else dtypes.canonicalize_dtype(dtype)
        if axis is None or isinstance(axis, tuple):
            raise ValueError("accumulate does not allow multiple axes")
        axis = canonical_axes(operator.index(axis), arr.ndim)[0]
        if arr.size == 0:
            return full(arr.shape, 0, dtype)
        arr = lax.convert_element_type(moveaxis(arr, axis, 0), dtype)

        def step(total: Any, x: Any) -> tuple[Any, Any]:
            total = lax.convert_element_type(self(total, x), dtype)
            return total, total

        _, rest = lax.scan(step, arr[0], arr[1:])
        result = lax.concatenate([lax.expand_dims(arr[0], (0,)), rest], 0)
        return moveaxis(result, 0, axis)

    # --- at ---------------------------------------------------------------------------------------
    def at(self, a: Any, indices: Any, b: Any = None, /, *, inplace: bool = True) -> Any:
        """``a`` with ``a[indices] = func(a[indices], b)`` applied once per index, repeated indices
        included (unlike ``a.at[indices].set``); needs ``inplace=False``, as arrays are immutable."""
        if inplace:
            raise NotImplementedError(_AT_INPLACE_WARNING)
        at = self.__static_props["at"] or self._at_via_scan
        return at(a, indices) if b is None else at(a, indices, b)

    def _at_via_scan(self, a: Any, indices: Any, *args: Any) -> Any:
        check_arraylike(f"{self.__name__}.at", a, *args)
        dtype = self._result_dtype(a, *args)
        a = lax.convert_element_type(ensure_array(a), dtype)
        args = tuple(lax.convert_element_type(ensure_array(arg), dtype) for arg in args)
        indices = _index_tuple(indices)
        if not indices:
            return a
        shapes = [tuple(getattr(i, "shape", np.shape(i))) for i in indices if not isinstance(i, slice)]
        shape = broadcast_shapes(*shapes) if shapes else ()
        if not shape:
            return a.at[indices].set(self(a.at[indices].get(), *args))
        count = math.prod(shape)
        if args:
            arg = broadcast_to(args[0], (*shape, *args[0].shape[len(shape):]))
            args = (reshape(arg, (count, *args[0].shape[len(shape):])),)
        indices = tuple(i if isinstance(i, slice) else ravel(broadcast_to(asarray(i), shape)) for i in indices)

        def step(i: Any, out: Any) -> Any:
            index = tuple(ind if isinstance(ind, slice) else ind[i] for ind in indices)
            return out.at[index].set(self(out.at[index].get(), *(arg[i] for arg in args)))

        return lax.fori_loop(0, count, step, a)

    # --- reduceat ---------------------------------------------------------------------------------
    def reduceat(self, a: Any, indices: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """Folds over the slices ``indices[i]:indices[i+1]`` of ``axis`` (NumPy's rule: a slice that
        would be empty gives ``a[indices[i]]``)."""
        self._binary("reduceat")
        if out is not None:
            raise NotImplementedError(f"out argument of {self.__name__}.reduceat()")
        reduceat = self.__static_props["reduceat"] or self._reduceat_via_loop
        return reduceat(a, indices, axis=axis, dtype=dtype)

    def _reduceat_via_loop(self, a: Any, indices: Any, axis: int = 0, dtype: Any = None) -> Any:
        check_arraylike(f"{self.__name__}.reduceat", a, indices)
        a = ensure_array(a)
        index_tuple = _index_tuple(indices)
        if len(index_tuple) != 1:
            raise ValueError("reduceat: indices must be a single index array")
        indices = ensure_array(index_tuple[0])
        if a.ndim == 0:
            raise ValueError(f"reduceat: a must have 1 or more dimension, got {a.shape=}")
        if indices.ndim != 1:
            raise ValueError(f"reduceat: indices must be one-dimensional, got {indices.shape=}")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        axis = canonical_axes(operator.index(axis), a.ndim)[0]
        out = take(a, indices, axis=axis)
        bounds = lax.expand_dims(append(indices, a.shape[axis]), [d for d in range(out.ndim) if d != axis])
        start = lax.slice_in_dim(bounds, 0, bounds.shape[axis] - 1, axis=axis)
        stop = lax.slice_in_dim(bounds, 1, bounds.shape[axis], axis=axis)

        def step(i: Any, total: Any) -> Any:
            inside = (i > start) & (i < stop)
            return _where(inside, self(total, take(a, lax.expand_dims(i, (0,)), axis=axis)), total)

        return lax.fori_loop(0, a.shape[axis], step, out)

    # --- outer ------------------------------------------------------------------------------------
    def outer(self, A: Any, B: Any, /) -> Any:  # noqa: N803  (NumPy's names)
        """``func(A[i...], B[j...])`` for every pair: shape ``A.shape + B.shape``."""
        self._binary("outer")
        check_arraylike(f"{self.__name__}.outer", A, B)
        A, B = ensure_array(A), ensure_array(B)
        result = vmap(vmap(self, (None, 0)), (0, None))(ravel(A), ravel(B))
        return reshape(result, (*A.shape, *B.shape))


def _where(condition: Any, x: Any, y: Any) -> Any:
    return where(condition, x, y)


def frompyfunc(func: Callable[..., Any], /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """``func`` (of ``nin`` scalars, to ``nout`` results) as a ``jnp.ufunc``."""
    return ufunc(func, nin, nout, identity=identity)

