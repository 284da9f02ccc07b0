"""Convolution as patches times weight; pooling as a reduction over window taps.

conv2d contracts `conv_patches` (prims/patches.py: (N, C, *S) -> (N, C, K, *out), every
kernel window) with the weight in one `dot_general`; the llvm backend's GEMM reads the
patches straight from the image (implicit GEMM). `windows(x, kernel, stride, dilation)` is
the same windows built from movement primitives (one strided `slice_` per kernel tap,
stacked), which pooling reduces over and backends expand conv_patches into. No convolution
rule is needed: grad/vmap/jit see movement primitives and one contraction.
"""
from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Sequence, cast

from fgrad.core import dtypes as _dt
from fgrad.core import prims as P
from fgrad.core.errors import ArgumentError
from fgrad.core.prims._util import fmt_shape
from fgrad.core.prims.patches import window_counts

if TYPE_CHECKING:
    from fgrad.core.tensor import Tensor

Pads = tuple[tuple[int, int], ...]


def make_tuple(value: int | Sequence[int], n: int, op: str, name: str) -> tuple[int, ...]:
    """`value` as an n-tuple of ints: an int is repeated, a sequence must have length n."""
    if isinstance(value, int):
        return (int(value),) * n
    out = tuple(int(v) for v in value)
    if len(out) != n:
        raise ArgumentError(f"{op}: {name} must be an int or a sequence of {n} ints (one per "
                            f"spatial dimension), got {tuple(value)}")
    return out


def resolve_padding(padding: int | Sequence[int], n: int, op: str) -> Pads:
    """(lo, hi) per spatial axis from an int, n ints (symmetric per axis), or 2n ints in the
    flat form (last_lo, last_hi, second_last_lo, second_last_hi, ...), i.e. (left, right,
    top, bottom) for 2-d."""
    if isinstance(padding, int):
        return ((int(padding), int(padding)),) * n
    flat = tuple(int(p) for p in padding)
    if len(flat) == n:
        return tuple((p, p) for p in flat)
    if len(flat) == 2 * n:
        return tuple((flat[2 * i], flat[2 * i + 1]) for i in reversed(range(n)))
    raise ArgumentError(f"{op}: padding must be an int, {n} ints (one per spatial dimension) or "
                        f"{2 * n} ints (left, right, top, bottom, ...), got {tuple(padding)}")


def fitted_output_shape(spatial: Sequence[int], kernel: Sequence[int], stride: Sequence[int],
                        dilation: Sequence[int], op: str) -> tuple[int, ...]:
    """Window count per axis of an already padded input (`window_counts`), or an
    ArgumentError naming `op` when the kernel does not fit."""
    out = window_counts(spatial, kernel, stride, dilation)
    if any(o < 1 for o in out) or any(k < 1 for k in kernel):
        raise ArgumentError(f"{op}: kernel {tuple(kernel)} with dilation {tuple(dilation)} "
                            f"does not fit the (padded) input of spatial shape "
                            f"{fmt_shape(spatial)}")
    return out


def tap_slices(x: "Tensor", kernel: Sequence[int], stride: Sequence[int],
               dilation: Sequence[int], op: str) -> list["Tensor"]:
    """(..., *S) -> one (..., *out) strided slice per kernel tap, row-major over the taps."""
    n = len(kernel)
    lead = x.shape[:-n]
    out = fitted_output_shape(x.shape[-n:], kernel, stride, dilation, op)
    taps = []
    for offset in itertools.product(*(range(k) for k in kernel)):
        start = tuple(o * d for o, d in zip(offset, dilation, strict=True))
        limit = tuple(s + (m - 1) * st + 1 if m else s
                      for s, m, st in zip(start, out, stride, strict=True))
        taps.append(P.slice_(x, (0,) * len(lead) + start, lead + limit,
                             (1,) * len(lead) + tuple(stride)))
    return taps


