"""Which ``jnp`` functions are staged as named ``jit`` sub-programs, as JAX stages them.

JAX writes many ``jnp`` functions as jitted functions, so a traced program shows each call as an
equation ``jit[name=clip jaxpr={ ... }]`` (and prints a body reached twice, or longer than ten
equations, once, as ``let clip = { ... } in``). Users read those jaxprs, and tutorials print them,
so ember stages the same functions under the same names: ``STAGED`` maps each public name to
JAX's name for its jitted body and to its static parameters (JAX's ``static_argnames``); every
other parameter is an input of the sub-program, Python scalars included (weakly typed, as in
JAX). Eagerly the function runs as it is, replayed from a signature's second call
(``runtime.replay``: its traced program handed to the eager engine equation by equation, the same
bits without the Python around each operation, and once that has paid for a compile, the whole
program as one native executable; JAX runs these jitted eagerly too). Under ``debug_nans`` /
``debug_infs`` an eager call is the ``jit`` call, as in JAX: only its outputs are checked (a NaN
the result does not keep is not an error, such as the one ``var`` selects where no element is
left), and an invalid output reruns it op by op to name the operation. Only under a trace
(``jit``, ``make_jaxpr``, ``grad``, ``vmap``) does a call become a ``jit`` equation, whose body is
traced once per signature and inlined by the compiler as any nested ``jit`` is. A call whose
static arguments cannot be hashed (a list as ``axis``, a traced value where JAX needs a static
one) is not staged; it runs inline, and raises what it would raise.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from ember.api import jit
from ember.config import config
from ember.core.trace import is_tracing
from ember.runtime.replay import replayed, tracing_for_replay

__all__ = ["STAGED", "stage", "staged"]

_REDUCTION = ("axis", "dtype", "keepdims")
_VARIANCE = _REDUCTION + ("ddof", "correction")  # (JAX: traced; ember's variance reads them as numbers)

# public name -> (JAX's name for the jitted body, its static parameters), from JAX 0.10.
STAGED: dict[str, tuple[str, tuple[str, ...]]] = {
    "acosh": ("arccosh", ()),
    **{n: (n, ()) for n in """arccosh block clip copysign divmod ediff1d
        floor_divide fmax fmin fmod frexp heaviside hypot i0 iscomplex isinf isreal kron matvec modf polyadd
        polysub remainder rint signbit sinc sort_complex trunc""".split()},
    "mod": ("remainder", ()), "nan_to_num": ("nan_to_num", ("copy",)),
    "allclose": ("allclose", ("equal_nan",)), "isclose": ("isclose", ("equal_nan",)),
    "angle": ("angle", ("deg",)), "append": ("append", ("axis",)), "around": ("around", ("decimals",)),
    "round": ("round", ("decimals",)), "polyval": ("polyval", ("unroll",)),
    "argsort": ("argsort", ("axis", "kind", "order", "stable", "descending", "dtype")),
    "sort": ("sort", ("axis", "kind", "order", "stable", "descending")),
    "lexsort": ("lexsort", ("axis",)), "corrcoef": ("corrcoef", ("rowvar", "dtype")),
    "cov": ("cov", ("rowvar", "bias", "ddof", "dtype")), "count_nonzero": ("count_nonzero", ("axis", "keepdims")),
    "cumsum": ("cumsum", ("axis", "dtype")), "cumprod": ("cumprod", ("axis", "dtype")),
    "nancumsum": ("nancumsum", ("axis", "dtype")), "nancumprod": ("nancumprod", ("axis", "dtype")),
    "diagonal": ("diagonal", ("offset", "axis1", "axis2")), "diff": ("diff", ("n", "axis")),
    "gradient": ("gradient", ("axis", "edge_order")), "median": ("median", ("axis", "overwrite_input", "keepdims")),
    "nanmedian": ("nanmedian", ("axis", "overwrite_input", "keepdims")),
    "nanmax": ("nanmax", ("axis", "keepdims")), "nanmin": ("nanmin", ("axis", "keepdims")),
    **{n: (n, _REDUCTION) for n in "nanmean nanprod nansum".split()},
    "nanstd": ("nanstd", _VARIANCE), "nanvar": ("nanvar", _VARIANCE),
    "ptp": ("_ptp", ("axis", "keepdims")),
    "nanargmax": ("_nanargmax", ("axis", "keepdims")), "nanargmin": ("_nanargmin", ("axis", "keepdims")),
    "take": ("_take", ("axis", "mode", "unique_indices", "indices_are_sorted", "fill_value")),
    "flip": ("_flip", ("axis",)), "fliplr": ("_flip", ()), "flipud": ("_flip", ()),
    "rot90": ("rot90", ("k", "axes")), "trace": ("trace", ("offset", "axis1", "axis2", "dtype")),
    "trapezoid": ("trapezoid", ("axis",)), "tril": ("tril", ("k",)), "triu": ("triu", ("k",)),
    "unwrap": ("unwrap", ("axis",)), "diag": ("_diag", ("k",)),
    "linspace": ("_linspace", ("num", "endpoint", "retstep", "dtype", "axis", "device")),
    "logspace": ("_logspace", ("num", "endpoint", "dtype", "axis")),
    "geomspace": ("_geomspace", ("num", "endpoint", "dtype", "axis")),
}


# Functions whose eager calls replay (``runtime.replay``, the whole program native once it pays) but
# whose traces show their operations, as JAX's do: those JAX jits with ``inline=True`` (their eager
# calls are compiled programs there), those whose body JAX jits under another name (``pad``'s
# ``_pad``, ``roll``'s ``_roll_static``), and a few JAX runs op by op whose Python costs more than
# their operations on small arrays (``split``, ``stack``, ``tile``).
REPLAYED: tuple[str, ...] = ("matmul", "dot", "vdot", "inner", "outer", "mean", "average", "argmax", "argmin",
                             "square", "pad", "roll", "split", "stack", "tile")


def replay_eagerly(namespace: dict[str, Any], names: tuple[str, ...]) -> None:
    """Replace each function of ``namespace`` that ``names`` lists by its eagerly replayed form."""
    for name in names:
        if name in namespace:
            namespace[name] = replayed(namespace[name], exact=False)


def staged(name: str, static: tuple[str, ...] = (), *, replay: bool = True) -> Callable[[Callable], Callable]:
    """Stage the decorated function as ``jit[name=<name>]`` under a trace (see the module);
    ``replay=False`` for one whose eager path is faster run directly than replayed."""
    return lambda fn: _staged(fn, name, frozenset(static), replay)


def stage(namespace: dict[str, Any], table: dict[str, tuple[str, tuple[str, ...]]]) -> None:
    """Replace each function of ``namespace`` that ``table`` names by its staged form."""
    for public, (name, static) in table.items():
        if public in namespace:  # (names ember has no function for are not in its namespace)
            namespace[public] = _staged(namespace[public], name, frozenset(static))


def _staged(fn: Callable, name: str, static: frozenset[str], replay: bool = True) -> Callable:
    signature = inspect.signature(fn)
    program = jit(_body(fn, signature, name), static_argnums=0)
    eager = replayed(fn, exact=False) if replay else fn

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not is_tracing():
            if not (config.debug_nans or config.debug_infs):
                return eager(*args, **kwargs)
        elif tracing_for_replay():  # (the operations the eager call runs, inline)
            return fn(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return fn(*args, **kwargs)  # (its own message)
        arguments = bound.arguments
        fixed = tuple((k, type(v), v) for k, v in arguments.items() if k in static)
        inputs = tuple(k for k in arguments if k not in static)
        try:
            hash(fixed)
        except TypeError:  # a static argument that cannot be hashed: run inline
            return fn(*args, **kwargs)
        return program((fixed, inputs), *[arguments[k] for k in inputs])

    call.staged_program = program  # (its jit: its cache_info counts the traces of the body)
    return call


def _body(fn: Callable, signature: inspect.Signature, name: str) -> Callable:
    """``fn`` taking its static arguments as one hashable value, the others positionally, named ``name``."""
    order = list(signature.parameters)

    def body(key: tuple, *values: Any) -> Any:
        fixed, inputs = key
        given = {k: v for k, _, v in fixed}
        given.update(zip(inputs, values))
        bound = inspect.BoundArguments(signature, {k: given[k] for k in order if k in given})  # type: ignore[arg-type]
        return fn(*bound.args, **bound.kwargs)

    body.__name__ = body.__qualname__ = name
    # (its own code object too: jit's warning about many wrappers of one code counts code objects)
    body.__code__ = body.__code__.replace(co_name=name)
    return body
