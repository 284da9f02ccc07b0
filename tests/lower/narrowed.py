"""Running a check script in a fresh process whose CPU features are narrowed to AVX2 (256
bits) or SSE (128 bits) before anything is compiled, as on such a CPU (the tests of the
GEMM and of staged transposes at other widths)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fgrad.lower.llvm import target

NARROW = r'''
import functools, sys
bits = int(sys.argv[1])
import fgrad.lower.llvm.target as T
host = T.features
drop = ("avx512", "amx", "prefer-256") if bits == 256 else \
    ("avx", "fma", "f16c", "amx", "prefer-256")

@functools.cache
def narrowed():
    return ",".join("-" + f[1:] if f.startswith("+") and any(d in f for d in drop) else f
                    for f in host().split(",") if f)
T.features = narrowed
assert T.vector_bits() == bits, T.vector_bits()
'''


def run_narrowed(check: str, bits: int, cache: Path) -> None:
    """Run NARROW + `check` (which prints "mismatches [...]" last) for `bits`, with its own
    compile cache; fail on a crash or any mismatch, skip where the host cannot run it."""
    if target.vector_bits() < bits or "+avx" not in target.features().split(","):
        pytest.skip("an x86-64 host with AVX runs the narrower builds")
    env = dict(os.environ, FGRAD_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", NARROW + check, str(bits)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "mismatches []", done.stdout[-2000:]
