"""Special functions (``jax.scipy.special``), written with ``ember.numpy`` and ``ember.lax`` only.

Arguments promote as in JAX: integers and booleans to the default float (float32 unless
x64 is on), Python scalars stay weak. Formulations are chosen for accuracy in the tails:
``log_ndtr`` switches to an asymptotic series far left, ``ndtri`` refines a rational
first guess with Halley steps on ``log_ndtr``; the modified Bessel functions ``i0e`` and ``i1e``
are Cephes' Chebyshev expansions on [0, 8] and in ``1/x`` beyond.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import dtypes, lax
from ember.nn import functions as nn_functions
from ember.numpy.core import ensure_array, promote_dtypes_inexact

__all__ = [
    "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "digamma", "entr", "erf", "erfc", "erfinv", "expit",
    "factorial", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "i0", "i0e", "i1", "i1e",
    "kl_div", "log_ndtr", "log_softmax",
    "loggamma", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "poch", "rel_entr", "softmax",
    "xlog1py", "xlogy",
]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _inexact(*args: Any) -> Any:
    """The arguments promoted together to one floating dtype (a single one unpacked)."""
    promoted = promote_dtypes_inexact(*(ensure_array(a) for a in args))
    return promoted[0] if len(args) == 1 else promoted


def _strong(x: Any) -> Any:
    """``x`` without a weak type: JAX's ndtr family, multigammaln and the softmax/logsumexp
    reductions return strongly typed results even for Python scalars."""
    return lax.convert_element_type(x, x.dtype)


def erf(x: Any) -> Any:
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t**2) dt``."""
    return lax.erf(_inexact(x))


def erfc(x: Any) -> Any:
    """``1 - erf(x)``, accurate where ``erf(x)`` is near 1."""
    return lax.erfc(_inexact(x))


def erfinv(x: Any) -> Any:
    """The inverse of ``erf`` on (-1, 1); +-inf at +-1, NaN outside."""
    return lax.erf_inv(_inexact(x))


def gammaln(x: Any) -> Any:
    """``log(abs(gamma(x)))``."""
    return lax.lgamma(_inexact(x))


def digamma(x: Any) -> Any:
    """The logarithmic derivative of the gamma function."""
    return lax.digamma(_inexact(x))


def betaln(a: Any, b: Any) -> Any:
    """``log(abs(beta(a, b)))`` as ``gammaln(a) + gammaln(b) - gammaln(a + b)``."""
    a, b = _inexact(a, b)
    return jnp.subtract(jnp.add(lax.lgamma(a), lax.lgamma(b)), lax.lgamma(jnp.add(a, b)))


def gammainc(a: Any, x: Any) -> Any:
    """The regularized lower incomplete gamma function ``P(a, x)`` (``lax.igamma``)."""
    a, x = jnp.broadcast_arrays(*_real("gammainc", a, x))
    return lax.igamma(a, x)


def gammaincc(a: Any, x: Any) -> Any:
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)`` (``lax.igammac``:
    computed directly where it is small)."""
    a, x = jnp.broadcast_arrays(*_real("gammaincc", a, x))
    return lax.igammac(a, x)


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularized incomplete beta function ``I_x(a, b)`` (``lax.betainc``)."""
    a, b, x = jnp.broadcast_arrays(*_real("betainc", a, b, x))
    return lax.betainc(a, b, x)


def _real(name: str, *args: Any) -> Any:
    """The arguments promoted together (as ``_inexact``), refused when complex (JAX's message)."""
    promoted = _inexact(*args)
    first = promoted if len(args) == 1 else promoted[0]
    if dtypes.is_complex(first.dtype):
        raise ValueError(f"{name} does not support complex-valued inputs.")
    return promoted


def gammasgn(x: Any) -> Any:
    """The sign of the gamma function: 1 or -1, -1 at -0.0 (the pole's side), NaN at the poles
    (the non-positive integers) and at NaN."""
    x = _real("gammasgn", x)
    floor_x = jnp.floor(x)
    negative = x < 0
    nan = jnp.logical_or(jnp.logical_and(negative, x == floor_x), jnp.isnan(x))
    minus = jnp.logical_or(jnp.logical_and(negative, jnp.remainder(floor_x, 2) != 0),
                           jnp.logical_and(x == 0, jnp.signbit(x)))
    typ = np.dtype(x.dtype).type
    return jnp.select([nan, minus], [typ(np.nan), typ(-1.0)], typ(1.0))


