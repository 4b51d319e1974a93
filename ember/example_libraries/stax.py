"""Layers as pairs of functions (JAX's ``jax.example_libraries.stax``): ``init_fun(rng,
input_shape) -> (output_shape, params)`` and ``apply_fun(params, inputs, **kwargs)``.
Combinators (``serial``, ``parallel``, ``FanOut``, ...) make layers of layers. Parameters are
drawn as JAX's are (the same initializers, the same key splits), so a network built here has
JAX's parameters for the same key."""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import ember.numpy as jnp
from ember import lax, random
from ember.nn import elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax, softplus, standardize
from ember.nn.initializers import glorot_normal, normal, ones, zeros

Layer = tuple[Callable, Callable]
glorot, randn = glorot_normal, normal
logsoftmax = log_softmax


def Dense(out_dim: int, W_init: Callable = glorot_normal(), b_init: Callable = normal()) -> Layer:  # noqa: B008
    """An affine layer: ``inputs @ W + b``."""
    def init_fun(rng: Any, input_shape: tuple) -> tuple:
        w_key, b_key = random.split(rng)
        return (*input_shape[:-1], out_dim), (W_init(w_key, (input_shape[-1], out_dim)), b_init(b_key, (out_dim,)))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        w, b = params
        return jnp.dot(inputs, w) + b
    return init_fun, apply_fun


def _general_conv(shape_tuple: Callable, conv: Callable, dimension_numbers: tuple[str, str, str], out_chan: int,
                  filter_shape: Sequence[int], strides: Sequence[int] | None, padding: Any, W_init: Callable | None,
                  b_init: Callable) -> Layer:
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    strides = tuple(strides or (1,) * len(filter_shape))
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))

    def init_fun(rng: Any, input_shape: tuple) -> tuple:
        window = iter(filter_shape)
        kernel_shape = tuple(out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I" else next(window)
                             for c in rhs_spec)
        output_shape = shape_tuple(input_shape, kernel_shape, strides, padding, dimension_numbers)
        bias_shape = tuple(out_chan if c == "C" else 1 for c in out_spec)
        w_key, b_key = random.split(rng)
        return output_shape, (W_init(w_key, kernel_shape), b_init(b_key, bias_shape))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        w, b = params
        return conv(inputs, w, strides, padding, dimension_numbers) + b
    return init_fun, apply_fun


def GeneralConv(dimension_numbers: tuple[str, str, str], out_chan: int, filter_shape: Sequence[int],
                strides: Sequence[int] | None = None, padding: Any = "VALID", W_init: Callable | None = None,
                b_init: Callable = normal(1e-6)) -> Layer:  # noqa: B008
    """A convolution in the layout ``dimension_numbers`` (e.g. ``("NHWC", "HWIO", "NHWC")``), plus a bias."""
    def conv(inputs: Any, w: Any, strides: tuple, padding: Any, numbers: tuple) -> Any:
        return lax.conv_general_dilated(inputs, w, strides, padding, dimension_numbers=numbers)
    return _general_conv(lax.conv_general_shape_tuple, conv, dimension_numbers, out_chan, filter_shape, strides,
                         padding, W_init, b_init)


def GeneralConvTranspose(dimension_numbers: tuple[str, str, str], out_chan: int, filter_shape: Sequence[int],
                         strides: Sequence[int] | None = None, padding: Any = "VALID", W_init: Callable | None = None,
                         b_init: Callable = normal(1e-6)) -> Layer:  # noqa: B008
    """A transposed convolution (``lax.conv_transpose``) in the layout ``dimension_numbers``, plus a bias."""
    def conv(inputs: Any, w: Any, strides: tuple, padding: Any, numbers: tuple) -> Any:
        return lax.conv_transpose(inputs, w, strides, padding, dimension_numbers=numbers)
    return _general_conv(lax.conv_transpose_shape_tuple, conv, dimension_numbers, out_chan, filter_shape, strides,
                         padding, W_init, b_init)


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))
Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis: Any = (0, 1, 2), epsilon: float = 1e-5, center: bool = True, scale: bool = True,
              beta_init: Callable = zeros, gamma_init: Callable = ones) -> Layer:
    """Normalization over ``axis`` with the batch's statistics, then a learned shift and scale."""
    axis = (axis,) if isinstance(axis, int) else tuple(axis)

    def init_fun(rng: Any, input_shape: tuple) -> tuple:
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        beta_key, gamma_key = random.split(rng)
        return input_shape, (beta_init(beta_key, shape) if center else (),
                             gamma_init(gamma_key, shape) if scale else ())

    def apply_fun(params: Any, x: Any, **kwargs: Any) -> Any:
        beta, gamma = params
        kept = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if scale:
            z = gamma[kept] * z
        return z + beta[kept] if center else z
    return init_fun, apply_fun


