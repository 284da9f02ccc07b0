"""The 784-512-512-10 MLP workloads, once per contender: W5 (a training step with Adam),
W7 (per-call overhead of x+1) and W8 (vmap(grad) per-example gradients).

In: batch sizes. Out: dicts contender -> factory; a factory builds data and the (jitted)
function and returns a zero-argument call that runs one step and waits for its results.
torch and jax are imported inside their factories (bench/cold_start.py times fresh processes).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

import fgrad
from fgrad import Tensor, nn, optim
from harness import available, fgrad_backends, fgrad_place, fgrad_sync

SIZES = (784, 512, 512, 10)
LR, B1, B2, ADAM_EPS = 1e-3, 0.9, 0.999, 1e-8
Factory = Callable[[], Callable[[], Any]]


def data(batch: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """NumPy parameters [w0, b0, w1, b1, w2, b2] (w: in x out), inputs x and labels y."""
    rng = np.random.default_rng(0)
    params = []
    for fan_in, fan_out in itertools.pairwise(SIZES):
        params.append((rng.standard_normal((fan_in, fan_out)) * fan_in ** -0.5)
                      .astype(np.float32))
        params.append(np.zeros(fan_out, np.float32))
    x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    return params, x, rng.integers(0, SIZES[-1], batch).astype(np.int32)


def _feedback(step: Callable[..., Any], carry: list[Any], *args: Any) -> Callable[[], Any]:
    """A call running `step(*carry, *args)` that keeps all but the last output as carry."""
    def call() -> Any:
        *carry[:], loss = step(*carry, *args)
        return loss
    return call


# ----------------------------------------------------------------- NumPy (by hand)

def numpy_grads(params: list[np.ndarray], x: np.ndarray, y: np.ndarray,
                per_example: bool = False) -> tuple[float, list[np.ndarray]]:
    """Mean softmax cross-entropy of the MLP and its gradients (per example if asked)."""
    acts, h = [x], x
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        h = np.maximum(h, 0) if i + 2 < len(params) else h
        acts.append(h)
    shifted = h - h.max(1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    rows = np.arange(len(y))
    g = np.exp(logp)
    g[rows, y] -= 1
    g = g if per_example else g / len(y)
    grads: list[np.ndarray] = []
    for i in reversed(range(0, len(params), 2)):
        a = acts[i // 2]
        grads[:0] = [np.einsum("bi,bo->bio", a, g), g] if per_example else [a.T @ g, g.sum(0)]
        if i:
            g = (g @ params[i].T) * (a > 0)
    return float(-logp[rows, y].mean()), grads


def numpy_step(params: list[np.ndarray], m: list[np.ndarray], v: list[np.ndarray], t: int,
               x: np.ndarray, y: np.ndarray) -> tuple[Any, ...]:
    """One Adam training step of the MLP in NumPy."""
    loss, grads = numpy_grads(params, x, y)
    t += 1
    m = [B1 * mi + (1 - B1) * g for mi, g in zip(m, grads, strict=True)]
    v = [B2 * vi + (1 - B2) * g * g for vi, g in zip(v, grads, strict=True)]
    c1, c2 = 1 - B1 ** t, 1 - B2 ** t
    params = [p - LR * (mi / c1) / (np.sqrt(vi / c2) + ADAM_EPS)
              for p, mi, vi in zip(params, m, v, strict=True)]
    return params, m, v, t, loss


# ----------------------------------------------------------------- JAX

def jax_loss(params: list[Any], x: Any, y: Any) -> Any:
    """Mean softmax cross-entropy of the MLP (x batched, or one example)."""
    import jax
    h = x
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        h = jax.nn.relu(h) if i + 2 < len(params) else h
    logp = jax.nn.log_softmax(h, axis=-1)
    return -jax.numpy.take_along_axis(logp, y[..., None], axis=-1).mean()


def jax_step(params: list[Any], m: list[Any], v: list[Any], t: Any, x: Any,
             y: Any) -> tuple[Any, ...]:
    """One Adam training step of the MLP, written in jax.numpy."""
    import jax
    loss, grads = jax.value_and_grad(jax_loss)(params, x, y)
    t = t + 1
    m = [B1 * mi + (1 - B1) * g for mi, g in zip(m, grads, strict=True)]
    v = [B2 * vi + (1 - B2) * g * g for vi, g in zip(v, grads, strict=True)]
    c1, c2 = 1 - B1 ** t, 1 - B2 ** t
    params = [p - LR * (mi / c1) / (jax.numpy.sqrt(vi / c2) + ADAM_EPS)
              for p, mi, vi in zip(params, m, v, strict=True)]
    return params, m, v, t, loss


# ----------------------------------------------------------------- PyTorch

def torch_model() -> Any:
    """nn.Sequential Linear-ReLU-Linear-ReLU-Linear."""
    import torch
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 10))


def torch_loss_one(params: dict[str, Any], xi: Any, yi: Any) -> Any:
    """Softmax cross-entropy of one example under a params dict (for torch.func)."""
    import torch
    h = xi
    for i in range(len(params) // 2):
        h = h @ params[f"w{i}"] + params[f"b{i}"]
        h = torch.relu(h) if i + 1 < len(params) // 2 else h
    return torch.nn.functional.cross_entropy(h[None], yi[None])


# ----------------------------------------------------------------- fgrad

def fgrad_model() -> nn.Sequential:
    """fgrad.nn.Sequential Linear-relu-Linear-relu-Linear."""
    k = fgrad.random.split(fgrad.random.key(0), 3)
    return nn.Sequential(nn.Linear(784, 512, key=k[0]), Tensor.relu,
                         nn.Linear(512, 512, key=k[1]), Tensor.relu,
                         nn.Linear(512, 10, key=k[2]))


def fgrad_step(opt: optim.GradientTransformation) -> Callable[..., Any]:
    """The W5 step function (fgrad.nn model, fgrad.optim optimizer), before jit."""
    def loss_fn(model: nn.Sequential, x: Tensor, y: Tensor) -> Tensor:
        return model(x).sparse_categorical_crossentropy(y)

    def step(model: nn.Sequential, state: Any, x: Tensor, y: Tensor) -> Any:
        loss, grads = fgrad.value_and_grad(loss_fn)(model, x, y)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss
    return step


def fgrad_loss_one(params: dict[str, Tensor], xi: Tensor, yi: Tensor) -> Tensor:
    """Softmax cross-entropy of one example under a params dict."""
    h = xi[None]
    for i in range(len(params) // 2):
        h = h @ params[f"w{i}"] + params[f"b{i}"]
        h = h.relu() if i + 1 < len(params) // 2 else h
    return h.sparse_categorical_crossentropy(yi[None])


# ----------------------------------------------------------------- factories

def w5_factories(batch: int) -> dict[str, Factory]:
    """W5: a full training step (forward, backward, Adam), per contender present."""
    params, x, y = data(batch)

    def numpy_call() -> Callable[[], Any]:
        zeros = [np.zeros_like(p) for p in params]
        return _feedback(numpy_step, [params, zeros, list(zeros), 0], x, y)

    def jax_call() -> Callable[[], Any]:
        import jax
        jp = [jax.numpy.asarray(p) for p in params]
        zeros = [jax.numpy.zeros_like(p) for p in jp]
        carry = [jp, zeros, list(zeros), jax.numpy.int32(0)]
        call = _feedback(jax.jit(jax_step), carry, jax.numpy.asarray(x), jax.numpy.asarray(y))
        return lambda: jax.block_until_ready((call(), carry))

    def torch_call() -> Callable[[], Any]:
        import torch
        model, xt, yt = torch_model(), torch.from_numpy(x), torch.from_numpy(y).long()
        opt = torch.optim.Adam(model.parameters(), lr=LR)

        def call() -> Any:
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(xt), yt)
            loss.backward()
            opt.step()
            return loss
        return call

    out = _anchors({"numpy": numpy_call, "torch": torch_call, "jax": jax_call})
    for b in fgrad_backends():
        out[f"fgrad-{b}"] = _fgrad_w5(b, x, y)
    return out


def _fgrad_w5(backend: str, x: np.ndarray, y: np.ndarray) -> Factory:
    def build() -> Callable[[], Any]:
        opt = optim.Adam(lr=LR)
        model = fgrad_place(backend, fgrad_model())
        carry = [model, fgrad_place(backend, opt.init(model))]
        xt, yt = fgrad_place(backend, [Tensor(x), Tensor(y)])
        call = _feedback(fgrad.jit(fgrad_step(opt), backend=backend), carry, xt, yt)
        return lambda: fgrad_sync((call(), carry))
    return build


def _anchors(factories: dict[str, Factory]) -> dict[str, Factory]:
    """The anchor factories whose library is installed (NumPy always)."""
    return {k: f for k, f in factories.items() if k == "numpy" or available(k)}


def w7_factories() -> dict[str, Factory]:
    """W7: x + 1 on a one-element array; jitted where the contender jits (torch: eager)."""
    def numpy_call() -> Callable[[], Any]:
        x = np.ones(1, np.float32)
        return lambda: x + 1

    def torch_call() -> Callable[[], Any]:
        import torch
        x = torch.ones(1)
        return lambda: x + 1

    def jax_call() -> Callable[[], Any]:
        import jax
        f, x = jax.jit(lambda x: x + 1), jax.numpy.ones(1)
        return lambda: f(x).block_until_ready()

    def fgrad_call(backend: str) -> Factory:
        def build() -> Callable[[], Any]:
            f, x = fgrad.jit(lambda x: x + 1, backend=backend), Tensor.ones(1)
            x = fgrad_place(backend, x)
            return lambda: fgrad_sync(f(x))
        return build

    out = _anchors({"numpy": numpy_call, "torch": torch_call, "jax": jax_call})
    out.update({f"fgrad-{b}": fgrad_call(b) for b in fgrad_backends()})
    return out


def w8_factories(batch: int) -> dict[str, Factory]:
    """W8: per-example gradients of the MLP parameters, vmap(grad(loss of one example))."""
    params, x, y = data(batch)
    names = [f"{k}{i // 2}" for i, k in zip(range(len(params)), "wb" * 3, strict=True)]
    tree = dict(zip(names, params, strict=True))

    def numpy_call() -> Callable[[], Any]:
        return lambda: numpy_grads(params, x, y, per_example=True)

    def torch_call() -> Callable[[], Any]:
        import torch
        from torch.func import grad, vmap
        f = vmap(grad(torch_loss_one), in_dims=(None, 0, 0))
        args = ({k: torch.from_numpy(v) for k, v in tree.items()}, torch.from_numpy(x),
                torch.from_numpy(y).long())
        return lambda: f(*args)

    def jax_call() -> Callable[[], Any]:
        import jax
        f = jax.jit(jax.vmap(jax.grad(jax_loss), in_axes=(None, 0, 0)))
        args = ([jax.numpy.asarray(p) for p in params], jax.numpy.asarray(x),
                jax.numpy.asarray(y))
        return lambda: jax.block_until_ready(f(*args))

    def fgrad_call(backend: str) -> Factory:
        def build() -> Callable[[], Any]:
            f = fgrad.jit(fgrad.vmap(fgrad.grad(fgrad_loss_one), in_axes=(None, 0, 0)),
                          backend=backend)
            args = fgrad_place(backend, ({k: Tensor(v) for k, v in tree.items()}, Tensor(x),
                                         Tensor(y)))
            return lambda: fgrad_sync(f(*args))
        return build

    out = _anchors({"numpy": numpy_call, "torch": torch_call, "jax": jax_call})
    out.update({f"fgrad-{b}": fgrad_call(b) for b in fgrad_backends()})
    return out
