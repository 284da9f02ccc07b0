"""fgrad.scipy: jax.scipy's special, linalg, stats and optimize functions over fgrad
Tensors."""
from fgrad.scipy import linalg, optimize, special, stats

__all__ = ["linalg", "optimize", "special", "stats"]
