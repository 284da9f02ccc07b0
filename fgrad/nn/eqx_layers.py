"""Equinox's layers (`eqx.nn`): they act on ONE example, without a batch axis; vmap them.

`fgrad.nn.nn` is this module, so that `import fgrad.nn as eqx` gives `eqx.nn.Linear`,
`eqx.nn.MLP`, ... with Equinox's signatures and initialisations. fgrad's own layers
(`fgrad.nn.Linear`, ...) keep torch's signatures and accept batched inputs.

With the same key (`fgrad.random.key(0)` for `jax.random.PRNGKey(0)`) the uniform-drawn
parameters (Linear, MLP, Conv) are Equinox's bit for bit, Embedding's normal ones to float32
round-off. Differences: no `state` argument (no `eqx.nn.State`, BatchNorm), Sequential also
calls plain functions (without `key=`), and a Module's Python-number fields (Dropout's `p`)
are static structure here, not leaves.
The end of the file holds `tree_serialise_leaves` / `tree_deserialise_leaves` (Equinox's
checkpoint format, exported from fgrad.nn).
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import pathlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, cast

import numpy as np

from fgrad import random
from fgrad.core import tree_util
from fgrad.core.dtypes import dtypes, to_dtype
from fgrad.core.ir import ShapedArray
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.nn.functions import relu
from fgrad.nn.module import Module, field

__all__ = ["Conv", "Conv1d", "Conv2d", "Conv3d", "Dropout", "Embedding", "Identity", "Lambda",
           "LayerNorm", "Linear", "MLP", "Sequential", "inference_mode"]


def _uniform(key: Tensor, shape: tuple[int, ...], dtype: Any, lim: float) -> Tensor:
    """Equinox's `default_init`: uniform on [-lim, lim). The affine map from [0, 1) is
    rounded once (as XLA's fused multiply-add does), so the values are jax.random's."""
    dtype = dtypes.float32 if dtype is None else to_dtype(dtype)
    if dtype != dtypes.float32:
        return random.uniform(key, shape, dtype, -lim, lim)
    lo, hi = float(np.float32(-lim)), float(np.float32(lim))
    unit = random.uniform(key, shape, dtype).cast(dtypes.float64)
    return (unit * (hi - lo) + lo).cast(dtype).maximum(lo)


def _identity(x: Any) -> Any:
    return x


# --------------------------------------------------------------------------- linear


class Linear(Module):
    """`weight @ x + bias` for `x` of shape (in_features,) (or () with "scalar").

    Weight (out_features, in_features) and bias (out_features,) are drawn uniformly from
    ±1/sqrt(in_features), as `eqx.nn.Linear`. Extra leading axes are accepted too.
    """

    weight: Tensor
    bias: Tensor | None
    in_features: int | str = field(static=True)
    out_features: int | str = field(static=True)
    use_bias: bool = field(static=True)

    def __init__(self, in_features: int | str, out_features: int | str, use_bias: bool = True,
                 dtype: Any = None, *, key: Tensor) -> None:
        wkey, bkey = random.split(key, 2)
        n_in = 1 if in_features == "scalar" else int(in_features)
        n_out = 1 if out_features == "scalar" else int(out_features)
        lim = 1.0 if n_in == 0 else 1 / math.sqrt(n_in)
        self.weight = _uniform(wkey, (n_out, n_in), dtype, lim)
        self.bias = _uniform(bkey, (n_out,), dtype, lim) if use_bias else None
        self.in_features, self.out_features, self.use_bias = in_features, out_features, use_bias

    def __call__(self, x: Tensor, *, key: Tensor | None = None) -> Tensor:
        """`x` (in_features,) -> (out_features,); `key` is ignored."""
        x = as_tensor(x)
        if self.in_features == "scalar":
            if x.shape != ():
                raise ValueError(f"Linear: in_features='scalar' needs a 0-d input, got "
                                 f"shape {tuple(x.shape)}")
            x = x.reshape(1)
        y = x.linear(self.weight.T, self.bias)
        return y.reshape(()) if self.out_features == "scalar" else y


class Identity(Module):
    """Returns its input; the constructor ignores its arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, x: Any, *, key: Tensor | None = None) -> Any:
        """`x` unchanged."""
        return x


