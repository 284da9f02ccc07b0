"""W9: a 2-block transformer language-model training step (pre-norm attention + GELU MLP,
causal mask, tied embeddings, cross-entropy, Adam), the same model written for fgrad and
for JAX. bench/cold_start.py times its first call in a fresh process (cold and warm cache),
run.py its steady-state step.

In: nothing (sizes are fixed below). Out: `w9_factories()`: contender -> factory (see
bench/mlp.py); a factory builds the data and the jitted step and returns a call that runs
one step and waits for its results.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import fgrad
from fgrad import Tensor
from harness import available, fgrad_backends, fgrad_place, fgrad_sync
from mlp import ADAM_EPS, B1, B2, LR, Factory, _feedback

BATCH, SEQ, DIM, HEADS, HIDDEN, VOCAB, BLOCKS = 8, 64, 128, 4, 512, 256, 2
EPS = 1e-5


def data() -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """Parameters (name -> float32 array), tokens, next-token targets and the causal mask
    (0 where a position may look, -1e9 where it may not)."""
    rng = np.random.default_rng(0)

    def dense(fan_in: int, fan_out: int) -> np.ndarray:
        return (rng.standard_normal((fan_in, fan_out)) * fan_in ** -0.5).astype(np.float32)
    params = {"embed": dense(VOCAB, DIM) * 8, "pos": dense(SEQ, DIM) * 0.1,
              "norm_g": np.ones(DIM, np.float32), "norm_b": np.zeros(DIM, np.float32)}
    for i in range(BLOCKS):
        params |= {f"b{i}_ln1_g": np.ones(DIM, np.float32),
                   f"b{i}_ln1_b": np.zeros(DIM, np.float32),
                   f"b{i}_qkv": dense(DIM, 3 * DIM), f"b{i}_out": dense(DIM, DIM),
                   f"b{i}_ln2_g": np.ones(DIM, np.float32),
                   f"b{i}_ln2_b": np.zeros(DIM, np.float32),
                   f"b{i}_w1": dense(DIM, HIDDEN), f"b{i}_c1": np.zeros(HIDDEN, np.float32),
                   f"b{i}_w2": dense(HIDDEN, DIM), f"b{i}_c2": np.zeros(DIM, np.float32)}
    tokens = rng.integers(0, VOCAB, (BATCH, SEQ + 1)).astype(np.int32)
    mask = np.triu(np.full((SEQ, SEQ), -1e9, np.float32), k=1)
    return params, tokens[:, :-1], tokens[:, 1:], mask


# ----------------------------------------------------------------- fgrad

def fgrad_loss(p: dict[str, Tensor], tokens: Tensor, targets: Tensor, mask: Tensor) -> Tensor:
    """Mean next-token cross-entropy of the model (fgrad Tensors)."""
    x = tokens.one_hot(VOCAB).float() @ p["embed"] + p["pos"]
    for i in range(BLOCKS):
        h = x.layernorm(-1, eps=EPS) * p[f"b{i}_ln1_g"] + p[f"b{i}_ln1_b"]
        heads = (h @ p[f"b{i}_qkv"]).reshape(BATCH, SEQ, 3, HEADS, DIM // HEADS)
        q, k, v = (heads[:, :, j].permute(0, 2, 1, 3) for j in range(3))
        att = (q @ k.transpose(-1, -2) * (DIM // HEADS) ** -0.5 + mask).softmax(-1)
        mixed = (att @ v).permute(0, 2, 1, 3).reshape(BATCH, SEQ, DIM)
        x = x + mixed @ p[f"b{i}_out"]
        h = x.layernorm(-1, eps=EPS) * p[f"b{i}_ln2_g"] + p[f"b{i}_ln2_b"]
        x = x + (h @ p[f"b{i}_w1"] + p[f"b{i}_c1"]).gelu() @ p[f"b{i}_w2"] + p[f"b{i}_c2"]
    h = x.layernorm(-1, eps=EPS) * p["norm_g"] + p["norm_b"]
    logits = h @ p["embed"].transpose(0, 1)
    return -(logits.log_softmax(-1) * targets.one_hot(VOCAB).float()).sum(-1).mean()


def fgrad_step(p: dict[str, Tensor], m: dict[str, Tensor], v: dict[str, Tensor], t: Tensor,
               tokens: Tensor, targets: Tensor, mask: Tensor) -> tuple[Any, ...]:
    """One Adam step (written out, as in the JAX version)."""
    loss, grads = fgrad.value_and_grad(fgrad_loss)(p, tokens, targets, mask)
    t = t + 1
    c1, c2 = 1 - B1 ** t, 1 - B2 ** t
    m = {k: B1 * m[k] + (1 - B1) * grads[k] for k in p}
    v = {k: B2 * v[k] + (1 - B2) * grads[k] * grads[k] for k in p}
    p = {k: p[k] - LR * (m[k] / c1) / ((v[k] / c2).sqrt() + ADAM_EPS) for k in p}
    return p, m, v, t, loss


# ----------------------------------------------------------------- JAX

def jax_loss(p: dict[str, Any], tokens: Any, targets: Any, mask: Any) -> Any:
    """The same loss in jax.numpy."""
    import jax
    import jax.numpy as jnp

    def norm(x: Any, g: Any, b: Any) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + EPS) * g + b
    x = jax.nn.one_hot(tokens, VOCAB) @ p["embed"] + p["pos"]
    for i in range(BLOCKS):
        h = norm(x, p[f"b{i}_ln1_g"], p[f"b{i}_ln1_b"])
        heads = (h @ p[f"b{i}_qkv"]).reshape(BATCH, SEQ, 3, HEADS, DIM // HEADS)
        q, k, v = (heads[:, :, j].transpose(0, 2, 1, 3) for j in range(3))
        att = jax.nn.softmax(q @ k.swapaxes(-1, -2) * (DIM // HEADS) ** -0.5 + mask, -1)
        mixed = (att @ v).transpose(0, 2, 1, 3).reshape(BATCH, SEQ, DIM)
        x = x + mixed @ p[f"b{i}_out"]
        h = norm(x, p[f"b{i}_ln2_g"], p[f"b{i}_ln2_b"])
        x = x + jax.nn.gelu(h @ p[f"b{i}_w1"] + p[f"b{i}_c1"]) @ p[f"b{i}_w2"] \
            + p[f"b{i}_c2"]
    logits = norm(x, p["norm_g"], p["norm_b"]) @ p["embed"].T
    return -(jax.nn.log_softmax(logits, -1) * jax.nn.one_hot(targets, VOCAB)).sum(-1).mean()


def jax_step(p: dict[str, Any], m: dict[str, Any], v: dict[str, Any], t: Any, tokens: Any,
             targets: Any, mask: Any) -> tuple[Any, ...]:
    """One Adam step in jax.numpy."""
    import jax
    loss, grads = jax.value_and_grad(jax_loss)(p, tokens, targets, mask)
    t = t + 1
    c1, c2 = 1 - B1 ** t, 1 - B2 ** t
    m = {k: B1 * m[k] + (1 - B1) * grads[k] for k in p}
    v = {k: B2 * v[k] + (1 - B2) * grads[k] * grads[k] for k in p}
    p = {k: p[k] - LR * (m[k] / c1) / (jax.numpy.sqrt(v[k] / c2) + ADAM_EPS) for k in p}
    return p, m, v, t, loss


# ----------------------------------------------------------------- factories

def w9_factories() -> dict[str, Factory]:
    """W9: the transformer training step, per contender present (JAX and fgrad)."""
    params, tokens, targets, mask = data()
    out: dict[str, Factory] = {}
    if available("jax"):
        def jax_call() -> Callable[[], Any]:
            import jax
            jp = {k: jax.numpy.asarray(a) for k, a in params.items()}
            zeros = {k: jax.numpy.zeros_like(a) for k, a in jp.items()}
            carry = [jp, zeros, dict(zeros), jax.numpy.float32(0)]
            args = [jax.numpy.asarray(a) for a in (tokens, targets, mask)]
            call = _feedback(jax.jit(jax_step), carry, *args)
            return lambda: jax.block_until_ready((call(), carry))
        out["jax"] = jax_call
    for backend in fgrad_backends():
        out[f"fgrad-{backend}"] = _fgrad_w9(backend, params, tokens, targets, mask)
    return out


def _fgrad_w9(backend: str, params: dict[str, np.ndarray], *arrays: np.ndarray) -> Factory:
    def build() -> Callable[[], Any]:
        p = {k: Tensor(a) for k, a in params.items()}
        zeros = {k: Tensor(np.zeros_like(a)) for k, a in params.items()}
        carry = fgrad_place(backend, [p, zeros, dict(zeros), Tensor(np.float32(0))])
        args = fgrad_place(backend, [Tensor(a) for a in arrays])
        call = _feedback(fgrad.jit(fgrad_step, backend=backend), carry, *args)
        return lambda: fgrad_sync((call(), carry))
    return build
