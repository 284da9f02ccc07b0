"""fgrad.nn: `Module` (immutable pytree records), layers, and `state` (checkpoint files).

A model is a pytree of Tensors: pass it to `fgrad.grad`, `vmap`, `jit` and optimizers as is.
`nn.initializers` holds jax.nn.initializers' builders; `nn.state` is imported on first use.
"""
from __future__ import annotations

import importlib
from typing import Any

from fgrad.nn.layers import (
    BatchNorm,
    BatchNorm1d,
    BatchNorm2d,
    Conv1d,
    Conv2d,
    ConvTranspose1d,
    ConvTranspose2d,
    Dropout,
    Embedding,
    GroupNorm,
    InstanceNorm,
    Lambda,
    LayerNorm,
    LayerNorm2d,
    Linear,
    RMSNorm,
    Sequential,
)
from fgrad.nn.layers_attention import MultiHeadAttention
from fgrad.nn.layers_rnn import GRUCell, LSTMCell
from fgrad.nn.module import FrozenModuleError, Module, tree_at
from fgrad.nn.trainable import Frozen, combine, partition, trainable_mask
from fgrad.nn.functions import *  # noqa: E402,F401,F403  (jax.nn's functions)
from fgrad.nn import functions as _functions
from fgrad.nn import initializers

__all__ = ["BatchNorm", "BatchNorm1d", "BatchNorm2d", "Conv1d", "Conv2d", "ConvTranspose1d",
           "ConvTranspose2d", "Dropout", "Embedding", "Frozen", "FrozenModuleError", "GRUCell",
           "GroupNorm", "InstanceNorm", "LSTMCell", "Lambda", "LayerNorm", "LayerNorm2d",
           "Linear", "Module", "MultiHeadAttention", "RMSNorm", "Sequential", "combine",
           "initializers", "partition", "state", "trainable_mask", "tree_at"] + _functions.__all__


def __getattr__(name: str) -> Any:
    """Import `fgrad.nn.state` lazily, so the layers work even while it is unavailable."""
    if name == "state":
        return importlib.import_module("fgrad.nn.state")
    raise AttributeError(f"module 'fgrad.nn' has no attribute {name!r}")