def gamma(x: Any) -> Any:
    """The gamma function of real ``x``, as ``gammasgn(x) * exp(gammaln(x))``: +-inf at +-0,
    NaN at the negative integers."""
    x = _real("gamma", x)
    return jnp.multiply(gammasgn(x), jnp.exp(lax.lgamma(x)))


def loggamma(x: Any) -> Any:
    """The principal branch of ``log(gamma(x))`` for real ``x``: ``gammaln(x)`` for ``x > 0``, NaN
    elsewhere (where the principal value is complex)."""
    x = _real("loggamma", x)
    return jnp.where(x > 0, lax.lgamma(x), np.nan)


def beta(a: Any, b: Any) -> Any:
    """The beta function ``gamma(a) gamma(b) / gamma(a + b)``, as ``exp(betaln(a, b))`` with the
    sign of the three gamma factors."""
    a, b = _real("beta", a, b)
    sign = jnp.multiply(jnp.multiply(gammasgn(a), gammasgn(b)), gammasgn(jnp.add(a, b)))
    return jnp.multiply(sign, jnp.exp(betaln(a, b)))


def factorial(n: Any, exact: bool = False) -> Any:
    """``n!`` as ``gamma(n + 1)`` (so also for non-integer ``n``), 0 for negative ``n``. Only
    ``exact=False``: an exact integer result is not supported (as in JAX)."""
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n = _inexact(n)
    return jnp.where(n < 0, 0, jnp.exp(lax.lgamma(jnp.add(n, 1))))


def comb(N: Any, k: Any, *, repetition: bool = False) -> Any:
    """The number of combinations of ``N`` things taken ``k`` at a time, as
    ``exp(gammaln(N+1) - gammaln(k+1) - gammaln(N-k+1))`` (floating point, as SciPy's
    ``exact=False``): 0 unless ``0 <= k <= N``. With ``repetition``, ``comb(N + k - 1, k)``, and 1
    for ``k == 0``, ``N >= 0``."""
    N, k = _inexact(N, k)
    if repetition:
        return jnp.where(jnp.logical_and(k == 0, N >= 0), 1.0, comb(jnp.subtract(jnp.add(N, k), 1), k))
    inside = jnp.logical_and(jnp.logical_and(k <= N, N >= 0), k >= 0)
    safe_n, safe_k = jnp.where(inside, N, 0.0), jnp.where(inside, k, 0.0)
    log_comb = jnp.subtract(jnp.subtract(lax.lgamma(jnp.add(safe_n, 1)), lax.lgamma(jnp.add(safe_k, 1))),
                            lax.lgamma(jnp.add(jnp.subtract(safe_n, safe_k), 1)))
    return jnp.where(inside, jnp.exp(log_comb), 0.0)


def poch(z: Any, m: Any) -> Any:
    """The Pochhammer symbol (rising factorial) ``gamma(z + m) / gamma(z)``; 1 where ``m == 0``."""
    z, m = _real("poch", z, m)
    return jnp.where(m == 0, jnp.array(1, dtype=z.dtype), jnp.divide(gamma(jnp.add(z, m)), gamma(z)))


def rel_entr(p: Any, q: Any) -> Any:
    """The elementwise relative entropy ``p log(p / q)``: 0 where ``p == 0`` and ``q >= 0``,
    +inf where either is negative or only ``q`` is 0."""
    p, q = _real("rel_entr", p, q)
    both_positive = jnp.logical_and(p > 0, q > 0)
    p_zero = jnp.logical_and(p == 0, q >= 0)
    safe_p, safe_q = jnp.where(both_positive, p, 1), jnp.where(both_positive, q, 1)
    log_ratio = jnp.subtract(xlogy(safe_p, safe_p), xlogy(safe_p, safe_q))
    return jnp.where(both_positive, log_ratio, jnp.where(p_zero, 0, np.inf))


def kl_div(p: Any, q: Any) -> Any:
    """The elementwise Kullback-Leibler divergence term ``rel_entr(p, q) - p + q``."""
    p, q = _real("kl_div", p, q)
    return jnp.add(jnp.subtract(rel_entr(p, q), p), q)


