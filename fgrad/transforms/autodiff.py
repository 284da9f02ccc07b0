"""The grad family: vjp, grad, value_and_grad, linearize, jacfwd, jacrev, hessian."""
from __future__ import annotations

import functools
from typing import Any, Callable, Literal, Sequence, TypeVar, overload

from typing_extensions import ParamSpec

from fgrad.core import tree_util
from fgrad.core.api_util import flatten_args, fn_name
from fgrad.core.prims import stop_gradient as _stop_gradient_prim
from fgrad.core.prims import zeros
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.transforms.transpose import linearize_flat

ArgNums = int | Sequence[int]
P = ParamSpec("P")
R = TypeVar("R")
Aux = TypeVar("Aux")
PyTree = Any  # gradients have the pytree structure of the differentiated arguments


def _flat_fn(fn: Callable[..., Any], in_tree: Any, out_box: list[Any],
             has_aux: bool = False) -> Callable[..., list[Any]]:
    def flat(*leaves: Any) -> list[Any]:
        out = fn(*tree_util.tree_unflatten(in_tree, list(leaves)))
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise TypeError(f"{fn_name(fn)} was transformed with has_aux=True, so it must "
                                f"return a pair (output, aux); got {type(out).__name__}")
            out, aux = out
            out_box.append(_primal_values(aux))
        leaves_out, tree = tree_util.tree_flatten(out)
        out_box.insert(0, tree)
        for leaf in leaves_out:
            if not isinstance(leaf, Tensor):
                raise TypeError(f"{fn_name(fn)} returned a {type(leaf).__name__}; outputs of "
                                f"differentiated functions must be Tensors")
        return leaves_out
    return flat


def _primal_values(tree: Any) -> Any:
    """`tree` with this trace's JVP tracers replaced by their primals (aux is not
    differentiated, and its tracers must not leak out of the transformation)."""
    from fgrad.core.trace import current_trace
    trace = current_trace()
    split = getattr(trace, "split", None)
    if split is None:
        return tree
    return tree_util.tree_map(lambda a: split(a)[0] if isinstance(a, Tensor) else a, tree)


def _primal_of(x: Any) -> Any:
    """An aux output leaves the transformation as a plain value (no derivative)."""
    from fgrad.core.trace import current_trace
    from fgrad.transforms.jvp import JVPTracer
    trace = current_trace()
    if isinstance(x, JVPTracer) and x._trace is trace:
        return x.primal
    return x


