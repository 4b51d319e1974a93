"""blackjax's HMC sampling a correlated 2-d Gaussian: 200 steps in a ``lax.scan``; the samples'
mean and covariance as "losses" (the chain is deterministic given the key). Prints a JSON line."""
import json
import sys

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
from _timing import steady_step_seconds

precision = jnp.linalg.inv(jnp.array([[1.0, 0.8], [0.8, 1.0]]))


def logdensity(x):
    return -0.5 * x @ precision @ x


hmc = blackjax.hmc(logdensity, step_size=0.3, inverse_mass_matrix=jnp.ones(2), num_integration_steps=8)


@jax.jit
def sample(key):
    def one_step(state, key):
        state, _ = hmc.step(key, state)
        return state, state.position
    _, positions = jax.lax.scan(one_step, hmc.init(jnp.zeros(2)), jax.random.split(key, 200))
    return positions


positions = np.asarray(sample(jax.random.PRNGKey(0)))
result = {"losses": [*positions.mean(0).tolist(), *np.cov(positions.T).ravel().tolist(), *positions[-1].tolist()]}
result["step_seconds"] = steady_step_seconds(lambda: float(sample(jax.random.PRNGKey(0))[-1, 0]))
json.dump(result, sys.stdout)
