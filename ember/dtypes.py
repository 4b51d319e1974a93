"""Dtypes, weak types and JAX's type-promotion lattice.

Promotion is the join (least upper bound) of the operands' nodes in a small
lattice. Python scalars are *weakly typed*: they sit on their own nodes
(``i*`` and ``f*``) below every concrete integer / floating type, so
``x_f16 * 2.0`` stays float16 while ``x_i32 * 2.0`` becomes a weak float.
With x64 off (the default), 64-bit results canonicalize to 32 bits.
"""
from __future__ import annotations

import builtins
import functools
import warnings
from typing import Any

import ml_dtypes
import numpy as np

from ember import errors
from ember.config import config

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
# JAX's 8-bit floating types (ml_dtypes'). They promote with no other floating type (JAX's rule:
# mixing them is a TypePromotionError), only with integers, bools and Python scalars.
FLOAT8_NAMES = ("float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
                "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu")
FLOAT8 = tuple(np.dtype(getattr(ml_dtypes, n)) for n in FLOAT8_NAMES)
(float8_e3m4, float8_e4m3, float8_e4m3b11fnuz, float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz,
 float8_e8m0fnu) = FLOAT8

# JAX's sub-byte types (ml_dtypes'): ember knows them as dtypes (``jnp.int4``, ``issubdtype``,
# ``iinfo`` / ``finfo``) but holds no arrays of them; making one is a TypeError that says so.
NARROW_INT_NAMES = ("int1", "int2", "int4", "uint1", "uint2", "uint4")
NARROW_FLOAT_NAMES = ("float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn")
NARROW_NAMES = NARROW_INT_NAMES + NARROW_FLOAT_NAMES
NARROW = tuple(np.dtype(getattr(ml_dtypes, n)) for n in NARROW_NAMES)
NARROW_INT, NARROW_FLOAT = NARROW[:len(NARROW_INT_NAMES)], NARROW[len(NARROW_INT_NAMES):]

# The dtype of tangents and cotangents of integer and boolean values (as jax.dtypes.float0).
float0 = np.dtype([("float0", "V")])


def float0_zeros(shape: tuple[int, ...]) -> np.ndarray:
    """An array of ``float0`` (which holds no data): a NumPy array, never an ember Array, as JAX keeps
    them on the host (its ``jnp.zeros(shape, float0)``): the tangent or cotangent of an integer value."""
    return np.zeros(shape, float0)


def is_float0(dt: Any) -> bool:
    """Whether ``dt`` names ``float0``."""
    try:
        return dt is not None and np.dtype(dt) == float0
    except TypeError:
        return False


class extended(np.generic):  # noqa: N801  (JAX's names: jax.dtypes.extended, prng_key)
    """The abstract scalar type of JAX's extended dtypes, for ``issubdtype(x, extended)``. ember
    has none of them yet: no dtype is a subtype."""


class prng_key(extended):  # noqa: N801
    """The abstract scalar type of typed PRNG keys (``issubdtype(k.dtype, prng_key)``): true of
    the ``key<fry>`` dtype (``KeyTy``) of ``ember.random.key``'s keys, not of the raw ``uint32``
    keys of ``PRNGKey``."""


class KeyTy:
    """The dtype of typed PRNG key arrays, ``key<fry>`` (Threefry-2x32: each key element
    overlays two uint32 words). Not a NumPy dtype: ``np.dtype(KeyTy())`` raises, as JAX's
    ``jnp.dtype(k.dtype)`` does; ``issubdtype`` knows it is a ``prng_key``."""

    __slots__ = ("_impl_name", "_tag")
    type = prng_key
    itemsize = 8  # two uint32 words
    kind = "V"

    def __init__(self, impl_name: str = "threefry2x32", tag: str = "fry") -> None:
        self._impl_name, self._tag = impl_name, tag

    @property
    def name(self) -> str:
        return f"key<{self._tag}>"

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__

    def __eq__(self, other: Any) -> builtins.bool:
        return isinstance(other, KeyTy) and other._impl_name == self._impl_name

    def __ne__(self, other: Any) -> builtins.bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((KeyTy, self._impl_name))

    def __reduce__(self) -> tuple:
        return (KeyTy, (self._impl_name, self._tag))


