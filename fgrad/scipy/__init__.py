"""fgrad.scipy: jax.scipy's special, linalg, stats, signal and optimize functions over
fgrad Tensors."""
from fgrad.scipy import linalg, optimize, signal, special, stats

__all__ = ["linalg", "optimize", "signal", "special", "stats"]
