"""AVX-512 instructions the loop vectorizer can reach from scalar IR: `vscalefps/pd`, and
`vpermps` as a 16-entry table.

`vscalefps` computes y * 2^floor(n) for a float n, rounded once (denormal and infinite
results included), in one instruction: exp's scale by 2^n from the float n its range
reduction already has, where the integer route takes four instructions (shift, add,
multiply, and a second multiply for denormals). `vpermps` looks up 16 lanes in a table
held in one register, by the low 4 bits of each lane: exp's 2^(j/16), so its polynomial
can be three steps shorter. Scalar IR cannot name either (LLVM's `ldexp` wants an integer
exponent and converts it back to float; a table load becomes a gather), and the loop
vectorizer widens only plain IR and the intrinsics it knows. So a kernel calls a declared
scalar function whose `vector-function-abi-variant` attribute names its vector versions:
the vectorizer calls those instead. `inline_calls`, after LLVM's pipeline, links the
library that defines them all (`available_externally`: never emitted into the object) and
inlines them, so a vectorized loop holds one instruction where the call was.

In: an Emitter (`ops.Emitter`) and float/double registers; after optimizing, the module.
Out: the value (`scalef`, `exp2_sixteenth`); the module with the calls inlined
(`inline_calls`).
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from fgrad.lower.llvm import target

MARKER = "fgrad.vc."     # a kernel's text holds this iff it calls a function of this module
TABLE = tuple(2.0 ** (j / 16) for j in range(16))
_F32, _F64 = ir.FloatType(), ir.DoubleType()
# name: (element type, arguments, lane counts of its vector versions)
_CALLS = {"scalef.f32": (_F32, 2, (16, 8, 4)), "scalef.f64": (_F64, 2, (8, 4, 2)),
          "exp2_sixteenth.f32": (_F32, 1, (16, 8))}


def available() -> bool:
    """Whether kernels built now may use this module's calls: AVX-512F with AVX-512VL
    (the 256/128-bit forms of the vectorizer's narrower loops), building 512-bit loops,
    outside `scalar_code`."""
    if target.rendering_setting("scalar"):
        return False
    return target.vector_bits() == 512 and _host_has_vl()


@functools.cache
def _host_has_vl() -> bool:
    return "+avx512vl" in target.features().split(",")


def scalar_code() -> contextlib.AbstractContextManager[None]:
    """Kernels rendered on this thread inside the block use no calls of this module: they
    compile without the vectorizers, where the calls gain nothing and their inlining costs
    compile time (W5's loss kernels: 8 -> 11 ms of LLVM each)."""
    return target.rendering_with(scalar=True)


def _full_name(call: str) -> str:
    return MARKER + call


def _declare_all(module: ir.Module) -> None:
    """Declare the scalar functions and their vector versions, and keep the versions alive
    through LLVM's pipeline (`llvm.compiler.used`) until the vectorizer has used them."""
    i8p = ir.IntType(8).as_pointer()
    used = []
    for call, (ty, arity, lane_counts) in _CALLS.items():
        scalar = ir.Function(module, ir.FunctionType(ty, [ty] * arity), name=_full_name(call))
        variants = []
        for lanes in lane_counts:
            vty = ir.VectorType(ty, lanes)
            name = f"{scalar.name}.v{lanes}"
            fn = ir.Function(module, ir.FunctionType(vty, [vty] * arity), name=name)
            _pure(fn)
            used.append(fn.bitcast(i8p))
            variants.append(f"_ZGV_LLVM_N{lanes}{'v' * arity}_{scalar.name}({name})")
        _pure(scalar)
        set.add(scalar.attributes, f'"vector-function-abi-variant"="{",".join(variants)}"')
    kept = ir.GlobalVariable(module, ir.ArrayType(i8p, len(used)), "llvm.compiler.used")
    kept.linkage = "appending"
    kept.section = "llvm.metadata"
    kept.initializer = ir.Constant(ir.ArrayType(i8p, len(used)), used)


def _pure(fn: ir.Function) -> None:
    for attribute in ("nounwind", "memory(none)", "willreturn"):
        set.add(fn.attributes, attribute)


def _call(em: Any, call: str, args: list[ir.Value]) -> ir.Value:
    module = em.module
    if _full_name(call) not in module.globals:
        _declare_all(module)
    return em.b.call(module.globals[_full_name(call)], args)


def scalef(em: Any, y: ir.Value, n: ir.Value) -> ir.Value:
    """y * 2^floor(n), rounded once, for float/double registers y and n (see `available`)."""
    suffix = "f64" if isinstance(y.type, ir.DoubleType) else "f32"
    return _call(em, f"scalef.{suffix}", [y, n])


def exp2_sixteenth(em: Any, t: ir.Value) -> ir.Value:
    """2^(j/16) rounded to float32, for j the low 4 bits of float32 register t."""
    return _call(em, "exp2_sixteenth.f32", [t])


def _hex(value: float) -> str:
    """An LLVM float literal of `value` rounded to float32 (LLVM's double-hex spelling)."""
    return str(ir.Constant(_F32, value)).split(" ", 1)[1]


def _scalef_lines(suffix: str) -> list[str]:
    ty, _, lane_counts = _CALLS[f"scalef.{suffix}"]
    kind, width, mask = ("ps", 32, "i16") if ty == _F32 else ("pd", 64, "i8")
    name = _full_name(f"scalef.{suffix}")
    v = f"<{128 // width} x {ty}>"
    one = f"llvm.x86.avx512.mask.scalef.s{kind[1]}"
    lines = [f"declare {v} @{one}({v}, {v}, {v}, i8, i32)",
             f'define available_externally {ty} @"{name}"({ty} %y, {ty} %n) #0 {{',
             f"  %vy = insertelement {v} undef, {ty} %y, i32 0",
             f"  %vn = insertelement {v} undef, {ty} %n, i32 0",
             f"  %r = call {v} @{one}({v} %vy, {v} %vn, {v} %vy, i8 -1, i32 4)",
             f"  %s = extractelement {v} %r, i32 0", f"  ret {ty} %s", "}"]
    for lanes in lane_counts:
        vty, bits = f"<{lanes} x {ty}>", lanes * width
        intrinsic = f"llvm.x86.avx512.mask.scalef.{kind}.{bits}"
        lane_mask, rounding = (mask, ", i32 4") if bits == 512 else ("i8", "")
        lines += [f"declare {vty} @{intrinsic}({vty}, {vty}, {vty}, {lane_mask}"
                  f"{', i32' if rounding else ''})",
                  f'define available_externally {vty} @"{name}.v{lanes}"({vty} %y, {vty} %n)'
                  " #0 {",
                  f"  %r = call {vty} @{intrinsic}({vty} %y, {vty} %n, {vty} %y, "
                  f"{lane_mask} -1{rounding})", f"  ret {vty} %r", "}"]
    return lines


def _table_lines() -> list[str]:
    name = _full_name("exp2_sixteenth.f32")
    entries = [f"float {_hex(v)}" for v in TABLE]
    whole = "<16 x float> <" + ", ".join(entries) + ">"
    low, high = ("<8 x float> <" + ", ".join(part) + ">" for part in (entries[:8], entries[8:]))
    return [
        "declare <16 x float> @llvm.x86.avx512.permvar.sf.512(<16 x float>, <16 x i32>)",
        "declare <8 x float> @llvm.x86.avx512.vpermi2var.ps.256(<8 x float>, <8 x i32>, "
        "<8 x float>)",
        f'define available_externally float @"{name}"(float %t) #0 {{',
        "  %bits = bitcast float %t to i32", "  %j = and i32 %bits, 15",
        f"  %v = extractelement {whole}, i32 %j", "  ret float %v", "}",
        f'define available_externally <16 x float> @"{name}.v16"(<16 x float> %t) #0 {{',
        "  %j = bitcast <16 x float> %t to <16 x i32>",
        f"  %v = call <16 x float> @llvm.x86.avx512.permvar.sf.512({whole}, <16 x i32> %j)",
        "  ret <16 x float> %v", "}",
        f'define available_externally <8 x float> @"{name}.v8"(<8 x float> %t) #0 {{',
        "  %j = bitcast <8 x float> %t to <8 x i32>",
        f"  %v = call <8 x float> @llvm.x86.avx512.vpermi2var.ps.256({low}, <8 x i32> %j, "
        f"{high})", "  ret <8 x float> %v", "}"]


@functools.cache
def _library_text() -> str:
    """The definitions: each vector version one AVX-512 instruction, the scalar ones the
    lowest-lane (`ss`/`sd`) form or a constant vector's element."""
    lines = [f'target triple = "{target.triple_and_layout()[0]}"',
             *_scalef_lines("f32"), *_scalef_lines("f64"), *_table_lines(),
             "attributes #0 = { alwaysinline nounwind memory(none) willreturn }"]
    return "\n".join(lines) + "\n"


def inline_calls(module: llvm.ModuleRef, machine: llvm.TargetMachine,
                 context: Any = None) -> None:
    """Link the definitions into an optimized `module` whose text held `MARKER`, and
    inline them (LLVM's always-inliner only: the pipeline has run)."""
    text = _library_text()
    library = (llvm.parse_assembly(text) if context is None
               else llvm.parse_assembly(text, context=context))
    module.link_in(library)
    builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(0))
    manager = llvm.create_new_module_pass_manager()
    manager.add_always_inliner_pass()
    manager.run(module, builder)
