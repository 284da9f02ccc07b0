"""fgrad.scipy: jax.scipy's special, linalg and stats functions over fgrad Tensors."""
from fgrad.scipy import linalg, special, stats

__all__ = ["linalg", "special", "stats"]
