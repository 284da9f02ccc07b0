"""Schedule: partition a jaxpr into native kernels and host steps.

In: a Jaxpr without constvars (its invars are the program's inputs).
Out: a `Schedule`: an ordered tuple of `KernelStep`s and `HostStep`s; `str()` prints which
equations went into which kernel.

Fusion rules:
- Elementwise primitives and movement primitives (broadcast_in_dim, reshape, transpose,
  slice, rev, pad, concatenate, iota) never get a kernel of their own: a movement op
  becomes index arithmetic on the loads of the kernel that consumes it.
- A value is realized (lives in a buffer) only when it must: program inputs/outputs,
  reductions, host steps' operands/results, values read by two consumers through a
  non-reshape movement op, values with a transcendental that a broadcast would repeat.
- Every realized value produced by elementwise/movement equations gets one kernel; its
  unrealized producers are inlined (recomputed if another kernel needs them too).
- A reduction (reduce_sum/max/min/prod over any axes) fuses its elementwise producers.
- Consecutive kernels over the same loop domain merge into one multi-output kernel
  (elementwise outputs of a merged reduction kernel are stored from its loop nest).
- Row fusion: a reduction kernel also takes the consecutive steps that read its results
  only at the current row (through broadcasts along the reduced axes), when a row fits in
  cache. Such a kernel runs, per row, a sequence of phases: phase p loops over the row,
  accumulating the reductions that need only phases < p and storing the elementwise
  outputs; values per row (over the kept axes) are computed between phases. So softmax
  and layernorm read their input from main memory once (schedule/row_fusion.py decides).

- A float32/float64 dot_general is a `GemmStep`: one BLAS gemm call per batch entry on
  realized operands, read in place through BLAS's transpose flags and leading dimensions
  (a transposed operand is folded into the dimension numbers; any other layout is packed
  by a `transpose`, which fuses into its producer's kernel). See schedule/gemm_layout.py.
- A gather is a movement op with a run-time operand index: it fuses into its consumer.
- A scatter is a kernel of its own (x copied to the result, then the updates combined into
  it row by row, in order), fusing the producers of its operands.
- A float32/float64 cholesky, triangular_solve, lu, qr or svd is a `LinalgStep` when the
  backend has LAPACK (`native_linalg`: llvm yes, opencl no): one native library call on
  realized operands (llvm/lapack.py), outputs first, then inputs. Half-precision linalg
  and all linalg on opencl stay host steps.

- scan, while and cond are `ControlStep`s: their sub-jaxprs compile for the same backend
  (schedule/control_flow.py; on llvm a qualifying loop is one native call, llvm/loops.py).
- argmax, cumulative ops, sort, top_k (but native ones on llvm), nested calls and non-BLAS
  dot_general never reach the schedule: schedule/expand.py rewrites them first.

HOST STEPS (the NumPy `impl` between native segments) remain only for linalg on opencl,
half-precision linalg, bool/float16/bfloat16 bitcasts and float16 without F16C; float16 and
bfloat16 otherwise compute in float32 registers, rounded after each op as ml_dtypes rounds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from fgrad.core.dtypes import NARROW_FLOATS, dtypes
from fgrad.core.ir import Eqn, Jaxpr, Var, _Names, name_vars
from fgrad.lower.schedule.control_flow import CONTROL_FLOW
from fgrad.lower.schedule.depth import depth_cuts
from fgrad.lower.schedule.gemm_layout import (PAIRS_PARAM, GemmDims, gemm_dims, gemm_reason,
                                              GemmTile, pack_gemm_operands)
from fgrad.lower.schedule.row_fusion import row_phase

UNARY = frozenset({
    "neg", "exp", "log", "sin", "cos", "tan", "tanh", "logistic", "sqrt", "rsqrt", "log1p",
    "expm1", "erf", "abs", "sign", "floor", "ceil", "round", "not", "is_nan", "stop_gradient",
    "convert_element_type", "bitcast_convert_type"})
BINARY = frozenset({
    "add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "and", "or", "xor",
    "shift_left", "shift_right", "eq", "ne", "lt", "le", "gt", "ge", "safe_mul"})
ELEMENTWISE = UNARY | BINARY | {"select"}
MOVEMENT = frozenset({"broadcast_in_dim", "reshape", "transpose", "slice", "rev", "pad",
                      "concatenate", "iota", "gather"})
REDUCE = {"reduce_sum": "add", "reduce_max": "max", "reduce_min": "min",
          "reduce_prod": "mul"}
COSTLY = frozenset({"exp", "log", "sin", "cos", "tan", "tanh", "logistic", "log1p", "expm1",
                    "erf", "pow", "atan2", "rem"})
MAX_CONCAT_INPUTS = 16
MAX_KERNEL_BUFFERS = 64  # a kernel's buffers at most (OpenCL guarantees 1 KB of arguments)
LINALG = frozenset({"cholesky", "triangular_solve", "lu", "qr", "svd"})
SEQUENCE_OPS = frozenset({"sort", "top_k", "cumsum", "cumprod", "cummax", "cummin"})
NATIVE_SEQUENCE_DTYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64,
                          dtypes.uint32, dtypes.uint64)
NATIVE_SORT_DTYPES = NATIVE_SEQUENCE_DTYPES + (dtypes.float16, dtypes.bfloat16, dtypes.int8,
                                               dtypes.uint8, dtypes.int16, dtypes.uint16)
# fgrad.distributed's collectives: one mpi4py call from the host (docs/distributed.md).
COLLECTIVES = frozenset({"psum", "pmean", "pmax", "pmin", "all_gather", "process_broadcast"})


@dataclass(frozen=True, eq=False)
class KernelStep:
    """One native kernel over a loop domain. `reduced[i]` says whether outputs[i] is a
    reduction over `axes` (else it is stored at every point of the domain, or once per
    row when its shape is the kept axes' shape). `phases` (row-fused kernels only, else
    empty): the phase of each output (module docstring)."""

    name: str
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    outputs: tuple[Var, ...]
    reduced: tuple[bool, ...]
    phases: tuple[int, ...] = ()

    @property
    def is_reduce(self) -> bool:
        """Whether some output is a reduction (then `axes` are the reduced domain axes)."""
        return any(self.reduced)

    @property
    def is_rows(self) -> bool:
        """Whether this is a row-fused kernel (outputs computed in phases per row)."""
        return bool(self.phases)


@dataclass(frozen=True, eq=False)
class HostStep:
    """One equation evaluated with its NumPy impl (temporary fallback)."""

    name: str
    eqn: Eqn
    reason: str


@dataclass(frozen=True, eq=False)
class GemmStep:
    """One float dot_general run natively as BLAS gemm calls (`dims`: the BLAS view)."""

    name: str
    eqn: Eqn
    dims: GemmDims

    @property
    def outputs(self) -> tuple[Var, ...]:
        """The product (written by the gemm calls)."""
        return (self.eqn.outvars[0],)


@dataclass(frozen=True, eq=False)
class ControlStep(HostStep):
    """A scan, while or cond: its sub-jaxprs are compiled natively for the same backend and
    the host runs the loop or picks the branch (control_flow.py). A kind of HostStep, so its
    operands and results live in buffers like a host step's."""


