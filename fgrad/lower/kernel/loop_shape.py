"""What a loop nest's form says about scheduling it (the llvm renderer's loop hints).

`latency_bound`: a body that accumulates or computes a costly op (a transcendental
polynomial, a remainder's steps: `partition.COSTLY`) runs long dependency chains, so its
innermost loop asks for more vector iterations per trip;
`inner_trips`: the work nested inside one iteration of a loop, above which unrolling the
loop would only copy the nest.
"""
from __future__ import annotations

from collections.abc import Sequence

from fgrad.lower.kernel.ir import AccUpdate, Expr, Loop, Op, Stmt, Store
from fgrad.lower.schedule.partition import COSTLY


def latency_bound(stmts: Sequence[Stmt]) -> bool:
    """Whether a loop body accumulates or computes a costly op (module docstring)."""
    seen: set[int] = set()

    def heavy(e: Expr) -> bool:
        if not isinstance(e, Op) or id(e) in seen:
            return False
        seen.add(id(e))
        return e.op in COSTLY or any(heavy(a) for a in e.args)
    return any(isinstance(st, AccUpdate) or (isinstance(st, Store) and heavy(st.value))
               for st in stmts)


def inner_trips(s: Loop) -> int:
    """Iterations of the deepest nest inside `s` for one of its own (1 when innermost): an
    outer loop around that much work is not worth unrolling (LLVM would copy the nest)."""
    return max((t.sym.extent * inner_trips(t) for t in s.body if isinstance(t, Loop)),
               default=1)
