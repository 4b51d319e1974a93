"""Logistic regression fitted by jaxopt's ``LBFGS`` (its ``run`` is a ``while_loop`` of
line searches), then timed as whole solves. Prints a JSON line: losses, step time."""
import json
import sys

import jax
import jax.numpy as jnp
import jaxopt
import numpy as np
from _timing import steady_step_seconds

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 16)).astype(np.float32)
true_w = rng.standard_normal(16).astype(np.float32)
y = (x @ true_w + 0.5 * rng.standard_normal(256) > 0).astype(np.float32)


def loss(w, x, y):
    logits = x @ w[:-1] + w[-1]
    return jnp.mean(jnp.logaddexp(0.0, logits) - y * logits) + 1e-3 * jnp.sum(w ** 2)


solver = jaxopt.LBFGS(fun=loss, maxiter=50, tol=1e-6)
solve = jax.jit(lambda w0: solver.run(w0, x, y))
w0 = jnp.zeros(17)
params, state = solve(w0)
losses = [float(loss(w0, x, y)), float(loss(params, x, y)), float(state.iter_num)]
result = {"losses": losses, "weights": np.asarray(params).tolist()}
result["step_seconds"] = steady_step_seconds(lambda: float(solve(w0)[0][0]))
json.dump(result, sys.stdout)
