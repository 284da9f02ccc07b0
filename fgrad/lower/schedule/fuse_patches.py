"""Implicit GEMM: a product of conv_patches reads the image, the patches are never stored.

In: a Jaxpr (calls inlined, conv_patches not yet expanded) and `accepts`, the backend's test
that its GEMM can compute a rewritten dot_general (llvm: fgrad's own GEMM, whose B packing
routine has a conv mode, gemm/conv_pack.py). Out: the Jaxpr with each conv_patches equation
whose every use is such a product replaced: each product becomes a dot_general on the image
whose params carry `rhs_patches`, a `PatchRead` saying how to read the patches from it.

Which products: a 2-d conv_patches of a (N, C, H, W) float image as the right operand
(only), batched over N, contracted either over (C, taps) (a convolution's forward pass:
the B matrix is taps x pixels, read plainly) or over the output pixels (the weight's
gradient: pixels x taps, read transposed). Anything else (the patches returned, reduced,
sliced, or grouped by a reshape) keeps the stored patches: expand.py expands them.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Eqn, Jaxpr, Var

PLAIN_CONTRACT, TRANSPOSED_CONTRACT = (1, 2), (3, 4)
MAX_IMAGE_ELEMENTS = 2 ** 31 - 2 ** 20   # the packing routine's offsets are 32-bit


@dataclass(frozen=True)
class PatchRead:
    """The patches (N, C, KH*KW, OH, OW) of a (N, C, H, W) image, read by a GEMM as its B
    operand: plainly (rows (c, tap), columns pixels) or `transposed` (rows pixels)."""

    shape: tuple[int, ...]
    image: tuple[int, ...]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[tuple[int, int], tuple[int, int]]
    transposed: bool

    def __repr__(self) -> str:
        return (f"patches(kernel={self.kernel}, stride={self.stride}, dilation="
                f"{self.dilation}, padding={self.padding}{', transposed' * self.transposed})")


def _read_of(patches: Eqn, use: Eqn) -> PatchRead | None:
    """How `use` (a dot_general) would read `patches` in place, or None."""
    x = patches.inputs[0]
    p = patches.params
    if use.primitive.name != "dot_general" or not isinstance(x, Var) \
            or x.aval.ndim != 4 or len(p["kernel"]) != 2 \
            or x.aval.dtype not in (dtypes.float32, dtypes.float64) \
            or math.prod(x.aval.shape[1:]) >= MAX_IMAGE_ELEMENTS \
            or use.inputs[1] is not patches.outvars[0] or use.inputs[0] is use.inputs[1]:
        return None
    (_, rhs_contract), (_, rhs_batch) = use.params["dimension_numbers"]
    if tuple(rhs_batch) != (0,) or tuple(rhs_contract) not in (PLAIN_CONTRACT,
                                                                TRANSPOSED_CONTRACT):
        return None
    return PatchRead(patches.outvars[0].aval.shape, x.aval.shape, p["kernel"], p["stride"],
                     p["dilation"], p["padding"],
                     tuple(rhs_contract) == TRANSPOSED_CONTRACT)


def fuse_patches(jaxpr: Jaxpr, accepts: Callable[[Eqn], bool]) -> Jaxpr:
    """`jaxpr` with the products of conv_patches that `accepts` reading the image (module
    docstring); `jaxpr` itself when there is none."""
    uses: dict[int, list[Eqn]] = {}
    for e in jaxpr.eqns:
        for a in e.inputs:
            if isinstance(a, Var):
                uses.setdefault(id(a), []).append(e)
    returned = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    replaced: dict[int, Eqn] = {}
    dropped: set[int] = set()
    for e in jaxpr.eqns:
        if e.primitive.name != "conv_patches" or id(e.outvars[0]) in returned:
            continue
        out = e.outvars[0]
        rewritten = []
        for use in uses.get(id(out), []):
            read = _read_of(e, use)
            if read is None:
                break
            fused = Eqn(use.primitive, [use.inputs[0], e.inputs[0]],
                        {**use.params, "rhs_patches": read}, use.outvars, use.source)
            if not accepts(fused):
                break
            rewritten.append((use, fused))
        else:
            if rewritten:
                replaced.update((id(use), fused) for use, fused in rewritten)
                dropped.add(id(e))
    if not dropped:
        return jaxpr
    eqns = [replaced.get(id(e), e) for e in jaxpr.eqns if id(e) not in dropped]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars)
