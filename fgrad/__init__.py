"""fgrad: JAX-style transformations (grad, vmap, jit) over a tinygrad-style Tensor API."""
from fgrad.core import prims as _prims  # noqa: F401  (registers every primitive)
from fgrad.core import tree_util
from fgrad import lax
from fgrad.core.api_util import make_jaxpr
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.ir import ClosedJaxpr, Jaxpr
from fgrad.core.tensor import ConcretizationError, Tensor
from fgrad import random
from fgrad.transforms import (grad, hessian, jit, jacfwd, jacrev, jvp, linearize, stop_gradient,
                              value_and_grad, vjp, vmap)

__version__ = "0.1.0"
__all__ = ["ClosedJaxpr", "ConcretizationError", "DType", "Jaxpr", "Tensor", "dtypes",
           "lax", "make_jaxpr", "tree_util", "grad", "jit", "hessian", "jacfwd", "jacrev", "jvp",
           "linearize", "stop_gradient", "value_and_grad", "vjp", "vmap", "random"]
