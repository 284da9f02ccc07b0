"""Collectives over a named `vmap` axis: `psum`, `pmean`, `pmax`, `pmin`, `all_gather`,
`axis_index` (JAX's names, reached as `fgrad.lax.psum` etc.).

    fgrad.vmap(lambda x: x / fgrad.lax.psum(x, "batch"), axis_name="batch")(xs)

Inside `vmap(f, axis_name="i")`, `psum(x, "i")` is the sum of `x` over every element of the
mapped axis, the same value for each (so a batch statistic can be written per example). They
are one primitive, `collective`, whose named-axis rule the BatchTrace of that name applies
(a reduction over its batch dimension); other traces batch it elementwise, differentiate it
(psum, pmean and all_gather are linear; pmax/pmin pass the tangent of the arg-max
members) and stage it. Used outside a vmap with that name, it raises NameError.
"""
from __future__ import annotations

from typing import Any

from fgrad.core import tree_util
from fgrad.core.ir import ShapedArray
from fgrad.core.primitive import Primitive
from fgrad.core.prims._util import move_bdim
from fgrad.core.tensor import Tensor, as_tensor
from fgrad.core.trace import current_trace, set_current_trace

__all__ = ["all_gather", "axis_index", "pmax", "pmean", "pmin", "psum"]

collective_p = Primitive("collective", linear=True)
_REDUCE = {"sum": "sum", "mean": "mean", "max": "max", "min": "min"}


def _named_trace(axis_name: Any, who: str) -> Any:
    from fgrad.transforms.batching import BatchTrace
    trace: Any = current_trace()
    while trace is not None:
        if isinstance(trace, BatchTrace) and trace.axis_name == axis_name:
            return trace
        trace = getattr(trace, "parent", None)
    raise NameError(f"{who}: unbound axis name {axis_name!r}; call it inside "
                    f"fgrad.vmap(f, axis_name={axis_name!r})")


def _bind(x: Any, op: str, axis_name: Any, who: str, axis: int = 0, tiled: bool = False
          ) -> Any:
    if isinstance(axis_name, (tuple, list)):   # several named axes: one after the other
        if op == "gather":
            raise NotImplementedError(f"{who} over several axes {tuple(axis_name)} is not "
                                      f"supported; gather over one axis name at a time")
        for name in axis_name:
            x = _bind(x, op, name, who)
        return x
    size = _named_trace(axis_name, who).axis_size

    def one(leaf: Any) -> Any:
        t = as_tensor(leaf)
        return collective_p.bind(t, op=op, axis_name=axis_name, axis_size=size,
                                 axis=axis % (t.ndim + (0 if tiled else 1)), tiled=tiled)
    return tree_util.tree_map(one, x)


def psum(x: Any, axis_name: Any) -> Any:
    """The sum of `x` (a pytree) over the named vmap axis (or a tuple of names: over all)."""
    return _bind(x, "sum", axis_name, "psum")


def pmean(x: Any, axis_name: Any) -> Any:
    """The mean of `x` (a pytree) over the named vmap axis."""
    return _bind(x, "mean", axis_name, "pmean")


def pmax(x: Any, axis_name: Any) -> Any:
    """The maximum of `x` (a pytree) over the named vmap axis."""
    return _bind(x, "max", axis_name, "pmax")


def pmin(x: Any, axis_name: Any) -> Any:
    """The minimum of `x` (a pytree) over the named vmap axis."""
    return _bind(x, "min", axis_name, "pmin")


def all_gather(x: Any, axis_name: Any, *, axis: int = 0, tiled: bool = False) -> Any:
    """Every member's `x` stacked along a new axis `axis` (concatenated when `tiled`)."""
    return _bind(x, "gather", axis_name, "all_gather", axis, tiled)


