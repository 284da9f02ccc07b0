"""Optax's optimizers by Optax's names, signatures and defaults: `adam`, `adamw`, `sgd`, ...

Each is the same chain of transformations as in Optax (e.g. `adamw` is `scale_by_adam`, then
`add_decayed_weights`, then `scale_by_learning_rate`), so `import fgrad.optim as optax` runs
an Optax program with Optax's numbers. `learning_rate` is a number, a Tensor or a schedule
`count -> lr`. Unlike fgrad's own classes (`Adam`, `SGD`, ...), these keep no hyperparameters
in the state; wrap one in `inject_hyperparams` for that, as in Optax.
"""
from __future__ import annotations

from typing import Any

from fgrad.optim.base import GradientTransformation, ScalarOrSchedule, chain, identity
from fgrad.optim.masking import masked
from fgrad.optim.scalings import (ema, scale_by_adadelta, scale_by_factored_rms, scale_by_lion,
                                  scale_by_optimistic_gradient, scale_by_param_block_rms,
                                  scale_by_rms, scale_by_rprop, scale_by_rss, scale_by_sign,
                                  scale_by_stddev, scale_by_trust_ratio,
                                  scale_by_learning_rate, trace)
from fgrad.optim.transforms import scale
from fgrad.optim.transforms_more import (Scalar, scale_by_adam, scale_by_adamax, scale_by_adan,
                                         scale_by_amsgrad, scale_by_belief, scale_by_novograd,
                                         scale_by_radam, scale_by_yogi)
from fgrad.optim.wrappers import add_decayed_weights, add_noise, clip_by_block_rms

MaskOrFn = Any


def sgd(learning_rate: ScalarOrSchedule, momentum: Scalar | None = None,
        nesterov: bool = False, accumulator_dtype: Any = None) -> GradientTransformation:
    """Stochastic gradient descent, with (Nesterov) momentum when `momentum` is given."""
    first = identity() if momentum is None else trace(momentum, nesterov, accumulator_dtype)
    return chain(first, scale_by_learning_rate(learning_rate))


def adam(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
         eps: Scalar = 1e-8, eps_root: Scalar = 0.0, mu_dtype: Any = None, *,
         nesterov: bool = False) -> GradientTransformation:
    """Adam: `-lr * m_hat / (sqrt(v_hat + eps_root) + eps)`."""
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def nadam(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
          eps: Scalar = 1e-8, eps_root: Scalar = 0.0, mu_dtype: Any = None, *,
          nesterov: bool = True) -> GradientTransformation:
    """NAdam: Adam with Nesterov momentum."""
    return adam(learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov)


def adamw(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
          eps: Scalar = 1e-8, eps_root: Scalar = 0.0, mu_dtype: Any = None,
          weight_decay: ScalarOrSchedule = 1e-4, mask: MaskOrFn = None, *,
          nesterov: bool = False) -> GradientTransformation:
    """AdamW: Adam plus decoupled weight decay, `-lr * (adam_direction + wd * param)`;
    `mask` (bools like the params, or params -> bools) picks the parameters that decay."""
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))


def nadamw(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
           eps: Scalar = 1e-8, eps_root: Scalar = 0.0, mu_dtype: Any = None,
           weight_decay: ScalarOrSchedule = 1e-4, mask: MaskOrFn = None, *,
           nesterov: bool = True) -> GradientTransformation:
    """NAdamW: AdamW with Nesterov momentum."""
    return adamw(learning_rate, b1, b2, eps, eps_root, mu_dtype, weight_decay, mask,
                 nesterov=nesterov)


def radam(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
          eps: Scalar = 1e-8, eps_root: Scalar = 0.0, threshold: Scalar = 5.0, *,
          nesterov: bool = False) -> GradientTransformation:
    """Rectified Adam."""
    return chain(scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def adamax(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
           eps: Scalar = 1e-8) -> GradientTransformation:
    """Adamax: Adam with the infinity norm in place of the second moment."""
    return chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))


