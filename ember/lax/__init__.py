"""``ember.lax``: the primitive operations and structured control flow.

lax functions are thin: they bind a primitive. They do not promote dtypes or
broadcast (except that scalars broadcast in elementwise operations); that is
``ember.numpy``'s job.
"""
from ember.lax.elementwise import (  # noqa: F401
    ELEMENTWISE, RoundingMethod, abs, acos, acosh, add, and_, asin, asinh, atan, atan2, atanh, bitwise_and,
    bitwise_not, bitwise_or, bitwise_xor, cbrt, ceil, clamp, cos, cosh, digamma, div, eq, erf, erf_inv, erfc,
    exp, exp2, expm1, floor, ge, gt, integer_pow, is_finite, le, lgamma, log, log1p, logistic, lt, max, min,
    mul, ne, neg, nextafter, not_, or_, population_count, pow, reciprocal, rem, round, rsqrt, select,
    select_n, shift_left, shift_right_arithmetic, shift_right_logical, sign, sin, sinh, sqrt, square, sub,
    tan, tanh, xor,
)
from ember.lax.conversions import bitcast_convert_type, convert_element_type  # noqa: F401
from ember.lax.shapes import (  # noqa: F401
    INDEX_REMAPPING, broadcast, broadcast_in_dim, broadcast_to_rank, broadcasted_iota, concatenate,
    dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim, dynamic_update_index_in_dim,
    dynamic_update_slice, dynamic_update_slice_in_dim, expand_dims, index_in_dim, iota, pad, reshape, rev,
    slice, slice_in_dim, squeeze, transpose,
)
from ember.lax.indexing import *  # noqa: E402,F401,F403
from ember.lax.reductions import *  # noqa: E402,F401,F403
from ember.lax.dot import *  # noqa: E402,F401,F403
from ember.lax.convolution import *  # noqa: E402,F401,F403
from ember.lax.control_flow import *  # noqa: E402,F401,F403
from ember.lax import linalg  # noqa: E402,F401  (lax.linalg, as jax.lax.linalg)
from ember.lax.associative_scan import associative_scan  # noqa: E402,F401
from ember.transforms.stop_gradient import stop_gradient  # noqa: E402,F401