def _boxcox_of_log(log_x: Any, lmbda: Any) -> Any:
    """``expm1(lmbda * log_x) / lmbda``, and ``log_x`` itself where ``lmbda == 0`` (its limit)."""
    zero = lmbda == 0
    safe_lmbda = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, log_x, jnp.divide(jnp.expm1(jnp.multiply(safe_lmbda, log_x)), safe_lmbda))


def boxcox(x: Any, lmbda: Any) -> Any:
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda``, ``log(x)`` where ``lmbda == 0``."""
    x, lmbda = _inexact(x, lmbda)
    return _boxcox_of_log(jnp.log(x), lmbda)


def boxcox1p(x: Any, lmbda: Any) -> Any:
    """The Box-Cox transform of ``1 + x``, accurate for small ``x``: ``((1 + x)**lmbda - 1) / lmbda``,
    ``log1p(x)`` where ``lmbda == 0``."""
    x, lmbda = _inexact(x, lmbda)
    return _boxcox_of_log(jnp.log1p(x), lmbda)


# Cephes' Chebyshev coefficients (i0.c, i1.c) for exp(-x) I0(x) and exp(-x) I1(x) / x on [0, 8]
# (argument x/2 - 2), and for exp(-x) sqrt(x) I0(x) and exp(-x) sqrt(x) I1(x) on (8, inf)
# (argument 32/x - 2). Float32 uses the last terms only (Cephes' i0ef.c, i1ef.c): the leading
# ones are below its precision.
_I0E_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
    1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
    -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
    1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
    1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1,
)
_I0E_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)
_I1E_A = (
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
    9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
    -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
    4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
    -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
    2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
    -1.76416518357834055153e-1, 2.52587186443633654823e-1,
)
_I1E_B = (
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
    3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
    -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
    7.78576235018280120474e-1,
)
_FLOAT32_TERMS = {"i0e_a": 18, "i0e_b": 7, "i1e_a": 17, "i1e_b": 7}


def _chebyshev(y: Any, coefficients: tuple[float, ...]) -> Any:
    """Cephes' ``chbevl``: the Chebyshev series ``sum c_k T_k(y/2)`` (halved first term), by
    Clenshaw's recurrence from the highest-order coefficient (the first)."""
    b0, b1, b2 = jnp.add(jnp.multiply(y, 0), coefficients[0]), 0, 0
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = jnp.add(jnp.subtract(jnp.multiply(y, b1), b2), c)
    return jnp.multiply(0.5, jnp.subtract(b0, b2))


def _bessel_scaled(x: Any, name: str, small: tuple[float, ...], large: tuple[float, ...]) -> Any:
    """``exp(-|x|) I_n(|x|)`` (over ``|x|`` for n=1) by Cephes' two expansions; narrow floats
    are computed in float32. Each expansion sees arguments in its own range only, so the one
    not taken adds neither NaN nor inf to values or gradients."""
    x = _real(name, x)
    dtype = x.dtype
    if dtype != np.float64:
        small = small[-_FLOAT32_TERMS[name + "_a"]:]
        large = large[-_FLOAT32_TERMS[name + "_b"]:]
        if dtype != np.float32:
            x = x.astype(np.float32)
    ax = jnp.multiply(x, jnp.sign(x))  # |x|, with derivative 0 at 0 (where both functions are flat)
    in_small = ax <= 8
    near = _chebyshev(jnp.subtract(jnp.multiply(0.5, jnp.where(in_small, ax, 0)), 2), small)
    far_x = jnp.where(in_small, 8, ax)
    far = jnp.divide(_chebyshev(jnp.subtract(jnp.divide(32, far_x), 2), large), jnp.sqrt(far_x))
    return x, in_small, near, far, dtype


def _narrow(x: Any, dtype: Any) -> Any:
    """``x`` back in the argument's ``dtype`` (a narrow float computed in float32), weak type kept."""
    return x if x.dtype == dtype else lax.convert_element_type(x, dtype)


def i0e(x: Any) -> Any:
    """The exponentially scaled modified Bessel function of the first kind of order 0,
    ``exp(-|x|) i0(x)``."""
    x, in_small, near, far, dtype = _bessel_scaled(x, "i0e", _I0E_A, _I0E_B)
    return _narrow(jnp.where(in_small, near, far), dtype)


