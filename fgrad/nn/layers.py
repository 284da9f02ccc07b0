"""Layers: Linear, convolutions, normalizations, Embedding, Dropout, Lambda, Sequential.

Every layer is a `Module` (an immutable pytree). Random initialisation takes a keyword-only
PRNG `key=` from `fgrad.random`. Calling conventions:

- plain layers: `y = layer(x)`;
- `Dropout`: `y = drop(x, training=..., key=...)` (the key is needed only when training);
- stateful layers (`BatchNorm`): `y, new_layer = bn(x, training=...)` in both modes; with
  `training=True` the returned layer carries the updated running statistics (in eval mode it
  is the same layer). The step is pure, so it runs under `jit`, `grad` and `vmap`; return the
  new layer out of the jitted step to keep it.
- `Sequential` threads `training` and `key` to the layers that need them and returns
  `(y, new_sequential)` when any layer is stateful, `y` otherwise.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, cast

from fgrad import random
from fgrad.core.dtypes import dtypes
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.nn.module import Module

__all__ = [
    "BatchNorm",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "Dropout",
    "Embedding",
    "GroupNorm",
    "InstanceNorm",
    "Lambda",
    "LayerNorm",
    "LayerNorm2d",
    "Linear",
    "RMSNorm",
    "Sequential",
]


def split_key(key: Tensor, num: int) -> list[Tensor]:
    """`num` independent keys derived from `key`."""
    keys = random.split(key, num)
    return [keys[i] for i in range(num)]


def _make_tuple(value: int | Sequence[int], n: int) -> tuple[int, ...]:
    return (int(value),) * n if isinstance(value, int) else tuple(value)


def _channel_shape(x: Tensor) -> tuple[int, ...]:
    """Broadcast shape of a per-channel (axis 1) vector against `x`."""
    return (1, -1) + (1,) * (x.ndim - 2)


# --------------------------------------------------------------------------- linear / conv


class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features), as torch.nn.Linear.

    Weight and bias are drawn uniformly from ±1/sqrt(in_features).
    """

    weight: Tensor
    bias: Tensor | None

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 key: Tensor) -> None:
        bound = 1 / math.sqrt(in_features)
        wkey, bkey = split_key(key, 2)
        self.weight = Tensor.uniform(out_features, in_features, low=-bound, high=bound, key=wkey)
        self.bias = Tensor.uniform(out_features, low=-bound, high=bound, key=bkey) \
            if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        """Apply the layer to the last axis of `x`."""
        return as_tensor(x).linear(self.weight.T, self.bias)


class Conv2d(Module):
    """2-d (or n-d, by the length of `kernel_size`) convolution, as torch.nn.Conv2d.

    Weight (out_channels, in_channels // groups, *kernel_size) and bias are drawn uniformly
    from ±1/sqrt(in_channels * prod(kernel_size)). padding: int, tuple, or 'same'.
    """

    weight: Tensor
    bias: Tensor | None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...],
                 stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
                 bias: bool = True, *, key: Tensor) -> None:
        name = type(self).__name__
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must both be divisible by groups ({groups})")
        if isinstance(padding, str):
            if padding.lower() != "same":
                raise ValueError(f"{name}: invalid padding string {padding!r}; only 'same' "
                                 f"is supported (or pass ints)")
            if stride != 1:
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 f"convolutions (stride={stride})")
            padding = "same"
        self.kernel_size = _make_tuple(kernel_size, 2)
        self.stride, self.dilation, self.groups, self.padding = stride, dilation, groups, padding
        scale = 1 / math.sqrt(in_channels * math.prod(self.kernel_size))
        wkey, bkey = split_key(key, 2)
        self.weight = Tensor.uniform(out_channels, in_channels // groups, *self.kernel_size,
                                     low=-scale, high=scale, key=wkey)
        self.bias = Tensor.uniform(out_channels, low=-scale, high=scale, key=bkey) \
            if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        """Convolve `x` of shape (N, C_in, *spatial) (or unbatched (C_in, *spatial))."""
        return as_tensor(x).conv2d(self.weight, self.bias, self.groups, self.stride, self.dilation,
                        self.padding)