class MLP(Module):
    """Linear layers with `activation` between them (`eqx.nn.MLP`): `depth` hidden layers
    of `width_size`, so depth + 1 Linear layers (depth=0: one Linear)."""

    layers: tuple[Linear, ...]
    activation: Callable[[Tensor], Tensor]
    final_activation: Callable[[Tensor], Tensor]
    use_bias: bool = field(static=True)
    use_final_bias: bool = field(static=True)
    in_size: int | str = field(static=True)
    out_size: int | str = field(static=True)
    width_size: int = field(static=True)
    depth: int = field(static=True)

    def __init__(self, in_size: int | str, out_size: int | str, width_size: int, depth: int,
                 activation: Callable[[Tensor], Tensor] = relu,
                 final_activation: Callable[[Tensor], Tensor] = _identity,
                 use_bias: bool = True, use_final_bias: bool = True, dtype: Any = None, *,
                 key: Tensor) -> None:
        keys = random.split(key, depth + 1)
        if depth == 0:
            layers = [Linear(in_size, out_size, use_final_bias, dtype, key=keys[0])]
        else:
            layers = [Linear(in_size, width_size, use_bias, dtype, key=keys[0])]
            layers += [Linear(width_size, width_size, use_bias, dtype, key=keys[i])
                       for i in range(1, depth)]
            layers.append(Linear(width_size, out_size, use_final_bias, dtype, key=keys[depth]))
        self.layers = tuple(layers)
        self.activation, self.final_activation = activation, final_activation
        self.use_bias, self.use_final_bias = use_bias, use_final_bias
        self.in_size, self.out_size = in_size, out_size
        self.width_size, self.depth = width_size, depth

    def __call__(self, x: Tensor, *, key: Tensor | None = None) -> Tensor:
        """`x` (in_size,) -> (out_size,); `key` is ignored."""
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.final_activation(self.layers[-1](x))


# --------------------------------------------------------------------------- containers


class Sequential(Module):
    """Call `layers` in order (`eqx.nn.Sequential([...])`); a given `key` is split among
    them. Modules get `key=`; plain functions are called with `x` alone."""

    layers: tuple

    def __init__(self, layers: Sequence[Callable[..., Any]]) -> None:
        if callable(layers) and not isinstance(layers, (list, tuple)):
            raise TypeError("Sequential takes a list of layers, as in Equinox: "
                            "Sequential([a, b]) (fgrad.nn.Sequential takes them as *layers)")
        self.layers = tuple(layers)

    def __call__(self, x: Any, *, key: Tensor | None = None) -> Any:
        """Thread `x` through the layers."""
        keys: list[Any] = [None] * len(self.layers)
        if key is not None and self.layers:
            split = random.split(key, len(self.layers))
            keys = [split[i] for i in range(len(self.layers))]
        for layer, k in zip(self.layers, keys):
            call = cast(Callable[..., Any], layer)
            x = call(x, key=k) if isinstance(layer, Module) else call(x)
        return x

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return Sequential(self.layers[i])
        return self.layers[i]

    def __iter__(self) -> Any:
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)


class Lambda(Module):
    """Wrap a function as a layer (so `Sequential` can pass it `key=`)."""

    fn: Callable[[Any], Any]

    def __call__(self, x: Any, *, key: Tensor | None = None) -> Any:
        """`fn(x)`."""
        return self.fn(x)


class Dropout(Module):
    """Zero each element with probability `p` and scale the rest by 1 / (1 - p), unless in
    inference mode (`inference=True`, here or per call) or p == 0; needs `key=` otherwise."""

    p: float
    inference: bool

    def __init__(self, p: float = 0.5, inference: bool = False) -> None:
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout: p={p} is out of range [0, 1]")
        self.p, self.inference = p, inference

    def __call__(self, x: Tensor, *, key: Tensor | None = None,
                 inference: bool | None = None) -> Tensor:
        """Apply dropout to `x`."""
        x = as_tensor(x)
        if (self.inference if inference is None else inference) or self.p == 0:
            return x
        if key is None:
            raise RuntimeError("Dropout requires a key when not in inference mode: "
                               "dropout(x, key=k), or Dropout(p, inference=True)")
        q = 1.0 - self.p
        return random.bernoulli(key, q, x.shape).where(x / q, 0)