def adamaxw(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
            eps: Scalar = 1e-8, weight_decay: ScalarOrSchedule = 1e-4, mask: MaskOrFn = None
            ) -> GradientTransformation:
    """Adamax with decoupled weight decay."""
    return chain(scale_by_adamax(b1, b2, eps), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def amsgrad(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
            eps: Scalar = 1e-8, eps_root: Scalar = 0.0, mu_dtype: Any = None,
            bias_correction_mu: bool = True, bias_correction_nu: bool = True
            ) -> GradientTransformation:
    """AMSGrad: Adam with the running maximum of the second moment."""
    return chain(scale_by_amsgrad(b1, b2, eps, eps_root, mu_dtype, bias_correction_mu,
                                  bias_correction_nu), scale_by_learning_rate(learning_rate))


def adabelief(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
              eps: Scalar = 1e-16, eps_root: Scalar = 1e-16, *, nesterov: bool = False
              ) -> GradientTransformation:
    """AdaBelief: Adam whose second moment tracks the gradient's deviation from `m`."""
    return chain(scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def adan(learning_rate: ScalarOrSchedule, b1: Scalar = 0.98, b2: Scalar = 0.92,
         b3: Scalar = 0.99, eps: Scalar = 1e-8, eps_root: Scalar = 1e-8,
         weight_decay: ScalarOrSchedule = 0.0, mask: MaskOrFn = None
         ) -> GradientTransformation:
    """Adan, with decoupled weight decay."""
    return chain(scale_by_adan(b1, b2, b3, eps, eps_root), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def yogi(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
         eps: Scalar = 1e-3) -> GradientTransformation:
    """Yogi: Adam with an additive second-moment update."""
    return chain(scale_by_yogi(b1, b2, eps), scale_by_learning_rate(learning_rate))


def novograd(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.25,
             eps: Scalar = 1e-6, eps_root: Scalar = 0.0, weight_decay: Scalar = 0.0
             ) -> GradientTransformation:
    """NovoGrad: layer-wise second moments."""
    return chain(scale_by_novograd(b1, b2, eps, eps_root, weight_decay),
                 scale_by_learning_rate(learning_rate))


def lamb(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.999,
         eps: Scalar = 1e-6, eps_root: Scalar = 0.0, weight_decay: ScalarOrSchedule = 0.0,
         mask: MaskOrFn = None) -> GradientTransformation:
    """LAMB: the AdamW direction scaled per parameter by the trust ratio |w| / |update|."""
    return chain(scale_by_adam(b1, b2, eps, eps_root), add_decayed_weights(weight_decay, mask),
                 scale_by_trust_ratio(), scale_by_learning_rate(learning_rate))


def lars(learning_rate: ScalarOrSchedule, weight_decay: ScalarOrSchedule = 0.0,
         weight_decay_mask: MaskOrFn = True, trust_coefficient: Scalar = 0.001,
         eps: Scalar = 0.0, trust_ratio_mask: MaskOrFn = True, momentum: Scalar = 0.9,
         nesterov: bool = False) -> GradientTransformation:
    """LARS: weight decay, the trust ratio `trust_coefficient * |w| / (|g| + eps)`, the
    learning rate, then momentum."""
    return chain(add_decayed_weights(weight_decay, weight_decay_mask),
                 masked(scale_by_trust_ratio(trust_coefficient=trust_coefficient, eps=eps),
                        trust_ratio_mask),
                 scale_by_learning_rate(learning_rate), trace(momentum, nesterov))


def lion(learning_rate: ScalarOrSchedule, b1: Scalar = 0.9, b2: Scalar = 0.99,
         mu_dtype: Any = None, weight_decay: ScalarOrSchedule = 1e-3, mask: MaskOrFn = None
         ) -> GradientTransformation:
    """Lion: `-lr * (sign((1 - b1) * g + b1 * m) + weight_decay * w)`."""
    return chain(scale_by_lion(b1, b2, mu_dtype), add_decayed_weights(weight_decay, mask),
                 scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate: ScalarOrSchedule, decay: Scalar = 0.9, eps: Scalar = 1e-8,
            initial_scale: Scalar = 0.0, eps_in_sqrt: bool = True, centered: bool = False,
            momentum: Scalar | None = None, nesterov: bool = False,
            bias_correction: bool = False) -> GradientTransformation:
    """Optax's RMSProp: `-lr * g / sqrt(v + eps)` (note: eps inside the root and decay 0.9,
    unlike PyTorch's; fgrad's `RMSprop` class follows PyTorch), optionally centered and
    with momentum."""
    scaler = scale_by_stddev if centered else scale_by_rms
    return chain(scaler(decay, eps, initial_scale, eps_in_sqrt, bias_correction),
                 scale_by_learning_rate(learning_rate),
                 identity() if momentum is None else trace(momentum, nesterov))


def adagrad(learning_rate: ScalarOrSchedule, initial_accumulator_value: Scalar = 0.1,
            eps: Scalar = 1e-7) -> GradientTransformation:
    """Optax's Adagrad: `-lr * g / sqrt(sum of g**2 + eps)`, the sum starting at
    `initial_accumulator_value` (fgrad's `Adagrad` class follows PyTorch)."""
    return chain(scale_by_rss(initial_accumulator_value, eps),
                 scale_by_learning_rate(learning_rate))


def adadelta(learning_rate: ScalarOrSchedule | None = None, rho: Scalar = 0.9,
             eps: Scalar = 1e-6, weight_decay: ScalarOrSchedule = 0.0,
             weight_decay_mask: MaskOrFn = None) -> GradientTransformation:
    """AdaDelta (with weight decay added to the gradient first)."""
    return chain(add_decayed_weights(weight_decay, weight_decay_mask),
                 scale_by_adadelta(rho, eps), scale_by_learning_rate(learning_rate))


def sign_sgd(learning_rate: ScalarOrSchedule) -> GradientTransformation:
    """signSGD: `-lr * sign(g)`."""
    return chain(scale_by_sign(), scale_by_learning_rate(learning_rate))


def signum(learning_rate: ScalarOrSchedule, beta: Scalar = 0.9, accumulator_dtype: Any = None
           ) -> GradientTransformation:
    """Signum: `-lr * sign(m)` with `m` a momentum (an EMA without debiasing)."""
    return chain(ema(beta, debias=False, accumulator_dtype=accumulator_dtype), scale_by_sign(),
                 scale_by_learning_rate(learning_rate))


def noisy_sgd(learning_rate: ScalarOrSchedule, eta: Scalar = 0.01, gamma: Scalar = 0.55,
              key: Any = None, *, seed: int | None = None) -> GradientTransformation:
    """SGD on gradients plus Gaussian noise of variance `eta / (t + 1) ** gamma`."""
    return chain(add_noise(eta, gamma, key, seed=seed), scale_by_learning_rate(learning_rate))


def fromage(learning_rate: ScalarOrSchedule, min_norm: Scalar = 1e-6
            ) -> GradientTransformation:
    """Fromage: trust-ratio steps shrunk by `1 / sqrt(1 + lr**2)`."""
    if not callable(learning_rate):
        mult = 1 / (1 + learning_rate ** 2) ** 0.5
        return chain(scale_by_trust_ratio(min_norm),
                     scale_by_learning_rate(learning_rate * mult),
                     add_decayed_weights(mult - 1))
    lr_fn = learning_rate

    def mult_lr(count: Any) -> Any:
        return 1 / (1 + lr_fn(count) ** 2) ** 0.5
    return chain(scale_by_trust_ratio(min_norm),
                 scale_by_learning_rate(lambda c: mult_lr(c) * lr_fn(c)),
                 add_decayed_weights(lambda c: mult_lr(c) - 1))


def optimistic_gradient_descent(learning_rate: ScalarOrSchedule, alpha: Scalar = 1.0,
                                beta: Scalar = 1.0) -> GradientTransformation:
    """Optimistic gradient descent: `-lr * ((alpha + beta) * g - beta * g_previous)`."""
    return chain(scale_by_optimistic_gradient(alpha, beta),
                 scale_by_learning_rate(learning_rate))


def optimistic_adam_v2(learning_rate: ScalarOrSchedule, *, alpha: Scalar = 1.0,
                       beta: Scalar = 1.0, b1: Scalar = 0.9, b2: Scalar = 0.999,
                       eps: Scalar = 1e-8, eps_root: Scalar = 0.0, mu_dtype: Any = None,
                       nesterov: bool = True) -> GradientTransformation:
    """Optimistic Adam: the optimistic-gradient rule applied to Adam's direction."""
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 scale_by_optimistic_gradient(alpha, beta),
                 scale_by_learning_rate(learning_rate))


def rprop(learning_rate: Scalar, eta_minus: Scalar = 0.5, eta_plus: Scalar = 1.2,
          min_step_size: Scalar = 1e-6, max_step_size: Scalar = 50.0
          ) -> GradientTransformation:
    """Rprop: sign-based steps with per-element adaptive sizes."""
    return chain(scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size,
                                max_step_size), scale(-1.0))


def adafactor(learning_rate: ScalarOrSchedule | None = None, min_dim_size_to_factor: int = 128,
              decay_rate: Scalar = 0.8, decay_offset: int = 0,
              multiply_by_parameter_scale: bool = True, clipping_threshold: Scalar | None = 1.0,
              momentum: Scalar | None = None, dtype_momentum: Any = "float32",
              weight_decay_rate: ScalarOrSchedule | None = None, eps: Scalar = 1e-30,
              factored: bool = True, weight_decay_mask: MaskOrFn = None
              ) -> GradientTransformation:
    """Adafactor: factored second moments, update clipping, relative step sizes."""
    parts = [scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor,
                                   eps)]
    if clipping_threshold is not None:
        parts.append(clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        parts.append(scale_by_learning_rate(learning_rate, flip_sign=False))
    if multiply_by_parameter_scale:
        parts.append(scale_by_param_block_rms())
    if momentum is not None:
        parts.append(ema(momentum, debias=False, accumulator_dtype=dtype_momentum))
    if weight_decay_rate is not None:
        parts.append(add_decayed_weights(weight_decay_rate, weight_decay_mask))
    parts.append(scale(-1))
    return chain(*parts)