class Conv1d(Conv2d):
    """1-d convolution over (N, C_in, L), as torch.nn.Conv1d (a Conv2d with a 1-d kernel)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True, *,
                 key: Tensor) -> None:
        super().__init__(in_channels, out_channels, _make_tuple(kernel_size, 1), stride,
                         padding, dilation, groups, bias, key=key)


class ConvTranspose2d(Conv2d):
    """Transposed convolution, as torch.nn.ConvTranspose2d.

    Weight (in_channels, out_channels // groups, *kernel_size); weight and bias are drawn
    uniformly from ±1/sqrt(in_channels * prod(kernel_size)).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, ...],
                 stride: Any = 1, padding: Any = 0, output_padding: Any = 0, dilation: Any = 1,
                 groups: int = 1, bias: bool = True, *, key: Tensor) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, key=key)
        scale = 1 / math.sqrt(in_channels * math.prod(self.kernel_size))
        self.weight = Tensor.uniform(in_channels, out_channels // groups, *self.kernel_size,
                                     low=-scale, high=scale, key=random.fold_in(key, 1))
        self.output_padding = output_padding

    def __call__(self, x: Tensor) -> Tensor:
        """Transposed convolution of `x` of shape (N, C_in, *spatial)."""
        return as_tensor(x).conv_transpose2d(self.weight, self.bias, self.groups, self.stride,
                                  self.dilation, self.padding, self.output_padding)


class ConvTranspose1d(ConvTranspose2d):
    """1-d transposed convolution over (N, C_in, L), as torch.nn.ConvTranspose1d."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, dilation: Any = 1, groups: int = 1,
                 bias: bool = True, *, key: Tensor) -> None:
        super().__init__(in_channels, out_channels, _make_tuple(kernel_size, 1), stride,
                         padding, output_padding, dilation, groups, bias, key=key)


# --------------------------------------------------------------------------- normalization


class BatchNorm(Module):
    """Batch normalization over axis 1 of (N, C, *spatial) inputs, as torch.nn.BatchNorm2d.

    Stateful: `y, new_bn = bn(x, training=True)` normalizes with the batch statistics and
    returns a copy whose running_mean / running_var moved by `momentum` (the variance
    unbiased) and whose num_batches_tracked grew by one; `y, bn = bn(x, training=False)` uses
    the running statistics. num_batches_tracked is a float32 0-d Tensor (not int64 as in
    PyTorch) so that a whole model can be differentiated with `fgrad.grad`.
    """

    stateful = True
    buffers = ("running_mean", "running_var", "num_batches_tracked")
    weight: Tensor | None
    bias: Tensor | None
    running_mean: Tensor | None
    running_var: Tensor | None
    num_batches_tracked: Tensor

    def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True,
                 track_running_stats: bool = True, momentum: float = 0.1) -> None:
        self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
        self.weight = Tensor.ones(sz) if affine else None
        self.bias = Tensor.zeros(sz) if affine else None
        self.num_batches_tracked = Tensor.zeros((), dtype=dtypes.float32)
        self.running_mean = Tensor.zeros(sz) if track_running_stats else None
        self.running_var = Tensor.ones(sz) if track_running_stats else None

    def __call__(self, x: Tensor, *, training: bool) -> tuple[Tensor, BatchNorm]:
        """`(y, new_module)`; see the class docstring."""
        x = as_tensor(x)
        self._check_input(x)
        axes = tuple(i for i in range(x.ndim) if i != 1)
        if training or not self.track_running_stats:
            mean = x.mean(axes)
            centered = x - mean.reshape(_channel_shape(x))
            var = (centered * centered).mean(axes)
        else:
            assert self.running_mean is not None and self.running_var is not None
            mean, var = self.running_mean, self.running_var
        y = x.batchnorm(self.weight, self.bias, mean, (var + self.eps).rsqrt())
        if not (training and self.track_running_stats):
            return y, self
        return y, self._updated(mean.detach(), var.detach(), x.numel() // x.shape[1])

    def _updated(self, mean: Tensor, var: Tensor, n: int) -> BatchNorm:
        m = self.momentum
        assert self.running_mean is not None and self.running_var is not None
        unbiased = var * (n / max(n - 1, 1))
        return self.replace(running_mean=self.running_mean * (1 - m) + mean * m,
                            running_var=self.running_var * (1 - m) + unbiased * m,
                            num_batches_tracked=self.num_batches_tracked + 1)

    def _check_input(self, x: Tensor) -> None:
        known = [t.shape[0] for t in (self.weight, self.running_mean) if t is not None]
        if x.ndim < 2 or (known and x.shape[1] != known[0]):
            want = f"{known[0]} channels" if known else "a channel axis"
            raise ValueError(f"BatchNorm: input must be (N, C, *spatial) with {want} on "
                             f"axis 1, got shape {tuple(x.shape)}")


BatchNorm1d = BatchNorm
BatchNorm2d = BatchNorm


def _affine_channels(x: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    if weight is not None:
        x = x * weight.reshape(_channel_shape(x))
    if bias is not None:
        x = x + bias.reshape(_channel_shape(x))
    return x


class GroupNorm(Module):
    """Normalize (N, C, *spatial) over groups of C // num_groups channels, as torch."""

    weight: Tensor | None
    bias: Tensor | None

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True) -> None:
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.weight = Tensor.ones(num_channels) if affine else None
        self.bias = Tensor.zeros(num_channels) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        """Normalize `x` of shape (N, num_channels, *spatial)."""
        x = as_tensor(x)
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected (N, {self.num_channels}, *spatial), got "
                             f"shape {tuple(x.shape)}")
        groups = x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps)
        return _affine_channels(groups.reshape(x.shape), self.weight, self.bias)


