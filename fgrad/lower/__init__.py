"""fgrad.lower: schedules, kernel IR and native backends for `fgrad.jit`.

Importing this package registers the "llvm" compiler in fgrad.transforms.executables, and
the "opencl" one when pyopencl is installed (opencl_runtime.py is imported on first use).
`jit(f, backend="llvm").lower(x).as_text()` prints the schedule, the kernel IR and the LLVM
IR; see schedule.py for what fuses and which primitives still run as NumPy host steps.
"""
import importlib.util
from typing import Any

from fgrad.lower.llvm_runtime import LLVMExecutable, compile_llvm, describe
from fgrad.lower.schedule import Schedule, schedule
from fgrad.transforms import executables

executables.COMPILERS["llvm"] = compile_llvm


def _compile_opencl(jaxpr: Any) -> Any:
    """The "opencl" compiler (imports pyopencl on first use)."""
    from fgrad.lower.opencl_runtime import compile_opencl
    return compile_opencl(jaxpr)


def _describe_opencl(jaxpr: Any) -> str:
    from fgrad.lower.opencl_runtime import describe as describe_opencl
    return describe_opencl(jaxpr)


if importlib.util.find_spec("pyopencl") is not None:
    _compile_opencl.describe = _describe_opencl  # type: ignore[attr-defined]
    executables.COMPILERS["opencl"] = _compile_opencl

__all__ = ["LLVMExecutable", "Schedule", "compile_llvm", "describe", "schedule"]
