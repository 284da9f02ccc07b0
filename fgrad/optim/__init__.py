"""fgrad.optim: optimizers as pure `(init, update)` pairs over pytrees, in the style of Optax.

    opt = fgrad.optim.AdamW(lr=1e-3)
    state = opt.init(params)
    updates, state = opt.update(grads, state, params)
    params = fgrad.optim.apply_updates(params, updates)
    state = fgrad.optim.set_hyperparams(state, lr=3e-4)   # no retrace under jit

Optax's names, signatures and formulas are here too (`adam`, `adamw`, `sgd`, `chain`,
`scale_by_adam`, `clip_by_global_norm`, the schedules, `losses`, ...), so an Optax program
runs with `import fgrad.optim as optax`.
"""
from fgrad.optim import losses, schedules
from fgrad.optim.base import (EmptyState, GradientTransformation, InjectHyperparamsState,
                              ScalarOrSchedule, Schedule, ScaleByScheduleState, apply_updates,
                              chain, get_hyperparams, identity, scale_by_schedule,
                              set_hyperparams)
from fgrad.optim.losses import (convex_kl_divergence, cosine_distance, cosine_similarity,
                                generalized_kl_divergence, hinge_loss, huber_loss,
                                kl_divergence, kl_divergence_with_log_targets, l2_loss,
                                log_cosh, multiclass_hinge_loss, multiclass_perceptron_loss,
                                perceptron_loss, poly_loss_cross_entropy,
                                safe_softmax_cross_entropy, sigmoid_binary_cross_entropy,
                                sigmoid_focal_loss, smooth_labels, softmax_cross_entropy,
                                softmax_cross_entropy_with_integer_labels, sparsemax_loss,
                                squared_error)
from fgrad.optim.masking import (MaskedNode, MaskedState, MultiTransformState, masked,
                                 multi_transform, set_to_zero)
from fgrad.optim.optax_aliases import (MaskOrFn, adabelief, adadelta, adafactor, adagrad, adam,
                                       adamax, adamaxw, adamw, adan, amsgrad, fromage, lamb,
                                       lars, lion, nadam, nadamw, noisy_sgd, novograd,
                                       optimistic_adam_v2, optimistic_gradient_descent,
                                       radam, rmsprop, rprop, sgd, sign_sgd, signum, yogi)
from fgrad.optim.optimizers import (LAMB, LARS, SGD, Adagrad, Adam, AdamW, Lion, RMSprop)
from fgrad.optim.scalings import (EmaState, FactoredState, ScaleByAdaDeltaState,
                                  ScaleByLionState, ScaleByOptimisticGradientState,
                                  ScaleByRmsState, ScaleByRmsWithCountState,
                                  ScaleByRpropState, ScaleByRStdDevState,
                                  ScaleByRStdDevWithCountState, adaptive_grad_clip, ema,
                                  normalize_by_update_norm,
                                  safe_norm, safe_root_mean_squares, scale_by_adadelta,
                                  scale_by_factored_rms, scale_by_learning_rate, scale_by_lion,
                                  scale_by_optimistic_gradient, scale_by_param_block_norm,
                                  scale_by_param_block_rms, scale_by_rms, scale_by_rprop,
                                  scale_by_rss, scale_by_sign, scale_by_stddev,
                                  scale_by_trust_ratio, trace)
from fgrad.optim.schedules import (constant_schedule, cosine_decay_schedule,
                                   cosine_onecycle_schedule, exponential_decay, join_schedules,
                                   linear_onecycle_schedule, linear_schedule,
                                   piecewise_constant_schedule, piecewise_interpolate_schedule,
                                   polynomial_schedule, sgdr_schedule, warmup_constant_schedule,
                                   warmup_cosine_decay_schedule,
                                   warmup_exponential_decay_schedule)
from fgrad.optim.transforms import (ScaleByAdamState, ScaleByRssState, TraceState, accumulate,
                                    global_norm, scale, trust_ratio)
from fgrad.optim.transforms_more import (ScaleByAdanState, ScaleByAmsgradState,
                                         ScaleByBeliefState, ScaleByNovogradState,
                                         bias_correction, safe_increment, scale_by_adam,
                                         scale_by_adamax, scale_by_adan, scale_by_amsgrad,
                                         scale_by_belief, scale_by_novograd, scale_by_radam,
                                         scale_by_yogi, update_infinity_moment, update_moment)
