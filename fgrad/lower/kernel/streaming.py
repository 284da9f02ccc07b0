"""Which outputs of a kernel to write with non-temporal ("streaming") stores.

An ordinary store first reads the output's cache line from memory (to own it), so a kernel
that writes N bytes moves 2N over the memory bus for them. A non-temporal store writes
whole lines around the caches and skips that read. It pays only when:
- the outputs are larger than the last-level cache, or this machine's share of it
  (`STREAM_MIN_BYTES`: a later kernel would not have found them in cache anyway; smaller
  ones are better left there);
- its values come out of the vectorized loop: a line's elements unrolled (the renderer's
  way for cheap values) stayed scalar code for exp/tanh/sigmoid, which LLVM's SLP
  vectorizer does not pack (W1 went 20 -> 35 ms that way). Values with transcendentals
  therefore stream by blocks (`streams_by_blocks`: the vectorized loop writes 512 bytes
  to the stack, aligned streaming stores copy them out), in a kernel that is one flat
  loop: 2^24 float32, two threads, alternating processes: exp 5.5-5.6 -> 3.7-4.7 ms,
  sigmoid 5.3-6.3 -> 3.7-5.1, tanh 5.6-6.0 -> 4.1-4.8. W1's three per element stream
  since its exps scale with `vscalefps` (5.5 -> 5.2 ms); four or more keep ordinary stores
  (`MAX_STREAMED_COSTLY`);
- the kernel streams one output, at the loop's own index, in order, so each line fills
  whole before the next: two outputs written half a line at a time (as the vectorized
  loop interleaves them) were 4-8x slower than ordinary stores on this VM (`relu(x)` and
  `x * 2` of 2^24 float32 in one kernel: 10-15 -> 43-52 ms);
- its reads run along the same loop (a transpose's strided scalar reads were 5% slower
  streaming), or through a stack tile that a register transpose fills
  (`staged_transposes`).

So an output qualifies when one innermost loop (the kernel's only loop, or the last phase
of a row kernel such as layernorm's) holds its only store, `out[row + i] = f(...)` with
rows of whole lines, `f` has a few dozen ops at most (or transcendentals per element, by
blocks; one of accumulators alone, as log_softmax's log of the row's sum, is computed once
and counts for nothing) and only loads
contiguous along `i` (or constant in it; none by quotient or remainder of `i`), the kernel
never reads `out` (except a row that an earlier phase wrote and the last phase rereads,
as softmax's exps: the renderer then stages that row on the stack, `scratch_row`), its
elements have at least 2 bytes, and it has at least `STREAM_MIN_BYTES`. The llvm renderer
(`render.py`) writes the aligned middle of that loop with non-temporal vector stores, and
its unaligned ends (and any call whose output is not 64-byte aligned) with ordinary ones.
Measured on this VM (2 cores, 32 MiB L3): `x + 1` on 2^24 float32 5.9-6.1 -> 3.9-4.1 ms,
layernorm of 4096x4096 7.7-8.0 -> 6.9-7.7 ms (docs/performance.md).
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from fgrad.lower.kernel.index import Clamp, Dyn, Ix, Sym, used_syms
from fgrad.lower.kernel.ir import (AccInit, AccUpdate, Expr, IndexPred, IndexValue, Kernel,
                                   Load, Loop, Op, Stmt, Store, expr_nodes)
from fgrad.lower.kernel.pieces import piece_ranges, range_in
from fgrad.lower.schedule.partition import COSTLY

LINE_BYTES = 64          # a cache line: the unit a streaming store fills, and the alignment
MAX_STREAMED_OPS = 32    # ops per element at most (the renderer unrolls a line's elements)
# transcendentals per element at most: with two it gained (x * sigmoid(x) 5.1-5.5 -> 3.9-4.4
# ms, exp(x) * sigmoid(x) 5.9-6.7 -> 5.3-5.8, a tanh GELU 6.0-6.2 -> 4.9-5.5); with three (W1)
# it lost while the loop was bound by its arithmetic (8.36 -> 8.61 ms), and gained once
# vscalefps made the exps shorter (5.45-5.9 -> 5.22-5.24 ms, alternating processes)
MAX_STREAMED_COSTLY = 3


def cache_bytes(level: int | None = None) -> int | None:
    """The size of the first CPU's data or unified cache of `level` (None: the largest)
    from Linux's sysfs; None where it does not say."""
    sizes = {}
    for index in range(8):
        folder = f"/sys/devices/system/cpu/cpu0/cache/index{index}"
        try:
            with open(f"{folder}/size") as f:
                text = f.read().strip()
            with open(f"{folder}/level") as f:
                found = int(f.read().strip())
            with open(f"{folder}/type") as f:
                kind = f.read().strip()
        except (OSError, ValueError):
            break
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text[:-1] if text[-1:] in "KMG" else text
        if digits.isdigit() and kind != "Instruction":
            sizes[found] = int(digits) * scale
    if not sizes:
        return None
    return sizes.get(level) if level is not None else max(sizes.values())


