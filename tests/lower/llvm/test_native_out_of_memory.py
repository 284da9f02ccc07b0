"""Native routines whose scratch allocation fails raise MemoryError, never crash
(fgrad/lower/llvm/gemm/scratch.py).

Each case runs in a subprocess that makes the allocation fail without exhausting the
machine. The jitted function is compiled for a big and a small argument and both run once
(the big call's outputs then stay mapped in the buffer pool); then allocation is made to
fail, the big call must raise MemoryError naming the native routine, and the same function
must still give the right answer on the small argument. Two ways to fail:
- "limit": the real thing. glibc's mmap threshold is fixed at 64 KiB (`mallopt`), so every
  larger block is a mapping of its own, and the address space is limited (RLIMIT_AS) to
  what the process maps plus 32 MiB, below the routine's 128 MiB of scratch (a single
  thread: other threads' malloc arenas reserve 64 MiB heaps that a limit cannot reach).
- "inject": generated code's malloc and aligned_alloc resolve (llvmlite `add_symbol`) to
  a wrapper that returns NULL above 128 KiB: the GEMM's packing buffers (4 MiB at most,
  which free space inside malloc's heaps may serve under any limit) and threaded calls.
Cases: sort (int8's int32 scratch row), top_k, argsort split over two threads, float64
matmul in each split mode (each thread's packing buffers, the shared packed B, claimed row
blocks), qr and solve (LAPACK's copies and workspace), and sorts inside a native scan loop.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

resource = pytest.importorskip("resource", reason="RLIMIT_AS needs the resource module")
if not hasattr(resource, "RLIMIT_AS") or not sys.platform.startswith("linux"):
    pytest.skip("address-space limits (RLIMIT_AS, /proc/self/status, glibc mallopt) are "
                "Linux-only", allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[3]

CHILD = r'''
import ctypes, gc, json, resource, sys
ctypes.CDLL(None).mallopt(-3, 64 * 1024)   # M_MMAP_THRESHOLD: fixed, not adaptive
import llvmlite.binding as llvm
import numpy as np
import fgrad
import fgrad.numpy as fnp
from fgrad import lax
from fgrad.lower.llvm import lapack
from fgrad.lower.llvm.gemm import prepack

case = sys.argv[1]
rng = np.random.default_rng(5)
MiB = 1 << 20
WRAPPER = """
@limit = global i64 4611686018427387904
define i8* @oom_malloc(i64 %n) {
  %l = load volatile i64, i64* @limit
  %big = icmp ugt i64 %n, %l
  br i1 %big, label %fail, label %ok
fail:
  ret i8* null
ok:
  %f = inttoptr i64 MALLOC to i8* (i64)*
  %p = call i8* %f(i64 %n)
  ret i8* %p
}
define i8* @oom_aligned_alloc(i64 %a, i64 %n) {
  %l = load volatile i64, i64* @limit
  %big = icmp ugt i64 %n, %l
  br i1 %big, label %fail, label %ok
fail:
  ret i8* null
ok:
  %f = inttoptr i64 ALIGNED to i8* (i64, i64)*
  %p = call i8* %f(i64 %a, i64 %n)
  ret i8* %p
}
"""


def injected():
    """Generated code's malloc / aligned_alloc: libc's, but NULL above `limit` bytes."""
    libc = ctypes.CDLL(None)
    real = {name: ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
            for name in ("malloc", "aligned_alloc")}
    text = WRAPPER.replace("MALLOC", str(real["malloc"])).replace(
        "ALIGNED", str(real["aligned_alloc"]))
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(text), tm)
    engine.finalize_object()
    lapack._register_libc()   # fgrad_malloc first, so that the wrapper replaces it
    for symbol, name in (("malloc", "oom_malloc"), ("fgrad_malloc", "oom_malloc"),
                         ("aligned_alloc", "oom_aligned_alloc")):
        llvm.add_symbol(symbol, engine.get_function_address(name))
    limit = ctypes.c_int64.from_address(engine.get_global_value_address("limit"))
    return engine, limit


def matmul_case(mode, m):
    if mode == "shared":
        prepack.ENABLED = True
    elif mode == "claimed":
        prepack.ENABLED = None
    else:
        prepack.ENABLED = False
    big = (rng.standard_normal((m, 512)), rng.standard_normal((512, 2048)))
    small = (rng.standard_normal((5, 7)), rng.standard_normal((7, 3)))
    return (lambda a, b: a @ b), big, small, (lambda a, b: a @ b), "inject"


def scan_sort(xs):
    return lax.scan(lambda c, row: (c + 1, fnp.sort(row)), 0, xs)[1]


def row(shape, dtype):
    return rng.integers(-100, 100, size=shape).astype(dtype)


# case: (function, big arguments, small arguments, NumPy reference, how allocation fails)
CASES = {
    "sort": lambda: (fnp.sort, (row(1 << 25, np.int8),), (row(9, np.int8),), np.sort,
                     "limit"),
    "top_k": lambda: (lambda x: lax.top_k(x, 4)[1], (rng.random((1, 1 << 24), np.float32),),
                      (rng.random((2, 50), np.float32),),
                      lambda x: np.argsort(-x, kind="stable")[:, :4], "limit"),
    "argsort": lambda: (fnp.argsort, (row((4, 1 << 16), np.int16),), (row((2, 9), np.int16),),
                        lambda x: np.argsort(x, kind="stable"), "inject"),
    "matmul": lambda: matmul_case("plain", 512),
    "matmul_shared_b": lambda: matmul_case("shared", 520),
    "matmul_claimed": lambda: matmul_case("claimed", 528),
    "qr": lambda: (lambda a: fnp.linalg.qr(a)[1], (rng.standard_normal((256, 256)),),
                   (rng.standard_normal((4, 3)),), lambda a: np.linalg.qr(a)[1], "inject"),
    "solve": lambda: (fnp.linalg.solve,
                      (rng.standard_normal((256, 256)), rng.standard_normal((256, 2))),
                      (rng.standard_normal((3, 3)) + 3 * np.eye(3),
                       rng.standard_normal((3, 2))), np.linalg.solve, "inject"),
    "scan_sort": lambda: (scan_sort, (row((3, 1 << 16), np.int8),), (row((3, 5), np.int8),),
                          lambda x: np.sort(x, axis=-1), "inject"),
}
fn, big, small, reference, how = CASES[case]()
injection = injected() if how == "inject" else None
f = fgrad.jit(fn, backend="llvm")
expected = reference(*small)
big, small = [tuple(fnp.asarray(a) for a in args) for args in (big, small)]
first = np.asarray(f(*small))
np.asarray(f(*big))          # warm: its outputs stay mapped in the buffer pool
gc.collect()
from fgrad.lower.llvm.gemm import scratch
scratch.release_blocks()     # else the GEMM's cached packing blocks serve the big call again


def mapped():
    with open("/proc/self/status") as status:
        line = next(l for l in status if l.startswith("VmSize:"))
    return int(line.split()[1]) * 1024


_, hard = resource.getrlimit(resource.RLIMIT_AS)
if injection is not None:
    injection[1].value = 128 * 1024
else:
    resource.setrlimit(resource.RLIMIT_AS, (mapped() + 32 * MiB, hard))
result = {}
try:
    f(*big)
    result["big"] = "returned"
except MemoryError as err:
    result["big"] = "MemoryError"
    result["message"] = str(err)
again = np.asarray(f(*small))
resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
result["small_ok"] = bool(np.allclose(again, expected) and np.allclose(first, expected))
print("RESULT " + json.dumps(result))
'''

# case -> what the message must name
CASES = {"sort": "native sort of i8[33554432]", "top_k": "native top_k of f32[1,16777216]",
         "argsort": "native sort of i16[4,65536]",
         "matmul": "native matrix product of f64[512,512], f64[512,2048]",
         "matmul_shared_b": "native matrix product of f64[520,512], f64[512,2048]",
         "matmul_claimed": "native matrix product of f64[528,512], f64[512,2048]",
         "qr": "native qr of f64[256,256]", "solve": "native ",
         "scan_sort": "native sort of i8[65536]"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_failed_scratch_raises_memory_error(case: str, tmp_path: pathlib.Path) -> None:
    env = dict(os.environ, FGRAD_NUM_THREADS="2", FGRAD_CACHE_DIR=str(tmp_path),
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD, case], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    tail = (done.stdout + done.stderr)[-3000:]
    assert done.returncode == 0, f"{case}: exit {done.returncode} (a crash?)\n{tail}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, tail
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["big"] == "MemoryError", f"{case}: the big call {result['big']}\n{tail}"
    message = result["message"]
    assert message.startswith("fgrad: out of memory in the native"), message
    assert CASES[case] in message and "bytes of scratch could not be allocated" in message, \
        message
    assert result["small_ok"], f"{case}: wrong answer on the small argument after the error"
