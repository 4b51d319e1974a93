"""Optimizers as triples of functions (JAX's ``jax.example_libraries.optimizers``):
``init_fun(params) -> opt_state``, ``update_fun(step, grads, opt_state) -> opt_state`` and
``get_params(opt_state) -> params``, over any pytree of parameters.

Each optimizer is written for one array (``init(x0) -> state``, ``update(i, g, state)``,
``get_params(state)``); ``optimizer`` lifts it to pytrees. The state of a pytree is an
``OptimizerState``: the flat per-leaf states, the parameters' structure and each state's
structure; it is a pytree, so it passes in and out of ``jit``. Step sizes are numbers or
schedules (functions of the step number)."""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any, Callable, NamedTuple

import ember.numpy as jnp
from ember import tree_util

Schedule = Callable[[Any], Any]

OptimizerState = namedtuple("OptimizerState", ["packed_state", "tree_def", "subtree_defs"])
tree_util.register_pytree_node(OptimizerState, lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
                               lambda aux, children: OptimizerState(children[0], aux[0], aux[1]))


class Optimizer(NamedTuple):
    init_fn: Callable
    update_fn: Callable
    params_fn: Callable


def _flatten_states(states: list) -> tuple[list, list]:
    flat = [tree_util.tree_flatten(s) for s in states]
    return [leaves for leaves, _ in flat], [tree for _, tree in flat]


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]) -> Callable[..., Optimizer]:
    """Lift an optimizer of one array to one of pytrees (a decorator of optimizer makers)."""
    @functools.wraps(opt_maker)
    def make(*args: Any, **kwargs: Any) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        @functools.wraps(init)
        def tree_init(x0_tree: Any) -> OptimizerState:
            leaves, tree = tree_util.tree_flatten(x0_tree)
            states_flat, subtrees = _flatten_states([init(x0) for x0 in leaves])
            return OptimizerState(states_flat, tree, subtrees)

        @functools.wraps(update)
        def tree_update(i: Any, grad_tree: Any, opt_state: OptimizerState) -> OptimizerState:
            states_flat, tree, subtrees = opt_state
            grads, grad_tree_def = tree_util.tree_flatten(grad_tree)
            if grad_tree_def != tree:
                raise TypeError("optimizer update function was passed a gradient tree that did not match the "
                                f"parameter tree structure with which it was initialized: parameter tree {tree} "
                                f"and grad tree {grad_tree_def}.")
            states = [tree_util.tree_unflatten(t, s) for t, s in zip(subtrees, states_flat)]
            new_flat, new_subtrees = _flatten_states([update(i, g, s) for g, s in zip(grads, states)])
            for before, after in zip(subtrees, new_subtrees):
                if before != after:
                    raise TypeError("optimizer update function produced an output structure that did not match "
                                    f"its input structure: input {before} and output {after}.")
            return OptimizerState(new_flat, tree, subtrees)

        @functools.wraps(get_params)
        def tree_get_params(opt_state: OptimizerState) -> Any:
            states_flat, tree, subtrees = opt_state
            return tree_util.tree_unflatten(tree, [get_params(tree_util.tree_unflatten(t, s))
                                                   for t, s in zip(subtrees, states_flat)])
        return Optimizer(tree_init, tree_update, tree_get_params)
    return make


def _first(state: tuple) -> Any:
    return state[0]


# --- the optimizers (of one array) -------------------------------------------------------------------------
@optimizer
def sgd(step_size: float | Schedule) -> tuple:
    """Plain gradient descent: ``x - step_size(i) * g``."""
    step_size = make_schedule(step_size)
    return (lambda x0: x0), (lambda i, g, x: x - step_size(i) * g), (lambda x: x)


@optimizer
def momentum(step_size: float | Schedule, mass: float) -> tuple:
    """Heavy-ball momentum: ``v = mass * v + g``, ``x - step_size(i) * v``."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity
    return (lambda x0: (x0, jnp.zeros_like(x0))), update, _first


@optimizer
def nesterov(step_size: float | Schedule, mass: float) -> tuple:
    """Nesterov momentum: ``v = mass * v + g``, ``x - step_size(i) * (mass * v + g)``."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity
    return (lambda x0: (x0, jnp.zeros_like(x0))), update, _first


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9) -> tuple:
    """Adagrad (with momentum): steps scaled by the inverse root of the summed squared gradients."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        inv_sqrt = jnp.where(g_sq > 0, 1.0 / jnp.sqrt(g_sq), 0.0)
        m = (1.0 - momentum) * (g * inv_sqrt) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return (lambda x0: (x0, jnp.zeros_like(x0), jnp.zeros_like(x0))), update, _first


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8) -> tuple:
    """RMSProp: steps scaled by the root of a running mean of squared gradients."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, avg_sq = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq + eps), avg_sq
    return (lambda x0: (x0, jnp.zeros_like(x0))), update, _first


