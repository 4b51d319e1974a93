"""The differentiation API, with JAX's signatures: ``jvp``, ``linearize``, ``vjp``, ``grad``,
``value_and_grad``, ``jacfwd``, ``jacrev``, ``hessian``, ``linear_transpose`` (and the custom-rule
decorators, with ``custom_gradient`` and ``closure_convert``, and ``custom_vmap``).

Everything here works on pytrees and flattens to the flat functions of the
transformation modules: ``jvp_flat`` (forward mode), ``linearize_flat`` (jvp plus
partial evaluation) and ``backward_pass`` (transposition of the linear program).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember import dtypes, errors, lax, tree_util
from ember.core.array import Array, ensure_array
from ember.core.avals import ShapedArray, aval_of_value
from ember.core.staging import DebugInfo, trace_to_jaxpr
from ember.core.trace import Tracer, current_trace
from ember.dtypes import float0, float0_zeros
from ember.lax import parallel as par
from ember.lax.base import aval
from ember.transforms import rules, user_functions  # noqa: F401  (rules: registers the rules)
from ember.transforms.batching import BatchTrace, BatchTracer, vmap
from ember.transforms.custom import custom_jvp, custom_vjp
from ember.transforms.custom_batching import custom_vmap, sequential_vmap
from ember.transforms.jvp import JVPTracer, jvp_flat
from ember.transforms.partial_eval import linearize_flat
from ember.transforms.programs import (
    eval_closed_by_binding,
    eval_jaxpr_by_binding,
    merge_by,
    select_by,
    trace_program,
)
from ember.transforms.tangents import Zero, instantiate, is_differentiable, match_type, zeros
from ember.transforms.transpose import UndefinedPrimal, backward_pass

__all__ = ["jvp", "linearize", "vjp", "grad", "value_and_grad", "jacfwd", "jacrev", "jacobian", "hessian",
           "custom_jvp", "custom_vjp", "custom_gradient", "closure_convert", "linear_transpose", "custom_vmap",
           "sequential_vmap"]


# --- flattening user functions ---------------------------------------------------------------
class _FlatFunction:
    """``fun`` as a function of flat leaves returning flat leaves; remembers the output structure.

    With ``has_aux``, the array leaves of the auxiliary data are returned as extra outputs, so
    that they leave the transformation as plain values (``split`` separates them again).
    """

    def __init__(self, fun: Callable, in_tree: Any, has_aux: bool, api: str, as_given: bool = False) -> None:
        self.fun, self.in_tree, self.has_aux, self.api = user_functions.traced(fun), in_tree, has_aux, api
        self.as_given = as_given  # (jvp: output leaves are checked, not converted, as JAX returns them)
        self.out_tree: Any = None
        self.aux_leaves: list = []
        self.aux_tree: Any = None

    def __call__(self, *leaves: Any) -> list:
        out = self.fun(*tree_util.tree_unflatten(self.in_tree, list(leaves)))
        aux_arrays: list = []
        if self.has_aux:
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                raise TypeError(f"{self.api} with has_aux=True requires the function to return a pair "
                                f"(output, auxiliary data), got {type(out).__name__}")
            out, aux = out
            self.aux_leaves, self.aux_tree = tree_util.flatten_for_trace(aux)
            aux_arrays = [x for x in self.aux_leaves if _is_array_like(x)]
        out_leaves, self.out_tree = tree_util.flatten_for_trace(out)
        where = f"output of the function passed to {self.api}"
        return [_array_leaf(x, where, self.as_given) for x in out_leaves] + aux_arrays

    @property
    def num_aux(self) -> int:
        return sum(map(_is_array_like, self.aux_leaves))

    def split(self, outs: Sequence[Any]) -> tuple[list, Any]:
        """(the function's output leaves, its auxiliary data) from the flat outputs."""
        if not self.has_aux:
            return list(outs), None
        n = len(outs) - self.num_aux
        arrays = iter(outs[n:])
        aux = [next(arrays) if _is_array_like(x) else x for x in self.aux_leaves]
        return list(outs[:n]), tree_util.tree_unflatten(self.aux_tree, aux)


def _is_array_like(x: Any) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic)) or hasattr(x, "_value")


def _array_leaf(x: Any, where: str, as_given: bool = False) -> Any:
    """``x`` as an array (or, ``as_given``, unchanged once checked to be one)."""
    if _is_array_like(x) or isinstance(x, (bool, int, float, complex)):
        return x if as_given and (isinstance(x, (bool, int, float, complex, np.ndarray, np.generic))
                                  or isinstance(x, (Array, Tracer))) else ensure_array(x)
    raise TypeError(f"{where}: a value of type {type(x).__name__} is not an array. Differentiated functions "
                    "take and return arrays, Python scalars and pytrees (tuples, lists, dicts) of them.")


def _flat_inputs(args: Sequence[Any], api: str, as_given: bool = False) -> tuple[list, Any]:
    leaves, tree = tree_util.flatten_for_trace(tuple(args))
    return [_array_leaf(x, f"argument of {api}", as_given) for x in leaves], tree


