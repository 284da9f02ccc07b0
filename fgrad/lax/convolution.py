"""JAX's convolutions: `conv_general_dilated` over any layout, and its front ends `conv`,
`conv_with_general_padding`, `conv_transpose`, with `conv_dimension_numbers`.

Dimension numbers are layout strings (`("NHWC", "HWIO", "NHWC")`; N batch, C feature, O/I
output/input features, any other letters spatial; spatial axes are matched by letter, in the
order of the kernel's string), a `ConvDimensionNumbers` of axis permutations (what
`conv_dimension_numbers` returns), or None for `("NC...", "OI...", "NC...")`. `padding` is
"VALID", "SAME", "SAME_LOWER" or one `(lo, hi)` pair per spatial axis (negative crops).
`lhs_dilation` inserts zeros between input elements (a transposed convolution),
`rhs_dilation` spreads the kernel taps (atrous), `feature_group_count` splits the features
into groups. The result is computed by the same patch-and-dot_general convolution as
`Tensor.conv2d`, so every transformation and backend applies.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence, Tuple, Union

import numpy as np

from fgrad.core import prims as P
from fgrad.core.dtypes import promote
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.methods.nn.conv_ops import conv_nd

__all__ = ["ConvDimensionNumbers", "ConvGeneralDilatedDimensionNumbers", "conv",
           "conv_dimension_numbers", "conv_general_dilated", "conv_general_dilated_patches",
           "conv_transpose", "conv_with_general_padding"]

_SPATIAL_LETTERS = "abdefghjklmpqrstuvwxyz"  # never N, C, O or I


class ConvDimensionNumbers(NamedTuple):
    """JAX's `lax.ConvDimensionNumbers`: for lhs, rhs and output, the axis positions of
    (batch, feature, *spatial), (out feature, in feature, *spatial), (batch, feature,
    *spatial), spatial axes in one shared order."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


# what `dimension_numbers` may be: None, three layout strings, or a ConvDimensionNumbers
ConvGeneralDilatedDimensionNumbers = Union[None, ConvDimensionNumbers, Tuple[str, str, str]]


