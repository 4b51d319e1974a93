"""Complex arithmetic and math functions for fused kernels, built on the real ``vecmath``.

A complex value is a pair (re, im) of LLVM values of its part type (``lowering``
keeps it in registers as ``{float, float}`` / ``{double, double}``). Everything is
straight-line code over the parts (selects, no branches), so loops stay
vectorizable.

Arithmetic is in the part type, with NumPy's formulas so that results match its
bits: the schoolbook product (with NumPy's fused multiply-adds), and Smith's division (scaled by the larger part of
the divisor, so no intermediate overflows or underflows where the quotient does
not). The math functions of complex64 are computed on doubles and rounded once:
their formulas then need no scaling (float32's range squared fits a double) and
lose nothing to cancellation that the rounding to float32 would show. complex128's
are scaled where an intermediate could overflow (``abs``, ``log``, ``sqrt``,
``exp`` beyond exp's overflow threshold) and use double-double arithmetic where a
result cancels (``log`` near the unit circle). Special values (signed zeros,
infinities, NaN in either part) follow C99 Annex G as NumPy computes them.
Branch cuts are C99's: ``log`` and ``sqrt`` along the negative real axis, the
sign of a zero imaginary part choosing the side; ``asin``, ``acos``, ``atanh``
beyond +-1 on the real axis, ``asinh``, ``atan`` beyond +-i on the imaginary one,
``acosh`` below 1 (Hull, Fairgrieve and Tang's casin/cacos, atanh through log1p).
``pow`` is exp(y log x) with JAX's special cases; ``max``/``min`` are JAX's
lexicographic order (real parts first, then imaginary ones).

Measured accuracy: ``docs/vecmath.md``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from llvmlite import ir

from ember.backends.cpu import vecmath

F32, F64 = ir.FloatType(), ir.DoubleType()
Pair = tuple[ir.Value, ir.Value]
LN2_HI = 0.6931471805599453
PI_HI_LO = (3.141592653589793, 1.2246467991473532e-16)  # pi = hi + lo, as doubles


def _log1p(m: vecmath.Math, v):
    return vecmath.emit_unary(m.b, "log1p", v)


class Cx:
    """Complex operations on (re, im) pairs of one part type; ``wide``: the values are complex64
    widened to doubles, so squares and sums of parts cannot overflow or underflow."""

    def __init__(self, builder: ir.IRBuilder, part: ir.Type, wide: bool = False) -> None:
        self.b = builder
        self.m = vecmath.Math(builder, part)
        self.wide = wide

    # --- arithmetic (NumPy's formulas) ---
    def add(self, x: Pair, y: Pair, flags=()) -> Pair:
        return self.b.fadd(x[0], y[0], flags=flags), self.b.fadd(x[1], y[1], flags=flags)

    def sub(self, x: Pair, y: Pair) -> Pair:
        return self.b.fsub(x[0], y[0]), self.b.fsub(x[1], y[1])

    def mul(self, x: Pair, y: Pair, flags=()) -> Pair:
        """The schoolbook product; without ``flags``, as NumPy's loops round it: one product of each
        part exact inside a fused multiply-add."""
        b = self.b
        if not flags:
            m = self.m
            return m.fma(x[0], y[0], m.neg(m.mul(x[1], y[1]))), m.fma(x[0], y[1], m.mul(x[1], y[0]))
        re = b.fsub(b.fmul(x[0], y[0], flags=flags), b.fmul(x[1], y[1], flags=flags), flags=flags)
        im = b.fadd(b.fmul(x[0], y[1], flags=flags), b.fmul(x[1], y[0], flags=flags), flags=flags)
        return re, im

    def div(self, x: Pair, y: Pair) -> Pair:
        """Smith's algorithm, with NumPy's choice of branch: divide by the larger part of y first."""
        m = self.m
        (a, b), (c, d) = x, y
        ac, ad = m.abs(c), m.abs(d)
        real_larger = m.ge(ac, ad)
        zero = m.b.and_(m.eq(ac, m.c(0.0)), m.eq(ad, m.c(0.0)))
        # |c| >= |d|: ratio d/c
        r1 = m.div(d, c)
        s1 = m.div(m.c(1.0), m.add(c, m.mul(d, r1)))
        re1, im1 = m.mul(m.add(a, m.mul(b, r1)), s1), m.mul(m.sub(b, m.mul(a, r1)), s1)
        # |d| > |c| (or a NaN): ratio c/d
        r2 = m.div(c, d)
        s2 = m.div(m.c(1.0), m.add(d, m.mul(c, r2)))
        re2, im2 = m.mul(m.add(m.mul(a, r2), b), s2), m.mul(m.sub(m.mul(b, r2), a), s2)
        re0, im0 = m.div(a, ac), m.div(b, ac)  # by zero: infinities or NaN
        re = m.select(real_larger, m.select(zero, re0, re1), re2)
        im = m.select(real_larger, m.select(zero, im0, im1), im2)
        return re, im

    def neg(self, x: Pair) -> Pair:
        return self.m.neg(x[0]), self.m.neg(x[1])

    def conj(self, x: Pair) -> Pair:
        return x[0], self.m.neg(x[1])

    def scale(self, x: Pair, s) -> Pair:
        return self.m.mul(x[0], s), self.m.mul(x[1], s)

    def eq(self, x: Pair, y: Pair):
        m = self.m
        return m.b.and_(m.eq(x[0], y[0]), m.eq(x[1], y[1]))

    def is_inf(self, v):
        return self.m.eq(self.m.abs(v), self.m.c(np.inf))

    def either_inf(self, x: Pair):
        return self.b.or_(self.is_inf(x[0]), self.is_inf(x[1]))

    # --- moduli ---
    def hypot(self, x, y):
        """sqrt(x^2 + y^2) without overflow or underflow; infinite if either is (even with a NaN)."""
        m = self.m
        if self.wide:
            h = m.sqrt(m.fma(x, x, m.mul(y, y)))
        else:
            ax, ay = m.abs(x), m.abs(y)
            bigger = m.gt(ax, ay)
            hi, lo = m.select(bigger, ax, ay), m.select(bigger, ay, ax)
            r = m.div(lo, hi)
            h = m.mul(hi, m.sqrt(m.fma(r, r, m.c(1.0))))
            h = m.select(m.b.and_(m.eq(hi, m.c(0.0)), m.eq(lo, m.c(0.0))), m.c(0.0), h)  # (lo NaN: r is)
        return m.select(self.either_inf((x, y)), m.c(np.inf), h)

    def abs(self, x: Pair):
        return self.hypot(*x)

    # --- exponentials and logarithms ---
    def exp(self, x: Pair) -> Pair:
        """e^re (cos im, sin im); e^re split in two halves where it alone would overflow."""
        m = self.m
        re, im = x
        s, c = vecmath.emit_sincos(self.b, im)
        if self.wide:
            e = vecmath.emit_unary(self.b, "exp", re)
            out_re, out_im = m.mul(e, c), m.mul(e, s)
        else:
            big = m.gt(re, m.c(700.0))
            half = vecmath.emit_unary(self.b, "exp", m.mul(re, m.select(big, m.c(0.5), m.c(1.0))))
            h2 = m.select(big, half, m.c(1.0))
            out_re, out_im = m.mul(m.mul(half, c), h2), m.mul(m.mul(half, s), h2)
        return self._exp_special(x, out_re, out_im)

    def _exp_special(self, x: Pair, out_re, out_im) -> Pair:
        """C99's exp at a real argument (a zero imaginary part kept exactly) and at infinite real
        parts with a non-finite imaginary part: (+-inf, NaN) for +inf, (0, 0) for -inf."""
        m = self.m
        re, im = x
        zero_im = m.eq(im, m.c(0.0))
        out_im = m.select(zero_im, im, out_im)
        out_re = m.select(zero_im, vecmath.emit_unary(self.b, "exp", re), out_re) if not self.wide else out_re
        bad_im = m.b.not_(m.lt(m.abs(im), m.c(np.inf)))  # inf or NaN
        plus_inf = m.b.and_(m.eq(re, m.c(np.inf)), bad_im)
        minus_inf = m.b.and_(m.eq(re, m.c(-np.inf)), bad_im)
        out_re = m.select(plus_inf, re, m.select(minus_inf, m.c(0.0), out_re))
        out_im = m.select(plus_inf, m.sub(im, im), m.select(minus_inf, m.c(0.0), out_im))
        return out_re, out_im

    def expm1(self, x: Pair) -> Pair:
        """(expm1(re) cos im - 2 sin^2(im/2), e^re sin im): no cancellation near 0."""
        m = self.m
        re, im = x
        s, c = vecmath.emit_sincos(self.b, im)
        sh, _ = vecmath.emit_sincos(self.b, m.mul(im, m.c(0.5)))
        em1 = vecmath.emit_unary(self.b, "expm1", re)
        out_re = m.fma(em1, c, m.mul(m.c(-2.0), m.mul(sh, sh)))
        exp = self.exp(x)
        out_re = m.select(m.lt(re, m.c(1.0)), out_re, m.sub(exp[0], m.c(1.0)))
        out_re = m.select(m.eq(im, m.c(0.0)), em1, out_re)
        return out_re, exp[1]

    def log(self, x: Pair) -> Pair:
        """(log|z|, atan2(im, re)); near |z| = 1, log1p of |z|^2 - 1 in double-double."""
        m = self.m
        re, im = x
        ax, ay = m.abs(re), m.abs(im)
        bigger = m.gt(ax, ay)
        hi, lo = m.select(bigger, ax, ay), m.select(bigger, ay, ax)
        # |z|^2 - 1 = (hi^2 - 1) + lo^2, both squares exact as double-doubles
        h2, h2_lo = m.two_prod(hi, hi)
        l2, l2_lo = m.two_prod(lo, lo)
        s, s_lo = m.two_sum(m.sub(h2, m.c(1.0)), l2)
        near = _log1p(m, m.add(s, m.add(s_lo, m.add(h2_lo, l2_lo))))
        r = m.div(lo, hi)
        far = m.fma(m.c(0.5), vecmath.emit_unary(self.b, "log1p", m.mul(r, r)), vecmath.emit_unary(self.b, "log", hi))
        around_one = m.b.and_(m.ge(hi, m.c(0.5)), m.le(hi, m.c(2.0)))
        out_re = m.select(around_one, m.mul(m.c(0.5), near), far)
        out_re = m.select(m.b.and_(m.eq(hi, m.c(0.0)), m.eq(lo, m.c(0.0))), m.c(-np.inf), out_re)
        out_re = m.select(self.either_inf(x), m.c(np.inf), out_re)
        return out_re, vecmath.emit_binary(self.b, "atan2", im, re)

    def log1p(self, x: Pair) -> Pair:
        """log(1 + z): log1p(2 re + re^2 + im^2) / 2 near 0, else log of 1 + z."""
        m = self.m
        re, im = x
        small = m.b.and_(m.lt(m.abs(re), m.c(0.5)), m.lt(m.abs(im), m.c(0.5)))
        # 2 re + re^2 + im^2, the squares as double-doubles (2 re is exact)
        r2, r2_lo = m.two_prod(re, re)
        q, q_lo = m.two_prod(im, im)
        a, a_lo = m.two_sum(m.add(re, re), r2)
        s, s_lo = m.two_sum(a, q)
        s_lo = m.add(s_lo, m.add(a_lo, m.add(r2_lo, q_lo)))
        near_re = m.mul(m.c(0.5), _log1p(m, m.add(s, s_lo)))
        one_plus = (m.add(m.c(1.0), re), im)
        far_re, angle = self.log(one_plus)
        return m.select(small, near_re, far_re), angle

    def sqrt(self, x: Pair) -> Pair:
        """C99's: t = sqrt((|re| + |z|) / 2), then (t, im / 2t) or (|im| / 2t, +-t) by re's sign."""
        m = self.m
        re, im = x
        if self.wide:
            scale, unscale = m.c(1.0), m.c(1.0)
        else:  # tiny arguments scaled up (the halving would lose subnormal bits)
            tiny = m.lt(m.b.select(m.gt(m.abs(re), m.abs(im)), m.abs(re), m.abs(im)), m.c(2.0 ** -1000))
            scale, unscale = m.select(tiny, m.c(2.0 ** 200), m.c(1.0)), m.select(tiny, m.c(2.0 ** -100), m.c(1.0))
        sr, si = m.mul(re, scale), m.mul(im, scale)
        h = self.hypot(sr, si)
        t = m.sqrt(m.fma(m.abs(sr), m.c(0.5), m.mul(h, m.c(0.5))))
        q = m.div(m.abs(si), m.add(t, t))
        nonneg = m.ge(re, m.c(0.0))
        out_re = m.mul(m.select(nonneg, t, q), unscale)
        out_im = m.mul(m.select(nonneg, m.copysign(q, si), m.copysign(t, im)), unscale)
        zero = m.b.and_(m.eq(re, m.c(0.0)), m.eq(im, m.c(0.0)))
        out_re = m.select(zero, m.c(0.0), out_re)
        out_im = m.select(zero, im, out_im)
        inf_im = self.is_inf(im)
        return m.select(inf_im, m.c(np.inf), out_re), m.select(inf_im, im, out_im)

    # --- hyperbolic and trigonometric functions ---
    def sinh(self, x: Pair) -> Pair:
        """(sinh re cos im, cosh re sin im)."""
        return self._sinh_cosh(x, sinh=True)

    def cosh(self, x: Pair) -> Pair:
        """(cosh re cos im, sinh re sin im)."""
        return self._sinh_cosh(x, sinh=False)

    def _sinh_cosh(self, x: Pair, sinh: bool) -> Pair:
        m = self.m
        re, im = x
        s, c = vecmath.emit_sincos(self.b, im)
        sh, ch = vecmath.emit_unary(self.b, "sinh", re), vecmath.emit_unary(self.b, "cosh", re)
        first, second = (sh, ch) if sinh else (ch, sh)
        out_re, out_im = m.mul(first, c), m.mul(second, s)
        # exact zeros stay exact zeros (inf * 0 would be NaN): C99's csinh/ccosh at the axes
        zero_im, zero_re = m.eq(im, m.c(0.0)), m.eq(re, m.c(0.0))
        if sinh:
            out_im = m.select(zero_im, im, out_im)
            out_re = m.select(zero_re, m.select(self._finite(im), out_re, re), out_re)
        else:
            out_im = m.select(zero_im, m.mul(m.copysign(m.c(0.0), re), m.copysign(m.c(1.0), im)), out_im)
            out_im = m.select(zero_re, m.select(self._finite(im), out_im, m.c(0.0)), out_im)
        # (+-inf, inf or NaN): (+-inf, NaN) for sinh, (+inf, NaN) for cosh
        both = m.b.and_(self.is_inf(re), m.b.not_(self._finite(im)))
        out_re = m.select(both, re if sinh else m.abs(re), out_re)
        out_im = m.select(both, m.sub(im, im), out_im)
        return out_re, out_im

    def _finite(self, v):
        return self.m.lt(self.m.abs(v), self.m.c(np.inf))

    def sin(self, x: Pair) -> Pair:
        """-i sinh(i z)."""
        u, v = self.sinh((self.m.neg(x[1]), x[0]))
        return v, self.m.neg(u)

    def cos(self, x: Pair) -> Pair:
        """cosh(i z)."""
        return self.cosh((self.m.neg(x[1]), x[0]))

    def tanh(self, x: Pair) -> Pair:
        """Kahan's formula: with t = tan im, b = 1 + t^2, s = sinh re, tanh z = (b s sqrt(1 + s^2) + i t) /
        (1 + b s^2); past |re| = 22, (+-1, 4 sin im cos im e^-2|re|)."""
        m = self.m
        re, im = x
        sn, cs = vecmath.emit_sincos(self.b, im)
        t = m.div(sn, cs)
        beta = m.fma(t, t, m.c(1.0))
        s = vecmath.emit_unary(self.b, "sinh", re)
        rho = m.sqrt(m.fma(s, s, m.c(1.0)))
        den = m.fma(m.mul(beta, s), s, m.c(1.0))
        out_re, out_im = m.div(m.mul(m.mul(beta, rho), s), den), m.div(t, den)
        far = m.gt(m.abs(re), m.c(22.0))
        decay = vecmath.emit_unary(self.b, "exp", m.mul(m.c(-2.0), m.abs(re)))
        far_im = m.mul(m.mul(m.c(4.0), m.mul(sn, cs)), decay)
        far_im = m.select(self._finite(im), far_im, m.copysign(m.c(0.0), im))
        out_re = m.select(far, m.copysign(m.c(1.0), re), out_re)
        out_im = m.select(far, far_im, out_im)
        zero_im = m.eq(im, m.c(0.0))
        out_re = m.select(zero_im, vecmath.emit_unary(self.b, "tanh", re), out_re)
        out_im = m.select(zero_im, im, out_im)
        # an infinite or NaN imaginary part: (0, NaN) at a zero real part, (NaN, NaN) at a finite one
        finite_re_bad_im = m.b.and_(self._finite(re), m.b.not_(self._finite(im)))
        nan = m.c(np.nan)
        out_re = m.select(finite_re_bad_im, m.select(m.eq(re, m.c(0.0)), re, nan), out_re)
        return out_re, m.select(finite_re_bad_im, nan, out_im)

    def tan(self, x: Pair) -> Pair:
        """-i tanh(i z)."""
        u, v = self.tanh((self.m.neg(x[1]), x[0]))
        return v, self.m.neg(u)

    # --- inverse trigonometric and hyperbolic functions ---
    def _hypot_log(self, x, y):
        """log(hypot(x, y)) for x, y >= 0 that may be huge (no overflow): log(hi) + log1p((lo/hi)^2) / 2."""
        m = self.m
        bigger = m.gt(x, y)
        hi, lo = m.select(bigger, x, y), m.select(bigger, y, x)
        r = m.div(lo, hi)
        out = m.fma(m.c(0.5), _log1p(m, m.mul(r, r)), vecmath.emit_unary(self.b, "log", hi))
        out = m.select(m.eq(hi, m.c(0.0)), m.c(-np.inf), out)
        return m.select(self.either_inf((x, y)), m.c(np.inf), out)

    def _asin_acos_parts(self, x, y):
        """Hull, Fairgrieve and Tang's casin/cacos for x = |re|, y = |im|: (re asin, re acos, |im asin|).
        With r = |z + 1|, s = |z - 1|, A = (r + s)/2 and B = x/A: re asin = asin B, re acos = acos B for
        B <= 0.6417, else atan2 of x and D = sqrt(1 - B^2) A, with D and A - 1 computed free of cancellation;
        |im| = log1p(A - 1 + sqrt((A - 1)(A + 1))) for A <= 1.5, else log(A + sqrt(A^2 - 1)). Past 1e150
        (where A^2 could overflow), the asymptotes atan2(x, y), atan2(y, x) and log|z| + ln 2."""
        m = self.m
        one, half = m.c(1.0), m.c(0.5)
        xp1, xm1, omx = m.add(x, one), m.sub(x, one), m.sub(one, x)
        r, s = self.hypot(xp1, y), self.hypot(xm1, y)
        a = m.mul(half, m.add(r, s))
        ratio = m.div(x, a)
        y2 = m.mul(y, y)
        below_one = m.lt(x, one)
        y2_r = m.div(y2, m.add(r, xp1))
        twice_am1 = m.add(y2_r, m.select(below_one, m.div(y2, m.add(s, omx)), m.add(s, xm1)))  # 2 (A - 1)
        # (A - 1)(A + 1) as 2 (A - 1) (A + 1)/2: no halving of a subnormal y (at x = 1, A - 1 ~ y/2)
        near = _log1p(m, m.fma(half, twice_am1, m.sqrt(m.mul(twice_am1, m.mul(half, m.add(a, one))))))
        far = vecmath.emit_unary(self.b, "log", m.add(a, m.sqrt(m.fma(a, a, m.c(-1.0)))))
        imag = m.select(m.le(a, m.c(1.5)), near, far)
        # y^2 underflows: to first order in y, y / sqrt(1 - x^2) (x < 1; x >= 1 needs no y^2)
        tiny = m.b.and_(below_one, m.lt(y, m.c(1e-150)))
        imag = m.select(tiny, m.div(y, m.sqrt(m.mul(omx, xp1))), imag)
        apx = m.add(a, x)
        d_in = m.sqrt(m.mul(m.mul(half, apx), m.add(y2_r, m.add(s, omx))))
        d_out = m.mul(y, m.sqrt(m.mul(half, m.add(m.div(apx, m.add(r, xp1)), m.div(apx, m.add(s, xm1))))))
        d = m.select(m.le(x, one), d_in, d_out)
        small_ratio = m.le(ratio, m.c(0.6417))
        asin_re = m.select(small_ratio, vecmath.emit_unary(self.b, "asin", ratio),
                           vecmath.emit_binary(self.b, "atan2", x, d))
        acos_re = m.select(small_ratio, vecmath.emit_unary(self.b, "acos", ratio),
                           vecmath.emit_binary(self.b, "atan2", d, x))
        big = m.b.or_(m.gt(x, m.c(1e150)), m.gt(y, m.c(1e150)))
        asin_re = m.select(big, vecmath.emit_binary(self.b, "atan2", x, y), asin_re)
        acos_re = m.select(big, vecmath.emit_binary(self.b, "atan2", y, x), acos_re)
        imag = m.select(big, m.add(self._hypot_log(x, y), m.c(LN2_HI)), imag)
        # on the imaginary axis (also with a NaN or infinite y): 0 and pi/2
        zero_x = m.eq(x, m.c(0.0))
        asin_re = m.select(zero_x, m.c(0.0), asin_re)
        acos_re = m.select(zero_x, m.c(np.pi / 2), acos_re)
        return asin_re, acos_re, imag

    def asin(self, z: Pair) -> Pair:
        """Hull, Fairgrieve and Tang's casin (odd in each part)."""
        m = self.m
        re, im = z
        asin_re, _, imag = self._asin_acos_parts(m.abs(re), m.abs(im))
        return m.copysign(asin_re, re), m.copysign(imag, im)

    def acos(self, z: Pair) -> Pair:
        """Hull, Fairgrieve and Tang's cacos: pi - acos(-z) for a negative real part."""
        m = self.m
        re, im = z
        _, acos_re, imag = self._asin_acos_parts(m.abs(re), m.abs(im))
        pi_hi, pi_lo = PI_HI_LO
        flipped = m.add(m.sub(m.c(pi_hi), acos_re), m.c(pi_lo))
        return m.select(m.lt(re, m.c(0.0)), flipped, acos_re), m.neg(m.copysign(imag, im))

    def asinh(self, z: Pair) -> Pair:
        """-i asin(i z)."""
        u, v = self.asin((self.m.neg(z[1]), z[0]))
        return v, self.m.neg(u)

    def acosh(self, z: Pair) -> Pair:
        """(|im acos z|, +-re acos z) with the sign of z's imaginary part; at a NaN imaginary part,
        NaN + NaN i for a finite nonzero real part, NaN + pi/2 i for a zero one (C99, NumPy)."""
        m = self.m
        u, v = self.acos(z)
        out_im = m.copysign(u, z[1])
        nan_im = m.isnan(z[1])
        finite_nonzero = m.b.and_(self._finite(z[0]), m.b.not_(m.eq(z[0], m.c(0.0))))
        out_im = m.select(nan_im, m.select(finite_nonzero, m.c(np.nan), u), out_im)
        return m.abs(v), out_im

    def atanh(self, z: Pair) -> Pair:
        """(log1p(4x / ((1 - x)^2 + y^2)) / 4, atan2(2y, 1 - x^2 - y^2) / 2) for x = |re|, y = |im|, the
        denominator as a double-double; where (1 - x)^2 + y^2 underflows, the real part as
        log|z + 1| - log|z - 1| halved; past 1e150, (x / |z|^2, pi/2)."""
        m = self.m
        re, im = z
        x, y = m.abs(re), m.abs(im)
        one = m.c(1.0)
        omx = m.sub(one, x)
        d = m.fma(omx, omx, m.mul(y, y))
        real = m.mul(m.c(0.25), _log1p(m, m.div(m.mul(m.c(4.0), x), d)))
        diff = m.sub(self._hypot_log(m.add(x, one), y), self._hypot_log(m.abs(omx), y))
        real = m.select(m.lt(d, m.c(1e-200)), m.mul(m.c(0.5), diff), real)
        bigger = m.gt(x, y)
        hi, lo = m.select(bigger, x, y), m.select(bigger, y, x)
        h2, h2_lo = m.two_prod(hi, hi)
        l2, l2_lo = m.two_prod(lo, lo)
        t, t_lo = m.two_sum(m.sub(one, h2), m.neg(l2))
        den = m.add(t, m.sub(t_lo, m.add(h2_lo, l2_lo)))
        imag = m.mul(m.c(0.5), vecmath.emit_binary(self.b, "atan2", m.add(y, y), den))
        big = m.b.or_(m.gt(x, m.c(1e150)), m.gt(y, m.c(1e150)))
        h = self.hypot(x, y)
        far_re = m.select(self.either_inf((x, y)), m.c(0.0), m.div(m.div(x, h), h))
        real = m.select(big, far_re, real)
        no_angle = m.b.or_(m.isnan(y), m.b.and_(m.isnan(x), self._finite(y)))  # NaN and a finite part
        imag = m.select(big, m.select(no_angle, m.c(np.nan), m.c(np.pi / 2)), imag)
        real = m.select(m.eq(x, m.c(0.0)), m.c(0.0), real)
        return m.copysign(real, re), m.copysign(imag, im)

    def atan(self, z: Pair) -> Pair:
        """-i atanh(i z)."""
        u, v = self.atanh((self.m.neg(z[1]), z[0]))
        return v, self.m.neg(u)

    # --- ordering (JAX's lax.max / lax.min: by the real parts, ties by the imaginary parts) ---
    def max(self, x: Pair, y: Pair) -> Pair:
        return self._pick(x, y, self.m.gt)

    def min(self, x: Pair, y: Pair) -> Pair:
        return self._pick(x, y, self.m.lt)

    def _pick(self, x: Pair, y: Pair, cmp) -> Pair:
        """x where cmp(re x, re y), or where the real parts are equal and cmp(im x, im y); else y.
        Ordered compares: an operand with a NaN part is picked only as the other is not chosen."""
        m = self.m
        pick_x = m.select(m.eq(x[0], y[0]), cmp(x[1], y[1]), cmp(x[0], y[0]))
        return m.select(pick_x, x[0], y[0]), m.select(pick_x, x[1], y[1])

    # --- powers ---
    def pow(self, x: Pair, y: Pair) -> Pair:
        """exp(y log x), with JAX's (XLA's) special cases: 1 for y = 0 or x = 1; at x = 0, 0 for a real
        y > 0, else NaN. A real y multiplies log x part by part (so (inf + 0j)^2 is inf + 0j)."""
        m = self.m
        (a, b), (c, d) = x, y
        lr, li = self.log(x)
        w_re, w_im = self.mul((c, d), (lr, li))
        real_y = m.eq(d, m.c(0.0))
        w_re = m.select(real_y, m.mul(c, lr), w_re)
        w_im = m.select(real_y, m.mul(c, li), w_im)
        if self.wide:
            out_re, out_im = self.exp((w_re, w_im))
        else:
            out_re, out_im = self._exp_of_product(x, y, lr, li, w_re, w_im)
        zero = m.c(0.0)
        zero_x = m.b.and_(m.eq(a, zero), m.eq(b, zero))
        zero_to = m.select(m.b.and_(real_y, m.gt(c, zero)), zero, m.c(np.nan))
        out_re, out_im = m.select(zero_x, zero_to, out_re), m.select(zero_x, zero_to, out_im)
        unit = m.b.or_(m.b.and_(m.eq(c, zero), real_y), m.b.and_(m.eq(a, m.c(1.0)), m.eq(b, zero)))
        return m.select(unit, m.c(1.0), out_re), m.select(unit, zero, out_im)

    def _exp_of_product(self, x: Pair, y: Pair, lr, li, w_re, w_im) -> Pair:
        """exp(w) for w = y log x in double-double (complex128): log|x| as a double-double away from
        |x| = 1 (where it is large), the products exact, and the low parts of w applied to first order,
        exp(w_hi + w_lo) ~ exp(w_hi) (1 + w_lo); otherwise |w| ulps would be lost. (The angle of x is
        atan2's, within an ulp: its error shows as |y| ulps of pi.) Non-finite operands: w as given."""
        m = self.m
        (a, b), (c, d) = x, y
        ax, ay = m.abs(a), m.abs(b)
        bigger = m.gt(ax, ay)
        hi, lo = m.select(bigger, ax, ay), m.select(bigger, ay, ax)
        regular = m.b.and_(m.gt(hi, m.c(0.0)), m.lt(hi, m.c(np.inf)))
        l_hi, l_lo = vecmath.log_double_double(m, m.select(regular, hi, m.c(1.0)))
        r = m.div(lo, hi)
        l_hi, l_lo2 = m.two_sum(l_hi, m.mul(m.c(0.5), _log1p(m, m.mul(r, r))))
        around_one = m.b.and_(m.ge(hi, m.c(0.5)), m.le(hi, m.c(2.0)))
        lr_lo = m.select(around_one, m.c(0.0), m.add(l_lo, l_lo2))
        lr_hi = m.select(around_one, lr, l_hi)
        # w = (c lr - d li, c li + d lr), every product exact as a double-double
        p1, p1_lo = m.two_prod(c, lr_hi)
        p1_lo = m.fma(c, lr_lo, p1_lo)
        p2, p2_lo = m.two_prod(d, li)
        p3, p3_lo = m.two_prod(c, li)
        p4, p4_lo = m.two_prod(d, lr_hi)
        p4_lo = m.fma(d, lr_lo, p4_lo)
        re_hi, re_e = m.two_sum(p1, m.neg(p2))
        im_hi, im_e = m.two_sum(p3, p4)
        re_lo = m.add(re_e, m.sub(p1_lo, p2_lo))
        im_lo = m.add(im_e, m.add(p3_lo, p4_lo))
        dd = m.b.and_(regular, m.b.and_(self._finite(c), self._finite(d)))  # else w as computed
        w_re, w_im = m.select(dd, m.add(re_hi, re_lo), w_re), m.select(dd, m.add(im_hi, im_lo), w_im)
        out_re, out_im = self.exp((w_re, w_im))
        re_lo = m.sub(re_lo, m.sub(w_re, re_hi))  # what adding the low part left
        im_lo = m.sub(im_lo, m.sub(w_im, im_hi))
        finite = m.b.and_(m.b.and_(self._finite(out_re), self._finite(out_im)),
                          m.b.and_(self._finite(re_lo), self._finite(im_lo)))
        finite = m.b.and_(finite, dd)
        fixed_re = m.fma(out_re, re_lo, m.fma(m.neg(out_im), im_lo, out_re))
        fixed_im = m.fma(out_im, re_lo, m.fma(out_re, im_lo, out_im))
        return m.select(finite, fixed_re, out_re), m.select(finite, fixed_im, out_im)

    def integer_pow(self, x: Pair, n: int, one: Pair) -> Pair:
        """NumPy's: z, z*z, (z*z)*z for 1, 2, 3; else binary powering from 1; 1 / z^-n below 0."""
        k = abs(n)
        if k == 0:
            return one
        if k <= 3:
            acc = x if k == 1 else self.mul(x, x) if k == 2 else self.mul(self.mul(x, x), x)
        else:
            acc, p, mask = one, x, 1
            while True:
                if k & mask:
                    acc = self.mul(acc, p)
                mask <<= 1
                if k < mask:
                    break
                p = self.mul(p, p)
        return self.div(one, acc) if n < 0 else acc


# The functions computed on doubles for complex64 (then rounded once); the arithmetic stays in float32.
FUNCTIONS: dict[str, Callable[[Cx, Pair], Pair]] = {
    "exp": Cx.exp, "expm1": Cx.expm1, "log": Cx.log, "log1p": Cx.log1p, "sqrt": Cx.sqrt,
    "sin": Cx.sin, "cos": Cx.cos, "tan": Cx.tan, "sinh": Cx.sinh, "cosh": Cx.cosh, "tanh": Cx.tanh,
    "asin": Cx.asin, "acos": Cx.acos, "atan": Cx.atan, "asinh": Cx.asinh, "acosh": Cx.acosh, "atanh": Cx.atanh,
}
