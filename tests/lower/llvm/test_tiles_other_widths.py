"""Transposed reads staged through registers (llvm/kernels/tiles.py) built for narrower
vectors than the host's (AVX2's 256 bits: 8 float32 lanes, 4 float64; SSE's 128: 4 float32,
float64 left to the plain loops), run on this host against NumPy, in a fresh process whose
CPU features are narrowed before anything is compiled; and the 16-bit sorts, which must
use no half-precision arithmetic where the CPU has no F16C (128 bits here)."""
import pytest

from narrowed import run_narrowed

CHECK = r'''
import ml_dtypes
import numpy as np
from fgrad import Tensor, jit
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
    run_narrowed(CHECK, bits, tmp_path)