def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind of order 0, ``exp(|x|) i0e(x)``."""
    x = _real("i0", x)
    return jnp.multiply(jnp.exp(jnp.multiply(x, jnp.sign(x))), i0e(x))


def i1e(x: Any) -> Any:
    """The exponentially scaled modified Bessel function of the first kind of order 1,
    ``exp(-|x|) i1(x)`` (odd in ``x``)."""
    x, in_small, near, far, dtype = _bessel_scaled(x, "i1e", _I1E_A, _I1E_B)
    return _narrow(jnp.where(in_small, jnp.multiply(x, near), jnp.multiply(jnp.sign(x), far)), dtype)


def i1(x: Any) -> Any:
    """The modified Bessel function of the first kind of order 1, ``exp(|x|) i1e(x)``."""
    x = _real("i1", x)
    return jnp.multiply(jnp.exp(jnp.multiply(x, jnp.sign(x))), i1e(x))


def multigammaln(a: Any, d: int) -> Any:
    """The log of the multivariate gamma function of dimension ``d`` (a static int):
    ``d(d-1)/4 log(pi) + sum_{j<d} gammaln(a - j/2)``."""
    d = int(d)
    if d < 1:
        raise ValueError(f"multigammaln: the dimension d must be a positive integer, got {d}")
    a = _inexact(a)
    terms = jnp.stack([lax.lgamma(jnp.subtract(a, j / 2)) for j in range(d)])
    return _strong(jnp.add(jnp.sum(terms, axis=0), d * (d - 1) / 4 * math.log(math.pi)))


def expit(x: Any) -> Any:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return lax.logistic(_inexact(x))


def logit(x: Any) -> Any:
    """The inverse of ``expit``: ``log(x / (1 - x))``."""
    x = _inexact(x)
    return jnp.log(jnp.divide(x, jnp.subtract(1, x)))


def xlogy(x: Any, y: Any) -> Any:
    """``x * log(y)``, defined as 0 where ``x == 0`` (even where ``y`` is 0), unless ``y`` is NaN
    (in either part): NaN propagates, as JAX's ``where(x != 0 | y != y, x * log(y), 0)``."""
    x, y = _inexact(x, y)
    keep = (x != 0) | (y != y)
    safe_y = jnp.where(keep, y, 1)  # keeps log(0) out of the result and out of its gradient
    return jnp.where(keep, jnp.multiply(x, jnp.log(safe_y)), 0)


def xlog1py(x: Any, y: Any) -> Any:
    """``x * log1p(y)``, defined as 0 where ``x == 0`` (even where ``y`` is -1), unless ``y`` is NaN
    (as ``xlogy``, and JAX)."""
    x, y = _inexact(x, y)
    keep = (x != 0) | (y != y)
    safe_y = jnp.where(keep, y, 0)
    return jnp.where(keep, jnp.multiply(x, jnp.log1p(safe_y)), 0)


def entr(x: Any) -> Any:
    """The elementwise entropy ``-x * log(x)``: 0 at 0, -inf for negative ``x``."""
    x = _inexact(x)
    if dtypes.is_complex(x.dtype):  # as JAX's message and type
        raise ValueError("entr does not support complex-valued inputs.")
    positive = x > 0
    safe_x = jnp.where(positive, x, 1)
    return jnp.where(positive, jnp.negative(jnp.multiply(safe_x, jnp.log(safe_x))),
                     jnp.where(x == 0, 0, -np.inf))


def ndtr(x: Any) -> Any:
    """The standard normal CDF, as ``erfc(-x / sqrt(2)) / 2`` (accurate in the left tail)."""
    x = _inexact(x)
    return _strong(jnp.multiply(0.5, lax.erfc(jnp.multiply(x, -1 / math.sqrt(2)))))


def _log_ndtr_left_tail(x: Any, series_order: int) -> Any:
    """``log(ndtr(x))`` for very negative ``x``: the asymptotic (Mills ratio) series
    ``-x^2/2 - log(-x) - log(sqrt(2 pi)) + log(1 + sum_n (-1)^n (2n-1)!! / x^(2n))``."""
    inverse_square = jnp.reciprocal(jnp.square(x))
    total, term = jnp.ones_like(x), jnp.ones_like(x)
    for n in range(1, series_order + 1):
        term = jnp.multiply(term, jnp.multiply(inverse_square, -(2 * n - 1)))
        total = jnp.add(total, term)
    leading = jnp.subtract(jnp.multiply(-0.5, jnp.square(x)), jnp.log(jnp.negative(x)))
    return jnp.add(jnp.subtract(leading, _LOG_SQRT_2PI), jnp.log(total))


