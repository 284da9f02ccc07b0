"""First-call time of the W5 and W9 steps on the OpenCL GPU, with the kernels built as one
program or as one program per kernel on threads (`CLDevice.split_programs`).

    python bench/gpu_compile.py [REPEATS]      # a table; each cell a fresh process, empty caches

Each child gets empty fgrad, pocl and CUDA compute caches, so every build is a real one.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(workload: str, split: bool) -> None:
    """Build `workload`'s opencl step with the given program split; print its first call."""
    sys.path.insert(0, HERE)
    from fgrad.lower.opencl.device import get_device
    get_device().split_programs = split
    if workload == "w9":
        from transformer import w9_factories
        call = w9_factories()["fgrad-opencl"]()
    else:
        from mlp import w5_factories
        call = w5_factories(256)["fgrad-opencl"]()
    start = time.perf_counter()
    call()
    first = time.perf_counter() - start
    start = time.perf_counter()
    call()
    print(json.dumps({"first_ms": first * 1e3, "second_ms": (time.perf_counter() - start) * 1e3}))


def spawn(workload: str, split: bool) -> dict[str, float]:
    """One child in a fresh process with fresh caches."""
    with tempfile.TemporaryDirectory(prefix="fgrad_gpu_compile_") as cache:
        env = dict(os.environ, FGRAD_CACHE_DIR=cache, POCL_CACHE_DIR=os.path.join(cache, "pocl"),
                   CUDA_CACHE_PATH=os.path.join(cache, "cuda"), CUDA_CACHE_DISABLE="1")
        proc = subprocess.run([sys.executable, __file__, "child", workload, str(int(split))],
                              env=env, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr else "no output")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(repeats: int) -> None:
    """Print a markdown table: workload x program split, median first and second call."""
    print("| workload | kernels built as | first call, ms (runs) | second call, ms |")
    print("|---|---|---|---|")
    for workload in ("w5", "w9"):
        for split in (False, True):
            runs = [spawn(workload, split) for _ in range(repeats)]
            firsts = [r["first_ms"] for r in runs]
            label = "one program per kernel, threads" if split else "one program"
            print(f"| {workload.upper()} | {label} | {statistics.median(firsts):.0f} "
                  f"({', '.join(f'{t:.0f}' for t in firsts)}) | "
                  f"{statistics.median(r['second_ms'] for r in runs):.2f} |", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(sys.argv[2], sys.argv[3] == "1")
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
