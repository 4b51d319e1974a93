"""``ember.lax``: the primitive operations and structured control flow.

lax functions are thin: they bind a primitive. They do not promote dtypes or
broadcast (except that scalars broadcast in elementwise operations); that is
``ember.numpy``'s job.
"""
from ember.core.calls import optimization_barrier_p  # noqa: E402,F401
from ember.core.primitive import Primitive as _Primitive  # noqa: E402
from ember.lax import (  # noqa: E402  (the modules whose primitives ``lax`` names)
    control_flow as _control_flow,
    convolution as _convolution,
    dot as _dot,
    elementwise as _elementwise,
    indexing as _indexing,
    linalg,  # noqa: E402,F401  (lax.linalg, as jax.lax.linalg)
    parallel as _parallel,
    reductions as _reductions,
    shapes as _shapes,
    special as _special,
)
from ember.lax.associative_scan import associative_scan  # noqa: E402,F401
from ember.lax.composites import *  # noqa: E402,F401,F403
from ember.lax.control_flow import *  # noqa: E402,F401,F403
from ember.lax.convolution import *  # noqa: E402,F401,F403
from ember.lax.creation import full, full_like  # noqa: E402,F401
from ember.lax.dot import *  # noqa: E402,F401,F403
from ember.lax.elementwise import (  # noqa: F401  # noqa: F401
    ELEMENTWISE,
    RoundingMethod,
    abs,
    acos,
    acosh,
    add,
    and_,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitcast_convert_type,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    cbrt,
    ceil,
    clamp,
    complex,
    conj,
    convert_element_type,
    cos,
    cosh,
    digamma,
    div,
    eq,
    erf,
    erf_inv,
    erfc,
    exp,
    exp2,
    expm1,
    floor,
    ge,
    gt,
    imag,
    integer_pow,
    is_finite,
    le,
    lgamma,
    log,
    log1p,
    logistic,
    lt,
    max,
    min,
    mul,
    ne,
    neg,
    nextafter,
    not_,
    or_,
    population_count,
    pow,
    real,
    reciprocal,
    rem,
    round,
    rsqrt,
    select,
    select_n,
    shift_left,
    shift_right_arithmetic,
    shift_right_logical,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    sub,
    tan,
    tanh,
    xor,
)
from ember.lax.fft import (  # noqa: E402,F401
    FftType,
    fft,
    fft_p,  # noqa: E402,F401  (``lax.fft`` is the function, not the module)
)
from ember.lax.indexing import *  # noqa: E402,F401,F403
from ember.lax.parallel import *  # noqa: E402,F401,F403
from ember.lax.reductions import *  # noqa: E402,F401,F403
from ember.lax.shapes import (  # noqa: F401
    INDEX_REMAPPING,
    broadcast,
    broadcast_in_dim,
    broadcast_to_rank,
    broadcasted_iota,
    concatenate,
    dynamic_index_in_dim,
    dynamic_slice,
    dynamic_slice_in_dim,
    dynamic_update_index_in_dim,
    dynamic_update_slice,
    dynamic_update_slice_in_dim,
    expand_dims,
    index_in_dim,
    iota,
    pad,
    reshape,
    rev,
    slice,
    slice_in_dim,
    squeeze,
    transpose,
)
from ember.lax.special import betainc, igamma, igammac  # noqa: E402,F401
from ember.lax.stop_gradient import stop_gradient, stop_gradient_p  # noqa: E402,F401

# The primitive objects, under the names JAX's lax gives them (``lax.add_p``, ``lax.scatter_add_p``
# for "scatter-add"): libraries compare an equation's primitive with them, or bind them.
globals().update({
    value.name.replace("-", "_") + "_p": value
    for module in (_control_flow, _convolution, _dot, _elementwise, _indexing, _parallel, _reductions, _shapes,
                   _special)
    for name, value in vars(module).items() if name.endswith("_p") and isinstance(value, _Primitive)
})
