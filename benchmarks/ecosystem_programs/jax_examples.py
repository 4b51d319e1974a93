"""Three of JAX's examples/ programs, condensed, on generated data: the VAE (mnist_vae.py: a
stax encoder and decoder, a ``fori_loop`` over minibatches, ``optimizers.momentum``),
differentially private SGD (differentially_private_sgd.py: per-example gradients by ``vmap``
of ``grad`` through a stax CNN, clipped, noised) and ADVI (advi.py: a mean-field Gaussian
fitted with ``optimizers.adam``). Prints a JSON line: losses per program, step times."""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
from _timing import steady_step_seconds
from jax import lax, random
from jax.example_libraries import optimizers, stax
from jax.example_libraries.stax import Conv, Dense, FanOut, Flatten, Relu, Softplus

rng = np.random.default_rng(0)
images = (rng.uniform(size=(256, 64)) < 0.3).astype(np.float32)
results = {}

# --- VAE -------------------------------------------------------------------------------------------------
encoder_init, encode = stax.serial(Dense(64), Softplus, FanOut(2), stax.parallel(Dense(8), stax.serial(Dense(8),
                                                                                                      Softplus)))
decoder_init, decode = stax.serial(Dense(64), Softplus, Dense(64))


def elbo(key, params, batch):
    enc_params, dec_params = params
    mu, sigmasq = encode(enc_params, batch)
    z = mu + jnp.sqrt(sigmasq) * random.normal(key, mu.shape)
    logits = decode(dec_params, z)
    likelihood = jnp.sum(batch * jax.nn.log_sigmoid(logits) + (1 - batch) * jax.nn.log_sigmoid(-logits))
    kl = 0.5 * jnp.sum(1 + jnp.log(sigmasq) - mu ** 2 - sigmasq)
    return (likelihood + kl) / batch.shape[0]


_, enc = encoder_init(random.PRNGKey(1), (32, 64))
_, dec = decoder_init(random.PRNGKey(2), (32, 8))
opt_init, opt_update, get_params = optimizers.momentum(1e-3, 0.9)


@jax.jit
def vae_epoch(opt_state, key):
    def body(i, state):
        batch = lax.dynamic_slice_in_dim(images, i * 32, 32)
        grads = jax.grad(lambda p: -elbo(random.fold_in(key, i), p, batch))(get_params(state))
        return opt_update(i, grads, state)
    state = lax.fori_loop(0, images.shape[0] // 32, body, opt_state)
    return state, elbo(key, get_params(state), images[:32])


state, losses = opt_init((enc, dec)), []
for epoch in range(4):
    state, value = vae_epoch(state, random.PRNGKey(epoch))
    losses.append(float(value))
results["vae"] = {"losses": losses, "step_seconds": steady_step_seconds(
    lambda: float(vae_epoch(state, random.PRNGKey(0))[1]))}

# --- differentially private SGD ----------------------------------------------------------------------------
cnn_init, cnn = stax.serial(Conv(4, (3, 3), padding="SAME"), Relu, Flatten, Dense(2))
pictures = images.reshape(256, 8, 8, 1)[:32]
targets = jax.nn.one_hot((pictures.sum((1, 2, 3)) > 19).astype(np.int32), 2)
_, cnn_params = cnn_init(random.PRNGKey(3), (-1, 8, 8, 1))


def example_loss(params, x, y):
    return -jnp.sum(jax.nn.log_softmax(cnn(params, x[None]))[0] * y)


@jax.jit
def private_step(params, key):
    per_example = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, pictures, targets)
    leaves, tree = jax.tree.flatten(per_example)
    norms = jnp.sqrt(sum(jnp.sum(jnp.reshape(g, (g.shape[0], -1)) ** 2, axis=1) for g in leaves))
    scale = jnp.minimum(1.0, 1.0 / (norms + 1e-6))
    keys = random.split(key, len(leaves))
    noised = [jnp.mean(g * scale.reshape((-1,) + (1,) * (g.ndim - 1)), axis=0)
              + 0.01 * random.normal(k, g.shape[1:]) for g, k in zip(leaves, keys)]
    new = jax.tree.map(lambda p, g: p - 0.1 * g, params, jax.tree.unflatten(tree, noised))
    return new, jnp.mean(jax.vmap(example_loss, in_axes=(None, 0, 0))(new, pictures, targets))


losses = []
for i in range(6):
    cnn_params, value = private_step(cnn_params, random.PRNGKey(10 + i))
    losses.append(float(value))
results["dp_sgd"] = {"losses": losses, "step_seconds": steady_step_seconds(
    lambda: float(private_step(cnn_params, random.PRNGKey(0))[1]))}

# --- ADVI --------------------------------------------------------------------------------------------------
def log_density(z):
    return -0.5 * jnp.sum((z - jnp.array([1.0, -1.0])) ** 2 / jnp.array([0.5, 2.0]))


def negative_elbo(params, key):
    mean, log_std = params
    samples = mean + jnp.exp(log_std) * random.normal(key, (16, 2))
    return -(jnp.mean(jax.vmap(log_density)(samples)) + jnp.sum(log_std))


adam_init, adam_update, adam_params = optimizers.adam(0.05)


@jax.jit
def advi_step(i, state):
    value, grads = jax.value_and_grad(negative_elbo)(adam_params(state), random.PRNGKey(i))
    return adam_update(i, grads, state), value


state, losses = adam_init((jnp.zeros(2), jnp.zeros(2))), []
for i in range(20):
    state, value = advi_step(i, state)
    losses.append(float(value))
mean, log_std = adam_params(state)
results["advi"] = {"losses": [*losses, *np.asarray(mean).tolist(), *np.asarray(log_std).tolist()],
                   "step_seconds": steady_step_seconds(lambda: float(advi_step(0, state)[1]))}
json.dump(results, sys.stdout)
