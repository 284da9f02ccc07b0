"""Transformations as interpreters: jvp, linearize/vjp/grad, vmap, jit, control flow."""
from fgrad.transforms.autodiff import grad, linearize, stop_gradient, value_and_grad, vjp
from fgrad.transforms.batching import vmap
from fgrad.transforms.custom import checkpoint, custom_jvp, custom_vjp
from fgrad.transforms.jacobians import hessian, jacfwd, jacrev
from fgrad.transforms.jit import jit
from fgrad.transforms.jvp import jvp

__all__ = ["checkpoint", "custom_jvp", "custom_vjp", "grad", "hessian", "jacfwd", "jacrev",
           "jit", "jvp", "linearize", "stop_gradient", "value_and_grad", "vjp", "vmap"]
