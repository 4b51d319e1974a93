"""diffrax solving a damped oscillator with ``Tsit5`` (adaptive steps, ``SaveAt``), and the
gradient of a loss on the solution with respect to the damping (through the solve). Prints a
JSON line: the saved solution and gradient as "losses", step time (one solve and gradient)."""
import json
import sys

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from _timing import steady_step_seconds


def vector_field(t, y, damping):
    position, velocity = y[0], y[1]
    return jnp.stack([velocity, -position - damping * velocity])


def solve(damping):
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field), diffrax.Tsit5(), t0=0.0, t1=5.0, dt0=0.1, y0=jnp.array([1.0, 0.0]),
        args=damping, saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 5.0, 6)),
        stepsize_controller=diffrax.PIDController(rtol=1e-5, atol=1e-7))
    return solution.ys


@jax.jit
def value_and_grad(damping):
    return jax.value_and_grad(lambda d: jnp.sum(solve(d)[:, 0] ** 2))(damping)


ys = jax.jit(solve)(0.3)
value, grad = value_and_grad(0.3)
result = {"losses": [*np.asarray(ys).ravel().tolist(), float(value), float(grad)]}
result["step_seconds"] = steady_step_seconds(lambda: float(value_and_grad(0.3)[1]))
json.dump(result, sys.stdout)
