"""Automatic batching: ``vmap`` and the batch trace.

A ``BatchTrace`` remembers the trace that was current when it was made (its
parent). Its tracers are (value, batch_dim) pairs: ``value`` belongs to the
parent and holds every example, stacked along ``batch_dim``; the tracer itself
looks like one example (its aval lacks that dimension). Every other value
(arrays, scalars, tracers of other traces) is the same for all examples
(unbatched). A rule computes the batched result with lax functions *in the
parent trace*, so ``vmap`` composes with staging (``jit``), with itself and with
differentiation without nesting levels.

``batching_rules[p](axis_size, values, dims, **params) -> (out, out_dims)``;
``dims[i]`` is operand i's batch dimension or None, and a rule is only called
when at least one operand is batched. Elementwise primitives share one rule.

Named axes. ``vmap(..., axis_name='i')`` gives the collectives of ``ember.lax.parallel``
their meaning: a collective whose ``axes`` name this trace's axis goes to
``collective_rules[p](axis_size, axis_name, values, dims, **params)`` even when no operand is
batched (``psum`` of a value that is the same for every example is ``axis_size`` times it;
``axis_index`` has no operand at all), and computes across the batch dimension. Collectives
over other names are ordinary batched primitives, which the outer trace that binds the name
resolves. A sub-program (``jit``, ``cond``, ``scan``) that holds a collective over this axis
is batched even when its operands are not, and the traces that batch its body inherit the
axis name (``current_rule_axis``). While ``fun`` runs, the name is bound in the axis
environment (``lax.parallel.extend_axis_env``), so an unbound name is a ``NameError``.
"""
from __future__ import annotations

import collections
import functools
import inspect
import threading
from typing import Any, Callable, Sequence

import numpy as np
import optree

from ember import dtypes, errors, lax, tree_util
from ember.core.array import ensure_array
from ember.core.avals import ShapedArray
from ember.core.ir import ClosedJaxpr, subjaxprs
from ember.core.primitive import Primitive, RuleTable
from ember.core.trace import (
    Trace,
    Tracer,
    TraceTag,
    current_trace,
    set_current_trace,
    type_text,
    unexpected_tracer_error,
)
from ember.lax import control_flow, refs as _refs
from ember.lax.base import aval
from ember.lax.elementwise import ELEMENTWISE
from ember.lax.parallel import COLLECTIVES, VMAP, extend_axis_env
from ember.transforms import user_functions
from ember.transforms.programs import eval_closed_by_binding, trace_program, trace_programs

BatchDim = int | None
batching_rules: RuleTable = RuleTable("batching_rules")
collective_rules: RuleTable = RuleTable("collective_rules")


class _RuleAxis(threading.local):
    name: Any = None


_rule_axis = _RuleAxis()


def current_rule_axis() -> Any:
    """The axis name of the batch trace whose rule is running (None outside rules)."""
    return _rule_axis.name


def _uses_axis(params: dict, name: Any) -> bool:
    """Whether a sub-program in ``params`` holds a collective over ``name``."""
    for sub in subjaxprs(params):
        for eqn in sub.eqns:
            if eqn.primitive in COLLECTIVES and name in eqn.params["axes"] or _uses_axis(eqn.params, name):
                return True
    return False


def batching_rule(p: Primitive) -> Callable | None:
    """The rule of ``p``; every elementwise primitive (also ones defined later) shares one."""
    rule = batching_rules.get(p)
    if rule is None and p in ELEMENTWISE:
        return functools.partial(batch_elementwise, p)
    return rule


