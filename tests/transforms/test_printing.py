"""make_jaxpr of grad(f) and vmap(f) prints readable jaxprs: pinned golden text, plus a
check that each printed program computes the right values (so the pin is a correct one)."""
from __future__ import annotations

import textwrap
from typing import Any, Callable

import numpy as np
import pytest

import fgrad
from fgrad import Tensor
from fgrad.core.staging import eval_jaxpr

RNG = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape).astype(np.float32)


GRAD_SIN = textwrap.dedent("""\
    { lambda ; a:f32[3]. let
        b:f32[3] = sin a
        c:f32[3] = cos a
        d:f32[3] = broadcast_in_dim[shape=(3,), broadcast_dimensions=()] 1.0:f32[]
        e:f32[3] = mul b d
        f:f32[3] = mul d a
        g:f32[3] = mul f c
        h:f32[3] = add e g
      in (h,) }""")

GRAD_TANH = textwrap.dedent("""\
    { lambda ; a:f32[] b:f32[3]. let
        c:f32[3] = broadcast_in_dim[shape=(3,), broadcast_dimensions=()] a
        d:f32[3] = mul c b
        e:f32[3] = tanh d
        f:f32[3] = mul e e
        g:f32[3] = broadcast_in_dim[shape=(3,), broadcast_dimensions=()] 1.0:f32[]
        h:f32[3] = sub g f
        i:f32[3] = broadcast_in_dim[shape=(3,), broadcast_dimensions=()] 1.0:f32[]
        j:f32[3] = mul i h
        k:f32[3] = mul j b
        l:f32[] = reduce_sum[axes=(0,)] k
      in (l,) }""")

VMAP_DOT = textwrap.dedent("""\
    { lambda ; a:f32[2,3] b:f32[2,3]. let
        c:f32[2,3] = mul a b
        d:f32[2] = reduce_sum[axes=(1,)] c
      in (d,) }""")

VMAP_SOFTMAX_COLUMNS = textwrap.dedent("""\
    { lambda ; a:f32[2,3]. let
        b:f32[2,3] = exp a
        c:f32[2,3] = exp a
        d:f32[3,2] = transpose[permutation=(1, 0)] c
        e:f32[3] = reduce_sum[axes=(1,)] d
        f:f32[3,2] = broadcast_in_dim[shape=(3, 2), broadcast_dimensions=(0,)] e
        g:f32[3,2] = transpose[permutation=(1, 0)] b
        h:f32[3,2] = div g f
        i:f32[2,3] = transpose[permutation=(1, 0)] h
      in (i,) }""")


def _softmax_columns(x: np.ndarray) -> np.ndarray:
    return np.exp(x) / np.exp(x).sum(0, keepdims=True)


CASES: dict[str, tuple[Callable[..., Any], list[np.ndarray], str, Callable[..., Any]]] = {
    "grad-sin": (fgrad.grad(lambda x: (x.sin() * x).sum()), [f32(3)], GRAD_SIN,
                 lambda x: np.sin(x) + x * np.cos(x)),
    "grad-tanh": (fgrad.grad(lambda w, x: (w * x).tanh().sum()), [f32(), f32(3)], GRAD_TANH,
                  lambda w, x: ((1 - np.tanh(w * x) ** 2) * x).sum()),
    "vmap-dot": (fgrad.vmap(lambda x, y: (x * y).sum()), [f32(2, 3), f32(2, 3)], VMAP_DOT,
                 lambda x, y: (x * y).sum(1)),
    "vmap-softmax-columns": (fgrad.vmap(lambda r: r.exp() / r.exp().sum(), in_axes=1,
                                        out_axes=1),
                             [f32(2, 3)], VMAP_SOFTMAX_COLUMNS, _softmax_columns),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_printed_jaxpr_is_pinned(name: str) -> None:
    fn, args, golden, _ = CASES[name]
    closed = fgrad.make_jaxpr(fn)(*[Tensor(a) for a in args])
    assert str(closed) == golden, f"\n--- got ---\n{closed}\n--- want ---\n{golden}"
    assert repr(closed) == golden


@pytest.mark.parametrize("name", sorted(CASES))
def test_printed_jaxpr_computes_the_right_values(name: str) -> None:
    fn, args, _, reference = CASES[name]
    closed = fgrad.make_jaxpr(fn)(*[Tensor(a) for a in args])
    (out,) = eval_jaxpr(closed.jaxpr, closed.consts, [Tensor(a) for a in args])
    want = reference(*[a.astype(np.float64) for a in args])
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fn(*[Tensor(a) for a in args]).numpy(), want, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("fn", [
    lambda x: fgrad.lax.scan(lambda c, r: (c + r.sum(), c * r), 0.0, x),
    lambda x: fgrad.lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: v - 1, x),
    fgrad.grad(lambda x: fgrad.jit(lambda y: (y * y + 1.0).sum())(x)),
])
def test_naming_without_printing_gives_the_printed_names(fn: Callable[..., Any]) -> None:
    """`name_vars` (what the schedule names kernel parameters with) assigns every variable,
    nested jaxprs' included, the name the printed jaxpr shows."""
    from fgrad.core import ir
    jaxpr = fgrad.make_jaxpr(fn)(Tensor(f32(4, 3))).jaxpr
    printed, named = ir._Names(), ir._Names()
    text = ir._pp(jaxpr, printed, 0)
    ir.name_vars(jaxpr, named)
    assert named.names == printed.names and len(named.names) > 6
    assert all(f"{name}:" in text for name in named.names.values())
