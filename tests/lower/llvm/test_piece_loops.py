"""A concatenate along an outer axis renders one loop per piece (each element computes only
its own piece), checked in the generated IR and against NumPy."""
import re

import numpy as np
from llvmlite import ir

import fgrad
from fgrad import Tensor
from fgrad.lower.llvm.kernels.render import render_kernel
from fgrad.lower.llvm.runtime import module_ir, plan
from fgrad.transforms.jit_prim import open_jaxpr


def _concat(a, b, c):
    return Tensor.cat(a.exp(), b * 2, c.sqrt(), dim=1) + 1


def test_outer_concatenate_is_one_loop_per_piece():
    rng = np.random.default_rng(0)
    args = [rng.random((4, n, 64)).astype(np.float32) for n in (3, 1, 5)]
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(_concat)(*map(Tensor, args)))
    (kernel,) = plan(jaxpr).kernels
    module = ir.Module()
    text = str(render_kernel(module, kernel))
    axis = kernel.body[0].body[0].sym.name          # the concatenated axis' loop
    assert len(re.findall(rf'%"{axis}(\.\d+)?" = phi', text)) == 3   # three loops
    out = fgrad.jit(_concat)(*map(Tensor, args)).numpy()
    want = np.concatenate([np.exp(args[0]), args[1] * 2, np.sqrt(args[2])], axis=1) + 1
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_innermost_concatenate_keeps_its_selects():
    a, b = Tensor(np.ones((8, 3), np.float32)), Tensor(np.zeros((8, 5), np.float32))
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(lambda a, b: Tensor.cat(a, b, dim=1) * 3)(a, b))
    text = str(module_ir(plan(jaxpr)))
    assert "select" in text
    out = fgrad.jit(lambda a, b: Tensor.cat(a, b, dim=1) * 3)(a, b).numpy()
    np.testing.assert_array_equal(out, np.concatenate([np.ones((8, 3)), np.zeros((8, 5))], 1) * 3)


def test_innermost_concatenate_of_long_pieces_is_one_loop_per_piece():
    a = np.arange(8 * 32, dtype=np.float32).reshape(8, 32)
    b = -np.arange(8 * 48, dtype=np.float32).reshape(8, 48)
    fn = lambda a, b: Tensor.cat(a, b, dim=1) * 3   # noqa: E731
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(Tensor(a), Tensor(b)))
    (kernel,) = plan(jaxpr).kernels
    text = str(render_kernel(ir.Module(), kernel))
    assert "select" not in text
    out = fgrad.jit(fn)(Tensor(a), Tensor(b)).numpy()
    np.testing.assert_array_equal(out, np.concatenate([a, b], 1) * 3)


def _stacked(q, k, v):
    return Tensor.stack(q.exp(), k * 2, v.sqrt(), dim=2).reshape(2, 8, 3 * 64) + 1


def test_pieces_by_quotient_fold_the_quotient():
    """stack-then-flatten selects its operand by i // 64: three loops, each reading only its
    own operand with the quotient folded (no division, remainder or select on i)."""
    rng = np.random.default_rng(1)
    args = [rng.random((2, 8, 64)).astype(np.float32) for _ in range(3)]
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(_stacked)(*map(Tensor, args)))
    (kernel,) = plan(jaxpr).kernels
    text = str(render_kernel(ir.Module(), kernel))
    assert len(re.findall(r'%"i2(\.\d+)?" = phi', text)) == 3
    assert "udiv" not in text and "urem" not in text
    assert text.count('call float @"llvm.sqrt.f32"') == 1   # each operand is read in its piece only
    out = fgrad.jit(_stacked)(*map(Tensor, args)).numpy()
    want = np.stack([np.exp(args[0]), args[1] * 2, np.sqrt(args[2])], 2).reshape(2, 8, 192) + 1
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_stacked_pieces_gradient_matches_numpy():
    rng = np.random.default_rng(2)
    args = [rng.random((2, 8, 64)).astype(np.float32) + 0.5 for _ in range(3)]
    weight = rng.random((2, 8, 192)).astype(np.float32)
    grads = fgrad.jit(fgrad.grad(lambda q, k, v: (_stacked(q, k, v) * Tensor(weight)).sum(),
                                 argnums=(0, 1, 2)))(*map(Tensor, args))
    w = weight.reshape(2, 8, 3, 64)
    want = [w[:, :, 0] * np.exp(args[0]), w[:, :, 1] * 2, w[:, :, 2] * 0.5 / np.sqrt(args[2])]
    for got, expected in zip(grads, want):
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)


def _split_heads_loss(qkv, w):
    q, k, v = (t.reshape(2, 16, 4, 32).permute(0, 2, 1, 3) for t in qkv.chunk(3, dim=-1))
    return (q * w[0]).sum() + (k.exp() * w[1]).sum() + (v * v * w[2]).sum()