def _public_tangent(t: Any, primal_aval: ShapedArray) -> Any:
    """What users see for a (co)tangent: an array, zeros for a symbolic zero, float0 for integers."""
    if not is_differentiable(primal_aval.dtype):
        return float0_zeros(primal_aval.shape)
    return zeros(primal_aval) if isinstance(t, Zero) else t


# --- forward mode -------------------------------------------------------------------------------
def _check_tangent(primal: Any, tangent: Any, api: str, as_given: bool = False) -> Any:
    """The tangent as the JVP trace takes it (symbolic zero for integer primals), checked like JAX;
    ``as_given``: a Python or NumPy tangent is kept as it is, as JAX's jvp keeps it."""
    return _check_tangent_of(aval(primal), tangent, api, as_given)


def _check_tangent_of(p: ShapedArray, tangent: Any, api: str, as_given: bool = False) -> Any:
    """``_check_tangent`` for a primal of type ``p``."""

    def mismatch(expected: Any, got: Any) -> TypeError:
        return TypeError(f"primal and tangent arguments to {api} do not match; dtypes must be equal, or in case of "
                         f"int/bool primal dtype the tangent dtype must be float0. Got primal dtype {p.dtype} and so "
                         f"expected tangent dtype {expected}, but got tangent dtype {got} instead.")

    def shape_mismatch(shape: tuple) -> ValueError:
        return ValueError(f"{api} called with different primal and tangent shapes; got primal shape {p.shape} and "
                          f"tangent shape {shape}")

    t_dtype = getattr(tangent, "dtype", None)
    if not is_differentiable(p.dtype):
        t_dtype = np.dtype(t_dtype or aval(ensure_array(tangent)).dtype)
        if t_dtype != float0:
            raise mismatch("float0", t_dtype)
        shape = tuple(np.shape(tangent))
        if shape != p.shape[:len(shape)]:  # (a key array's tangent has the key's shape, its data's leading dims)
            raise shape_mismatch(shape)
        return Zero(p)
    if t_dtype is not None and np.dtype(t_dtype) == float0:  # (a float0 tangent is for an integer primal only)
        raise mismatch(p.dtype, float0)
    given = tangent
    tangent = ensure_array(tangent)
    t = aval(tangent)
    if t.dtype != p.dtype:
        raise mismatch(p.dtype, t.dtype)
    if t.shape != p.shape:
        raise shape_mismatch(t.shape)
    if as_given and isinstance(given, (bool, int, float, complex, np.ndarray, np.generic)):
        return given  # (a Python or NumPy value stays as given, as in JAX: a custom rule sees it)
    return match_type(tangent, p)


@errors.api_boundary
def jvp(fun: Callable, primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False) -> tuple:
    """``(fun(*primals), d fun(primals) . tangents)``: forward-mode differentiation.

    ``primals`` and ``tangents`` are tuples (or lists) of pytrees of the same structure.
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("primal and tangent arguments to ember.jvp must be tuples or lists; found "
                        f"{type(primals).__name__} and {type(tangents).__name__}.")
    # (leaves as given: JAX's jvp makes no arrays of Python or NumPy values; a primitive applied to
    # them does, so a custom_jvp rule sees them, and a function returning them returns them unchanged)
    primal_leaves, in_tree = _flat_inputs(primals, "ember.jvp", as_given=True)
    # (the user's structures: a key array's tangent is one float0 leaf of its shape, as in JAX)
    tangent_leaves, tangent_tree = tree_util.tree_flatten(tuple(tangents))
    primal_tree = tree_util.tree_structure(tuple(primals))
    if tangent_tree != primal_tree:
        raise TypeError("primal and tangent arguments to ember.jvp must have the same tree structure; primals "
                        f"have tree structure {primal_tree} whereas tangents have tree structure {tangent_tree}.")
    tangent_leaves = [_check_tangent(p, t, "ember.jvp", as_given=True) for p, t in zip(primal_leaves, tangent_leaves)]
    flat = _FlatFunction(fun, in_tree, has_aux, "ember.jvp", as_given=True)
    outs, out_tangents = jvp_flat(flat, primal_leaves, tangent_leaves)
    outs, aux = flat.split(outs)
    out_tangents = [_public_tangent(t, aval(o)) for t, o in zip(out_tangents, outs)]
    result = (tree_util.tree_unflatten(flat.out_tree, outs), tree_util.tree_unflatten(flat.out_tree, out_tangents))
    return result + (aux,) if has_aux else result


@errors.api_boundary
def linearize(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the derivative at ``primals``
    without re-running ``fun``: the primal computation happens once, here."""
    # (leaves as given, as jvp's: a custom_jvp rule sees a Python float as one, and a primal output that
    # is an input comes back as it was given, as in JAX)
    primal_leaves, in_tree = _flat_inputs(primals, "ember.linearize", as_given=True)
    primal_tree = tree_util.tree_structure(tuple(primals))  # (the user's: a key array is one leaf)
    flat = _FlatFunction(fun, in_tree, has_aux, "ember.linearize", as_given=True)
    outs, linear, out_nonzero = linearize_flat(flat, primal_leaves, errors.function_name(fun, "fun"))
    outs, aux = flat.split(outs)
    out_tree, out_avals = flat.out_tree, [aval(o) for o in outs]
    forward = _Forward(linear.jaxpr, primal_tree, tuple(aval(p) for p in primal_leaves), tuple(out_nonzero),
                       out_tree, tuple(out_avals))
    # A pytree (as JAX's): the residuals are its leaves, so it crosses jit's boundary, and vmap,
    # linear_transpose and the transformations take it as any function.
    result = (tree_util.tree_unflatten(out_tree, outs), tree_util.Partial(forward, list(linear.consts)))
    return result + (aux,) if has_aux else result


