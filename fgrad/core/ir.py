"""The jaxpr IR: `Var`, `Literal`, `Eqn`, `Jaxpr`, `ClosedJaxpr`, a type checker and a printer.

A Jaxpr is a list of equations in A-normal form. `str(closed_jaxpr)` prints it in JAX's format:
`{ lambda c:f32[] ; a:f32[3]. let b:f32[3] = sin a ... in (b,) }`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fgrad.core.dtypes import DType


@dataclass(frozen=True)
class ShapedArray:
    """An abstract value: what tracing knows about a Tensor (its shape and dtype)."""

    shape: tuple[int, ...]
    dtype: DType

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def str_short(self) -> str:
        return f"{self.dtype.short}[{','.join(str(d) for d in self.shape)}]"

    def __str__(self) -> str:
        return self.str_short()


class Var:
    """A variable of a jaxpr; identity is object identity, names are given by the printer."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        return f"Var({self.aval})"


@dataclass(frozen=True, eq=False)
class Literal:
    """A scalar constant written inline in a jaxpr."""

    val: Any
    aval: ShapedArray

    def __str__(self) -> str:
        v = self.val.item() if hasattr(self.val, "item") else self.val
        return f"{v}:{self.aval.dtype.short}[]"


Atom = Var | Literal


@dataclass(eq=False)
class SourceInfo:
    """The user line that created an equation."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} ({self.function})"


@dataclass(eq=False)
class Eqn:
    """One equation: `outvars = primitive[params] inputs`."""

    primitive: Any
    inputs: list[Atom]
    params: dict[str, Any]
    outvars: list[Var]
    source: SourceInfo | None = None


@dataclass(eq=False)
class Jaxpr:
    """A function in A-normal form."""

    constvars: list[Var]
    invars: list[Var]
    eqns: list[Eqn]
    outvars: list[Atom]

    @property
    def in_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.invars]

    @property
    def out_avals(self) -> list[ShapedArray]:
        return [v.aval for v in self.outvars]

    def __str__(self) -> str:
        return pp_jaxpr(self)


@dataclass(eq=False)
class ClosedJaxpr:
    """A Jaxpr with values bound to its constvars."""

    jaxpr: Jaxpr
    consts: list[Any] = field(default_factory=list)

    @property
    def in_avals(self) -> list[ShapedArray]:
        return self.jaxpr.in_avals

    @property
    def out_avals(self) -> list[ShapedArray]:
        return self.jaxpr.out_avals

    @property
    def eqns(self) -> list[Eqn]:
        return self.jaxpr.eqns

    def __str__(self) -> str:
        return pp_jaxpr(self.jaxpr)

    def __repr__(self) -> str:
        return str(self)


# ---------------------------------------------------------------------------- printing

class _Names:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}

    def __call__(self, atom: Atom) -> str:
        if isinstance(atom, Literal):
            return str(atom)
        key = id(atom)
        if key not in self.names:
            self.names[key] = _var_name(len(self.names))
        return self.names[key]


def _var_name(n: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    name = ""
    while True:
        name = letters[n % 26] + name
        n = n // 26 - 1
        if n < 0:
            return name


def _binder(names: _Names, v: Var) -> str:
    return f"{names(v)}:{v.aval.str_short()}"


def _pp_param(value: Any, names: _Names, indent: int) -> str:
    if isinstance(value, ClosedJaxpr):
        value = value.jaxpr
    if isinstance(value, Jaxpr):
        return _pp(value, names, indent + 4)
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], (Jaxpr, ClosedJaxpr)):
        inner = " ".join(_pp_param(v, names, indent) for v in value)
        return f"({inner})"
    if isinstance(value, DType):
        return value.short
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return repr(value) if isinstance(value, str) else str(value)


def _pp_eqn(eqn: Eqn, names: _Names, indent: int) -> str:
    lhs = " ".join(_binder(names, v) for v in eqn.outvars) or "_"
    params = ""
    if eqn.params:
        items = ", ".join(f"{k}={_pp_param(v, names, indent)}" for k, v in eqn.params.items())
        params = f"[{items}]"
    args = " ".join(names(a) for a in eqn.inputs)
    return f"{lhs} = {eqn.primitive.name}{params} {args}".rstrip()


def _pp(jaxpr: Jaxpr, names: _Names, indent: int) -> str:
    pad = " " * indent
    consts = " ".join(_binder(names, v) for v in jaxpr.constvars)
    ins = " ".join(_binder(names, v) for v in jaxpr.invars)
    head = f"{{ lambda {consts + ' ' if consts else ''}; {ins}. let"
    body = "".join(f"\n{pad}    {_pp_eqn(e, names, indent)}" for e in jaxpr.eqns)
    outs = ", ".join(names(v) for v in jaxpr.outvars)
    trailing = "," if len(jaxpr.outvars) == 1 else ""
    return f"{head}{body}\n{pad}  in ({outs}{trailing}) }}"


def name_vars(jaxpr: Jaxpr, names: _Names) -> None:
    """Give `jaxpr`'s variables (nested jaxprs' too) the names `_pp` would print, in the
    same order, without building the text (the schedule names kernel parameters so)."""
    for v in (*jaxpr.constvars, *jaxpr.invars):
        names(v)
    for e in jaxpr.eqns:
        for v in e.outvars:
            names(v)
        for value in e.params.values():
            _name_param(value, names)
        for a in e.inputs:
            if not isinstance(a, Literal):
                names(a)
    for out in jaxpr.outvars:
        if not isinstance(out, Literal):
            names(out)


def _name_param(value: Any, names: _Names) -> None:
    if isinstance(value, ClosedJaxpr):
        value = value.jaxpr
    if isinstance(value, Jaxpr):
        name_vars(value, names)
    elif isinstance(value, (tuple, list)) and value \
            and isinstance(value[0], (Jaxpr, ClosedJaxpr)):
        for v in value:
            _name_param(v, names)


def pp_jaxpr(jaxpr: Jaxpr) -> str:
    """Render a jaxpr in JAX's text format; nested jaxprs print inline."""
    return _pp(jaxpr, _Names(), 0)


# ---------------------------------------------------------------------------- checking

class JaxprTypeError(TypeError):
    """A jaxpr is malformed: an unbound variable or an aval that does not match its rule."""


def typecheck_jaxpr(jaxpr: Jaxpr) -> None:
    """Check that every variable is bound once and every equation's avals match its rule."""
    env: set[int] = set()

    def bind_var(v: Var) -> None:
        if id(v) in env:
            raise JaxprTypeError(f"variable {v} bound twice")
        env.add(id(v))

    def check_atom(a: Atom) -> None:
        if isinstance(a, Var) and id(a) not in env:
            raise JaxprTypeError(f"unbound variable {a}")

    for v in jaxpr.constvars + jaxpr.invars:
        bind_var(v)
    for eqn in jaxpr.eqns:
        for a in eqn.inputs:
            check_atom(a)
        expected = eqn.primitive.abstract_eval_list(*[a.aval for a in eqn.inputs],
                                                    **eqn.params)
        got = [v.aval for v in eqn.outvars]
        if list(expected) != got:
            raise JaxprTypeError(f"{eqn.primitive.name}: rule gives {expected}, eqn has {got}")
        for v in eqn.outvars:
            bind_var(v)
    for a in jaxpr.outvars:
        check_atom(a)
