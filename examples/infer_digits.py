"""Load the checkpoint written by train_digits.py and run jit-compiled batched inference.

    python examples/infer_digits.py [--ckpt runs/digits/digits_cnn.safetensors] [--smoke]

Prints accuracy and the median latency per batch for every jit backend available here
("numpy" reference interpreter, "llvm", "opencl"). Without a checkpoint (or with --smoke) it
uses a freshly initialised model, so the timings still run.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import fgrad
from fgrad import Tensor
from fgrad.nn import state

from train_digits import DigitsCNN, load_data


def latency_ms(fn, *args, repeats: int = 10) -> float:  # type: ignore[no-untyped-def]
    """Median milliseconds per call after one warm-up (compile) call."""
    fn(*args)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args).numpy()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=os.path.join("runs", "digits",
                                                       "digits_cnn.safetensors"))
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--smoke", action="store_true", help="few repeats, for CI")
    args = parser.parse_args()
    model = DigitsCNN(key=fgrad.random.key(0))
    if os.path.exists(args.ckpt) and not args.smoke:
        model = state.load_state_dict(model, state.safe_load(args.ckpt))
        print(f"loaded {args.ckpt}")
    else:
        print("no checkpoint loaded: timing a freshly initialised model")
    _, _, x_test, y_test = load_data()
    batch = Tensor(x_test[:args.batch_size])

    def predict(model: DigitsCNN, x: Tensor) -> Tensor:
        logits, _ = model(x, training=False)
        return logits.argmax(axis=1)

    for backend in ("numpy", "llvm", "opencl"):
        jitted = fgrad.jit(predict, backend=backend)
        try:
            # OpenCL: parameters live on the device, so a call copies only the batch in
            params = fgrad.device_put(model, "CL") if backend == "opencl" else model
            preds = jitted(params, Tensor(x_test)).numpy()
        except (ValueError, NotImplementedError, RuntimeError, ImportError) as err:
            print(f"{backend:>7s}: not available here ({str(err).splitlines()[0][:80]})")
            continue
        acc = float((preds == y_test).mean())
        ms = latency_ms(jitted, params, batch, repeats=2 if args.smoke else 20)
        where = f" on {fgrad.tree_util.tree_leaves(params)[0].device}" if backend == "opencl" \
            else ""
        print(f"{backend:>7s}: accuracy {acc * 100:.2f}%, {ms:.2f} ms per batch of "
              f"{batch.shape[0]}{where}")


if __name__ == "__main__":
    main()
