"""A native FFT of batches of rows: ``fft`` equations over the last axis of power-of-two length
(FFT, IFFT, RFFT, IRFFT; float32 / complex64 and float64 / complex128), and over 2-3 such axes one
axis at a time; everything else stays on the reference rule (DUCC, ``ducc0``).

Why: every ``fft`` of a compiled program was a fallback step calling DUCC's Python wheel (which,
as a fallback, also costs a Python call and a copy): a batch of 4096 rows of 1024 float32
(``rfft``) took 8.1 ms on one thread, JAX's own build of the same library 4.7 ms on one core (2.4-4.9
ms on two), a copy of the same bytes 0.9-1.2 ms. This function takes 2.6-3.0 ms on one thread of
the same host, 1.5-1.6 ms on two (docs/fft.md has the figures).

How: vectorized across rows. A group of ``lanes`` rows (the lanes of a vector: 8 float32 on
32-byte vectors) is transposed into a scratch area in which element k of every row of the group
is one vector (real parts and imaginary parts in two arrays), by in-register transposes of
``lanes`` x ``lanes`` blocks (``lowering.transpose_network``: the unpack / lane-shuffle sequence, one cheap
instruction a vector a stage). The transform is then purely vertical SIMD, every twiddle factor a
scalar broadcast (the rows have one length): Stockham's autosort passes of radix 8 (one of radix 4
or 2 last), each from one buffer of the scratch to the other, no bit reversal. The result is
transposed back into the rows. The real transforms cost about half a complex one: RFFT of 2m
reals is the complex transform of z[k] = x[2k] + i x[2k+1] (the same loads: a real row read as m
complex numbers) followed by the standard split, X[k] = E + W^k O with E, O the even / odd parts
from Z[k] and conj Z[m-k]; IRFFT is the inverse join, then the complex inverse. The inverse
transform is the forward one with real and imaginary parts swapped on the way in and out
(swap(FFT(swap x)) = conj(FFT(conj x))), scaled by 1/n on the way out (JAX's ``IFFT``); IRFFT
ignores the imaginary parts of the zero and Nyquist bins, as NumPy and JAX do.

One function per dtype, compiled once per process in the background (about 0.3 s; 30-40 ms from
the disk cache), like ``gemm``: ``void fft(i8** buffers, i64 begin, i64 end)`` with buffers (input,
output, i64 params[7] (see ``LENGTH``...), the twiddle factors), [begin, end) counting groups of
rows, so that threads share a batch (an OpenMP team from the dispatcher's plan). Sizes, strides,
the type and the scale are parameters: no code per shape. A last, partial group computes its
last row in the missing lanes and stores it again (the same values). Twiddle factors are computed
in NumPy in float64 from angles reduced to an octant exactly (``_roots``: within 1e-16, where
``exp(-2 pi i k / n)`` is off by up to 2.5e-15), rounded once to the dtype; the relative RMS error
against NumPy in float64 is about 3e-8 log2(n) (float32) and 4e-17 log2(n) (float64), DUCC's.

The scratch is on the function's stack, each thread its own: 4 (m + 1) vectors (padded), at most
530 KB (64-byte vectors; 265 KB on 32-byte ones) for the longest core transform, m = 2048.

Measured (znver4, 2 cores shared with other work; ratios of interleaved medians) and chosen here:
32-byte vectors on Zen 4 (``VECTOR_BYTES``), radix 8 (``RADIX``), the scratch's arrays offset
modulo 4 KB (``ARRAY_OFFSET``), software prefetches (``STREAM_LINES``); native from ``min_rows``
rows and up to ``MAX_CORE`` (a single long row, where 7 of 8 lanes would idle, stays on DUCC, as
does any length that is not a power of two).
"""
from __future__ import annotations

import ctypes
import functools
import math
import threading

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from ember import dtypes
from ember.backends.cpu import gemm, jit, threads
from ember.backends.cpu.entry import data_pointer
from ember.backends.cpu.lowering import F32, F64, I64, Loops, transposed
from ember.backends.reference import impl_rules
from ember.compiler.fusion import fusion_p
from ember.core.avals import ShapedArray
from ember.core.background import Job, background
from ember.core.ir import ClosedJaxpr, Eqn, Jaxpr, Var
from ember.lax.fft import FftType, fft_p
from ember.lax.shapes import transpose_p

