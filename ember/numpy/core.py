"""Array construction, dtype promotion and NumPy broadcasting, in terms of lax."""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np

from ember import dtypes, lax
from ember.config import config
from ember.core.array import Array, as_array, flatten_nested
from ember.core.trace import Tracer
from ember.lax import elementwise as ew
from ember.lax.base import aval, concrete_dims, is_python_scalar, shape_tuple
from ember.numpy.array_api import place


def is_array(x: Any) -> bool:
    return isinstance(x, (Array, Tracer))


def asarray(a: Any, dtype: Any = None, order: str | None = None, *, copy: bool | None = None,
            device: Any = None) -> Any:
    """An ember array from ``a`` (arrays, NumPy arrays, scalars, nested lists of them), placed on
    ``device`` if given."""
    return place(_asarray(a, dtype), device)


def _asarray(a: Any, dtype: Any = None) -> Any:
    if a is None or (isinstance(a, (list, tuple)) and any(x is None for x in flatten_nested(a))):
        raise ValueError("None is not a valid value for jnp.array")  # (JAX's class and words)
    if dtypes.is_float0(dtype) or (dtype is None and dtypes.is_float0(getattr(a, "dtype", None))):
        return dtypes.float0_zeros(np.shape(a))  # (JAX's: a NumPy array, for tangents of integers)
    if dtype is not None:
        dtype = dtypes.requested_dtype(dtype)
    if is_array(a):
        return a if dtype is None else lax.convert_element_type(a, dtype)
    if isinstance(a, (list, tuple)) and any(isinstance(x, Tracer) for x in flatten_nested(a)):
        if dtype is None:  # (as JAX: each element converted to the promoted type, then stacked)
            dtype = result_type_weak(*flatten_nested(a))[0]
        return _stack_rows(asarray(x, dtype) for x in a)
    if hasattr(a, "__jax_array__"):
        return asarray(a.__jax_array__(), dtype)
    return as_array(a, dtype)


def array(object: Any, dtype: Any = None, copy: bool = True, order: str | None = None, ndmin: int = 0, *,
          device: Any = None) -> Any:
    if copy and isinstance(object, Tracer):  # (a traced value's copy is an equation, as in JAX)
        object = ew.copy_p.bind(object)
    out = _asarray(object, dtype)
    if isinstance(out, np.ndarray):  # (float0)
        return out.reshape((1,) * (ndmin - out.ndim) + out.shape)
    if ndmin > aval(out).ndim:
        out = lax.broadcast(out, (1,) * (ndmin - aval(out).ndim))
    return place(out, device)


def _stack_rows(rows: Any) -> Any:
    """Rows of one dtype, each given a leading axis as it comes (JAX's order), stacked: a list
    that holds traced values (``jnp.stack``'s rule, written here below ``shape_ops``)."""
    rows = [lax.expand_dims(r, (0,)) for r in rows]
    shapes = [aval(r).shape[1:] for r in rows]
    if len(set(shapes)) > 1:
        raise ValueError(f"All input arrays must have the same shape. Got {', '.join(map(str, shapes))}.")
    return lax.concatenate(rows, 0)


# --- promotion and broadcasting ---------------------------------------------------------------
def result_type_weak(*args: Any) -> tuple[np.dtype, bool]:
    return dtypes._result_type_weak(args)


def promote_dtypes(*args: Any) -> list[Any]:
    """Convert every operand to the promoted dtype (weak types follow JAX's lattice)."""
    args = [ensure_array(a) for a in args]
    if len(args) < 2 or _one_strong_dtype(args):
        return args
    dt, weak = result_type_weak(*args)
    return [lax.convert_element_type(a, dt, weak) for a in args]


def _one_strong_dtype(arrays: list) -> bool:
    """Whether the arrays share one dtype, none weakly typed: then promotion changes nothing
    (checked first, for the sake of eager calls, which would pay for the lattice each time)."""
    first = arrays[0].aval
    return not first.weak_type and all(a.aval.dtype == first.dtype and not a.aval.weak_type for a in arrays)


def promote_dtypes_inexact(*args: Any) -> list[Any]:
    """Like promote_dtypes, then integers and bools become the default float (as ``jnp.sin(1)``)."""
    args = [ensure_array(a) for a in args]
    if _one_strong_dtype(args) and args[0].aval.dtype in dtypes.INEXACT:
        return args
    dt, weak = result_type_weak(*args)
    dt = dtypes.to_inexact_dtype(dt)
    return [lax.convert_element_type(a, dt, weak) for a in args]


# Eager operations of an Array and a Python scalar (``x * 2.0``): whether promotion leaves an
# Array of a type as it is beside a Python scalar of a type, and the scalar Arrays it made, by value
# (Arrays are immutable: one serves every call). Emptied when the config changes (x64, promotion).
_KEEPS_ARRAY: dict[tuple, bool] = {}
_PROMOTED_SCALARS: dict[tuple, Any] = {}
_SCALARS_KEPT = 1024
_PYTHON_SCALARS = frozenset({bool, int, float, complex})
config.on_update(lambda _name: (_KEEPS_ARRAY.clear(), _PROMOTED_SCALARS.clear()))


