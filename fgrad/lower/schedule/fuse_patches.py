"""Implicit GEMM: a product of conv_patches reads the image, the patches are never stored.

In: a Jaxpr (calls inlined, conv_patches not yet expanded) and `accepts`, the backend's test
that its GEMM can compute a rewritten dot_general (llvm: fgrad's own GEMM, whose B packing
routine has a conv mode, gemm/conv_pack.py). Out: the Jaxpr with each conv_patches equation
whose every use is such a product replaced: each product becomes a dot_general on the image
whose params carry `rhs_patches`, a `PatchRead` saying how to read the patches from it.

Which products: a 1-d, 2-d or 3-d conv_patches of a (N, C, *S) float image, or
(N, G, C/G, *S) for a grouped convolution, as the right operand (only), batched over N (and
G), contracted either over (C, taps) (a convolution's forward pass: the B matrix is taps x
pixels, read plainly) or over the output pixels (the weight's gradient: pixels x taps,
read transposed). An image that is a reshape of another tensor (a grouped one is of its
(N, C, *S) input) is read from that tensor in place, and a product's output that only a
reshape reads is written as that reshape's output. Anything else (the patches returned,
reduced, sliced, or grouped by a reshape) keeps the stored patches: expand.py expands them.

The input gradient, col2im(transpose(W^T dY)) with W (N, C_out, C_in, taps) and dY
(N, C_out, *OS), is for stride 1 itself a convolution: of dY, padded by
dilation * (kernel - 1) - padding per side, with W's channels swapped and its taps
reversed. `fuse_col2im` writes it so (a transpose and a rev of the small weight, then a
product reading dY's patches) when C_in >= MIN_INPUT_CHANNELS; the product and the col2im
(pads summed over the taps) are then never computed.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fgrad.core.dtypes import dtypes
from fgrad.core.ir import Atom, Eqn, Jaxpr, ShapedArray, Var
from fgrad.lower.schedule.gemm_layout import without_unread_views

PLAIN_CONTRACT, TRANSPOSED_CONTRACT = (1, 2), (3, 4, 5)
# An input gradient's product has one row per input channel; with fewer, packing dY's
# patches (taps * C_out x pixels) costs more than the stored product and col2im: W4's
# 3-channel input, forward+backward 3.7-4.7 -> 5.9-6.6 ms fused. At 16 the README demo's
# second conv fused, and its max-pool backward, no longer fused into col2im's pads, became
# a kernel that LLVM's O2 took 3.6 s to compile (fully unrolled 4x4 window loops in four
# pieces): the demo's first step compiled in 4.6 s instead of 2.0 s.
MIN_INPUT_CHANNELS = 32
# A grouped convolution's input gradient: a product per (image, group) of C_in/G rows.
MIN_GROUP_CHANNELS = 8
RETURNED = Eqn(None, [], {}, [])   # a use that stands for "returned by the jaxpr"
MAX_IMAGE_ELEMENTS = 2 ** 31 - 2 ** 20   # the packing routine's offsets are 32-bit


@dataclass(frozen=True)
class PatchRead:
    """The patches (N, C, KH*KW, OH, OW) of a (N, C, H, W) image, read by a GEMM as its B
    operand: plainly (rows (c, tap), columns pixels) or `transposed` (rows pixels). A
    grouped convolution's image is (N, G, C/G, H, W): two batch axes. A 1-d convolution's
    patches (N, C, K, OL) of a (N, C, L) image are read as those of a (N, C, 1, 1, L) image
    and a 2-d one's as (N, C, 1, H, W) (`as_3d`); a 3-d one's image is (N, C, D, H, W)."""

    shape: tuple[int, ...]
    image: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    padding: tuple[tuple[int, int], ...]
    transposed: bool

    def __repr__(self) -> str:
        return (f"patches(kernel={self.kernel}, stride={self.stride}, dilation="
                f"{self.dilation}, padding={self.padding}{', transposed' * self.transposed})")

    @property
    def lead(self) -> int:
        """The image's batch axes: N, or (N, G) for groups."""
        return len(self.image) - 1 - len(self.kernel)

    def as_3d(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...],
                             tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...]]:
        """(image (D, H, W), kernel, stride, dilation, padding, output (OD, OH, OW)) as a
        3-d convolution: a 1-d or 2-d one's with leading spatial axes of 1 (kernel 1,
        stride 1, dilation 1, no padding)."""
        spatial = len(self.kernel)
        lift = 3 - spatial
        return ((1,) * lift + self.image[-spatial:], (1,) * lift + self.kernel,
                (1,) * lift + self.stride, (1,) * lift + self.dilation,
                ((0, 0),) * lift + self.padding, (1,) * lift + self.shape[-spatial:])


