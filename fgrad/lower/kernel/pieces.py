"""Pieces of a loop: ranges of its variable between which no index condition changes.

In: a kernel `Loop` and, while a backend renders one piece of an enclosing loop, `known`:
each split loop variable's current inclusive range. Out: the loop's pieces
(`piece_ranges`), and what those ranges decide: a condition (`decide`), a quotient or
remainder that is one constant over the piece (`fixed_quotient`), a clamp that cannot bite.

Why: a concatenate reads each of its operands under a condition on the output index, which
is a plain loop variable (`0 <= i <= 127`) or, after a reshape, the quotient of one
(`1 <= i // 128 <= 1`: the second of three pieces along a flattened axis). Rendered as one
loop, every element loads every operand and selects one, and the quotients and remainders
are computed per element. A loop per piece decides each condition at render time, so an
element loads only its own operand and `i // 128` is a constant there: less work at run
time, and much less vector code for LLVM to build (a qkv split of the W9 transformer took
160 ms of LLVM time as one loop).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from fgrad.lower.kernel.index import Clamp, Div, Dyn, Ix, IxAtom, Mod, Sym
from fgrad.lower.kernel.ir import (AccUpdate, Cond, Expr, IndexPred, IndexValue, Load, Loop,
                                   Op, Stmt, Store, expr_nodes)

Known = Mapping[Sym, tuple[int, int]]
MAX_PIECES = 64
MIN_INNERMOST_PIECE = 16   # an innermost loop splits only into pieces at least this long
LONG_INNERMOST = 256       # ... or, this long, into long pieces and a few short ones
MAX_SHORT_ITERATIONS = 64  # (a pad of a row, a roll: the short pieces' iterations at most)
MIN_TILE = 8               # an innermost loop is tiled by a divisor at least this large


def plain_sym(index: Ix) -> Sym | None:
    """The loop variable when `index` is exactly one (coefficient 1, no constant)."""
    if index.const or len(index.terms) != 1:
        return None
    atom, coeff = index.terms[0]
    return atom if coeff == 1 and isinstance(atom, Sym) else None


def _cut_points(cond: Cond, sym: Sym) -> tuple[int, ...]:
    """Values of `sym` where `cond` can change when its index is `sym // d + c` (d >= 1)."""
    if cond.step != 1 or len(cond.index.terms) != 1:
        return ()
    atom, coeff = cond.index.terms[0]
    if coeff != 1:
        return ()
    if atom == sym:
        d = 1
    elif isinstance(atom, Div) and plain_sym(atom.arg) == sym:
        d = atom.d
    else:
        return ()
    c = cond.index.const
    return d * (cond.lo - c), d * (cond.hi - c + 1)


def piece_ranges(loop: Loop) -> list[tuple[int, int]]:
    """Inclusive ranges of `loop`'s variable between the points where a condition on it
    alone (the variable or its quotient) changes; [] when there are none or too many, or
    when an innermost loop would get a piece too short to vectorize."""
    extent = loop.sym.extent
    cuts = {0, extent}
    for cond in conds(loop.body):
        cuts.update(c for c in _cut_points(cond, loop.sym) if 0 < c < extent)
    edges = sorted(cuts)
    if len(edges) < 3 or len(edges) > MAX_PIECES + 1:
        return []
    pieces = [(lo, hi - 1) for lo, hi in zip(edges, edges[1:])]
    innermost = not any(isinstance(t, Loop) for t in loop.body)
    alone = all(_cut_points(c, loop.sym) for c in conds(loop.body))
    if innermost and not vectorizable_pieces(extent, pieces, alone):
        return []
    return pieces


def vectorizable_pieces(extent: int, pieces: Sequence[tuple[int, int]],
                        alone: bool = True) -> bool:
    """Whether an innermost loop of `extent` iterations renders as its inclusive `pieces`:
    each long enough to vectorize, or, in a long loop whose conditions are all on its own
    variable (`alone`), short ones only at a few iterations (`x.roll(3, 1)` of 4096^2
    float32: 4.8 -> 2.6 ms as a three-iteration loop and a vectorized one instead of one
    loop of selects between clamped reads; with a condition on the row left in the loop, a
    pad of rows and columns was slower split: docs/performance.md)."""
    short = sum(hi - lo + 1 for lo, hi in pieces if hi - lo + 1 < MIN_INNERMOST_PIECE)
    return short == 0 or alone and extent >= LONG_INNERMOST and short <= MAX_SHORT_ITERATIONS


def conds(stmts: Sequence[Stmt]) -> list[Cond]:
    """Every index condition in a statement list (each expression node visited once)."""
    return [c for e in expr_nodes(stmts) if isinstance(e, IndexPred) for c in e.conds]


def range_in(e: Ix, known: Known) -> tuple[int, int]:
    """Inclusive bounds of `e` while each variable in `known` stays in its range."""
    lo = hi = e.const
    for atom, coeff in e.terms:
        alo, ahi = _atom_range(atom, known)
        lo += min(coeff * alo, coeff * ahi)
        hi += max(coeff * alo, coeff * ahi)
    return lo, hi


def _atom_range(a: IxAtom, known: Known) -> tuple[int, int]:
    if isinstance(a, Sym):
        return known.get(a, (0, max(a.extent - 1, 0)))
    if isinstance(a, Dyn):
        return 0, a.hi
    lo, hi = range_in(a.arg, known)
    if isinstance(a, Div):
        return lo // a.d, hi // a.d
    if isinstance(a, Mod):
        return (lo % a.d, hi % a.d) if lo // a.d == hi // a.d else (0, a.d - 1)
    assert isinstance(a, Clamp)
    return min(max(lo, 0), a.hi), min(max(hi, 0), a.hi)


def decide(cond: Cond, known: Known) -> bool | None:
    """True or False when the ranges in `known` decide `cond`, else None."""
    if not known:
        return None
    lo, hi = range_in(cond.index, known)
    if hi < cond.lo or lo > cond.hi:
        return False
    if cond.step == 1 and cond.lo <= lo and hi <= cond.hi:
        return True
    return None


def fixed_quotient(a: Div | Mod, known: Known) -> int | None:
    """`a.arg // a.d` when it is one value over the ranges in `known` (a Div is then that
    constant, a Mod `a.arg - q * a.d`), else None."""
    if not known:
        return None
    lo, hi = range_in(a.arg, known)
    return lo // a.d if lo // a.d == hi // a.d else None


def clamp_idle(a: Clamp, known: Known) -> bool:
    """Whether `a.arg` stays inside [0, a.hi] over the ranges in `known`."""
    if not known:
        return False
    lo, hi = range_in(a.arg, known)
    return 0 <= lo and hi <= a.hi


def tile_width(loop: Loop, piece: tuple[int, int]) -> int | None:
    """For an innermost loop read as `i // d` and `i % d` (a head split, a transpose of a
    flattened axis), the d to render it by: an outer loop over i // d and an inner one over
    i % d, so the reads are contiguous runs the vectorizer sees (as one loop, every lane
    divides, and the loads become gathers). The smallest such d of at least MIN_TILE that
    tiles `piece` (inclusive) exactly; None when there is none."""
    if any(isinstance(t, Loop) for t in loop.body):
        return None
    lo, hi = piece
    widths = sorted(d for d in _divisors_of(loop.body, loop.sym)
                    if d >= MIN_TILE and lo % d == 0 and (hi + 1 - lo) % d == 0
                    and hi + 1 - lo > d)
    return widths[0] if widths else None


def _divisors_of(stmts: Sequence[Stmt], sym: Sym) -> set[int]:
    """Every d with `sym // d` or `sym % d` in the indices of `stmts`."""
    found: set[int] = set()
    seen: set[int] = set()

    def visit_ix(ix: Ix) -> None:
        for atom, _ in ix.terms:
            if isinstance(atom, (Div, Mod)):
                if plain_sym(atom.arg) == sym:
                    found.add(atom.d)
                visit_ix(atom.arg)
            elif isinstance(atom, Clamp):
                visit_ix(atom.arg)

    def visit(e: Expr) -> None:
        if id(e) in seen:
            return
        seen.add(id(e))
        if isinstance(e, (Load, IndexValue)):
            visit_ix(e.index)
        elif isinstance(e, IndexPred):
            for c in e.conds:
                visit_ix(c.index)
        elif isinstance(e, Op):
            for a in e.args:
                visit(a)

    for st in stmts:
        if isinstance(st, Store):
            visit_ix(st.index)
        if isinstance(st, (Store, AccUpdate)):
            visit(st.value)
    return found