def promoted_scalar(x: Array, v: Any, scalar_first: bool, inexact: bool = False) -> Any:
    """The Python scalar ``v`` as ``promote_dtypes`` (``promote_dtypes_inexact`` if ``inexact``)
    makes it beside the Array ``x`` (``v`` first if ``scalar_first``), when that leaves ``x`` as it
    is (a float array with any Python number, an int array with an int); None otherwise, and for
    other operands. (A zero's key holds its text too: 0.0 and -0.0 are equal, and hash alike.)"""
    if type(v) not in _PYTHON_SCALARS or type(x) is not Array:
        return None
    a = x.aval
    kind = (a.dtype, a.weak_type, type(v), scalar_first, inexact)
    keeps = _KEEPS_ARRAY.get(kind)
    if keeps is False:
        return None
    key = (kind, v) if v else (kind, v, repr(v))
    s = _PROMOTED_SCALARS.get(key)
    if s is None:
        promote = promote_dtypes_inexact if inexact else promote_dtypes
        out = promote(v, x) if scalar_first else promote(x, v)
        keeps = out[1 if scalar_first else 0] is x
        _KEEPS_ARRAY[kind] = keeps
        if not keeps:
            return None
        s = out[0 if scalar_first else 1]
        if len(_PROMOTED_SCALARS) >= _SCALARS_KEPT:
            _PROMOTED_SCALARS.clear()
        _PROMOTED_SCALARS[key] = s
    return s


# Eager broadcasts of a 0-d Array to a small shape (``jnp.where(c, x, 0.0)``), by the value's type,
# bits and the shape: Arrays are immutable, so one serves every call. Emptied when full.
_FILLED: dict[tuple, Array] = {}
_FILLED_KEPT = 256
FILLED_MAX_ELEMENTS = 4096


def filled(s: Array, shape: tuple[int, ...]) -> Any:
    """The 0-d Array ``s`` broadcast to ``shape``, as ``broadcast_to``; made once per value and shape
    where the result is small."""
    if type(s) is not Array or math.prod(shape) > FILLED_MAX_ELEMENTS:
        return broadcast_to(s, shape)
    key = (s.aval, s._value.tobytes(), shape)
    out = _FILLED.get(key)
    if out is None:
        out = broadcast_to(s, shape)
        if len(_FILLED) >= _FILLED_KEPT:
            _FILLED.clear()
        _FILLED[key] = out
    return out


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy's broadcasting of shapes; a ValueError naming every shape (JAX's) if they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            listed = ", ".join(str(tuple(s)) for s in shapes)
            raise ValueError(f"Incompatible shapes for broadcasting: shapes=[{listed}]")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to(x: Any, shape: Sequence[int]) -> Any:
    x = x if is_array(x) or is_python_scalar(x) else asarray(x)
    a = aval(x)
    shape = concrete_dims(shape)
    if a.shape == shape:
        return x if is_array(x) else asarray(x)
    if len(shape) < a.ndim:  # JAX's messages
        raise ValueError(f"Cannot broadcast to shape with fewer dimensions: arr_shape={a.shape} shape={shape}")
    if any(n not in (1, m) for n, m in zip(a.shape, shape[len(shape) - a.ndim:])):
        def typ(s: tuple, weak: bool) -> str:
            return f"{'~' if weak else ''}{a.dtype.name}[{','.join(map(str, s))}]"
        raise ValueError(f"Incompatible types for broadcasting: input type={typ(a.shape, a.weak_type)} and "
                         f"requested type={typ(shape, False)}")
    lead = len(shape) - a.ndim
    return lax.broadcast_in_dim(x, shape, tuple(range(lead, len(shape))))


def broadcast_operands(*args: Any, name: str | None = None) -> list[Any]:
    """Broadcast non-scalar operands to a common shape; rank-0 operands stay scalars
    (elementwise primitives broadcast them for free).

    ``name`` is the jnp function's (JAX's name for it): operands of different ranks there are
    what ``config.numpy_rank_promotion`` governs ("warn": a warning, "raise": a ValueError).

    Shapes that do not broadcast fail as in JAX: two operands of one rank are returned as they
    are, so that the primitive applied to them raises its TypeError, which names it (``add got
    incompatible shapes for broadcasting: (3,), (4,).``); operands of different ranks, and the three
    of ``jnp.where``, raise ``broadcast_shapes``'s ValueError."""
    shapes = [aval(a).shape for a in args]
    nonscalar = [s for s in shapes if s != ()]
    if len(set(nonscalar)) <= 1:
        return list(args)
    if name is not None and config.numpy_rank_promotion != "allow" and len({len(s) for s in nonscalar}) > 1:
        _rank_promotion(name, shapes)
    try:
        shape = broadcast_shapes(*shapes)
    except ValueError:
        if len(args) == 2 and len({len(s) for s in nonscalar}) == 1:
            return list(args)
        raise
    return [a if s == () or s == shape else broadcast_to(a, shape) for a, s in zip(args, shapes)]


