"""Native scan and while loops for the llvm backend: the whole loop is one native call.

In: a `scan` or `while` equation whose sub-jaxprs each compile to ONE serial native segment
that writes every output itself (no host steps, no nested loops, no threaded parts, no
output that is an input or a literal); `native_loop(eqn)` returns None for any other,
which then runs through schedule/control_flow.py (a host loop over native calls).
Out: a `NativeLoop`: `loop(args) -> outputs` on NumPy arrays.

The sub-programs are the same cached executables the host loop would call; a small driver
function, generated with llvmlite, calls their `seg0` entries through function pointers,
building each call's buffer table on its stack:
- scan: iteration i reads the carry from the init (i = 0) or the previous iteration's
  output, and writes its carry into the final output or a scratch buffer, alternating so
  the last iteration lands in the output; x rows and y rows are pointers into xs and ys.
- while: cond writes a bool; the body alternates between two scratch carries; the final
  carry is copied into the output once.
After each call the driver returns at once if a routine of it ran out of memory (seg0
returns its failed allocations: gemm/scratch.py), and the loop's call raises MemoryError.
Buffers (sub-program intermediates, scratch carries, the predicate) come from the pool.
"""
from __future__ import annotations

import ctypes
import weakref
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from llvmlite import ir

from fgrad.core.ir import Atom, Eqn, Jaxpr, Var
from fgrad.core.prims.elementwise import convert_p
from fgrad.lower.llvm.buffer_pool import POOL
from fgrad.lower.llvm.dispatch import FAILED, out_of_memory
from fgrad.lower.kernel.call_plan import BLOCK, NativeStep

if TYPE_CHECKING:
    from fgrad.lower.llvm.runtime import LLVMExecutable

I8P = ir.IntType(8).as_pointer()
I64 = ir.IntType(64)
TABLE = ir.FunctionType(ir.VoidType(), [I8P.as_pointer()])
SEGMENT = ir.FunctionType(I64, [I8P.as_pointer()])   # a sub-program's seg0


@dataclass
class _Sub:
    """A compiled sub-jaxpr: its executable, entry address and buffer table layout."""

    exe: Any
    entry: int
    table: list[Any]             # a Var of the sub-jaxpr, or a stand-in for a block
    blocks: list[int]            # intermediate buffer sizes (bytes)
    block_of: dict[int, int]     # var id -> intermediate buffer number


_WRITTEN: weakref.WeakKeyDictionary[Jaxpr, Jaxpr] = weakref.WeakKeyDictionary()


def outputs_written(jaxpr: Jaxpr) -> Jaxpr:
    """`jaxpr` with a copy equation for each output that no equation produces (an input, a
    literal, or a repeat of another output), so the program writes every output itself
    (a loop's carry that passes through unchanged, like a fori_loop's upper bound).
    Memoized: compiled executables are cached by jaxpr identity."""
    if jaxpr in _WRITTEN:
        return _WRITTEN[jaxpr]
    produced = {id(v) for e in jaxpr.eqns for v in e.outvars}
    eqns, outs, seen = list(jaxpr.eqns), list[Atom](), set()
    for a in jaxpr.outvars:
        if isinstance(a, Var) and id(a) in produced and id(a) not in seen:
            seen.add(id(a))
            outs.append(a)
            continue
        copy = Var(a.aval)
        eqns.append(Eqn(convert_p, [a], {"new_dtype": a.aval.dtype}, [copy]))
        outs.append(copy)
    new = jaxpr if len(eqns) == len(jaxpr.eqns) else \
        Jaxpr(list(jaxpr.constvars), list(jaxpr.invars), eqns, outs)
    _WRITTEN[jaxpr] = new
    return new


