"""fgrad.lower: schedules, kernel IR and native backends for `fgrad.jit`.

Importing this package registers the "llvm" compiler in fgrad.transforms.executables, and
the "opencl" one when pyopencl is installed (opencl/runtime.py is imported on first use).
`jit(f, backend="llvm").lower(x).as_text()` prints the schedule, the kernel IR and the LLVM
IR; see schedule/partition.py for what fuses and which primitives still run as NumPy host steps.
"""
import importlib.util
from typing import Any

from fgrad.lower.llvm.runtime import LLVMExecutable, compile_llvm, describe
from fgrad.lower.schedule.partition import Schedule, schedule
from fgrad.transforms import executables

executables.COMPILERS["llvm"] = compile_llvm


def _register_lowerings() -> None:
    """Record in each primitive's registry entry how the native backends lower it, so
    `fgrad.core.primitive.missing_rules()` lists exactly the primitives that still run as
    NumPy host steps (the kernel tables below are the lowerings themselves)."""
    from fgrad.core.primitive import REGISTRY
    from fgrad.lower.llvm.kernels import ops as llvm_ops
    from fgrad.lower.schedule.control_flow import CONTROL_FLOW
    from fgrad.lower.schedule.expand import EXPANSIONS, NO_SEMANTICS
    from fgrad.lower.schedule.partition import ELEMENTWISE, LINALG, MOVEMENT, REDUCE
    kinds = {name: "fused elementwise kernel" for name in ELEMENTWISE}
    kinds.update({name: "index arithmetic in the consuming kernel" for name in MOVEMENT})
    kinds.update({name: "reduction kernel" for name in REDUCE})
    kinds["dot_general"] = ("gemm (OpenBLAS on llvm, tiled kernel on opencl; float32/64); "
                            "other dtypes: a fused multiply-and-reduce kernel")
    kinds["gather"] = "run-time index arithmetic in the consuming kernel"
    kinds["scatter"] = "scatter kernel (copy, then the update rows in order)"
    kinds.update({name: f"by expansion into {how}" for name, how in EXPANSIONS.items()})
    kinds["custom_lin"] = NO_SEMANTICS
    kinds.update({name: "sub-programs compiled for the backend; on llvm a scan/while whose "
                  "body is one native segment runs as one native driver call"
                  for name in CONTROL_FLOW})
    for name, how in kinds.items():
        if name in REGISTRY and (name not in ELEMENTWISE or name in llvm_ops.OPS):
            for backend in ("llvm", "opencl"):
                REGISTRY[name].lowerings.setdefault(backend, how)
    for name in LINALG:  # opencl has no LAPACK: there they stay host steps
        if name in REGISTRY:
            REGISTRY[name].lowerings.setdefault("llvm", "LAPACK call from native code "
                                                "(SciPy's; float32/64)")


_register_lowerings()


def _compile_opencl(jaxpr: Any) -> Any:
    """The "opencl" compiler (imports pyopencl on first use)."""
    from fgrad.lower.opencl.runtime import compile_opencl
    return compile_opencl(jaxpr)


def _describe_opencl(jaxpr: Any) -> str:
    from fgrad.lower.opencl.runtime import describe as describe_opencl
    return describe_opencl(jaxpr)


if importlib.util.find_spec("pyopencl") is not None:
    _compile_opencl.describe = _describe_opencl  # type: ignore[attr-defined]  # jit getattr()s it
    executables.COMPILERS["opencl"] = _compile_opencl

__all__ = ["LLVMExecutable", "Schedule", "compile_llvm", "describe", "schedule"]
