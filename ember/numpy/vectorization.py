"""Applying Python functions over arrays: ``vectorize`` (NumPy's generalized ufuncs, built
on ``vmap``) and ``piecewise`` (a function per region of the input).

``vectorize`` maps ``pyfunc`` over the broadcast loop dimensions of its arguments: one
``vmap`` per loop dimension, each mapping only the arguments that have that dimension,
so nothing is broadcast in memory. A ``signature`` such as ``'(n),(n)->()'`` names the
trailing core dimensions that ``pyfunc`` sees whole.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Callable, Collection, Sequence

from ember import dtypes, lax, tree_util
from ember.numpy.core import asarray, broadcast_shapes, ensure_array
from ember.numpy.reductions import max as _max
from ember.numpy.ufuncs import where
from ember.transforms.batching import vmap

__all__ = ["piecewise", "vectorize"]

CoreDims = tuple[str, ...]

_DIMENSION = r"\w+"
_CORE_DIMS = rf"\((?:{_DIMENSION}(?:,{_DIMENSION})*)?\)"
_CORE_DIMS_LIST = rf"{_CORE_DIMS}(?:,{_CORE_DIMS})*"
_SIGNATURE = re.compile(rf"^{_CORE_DIMS_LIST}->{_CORE_DIMS_LIST}$")


def _parse_signature(signature: str) -> tuple[list[CoreDims], list[CoreDims]]:
    """``'(m,n),(n)->(m)'`` -> ``([('m', 'n'), ('n',)], [('m',)])``."""
    compact = re.sub(r"\s+", "", signature)
    if not _SIGNATURE.match(compact):
        raise ValueError(f"not a valid gufunc signature: {signature!r}")
    inputs, outputs = compact.split("->")
    return tuple([tuple(re.findall(_DIMENSION, group)) for group in re.findall(_CORE_DIMS, side)]
                 for side in (inputs, outputs))


def vectorize(pyfunc: Callable, *, excluded: Collection[int | str] = frozenset(),
              signature: str | None = None) -> Callable:
    """``pyfunc`` made to broadcast over its array arguments, as NumPy's ``vectorize``, but
    by ``vmap`` (one traced call, not a Python loop).

    ``excluded``: positions or keyword names of arguments passed through unchanged (not
    mapped; None arguments are passed through too). Other keyword arguments are mapped
    elementwise. ``signature``: the core dimensions of each positional argument and output,
    e.g. ``'(n),(n)->()'`` for a dot product; sizes of equally named dimensions must agree,
    and outputs are checked against it. Without it, ``pyfunc`` sees scalars.
    """
    if any(not isinstance(e, (int, str)) for e in excluded):
        raise TypeError(f"jnp.vectorize can only exclude integer or string arguments, but excluded={excluded!r}")
    if any(isinstance(e, int) and e < 0 for e in excluded):
        raise ValueError(f"excluded={excluded!r} contains negative numbers")
    parsed = None if signature is None else _parse_signature(signature)

    @functools.wraps(pyfunc)
    def vectorized(*args: Any, **kwargs: Any) -> Any:
        context = f"(in jnp.vectorize of {getattr(pyfunc, '__name__', 'a function')} with signature={signature!r})"
        described = [i for i in range(len(args)) if i not in excluded]  # the arguments the signature describes
        if parsed is None:
            core_of, out_core = {i: () for i in described}, None
        else:
            in_core, out_core = parsed
            if len(described) != len(in_core):
                raise TypeError(f"wrong number of positional arguments: expected {len(in_core)}, got "
                                f"{len(described)} {context}")
            core_of = dict(zip(described, in_core))
        if any(core_of[i] for i in described if args[i] is None):
            raise ValueError(f"cannot pass None for an argument with core dimensions {context}")
        mapped_positions = [i for i in described if args[i] is not None]
        mapped_names = [k for k in kwargs if k not in excluded]
        mapped = [asarray(args[i]) for i in mapped_positions] + [asarray(kwargs[k]) for k in mapped_names]
        core_dims = [core_of[i] for i in mapped_positions] + [()] * len(mapped_names)
        core_sizes = _core_sizes(mapped, core_dims, context)

        def call(*flat: Any) -> Any:
            full_args = list(args)
            for i, value in zip(mapped_positions, flat):
                full_args[i] = value
            full_kwargs = {k: v for k, v in kwargs.items() if k in excluded}
            full_kwargs.update(zip(mapped_names, flat[len(mapped_positions):]))
            out = pyfunc(*full_args, **full_kwargs)
            if out_core is not None:
                _check_outputs(out, out_core, dict(core_sizes), context)
            return out

        return _map_loop_dims(call, mapped, core_dims, context)

    return vectorized


def _core_sizes(args: Sequence[Any], core_dims: Sequence[CoreDims], context: str) -> dict[str, int]:
    """The size of every named core dimension; equally named ones must agree."""
    sizes: dict[str, int] = {}
    for arg, dims in zip(args, core_dims):
        if arg.ndim < len(dims):
            raise ValueError(f"input with shape {arg.shape} does not have enough dimensions for all core "
                             f"dimensions {dims} {context}")
        _record_sizes(sizes, arg.shape[arg.ndim - len(dims):], dims, context)
    return sizes


def _record_sizes(sizes: dict[str, int], shape: tuple, dims: CoreDims, context: str) -> None:
    for name, size in zip(dims, shape):
        if sizes.setdefault(name, size) != size:
            raise ValueError(f"inconsistent size for core dimension {name!r}: {size} vs {sizes[name]} {context}")


def _check_outputs(out: Any, out_core: list[CoreDims], sizes: dict[str, int], context: str) -> None:
    """Each output of one call has the core dimensions the signature promises."""
    if len(out_core) > 1 and not isinstance(out, tuple):
        raise TypeError(f"output must be a tuple when multiple outputs are expected, got {type(out).__name__} "
                        f"{context}")
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != len(out_core):
        raise TypeError(f"wrong number of output arguments: expected {len(out_core)}, got {len(outs)} {context}")
    for value, dims in zip(outs, out_core):
        shape = ensure_array(value).shape
        if len(shape) != len(dims):
            raise ValueError(f"output shape {shape} does not match core dimensions {dims} {context}")
        _record_sizes(sizes, shape, dims, context)


def _map_loop_dims(call: Callable, args: list[Any], core_dims: list[CoreDims], context: str) -> Any:
    """``call`` applied over the broadcast loop (non-core) dimensions of ``args``."""
    loop_shapes = [a.shape[:a.ndim - len(dims)] for a, dims in zip(args, core_dims)]
    try:
        loop_shape = broadcast_shapes(*loop_shapes)
    except ValueError:
        raise ValueError(f"loop dimensions of shapes {[a.shape for a in args]} do not broadcast {context}") from None
    rank = len(loop_shape)
    padded = [(1,) * (rank - len(s)) + s for s in loop_shapes]
    # Size-1 loop dimensions broadcast: drop them, and map each argument only over the rest.
    squeezed = [lax.reshape(a, tuple(d for d in s if d != 1) + a.shape[len(s):]) for a, s in zip(args, loop_shapes)]
    mapped_fn, unmapped_dims = call, []
    for dim in reversed(range(rank)):  # wrapped inside out: the outermost vmap maps loop dimension 0
        in_axes = tuple(0 if shape[dim] != 1 else None for shape in padded)
        if all(axis is None for axis in in_axes):
            unmapped_dims.append(dim)
        else:
            mapped_fn = vmap(mapped_fn, in_axes)
    result = mapped_fn(*squeezed)
    if not unmapped_dims:
        return result
    return tree_util.tree_map(lambda r: lax.expand_dims(ensure_array(r), tuple(sorted(unmapped_dims))), result)


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """Evaluate a function (or take a constant) per region of ``x``: where ``condlist[i]`` holds,
    ``funclist[i]``; where none holds, the extra last entry of ``funclist`` if given, else 0.
    Where several hold, the last wins (as in NumPy).

    Functions are called on elements of ``x`` (with ``args`` and ``kw``), one branch per
    element through ``lax.switch``; results are cast to ``x``'s dtype.
    """
    x = ensure_array(x)
    conditions = asarray([condlist] if _is_single_condition(condlist, x) else condlist, dtypes.bool_)
    num_conditions, num_functions = conditions.shape[0], len(funclist)
    if num_functions == num_conditions + 1:
        branches = [funclist[-1], *funclist[:-1]]
    elif num_functions == num_conditions:
        branches = [0, *funclist]
    else:
        raise ValueError(f"with {num_conditions} condition(s), either {num_conditions} or {num_conditions + 1} "
                         f"functions are expected; got {num_functions}")
    # Branch 0 is the default; branch i + 1 is taken where condition i is the last one that holds.
    numbers = lax.broadcast_in_dim(lax.iota(dtypes.int32, num_conditions), conditions.shape, (0,))
    branch_index = _max(where(conditions, numbers + 1, 0), axis=0, initial=0)
    callables = [_as_branch(b, x.dtype, args, kw) for b in branches]
    return vectorize(lambda index, value: lax.switch(index, callables, value))(branch_index, x)


def _is_single_condition(condlist: Any, x: Any) -> bool:
    """NumPy also takes one condition (a scalar, or an array shaped like ``x``) instead of a list."""
    return not isinstance(condlist, (list, tuple)) and ensure_array(condlist).ndim <= x.ndim


def _as_branch(branch: Any, dtype: Any, args: tuple, kw: dict) -> Callable:
    if callable(branch):
        return lambda value: lax.convert_element_type(ensure_array(branch(value, *args, **kw)), dtype)
    constant = asarray(branch, dtype)
    return lambda value: constant