def elementwise(fun: Callable, **fun_kwargs: Any) -> Layer:
    """A layer without parameters applying ``fun`` to its inputs."""
    return (lambda rng, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: fun(inputs, **fun_kwargs))


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _window_counts(inputs: Any, window: tuple, strides: tuple, padding: Any, spec: str | None) -> Any:
    """How many input elements each output of a pooling window covers (padding excluded), shaped to divide it."""
    batch_and_channel = (0, inputs.ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))
    spatial = tuple(n for i, n in enumerate(inputs.shape) if i not in batch_and_channel)
    spatial_window = tuple(w for i, w in enumerate(window) if i not in batch_and_channel)
    spatial_strides = tuple(s for i, s in enumerate(strides) if i not in batch_and_channel)
    counts = lax.reduce_window(jnp.ones(spatial, inputs.dtype), 0.0, lax.add, spatial_window, spatial_strides,
                               padding)
    for i in sorted(batch_and_channel):
        counts = jnp.expand_dims(counts, i)
    return counts


def _pooling(reducer: Callable, init_value: float, average: bool = False) -> Callable:
    def layer(window_shape: Sequence[int], strides: Sequence[int] | None = None, padding: Any = "VALID",
              spec: str | None = None) -> Layer:
        strides = tuple(strides or (1,) * len(window_shape))
        window, steps = list(window_shape), list(strides)
        for i in sorted((0, len(window_shape) + 1) if spec is None else (spec.index("N"), spec.index("C"))):
            window.insert(i, 1)
            steps.insert(i, 1)
        window, steps = tuple(window), tuple(steps)

        def init_fun(rng: Any, input_shape: tuple) -> tuple:
            pads = lax.padtype_to_pads(input_shape, window, steps, padding) if isinstance(padding, str) else padding
            return lax.reduce_window_shape_tuple(input_shape, window, steps, pads), ()

        def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
            out = lax.reduce_window(inputs, init_value, reducer, window, steps, padding)
            return out / _window_counts(inputs, window, steps, padding, spec) if average else out
        return init_fun, apply_fun
    return layer


MaxPool = _pooling(lax.max, -math.inf)
SumPool = _pooling(lax.add, 0.0)
AvgPool = _pooling(lax.add, 0.0, average=True)


def Flatten() -> Layer:
    """All dimensions but the first as one."""
    def init_fun(rng: Any, input_shape: tuple) -> tuple:
        return (input_shape[0], math.prod(input_shape[1:])), ()
    return init_fun, lambda params, inputs, **kwargs: jnp.reshape(inputs, (inputs.shape[0], -1))


Flatten = Flatten()


def Identity() -> Layer:
    return (lambda rng, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: inputs)


Identity = Identity()


def FanOut(num: int) -> Layer:
    """``num`` copies of the input, for ``parallel``."""
    return (lambda rng, input_shape: ([input_shape] * num, ())), (lambda params, inputs, **kwargs: [inputs] * num)


def FanInSum() -> Layer:
    """The sum of a list of inputs."""
    return (lambda rng, input_shape: (input_shape[0], ())), (lambda params, inputs, **kwargs: sum(inputs))


FanInSum = FanInSum()


def FanInConcat(axis: int = -1) -> Layer:
    """A list of inputs concatenated along ``axis``."""
    def init_fun(rng: Any, input_shape: list) -> tuple:
        ax = axis % len(input_shape[0])
        size = sum(shape[ax] for shape in input_shape)
        return (*input_shape[0][:ax], size, *input_shape[0][ax + 1:]), ()
    return init_fun, lambda params, inputs, **kwargs: jnp.concatenate(inputs, axis)


def Dropout(rate: float, mode: str = "train") -> Layer:
    """Keeps each input with probability ``rate`` (scaled by 1 / ``rate``) when ``mode`` is
    "train"; needs ``rng=`` when applied. Any other mode is the identity."""
    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError("Dropout layer requires apply_fun to be called with a PRNG key argument. That is, "
                             "instead of `apply_fun(params, inputs)`, call it like `apply_fun(params, inputs, "
                             "rng)` where `rng` is a PRNG key (e.g. from `jax.random.key`).")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, inputs.shape)
        return jnp.where(keep, inputs / rate, 0)
    return (lambda rng, input_shape: (input_shape, ())), apply_fun


def serial(*layers: Layer) -> Layer:
    """The layers one after the other; ``rng=`` (if given) is split among them."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng: Any, input_shape: Any) -> tuple:
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, layer_params = init(layer_rng, input_shape)
            params.append(layer_params)
        return input_shape, params

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        for fun, layer_params, layer_rng in zip(apply_funs, params, rngs):
            inputs = fun(layer_params, inputs, rng=layer_rng, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers: Layer) -> Layer:
    """The layers side by side on a list of inputs (one each); ``rng=`` is split among them."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng: Any, input_shape: Sequence) -> tuple:
        rngs = random.split(rng, len(init_funs))
        return tuple(zip(*[init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)])) or ((), ())

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer: Callable[[Any], Layer]) -> Layer:
    """A layer made, at init and at each apply, by ``make_layer(input_shape)``."""
    def init_fun(rng: Any, input_shape: Any) -> tuple:
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun


__all__ = ["AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "Dense", "Dropout", "Elu", "Exp",
           "FanInConcat", "FanInSum", "FanOut", "Flatten", "Gelu", "GeneralConv", "GeneralConvTranspose", "Identity",
           "LeakyRelu", "LogSoftmax", "MaxPool", "Relu", "Selu", "Sigmoid", "Softmax", "Softplus", "SumPool", "Tanh",
           "elementwise", "parallel", "serial", "shape_dependent"]
