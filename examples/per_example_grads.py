"""Per-example gradient norms with `vmap(grad(loss))`, as used for DP-SGD-style clipping.

    python examples/per_example_grads.py [--smoke]

Computes every example's gradient of a small MLP's loss in one batched call, clips each to a
maximum norm, and checks the result against a Python loop of ordinary `grad` calls.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import fgrad
from fgrad import Tensor


def init_params(key: Tensor, sizes: list[int]) -> dict[str, Tensor]:
    """A dict of weights and biases for an MLP with the given layer sizes."""
    keys = fgrad.random.split(key, len(sizes))
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"w{i}"] = fgrad.random.normal(keys[i], (fan_in, fan_out)) * fan_in ** -0.5
        params[f"b{i}"] = Tensor.zeros(fan_out)
    return params


def loss(params: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
    """Cross-entropy of one example (x: features, y: class index)."""
    h = x
    layers = len(params) // 2
    for i in range(layers):
        h = h @ params[f"w{i}"] + params[f"b{i}"]
        if i < layers - 1:
            h = h.tanh()
    return -h.log_softmax()[y]


def global_norms(grads: dict[str, Tensor]) -> Tensor:
    """The L2 norm of each example's whole gradient (leading axis = example)."""
    total = sum((g.reshape(g.shape[0], -1) ** 2).sum(axis=1) for g in grads.values())
    return total.sqrt()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    batch, features = (8, 16) if args.smoke else (128, 64)
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((batch, features)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, batch).astype(np.int32))
    params = init_params(fgrad.random.key(0), [features, 32, 10])

    per_example = fgrad.jit(fgrad.vmap(fgrad.grad(loss), in_axes=(None, 0, 0)))
    start = time.perf_counter()
    grads = per_example(params, x, y)
    norms = global_norms(grads)
    batched_s = time.perf_counter() - start

    start = time.perf_counter()
    loop_norms = []
    for i in range(batch):
        g = fgrad.grad(loss)(params, x[i], y[i])
        loop_norms.append(float(sum((v ** 2).sum() for v in g.values()).sqrt()))
    loop_s = time.perf_counter() - start

    max_diff = float(np.abs(norms.numpy() - np.array(loop_norms)).max())
    clip = 1.0
    scale = (clip / norms).minimum(1.0)
    clipped = {k: g * scale.reshape((-1,) + (1,) * (g.ndim - 1)) for k, g in grads.items()}
    print(f"per-example gradient norms (first 5): {np.round(norms.numpy()[:5], 4)}")
    print(f"after clipping to {clip}: max norm {float(global_norms(clipped).max()):.4f}")
    print(f"vmap(grad): {batched_s * 1e3:.1f} ms (incl. tracing); loop of grad: "
          f"{loop_s * 1e3:.1f} ms; max |difference| = {max_diff:.2e}")
    assert max_diff < 1e-4, "vmap(grad) disagrees with the loop"


if __name__ == "__main__":
    main()
