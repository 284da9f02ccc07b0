"""Memory accounting of a compiled program: what one call keeps allocated at its peak.

In: a `Program` (kernel/program.py). Out: a `MemoryReport`: bytes of the inputs, the outputs, the
intermediate buffers of the plan (dead values' buffers are reused), what the intermediates
would take without reuse, and the peak of one call relative to the live tensors (inputs +
outputs): `peak_ratio`. The runtime allocates every intermediate buffer for the whole call,
so the peak is inputs + outputs + planned intermediates (host steps add their own
temporaries on top, outside this count).
"""
from __future__ import annotations

from dataclasses import dataclass

from fgrad.core.ir import Var
from fgrad.lower.kernel.program import Program


@dataclass(frozen=True)
class MemoryReport:
    """Bytes of one call of a program (module docstring)."""

    inputs: int
    outputs: int
    intermediates: int
    without_reuse: int

    @property
    def live(self) -> int:
        """The live tensors: inputs plus outputs."""
        return self.inputs + self.outputs

    @property
    def peak(self) -> int:
        """Everything one call holds at once."""
        return self.live + self.intermediates

    @property
    def peak_ratio(self) -> float:
        """peak / live (1.0 when a call needs no intermediate memory)."""
        return self.peak / max(self.live, 1)

    def __str__(self) -> str:
        mib = 1 / 2**20
        return (f"memory: inputs {self.inputs * mib:.2f} MiB, outputs {self.outputs * mib:.2f}"
                f" MiB, intermediates {self.intermediates * mib:.2f} MiB (without reuse "
                f"{self.without_reuse * mib:.2f} MiB); peak {self.peak_ratio:.2f}x the live "
                f"tensors")


def _nbytes(v: Var) -> int:
    return v.aval.size * v.aval.dtype.itemsize


def memory_report(program: Program) -> MemoryReport:
    """The memory of one call of `program` (module docstring)."""
    jaxpr = program.jaxpr
    outs = {id(v): v for v in jaxpr.outvars if isinstance(v, Var)}
    ins = {id(v): v for v in jaxpr.invars}
    planned = [v for a in program.actions for v in getattr(a, "allocs", [])
               if id(v) in program.buffer_of]
    return MemoryReport(
        inputs=sum(_nbytes(v) for v in ins.values()),
        outputs=sum(_nbytes(v) for k, v in outs.items() if k not in ins),
        intermediates=sum(program.buffer_bytes),
        without_reuse=sum(_nbytes(v) for v in planned))