def inference_mode(model: Any, value: bool = True) -> Any:
    """`model` with the `inference` field of every sub-module (Dropout) set to `value`."""
    def visit(node: Any) -> Any:
        if isinstance(node, Module):
            changed = {n: value for n in ("inference",) if n in vars(node)}
            node = node.replace(**changed) if changed else node
        children, treedef = tree_util.tree_flatten(node, is_leaf=lambda x: x is not node)
        return node if treedef.is_leaf() else treedef.unflatten([visit(c) for c in children])
    return visit(model)


# --------------------------------------------------------------------------- normalization


class LayerNorm(Module):
    """Normalize `x` of shape exactly `shape` over all its axes, then `weight * x + bias`
    (`eqx.nn.LayerNorm`); computed in at least float32."""

    shape: tuple[int, ...] = field(static=True)
    eps: float = field(static=True)
    use_weight: bool = field(static=True)
    use_bias: bool = field(static=True)
    weight: Tensor | None
    bias: Tensor | None

    def __init__(self, shape: int | Sequence[int], eps: float = 1e-5, use_weight: bool = True,
                 use_bias: bool = True, dtype: Any = None) -> None:
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.eps, self.use_weight, self.use_bias = eps, use_weight, use_bias
        dtype = dtypes.float32 if dtype is None else dtype
        self.weight = Tensor.ones(*self.shape, dtype=dtype) if use_weight else None
        self.bias = Tensor.zeros(*self.shape, dtype=dtype) if use_bias else None

    def __call__(self, x: Tensor, *, key: Tensor | None = None) -> Tensor:
        """Normalize `x`; its shape must be `shape` (vmap over batch axes)."""
        x = as_tensor(x)
        if tuple(x.shape) != self.shape:
            raise ValueError(f"LayerNorm(shape)(x) needs x.shape == shape, got shape="
                             f"{self.shape} and x.shape={tuple(x.shape)}; use "
                             f"eqx.filter_vmap(layer_norm)(x) for batches")
        orig = x.dtype
        xf = x if x.dtype in (dtypes.float32, dtypes.float64) else x.cast(dtypes.float32)
        mean = xf.mean()
        var = ((xf - mean) * (xf - mean)).mean().maximum(0.0)
        out = (xf - mean) * (var + self.eps).rsqrt()
        if self.weight is not None:
            out = self.weight.cast(out.dtype) * out
        if self.bias is not None:
            out = out + self.bias.cast(out.dtype)
        return out.cast(orig)


class Embedding(Module):
    """A lookup table (`eqx.nn.Embedding`): `weight[x]` for an integer index `x`; the
    weight (num_embeddings, embedding_size) is drawn from a standard normal, or given."""

    weight: Tensor

    def __init__(self, num_embeddings: int | None = None, embedding_size: int | None = None,
                 weight: Tensor | None = None, dtype: Any = None, *,
                 key: Tensor | None = None) -> None:
        if weight is None:
            if num_embeddings is None or embedding_size is None or key is None:
                raise ValueError("Embedding: pass num_embeddings, embedding_size and key=, "
                                 "or weight=")
            dtype = dtypes.float32 if dtype is None else dtype
            weight = random.normal(key, (num_embeddings, embedding_size), dtype)
        self.weight = as_tensor(weight)

    def __call__(self, x: Tensor, *, key: Tensor | None = None) -> Tensor:
        """The row of index `x` (a 0-d integer)."""
        x = as_tensor(x)
        if x.ndim != 0 or not dtypes.is_int(x.dtype):
            raise ValueError(f"Embedding: the index must be a 0-d integer (vmap over many), "
                             f"got shape {tuple(x.shape)} {x.dtype.name}")
        return self.weight[x]


# --------------------------------------------------------------------------- convolution


def _ntuple(value: Any, n: int, what: str) -> tuple:
    if isinstance(value, Sequence) and not isinstance(value, str):
        if len(value) != n:
            raise ValueError(f"Conv: {what} {tuple(value)} must have {n} entries")
        return tuple(value)
    return (value,) * n


def _padding(padding: Any, n: int) -> str | tuple[tuple[int, int], ...]:
    if isinstance(padding, str):
        if padding.upper() not in ("SAME", "SAME_LOWER", "VALID"):
            raise ValueError("Conv: a padding string must be 'SAME', 'SAME_LOWER' or 'VALID'")
        return padding.upper()
    return tuple((p, p) if isinstance(p, int) else (int(p[0]), int(p[1]))
                 for p in _ntuple(padding, n, "padding"))


