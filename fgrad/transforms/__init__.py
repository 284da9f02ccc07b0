"""Transformations as interpreters: jvp, linearize/vjp/grad, vmap, jit, control flow."""
from fgrad.transforms.autodiff import grad, linearize, stop_gradient, value_and_grad, vjp
from fgrad.transforms.batching import vmap
from fgrad.transforms.custom import checkpoint, custom_jvp, custom_vjp
from fgrad.transforms.jacobians import hessian, jacfwd, jacrev
from fgrad.transforms.jit import jit
from fgrad.transforms.jvp import jvp
from fgrad.core.traceback_util import transform_boundary as _boundary

# errors raised through these entry points show the user's frames, not fgrad's
grad, value_and_grad, vjp = _boundary(grad), _boundary(value_and_grad), _boundary(vjp)
linearize, vmap, jvp = _boundary(linearize), _boundary(vmap), _boundary(jvp)
jacfwd, jacrev, hessian = _boundary(jacfwd), _boundary(jacrev), _boundary(hessian)
checkpoint = _boundary(checkpoint)

__all__ = ["checkpoint", "custom_jvp", "custom_vjp", "grad", "hessian", "jacfwd", "jacrev",
           "jit", "jvp", "linearize", "stop_gradient", "value_and_grad", "vjp", "vmap"]