def _sub(jaxpr: Jaxpr) -> _Sub | None:
    """The compiled sub-program of `jaxpr` if it is one serial native step writing its
    outputs (`jaxpr` must come from `outputs_written`)."""
    from fgrad.transforms.executables import executable_for
    exe = cast("LLVMExecutable", executable_for(jaxpr, "llvm"))
    plan = exe.plan
    if len(plan.steps) != 1 or not isinstance(plan.steps[0], NativeStep):
        return None
    step, outs = plan.steps[0], jaxpr.outvars
    if not all(isinstance(v, Var) for v in outs) or len(set(plan.outputs)) != len(outs) \
            or not set(plan.outputs) <= set(step.writes):
        return None
    if len(step.entries) != 1 or "_p" in step.entries[0][0]:
        return None  # threaded parts: no single serial entry
    # the table as the sub-jaxpr's variables; an intermediate as a stand-in for its block
    holder: dict[int, Any] = dict(enumerate(jaxpr.invars))
    holder.update(zip(plan.outputs, outs))
    block_of: dict[int, int] = {}
    for t in step.table:
        if t not in holder:
            if plan.values[t].kind != BLOCK:
                return None
            holder[t] = object()
            block_of[id(holder[t])] = plan.values[t].index
    entry = exe.engine.get_function_address(step.entries[0][0])
    return _Sub(exe, entry, [holder[t] for t in step.table], list(plan.block_bytes), block_of)


# ---------------------------------------------------------------------------- IR helpers


class _Driver:
    """Builds `void loop(i8** T)`; T holds function pointers, arrays and scratch."""

    def __init__(self, name: str):
        self.module = ir.Module(name="fgrad_loop")
        self.fn = ir.Function(self.module, TABLE, name=name)
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.T = self.fn.args[0]

    def slot(self, j: int) -> ir.Value:
        """T[j]."""
        return self.b.load(self.b.gep(self.T, [ir.Constant(I64, j)], inbounds=True))

    def table(self, n: int) -> ir.Value:
        """A stack table of n pointers."""
        return self.b.alloca(I8P, ir.Constant(I64, max(n, 1)))

    def put(self, tab: ir.Value, s: int, value: ir.Value) -> None:
        """tab[s] = value."""
        self.b.store(value, self.b.gep(tab, [ir.Constant(I64, s)], inbounds=True))

    def call(self, fn_slot: int, tab: ir.Value) -> None:
        """Call the segment entry whose address is T[fn_slot] on `tab`; return at once
        when a routine of it ran out of memory (gemm/scratch.py: the loop stops, rather
        than go on, or never end, on what the routine did not write)."""
        target = self.b.bitcast(self.slot(fn_slot), SEGMENT.as_pointer())
        failed = self.b.call(target, [tab])   # threads.render_entry: failed allocations
        with self.b.if_then(self.b.icmp_unsigned("!=", failed, ir.Constant(I64, 0)),
                            likely=False):
            self.b.ret_void()

    def offset(self, base: ir.Value, row: ir.Value, row_bytes: int) -> ir.Value:
        """base + row * row_bytes."""
        return self.b.gep(base, [self.b.mul(row, ir.Constant(I64, row_bytes))])

    def memcpy(self, dst: ir.Value, src: ir.Value, nbytes: int) -> None:
        """memcpy(dst, src, nbytes) (no-op for 0 bytes)."""
        if nbytes:
            copy = self.module.declare_intrinsic("llvm.memcpy", [I8P, I8P, I64])
            self.b.call(copy, [dst, src, ir.Constant(I64, nbytes), ir.Constant(ir.IntType(1), 0)])


def _nbytes(v: Atom) -> int:
    return v.aval.size * v.aval.dtype.itemsize


class _Layout:
    """Positions in the driver's table T, assigned as the Python side fills it."""

    def __init__(self) -> None:
        self.count = 0

    def take(self, n: int = 1) -> list[int]:
        first = self.count
        self.count += n
        return list(range(first, first + n))


# ---------------------------------------------------------------------------- loops