# A VM sees its host's whole last-level cache in sysfs (480 MiB on a 2-core Xeon guest),
# shared with every other tenant. An output counts as cache-sized up to this much per CPU
# of this machine: there, `x + 1` feeding `(y + 1) * 2 + x` measured faster with ordinary
# stores up to 16 MiB outputs (1.33 vs 1.53 ms) and even at 32 MiB (2.76 vs 2.80), while
# 64 MiB outputs streamed faster (`x + 1` 2.47 vs 3.51 ms, layernorm 3.12 vs 5.68).
LLC_SHARE_PER_CPU = 16 << 20


def _stream_min_bytes() -> int:
    """Outputs at least this large stream: the last-level cache (32 MiB where sysfs does
    not say), at most `LLC_SHARE_PER_CPU` per CPU."""
    llc = cache_bytes() or 32 << 20
    return min(llc, LLC_SHARE_PER_CPU * (os.cpu_count() or 1))


STREAM_MIN_BYTES = _stream_min_bytes()


def _line_start_at_zero(index: Ix, sym: Sym, width: int) -> bool:
    """Whether `index` is `sym` plus terms that are whole lines (of `width` elements): then
    an aligned buffer's lines start where `sym` is a multiple of `width`."""
    if dict(index.terms).get(sym) != 1 or index.const % width:
        return False
    return all(coeff % width == 0 and isinstance(atom, Sym)
               for atom, coeff in index.terms if atom != sym)


def _op_count(e: Expr, sym: Sym, seen: set[int], costly: list[Op],
              staged: frozenset[int] = frozenset()) -> int | None:
    """Ops in `e` not counted yet (the transcendentals among them appended to `costly`);
    None when a load strides along `sym` (bound by its reads), unless it is one of the
    `staged` loads (by id: `staged_transposes`, `pieced_loads`). A load that runs backwards
    along it reads whole lines too (`x.flip(1)` of 4096^2 float32, two cores, alternating
    processes: 5.4 -> 2.5-2.9 ms streaming)."""
    if isinstance(e, Load):
        along = dict(e.index.terms).get(sym, 0) in (0, 1, -1) and \
            sym not in e.index.nonlinear_syms()
        return 0 if along or id(e) in staged else None
    if not isinstance(e, Op) or id(e) in seen:
        return 0
    seen.add(id(e))
    if not _per_element(e):
        return 0   # of accumulators and constants alone (log_softmax's log of the sum): once
    if e.op in COSTLY:
        costly.append(e)
    total = 1
    for a in e.args:
        n = _op_count(a, sym, seen, costly, staged)
        if n is None:
            return None
        total += n
    return total


def streams_by_blocks(kernel: Kernel) -> bool:
    """Whether the streamed output's values have transcendentals per element: then the
    renderer computes them by blocks into the stack with the vectorized loop and streams
    each block out (kernels/rows.py `streamed_blocks`), not a line's elements unrolled."""
    found = streamed_store(kernel)
    if found is None or scratch_row(kernel) is not None:
        return False
    costly: list[Op] = []
    _op_count(found[1].value, found[0].sym, set(), costly, _read_along(kernel, found[0]))
    return bool(costly)


def _per_element(e: Expr, memo: dict[int, bool] | None = None) -> bool:
    """Whether `e` reads memory or a loop index (else it is the same for a whole loop);
    each shared subexpression is decided once."""
    if isinstance(e, (Load, IndexValue, IndexPred)):
        return True
    if not isinstance(e, Op):
        return False
    memo = {} if memo is None else memo
    if id(e) not in memo:
        memo[id(e)] = any(_per_element(a, memo) for a in e.args)
    return memo[id(e)]


