"""The vector width of generated loops: the host's widest (512 bits with AVX-512F), read from
the optimized LLVM IR of a fused elementwise kernel."""
from __future__ import annotations

import re

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvm_helpers import w1

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import target
from fgrad.lower.llvm.runtime import module_ir, optimized_ir, plan
from fgrad.transforms.jit_prim import open_jaxpr

SKYLAKE_X = "+sse4.2,+avx,+avx2,+fma,+f16c,+avx512f,+avx512vl,+avx512bw,+avx512dq,+evex512"


def _program() -> object:
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(w1)(Tensor(np.ones(1 << 16, np.float32))))
    return plan(jaxpr)


def _widest_float_vector(ir_text: str) -> int:
    """Bits of the widest `<N x float>` vector in an IR text's code (32 when there is none;
    declarations, such as those of `vector_calls`' every width, do not count)."""
    code = "\n".join(line for line in ir_text.splitlines()
                     if not line.startswith(("declare", "@llvm.compiler.used")))
    return 32 * max([int(n) for n in re.findall(r"<(\d+) x float>", code)] or [1])


def _optimized_for(cpu: str, features: str) -> str:
    """The W1 program's IR optimized for another x86 CPU (no code is run)."""
    machine = llvm.Target.from_default_triple().create_target_machine(
        cpu=cpu, features=features, opt=3)
    module = llvm.parse_assembly(str(module_ir(_program())))
    tuning = llvm.create_pipeline_tuning_options(speed_level=3)
    tuning.loop_vectorization = True
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)
    return str(module)


def test_host_loops_use_the_widest_vectors_of_the_host():
    bits = target.vector_bits()
    host = set(target.features().split(","))
    assert bits == (512 if "+avx512f" in host else 256 if "+avx" in host else 128)
    assert _widest_float_vector(optimized_ir(_program())) == bits


def test_avx512_cpus_get_512_bit_loops_despite_llvms_256_bit_tuning():
    if not llvm.Target.from_default_triple().name.startswith("x86"):
        pytest.skip("x86 targets only")
    assert _widest_float_vector(_optimized_for("skylake-avx512", SKYLAKE_X)) == 256
    chosen = target.features_for(SKYLAKE_X)
    assert chosen.endswith(",-prefer-256-bit") and target.vector_bits(chosen) == 512
    assert _widest_float_vector(_optimized_for("skylake-avx512", chosen)) == 512


def test_features_without_avx512_are_left_as_the_host_gives_them():
    assert target.features_for("+avx,+avx2,-prefer-256-bit") == "+avx,+avx2,-prefer-256-bit"
    assert target.features_for("+avx512f,+prefer-256-bit") == "+avx512f,-prefer-256-bit"
    assert target.vector_bits("+sse2") == 128


def test_w1_kernel_is_fused_multiply_add_interleaved_and_free_of_libm_calls():
    program = _program()
    before = str(module_ir(program))
    assert "llvm.fmuladd" in before                       # exp/expm1 polynomials
    assert '!"llvm.loop.interleave.count", i32 2' in before
    after = optimized_ir(program)
    assert not re.search(r"call \S+ @(exp|tanh|expm1)f?\(", after)   # no scalar libm
    assert re.search(r"@llvm\.fmuladd\.v\d+f32", after)     # vectorized; FMA where the CPU has it


def test_logistic_divides_once():
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda x: x.sigmoid())(
        Tensor(np.ones(256, np.float32))))
    text = str(module_ir(plan(jaxpr)))
    assert text.count("fdiv") == 1


@pytest.mark.parametrize("fn, count", [
    (lambda x: x * 0.9 + 0.1, 1),              # bound by memory: one vector per trip
    (lambda x: (x * 0.9).exp(), 2),            # a polynomial's dependency chain: two
    (lambda x: x.reshape(64, 256).sum(-1), 2),  # a reduction's accumulator chain: two
])
def test_innermost_loops_interleave_only_latency_bound_work(fn, count):
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(Tensor(np.ones(1 << 14, np.float32))))
    text = str(module_ir(plan(jaxpr)))
    assert re.findall(r'!"llvm.loop.interleave.count", i32 (\d)', text) == [str(count)]
