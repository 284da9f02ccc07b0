"""Gaussian-process regression with an RBF kernel, hyperparameters fitted by gradient descent
on the negative log marginal likelihood. Written for JAX.

gp_regression_fgrad.py is this file with only its imports changed (jax -> fgrad); the test
tests/examples/test_jax_ports.py checks that, and that both print the same numbers.

    python examples/jax_ports/gp_regression_jax.py [--smoke]
"""
import argparse

import numpy as np

import fgrad.numpy as jnp
from fgrad import jit, value_and_grad
from fgrad.scipy.linalg import cho_factor, cho_solve
from fgrad.scipy.stats import norm


def rbf_kernel(x1, x2, log_amp, log_len):
    scaled = (x1[:, None] - x2[None, :]) / jnp.exp(log_len)
    return jnp.exp(2.0 * log_amp) * jnp.exp(-0.5 * scaled ** 2)


def gram(params, x):
    log_amp, log_len, log_noise = params[0], params[1], params[2]
    noise = jnp.exp(2.0 * log_noise) + 1e-6
    return rbf_kernel(x, x, log_amp, log_len) + noise * jnp.eye(x.shape[0])


def neg_log_marginal(params, x, y):
    factor = cho_factor(gram(params, x), lower=True)
    alpha = cho_solve(factor, y)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diag(factor[0])))
    return 0.5 * jnp.dot(y, alpha) + 0.5 * log_det + 0.5 * x.shape[0] * jnp.log(2 * jnp.pi)


def predict(params, x, y, x_new):
    factor = cho_factor(gram(params, x), lower=True)
    cross = rbf_kernel(x_new, x, params[0], params[1])
    mean = jnp.dot(cross, cho_solve(factor, y))
    var = jnp.exp(2.0 * params[0]) - jnp.sum(cross * cho_solve(factor, cross.T).T, axis=1)
    return mean, jnp.clip(var, 1e-9, None) + jnp.exp(2.0 * params[2])


def make_data(rng, n):
    x = rng.uniform(-3.0, 3.0, size=n).astype(np.float32)
    y = (np.sin(2.0 * x) + 0.3 * x + 0.1 * rng.normal(size=n)).astype(np.float32)
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="a few steps")
    args = parser.parse_args()
    rng = np.random.RandomState(0)
    x, y = make_data(rng, 60)
    x_test, y_test = make_data(rng, 50)
    steps, step_size = (20, 0.01) if args.smoke else (200, 0.01)
    objective = jit(value_and_grad(neg_log_marginal))
    params = jnp.array([0.0, 0.0, -1.0])
    for step in range(steps + 1):
        value, grads = objective(params, x, y)
        if step % 10 == 0:
            print(f"step {step} nll {float(value):.5f} "
                  f"amp {float(jnp.exp(params[0])):.5f} "
                  f"len {float(jnp.exp(params[1])):.5f} "
                  f"noise {float(jnp.exp(params[2])):.5f}")
        params = params - step_size * grads
    mean, var = predict(params, x, y, x_test)
    rmse = jnp.sqrt(jnp.mean((mean - y_test) ** 2))
    mlpd = jnp.mean(norm.logpdf(y_test, mean, jnp.sqrt(var)))
    print(f"test rmse {float(rmse):.5f} mean log predictive density {float(mlpd):.5f}")


if __name__ == "__main__":
    main()
