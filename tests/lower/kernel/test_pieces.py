"""Loop pieces (fgrad/lower/kernel/pieces.py): where a loop is cut, and what a piece decides,
checked by brute force over every value of the loop variables."""
import itertools

import pytest

from fgrad.lower.kernel.index import Sym, add, floordiv, ix_const, ix_range, ix_sym, mod, scale
from fgrad.lower.kernel.ir import Cond, Const, IndexPred, Load, Loop, Op, Store
from fgrad.core.dtypes import dtypes
from fgrad.lower.kernel.pieces import decide, fixed_quotient, piece_ranges, range_in, tile_width

I = Sym("i", 192)
J = Sym("j", 8)


def _loop(sym, conds, inner=None):
    pred = IndexPred(tuple(conds), dtypes.bool)
    store = Store(0, ix_sym(sym), pred)
    body = (store,) if inner is None else (Loop(inner, (store,)),)
    return Loop(sym, body)


def _evaluate(ix, values):
    """The integer value of an index expression at concrete loop values."""
    total = ix.const
    for atom, coeff in ix.terms:
        if isinstance(atom, Sym):
            v = values[atom]
        else:
            inner = _evaluate(atom.arg, values)
            v = inner // atom.d if type(atom).__name__ == "Div" else inner % atom.d
        total += coeff * v
    return total


def test_cuts_at_quotient_boundaries():
    conds = [Cond(floordiv(ix_sym(I), 64), 1, 1)]
    assert piece_ranges(_loop(I, conds)) == [(0, 63), (64, 127), (128, 191)]


def test_plain_and_offset_conditions_cut_too():
    conds = [Cond(ix_sym(I), 0, 99), Cond(add(floordiv(ix_sym(I), 32), ix_const(1)), 6, 6)]
    assert piece_ranges(_loop(I, conds, inner=J)) == [(0, 99), (100, 159), (160, 191)]


def test_short_innermost_pieces_do_not_split():
    assert piece_ranges(_loop(I, [Cond(ix_sym(I), 1, 190)])) == []            # 1-long ends
    assert piece_ranges(_loop(I, [Cond(ix_sym(I), 1, 190)], inner=J)) == [(0, 0), (1, 190),
                                                                          (191, 191)]


def test_a_long_innermost_loop_splits_off_a_few_short_pieces():
    """From LONG_INNERMOST iterations, short pieces of MAX_SHORT_ITERATIONS in all may go
    with long ones (a pad or roll of a long row); more short iterations keep one loop."""
    long = Sym("l", 4098)
    assert piece_ranges(_loop(long, [Cond(ix_sym(long), 1, 4096)])) == [
        (0, 0), (1, 4096), (4097, 4097)]
    assert piece_ranges(_loop(long, [Cond(ix_sym(long), 3, 4097)])) == [(0, 2), (3, 4097)]
    many = [Cond(ix_sym(long), 15 * k, 4097) for k in range(1, 6)]   # 75 short iterations
    assert piece_ranges(_loop(long, many)) == []


def test_conditions_on_other_forms_do_not_cut():
    conds = [Cond(mod(ix_sym(I), 64), 0, 3), Cond(scale(ix_sym(I), 2), 0, 10)]
    assert piece_ranges(_loop(I, conds)) == []


@pytest.mark.parametrize("piece", [(0, 63), (64, 127), (100, 140), (128, 191)])
def test_decisions_hold_for_every_value_in_the_piece(piece):
    exprs = [floordiv(ix_sym(I), 64), mod(ix_sym(I), 64), 
             floordiv(add(ix_sym(I), scale(ix_sym(J), 192)), 256),
             mod(add(ix_sym(J), floordiv(ix_sym(I), 64)), 8)]
    known = {I: piece}
    for ix in exprs:
        values = [_evaluate(ix, {I: i, J: j})
                  for i, j in itertools.product(range(piece[0], piece[1] + 1), range(8))]
        assert range_in(ix, known)[0] <= min(values) and max(values) <= range_in(ix, known)[1]
        assert range_in(ix, {}) == ix_range(ix)
        for lo, hi in ((0, 0), (1, 1), (0, 2), (3, 9)):
            verdict = decide(Cond(ix, lo, hi), known)
            truth = {lo <= v <= hi for v in values}
            if verdict is not None:
                assert truth == {verdict}
        for atom, _ in ix.terms:
            if isinstance(atom, Sym):
                continue
            q = fixed_quotient(atom, known)
            quotients = {_evaluate(atom.arg, {I: i, J: j}) // atom.d
                         for i, j in itertools.product(range(piece[0], piece[1] + 1), range(8))}
            assert q is None or quotients == {q}


def test_nothing_is_decided_without_pieces():
    assert decide(Cond(floordiv(ix_sym(I), 64), 0, 5), {}) is None
    assert fixed_quotient(floordiv(ix_sym(I), 64).terms[0][0], {}) is None


def test_a_const_only_store_has_no_pieces():
    loop = Loop(I, (Store(0, ix_sym(I), Const(1.0, dtypes.float32)),))
    assert piece_ranges(loop) == []


def test_tile_width_is_the_smallest_divisor_that_tiles_the_piece():
    i = ix_sym(I)
    loads = Op("add", (Load(1, add(scale(floordiv(i, 32), 100), mod(i, 32)), dtypes.float32),
                       Load(2, floordiv(i, 64), dtypes.float32)), dtypes.float32)
    loop = Loop(I, (Store(0, i, loads),))
    assert tile_width(loop, (0, 191)) == 32
    assert tile_width(loop, (64, 127)) == 32
    assert tile_width(loop, (16, 143)) is None        # 16 is not a multiple of 32 or 64
    assert tile_width(loop, (0, 31)) is None          # one tile: nothing to split
    outer = Loop(J, (loop,))
    assert tile_width(outer, (0, 7)) is None          # only innermost loops
    small = Loop(I, (Store(0, i, Load(1, mod(i, 4), dtypes.float32)),))
    assert tile_width(small, (0, 191)) is None        # too narrow to vectorize
