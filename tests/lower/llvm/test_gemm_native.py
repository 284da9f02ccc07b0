"""fgrad's own GEMM (llvm/gemm/native.py): the tile chosen for the host's vector width, the
generated micro-kernel, the OpenBLAS switch, and results against NumPy on both paths."""
from __future__ import annotations

import re

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm import target
from fgrad.lower.llvm.gemm.native import K_UNROLL, ROUTINES_VERSION, tile_shape
from fgrad.lower.llvm.runtime import module_ir, plan
from fgrad.transforms.jit_prim import open_jaxpr

RNG = np.random.default_rng(3)


def _module_text(m: int, n: int, k: int, dtype: type = np.float32) -> str:
    a, b = Tensor(np.ones((m, k), dtype)), Tensor(np.ones((k, n), dtype))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda x, y: x @ y)(a, b))
    return str(module_ir(plan(jaxpr)))


def test_tile_follows_the_vector_width():
    assert tile_shape(4, 256) == (6, 16, 8)      # AVX2: 12 ymm accumulators
    assert tile_shape(8, 256) == (6, 8, 4)
    assert tile_shape(4, 512) == (12, 32, 16)    # AVX-512: 24 zmm accumulators of 32
    assert tile_shape(4, 128) == (6, 8, 4)       # SSE / NEON