def _key_issubdtype(a: Any, b: Any) -> builtins.bool | None:
    """``issubdtype`` where a key dtype or an extended abstract type is involved, else None."""
    def extended_like(x: Any) -> builtins.bool:
        return isinstance(x, KeyTy) or (isinstance(x, type) and issubclass(x, extended))
    if not (extended_like(a) or extended_like(b)):
        return None
    if isinstance(b, KeyTy):
        return a == b
    a = a.type if isinstance(a, KeyTy) else a
    return isinstance(a, type) and isinstance(b, type) and issubclass(a, b)

SIGNED = (int8, int16, int32, int64)
UNSIGNED = (uint8, uint16, uint32, uint64)
INTEGER = SIGNED + UNSIGNED
FLOATING = (bfloat16, float16, float32, float64) + FLOAT8
COMPLEX = (complex64, complex128)
INEXACT = FLOATING + COMPLEX
ALL = (bool_,) + INTEGER + FLOATING + COMPLEX

# Short names used by the IR printer: f32[3], bf16[], i32[2,2], bool[4].
SHORT_NAME = {
    bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
    bfloat16: "bf16", float16: "f16", float32: "f32", float64: "f64", complex64: "c64", complex128: "c128",
    **{d: "f8_" + n[len("float8_"):] for d, n in zip(FLOAT8, FLOAT8_NAMES)},
}


def dtype(x: Any) -> np.dtype:
    """The NumPy dtype of a dtype-like or of a value (not canonicalized)."""
    if isinstance(x, np.dtype):
        return x
    if x is builtins.bool or x is builtins.int or x is builtins.float or x is builtins.complex:
        return np.dtype(x)
    if isinstance(x, type) and issubclass(x, np.generic):
        return np.dtype(x)
    if isinstance(x, str):
        ml = x == "bfloat16" or x in FLOAT8_NAMES or x in NARROW_NAMES  # ('int4' is ml_dtypes', as in JAX)
        return np.dtype(getattr(ml_dtypes, x)) if ml else np.dtype(x)
    if hasattr(x, "dtype"):
        return np.dtype(x.dtype)
    if isinstance(x, builtins.bool):
        return bool_
    if isinstance(x, builtins.int):
        return int64
    if isinstance(x, builtins.float):
        return float64
    if isinstance(x, builtins.complex):
        return complex128
    return np.dtype(x)


def is_integer(dt: Any) -> builtins.bool:
    return np.dtype(dt) in INTEGER


def is_signed(dt: Any) -> builtins.bool:
    return np.dtype(dt) in SIGNED


def is_unsigned(dt: Any) -> builtins.bool:
    return np.dtype(dt) in UNSIGNED


def is_floating(dt: Any) -> builtins.bool:
    return np.dtype(dt) in FLOATING


def is_complex(dt: Any) -> builtins.bool:
    return np.dtype(dt) in COMPLEX


def is_inexact(dt: Any) -> builtins.bool:
    """Floating or complex: the types that have derivatives and ``finfo``."""
    return np.dtype(dt) in INEXACT


def real_dtype(dt: Any) -> np.dtype:
    """The type of a complex type's parts (``complex64`` -> ``float32``); other types are their own."""
    dt = np.dtype(dt)
    return float32 if dt == complex64 else float64 if dt == complex128 else dt


def complex_dtype(dt: Any) -> np.dtype:
    """The complex type whose parts are ``dt`` (``float64`` -> ``complex128``; half types and
    integers -> ``complex64``, as ``lax.complex`` after promotion), canonicalized."""
    dt = np.dtype(dt)
    if dt in COMPLEX:
        return dt
    return canonicalize_dtype(complex128 if dt in (float64, int64, uint64) else complex64)


def issubdtype(a: Any, b: Any) -> builtins.bool:
    """``np.issubdtype`` that also knows bfloat16 and the float8 types are floating."""
    if (keyed := _key_issubdtype(a, b)) is not None:  # (key<fry>, prng_key, extended)
        return keyed
    a = dtype(a)
    if a in NARROW:
        sign = np.signedinteger if a.name.startswith("int") else np.unsignedinteger
        kinds = (np.integer, np.number, np.generic, sign) if a in NARROW_INT else (np.floating, np.inexact, np.number,
                                                                                      np.generic)
        if b in kinds:
            return True
        try:
            return dtype(b) == a
        except TypeError:
            return False
    if a == bfloat16 or a in FLOAT8:
        if b in (np.floating, np.inexact, np.number, np.generic):
            return True
        try:
            return dtype(b) == a
        except TypeError:  # (another abstract type: np.integer)
            return False
    return np.issubdtype(a, b)


