"""Expansion: rewrite primitives without kernels into primitives that lower natively.

In: a Jaxpr (the program `plan` is about to schedule). Out: an equivalent Jaxpr with the
same invars in which every equation of a primitive in `EXPANDERS` is replaced:
- call-like primitives (nested jit, checkpoint, custom_jvp_call, custom_vjp_call) are
  inlined: the body's invars are substituted by the equation's inputs and the body is
  expanded recursively;
- argmax/argmin, cumsum/cumprod/cummax/cummin and sort are staged from the functions in
  schedule/expand_math.py (elementwise, movement and reduction primitives only) and inlined;
  top_k becomes a sort (expanded in turn unless the backend sorts natively) and a slice;
- dot_general on dtypes the gemm lacks: float16/bfloat16 becomes a float32 gemm between
  conversions (native kernels; the last one fuses as the gemm's epilogue), integer and bool
  a fused multiply and reduce_sum (schedule/expand_dot.py);
- conv_patches becomes pad, strided slices and a concatenate, except where the backend's
  GEMM reads it from the image (`implicit_gemm`, schedule/fuse_patches.py);
- custom_lin has no evaluation semantics: expanding it raises its impl's TypeError.
The input Jaxpr object itself comes back when nothing matched (executables are cached by its
identity). Expanded outputs keep the variables of the replaced equation where they can,
so names in the schedule printout still match the user's jaxpr.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fgrad.core.ir import Atom, Eqn, Jaxpr, Literal, SourceInfo, Var
from fgrad.core.staging import trace_to_jaxpr
from fgrad.core.trace import current_trace
from fgrad.lower.schedule import expand_dot
from fgrad.lower.schedule import expand_math
from fgrad.lower.schedule.fuse_patches import fuse_patches
from fgrad.lower.schedule.partition import native_sequence_applies

Env = dict[int, Atom]
Expander = Callable[["_Expansion", Eqn, list[Atom], list[Var]], list[Atom]]


def _call_body(eqn: Eqn) -> Jaxpr:
    body = eqn.params["jaxpr"] if "jaxpr" in eqn.params else eqn.params["call"]
    if body.constvars or len(body.invars) != len(eqn.inputs):
        raise ValueError(f"expand: {eqn.primitive.name} body must take its constants as "
                         f"leading invars")
    return body


def _inline_call(ex: _Expansion, eqn: Eqn, ins: list[Atom], outs: list[Var]) -> list[Atom]:
    return ex.inline(_call_body(eqn), ins, outs, None)


def _staged(fn: Callable[..., list[Any]]) -> Expander:
    def expander(ex: _Expansion, eqn: Eqn, ins: list[Atom], outs: list[Var]) -> list[Atom]:
        return ex.inline(_stage(fn, eqn), ins, outs, eqn.source)
    return expander


def _no_semantics(ex: _Expansion, eqn: Eqn, ins: list[Atom], outs: list[Var]) -> list[Atom]:
    eqn.primitive.impl(**eqn.params)  # raises the TypeError that explains why
    raise TypeError(f"{eqn.primitive.name} cannot be compiled")


CALL_LIKE = ("jit", "checkpoint", "custom_jvp_call", "custom_vjp_call")
EXPANDERS: dict[str, Expander] = {
    **{name: _inline_call for name in CALL_LIKE}, "custom_lin": _no_semantics,
    "argmax": _staged(expand_math.arg_extremum("max")),
    "argmin": _staged(expand_math.arg_extremum("min")),
    **{kind: _staged(expand_math.cumulative(kind))
       for kind in ("cumsum", "cumprod", "cummax", "cummin")},
    "sort": _staged(expand_math.bitonic_sort),
    "top_k": _staged(expand_math.top_k_by_sort),
    "dot_general": _staged(expand_dot.dot_as_reduction),
    "checkpoint_name": _staged(lambda x, name: [x]),
    "conv_patches": _staged(expand_math.patches_by_slices),
    "conv_patches_transpose": _staged(expand_math.col2im_by_pads),
}

EXPANSIONS: dict[str, str] = {
    "jit": "the nested jaxpr's equations (inlined)",
    "checkpoint": "the rematerialized function's equations (inlined)",
    "custom_jvp_call": "the primal function's equations (inlined)",
    "custom_vjp_call": "the primal function's equations (inlined)",
    "argmax": "reduce_max, eq/is_nan and a reduce_min of iota (the first maximum)",
    "argmin": "reduce_min, eq/is_nan and a reduce_min of iota (the first minimum)",
    **{kind: "a log2(n)-pass prefix scan of pad/slice and elementwise ops"
       for kind in ("cumsum", "cumprod", "cummax", "cummin")},
    "sort": "a bitonic network of reshape/rev and elementwise compare-exchanges",
    "top_k": "a sort (a native library call on llvm, else a bitonic network), sliced to k; "
             "on llvm, dtypes sort natively: a selection per row (llvm/kernels/selection.py)",
    "checkpoint_name": "nothing (an identity tag for checkpoint policies)",
    "conv_patches": "pad, one strided slice per kernel tap and a concatenate (on llvm, a "
                    "GEMM that multiplies it reads the image instead: fuse_patches.py)",
    "conv_patches_transpose": "one pad with interior zeros per kernel tap, summed, then "
                              "cropped (on llvm, with stride 1, the product feeding it is "
                              "a GEMM reading its other operand's patches: fuse_patches.py)",
}  # dot_general is a gemm; only the dtypes gemm lacks expand (see schedule/expand_dot.py)
NO_SEMANTICS = ("custom_lin: compiling it raises its impl's TypeError (a custom_vjp "
                "function's tangent map has no evaluation semantics)")


def _applies(eqn: Eqn, native_library: bool = False, keep: frozenset[str] = frozenset()
             ) -> bool:
    name = eqn.primitive.name
    if name not in EXPANDERS or name in keep:
        return False
    if native_sequence_applies(eqn, native_library):
        return False  # one library call (llvm/sequences.py)
    if name in CALL_LIKE or name == "custom_lin":
        return True
    if name == "dot_general" and not expand_dot.needs_expansion(eqn, native_library):
        return False  # a gemm (fgrad's own on llvm, int32 too; a tiled kernel on opencl)
    return True


def _stage(fn: Callable[..., list[Any]], eqn: Eqn) -> Jaxpr:
    """`fn` on the equation's input avals and params, staged into a const-free Jaxpr."""
    def body(*xs: Any) -> tuple[list[Any], None]:
        return list(fn(*xs, **eqn.params)), None

    closed, _ = trace_to_jaxpr(body, [a.aval for a in eqn.inputs], current_trace(),
                               f"expand({eqn.primitive.name})")
    if closed.jaxpr.constvars:
        raise AssertionError(f"expand: the {eqn.primitive.name} expansion staged array "
                             f"constants; build them from iota or broadcast scalars")
    return closed.jaxpr


