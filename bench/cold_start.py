"""W6 and W9 cold: time of the FIRST call of a training step (W5's MLP, W9's transformer) in a
fresh process.

"cold": a new process with an empty compile cache directory (FGRAD_CACHE_DIR for fgrad,
with POCL_CACHE_DIR and CUDA_CACHE_PATH inside it for the OpenCL drivers; jax_compilation_cache_dir for JAX).
"warm start": another new process given the directory the cold run filled. Imports and data
set-up are not timed; the first call is (trace, compile or cache load, one run, waiting for
the results). Each is repeated `Settings.cold_runs` times (fresh directories for the cold
runs); the table shows the median.

Parent (bench/run.py): `w6_rows(batch, settings)`, `w9_rows(settings)` -> two Rows each.
Child: python bench/cold_start.py CONTENDER BATCH CACHE_DIR [w5|w9] -> {"first_ms": ...}
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from harness import Row, Settings, available, fgrad_backends

HERE = os.path.dirname(os.path.abspath(__file__))


def _configure_jax_cache(cache_dir: str) -> None:
    import jax
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def child(contender: str, batch: int, cache_dir: str, workload: str = "w5") -> None:
    """Build the W5 (or W9) step of `contender`, time its first call, print it as JSON."""
    if contender == "jax":
        _configure_jax_cache(cache_dir)
    if workload == "w9":
        from transformer import w9_factories
        factories = w9_factories()
    else:
        from mlp import w5_factories
        factories = w5_factories(batch)
    call = factories[contender]()
    start = time.perf_counter()
    call()
    print(json.dumps({"first_ms": (time.perf_counter() - start) * 1e3}))


def _spawn(contender: str, batch: int, cache_dir: str, timeout_s: float,
           workload: str = "w5") -> float:
    """Run the child in a fresh interpreter; its first-call milliseconds."""
    env = dict(os.environ, FGRAD_CACHE_DIR=cache_dir,
               POCL_CACHE_DIR=os.path.join(cache_dir, "pocl"),
               CUDA_CACHE_PATH=os.path.join(cache_dir, "cuda"))
    proc = subprocess.run([sys.executable, os.path.join(HERE, "cold_start.py"), contender,
                           str(batch), cache_dir, workload], env=env, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"child exited {proc.returncode}: {tail}")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["first_ms"])


def _first_call_rows(label: str, workload: str, batch: int, settings: Settings,
                     contenders: list[str]) -> list[Row]:
    """Two Rows (cold, then warm start) of `workload`'s first call per contender; the warm
    Row reuses the directories its cold Row filled, so it must run second."""
    root = tempfile.mkdtemp(prefix=f"fgrad_bench_{workload}_")
    atexit.register(shutil.rmtree, root, True)

    def first_calls(name: str) -> float:
        times = []
        for i in range(settings.cold_runs):
            cache = os.path.join(root, name, str(i))
            os.makedirs(cache, exist_ok=True)
            times.append(_spawn(name, batch, cache, float(settings.guard_s), workload))
        return statistics.median(times)

    measures = {c: lambda c=c: first_calls(c) for c in contenders}
    return [Row(f"{label}, empty cache", measures), Row(f"{label}, warm cache", dict(measures))]


def w6_rows(batch: int, settings: Settings) -> list[Row]:
    """W6: the W5 step's first call, cold and warm, for JAX and every fgrad backend."""
    contenders = (["jax"] if available("jax") else []) + [f"fgrad-{b}" for b in fgrad_backends()]
    return _first_call_rows(f"W6 first call of the W5 step (batch {batch}), fresh process",
                            "w5", batch, settings, contenders)


def w9_rows(settings: Settings) -> list[Row]:
    """W9 cold: the transformer step's first call, cold and warm (JAX, fgrad llvm only:
    the opencl and numpy backends take minutes here)."""
    contenders = (["jax"] if available("jax") else []) + [
        f"fgrad-{b}" for b in fgrad_backends() if b == "llvm"]
    return _first_call_rows("W9 first call of the transformer step, fresh process", "w9", 0,
                            settings, contenders)


if __name__ == "__main__":
    child(sys.argv[1], int(sys.argv[2]), sys.argv[3], *sys.argv[4:5])
