"""Transposed reads staged through registers (llvm/kernels/tiles.py) built for narrower
vectors than the host's (AVX2's 256 bits: 8 float32 lanes, 4 float64; SSE's 128: 4 float32,
float64 left to the plain loops), run on this host against NumPy, in a fresh process whose
CPU features are narrowed before anything is compiled; and the 16-bit sorts, which must
use no half-precision arithmetic where the CPU has no F16C (128 bits here)."""
import os
import subprocess
import sys

import pytest

from fgrad.lower.llvm import target

CHECK = r'''
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
import ml_dtypes
import numpy as np
from fgrad import Tensor, jit
assert T.vector_bits() == bits, T.vector_bits()
rng = np.random.default_rng(0)
bad = []
for dt in (np.float32, np.float64, np.int32, np.float16, ml_dtypes.bfloat16):
    for shape in ((512, 1024), (3, 528, 512)):
        x = (rng.standard_normal(shape) * 8).astype(dt)
        fn = lambda a: a.transpose(-1, -2) * 3
        got = jit(fn)(Tensor(x)).numpy()
        if not np.array_equal(got, np.swapaxes(x, -1, -2) * 3):
            bad.append((np.dtype(dt).name, shape))
for dt in (np.float16, ml_dtypes.bfloat16, np.int16):
    x = (rng.standard_normal((5, 300)) * 8).astype(dt)
    x[0, :3] = np.nan if dt != np.int16 else 7
    values, order = jit(lambda a: a.sort(-1))(Tensor(x))
    want = np.argsort(x.astype(np.float32), -1, kind="stable")
    if not np.array_equal(order.numpy(), want):
        bad.append(("sort", np.dtype(dt).name))
print("mismatches", bad)
'''


@pytest.mark.parametrize("bits", [256, 128])
def test_staged_transposes_at_a_narrower_width_match_numpy(bits, tmp_path):
    if target.vector_bits() < bits or "+avx" not in target.features().split(","):
        pytest.skip("an x86-64 host with AVX runs the narrower builds")
    env = dict(os.environ, FGRAD_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", CHECK, str(bits)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "mismatches []", done.stdout[-2000:]