_TO_32: dict[np.dtype, np.dtype] = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


@functools.lru_cache(maxsize=None)
def _canonicalize(dt: np.dtype, x64: builtins.bool) -> np.dtype:
    if dt not in ALL:
        if dt in NARROW:
            raise TypeError(f"ember does not support arrays of dtype {dt}: it knows JAX's sub-byte types "
                            f"({', '.join(NARROW_NAMES)}) as dtypes only; use int8 / uint8 / float32 instead")
        raise TypeError(f"ember does not support dtype {dt}")
    return dt if x64 else _TO_32.get(dt, dt)


def canonicalize_dtype(dt: Any) -> np.dtype:
    """Map a requested dtype to the one ember uses (64-bit -> 32-bit unless x64 is on)."""
    return _canonicalize(dtype(dt), config.enable_x64)


# The requests that do not warn, by (request, x64): an eager ``x.astype(jnp.int32)`` asks each call.
_REQUESTED: dict[tuple, np.dtype] = {}


def requested_dtype(dt: Any) -> np.dtype:
    """A dtype the user asked for by name (``dtype=`` of a public function), canonicalized; a
    64-bit type while x64 is off warns that it is truncated, in JAX's words. Python's ``int``,
    ``float`` and ``complex`` ask for the default type and do not warn."""
    key = (dt, config.enable_x64)
    try:
        return _REQUESTED[key]
    except (KeyError, TypeError):  # (new, or a request that cannot be hashed)
        pass
    canonical = canonicalize_dtype(dt)
    # (by identity: np.dtype('int64') == int, and asks for int64 by name, as JAX reads it)
    python_type = dt is int or dt is float or dt is complex or dt is bool or (
        type(dt) is str and dt in ("int", "float", "complex"))
    if python_type or canonical == dtype(dt) or config.enable_x64:
        try:
            if len(_REQUESTED) >= 256:
                _REQUESTED.clear()
            _REQUESTED[key] = canonical
        except TypeError:
            pass
    else:  # (JAX's words, naming the function the user called)
        level, called = errors.user_call()
        where = f" requested in {called}" if called else ""
        warnings.warn(f"Explicitly requested dtype {dtype(dt).name}{where} is not available, and will be truncated "
                      f"to dtype {canonical.name}. To enable more dtypes, set the jax_enable_x64 configuration "
                      "option or the EMBER_ENABLE_X64 shell environment variable.", UserWarning, stacklevel=level)
    return canonical


def default_int_dtype() -> np.dtype:
    return int64 if config.enable_x64 else int32


def default_float_dtype() -> np.dtype:
    return float64 if config.enable_x64 else float32


def default_complex_dtype() -> np.dtype:
    return complex128 if config.enable_x64 else complex64


def default_uint_dtype() -> np.dtype:
    return uint64 if config.enable_x64 else uint32


def to_inexact_dtype(dt: Any) -> np.dtype:
    """The floating type an integer or bool converts to in ``jnp.sin(x)`` / ``jnp.mean(x)``:
    float32 for up to 32 bits, float64 for 64-bit integers (then canonicalized), as in JAX.
    Complex types are inexact already."""
    dt = dtype(dt)
    if dt in INEXACT:
        return dt
    return canonicalize_dtype(float64 if dt in (int64, uint64) else float32)


# --- the promotion lattice ----------------------------------------------------
# Nodes are dtypes plus the three weak nodes for Python int, float and complex.
WEAK_INT, WEAK_FLOAT, WEAK_COMPLEX = "i*", "f*", "c*"

_LATTICE_UP: dict[Any, list[Any]] = {  # (dtypes and weak nodes)
    bool_: [WEAK_INT],
    WEAK_INT: [uint8, int8],
    uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64], uint64: [WEAK_FLOAT],
    int8: [int16], int16: [int32], int32: [int64], int64: [WEAK_FLOAT],
    WEAK_FLOAT: [bfloat16, float16, WEAK_COMPLEX, *FLOAT8],
    **{f8: [] for f8 in FLOAT8},  # (no bound in common with another floating type)
    bfloat16: [float32], float16: [float32], float32: [float64, complex64], float64: [complex128],
    WEAK_COMPLEX: [complex64], complex64: [complex128], complex128: [],
}


