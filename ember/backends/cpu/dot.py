"""``dot_general`` on float32 / float64: the native blocked product (``gemm``) into a preallocated
buffer, or, for large products on hosts without AVX-512, NumPy's matmul (its OpenBLAS). Complex
products are four real ones on the parts (``DotGeneral._complex``).

Operands are read where they lie when their dimensions allow (``gemm_layout``: strides, no
copies), else as ``[batch, rows, contracted]`` and ``[batch, contracted, cols]`` views (copied
where NumPy must), and the rows or columns are split over the threads. Small products are fused
into kernels instead (see ``codegen.SMALL_DOT``), and other dtypes (integer products,
half-precision accumulation) are fused loops too.

NumPy's OpenBLAS against ``gemm`` (``use_blas`` has the figures): on an AVX-512 host (znver5)
OpenBLAS runs its Haswell kernels (125 GFLOP/s a thread on 512^3, against ``gemm``'s 224), and
its threads spin while they wait, which lost badly on shared cores; on an AVX2 host (znver3) it
is 1.6-2.7x faster than ``gemm`` on large square products, and no faster on thin ones. While
``gemm`` compiles (once per process, in the background) products use NumPy's matmul.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ember import dtypes
from ember.backends.cpu import gemm, jit, threads
from ember.core.ir import Eqn

# A chunk of a split product should take clearly longer than the split costs (15-20 us):
# 2^22 flops is about 20 us on one core.
PARALLEL_MIN_FLOPS = 1 << 22


# Products with every dimension at least this large may call BLAS (``use_blas``).
BLAS_MIN_DIMENSION = 128


def use_blas() -> bool:
    """Whether products outside loops whose dimensions are all ``BLAS_MIN_DIMENSION`` or more
    call BLAS (NumPy's matmul: its OpenBLAS) rather than ``gemm``: ``EMBER_GEMM`` = ``blas`` or ``own`` if set,
    else on hosts without AVX-512. Measured side by side in one process (float32, GFLOP/s, 2
    threads) on znver3 (AVX2): OpenBLAS 78 / 124 / 100 against ``gemm``'s 49 / 51 / 37 for 512^3,
    1024^3 and 256x784x512, but for thin products, ``gemm`` as fast or faster (512x64x512: 81 /
    82; a convolution's patches, 65536x288x64: 55 / 64, and in whole programs, where the kernels
    between products need the cores, the attention row 0.65-0.66x JAX with ``gemm`` against
    0.84-1.32x with BLAS for all products, the CNN step 1.00-1.05x against 1.15-1.25x). On znver5
    (AVX-512) ``gemm`` ran at 224 GFLOP/s a thread against 125 for the OpenBLAS (Haswell kernels)
    that NumPy ships. Loops call ``gemm`` either way."""
    choice = os.environ.get("EMBER_GEMM", "").lower()
    if choice in ("blas", "own"):
        return choice == "blas"
    return "+avx512f" not in jit.host_features()


def lowers_natively(eqn: Eqn) -> bool:
    """Products this module computes: float32 / float64 ones (``gemm``), and complex ones (BLAS's
    cgemm / zgemm through NumPy's matmul)."""
    lhs, rhs = (a.aval for a in eqn.invars)
    out = eqn.outvars[0].aval
    return lhs.dtype == rhs.dtype == out.dtype and out.dtype in (dtypes.float32, dtypes.float64, *dtypes.COMPLEX)


def on_gemm(eqn: Eqn) -> bool:
    """Products the blocked product (``gemm``) computes: the real ones."""
    return lowers_natively(eqn) and eqn.outvars[0].aval.dtype not in dtypes.COMPLEX


# The blocked product needs every dimension of at least this size to pay: below it, its tiles
# (6 rows x 16 or 32 columns) and packed panels are mostly padding, while a fused loop does
# well (an outer product is a multiply per element, a matrix-vector product a dot per element).
# Measured: per-example logistic gradients 256x512, outer products (K = 1): 0.35 ms -> fused.
MIN_DIMENSION = 8


def _sizes(eqn: Eqn) -> tuple[int, int, int]:
    """Rows, columns and contracted size of a product (batch dimensions left out)."""
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    lhs, rhs = (a.aval.shape for a in eqn.invars)
    k = math.prod(lhs[d] for d in lhs_contract)
    m = math.prod(lhs[d] for d in range(len(lhs)) if d not in lhs_contract + lhs_batch)
    n = math.prod(rhs[d] for d in range(len(rhs)) if d not in rhs_contract + rhs_batch)
    return m, n, k


def blocked_pays(eqn: Eqn) -> bool:
    """Whether ``gemm`` is the way to compute this product (else a fused loop)."""
    return lowers_natively(eqn) and min(_sizes(eqn)) >= MIN_DIMENSION


def _row_major_strides(shape: tuple) -> list[int]:
    return [math.prod(shape[d + 1:]) for d in range(len(shape))]


def _merged(shape: tuple, groups: list[list[int]]) -> list[tuple[int, int]] | None:
    """For each group of dimensions (dimensions of size 1 left out), its size and its element
    stride in a row-major buffer of ``shape``, if the group is one stride apart; else None."""
    strides = _row_major_strides(shape)
    out = []
    for dims in groups:
        dims = [d for d in dims if shape[d] != 1]
        if any(strides[a] != strides[b] * shape[b] for a, b in zip(dims, dims[1:])):
            return None
        out.append((math.prod(shape[d] for d in dims), strides[dims[-1]] if dims else 0))
    return out


def gemm_layout(eqn: Eqn) -> tuple[int, ...] | None:
    """The first 12 parameters of ``gemm`` (batch, M, N, K, the strides of A, B and C) that compute the
    product ``eqn`` on its operands' row-major buffers as they are, if the batch, free and
    contracted dimensions of each operand are each one stride apart; else None."""
    if not on_gemm(eqn):
        return None
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    lhs, rhs = (a.aval.shape for a in eqn.invars)
    # pairs of dimensions of size 1 take no part in the product
    contract = [(a, b) for a, b in zip(lhs_contract, rhs_contract) if lhs[a] != 1]
    batch = [(a, b) for a, b in zip(lhs_batch, rhs_batch) if lhs[a] != 1]
    lhs_free = [d for d in range(len(lhs)) if d not in lhs_contract + lhs_batch]
    rhs_free = [d for d in range(len(rhs)) if d not in rhs_contract + rhs_batch]
    a = _merged(lhs, [[d for d, _ in batch], lhs_free, [d for d, _ in contract]])
    b = _merged(rhs, [[d for _, d in batch], [d for _, d in contract], rhs_free])
    if a is None or b is None:
        return None
    (n_batch, a_batch), (m, a_row), (k, a_k) = a
    (_, b_batch), (_, b_k), (n, b_col) = b
    return (n_batch, m, n, k, a_batch, a_row, a_k, b_batch, b_k, b_col, m * n, n)


def _as_matrices(x: np.ndarray, order: tuple, sizes: tuple) -> np.ndarray:
    return np.transpose(x, order).reshape(sizes)


class DotGeneral:
    """Computes one ``dot_general`` equation into a given output buffer: ``gemm`` on the
    operands' buffers as they are where their dimensions allow (``gemm_layout``), else on
    transposed copies. Everything about the shapes is worked out once, here: a small product
    costs microseconds, which per-call shape arithmetic in Python would exceed."""

    def __init__(self, eqn: Eqn) -> None:
        self.eqn = eqn  # (what a whole program's disk entry keeps of it: ``program_cache``)
        (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
        lhs, rhs = (a.aval for a in eqn.invars)
        lhs_free = tuple(d for d in range(lhs.ndim) if d not in lhs_contract + lhs_batch)
        rhs_free = tuple(d for d in range(rhs.ndim) if d not in rhs_contract + rhs_batch)
        batch = math.prod(lhs.shape[d] for d in lhs_batch)
        rows = math.prod(lhs.shape[d] for d in lhs_free)
        cols = math.prod(rhs.shape[d] for d in rhs_free)
        contracted = self.contracted = math.prod(lhs.shape[d] for d in lhs_contract)
        self.out_matrices = (batch, rows, cols)
        self.lhs_view = (lhs_batch + lhs_free + lhs_contract, (batch, rows, contracted))
        self.rhs_view = (rhs_batch + rhs_contract + rhs_free, (batch, contracted, cols))
        self.dtype = eqn.outvars[0].aval.dtype
        self.multiply_adds = batch * rows * cols * contracted
        flops = (8 if self.dtype in dtypes.COMPLEX else 2) * self.multiply_adds
        self.chunks = threads.chunk_count(rows, flops, PARALLEL_MIN_FLOPS)
        layout = gemm_layout(eqn)
        self.part = np.dtype(np.float64 if self.dtype == dtypes.complex128 else np.float32)
        self.complex = self.dtype in dtypes.COMPLEX
        real = self.part if self.complex else self.dtype  # (a complex product runs on its parts)
        self.extent: int  # of the range [begin, end) that threads share: rows, or panels of columns
        self.by_columns, self.extent = gemm.split(rows, cols, real) if self.chunks > 1 else (0, rows)
        self.params = None if layout is None else np.array([*layout, self.by_columns, 0, gemm.ALPHA_ONE], np.int64)
        # narrow products (on the operands as they lie): gemm's skinny function
        self.skinny = layout is not None and not self.complex and gemm.is_skinny(layout, real)
        # NumPy's matmul: its OpenBLAS, reading 2-d transposed views as they are
        self.blas = min(rows, cols, contracted) >= BLAS_MIN_DIMENSION and use_blas()
        if not self.blas:
            gemm.ready(real, self.skinny)

    @property
    def one_gemm_call(self) -> bool:
        """Whether this product is one call of ``gemm`` on the operands' buffers as they lie
        (real, read in place, not on BLAS, not an empty sum, split only over an OpenMP team):
        then native code may make that call (``gemm_call``)."""
        return self.params is not None and not self.blas and not self.complex and self.contracted > 0 \
            and (self.chunks == 1 or threads.openmp_available())

    def gemm_call(self) -> tuple[int, int, int, int] | None:
        """``(function, extent, threads, pieces per thread)`` of the ``gemm`` call that computes
        this product with buffers (A, B, C, ``params``), for a ``one_gemm_call`` product; None
        while ``gemm`` still compiles (in the background, early in a process)."""
        if not gemm.ready(self.dtype, self.skinny):
            return None
        address = jit.address(gemm.gemm_function(self.dtype, self.skinny)[1])
        return address, self.extent, self.chunks, gemm.pieces_per_thread(self.multiply_adds, self.extent,
                                                                          self.by_columns, self.chunks)

    def __call__(self, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
        if self.contracted == 0:  # an empty sum
            out.fill(0)
            return
        if self.complex:
            self._complex(lhs, rhs, out)
            return
        if self.params is not None and not self.blas and gemm.ready(self.dtype, self.skinny):
            gemm.run(self.dtype, (lhs, rhs, out), self.params, self.extent, self.chunks)
            return
        a, b = _as_matrices(lhs, *self.lhs_view), _as_matrices(rhs, *self.rhs_view)
        out3 = out.reshape(self.out_matrices)
        if self.blas or not gemm.ready(self.dtype):  # (gemm: only while it compiles, early in a process)
            np.matmul(a, b, out=out3)
            return
        gemm.matmul(a, b, out3, self.chunks)

    def _complex(self, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
        """A complex product as four real ones on the parts: re = Ar Br - Ai Bi, im = Ar Bi + Ai Br,
        each pair accumulated in one buffer, then interleaved into ``out``. The parts are copied
        out first: ``gemm`` reads any strides, but packing every other element of the interleaved
        operands cost more than the copies (512^3 complex64, same run: 10.2-10.5 ms on the
        strided views, 6.4-8.1 ms on copies; four real products alone, 5.9 ms). Measured against
        cgemm through NumPy's matmul (OpenBLAS, 2 threads on shared cores, complex64, strided
        views): 256^3 1.9 ms against 0.8-24 ms (its threads spin while they wait), 1024^3 70 ms
        against 104-134 ms. BLAS where ``use_blas`` says so, and while ``gemm`` compiles."""
        a, b = _as_matrices(lhs, *self.lhs_view), _as_matrices(rhs, *self.rhs_view)
        out3 = out.reshape(self.out_matrices)
        if self.blas or not gemm.ready(self.part):
            np.matmul(a, b, out=out3)
            return
        parts = np.empty((2,) + self.out_matrices, self.part)
        size = self.part.itemsize
        ar, ai, br, bi = (np.ascontiguousarray(p) for p in (a.real, a.imag, b.real, b.imag))
        for target, terms in ((parts[0], ((ar, br, 1.0), (ai, bi, -1.0))),
                              (parts[1], ((ar, bi, 1.0), (ai, br, 1.0)))):
            for accumulate, (x, y, alpha) in enumerate(terms):
                params = np.array([x.shape[0], x.shape[1], y.shape[2], x.shape[2], *(s // size for s in x.strides),
                                   *(s // size for s in y.strides), target.strides[0] // size,
                                   target.strides[1] // size, self.by_columns, accumulate, gemm.alpha_bits(alpha)],
                                  np.int64)
                gemm.run(self.part, (x, y, target), params, self.extent, self.chunks)
        out3.real, out3.imag = parts[0], parts[1]
