"""How close fgrad's GEMM micro-kernel can come to the FMA probe on this machine, one thread.

Four loops timed in turn in one process (rounds interleaved, so a neighbour's load on the
host falls on all of them alike), each as GFLOP/s and as a share of the first:
- `probe`: bench/peak.py's loop of independent FMAs on registers (the W3 goal's ceiling);
- `k steps`: the micro-kernel's k step alone, synthetic: MR broadcast loads of A, NR/L
  vector loads of B and MR * NR/L FMAs into accumulators, over packed slivers in L1;
- `tile column, L1`: the shipped `<prefix>_tiles` routine (jr loop, micro-kernel, C tiles
  written back) on one A sliver and one B sliver, everything in L1;
- `driver block`: the same routine on the blocks the driver gives it for a 1024^3 product
  (A 144 x 256 packed, B 256 x 1024 packed, C rows 1024 wide).

`--products` times whole n x n float32 products on every core instead (fgrad's llvm
backend, JAX and PyTorch where installed), each round the all-core probe first: a share of
the probe measured in the same seconds, where bench/run.py divides by the best of the
probes run before and after the whole table (on a shared host, a quieter minute). With
`--one-thread`, each library and the probe run on one core (`FGRAD_NUM_THREADS=1`,
XLA's single-threaded Eigen, `torch.set_num_threads(1)`, the process's affinity): the
micro-kernel and the loops around it against theirs, without the split over cores.

Run: python bench/gemm_ceiling.py [rounds] [--products [--one-thread]]. Only the llvm
backend's float32 GEMM at the host's vector width; the results go in docs/performance.md,
never into tests.
"""
from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

import peak
from harness import available
from fgrad.lower.llvm import kernel_cache, target
from fgrad.lower.llvm.gemm.driver import routine_text, tiles_args
from fgrad.lower.llvm.gemm.native import KC, MC_TARGET, routine_prefix, tile_shape

WORK_FLOPS = 4e8   # per timed call of each loop


def _k_step_ir(mr: int, vectors: int, lanes: int, span: int) -> str:
    """`void k_steps(i64 n, float* a, float* b, float* out)`: n k steps of an MR x
    vectors*lanes tile over slivers of `span` steps, then the sums stored to out."""
    vec = f"<{lanes} x float>"
    lines = ["define void @k_steps(i64 %n, float* noalias %a, float* noalias %b, "
             "float* noalias %out) {", "entry:", "  br label %loop", "loop:",
             "  %i = phi i64 [0, %entry], [%i2, %loop]"]
    lines += [f"  %c{r}_{v} = phi {vec} [zeroinitializer, %entry], [%d{r}_{v}, %loop]"
              for r in range(mr) for v in range(vectors)]
    lines += [f"  %k = and i64 %i, {span - 1}", f"  %bo = mul i64 %k, {lanes * vectors}",
              f"  %ao = mul i64 %k, {mr}"]
    for v in range(vectors):
        lines += [f"  %bo{v} = add i64 %bo, {lanes * v}",
                  f"  %bp{v} = getelementptr inbounds float, float* %b, i64 %bo{v}",
                  f"  %bc{v} = bitcast float* %bp{v} to {vec}*",
                  f"  %bv{v} = load {vec}, {vec}* %bc{v}, align 4"]
    for r in range(mr):
        lines += [f"  %ai{r} = add i64 %ao, {r}",
                  f"  %ap{r} = getelementptr inbounds float, float* %a, i64 %ai{r}",
                  f"  %x{r} = load float, float* %ap{r}",
                  f"  %ins{r} = insertelement {vec} undef, float %x{r}, i32 0",
                  f"  %s{r} = shufflevector {vec} %ins{r}, {vec} undef, "
                  f"<{lanes} x i32> zeroinitializer"]
        lines += [f"  %d{r}_{v} = call {vec} @llvm.fma.v{lanes}f32({vec} %s{r}, {vec} %bv{v}, "
                  f"{vec} %c{r}_{v})" for v in range(vectors)]
    lines += ["  %i2 = add i64 %i, 1", "  %more = icmp slt i64 %i2, %n",
              "  br i1 %more, label %loop, label %done", "done:"]
    total = "zeroinitializer"
    for r in range(mr):
        for v in range(vectors):
            lines.append(f"  %t{r}_{v} = fadd {vec} {total}, %d{r}_{v}")
            total = f"%t{r}_{v}"
    lines += [f"  %op = bitcast float* %out to {vec}*", f"  store {vec} {total}, {vec}* %op, "
              "align 4", "  ret void", "}",
              f"declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})"]
    return "\n".join(lines)