@dataclass(frozen=True, eq=False)
class LinalgStep:
    """One float32/64 linalg equation run natively as LAPACK calls (llvm/lapack.py)."""

    name: str
    eqn: Eqn

    @property
    def outputs(self) -> tuple[Var, ...]:
        """Every result of the equation (written by the library call)."""
        return tuple(self.eqn.outvars)


Step = Union[KernelStep, HostStep, GemmStep, LinalgStep]


@dataclass(frozen=True, eq=False)
class Schedule:
    """The ordered steps of a jaxpr, and which values live in buffers. `names`: variable
    names as the scheduled jaxpr printed them (values that packing added come last)."""

    jaxpr: Jaxpr
    steps: tuple[Step, ...]
    realized: frozenset[int]
    producers: dict[int, Eqn]

    def fused_eqns(self, step: "Step") -> list[Eqn]:
        """The equations `step` computes (all fused ones for a kernel step)."""
        if isinstance(step, KernelStep):
            return fused_eqns(self, step)
        eqn = getattr(step, "eqn", None)
        return [eqn] if eqn is not None else []
    names: _Names

    def kernels(self) -> list[KernelStep]:
        """The kernel steps, in order."""
        return [s for s in self.steps if isinstance(s, KernelStep)]

    def hosts(self) -> list[HostStep]:
        """The host steps (NumPy impl fallbacks), in order."""
        return [s for s in self.steps
                if isinstance(s, HostStep) and not isinstance(s, ControlStep)]

    def controls(self) -> list[ControlStep]:
        """The control-flow steps (natively compiled bodies), in order."""
        return [s for s in self.steps if isinstance(s, ControlStep)]

    def gemms(self) -> list[GemmStep]:
        """The native matmul steps, in order."""
        return [s for s in self.steps if isinstance(s, GemmStep)]

    def linalgs(self) -> list[LinalgStep]:
        """The native linalg (LAPACK) steps, in order."""
        return [s for s in self.steps if isinstance(s, LinalgStep)]

    def __str__(self) -> str:
        return pp_schedule(self)


