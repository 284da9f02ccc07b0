"""A compiled program's call as plain data: where each value lives, what runs, in order.

In: a `Program` (kernel/program.py) and the backend's entry parts of each segment. Out: a
`CallPlan`: numbered `Value`s (the inputs first, then pooled intermediate blocks, fresh
arrays, constants and host-step results), its steps (`NativeStep`: a segment's buffer table
as value numbers, the values it writes, its entry parts; `HostCall`: an equation run on the
host), the outputs, the block sizes and which inputs each output may be written into when
donated. A plan without host calls is plain data and round-trips through JSON (`to_json`,
`from_json`, which checks every number and kind), so a fresh process can run cached object
code without scheduling or building a kernel again (llvm/runtime.py).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fgrad.core.dtypes import ALL_DTYPES, DType
from fgrad.core.ir import Atom, Eqn, Jaxpr, Literal, ShapedArray, Var
from fgrad.lower.kernel.program import Program, Segment
from fgrad.lower.schedule.partition import HostStep

INPUT, BLOCK, FRESH, CONSTANT, HOST = "input", "block", "fresh", "constant", "host"
FORMAT = 1
_DTYPES = {d.short: d for d in ALL_DTYPES}
_ENTRY_NAME = re.compile(r"seg[0-9]+(_p[0-9]+)?")

Entry = tuple[str, int, bool]   # (exported symbol, calls in the part, parallel)


@dataclass(frozen=True)
class Value:
    """One value of a call: an INPUT (`index`: its position), a BLOCK (`index`: the pooled
    block holding it), a FRESH array, a CONSTANT (`constant`: its bytes) or a HOST result."""

    kind: str
    index: int
    shape: tuple[int, ...]
    dtype: DType
    constant: bytes = b""

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass(frozen=True)
class NativeStep:
    """A segment: `table[s]` is the value in buffer slot s; it writes `writes`."""

    table: tuple[int, ...]
    writes: tuple[int, ...]
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class HostCall:
    """An equation evaluated on the host (never serialized)."""

    eqn: Eqn
    reads: tuple[int, ...]
    writes: tuple[int, ...]


@dataclass(frozen=True)
class CallPlan:
    """What a call does (module docstring)."""

    n_inputs: int
    values: tuple[Value, ...]
    steps: tuple[NativeStep | HostCall, ...]
    outputs: tuple[int, ...]
    block_bytes: tuple[int, ...]
    donations: tuple[tuple[int, tuple[int, ...]], ...]  # (output value, input positions)

    @property
    def native_only(self) -> bool:
        """Whether every step is native (the plan can then be stored)."""
        return all(isinstance(s, NativeStep) for s in self.steps)


def _value(kind: str, index: int, aval: ShapedArray, constant: bytes = b"") -> Value:
    return Value(kind, index, tuple(aval.shape), aval.dtype, constant)


def from_program(program: Program, entries_of: Callable[[int, Segment], tuple[Entry, ...]]
                 ) -> CallPlan:
    """The call plan of `program`; `entries_of(i, segment)`: the backend's entry parts of
    segment number i."""
    values: list[Value] = []
    number: dict[int, int] = {}

    def define(v: Var, value: Value) -> int:
        values.append(value)
        number[id(v)] = len(values) - 1
        return number[id(v)]

    def atom(a: Atom) -> int:
        if isinstance(a, Literal):
            arr = np.asarray(a.val, dtype=a.aval.dtype.np)
            values.append(_value(CONSTANT, -1, a.aval, arr.tobytes()))
            return len(values) - 1
        return number[id(a)]

    for i, v in enumerate(program.jaxpr.invars):
        define(v, _value(INPUT, i, v.aval))
    steps: list[NativeStep | HostCall] = []
    segments = 0
    for action in program.actions:
        if isinstance(action, Segment):
            writes = tuple(define(v, _value(*_storage(program, v), v.aval))
                           for v in action.allocs if id(v) not in program.unstored)
            for v in action.allocs:   # never written: its slot names the array written
                if id(v) in program.unstored:
                    number[id(v)] = number[id(program.unstored[id(v)])]
            table = tuple(number[id(v)] for v in action.table)
            steps.append(NativeStep(table, writes, entries_of(segments, action)))
            segments += 1
        else:
            reads = tuple(atom(a) for a in action.eqn.inputs)
            writes = tuple(define(v, _value(HOST, -1, v.aval)) for v in action.eqn.outvars)
            steps.append(HostCall(action.eqn, reads, writes))
    outputs = tuple(atom(a) for a in program.jaxpr.outvars)
    donations = tuple((number[out], tuple(ins)) for out, ins in _alias_plan(program).items())
    return CallPlan(len(program.jaxpr.invars), tuple(values), tuple(steps), outputs,
                    tuple(program.buffer_bytes), donations)


def _storage(program: Program, v: Var) -> tuple[str, int]:
    block = program.buffer_of.get(id(v))
    return (FRESH, -1) if block is None else (BLOCK, block)


def _use_positions(program: Program) -> tuple[dict[int, int], dict[int, int]]:
    """The first and the last call (kernel, library call or host step, in run order) that
    reads or writes each value, by var id."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    pos = 0
    for action in program.actions:
        if isinstance(action, HostStep):
            groups = [list(action.eqn.inputs) + list(action.eqn.outvars)]
        else:
            groups = [[action.table[s] for s in slots] for _, slots in action.calls]
        for group in groups:
            pos += 1
            for v in group:
                if isinstance(v, Var):
                    first.setdefault(id(v), pos)
                    last[id(v)] = pos
    return first, last


