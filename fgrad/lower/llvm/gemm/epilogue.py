"""Which fused epilogues the GEMM's micro-kernel computes in registers.

In: a gemm's equation and the epilogue kernel fused into its call (`native.epilogue_fits`
already holds). Out: a `RegisterEpilogue` when the kernel is one of bias, bias + relu,
relu, residual or residual + relu over the (m, n) product (a residual: a matrix of the
product's shape, read at the same element), written into its own output: the micro-kernel
then computes it on the product's last k-slice, on the tile still in registers, and stores
it beside the product (`native.EPILOGUE_MODES`); the kernel itself is not run. Else None:
the kernel runs on each block of final rows through the driver's thunk.

The matched forms are the kernel IR the schedule builds for `x @ w + b`,
`(x @ w + b).relu()`, `(x @ w).relu()`, `x @ w + r` and `(x @ w + r).relu()` with r
(m, n) (relu is `le` then `select`, so a NaN stays NaN, as in the kernel).
"""
from __future__ import annotations

from dataclasses import dataclass

from fgrad.core.ir import Eqn
from fgrad.lower.kernel.ir import Const, Expr, Kernel, Load, Loop, Op, Store
from fgrad.lower.llvm.gemm.native import EPILOGUE_MODES, FLOAT_TYPES
from fgrad.lower.schedule.gemm_layout import gemm_dims


@dataclass(frozen=True)
class RegisterEpilogue:
    """The micro-kernel's epilogue `mode`, the kernel parameter it writes (`out`) and the
    one holding the per-column bias (`bias`, None for relu alone)."""

    mode: int
    out: int
    bias: int | None


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


def _bias_add(e: Expr, product: str, column: str) -> tuple[Load, Load] | None:
    """(product load, bias load) when `e` adds a per-column vector to the product."""
    if not (isinstance(e, Op) and e.op == "add" and len(e.args) == 2):
        return None
    for p, q in (e.args, e.args[::-1]):
        if isinstance(p, Load) and isinstance(q, Load) and str(p.index) == product \
                and column and str(q.index) == column:
            return p, q
    return None


def _relu_of(e: Expr) -> Expr | None:
    """x when `e` is select(le(x, 0), 0, x)."""
    if not (isinstance(e, Op) and e.op == "select" and len(e.args) == 3):
        return None
    cond, low, high = e.args
    if isinstance(cond, Op) and cond.op == "le" and len(cond.args) == 2 \
            and _is_zero(cond.args[1]) and _is_zero(low) and cond.args[0] is high:
        return high
    return None


def register_epilogue(eqn: Eqn, kernel: Kernel) -> RegisterEpilogue | None:
    """The register form of `kernel`, the gemm `eqn`'s fused epilogue, or None (module
    docstring). The kernel reads the product where it stores, so the load at the store's
    index is the product."""
    dims = gemm_dims(eqn)
    if dims is None or dims.batch or len(kernel.body) != 1:
        return None
    outer = kernel.body[0]
    if not (isinstance(outer, Loop) and len(outer.body) == 1):
        return None
    inner = outer.body[0]
    if isinstance(inner, Loop) and outer.sym.extent == dims.m and inner.sym.extent == dims.n \
            and len(inner.body) == 1:      # an (m, n) nest
        store, column = inner.body[0], str(inner.sym)
    elif outer.sym.extent == dims.m * dims.n:   # one flat loop: no per-column bias
        store, column = inner, ""
    else:
        return None
    if not isinstance(store, Store) or store.value.dtype != eqn.outvars[0].aval.dtype \
            or store.value.dtype not in FLOAT_TYPES:
        return None
    product = str(store.index)
    value, relu = store.value, False
    inside = _relu_of(value)
    if inside is not None:
        value, relu = inside, True
    added = _bias_add(value, product, column)
    if added is not None and added[0].buf != added[1].buf:
        mode = EPILOGUE_MODES["bias_relu" if relu else "bias"]
        return RegisterEpilogue(mode, store.buf, added[1].buf)
    added = _bias_add(value, product, product)   # which load is the product: its buffer
    if added is not None and added[0].buf != added[1].buf and kernel.product is not None:
        added = added if added[0].buf == kernel.product else (added[1], added[0])
    if added is not None and added[0].buf == kernel.product != added[1].buf:
        mode = EPILOGUE_MODES["residual_relu" if relu else "residual"]
        return RegisterEpilogue(mode, store.buf, added[1].buf)
    if relu and isinstance(value, Load) and str(value.index) == product:
        return RegisterEpilogue(EPILOGUE_MODES["relu"], store.buf, None)
    return None


def in_registers(eqn: Eqn, kernel: Kernel) -> bool:
    """Whether fgrad's GEMM computes `kernel`, the gemm `eqn`'s fused epilogue, in its
    registers (program.plan's `in_registers`: a product only it reads needs no buffer)."""
    from fgrad.lower.llvm.gemm.native import uses_native_gemm
    return uses_native_gemm(eqn) and register_epilogue(eqn, kernel) is not None


def register_note(eqn: Eqn, kernel: Kernel) -> str:
    """" (bias+relu in registers)" and the like for the printout, or "" when the fused
    kernel runs through the driver's thunk."""
    from fgrad.lower.llvm.gemm.native import uses_native_gemm
    if not uses_native_gemm(eqn):
        return ""
    found = register_epilogue(eqn, kernel)
    if found is None:
        return ""
    name = next(k for k, v in EPILOGUE_MODES.items() if v == found.mode)
    return f" ({name.replace('_', '+')} in registers)"
