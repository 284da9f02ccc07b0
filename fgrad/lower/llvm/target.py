"""The host as LLVM sees it: CPU name, features, and the vector width kernels are built for.

LLVM's X86 tuning for several AVX-512 CPUs (Skylake-X, Ice Lake, Sapphire Rapids, the
generic x86-64-v4) carries `prefer-256-bit`: the vectorizers then stop at 256-bit vectors
although 512-bit registers exist. fgrad's kernels are long streaming loops where the wider
vectors pay, so on a CPU with AVX-512F that tuning is switched off and the loop vectorizer
uses the full 512 bits (AMD's Zen 4/5 tuning already prefers 512).
"""
from __future__ import annotations

import functools

import llvmlite.binding as llvm


@functools.cache
def _initialized() -> bool:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    return True


def cpu_name() -> str:
    """The host CPU's name in LLVM's terms (e.g. "znver4")."""
    _initialized()
    return llvm.get_host_cpu_name()


def features_for(host_features: str) -> str:
    """The feature string fgrad compiles with, from the host's (comma-separated "+f,-g"):
    the host's own, with `-prefer-256-bit` added where AVX-512F is present."""
    flags = [f for f in host_features.split(",") if f]
    if "+avx512f" in flags:
        flags = [f for f in flags if f.lstrip("+-") != "prefer-256-bit"] + ["-prefer-256-bit"]
    return ",".join(flags)


@functools.cache
def features() -> str:
    """The feature string of the host's target machines (see `features_for`)."""
    _initialized()
    return features_for(llvm.get_host_cpu_features().flatten())


def vector_bits(feature_string: str | None = None) -> int:
    """The widest float vector fgrad's kernels are built for on a CPU with these features
    (default: the host): 512 with AVX-512F, 256 with AVX, else 128 (SSE/NEON)."""
    flags = set((features() if feature_string is None else feature_string).split(","))
    if "+avx512f" in flags:
        return 512
    return 256 if "+avx" in flags else 128


def new_machine(opt: int = 3, jit: bool = True) -> llvm.TargetMachine:
    """A fresh target machine for the host: native CPU, `features()`, optimization `opt`."""
    _initialized()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=cpu_name(), features=features(), opt=opt,
                                        jit=jit)


@functools.cache
def triple_and_layout() -> tuple[str, str]:
    """The host's target triple and data layout string (for modules built by hand)."""
    machine = new_machine()
    return machine.triple, str(machine.target_data)