class _Forward(NamedTuple):
    """A linearized function's static part: its linear program, and the types it maps."""
    linear: Any
    primal_tree: Any
    primal_avals: tuple
    out_nonzero: tuple
    out_tree: Any
    out_avals: tuple

    def __call__(self, residuals: list, *tangents: Any) -> Any:
        tangent_leaves, tangent_tree = tree_util.tree_flatten(tuple(tangents))
        if tangent_tree != self.primal_tree:
            raise TypeError(f"linearized function called on tangents of structure {tangent_tree}, but the primals "
                            f"had structure {self.primal_tree}")
        checked = [_check_tangent_of(p, t, "the linearized function")
                   for p, t in zip(self.primal_avals, tangent_leaves)]
        inputs = [t for t in checked if not isinstance(t, Zero)]  # integer inputs have no tangent
        out_tangents = eval_jaxpr_by_binding(self.linear, residuals, *inputs)
        nonzero = list(self.out_nonzero)
        out_tangents = merge_by(nonzero, out_tangents, [None] * nonzero.count(False))[:len(self.out_avals)]
        out_tangents = [Zero(a) if t is None else t for t, a in zip(out_tangents, self.out_avals)]  # (known zeros)
        return tree_util.tree_unflatten(self.out_tree,
                                        [_public_tangent(t, a) for t, a in zip(out_tangents, self.out_avals)])


# --- reverse mode -------------------------------------------------------------------------------
class _Backward(NamedTuple):
    """What a vjp function needs besides its residuals: the linear program and the structures."""
    linear: Any
    in_tree: Any
    out_tree: Any
    out_avals: tuple
    in_avals: tuple
    out_nonzero: tuple
    num_aux: int
    invariant: tuple  # ((input, axis, whether the output varies along it), ...): see _invariant_inputs
    out_structure: Any  # the output's structure as the user sees it (a key array is a leaf)


def _varies(x: Any, axis: Any) -> bool | None:
    """Whether ``x`` varies along the mesh axis ``axis`` of an enclosing shard_map(check_vma=True);
    None where that is not known."""
    known = par.varying_axes(x)
    if known is not None:
        return axis in known
    trace = current_trace()  # (shard_map under a transformation: a vmap per mesh axis, batched = varying)
    while trace is not None and not (isinstance(trace, BatchTrace) and trace.axis_name == axis):
        trace = getattr(trace, "parent", None)
    if trace is None:
        return None
    while isinstance(x, Tracer) and not isinstance(x, BatchTracer) and hasattr(x, "primal"):
        x = x.primal
    while isinstance(x, BatchTracer):
        if x._trace is trace:
            return True
        x = x.value
    return False


def _invariant_inputs(primals: Sequence[Any], outs: Sequence[Any]) -> tuple:
    """JAX's rule under ``shard_map(check_vma=True)``: an input invariant along a mesh axis meets
    the varying values it is combined with through an implicit ``pvary``, whose transpose sums;
    so its gradient is summed along that axis wherever the gradient, or the output, varies.
    (One case differs: an invariant output made of a psum plus a term of the invariant input
    alone. JAX sums only the psum's part of the gradient; here the whole gradient is summed.)"""
    plan = []
    for axis in par.invariance_checked_axes():
        output_varies = any(_varies(o, axis) for o in outs)
        plan.extend((i, axis, output_varies) for i, p in enumerate(primals) if _varies(p, axis) is False)
    return tuple(plan)


class _PullBack:
    """A vjp function's static part (a ``Partial``'s function may not be a ``functools.partial``,
    which would merge into it)."""

    def __init__(self, backward: _Backward) -> None:
        self.backward = backward
        self.__name__ = "vjp"

    def __call__(self, residuals: list, cotangent: Any) -> tuple:
        return _pull_back(self.backward, residuals, cotangent)


def _pull_back(backward: _Backward, residuals: list, cotangent: Any) -> tuple:
    """The cotangent of every primal, transposing the linear program on ``residuals``."""
    ct_leaves, ct_tree = tree_util.tree_flatten(cotangent)
    if ct_tree != backward.out_structure:
        raise TypeError(f"Tree structure of cotangent input {ct_tree}, does not match structure of primal "
                        f"output {backward.out_structure}.")
    cts = [_check_cotangent(ct, a) for ct, a in zip(ct_leaves, backward.out_avals)]
    cts += [None] * backward.num_aux  # auxiliary outputs are not differentiated
    args = [UndefinedPrimal(v.aval) for v in backward.linear.invars]
    cts_in = backward_pass(backward.linear, residuals, args, select_by(list(backward.out_nonzero), cts))
    differentiable = [is_differentiable(a.dtype) for a in backward.in_avals]
    cts_in = merge_by(differentiable, cts_in, [None] * differentiable.count(False))
    for i, axis, output_varies in backward.invariant:
        ct = cts_in[i]
        if ct is not None and not isinstance(ct, Zero) and (output_varies or _varies(ct, axis)):
            cts_in[i] = par.psum(ct, axis)
    return tree_util.tree_unflatten(backward.in_tree,
                                    [_public_tangent(ct, a) for ct, a in zip(cts_in, backward.in_avals)])


