"""The shortest Python path from a jitted call to its native entry (one-segment programs).

In: an executable whose program is one serial native segment writing every output directly
(`LLVMExecutable._direct_plan`). Out: `LeanCall`, a callable doing per call only what
cannot be precomputed:

- the buffer table is one ctypes array allocated once; the native entry gets its address
  as a plain integer (no ctypes array built per call, no pointer conversion);
- an argument that is the very array of the previous call (checked with `is`) needs no
  dtype/contiguity check and no address: its slot already holds it (small arrays are kept
  referenced so that their memory, and so the address, stays theirs);
- an output below the pooled size (64 KiB) is written into a scratch array at a fixed
  address and returned as a copy, a plain NumPy array: a fresh 64-byte aligned array and
  its address cost 1.8 us, the copy 0.3 us up to 16 KiB and 0.9 us at 32 KiB (a jitted
  `x * 2 + 1` on 2048 float32 6.5 -> 3.4 us per call, a 64 x 64 matmul 10.9 -> 7.5 us;
  the limit was 4 KiB before);
- the entry gets the table's address as a prebuilt `c_void_p` (a Python int is converted
  on every call: 0.49 -> 0.28 us), and outputs are frozen with `setflags(False)`
  (positional: the keyword form parses its arguments, 0.68 against 1.02 us with the copy).

Calls from several threads at once are safe: a call that finds the table taken (a
non-blocking lock) takes the general path instead. docs/performance.md (W7) has the measurements.

A native routine whose scratch allocation fails records it and returns early
(gemm/scratch.py), and the call raises `out_of_memory`'s MemoryError: the lean path tests
what the segment's entry returns (the failures during the call, counted natively: ~20 ns
a call, where reading the record's count before and after cost ~60), the others read the
count before and after their native calls.
"""
from __future__ import annotations

import ctypes
import math
import operator
import threading
import weakref
from typing import Any, Callable, cast

import numpy as np

from fgrad.lower.llvm.buffer_pool import MIN_POOLED_BYTES, POOL, aligned_empty
from fgrad.lower.llvm.gemm.scratch import BYTES, FAILURES, SITE, SITES, VIEW as FAILED

# inputs below this size stay referenced between calls; outputs use scratch (docstring)
KEEP_BELOW_BYTES = MIN_POOLED_BYTES
# a serial segment's entry returns its failed allocations (threads.render_entry), read as
# a pointer: ctypes gives None for 0, the cheapest conversion (16 ns over a void entry in
# the lean call, an int 30)
_ENTRY_BY_ADDRESS = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


class LeanCall:
    """Call a one-segment executable on NumPy arrays; falls back to `general(arrays)`
    (a list of output arrays either way) whenever an argument needs converting."""

    def __init__(self, entry: int | Callable[[Any], None], plan: Any,
                 general: Callable[[Any], list],
                 address_of: Callable[[np.ndarray], int],
                 new_output: Callable[[tuple, np.dtype], tuple[np.ndarray, int]],
                 failure: Callable[[], MemoryError] = lambda: out_of_memory(None)):
        """`entry`: the segment entry's address, or (a segment cut into parts) a callable
        that runs the parts on the buffer table (`threads.run_parts`), either returning the
        failed allocations during the call; `failure()`: the error of a call whose native
        code ran out of memory (`out_of_memory`)."""
        in_dtypes, out_specs, order, table_type = plan
        self._failure = failure
        self._general, self._address_of, self._new_output = general, address_of, new_output
        self._table = table_type()
        self._table_address = ctypes.addressof(self._table)
        if callable(entry):
            self._entry, self._table_arg = entry, self._table
        else:
            self._entry = _ENTRY_BY_ADDRESS(entry)
            self._table_arg = ctypes.c_void_p(self._table_address)
        self._dtypes, self._arity = in_dtypes, len(in_dtypes)
        self._slots: list[list[int]] = [[] for _ in range(len(in_dtypes) + len(out_specs))]
        for slot, source in enumerate(order):
            self._slots[source].append(slot)
        self._last: list[Any] = [None] * len(in_dtypes)
        self._outs: list[tuple[tuple, np.dtype, np.ndarray | None, list[int]]] = []
        for j, (shape, dtype) in enumerate(out_specs):
            slots = self._slots[len(in_dtypes) + j]
            scratch = None
            if int(np.prod(shape)) * np.dtype(dtype).itemsize < KEEP_BELOW_BYTES:
                scratch = np.empty(shape, dtype)
                for slot in slots:
                    self._table[slot] = scratch.ctypes.data
            self._outs.append((shape, dtype, scratch, slots))
        scratches = [scratch for _, _, scratch, _ in self._outs if scratch is not None]
        self._scratch = scratches if len(scratches) == len(self._outs) else None
        self._lock = threading.Lock()

    def __call__(self, arrays: Any) -> list[np.ndarray]:
        if len(arrays) != self._arity or not self._lock.acquire(False):
            return self._general(arrays)
        try:
            same = arrays[0] is self._last[0] if self._arity == 1 else \
                all(map(operator.is_, arrays, self._last))
            if not same and not self._bind_inputs(arrays):
                return self._general(arrays)
            if self._scratch is not None:  # every output small: the common tiny call
                if self._entry(self._table_arg):   # allocations failed (module docstring)
                    raise self._failure()
                outs = [scratch.copy() for scratch in self._scratch]
            else:
                fresh = self._bind_outputs()
                if self._entry(self._table_arg):
                    raise self._failure()
                outs = [scratch.copy() if scratch is not None else fresh.pop(0)
                        for _, _, scratch, _ in self._outs]
        finally:
            self._lock.release()
        for out in outs:
            out.setflags(False)  # write=False, positional (module docstring)
        return outs

    def _bind_inputs(self, arrays: Any) -> bool:
        """Point the table at the arguments; False when one needs converting first."""
        last, table = self._last, self._table
        for i, a in enumerate(arrays):
            if a is last[i]:
                continue
            if type(a) is not np.ndarray or a.dtype != self._dtypes[i] \
                    or not a.flags.c_contiguous:
                return False
            address = self._address_of(a)
            for slot in self._slots[i]:
                table[slot] = address
            last[i] = a if a.nbytes < KEEP_BELOW_BYTES else None
        return True

    def _bind_outputs(self) -> list[np.ndarray]:
        """Fresh arrays for the outputs too large for scratch, their slots pointed at them."""
        fresh = []
        for shape, dtype, scratch, slots in self._outs:
            if scratch is None:
                out, address = self._new_output(shape, dtype)
                for slot in slots:
                    self._table[slot] = address
                fresh.append(out)
        return fresh


