"""A stax network trained with jax.example_libraries.optimizers, written for JAX (the shape
of JAX's own examples/mnist_classifier.py, on data that needs no download).

digits_stax_fgrad.py is this file with only its imports changed (jax -> fgrad); the test
tests/examples/test_jax_ports.py checks that, and that both print the same numbers.

    python examples/jax_ports/digits_stax_jax.py [--smoke]

Data: scikit-learn's 8x8 handwritten digits (shipped with scikit-learn, no download).
"""
import argparse
import itertools
import time

import numpy as np
import numpy.random as npr
from sklearn.datasets import load_digits

import fgrad.numpy as jnp
from fgrad import grad, jit, random
from fgrad.example_libraries import optimizers, stax
from fgrad.example_libraries.stax import Conv, Dense, Flatten, LogSoftmax, MaxPool, Relu


def loss(params, batch):
    inputs, targets = batch
    preds = predict(params, inputs)
    return -jnp.mean(jnp.sum(preds * targets, axis=1))


def accuracy(params, batch):
    inputs, targets = batch
    target_class = jnp.argmax(targets, axis=1)
    predicted_class = jnp.argmax(predict(params, inputs), axis=1)
    return jnp.mean(predicted_class == target_class)


init_random_params, predict = stax.serial(
    Conv(8, (3, 3), padding="SAME"), Relu, MaxPool((2, 2), (2, 2)), Flatten,
    Dense(64), Relu, Dense(10), LogSoftmax)


def load(test_size=297):
    digits = load_digits()
    images = (digits.images[..., None] / 16.0).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[digits.target]
    return (images[test_size:], labels[test_size:]), (images[:test_size], labels[:test_size])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="two epochs")
    args = parser.parse_args()
    rng = random.PRNGKey(0)
    step_size, num_epochs, batch_size, momentum_mass = 0.02, 2 if args.smoke else 8, 64, 0.9
    (train_images, train_labels), (test_images, test_labels) = load()
    num_batches = len(train_images) // batch_size

    def data_stream():
        rng = npr.RandomState(0)
        while True:
            perm = rng.permutation(len(train_images))
            for i in range(num_batches):
                batch_idx = perm[i * batch_size:(i + 1) * batch_size]
                yield train_images[batch_idx], train_labels[batch_idx]
    batches = data_stream()

    opt_init, opt_update, get_params = optimizers.momentum(step_size, mass=momentum_mass)

    @jit
    def update(i, opt_state, batch):
        params = get_params(opt_state)
        return opt_update(i, grad(loss)(params, batch), opt_state)

    _, init_params = init_random_params(rng, (-1, 8, 8, 1))
    opt_state = opt_init(init_params)
    itercount = itertools.count()

    print("Starting training...")
    for epoch in range(num_epochs):
        start_time = time.time()
        for _ in range(num_batches):
            opt_state = update(next(itercount), opt_state, next(batches))
        epoch_time = time.time() - start_time
        params = get_params(opt_state)
        train_acc = accuracy(params, (train_images, train_labels))
        test_acc = accuracy(params, (test_images, test_labels))
        train_loss = loss(params, (train_images, train_labels))
        print(f"Epoch {epoch} ({epoch_time:0.2f} s)")
        print(f"Training set loss {float(train_loss):.6f} accuracy {float(train_acc):.6f}")
        print(f"Test set accuracy {float(test_acc):.6f}")


if __name__ == "__main__":
    main()
