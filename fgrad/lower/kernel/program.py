"""Program: a schedule with its kernels built and its buffers planned; backend-neutral.

In: a Jaxpr without constvars. Out: a `Program`: the schedule, one `Kernel` per kernel step,
`actions` (host steps, control-flow steps and `Segment`s of consecutive kernels and library
calls, each segment one native call on a table of buffer slots), `library_calls` (the
equation of each library call in a segment: a dot_general is a BLAS gemm on llvm and a tiled
kernel on opencl; cholesky/triangular_solve/lu/qr/svd are LAPACK calls on llvm; slots are
the outputs, then the inputs), and the intermediate buffer plan (`buffer_of`,
`buffer_bytes`): a buffer whose value is dead is reused by a later output of the same size.
`schedule/expand.py` first rewrites primitives without kernels of their own (argmax, cumulative ops,
sort, nested calls, non-BLAS dot_general) into primitives that have them.
Both the llvm and the opencl runtimes execute a Program; only rendering differs.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, cast

from fgrad.core.ir import Atom, Eqn, Jaxpr, Var
from fgrad.lower.schedule.cse import cse
from fgrad.lower.schedule.expand import expand
from fgrad.lower.schedule.gemm_layout import GemmTile
from fgrad.lower.kernel.build import build_kernel
from fgrad.lower.kernel.ir import Kernel
from fgrad.lower.schedule.partition import (GemmStep, HostStep, KernelStep, LinalgStep,
                                            Schedule, schedule)

Call = tuple[str, list[int]]  # (kernel or library call name, buffer slot of each parameter)

@dataclass
class Segment:
    """Consecutive kernels and library calls run by one native call; `table` lists the
    buffer of each slot; `allocs` the values the segment writes."""

    calls: list[Call] = field(default_factory=list)
    table: list[Var] = field(default_factory=list)
    allocs: list[Var] = field(default_factory=list)

    def slot(self, var: Var) -> int:
        """The table slot of `var`'s buffer (added on first use)."""
        for i, v in enumerate(self.table):
            if v is var:
                return i
        self.table.append(var)
        return len(self.table) - 1


@dataclass
class Program:
    """Everything a call needs: the steps, the kernels, and where every buffer lives."""

    jaxpr: Jaxpr
    schedule: Schedule
    kernels: list[Kernel]
    actions: list[Segment | HostStep]
    buffer_of: dict[int, int]      # var id -> intermediate buffer number
    buffer_bytes: list[int]
    library_calls: dict[str, Eqn] = field(default_factory=dict)  # name -> equation
    epilogues: dict[str, str] = field(default_factory=dict)  # gemm call -> fused kernel
    # gemm calls whose product only their fused kernel reads (a backend may then skip it)
    private_products: frozenset[str] = frozenset()
    # var id of a private product the backend never stores (its epilogue runs in registers
    # and accumulates in the kernel's output) -> that output, whose array its slot names
    unstored: dict[int, Var] = field(default_factory=dict)


# (the gemm's equation, the kernel right after it, the kernel's buffer of the gemm's output)
# -> whether the backend runs that kernel inside the gemm call, as its epilogue
EpilogueTest = Callable[[Eqn, Kernel, int], bool]
# (the gemm's equation, its fused kernel) -> whether the backend computes that epilogue in
# the gemm's registers, accumulating a private product in the kernel's output
RegisterTest = Callable[[Eqn, Kernel], bool]


def _last_uses(sched: Schedule, kernel_params: dict[int, list[Var]],
               fused: frozenset[int] = frozenset()) -> dict[int, int]:
    """The last step reading each value; a gemm's operands count as read by its fused
    epilogue (step n in `fused`) too, which runs while the gemm still reads them."""
    last: dict[int, int] = {}
    for n, step in enumerate(sched.steps):
        reads: list[Atom] = list(kernel_params[n]) if isinstance(step, KernelStep) \
            else list(step.eqn.inputs)
        if n in fused:
            reads += cast(GemmStep, sched.steps[n - 1]).eqn.inputs
        for v in reads:
            if isinstance(v, Var):
                last[id(v)] = n
    return last