def _alias_plan(program: Program) -> dict[int, list[int]]:
    """For each output written by native code (by var id): the input positions whose array
    it may be written into when donated. Same shape and dtype; the input is not an output
    itself; and every use of the input comes in an earlier call than the output's write, so
    no kernel ever sees both (their pointers are `noalias`)."""
    jaxpr = program.jaxpr
    first, last = _use_positions(program)
    outs = {id(v) for v in jaxpr.outvars if isinstance(v, Var)}
    written = {id(v) for a in program.actions if isinstance(a, Segment) for v in a.allocs}
    plan: dict[int, list[int]] = {}
    for v in jaxpr.outvars:
        if not isinstance(v, Var) or id(v) not in written or id(v) in program.buffer_of:
            continue
        plan[id(v)] = [i for i, u in enumerate(jaxpr.invars)
                       if u.aval.shape == v.aval.shape and u.aval.dtype == v.aval.dtype
                       and id(u) not in outs and last.get(id(u), 0) < first.get(id(v), 0)]
    return {k: c for k, c in plan.items() if c}


def direct_form(plan: CallPlan) -> tuple[list[int], list[int]] | None:
    """For a plan that is one native step writing each output into a fresh array (no
    blocks, no host calls): (the output values, the table order as positions in inputs +
    outputs), else None."""
    if len(plan.steps) != 1 or not isinstance(plan.steps[0], NativeStep) or plan.block_bytes:
        return None
    step, outs = plan.steps[0], list(plan.outputs)
    if len(set(outs)) != len(outs) or set(step.writes) != set(outs) \
            or any(plan.values[o].kind != FRESH for o in outs):
        return None
    position = {v: v for v in range(plan.n_inputs)}
    position.update({o: plan.n_inputs + j for j, o in enumerate(outs)})
    if any(v not in position for v in step.table):
        return None
    return outs, [position[v] for v in step.table]


# ---------------------------------------------------------------------------- JSON


def to_json(plan: CallPlan) -> dict[str, Any]:
    """The plan as JSON-ready data (only native-only plans: host calls hold equations)."""
    if not plan.native_only:
        raise ValueError("a call plan with host calls cannot be stored")
    steps = [[list(s.table), list(s.writes), [list(e) for e in s.entries]]
             for s in plan.steps if isinstance(s, NativeStep)]
    return {"format": FORMAT, "inputs": plan.n_inputs,
            "values": [[v.kind, v.index, list(v.shape), v.dtype.short, v.constant.hex()]
                       for v in plan.values],
            "steps": steps, "outputs": list(plan.outputs), "blocks": list(plan.block_bytes),
            "donations": [[out, list(ins)] for out, ins in plan.donations]}


def dumps(plan: CallPlan) -> bytes:
    """`to_json` as bytes."""
    return json.dumps(to_json(plan), separators=(",", ":")).encode()


def _int(x: Any, low: int = 0) -> int:
    if type(x) is not int or x < low:
        raise ValueError(f"expected an integer >= {low}, got {x!r}")
    return x


def _ints(x: Any, below: int | None = None) -> tuple[int, ...]:
    if type(x) is not list:
        raise ValueError(f"expected a list, got {type(x).__name__}")
    out = tuple(_int(i) for i in x)
    if below is not None and any(i >= below for i in out):
        raise ValueError(f"index out of range (< {below} expected): {out}")
    return out


def _parse_value(x: Any, blocks: tuple[int, ...]) -> Value:
    if type(x) is not list or len(x) != 5:
        raise ValueError("a value is [kind, index, shape, dtype, constant]")
    kind, index, shape, dtype, constant = x
    if kind not in (INPUT, BLOCK, FRESH, CONSTANT) or dtype not in _DTYPES \
            or type(constant) is not str:
        raise ValueError(f"bad value {x!r}")
    value = Value(kind, _int(index, -1), _ints(shape), _DTYPES[dtype], bytes.fromhex(constant))
    if kind == BLOCK and (value.index >= len(blocks) or value.nbytes > blocks[value.index]):
        raise ValueError(f"value {x!r} does not fit its block")
    if kind == CONSTANT and len(value.constant) != value.nbytes:
        raise ValueError(f"constant {x!r} has the wrong size")
    return value


def _parse_entry(x: Any) -> Entry:
    if type(x) is not list or len(x) != 3 or type(x[0]) is not str \
            or not _ENTRY_NAME.fullmatch(x[0]) or type(x[2]) is not bool:
        raise ValueError(f"bad entry {x!r}")
    return x[0], _int(x[1]), x[2]


