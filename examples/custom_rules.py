"""Custom derivative rules and a look at the IR.

    python examples/custom_rules.py [--smoke]

- `custom_jvp`: a numerically stable log(1 + exp(x)) whose derivative is sigmoid(x).
- `custom_vjp`: gradient clipping inside the backward pass.
- `make_jaxpr` and `jit(...).lower(...).as_text()`: the traced program and what the jit
  backend makes of it.
"""
from __future__ import annotations

import argparse

import fgrad
from fgrad import Tensor


@fgrad.custom_jvp
def softplus(x: Tensor) -> Tensor:
    """log(1 + exp(x)) without overflow."""
    return x.maximum(0) + ((-x.abs()).exp() + 1).log()


@softplus.defjvp
def softplus_jvp(primals: tuple, tangents: tuple) -> tuple:
    (x,), (x_dot,) = primals, tangents
    return softplus(x), x_dot * x.sigmoid()


@fgrad.custom_vjp
def clip_gradient(x: Tensor) -> Tensor:
    """The identity, but its gradient is clipped to [-1, 1]."""
    return x


def _clip_fwd(x: Tensor) -> tuple:
    return x, None


def _clip_bwd(_: None, g: Tensor) -> tuple:
    return (g.maximum(-1.0).minimum(1.0),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="accepted for CI; always fast")
    parser.parse_args()
    x = Tensor([-100.0, -1.0, 0.0, 1.0, 100.0])
    print("softplus:", softplus(x).numpy())
    print("d softplus (custom_jvp rule = sigmoid):",
          fgrad.grad(lambda v: softplus(v).sum())(x).numpy())
    print("grad of 10 * clip_gradient(x):",
          fgrad.grad(lambda v: (clip_gradient(v) * 10.0).sum())(x).numpy())

    def f(v: Tensor) -> Tensor:
        return (softplus(v) * v.sin()).sum()

    print("\nmake_jaxpr(f):")
    print(fgrad.make_jaxpr(f)(x))
    print("\nmake_jaxpr(grad(f)):")
    print(fgrad.make_jaxpr(fgrad.grad(f))(x))
    print("\njit(f).lower(x).as_text():")
    print(fgrad.jit(f).lower(x).as_text())


if __name__ == "__main__":
    main()