@errors.api_boundary
def vjp(fun: Callable, *primals: Any, has_aux: bool = False) -> tuple:
    """``(fun(*primals), vjp_fn)`` where ``vjp_fn(cotangent)`` returns the cotangent of every primal
    (a tuple), transposing the linearized program. Integer inputs get float0 cotangents."""
    primal_leaves, in_tree = _flat_inputs(primals, "ember.vjp")
    flat = _FlatFunction(fun, in_tree, has_aux, "ember.vjp")
    outs, linear, out_nonzero = linearize_flat(flat, primal_leaves, errors.function_name(fun, "fun"))
    outs, aux = flat.split(outs)
    out_tree, out_avals = flat.out_tree, [aval(o) for o in outs]
    in_avals = [aval(p) for p in primal_leaves]
    out = tree_util.tree_unflatten(out_tree, outs)
    backward = _Backward(linear.jaxpr, in_tree, out_tree, tuple(out_avals), tuple(in_avals), tuple(out_nonzero),
                         flat.num_aux, _invariant_inputs(primal_leaves, outs), tree_util.tree_structure(out))
    # A pytree (as JAX's): the residuals are its leaves, so it crosses jit's boundary both ways.
    vjp_fn = tree_util.Partial(_PullBack(backward), list(linear.consts))
    result = (out, vjp_fn)
    return result + (aux,) if has_aux else result


def _type_text(a: ShapedArray) -> str:
    return f"{a.dtype.name}[{','.join(map(str, a.shape))}]"


def _check_cotangent(ct: Any, out_aval: ShapedArray) -> Any:
    if not is_differentiable(out_aval.dtype):
        return Zero(out_aval)
    ct = ensure_array(ct)
    a = aval(ct)
    if a.shape != out_aval.shape:
        raise ValueError(f"Shape of cotangent input to vjp pullback function {a.shape} must be the same as the "
                         f"shape of corresponding primal input {out_aval.shape}.")
    if a.dtype != out_aval.dtype:  # e.g. a real cotangent for a complex output: JAX's error
        got, want = _type_text(a), _type_text(out_aval)
        raise ValueError(f"unexpected JAX type (e.g. shape/dtype) for argument to VJP function: got {got}, but "
                         f"expected {want} because the corresponding output of the differentiated function had "
                         f"JAX type {want}")
    return match_type(ct, out_aval)


def _argnums_tuple(argnums: int | Sequence[int]) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums or not all(isinstance(i, int) for i in nums):
        raise TypeError(f"argnums must be an int or a non-empty tuple of ints, got {argnums!r}")
    return nums


def _split_args(args: tuple, argnums: tuple[int, ...]) -> tuple[Callable, tuple]:
    """The arguments to differentiate, and a function putting them back among the others."""
    if max(argnums) >= len(args) or min(argnums) < -len(args):
        raise TypeError(f"differentiating with respect to argnums={argnums} requires at least {max(argnums) + 1} "
                        f"positional arguments to be passed by the caller, but got only {len(args)} positional "
                        "arguments.")
    positions = [i % len(args) for i in argnums]

    def with_args(dynamic: Sequence[Any]) -> list:
        full = list(args)
        for i, x in zip(positions, dynamic):
            full[i] = x
        return full

    return with_args, tuple(args[i] for i in positions)


def _input_dtypes(api: str, args: Sequence[Any]) -> list[np.dtype]:
    """The dtype of each of the user's leaves (a key array's is ``key<fry>``)."""
    return [leaf.dtype if tree_util.is_array_node(leaf) else aval(_array_leaf(leaf, f"argument of {api}")).dtype
            for leaf in tree_util.tree_leaves(args)]


def _check_inputs(api: str, args: Sequence[Any], allow_int: bool, holomorphic: bool = False) -> None:
    """Reverse mode takes real or complex inputs (complex ones only, holomorphically), as JAX."""
    for dt in _input_dtypes(api, args):
        if holomorphic:
            if not dtypes.is_complex(dt):
                raise TypeError(f"{api} with holomorphic=True requires inputs with complex dtype, but got {dt.name}.")
        elif not is_differentiable(dt) and not allow_int:
            raise TypeError(f"{api} requires real- or complex-valued inputs (input dtype that is a sub-dtype of "
                            f"np.inexact), but got {dt.name}. If you want to use Boolean- or integer-valued inputs, "
                            "use vjp or set allow_int to True.")


