"""fgrad.optim: optimizers as pure `(init, update)` pairs over pytrees, in the style of Optax.

    opt = fgrad.optim.AdamW(lr=1e-3)
    state = opt.init(params)
    updates, state = opt.update(grads, state, params)
    params = fgrad.optim.apply_updates(params, updates)
    state = fgrad.optim.set_hyperparams(state, lr=3e-4)   # no retrace under jit
"""
from fgrad.optim.base import (EmptyState, GradientTransformation, InjectHyperparamsState,
                              ScaleByScheduleState, apply_updates, chain, get_hyperparams,
                              identity, inject_hyperparams, scale_by_schedule, set_hyperparams)
from fgrad.optim.masking import (MaskedNode, MaskedState, MultiTransformState, masked,
                                 multi_transform, set_to_zero)
from fgrad.optim.optimizers import (LAMB, LARS, SGD, Adagrad, Adam, AdamW, Lion, RMSprop)
from fgrad.optim.schedules import (constant_schedule, cosine_decay_schedule, exponential_decay,
                                   join_schedules, linear_schedule, piecewise_constant_schedule,
                                   polynomial_schedule, warmup_cosine_decay_schedule)
from fgrad.optim.transforms import (MultiSteps, MultiStepsState, ScaleByAdamState,
                                    ScaleByLionState, ScaleByRmsState, ScaleByRssState,
                                    TraceState, accumulate, add_decayed_weights,
                                    clip_by_global_norm, global_norm, scale,
                                    scale_by_adam, scale_by_learning_rate, scale_by_lion,
                                    scale_by_rms, scale_by_rss, scale_by_trust_ratio, trace,
                                    trust_ratio)

__all__ = [
    "EmptyState", "GradientTransformation", "InjectHyperparamsState", "ScaleByScheduleState",
    "apply_updates", "chain", "get_hyperparams", "identity", "inject_hyperparams",
    "scale_by_schedule", "set_hyperparams",
    "MaskedNode", "MaskedState", "MultiTransformState", "masked", "multi_transform",
    "set_to_zero",
    "LAMB", "LARS", "SGD", "Adagrad", "Adam", "AdamW", "Lion", "RMSprop",
    "constant_schedule", "cosine_decay_schedule", "exponential_decay", "join_schedules",
    "linear_schedule", "piecewise_constant_schedule", "polynomial_schedule",
    "warmup_cosine_decay_schedule",
    "MultiSteps", "MultiStepsState", "ScaleByAdamState", "ScaleByLionState", "ScaleByRmsState",
    "ScaleByRssState", "TraceState", "accumulate", "add_decayed_weights",
    "clip_by_global_norm", "global_norm", "scale", "scale_by_adam", "scale_by_learning_rate",
    "scale_by_lion", "scale_by_rms", "scale_by_rss", "scale_by_trust_ratio", "trace",
    "trust_ratio",
]
