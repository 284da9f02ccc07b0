"""train_digits.py, data-parallel: the same CNN trained by several processes over MPI.

    mpiexec -n 2 python examples/train_digits_dp.py            # ~20 epochs (>= 97% accuracy)
    mpiexec -n 2 python examples/train_digits_dp.py --smoke    # a few steps, for CI
    python examples/train_digits_dp.py                          # also runs, as a job of one

Needs `pip install 'fgrad[distributed]'` (mpi4py and MPICH) to run on several processes.
Every process starts from process 0's parameters (broadcast), takes its shard of each global
batch (shard_batch), and averages gradients, the loss and the BatchNorm statistics with one
pmean inside the jitted step, so all processes keep identical models. Process 0 shows the
progress bar, prints the accuracy and writes the checkpoint and the loss curve into --out.
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

import fgrad
from fgrad import Tensor, distributed as dist, optim
from train_digits import DigitsCNN, accuracy, load_data, save_outputs


def make_steps(opt: optim.GradientTransformation) -> tuple[Any, Any]:
    """The jitted data-parallel training step and the jitted evaluation function."""

    def loss_fn(model: DigitsCNN, x: Tensor, y: Tensor) -> tuple[Tensor, DigitsCNN]:
        logits, new_model = model(x, training=True)
        return logits.sparse_categorical_crossentropy(y), new_model

    @fgrad.jit
    def train_step(model: DigitsCNN, opt_state: Any, x: Tensor, y: Tensor) -> Any:
        (loss, new_model), grads = fgrad.value_and_grad(loss_fn, has_aux=True)(model, x, y)
        grads, loss, bn1, bn2 = dist.pmean((grads, loss, new_model.bn1, new_model.bn2))
        new_model = new_model.replace(bn1=bn1, bn2=bn2)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(new_model, updates), opt_state, loss

    @fgrad.jit
    def predict(model: DigitsCNN, x: Tensor) -> Tensor:
        logits, _ = model(x, training=False)
        return logits.argmax(axis=1)

    return train_step, predict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64, help="global, over all processes")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--out", default=os.path.join("runs", "digits_dp"))
    parser.add_argument("--smoke", action="store_true", help="a few steps only, for CI")
    args = parser.parse_args()
    from tqdm import tqdm

    rank, count = fgrad.process_index(), fgrad.process_count()
    x_train, y_train, x_test, y_test = load_data()
    model = dist.broadcast(DigitsCNN(key=fgrad.random.key(rank)))  # process 0's start
    opt = optim.Adam(lr=args.lr)
    opt_state = opt.init(model)
    train_step, predict = make_steps(opt)
    epochs = 1 if args.smoke else args.epochs
    steps_per_epoch = 3 if args.smoke else len(x_train) // args.batch_size
    rng = np.random.default_rng(1)  # the same global batches on every process
    losses: list[float] = []
    start = time.perf_counter()
    bar = tqdm(total=epochs * steps_per_epoch, unit="step", disable=rank != 0)
    for _ in range(epochs):
        order = rng.permutation(len(x_train))
        for i in range(steps_per_epoch):
            idx = order[i * args.batch_size:(i + 1) * args.batch_size]
            x, y = dist.shard_batch((x_train[idx], y_train[idx]))
            model, opt_state, loss = train_step(model, opt_state, Tensor(x), Tensor(y))
            losses.append(float(loss))
            seen = len(losses) * args.batch_size
            bar.set_postfix(loss=f"{losses[-1]:.4f}",
                            samples_per_s=f"{seen / (time.perf_counter() - start):.0f}")
            bar.update()
    bar.close()
    acc = accuracy(predict, model, x_test, y_test)
    if rank == 0:
        print(f"test accuracy: {acc * 100:.2f}% on {len(x_test)} held-out digits "
              f"({time.perf_counter() - start:.1f} s on {count} process"
              f"{'es' * (count > 1)}, traced {train_step.cache_info().misses}x)")
        save_outputs(model, losses, args.out)
    dist.save_checkpoint(os.path.join(args.out, "digits_cnn_dp.npz"), (model, opt_state))


if __name__ == "__main__":
    main()