def promote_shapes(*args: Any, name: str) -> list[Any]:
    """The operands of a binary operation, as JAX's ``promote_shapes`` leaves them: of one rank
    (``broadcast_in_dim`` to ``(1, ..., 1, *shape)``), their size-1 dimensions left for the
    operation to broadcast; rank-0 operands stay scalars. Shapes that do not broadcast raise as
    ``broadcast_operands`` has them raise."""
    shapes = [aval(a).shape for a in args]
    ranks = {len(s) for s in shapes if s != ()}
    if len(ranks) <= 1:
        return list(args)
    if config.numpy_rank_promotion != "allow":
        _rank_promotion(name, shapes)
    rank = len(broadcast_shapes(*shapes))
    return [a if s == () or len(s) == rank else
            lax.broadcast_in_dim(a, (1,) * (rank - len(s)) + s, tuple(range(rank - len(s), rank)))
            for a, s in zip(args, shapes)]


# Eager operations of two Arrays of one type and different shapes (``x + b``): the operands'
# broadcasts, by their shapes: None for an operand that keeps its shape, else ``broadcast_in_dim``'s
# params. Shapes that do not broadcast, and ranks that differ under ``numpy_rank_promotion`` "warn"
# or "raise", are not kept: the general path gives their errors. Emptied when full or the config changes.
_BROADCAST_PLANS: dict[tuple, tuple] = {}
_PLANS_KEPT = 1024
config.on_update(lambda _name: _BROADCAST_PLANS.clear())


def broadcast_plan(shape1: tuple[int, ...], shape2: tuple[int, ...]) -> tuple | None:
    """How ``broadcast_operands`` broadcasts two operands of these shapes, where it broadcasts them
    without a word: a pair of ``broadcast_in_dim`` params (None for an operand left as it is)."""
    key = (shape1, shape2)
    plan = _BROADCAST_PLANS.get(key)
    if plan is not None:
        return plan
    if shape1 == () or shape2 == () or (len(shape1) != len(shape2) and config.numpy_rank_promotion != "allow"):
        return None
    try:
        shape = broadcast_shapes(shape1, shape2)
    except ValueError:
        return None
    plan = tuple(None if s == shape else
                 {"shape": shape, "broadcast_dimensions": tuple(range(len(shape) - len(s), len(shape)))}
                 for s in (shape1, shape2))
    if len(_BROADCAST_PLANS) >= _PLANS_KEPT:
        _BROADCAST_PLANS.clear()
    _BROADCAST_PLANS[key] = plan
    return plan


def _rank_promotion(name: str, shapes: list[tuple[int, ...]]) -> None:
    """Operands of different ranks under ``numpy_rank_promotion`` "warn" or "raise" (JAX's messages)."""
    listed = " ".join(map(str, shapes))
    if config.numpy_rank_promotion == "raise":
        raise ValueError(f"Operands could not be broadcast together for {name} on shapes {listed} and with the "
                         "config option jax_numpy_rank_promotion='raise'. For more information, see "
                         "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")
    warnings.warn(f"Following NumPy automatic rank promotion for {name} on shapes {listed}. Set the "
                  "jax_numpy_rank_promotion config option to 'allow' to disable this warning; for more "
                  "information, see https://docs.jax.dev/en/latest/rank_promotion_warning.html.", stacklevel=4)


def promote_and_broadcast(*args: Any, name: str | None = None) -> list[Any]:
    return broadcast_operands(*promote_dtypes(*args), name=name)


def full(shape: Any, fill_value: Any, dtype: Any = None, *, device: Any = None) -> Any:
    """An array of ``shape`` filled with ``fill_value`` (broadcast if it is an array).

    As in JAX, a scalar fill is cast the way C casts (through NumPy's own type for it), so an
    integer that does not fit wraps (``full(2, 2**31)`` is int32 -2**31) and a float saturates;
    the result is weakly typed when no ``dtype`` is given and the fill is weak.
    """
    shape = shape_tuple(shape)
    if dtypes.is_float0(dtype):
        return dtypes.float0_zeros(shape)
    weak = dtype is None and dtypes.is_weakly_typed(fill_value)
    target = None if dtype is None else dtypes.requested_dtype(dtype)
    if type(fill_value) in (bool, int, float, complex) or isinstance(fill_value, np.generic):
        target = target or dtypes.value_dtype_and_weak(fill_value)[0]
        fill = as_array(dtypes.convert_values(np.asarray(fill_value), target))
    else:
        fill = ensure_array(fill_value) if target is None else asarray(fill_value, target)
    fill = lax.convert_element_type(fill, aval(fill).dtype, weak_type=weak)
    return place(broadcast_to(fill, shape), device)


def ensure_array(x: Any) -> Any:
    """An Array or Tracer for anything array-like: ``asarray`` unless it already is one (so,
    unlike ``ember.core.array.ensure_array``, lists holding traced values are stacked)."""
    return x if is_array(x) else asarray(x)