def streamed_store(kernel: Kernel) -> tuple[Loop, Store] | None:
    """The innermost loop and its store that write an output with streaming stores (module
    docstring), or None: the kernel's only loop, or the last phase of a row kernel."""
    if kernel.row_range:
        return None
    candidates = [s for s in _innermost(kernel.body)
                  if len(s.body) == 1 and isinstance(s.body[0], Store)]
    if len(candidates) != 1:
        return None
    loop, store = candidates[0], candidates[0].body[0]
    assert isinstance(store, Store)
    itemsize = kernel.params[store.buf].dtype.itemsize
    costly: list[Op] = []
    ops = _op_count(store.value, loop.sym, set(), costly, _read_along(kernel, loop))
    staged = scratch_row(kernel)
    staged_here = staged is not None and staged.last_loop is loop
    if costly and (staged is not None or not _flat_or_rows(kernel, loop)
                   or len(costly) > MAX_STREAMED_COSTLY):
        return None   # blocks only in a kernel that is this loop (in a loop over rows)
    if ops is None or (ops > MAX_STREAMED_OPS and not costly) or itemsize < 2 or \
            (store.buf in _loaded(kernel) and not staged_here):
        return None
    if not _line_start_at_zero(store.index, loop.sym, LINE_BYTES // itemsize):
        return None
    if _stores_to(kernel.body, store.buf) != 1 + staged_here or \
            math.prod(kernel.params[store.buf].shape) * itemsize < STREAM_MIN_BYTES:
        return None
    return loop, store


def _read_along(kernel: Kernel, loop: Loop) -> frozenset[int]:
    """Ids of the loads of innermost `loop` that the renderer makes read along it although
    their index does not say so: staged transposes, and a concatenate's operands in its
    pieces (not in the kernel's outermost loop, which threads split without pieces)."""
    pieced = pieced_loads(loop) if loop is not kernel.body[0] else frozenset()
    return staged_transposes(kernel, loop) | pieced


def pieced_loads(loop: Loop) -> frozenset[int]:
    """Ids of the loads of innermost `loop` that read along it in each of its pieces
    (kernel/pieces.py), which the renderer loops one by one: a concatenate's operands,
    read through clamps of the loop variable that in a piece either cannot bite or hold
    one end (the operand of another piece, whose select is decided there). `x.cat(y,
    dim=1)` of two 4096^2 float32 streamed: 10.2 -> 6.5 ms (docs/performance.md)."""
    pieces = piece_ranges(loop)
    if len(pieces) < 2:
        return frozenset()
    return frozenset(id(e) for e in expr_nodes(loop.body) if isinstance(e, Load)
                     and loop.sym in e.index.nonlinear_syms()
                     and _clamps_settle(e.index, loop.sym, pieces))


def _clamps_settle(index: Ix, sym: Sym, pieces: list[tuple[int, int]]) -> bool:
    """Whether `sym` enters `index` only plainly or through clamps of an affine argument
    that, in each piece, stay inside their range or beyond one end of it."""
    for atom, _ in index.terms:
        if isinstance(atom, Sym):
            continue
        inside = atom.syms if isinstance(atom, Dyn) else \
            used_syms(atom.arg) | atom.arg.nonlinear_syms()
        if sym not in inside:
            continue
        if not isinstance(atom, Clamp) or sym in atom.arg.nonlinear_syms():
            return False
        for piece in pieces:
            lo, hi = range_in(atom.arg, {sym: piece})
            if not (0 <= lo and hi <= atom.hi or hi <= 0 or lo >= atom.hi):
                return False
    return True


STAGED_LANES = 16   # tile extents the renderer stages at every vector width (lanes divide 16)


def _flat_or_rows(kernel: Kernel, loop: Loop) -> bool:
    """Whether the kernel is `loop` alone, or one loop over rows around it alone (an
    elementwise op with a row or column operand broadcast: `exp(x + b)` of 4096^2 float32
    streamed by blocks 3.1-3.4 -> 2.7-2.8 ms, a column softmax's last kernel 8.7-9.0 ->
    6.9-7.1 ms for the softmax)."""
    body = tuple(kernel.body)
    return body == (loop,) or len(body) == 1 and isinstance(body[0], Loop) \
        and tuple(body[0].body) == (loop,)


def staged_transposes(kernel: Kernel, loop: Loop) -> frozenset[int]:
    """Ids of the loads of innermost `loop` that read a transpose by tiles: its parent loop
    holds only it, both extents are multiples of STAGED_LANES, and such a load (2 to 8
    bytes) steps 1 along the parent and at least `loop`'s extent along `loop`, by plain
    loop variables. The llvm renderer stages them through a register transpose
    (kernels/tiles.py), so `loop` reads them from a stack tile along memory and its output
    rows may stream: 4096^2 float32 on two cores, alternating processes, `x.T + 1` 8.2-14.4
    -> 3.5-3.7 ms (the host's load moved the old code's time), `x + x.T` 15-18 -> 6.3-6.5
    (streaming stores had measured 5% slower when the loads were strided scalar reads)."""
    parent = _parent_of(kernel.body, loop)
    if parent is None or tuple(parent.body) != (loop,) or \
            loop.sym.extent % STAGED_LANES or parent.sym.extent % STAGED_LANES:
        return frozenset()
    found = set()
    for e in expr_nodes(loop.body):
        if isinstance(e, Load) and e.dtype.itemsize in (2, 4, 8) and \
                all(isinstance(a, Sym) for a, _ in e.index.terms):
            terms = dict(e.index.terms)
            if terms.get(parent.sym) == 1 and abs(terms.get(loop.sym, 0)) >= loop.sym.extent:
                found.add(id(e))
    return frozenset(found)


def _parent_of(stmts: Sequence[Stmt], loop: Loop) -> Loop | None:
    """The loop among `stmts` (at any depth) whose body holds `loop`."""
    for s in stmts:
        if isinstance(s, Loop):
            if any(t is loop for t in s.body):
                return s
            found = _parent_of(s.body, loop)
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class ScratchRow:
    """A row kernel's output row staged on the stack (`scratch_row`): the earlier phase's
    store `first` (in `first_loop`) and the last phase's loads of it (`loads`, by id, in
    `last_loop`) use the stack row at their phase's variable instead of the output."""

    buf: int
    first: Store
    first_loop: Loop
    last_loop: Loop
    loads: frozenset[int]


SCRATCH_ROW_MAX = 16384   # elements of a staged row (64 KiB of float32 on a thread's stack)


def scratch_row(kernel: Kernel) -> ScratchRow | None:
    """A row kernel whose earlier phase writes an output row that its last phase reads back
    and rewrites in place (softmax: the row's exps, then the exps over their sum), when
    staging that row on the stack leaves the last phase the output's only store and read:
    then it may stream, and the first write never reaches memory. The row must fit
    `SCRATCH_ROW_MAX` and be indexed `row_start + i` in both phases."""
    if kernel.row_range or len(kernel.body) != 1 or not isinstance(kernel.body[0], Loop):
        return None
    phases = [s for s in kernel.body[0].body if isinstance(s, Loop)]
    if len(phases) < 2 or not all(isinstance(s, (Store, AccInit, AccUpdate))
                                  for p in phases for s in p.body):
        return None
    last = phases[-1]
    if len(last.body) != 1 or not isinstance(last.body[0], Store) \
            or last.sym.extent > SCRATCH_ROW_MAX:
        return None
    store = last.body[0]
    earlier = [(p, s) for p in phases[:-1] for s in p.body
               if isinstance(s, Store) and s.buf == store.buf]
    if len(earlier) != 1 or _stores_to(kernel.body, store.buf) != 2:
        return None
    loop, first = earlier[0]
    loads = [e for e in expr_nodes(kernel.body, in_indices=True)
             if isinstance(e, Load) and e.buf == store.buf]
    in_last = {id(e) for e in expr_nodes([store]) if isinstance(e, Load)} - {
        id(e) for e in expr_nodes(phases[:-1], in_indices=True)}
    row = _row_of(store.index, last.sym)
    if loop.sym.extent != last.sym.extent or row is None or row != _row_of(first.index,
                                                                             loop.sym):
        return None
    if not loads or any(id(e) not in in_last or _row_of(e.index, last.sym) != row
                        for e in loads):
        return None
    return ScratchRow(store.buf, first, loop, last, frozenset(id(e) for e in loads))


def _row_of(index: Ix, sym: Sym) -> tuple | None:
    """`index` less `sym` (its coefficient must be 1, and `sym` nowhere else), as a key."""
    if dict(index.terms).get(sym) != 1 or sym in index.nonlinear_syms():
        return None
    return index.const, tuple(sorted(((str(a), c) for a, c in index.terms if a != sym)))


def streamed_outputs(kernel: Kernel) -> tuple[int, ...]:
    """The parameter numbers of the outputs `kernel` streams (at most one)."""
    found = streamed_store(kernel)
    return (found[1].buf,) if found else ()


def _innermost(stmts: Sequence[Stmt]) -> list[Loop]:
    out: list[Loop] = []
    for s in stmts:
        if isinstance(s, Loop):
            inner = _innermost(s.body)
            out.extend(inner if inner else [s])
    return out


def _stores_to(stmts: Sequence[Stmt], buf: int) -> int:
    return sum(_stores_to(s.body, buf) if isinstance(s, Loop) else
               int(isinstance(s, Store) and s.buf == buf) for s in stmts)


def _loaded(kernel: Kernel) -> set[int]:
    """Every buffer the kernel loads from."""
    return {e.buf for e in expr_nodes(kernel.body) if isinstance(e, Load)}


def line_elements(kernel: Kernel, streamed: tuple[int, ...]) -> int:
    """Elements of the streamed outputs per cache line."""
    return LINE_BYTES // kernel.params[streamed[0]].dtype.itemsize


# ---------------------------------------------------------------------------- prefetching

PREFETCH_BYTES = 4096   # how far ahead of a block its loads are prefetched
MAX_PREFETCHED = 4      # loads prefetched per loop at most


def prefetched_loads(loop: Loop, pipelined: bool = False) -> list[Load]:
    """The loads of innermost loop `loop` worth prefetching PREFETCH_BYTES ahead of each
    block the renderer computes: the distinct ones that run along it contiguously, when its
    values have transcendentals per element, or it carries a pipelined row's next row
    (`pipelined`). Such a loop keeps the vector units busy, and the hardware prefetchers
    alone left its reads waiting on memory: 2^24 float32 on one core, `exp` 8.9 -> 5.5 ms
    (`x + 1` 5.0), W1 17.0 -> 14.7 (the render blocks it so); 4096^2 rows on two cores,
    alternating processes: softmax 3.6-3.8 -> 3.0-3.3 ms, layernorm 2.8-3.6 -> 2.7-3.0
    (within noise in one of two A/Bs)."""
    if any(isinstance(t, Loop) for t in loop.body) or not pipelined and not any(
            isinstance(e, Op) and e.op in COSTLY and _per_element(e)
            for e in expr_nodes(loop.body)):
        return []
    found: dict[tuple[int, Ix], Load] = {}
    for e in expr_nodes(loop.body):
        if isinstance(e, Load) and dict(e.index.terms).get(loop.sym) == 1 \
                and loop.sym not in e.index.nonlinear_syms():
            found.setdefault((e.buf, e.index), e)
    return list(found.values())[:MAX_PREFETCHED]


def prefetched_loop(kernel: Kernel) -> Loop | None:
    """The loop of the kernel to render by blocks with prefetches (`prefetched_loads`, each
    block's loads PREFETCH_BYTES ahead), its inputs too large to sit in cache: the kernel's
    loop when it is one flat loop (split by threads), else its one innermost loop with such
    loads (a row reduction such as `exp(x).sum(-1)` or `tanh(x).mean(-1)`, a column one's
    `exp(x).sum(0)` by blocks of rows). Without, a reduction of 4096 x 4096 float32 waited on
    its reads: one core, alternating processes, `(x - 3).exp().sum(-1)` 9.0-9.8 -> 3.7-4.1
    ms, `x.tanh().mean(-1)` 9.8-10.8 -> 4.8-7.3; on two, 2^20 rows of 16: 6.3-8.3 -> 2.7 ms,
    `x.exp().sum(0)` 2.5-2.9 -> 2.5 (4 rounds; in one of them no gain)."""
    if len(kernel.body) != 1 or not isinstance(kernel.body[0], Loop):
        return None
    loop = kernel.body[0]
    if any(isinstance(t, Loop) for t in loop.body):
        found = [inner for inner in _innermost(loop.body) if prefetched_loads(inner)]
        if len(found) != 1:
            return None
        loop = found[0]
    read = sum(math.prod(p.shape) * p.dtype.itemsize for p in kernel.params if not p.written)
    return loop if read >= STREAM_MIN_BYTES and prefetched_loads(loop) else None
