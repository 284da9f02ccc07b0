"""Benchmarks W1-W8 (see the README): fgrad next to NumPy, and JAX / PyTorch when installed.

    python bench/run.py            # full sizes
    python bench/run.py --quick    # small sizes, a smoke run

Prints one table: median milliseconds per call (of several runs, after a warm-up) and the
ratio of each fgrad backend to the fastest reference measured in the same run. Timing is
never asserted anywhere; these numbers describe this machine only.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import numpy as np

import fgrad
from fgrad import Tensor

try:  # optional anchors
    import torch
except ImportError:  # pragma: no cover
    torch = None


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of `fn()` in milliseconds, after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _backends() -> list[str]:
    from fgrad.transforms import executables
    names = ["numpy"]
    try:
        import fgrad.lower  # noqa: F401  registers "llvm" when present
    except ImportError:
        pass
    names += [b for b in ("llvm", "opencl") if b in executables.COMPILERS]
    return names


def w1(n: int) -> dict[str, Callable[[], Any]]:
    x_np = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    x = Tensor(x_np)

    def f(x: Any) -> Any:
        return (x * 1.5 + 0.5).tanh() * x.sigmoid() + (-(x * x)).exp()

    cases = {"numpy": lambda: np.tanh(x_np * 1.5 + 0.5) / (1 + np.exp(-x_np))
             + np.exp(-x_np * x_np)}
    for b in _backends():
        jf = fgrad.jit(f, backend=b)
        cases[f"fgrad-{b}"] = lambda jf=jf: jf(x).numpy()
    if torch is not None:
        xt = torch.from_numpy(x_np)
        cases["torch"] = lambda: torch.tanh(xt * 1.5 + 0.5) * torch.sigmoid(xt) + torch.exp(
            -xt * xt)
    return cases


def w2(n: int) -> dict[str, Callable[[], Any]]:
    x_np = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    x = Tensor(x_np)

    def np_softmax() -> Any:
        e = np.exp(x_np - x_np.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    cases = {"numpy": np_softmax}
    for b in _backends():
        jf = fgrad.jit(lambda x: x.softmax(-1), backend=b)
        cases[f"fgrad-{b}"] = lambda jf=jf: jf(x).numpy()
    if torch is not None:
        xt = torch.from_numpy(x_np)
        cases["torch"] = lambda: torch.softmax(xt, -1)
    return cases


def w3(n: int) -> dict[str, Callable[[], Any]]:
    rng = np.random.default_rng(0)
    a_np, b_np = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    a, b = Tensor(a_np), Tensor(b_np)
    cases = {"numpy": lambda: a_np @ b_np}
    for bk in _backends():
        jf = fgrad.jit(lambda a, b: a @ b, backend=bk)
        cases[f"fgrad-{bk}"] = lambda jf=jf: jf(a, b).numpy()
    if torch is not None:
        at, bt = torch.from_numpy(a_np), torch.from_numpy(b_np)
        cases["torch"] = lambda: at @ bt
    return cases


def _mlp_params(sizes: list[int]) -> dict[str, Tensor]:
    keys = fgrad.random.split(fgrad.random.key(0), len(sizes))
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"w{i}"] = fgrad.random.normal(keys[i], (fan_in, fan_out)) * (fan_in ** -0.5)
        params[f"b{i}"] = Tensor.zeros(fan_out)
    return params


def _mlp_loss(params: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
    h = x
    n = len(params) // 2
    for i in range(n):
        h = h @ params[f"w{i}"] + params[f"b{i}"]
        if i < n - 1:
            h = h.relu()
    return h.sparse_categorical_crossentropy(y)


def w5(batch: int) -> dict[str, Callable[[], Any]]:
    opt = fgrad.optim.Adam(lr=1e-3)
    params = _mlp_params([784, 512, 512, 10])
    state = opt.init(params)
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((batch, 784)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, batch).astype(np.int32))

    def step(params: Any, state: Any, x: Tensor, y: Tensor) -> Any:
        loss, grads = fgrad.value_and_grad(_mlp_loss)(params, x, y)
        updates, state = opt.update(grads, state, params)
        return fgrad.optim.apply_updates(params, updates), state, loss

    cases = {}
    for b in _backends():
        jstep = fgrad.jit(step, backend=b)
        cases[f"fgrad-{b}"] = lambda js=jstep: js(params, state, x, y)[2].numpy()
    return cases


def w7() -> dict[str, Callable[[], Any]]:
    x = Tensor([1.0])
    cases = {"fgrad-eager": lambda: x + 1}
    for b in _backends():
        jf = fgrad.jit(lambda x: x + 1, backend=b)
        cases[f"fgrad-{b}"] = lambda jf=jf: jf(x)
    if torch is not None:
        xt = torch.ones(1)
        cases["torch-eager"] = lambda: xt + 1
    return cases


def w8(batch: int) -> dict[str, Callable[[], Any]]:
    params = _mlp_params([784, 512, 512, 10])
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((batch, 784)).astype(np.float32))
    y = Tensor(rng.integers(0, 10, batch).astype(np.int32))

    def one(params: Any, xi: Tensor, yi: Tensor) -> Any:
        return _mlp_loss(params, xi[None], yi[None])

    per_example = fgrad.vmap(fgrad.grad(one), in_axes=(None, 0, 0))
    cases = {}
    for b in _backends():
        jf = fgrad.jit(per_example, backend=b)
        cases[f"fgrad-{b}"] = lambda jf=jf: jf(params, x, y)["w0"].numpy()
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    q = args.quick
    workloads = [
        ("W1 elementwise chain 2^%d f32" % (16 if q else 24), w1(2 ** (16 if q else 24))),
        ("W2 row softmax %d^2" % (256 if q else 4096), w2(256 if q else 4096)),
        ("W3 matmul n=%d" % (128 if q else 1024), w3(128 if q else 1024)),
        ("W5 MLP train step, batch %d" % (32 if q else 256), w5(32 if q else 256)),
        ("W7 jitted x+1 on one element", w7()),
        ("W8 vmap(grad) per-example, batch %d" % (8 if q else 128), w8(8 if q else 128)),
    ]
    print(f"{'workload':40s} {'impl':14s} {'ms':>10s} {'vs best ref':>12s}")
    for name, cases in workloads:
        times = {k: median_ms(fn, args.repeats) for k, fn in cases.items()}
        refs = [t for k, t in times.items() if not k.startswith("fgrad")]
        best = min(refs) if refs else None
        for k, t in times.items():
            ratio = f"{t / best:10.2f}x" if best else f"{'-':>11s}"
            print(f"{name:40s} {k:14s} {t:10.3f} {ratio}")


if __name__ == "__main__":
    main()
