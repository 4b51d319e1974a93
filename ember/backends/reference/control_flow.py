"""Reference rules for control flow: run the sub-programs with the interpreter, one step at a time."""
from __future__ import annotations

import numpy as np

from ember.backends.reference import eval_closed, impl_rules
from ember.core.calls import checkpoint_p, name_p, optimization_barrier_p
from ember.lax import control_flow as cf


def _cond(index: np.ndarray, *operands: np.ndarray, branches: tuple) -> list[np.ndarray]:
    """Runs only the chosen branch. As in XLA, an index out of range selects the last branch
    (``lax.switch`` clamps before binding, so only hand-built programs get there)."""
    i = int(index)
    return eval_closed(branches[i if 0 <= i < len(branches) else -1], *operands)


def _while(*operands: np.ndarray, body_jaxpr, body_nconsts: int, cond_jaxpr, cond_nconsts: int) -> list[np.ndarray]:
    cond_consts = operands[:cond_nconsts]
    body_consts = operands[cond_nconsts:cond_nconsts + body_nconsts]
    carry = list(operands[cond_nconsts + body_nconsts:])
    while eval_closed(cond_jaxpr, *cond_consts, *carry)[0]:
        carry = eval_closed(body_jaxpr, *body_consts, *carry)
    return carry


def _scan(*operands: np.ndarray, jaxpr, length: int, num_carry: int, num_consts: int, reverse: bool,
          unroll: int) -> list[np.ndarray]:
    """Steps in order (or reversed); the ys keep their step's position. ``unroll`` only guides compilers."""
    consts = operands[:num_consts]
    carry = list(operands[num_consts:num_consts + num_carry])
    xs = operands[num_consts + num_carry:]
    ys_per_step: list[list[np.ndarray]] = [[]] * length  # (every entry is set below)
    for i in range(length - 1, -1, -1) if reverse else range(length):
        outs = eval_closed(jaxpr, *consts, *carry, *(np.asarray(x[i]) for x in xs))
        carry, ys_per_step[i] = outs[:num_carry], outs[num_carry:]
    y_avals = jaxpr.out_avals[num_carry:]
    if not length:
        return carry + [np.zeros((0, *a.shape), a.dtype) for a in y_avals]
    return carry + [np.stack(ys) for ys in zip(*ys_per_step)]


impl_rules.update({
    cf.cond_p: _cond,
    cf.while_p: _while,
    cf.scan_p: _scan,
})


# --- checkpoint (remat2), checkpoint_name's name, and the compiler's optimization barrier ---------
def _checkpoint(*args: np.ndarray, jaxpr, prevent_cse, differentiated: bool, policy) -> list[np.ndarray]:
    return eval_closed(jaxpr, *args)


impl_rules[checkpoint_p] = _checkpoint
impl_rules[name_p] = lambda x, *, name: x
impl_rules[optimization_barrier_p] = lambda *xs: list(xs)