@optimizer
def rmsprop_momentum(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8,
                     momentum: float = 0.9) -> tuple:
    """RMSProp with momentum on the scaled steps."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, avg_sq, mom = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq + eps)
        return x - mom, avg_sq, mom
    return (lambda x0: (x0, jnp.zeros_like(x0), jnp.zeros_like(x0))), update, _first


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple:
    """Adam: bias-corrected running means of the gradients and of their squares."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        v_hat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        return x - step_size(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v
    return (lambda x0: (x0, jnp.zeros_like(x0), jnp.zeros_like(x0))), update, _first


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> tuple:
    """Adamax: Adam with the infinity norm in place of the second moment."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        return x - (step_size(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))) * m / (u + eps), m, u
    return (lambda x0: (x0, jnp.zeros_like(x0), jnp.zeros_like(x0))), update, _first


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9) -> tuple:
    """SM3: Adagrad with one accumulator per dimension (their minimum bounds each element's)."""
    step_size = make_schedule(step_size)

    def along(ndim: int, v: Any, axis: int) -> Any:
        return v[tuple(slice(None) if d == axis else None for d in range(ndim))]

    def init(x0: Any) -> tuple:
        shape = x0.shape
        x0 = jnp.atleast_1d(x0)
        return x0, jnp.zeros_like(x0), [jnp.zeros(n, x0.dtype) for n in x0.shape], shape

    def update(i: Any, g: Any, state: tuple) -> tuple:
        x, m, vs, shape = state
        accum = functools.reduce(jnp.minimum, [along(g.ndim, v, k) for k, v in enumerate(vs)]) + jnp.square(g)
        inv_sqrt = jnp.where(accum > 0, 1.0 / jnp.sqrt(accum), 0)
        m = (1.0 - momentum) * (g * inv_sqrt) + momentum * m
        x = x - step_size(i) * m
        vs = [accum.max(tuple(d for d in range(x.ndim) if d != k)) for k in range(x.ndim)]
        return x, m, vs, shape
    return init, update, lambda state: state[0].reshape(state[3])


# --- schedules -------------------------------------------------------------------------------------------------
def constant(step_size: float) -> Schedule:
    return lambda i: step_size


def exponential_decay(step_size: float, decay_steps: float, decay_rate: float) -> Schedule:
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size: float, decay_steps: float, decay_rate: float, staircase: bool = False) -> Schedule:
    if staircase:
        return lambda i: step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size: float, decay_steps: float, final_step_size: float, power: float = 1.0) -> Schedule:
    def schedule(step_num: Any) -> Any:
        fraction = 1 - jnp.minimum(step_num, decay_steps) / decay_steps
        return fraction ** power * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """``values[k]`` for steps after the first ``k`` boundaries."""
    boundaries, values = jnp.array(boundaries), jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("boundaries and values must be sequences")
    if boundaries.shape[0] != values.shape[0] - 1:
        raise ValueError("boundaries length must be one shorter than values length")
    return lambda i: values[jnp.sum(i > boundaries)]


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(type(scalar_or_schedule))


# --- utilities ---------------------------------------------------------------------------------------------------
def l2_norm(tree: Any) -> Any:
    """The Euclidean norm of all the leaves together."""
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in tree_util.tree_leaves(tree)))


def clip_grads(grad_tree: Any, max_norm: float) -> Any:
    """The gradients scaled down to norm ``max_norm`` if their norm is larger."""
    norm = l2_norm(grad_tree)
    return tree_util.tree_map(lambda g: jnp.where(norm < max_norm, g, g * (max_norm / norm)), grad_tree)


class JoinPoint:
    """A leaf of ``unpack_optimizer_state``'s result holding one parameter's state."""

    def __init__(self, subtree: Any) -> None:
        self.subtree = subtree

    def __iter__(self) -> Any:
        yield self.subtree


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """The state as a pytree of the parameters' structure whose leaves are ``JoinPoint`` s (to save it)."""
    states_flat, tree, subtrees = opt_state
    return tree_util.tree_unflatten(tree, [JoinPoint(tree_util.tree_unflatten(t, s))
                                           for t, s in zip(subtrees, states_flat)])


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """The inverse of ``unpack_optimizer_state``."""
    sentinels, tree = tree_util.tree_flatten(marked_pytree, is_leaf=lambda x: isinstance(x, JoinPoint))
    if not all(isinstance(s, JoinPoint) for s in sentinels):
        raise TypeError("pack_optimizer_state expects a pytree whose leaves are JoinPoints")
    states_flat, subtrees = _flatten_states([s.subtree for s in sentinels])
    return OptimizerState(states_flat, tree, subtrees)


__all__ = ["JoinPoint", "Optimizer", "OptimizerState", "adagrad", "adam", "adamax", "clip_grads", "constant",
           "exponential_decay", "inverse_time_decay", "l2_norm", "make_schedule", "momentum", "nesterov",
           "optimizer", "pack_optimizer_state", "piecewise_constant", "polynomial_decay", "rmsprop",
           "rmsprop_momentum", "sgd", "sm3", "unpack_optimizer_state"]
