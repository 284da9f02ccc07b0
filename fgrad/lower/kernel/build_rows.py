"""Build the kernel IR of a row-fused kernel: per row, one loop over the row per phase.

In: a `Schedule` and one of its row-fused `KernelStep`s (`step.phases`; see schedule/row_fusion.py).
Out: a `Kernel` and the jaxpr Vars bound to its buffer parameters (outputs first, then
inputs in first-use order), as `kernel_build.build_kernel` gives.

Two forms, both reading a row from main memory once and from cache in later phases:
- registers (every kept axis comes before the reduced ones, so a row is contiguous): the
  kept axes are the outer loops; per row and phase: the per-row outputs are stored, the
  phase's accumulators start at their identity, one loop over the row updates them and
  stores the pointwise outputs, then the accumulators are stored. Later phases read a
  reduction as its accumulator and a per-row value as its expression, which the per-row
  store computed before the loop;
- memory (a kept axis runs inside the row, e.g. softmax over a middle axis): the kept axes
  before the first reduced one are the rows; a phase starts its reductions at their
  identity in their output buffers, then loops over the rest of the domain row-major
  with out[kept] = op(out[kept], x), so the innermost loop stays on the contiguous axis;
  later phases load the results.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from fgrad.core.dtypes import NARROW_FLOATS
from fgrad.core.ir import Atom, Var
from fgrad.lower.kernel.index import (
    Div, Dyn, Ix, Mod, Sym, dyn_atoms, ix_const, linearize, used_syms,
)
from fgrad.lower.kernel.build import (
    RULES,
    Index,
    Plan,
    _choose,
    _count_groups,
    _elementwise,
    _kept,
    _Nest,
    _params,
    _Values,
    combine_op,
    identity,
    trailing_plans,
)
from fgrad.lower.kernel.ir import (
    AccInit,
    AccRead,
    AccUpdate,
    Const,
    Expr,
    IndexValue,
    Kernel,
    KernelIRError,
    Load,
    Op,
    Stmt,
    Store,
)
from fgrad.lower.schedule.row_fusion import AxisMap, registers_hold_rows, row_values
from fgrad.lower.schedule.partition import COSTLY, KernelStep, Schedule


class _RowValues(_Values):
    """Values of a row kernel; its per-row values are read at the current row `at` only
    (as accumulators and inline expressions in registers form, else from their buffers)."""

    def __init__(self, sched: Schedule, step: KernelStep, registers: bool):
        super().__init__(sched, step)
        self.maps, self.pointwise = row_values(step)
        self.registers = registers
        self.slot = {id(v): j for j, v in enumerate(step.outputs)}
        self.inline = self.pointwise | (set(self.maps) if registers else set())
        self.at: Index = ()

    def __call__(self, atom: Atom, idx: Index) -> Expr:
        if isinstance(atom, Var) and id(atom) in self.maps:
            if not _same_point(_at_row(atom, self.maps[id(atom)], self.at),
                               _at_row(atom, None, idx)):
                raise KernelIRError(f"{self.step.name}: row fusion reads a per-row value at "
                                    f"{_text(idx)}, not at the current row {_text(self.at)}")
            j = self.slot[id(atom)]
            if self.registers and self.step.reduced[j]:
                return _acc_value(j, atom)
            idx = tuple(ix_const(0) if a < 0 else self.at[a] for a in self.maps[id(atom)])
        return super().__call__(atom, idx)

    def define(self, var: Var, idx: Index) -> Expr:
        """The expression of output `var` at `idx` (not a load of its own buffer)."""
        if id(var) in self.inline:
            return self(var, idx)
        eqn = self.sched.producers[id(var)]
        return RULES.get(eqn.primitive.name, _elementwise)(self, eqn, idx)


def _text(idx: Index) -> str:
    return "(" + ", ".join(str(i) for i in idx) + ")"


def _at_row(var: Var, m: AxisMap | None, at: Index) -> tuple[Ix, ...]:
    """var's index at the row `at` through its axis map (m None: `at` is var's index),
    keeping only its axes longer than 1."""
    idx = at if m is None else tuple(ix_const(0) if a < 0 else at[a] for a in m)
    return tuple(i for i, n in zip(idx, var.aval.shape, strict=True) if n != 1)


def _same_point(a: tuple[Ix, ...], b: tuple[Ix, ...]) -> bool:
    """Whether two multi-indices agree at the corners and at a few random loop points (a
    check of the schedule's row analysis; index algebra may leave equal ones unequal).
    Indices read at run time are the same point only when they are equal."""
    if a == b:
        return True
    if any(dyn_atoms(i) for i in a + b):
        return False
    syms = sorted(set().union(*(used_syms(i) for i in a + b)), key=lambda s: s.name)
    rng = np.random.default_rng(0)
    points = [{s: 0 for s in syms}, {s: max(s.extent - 1, 0) for s in syms}]
    points += [{s: int(rng.integers(max(s.extent, 1))) for s in syms} for _ in range(6)]
    return all([_ix_value(i, p) for i in a] == [_ix_value(i, p) for i in b] for p in points)


def _ix_value(ix: Ix, env: dict[Sym, int]) -> int:
    total = ix.const
    for atom, coeff in ix.terms:
        if isinstance(atom, Sym):
            total += coeff * env[atom]
            continue
        assert not isinstance(atom, Dyn), "callers rule out run-time indices (dyn_atoms)"
        x = _ix_value(atom.arg, env)
        v = x // atom.d if isinstance(atom, Div) else x % atom.d if isinstance(atom, Mod) \
            else min(max(x, 0), atom.hi)
        total += coeff * v
    return total


def _acc_value(j: int, var: Var) -> Expr:
    """A reduction's accumulator as later phases see it: rounded to float16/bfloat16 as
    its store and load would round it."""
    dtype = var.aval.dtype
    acc = AccRead(j, dtype)
    narrow = dtype in NARROW_FLOATS
    return Op("convert_element_type", (acc,), dtype) if narrow else acc


# ---------------------------------------------------------------------------- phases


def _row_stores(vals: _RowValues, phase: int) -> list[Stmt]:
    """Per-row (non-reduction) outputs of `phase`, stored at the current row."""
    step, out = vals.step, list[Stmt]()
    for j, (v, r, p) in enumerate(zip(step.outputs, step.reduced, step.phases, strict=True)):
        if p == phase and not r and id(v) in vals.maps:
            idx = tuple(ix_const(0) if a < 0 else vals.at[a] for a in vals.maps[id(v)])
            out.append(Store(j, linearize(idx, v.aval.shape), vals.define(v, idx)))
    return out


def _loop_body(vals: _RowValues, phase: int) -> list[Stmt]:
    """Inside the phase's loop at point `vals.at`: pointwise stores, reduction updates."""
    step, idx, out = vals.step, vals.at, list[Stmt]()
    kept = linearize(tuple(idx[a] for a in _kept(step)), _kept_shape(step))
    for j, (v, r, p) in enumerate(zip(step.outputs, step.reduced, step.phases, strict=True)):
        if p != phase or not (r or id(v) in vals.pointwise):
            continue
        if not r:
            out.append(Store(j, linearize(idx, step.shape), vals.define(v, idx)))
            continue
        eqn = vals.sched.producers[id(v)]
        op, x = combine_op(eqn.primitive.name, v.aval.dtype), vals(eqn.inputs[0], idx)
        if vals.registers:
            out.append(AccUpdate(j, op, x))
        else:
            old = Load(j, kept, v.aval.dtype)
            out.append(Store(j, kept, Op(op, (old, x), v.aval.dtype)))
    return out


def _kept_shape(step: KernelStep) -> tuple[int, ...]:
    return tuple(step.shape[a] for a in _kept(step))


def _reductions(vals: _RowValues, phase: int) -> list[tuple[int, Var, str]]:
    """(slot, var, combine op) of each reduction of `phase`."""
    step, out = vals.step, []
    for j, (v, r, p) in enumerate(zip(step.outputs, step.reduced, step.phases, strict=True)):
        if r and p == phase:
            eqn = vals.sched.producers[id(v)]
            out.append((j, v, combine_op(eqn.primitive.name, v.aval.dtype)))
    return out


# ---------------------------------------------------------------------------- reuse


def _subexprs(e: Expr) -> list[Expr]:
    """e and everything it computes from, outermost first (each once)."""
    out, seen, stack = [], set(), [e]
    while stack:
        x = stack.pop()
        if id(x) not in seen:
            seen.add(id(x))
            out.append(x)
            stack.extend(reversed(x.args) if isinstance(x, Op) else ())
    return out


def _costly_in_row(e: Expr, row: set[Sym]) -> bool:
    """Whether e has a transcendental op and changes along the row (loops `row`)."""
    parts = _subexprs(e)
    varies = any(used_syms(x.index) & row for x in parts if isinstance(x, (Load, IndexValue)))
    return varies and any(isinstance(x, Op) and x.op in COSTLY for x in parts)


def _replace(e: Expr, old: Expr, new: Expr, memo: dict[int, Expr]) -> Expr:
    """e with every occurrence of `old` (by identity) replaced by `new`."""
    if e is old:
        return new
    if not isinstance(e, Op):
        return e
    if id(e) not in memo:
        args = tuple(_replace(a, old, new, memo) for a in e.args)
        changed = any(a is not b for a, b in zip(args, e.args, strict=True))
        memo[id(e)] = Op(e.op, args, e.dtype) if changed else e
    return memo[id(e)]


def _key(e: Expr, memo: dict[Any, Any]) -> int:
    """A structural key of e: equal keys compute equal values at the same loop point.
    Keys are interned to small ints, so hashing one never walks a whole (shared,
    exponentially large when unfolded) expression tree."""
    if id(e) not in memo:
        if isinstance(e, Op):
            struct: Any = (e.op, e.dtype, tuple(_key(a, memo) for a in e.args))
        elif isinstance(e, Load):
            struct = ("load", e.buf, e.index, e.dtype)
        elif isinstance(e, Const):
            struct = ("const", repr(e.value), e.dtype)
        elif isinstance(e, AccRead):  # read only once final (phases after its own)
            struct = ("acc", e.acc, e.dtype)
        else:
            struct = ("leaf", id(e))
        interned = memo.setdefault("interned", {})
        memo[id(e)] = interned.setdefault(struct, len(interned))
    return memo[id(e)]


def reuse_stored(loops: list[list[Stmt]], step: KernelStep, row: set[Sym]) -> None:
    """Where a later phase stores a pointwise output computed from a costly value an
    earlier phase's loop already computes (exp(x - max) in softmax), that earlier loop
    also stores the value in the output's buffer and the later one loads it from there
    (from cache) instead of computing it again. Rewrites `loops` in place."""
    memo: dict[Any, Any] = {}
    for p in range(1, len(loops)):
        earlier = [{_key(x, memo): x for s in loops[q] for x in _stmt_exprs(s, step)}
                   for q in range(p)]
        for n, s in enumerate(loops[p]):
            if not isinstance(s, Store) or step.reduced[s.buf]:
                continue
            dtype = step.outputs[s.buf].aval.dtype
            for x in _subexprs(s.value)[1:]:
                q = next((q for q in range(p) if _key(x, memo) in earlier[q]), None)
                if q is not None and x.dtype == dtype and _costly_in_row(x, row):
                    loops[q].append(Store(s.buf, s.index, earlier[q][_key(x, memo)]))
                    value = _replace(s.value, x, Load(s.buf, s.index, dtype), {})
                    loops[p][n] = Store(s.buf, s.index, value)
                    break


def _stmt_exprs(s: Stmt, step: KernelStep) -> list[Expr]:
    """What a loop statement computes; of a reduction in memory only its operand (the
    partial result it loads is no value a later phase may reuse)."""
    if isinstance(s, Store) and step.reduced[s.buf] and isinstance(s.value, Op):
        return _subexprs(s.value.args[1])
    return _subexprs(s.value) if isinstance(s, (Store, AccUpdate)) else []


# ---------------------------------------------------------------------------- forms


def _phase_loops(vals: _RowValues, n_phases: int, row: set[Sym]) -> list[list[Stmt]]:
    loops = [_loop_body(vals, p) for p in range(n_phases)]
    reuse_stored(loops, vals.step, row)
    return loops


def _register_rows(sched: Schedule, step: KernelStep, names: Any, plan: Plan
                   ) -> tuple[Kernel, _Nest, list[Var]]:
    """for kept: per phase: row stores; acc = id; for row: acc op= x, stores; out = acc."""
    vals = _RowValues(sched, step, registers=True)
    nest = _Nest(step.shape, plan, "i")
    n_kept = _count_groups(plan, _kept(step))
    vals.at = tuple(nest.index[a] for a in range(len(step.shape)))
    kept = linearize(tuple(vals.at[a] for a in _kept(step)), _kept_shape(step))
    n_phases = max(step.phases) + 1
    loops = _phase_loops(vals, n_phases, set(nest.syms[n_kept:]))
    body: list[Stmt] = []
    for phase in range(n_phases):
        body += _row_stores(vals, phase)
        reds = _reductions(vals, phase)
        body += [AccInit(j, op, v.aval.dtype) for j, v, op in reds]
        body += nest.wrap(tuple(loops[phase]), n_kept) if loops[phase] else ()
        body += [Store(j, kept, AccRead(j, v.aval.dtype)) for j, v, _ in reds]
    kernel = Kernel(step.name, _params(vals, names, len(step.outputs)),
                    nest.wrap(tuple(body), 0, n_kept))
    return kernel, nest, vals.params


def _outer(step: KernelStep) -> tuple[int, ...]:
    """The kept axes before the first reduced axis longer than 1 (the memory form's rows)."""
    first = next((a for a in step.axes if step.shape[a] != 1), len(step.shape))
    return tuple(a for a in _kept(step) if a < first)


def _memory_rows(sched: Schedule, step: KernelStep, names: Any, plan: Plan
                 ) -> tuple[Kernel, _Nest, list[Var]]:
    """for rows: per phase: for kept in row: row stores, out = id; for row: out op= x."""
    vals = _RowValues(sched, step, registers=False)
    nest = _Nest(step.shape, plan, "i")
    outer = _outer(step)
    n_outer = _count_groups(plan, outer)
    inner_kept = tuple(a for a in _kept(step) if a not in outer)
    row_nest = _Nest(step.shape, trailing_plans(inner_kept)[0], "j")
    vals.at = tuple(nest.index[a] for a in range(len(step.shape)))
    n_phases = max(step.phases) + 1
    loops = _phase_loops(vals, n_phases, set(nest.syms[n_outer:]))
    vals.at = tuple(nest.index[a] if a in outer else row_nest.index.get(a, ix_const(0))
                    for a in range(len(step.shape)))
    kept = linearize(tuple(vals.at[a] for a in _kept(step)), _kept_shape(step))
    body: list[Stmt] = []
    for phase in range(n_phases):
        starts = _row_stores(vals, phase)
        starts += [Store(j, kept, Const(identity(op, v.aval.dtype), v.aval.dtype))
                   for j, v, op in _reductions(vals, phase)]
        body += row_nest.wrap(tuple(starts)) if starts else ()
        body += nest.wrap(tuple(loops[phase]), n_outer) if loops[phase] else ()
    kernel = Kernel(step.name, _params(vals, names, len(step.outputs)),
                    nest.wrap(tuple(body), 0, n_outer))
    return kernel, nest, vals.params


def build_rows(sched: Schedule, step: KernelStep, names: Any,
               registers: bool | None = None) -> tuple[Kernel, list[Var]]:
    """The kernel IR of row-fused `step` and the Vars bound to its parameters. `registers`
    forces the registers form (True) or the memory form (False); by default the registers
    form is taken when rows are contiguous."""
    if registers is None:
        registers = registers_hold_rows(step.shape, step.axes)
    if registers:
        outer, build = _kept(step), _register_rows
    else:
        outer, build = _outer(step), _memory_rows
    inner = tuple(a for a in range(len(step.shape)) if a not in outer)
    plans = [po + pi for po in trailing_plans(outer)[:1] for pi in trailing_plans(inner)]
    plans += [tuple((a,) for a in outer) + pi for pi in trailing_plans(inner)]
    return _choose(lambda p: build(sched, step, names, p), plans)
