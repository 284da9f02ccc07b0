"""Train a small CNN on scikit-learn's handwritten digits with a jitted training step.

    python examples/train_digits.py            # ~20 epochs, prints test accuracy (>= 97%)
    python examples/train_digits.py --smoke    # a few steps, for CI

The data set (1797 8x8 images) ships inside scikit-learn, so nothing is downloaded. Writes a
safetensors checkpoint and the loss curve (PNG) into --out (default runs/digits).
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

import fgrad
from fgrad import Tensor, nn, optim
from fgrad.nn import state


class DigitsCNN(nn.Module):
    """conv-bn-relu-pool twice, then a linear classifier: (N, 1, 8, 8) -> (N, 10) logits."""

    def __init__(self, *, key: Tensor):
        k1, k2, k3 = fgrad.random.split(key, 3)
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1, key=k1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, key=k2)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 2 * 2, 10, key=k3)

    def __call__(self, x: Tensor, *, training: bool) -> tuple[Tensor, "DigitsCNN"]:
        """Logits and the model with updated BatchNorm statistics."""
        h, bn1 = self.bn1(self.conv1(x), training=training)
        h = h.relu().max_pool2d(2)
        h, bn2 = self.bn2(self.conv2(h), training=training)
        h = h.relu().max_pool2d(2)
        logits = self.fc(h.flatten(1))
        return logits, self.replace(bn1=bn1, bn2=bn2)


def load_data(seed: int = 0) -> tuple[np.ndarray, ...]:
    """Digits scaled to [0, 1], split 80/20 into train and test with a fixed permutation."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_train = int(0.8 * len(x))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def make_steps(opt: optim.GradientTransformation) -> tuple[Any, Any]:
    """The jitted training step and the jitted evaluation function."""

    def loss_fn(model: DigitsCNN, x: Tensor, y: Tensor) -> tuple[Tensor, DigitsCNN]:
        logits, new_model = model(x, training=True)
        return logits.sparse_categorical_crossentropy(y), new_model

    @fgrad.jit
    def train_step(model: DigitsCNN, opt_state: Any, x: Tensor, y: Tensor) -> Any:
        (loss, new_model), grads = fgrad.value_and_grad(loss_fn, has_aux=True)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(new_model, updates), opt_state, loss

    @fgrad.jit
    def predict(model: DigitsCNN, x: Tensor) -> Tensor:
        logits, _ = model(x, training=False)
        return logits.argmax(axis=1)

    return train_step, predict


def accuracy(predict: Any, model: DigitsCNN, x: np.ndarray, y: np.ndarray) -> float:
    """Fraction of correctly classified examples."""
    return float((predict(model, Tensor(x)).numpy() == y).mean())


def save_outputs(model: DigitsCNN, losses: list[float], out_dir: str) -> None:
    """Write the checkpoint (safetensors) and the loss curve (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(out_dir, exist_ok=True)
    ckpt = os.path.join(out_dir, "digits_cnn.safetensors")
    state.safe_save(state.get_state_dict(model), ckpt)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(losses, lw=1)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_yscale("log")
    ax.set_title("fgrad: CNN on sklearn digits")
    fig.tight_layout()
    png = os.path.join(out_dir, "loss.png")
    fig.savefig(png, dpi=120)
    print(f"wrote {ckpt} and {png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--out", default=os.path.join("runs", "digits"))
    parser.add_argument("--smoke", action="store_true", help="a few steps only, for CI")
    args = parser.parse_args()
    from tqdm import tqdm

    x_train, y_train, x_test, y_test = load_data()
    model = DigitsCNN(key=fgrad.random.key(0))
    opt = optim.Adam(lr=args.lr)
    opt_state = opt.init(model)
    train_step, predict = make_steps(opt)
    epochs = 1 if args.smoke else args.epochs
    steps_per_epoch = 3 if args.smoke else len(x_train) // args.batch_size
    rng = np.random.default_rng(1)
    losses: list[float] = []
    start = time.perf_counter()
    bar = tqdm(total=epochs * steps_per_epoch, unit="step")
    for _ in range(epochs):
        order = rng.permutation(len(x_train))
        for i in range(steps_per_epoch):
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            model, opt_state, loss = train_step(model, opt_state, Tensor(x_train[idx]),
                                                Tensor(y_train[idx]))
            losses.append(float(loss))
            seen = len(losses) * args.batch_size
            bar.set_postfix(loss=f"{losses[-1]:.4f}",
                            samples_per_s=f"{seen / (time.perf_counter() - start):.0f}")
            bar.update()
    bar.close()
    acc = accuracy(predict, model, x_test, y_test)
    print(f"test accuracy: {acc * 100:.2f}% on {len(x_test)} held-out digits "
          f"({time.perf_counter() - start:.1f} s, traced {train_step.cache_info().misses}x)")
    save_outputs(model, losses, args.out)


if __name__ == "__main__":
    main()