def windows(x: "Tensor", kernel: Sequence[int], stride: Sequence[int],
            dilation: Sequence[int], op: str) -> "Tensor":
    """(..., *S) -> (..., prod(kernel), *out): each kernel tap of every window, row-major."""
    n = len(kernel)
    lead = x.shape[:-n]
    taps = tap_slices(x, kernel, stride, dilation, op)
    out = taps[0].shape[len(lead):]
    # a new unit axis by broadcast, not reshape: the fused kernel then indexes each tap
    # directly (a reshape's flatten-and-split left a division per element)
    keep = tuple(range(len(lead))) + tuple(range(len(lead) + 1, len(lead) + 1 + n))
    return P.concatenate([P.broadcast_in_dim(t, lead + (1,) + out, keep) for t in taps],
                         len(lead))


def window_sums(x: "Tensor", kernel: Sequence[int], stride: Sequence[int],
                dilation: Sequence[int], op: str) -> "Tensor":
    """(..., *S) -> (..., *out): the sum over every window, added slice by slice (a balanced
    tree of adds: one elementwise kernel however many taps, where the stacked windows were
    a concatenate of one operand per tap, which a kernel takes at most 16 of)."""
    sums = tap_slices(x, kernel, stride, dilation, op)
    while len(sums) > 1:
        sums = [sums[i] + sums[i + 1] if i + 1 < len(sums) else sums[i]
                for i in range(0, len(sums), 2)]
    return sums[0]


def pad_spatial(x: "Tensor", pads: Pads, value: Any = 0) -> "Tensor":
    """Pad (or crop, for negative entries) the trailing len(pads) axes of `x`."""
    lead = ((0, 0, 0),) * (x.ndim - len(pads))
    return P.pad(x, lead + tuple((lo, hi, 0) for lo, hi in pads), value)


