"""The stax layers both gen_stax_jax.py (with JAX's stax) and test_stax.py (with fgrad's)
build: name -> (layer made from a stax module, input shape, needs an rng)."""
from __future__ import annotations

from typing import Any, Callable


def _residual(s: Any) -> Any:
    return s.serial(s.FanOut(2), s.parallel(s.Dense(4), s.Identity), s.FanInSum)


CASES: dict[str, tuple[Callable[[Any], Any], tuple, bool]] = {
    "Dense": (lambda s: s.Dense(5), (-1, 3), False),
    "Conv": (lambda s: s.Conv(4, (3, 3)), (2, 8, 8, 3), False),
    "ConvSAME": (lambda s: s.Conv(4, (3, 3), (2, 2), "SAME"), (2, 9, 9, 3), False),
    "GeneralConvNCHW": (lambda s: s.GeneralConv(("NCHW", "OIHW", "NCHW"), 4, (3, 3),
                                                padding=((1, 2), (0, 1))), (2, 3, 7, 7), False),
    "ConvTransposeSAME": (lambda s: s.ConvTranspose(4, (3, 3), (2, 2), "SAME"), (2, 5, 5, 3),
                          False),
    "ConvTransposeVALID": (lambda s: s.ConvTranspose(4, (3, 3), (2, 2), "VALID"),
                           (2, 5, 5, 3), False),
    "Conv1DTranspose": (lambda s: s.Conv1DTranspose(4, (3,), (2,), "SAME"), (2, 5, 3), False),
    "BatchNorm": (lambda s: s.BatchNorm(), (2, 4, 4, 3), False),
    "BatchNormNoCenter": (lambda s: s.BatchNorm(axis=0, center=False), (6, 3), False),
    "MaxPool": (lambda s: s.MaxPool((2, 2), (2, 2)), (2, 5, 5, 3), False),
    "MaxPoolSAME": (lambda s: s.MaxPool((3, 3), (2, 2), "SAME"), (2, 5, 5, 3), False),
    "AvgPoolSAME": (lambda s: s.AvgPool((3, 3), (2, 2), "SAME"), (2, 5, 5, 3), False),
    "SumPoolNCHW": (lambda s: s.SumPool((2, 2), spec="NCHW"), (2, 3, 5, 5), False),
    "Flatten": (lambda s: s.Flatten, (2, 3, 4), False),
    "Dropout": (lambda s: s.Dropout(0.7), (4, 5), True),
    "activations": (lambda s: s.serial(s.Tanh, s.Exp, s.Softplus, s.Sigmoid, s.Elu,
                                       s.LeakyRelu, s.Selu, s.Gelu, s.Relu, s.Identity,
                                       s.Softmax, s.LogSoftmax), (2, 5), False),
    "mlp": (lambda s: s.serial(s.Dense(8), s.Relu, s.Dense(3), s.LogSoftmax), (-1, 4), False),
    "concat": (lambda s: s.serial(s.FanOut(2), s.parallel(s.Dense(3), s.Identity),
                                  s.FanInConcat()), (2, 4), False),
    "residual": (_residual, (2, 4), False),
    "shape_dependent": (lambda s: s.shape_dependent(lambda shape: s.Dense(shape[-1])),
                        (2, 4), False),
    "cnn_dropout": (lambda s: s.serial(s.Conv(4, (3, 3), padding="SAME"), s.Relu,
                                       s.MaxPool((2, 2), (2, 2)), s.Flatten, s.Dense(6),
                                       s.Dropout(0.5), s.LogSoftmax), (2, 6, 6, 2), True),
}
