"""fgrad.nn: `Module` (immutable pytree records), layers, and `state` (checkpoint files).

A model is a pytree of Tensors: pass it to `fgrad.grad`, `vmap`, `jit` and optimizers as is.
`nn.initializers` holds jax.nn.initializers' builders; `nn.state` is imported on first use.
Equinox's API is here too (`import fgrad.nn as eqx`): `filter_jit`, `filter_grad`, ...
(fgrad/nn/filters.py) and `eqx.nn.Linear`, `eqx.nn.MLP`, ... (`nn.nn`: fgrad/nn/eqx_layers.py,
single-example layers with Equinox's signatures).
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
from fgrad.nn.module import FrozenModuleError, Module, field, tree_at
from fgrad.nn.trainable import Frozen, combine, partition, trainable_mask
from fgrad.nn.filters import (apply_updates, filter, filter_grad, filter_jit,  # noqa: A004
                              filter_value_and_grad, filter_vmap, if_array, is_array,
                              is_array_like, is_inexact_array, is_inexact_array_like,
                              tree_equal)
from fgrad.nn.eqx_layers import (default_deserialise_filter_spec,
                                default_serialise_filter_spec, tree_deserialise_leaves,
                                tree_serialise_leaves)
from fgrad.nn import eqx_layers as nn  # `import fgrad.nn as eqx`: eqx.nn.Linear, eqx.nn.MLP
from fgrad.nn.functions import *  # noqa: E402,F401,F403  (jax.nn's functions)
from fgrad.nn import functions as _functions
from fgrad.nn import initializers

__all__ = ["BatchNorm", "BatchNorm1d", "BatchNorm2d", "Conv1d", "Conv2d", "ConvTranspose1d",
           "ConvTranspose2d", "Dropout", "Embedding", "Frozen", "FrozenModuleError", "GRUCell",
           "GroupNorm", "InstanceNorm", "LSTMCell", "Lambda", "LayerNorm", "LayerNorm2d",
           "Linear", "Module", "MultiHeadAttention", "RMSNorm", "Sequential", "combine",
           "initializers", "partition", "state", "trainable_mask", "tree_at",
           # Equinox's API (`filter` and `nn` are left out of `import *`: they would shadow
           # the builtin and the user's `nn`)
           "apply_updates", "field", "filter_grad", "filter_jit", "filter_value_and_grad",
           "filter_vmap", "if_array", "is_array", "is_array_like", "is_inexact_array",
           "default_deserialise_filter_spec", "default_serialise_filter_spec",
           "is_inexact_array_like", "tree_deserialise_leaves", "tree_equal",
           "tree_serialise_leaves"] + _functions.__all__


def __getattr__(name: str) -> Any:
    """Import `fgrad.nn.state` lazily, so the layers work even while it is unavailable."""
    if name == "state":
        return importlib.import_module("fgrad.nn.state")
    raise AttributeError(f"module 'fgrad.nn' has no attribute {name!r}")
