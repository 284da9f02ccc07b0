"""Index expressions of the kernel IR: affine sums over loop variables, plus floor division,
floor modulo and clamping by constants, and indices read at run time, simplified as built.

In: loop variables (`Sym`), integer constants and run-time index values. Out: `Ix` values
with sound bounds.

An `Ix` is sum(coeff * atom) + const over atoms `Sym`, `Div` (floor division), `Mod` (floor
modulo), `Clamp` (into [0, hi]), all by positive constants, and `Dyn` (a kernel-IR integer
value computed at run time, e.g. a load of a gather's index buffer, clamped into [0, hi]:
its bounds are known though its value is not). Constructors simplify as they
build: exact division by a common factor, range-based folding, and `n*(e//n) + e%n == e`
with its nested forms (`_fold_pair`), so reshapes of contiguous data come out affine.
`ix_range` gives sound integer bounds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union


@dataclass(frozen=True)
class Sym:
    """A loop variable running over 0 .. extent-1."""

    name: str
    extent: int

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Div:
    """floor(arg / d), d > 0."""

    arg: "Ix"
    d: int

    def __str__(self) -> str:
        return f"{_paren(self.arg)} // {self.d}"


@dataclass(frozen=True)
class Mod:
    """arg mod d (floor modulo, result in [0, d)), d > 0."""

    arg: "Ix"
    d: int

    def __str__(self) -> str:
        return f"{_paren(self.arg)} % {self.d}"


@dataclass(frozen=True)
class Clamp:
    """min(max(arg, 0), hi)."""

    arg: "Ix"
    hi: int

    def __str__(self) -> str:
        return f"clamp({self.arg}, 0, {self.hi})"


@dataclass(frozen=True)
class Dyn:
    """min(max(value, 0), hi) for an integer kernel-IR expression `value` computed at run
    time. `syms`: the loop variables `value` depends on; `label`: its printed form (no
    object ids, so printed kernels stay deterministic). Equal only to itself in practice:
    kernel-IR expressions compare and hash by identity."""

    value: Any
    hi: int
    syms: frozenset[Sym]
    label: str

    def __str__(self) -> str:
        return f"dyn({self.label}, 0, {self.hi})"


IxAtom = Union[Sym, Div, Mod, Clamp, Dyn]


def _paren(e: "Ix") -> str:
    bare = not e.terms or (len(e.terms) == 1 and e.const == 0 and e.terms[0][1] == 1
                           and isinstance(e.terms[0][0], Sym))
    return str(e) if bare else f"({e})"


@dataclass(frozen=True)
class Ix:
    """sum(coeff * atom) + const, terms sorted by their printed form."""

    terms: tuple[tuple[IxAtom, int], ...] = ()
    const: int = 0

    # The hash is computed once per value: indices nest (Div and Mod hold an Ix) and are
    # dictionary keys throughout planning (W9's plan hashed 136K times, 13% of its time).
    def __hash__(self) -> int:
        found = self.__dict__.get("_hash")
        if found is None:
            found = hash((self.terms, self.const))
            object.__setattr__(self, "_hash", found)
        return found

    # The printed form is computed once per value (terms are ordered by the printed form
    # of atoms that nest other Ix values, so it was recomputed many times over).
    def __str__(self) -> str:
        text = self.__dict__.get("_text")
        if text is None:
            parts = [str(a) if c == 1 else f"{c}*{a}" for a, c in self.terms]
            if self.const or not parts:
                parts.append(str(self.const))
            text = " + ".join(parts).replace("+ -", "- ")
            object.__setattr__(self, "_text", text)
        return text

    def nonlinear_syms(self) -> set[Sym]:
        """The loop variables that occur inside a Div, Mod, Clamp or Dyn."""
        out: set[Sym] = set()
        for a, _ in self.terms:
            if isinstance(a, Dyn):
                out |= a.syms
            elif not isinstance(a, Sym):
                out |= used_syms(a.arg)
                out |= a.arg.nonlinear_syms()
        return out


def used_syms(e: "Ix") -> set[Sym]:
    """Every loop variable that occurs in e."""
    out: set[Sym] = set()
    for a, _ in e.terms:
        if isinstance(a, Dyn):
            out |= a.syms
        else:
            out |= {a} if isinstance(a, Sym) else used_syms(a.arg)
    return out


def dyn_atoms(e: "Ix") -> list[Dyn]:
    """The run-time index atoms of e (outside in, each once)."""
    out: list[Dyn] = []
    for a, _ in e.terms:
        if isinstance(a, Dyn):
            out.append(a)
        elif not isinstance(a, Sym):
            out += [d for d in dyn_atoms(a.arg) if d not in out]
    return out


def ix_const(c: int) -> Ix:
    """The constant index c."""
    return Ix((), int(c))


def ix_sym(s: Sym) -> Ix:
    """The loop variable s (a 1-extent loop is the constant 0)."""
    return ix_const(0) if s.extent == 1 else Ix(((s, 1),), 0)


def ix_dyn(value: Any, hi: int, syms: frozenset[Sym], label: str) -> Ix:
    """The run-time index `value` clamped into [0, hi] (0 when hi <= 0)."""
    if hi <= 0:
        return ix_const(0)
    return Ix(((Dyn(value, hi, syms, label), 1),), 0)


def _atom_range(a: IxAtom) -> tuple[int, int]:
    if isinstance(a, Sym):
        return 0, max(a.extent - 1, 0)
    if isinstance(a, Dyn):
        return 0, a.hi
    lo, hi = ix_range(a.arg)
    if isinstance(a, Div):
        return lo // a.d, hi // a.d
    if isinstance(a, Mod):
        return (lo % a.d, hi % a.d) if lo // a.d == hi // a.d else (0, a.d - 1)
    return min(max(lo, 0), a.hi), min(max(hi, 0), a.hi)


def ix_range(e: Ix) -> tuple[int, int]:
    """Inclusive integer bounds of e over every loop iteration."""
    lo = hi = e.const
    for a, c in e.terms:
        alo, ahi = _atom_range(a)
        lo += min(c * alo, c * ahi)
        hi += max(c * alo, c * ahi)
    return lo, hi


def _make(terms: dict[IxAtom, int], const: int) -> Ix:
    terms = {a: c for a, c in terms.items() if c != 0}
    while True:
        folded = _fold_pair(terms)
        if folded is None:
            break
        const += folded
        terms = {a: c for a, c in terms.items() if c != 0}
    if len(terms) < 2:   # nothing to order (most indices): no printing
        return Ix(tuple(terms.items()), const)
    return Ix(tuple(sorted(terms.items(), key=lambda t: str(t[0]))), const)


def _fold_pair(terms: dict[IxAtom, int]) -> int | None:
    """Rewrite, in place, k*(X % n) + k*n*B where B is X // n or (X // n) % m, or differs
    from them by loop variables alone (B = Y // e or Y % m with Y - X // n == D, a sum of
    loop variables): with X' = X + n*D, into k*X' or k*(X' % (n*m)). Returns the constant
    this adds, or None when nothing matched. X' agrees with X modulo n and X' // n is
    Y, so each rewrite is exact; each leaves one atom fewer. It turns the row-major offset
    of a reshape's delinearized multi-index back into the flat offset it came from."""
    for atom, k in terms.items():
        if not isinstance(atom, Mod):
            continue
        quotient = floordiv(atom.arg, atom.d)
        for other, c in terms.items():
            if c != k * atom.d or other == atom:
                continue
            inner = _whole(other)
            if inner is None or isinstance(other, Mod) and ix_range(inner)[0] < 0:
                continue   # (X' % (n*m) is only emitted for X' >= 0)
            shift = add(inner, scale(quotient, -1))
            if any(not isinstance(a, Sym) for a, _ in shift.terms):
                continue
            moved = add(atom.arg, scale(shift, atom.d))
            folded = mod(moved, atom.d * other.d) if isinstance(other, Mod) else moved
            del terms[atom]
            del terms[other]
            for a, coeff in folded.terms:
                terms[a] = terms.get(a, 0) + k * coeff
            return k * folded.const
    return None


def _whole(atom: IxAtom) -> Ix | None:
    """Y of an atom Y // e (as the Ix Y // e itself) or Y % m (Y); None for others."""
    if isinstance(atom, Mod):
        return atom.arg
    if isinstance(atom, Div):
        return Ix(((atom, 1),), 0)
    return None


def add(*es: Ix) -> Ix:
    """The sum of index expressions."""
    terms: dict[IxAtom, int] = {}
    const = 0
    for e in es:
        const += e.const
        for a, c in e.terms:
            terms[a] = terms.get(a, 0) + c
    return _make(terms, const)


def scale(e: Ix, k: int) -> Ix:
    """k * e."""
    if k == 0:
        return ix_const(0)
    return Ix(tuple((a, c * k) for a, c in e.terms), e.const * k)


def _split(e: Ix, d: int) -> tuple[Ix, Ix]:
    """e == d*q + r with every term of q exact and r's constant in [0, d)."""
    q = {a: c // d for a, c in e.terms if c % d == 0}
    r = {a: c for a, c in e.terms if c % d != 0}
    return _make(q, e.const // d), Ix(tuple(sorted(r.items(), key=lambda t: str(t[0]))),
                                       e.const % d)


def floordiv(e: Ix, d: int) -> Ix:
    """floor(e / d) for a positive constant d."""
    if d <= 0:
        raise ValueError(f"index division by {d}")
    if d == 1:
        return e
    q, r = _split(e, d)
    lo, hi = ix_range(r)
    if lo // d == hi // d:
        return add(q, ix_const(lo // d))
    if len(r.terms) == 1 and r.terms[0][1] == 1 and r.const == 0 \
            and isinstance(r.terms[0][0], Div):
        inner = r.terms[0][0]
        return add(q, Ix(((Div(inner.arg, inner.d * d), 1),), 0))
    return add(q, Ix(((Div(r, d), 1),), 0))


def mod(e: Ix, d: int) -> Ix:
    """e mod d (floor modulo) for a positive constant d."""
    if d <= 0:
        raise ValueError(f"index modulo by {d}")
    if d == 1:
        return ix_const(0)
    _, r = _split(e, d)
    lo, hi = ix_range(r)
    if lo // d == hi // d:
        return add(r, ix_const(-(lo // d) * d))
    return Ix(((Mod(r, d), 1),), 0)


def clamp(e: Ix, hi: int) -> Ix:
    """min(max(e, 0), hi); the identity when e's range already fits."""
    lo_e, hi_e = ix_range(e)
    if 0 <= lo_e and hi_e <= hi:
        return e
    if lo_e >= hi:
        return ix_const(hi)
    if hi_e <= 0:
        return ix_const(0)
    return Ix(((Clamp(e, hi), 1),), 0)


def linearize(idx: tuple[Ix, ...], shape: tuple[int, ...]) -> Ix:
    """The row-major flat offset of a multi-index (a `FlatIndex` of `shape`: its own)."""
    if isinstance(idx, FlatIndex) and idx.shape == tuple(shape):
        return idx.flat
    flat = ix_const(0)
    for i, n in zip(idx, shape, strict=True):
        flat = add(scale(flat, n), i)
    return flat


class FlatIndex(tuple):
    """A multi-index that `delinearize` made of a flat offset, which it keeps (`flat`, with
    the `shape`): a load of a row-major buffer of that shape reads at `flat` itself, where
    re-linearizing the axes' divisions and remainders need not fold back to it."""

    flat: Ix
    shape: tuple[int, ...]

    def __new__(cls, axes: list[Ix], flat: Ix, shape: tuple[int, ...]) -> FlatIndex:
        made = super().__new__(cls, axes)
        made.flat, made.shape = flat, shape
        return made


def delinearize(flat: Ix, shape: tuple[int, ...]) -> tuple[Ix, ...]:
    """The row-major multi-index of a flat offset (a `FlatIndex`). The outermost non-unit
    axis takes no modulo: for an offset outside the array it runs out of range, and loads
    clamp it."""
    out = []
    stride = 1
    outermost = next((a for a, n in enumerate(shape) if n > 1), -1)
    for axis in range(len(shape) - 1, -1, -1):
        n = shape[axis]
        if n <= 1:  # extent 0: the loop never runs, so any index will do
            out.append(ix_const(0))
        elif axis == outermost:
            out.append(floordiv(flat, stride))
        else:
            out.append(mod(floordiv(flat, stride), n))
        stride *= max(n, 1)
    return FlatIndex(out[::-1], flat, shape)