_ADDRESSES: dict[int, tuple[Any, int]] = {}


def address_of(arr: np.ndarray) -> int:
    """The data address of `arr`, remembered while `arr` lives (`arr.ctypes.data` costs a
    microsecond or more, as much as a whole small kernel; callers pass the same arrays
    again and again)."""
    entry = _ADDRESSES.get(id(arr))
    if entry is not None and entry[0]() is arr:
        return entry[1]
    return _remember(arr, arr.ctypes.data)


def _remember(arr: np.ndarray, address: int) -> int:
    try:
        key = id(arr)
        _ADDRESSES[key] = (weakref.ref(arr, lambda _: _ADDRESSES.pop(key, None)), address)
    except TypeError:  # not weak-referenceable
        pass
    return address


def new_output(shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, int]:
    """A fresh output array (pooled when large) and its address; the caller makes it
    read-only once the native code has written it. The address is remembered for
    `address_of`: a training step's outputs are the next step's arguments."""
    if math.prod(shape) * dtype.itemsize >= MIN_POOLED_BYTES:
        out, address = POOL.array_at(shape, dtype)
    else:
        out, address = aligned_empty(shape, dtype)
    _remember(out, address)
    return out, address


def as_c(a: Any, dtype: np.dtype) -> np.ndarray:
    """`a` as a C-contiguous array of `dtype` (0-d stays 0-d; copied only when it is not
    one already)."""
    if type(a) is np.ndarray and a.dtype == dtype and a.flags.c_contiguous:
        return a
    arr = np.asarray(a, dtype=dtype)
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


ARENA_ALIGN = 64  # each intermediate's offset in the arena (the alignment of pooled blocks)


