"""Loop strength reduction per unit (llvm/target.py `strength_reduction`): the GEMM routines
keep LLVM's LSR, kernels are generated without it, and units compiled concurrently on many
threads get the same code as compiled one at a time."""
import concurrent.futures
from typing import Any

import numpy as np

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import kernel_cache
from fgrad.lower.llvm import target as llvm_target
from fgrad.lower.llvm.gemm.driver import routine_texts
from fgrad.lower.llvm.runtime import plan
from fgrad.transforms.jit_prim import open_jaxpr


def _kernel_texts() -> list[str]:
    x = Tensor(np.random.default_rng(0).standard_normal((512, 300)).astype(np.float32))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda a: (a.softmax(-1) * 2).tanh())(x))
    return [kernel_cache._kernel_text(k)[0] for k in plan(jaxpr).kernels]


def test_routines_keep_strength_reduction_and_kernels_do_not(monkeypatch: Any):
    seen: list[bool | None] = []
    real = llvm_target.emit_object
    monkeypatch.setattr(llvm_target, "emit_object",
                        lambda module, machine: seen.append(llvm_target._LSR._on)
                        or real(module, machine))
    micro = dict(routine_texts("float32"))["micro"]
    kernel_cache.module_object(micro, kernel_cache.SCHEDULED)
    for text in _kernel_texts():
        kernel_cache.module_object(text, kernel_cache.KERNEL_SPEED_LEVEL)
    assert seen[0] is True and len(seen) > 1 and not any(seen[1:])


def test_concurrent_units_get_the_code_of_their_own_setting():
    micro = dict(routine_texts("float32"))["micro"]
    units = [(micro, kernel_cache.SCHEDULED)] + [
        (t, kernel_cache.KERNEL_SPEED_LEVEL) for t in _kernel_texts()]
    alone = [kernel_cache.assembly_of(t, level) for t, level in units]
    jobs = units * 6
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        together = list(pool.map(lambda u: kernel_cache.assembly_of(*u), jobs))
    assert together == alone * 6


def test_the_setting_reaches_llvm():
    """A kernel's code is what LLVM makes with LSR off, and differs from it with LSR on."""
    text = max(_kernel_texts(), key=len)
    off = _assembly_with(text, False)
    assert kernel_cache.assembly_of(text, kernel_cache.KERNEL_SPEED_LEVEL) == off
    assert _assembly_with(text, True) != off


def _assembly_with(text: str, on: bool) -> str:
    module, machine = kernel_cache._optimized(text, kernel_cache.KERNEL_SPEED_LEVEL)
    with llvm_target.strength_reduction(on):
        return str(machine.emit_assembly(module))
