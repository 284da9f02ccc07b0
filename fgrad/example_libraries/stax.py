"""jax.example_libraries.stax over fgrad: layers as (init_fun, apply_fun) pairs.

    init_fun, apply_fun = stax.serial(stax.Dense(512), stax.Relu, stax.Dense(10),
                                      stax.LogSoftmax)
    out_shape, params = init_fun(key, (-1, 784))
    logits = apply_fun(params, inputs)           # rng=key for Dropout

`init_fun(rng, input_shape) -> (output_shape, params)`, `apply_fun(params, inputs, **kw)`;
params are nested tuples/lists of arrays, so they are pytrees for grad, jit and the
optimizers of `fgrad.example_libraries.optimizers`. Initializers come from
`fgrad.nn.initializers` and draw the same numbers as JAX's for the same key. Convolutions
take JAX's dimension-number strings (default NHWC / HWIO); pooling reduces windows over the
spatial axes (NHWC unless `spec` says otherwise), padding 'VALID', 'SAME' or explicit pairs.
"""
from __future__ import annotations

import functools
import itertools
import math
from typing import Any, Callable, Sequence

from fgrad import random
from fgrad.core.dtypes import dtypes
from fgrad.core.ir import ShapedArray
from fgrad.core.tensor import Tensor
from fgrad.lax.convolution import conv_general_dilated
from fgrad.nn import functions as nnf
from fgrad.nn.initializers import glorot_normal, normal, ones, zeros
from fgrad.numpy._base import asarray
from fgrad.transforms.eval_shape import eval_shape

__all__ = ["AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "Dense",
           "Dropout", "Elu", "Exp", "FanInConcat", "FanInSum", "FanOut", "Flatten", "Gelu",
           "GeneralConv", "GeneralConvTranspose", "Identity", "LeakyRelu", "LogSoftmax",
           "MaxPool", "Relu", "Selu", "Sigmoid", "Softmax", "Softplus", "SumPool", "Tanh",
           "elementwise", "glorot", "glorot_normal", "normal", "ones", "parallel", "randn",
           "serial", "shape_dependent", "zeros", "elu", "gelu", "leaky_relu", "log_softmax",
           "logsoftmax", "relu", "selu", "sigmoid", "softmax", "softplus", "standardize"]

Layer = tuple[Callable[..., Any], Callable[..., Any]]
glorot = glorot_normal
# the activation functions stax re-exports from jax.nn (examples call stax.logsoftmax)
elu, gelu, leaky_relu, log_softmax = nnf.elu, nnf.gelu, nnf.leaky_relu, nnf.log_softmax
relu, selu, sigmoid, softmax = nnf.relu, nnf.selu, nnf.sigmoid, nnf.softmax
softplus, standardize = nnf.softplus, nnf.standardize
logsoftmax = log_softmax
randn = normal


def Dense(out_dim: int, W_init: Callable = glorot_normal(), b_init: Callable = normal()
          ) -> Layer:
    """A fully connected layer: inputs @ W + b, W (in, out_dim)."""
    def init_fun(rng: Any, input_shape: tuple) -> tuple[tuple, Any]:
        k1, k2 = random.split(rng)
        return (tuple(input_shape[:-1]) + (out_dim,),
                (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,))))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Tensor:
        w, b = params
        return asarray(inputs) @ w + b
    return init_fun, apply_fun


def _kernel_shape(specs: Sequence[str], out_chan: int, filter_shape: Sequence[int],
                  input_shape: Sequence[int]) -> list[int]:
    lhs_spec, rhs_spec, _ = specs
    sizes = iter(filter_shape)
    return [out_chan if c == "O" else input_shape[lhs_spec.index("C")] if c == "I"
            else next(sizes) for c in rhs_spec]


