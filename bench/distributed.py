"""W5 data-parallel: the MLP training step on 2 processes x 1 thread vs 1 process x 2 threads,
and the all-reduce of W5's gradient (docs/distributed.md records the numbers).

    python bench/distributed.py [--batch 256] [--steps 20] [--repeats 7]

starts every configuration as fresh processes (the 2-process one under `mpiexec -n 2`, found
beside this Python or on PATH) and prints one table. Per configuration: the median over
`repeats` samples of the mean time of `steps` consecutive steps; in the 2-process job a
sample is the slower process's time. "BLAS n": OpenBLAS's own threads for the gemms
(OPENBLAS_NUM_THREADS; its default is one per core). Needs `pip install 'fgrad[distributed]'`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _samples(call: Callable[[], Any], steps: int, repeats: int) -> float:
    """Median ms per call; every process times the same calls, the slowest one counts."""
    from fgrad import distributed as dist
    call()  # compile and warm up
    out = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(steps):
            call()
        ms = np.array((time.perf_counter() - start) * 1e3 / steps)
        out.append(float(dist.pmax(ms).numpy()))
    return statistics.median(out)


def _w5_step(batch: int) -> Callable[[], Any]:
    """The W5 step (784-512-512-10 MLP, Adam) on this process's shard of a global batch,
    gradients averaged by pmean inside the jitted step (an identity in a 1-process job)."""
    import fgrad
    from fgrad import Tensor, distributed as dist, optim
    from mlp import LR, data, fgrad_model
    from harness import fgrad_sync
    _, x, y = data(batch)
    x, y = dist.shard_batch((x, y))
    opt = optim.Adam(lr=LR)

    def loss_fn(model: Any, x: Tensor, y: Tensor) -> Tensor:
        return model(x).sparse_categorical_crossentropy(y)

    @fgrad.jit
    def step(model: Any, state: Any, x: Tensor, y: Tensor) -> Any:
        loss, grads = fgrad.value_and_grad(loss_fn)(model, x, y)
        loss, grads = dist.pmean((loss, grads))
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    model = dist.broadcast(fgrad_model())
    carry = [model, opt.init(model)]
    xt, yt = Tensor(x), Tensor(y)

    def call() -> Any:
        carry[0], carry[1], loss = step(carry[0], carry[1], xt, yt)
        return fgrad_sync(loss)
    return call


def _allreduce_rows(steps: int, repeats: int) -> dict[str, float]:
    """The W5 gradient (all six leaves) averaged over the processes, three ways."""
    import fgrad
    from fgrad import distributed as dist
    from mlp import fgrad_model
    grads = fgrad.tree_util.tree_map(lambda p: p * 1.0, fgrad_model())
    flat = np.concatenate([p.numpy().ravel() for p in fgrad.tree_util.tree_leaves(grads)])
    comm = dist.communicator()
    from mpi4py import MPI
    buf = flat.copy()
    jitted = fgrad.jit(dist.pmean)
    return {"bytes": float(flat.nbytes),
            "mpi4py Allreduce, one buffer": _samples(
                lambda: comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM), steps, repeats),
            "fgrad.distributed.pmean, eager": _samples(
                lambda: dist.pmean(grads), steps, repeats),
            "pmean in jit (llvm host step)": _samples(
                lambda: fgrad.tree_util.tree_map(lambda t: t.numpy(), jitted(grads)),
                steps, repeats)}


def worker(args: argparse.Namespace) -> None:
    sys.path.insert(0, HERE)
    from fgrad import distributed as dist
    result = {"step_ms": _samples(_w5_step(args.batch), args.steps, args.repeats)}
    if dist.process_count() > 1:
        result.update(_allreduce_rows(args.steps, args.repeats))
    if dist.process_index() == 0:
        print("RESULT " + json.dumps(result), flush=True)


def _launch(n: int, threads: int, blas: int, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ, FGRAD_NUM_THREADS=str(threads), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS=str(blas))
    cmd = [sys.executable, __file__, "--worker", "--batch", str(args.batch),
           "--steps", str(args.steps), "--repeats", str(args.repeats)]
    if n > 1:
        beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
        cmd = [beside if os.path.exists(beside) else shutil.which("mpiexec") or "mpiexec",
               "-n", str(n)] + cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256, help="global batch of the W5 step")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    configs = {"1 process x 1 thread": (1, 1, 1),
               "1 process x 2 threads (fgrad pool 2, BLAS 2)": (1, 2, 2),
               "1 process x 2 threads (fgrad pool 2, BLAS 1)": (1, 2, 1),
               "2 processes x 1 thread (pmean of gradients)": (2, 1, 1)}
    results = {label: _launch(n, t, b, args) for label, (n, t, b) in configs.items()}
    print(f"W5 MLP 784-512-512-10 train step, Adam, global batch {args.batch}, "
          f"median of {args.repeats} x {args.steps} steps")
    for label, res in results.items():
        print(f"  {label:<46} {res['step_ms']:8.2f} ms/step")
    dp = results["2 processes x 1 thread (pmean of gradients)"]
    print(f"all-reduce of the W5 gradient ({dp['bytes'] / 1e6:.2f} MB float32), 2 processes")
    for label, ms in dp.items():
        if label not in ("step_ms", "bytes"):
            print(f"  {label:<46} {ms:8.3f} ms")


if __name__ == "__main__":
    main()