def _parse_steps(raw: Any, values: tuple[Value, ...]) -> tuple[NativeStep, ...]:
    """The steps, checked: every value read exists by then, every write is a block or a
    fresh array written once."""
    if type(raw) is not list:
        raise ValueError("steps must be a list")
    ready = {i for i, v in enumerate(values) if v.kind in (INPUT, CONSTANT)}
    steps = []
    for x in raw:
        if type(x) is not list or len(x) != 3 or type(x[2]) is not list or not x[2]:
            raise ValueError(f"bad step {x!r}")
        table, writes = _ints(x[0], len(values)), _ints(x[1], len(values))
        if any(w in ready or values[w].kind not in (BLOCK, FRESH) for w in writes) \
                or len(set(writes)) != len(writes):
            raise ValueError(f"step writes {writes}: not fresh storage written once")
        ready.update(writes)
        if any(t not in ready for t in table):
            raise ValueError(f"step reads values not computed yet: {table}")
        steps.append(NativeStep(table, writes, tuple(_parse_entry(e) for e in x[2])))
    return tuple(steps)


def from_json(data: Any) -> CallPlan:
    """The plan `to_json` wrote; ValueError for anything else (a damaged entry)."""
    if type(data) is not dict or data.get("format") != FORMAT:
        raise ValueError("not a call plan of this format")
    blocks = _ints(data.get("blocks"))
    raw_values = data.get("values")
    if type(raw_values) is not list:
        raise ValueError("values must be a list")
    values = tuple(_parse_value(v, blocks) for v in raw_values)
    n_inputs = _int(data.get("inputs"))
    kinds = [v.kind == INPUT and v.index == i for i, v in enumerate(values)]
    if n_inputs > len(values) or not all(kinds[:n_inputs]) or any(kinds[n_inputs:]) \
            or any(v.kind == INPUT for v in values[n_inputs:]):
        raise ValueError("the inputs must be the first values, in order")
    steps = _parse_steps(data.get("steps"), values)
    outputs = _ints(data.get("outputs"), len(values))
    written = {w for s in steps for w in s.writes} | set(range(n_inputs))
    if any(o not in written and values[o].kind != CONSTANT for o in outputs):
        raise ValueError("an output is never computed")
    donations = []
    raw_donations = data.get("donations")
    for x in raw_donations if type(raw_donations) is list else [None]:
        if type(x) is not list or len(x) != 2:
            raise ValueError(f"bad donation {x!r}")
        out, ins = _int(x[0]), _ints(x[1], n_inputs)
        if out not in outputs or values[out].kind != FRESH or any(
                (values[i].shape, values[i].dtype) != (values[out].shape, values[out].dtype)
                for i in ins):
            raise ValueError(f"bad donation {x!r}")
        donations.append((out, ins))
    return CallPlan(n_inputs, values, steps, outputs, blocks, tuple(donations))


def loads(payload: bytes) -> CallPlan:
    """`from_json` of bytes; ValueError when they are not a well-formed plan."""
    try:
        data = json.loads(payload.decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ValueError(f"not JSON: {err}") from None
    return from_json(data)


# ---------------------------------------------------------------------------- records

_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Objects:
    """What an executable links, by cache key: the entry module's object code, then the
    kernels', library calls' and routines'; and the process symbols its library calls
    resolve (the backend's names, e.g. "gemm", "lapack:spotrf")."""

    entry: str
    linked: tuple[str, ...]
    symbols: tuple[str, ...]


def dump_record(plan: CallPlan, objects: Objects) -> bytes:
    """A whole compiled program as bytes: the plan and what to link."""
    record = {"plan": to_json(plan), "entry": objects.entry, "linked": list(objects.linked),
              "symbols": list(objects.symbols)}
    return json.dumps(record, separators=(",", ":")).encode()


def parse_record(payload: bytes, jaxpr: Jaxpr) -> tuple[CallPlan, Objects]:
    """What `dump_record` wrote, checked against `jaxpr`'s inputs and outputs; ValueError
    when it is damaged or does not fit (object keys must be hex digests: they name files)."""
    try:
        record = json.loads(payload.decode())
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ValueError(f"not JSON: {err}") from None
    if type(record) is not dict or set(record) != {"plan", "entry", "linked", "symbols"} \
            or type(record["linked"]) is not list or type(record["symbols"]) is not list:
        raise ValueError("not a program record")
    plan = from_json(record["plan"])
    keys, symbols = [record["entry"], *record["linked"]], record["symbols"]
    if not all(type(k) is str and _KEY.fullmatch(k) for k in keys) \
            or not all(type(s) is str for s in symbols):
        raise ValueError("bad object keys or symbols")
    want = [(tuple(v.aval.shape), v.aval.dtype) for v in [*jaxpr.invars, *jaxpr.outvars]]
    have = [(plan.values[i].shape, plan.values[i].dtype)
            for i in [*range(plan.n_inputs), *plan.outputs]]
    if plan.n_inputs != len(jaxpr.invars) or want != have:
        raise ValueError("the record's inputs and outputs are not the program's")
    return plan, Objects(keys[0], tuple(keys[1:]), tuple(symbols))