def _read_of(patches: Eqn, use: Eqn) -> PatchRead | None:
    """How `use` (a dot_general) would read `patches` in place, or None."""
    x = patches.inputs[0]
    p = patches.params
    spatial = len(p["kernel"])
    lead = x.aval.ndim - 1 - spatial if isinstance(x, Var) else 0   # N, or (N, G)
    if use.primitive.name != "dot_general" or lead not in (1, 2) or spatial not in (1, 2, 3) \
            or x.aval.dtype not in (dtypes.float32, dtypes.float64) \
            or math.prod(x.aval.shape[lead:]) >= MAX_IMAGE_ELEMENTS \
            or use.inputs[1] is not patches.outvars[0] or use.inputs[0] is use.inputs[1]:
        return None
    (_, rhs_contract), (_, rhs_batch) = use.params["dimension_numbers"]
    plain, transposed = (tuple(a + lead - 1 for a in axes)
                         for axes in (PLAIN_CONTRACT, TRANSPOSED_CONTRACT[:spatial]))
    if tuple(rhs_batch) != tuple(range(lead)) or tuple(rhs_contract) not in (plain, transposed):
        return None
    return PatchRead(patches.outvars[0].aval.shape, x.aval.shape, p["kernel"], p["stride"],
                     p["dilation"], p["padding"], tuple(rhs_contract) == transposed)


def _uses(jaxpr: Jaxpr) -> dict[int, list[Eqn]]:
    uses: dict[int, list[Eqn]] = {}
    for e in jaxpr.eqns:
        for a in e.inputs:
            if isinstance(a, Var):
                uses.setdefault(id(a), []).append(e)
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            uses.setdefault(id(v), []).append(RETURNED)
    return uses


def fuse_patches(jaxpr: Jaxpr, accepts: Callable[[Eqn], bool]) -> Jaxpr:
    """`jaxpr` with the products of conv_patches that `accepts` reading the image, and the
    input gradients (col2im of a product) that it computes as such a product (module
    docstring); `jaxpr` itself when there is none."""
    return fuse_col2im(_fuse_forward(jaxpr, accepts), accepts)


def _unreshaped(image: Atom, producers: dict[int, Eqn]) -> Atom:
    """The tensor that `image` is a reshape (or a chain of them) of, else `image`: a reshape
    of a dense buffer holds its elements in the same order, so a product reads the source
    in place with the image's shape (a grouped convolution's (N, G, C/G, H, W) view of its
    input, an image reshaped from a dense layer's output)."""
    while isinstance(image, Var):
        source = producers.get(id(image))
        if source is None or source.primitive.name != "reshape" \
                or not isinstance(source.inputs[0], Var):
            break
        image = source.inputs[0]
    return image