def _assign_buffers(sched: Schedule, kernel_params: dict[int, list[Var]],
                    fused: frozenset[int] = frozenset(), unstored: frozenset[int] = frozenset()
                    ) -> tuple[dict[int, int], list[int]]:
    """Give each intermediate kernel output a buffer (but the `unstored` var ids); reuse
    dead buffers of equal size."""
    last = _last_uses(sched, kernel_params, fused)
    keep = {id(v) for v in sched.jaxpr.outvars if isinstance(v, Var)} | unstored
    buffer_of: dict[int, int] = {}
    sizes: list[int] = []
    free: dict[int, list[int]] = {}
    live: list[int] = []
    for n, step in enumerate(sched.steps):
        outs = step.outputs if isinstance(step, (KernelStep, GemmStep, LinalgStep)) else ()
        for v in outs:
            if id(v) in keep:
                continue
            nbytes = v.aval.size * v.aval.dtype.itemsize
            pool = free.get(nbytes)
            buffer_of[id(v)] = pool.pop() if pool else len(sizes)
            if buffer_of[id(v)] == len(sizes):
                sizes.append(nbytes)
            live.append(id(v))
        for key in [k for k in live if last.get(k, n) <= n]:
            live.remove(key)
            free.setdefault(sizes[buffer_of[key]], []).append(buffer_of[key])
    return buffer_of, sizes


def _reader_counts(sched: Schedule, kernel_params: dict[int, list[Var]],
                   kernels: dict[int, Kernel]) -> dict[int, int]:
    """How many steps read each value (by var id); program outputs count as a reader."""
    count: dict[int, int] = {}
    for n, step in enumerate(sched.steps):
        if isinstance(step, KernelStep):
            reads = [v for v, p in zip(kernel_params[n], kernels[n].params) if not p.written]
        else:
            reads = [a for a in step.eqn.inputs if isinstance(a, Var)]
        for key in {id(v) for v in reads}:
            count[key] = count.get(key, 0) + 1
    for out in sched.jaxpr.outvars:
        count[id(out)] = count.get(id(out), 0) + 1
    return count


def _epilogue_of(sched: Schedule, n: int, segment: "Segment | None", kernel: Kernel,
                 params: list[Var], epilogue_ok: EpilogueTest | None
                 ) -> tuple[GemmStep, int] | None:
    """The gemm step that kernel step `n` can run inside as its epilogue (the segment's last
    call, which the backend accepts) and the kernel's parameter that holds its product.
    Other steps may read the gemm's output too (W5's backward relu mask reads the
    pre-activation): the buffer planner keeps it alive for them, and never gives the
    kernel's output a buffer that the gemm call still uses (its operands count as read by
    the kernel, `_last_uses`)."""
    previous = sched.steps[n - 1] if n else None
    if epilogue_ok is None or segment is None or not isinstance(previous, GemmStep) \
            or segment.calls[-1][0] != previous.name:
        return None
    out = previous.outputs[0]
    where = [i for i, v in enumerate(params) if v is out and not kernel.params[i].written]
    if len(where) != 1:
        return None
    return (previous, where[0]) if epilogue_ok(previous.eqn, kernel, where[0]) else None