class InstanceNorm(Module):
    """Normalize each channel of each sample of (N, C, *spatial), as torch.nn.InstanceNorm2d
    with affine=True (the reference's default)."""

    weight: Tensor | None
    bias: Tensor | None

    def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True) -> None:
        self.num_features, self.eps = num_features, eps
        self.weight = Tensor.ones(num_features) if affine else None
        self.bias = Tensor.zeros(num_features) if affine else None

    def __call__(self, x: Tensor) -> Tensor:
        """Normalize `x` of shape (N, num_features, *spatial)."""
        x = as_tensor(x)
        if x.ndim < 3 or x.shape[1] != self.num_features:
            raise ValueError(f"InstanceNorm: expected (N, {self.num_features}, *spatial), got "
                             f"shape {tuple(x.shape)}")
        flat = x.reshape(x.shape[0], self.num_features, -1).layernorm(eps=self.eps)
        return _affine_channels(flat.reshape(x.shape), self.weight, self.bias)


class LayerNorm(Module):
    """Normalize over the trailing `normalized_shape` axes, as torch.nn.LayerNorm."""

    weight: Tensor | None
    bias: Tensor | None

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5,
                 elementwise_affine: bool = True) -> None:
        self.normalized_shape = _make_tuple(normalized_shape, 1)
        self.axis = tuple(-1 - i for i in range(len(self.normalized_shape)))
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = Tensor.ones(*self.normalized_shape) if elementwise_affine else None
        self.bias = Tensor.zeros(*self.normalized_shape) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        """Normalize `x` whose trailing axes are `normalized_shape`."""
        n, x = len(self.normalized_shape), as_tensor(x)
        if tuple(x.shape[x.ndim - n:]) != self.normalized_shape or x.ndim < n:
            raise ValueError(f"{type(self).__name__}: input shape {tuple(x.shape)} does not end "
                             f"with normalized_shape {self.normalized_shape}")
        x = x.layernorm(self.axis, self.eps)
        if self.weight is not None:
            x = x * self.weight
        return x if self.bias is None else x + self.bias