# ---------------------------------------------------------------------------- support


def host_reason(eqn: Eqn, half_native: bool = True, native_linalg: bool = True
                ) -> str | None:
    """Why `eqn` cannot run in a native kernel yet (None: it can). `native_linalg`: whether
    the backend calls LAPACK for float32/64 linalg."""
    name = eqn.primitive.name
    if name in LINALG:
        return linalg_reason(eqn, native_linalg)
    if name in SEQUENCE_OPS:
        return None if native_sequence_applies(eqn, native_linalg) else (
            f"{name} of this dtype is expanded before scheduling; a bug in expand")
    if name in CONTROL_FLOW:
        return "sub-programs compiled natively; the host runs the loop / picks the branch"
    if name == "dot_general":
        return gemm_reason(eqn)
    if name in COLLECTIVES:
        return "an MPI collective: one mpi4py call on the host (docs/distributed.md)"
    if name not in ELEMENTWISE and name not in MOVEMENT and name not in REDUCE \
            and name != "scatter":
        return f"no native kernel for {name} yet"
    avals = [a.aval for a in eqn.inputs] + [v.aval for v in eqn.outvars]
    if not half_native and any(a.dtype == dtypes.float16 for a in avals):
        return "this CPU lacks F16C, so float16 runs on the NumPy impl"
    if name == "bitcast_convert_type" and any(a.dtype in (dtypes.bool, *NARROW_FLOATS)
                                              for a in avals):
        return "bitcasts of bool/float16/bfloat16 run on the NumPy impl"
    if name == "concatenate" and len(eqn.inputs) > MAX_CONCAT_INPUTS:
        return f"concatenate of more than {MAX_CONCAT_INPUTS} operands"
    return None


def native_sequence_applies(eqn: Eqn, native_library: bool = True) -> bool:
    """Whether a sort, top_k or cumulative op is one native library call (llvm/sequences.py)
    on a backend with library calls; others are expanded (schedule/expand.py)."""
    dtype, name = eqn.inputs[0].aval.dtype, eqn.primitive.name
    return native_library and name in SEQUENCE_OPS and dtype in (
        NATIVE_SORT_DTYPES if name in ("sort", "top_k") else NATIVE_SEQUENCE_DTYPES)


def linalg_reason(eqn: Eqn, native_linalg: bool) -> str | None:
    """Why a linalg equation runs on the host (None: it is a native LAPACK call)."""
    if not native_linalg:
        return "this backend has no LAPACK"
    if eqn.inputs[0].aval.dtype not in (dtypes.float32, dtypes.float64):
        return "LAPACK has no half precision; the NumPy impl computes it in float32"
    return None


# ---------------------------------------------------------------------------- realization


