"""fgrad: JAX-style transformations (grad, vmap, jit) over a tinygrad-style Tensor API."""
import sys as _sys

from fgrad.core import prims as _prims  # noqa: F401  (registers every primitive)
from fgrad.core import tree_util
from fgrad.core.api_util import make_jaxpr
from fgrad.core import device as _device
from fgrad.core.device import devices
from fgrad.core.dtypes import DType, dtypes
from fgrad.core.ir import ClosedJaxpr, Jaxpr
from fgrad.core.tensor import ConcretizationError, Tensor
from fgrad.transforms.caches import clear_caches
from fgrad import distributed, lax, nn, optim, random
from fgrad.distributed import process_count, process_index
from fgrad.transforms import (checkpoint, custom_jvp, custom_vjp, grad, hessian, jacfwd,
                              jacrev, jit, jvp, linearize, stop_gradient, value_and_grad,
                              vjp, vmap)
from fgrad.transforms import executables as _executables



def _load_native_compilers() -> None:
    """Register the "llvm" compiler, and "opencl" when pyopencl is installed."""
    import fgrad.lower  # noqa: F401


def _load_opencl_devices() -> None:
    """Register the OpenCL devices ("CL:n") when pyopencl is installed."""
    try:
        import fgrad.lower.opencl.eager  # noqa: F401
    except ImportError:
        pass


# Backends plug in from here, the top of the package: core and transforms never import them.
_executables.BACKEND_LOADERS.append(_load_native_compilers)
_device.DEVICE_LOADERS.append(_load_opencl_devices)

from fgrad.config import config, disable_jit  # noqa: E402  (the object shadows the module)
from fgrad.transforms.nan_check import debug_infs, debug_nans  # noqa: E402
from fgrad.core.precision import Float64PromotionWarning  # noqa: E402
from fgrad.core.ir import ShapedArray  # noqa: E402
from fgrad.core.methods.interop import block_until_ready, from_dlpack  # noqa: E402
from fgrad.transforms.eval_shape import eval_shape  # noqa: E402
from fgrad.transforms.remat_policies import (checkpoint_name, checkpoint_policies,  # noqa: E402
                                             print_saved_residuals)
from fgrad import debug, flatten_util, profiler, tree, typing  # noqa: E402
from fgrad.transforms.extras.callback import pure_callback  # noqa: E402
from fgrad.transforms.extras.contexts import ensure_compile_time_eval, named_scope  # noqa: E402
from fgrad.transforms.extras.devices import (default_backend, device_get,  # noqa: E402
                                             local_devices)
from fgrad.transforms.extras.linear import closure_convert, linear_transpose  # noqa: E402
from fgrad.transforms.extras import toplevel as _toplevel  # noqa: E402
from fgrad.transforms.extras.states import (check_tracer_leaks, checking_leaks,  # noqa: E402
                                            default_device, enable_x64, log_compiles,
                                            transfer_guard, transfer_guard_device_to_device,
                                            transfer_guard_device_to_host,
                                            transfer_guard_host_to_device)
from fgrad.transforms.extras.toplevel import (custom_gradient, device_count,  # noqa: E402
                                              host_count, host_id, host_ids,
                                              local_device_count, named_call, pmap,
                                              print_environment_info, process_indices, typeof)

_toplevel.PROCESS_QUERIES.update(index=process_index, count=process_count)

# jax.sharding (one device: shardings are validated and recorded, not applied), as `fgrad.sharding`
from fgrad.transforms.extras import sharding  # noqa: E402
from fgrad.transforms.extras.shard_map import shard_map  # noqa: E402
from fgrad.transforms.extras.sharding import (NamedSharding, P, device_put,  # noqa: E402
                                              make_mesh, reshard, set_mesh)
_sys.modules.setdefault(__name__ + ".sharding", sharding)

# jax.lax's special functions; their code lives in fgrad.scipy, a layer above fgrad.lax, so the
# package root wires them in
from fgrad.scipy import special as _special  # noqa: E402

for _name, _fn in (("lgamma", _special.gammaln), ("digamma", _special.digamma),
                   ("erf_inv", _special.erfinv), ("erfc", _special.erfc)):
    setattr(lax, _name, _fn)
lax.special_fns.SCIPY_HOOKS.update(gammainc=_special.gammainc, gammaincc=_special.gammaincc,
                                   betainc=_special.betainc, i0e=_special.i0e,
                                   digamma=_special.digamma)

# `from fgrad.tree_util import tree_map, Partial` works as `from jax.tree_util import ...`
_sys.modules.setdefault(__name__ + ".tree_util", tree_util)
for _name, _fn in tree.TREE_UTIL_EXTRAS.items():  # jax.tree_util names that live in fgrad.tree
    setattr(tree_util, _name, _fn)
    tree_util.__all__.append(_name)

ShapeDtypeStruct = ShapedArray
Array = Tensor  # jax.Array, for annotations and isinstance checks

remat = checkpoint
jacobian = jacrev  # as in JAX
__version__ = "0.1.0"
__all__ = [
    "Array", "ClosedJaxpr", "ConcretizationError", "DType", "Float64PromotionWarning",
    "Jaxpr", "ShapeDtypeStruct", "ShapedArray", "Tensor", "block_until_ready", "checkpoint",
    "checkpoint_name", "checkpoint_policies", "clear_caches", "closure_convert", "config",
    "custom_jvp", "custom_vjp", "debug", "debug_infs", "debug_nans", "default_backend",
    "device_get", "device_put", "devices", "disable_jit", "distributed", "dtypes",
    "ensure_compile_time_eval", "eval_shape", "flatten_util", "from_dlpack", "grad", "hessian",
    "jacfwd", "jacobian", "jacrev", "jit", "jvp", "lax", "linear_transpose", "linearize",
    "local_devices", "make_jaxpr", "named_scope", "nn", "optim", "print_saved_residuals",
    "process_count", "process_index", "profiler", "pure_callback", "random", "remat",
    "stop_gradient", "tree", "tree_util", "typing", "value_and_grad", "vjp", "vmap"]
__all__ += [
    "check_tracer_leaks", "checking_leaks", "custom_gradient", "default_device", "device_count",
    "enable_x64", "host_count", "host_id", "host_ids", "local_device_count", "log_compiles",
    "named_call", "pmap", "print_environment_info", "process_indices", "transfer_guard",
    "transfer_guard_device_to_device", "transfer_guard_device_to_host",
    "transfer_guard_host_to_device", "typeof"]
__all__ += ["NamedSharding", "P", "make_mesh", "reshard", "set_mesh", "shard_map", "sharding"]