def test_micro_kernel_is_broadcast_fma_at_the_host_width():
    from fgrad.lower.llvm.gemm.driver import routine_texts
    mr, nr, lanes = tile_shape(4)
    part, shared = routine_texts("float32")[0]
    assert part == "micro"
    micro = shared[re.search(r'define void @"fgrad_gemm\d+_f32_\d+x\d+_micro"', shared).start():]
    micro = micro[:micro.index("\n}")]
    # the main loop does K_UNROLL k steps per trip, the remainder loop one; a tile of at
    # most MR / 2 rows has its own pair of loops over MR / 2 rows
    assert micro.count(f'call <{lanes} x float> @"llvm.fma.v{lanes}f32"') == \
        (K_UNROLL + 1) * (mr + mr // 2) * nr // lanes
    assert f"_f32_{mr}x{nr}_" in micro
    # one call per column of tiles: the micro-kernel loops over the column's row tiles
    assert re.search(r'^ir\.head:', micro, re.M)
    tiles = shared[shared.index('_tiles"('):]
    assert tiles.count("_micro\"(") == 1 and "ir.head" not in tiles
    with fgrad.config.override(gemm="native"):   # whatever FGRAD_GEMM says
        text = _module_text(64, 64, 64)      # a program only declares the shared routines
    assert f'declare void @"fgrad_gemm{ROUTINES_VERSION}_f32_{mr}x{nr}_driver"' in text
    assert "fgrad_sgemm" not in text and "llvm.fma" not in text      # no BLAS call


@pytest.mark.parametrize("library", ["native", "openblas"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_both_libraries_match_numpy(library, dtype):
    a = RNG.standard_normal((3, 70, 45)).astype(dtype)
    b = RNG.standard_normal((45, 33)).astype(dtype)
    with fgrad.config.override(gemm=library):
        f = fgrad.jit(lambda x, y: (x @ y, x.permute(0, 2, 1).sum(0) @ x[0]))
        out, gram = f(Tensor(a), Tensor(b))
        text = f.lower(Tensor(a), Tensor(b)).as_text()
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=tol, atol=tol)
    np.testing.assert_allclose(gram.numpy(), a.transpose(0, 2, 1).sum(0) @ a[0], rtol=tol,
                               atol=10 * tol)
    assert bool(re.search(r"fgrad_[sd]gemm", text)) == (library == "openblas")
    assert bool(re.search(r"_driver", text)) == (library == "native")


def test_unknown_library_is_refused():
    with pytest.raises(ValueError, match="'native'.*'openblas'"):
        fgrad.config.update("gemm", "mkl")


def test_host_vector_width_is_what_the_tile_uses():
    _, _, lanes = tile_shape(4)
    assert lanes * 32 == target.vector_bits()


def test_weight_gradient_of_x_at_w_transposed_is_read_contiguously():
    """grad of `x @ W.T` (nn.Linear) transposes the gemm's result twice; the pair cancels,
    so no kernel reads the gemm output through a transposed index."""
    from fgrad.lower.schedule.gemm_layout import pack_gemm_operands
    x = Tensor(RNG.standard_normal((16, 12)).astype(np.float32))
    w = Tensor(RNG.standard_normal((8, 12)).astype(np.float32))
    m = Tensor(RNG.standard_normal((8, 12)).astype(np.float32))

    def step(w, m):
        g = fgrad.grad(lambda w: (x @ w.T).tanh().sum())(w)
        return 0.9 * m + 0.1 * g, 0.9 * m + 0.1 * g * g

    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(step)(w, m))
    assert sum(e.primitive.name == "transpose" for e in jaxpr.eqns) >= 2
    packed = pack_gemm_operands(jaxpr)
    dots = {id(e.outvars[0]) for e in packed.eqns if e.primitive.name == "dot_general"}
    assert not any(e.primitive.name == "transpose" and id(e.inputs[0]) in dots
                   for e in packed.eqns)
    assert any(e.primitive.name == "transpose" and id(e.inputs[0]) in
               {id(d.outvars[0]) for d in jaxpr.eqns if d.primitive.name == "dot_general"}
               for e in jaxpr.eqns)
    first, second = fgrad.jit(step)(w, m)
    xn, wn, mn = x.numpy(), w.numpy(), m.numpy()
    g = ((1 - np.tanh(xn @ wn.T) ** 2).T @ xn)
    np.testing.assert_allclose(first.numpy(), 0.9 * mn + 0.1 * g, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(second.numpy(), 0.9 * mn + 0.1 * g * g, rtol=1e-4, atol=1e-5)


def test_a_call_site_only_copies_its_sizes_and_calls_the_shared_driver():
    """The block loops live in the shared driver (compiled once per dtype); a product's own
    code is straight-line: a copy of its sizes (m, n, k, leading dimensions, ...) from a
    constant table, and one call."""
    mr, nr, _ = tile_shape(4)
    with fgrad.config.override(gemm="native"):
        text = _module_text(70, 33, 45)
    rows = text[text.index('define internal void @"g0.rows"'):]
    rows = rows[:rows.index("\n}")]
    assert "phi" not in rows and "br " not in rows          # no loops of its own
    assert "store i64" not in rows                          # the sizes: one copy
    table = re.search(r'@"g0\.rows\.dims" = private constant \[\d+ x i64\] \[([^\]]*)\]', text)
    sizes = [int(v.split()[1]) for v in table.group(1).split(",")]
    assert sizes[:3] == [70, 33, 45]                        # m, n, k
    assert "llvm.memcpy" in rows
    assert rows.count(f'call void @"fgrad_gemm{ROUTINES_VERSION}_f32_{mr}x{nr}_driver"') == 1


def _hottest_block(assembly: str) -> list[str]:
    """The instructions of the basic block with the most FMAs (the micro-kernel's k loop)."""
    blocks, block = [], []
    for line in assembly.splitlines():
        if line.strip().endswith(":"):
            blocks.append(block)
            block = []
        elif line.startswith("\t") and not line.lstrip().startswith((".", "#")):
            block.append(line.strip())
    blocks.append(block)
    return max(blocks, key=lambda b: sum(op.startswith("vfmadd") for op in b))


def test_the_micro_kernel_needs_no_middle_end():
    """SCHEDULED skips LLVM's middle end for the micro-kernel (a quarter of its compile
    time); its k loop must come out as the full O1 pipeline makes it: the same broadcasts,
    loads and FMAs, nothing on the stack."""
    from fgrad.lower.llvm import kernel_cache
    from fgrad.lower.llvm.gemm.driver import routine_texts
    (part, micro), *_ = routine_texts("float32")
    assert part == "micro"
    fast_lines = _hottest_block(kernel_cache.assembly_of(micro, kernel_cache.SCHEDULED))
    full_lines = _hottest_block(kernel_cache.assembly_of(micro, kernel_cache.BY_HAND))
    # nothing on the stack: no %rsp operand, nor %rbp unless the loop advances it (then
    # it holds a sliver pointer, not the frame)
    rbp_is_data = any(line.endswith(", %rbp") and line.startswith("add") for line in fast_lines)
    assert not any("%rsp" in line or ("%rbp" in line and not rbp_is_data)
                   for line in fast_lines)
    fast, full = ([line.split()[0] for line in b] for b in (fast_lines, full_lines))
    mr, nr, lanes = tile_shape(4)
    for block in (fast, full):
        assert sum(op.startswith("vfmadd") for op in block) == K_UNROLL * mr * nr // lanes
    memory_ops = ("vfmadd", "vbroadcast", "vmovup", "vmovap")
    assert sorted(op for op in fast if op.startswith(memory_ops)) == \
        sorted(op for op in full if op.startswith(memory_ops))
    assert len(fast) <= len(full) + 2


def test_tile_loops_live_beside_the_micro_kernel():
    """The per-tile loops are compiled with the micro-kernel (scheduled code); the driver
    around them runs per block and compiles as glue, never calling the micro-kernel."""
    from fgrad.lower.llvm import kernel_cache
    from fgrad.lower.llvm.gemm.driver import routine_texts
    from fgrad.lower.llvm.runtime import routine_unit
    texts = dict(routine_texts("float32"))
    assert re.search(r'define void @"fgrad_gemm\d+_f32_\w+_tiles"', texts["micro"])
    assert re.search(r'call void @"fgrad_gemm\d+_f32_\w+_tiles"', texts["driver"])
    assert not re.search(r'@"fgrad_gemm\d+_f32_\w+_micro"', texts["driver"])
    assert routine_unit("driver", texts["driver"])[1] == kernel_cache.GLUE
    assert routine_unit("micro", texts["micro"])[1] == kernel_cache.SCHEDULED
