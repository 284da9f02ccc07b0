"""`lax.conv_general_dilated`: JAX's general convolution over any layout.

Dimension numbers are layout strings (`("NHWC", "HWIO", "NHWC")`; N batch, C feature, O/I
output/input features, any other letters spatial; spatial axes are matched by letter, in the
order of the kernel's string) or None for `("NC...", "OI...", "NC...")`. `padding` is
"VALID", "SAME", "SAME_LOWER" or one `(lo, hi)` pair per spatial axis (negative crops).
`lhs_dilation` inserts zeros between input elements (a transposed convolution),
`rhs_dilation` spreads the kernel taps (atrous), `feature_group_count` splits the features
into groups. The result is computed by the same patch-and-dot_general convolution as
`Tensor.conv2d`, so every transformation and backend applies.
"""
from __future__ import annotations

from typing import Any, Sequence

from fgrad.core import prims as P
from fgrad.core.dtypes import promote
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.methods.nn.conv_ops import conv_nd

__all__ = ["conv_general_dilated"]


def _specs(dimension_numbers: Any, ndim: int) -> tuple[str, str, str]:
    if dimension_numbers is None:
        spatial = "".join(chr(ord("a") + i) for i in range(ndim - 2))
        return "NC" + spatial, "OI" + spatial, "NC" + spatial
    specs = tuple(dimension_numbers)
    if len(specs) != 3 or not all(isinstance(s, str) for s in specs):
        raise TypeError(f"conv_general_dilated: dimension_numbers must be three layout "
                        f"strings like ('NHWC', 'HWIO', 'NHWC'), got {dimension_numbers!r}")
    lhs, rhs, out = specs
    ok = (len(lhs) == len(rhs) == len(out) == ndim and sorted(lhs) == sorted(out)
          and {"N", "C"} <= set(lhs) and {"O", "I"} <= set(rhs)
          and set(lhs) - {"N", "C"} == set(rhs) - {"O", "I"} and len(set(lhs)) == ndim)
    if not ok:
        raise ValueError(f"conv_general_dilated: dimension_numbers {specs} do not describe "
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
