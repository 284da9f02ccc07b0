"""A character-level language model: Embedding -> LSTMCell under `lax.scan` -> Linear.

    python examples/char_lm.py            # a few hundred steps, then samples text
    python examples/char_lm.py --smoke    # a few steps, for CI

Trains on text that is on every machine: the docstrings of Python's standard library
modules. The whole sequence loop is one `lax.scan`, so the jitted step is one staged
program; sampling draws characters with `fgrad.random.categorical`.
"""
from __future__ import annotations

import argparse
import importlib
import time
from typing import Any

import numpy as np

import fgrad
from fgrad import Tensor, lax, nn, optim

MODULES = ("os", "json", "argparse", "collections", "functools", "itertools", "pathlib",
           "random", "statistics", "string", "textwrap", "re", "shutil", "heapq")


def load_text(max_chars: int) -> str:
    """Concatenated docstrings of some standard-library modules and their functions."""
    parts = []
    for name in MODULES:
        mod = importlib.import_module(name)
        for obj in [mod] + [getattr(mod, a) for a in dir(mod) if not a.startswith("_")]:
            doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str) and len(doc) > 40:
                parts.append(doc.strip())
    text = "\n\n".join(dict.fromkeys(parts))
    return "".join(c for c in text if c.isascii())[:max_chars]


class CharLM(nn.Module):
    """Embedding, one LSTM cell scanned over time, and a linear read-out."""

    def __init__(self, vocab: int, hidden: int, *, key: Tensor):
        k1, k2, k3 = fgrad.random.split(key, 3)
        self.embed = nn.Embedding(vocab, 32, key=k1)
        self.cell = nn.LSTMCell(32, hidden, key=k2)
        self.out = nn.Linear(hidden, vocab, key=k3)

    def __call__(self, tokens: Tensor, hc: tuple[Tensor, Tensor]) -> tuple[Tensor, Any]:
        """Logits (batch, time, vocab) for tokens (batch, time) and the final state."""
        xs = self.embed(tokens).permute(1, 0, 2)  # (time, batch, 32)

        def step(hc: tuple[Tensor, Tensor], x: Tensor) -> tuple[Any, Tensor]:
            h, c = self.cell(x, hc)
            return (h, c), h

        hc, hs = lax.scan(step, hc, xs)
        return self.out(hs.permute(1, 0, 2)), hc


def zero_state(batch: int, hidden: int) -> tuple[Tensor, Tensor]:
    """An all-zeros LSTM state."""
    return Tensor.zeros(batch, hidden), Tensor.zeros(batch, hidden)


def sample(model: CharLM, itos: list[str], stoi: dict[str, int], prompt: str, n: int,
           key: Tensor, hidden: int) -> str:
    """Generate `n` characters after `prompt`, one jitted step per character."""
    @fgrad.jit
    def next_char(model: CharLM, token: Tensor, hc: Any, key: Tensor) -> Any:
        logits, hc = model(token.reshape(1, 1), hc)
        return fgrad.random.categorical(key, logits[0, -1] / 0.8), hc

    hc = zero_state(1, hidden)
    for ch in prompt[:-1]:
        _, hc = next_char(model, Tensor(stoi[ch]), hc, key)
    out, token = prompt, Tensor(stoi[prompt[-1]])
    for k in fgrad.random.split(key, n):
        token, hc = next_char(model, token, hc, k)
        out += itos[int(token)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seq", type=int, default=48)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--smoke", action="store_true", help="a few steps, for CI")
    args = parser.parse_args()
    steps = 3 if args.smoke else args.steps
    text = load_text(20_000 if args.smoke else 400_000)
    itos = sorted(set(text))
    stoi = {c: i for i, c in enumerate(itos)}
    data = np.array([stoi[c] for c in text], dtype=np.int32)
    model = CharLM(len(itos), args.hidden, key=fgrad.random.key(0))
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.Adam(lr=3e-3))
    opt_state = opt.init(model)

    def loss_fn(model: CharLM, x: Tensor, y: Tensor) -> Tensor:
        logits, _ = model(x, zero_state(x.shape[0], args.hidden))
        return logits.reshape(-1, len(itos)).sparse_categorical_crossentropy(y.reshape(-1))

    @fgrad.jit
    def train_step(model: CharLM, opt_state: Any, x: Tensor, y: Tensor) -> Any:
        loss, grads = fgrad.value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for step in range(steps):
        offsets = rng.integers(0, len(data) - args.seq - 1, args.batch)
        x = np.stack([data[o:o + args.seq] for o in offsets])
        y = np.stack([data[o + 1:o + args.seq + 1] for o in offsets])
        model, opt_state, loss = train_step(model, opt_state, Tensor(x), Tensor(y))
        if step % 50 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {float(loss):.3f}  "
                  f"({time.perf_counter() - start:.1f} s)")
    text_out = sample(model, itos, stoi, "Return the ", 20 if args.smoke else 200,
                      fgrad.random.key(1), args.hidden)
    print("sample:", repr(text_out))


if __name__ == "__main__":
    main()