# --- the trace -----------------------------------------------------------------------------------
class BatchTracer(Tracer):
    """One example of a batch: ``value`` stacks all of them along ``batch_dim``."""

    __slots__ = ("value", "batch_dim")

    def __init__(self, trace: "BatchTrace", value: Any, batch_dim: int) -> None:
        full = aval(value)
        super().__init__(trace, full._replace(shape=full.shape[:batch_dim] + full.shape[batch_dim + 1:]))
        self.value = value
        self.batch_dim = batch_dim

    @property
    def val(self) -> Any:
        """The whole batch (JAX's name): ``value``, stacked along ``batch_dim``."""
        return self.value

    def __repr__(self) -> str:  # (JAX's)
        return f"VmapTracer(aval={type_text(self.aval)}, batched={type_text(aval(self.value))})"


class BatchTrace(Trace):
    description = "vmap"
    requires_low = False

    def __init__(self, parent: Trace, axis_size: int, axis_name: Any = None) -> None:
        self.parent = parent
        self.tag = TraceTag()
        self.axis_size = axis_size
        self.axis_name = axis_name

    def to_pair(self, x: Any) -> tuple[Any, BatchDim]:
        """(value, batch_dim) of any value: values of other traces are unbatched."""
        if isinstance(x, BatchTracer) and x._trace is self:
            return x.value, x.batch_dim
        if isinstance(x, Tracer) and not x._trace.alive:
            raise unexpected_tracer_error(x)
        return x, None

    def new(self, value: Any, batch_dim: BatchDim) -> Any:
        """A tracer, or the value itself when it is unbatched (nothing to track)."""
        return value if batch_dim is None else BatchTracer(self, value, batch_dim)

    def process_primitive(self, primitive: Primitive, args: tuple, params: dict) -> Any:
        values, dims = zip(*map(self.to_pair, args)) if args else ((), ())
        name = self.axis_name
        with set_current_trace(self.parent):
            if name is not None and primitive in COLLECTIVES and name in params["axes"]:
                out, out_dims = self._run_rule(collective_rules[primitive], values, dims, params, name)
            elif all(d is None for d in dims) and (name is None or not _uses_axis(params, name)):
                return primitive.bind(*values, **params)
            else:
                rule = batching_rule(primitive)
                if rule is None:
                    raise NotImplementedError(
                        f"Batching rule for '{primitive.name}' not implemented: vmap cannot batch {primitive.name}. "
                        "Apply the function to one example at a time (e.g. with lax.map) instead.")
                out, out_dims = self._run_rule(rule, values, dims, params)
        if primitive.multiple_results:
            return [self.new(v, d) for v, d in zip(out, out_dims)]
        return self.new(out, out_dims)

    def _run_rule(self, rule: Callable, values: tuple, dims: tuple, params: dict, name: Any = None) -> Any:
        saved = _rule_axis.name
        _rule_axis.name = self.axis_name
        try:
            if name is not None:
                return rule(self.axis_size, name, values, dims, **params)
            return rule(self.axis_size, values, dims, **params)
        finally:
            _rule_axis.name = saved

    def concretization_error(self, tracer: Tracer, what: str, error_type: type) -> Exception:
        if not self.alive:
            return unexpected_tracer_error(tracer)
        return error_type(
            f"Attempted {what} of a batched array of type {tracer.aval.str_short()} inside vmap: each of the "
            f"{self.axis_size} examples has its own value, so Python cannot use it as one.\n"
            f"At {errors.user_location()}\n"
            "Fix: use lax.cond / lax.switch, lax.while_loop or jnp.where, which vmap batches; or pass the value "
            "with in_axes=None if it is the same for every example.")


def batch_flat(fun: Callable[..., Sequence[Any]], axis_size: int, values: Sequence[Any],
               dims: Sequence[BatchDim], axis_name: Any = None, axis_kind: str = VMAP) -> tuple[list, list[BatchDim]]:
    """Run ``fun`` (flat inputs -> flat outputs) on batched values in the current trace;
    ``axis_name`` (if any) is bound while it runs, as an axis of ``axis_kind``."""
    trace = BatchTrace(current_trace(), axis_size, axis_name)
    frames = () if axis_name is None else ((axis_name, axis_size, axis_kind),)
    try:
        ins = [trace.new(v, d) for v, d in zip(values, dims)]
        with set_current_trace(trace), extend_axis_env(frames):
            outs = fun(*ins)
        pairs = [trace.to_pair(o) for o in outs]
    finally:
        trace.alive = False
    return [v for v, _ in pairs], [d for _, d in pairs]