def _check_output_dtype(api: str, dt: np.dtype, holomorphic: bool) -> None:
    """Reverse mode seeds one real cotangent per output, or a complex one for a holomorphic function."""
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise TypeError(f"{api} with holomorphic=True requires outputs with complex dtype, but got {dt.name}.")
    elif dtypes.is_complex(dt):
        raise TypeError(f"{api} requires real-valued outputs (output dtype that is a sub-dtype of np.floating), but "
                        f"got {dt.name}. For holomorphic differentiation, pass holomorphic=True. For differentiation "
                        "of non-holomorphic functions involving complex outputs, use ember.vjp directly.")
    elif not is_differentiable(dt):
        raise TypeError(f"{api} requires real-valued outputs (output dtype that is a sub-dtype of np.floating), but "
                        f"got {dt.name}. For differentiation of functions with integer outputs, use "
                        "ember.vjp directly.")


def _check_scalar_output(out: Any, holomorphic: bool) -> None:
    if not _is_array_like(out):
        raise TypeError(f"Gradient only defined for scalar-output functions. Output was {out!r}.")
    a = aval(out)
    if a.shape != ():
        raise TypeError(f"Gradient only defined for scalar-output functions. Output had shape: {a.shape}.")
    _check_output_dtype("grad", a.dtype, holomorphic)


def value_and_grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   holomorphic: bool = False, allow_int: bool = False) -> Callable:
    """A function returning ``(fun(*args), gradient)``; the gradient is with respect to the
    argument(s) ``argnums``, and ``fun`` must return a real scalar (plus aux data if ``has_aux``).

    For a real ``fun`` of complex ``z = x + iy`` the gradient is ``df/dx - i df/dy`` (the transpose
    of the derivative, as JAX). With ``holomorphic=True``, ``fun`` maps complex inputs to a complex
    scalar and the gradient is the complex derivative ``f'(z)``."""
    nums = _argnums_tuple(argnums)

    @errors.api_boundary  # (the user's frames only, in tracebacks)
    @errors.wraps(fun)
    def value_and_grad_f(*args: Any, **kwargs: Any) -> Any:
        with_args, dynamic = _split_args(args, nums)
        _check_inputs("grad", dynamic, allow_int, holomorphic)
        traced = user_functions.traced(fun)
        result = vjp(lambda *dyn: traced(*with_args(dyn), **kwargs), *dynamic, has_aux=has_aux)
        out, vjp_fn = result[:2]
        _check_scalar_output(out, holomorphic)
        grads = vjp_fn(lax.convert_element_type(1.0, aval(out).dtype, aval(out).weak_type))
        if not holomorphic:  # (JAX: the gradient of a real function of a complex value is never weak)
            grads = tree_util.tree_map(_strong_if_complex, grads)
        grads = grads[0] if isinstance(argnums, int) else grads
        return ((out, result[2]) if has_aux else out), grads

    return value_and_grad_f


def _strong_if_complex(g: Any) -> Any:
    if not dtypes.is_complex(np.dtype(g.dtype)):  # (float0 cotangents of integers among them)
        return g
    a = aval(g)
    return lax.convert_element_type(g, a.dtype, False) if a.weak_type else g