def _tiles_loop(tiles_name: str) -> str:
    """A module calling the shared `tiles` routine `reps` times: `bench_loop(reps, ...)`."""
    module = ir.Module(name="gemm_ceiling")
    module.triple, module.data_layout = target.triple_and_layout()
    args = tiles_args(ir.FloatType().as_pointer())
    i64 = ir.IntType(64)
    tiles = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name=tiles_name)
    loop = ir.Function(module, ir.FunctionType(ir.VoidType(), [i64, *args]), name="bench_loop")
    entry, head, body, done = (loop.append_basic_block(n) for n in ("e", "h", "b", "d"))
    b = ir.IRBuilder(entry)
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    b.cbranch(b.icmp_signed("<", i, loop.args[0]), body, done)
    b.position_at_end(body)
    b.call(tiles, loop.args[1:])
    i.add_incoming(b.add(i, ir.Constant(i64, 1)), body)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return str(module)


def _engine(text: str, linked: tuple[bytes, ...] = ()) -> llvm.ExecutionEngine:
    """An engine running `text` compiled as fgrad compiles its GEMM routines, with the
    `linked` objects."""
    triple = target.triple_and_layout()[0]
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(f'target triple = "{triple}"'),
                                        target.new_machine())
    for obj in (kernel_cache.object_code_for(text, kernel_cache.SCHEDULED), *linked):
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    return engine


Loop = tuple[Callable[[], None], float]   # a call and the FLOPs it does


def _native(engine: llvm.ExecutionEngine, name: str, *types: type) -> Callable[..., None]:
    """A ctypes caller of `name` in `engine` that keeps the engine alive."""
    fn = ctypes.CFUNCTYPE(None, *types)(engine.get_function_address(name))
    return lambda *args: fn(*args) if engine else None


def _probe_loop(lanes: int) -> Loop:
    engine = _engine(peak.probe_ir(lanes))
    fma = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float)(
        engine.get_function_address("fma_loop"))
    trips = int(WORK_FLOPS / (peak.CHAINS * lanes * 2))
    return (lambda: fma(trips, 0.999) if engine else None), trips * peak.CHAINS * lanes * 2.0