def log_ndtr(x: Any, series_order: int = 3) -> Any:
    """``log(ndtr(x))`` without underflow or cancellation: ``log1p(-ndtr(-x))`` right of 0,
    ``log(ndtr(x))`` down to -20 (float64) or -10 (float32 and narrower), and left of that
    the asymptotic series with ``series_order`` terms (a static int in [0, 30])."""
    series_order = int(series_order)
    if not 0 <= series_order <= 30:
        raise ValueError(f"series_order must be in [0, 30], got {series_order}")
    x = _inexact(x)
    lower = -20.0 if x.dtype == np.float64 else -10.0
    # Every branch sees a safe input, so the unused ones add neither NaN nor inf gradients.
    right = jnp.log1p(jnp.negative(ndtr(jnp.negative(jnp.maximum(x, 0)))))
    middle = jnp.log(ndtr(jnp.clip(x, lower, 0)))
    left = _log_ndtr_left_tail(jnp.minimum(x, lower), series_order)
    return _strong(jnp.where(x > 0, right, jnp.where(x < lower, left, middle)))


def _ndtri_first_guess(p: Any) -> Any:
    """Abramowitz & Stegun 26.2.23 for ``p`` in (0, 0.5]: the quantile to within 4.5e-4."""
    t = jnp.sqrt(jnp.multiply(-2, jnp.log(p)))
    numerator = jnp.add(2.515517, jnp.multiply(t, jnp.add(0.802853, jnp.multiply(t, 0.010328))))
    denominator = jnp.add(1, jnp.multiply(t, jnp.add(1.432788, jnp.multiply(
        t, jnp.add(0.189269, jnp.multiply(t, 0.001308))))))
    return jnp.negative(jnp.subtract(t, jnp.divide(numerator, denominator)))


def ndtri(p: Any) -> Any:
    """The inverse of ``ndtr``: -inf at 0, +inf at 1, NaN outside [0, 1].

    Works on the lower half ``q = min(p, 1 - p)``, where the quantile ``x`` is negative: three
    Halley steps on ``f(x) = ndtr(x) - q`` from a rational first guess, with the ratio
    ``f / ndtr'`` formed in logs (``expm1(log_ndtr(x) - log q) * q / pdf(x)``) so that
    neither ``q`` nor ``pdf(x)`` underflows.
    """
    p = _inexact(p)
    lower_half = p <= 0.5
    q = jnp.where(lower_half, p, jnp.subtract(1, p))
    inside = jnp.logical_and(q > 0, q <= 0.5)
    safe_q = jnp.where(inside, q, 0.25)
    log_q = jnp.log(safe_q)
    x = _ndtri_first_guess(safe_q)
    for _ in range(3):
        log_q_over_pdf = jnp.add(jnp.add(log_q, jnp.multiply(0.5, jnp.square(x))), _LOG_SQRT_2PI)
        step = jnp.multiply(jnp.expm1(jnp.subtract(log_ndtr(x), log_q)), jnp.exp(log_q_over_pdf))
        x = jnp.subtract(x, jnp.divide(step, jnp.add(1, jnp.multiply(jnp.multiply(0.5, x), step))))
    x = jnp.where(inside, x, jnp.where(q == 0, -np.inf, np.nan))
    return _strong(jnp.where(lower_half, x, jnp.negative(x)))


def softmax(x: Any, /, *, axis: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` over ``axis`` (all axes by default, as in SciPy)."""
    return _strong(nn_functions.softmax(x, axis=axis))


def log_softmax(x: Any, /, *, axis: Any = None) -> Any:
    """``x - logsumexp(x)`` over ``axis`` (all axes by default, as in SciPy)."""
    return _strong(nn_functions.log_softmax(x, axis=axis))


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False,
              where: Any = None) -> Any:
    """``log(sum(b * exp(a)))`` over ``axis`` without overflow; with ``return_sign``,
    ``(log(abs(s)), sign(s))``, else NaN where the sum is negative."""
    out = nn_functions.logsumexp(a, axis, b, keepdims, return_sign, where)
    return tuple(_strong(v) for v in out) if return_sign else _strong(out)