class NativeLoop:
    """One scan or while equation compiled to a single native driver call."""

    def __init__(self, eqn: Eqn, subs: list[_Sub], module: ir.Module, name: str,
                 n_slots: int, fill: Any):
        from fgrad.lower.llvm.engines import compiled_engine, target_machine
        tm = target_machine()
        module.triple = tm.triple
        module.data_layout = str(tm.target_data)
        self.eqn, self.subs, self.fill, self.n_slots = eqn, subs, fill, n_slots
        self.engine = compiled_engine(module)[0]
        self.run = TABLE_CALL(self.engine.get_function_address(name))

    def __call__(self, args: list[np.ndarray]) -> list[np.ndarray]:
        outs = [np.empty(v.aval.shape, v.aval.dtype.np) for v in self.eqn.outvars]
        blocks: list[np.ndarray] = []
        try:
            pointers = self.fill(args, outs, blocks)
            table = (ctypes.c_void_p * max(self.n_slots, 1))(*pointers)
            failures = FAILED[0]
            self.run(table)
            if FAILED[0] != failures:
                raise out_of_memory(SimpleNamespace(eqns=[self.eqn]))  # its sub-jaxprs
        finally:
            for block in blocks:
                POOL.give(block)
        return outs


TABLE_CALL = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p))


def _address(a: np.ndarray) -> int:
    return a.ctypes.data if a.size else 0


def _sub_fixed(d: _Driver, sub: _Sub, tab: ir.Value, first_block: int,
               fixed: dict[int, int]) -> None:
    """Fill the slots of `sub`'s table that stay put: its intermediates and `fixed`
    (var id -> position in T)."""
    for s, v in enumerate(sub.table):
        if id(v) in sub.block_of:
            d.put(tab, s, d.slot(first_block + sub.block_of[id(v)]))
        elif id(v) in fixed:
            d.put(tab, s, d.slot(fixed[id(v)]))


def _slots_of(sub: _Sub, var: Atom) -> list[int]:
    return [s for s, v in enumerate(sub.table) if v is var]


def _new_blocks(sizes: list[int], blocks: list[np.ndarray]) -> list[int]:
    """Take pooled blocks of `sizes` bytes (kept in `blocks` to give back); addresses."""
    out = []
    for n in sizes:
        block = POOL.take(n)
        blocks.append(block)
        out.append(_address(block))
    return out


def _pointer_filler(lay_fn: list[tuple[int, int]], arg_pos: list[int], out_pos: list[int],
                    scratch: list[tuple[int, int]], n_slots: int) -> Any:
    """fill(args, outs, blocks) -> T: entries at their positions, arrays, pooled scratch
    (`scratch`: (position, bytes))."""
    def fill(args: list[np.ndarray], outs: list[np.ndarray], blocks: list[np.ndarray]
             ) -> list[int]:
        pointers = [0] * n_slots
        for pos, entry in lay_fn:
            pointers[pos] = entry
        for pos, a in zip(arg_pos, args, strict=True):
            pointers[pos] = _address(a)
        for pos, o in zip(out_pos, outs, strict=True):
            pointers[pos] = _address(o)
        addresses = _new_blocks([n for _, n in scratch], blocks)
        for (pos, _), address in zip(scratch, addresses, strict=True):
            pointers[pos] = address
        return pointers
    return fill


def _block_scratch(sub: _Sub, first: int) -> list[tuple[int, int]]:
    return [(first + b, n) for b, n in enumerate(sub.blocks)]


def _bind_carries(d: _Driver, sub: _Sub, tab: ir.Value, cur: ir.Value, carry_in: list[Var],
                  carry_out: list[Atom], outs: list[ir.Value]) -> None:
    """Point `sub`'s carry inputs at the current carries `cur[k]` and its carry outputs at
    `outs[k]` in its table `tab`."""
    for k, (v_in, v_out) in enumerate(zip(carry_in, carry_out, strict=True)):
        carry_now = d.b.load(d.b.gep(cur, [ir.Constant(I64, k)], inbounds=True))
        for s in _slots_of(sub, v_in):
            d.put(tab, s, carry_now)
        for s in _slots_of(sub, v_out):
            d.put(tab, s, outs[k])