class _Graph:
    """Producers, consumers and the host/native split of a jaxpr."""

    def __init__(self, jaxpr: Jaxpr, half_native: bool, native_linalg: bool = True):
        if jaxpr.constvars:
            raise ValueError("schedule: the jaxpr must have no constvars (open it first)")
        self.jaxpr = jaxpr
        self.producers = {id(v): e for e in jaxpr.eqns for v in e.outvars}
        self.consumers: dict[int, list[Eqn]] = {}
        for e in jaxpr.eqns:
            for a in {id(a): a for a in e.inputs if isinstance(a, Var)}.values():
                self.consumers.setdefault(id(a), []).append(e)
        self.reasons = {id(e): host_reason(e, half_native, native_linalg)
                        for e in jaxpr.eqns}

    def is_host(self, eqn: Eqn) -> bool:
        return self.reasons[id(eqn)] is not None

    def is_reduce(self, eqn: Eqn) -> bool:
        return not self.is_host(eqn) and eqn.primitive.name in REDUCE

    def is_gemm(self, eqn: Eqn) -> bool:
        return not self.is_host(eqn) and eqn.primitive.name == "dot_general"

    def is_linalg(self, eqn: Eqn) -> bool:
        return not self.is_host(eqn) and (eqn.primitive.name in LINALG
                                          or eqn.primitive.name in SEQUENCE_OPS)

    def is_opaque(self, eqn: Eqn) -> bool:
        """Host steps, gemms and linalg calls: their operands and results live in buffers."""
        return self.is_host(eqn) or self.is_gemm(eqn) or self.is_linalg(eqn)


def _structural_realized(g: _Graph) -> set[int]:
    out = {id(v) for v in g.jaxpr.invars}
    out |= {id(v) for v in g.jaxpr.outvars if isinstance(v, Var)}
    for e in g.jaxpr.eqns:
        if g.is_opaque(e):
            out |= {id(a) for a in e.inputs if isinstance(a, Var)}
            out |= {id(v) for v in e.outvars}
        elif g.is_reduce(e) or _is_scatter(e):
            out |= {id(v) for v in e.outvars}
    return out


def _is_scatter(eqn: Eqn | None) -> bool:
    return eqn is not None and eqn.primitive.name == "scatter"


def is_scatter_step(sched: Schedule, step: KernelStep) -> bool:
    """Whether `step` is a scatter kernel (kernel/build_scatter.py): it computes one scatter
    and nothing else, since its updates do not fuse as a function of the output index."""
    return _is_scatter(sched.producers.get(id(step.outputs[0])))


def _expands(eqn: Eqn) -> bool:
    return eqn.primitive.name == "broadcast_in_dim" and \
        eqn.outvars[0].aval.size > eqn.inputs[0].aval.size


def realize(g: _Graph) -> set[int]:
    """The ids of every value that lives in a buffer (module docstring; schedule/depth.py)."""
    realized = _structural_realized(g)
    trivial: set[int] = set()
    costly: set[int] = set()
    for e in g.jaxpr.eqns:
        if g.is_opaque(e) or g.is_reduce(e):
            continue
        name = e.primitive.name
        for a in e.inputs:
            if not isinstance(a, Var) or id(a) in realized or id(a) in trivial:
                continue
            users = g.consumers[id(a)]
            indexed = any(u.primitive.name in MOVEMENT - {"reshape"} for u in users)
            if (len(users) > 1 and indexed) or (_expands(e) and id(a) in costly):
                realized.add(id(a))
        ins = [a for a in e.inputs if isinstance(a, Var) and id(a) not in realized]
        out = id(e.outvars[0])
        if name in MOVEMENT and all(id(a) in trivial for a in ins):
            trivial.add(out)
        if name in COSTLY or any(id(a) in costly for a in ins):
            costly.add(out)
    return realized | depth_cuts(g.jaxpr.eqns, realized)


# ---------------------------------------------------------------------------- steps