def _upper_bounds() -> dict:
    ub = {}
    for node in _LATTICE_UP:
        seen, stack = set(), [node]
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack.extend(_LATTICE_UP[n])
        ub[node] = frozenset(seen)
    return ub


_UPPER = _upper_bounds()


def _node(dt: np.dtype, weak: builtins.bool):
    if weak:
        if dt in INTEGER:
            return WEAK_INT
        if dt in FLOATING:
            return WEAK_FLOAT
        if dt in COMPLEX:
            return WEAK_COMPLEX
    return dt


# The strict lattice (jax_numpy_dtype_promotion="strict"): a typed value joins only its own type; a
# Python scalar joins any type of its kind or a wider kind (an int an integer, float or complex type).
_STRICT_UPPER = {
    **{node: frozenset({node}) for node in _LATTICE_UP},
    WEAK_COMPLEX: frozenset({WEAK_COMPLEX, *COMPLEX}),
    WEAK_FLOAT: frozenset({WEAK_FLOAT, WEAK_COMPLEX, *FLOATING, *COMPLEX}),
    WEAK_INT: frozenset({WEAK_INT, WEAK_FLOAT, WEAK_COMPLEX, *INTEGER, *FLOATING, *COMPLEX}),
}
_WEAK_NAMES = {WEAK_INT: str(builtins.int), WEAK_FLOAT: str(builtins.float), WEAK_COMPLEX: str(builtins.complex)}


@functools.lru_cache(maxsize=4096)
def _join(nodes: tuple, strict: builtins.bool = False) -> Any:
    upper = _STRICT_UPPER if strict else _UPPER
    common = functools.reduce(frozenset.intersection, (upper[n] for n in nodes))
    # The least upper bound is the unique common bound that is below all others.
    for candidate in common:
        if all(other in upper[candidate] for other in common):
            return candidate
    names = tuple(n.name if isinstance(n, np.dtype) else _WEAK_NAMES[n] for n in nodes)
    if strict:
        raise TypePromotionError(
            f"Input dtypes {names} have no available implicit dtype promotion path when "
            "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the desired output type, or set "
            "jax_numpy_dtype_promotion=standard.")
    raise TypePromotionError(  # (only the float8 types lack a common bound with others, as in JAX)
        f"Input dtypes {names} have no available implicit dtype promotion path. To avoid unintended promotion, "
        "8-bit floats do not support implicit promotion. If you'd like your inputs to be promoted to another "
        "type, you can do so explicitly using e.g. x.astype('float32')")


class TypePromotionError(ValueError):
    """Operands whose types have no common type (JAX's ``jax.dtypes.TypePromotionError``: a
    float8 type with another floating or complex type; under strict promotion, any two types)."""


def promote_types_weak(*typed: tuple[np.dtype, builtins.bool]) -> tuple[np.dtype, builtins.bool]:
    """Join of (dtype, weak_type) pairs; returns a canonical (dtype, weak_type)."""
    nodes = tuple(_node(np.dtype(d), w) for d, w in typed)
    j = _join(nodes, config.numpy_dtype_promotion == "strict")
    if j == WEAK_INT:
        return default_int_dtype(), True
    if j == WEAK_FLOAT:
        return default_float_dtype(), True
    if j == WEAK_COMPLEX:
        return default_complex_dtype(), True
    return canonicalize_dtype(j), False


def promote_types(a: Any, b: Any) -> np.dtype:
    """``jnp.promote_types``: the join of two (strong) dtypes."""
    return promote_types_weak((dtype(a), False), (dtype(b), False))[0]


def is_weakly_typed(x: Any) -> builtins.bool:
    """Python scalars are weak; arrays carry their own flag."""
    if type(x) in (builtins.int, builtins.float, builtins.complex):
        return True
    aval = getattr(x, "aval", None)
    return bool(aval is not None and aval.weak_type)