# Vectors of the host's widest width (gemm's), except on AMD's Zen 4, which runs a 64-byte
# instruction as two 32-byte halves: there 32-byte vectors (8 float32 lanes) took 0.81-0.89x the
# time of 64-byte ones on float32 rows (fewer shuffles a transposed element, half the scratch)
# and 0.97-1.0x on float64.
VECTOR_BYTES = 32 if llvm.get_host_cpu_name() == "znver4" else gemm.VECTOR_BYTES
RADIX = 8  # of the passes (then one of 4 or 2): 0.80-0.84x the time of radix 4 (fewer passes over the scratch)
# The scratch's arrays lie this many bytes apart modulo 4 KB (see ``_build``); 0: 1.3-1.4x the time.
ARRAY_OFFSET = 512
# Software prefetches (waiting for memory was 1.1-1.7 ms of a 3-3.5 ms rfft of 4096 x 1024 on one
# thread): the next group's input while this group's rows are read, and then, between the
# butterflies of the passes, ``STREAM_LINES`` lines at a time of this group's output and again of
# the next group's input (into L2: prefetcht1). Together 0.83-0.88x the time without (0.49x on
# rows of 256).
STREAM_LINES = 2
# The parameters of a call (an int64 array): the complex length ``m`` of the core transform (the
# rows' length, or half of it for the real transforms), the rows, the row strides of the input and
# of the output in scalars (two per complex element), the ``FftType``, the scale of the results
# (a float64's bits) and where the real transforms' twiddle factors start in the table.
LENGTH, ROWS, IN_ROW, OUT_ROW, TYPE, SCALE, POST_TWIDDLES = range(7)


def _c(n: int) -> ir.Constant:
    return ir.Constant(I64, n)


class _Function(Loops):
    """One transform function being generated: loops, vectors and complex arithmetic in LLVM IR."""

    def __init__(self, module: ir.Module, name: str, element: ir.Type, itemsize: int) -> None:
        self.element, self.itemsize = element, itemsize
        self.lanes = VECTOR_BYTES // itemsize
        self.vec = ir.VectorType(element, self.lanes)
        self.ptr = element.as_pointer()
        i8pp = ir.IntType(8).as_pointer().as_pointer()
        super().__init__(ir.Function(module, ir.FunctionType(ir.VoidType(), [i8pp, I64, I64]), name=name))
        fma = f"llvm.fma.v{self.lanes}{'f32' if element == F32 else 'f64'}"
        self.fma = module.globals.get(fma) or ir.Function(module, ir.FunctionType(self.vec, [self.vec] * 3), fma)

    # --- control flow (``loop``, ``min``, ``if_then``: ``Loops``) ---
    def while_(self, condition, body) -> None:
        b = self.b
        header, inner, done = (self.fn.append_basic_block(n) for n in ("while", "while_body", "while_done"))
        b.branch(header)
        b.position_at_end(header)
        b.cbranch(condition(), inner, done)
        b.position_at_end(inner)
        body()
        b.branch(header)
        b.position_at_end(done)

    def if_else(self, condition, then, otherwise) -> None:
        with self.b.if_else(condition) as (yes, no):
            with yes:
                then()
            with no:
                otherwise()

    # --- memory ---
    def at(self, base, index):
        return self.b.gep(base, [index if isinstance(index, ir.Value) else _c(index)])

    def load(self, base, index, aligned: bool = True):
        pointer = self.b.bitcast(self.at(base, index), self.vec.as_pointer())
        return self.b.load(pointer, align=VECTOR_BYTES if aligned else self.itemsize)

    def store(self, value, base, index, aligned: bool = True) -> None:
        pointer = self.b.bitcast(self.at(base, index), self.vec.as_pointer())
        self.b.store(value, pointer, align=VECTOR_BYTES if aligned else self.itemsize)

    def prefetch(self, pointer) -> None:
        """Ask for the cache line at ``pointer`` (a read, into L2; a hint: any address will do)."""
        module, i8p, i32 = self.fn.module, ir.IntType(8).as_pointer(), ir.IntType(32)
        name = "llvm.prefetch.p0"
        fn = module.globals.get(name) or ir.Function(module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                                     name)
        self.b.call(fn, [self.b.bitcast(pointer, i8p), ir.Constant(i32, 0), ir.Constant(i32, 2), ir.Constant(i32, 1)])

    def splat(self, scalar):
        b, lanes = self.b, self.lanes
        one = b.insert_element(ir.Constant(self.vec, ir.Undefined), scalar, _c(0))
        return b.shuffle_vector(one, ir.Constant(self.vec, ir.Undefined),
                                ir.Constant(ir.VectorType(ir.IntType(32), lanes), [0] * lanes))

    # --- complex vectors: (re, im) pairs ---
    def add(self, x, y):
        return self.b.fadd(x[0], y[0]), self.b.fadd(x[1], y[1])

    def sub(self, x, y):
        return self.b.fsub(x[0], y[0]), self.b.fsub(x[1], y[1])

    def mul(self, x, w):
        """x * w: re = xr wr - xi wi, im = xr wi + xi wr (two products, two fused multiply-adds)."""
        b = self.b
        return (b.call(self.fma, [x[0], w[0], b.fneg(b.fmul(x[1], w[1]))]),
                b.call(self.fma, [x[0], w[1], b.fmul(x[1], w[0])]))

    def transpose(self, vectors: list) -> list:
        """The lanes x lanes transpose of ``vectors`` (vector r, lane c -> vector c, lane r)."""
        return transposed(self.b, vectors, self.itemsize)


