"""A multi-layer perceptron trained from scratch with plain SGD, written for JAX.

digits_mlp_fgrad.py is this file with only its imports changed (jax -> fgrad); the test
tests/examples/test_jax_ports.py checks that, and that both print the same numbers.

    python examples/jax_ports/digits_mlp_jax.py [--smoke]

Data: scikit-learn's 8x8 handwritten digits (shipped with scikit-learn, no download).
"""
import argparse
import time

import numpy as np
import numpy.random as npr
from sklearn.datasets import load_digits

import jax.numpy as jnp
from jax import grad, jit, random
from jax.scipy.special import logsumexp


def init_params(key, sizes, scale=0.1):
    params = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        key, wkey, bkey = random.split(key, 3)
        params.append((scale * random.normal(wkey, (m, n)), scale * random.normal(bkey, (n,))))
    return params


def predict(params, inputs):
    activations = inputs
    for w, b in params[:-1]:
        activations = jnp.maximum(jnp.dot(activations, w) + b, 0.0)
    w, b = params[-1]
    logits = jnp.dot(activations, w) + b
    return logits - logsumexp(logits, axis=1, keepdims=True)


def loss(params, batch):
    inputs, targets = batch
    return -jnp.mean(jnp.sum(predict(params, inputs) * targets, axis=1))


def accuracy(params, batch):
    inputs, targets = batch
    predicted = jnp.argmax(predict(params, inputs), axis=1)
    return jnp.mean(predicted == jnp.argmax(targets, axis=1))


def load(test_size=297):
    digits = load_digits()
    images = (digits.images.reshape(len(digits.images), -1) / 16.0).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[digits.target]
    return (images[test_size:], labels[test_size:]), (images[:test_size], labels[:test_size])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="two epochs")
    args = parser.parse_args()
    step_size, num_epochs, batch_size, momentum = 0.05, 2 if args.smoke else 12, 64, 0.9
    (train_x, train_y), test = load()
    num_batches = len(train_x) // batch_size
    rng = npr.RandomState(0)

    def batches():
        while True:
            perm = rng.permutation(len(train_x))
            for i in range(num_batches):
                idx = perm[i * batch_size:(i + 1) * batch_size]
                yield train_x[idx], train_y[idx]

    @jit
    def update(params, velocity, batch):
        grads = grad(loss)(params, batch)
        velocity = [(momentum * vw - dw, momentum * vb - db)
                    for (vw, vb), (dw, db) in zip(velocity, grads)]
        params = [(w + step_size * vw, b + step_size * vb)
                  for (w, b), (vw, vb) in zip(params, velocity)]
        return params, velocity

    params = init_params(random.PRNGKey(0), [64, 128, 64, 10])
    velocity = [(jnp.zeros_like(w), jnp.zeros_like(b)) for w, b in params]
    stream = batches()
    train = (train_x, train_y)
    for epoch in range(num_epochs):
        start = time.time()
        for _ in range(num_batches):
            params, velocity = update(params, velocity, next(stream))
        seconds = time.time() - start
        print(f"epoch {epoch} loss {float(loss(params, train)):.6f} "
              f"train_acc {float(accuracy(params, train)):.4f} "
              f"test_acc {float(accuracy(params, test)):.4f} ({seconds:.2f} s)")


if __name__ == "__main__":
    main()