class ArenaCall:
    """Call a plan of native steps only with every pooled intermediate in one arena: per
    call one pool request (not one per block), no array object per intermediate (native
    code alone reads them), and each step's buffer table filled in place by one NumPy
    gather from the call's value addresses. Outputs are fresh read-only arrays, as on the
    general path (`LLVMExecutable._run`), which a call takes instead when the tables are
    in use by another thread."""

    def __init__(self, plan: Any, runners: list[Any], in_dtypes: list[np.dtype],
                 constants: list[Any], general: Callable[[Any], list],
                 failure: Callable[[], MemoryError] = lambda: out_of_memory(None)):
        from fgrad.lower.kernel.call_plan import BLOCK, CONSTANT, FRESH, INPUT
        self._failure = failure
        offsets, total = [], 0
        for nbytes in plan.block_bytes:
            offsets.append(total)
            total += -(-nbytes // ARENA_ALIGN) * ARENA_ALIGN
        self._arena_bytes, self._general, self._dtypes = total, general, in_dtypes
        self._base = np.zeros(len(plan.values), np.int64)   # offsets, constants' addresses
        self._in_arena = np.zeros(len(plan.values), np.int64)
        for v, value in enumerate(plan.values):
            if value.kind == BLOCK:
                self._base[v], self._in_arena[v] = offsets[value.index], 1
            elif value.kind == CONSTANT:
                self._base[v] = address_of(constants[v])
        self._constants = constants
        self._steps = []
        for step, runner in zip(plan.steps, runners, strict=True):
            table = (ctypes.c_void_p * len(step.table))()
            fresh = [(v, plan.values[v].shape, plan.values[v].dtype.np) for v in step.writes
                     if plan.values[v].kind == FRESH]
            self._steps.append((runner, table, np.frombuffer(cast(Any, table), np.int64),
                                np.array(step.table, np.intp), fresh))
        kinds = {FRESH: 0, INPUT: 1, CONSTANT: 2}
        self._outputs = [(o, kinds[plan.values[o].kind], plan.values[o].index)
                         for o in plan.outputs]
        self._lock = threading.Lock()

    @staticmethod
    def applies(plan: Any) -> bool:
        """Whether `plan` can run here: native steps only, every output fresh, an input or a
        constant (never an intermediate, whose memory goes back to the pool)."""
        from fgrad.lower.kernel.call_plan import CONSTANT, FRESH, INPUT
        return plan.native_only and bool(plan.steps) and all(
            plan.values[o].kind in (FRESH, INPUT, CONSTANT) for o in plan.outputs)

    def __call__(self, arrays: Any) -> list[np.ndarray]:
        if len(arrays) != len(self._dtypes) or not self._lock.acquire(False):
            return self._general(arrays)
        arena = None
        try:
            ins = [as_c(a, dt) for a, dt in zip(arrays, self._dtypes)]
            addresses = self._base.copy()
            if self._arena_bytes:
                arena = POOL.take(self._arena_bytes)
                addresses += self._in_arena * address_of(arena)
            addresses[:len(ins)] = [address_of(a) for a in ins]
            fresh: dict[int, np.ndarray] = {}
            failures = FAILED[0]
            for runner, table, slots, values, new in self._steps:
                for v, shape, dtype in new:
                    out, addresses[v] = new_output(shape, dtype)
                    _freeze(out)   # native code writes it through its address
                    fresh[v] = out
                np.take(addresses, values, out=slots)
                runner(table)
            if FAILED[0] != failures:
                raise self._failure()
        finally:
            if arena is not None:
                POOL.give(arena)
            self._lock.release()
        return [fresh[o] if kind == 0 else _read_only(ins[i] if kind == 1 else
                                                      self._constants[o].copy())
                for o, kind, i in self._outputs]


def _read_only(arr: np.ndarray) -> np.ndarray:
    """`arr` if it is read-only, else a read-only copy (an input returned as an output
    must not change when the caller writes the array it passed)."""
    if arr.flags.writeable:
        arr = arr.copy()
        _freeze(arr)
    return arr


def _freeze(arr: Any) -> None:
    arr.setflags(False)   # write=False, positional (module docstring)


def out_of_memory(source: Any) -> MemoryError:
    """The error of a native call during which a routine could not allocate its scratch
    (gemm/scratch.py), naming the operation: the equations of `source` (the jaxpr the
    program was compiled from, or None) that compute the failed routine's primitive."""
    site, nbytes = FAILURES[SITE], FAILURES[BYTES]
    primitive = next((name for name, code in SITES.items() if code == site), "")
    found = sorted(set(_operands(source, primitive))) if source is not None else []
    where = "the native " + {"dot_general": "matrix product", "": "code"}.get(primitive,
                                                                            primitive)
    if len(found) == 1:
        where += f" of {found[0]}"
    elif found:
        where += f" (one of those of {'; '.join(found[:4])}{'; ...' if len(found) > 4 else ''})"
    return MemoryError(
        f"fgrad: out of memory in {where}: {nbytes} bytes of scratch could not be allocated, "
        f"so the call returned nothing. Free memory, raise the process's memory limit "
        f"(ulimit -v), or call it on smaller arrays")


def _operands(jaxpr: Any, primitive: str) -> list[str]:
    """The operand types ("f32[8,8], f32[8,8]") of each equation of `primitive` in `jaxpr`
    and its sub-jaxprs."""
    found = []
    for eqn in getattr(jaxpr, "eqns", ()):
        if eqn.primitive.name == primitive:
            found.append(", ".join(str(getattr(v, "aval", v)) for v in eqn.inputs))
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                if hasattr(sub, "eqns"):
                    found += _operands(sub, primitive)
    return found
