"""Recurrent cells: LSTMCell and GRUCell (one time step; loop with `fgrad.lax.scan`).

Gate layouts follow PyTorch, so weights load from torch state dicts unchanged.
"""
from __future__ import annotations

import math

from fgrad.core.tensor import Tensor, as_tensor
from fgrad.nn.layers import split_key
from fgrad.nn.module import Module

__all__ = ["GRUCell", "LSTMCell"]


def _zero_state(x: Tensor, hidden_size: int) -> Tensor:
    return Tensor.zeros(*x.shape[:-1], hidden_size, dtype=x.dtype)


class LSTMCell(Module):
    """A long short-term memory cell: `(h, c) = cell(x, (h, c))`, as torch.nn.LSTMCell.

    Weights (4*hidden, input) and (4*hidden, hidden), gates in the order i, f, g, o, drawn
    uniformly from ±1/sqrt(hidden_size); biases start at zero (as the reference).
    """

    weight_ih: Tensor
    weight_hh: Tensor
    bias_ih: Tensor | None
    bias_hh: Tensor | None

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, *,
                 key: Tensor) -> None:
        stdv = 1.0 / math.sqrt(hidden_size)
        k_ih, k_hh = split_key(key, 2)
        self.weight_ih = Tensor.uniform(hidden_size * 4, input_size, low=-stdv, high=stdv,
                                        key=k_ih)
        self.weight_hh = Tensor.uniform(hidden_size * 4, hidden_size, low=-stdv, high=stdv,
                                        key=k_hh)
        self.bias_ih = Tensor.zeros(hidden_size * 4) if bias else None
        self.bias_hh = Tensor.zeros(hidden_size * 4) if bias else None

    def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None
                 ) -> tuple[Tensor, Tensor]:
        """One step on `x` (batch, input_size) or (input_size,); hc defaults to zeros."""
        x = as_tensor(x)
        if hc is None:
            zeros = _zero_state(x, self.weight_hh.shape[1])
            hc = (zeros, zeros)
        h, c = as_tensor(hc[0]), as_tensor(hc[1])
        gates = x.linear(self.weight_ih.T, self.bias_ih) + h.linear(self.weight_hh.T,
                                                                     self.bias_hh)
        i, f, g, o = gates.chunk(4, dim=-1)
        new_c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        new_h = o.sigmoid() * new_c.tanh()
        return new_h, new_c


class GRUCell(Module):
    """A gated recurrent unit cell: `h = cell(x, h)`, as torch.nn.GRUCell.

    Weights (3*hidden, input) and (3*hidden, hidden), gates in the order r, z, n; weights and
    biases are drawn uniformly from ±1/sqrt(hidden_size) (as PyTorch).
    """

    weight_ih: Tensor
    weight_hh: Tensor
    bias_ih: Tensor | None
    bias_hh: Tensor | None

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, *,
                 key: Tensor) -> None:
        stdv = 1.0 / math.sqrt(hidden_size)
        keys = split_key(key, 4)
        shapes = [(hidden_size * 3, input_size), (hidden_size * 3, hidden_size),
                  (hidden_size * 3,), (hidden_size * 3,)]
        self.weight_ih, self.weight_hh, bias_ih, bias_hh = (
            Tensor.uniform(*s, low=-stdv, high=stdv, key=k) for s, k in zip(shapes, keys))
        self.bias_ih = bias_ih if bias else None
        self.bias_hh = bias_hh if bias else None

    def __call__(self, x: Tensor, h: Tensor | None = None) -> Tensor:
        """One step on `x` (batch, input_size) or (input_size,); h defaults to zeros."""
        x = as_tensor(x)
        h = _zero_state(x, self.weight_hh.shape[1]) if h is None else as_tensor(h)
        r_i, z_i, n_i = x.linear(self.weight_ih.T, self.bias_ih).chunk(3, dim=-1)
        r_h, z_h, n_h = h.linear(self.weight_hh.T, self.bias_hh).chunk(3, dim=-1)
        r = (r_i + r_h).sigmoid()
        z = (z_i + z_h).sigmoid()
        n = (n_i + r * n_h).tanh()
        return (1 - z) * n + z * h
