"""W7 in pieces: where the microseconds of a jitted `x + 1` on one element go.

    python bench/dispatch_profile.py

Times (median of 9 samples of 20000 calls, microseconds per call) the whole fgrad call, each
stage of its path on its own, and JAX's jitted call for comparison, all in one process.
docs/performance.md (W7) records runs.
"""
from __future__ import annotations

import importlib
import os
import timeit

import numpy as np

import fgrad
from fgrad import Tensor, flags
from fgrad.core.tensor import EvalTrace
from fgrad.core.trace import current_trace

jit_module = importlib.import_module("fgrad.transforms.jit")


def per_call(stmt: str, scope: dict, number: int = 20000) -> float:
    """Median microseconds per execution of `stmt`."""
    samples = sorted(timeit.repeat(stmt, number=number, repeat=9, globals=scope))
    return samples[4] / number * 1e6


def main() -> None:
    """Print one line per stage."""
    f = fgrad.jit(lambda x: x + 1, backend="llvm")
    x = Tensor.ones(1)
    f(x)
    f(x)
    lean = next(iter(f._fast.values()))[0]  # the executable's `fast_call` (a LeanCall)
    data = x._data
    out = lean((data,))[0]
    scope = dict(globals(), f=f, x=x, lean=lean, d=data, ds=(data,), o=out, args=(x,))
    rows = [
        ("fgrad: f(x), the whole call", "f(x)"),
        ("  jit: same-arrays check of the last call",
         "jit_module._same_arrays(args, f._last[0])"),
        ("  jit: signature key (a call with new arrays)", "jit_module._fast_key(args, 'llvm')"),
        ("  jit: default backend, read once (backend=None)", "flags.jit_call_flags()[2]"),
        ("  jit: eager-trace check", "isinstance(current_trace(), EvalTrace)"),
        ("  executable: lean call, all of it", "lean(ds)"),
        ("    native entry through ctypes", "lean._entry(lean._table_arg)"),
        ("    copy of the scratch output", "o.copy()"),
        ("    marking the output read-only", "o.setflags(False)"),
        ("  Tensor wrapping the (read-only) output", "jit_module._frozen_tensor(o)"),
        ("numpy: x + 1 on the array", "d + 1"),
    ]
    try:
        import jax
        jf, jx = jax.jit(lambda x: x + 1), jax.numpy.ones(1)
        jf(jx).block_until_ready()
        scope.update(jf=jf, jx=jx)
        rows.append(("jax: f(x).block_until_ready()", "jf(jx).block_until_ready()"))
    except ImportError:
        pass
    print(f"load average {os.getloadavg()[0]:.1f}")
    for label, stmt in rows:
        print(f"{label:50s} {per_call(stmt, scope):7.2f} us")
    np.testing.assert_array_equal(f(x).numpy(), [2.0])


if __name__ == "__main__":
    main()
