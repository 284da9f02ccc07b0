"""`fgrad.clear_caches()`: drop every trace and compiled program fgrad keeps in memory."""
from __future__ import annotations

import gc


def clear_caches() -> None:
    """Forget every jitted function's traces, the compiled programs they hold, the LLVM
    engines kept for reuse, the cached eager device programs and the free blocks of the
    buffer pool. Calls running on other threads keep what they use until they return; the
    on-disk compile cache is untouched (delete FGRAD_CACHE_DIR for that)."""
    import sys

    from fgrad.core import device
    jit_module = sys.modules["fgrad.transforms.jit"]  # the package re-exports `jit` itself
    for jitted in list(jit_module._LIVE):
        jitted.clear_cache()
    device.clear_programs()
    runtime = sys.modules.get("fgrad.lower.llvm_runtime")
    if runtime is not None:
        runtime.clear_memory_cache()
    pool = sys.modules.get("fgrad.lower.buffer_pool")
    gc.collect()  # compiled programs and their jaxprs reference each other
    if pool is not None:
        pool.POOL.clear()
