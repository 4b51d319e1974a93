"""``dot_general`` on float32 / float64: the native blocked product (``gemm``) into a preallocated buffer.

Operands are viewed as ``[batch, rows, contracted]`` and ``[batch, contracted,
cols]`` (a transposed operand stays a strided view: the product reads any
strides), and the rows are split over the thread pool. Small products are
fused into kernels instead (see ``program.SMALL_DOT``), and other dtypes
(integer products, half-precision accumulation) are fused loops too.

Why not NumPy's matmul (OpenBLAS): the OpenBLAS that NumPy ships runs its
Haswell (AVX2) kernels on this AVX-512 machine, and its threads spin while
they wait, which lost badly on shared cores. Measured, float32, one thread:
OpenBLAS 512^3 in 2.1 ms (125 GFLOP/s), 1024^3 in 17 ms; ``gemm`` 1.2 ms
(224 GFLOP/s) and 9.7 ms (220 GFLOP/s). While ``gemm`` compiles (once per process, in the
background) products use NumPy's matmul.
"""
from __future__ import annotations

import numpy as np

from ember import dtypes
from ember.backends.cpu import gemm, threads
from ember.core.ir import Eqn

# A chunk of a split product should take clearly longer than the split costs (15-20 us):
# 2^22 flops is about 20 us on one core.
PARALLEL_MIN_FLOPS = 1 << 22


def lowers_natively(eqn: Eqn) -> bool:
    lhs, rhs = (a.aval for a in eqn.invars)
    out = eqn.outvars[0].aval
    return lhs.dtype == rhs.dtype == out.dtype and out.dtype in (dtypes.float32, dtypes.float64)


def _as_matrices(x: np.ndarray, batch: tuple, first: tuple, second: tuple) -> np.ndarray:
    sizes = [int(np.prod([x.shape[d] for d in dims], dtype=np.int64)) for dims in (batch, first, second)]
    return np.transpose(x, batch + first + second).reshape(sizes)


class DotGeneral:
    """Computes one ``dot_general`` equation into a given output buffer."""

    def __init__(self, eqn: Eqn) -> None:
        (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
        lhs, rhs = (a.aval for a in eqn.invars)
        self.lhs_dims = (lhs_batch, tuple(d for d in range(lhs.ndim) if d not in lhs_contract + lhs_batch),
                         lhs_contract)
        self.rhs_dims = (rhs_batch, rhs_contract,
                         tuple(d for d in range(rhs.ndim) if d not in rhs_contract + rhs_batch))
        batch = int(np.prod([lhs.shape[d] for d in lhs_batch], dtype=np.int64))
        rows = int(np.prod([lhs.shape[d] for d in self.lhs_dims[1]], dtype=np.int64))
        cols = int(np.prod([rhs.shape[d] for d in self.rhs_dims[2]], dtype=np.int64))
        self.out_matrices = (batch, rows, cols)
        contracted = self.contracted = int(np.prod([lhs.shape[d] for d in lhs_contract], dtype=np.int64))
        self.chunks = threads.chunk_count(rows, 2 * batch * rows * cols * contracted, PARALLEL_MIN_FLOPS)
        self.dtype = eqn.outvars[0].aval.dtype
        gemm.ready(self.dtype)

    def __call__(self, lhs: np.ndarray, rhs: np.ndarray, out: np.ndarray) -> None:
        out3 = out.reshape(self.out_matrices)
        if self.contracted == 0:  # an empty sum
            out3.fill(0)
            return
        a, b = _as_matrices(lhs, *self.lhs_dims), _as_matrices(rhs, *self.rhs_dims)
        if not gemm.ready(self.dtype):  # only while the product compiles, early in a process
            np.matmul(a, b, out=out3)
            return
        gemm.matmul(a, b, out3, self.chunks)