def _same_padding(kernel: Sequence[int], stride: Sequence[int],
                  dilation: Sequence[int]) -> Pads:
    if any(s != 1 for s in stride):
        raise ArgumentError(f"conv2d: padding='same' needs stride 1, got stride {tuple(stride)}; "
                            f"pass explicit padding instead")
    totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
    return tuple((t // 2, t - t // 2) for t in totals)


def _conv_padding(padding: Any, kernel: tuple[int, ...], stride: tuple[int, ...],
                  dilation: tuple[int, ...]) -> Pads:
    if padding == "valid":
        return ((0, 0),) * len(kernel)
    if padding == "same":
        return _same_padding(kernel, stride, dilation)
    if isinstance(padding, str):
        raise ArgumentError(f"conv2d: padding must be 'valid', 'same', an int or a sequence of "
                            f"ints, got {padding!r}")
    return resolve_padding(padding, len(kernel), "conv2d")


def _check_conv(x: "Tensor", weight: "Tensor", bias: "Tensor | None", groups: int) -> None:
    n = weight.ndim - 2
    where = f"input {fmt_shape(x.shape)}, weight {fmt_shape(weight.shape)}"
    if n < 1:
        raise ArgumentError(f"conv2d: weight must be (out_channels, in_channels/groups, *kernel) "
                            f"with at least one spatial axis, got {fmt_shape(weight.shape)}")
    if x.ndim != n + 2:
        raise ArgumentError(f"conv2d: a {n}-d convolution needs a {n + 2}-d input (batch, "
                            f"channels, *spatial) or {n + 1}-d unbatched input; got {where}")
    if groups < 1 or weight.shape[0] % groups:
        raise ArgumentError(f"conv2d: out_channels {weight.shape[0]} is not divisible by "
                            f"groups={groups} ({where})")
    if x.shape[1] != weight.shape[1] * groups:
        raise ArgumentError(f"conv2d: input has {x.shape[1]} channels but weight expects "
                            f"in_channels/groups * groups = {weight.shape[1]} * {groups} = "
                            f"{weight.shape[1] * groups} ({where})")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ArgumentError(f"conv2d: bias must have shape ({weight.shape[0]},) to match "
                            f"out_channels, got {fmt_shape(bias.shape)}")


def _cast_operands(x: "Tensor", weight: "Tensor", bias: "Tensor | None",
                   dtype: Any) -> tuple["Tensor", "Tensor", "Tensor | None"]:
    if dtype is None:
        common = _dt.promote(x.dtype, weight.dtype)
        if bias is not None:
            common = _dt.promote(common, bias.dtype)
    else:
        common = _dt.to_dtype(dtype)
    return x.cast(common), weight.cast(common), None if bias is None else bias.cast(common)


def _add_bias(out: "Tensor", bias: "Tensor | None") -> "Tensor":
    if bias is None:
        return out
    return out + bias.reshape((1, bias.shape[0]) + (1,) * (out.ndim - 2))


def conv_nd(x: "Tensor", weight: "Tensor", groups: int, stride: tuple[int, ...],
            dilation: tuple[int, ...], pads: Pads) -> "Tensor":
    """Batched grouped convolution (no bias) of padded patches with one dot_general; a 1x1
    kernel reads the pixels in place, a depthwise one is a sum over its taps."""
    batch, c_out, c_in_g, kernel = x.shape[0], weight.shape[0], weight.shape[1], weight.shape[2:]
    if groups == 1 and all(k == 1 for k in kernel):
        return _pointwise(x, weight, stride, pads)
    if groups > 1 and c_in_g == 1 and groups == x.shape[1]:
        return _depthwise(x, weight, stride, dilation, pads)
    padded = tuple(s + lo + hi for s, (lo, hi) in zip(x.shape[2:], pads, strict=True))
    fitted_output_shape(padded, kernel, stride, dilation, "conv2d")
    taps = math.prod(kernel)
    # weight first, batched over (batch[, groups]): each product is (c_out/groups) x pixels,
    # already in the output's (N, C, *S) layout, so no transpose follows the gemm
    if groups == 1:
        patches = P.conv_patches(x, kernel, stride, dilation, pads)  # (N, C_in, taps, *out)
        w = P.broadcast_in_dim(P.reshape(weight, (1, c_out, c_in_g, taps)),
                               (batch, c_out, c_in_g, taps), (0, 1, 2, 3))
        return P.dot_general(w, patches, (((2, 3), (1, 2)), ((0,), (0,))))
    # the groups get their own axis before the patches (a free reshape of the image), so
    # the patches come out (N, G, C_in/G, taps, *out) and a GEMM may read them in place
    grouped = P.reshape(x, (batch, groups, c_in_g) + x.shape[2:])
    patches = P.conv_patches(grouped, kernel, stride, dilation, pads)
    out_sp = patches.shape[4:]
    w = P.reshape(weight, (1, groups, c_out // groups, c_in_g, taps))
    w = P.broadcast_in_dim(w, (batch, groups, c_out // groups, c_in_g, taps), (0, 1, 2, 3, 4))
    out = P.dot_general(w, patches, (((3, 4), (2, 3)), ((0, 1), (0, 1))))
    return P.reshape(out, (batch, c_out) + out_sp)



def _pointwise(x: "Tensor", weight: "Tensor", stride: tuple[int, ...], pads: Pads) -> "Tensor":
    """A 1x1 convolution (groups 1): the weight (C_out x C_in) times the input's pixels per
    image, read in place (no patches) unless padding or a stride picks them first."""
    if any(lo or hi for lo, hi in pads):
        x = pad_spatial(x, pads)
    if any(s != 1 for s in stride):
        lead = (1, 1)
        x = P.slice_(x, (0,) * x.ndim, x.shape, lead + tuple(stride))
    batch, c_in, c_out = x.shape[0], x.shape[1], weight.shape[0]
    w = P.broadcast_in_dim(P.reshape(weight, (c_out, c_in)), (batch, c_out, c_in), (1, 2))
    return P.dot_general(w, x, (((2,), (1,)), ((0,), (0,))))


def _depthwise(x: "Tensor", weight: "Tensor", stride: tuple[int, ...],
               dilation: tuple[int, ...], pads: Pads) -> "Tensor":
    """A depthwise convolution (groups = C_in, C_out = C_in * multiplier): per kernel tap, a
    strided slice of the padded input times that tap's weight per channel, summed: one
    fused elementwise kernel, where the grouped gemm would multiply 1 x taps matrices."""
    channels, kernel = x.shape[1], weight.shape[2:]
    mult = weight.shape[0] // channels
    n = len(kernel)
    taps = tap_slices(pad_spatial(x, pads), kernel, stride, dilation, "conv2d")
    batch, out_sp = x.shape[0], taps[0].shape[2:]
    # the channel multiplier gets an axis only when it is not 1 (else its transpose in the
    # backward pass is a reduction over an axis of length 1 per tap)
    full = (batch, channels) + ((mult,) if mult > 1 else ()) + out_sp
    keep_x = (0, 1) + tuple(range(len(full) - n, len(full)))
    w = P.reshape(weight, (channels, mult, math.prod(kernel)))
    total = None
    for t, tap in enumerate(taps):
        wt = P.slice_(w, (0, 0, t), (channels, mult, t + 1))
        wt = P.reshape(wt, (channels, mult) if mult > 1 else (channels,))
        if mult > 1:
            tap = P.broadcast_in_dim(tap, full, keep_x)
        term = tap * P.broadcast_in_dim(wt, full, tuple(range(1, wt.ndim + 1)))
        total = term if total is None else total + term
    assert total is not None
    return P.reshape(total, (batch, channels * mult) + out_sp)


class ConvOpsMixin:
    """Tensor methods: conv2d (any number of spatial dims) and conv_transpose2d."""

    __slots__ = ()

    def conv2d(self, weight: "Tensor", bias: "Tensor | None" = None, groups: int = 1,
               stride: int | Sequence[int] = 1, dilation: int | Sequence[int] = 1,
               padding: int | Sequence[int] | str = 0, dtype: Any = None) -> "Tensor":
        """Cross-correlation of self (N, C_in, *S) with weight (C_out, C_in/groups, *K).

        The number of spatial dims is weight.ndim - 2 (1-d, 2-d, 3-d, ...); an input without
        the batch axis is accepted. padding: int, one int per spatial dim, the flat form
        (left, right, top, bottom, ...), or 'valid'/'same' (stride 1). `dtype` casts the
        operands first (else they are promoted to a common dtype).
        """
        squeeze = self.ndim == weight.ndim - 1
        x = self.reshape((1,) + self.shape) if squeeze else cast("Tensor", self)
        _check_conv(x, weight, bias, groups)
        x, weight, bias = _cast_operands(x, weight, bias, dtype=dtype)
        n = weight.ndim - 2
        stride_t = make_tuple(stride, n, "conv2d", "stride")
        dilation_t = make_tuple(dilation, n, "conv2d", "dilation")
        pads = _conv_padding(padding, weight.shape[2:], stride_t, dilation_t)
        out = _add_bias(conv_nd(x, weight, groups, stride_t, dilation_t, pads), bias)
        return out.reshape(out.shape[1:]) if squeeze else out

    def conv_transpose2d(self, weight: "Tensor", bias: "Tensor | None" = None, groups: int = 1,
                         stride: int | Sequence[int] = 1, dilation: int | Sequence[int] = 1,
                         padding: int | Sequence[int] = 0,
                         output_padding: int | Sequence[int] = 0) -> "Tensor":
        """Transposed convolution of self (N, C_in, *S) with weight (C_in, C_out/groups, *K).

        Spatial size: (S - 1) * stride - pad_lo - pad_hi + dilation * (K - 1) +
        output_padding + 1. Padding forms as in conv2d (no strings).
        """
        x, n = cast("Tensor", self), weight.ndim - 2
        squeeze = x.ndim == n + 1
        x = x.reshape((1,) + x.shape) if squeeze else x
        _check_transpose(x, weight, groups)
        stride_t = make_tuple(stride, n, "conv_transpose2d", "stride")
        dilation_t = make_tuple(dilation, n, "conv_transpose2d", "dilation")
        out_pad = make_tuple(output_padding, n, "conv_transpose2d", "output_padding")
        pads = resolve_padding(padding, n, "conv_transpose2d")
        _check_output_padding(out_pad, stride_t, dilation_t)
        config = _transpose_pad_config(x, weight, stride_t, dilation_t, pads, out_pad)
        dilated = P.pad(x, ((0, 0, 0), (0, 0, 0)) + config)
        out = dilated.conv2d(_transposed_weight(weight, groups), bias, groups, 1, dilation_t, 0)
        return out.reshape(out.shape[1:]) if squeeze else out


def _check_transpose(x: "Tensor", weight: "Tensor", groups: int) -> None:
    where = f"input {fmt_shape(x.shape)}, weight {fmt_shape(weight.shape)}"
    if weight.ndim < 3 or x.ndim != weight.ndim:
        raise ArgumentError(f"conv_transpose2d: weight must be (in_channels, out_channels/groups, "
                            f"*kernel) and input (batch, in_channels, *spatial); got {where}")
    if groups < 1 or weight.shape[0] % groups:
        raise ArgumentError(f"conv_transpose2d: in_channels {weight.shape[0]} is not divisible "
                            f"by groups={groups} ({where})")
    if x.shape[1] != weight.shape[0]:
        raise ArgumentError(f"conv_transpose2d: input has {x.shape[1]} channels but weight "
                            f"expects {weight.shape[0]} ({where})")


def _check_output_padding(out_pad: tuple[int, ...], stride: tuple[int, ...],
                          dilation: tuple[int, ...]) -> None:
    for op, s, d in zip(out_pad, stride, dilation, strict=True):
        if not 0 <= op < max(s, d):
            raise ArgumentError(f"conv_transpose2d: output_padding {out_pad} must be smaller than "
                                f"stride {stride} or dilation {dilation}")


def _transpose_pad_config(x: "Tensor", weight: "Tensor", stride: tuple[int, ...],
                          dilation: tuple[int, ...], pads: Pads,
                          out_pad: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
    """(lo, hi, interior) per spatial axis: spread the input by stride, then pad by the
    kernel reach minus the requested padding (plus output_padding on the high side)."""
    kernel = weight.shape[2:]
    config = tuple((d * (k - 1) - lo, d * (k - 1) - hi + op, s - 1) for k, d, (lo, hi), op, s
                   in zip(kernel, dilation, pads, out_pad, stride, strict=True))
    out_sp = tuple((m - 1) * s - lo - hi + d * (k - 1) + op + 1 for m, s, (lo, hi), d, k, op
                   in zip(x.shape[2:], stride, pads, dilation, kernel, out_pad, strict=True))
    if any(m < 1 for m in out_sp) or 0 in x.shape[2:]:
        raise ArgumentError(f"conv_transpose2d: padding {pads} leaves output size {out_sp} for "
                            f"input {fmt_shape(x.shape)} and weight {fmt_shape(weight.shape)}")
    return config


def _transposed_weight(weight: "Tensor", groups: int) -> "Tensor":
    """(C_in, C_out/g, *K) -> (C_out, C_in/g, *K) per group, kernel flipped."""
    c_in, c_out_g, kernel = weight.shape[0], weight.shape[1], weight.shape[2:]
    n = len(kernel)
    w = P.reshape(weight, (groups, c_in // groups, c_out_g) + kernel)
    w = P.transpose(w, (0, 2, 1) + tuple(range(3, n + 3)))
    w = P.reshape(w, (groups * c_out_g, c_in // groups) + kernel)
    return P.rev(w, tuple(range(2, n + 2)))