def _conv_layer(specs: Sequence[str], out_chan: int, filter_shape: Sequence[int],
                W_init: Callable | None, b_init: Callable,
                conv: Callable[[Any, Any], Tensor]) -> Layer:
    lhs_spec, rhs_spec, out_spec = specs
    w_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))

    def init_fun(rng: Any, input_shape: tuple) -> tuple[tuple, Any]:
        kernel = _kernel_shape(specs, out_chan, filter_shape, input_shape)
        probe = [1 if d < 0 else d for d in input_shape]   # -1: a batch size left open
        out = eval_shape(conv, ShapedArray(tuple(probe), dtypes.float32),
                         ShapedArray(tuple(kernel), dtypes.float32)).shape
        out_shape = tuple(input_shape[lhs_spec.index("N")] if c == "N" else d
                          for c, d in zip(out_spec, out))
        k1, k2 = random.split(rng)
        bias_shape = tuple(out_chan if c == "C" else 1 for c in out_spec)
        return out_shape, (w_init(k1, tuple(kernel)), b_init(k2, bias_shape))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Tensor:
        w, b = params
        return conv(inputs, w) + b
    return init_fun, apply_fun


def GeneralConv(dimension_numbers: Sequence[str], out_chan: int, filter_shape: Sequence[int],
                strides: Sequence[int] | None = None, padding: Any = "VALID",
                W_init: Callable | None = None, b_init: Callable = normal(1e-6)) -> Layer:
    """A convolution with JAX's dimension-number strings, e.g. ('NHWC', 'HWIO', 'NHWC')."""
    ones_ = (1,) * len(filter_shape)
    window = tuple(strides or ones_)

    def conv(x: Any, w: Any) -> Tensor:
        return conv_general_dilated(x, w, window, padding, ones_, ones_,
                                    dimension_numbers=tuple(dimension_numbers))
    return _conv_layer(dimension_numbers, out_chan, filter_shape, W_init, b_init, conv)


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))


def _transpose_pads(kernel: int, stride: int, padding: str) -> tuple[int, int]:
    """The padding of the dilated input that makes a transposed convolution's output
    stride times the input (SAME) or that plus the kernel's overhang (VALID)."""
    if padding == "SAME":
        total = kernel + stride - 2
        low = kernel - 1 if stride > kernel - 1 else math.ceil(total / 2)
    elif padding == "VALID":
        total = kernel + stride - 2 + max(kernel - stride, 0)
        low = kernel - 1
    else:
        raise ValueError(f"GeneralConvTranspose: padding must be 'SAME' or 'VALID', got "
                         f"{padding!r}")
    return low, total - low