class LayerNorm2d(LayerNorm):
    """LayerNorm over the channel axis of (N, C, H, W) inputs."""

    def __call__(self, x: Tensor) -> Tensor:
        """Normalize each pixel of `x` (N, C, H, W) across its C channels."""
        return super().__call__(as_tensor(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class RMSNorm(Module):
    """x / sqrt(mean(x**2, -1) + eps) * weight, as torch.nn.RMSNorm(dim)."""

    weight: Tensor

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        self.eps, self.weight = eps, Tensor.ones(dim)

    def __call__(self, x: Tensor) -> Tensor:
        """Normalize the last axis of `x` (computed in float32 for 16-bit inputs)."""
        x = as_tensor(x)
        xf = x.float() if x.dtype in (dtypes.half, dtypes.bfloat16) else x
        normed = xf * (xf.square().mean(-1, keepdim=True) + self.eps).rsqrt()
        return normed.cast(x.dtype) * self.weight


# --------------------------------------------------------------------------- misc


class Embedding(Module):
    """A lookup table: row i of weight (vocab_size, embed_size) for each index i.

    The weight is Glorot-uniform initialised, as the reference.
    """

    weight: Tensor

    def __init__(self, vocab_size: int, embed_size: int, *, key: Tensor) -> None:
        self.vocab_sz, self.embed_sz = vocab_size, embed_size
        self.weight = Tensor.glorot_uniform(vocab_size, embed_size, key=key)

    def __call__(self, idx: Tensor) -> Tensor:
        """Embeddings of integer indices `idx`, shape idx.shape + (embed_size,)."""
        if not isinstance(idx, Tensor):
            idx = Tensor(idx)
        if not dtypes.is_int(idx.dtype):
            raise TypeError(f"Embedding: indices must be an integer Tensor, got "
                            f"{idx.dtype.name}; cast with .cast(dtypes.int32)")
        return self.weight[idx]


class Dropout(Module):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) when training.

    `drop(x, training=True, key=k)` needs a PRNG key; `drop(x, training=False)` is identity.
    """

    needs_key = True

    def __init__(self, p: float = 0.5) -> None:
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout: p={p} is out of range [0, 1]")
        self.p = p

    def __call__(self, x: Tensor, *, training: bool, key: Tensor | None = None) -> Tensor:
        """Apply dropout (training) or nothing (evaluation)."""
        x = as_tensor(x)
        if not training or self.p == 0:
            return x
        if key is None:
            raise ValueError("Dropout: training=True needs a PRNG key, e.g. "
                             "drop(x, training=True, key=fgrad.random.key(0))")
        return x.dropout(self.p, key=key)


class Lambda(Module):
    """Wrap a plain function (e.g. Tensor.relu) as a layer; the function is static."""

    def __init__(self, fn: Callable[[Tensor], Tensor]) -> None:
        self.fn = fn

    def __call__(self, x: Tensor) -> Tensor:
        """fn(x)."""
        return self.fn(as_tensor(x))


class Sequential(Module):
    """Layers applied in order; plain callables are wrapped in `Lambda`.

    `seq(x)` returns y when no layer is stateful. If some layer needs a mode (BatchNorm,
    Dropout) pass `training=`; Dropout layers draw from `key=` (split per layer). If some
    layer is stateful the call returns `(y, new_sequential)` in both modes.
    """

    layers: tuple[Module, ...]

    def __init__(self, *layers: Callable[..., Any]) -> None:
        for i, layer in enumerate(layers):
            if not callable(layer):
                raise TypeError(f"Sequential: layer {i} is a {type(layer).__name__}, which is "
                                f"not callable")
        self.layers = tuple(x if isinstance(x, Module) else Lambda(x) for x in layers)

    @property
    def stateful(self) -> bool:  # type: ignore[override]  # a property over a ClassVar
        """Whether some layer returns an updated module (so this one does too)."""
        return any(layer.stateful for layer in self.layers)

    @property
    def needs_key(self) -> bool:  # type: ignore[override]  # a property over a ClassVar
        """Whether some layer draws random numbers when training."""
        return any(layer.needs_key for layer in self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, i: int) -> Module:
        return self.layers[i]

    def __call__(self, x: Tensor, *, training: bool | None = None,
                 key: Tensor | None = None) -> Any:
        """Thread `x` through the layers; see the class docstring for the result."""
        if training is None and (self.stateful or self.needs_key):
            raise ValueError("Sequential: it holds BatchNorm/Dropout-like layers, so pass "
                             "training=True or training=False")
        n_random = sum(layer.needs_key for layer in self.layers)
        keys = iter(split_key(key, n_random) if training and key is not None and n_random
                    else [None] * n_random)
        new_layers, x = [], as_tensor(x)
        for layer in self.layers:
            kwargs: dict[str, Any] = {}
            if layer.stateful or layer.needs_key:
                kwargs["training"] = training
            if layer.needs_key:
                kwargs["key"] = next(keys)
            out = cast(Callable[..., Any], layer)(x, **kwargs)
            x, layer = out if layer.stateful else (out, layer)
            new_layers.append(layer)
        return (x, self.replace(layers=tuple(new_layers))) if self.stateful else x