def plan(jaxpr: Jaxpr, half_native: bool = True, native_linalg: bool = True,
         call_per_segment: bool = False, epilogue_ok: EpilogueTest | None = None,
         in_registers: RegisterTest | None = None,
         implicit_gemm: Callable[[Eqn], bool] | None = None,
         pair_products: Callable[[Eqn], bool] | None = None,
         gemm_tile: GemmTile | None = None,
         on_final_kernel: Callable[[Kernel], None] = lambda kernel: None,
         rewrite: Callable[[Jaxpr], Jaxpr] = lambda jaxpr: jaxpr) -> Program:
    """Schedule `jaxpr`, build every kernel, group consecutive kernels into segments.
    `half_native`: whether float16 may be computed in kernels (else host steps);
    `native_linalg`: whether float32/64 linalg and sort are library calls (else host
    steps, and sort a bitonic network);
    `call_per_segment`: one kernel or library call per segment (the profiling build, which
    times each segment); `epilogue_ok`: which elementwise kernels right after a gemm run
    inside the gemm's call (the gemm call's slots are then its own, then the kernel's);
    `in_registers`: which of those the backend computes in registers, so that a product
    only they read needs no buffer (`Program.unstored`); `implicit_gemm`: which products
    of conv_patches the backend's GEMM computes from the image (schedule/fuse_patches.py);
    `pair_products`: which products of bfloat16 arrays it multiplies in pairs
    (schedule/gemm_layout.py `pack_gemm_operands`); `gemm_tile`: its GEMM's (MR, NR) tile
    by element size, so that a product narrower than it is computed swapped (same place);
    `on_final_kernel(kernel)` runs as soon as a kernel is built that planning will not change
    (one that cannot become a gemm's epilogue), e.g. to start compiling it; `rewrite`: the
    backend's own rewrite of the expanded jaxpr (llvm splits large reductions, also those
    that argmax and inlined calls expand into)."""
    source, jaxpr = jaxpr, rewrite(cse(expand(jaxpr, native_linalg, implicit_gemm)))
    sched = schedule(jaxpr, half_native, native_linalg, source=source,
                     pair_products=pair_products, gemm_tile=gemm_tile)
    names = sched.names
    kernels: list[Kernel] = []
    kernel_params: dict[int, list[Var]] = {}
    actions: list[Segment | HostStep] = []
    library_calls: dict[str, Eqn] = {}
    epilogues: dict[str, str] = {}
    fused: set[int] = set()
    products: dict[str, int] = {}
    in_place: dict[str, Var] = {}   # gemm call -> the output its register epilogue writes
    built: dict[int, tuple[Kernel, list[Var]]] = {}
    for n, step in enumerate(sched.steps):
        if isinstance(step, KernelStep):
            built[n] = build_kernel(sched, step, names)
            if not call_per_segment and (n == 0 or not isinstance(sched.steps[n - 1], GemmStep)):
                on_final_kernel(built[n][0])
    segment: Segment | None = None
    for n, step in enumerate(sched.steps):
        if isinstance(step, HostStep):
            actions.append(step)
            segment = None
            continue
        if isinstance(step, (GemmStep, LinalgStep)):
            # operands are variables: gemm_reason rules out literals, linalg reads matrices
            name, params = step.name, [*step.outputs, *(cast(Var, a) for a in step.eqn.inputs)]
            library_calls[name] = step.eqn
        else:
            kernel, params = built[n]
            kernels.append(kernel)
            kernel_params[n] = params
            name = kernel.name
            found = _epilogue_of(sched, n, segment, kernel, params, epilogue_ok)
            if found is not None and segment is not None and not call_per_segment:
                gemm, product = found
                kernels[-1] = replace(kernel, row_range=True, product=product)
                own, slots = segment.calls[-1]
                segment.calls[-1] = (own, slots + [segment.slot(v) for v in params])
                segment.allocs.extend(step.outputs)
                epilogues[own] = name
                products[own] = id(gemm.outputs[0])
                if in_registers is not None and len(step.outputs) == 1 \
                        and in_registers(gemm.eqn, kernels[-1]):
                    in_place[own] = step.outputs[0]
                fused.add(n)
                continue
        if segment is None or call_per_segment:
            segment = Segment()
            actions.append(segment)
        segment.calls.append((name, [segment.slot(v) for v in params]))
        segment.allocs.extend(step.outputs)
    readers = _reader_counts(sched, kernel_params, {n: k for n, (k, _) in built.items()})
    private = frozenset(g for g, v in products.items() if readers.get(v) == 1)
    unstored = {products[g]: out for g, out in in_place.items() if g in private}
    buffer_of, sizes = _assign_buffers(sched, kernel_params, frozenset(fused),
                                       frozenset(unstored))
    return Program(jaxpr, sched, kernels, actions, buffer_of, sizes, library_calls, epilogues,
                   private, unstored)