def GeneralConvTranspose(dimension_numbers: Sequence[str], out_chan: int,
                         filter_shape: Sequence[int], strides: Sequence[int] | None = None,
                         padding: str = "VALID", W_init: Callable | None = None,
                         b_init: Callable = normal(1e-6)) -> Layer:
    """A transposed convolution (JAX's lax.conv_transpose without kernel flipping)."""
    ones_ = (1,) * len(filter_shape)
    window = tuple(strides or ones_)
    rhs_spec = dimension_numbers[1]
    spatial = [i for i, c in enumerate(rhs_spec) if c not in "IO"]

    def conv(x: Any, w: Any) -> Tensor:
        pads = [_transpose_pads(asarray(w).shape[i], s, padding)
                for i, s in zip(spatial, window)]
        return conv_general_dilated(x, w, ones_, pads, window, ones_,
                                    dimension_numbers=tuple(dimension_numbers))
    return _conv_layer(dimension_numbers, out_chan, filter_shape, W_init, b_init, conv)


Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis: Any = (0, 1, 2), epsilon: float = 1e-5, center: bool = True,
              scale: bool = True, beta_init: Callable = zeros, gamma_init: Callable = ones
              ) -> Layer:
    """Normalize over `axis` with the batch's own statistics, then gamma * z + beta."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)

    def init_fun(rng: Any, input_shape: tuple) -> tuple[tuple, Any]:
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axes)
        k1, k2 = random.split(rng)
        return input_shape, (beta_init(k1, shape) if center else (),
                             gamma_init(k2, shape) if scale else ())

    def apply_fun(params: Any, x: Any, **kwargs: Any) -> Tensor:
        beta, gamma = params
        x = asarray(x)
        kept = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
        z = nnf.standardize(x, axes, epsilon=epsilon)
        if scale:
            z = gamma.reshape(kept) * z
        return z + beta.reshape(kept) if center else z
    return init_fun, apply_fun


def elementwise(fun: Callable[..., Any], **fun_kwargs: Any) -> Layer:
    """A parameterless layer applying `fun(inputs, **fun_kwargs)`."""
    def init_fun(rng: Any, input_shape: tuple) -> tuple[tuple, tuple]:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return fun(asarray(inputs), **fun_kwargs)
    return init_fun, apply_fun


Tanh = elementwise(Tensor.tanh)
Relu = elementwise(nnf.relu)
Exp = elementwise(Tensor.exp)
LogSoftmax = elementwise(nnf.log_softmax, axis=-1)
Softmax = elementwise(nnf.softmax, axis=-1)
Softplus = elementwise(nnf.softplus)
Sigmoid = elementwise(nnf.sigmoid)
Elu = elementwise(nnf.elu)
LeakyRelu = elementwise(nnf.leaky_relu)
Selu = elementwise(nnf.selu)
Gelu = elementwise(nnf.gelu)


def _window_pads(shape: Sequence[int], window: Sequence[int], strides: Sequence[int],
                 padding: Any) -> list[tuple[int, int]]:
    if not isinstance(padding, str):
        pads = [tuple(p) for p in padding]
        if len(pads) != len(shape):
            raise ValueError(f"pooling: {len(pads)} padding pairs for a rank-{len(shape)} "
                             f"input")
        return [(int(lo), int(hi)) for lo, hi in pads]
    if padding == "VALID":
        return [(0, 0)] * len(shape)
    if padding != "SAME":
        raise ValueError(f"pooling: padding must be 'VALID', 'SAME' or (low, high) pairs, "
                         f"got {padding!r}")
    pads = []
    for n, w, s in zip(shape, window, strides):
        total = max((-(-n // s) - 1) * s + w - n, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def _reduce_window(x: Tensor, fill: float, combine: Callable[[Tensor, Tensor], Tensor],
                   window: Sequence[int], strides: Sequence[int], padding: Any) -> Tensor:
    """Each window's reduction (windows over every axis; size-1 where not pooled)."""
    pads = _window_pads(x.shape, window, strides, padding)
    if any(lo or hi for lo, hi in pads):
        x = x.pad(tuple(pads), value=fill)
    counts = [(n - w) // s + 1 for n, w, s in zip(x.shape, window, strides)]
    if any(c <= 0 for c in counts):
        raise ValueError(f"pooling: window {tuple(window)} does not fit the padded input "
                         f"{x.shape}")
    out = None
    for offset in itertools.product(*(range(w) for w in window)):
        part = x[tuple(slice(o, o + (c - 1) * s + 1, s)
                       for o, c, s in zip(offset, counts, strides))]
        out = part if out is None else combine(out, part)
    assert out is not None
    return out


def _pooling(kind: str) -> Callable[..., Layer]:
    def PoolingLayer(window_shape: Sequence[int], strides: Sequence[int] | None = None,
                     padding: Any = "VALID", spec: str | None = None) -> Layer:
        """A pooling layer over the spatial axes (all but N and C; NHWC by default)."""
        steps = tuple(strides or (1,) * len(window_shape))
        window, stride = list(window_shape), list(steps)
        fixed = (0, len(window_shape) + 1) if spec is None else \
            (spec.index("N"), spec.index("C"))
        for i in sorted(fixed):
            window.insert(i, 1)
            stride.insert(i, 1)

        def pool(x: Tensor) -> Tensor:
            if kind == "max":
                return _reduce_window(x, -math.inf, Tensor.maximum, window, stride, padding)
            total = _reduce_window(x, 0.0, Tensor.add, window, stride, padding)
            if kind == "sum":
                return total
            spatial = tuple(1 if i in fixed else d for i, d in enumerate(x.shape))
            counts = _reduce_window(Tensor.ones(*spatial, dtype=x.dtype), 0.0, Tensor.add,
                                    window, stride, padding)
            return total / counts

        def init_fun(rng: Any, input_shape: tuple) -> tuple[tuple, tuple]:
            probe = tuple(1 if d < 0 else d for d in input_shape)
            out = eval_shape(pool, ShapedArray(probe, dtypes.float32)).shape
            return tuple(d if d < 0 else o for d, o in zip(input_shape, out)), ()

        def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Tensor:
            return pool(asarray(inputs))
        return init_fun, apply_fun
    PoolingLayer.__name__ = {"max": "MaxPool", "sum": "SumPool", "avg": "AvgPool"}[kind]
    return PoolingLayer


MaxPool = _pooling("max")
SumPool = _pooling("sum")
AvgPool = _pooling("avg")


def _flatten() -> Layer:
    def init_fun(rng: Any, input_shape: tuple) -> tuple[tuple, tuple]:
        return (input_shape[0], math.prod(input_shape[1:])), ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Tensor:
        x = asarray(inputs)
        return x.reshape(x.shape[0], -1)
    return init_fun, apply_fun


Flatten = _flatten()
Identity = elementwise(lambda x: x)


def FanOut(num: int) -> Layer:
    """Copy the input into a list of `num` inputs (for `parallel`)."""
    return (lambda rng, input_shape: ([input_shape] * num, ()),
            lambda params, inputs, **kwargs: [inputs] * num)


FanInSum: Layer = (lambda rng, input_shape: (input_shape[0], ()),
                   lambda params, inputs, **kwargs: functools.reduce(
                       lambda a, b: asarray(a) + b, inputs))


def FanInConcat(axis: int = -1) -> Layer:
    """Concatenate a list of inputs along `axis`."""
    def init_fun(rng: Any, input_shape: Sequence[tuple]) -> tuple[tuple, tuple]:
        ax = axis % len(input_shape[0])
        size = sum(shape[ax] for shape in input_shape)
        first = tuple(input_shape[0])
        return first[:ax] + (size,) + first[ax + 1:], ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Tensor:
        parts = [asarray(x) for x in inputs]
        return parts[0].cat(*parts[1:], dim=axis)
    return init_fun, apply_fun


def Dropout(rate: float, mode: str = "train") -> Layer:
    """Dropout in JAX stax's convention: `rate` is the probability of *keeping* a value;
    kept values are divided by it. Needs `rng=` in train mode."""
    def init_fun(rng: Any, input_shape: tuple) -> tuple[tuple, tuple]:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Tensor:
        x = asarray(inputs)
        if mode != "train":
            return x
        rng = kwargs.get("rng")
        if rng is None:
            raise ValueError("Dropout: apply_fun needs a PRNG key in train mode: call "
                             "apply_fun(params, inputs, rng=key)")
        keep = random.bernoulli(rng, rate, x.shape)
        return keep.where(x / rate, 0)
    return init_fun, apply_fun


def serial(*layers: Layer) -> Layer:
    """Compose layers one after another; each gets its own split of the key."""
    count = len(layers)
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng: Any, input_shape: Any) -> tuple[Any, list]:
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, count) if rng is not None else [None] * count
        for fun, param, layer_rng in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=layer_rng, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers: Layer) -> Layer:
    """Apply layer i to input i of a list of inputs (with FanOut / FanInSum)."""
    count = len(layers)
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng: Any, input_shape: Sequence[Any]) -> tuple[Any, Any]:
        rngs = random.split(rng, count)
        pairs = [init(r, shape) for init, r, shape in zip(init_funs, rngs, input_shape)]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> list:
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, count) if rng is not None else [None] * count
        return [f(p, x, rng=r, **kwargs)
                for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun


def shape_dependent(make_layer: Callable[[tuple], Layer]) -> Layer:
    """A layer built by `make_layer(input_shape)` once the input shape is known."""
    def init_fun(rng: Any, input_shape: tuple) -> tuple[Any, Any]:
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return make_layer(asarray(inputs).shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun
