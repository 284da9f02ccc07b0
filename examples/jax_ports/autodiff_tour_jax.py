"""A tour of composable transformations on a logistic-regression model: grad, value_and_grad,
per-example gradients with vmap, Hessian-vector products (forward-over-reverse), jacfwd /
jacrev / hessian, and a training loop in lax.fori_loop. Written for JAX.

autodiff_tour_fgrad.py is this file with only its imports changed (jax -> fgrad); the test
tests/examples/test_jax_ports.py checks that, and that both print the same numbers.

    python examples/jax_ports/autodiff_tour_jax.py [--smoke]
"""
import argparse

import jax.numpy as jnp
from jax import grad, hessian, jacfwd, jacrev, jit, jvp, lax, random, value_and_grad, vmap
from jax.nn import log_sigmoid, sigmoid


def predict(params, inputs):
    w, b = params
    return sigmoid(jnp.dot(inputs, w) + b)


def loss(params, inputs, targets):
    w, b = params
    logits = jnp.dot(inputs, w) + b
    log_lik = targets * log_sigmoid(logits) + (1 - targets) * log_sigmoid(-logits)
    return -jnp.mean(log_lik) + 0.01 * jnp.sum(w ** 2)


def make_data(key, n, d):
    k1, k2, k3 = random.split(key, 3)
    true_w = random.normal(k1, (d,))
    inputs = random.normal(k2, (n, d))
    noise = random.uniform(k3, (n,))
    targets = jnp.astype(sigmoid(jnp.dot(inputs, true_w)) > noise, jnp.float32)
    return inputs, targets


def hvp(f, x, v):
    return jvp(grad(f), (x,), (v,))[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="fewer training steps")
    args = parser.parse_args()
    inputs, targets = make_data(random.PRNGKey(0), 32, 4)
    params = (jnp.zeros(4), jnp.array(0.0))

    value, (dw, db) = value_and_grad(loss)(params, inputs, targets)
    print(f"loss {float(value):.6f} |dw| {float(jnp.linalg.norm(dw)):.6f} db {float(db):.6f}")

    per_example = vmap(grad(loss), in_axes=(None, 0, 0))(params, inputs, targets)
    norms = jnp.linalg.norm(per_example[0], axis=1)
    print(f"per-example grad norms mean {float(jnp.mean(norms)):.6f} "
          f"max {float(jnp.max(norms)):.6f}")

    w_loss = lambda w: loss((w, params[1]), inputs, targets)
    w0 = jnp.linspace(-0.5, 0.5, 4)
    v = jnp.ones(4)
    hv = hvp(w_loss, w0, v)
    full = hessian(w_loss)(w0)
    print(f"hvp {' '.join(f'{float(x):.6f}' for x in hv)}")
    print(f"hessian trace {float(jnp.trace(full)):.6f} "
          f"hvp error {float(jnp.max(jnp.abs(full @ v - hv))):.2e}")
    jf = jacfwd(lambda w: predict((w, 0.0), inputs[:3]))(w0)
    jr = jacrev(lambda w: predict((w, 0.0), inputs[:3]))(w0)
    print(f"jacobian sum {float(jnp.sum(jf)):.6f} fwd-rev {float(jnp.max(jnp.abs(jf - jr))):.2e}")

    step = jit(grad(loss))

    def body(i, p):
        g = step(p, inputs, targets)
        return (p[0] - 0.5 * g[0], p[1] - 0.5 * g[1])

    steps = 20 if args.smoke else 200
    trained = lax.fori_loop(0, steps, body, params)
    accuracy = jnp.mean((predict(trained, inputs) > 0.5) == (targets > 0.5))
    print(f"after {steps} steps loss {float(loss(trained, inputs, targets)):.6f} "
          f"accuracy {float(accuracy):.4f}")


if __name__ == "__main__":
    main()
