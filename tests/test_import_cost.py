"""`import fgrad` stays light: heavy libraries load on first use, not at import."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEAVY = ("scipy", "llvmlite", "pyopencl", "numpy.f2py", "numpy.testing", "torch", "jax")


def test_import_fgrad_loads_no_heavy_library():
    code = ("import json, sys, fgrad\n"
            "print(json.dumps(sorted({m.split('.')[0] if m.split('.')[0] != 'numpy' else\n"
            "    '.'.join(m.split('.')[:2]) for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    loaded = set(json.loads(out))
    assert not loaded & set(HEAVY), f"`import fgrad` loads {sorted(loaded & set(HEAVY))}"


def test_special_functions_still_load_on_first_use():
    import fgrad
    x = fgrad.Tensor([-1.0, 0.0, 2.0])
    got = x.sigmoid().numpy()
    want = 1 / (1 + __import__("numpy").exp(-x.numpy()))
    assert abs(got - want).max() < 1e-6


def test_the_llvm_backend_loads_scipy_linalg_only_for_lapack():
    """A first jitted matmul loads the llvm backend, but not scipy.linalg (numpy.f2py and
    numpy.testing come with it: ~170 ms); a QR, whose workspace size it asks, does."""
    code = ("import json, sys, numpy as np, fgrad\n"
            "x = fgrad.Tensor(np.ones((64, 64), np.float32))\n"
            "fgrad.jit(lambda a: a @ a, backend='llvm')(x).numpy()\n"
            "first = 'scipy.linalg' in sys.modules\n"
            "fgrad.jit(lambda a: fgrad.numpy.linalg.qr(a)[0], backend='llvm')(x).numpy()\n"
            "print(json.dumps([first, 'scipy.linalg' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == [False, True]