def grad(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False,
         allow_int: bool = False) -> Callable:
    """The gradient of ``fun`` (which returns a real scalar, or a complex one with ``holomorphic=True``)
    with respect to argument(s) ``argnums``."""
    value_and_grad_f = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @errors.api_boundary  # (the user's frames only, in tracebacks)
    @errors.wraps(fun)
    def grad_f(*args: Any, **kwargs: Any) -> Any:
        value, g = value_and_grad_f(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return grad_f


# --- Jacobians ------------------------------------------------------------------------------------
def _standard_basis(avals: Sequence[ShapedArray]) -> list:
    """The rows of an identity matrix over all elements of the given values, split per value:
    value ``i``'s part has shape ``(total size,) + avals[i].shape``."""
    total = sum(a.size for a in avals)
    parts, start = [], 0
    for a in avals:
        rows = np.eye(total, a.size, -start, dtype=a.dtype).reshape((total,) + a.shape)
        parts.append(Array(rows, ShapedArray(rows.shape, a.dtype, a.weak_type)))
        start += a.size
    return parts


def _rows_per_value(batched: Any, avals: Sequence[ShapedArray]) -> list:
    """Cut a ``(total size, ...)`` array into one block per value: ``avals[i].shape + ...``."""
    blocks, start = [], 0
    rest = aval(batched).shape[1:]
    for a in avals:
        block = lax.slice_in_dim(batched, start, start + a.size, axis=0)
        blocks.append(lax.reshape(block, a.shape + rest))
        start += a.size
    return blocks


def _float_leaves_only(fun: Callable, tree_avals: Sequence[ShapedArray]) -> Callable:
    """``fun`` returning only its floating-point leaves (the others have float0 derivatives)."""
    def floats(*args: Any) -> list:
        return [x for x, a in zip(tree_util.leaves_for_trace(fun(*args)), tree_avals) if is_differentiable(a.dtype)]
    return floats


def _constant_block(shape: tuple, a: ShapedArray) -> Any:
    """The Jacobian block of a value that has no derivative (an output of ``jacfwd``, an input of
    ``jacrev``): zeros of its dtype and weak type for an integer (as JAX casts the block to the
    value's type), else float0 zeros."""
    if not dtypes.is_integer(a.dtype):
        return float0_zeros(shape)
    return Array(np.zeros(shape, a.dtype), ShapedArray(shape, a.dtype, a.weak_type))


def jacfwd(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
           holomorphic: bool = False) -> Callable:
    """The Jacobian of ``fun`` by forward mode (cheap for few inputs): the linearized function,
    applied to every input direction at once with ``vmap``. Each output leaf's Jacobian block has
    shape ``out.shape + in.shape`` (output structure outside, input structure inside, as JAX).
    Inputs are real (a complex one has two real directions per element), or, with
    ``holomorphic=True``, complex with complex outputs."""
    nums = _argnums_tuple(argnums)

    @errors.api_boundary  # (the user's frames only, in tracebacks)
    @errors.wraps(fun)
    def jacfwd_f(*args: Any, **kwargs: Any) -> Any:
        with_args, dynamic = _split_args(args, nums)
        for dt in _input_dtypes("jacfwd", dynamic):
            if holomorphic and not dtypes.is_complex(dt):
                raise TypeError(f"jacfwd with holomorphic=True requires inputs with complex dtype, but got "
                                f"{dt.name}.")
            if not holomorphic and not dtypes.is_floating(dt):
                # A complex input direction would need two real ones: forward mode refuses it, as JAX.
                raise TypeError(f"jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
                                f"np.floating), but got {dt.name}. For holomorphic differentiation, pass "
                                "holomorphic=True. For differentiation of non-holomorphic functions involving "
                                "complex inputs or integer inputs, use ember.jvp directly.")
        target = dynamic[0] if isinstance(argnums, int) else dynamic
        result = linearize(lambda x: fun(*with_args((x,) if isinstance(argnums, int) else x), **kwargs), target,
                           has_aux=has_aux)
        out, f_jvp = result[:2]
        in_leaves, in_tree = tree_util.flatten_for_trace(target)
        out_leaves, out_tree = tree_util.flatten_for_trace(out)
        in_avals, out_avals = [aval(x) for x in in_leaves], [aval(o) for o in out_leaves]
        if holomorphic:
            for a in out_avals:
                if not dtypes.is_complex(a.dtype):
                    raise TypeError(f"jacfwd with holomorphic=True requires outputs with complex dtype, but got "
                                    f"{a.dtype.name}.")
        basis = tree_util.tree_unflatten(in_tree, _standard_basis(in_avals))
        columns = iter(vmap(_float_leaves_only(f_jvp, out_avals))(basis))  # each: (inputs size,) + out.shape
        blocks = []
        for a in out_avals:
            if not is_differentiable(a.dtype):
                blocks.append([_constant_block(a.shape + in_a.shape, a) for in_a in in_avals])
                continue
            # (inputs size,) + out.shape -> out.shape + (inputs size,), then split the last axis per input.
            moved = lax.transpose(next(columns), tuple(range(1, a.ndim + 1)) + (0,))
            blocks.append([lax.reshape(lax.slice_in_dim(moved, start, start + in_a.size, axis=a.ndim),
                                       a.shape + in_a.shape)
                           for in_a, start in zip(in_avals, np.cumsum([0] + [x.size for x in in_avals]))])
        jac = _jacobian_tree(out_tree, in_tree, blocks)
        return (jac, result[2]) if has_aux else jac

    return jacfwd_f


def jacrev(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False) -> Callable:
    """The Jacobian of ``fun`` by reverse mode (cheap for few outputs): the transposed linear
    function, applied to every output direction at once with ``vmap``. Each output leaf's
    Jacobian block has shape ``out.shape + in.shape``. Outputs are real (complex inputs get
    ``grad``'s convention), or, with ``holomorphic=True``, complex of complex inputs."""
    nums = _argnums_tuple(argnums)

    @errors.api_boundary  # (the user's frames only, in tracebacks)
    @errors.wraps(fun)
    def jacrev_f(*args: Any, **kwargs: Any) -> Any:
        with_args, dynamic = _split_args(args, nums)
        _check_inputs("jacrev", dynamic, allow_int, holomorphic)
        target = dynamic[0] if isinstance(argnums, int) else dynamic
        result = vjp(lambda x: fun(*with_args((x,) if isinstance(argnums, int) else x), **kwargs), target,
                     has_aux=has_aux)
        out, vjp_fn = result[:2]
        in_leaves, in_tree = tree_util.flatten_for_trace(target)
        out_leaves, out_tree = tree_util.flatten_for_trace(out)
        in_avals, out_avals = [aval(x) for x in in_leaves], [aval(o) for o in out_leaves]
        for a in out_avals:
            _check_output_dtype("jacrev", a.dtype, holomorphic)
        basis = tree_util.tree_unflatten(out_tree, _standard_basis(out_avals))
        rows = iter(vmap(_float_leaves_only(lambda ct: vjp_fn(ct)[0], in_avals))(basis))  # (outputs size,) + in
        per_input = [_rows_per_value(next(rows), out_avals) if is_differentiable(a.dtype)
                     else [_constant_block(o.shape + a.shape, a) for o in out_avals] for a in in_avals]
        jac = _jacobian_tree(out_tree, in_tree, [list(blocks) for blocks in zip(*per_input)])
        return (jac, result[2]) if has_aux else jac

    return jacrev_f


def _jacobian_tree(out_tree: Any, in_tree: Any, blocks: list[list[Any]]) -> Any:
    """Output structure outside, input structure inside (as JAX lays out Jacobians)."""
    return tree_util.tree_unflatten(out_tree, [tree_util.tree_unflatten(in_tree, row) for row in blocks])


def jacobian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False, holomorphic: bool = False,
             allow_int: bool = False) -> Callable:
    """Alias of :func:`jacrev` (as ``jax.jacobian``)."""
    return jacrev(fun, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic, allow_int=allow_int)