def native_scan(eqn: Eqn) -> NativeLoop | None:
    """The native driver of a scan (module docstring), or None."""
    p = eqn.params
    nc, nk, length = p["num_consts"], p["num_carry"], p["length"]
    body = outputs_written(p["body"])
    sub = _sub(body)
    if sub is None:
        return None
    carry_out = body.outvars[:nk]
    lay = _Layout()
    fn_pos, = lay.take()
    arg_pos, out_pos = lay.take(len(eqn.inputs)), lay.take(len(eqn.outvars))
    scratch_pos = lay.take(nk)
    block0 = lay.take(len(sub.blocks))[0] if sub.blocks else lay.count
    d = _Driver("scan")
    b = d.b
    tab = d.table(len(sub.table))
    _sub_fixed(d, sub, tab, block0, {id(body.invars[j]): arg_pos[j] for j in range(nc)})
    cur = b.alloca(I8P, ir.Constant(I64, max(nk, 1)))
    for k in range(nk):
        d.put(cur, k, d.slot(arg_pos[nc + k]))
    if length == 0:
        for k in range(nk):
            d.memcpy(d.slot(out_pos[k]), d.slot(arg_pos[nc + k]), _nbytes(carry_out[k]))
        b.ret_void()
    else:
        _scan_loop(d, sub, tab, cur, eqn, fn_pos, arg_pos, out_pos, scratch_pos)
    scratch = [(pos, _nbytes(v)) for pos, v in zip(scratch_pos, carry_out, strict=True)]
    scratch += _block_scratch(sub, block0)
    fill = _pointer_filler([(fn_pos, sub.entry)], arg_pos, out_pos, scratch, lay.count)
    return NativeLoop(eqn, [sub], d.module, "scan", lay.count, fill)


def _scan_loop(d: _Driver, sub: _Sub, tab: ir.Value, cur: ir.Value, eqn: Eqn, fn_pos: int,
               arg_pos: list[int], out_pos: list[int], scratch_pos: list[int]) -> None:
    p = eqn.params
    nc, nk, length = p["num_consts"], p["num_carry"], p["length"]
    body = outputs_written(p["body"])
    b = d.b
    entry = b.block
    loop, done = d.fn.append_basic_block("loop"), d.fn.append_basic_block("done")
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I64, name="i")
    i.add_incoming(ir.Constant(I64, 0), entry)
    last = ir.Constant(I64, length - 1)
    it = b.sub(last, i) if p["reverse"] else i
    to_output = b.icmp_unsigned("==", b.and_(b.sub(last, i), ir.Constant(I64, 1)),
                                ir.Constant(I64, 0))
    outs = [b.select(to_output, d.slot(out_pos[k]), d.slot(scratch_pos[k]))
            for k in range(nk)]
    _bind_carries(d, sub, tab, cur, body.invars[nc:nc + nk], body.outvars[:nk], outs)
    for j, v in enumerate(body.invars[nc + nk:]):
        row = d.offset(d.slot(arg_pos[nc + nk + j]), it, _nbytes(v))
        for s in _slots_of(sub, v):
            d.put(tab, s, row)
    for j, out_v in enumerate(body.outvars[nk:]):
        row = d.offset(d.slot(out_pos[nk + j]), it, _nbytes(out_v))
        for s in _slots_of(sub, out_v):
            d.put(tab, s, row)
    d.call(fn_pos, tab)
    for k, out in enumerate(outs):
        d.put(cur, k, out)
    nxt = b.add(i, ir.Constant(I64, 1))
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(I64, length)), loop, done)
    b.position_at_end(done)
    b.ret_void()