class _Expansion:
    """The equations of the expanded jaxpr, emitted in program order."""

    def __init__(self, native_library: bool = False, keep: frozenset[str] = frozenset()
                 ) -> None:
        self.native_library, self.keep = native_library, keep
        self.eqns: list[Eqn] = []

    def emit(self, eqns: Sequence[Eqn], env: Env, rename: dict[int, Var] | None,
             source: SourceInfo | None) -> None:
        """Emit `eqns` with inputs substituted through `env`. `rename` None: keep each
        equation's own outvars (the top level); else give every output a fresh Var, or
        the Var `rename` names for it. `env` learns each output's atom."""
        for eqn in eqns:
            ins = [_subst(a, env) for a in eqn.inputs]
            outs = list(eqn.outvars) if rename is None else \
                [rename.get(id(v)) or Var(v.aval) for v in eqn.outvars]
            if _applies(eqn, self.native_library, self.keep):
                results = EXPANDERS[eqn.primitive.name](self, eqn, ins, outs)
            else:
                self.eqns.append(self._copy(eqn, ins, outs, source))
                results = list(outs)
            for v, r in zip(eqn.outvars, results, strict=True):
                if r is not v:
                    env[id(v)] = r

    @staticmethod
    def _copy(eqn: Eqn, ins: list[Atom], outs: list[Var], source: SourceInfo | None) -> Eqn:
        same = all(a is b for a, b in zip(ins, eqn.inputs, strict=True)) and all(
            a is b for a, b in zip(outs, eqn.outvars, strict=True))
        if same and source is None:
            return eqn
        return Eqn(eqn.primitive, ins, eqn.params, outs, source or eqn.source)

    def inline(self, body: Jaxpr, ins: list[Atom], outs: list[Var],
               source: SourceInfo | None) -> list[Atom]:
        """Emit `body` applied to `ins`; the atoms of its outputs. An output computed by
        the body is written to the matching Var of `outs` (the first time it appears)."""
        env: Env = {id(v): a for v, a in zip(body.invars, ins, strict=True)}
        produced = {id(v) for e in body.eqns for v in e.outvars}
        rename: dict[int, Var] = {}
        for v, out in zip(body.outvars, outs, strict=True):
            if isinstance(v, Var) and id(v) in produced and id(v) not in rename:
                rename[id(v)] = out
        self.emit(body.eqns, env, rename, source)
        return [_subst(a, env) for a in body.outvars]


def _subst(a: Atom, env: Env) -> Atom:
    return a if isinstance(a, Literal) else env.get(id(a), a)


def expand(jaxpr: Jaxpr, native_library: bool = False,
           implicit_gemm: Callable[[Eqn], bool] | None = None) -> Jaxpr:
    """`jaxpr` with every equation in EXPANDERS rewritten (module docstring); `jaxpr`
    itself when there is none. `native_library`: the backend has native library calls
    (llvm), so a sort, top_k or cumulative op of a dtype it computes natively stays.
    `implicit_gemm`: which products may read conv_patches from the image
    (fuse_patches.py); those patches are not expanded."""
    if implicit_gemm is not None:
        kept = _expand(jaxpr, native_library,
                       frozenset({"conv_patches", "conv_patches_transpose"}))
        return _expand(fuse_patches(kept, implicit_gemm), native_library, frozenset())
    return _expand(jaxpr, native_library, frozenset())


def _expand(jaxpr: Jaxpr, native_library: bool, keep: frozenset[str]) -> Jaxpr:
    if not any(_applies(e, native_library, keep) for e in jaxpr.eqns):
        return jaxpr
    ex = _Expansion(native_library, keep)
    env: Env = {}
    ex.emit(jaxpr.eqns, env, None, None)
    outvars = [_subst(a, env) for a in jaxpr.outvars]
    return Jaxpr(list(jaxpr.constvars), list(jaxpr.invars), ex.eqns, outvars)