from fgrad.optim.wrappers import (AddNoiseState, ApplyEvery, ApplyIfFiniteState,
                                  GradientTransformationExtraArgs, MultiSteps, MultiStepsState,
                                  OptState, Params, Updates, WeightDecaySchedule,
                                  ZeroNansState, add_decayed_weights, add_noise,
                                  apply_every, apply_if_finite, centralize, clip,
                                  clip_by_block_rms,
                                  clip_by_global_norm, incremental_update, init_empty_state,
                                  inject_hyperparams, keep_params_nonnegative, named_chain,
                                  periodic_update, skip_large_updates, skip_not_finite,
                                  stateless, stateless_with_tree_map, with_extra_args_support,
                                  zero_nans)

safe_int32_increment = safe_increment
update_moment_per_elem_norm = update_moment

__all__ = [
    "losses", "schedules", "EmptyState", "GradientTransformation", "InjectHyperparamsState",
    "ScalarOrSchedule", "Schedule", "ScaleByScheduleState", "apply_updates", "chain",
    "get_hyperparams", "identity", "scale_by_schedule", "set_hyperparams", "convex_kl_divergence",
    "cosine_distance", "cosine_similarity", "generalized_kl_divergence", "hinge_loss",
    "huber_loss", "kl_divergence", "kl_divergence_with_log_targets", "l2_loss", "log_cosh",
    "multiclass_hinge_loss", "multiclass_perceptron_loss", "perceptron_loss",
    "poly_loss_cross_entropy", "safe_softmax_cross_entropy", "sigmoid_binary_cross_entropy",
    "sigmoid_focal_loss", "smooth_labels", "softmax_cross_entropy",
    "softmax_cross_entropy_with_integer_labels", "sparsemax_loss", "squared_error", "MaskedNode",
    "MaskedState", "MultiTransformState", "masked", "multi_transform", "set_to_zero", "MaskOrFn",
    "adabelief", "adadelta", "adafactor", "adagrad", "adam", "adamax", "adamaxw", "adamw", "adan",
    "amsgrad", "fromage", "lamb", "lars", "lion", "nadam", "nadamw", "noisy_sgd", "novograd",
    "optimistic_adam_v2", "optimistic_gradient_descent", "radam", "rmsprop", "rprop", "sgd",
    "sign_sgd", "signum", "yogi", "LAMB", "LARS", "SGD", "Adagrad", "Adam", "AdamW", "Lion",
    "RMSprop", "EmaState", "FactoredState", "ScaleByAdaDeltaState", "ScaleByLionState",
    "ScaleByOptimisticGradientState", "ScaleByRmsState", "ScaleByRmsWithCountState",
    "ScaleByRpropState", "ScaleByRStdDevState", "ScaleByRStdDevWithCountState",
    "adaptive_grad_clip", "ema", "normalize_by_update_norm", "safe_norm", "safe_root_mean_squares",
    "scale_by_adadelta", "scale_by_factored_rms", "scale_by_learning_rate", "scale_by_lion",
    "scale_by_optimistic_gradient", "scale_by_param_block_norm", "scale_by_param_block_rms",
    "scale_by_rms", "scale_by_rprop", "scale_by_rss", "scale_by_sign", "scale_by_stddev",
    "scale_by_trust_ratio", "trace", "constant_schedule", "cosine_decay_schedule",
    "cosine_onecycle_schedule", "exponential_decay", "join_schedules", "linear_onecycle_schedule",
    "linear_schedule", "piecewise_constant_schedule", "piecewise_interpolate_schedule",
    "polynomial_schedule", "sgdr_schedule", "warmup_constant_schedule",
    "warmup_cosine_decay_schedule", "warmup_exponential_decay_schedule", "ScaleByAdamState",
    "ScaleByRssState", "TraceState", "accumulate", "global_norm", "scale", "trust_ratio",
    "ScaleByAdanState", "ScaleByAmsgradState", "ScaleByBeliefState", "ScaleByNovogradState",
    "bias_correction", "safe_increment", "safe_int32_increment", "scale_by_adam",
    "scale_by_adamax", "scale_by_adan", "scale_by_amsgrad", "scale_by_belief", "scale_by_novograd",
    "scale_by_radam", "scale_by_yogi", "update_infinity_moment", "update_moment",
    "update_moment_per_elem_norm", "AddNoiseState", "ApplyEvery", "ApplyIfFiniteState",
    "GradientTransformationExtraArgs", "MultiSteps", "MultiStepsState", "OptState", "Params",
    "Updates", "WeightDecaySchedule", "ZeroNansState", "add_decayed_weights", "add_noise",
    "apply_every", "apply_if_finite", "centralize", "clip", "clip_by_block_rms",
    "clip_by_global_norm", "incremental_update", "init_empty_state", "inject_hyperparams",
    "keep_params_nonnegative", "named_chain", "periodic_update", "skip_large_updates",
    "skip_not_finite", "stateless", "stateless_with_tree_map", "with_extra_args_support",
    "zero_nans",
]