def value_dtype_and_weak(x: Any) -> tuple[np.dtype, builtins.bool]:
    """The canonical dtype and weak flag of any value ember accepts."""
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval.dtype, aval.weak_type
    t = type(x)
    if t is builtins.bool:
        return bool_, False
    if t is builtins.int:
        return default_int_dtype(), True
    if t is builtins.float:
        return default_float_dtype(), True
    if t is builtins.complex:
        return default_complex_dtype(), True
    return canonicalize_dtype(dtype(x)), False


def result_type(*args: Any) -> np.dtype:
    """``jnp.result_type``: promotion over values and dtypes (weak rules for scalars)."""
    return _result_type_weak(args)[0]


def _result_type_weak(args) -> tuple[np.dtype, builtins.bool]:
    typed = []
    for a in args:
        if isinstance(a, (np.dtype, str)) or (isinstance(a, type) and a not in (builtins.int, builtins.float,
                                                                                 builtins.complex)):
            typed.append((dtype(a), False))
        elif a is builtins.int:
            typed.append((int32, True))
        elif a is builtins.float:
            typed.append((float32, True))
        elif a is builtins.complex:
            typed.append((complex64, True))
        else:
            typed.append(value_dtype_and_weak(a))
    return promote_types_weak(*typed)


class finfo(ml_dtypes.finfo):
    """``jnp.finfo`` (knows bfloat16; a complex type's is its parts', as in NumPy and JAX)."""


def itemsize_bits(dt: Any) -> int:
    """The bits of one element of ``dt``: the sub-byte types' own width (int4: 4), else 8 per byte."""
    dt = np.dtype(dt)
    if dt.kind == "V" and dt.itemsize == 1 and dt != float0:  # (ml_dtypes' types: int4, float8, ...)
        try:
            return ml_dtypes.iinfo(dt).bits
        except ValueError:
            return ml_dtypes.finfo(dt).bits
    return dt.itemsize * 8


def scalar_type_of(x: Any) -> type:
    """The Python scalar type of ``x``'s dtype: bool, int, float or complex."""
    dt = dtype(x)
    if dt == bool_:
        return builtins.bool
    if is_integer(dt):
        return builtins.int
    if is_complex(dt):
        return builtins.complex
    if is_inexact(dt):
        return builtins.float
    raise TypeError(f"Invalid scalar value {x!r}")


def lowest(dt: Any) -> Any:
    """The identity of ``max`` over ``dt``: False, -inf (complex: -inf + 0j, XLA's), or the
    least integer."""
    dt = dtype(dt)
    if dt == bool_:
        return False
    return -np.inf if is_inexact(dt) else iinfo(dt).min


def highest(dt: Any) -> Any:
    """The identity of ``min`` over ``dt``: True, inf, or the greatest integer."""
    dt = dtype(dt)
    if dt == bool_:
        return True
    return np.inf if is_inexact(dt) else iinfo(dt).max


def iinfo(dt: Any) -> np.iinfo | ml_dtypes.iinfo:
    dt = dtype(dt)
    return ml_dtypes.iinfo(dt) if dt in NARROW_INT else np.iinfo(dt)


def convert_values(x: np.ndarray, new_dtype: np.dtype) -> np.ndarray:
    """NumPy conversion with XLA's semantics: float -> int saturates and maps NaN to 0."""
    x = np.asarray(x)
    if x.dtype == new_dtype:
        return x
    if is_complex(x.dtype) and not is_complex(new_dtype):  # the real part (callers warn, as JAX)
        if new_dtype == bool_:
            return x != 0
        x = x.real
    if is_floating(x.dtype) and is_integer(new_dtype):
        info = np.iinfo(new_dtype)
        # NaN to 0, clipped, truncated; in place, by ufuncs (a fifth of nan_to_num and np.clip's cost)
        wide = x.astype(np.float64)
        np.copyto(wide, 0.0, where=np.isnan(wide))
        np.minimum(wide, float(info.max), out=wide)
        np.maximum(wide, float(info.min), out=wide)
        if new_dtype.itemsize <= 4:  # (float64 holds both bounds exactly)
            return wide.astype(new_dtype)
        # float64 cannot hold a 64-bit max exactly (it rounds up): clip in the integer domain afterwards.
        out = np.where(wide >= float(info.max), info.max, wide.astype(new_dtype, casting="unsafe"))
        return np.asarray(out, dtype=new_dtype)
    if new_dtype == bool_:
        return x != 0
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(new_dtype)
