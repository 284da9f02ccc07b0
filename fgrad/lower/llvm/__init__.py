"""The `llvm` backend: a Program rendered to LLVM IR, compiled in-process by llvmlite.

- `render.py`: kernel IR to LLVM IR (`ops.py`: one elementwise op; `vmath.py`: vectorizable
  polynomial transcendentals).
- `blas.py`, `lapack.py`: BLAS and LAPACK calls from generated code; `gemm/native.py`,
  `gemm/driver.py`: fgrad's own GEMM (shared routines and driver, a wrapper per call site).
- `runtime.py`: compile a program and call it; `threads.py`: the thread pool for large
  kernels; `loops.py`: scan/while as one native driver; `buffer_pool.py`: pooled memory;
  `disk_cache.py`: object code on disk.
"""