def _perm(spec: str, pair: str, spatial: str) -> tuple[int, ...]:
    return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spec.index(c) for c in spatial)


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """JAX's `lax.conv_dimension_numbers`: layout strings (or None, or a
    ConvDimensionNumbers) as axis permutations; spatial axes follow the kernel's order."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise TypeError(f"conv_dimension_numbers: lhs and rhs must have the same rank, got "
                        f"shapes {tuple(lhs_shape)} and {tuple(rhs_shape)}")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    lhs, rhs, out = _specs(dimension_numbers, len(lhs_shape), "conv_dimension_numbers")
    spatial = "".join(c for c in rhs if c not in "OI")
    return ConvDimensionNumbers(_perm(lhs, "NC", spatial), _perm(rhs, "OI", spatial),
                                _perm(out, "NC", spatial))


def _strings(dn: ConvDimensionNumbers, ndim: int, op: str) -> tuple[str, str, str]:
    """Layout strings for a ConvDimensionNumbers (spatial axis i gets one letter)."""
    out = []
    for perm, pair in ((dn.lhs_spec, "NC"), (dn.rhs_spec, "OI"), (dn.out_spec, "NC")):
        if sorted(perm) != list(range(ndim)):
            raise ValueError(f"{op}: dimension_numbers {tuple(dn)} must hold permutations of "
                             f"range({ndim})")
        chars = [""] * ndim
        for k, axis in enumerate(perm):
            chars[axis] = pair[k] if k < 2 else _SPATIAL_LETTERS[k - 2]
        out.append("".join(chars))
    return out[0], out[1], out[2]


def _specs(dimension_numbers: Any, ndim: int, op: str = "conv_general_dilated"
           ) -> tuple[str, str, str]:
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return _strings(dimension_numbers, ndim, op)
    if dimension_numbers is None:
        spatial = "".join(chr(ord("a") + i) for i in range(ndim - 2))
        return "NC" + spatial, "OI" + spatial, "NC" + spatial
    specs = tuple(dimension_numbers)
    if len(specs) != 3 or not all(isinstance(s, str) for s in specs):
        raise TypeError(f"{op}: dimension_numbers must be three layout strings like "
                        f"('NHWC', 'HWIO', 'NHWC'), got {dimension_numbers!r}")
    lhs, rhs, out = specs
    ok = (len(lhs) == len(rhs) == len(out) == ndim and sorted(lhs) == sorted(out)
          and {"N", "C"} <= set(lhs) and {"O", "I"} <= set(rhs)
          and set(lhs) - {"N", "C"} == set(rhs) - {"O", "I"} and len(set(lhs)) == ndim)
    if not ok:
        raise ValueError(f"{op}: dimension_numbers {specs} do not describe "
                         f"{ndim}-d operands (lhs needs N, C; rhs O, I; the same spatial "
                         f"letters in all three)")
    return lhs, rhs, out


def _pads(padding: Any, in_sp: Sequence[int], k_sp: Sequence[int], strides: Sequence[int],
          rdil: Sequence[int]) -> list[tuple[int, int]]:
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [(0, 0)] * len(in_sp)
        if mode not in ("SAME", "SAME_LOWER"):
            raise ValueError(f"conv_general_dilated: padding must be 'VALID', 'SAME', "
                             f"'SAME_LOWER' or (lo, hi) pairs, got {padding!r}")
        pads = []
        for n, k, s, d in zip(in_sp, k_sp, strides, rdil):
            out = -(-n // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
            small, big = total // 2, total - total // 2
            pads.append((small, big) if mode == "SAME" else (big, small))
        return pads
    pairs = [tuple(int(v) for v in p) for p in padding]
    if len(pairs) != len(in_sp) or any(len(p) != 2 for p in pairs):
        raise ValueError(f"conv_general_dilated: padding needs one (lo, hi) pair per spatial "
                         f"axis ({len(in_sp)}), got {padding!r}")
    return pairs  # type: ignore[return-value]


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: Any = None) -> Tensor:
    """JAX's `lax.conv_general_dilated` (see the module docstring); `precision` is accepted
    and ignored, `batch_group_count` must be 1."""
    x, w = as_tensor(lhs), as_tensor(rhs)
    if x.ndim != w.ndim or x.ndim < 3:
        raise ValueError(f"conv_general_dilated: lhs {x.shape} and rhs {w.shape} must have the "
                         f"same rank >= 3")
    if batch_group_count != 1:
        raise NotImplementedError("conv_general_dilated: batch_group_count > 1 is not "
                                  "supported; use vmap over the batch groups")
    lspec, rspec, ospec = _specs(dimension_numbers, x.ndim)
    spatial = [c for c in rspec if c not in "OI"]
    x = P.transpose(x, tuple(lspec.index(c) for c in "NC" + "".join(spatial)))
    w = P.transpose(w, tuple(rspec.index(c) for c in "OI" + "".join(spatial)))
    n = len(spatial)
    strides = tuple(int(s) for s in window_strides)
    ldil = tuple(lhs_dilation or (1,) * n)
    rdil = tuple(rhs_dilation or (1,) * n)
    if len(strides) != n or len(ldil) != n or len(rdil) != n:
        raise ValueError(f"conv_general_dilated: window_strides, lhs_dilation and "
                         f"rhs_dilation need {n} entries each")
    groups = int(feature_group_count)
    if x.shape[1] != w.shape[1] * groups or w.shape[0] % groups:
        raise ValueError(f"conv_general_dilated: lhs has {x.shape[1]} features and rhs "
                         f"{w.shape[1]} input features x {groups} groups with {w.shape[0]} "
                         f"outputs (O must divide by the group count)")
    dtype = promote(x.dtype, w.dtype) if preferred_element_type is None else \
        preferred_element_type
    x, w = x.cast(dtype), w.cast(dtype)
    dilated = [(s - 1) * d + 1 for s, d in zip(x.shape[2:], ldil)]
    pads = _pads(padding, dilated, w.shape[2:], strides, rdil)
    x = P.pad(x, [(0, 0, 0), (0, 0, 0)] + [(lo, hi, d - 1) for (lo, hi), d in zip(pads, ldil)])
    out = conv_nd(x, w, groups, strides, rdil, ((0, 0),) * n)
    source = {"N": 0, "C": 1} | {c: 2 + i for i, c in enumerate(spatial)}
    return P.transpose(out, tuple(source[c] for c in ospec))


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
         precision: Any = None, preferred_element_type: Any = None) -> Tensor:
    """JAX's `lax.conv`: `conv_general_dilated` in the NCHW / OIHW layout (any number of
    spatial axes), without dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: Any, rhs: Any, window_strides: Sequence[int],
                              padding: Any, lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None, precision: Any = None,
                              preferred_element_type: Any = None) -> Tensor:
    """JAX's `lax.conv_with_general_padding`: `conv_general_dilated` in the NCHW / OIHW
    layout with dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation,
                                rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _transpose_padding(k: int, s: int, padding: str) -> tuple[int, int]:
    """The padding of the stride-dilated input that makes a transposed convolution's
    output `in * s` ('SAME') or `in * s + max(k - s, 0)` ('VALID') long (JAX's rule)."""
    if padding == "SAME":
        pad_len = k + s - 2
        lo = k - 1 if s > k - 1 else -(-pad_len // 2)
    else:
        pad_len = k + s - 2 + max(k - s, 0)
        lo = k - 1
    return lo, pad_len - lo


_TRANSPOSE_DEFAULTS = {3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                       5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None,
                   preferred_element_type: Any = None) -> Tensor:
    """JAX's `lax.conv_transpose`: a convolution of the input dilated by `strides`
    (`lhs_dilation`), padded so that 'SAME' gives `in * stride` outputs and 'VALID'
    `in * stride + max(k - stride, 0)`; explicit (lo, hi) pairs pad the dilated input.

    The default layout is channels-last, as in JAX (`('NHWC', 'HWIO', 'NHWC')` in 2-d).
    `transpose_kernel=True` flips the kernel's spatial axes and swaps its I and O axes,
    which makes this the gradient of `conv_general_dilated` with these strides."""
    x, w = as_tensor(lhs), as_tensor(rhs)
    if x.ndim != w.ndim or x.ndim < 3:
        raise ValueError(f"conv_transpose: lhs {x.shape} and rhs {w.shape} must have the same "
                         f"rank >= 3")
    if dimension_numbers is None:
        if x.ndim not in _TRANSPOSE_DEFAULTS:
            raise ValueError(f"conv_transpose: no default dimension_numbers for rank "
                             f"{x.ndim}; pass layout strings like ('NHWC', 'HWIO', 'NHWC')")
        dimension_numbers = _TRANSPOSE_DEFAULTS[x.ndim]
    dn = conv_dimension_numbers(x.shape, w.shape, dimension_numbers)
    n = x.ndim - 2
    kernel = [w.shape[a] for a in dn.rhs_spec[2:]]
    rdil = tuple(int(d) for d in rhs_dilation) if rhs_dilation is not None else (1,) * n
    if isinstance(padding, str):
        mode = padding.upper()
        if mode not in ("SAME", "VALID") or len(strides) != n or len(rdil) != n:
            raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (lo, hi) "
                             f"pairs and strides/rhs_dilation need {n} entries, got "
                             f"padding {padding!r}, strides {tuple(strides)}")
        pads: Any = [_transpose_padding((k - 1) * d + 1, int(s), mode)
                     for k, d, s in zip(kernel, rdil, strides)]
    else:
        pads = padding
    if transpose_kernel:
        w = P.rev(w, tuple(dn.rhs_spec[2:]))
        perm = list(range(w.ndim))
        o, i = dn.rhs_spec[0], dn.rhs_spec[1]
        perm[o], perm[i] = i, o
        w = P.transpose(w, tuple(perm))
    return conv_general_dilated(x, w, (1,) * n, pads, tuple(int(s) for s in strides), rdil,
                                dn, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs: Any, filter_shape: Sequence[int],
                                 window_strides: Sequence[int], padding: Any,
                                 lhs_dilation: Sequence[int] | None = None,
                                 rhs_dilation: Sequence[int] | None = None,
                                 dimension_numbers: Any = None, precision: Any = None,
                                 preferred_element_type: Any = None) -> Tensor:
    """The patches `conv_general_dilated` would multiply by a kernel of spatial shape
    `filter_shape` (in the order of the rhs layout's spatial axes): the output's feature
    axis holds C * prod(filter_shape) entries, input feature major, then the filter
    positions in row-major order. Computed as a grouped convolution with an identity
    kernel, so it differentiates and batches like any convolution."""
    x = as_tensor(lhs)
    if x.ndim < 3:
        raise ValueError(f"conv_general_dilated_patches: lhs must have rank >= 3 (batch, "
                         f"feature, spatial...), got shape {x.shape}")
    lspec, rspec, _ = _specs(dimension_numbers, x.ndim, "conv_general_dilated_patches")
    sizes = tuple(int(k) for k in filter_shape)
    if len(sizes) != x.ndim - 2 or any(k < 1 for k in sizes):
        raise ValueError(f"conv_general_dilated_patches: filter_shape {tuple(filter_shape)} "
                         f"needs {x.ndim - 2} positive sizes, one per spatial axis")
    channels = x.shape[lspec.index("C")]
    taps = int(np.prod(sizes))
    dtype = x.dtype if preferred_element_type is None else preferred_element_type
    eye = np.tile(np.eye(taps), (channels, 1)).reshape((channels * taps, 1) + sizes)
    spatial = [c for c in rspec if c not in "OI"]
    order = "OI" + "".join(spatial)
    kernel = P.transpose(Tensor(eye).cast(dtype), tuple(order.index(c) for c in rspec))
    return conv_general_dilated(x.cast(dtype), kernel, window_strides, padding, lhs_dilation,
                                rhs_dilation, dimension_numbers,
                                feature_group_count=channels, precision=precision)