def hessian(fun: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
            holomorphic: bool = False) -> Callable:
    """The Hessian of a scalar function: ``jacfwd(jacrev(fun))``."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic), argnums, has_aux=has_aux,
                  holomorphic=holomorphic)



# --- transposition of linear functions --------------------------------------------------------------
def _abstract(x: Any) -> ShapedArray:
    """The type of a primal given to ``linear_transpose``: an array, a scalar or a ShapeDtypeStruct."""
    if hasattr(x, "shape") and hasattr(x, "dtype") and not hasattr(x, "__array__") and not isinstance(x, Tracer):
        return ShapedArray(tuple(x.shape), dtypes.canonicalize_dtype(x.dtype), bool(getattr(x, "weak_type", False)))
    return aval_of_value(_array_leaf(x, "argument of ember.linear_transpose"))


class _Transposed:
    """A ``linear_transpose`` function's static part (the consts are the ``Partial``'s leaves)."""

    def __init__(self, jaxpr: Any, in_tree: Any, out_tree: Any, in_avals: list, out_avals: list) -> None:
        self.jaxpr, self.in_tree, self.out_tree = jaxpr, in_tree, out_tree
        self.in_avals, self.out_avals = in_avals, out_avals
        self.__name__ = "transposed"

    def __call__(self, consts: list, out_cotangent: Any) -> Any:
        ct_leaves, ct_tree = tree_util.flatten_for_trace(out_cotangent)
        if ct_tree != self.out_tree:
            raise TypeError(f"cotangent tree does not match function output, expected {self.out_tree} but got "
                            f"{ct_tree}")
        cts = [ensure_array(ct) for ct in ct_leaves]
        if any(aval(ct).shape != a.shape or aval(ct).dtype != a.dtype for ct, a in zip(cts, self.out_avals)):
            raise TypeError(f"cotangent type does not match function output, expected {self.out_avals} but got "
                            f"{[aval(ct) for ct in cts]}")
        cts_in = backward_pass(self.jaxpr, consts, [UndefinedPrimal(a) for a in self.in_avals],
                               [match_type(ct, a) for ct, a in zip(cts, self.out_avals)])
        return tree_util.tree_unflatten(self.in_tree, [match_type(instantiate(ct), a)
                                                       for ct, a in zip(cts_in, self.in_avals)])


@errors.api_boundary
def linear_transpose(fun: Callable, *primals: Any, reduce_axes: Sequence[Any] = ()) -> Callable:
    """The transpose of the linear function ``fun`` at the types of ``primals`` (arrays or
    ShapeDtypeStructs): ``f_t(cotangent)`` returns a tuple of one cotangent per primal. Unlike
    ``vjp``, nothing is linearized: ``fun`` must be linear, and is traced once, here."""
    if reduce_axes:
        raise NotImplementedError("reduce_axes argument to transpose is deprecated")
    leaves, in_tree = tree_util.flatten_for_trace(primals)
    in_avals = [_abstract(x) for x in leaves]
    flat = _FlatFunction(fun, in_tree, False, "ember.linear_transpose")
    names = [f"primals[{i}]" for i in range(len(in_avals))]
    closed = trace_to_jaxpr(flat, in_avals, DebugInfo("linear_transpose", errors.function_name(fun, "fun"), names,
                                                      static_hint=False))
    in_dtypes, out_dtypes = [a.dtype for a in in_avals], [a.dtype for a in closed.out_avals]
    every = in_dtypes + out_dtypes
    if not (all(dtypes.is_inexact(d) for d in every) or all(np.issubdtype(d, np.integer) for d in every)):
        raise TypeError("linear_transpose only supports [float or complex] -> [float or complex], and integer -> "
                        f"integer functions, but got {in_dtypes} -> {out_dtypes}.")
    transposed = _Transposed(closed.jaxpr, in_tree, flat.out_tree, in_avals, list(closed.out_avals))
    return tree_util.Partial(transposed, list(closed.consts))


# --- closure conversion and custom_gradient ---------------------------------------------------------
def _maybe_perturbed(x: Any) -> bool:
    """Whether ``x`` may carry a nonzero tangent (JAX's heuristic): a value being differentiated, or
    a traced inexact value that differentiation could reach later. Concrete values cannot."""
    if not isinstance(x, Tracer):
        return False
    if isinstance(x, JVPTracer):
        return True  # (its tangent is never a symbolic zero)
    if isinstance(x, BatchTracer):
        return _maybe_perturbed(x.value)
    return is_differentiable(x.aval.dtype)


class _ClosureConverted:
    """``closure_convert``'s function: the traced program, with the hoisted consts as trailing arguments."""

    def __init__(self, jaxpr: Any, consts: list, perturbed: list[bool], in_tree: Any, out_tree: Any) -> None:
        self.jaxpr, self.perturbed, self.in_tree, self.out_tree = jaxpr, perturbed, in_tree, out_tree
        self.closure_consts = [c for c, p in zip(consts, perturbed) if not p]
        self.num_hoisted = perturbed.count(True)

    def __call__(self, *args_hconsts: Any) -> Any:
        num_args = len(args_hconsts) - self.num_hoisted
        args, hoisted = args_hconsts[:num_args], args_hconsts[num_args:]
        leaves, tree = tree_util.flatten_for_trace(tuple(args))
        if tree != self.in_tree:
            raise TypeError("The inputs to the closure produced by closure_convert must have the same Pytree "
                            "structure as the example arguments passed when closure_convert was called. "
                            f"Expected {self.in_tree}, but got {tree}")
        consts = merge_by(self.perturbed, list(hoisted), self.closure_consts)
        outs = eval_jaxpr_by_binding(self.jaxpr, consts, *[ensure_array(x) for x in leaves])
        return tree_util.tree_unflatten(self.out_tree, outs)


def closure_convert(fun: Callable, *example_args: Any) -> tuple[Callable, list]:
    """``(converted, hoisted)``: ``fun`` specialized to the types of ``example_args``, with the values
    it closes over that may be differentiated (tracers of inexact type) hoisted out as trailing
    arguments, ``converted(*args, *hoisted)``, so that a ``custom_vjp`` can take them as inputs."""
    leaves, in_tree = _flat_inputs(example_args, "ember.closure_convert")
    flat = _FlatFunction(fun, in_tree, False, "ember.closure_convert")
    names = [f"example_args[{i}]" for i in range(len(leaves))]
    closed = trace_to_jaxpr(flat, [aval(x) for x in leaves],
                            DebugInfo("closure_convert", errors.function_name(fun, "fun"), names, static_hint=False))
    perturbed = [_maybe_perturbed(c) for c in closed.consts]
    converted = _ClosureConverted(closed.jaxpr, list(closed.consts), perturbed, in_tree, flat.out_tree)
    return converted, [c for c, p in zip(closed.consts, perturbed) if p]


@tree_util.register_pytree_node_class
class _GradientResiduals:
    """The residuals of a ``custom_gradient`` function: its traced gradient rule's consts (the leaves)."""

    def __init__(self, program: Any, consts: list, in_tree: Any, out_tree: Any) -> None:
        self.program, self.consts, self.in_tree, self.out_tree = program, consts, in_tree, out_tree

    def tree_flatten(self) -> tuple[list, tuple]:
        return list(self.consts), (self.program, self.in_tree, self.out_tree)

    @classmethod
    def tree_unflatten(cls, aux: tuple, consts: list) -> "_GradientResiduals":
        program, in_tree, out_tree = aux
        return cls(program, list(consts), in_tree, out_tree)


def custom_gradient(fun: Callable) -> Callable:
    """A function with its gradient rule inline: ``fun(*args)`` returns ``(out, vjp_rule)`` with
    ``vjp_rule(cotangent)`` a tuple of one cotangent per argument (JAX's ``custom_gradient``).
    The rule is traced once per call, so it may close over intermediate values of ``fun``, but
    not branch in Python on them."""
    @custom_vjp
    def wrapped_fun(*args: Any, **kwargs: Any) -> Any:
        ans, _ = fun(*args, **kwargs)
        return ans

    def fwd(*args: Any, **kwargs: Any) -> tuple:
        ans, rule = fun(*args, **kwargs)
        ans_leaves, out_tree = tree_util.flatten_for_trace((ans,))
        in_trees: list = []

        def flat_rule(*cts: Any) -> list:
            leaves, tree = tree_util.flatten_for_trace(rule(*tree_util.tree_unflatten(out_tree, list(cts))))
            in_trees.append(tree)
            return [ensure_array(x) for x in leaves]

        program, consts = trace_program(flat_rule, [aval(ensure_array(x)) for x in ans_leaves],
                                        f"custom_gradient rule of `{getattr(fun, '__name__', 'fun')}`")
        return ans, _GradientResiduals(program, consts, in_trees[0], out_tree)

    def bwd(res: _GradientResiduals, cts: Any) -> tuple:
        cts_leaves, tree = tree_util.flatten_for_trace((cts,))
        if tree != res.out_tree:
            raise TypeError(f"{res.out_tree}\n!=\n{tree}")
        cts_out = tree_util.tree_unflatten(res.in_tree, eval_closed_by_binding(res.program, *res.consts, *cts_leaves))
        return (cts_out,) if tree_util.treedef_is_leaf(res.in_tree) else cts_out

    wrapped_fun.defvjp(fwd, bwd)
    return wrapped_fun