def test_innermost_loop_read_by_quotient_is_tiled():
    """The gradient of a q/k/v head split writes the 384-wide row from [3, b, head, t, 32]
    arrays: one loop per 128-wide piece, each a loop over the head (i // 32) around a
    contiguous one over i % 32, with no division or remainder left."""
    rng = np.random.default_rng(3)
    qkv = rng.random((2, 16, 384)).astype(np.float32)
    w = rng.random((3, 2, 4, 16, 32)).astype(np.float32)
    grad = fgrad.grad(_split_heads_loss)
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(grad)(Tensor(qkv), Tensor(w)))
    (kernel,) = plan(jaxpr).kernels
    text = str(render_kernel(ir.Module(), kernel))
    assert "udiv" not in text and "urem" not in text
    assert len(re.findall(r'%"i\d\.q(\.\d+)?" = phi', text)) == 3
    assert len(re.findall(r'%"i\d\.r(\.\d+)?" = phi', text)) == 3
    got = fgrad.jit(grad)(Tensor(qkv), Tensor(w)).numpy()
    heads = qkv.reshape(2, 16, 3, 4, 32).transpose(2, 0, 3, 1, 4)
    want = np.stack([w[0], w[1] * np.exp(heads[1]), 2 * heads[2] * w[2]])
    want = want.transpose(1, 3, 0, 2, 4).reshape(2, 16, 384)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_tiled_pieces_of_a_head_split_gradient():
    """The gradient of a q/k/v head split: pieces by i // 128 of the fused 384-wide row,
    each tiled by the 32-wide head (against NumPy's own slicing and transposes)."""
    rng = np.random.default_rng(4)
    qkv = rng.random((2, 16, 384)).astype(np.float32)
    weight = rng.random((3, 2, 4, 16, 32)).astype(np.float32)

    def loss(qkv):
        heads = qkv.reshape(2, 16, 3, 4, 32).permute(2, 0, 3, 1, 4)
        return (heads * Tensor(weight)).sum()
    got = fgrad.jit(fgrad.grad(loss))(Tensor(qkv)).numpy()
    want = weight.transpose(1, 3, 0, 2, 4).reshape(2, 16, 384)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def _mixed_quotients(a, c, d, e):
    x = a.reshape(2, 4, 1).expand(2, 4, 64).reshape(2, 256)       # reads a[i // 64]
    y = c.reshape(2, 16, 1).expand(2, 16, 16).reshape(2, 256)     # reads c[i // 16]
    z = d.permute(0, 2, 1).reshape(2, 256)                        # reads d[i % 16, i // 16]
    return Tensor.cat(x + y + z, e, dim=1)


def test_tiles_inside_pieces_with_several_divisors():
    rng = np.random.default_rng(5)
    args = [rng.random(s).astype(np.float32) for s in ((2, 4), (2, 16), (2, 16, 16), (2, 64))]
    jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(_mixed_quotients)(*map(Tensor, args)))
    (kernel,) = plan(jaxpr).kernels
    text = str(render_kernel(ir.Module(), kernel))
    assert len(re.findall(r'%"i\d\.r(\.\d+)?" = phi', text)) == 2   # both pieces tiled by 16
    got = fgrad.jit(_mixed_quotients)(*map(Tensor, args)).numpy()
    a, c, d, e = args
    want = (np.repeat(a, 64, axis=1) + np.repeat(c, 16, axis=1)
            + d.transpose(0, 2, 1).reshape(2, 256))
    np.testing.assert_allclose(got, np.concatenate([want, e], 1), rtol=1e-6)


def test_long_rows_split_off_short_pieces():
    """A roll or an odd pad along a long row: the few iterations of the short pieces run as
    loops of their own and the long piece reads its operand plainly (no clamp, no select);
    results are NumPy's."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 1000)).astype(np.float32)
    cases = [(lambda t: t.roll(3, 1), np.roll(x, 3, 1)),
             (lambda t: t.pad((1, 2)) * 2, np.pad(x, ((0, 0), (1, 2))) * 2),
             (lambda t: t.pad((15, 0)) + 1, np.pad(x, ((0, 0), (15, 0))) + 1)]
    for fn, want in cases:
        jaxpr, _ = open_jaxpr(fgrad.make_jaxpr(fn)(Tensor(x)))
        (kernel,) = plan(jaxpr).kernels
        text = str(render_kernel(ir.Module(), kernel))
        axis = kernel.body[0].body[0].sym.name
        assert len(re.findall(rf'%"{axis}(\.\d+)?" = phi', text)) >= 2
        np.testing.assert_array_equal(fgrad.jit(fn)(Tensor(x)).numpy(), want)