# --- helpers for rules ---------------------------------------------------------------------------
def move_batch_axis(x: Any, dim: BatchDim, axis_size: int, to: int = 0) -> Any:
    """``x`` with its batch dimension at ``to``; an unbatched ``x`` is broadcast along a new one."""
    a = aval(x)
    if dim is None:
        shape = a.shape[:to] + (axis_size,) + a.shape[to:]
        return lax.broadcast_in_dim(x, shape, tuple(d for d in range(len(shape)) if d != to))
    if dim == to:
        return x
    permutation = [d for d in range(a.ndim) if d != dim]
    permutation.insert(to, dim)
    return lax.transpose(x, permutation)


def batched_aval(a: ShapedArray, dim: BatchDim, axis_size: int) -> ShapedArray:
    return a if dim is None else a._replace(shape=a.shape[:dim] + (axis_size,) + a.shape[dim:])


def _batched_program_fun(closed: ClosedJaxpr, axis_size: int, in_dims: Sequence[BatchDim],
                         force_batched: Sequence[bool] | None, out_batched: list) -> Callable:
    """``closed`` as a function of batched inputs whose batched outputs are at dimension 0.
    Outputs listed in ``force_batched`` are batched (broadcast) even when they do not vary;
    which outputs are batched is appended to ``out_batched``."""
    axis_name = current_rule_axis()

    def fun(*args: Any) -> list:
        outs, dims = batch_flat(functools.partial(eval_closed_by_binding, closed), axis_size, args, in_dims,
                                axis_name)
        batched = [d is not None or bool(force_batched and force_batched[i]) for i, d in enumerate(dims)]
        out_batched.append(batched)
        return [move_batch_axis(o, d, axis_size) if b else o for o, d, b in zip(outs, dims, batched)]

    return fun


def batch_jaxpr(closed: ClosedJaxpr, axis_size: int, in_dims: Sequence[BatchDim],
                force_batched: Sequence[bool] | None = None) -> tuple[ClosedJaxpr, list, list[bool]]:
    """The batched program of ``closed``: inputs batched at ``in_dims``, batched outputs at 0.

    Returns the program (const-free: its leading inputs stand for the returned
    consts) and which outputs are batched.
    """
    out_batched: list = []
    fun = _batched_program_fun(closed, axis_size, in_dims, force_batched, out_batched)
    in_avals = [batched_aval(a, d, axis_size) for a, d in zip(closed.in_avals, in_dims)]
    program, consts = trace_program(fun, in_avals, "vmap")
    return program, consts, out_batched[0]


def batch_jaxprs(closed: Sequence[ClosedJaxpr], axis_size: int, in_dims: Sequence[BatchDim],
                 force_batched: Sequence[bool] | None = None) -> tuple[list[ClosedJaxpr], list, list[list[bool]]]:
    """``batch_jaxpr`` of programs taking the same inputs (branches); each program takes the
    consts of all of them as leading inputs."""
    out_batched: list = []
    funs = [_batched_program_fun(c, axis_size, in_dims, force_batched, out_batched) for c in closed]
    in_avals = [batched_aval(a, d, axis_size) for a, d in zip(closed[0].in_avals, in_dims)]
    programs, consts = trace_programs(funs, in_avals, "vmap")
    return programs, consts, out_batched


# --- vmap ------------------------------------------------------------------------------------------
class _NotMapped:
    """Stands for None in an axes specification while it is flattened (None is an empty pytree)."""


_NOT_MAPPED = _NotMapped()


def _check_axes_spec(name: str, axes: Any) -> None:
    leaves = optree.tree_leaves(axes, none_is_leaf=True, namespace=tree_util.NAMESPACE)
    if not all(a is None or isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in leaves):
        raise TypeError(f"vmap {name} must be an int, None, or (nested) container with those types as leaves, "
                        f"but got {axes}.")


