"""Buffer planning: a jitted training step's peak memory stays within 2x its live tensors
(inputs + outputs), because dead intermediates' buffers are reused."""
from __future__ import annotations

from typing import Any

import numpy as np

import fgrad
from fgrad import Tensor, nn, optim
from fgrad.lower.llvm.runtime import plan
from fgrad.lower.kernel.memory import memory_report


def mlp_train_step_jaxpr(batch: int) -> Any:
    keys = fgrad.random.split(fgrad.random.key(0), 3)
    model = nn.Sequential(nn.Linear(784, 512, key=keys[0]), Tensor.relu,
                          nn.Linear(512, 512, key=keys[1]), Tensor.relu,
                          nn.Linear(512, 10, key=keys[2]))
    opt = optim.Adam(lr=1e-3)

    def step(model: Any, state: Any, x: Tensor, y: Tensor) -> Any:
        loss, grads = fgrad.value_and_grad(
            lambda m: m(x).sparse_categorical_crossentropy(y))(model)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss
    x = Tensor(np.zeros((batch, 784), np.float32))
    y = Tensor(np.zeros(batch, np.int32))
    return fgrad.make_jaxpr(step)(model, opt.init(model), x, y).jaxpr


def test_training_step_peak_memory_is_within_twice_the_live_tensors() -> None:
    report = memory_report(plan(mlp_train_step_jaxpr(256)))
    assert report.peak_ratio <= 2.0, str(report)
    assert report.intermediates < report.without_reuse, str(report)  # buffers were reused
    assert "peak" in str(report)


def test_elementwise_chain_needs_no_intermediate_memory() -> None:
    jaxpr = fgrad.make_jaxpr(lambda x: ((x * 1.5 + 0.5).tanh() * x.sigmoid()
                                        + (-x * x).exp()))(Tensor(np.zeros(1024, np.float32)))
    report = memory_report(plan(jaxpr.jaxpr))
    assert report.intermediates == 0 and report.peak_ratio == 1.0
