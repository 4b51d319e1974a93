"""Iterative solvers of ``A x = b`` with SciPy's names (``jax.scipy.sparse.linalg``): conjugate
gradients (``cg``, for positive-definite ``A``), BiCGSTAB and restarted GMRES (any nonsingular
``A``).

``A`` (and the preconditioner ``M``) is a matrix or a function computing the matrix-vector
product, so a solver never needs ``A``'s entries; ``b`` may be a pytree, which the solver
works on as the one vector of its leaves. Each is a ``lax.while_loop``, so it runs under jit and
vmap; ``cg`` and ``bicgstab`` return ``(x, None)``, ``gmres`` ``(x, info)``, as JAX's. They define
no derivative rule (JAX's come from ``lax.custom_linear_solve``, which ember lacks): reverse-mode
differentiation through them is refused, as for any ``while_loop``.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np

import ember.numpy as jnp
from ember import dtypes, lax, tree_util
from ember.numpy.core import ensure_array

__all__ = ["bicgstab", "cg", "gmres"]


# --- the vector the solver works on: b's leaves, raveled and joined --------------------------------
def _flat_problem(A: Any, b: Any, x0: Any, M: Any) -> tuple[Callable, Callable, Any, Any, Callable]:
    """The matvec, preconditioner, ``b`` and ``x0`` over one flat vector, and the map back to ``b``'s
    structure."""
    leaves, treedef = tree_util.tree_flatten(b)
    leaves = [ensure_array(leaf) for leaf in leaves]
    if x0 is None:
        x0 = tree_util.tree_map(jnp.zeros_like, b)
    x0_leaves, x0_tree = tree_util.tree_flatten(x0)
    if x0_tree != treedef:
        raise ValueError("x0 and b must have matching tree structure: "
                         f"{x0_tree} vs {treedef}")
    x0_leaves = [ensure_array(leaf) for leaf in x0_leaves]
    if [leaf.shape for leaf in x0_leaves] != [leaf.shape for leaf in leaves]:
        raise ValueError("arrays in x0 and b must have matching shapes: "
                         f"{[leaf.shape for leaf in x0_leaves]} vs {[leaf.shape for leaf in leaves]}")
    dtype = dtypes.result_type(*leaves, *x0_leaves) if leaves else np.float32
    if not dtypes.issubdtype(dtype, np.inexact):
        dtype = dtypes.result_type(dtype, 1.0)
    shapes = [leaf.shape for leaf in leaves]
    sizes = [math.prod(shape) for shape in shapes]
    offsets = np.cumsum([0] + sizes)

    def ravel(leaves_: list) -> Any:
        return jnp.concatenate([jnp.ravel(leaf).astype(dtype) for leaf in leaves_]) if leaves_ \
            else jnp.zeros((0,), dtype)

    def unravel(flat: Any) -> Any:
        return tree_util.tree_unflatten(treedef, [
            flat[int(offsets[i]):int(offsets[i + 1])].reshape(shape).astype(leaf.dtype)
            for i, (shape, leaf) in enumerate(zip(shapes, leaves))])

    def as_flat_operator(op: Any, name: str) -> Callable:
        if op is None:
            return lambda v: v
        if callable(op):
            return lambda v: ravel(tree_util.tree_leaves(op(unravel(v))))
        matrix = ensure_array(op)
        if treedef.num_leaves != 1 or matrix.ndim != 2:
            raise TypeError(f"{name} must be a 2-D array acting on the vector b, or a function computing "
                            f"the matrix-vector product; got {name} of shape {matrix.shape}")
        return lambda v: jnp.ravel(jnp.matmul(matrix, v.reshape(shapes[0]),
                                              precision=lax.Precision.HIGHEST)).astype(dtype)

    return as_flat_operator(A, "A"), as_flat_operator(M, "M"), ravel(leaves), ravel(x0_leaves), unravel


def _dot(u: Any, v: Any) -> Any:
    return jnp.vdot(u, v, precision=lax.Precision.HIGHEST)


def _norm(v: Any) -> Any:
    return jnp.sqrt(jnp.real(_dot(v, v)))


def _squared_target(b: Any, tol: float, atol: float) -> Any:
    """The squared residual norm to reach: ``max(tol |b|, atol) ** 2``."""
    return jnp.maximum(tol * _norm(b), atol) ** 2


def _solver(solve: Callable) -> Callable:
    """The public form of a flat solver: pytrees in and out, ``(x, None)``."""
    @functools.wraps(solve)
    def run(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
            M: Any = None, **options: Any) -> tuple[Any, None]:
        matvec, precondition, flat_b, flat_x0, unravel = _flat_problem(A, b, x0, M)
        if maxiter is None:
            maxiter = 10 * flat_b.size
        return unravel(solve(matvec, flat_b, flat_x0, tol, atol, maxiter, precondition, **options)), None
    return run


# --- conjugate gradients ---------------------------------------------------------------------------------
def _cg(matvec: Callable, b: Any, x0: Any, tol: float, atol: float, maxiter: int, precondition: Callable) -> Any:
    target = _squared_target(b, tol, atol)
    r0 = b - matvec(x0)
    z0 = precondition(r0)

    def keep_going(state: tuple) -> Any:
        _, r, _, _, k = state
        return (jnp.real(_dot(r, r)) > target) & (k < maxiter)

    def step(state: tuple) -> tuple:
        x, r, p, rz, k = state
        ap = matvec(p)
        alpha = rz / _dot(p, ap)
        x, r = x + alpha * p, r - alpha * ap
        z = precondition(r)
        rz_next = _dot(r, z)
        return x, r, z + (rz_next / rz) * p, rz_next, k + 1

    x, *_ = lax.while_loop(keep_going, step, (x0, r0, z0, _dot(r0, z0), jnp.zeros((), "int32")))
    return x


def cg(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
       M: Any = None) -> tuple[Any, None]:
    """``(x, None)`` with ``A x ≈ b`` for Hermitian positive-definite ``A``, by conjugate gradients
    (``M``: a positive-definite preconditioner approximating ``A``'s inverse), stopping when
    ``|b - A x| <= max(tol |b|, atol)`` or after ``maxiter`` steps (default ``10 * b.size``)."""
    return _solver(_cg)(A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M)


# --- BiCGSTAB -------------------------------------------------------------------------------------------------
def _bicgstab(matvec: Callable, b: Any, x0: Any, tol: float, atol: float, maxiter: int,
              precondition: Callable) -> Any:
    target = _squared_target(b, tol, atol)
    r0 = b - matvec(x0)
    one = jnp.ones((), r0.dtype)

    def keep_going(state: tuple) -> Any:
        _, r, *_, k, broke = state
        return (jnp.real(_dot(r, r)) > target) & (k < maxiter) & ~broke

    def step(state: tuple) -> tuple:
        x, r, p, v, rho, alpha, omega, k, _ = state
        rho_next = _dot(r0, r)
        beta = (rho_next / rho) * (alpha / omega)
        p = r + beta * (p - omega * v)
        p_hat = precondition(p)
        v = matvec(p_hat)
        alpha = rho_next / _dot(r0, v)
        s = r - alpha * v
        s_hat = precondition(s)
        t = matvec(s_hat)
        omega = _dot(t, s) / _dot(t, t)
        x = x + alpha * p_hat + omega * s_hat
        r = s - omega * t
        # rho or omega zero: the recurrence breaks down (or r0 is already solved); stop where we are
        broke = (rho_next == 0) | (omega == 0) | ~jnp.isfinite(jnp.real(omega))
        return x, r, p, v, rho_next, alpha, omega, k + 1, broke

    zeros = jnp.zeros_like(r0)
    init = (x0, r0, zeros, zeros, one, one, one, jnp.zeros((), "int32"), jnp.zeros((), bool))
    x, *_ = lax.while_loop(keep_going, step, init)
    return x


def bicgstab(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,
             M: Any = None) -> tuple[Any, None]:
    """``(x, None)`` with ``A x ≈ b`` for any nonsingular ``A``, by BiCGSTAB (``M``: a preconditioner
    approximating ``A``'s inverse, applied on the right), stopping when
    ``|b - A x| <= max(tol |b|, atol)`` or after ``maxiter`` steps (default ``10 * b.size``)."""
    return _solver(_bicgstab)(A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M)


# --- restarted GMRES --------------------------------------------------------------------------------------------
def _arnoldi_cycle(matvec: Callable, precondition: Callable, x: Any, b: Any, restart: int, target: Any,
                   stop_early: bool) -> tuple[Any, Any]:
    """One GMRES cycle from ``x``: an orthonormal basis of the Krylov space of ``M A`` on the
    preconditioned residual (modified Gram-Schmidt), with the small least-squares problem kept
    triangular by Givens rotations, so its residual is known at each step. Returns the new ``x``
    and its preconditioned residual's squared norm."""
    residual = precondition(b - matvec(x))
    beta = _norm(residual)
    n, dtype = b.shape[0], b.dtype
    basis = jnp.zeros((restart + 1, n), dtype).at[0].set(residual / jnp.where(beta == 0, 1, beta).astype(dtype))
    triangle = jnp.zeros((restart + 1, restart), dtype)
    cosines = jnp.zeros((restart,), dtype)
    sines = jnp.zeros((restart,), dtype)
    rhs = jnp.zeros((restart + 1,), dtype).at[0].set(beta.astype(dtype))
    rows = jnp.arange(restart + 1)

    def keep_going(state: tuple) -> Any:
        j, *_, rhs_ = state
        going = j < restart
        if stop_early:
            going = going & (jnp.abs(rhs_[j]) ** 2 > target)
        return going & (beta > 0)

    def step(state: tuple) -> tuple:
        j, basis_, triangle_, cos_, sin_, rhs_ = state
        w = precondition(matvec(basis_[j]))
        column = jnp.zeros((restart + 1,), dtype)
        for _ in range(2):  # Gram-Schmidt twice: orthogonal to working precision
            coefficients = jnp.where(rows <= j, jnp.conj(basis_) @ w, 0)
            w = w - coefficients @ basis_
            column = column + coefficients
        norm_w = _norm(w)
        column = column.at[j + 1].set(norm_w.astype(dtype))
        basis_ = basis_.at[j + 1].set(w / jnp.where(norm_w == 0, 1, norm_w).astype(dtype))

        # apply the earlier rotations to the new column, then one that zeroes its subdiagonal entry
        def rotate(i: Any, col: Any) -> Any:
            c, s = cos_[i], sin_[i]
            top, bottom = col[i], col[i + 1]
            return col.at[i].set(jnp.conj(c) * top + jnp.conj(s) * bottom).at[i + 1].set(-s * top + c * bottom)

        column = lax.fori_loop(0, j, rotate, column)
        top, bottom = column[j], column[j + 1]
        radius = jnp.sqrt(jnp.abs(top) ** 2 + jnp.abs(bottom) ** 2).astype(dtype)
        safe = jnp.where(radius == 0, 1, radius)
        c = jnp.where(radius == 0, 1, top / safe)
        s = jnp.where(radius == 0, 0, bottom / safe)
        column = column.at[j].set(radius).at[j + 1].set(0)
        rhs_ = rhs_.at[j + 1].set(-s * rhs_[j]).at[j].set(jnp.conj(c) * rhs_[j])
        return (j + 1, basis_, triangle_.at[:, j].set(column), cos_.at[j].set(c), sin_.at[j].set(s), rhs_)

    steps, basis, triangle, _, _, rhs = lax.while_loop(
        keep_going, step, (jnp.zeros((), "int32"), basis, triangle, cosines, sines, rhs))
    # back substitution on the leading steps x steps block (the unused part is the identity)
    used = jnp.arange(restart) < steps
    square = jnp.where(used[:, None] & used[None, :], triangle[:restart], jnp.eye(restart, dtype=dtype))
    coefficients = jnp.linalg.solve(square, jnp.where(used, rhs[:restart], 0))
    x = x + coefficients @ basis[:restart]
    return x, jnp.abs(rhs[steps]) ** 2


def _gmres(matvec: Callable, b: Any, x0: Any, tol: float, atol: float, maxiter: int, precondition: Callable,
           restart: int, solve_method: str) -> Any:
    if solve_method not in ("incremental", "batched"):
        raise ValueError(f"invalid solve_method {solve_method!r}, must be either 'incremental' or 'batched'")
    restart = max(1, min(restart, b.shape[0]))
    target = _squared_target(precondition(b), tol, atol)
    stop_early = solve_method == "incremental"

    def keep_going(state: tuple) -> Any:
        _, residual2, k = state
        return (residual2 > target) & (k < maxiter)

    def cycle(state: tuple) -> tuple:
        x, _, k = state
        x, residual2 = _arnoldi_cycle(matvec, precondition, x, b, restart, target, stop_early)
        return x, residual2, k + 1

    start = _norm(precondition(b - matvec(x0))) ** 2
    x, *_ = lax.while_loop(keep_going, cycle, (x0, start, jnp.zeros((), "int32")))
    return x


def gmres(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, restart: int = 20,
          maxiter: int | None = None, M: Any = None, solve_method: str = "batched") -> tuple[Any, Any]:
    """``(x, None)`` with ``A x ≈ b`` for any nonsingular ``A``, by GMRES restarted every ``restart``
    steps, for at most ``maxiter`` cycles (default ``10 * b.size``), until the residual (``M``: a
    preconditioner applied on the left) is below ``max(tol |M b|, atol)``. ``solve_method``
    ``"incremental"`` checks the residual after every step and may end a cycle early;
    ``"batched"`` always runs whole cycles. Both give the same ``x`` up to rounding. ``info`` is
    -1 when ``x`` holds a NaN, else 0 (as JAX's)."""
    x, _ = _solver(_gmres)(A, b, x0, tol=tol, atol=atol, maxiter=maxiter, M=M, restart=restart,
                           solve_method=solve_method)
    failed = jnp.any(jnp.stack([jnp.any(jnp.isnan(leaf)) for leaf in tree_util.tree_leaves(x)]))
    return x, jnp.where(failed, -1, 0)
