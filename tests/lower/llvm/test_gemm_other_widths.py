"""The GEMM built for narrower vectors than the host's (AVX2's 256 bits, SSE's 128), run on
this host: edge tiles (masked loads and stores of C), last slivers, register epilogues and
int32 against NumPy. Each width runs in a fresh process whose CPU features are narrowed
before anything is compiled (and with its own cache directory)."""
import pytest

from narrowed import run_narrowed

CHECK = r'''
import numpy as np
from fgrad import Tensor, jit
rng = np.random.default_rng(0)
bad = []
for dt in (np.float32, np.float64, np.int32):
    for m, k, n in ((1, 1, 1), (7, 31, 64), (33, 17, 5), (257, 129, 31), (13, 300, 47)):
        for ta in (False, True):
            for tb in (False, True):
                a = (rng.standard_normal((k, m) if ta else (m, k)) * 4).astype(dt)
                b = (rng.standard_normal((n, k) if tb else (k, n)) * 4).astype(dt)
                fn = lambda a, b: (a.T if ta else a) @ (b.T if tb else b)
                got = jit(fn)(Tensor(a), Tensor(b)).numpy()
                if dt == np.int32:
                    ok = np.array_equal(got, fn(a, b))
                else:
                    ok = np.allclose(got, fn(a.astype(np.float64), b.astype(np.float64)),
                                     rtol=1e-4, atol=1e-3)
                if not ok:
                    bad.append((dt.__name__, m, k, n, ta, tb))
    if dt != np.int32:
        for m, k, n in ((7, 31, 64), (257, 129, 31), (50, 20, 3)):
            x, w = rng.standard_normal((m, k)).astype(dt), rng.standard_normal((k, n)).astype(dt)
            c, r = rng.standard_normal(n).astype(dt), rng.standard_normal((m, n)).astype(dt)
            want = x.astype(np.float64) @ w
            got = jit(lambda x, w, c: (x @ w + c).relu())(Tensor(x), Tensor(w), Tensor(c))
            if not np.allclose(got.numpy(), np.maximum(want + c, 0), rtol=1e-4, atol=1e-3):
                bad.append(("bias_relu", dt.__name__, m, k, n))
            got = jit(lambda x, w, r: (r + x @ w).relu())(Tensor(x), Tensor(w), Tensor(r))
            if not np.allclose(got.numpy(), np.maximum(want + r, 0), rtol=1e-4, atol=1e-3):
                bad.append(("residual_relu", dt.__name__, m, k, n))
print("mismatches", bad)
'''


@pytest.mark.parametrize("bits", [256, 128])
def test_gemm_at_a_narrower_width_matches_numpy(bits, tmp_path):
    run_narrowed(CHECK, bits, tmp_path)