def _build(module: ir.Module, element: ir.Type, itemsize: int) -> None:
    """``fft(buffers, begin, end)``: buffers (input, output, the parameters, the twiddle factors);
    [begin, end) counts groups of ``lanes`` rows."""
    f = _Function(module, "fft", element, itemsize)
    b, lanes = f.b, f.lanes
    half = lanes // 2  # complex elements per vector of a row
    buffers, begin, end = f.fn.args
    source, target = (b.bitcast(b.load(f.at(buffers, k)), f.ptr) for k in (0, 1))
    params = b.bitcast(b.load(f.at(buffers, 2)), I64.as_pointer())
    table = b.bitcast(b.load(f.at(buffers, 3)), f.ptr)
    m, rows, in_row, out_row, fft_type, scale, post = (b.load(f.at(params, k)) for k in range(7))
    is_rfft, is_irfft = (b.icmp_signed("==", fft_type, _c(t)) for t in (FftType.RFFT, FftType.IRFFT))
    scale = b.bitcast(scale, F64)
    scale = f.splat(scale if element == F64 else b.fptrunc(scale, element))
    # Scratch on this call's stack (each thread its own): two buffers (the passes go from one to
    # the other) of two arrays (real and imaginary parts) of m + 1 vectors: element k of the
    # group's rows, one lane a row. The arrays are ``ARRAY_OFFSET`` bytes apart modulo 4 KB
    # (padded), not a multiple of 4 KB: a load whose address equals an earlier store's in the
    # low 12 bits waits for that store (4K aliasing), and re[k + 1] comes right after im[k].
    period = 4096 // VECTOR_BYTES
    wanted = ARRAY_OFFSET // VECTOR_BYTES
    vectors = b.add(m, _c(1))
    vectors = b.add(vectors, b.and_(b.sub(_c(wanted), vectors), _c(period - 1)))
    length = b.mul(vectors, _c(lanes))
    scratch = b.alloca(element, size=b.mul(length, _c(4)))
    scratch.align = VECTOR_BYTES
    arrays = [f.at(scratch, b.mul(length, _c(k))) for k in range(4)]
    state = {name: b.alloca(f.ptr) for name in ("src_re", "src_im", "dst_re", "dst_im")}
    state.update((name, b.alloca(I64)) for name in ("n", "s", "twiddle"))
    zero = ir.Constant(f.vec, [0.0] * lanes)
    last_row = b.sub(rows, _c(1))
    next_group = b.mul(in_row, _c(lanes))  # (in scalars)
    half_mask = _c(~(half - 1))

    def load_rows(row_pointers, count, first, second):
        """Element k of each row (scalars 2k and 2k + 1) into vector k of ``first`` / ``second``:
        whole vectors of each row transposed in registers, then the rest one scalar at a time."""
        whole = b.and_(count, half_mask)

        def chunk(k0):
            # the next group's rows (one block: the rows are adjacent), in order, a chunk's share
            ahead_of = f.at(row_pointers[0], b.add(b.mul(k0, _c(2 * lanes)), next_group))
            for i in range(lanes * VECTOR_BYTES // 64):
                f.prefetch(f.at(ahead_of, _c(i * 64 // itemsize)))
            rows_in = f.transpose([f.load(p, b.mul(k0, _c(2)), aligned=False) for p in row_pointers])
            for j, v in enumerate(rows_in):
                f.store(v, first if j % 2 == 0 else second, b.mul(b.add(k0, _c(j // 2)), _c(lanes)))

        def scalar(k):
            for r, p in enumerate(row_pointers):
                for part, array in enumerate((first, second)):
                    value = b.load(f.at(p, b.add(b.mul(k, _c(2)), _c(part))))
                    b.store(value, f.at(array, b.add(b.mul(k, _c(lanes)), _c(r))))
        f.loop(_c(0), whole, half, chunk)
        f.loop(whole, count, 1, scalar)

    def store_rows(row_pointers, count, first, second):
        """The inverse of ``load_rows``, times ``scale`` (not for the forward real transform)."""
        whole = b.and_(count, half_mask)

        def scaled(v):
            return b.fmul(v, scale)

        def chunk(k0):
            vectors = [scaled(f.load(first if j % 2 == 0 else second, b.mul(b.add(k0, _c(j // 2)), _c(lanes))))
                       for j in range(lanes)]
            for p, v in zip(row_pointers, f.transpose(vectors)):
                f.store(v, p, b.mul(k0, _c(2)), aligned=False)

        def scalar(k):
            for part, array in enumerate((first, second)):
                v = scaled(f.load(array, b.mul(k, _c(lanes))))
                for r, p in enumerate(row_pointers):
                    b.store(b.extract_element(v, _c(r)), f.at(p, b.add(b.mul(k, _c(2)), _c(part))))
        f.loop(_c(0), whole, half, chunk)
        f.loop(whole, count, 1, scalar)

    def element_at(array, index):
        return f.load(array, b.mul(index, _c(lanes)))

    def put(value, array, index):
        f.store(value, array, b.mul(index, _c(lanes)))

    def dft(x):
        """The DFT of the ``len(x)`` (2, 4 or 8) complex vectors ``x``, by radix-2 splits:
        a_j = x_j + x_(j+h), b_j = (x_j - x_(j+h)) W^j, then X_2k = DFT(a)_k, X_(2k+1) = DFT(b)_k."""
        r = len(x)
        if r == 1:
            return list(x)
        h = r // 2
        a = [f.add(x[j], x[j + h]) for j in range(h)]
        d = [f.sub(x[j], x[j + h]) for j in range(h)]
        # times W^j, W = exp(-2 pi i / r): 1, then -i (j = r/4), (1 - i) / sqrt 2 and (-1 - i) / sqrt 2 (r = 8)
        root = f.splat(ir.Constant(element, math.sqrt(0.5)))
        for j in range(1, h):
            re, im = d[j]
            if 4 * j == r:
                d[j] = (im, b.fneg(re))
            elif 8 * j == r:
                d[j] = (b.fmul(b.fadd(re, im), root), b.fmul(b.fsub(im, re), root))
            else:  # 8 j = 3 r
                d[j] = (b.fmul(b.fsub(im, re), root), b.fneg(b.fmul(b.fadd(re, im), root)))
        even, odd = dft(a), dft(d)
        return [v for pair in zip(even, odd) for v in pair]

    def passes():
        """The forward transform of length m from buffer 0 (arrays 0, 1): Stockham's autosort
        passes of radix RADIX (then one of radix 4 or 2 for the rest), each from one buffer to the
        other; returns the arrays holding the result. A pass of length n (n s = m) and radix r:
        y[j + s (r p + k)] = W_n^(k p) DFT_r(x[j + s p + l m / r], l = 0..r-1)_k for p < n / r, j < s."""
        for name, value in (("src_re", arrays[0]), ("src_im", arrays[1]), ("dst_re", arrays[2]),
                            ("dst_im", arrays[3]), ("n", m), ("s", _c(1)), ("twiddle", _c(0))):
            b.store(value, state[name])

        def swap():
            for one, other in (("src_re", "dst_re"), ("src_im", "dst_im")):
                x, y = b.load(state[one]), b.load(state[other])
                b.store(y, state[one])
                b.store(x, state[other])

        def radix_pass(radix):
            n, s = b.load(state["n"]), b.load(state["s"])
            q = b.sdiv(n, _c(radix))
            leg = b.sdiv(m, _c(radix))  # the distance between the inputs of a butterfly
            x_re, x_im, y_re, y_im = (b.load(state[k]) for k in ("src_re", "src_im", "dst_re", "dst_im"))

            def butterfly(source, out, twiddles):
                x = [(element_at(x_re, i), element_at(x_im, i))
                     for i in (b.add(source, b.mul(leg, _c(k))) for k in range(radix))]
                y = dft(x)
                if twiddles is not None:
                    y[1:] = [f.mul(v, w) for v, w in zip(y[1:], twiddles)]
                for k, (re, im) in enumerate(y):
                    index = b.add(out, b.mul(s, _c(k)))
                    put(re, y_re, index)
                    put(im, y_im, index)
                ahead(STREAM_LINES)

            def twiddled():
                base = b.load(state["twiddle"])
                size = 2 * (radix - 1)

                def per_p(p):
                    at = b.add(base, b.mul(p, _c(size)))
                    w = [(f.splat(b.load(f.at(table, b.add(at, _c(2 * k))))),
                          f.splat(b.load(f.at(table, b.add(at, _c(2 * k + 1)))))) for k in range(radix - 1)]
                    sp = b.mul(s, p)
                    f.loop(_c(0), s, 1, lambda j: butterfly(b.add(sp, j), b.add(b.mul(sp, _c(radix)), j), w))
                f.loop(_c(0), q, 1, per_p)
                b.store(b.add(base, b.mul(q, _c(size))), state["twiddle"])

            def last():  # q = 1: every twiddle factor is 1
                f.loop(_c(0), s, 1, lambda j: butterfly(j, j, None))
            if radix == RADIX:
                f.if_else(b.icmp_signed(">", q, _c(1)), twiddled, last)
            else:  # (the rest: the last pass)
                last()
            swap()
            b.store(b.mul(s, _c(radix)), state["s"])
            b.store(q, state["n"])

        f.while_(lambda: b.icmp_signed(">=", b.load(state["n"]), _c(RADIX)), lambda: radix_pass(RADIX))
        rest = RADIX // 2
        while rest > 1:
            with b.if_then(b.icmp_signed("==", b.load(state["n"]), _c(rest))):
                radix_pass(rest)
            rest //= 2
        return b.load(state["src_re"]), b.load(state["src_im"])

    def twiddle(k):
        at = b.add(post, b.mul(k, _c(2)))
        return f.splat(b.load(f.at(table, at))), f.splat(b.load(f.at(table, b.add(at, _c(1)))))

    def split_real(re, im):
        """RFFT: the spectrum X[0..m] of the real row x from Z = FFT_m(x[2k] + i x[2k + 1]), in place:
        with E = (Z[k] + conj Z[m-k]) / 2, O = -i (Z[k] - conj Z[m-k]) / 2 and W = exp(-2 pi i k / 2m),
        X[k] = E + W O and X[m-k] = conj(E - W O); X[0] and X[m] are Re Z[0] +- Im Z[0]."""
        z_re, z_im = element_at(re, _c(0)), element_at(im, _c(0))
        put(b.fadd(z_re, z_im), re, _c(0))
        put(zero, im, _c(0))
        put(b.fsub(z_re, z_im), re, m)
        put(zero, im, m)
        one_half = f.splat(ir.Constant(element, 0.5))

        def pair(k):
            ahead(1)
            mk = b.sub(m, k)
            a = (element_at(re, k), element_at(im, k))
            c = (element_at(re, mk), element_at(im, mk))
            e = (b.fmul(b.fadd(a[0], c[0]), one_half), b.fmul(b.fsub(a[1], c[1]), one_half))
            d = (b.fmul(b.fsub(a[0], c[0]), one_half), b.fmul(b.fadd(a[1], c[1]), one_half))
            t = f.mul((d[1], b.fneg(d[0])), twiddle(k))  # W O, O = -i d
            put(b.fadd(e[0], t[0]), re, k)
            put(b.fadd(e[1], t[1]), im, k)
            put(b.fsub(e[0], t[0]), re, mk)
            put(b.fsub(t[1], e[1]), im, mk)
        f.loop(_c(1), b.add(b.ashr(m, _c(1)), _c(1)), 1, pair)

    def join_real(re, im):
        """IRFFT: 2 Z[k] = E + i O from the spectrum X[0..m] in place, E = X[k] + conj X[m-k],
        O = conj(W) (X[k] - conj X[m-k]) (the inverse of ``split_real``), Z written with its parts
        swapped (re into ``im``), so that the forward passes compute the inverse transform; the
        imaginary parts of X[0] and X[m] are ignored (as NumPy's and JAX's)."""
        x0, xm = element_at(re, _c(0)), element_at(re, m)
        put(b.fadd(x0, xm), im, _c(0))
        put(b.fsub(x0, xm), re, _c(0))

        def pair(k):
            ahead(1)
            mk = b.sub(m, k)
            a = (element_at(re, k), element_at(im, k))
            c = (element_at(re, mk), element_at(im, mk))
            e = (b.fadd(a[0], c[0]), b.fsub(a[1], c[1]))
            d = (b.fsub(a[0], c[0]), b.fadd(a[1], c[1]))
            w = twiddle(k)
            o = f.mul(d, (w[0], b.fneg(w[1])))
            put(b.fsub(e[0], o[1]), im, k)
            put(b.fadd(e[1], o[0]), re, k)
            put(b.fadd(e[0], o[1]), im, mk)
            put(b.fsub(o[0], e[1]), re, mk)
        f.loop(_c(1), b.add(b.ashr(m, _c(1)), _c(1)), 1, pair)

    streams = [(b.alloca(I64), b.alloca(I64)) for _ in range(2)]  # (cursor, last line) of each

    def ahead(lines):
        """Ask for the next ``lines`` cache lines of each stream (the last one again past its end)."""
        for cursor, last in streams:
            at = b.load(cursor)
            end = b.load(last)
            for i in range(lines):
                line = b.add(at, _c(64 * i))
                line = b.select(b.icmp_signed("<", line, end), line, end)
                f.prefetch(b.inttoptr(line, ir.IntType(8).as_pointer()))
            b.store(b.add(at, _c(64 * lines)), cursor)

    def start_streams(g):
        """While this group is transformed, the lines of its output and of the next group's input."""
        first_row = b.mul(g, _c(lanes))
        for (cursor, last), base, stride, begin_row in zip(streams, (target, source), (out_row, in_row),
                                                           (first_row, b.add(first_row, _c(lanes)))):
            begin_row = b.select(b.icmp_signed("<", begin_row, rows), begin_row, rows)
            end_row = b.add(begin_row, _c(lanes))
            end_row = b.select(b.icmp_signed("<", end_row, rows), end_row, rows)
            start = b.ptrtoint(f.at(base, b.mul(begin_row, stride)), I64)
            end = b.ptrtoint(f.at(base, b.mul(end_row, stride)), I64)
            b.store(start, cursor)
            b.store(b.sub(end, _c(64)), last)

    def group(g):
        start_streams(g)
        first_row = b.mul(g, _c(lanes))
        # The rows of a last, partial group beyond the batch are its last row again: computed
        # alike, lane for lane, and stored over it with the same values.
        row = [b.select(b.icmp_signed("<", r, last_row), r, last_row)
               for r in (b.add(first_row, _c(i)) for i in range(lanes))]
        rows_in = [f.at(source, b.mul(r, in_row)) for r in row]
        rows_out = [f.at(target, b.mul(r, out_row)) for r in row]
        # IFFT: the forward transform with the parts swapped on the way in and out (swap(FFT(swap x))
        # = conj(FFT(conj x)), the unscaled inverse); IRFFT: swapped by ``join_real``, and out
        swap_in = b.icmp_signed("==", fft_type, _c(FftType.IFFT))
        load_rows(rows_in, b.add(m, b.zext(is_irfft, I64)), b.select(swap_in, arrays[1], arrays[0]),
                  b.select(swap_in, arrays[0], arrays[1]))
        with b.if_then(is_irfft):
            join_real(arrays[0], arrays[1])
        re, im = passes()
        with b.if_then(is_rfft):
            split_real(re, im)
        swap_out = b.or_(swap_in, is_irfft)
        store_rows(rows_out, b.add(m, b.zext(is_rfft, I64)), b.select(swap_out, im, re), b.select(swap_out, re, im))

    f.loop(begin, end, 1, group)
    b.ret_void()


# --- twiddle factors ----------------------------------------------------------------------------
def _roots(k: np.ndarray, n: int) -> np.ndarray:
    """exp(-2 pi i k / n) in float64, each part within an ulp or so: the angle is reduced to an
    octant exactly (integer arithmetic), so cos and sin see angles of at most pi / 4."""
    eighth = (8 * k) % (8 * n)  # the angle in units of pi / (4 n)
    quadrant = eighth // (2 * n)
    rest = eighth - quadrant * 2 * n  # [0, 2n): the angle within the quadrant, (pi / 4n) units
    flip = rest > n
    angle = np.where(flip, 2 * n - rest, rest) * (np.pi / (4 * n))
    c, s = np.cos(angle), np.sin(angle)
    c, s = np.where(flip, s, c), np.where(flip, c, s)  # the angle's complement: cos <-> sin
    z = (c + 1j * s) * np.array([1, 1j, -1, -1j])[quadrant]  # exp(+i angle), turned by quadrants (exactly)
    return np.conj(z)


@functools.lru_cache(maxsize=64)
def twiddles(m: int, real: bool, dtype: np.dtype) -> tuple[np.ndarray, int]:
    """The table of a transform of complex length ``m``: for each radix-4 pass of length n > 4, for
    p < n / 4, (W^p, W^2p, W^3p) with W = exp(-2 pi i / n), as (re, im) pairs; then for the real
    transforms (length 2m) exp(-2 pi i k / 2m), k = 0..m/2. Computed in float64, rounded once to
    ``dtype``. Returns (the table, where the real transforms' part starts, in scalars)."""
    parts = []
    n = m
    while n >= RADIX:
        q = n // RADIX
        if q > 1:
            p = np.arange(q)
            parts.append(np.stack([_roots(p * j, n) for j in range(1, RADIX)], axis=1).reshape(-1))
        n = q
    post = 2 * sum(len(part) for part in parts)
    if real:
        parts.append(_roots(np.arange(m // 2 + 1), 2 * m))
    joined = np.concatenate(parts) if parts else np.zeros(1, np.complex128)
    table = np.stack([joined.real, joined.imag], axis=1).reshape(-1).astype(dtype)
    table.flags.writeable = False
    return table, post


# --- the compiled functions ---------------------------------------------------------------------
_compiled: dict[np.dtype, tuple[jit.CompiledModule, jit.NativeFunction]] = {}
_compile_lock = threading.Lock()


def transform_function(dtype: np.dtype) -> tuple[jit.CompiledModule, jit.NativeFunction]:
    """The compiled transform of ``dtype`` (float32 or float64, the parts' type): compiled once per
    process (or loaded from the disk cache)."""
    dtype = np.dtype(dtype)
    with _compile_lock:
        if dtype not in _compiled:
            module = jit.new_module(f"fft_{dtype.name}")
            element, itemsize = (F32, 4) if dtype == np.float32 else (F64, 8)
            _build(module, element, itemsize)
            compiled = jit.compile_module(module)
            _compiled[dtype] = compiled, compiled.kernel("fft")
        return _compiled[dtype]


def warm_up(dtype: np.dtype) -> Job:
    """The background job that compiles the transforms of ``dtype``, started now if it was not:
    once per process."""
    dtype = np.dtype(dtype)
    return background.submit(f"cpu: compile the {dtype.name} transforms", transform_function, dtype)


def ready(dtype: np.dtype) -> bool:
    """Whether the transforms of ``dtype`` are compiled; the first ask starts compiling them in the
    background (meanwhile programs call the reference rule)."""
    dtype = np.dtype(dtype)
    if dtype in _compiled:
        return True
    warm_up(dtype)
    return dtype in _compiled


# --- which equations, and the calls ---------------------------------------------------------------
# The complex length m of the core transform (the rows' length; half of it for the real
# transforms): up to MAX_CORE, so that the scratch (4 (m + 1) vectors, padded) stays within about
# 530 KB of stack with 64-byte vectors.
MAX_CORE = 2048
# One row in a group computes a group's work for one row: DUCC does a single long row faster. A
# transform is native from ``min_rows`` rows: lanes * m / SHARED_LANES_CORE (at least one). In
# ember.jit against DUCC's fallback step (8 float32 / 4 float64 lanes): one row of 2048 complex64
# 1.02x, two 0.83x; one of 1024 0.69x; one of 4096 reals 0.86x; one of 2048 complex128 0.85x.
SHARED_LANES_CORE = 8192
# A batch is shared by threads from this much work (rows n log2 n: a kernel's 2^18 elements took
# about as long as 2^18 of these units, ~20 us on one core).
PARALLEL_MIN_WORK = 1 << 18
_REAL = (FftType.RFFT, FftType.IRFFT)
_PARTS: dict[np.dtype, np.dtype] = {dtypes.float32: np.dtype(np.float32), dtypes.complex64: np.dtype(np.float32),
          dtypes.float64: np.dtype(np.float64), dtypes.complex128: np.dtype(np.float64)}


def lanes(dtype: np.dtype) -> int:
    """Rows per group: the lanes of a vector of ``dtype`` (the parts' type)."""
    return VECTOR_BYTES // np.dtype(dtype).itemsize


def lengths(fft_type: FftType) -> tuple[int, int]:
    """The least and the greatest row length (a power of two) transformed natively."""
    real = FftType(fft_type) in _REAL
    return (2, 2 * MAX_CORE) if real else (2, MAX_CORE)


def min_rows(n: int, fft_type: FftType, dtype: np.dtype) -> int:
    """The fewest rows of length ``n`` that the native transform takes."""
    core = n // 2 if FftType(fft_type) in _REAL else n
    return max(1, lanes(_PARTS[np.dtype(dtype)]) * core // SHARED_LANES_CORE)


def applies(eqn: Eqn) -> bool:
    """Whether the native transform computes ``eqn``: an ``fft`` over one axis of a power-of-two
    length within ``lengths``, of at least ``min_rows`` rows."""
    if eqn.primitive is not fft_p or len(eqn.params["fft_lengths"]) != 1:
        return False
    (n,) = eqn.params["fft_lengths"]
    x, fft_type = eqn.invars[0].aval, eqn.params["fft_type"]
    low, high = lengths(fft_type)
    if x.dtype not in _PARTS or not low <= n <= high or n & (n - 1):
        return False
    return math.prod(x.shape[:-1]) >= min_rows(n, fft_type, x.dtype)


def axis_by_axis(eqn: Eqn) -> list[Eqn] | None:
    """An ``fft`` over 2 or 3 axes as transforms of rows, one axis at a time, each axis brought
    last by a transposing kernel (and the result back to its order): the n-dimensional transforms
    (``fft2``, ``rfftn``, ...) on the native row transform; None unless every one of those
    transforms is native. RFFT: the real rows first, then the other axes; IRFFT: the other axes
    first, then the real rows (NumPy's ``rfftn`` / ``irfftn``); the inverse scales by 1/n an axis."""
    lengths = eqn.params["fft_lengths"]
    if eqn.primitive is not fft_p or len(lengths) < 2:
        return None
    fft_type = FftType(eqn.params["fft_type"])
    (x,), (y,) = eqn.invars, eqn.outvars
    rank, count = y.aval.ndim, len(lengths)
    complex_type = FftType.IFFT if fft_type in (FftType.IFFT, FftType.IRFFT) else FftType.FFT
    # (axis, type, length) in order; the real rows first (RFFT) or last (IRFFT)
    others = [(rank - count + i, complex_type, lengths[i]) for i in reversed(range(count - 1))]
    last = (rank - 1, fft_type if fft_type in _REAL else complex_type, lengths[-1])
    steps = others + [last] if fft_type == FftType.IRFFT else [last] + others
    eqns: list[Eqn] = []
    order = list(range(rank))  # the original axis at each position of ``value``
    value = x

    def add(primitive, operand, params, shape, dtype):
        out = Var(ShapedArray(shape, np.dtype(dtype)))
        if primitive is fft_p:
            eqns.append(Eqn(fft_p, [operand], params, [out]))
        else:  # a kernel that transposes
            inner_in, inner_out = Var(operand.aval), Var(out.aval)
            jaxpr = Jaxpr([], [inner_in], [Eqn(transpose_p, [inner_in], params, [inner_out])], [inner_out])
            eqns.append(Eqn(fusion_p, [operand], {"jaxpr": ClosedJaxpr(jaxpr, []), "name": "fft_transpose"}, [out]))
        return out

    def transpose(value, new_order):
        permutation = tuple(order.index(axis) for axis in new_order)
        return add(transpose_p, value, {"permutation": permutation},
                   tuple(value.aval.shape[p] for p in permutation), value.aval.dtype), new_order

    for axis, step_type, n in steps:
        if order[-1] != axis:
            value, order = transpose(value, [a for a in order if a != axis] + [axis])
        shape = list(value.aval.shape)
        dtype = value.aval.dtype
        if step_type == FftType.RFFT:
            shape[-1], dtype = n // 2 + 1, y.aval.dtype
        elif step_type == FftType.IRFFT:
            shape[-1], dtype = n, y.aval.dtype
        value = add(fft_p, value, {"fft_type": step_type, "fft_lengths": (n,)}, tuple(shape), dtype)
        if not applies(eqns[-1]):
            return None
    if order != list(range(rank)):
        value, order = transpose(value, list(range(rank)))
    eqns[-1] = eqns[-1].replace(outvars=[y])
    return eqns


class RowTransform:
    """One ``fft`` equation that ``applies``: its parameters, twiddle factors and thread split,
    worked out once; called on the operand's and the output's buffers (C-contiguous)."""

    def __init__(self, eqn: Eqn) -> None:
        self.eqn = eqn
        fft_type = FftType(eqn.params["fft_type"])
        (n,) = eqn.params["fft_lengths"]
        x, y = eqn.invars[0].aval, eqn.outvars[0].aval
        self.dtype = _PARTS[x.dtype]
        m = n // 2 if fft_type in _REAL else n
        self.rows = math.prod(x.shape[:-1])
        in_row = x.shape[-1] * (2 if x.dtype in dtypes.COMPLEX else 1)
        out_row = y.shape[-1] * (2 if y.dtype in dtypes.COMPLEX else 1)
        scale = 1.0 / n if fft_type in (FftType.IFFT, FftType.IRFFT) else 1.0  # (JAX's: 1/n on the inverse)
        self.twiddles, post = twiddles(m, fft_type in _REAL, self.dtype)
        self.params = np.array([m, self.rows, in_row, out_row, int(fft_type), gemm.alpha_bits(scale), post], np.int64)
        self.extent = -(-self.rows // lanes(self.dtype))  # groups of rows
        self.work = self.rows * n * max(n.bit_length(), 1)  # (about the flops)
        self.chunks = threads.chunk_count(self.extent, self.work, PARALLEL_MIN_WORK)
        ready(self.dtype)

    def call(self) -> tuple[int, int, int, int] | None:
        """``(function, extent, threads, pieces per thread)`` of the call with buffers (input,
        output, ``params``, ``twiddles``); None while the function compiles."""
        if not ready(self.dtype):
            return None
        address = jit.address(transform_function(self.dtype)[1])
        return address, self.extent, self.chunks, threads.PIECES_PER_THREAD

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        if not ready(self.dtype):  # (early in a process): the reference rule
            np.copyto(out, impl_rules[fft_p](x, **self.eqn.params))
            return
        fn = transform_function(self.dtype)[1]
        pointers = (ctypes.c_void_p * 4)(data_pointer(x), data_pointer(out), self.params.ctypes.data,
                                         self.twiddles.ctypes.data)
        if self.chunks == 1:
            fn(pointers, 0, self.extent)
        elif threads.openmp_available():
            threads.run_team(fn, pointers, self.extent, self.chunks)
        else:
            threads.run_split(fn, pointers, self.extent, self.chunks)