def _k_steps_loop(mr: int, nr: int, lanes: int, span: int = 256) -> Loop:
    a = np.random.rand(span * mr).astype(np.float32)
    b = np.random.rand(span * nr).astype(np.float32)
    out = np.zeros(lanes, np.float32)
    k_steps = _native(_engine(_k_step_ir(mr, nr // lanes, lanes, span)), "k_steps",
                      ctypes.c_int64, *[ctypes.c_void_p] * 3)
    steps = int(WORK_FLOPS / (2 * mr * nr))
    return (lambda: k_steps(steps, a.ctypes.data, b.ctypes.data, out.ctypes.data),
            steps * 2.0 * mr * nr)


def _tiles_loops(mr: int, nr: int, blocks: dict[str, tuple[int, int]] | None = None
                 ) -> dict[str, Loop]:
    """The tiles routine over `blocks` (name -> (rows of A, columns of B); default: the
    module docstring's two)."""
    micro = kernel_cache.object_code_for(routine_text("float32", "micro"),
                                         kernel_cache.SCHEDULED)
    engine = _engine(_tiles_loop(f"{routine_prefix(ir.FloatType(), 4)}_tiles"), (micro,))
    p, i64 = ctypes.c_void_p, ctypes.c_int64
    bench_loop = _native(engine, "bench_loop", i64, i64, p, p, p, i64, i64, i64, ctypes.c_bool,
                         i64, p, p, ctypes.c_bool, i64, i64)
    found: dict[str, Loop] = {}
    blocks = blocks or {"tile column, L1": (mr, nr),
                        "driver block": (MC_TARGET // mr * mr, 1024)}
    for name, (rows, cols) in blocks.items():
        apack = np.random.rand(rows * KC).astype(np.float32)
        panel = np.random.rand(KC * cols).astype(np.float32)
        c, bias = np.zeros((rows, 1024), np.float32), np.zeros(1024, np.float32)
        flops = 2.0 * rows * cols * KC
        reps = max(1, int(WORK_FLOPS / flops))
        args = (reps, KC, apack.ctypes.data, panel.ctypes.data, c.ctypes.data, 1024, rows, cols,
                False, 0, c.ctypes.data, bias.ctypes.data, False, 0, 0)

        def run(args: tuple = args, kept: tuple = (apack, panel, c, bias)) -> None:
            if kept:   # the arrays ride along: native code reads them through their addresses
                bench_loop(*args)
        found[name] = (run, reps * flops)
    return found


def loops() -> dict[str, Loop]:
    """name -> (a call, its FLOPs) for each loop of the module docstring."""
    lanes = target.vector_bits() // 32
    mr, nr, _ = tile_shape(4)
    return {"probe": _probe_loop(lanes), "k steps": _k_steps_loop(mr, nr, lanes),
            **_tiles_loops(mr, nr)}


PROBE_SECONDS = 0.05   # per all-core probe run: thread start-up is well under 1% of it


def _all_core_probe(lanes: int, threads: int | None = None) -> Callable[[], float]:
    """A call that runs the probe on every core (or `threads` of them) at once and returns
    its GFLOP/s."""
    engine = _engine(peak.probe_ir(lanes))
    fma = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float)(
        engine.get_function_address("fma_loop"))
    threads = threads or os.cpu_count() or 1
    trips = int(PROBE_SECONDS * 2e11 / (peak.CHAINS * lanes * 2))

    def run() -> float:
        seconds = peak.seconds_on_threads(fma, trips, threads)
        return threads * trips * peak.CHAINS * lanes * 2 / seconds / 1e9 if engine else 0.0
    return run


def _product_calls(n: int) -> dict[str, Callable[[], Any]]:
    """name -> a call of an n x n float32 product that waits for its result."""
    import fgrad
    a, b = (np.random.default_rng(i).standard_normal((n, n)).astype(np.float32)
            for i in range(2))
    ta, tb, jf = fgrad.Tensor(a), fgrad.Tensor(b), fgrad.jit(lambda x, y: x @ y)
    calls: dict[str, Callable[[], Any]] = {"fgrad-llvm": lambda: jf(ta, tb).numpy()}
    if available("jax"):
        import jax
        ja, jb, jm = jax.numpy.asarray(a), jax.numpy.asarray(b), jax.jit(jax.numpy.matmul)
        calls["jax"] = lambda: jm(ja, jb).block_until_ready()
    if available("torch"):
        import torch
        xa, xb = torch.from_numpy(a), torch.from_numpy(b)
        calls["torch"] = lambda: torch.matmul(xa, xb)
    return calls


def one_thread_each() -> None:
    """Make fgrad, JAX and PyTorch run their products on one thread (before they start);
    the process keeps to one core too, so a library that starts threads anyway (XLA's
    runtime ignores its thread flags for some products) shares that core with itself."""
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    os.environ["FGRAD_NUM_THREADS"] = "1"
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false"
                               " intra_op_parallelism_threads=1").strip()
    if available("torch"):
        import torch
        torch.set_num_threads(1)


def products(sizes: tuple[int, ...] = (1024, 2048), rounds: int = 15,
             one_thread: bool = False) -> None:
    """Print each library's product GFLOP/s as a share of the probe (on every core, or on
    one with `one_thread`) run right before it, per n (the median of the rounds' shares)."""
    if one_thread:
        one_thread_each()
    probe = _all_core_probe(target.vector_bits() // 32, 1 if one_thread else None)
    for n in sizes:
        calls = _product_calls(n)
        for call in calls.values():
            call()
        shares: dict[str, list[float]] = {name: [] for name in calls}
        probes = []
        for _ in range(rounds):
            for name, call in calls.items():
                probes.append(probe())
                times = []
                for _ in range(5):
                    start = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - start)
                shares[name].append(2 * n**3 / float(np.median(times)) / 1e9 / probes[-1])
        where = "one-thread" if one_thread else "all-core"
        print(f"n={n}: {where} probe median {np.median(probes):.0f} GFLOP/s "
              f"(range {min(probes):.0f}-{max(probes):.0f}), {rounds} rounds")
        for name, found in shares.items():
            print(f"  {name:10s} {np.median(found):6.1%} of the probe "
                  f"(rounds {min(found):.1%}-{max(found):.1%})")


def main(rounds: int = 15) -> None:
    """Print each loop's median and best GFLOP/s over `rounds` interleaved rounds."""
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    calls = loops()
    rates: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, (call, flops) in calls.items():
            start = time.perf_counter()
            call()
            rates[name].append(flops / (time.perf_counter() - start) / 1e9)
    base = float(np.median(rates["probe"]))
    mr, nr, _ = tile_shape(4)
    print(f"one thread, {target.vector_bits()}-bit, {mr} x {nr} tile, kc {KC}, "
          f"{rounds} rounds")
    for name, found in rates.items():
        median = float(np.median(found))
        print(f"  {name:16s} median {median:6.1f} GFLOP/s (best {max(found):6.1f}), "
              f"{median / base:5.1%} of the probe")


if __name__ == "__main__":
    counts = [int(a) for a in sys.argv[1:] if a.isdigit()]
    if "--products" in sys.argv:
        products(rounds=counts[0] if counts else 15, one_thread="--one-thread" in sys.argv)
    else:
        main(counts[0] if counts else 15)