def vjp(fn: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """`(out, vjp_fn)` (plus aux): vjp_fn(cotangent) gives cotangents for every primal."""
    leaves, in_tree, _ = flatten_args(primals, fn)
    diff = [x.dtype.is_float for x in leaves]
    box: list[Any] = []
    outs, lin = linearize_flat(_flat_fn(fn, in_tree, box, has_aux), leaves, diff)
    out_tree = box[0]
    out = tree_util.tree_unflatten(out_tree, outs)

    def vjp_fn(ct: Any) -> tuple[Any, ...]:
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        ct_leaves = [c if isinstance(c, Tensor) else as_tensor(c) for c in ct_leaves]
        if ct_tree != out_tree:
            raise ValueError(f"vjp_fn: cotangent structure {ct_tree} differs from the output "
                             f"structure {out_tree}")
        for c, o in zip(ct_leaves, outs, strict=True):
            if c.shape != o.shape:
                raise ValueError(f"vjp_fn: cotangent shape {c.shape} != output shape {o.shape}")
        in_cts = iter(lin.transpose([c.cast(o.dtype) for c, o in zip(ct_leaves, outs)]))
        grads = []
        for x, d in zip(leaves, diff, strict=True):
            g = next(in_cts) if d else None
            grads.append(zeros(x.shape, x.dtype) if g is None else g)
        return tuple(tree_util.tree_unflatten(in_tree, grads))

    return (out, vjp_fn, box[1]) if has_aux else (out, vjp_fn)


def _argnums_tuple(argnums: ArgNums, nargs: int, fn: Callable[..., Any]) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not -nargs <= n < nargs:
            raise ValueError(f"argnums {argnums} is out of range: {fn_name(fn)} was called "
                             f"with {nargs} positional arguments")
    return tuple(n % nargs for n in nums)


def _check_float_args(fn: Callable[..., Any], args: Sequence[Any], nums: Sequence[int],
                      what: str) -> None:
    for n in nums:
        for leaf in tree_util.tree_leaves(args[n]):
            dtype = leaf.dtype if isinstance(leaf, Tensor) else Tensor(leaf).dtype
            if not dtype.is_float:
                raise TypeError(f"{what} requires floating-point inputs, but argument {n} of "
                                f"{fn_name(fn)} has dtype {dtype.name}; cast it with "
                                f".cast(dtypes.float32) or exclude it from argnums")


@overload
def value_and_grad(fn: Callable[P, R], argnums: ArgNums = 0, has_aux: Literal[False] = False
                   ) -> Callable[P, tuple[R, PyTree]]: ...


@overload
def value_and_grad(fn: Callable[P, tuple[R, Aux]], argnums: ArgNums = 0, *,
                   has_aux: Literal[True]) -> Callable[P, tuple[tuple[R, Aux], PyTree]]: ...


def value_and_grad(fn: Callable[P, Any], argnums: ArgNums = 0, has_aux: bool = False
                   ) -> Callable[P, Any]:
    """A function returning `(fn(*args), gradient)` (`((value, aux), grad)` with has_aux)."""
    return _value_and_grad(fn, argnums, has_aux)


def _value_and_grad(fn: Callable[P, Any], argnums: ArgNums, has_aux: bool) -> Callable[P, Any]:
    @functools.wraps(fn)
    def value_and_grad_fn(*args: Any, **kwargs: Any) -> Any:
        nums = _argnums_tuple(argnums, len(args), fn)
        _check_float_args(fn, args, nums, "grad")

        def partial_fn(*diff_args: Any) -> Any:
            full = list(args)
            for n, a in zip(nums, diff_args, strict=True):
                full[n] = a
            return fn(*full, **kwargs)

        partial_fn.__name__ = fn_name(fn)  # errors name the user's function
        res = vjp(partial_fn, *[args[n] for n in nums], has_aux=has_aux)
        out, vjp_fn = res[0], res[1]
        if not isinstance(out, Tensor) or out.shape != () or not out.dtype.is_float:
            what = f"shape {out.shape} {out.dtype.name}" if isinstance(out, Tensor) \
                else type(out).__name__
            raise TypeError(f"grad requires {fn_name(fn)} to return a float scalar, got "
                            f"{what}. Reduce it (e.g. .sum() or .mean()), or use jacrev / "
                            f"vmap(grad(...)) for non-scalar outputs")
        grads = vjp_fn(Tensor(1.0, dtype=out.dtype))
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        return ((out, res[2]), g) if has_aux else (out, g)

    return value_and_grad_fn


@overload
def grad(fn: Callable[P, Any], argnums: ArgNums = 0, has_aux: Literal[False] = False
         ) -> Callable[P, PyTree]: ...


@overload
def grad(fn: Callable[P, tuple[Any, Aux]], argnums: ArgNums = 0, *, has_aux: Literal[True]
         ) -> Callable[P, tuple[PyTree, Aux]]: ...


def grad(fn: Callable[P, Any], argnums: ArgNums = 0, has_aux: bool = False
         ) -> Callable[P, Any]:
    """The gradient of a scalar-valued `fn` with respect to argument(s) `argnums`."""
    vg = _value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def grad_fn(*args: Any, **kwargs: Any) -> Any:
        (value, g) = vg(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return grad_fn


def linearize(fn: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """`(fn(*primals), f_jvp)` where `f_jvp(*tangents)` evaluates the linearized function."""
    leaves, in_tree, _ = flatten_args(primals, fn)
    diff = [x.dtype.is_float for x in leaves]
    box: list[Any] = []
    outs, lin = linearize_flat(_flat_fn(fn, in_tree, box), leaves, diff)
    out_tree = box[0]

    def f_jvp(*tangents: Any) -> Any:
        t_leaves, _ = tree_util.tree_flatten(tuple(tangents))
        used = [t for t, d in zip(t_leaves, diff, strict=True) if d]
        return tree_util.tree_unflatten(out_tree, lin(*used))

    f_jvp.jaxpr = lin.jaxpr  # type: ignore[attr-defined]
    return tree_util.tree_unflatten(out_tree, outs), f_jvp


def stop_gradient(x: Any) -> Any:
    """The value of `x` (a pytree) with derivatives blocked."""
    return tree_util.tree_map(lambda t: _stop_gradient_prim(t) if isinstance(t, Tensor)
                              and t.dtype.is_float else t, x)