def native_while(eqn: Eqn) -> NativeLoop | None:
    """The native driver of a while loop (module docstring), or None."""
    p = eqn.params
    cond, body = outputs_written(p["cond"]), outputs_written(p["body"])
    cc, bc = p["cond_nconsts"], p["body_nconsts"]
    csub, bsub = _sub(cond), _sub(body)
    if csub is None or bsub is None:
        return None
    nk = len(eqn.outvars)
    lay = _Layout()
    fc, fb = lay.take(2)
    arg_pos, out_pos = lay.take(len(eqn.inputs)), lay.take(nk)
    s0, s1, (pred_pos,) = lay.take(nk), lay.take(nk), lay.take(1)
    cblock0 = lay.take(len(csub.blocks))[0] if csub.blocks else lay.count
    bblock0 = lay.take(len(bsub.blocks))[0] if bsub.blocks else lay.count
    d = _Driver("loop")
    b = d.b
    ctab, btab = d.table(len(csub.table)), d.table(len(bsub.table))
    _sub_fixed(d, csub, ctab, cblock0, {id(cond.invars[j]): arg_pos[j] for j in range(cc)})
    _sub_fixed(d, bsub, btab, bblock0,
               {id(body.invars[j]): arg_pos[cc + j] for j in range(bc)})
    for s in _slots_of(csub, cond.outvars[0]):
        d.put(ctab, s, d.slot(pred_pos))
    cur = b.alloca(I8P, ir.Constant(I64, max(nk, 1)))
    parity = b.alloca(I64)
    b.store(ir.Constant(I64, 0), parity)
    for k in range(nk):
        d.put(cur, k, d.slot(arg_pos[cc + bc + k]))
    head, step, done = (d.fn.append_basic_block(n) for n in ("head", "step", "done"))
    b.branch(head)
    b.position_at_end(head)
    for k in range(nk):
        carry_now = b.load(b.gep(cur, [ir.Constant(I64, k)], inbounds=True))
        for s in _slots_of(csub, cond.invars[cc + k]):
            d.put(ctab, s, carry_now)
    d.call(fc, ctab)
    pred = b.load(d.slot(pred_pos))
    b.cbranch(b.icmp_unsigned("!=", pred, ir.Constant(ir.IntType(8), 0)), step, done)
    b.position_at_end(step)
    even = b.icmp_unsigned("==", b.load(parity), ir.Constant(I64, 0))
    outs = [b.select(even, d.slot(s0[k]), d.slot(s1[k])) for k in range(nk)]
    _bind_carries(d, bsub, btab, cur, body.invars[bc:bc + nk], body.outvars[:nk], outs)
    d.call(fb, btab)
    for k, out in enumerate(outs):
        d.put(cur, k, out)
    b.store(b.xor(b.load(parity), ir.Constant(I64, 1)), parity)
    b.branch(head)
    b.position_at_end(done)
    for k, v in enumerate(eqn.outvars):
        carry_now = b.load(b.gep(cur, [ir.Constant(I64, k)], inbounds=True))
        d.memcpy(d.slot(out_pos[k]), carry_now, _nbytes(v))
    b.ret_void()
    scratch = [(pos, _nbytes(v)) for pos, v in zip(s0 + s1, list(eqn.outvars) * 2,
                                                   strict=True)]
    scratch += [(pred_pos, 1)] + _block_scratch(csub, cblock0) + _block_scratch(bsub, bblock0)
    fill = _pointer_filler([(fc, csub.entry), (fb, bsub.entry)], arg_pos, out_pos, scratch,
                           lay.count)
    return NativeLoop(eqn, [csub, bsub], d.module, "loop", lay.count, fill)


def native_loop(eqn: Eqn) -> NativeLoop | None:
    """The native driver of a scan/while equation, or None when it does not qualify."""
    if eqn.primitive.name == "scan":
        return native_scan(eqn)
    if eqn.primitive.name == "while":
        return native_while(eqn)
    return None