def _flatten_axes(name: str, treedef: tree_util.PyTreeDef, axes: Any, leaves: Sequence[Any]) -> list[BatchDim]:
    """One axis (or None) per leaf of ``treedef``; ``axes`` is a tree prefix of it. The tree is
    rebuilt from its own ``leaves`` to match the two: a user's class whose constructor converts
    its fields (``jnp.asarray``) is only ever handed arrays, as in JAX."""
    marked = optree.tree_map(lambda a: _NOT_MAPPED if a is None else int(a), axes, none_is_leaf=True,
                             namespace=tree_util.NAMESPACE)
    dummy = tree_util.tree_unflatten(treedef, list(leaves))
    try:
        flat = optree.broadcast_prefix(marked, dummy, namespace=tree_util.NAMESPACE)
    except ValueError as e:
        raise ValueError(f"vmap {name} specification must be a tree prefix of the corresponding value, got "
                         f"specification {axes} for value tree {treedef}: {e}") from None
    return [None if a is _NOT_MAPPED else a for a in flat]


def _leaf_names(fun: Callable, args: tuple, kwargs: dict) -> list[str]:
    """``argument x``, ``argument params['w']``, ...: one per flat leaf, for messages."""
    try:
        params = [p.name for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = []
    for path in tree_util.tree_structure((args, kwargs)).paths():  # raw keys: (0 or 1, index or name, ...)
        (where, key), rest = path[:2], path[2:]
        base = key if where == 1 else params[key] if key < len(params) else f"args[{key}]"
        names.append(f"argument {base}{tree_util.keystr(rest)}")
    return names


def _hidden_dims(leaves: Sequence[Any], public: Sequence[Any]) -> list[int]:
    """Per flat leaf, its trailing axes that the user's leaf does not show: a key array's data has
    one more (its words) than the keys. Negative ``in_axes`` / ``out_axes`` count the user's axes."""
    return [len(aval(x).shape) - len(p.shape) if tree_util.is_array_node(p) else 0 for x, p in zip(leaves, public)]


def _shape(x: Any) -> tuple[int, ...]:
    """A leaf's shape: an array's, or a float0 array's (which has no aval: it holds no data)."""
    return x.shape if tree_util.is_float0_array(x) else aval(x).shape


def _canonical_in_dims(leaves: list, in_dims: list[BatchDim], hidden: Sequence[int] = ()) -> list[BatchDim]:
    out = []
    for i, (x, d) in enumerate(zip(leaves, in_dims)):
        if d is not None:
            extra = hidden[i] if hidden else 0
            shape = _shape(x)[:len(_shape(x)) - extra]
            if not -len(shape) <= d < len(shape):
                raise ValueError(f"vmap was requested to map its argument along axis {d}, which implies that its "
                                 f"rank should be at least {d + 1 if d >= 0 else -d}, but is only {len(shape)} "
                                 f"(its shape is {shape})")
            d %= len(shape)
        out.append(d)
    return out


def _axis_size(fun: Callable, args: tuple, kwargs: dict, leaves: list, in_dims: list[BatchDim],
               axis_size: int | None) -> int:
    """The size of the mapped axis, which every mapped argument (and ``axis_size``) must agree on."""
    mapped = [(i, _shape(x)[d]) for i, (x, d) in enumerate(zip(leaves, in_dims)) if d is not None]
    sizes = {n for _, n in mapped}
    if axis_size is not None and sizes <= {int(axis_size)}:
        return int(axis_size)
    if axis_size is None and len(sizes) == 1:
        return sizes.pop()
    if axis_size is None and not sizes:
        if not leaves:
            raise ValueError("vmap wrapped function must be passed at least one argument containing an array or "
                             f"axis_size must be specified, got empty *args={args} and **kwargs={kwargs}")
        raise ValueError("vmap must have at least one non-None value in in_axes or axis_size must be specified")
    names = _leaf_names(fun, args, kwargs)
    lines = [] if axis_size is None else [f"the `axis_size` argument was {axis_size}"]
    first_with_size: dict[int, int] = {}
    for i, n in mapped:
        first_with_size.setdefault(n, i)
    for rank, (n, count) in enumerate(collections.Counter(n for _, n in mapped).most_common()):
        i = first_with_size[n]
        a = aval(leaves[i])  # (JAX names the dtype in full here: int32[2,5])
        typ = f"{'~' if a.weak_type else ''}{a.dtype.name}[{','.join(map(str, a.shape))}]"
        example = f"axis {in_dims[i]} of {names[i]} of type {typ}"
        if count == 1:
            lines.append(f"one axis had size {n}: {example}")
        else:
            lines.append(f"{'some' if rank else 'most'} axes ({count} of them) had size {n}, e.g. {example}")
    raise ValueError("vmap got inconsistent sizes for array axes to be mapped:\n" +
                     ";\n".join(f"  * {line}" for line in lines))


def _leaf_path(tree: Any, i: int) -> str:
    """The key path (``['a'][1]``) of leaf ``i`` of a tree structure."""
    placeholder = tree_util.tree_unflatten(tree, list(range(tree.num_leaves)))
    return tree_util.keystr(tree_util.tree_flatten_with_path(placeholder)[0][i][0])


def _to_out_axis(x: Any, dim: BatchDim, out_axis: BatchDim, axis_size: int, hidden: int = 0,
                 path: Callable[[], str] = str) -> Any:
    if out_axis is None:
        if dim is not None:
            raise ValueError(f"at vmap out_axes{path()}, got axis spec None but output was batched on axis {dim}")
        return x
    rank = aval(x).ndim + (dim is None) - hidden  # (``hidden``: a key array's word axis, not counted)
    if not -rank <= out_axis < rank:
        raise ValueError(f"axis {out_axis} is out of bounds for array of dimension {rank}")
    return move_batch_axis(x, dim, axis_size, out_axis % rank)


def _float0_batch(x: np.ndarray, axis: int | None, size: int) -> np.ndarray:
    """A float0 result of every example, with the batch axis where ``out_axes`` puts it (float0
    holds no data: a result of the examples is one of their shape)."""
    if axis is None:
        return x
    axis = axis % (x.ndim + 1)
    return dtypes.float0_zeros(x.shape[:axis] + (size,) + x.shape[axis:])


def vmap(fun: Callable, in_axes: Any = 0, out_axes: Any = 0, axis_name: Any = None, axis_size: int | None = None,
         spmd_axis_name: Any = None, *, _axis_kind: str = VMAP) -> Callable:
    """Vectorize ``fun`` over an axis of its inputs: ``vmap(f)(xs)`` is ``stack([f(x) for x in xs])``,
    computed by batched operations instead of a loop.

    ``in_axes``: an int, None or a tuple with one entry per positional argument, each a
    pytree prefix of that argument whose leaves say which axis is mapped (None: the same
    value for every example). Keyword arguments are mapped over axis 0.
    ``out_axes``: where the mapped axis goes in the outputs (a prefix of the output tree).
    ``axis_size``: needed when no argument is mapped. ``axis_name`` names the axis for the
    collectives in ``fun`` (``lax.psum(x, axis_name)`` sums over the examples);
    ``spmd_axis_name`` is accepted for compatibility (it places batches on devices in JAX).
    """
    if not callable(fun):
        raise TypeError(f"vmap expects a callable, got {type(fun).__name__}")
    if isinstance(in_axes, list):  # lists and tuples read alike, as in JAX
        in_axes = tuple(in_axes)
    if not (in_axes is None or isinstance(in_axes, (int, np.integer, tuple))):
        raise TypeError("vmap in_axes must be an int, None, or a tuple of entries corresponding to the positional "
                        f"arguments passed to the function, but got {in_axes}.")
    _check_axes_spec("in_axes", in_axes)
    _check_axes_spec("out_axes", out_axes)

    @errors.api_boundary  # (the user's frames only, in tracebacks)
    @errors.wraps(fun)
    def vmapped(*args: Any, **kwargs: Any) -> Any:
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError("vmap in_axes must be an int, None, or a tuple of entries corresponding to the "
                             f"positional arguments passed to the function, but got len(in_axes)={len(in_axes)}, "
                             f"len(args)={len(args)}")
        leaves, in_tree = tree_util.flatten_for_trace((args, kwargs))
        hidden = _hidden_dims(leaves, tree_util.tree_leaves((args, kwargs)))
        in_dims = _canonical_in_dims(leaves, _flatten_axes("in_axes", in_tree, (in_axes, 0), leaves), hidden)
        size = _axis_size(fun, args, kwargs, leaves, in_dims, axis_size)
        in_dims = list(in_dims)
        for i, x in enumerate(leaves):  # (float0 holds no data: the function gets one example's shape)
            if in_dims[i] is not None and tree_util.is_float0_array(x):
                leaves[i], in_dims[i] = dtypes.float0_zeros(x.shape[:in_dims[i]] + x.shape[in_dims[i] + 1:]), None
        # A mapped Ref argument: the function sees a ref of one example (over the batched value), and
        # the ref gets the batch of what the examples wrote (as JAX batches refs).
        mapped_refs = [(i, x) for i, (x, d) in enumerate(zip(leaves, in_dims)) if d is not None and _refs.is_ref(x)]
        leaves = [_refs.get(x) if _refs.is_ref(x) and d is not None else x if d is None else ensure_array(x)
                  for x, d in zip(leaves, in_dims)]
        out_tree_box, out_hidden = [], []

        def flat_fun(*flat: Any) -> list:
            flat = list(flat)
            inner = []
            for i, _ in mapped_refs:
                flat[i] = _refs.new_ref(flat[i])
                inner.append(flat[i])
            call_args, call_kwargs = tree_util.tree_unflatten(in_tree, flat)
            out = user_functions.traced(fun)(*call_args, **call_kwargs)
            out_leaves, out_tree = tree_util.flatten_for_trace(out)
            out_tree_box.append(out_tree)
            out_hidden.append(_hidden_dims(out_leaves, tree_util.tree_leaves(out)))
            finals = []
            for ref in inner:
                finals.append(_refs.held_value(ref))
                _refs.invalidate(ref, "it was an argument of a vmapped function that has finished")
            return out_leaves + finals

        outs, out_dims = batch_flat(flat_fun, size, leaves, in_dims, axis_name, _axis_kind)
        if mapped_refs:
            n = len(outs) - len(mapped_refs)
            for (i, ref), value, dim in zip(mapped_refs, outs[n:], out_dims[n:]):
                if value is not leaves[i] or dim != in_dims[i]:  # (written by the function)
                    _refs.write_value(ref, _to_out_axis(value, dim, in_dims[i], size))
            outs, out_dims = outs[:n], out_dims[:n]
        out_tree = out_tree_box[0]
        targets = _flatten_axes("out_axes", out_tree, out_axes, outs)
        outs = [_float0_batch(x, t, size) if tree_util.is_float0_array(x) else
                _to_out_axis(x, d, t, size, h, functools.partial(_leaf_path, out_tree, i))
                for i, (x, d, t, h) in enumerate(zip(outs, out_dims, targets, out_hidden[0]))]
        return tree_util.tree_unflatten(out_tree, outs)

    return vmapped


control_flow.vmap = vmap  # lax.map's batch_size batches with it

# The rule modules register themselves; elementwise primitives share ``batch_elementwise``.
from ember.transforms import batch_control_flow, batch_custom  # noqa: E402,F401
from ember.transforms.batch_rules import batch_elementwise  # noqa: E402
