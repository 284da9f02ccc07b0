"""AVX-512 instructions the loop vectorizer can reach from scalar IR: `vscalefps/pd`.

`vscalefps` computes y * 2^floor(n) for a float n, rounded once (denormal and infinite
results included), in one instruction: exp's scale by 2^n from the float n its range
reduction already has, where the integer route takes four instructions (shift, add,
multiply, and a second multiply for denormals). Scalar IR cannot name it (LLVM's `ldexp`
wants an integer exponent and converts it back to float), and the loop vectorizer widens
only plain IR and the intrinsics it knows. So a kernel calls a declared scalar function
whose `vector-function-abi-variant` attribute names its 4/8/16-lane versions: the
vectorizer calls those instead. `inline_calls`, after LLVM's pipeline, links the library
that defines them all (`available_externally`: never emitted into the object) and inlines
them, so a vectorized loop holds one `vscalefps` where the call was.

In: an Emitter (`ops.Emitter`) and float/double registers; after optimizing, the module.
Out: the scaled value (`scalef`); the module with the calls inlined (`inline_calls`).
"""
from __future__ import annotations

from typing import Any

import llvmlite.binding as llvm
from llvmlite import ir

from fgrad.lower.llvm import target

MARKER = "fgrad.vc."     # a kernel's text holds this iff it calls a function of this module
_LANE_BITS = (512, 256, 128)
_TYPES = {"f32": (ir.FloatType(), "ps", 32, "i16"), "f64": (ir.DoubleType(), "pd", 64, "i8")}


def available() -> bool:
    """Whether kernels built now may use `scalef`: AVX-512F (512-bit rendering) on a CPU
    whose 128/256-bit forms exist too (AVX-512VL: the vectorizer's narrower loops)."""
    flags = set(target.features().split(","))
    return target.vector_bits() == 512 and "+avx512vl" in flags


def _scalar_name(suffix: str) -> str:
    return f"{MARKER}scalef.{suffix}"


def _lanes(suffix: str) -> list[int]:
    width = _TYPES[suffix][2]
    return [bits // width for bits in _LANE_BITS]


def _declare_all(module: ir.Module) -> None:
    """Declare the scalar functions and their vector versions, and keep the versions alive
    through LLVM's pipeline (`llvm.compiler.used`) until the vectorizer has used them."""
    i8p = ir.IntType(8).as_pointer()
    used = []
    for suffix, (ty, _, _, _) in _TYPES.items():
        scalar = ir.Function(module, ir.FunctionType(ty, [ty, ty]), name=_scalar_name(suffix))
        variants = []
        for lanes in _lanes(suffix):
            vty = ir.VectorType(ty, lanes)
            name = f"{_scalar_name(suffix)}.v{lanes}"
            fn = ir.Function(module, ir.FunctionType(vty, [vty, vty]), name=name)
            _pure(fn)
            used.append(fn.bitcast(i8p))
            variants.append(f"_ZGV_LLVM_N{lanes}vv_{scalar.name}({name})")
        _pure(scalar)
        set.add(scalar.attributes, f'"vector-function-abi-variant"="{",".join(variants)}"')
    kept = ir.GlobalVariable(module, ir.ArrayType(i8p, len(used)), "llvm.compiler.used")
    kept.linkage = "appending"
    kept.section = "llvm.metadata"
    kept.initializer = ir.Constant(ir.ArrayType(i8p, len(used)), used)


def _pure(fn: ir.Function) -> None:
    for attribute in ("nounwind", "memory(none)", "willreturn"):
        set.add(fn.attributes, attribute)


def scalef(em: Any, y: ir.Value, n: ir.Value) -> ir.Value:
    """y * 2^floor(n), rounded once, for float/double registers y and n (see `available`)."""
    module = em.module
    suffix = "f64" if isinstance(y.type, ir.DoubleType) else "f32"
    if _scalar_name(suffix) not in module.globals:
        _declare_all(module)
    return em.b.call(module.globals[_scalar_name(suffix)], [y, n])


def _library_text() -> str:
    """The definitions: each vector version one AVX-512 intrinsic, the scalar one its
    lowest-lane (`ss`/`sd`) form."""
    lines = [f'target triple = "{target.triple_and_layout()[0]}"']
    for suffix, (ty, kind, width, mask) in _TYPES.items():
        name = _scalar_name(suffix)
        v4 = f"<{128 // width} x {ty}>"
        one = f"llvm.x86.avx512.mask.scalef.s{kind[1]}"
        lines += [
            f"declare {v4} @{one}({v4}, {v4}, {v4}, i8, i32)",
            f'define available_externally {ty} @"{name}"({ty} %y, {ty} %n) #0 {{',
            f"  %vy = insertelement {v4} undef, {ty} %y, i32 0",
            f"  %vn = insertelement {v4} undef, {ty} %n, i32 0",
            f"  %r = call {v4} @{one}({v4} %vy, {v4} %vn, {v4} %vy, i8 -1, i32 4)",
            f"  %s = extractelement {v4} %r, i32 0",
            f"  ret {ty} %s", "}"]
        for lanes in _lanes(suffix):
            vty = f"<{lanes} x {ty}>"
            bits = lanes * width
            intrinsic = f"llvm.x86.avx512.mask.scalef.{kind}.{bits}"
            lane_mask = mask if bits == 512 else "i8"
            rounding = ", i32 4" if bits == 512 else ""
            lines += [
                f"declare {vty} @{intrinsic}({vty}, {vty}, {vty}, {lane_mask}"
                f"{', i32' if bits == 512 else ''})",
                f'define available_externally {vty} @"{name}.v{lanes}"({vty} %y, {vty} %n) #0 {{',
                f"  %r = call {vty} @{intrinsic}({vty} %y, {vty} %n, {vty} %y, {lane_mask} -1"
                f"{rounding})",
                f"  ret {vty} %r", "}"]
    lines.append("attributes #0 = { alwaysinline nounwind memory(none) willreturn }")
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