def _fuse_forward(jaxpr: Jaxpr, accepts: Callable[[Eqn], bool]) -> Jaxpr:
    uses = _uses(jaxpr)
    producers = {id(v): e for e in jaxpr.eqns for v in e.outvars}
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
            image = _unreshaped(e.inputs[0], producers)
            fused = Eqn(use.primitive, [use.inputs[0], image],
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
    return _rewritten(jaxpr, [replaced.get(id(e), e) for e in jaxpr.eqns
                              if id(e) not in dropped])


def _rewritten(jaxpr: Jaxpr, eqns: list[Eqn]) -> Jaxpr:
    """`jaxpr` with `eqns`, reshaped outputs merged into their products and the reshapes
    nothing reads any more dropped."""
    eqns = _merged_reshaped_outputs(eqns, _uses(Jaxpr(jaxpr.constvars, jaxpr.invars, eqns,
                                                   jaxpr.outvars)))
    return Jaxpr(jaxpr.constvars, jaxpr.invars, without_unread_views(eqns, jaxpr.outvars),
                 jaxpr.outvars)


def _merged_reshaped_outputs(eqns: list[Eqn], uses: dict[int, list[Eqn]]) -> list[Eqn]:
    """A product that reads an image, whose output (a grouped one's (N, G, C_out/G, *out))
    only a reshape reads (to (N, C_out, *out)), is written as that reshape's output: the
    same memory, no copy."""
    merged: dict[int, Eqn] = {}
    reshapes: set[int] = set()
    for e in eqns:
        if "rhs_patches" not in e.params:
            continue
        readers = uses.get(id(e.outvars[0]), [])
        if len(readers) == 1 and readers[0].primitive is not None \
                and readers[0].primitive.name == "reshape":
            merged[id(e)] = Eqn(e.primitive, e.inputs, e.params, readers[0].outvars, e.source)
            reshapes.add(id(readers[0]))
    return [merged.get(id(e), e) for e in eqns if id(e) not in reshapes]


def _col2im_product(col2im: Eqn, uses: dict[int, list[Eqn]], producers: dict[int, Eqn]
                    ) -> tuple[list[Eqn], Var, Var] | None:
    """For col2im(transpose?(dot_general(dY, W))) computing an input gradient: the
    equations it replaces, the weight operand (N, O, C, taps) and dY (N, O, OH, OW); for a
    grouped convolution (N, G, O, C, taps) and (N, G, O, OH, OW); 1-d: dY (N, O, OL)."""
    chain = [col2im]
    v = col2im.inputs[0]
    spatial = len(col2im.params["kernel"])
    lead = v.aval.ndim - 2 - spatial if isinstance(v, Var) else 0   # N, or (N, G)
    eqn = producers.get(id(v))
    perm = tuple(range(lead + 2 + spatial))
    if eqn is not None and eqn.primitive.name == "transpose":
        perm = tuple(eqn.params["permutation"])
        chain.append(eqn)
        v = eqn.inputs[0]
        eqn = producers.get(id(v))
    if lead not in (1, 2) or eqn is None or eqn.primitive.name != "dot_general" \
            or len(eqn.inputs) != 2:
        return None
    chain.append(eqn)
    if any(len(uses.get(id(e.outvars[0]), [])) != 1 for e in chain[1:]):
        return None
    (xc, yc), (xb, yb) = eqn.params["dimension_numbers"]
    x, y = eqn.inputs
    batch = tuple(range(lead))
    if not (isinstance(x, Var) and isinstance(y, Var) and tuple(xc) == tuple(yc) == (lead,)
            and tuple(xb) == tuple(yb) == batch):
        return None
    # product axes: (batch, x's free axes, y's); col2im reads them as (batch, C, taps,
    # *out): the weight's two free axes first, then dY's spatial ones
    if perm == tuple(range(lead + 2 + spatial)):
        weight, image = x, y
    elif perm == batch + (lead + spatial, lead + spatial + 1) + \
            tuple(range(lead, lead + spatial)):
        weight, image = y, x
    else:
        return None
    if weight.aval.ndim != lead + 3 or image.aval.ndim != lead + 1 + spatial:
        return None
    return chain, weight, image


def fuse_col2im(jaxpr: Jaxpr, accepts: Callable[[Eqn], bool]) -> Jaxpr:
    """Each stride-1 input gradient col2im(W^T dY) (1-d, 2-d or 3-d) as one product that
    reads dY's patches: dX = conv(dY, W with in/out channels swapped and taps reversed), padded by
    dilation * (kernel - 1) - padding on each side."""
    from fgrad.core import prims as P
    uses = _uses(jaxpr)
    producers = {id(v): e for e in jaxpr.eqns for v in e.outvars}
    replaced: dict[int, list[Eqn]] = {}
    dropped: set[int] = set()
    for e in jaxpr.eqns:
        p = e.params
        spatial = len(p.get("kernel", ()))
        if e.primitive.name != "conv_patches_transpose" or spatial not in (1, 2, 3) \
                or any(s != 1 for s in p["stride"]) \
                or e.outvars[0].aval.dtype not in (dtypes.float32, dtypes.float64):
            continue
        found = _col2im_product(e, uses, producers)
        if found is None:
            continue
        chain, weight, image = found
        lead = weight.aval.ndim - 3
        *batch, o, c, taps = weight.aval.shape
        if image.aval.shape[:lead + 1] != (*batch, o) or taps != math.prod(p["kernel"]) \
                or c < (MIN_INPUT_CHANNELS if lead == 1 else MIN_GROUP_CHANNELS):
            continue
        padding = tuple((d * (k - 1) - lo, d * (k - 1) - hi) for k, d, (lo, hi)
                        in zip(p["kernel"], p["dilation"], p["padding"], strict=True))
        out = e.outvars[0].aval
        read = PatchRead((*batch, o, taps) + out.shape[-spatial:], image.aval.shape,
                         p["kernel"], (1,) * spatial, p["dilation"], padding, False)
        swapped = Var(ShapedArray((*batch, c, o, taps), weight.aval.dtype))
        reversed_taps = Var(ShapedArray((*batch, c, o, taps), weight.aval.dtype))
        axes = tuple(range(lead))
        product = Eqn(chain[-1].primitive, [reversed_taps, _unreshaped(image, producers)],
                      {**chain[-1].params, "rhs_patches": read, "dimension_numbers":
                       (((lead + 1, lead + 2), (lead, lead + 1)), (axes, axes))},
                      e.outvars, e.source)
        if window_counts_of(read) != out.shape[-spatial:] or not accepts(product):
            continue
        replaced[id(e)] = [
            Eqn(P.transpose_p, [weight], {"permutation": axes + (lead + 1, lead, lead + 2)},
                [swapped], e.source),
            Eqn(P.rev_p, [swapped], {"dimensions": (lead + 2,)}, [reversed_taps], e.source),
            product]
        dropped.update(id(d) for d in chain[1:])
    if not replaced:
        return jaxpr
    eqns: list[Eqn] = []
    for e in jaxpr.eqns:
        if id(e) in dropped:
            continue
        eqns.extend(replaced.get(id(e), [e]))
    return _rewritten(jaxpr, eqns)


def window_counts_of(read: PatchRead) -> tuple[int, ...]:
    """The output spatial shape of the patches `read` describes."""
    from fgrad.core.prims.patches import patch_geometry
    return patch_geometry(read.image[-len(read.kernel):], read.kernel, read.stride,
                          read.dilation, read.padding)[1]
