"""A small profiler for jitted programs: time per program and, on the llvm backend, per step.

    with fgrad.profiler.profile() as prof:
        for batch in data:
            params, opt_state = train_step(params, opt_state, batch)
    print(prof)                 # one table per jitted program

    jf.profile(*args)           # run a jitted function once (after a warm-up), print its table

Rows of a program's table are its steps in run order. On the llvm backend a profiled call
runs a profiling build of the program (made on the first profiled call, beside the normal
one, which stays free of timing code): one native call per kernel or library call, so each
row is one kernel (its fused primitives) or one gemm/LAPACK call (its shapes), with the user
lines of the equations it computes; host steps (control flow, a host callback, a NumPy
fallback) get a row each too. Kernels that the normal build runs together in one parallel
region run one after another there, so the rows add up to a little more than a normal call.
On opencl a profiled call waits for the device queue after every kernel (they normally run
asynchronously) and times each; on numpy only the program totals are measured.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

__all__ = ["Profile", "active", "profile"]

_ACTIVE: list["Profile"] = []
LABEL_WIDTH = 44
_LAYOUT_ONLY = {"broadcast_in_dim", "reshape", "squeeze", "expand_dims", "transpose"}


def active() -> "Profile | None":
    """The innermost running profile, or None (the runtimes' hook: cheap when off)."""
    return _ACTIVE[-1] if _ACTIVE else None


@dataclass
class _Row:
    label: str
    where: str
    seconds: float = 0.0
    count: int = 0


@dataclass
class _ProgramStats:
    name: str
    backend: str
    calls: int = 0
    seconds: float = 0.0
    rows: dict[int, _Row] = field(default_factory=dict)


class Profile:
    """Timings collected while a `profile()` block runs; `str(profile)` is the table."""

    def __init__(self) -> None:
        self.programs: dict[int, _ProgramStats] = {}
        self._current: list[_ProgramStats] = []

    @contextlib.contextmanager
    def program(self, key: Any, name: str, backend: str) -> Iterator[None]:
        """Time one call of a jitted program (`key` identifies it)."""
        stats = self.programs.setdefault(id(key), _ProgramStats(name, backend))
        self._current.append(stats)
        start = time.perf_counter()
        try:
            yield
        finally:
            stats.seconds += time.perf_counter() - start
            stats.calls += 1
            self._current.pop()

    def step(self, program: Any, action: Any, seconds: float) -> None:
        """Record one step of a native program (called by the llvm runtime)."""
        if not self._current:
            return
        rows = self._current[-1].rows
        row = rows.get(id(action))
        if row is None:
            row = rows[id(action)] = _Row(*_describe(program, action))
        row.seconds += seconds
        row.count += 1

    def table(self) -> str:
        """The timings as text: one block per program, slowest program first."""
        blocks = []
        for stats in sorted(self.programs.values(), key=lambda s: -s.seconds):
            per_call = stats.seconds / max(stats.calls, 1)
            lines = [f"jit({stats.name}) on {stats.backend}: {stats.calls} call(s), "
                     f"{stats.seconds * 1e3:.3f} ms total, {per_call * 1e3:.3f} ms per call"]
            if stats.rows:
                lines.append(f"  {'step':<{LABEL_WIDTH}} {'ms total':>9} {'% prog':>7}  "
                             "source lines")
            for row in stats.rows.values():
                share = 100 * row.seconds / stats.seconds if stats.seconds else 0.0
                lines.append(f"  {row.label:<{LABEL_WIDTH}} {row.seconds * 1e3:9.3f} "
                             f"{share:6.1f}%  {row.where}")
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks) if blocks else "(no jitted program ran)"

    def __str__(self) -> str:
        return self.table()


@contextlib.contextmanager
def profile() -> Iterator[Profile]:
    """Collect the time of every jitted call inside the block (see the module docstring)."""
    prof = Profile()
    _ACTIVE.append(prof)
    try:
        yield prof
    finally:
        _ACTIVE.remove(prof)


def _source(eqn: Any) -> str:
    src = getattr(eqn, "source", None)
    return f"{src.filename.rsplit('/', 1)[-1]}:{src.lineno}" if src is not None else ""


def _describe(program: Any, action: Any) -> tuple[str, str]:
    """(label, source lines) of one action of a lowering Program."""
    if not hasattr(action, "calls"):  # a host step (a segment lists its native calls)
        return f"host {action.name}: {action.eqn.primitive.name}", _source(action.eqn)
    producers = {id(v): e for e in program.jaxpr.eqns for v in e.outvars}
    steps = {s.name: s for s in program.schedule.steps}
    names, where = [], []
    for name, _ in action.calls:
        eqns = [program.library_calls[name]] if name in program.library_calls else \
            _fused_eqns(program.schedule, steps.get(name), producers)
        names.append(_call_label(name, eqns) if len(action.calls) == 1 else name)
        for eqn in eqns:
            line = _source(eqn)
            if line and line not in where:
                where.append(line)
    label = "native " + ",".join(names)
    if len(label) > LABEL_WIDTH:
        label = label[:LABEL_WIDTH - 3] + "..."
    return label, " ".join(where[:6]) + (" ..." if len(where) > 6 else "")


def _fused_eqns(schedule: Any, step: Any, producers: dict[int, Any]) -> list[Any]:
    """The jaxpr equations a kernel step computes (every fused one, where the schedule
    can say)."""
    if step is None:
        return []
    finder = getattr(schedule, "fused_eqns", None)
    if finder is not None:
        return list(finder(step))
    return [producers[id(v)] for v in getattr(step, "outputs", ()) if id(v) in producers]


def _call_label(name: str, eqns: list[Any]) -> str:
    """'g0 dot_general f32[64,128]x[128,256]' or 'k3 exp,add,reduce_sum'."""
    prims = list(dict.fromkeys(e.primitive.name for e in eqns
                               if e.primitive.name not in _LAYOUT_ONLY)) or ["copy"]
    if len(eqns) == 1 and eqns[0].primitive.name == "dot_general":
        shapes = "x".join(str(list(v.aval.shape)) for v in eqns[0].inputs)
        return f"{name} dot_general {shapes}"
    return f"{name} {','.join(prims)}"
