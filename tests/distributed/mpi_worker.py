"""One process of the multi-process tests, started by test_mpi.py as
`mpiexec -n N python mpi_worker.py SCENARIO OUT_DIR [BACKEND ...]`.

Each process writes what it computed to OUT_DIR/SCENARIO-RANK.npz; test_mpi.py checks the
files against NumPy references built from `inputs(rank)`, the per-process data below.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable

import numpy as np

import fgrad
from fgrad import Tensor, distributed as dist, lax

TRAIN = dict(n_rows=32, sizes=(8, 16, 3), lr=0.5, steps=6)


def inputs(rank: int) -> dict[str, np.ndarray]:
    """Process `rank`'s operands: distinct values everywhere, so max/min never tie."""
    rng = np.random.default_rng(100 + rank)
    return {"a": rng.normal(size=(2, 3)).astype(np.float32) + 10.0 * rank,
            "b": rng.integers(-50, 50, size=4).astype(np.int32),
            "w": rng.normal(size=(2, 3)).astype(np.float32),
            "ww": rng.normal(size=(2, 2, 3)).astype(np.float32),
            "xs": rng.normal(size=(5, 3)).astype(np.float32)}


def _collectives(x: dict[str, Tensor]) -> dict[str, Any]:
    ab = {"a": x["a"], "b": x["b"]}
    return {"psum": dist.psum(ab), "pmean": dist.pmean(x["a"]), "pmax": dist.pmax(ab),
            "pmin": dist.pmin(ab), "gather": dist.all_gather(ab),
            "tiled": dist.all_gather(ab, tiled=True), "bcast": dist.broadcast(ab, root=1)}


def _grads(x: dict[str, Tensor]) -> dict[str, Any]:
    """Gradients of per-process losses through each differentiable collective."""
    a, w, ww = x["a"], x["w"], x["ww"]
    loss = {"psum": lambda a: (dist.psum(a) * w).sum(),
            "pmean": lambda a: (dist.pmean(a) * w).sum(),
            "pmax": lambda a: (dist.pmax(a) * w).sum(),
            "gather": lambda a: (dist.all_gather(a) * ww).sum(),
            "bcast": lambda a: (dist.broadcast(a, root=1) * w).sum()}
    return {k: fgrad.grad(f)(a) for k, f in loss.items()}


def _vmapped(x: dict[str, Tensor]) -> dict[str, Any]:
    xs = x["xs"]
    return {"psum0": fgrad.vmap(dist.psum)(xs),
            "psum1": fgrad.vmap(dist.psum, in_axes=1)(xs),
            "gather": fgrad.vmap(dist.all_gather)(xs),
            "tiled": fgrad.vmap(lambda v: dist.all_gather(v[None], tiled=True), in_axes=1)(xs)}


def _scanned(x: dict[str, Tensor]) -> dict[str, Any]:
    def body(c: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        s = dist.psum(v)
        return c + s, s * 2.0
    carry, ys = lax.scan(body, Tensor(np.zeros(3, np.float32)), x["xs"])
    return {"carry": carry, "ys": ys}


def _flat(prefix: str, tree: Any) -> dict[str, np.ndarray]:
    leaves = fgrad.tree_util.tree_leaves_with_path(tree)
    return {prefix + fgrad.tree_util.keystr(p): np.asarray(v.numpy()) for p, v in leaves}


def scenario_collectives(out: str, backends: list[str]) -> dict[str, np.ndarray]:
    """Every collective eagerly and jitted per backend, under grad, vmap and scan."""
    x = {k: Tensor(v) for k, v in inputs(dist.process_index()).items()}
    results = {"count": np.array(fgrad.process_count()), "index": np.array(fgrad.process_index())}
    parts: dict[str, Callable[[dict[str, Tensor]], Any]] = {
        "coll": _collectives, "grad": _grads, "vmap": _vmapped, "scan": _scanned}
    for name, fn in parts.items():
        results.update(_flat(f"eager/{name}", fn(x)))
        for backend in backends:
            results.update(_flat(f"{backend}/{name}", fgrad.jit(fn, backend=backend)(x)))
    results["shard"] = dist.shard_batch(np.arange(8).reshape(4, 2), axis=0)
    try:
        dist.shard_batch(np.zeros((3, 2)))
    except ValueError as err:
        results["shard_error"] = np.array(str(err))
    path = os.path.join(out, "ckpt.npz")
    dist.save_checkpoint(path, {"a": x["a"], "b": x["b"]})
    results.update(_flat("ckpt", dist.load_checkpoint(path, {"a": x["a"], "b": x["b"]})))
    return results


def train_data() -> tuple[np.ndarray, np.ndarray]:
    """The whole training batch (every process builds the same one)."""
    rng = np.random.default_rng(7)
    n, (d, _, k) = TRAIN["n_rows"], TRAIN["sizes"]
    return rng.normal(size=(n, d)).astype(np.float32), rng.integers(0, k, n).astype(np.int32)


def mlp_loss(params: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
    """Mean softmax cross-entropy of a tanh MLP."""
    h = (x @ params["w0"] + params["b0"]).tanh()
    return (h @ params["w1"] + params["b1"]).sparse_categorical_crossentropy(y)


def init_params(seed: int) -> dict[str, Tensor]:
    d, h, k = TRAIN["sizes"]
    k0, k1 = fgrad.random.split(fgrad.random.key(seed), 2)
    return {"w0": fgrad.random.normal(k0, (d, h)) * 0.5, "b0": Tensor(np.zeros(h, np.float32)),
            "w1": fgrad.random.normal(k1, (h, k)) * 0.5, "b1": Tensor(np.zeros(k, np.float32))}


def scenario_train(out: str, backends: list[str]) -> dict[str, np.ndarray]:
    """Data-parallel SGD: each process differentiates its shard, gradients are averaged
    by pmean inside the jitted step. Different seeds per process: broadcast aligns them."""
    params = dist.broadcast(init_params(seed=dist.process_index()))
    results = _flat("init", params)

    @fgrad.jit
    def step(params: dict[str, Tensor], x: Tensor, y: Tensor) -> Any:
        loss, grads = fgrad.value_and_grad(mlp_loss)(params, x, y)
        loss, grads = dist.pmean((loss, grads))
        new = fgrad.tree_util.tree_map(lambda p, g: p - TRAIN["lr"] * g, params, grads)
        return new, loss

    x, y = dist.shard_batch(train_data())
    losses = []
    for _ in range(TRAIN["steps"]):
        params, loss = step(params, Tensor(x), Tensor(y))
        losses.append(float(loss))
    results.update(_flat("final", params))
    results["losses"] = np.array(losses, np.float32)
    return results


def scenario_fail(out: str, backends: list[str]) -> dict[str, np.ndarray]:
    """Process 1 raises after one collective; process 0 waits in the next one."""
    dist.psum(Tensor(np.ones(3, np.float32)))
    if dist.process_index() == 1:
        raise RuntimeError("deliberate failure in the test")
    dist.psum(Tensor(np.ones(3, np.float32)))
    time.sleep(120)
    return {}


def main() -> None:
    scenario, out, backends = sys.argv[1], sys.argv[2], sys.argv[3:]
    results = globals()[f"scenario_{scenario}"](out, backends)
    np.savez(os.path.join(out, f"{scenario}-{dist.process_index()}.npz"), **results)


if __name__ == "__main__":
    main()
