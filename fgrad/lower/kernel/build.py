"""Build the kernel IR of one scheduled kernel: producers inlined, movement as indexing.

In: a `Schedule` and one of its `KernelStep`s. Out: a `Kernel` and the jaxpr Vars bound to
its buffer parameters (outputs first, then inputs in first-use order).

Every value is computed at a multi-index of its own shape (a tuple of `Ix`). A movement
primitive maps its output index to its operand's index (reshape through a flat offset,
pad under a bounds predicate); an elementwise primitive becomes an `Op`. Loads clamp any
axis index that is not provably in range, so even the unselected side of a pad region
reads inside the buffer. A gather maps its output index (i..., j...) to its operand's index
(dyn(idx[i...]), j...): the row is read from the index operand at run time (a `Dyn` atom),
so a gather fuses into its consumer like a slice. Loops run row-major over the domain;
adjacent loops are collapsed into one whenever the innermost loop variable then stays affine
(so it vectorizes). Row-fused steps (phases per row) are built by kernel/build_rows.py on
these pieces, scatter steps by kernel/build_scatter.py.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from fgrad.core.dtypes import NARROW_FLOATS, DType, dtypes
from fgrad.core.ir import Atom, Eqn, Literal, Var
from fgrad.lower.kernel.index import (Div, FlatIndex, Ix, Mod, Sym, add, clamp, delinearize,
                                  floordiv, ix_const, ix_dyn, ix_range, ix_sym, linearize, mod,
                                  scale, used_syms)
from fgrad.lower.kernel.ir import (AccInit, AccRead, AccUpdate, Cond, Const, Expr, IndexPred,
                                   IndexValue, Kernel, Load, Loop, Op, Param, Stmt, Store,
                                   check_kernel, expr_nodes, expr_syms, kernel_indices)
from fgrad.lower.kernel.pieces import MIN_INNERMOST_PIECE
from fgrad.lower.schedule.partition import (REDUCE, KernelStep, Schedule, is_scatter_step,
                                            jaxpr_names)

Index = tuple[Ix, ...]
BOOL_COMBINE = {"add": "or", "mul": "and", "max": "or", "min": "and"}


def combine_op(reduction: str, dtype: DType) -> str:
    """The binary op a reduction accumulates with ('add', 'max', ...; 'or'/'and' on bool)."""
    op = REDUCE[reduction]
    return BOOL_COMBINE[op] if dtype == dtypes.bool else op


def identity(op: str, dtype: DType) -> Any:
    """The identity element of a combine op in `dtype`."""
    if op in ("or", "and"):
        return op == "and"
    if op in ("add", "mul"):
        return _cast(op == "mul", dtype)
    if dtype.is_float:
        return -math.inf if op == "max" else math.inf
    info = np.iinfo(dtype.np)
    return int(info.min if op == "max" else info.max)


class _Values:
    """Expressions for jaxpr values at index tuples, memoized, with buffer parameters."""

    def __init__(self, sched: Schedule, step: KernelStep):
        self.sched, self.step = sched, step
        self.params: list[Var] = list(step.outputs)
        self.inline = {id(v) for v, r in zip(step.outputs, step.reduced, strict=True)
                       if not r}
        self.memo: dict[tuple[int, Index], Expr] = {}

    def buffer(self, var: Var) -> int:
        for i, p in enumerate(self.params):
            if p is var:
                return i
        self.params.append(var)
        return len(self.params) - 1

    def __call__(self, atom: Atom, idx: Index) -> Expr:
        if isinstance(atom, Literal):
            return Const(_cast(atom.val, atom.aval.dtype), atom.aval.dtype)
        key = (id(atom), idx)
        if key not in self.memo:
            if id(atom) in self.sched.realized and id(atom) not in self.inline:
                self.memo[key] = self.load(atom, idx)
            else:
                eqn = self.sched.producers[id(atom)]
                self.memo[key] = RULES.get(eqn.primitive.name, _elementwise)(self, eqn, idx)
        return self.memo[key]

    def load(self, var: Var, idx: Index) -> Expr:
        aval = var.aval
        if aval.size == 0:
            return Const(_cast(0, aval.dtype), aval.dtype)
        if isinstance(idx, FlatIndex) and idx.shape == aval.shape:
            lo, hi = ix_range(idx.flat)
            if 0 <= lo and hi < aval.size:   # every axis in range: no clamp to apply
                return Load(self.buffer(var), idx.flat, aval.dtype)
        safe = tuple(clamp(i, n - 1) for i, n in zip(idx, aval.shape, strict=True))
        return Load(self.buffer(var), linearize(safe, aval.shape), aval.dtype)


def _cast(value: Any, dtype: DType) -> Any:
    return np.asarray(value).astype(dtype.np).item()


# ---------------------------------------------------------------------------- rules


def _elementwise(vals: _Values, eqn: Eqn, idx: Index) -> Expr:
    args = tuple(vals(a, idx) for a in eqn.inputs)
    return Op(eqn.primitive.name, args, eqn.outvars[0].aval.dtype)


def _broadcast(vals: _Values, eqn: Eqn, idx: Index) -> Expr:
    x = eqn.inputs[0]
    dims = eqn.params["broadcast_dimensions"]
    src = tuple(ix_const(0) if n == 1 else idx[d]
                for n, d in zip(x.aval.shape, dims, strict=True))
    return vals(x, src)


def _reshape(vals: _Values, eqn: Eqn, idx: Index) -> Expr:
    x = eqn.inputs[0]
    flat = linearize(idx, eqn.outvars[0].aval.shape)
    return vals(x, delinearize(flat, x.aval.shape))


def _transpose(vals: _Values, eqn: Eqn, idx: Index) -> Expr:
    perm = eqn.params["permutation"]
    src: list[Ix] = [ix_const(0)] * len(perm)
    for i, p in enumerate(perm):
        src[p] = idx[i]
    return vals(eqn.inputs[0], tuple(src))


def _slice(vals: _Values, eqn: Eqn, idx: Index) -> Expr:
    p = eqn.params
    src = tuple(add(ix_const(s), scale(i, st))
                for i, s, st in zip(idx, p["start"], p["strides"], strict=True))
    return vals(eqn.inputs[0], src)


def _rev(vals: _Values, eqn: Eqn, idx: Index) -> Expr:
    shape = eqn.inputs[0].aval.shape
    src = tuple(add(ix_const(shape[d] - 1), scale(i, -1)) if d in eqn.params["dimensions"]
                else i for d, i in enumerate(idx))
    return vals(eqn.inputs[0], src)


def _pad(vals: _Values, eqn: Eqn, idx: Index) -> Expr:
    x, dtype = eqn.inputs[0], eqn.outvars[0].aval.dtype
    fill = Const(_cast(eqn.params["value"], dtype), dtype)
    if x.aval.size == 0:
        return fill
    src, conds = [], []
    for i, n, (lo, _, interior) in zip(idx, x.aval.shape, eqn.params["config"], strict=True):
        t, step = add(i, ix_const(-lo)), interior + 1
        t_lo, t_hi = ix_range(t)
        exact = step == 1 or ix_range(mod(t, step)) == (0, 0)
        if 0 <= t_lo and t_hi <= (n - 1) * step and exact:
            src.append(floordiv(t, step))
            continue
        conds.append(Cond(t, 0, (n - 1) * step, step))
        src.append(floordiv(t, step) if _long_pieces(t_lo, t_hi, (n - 1) * step, step)
                   else clamp(floordiv(t, step), n - 1))
    inner = vals(x, tuple(src))
    if not conds:
        return inner
    return Op("select", (IndexPred(tuple(conds), dtypes.bool), inner, fill), dtype)


def _long_pieces(lo: int, hi: int, last: int, step: int) -> bool:
    """Whether a pad's condition `0 <= t <= last` cuts t's range [lo, hi] into pieces that
    a backend renders as loops of their own (pieces.py: then the index is plain in each).
    Otherwise the pad's index is clamped into its input, which is the same where the
    condition holds: a reshape below it then sees the input's range and folds its
    quotients and remainders (a col2im's padded taps read through a reshape)."""
    parts = [(lo, min(hi, -1)), (max(lo, 0), min(hi, last)), (max(lo, last + 1), hi)]
    return step == 1 and all(b - a + 1 >= MIN_INNERMOST_PIECE for a, b in parts if b >= a)


def _concatenate(vals: _Values, eqn: Eqn, idx: Index) -> Expr:
    dim, dtype = eqn.params["dimension"], eqn.outvars[0].aval.dtype
    pieces, offset = [], 0
    for x in eqn.inputs:
        n = x.aval.shape[dim]
        if n:
            src = tuple(add(i, ix_const(-offset)) if d == dim else i for d, i in enumerate(idx))
            pieces.append((offset, n, vals(x, src)))
        offset += n
    if not pieces:  # every operand is empty along `dim`, so is the result: nothing is read
        return Const(_cast(0, dtype), dtype)
    out = pieces[-1][2]
    for start, n, value in reversed(pieces[:-1]):
        cond = Cond(idx[dim], start, start + n - 1)
        out = Op("select", (IndexPred((cond,), dtypes.bool), value, out), dtype)
    return out


def _iota(vals: _Values, eqn: Eqn, idx: Index) -> Expr:
    return IndexValue(idx[eqn.params["dimension"]], eqn.outvars[0].aval.dtype)


def run_time_index(vals: _Values, atom: Atom, at: Index, hi: int) -> Ix:
    """The integer value `atom` at `at`, clamped into [0, hi], as an index (a `Dyn` atom
    unless it is a constant)."""
    value = vals(atom, at)
    if isinstance(value, Const):
        return ix_const(min(max(int(value.value), 0), max(hi, 0)))
    label = f"{vals.sched.names(atom)}[{', '.join(str(i) for i in at)}]"
    return ix_dyn(value, hi, expr_syms(value), label)


def _gather(vals: _Values, eqn: Eqn, idx: Index) -> Expr:
    """out[i..., j...] = x[clamp(ind[i...]), j...]; zeros when x has no rows."""
    x, ind = eqn.inputs
    dtype = eqn.outvars[0].aval.dtype
    rows = x.aval.shape[0]
    if rows == 0:
        return Const(_cast(0, dtype), dtype)
    k = ind.aval.ndim
    return vals(x, (run_time_index(vals, ind, idx[:k], rows - 1),) + idx[k:])


RULES: dict[str, Callable[[_Values, Eqn, Index], Expr]] = {
    "broadcast_in_dim": _broadcast, "reshape": _reshape, "transpose": _transpose,
    "slice": _slice, "rev": _rev, "pad": _pad, "concatenate": _concatenate, "iota": _iota,
    "gather": _gather,
}


# ---------------------------------------------------------------------------- loop nests

Plan = tuple[tuple[int, ...], ...]  # groups of domain axes; each group is one loop


def trailing_plans(axes: tuple[int, ...]) -> list[Plan]:
    """Ways to loop over `axes`, most collapsed first: the first k axes get a loop each and
    the rest share one."""
    if not axes:
        return [()]
    return [tuple((a,) for a in axes[:k]) + (axes[k:],) for k in range(len(axes))]


class _Nest:
    """Loop variables for a plan and the domain index they produce. An axis in `split`
    (axis -> inner extent d, the axis alone in its group) runs as two loops, outer and
    inner, with index outer*d + inner."""

    def __init__(self, shape: tuple[int, ...], plan: Plan, prefix: str,
                 split: dict[int, int] | None = None,
                 block: tuple[int, int, tuple[int, int]] | None = None):
        self.syms: list[Sym] = []
        index: dict[int, Ix] = {}
        for g in plan:
            if block and g in ((block[0],), (block[1],)):
                if g == (block[0],):
                    self._block(shape, prefix, block, index)
                continue
            if split and len(g) == 1 and g[0] in split:
                d = split[g[0]]
                outer, inner = self._sym(prefix, shape[g[0]] // d), self._sym(prefix, d)
                index[g[0]] = add(scale(ix_sym(outer), d), ix_sym(inner))
                continue
            sym = self._sym(prefix, int(np.prod([shape[a] for a in g], dtype=np.int64)))
            for a, i in zip(g, delinearize(ix_sym(sym), tuple(shape[a] for a in g)),
                            strict=True):
                index[a] = i
        self.index = index

    def _block(self, shape: tuple[int, ...], prefix: str,
               block: tuple[int, int, tuple[int, int]], index: dict[int, Ix]) -> None:
        """Axes a and b in tiles of rows x columns: loops b // columns, a // rows, then
        a % rows, b % columns (a transpose then reads and writes whole tiles in cache);
        where both axes divide into SUPER_TILE blocks, the tiles go by such blocks first
        (a // SUPER_TILE, b // SUPER_TILE), so that the pages a block's tiles touch stay in
        the TLB. Tiles along a innermost: the source rows a block reads go whole, one after
        the other (4096 x 4096 float32 `x.T + 1`: 7.8-8.7 -> 6.5-7.9 ms)."""
        a, b, sizes = block
        blocked = all(shape[x] % SUPER_TILE == 0 and shape[x] > SUPER_TILE for x in (a, b))
        steps = [[SUPER_TILE, size, 1] if blocked else [size, 1] for size in sizes]
        syms: list[list[Sym]] = [[], []]
        for level in range(len(steps[0])):
            tiles = level == len(steps[0]) - 2
            for x, axis in reversed(list(enumerate((a, b)))) if tiles else enumerate((a, b)):
                upper = shape[axis] if level == 0 else steps[x][level - 1]
                syms[x].append(self._sym(prefix, upper // steps[x][level]))
        for x, axis in enumerate((a, b)):
            index[axis] = add(*[scale(ix_sym(sym), step)
                                for sym, step in zip(syms[x], steps[x], strict=True)])

    def _sym(self, prefix: str, extent: int) -> Sym:
        sym = Sym(f"{prefix}{len(self.syms)}", extent)
        self.syms.append(sym)
        return sym

    def wrap(self, body: tuple[Stmt, ...], first: int = 0, stop: int | None = None
             ) -> tuple[Stmt, ...]:
        """Nest `body` inside the loops syms[first:stop] (1-extent loops are left out)."""
        for sym in reversed(self.syms[first:stop]):
            if sym.extent != 1:
                body = (Loop(sym, body),)
        return body


def _innermost_affine(kernel: Kernel, nest: _Nest) -> bool:
    loops = [s for s in nest.syms if s.extent != 1]
    if not loops:
        return True
    inner = loops[-1]
    return all(inner not in ix.nonlinear_syms() for ix in kernel_indices(kernel))


def _choose(build: Callable[[Plan], tuple[Kernel, _Nest, list[Var]]],
            plans: list[Plan],
            split_build: Callable[[Plan, dict[int, int]], tuple[Kernel, _Nest, list[Var]]]
            | None = None) -> tuple[Kernel, list[Var]]:
    """The first plan whose innermost loop stays affine, else the last (no collapsing),
    with its last axis split in two loops when that makes the innermost affine (a reshape
    that merged a transposed pair of axes: the index of i is (i // d, i % d)); the result
    is checked (bound variables, in-bounds accesses)."""
    for plan in plans:
        kernel, nest, params = build(plan)
        if _innermost_affine(kernel, nest):
            break
    else:
        d = _inner_divisor(kernel, nest)
        if split_build is not None and d and plans[-1]:
            axis = plans[-1][-1][0]
            s_kernel, s_nest, s_params = split_build(plans[-1], {axis: d})
            if _innermost_affine(s_kernel, s_nest):
                kernel, params = s_kernel, s_params
    check_kernel(kernel)
    return kernel, params


def _inner_divisor(kernel: Kernel, nest: _Nest) -> int | None:
    """The d of the innermost loop's `i // d` and `i % d` when every nonlinear use of i is
    one of those, with d dividing i's extent (and leaving both parts longer than 1)."""
    loops = [s for s in nest.syms if s.extent != 1]
    if not loops:
        return None
    inner = loops[-1]
    found: set[int] = set()
    for ix in kernel_indices(kernel):
        if inner not in ix.nonlinear_syms():
            continue
        for atom, _ in ix.terms:
            if isinstance(atom, Sym) or inner not in used_syms(Ix(((atom, 1),), 0)):
                continue
            if not isinstance(atom, (Div, Mod)) or atom.arg != ix_sym(inner):
                return None   # a clamp, a run-time index, or i inside a sum
            found.add(atom.d)
    if len(found) != 1:
        return None
    d = found.pop()
    return d if 1 < d < inner.extent and inner.extent % d == 0 else None


# ---------------------------------------------------------------------------- kernels


TILE = 16                  # a transposing kernel's tile columns (elements)
TILE_ROWS = 64             # its rows: the source's contiguous axis
SUPER_TILE = 256           # its tiles go by blocks of this side (`_Nest._block`)
TILE_MIN_ELEMENTS = 1 << 18  # last two axes at least this large (smaller ones stay in cache)


def _transpose_tiles(sched: Schedule, step: KernelStep, names: Any
                     ) -> tuple[Kernel, list[Var]] | None:
    """An elementwise kernel that reads its last two axes transposed (a load walks the
    last axis with a large stride and the one before contiguously), over tiles of
    TILE_ROWS (TILE where that does not divide) x TILE, or None. Untiled, every load of
    its innermost loop touched a new cache line (4096x4096 float32 `x.T + 1`: ~80 ms,
    against ~7 for `x + 1`). The llvm backend stages such loads through registers
    (llvm/kernels/tiles.py). A 64-row tile reads 256 bytes of each of 16 source rows where
    a 16-row one read 64: 4096 x 4096 float32 `x.T + 1` (staged, in blocks) 16-25 -> 8-14
    ms, the spread from run to run following where the pages land (2 cores)."""
    shape, n = step.shape, len(step.shape)
    rows = TILE_ROWS if n >= 2 and shape[-2] % TILE_ROWS == 0 else TILE
    if n < 2 or shape[-1] % TILE or shape[-2] % rows or shape[-1] * shape[-2] < \
            TILE_MIN_ELEMENTS:
        return None
    plan = tuple((a,) for a in range(n))
    kernel, nest, _ = _elementwise_kernel(sched, step, names, plan)
    outer, inner = nest.syms[n - 2], nest.syms[n - 1]
    if not _innermost_affine(kernel, nest) or not any(
            isinstance(e, Load) and dict(e.index.terms).get(outer) == 1
            and abs(dict(e.index.terms).get(inner, 0)) >= TILE
            for e in expr_nodes(kernel.body)):
        return None
    kernel, nest, params = _elementwise_kernel(sched, step, names, plan,
                                               block=(n - 2, n - 1, (rows, TILE)))
    check_kernel(kernel)
    return kernel, params


def _params(vals: _Values, names: Any, n_out: int) -> tuple[Param, ...]:
    return tuple(Param(names(v), v.aval.shape, v.aval.dtype, i < n_out)
                 for i, v in enumerate(vals.params))


def _elementwise_kernel(sched: Schedule, step: KernelStep, names: Any, plan: Plan,
                        split: dict[int, int] | None = None,
                        block: tuple[int, int, tuple[int, int]] | None = None
                        ) -> tuple[Kernel, _Nest, list[Var]]:
    vals = _Values(sched, step)
    nest = _Nest(step.shape, plan, "i", split, block)
    idx = tuple(nest.index[a] for a in range(len(step.shape)))
    body = tuple(Store(j, linearize(idx, step.shape), vals(v, idx))
                 for j, v in enumerate(step.outputs))
    kernel = Kernel(step.name, _params(vals, names, len(step.outputs)), nest.wrap(body))
    return kernel, nest, vals.params


def _reduce_parts(sched: Schedule, step: KernelStep, vals: _Values, idx: Index
                  ) -> tuple[list[Stmt], list[tuple[int, Var, str, Expr]]]:
    """Side-output stores at `idx`, and (buffer, var, op, value) per reduction output."""
    side: list[Stmt] = []
    reds = []
    full = linearize(idx, step.shape)
    for j, (v, r) in enumerate(zip(step.outputs, step.reduced, strict=True)):
        if not r:
            side.append(Store(j, full, vals(v, idx)))
            continue
        eqn = sched.producers[id(v)]
        op = combine_op(eqn.primitive.name, v.aval.dtype)
        reds.append((j, v, op, vals(eqn.inputs[0], idx)))
    return side, reds


def _kept(step: KernelStep) -> tuple[int, ...]:
    return tuple(a for a in range(len(step.shape)) if a not in step.axes)


def _register_reduce(sched: Schedule, step: KernelStep, names: Any, plan: Plan
                     ) -> tuple[Kernel, _Nest, list[Var]]:
    """for kept: acc = id; for reduced: acc op= x; out[kept] = acc."""
    vals = _Values(sched, step)
    nest = _Nest(step.shape, plan, "i")
    n_kept_loops = _count_groups(plan, _kept(step))
    idx = tuple(nest.index[a] for a in range(len(step.shape)))
    side, reds = _reduce_parts(sched, step, vals, idx)
    kept_idx = tuple(idx[a] for a in _kept(step))
    updates = tuple(AccUpdate(j, op, x) for j, _, op, x in reds)
    inner = nest.wrap(tuple(side) + updates, n_kept_loops)
    inits = tuple(AccInit(j, op, v.aval.dtype) for j, v, op, _ in reds)
    stores = tuple(Store(j, linearize(kept_idx, v.aval.shape), AccRead(j, v.aval.dtype))
                   for j, v, _, _ in reds)
    body = nest.wrap(inits + inner + stores, 0, n_kept_loops)
    kernel = Kernel(step.name, _params(vals, names, len(step.outputs)), body)
    return kernel, nest, vals.params


def _count_groups(plan: Plan, kept: tuple[int, ...]) -> int:
    return sum(1 for g in plan if set(g) <= set(kept))


def _memory_reduce(sched: Schedule, step: KernelStep, names: Any, plan: Plan
                   ) -> tuple[Kernel, _Nest, list[Var]]:
    """out = id everywhere; then in row-major domain order out[kept] = op(out[kept], x)."""
    vals = _Values(sched, step)
    nest = _Nest(step.shape, plan, "i")
    idx = tuple(nest.index[a] for a in range(len(step.shape)))
    side, reds = _reduce_parts(sched, step, vals, idx)
    kept_idx = tuple(idx[a] for a in _kept(step))
    updates = []
    for j, v, op, x in reds:
        at = linearize(kept_idx, v.aval.shape)
        old = Load(j, at, v.aval.dtype)
        updates.append(Store(j, at, Op(op, (old, x), v.aval.dtype)))
    out_shape = tuple(step.shape[a] for a in _kept(step))
    # a kept leading axis with a loop of its own: each of its iterations initializes its
    # own slice of the output, so the kernel is one loop that threads may split
    lead = int(bool(plan) and plan[0] == (0,) and 0 not in step.axes and step.shape[0] > 1)
    init_nest = _Nest(out_shape[lead:],
                      trailing_plans(tuple(range(len(out_shape) - lead)))[0], "j")
    init_idx = tuple(nest.index[a] for a in range(lead)) + tuple(
        init_nest.index[a] for a in range(len(out_shape) - lead))
    inits = tuple(Store(j, linearize(init_idx, out_shape), Const(identity(op, v.aval.dtype),
                                                                   v.aval.dtype))
                  for j, v, op, _ in reds)
    body = nest.wrap(init_nest.wrap(inits) + nest.wrap(tuple(side) + tuple(updates), lead),
                     0, lead)
    kernel = Kernel(step.name, _params(vals, names, len(step.outputs)), body)
    return kernel, nest, vals.params


def _use_memory_form(step: KernelStep) -> bool:
    """Accumulate in the output buffer when the contiguous last axis is kept (a plain
    reduction; row-fused kernels choose their own form)."""
    if step.is_rows:
        return False
    last = len(step.shape) - 1
    halves = any(v.aval.dtype in NARROW_FLOATS for v in step.outputs)
    reduced_work = any(step.shape[a] > 1 for a in step.axes)
    return (last >= 0 and last not in step.axes and step.shape[last] > 1 and reduced_work
            and not halves)


def build_kernel(sched: Schedule, step: KernelStep, names: Any = None
                 ) -> tuple[Kernel, list[Var]]:
    """The kernel IR of `step` and the Vars bound to its parameters."""
    names = names or jaxpr_names(sched.jaxpr)
    if is_scatter_step(sched, step):
        return _scatter.build_scatter(sched, step, names)
    if step.is_rows:
        return _rows.build_rows(sched, step, names)
    if not step.is_reduce:
        tiled = _transpose_tiles(sched, step, names)
        if tiled is not None:
            return tiled
        plans = trailing_plans(tuple(range(len(step.shape))))
        return _choose(lambda p: _elementwise_kernel(sched, step, names, p), plans,
                       lambda p, split: _elementwise_kernel(sched, step, names, p, split))
    if _use_memory_form(step):
        plans = trailing_plans(tuple(range(len(step.shape))))
        return _choose(lambda p: _memory_reduce(sched, step, names, p), plans)
    kept = _kept(step)
    plans = [pk + pr for pk in trailing_plans(kept)[:1] for pr in trailing_plans(step.axes)]
    plans += [tuple((a,) for a in kept) + pr for pr in trailing_plans(step.axes)]
    return _choose(lambda p: _register_reduce(sched, step, names, p), plans)


# The row and scatter builders import this module's pieces; imported here, once those exist,
# rather than inside build_kernel: an import on the first call compiles the module's source
# then where no bytecode is cached (PYTHONDONTWRITEBYTECODE), inside the call's time.
from fgrad.lower.kernel import build_rows as _rows, build_scatter as _scatter  # noqa: E402