_PAD_MODES = {"ZEROS": "constant", "REFLECT": "reflect", "REPLICATE": "replicate",
              "CIRCULAR": "circular"}


class Conv(Module):
    """An n-d convolution of ONE input (in_channels, *spatial) (`eqx.nn.Conv`).

    Weight (out, in / groups, *kernel), bias (out, 1, ..., 1), both drawn uniformly from
    ±1/sqrt(in / groups * prod(kernel)). `padding`: int, one int or (lo, hi) per axis,
    'SAME', 'SAME_LOWER' or 'VALID'; `padding_mode` ZEROS, REFLECT, REPLICATE or CIRCULAR.
    """

    num_spatial_dims: int = field(static=True)
    weight: Tensor
    bias: Tensor | None
    in_channels: int = field(static=True)
    out_channels: int = field(static=True)
    kernel_size: tuple[int, ...] = field(static=True)
    stride: tuple[int, ...] = field(static=True)
    padding: Any = field(static=True)
    dilation: tuple[int, ...] = field(static=True)
    groups: int = field(static=True)
    use_bias: bool = field(static=True)
    padding_mode: str = field(static=True)

    def __init__(self, num_spatial_dims: int, in_channels: int, out_channels: int,
                 kernel_size: int | Sequence[int], stride: int | Sequence[int] = 1,
                 padding: Any = 0, dilation: int | Sequence[int] = 1, groups: int = 1,
                 use_bias: bool = True, padding_mode: str = "ZEROS", dtype: Any = None, *,
                 key: Tensor) -> None:
        n = num_spatial_dims
        self.kernel_size = _ntuple(kernel_size, n, "kernel_size")
        if in_channels % groups:
            raise ValueError(f"Conv: in_channels ({in_channels}) must be divisible by groups "
                             f"({groups})")
        if padding_mode.upper() not in _PAD_MODES:
            raise ValueError(f"Conv: padding_mode must be one of {sorted(_PAD_MODES)}")
        wkey, bkey = random.split(key, 2)
        lim = 1 / math.sqrt(in_channels // groups * math.prod(self.kernel_size))
        self.num_spatial_dims = n
        self.weight = _uniform(wkey, (out_channels, in_channels // groups) + self.kernel_size,
                               dtype, lim)
        self.bias = _uniform(bkey, (out_channels,) + (1,) * n, dtype, lim) if use_bias else None
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.stride, self.dilation = _ntuple(stride, n, "stride"), _ntuple(dilation, n, "dilation")
        self.padding, self.use_bias = _padding(padding, n), use_bias
        self.padding_mode = padding_mode.upper()

    def _pads(self, spatial: tuple[int, ...]) -> list[tuple[int, int]]:
        if not isinstance(self.padding, str):
            return list(self.padding)
        pads = []
        for size, k, s, d in zip(spatial, self.kernel_size, self.stride, self.dilation):
            total = 0 if self.padding == "VALID" else \
                max((-(-size // s) - 1) * s + d * (k - 1) + 1 - size, 0)
            lo = total // 2 if self.padding == "SAME" else total - total // 2
            pads.append((lo, total - lo))
        return pads

    def __call__(self, x: Tensor, *, key: Tensor | None = None) -> Tensor:
        """Convolve `x` of shape (in_channels, *spatial); `key` is ignored."""
        x = as_tensor(x)
        if x.ndim != self.num_spatial_dims + 1:
            raise ValueError(f"Conv: the input must have rank {self.num_spatial_dims + 1} "
                             f"(channels, *spatial), got shape {tuple(x.shape)}; vmap "
                             f"over batches")
        pads = self._pads(tuple(x.shape[1:]))
        if self.padding_mode != "ZEROS":
            x = x.pad([(0, 0)] + pads, mode=_PAD_MODES[self.padding_mode])
            pads = [(0, 0)] * len(pads)
        flat = tuple(p for pair in reversed(pads) for p in pair)
        y = x.conv2d(self.weight, None, self.groups, self.stride, self.dilation, flat)
        return y if self.bias is None else y + self.bias


class Conv1d(Conv):
    """`Conv` with one spatial axis: input (in_channels, length)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int],
                 stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
                 use_bias: bool = True, padding_mode: str = "ZEROS", dtype: Any = None, *,
                 key: Tensor) -> None:
        super().__init__(1, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, use_bias, padding_mode, dtype, key=key)


class Conv2d(Conv):
    """`Conv` with two spatial axes: input (in_channels, height, width)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int],
                 stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
                 use_bias: bool = True, padding_mode: str = "ZEROS", dtype: Any = None, *,
                 key: Tensor) -> None:
        super().__init__(2, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, use_bias, padding_mode, dtype, key=key)


class Conv3d(Conv):
    """`Conv` with three spatial axes: input (in_channels, depth, height, width)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int],
                 stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
                 use_bias: bool = True, padding_mode: str = "ZEROS", dtype: Any = None, *,
                 key: Tensor) -> None:
        super().__init__(3, in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, use_bias, padding_mode, dtype, key=key)


# --------------------------------------------------------------------------- serialisation
# (exported as fgrad.nn.tree_serialise_leaves / tree_deserialise_leaves, as eqx's)


def default_serialise_filter_spec(f: BinaryIO, x: Any) -> None:
    """Write array and Python-number leaves with `np.save`; skip the rest (Equinox's)."""
    if isinstance(x, Tensor):
        np.save(f, x.numpy())
    elif isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)):
        np.save(f, np.asarray(x))


def default_deserialise_filter_spec(f: BinaryIO, x: Any) -> Any:
    """Read what `default_serialise_filter_spec` wrote for a leaf like `x`."""
    if isinstance(x, (Tensor, ShapedArray)):
        return Tensor(np.load(f, allow_pickle=False))
    if isinstance(x, (np.ndarray, np.generic)):
        return np.load(f, allow_pickle=False)
    if isinstance(x, (bool, int, float, complex)):
        return type(x)(np.load(f, allow_pickle=False).item())
    return x


@contextlib.contextmanager
def _opened(path_or_file: Any, mode: str) -> Iterator[BinaryIO]:
    if isinstance(path_or_file, (str, os.PathLike)):
        path = pathlib.Path(path_or_file)
        with open(path.with_suffix(".eqx") if not path.suffix else path, mode) as f:
            yield cast(BinaryIO, f)
    else:
        yield path_or_file


def _per_spec(filter_spec: Any, tree: Any) -> tuple[list[Any], list[Any], Any]:
    specs, spec_def = tree_util.tree_flatten(filter_spec)
    return specs, spec_def.flatten_up_to(tree), spec_def


def tree_serialise_leaves(path_or_file: Any, pytree: Any,
                          filter_spec: Any = default_serialise_filter_spec,
                          is_leaf: Callable[[Any], bool] | None = None) -> None:
    """Write the leaves of `pytree` in order to a file (a path gets the suffix ".eqx" if it
    has none), Equinox's format: one `np.save` per array or Python-number leaf. Files
    interchange with Equinox when both models have the same leaves (fgrad keeps Python
    numbers in Module fields as structure, Equinox as leaves: Dropout differs)."""
    with _opened(path_or_file, "wb") as f:
        specs, subtrees, _ = _per_spec(filter_spec, pytree)
        for spec, sub in zip(specs, subtrees):
            for leaf in tree_util.tree_leaves(sub, is_leaf):
                spec(f, leaf)


def tree_deserialise_leaves(path_or_file: Any, like: Any,
                            filter_spec: Any = default_deserialise_filter_spec,
                            is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """`like` with its leaves read back from what `tree_serialise_leaves` wrote; a leaf
    whose shape or dtype differs from `like`'s raises a RuntimeError naming its path."""
    with _opened(path_or_file, "rb") as f:
        specs, subtrees, spec_def = _per_spec(filter_spec, like)
        out = spec_def.unflatten(
            tree_util.tree_map(functools.partial(spec, f), sub, is_leaf=is_leaf)
            for spec, sub in zip(specs, subtrees))
    new = tree_util.tree_leaves_with_path(out, is_leaf)
    for (path, got), old in zip(new, tree_util.tree_leaves(like, is_leaf)):
        want = (tuple(old.shape), old.dtype) if isinstance(old, (Tensor, ShapedArray, np.ndarray)) \
            else None
        if want is not None and (tuple(got.shape), got.dtype) != want:
            raise RuntimeError(f"tree_deserialise_leaves: the leaf at "
                               f"{tree_util.keystr(path) or '<root>'} is {tuple(got.shape)} "
                               f"{got.dtype} on disk but {want[0]} {want[1]} in `like`")
    return out
