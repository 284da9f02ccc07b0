"""fgrad.lower: schedules, kernel IR and native backends for `fgrad.jit`.

Importing this package registers the "llvm" compiler in fgrad.transforms.executables.
`jit(f, backend="llvm").lower(x).as_text()` prints the schedule, the kernel IR and the LLVM
IR; see schedule.py for what fuses and which primitives still run as NumPy host steps.
"""
from fgrad.lower.llvm_runtime import LLVMExecutable, compile_llvm, describe
from fgrad.lower.schedule import Schedule, schedule
from fgrad.transforms import executables

executables.COMPILERS["llvm"] = compile_llvm

__all__ = ["LLVMExecutable", "Schedule", "compile_llvm", "describe", "schedule"]
