"""``ember.numpy``: the NumPy API as JAX's ``jax.numpy`` defines it (float32 by default),
written only in terms of ``ember.lax``."""
import builtins as _builtins

import numpy as _np

from ember import dtypes as _dtypes
from ember.core.array import Array as ndarray  # noqa: F401
from ember.dtypes import finfo, iinfo, issubdtype, promote_types, result_type  # noqa: F401
from ember.numpy.array_api import __array_api_version__, __array_namespace_info__  # noqa: F401
from ember.numpy.core import array, asarray, broadcast_shapes, broadcast_to  # noqa: F401
from ember.numpy.creation import (  # noqa: F401
    arange,
    copy,
    empty,
    empty_like,
    eye,
    from_dlpack,
    frombuffer,
    full,
    full_like,
    identity,
    linspace,
    logspace,
    meshgrid,
    ones,
    ones_like,
    tri,
    zeros,
    zeros_like,
)
from ember.numpy.scalar_types import (  # noqa: F401
    bfloat16,
    bool_,
    cdouble,
    complex64,
    complex128,
    csingle,
    double,
    float4_e2m1fn,
    float6_e2m3fn,
    float6_e3m2fn,
    float8_e3m4,
    float8_e4m3,
    float8_e4m3b11fnuz,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
    float16,
    float32,
    float64,
    float_,
    int1,
    int2,
    int4,
    int8,
    int16,
    int32,
    int64,
    int_,
    single,
    uint,
    uint1,
    uint2,
    uint4,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ember.numpy.ufuncs import (  # noqa: F401
    abs,
    absolute,
    acos,
    acosh,
    add,
    angle,
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    around,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    cbrt,
    ceil,
    clip,
    conj,
    conjugate,
    copysign,
    cos,
    cosh,
    deg2rad,
    degrees,
    divide,
    divmod,
    equal,
    exp,
    exp2,
    expm1,
    fabs,
    fix,
    float_power,
    floor,
    floor_divide,
    fmod,
    greater,
    greater_equal,
    heaviside,
    hypot,
    imag,
    invert,
    iscomplex,
    isfinite,
    isinf,
    isnan,
    isneginf,
    isposinf,
    isreal,
    left_shift,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    logaddexp2,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    nan_to_num,
    negative,
    nextafter,
    not_equal,
    positive,
    pow,
    power,
    rad2deg,
    radians,
    real,
    reciprocal,
    remainder,
    right_shift,
    rint,
    round,
    sign,
    signbit,
    sin,
    sinc,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    trunc,
    where,
)

bool = bool_  # noqa: A001  (jnp.bool, as in NumPy 2)
pi = _np.pi
e = _np.e
euler_gamma = _np.euler_gamma
inf = _np.inf
nan = _np.nan
newaxis = None
integer, signedinteger, unsignedinteger = _np.integer, _np.signedinteger, _np.unsignedinteger
floating, inexact, number, generic = _np.floating, _np.inexact, _np.number, _np.generic
complexfloating, character, flexible = _np.complexfloating, _np.character, _np.flexible  # (abstract: issubdtype)
dtype = _np.dtype
object_ = _np.object_  # (NumPy's, as in JAX: for ``issubdtype`` and dtype checks; ember holds no object arrays)
ComplexWarning = _np.exceptions.ComplexWarning  # (what lax.convert_element_type warns with, complex to real)
complex_ = complex128  # (NumPy's name; canonicalized to complex64 with x64 off)


def isdtype(dtype, kind):
    """NumPy's ``isdtype``; ``kind`` is a kind name, a dtype, or a tuple of them. bfloat16,
    unknown to NumPy, is of the kinds float32 is of."""
    if isinstance(kind, tuple):
        return _builtins.any(isdtype(dtype, k) for k in kind)
    dtype = _dtypes.dtype(dtype)
    if not isinstance(kind, str):
        return dtype == _dtypes.dtype(kind)
    return _np.isdtype(_np.dtype(float32) if dtype == bfloat16 else dtype, kind)


from ember.numpy import (  # noqa: E402
    array_methods as _array_methods,  # (operators on Array / Tracer)
    arraylike as _arraylike,  # (guards the namespace, below)
    fft,  # noqa: F401  (jnp.fft, as jax.numpy.fft)
    keys as _keys,  # (lets the namespace's joining and selecting functions take key arrays, below)
    staging as _staging,  # (stages the namespace's functions as JAX does, below)
)
from ember.numpy.array_functions import *  # noqa: E402,F401,F403
from ember.numpy.array_utils import *  # noqa: E402,F401,F403
from ember.numpy.calculus import *  # noqa: E402,F401,F403
from ember.numpy.comparison import *  # noqa: E402,F401,F403
from ember.numpy.convolution import *  # noqa: E402,F401,F403
from ember.numpy.float_functions import *  # noqa: E402,F401,F403
from ember.numpy.grids import *  # noqa: E402,F401,F403
from ember.numpy.index_functions import *  # noqa: E402,F401,F403
from ember.numpy.integer_functions import *  # noqa: E402,F401,F403
from ember.numpy.io import *  # noqa: E402,F401,F403
from ember.numpy.linalg import *  # noqa: E402,F401,F403
from ember.numpy.nan_quantiles import *  # noqa: E402,F401,F403
from ember.numpy.padding import *  # noqa: E402,F401,F403
from ember.numpy.polynomial import *  # noqa: E402,F401,F403
from ember.numpy.reductions import *  # noqa: E402,F401,F403
from ember.numpy.sets import *  # noqa: E402,F401,F403
from ember.numpy.shape_ops import *  # noqa: E402,F401,F403
from ember.numpy.sorting import *  # noqa: E402,F401,F403
from ember.numpy.statistics import *  # noqa: E402,F401,F403
from ember.numpy.ufunc_api import *  # noqa: E402,F401,F403
from ember.numpy.vectorization import *  # noqa: E402,F401,F403
from ember.numpy.windows import *  # noqa: E402,F401,F403

# As in JAX, stack, concatenate, where, broadcast_to and expand_dims take typed PRNG key arrays.
_keys.take_keys(globals())
# As in JAX, these functions are named jit sub-programs in traced programs (ember.numpy.staging).
_staging.stage(globals(), _staging.STAGED)
_staging.replay_eagerly(globals(), _staging.REPLAYED)  # (those JAX jits inline: eager calls replay)
_array_methods.use_staged(globals())  # (and so are the operators and methods that call them)
# As in JAX, the public functions refuse lists and tuples where they take arrays (``jnp.sum([1, 2])``
# is a TypeError; ``jnp.asarray`` converts them). ember's modules call each other unguarded.
_arraylike.guard(globals(), _arraylike.ARRAYLIKE_ARGS)
vars(linalg).update(linalg.ARRAY_API_LINALG)  # noqa: F405  (jnp.linalg.diagonal, trace, ...: the Array API's)
_arraylike.guard(vars(linalg), _arraylike.LINALG_ARRAYLIKE_ARGS, prefix="jnp.linalg.")  # noqa: F405