def axis_index(axis_name: Any) -> Tensor:
    """This member's position (int32) along the named vmap axis (along several, a tuple of
    names, their row-major combined position)."""
    from fgrad.core.dtypes import dtypes
    from fgrad.transforms.batching import BatchTracer
    if isinstance(axis_name, (tuple, list)):
        index: Any = 0
        for name in axis_name:
            index = index * _named_trace(name, "axis_index").axis_size + axis_index(name)
        return index
    trace = _named_trace(axis_name, "axis_index")
    with set_current_trace(trace.parent):
        idx = Tensor.arange(trace.axis_size, dtype=dtypes.int32)
    return BatchTracer(trace, idx, 0)


# ---------------------------------------------------------------------------- rules

def _abstract(aval: ShapedArray, *, op: str, axis_name: Any, axis_size: int, axis: int,
              tiled: bool) -> ShapedArray:
    if op != "gather":
        return aval
    shape = list(aval.shape)
    if tiled:
        shape[axis] *= axis_size
    else:
        shape.insert(axis, axis_size)
    return ShapedArray(tuple(shape), aval.dtype)


def _impl(x: Any, *, axis_name: Any, **_: Any) -> Any:
    raise NameError(f"collective over axis {axis_name!r} used outside a vmap with "
                    f"axis_name={axis_name!r}")


def _gather_at(x: Tensor, d: int | None, size: int, axis: int, tiled: bool) -> Tensor:
    """The members' values (batch dim `d`) as the gathered result (unbatched)."""
    x = move_bdim(x, d, axis, size)
    if not tiled:
        return x
    shape = list(x.shape)
    merged = shape[axis] * shape[axis + 1]
    return x.reshape(tuple(shape[:axis]) + (merged,) + tuple(shape[axis + 2:]))


def named_axis_rule(trace: Any, vals: list[Any], dims: list[Any], params: dict) -> Any:
    """Applied by the BatchTrace that owns `axis_name`: reduce over its batch dimension."""
    (x,), (d,) = vals, dims
    op, size = params["op"], trace.axis_size
    with set_current_trace(trace.parent):
        if op == "gather":
            return _gather_at(x, d, size, params["axis"], params["tiled"])
        if d is None:
            return x * size if op == "sum" else x
        return getattr(x, _REDUCE[op])(d)


def _batch(args: list[Any], dims: list[Any], **params: Any) -> tuple[Any, int]:
    (x,), (d,) = args, dims
    if params["op"] != "gather":
        return collective_p.bind(x, **params), d
    x = move_bdim(x, d, 0, x.shape[d])
    out = collective_p.bind(x, **{**params, "axis": params["axis"] + 1})
    return out, 0


def _jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    out = collective_p.bind(x, **params)
    if t is None:
        return out, None
    if params["op"] in ("sum", "mean", "gather"):
        return out, collective_p.bind(t, **params)
    hit = (x == out).cast(t.dtype)
    total = {**params, "op": "sum"}
    return out, collective_p.bind(t * hit, **total) / collective_p.bind(hit, **total)


def _transpose(ct: Any, x: Any, **params: Any) -> list[Any]:
    op = params["op"]
    if op in ("sum", "mean"):
        return [collective_p.bind(ct, **params)]
    if op != "gather":
        raise TypeError(f"collective {op} is not linear")
    from fgrad.lax.dynamic import dynamic_slice_in_dim
    summed = collective_p.bind(ct, **{**params, "op": "sum"})
    n = x.aval.shape[params["axis"]] if params["tiled"] else 1
    mine = dynamic_slice_in_dim(summed, axis_index(params["axis_name"]) * n, n,
                                params["axis"])
    return [mine if params["tiled"] else mine.squeeze(params["axis"])]


collective_p.abstract_eval = _abstract
collective_p.impl = _impl
collective_p.jvp = _jvp
collective_p.transpose = _transpose
collective_p.batch = _batch
collective_p.named_axis_rule = named_axis_rule  # type: ignore[attr-defined]
for _backend in ("llvm", "opencl"):
    collective_p.lowerings[_backend] = (
        "never lowered: the vmap that names the axis rewrites it into a reduction or a "
        "broadcast before staging")