def leaves(g: _Graph, var: Var, realized: set[int], inline: set[int]) -> set[int]:
    """Ids of the realized values a kernel computing `var` reads (`inline`: own outputs)."""
    found: set[int] = set()
    stack, seen = [var], set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if id(v) in realized and (v is not var) and id(v) not in inline:
            found.add(id(v))
            continue
        eqn = g.producers[id(v)]
        if g.is_reduce(eqn) and v is not var:
            found.add(id(v))
            continue
        stack.extend(a for a in eqn.inputs if isinstance(a, Var))
    return found


def _domain(g: _Graph, eqn: Eqn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if g.is_reduce(eqn):
        return eqn.inputs[0].aval.shape, eqn.params["axes"]
    return eqn.outvars[0].aval.shape, ()


def _can_merge(g: _Graph, prev: Step, eqn: Eqn, var: Var, realized: set[int]) -> bool:
    if not isinstance(prev, KernelStep) or prev.is_rows:
        return False
    shape, axes = _domain(g, eqn)
    if shape != prev.shape or (g.is_reduce(eqn) and prev.is_reduce and axes != prev.axes):
        return False
    reduce_outs = {id(v) for v, r in zip(prev.outputs, prev.reduced, strict=True) if r}
    own = {id(v) for v in prev.outputs} - reduce_outs
    return not leaves(g, var, realized, own) & reduce_outs


def _gathers_own(g: _Graph, prev: KernelStep, eqn: Eqn, realized: set[int]) -> bool:
    """Whether `eqn` reads one of `prev`'s outputs through a gather it computes inline (row
    fusion cannot follow a row through a run-time index)."""
    own = {id(v) for v in prev.outputs}
    stack, seen = [(eqn, False)], set()
    while stack:
        e, under = stack.pop()
        if (id(e), under) in seen:
            continue
        seen.add((id(e), under))
        under = under or e.primitive.name == "gather"
        for a in e.inputs:
            if not isinstance(a, Var):
                continue
            if under and id(a) in own:
                return True
            if (id(a) not in realized or id(a) in own) and id(a) in g.producers:
                stack.append((g.producers[id(a)], under))
    return False


def kernel_buffers(g: _Graph, outputs: tuple[Var, ...], realized: set[int]) -> int:
    """How many buffers a kernel computing `outputs` takes: the outputs and what they read."""
    own = {id(v) for v in outputs}
    found = set(own)
    for v in outputs:
        found |= leaves(g, v, realized, own)
    return len(found)


def _merged(g: _Graph, prev: Step | None, eqn: Eqn, var: Var, realized: set[int]
            ) -> KernelStep | None:
    """`prev` with `var` added as one more output, or None if they stay apart (a scatter
    kernel computes its scatter alone)."""
    if not isinstance(prev, KernelStep) or _is_scatter(eqn) \
            or _is_scatter(g.producers.get(id(prev.outputs[0]))) \
            or kernel_buffers(g, prev.outputs + (var,), realized) > MAX_KERNEL_BUFFERS:
        return None
    red = g.is_reduce(eqn)
    if _can_merge(g, prev, eqn, var, realized):
        shape, axes = _domain(g, eqn)
        return KernelStep(prev.name, shape, prev.axes if prev.is_reduce else axes,
                          prev.outputs + (var,), prev.reduced + (red,))
    phase = None if _gathers_own(g, prev, eqn, realized) else row_phase(g, prev, eqn, var,
                                                                         realized)
    if phase is None:
        return None
    phases = prev.phases or (0,) * len(prev.outputs)
    return KernelStep(prev.name, prev.shape, prev.axes, prev.outputs + (var,),
                      prev.reduced + (red,), phases + (phase,))


def build_steps(g: _Graph, realized: set[int]) -> list[Step]:
    """Kernel and host steps in program order, merging consecutive compatible kernels."""
    steps: list[Step] = []
    for eqn in g.jaxpr.eqns:
        if eqn.primitive.name in CONTROL_FLOW:
            steps.append(ControlStep(f"c{len(steps)}", eqn, g.reasons[id(eqn)] or ""))
            continue
        if g.is_host(eqn):
            steps.append(HostStep(f"h{len(steps)}", eqn, g.reasons[id(eqn)] or ""))
            continue
        if g.is_gemm(eqn):
            dims = gemm_dims(eqn)
            assert dims is not None
            steps.append(GemmStep(f"g{len(steps)}", eqn, dims))
            continue
        if g.is_linalg(eqn):
            steps.append(LinalgStep(f"l{len(steps)}", eqn))
            continue
        var = eqn.outvars[0]
        if id(var) not in realized:
            continue
        merged = _merged(g, steps[-1] if steps else None, eqn, var, realized)
        if merged is not None:
            steps[-1] = merged
        else:
            shape, axes = _domain(g, eqn)
            steps.append(KernelStep(f"k{len(steps)}", shape, axes, (var,),
                                    (g.is_reduce(eqn),)))
    return steps


def schedule(jaxpr: Jaxpr, half_native: bool = True, native_linalg: bool = True,
             source: Jaxpr | None = None,
             pair_products: Callable[[Eqn], bool] | None = None,
             gemm_tile: GemmTile | None = None) -> Schedule:
    """Partition `jaxpr` into kernels, gemms, linalg calls and host steps (module
    docstring). The schedule's jaxpr is `jaxpr` after `pack_gemm_operands` (same inputs and
    outputs). `native_linalg`: whether float32/64 linalg calls LAPACK (llvm) or runs on the
    host (opencl). `source`: the jaxpr the user sees printed, when `jaxpr` was rewritten from
    it (expansion, CSE): its values keep the names it prints, new values are named after.
    `pair_products`, `gemm_tile`: see `pack_gemm_operands`."""
    g = _Graph(pack_gemm_operands(jaxpr, pair_products, gemm_tile), half_native, native_linalg)
    names = jaxpr_names(jaxpr if source is None else source)
    if source is not None and source is not jaxpr:
        name_vars(jaxpr, names)
    if g.jaxpr is not jaxpr:
        name_vars(g.jaxpr, names)  # names the packed operands after every original value
    realized = realize(g)
    steps = _regroup.arrange(g, build_steps(g, realized), realized)
    return Schedule(g.jaxpr, tuple(steps), frozenset(realized), g.producers, names)


# ---------------------------------------------------------------------------- printing


def fused_eqns(sched: Schedule, step: KernelStep) -> list[Eqn]:
    """The equations a kernel computes, in program order (shared ones are recomputed)."""
    own = {id(v) for v, r in zip(step.outputs, step.reduced, strict=True) if not r}
    picked: set[int] = set()
    stack = list(step.outputs)
    while stack:
        v = stack.pop()
        eqn = sched.producers.get(id(v))
        if eqn is None or id(eqn) in picked:
            continue
        picked.add(id(eqn))
        for a in eqn.inputs:
            inline = id(a) not in sched.realized or id(a) in own
            if isinstance(a, Var) and inline and not _is_reduction(sched, a, step):
                stack.append(a)
    return [e for e in sched.jaxpr.eqns if id(e) in picked]


def _is_reduction(sched: Schedule, v: Var, step: KernelStep) -> bool:
    eqn = sched.producers.get(id(v))
    return eqn is not None and eqn.primitive.name in REDUCE and id(v) in sched.realized


def jaxpr_names(jaxpr: Jaxpr) -> _Names:
    """Variable names exactly as `str(jaxpr)` prints them."""
    names = _Names()
    name_vars(jaxpr, names)
    return names


def kernel_reads(sched: Schedule, step: KernelStep) -> list[Var]:
    """The buffers a kernel reads, in first-use order."""
    outs = {id(v) for v in step.outputs}
    seen: dict[int, Var] = {}
    for eqn in fused_eqns(sched, step):
        for a in eqn.inputs:
            if isinstance(a, Var) and id(a) in sched.realized and id(a) not in outs:
                seen.setdefault(id(a), a)
    return list(seen.values())


def _shape_text(shape: tuple[int, ...]) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


def pp_gemm(step: GemmStep, names: _Names) -> str:
    """`g3: gemm f32 batch=() m=4 n=3 k=8 (a b) -> (c)  # dot_general lhs N rhs T (BLAS)`."""
    d = step.dims
    ins = " ".join(names(a) for a in step.eqn.inputs)
    flags = f"lhs {'NT'[d.lhs.trans]} rhs {'NT'[d.rhs.trans]}"
    patches = step.eqn.params.get("rhs_patches")
    how = "(BLAS)" if patches is None else \
        f"(implicit GEMM: rhs {patches!r} of {names(step.eqn.inputs[1])})"
    if step.eqn.params.get(PAIRS_PARAM):
        how = "(bfloat16 operands in pairs of k steps: AMX tiles or vdpbf16ps)"
    shared = step.eqn.params.get("broadcast_operands", (None, None))
    for side, read in zip(("lhs", "rhs"), shared):
        if read is not None:
            how += f" ({side} shared over {read.leading} batch axes: stride 0)" \
                if read.leading else f" ({side} read through a reshape)"
    return (f"  {step.name}: gemm {step.eqn.outvars[0].aval.dtype.short} batch={d.batch} "
            f"m={d.m} n={d.n} k={d.k} ({ins}) -> ({names(step.eqn.outvars[0])})  "
            f"# dot_general {flags} {how}")


def pp_linalg(step: LinalgStep, names: _Names) -> str:
    """`l2: lapack cholesky f32[4,3,3] (a) -> (b)  # native library call`."""
    eqn = step.eqn
    aval = eqn.inputs[0].aval
    ins = " ".join(names(a) for a in eqn.inputs)
    outs = " ".join(names(v) for v in eqn.outvars)
    return (f"  {step.name}: lapack {eqn.primitive.name} {aval.dtype.short}"
            f"{_shape_text(aval.shape)} ({ins}) -> ({outs})  # native library call")


def pp_schedule(sched: Schedule) -> str:
    """One line per step: kind, domain, buffers read and written, fused equations."""
    names = sched.names
    n_k, n_g, n_h = len(sched.kernels()), len(sched.gemms()), len(sched.hosts())
    gemms = f"{n_g} gemm{'s' * (n_g != 1)}, " if n_g else ""
    n_l = len(sched.linalgs())
    gemms += f"{n_l} lapack call{'s' * (n_l != 1)}, " if n_l else ""
    n_c = len(sched.controls())
    controls = f"{n_c} control-flow step{'s' * (n_c != 1)}, " if n_c else ""
    lines = [f"schedule: {n_k} kernel{'s' * (n_k != 1)}, {gemms}{controls}"
             f"{n_h} host step{'s' * (n_h != 1)}"]
    for step in sched.steps:
        if isinstance(step, GemmStep):
            lines.append(pp_gemm(step, names))
            continue
        if isinstance(step, LinalgStep):
            lines.append(pp_linalg(step, names))
            continue
        if isinstance(step, HostStep):
            ins = " ".join(names(a) for a in step.eqn.inputs)
            outs = " ".join(names(v) for v in step.eqn.outvars)
            control = isinstance(step, ControlStep)
            kind, why = ("", step.reason) if control else \
                ("host ", f"NumPy impl, temporary fallback: {step.reason}")
            lines.append(f"  {step.name}: {kind}{step.eqn.primitive.name} ({ins}) -> "
                         f"({outs})  # {why}")
            continue
        dtype = step.outputs[0].aval.dtype.short
        kind = f"reduce axes={step.axes}" if step.is_reduce else "elementwise"
        if is_scatter_step(sched, step):
            kind = "scatter (copy, then update rows in order)"
        if step.is_rows:
            kind = f"rows axes={step.axes} phases={max(step.phases) + 1}"
        ins = " ".join(names(v) for v in kernel_reads(sched, step))
        outs = " ".join(names(v) for v in step.outputs)
        ops = " ".join(e.primitive.name for e in fused_eqns(sched, step))
        lines.append(f"  {step.name}: kernel {kind} {dtype}{_shape_text(step.shape)} "
                     f"({ins}) -> ({outs})  # {ops}")
    return "\n".join(lines)

from fgrad.lower.schedule import regroup as _regroup  # noqa: E402 (it builds on this module)
