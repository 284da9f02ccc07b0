"""AVX-512 instructions reached from scalar IR through vector-function variants
(`kernels/vector_calls.py`): every declared version is defined by the library the compile
links in, loops of each width the vectorizer picks get their instruction, scalar loops get
the scalar forms, and no call or symbol of the library survives into the object code."""
from __future__ import annotations

import re

import llvmlite.binding as llvm
import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import kernel_cache, target
from fgrad.lower.llvm.kernels import vector_calls

pytestmark = pytest.mark.skipif(not vector_calls.available(),
                                reason="the host has no AVX-512 (with VL)")
RNG = np.random.default_rng(21)


def _assembly(fn, *args: Tensor) -> str:
    text = fgrad.jit(fn, backend="llvm").lower(*args).as_text()
    assert vector_calls.MARKER in text
    return kernel_cache.assembly_of(text[text.index("\n", text.index("# LLVM IR")):])


def test_the_library_defines_every_declared_version() -> None:
    """Each scalar function and each of its vector versions named in the attribute that a
    kernel's module declares has a definition in the library text, which parses."""
    module = llvm.parse_assembly(vector_calls._library_text())
    module.verify()
    defined = {f.name for f in module.functions if not f.is_declaration}
    from llvmlite import ir
    declared = ir.Module()
    declared.triple = target.triple_and_layout()[0]
    vector_calls._declare_all(declared)
    names = {f.name for f in declared.functions}
    assert names and names <= defined
    text = str(declared)
    for variant in re.findall(r"_ZGV_LLVM_N\d+v+_[\w.]+\(([\w.]+)\)", text):
        assert variant in names


def test_float32_and_float64_exps_in_one_loop() -> None:
    """A float32 exp alone vectorizes at 16 lanes (vpermps, vscalefps on zmm); beside a
    float64 exp the float64 scale is vscalefpd on zmm too, with no call left: values
    match NumPy's."""
    x = (RNG.standard_normal(4099) * 20).astype(np.float32)
    y = (RNG.standard_normal(4099) * 200).astype(np.float64)
    wide = _assembly(lambda a: a.exp(), Tensor(x))
    assert re.search(r"vpermps\s+%zmm", wide) and re.search(r"vscalefps\s+%zmm", wide)
    mixed = _assembly(lambda a, b: a.exp().cast(fgrad.dtypes.float64) + b.exp(),
                      Tensor(x), Tensor(y))
    assert re.search(r"vpermps\s+%zmm", mixed) and re.search(r"vscalefpd\s+%zmm", mixed)
    assert vector_calls.MARKER not in mixed   # inlined: no call, no symbol
    got = fgrad.jit(lambda a, b: a.exp().cast(fgrad.dtypes.float64) + b.exp())(
        Tensor(x), Tensor(y)).numpy()
    with np.errstate(over="ignore"):
        want = np.exp(x).astype(np.float64) + np.exp(y)
    np.testing.assert_allclose(got, want, rtol=4e-7)


def test_short_arrays_and_tails_use_the_scalar_forms() -> None:
    """Lengths below a vector and the tails after the vector loop run the scalar versions
    (vscalefss, a constant vector's element): every value exact to within 3 ulp."""
    for n in (1, 3, 15, 17, 33):
        x = np.linspace(-105, 88, n).astype(np.float32)
        got = fgrad.jit(lambda a: a.exp())(Tensor(x)).numpy()
        want = np.exp(x.astype(np.float64))
        unit = np.maximum(np.spacing(np.abs(want.astype(np.float32))).astype(np.float64),
                          np.finfo(np.float32).smallest_subnormal)
        assert np.max(np.abs(got - want) / unit) <= 3.0, n
